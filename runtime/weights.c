/* Binds a qp_model's tensors, by canonical GGUF-style name, into per-layer weight views.
 * Matrices stay in place (borrowed from the model's mapping) and are read through the encodings
 * traits table; 1-D tensors (norms, biases) are dequantized once into owned F32 arrays. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rope.h"
#include "readers/gguf_meta.h"
#include "readers/model_check.h"
#include "runtime/runtime_internal.h"

/* Finds a tensor; NULL (without error) when absent. */
static const qp_tensor *find(const qp_model *m, const char *name) { return qp_model_find(m, name); }

/* The model being bound and, per tensor of it (by index), whether the runtime consumed it: after
 * binding every tensor must be consumed or left out by a named rule (check_all_consumed). */
typedef struct binder {
    const qp_model *m;
    uint8_t *used;
} binder;

static void mark_used(const binder *b, const qp_tensor *t) {
    if (t) b->used[t - b->m->tensors] = 1;
}

/* Checks the traits and the byte size of a tensor of rows x cols elements. */
static qp_status check_bytes(const qp_model *m, const qp_tensor *t, int64_t rows, int64_t cols,
                             size_t *row_bytes, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (!tr)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has an unknown encoding", m->path,
                       t->name);
    if (!tr->dequantize && !tr->vec_dot_f32)
        return qp_fail(e, QP_ERR_UNSUPPORTED,
                       "%s: tensor '%s': encoding %s cannot be read by the runtime (no dequantize "
                       "or vec_dot_f32 in the traits table)", m->path, t->name, tr->upper_name);
    if ((tr->flags & QP_ENC_FLAG_EXT_SCALE) && tr->tensor_trailer_bytes == 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED,
                       "%s: tensor '%s': encoding %s keeps its scales in a sibling tensor, which "
                       "the runtime does not bind", m->path, t->name, tr->upper_name);
    size_t rb, total;
    if (!qp_encoding_row_bytes(t->enc, cols, &rb))
        return qp_fail(e, QP_ERR_CORRUPT,
                       "%s: tensor '%s': row of %lld elements is not a whole number of %s blocks",
                       m->path, t->name, (long long)cols, tr->upper_name);
    if (!qp_size_mul(rb, (size_t)rows, &total) ||
        !qp_size_add(total, tr->tensor_trailer_bytes, &total) || !t->data || t->nbytes < total)
        return qp_fail(e, QP_ERR_CORRUPT,
                       "%s: tensor '%s' at offset %llu: %zu bytes, %lld rows of %zu bytes needed",
                       m->path, t->name, (unsigned long long)t->offset, t->nbytes,
                       (long long)rows, rb);
    *row_bytes = rb;
    return QP_OK;
}

/* A microsoft/bitnet-b1.58 packed projection (U8 [out/4, in] + "<base>.weight_scale", W =
 * q * weight_scale; encodings/enc_ternary.md) unpacked into runtime-owned rows: I2_S codes (x86
 * layout, 2 bits per weight, integer dot) when in % 128 == 0, else one int8 per weight; the
 * weight_scale becomes the matrix scale. Same weights as the float checkpoint, exactly. */
static qp_status bind_packed(const binder *b, const qp_tensor *t, const char *name, int64_t cols,
                             int64_t rows, qp_wmat *w, qp_err *e) {
    const qp_model *m = b->m;
    char sn[160];
    size_t nl = strlen(name);
    if (nl < 7 || strcmp(name + nl - 7, ".weight") != 0 ||
        snprintf(sn, sizeof sn, "%s_scale", name) >= (int)sizeof sn)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': packed U8 weights need a "
                       "'<name>.weight_scale'", m->path, name);
    const qp_tensor *st = find(m, sn);
    const qp_encoding_traits *str = st ? qp_encoding_get(st->enc) : NULL;
    if (!st || !str || !str->dequantize || qp_tensor_nelements(st) != 1 || !st->data ||
        st->nbytes < str->block_bytes || str->block_elems != 1)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': packed U8 weights without a "
                       "one-element float '%s'", m->path, name, sn);
    float ws;
    str->dequantize(st->data, &ws, 1);
    mark_used(b, st);
    if (!isfinite(ws))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' is not finite", m->path, sn);
    size_t n = (size_t)rows * (size_t)cols; /* rows, cols bounded by the config checks */
    if (t->nbytes < n / 4 || !t->data)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu: %zu bytes, %zu needed",
                       m->path, name, (unsigned long long)t->offset, t->nbytes, n / 4);
    int8_t *q = qp_malloc(n);
    if (!q) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor '%s'", m->path, name);
    int64_t bad = -1;
    if (!qp_bitnet_u8_unpack(t->data, rows, cols, q, &bad)) {
        qp_free(q);
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu: code 3 (not ternary) "
                       "at weight %lld", m->path, name, (unsigned long long)t->offset,
                       (long long)bad);
    }
    w->name = t->canon ? t->canon : t->name;
    w->rows = rows;
    w->cols = cols;
    w->scale = ws;
    const qp_encoding_traits *i2s = qp_encoding_get(QP_ENC_I2_S);
    if (cols % i2s->block_elems == 0) { /* rows of I2_S blocks (encodings/enc_ternary.md) */
        uint8_t *codes = qp_malloc(n / 4);
        if (!codes) {
            qp_free(q);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor '%s'", m->path, name);
        }
        qp_i2s_pack_levels(q, codes, (int64_t)n);
        qp_free(q);
        w->owned = codes;
        w->tr = i2s;
        w->row_bytes = (size_t)cols / 4;
    } else {
        w->owned = (uint8_t *)q;
        w->tr = qp_encoding_get(QP_ENC_I8);
        w->row_bytes = (size_t)cols;
    }
    w->data = w->owned;
    w->act_i8 = true;
    w->use_i8 = w->tr->vec_dot_i8 != NULL;
    return QP_OK;
}

/* A BitNet projection's "<base>.scale", when present, must be what llama.cpp creates for it (one
 * element; F32 or F16 here): anything else would be silently ignored, so it is refused. */
static qp_status check_projection_scale(const qp_model *m, const char *name, bool bitnet_proj,
                                        qp_err *e) {
    char sn[160];
    const qp_tensor *st = bitnet_proj && qp_gguf_scale_name(name, sn, sizeof sn)
                              ? qp_model_find(m, sn) : NULL;
    if (!st || (qp_tensor_nelements(st) == 1 && (st->enc == QP_ENC_F32 || st->enc == QP_ENC_F16)))
        return QP_OK;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: scale tensor '%s' at offset %llu of '%s': %s with "
                   "%lld elements; one F32 or F16 element expected", m->path, sn,
                   (unsigned long long)st->offset, name, qp_encoding_get(st->enc)->upper_name,
                   (long long)qp_tensor_nelements(st));
}

/* bitnet_proj: one of the seven projections of a BitNet b1.58 model, whose inputs are int8-
 * quantized per token whatever the weight encoding when act_int8 (the model's arithmetic), and
 * stay float otherwise (llama.cpp's "bitnet"; runtime.md). */
static qp_status bind_mat(const binder *b, const char *name, int64_t cols, int64_t rows,
                          bool need_dequant, bool bitnet_proj, bool act_int8, qp_wmat *w,
                          qp_err *e) {
    const qp_model *m = b->m;
    const qp_tensor *t = NULL;
    qp_status s = qp_model_need(m, name, &t, e);
    if (s != QP_OK) return s;
    mark_used(b, t);
    if (bitnet_proj && qp_model_check_is_packed(t, cols, rows))
        return bind_packed(b, t, name, cols, rows, w, e);
    /* shapes: checked by qp_model_check */
    size_t rb;
    if ((s = check_bytes(m, t, rows, cols, &rb, e)) != QP_OK) return s;
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (need_dequant && !tr->dequantize)
        return qp_fail(e, QP_ERR_UNSUPPORTED,
                       "%s: tensor '%s': encoding %s has no dequantize (needed for row lookups)",
                       m->path, name, tr->upper_name);
    w->name = t->canon ? t->canon : t->name;
    w->data = t->data;
    w->tr = tr;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = rb;
    w->scale = 1.0f;
    if ((tr->flags & QP_ENC_FLAG_EXT_SCALE) &&
        !qp_encoding_tensor_scale(t->enc, t->data, t->nbytes, rows * cols, &w->scale))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu: cannot read its %s "
                       "tensor scale", m->path, name, (unsigned long long)t->offset,
                       tr->upper_name);
    /* QK256 keeps its per-tensor scale in a sibling F32 "<base>.scale" (converters/recipes.md);
     * without one the rows run at unit scale (BitNet-rs GgmlQk256NoScale). A BitNet projection
     * of any encoding may have one too: llama.cpp's and bitnet.cpp's graphs multiply the
     * product by it (their optional wq_scale ... ffn_down_scale; runtime.md). */
    float sib;
    if ((s = check_projection_scale(m, name, bitnet_proj, e)) != QP_OK) return s;
    if (bitnet_proj ? qp_gguf_projection_scale(m, t, &sib) : qp_gguf_sibling_scale(m, t, &sib)) {
        if (!isfinite(sib))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': its sibling scale is not finite",
                           m->path, name);
        w->scale *= sib;
        char sn[160];
        if (qp_gguf_scale_name(name, sn, sizeof sn)) mark_used(b, find(m, sn));
    }
    w->act_i8 = bitnet_proj ? act_int8 : (tr->flags & QP_ENC_FLAG_TERNARY) != 0;
    w->use_i8 = w->act_i8 && tr->vec_dot_i8 != NULL;
    return QP_OK;
}

/* Expert x's kind-k matrix of layer l: a slice of llama.cpp's merged 3-D tensor or its own 2-D
 * one (readers/model_check.h), used in place. */
static qp_status bind_expert(const binder *b, const qp_runtime_config *cfg, int64_t l,
                             qp_expert_kind k, int64_t x, qp_wmat *w, qp_err *e) {
    const qp_model *m = b->m;
    bool down = k == QP_EXPERT_DOWN;
    int64_t cols = down ? cfg->ffn_dim : cfg->dim, rows = down ? cfg->dim : cfg->ffn_dim;
    const qp_tensor *t;
    int64_t slice;
    qp_status s = qp_model_expert(m, l, k, x, cfg->n_experts, cols, rows, &t, &slice, e);
    size_t rb;
    /* rows x slices <= 2^22 x 512: no overflow (model_check's ranges) */
    if (s == QP_OK) s = check_bytes(m, t, rows * t->ne[2], cols, &rb, e);
    if (s != QP_OK) return s;
    mark_used(b, t);
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (tr->flags & (QP_ENC_FLAG_EXT_SCALE | QP_ENC_FLAG_SIBLING_SCALE))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': %s keeps a per-tensor scale, which "
                       "the runtime does not split between experts", m->path, t->name,
                       tr->upper_name);
    memset(w, 0, sizeof *w);
    w->name = t->canon ? t->canon : t->name;
    w->data = t->data + (size_t)slice * (size_t)rows * rb;
    w->tr = tr;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = rb;
    w->scale = 1.0f;
    w->act_i8 = (tr->flags & QP_ENC_FLAG_TERNARY) != 0;
    w->use_i8 = w->act_i8 && tr->vec_dot_i8 != NULL;
    return QP_OK;
}

/* A MoE layer's router and experts. */
static qp_status bind_moe(const binder *b, const qp_runtime_config *cfg, int64_t l,
                          qp_layer_weights *L, qp_err *e) {
    const qp_model *m = b->m;
    char nm[96];
    snprintf(nm, sizeof nm, "blk.%lld.ffn_gate_inp.weight", (long long)l);
    qp_status s = bind_mat(b, nm, cfg->dim, cfg->n_experts, false, false, false, &L->router, e);
    if (s != QP_OK) return s;
    L->experts = qp_calloc((size_t)cfg->n_experts * 3, sizeof *L->experts);
    if (!L->experts) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    for (int64_t x = 0; s == QP_OK && x < cfg->n_experts; x++)
        for (int k = 0; s == QP_OK && k < 3; k++)
            s = bind_expert(b, cfg, l, (qp_expert_kind)k, x, &L->experts[3 * x + k], e);
    return s;
}

/* A 1-D tensor of n elements into a new F32 array. Absent and optional: *out = NULL. */
static qp_status bind_vec(const binder *b, const char *name, int64_t n, bool optional,
                          float **out, qp_err *e) {
    const qp_model *m = b->m;
    *out = NULL;
    const qp_tensor *t = find(m, name);
    if (!t && optional) return QP_OK;
    qp_status s = t ? QP_OK : qp_model_need(m, name, &t, e);
    if (s != QP_OK) return s;
    size_t rb;
    s = check_bytes(m, t, 1, n, &rb, e);
    if (s != QP_OK) return s;
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (!tr->dequantize)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding %s has no dequantize",
                       m->path, name, tr->upper_name);
    float *v = qp_malloc((size_t)n * sizeof *v);
    if (!v) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor '%s'", m->path, name);
    tr->dequantize(t->data, v, n);
    mark_used(b, t);
    float sc = 1.0f;
    if ((tr->flags & QP_ENC_FLAG_EXT_SCALE) &&
        qp_encoding_tensor_scale(t->enc, t->data, t->nbytes, n, &sc) && sc != 1.0f)
        for (int64_t i = 0; i < n; i++) v[i] *= sc;
    *out = v;
    return QP_OK;
}

/* An RMS norm's weight: bind_vec, plus 1 on every element when the model stores Gemma's w of
 * x * (1 + w) (cfg->norm_plus_one, HF checkpoints; runtime.md "Gemma"). */
static qp_status bind_norm(const binder *b, const qp_runtime_config *cfg, const char *name,
                           int64_t n, float **out, qp_err *e) {
    qp_status s = bind_vec(b, name, n, false, out, e);
    if (s == QP_OK && cfg->norm_plus_one)
        for (int64_t i = 0; i < n; i++) (*out)[i] = 1.0f + (*out)[i];
    return s;
}

void qp_wmat_row(const qp_wmat *w, int64_t r, float *out) {
    w->tr->dequantize(w->data + (size_t)r * w->row_bytes, out, w->cols);
    if (w->scale != 1.0f)
        for (int64_t i = 0; i < w->cols; i++) out[i] *= w->scale;
}

/* Layer l's tensor named suffix, in a caller's char nm[96]. */
#define NM(suffix) (snprintf(nm, sizeof nm, "blk.%lld." suffix, (long long)l), nm)

/* Rows r0 .. r0+n-1 of w, borrowing w's data (a part of a fused matrix). */
static qp_wmat row_view(const qp_wmat *w, int64_t r0, int64_t n) {
    qp_wmat v = *w;
    v.data = w->data + (size_t)r0 * w->row_bytes;
    v.rows = n;
    v.owned = NULL;
    return v;
}

/* Layer l's q, k, v: three matrices, or (cfg->fused_qkv, Phi-3) the row ranges [0, qdim),
 * [qdim, qdim + kvdim), [qdim + kvdim, qdim + 2 kvdim) of blk.l.attn_qkv, as llama.cpp views it. */
static qp_status bind_qkv(const binder *b, const qp_runtime_config *cfg, int64_t l, bool bn,
                          bool i8, qp_layer_weights *L, qp_err *e) {
    int64_t dim = cfg->dim, qdim = cfg->n_heads * cfg->head_dim, kvdim = cfg->n_kv_heads * cfg->head_dim;
    char nm[96];
    qp_status s;
    if (cfg->fused_qkv) {
        qp_wmat qkv = {0};
        if ((s = bind_mat(b, NM("attn_qkv.weight"), dim, qdim + 2 * kvdim, false, bn, i8, &qkv, e)) != QP_OK)
            return s;
        L->wq = row_view(&qkv, 0, qdim);
        L->wk = row_view(&qkv, qdim, kvdim);
        L->wv = row_view(&qkv, qdim + kvdim, kvdim);
        return QP_OK;
    }
    if ((s = bind_mat(b, NM("attn_q.weight"), dim, qdim, false, bn, i8, &L->wq, e)) != QP_OK ||
        (s = bind_mat(b, NM("attn_k.weight"), dim, kvdim, false, bn, i8, &L->wk, e)) != QP_OK)
        return s;
    return bind_mat(b, NM("attn_v.weight"), dim, kvdim, false, bn, i8, &L->wv, e);
}

/* Layer l's gate and up: two matrices, or (cfg->fused_gate_up, Phi-3) the first and second
 * halves of blk.l.ffn_up [dim, 2 ffn] (HF gate_up_proj.chunk(2): gate first). */
static qp_status bind_gate_up(const binder *b, const qp_runtime_config *cfg, int64_t l, bool bn,
                              bool i8, qp_layer_weights *L, qp_err *e) {
    int64_t dim = cfg->dim, ffn = cfg->ffn_dim;
    char nm[96];
    qp_status s;
    if (cfg->fused_gate_up) {
        qp_wmat gu = {0};
        if ((s = bind_mat(b, NM("ffn_up.weight"), dim, 2 * ffn, false, bn, i8, &gu, e)) != QP_OK) return s;
        L->w_gate = row_view(&gu, 0, ffn);
        L->w_up = row_view(&gu, ffn, ffn);
        return QP_OK;
    }
    if ((s = bind_mat(b, NM("ffn_gate.weight"), dim, ffn, false, bn, i8, &L->w_gate, e)) != QP_OK) return s;
    return bind_mat(b, NM("ffn_up.weight"), dim, ffn, false, bn, i8, &L->w_up, e);
}

/* Qwen3.5's layer l (runtime.md "Qwen3.5"): the norms (post_attention_norm is the FFN's input
 * norm) and FFN; q with its gate, k, v, o, q/k norms for a full-attention layer; the delta-net's
 * matrices, conv kernel, dt, A (as -exp(A_log)) and gated norm otherwise. */
static qp_status bind_qwen35_layer(const binder *b, const qp_runtime_config *cfg, int64_t l,
                                   qp_layer_weights *L, qp_err *e) {
    int64_t dim = cfg->dim, qdim = cfg->n_heads * cfg->head_dim, kvdim = cfg->n_kv_heads * cfg->head_dim;
    int64_t key = cfg->ssm_group_count * cfg->ssm_state_size, val = cfg->ssm_inner_size;
    int64_t nv = cfg->ssm_time_step_rank, ch = 2 * key + val;
    char nm[96];
    qp_status s;
    L->recurrent = (l + 1) % cfg->full_attn_interval != 0;
    if ((s = bind_norm(b, cfg, NM("attn_norm.weight"), dim, &L->attn_norm, e)) != QP_OK ||
        (s = bind_norm(b, cfg, NM("post_attention_norm.weight"), dim, &L->ffn_norm, e)) != QP_OK ||
        (s = bind_gate_up(b, cfg, l, false, false, L, e)) != QP_OK ||
        (s = bind_mat(b, NM("ffn_down.weight"), cfg->ffn_dim, dim, false, false, false, &L->w_down, e)) != QP_OK)
        return s;
    if (!L->recurrent) {
        if ((s = bind_mat(b, NM("attn_q.weight"), dim, 2 * qdim, false, false, false, &L->wq, e)) != QP_OK ||
            (s = bind_mat(b, NM("attn_k.weight"), dim, kvdim, false, false, false, &L->wk, e)) != QP_OK ||
            (s = bind_mat(b, NM("attn_v.weight"), dim, kvdim, false, false, false, &L->wv, e)) != QP_OK ||
            (s = bind_mat(b, NM("attn_output.weight"), qdim, dim, false, false, false, &L->wo, e)) != QP_OK ||
            (s = bind_norm(b, cfg, NM("attn_q_norm.weight"), cfg->head_dim, &L->q_norm, e)) != QP_OK)
            return s;
        return bind_norm(b, cfg, NM("attn_k_norm.weight"), cfg->head_dim, &L->k_norm, e);
    }
    if ((s = bind_mat(b, NM("attn_qkv.weight"), dim, ch, false, false, false, &L->ssm_qkv, e)) != QP_OK ||
        (s = bind_mat(b, NM("attn_gate.weight"), dim, val, false, false, false, &L->ssm_z, e)) != QP_OK ||
        (s = bind_mat(b, NM("ssm_beta.weight"), dim, nv, false, false, false, &L->ssm_beta, e)) != QP_OK ||
        (s = bind_mat(b, NM("ssm_alpha.weight"), dim, nv, false, false, false, &L->ssm_alpha, e)) != QP_OK ||
        (s = bind_mat(b, NM("ssm_out.weight"), val, dim, false, false, false, &L->ssm_out, e)) != QP_OK ||
        (s = bind_vec(b, NM("ssm_conv1d.weight"), cfg->ssm_conv_kernel * ch, false, &L->ssm_conv, e)) != QP_OK ||
        (s = bind_vec(b, NM("ssm_dt.bias"), nv, false, &L->ssm_dt, e)) != QP_OK ||
        (s = bind_vec(b, NM("ssm_a"), nv, false, &L->ssm_a, e)) != QP_OK ||
        (s = bind_vec(b, NM("ssm_norm.weight"), val / nv, false, &L->ssm_norm, e)) != QP_OK)
        return s;
    if (cfg->ssm_a_log) /* HF's A_log: llama.cpp's converter writes -exp(A_log) (F32) */
        for (int64_t i = 0; i < nv; i++) L->ssm_a[i] = -expf(L->ssm_a[i]);
    return QP_OK;
}

/* Every tensor of the model bound (marked in b->used) or left out by a named rule
 * (qp_model_unused_rule); any other is refused by name: the runtime never runs a model without
 * something it contains (runtime.md "Every tensor consumed"). */
static qp_status check_all_consumed(const binder *b, qp_err *e) {
    const qp_model *m = b->m;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        if (b->used[i] || qp_model_unused_rule(m, t)) continue;
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        bool renamed = t->canon && strcmp(t->canon, t->name) != 0;
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s'%s%s%s (%s, %lld elements, offset %llu) "
                       "is not used by the runtime's %s graph; refusing to run the model without it "
                       "(nothing is dropped silently)", m->path, t->canon ? t->canon : t->name,
                       renamed ? " (stored as '" : "", renamed ? t->name : "", renamed ? "')" : "",
                       tr ? tr->upper_name : "?", (long long)qp_tensor_nelements(t),
                       (unsigned long long)t->offset, qp_family_name(m->arch.family));
    }
    return QP_OK;
}

static qp_status bind_all(const binder *b, qp_runtime_config *cfg, qp_weights *w, qp_err *e);

/* Per-pair rope frequency divisors (runtime.md "Rope frequency factors"): llama.cpp's
 * rope_freqs.weight [rope_dims / 2] when the model has it, else computed from the llama3
 * rope_scaling of an HF config, else none. Every factor must be finite and positive. */
static qp_status bind_rope_factors(const binder *b, const qp_runtime_config *cfg, qp_weights *w,
                                   qp_err *e) {
    const qp_model *m = b->m;
    int64_t rot = cfg->rope_dims > 0 ? cfg->rope_dims : cfg->head_dim, half = rot / 2;
    qp_status s = bind_vec(b, "rope_freqs.weight", half, true, &w->rope_factors, e);
    if (s != QP_OK) return s;
    if (w->rope_factors) {
        const qp_tensor *t = find(m, "rope_freqs.weight");
        if (qp_tensor_nelements(t) != half)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor 'rope_freqs.weight' has %lld elements, "
                           "rope dimensions / 2 = %lld expected", m->path,
                           (long long)qp_tensor_nelements(t), (long long)half);
        for (int64_t i = 0; i < half; i++)
            if (!(w->rope_factors[i] > 0.0f) || !isfinite(w->rope_factors[i]))
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor 'rope_freqs.weight' element %lld is %g "
                               "(a positive finite divisor expected)", m->path, (long long)i,
                               (double)w->rope_factors[i]);
        return QP_OK;
    }
    if (!(m->arch.rope_llama3.factor > 0.0)) return QP_OK;
    w->rope_factors = qp_malloc((size_t)half * sizeof *w->rope_factors);
    if (!w->rope_factors) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    for (int64_t i = 0; i < half; i++) /* F32 as llama.cpp's converter stores them */
        w->rope_factors[i] = (float)qp_rope_llama3_divisor(cfg->rope_theta, rot,
                                                           &m->arch.rope_llama3, i);
    return QP_OK;
}

qp_status qp_weights_bind(const qp_model *m, qp_runtime_config *cfg, qp_weights *w, qp_err *e) {
    memset(w, 0, sizeof *w);
    binder b = {m, qp_calloc(m->n_tensors > 0 ? (size_t)m->n_tensors : 1, 1)};
    if (!b.used) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    qp_status s = bind_all(&b, cfg, w, e);
    if (s == QP_OK && (s = check_all_consumed(&b, e)) != QP_OK) qp_weights_free(w);
    qp_free(b.used);
    return s;
}

/* Binds every tensor the forward pass reads into w (freed again on failure). */
static qp_status bind_all(const binder *b, qp_runtime_config *cfg, qp_weights *w, qp_err *e) {
    const qp_model *m = b->m;
    const qp_arch *a = &m->arch;
    /* configuration in range, every tensor present with its shape: the checks a conversion
     * applies before writing (readers/model_check.h) */
    qp_status s = qp_model_check(m, cfg, e);
    if (s != QP_OK) return s;
    int64_t dim = cfg->dim, hd = cfg->head_dim, nh = cfg->n_heads, nkv = cfg->n_kv_heads;
    int64_t qdim = nh * hd, kvdim = nkv * hd;

    if ((s = bind_mat(b, "token_embd.weight", dim, cfg->vocab, true, false, false, &w->tok_embd, e)) != QP_OK)
        goto fail;
    if (!cfg->tied_output) {
        if ((s = bind_mat(b, "output.weight", dim, cfg->vocab, false, false, false, &w->output, e)) != QP_OK)
            goto fail;
    } else {
        w->output = w->tok_embd; /* tied (llama.cpp also falls back to token_embd) */
    }
    if ((s = bind_norm(b, cfg, "output_norm.weight", dim, &w->output_norm, e)) != QP_OK ||
        (s = bind_rope_factors(b, cfg, w, e)) != QP_OK)
        goto fail;
    w->layers = qp_calloc((size_t)cfg->n_layers, sizeof *w->layers);
    if (!w->layers) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        goto fail;
    }
    w->n_layers = cfg->n_layers;
    bool bn = a->family == QP_FAMILY_BITNET, i8 = cfg->act_int8;
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        qp_layer_weights *L = &w->layers[l];
        char nm[96];
        if (a->family == QP_FAMILY_QWEN35) {
            if ((s = bind_qwen35_layer(b, cfg, l, L, e)) != QP_OK) goto fail;
            continue;
        }
        if ((s = bind_qkv(b, cfg, l, bn, i8, L, e)) != QP_OK ||
            (s = bind_mat(b, NM("attn_output.weight"), qdim, dim, false, bn, i8, &L->wo, e)) != QP_OK ||
            (cfg->n_experts > 0 && (s = bind_moe(b, cfg, l, L, e)) != QP_OK) ||
            (cfg->n_experts == 0 &&
             ((s = bind_gate_up(b, cfg, l, bn, i8, L, e)) != QP_OK ||
              (s = bind_mat(b, NM("ffn_down.weight"), cfg->ffn_dim, dim, false, bn, i8, &L->w_down,
                            e)) != QP_OK)) ||
            (s = bind_norm(b, cfg, NM("attn_norm.weight"), dim, &L->attn_norm, e)) != QP_OK ||
            (s = bind_norm(b, cfg, NM("ffn_norm.weight"), dim, &L->ffn_norm, e)) != QP_OK)
            goto fail;
        if (cfg->post_norms &&
            ((s = bind_norm(b, cfg, NM("post_attention_norm.weight"), dim, &L->post_attn_norm, e)) != QP_OK ||
             (s = bind_norm(b, cfg, NM("post_ffw_norm.weight"), dim, &L->post_ffn_norm, e)) != QP_OK))
            goto fail;
        if (cfg->sub_norms &&
            ((s = bind_vec(b, NM("attn_sub_norm.weight"), qdim, false, &L->attn_sub_norm, e)) !=
                 QP_OK ||
             (s = bind_vec(b, NM("ffn_sub_norm.weight"), cfg->ffn_dim, false, &L->ffn_sub_norm,
                           e)) != QP_OK))
            goto fail;
        if (cfg->qk_norm &&
            ((s = bind_norm(b, cfg, NM("attn_q_norm.weight"), hd, &L->q_norm, e)) != QP_OK ||
             (s = bind_norm(b, cfg, NM("attn_k_norm.weight"), hd, &L->k_norm, e)) != QP_OK))
            goto fail;
        if (cfg->qkv_bias &&
            ((s = bind_vec(b, NM("attn_q.bias"), qdim, !a->qkv_bias, &L->bq, e)) != QP_OK ||
             (s = bind_vec(b, NM("attn_k.bias"), kvdim, !a->qkv_bias, &L->bk, e)) != QP_OK ||
             (s = bind_vec(b, NM("attn_v.bias"), kvdim, !a->qkv_bias, &L->bv, e)) != QP_OK))
            goto fail;
        /* optional biases of llama.cpp's graphs (bo, ffn_*_b): applied when present */
        if ((s = bind_vec(b, NM("attn_output.bias"), dim, true, &L->bo, e)) != QP_OK ||
            (cfg->n_experts == 0 && !cfg->fused_gate_up &&
             ((s = bind_vec(b, NM("ffn_gate.bias"), cfg->ffn_dim, true, &L->b_gate, e)) != QP_OK ||
              (s = bind_vec(b, NM("ffn_up.bias"), cfg->ffn_dim, true, &L->b_up, e)) != QP_OK ||
              (s = bind_vec(b, NM("ffn_down.bias"), dim, true, &L->b_down, e)) != QP_OK)))
            goto fail;
    }
    return QP_OK;
fail:
    qp_weights_free(w);
    return s;
}

void qp_weights_free(qp_weights *w) {
    if (!w) return;
    for (int64_t l = 0; l < w->n_layers; l++) {
        qp_layer_weights *L = &w->layers[l];
        qp_wmat *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) qp_free(mats[i]->owned);
        qp_free(L->attn_norm);
        qp_free(L->ffn_norm);
        qp_free(L->attn_sub_norm);
        qp_free(L->ffn_sub_norm);
        qp_free(L->bq);
        qp_free(L->bk);
        qp_free(L->bv);
        qp_free(L->bo);
        qp_free(L->b_gate);
        qp_free(L->b_up);
        qp_free(L->b_down);
        qp_free(L->q_norm);
        qp_free(L->k_norm);
        qp_free(L->post_attn_norm);
        qp_free(L->post_ffn_norm);
        qp_free(L->experts);
        float *ssm[] = {L->ssm_conv, L->ssm_dt, L->ssm_a, L->ssm_norm};
        for (size_t i = 0; i < sizeof ssm / sizeof ssm[0]; i++) qp_free(ssm[i]);
    }
    qp_free(w->layers);
    qp_free(w->output_norm);
    qp_free(w->rope_factors);
    memset(w, 0, sizeof *w);
}
