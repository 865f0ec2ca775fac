/* Byte-level BPE ("gpt2" vocabularies): the pre-tokenizer (tokenizer_pre.c) splits the text into
 * words, every byte of a word becomes its GPT-2 bytes_to_unicode character (or, for the raw UTF-8
 * pre-tokenizers, every UTF-8 character stays itself), and adjacent symbols are merged by merge
 * rank (lowest first, ties leftmost) with a priority queue. */
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/unicode.h"

/* ---- setup ---------------------------------------------------------------------------------- */

static uint64_t pair_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1; }

static size_t pair_slot(uint64_t key, size_t mask) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 32)) & mask;
}

static bool pair_get(const qp_pair_index *p, int32_t l, int32_t r, int32_t *rank, int32_t *merged) {
    if (!p->keys || l < 0 || r < 0) return false;
    uint64_t key = pair_key(l, r);
    for (size_t i = pair_slot(key, p->mask);; i = (i + 1) & p->mask) {
        if (p->keys[i] == 0) return false;
        if (p->keys[i] == key) {
            *rank = p->ranks[i];
            *merged = p->merged[i];
            return true;
        }
    }
}

void qp_tok_bpe_free(qp_tokenizer *t) {
    qp_free(t->pairs.keys);
    qp_free(t->pairs.ranks);
    qp_free(t->pairs.merged);
    memset(&t->pairs, 0, sizeof t->pairs);
    qp_tok_pre_free(t->pre);
    t->pre = NULL;
}

qp_status qp_tok_bpe_init(qp_tokenizer *t, qp_err *e) {
    const qp_vocab *v = t->v;
    qp_status s = qp_tok_pre_new(v->pre, sizeof v->pre, &t->pre, e);
    if (s != QP_OK) return s;
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) { /* the raw UTF-8 byte fallback */
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        t->byte_ids[b] = qp_tok_lookup(t, buf, 6);
    }
    /* GPT-2 bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
     * take U+0100.. in byte order. */
    uint32_t next = 256;
    for (int i = 0; i < 324; i++) t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        t->byte_cp[b] = self ? (uint32_t)b : next++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
        char u[4];
        size_t n = qp_utf8_encode(t->byte_cp[b], u);
        t->byte_char_id[b] = qp_tok_lookup(t, u, n);
    }
    if (v->n_merges == 0) return QP_OK;
    if (v->n_merges >= INT32_MAX / 4)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: %lld merges is over the limit",
                       (long long)v->n_merges);
    size_t cap = 16;
    while (cap < (size_t)v->n_merges * 2) cap *= 2;
    qp_pair_index *p = &t->pairs;
    p->keys = qp_calloc(cap, sizeof *p->keys);
    p->ranks = qp_calloc(cap, sizeof *p->ranks);
    p->merged = qp_calloc(cap, sizeof *p->merged);
    char *buf = NULL;
    size_t buf_cap = 0;
    if (!p->keys || !p->ranks || !p->merged)
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (merges)");
    p->mask = cap - 1;
    for (int64_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r];
        if (!m) continue;
        size_t ml = strlen(m);
        const char *sp = ml > 1 ? memchr(m + 1, ' ', ml - 1) : NULL;
        if (!sp) continue; /* not "left right": ignored, as llama.cpp would fail to use it */
        size_t ll = (size_t)(sp - m), rl = ml - ll - 1;
        int32_t l = qp_tok_lookup(t, m, ll), rr = qp_tok_lookup(t, sp + 1, rl);
        if (l < 0 || rr < 0) continue; /* a side that is no token can never be a symbol */
        if (ll + rl > buf_cap) {
            char *nb = qp_realloc(buf, ll + rl);
            if (!nb) {
                qp_free(buf);
                return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (merges)");
            }
            buf = nb;
            buf_cap = ll + rl;
        }
        memcpy(buf, m, ll);
        memcpy(buf + ll, sp + 1, rl);
        uint64_t key = pair_key(l, rr);
        size_t i = pair_slot(key, p->mask);
        while (p->keys[i] != 0 && p->keys[i] != key) i = (i + 1) & p->mask;
        if (p->keys[i] == key) continue; /* the first (lowest) rank wins */
        p->keys[i] = key;
        p->ranks[i] = (int32_t)r;
        p->merged[i] = qp_tok_lookup(t, buf, ll + rl);
    }
    qp_free(buf);
    return QP_OK;
}

/* ---- merging -------------------------------------------------------------------------------- */

typedef struct bpe_sym {
    int32_t id; /* token of this symbol, -1 when none */
    uint32_t start, len;
    int32_t prev, next;
} bpe_sym;

typedef struct bpe_work {
    bpe_sym *sym;
    size_t cap;
    qp_merge_heap heap;
    char *mapped;
    size_t mapped_cap;
} bpe_work;

static bool try_pair(const qp_tokenizer *t, const bpe_sym *sym, int32_t l, int32_t r,
                     qp_merge_heap *h) {
    if (l < 0 || r < 0) return true;
    int32_t rank, merged;
    if (!pair_get(&t->pairs, sym[l].id, sym[r].id, &rank, &merged)) return true;
    qp_merge_cand c = {(double)rank, l, r, sym[l].len + sym[r].len};
    return qp_heap_push(h, c);
}

/* The word's first symbols into sym (room for n): one per byte, as its GPT-2 character's token,
 * or, raw, one per UTF-8 character, as the token of that text (-1 when none). Returns the count. */
static size_t bpe_symbols(const qp_tokenizer *t, bool raw, const uint8_t *w, size_t n, bpe_sym *sym) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t len = raw ? qp_utf8_lead_len(w[i]) : 1;
        if (len > n - i) len = n - i;
        sym[k].id = raw ? qp_tok_lookup(t, (const char *)w + i, len) : t->byte_char_id[w[i]];
        sym[k].start = (uint32_t)i;
        sym[k].len = (uint32_t)len;
        sym[k].prev = (int32_t)k - 1;
        sym[k].next = (int32_t)k + 1;
        i += len;
    }
    if (k) sym[k - 1].next = -1;
    return k;
}

static bool all_newlines(const uint8_t *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (w[i] != '\n') return false;
    return true;
}

/* Encodes one pre-tokenized word (raw bytes). False on allocation failure. */
static bool bpe_word(const qp_tokenizer *t, const uint8_t *w, size_t n, bpe_work *wk, qp_ids *out) {
    if (n == 0) return true;
    unsigned flags = qp_tok_pre_flags(t->pre);
    bool raw = flags & QP_PRE_RAW_UTF8;
    if ((flags & QP_PRE_NEWLINES_WHOLE) && all_newlines(w, n)) {
        int32_t id = qp_tok_lookup(t, (const char *)w, n);
        if (id >= 0) return qp_ids_push(out, id);
    }
    if (flags & QP_PRE_IGNORE_MERGES) { /* a word that is a token is taken whole */
        size_t need = n * 2;
        if (need > wk->mapped_cap) {
            char *m = qp_realloc(wk->mapped, need);
            if (!m) return false;
            wk->mapped = m;
            wk->mapped_cap = need;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) k += qp_utf8_encode(t->byte_cp[w[i]], wk->mapped + k);
        int32_t id = qp_tok_lookup(t, wk->mapped, k);
        if (id >= 0) return qp_ids_push(out, id);
    }
    if (n > wk->cap) {
        bpe_sym *s = qp_realloc(wk->sym, n * sizeof *s);
        if (!s) return false;
        wk->sym = s;
        wk->cap = n;
    }
    bpe_sym *sym = wk->sym;
    size_t ns = bpe_symbols(t, raw, w, n, sym);
    wk->heap.n = 0;
    bool ok = true;
    for (size_t i = 1; i < ns && ok; i++) ok = try_pair(t, sym, (int32_t)i - 1, (int32_t)i, &wk->heap);
    qp_merge_cand c;
    while (ok && qp_heap_pop(&wk->heap, &c)) {
        bpe_sym *l = &sym[c.left], *r = &sym[c.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != c.size) continue; /* stale */
        int32_t rank = 0, merged = -1;
        if (!pair_get(&t->pairs, l->id, r->id, &rank, &merged)) continue; /* cannot happen */
        l->id = merged;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        ok = try_pair(t, sym, l->prev, c.left, &wk->heap) &&
             try_pair(t, sym, c.left, l->next, &wk->heap);
    }
    for (int32_t i = 0; ok && i >= 0; i = sym[i].next) {
        if (sym[i].id >= 0) {
            ok = qp_ids_push(out, sym[i].id);
            continue;
        }
        /* A merge whose result is no token, or a byte without a character token: one token per
         * byte where possible, else unk, else nothing (llama.cpp drops such bytes too). Raw UTF-8
         * words fall back to "<0xNN>" tokens only, as llama.cpp. */
        for (uint32_t j = 0; j < sym[i].len && ok; j++) {
            uint8_t b = w[sym[i].start + j];
            int32_t id = raw ? t->byte_ids[b] : t->byte_char_id[b];
            if (id < 0 && !raw) id = t->v->unk_id < t->n_tokens ? t->v->unk_id : -1;
            if (id >= 0) ok = qp_ids_push(out, id);
        }
    }
    return ok;
}

/* ---- fragment encoder ----------------------------------------------------------------------- */

/* A copy of text with every ' ' as U+2581 (*len updated); NULL when out of memory. */
static char *escape_spaces(const char *text, size_t *len) {
    size_t n = 0;
    for (size_t i = 0; i < *len; i++) n += text[i] == ' ' ? 3 : 1;
    char *o = qp_malloc(n ? n : 1);
    if (!o) return NULL;
    for (size_t i = 0, k = 0; i < *len; i++) {
        if (text[i] != ' ') {
            o[k++] = text[i];
            continue;
        }
        memcpy(o + k, "\xE2\x96\x81", 3);
        k += 3;
    }
    *len = n;
    return o;
}

static qp_status bpe_encode_text(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out, qp_err *e);

qp_status qp_tok_bpe_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                            qp_err *e) {
    if (!(qp_tok_pre_flags(t->pre) & QP_PRE_ESCAPE_SPACES) || len >= (size_t)UINT32_MAX / 2)
        return bpe_encode_text(t, text, len, out, e);
    char *esc = escape_spaces(text, &len);
    if (!esc) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
    qp_status s = bpe_encode_text(t, esc, len, out, e);
    qp_free(esc);
    return s;
}

/* Encodes well-formed UTF-8 text: pre-tokenizer, then each word. */
static qp_status bpe_encode_text(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out, qp_err *e) {
    if (len >= (size_t)UINT32_MAX / 2)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: text fragment of %zu bytes is over the limit",
                       len);
    size_t cap = len ? len : 1;
    uint32_t *cp = qp_malloc(cap * sizeof *cp);
    uint32_t *off = qp_malloc((cap + 1) * sizeof *off);
    uint8_t *fl = qp_malloc(cap);
    bpe_work wk = {0};
    bool ok = cp && off && fl;
    /* The text is well-formed UTF-8 (qp_tokenizer_encode sanitised it). */
    size_t n = 0;
    for (size_t i = 0; ok && i < len;) {
        uint32_t c;
        size_t bad = 1, k = (uint8_t)text[i] < 0x80 ? (c = (uint8_t)text[i], 1)
                                                    : qp_utf8_decode((const uint8_t *)text + i,
                                                                     len - i, &c, &bad);
        if (!k) { /* unreachable after sanitising; keep the byte as one replacement char */
            c = QP_UNICODE_REPLACEMENT;
            k = bad;
        }
        cp[n] = c;
        off[n] = (uint32_t)i;
        fl[n] = (uint8_t)qp_unicode_flags(c);
        n++;
        i += k;
    }
    if (ok) off[n] = (uint32_t)len;
    qp_tok_piece *pa = NULL;
    size_t na = 0;
    qp_status s = ok ? qp_tok_pre_split(t->pre, cp, fl, n, &pa, &na, e) : QP_OK;
    for (size_t p = 0; ok && s == QP_OK && p < na; p++) {
        size_t b0 = off[pa[p].start], b1 = off[pa[p].end];
        ok = bpe_word(t, (const uint8_t *)text + b0, b1 - b0, &wk, out);
    }
    qp_free(cp);
    qp_free(off);
    qp_free(fl);
    qp_free(pa);
    qp_free(wk.sym);
    qp_free(wk.mapped);
    qp_heap_free(&wk.heap);
    if (s != QP_OK) return s;
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
}
