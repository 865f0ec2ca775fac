/* AVX2 + FMA (+ F16C) kernels of the runtime's attention (called only when the encodings' SIMD level,
 * qp_encoding_simd_level(), is not "scalar"). */
#include <immintrin.h>

#include "runtime/runtime_internal.h"

void qp_attn_accum_avx2(float *o, const float *v, float a, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(v + i), _mm256_loadu_ps(o + i)));
    for (; i < n; i++) o[i] = __builtin_fmaf(a, v[i], o[i]);
}

void qp_attn_accum_f16_avx2(float *o, const uint16_t *v, float a, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 vf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(v + i)));
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(av, vf, _mm256_loadu_ps(o + i)));
    }
    for (; i < n; i++) o[i] = __builtin_fmaf(a, _cvtsh_ss(v[i]), o[i]);
}
