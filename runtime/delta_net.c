/* Qwen3.5's gated delta-net (linear attention), one token of one layer (runtime.md "Qwen3.5";
 * transformers' Qwen3_5GatedDeltaNet with its recurrent rule, llama.cpp's qwen35 graph):
 *
 *   x = conv_state[c][0..K-2], qkv[c]:  qkv[c] = silu(sum_j w[c][j] * x[j])   (causal depthwise)
 *   q, k = the key heads of qkv (l2-normalized, q / sqrt(key width)), v = its value heads
 *   per value head h (key head h / (value heads / key heads), HF's repeat_interleave; in a GGUF,
 *   whose value heads llama.cpp's converter reordered, h % key heads):
 *     decay = exp(A * softplus(alpha_h + dt_h)),  b = sigmoid(beta_h)       (A = -exp(A_log))
 *     S = S * decay;  d[j] = (v[j] - sum_i S[i][j] k[i]) * b;  S[i][j] += k[i] d[j]
 *     o[j] = sum_i S[i][j] q[i];  out = rmsnorm(o) * ssm_norm * silu(z_h)
 * Sums in float in index order (-ffp-contract=off), as the rest of the runtime. */
#include <math.h>
#include <string.h>

#include "runtime/runtime_internal.h"

/* HF's l2norm: x * rsqrt(sum x^2 + 1e-6) (fla's use_qk_l2norm_in_kernel). */
static void l2norm(float *x, int64_t n) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss + 1e-6f);
    for (int64_t i = 0; i < n; i++) x[i] *= r;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* torch's softplus (threshold 20: x itself above it). */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The causal conv of one token over every channel, SiLU'd in place; the state shifts by one. */
static void conv_step(const float *w, float *st, float *x, int64_t ch, int64_t k) {
    for (int64_t c = 0; c < ch; c++) {
        const float *wc = w + c * k;
        float *sc = st + c * (k - 1);
        float acc = 0.0f;
        for (int64_t j = 0; j < k - 1; j++) acc += wc[j] * sc[j];
        acc += wc[k - 1] * x[c];
        for (int64_t j = 0; j + 1 < k - 1; j++) sc[j] = sc[j + 1];
        if (k > 1) sc[k - 2] = x[c];
        x[c] = silu(acc);
    }
}

/* One value head: S (hk x hv) decayed and updated by the delta rule, then read with q into o. */
static void delta_head(float *S, const float *q, const float *k, const float *v, float decay,
                       float b, float *o, float *tmp, int64_t hk, int64_t hv) {
    for (int64_t i = 0; i < hk * hv; i++) S[i] *= decay;
    for (int64_t j = 0; j < hv; j++) tmp[j] = 0.0f;
    for (int64_t i = 0; i < hk; i++)
        for (int64_t j = 0; j < hv; j++) tmp[j] += S[i * hv + j] * k[i];
    for (int64_t j = 0; j < hv; j++) tmp[j] = (v[j] - tmp[j]) * b;
    for (int64_t i = 0; i < hk; i++)
        for (int64_t j = 0; j < hv; j++) S[i * hv + j] += k[i] * tmp[j];
    for (int64_t j = 0; j < hv; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < hk; i++)
        for (int64_t j = 0; j < hv; j++) o[j] += S[i * hv + j] * q[i];
}

void qp_delta_net_token(const qp_runtime_config *c, const qp_layer_weights *L, float *conv_state,
                        float *state, float *qkv, const float *z, const float *beta_alpha, float *out) {
    int64_t nk = c->ssm_group_count, nv = c->ssm_time_step_rank, hk = c->ssm_state_size;
    int64_t hv = c->ssm_inner_size / nv, key = nk * hk, per = nv / nk;
    conv_step(L->ssm_conv, conv_state, qkv, 2 * key + c->ssm_inner_size, c->ssm_conv_kernel);
    float *q = qkv, *k = qkv + key, *v = qkv + 2 * key;
    float qs = 1.0f / sqrtf((float)hk);
    for (int64_t h = 0; h < nk; h++) {
        l2norm(q + h * hk, hk);
        l2norm(k + h * hk, hk);
        for (int64_t i = 0; i < hk; i++) q[h * hk + i] *= qs;
    }
    float tmp[4096]; /* hv <= ssm_inner_size / nv, at most 4096 (qp_model_check's ranges) */
    float ones_eps = c->norm_eps;
    for (int64_t h = 0; h < nv; h++) {
        int64_t kh = c->ssm_heads_tiled ? h % nk : h / per;
        float decay = expf(L->ssm_a[h] * softplus(beta_alpha[nv + h] + L->ssm_dt[h]));
        float b = 1.0f / (1.0f + expf(-beta_alpha[h]));
        float *o = out + h * hv;
        delta_head(state + h * hk * hv, q + kh * hk, k + kh * hk, v + h * hv, decay, b, o, tmp, hk, hv);
        float ss = 0.0f;
        for (int64_t j = 0; j < hv; j++) ss += o[j] * o[j];
        float r = 1.0f / sqrtf(ss / (float)hv + ones_eps);
        for (int64_t j = 0; j < hv; j++) o[j] = L->ssm_norm[j] * (o[j] * r) * silu(z[h * hv + j]);
    }
}
