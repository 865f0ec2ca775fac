/* SIMD dots of the plain float encodings (F32, F16, BF16) against the scalar reference, and the
 * bit-identities the runtime's batched matrix product relies on (encodings/plain_kernels.h):
 *  - |simd - scalar| <= 2 * (n + 8) * 2^-24 * sum |w_i x_i| (both are float sums of the same
 *    exact products in different orders, one with FMA: the classical gamma_n bound for each);
 *    the measured worst relative error is printed;
 *  - at every level: dot(F16/BF16 row) == dot(widened F32 row), bit for bit;
 *  - qp_f32_dot_multi / qp_f32_dot_multi2 == the single F32 dots, bit for bit (every vector
 *    count 1..7);
 *  - F16/BF16 dequantize through F16C equals the scalar bits, Inf/NaN/subnormals included.
 *  - Q8_0/Q4_K/Q6_K SIMD dots equal the F32 dot of the dequantized row at their level, bit for
 *    bit (so the runtime's batched products equal its decode products).
 * Lengths 1..67, 255, 256, 1408, 4096 cover every tail case of the 32/8-element structure. */
#include <stdint.h>
#include <string.h>

#include "encodings/plain_kernels.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#define MAXN 4096
#define NX 7

static const qp_encoding k_encs[] = {QP_ENC_F32, QP_ENC_F16, QP_ENC_BF16};

static float bits_of(float f, uint32_t *u) {
    memcpy(u, &f, 4);
    return f;
}
static bool same_bits(float a, float b) {
    uint32_t ua, ub;
    bits_of(a, &ua);
    bits_of(b, &ub);
    return ua == ub;
}

static void test_len(int64_t n, double *worst_rel) {
    static float w[MAXN], wd[MAXN], x[NX * MAXN], y[NX];
    static uint8_t row[MAXN * 4];
    for (int64_t i = 0; i < n; i++) w[i] = frand() * (i % 7 == 0 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < NX * n; i++) x[i] = frand();
    for (size_t e = 0; e < sizeof k_encs / sizeof k_encs[0]; e++) {
        const qp_encoding_traits *tr = qp_encoding_get(k_encs[e]);
        tr->quantize_ref(w, row, n);
        qp_encoding_simd_force(0);
        tr->dequantize(row, wd, n);
        float ref = tr->vec_dot_f32(row, x, n);
        double bound = 0.0;
        for (int64_t i = 0; i < n; i++) bound += fabs((double)wd[i] * (double)x[i]);
        /* scalar: a F16/BF16 dot is the F32 dot of the widened row */
        QP_CHECK_MSG(same_bits(ref, qp_encoding_get(QP_ENC_F32)->vec_dot_f32(wd, x, n)),
                     "%s n=%lld scalar", tr->name, (long long)n);
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
            qp_encoding_simd_force(lv);
            float d = tr->vec_dot_f32(row, x, n);
            float d32 = qp_encoding_get(QP_ENC_F32)->vec_dot_f32(wd, x, n);
            QP_CHECK_MSG(same_bits(d, d32), "%s n=%lld level %d: %.9g vs widened %.9g", tr->name,
                         (long long)n, lv, (double)d, (double)d32);
            double tol = 2.0 * (double)(n + 8) * 0x1p-24 * bound;
            QP_CHECK_MSG(fabs((double)d - (double)ref) <= tol,
                         "%s n=%lld level %d: %.9g vs scalar %.9g (tol %.3g)", tr->name,
                         (long long)n, lv, (double)d, (double)ref, tol);
            if (bound > 0 && fabs((double)d - (double)ref) / bound > *worst_rel)
                *worst_rel = fabs((double)d - (double)ref) / bound;
            /* widening through the traits is exact at every level */
            static float wl[MAXN];
            tr->dequantize(row, wl, n);
            QP_CHECK_MSG(memcmp(wl, wd, (size_t)n * 4) == 0, "%s n=%lld level %d dequantize",
                         tr->name, (long long)n, lv);
            if (e != 0) continue;
            for (int nx = 1; nx <= NX; nx++) {
                qp_f32_dot_multi(wd, x, (size_t)n, nx, n, y, 1);
                /* two rows: wd and the row read backwards from the activations' end */
                static float w2[MAXN], y0[2 * NX];
                for (int64_t i = 0; i < n; i++) w2[i] = x[NX * n - 1 - i];
                qp_f32_dot_multi2(wd, w2, x, (size_t)n, nx, n, y0, y0 + 1, 2);
                for (int t = 0; t < nx; t++) {
                    float s = qp_encoding_get(QP_ENC_F32)->vec_dot_f32(wd, x + t * n, n);
                    float s2 = qp_encoding_get(QP_ENC_F32)->vec_dot_f32(w2, x + t * n, n);
                    QP_CHECK_MSG(same_bits(y[t], s), "multi n=%lld nx=%d t=%d level %d",
                                 (long long)n, nx, t, lv);
                    QP_CHECK_MSG(same_bits(y0[2 * t], s) && same_bits(y0[2 * t + 1], s2),
                                 "multi2 n=%lld nx=%d t=%d level %d", (long long)n, nx, t, lv);
                }
            }
        }
        qp_encoding_simd_force(-1);
    }
}

/* Q8_0, Q4_K, Q6_K (rows of whole blocks): the SIMD dot equals the F32 dot of the dequantized row at its
 * level bit for bit, so the runtime's batched path (dequantize + F32 dots) equals its decode
 * path; and it is within the summation bound of the scalar reference. */
static void test_blocks(qp_encoding enc, double *worst_rel) {
    static float w[MAXN], wd[MAXN], x[MAXN];
    static uint8_t row[MAXN / 32 * 34];
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    const int64_t lens[] = {32, 64, 96, 160, 256, 512, 768, 1280, 1408, 4096};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        if (n % tr->block_elems != 0) continue;
        for (int64_t i = 0; i < n; i++) {
            w[i] = frand() * (i % 5 == 0 ? 4.0f : 1.0f);
            x[i] = frand();
        }
        tr->quantize_ref(w, row, n);
        tr->dequantize(row, wd, n);
        qp_encoding_simd_force(0);
        float ref = tr->vec_dot_f32(row, x, n);
        double bound = 0.0;
        for (int64_t i = 0; i < n; i++) bound += fabs((double)wd[i] * (double)x[i]);
        for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
            qp_encoding_simd_force(lv);
            float d = tr->vec_dot_f32(row, x, n);
            float d32 = qp_encoding_get(QP_ENC_F32)->vec_dot_f32(wd, x, n);
            QP_CHECK_MSG(same_bits(d, d32), "%s n=%lld level %d: %.9g vs dequantized %.9g",
                         tr->name, (long long)n, lv, (double)d, (double)d32);
            QP_CHECK_MSG(fabs((double)d - (double)ref) <= 2.0 * (double)(n + 8) * 0x1p-24 * bound,
                         "%s n=%lld level %d: %.9g vs scalar %.9g", tr->name, (long long)n, lv,
                         (double)d, (double)ref);
            if (bound > 0 && fabs((double)d - (double)ref) / bound > *worst_rel)
                *worst_rel = fabs((double)d - (double)ref) / bound;
        }
        qp_encoding_simd_force(-1);
    }
}

/* Every F16 bit pattern widened through the traits at each level equals qp_fp16_to_fp32. */
static void test_f16_all_patterns(void) {
    static uint8_t h[65536 * 2];
    static float y[65536];
    for (uint32_t i = 0; i < 65536; i++) {
        h[2 * i] = (uint8_t)(i & 0xff);
        h[2 * i + 1] = (uint8_t)(i >> 8);
    }
    for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
        qp_encoding_simd_force(lv);
        qp_encoding_get(QP_ENC_F16)->dequantize(h, y, 65536);
        int bad = 0;
        for (uint32_t i = 0; i < 65536; i++)
            if (!same_bits(y[i], qp_fp16_to_fp32((uint16_t)i))) bad++;
        QP_CHECK_MSG(bad == 0, "level %d: %d F16 patterns widen differently", lv, bad);
        qp_encoding_get(QP_ENC_BF16)->dequantize(h, y, 65536);
        bad = 0;
        for (uint32_t i = 0; i < 65536; i++)
            if (!same_bits(y[i], qp_bf16_to_fp32((uint16_t)i))) bad++;
        QP_CHECK_MSG(bad == 0, "level %d: %d BF16 patterns widen differently", lv, bad);
    }
    qp_encoding_simd_force(-1);
}

int main(void) {
    qp_test_max_simd_level();
    double worst = 0.0;
    for (int64_t n = 1; n <= 67; n++) test_len(n, &worst);
    const int64_t big[] = {255, 256, 1408, 4096};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) test_len(big[i], &worst);
    test_f16_all_patterns();
    test_blocks(QP_ENC_Q8_0, &worst);
    test_blocks(QP_ENC_Q4_K, &worst);
    test_blocks(QP_ENC_Q6_K, &worst);
    printf("simd level %s; worst |simd - scalar| / sum|w x| = %.3g\n", qp_encoding_simd_level(),
           worst);
    return qp_test_finish();
}
