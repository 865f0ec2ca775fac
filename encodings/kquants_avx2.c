/* AVX2 Q4_K / Q6_K quantizers (dots: kquants_dot_avx2.c): encodings/kquants_simd.h at 8 lanes
 * (8 consecutive 256-blocks per group; bytes equal quantize_row_q4_K_ref / q6_K_ref,
 * tests/peer/test_enc_vs_ggml.c checks against llama.cpp at this level); below are the AVX2
 * primitives it is written in. Lane masks are compare results in float vectors. */
#include <immintrin.h>
#include <string.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

#define LANES 8

typedef __m256 V;
typedef __m256i VI;
typedef __m256 M;

static inline V vzero(void) { return _mm256_setzero_ps(); }
static inline V vset(float f) { return _mm256_set1_ps(f); }
static inline V vload(const float *p) { return _mm256_loadu_ps(p); }
static inline void vstore(float *p, V v) { _mm256_storeu_ps(p, v); }
static inline V vadd(V a, V b) { return _mm256_add_ps(a, b); }
static inline V vsub(V a, V b) { return _mm256_sub_ps(a, b); }
static inline V vmul(V a, V b) { return _mm256_mul_ps(a, b); }
static inline V vdiv(V a, V b) { return _mm256_div_ps(a, b); }
static inline V vsqrt(V a) { return _mm256_sqrt_ps(a); }
static inline V vabs(V x) { return _mm256_andnot_ps(vset(-0.0f), x); }
static inline V vneg(V x) { return _mm256_xor_ps(vset(-0.0f), x); }
static inline V vcvt(VI i) { return _mm256_cvtepi32_ps(i); }
static inline V vblend(V a, V b, M m) { return _mm256_blendv_ps(a, b, m); } /* m ? b : a */
static inline VI iblend(VI a, VI b, M m) {
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), m));
}
#define LT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define GT(a, b) _mm256_cmp_ps(a, b, _CMP_GT_OQ)
#define EQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
static inline M mand(M a, M b) { return _mm256_and_ps(a, b); }
static inline bool mnone(M m) { return _mm256_movemask_ps(m) == 0; }
static inline bool mall(M m) { return _mm256_movemask_ps(m) == 0xFF; }
static inline VI izero(void) { return _mm256_setzero_si256(); }
static inline VI iset(int v) { return _mm256_set1_epi32(v); }
static inline VI iload(const int32_t *p) { return _mm256_loadu_si256((const VI *)p); }
static inline void istore(int32_t *p, VI v) { _mm256_storeu_si256((VI *)p, v); }
static inline VI iadd(VI a, VI b) { return _mm256_add_epi32(a, b); }
static inline VI imin(VI a, VI b) { return _mm256_min_epi32(a, b); }
static inline VI isext8(VI a) { return _mm256_srai_epi32(_mm256_slli_epi32(a, 24), 24); }
static inline VI vnearest(V f) {
    VI i = _mm256_castps_si256(_mm256_add_ps(f, vset(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(i, iset(0x7fffff)), iset(0x400000));
}
static inline VI vclamp(VI l, int lo, int hi) { return _mm256_max_epi32(iset(lo), imin(iset(hi), l)); }

#include "encodings/kquants_simd.h"

void qp_q4k_quantize_avx2(const float *x, void *y, int64_t n) { q4k_quantize_rows(x, y, n); }
void qp_q6k_quantize_avx2(const float *x, void *y, int64_t n) { q6k_quantize_rows(x, y, n); }
