/* The forward pass, llama2.c-plain: one token at a time, F32 activations and KV cache.
 *
 *   x = embed(token)
 *   per layer: h = rmsnorm(x) * attn_norm; q,k,v = Wq h (+bq), Wk h (+bk), Wv h (+bv);
 *              rope(q), rope(k); cache k,v; a = softmax(q.k / sqrt(head_dim)) v per head (GQA);
 *              [BitNet: a = rmsnorm(a) * attn_sub_norm]; x += Wo a;
 *              h = rmsnorm(x) * ffn_norm; f = act(Wgate h) * (Wup h)  (SiLU, or ReLU^2);
 *              [BitNet: f = rmsnorm(f) * ffn_sub_norm]; x += Wdown f
 *   logits = Wout (rmsnorm(x) * output_norm)
 * Conventions and the BitNet activation quantization: runtime/runtime.md. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime_internal.h"

struct qp_runtime {
    const qp_model *model;
    qp_runtime_config cfg;
    qp_weights w;
    qp_pool *pool;
    int64_t n_past; /* positions filled since the last reset */
    /* activations */
    float *x, *xb, *q, *k, *v, *att_out, *att_out_n, *hb, *hb2, *logits;
    float *act_f;     /* int8-quantized activations as floats (ternary without vec_dot_i8) */
    int8_t *act_i8;   /* int8 activations for vec_dot_i8 */
    float *att;       /* n_heads * n_ctx attention scores */
    float *rope_cos, *rope_sin; /* head_dim/2 each, for the current position */
    float *scratch;   /* n_threads * max_cols, for row dequantization */
    int64_t scratch_cols;
    float *k_cache, *v_cache; /* [layer][pos][kv_dim] */
};

static void rmsnorm(float *o, const float *x, const float *w, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int64_t i = 0; i < n; i++) o[i] = w[i] * (ss * x[i]);
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

/* Rotates each head of vec (n_heads * head_dim) by the angles of the current position. */
static void rope(const qp_runtime *rt, float *vec, int64_t n_heads) {
    int64_t hd = rt->cfg.head_dim, half = hd / 2;
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
            float c = rt->rope_cos[i], s = rt->rope_sin[i];
            float v0 = v[a], v1 = v[b];
            v[a] = v0 * c - v1 * s;
            v[b] = v0 * s + v1 * c;
        }
    }
}

static void rope_angles(qp_runtime *rt, int64_t pos) {
    int64_t hd = rt->cfg.head_dim;
    for (int64_t i = 0; i < hd / 2; i++) {
        double freq = pow((double)rt->cfg.rope_theta, -(double)(2 * i) / (double)hd);
        double ang = (double)pos * freq;
        rt->rope_cos[i] = (float)cos(ang);
        rt->rope_sin[i] = (float)sin(ang);
    }
}

static const qp_runtime_opts k_default_opts = {0, 0};

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
    int64_t cols = big > c->ffn_dim ? big : c->ffn_dim;
    int64_t cache;
    bool ok = qp_i64_mul(c->n_layers * c->n_ctx, kvdim, &cache);
    rt->scratch_cols = cols;
    rt->x = alloc_f(c->dim, &ok);
    rt->xb = alloc_f(c->dim, &ok);
    rt->q = alloc_f(qdim, &ok);
    rt->k = alloc_f(kvdim, &ok);
    rt->v = alloc_f(kvdim, &ok);
    rt->att_out = alloc_f(qdim, &ok);
    rt->att_out_n = alloc_f(qdim, &ok);
    rt->hb = alloc_f(c->ffn_dim, &ok);
    rt->hb2 = alloc_f(c->ffn_dim, &ok);
    rt->act_f = alloc_f(cols, &ok);
    rt->act_i8 = ok ? qp_calloc((size_t)cols, 1) : NULL;
    if (!rt->act_i8) ok = false;
    rt->logits = alloc_f(c->vocab, &ok);
    rt->att = alloc_f(c->n_heads * c->n_ctx, &ok);
    rt->rope_cos = alloc_f(c->head_dim / 2, &ok);
    rt->rope_sin = alloc_f(c->head_dim / 2, &ok);
    rt->scratch = alloc_f((int64_t)c->n_threads * cols, &ok);
    if (ok) {
        rt->k_cache = alloc_f(cache, &ok);
        rt->v_cache = alloc_f(cache, &ok);
    }
    if (!ok) {
        qp_runtime_free(rt);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for activations and a KV cache of "
                       "%lld positions", m->path, (long long)c->n_ctx);
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
    qp_weights_free(&rt->w);
    qp_free(rt->act_i8);
    float *bufs[] = {rt->x, rt->xb, rt->q, rt->k, rt->v, rt->att_out, rt->att_out_n,
                     rt->hb, rt->hb2, rt->act_f, rt->logits, rt->att, rt->rope_cos, rt->rope_sin,
                     rt->scratch, rt->k_cache, rt->v_cache};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) qp_free(bufs[i]);
    qp_free(rt);
}

void qp_runtime_reset(qp_runtime *rt) {
    if (rt) rt->n_past = 0;
}

const qp_runtime_config *qp_runtime_get_config(const qp_runtime *rt) { return &rt->cfg; }

/* rt->xb holds rmsnorm(x) * output_norm after a forward (the output projection reads it). */
const float *qp_runtime_hidden(const qp_runtime *rt) { return rt ? rt->xb : NULL; }

/* One input vector and, made on first need, its BitNet int8 quantization (runtime.md). */
typedef struct act_in {
    const float *x;
    int64_t n;
    bool done;
    float s;
} act_in;

static qp_matvec_task task_for(qp_runtime *rt, const qp_wmat *w, act_in *a, float *y) {
    qp_matvec_task t = {w, a->x, NULL, 1.0f, y};
    if (!w->ternary) return t;
    if (!a->done) {
        a->s = qp_act_quantize_i8(a->x, a->n, rt->act_i8);
        for (int64_t i = 0; i < a->n; i++) rt->act_f[i] = (float)rt->act_i8[i] / a->s;
        a->done = true;
    }
    t.xa = rt->act_i8;
    t.xa_scale = a->s;
    if (!w->use_i8) t.x = rt->act_f;
    return t;
}

typedef struct attn_job {
    qp_runtime *rt;
    int64_t layer, pos;
} attn_job;

static void attn_heads(void *ctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    attn_job *j = ctx;
    qp_runtime *rt = j->rt;
    const qp_runtime_config *c = &rt->cfg;
    int64_t hd = c->head_dim, kvdim = c->n_kv_heads * hd, group = c->n_heads / c->n_kv_heads;
    size_t loff = (size_t)j->layer * (size_t)c->n_ctx * (size_t)kvdim;
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t h = begin; h < end; h++) {
        const float *q = rt->q + h * hd;
        float *att = rt->att + h * c->n_ctx;
        int64_t kvh = h / group;
        for (int64_t t = 0; t <= j->pos; t++) {
            const float *k = rt->k_cache + loff + (size_t)t * (size_t)kvdim + (size_t)(kvh * hd);
            float score = 0.0f;
            for (int64_t i = 0; i < hd; i++) score += q[i] * k[i];
            att[t] = score * scale;
        }
        softmax(att, j->pos + 1);
        float *o = rt->att_out + h * hd;
        for (int64_t i = 0; i < hd; i++) o[i] = 0.0f;
        for (int64_t t = 0; t <= j->pos; t++) {
            const float *v = rt->v_cache + loff + (size_t)t * (size_t)kvdim + (size_t)(kvh * hd);
            float a = att[t];
            for (int64_t i = 0; i < hd; i++) o[i] += a * v[i];
        }
    }
}

qp_status qp_runtime_forward(qp_runtime *rt, int32_t token, int64_t pos, float **logits,
                             qp_err *e) {
    if (!rt || !logits) return qp_fail(e, QP_ERR_ARG, "qp_runtime_forward: NULL argument");
    const qp_runtime_config *c = &rt->cfg;
    if (token < 0 || token >= c->vocab)
        return qp_fail(e, QP_ERR_ARG, "token id %d is outside the vocabulary (0..%lld)", token,
                       (long long)c->vocab - 1);
    if (pos < 0 || pos >= c->n_ctx || pos > rt->n_past)
        return qp_fail(e, QP_ERR_ARG,
                       "position %lld is invalid: the context holds %lld positions and %lld are "
                       "filled", (long long)pos, (long long)c->n_ctx, (long long)rt->n_past);
    int64_t dim = c->dim, hd = c->head_dim, qdim = c->n_heads * hd, kvdim = c->n_kv_heads * hd;
    int64_t ffn = c->ffn_dim;
    float eps = c->norm_eps;
    float *x = rt->x;

    qp_wmat_row(&rt->w.tok_embd, token, x);
    rope_angles(rt, pos);

    for (int64_t l = 0; l < c->n_layers; l++) {
        const qp_layer_weights *L = &rt->w.layers[l];
        size_t loff = (size_t)l * (size_t)c->n_ctx * (size_t)kvdim;

        /* attention */
        rmsnorm(rt->xb, x, L->attn_norm, dim, eps);
        act_in in = {rt->xb, dim, false, 1.0f};
        qp_matvec_task qkv[3] = {task_for(rt, &L->wq, &in, rt->q), task_for(rt, &L->wk, &in, rt->k),
                                 task_for(rt, &L->wv, &in, rt->v)};
        qp_matvec_multi(rt->pool, qkv, 3, rt->scratch, rt->scratch_cols);
        if (L->bq)
            for (int64_t i = 0; i < qdim; i++) rt->q[i] += L->bq[i];
        if (L->bk)
            for (int64_t i = 0; i < kvdim; i++) rt->k[i] += L->bk[i];
        if (L->bv)
            for (int64_t i = 0; i < kvdim; i++) rt->v[i] += L->bv[i];
        rope(rt, rt->q, c->n_heads);
        rope(rt, rt->k, c->n_kv_heads);
        memcpy(rt->k_cache + loff + (size_t)pos * (size_t)kvdim, rt->k, (size_t)kvdim * sizeof(float));
        memcpy(rt->v_cache + loff + (size_t)pos * (size_t)kvdim, rt->v, (size_t)kvdim * sizeof(float));

        attn_job aj = {rt, l, pos};
        /* a head costs ~2 * (pos+1) * head_dim multiply-adds */
        int64_t per_head = 2 * (pos + 1) * hd;
        qp_pool_run(rt->pool, c->n_heads, per_head >= 16384 ? 1 : 16384 / per_head, attn_heads,
                    &aj);
        float *ao = rt->att_out;
        if (L->attn_sub_norm) {
            rmsnorm(rt->att_out_n, rt->att_out, L->attn_sub_norm, qdim, eps);
            ao = rt->att_out_n;
        }
        act_in in_o = {ao, qdim, false, 1.0f};
        qp_matvec_task o_task = task_for(rt, &L->wo, &in_o, rt->xb);
        qp_matvec_multi(rt->pool, &o_task, 1, rt->scratch, rt->scratch_cols);
        for (int64_t i = 0; i < dim; i++) x[i] += rt->xb[i];

        /* feed-forward */
        rmsnorm(rt->xb, x, L->ffn_norm, dim, eps);
        act_in in_f = {rt->xb, dim, false, 1.0f};
        qp_matvec_task gu[2] = {task_for(rt, &L->w_gate, &in_f, rt->hb),
                                task_for(rt, &L->w_up, &in_f, rt->hb2)};
        qp_matvec_multi(rt->pool, gu, 2, rt->scratch, rt->scratch_cols);
        if (c->act == QP_ACT_RELU2) {
            for (int64_t i = 0; i < ffn; i++) {
                float g = rt->hb[i] > 0.0f ? rt->hb[i] : 0.0f;
                rt->hb[i] = g * g * rt->hb2[i];
            }
        } else {
            for (int64_t i = 0; i < ffn; i++) {
                float g = rt->hb[i];
                rt->hb[i] = g * (1.0f / (1.0f + expf(-g))) * rt->hb2[i];
            }
        }
        float *fi = rt->hb;
        if (L->ffn_sub_norm) {
            rmsnorm(rt->hb2, rt->hb, L->ffn_sub_norm, ffn, eps);
            fi = rt->hb2;
        }
        act_in in_d = {fi, ffn, false, 1.0f};
        qp_matvec_task d_task = task_for(rt, &L->w_down, &in_d, rt->xb);
        qp_matvec_multi(rt->pool, &d_task, 1, rt->scratch, rt->scratch_cols);
        for (int64_t i = 0; i < dim; i++) x[i] += rt->xb[i];
    }

    rmsnorm(rt->xb, x, rt->w.output_norm, dim, eps);
    act_in in_out = {rt->xb, dim, false, 1.0f};
    qp_matvec_task out_task = task_for(rt, &rt->w.output, &in_out, rt->logits);
    qp_matvec_multi(rt->pool, &out_task, 1, rt->scratch, rt->scratch_cols);
    rt->n_past = pos + 1;
    *logits = rt->logits;
    return QP_OK;
}
