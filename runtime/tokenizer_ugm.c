/* SentencePiece unigram ("t5" vocabularies: T5, mT5, XLM-R, ...), as llama.cpp's
 * llm_tokenizer_ugm: the text is normalised (precompiled_charsmap replacements, space handling),
 * then the best segmentation by the sum of piece scores is found by Viterbi over the bytes, one
 * code point step at a time, with an unknown piece (min score - 10) for a code point no piece
 * starts with. See tokenizer.md "SentencePiece unigram". */
#include <float.h>
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/unicode.h"

/* A byte trie in breadth-first order: the children of a node are consecutive, sorted by label. */
typedef struct ugm_trie {
    uint32_t *first;  /* index of the first child */
    uint16_t *n_kids; /* number of children (at most 256) */
    uint8_t *label;   /* byte on the edge into the node */
    int32_t *value;   /* token id ending here, or -1 */
    size_t n;
} ugm_trie;

struct qp_tok_ugm {
    ugm_trie pieces;       /* NORMAL, USER_DEFINED and UNUSED tokens: what Viterbi may use */
    ugm_trie user_defined; /* USER_DEFINED tokens: text that skips the charsmap */
    float unk_score;       /* lowest NORMAL score - 10, as llama.cpp (float arithmetic) */
    /* precompiled_charsmap: u32 blob size, then XOR-compressed double-array units, then
     * NUL-terminated replacement strings */
    const uint8_t *units;
    size_t n_units;
    const char *repl;
    size_t repl_len;
};

static int32_t trie_child(const ugm_trie *tr, int32_t node, uint8_t c) {
    size_t lo = tr->first[node], hi = lo + tr->n_kids[node];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tr->label[mid] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < (size_t)tr->first[node] + tr->n_kids[node] && tr->label[lo] == c ? (int32_t)lo : -1;
}

static int cmp_text(const qp_vocab *v, int32_t x, int32_t y) {
    size_t lx, ly;
    const char *sx = qp_tok_text(v, x, &lx), *sy = qp_tok_text(v, y, &ly);
    int c = memcmp(sx, sy, lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : (x > y);
}

/* Number of distinct prefixes (trie nodes) of the sorted texts of ids[0..n). */
static size_t count_nodes(const qp_vocab *v, const int32_t *ids, size_t n) {
    size_t nodes = 1, pl = 0;
    const char *prev = "";
    for (size_t i = 0; i < n; i++) {
        size_t l, k = 0;
        const char *s = qp_tok_text(v, ids[i], &l);
        while (k < l && k < pl && s[k] == prev[k]) k++;
        nodes += l - k;
        prev = s;
        pl = l;
    }
    return nodes;
}

/* Builds the trie of ids[0..n) (sorted by text, then id: a later id with the same text wins, as
 * llama.cpp's trie insertion). Node k covers the texts ids[lo[k]..hi[k]) sharing k's prefix. */
static bool trie_build(const qp_vocab *v, const int32_t *ids, size_t n, ugm_trie *tr) {
    size_t cap = count_nodes(v, ids, n);
    tr->first = qp_calloc(cap, sizeof *tr->first);
    tr->n_kids = qp_calloc(cap, sizeof *tr->n_kids);
    tr->label = qp_calloc(cap, sizeof *tr->label);
    tr->value = qp_malloc(cap * sizeof *tr->value);
    uint32_t *lo = qp_malloc(cap * sizeof *lo), *hi = qp_malloc(cap * sizeof *hi);
    bool ok = tr->first && tr->n_kids && tr->label && tr->value && lo && hi;
    size_t used = 1, depth_end = 1, depth = 0;
    if (ok) {
        lo[0] = 0;
        hi[0] = (uint32_t)n;
    }
    for (size_t k = 0; ok && k < used; k++) {
        if (k == depth_end) { /* breadth-first: the nodes of the next depth start here */
            depth++;
            depth_end = used;
        }
        size_t i = lo[k], len;
        tr->value[k] = -1;
        while (i < hi[k] && (qp_tok_text(v, ids[i], &len), len == depth)) tr->value[k] = ids[i++];
        tr->first[k] = (uint32_t)used;
        while (i < hi[k]) {
            uint8_t c = (uint8_t)qp_tok_text(v, ids[i], &len)[depth];
            size_t j = i + 1;
            while (j < hi[k] && (uint8_t)qp_tok_text(v, ids[j], &len)[depth] == c) j++;
            tr->label[used] = c;
            lo[used] = (uint32_t)i;
            hi[used] = (uint32_t)j;
            used++;
            tr->n_kids[k]++;
            i = j;
        }
    }
    tr->n = used;
    qp_free(lo);
    qp_free(hi);
    return ok;
}

static void trie_free(ugm_trie *tr) {
    qp_free(tr->first);
    qp_free(tr->n_kids);
    qp_free(tr->label);
    qp_free(tr->value);
}

static bool piece_type(int32_t ty) {
    return ty == QP_TOKTYPE_NORMAL || ty == QP_TOKTYPE_USER_DEFINED || ty == QP_TOKTYPE_UNUSED;
}

/* The trie of the tokens whose type passes keep (empty texts left out). */
static bool trie_of(const qp_tokenizer *t, bool (*keep)(int32_t), ugm_trie *tr) {
    int32_t *ids = qp_malloc((size_t)t->n_tokens * sizeof *ids);
    if (!ids) return false;
    size_t n = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        qp_tok_text(t->v, id, &len);
        if (len > 0 && keep(t->types[id])) ids[n++] = id;
    }
    bool ok = qp_tok_sort_ids(t->v, ids, n, cmp_text) && trie_build(t->v, ids, n, tr);
    qp_free(ids);
    return ok;
}

static bool user_defined_type(int32_t ty) { return ty == QP_TOKTYPE_USER_DEFINED; }

static qp_status charsmap_init(qp_tok_ugm *u, const qp_vocab *v, qp_err *e) {
    if (!v->charsmap || v->charsmap_len == 0) return QP_OK;
    if (v->charsmap_len < 4)
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: precompiled_charsmap of %zu bytes has no size "
                                          "header", v->charsmap_len);
    uint32_t blob = qp_load_u32le(v->charsmap);
    if ((uint64_t)blob + 4 >= v->charsmap_len)
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: precompiled_charsmap claims %u bytes of trie "
                       "units but has %zu bytes in all", blob, v->charsmap_len);
    u->units = v->charsmap + 4;
    u->n_units = blob / 4;
    u->repl = (const char *)v->charsmap + 4 + blob;
    u->repl_len = v->charsmap_len - 4 - blob;
    return QP_OK;
}

qp_status qp_tok_ugm_init(qp_tokenizer *t, qp_err *e) {
    qp_tok_ugm *u = qp_calloc(1, sizeof *u);
    if (!u) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (unigram)");
    t->ugm = u;
    t->add_space_prefix = !t->v->no_space_prefix;
    float min_score = FLT_MAX;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        float sc = t->v->scores ? t->v->scores[id] : 0.0f;
        if (t->types[id] == QP_TOKTYPE_NORMAL && sc < min_score) min_score = sc;
    }
    u->unk_score = min_score - 10.0f;
    if (!trie_of(t, piece_type, &u->pieces) || !trie_of(t, user_defined_type, &u->user_defined))
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (unigram trie)");
    return charsmap_init(u, t->v, e);
}

void qp_tok_ugm_free(qp_tokenizer *t) {
    if (!t->ugm) return;
    trie_free(&t->ugm->pieces);
    trie_free(&t->ugm->user_defined);
    qp_free(t->ugm);
    t->ugm = NULL;
}

/* ---- normalisation ---------------------------------------------------------------------- */

typedef struct ugm_text {
    char *p;
    size_t n, cap;
} ugm_text;

static bool text_put(ugm_text *b, const char *s, size_t n) {
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (cap > SIZE_MAX / 2) return false;
            cap *= 2;
        }
        char *p = qp_realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return true;
}

static qp_status unit_at(const qp_tok_ugm *u, size_t i, uint32_t *out, qp_err *e) {
    if (i >= u->n_units)
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: precompiled_charsmap trie index %zu is outside "
                                          "its %zu units", i, u->n_units);
    *out = qp_load_u32le(u->units + 4 * i);
    return QP_OK;
}

/* Darts-clone unit fields: offset (bits 10..30, shifted by 8 more when bit 9 is set), has_leaf
 * (bit 8), label (bits 0..7, with bit 31 set in value units so they never match a byte), value. */
static uint32_t unit_offset(uint32_t x) { return (x >> 10) << ((x & (1u << 9)) >> 6); }

/* Longest charsmap key that prefixes text[i..len): its length (0: none) and replacement offset. */
static qp_status charsmap_match(const qp_tok_ugm *u, const char *text, size_t len, size_t i,
                                size_t *match_len, size_t *repl_at, qp_err *e) {
    *match_len = 0;
    if (u->n_units == 0) return QP_OK;
    uint32_t x;
    qp_status s = unit_at(u, 0, &x, e);
    size_t node = unit_offset(x);
    for (size_t k = i; s == QP_OK && k < len && text[k] != '\0'; k++) {
        uint8_t c = (uint8_t)text[k];
        node ^= c;
        if ((s = unit_at(u, node, &x, e)) != QP_OK || (x & (0x80000000u | 0xFFu)) != c) break;
        bool leaf = (x >> 8) & 1;
        node ^= unit_offset(x);
        if (leaf) {
            if ((s = unit_at(u, node, &x, e)) != QP_OK) break;
            *match_len = k - i + 1;
            *repl_at = x & 0x7FFFFFFFu;
        }
    }
    return s;
}

/* Length of the deepest path of the user-defined trie that text[i..len) follows (llama.cpp's
 * naive_trie::get_longest_prefix: a path, not necessarily a whole token). */
static size_t user_defined_path(const ugm_trie *tr, const char *text, size_t len, size_t i) {
    int32_t node = 0;
    size_t k = i;
    while (k < len && tr->n && (node = trie_child(tr, node, (uint8_t)text[k])) >= 0) k++;
    return k - i;
}

/* One normalisation step at text[i]: the replacement (*out, *out_len) and the bytes consumed. */
static qp_status normalize_step(const qp_tok_ugm *u, const char *text, size_t len, size_t i,
                                const char **out, size_t *out_len, size_t *used, qp_err *e) {
    size_t n = user_defined_path(&u->user_defined, text, len, i);
    if (n > 0) {
        *out = text + i;
        *out_len = *used = n;
        return QP_OK;
    }
    size_t repl_at = 0;
    qp_status s = charsmap_match(u, text, len, i, &n, &repl_at, e);
    if (s != QP_OK) return s;
    if (n > 0) {
        if (repl_at >= u->repl_len)
            return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: precompiled_charsmap replacement offset %zu "
                                              "is outside its %zu bytes", repl_at, u->repl_len);
        const char *r = u->repl + repl_at;
        const char *nul = memchr(r, '\0', u->repl_len - repl_at);
        if (!nul)
            return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: precompiled_charsmap replacement at %zu is "
                                              "not NUL-terminated", repl_at);
        *out = r;
        *out_len = (size_t)(nul - r);
        *used = n;
        return QP_OK;
    }
    /* the text is well-formed UTF-8 (qp_tokenizer_encode sanitised it): one code point */
    n = qp_utf8_lead_len((uint8_t)text[i]);
    *out = text + i;
    *out_len = *used = n < len - i ? n : len - i;
    return QP_OK;
}

/* llama.cpp's normalisation: each ' ' of the replaced text becomes U+2581; with
 * remove_extra_spaces a space run becomes one U+2581 before the next word (none at the ends);
 * the dummy prefix adds one before the first word. */
static qp_status normalize(const qp_tokenizer *t, const char *text, size_t len, ugm_text *out,
                           qp_err *e) {
    static const char k_space[] = "\xE2\x96\x81";
    bool merge = t->v->remove_extra_spaces, prepend = t->add_space_prefix, prepended = false;
    bool in_word = false;
    for (size_t i = 0; i < len;) {
        const char *r = NULL;
        size_t rn = 0, used = 1;
        qp_status s = normalize_step(t->ugm, text, len, i, &r, &rn, &used, e);
        if (s != QP_OK) return s;
        for (size_t k = 0; k < rn; k++) {
            bool ok = true;
            if (r[k] != ' ') {
                if (!in_word && ((prepend && !prepended) || merge)) {
                    ok = text_put(out, k_space, 3);
                    prepended = true;
                }
                in_word = true;
                ok = ok && text_put(out, r + k, 1);
            } else {
                in_word = false;
                if (!merge) ok = text_put(out, k_space, 3);
            }
            if (!ok) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (normalised text)");
        }
        i += used;
    }
    return QP_OK;
}

/* ---- Viterbi -------------------------------------------------------------------------------- */

typedef struct ugm_best {
    double score; /* best sum of scores of a segmentation of the first k bytes */
    size_t from;  /* where its last piece starts */
    int32_t id;   /* its last piece */
} ugm_best;

/* Relaxes every piece starting at byte i of s[0..n) (i is a code point start). */
static void relax_from(const qp_tokenizer *t, const char *s, size_t n, size_t i, ugm_best *best) {
    const qp_tok_ugm *u = t->ugm;
    size_t cp_len = qp_utf8_lead_len((uint8_t)s[i]);
    if (cp_len > n - i) cp_len = n - i;
    bool whole_cp = false;
    double base = best[i].score;
    int32_t node = 0;
    for (size_t k = i; k < n && (node = trie_child(&u->pieces, node, (uint8_t)s[k])) >= 0; k++) {
        int32_t id = u->pieces.value[node];
        if (id < 0) continue;
        if (k + 1 - i == cp_len) whole_cp = true;
        /* user-defined pieces score 0 (llama.cpp), the others their log probability */
        double sc = t->types[id] == QP_TOKTYPE_USER_DEFINED ? 0.0 : t->v->scores ? (double)t->v->scores[id] : 0.0;
        if (base + sc > best[k + 1].score) best[k + 1] = (ugm_best){base + sc, i, id};
    }
    if (!whole_cp && base + (double)u->unk_score > best[i + cp_len].score)
        best[i + cp_len] = (ugm_best){base + (double)u->unk_score, i, t->v->unk_id};
}

/* Appends the best segmentation's ids (runs of unknown pieces become one unk; without an unk id
 * unknown pieces are dropped). */
static bool emit_best(const qp_tokenizer *t, const ugm_best *best, size_t n, qp_ids *out) {
    size_t mark = out->n;
    int32_t unk = t->v->unk_id;
    bool prev_unk = false;
    for (size_t k = n; k > 0; k = best[k].from) {
        bool is_unk = best[k].id == unk;
        if (!(prev_unk && is_unk) && best[k].id >= 0 && !qp_ids_push(out, best[k].id)) return false;
        prev_unk = is_unk;
    }
    for (size_t a = mark, b = out->n; a + 1 < b; a++, b--) {
        int32_t x = out->p[a];
        out->p[a] = out->p[b - 1];
        out->p[b - 1] = x;
    }
    return true;
}

qp_status qp_tok_ugm_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                            qp_err *e) {
    if (len > (size_t)INT32_MAX / 4)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: text fragment of %zu bytes is over the limit "
                                        "(%d)", len, INT32_MAX / 4);
    ugm_text s = {0};
    qp_status st = normalize(t, text, len, &s, e);
    size_t n = s.n, bytes;
    ugm_best *best = NULL;
    if (st == QP_OK && n > 0) {
        best = qp_size_mul(n + 1, sizeof *best, &bytes) ? qp_malloc(bytes) : NULL;
        if (!best) st = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (%zu bytes of text)", n);
    }
    if (st == QP_OK && n > 0) {
        best[0] = (ugm_best){0.0, 0, t->v->unk_id};
        for (size_t k = 1; k <= n; k++) best[k] = (ugm_best){-DBL_MAX, 0, t->v->unk_id};
        for (size_t i = 0; i < n;) {
            relax_from(t, s.p, n, i, best);
            size_t cp_len = qp_utf8_lead_len((uint8_t)s.p[i]);
            i += cp_len < n - i ? cp_len : n - i;
        }
        if (!emit_best(t, best, n, out)) st = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (ids)");
    }
    qp_free(best);
    qp_free(s.p);
    return st;
}
