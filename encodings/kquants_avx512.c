/* AVX-512 Q4_K / Q6_K quantizers: encodings/kquants_simd.h at 16 lanes (16 consecutive
 * 256-blocks per group), with mask registers for the lane masks. Same guarantee as the AVX2
 * kernels: the bytes equal quantize_row_q4_K_ref / q6_K_ref (peer test at every level). */
#include <immintrin.h>
#include <string.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

#define LANES 16

typedef __m512 V;
typedef __m512i VI;
typedef __mmask16 M;

static inline V vzero(void) { return _mm512_setzero_ps(); }
static inline V vset(float f) { return _mm512_set1_ps(f); }
static inline V vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, V v) { _mm512_storeu_ps(p, v); }
static inline V vadd(V a, V b) { return _mm512_add_ps(a, b); }
static inline V vsub(V a, V b) { return _mm512_sub_ps(a, b); }
static inline V vmul(V a, V b) { return _mm512_mul_ps(a, b); }
static inline V vdiv(V a, V b) { return _mm512_div_ps(a, b); }
static inline V vsqrt(V a) { return _mm512_sqrt_ps(a); }
static inline V vabs(V x) { return _mm512_abs_ps(x); }
static inline V vneg(V x) { return _mm512_xor_ps(vset(-0.0f), x); }
static inline V vcvt(VI i) { return _mm512_cvtepi32_ps(i); }
static inline V vblend(V a, V b, M m) { return _mm512_mask_blend_ps(m, a, b); } /* m ? b : a */
static inline VI iblend(VI a, VI b, M m) { return _mm512_mask_blend_epi32(m, a, b); }
#define LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define GT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)
#define EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
static inline M mand(M a, M b) { return (M)(a & b); }
static inline bool mnone(M m) { return m == 0; }
static inline bool mall(M m) { return m == 0xFFFF; }
static inline VI izero(void) { return _mm512_setzero_si512(); }
static inline VI iset(int v) { return _mm512_set1_epi32(v); }
static inline VI iload(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline void istore(int32_t *p, VI v) { _mm512_storeu_si512((void *)p, v); }
static inline VI iadd(VI a, VI b) { return _mm512_add_epi32(a, b); }
static inline VI imin(VI a, VI b) { return _mm512_min_epi32(a, b); }
static inline VI isext8(VI a) { return _mm512_srai_epi32(_mm512_slli_epi32(a, 24), 24); }
static inline VI vnearest(V f) {
    VI i = _mm512_castps_si512(_mm512_add_ps(f, vset(12582912.f)));
    return _mm512_sub_epi32(_mm512_and_si512(i, iset(0x7fffff)), iset(0x400000));
}
static inline VI vclamp(VI l, int lo, int hi) { return _mm512_max_epi32(iset(lo), imin(iset(hi), l)); }

#include "encodings/kquants_simd.h"

void qp_q4k_quantize_avx512(const float *x, void *y, int64_t n) { q4k_quantize_rows(x, y, n); }
void qp_q6k_quantize_avx512(const float *x, void *y, int64_t n) { q6k_quantize_rows(x, y, n); }
