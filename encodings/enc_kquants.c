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
#include "encodings/kquants_fit.h"

#define QK_K QP_QK_K
#define GROUP_MAX_EPS 1e-15f

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

static bool check_f16(const uint8_t *p, int64_t blk, const char *what, char *why, size_t why_len) {
    if ((qp_load_u16le(p) & 0x7c00u) == 0x7c00u) {
        if (why) snprintf(why, why_len, "block %lld: %s is not finite (f16 0x%04x)", (long long)blk,
                          what, qp_load_u16le(p));
        return false;
    }
    return true;
}

/* ---- Q4_K and Q5_K: eight 32-element sub-blocks with 6-bit (scale, min) pairs ---------------- */
/* Q4_K: f16 d @0, f16 dmin @2, u8 scales[12] @4, u8 qs[128] @16 (144 bytes)
 * Q5_K: f16 d @0, f16 dmin @2, u8 scales[12] @4, u8 qh[32] @16, u8 qs[128] @48 (176 bytes) */

/* Packs eight 6-bit (ls, lm) pairs into the 12 scale bytes (enc_kquants.md "Q4_K"). */
static void pack_scale_min_k4(uint8_t *sc, const uint8_t *ls, const uint8_t *lm) {
    memset(sc, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        if (j < 4) {
            sc[j] = ls[j];
            sc[j + 4] = lm[j];
        } else {
            sc[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            sc[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* The fitted (scale, min) of each sub-block, as 6-bit levels under f16 d / dmin written to y. */
static void k4_fit_ref(const float *x, uint8_t *y, int nmax, float rmin, int nstep, uint8_t *L,
                       uint8_t *ls, uint8_t *lm) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = qp_fit_qkx2(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f,
                                nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        ls[j] = QP_MIN(63, (uint8_t)qp_nearest_int(inv_scale * scales[j]));
        lm[j] = QP_MIN(63, (uint8_t)qp_nearest_int(inv_min * mins[j]));
    }
    qp_store_u16le(y, qp_fp32_to_fp16(max_scale / 63.f));
    qp_store_u16le(y + 2, qp_fp32_to_fp16(max_min / 63.f));
}

/* The same with importance weights qw (llama.cpp quantize_row_q{4,5}_K_impl). */
static void k4_fit_imatrix(const float *x, const float *qw, uint8_t *y, int nmax, bool clamp63,
                           uint8_t *L, uint8_t *ls, uint8_t *lm) {
    uint8_t Laux[32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = qp_fit_qkx3(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f,
                                36, false);
    }
    float d_block = qp_fit_qp(QK_K / 32, 63, scales, ls, sw);
    float m_block = qp_fit_qp(QK_K / 32, 63, mins, lm, sw);
    if (clamp63)
        for (int j = 0; j < QK_K / 32; ++j) {
            ls[j] = QP_MIN(63, ls[j]);
            lm[j] = QP_MIN(63, lm[j]);
        }
    qp_store_u16le(y, qp_fp32_to_fp16(d_block));
    qp_store_u16le(y + 2, qp_fp32_to_fp16(m_block));
}

/* Codes of every sub-block under the stored d, dmin and 6-bit levels; a zero scale keeps L. */
static void k4_requantize(const float *x, const uint8_t *y, int nmax, uint8_t *L) {
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t s, m;
        get_scale_min_k4(j, y + 4, &s, &m);
        const float d = qp_fp16_to_fp32(qp_load_u16le(y)) * (float)s;
        if (d == 0.0f) continue;
        const float dm = qp_fp16_to_fp32(qp_load_u16le(y + 2)) * (float)m;
        for (int ii = 0; ii < 32; ++ii)
            L[32 * j + ii] = (uint8_t)QP_MAX(0, QP_MIN(nmax, qp_nearest_int((x[32 * j + ii] + dm) / d)));
    }
}

static void q4k_pack(const uint8_t *L, uint8_t *y) {
    uint8_t *q = y + 16;
    for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

static void q5k_pack(const uint8_t *L, uint8_t *y) {
    uint8_t *qh = y + 16, *ql = y + 48;
    memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
        ql += 32;
    }
}

/* One Q4_K (nmax 15) or Q5_K (nmax 31) block; qw NULL: the reference fit. */
static void k4_block(const float *x, const float *qw, uint8_t *y, int nmax) {
    uint8_t L[QK_K], ls[QK_K / 32], lm[QK_K / 32];
    if (qw) k4_fit_imatrix(x, qw, y, nmax, nmax == 31, L, ls, lm);
    else if (nmax == 15) k4_fit_ref(x, y, 15, -1.f, 20, L, ls, lm);
    else k4_fit_ref(x, y, 31, -0.5f, 15, L, ls, lm);
    pack_scale_min_k4(y + 4, ls, lm);
    k4_requantize(x, y, nmax, L);
    if (nmax == 15) q4k_pack(L, y);
    else q5k_pack(L, y);
}

void qp_q4k_quantize_block_ref(const float *x, uint8_t *y) { k4_block(x, NULL, y, 15); }

void qp_q4k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) qp_q4k_quantize_block_ref(x + i * QK_K, y + i * QP_Q4_K_BYTES);
}

void qp_q4k_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++)
        k4_block(x + i * QK_K, qw ? qw + i * QK_K : NULL, y + i * QP_Q4_K_BYTES, 15);
}

void qp_q5k_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++) k4_block(x + i * QK_K, NULL, y + i * QP_Q5_K_BYTES, 31);
}

void qp_q5k_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++)
        k4_block(x + i * QK_K, qw ? qw + i * QK_K : NULL, y + i * QP_Q5_K_BYTES, 31);
}

void qp_q5k_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const uint8_t *b = x + i * QP_Q5_K_BYTES;
        const float d = qp_fp16_to_fp32(qp_load_u16le(b));
        const float min = qp_fp16_to_fp32(qp_load_u16le(b + 2));
        const uint8_t *qh = b + 16, *ql = b + 48;
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            get_scale_min_k4(is + 0, b + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            get_scale_min_k4(is + 1, b + 4, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

float qp_q5k_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_q5k_dequantize, QK_K, QP_Q5_K_BYTES, w, x, n);
}

bool qp_q5k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QK_K, QP_Q5_K_BYTES, 0, 2, why, why_len);
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

bool qp_blocks_validate_f16(const void *vx, int64_t nblocks, size_t block_bytes, int off_d,
                            int off_dmin, char *why, size_t why_len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < nblocks; i++) {
        if (!check_f16(x + (size_t)i * block_bytes + off_d, i, "d", why, why_len)) return false;
        if (off_dmin >= 0 && !check_f16(x + (size_t)i * block_bytes + off_dmin, i, "dmin", why, why_len))
            return false;
    }
    return true;
}

bool qp_q4k_validate(const void *vx, int64_t n, char *why, size_t why_len) {
    return qp_blocks_validate_f16(vx, n / QK_K, QP_Q4_K_BYTES, 0, 2, why, why_len);
}

/* ---- Q6_K: u8 ql[128] @0, u8 qh[64] @128, i8 scales[16] @192, f16 d @208 (210 bytes) -------- */

/* One Q6_K block; qw NULL: the reference (weights x^2), else the importance weights as they are. */
static void q6k_block(const float *x, const float *qw, uint8_t *y) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float scale = qp_fit_qx(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + 16 * ib : NULL);
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

void qp_q6k_quantize_block_ref(const float *x, uint8_t *y) { q6k_block(x, NULL, y); }

void qp_q6k_quantize_imatrix(const float *x, void *vy, int64_t n, const float *qw) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++)
        q6k_block(x + i * QK_K, qw ? qw + i * QK_K : NULL, y + i * QP_Q6_K_BYTES);
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
    return qp_blocks_validate_f16(vx, n / QK_K, QP_Q6_K_BYTES, QP_Q6_K_OFF_D, -1, why, why_len);
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
