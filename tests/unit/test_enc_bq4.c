/* BQ4 encoder (encodings/enc_bq4.md "Encoder"): the error bound, the base encoder it must never
 * be worse than, zero kept in 0..15 for blocks with both signs or a 0, a hand-worked one-signed
 * vector, and one encoder for every caller (table, quantize_tensor, the bullet writer's helper).
 * Decoding here is bullet-core's formula written out again (value = (q - (int8)zero) * f16
 * scale), and the base encoder is re-implemented independently from the spec text. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "writers/bullet_writer.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}

/* f16 -> f32 by the IEEE-754 half definition (not through core/fp16.c). */
static float half_to_float(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Smallest f16 >= v (v > 0, finite, <= 65504), by scanning the positive f16 patterns. */
static uint16_t half_ceil(double v) {
    uint16_t lo = 1, hi = 0x7bff;
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if ((double)half_to_float(mid) >= v) hi = mid;
        else lo = (uint16_t)(mid + 1);
    }
    return lo;
}

static void decode(const uint8_t *b, float *y) { /* bullet-core: (q - zero) * scale */
    float s = half_to_float((uint16_t)(b[0] | b[1] << 8));
    int zero = (int8_t)b[2];
    for (int i = 0; i < 32; i++) {
        int q = (b[4 + i / 2] >> (4 * (i & 1))) & 15;
        y[i] = (float)(q - zero) * s;
    }
}

static double sse(const float *x, const float *y) {
    double s = 0;
    for (int i = 0; i < 32; i++) s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    return s;
}

/* Step 1 of the spec (base) for a block that is not all-zero and not "0 and one value". */
static void base_encode(const float *x, uint8_t *b) {
    float lo = 0, hi = 0;
    for (int i = 0; i < 32; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    uint16_t sh = half_ceil(((double)hi - lo) / 15.0);
    float s = half_to_float(sh);
    float zr = roundf(-lo / s);
    int zero = zr < 0 ? 0 : zr > 15 ? 15 : (int)zr;
    memset(b, 0, 20);
    b[0] = (uint8_t)sh, b[1] = (uint8_t)(sh >> 8), b[2] = (uint8_t)zero;
    for (int i = 0; i < 32; i++) {
        float qf = roundf(x[i] / s) + (float)zero;
        int q = qf < 0 ? 0 : qf > 15 ? 15 : (int)qf;
        b[4 + i / 2] |= (uint8_t)(q << (4 * (i & 1)));
    }
}

static bool two_level(const float *x) { /* only 0 and one value c */
    float c = 0;
    for (int i = 0; i < 32; i++) {
        if (x[i] == 0) continue;
        if (c == 0) c = x[i];
        else if (x[i] != c) return false;
    }
    return true;
}

static void gen_block(int style, float *x) {
    for (int i = 0; i < 32; i++) {
        double u = urand(), g = sqrt(-2 * log(1 - urand())) * cos(6.283185307179586 * u);
        switch (style) {
        case 0: x[i] = (float)g; break;                               /* both signs */
        case 1: x[i] = (float)(0.5 + urand()); break;                 /* norm weights, > 0 */
        case 2: x[i] = (float)(-3.0 - 2 * urand()); break;            /* negative, no 0 */
        case 3: x[i] = (float)(1e-3 * g + 0.02); break;               /* small, mostly > 0 */
        case 4: x[i] = i % 5 == 0 ? 0.0f : (float)(1 + urand()); break; /* one sign with 0s */
        case 5: x[i] = (float)(1000 + 1e-3 * urand()); break;        /* narrow, far from 0 */
        default: x[i] = (float)(200 * g); break;                      /* wide */
        }
    }
}

int main(void) {
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_BQ4);
    QP_CHECK(t && t->quantize_ref && t->block_elems == 32 && t->block_bytes == 20);

    /* 1. hand-worked one-signed vector: x = 1 + (i % 16) / 16. min 1, max 1.9375, d = 1/16,
     * k0 = 16: levels 16/16 .. 31/16 hold every value exactly; scale 0x2C00, zero -16 (0xF0),
     * q = i % 16. The base encoder (zero 0, scale f16↑(1.9375/15)) cannot be exact. */
    float x[32], y[32];
    uint8_t b[20], base[20];
    for (int i = 0; i < 32; i++) x[i] = 1.0f + (float)(i % 16) / 16.0f;
    t->quantize_ref(x, b, 32);
    static const uint8_t want[20] = {0x00, 0x2C, 0xF0, 0x00, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA,
                                     0xDC, 0xFE, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
    QP_CHECK_MSG(memcmp(b, want, 20) == 0, "bytes %02x %02x %02x %02x %02x", b[0], b[1], b[2], b[3], b[4]);
    decode(b, y);
    QP_CHECK(memcmp(x, y, sizeof x) == 0);
    base_encode(x, base);
    decode(base, y);
    QP_CHECK(sse(x, y) > 0);

    /* 2. random blocks of every style: |err| <= stored scale / 2; SSE <= the base's; zero in
     * 0..15 whenever the block has both signs or a 0 (and then 0 decodes exactly) */
    int n_blocks = 0, bound_bad = 0, worse = 0, zero_bad = 0, improved = 0, outside = 0;
    for (int style = 0; style < 7; style++) {
        for (int rep = 0; rep < 3000; rep++, n_blocks++) {
            gen_block(style, x);
            t->quantize_ref(x, b, 32);
            decode(b, y);
            float s = half_to_float((uint16_t)(b[0] | b[1] << 8));
            for (int i = 0; i < 32; i++)
                if (fabs((double)x[i] - y[i]) > (double)s * 0.5 * (1 + 1e-6)) bound_bad++;
            if (b[3] != 0) bound_bad++;
            if (!two_level(x)) {
                base_encode(x, base);
                float yb[32];
                decode(base, yb);
                double eo = sse(x, y), eb = sse(x, yb);
                if (eo > eb) worse++;
                if (eo < eb) improved++;
            }
            float mn = x[0], mx = x[0];
            for (int i = 0; i < 32; i++) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
            bool mixed = mn <= 0 && mx >= 0;
            if (mixed && b[2] > 15) zero_bad++;
            if (!mixed && b[2] > 15) outside++;
            for (int i = 0; i < 32; i++)
                if (x[i] == 0 && y[i] != 0) zero_bad++;
        }
    }
    QP_CHECK_MSG(bound_bad == 0, "%d elements over scale/2 (of %d blocks)", bound_bad, n_blocks);
    QP_CHECK_MSG(worse == 0, "%d blocks worse than the base encoder", worse);
    QP_CHECK_MSG(zero_bad == 0, "%d mixed-sign blocks with zero outside 0..15 or 0 inexact", zero_bad);
    QP_CHECK_MSG(improved > 3000 && outside > 1000, "refinement used on %d blocks, zero outside "
                 "0..15 on %d", improved, outside);
    printf("%d blocks: %d improved over the base encoder, %d one-signed with zero outside 0..15\n",
           n_blocks, improved, outside);

    /* 3. constant and all-zero blocks stay exact (the refinement never touches them) */
    static const float consts[] = {0.0f, 1.0f, -1.0f, 0.0078125f, 1000.0f, -65504.0f};
    for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
        for (int i = 0; i < 32; i++) x[i] = consts[k];
        t->quantize_ref(x, b, 32);
        decode(b, y);
        QP_CHECK_MSG(memcmp(x, y, sizeof x) == 0, "constant %g", (double)consts[k]);
    }

    /* 4. non-finite input does not produce a non-finite scale (the reader would refuse it) */
    for (int i = 0; i < 32; i++) x[i] = (float)i;
    x[3] = NAN;
    t->quantize_ref(x, b, 32);
    QP_CHECK(isfinite(half_to_float((uint16_t)(b[0] | b[1] << 8))));
    x[3] = INFINITY;
    t->quantize_ref(x, b, 32);
    QP_CHECK(isfinite(half_to_float((uint16_t)(b[0] | b[1] << 8))));

    /* 5. one encoder: quantize_tensor and the bullet writer's helper give the table's bytes */
    enum { N = 32 * 64 };
    static float xs[N];
    static uint8_t a1[N / 32 * 20], a2[N / 32 * 20], a3[N / 32 * 20];
    for (int i = 0; i < N; i++) xs[i] = i % 64 < 32 ? (float)(0.8 + 0.4 * urand()) : (float)(urand() - 0.5);
    t->quantize_ref(xs, a1, N);
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_BQ4, xs, a2, N));
    memcpy(a3, a2, sizeof a3);
    qp_bullet_bq4_refine(xs, a3, N);
    QP_CHECK(memcmp(a1, a2, sizeof a1) == 0);
    QP_CHECK(memcmp(a1, a3, sizeof a1) == 0);
    return qp_test_finish();
}
