/* The runtime's model checks, shared with the converters (readers/model_check.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "readers/bullet_format.h"
#include "readers/hf_config.h"
#include "readers/model_check.h"
#include "readers/name_map.h"

/* The runtime's ranges (runtime/runtime.md "Limits"). */
#define QP_CHECK_MAX_DIM ((int64_t)1 << 20)
#define QP_CHECK_MAX_HEAD_DIM 65536
#define QP_CHECK_MAX_HEADS 65536
#define QP_CHECK_MAX_FFN ((int64_t)1 << 22)
#define QP_CHECK_MAX_VOCAB ((int64_t)1 << 24)
#define QP_CHECK_MAX_LAYERS 4096

qp_status qp_model_need(const qp_model *m, const char *name, const qp_tensor **out, qp_err *e) {
    const qp_tensor *t = qp_model_find(m, name);
    if (!t)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' needed by the runtime is missing",
                       m->path, name);
    *out = t;
    return QP_OK;
}

static int64_t pick(int64_t from_arch, int64_t from_shape) {
    return from_arch > 0 ? from_arch : from_shape;
}

static qp_status range(const qp_model *m, const char *field, int64_t v, int64_t hi, qp_err *e) {
    if (v >= 1 && v <= hi) return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: %s is %lld; the runtime needs 1..%lld", m->path,
                   field, (long long)v, (long long)hi);
}

bool qp_model_check_is_packed(const qp_tensor *t, int64_t cols, int64_t rows) {
    return t->enc == QP_ENC_U8 && t->ne[0] == cols && t->ne[1] * 4 == rows && t->ne[2] == 1 &&
           t->ne[3] == 1;
}

const char *qp_model_unused_rule(const qp_model *m, const qp_tensor *t) {
    size_t n = strlen(t->name), k = strlen(".rotary_emb.inv_freq");
    if (n > k && strcmp(t->name + n - k, ".rotary_emb.inv_freq") == 0)
        return "rotary inv_freq: recomputed from rope_theta";
    if (m->format == QP_FORMAT_BULLET && !t->canon) return qp_bullet_skip_rule(t->name);
    if (m->format == QP_FORMAT_SAFETENSORS && !t->canon)
        return qp_name_map_skip_rule(m->arch.family, t->name);
    return NULL;
}

static qp_status check_mat(const qp_model *m, const char *name, int64_t cols, int64_t rows,
                           bool bitnet_proj, qp_err *e) {
    const qp_tensor *t = NULL;
    qp_status s = qp_model_need(m, name, &t, e);
    if (s != QP_OK) return s;
    if (bitnet_proj && qp_model_check_is_packed(t, cols, rows)) return QP_OK;
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1) {
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        return qp_fail(e, QP_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has shape ne=[%lld, %lld, %lld, %lld] (%s); the runtime "
                       "expects ne=[%lld, %lld] (ggml order: row length first)",
                       m->path, name, (long long)t->ne[0], (long long)t->ne[1],
                       (long long)t->ne[2], (long long)t->ne[3], tr ? tr->upper_name : "?",
                       (long long)cols, (long long)rows);
    }
    return QP_OK;
}

const char *qp_expert_kind_name(qp_expert_kind k) {
    static const char *const names[3] = {"ffn_gate", "ffn_up", "ffn_down"};
    return (unsigned)k < 3 ? names[k] : "?";
}

static bool shape_is(const qp_tensor *t, int64_t a, int64_t b, int64_t c) {
    return t->ne[0] == a && t->ne[1] == b && t->ne[2] == c && t->ne[3] == 1;
}

qp_status qp_model_expert(const qp_model *m, int64_t layer, qp_expert_kind kind, int64_t expert,
                          int64_t n_experts, int64_t cols, int64_t rows, const qp_tensor **t,
                          int64_t *slice, qp_err *e) {
    char nm[96];
    const char *kn = qp_expert_kind_name(kind);
    snprintf(nm, sizeof nm, "blk.%lld.%s_exps.weight", (long long)layer, kn);
    const qp_tensor *x = qp_model_find(m, nm);
    int64_t n = n_experts, sl = expert;
    if (!x) {
        snprintf(nm, sizeof nm, "blk.%lld.%s.%lld.weight", (long long)layer, kn, (long long)expert);
        qp_status s = qp_model_need(m, nm, &x, e);
        if (s != QP_OK) return s;
        n = 1;
        sl = 0;
    }
    if (!shape_is(x, cols, rows, n))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has shape ne=[%lld, %lld, %lld, %lld]; "
                       "the runtime expects ne=[%lld, %lld, %lld] (%lld experts)", m->path, nm,
                       (long long)x->ne[0], (long long)x->ne[1], (long long)x->ne[2],
                       (long long)x->ne[3], (long long)cols, (long long)rows, (long long)n,
                       (long long)n_experts);
    *t = x;
    *slice = sl;
    return QP_OK;
}

/* A MoE layer: the router ffn_gate_inp [dim, n_experts] and every expert's gate/up/down. */
static qp_status check_moe_layer(const qp_model *m, const qp_runtime_config *c, int64_t l,
                                 qp_err *e) {
    char nm[96];
    snprintf(nm, sizeof nm, "blk.%lld.ffn_gate_inp.weight", (long long)l);
    qp_status s = check_mat(m, nm, c->dim, c->n_experts, false, e);
    for (int64_t x = 0; s == QP_OK && x < c->n_experts; x++)
        for (int k = 0; s == QP_OK && k < 3; k++) {
            const qp_tensor *t;
            int64_t sl;
            bool down = k == QP_EXPERT_DOWN;
            s = qp_model_expert(m, l, (qp_expert_kind)k, x, c->n_experts, down ? c->ffn_dim : c->dim,
                                down ? c->dim : c->ffn_dim, &t, &sl, e);
        }
    return s;
}

/* The FFN width of a MoE model from expert 0 of layer 0 (merged or not); 0 when absent. */
static int64_t expert_ffn(const qp_model *m) {
    const qp_tensor *t = qp_model_find(m, "blk.0.ffn_gate_exps.weight");
    if (!t) t = qp_model_find(m, "blk.0.ffn_gate.0.weight");
    return t ? t->ne[1] : 0;
}

static qp_status check_vec(const qp_model *m, const char *name, int64_t n, bool optional,
                           qp_err *e) {
    const qp_tensor *t = qp_model_find(m, name);
    if (!t && optional) return QP_OK;
    qp_status s = t ? QP_OK : qp_model_need(m, name, &t, e);
    if (s != QP_OK) return s;
    if (qp_tensor_nelements(t) != n || t->ne[0] != n)
        return qp_fail(e, QP_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has %lld elements (ne[0]=%lld); the runtime expects %lld",
                       m->path, name, (long long)qp_tensor_nelements(t), (long long)t->ne[0],
                       (long long)n);
    return QP_OK;
}

static qp_status check_config(const qp_model *m, const qp_runtime_config *c, qp_err *e) {
    qp_status s;
    if ((s = range(m, "the embedding width (hidden size)", c->dim, QP_CHECK_MAX_DIM, e)) != QP_OK ||
        (s = range(m, "the vocabulary size", c->vocab, QP_CHECK_MAX_VOCAB, e)) != QP_OK ||
        (s = range(m, "the FFN width (intermediate size)", c->ffn_dim, QP_CHECK_MAX_FFN, e)) !=
            QP_OK ||
        (s = range(m, "the layer count (block_count)", c->n_layers, QP_CHECK_MAX_LAYERS, e)) !=
            QP_OK ||
        (s = range(m, "the head count", c->n_heads, QP_CHECK_MAX_HEADS, e)) != QP_OK ||
        (s = range(m, "the head width (head_dim)", c->head_dim, QP_CHECK_MAX_HEAD_DIM, e)) !=
            QP_OK ||
        (s = range(m, "the K/V head count", c->n_kv_heads, c->n_heads, e)) != QP_OK)
        return s;
    if (c->n_experts > 0 &&
        ((s = range(m, "the expert count (expert_count)", c->n_experts, 512, e)) != QP_OK ||
         (s = range(m, "the experts used per token (expert_used_count)", c->n_experts_used,
                    c->n_experts, e)) != QP_OK))
        return s;
    if (c->n_heads % c->n_kv_heads != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the head count %lld is not a multiple of the "
                       "K/V head count %lld", m->path, (long long)c->n_heads,
                       (long long)c->n_kv_heads);
    if (c->head_dim % 2 != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the head width %lld is odd (RoPE rotates pairs)",
                       m->path, (long long)c->head_dim);
    if (c->act != QP_ACT_SILU && c->act != QP_ACT_RELU2 && c->act != QP_ACT_GELU)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: FFN activation %d is not supported by the "
                       "runtime", m->path, (int)c->act);
    return QP_OK;
}

/* The layers present, counted by their first matrix. */
static int64_t count_layers(const qp_model *m, bool fused_qkv) {
    char nm[64];
    int64_t l = 0;
    for (; l <= QP_CHECK_MAX_LAYERS; l++) {
        snprintf(nm, sizeof nm, fused_qkv ? "blk.%lld.attn_qkv.weight" : "blk.%lld.attn_q.weight",
                 (long long)l);
        if (!qp_model_find(m, nm)) break;
    }
    return l;
}

/* Gemma: rope scaling other than Gemma 3's linear one (rope_freq_scale, readers/hf_config.md)
 * is refused by name, from config.json or from GGUF rope.scaling.type. */
static qp_status check_gemma_rope(const qp_model *m, qp_err *e) {
    const qp_meta *rs = qp_model_meta(m, "hf.config.rope_scaling");
    char key[96];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name ? m->arch_name : "gemma");
    const qp_meta *gt = qp_model_meta(m, key);
    bool gguf_other = gt && (gt->type != QP_META_STRING ||
                             (strcmp(gt->str, "linear") != 0 && strcmp(gt->str, "none") != 0));
    if ((rs && m->arch.rope_freq_scale <= 0.0f) || gguf_other)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: rope scaling %s is not implemented for %s (only "
                       "Gemma 3's linear scaling is)", m->path,
                       rs && rs->str ? rs->str : gt && gt->type == QP_META_STRING ? gt->str : "?",
                       qp_family_name(m->arch.family));
    return QP_OK;
}

/* Rope variants the runtime does not compute are refused, not run as plain RoPE: Phi-3's
 * su/longrope scaling (HF rope_scaling, GGUF rope_factors_long/short) and partial rotation. */
static qp_status check_rope_extras(const qp_model *m, qp_err *e) {
    if (qp_family_is_gemma(m->arch.family)) return check_gemma_rope(m, e);
    if (m->arch.family != QP_FAMILY_PHI3) return QP_OK;
    const qp_meta *rs = qp_model_meta(m, "hf.config.rope_scaling");
    if (rs || qp_model_find(m, "rope_factors_long.weight") || qp_model_find(m, "rope_factors_short.weight"))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: Phi-3 rope scaling (%s) is not implemented by the "
                       "runtime; only models without rope_scaling (the 4k ones) are supported",
                       m->path, rs && rs->str ? rs->str : "rope_factors_long/short");
    const qp_meta *pr = qp_model_meta(m, "hf.config.partial_rotary_factor");
    double f = !pr ? 1.0 : pr->type == QP_META_F64 ? pr->v.f : pr->type == QP_META_I64 ? (double)pr->v.i : 0.0;
    if (f != 1.0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: partial_rotary_factor other than 1 is not "
                       "implemented by the runtime", m->path);
    return QP_OK;
}

/* Gemma's extras (runtime.md "Gemma"): embeddings x sqrtf(dim) as llama.cpp scales them (F32),
 * norms as 1 + w for HF checkpoints, post-norms when present, scales, soft-caps, rope bases. */
static void gemma_config(const qp_model *m, qp_runtime_config *c) {
    const qp_arch *a = &m->arch;
    c->post_norms = qp_model_find(m, "blk.0.post_attention_norm.weight") != NULL;
    if (!qp_family_is_gemma(a->family)) return;
    c->embd_scale = sqrtf((float)c->dim);
    c->norm_plus_one = a->norm_plus_one;
    c->attn_scale = a->attn_scale;
    c->attn_softcap = a->attn_softcap;
    c->final_softcap = a->final_softcap;
    c->rope_theta_swa = a->rope_theta_swa;
    c->rope_freq_scale = a->rope_freq_scale;
}

/* Qwen3.5's configuration (runtime.md "Qwen3.5"): the values the architecture gives, the
 * delta-net sizes in range and consistent. */
static qp_status qwen35_config(const qp_model *m, const qp_tensor *emb, qp_runtime_config *c, qp_err *e) {
    const qp_arch *a = &m->arch;
    c->family = a->family;
    c->dim = pick(a->hidden, emb->ne[0]);
    c->vocab = pick(a->vocab, emb->ne[1]);
    const qp_tensor *g0 = qp_model_find(m, "blk.0.ffn_gate.weight");
    c->ffn_dim = pick(a->intermediate, g0 ? g0->ne[1] : 0);
    c->n_layers = a->n_layers;
    c->n_heads = a->n_heads;
    c->n_kv_heads = a->n_kv_heads;
    c->head_dim = a->head_dim;
    c->norm_eps = a->norm_eps > 0.0f ? a->norm_eps : 1e-6f;
    c->rope_theta = a->rope_theta > 0.0f ? a->rope_theta : 10000.0f;
    c->rope_style = QP_ROPE_NEOX;
    c->rope_dims = a->rope_dims > 0 ? a->rope_dims : a->head_dim;
    c->act = a->act;
    c->qk_norm = c->attn_out_gate = true;
    c->norm_plus_one = a->norm_plus_one;
    c->ssm_a_log = a->ssm_a_log;
    c->ssm_heads_tiled = a->ssm_heads_tiled;
    c->full_attn_interval = a->full_attn_interval;
    c->ssm_conv_kernel = a->ssm_conv_kernel;
    c->ssm_state_size = a->ssm_state_size;
    c->ssm_group_count = a->ssm_group_count;
    c->ssm_time_step_rank = a->ssm_time_step_rank;
    c->ssm_inner_size = a->ssm_inner_size;
    qp_status s;
    if ((s = check_config(m, c, e)) != QP_OK ||
        (s = range(m, "full_attention_interval", c->full_attn_interval, 4096, e)) != QP_OK ||
        (s = range(m, "the conv kernel (ssm.conv_kernel)", c->ssm_conv_kernel, 64, e)) != QP_OK ||
        (s = range(m, "the key head width (ssm.state_size)", c->ssm_state_size, 4096, e)) != QP_OK ||
        (s = range(m, "the key head count (ssm.group_count)", c->ssm_group_count, 4096, e)) != QP_OK ||
        (s = range(m, "the value head count (ssm.time_step_rank)", c->ssm_time_step_rank, 4096, e)) != QP_OK ||
        (s = range(m, "the value width (ssm.inner_size)", c->ssm_inner_size, QP_CHECK_MAX_DIM, e)) != QP_OK ||
        (s = range(m, "the RoPE dimensions (rope.dimension_count)", c->rope_dims, c->head_dim, e)) != QP_OK ||
        (s = range(m, "the value head width (ssm.inner_size / ssm.time_step_rank)",
                   c->ssm_inner_size / c->ssm_time_step_rank, 4096, e)) != QP_OK)
        return s;
    if (c->ssm_time_step_rank % c->ssm_group_count != 0 || c->ssm_inner_size % c->ssm_time_step_rank != 0 ||
        c->rope_dims % 2 != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: Qwen3.5 sizes: %lld value heads are not a multiple "
                       "of %lld key heads, or the value width %lld not of them, or %lld RoPE dimensions "
                       "odd", m->path, (long long)c->ssm_time_step_rank, (long long)c->ssm_group_count,
                       (long long)c->ssm_inner_size, (long long)c->rope_dims);
    return QP_OK;
}

/* The embedding, the output matrix (absent: tied to the embedding) and the final norm, shared by
 * every family. */
static qp_status check_embd_output(const qp_model *m, qp_runtime_config *c, qp_err *e) {
    qp_status s;
    if ((s = check_mat(m, "token_embd.weight", c->dim, c->vocab, false, e)) != QP_OK) return s;
    c->tied_output = qp_model_find(m, "output.weight") == NULL;
    if (!c->tied_output && (s = check_mat(m, "output.weight", c->dim, c->vocab, false, e)) != QP_OK)
        return s;
    return check_vec(m, "output_norm.weight", c->dim, false, e);
}

/* The conv kernel: K x channels elements, HF's [channels, 1, K] or llama.cpp's [channels, K]. */
static qp_status check_conv(const qp_model *m, const char *name, int64_t k, int64_t ch, qp_err *e) {
    const qp_tensor *t = NULL;
    qp_status s = qp_model_need(m, name, &t, e);
    if (s != QP_OK) return s;
    int64_t last = t->ne[1] == 1 ? t->ne[2] : t->ne[1];
    if (t->ne[0] != k || last != ch || qp_tensor_nelements(t) != k * ch)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has shape ne=[%lld, %lld, %lld]; the "
                       "runtime expects ne=[%lld, %lld] (kernel, channels)", m->path, name,
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)k,
                       (long long)ch);
    return QP_OK;
}

/* Qwen3.5's tensors: every layer's norms and FFN, the full-attention layers' q (with the gate),
 * k, v, o and q/k norms, the delta-net layers' projections, conv, dt, A and gated norm. */
static qp_status qwen35_check(const qp_model *m, qp_runtime_config *c, qp_err *e) {
    const qp_tensor *emb = NULL;
    qp_status s = qp_model_need(m, "token_embd.weight", &emb, e);
    if (s != QP_OK || (s = qwen35_config(m, emb, c, e)) != QP_OK) return s;
    int64_t dim = c->dim, qdim = c->n_heads * c->head_dim, kvdim = c->n_kv_heads * c->head_dim;
    int64_t key = c->ssm_group_count * c->ssm_state_size, val = c->ssm_inner_size, nv = c->ssm_time_step_rank;
    if ((s = check_embd_output(m, c, e)) != QP_OK) return s;
    for (int64_t l = 0; l < c->n_layers; l++) {
        char nm[96];
#define NM(suffix) (snprintf(nm, sizeof nm, "blk.%lld." suffix, (long long)l), nm)
        bool full = (l + 1) % c->full_attn_interval == 0;
        if ((s = check_vec(m, NM("attn_norm.weight"), dim, false, e)) != QP_OK ||
            (s = check_vec(m, NM("post_attention_norm.weight"), dim, false, e)) != QP_OK ||
            (s = check_mat(m, NM("ffn_gate.weight"), dim, c->ffn_dim, false, e)) != QP_OK ||
            (s = check_mat(m, NM("ffn_up.weight"), dim, c->ffn_dim, false, e)) != QP_OK ||
            (s = check_mat(m, NM("ffn_down.weight"), c->ffn_dim, dim, false, e)) != QP_OK)
            return s;
        if (full && ((s = check_mat(m, NM("attn_q.weight"), dim, 2 * qdim, false, e)) != QP_OK ||
                     (s = check_mat(m, NM("attn_k.weight"), dim, kvdim, false, e)) != QP_OK ||
                     (s = check_mat(m, NM("attn_v.weight"), dim, kvdim, false, e)) != QP_OK ||
                     (s = check_mat(m, NM("attn_output.weight"), qdim, dim, false, e)) != QP_OK ||
                     (s = check_vec(m, NM("attn_q_norm.weight"), c->head_dim, false, e)) != QP_OK ||
                     (s = check_vec(m, NM("attn_k_norm.weight"), c->head_dim, false, e)) != QP_OK))
            return s;
        if (!full && ((s = check_mat(m, NM("attn_qkv.weight"), dim, 2 * key + val, false, e)) != QP_OK ||
                      (s = check_mat(m, NM("attn_gate.weight"), dim, val, false, e)) != QP_OK ||
                      (s = check_mat(m, NM("ssm_beta.weight"), dim, nv, false, e)) != QP_OK ||
                      (s = check_mat(m, NM("ssm_alpha.weight"), dim, nv, false, e)) != QP_OK ||
                      (s = check_mat(m, NM("ssm_out.weight"), val, dim, false, e)) != QP_OK ||
                      (s = check_conv(m, NM("ssm_conv1d.weight"), c->ssm_conv_kernel, 2 * key + val, e)) != QP_OK ||
                      (s = check_vec(m, NM("ssm_dt.bias"), nv, false, e)) != QP_OK ||
                      (s = check_vec(m, NM("ssm_a"), nv, false, e)) != QP_OK ||
                      (s = check_vec(m, NM("ssm_norm.weight"), val / nv, false, e)) != QP_OK))
            return s;
#undef NM
    }
    return QP_OK;
}

qp_status qp_model_check(const qp_model *m, qp_runtime_config *out, qp_err *e) {
    if (!m) return qp_fail(e, QP_ERR_ARG, "qp_model_check: NULL model");
    if (m->arch.family == QP_FAMILY_QWEN35) {
        qp_runtime_config c;
        memset(&c, 0, sizeof c);
        qp_status s = qwen35_check(m, &c, e);
        if (s == QP_OK && out) *out = c;
        return s;
    }
    const qp_arch *a = &m->arch;
    const qp_tensor *emb = NULL, *q0 = NULL, *k0 = NULL, *g0 = NULL;
    qp_status s;
    qp_runtime_config c;
    memset(&c, 0, sizeof c);
    /* Phi-3: q, k, v in one attn_qkv (llama.cpp also takes them apart), gate and up in ffn_up */
    c.fused_qkv = qp_model_find(m, "blk.0.attn_qkv.weight") && !qp_model_find(m, "blk.0.attn_q.weight");
    c.fused_gate_up = a->family == QP_FAMILY_PHI3;
    if ((s = check_rope_extras(m, e)) != QP_OK ||
        (s = qp_model_need(m, "token_embd.weight", &emb, e)) != QP_OK ||
        (s = qp_model_need(m, c.fused_qkv ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight", &q0, e)) != QP_OK ||
        (!c.fused_qkv && (s = qp_model_need(m, "blk.0.attn_k.weight", &k0, e)) != QP_OK) ||
        (a->n_experts <= 0 &&
         (s = qp_model_need(m, c.fused_gate_up ? "blk.0.ffn_up.weight" : "blk.0.ffn_gate.weight", &g0, e)) != QP_OK))
        return s;
    c.family = a->family;
    c.dim = pick(a->hidden, emb->ne[0]);
    c.vocab = pick(a->vocab, emb->ne[1]);
    c.ffn_dim = pick(a->intermediate, !g0 ? expert_ffn(m) : c.fused_gate_up ? g0->ne[1] / 2 : g0->ne[1]);
    c.n_experts = a->n_experts > 0 ? a->n_experts : 0;
    c.n_experts_used = c.n_experts > 0 ? a->n_experts_used : 0;
    c.n_layers = a->n_layers > 0 ? a->n_layers : count_layers(m, c.fused_qkv);
    c.n_heads = a->n_heads;
    if (c.n_heads <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the head count is %lld (the architecture must "
                       "give it)", m->path, (long long)c.n_heads);
    c.head_dim = pick(a->head_dim, c.fused_qkv ? c.dim / c.n_heads : q0->ne[1] / c.n_heads);
    int64_t kv_rows = c.fused_qkv ? (q0->ne[1] - c.n_heads * c.head_dim) / 2 : k0->ne[1];
    c.n_kv_heads = pick(a->n_kv_heads, c.head_dim > 0 ? kv_rows / c.head_dim : 0);
    c.sliding_window = a->sliding_window;
    c.swa_pattern = a->swa_pattern;
    c.norm_eps = a->norm_eps > 0.0f ? a->norm_eps : 1e-5f;
    c.rope_theta = a->rope_theta > 0.0f ? a->rope_theta : 10000.0f;
    c.rope_style = a->rope_style;
    c.rope_yarn = a->rope_yarn;
    c.act = a->act; /* as the source says (readers/gguf.md "BitNet architectures") */
    c.act_int8 = a->family == QP_FAMILY_BITNET && a->act_int8;
    c.sub_norms = a->sub_norms || a->family == QP_FAMILY_BITNET ||
                  qp_model_find(m, "blk.0.attn_sub_norm.weight") != NULL;
    c.qkv_bias = a->qkv_bias || qp_model_find(m, "blk.0.attn_q.bias") != NULL;
    c.qk_norm = a->qk_norm || qp_model_find(m, "blk.0.attn_q_norm.weight") != NULL;
    gemma_config(m, &c);
    if ((s = check_config(m, &c, e)) != QP_OK) return s;

    int64_t dim = c.dim, qdim = c.n_heads * c.head_dim, kvdim = c.n_kv_heads * c.head_dim;
    if ((s = check_embd_output(m, &c, e)) != QP_OK) return s;
    bool bn = a->family == QP_FAMILY_BITNET;
    for (int64_t l = 0; l < c.n_layers; l++) {
        char nm[96];
#define NM(suffix) (snprintf(nm, sizeof nm, "blk.%lld." suffix, (long long)l), nm)
        if ((c.fused_qkv && (s = check_mat(m, NM("attn_qkv.weight"), dim, qdim + 2 * kvdim, bn, e)) != QP_OK) ||
            (!c.fused_qkv && ((s = check_mat(m, NM("attn_q.weight"), dim, qdim, bn, e)) != QP_OK ||
                              (s = check_mat(m, NM("attn_k.weight"), dim, kvdim, bn, e)) != QP_OK ||
                              (s = check_mat(m, NM("attn_v.weight"), dim, kvdim, bn, e)) != QP_OK)) ||
            (s = check_mat(m, NM("attn_output.weight"), qdim, dim, bn, e)) != QP_OK ||
            (c.n_experts > 0 && (s = check_moe_layer(m, &c, l, e)) != QP_OK) ||
            (c.n_experts == 0 &&
             ((c.fused_gate_up && (s = check_mat(m, NM("ffn_up.weight"), dim, 2 * c.ffn_dim, bn, e)) != QP_OK) ||
              (!c.fused_gate_up && ((s = check_mat(m, NM("ffn_gate.weight"), dim, c.ffn_dim, bn, e)) != QP_OK ||
                                    (s = check_mat(m, NM("ffn_up.weight"), dim, c.ffn_dim, bn, e)) != QP_OK)) ||
              (s = check_mat(m, NM("ffn_down.weight"), c.ffn_dim, dim, bn, e)) != QP_OK)) ||
            (s = check_vec(m, NM("attn_norm.weight"), dim, false, e)) != QP_OK ||
            (s = check_vec(m, NM("ffn_norm.weight"), dim, false, e)) != QP_OK)
            return s;
        if (c.sub_norms && ((s = check_vec(m, NM("attn_sub_norm.weight"), qdim, false, e)) != QP_OK ||
                            (s = check_vec(m, NM("ffn_sub_norm.weight"), c.ffn_dim, false, e)) !=
                                QP_OK))
            return s;
        if (c.post_norms && ((s = check_vec(m, NM("post_attention_norm.weight"), dim, false, e)) != QP_OK ||
                             (s = check_vec(m, NM("post_ffw_norm.weight"), dim, false, e)) != QP_OK))
            return s;
        if (c.qk_norm && ((s = check_vec(m, NM("attn_q_norm.weight"), c.head_dim, false, e)) != QP_OK ||
                          (s = check_vec(m, NM("attn_k_norm.weight"), c.head_dim, false, e)) != QP_OK))
            return s;
        if (c.qkv_bias && ((s = check_vec(m, NM("attn_q.bias"), qdim, !a->qkv_bias, e)) != QP_OK ||
                           (s = check_vec(m, NM("attn_k.bias"), kvdim, !a->qkv_bias, e)) != QP_OK ||
                           (s = check_vec(m, NM("attn_v.bias"), kvdim, !a->qkv_bias, e)) != QP_OK))
            return s;
        /* optional biases llama.cpp's graphs add (bo, ffn_{gate,up,down}_b): shapes when present */
        if ((s = check_vec(m, NM("attn_output.bias"), dim, true, e)) != QP_OK ||
            (s = check_vec(m, NM("ffn_gate.bias"), c.ffn_dim, true, e)) != QP_OK ||
            (s = check_vec(m, NM("ffn_up.bias"), c.ffn_dim, true, e)) != QP_OK ||
            (s = check_vec(m, NM("ffn_down.bias"), dim, true, e)) != QP_OK)
            return s;
#undef NM
    }
    if (out) *out = c;
    return QP_OK;
}

qp_status qp_model_refuse_experts(const qp_model *m, const char *target, qp_err *e) {
    if (m->arch.n_experts <= 0) return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture '%s' is a mixture of experts (%lld "
                   "experts, %lld per token); %s has no place for experts (GGUF and RDRR hold them)",
                   m->path, m->arch_name ? m->arch_name : qp_family_name(m->arch.family),
                   (long long)m->arch.n_experts, (long long)m->arch.n_experts_used, target);
}

double qp_arch_query_pre_attn_scalar(const qp_arch *a) {
    if (!(a->attn_scale > 0)) return (double)a->head_dim;
    const double q = 1.0 / ((double)a->attn_scale * a->attn_scale), qi = floor(q + 0.5);
    return fabs(q - qi) < 1e-3 * q ? qi : q;
}

qp_status qp_model_refuse_gemma(const qp_model *m, const char *target, qp_err *e) {
    if (!qp_family_is_gemma(m->arch.family)) return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture '%s' (GeGLU, scaled embeddings, 1 + w "
                   "norms%s) is not written as %s: that runtime has no Gemma graph (GGUF, "
                   "safetensors and RDRR hold it)", m->path, qp_family_name(m->arch.family),
                   m->arch.family == QP_FAMILY_GEMMA ? "" : ", post-norms, soft-capping", target);
}

/* Some factor of llama.cpp's rope_freqs.weight other than 1 (or a tensor that cannot be read). */
static bool has_rope_factors(const qp_tensor *t) {
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    int64_t n = qp_tensor_nelements(t);
    if (!tr || !tr->dequantize || tr->block_elems != 1 || !t->data || n > 65536 ||
        t->nbytes < (size_t)n * tr->block_bytes)
        return true;
    for (int64_t i = 0; i < n; i++) {
        float v;
        tr->dequantize(t->data + (size_t)i * tr->block_bytes, &v, 1);
        if (v != 1.0f) return true;
    }
    return false;
}

qp_status qp_model_refuse_rope_factors(const qp_model *m, const char *target, qp_err *e) {
    const qp_tensor *t = qp_model_find(m, "rope_freqs.weight");
    if (!(m->arch.rope_llama3.factor > 0.0) && !(t && has_rope_factors(t))) return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: Llama 3.1 rope scaling (%s) is not written as %s: "
                   "that runtime is not known to apply per-pair rope frequency factors (GGUF and "
                   "safetensors hold them)", m->path,
                   t ? "rope_freqs.weight" : "config.json rope_scaling llama3", target);
}

qp_status qp_tensor_check_values(const qp_model *m, const qp_tensor *t, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (!tr || !tr->validate || !t->data) return QP_OK;
    if (!(tr->flags & (QP_ENC_FLAG_FLOAT | QP_ENC_FLAG_BLOCK)) ||
        (tr->flags & (QP_ENC_FLAG_EXT_SCALE | QP_ENC_FLAG_SIBLING_SCALE | QP_ENC_FLAG_TERNARY)))
        return QP_OK;
    int64_t n = qp_tensor_nelements(t);
    size_t need;
    if (n <= 0 || n % tr->block_elems != 0 || !qp_encoding_tensor_bytes(t->enc, n, &need) ||
        need > t->nbytes)
        return QP_OK; /* sizes are the reader's and the runtime's checks */
    char why[160];
    if (tr->validate(t->data, n, why, sizeof why)) return QP_OK;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' (%s) at offset %llu: %s", m->path, t->name,
                   tr->upper_name, (unsigned long long)t->offset, why);
}

qp_status qp_model_check_values(const qp_model *m, qp_err *e) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        qp_status s = qp_tensor_check_values(m, &m->tensors[i], e);
        if (s != QP_OK) return s;
    }
    return QP_OK;
}

qp_status qp_model_check_for_write(const qp_model *m, bool allow_nonfinite, qp_err *e) {
    /* a Hugging Face architecture the readers do not know is refused by name: its tensors could be
       written under another's meaning (a GGUF, TRLM, RDRR or .bullet source names its own) */
    char *dir = NULL;
    if (m->format == QP_FORMAT_SAFETENSORS && m->arch.family == QP_FAMILY_UNKNOWN && !m->arch_name &&
        qp_hf_folder_of_file(m->path, &dir) && dir) {
        qp_status s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: one file of a Hugging Face model; give its "
                              "folder %s, whose config.json names the architecture", m->path, dir);
        qp_free(dir);
        return s;
    }
    if (m->format == QP_FORMAT_SAFETENSORS && m->arch.family == QP_FAMILY_UNKNOWN)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported for conversion "
                       "(Llama, Mistral, Qwen2, Qwen3, Phi-3, Gemma 1/2/3 and BitNet are)", m->path,
                       m->arch_name ? m->arch_name : "unknown");
    qp_status s = qp_model_check(m, NULL, e);
    if (s != QP_OK || allow_nonfinite) return s;
    s = qp_model_check_values(m, e);
    if (s != QP_OK && e) {
        size_t n = strlen(e->msg);
        snprintf(e->msg + n, sizeof e->msg - n, " (--allow-nonfinite writes it anyway)");
    }
    return s;
}
