/* AVX-512 dot of Q8_0 rows against F32 activations: blocks widened exactly as
 * qp_q8_0_dequantize does and summed with the level-2 structure of encodings/plain_kernels.h
 * (64-element steps = two blocks; an odd last block's halves go into a0 and a1), so the result
 * equals the F32 dot of the dequantized row bit for bit. */
#include <immintrin.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

static inline float reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 v = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
    return _mm512_cvtss_f32(v);
}

/* 16 widened elements of the block at b (half h) */
static inline __m512 half16(const uint8_t *b, int h, __m512 d) {
    __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2 + 16 * h));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
}

float qp_q8_0_vec_dot_avx512(const void *w, const float *x, int64_t n) {
    const uint8_t *b = w;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64, b += 68) {
        const __m512 d0 = _mm512_set1_ps(_cvtsh_ss(qp_load_u16le(b)));
        const __m512 d1 = _mm512_set1_ps(_cvtsh_ss(qp_load_u16le(b + 34)));
        a0 = _mm512_fmadd_ps(half16(b, 0, d0), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(half16(b, 1, d0), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(half16(b + 34, 0, d1), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(half16(b + 34, 1, d1), _mm512_loadu_ps(x + i + 48), a3);
    }
    if (i < n) { /* one block left (n is a multiple of 32) */
        const __m512 d0 = _mm512_set1_ps(_cvtsh_ss(qp_load_u16le(b)));
        a0 = _mm512_fmadd_ps(half16(b, 0, d0), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(half16(b, 1, d0), _mm512_loadu_ps(x + i + 16), a1);
    }
    return reduce4(a0, a1, a2, a3);
}
