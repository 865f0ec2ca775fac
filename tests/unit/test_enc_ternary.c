/* Ternary dot products with int8 activations equal exact integer arithmetic: for every ternary
 * encoding, vec_dot_i8 on the encoded row equals sum(level * a) computed here from the source
 * levels (not through our decoder), times the block scale where the encoding has one. Also: the
 * per-token activation quantizer follows ternary.md, and absmean + I2_S round-trips exactly. All of it
 * at every SIMD level (scalar, AVX2, AVX-512 as far as the CPU goes). */
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

int main(void) {
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        run_all();
    }
    qp_encoding_simd_force(-1);
    return qp_test_finish();
}
