/* The forward pass on models built in memory, against a plain double-precision reference written
 * here from the formulas (runtime/runtime.md): Llama GQA with both RoPE conventions (an HF-style
 * twin built by permuting q/k rows must give the same logits), Qwen2 q/k/v bias, a
 * dequantize-only encoding, BitNet b1.58 (ReLU^2, sub-norms, int8 activations on TQ2_0 ternary
 * weights), thread-count independence, the batched prompt path against the token-by-token one,
 * and the errors for missing or misshapen tensors. */
#include <math.h>
#include <stdint.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

typedef struct cfg {
    int dim, ffn, layers, heads, kv, vocab;
    qp_family family;
    qp_rope_style rope;
    bool bias, sub_norms, tied;
    qp_encoding mat_enc; /* encoding of the 2-D projection matrices */
} cfg;

#define MAXT 64
typedef struct built {
    qp_model *m;
    int nt;
    char names[MAXT][64];
    float *vals[MAXT];   /* values the reference uses (dequantized from the stored bytes) */
    int64_t rows[MAXT], cols[MAXT];
    uint8_t *bytes[MAXT];
} built;

static uint64_t g_rng = 88172645463325252ull;
static const char *g_skip; /* a tensor build() leaves out */
static bool g_tern_vals;    /* build(): projections exactly ternary whatever the encoding */
static float g_sib_scale;   /* build(): QK256 matrices get a sibling "<base>.scale" of this value */
static bool g_exact_path = true; /* run_all, run_vs_ref: qp_runtime_opts.exact */
static int g_ref_actq = -1; /* reference: -1 the runtime.md rule, 0 never quantize activations */
static bool g_bitnet_silu;  /* build(): a BitNet model is llama.cpp's "bitnet" (SiLU, float
                               activations); the reference follows */
static bool g_scale_any;    /* build(): every blk.* matrix (any encoding) gets the sibling scale */
static bool g_more_biases;  /* with cfg.bias: also attn_output.bias and ffn_{gate,up,down}.bias
                               (HF Llama attention_bias + mlp_bias), in build() and the reference */
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static const float *get(const built *b, const char *name) {
    for (int i = 0; i < b->nt; i++)
        if (strcmp(b->names[i], name) == 0) return b->vals[i];
    return NULL;
}

/* Adds a tensor of rows x cols (1-D when rows == 0) with values from gen (scaled). */
static void add(built *b, const char *name, int64_t rows, int64_t cols, qp_encoding enc,
                float scale, float offset, bool ternary_vals) {
    if (g_skip && strcmp(name, g_skip) == 0) return;
    int i = b->nt++;
    snprintf(b->names[i], sizeof b->names[i], "%s", name);
    int64_t r = rows ? rows : 1, n = r * cols;
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t k = 0; k < n; k++) {
        float x = frand();
        if (ternary_vals) x = x < -0.33f ? -1.0f : (x > 0.33f ? 1.0f : 0.0f);
        v[k] = offset + scale * x;
    }
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    size_t nb = 0;
    qp_encoding_tensor_bytes(enc, n, &nb);
    uint8_t *bytes = calloc(1, nb + 1);
    if (tr->quantize_ref) {
        tr->quantize_ref(v, bytes, n);
    } else if (tr->quantize_tensor) { /* I2_S: codes and the per-tensor trailer scale */
        qp_encoding_quantize_tensor(enc, v, bytes, n);
    } else { /* integer encodings (I8): store the rounded values */
        for (int64_t k = 0; k < n; k++) bytes[k] = (uint8_t)(int8_t)lrintf(v[k]);
    }
    qp_encoding_dequantize_tensor(enc, bytes, v, n); /* the reference sees the stored values */
    b->vals[i] = v;
    b->bytes[i] = bytes;
    b->rows[i] = r;
    b->cols[i] = cols;
    qp_tensor *t = NULL;
    QP_CHECK(qp_model_add_tensor(b->m, name, strlen(name), &t, NULL) == QP_OK);
    if (!t) exit(qp_test_finish());
    t->canon = qp_arena_strdup(qp_model_arena(b->m), name);
    t->enc = enc;
    t->n_dims = rows ? 2 : 1;
    t->ne[0] = cols;
    t->ne[1] = r;
    t->data = bytes;
    t->nbytes = nb;
    bool sib = enc == QP_ENC_QK256 || (g_scale_any && rows && strncmp(name, "blk.", 4) == 0);
    if (sib && g_sib_scale != 0.0f) { /* weights = rows * sibling scale */
        for (int64_t k = 0; k < n; k++) v[k] *= g_sib_scale;
        char sn[64];
        snprintf(sn, sizeof sn, "%.*s.scale", (int)(strlen(name) - strlen(".weight")), name);
        add(b, sn, 0, 1, QP_ENC_F32, 0.0f, g_sib_scale, false);
    }
}

static void build(built *b, const cfg *c, uint64_t seed) {
    memset(b, 0, sizeof *b);
    g_rng = seed;
    QP_CHECK(qp_model_new(QP_FORMAT_GGUF, "mem-model", &b->m, NULL) == QP_OK);
    if (!b->m) exit(qp_test_finish());
    qp_arch *a = &b->m->arch;
    a->family = c->family;
    a->hidden = c->dim;
    a->intermediate = c->ffn;
    a->n_layers = c->layers;
    a->n_heads = c->heads;
    a->n_kv_heads = c->kv;
    a->head_dim = c->dim / c->heads;
    a->vocab = c->vocab;
    a->max_pos = 64;
    a->norm_eps = 1e-5f;
    a->rope_theta = 10000.0f;
    a->rope_style = c->rope;
    a->tie_embeddings = c->tied;
    a->qkv_bias = c->bias;
    a->sub_norms = c->sub_norms;
    /* BitNet: the 2B4T kind (bitnet-b1.58), or llama.cpp's "bitnet" with g_bitnet_silu */
    a->act = c->family == QP_FAMILY_BITNET && !g_bitnet_silu ? QP_ACT_RELU2 : QP_ACT_SILU;
    a->act_int8 = c->family == QP_FAMILY_BITNET && !g_bitnet_silu;
    int hd = c->dim / c->heads, kvd = c->kv * hd;
    bool tern = (qp_encoding_get(c->mat_enc)->flags & QP_ENC_FLAG_TERNARY) != 0;
    bool ints = (qp_encoding_get(c->mat_enc)->flags & QP_ENC_FLAG_INT) != 0;
    float ms = ints || tern ? 1.0f : 0.3f; /* int / ternary codes stay small */
    if (g_tern_vals) {
        tern = true;
        ms = 0.25f; /* q * alpha, alpha a power of two as the BitNet fixtures */
    }
    add(b, "token_embd.weight", c->vocab, c->dim, QP_ENC_F32, 1.0f, 0.0f, false);
    if (!c->tied) add(b, "output.weight", c->vocab, c->dim, QP_ENC_F16, 0.5f, 0.0f, false);
    add(b, "output_norm.weight", 0, c->dim, QP_ENC_F32, 0.2f, 1.0f, false);
    char nm[64];
    for (int l = 0; l < c->layers; l++) {
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
        add(b, N("attn_norm.weight"), 0, c->dim, QP_ENC_F32, 0.2f, 1.0f, false);
        add(b, N("attn_q.weight"), c->dim, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("attn_k.weight"), kvd, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("attn_v.weight"), kvd, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("attn_output.weight"), c->dim, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("ffn_norm.weight"), 0, c->dim, QP_ENC_F32, 0.2f, 1.0f, false);
        add(b, N("ffn_gate.weight"), c->ffn, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("ffn_up.weight"), c->ffn, c->dim, c->mat_enc, ms, 0.0f, tern || ints);
        add(b, N("ffn_down.weight"), c->dim, c->ffn, c->mat_enc, ms, 0.0f, tern || ints);
        if (c->bias) {
            add(b, N("attn_q.bias"), 0, c->dim, QP_ENC_F32, 0.5f, 0.0f, false);
            add(b, N("attn_k.bias"), 0, kvd, QP_ENC_F32, 0.5f, 0.0f, false);
            add(b, N("attn_v.bias"), 0, kvd, QP_ENC_F32, 0.5f, 0.0f, false);
        }
        if (c->bias && g_more_biases) {
            add(b, N("attn_output.bias"), 0, c->dim, QP_ENC_F32, 0.5f, 0.0f, false);
            add(b, N("ffn_gate.bias"), 0, c->ffn, QP_ENC_F32, 0.5f, 0.0f, false);
            add(b, N("ffn_up.bias"), 0, c->ffn, QP_ENC_F32, 0.5f, 0.0f, false);
            add(b, N("ffn_down.bias"), 0, c->dim, QP_ENC_F32, 0.5f, 0.0f, false);
        }
        if (c->sub_norms) {
            add(b, N("attn_sub_norm.weight"), 0, c->dim, QP_ENC_F32, 0.2f, 1.0f, false);
            add(b, N("ffn_sub_norm.weight"), 0, c->ffn, QP_ENC_F32, 0.2f, 1.0f, false);
        }
#undef N
    }
    QP_CHECK(qp_model_finish(b->m, NULL) == QP_OK);
}

static void unbuild(built *b) {
    for (int i = 0; i < b->nt; i++) {
        free(b->vals[i]);
        free(b->bytes[i]);
    }
    qp_model_close(b->m);
}

/* ---- reference, in double ----------------------------------------------------------------- */

static void ref_matvec(const float *w, int64_t rows, int64_t cols, const double *x, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < cols; c++) s += (double)w[r * cols + c] * x[c];
        y[r] = s;
    }
}
static void ref_rmsnorm(const double *x, const float *w, int64_t n, double *o) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double k = 1.0 / sqrt(ss / (double)n + 1e-5);
    for (int64_t i = 0; i < n; i++) o[i] = x[i] * k * w[i];
}
/* BitNet activation quantization as enc_ternary.md states it (float scale, round half to even). */
static void ref_actq(const double *x, int64_t n, double *o) {
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf((float)x[i]));
    float s = 127.0f / fmaxf(amax, 1e-5f);
    for (int64_t i = 0; i < n; i++) {
        float q = nearbyintf((float)x[i] * s);
        q = fminf(fmaxf(q, -128.0f), 127.0f);
        o[i] = (double)q / (double)s;
    }
}
static void ref_proj(const built *b, const char *name, int64_t rows, int64_t cols, bool actq,
                     const double *x, double *y) {
    double xq[4096];
    const double *in = x;
    if (actq) {
        ref_actq(x, cols, xq);
        in = xq;
    }
    ref_matvec(get(b, name), rows, cols, in, y);
}

/* y += the bias named (g_more_biases with cfg.bias; else nothing) */
static void add_ref_bias(const built *b, const cfg *c, const char *name, double *y, int n) {
    if (!c->bias || !g_more_biases) return;
    const float *bias = get(b, name);
    for (int i = 0; i < n; i++) y[i] += bias[i];
}

/* Logits after feeding toks[0..n) (last position). */
static void ref_forward(const built *b, const cfg *c, const int32_t *toks, int n, double *logits) {
    int dim = c->dim, hd = dim / c->heads, kvd = c->kv * hd, ffn = c->ffn;
    /* int8 activations on the seven projections: BitNet whatever the encoding, else ternary
       encodings (runtime.md "BitNet activation quantization") */
    bool bn = c->family == QP_FAMILY_BITNET, relu2 = bn && !g_bitnet_silu;
    bool aq = bn ? relu2 : (qp_encoding_get(c->mat_enc)->flags & QP_ENC_FLAG_TERNARY) != 0;
    if (g_ref_actq >= 0) aq = g_ref_actq != 0;
    static double kc[8][64][512], vc[8][64][512];
    double x[1024], h[1024], q[1024], k[1024], v[1024], att[1024], o[1024], g[1024], u[1024];
    char nm[64];
    for (int p = 0; p < n; p++) {
        const float *emb = get(b, "token_embd.weight") + (size_t)toks[p] * (size_t)dim;
        for (int i = 0; i < dim; i++) x[i] = emb[i];
        for (int l = 0; l < c->layers; l++) {
#define N(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
            ref_rmsnorm(x, get(b, N("attn_norm.weight")), dim, h);
            ref_proj(b, N("attn_q.weight"), dim, dim, aq, h, q);
            ref_proj(b, N("attn_k.weight"), kvd, dim, aq, h, k);
            ref_proj(b, N("attn_v.weight"), kvd, dim, aq, h, v);
            if (c->bias) {
                const float *bq = get(b, N("attn_q.bias")), *bk = get(b, N("attn_k.bias")),
                            *bv = get(b, N("attn_v.bias"));
                for (int i = 0; i < dim; i++) q[i] += bq[i];
                for (int i = 0; i < kvd; i++) k[i] += bk[i], v[i] += bv[i];
            }
            /* RoPE: pairs (2i, 2i+1) for NORM, (i, i + hd/2) for NEOX; angle p * theta^(-2i/hd) */
            for (int pass = 0; pass < 2; pass++) {
                double *vec = pass ? k : q;
                int nh = pass ? c->kv : c->heads;
                for (int hh = 0; hh < nh; hh++)
                    for (int i = 0; i < hd / 2; i++) {
                        double ang = p * pow(10000.0, -2.0 * i / hd);
                        int a0 = c->rope == QP_ROPE_NEOX ? i : 2 * i;
                        int a1 = c->rope == QP_ROPE_NEOX ? i + hd / 2 : 2 * i + 1;
                        double *w = vec + hh * hd, x0 = w[a0], x1 = w[a1];
                        w[a0] = x0 * cos(ang) - x1 * sin(ang);
                        w[a1] = x0 * sin(ang) + x1 * cos(ang);
                    }
            }
            for (int i = 0; i < kvd; i++) kc[l][p][i] = k[i], vc[l][p][i] = v[i];
            for (int hh = 0; hh < c->heads; hh++) {
                int kh = hh / (c->heads / c->kv);
                double mx = -1e300, sum = 0;
                for (int t = 0; t <= p; t++) {
                    double s = 0;
                    for (int i = 0; i < hd; i++) s += q[hh * hd + i] * kc[l][t][kh * hd + i];
                    att[t] = s / sqrt((double)hd);
                    if (att[t] > mx) mx = att[t];
                }
                for (int t = 0; t <= p; t++) sum += (att[t] = exp(att[t] - mx));
                for (int i = 0; i < hd; i++) {
                    double s = 0;
                    for (int t = 0; t <= p; t++) s += att[t] / sum * vc[l][t][kh * hd + i];
                    o[hh * hd + i] = s;
                }
            }
            if (c->sub_norms) {
                double tmp[1024];
                ref_rmsnorm(o, get(b, N("attn_sub_norm.weight")), dim, tmp);
                memcpy(o, tmp, sizeof(double) * (size_t)dim);
            }
            ref_proj(b, N("attn_output.weight"), dim, dim, aq, o, h);
            add_ref_bias(b, c, N("attn_output.bias"), h, dim);
            for (int i = 0; i < dim; i++) x[i] += h[i];
            ref_rmsnorm(x, get(b, N("ffn_norm.weight")), dim, h);
            ref_proj(b, N("ffn_gate.weight"), ffn, dim, aq, h, g);
            ref_proj(b, N("ffn_up.weight"), ffn, dim, aq, h, u);
            add_ref_bias(b, c, N("ffn_gate.bias"), g, ffn);
            add_ref_bias(b, c, N("ffn_up.bias"), u, ffn);
            for (int i = 0; i < ffn; i++) {
                double a = relu2 ? (g[i] > 0 ? g[i] * g[i] : 0.0) : g[i] / (1.0 + exp(-g[i]));
                g[i] = a * u[i];
            }
            if (c->sub_norms) {
                double tmp[1024];
                ref_rmsnorm(g, get(b, N("ffn_sub_norm.weight")), ffn, tmp);
                memcpy(g, tmp, sizeof(double) * (size_t)ffn);
            }
            ref_proj(b, N("ffn_down.weight"), dim, ffn, aq, g, h);
            add_ref_bias(b, c, N("ffn_down.bias"), h, dim);
            for (int i = 0; i < dim; i++) x[i] += h[i];
#undef N
        }
    }
    ref_rmsnorm(x, get(b, "output_norm.weight"), dim, h);
    ref_matvec(get(b, c->tied ? "token_embd.weight" : "output.weight"), c->vocab, dim, h, logits);
}

/* Runs toks through the runtime; returns the max |runtime - reference| over every position. */
static double run_vs_ref(const built *b, const cfg *c, const int32_t *toks, int n, int threads,
                         float *last_logits) {
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = 32, .exact = g_exact_path};
    if (qp_runtime_new(b->m, &o, &rt, &e) != QP_OK) {
        fprintf(stderr, "runtime_new: %s\n", e.msg);
        return INFINITY;
    }
    double worst = 0;
    for (int p = 0; p < n; p++) {
        float *lg = NULL;
        if (qp_runtime_forward(rt, toks[p], p, &lg, &e) != QP_OK) {
            fprintf(stderr, "forward: %s\n", e.msg);
            worst = INFINITY;
            break;
        }
        double ref[512];
        ref_forward(b, c, toks, p + 1, ref);
        for (int i = 0; i < c->vocab; i++) {
            double d = fabs(ref[i] - lg[i]);
            if (!(d <= worst)) worst = d;
        }
        if (last_logits) memcpy(last_logits, lg, sizeof(float) * (size_t)c->vocab);
    }
    qp_runtime_free(rt);
    return worst;
}

static const int32_t k_toks[] = {1, 7, 3, 22, 9, 0, 31, 5};
#define NTOK 8

static void test_llama(void) {
    cfg c = {16, 24, 2, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_F32};
    built b;
    build(&b, &c, 12345);
    double d = run_vs_ref(&b, &c, k_toks, NTOK, 1, NULL);
    QP_CHECK_MSG(d < 1e-4, "llama NORM: max |diff| %g", d);
    /* thread counts give bit-identical logits */
    float l1[64], l2[64], l3[64];
    run_vs_ref(&b, &c, k_toks, NTOK, 1, l1);
    run_vs_ref(&b, &c, k_toks, NTOK, 2, l2);
    run_vs_ref(&b, &c, k_toks, NTOK, 3, l3);
    QP_CHECK(memcmp(l1, l2, sizeof(float) * 40) == 0 && memcmp(l1, l3, sizeof(float) * 40) == 0);

    /* HF twin: rows of q/k permuted within each head so NEOX rotation of the twin equals NORM
       rotation of the original (HF row h*hd + p*hd/2 + i = GGUF row h*hd + 2i + p). */
    cfg cn = c;
    cn.rope = QP_ROPE_NEOX;
    built t;
    build(&t, &cn, 12345);
    int hd = c.dim / c.heads;
    for (int l = 0; l < c.layers; l++) {
        const char *which[2] = {"attn_q.weight", "attn_k.weight"};
        for (int wi = 0; wi < 2; wi++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.%s", l, which[wi]);
            const qp_tensor *src = qp_model_find(b.m, nm);
            const qp_tensor *dst = qp_model_find(t.m, nm);
            int nh = wi ? c.kv : c.heads;
            for (int h = 0; h < nh; h++)
                for (int p = 0; p < 2; p++)
                    for (int i = 0; i < hd / 2; i++)
                        memcpy((uint8_t *)dst->data + (size_t)(h * hd + p * hd / 2 + i) * 4 * c.dim,
                               src->data + (size_t)(h * hd + 2 * i + p) * 4 * c.dim,
                               (size_t)4 * c.dim);
        }
    }
    float ln[64];
    run_vs_ref(&t, &cn, k_toks, NTOK, 2, ln); /* reference of the twin is not used here */
    double md = 0;
    for (int i = 0; i < 40; i++) md = fmax(md, fabs((double)ln[i] - l1[i]));
    QP_CHECK_MSG(md < 1e-5, "HF twin (NEOX, permuted q/k) differs from NORM model by %g", md);
    /* and the NEOX runtime against the NEOX reference on unpermuted weights */
    built t2;
    build(&t2, &cn, 999);
    d = run_vs_ref(&t2, &cn, k_toks, NTOK, 2, NULL);
    QP_CHECK_MSG(d < 1e-4, "llama NEOX: max |diff| %g", d);
    unbuild(&t2);
    unbuild(&t);
    unbuild(&b);
}

static void test_variants(void) {
    /* Qwen2-style bias, untied F16 output */
    cfg c = {16, 24, 2, 4, 1, 40, QP_FAMILY_QWEN2, QP_ROPE_NEOX, true, false, false, QP_ENC_F32};
    built b;
    build(&b, &c, 777);
    double d = run_vs_ref(&b, &c, k_toks, NTOK, 2, NULL);
    QP_CHECK_MSG(d < 1e-4, "qwen2 bias: max |diff| %g", d);
    unbuild(&b);
    /* Llama with attention_bias and mlp_bias (q/k/v/o, gate/up/down biases), exact and fast
     * path (Q8_0 activations there); measured exact 1.1e-6, fast 0.059; the reference without
     * the o and FFN biases is 3.6 away (they are applied) */
    cfg cb = {32, 64, 2, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, true, false, false, QP_ENC_Q8_0};
    g_more_biases = true;
    build(&b, &cb, 2468);
    d = run_vs_ref(&b, &cb, k_toks, NTOK, 2, NULL);
    QP_CHECK_MSG(d < 1e-3, "llama q/k/v/o + ffn biases: max |diff| %g", d);
    g_exact_path = false;
    double df = run_vs_ref(&b, &cb, k_toks, NTOK, 2, NULL);
    g_exact_path = true;
    QP_CHECK_MSG(df < 0.15, "llama biases, fast path: max |diff| %g", df);
    g_more_biases = false;
    double dn = run_vs_ref(&b, &cb, k_toks, NTOK, 2, NULL);
    QP_CHECK_MSG(dn > 0.1, "the reference without o/ffn biases is only %g away", dn);
    printf("llama biases: exact %.3g, fast %.3g, reference without o/ffn biases %.3g\n", d, df, dn);
    unbuild(&b);
    /* F16 and BF16 matrices (vec_dot_f32) */
    qp_encoding encs[] = {QP_ENC_F16, QP_ENC_BF16, QP_ENC_Q8_0};
    for (int i = 0; i < 3; i++) {
        cfg cf = {32, 64, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, encs[i]};
        build(&b, &cf, 4242);
        d = run_vs_ref(&b, &cf, k_toks, NTOK, 2, NULL);
        QP_CHECK_MSG(d < 1e-3, "%s matrices: max |diff| %g", qp_encoding_get(encs[i])->name, d);
        unbuild(&b);
    }
    /* I8 matrices: no vec_dot_f32, so rows are dequantized into scratch */
    QP_CHECK(qp_encoding_get(QP_ENC_I8)->vec_dot_f32 == NULL);
    cfg ci = {16, 24, 1, 2, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_I8};
    build(&b, &ci, 31337);
    d = run_vs_ref(&b, &ci, k_toks, NTOK, 3, NULL);
    QP_CHECK_MSG(d < 1e-3, "i8 matrices: max |diff| %g", d);
    unbuild(&b);
}

/* Max |a - b| over n logits. */
static double maxdiff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void test_bitnet(void) {
    /* TQ2_0 needs rows of 256 */
    cfg c = {256, 256, 1, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_TQ2_0};
    built b;
    build(&b, &c, 2024);
    double d = run_vs_ref(&b, &c, k_toks, 4, 2, NULL);
    QP_CHECK_MSG(d < 2e-3, "bitnet TQ2_0: max |diff| %g", d);
    /* the reference without activation quantization must be measurably different, or the
       check above proves nothing about it */
    g_ref_actq = 0;
    double d0 = run_vs_ref(&b, &c, k_toks, 4, 2, NULL);
    g_ref_actq = -1;
    QP_CHECK_MSG(d0 > 10 * 2e-3, "int8 activations change logits by only %g", d0);

    /* BitNet b1.58 quantizes the projections' activations whatever holds the weights: the same
       exactly ternary weights (q * 0.25) in F32, BF16 (float dots of the int8 activations
       dequantized) and TQ2_0 / I2_S (integer dots) give the same logits within float rounding,
       each against the double reference with int8 activations */
    g_tern_vals = true;
    qp_encoding encs[] = {QP_ENC_F32, QP_ENC_BF16, QP_ENC_TQ2_0, QP_ENC_I2_S};
    float lg[4][64];
    for (int i = 0; i < 4; i++) {
        cfg ce = c;
        ce.mat_enc = encs[i];
        built be;
        build(&be, &ce, 77);
        d = run_vs_ref(&be, &ce, k_toks, NTOK, 2, lg[i]);
        QP_CHECK_MSG(d < 2e-3, "bitnet %s: max |diff| %g", qp_encoding_get(encs[i])->name, d);
        printf("bitnet ternary %s vs reference: %.3g\n", qp_encoding_get(encs[i])->name, d);
        if (i == 0) {
            g_ref_actq = 0;
            d0 = run_vs_ref(&be, &ce, k_toks, NTOK, 2, NULL);
            g_ref_actq = -1;
            QP_CHECK_MSG(d0 > 10 * 2e-3, "f32 bitnet: int8 activations change logits by only %g", d0);
            printf("bitnet f32 vs reference without int8 activations: %.3g\n", d0);
        } else {
            double dd = maxdiff(lg[0], lg[i], 40);
            QP_CHECK_MSG(dd < 1e-4, "bitnet %s vs f32: %g", qp_encoding_get(encs[i])->name, dd);
            printf("bitnet %s vs f32 runtime: %.3g\n", qp_encoding_get(encs[i])->name, dd);
        }
        unbuild(&be);
    }
    /* the same ternary weights in a Llama-family F32 model keep float activations */
    cfg cl = c;
    cl.family = QP_FAMILY_LLAMA;
    cl.mat_enc = QP_ENC_F32;
    built bl;
    build(&bl, &cl, 77);
    d = run_vs_ref(&bl, &cl, k_toks, NTOK, 2, NULL);
    QP_CHECK_MSG(d < 1e-3, "llama with ternary F32 values: max |diff| %g", d);
    unbuild(&bl);
    g_tern_vals = false;

    /* QK256 with a sibling "<base>.scale" (BitNet-rs GgmlQk256NoScale + scale tensor): the
       weights are the LUT levels times the scale, in a BitNet model (int8 activations, integer
       dot) and a Llama one (float activations, float dot); without the scale applied the logits
       would be those of a model with weights 1/0.37 times larger */
    for (int fam = 0; fam < 2; fam++) {
        cfg cq = c;
        cq.mat_enc = QP_ENC_QK256;
        if (fam) cq.family = QP_FAMILY_LLAMA, cq.sub_norms = false;
        g_sib_scale = 0.37f;
        built bq;
        build(&bq, &cq, 99);
        g_sib_scale = 0.0f;
        QP_CHECK(qp_model_find(bq.m, "blk.0.ffn_down.scale") != NULL);
        d = run_vs_ref(&bq, &cq, k_toks, NTOK, 2, NULL);
        QP_CHECK_MSG(d < 2e-3, "QK256 %s with sibling scale: max |diff| %g",
                     fam ? "llama" : "bitnet", d);
        printf("QK256 %s + sibling scale vs reference: %.3g\n", fam ? "llama" : "bitnet", d);
        /* the reference check can fail: the same rows without the sibling */
        built bu;
        build(&bu, &cq, 99);
        float a[64], u[64];
        run_vs_ref(&bq, &cq, k_toks, 4, 1, a);
        run_vs_ref(&bu, &cq, k_toks, 4, 1, u);
        QP_CHECK_MSG(maxdiff(a, u, 40) > 0.1, "QK256 %s: the sibling scale changes logits by %g",
                     fam ? "llama" : "bitnet", maxdiff(a, u, 40));
        unbuild(&bu);
        unbuild(&bq);
    }
    unbuild(&b);
}

/* Issue 20: llama.cpp's "bitnet" (the 1bitLLM kind): SiLU and float activations, with the
 * optional per-tensor "<base>.scale" of any encoding multiplying each projection (llama.cpp's
 * wq_scale ... ffn_down_scale), against the double reference of that graph; the same model
 * read with int8 activations or without the scales must differ (the checks can fail). */
static void test_bitnet_silu(void) {
    cfg c = {256, 256, 1, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_TQ2_0};
    qp_encoding encs[] = {QP_ENC_TQ2_0, QP_ENC_F16, QP_ENC_TQ1_0};
    g_bitnet_silu = g_tern_vals = true;
    for (int i = 0; i < 3; i++) {
        c.mat_enc = encs[i];
        const char *en = qp_encoding_get(encs[i])->name;
        built b, bs;
        build(&b, &c, 31);
        g_scale_any = true;
        g_sib_scale = 0.5f;
        build(&bs, &c, 31);
        g_scale_any = false;
        g_sib_scale = 0.0f;
        QP_CHECK(qp_model_find(bs.m, "blk.0.attn_q.scale") != NULL);
        QP_CHECK(!b.m->arch.act_int8 && b.m->arch.act == QP_ACT_SILU);
        double d = run_vs_ref(&b, &c, k_toks, NTOK, 2, NULL);
        double ds = run_vs_ref(&bs, &c, k_toks, NTOK, 2, NULL);
        QP_CHECK_MSG(d < 2e-3 && ds < 2e-3, "bitnet silu %s: max |diff| %g, with scales %g", en,
                     d, ds);
        g_ref_actq = 1;
        double d8 = run_vs_ref(&b, &c, k_toks, NTOK, 2, NULL);
        g_ref_actq = -1;
        float a[64], u[64];
        run_vs_ref(&b, &c, k_toks, 4, 1, a);
        run_vs_ref(&bs, &c, k_toks, 4, 1, u);
        QP_CHECK_MSG(d8 > 10 * 2e-3, "bitnet silu %s: int8 activations change logits by only %g",
                     en, d8);
        QP_CHECK_MSG(maxdiff(a, u, 40) > 0.1, "bitnet silu %s: scales change logits by only %g",
                     en, maxdiff(a, u, 40));
        printf("bitnet silu %s vs reference: %.3g, with 0.5 scales %.3g; reference with int8 "
               "activations %.3g away\n", en, d, ds, d8);
        /* a scale tensor llama.cpp would not create ({1}) is refused, not ignored */
        qp_tensor *st = (qp_tensor *)qp_model_find(bs.m, "blk.0.ffn_up.scale");
        qp_runtime *rt = NULL;
        qp_err e = {0};
        if (st) st->ne[0] = 2;
        QP_CHECK(st && qp_runtime_new(bs.m, NULL, &rt, &e) == QP_ERR_CORRUPT && rt == NULL);
        QP_CHECK_MSG(strstr(e.msg, "blk.0.ffn_up.scale") != NULL, "message: %s", e.msg);
        if (st) st->ne[0] = 1;
        unbuild(&b);
        unbuild(&bs);
    }
    g_bitnet_silu = g_tern_vals = false;
}

static void test_errors(void) {
    cfg c = {16, 24, 2, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_F32};
    built b;
    build(&b, &c, 5);
    qp_err e = {0};
    qp_runtime *rt = NULL;
    /* a missing tensor is named */
    built miss;
    g_skip = "blk.1.ffn_down.weight";
    build(&miss, &c, 5);
    g_skip = NULL;
    qp_status s = qp_runtime_new(miss.m, NULL, &rt, &e);
    QP_CHECK(s == QP_ERR_UNSUPPORTED && rt == NULL);
    QP_CHECK_MSG(strstr(e.msg, "blk.1.ffn_down.weight") != NULL, "message: %s", e.msg);
    unbuild(&miss);
    /* wrong shape */
    qp_tensor *t = (qp_tensor *)qp_model_find(b.m, "blk.0.attn_k.weight");
    t->ne[1] = 12;
    qp_err_clear(&e);
    s = qp_runtime_new(b.m, NULL, &rt, &e);
    QP_CHECK(s == QP_ERR_UNSUPPORTED && strstr(e.msg, "blk.0.attn_k.weight") != NULL);
    t->ne[1] = 8;
    /* truncated data */
    t->nbytes -= 4;
    qp_err_clear(&e);
    s = qp_runtime_new(b.m, NULL, &rt, &e);
    QP_CHECK(s == QP_ERR_CORRUPT && strstr(e.msg, "blk.0.attn_k.weight") != NULL);
    t->nbytes += 4;
    /* forward argument checks */
    qp_err_clear(&e);
    qp_runtime_opts o = {.n_threads = 2, .n_ctx = 8, .exact = true};
    QP_CHECK(qp_runtime_new(b.m, &o, &rt, &e) == QP_OK);
    float *lg;
    QP_CHECK(qp_runtime_forward(rt, 40, 0, &lg, &e) == QP_ERR_ARG);
    QP_CHECK(qp_runtime_forward(rt, -1, 0, &lg, &e) == QP_ERR_ARG);
    QP_CHECK(qp_runtime_forward(rt, 1, 1, &lg, &e) == QP_ERR_ARG); /* nothing at 0 yet */
    QP_CHECK(qp_runtime_forward(rt, 1, 0, &lg, &e) == QP_OK);
    QP_CHECK(qp_runtime_forward(rt, 1, 1, &lg, &e) == QP_OK);
    for (int p = 2; p < 8; p++) QP_CHECK(qp_runtime_forward(rt, 2, p, &lg, &e) == QP_OK);
    QP_CHECK(qp_runtime_forward(rt, 1, 8, &lg, &e) == QP_ERR_ARG); /* past n_ctx */
    qp_runtime_reset(rt);
    QP_CHECK(qp_runtime_forward(rt, 1, 3, &lg, &e) == QP_ERR_ARG);
    const qp_runtime_config *rc = qp_runtime_get_config(rt);
    QP_CHECK(rc->tied_output && rc->n_kv_heads == 2 && rc->head_dim == 4 && rc->n_ctx == 8);
    qp_runtime_free(rt);
    unbuild(&b);
}

/* Every position's logits, token by token (qp_runtime_forward) or batched
 * (qp_runtime_forward_batch, in pieces of the given sizes, all_logits). */
static bool run_all(const built *b, int threads, int64_t n_ctx, const int32_t *toks, int n,
                    int vocab, const int *pieces, float *out) {
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = n_ctx, .exact = g_exact_path};
    if (qp_runtime_new(b->m, &o, &rt, &e) != QP_OK) return false;
    if (qp_runtime_get_config(rt)->exact != g_exact_path ||
        (qp_runtime_get_config(rt)->n_fast_mats > 0) == g_exact_path) {
        fprintf(stderr, "run_all: the %s path has %d fast matrices\n", g_exact_path ? "exact" : "fast",
                qp_runtime_get_config(rt)->n_fast_mats);
        qp_runtime_free(rt);
        return false;
    }
    bool ok = true;
    float *lg = NULL;
    if (!pieces) {
        for (int p = 0; ok && p < n; p++) {
            ok = qp_runtime_forward(rt, toks[p], p, &lg, &e) == QP_OK;
            if (ok) memcpy(out + (size_t)p * (size_t)vocab, lg, sizeof(float) * (size_t)vocab);
        }
    } else {
        for (int p = 0, k = 0; ok && p < n; p += pieces[k], k++) {
            int m = pieces[k] < n - p ? pieces[k] : n - p;
            ok = qp_runtime_forward_batch(rt, toks + p, m, p, out + (size_t)p * (size_t)vocab,
                                          &lg, &e) == QP_OK;
            /* *logits is the last token's */
            ok = ok && memcmp(lg, out + (size_t)(p + m - 1) * (size_t)vocab,
                              sizeof(float) * (size_t)vocab) == 0;
        }
    }
    if (!ok) fprintf(stderr, "run_all: %s\n", e.msg);
    qp_runtime_free(rt);
    return ok;
}

/* The batched prompt path equals the token-by-token path: bit for bit for F32/F16/BF16/I8/Q8_0
 * matrices and int8-activation ternary ones (same kernels, same summation structure), within
 * summation-order rounding for block encodings whose vec_dot_f32 sums differently (Q4_K);
 * for 1-3 threads, at every SIMD level, with batches split anywhere (and past the 64-token
 * internal batch), and without all_logits. */
static void test_batch(void) {
    enum { N = 70 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 7 + 1) % 40);
    static const int whole[] = {N}, split[] = {5, 1, 2, 30, 32}, big[] = {66, 4};
    const int *splits[] = {whole, split, big};
    struct { cfg c; bool exact, tern; } cases[] = {
        {{16, 24, 2, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_F32}, true, false},
        {{16, 24, 2, 4, 1, 40, QP_FAMILY_QWEN2, QP_ROPE_NEOX, true, false, false, QP_ENC_F32}, true, false},
        {{40, 72, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_F16}, true, false},
        {{32, 64, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_BF16}, true, false},
        {{16, 24, 1, 2, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_I8}, true, false},
        {{256, 256, 1, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_TQ2_0}, true, false},
        {{32, 64, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_Q8_0}, true, false},
        {{256, 512, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_Q4_K}, true, false},
        {{256, 512, 1, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_Q6_K}, true, false},
        /* BitNet with exactly ternary float weights: int8 activations dequantized to floats */
        {{256, 256, 1, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_F32}, true, true},
        {{256, 256, 1, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_BF16}, true, true},
    };
    static float ref[N * 40], got[N * 40], first[N * 40];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const cfg *c = &cases[ci].c;
        const char *nm = qp_encoding_get(c->mat_enc)->name;
        built b;
        g_tern_vals = cases[ci].tern;
        build(&b, c, 4000 + ci);
        g_tern_vals = false;
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
            qp_encoding_simd_force(lv);
            QP_CHECK(run_all(&b, 1, 80, toks, N, c->vocab, NULL, ref));
            for (int threads = 1; threads <= 3; threads++) {
                for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
                    QP_CHECK(run_all(&b, threads, 80, toks, N, c->vocab, splits[si], got));
                    double md = 0;
                    for (int i = 0; i < N * c->vocab; i++)
                        md = fmax(md, fabs((double)got[i] - (double)ref[i]));
                    if (cases[ci].exact)
                        QP_CHECK_MSG(memcmp(got, ref, sizeof(float) * (size_t)(N * c->vocab)) == 0,
                                     "%s level %d threads %d split %zu: batch differs by %g", nm,
                                     lv, threads, si, md);
                    else
                        QP_CHECK_MSG(md < 1e-4, "%s level %d threads %d split %zu: %g", nm, lv,
                                     threads, si, md);
                    /* the batched path itself never depends on the thread count */
                    if (threads == 1 && si == 0) memcpy(first, got, sizeof first);
                    else if (si == 0)
                        QP_CHECK_MSG(memcmp(got, first, sizeof(float) * (size_t)(N * c->vocab)) == 0,
                                     "%s threads %d: batch depends on threads", nm, threads);
                }
            }
            /* without all_logits: the last token's logits, and decoding continues from there */
            qp_runtime *rt = NULL;
            qp_err e = {0};
            qp_runtime_opts o = {.n_threads = 2, .n_ctx = 80, .exact = true};
            float *lg = NULL;
            if (qp_runtime_new(b.m, &o, &rt, &e) == QP_OK) {
                QP_CHECK(qp_runtime_forward_batch(rt, toks, N - 1, 0, NULL, &lg, &e) == QP_OK);
                bool same = memcmp(lg, ref + (N - 2) * c->vocab, sizeof(float) * 40) == 0;
                QP_CHECK(qp_runtime_forward(rt, toks[N - 1], N - 1, &lg, &e) == QP_OK);
                double md = 0;
                for (int i = 0; i < c->vocab; i++)
                    md = fmax(md, fabs((double)lg[i] - ref[(N - 1) * c->vocab + i]));
                if (cases[ci].exact) QP_CHECK_MSG(same && md == 0, "%s: batch then decode", nm);
                else QP_CHECK_MSG(md < 1e-4, "%s: batch then decode %g", nm, md);
                qp_runtime_free(rt);
            }
        }
        qp_encoding_simd_force(-1);
        unbuild(&b);
    }
    /* argument checks */
    cfg c = cases[0].c;
    built b;
    build(&b, &c, 5);
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = 2, .n_ctx = 8, .exact = true};
    float *lg = NULL;
    QP_CHECK(qp_runtime_new(b.m, &o, &rt, &e) == QP_OK);
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 0, 0, NULL, &lg, &e) == QP_ERR_ARG);
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 9, 0, NULL, &lg, &e) == QP_ERR_ARG); /* > n_ctx */
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 2, 1, NULL, &lg, &e) == QP_ERR_ARG); /* gap */
    int32_t bad[3] = {1, 40, 2};
    QP_CHECK(qp_runtime_forward_batch(rt, bad, 3, 0, NULL, &lg, &e) == QP_ERR_ARG);
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 8, 0, NULL, &lg, &e) == QP_OK);
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 2, 7, NULL, &lg, &e) == QP_ERR_ARG);
    QP_CHECK(qp_runtime_forward_batch(rt, toks, 3, 5, NULL, &lg, &e) == QP_OK); /* rewind */
    qp_runtime_free(rt);
    unbuild(&b);
}

/* The fast path (runtime.md "Fast path") on models whose matrices have a fast dot: batched =
 * token by token and 1 = 2 = 3 threads bit for bit, the same logits at every SIMD level (the
 * fast dots give the same bits everywhere, tests/unit/test_enc_qdot.c; attention and norms
 * follow the level's F32 kernels, whose rounding differences can move an activation across a
 * quantization step, so levels are not compared here), and near the exact path: cosine >= 0.998
 * over 70 positions (measured 0.9986-0.9992 on these random models, whose large logits amplify
 * the activation rounding; 0.99997 on stories260K, runtime.md "Fast path"). */
static void test_fast(void) {
    enum { N = 70 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 11 + 3) % 40);
    static const int split[] = {5, 1, 2, 30, 32};
    const qp_encoding encs[] = {QP_ENC_Q8_0, QP_ENC_Q4_0, QP_ENC_Q5_0, QP_ENC_Q4_K, QP_ENC_Q6_K, QP_ENC_F16};
    static float exact[N * 40], tbt[N * 40], got[N * 40];
    for (size_t ci = 0; ci < sizeof encs / sizeof encs[0]; ci++) {
        cfg c = {256, 512, 2, 4, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, encs[ci]};
        const char *nm = qp_encoding_get(encs[ci])->name;
        built b;
        build(&b, &c, 7000 + ci);
        g_exact_path = true;
        QP_CHECK(run_all(&b, 2, 80, toks, N, c.vocab, NULL, exact));
        g_exact_path = false;
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv += (qp_test_max_simd_level() > 1 ? qp_test_max_simd_level() : 1)) {
            qp_encoding_simd_force(lv);
            QP_CHECK_MSG(run_all(&b, 1, 80, toks, N, c.vocab, NULL, tbt), "%s: fast run", nm);
            for (int threads = 1; threads <= 3; threads++) {
                QP_CHECK(run_all(&b, threads, 80, toks, N, c.vocab, split, got));
                QP_CHECK_MSG(memcmp(got, tbt, sizeof(float) * N * 40) == 0,
                             "%s level %d threads %d: fast batched differs from token by token", nm,
                             lv, threads);
            }
            double dot = 0, na = 0, nb = 0, md = 0, mx = 0;
            for (int i = 0; i < N * 40; i++) {
                dot += (double)tbt[i] * exact[i];
                na += (double)tbt[i] * tbt[i];
                nb += (double)exact[i] * exact[i];
                md = fmax(md, fabs((double)tbt[i] - exact[i]));
                mx = fmax(mx, fabs((double)exact[i]));
            }
            const double cosv = dot / sqrt(na * nb);
            QP_CHECK_MSG(cosv >= 0.998, "%s level %d: fast vs exact cosine %.7f, max |diff| %g (max "
                         "|logit| %g)", nm, lv, cosv, md, mx);
            printf("fast %s level %d: cosine vs exact %.7f, max |diff| %.3g of max |logit| %.3g\n", nm, lv,
                   cosv, md, mx);
        }
        qp_encoding_simd_force(-1);
        g_exact_path = true;
        unbuild(&b);
    }
}

/* Every position's logits of a fast-path runtime (opts.no_repack as given), token by token
 * (pieces NULL) or batched in pieces of the given sizes; *n_repacked from its config. */
static bool run_fast_i8(const built *b, int threads, bool no_repack, const int *pieces, const int32_t *toks, int n,
                        float *out, int *n_repacked) {
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = 80, .no_repack = no_repack};
    if (qp_runtime_new(b->m, &o, &rt, &e) != QP_OK) return false;
    *n_repacked = qp_runtime_get_config(rt)->n_repacked;
    bool ok = true;
    float *lg = NULL;
    for (int p = 0, k = 0; ok && p < n; p += pieces ? pieces[k++] : 1) {
        const int m = !pieces ? 1 : pieces[k] < n - p ? pieces[k] : n - p;
        ok = (pieces ? qp_runtime_forward_batch(rt, toks + p, m, p, out + (size_t)p * 40, &lg, &e)
                     : qp_runtime_forward(rt, toks[p], p, &lg, &e)) == QP_OK;
        if (ok && !pieces) memcpy(out + (size_t)p * 40, lg, sizeof(float) * 40);
    }
    qp_runtime_free(rt);
    return ok;
}

/* BitNet matrices repacked at load (runtime.md "Repacked rows": TQ2_0 and I2_S in TQ2_0's
 * layout), b1.58 with int8 activations and llama.cpp's `bitnet` (SiLU) with float ones: every
 * position's logits, token by token and batched, 1 and 3 threads, at every level, bit for bit those
 * of the file's rows (opts.no_repack) in the same mode. An ffn of 384 leaves ffn_down (rows of 3
 * I2_S blocks, not whole 256-element packed blocks) in the file: 6 of 7 matrices per layer are
 * repacked at the AVX2 and VNNI levels, none at the scalar one. (With float activations that
 * ffn_down is off the fast dot, 384 not being whole Q8_K blocks: vec_dot_f32 token by token, the
 * dequantized rows in a batch, so a batch is compared with a batch.) */
static void test_fast_i8(void) {
    enum { N = 70 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 17 + 2) % 40);
    static const int split[] = {5, 1, 2, 30, 32};
    const struct { cfg c; bool silu; int repacked; } cases[] = {
        {{256, 384, 2, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_I2_S}, false, 12},
        {{256, 512, 2, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_TQ2_0}, false, 14},
        {{256, 384, 2, 4, 2, 40, QP_FAMILY_BITNET, QP_ROPE_NEOX, false, true, true, QP_ENC_I2_S}, true, 12},
    };
    static float file_rows[N * 40], got[N * 40];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const char *nm = qp_encoding_get(cases[ci].c.mat_enc)->name;
        built b;
        g_bitnet_silu = cases[ci].silu;
        build(&b, &cases[ci].c, 9300 + ci);
        g_bitnet_silu = false;
        QP_CHECK(b.m->arch.act_int8 == !cases[ci].silu);
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
            qp_encoding_simd_force(lv);
            for (int batched = 0; batched < 2; batched++) {
                int nr = -1;
                QP_CHECK(run_fast_i8(&b, 1, true, batched ? split : NULL, toks, N, file_rows, &nr) && nr == 0);
                for (int threads = 1; threads <= 3; threads += 2) {
                    QP_CHECK(run_fast_i8(&b, threads, false, batched ? split : NULL, toks, N, got, &nr));
                    const int want = lv == 0 ? 0 : cases[ci].repacked;
                    QP_CHECK_MSG(nr == want, "%s level %d: %d matrices repacked, want %d", nm, lv, nr, want);
                    QP_CHECK_MSG(memcmp(got, file_rows, sizeof(float) * N * 40) == 0,
                                 "%s level %d threads %d %s: repacked rows differ from the file's", nm, lv, threads,
                                 batched ? "batched" : "token by token");
                }
            }
        }
        qp_encoding_simd_force(-1);
        unbuild(&b);
    }
}

/* Every position's logits token by token with the given options. */
static bool run_opts(const built *b, const qp_runtime_opts *o, const int32_t *toks, int n, int vocab, float *out,
                     bool *kv_f16) {
    qp_runtime *rt = NULL;
    qp_err e = {0};
    if (qp_runtime_new(b->m, o, &rt, &e) != QP_OK) return false;
    *kv_f16 = qp_runtime_get_config(rt)->kv_f16;
    bool ok = true;
    float *lg = NULL;
    for (int p = 0; ok && p < n; p++) {
        ok = qp_runtime_forward(rt, toks[p], p, &lg, &e) == QP_OK;
        if (ok) memcpy(out + (size_t)p * (size_t)vocab, lg, sizeof(float) * (size_t)vocab);
    }
    qp_runtime_free(rt);
    return ok;
}

/* The fast path's F16 KV cache (runtime.md "KV cache"): on models without fast dots (F32 / BF16
 * matrices, tied output: only the cache differs), over 70 positions at every SIMD level, the logits are
 * within max |diff| <= 2e-3 max |logit| and cosine >= 0.99999 of the F32 cache's (measured
 * below), yet not equal to them (the cache is F16); kv_f32 = true gives the exact path's bits;
 * the exact path keeps F32 whatever kv_f32 says. */
static void test_kv_f16(void) {
    enum { N = 70 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 13 + 5) % 40);
    const cfg cases[] = {
        {64, 96, 2, 8, 2, 40, QP_FAMILY_LLAMA, QP_ROPE_NORM, false, false, true, QP_ENC_F32},
        {64, 96, 2, 8, 4, 40, QP_FAMILY_QWEN2, QP_ROPE_NEOX, true, false, true, QP_ENC_BF16},
    };
    static float f32kv[N * 40], f16kv[N * 40], other[N * 40];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        built b;
        build(&b, &cases[ci], 9100 + ci);
        const char *nm = qp_encoding_get(cases[ci].mat_enc)->name;
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
            qp_encoding_simd_force(lv);
            qp_runtime_opts ex = {.n_threads = 2, .n_ctx = 80, .exact = true};
            qp_runtime_opts fast = {.n_threads = 2, .n_ctx = 80};
            qp_runtime_opts fast32 = {.n_threads = 2, .n_ctx = 80, .kv_f32 = true};
            qp_runtime_opts ex32 = {.n_threads = 2, .n_ctx = 80, .exact = true, .kv_f32 = true};
            bool k16 = false;
            QP_CHECK(run_opts(&b, &ex, toks, N, 40, f32kv, &k16) && !k16);
            QP_CHECK(run_opts(&b, &ex32, toks, N, 40, other, &k16) && !k16);
            QP_CHECK(memcmp(other, f32kv, sizeof(float) * N * 40) == 0);
            QP_CHECK(run_opts(&b, &fast32, toks, N, 40, other, &k16) && !k16);
            QP_CHECK_MSG(memcmp(other, f32kv, sizeof(float) * N * 40) == 0, "%s level %d: fast path with an F32 "
                         "cache differs from the exact path", nm, lv);
            QP_CHECK(run_opts(&b, &fast, toks, N, 40, f16kv, &k16) && k16);
            double dot = 0, na = 0, nb = 0, md = 0, mx = 0;
            for (int i = 0; i < N * 40; i++) {
                dot += (double)f16kv[i] * f32kv[i];
                na += (double)f16kv[i] * f16kv[i];
                nb += (double)f32kv[i] * f32kv[i];
                md = fmax(md, fabs((double)f16kv[i] - f32kv[i]));
                mx = fmax(mx, fabs((double)f32kv[i]));
            }
            const double cosv = dot / sqrt(na * nb);
            QP_CHECK_MSG(md > 0 && md <= 2e-3 * mx && cosv >= 0.99999, "%s level %d: F16 vs F32 KV cache: max "
                         "|diff| %g (max |logit| %g), cosine %.8f", nm, lv, md, mx, cosv);
            printf("KV f16 vs f32, %s matrices, level %d: max |diff| %.3g = %.2g of max |logit|, cosine %.9f\n", nm,
                   lv, md, md / mx, cosv);
        }
        qp_encoding_simd_force(-1);
        unbuild(&b);
    }
}

int main(void) {
    qp_test_max_simd_level();
    test_fast();
    test_fast_i8();
    test_kv_f16();
    test_batch();
    test_llama();
    test_variants();
    test_bitnet();
    test_bitnet_silu();
    test_errors();
    return qp_test_finish();
}
