/* Fast-path dots (traits vec_dot_q8, encodings/encodings.md "Fast dots"): a weight row against
 * activations quantized per block (Q8_0 for the 32-element legacy blocks, Q8_K for k-quants),
 * integer products summed exactly, then one float step per block. These scalar functions define
 * the result; the AVX2 / AVX-512 VNNI kernels (qdot_avx2.c, qdot_avx512.c) compute the same
 * integers and the same float operations in the same order, so every level gives the same bits. */
#include "encodings/encodings_internal.h"
#include "encodings/qdot.h"

/* ---- 32-element blocks against Q8_0 -------------------------------------------------------- */

/* levels of one weight block: Q8_0 q, Q4_0 nibble - 8, Q5_0 (nibble | high bit << 4) - 16 */
static void q8_0_levels(const uint8_t *b, int8_t q[32]) {
    for (int i = 0; i < 32; i++) q[i] = (int8_t)b[2 + i];
}
static void q4_0_levels(const uint8_t *b, int8_t q[32]) {
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)((b[2 + i] & 0x0F) - 8);
        q[i + 16] = (int8_t)((b[2 + i] >> 4) - 8);
    }
}
static void q5_0_levels(const uint8_t *b, int8_t q[32]) {
    const uint32_t qh = qp_load_u32le(b + 2);
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)(((b[6 + i] & 0x0F) | (((qh >> i) & 1u) << 4)) - 16);
        q[i + 16] = (int8_t)(((b[6 + i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - 16);
    }
}

static float legacy_dot(void (*levels)(const uint8_t *, int8_t *), size_t wbytes, const void *w,
                        const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float acc[8] = {0};
    int8_t q[32];
    for (int64_t i = 0; i < n / QP_QK; i++, wb += wbytes, ab += QP_Q8_0_BYTES) {
        levels(wb, q);
        const int8_t *a = (const int8_t *)(ab + 2);
        const float d = qp_fp16_to_fp32(qp_load_u16le(wb)) * qp_fp16_to_fp32(qp_load_u16le(ab));
        for (int k = 0; k < 8; k++) {
            int32_t p = 0;
            for (int j = 4 * k; j < 4 * k + 4; j++) p += (int32_t)q[j] * a[j];
            acc[k] = acc[k] + d * (float)p;
        }
    }
    return qp_qdot_hsum8(acc);
}

float qp_q8_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q8_0_levels, QP_Q8_0_BYTES, w, xq, n);
}
float qp_q4_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q4_0_levels, QP_Q4_0_BYTES, w, xq, n);
}
float qp_q5_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q5_0_levels, QP_Q5_0_BYTES, w, xq, n);
}

/* ---- k-quants against Q8_K ---------------------------------------------------------------- */

void qp_q4k_unpack_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s12[j] & 63;
        mn[j] = s12[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s12[j + 8] & 0x0F) | ((s12[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s12[j + 8] >> 4) | ((s12[j + 4] >> 6) << 4));
    }
}

float qp_q4k_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q4_K_BYTES, ab += QP_Q8_K_BYTES) {
        uint8_t sc[8], mn[8];
        qp_q4k_unpack_scales(wb + QP_Q4_K_OFF_SCALES, sc, mn);
        const uint8_t *q = wb + QP_Q4_K_OFF_QS;
        const int8_t *a = (const int8_t *)(ab + QP_Q8_K_OFF_QS);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int32_t p = 0;
            for (int l = 0; l < 32; l++) {
                const int v = (j & 1) ? q[32 * (j / 2) + l] >> 4 : q[32 * (j / 2) + l] & 0x0F;
                p += v * a[32 * j + l];
            }
            isum += (int32_t)sc[j] * p;
            const int32_t bs = (int16_t)qp_load_u16le(ab + QP_Q8_K_OFF_BSUMS + 4 * j) +
                               (int16_t)qp_load_u16le(ab + QP_Q8_K_OFF_BSUMS + 4 * j + 2);
            msum += (int32_t)mn[j] * bs;
        }
        const float da = qp_load_f32le(ab);
        const float d = qp_fp16_to_fp32(qp_load_u16le(wb)) * da;
        const float dmin = qp_fp16_to_fp32(qp_load_u16le(wb + 2)) * da;
        sum = sum + d * (float)isum;
        sum = sum - dmin * (float)msum;
    }
    return sum;
}

float qp_q6k_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q6_K_BYTES, ab += QP_Q8_K_BYTES) {
        const int8_t *a = (const int8_t *)(ab + QP_Q8_K_OFF_QS);
        const int8_t *scb = (const int8_t *)(wb + QP_Q6_K_OFF_SCALES);
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) { /* two halves of 128: ql 64 bytes, qh 32 bytes each */
            const uint8_t *ql = wb + 64 * h, *qh = wb + QP_Q6_K_OFF_QH + 32 * h;
            for (int m = 0; m < 4; m++) { /* element 128h + 32m + l */
                int32_t p[2] = {0, 0};
                for (int l = 0; l < 32; l++) {
                    const uint8_t lo = (m & 1) ? ql[l + 32] : ql[l];
                    const int v = (int)(((m & 2) ? lo >> 4 : lo & 0x0F) | (((qh[l] >> (2 * m)) & 3) << 4)) - 32;
                    p[l / 16] += v * a[128 * h + 32 * m + l];
                }
                isum += scb[8 * h + 2 * m] * p[0] + scb[8 * h + 2 * m + 1] * p[1];
            }
        }
        const float d = qp_fp16_to_fp32(qp_load_u16le(wb + QP_Q6_K_OFF_D)) * qp_load_f32le(ab);
        sum = sum + d * (float)isum;
    }
    return sum;
}
