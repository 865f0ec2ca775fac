/* AVX2 + FMA + F16C dot of Q8_0 rows against F32 activations. Each 32-element block is widened
 * exactly as qp_q8_0_dequantize does ((float)q * d, one rounding; d widened by F16C, exact for
 * every finite scale) and summed with the level-1 structure of encodings/plain_kernels.h
 * (block k is the k-th 32-element step), so the result equals the F32 dot of the dequantized
 * row bit for bit. */
#include <immintrin.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

static inline float reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
    return _mm256_cvtss_f32(v);
}

float qp_q8_0_vec_dot_avx2(const void *w, const float *x, int64_t n) {
    const uint8_t *b = w;
    __m256 a[4];
    for (int j = 0; j < 4; j++) a[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 32, b += 34) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(qp_load_u16le(b)));
        for (int j = 0; j < 4; j++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(b + 2 + 8 * j));
            __m256 wv = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
            a[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i + 8 * j), a[j]);
        }
    }
    return reduce4(a[0], a[1], a[2], a[3]);
}
