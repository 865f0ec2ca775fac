/* AVX2 + FMA kernels of the runtime's attention (called only when the encodings' SIMD level,
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
