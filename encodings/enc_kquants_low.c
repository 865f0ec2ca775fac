/* llama.cpp's 2- and 3-bit k-quants, Q2_K and Q3_K (encodings/enc_kquants.md "Q2_K", "Q3_K").
 * Bytes equal llama.cpp's quantize_row_q{2,3}_K_ref, and with importance weights its
 * quantize_q{2,3}_K (tests/peer/test_enc_vs_ggml.c); float operations in the reference's order.
 *   Q2_K  84 B: u8 scales[16] @0 (low nibble scale, high nibble min), u8 qs[64] @16, f16 d @80,
 *               f16 dmin @82; x = d*sc*q - dmin*m, q in 0..3
 *   Q3_K 110 B: u8 hmask[32] @0, u8 qs[64] @32, u8 scales[12] @96 (sixteen 6-bit), f16 d @108;
 *               x = d*(sc-32)*(q - 4*(1-hbit)), q in 0..3 */
#include <math.h>
#include <string.h>

#include "encodings/enc_blocks.h"
#include "encodings/encodings_internal.h"
#include "encodings/kquants_fit.h"

#define QK_K QP_QK_K
#define Q2K_OFF_QS 16
#define Q2K_OFF_D 80
#define Q2K_OFF_DMIN 82
#define Q3K_OFF_QS 32
#define Q3K_OFF_SCALES 96
#define Q3K_OFF_D 108

/* 2-bit codes of 256 elements: byte j/4 + l of chunk j holds L[j+l], L[j+l+32], L[j+l+64],
 * L[j+l+96] at bits 0, 2, 4, 6 (both types). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

/* ---- Q2_K -------------------------------------------------------------------------------------- */

/* Codes under the stored d, dmin and 4-bit levels; a zero scale keeps the fitted codes. */
static void q2k_requantize(const float *x, const uint8_t *y, uint8_t *L) {
    const float dd = qp_fp16_to_fp32(qp_load_u16le(y + Q2K_OFF_D));
    const float dm = qp_fp16_to_fp32(qp_load_u16le(y + Q2K_OFF_DMIN));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = dd * (float)(y[j] & 0xF);
        if (d == 0.0f) continue;
        const float m = dm * (float)(y[j] >> 4);
        for (int ii = 0; ii < 16; ++ii)
            L[16 * j + ii] = (uint8_t)QP_MAX(0, QP_MIN(3, qp_nearest_int((x[16 * j + ii] + m) / d)));
    }
}

static void q2k_block_ref(const float *x, uint8_t *y) {
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
        scales[j] = qp_fit_qkx2(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float d = 0.f, dmin = 0.f;
    memset(y, 0, QK_K / 16);
    if (max_scale > 0) {
        float iscale = q4scale / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) y[j] = (uint8_t)qp_nearest_int(iscale * scales[j]);
        d = max_scale / q4scale;
    }
    if (max_min > 0) {
        float iscale = q4scale / max_min;
        for (int j = 0; j < QK_K / 16; ++j) y[j] |= (uint8_t)((unsigned)qp_nearest_int(iscale * mins[j]) << 4);
        dmin = max_min / q4scale;
    }
    qp_store_u16le(y + Q2K_OFF_D, qp_fp32_to_fp16(d));
    qp_store_u16le(y + Q2K_OFF_DMIN, qp_fp32_to_fp16(dmin));
    q2k_requantize(x, y, L);
    pack_2bit(L, y + Q2K_OFF_QS);
}

/* quantize_row_q2_K_impl: importance weights qw (256 of them) for this block. */
static void q2k_block_imatrix(const float *x, const float *qw, uint8_t *y) {
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    float sigma2 = sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l) weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        sw[j] = 0;
        for (int l = 0; l < 16; ++l) sw[j] += weight[l];
        scales[j] = qp_fit_qkx3(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    float dm = qp_fit_qp(QK_K / 16, 15, scales, Ls, sw);
    float mm = qp_fit_qp(QK_K / 16, 15, mins, Lm, sw);
    qp_store_u16le(y + Q2K_OFF_D, qp_fp32_to_fp16(dm));
    qp_store_u16le(y + Q2K_OFF_DMIN, qp_fp32_to_fp16(mm));
    for (int j = 0; j < QK_K / 16; ++j) y[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
    q2k_requantize(x, y, L);
    pack_2bit(L, y + Q2K_OFF_QS);
}

void qp_q2k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q2k_block_ref(x + i * QK_K, y + i * QP_Q2_K_BYTES);
}

void qp_q2k_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        qp_q2k_quantize_ref(x, vy, n);
        return;
    }
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q2k_block_imatrix(x + i * QK_K, qw + i * QK_K, y + i * QP_Q2_K_BYTES);
}

void qp_q2k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q2_K_BYTES;
        const float d = qp_fp16_to_fp32(qp_load_u16le(b + Q2K_OFF_D));
        const float min = qp_fp16_to_fp32(qp_load_u16le(b + Q2K_OFF_DMIN));
        const uint8_t *q = b + Q2K_OFF_QS;
        int is = 0;
        for (int c = 0; c < QK_K; c += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = b[is++];
                    float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

float qp_q2k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q2k_dequantize, QK_K, QP_Q2_K_BYTES, w, x, n);
}

bool qp_q2k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QK_K, QP_Q2_K_BYTES, Q2K_OFF_D, Q2K_OFF_DMIN, why, why_len);
}

/* ---- Q3_K -------------------------------------------------------------------------------------- */

/* Stores 6-bit level l (0..63) of sub-block j into the 12 scale bytes (zeroed beforehand). */
static void q3k_put_scale(uint8_t *sc, int j, int l) {
    if (j < 8) sc[j] = (uint8_t)(l & 0xF);
    else sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
    l >>= 4;
    sc[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

/* Signed scale of sub-block j (level - 32). */
static int q3k_get_scale(const uint8_t *sc, int j) {
    int lo = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
    return (int)(int8_t)(lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* Codes under the stored scales (a zero one keeps the fitted codes), then the high bits into
 * hmask (bit b of byte m: element 32b + m) and the low two bits into qs. */
static void q3k_finish(const float *x, uint8_t *y, int8_t *L) {
    const float dd = qp_fp16_to_fp32(qp_load_u16le(y + Q3K_OFF_D));
    for (int j = 0; j < QK_K / 16; ++j) {
        float d = dd * (float)q3k_get_scale(y + Q3K_OFF_SCALES, j);
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ++ii)
            L[16 * j + ii] = (int8_t)(QP_MAX(-4, QP_MIN(3, qp_nearest_int(x[16 * j + ii] / d))) + 4);
    }
    memset(y, 0, QK_K / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK_K; ++j) {
        if (L[j] > 3) {
            y[m] |= hm;
            L[j] = (int8_t)(L[j] - 4);
        }
        if (++m == QK_K / 8) {
            m = 0;
            hm = (uint8_t)(hm << 1);
        }
    }
    pack_2bit((const uint8_t *)L, y + Q3K_OFF_QS);
}

static void q3k_block_ref(const float *x, uint8_t *y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = qp_fit_q3(16, 4, x + 16 * j, L + 16 * j);
        float scale = fabsf(scales[j]);
        if (scale > amax) {
            amax = scale;
            max_scale = scales[j];
        }
    }
    uint8_t *sc = y + Q3K_OFF_SCALES;
    memset(sc, 0, 12);
    float d = 0.f;
    if (max_scale != 0.0f) {
        float iscale = -32.f / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
            int8_t l = (int8_t)qp_nearest_int(iscale * scales[j]);
            q3k_put_scale(sc, j, QP_MAX(-32, QP_MIN(31, l)) + 32);
        }
        d = 1 / iscale;
    }
    qp_store_u16le(y + Q3K_OFF_D, qp_fp32_to_fp16(d));
    q3k_finish(x, y, L);
}

/* quantize_row_q3_K_impl: importance weights qw (256 of them) for this block. */
static void q3k_block_imatrix(const float *x, const float *qw, uint8_t *y) {
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    float sumx2 = 0;
    for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
    float sigma2 = 2 * sumx2 / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l) weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 16; ++l) sumw += weight[l];
        sw[j] = sumw;
        scales[j] = qp_fit_qx(16, 4, x + 16 * j, L + 16 * j, weight);
    }
    uint8_t *sc = y + Q3K_OFF_SCALES;
    memset(sc, 0, 12);
    float d_block = qp_fit_qx(QK_K / 16, 32, scales, Ls, sw);
    for (int j = 0; j < QK_K / 16; ++j) q3k_put_scale(sc, j, Ls[j]);
    qp_store_u16le(y + Q3K_OFF_D, qp_fp32_to_fp16(d_block));
    q3k_finish(x, y, L);
}

void qp_q3k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q3k_block_ref(x + i * QK_K, y + i * QP_Q3_K_BYTES);
}

void qp_q3k_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    if (!qw) {
        qp_q3k_quantize_ref(x, vy, n);
        return;
    }
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) q3k_block_imatrix(x + i * QK_K, qw + i * QK_K, y + i * QP_Q3_K_BYTES);
}

void qp_q3k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q3_K_BYTES;
        const float d_all = qp_fp16_to_fp32(qp_load_u16le(b + Q3K_OFF_D));
        const uint8_t *q = b + Q3K_OFF_QS, *hm = b;
        uint8_t m = 1;
        int is = 0;
        for (int c = 0; c < QK_K; c += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * (float)q3k_get_scale(b + Q3K_OFF_SCALES, is++);
                    for (int l = 16 * half; l < 16 * half + 16; ++l)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
    }
}

float qp_q3k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q3k_dequantize, QK_K, QP_Q3_K_BYTES, w, x, n);
}

bool qp_q3k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QK_K, QP_Q3_K_BYTES, Q3K_OFF_D, -1, why, why_len);
}
