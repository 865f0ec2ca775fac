/* SentencePiece-style BPE over scored pieces ("llama" vocabularies, llama2.c tokenizers): spaces
 * become U+2581, the text is split into UTF-8 characters, and the adjacent pair whose
 * concatenation is a piece with the highest score is merged (ties: leftmost) until no pair
 * forms a piece. Characters left without a piece fall back to <0xNN> byte tokens. A priority
 * queue of candidate pairs keeps this O(n log n). */
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/unicode.h"

typedef struct spm_sym {
    size_t start;
    uint32_t len; /* 0 once merged into its left neighbour */
    int32_t prev, next;
} spm_sym;

qp_status qp_tok_spm_init(qp_tokenizer *t, qp_err *e) {
    (void)e;
    static const char hex[] = "0123456789ABCDEF";
    t->add_space_prefix = !t->v->no_space_prefix; /* GGUF tokenizer.ggml.add_space_prefix, default true */
    for (int b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = qp_tok_lookup(t, buf, 6);
        if (id < 0) { /* fall back to the byte itself as a piece */
            char c = (char)b;
            id = qp_tok_lookup(t, &c, 1);
        }
        t->byte_ids[b] = id;
    }
    return QP_OK;
}

/* Queues the pair (l, r) when their concatenation is a piece. */
static bool try_pair(const qp_tokenizer *t, const char *s, const spm_sym *sym, int32_t l,
                     int32_t r, qp_merge_heap *h) {
    if (l < 0 || r < 0) return true;
    size_t n = (size_t)sym[l].len + sym[r].len;
    int32_t id = qp_tok_lookup(t, s + sym[l].start, n);
    if (id < 0) return true;
    double score = t->v->scores ? (double)t->v->scores[id] : 0.0;
    qp_merge_cand c = {-score, l, r, (uint32_t)n};
    return qp_heap_push(h, c);
}

qp_status qp_tok_spm_encode(const qp_tokenizer *t, const char *text, size_t len, bool prefix_space,
                            qp_ids *out, qp_err *e) {
    if (len > (size_t)INT32_MAX / 4)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: text fragment of %zu bytes is over the limit "
                                        "(%d)", len, INT32_MAX / 4);
    /* Escape: optional dummy prefix, ' ' -> U+2581. */
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    size_t n = len + spaces * 2 + (prefix_space ? 3 : 0); /* ' ' (1 byte) -> U+2581 (3 bytes) */
    char *s = qp_malloc(n ? n : 1);
    spm_sym *sym = qp_malloc((n ? n : 1) * sizeof *sym);
    qp_merge_heap h = {0};
    qp_status st = QP_OK;
    if (!s || !sym) {
        st = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
        goto done;
    }
    size_t k = 0;
    if (prefix_space) {
        memcpy(s, "\xE2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            s[k++] = text[i];
        }
    }
    /* One symbol per UTF-8 character. */
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = qp_utf8_lead_len((uint8_t)s[i]);
        if (cl > n - i) cl = n - i;
        sym[ns].start = i;
        sym[ns].len = (uint32_t)cl;
        sym[ns].prev = ns - 1;
        sym[ns].next = i + cl < n ? ns + 1 : -1;
        ns++;
        i += cl;
    }
    bool ok = true;
    for (int32_t i = 1; i < ns && ok; i++) ok = try_pair(t, s, sym, i - 1, i, &h);
    qp_merge_cand c;
    while (ok && qp_heap_pop(&h, &c)) {
        spm_sym *l = &sym[c.left], *r = &sym[c.right];
        if (l->len == 0 || r->len == 0 || (size_t)l->len + r->len != c.size) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        ok = try_pair(t, s, sym, l->prev, c.left, &h) && try_pair(t, s, sym, c.left, l->next, &h);
    }
    for (int32_t i = ns ? 0 : -1; ok && i >= 0; i = sym[i].next) {
        int32_t id = qp_tok_lookup(t, s + sym[i].start, sym[i].len);
        if (id >= 0) {
            ok = qp_ids_push(out, id);
            continue;
        }
        /* No piece: byte fallback (<0xNN>, else the byte as a piece); unk when neither exists. */
        bool all_bytes = true;
        for (uint32_t j = 0; j < sym[i].len; j++)
            if (t->byte_ids[(uint8_t)s[sym[i].start + j]] < 0) all_bytes = false;
        if (all_bytes) {
            for (uint32_t j = 0; j < sym[i].len && ok; j++)
                ok = qp_ids_push(out, t->byte_ids[(uint8_t)s[sym[i].start + j]]);
        } else if (t->v->unk_id >= 0 && t->v->unk_id < t->n_tokens) {
            ok = qp_ids_push(out, t->v->unk_id);
        }
    }
    if (!ok) st = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
done:
    qp_heap_free(&h);
    qp_free(sym);
    qp_free(s);
    return st;
}
