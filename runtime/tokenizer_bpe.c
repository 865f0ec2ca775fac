/* Byte-level BPE ("gpt2" vocabularies): a hand-written pre-tokenizer splits the text into words
 * (the GPT-2, Llama 3, Qwen2 and DeepSeek-Coder patterns, see tokenizer.md), every byte of a word
 * becomes its GPT-2 bytes_to_unicode character, and adjacent symbols are merged by merge rank
 * (lowest first, ties leftmost) with a priority queue. */
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

static const struct {
    const char *name;
    qp_pre_kind kind;
} k_pre_names[] = {
    {"", QP_PRE_GPT2}, {"default", QP_PRE_GPT2}, {"gpt-2", QP_PRE_GPT2}, {"gpt2", QP_PRE_GPT2},
    {"phi-2", QP_PRE_GPT2}, {"mpt", QP_PRE_GPT2}, {"olmo", QP_PRE_GPT2}, {"jais", QP_PRE_GPT2},
    {"trillion", QP_PRE_GPT2}, {"granite-docling", QP_PRE_GPT2},
    {"starcoder", QP_PRE_STARCODER}, {"refact", QP_PRE_STARCODER},
    {"command-r", QP_PRE_STARCODER}, {"smollm", QP_PRE_STARCODER},
    {"codeshell", QP_PRE_STARCODER}, {"exaone", QP_PRE_STARCODER},
    {"minerva-7b", QP_PRE_STARCODER},
    {"llama-bpe", QP_PRE_LLAMA3}, {"llama3", QP_PRE_LLAMA3}, {"llama-v3", QP_PRE_LLAMA3},
    {"smaug-bpe", QP_PRE_LLAMA3}, {"falcon3", QP_PRE_LLAMA3}, {"pixtral", QP_PRE_LLAMA3},
    {"qwen2", QP_PRE_QWEN2}, {"deepseek-r1-qwen", QP_PRE_QWEN2},
    {"deepseek-coder", QP_PRE_DEEPSEEK_CODER}, {"deepseek-llm", QP_PRE_DEEPSEEK_LLM},
};

void qp_tok_bpe_free(qp_tokenizer *t) {
    qp_free(t->pairs.keys);
    qp_free(t->pairs.ranks);
    qp_free(t->pairs.merged);
    memset(&t->pairs, 0, sizeof t->pairs);
}

qp_status qp_tok_bpe_init(qp_tokenizer *t, qp_err *e) {
    const qp_vocab *v = t->v;
    bool known = false;
    for (size_t i = 0; i < sizeof k_pre_names / sizeof k_pre_names[0]; i++) {
        if (strncmp(v->pre, k_pre_names[i].name, sizeof v->pre) == 0) {
            t->pre = k_pre_names[i].kind;
            known = true;
            break;
        }
    }
    if (!known)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tokenizer: byte-level BPE pre-tokenizer '%.*s' is "
                                              "not supported (see runtime/tokenizer.md for "
                                              "the names that are)", (int)sizeof v->pre, v->pre);
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

/* ---- pre-tokenizers: each returns the length (in code points) of the match at i, 0 if none --- */

typedef struct pre_text {
    const uint32_t *cp;
    const uint8_t *fl;
} pre_text;

#define IS_L(i) (pt->fl[i] & QP_UC_L)
#define IS_N(i) (pt->fl[i] & QP_UC_N)
#define IS_WS(i) (pt->fl[i] & QP_UC_WS)
#define IS_OTHER(i) (!(pt->fl[i] & (QP_UC_WS | QP_UC_L | QP_UC_N)))

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd (case-insensitive when ci). */
static size_t match_contraction(const pre_text *pt, size_t i, size_t end, bool ci) {
    if (pt->cp[i] != '\'' || i + 1 >= end) return 0;
    uint32_t a = ci ? ascii_lower(pt->cp[i + 1]) : pt->cp[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= end) return 0;
    uint32_t b = ci ? ascii_lower(pt->cp[i + 2]) : pt->cp[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a whitespace position: a run followed by a non-space keeps its last space
 * for the next word (unless the run is that one space). */
static size_t match_space_run(const pre_text *pt, size_t i, size_t end) {
    size_t k = i;
    while (k < end && IS_WS(k)) k++;
    if (k < end && k - i > 1) return k - i - 1;
    return k - i;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const pre_text *pt, size_t i, size_t end) {
    size_t n = match_contraction(pt, i, end, false);
    if (n) return n;
    size_t j = pt->cp[i] == ' ' ? i + 1 : i;
    if (j < end && IS_L(j)) {
        while (j < end && IS_L(j)) j++;
        return j - i;
    }
    if (j < end && IS_N(j)) {
        while (j < end && IS_N(j)) j++;
        return j - i;
    }
    if (j < end && IS_OTHER(j)) {
        while (j < end && IS_OTHER(j)) j++;
        return j - i;
    }
    return match_space_run(pt, i, end);
}

/* Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const pre_text *pt, size_t i, size_t end, size_t max_digits) {
    size_t n = match_contraction(pt, i, end, true);
    if (n) return n;
    uint32_t c = pt->cp[i];
    if (IS_L(i) || (c != '\r' && c != '\n' && !IS_N(i) && i + 1 < end && IS_L(i + 1))) {
        size_t j = i + 1;
        while (j < end && IS_L(j)) j++;
        return j - i;
    }
    if (IS_N(i)) {
        size_t j = i;
        while (j < end && j - i < max_digits && IS_N(j)) j++;
        return j - i;
    }
    size_t j = c == ' ' ? i + 1 : i;
    if (j < end && IS_OTHER(j)) {
        while (j < end && IS_OTHER(j)) j++;
        while (j < end && (pt->cp[j] == '\r' || pt->cp[j] == '\n')) j++;
        return j - i;
    }
    /* whitespace: \s*[\r\n]+ ends after the last newline of the run */
    size_t k = i, last_nl = SIZE_MAX;
    while (k < end && IS_WS(k)) {
        if (pt->cp[k] == '\r' || pt->cp[k] == '\n') last_nl = k;
        k++;
    }
    if (last_nl != SIZE_MAX) return last_nl + 1 - i;
    return match_space_run(pt, i, end);
}

/* DeepSeek-Coder and DeepSeek-LLM: patterns applied one after the other, each splitting every
 * piece into its matches and the gaps between them. */
static bool is_cjk_ds(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) ||
           (c >= 0xAC00 && c <= 0xD7FF);
}

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

/* DeepSeek-LLM's letter class (the cased letters of its tokenizer.json), in its order */
static const cp_range k_ds_llm_letters[] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};

/* DeepSeek-LLM's punctuation class: ASCII punctuation, fullwidth forms, quotes, CJK marks */
static const cp_range k_ds_llm_punct[] = {
    {0x0021, 0x002F}, {0x003A, 0x007E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
    {0x2018, 0x201F}, {0x3000, 0x3002},
};

static bool in_ranges(const cp_range *r, size_t n, uint32_t c) {
    for (size_t i = 0; i < n; i++)
        if (c >= r[i].lo && c <= r[i].hi) return true;
    return false;
}

/* the DeepSeek class of step `step` (1 letters, 2 punctuation) for the Coder or the LLM lists */
static bool in_ds_class(const pre_text *pt, size_t i, int step, bool llm) {
    if (!llm) return pt->fl[i] & (step == 1 ? QP_UC_L : QP_UC_P);
    if (step == 1)
        return in_ranges(k_ds_llm_letters, sizeof k_ds_llm_letters / sizeof k_ds_llm_letters[0],
                         pt->cp[i]);
    return in_ranges(k_ds_llm_punct, sizeof k_ds_llm_punct / sizeof k_ds_llm_punct[0], pt->cp[i]);
}

/* \s?[class]+ */
static size_t match_ds_class(const pre_text *pt, size_t i, size_t end, int step, bool llm) {
    size_t j = i;
    if (IS_WS(j) && j + 1 < end && in_ds_class(pt, j + 1, step, llm)) j++;
    if (!in_ds_class(pt, j, step, llm)) return 0;
    while (j < end && in_ds_class(pt, j, step, llm)) j++;
    return j - i;
}

static size_t match_run(const pre_text *pt, size_t i, size_t end, unsigned flag) {
    size_t j = i;
    while (j < end && (pt->fl[j] & flag)) j++;
    return j - i;
}

/* Coder: [\r\n] / \s?\p{L}+ / \s?\p{P}+ / CJK / \p{N}
 * LLM:   [\r\n] / \s?[letters]+ / \s?[punct]+ / \s+$ / CJK / \p{N}+ */
static size_t match_ds(const pre_text *pt, size_t i, size_t end, int step, bool llm) {
    if (llm && step == 3) { /* \s+$: whitespace reaching the end of the piece */
        size_t n = match_run(pt, i, end, QP_UC_WS);
        return i + n == end ? n : 0;
    }
    if (llm && step > 3) step--;
    switch (step) {
    case 0: return pt->cp[i] == '\r' || pt->cp[i] == '\n';
    case 1:
    case 2: return match_ds_class(pt, i, end, step, llm);
    case 3: {
        size_t j = i;
        while (j < end && is_cjk_ds(pt->cp[j])) j++;
        return j - i;
    }
    default: return llm ? match_run(pt, i, end, QP_UC_N) : IS_N(i) ? 1 : 0;
    }
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

/* Encodes one pre-tokenized word (raw bytes). False on allocation failure. */
static bool bpe_word(const qp_tokenizer *t, const uint8_t *w, size_t n, bpe_work *wk, qp_ids *out) {
    if (n == 0) return true;
    if (t->pre == QP_PRE_LLAMA3) { /* ignore_merges: a word that is a token is taken whole */
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
    for (size_t i = 0; i < n; i++) {
        sym[i].id = t->byte_char_id[w[i]];
        sym[i].start = (uint32_t)i;
        sym[i].len = 1;
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    wk->heap.n = 0;
    bool ok = true;
    for (size_t i = 1; i < n && ok; i++) ok = try_pair(t, sym, (int32_t)i - 1, (int32_t)i, &wk->heap);
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
         * byte where possible, else unk, else nothing (llama.cpp drops such bytes too). */
        for (uint32_t j = 0; j < sym[i].len && ok; j++) {
            int32_t id = t->byte_char_id[w[sym[i].start + j]];
            if (id < 0) id = t->v->unk_id < t->n_tokens ? t->v->unk_id : -1;
            if (id >= 0) ok = qp_ids_push(out, id);
        }
    }
    return ok;
}

/* ---- fragment encoder ----------------------------------------------------------------------- */

typedef struct piece {
    uint32_t start, end; /* code point indices */
} piece;

static bool push_piece(piece **p, size_t *n, size_t *cap, uint32_t s, uint32_t e) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        piece *q = qp_realloc(*p, nc * sizeof *q);
        if (!q) return false;
        *p = q;
        *cap = nc;
    }
    (*p)[(*n)++] = (piece){s, e};
    return true;
}

qp_status qp_tok_bpe_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                            qp_err *e) {
    if (len >= (size_t)UINT32_MAX / 2)
        return qp_fail(e, QP_ERR_LIMIT, "tokenizer: text fragment of %zu bytes is over the limit",
                       len);
    size_t cap = len ? len : 1;
    uint32_t *cp = qp_malloc(cap * sizeof *cp);
    uint32_t *off = qp_malloc((cap + 1) * sizeof *off);
    uint8_t *fl = qp_malloc(cap);
    piece *pa = NULL, *pb = NULL;
    size_t na = 0, ca = 0, nb = 0, cb = 0;
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
    pre_text pt = {cp, fl};
    if (ok) ok = push_piece(&pa, &na, &ca, 0, (uint32_t)n);
    int steps = t->pre == QP_PRE_DEEPSEEK_CODER ? 5
              : t->pre == QP_PRE_DEEPSEEK_LLM   ? 6
              : t->pre == QP_PRE_STARCODER      ? 2
                                                : 1;
    for (int step = 0; ok && step < steps; step++) {
        nb = 0;
        for (size_t p = 0; ok && p < na; p++) {
            size_t i = pa[p].start, end = pa[p].end, gap = i;
            while (ok && i < end) {
                size_t m;
                switch (t->pre) {
                case QP_PRE_LLAMA3: m = match_llama3(&pt, i, end, 3); break;
                case QP_PRE_QWEN2: m = match_llama3(&pt, i, end, 1); break;
                case QP_PRE_DEEPSEEK_CODER: m = match_ds(&pt, i, end, step, false); break;
                case QP_PRE_DEEPSEEK_LLM: m = match_ds(&pt, i, end, step, true); break;
                case QP_PRE_STARCODER: /* \p{N} alone first, then GPT-2 */
                    m = step == 0 ? (pt.fl[i] & QP_UC_N ? 1 : 0) : match_gpt2(&pt, i, end);
                    break;
                default: m = match_gpt2(&pt, i, end); break;
                }
                if (m == 0) {
                    i++;
                    continue;
                }
                if (gap < i) ok = push_piece(&pb, &nb, &cb, (uint32_t)gap, (uint32_t)i);
                if (ok) ok = push_piece(&pb, &nb, &cb, (uint32_t)i, (uint32_t)(i + m));
                i += m;
                gap = i;
            }
            if (ok && gap < end) ok = push_piece(&pb, &nb, &cb, (uint32_t)gap, (uint32_t)end);
        }
        piece *tp = pa; pa = pb; pb = tp;
        size_t tc = ca; ca = cb; cb = tc;
        na = nb;
    }
    for (size_t p = 0; ok && p < na; p++) {
        size_t b0 = off[pa[p].start], b1 = off[pa[p].end];
        ok = bpe_word(t, (const uint8_t *)text + b0, b1 - b0, &wk, out);
    }
    qp_free(cp);
    qp_free(off);
    qp_free(fl);
    qp_free(pa);
    qp_free(pb);
    qp_free(wk.sym);
    qp_free(wk.mapped);
    qp_heap_free(&wk.heap);
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
}
