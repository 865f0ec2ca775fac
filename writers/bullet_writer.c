/* .bullet writer: compact header JSON (bullet-core's reader finds "key": by substring), BULK
 * tokenizer at a 4 KiB boundary, BWT0 table at a 64-byte boundary with 32-byte aligned BQ4 data,
 * optional CSUM record, END! footer. Layout and limits: readers/bullet.md. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "writers/bullet_writer.h"
#include "core/buf.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"

/* ---- header -------------------------------------------------------------------------------- */

/* Run-length token types: "TxN,TxN,..." (type T for N consecutive ids). */
static void token_types_json(qp_buf *b, const int32_t *types, int64_t n) {
    qp_buf_str(b, "\"token_types\":\"");
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && types[j] == types[i]) j++;
        qp_buf_printf(b, "%s%" PRId32 "x%" PRId64, i ? "," : "", types[i], j - i);
        i = j;
    }
    qp_buf_str(b, "\"");
}

static void build_header(qp_buf *b, const qp_bullet_info *in, uint64_t tok_start, uint64_t w_start) {
    qp_buf_clear(b);
    const char *name = in->model_name ? in->model_name : "bullet-model";
    qp_buf_str(b, "{\"bullet_version\":\"1.0\",\"model_name\":");
    qp_buf_json_str(b, name, strlen(name));
    qp_buf_printf(b, ",\"architecture\":\"bullet-hybrid-transformer\",\"dimensions\":{"
                     "\"hidden_size\":%" PRId64 ",\"num_layers\":%" PRId64 ",\"num_heads\":%" PRId64 "}",
                  in->hidden, in->n_layers, in->n_heads);
    qp_buf_str(b, ",\"quantization\":{\"type\":\"BQ4\"}");
    qp_buf_printf(b, ",\"vocab_size\":%" PRId64 ",\"max_context\":%" PRId64, in->vocab.n_tokens,
                  in->max_context);
    qp_buf_printf(b, ",\"file_offsets\":{\"tokenizer_start\":%" PRIu64 ",\"weights_start\":%" PRIu64
                     "}", tok_start, w_start);
    if (in->ff_multiplier > 0) qp_buf_printf(b, ",\"ff_multiplier\":%" PRId64, in->ff_multiplier);
    if (in->rope_theta > 0) qp_buf_printf(b, ",\"rope_theta\":%" PRId64, in->rope_theta);
    if (in->has_gen || in->n_heads_info > 0) {
        qp_buf_str(b, ",\"tasks\":[");
        bool first = true;
        if (in->has_gen) {
            qp_buf_str(b, "\"gen\"");
            first = false;
        }
        for (int64_t i = 0; i < in->n_heads_info; i++) {
            if (!first) qp_buf_str(b, ",");
            qp_buf_json_str(b, in->heads[i].task, strlen(in->heads[i].task));
            first = false;
        }
        qp_buf_str(b, "]");
        for (int64_t i = 0; i < in->n_heads_info; i++) {
            qp_buf_printf(b, ",\"%s_labels\":[", in->heads[i].task);
            for (int64_t k = 0; k < in->heads[i].n_labels; k++) {
                if (k) qp_buf_str(b, ",");
                const char *l = in->heads[i].labels[k];
                qp_buf_json_str(b, l, strlen(l));
            }
            qp_buf_str(b, "]");
        }
    }
    const qp_bullet_vocab *v = &in->vocab;
    if (v->model) {
        qp_buf_str(b, ",\"tokenizer_model\":");
        qp_buf_json_str(b, v->model, strlen(v->model));
        if (v->pre) {
            qp_buf_str(b, ",\"tokenizer_pre\":");
            qp_buf_json_str(b, v->pre, strlen(v->pre));
        }
        qp_buf_printf(b, ",\"bos_id\":%" PRId32 ",\"eos_id\":%" PRId32 ",\"unk_id\":%" PRId32
                         ",\"pad_id\":%" PRId32 ",\"add_bos\":%d",
                      v->bos_id, v->eos_id, v->unk_id, v->pad_id, v->add_bos ? 1 : 0);
        if (v->types) {
            qp_buf_str(b, ",");
            token_types_json(b, v->types, v->n_tokens);
        }
    }
    if (in->checksum) qp_buf_str(b, ",\"checksum\":\"fnv1a64\"");
    qp_buf_str(b, "}");
}

/* ---- checks -------------------------------------------------------------------------------- */

static size_t tok_len(const qp_bullet_vocab *v, int64_t i) {
    return v->token_lens ? v->token_lens[i] : strlen(v->tokens[i]);
}

static qp_status check_info(const char *path, const qp_bullet_info *in, uint64_t *tok_bytes,
                            qp_err *e) {
    const qp_bullet_vocab *v = &in->vocab;
    if (in->hidden <= 0 || in->hidden > QP_BULLET_MAX_DIM || in->hidden % 32 != 0)
        return qp_fail(e, QP_ERR_LIMIT, "%s: hidden size %" PRId64 " must be a multiple of 32 in "
                       "1..65535 (bullet-core reads rows as whole 32-element BQ4 blocks)",
                       path, in->hidden);
    if (in->n_layers < 0 || in->n_layers > QP_BULLET_MAX_LAYERS || in->n_heads <= 0 ||
        in->hidden % in->n_heads != 0 || in->max_context < 0 || in->max_context > QP_BULLET_INT_MAX)
        return qp_fail(e, QP_ERR_LIMIT, "%s: layers %" PRId64 ", heads %" PRId64 ", context %" PRId64
                       " out of range (heads must divide hidden %" PRId64 ")", path, in->n_layers,
                       in->n_heads, in->max_context, in->hidden);
    if (v->n_tokens <= 0 || v->n_tokens > QP_BULLET_MAX_VOCAB || !v->tokens)
        return qp_fail(e, QP_ERR_LIMIT, "%s: vocabulary of %" PRId64 " tokens: .bullet needs "
                       "1..65535 (the embedding's row count is a u16 dim)", path, v->n_tokens);
    if (v->n_merges < 0 || v->n_merges > QP_BULLET_MAX_MERGES || (v->n_merges && !v->merges))
        return qp_fail(e, QP_ERR_LIMIT, "%s: %" PRId64 " merges (limit %u)", path, v->n_merges,
                       QP_BULLET_MAX_MERGES);
    uint64_t nb = 8 + 4;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        size_t l = tok_len(v, i);
        if (!v->tokens[i] || l > 0xffff)
            return qp_fail(e, QP_ERR_LIMIT, "%s: token %" PRId64 " is %zu bytes; BULK lengths are "
                           "u16 (at most 65535)", path, i, l);
        nb += 6 + l;
    }
    for (int64_t i = 0; i < v->n_merges; i++) {
        const char *m = v->merges[i];
        const char *sp = m ? strchr(m, ' ') : NULL;
        if (!sp)
            return qp_fail(e, QP_ERR_ARG, "%s: merge %" PRId64 " is not \"left right\"", path, i);
        size_t l1 = (size_t)(sp - m), l2 = strlen(sp + 1);
        if (l1 > 0xffff || l2 > 0xffff)
            return qp_fail(e, QP_ERR_LIMIT, "%s: merge %" PRId64 ": a side exceeds 65535 bytes", path, i);
        nb += 4 + l1 + l2;
    }
    for (int64_t h = 0; h < in->n_heads_info; h++) {
        int ti = qp_bullet_task_index(in->heads[h].task);
        if (ti <= 0 || strcmp(in->heads[h].task, qp_bullet_tasks[ti]) != 0)
            return qp_fail(e, QP_ERR_ARG, "%s: head '%s' is not one bullet-core's runtime looks up "
                           "(ner, pos, sentiment, classifier)", path, in->heads[h].task);
        if (in->heads[h].n_labels < 1 || in->heads[h].n_labels > QP_BULLET_MAX_LABELS)
            return qp_fail(e, QP_ERR_LIMIT, "%s: head '%s' has %" PRId64 " labels (1..%d)", path,
                           in->heads[h].task, in->heads[h].n_labels, QP_BULLET_MAX_LABELS);
    }
    *tok_bytes = nb;
    return QP_OK;
}

static uint64_t tensor_hash(const qp_bullet_tensor *t) {
    return t->use_hash ? t->hash : qp_bullet_fnv1a64(t->name, strlen(t->name));
}

static qp_status check_tensor(const char *path, const qp_bullet_tensor *t, int64_t *numel,
                              qp_err *e) {
    if (!t->name || !*t->name) return qp_fail(e, QP_ERR_ARG, "%s: a tensor has no name", path);
    if (t->rank < 1 || t->rank > 4)
        return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s': rank %d (1..4)", path, t->name, t->rank);
    int64_t n = 1;
    for (int d = 0; d < 4; d++) {
        int64_t v = d < t->rank ? t->dims[d] : 1;
        if (v < 1 || v > QP_BULLET_MAX_DIM)
            return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s': dim %d is %" PRId64 "; .bullet dims "
                           "are u16 (1..65535)", path, t->name, d, v);
        n *= v;
    }
    int64_t row = t->dims[t->rank - 1];
    if (t->rank > 1 && row % QP_BULLET_BLOCK_ELEMS != 0)
        return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s': rows of %" PRId64 " elements are not a "
                       "multiple of 32; bullet-core's runtime reads every row as whole BQ4 blocks "
                       "and would misread it", path, t->name, row);
    size_t bytes = 0;
    if (!qp_encoding_padded_row_bytes(QP_ENC_BQ4, n, &bytes) || bytes > 0xffffffffULL)
        return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s': %" PRId64 " elements exceed the u32 "
                       "compressed size", path, t->name, n);
    int srcs = (t->bq4 != NULL) + (t->f32 != NULL) + (t->fill != NULL);
    if (srcs != 1)
        return qp_fail(e, QP_ERR_ARG, "%s: tensor '%s': give exactly one of bq4, f32, fill", path,
                       t->name);
    if (t->bq4 && t->bq4_bytes != bytes)
        return qp_fail(e, QP_ERR_ARG, "%s: tensor '%s': %zu BQ4 bytes for %" PRId64 " elements", path,
                       t->name, t->bq4_bytes, n);
    *numel = n;
    return QP_OK;
}

/* ---- BQ4 ------------------------------------------------------------------------------------
 * The encodings table's BQ4 encoder (encodings/enc_bq4.c) is the only encoder: it includes the
 * bracketing refinement for one-signed blocks that once lived here. qp_bullet_bq4_refine stays
 * for callers of the old two-step API: it re-encodes every whole block with the table, which
 * gives back what the table wrote (the encoder is deterministic). */
void qp_bullet_bq4_refine(const float *x, uint8_t *y, int64_t n) {
    const int64_t be = qp_encoding_get(QP_ENC_BQ4)->block_elems;
    if (n >= be) qp_encoding_get(QP_ENC_BQ4)->quantize_ref(x, y, n / be * be);
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct wctx {
    qp_outfile *f;
    uint64_t h;
    qp_err *e;
} wctx;

static qp_status put(wctx *w, const void *p, size_t n) {
    w->h = qp_bullet_fnv1a64_update(w->h, p, n);
    return qp_outfile_write(w->f, p, n, w->e);
}

static qp_status pad_to(wctx *w, uint64_t off) {
    static const uint8_t z[64] = {0};
    qp_status s = QP_OK;
    while (s == QP_OK && qp_outfile_tell(w->f) < off) {
        uint64_t k = off - qp_outfile_tell(w->f);
        s = put(w, z, k > sizeof z ? sizeof z : (size_t)k);
    }
    return s;
}

static qp_status put_u16(wctx *w, uint16_t v) {
    uint8_t b[2];
    qp_store_u16le(b, v);
    return put(w, b, 2);
}
static qp_status put_u32(wctx *w, uint32_t v) {
    uint8_t b[4];
    qp_store_u32le(b, v);
    return put(w, b, 4);
}

static qp_status write_tokenizer(wctx *w, const qp_bullet_vocab *v) {
    qp_status s = put(w, "BULK", 4);
    if (s == QP_OK) s = put_u32(w, (uint32_t)v->n_tokens);
    for (int64_t i = 0; s == QP_OK && i < v->n_tokens; i++) {
        uint8_t b[6];
        qp_store_f32le(b, v->scores ? v->scores[i] : 0.0f);
        size_t l = tok_len(v, i);
        qp_store_u16le(b + 4, (uint16_t)l);
        s = put(w, b, 6);
        if (s == QP_OK) s = put(w, v->tokens[i], l);
    }
    if (s == QP_OK) s = put_u32(w, (uint32_t)v->n_merges);
    for (int64_t i = 0; s == QP_OK && i < v->n_merges; i++) {
        const char *m = v->merges[i], *sp = strchr(m, ' ');
        size_t l1 = (size_t)(sp - m), l2 = strlen(sp + 1);
        s = put_u16(w, (uint16_t)l1);
        if (s == QP_OK) s = put(w, m, l1);
        if (s == QP_OK) s = put_u16(w, (uint16_t)l2);
        if (s == QP_OK) s = put(w, sp + 1, l2);
    }
    return s;
}

static qp_status write_tensor(wctx *w, const char *path, const qp_bullet_tensor *t, int64_t n,
                              float **fbuf, size_t *fcap, uint8_t **bbuf, size_t *bcap) {
    uint8_t rec[8 + 1 + 8 + 1 + 4];
    /* a 1-D tensor's last block is zero-padded, as the builder does */
    int64_t npad = (n + QP_BULLET_BLOCK_ELEMS - 1) / QP_BULLET_BLOCK_ELEMS * QP_BULLET_BLOCK_ELEMS;
    size_t bytes = (size_t)(npad / QP_BULLET_BLOCK_ELEMS) * QP_BULLET_BLOCK_BYTES;
    qp_store_u64le(rec, tensor_hash(t));
    rec[8] = (uint8_t)t->rank;
    for (int d = 0; d < 4; d++) qp_store_u16le(rec + 9 + 2 * d, (uint16_t)(d < t->rank ? t->dims[d] : 1));
    rec[17] = QP_BULLET_QT_BQ4;
    qp_store_u32le(rec + 18, (uint32_t)bytes);
    qp_status s = put(w, rec, sizeof rec);
    if (s == QP_OK) {
        size_t at;
        if (!qp_size_align((size_t)qp_outfile_tell(w->f), QP_BULLET_DATA_ALIGN, &at))
            return qp_fail(w->e, QP_ERR_LIMIT, "%s: file too large", path);
        s = pad_to(w, at);
    }
    if (s != QP_OK) return s;
    if (t->bq4) return put(w, t->bq4, bytes);
    const float *src = t->f32;
    if (!src || npad != n) {
        if ((size_t)npad > *fcap) {
            qp_free(*fbuf);
            *fcap = 0;
            *fbuf = qp_malloc((size_t)npad * sizeof(float));
            if (!*fbuf) return qp_fail(w->e, QP_ERR_NOMEM, "%s: out of memory for tensor '%s'", path, t->name);
            *fcap = (size_t)npad;
        }
        if (src) memcpy(*fbuf, src, (size_t)n * sizeof(float));
        else if ((s = t->fill(t->ud, t, *fbuf, w->e)) != QP_OK) return s;
        for (int64_t k = n; k < npad; k++) (*fbuf)[k] = 0.0f;
        src = *fbuf;
    }
    if (bytes > *bcap) {
        qp_free(*bbuf);
        *bcap = 0;
        *bbuf = qp_malloc(bytes);
        if (!*bbuf) return qp_fail(w->e, QP_ERR_NOMEM, "%s: out of memory for tensor '%s'", path, t->name);
        *bcap = bytes;
    }
    if (!qp_encoding_quantize_tensor(QP_ENC_BQ4, src, *bbuf, npad))
        return qp_fail(w->e, QP_ERR_INTERNAL, "%s: tensor '%s': BQ4 encoding failed", path, t->name);
    return put(w, *bbuf, bytes);
}

qp_status qp_bullet_write(const char *path, const qp_bullet_info *in,
                          const qp_bullet_tensor *tensors, int64_t n_tensors, qp_err *e) {
    if (!path || !in || (n_tensors > 0 && !tensors) || n_tensors < 0)
        return qp_fail(e, QP_ERR_ARG, "qp_bullet_write: bad argument");
    if (n_tensors > (int64_t)QP_BULLET_MAX_TENSORS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: %" PRId64 " tensors (limit %u)", path, n_tensors,
                       QP_BULLET_MAX_TENSORS);
    uint64_t tok_bytes = 0;
    qp_status s = check_info(path, in, &tok_bytes, e);
    if (s != QP_OK) return s;
    int64_t *numel = qp_calloc(n_tensors > 0 ? (size_t)n_tensors : 1, sizeof *numel);
    if (!numel) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < n_tensors && s == QP_OK; i++) {
        s = check_tensor(path, &tensors[i], &numel[i], e);
        if (s != QP_OK) break;
        uint64_t hi = tensor_hash(&tensors[i]);
        for (int64_t j = 0; j < i && s == QP_OK; j++)
            if (tensor_hash(&tensors[j]) == hi)
                s = qp_fail(e, QP_ERR_ARG, "%s: tensors '%s' and '%s' have the same FNV-1a 64 hash "
                            "(bullet-core keys tensors by hash)", path, tensors[j].name, tensors[i].name);
    }
    /* offsets: header JSON (+4 zero bytes) in 4096 bytes, or whole 4 KiB pages when longer */
    qp_buf hb = {0};
    uint64_t tok_start = QP_BULLET_HEADER_RESERVE, w_start = 0;
    for (int iter = 0; iter < 4 && s == QP_OK; iter++) {
        uint64_t ws = tok_start + tok_bytes;
        ws = (ws + QP_BULLET_WEIGHTS_ALIGN - 1) / QP_BULLET_WEIGHTS_ALIGN * QP_BULLET_WEIGHTS_ALIGN;
        w_start = ws;
        build_header(&hb, in, tok_start, w_start);
        if (hb.oom) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for the header", path);
        else if (hb.len + 4 > QP_BULLET_MAX_HEADER)
            s = qp_fail(e, QP_ERR_LIMIT, "%s: header JSON of %zu bytes exceeds %u", path, hb.len,
                        QP_BULLET_MAX_HEADER);
        else if (hb.len + 4 <= tok_start) break;
        else tok_start = (hb.len + 4 + QP_BULLET_TOK_ALIGN - 1) / QP_BULLET_TOK_ALIGN * QP_BULLET_TOK_ALIGN;
    }
    if (s == QP_OK && (hb.len + 4 > tok_start || w_start > (uint64_t)QP_BULLET_INT_MAX))
        s = qp_fail(e, QP_ERR_LIMIT, "%s: the tokenizer section ends past 2^31 (bullet-core parses "
                    "offsets with std::stoi)", path);
    wctx w = {NULL, 0xcbf29ce484222325ULL, e};
    if (s == QP_OK) s = qp_outfile_open(path, &w.f, e);
    if (s == QP_OK) s = put(&w, hb.p, hb.len);
    if (s == QP_OK) s = pad_to(&w, tok_start);
    if (s == QP_OK) s = write_tokenizer(&w, &in->vocab);
    if (s == QP_OK) s = pad_to(&w, w_start);
    if (s == QP_OK) s = put(&w, "BWT0", 4);
    if (s == QP_OK) s = put_u32(&w, (uint32_t)n_tensors);
    float *fbuf = NULL;
    uint8_t *bbuf = NULL;
    size_t fcap = 0, bcap = 0;
    for (int64_t i = 0; i < n_tensors && s == QP_OK; i++)
        s = write_tensor(&w, path, &tensors[i], numel[i], &fbuf, &fcap, &bbuf, &bcap);
    qp_free(fbuf);
    qp_free(bbuf);
    if (s == QP_OK && in->checksum) {
        uint8_t rec[12];
        memcpy(rec, "CSUM", 4);
        uint64_t h = qp_bullet_fnv1a64_update(w.h, "CSUM", 4);
        qp_store_u64le(rec + 4, h);
        s = qp_outfile_write(w.f, rec, sizeof rec, e);
    }
    if (s == QP_OK) s = qp_outfile_write(w.f, "END!", 4, e);
    if (w.f) {
        if (s == QP_OK) s = qp_outfile_commit(w.f, e);
        else qp_outfile_abort(w.f);
    }
    qp_buf_free(&hb);
    qp_free(numel);
    return s;
}

/* ---- a .bullet model back into writer input ----------------------------------------------- */

static const qp_meta *meta(const qp_model *m, const char *k) { return qp_model_meta(m, k); }

static int64_t meta_int(const qp_model *m, const char *k, int64_t dflt) {
    const qp_meta *md = meta(m, k);
    if (!md) return dflt;
    return md->type == QP_META_U64 ? (int64_t)md->v.u : md->v.i;
}

/* A GGUF-style string array (u64 length + bytes each) -> one qp_malloc'd block holding the
 * pointer array and the NUL-terminated strings. */
static char **str_array(const qp_meta *md, int64_t *n) {
    if (!md || md->type != QP_META_ARRAY || md->arr_type != QP_META_STRING || !md->raw) return NULL;
    size_t need = (size_t)md->n * (sizeof(char *) + 1) + md->raw_size;
    char **arr = qp_malloc(need);
    if (!arr) return NULL;
    char *s = (char *)(arr + md->n);
    size_t o = 0;
    for (uint64_t i = 0; i < md->n; i++) {
        uint64_t l = qp_load_u64le(md->raw + o);
        memcpy(s, md->raw + o + 8, (size_t)l);
        s[l] = '\0';
        arr[i] = s;
        s += l + 1;
        o += 8 + (size_t)l;
    }
    *n = (int64_t)md->n;
    return arr;
}

static const char *tok_model_name(qp_tok_model t) {
    switch (t) {
    case QP_TOK_SPM: return "llama";
    case QP_TOK_BPE: return "gpt2";
    case QP_TOK_WPM: return "bert";
    default: return NULL;
    }
}

static bool parse_hex_name(const char *s, uint64_t *h) {
    if (strncmp(s, "0x", 2) != 0 || strlen(s) != 18) return false;
    uint64_t v = 0;
    for (int i = 2; i < 18; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *h = v;
    return true;
}

qp_status qp_bullet_info_from_model(const qp_model *m, qp_bullet_info *in, qp_bullet_head_info **heads,
                                    qp_bullet_tensor **tensors, int64_t *n_tensors, qp_err *e) {
    memset(in, 0, sizeof *in);
    *heads = NULL;
    *tensors = NULL;
    *n_tensors = 0;
    if (m->format != QP_FORMAT_BULLET)
        return qp_fail(e, QP_ERR_ARG, "%s: not a .bullet model", m->path);
    const qp_meta *nm = meta(m, "bullet.model_name");
    in->model_name = nm && nm->type == QP_META_STRING ? nm->str : NULL;
    in->hidden = m->arch.hidden;
    in->n_layers = m->arch.n_layers;
    in->n_heads = m->arch.n_heads;
    in->max_context = meta_int(m, "bullet.max_context", m->arch.max_pos);
    in->ff_multiplier = meta_int(m, "bullet.ff_multiplier", 0);
    in->rope_theta = meta_int(m, "bullet.rope_theta", 0);
    in->checksum = meta(m, "bullet.checksum") != NULL;
    const qp_vocab *v = &m->vocab;
    qp_bullet_vocab *bv = &in->vocab;
    bv->n_tokens = v->n_tokens;
    bv->tokens = (const char *const *)v->tokens;
    bv->token_lens = v->token_lens;
    bv->scores = v->scores;
    bv->types = v->types;
    bv->n_merges = v->n_merges;
    bv->merges = (const char *const *)v->merges;
    bv->model = tok_model_name(v->model);
    const qp_meta *pre = meta(m, "bullet.tokenizer_pre");
    bv->pre = pre && pre->type == QP_META_STRING ? pre->str : NULL;
    bv->bos_id = v->bos_id;
    bv->eos_id = v->eos_id;
    bv->unk_id = v->unk_id;
    bv->pad_id = v->pad_id;
    bv->add_bos = v->add_bos;
    int64_t n_tasks = 0;
    char **tasks = str_array(meta(m, "bullet.tasks"), &n_tasks);
    if (tasks) {
        *heads = qp_calloc((size_t)n_tasks, sizeof **heads);
        if (!*heads) {
            qp_free(tasks);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        }
        for (int64_t i = 0; i < n_tasks; i++) {
            if (strcmp(tasks[i], "gen") == 0) {
                in->has_gen = true;
                continue;
            }
            int ti = qp_bullet_task_index(tasks[i]);
            if (ti < 1) continue;
            char key[64];
            snprintf(key, sizeof key, "bullet.%s_labels", qp_bullet_tasks[ti]);
            int64_t nl = 0;
            char **labels = str_array(meta(m, key), &nl);
            if (!labels) continue;
            qp_bullet_head_info *h = &(*heads)[in->n_heads_info++];
            h->task = qp_bullet_tasks[ti];
            h->labels = (const char *const *)labels;
            h->n_labels = nl;
        }
        qp_free(tasks);
        in->heads = *heads;
    }
    *tensors = qp_calloc(m->n_tensors > 0 ? (size_t)m->n_tensors : 1, sizeof **tensors);
    if (!*tensors) {
        qp_bullet_info_free(in, *heads, NULL);
        *heads = NULL;
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    }
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        qp_bullet_tensor *b = &(*tensors)[i];
        b->name = t->name;
        b->use_hash = parse_hex_name(t->name, &b->hash);
        b->rank = t->n_dims;
        for (int d = 0; d < t->n_dims && d < 4; d++) b->dims[d] = t->ne[t->n_dims - 1 - d];
        b->bq4 = t->data;
        b->bq4_bytes = t->nbytes;
    }
    *n_tensors = m->n_tensors;
    return QP_OK;
}

void qp_bullet_info_free(qp_bullet_info *in, qp_bullet_head_info *heads, qp_bullet_tensor *tensors) {
    if (in && heads)
        for (int64_t i = 0; i < in->n_heads_info; i++) qp_free((void *)heads[i].labels);
    qp_free(heads);
    qp_free(tensors);
    if (in) {
        in->heads = NULL;
        in->n_heads_info = 0;
    }
}
