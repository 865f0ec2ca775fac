/* I8_ROW (encodings/enc_i8row.c, encodings.md "I8_ROW"): hand-computed block bytes (round half
 * to even, clamp to +-127, all-zero blocks), the documented error bound on random data checked in
 * double, chunk independence, vec_dot_f32 against an element-order sum computed here (scalar) and
 * against the F32 dot of the dequantized row (every SIMD level: the runtime's batched path),
 * vec_dot_i8 against exact integers, validate on non-finite and negative scales. */
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

static const qp_encoding_traits *T;

static void test_traits(void) {
    QP_CHECK_EQ_INT(T->block_elems, 32);
    QP_CHECK_EQ_INT(T->block_bytes, 36);
    QP_CHECK_EQ_INT(T->tensor_trailer_bytes, 0);
    QP_CHECK(!(T->flags & (QP_ENC_FLAG_EXT_SCALE | QP_ENC_FLAG_TERNARY)));
    QP_CHECK_EQ_INT(qp_encoding_from_name("i8_row"), QP_ENC_I8_ROW);
    QP_CHECK_EQ_INT(qp_encoding_from_name("I8_ROW"), QP_ENC_I8_ROW);
    size_t b = 0;
    QP_CHECK(qp_encoding_row_bytes(QP_ENC_I8_ROW, 128, &b) && b == 4 * 36);
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_I8_ROW, 408 * 128, &b) && b == 408 * 4 * 36);
    QP_CHECK(!qp_encoding_row_bytes(QP_ENC_I8_ROW, 33, &b));
}

/* Expected bytes written out by hand. */
static void test_hand_vectors(void) {
    /* block 0: amax 127 -> d = 1.0 (00 00 80 3f); q = x rounded half to even */
    float x[64] = {127.0f, -63.5f, 0.5f, 1.0f, 2.5f, 3.5f, -0.5f, 126.5f, -127.0f, 1.5f, -2.5f, 100.25f};
    /* block 1: amax 254 -> d = 2.0 (00 00 00 40); 3/2 = 1.5 -> 2, 5/2 = 2.5 -> 2, -7/2 -> -4 */
    x[32] = 254.0f;
    x[33] = 3.0f;
    x[34] = 5.0f;
    x[35] = -7.0f;
    x[36] = -254.0f;
    x[37] = 1.0f; /* 0.5 -> 0 */
    static const uint8_t want0[16] = {0x00, 0x00, 0x80, 0x3f, 127, (uint8_t)-64, 0, 1, 2, 4, 0, 126,
                                      (uint8_t)-127, 2, (uint8_t)-2, 100};
    static const uint8_t want1[10] = {0x00, 0x00, 0x00, 0x40, 127, 2, 2, (uint8_t)-4, (uint8_t)-127, 0};
    uint8_t y[72];
    memset(y, 0xAA, sizeof y);
    T->quantize_ref(x, y, 64);
    QP_CHECK(memcmp(y, want0, sizeof want0) == 0);
    for (int j = 16; j < 36; j++) QP_CHECK_EQ_INT(y[j], 0);
    QP_CHECK(memcmp(y + 36, want1, sizeof want1) == 0);
    for (int j = 46; j < 72; j++) QP_CHECK_EQ_INT(y[j], 0);
    float r[64];
    T->dequantize(y, r, 64);
    QP_CHECK(r[0] == 127.0f && r[1] == -64.0f && r[7] == 126.0f && r[8] == -127.0f && r[11] == 100.0f);
    QP_CHECK(r[32] == 254.0f && r[33] == 4.0f && r[35] == -8.0f && r[36] == -254.0f && r[37] == 0.0f);
    /* an all-zero block (also -0.0) is exact: scale 0, codes 0 */
    float z[32];
    for (int j = 0; j < 32; j++) z[j] = j & 1 ? -0.0f : 0.0f;
    uint8_t zb[36];
    memset(zb, 0x55, sizeof zb);
    T->quantize_ref(z, zb, 32);
    for (int j = 0; j < 36; j++) QP_CHECK_EQ_INT(zb[j], 0);
    T->dequantize(zb, r, 32);
    for (int j = 0; j < 32; j++) QP_CHECK(r[j] == 0.0f);
    /* fast path = reference bytes */
    uint8_t y2[72];
    T->quantize(x, y2, 64);
    QP_CHECK(memcmp(y, y2, sizeof y) == 0);
    /* a NaN element is coded 0 and does not set the scale; an Inf makes the scale Inf (rejected) */
    float nx[32] = {1.0f, NAN, -127.0f};
    uint8_t nb[36];
    T->quantize_ref(nx, nb, 32);
    QP_CHECK(nb[0] == 0x00 && nb[1] == 0x00 && nb[2] == 0x80 && nb[3] == 0x3f);
    QP_CHECK(nb[4] == 1 && nb[5] == 0 && nb[6] == (uint8_t)-127);
    nx[1] = INFINITY;
    T->quantize_ref(nx, nb, 32);
    QP_CHECK(!T->validate(nb, 32, NULL, 0));
}

/* quantize -> dequantize within amax/254 * (1 + 2^-14) per block; chunk independence. */
static void test_error_bound(void) {
    enum { N = 32 * 512 };
    static float x[N], r[N];
    static uint8_t y[N / 32 * 36], y2[N / 32 * 36];
    for (int dist = 0; dist < 4; dist++) {
        for (int i = 0; i < N; i++) {
            float g = gauss();
            x[i] = dist == 0 ? g : dist == 1 ? g * g * g * 100.0f : dist == 2 ? g * 1e-30f
                   : (float)((int)(rnd() % 255) - 127) * 0.03125f;
        }
        T->quantize_ref(x, y, N);
        T->dequantize(y, r, N);
        double worst = 0.0;
        for (int b = 0; b < N / 32; b++) {
            double amax = 0.0;
            for (int j = 0; j < 32; j++) amax = fmax(amax, fabs((double)x[32 * b + j]));
            double bound = amax / 254.0 * (1.0 + ldexp(1.0, -14));
            for (int j = 0; j < 32; j++) {
                double err = fabs((double)x[32 * b + j] - (double)r[32 * b + j]);
                if (amax > 0) worst = fmax(worst, err / (amax / 254.0));
                QP_CHECK_MSG(err <= bound, "dist %d block %d elem %d: err %g > %g", dist, b, j, err, bound);
            }
        }
        QP_CHECK_MSG(worst > 0.9, "dist %d: worst err/(amax/254) %g: the bound is not tight", dist, worst);
        /* row by row (any split at block boundaries) gives the same bytes */
        for (int row = 0; row < 8; row++) T->quantize_ref(x + row * (N / 8), y2 + row * (N / 8 / 32 * 36), N / 8);
        QP_CHECK(memcmp(y, y2, sizeof y) == 0);
        QP_CHECK(T->validate(y, N, NULL, 0));
    }
}

static void test_dots(void) {
    enum { N = 10240 }; /* > the 8192 elements widened on the stack */
    static float x[N], w[N], a[N];
    static uint8_t q[N / 32 * 36];
    static int8_t a8[N];
    for (int i = 0; i < N; i++) {
        w[i] = gauss();
        x[i] = gauss();
        a8[i] = (int8_t)((int)(rnd() % 256) - 128);
    }
    T->quantize_ref(w, q, N);
    T->dequantize(q, a, N);
    const qp_encoding_traits *f32 = qp_encoding_get(QP_ENC_F32);
    static const int64_t lens[] = {32, 96, 128, 4096, 8192, 8224, N};
    for (int lv = 0; lv <= 2; lv++) {
        qp_encoding_simd_force(lv);
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            int64_t n = lens[k];
            float got = T->vec_dot_f32(q, x, n);
            if (lv == 0 || n > 8192) {
                /* element order, product rounded then added (the scalar reference) */
                float s = 0.0f;
                for (int64_t i = 0; i < n; i++) {
                    float p = a[i] * x[i];
                    s += p;
                }
                QP_CHECK_MSG(memcmp(&got, &s, 4) == 0, "level %d n %lld: %.9g vs %.9g", lv, (long long)n,
                             (double)got, (double)s);
            } else {
                float want = f32->vec_dot_f32(a, x, n);
                QP_CHECK_MSG(memcmp(&got, &want, 4) == 0, "level %d n %lld: %.9g vs F32 dot %.9g", lv,
                             (long long)n, (double)got, (double)want);
            }
            double ref = 0.0, mag = 0.0;
            for (int64_t i = 0; i < n; i++) {
                ref += (double)a[i] * (double)x[i];
                mag += fabs((double)a[i] * (double)x[i]);
            }
            QP_CHECK(fabs((double)got - ref) <= 1e-5 * mag);
        }
    }
    qp_encoding_simd_force(-1);
    /* vec_dot_i8: sum over blocks of d * exact integer sum, in double */
    double want = 0.0;
    for (int b = 0; b < N / 32; b++) {
        int64_t acc = 0;
        for (int j = 0; j < 32; j++) acc += (int64_t)(int8_t)q[36 * b + 4 + j] * a8[32 * b + j];
        want += (double)qp_load_f32le(q + 36 * b) * (double)acc;
    }
    QP_CHECK(T->vec_dot_i8(q, a8, N) == want);
}

static void test_validate(void) {
    float x[96];
    for (int i = 0; i < 96; i++) x[i] = gauss();
    uint8_t y[108];
    T->quantize_ref(x, y, 96);
    char why[160] = "";
    QP_CHECK_MSG(T->validate(y, 96, why, sizeof why), "%s", why);
    static const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xbf800000u};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint8_t c[108];
        memcpy(c, y, sizeof c);
        qp_store_u32le(c + 36, bad[k]);
        why[0] = 0;
        QP_CHECK_MSG(!T->validate(c, 96, why, sizeof why), "scale bits 0x%08x accepted", bad[k]);
        QP_CHECK(strstr(why, "block 1") != NULL);
    }
    /* codes are never invalid: -128 decodes as -128 * d */
    y[4] = 0x80;
    QP_CHECK(T->validate(y, 96, NULL, 0));
}

int main(void) {
    T = qp_encoding_get(QP_ENC_I8_ROW);
    QP_CHECK(T != NULL && T->quantize_ref && T->dequantize && T->vec_dot_f32 && T->validate && T->vec_dot_i8);
    if (!T) return qp_test_finish();
    test_traits();
    test_hand_vectors();
    test_error_bound();
    test_dots();
    test_validate();
    return qp_test_finish();
}
