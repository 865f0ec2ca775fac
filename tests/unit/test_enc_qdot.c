/* Fast-path dots (traits vec_dot_q8, encodings.md "Fast dots"): for every encoding that has one,
 * on rows of several distributions and lengths,
 *  - every SIMD level (scalar, AVX2, AVX-512 VNNI when the CPU has them) gives the scalar
 *    reference's bits;
 *  - the fast dot is within the documented bound of the exact dot (dequantized row . F32
 *    activations, summed here in double): the activation rounding, |x - x^| <= 0.57 d_b per
 *    element (d_b = amax_b / 127 of the activation block, f16 or f32 scale), times sum |w| over
 *    the block, plus float rounding (nblocks + 16) 2^-22 sum |w x|; F16 rows against F16
 *    activations: float_bound below (rows of any length, so 1, 63, 100, 2049 too);
 *  - an independent integer recomputation (from dequantized weights and activations) agrees;
 *  - hand-made blocks: all-zero activations give 0, one weight and one activation give w * a;
 *  - TQ2_0 / TQ1_0 / BQ4 rows of random code bytes (every code, TQ2_0's unused 3, TQ1_0 bytes >= 243
 *    and BQ4 zero bytes -128..127 included) and random scales (65504 and subnormals too): every level
 *    and every tile give the reference's bits, within the bound of the exact dot.
 * The worst measured error / bound is printed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encodings/block_layouts.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"

static uint64_t g_s = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { g_s ^= g_s << 13; g_s ^= g_s >> 7; g_s ^= g_s << 17; return g_s; }
static float unif(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0); }
static float gauss(void) {
    float u = unif() + 1e-12f, v = unif();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void fill(float *x, int64_t n, int dist) {
    for (int64_t i = 0; i < n; i++) {
        float g = gauss();
        switch (dist) {
        case 0: x[i] = g; break;                          /* normal */
        case 1: x[i] = g * g * g; break;                   /* heavy tail */
        case 2: x[i] = (i % 97 == 0) ? 40.0f * g : 0.01f * g; break; /* spikes */
        case 3: x[i] = (i % 3 == 0) ? 0.0f : 1e-3f * g; break;        /* small, zeros */
        default: x[i] = 0.5f + 0.1f * g; break;            /* one-signed */
        }
    }
}

static double g_worst, g_worst_16; /* max |fast - exact| / bound (8-bit, F16 activations) */

/* A weight row: quantize_ref of w, or for encodings quantized per tensor only (I2_S, I2_S_ARM:
 * codes + tensor scale) random code bytes, the illegal code 3 included (it decodes to 0). */
static void weights_of(const qp_encoding_traits *tr, const float *w, uint8_t *wq, int64_t n, size_t wb) {
    if (tr->quantize_ref) {
        tr->quantize_ref(w, wq, n);
        return;
    }
    for (size_t i = 0; i < wb; i++) wq[i] = (uint8_t)(rnd() >> 56);
}

static double wabs_all(const float *wd, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs(wd[i]);
    return s;
}

/* F16 rows against activations rounded to F16 (encodings.md "Fast dots"): rounding x costs at
 * most u |x| + a per element (u = 2^-11; a = 2^-25, half the subnormal step), and the 64 lanes of
 * ceil(n / 64) terms plus the 6-level tree at most (ceil(n / 64) + 8) 2^-24 of the rounded
 * products' absolute sum: |fast - exact| <= (2^-11 + (ceil(n / 64) + 8) 2^-23) sum |w x| + 2^-24 sum |w|. */
static double float_bound(int64_t n, double sum_abs, double wabs) {
    const double lanes = (double)((n + 63) / 64);
    return (ldexp(1.0, -11) + (lanes + 8) * ldexp(1.0, -23)) * sum_abs + ldexp(1.0, -24) * wabs;
}

/* The exact dot of the dequantized row wd with x (in double) and the documented bound of the fast
 * dot against it; recomputed: wd against the dequantized activations xd, which the fast dot equals
 * up to float rounding (at most float_part). */
static void exact_and_bound(const qp_encoding_traits *at, const float *wd, const float *x, const float *xd, int64_t n,
                            double *exact, double *bound, double *recomputed, double *float_part) {
    double sum_abs = 0, act_err = 0;
    *exact = *recomputed = 0;
    const int64_t be = at->block_elems;
    for (int64_t b = 0; b < n / be; b++) {
        double amax = 0, wabs = 0;
        for (int64_t i = b * be; i < (b + 1) * be; i++) {
            if (fabs(x[i]) > amax) amax = fabs(x[i]);
            wabs += fabs(wd[i]);
            *exact += (double)wd[i] * x[i];
            sum_abs += fabs((double)wd[i] * x[i]);
            *recomputed += (double)wd[i] * xd[i];
        }
        act_err += 0.57 * amax / 127.0 * wabs;
    }
    *bound = act_err + ((double)(n / be) + 16) * ldexp(1.0, -22) * sum_abs;
    *float_part = ((double)(n / be) + 16) * ldexp(1.0, -22) * sum_abs * 2;
    if (at->flags & QP_ENC_FLAG_FLOAT) { /* F16 rows: activations rounded to F16 */
        *float_part = ((double)((n + 63) / 64) + 8) * ldexp(1.0, -23) * sum_abs;
        *bound = float_bound(n, sum_abs, wabs_all(wd, n));
    }
}

static void check_row(const qp_encoding_traits *tr, int64_t n, int wdist, int xdist) {
    const qp_encoding_traits *at = qp_encoding_get(tr->act_encoding);
    float *w = malloc((size_t)n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
    float *wd = malloc((size_t)n * sizeof *wd), *xd = malloc((size_t)n * sizeof *xd);
    size_t wb = 0, ab = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb) && qp_encoding_row_bytes(at->id, n, &ab));
    uint8_t *wq = malloc(wb), *xq = malloc(ab);
    fill(w, n, wdist);
    fill(x, n, xdist);
    weights_of(tr, w, wq, n, wb);
    at->quantize(x, xq, n);
    tr->dequantize(wq, wd, n);
    at->dequantize(xq, xd, n);
    double exact, bound, recomputed, float_part;
    exact_and_bound(at, wd, x, xd, n, &exact, &bound, &recomputed, &float_part);
    float ref = 0;
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        float f = tr->vec_dot_q8(wq, xq, n);
        if (lv == 0) ref = f;
        uint32_t a, c;
        memcpy(&a, &ref, 4);
        memcpy(&c, &f, 4);
        QP_CHECK_MSG(a == c, "%s n=%lld dist %d/%d level %d (%s): %.9g != reference %.9g", tr->name,
                     (long long)n, wdist, xdist, lv, qp_encoding_simd_level(), f, ref);
    }
    qp_encoding_simd_force(-1);
    const double err = fabs((double)ref - exact);
    QP_CHECK_MSG(err <= bound, "%s n=%lld dist %d/%d: |fast - exact| = %.6g > bound %.6g (exact %.6g)",
                 tr->name, (long long)n, wdist, xdist, err, bound, exact);
    double *worst = (at->flags & QP_ENC_FLAG_FLOAT) ? &g_worst_16 : &g_worst;
    if (bound > 0 && err / bound > *worst) *worst = err / bound;
    /* the dequantized weights against the dequantized activations: only float rounding apart */
    QP_CHECK_MSG(fabs((double)ref - recomputed) <= float_part + 1e-30,
                 "%s n=%lld: fast %.9g vs dequantized-activation dot %.9g", tr->name, (long long)n, ref,
                 recomputed);
    free(w), free(x), free(wd), free(xd), free(wq), free(xq);
}

/* vec_dot_q8_tile against vec_dot_q8, pair by pair, at every level: nothing written outside the
 * n_rows x n_tok corner of y, each (row, token) the single dot's bits. Shapes: 1..19 rows (tiles of 16
 * and 4 and remainders) x 1..9 tokens (tiles of 4 and remainders), and batches as prompts run them
 * (33 and 48 rows: Q4_K / Q5_K row groups of 16 in lanes and a remainder; 8 and 13 tokens: token
 * groups of 4 and a tail) */
enum { TILE_NT = 13, TILE_NR = 48, TILE_LDY = TILE_NR + 5 };
static void check_tile_shape(const qp_encoding_traits *tr, const uint8_t *wq, size_t wb, const uint8_t *xq, size_t ab,
                             int64_t n, int nr, int nt) {
    static float y[TILE_LDY * TILE_NT];
    for (int i = 0; i < TILE_LDY * TILE_NT; i++) y[i] = -1.0f;
    tr->vec_dot_q8_tile(wq, wb, nr, xq, ab, nt, n, y, TILE_LDY);
    for (int t = 0; t < TILE_NT; t++)
        for (int r = 0; r < TILE_LDY; r++) {
            float *got = &y[t * TILE_LDY + r];
            if (t >= nt || r >= nr) {
                QP_CHECK_MSG(*got == -1.0f, "%s tile: wrote outside %dx%d at (%d, %d)", tr->name, nr, nt, r, t);
                continue;
            }
            const float one = tr->vec_dot_q8(wq + (size_t)r * wb, xq + (size_t)t * ab, n);
            QP_CHECK_MSG(memcmp(&one, got, 4) == 0, "%s tile n=%lld level %s: %d rows x %d tokens, (%d, %d): %.9g != %.9g",
                         tr->name, (long long)n, qp_encoding_simd_level(), nr, nt, r, t, *got, one);
        }
}

static void check_tile(const qp_encoding_traits *tr, int64_t n) {
    const qp_encoding_traits *at = qp_encoding_get(tr->act_encoding);
    size_t wb = 0, ab = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb) && qp_encoding_row_bytes(at->id, n, &ab));
    float *w = malloc((size_t)n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
    uint8_t *wq = malloc(wb * TILE_NR), *xq = malloc(ab * TILE_NT);
    for (int r = 0; r < TILE_NR; r++) {
        fill(w, n, r % 5);
        weights_of(tr, w, wq + (size_t)r * wb, n, wb);
    }
    for (int t = 0; t < TILE_NT; t++) {
        fill(x, n, t % 5);
        at->quantize(x, xq + (size_t)t * ab, n);
    }
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        const int rows[] = {1, 3, 4, 5, 15, 16, 17, 19};
        for (int ri = 0; ri < 8; ri++)
            for (int nt = 1; nt <= 9; nt++) check_tile_shape(tr, wq, wb, xq, ab, n, rows[ri], nt);
        const int big[][2] = {{33, 13}, {48, 8}, {32, 13}, {47, 12}};
        for (int b = 0; b < 4; b++) check_tile_shape(tr, wq, wb, xq, ab, n, big[b][0], big[b][1]);
    }
    qp_encoding_simd_force(-1);
    free(w), free(x), free(wq), free(xq);
}

/* a random finite f16 block scale: block b % 8 == 0 the largest, 65504; 1 a subnormal; else |d| in
 * [2^-14, 2^1); random sign */
static uint16_t random_scale(size_t b) {
    const uint16_t sign = (uint16_t)((rnd() >> 63) << 15);
    if (b % 8 == 0) return sign | 0x7BFF;                       /* 65504 */
    if (b % 8 == 1) return sign | (uint16_t)(1 + (rnd() >> 54)); /* subnormal */
    return sign | (uint16_t)(((1 + (rnd() >> 60)) << 10) | (rnd() >> 54)); /* |d| in [2^-14, 2^1) */
}

/* Repacked rows (traits q8_pack / vec_dot_q8_packed, encodings.md "Repacked Q4_K rows", "Repacked
 * BQ4 rows", "Repacked Q6_K rows"; BQ4: every third row random bytes with extreme scales): 1-3 groups
 * of q8_pack rows x 1-13 tokens (the decode kernel below 8 tokens, the lanes from 8) at every
 * level: each (row, token) the single dot's bits and nothing written outside; q8_pack_rows() is 0
 * at the scalar level (the file's rows are read there). d_off >= 0: rows of random bytes with a
 * random f16 scale at d_off of each block (random_scale; TQ2_0: the unused code 3 too). */
static uint16_t random_scale(size_t b);
static void check_packed(const qp_encoding_traits *tr, int64_t n, int d_off) {
    const qp_encoding_traits *at = qp_encoding_get(tr->act_encoding);
    enum { G = 16, NG = 3, LDY = G * NG + 3 };
    size_t wb = 0, ab = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb) && qp_encoding_row_bytes(at->id, n, &ab));
    QP_CHECK_MSG(tr->q8_pack_block_elems > 0 && tr->q8_pack_block_elems % tr->block_elems == 0,
                 "%s: q8_pack_block_elems %lld", tr->name, (long long)tr->q8_pack_block_elems);
    if (tr->q8_pack_block_elems <= 0) return;
    const size_t group_bytes = (size_t)(n / tr->q8_pack_block_elems) * tr->q8_pack_block_bytes;
    float *w = malloc((size_t)n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
    uint8_t *wq = malloc(wb * G * NG), *xq = malloc(ab * TILE_NT), *pk = malloc(group_bytes * NG);
    static float y[LDY * TILE_NT];
    for (int r = 0; r < G * NG; r++) {
        fill(w, n, r % 5);
        weights_of(tr, w, wq + (size_t)r * wb, n, wb);
        if (tr->id == QP_ENC_BQ4 && r % 3 == 2) /* random bytes: zero bytes -128..127, extreme scales */
            for (size_t b = 0; b < wb / QP_BQ4_BYTES; b++) {
                uint8_t *blk = wq + (size_t)r * wb + b * QP_BQ4_BYTES;
                for (int k = 0; k < QP_BQ4_BYTES; k++) blk[k] = (uint8_t)(rnd() >> 56);
                const uint16_t h = random_scale(b);
                memcpy(blk, &h, 2);
            }
    }
    if (d_off >= 0) {
        for (size_t i = 0; i < wb * G * NG; i++) wq[i] = (uint8_t)(rnd() >> 56);
        for (size_t b = 0; b < wb * G * NG / tr->block_bytes; b++) {
            const uint16_t h = random_scale(b);
            memcpy(wq + b * tr->block_bytes + d_off, &h, 2);
        }
    }
    for (int t = 0; t < TILE_NT; t++) {
        fill(x, n, t % 5);
        at->quantize(x, xq + (size_t)t * ab, n);
    }
    for (int g = 0; g < NG; g++) tr->q8_pack(wq + (size_t)(g * G) * wb, wb, n, pk + (size_t)g * group_bytes);
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        if (lv < 1) QP_CHECK_MSG(tr->q8_pack_rows() == 0, "%s: repacked rows at the scalar level", tr->name);
        else QP_CHECK(tr->q8_pack_rows() == 0 || tr->q8_pack_rows() == G);
        const int toks[] = {1, 2, 5, 7, 8, 13};
        for (int ng = 1; ng <= NG; ng++)
            for (int ti = 0; ti < 6; ti++) {
                const int nt = toks[ti];
                for (int i = 0; i < LDY * TILE_NT; i++) y[i] = -1.0f;
                tr->vec_dot_q8_packed(pk, ng, xq, ab, nt, n, y, LDY);
                int bad = 0;
                for (int t = 0; t < TILE_NT; t++)
                    for (int r = 0; r < LDY; r++) {
                        const float got = y[t * LDY + r];
                        if (t >= nt || r >= G * ng) {
                            bad += got != -1.0f;
                            continue;
                        }
                        const float one = tr->vec_dot_q8(wq + (size_t)r * wb, xq + (size_t)t * ab, n);
                        bad += memcmp(&one, &got, 4) != 0;
                    }
                QP_CHECK_MSG(bad == 0, "%s packed n=%lld level %s: %d groups x %d tokens, %d pairs wrong or written outside",
                             tr->name, (long long)n, qp_encoding_simd_level(), ng, nt, bad);
            }
    }
    qp_encoding_simd_force(-1);
    free(w), free(x), free(wq), free(xq), free(pk);
}

/* Repacked rows against int8 activations (traits vec_dot_i8_packed): 1-3 groups x 1, 2, 5, 70
 * tokens of random codes (code 3 too) with random scales (d_off >= 0; I2_S: -1, no block scales),
 * activations random and the extremes -128 / 127, at every level: each (row, token) vec_dot_i8's
 * double exactly, nothing written outside */
static void check_packed_i8(const qp_encoding_traits *tr, int64_t n, int d_off) {
    enum { G = 16, NG = 3, NT = 70, LDY = G * NG + 3 };
    size_t wb = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb));
    const size_t group_bytes = (size_t)(n / tr->q8_pack_block_elems) * tr->q8_pack_block_bytes;
    uint8_t *wq = malloc(wb * G * NG), *pk = malloc(group_bytes * NG);
    int8_t *a = malloc((size_t)n * NT);
    double *y = malloc(sizeof *y * LDY * NT);
    for (size_t i = 0; i < wb * G * NG; i++) wq[i] = (uint8_t)(rnd() >> 56);
    for (size_t b = 0; d_off >= 0 && b < wb * G * NG / tr->block_bytes; b++) {
        const uint16_t h = random_scale(b);
        memcpy(wq + b * tr->block_bytes + d_off, &h, 2);
    }
    for (int64_t i = 0; i < n * NT; i++) a[i] = (int8_t)(rnd() >> 56);
    memset(a, 0x80, (size_t)n);
    memset(a + n, 0x7F, (size_t)n);
    for (int g = 0; g < NG; g++) tr->q8_pack(wq + (size_t)(g * G) * wb, wb, n, pk + (size_t)g * group_bytes);
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        const int toks[] = {1, 2, 5, NT};
        for (int ng = 1; ng <= NG; ng++)
            for (int ti = 0; ti < 4; ti++) {
                const int nt = toks[ti];
                for (int i = 0; i < LDY * NT; i++) y[i] = -1.0;
                tr->vec_dot_i8_packed(pk, ng, a, (size_t)n, nt, n, y, LDY);
                int bad = 0;
                for (int t = 0; t < NT; t++)
                    for (int r = 0; r < LDY; r++) {
                        const double got = y[t * LDY + r];
                        if (t >= nt || r >= G * ng) {
                            bad += got != -1.0;
                            continue;
                        }
                        const double one = tr->vec_dot_i8(wq + (size_t)r * wb, a + (size_t)t * n, n);
                        bad += memcmp(&one, &got, sizeof one) != 0;
                    }
                QP_CHECK_MSG(bad == 0, "%s packed int8 n=%lld level %s: %d groups x %d tokens, %d pairs wrong or written outside",
                             tr->name, (long long)n, qp_encoding_simd_level(), ng, nt, bad);
            }
    }
    qp_encoding_simd_force(-1);
    free(wq), free(pk), free(a), free(y);
}

/* TQ2_0 / TQ1_0 / BQ4: rows of random bytes with a finite random f16 scale at d_off of each block
 * (every 8th block the largest f16 65504, every 8th + 1 a subnormal; BQ4's zero byte random, so
 * -128..127, and -128 / 127 in every 5th / 5th + 1 block), n of 1 to 22 blocks (the kernels' groups
 * of 4 blocks and the tails) and BQ4 also 3 blocks, against activations of the five distributions:
 * vec_dot_q8 at every level == the scalar reference, bit for bit, within the documented bound of the
 * exact dot (dequantized row . x), and so does vec_dot_q8_tile (5 rows x 6 tokens: partial tiles at
 * every level) */
static void check_random_codes(qp_encoding e, size_t d_off) {
    const qp_encoding_traits *tr = qp_encoding_get(e), *at = qp_encoding_get(tr->act_encoding);
    enum { NR = 5, NT = 6 };
    const int64_t lens[] = {256, 768, 1024, 1792, 2048, 5632, 96};
    const int n_lens = tr->block_elems == 32 ? 7 : 6;
    for (int li = 0; li < n_lens; li++) {
        const int64_t n = lens[li];
        size_t wb = 0, ab = 0;
        QP_CHECK(qp_encoding_row_bytes(e, n, &wb) && qp_encoding_row_bytes(at->id, n, &ab));
        uint8_t *wq = malloc(wb * NR), *xq = malloc(ab * NT);
        float *x = malloc((size_t)n * sizeof *x * NT), *xd = malloc((size_t)n * sizeof *xd), *wd = malloc((size_t)n * sizeof *wd);
        float y[NR * NT], ref[NR * NT];
        for (size_t i = 0; i < wb * NR; i++) wq[i] = (uint8_t)(rnd() >> 56);
        for (size_t b = 0; b < wb * NR / tr->block_bytes; b++) {
            const uint16_t h = random_scale(b);
            memcpy(wq + b * tr->block_bytes + d_off, &h, 2);
            if (e == QP_ENC_BQ4 && b % 5 < 2) wq[b * tr->block_bytes + 2] = b % 5 ? 0x7F : 0x80;
        }
        for (int t = 0; t < NT; t++) {
            fill(x + (size_t)t * n, n, t % 5);
            at->quantize(x + (size_t)t * n, xq + (size_t)t * ab, n);
        }
        for (int lv = 0; lv <= 2; lv++) {
            qp_encoding_simd_force(lv);
            for (int t = 0; t < NT; t++)
                for (int r = 0; r < NR; r++) {
                    const float f = tr->vec_dot_q8(wq + (size_t)r * wb, xq + (size_t)t * ab, n);
                    if (lv == 0) ref[t * NR + r] = f;
                    QP_CHECK_MSG(memcmp(&f, &ref[t * NR + r], 4) == 0, "%s random codes n=%lld level %d (%d, %d): %.9g != %.9g",
                                 tr->name, (long long)n, lv, r, t, f, ref[t * NR + r]);
                }
            if (!tr->vec_dot_q8_tile) continue;
            tr->vec_dot_q8_tile(wq, wb, NR, xq, ab, NT, n, y, NR);
            QP_CHECK_MSG(memcmp(y, ref, sizeof y) == 0, "%s random codes tile n=%lld level %d differs from the single dots",
                         tr->name, (long long)n, lv);
        }
        qp_encoding_simd_force(-1);
        for (int t = 0; t < NT; t++) {
            at->dequantize(xq + (size_t)t * ab, xd, n);
            for (int r = 0; r < NR; r++) {
                tr->dequantize(wq + (size_t)r * wb, wd, n);
                double exact, bound, recomputed, float_part;
                exact_and_bound(at, wd, x + (size_t)t * n, xd, n, &exact, &bound, &recomputed, &float_part);
                const double err = fabs((double)ref[t * NR + r] - exact);
                QP_CHECK_MSG(err <= bound, "%s random codes n=%lld (%d, %d): |fast - exact| = %.6g > bound %.6g", tr->name,
                             (long long)n, r, t, err, bound);
                if (bound > 0 && err / bound > g_worst) g_worst = err / bound;
            }
        }
        free(wq), free(xq), free(x), free(xd), free(wd);
    }
}

/* BQ4's encoder gives one-signed blocks without a 0 a zero byte outside 0..15 (enc_bq4.md), so the
 * rows of distribution 4 that check_row dots hold such blocks */
static void check_bq4_zero_range(void) {
    const qp_encoding_traits *tr = qp_encoding_get(QP_ENC_BQ4);
    float w[256];
    uint8_t q[256 / 32 * QP_BQ4_BYTES];
    fill(w, 256, 4);
    tr->quantize_ref(w, q, 256);
    int outside = 0;
    for (int b = 0; b < 8; b++) outside += (int8_t)q[b * QP_BQ4_BYTES + 2] < 0 || (int8_t)q[b * QP_BQ4_BYTES + 2] > 15;
    QP_CHECK_MSG(outside > 0, "BQ4: no block of a one-signed row has its zero outside 0..15");
}

/* vec_dot_i8_tile (exact int8 dots, runtime.md "BitNet ... activation quantization"): rows from
 * quantize_ref (TQ2_0) or random code bytes (I2_S: the illegal code 3 included) and int8
 * activations with the extremes -128 / 127, 1..19 rows x 1..9 and 70 tokens (two 64-token groups), rows of 128 to 5632 and one past an int32
 * flush; at every level each (row, token) is the scalar vec_dot_i8's double, the level's
 * vec_dot_i8 gives it too, and nothing is written outside. */
static void check_i8_tile(const qp_encoding_traits *tr, int64_t n) {
    enum { NT = 70, NR = 19, LDY = 2 * NR };
    size_t wb = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb));
    uint8_t *wq = malloc(wb * NR);
    int8_t *a = malloc((size_t)n * NT);
    double *ref = malloc(sizeof *ref * NR * NT), *y = malloc(sizeof *y * LDY * NT);
    float *wf = malloc(sizeof *wf * (size_t)n);
    for (int r = 0; r < NR; r++) { /* block scales finite: quantize_ref's rows; else random codes */
        fill(wf, n, r % 5);
        weights_of(tr, wf, wq + (size_t)r * wb, n, wb);
    }
    free(wf);
    for (int64_t i = 0; i < n * NT; i++) a[i] = (int8_t)(rnd() >> 56);
    memset(a, 0x80, (size_t)n);     /* token 0: all -128 */
    memset(a + n, 0x7F, (size_t)n); /* token 1: all 127 */
    if (tr->flags & QP_ENC_FLAG_EXT_SCALE) memset(wq, 0xAA, wb); /* I2_S row 0: all +1 */
    qp_encoding_simd_force(0);
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < NR; r++) ref[t * NR + r] = tr->vec_dot_i8(wq + (size_t)r * wb, a + (size_t)t * n, n);
    if (tr->flags & QP_ENC_FLAG_EXT_SCALE)
        QP_CHECK_MSG(ref[0] == 128.0 * (double)-n && ref[NR] == 127.0 * (double)n, "%s: +1 row . extremes", tr->name);
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        for (int t = 0; t < NT; t++) {
            const double one = tr->vec_dot_i8(wq + (size_t)(t % NR) * wb, a + (size_t)t * n, n);
            QP_CHECK_MSG(memcmp(&one, &ref[t * NR + t % NR], sizeof one) == 0, "%s vec_dot_i8 n=%lld level %d",
                         tr->name, (long long)n, lv);
        }
        const int rows[] = {1, 3, 4, 5, 17, 19}, toks[] = {1, 2, 4, 5, 9, NT};
        for (int ri = 0; ri < 6; ri++)
            for (int ti = 0; ti < 6; ti++) {
                const int nr = rows[ri], nt = toks[ti];
                for (int i = 0; i < LDY * NT; i++) y[i] = -1.0;
                tr->vec_dot_i8_tile(wq, wb, nr, a, (size_t)n, nt, n, y, LDY);
                int bad = 0;
                for (int t = 0; t < NT; t++)
                    for (int r = 0; r < LDY; r++) {
                        const double want = (t < nt && r < nr) ? ref[t * NR + r] : -1.0;
                        bad += memcmp(&want, &y[t * LDY + r], sizeof want) != 0;
                    }
                QP_CHECK_MSG(bad == 0, "%s i8 tile n=%lld level %d: %d rows x %d tokens, %d pairs wrong or written outside",
                             tr->name, (long long)n, lv, nr, nt, bad);
            }
    }
    qp_encoding_simd_force(-1);
    free(wq), free(a), free(ref), free(y);
}

/* zero activations -> 0; a single nonzero product -> that product (exact in float) */
static void check_hand(const qp_encoding_traits *tr) {
    const qp_encoding_traits *at = qp_encoding_get(tr->act_encoding);
    const int64_t n = 512;
    float w[512], x[512] = {0}, wd[512];
    size_t wb = 0, ab = 0;
    QP_CHECK(qp_encoding_row_bytes(tr->id, n, &wb) && qp_encoding_row_bytes(at->id, n, &ab));
    uint8_t *wq = malloc(wb), *xq = malloc(ab);
    fill(w, n, 0);
    weights_of(tr, w, wq, n, wb);
    tr->dequantize(wq, wd, n);
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        at->quantize(x, xq, n);
        QP_CHECK_MSG(tr->vec_dot_q8(wq, xq, n) == 0.0f, "%s: zero activations, level %d", tr->name, lv);
        x[300] = 2.0f; /* quantizes exactly: 127 * (2/127) */
        at->quantize(x, xq, n);
        float xd[512];
        at->dequantize(xq, xd, n);
        const float f = tr->vec_dot_q8(wq, xq, n);
        QP_CHECK_MSG(fabsf(f - wd[300] * xd[300]) <= 1e-6f * fabsf(wd[300] * xd[300]) + 1e-30f,
                     "%s: one product, level %d: %.9g vs %.9g", tr->name, lv, f, wd[300] * xd[300]);
        x[300] = 0.0f;
    }
    qp_encoding_simd_force(-1);
    free(wq), free(xq);
}

/* Q8_0 rows (their levels are the stored bytes): the result is the documented float order,
 * recomputed here from the blocks: per block the exact integer sum times (d_w d_a) added into
 * chain b mod 4, then (s0 + s2) + (s1 + s3), at every level; a single chain (all blocks in
 * order) is another float result on these rows, so the order is pinned. */
static void check_q8_0_chains(void) {
    const qp_encoding_traits *tr = qp_encoding_get(QP_ENC_Q8_0);
    int differs = 0;
    for (int64_t nb = 1; nb <= 67; nb += 6) {
        const int64_t n = 32 * nb;
        size_t bytes = 0;
        QP_CHECK(qp_encoding_row_bytes(QP_ENC_Q8_0, n, &bytes));
        float *w = malloc((size_t)n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
        uint8_t *wq = malloc(bytes), *xq = malloc(bytes);
        fill(w, n, (int)(nb % 5));
        fill(x, n, (int)((nb + 2) % 5));
        tr->quantize_ref(w, wq, n);
        tr->quantize(x, xq, n);
        float s[4] = {0}, one = 0;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *wb = wq + 34 * b, *ab = xq + 34 * b;
            int32_t isum = 0;
            for (int j = 0; j < 32; j++) isum += (int32_t)(int8_t)wb[2 + j] * (int8_t)ab[2 + j];
            const float d = qp_fp16_to_fp32((uint16_t)(wb[0] | wb[1] << 8)) * qp_fp16_to_fp32((uint16_t)(ab[0] | ab[1] << 8));
            s[b % 4] = s[b % 4] + d * (float)isum;
            one = one + d * (float)isum;
        }
        const float want = (s[0] + s[2]) + (s[1] + s[3]);
        for (int lv = 0; lv <= 2; lv++) {
            qp_encoding_simd_force(lv);
            const float got = tr->vec_dot_q8(wq, xq, n);
            QP_CHECK_MSG(memcmp(&got, &want, 4) == 0, "Q8_0 %lld blocks level %d: %.9g, the four chains give %.9g",
                         (long long)nb, lv, got, want);
        }
        qp_encoding_simd_force(-1);
        differs += memcmp(&one, &want, 4) != 0;
        free(w), free(x), free(wq), free(xq);
    }
    QP_CHECK_MSG(differs > 0, "no row where the chain order changes the float result");
}

int main(void) {
    int n_enc = 0, n_tile = 0, n_packed = 0;
    for (int e = 0; e < QP_ENC_COUNT; e++) {
        const qp_encoding_traits *tr = qp_encoding_get((qp_encoding)e);
        if (!tr->vec_dot_q8) continue;
        n_enc++;
        const qp_encoding_traits *at = qp_encoding_get(tr->act_encoding);
        QP_CHECK_MSG(at && at->quantize && (tr->quantize_ref || tr->quantize_tensor) && tr->dequantize,
                     "%s: fast dot without its activation encoding or reference functions", tr->name);
        if (!at || !at->quantize) continue;
        /* F16: any length (tails); 32-element blocks: block counts that are not a multiple of the
           four float chains too (1, 3, 5, 65 blocks) */
        const int64_t lens_f16[] = {256, 512, 2048, 5632, 1, 63, 100, 2049};
        const int64_t lens_q[] = {256, 512, 2048, 5632, 32, 96, 160, 2080};
        const bool f16 = (at->flags & QP_ENC_FLAG_FLOAT) != 0, legacy = at->block_elems == 32;
        const int64_t *lens = f16 ? lens_f16 : lens_q;
        const int n_lens = f16 || legacy ? 8 : 4;
        for (int li = 0; li < n_lens; li++)
            for (int wdist = 0; wdist < 5; wdist++)
                for (int xdist = 0; xdist < 5; xdist++) check_row(tr, lens[li], wdist, xdist);
        check_hand(tr);
        if (tr->vec_dot_q8_tile) {
            n_tile++;
            check_tile(tr, 256);
            check_tile(tr, 2048);
            if (f16) check_tile(tr, 100), check_tile(tr, 40); /* a partial 64-element step; no whole one */
            if (legacy) check_tile(tr, 96), check_tile(tr, 2080); /* 3 and 65 blocks: partial chain groups */
        }
        if (tr->vec_dot_q8_packed) {
            n_packed++;
            check_packed(tr, 256, -1);
            check_packed(tr, 2048, -1);
        }
    }
    check_random_codes(QP_ENC_TQ2_0, QP_TQ2_0_OFF_D);
    check_packed(qp_encoding_get(QP_ENC_TQ2_0), 5632, QP_TQ2_0_OFF_D);
    check_packed(qp_encoding_get(QP_ENC_Q4_0), 2048, 0); /* every code pair re-paired into the BQ4 layout */
    check_packed(qp_encoding_get(QP_ENC_Q6_K), 2048, QP_Q6_K_OFF_D); /* every code, scales -128 .. 127 */
    check_packed_i8(qp_encoding_get(QP_ENC_TQ2_0), 256, QP_TQ2_0_OFF_D);
    check_packed_i8(qp_encoding_get(QP_ENC_TQ2_0), 2048, QP_TQ2_0_OFF_D);
    check_packed(qp_encoding_get(QP_ENC_I2_S), 5632, -1); /* random code bytes, the illegal 3 too */
    check_packed_i8(qp_encoding_get(QP_ENC_I2_S), 256, -1);
    check_packed_i8(qp_encoding_get(QP_ENC_I2_S), 5632, -1);
    check_random_codes(QP_ENC_TQ1_0, QP_TQ1_0_OFF_D);
    check_random_codes(QP_ENC_BQ4, 0);
    check_bq4_zero_range();
    int n_i8_tile = 0;
    for (int e = 0; e < QP_ENC_COUNT; e++) {
        const qp_encoding_traits *tr = qp_encoding_get((qp_encoding)e);
        if (!tr->vec_dot_i8_tile) continue;
        QP_CHECK_MSG(tr->vec_dot_i8 != NULL, "%s: an int8 tile without vec_dot_i8", tr->name);
        n_i8_tile++;
        const int64_t lens[] = {tr->block_elems, 2048, 5632, 512 * 128 + 2 * tr->block_elems};
        for (int li = 0; li < 4; li++) check_i8_tile(tr, lens[li]);
    }
    QP_CHECK_MSG(n_i8_tile >= 2, "only %d encodings have a rows x tokens int8 dot", n_i8_tile);
    check_q8_0_chains();
    QP_CHECK_MSG(n_packed >= 5, "only %d encodings have repacked rows", n_packed);
    QP_CHECK_MSG(n_tile >= 10, "only %d encodings have a rows x tokens fast dot", n_tile);
    QP_CHECK_MSG(n_enc >= 13, "only %d encodings have a fast dot", n_enc);
    printf("fast dots: %d encodings, worst |fast - exact| / bound = %.3f (8-bit activations), %.3f "
           "(F16); int8 tiles: %d encodings; repacked: %d\n", n_enc, g_worst, g_worst_16, n_i8_tile, n_packed);
    return qp_test_finish();
}
