/* Tokenizer common code: vocabulary index, special-token splitting, UTF-8 sanitising, dispatch
 * to the SentencePiece / byte-level BPE / WordPiece encoders, and decoding. See tokenizer.md. */
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/unicode.h"
#include "runtime/unicode_norm.h"

/* ---- small containers ------------------------------------------------------------------- */

bool qp_ids_push(qp_ids *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64, bytes;
        if (!qp_size_mul(cap, sizeof *o->p, &bytes)) return false;
        int32_t *p = qp_realloc(o->p, bytes);
        if (!p) return false;
        o->p = p;
        o->cap = cap;
    }
    o->p[o->n++] = id;
    return true;
}

static bool cand_less(const qp_merge_cand *a, const qp_merge_cand *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

bool qp_heap_push(qp_merge_heap *h, qp_merge_cand c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64, bytes;
        if (!qp_size_mul(cap, sizeof *h->a, &bytes)) return false;
        qp_merge_cand *a = qp_realloc(h->a, bytes);
        if (!a) return false;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_less(&c, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        i = parent;
    }
    h->a[i] = c;
    return true;
}

bool qp_heap_pop(qp_merge_heap *h, qp_merge_cand *out) {
    if (h->n == 0) return false;
    *out = h->a[0];
    qp_merge_cand last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const qp_merge_cand *best = &last;
        if (l < h->n && cand_less(&h->a[l], best)) { m = l; best = &h->a[l]; }
        if (r < h->n && cand_less(&h->a[r], best)) { m = r; }
        if (m == i) break;
        h->a[i] = h->a[m];
        i = m;
    }
    if (h->n > 0) h->a[i] = last;
    return true;
}

void qp_heap_free(qp_merge_heap *h) {
    qp_free(h->a);
    h->a = NULL;
    h->n = h->cap = 0;
}

/* ---- token text index ----------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

const char *qp_tok_text(const qp_vocab *v, int32_t id, size_t *len) {
    const char *s = v->tokens[id];
    if (!s) {
        *len = 0;
        return "";
    }
    *len = v->token_lens ? v->token_lens[id] : strlen(s);
    return s;
}

int32_t qp_tok_lookup(const qp_tokenizer *t, const char *s, size_t len) {
    size_t i = (size_t)hash_bytes(s, len) & t->index.mask;
    for (;;) {
        int32_t slot = t->index.slots[i];
        if (slot == 0) return -1;
        size_t tl;
        const char *ts = qp_tok_text(t->v, slot - 1, &tl);
        if (tl == len && memcmp(ts, s, len) == 0) return slot - 1;
        i = (i + 1) & t->index.mask;
    }
}

static qp_status build_index(qp_tokenizer *t, qp_err *e) {
    size_t cap = 16;
    while (cap < (size_t)t->n_tokens * 2) cap *= 2;
    t->index.slots = qp_calloc(cap, sizeof *t->index.slots);
    if (!t->index.slots) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (index)");
    t->index.mask = cap - 1;
    /* Later duplicates replace earlier ones, as llama.cpp's token_to_id map does. */
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        const char *s = qp_tok_text(t->v, id, &len);
        size_t i = (size_t)hash_bytes(s, len) & t->index.mask;
        for (;;) {
            int32_t slot = t->index.slots[i];
            if (slot == 0) {
                t->index.slots[i] = id + 1;
                break;
            }
            size_t tl;
            const char *ts = qp_tok_text(t->v, slot - 1, &tl);
            if (tl == len && memcmp(ts, s, len) == 0) {
                t->index.slots[i] = id + 1;
                break;
            }
            i = (i + 1) & t->index.mask;
        }
    }
    return QP_OK;
}

/* ---- construction --------------------------------------------------------------------------- */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Byte value of a "<0xNN>" token text, or -1. */
static int byte_token_value(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static bool is_special_type(int32_t type) {
    return type == QP_TOKTYPE_CONTROL || type == QP_TOKTYPE_USER_DEFINED ||
           type == QP_TOKTYPE_UNKNOWN;
}

/* An added token HF matches in the normalised text (normalized: true, and the vocabulary has a
 * Unicode normalizer): not looked for in the raw text. */
static bool matched_normalized(const qp_tokenizer *t, int32_t id) {
    return t->v->normalizer != QP_NORM_NONE && t->v->added_flags && (t->v->added_flags[id] & QP_ADDED_NORMALIZED);
}

/* A token split out of the raw text before normalisation. */
static bool raw_special(const qp_tokenizer *t, int32_t id) {
    return is_special_type(t->types[id]) && !matched_normalized(t, id);
}

static int cmp_special(const qp_vocab *v, int32_t x, int32_t y) {
    size_t lx, ly;
    const char *sx = qp_tok_text(v, x, &lx), *sy = qp_tok_text(v, y, &ly);
    if ((uint8_t)sx[0] != (uint8_t)sy[0]) return (uint8_t)sx[0] < (uint8_t)sy[0] ? -1 : 1;
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : (x > y);
}

bool qp_tok_sort_ids(const qp_vocab *v, int32_t *a, size_t n, qp_tok_id_cmp cmp) {
    int32_t *tmp = qp_malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) return false;
    for (size_t w = 1; w < n; w *= 2) { /* bottom-up merge sort: stable */
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = cmp(v, a[j], a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid) tmp[k++] = a[i++];
            while (j < hi) tmp[k++] = a[j++];
        }
        memcpy(a, tmp, n * sizeof *a);
    }
    qp_free(tmp);
    return true;
}

static qp_status build_special(qp_tokenizer *t, qp_err *e) {
    size_t n = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        qp_tok_text(t->v, id, &len);
        if (len > 0 && raw_special(t, id)) n++;
    }
    t->special = qp_malloc((n ? n : 1) * sizeof *t->special);
    if (!t->special) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (special tokens)");
    size_t k = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        qp_tok_text(t->v, id, &len);
        if (len > 0 && raw_special(t, id)) t->special[k++] = id;
    }
    if (!qp_tok_sort_ids(t->v, t->special, n, cmp_special))
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (special tokens)");
    size_t j = 0;
    for (unsigned b = 0; b < 256; b++) {
        t->special_start[b] = (uint32_t)j;
        while (j < n && (uint8_t)t->v->tokens[t->special[j]][0] == b) j++;
    }
    t->special_start[256] = (uint32_t)n;
    /* distinct lengths, longest first (the list is sorted by first byte, so sort lengths here) */
    t->special_lens = qp_malloc((n ? n : 1) * sizeof *t->special_lens);
    if (!t->special_lens) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (special tokens)");
    for (size_t i = 0; i < n; i++) {
        uint32_t l = t->v->token_lens ? t->v->token_lens[t->special[i]]
                                      : (uint32_t)strlen(t->v->tokens[t->special[i]]);
        uint32_t at = 0;
        while (at < t->n_special_lens && t->special_lens[at] > l) at++;
        if (at < t->n_special_lens && t->special_lens[at] == l) continue;
        memmove(t->special_lens + at + 1, t->special_lens + at,
                (t->n_special_lens - at) * sizeof *t->special_lens);
        t->special_lens[at] = l;
        t->n_special_lens++;
    }
    return QP_OK;
}

/* The normalised texts of the added tokens HF matches after normalisation, longest first. */
static qp_status build_norm_special(qp_tokenizer *t, qp_err *e) {
    size_t n = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) n += is_special_type(t->types[id]) && matched_normalized(t, id);
    if (n == 0) return QP_OK;
    t->norm_special = qp_calloc(n, sizeof *t->norm_special);
    t->norm_text = qp_calloc(n, sizeof *t->norm_text);
    t->norm_len = qp_calloc(n, sizeof *t->norm_len);
    if (!t->norm_special || !t->norm_text || !t->norm_len)
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (normalized added tokens)");
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        const char *s = qp_tok_text(t->v, id, &len);
        if (!is_special_type(t->types[id]) || !matched_normalized(t, id) || len == 0) continue;
        uint32_t k = t->n_norm_special++;
        qp_status st = qp_unicode_normalize(t->v->normalizer, s, len, &t->norm_text[k], &t->norm_len[k], e);
        if (st != QP_OK) return st;
        t->norm_special[k] = id;
        /* longest first; of equal length the later id first (equal normalised texts: the later
         * token wins, as HF's map of added tokens) */
        for (; k > 0 && t->norm_len[k - 1] <= t->norm_len[k]; k--) {
            size_t l = t->norm_len[k];
            t->norm_len[k] = t->norm_len[k - 1], t->norm_len[k - 1] = l;
            char *x = t->norm_text[k];
            t->norm_text[k] = t->norm_text[k - 1], t->norm_text[k - 1] = x;
            int32_t i = t->norm_special[k];
            t->norm_special[k] = t->norm_special[k - 1], t->norm_special[k - 1] = i;
        }
    }
    return QP_OK;
}

static qp_status build_types(qp_tokenizer *t, qp_err *e) {
    const qp_vocab *v = t->v;
    t->types = qp_malloc((size_t)t->n_tokens * sizeof *t->types);
    if (!t->types) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (types)");
    for (int32_t id = 0; id < t->n_tokens; id++) {
        int32_t ty = v->types ? v->types[id] : QP_TOKTYPE_UNDEFINED;
        if (ty < QP_TOKTYPE_UNDEFINED || ty > QP_TOKTYPE_BYTE) ty = QP_TOKTYPE_NORMAL;
        if (ty == QP_TOKTYPE_UNDEFINED) { /* infer what a GGUF writer would have recorded */
            size_t len;
            const char *s = qp_tok_text(v, id, &len);
            if ((t->model == QP_TOK_SPM || t->model == QP_TOK_UGM) && byte_token_value(s, len) >= 0) ty = QP_TOKTYPE_BYTE;
            else if (id == v->unk_id) ty = QP_TOKTYPE_UNKNOWN;
            else if (id == v->bos_id || id == v->eos_id) ty = QP_TOKTYPE_CONTROL;
            else ty = QP_TOKTYPE_NORMAL;
        }
        t->types[id] = ty;
    }
    return QP_OK;
}

void qp_tokenizer_free(qp_tokenizer *t) {
    if (!t) return;
    qp_tok_bpe_free(t);
    qp_tok_ugm_free(t);
    qp_free(t->types);
    qp_free(t->index.slots);
    qp_free(t->special);
    qp_free(t->special_lens);
    for (uint32_t k = 0; k < t->n_norm_special; k++) qp_free(t->norm_text[k]);
    qp_free(t->norm_special);
    qp_free(t->norm_text);
    qp_free(t->norm_len);
    qp_free(t);
}

qp_status qp_tokenizer_new(const qp_vocab *v, qp_tokenizer **out, qp_err *e) {
    if (!v || !out) return qp_fail(e, QP_ERR_ARG, "qp_tokenizer_new: NULL argument");
    if (v->model != QP_TOK_SPM && v->model != QP_TOK_BPE && v->model != QP_TOK_WPM && v->model != QP_TOK_UGM)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tokenizer: the model has no tokenizer (or one of "
                                              "an unsupported kind)");
    if (v->n_tokens <= 0 || !v->tokens)
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: empty vocabulary");
    if (v->n_tokens >= INT32_MAX / 2)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: %lld tokens is over the limit",
                       (long long)v->n_tokens);
    if (v->n_merges < 0 || (v->n_merges > 0 && !v->merges))
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: bad merges list");
    qp_tokenizer *t = qp_calloc(1, sizeof *t);
    if (!t) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory");
    t->v = v;
    t->model = v->model;
    t->n_tokens = (int32_t)v->n_tokens;
    qp_status s = build_types(t, e);
    if (s == QP_OK) s = build_index(t, e);
    if (s == QP_OK) s = build_special(t, e);
    if (s == QP_OK) s = build_norm_special(t, e);
    if (s == QP_OK) {
        switch (t->model) {
        case QP_TOK_SPM: s = qp_tok_spm_init(t, e); break;
        case QP_TOK_BPE: s = qp_tok_bpe_init(t, e); break;
        case QP_TOK_UGM: s = qp_tok_ugm_init(t, e); break;
        default: s = qp_tok_wpm_init(t, e); break;
        }
    }
    if (s != QP_OK) {
        qp_tokenizer_free(t);
        return s;
    }
    *out = t;
    return QP_OK;
}

int64_t qp_tokenizer_n_vocab(const qp_tokenizer *t) { return t ? t->n_tokens : 0; }

/* ---- encoding ------------------------------------------------------------------------------- */

/* Replaces each ill-formed UTF-8 subsequence with U+FFFD (maximal subparts, as WHATWG decoders,
 * JavaScript's TextDecoder and Rust's from_utf8_lossy do). *out is NULL when text is valid. */
static qp_status sanitize_utf8(const char *text, size_t len, char **out, size_t *out_len,
                               qp_err *e) {
    *out = NULL;
    if (qp_utf8_valid(text, len)) return QP_OK;
    size_t cap;
    if (!qp_size_mul(len, 3, &cap) || !qp_size_add(cap, 1, &cap))
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: input too long");
    char *buf = qp_malloc(cap);
    if (!buf) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (text copy)");
    const uint8_t *p = (const uint8_t *)text;
    size_t i = 0, k = 0;
    while (i < len) {
        uint32_t cp;
        size_t bad = 1, n = p[i] < 0x80 ? 1 : qp_utf8_decode(p + i, len - i, &cp, &bad);
        if (n) {
            memcpy(buf + k, p + i, n);
            k += n;
            i += n;
        } else {
            memcpy(buf + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += bad;
        }
    }
    *out = buf;
    *out_len = k;
    return QP_OK;
}

/* Special token starting at text[i] (longest first), or -1. Scans the tokens of text[i]'s
 * first-byte bucket, or, when that bucket is larger than the number of distinct special-token
 * lengths, looks each length up in the token index instead (vocabularies with thousands of
 * "<unusedN>" tokens stay fast on text full of '<'). */
static int32_t special_at(const qp_tokenizer *t, const char *text, size_t len, size_t i,
                          bool parse_special, size_t *tok_len) {
    uint8_t b = (uint8_t)text[i];
    if (t->special_start[b + 1] - t->special_start[b] > t->n_special_lens) {
        for (uint32_t k = 0; k < t->n_special_lens; k++) {
            size_t l = t->special_lens[k];
            if (l > len - i) continue;
            int32_t id = qp_tok_lookup(t, text + i, l);
            if (id < 0 || !raw_special(t, id)) continue;
            if (!parse_special && t->types[id] != QP_TOKTYPE_USER_DEFINED) continue;
            *tok_len = l;
            return id;
        }
        return -1;
    }
    for (uint32_t k = t->special_start[b]; k < t->special_start[b + 1]; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->types[id] != QP_TOKTYPE_USER_DEFINED) continue;
        size_t tl;
        const char *s = qp_tok_text(t->v, id, &tl);
        if (tl <= len - i && memcmp(text + i, s, tl) == 0) {
            *tok_len = tl;
            return id;
        }
    }
    return -1;
}

/* Code point of the well-formed UTF-8 sequence at text[i] (n bytes). */
static uint32_t utf8_at(const char *text, size_t i, size_t n) {
    const uint8_t *p = (const uint8_t *)text + i;
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = p[0] & lead_mask[n];
    for (size_t k = 1; k < n; k++) cp = cp << 6 | (p[k] & 0x3F);
    return cp;
}

/* End of the whitespace (White_Space, as Rust's char::is_whitespace) starting at text[i]. */
static size_t space_run_after(const char *text, size_t len, size_t i) {
    while (i < len) {
        size_t n = qp_utf8_lead_len((uint8_t)text[i]);
        if (n > len - i || !(qp_unicode_flags(utf8_at(text, i, n)) & QP_UC_WS)) break;
        i += n;
    }
    return i;
}

/* Start of the whitespace that ends at text[i], not before text[start]. */
static size_t space_run_before(const char *text, size_t start, size_t i) {
    while (i > start) {
        size_t j = i - 1;
        while (j > start && ((uint8_t)text[j] & 0xC0) == 0x80) j--;
        if (!(qp_unicode_flags(utf8_at(text, j, i - j)) & QP_UC_WS)) break;
        i = j;
    }
    return i;
}

static qp_status encode_model(const qp_tokenizer *t, const char *text, size_t len, bool prev_special,
                              qp_ids *out, qp_err *e) {
    switch (t->model) {
    case QP_TOK_SPM:
        return qp_tok_spm_encode(t, text, len, t->add_space_prefix && prev_special, out, e);
    case QP_TOK_BPE: return qp_tok_bpe_encode(t, text, len, out, e);
    case QP_TOK_UGM: return qp_tok_ugm_encode(t, text, len, out, e);
    default: return qp_tok_wpm_encode(t, text, len, out, e);
    }
}

/* The longest normalised added-token text at norm[i], or -1. */
static int32_t norm_special_at(const qp_tokenizer *t, const char *norm, size_t n, size_t i, bool parse_special,
                               size_t *tl) {
    for (uint32_t k = 0; k < t->n_norm_special; k++) {
        int32_t id = t->norm_special[k];
        if (!parse_special && t->types[id] != QP_TOKTYPE_USER_DEFINED) continue;
        if (t->norm_len[k] <= n - i && memcmp(norm + i, t->norm_text[k], t->norm_len[k]) == 0) {
            *tl = t->norm_len[k];
            return id;
        }
    }
    return -1;
}

/* Normalised text: the added tokens matched after normalisation split out (with their lstrip /
 * rstrip), the model on the rest (the dummy prefix only before the first stretch: HF prepends
 * once per raw section). */
static qp_status encode_normalized(const qp_tokenizer *t, const char *norm, size_t n, bool prev_special,
                                   bool parse_special, qp_ids *out, qp_err *e) {
    size_t start = 0, i = 0;
    qp_status s = QP_OK;
    while (s == QP_OK && i < n) {
        size_t tl = 0;
        int32_t id = t->n_norm_special ? norm_special_at(t, norm, n, i, parse_special, &tl) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        uint8_t flags = t->v->added_flags[id];
        size_t end = flags & QP_ADDED_LSTRIP ? space_run_before(norm, start, i) : i;
        if (end > start) s = encode_model(t, norm + start, end - start, start == 0 && prev_special, out, e);
        if (s == QP_OK && !qp_ids_push(out, id)) s = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (ids)");
        i += tl;
        if (flags & QP_ADDED_RSTRIP) i = space_run_after(norm, n, i);
        start = i;
    }
    if (s == QP_OK && start < n) s = encode_model(t, norm + start, n - start, start == 0 && prev_special, out, e);
    return s;
}

/* One stretch of text between special tokens: the tokenizer.json normalizer (NFC, ...), if any,
 * then the model. */
static qp_status encode_fragment(const qp_tokenizer *t, const char *text, size_t len, bool prev_special,
                                 bool parse_special, qp_ids *out, qp_err *e) {
    if (t->v->normalizer == QP_NORM_NONE) return encode_model(t, text, len, prev_special, out, e);
    char *norm = NULL;
    size_t norm_len = 0;
    qp_status s = qp_unicode_normalize(t->v->normalizer, text, len, &norm, &norm_len, e);
    if (s == QP_OK) s = encode_normalized(t, norm, norm_len, prev_special, parse_special, out, e);
    qp_free(norm);
    return s;
}

qp_status qp_tokenizer_encode(const qp_tokenizer *t, const char *text, size_t len, bool add_bos,
                              bool parse_special, int32_t **ids, int64_t *n_ids, qp_err *e) {
    if (!t || (!text && len) || !ids || !n_ids)
        return qp_fail(e, QP_ERR_ARG, "qp_tokenizer_encode: NULL argument");
    char *clean;
    size_t clean_len = 0;
    qp_status s = sanitize_utf8(text ? text : "", len, &clean, &clean_len, e);
    if (s != QP_OK) return s;
    if (clean) {
        text = clean;
        len = clean_len;
    }
    qp_ids out = {0};
    bool nomem = false;
    if (add_bos && t->v->bos_id >= 0 && t->v->bos_id < t->n_tokens)
        nomem = !qp_ids_push(&out, t->v->bos_id);
    /* Split out special tokens (leftmost, longest first), encode the text between them. An added
     * token with lstrip / rstrip also takes the whitespace before / after it (HF AddedToken). */
    bool prev_special = true;
    size_t start = 0, i = 0;
    while (!nomem && s == QP_OK && i < len) {
        size_t tl = 0;
        int32_t id = t->special_start[(uint8_t)text[i]] == t->special_start[(uint8_t)text[i] + 1]
                         ? -1
                         : special_at(t, text, len, i, parse_special, &tl);
        if (id < 0) {
            i++;
            continue;
        }
        uint8_t flags = t->v->added_flags ? t->v->added_flags[id] : 0;
        size_t end = flags & QP_ADDED_LSTRIP ? space_run_before(text, start, i) : i;
        if (end > start) {
            s = encode_fragment(t, text + start, end - start, prev_special, parse_special, &out, e);
            if (s != QP_OK) break;
        }
        nomem = !qp_ids_push(&out, id);
        prev_special = true;
        i += tl;
        if (flags & QP_ADDED_RSTRIP) i = space_run_after(text, len, i);
        start = i;
    }
    if (!nomem && s == QP_OK && start < len)
        s = encode_fragment(t, text + start, len - start, prev_special, parse_special, &out, e);
    qp_free(clean);
    if (nomem) s = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (ids)");
    if (s != QP_OK) {
        qp_free(out.p);
        return s;
    }
    if (!out.p) { /* empty result: still hand back a freeable buffer */
        out.p = qp_malloc(sizeof *out.p);
        if (!out.p) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (ids)");
    }
    *ids = out.p;
    *n_ids = (int64_t)out.n;
    return QP_OK;
}

/* ---- decoding ------------------------------------------------------------------------------- */

static size_t put_bytes(char *buf, size_t cap, size_t at, const char *s, size_t n) {
    if (at < cap) memcpy(buf + at, s, n <= cap - at ? n : cap - at);
    return at + n;
}

/* The piece of a valid id (qp_tokenizer_decode_piece): its length; at most cap bytes written. */
static size_t piece_bytes(const qp_tokenizer *t, int32_t prev_id, int32_t id, char *buf, size_t cap) {
    if (!buf) cap = 0;
    size_t len;
    const char *s = qp_tok_text(t->v, id, &len);
    int32_t ty = t->types[id];
    size_t n = 0;
    if (ty == QP_TOKTYPE_CONTROL || ty == QP_TOKTYPE_UNUSED) return 0;
    if (ty == QP_TOKTYPE_UNKNOWN) /* unigram: nothing, as llama_detokenize without unparse_special */
        return t->model == QP_TOK_UGM ? 0 : put_bytes(buf, cap, 0, "\xE2\x96\x85", 3);
    if (ty == QP_TOKTYPE_USER_DEFINED) return put_bytes(buf, cap, 0, s, len);
    if (ty == QP_TOKTYPE_BYTE) {
        int b = byte_token_value(s, len);
        if (b < 0) return put_bytes(buf, cap, 0, s, len);
        char c = (char)b;
        return put_bytes(buf, cap, 0, &c, 1);
    }
    if (t->model == QP_TOK_BPE) { /* byte-level: every character stands for one byte */
        const uint8_t *p = (const uint8_t *)s;
        size_t i = 0;
        while (i < len) {
            uint32_t cp = 0;
            size_t bad = 1, k = p[i] < 0x80 ? (cp = p[i], 1) : qp_utf8_decode(p + i, len - i, &cp, &bad);
            if (k && cp < 324 && t->cp_byte[cp] >= 0) {
                char c = (char)t->cp_byte[cp];
                n = put_bytes(buf, cap, n, &c, 1);
            } else { /* not a byte-level character: pass through */
                if (!k) k = bad;
                n = put_bytes(buf, cap, n, s + i, k);
            }
            i += k;
        }
        return n;
    }
    /* SentencePiece / WordPiece: U+2581 is a space; the leading space after BOS is dropped. */
    size_t i = 0;
    bool after_bos = prev_id >= 0 && prev_id == t->v->bos_id;
    if (t->model == QP_TOK_UGM && prev_id < 0) after_bos = t->add_space_prefix; /* llama_detokenize */
    while (i < len) {
        if (len - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            if (!(after_bos && n == 0)) n = put_bytes(buf, cap, n, " ", 1);
            else after_bos = false;
            i += 3;
        } else {
            if (after_bos && n == 0 && s[i] == ' ') {
                after_bos = false;
                i++;
                continue;
            }
            after_bos = false;
            n = put_bytes(buf, cap, n, s + i, 1);
            i++;
        }
    }
    return n;
}

qp_status qp_tokenizer_decode_piece(const qp_tokenizer *t, int32_t prev_id, int32_t id, char *buf,
                                    size_t cap, size_t *len, qp_err *e) {
    if (!t || !len) return qp_fail(e, QP_ERR_ARG, "qp_tokenizer_decode_piece: NULL argument");
    if (id < 0 || id >= t->n_tokens)
        return qp_fail(e, QP_ERR_ARG, "token id %d is outside the %lld-token vocabulary", (int)id,
                       (long long)t->n_tokens);
    *len = piece_bytes(t, prev_id, id, buf, cap);
    return QP_OK;
}
