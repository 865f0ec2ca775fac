/* llama.cpp's non-linear 4-bit types IQ4_NL (32-element blocks) and IQ4_XS (256-element
 * super-blocks of eight 32-element blocks with 6-bit scales); encodings/enc_kquants.md "IQ4_NL,
 * IQ4_XS". Bytes equal llama.cpp's quantize_iq4_nl / quantize_iq4_xs (ggml_quantize_chunk, the path
 * llama_model_quantize takes, with or without importance weights; tests/peer/test_enc_vs_ggml.c).
 *   IQ4_NL  18 B: f16 d @0, u8 qs[16] @2; x = d * kvalues[nibble]
 *   IQ4_XS 136 B: f16 d @0, u16 scales_h @2, u8 scales_l[4] @4, u8 qs[128] @8;
 *                 x = d * (ls - 32) * kvalues[nibble], ls = 6-bit level of the 32-element block
 * Element j < 16 of a 32-element block is the low nibble of qs[j], element j + 16 the high one. */
#include <math.h>
#include <string.h>

#include "encodings/enc_blocks.h"
#include "encodings/encodings_internal.h"

#define IQ4_NTRY 7
#define GROUP_MAX_EPS 1e-15f
#define IQ4XS_OFF_SCALES_H 2
#define IQ4XS_OFF_SCALES_L 4
#define IQ4XS_OFF_QS 8

static const int8_t k_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* Index of the nearest level (ties to the upper one); ggml's best_index_int8. */
static int best_index(float x) {
    if (x <= (float)k_values[0]) return 0;
    if (x >= (float)k_values[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < (float)k_values[mav]) mu = mav;
        else ml = mav;
    }
    return x - (float)k_values[mu - 1] < (float)k_values[mu] - x ? mu - 1 : mu;
}

/* Weighted fit of one 32-element block's scale (codes into L); 0 for an all-zero block. */
static float fit_block(const float *xb, const float *weight, uint8_t *L) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, 32);
        return 0.f;
    }
    float d = -max / (float)k_values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        int l = best_index(id * xb[j]);
        L[j] = (uint8_t)l;
        float q = (float)k_values[l];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; ++itry) {
        id = ((float)itry + (float)k_values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            float q = (float)k_values[best_index(id * xb[j])];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Per-element weights of block ib: importance weights times sqrt(sigma2 + x^2), else x^2. */
static void block_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int j = 0; j < 32; ++j)
        weight[j] = qw ? qw[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
}

static float mean_sq2(const float *x, int n) {
    float sigma2 = 0;
    for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
    return sigma2 * (2.f / (float)n);
}

static void pack_nibbles(const uint8_t *L, uint8_t *q4, int n) {
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

/* ---- IQ4_NL ------------------------------------------------------------------------------------- */

static void iq4nl_block(const float *x, const float *qw, uint8_t *y) {
    float weight[32];
    uint8_t L[32];
    block_weights(x, qw, mean_sq2(x, 32), weight);
    float d = fit_block(x, weight, L);
    qp_store_u16le(y, qp_fp32_to_fp16(d));
    float id = d != 0.0f ? 1 / d : 0;
    for (int j = 0; j < 32; ++j) L[j] = (uint8_t)best_index(id * x[j]);
    pack_nibbles(L, y + 2, 32);
}

void qp_iq4nl_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QP_QK; i++)
        iq4nl_block(x + i * QP_QK, qw ? qw + i * QP_QK : NULL, y + i * QP_IQ4_NL_BYTES);
}

void qp_iq4nl_quantize_ref(const float *x, void *y, int64_t n) { qp_iq4nl_quantize_imatrix(x, y, n, NULL); }

void qp_iq4nl_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QP_QK; i++, x += QP_IQ4_NL_BYTES, y += QP_QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        for (int j = 0; j < 16; ++j) {
            y[j] = d * (float)k_values[x[2 + j] & 0xf];
            y[j + 16] = d * (float)k_values[x[2 + j] >> 4];
        }
    }
}

float qp_iq4nl_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_iq4nl_dequantize, QP_QK, QP_IQ4_NL_BYTES, w, x, n);
}

/* ---- IQ4_XS ------------------------------------------------------------------------------------- */

static void iq4xs_block(const float *x, const float *qw, uint8_t *y) {
    float weight[32], scales[QP_QK_K / 32];
    uint8_t L[QP_QK_K];
    const float sigma2 = mean_sq2(x, QP_QK_K);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < QP_QK_K / 32; ++ib) {
        block_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, weight);
        scales[ib] = fit_block(x + 32 * ib, weight, L + 32 * ib);
        float abs_d = fabsf(scales[ib]);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = scales[ib];
        }
    }
    uint16_t scales_h = 0;
    uint8_t *scales_l = y + IQ4XS_OFF_SCALES_L;
    float d = -max_scale / 32;
    qp_store_u16le(y, qp_fp32_to_fp16(d));
    float id = d != 0.0f ? 1 / d : 0.f;
    for (int ib = 0; ib < QP_QK_K / 32; ++ib) {
        int l = QP_MAX(-32, QP_MIN(31, qp_nearest_int(id * scales[ib])));
        float dl = d * (float)l;
        float idl = dl != 0.0f ? 1 / dl : 0.f;
        for (int j = 0; j < 32; ++j) L[32 * ib + j] = (uint8_t)best_index(idl * x[32 * ib + j]);
        l += 32;
        if (ib % 2 == 0) scales_l[ib / 2] = (uint8_t)(l & 0xf);
        else scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
        scales_h |= (uint16_t)((l >> 4) << 2 * (ib % 8));
    }
    qp_store_u16le(y + IQ4XS_OFF_SCALES_H, scales_h);
    pack_nibbles(L, y + IQ4XS_OFF_QS, QP_QK_K);
}

void qp_iq4xs_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QP_QK_K; i++)
        iq4xs_block(x + i * QP_QK_K, qw ? qw + i * QP_QK_K : NULL, y + i * QP_IQ4_XS_BYTES);
}

void qp_iq4xs_quantize_ref(const float *x, void *y, int64_t n) { qp_iq4xs_quantize_imatrix(x, y, n, NULL); }

void qp_iq4xs_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QP_QK_K; i++, x += QP_IQ4_XS_BYTES) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        const uint16_t scales_h = qp_load_u16le(x + IQ4XS_OFF_SCALES_H);
        const uint8_t *qs = x + IQ4XS_OFF_QS;
        for (int ib = 0; ib < QP_QK_K / 32; ++ib) {
            const int ls = ((x[IQ4XS_OFF_SCALES_L + ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * (float)k_values[qs[j] & 0xf];
                y[j + 16] = dl * (float)k_values[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

float qp_iq4xs_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_iq4xs_dequantize, QP_QK_K, QP_IQ4_XS_BYTES, w, x, n);
}

bool qp_iq4_validate_nl(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QP_QK, QP_IQ4_NL_BYTES, 0, -1, why, why_len);
}

bool qp_iq4_validate_xs(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QP_QK_K, QP_IQ4_XS_BYTES, 0, -1, why, why_len);
}
