/* The forward pass, llama2.c-plain: one token at a time, F32 activations and KV cache.
 *
 *   x = embed(token)
 *   per layer: h = rmsnorm(x) * attn_norm; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv);
 *              (every product + its bias when the model has one: bo, ffn_{gate,up,down}.bias);
 *              [Qwen3: per-head rmsnorm(q) * q_norm, rmsnorm(k) * k_norm]; rope(q), rope(k); cache k,v; a = softmax(q.k / sqrt(head_dim)) v per head (GQA);
 *              [BitNet: a = rmsnorm(a) * attn_sub_norm]; x += Wo a;
 *              h = rmsnorm(x) * ffn_norm; f = act(Wgate h) * (Wup h)  (SiLU, or ReLU^2);
 *              [BitNet: f = rmsnorm(f) * ffn_sub_norm]; x += Wdown f
 *              [MoE: p = softmax(Wrouter h); the k best experts e_j, w_j = p_ej / sum p;
 *               x += sum_j w_j * Wdown_ej (silu(Wgate_ej h) * (Wup_ej h))]
 *   logits = Wout (rmsnorm(x) * output_norm)
 *   [Gemma: x = embed(token) * sqrt(dim); f = gelu_tanh(Wgate h) * (Wup h); Gemma 2/3: the
 *    attention output and the FFN output each rmsnorm'd (post-norms) before the residual add,
 *    scores and logits soft-capped c * tanh(s / c), per-layer rope bases (runtime.md "Gemma")]
 * Conventions and the BitNet activation quantization: runtime/runtime.md. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/rope.h"
#include "readers/model_check.h"
#include "runtime/runtime_internal.h"

/* Prompts are run in batches of at most this many tokens (activation buffers grow to it). */
#define QP_BATCH_MAX 64
/* Fast path: one input quantized for at most this many activation encodings (Q8_0, Q8_K). */
#define QP_ACT_SLOTS 2

struct qp_runtime {
    const qp_model *model;
    qp_runtime_config cfg;
    qp_weights w;
    qp_pool *pool;
    bool no_repack; /* opts.no_repack: matrices read where the model holds them */
    int64_t n_past; /* positions filled since the last reset */
    /* activations of up to bcap tokens, token t at t * (row length) */
    int64_t bcap;
    float *x, *xb, *q, *k, *v, *att_out, *att_out_n, *hb, *hb2;
    float *act_f;     /* int8 activations as floats, -128..127 (act_i8 without vec_dot_i8) */
    int8_t *act_i8;   /* int8 activations for vec_dot_i8, act_cols per token */
    float *act_s;     /* per token: act ~= act_i8 / act_s */
    int64_t act_cols;
    uint8_t *act_q[QP_ACT_SLOTS]; /* fast path: quantized activations, act_q_ld bytes per token */
    size_t act_q_ld;
    float *rope_cos, *rope_sin; /* head_dim/2 per token, for its position; bcap tokens of the
                                   non-sliding layers, then bcap of the sliding ones */
    float *logits;    /* vocab, the last token's */
    const float *hidden; /* dim: the last token's rmsnorm(x) * output_norm (in xb) */
    float *att;       /* n_threads * n_ctx attention scores */
    float *scratch;   /* n_threads * 2 * max_cols, for row dequantization */
    int64_t scratch_cols;
    uint8_t *k_cache, *v_cache; /* [layer][pos][kv_dim] elements of kv->block_bytes: F32, or F16
                                   on the fast path (runtime.md "KV cache") */
    const qp_encoding_traits *kv; /* F32 or F16 */
    /* MoE (NULL for a dense FFN), for bcap tokens: */
    float *moe_probs;  /* n_experts per token: router logits, then their softmax */
    int32_t *moe_sel;  /* n_experts_used per token: chosen experts, best first */
    float *moe_w;      /* n_experts_used per token: their renormalized weights */
    int64_t *moe_slot; /* per gathered token of one expert: token * n_experts_used + rank */
    float *moe_x;      /* gathered inputs of one expert (dim each), then its outputs */
    float *moe_out;    /* n_experts_used * dim per token: weighted expert outputs, by rank */
    /* Qwen3.5 (NULL otherwise), for bcap tokens: */
    float *q_gate;     /* 2 * qdim per token: a full-attention layer's q and output gate */
    float *lin_qkv;    /* conv channels per token: a delta-net layer's attn_qkv product */
    float *lin_z;      /* value width per token: its attn_gate product */
    float *lin_ba;     /* 2 * value heads per token: its ssm_beta, then ssm_alpha products */
    float *lin_o;      /* value width per token: its gated-normed output */
    /* recurrent state of every layer (used by the delta-net ones), zeroed at position 0 */
    float *conv_state; /* [layer][channel][kernel - 1] */
    float *ssm_state;  /* [layer][value head][key width][value width] */
};

static void rmsnorm(float *o, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int64_t i = 0; i < n; i++) o[i] = w[i] * (ss * x[i]);
}

/* Qwen3: each head of vec (n_heads * head_dim) RMS-normalized by itself, times w [head_dim]. */
static void head_norms(float *vec, int64_t n_heads, int64_t hd, const float *w, float eps) {
    for (int64_t h = 0; h < n_heads; h++) rmsnorm(vec + h * hd, vec + h * hd, w, hd, eps);
}

/* Gemma 2's soft-capping: x -> cap * tanh(x / cap). */
static void soft_cap(float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

static void softmax(float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int64_t i = 0; i < n; i++) x[i] /= sum;
}

/* Rotates each head of vec (n_heads * head_dim) by the angles cs/sn (head_dim/2 each). */
static void rope(const qp_runtime *rt, float *vec, int64_t n_heads, const float *cs,
                 const float *sn) {
    /* partial rotation (Qwen3.5): the first rope_dims of each head, the rest unchanged */
    int64_t hd = rt->cfg.head_dim, half = (rt->cfg.rope_dims > 0 ? rt->cfg.rope_dims : hd) / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = vec + h * hd;
        for (int64_t i = 0; i < half; i++) {
            int64_t a, b;
            if (rt->cfg.rope_style == QP_ROPE_NEOX) {
                a = i;
                b = i + half;
            } else {
                a = 2 * i;
                b = 2 * i + 1;
            }
            float c = cs[i], s = sn[i];
            float v0 = v[a], v1 = v[b];
            v[a] = v0 * c - v1 * s;
            v[b] = v0 * s + v1 * c;
        }
    }
}

/* cos/sin of pos x inv_freq[i]; with YaRN (TRLM rope.cache's trailer) the frequencies and the
 * attention factor of core/rope.h, as the rope.cache tables hold them. swa: the angles of the
 * sliding-window layers (Gemma 3's local base, unscaled); else the others' (Gemma 3's global
 * base with its linear scaling: positions x rope_freq_scale). Each frequency is divided by its
 * rope factor when the model has them (Llama 3.1's rope_freqs / llama3 rope_scaling). */
static void rope_angles(const qp_runtime *rt, int64_t pos, bool swa, float *cs, float *sn) {
    const qp_runtime_config *c = &rt->cfg;
    int64_t hd = c->rope_dims > 0 ? c->rope_dims : c->head_dim; /* the rotated dimensions */
    const qp_rope_yarn *y = c->rope_yarn.factor > 0.0 ? &c->rope_yarn : NULL;
    double mscale = qp_rope_attention_factor(y);
    double theta = swa && c->rope_theta_swa > 0.0f ? (double)c->rope_theta_swa : (double)c->rope_theta;
    double p = !swa && c->rope_freq_scale > 0.0f ? (double)pos * (double)c->rope_freq_scale : (double)pos;
    for (int64_t i = 0; i < hd / 2; i++) {
        double freq = y ? qp_rope_inv_freq(theta, hd, y, i) : pow(theta, -(double)(2 * i) / (double)hd);
        if (rt->w.rope_factors) freq /= (double)rt->w.rope_factors[i]; /* ggml: theta / freq_factor */
        double ang = p * freq;
        cs[i] = (float)(cos(ang) * mscale);
        sn[i] = (float)(sin(ang) * mscale);
    }
}

static const qp_runtime_opts k_default_opts = {.n_threads = 0, .n_ctx = 0, .exact = false, .kv_f32 = false};

/* Fast path: every matrix whose encoding has a fast dot, fed by float activations (not the
 * BitNet int8 ones) and with whole activation blocks per row, takes it. Sets act_q_ld to the
 * largest quantized row of act_cols elements. */
static void repack(qp_wmat *m);
static void copy_rows(qp_wmat *m);
static void fast_dot_for(qp_runtime *rt, qp_wmat *m) {
    if (m->use_i8 && m->tr->vec_dot_i8_packed && m->tr->vec_dot_i8_tile && !rt->no_repack) { /* int8 activations: the same layout */
        repack(m);
        rt->cfg.n_repacked += m->packed != NULL;
    }
    if (!m->tr->vec_dot_q8 || m->act_i8) return;
    const qp_encoding_traits *at = qp_encoding_get(m->tr->act_encoding);
    size_t bytes;
    if (!at || !at->quantize || m->cols % at->block_elems != 0 || m->cols % m->tr->block_elems != 0 ||
        !qp_encoding_padded_row_bytes(at->id, rt->act_cols, &bytes))
        return;
    m->act_q = at;
    rt->cfg.n_fast_mats++;
    if (bytes > rt->act_q_ld) rt->act_q_ld = bytes;
    if (rt->no_repack) return;
    repack(m);
    copy_rows(m);
    rt->cfg.n_repacked += m->packed || m->copied;
}

/* Fast path: the rows of an encoding flagged QP_ENC_FLAG_FAST_COPY (F16) copied once into runtime
 * memory, which the kernel backs with transparent huge pages: the dot reads it faster than the
 * file mapping's 4 KB pages (runtime.md "Repacked rows"). A matrix already owned by the runtime,
 * or without memory for the copy, is read where it is. */
static void copy_rows(qp_wmat *m) {
    size_t bytes;
    if (!(m->tr->flags & QP_ENC_FLAG_FAST_COPY) || m->owned || m->copied || !qp_size_mul((size_t)m->rows, m->row_bytes, &bytes) ||
        !(m->copied = qp_malloc_huge(bytes)))
        return;
    memcpy(m->copied, m->data, bytes);
    m->data = m->copied;
}

/* Fast path: the rows of an encoding with a repacked layout at this SIMD level copied into it once
 * (runtime.md "Repacked rows"); the groups of q8_pack_rows() rows, the rest stays in the file.
 * Rows that are not whole packed blocks, or no memory for the copy: the file's rows serve. */
static void repack(qp_wmat *m) {
    const int64_t g = m->tr->q8_pack_rows ? m->tr->q8_pack_rows() : 0;
    size_t bytes;
    if (g <= 0 || m->rows < g || m->packed || m->tr->q8_pack_block_elems <= 0 || m->cols % m->tr->q8_pack_block_elems != 0 ||
        !qp_size_mul((size_t)(m->rows / g) * (size_t)(m->cols / m->tr->q8_pack_block_elems), m->tr->q8_pack_block_bytes, &bytes) ||
        !(m->packed = qp_malloc_huge(bytes)))
        return;
    m->packed_rows = m->rows / g * g;
    const size_t group_bytes = bytes / (size_t)(m->rows / g);
    for (int64_t r = 0; r < m->packed_rows; r += g)
        m->tr->q8_pack(m->data + (size_t)r * m->row_bytes, m->row_bytes, m->cols, m->packed + (size_t)(r / g) * group_bytes);
}

static void unpack(qp_runtime *rt, qp_wmat *m) {
    (void)rt;
    qp_free(m->packed);
    m->packed = NULL;
    m->packed_rows = 0;
    qp_free(m->copied);
    m->copied = NULL;
}

/* fn on every matrix that can take a fast dot */
static void each_product_matrix(qp_runtime *rt, void (*fn)(qp_runtime *, qp_wmat *)) {
    qp_weights *w = &rt->w;
    fn(rt, &w->output);
    for (int64_t l = 0; l < w->n_layers; l++) {
        qp_layer_weights *L = &w->layers[l];
        qp_wmat *lm[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        qp_wmat *ssm[5] = {&L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha, &L->ssm_out};
        for (int i = L->recurrent ? 4 : 0; i < (L->experts ? 4 : 7); i++) fn(rt, lm[i]);
        for (int i = 0; i < (L->recurrent ? 5 : 0); i++) fn(rt, ssm[i]);
        if (!L->experts) continue;
        fn(rt, &L->router);
        for (int64_t i = 0; i < 3 * rt->cfg.n_experts; i++) fn(rt, &L->experts[i]);
    }
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > 256 ? 256 : (int)n);
}

static float *alloc_f(int64_t n, bool *ok) {
    size_t bytes;
    if (n <= 0 || !qp_size_mul((size_t)n, sizeof(float), &bytes)) {
        *ok = false;
        return NULL;
    }
    float *p = qp_calloc((size_t)n, sizeof(float));
    if (!p) *ok = false;
    return p;
}

static void free_batch(qp_runtime *rt) {
    float *bufs[] = {rt->x,      rt->xb,     rt->q,        rt->k,        rt->v,
                     rt->att_out, rt->att_out_n, rt->hb, rt->hb2, rt->act_f,
                     rt->act_s,  rt->rope_cos, rt->rope_sin};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) qp_free(bufs[i]);
    qp_free(rt->act_i8);
    float *moe[] = {rt->moe_probs, rt->moe_w, rt->moe_x, rt->moe_out,
                    rt->q_gate, rt->lin_qkv, rt->lin_z, rt->lin_ba, rt->lin_o};
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) qp_free(moe[i]);
    rt->q_gate = rt->lin_qkv = rt->lin_z = rt->lin_ba = rt->lin_o = NULL;
    qp_free(rt->moe_sel);
    qp_free(rt->moe_slot);
    rt->moe_probs = rt->moe_w = rt->moe_x = rt->moe_out = NULL;
    rt->moe_sel = NULL;
    rt->moe_slot = NULL;
    for (int i = 0; i < QP_ACT_SLOTS; i++) {
        qp_free(rt->act_q[i]);
        rt->act_q[i] = NULL;
    }
    rt->x = rt->xb = rt->q = rt->k = rt->v = rt->att_out = rt->att_out_n = rt->hb = rt->hb2 =
        rt->act_f = rt->act_s = rt->rope_cos = rt->rope_sin = NULL;
    rt->act_i8 = NULL;
    rt->hidden = NULL;
    rt->bcap = 0;
}

/* (Re)allocates the activation buffers for n tokens. False on overflow or out of memory (the
 * runtime then has no buffers; the next call tries again). */
static bool alloc_batch(qp_runtime *rt, int64_t n) {
    const qp_runtime_config *c = &rt->cfg;
    free_batch(rt);
    int64_t qdim = c->n_heads * c->head_dim, kvdim = c->n_kv_heads * c->head_dim;
    bool ok = true;
    /* every size is at most QP_BATCH_MAX * (1 << 22) elements: no overflow */
    rt->x = alloc_f(n * c->dim, &ok);
    rt->xb = alloc_f(n * c->dim, &ok);
    rt->q = alloc_f(n * qdim, &ok);
    rt->k = alloc_f(n * kvdim, &ok);
    rt->v = alloc_f(n * kvdim, &ok);
    rt->att_out = alloc_f(n * qdim, &ok);
    rt->att_out_n = alloc_f(n * qdim, &ok);
    rt->hb = alloc_f(n * c->ffn_dim, &ok);
    rt->hb2 = alloc_f(n * c->ffn_dim, &ok);
    rt->act_f = alloc_f(n * rt->act_cols, &ok);
    rt->act_s = alloc_f(n, &ok);
    rt->rope_cos = alloc_f(2 * n * (c->head_dim / 2), &ok); /* other layers', then sliding ones' */
    rt->rope_sin = alloc_f(2 * n * (c->head_dim / 2), &ok);
    rt->act_i8 = ok ? qp_calloc((size_t)(n * rt->act_cols), 1) : NULL;
    if (c->n_experts > 0) {
        int64_t k = c->n_experts_used;
        rt->moe_probs = alloc_f(n * c->n_experts, &ok);
        rt->moe_w = alloc_f(n * k, &ok);
        rt->moe_x = alloc_f(n * c->dim, &ok);
        rt->moe_out = alloc_f(n * k * c->dim, &ok);
        rt->moe_sel = ok ? qp_calloc((size_t)(n * k), sizeof *rt->moe_sel) : NULL;
        rt->moe_slot = ok ? qp_calloc((size_t)n, sizeof *rt->moe_slot) : NULL;
        ok = ok && rt->moe_sel && rt->moe_slot;
    }
    if (c->full_attn_interval > 0) {
        rt->q_gate = alloc_f(n * 2 * qdim, &ok);
        rt->lin_qkv = alloc_f(n * (2 * c->ssm_group_count * c->ssm_state_size + c->ssm_inner_size), &ok);
        rt->lin_z = alloc_f(n * c->ssm_inner_size, &ok);
        rt->lin_ba = alloc_f(n * 2 * c->ssm_time_step_rank, &ok);
        rt->lin_o = alloc_f(n * c->ssm_inner_size, &ok);
    }
    for (int i = 0; i < QP_ACT_SLOTS && ok && rt->act_q_ld > 0; i++)
        if (!(rt->act_q[i] = qp_calloc((size_t)n, rt->act_q_ld))) ok = false;
    if (!ok || !rt->act_i8) {
        free_batch(rt);
        return false;
    }
    rt->bcap = n;
    return true;
}

qp_status qp_runtime_new(const qp_model *m, const qp_runtime_opts *o, qp_runtime **out,
                         qp_err *e) {
    if (!m || !out) return qp_fail(e, QP_ERR_ARG, "qp_runtime_new: NULL argument");
    if (!o) o = &k_default_opts;
    qp_runtime *rt = qp_calloc(1, sizeof *rt);
    if (!rt) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    rt->model = m;
    qp_status s = qp_weights_bind(m, &rt->cfg, &rt->w, e);
    if (s != QP_OK) {
        qp_free(rt);
        return s;
    }
    qp_runtime_config *c = &rt->cfg;
    c->n_threads = o->n_threads > 0 ? o->n_threads : default_threads();
    if (o->n_ctx > 0) c->n_ctx = o->n_ctx;
    else if (m->arch.max_pos > 0) c->n_ctx = m->arch.max_pos < 4096 ? m->arch.max_pos : 4096;
    else c->n_ctx = 2048;
    if (c->n_ctx > (1 << 20)) {
        qp_runtime_free(rt);
        return qp_fail(e, QP_ERR_LIMIT, "%s: context of %lld positions (at most %d)", m->path,
                       (long long)c->n_ctx, 1 << 20);
    }
    int64_t qdim = c->n_heads * c->head_dim, kvdim = c->n_kv_heads * c->head_dim;
    int64_t big = c->dim > qdim ? c->dim : qdim;
    if (c->ssm_inner_size > big) big = c->ssm_inner_size; /* ssm_out's rows (Qwen3.5) */
    int64_t cols = big > c->ffn_dim ? big : c->ffn_dim;
    int64_t cache;
    bool ok = qp_i64_mul(c->n_layers * c->n_ctx, kvdim, &cache);
    rt->scratch_cols = 2 * cols; /* two widened rows per thread (batched products) */
    rt->act_cols = cols;
    c->exact = o->exact;
    rt->no_repack = o->no_repack;
    if (!c->exact) each_product_matrix(rt, fast_dot_for);
    ok = ok && alloc_batch(rt, 1);
    rt->logits = alloc_f(c->vocab, &ok);
    rt->att = alloc_f((int64_t)c->n_threads * c->n_ctx, &ok);
    rt->scratch = alloc_f((int64_t)c->n_threads * rt->scratch_cols, &ok);
    if (c->full_attn_interval > 0) { /* sizes bounded by qp_model_check's ranges */
        int64_t ch = 2 * c->ssm_group_count * c->ssm_state_size + c->ssm_inner_size;
        rt->conv_state = alloc_f(c->n_layers * ch * (c->ssm_conv_kernel > 1 ? c->ssm_conv_kernel - 1 : 1), &ok);
        rt->ssm_state = alloc_f(c->n_layers * c->ssm_state_size * c->ssm_inner_size, &ok);
    }
    c->kv_f16 = !c->exact && !o->kv_f32;
    rt->kv = qp_encoding_get(c->kv_f16 ? QP_ENC_F16 : QP_ENC_F32);
    if (ok) {
        rt->k_cache = qp_calloc((size_t)cache, rt->kv->block_bytes);
        rt->v_cache = rt->k_cache ? qp_calloc((size_t)cache, rt->kv->block_bytes) : NULL;
        ok = rt->v_cache != NULL;
    }
    if (!ok) {
        long long n_ctx = (long long)c->n_ctx; /* c is rt's: read before rt is freed */
        qp_runtime_free(rt);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for activations and a KV cache of "
                       "%lld positions", m->path, n_ctx);
    }
    if ((s = qp_pool_new(c->n_threads, &rt->pool, e)) != QP_OK) {
        qp_runtime_free(rt);
        return s;
    }
    *out = rt;
    return QP_OK;
}

void qp_runtime_free(qp_runtime *rt) {
    if (!rt) return;
    qp_pool_free(rt->pool);
    if (rt->w.layers) each_product_matrix(rt, unpack);
    qp_weights_free(&rt->w);
    free_batch(rt);
    float *bufs[] = {rt->logits, rt->att, rt->scratch, rt->conv_state, rt->ssm_state};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) qp_free(bufs[i]);
    qp_free(rt->k_cache);
    qp_free(rt->v_cache);
    qp_free(rt);
}

void qp_runtime_reset(qp_runtime *rt) {
    if (rt) rt->n_past = 0;
}

const qp_runtime_config *qp_runtime_get_config(const qp_runtime *rt) { return &rt->cfg; }

bool qp_runtime_is_recurrent(const qp_runtime *rt) { return rt && rt->cfg.full_attn_interval > 0; }

const float *qp_runtime_hidden(const qp_runtime *rt) { return rt->hidden; }

/* The input of a matrix product for nt tokens (token t at x + t * ld) and, made on first need,
 * its per-token BitNet int8 quantization (runtime.md). */
typedef struct act_in {
    const float *x;
    int64_t n, ld, nt;
    bool done;                                      /* act_i8 / act_s hold x quantized to int8 */
    const qp_encoding_traits *q_done[QP_ACT_SLOTS]; /* fast path: act_q[i] holds x in these */
    bool f_done;                                    /* act_f holds act_i8 as floats */
} act_in;

/* An input of nt tokens (token t at x + t * ld, n used), nothing quantized yet. */
static act_in act_input(const float *x, int64_t n, int64_t ld, int64_t nt) {
    act_in a = {x, n, ld, nt, false, {NULL}, false};
    return a;
}

/* Fast path: x quantized by w->act_q, once per input and activation encoding. */
static const uint8_t *quantized_act(qp_runtime *rt, const qp_wmat *w, act_in *a) {
    int slot = 0;
    while (slot < QP_ACT_SLOTS - 1 && a->q_done[slot] && a->q_done[slot] != w->act_q) slot++;
    if (a->q_done[slot] != w->act_q) {
        for (int64_t tk = 0; tk < a->nt; tk++)
            w->act_q->quantize(a->x + tk * a->ld, rt->act_q[slot] + (size_t)tk * rt->act_q_ld, a->n);
        a->q_done[slot] = w->act_q;
    }
    return rt->act_q[slot];
}

static qp_matvec_task task_for(qp_runtime *rt, const qp_wmat *w, act_in *a, float *y,
                               int64_t ldy) {
    qp_matvec_task t = {w, a->x, a->ld, NULL, 0, NULL, NULL, 0, y, ldy};
    if (w->act_q) {
        t.xq = quantized_act(rt, w, a);
        t.ldxq = rt->act_q_ld;
        return t;
    }
    if (!w->act_i8) return t;
    int64_t la = rt->act_cols;
    if (!a->done) {
        for (int64_t tk = 0; tk < a->nt; tk++)
            rt->act_s[tk] = qp_act_quantize_i8(a->x + tk * a->ld, a->n, rt->act_i8 + tk * la);
        a->done = true;
    }
    if (!w->use_i8 && !a->f_done) { /* the int8 codes as floats; matvec.c divides by s */
        for (int64_t tk = 0; tk < a->nt; tk++)
            for (int64_t i = 0; i < a->n; i++) rt->act_f[tk * la + i] = (float)rt->act_i8[tk * la + i];
        a->f_done = true;
    }
    t.xa = rt->act_i8;
    t.ldxa = la;
    t.xa_scale = rt->act_s;
    if (!w->use_i8) {
        t.x = rt->act_f;
        t.ldx = la;
    }
    return t;
}

/* Causal attention of tokens pos0 .. pos0+nt-1 (keys and values already in the cache), one item
 * per (token, head); every item is computed the same way whatever the batch or thread. */
typedef struct attn_job {
    qp_runtime *rt;
    int64_t layer, pos0;
    int64_t window; /* > 0: a position attends to the last `window` positions (itself included) */
} attn_job;

/* The attention window of layer l (0: all earlier positions): llama.cpp's sliding-window layers
 * (LLAMA_SWA_TYPE_STANDARD masks keys with pos - key_pos >= n_swa; HF's sliding_window the same). */
static int64_t layer_window(const qp_runtime_config *c, int64_t l) {
    if (c->sliding_window <= 0) return 0;
    if (c->swa_pattern > 1 && l % c->swa_pattern >= c->swa_pattern - 1) return 0;
    return c->sliding_window;
}

static void attn_items(void *ctx, int64_t begin, int64_t end, int tid) {
    attn_job *j = ctx;
    qp_runtime *rt = j->rt;
    const qp_runtime_config *c = &rt->cfg;
    int64_t hd = c->head_dim, kvdim = c->n_kv_heads * hd, group = c->n_heads / c->n_kv_heads;
    int64_t qdim = c->n_heads * hd;
    const size_t eb = rt->kv->block_bytes, row = (size_t)kvdim * eb;
    size_t loff = (size_t)j->layer * (size_t)c->n_ctx * row;
    float scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)hd);
    float cap = c->attn_softcap;
    float *att = rt->att + (size_t)tid * (size_t)c->n_ctx;
    /* scores through the cache encoding's traits dot (the scalar one sums q[i] * k[i] in index
       order, F16 widened exactly) */
    qp_vec_dot_f32_fn dot = rt->kv->vec_dot_f32;
    bool simd = strcmp(qp_encoding_simd_level(), "scalar") != 0, f16 = rt->cfg.kv_f16;
    for (int64_t it = begin; it < end; it++) {
        int64_t tk = it / c->n_heads, h = it % c->n_heads, pos = j->pos0 + tk;
        const float *q = rt->q + tk * qdim + h * hd;
        int64_t kvh = h / group;
        const uint8_t *kc = rt->k_cache + loff + (size_t)(kvh * hd) * eb;
        const uint8_t *vc = rt->v_cache + loff + (size_t)(kvh * hd) * eb;
        int64_t t0 = j->window > 0 && pos >= j->window ? pos - j->window + 1 : 0;
        for (int64_t t = t0; t <= pos; t++) att[t] = dot(kc + (size_t)t * row, q, hd) * scale;
        if (cap > 0.0f) soft_cap(att + t0, pos + 1 - t0, cap);
        softmax(att + t0, pos + 1 - t0);
        float *o = rt->att_out + tk * qdim + h * hd;
        for (int64_t i = 0; i < hd; i++) o[i] = 0.0f;
        for (int64_t t = t0; t <= pos; t++) {
            const void *v = vc + (size_t)t * row;
            float a = att[t];
            if (f16 && simd) qp_attn_accum_f16_avx2(o, v, a, hd);
            else if (f16)
                for (int64_t i = 0; i < hd; i++) o[i] += a * qp_fp16_to_fp32(((const uint16_t *)v)[i]);
            else if (simd) qp_attn_accum_avx2(o, v, a, hd);
            else
                for (int64_t i = 0; i < hd; i++) o[i] += a * ((const float *)v)[i];
        }
    }
}

static void matmul(qp_runtime *rt, const qp_matvec_task *tasks, int n, int64_t nt) {
    qp_matmul_multi(rt->pool, tasks, n, nt, rt->scratch, rt->scratch_cols);
}

/* The gated FFN activation in place: g[i] = act(g[i]) * u[i] (SiLU, ReLU^2, or Gemma's GELU
 * with the tanh approximation, HF gelu_pytorch_tanh). */
static void ffn_act(const qp_runtime_config *c, float *g, const float *u, int64_t n) {
    if (c->act == QP_ACT_GELU) {
        const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
        for (int64_t i = 0; i < n; i++) {
            float x = g[i];
            g[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * u[i];
        }
    } else if (c->act == QP_ACT_RELU2) {
        for (int64_t i = 0; i < n; i++) {
            float r = g[i] > 0.0f ? g[i] : 0.0f;
            g[i] = r * r * u[i];
        }
    } else {
        for (int64_t i = 0; i < n; i++) g[i] = g[i] * (1.0f / (1.0f + expf(-g[i]))) * u[i];
    }
}

/* Router of nt tokens (llama.cpp's build_moe_ffn, softmax gating): probs = softmax(logits);
 * the n_experts_used largest, best first (equal probabilities: the lower expert id); their
 * weights divided by their sum (clamped below at 6.103515625e-5, as llama.cpp). */
static void moe_route(qp_runtime *rt, int64_t nt) {
    int64_t ne = rt->cfg.n_experts, k = rt->cfg.n_experts_used;
    for (int64_t t = 0; t < nt; t++) {
        float *p = rt->moe_probs + t * ne;
        int32_t *sel = rt->moe_sel + t * k;
        float *w = rt->moe_w + t * k;
        softmax(p, ne);
        float sum = 0.0f;
        for (int64_t j = 0; j < k; j++) {
            int32_t best = -1;
            for (int64_t x = 0; x < ne; x++) {
                bool taken = false;
                for (int64_t i = 0; i < j; i++) taken = taken || sel[i] == x;
                if (!taken && (best < 0 || p[x] > p[best])) best = (int32_t)x;
            }
            sel[j] = best;
            w[j] = p[best];
            sum += w[j];
        }
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int64_t j = 0; j < k; j++) w[j] /= sum;
    }
}

/* The MoE FFN of nt tokens, input h in rt->xb, result back in rt->xb: per expert, the tokens
 * that chose it are gathered and run as one batch (gate, up, act, down); each token's result is
 * sum over its ranks j of w_j * down_j, added in rank order as llama.cpp does. */
static void moe_ffn(qp_runtime *rt, const qp_layer_weights *L, int64_t nt) {
    const qp_runtime_config *c = &rt->cfg;
    int64_t dim = c->dim, ffn = c->ffn_dim, k = c->n_experts_used;
    act_in in_r = act_input(rt->xb, dim, dim, nt);
    qp_matvec_task r_task = task_for(rt, &L->router, &in_r, rt->moe_probs, c->n_experts);
    matmul(rt, &r_task, 1, nt);
    moe_route(rt, nt);
    for (int64_t x = 0; x < c->n_experts; x++) {
        int64_t n = 0;
        for (int64_t s = 0; s < nt * k; s++) {
            if (rt->moe_sel[s] != x) continue;
            memcpy(rt->moe_x + n * dim, rt->xb + (s / k) * dim, (size_t)dim * sizeof(float));
            rt->moe_slot[n++] = s;
        }
        if (n == 0) continue;
        const qp_wmat *W = &L->experts[3 * x];
        act_in in = act_input(rt->moe_x, dim, dim, n);
        qp_matvec_task gu[2] = {task_for(rt, &W[QP_EXPERT_GATE], &in, rt->hb, ffn),
                                task_for(rt, &W[QP_EXPERT_UP], &in, rt->hb2, ffn)};
        matmul(rt, gu, 2, n);
        ffn_act(c, rt->hb, rt->hb2, n * ffn);
        act_in in_d = act_input(rt->hb, ffn, ffn, n);
        qp_matvec_task d_task = task_for(rt, &W[QP_EXPERT_DOWN], &in_d, rt->moe_x, dim);
        matmul(rt, &d_task, 1, n);
        for (int64_t i = 0; i < n; i++) {
            float *o = rt->moe_out + rt->moe_slot[i] * dim, wt = rt->moe_w[rt->moe_slot[i]];
            const float *y = rt->moe_x + i * dim;
            for (int64_t d = 0; d < dim; d++) o[d] = y[d] * wt;
        }
    }
    for (int64_t t = 0; t < nt; t++) {
        float *h = rt->xb + t * dim;
        const float *o = rt->moe_out + t * k * dim;
        memcpy(h, o, (size_t)dim * sizeof(float));
        for (int64_t j = 1; j < k; j++)
            for (int64_t d = 0; d < dim; d++) h[d] += o[j * dim + d];
    }
}

/* Each of nt rows of n in place, v += b (b NULL: nothing): a projection's bias, added to its
 * product as llama.cpp's ggml_add. */
static void add_bias(float *v, const float *b, int64_t nt, int64_t n) {
    if (!b) return;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t i = 0; i < n; i++) v[t * n + i] += b[i];
}

/* Gemma 2/3's post-norms: each of nt rows of dim in place, rmsnorm(v) * w (w NULL: nothing). */
static void post_norm(float *v, const float *w, int64_t nt, int64_t dim, float eps) {
    if (!w) return;
    for (int64_t t = 0; t < nt; t++) rmsnorm(v + t * dim, v + t * dim, w, dim, eps);
}

/* BitNet's sub-norms: nt rows of n from src normalized into dst; returns dst, or src when w is
 * NULL (no sub-norm: nothing done). */
static float *sub_norm_rows(float *dst, float *src, const float *w, int64_t n, int64_t nt, float eps) {
    if (!w) return src;
    for (int64_t t = 0; t < nt; t++) rmsnorm(dst + t * n, src + t * n, w, n, eps);
    return dst;
}

/* Qwen3.5's full-attention q: the q half of each head of q_gate (per head q then gate, as HF's
 * view(..., 2 * head_dim).chunk(2) and llama.cpp's views), the gate halves kept in q_gate. */
static void split_q_gate(const qp_runtime_config *c, const float *qg, float *q, int64_t nt) {
    int64_t hd = c->head_dim, qdim = c->n_heads * hd;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < c->n_heads; h++)
            memcpy(q + t * qdim + h * hd, qg + t * 2 * qdim + h * 2 * hd, (size_t)hd * sizeof(float));
}

/* Qwen3.5's output gate: each attention output element x sigmoid(its gate). */
static void apply_out_gate(const qp_runtime_config *c, float *ao, const float *qg, int64_t nt) {
    int64_t hd = c->head_dim, qdim = c->n_heads * hd;
    for (int64_t t = 0; t < nt; t++)
        for (int64_t h = 0; h < c->n_heads; h++)
            for (int64_t i = 0; i < hd; i++) {
                float g = qg[t * 2 * qdim + h * 2 * hd + hd + i];
                ao[t * qdim + h * hd + i] *= 1.0f / (1.0f + expf(-g));
            }
}

/* Layer l's attention of nt tokens at pos .., input rt->xb (normalized), Wo's product back in
 * rt->xb. rcos/rsin: the layer's rope table. */
static void attn_block(qp_runtime *rt, const qp_layer_weights *L, int64_t l, int64_t nt, int64_t pos,
                       const float *rcos, const float *rsin) {
    const qp_runtime_config *c = &rt->cfg;
    int64_t dim = c->dim, hd = c->head_dim, qdim = c->n_heads * hd, kvdim = c->n_kv_heads * hd;
    int64_t half = hd / 2;
    float eps = c->norm_eps;
    size_t loff = (size_t)l * (size_t)c->n_ctx * (size_t)kvdim;
    act_in in = act_input(rt->xb, dim, dim, nt);
    bool gated = c->attn_out_gate;
    qp_matvec_task qkv[3] = {task_for(rt, &L->wq, &in, gated ? rt->q_gate : rt->q, gated ? 2 * qdim : qdim),
                             task_for(rt, &L->wk, &in, rt->k, kvdim),
                             task_for(rt, &L->wv, &in, rt->v, kvdim)};
    matmul(rt, qkv, 3, nt);
    add_bias(rt->q, L->bq, nt, qdim);
    add_bias(rt->k, L->bk, nt, kvdim);
    add_bias(rt->v, L->bv, nt, kvdim);
    if (gated) split_q_gate(c, rt->q_gate, rt->q, nt);
    for (int64_t t = 0; t < nt; t++) {
        float *q = rt->q + t * qdim, *k = rt->k + t * kvdim, *v = rt->v + t * kvdim;
        if (L->q_norm) head_norms(q, c->n_heads, hd, L->q_norm, eps);
        if (L->k_norm) head_norms(k, c->n_kv_heads, hd, L->k_norm, eps);
        rope(rt, q, c->n_heads, rcos + t * half, rsin + t * half);
        rope(rt, k, c->n_kv_heads, rcos + t * half, rsin + t * half);
        size_t at = (loff + (size_t)(pos + t) * (size_t)kvdim) * rt->kv->block_bytes;
        if (c->kv_f16) { /* F16 round to nearest even (the F16 traits' quantize) */
            rt->kv->quantize(k, rt->k_cache + at, kvdim);
            rt->kv->quantize(v, rt->v_cache + at, kvdim);
        } else {
            memcpy(rt->k_cache + at, k, (size_t)kvdim * sizeof(float));
            memcpy(rt->v_cache + at, v, (size_t)kvdim * sizeof(float));
        }
    }

    attn_job aj = {rt, l, pos, layer_window(c, l)};
    /* an item costs ~2 * (pos+1) * head_dim multiply-adds */
    int64_t per_item = 2 * (pos + (nt + 1) / 2) * hd + 1;
    qp_pool_run(rt->pool, nt * c->n_heads, per_item >= 16384 ? 1 : 16384 / per_item, attn_items, &aj);
    float *ao = rt->att_out;
    if (gated) apply_out_gate(c, ao, rt->q_gate, nt);
    ao = sub_norm_rows(rt->att_out_n, ao, L->attn_sub_norm, qdim, nt, eps);
    act_in in_o = act_input(ao, qdim, qdim, nt);
    qp_matvec_task o_task = task_for(rt, &L->wo, &in_o, rt->xb, dim);
    matmul(rt, &o_task, 1, nt);
    add_bias(rt->xb, L->bo, nt, dim);
}

/* Qwen3.5's delta-net layer l for nt tokens, input rt->xb (normalized), ssm_out's product back
 * in rt->xb: the four projections batched, then token by token through the recurrent state. */
static void delta_block(qp_runtime *rt, const qp_layer_weights *L, int64_t l, int64_t nt) {
    const qp_runtime_config *c = &rt->cfg;
    int64_t dim = c->dim, val = c->ssm_inner_size, nv = c->ssm_time_step_rank;
    int64_t ch = 2 * c->ssm_group_count * c->ssm_state_size + val;
    act_in in = act_input(rt->xb, dim, dim, nt);
    qp_matvec_task pr[4] = {task_for(rt, &L->ssm_qkv, &in, rt->lin_qkv, ch),
                            task_for(rt, &L->ssm_z, &in, rt->lin_z, val),
                            task_for(rt, &L->ssm_beta, &in, rt->lin_ba, 2 * nv),
                            task_for(rt, &L->ssm_alpha, &in, rt->lin_ba + nv, 2 * nv)};
    matmul(rt, pr, 4, nt);
    int64_t km1 = c->ssm_conv_kernel > 1 ? c->ssm_conv_kernel - 1 : 1;
    float *cs = rt->conv_state + l * ch * km1;
    float *ss = rt->ssm_state + l * c->ssm_state_size * val;
    for (int64_t t = 0; t < nt; t++)
        qp_delta_net_token(c, L, cs, ss, rt->lin_qkv + t * ch, rt->lin_z + t * val, rt->lin_ba + t * 2 * nv,
                           rt->lin_o + t * val);
    act_in in_o = act_input(rt->lin_o, val, val, nt);
    qp_matvec_task o_task = task_for(rt, &L->ssm_out, &in_o, rt->xb, dim);
    matmul(rt, &o_task, 1, nt);
}

/* Runs nt <= bcap tokens at positions pos .. pos+nt-1 (checked by the callers). With
 * all_logits every token's logits go there (row t at t * vocab) and the last one's also to
 * rt->logits; else with last_logits only the last token's go to rt->logits; else none. */
static void run_batch(qp_runtime *rt, const int32_t *tokens, int64_t nt, int64_t pos,
                      float *all_logits, bool last_logits) {
    const qp_runtime_config *c = &rt->cfg;
    int64_t dim = c->dim, hd = c->head_dim;
    int64_t ffn = c->ffn_dim, half = hd / 2;
    float eps = c->norm_eps;
    float *x = rt->x;

    /* the sliding layers' rope table, when their angles differ (Gemma 3) */
    bool own_swa = c->rope_theta_swa > 0.0f || c->rope_freq_scale > 0.0f;
    int64_t swa_off = own_swa ? rt->bcap * half : 0;
    for (int64_t t = 0; t < nt; t++) {
        qp_wmat_row(&rt->w.tok_embd, tokens[t], x + t * dim);
        if (c->embd_scale > 0.0f)
            for (int64_t i = 0; i < dim; i++) x[t * dim + i] *= c->embd_scale;
        rope_angles(rt, pos + t, false, rt->rope_cos + t * half, rt->rope_sin + t * half);
        if (own_swa)
            rope_angles(rt, pos + t, true, rt->rope_cos + swa_off + t * half, rt->rope_sin + swa_off + t * half);
    }
    if (pos == 0 && rt->conv_state) { /* a new sequence: the recurrent state starts at zero */
        int64_t ch = 2 * c->ssm_group_count * c->ssm_state_size + c->ssm_inner_size;
        int64_t km1 = c->ssm_conv_kernel > 1 ? c->ssm_conv_kernel - 1 : 1;
        memset(rt->conv_state, 0, (size_t)(c->n_layers * ch * km1) * sizeof(float));
        memset(rt->ssm_state, 0, (size_t)(c->n_layers * c->ssm_state_size * c->ssm_inner_size) * sizeof(float));
    }

    for (int64_t l = 0; l < c->n_layers; l++) {
        const qp_layer_weights *L = &rt->w.layers[l];
        int64_t window = layer_window(c, l);

        /* attention (Qwen3.5's delta-net layers: linear attention) */
        for (int64_t t = 0; t < nt; t++)
            rmsnorm(rt->xb + t * dim, x + t * dim, L->attn_norm, dim, eps);
        if (L->recurrent)
            delta_block(rt, L, l, nt);
        else
            attn_block(rt, L, l, nt, pos, rt->rope_cos + (window > 0 ? swa_off : 0),
                       rt->rope_sin + (window > 0 ? swa_off : 0));
        post_norm(rt->xb, L->post_attn_norm, nt, dim, eps);
        for (int64_t i = 0; i < nt * dim; i++) x[i] += rt->xb[i];

        /* feed-forward */
        for (int64_t t = 0; t < nt; t++)
            rmsnorm(rt->xb + t * dim, x + t * dim, L->ffn_norm, dim, eps);
        if (L->experts) {
            moe_ffn(rt, L, nt);
            for (int64_t i = 0; i < nt * dim; i++) x[i] += rt->xb[i];
            continue;
        }
        act_in in_f = act_input(rt->xb, dim, dim, nt);
        qp_matvec_task gu[2] = {task_for(rt, &L->w_gate, &in_f, rt->hb, ffn),
                                task_for(rt, &L->w_up, &in_f, rt->hb2, ffn)};
        matmul(rt, gu, 2, nt);
        add_bias(rt->hb, L->b_gate, nt, ffn);
        add_bias(rt->hb2, L->b_up, nt, ffn);
        ffn_act(c, rt->hb, rt->hb2, nt * ffn);
        float *fi = sub_norm_rows(rt->hb2, rt->hb, L->ffn_sub_norm, ffn, nt, eps);
        act_in in_d = act_input(fi, ffn, ffn, nt);
        qp_matvec_task d_task = task_for(rt, &L->w_down, &in_d, rt->xb, dim);
        matmul(rt, &d_task, 1, nt);
        add_bias(rt->xb, L->b_down, nt, dim);
        post_norm(rt->xb, L->post_ffn_norm, nt, dim, eps);
        for (int64_t i = 0; i < nt * dim; i++) x[i] += rt->xb[i];
    }

    /* only the tokens whose logits are wanted go through the output projection */
    if (!all_logits && !last_logits) return;
    int64_t first = all_logits ? 0 : nt - 1, nl = nt - first;
    for (int64_t t = first; t < nt; t++)
        rmsnorm(rt->xb + t * dim, x + t * dim, rt->w.output_norm, dim, eps);
    rt->hidden = rt->xb + (nt - 1) * dim;
    act_in in_out = act_input(rt->xb + first * dim, dim, dim, nl);
    float *lg = all_logits ? all_logits : rt->logits;
    qp_matvec_task out_task = task_for(rt, &rt->w.output, &in_out, lg, c->vocab);
    matmul(rt, &out_task, 1, nl);
    if (c->final_softcap > 0.0f) soft_cap(lg, nl * c->vocab, c->final_softcap);
    if (all_logits)
        memcpy(rt->logits, all_logits + (nt - 1) * c->vocab, (size_t)c->vocab * sizeof(float));
}

static qp_status check_tokens(const qp_runtime *rt, const int32_t *tokens, int64_t n, int64_t pos,
                              qp_err *e) {
    const qp_runtime_config *c = &rt->cfg;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab)
            return qp_fail(e, QP_ERR_ARG, "token id %d is outside the vocabulary (0..%lld)",
                           tokens[i], (long long)c->vocab - 1);
    if (pos < 0 || pos >= c->n_ctx || pos > rt->n_past || n > c->n_ctx - pos)
        return qp_fail(e, QP_ERR_ARG,
                       "position %lld is invalid: the context holds %lld positions and %lld are "
                       "filled", (long long)(pos < 0 || pos > rt->n_past ? pos : pos + n - 1),
                       (long long)c->n_ctx, (long long)rt->n_past);
    if (rt->conv_state && pos != 0 && pos != rt->n_past)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: position %lld: a %s model's recurrent state "
                       "cannot rewind (run position 0 to start over, or %lld to continue)",
                       rt->model->path, (long long)pos, qp_family_name(c->family), (long long)rt->n_past);
    return QP_OK;
}

qp_status qp_runtime_forward(qp_runtime *rt, int32_t token, int64_t pos, float **logits,
                             qp_err *e) {
    if (!rt || !logits) return qp_fail(e, QP_ERR_ARG, "qp_runtime_forward: NULL argument");
    qp_status s = check_tokens(rt, &token, 1, pos, e);
    if (s != QP_OK) return s;
    if (rt->bcap < 1 && !alloc_batch(rt, 1))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for activations", rt->model->path);
    run_batch(rt, &token, 1, pos, NULL, true);
    rt->n_past = pos + 1;
    *logits = rt->logits;
    return QP_OK;
}

qp_status qp_runtime_forward_batch(qp_runtime *rt, const int32_t *tokens, int64_t n_tokens,
                                   int64_t pos, float *all_logits, float **logits, qp_err *e) {
    if (!rt || !tokens || !logits || n_tokens < 1)
        return qp_fail(e, QP_ERR_ARG, "qp_runtime_forward_batch: NULL argument or no tokens");
    qp_status s = check_tokens(rt, tokens, n_tokens, pos, e);
    if (s != QP_OK) return s;
    int64_t want = n_tokens < QP_BATCH_MAX ? n_tokens : QP_BATCH_MAX;
    if (rt->bcap < want && !alloc_batch(rt, want))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for the activations of %lld tokens",
                       rt->model->path, (long long)want);
    int64_t vocab = rt->cfg.vocab;
    for (int64_t i = 0; i < n_tokens; i += rt->bcap) {
        int64_t nt = n_tokens - i < rt->bcap ? n_tokens - i : rt->bcap;
        run_batch(rt, tokens + i, nt, pos + i, all_logits ? all_logits + i * vocab : NULL,
                  i + nt == n_tokens);
        rt->n_past = pos + i + nt;
    }
    *logits = rt->logits;
    return QP_OK;
}
