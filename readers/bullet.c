/* .bullet reader (bullet-core's container; layout, limits and statuses in readers/bullet.md).
 * The header's integers are read the way bullet-core's C++ reader reads them (first occurrence of
 * "key": as a substring, spaces and newlines skipped, an optional '-' and digits, int32); the
 * keys only we write (tokenizer ids, token types, task labels, checksum) come from a JSON parse.
 * Tensors are keyed by FNV-1a 64 hashes of their names: names are recovered by hashing the names
 * bullet-core's runtime looks up, and mapped to canonical GGUF-style names with BQ4 data, so the
 * reference runtime runs them unchanged. Every size and offset is checked against the file. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/model_internal.h"
#include "readers/bullet_format.h"

/* ---- header ------------------------------------------------------------------------------- */

static const char *find_bytes(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    if (k == 0 || k > n) return NULL;
    for (size_t i = 0; i + k <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, k) == 0) return hay + i;
    return NULL;
}

/* bullet-core's json_get_int and its outcomes (std::stoi throws out of int32). */
typedef enum hdr_int_result {
    HDR_INT_ABSENT,
    HDR_INT_FOUND,   /* *out written */
    HDR_INT_NOT_INT, /* present but not an integer */
    HDR_INT_RANGE,   /* out of int32 */
} hdr_int_result;

static hdr_int_result hdr_int(const char *json, size_t n, const char *key, int64_t *out) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = find_bytes(json, n, pat);
    if (!p) return HDR_INT_ABSENT;
    const char *end = json + n;
    p += strlen(pat);
    while (p < end && (*p == ' ' || *p == '\n')) p++;
    bool neg = false;
    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    int64_t v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (v > QP_BULLET_INT_MAX + 1LL) return HDR_INT_RANGE;
        digits++;
        p++;
    }
    if (digits == 0) return HDR_INT_NOT_INT;
    if (neg) v = -v;
    if (v > QP_BULLET_INT_MAX || v < -QP_BULLET_INT_MAX - 1) return HDR_INT_RANGE;
    *out = v;
    return HDR_INT_FOUND;
}

/* bullet-core's json_get_string: the text between the next two quotes after "key":. */
static bool hdr_str(const char *json, size_t n, const char *key, const char **s, size_t *len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = find_bytes(json, n, pat);
    if (!p) return false;
    const char *end = json + n;
    p += strlen(pat);
    while (p < end && *p != '"') p++;
    if (p >= end) return false;
    const char *q = ++p;
    while (q < end && *q != '"') q++;
    if (q >= end) return false;
    *s = p;
    *len = (size_t)(q - p);
    return true;
}

typedef struct rd {
    qp_model *m;
    const char *path;
    const uint8_t *d;
    size_t size;
    qp_err *e;
    cJSON *root; /* NULL when the header is not valid JSON (bullet-core does not need it to be) */
} rd;

static qp_status need_int(rd *r, const char *json, size_t n, const char *key, int64_t lo,
                          int64_t hi, int64_t *out) {
    hdr_int_result k = hdr_int(json, n, key, out);
    if (k == HDR_INT_ABSENT)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: header at offset 0: key \"%s\" is missing", r->path,
                       key);
    if (k != HDR_INT_FOUND || *out < lo || *out > hi)
        return qp_fail(r->e, k == HDR_INT_NOT_INT ? QP_ERR_CORRUPT : QP_ERR_LIMIT,
                       "%s: header at offset 0: \"%s\" is not an integer in %" PRId64 "..%" PRId64,
                       r->path, key, lo, hi);
    return QP_OK;
}

static qp_status meta_str(rd *r, const char *key, const char *s, size_t n) {
    return qp_model_meta_str(r->m, key, s, n, r->e);
}

static qp_status meta_u64(rd *r, const char *key, uint64_t v) {
    qp_meta *md;
    qp_status s = qp_model_add_meta(r->m, key, strlen(key), &md, r->e);
    if (s != QP_OK) return s;
    md->type = QP_META_U64;
    md->n = 1;
    md->v.u = v;
    return QP_OK;
}

static qp_status meta_i32(rd *r, const char *key, int64_t v) {
    qp_meta *md;
    qp_status s = qp_model_add_meta(r->m, key, strlen(key), &md, r->e);
    if (s != QP_OK) return s;
    md->type = QP_META_I32;
    md->n = 1;
    md->v.i = v;
    return QP_OK;
}

/* A JSON array of strings as a GGUF-style string array (u64 length + bytes each). */
static qp_status meta_str_array(rd *r, const char *key, const cJSON *arr, int64_t max_n) {
    int n = cJSON_GetArraySize(arr);
    if (n < 1 || n > max_n)
        return qp_fail(r->e, QP_ERR_LIMIT, "%s: header: \"%s\" has %d entries (1..%" PRId64 ")",
                       r->path, key, n, max_n);
    size_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsString(it) || !it->valuestring)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: header: \"%s\" holds a non-string", r->path, key);
        total += 8 + strlen(it->valuestring);
    }
    uint8_t *raw = qp_arena_alloc(qp_model_arena(r->m), total ? total : 1);
    if (!raw) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    size_t o = 0;
    cJSON_ArrayForEach(it, arr) {
        size_t l = strlen(it->valuestring);
        qp_store_u64le(raw + o, l);
        memcpy(raw + o + 8, it->valuestring, l);
        o += 8 + l;
    }
    qp_meta *md;
    qp_status s = qp_model_add_meta(r->m, key, strlen(key), &md, r->e);
    if (s != QP_OK) return s;
    md->type = QP_META_ARRAY;
    md->arr_type = QP_META_STRING;
    md->n = (uint64_t)n;
    md->raw = raw;
    md->raw_size = total;
    return QP_OK;
}

static const char *json_string(const rd *r, const char *key) {
    const cJSON *it = r->root ? cJSON_GetObjectItemCaseSensitive(r->root, key) : NULL;
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* ---- tokenizer ---------------------------------------------------------------------------- */

static qp_status parse_token_types(rd *r, const char *s, int64_t n, int32_t *types) {
    int64_t i = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p || *end != 'x' || t < QP_TOKTYPE_UNDEFINED || t > QP_TOKTYPE_BYTE) break;
        p = end + 1;
        long long c = strtoll(p, &end, 10);
        if (end == p || c < 1 || c > n - i) break;
        for (long long k = 0; k < c; k++) types[i++] = (int32_t)t;
        p = end;
        if (*p == ',') p++;
        else if (*p) break;
    }
    if (*p || i != n)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: header: \"token_types\" does not describe %" PRId64
                       " tokens (stopped at character %td)", r->path, n, p - s);
    return QP_OK;
}

static qp_tok_model tok_model_from(const char *s) {
    if (!s) return QP_TOK_NONE;
    if (strcmp(s, "llama") == 0) return QP_TOK_SPM;
    if (strcmp(s, "gpt2") == 0) return QP_TOK_BPE;
    if (strcmp(s, "bert") == 0) return QP_TOK_WPM;
    return QP_TOK_NONE;
}

static qp_status read_tokenizer(rd *r, uint64_t start, uint64_t limit, int64_t vocab,
                                uint64_t *end_out) {
    qp_cursor c;
    qp_cursor_init(&c, r->d, (size_t)limit, (size_t)start);
    const uint8_t *mg;
    uint32_t n = 0;
    if (!qp_cursor_take(&c, 4, &mg) || memcmp(mg, "BULK", 4) != 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tokenizer at offset %" PRIu64 ": no \"BULK\" magic",
                       r->path, start);
    if (!qp_cursor_u32(&c, &n))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tokenizer at offset %" PRIu64 ": truncated count",
                       r->path, start + 4);
    if ((int64_t)n != vocab)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tokenizer at offset %" PRIu64 ": %" PRIu32
                       " tokens but the header says vocab_size %" PRId64, r->path, start + 4, n, vocab);
    qp_arena *a = qp_model_arena(r->m);
    qp_vocab *v = &r->m->vocab;
    v->tokens = qp_arena_alloc(a, (size_t)n * sizeof *v->tokens);
    v->token_lens = qp_arena_alloc(a, (size_t)n * sizeof *v->token_lens);
    v->scores = qp_arena_alloc(a, (size_t)n * sizeof *v->scores);
    if (!v->tokens || !v->token_lens || !v->scores)
        return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory for %" PRIu32 " tokens", r->path, n);
    for (uint32_t i = 0; i < n; i++) {
        size_t at = c.pos;
        float score;
        uint16_t len;
        const uint8_t *p;
        if (!qp_cursor_f32(&c, &score) || !qp_cursor_u16(&c, &len) || !qp_cursor_take(&c, len, &p))
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: token %" PRIu32 " at offset %zu runs past the "
                           "tokenizer section (ends at %" PRIu64 ")", r->path, i, at, limit);
        v->tokens[i] = qp_arena_strndup(a, (const char *)p, len);
        if (!v->tokens[i]) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
        v->token_lens[i] = len;
        v->scores[i] = score;
    }
    v->n_tokens = n;
    uint32_t nm;
    size_t at = c.pos;
    if (!qp_cursor_u32(&c, &nm))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: merge count at offset %zu runs past the tokenizer "
                       "section", r->path, at);
    if (nm > QP_BULLET_MAX_MERGES || (uint64_t)nm * 4 > qp_cursor_left(&c))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: merge count %" PRIu32 " at offset %zu does not fit "
                       "the tokenizer section", r->path, nm, at);
    v->merges = qp_arena_alloc(a, (size_t)(nm ? nm : 1) * sizeof *v->merges);
    if (!v->merges) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    for (uint32_t i = 0; i < nm; i++) {
        uint16_t l1, l2;
        const uint8_t *p1, *p2;
        at = c.pos;
        if (!qp_cursor_u16(&c, &l1) || !qp_cursor_take(&c, l1, &p1) || !qp_cursor_u16(&c, &l2) ||
            !qp_cursor_take(&c, l2, &p2))
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: merge %" PRIu32 " at offset %zu runs past the "
                           "tokenizer section", r->path, i, at);
        char *m = qp_arena_alloc(a, (size_t)l1 + l2 + 2);
        if (!m) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
        memcpy(m, p1, l1);
        m[l1] = ' ';
        memcpy(m + l1 + 1, p2, l2);
        v->merges[i] = m;
    }
    v->n_merges = nm;
    *end_out = c.pos;

    /* our extension keys: which tokenizer, its special ids and token types */
    const char *model = json_string(r, "tokenizer_model");
    v->model = tok_model_from(model);
    v->bos_id = v->eos_id = v->unk_id = v->pad_id = -1;
    if (model && v->model == QP_TOK_NONE)
        qp_model_add_problem(r->m, "tokenizer_model \"%.40s\" is not one we can run", model);
    if (!model)
        qp_model_add_problem(r->m, "no tokenizer_model key: bullet-core's own space-split merge "
                             "tokenizer (not run here; use --ids)");
    const char *pre = json_string(r, "tokenizer_pre");
    if (pre) {
        snprintf(v->pre, sizeof v->pre, "%s", pre);
        qp_status s = meta_str(r, "bullet.tokenizer_pre", pre, strlen(pre));
        if (s != QP_OK) return s;
    } else if (v->model == QP_TOK_BPE || v->model == QP_TOK_SPM) {
        snprintf(v->pre, sizeof v->pre, "default");
    }
    int64_t id;
    if (qp_json_get_int(r->root, "bos_id", -1, (int64_t)n - 1, &id)) v->bos_id = (int32_t)id;
    if (qp_json_get_int(r->root, "eos_id", -1, (int64_t)n - 1, &id)) v->eos_id = (int32_t)id;
    if (qp_json_get_int(r->root, "unk_id", -1, (int64_t)n - 1, &id)) v->unk_id = (int32_t)id;
    if (qp_json_get_int(r->root, "pad_id", -1, (int64_t)n - 1, &id)) v->pad_id = (int32_t)id;
    v->add_bos = qp_json_get_int(r->root, "add_bos", 0, 1, &id) && id == 1;
    const char *tt = json_string(r, "token_types");
    if (tt) {
        v->types = qp_arena_alloc(a, (size_t)n * sizeof *v->types);
        if (!v->types) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
        qp_status s = parse_token_types(r, tt, n, v->types);
        if (s != QP_OK) return s;
    }
    r->m->arch.bos_id = v->bos_id;
    r->m->arch.eos_id = v->eos_id;
    return QP_OK;
}

/* ---- tensor names --------------------------------------------------------------------------- */

typedef struct cand {
    uint64_t h;
    char name[48];
} cand;

static int cand_cmp(const void *a, const void *b) {
    uint64_t x = ((const cand *)a)->h, y = ((const cand *)b)->h;
    return x < y ? -1 : x > y;
}

static const char *const k_layer_suffix[] = {
    "norm.attn", "attention.query", "attention.key", "attention.value",
    "attention.output", "norm.ffn", "ffn.w1", "ffn.w3", "ffn.w2"};

/* Every name bullet-core's runtime looks up (BulletRunner::forward and compute_logits), each
 * also with ".bias" (PyTorch state dicts exported through the builder carry them; the runtime
 * never reads them) and bare (the builder revision that wrote bullet-core's own sample model
 * named layer tensors without ".weight"; today's runtime would not find those). */
static cand *make_candidates(int64_t n_layers, size_t *n_out) {
    static const char *const sfx[3] = {".weight", ".bias", ""};
    size_t n = 3 * (3 + QP_BULLET_N_TASKS + (size_t)n_layers * 9), k = 0;
    cand *c = qp_calloc(n, sizeof *c);
    if (!c) return NULL;
    static const char *const globals[] = {"tok_embeddings", "final_layernorm", "output_head"};
    for (int x = 0; x < 3; x++) {
        for (size_t i = 0; i < 3; i++) snprintf(c[k++].name, sizeof c->name, "%s%s", globals[i], sfx[x]);
        for (int i = 0; i < QP_BULLET_N_TASKS; i++)
            snprintf(c[k++].name, sizeof c->name, "%s_head%s", qp_bullet_tasks[i], sfx[x]);
        for (int64_t l = 0; l < n_layers; l++)
            for (size_t s = 0; s < 9; s++)
                snprintf(c[k++].name, sizeof c->name, "layers.%" PRId64 ".%s%s", l, k_layer_suffix[s], sfx[x]);
    }
    for (size_t i = 0; i < k; i++) c[i].h = qp_bullet_fnv1a64(c[i].name, strlen(c[i].name));
    qsort(c, k, sizeof *c, cand_cmp);
    *n_out = k;
    return c;
}

static const char *cand_find(const cand *c, size_t n, uint64_t h) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c[mid].h < h) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && c[lo].h == h ? c[lo].name : NULL;
}

/* ---- weights ------------------------------------------------------------------------------- */

typedef struct entry {
    uint64_t h;
    uint64_t at; /* offset of the record */
} entry;

static int entry_cmp(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

static qp_status read_weights(rd *r, uint64_t start, int64_t n_layers, bool want_checksum) {
    qp_cursor c;
    qp_cursor_init(&c, r->d, r->size, (size_t)start);
    const uint8_t *mg;
    uint32_t n;
    if (!qp_cursor_take(&c, 4, &mg) || memcmp(mg, "BWT0", 4) != 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: weights at offset %" PRIu64 ": no \"BWT0\" magic",
                       r->path, start);
    if (!qp_cursor_u32(&c, &n))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: weights at offset %" PRIu64 ": truncated tensor "
                       "count", r->path, start + 4);
    if (n > QP_BULLET_MAX_TENSORS || (uint64_t)n * 22 > qp_cursor_left(&c))
        return qp_fail(r->e, n > QP_BULLET_MAX_TENSORS ? QP_ERR_LIMIT : QP_ERR_CORRUPT,
                       "%s: weights at offset %" PRIu64 ": %" PRIu32 " tensors do not fit the file "
                       "(limit %u)", r->path, start + 4, n, QP_BULLET_MAX_TENSORS);
    size_t n_cand = 0;
    cand *cands = make_candidates(n_layers, &n_cand);
    entry *ents = qp_calloc(n ? n : 1, sizeof *ents);
    qp_status s = QP_OK;
    if (!cands || !ents) s = qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    bool have_gen = false;
    int64_t gen_index = -1, out_head_index = -1;
    qp_arena *a = qp_model_arena(r->m);
    for (uint32_t i = 0; i < n && s == QP_OK; i++) {
        size_t at = c.pos;
        uint64_t h = 0;
        uint8_t rank = 0, qt = 0;
        uint16_t dims[4] = {0, 0, 0, 0};
        uint32_t csize = 0;
        bool ok = qp_cursor_u64(&c, &h) && qp_cursor_u8(&c, &rank);
        for (int d = 0; d < 4 && ok; d++) ok = qp_cursor_u16(&c, &dims[d]);
        ok = ok && qp_cursor_u8(&c, &qt) && qp_cursor_u32(&c, &csize);
        if (!ok) {
            s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor record %" PRIu32 " at offset %zu is truncated",
                        r->path, i, at);
            break;
        }
        ents[i].h = h;
        ents[i].at = at;
        const char *nm = cand_find(cands, n_cand, h);
        char hexname[32];
        if (!nm) {
            snprintf(hexname, sizeof hexname, "0x%016" PRIx64, h);
            nm = hexname;
        }
        if (rank < 1 || rank > 4) {
            s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: rank %u (1..4)", r->path,
                        nm, at + 8, rank);
            break;
        }
        int64_t numel = 1, idims[4];
        for (int d = 0; d < 4; d++) {
            if (dims[d] == 0 || (d >= rank && dims[d] != 1)) {
                s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: dim %d is %u (dims "
                            "are 1..65535, and 1 past the rank %u)", r->path, nm, at + 9 + 2 * (size_t)d,
                            d, dims[d], rank);
                break;
            }
            idims[d] = dims[d];
            numel *= dims[d];
        }
        if (s != QP_OK) break;
        if (qt != QP_BULLET_QT_BQ4) {
            s = qp_fail(r->e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' at offset %zu: quant type %u (only "
                        "0 = BQ4 is implemented by bullet-core's runtime)", r->path, nm, at + 17, qt);
            break;
        }
        if (csize % QP_BULLET_BLOCK_BYTES != 0) {
            s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: compressed size %" PRIu32
                        " is not a whole number of 20-byte BQ4 blocks", r->path, nm, at + 18, csize);
            break;
        }
        size_t data_at = 0;
        if (!qp_size_align(c.pos, QP_BULLET_DATA_ALIGN, &data_at) || data_at > r->size ||
            csize > r->size - data_at) {
            s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s': data at offset %zu + %" PRIu32
                        " bytes runs past the end of the file (%zu bytes)", r->path, nm, data_at, csize,
                        r->size);
            break;
        }
        for (size_t k = c.pos; k < data_at; k++)
            if (r->d[k] != 0) {
                qp_model_add_problem(r->m, "tensor '%s': non-zero padding at offset %zu", nm, k);
                break;
            }
        c.pos = data_at + csize;
        size_t want = 0;
        if (!qp_encoding_padded_row_bytes(QP_ENC_BQ4, numel, &want) || csize != want)
            qp_model_add_problem(r->m, "tensor '%s': shape holds %" PRId64 " elements (%" PRIu64
                                 " BQ4 bytes) but %" PRIu32 " bytes are stored (%" PRIu32
                                 " elements); the runtime cannot use it", nm, numel, (uint64_t)want, csize,
                                 csize / QP_BULLET_BLOCK_BYTES * QP_BULLET_BLOCK_ELEMS);
        if (qp_model_find(r->m, nm)) { /* bullet-core's map would silently keep the last */
            uint64_t prev = 0;
            for (uint32_t j = 0; j < i; j++)
                if (ents[j].h == h) prev = ents[j].at;
            s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor records at offsets %" PRIu64 " and %zu have "
                        "the same name hash 0x%016" PRIx64 " ('%s')", r->path, prev, at, h, nm);
            break;
        }
        qp_tensor *t;
        if ((s = qp_model_add_tensor(r->m, nm, strlen(nm), &t, r->e)) != QP_OK) break;
        if ((s = qp_tensor_set_shape_outer_first(t, idims, rank, r->e)) != QP_OK) break;
        t->enc = QP_ENC_BQ4;
        t->data = r->d + data_at;
        t->nbytes = csize;
        t->offset = data_at;
        t->file_index = 0;
        char canon[64];
        if (nm != hexname && qp_bullet_canon_name(nm, canon, sizeof canon)) {
            if (strcmp(nm, "gen_head.weight") == 0) {
                have_gen = true;
                gen_index = r->m->n_tensors - 1;
            }
            t->canon = qp_arena_strdup(a, canon);
            if (!t->canon) s = qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
        } else if (nm != hexname && strcmp(nm, "output_head.weight") == 0) {
            out_head_index = r->m->n_tensors - 1;
        } else if (nm == hexname) {
            qp_model_add_problem(r->m, "tensor record %" PRIu32 " at offset %zu: hash 0x%016" PRIx64
                                 " matches no name bullet-core's runtime looks up", i, at, h);
        }
    }
    /* the same hash twice: bullet-core's map keeps only the last, silently */
    if (s == QP_OK && n > 1) {
        qsort(ents, n, sizeof *ents, entry_cmp);
        for (uint32_t i = 1; i < n; i++)
            if (ents[i].h == ents[i - 1].h) {
                s = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor records at offsets %" PRIu64 " and %" PRIu64
                            " have the same name hash 0x%016" PRIx64, r->path, ents[i - 1].at,
                            ents[i].at, ents[i].h);
                break;
            }
    }
    /* gen falls back to output_head.weight, as compute_logits does */
    if (s == QP_OK && !have_gen && out_head_index >= 0) {
        r->m->tensors[out_head_index].canon = qp_arena_strdup(a, "output.weight");
        if (!r->m->tensors[out_head_index].canon)
            s = qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    }
    (void)gen_index;
    r->m->arch.tie_embeddings = !have_gen && out_head_index < 0;
    qp_free(cands);
    qp_free(ents);
    if (s != QP_OK) return s;

    /* optional checksum, then the footer */
    size_t end = c.pos;
    if (want_checksum) {
        const uint8_t *p;
        if (!qp_cursor_take(&c, 12, &p) || memcmp(p, "CSUM", 4) != 0)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: the header announces a checksum but there is "
                           "no CSUM record at offset %zu", r->path, end);
        uint64_t want = qp_load_u64le(p + 4);
        uint64_t got = qp_bullet_fnv1a64(r->d, end + 4);
        if (want != got)
            return qp_fail(r->e, QP_ERR_VERIFY, "%s: checksum mismatch at offset %zu: stored 0x%016"
                           PRIx64 ", bytes 0..%zu hash to 0x%016" PRIx64, r->path, end + 4, want,
                           end + 3, got);
        if ((s = meta_str(r, "bullet.checksum", "fnv1a64 ok", 10)) != QP_OK) return s;
        end += 12;
    }
    const uint8_t *f;
    if (!qp_cursor_take(&c, 4, &f) || memcmp(f, "END!", 4) != 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: no \"END!\" footer at offset %zu (file is %zu "
                       "bytes)", r->path, end, r->size);
    if (qp_cursor_left(&c) > 0)
        qp_model_add_problem(r->m, "%zu bytes after the END! footer at offset %zu", qp_cursor_left(&c),
                             end);
    return meta_u64(r, "bullet.weights_end", end);
}

/* ---- entry point ----------------------------------------------------------------------------- */

qp_status qp_bullet_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    (void)o;
    int fi;
    qp_status s = qp_model_add_file(m, path, &fi, e);
    if (s != QP_OK) return s;
    const qp_mapped_file *mf = qp_model_file(m, fi);
    rd r = {m, path, mf->data, mf->size, e, NULL};
    if (r.size < 5 || r.d[0] != '{')
        return qp_fail(e, QP_ERR_FORMAT, "%s: not a .bullet file (no header JSON at offset 0)", path);
    /* header: JSON up to 00 00 00 00, as bullet-core scans it */
    size_t lim = r.size - 4 < QP_BULLET_MAX_HEADER ? r.size - 4 : QP_BULLET_MAX_HEADER, hl = 0;
    while (hl < lim && !(r.d[hl] == 0 && r.d[hl + 1] == 0 && r.d[hl + 2] == 0 && r.d[hl + 3] == 0)) hl++;
    if (hl >= lim)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header JSON at offset 0 has no 00 00 00 00 terminator "
                       "in its first %zu bytes", path, lim);
    const char *json = (const char *)r.d;
    const char *end_parse = NULL;
    r.root = cJSON_ParseWithLengthOpts(json, hl, &end_parse, false);
    if (!r.root) qp_model_add_problem(m, "header is not valid JSON (bullet-core does not need it to be)");
    int64_t hidden, layers, heads, vocab, ctx = 0, tok_start, w_start;
    if ((s = need_int(&r, json, hl, "hidden_size", 1, QP_BULLET_MAX_DIM, &hidden)) != QP_OK ||
        (s = need_int(&r, json, hl, "num_layers", 0, QP_BULLET_MAX_LAYERS, &layers)) != QP_OK ||
        (s = need_int(&r, json, hl, "num_heads", 1, QP_BULLET_MAX_DIM, &heads)) != QP_OK ||
        (s = need_int(&r, json, hl, "vocab_size", 1, QP_BULLET_MAX_VOCAB, &vocab)) != QP_OK ||
        (s = need_int(&r, json, hl, "tokenizer_start", (int64_t)hl + 4, QP_BULLET_INT_MAX,
                      &tok_start)) != QP_OK ||
        (s = need_int(&r, json, hl, "weights_start", tok_start + 12, QP_BULLET_INT_MAX, &w_start)) != QP_OK)
        goto done;
    hdr_int_result kc = hdr_int(json, hl, "max_context", &ctx);
    if (kc == HDR_INT_NOT_INT || kc == HDR_INT_RANGE || ctx < 0) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: header: \"max_context\" is not a non-negative integer", path);
        goto done;
    }
    if ((uint64_t)w_start > r.size) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: header: weights_start %" PRId64 " is past the end of the "
                    "file (%zu bytes)", path, w_start, r.size);
        goto done;
    }
    if (hidden % heads != 0 || (hidden / heads) % 2 != 0) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: header: num_heads %" PRId64 " does not split hidden_size %"
                    PRId64 " into even head widths", path, heads, hidden);
        goto done;
    }
    const char *sv;
    size_t sl;
    if (hdr_str(json, hl, "bullet_version", &sv, &sl)) {
        if ((s = meta_str(&r, "bullet.version", sv, sl)) != QP_OK) goto done;
        if (sl != 3 || memcmp(sv, "1.0", 3) != 0) { /* a later layout is not guessed at */
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: header: bullet_version \"%.*s\" (this reader "
                        "knows 1.0)", path, (int)(sl > 20 ? 20 : sl), sv);
            goto done;
        }
    }
    const char *mn = json_string(&r, "model_name"); /* with escapes decoded when it parses */
    if (mn) {
        if ((s = meta_str(&r, "bullet.model_name", mn, strlen(mn))) != QP_OK) goto done;
    } else if (hdr_str(json, hl, "model_name", &sv, &sl) &&
               (s = meta_str(&r, "bullet.model_name", sv, sl)) != QP_OK) {
        goto done;
    }
    if (hdr_str(json, hl, "architecture", &sv, &sl) &&
        (s = meta_str(&r, "bullet.architecture", sv, sl)) != QP_OK)
        goto done;
    if (hdr_str(json, hl, "type", &sv, &sl) && (sl != 3 || memcmp(sv, "BQ4", 3) != 0)) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: header: quantization type \"%.*s\" (this reader "
                    "knows BQ4)", path, (int)(sl > 20 ? 20 : sl), sv);
        goto done;
    }
    if ((s = meta_u64(&r, "bullet.tokenizer_start", (uint64_t)tok_start)) != QP_OK ||
        (s = meta_u64(&r, "bullet.weights_start", (uint64_t)w_start)) != QP_OK ||
        (s = meta_i32(&r, "bullet.max_context", ctx)) != QP_OK)
        goto done;
    int64_t ffm = 4, theta = 10000, v64;
    if (qp_json_get_int(r.root, "ff_multiplier", 1, 64, &v64)) {
        ffm = v64;
        if ((s = meta_i32(&r, "bullet.ff_multiplier", v64)) != QP_OK) goto done;
    }
    if (qp_json_get_int(r.root, "rope_theta", 1, QP_BULLET_INT_MAX, &v64)) {
        theta = v64;
        if ((s = meta_i32(&r, "bullet.rope_theta", v64)) != QP_OK) goto done;
    }
    /* tasks and labels (ours) */
    const cJSON *tasks = r.root ? cJSON_GetObjectItemCaseSensitive(r.root, "tasks") : NULL;
    if (cJSON_IsArray(tasks)) {
        if ((s = meta_str_array(&r, "bullet.tasks", tasks, QP_BULLET_N_TASKS)) != QP_OK) goto done;
        const cJSON *it;
        cJSON_ArrayForEach(it, tasks) {
            if (!cJSON_IsString(it) || strcmp(it->valuestring, "gen") == 0) continue;
            if (qp_bullet_task_index(it->valuestring) < 1) {
                qp_model_add_problem(m, "task \"%.40s\" is not one bullet-core's runtime knows", it->valuestring);
                continue;
            }
            char key[64], mkey[80];
            snprintf(key, sizeof key, "%s_labels", it->valuestring);
            snprintf(mkey, sizeof mkey, "bullet.%s", key);
            const cJSON *lab = cJSON_GetObjectItemCaseSensitive(r.root, key);
            if (cJSON_IsArray(lab) && (s = meta_str_array(&r, mkey, lab, QP_BULLET_MAX_LABELS)) != QP_OK)
                goto done;
        }
    }
    const char *ck = json_string(&r, "checksum");
    if (ck && strcmp(ck, "fnv1a64") != 0) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: header: checksum \"%.40s\" is not one we know (fnv1a64)",
                    path, ck);
        goto done;
    }

    m->format_version = 1;
    m->arch_name = "bullet";
    qp_arch *ar = &m->arch;
    ar->family = QP_FAMILY_LLAMA;
    ar->hidden = hidden;
    ar->n_layers = layers;
    ar->n_heads = heads;
    ar->n_kv_heads = heads; /* bullet-core's attention has as many K/V heads as Q heads */
    ar->head_dim = hidden / heads;
    ar->intermediate = hidden * ffm; /* bullet-core fixes the FFN at 4 x hidden */
    ar->vocab = vocab;
    ar->max_pos = ctx;
    ar->norm_eps = 1e-5f;            /* bullet-core's rms_norm */
    ar->rope_theta = (float)theta;   /* bullet-core's apply_rope: 10000 */
    ar->rope_style = QP_ROPE_NORM;   /* adjacent pairs */
    ar->act = QP_ACT_SILU;
    uint64_t tok_end = 0;
    if ((s = read_tokenizer(&r, (uint64_t)tok_start, (uint64_t)w_start, vocab, &tok_end)) != QP_OK)
        goto done;
    s = read_weights(&r, (uint64_t)w_start, layers, ck != NULL);
done:
    cJSON_Delete(r.root);
    return s;
}
