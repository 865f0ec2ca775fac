/* bullet-core BQ4 (readers/bullet.md; byte table in encodings/enc_bq4.md): 32 weights in 20
 * bytes: f16 scale @0, i8 zero @2, pad @3 (0), nibbles @4..19 (byte i = q[2i] | q[2i+1] << 4,
 * low nibble first). value = (q - zero) * scale, exactly bullet-core's decode.
 * Encoder (sound, unlike bullet-builder's; enc_bq4.md "Encoder"), per block:
 * 1. base: lo = min(min, 0), hi = max(max, 0); scale = (hi - lo) / 15 rounded UP to an f16 (so no
 *    value clamps); zero = clamp(round(-lo / scale), 0, 15); q = clamp(round(v / scale) + zero,
 *    0, 15), computed with the f16-rounded scale; an all-zero block gets scale 0, zero 0, q 0.
 *    Blocks holding only 0 and one value c (constant blocks, e.g. all-ones norm weights) are
 *    special-cased so they decode exactly: scale = f16(|c|), zero 0 (c > 0: q 1 for c, 0 for 0)
 *    or zero 1 (c < 0: q 0 for c, 1 for 0); exact whenever c is an f16 value.
 * 2. bracketing refinement (finite, non-constant blocks whose base error is not 0): levels
 *    k*s .. (k+15)*s that bracket [min, max] (s the smallest f16 that fits, zero = -k as int8)
 *    for the four k around min / ((max - min) / 15); one replaces the base block only when its
 *    squared error is strictly smaller. For a block with both signs or a 0 every candidate has
 *    k <= 0 <= k + 15 (zero in 0..15, 0 exact); only one-signed blocks without a 0 (trained norm
 *    weights in [0.5, 1.5]) can get a zero outside 0..15, which bullet-core reads as is. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "encodings/encodings_internal.h"

static inline int round_clamp(float v, int lo, int hi) { /* round half away from zero; NaN -> lo */
    if (!(v >= (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)roundf(v);
}

static double block_sse(const float *x, const uint8_t *b) {
    float y[32];
    qp_bq4_dequantize(b, y, 32);
    double s = 0;
    for (int i = 0; i < 32; i++) {
        const double d = (double)x[i] - (double)y[i];
        s += d * d;
    }
    return s;
}

/* Encodes x with levels k*s .. (k+15)*s (zero = -k, s an f16) into b; false when -k is out of
 * the int8 zero's reach or no finite positive f16 s brackets [mn, mx] with these k. */
static bool encode_k(const float *x, float mn, float mx, double k, uint8_t *b) {
    if (k < -127.0 || k > 128.0) return false;
    double lo = (double)(mx - mn) / 15.0, hi = INFINITY;
    if (k > 0) hi = (double)mn / k;
    else if (k < 0) lo = fmax(lo, (double)mn / k);
    else if (mn < 0) return false;
    const double k15 = k + 15.0;
    if (k15 > 0) lo = fmax(lo, (double)mx / k15);
    else if (k15 < 0) hi = fmin(hi, (double)mx / k15);
    else if (mx > 0) return false;
    if (!(lo > 0) || !(lo <= hi) || lo > 65504.0) return false;
    uint16_t sh = qp_fp32_to_fp16((float)lo);
    while ((double)qp_fp16_to_fp32(sh) < lo && sh < 0x7bffu) sh++;
    const double s = (double)qp_fp16_to_fp32(sh);
    if (!(s >= lo) || s > hi) return false;
    memset(b, 0, QP_BQ4_BYTES);
    qp_store_u16le(b, sh);
    b[2] = (uint8_t)(int8_t)(int)(-k);
    for (int i = 0; i < 32; i++) {
        double q = floor((double)x[i] / s - k + 0.5);
        if (q < 0) q = 0;
        if (q > 15) q = 15;
        b[4 + i / 2] |= (uint8_t)((int)q << (4 * (i & 1)));
    }
    return true;
}

/* Step 2 of the encoder (top of this file): y holds the base encoding of the 32 values x. */
static void refine_block(const float *x, uint8_t *y) {
    float mn = x[0], mx = x[0];
    for (int k = 0; k < 32; k++) {
        if (!isfinite(x[k])) return;
        if (x[k] < mn) mn = x[k];
        if (x[k] > mx) mx = x[k];
    }
    if (!(mx > mn)) return; /* constant blocks: the base encoding is exact */
    double best = block_sse(x, y);
    if (best == 0.0) return;
    uint8_t alt[20];
    const double k0 = floor((double)mn / ((double)(mx - mn) / 15.0));
    /* zero = -k must fit an int8; a huge k0 would also stall the loop (k0 + 1 == k0) */
    if (!(k0 >= -130.0 && k0 <= 130.0)) return;
    for (double k = k0 - 2; k <= k0 + 1; k++) {
        if (!encode_k(x, mn, mx, k, alt)) continue;
        const double e = block_sse(x, alt);
        if (e < best) {
            best = e;
            memcpy(y, alt, QP_BQ4_BYTES);
        }
    }
}

void qp_bq4_quantize_ref(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += QP_BQ4_BYTES) {
        float lo = 0.0f, hi = 0.0f;
        for (int k = 0; k < 32; k++) {
            if (x[k] < lo) lo = x[k];
            if (x[k] > hi) hi = x[k];
        }
        memset(y, 0, QP_BQ4_BYTES);
        /* blocks whose non-zero values all equal one c: scale = f16(|c|), exact whenever c is an
         * f16 value (every bf16 value in the f16 normal range is) */
        float c = 0.0f;
        bool two_level = true;
        for (int k = 0; k < 32 && two_level; k++) {
            if (x[k] == 0.0f) continue;
            if (c == 0.0f) c = x[k];
            else if (x[k] != c) two_level = false;
        }
        if (c == 0.0f && two_level) continue; /* all zero: scale 0, zero 0, q 0 */
        if (two_level && isfinite(c) && qp_fp16_to_fp32(qp_fp32_to_fp16(fabsf(c))) == fabsf(c)) {
            qp_store_u16le(y, qp_fp32_to_fp16(fabsf(c)));
            y[2] = c < 0.0f ? 1 : 0;
            for (int k = 0; k < 32; k++) {
                const int q = c < 0.0f ? (x[k] == 0.0f ? 1 : 0) : (x[k] == 0.0f ? 0 : 1);
                y[4 + k / 2] |= (uint8_t)(q << (4 * (k & 1)));
            }
            continue;
        }
        /* f16 scale rounded up, so the 16 levels always span [lo, hi] and no value clamps */
        const float want = (hi - lo) / 15.0f;
        uint16_t sh = qp_fp32_to_fp16(want);
        if (qp_fp16_to_fp32(sh) < want && sh < 0x7bffu) sh++;
        const float scale = qp_fp16_to_fp32(sh);
        if (!(scale > 0.0f) || !isfinite(scale)) continue; /* all zero (or unrepresentable) */
        const int zero = round_clamp(-lo / scale, 0, 15);
        qp_store_u16le(y, sh);
        y[2] = (uint8_t)(int8_t)zero;
        for (int k = 0; k < 32; k++) {
            const int q = round_clamp(x[k] / scale + (float)zero, 0, 15);
            y[4 + k / 2] |= (uint8_t)(q << (4 * (k & 1)));
        }
        refine_block(x, y);
    }
}

void qp_bq4_dequantize(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / 32; i++, x += QP_BQ4_BYTES, y += 32) {
        const float scale = qp_fp16_to_fp32(qp_load_u16le(x));
        const int zero = (int8_t)x[2];
        for (int k = 0; k < 16; k++) {
            y[2 * k] = (float)((x[4 + k] & 15) - zero) * scale;
            y[2 * k + 1] = (float)((x[4 + k] >> 4) - zero) * scale;
        }
    }
}

float qp_bq4_vec_dot(const void *w, const float *x, int64_t n) {
    float tmp[32];
    float s = 0.0f;
    const uint8_t *p = w;
    for (int64_t i = 0; i < n / 32; i++) {
        qp_bq4_dequantize(p + QP_BQ4_BYTES * i, tmp, 32);
        for (int k = 0; k < 32; k++) s += tmp[k] * x[32 * i + k];
    }
    return s;
}

bool qp_bq4_validate(const void *vx, int64_t n, char *why, size_t len) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n / 32; i++) {
        const uint16_t h = qp_load_u16le(x + QP_BQ4_BYTES * i);
        if ((h & 0x7c00u) == 0x7c00u) {
            if (why) snprintf(why, len, "block %lld: scale is not finite (f16 0x%04x)", (long long)i, h);
            return false;
        }
    }
    return true;
}
