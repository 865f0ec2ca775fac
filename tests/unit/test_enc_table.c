/* The encodings traits table: consistent sizes and names, validators reject non-finite scales,
 * documented error bounds hold, vec_dot_f32 equals dequantize-then-dot (exactly for the scalar
 * path, within a relative tolerance for SIMD), the fast quantize path gives the reference bytes at
 * every SIMD level, BQ4 round trip bounds. */
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static uint64_t g_s = 88172645463325252ull;
static uint64_t rnd(void) { g_s ^= g_s << 13; g_s ^= g_s >> 7; g_s ^= g_s << 17; return g_s; }
static float unif(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0); }
static float gauss(void) {
    float u = unif() + 1e-12f, v = unif();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void test_table(void) {
    for (int e = 0; e < QP_ENC_COUNT; e++) {
        const qp_encoding_traits *t = qp_encoding_get((qp_encoding)e);
        QP_CHECK_MSG(t != NULL, "encoding %d has no row", e);
        if (!t) continue;
        QP_CHECK_EQ_INT(t->id, e);
        QP_CHECK(t->block_elems >= 1 && t->block_bytes >= 1);
        QP_CHECK_EQ_INT(qp_encoding_from_name(t->name), e);
        QP_CHECK_EQ_INT(qp_encoding_from_name(t->upper_name), e);
        if (t->ggml_type >= 0) QP_CHECK_EQ_INT(qp_encoding_from_ggml_type(t->ggml_type), e);
        if (t->quantize_ref || t->quantize_tensor) QP_CHECK(t->quantize || t->quantize_tensor);
        if (t->quantize) QP_CHECK(t->quantize_ref != NULL);
        if (t->quantize_ref) QP_CHECK(t->dequantize != NULL && t->error_bound != NULL);
    }
    QP_CHECK(qp_encoding_get(QP_ENC_COUNT) == NULL);
    size_t b = 0;
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_I2_S, 2560 * 640, &b) && b == 2560 * 640 / 4 + 32);
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_QK256, 4096, &b) && b == 1024);
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_BQ4, 64, &b) && b == 40);
    QP_CHECK(!qp_encoding_row_bytes(QP_ENC_Q4_K, 100, &b));
    QP_CHECK(qp_encoding_from_name("nope") == QP_ENC_COUNT);
}

static void test_validate(void) {
    static const struct { qp_encoding e; size_t off; } k[] = {
        {QP_ENC_Q4_0, 0}, {QP_ENC_Q5_0, 0}, {QP_ENC_Q8_0, 0}, {QP_ENC_Q4_K, 0}, {QP_ENC_Q4_K, 2},
        {QP_ENC_Q6_K, 208}, {QP_ENC_TQ1_0, 52}, {QP_ENC_TQ2_0, 64}, {QP_ENC_BQ4, 0},
        {QP_ENC_BITNET32F16, 8}, {QP_ENC_Q4_1, 2}, {QP_ENC_Q5_1, 0}, {QP_ENC_Q2_K, 80},
        {QP_ENC_Q2_K, 82}, {QP_ENC_Q3_K, 108}, {QP_ENC_Q5_K, 0}, {QP_ENC_Q5_K, 2},
        {QP_ENC_IQ4_NL, 0}, {QP_ENC_IQ4_XS, 0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        const qp_encoding_traits *t = qp_encoding_get(k[i].e);
        uint8_t blk[2 * 292];
        float x[512];
        for (int j = 0; j < 512; j++) x[j] = gauss();
        t->quantize_ref(x, blk, 2 * t->block_elems);
        char why[160] = "";
        QP_CHECK_MSG(t->validate(blk, 2 * t->block_elems, why, sizeof why), "%s: %s", t->name, why);
        const uint16_t bad[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01};
        for (int j = 0; j < 4; j++) {
            qp_store_u16le(blk + t->block_bytes + k[i].off, bad[j]);
            QP_CHECK_MSG(!t->validate(blk, 2 * t->block_elems, why, sizeof why),
                         "%s accepts f16 0x%04x", t->name, bad[j]);
            QP_CHECK(strstr(why, "block 1") != NULL);
        }
    }
    uint8_t q8k[292] = {0};
    qp_store_f32le(q8k, 1.0f);
    q8k[4] = 5; /* bsums[0] stays 0: inconsistent */
    QP_CHECK(!qp_encoding_get(QP_ENC_Q8_K)->validate(q8k, 256, NULL, 0));
}

/* max |x - x'| per block against the documented closed-form bounds */
static void test_bounds(void) {
    enum { N = 256 * 64 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    for (int style = 0; style < 3; style++) {
        for (int i = 0; i < N; i++)
            x[i] = style == 0 ? gauss() : style == 1 ? gauss() / sqrtf(unif() + 1e-3f) : gauss() * 1e-3f;
        /* frac * amax + abs (abs: f16 rounding of a subnormal d, half an f16 ulp times max |q|) */
        static const struct { qp_encoding e; float frac, abs; } k[] = {
            {QP_ENC_Q8_0, 1.13f / 254.0f, 0x1p-18f}, {QP_ENC_Q4_0, (1.0f + 1.0f / 128) / 8.0f, 0x1p-21f},
            {QP_ENC_Q5_0, (1.0f + 1.0f / 64) / 16.0f, 0x1p-20f}, {QP_ENC_Q8_K, 1.0f / 254.0f * 1.0001f, 0},
            {QP_ENC_TQ2_0, 0.5f * 1.001f, 0x1p-25f}, {QP_ENC_TQ1_0, 0.5f * 1.001f, 0x1p-25f}};
        for (size_t c = 0; c < sizeof k / sizeof k[0]; c++) {
            const qp_encoding_traits *t = qp_encoding_get(k[c].e);
            t->quantize_ref(x, q, N);
            t->dequantize(q, y, N);
            int bad = 0;
            for (int b = 0; b < N / t->block_elems; b++) {
                float amax = 0, err = 0;
                for (int j = 0; j < t->block_elems; j++) {
                    amax = fmaxf(amax, fabsf(x[b * t->block_elems + j]));
                    err = fmaxf(err, fabsf(x[b * t->block_elems + j] - y[b * t->block_elems + j]));
                }
                if (err > k[c].frac * amax + k[c].abs + 1e-30f) bad++;
            }
            QP_CHECK_MSG(bad == 0, "%s style %d: %d blocks over the bound", t->name, style, bad);
        }
        /* k-quants: relative RMSE on normal data */
        if (style == 0) {
            static const struct { qp_encoding e; double lim; } kk[] = {
                {QP_ENC_Q4_K, 0.12}, {QP_ENC_Q6_K, 0.03}, {QP_ENC_Q4_1, 0.12}, {QP_ENC_Q5_1, 0.06},
                {QP_ENC_BQ4, 0.13}, {QP_ENC_Q2_K, 0.45}, {QP_ENC_Q3_K, 0.25}, {QP_ENC_Q5_K, 0.06},
                {QP_ENC_IQ4_NL, 0.12}, {QP_ENC_IQ4_XS, 0.12}};
            for (size_t c = 0; c < sizeof kk / sizeof kk[0]; c++) {
                const qp_encoding_traits *t = qp_encoding_get(kk[c].e);
                t->quantize_ref(x, q, N);
                t->dequantize(q, y, N);
                double se = 0, ss = 0;
                for (int i = 0; i < N; i++) se += (double)(x[i] - y[i]) * (x[i] - y[i]), ss += (double)x[i] * x[i];
                double rel = sqrt(se / ss);
                printf("%-5s relative rmse on N(0,1): %.4f (limit %.2f)\n", t->name, rel, kk[c].lim);
                QP_CHECK_MSG(rel <= kk[c].lim, "%s rmse %.4f", t->name, rel);
            }
        }
    }
    /* BQ4: every element within scale/2 of its value (scale from the block header) */
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_BQ4);
    for (int i = 0; i < N; i++) x[i] = gauss() * (i % 3 == 0 ? 5.0f : 1.0f) + (i % 64 < 32 ? 2.0f : 0.0f);
    t->quantize_ref(x, q, N);
    t->dequantize(q, y, N);
    int bad = 0;
    for (int b = 0; b < N / 32; b++) {
        const float s = qp_fp16_to_fp32(qp_load_u16le(q + 20 * b));
        if (q[20 * b + 2] > 15 || q[20 * b + 3] != 0) bad++;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[32 * b + j] - y[32 * b + j]) > s * 0.5f * 1.001f) bad++;
    }
    QP_CHECK_MSG(bad == 0, "bq4: %d elements over scale/2", bad);
}

/* vec_dot_f32: scalar path equals dequantize-then-dot exactly; every SIMD level within 1e-5
 * relative of the f64 dot; fast quantize equals quantize_ref at every level */
static void test_dots_and_levels(void) {
    enum { N = 4096 };
    static float x[N], a[N], y[N];
    static uint8_t q[N * 4], q2[N * 4];
    for (int i = 0; i < N; i++) x[i] = gauss(), a[i] = gauss();
    for (int e = 0; e < QP_ENC_COUNT; e++) {
        const qp_encoding_traits *t = qp_encoding_get((qp_encoding)e);
        if (!t->quantize_ref || !t->vec_dot_f32 || (t->flags & QP_ENC_FLAG_INT)) continue;
        t->quantize_ref(x, q, N);
        t->dequantize(q, y, N);
        float ref = 0.0f;
        double refd = 0.0, mag = 0.0;
        for (int i = 0; i < N; i++) ref += y[i] * a[i], refd += (double)y[i] * a[i], mag += fabs((double)y[i] * a[i]);
        for (int lv = 0; lv <= 2; lv++) {
            qp_encoding_simd_force(lv);
            float d = t->vec_dot_f32(q, a, N);
            if (lv == 0) QP_CHECK_MSG(d == ref, "%s scalar dot %g != %g", t->name, d, ref);
            QP_CHECK_MSG(fabs(d - refd) <= 1e-5 * mag, "%s level %d dot %g vs %g", t->name, lv, d, refd);
            memset(q2, 0xCD, sizeof q2);
            t->quantize(x, q2, N);
            size_t rb = 0;
            qp_encoding_row_bytes((qp_encoding)e, N, &rb);
            QP_CHECK_MSG(memcmp(q, q2, rb) == 0, "%s level %d: fast quantize differs", t->name, lv);
        }
        qp_encoding_simd_force(-1);
    }
    printf("simd level: %s\n", qp_encoding_simd_level());
}

int main(void) {
    test_table();
    test_validate();
    test_bounds();
    test_dots_and_levels();
    return qp_test_finish();
}
