/* Ternary dot products with int8 activations equal exact integer arithmetic: for every ternary
 * encoding, vec_dot_i8 on the encoded row equals sum(level * a) computed here from the source
 * levels (not through our decoder), times the block scale where the encoding has one. Also: the
 * per-token activation quantizer follows enc_ternary.md, and absmean + I2_S round-trips exactly; the
 * I2_S encoder (one pass on ternary input, two passes otherwise) writes the bytes of the two-pass
 * encoder it replaced (a copy of that code lives here) on ternary, near-ternary, random, zero,
 * NaN and inf tensors; and absmean / I2_S on multi-chunk tensors (the one-pass speculation with
 * verified chunks) equal that reference on normal, exact-tie, near-tie, drifting, tiny-mean (1e-5
 * floor), subnormal, huge, zero and NaN / inf data. All of it at every SIMD level (scalar, AVX2, AVX-512 as far as the CPU
 * goes). */
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static uint64_t g_s = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { g_s ^= g_s << 13; g_s ^= g_s >> 7; g_s ^= g_s << 17; return g_s; }

enum { N = 2560 }; /* multiple of 32, 64, 128 and 256 */

static int8_t g_lv[N], g_act[N];
static float g_x[N];
static uint8_t g_buf[N];

static void test_encoding(qp_encoding e, const int *levels, int nlev, float blockscale_base) {
    const qp_encoding_traits *t = qp_encoding_get(e);
    for (int rep = 0; rep < 20; rep++) {
        /* per-block scale: an f16 value so the ternary input is exactly representable */
        for (int64_t b = 0; b < N / t->block_elems; b++) {
            float s = blockscale_base * (float)(1 + rnd() % 7) / 4.0f;
            int has = 0;
            for (int64_t k = 0; k < t->block_elems; k++) {
                int64_t i = b * t->block_elems + k;
                g_lv[i] = (int8_t)levels[rnd() % (uint64_t)nlev];
                has |= g_lv[i] != 0;
                g_x[i] = (float)g_lv[i] * s;
            }
            if (!has) g_lv[b * t->block_elems] = (int8_t)levels[nlev - 1], g_x[b * t->block_elems] = (float)levels[nlev - 1] * s;
        }
        for (int i = 0; i < N; i++) g_act[i] = (int8_t)(rnd() & 0xff);
        if (rep == 0) memset(g_act, -128, 64), memset(g_act + 64, 127, 64);
        if (t->quantize_tensor) t->quantize_tensor(g_x, g_buf, N);
        else t->quantize_ref(g_x, g_buf, N);
        double expect = 0.0;
        int64_t iexpect = 0;
        for (int64_t b = 0; b < N / t->block_elems; b++) {
            int32_t isum = 0;
            float amax = 0.0f;
            for (int64_t k = 0; k < t->block_elems; k++) {
                int64_t i = b * t->block_elems + k;
                isum += g_lv[i] * g_act[i];
                amax = fmaxf(amax, fabsf(g_x[i]));
            }
            iexpect += isum;
            expect += (double)amax * (double)isum;
        }
        const double got = t->vec_dot_i8(g_buf, g_act, N);
        if (blockscale_base == 0.0f) { /* no per-block scale: exact integer */
            QP_CHECK_MSG(got == (double)iexpect, "%s: %.17g != %lld", t->name, got, (long long)iexpect);
        } else {
            QP_CHECK_MSG(got == expect, "%s: %.17g != %.17g", t->name, got, expect);
        }
    }
}

static void run_all(void) {
    static const int tern[3] = {-1, 0, 1};
    static const int qk[4] = {-2, -1, 1, 2};
    test_encoding(QP_ENC_TQ1_0, tern, 3, 0.5f);
    test_encoding(QP_ENC_TQ2_0, tern, 3, 0.25f);
    test_encoding(QP_ENC_BITNET32F16, tern, 3, 1.5f);
    /* per-tensor / no scale: the levels themselves */
    for (int i = 0; i < 2; i++) {
        qp_encoding e = i ? QP_ENC_I2_S_ARM : QP_ENC_I2_S;
        const qp_encoding_traits *t = qp_encoding_get(e);
        for (int rep = 0; rep < 20; rep++) {
            int64_t iexpect = 0;
            for (int k = 0; k < N; k++) {
                g_lv[k] = (int8_t)tern[rnd() % 3];
                g_x[k] = (float)g_lv[k] * 0.75f;
                g_act[k] = (int8_t)(rnd() & 0xff);
                iexpect += g_lv[k] * g_act[k];
            }
            g_lv[0] = 1, g_x[0] = 0.75f, iexpect += (1 - 0) * 0; /* ensure max|x| = 0.75 */
            iexpect = 0;
            for (int k = 0; k < N; k++) iexpect += g_lv[k] * g_act[k];
            static uint8_t full[N / 4 + 32];
            t->quantize_tensor(g_x, full, N);
            QP_CHECK_MSG(t->vec_dot_i8(full, g_act, N) == (double)iexpect, "%s integer dot", t->name);
            float s = 0;
            QP_CHECK(qp_encoding_tensor_scale(e, full, sizeof full, N, &s) && s == 0.75f);
            static float back[N];
            QP_CHECK(qp_encoding_dequantize_tensor(e, full, back, N) && memcmp(back, g_x, sizeof back) == 0);
        }
    }
    {
        const qp_encoding_traits *t = qp_encoding_get(QP_ENC_QK256);
        int64_t iexpect = 0;
        for (int k = 0; k < N; k++) {
            g_lv[k] = (int8_t)qk[rnd() % 4];
            g_x[k] = (float)g_lv[k];
            g_act[k] = (int8_t)(rnd() & 0xff);
            iexpect += g_lv[k] * g_act[k];
        }
        t->quantize_ref(g_x, g_buf, N);
        QP_CHECK(t->vec_dot_i8(g_buf, g_act, N) == (double)iexpect);
        const qp_encoding_traits *s32 = qp_encoding_get(QP_ENC_SPLIT32);
        static float sc[N / 32];
        for (int k = 0; k < N; k++) g_lv[k] = (int8_t)tern[rnd() % 3], g_x[k] = (float)g_lv[k] * 2.0f;
        for (int b = 0; b < N / 32; b++) g_lv[32 * b] = -1, g_x[32 * b] = -2.0f;
        iexpect = 0;
        for (int k = 0; k < N; k++) iexpect += g_lv[k] * g_act[k];
        qp_split32_quantize(g_x, g_buf, sc, N);
        QP_CHECK(s32->vec_dot_i8(g_buf, g_act, N) == (double)iexpect && sc[3] == 2.0f);
    }
    /* BitNet GEMV identity: (sum q*a) / s_act * w_scale, from absmean weights and per-token acts */
    {
        static float w[N], xin[N];
        static int8_t q[N], a[N];
        for (int k = 0; k < N; k++) {
            w[k] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
            xin[k] = (float)((int)(rnd() % 2001) - 1000) / 250.0f;
        }
        float ws;
        qp_ternary_absmean(w, N, q, &ws);
        const float sa = qp_act_quantize_i8(xin, N, a);
        float mx = 0;
        for (int k = 0; k < N; k++) mx = fmaxf(mx, fabsf(xin[k]));
        QP_CHECK(sa == 127.0f / mx);
        int ok = 1;
        for (int k = 0; k < N; k++) {
            float r = rintf(xin[k] * sa);
            ok &= a[k] == (int8_t)(r > 127 ? 127 : r < -128 ? -128 : r);
            ok &= q[k] == (int8_t)fmaxf(-1.0f, fminf(1.0f, rintf(w[k] * (1.0f / ws))));
        }
        QP_CHECK(ok);
        static float tern_w[N];
        for (int k = 0; k < N; k++) tern_w[k] = (float)q[k] * ws;
        static uint8_t full[N / 4 + 32];
        const qp_encoding_traits *t = qp_encoding_get(QP_ENC_I2_S);
        t->quantize_tensor(tern_w, full, N);
        int64_t isum = 0;
        for (int k = 0; k < N; k++) isum += q[k] * a[k];
        QP_CHECK(t->vec_dot_i8(full, a, N) == (double)isum);
        /* non-ternary input to I2_S goes through absmean first: same codes, scale = mean */
        static uint8_t full2[N / 4 + 32];
        t->quantize_tensor(w, full2, N);
        QP_CHECK(memcmp(full, full2, N / 4) == 0 && qp_load_f32le(full2 + N / 4) == ws);
    }
}

/* ---- I2_S: one pass on ternary input = the previous two-pass encoder ---------------------------
 * The encoder before the one-pass path (enc_ternary.c at 5974fc9, scalar), copied: m = max|x|
 * (QP_MAX order), ternary iff every x is 0 or |x| == m; ternary -> scale m, c = fabs((double)x) <
 * 1e-6 ? 1 : x*m > 0 ? 2 : 0; else scale = absmean (16 double lanes, pairwise, >= 1e-5), c =
 * clamp(rint(x / scale)) + 1 (NaN -> 1). */
static void old_i2s_encode(const float *x, int64_t n, int be, uint8_t *y) {
    float m = 0.0f;
    int ternary = 1;
    for (int64_t i = 0; i < n; i++) m = m > fabsf(x[i]) ? m : fabsf(x[i]);
    for (int64_t i = 0; i < n && ternary; i++)
        if (!(x[i] == 0.0f || fabsf(x[i]) == m)) ternary = 0;
    float scale = m, inv = 0.0f;
    if (!ternary) {
        double l[16] = {0};
        for (int64_t i = 0; i < n; i++) l[i % 16] += fabs((double)x[i]);
        for (int w = 16; w > 1; w /= 2)
            for (int k = 0; k < w / 2; k++) l[k] = l[2 * k] + l[2 * k + 1];
        float mean = n > 0 ? (float)(l[0] / (double)n) : 0.0f;
        if (!(mean >= 1e-5f)) mean = 1e-5f;
        scale = mean;
        inv = 1.0f / mean;
    }
    const int q = be / 4;
    memset(y, 0, (size_t)(n / 4));
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        int c;
        if (ternary) {
            c = fabs((double)v) < 1e-6 ? 1 : ((double)v * (double)m > 0 ? 2 : 0);
        } else {
            const float t = v * inv;
            c = t != t ? 1 : t <= -1.0f ? 0 : t >= 1.0f ? 2 : (int)rintf(t) + 1;
        }
        const int64_t b = i / be, k = i % be;
        y[b * q + k % q] |= (uint8_t)(c << (6 - 2 * (k / q)));
    }
    memset(y + n / 4, 0, 32);
    memcpy(y + n / 4, &scale, 4);
}

/* The derivation, checked directly: for x in {+-0, +-s} (s > 0 or inf) the two-pass encoder takes
 * m = s, so it writes scale s, 28 zero bytes, and c = sign code (+s -> 2, -s -> 0, +-0 -> 1) when
 * (double)s >= 1e-6, every c = 1 when s <= 1e-6f (BitNet's |x| < 1e-6 threshold); all zeros -> 0x55
 * with scale 0. Built here from the signs, not from either encoder. */
static void expect_ternary_bytes(const float *x, int64_t n, int be, float s, uint8_t *y) {
    const int q = be / 4;
    memset(y, 0, (size_t)(n / 4) + 32);
    for (int64_t i = 0; i < n; i++) {
        const int c = (s <= 1e-6f || x[i] == 0.0f) ? 1 : x[i] > 0.0f ? 2 : 0;
        y[i / be * q + (i % be) % q] |= (uint8_t)(c << (6 - 2 * ((i % be) / q)));
    }
    memcpy(y + n / 4, &s, 4);
}

enum { NI = 4096 };
static int64_t g_i2s_runs, g_i2s_bad;
static void check_i2s(const float *x, int64_t n, const char *what, int derived, float s) {
    static uint8_t want[NI / 4 + 32], got[NI / 4 + 32], der[NI / 4 + 32];
    for (int e = 0; e < 2; e++) {
        const int be = e ? 64 : 128;
        old_i2s_encode(x, n, be, want);
        memset(got, 0xCD, sizeof got);
        QP_CHECK(qp_encoding_quantize_tensor(e ? QP_ENC_I2_S_ARM : QP_ENC_I2_S, x, got, n));
        int bad = memcmp(want, got, (size_t)(n / 4) + 32) != 0;
        if (derived) {
            expect_ternary_bytes(x, n, be, s, der);
            bad |= memcmp(der, want, (size_t)(n / 4) + 32) != 0;
        }
        if (bad && g_i2s_bad < 5)
            fprintf(stderr, "i2s one pass: %s (be %d, n %lld, level %s) differs\n", what, be, (long long)n,
                    qp_encoding_simd_level());
        g_i2s_bad += bad;
        g_i2s_runs++;
    }
}
/* ternary {-s, 0, s} (signed zeros too), optionally starting with `lead` zeros */
static void fill_ternary(float *x, int64_t n, float s, int64_t lead) {
    for (int64_t i = 0; i < n; i++) {
        const int r = (int)(rnd() % 4);
        x[i] = i < lead ? ((r & 1) ? -0.0f : 0.0f) : r == 0 ? -s : r == 1 ? s : r == 2 ? 0.0f : -0.0f;
    }
    if (lead < n) x[lead] = (rnd() & 1) ? s : -s;
}
static void test_i2s_one_pass(void) {
    static float x[NI];
    const float scales[] = {0.37f, 1.0f, 0.0213f, 3e-7f, 1e-6f, nextafterf(1e-6f, 1.0f), 1e-40f,
                            0x1p-126f, 3e38f, INFINITY};
    const int nsc = (int)(sizeof scales / sizeof scales[0]);
    const float other[] = {NAN, -NAN, INFINITY, 0.5f, 1e-41f};
    g_i2s_runs = g_i2s_bad = 0;
    for (int rep = 0; rep < 160; rep++) {
        const int64_t n = 128 * (1 + (int64_t)(rnd() % (NI / 128)));
        const float s = scales[rep % nsc];
        const int64_t lead = rep % 3 == 0 ? 0 : rep % 3 == 1 ? (int64_t)(rnd() % (uint64_t)n) : n / 2;
        /* exactly ternary: one pass */
        fill_ternary(x, n, s, lead);
        check_i2s(x, n, "ternary", 1, s);
        /* one element breaks the pattern (first, somewhere, last, the first nonzero): fallback */
        const int64_t where[4] = {0, (int64_t)(rnd() % (uint64_t)n), n - 1, lead};
        for (int w = 0; w < 4; w++) {
            const int64_t p = where[w];
            const float keep = x[p];
            const float sign = (rnd() & 1) ? 1.0f : -1.0f;
            const int kind = (int)(rnd() % 8);
            float v;
            if (kind == 0) v = sign * nextafterf(s, INFINITY);     /* 1 ulp above */
            else if (kind == 1) v = sign * nextafterf(s, 0.0f); /* 1 ulp below */
            else if (kind == 2) v = sign * 2.0f * s;
            else v = sign * other[kind - 3 < 5 ? kind - 3 : 0];
            if (fabsf(v) == s || v == 0.0f) v = NAN; /* (inf * 2, etc.) must break the pattern */
            x[p] = v;
            check_i2s(x, n, "near-ternary", 0, 0.0f);
            x[p] = keep;
        }
    }
    /* zeros, a single nonzero at the end, random normal data, normal data with NaN / inf */
    for (int64_t i = 0; i < NI; i++) x[i] = (i & 1) ? -0.0f : 0.0f;
    check_i2s(x, NI, "zeros", 1, 0.0f);
    x[NI - 1] = -0.5f;
    check_i2s(x, NI, "one nonzero last", 1, 0.5f);
    x[NI - 1] = NAN;
    check_i2s(x, NI, "zeros then NaN", 0, 0.0f);
    for (int rep = 0; rep < 8; rep++) {
        for (int64_t i = 0; i < NI; i++) {
            const uint64_t r = rnd();
            x[i] = ((float)(r >> 40) / 16777216.0f - 0.5f) + ((float)((r >> 16) & 0xffffff) / 16777216.0f - 0.5f);
        }
        if (rep == 1) x[rnd() % NI] = NAN;
        if (rep == 2) x[0] = NAN;
        if (rep == 3) x[rnd() % NI] = -INFINITY;
        if (rep == 4) for (int64_t i = 0; i < NI; i++) x[i] = (float)((int)(rnd() % 3) - 1) * (1.0f + (float)(i % 2));
        check_i2s(x, NI, "random", 0, 0.0f);
    }
    QP_CHECK_MSG(g_i2s_bad == 0, "I2_S: %lld of %lld encodings differ from the two-pass encoder",
                 (long long)g_i2s_bad, (long long)g_i2s_runs);
    /* spec vector (enc_ternary.md): elements 0/32/64/96 = -1, +1, 0, -1 -> byte 0x24, scale 1 */
    memset(x, 0, 128 * sizeof *x);
    x[0] = -1.0f, x[32] = 1.0f, x[96] = -1.0f;
    static uint8_t v[128 / 4 + 32];
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S, x, v, 128) && v[0] == 0x24 && v[1] == 0x55 &&
             qp_load_f32le(v + 32) == 1.0f);
}

/* ---- absmean / I2_S in one pass (chunked speculation) = the scalar two-pass reference ---------
 * Tensors of several 16K-float chunks (enc_ternary.c SPEC_CHUNK) whose prefix means wander around
 * the final mean, so chunks are coded with a wrong scale estimate and must be recoded exactly where
 * an element lies between the estimated and the true rounding threshold. The reference is the
 * copy above (old_i2s_encode) for I2_S / I2_S_ARM and, for absmean, the same sum and
 * clamp(rint(x / mean)) as scalar code here. */
static float old_absmean(const float *x, int64_t n, int8_t *q) {
    double l[16] = {0};
    for (int64_t i = 0; i < n; i++) l[i % 16] += fabs((double)x[i]);
    for (int w = 16; w > 1; w /= 2)
        for (int k = 0; k < w / 2; k++) l[k] = l[2 * k] + l[2 * k + 1];
    float mean = n > 0 ? (float)(l[0] / (double)n) : 0.0f;
    if (!(mean >= 1e-5f)) mean = 1e-5f;
    const float s = 1.0f / mean;
    for (int64_t i = 0; i < n; i++) {
        const float t = x[i] * s;
        q[i] = (int8_t)(t != t ? 0 : t <= -1.0f ? -1 : t >= 1.0f ? 1 : (int)rintf(t));
    }
    return mean;
}
enum { NS = 3 * 16384 + 640 }; /* 389 blocks of 128, 778 of 64 */
static int64_t g_sp_runs, g_sp_bad;
static void check_spec(const float *x, int64_t n, const char *what) {
    static int8_t q0[NS + 16], q1[NS + 16];
    static uint8_t want[NS / 4 + 32], got[NS / 4 + 32];
    if (n < 128 || n > NS) return;
    for (int tail = 0; tail < 2; tail++) { /* absmean also on n + 5 (scalar tail) */
        const int64_t m = tail && n + 5 <= NS + 16 ? n + 5 : n;
        float s1 = -1.0f;
        const float s0 = old_absmean(x, m, q0);
        memset(q1, 0x7f, sizeof q1);
        qp_ternary_absmean(x, m, q1, &s1);
        const int bad = memcmp(q0, q1, (size_t)m) != 0 || memcmp(&s0, &s1, 4) != 0;
        if (bad && g_sp_bad < 5)
            fprintf(stderr, "absmean one pass: %s (n %lld, level %s) differs\n", what, (long long)m, qp_encoding_simd_level());
        g_sp_bad += bad;
        g_sp_runs++;
    }
    for (int e = 0; e < 2; e++) {
        const int be = e ? 64 : 128;
        const int64_t m = n / 128 * 128;
        old_i2s_encode(x, m, be, want);
        memset(got, 0xCD, sizeof got);
        QP_CHECK(qp_encoding_quantize_tensor(e ? QP_ENC_I2_S_ARM : QP_ENC_I2_S, x, got, m));
        const int bad = memcmp(want, got, (size_t)(m / 4) + 32) != 0;
        if (bad && g_sp_bad < 5)
            fprintf(stderr, "i2s one pass: %s (be %d, n %lld, level %s) differs\n", what, be, (long long)m,
                    qp_encoding_simd_level());
        g_sp_bad += bad;
        g_sp_runs++;
    }
}
static float unif(void) { return (float)(rnd() >> 40) / 16777216.0f - 0.5f; }
static void test_absmean_one_pass(void) {
    static float x[NS + 16];
    const int64_t n = NS;
    g_sp_runs = g_sp_bad = 0;
    for (int rep = 0; rep < 6; rep++) {
        /* normal-ish (the bench's data) */
        for (int64_t i = 0; i < n + 16; i++) x[i] = unif() + unif() + unif() + unif();
        check_spec(x, n, "normal");
        /* |x| in {1, 3} in equal numbers, shuffled: mean exactly 2, every 1 exactly on the
         * round-half-even tie (1 * 0.5 = 0.5 -> 0) while prefix means put it on either side */
        for (int64_t i = 0; i < n + 16; i++) x[i] = (i & 1) ? 3.0f : 1.0f;
        for (int64_t i = n - 1; i > 0; i--) {
            const int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
            const float t = x[i];
            x[i] = x[j], x[j] = t;
        }
        for (int64_t i = 0; i < n + 16; i++) x[i] = (rnd() & 1) ? -x[i] : x[i];
        check_spec(x, n, "ties 1/3");
        /* the same with the 1s moved 1 ulp either way (near-threshold on both sides) */
        for (int64_t i = 0; i < n + 16; i++)
            if (fabsf(x[i]) == 1.0f && rnd() % 3) x[i] = nextafterf(x[i], (rnd() & 1) ? 0.0f : 2.0f * x[i]);
        check_spec(x, n, "near ties");
        /* drifting scale: the first chunk small, later ones larger (estimates far off) */
        for (int64_t i = 0; i < n + 16; i++) x[i] = unif() * (1.0f + (float)(i / 8192) * (rep & 1 ? 3.0f : 0.25f));
        check_spec(x, n, "drift");
        for (int64_t i = 0; i < n + 16; i++) x[i] = unif() * (i < 16384 ? 100.0f : 1.0f);
        check_spec(x, n, "large first chunk");
        /* tiny means at the 1e-5 floor: prefix means on both sides of it */
        for (int64_t i = 0; i < n + 16; i++) x[i] = unif() * (rep < 3 ? 4e-5f : 2.1e-5f);
        check_spec(x, n, "tiny mean");
        /* subnormals (mean at the floor), and subnormals mixed with normal values */
        for (int64_t i = 0; i < n + 16; i++) x[i] = unif() * 0x1p-126f;
        check_spec(x, n, "subnormal");
        for (int64_t i = 0; i < n + 16; i++) x[i] = (rnd() % 4) ? unif() * 0x1p-130f : unif();
        check_spec(x, n, "subnormal mix");
        /* huge values: x * s overflows for some */
        for (int64_t i = 0; i < n + 16; i++) x[i] = (rnd() % 64) ? unif() : unif() * 3e38f;
        check_spec(x, n, "huge");
        /* zeros (+-0), a run of zeros then data */
        for (int64_t i = 0; i < n + 16; i++) x[i] = (rnd() & 1) ? -0.0f : 0.0f;
        check_spec(x, n, "zeros");
        for (int64_t i = 40000; i < n + 16; i++) x[i] = unif();
        check_spec(x, n, "zeros then data");
        /* NaN / inf at the first, a random, the last element of the kernels' range, in the tail */
        const float bad[4] = {NAN, -NAN, INFINITY, -INFINITY};
        const int64_t where[5] = {0, (int64_t)(rnd() % (uint64_t)n), 16384 + 3, n - 1, n + 2};
        for (int w = 0; w < 5; w++) {
            for (int64_t i = 0; i < n + 16; i++) x[i] = unif() + unif();
            x[where[w]] = bad[(rep + w) % 4];
            check_spec(x, n, "NaN / inf");
        }
    }
    QP_CHECK_MSG(g_sp_bad == 0, "absmean / I2_S one pass: %lld of %lld encodings differ from the reference",
                 (long long)g_sp_bad, (long long)g_sp_runs);
}

/* Allocation-failure injection reaches the ternary encoders: with SIMD, absmean and I2_S (on
 * non-ternary input) make exactly one allocation (absmean_one_pass's per-1024 bounds) through
 * qp_malloc, none at the scalar level; when it fails they fall back to the two-pass path and
 * write the same bytes. */
static void test_alloc_failure(void) {
    static float x[NS];
    static int8_t q0[NS], q1[NS];
    static uint8_t y0[NS / 4 + 32], y1[NS / 4 + 32];
    for (int64_t i = 0; i < NS; i++) x[i] = unif() + unif();
    const long allocs = strcmp(qp_encoding_simd_level(), "scalar") != 0 ? 1 : 0;
    float s0, s1;
    qp_alloc_fail_after(1000);
    qp_ternary_absmean(x, NS, q0, &s0);
    const long left_absmean = qp_alloc_fail_after(1000);
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S, x, y0, NS));
    const long left_i2s = qp_alloc_fail_after(0);
    QP_CHECK_EQ_INT(1000 - left_absmean, allocs);
    QP_CHECK_EQ_INT(1000 - left_i2s, allocs);
    memset(q1, 0x55, sizeof q1);
    memset(y1, 0x55, sizeof y1);
    qp_ternary_absmean(x, NS, q1, &s1);
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S, x, y1, NS));
    const long left_failed = qp_alloc_fail_after(-1);
    QP_CHECK_EQ_INT(left_failed, 0);
    QP_CHECK_MSG(memcmp(q0, q1, sizeof q0) == 0 && memcmp(&s0, &s1, 4) == 0,
                 "absmean with a failed allocation differs (level %s)", qp_encoding_simd_level());
    QP_CHECK_MSG(memcmp(y0, y1, sizeof y0) == 0, "I2_S with a failed allocation differs (level %s)",
                 qp_encoding_simd_level());
}

int main(void) {
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        run_all();
        test_i2s_one_pass();
        test_absmean_one_pass();
        test_alloc_failure();
    }
    qp_encoding_simd_force(-1);
    return qp_test_finish();
}
