/* AVX2 + FMA Q4_K / Q6_K dots against F32 activations: each block widened with SIMD
 * (kquants_dequant_simd.h, the dequantize bits) and summed with the level-1 structure of
 * encodings/plain_kernels.h, so a dot equals the F32 dot of the dequantized row bit for bit
 * (and the runtime's batched path equals its decode path). */
#include "encodings/kquants_dequant_simd.h"
#include "encodings/simd_kernels.h"

static inline float reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
    return _mm256_cvtss_f32(v);
}

static inline float dot_blocks(int q6, const uint8_t *w, const float *x, int64_t n) {
    float t[256];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 256, x += 256) {
        if (q6) qp_q6k_block_widen(w + (size_t)(i / 256) * 210, t);
        else qp_q4k_block_widen(w + (size_t)(i / 256) * 144, t);
        for (int k = 0; k < 256; k += 32) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(t + k), _mm256_loadu_ps(x + k), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(t + k + 8), _mm256_loadu_ps(x + k + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(t + k + 16), _mm256_loadu_ps(x + k + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(t + k + 24), _mm256_loadu_ps(x + k + 24), a3);
        }
    }
    return reduce4(a0, a1, a2, a3);
}

float qp_q4k_vec_dot_f32_avx2(const void *w, const float *x, int64_t n) {
    return dot_blocks(0, w, x, n);
}
float qp_q6k_vec_dot_f32_avx2(const void *w, const float *x, int64_t n) {
    return dot_blocks(1, w, x, n);
}
