/* AVX-512 Q4_K / Q6_K dots against F32 activations: blocks widened with SIMD
 * (kquants_dequant_simd.h, the dequantize bits) and summed with the level-2 structure of
 * encodings/plain_kernels.h, so a dot equals the F32 dot of the dequantized row bit for bit. */
#include "encodings/kquants_dequant_simd.h"
#include "encodings/simd_kernels.h"

static inline float reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 v = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
    return _mm512_cvtss_f32(v);
}

static inline float dot_blocks(int q6, const uint8_t *w, const float *x, int64_t n) {
    float t[256];
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 256, x += 256) {
        if (q6) qp_q6k_block_widen(w + (size_t)(i / 256) * 210, t);
        else qp_q4k_block_widen(w + (size_t)(i / 256) * 144, t);
        for (int k = 0; k < 256; k += 64) {
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(t + k), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(t + k + 16), _mm512_loadu_ps(x + k + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(t + k + 32), _mm512_loadu_ps(x + k + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(t + k + 48), _mm512_loadu_ps(x + k + 48), a3);
        }
    }
    return reduce4(a0, a1, a2, a3);
}

float qp_q4k_vec_dot_f32_avx512(const void *w, const float *x, int64_t n) {
    return dot_blocks(0, w, x, n);
}
float qp_q6k_vec_dot_f32_avx512(const void *w, const float *x, int64_t n) {
    return dot_blocks(1, w, x, n);
}
