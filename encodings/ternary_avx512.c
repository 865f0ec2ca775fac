/* AVX-512 kernels of the ternary quantizers (reference: encodings/enc_ternary.c; the rounding
 * rules and fallbacks are those of encodings/ternary_avx2.c). Compares go to mask registers and
 * codes are built directly as bytes (masked byte constants, 2-bit fields OR-ed or base-3 digits
 * added), so no int32 packing. Scales through F16C: _cvtss_sh equals qp_fp32_to_fp16 for every
 * non-negative non-NaN float (checked exhaustively when this kernel was written; absmax scales are
 * never negative, and NaN blocks go to the reference). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"
#include "encodings/ternary_i8_simd.h"

#define QK_K 256
#define AHEAD 4096 /* bytes: keeps enough misses in flight when the input streams from memory */

/* software prefetch `ahead` bytes past p (no fault, no pointer arithmetic past the buffer) */
static inline void prefetch_ahead(const void *p, size_t ahead) {
    _mm_prefetch((const char *)((uintptr_t)p + ahead), _MM_HINT_T0);
}

typedef __m512 V;

/* max |x| of 256 floats (a tree of independent maxima); true when one is NaN */
static inline bool block_amax256(const float *x, float *amax) {
    for (int i = 0; i < 16; i++) prefetch_ahead(x + 16 * i, AHEAD);
    V m[16];
    __mmask16 nan = 0;
    for (int i = 0; i < 16; i++) m[i] = _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i));
    for (int i = 0; i < 16; i += 2) nan |= _mm512_cmp_ps_mask(m[i], m[i + 1], _CMP_UNORD_Q);
    for (int w = 8; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) m[i] = _mm512_max_ps(m[i], m[i + w]);
    *amax = _mm512_reduce_max_ps(m[0]);
    return nan != 0;
}
static inline uint16_t f16_nonneg(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

/* TQ rule on 32 floats: v = x * id; pos = v >= 0.5, zero = -0.5 < v < 0.5 */
static inline void tq_masks32(const float *x, V id, __mmask32 *pos, __mmask32 *zero) {
    const V v0 = _mm512_mul_ps(_mm512_loadu_ps(x), id), v1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), id);
    const __mmask16 g0 = _mm512_cmp_ps_mask(v0, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __mmask16 g1 = _mm512_cmp_ps_mask(v1, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __mmask16 l0 = _mm512_cmp_ps_mask(v0, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
    const __mmask16 l1 = _mm512_cmp_ps_mask(v1, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
    *pos = (__mmask32)((uint32_t)g0 | (uint32_t)g1 << 16);
    *zero = (__mmask32)~((uint32_t)(g0 | l0) | (uint32_t)(g1 | l1) << 16);
}
static inline void tq_masks16(const float *x, V id, __mmask16 *pos, __mmask16 *zero) {
    const V v = _mm512_mul_ps(_mm512_loadu_ps(x), id);
    const __mmask16 g = _mm512_cmp_ps_mask(v, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __mmask16 l = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-0.5f), _CMP_LE_OQ);
    *pos = g;
    *zero = (__mmask16)~(g | l);
}

void qp_tq2_0_quantize_avx512(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 66) {
        float amax;
        const bool nan = block_amax256(x, &amax);
        const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
        if (nan || isinf(id)) {
            qp_tq2_0_quantize_ref(x, y, QK_K);
            continue;
        }
        qp_store_u16le(y + 64, f16_nonneg(amax));
        const V vid = _mm512_set1_ps(id);
        for (int h = 0; h < 2; h++) {
            __m256i acc = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __mmask32 pos, zero;
                tq_masks32(x + 128 * h + 32 * k, vid, &pos, &zero);
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8(zero, (char)(1 << (2 * k))));
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8(pos, (char)(2 << (2 * k))));
            }
            _mm256_storeu_si256((__m256i *)(y + 32 * h), acc);
        }
    }
}

/* ceil(q * 256 / 243) = q + floor((13q + 242) / 243) = q + (mulhi(13q + 242, 4316) >> 4), q <= 242
 * (all 243 values checked) */
static inline __m512i tq1_div(__m512i q16) {
    const __m512i num = _mm512_add_epi16(_mm512_mullo_epi16(q16, _mm512_set1_epi16(13)), _mm512_set1_epi16(242));
    return _mm512_add_epi16(q16, _mm512_srli_epi16(_mm512_mulhi_epu16(num, _mm512_set1_epi16(4316)), 4));
}
void qp_tq1_0_quantize_avx512(const float *x, void *vy, int64_t n) {
    static const char w[5] = {81, 27, 9, 3, 1};
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 54) {
        float amax;
        const bool nan = block_amax256(x, &amax);
        const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
        if (nan || isinf(id)) {
            qp_tq1_0_quantize_ref(x, y, QK_K);
            continue;
        }
        qp_store_u16le(y + 52, f16_nonneg(amax));
        const V vid = _mm512_set1_ps(id);
        __m256i q = _mm256_setzero_si256(); /* sum of t_k * 3^(4-k) <= 242: fits a byte */
        for (int k = 0; k < 5; k++) {
            __mmask32 pos, zero;
            tq_masks32(x + 32 * k, vid, &pos, &zero);
            q = _mm256_add_epi8(q, _mm256_maskz_set1_epi8(zero, w[k]));
            q = _mm256_add_epi8(q, _mm256_maskz_set1_epi8(pos, (char)(2 * w[k])));
        }
        _mm256_storeu_si256((__m256i *)y, _mm512_cvtepi16_epi8(tq1_div(_mm512_cvtepu8_epi16(q))));
        __m128i q2 = _mm_setzero_si128();
        for (int k = 0; k < 5; k++) {
            __mmask16 pos, zero;
            tq_masks16(x + 160 + 16 * k, vid, &pos, &zero);
            q2 = _mm_add_epi8(q2, _mm_maskz_set1_epi8(zero, w[k]));
            q2 = _mm_add_epi8(q2, _mm_maskz_set1_epi8(pos, (char)(2 * w[k])));
        }
        const __m512i d2 = tq1_div(_mm512_castsi256_si512(_mm256_cvtepu8_epi16(q2)));
        _mm_storeu_si128((__m128i *)(y + 32), _mm256_cvtepi16_epi8(_mm512_castsi512_si256(d2)));
        for (int j = 0; j < 4; j++) {
            unsigned qq = 0;
            for (int k = 0; k < 4; k++) {
                const float v = x[240 + j + 4 * k] * id;
                qq = qq * 3 + (v >= 0.5f ? 2u : v <= -0.5f ? 0u : 1u);
            }
            qq *= 3;
            y[48 + j] = (uint8_t)((qq * 256 + 242) / 243);
        }
    }
}

/* 2-bit codes as bytes (one per element, consecutive) -> packed LSB first: 64 codes -> 16 bytes */
static inline __m128i pack_consec64(__m512i c) {
    const __m512i p = _mm512_maddubs_epi16(c, _mm512_set1_epi16(0x0401));      /* c0 + 4 c1 */
    const __m512i q = _mm512_madd_epi16(p, _mm512_set1_epi32(0x00100001));      /* + 16 (c2 + 4 c3) */
    return _mm512_cvtepi32_epi8(q);
}
static inline __m128i pack_consec32(__m256i c) {
    const __m256i p = _mm256_maddubs_epi16(c, _mm256_set1_epi16(0x0401));
    const __m256i q = _mm256_madd_epi16(p, _mm256_set1_epi32(0x00100001));
    return _mm256_cvtepi32_epi8(q);
}

void qp_qk256_quantize_avx512(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const V z = _mm512_setzero_ps(), m15 = _mm512_set1_ps(-1.5f), p15 = _mm512_set1_ps(1.5f);
    for (int64_t i = 0; i + 64 <= n; i += 64, x += 64, y += 16) {
        uint64_t neg = 0, vneg = 0, vpos = 0;
        for (int g = 0; g < 4; g++) {
            prefetch_ahead(x + 16 * g, AHEAD);
            const V v = _mm512_loadu_ps(x + 16 * g);
            neg |= (uint64_t)_mm512_cmp_ps_mask(v, z, _CMP_LT_OQ) << (16 * g);
            vneg |= (uint64_t)_mm512_cmp_ps_mask(v, m15, _CMP_LT_OQ) << (16 * g);
            vpos |= (uint64_t)_mm512_cmp_ps_mask(v, p15, _CMP_GT_OQ) << (16 * g);
        }
        const __mmask64 b0 = (neg & ~vneg) | vpos, b1 = ~neg;
        const __m512i c = _mm512_or_si512(_mm512_maskz_set1_epi8(b0, 1), _mm512_maskz_set1_epi8(b1, 2));
        _mm_storeu_si128((__m128i *)y, pack_consec64(c));
    }
}

void qp_bitnet32f16_quantize_avx512(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 10) {
        prefetch_ahead(x, AHEAD);
        prefetch_ahead(x + 16, AHEAD);
        const V v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        if (_mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q)) {
            qp_bitnet32f16_quantize_ref(x, y, 32);
            continue;
        }
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const V s = _mm512_set1_ps(amax > 0.0f ? 1.0f / amax : 0.0f);
        const V a0 = _mm512_mul_ps(v0, s), a1 = _mm512_mul_ps(v1, s);
        const uint32_t gt = (uint32_t)_mm512_cmp_ps_mask(a0, _mm512_set1_ps(0.5f), _CMP_GT_OQ) |
                            (uint32_t)_mm512_cmp_ps_mask(a1, _mm512_set1_ps(0.5f), _CMP_GT_OQ) << 16;
        const uint32_t lt = (uint32_t)_mm512_cmp_ps_mask(a0, _mm512_set1_ps(-0.5f), _CMP_LT_OQ) |
                            (uint32_t)_mm512_cmp_ps_mask(a1, _mm512_set1_ps(-0.5f), _CMP_LT_OQ) << 16;
        /* code = v + 2: -1 -> 1, 0 -> 2, +1 -> 3 */
        const __m256i c = _mm256_or_si256(_mm256_maskz_set1_epi8((__mmask32)(gt | lt), 1),
                                          _mm256_maskz_set1_epi8((__mmask32)~lt, 2));
        _mm_storel_epi64((__m128i *)y, pack_consec32(c));
        qp_store_u16le(y + 8, f16_nonneg(amax));
    }
}

/* I2_S codes, see qp_i2s_codes_avx2: byte p = c[p] << 6 | c[q+p] << 4 | c[2q+p] << 2 | c[3q+p] */
static inline void i2s_masks16(const float *x, int mode, V s, __mmask16 *one, __mmask16 *two) {
    prefetch_ahead(x, AHEAD);
    const V v = _mm512_loadu_ps(x);
    if (mode) { /* ternary: |x| <= 1e-6f (i.e. (double)|x| < 1e-6) -> 1, x > 0 -> 2, else 0 */
        const __mmask16 small = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(1e-6f), _CMP_LE_OQ);
        *one = small;
        *two = (__mmask16)(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ) & ~small);
    } else { /* clamp(rint(x * s)) + 1 */
        const V a = _mm512_mul_ps(v, s);
        const __mmask16 gt = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_GT_OQ);
        const __mmask16 lt = _mm512_cmp_ps_mask(a, _mm512_set1_ps(-0.5f), _CMP_LT_OQ);
        *one = (__mmask16)~(gt | lt);
        *two = gt;
    }
}
void qp_i2s_codes_avx512(const float *x, int64_t nb, int be, int mode, float s, uint8_t *y) {
    const V vs = _mm512_set1_ps(s);
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        if (q == 32) {
            __m256i acc = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __mmask16 o0, t0, o1, t1;
                i2s_masks16(x + 32 * k, mode, vs, &o0, &t0);
                i2s_masks16(x + 32 * k + 16, mode, vs, &o1, &t1);
                const int sh = 6 - 2 * k;
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)((uint32_t)o0 | (uint32_t)o1 << 16), (char)(1 << sh)));
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)((uint32_t)t0 | (uint32_t)t1 << 16), (char)(2 << sh)));
            }
            _mm256_storeu_si256((__m256i *)y, acc);
        } else {
            __m128i acc = _mm_setzero_si128();
            for (int k = 0; k < 4; k++) {
                __mmask16 o, t;
                i2s_masks16(x + 16 * k, mode, vs, &o, &t);
                const int sh = 6 - 2 * k;
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8(o, (char)(1 << sh)));
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8(t, (char)(2 << sh)));
            }
            _mm_storeu_si128((__m128i *)y, acc);
        }
    }
}

/* I2_S one pass over ternary input (qp_i2s_ternary_codes_avx2): for x = +-0 or +-f, code 1 when
 * x == 0 or f <= 1e-6f (tiny), else 2 when x > 0, 0 when x < 0; ok &= x == 0 | |x| == f */
static inline void ter1_masks16(const float *x, V vf, __mmask16 tiny, __mmask16 *ok, __mmask16 *one,
                                __mmask16 *two) {
    prefetch_ahead(x, AHEAD);
    const V v = _mm512_loadu_ps(x);
    const __mmask16 zr = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ);
    *ok &= (__mmask16)(zr | _mm512_cmp_ps_mask(_mm512_abs_ps(v), vf, _CMP_EQ_OQ));
    *one = (__mmask16)(zr | tiny);
    *two = (__mmask16)(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ) & ~tiny);
}
bool qp_i2s_ternary_codes_avx512(const float *x, int64_t nb, int be, float f, uint8_t *y) {
    const V vf = _mm512_set1_ps(f);
    const __mmask16 tiny = f <= 1e-6f ? 0xFFFF : 0;
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        __mmask16 ok = 0xFFFF;
        if (q == 32) {
            __m256i acc = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __mmask16 o0, t0, o1, t1;
                ter1_masks16(x + 32 * k, vf, tiny, &ok, &o0, &t0);
                ter1_masks16(x + 32 * k + 16, vf, tiny, &ok, &o1, &t1);
                const int sh = 6 - 2 * k;
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)((uint32_t)o0 | (uint32_t)o1 << 16), (char)(1 << sh)));
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)((uint32_t)t0 | (uint32_t)t1 << 16), (char)(2 << sh)));
            }
            _mm256_storeu_si256((__m256i *)y, acc);
        } else {
            __m128i acc = _mm_setzero_si128();
            for (int k = 0; k < 4; k++) {
                __mmask16 o, t;
                ter1_masks16(x + 16 * k, vf, tiny, &ok, &o, &t);
                const int sh = 6 - 2 * k;
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8(o, (char)(1 << sh)));
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8(t, (char)(2 << sh)));
            }
            _mm_storeu_si128((__m128i *)y, acc);
        }
        if (ok != 0xFFFF) return false;
    }
    return true;
}

void qp_tern_levels_avx512(const float *x, int64_t n, float s, int8_t *q) {
    const V vs = _mm512_set1_ps(s);
    const __m128i m1 = _mm_set1_epi8(-1);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch_ahead(x + i, AHEAD);
        const V a = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
        const __mmask16 gt = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.5f), _CMP_GT_OQ);
        const __mmask16 lt = _mm512_cmp_ps_mask(a, _mm512_set1_ps(-0.5f), _CMP_LT_OQ);
        _mm_storeu_si128((__m128i *)(q + i), _mm_mask_blend_epi8(lt, _mm_maskz_set1_epi8(gt, 1), m1));
    }
    for (; i < n; i++) {
        const float v = x[i] * s;
        q[i] = (int8_t)(v > 0.5f ? 1 : v < -0.5f ? -1 : 0);
    }
}

/* qp_tern_stats_avx2 with 16 floats per step: lanes 0..7 in one double vector, 8..15 in another */
bool qp_tern_stats_avx512(const float *x, int64_t n, double *lanes, float *amax, float f, bool *nonter) {
    __m512d acc0 = _mm512_loadu_pd(lanes), acc1 = _mm512_loadu_pd(lanes + 8);
    V m0 = _mm512_set1_ps(*amax);
    __mmask16 nan = 0, bad = 0;
    const V vf = _mm512_set1_ps(f), z = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch_ahead(x + i, AHEAD);
        const V v = _mm512_loadu_ps(x + i);
        const V a = _mm512_abs_ps(v);
        m0 = _mm512_max_ps(m0, a);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        bad |= _mm512_cmp_ps_mask(a, vf, _CMP_NEQ_UQ) & _mm512_cmp_ps_mask(v, z, _CMP_NEQ_UQ);
        acc0 = _mm512_add_pd(acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
        acc1 = _mm512_add_pd(acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
    }
    _mm512_storeu_pd(lanes, acc0);
    _mm512_storeu_pd(lanes + 8, acc1);
    *amax = _mm512_reduce_max_ps(m0);
    if (bad) *nonter = true;
    return nan != 0;
}

/* ---- absmean in one pass (qp_tern_absmean_spec_avx2's contract) ------------------------------
 * The level comes from the same compare as the boundary: for s > 0, fl(x * s) = sign(x) fl(|x| * s)
 * and fl(a * s) is monotone in a, so with t = the smallest float a with fl(a * s) > 0.5 (the caller
 * passes both), clamp(rint(x * s), -1, 1) = |x| >= t ? (x < 0 ? -1 : +1) : 0 for every non-NaN x. */
static inline __mmask16 spec16_512(const float *x, V vt, __m512d *acc0, __m512d *acc1, V *lo, V *hi,
                                   __mmask16 *neg) {
    const V v = _mm512_loadu_ps(x), a = _mm512_abs_ps(v);
    *acc0 = _mm512_add_pd(*acc0, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
    *acc1 = _mm512_add_pd(*acc1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))));
    const __mmask16 ge = _mm512_cmp_ps_mask(a, vt, _CMP_GE_OQ);
    *hi = _mm512_mask_min_ps(*hi, ge, *hi, a);
    *lo = _mm512_mask_max_ps(*lo, (__mmask16)~ge, *lo, a); /* a NaN may land here: sum is NaN then */
    *neg = _mm512_movepi32_mask(_mm512_castps_si512(v));
    return ge;
}
static inline void spec_bounds_512(V lo, V hi, float *plo, float *phi) {
    *plo = QP_MAX(*plo, _mm512_reduce_max_ps(lo));
    const float h = _mm512_reduce_min_ps(hi);
    *phi = h < *phi ? h : *phi;
}
void qp_tern_absmean_spec_avx512(const float *x, int64_t n, double *lanes, float t, float *lo, float *hi,
                                 float s, int8_t *q) {
    (void)s;
    __m512d acc0 = _mm512_loadu_pd(lanes), acc1 = _mm512_loadu_pd(lanes + 8);
    const V vt = _mm512_set1_ps(t);
    V vlo = _mm512_setzero_ps(), vhi = _mm512_set1_ps(INFINITY);
    const __m128i one = _mm_set1_epi8(1), m1 = _mm_set1_epi8(-1);
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        prefetch_ahead(x + i, AHEAD);
        __mmask16 neg;
        const __mmask16 ge = spec16_512(x + i, vt, &acc0, &acc1, &vlo, &vhi, &neg);
        _mm_storeu_si128((__m128i *)(q + i), _mm_maskz_mov_epi8(ge, _mm_mask_blend_epi8(neg, one, m1)));
    }
    _mm512_storeu_pd(lanes, acc0);
    _mm512_storeu_pd(lanes + 8, acc1);
    spec_bounds_512(vlo, vhi, lo, hi);
}
void qp_i2s_absmean_spec_avx512(const float *x, int64_t nb, int be, double *lanes, float t, float *lo,
                                float *hi, float s, uint8_t *y) {
    (void)s;
    __m512d acc0 = _mm512_loadu_pd(lanes), acc1 = _mm512_loadu_pd(lanes + 8);
    const V vt = _mm512_set1_ps(t);
    V vlo = _mm512_setzero_ps(), vhi = _mm512_set1_ps(INFINITY);
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        /* code 1 for |x| < t, 2 for x >= t, 0 for x <= -t; element 32k + p (q = 32) or 16k + p
         * (q = 16) goes to byte p at shift 6 - 2k; steps of 16 in index order (the lane sums) */
        if (q == 32) {
            __m256i acc = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                __mmask16 n0, n1;
                prefetch_ahead(x + 32 * k, AHEAD);
                prefetch_ahead(x + 32 * k + 16, AHEAD);
                const __mmask16 g0 = spec16_512(x + 32 * k, vt, &acc0, &acc1, &vlo, &vhi, &n0);
                const __mmask16 g1 = spec16_512(x + 32 * k + 16, vt, &acc0, &acc1, &vlo, &vhi, &n1);
                const uint32_t g = (uint32_t)g0 | (uint32_t)g1 << 16, ng = (uint32_t)n0 | (uint32_t)n1 << 16;
                const int sh = 6 - 2 * k;
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)~g, (char)(1 << sh)));
                acc = _mm256_or_si256(acc, _mm256_maskz_set1_epi8((__mmask32)(g & ~ng), (char)(2 << sh)));
            }
            _mm256_storeu_si256((__m256i *)y, acc);
        } else {
            __m128i acc = _mm_setzero_si128();
            for (int k = 0; k < 4; k++) {
                __mmask16 ng;
                prefetch_ahead(x + 16 * k, AHEAD);
                const __mmask16 g = spec16_512(x + 16 * k, vt, &acc0, &acc1, &vlo, &vhi, &ng);
                const int sh = 6 - 2 * k;
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8((__mmask16)~g, (char)(1 << sh)));
                acc = _mm_or_si128(acc, _mm_maskz_set1_epi8((__mmask16)(g & ~ng), (char)(2 << sh)));
            }
            _mm_storeu_si128((__m128i *)y, acc);
        }
    }
    _mm512_storeu_pd(lanes, acc0);
    _mm512_storeu_pd(lanes + 8, acc1);
    spec_bounds_512(vlo, vhi, lo, hi);
}

/* ---- exact int8 dots (VNNI) ------------------------------------------------------------------- */
/* I2_S: encodings/ternary_i8_simd.h with vpdpbusd (u unsigned, the activations the signed side);
 * prompts in tiles of 4 rows x 4 tokens (16 accumulators of the 32 ymm registers). Called only
 * when cpuid reports AVX512_VNNI (simd.c). */
#define QP_VNNI __attribute__((target("avx512vnni")))
QP_VNNI static inline __m256i pair_vnni(__m256i acc, __m256i u, __m256i a) { return _mm256_dpbusd_epi32(acc, u, a); }
static inline __m256i widen_vnni(__m256i acc) { return acc; }
QP_I2S_I8_KERNELS(QP_VNNI, vnni, pair_vnni, widen_vnni, QP_I2S_FLUSH, 4, 4)

/* TQ2_0 (256 elements: qs[64], f16 d at 64; element 128h + 32k + m = (qs[32h + m] >> 2k) & 3):
 * the codes u are level + 1 (code 3 -> +2, as the scalar decoder), sum level a = sum u a - sum a
 * per block by vpdpbusd in four chains (and two for sum a), the block's exact integer then
 * scaled in double in block order as the reference (enc_ternary.c tq_vec_dot_i8). */
QP_VNNI double qp_tq2_0_vec_dot_i8_vnni(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi8(1);
    double s = 0.0;
    for (int64_t i = 0; i < n / QK_K; i++, x += QP_TQ2_0_BYTES, a += QK_K) {
        prefetch_ahead(x, QP_I2S_AHEAD);
        __m256i c[4], sa[2];
        for (int k = 0; k < 4; k++) c[k] = _mm256_setzero_si256();
        sa[0] = sa[1] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x + 32 * h));
            for (int k = 0; k < 4; k++) {
                const __m256i av = _mm256_loadu_si256((const __m256i *)(a + 128 * h + 32 * k));
                c[k] = _mm256_dpbusd_epi32(c[k], _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m3), av);
                sa[k & 1] = _mm256_dpbusd_epi32(sa[k & 1], ones, av);
            }
        }
        const __m256i u = _mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
        const int64_t isum = qp_i2s_hsum_epi32(_mm256_sub_epi32(u, _mm256_add_epi32(sa[0], sa[1])));
        s += (double)_cvtsh_ss(qp_load_u16le(x + QP_TQ2_0_OFF_D)) * (double)isum;
    }
    return s;
}

/* TQ2_0 rows x tokens (qp_vec_dot_i8_tile_fn): tiles of 2 rows x 4 tokens; per block each pair's
 * lanes (u a minus the token's sum a, both by vpdpbusd) are reduced for all 8 pairs at once
 * (hadd tree), and each row's 4 pairs take s += (double)d * (double)isum in double vectors: the
 * operations of the single dot in the same order, so every pair gets its bits. */
QP_VNNI static inline __m256i tq2_sums8(const __m256i c[8]) {
    const __m256i t0 = _mm256_hadd_epi32(c[0], c[1]), t1 = _mm256_hadd_epi32(c[2], c[3]);
    const __m256i t2 = _mm256_hadd_epi32(c[4], c[5]), t3 = _mm256_hadd_epi32(c[6], c[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}
QP_VNNI static void tq2_tile(const uint8_t *const wr[2], int nr, const int8_t *const xt[4], int nt, int64_t nb,
                            double *y, size_t ldy) {
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi8(1);
    __m256d s[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    for (int64_t i = 0; i < nb; i++) {
        __m256i c[8], sa[4];
        for (int j = 0; j < 8; j++) c[j] = _mm256_setzero_si256();
        for (int t = 0; t < 4; t++) sa[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(wr[0] + (size_t)i * QP_TQ2_0_BYTES + 32 * h));
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)(wr[1] + (size_t)i * QP_TQ2_0_BYTES + 32 * h));
            for (int k = 0; k < 4; k++) {
                const __m256i u0 = _mm256_and_si256(_mm256_srli_epi16(v0, 2 * k), m3);
                const __m256i u1 = _mm256_and_si256(_mm256_srli_epi16(v1, 2 * k), m3);
                for (int t = 0; t < 4; t++) {
                    const __m256i av = _mm256_loadu_si256((const __m256i *)(xt[t] + (size_t)i * QK_K + 128 * h + 32 * k));
                    sa[t] = _mm256_dpbusd_epi32(sa[t], ones, av);
                    c[t] = _mm256_dpbusd_epi32(c[t], u0, av);
                    c[4 + t] = _mm256_dpbusd_epi32(c[4 + t], u1, av);
                }
            }
        }
        for (int t = 0; t < 4; t++) {
            c[t] = _mm256_sub_epi32(c[t], sa[t]);
            c[4 + t] = _mm256_sub_epi32(c[4 + t], sa[t]);
        }
        const __m256i isum = tq2_sums8(c); /* row 0's 4 tokens, then row 1's */
        for (int r = 0; r < 2; r++) {
            const __m256d d = _mm256_set1_pd((double)_cvtsh_ss(qp_load_u16le(wr[r] + (size_t)i * QP_TQ2_0_BYTES + QP_TQ2_0_OFF_D)));
            const __m256d is = _mm256_cvtepi32_pd(r ? _mm256_extracti128_si256(isum, 1) : _mm256_castsi256_si128(isum));
            s[r] = _mm256_add_pd(s[r], _mm256_mul_pd(d, is));
        }
    }
    double out[2][4];
    _mm256_storeu_pd(out[0], s[0]);
    _mm256_storeu_pd(out[1], s[1]);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) y[(size_t)t * ldy + (size_t)r] = out[r][t];
}
QP_VNNI void qp_tq2_0_vec_dot_i8_tile_vnni(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                                           int64_t n_tok, int64_t n, double *y, size_t ldy) {
    const uint8_t *w8 = w;
    if (n_tok == 1) {
        for (int64_t r = 0; r < n_rows; r++) y[r] = qp_tq2_0_vec_dot_i8_vnni(w8 + (size_t)r * ldw, a, n);
        return;
    }
    for (int64_t r0 = 0; r0 < n_rows; r0 += 2) {
        const int nr = n_rows - r0 < 2 ? (int)(n_rows - r0) : 2;
        const uint8_t *wr[2] = {w8 + (size_t)r0 * ldw, w8 + (size_t)(r0 + nr - 1) * ldw};
        for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
            const int nt = n_tok - t0 < 4 ? (int)(n_tok - t0) : 4;
            const int8_t *xt[4];
            for (int t = 0; t < 4; t++) xt[t] = a + (size_t)(t0 + (t < nt ? t : nt - 1)) * lda;
            tq2_tile(wr, nr, xt, nt, n / QK_K, y + (size_t)t0 * ldy + (size_t)r0, ldy);
        }
    }
}
