/* llama.cpp 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0. Written from
 * encodings/enc_kquants.md; bytes equal llama.cpp's quantize_row_*_ref (peer test).
 * Layouts (byte offsets, little-endian):
 *   Q4_0 18 B: f16 d @0, u8 qs[16] @2          x = (nibble - 8) * d
 *   Q4_1 20 B: f16 d @0, f16 m @2, qs[16] @4   x = nibble * d + m
 *   Q5_0 22 B: f16 d @0, u32 qh @2, qs[16] @6  x = (nibble | bit<<4) - 16) * d
 *   Q5_1 24 B: f16 d @0, f16 m @2, qh @4, qs @8 x = (nibble | bit<<4) * d + m
 *   Q8_0 34 B: f16 d @0, i8 qs[32] @2          x = q * d
 * Element j < 16 is the low nibble of qs[j], element j + 16 the high nibble; for 5-bit types bit 4
 * of element j is bit j of qh. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "encodings/encodings_internal.h"
#include "encodings/kquants_fit.h"

#define QK QP_QK

/* (int8_t)(float) as x86 gcc compiles the reference: truncate toward zero, keep 8 bits. Only
 * called on values in [0, 33) for finite input; guarded against UB for NaN / Inf. */
static inline int trunc_i8(float v) {
    if (!(v > -128.0f && v < 128.0f)) return 0;
    return (int)(int8_t)(int)v;
}

static void absmax_signed(const float *x, float *amax_out, float *max_out) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        const float v = x[j];
        if (amax < fabsf(v)) {
            amax = fabsf(v);
            max = v;
        }
    }
    *amax_out = amax;
    *max_out = max;
}

static bool check_f16_at(const uint8_t *p, int64_t blk, const char *what, char *why, size_t len) {
    uint16_t h = qp_load_u16le(p);
    if ((h & 0x7c00u) == 0x7c00u) {
        if (why) snprintf(why, len, "block %lld: %s is not finite (f16 0x%04x)", (long long)blk, what, h);
        return false;
    }
    return true;
}

/* ---- Q4_0 ------------------------------------------------------------------------------------ */
void qp_q4_0_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += QP_Q4_0_BYTES) {
        float amax, max;
        absmax_signed(x, &amax, &max);
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[QK / 2 + j] * id;
            const int xi0 = QP_MIN(15, trunc_i8(x0 + 8.5f));
            const int xi1 = QP_MIN(15, trunc_i8(x1 + 8.5f));
            y[2 + j] = (uint8_t)((uint8_t)xi0 | ((uint8_t)xi1 << 4));
        }
    }
}
void qp_q4_0_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++, x += QP_Q4_0_BYTES, y += QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        for (int j = 0; j < QK / 2; ++j) {
            const int x0 = (x[2 + j] & 0x0F) - 8;
            const int x1 = (x[2 + j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}
bool qp_q4_0_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++)
        if (!check_f16_at(x + i * QP_Q4_0_BYTES, i, "d", why, len)) return false;
    return true;
}

/* ---- Q4_1 ------------------------------------------------------------------------------------ */
void qp_q4_1_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += QP_Q4_1_BYTES) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            const float v = x[j];
            if (v < min) min = v;
            if (v > max) max = v;
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        qp_store_u16le(y + 2, qp_fp32_to_fp16(min));
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[QK / 2 + j] - min) * id;
            const int xi0 = QP_MIN(15, trunc_i8(x0 + 0.5f));
            const int xi1 = QP_MIN(15, trunc_i8(x1 + 0.5f));
            y[4 + j] = (uint8_t)((uint8_t)xi0 | ((uint8_t)xi1 << 4));
        }
    }
}
void qp_q4_1_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++, x += QP_Q4_1_BYTES, y += QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        const float m = qp_fp16_to_fp32(qp_load_u16le(x + 2));
        for (int j = 0; j < QK / 2; ++j) {
            const int x0 = x[4 + j] & 0x0F;
            const int x1 = x[4 + j] >> 4;
            y[j] = (float)x0 * d + m;
            y[j + QK / 2] = (float)x1 * d + m;
        }
    }
}
bool qp_q4_1_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++) {
        if (!check_f16_at(x + i * QP_Q4_1_BYTES, i, "d", why, len)) return false;
        if (!check_f16_at(x + i * QP_Q4_1_BYTES + 2, i, "m", why, len)) return false;
    }
    return true;
}

/* ---- Q5_0 ------------------------------------------------------------------------------------ */
void qp_q5_0_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += QP_Q5_0_BYTES) {
        float amax, max;
        absmax_signed(x, &amax, &max);
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[QK / 2 + j] * id;
            const uint8_t xi0 = (uint8_t)QP_MIN(31, trunc_i8(x0 + 16.5f));
            const uint8_t xi1 = (uint8_t)QP_MIN(31, trunc_i8(x1 + 16.5f));
            y[6 + j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + QK / 2);
        }
        qp_store_u32le(y + 2, qh);
    }
}
void qp_q5_0_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++, x += QP_Q5_0_BYTES, y += QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        const uint32_t qh = qp_load_u32le(x + 2);
        for (int j = 0; j < QK / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
            const int x0 = ((x[6 + j] & 0x0F) | xh_0) - 16;
            const int x1 = ((x[6 + j] >> 4) | xh_1) - 16;
            y[j] = (float)x0 * d;
            y[j + QK / 2] = (float)x1 * d;
        }
    }
}
bool qp_q5_0_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++)
        if (!check_f16_at(x + i * QP_Q5_0_BYTES, i, "d", why, len)) return false;
    return true;
}

/* ---- Q5_1 ------------------------------------------------------------------------------------ */
void qp_q5_1_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += QP_Q5_1_BYTES) {
        float min = x[0], max = x[0];
        for (int j = 1; j < QK; j++) {
            const float v = x[j];
            min = v < min ? v : min;
            max = v > max ? v : max;
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        qp_store_u16le(y + 2, qp_fp32_to_fp16(min));
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[QK / 2 + j] - min) * id;
            const uint8_t xi0 = (uint8_t)trunc_i8(x0 + 0.5f);
            const uint8_t xi1 = (uint8_t)trunc_i8(x1 + 0.5f);
            y[8 + j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + QK / 2);
        }
        qp_store_u32le(y + 4, qh);
    }
}
void qp_q5_1_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++, x += QP_Q5_1_BYTES, y += QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        const float m = qp_fp16_to_fp32(qp_load_u16le(x + 2));
        const uint32_t qh = qp_load_u32le(x + 4);
        for (int j = 0; j < QK / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
            const int x0 = (x[8 + j] & 0x0F) | xh_0;
            const int x1 = (x[8 + j] >> 4) | xh_1;
            y[j] = (float)x0 * d + m;
            y[j + QK / 2] = (float)x1 * d + m;
        }
    }
}
bool qp_q5_1_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++) {
        if (!check_f16_at(x + i * QP_Q5_1_BYTES, i, "d", why, len)) return false;
        if (!check_f16_at(x + i * QP_Q5_1_BYTES + 2, i, "m", why, len)) return false;
    }
    return true;
}

/* ---- Q8_0 ------------------------------------------------------------------------------------ */
void qp_q8_0_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += QP_Q8_0_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) amax = QP_MAX(amax, fabsf(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        for (int j = 0; j < QK; ++j) {
            const float x0 = x[j] * id;
            const float r = roundf(x0);
            y[2 + j] = (uint8_t)(int8_t)(r >= -128.0f && r <= 127.0f ? (int)r : 0);
        }
    }
}
void qp_q8_0_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++, x += QP_Q8_0_BYTES, y += QK) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x));
        for (int j = 0; j < QK; ++j) y[j] = (float)(int8_t)x[2 + j] * d;
    }
}
bool qp_q8_0_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK; i++)
        if (!check_f16_at(x + i * QP_Q8_0_BYTES, i, "d", why, len)) return false;
    return true;
}

/* Row dots: dequantize a block, accumulate in element order (equals dequantize-then-dot). */
#define LEGACY_DOT(NAME, BYTES)                                                                  \
    float qp_##NAME##_vec_dot_ref(const void *w, const float *x, int64_t n) {                    \
        float tmp[QK];                                                                           \
        float s = 0.0f;                                                                          \
        const uint8_t *p = w;                                                                    \
        for (int64_t i = 0; i < n / QK; i++) {                                                   \
            qp_##NAME##_dequantize(p + (size_t)i * (BYTES), tmp, QK);                            \
            for (int k = 0; k < QK; k++) s += tmp[k] * x[i * QK + k];                            \
        }                                                                                        \
        return s;                                                                                \
    }
LEGACY_DOT(q4_0, QP_Q4_0_BYTES)
LEGACY_DOT(q4_1, 20)
LEGACY_DOT(q5_0, QP_Q5_0_BYTES)
LEGACY_DOT(q5_1, 24)
LEGACY_DOT(q8_0, QP_Q8_0_BYTES)

/* ---- with importance weights (llama.cpp quantize_row_q{4,5}_{0,1}_impl) -------------------------
 * One call is one row: sigma2 = mean x^2 over the row, each block's weights qw * sqrt(sigma2 + x^2);
 * Q4_0 / Q5_0 fit a symmetric scale (make_qx_quants), Q4_1 / Q5_1 a scale and min (qkx3). Without
 * weights the bytes are quantize_ref's. Q8_0 ignores them, as llama.cpp does. */

static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / (float)n;
}

static void block_weights(const float *xb, const float *qw, float sigma2, float *weight) {
    for (int j = 0; j < QK; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
}

/* codes L[0..31] (0..31) into 16 nibble bytes at qs and, for 5-bit types, their bit 4 into qh */
static void pack_codes(const uint8_t *L, uint8_t *qs, uint8_t *qh_out) {
    uint32_t qh = 0;
    for (int j = 0; j < QK / 2; ++j) {
        qs[j] = (uint8_t)((L[j] & 0x0F) | ((L[j + QK / 2] & 0x0F) << 4));
        qh |= ((L[j] & 0x10u) >> 4) << (j + 0);
        qh |= ((L[j + QK / 2] & 0x10u) >> 4) << (j + QK / 2);
    }
    if (qh_out) qp_store_u32le(qh_out, qh);
}

/* symmetric types: nmax 8 (Q4_0) or 16 (Q5_0); the d at 0, the codes at qs_off */
static void symmetric_imatrix(const float *x, uint8_t *y, int64_t n, const float *qw, int nmax,
                              size_t bytes) {
    const float sigma2 = row_sigma2(x, n);
    float weight[QK];
    int8_t L[QK];
    for (int64_t ib = 0; ib < n / QK; ++ib, y += bytes) {
        block_weights(x + QK * ib, qw + QK * ib, sigma2, weight);
        float d = qp_fit_qx(QK, nmax, x + QK * ib, L, weight);
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        pack_codes((const uint8_t *)L, y + (nmax == 8 ? 2 : 6), nmax == 8 ? NULL : y + 2);
    }
}

/* asymmetric types: nmax 15 (Q4_1) or 31 (Q5_1); d at 0, m at 2, the codes after */
static void affine_imatrix(const float *x, uint8_t *y, int64_t n, const float *qw, int nmax,
                           size_t bytes) {
    const float sigma2 = row_sigma2(x, n);
    float weight[QK];
    uint8_t L[QK], Laux[QK];
    for (int64_t ib = 0; ib < n / QK; ++ib, y += bytes) {
        block_weights(x + QK * ib, qw + QK * ib, sigma2, weight);
        float min;
        float d = qp_fit_qkx3(QK, nmax, x + QK * ib, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        qp_store_u16le(y + 2, qp_fp32_to_fp16(-min));
        pack_codes(L, y + (nmax == 15 ? 4 : 8), nmax == 15 ? NULL : y + 4);
    }
}

void qp_q4_0_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) symmetric_imatrix(x, y, n, qw, 8, QP_Q4_0_BYTES);
    else qp_q4_0_quantize_ref(x, y, n);
}
void qp_q5_0_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) symmetric_imatrix(x, y, n, qw, 16, QP_Q5_0_BYTES);
    else qp_q5_0_quantize_ref(x, y, n);
}
void qp_q4_1_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) affine_imatrix(x, y, n, qw, 15, QP_Q4_1_BYTES);
    else qp_q4_1_quantize_ref(x, y, n);
}
void qp_q5_1_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw) {
    if (qw) affine_imatrix(x, y, n, qw, 31, QP_Q5_1_BYTES);
    else qp_q5_1_quantize_ref(x, y, n);
}
