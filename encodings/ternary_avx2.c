/* AVX2 kernels of the ternary encodings (encodings/enc_ternary.c is the reference). Quantizers
 * vectorize inside a block: every element's value goes through the same IEEE operations as the
 * reference (x * id, one rounding), and the rounding rules become exact compares:
 *   lroundf(v) for |v| <= 1 + 2^-23 (TQ1_0 / TQ2_0: v = x * (1/absmax), id finite):
 *       +1 iff v >= 0.5, -1 iff v <= -0.5, else 0
 *   clamp(rint(v), -1, 1) (absmean, BitNet32F16, any v incl. +-inf; NaN -> 0):
 *       +1 iff v > 0.5, -1 iff v < -0.5, else 0
 * A block maximum is order-independent unless the block holds a NaN (the reference's
 * QP_MAX(a, b) = a > b ? a : b restarts after a NaN); such blocks (and TQ blocks whose 1/absmax
 * overflows) go to the scalar reference. Dots: exact integer sums (maddubs on unsigned code
 * offsets, minus bias * sum(a)), the per-block scale applied in block order as the reference. */
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

typedef __m256 V;
typedef __m256i VI;

static inline V vabs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
static inline VI mask_i(V m) { return _mm256_castps_si256(m); }
static inline float hmax8(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
static inline int32_t hsum_i32(VI v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
/* 4 x 8 int32 (each 0..255) -> 32 bytes in element order */
static inline VI pack_u8(VI a, VI b, VI c, VI d) {
    const VI ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* max |x| of cnt (multiple of 32) floats, four independent maxima; true when one is NaN */
static inline bool block_amax(const float *x, int cnt, float *amax) {
    V m[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    V nan = _mm256_setzero_ps();
    for (int i = 0; i < cnt; i += 32)
        for (int k = 0; k < 4; k++) {
            if (!(k & 1)) prefetch_ahead(x + i + 8 * k, AHEAD);
            const V v = _mm256_loadu_ps(x + i + 8 * k);
            m[k] = _mm256_max_ps(m[k], vabs(v));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
    *amax = hmax8(_mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
    return _mm256_movemask_ps(nan);
}

/* lroundf(x * id) + 1 for 8 elements (TQ rule above) */
static inline VI tq_code(const float *x, V id) {
    const V v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
    const VI ge = mask_i(_mm256_cmp_ps(v, _mm256_set1_ps(0.5f), _CMP_GE_OQ));
    const VI le = mask_i(_mm256_cmp_ps(v, _mm256_set1_ps(-0.5f), _CMP_LE_OQ));
    return _mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(1), ge), le);
}
/* clamp(rint(x * s), -1, 1) + 1 for 8 elements (absmean rule above) */
static inline VI rint_code(const float *x, V s) {
    const V v = _mm256_mul_ps(_mm256_loadu_ps(x), s);
    const VI gt = mask_i(_mm256_cmp_ps(v, _mm256_set1_ps(0.5f), _CMP_GT_OQ));
    const VI lt = mask_i(_mm256_cmp_ps(v, _mm256_set1_ps(-0.5f), _CMP_LT_OQ));
    return _mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(1), gt), lt);
}
/* I2_S ternary rule: (double)|x| < 1e-6 -> 1, x > 0 -> 2, else 0 (scale > 0 or all zero) */
static inline VI ter_code(const float *x) {
    const V v = _mm256_loadu_ps(x);
    /* (double)1e-6f < 1e-6, so (double)|x| < 1e-6 <=> |x| <= 1e-6f */
    const VI small = mask_i(_mm256_cmp_ps(vabs(v), _mm256_set1_ps(1e-6f), _CMP_LE_OQ));
    const VI pos = mask_i(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
    /* small -> 1; else pos -> 2, else 0 */
    const VI big = _mm256_andnot_si256(small, _mm256_and_si256(pos, _mm256_set1_epi32(2)));
    return _mm256_or_si256(big, _mm256_and_si256(small, _mm256_set1_epi32(1)));
}

/* TQ block start: amax = max |x|, stored as the f16 d at y + d_off, *id = 1/amax (0 when amax is 0).
 * A block holding a NaN, or whose 1/amax overflows, is quantized by ref instead: returns false. */
static inline bool tq_block_scale(const float *x, uint8_t *y, int d_off,
                                  void (*ref)(const float *, void *, int64_t), float *id) {
    float amax;
    const bool nan = block_amax(x, QK_K, &amax);
    *id = amax != 0.0f ? 1.0f / amax : 0.0f;
    if (nan || isinf(*id)) {
        ref(x, y, QK_K);
        return false;
    }
    qp_store_u16le(y + d_off, qp_fp32_to_fp16(amax));
    return true;
}

/* ---- TQ2_0 ------------------------------------------------------------------------------------ */
void qp_tq2_0_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 66) {
        float id;
        if (!tq_block_scale(x, y, 64, qp_tq2_0_quantize_ref, &id)) continue;
        const V vid = _mm256_set1_ps(id);
        for (int h = 0; h < 2; h++) {
            const float *xh = x + 128 * h;
            VI acc[4];
            for (int g = 0; g < 4; g++) {
                VI a = tq_code(xh + 8 * g, vid);
                for (int k = 1; k < 4; k++)
                    a = _mm256_or_si256(a, _mm256_slli_epi32(tq_code(xh + 32 * k + 8 * g, vid), 2 * k));
                acc[g] = a;
            }
            _mm256_storeu_si256((VI *)(y + 32 * h), pack_u8(acc[0], acc[1], acc[2], acc[3]));
        }
    }
}

/* ---- TQ1_0 ------------------------------------------------------------------------------------ */
/* 5 trits (first most significant) at stride `st` from x -> ceil(q * 256 / 243) */
static inline VI tq1_byte(const float *x, int st, V id) {
    VI q = tq_code(x, id);
    for (int k = 1; k < 5; k++) q = _mm256_add_epi32(_mm256_mullo_epi32(q, _mm256_set1_epi32(3)), tq_code(x + k * st, id));
    /* (q*256 + 242) / 243 = ((q*256 + 242) * 69043) >> 24 for q <= 242 (u32, exhaustively checked) */
    const VI num = _mm256_add_epi32(_mm256_slli_epi32(q, 8), _mm256_set1_epi32(242));
    return _mm256_srli_epi32(_mm256_mullo_epi32(num, _mm256_set1_epi32(69043)), 24);
}
void qp_tq1_0_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 54) {
        float id;
        if (!tq_block_scale(x, y, 52, qp_tq1_0_quantize_ref, &id)) continue;
        const V vid = _mm256_set1_ps(id);
        _mm256_storeu_si256((VI *)y, pack_u8(tq1_byte(x, 32, vid), tq1_byte(x + 8, 32, vid),
                                             tq1_byte(x + 16, 32, vid), tq1_byte(x + 24, 32, vid)));
        const VI z = _mm256_setzero_si256();
        const VI b16 = pack_u8(tq1_byte(x + 160, 16, vid), tq1_byte(x + 168, 16, vid), z, z);
        _mm_storeu_si128((__m128i *)(y + 32), _mm256_castsi256_si128(b16));
        for (int j = 0; j < 4; j++) {
            unsigned q = 0;
            for (int k = 0; k < 4; k++) {
                const float v = x[240 + j + 4 * k] * id;
                q = q * 3 + (v >= 0.5f ? 2u : v <= -0.5f ? 0u : 1u);
            }
            q *= 3;
            y[48 + j] = (uint8_t)((q * 256 + 242) / 243);
        }
    }
}

/* ---- 2-bit LSB-first consecutive codes (QK256, BitNet32F16) ----------------------------------- */
/* spread the 32 bits of m to the even bits of a u64 */
static inline uint64_t spread32(uint32_t m) {
    uint64_t v = m;
    v = (v | (v << 16)) & 0x0000FFFF0000FFFFull;
    v = (v | (v << 8)) & 0x00FF00FF00FF00FFull;
    v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0Full;
    v = (v | (v << 2)) & 0x3333333333333333ull;
    v = (v | (v << 1)) & 0x5555555555555555ull;
    return v;
}
static inline uint32_t mask32(V m0, V m1, V m2, V m3) {
    return (uint32_t)_mm256_movemask_ps(m0) | (uint32_t)_mm256_movemask_ps(m1) << 8 |
           (uint32_t)_mm256_movemask_ps(m2) << 16 | (uint32_t)_mm256_movemask_ps(m3) << 24;
}
static inline void store_u64le(uint8_t *p, uint64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* QK256 code: v < -1.5 -> 0, v < 0 -> 1, v > 1.5 -> 3, else 2 (NaN, +-0 -> 2) */
void qp_qk256_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const V z = _mm256_setzero_ps(), m15 = _mm256_set1_ps(-1.5f), p15 = _mm256_set1_ps(1.5f);
    for (int64_t i = 0; i + 32 <= n; i += 32, x += 32, y += 8) {
        V lt0[4], ltm[4], gtp[4];
        for (int g = 0; g < 4; g++) {
            if (!(g & 1)) prefetch_ahead(x + 8 * g, AHEAD);
            const V v = _mm256_loadu_ps(x + 8 * g);
            lt0[g] = _mm256_cmp_ps(v, z, _CMP_LT_OQ);
            ltm[g] = _mm256_cmp_ps(v, m15, _CMP_LT_OQ);
            gtp[g] = _mm256_cmp_ps(v, p15, _CMP_GT_OQ);
        }
        const uint32_t neg = mask32(lt0[0], lt0[1], lt0[2], lt0[3]);
        const uint32_t vneg = mask32(ltm[0], ltm[1], ltm[2], ltm[3]);
        const uint32_t vpos = mask32(gtp[0], gtp[1], gtp[2], gtp[3]);
        const uint32_t b1 = ~neg, b0 = (neg & ~vneg) | vpos;
        store_u64le(y, spread32(b0) | spread32(b1) << 1);
    }
}

/* BitNet32F16: v = clamp(rint(x / absmax)), code = v + 2 in {1, 2, 3} */
void qp_bitnet32f16_quantize_avx2(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 10) {
        float amax;
        if (block_amax(x, 32, &amax)) {
            qp_bitnet32f16_quantize_ref(x, y, 32);
            continue;
        }
        const V s = _mm256_set1_ps(amax > 0.0f ? 1.0f / amax : 0.0f);
        V gt[4], lt[4];
        for (int g = 0; g < 4; g++) {
            const V v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * g), s);
            gt[g] = _mm256_cmp_ps(v, _mm256_set1_ps(0.5f), _CMP_GT_OQ);
            lt[g] = _mm256_cmp_ps(v, _mm256_set1_ps(-0.5f), _CMP_LT_OQ);
        }
        const uint32_t p = mask32(gt[0], gt[1], gt[2], gt[3]), m = mask32(lt[0], lt[1], lt[2], lt[3]);
        store_u64le(y, spread32(p | m) | spread32(~m) << 1);
        qp_store_u16le(y + 8, qp_fp32_to_fp16(amax));
    }
}

/* ---- whole-tensor helpers (I2_S, absmean) ----------------------------------------------------- */
bool qp_tern_stats_avx2(const float *x, int64_t n, double *lanes, float *amax, float f, bool *nonter) {
    __m256d acc[4];
    for (int k = 0; k < 4; k++) acc[k] = _mm256_loadu_pd(lanes + 4 * k);
    V m = _mm256_set1_ps(*amax), nan = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    const V vf = _mm256_set1_ps(f), z = _mm256_setzero_ps();
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        prefetch_ahead(x + i, AHEAD);
        const V v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        const V a0 = vabs(v0), a1 = vabs(v1);
        m = _mm256_max_ps(m, _mm256_max_ps(a0, a1));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
        bad = _mm256_or_ps(bad, _mm256_and_ps(_mm256_cmp_ps(a0, vf, _CMP_NEQ_UQ), _mm256_cmp_ps(v0, z, _CMP_NEQ_UQ)));
        bad = _mm256_or_ps(bad, _mm256_and_ps(_mm256_cmp_ps(a1, vf, _CMP_NEQ_UQ), _mm256_cmp_ps(v1, z, _CMP_NEQ_UQ)));
        acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(a0)));
        acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(a0, 1)));
        acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(a1)));
        acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(a1, 1)));
    }
    for (int k = 0; k < 4; k++) _mm256_storeu_pd(lanes + 4 * k, acc[k]);
    *amax = hmax8(m);
    if (_mm256_movemask_ps(bad)) *nonter = true;
    return _mm256_movemask_ps(nan) != 0;
}

void qp_tern_levels_avx2(const float *x, int64_t n, float s, int8_t *q) {
    const V vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(x + i, AHEAD);
        prefetch_ahead(x + i + 16, AHEAD);
        const VI l = pack_u8(rint_code(x + i, vs), rint_code(x + i + 8, vs), rint_code(x + i + 16, vs),
                             rint_code(x + i + 24, vs));
        _mm256_storeu_si256((VI *)(q + i), _mm256_sub_epi8(l, _mm256_set1_epi8(1)));
    }
    for (; i < n; i++) {
        const float v = x[i] * s;
        q[i] = (int8_t)(v > 0.5f ? 1 : v < -0.5f ? -1 : 0);
    }
}

static inline VI i2s_code(const float *x, int mode, V s) { return mode ? ter_code(x) : rint_code(x, s); }

/* the q = be/4 code bytes of one I2_S block */
static inline void i2s_block(const float *x, int q, int mode, V vs, uint8_t *y) {
    for (int p = 0; p < q; p += 32) {
        VI acc[4];
        for (int g = 0; g < 4; g++) {
            const float *xp = x + p + 8 * g;
            VI a = _mm256_slli_epi32(i2s_code(xp, mode, vs), 6);
            a = _mm256_or_si256(a, _mm256_slli_epi32(i2s_code(xp + q, mode, vs), 4));
            a = _mm256_or_si256(a, _mm256_slli_epi32(i2s_code(xp + 2 * q, mode, vs), 2));
            acc[g] = _mm256_or_si256(a, i2s_code(xp + 3 * q, mode, vs));
            if (q == 16 && g == 1) break;
        }
        if (q == 16) {
            const VI z = _mm256_setzero_si256();
            _mm_storeu_si128((__m128i *)y, _mm256_castsi256_si128(pack_u8(acc[0], acc[1], z, z)));
        } else {
            _mm256_storeu_si256((VI *)(y + p), pack_u8(acc[0], acc[1], acc[2], acc[3]));
        }
    }
}
void qp_i2s_codes_avx2(const float *x, int64_t nb, int be, int mode, float s, uint8_t *y) {
    const V vs = _mm256_set1_ps(s);
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        for (int i = 0; i < be; i += 16) prefetch_ahead(x + i, AHEAD);
        i2s_block(x, q, mode, vs, y);
    }
}

/* ---- absmean in one pass (enc_ternary.c absmean_one_pass): sums + boundary + codes ------------ */
typedef struct {
    __m256d acc[4];
    V lo, hi, t;
} spec_state;
static inline void spec_load(spec_state *st, const double *lanes, float t, float lo, float hi) {
    for (int k = 0; k < 4; k++) st->acc[k] = _mm256_loadu_pd(lanes + 4 * k);
    st->lo = _mm256_set1_ps(lo), st->hi = _mm256_set1_ps(hi), st->t = _mm256_set1_ps(t);
}
static inline void spec_store(const spec_state *st, double *lanes, float *lo, float *hi) {
    for (int k = 0; k < 4; k++) _mm256_storeu_pd(lanes + 4 * k, st->acc[k]);
    *lo = hmax8(st->lo);
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(st->hi), _mm256_extractf128_ps(st->hi, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    *hi = _mm_cvtss_f32(m);
}
/* 16 elements in index order: lanes[i % 16] += |x|; lo = max |x| < t, hi = min |x| >= t (NaN in
 * neither: the caller falls back when the sum is not finite) */
static inline void spec16(spec_state *st, const float *x) {
    const V a0 = vabs(_mm256_loadu_ps(x)), a1 = vabs(_mm256_loadu_ps(x + 8));
    st->acc[0] = _mm256_add_pd(st->acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(a0)));
    st->acc[1] = _mm256_add_pd(st->acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(a0, 1)));
    st->acc[2] = _mm256_add_pd(st->acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(a1)));
    st->acc[3] = _mm256_add_pd(st->acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(a1, 1)));
    const V inf = _mm256_set1_ps(INFINITY), m1 = _mm256_set1_ps(-1.0f);
    st->hi = _mm256_min_ps(st->hi, _mm256_blendv_ps(inf, a0, _mm256_cmp_ps(a0, st->t, _CMP_GE_OQ)));
    st->hi = _mm256_min_ps(st->hi, _mm256_blendv_ps(inf, a1, _mm256_cmp_ps(a1, st->t, _CMP_GE_OQ)));
    st->lo = _mm256_max_ps(st->lo, _mm256_blendv_ps(m1, a0, _mm256_cmp_ps(a0, st->t, _CMP_LT_OQ)));
    st->lo = _mm256_max_ps(st->lo, _mm256_blendv_ps(m1, a1, _mm256_cmp_ps(a1, st->t, _CMP_LT_OQ)));
}
void qp_tern_absmean_spec_avx2(const float *x, int64_t n, double *lanes, float t, float *lo, float *hi,
                               float s, int8_t *q) {
    spec_state st;
    spec_load(&st, lanes, t, *lo, *hi);
    const V vs = _mm256_set1_ps(s);
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        prefetch_ahead(x + i, AHEAD);
        prefetch_ahead(x + i + 16, AHEAD);
        spec16(&st, x + i);
        spec16(&st, x + i + 16);
        const VI l = pack_u8(rint_code(x + i, vs), rint_code(x + i + 8, vs), rint_code(x + i + 16, vs),
                             rint_code(x + i + 24, vs));
        _mm256_storeu_si256((VI *)(q + i), _mm256_sub_epi8(l, _mm256_set1_epi8(1)));
    }
    spec_store(&st, lanes, lo, hi);
}
void qp_i2s_absmean_spec_avx2(const float *x, int64_t nb, int be, double *lanes, float t, float *lo,
                              float *hi, float s, uint8_t *y) {
    spec_state st;
    spec_load(&st, lanes, t, *lo, *hi);
    const V vs = _mm256_set1_ps(s);
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        for (int i = 0; i < be; i += 16) {
            prefetch_ahead(x + i, AHEAD);
            spec16(&st, x + i);
        }
        i2s_block(x, q, 0, vs, y);
    }
    spec_store(&st, lanes, lo, hi);
}

/* I2_S one pass over ternary input (qp_i2s_ternary_codes_avx2 in simd_kernels.h): 8 codes, and
 * ok &= (x == 0 | |x| == f). For x = +-0 or +-f the code is the reference's fabs((double)x) < 1e-6 ?
 * 1 : x*f > 0 ? 2 : 0, i.e. 1 when x == 0 or f <= 1e-6f (tiny = all ones), else 2 - 2 * signbit. */
static inline VI ter1_code(const float *x, V vf, VI tiny, V *ok) {
    const V v = _mm256_loadu_ps(x);
    const V zr = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ);
    *ok = _mm256_and_ps(*ok, _mm256_or_ps(zr, _mm256_cmp_ps(vabs(v), vf, _CMP_EQ_OQ)));
    const VI one = _mm256_or_si256(mask_i(zr), tiny);
    const VI neg = _mm256_srai_epi32(_mm256_castps_si256(v), 31);
    return _mm256_or_si256(_mm256_and_si256(one, _mm256_set1_epi32(1)),
                           _mm256_andnot_si256(_mm256_or_si256(one, neg), _mm256_set1_epi32(2)));
}
bool qp_i2s_ternary_codes_avx2(const float *x, int64_t nb, int be, float f, uint8_t *y) {
    const V vf = _mm256_set1_ps(f);
    const VI tiny = _mm256_set1_epi32(f <= 1e-6f ? -1 : 0);
    const int q = be / 4;
    for (int64_t b = 0; b < nb; b++, x += be, y += q) {
        for (int i = 0; i < be; i += 16) prefetch_ahead(x + i, AHEAD);
        V ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
        for (int p = 0; p < q; p += 32) {
            VI acc[4];
            for (int g = 0; g < 4; g++) {
                const float *xp = x + p + 8 * g;
                VI a = _mm256_slli_epi32(ter1_code(xp, vf, tiny, &ok), 6);
                a = _mm256_or_si256(a, _mm256_slli_epi32(ter1_code(xp + q, vf, tiny, &ok), 4));
                a = _mm256_or_si256(a, _mm256_slli_epi32(ter1_code(xp + 2 * q, vf, tiny, &ok), 2));
                acc[g] = _mm256_or_si256(a, ter1_code(xp + 3 * q, vf, tiny, &ok));
                if (q == 16 && g == 1) break;
            }
            if (q == 16) {
                const VI z = _mm256_setzero_si256();
                _mm_storeu_si128((__m128i *)y, _mm256_castsi256_si128(pack_u8(acc[0], acc[1], z, z)));
            } else {
                _mm256_storeu_si256((VI *)(y + p), pack_u8(acc[0], acc[1], acc[2], acc[3]));
            }
        }
        if (_mm256_movemask_ps(ok) != 0xFF) return false;
    }
    return true;
}

/* ---- exact int8 dots -------------------------------------------------------------------------- */
/* int32 lanes of sum u*a over 32 pairs (u unsigned <= 4, a signed) */
static inline VI dot_u8(VI u, VI a) { return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)); }
static inline VI sum_a(VI a) { return dot_u8(_mm256_set1_epi8(1), a); }

double qp_tq2_0_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    double s = 0.0;
    const VI m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; i++, x += 66, a += QK_K) {
        VI ua = _mm256_setzero_si256(), sa = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const VI v = _mm256_loadu_si256((const VI *)(x + 32 * h));
            for (int k = 0; k < 4; k++) {
                const VI u = _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), m3);
                const VI av = _mm256_loadu_si256((const VI *)(a + 128 * h + 32 * k));
                ua = _mm256_add_epi32(ua, dot_u8(u, av));
                sa = _mm256_add_epi32(sa, sum_a(av));
            }
        }
        const int32_t isum = hsum_i32(_mm256_sub_epi32(ua, sa));
        s += (double)qp_fp16_to_fp32(qp_load_u16le(x + 64)) * (double)isum;
    }
    return s;
}

/* base-3 digit k of each byte: ((uint8)(b * 3^k) * 3) >> 8, in 16-bit lanes */
static inline VI tq1_digits(VI v, int k) {
    static const int16_t pow3[5] = {1, 3, 9, 27, 81};
    const VI ff = _mm256_set1_epi16(0xff), p = _mm256_set1_epi16(pow3[k]), three = _mm256_set1_epi16(3);
    VI lo = _mm256_and_si256(v, ff), hi = _mm256_srli_epi16(v, 8);
    lo = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_and_si256(_mm256_mullo_epi16(lo, p), ff), three), 8);
    hi = _mm256_srli_epi16(_mm256_mullo_epi16(_mm256_and_si256(_mm256_mullo_epi16(hi, p), ff), three), 8);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 8));
}
double qp_tq1_0_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *x = w;
    double s = 0.0;
    for (int64_t i = 0; i < n / QK_K; i++, x += 54, a += QK_K) {
        VI ua = _mm256_setzero_si256(), sa = _mm256_setzero_si256();
        const VI v = _mm256_loadu_si256((const VI *)x);
        /* qs[32..47] twice (both lanes); the upper lane's products are masked off */
        const VI v16 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x + 32)));
        const VI lo_lane = _mm256_setr_epi64x(-1, -1, 0, 0);
        for (int k = 0; k < 5; k++) {
            const VI av = _mm256_loadu_si256((const VI *)(a + 32 * k));
            ua = _mm256_add_epi32(ua, dot_u8(tq1_digits(v, k), av));
            sa = _mm256_add_epi32(sa, sum_a(av));
            const VI a16 = _mm256_and_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + 160 + 16 * k))), lo_lane);
            ua = _mm256_add_epi32(ua, dot_u8(_mm256_and_si256(tq1_digits(v16, k), lo_lane), a16));
            sa = _mm256_add_epi32(sa, sum_a(a16));
        }
        int32_t isum = hsum_i32(_mm256_sub_epi32(ua, sa));
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 4; j++) {
                const uint8_t q = (uint8_t)(x[48 + j] * pow3[k]);
                isum += ((((uint16_t)q * 3) >> 8) - 1) * a[240 + 4 * k + j];
            }
        s += (double)qp_fp16_to_fp32(qp_load_u16le(x + 52)) * (double)isum;
    }
    return s;
}

/* I2_S: byte p of a block holds elements p, q+p, 2q+p, 3q+p at shifts 6, 4, 2, 0; code 3 -> 0 */
static inline VI i2s_u(VI v, int k) {
    const VI lut = _mm256_setr_epi8(0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 1, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0, 0, 0);
    return _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 6 - 2 * k), _mm256_set1_epi8(3)));
}
/* I2_S: encodings/ternary_i8_simd.h, 3 rows x 4 tokens per tile; the maddubs pairs (|u0 a0 + u1 a1|
 * <= 2 x 2 x 128 = 512) added in int16 lanes for 8 blocks (a tile pair takes 4 per block: at most
 * 8 x 4 x 512 = 16384 < 2^15, exact), then one madd by 1 into int32 */
static inline VI pair_avx2(VI acc, VI u, VI a) { return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, a)); }
static inline VI widen_avx2(VI acc) { return _mm256_madd_epi16(acc, _mm256_set1_epi16(1)); }
QP_I2S_I8_KERNELS(, avx2, pair_avx2, widen_avx2, 8, 3, 4)

double qp_i2s_arm_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    int64_t s = 0;
    int64_t i = 0;
    for (; i + 2 <= n / 64; i += 2, x += 32, a += 128) { /* two 64-blocks: one per 128-bit lane */
        const VI v = _mm256_loadu_si256((const VI *)x);
        VI acc = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const VI av = _mm256_loadu2_m128i((const __m128i *)(a + 64 + 16 * k), (const __m128i *)(a + 16 * k));
            acc = _mm256_add_epi32(acc, _mm256_sub_epi32(dot_u8(i2s_u(v, k), av), sum_a(av)));
        }
        s += hsum_i32(acc);
    }
    for (; i < n / 64; i++, x += 16, a += 64) {
        static const int lv[4] = {-1, 0, 1, 0};
        for (int p = 0; p < 16; p++)
            for (int k = 0; k < 4; k++) s += lv[(x[p] >> (6 - 2 * k)) & 3] * a[16 * k + p];
    }
    return (double)s;
}

/* consecutive LSB-first codes: 8 code bytes (32 elements) -> u = lut[code], element order
 * permuted within each 128-bit lane as dword k byte i <-> element 4i + k; a permuted alike */
static inline VI consec_u(const uint8_t *p, VI lut) {
    uint64_t c;
    memcpy(&c, p, 8);
    const VI b = _mm256_permutevar8x32_epi32(_mm256_set1_epi64x((long long)c), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    const VI codes = _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)), _mm256_set1_epi8(3));
    return _mm256_shuffle_epi8(lut, codes);
}
static inline VI consec_a(const int8_t *a) {
    const VI perm = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9,
                                     13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_shuffle_epi8(_mm256_loadu_si256((const VI *)a), perm);
}
/* sum over n (multiple of 32) of (lut[code] - bias) * a, no block scale */
static int64_t consec_dot(const uint8_t *x, const int8_t *a, int64_t n, VI lut, int bias) {
    int64_t s = 0;
    int64_t i = 0;
    while (i < n) {
        VI ua = _mm256_setzero_si256(), sa = _mm256_setzero_si256();
        const int64_t end = i + 8192 < n ? i + 8192 : n; /* int32 lanes cannot overflow */
        for (; i < end; i += 32) {
            const VI av = consec_a(a + i);
            ua = _mm256_add_epi32(ua, dot_u8(consec_u(x + i / 4, lut), av));
            sa = _mm256_add_epi32(sa, sum_a(av));
        }
        s += (int64_t)hsum_i32(ua) - (int64_t)bias * hsum_i32(sa);
    }
    return s;
}
double qp_qk256_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    /* levels -2, -1, +1, +2 = u - 2 with u = 0, 1, 3, 4 */
    const VI lut = _mm256_setr_epi8(0, 1, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 4, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0);
    return (double)consec_dot(w, a, n / 32 * 32, lut, 2);
}
double qp_split32_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    const VI lut = _mm256_setr_epi8(0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0);
    return (double)consec_dot(w, a, n / 32 * 32, lut, 2);
}
double qp_bitnet32f16_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    const VI lut = _mm256_setr_epi8(0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0);
    double s = 0.0;
    for (int64_t i = 0; i < n / 32; i++, x += 10, a += 32) {
        const VI av = consec_a(a);
        const int32_t isum = hsum_i32(_mm256_sub_epi32(dot_u8(consec_u(x, lut), av),
                                                       _mm256_slli_epi32(sum_a(av), 1)));
        s += (double)qp_fp16_to_fp32(qp_load_u16le(x + 8)) * (double)isum;
    }
    return s;
}

/* ---- int8 activations (qp_act_quantize_i8) ---------------------------------------------------- */
/* max(0, max |x|) of n floats; false when x holds a NaN (the reference's running QP_MAX restarts
 * after one, so the caller takes the scalar path) */
bool qp_act_amax_avx2(const float *x, int64_t n, float *amax) {
    V m0 = _mm256_setzero_ps(), m1 = m0, nan = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const V a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        m0 = _mm256_max_ps(m0, vabs(a));
        m1 = _mm256_max_ps(m1, vabs(b));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan)) return false;
    float m = hmax8(_mm256_max_ps(m0, m1));
    for (; i < n; i++) {
        if (x[i] != x[i]) return false;
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    }
    *amax = m;
    return true;
}
/* a = clamp(rint(x * s), -128, 127), NaN -> 0 (enc_ternary.c round_even_clamp), for the first
 * n / 32 * 32 elements: the product rounded once as the reference, clamped, then converted with
 * the default rounding (nearest even, as rintf) */
void qp_act_codes_avx2(const float *x, int64_t n, float s, int8_t *a) {
    const V vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        VI q[4];
        for (int k = 0; k < 4; k++) {
            const V v = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vs);
            const V c = _mm256_min_ps(_mm256_max_ps(v, lo), hi); /* NaN -> -128, masked below */
            q[k] = _mm256_cvtps_epi32(_mm256_and_ps(c, _mm256_cmp_ps(v, v, _CMP_ORD_Q)));
        }
        const VI ab = _mm256_packs_epi32(q[0], q[1]), cd = _mm256_packs_epi32(q[2], q[3]);
        _mm256_storeu_si256((VI *)(a + i), _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd),
                                                                         _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
}
