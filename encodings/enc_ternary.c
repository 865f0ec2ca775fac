/* Ternary encodings (sources, byte tables and the BitNet rules: encodings/enc_ternary.md):
 *   TQ1_0, TQ2_0     llama.cpp ids 34/35, per-256-block f16 absmax scale (bytes = llama.cpp's ref)
 *   I2_S             microsoft/BitNet x86 layout, 128-element blocks, per-tensor f32 trailer
 *   I2_S_ARM         microsoft/BitNet ARM layout, 64-element blocks, same trailer
 *   QK256            BitNet-rs GgmlQk256NoScale: LUT [-2,-1,+1,+2], no scale, no zero level
 *   BITNET32F16      BitNet-rs: 32 elements = 8 code bytes + f16 scale, code = v + 2 (v in -2..1)
 *   SPLIT32          BitNet-rs: 32 elements = 8 code bytes, f32 scales in a sibling tensor
 * plus the absmean weight quantizer, the int8 activation quantizer and the packed-U8 checkpoint
 * form of microsoft/bitnet-b1.58. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encodings/enc_blocks.h"
#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

#define QK_K QP_QK_K

/* lroundf for values known to lie in [-1.5, 1.5] (x * 1/absmax); NaN -> 0. */
static inline int lround_small(float v) {
    if (!(v >= -2.0f && v <= 2.0f)) return 0;
    return (int)lroundf(v);
}

/* round half to even, clamped to [lo, hi]; NaN -> 0 */
static inline int round_even_clamp(float v, int lo, int hi) {
    if (v != v) return 0;
    if (v <= (float)lo) return lo;
    if (v >= (float)hi) return hi;
    return (int)rintf(v);
}

static bool check_f16(const uint8_t *p, int64_t blk, char *why, size_t len) {
    uint16_t h = qp_load_u16le(p);
    if ((h & 0x7c00u) == 0x7c00u) {
        if (why) snprintf(why, len, "block %lld: scale is not finite (f16 0x%04x)", (long long)blk, h);
        return false;
    }
    return true;
}

/* The absmean sum: |x[i]| as double added into lane i % 16 in index order, the 16 lanes then
 * added pairwise ((l0+l1)+(l2+l3))+... (a fixed order, so SIMD kernels reproduce it bit for bit).
 * mean = (float)(sum / n), at least 1e-5 (also for n = 0 and NaN). */
static float lanes_mean(double *l, int64_t n) {
    for (int w = 16; w > 1; w /= 2)
        for (int k = 0; k < w / 2; k++) l[k] = l[2 * k] + l[2 * k + 1];
    float mean = n > 0 ? (float)(l[0] / (double)n) : 0.0f;
    if (!(mean >= 1e-5f)) mean = 1e-5f;
    return mean;
}
static float absmean_ref(const float *x, int64_t n) {
    double l[16] = {0};
    for (int64_t i = 0; i < n; i++) l[i % 16] += fabs((double)x[i]);
    return lanes_mean(l, n);
}

/* AVX2 pass over a whole tensor: lanes, max |x|, ternary flag (see qp_tern_stats_avx2). Returns
 * false when x holds a NaN (callers then run the scalar reference). */
static bool stats_fast(const float *x, int64_t n, double *l, float *amax, bool *ternary) {
    float f = 0.0f;
    for (int64_t i = 0; i < n && f == 0.0f; i++) f = fabsf(x[i]);
    const int64_t n16 = n / 16 * 16;
    bool nonter = false;
    float m = 0.0f;
    memset(l, 0, 16 * sizeof *l);
    const int64_t chunk = 1 << 20;
    for (int64_t i = 0; i < n16; i += chunk)
        if ((qp_simd_level() >= 2 ? qp_tern_stats_avx512 : qp_tern_stats_avx2)(x + i, QP_MIN(chunk, n16 - i), l, &m, f, &nonter))
            return false;
    for (int64_t i = n16; i < n; i++) {
        const float a = fabsf(x[i]);
        if (a != a) return false;
        l[i % 16] += (double)a;
        m = QP_MAX(m, a);
        if (!(x[i] == 0.0f || a == f)) nonter = true;
    }
    *amax = m;
    *ternary = !nonter; /* all nonzero |x| equal f, hence equal max |x| */
    return true;
}

/* ---- absmean in one pass over memory (enc_ternary.md "absmean in one pass") ----------------------
 * The codes need s = 1/mean of the whole tensor; instead each chunk of SPEC_CHUNK floats (L2-sized)
 * is coded, while in cache, with s_est = 1/mean of the prefix summed so far (chunk 0: of itself),
 * and its decision boundary is recorded: lo = largest |x| coded 0, hi = smallest |x| coded +-1.
 * For a fixed s > 0, fl(x * s) = sign(x) fl(|x| * s) and fl(a * s) is monotone in a, so the
 * level is sign(x) * [|x| >= t(s)] with t(s) = the smallest float a with fl(a * s) > 0.5
 * (nz_threshold). The chunk's codes equal the codes under the true s iff lo < t(s) <= hi; chunks
 * that fail are coded again (re-read). The sums are the reference's (same lanes, same index order
 * in each lane, same pairwise combination), so the true s is the reference's. A sum that is not
 * finite (NaN or inf in x) returns false: the caller runs the whole-tensor path. */
enum { SPEC_CHUNK = 16384, SPEC_SUB = 1024 }; /* floats; bounds are kept per SPEC_SUB */
static float nz_threshold(float s) {
    uint32_t lo = 0, hi = 0x7f800000u; /* inf * s = inf > 0.5 for s > 0 */
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        float a;
        memcpy(&a, &mid, 4);
        if (a * s > 0.5f) hi = mid;
        else lo = mid + 1;
    }
    float t;
    memcpy(&t, &lo, 4);
    return t;
}
/* be = 0: absmean levels of all n into out (int8); be = 64 / 128: I2_S codes of the n / be blocks
 * into out (no trailer). Sets *mean_out to lanes_mean of all n. Needs qp_simd_level() >= 1. */
static bool absmean_one_pass(const float *x, int64_t n, int be, void *out, float *mean_out) {
    const int64_t reg = be ? n / be * be : n / 32 * 32; /* coded by the kernels; the rest scalar */
    const int64_t nsub = (reg + SPEC_SUB - 1) / SPEC_SUB;
    float *bd = nsub ? qp_malloc((size_t)nsub * 2 * sizeof *bd) : NULL;
    if (nsub && !bd) return false;
    const bool v512 = qp_simd_level() >= 2;
    double l[16] = {0};
    for (int64_t i0 = 0; i0 < reg; i0 += SPEC_CHUNK) {
        const int64_t len = QP_MIN((int64_t)SPEC_CHUNK, reg - i0);
        double t[16];
        int64_t cnt = i0;
        if (i0 == 0) { /* chunk 0: its own mean (it stays in cache for the coding pass) */
            float m = 0.0f;
            bool nonter = false;
            memset(t, 0, sizeof t);
            (void)qp_tern_stats_avx2(x, len, t, &m, 0.0f, &nonter);
            cnt = len;
        } else {
            memcpy(t, l, sizeof t);
        }
        const float s = 1.0f / lanes_mean(t, cnt), th = nz_threshold(s);
        for (int64_t j = i0; j < i0 + len; j += SPEC_SUB) {
            const int64_t sl = QP_MIN((int64_t)SPEC_SUB, i0 + len - j);
            float *lo = bd + 2 * (j / SPEC_SUB), *hi = lo + 1;
            *lo = 0.0f, *hi = INFINITY;
            if (be && v512) qp_i2s_absmean_spec_avx512(x + j, sl / be, be, l, th, lo, hi, s, (uint8_t *)out + j / 4);
            else if (be) qp_i2s_absmean_spec_avx2(x + j, sl / be, be, l, th, lo, hi, s, (uint8_t *)out + j / 4);
            else if (v512) qp_tern_absmean_spec_avx512(x + j, sl, l, th, lo, hi, s, (int8_t *)out + j);
            else qp_tern_absmean_spec_avx2(x + j, sl, l, th, lo, hi, s, (int8_t *)out + j);
        }
    }
    for (int64_t i = reg; i < n; i++) l[i % 16] += fabs((double)x[i]);
    const float mean = lanes_mean(l, n); /* l[0] is now the whole sum */
    if (!isfinite(l[0])) {
        qp_free(bd);
        return false;
    }
    const float s = 1.0f / mean, tt = nz_threshold(s);
    for (int64_t k = 0; k < nsub; k++) {
        if (bd[2 * k] < tt && tt <= bd[2 * k + 1]) continue;
        const int64_t j = k * SPEC_SUB, sl = QP_MIN((int64_t)SPEC_SUB, reg - j);
        if (be) qp_i2s_codes_avx2(x + j, sl / be, be, 0, s, (uint8_t *)out + j / 4);
        else qp_tern_levels_avx2(x + j, sl, s, (int8_t *)out + j);
    }
    qp_free(bd);
    if (!be)
        for (int64_t i = reg; i < n; i++) ((int8_t *)out)[i] = (int8_t)round_even_clamp(x[i] * s, -1, 1);
    *mean_out = mean;
    return true;
}

/* TQ1_0 / TQ2_0 blocks: codes(block, t) writes the 256 levels (-1, 0, +1); the f16 d is the
 * block's last 2 bytes (bb bytes a block). */
typedef void (*tq_codes_fn)(const uint8_t *b, int8_t *t);
static inline void tq_dequantize(tq_codes_fn codes, size_t bb, const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    int8_t t[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += bb, y += QK_K) {
        const float d = qp_fp16_to_fp32(qp_load_u16le(x + bb - 2));
        codes(x, t);
        for (int k = 0; k < QK_K; k++) y[k] = (float)t[k] * d;
    }
}
static inline double tq_vec_dot_i8(tq_codes_fn codes, size_t bb, const void *w, const int8_t *a,
                                   int64_t n) {
    const uint8_t *x = w;
    int8_t t[QK_K];
    double s = 0.0;
    for (int64_t i = 0; i < n / QK_K; i++, x += bb, a += QK_K) {
        int32_t isum = 0;
        codes(x, t);
        for (int k = 0; k < QK_K; k++) isum += t[k] * a[k];
        s += (double)qp_fp16_to_fp32(qp_load_u16le(x + bb - 2)) * (double)isum;
    }
    return s;
}

/* ---- TQ2_0: u8 qs[64] @0, f16 d @64 (QP_TQ2_0_BYTES bytes); element 128h+32n+m = (qs[32h+m] >> 2n) & 3 ---- */
void qp_tq2_0_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, y += QP_TQ2_0_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = QP_MAX(amax, fabsf(x[j]));
        const float d = amax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y + 64, qp_fp32_to_fp16(d));
        for (int j = 0; j < 64; j += 32) {
            for (int m = 0; m < 32; ++m) {
                unsigned q = 0;
                for (int k = 0; k < 4; ++k) {
                    int xi = lround_small(x[m + k * 32] * id) + 1;
                    q += (unsigned)(xi & 3) << (2 * k);
                }
                y[j + m] = (uint8_t)q;
            }
            x += 4 * 32;
        }
    }
}
static void tq2_codes(const uint8_t *b, int8_t *t) {
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 32; m++)
                t[128 * h + 32 * k + m] = (int8_t)(((b[32 * h + m] >> (2 * k)) & 3) - 1);
}
void qp_tq2_0_dequantize(const void *x, float *y, int64_t n) { tq_dequantize(tq2_codes, QP_TQ2_0_BYTES, x, y, n); }
float qp_tq2_0_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_tq2_0_dequantize, QK_K, QP_TQ2_0_BYTES, w, x, n);
}
double qp_tq2_0_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    return tq_vec_dot_i8(tq2_codes, QP_TQ2_0_BYTES, w, a, n);
}
bool qp_tq2_0_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (!check_f16(x + i * QP_TQ2_0_BYTES + QP_TQ2_0_OFF_D, i, why, len)) return false;
        for (int j = 0; j < 64; j++) {
            uint8_t b = x[i * QP_TQ2_0_BYTES + j];
            for (int k = 0; k < 4; k++)
                if (((b >> (2 * k)) & 3) == 3) {
                    if (why) snprintf(why, len, "block %lld: byte %d holds code 3", (long long)i, j);
                    return false;
                }
        }
    }
    return true;
}

/* ---- TQ1_0: u8 qs[48] @0, u8 qh[4] @48, f16 d @52 (QP_TQ1_0_BYTES bytes), base-3 ------------------------- */
static uint8_t tq1_pack(const int *t, int count) { /* trits (0..2), first most significant */
    unsigned q = 0;
    for (int k = 0; k < count; k++) q = q * 3 + (unsigned)t[k];
    if (count == 4) q *= 3;
    return (uint8_t)((q * 256 + (243 - 1)) / 243);
}
void qp_tq1_0_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    int t[5];
    for (int64_t i = 0; i < n / QK_K; i++, y += QP_TQ1_0_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = QP_MAX(amax, fabsf(x[j]));
        const float d = amax;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        qp_store_u16le(y + 52, qp_fp32_to_fp16(d));
        for (int m = 0; m < 32; m++) {
            for (int k = 0; k < 5; k++) t[k] = lround_small(x[m + k * 32] * id) + 1;
            y[m] = tq1_pack(t, 5);
        }
        x += 5 * 32;
        for (int m = 0; m < 16; m++) {
            for (int k = 0; k < 5; k++) t[k] = lround_small(x[m + k * 16] * id) + 1;
            y[32 + m] = tq1_pack(t, 5);
        }
        x += 5 * 16;
        for (int j = 0; j < 4; j++) {
            for (int k = 0; k < 4; k++) t[k] = lround_small(x[j + k * 4] * id) + 1;
            y[48 + j] = tq1_pack(t, 4);
        }
        x += 16;
    }
}
static inline int tq1_digit(uint8_t b, int k) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q = (uint8_t)(b * pow3[k]);
    return (int)(((uint16_t)q * 3) >> 8);
}
static void tq1_codes(const uint8_t *b, int8_t *t) {
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 32; m++) t[k * 32 + m] = (int8_t)(tq1_digit(b[m], k) - 1);
    for (int k = 0; k < 5; k++)
        for (int m = 0; m < 16; m++) t[160 + k * 16 + m] = (int8_t)(tq1_digit(b[32 + m], k) - 1);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 4; j++) t[240 + k * 4 + j] = (int8_t)(tq1_digit(b[48 + j], k) - 1);
}
void qp_tq1_0_dequantize(const void *x, float *y, int64_t n) { tq_dequantize(tq1_codes, QP_TQ1_0_BYTES, x, y, n); }
float qp_tq1_0_vec_dot_ref(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_tq1_0_dequantize, QK_K, QP_TQ1_0_BYTES, w, x, n);
}
double qp_tq1_0_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    return tq_vec_dot_i8(tq1_codes, QP_TQ1_0_BYTES, w, a, n);
}
bool qp_tq1_0_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        if (!check_f16(x + i * QP_TQ1_0_BYTES + QP_TQ1_0_OFF_D, i, why, len)) return false;
        /* every byte decodes to some trits; bytes above ceil(242*256/243) = 255 cannot occur */
    }
    return true;
}

/* ---- I2_S (x86: 128/32, ARM: 64/16) ----------------------------------------------------------- */
static const float k_i2s_level[4] = {-1.0f, 0.0f, 1.0f, 0.0f}; /* code 3 is illegal (validate) */
static const int k_i2s_ilevel[4] = {-1, 0, 1, 0};

/* element e of a row -> (byte, shift) for the layout with blocks of `be` elements */
static inline void i2s_codes(const uint8_t *b, int be, uint8_t *c) {
    const int q = be / 4;
    for (int p = 0; p < q; p++) {
        c[p] = (uint8_t)((b[p] >> 6) & 3);
        c[q + p] = (uint8_t)((b[p] >> 4) & 3);
        c[2 * q + p] = (uint8_t)((b[p] >> 2) & 3);
        c[3 * q + p] = (uint8_t)(b[p] & 3);
    }
}
static void i2s_pack_block(const uint8_t *c, int be, uint8_t *b) {
    const int q = be / 4;
    for (int p = 0; p < q; p++)
        b[p] = (uint8_t)((c[p] << 6) | (c[q + p] << 4) | (c[2 * q + p] << 2) | c[3 * q + p]);
}
static void i2s_deq(const void *vx, float *y, int64_t n, int be) {
    const uint8_t *x = vx;
    uint8_t c[128];
    for (int64_t i = 0; i < n / be; i++, x += be / 4, y += be) {
        i2s_codes(x, be, c);
        for (int k = 0; k < be; k++) y[k] = k_i2s_level[c[k]];
    }
}
static double i2s_dot_i8(const void *w, const int8_t *a, int64_t n, int be) {
    const uint8_t *x = w;
    uint8_t c[128];
    int64_t s = 0;
    for (int64_t i = 0; i < n / be; i++, x += be / 4, a += be) {
        int32_t isum = 0;
        i2s_codes(x, be, c);
        for (int k = 0; k < be; k++) isum += k_i2s_ilevel[c[k]] * a[k];
        s += isum;
    }
    return (double)s;
}
static bool i2s_valid(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / 4; i++)
        for (int k = 0; k < 4; k++)
            if (((x[i] >> (2 * k)) & 3) == 3) {
                if (why) snprintf(why, len, "byte %lld holds the unused code 3", (long long)i);
                return false;
            }
    return true;
}
static void i2s_store_scale(uint8_t *y, int64_t n, float scale) {
    memset(y + n / 4, 0, 32);
    qp_store_f32le(y + n / 4, scale);
}
/* I2_S's defined input {-s, 0, +s} (enc_ternary.md) in one pass: s = f, the first nonzero |x|; codes
 * from the sign while every x is checked to be +-0 or +-f. Returns false at the first element that
 * is not (another magnitude, NaN): y then holds partial codes and the caller runs the two-pass path
 * below, which rewrites every byte. Same bytes as that path when it returns true: every x is +-0
 * or +-f, so the two-pass path's m = max|x| is f (0 when all are zero), its ternary test passes
 * (each x == 0 or |x| == m), and it writes scale m and c = fabs((double)x) < 1e-6 ? 1 :
 * x*m > 0 ? 2 : 0, the formula below with m = f (tests/unit/test_enc_ternary.c checks both paths
 * against a copy of the two-pass code). */
static bool i2s_one_pass(const float *x, uint8_t *y, int64_t n, int be) {
    int64_t i0 = 0;
    while (i0 < n && x[i0] == 0.0f) i0++;
    if (i0 == n) { /* all +-0: m = 0, every code 1 */
        memset(y, 0x55, (size_t)(n / 4));
        i2s_store_scale(y, n, 0.0f);
        return true;
    }
    const float f = fabsf(x[i0]);
    if (f != f) return false;
    if (qp_simd_level() >= 2) {
        if (!qp_i2s_ternary_codes_avx512(x, n / be, be, f, y)) return false;
    } else if (qp_simd_level() >= 1) {
        if (!qp_i2s_ternary_codes_avx2(x, n / be, be, f, y)) return false;
    } else {
        uint8_t c[128];
        for (int64_t b = 0; b < n / be; b++) {
            for (int k = 0; k < be; k++) {
                const float v = x[b * be + k];
                if (!(v == 0.0f || fabsf(v) == f)) return false;
                c[k] = fabs((double)v) < 1e-6 ? 1 : ((double)v * (double)f > 0 ? 2 : 0);
            }
            i2s_pack_block(c, be, y + b * (be / 4));
        }
    }
    i2s_store_scale(y, n, f);
    return true;
}
/* Codes of a whole tensor: ternary input {-m, 0, +m} is encoded as microsoft/BitNet's
 * quantize_i2_s does (|x| < 1e-6 -> 0, else sign; scale m = max|x|), in one pass (i2s_one_pass);
 * any other input is first ternarized with the absmean rule (scale = max(mean|x|, 1e-5)): with SIMD
 * in one pass (absmean_one_pass), else (or with NaN / inf) the two passes below (they also
 * recognise ternary input, as before the one-pass path existed). */
static void i2s_quantize_tensor(const float *x, void *vy, int64_t n, int be) {
    uint8_t *y = vy;
    if (i2s_one_pass(x, y, n, be)) return;
    /* not ternary (i2s_one_pass accepts every ternary tensor) unless x holds a NaN */
    float amean;
    if (qp_simd_level() >= 1 && absmean_one_pass(x, n, be, y, &amean)) {
        i2s_store_scale(y, n, amean);
        return;
    }
    if (qp_simd_level() >= 1) {
        double l[16];
        float m;
        bool ter;
        if (stats_fast(x, n, l, &m, &ter)) {
            const float scale = ter ? m : lanes_mean(l, n);
            if (qp_simd_level() >= 2) qp_i2s_codes_avx512(x, n / be, be, ter ? 1 : 0, ter ? 0.0f : 1.0f / scale, y);
            else qp_i2s_codes_avx2(x, n / be, be, ter ? 1 : 0, ter ? 0.0f : 1.0f / scale, y);
            memset(y + n / 4, 0, 32);
            qp_store_f32le(y + n / 4, scale);
            return;
        }
    }
    float m = 0.0f;
    bool ternary = true;
    for (int64_t i = 0; i < n; i++) m = QP_MAX(m, fabsf(x[i]));
    for (int64_t i = 0; i < n && ternary; i++)
        if (!(x[i] == 0.0f || fabsf(x[i]) == m)) ternary = false;
    uint8_t c[128];
    float scale = m;
    float inv = 0.0f;
    if (!ternary) {
        const float mean = absmean_ref(x, n);
        scale = mean;
        inv = 1.0f / mean;
    }
    for (int64_t b = 0; b < n / be; b++) {
        for (int k = 0; k < be; k++) {
            const float v = x[b * be + k];
            if (ternary)
                c[k] = fabs((double)v) < 1e-6 ? 1 : ((double)v * (double)m > 0 ? 2 : 0);
            else
                c[k] = (uint8_t)(round_even_clamp(v * inv, -1, 1) + 1);
        }
        i2s_pack_block(c, be, y + b * (be / 4));
    }
    memset(y + n / 4, 0, 32);
    qp_store_f32le(y + n / 4, scale);
}
static void i2s_dequantize_tensor(const void *vx, float *y, int64_t n, int be) {
    const float s = qp_load_f32le((const uint8_t *)vx + n / 4);
    i2s_deq(vx, y, n, be);
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

void qp_i2s_pack_levels(const int8_t *q, uint8_t *y, int64_t n) {
    uint8_t c[QP_I2S_BLOCK];
    for (int64_t b = 0; b < n / QP_I2S_BLOCK; b++) {
        for (int k = 0; k < QP_I2S_BLOCK; k++) c[k] = (uint8_t)(q[b * QP_I2S_BLOCK + k] + 1);
        i2s_pack_block(c, QP_I2S_BLOCK, y + b * QP_I2S_BYTES);
    }
}

void qp_i2s_dequantize(const void *x, float *y, int64_t n) { i2s_deq(x, y, n, 128); }
float qp_i2s_vec_dot(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_i2s_dequantize, 128, 32, w, x, n);
}
double qp_i2s_vec_dot_i8(const void *w, const int8_t *a, int64_t n) { return i2s_dot_i8(w, a, n, 128); }
void qp_vec_dot_i8_pairs(qp_vec_dot_i8_fn dot, const void *w, size_t ldw, int64_t n_rows, const int8_t *a,
                         size_t lda, int64_t n_tok, int64_t n, double *y, size_t ldy) {
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < n_rows; r++)
            y[(size_t)t * ldy + (size_t)r] = dot((const uint8_t *)w + (size_t)r * ldw, a + (size_t)t * lda, n);
}
bool qp_i2s_validate(const void *x, int64_t n, char *why, size_t len) { return i2s_valid(x, n, why, len); }
void qp_i2s_quantize_tensor(const float *x, void *y, int64_t n) { i2s_quantize_tensor(x, y, n, 128); }
void qp_i2s_dequantize_tensor(const void *x, float *y, int64_t n) { i2s_dequantize_tensor(x, y, n, 128); }

void qp_i2s_arm_dequantize(const void *x, float *y, int64_t n) { i2s_deq(x, y, n, 64); }
float qp_i2s_arm_vec_dot(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_i2s_arm_dequantize, 64, 16, w, x, n);
}
double qp_i2s_arm_vec_dot_i8(const void *w, const int8_t *a, int64_t n) { return i2s_dot_i8(w, a, n, 64); }
bool qp_i2s_arm_validate(const void *x, int64_t n, char *why, size_t len) { return i2s_valid(x, n, why, len); }
void qp_i2s_arm_quantize_tensor(const float *x, void *y, int64_t n) { i2s_quantize_tensor(x, y, n, 64); }
void qp_i2s_arm_dequantize_tensor(const void *x, float *y, int64_t n) { i2s_dequantize_tensor(x, y, n, 64); }

/* ---- LSB-first consecutive 2-bit codes (QK256, BITNET32F16, SPLIT32) -------------------------- */
static inline int code_at(const uint8_t *b, int k) { return (b[k >> 2] >> (2 * (k & 3))) & 3; }

/* QK256: LUT [-2,-1,+1,+2]. Nearest level; ties go toward zero, and 0 (and -0, NaN) -> +1. */
static const float k_qk256_level[4] = {-2.0f, -1.0f, 1.0f, 2.0f};
static const int k_qk256_ilevel[4] = {-2, -1, 1, 2};
static inline unsigned qk256_code(float v) {
    if (v < -1.5f) return 0;
    if (v < 0.0f) return 1;
    if (v > 1.5f) return 3;
    return 2;
}
void qp_qk256_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / 4; i++)
        y[i] = (uint8_t)(qk256_code(x[4 * i]) | qk256_code(x[4 * i + 1]) << 2 |
                         qk256_code(x[4 * i + 2]) << 4 | qk256_code(x[4 * i + 3]) << 6);
}
void qp_qk256_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = k_qk256_level[(x[i >> 2] >> (2 * (i & 3))) & 3];
}
float qp_qk256_vec_dot(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_qk256_dequantize, QK_K, 64, w, x, n);
}
double qp_qk256_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++) s += k_qk256_ilevel[(x[i >> 2] >> (2 * (i & 3))) & 3] * a[i];
    return (double)s;
}

/* BITNET32F16 / SPLIT32: code = v + 2 for v in {-2,-1,0,+1} (BitNet-rs pack_2bit_values); our
 * encoder only writes v in {-1,0,+1}: scale = absmax of the 32, v = clamp(rint(x / scale)). */
static void b32_codes(const float *x, uint8_t *codes, float *scale_out) {
    float amax = 0.0f;
    for (int k = 0; k < 32; k++) amax = QP_MAX(amax, fabsf(x[k]));
    const float inv = amax > 0.0f ? 1.0f / amax : 0.0f;
    memset(codes, 0, 8);
    for (int k = 0; k < 32; k++) {
        const int v = round_even_clamp(x[k] * inv, -1, 1);
        codes[k >> 2] |= (uint8_t)((v + 2) << (2 * (k & 3)));
    }
    *scale_out = amax;
}
void qp_bitnet32f16_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 10) {
        float s;
        b32_codes(x, y, &s);
        qp_store_u16le(y + 8, qp_fp32_to_fp16(s));
    }
}
void qp_bitnet32f16_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / 32; i++, x += 10, y += 32) {
        const float s = qp_fp16_to_fp32(qp_load_u16le(x + 8));
        for (int k = 0; k < 32; k++) y[k] = (float)(code_at(x, k) - 2) * s;
    }
}
float qp_bitnet32f16_vec_dot(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_bitnet32f16_dequantize, 32, 10, w, x, n);
}
double qp_bitnet32f16_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    double s = 0.0;
    for (int64_t i = 0; i < n / 32; i++, x += 10, a += 32) {
        int32_t isum = 0;
        for (int k = 0; k < 32; k++) isum += (code_at(x, k) - 2) * a[k];
        s += (double)qp_fp16_to_fp32(qp_load_u16le(x + 8)) * (double)isum;
    }
    return s;
}
bool qp_bitnet32f16_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / 32; i++)
        if (!check_f16(x + i * 10 + 8, i, why, len)) return false;
    return true;
}
void qp_split32_quantize(const float *x, uint8_t *codes, float *scales, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++) b32_codes(x + 32 * i, codes + 8 * i, &scales[i]);
}
void qp_split32_dequantize(const uint8_t *codes, const float *scales, float *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++)
        for (int k = 0; k < 32; k++) y[32 * i + k] = (float)(code_at(codes + 8 * i, k) - 2) * scales[i];
}
void qp_split32_dequantize_unit(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++) y[i] = (float)(((x[i >> 2] >> (2 * (i & 3))) & 3) - 2);
}
float qp_split32_vec_dot_unit(const void *w, const float *x, int64_t n) {
    return qp_dot_via_blocks(qp_split32_dequantize_unit, 32, 8, w, x, n);
}
double qp_split32_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *x = w;
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++) s += ((((x[i >> 2] >> (2 * (i & 3))) & 3)) - 2) * a[i];
    return (double)s;
}

/* ---- BitNet b1.58 quantizers ------------------------------------------------------------------ */
void qp_ternary_absmean(const float *w, int64_t n, int8_t *q, float *scale) {
    if (qp_simd_level() >= 1 && absmean_one_pass(w, n, 0, q, scale)) return;
    if (qp_simd_level() >= 1) {
        double l[16];
        float m;
        bool ter;
        if (stats_fast(w, n, l, &m, &ter)) {
            const float mean = lanes_mean(l, n);
            if (qp_simd_level() >= 2) qp_tern_levels_avx512(w, n, 1.0f / mean, q);
            else qp_tern_levels_avx2(w, n, 1.0f / mean, q);
            *scale = mean;
            return;
        }
    }
    const float mean = absmean_ref(w, n);
    const float s = 1.0f / mean;
    for (int64_t i = 0; i < n; i++) q[i] = (int8_t)round_even_clamp(w[i] * s, -1, 1);
    *scale = mean;
}

float qp_act_quantize_i8(const float *x, int64_t n, int8_t *a) {
    const bool simd = qp_simd_level() >= 1;
    float m = 0.0f;
    if (!simd || !qp_act_amax_avx2(x, n, &m)) {
        m = 0.0f;
        for (int64_t i = 0; i < n; i++) m = QP_MAX(m, fabsf(x[i]));
    }
    const float s = 127.0f / QP_MAX(m, 1e-5f);
    int64_t i = 0;
    if (simd) {
        qp_act_codes_avx2(x, n, s, a);
        i = n / 32 * 32;
    }
    for (; i < n; i++) a[i] = (int8_t)round_even_clamp(x[i] * s, -128, 127);
    return s;
}

/* ---- microsoft/bitnet-b1.58 packed U8 checkpoint form ------------------------------------------ */
void qp_bitnet_u8_pack(const int8_t *w, int64_t out, int64_t in, uint8_t *packed) {
    const int64_t q = out / 4;
    for (int64_t r = 0; r < q; r++)
        for (int64_t c = 0; c < in; c++) {
            unsigned b = 0;
            for (int i = 0; i < 4; i++) {
                int v = w[(r + i * q) * in + c];
                v = v < -1 ? -1 : v > 1 ? 1 : v;
                b |= (unsigned)(v + 1) << (2 * i);
            }
            packed[r * in + c] = (uint8_t)b;
        }
}
bool qp_bitnet_u8_unpack(const uint8_t *packed, int64_t out, int64_t in, int8_t *w,
                         int64_t *bad_index) {
    const int64_t q = out / 4;
    for (int64_t r = 0; r < q; r++)
        for (int64_t c = 0; c < in; c++) {
            const uint8_t b = packed[r * in + c];
            for (int i = 0; i < 4; i++) {
                const int code = (b >> (2 * i)) & 3;
                if (code == 3) {
                    if (bad_index) *bad_index = r * in + c;
                    return false;
                }
                w[(r + i * q) * in + c] = (int8_t)(code - 1);
            }
        }
    return true;
}
bool qp_bitnet_u8_to_f32(const uint8_t *packed, int64_t out, int64_t in, float weight_scale,
                         float *w, int64_t *bad_index) {
    const int64_t q = out / 4;
    for (int64_t r = 0; r < q; r++)
        for (int64_t c = 0; c < in; c++) {
            const uint8_t b = packed[r * in + c];
            for (int i = 0; i < 4; i++) {
                const int code = (b >> (2 * i)) & 3;
                if (code == 3) {
                    if (bad_index) *bad_index = r * in + c;
                    return false;
                }
                w[(r + i * q) * in + c] = (float)(code - 1) * weight_scale;
            }
        }
    return true;
}
