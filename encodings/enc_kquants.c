/* llama.cpp k-quants: Q4_K, Q6_K and the Q8_K activation blocks. Written from
 * encodings/enc_kquants.md; the bytes equal llama.cpp's quantize_row_*_ref (pinned by
 * tests/peer/test_enc_vs_ggml.c against libggml-base.so). Every float operation keeps the
 * reference's order; the build uses -ffp-contract=off so no multiply-add is fused.
 * Block layouts are byte offsets (see encodings/enc_kquants.md); nothing is cast to a struct. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "encodings/enc_blocks.h"
#include "encodings/encodings_internal.h"

#define QK_K QP_QK_K
#define GROUP_MAX_EPS 1e-15f

/* ---- shared helpers -------------------------------------------------------------------------- */

/* make_qkx2_quants: asymmetric (scale, min) fit of n values with weights; L in 0..nmax.
 * Returns the scale, writes -min into *the_min (min <= 0). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = qp_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)QP_MAX(0, QP_MIN(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = qp_nearest_int(iscale * (x[i] - min));
            l = QP_MAX(0, QP_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* make_qx_quants with rmse_type 1 (weights x^2) and no importance matrix; L = l + nmax. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = qp_nearest_int(iscale * x[i]);
        l = QP_MAX(-nmax, QP_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = qp_nearest_int(iscale * x[i]);
            l = QP_MAX(-nmax, QP_MIN(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = qp_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + QP_MAX(-nmax, QP_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* 6-bit scale and min of sub-block j from the 12 packed bytes of a Q4_K block. */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* ---- Q4_K: f16 d @0, f16 dmin @2, u8 scales[12] @4, u8 qs[128] @16 (144 bytes) -------------- */

void qp_q4k_quantize_block_ref(const float *x, uint8_t *y) {
    uint8_t L[QK_K];
    uint8_t Laux[32];
    float weights[32];
    float mins[QK_K / 32];
    float scales[QK_K / 32];
    uint8_t *sc = y + 4;
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f,
                                     0.1f, 20);
        float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        float min = mins[j];
        if (min > max_min) max_min = min;
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(sc, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)qp_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)qp_nearest_int(inv_min * mins[j]);
        ls = QP_MIN(63, ls);
        lm = QP_MIN(63, lm);
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    uint16_t dh = qp_fp32_to_fp16(max_scale / 63.f);
    uint16_t mh = qp_fp32_to_fp16(max_min / 63.f);
    qp_store_u16le(y, dh);
    qp_store_u16le(y + 2, mh);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t s, m;
        get_scale_min_k4(j, sc, &s, &m);
        const float d = qp_fp16_to_fp32(dh) * (float)s;
        if (d == 0.0f) continue;
        const float dm = qp_fp16_to_fp32(mh) * (float)m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = qp_nearest_int((x[32 * j + ii] + dm) / d);
            l = QP_MAX(0, QP_MIN(15, l));
            L[32 * j + ii] = (uint8_t)l;
        }
    }
    uint8_t *q = y + 16;
    for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

void qp_q4k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) qp_q4k_quantize_block_ref(x + i * QK_K, y + i * QP_Q4_K_BYTES);
}

void qp_q4k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q4_K_BYTES;
        const float d = qp_fp16_to_fp32(qp_load_u16le(b));
        const float min = qp_fp16_to_fp32(qp_load_u16le(b + 2));
        const uint8_t *scales = b + 4;
        const uint8_t *q = b + 16;
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, scales, &sc, &m);
            const float d1 = d * (float)sc;
            const float m1 = min * (float)m;
            get_scale_min_k4(is + 1, scales, &sc, &m);
            const float d2 = d * (float)sc;
            const float m2 = min * (float)m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)(q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

float qp_q4k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q4k_dequantize, QK_K, QP_Q4_K_BYTES, w, x, n);
}

static bool check_f16(const uint8_t *p, int64_t blk, const char *what, char *why, size_t why_len) {
    if ((qp_load_u16le(p) & 0x7c00u) == 0x7c00u) {
        if (why) snprintf(why, why_len, "block %lld: %s is not finite (f16 0x%04x)", (long long)blk,
                          what, qp_load_u16le(p));
        return false;
    }
    return true;
}

bool qp_q4k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (!check_f16(x + i * QP_Q4_K_BYTES, i, "d", why, why_len)) return false;
        if (!check_f16(x + i * QP_Q4_K_BYTES + 2, i, "dmin", why, why_len)) return false;
    }
    return true;
}

/* ---- Q6_K: u8 ql[128] @0, u8 qh[64] @128, i8 scales[16] @192, f16 d @208 (210 bytes) -------- */

void qp_q6k_quantize_block_ref(const float *x, uint8_t *y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
        scales[ib] = scale;
        const float abs_scale = fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(y, 0, QP_Q6_K_BYTES);
        return;
    }
    float iscale = -128.f / max_scale;
    uint16_t dh = qp_fp32_to_fp16(1 / iscale);
    qp_store_u16le(y + QP_Q6_K_OFF_D, dh);
    int8_t *sc = (int8_t *)(y + 192);
    for (int ib = 0; ib < QK_K / 16; ++ib)
        sc[ib] = (int8_t)QP_MIN(127, qp_nearest_int(iscale * scales[ib]));
    for (int j = 0; j < QK_K / 16; ++j) {
        float d = qp_fp16_to_fp32(dh) * (float)sc[j];
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = qp_nearest_int(x[16 * j + ii] / d);
            l = QP_MAX(-32, QP_MIN(31, l));
            L[16 * j + ii] = (int8_t)(l + 32);
        }
    }
    uint8_t *ql = y;
    uint8_t *qh = y + 128;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = (uint8_t)(L[j + l + 0] & 0xF);
            const uint8_t q2 = (uint8_t)(L[j + l + 32] & 0xF);
            const uint8_t q3 = (uint8_t)(L[j + l + 64] & 0xF);
            const uint8_t q4 = (uint8_t)(L[j + l + 96] & 0xF);
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                              ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

void qp_q6k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) qp_q6k_quantize_block_ref(x + i * QK_K, y + i * QP_Q6_K_BYTES);
}

void qp_q6k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q6_K_BYTES;
        const float d = qp_fp16_to_fp32(qp_load_u16le(b + QP_Q6_K_OFF_D));
        const uint8_t *ql = b;
        const uint8_t *qh = b + 128;
        const uint8_t *scb = b + 192;
        for (int k = 0; k < QK_K; k += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int q1 = (int)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * (float)(int8_t)scb[is + 0] * (float)q1;
                y[l + 32] = d * (float)(int8_t)scb[is + 2] * (float)q2;
                y[l + 64] = d * (float)(int8_t)scb[is + 4] * (float)q3;
                y[l + 96] = d * (float)(int8_t)scb[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            scb += 8;
        }
    }
}

float qp_q6k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q6k_dequantize, QK_K, QP_Q6_K_BYTES, w, x, n);
}

bool qp_q6k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++)
        if (!check_f16(x + i * QP_Q6_K_BYTES + QP_Q6_K_OFF_D, i, "d", why, why_len)) return false;
    return true;
}

/* ---- Q8_K: f32 d @0, i8 qs[256] @4, i16 bsums[16] @260 (292 bytes) ---------------------------- */

void qp_q8k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += QP_Q8_K_BYTES) {
        float max = 0;
        float amax = 0;
        for (int j = 0; j < QK_K; ++j) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            memset(y, 0, QP_Q8_K_BYTES);
            continue;
        }
        const float iscale = -127.f / max;
        int8_t *qs = (int8_t *)(y + 4);
        for (int j = 0; j < QK_K; ++j) {
            int v = qp_nearest_int(iscale * x[j]);
            qs[j] = (int8_t)QP_MIN(127, v);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += qs[j * 16 + ii];
            qp_store_u16le(y + 260 + 2 * j, (uint16_t)(int16_t)sum);
        }
        qp_store_f32le(y, 1 / iscale);
    }
}

void qp_q8k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q8_K_BYTES;
        const float d = qp_load_f32le(b);
        for (int j = 0; j < QK_K; ++j) *y++ = d * (float)(int8_t)b[4 + j];
    }
}

float qp_q8k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q8k_dequantize, QK_K, QP_Q8_K_BYTES, w, x, n);
}

bool qp_q8k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q8_K_BYTES;
        if (!isfinite(qp_load_f32le(b))) {
            if (why) snprintf(why, why_len, "block %lld: d is not finite", (long long)i);
            return false;
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += (int8_t)b[4 + 16 * j + k];
            if ((int16_t)qp_load_u16le(b + 260 + 2 * j) != sum) {
                if (why) snprintf(why, why_len, "block %lld: bsums[%d] does not match qs",
                                  (long long)i, j);
                return false;
            }
        }
    }
    return true;
}
