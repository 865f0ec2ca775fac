/* AVX2 widening of one Q4_K / Q6_K block into 256 floats, bit-identical to qp_q4k_dequantize /
 * qp_q6k_dequantize (the same float operations per element, never contracted). Included only
 * by the *_avx2.c / *_avx512.c files of the k-quant dots. */
#ifndef QP_KQUANTS_DEQUANT_SIMD_H
#define QP_KQUANTS_DEQUANT_SIMD_H
#include <immintrin.h>

#include "encodings/encodings_internal.h"

static inline void qp_kq_scale_min(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

/* y[i] = d1 * q - m1 per 32-element half (product rounded, then the subtraction) */
static inline void qp_q4k_block_widen(const uint8_t *b, float *y) {
    const float d = qp_fp16_to_fp32(qp_load_u16le(b));
    const float min = qp_fp16_to_fp32(qp_load_u16le(b + 2));
    const uint8_t *scales = b + 4, *q = b + 16;
    const __m256i low = _mm256_set1_epi32(0xF);
    for (int j = 0; j < 4; j++, q += 32, y += 64) {
        int sc, m;
        qp_kq_scale_min(2 * j, scales, &sc, &m);
        const __m256 d1 = _mm256_set1_ps(d * (float)sc), m1 = _mm256_set1_ps(min * (float)m);
        qp_kq_scale_min(2 * j + 1, scales, &sc, &m);
        const __m256 d2 = _mm256_set1_ps(d * (float)sc), m2 = _mm256_set1_ps(min * (float)m);
        for (int g = 0; g < 4; g++) {
            __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(q + 8 * g)));
            __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(u, low));
            __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(u, 4));
            _mm256_storeu_ps(y + 8 * g, _mm256_sub_ps(_mm256_mul_ps(d1, lo), m1));
            _mm256_storeu_ps(y + 32 + 8 * g, _mm256_sub_ps(_mm256_mul_ps(d2, hi), m2));
        }
    }
}

/* y = (d * scale) * q, q the 6-bit level - 32 */
static inline void qp_q6k_block_widen(const uint8_t *b, float *y) {
    const float d = qp_fp16_to_fp32(qp_load_u16le(b + 208));
    const uint8_t *ql = b, *qh = b + 128, *scb = b + 192;
    const __m256i m4 = _mm256_set1_epi32(0xF), m2 = _mm256_set1_epi32(3), c32 = _mm256_set1_epi32(32);
    for (int k = 0; k < 2; k++, ql += 64, qh += 32, scb += 8, y += 128) {
        for (int l = 0; l < 32; l += 8) {
            const int is = l / 16;
            __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(ql + l)));
            __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(ql + 32 + l)));
            __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qh + l)));
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(a, m4),
                                         _mm256_slli_epi32(_mm256_and_si256(h, m2), 4));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(c, m4),
                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), m2), 4));
            __m256i q3 = _mm256_or_si256(_mm256_srli_epi32(a, 4),
                                         _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), m2), 4));
            __m256i q4 = _mm256_or_si256(_mm256_srli_epi32(c, 4),
                                         _mm256_slli_epi32(_mm256_srli_epi32(h, 6), 4));
            const __m256 s1 = _mm256_set1_ps(d * (float)(int8_t)scb[is + 0]);
            const __m256 s2 = _mm256_set1_ps(d * (float)(int8_t)scb[is + 2]);
            const __m256 s3 = _mm256_set1_ps(d * (float)(int8_t)scb[is + 4]);
            const __m256 s4 = _mm256_set1_ps(d * (float)(int8_t)scb[is + 6]);
            _mm256_storeu_ps(y + l, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(_mm256_sub_epi32(q1, c32))));
            _mm256_storeu_ps(y + 32 + l, _mm256_mul_ps(s2, _mm256_cvtepi32_ps(_mm256_sub_epi32(q2, c32))));
            _mm256_storeu_ps(y + 64 + l, _mm256_mul_ps(s3, _mm256_cvtepi32_ps(_mm256_sub_epi32(q3, c32))));
            _mm256_storeu_ps(y + 96 + l, _mm256_mul_ps(s4, _mm256_cvtepi32_ps(_mm256_sub_epi32(q4, c32))));
        }
    }
}
#endif
