/* AVX2 Q4_0 / Q5_0 / Q8_0 quantizers (encodings/enc_legacy.c is the reference; bytes equal
 * llama.cpp's quantize_row_*_ref, tests/peer/test_enc_vs_ggml.c). One 32-block at a time, four
 * 8-float vectors; every element goes through the reference's IEEE operations (x * id, + 8.5f /
 * 16.5f, one rounding each) and the conversions become exact vector equivalents:
 *   - the block's max |x| is order-independent; maxps(|x|, acc) skips NaN as the reference's
 *     `amax < fabsf(v)` does; the signed max is x at the first index with |x| == amax (0 when
 *     amax is 0), exactly the reference's strict-< scan;
 *   - (int8_t)(float) truncation = cvttps where -128 < v < 128, else 0 (trunc_i8);
 *   - roundf (half away from zero) = trunc(v) + (|v - trunc(v)| >= 0.5 ? sign : 0) (v - trunc(v)
 *     is exact); Q8_0 blocks holding a NaN go to the reference (its QP_MAX scan is order-bound). */
#include <immintrin.h>
#include <string.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

#define QK 32

typedef __m256 V;
typedef __m256i VI;

static inline V vabs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
static inline float hmax8(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* the reference's absmax_signed: value of the first element with the largest |x| (NaN skipped) */
static inline float signed_max(const V *v, const float *x) {
    V m = _mm256_setzero_ps();
    for (int g = 0; g < 4; g++) m = _mm256_max_ps(vabs(v[g]), m); /* NaN in |v| -> keeps m */
    const float amax = hmax8(m);
    if (amax == 0.0f) return 0.0f;
    const V va = _mm256_set1_ps(amax);
    uint32_t eq = 0;
    for (int g = 0; g < 4; g++)
        eq |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(vabs(v[g]), va, _CMP_EQ_OQ)) << (8 * g);
    return x[__builtin_ctz(eq)];
}

/* (int)(int8_t)(int)v for -128 < v < 128, else 0 */
static inline VI trunc_i8(V v) {
    const V ok = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-128.0f), _CMP_GT_OQ),
                               _mm256_cmp_ps(v, _mm256_set1_ps(128.0f), _CMP_LT_OQ));
    return _mm256_and_si256(_mm256_cvttps_epi32(v), _mm256_castps_si256(ok));
}

/* 2 x 8 int32 (0..255) -> 16 bytes in order */
static inline __m128i pack16(VI a, VI b) {
    const __m128i lo = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    const __m128i hi = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    return _mm_packus_epi16(lo, hi);
}

/* Q4_0 / Q5_0 block start: d = signed max / dmax stored as f16 at y, then the 4 vectors of levels
 * xi[g] = min(nmax, trunc_i8(x * id + bias)), id = 1/d (0 when d is 0) */
static inline void block_levels(const float *x, uint8_t *y, float dmax, float bias, int nmax, VI *xi) {
    V v[4];
    for (int g = 0; g < 4; g++) v[g] = _mm256_loadu_ps(x + 8 * g);
    const float d = signed_max(v, x) / dmax;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    qp_store_u16le(y, qp_fp32_to_fp16(d));
    const V vid = _mm256_set1_ps(id), vb = _mm256_set1_ps(bias);
    for (int g = 0; g < 4; g++)
        xi[g] = _mm256_min_epi32(_mm256_set1_epi32(nmax), trunc_i8(_mm256_add_ps(_mm256_mul_ps(v[g], vid), vb)));
}

void qp_q4_0_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const VI ff = _mm256_set1_epi32(0xff);
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += 18) {
        VI xi[4];
        block_levels(x, y, -8.0f, 8.5f, 15, xi);
        /* byte j = (uint8)(xi[j] | xi[j + 16] << 4) */
        const VI b0 = _mm256_and_si256(_mm256_or_si256(xi[0], _mm256_slli_epi32(xi[2], 4)), ff);
        const VI b1 = _mm256_and_si256(_mm256_or_si256(xi[1], _mm256_slli_epi32(xi[3], 4)), ff);
        _mm_storeu_si128((__m128i *)(y + 2), pack16(b0, b1));
    }
}

void qp_q5_0_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const VI f = _mm256_set1_epi32(0x0f);
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += 22) {
        VI xi[4];
        block_levels(x, y, -16.0f, 16.5f, 31, xi);
        uint32_t qh = 0;
        for (int g = 0; g < 4; g++) /* bit 4 of element j -> bit j of qh */
            qh |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(xi[g], 27))) << (8 * g);
        const VI b0 = _mm256_or_si256(_mm256_and_si256(xi[0], f), _mm256_slli_epi32(_mm256_and_si256(xi[2], f), 4));
        const VI b1 = _mm256_or_si256(_mm256_and_si256(xi[1], f), _mm256_slli_epi32(_mm256_and_si256(xi[3], f), 4));
        qp_store_u32le(y + 2, qh);
        _mm_storeu_si128((__m128i *)(y + 6), pack16(b0, b1));
    }
}

void qp_q8_0_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK; i++, x += QK, y += 34) {
        V v[4];
        V m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int g = 0; g < 4; g++) {
            v[g] = _mm256_loadu_ps(x + 8 * g);
            m = _mm256_max_ps(m, vabs(v[g]));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[g], v[g], _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(nan)) {
            qp_q8_0_quantize_ref(x, y, QK);
            continue;
        }
        const float d = hmax8(m) / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y, qp_fp32_to_fp16(d));
        const V vid = _mm256_set1_ps(id);
        VI q[4];
        for (int g = 0; g < 4; g++) {
            const V x0 = _mm256_mul_ps(v[g], vid);
            const V t = _mm256_round_ps(x0, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const V half = _mm256_cmp_ps(vabs(_mm256_sub_ps(x0, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
            const V sgn1 = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(x0, _mm256_set1_ps(-0.0f)));
            const V r = _mm256_add_ps(t, _mm256_and_ps(half, sgn1));
            const V ok = _mm256_and_ps(_mm256_cmp_ps(r, _mm256_set1_ps(-128.0f), _CMP_GE_OQ),
                                       _mm256_cmp_ps(r, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
            q[g] = _mm256_and_si256(_mm256_cvttps_epi32(r), _mm256_castps_si256(ok));
        }
        const VI ab = _mm256_packs_epi32(q[0], q[1]), cd = _mm256_packs_epi32(q[2], q[3]);
        const VI b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((VI *)(y + 2), b);
    }
}
