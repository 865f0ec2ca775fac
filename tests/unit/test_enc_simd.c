/* Every SIMD path of the encodings equals the scalar reference, bit for bit, on varied data:
 * quantizers (TQ1_0, TQ2_0, QK256, BitNet32F16, Q4_0, Q5_0, Q8_0: traits quantize vs quantize_ref;
 * I2_S, I2_S_ARM quantize_tensor and the absmean quantizer: level 0 vs each SIMD level), and the
 * int8 dots (vec_dot_i8 on random bytes, every code pattern, against the scalar path). Data mixes
 * normal values with rounding ties (x * 1/absmax exactly +-0.5, +-1.5), +-0, subnormals, +-inf and
 * NaN. The absmean scale is also checked against the documented 16-lane double sum computed here.
 * Levels above what the CPU has are clamped by qp_encoding_simd_force (then they repeat a level).
 * On a CPU without SIMD (or with QP_FORCE_SCALAR=1) every comparison would be the scalar path
 * against itself: the test skips there (exit 77, a skip even in CI). */
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static uint64_t g_s = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { g_s ^= g_s << 13; g_s ^= g_s >> 7; g_s ^= g_s << 17; return g_s; }
static float unif(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0); }
static float gauss(void) {
    float u = unif() + 1e-12f, v = unif();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* n values, a pattern per 32-group; `specials` allows NaN / inf */
static void fill(float *x, int64_t n, int specials) {
    for (int64_t g = 0; g < n; g += 32) {
        const int kind = (int)(rnd() % (specials ? 12 : 10));
        const float c = gauss();
        for (int k = 0; k < 32 && g + k < n; k++) {
            float v;
            switch (kind) {
            case 0: v = gauss(); break;
            case 1: v = (float)((int)(rnd() % 5) - 2) * 0.5f; break;   /* ties: +-0.5, +-1 of amax 2 */
            case 2: v = (float)((int)(rnd() % 7) - 3) * 0.75f; break;  /* +-1.5 ties for QK256 */
            case 3: v = (rnd() & 1) ? 0.0f : -0.0f; break;
            case 4: v = gauss() * 1e-39f; break;                       /* subnormal: 1/absmax = inf */
            case 5: v = c; break;
            case 6: v = (float)((int)(rnd() % 3) - 1) * 0.37f; break;  /* ternary */
            case 7: v = gauss() * 3e4f; break;
            case 8: v = (float)((int)(rnd() % 17) - 8); break;
            case 9: v = gauss() * 1e-7f; break;
            case 10: v = (k == 3) ? NAN : gauss(); break;
            default: v = (k == 7) ? ((rnd() & 1) ? INFINITY : -INFINITY) : gauss(); break;
            }
            x[g + k] = v;
        }
    }
}

enum { NMAX = 8192 };
static float g_x[NMAX];
static uint8_t g_a[NMAX * 2 + 64], g_b[NMAX * 2 + 64];

static void test_row_quantizers(void) {
    static const qp_encoding encs[] = {QP_ENC_TQ1_0, QP_ENC_TQ2_0, QP_ENC_QK256, QP_ENC_BITNET32F16,
                                       QP_ENC_Q4_0, QP_ENC_Q5_0, QP_ENC_Q8_0};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        const qp_encoding_traits *t = qp_encoding_get(encs[e]);
        int64_t bad = 0, blocks = 0;
        for (int rep = 0; rep < 60; rep++) {
            const int64_t n = t->block_elems * (1 + (int64_t)(rnd() % (uint64_t)(NMAX / t->block_elems)));
            fill(g_x, n, rep % 2);
            size_t rb = 0;
            qp_encoding_row_bytes(encs[e], n, &rb);
            t->quantize_ref(g_x, g_a, n);
            for (int lv = 1; lv <= 2; lv++) {
                qp_encoding_simd_force(lv);
                memset(g_b, 0xCD, rb);
                t->quantize(g_x, g_b, n);
                for (int64_t k = 0; k < n / t->block_elems; k++)
                    if (memcmp(g_a + k * t->block_bytes, g_b + k * t->block_bytes, t->block_bytes) != 0) {
                        if (bad < 3) fprintf(stderr, "%s level %d: block %lld differs\n", t->name, lv, (long long)k);
                        bad++;
                    }
                blocks += n / t->block_elems;
            }
            qp_encoding_simd_force(-1);
        }
        QP_CHECK_MSG(bad == 0, "%s: %lld of %lld blocks differ from quantize_ref", t->name, (long long)bad,
                     (long long)blocks);
    }
}

/* the documented absmean scale: |x| in double into lane i % 16, lanes added pairwise */
static float lanes_mean(const float *x, int64_t n) {
    double l[16] = {0};
    for (int64_t i = 0; i < n; i++) l[i % 16] += fabs((double)x[i]);
    for (int w = 16; w > 1; w /= 2)
        for (int k = 0; k < w / 2; k++) l[k] = l[2 * k] + l[2 * k + 1];
    float m = n > 0 ? (float)(l[0] / (double)n) : 0.0f;
    return m >= 1e-5f ? m : 1e-5f;
}

static void test_tensor_quantizers(void) {
    static int8_t q0[NMAX], q1[NMAX];
    int64_t bad = 0, runs = 0;
    for (int rep = 0; rep < 250; rep++) {
        const int shape = rep % 10;
        int64_t n = 128 * (1 + (int64_t)(rnd() % (NMAX / 128)));
        if (shape == 0) { /* ternary {-m, 0, m} */
            /* also below BitNet's 1e-6 zero threshold, and exactly at it (1e-6f < 1e-6) */
            const float m = rep % 24 == 0 ? 3e-7f : rep % 24 == 8 ? 1e-6f : fabsf(gauss()) + 0.1f;
            for (int64_t i = 0; i < n; i++) g_x[i] = (float)((int)(rnd() % 3) - 1) * m;
        } else if (shape == 1) {
            memset(g_x, 0, sizeof g_x);
        } else if (shape == 8 || shape == 9) { /* I2_S one pass: ternary after a run of +-0 ... */
            const float m = rep % 40 == 8 ? INFINITY : rep % 40 == 18 ? 1e-6f : fabsf(gauss()) + 0.1f;
            const int64_t lead = (int64_t)(rnd() % (uint64_t)n);
            for (int64_t i = 0; i < n; i++)
                g_x[i] = i < lead ? ((rnd() & 1) ? 0.0f : -0.0f) : (float)((int)(rnd() % 3) - 1) * m;
            if (shape == 9) { /* ... broken by one element: 1 ulp off, NaN, inf or half */
                const int64_t p = (rnd() & 1) ? n - 1 - (int64_t)(rnd() % 3) : (int64_t)(rnd() % (uint64_t)n);
                const int k = (int)(rnd() % 4);
                g_x[p] = k == 0 ? nextafterf(m, 0.0f) : k == 1 ? NAN : k == 2 ? -INFINITY : -0.5f * m;
            }
        } else if (shape == 2) { /* |x| = 1, 3 alternating: mean 2, so x * (1/mean) = +-0.5 exactly */
            for (int64_t i = 0; i < n; i++) g_x[i] = (float)(1 + 2 * (i & 1)) * ((rnd() & 1) ? 1.0f : -1.0f);
        } else {
            fill(g_x, n, shape >= 6);
        }
        for (int e = 0; e < 2; e++) {
            const qp_encoding enc = e ? QP_ENC_I2_S_ARM : QP_ENC_I2_S;
            size_t tb = 0;
            qp_encoding_tensor_bytes(enc, n, &tb);
            qp_encoding_simd_force(0);
            QP_CHECK(qp_encoding_quantize_tensor(enc, g_x, g_a, n));
            for (int lv = 1; lv <= 2; lv++) {
                qp_encoding_simd_force(lv);
                memset(g_b, 0xCD, tb);
                qp_encoding_quantize_tensor(enc, g_x, g_b, n);
                if (memcmp(g_a, g_b, tb) != 0) {
                    if (bad < 3) fprintf(stderr, "%s level %d shape %d n %lld differs\n", enc ? "i2_s_arm" : "i2_s", lv, shape, (long long)n);
                    bad++;
                }
                runs++;
            }
        }
        /* absmean on any length (tails of 1..15 elements) */
        n -= (int64_t)(rnd() % 100);
        if (n < 1) n = 1;
        float s0, s1;
        qp_encoding_simd_force(0);
        qp_ternary_absmean(g_x, n, q0, &s0);
        int has_nan = 0;
        for (int64_t i = 0; i < n; i++) has_nan |= g_x[i] != g_x[i];
        if (!has_nan) QP_CHECK_MSG(s0 == lanes_mean(g_x, n), "absmean scale %.9g vs %.9g", s0, lanes_mean(g_x, n));
        for (int lv = 1; lv <= 2; lv++) {
            qp_encoding_simd_force(lv);
            memset(q1, 0x55, sizeof q1);
            qp_ternary_absmean(g_x, n, q1, &s1);
            uint32_t b0, b1;
            memcpy(&b0, &s0, 4), memcpy(&b1, &s1, 4);
            if (b0 != b1 || memcmp(q0, q1, (size_t)n) != 0) {
                if (bad < 3) fprintf(stderr, "absmean level %d shape %d n %lld differs\n", lv, shape, (long long)n);
                bad++;
            }
            runs++;
        }
        qp_encoding_simd_force(-1);
    }
    QP_CHECK_MSG(bad == 0, "%lld of %lld whole-tensor runs differ from level 0", (long long)bad, (long long)runs);
}

/* Large tensors (196608 elements, several stats chunks' worth of lanes): normal data, a strided
 * 100x outlier pattern, |x| = 1, 3 (every 1 exactly on the rounding threshold), ternary input, one
 * NaN, slowly varying scale, ternary input broken by its last element (the I2_S one pass falls
 * back at the end) and ternary input after 100000 zeros, and a tail of 5 elements for absmean;
 * every level equals level 0. */
static void test_large_absmean(void) {
    enum { NL = 3 << 16 };
    static float x[NL + 5];
    static int8_t q0[NL + 5], q1[NL + 5];
    static uint8_t a[NL / 4 + 32], b[NL / 4 + 32];
    int bad = 0;
    for (int shape = 0; shape < 8; shape++) {
        for (int64_t i = 0; i < NL + 5; i++) {
            switch (shape) {
            case 0: x[i] = gauss(); break;
            case 1: x[i] = i % 1024 < 16 ? gauss() * 100.0f : gauss(); break; /* sample says 100x */
            case 2: x[i] = (float)(1 + 2 * (i & 1)) * ((rnd() & 1) ? 1.0f : -1.0f); break;
            case 3: x[i] = (float)((int)(rnd() % 3) - 1) * 0.5f; break;
            case 4: x[i] = i == 777 ? NAN : gauss(); break;
            case 6: x[i] = i == NL - 1 ? 0.25f : (float)((int)(rnd() % 3) - 1) * 0.5f; break;
            case 7: x[i] = i < 100000 ? 0.0f : (float)((int)(rnd() % 3) - 1) * 0.5f; break;
            default: x[i] = gauss() * ((i / 4096) % 2 ? 1.02f : 0.98f); break;
            }
        }
        for (int e = 0; e < 3; e++) {
            const int64_t n = e == 2 ? NL + 5 : NL;
            for (int lv = 0; lv <= 2; lv++) {
                qp_encoding_simd_force(lv);
                uint8_t *o = lv ? b : a;
                int8_t *q = lv ? q1 : q0;
                float s = 0.0f, s0 = 0.0f;
                if (e < 2) {
                    memset(o, 0xCD, sizeof a);
                    qp_encoding_quantize_tensor(e ? QP_ENC_I2_S_ARM : QP_ENC_I2_S, x, o, n);
                } else {
                    memset(q, 0x55, sizeof q0);
                    qp_ternary_absmean(x, n, q, lv ? &s : &s0);
                }
                if (lv == 0) continue;
                const int same = e < 2 ? memcmp(a, b, sizeof a) == 0 : (memcmp(q0, q1, (size_t)n) == 0);
                if (!same) {
                    if (bad < 3) fprintf(stderr, "large absmean: shape %d kind %d level %d differs\n", shape, e, lv);
                    bad++;
                }
                if (e == 2) {
                    qp_encoding_simd_force(0);
                    qp_ternary_absmean(x, n, q0, &s0);
                    if (memcmp(&s, &s0, 4) != 0) bad++;
                }
            }
        }
    }
    qp_encoding_simd_force(-1);
    QP_CHECK_MSG(bad == 0, "large-tensor absmean / I2_S: %d runs differ from level 0", bad);
}

/* vec_dot_i8 on random bytes (every code, incl. TQ2_0 / I2_S code 3) with finite f16 scales: each
 * SIMD level returns exactly the scalar path's double. Long rows exercise the int32 flushes. */
static void test_dots(void) {
    static const qp_encoding encs[] = {QP_ENC_TQ1_0, QP_ENC_TQ2_0, QP_ENC_I2_S, QP_ENC_I2_S_ARM,
                                       QP_ENC_QK256, QP_ENC_BITNET32F16, QP_ENC_SPLIT32};
    enum { NL = 1 << 17 };
    static uint8_t w[NL];
    static int8_t a[NL];
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        const qp_encoding_traits *t = qp_encoding_get(encs[e]);
        int bad = 0;
        for (int rep = 0; rep < 40; rep++) {
            int64_t n = t->block_elems * (1 + (int64_t)(rnd() % 40));
            if (rep == 0) n = NL / t->block_elems * t->block_elems; /* long row */
            size_t rb = 0;
            qp_encoding_row_bytes(encs[e], n, &rb);
            for (size_t i = 0; i < rb; i++) w[i] = (uint8_t)rnd();
            for (int64_t i = 0; i < n; i++) a[i] = (int8_t)rnd();
            if (rep == 1) memset(a, 0x80, (size_t)n), memset(w, 0x00, rb); /* -128 extremes */
            if (rep == 2) memset(a, 0x80, (size_t)n), memset(w, 0xFF, rb);
            if (rep == 3) memset(a, 0x7F, (size_t)n), memset(w, 0xAA, rb);
            if (t->flags & QP_ENC_FLAG_EXT_SCALE || encs[e] == QP_ENC_QK256) {
            } else { /* finite f16 scale at the block's scale offset */
                const size_t off = encs[e] == QP_ENC_TQ1_0 ? 52 : encs[e] == QP_ENC_TQ2_0 ? 64 : 8;
                for (int64_t b = 0; b < n / t->block_elems; b++)
                    qp_store_u16le(w + (size_t)b * t->block_bytes + off, (uint16_t)(rnd() & 0x7bff));
            }
            qp_encoding_simd_force(0);
            const double ref = t->vec_dot_i8(w, a, n);
            for (int lv = 1; lv <= 2; lv++) {
                qp_encoding_simd_force(lv);
                const double got = t->vec_dot_i8(w, a, n);
                if (memcmp(&got, &ref, sizeof ref) != 0) {
                    if (bad < 3) fprintf(stderr, "%s level %d n %lld: %.17g != %.17g\n", t->name, lv, (long long)n, got, ref);
                    bad++;
                }
            }
        }
        qp_encoding_simd_force(-1);
        QP_CHECK_MSG(bad == 0, "%s: SIMD vec_dot_i8 differs from the scalar path", t->name);
    }
}

/* qp_act_quantize_i8 (BitNet per-token int8 activations): every level gives the scalar path's scale
 * and bytes. Rows of 1-5632 (SIMD body and scalar tail), normal data, exact ties (x * s = k + 0.5
 * with s = 1), values that round past 127, zeros, subnormals, huge, +-inf and NaN anywhere (a NaN
 * restarts the reference's running maximum). */
static void test_act_quantize(void) {
    enum { N = 5632 };
    static float x[N];
    static int8_t ref[N], got[N];
    const int64_t lens[] = {1, 31, 32, 33, 100, 2048, N};
    int bad = 0, cases = 0;
    for (int li = 0; li < 7; li++)
        for (int kind = 0; kind < 9; kind++) {
            const int64_t n = lens[li];
            const int64_t at = (int64_t)(rnd() % (uint64_t)n);
            for (int64_t i = 0; i < n; i++) {
                float v = gauss();
                switch (kind) {
                case 1: v = (float)((int)(rnd() % 254) - 127) + 0.5f; break; /* ties once s = 1 */
                case 2: v = 0.0f; break;
                case 3: v *= 1e-40f; break;
                case 4: v *= 3e37f; break;
                case 5: v = i == at ? NAN : v; break;
                case 6: v = i == at ? ((rnd() & 1) ? INFINITY : -INFINITY) : v; break;
                case 7: v = (i == at || i == n - 1) ? NAN : v * 10.0f; break;
                case 8: v = (float)(int)(v * 40.0f) / 40.0f * 127.0f; break;
                default: break;
                }
                x[i] = v;
            }
            if (kind == 1) x[at] = 127.5f; /* max 127.5: s = 127 / 127.5, codes round to 127 */
            qp_encoding_simd_force(0);
            const float s0 = qp_act_quantize_i8(x, n, ref);
            for (int lv = 1; lv <= 2; lv++) {
                qp_encoding_simd_force(lv);
                memset(got, 0x55, sizeof got);
                const float s1 = qp_act_quantize_i8(x, n, got);
                cases++;
                if (memcmp(&s0, &s1, sizeof s0) != 0 || memcmp(ref, got, (size_t)n) != 0) {
                    if (bad < 3) fprintf(stderr, "act_quantize_i8 n %lld kind %d level %d differs\n", (long long)n, kind, lv);
                    bad++;
                }
            }
        }
    qp_encoding_simd_force(-1);
    QP_CHECK_MSG(bad == 0, "qp_act_quantize_i8: %d of %d SIMD runs differ from the scalar path", bad, cases);
}

int main(void) {
    printf("simd level: %s\n", qp_encoding_simd_level());
    if (strcmp(qp_encoding_simd_level(), "scalar") == 0)
        QP_SKIP_MACHINE("no SIMD level here: the scalar path would be compared with itself");
    test_row_quantizers();
    test_tensor_quantizers();
    test_large_absmean();
    test_dots();
    test_act_quantize();
    return qp_test_finish();
}
