/* Hand-checked test vectors for the BitNet and bullet encodings (byte tables in
 * encodings/enc_ternary.md and enc_bq4.md). Every expected byte here was worked out by hand from
 * the sources those docs name (llama.cpp, microsoft/BitNet, BitNet-rs, bullet-core), never taken from
 * our own output.
 * TQ1_0 / TQ2_0 are pinned against llama.cpp itself in tests/peer/test_enc_vs_ggml.c. */
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static float f32_at(const uint8_t *p) { return qp_load_f32le(p); }

static void test_i2s(void) {
    /* 128 elements: 0/32/64/96 = -1,+1,0,-1, the rest 0; scale 1 */
    float x[256] = {0};
    uint8_t y[256 / 4 + 32];
    x[0] = -1, x[32] = 1, x[64] = 0, x[96] = -1;
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_I2_S);
    size_t tb = 0;
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_I2_S, 128, &tb) && tb == 128 / 4 + 32);
    memset(y, 0xEE, sizeof y);
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S, x, y, 128));
    QP_CHECK_MSG(y[0] == 0x24, "byte 0 = 0x%02x", y[0]);
    /* every other byte holds four zeros: code 1 in each 2-bit field = 0x55 */
    int ok = 1;
    for (int i = 1; i < 32; i++) ok &= y[i] == 0x55;
    QP_CHECK(ok);
    QP_CHECK(f32_at(y + 32) == 1.0f);          /* scale at byte n/4 */
    ok = 1;
    for (int i = 36; i < 64; i++) ok &= y[i] == 0;
    QP_CHECK(ok);                              /* then 28 zero bytes */
    float s = 0.0f;
    QP_CHECK(qp_encoding_tensor_scale(QP_ENC_I2_S, y, tb, 128, &s) && s == 1.0f);

    /* 256 elements scaled by 0.25: block 1 (bytes 32..63), element 128+1 = +0.25, 128+33 = -0.25 */
    memset(x, 0, sizeof x);
    x[128 + 1] = 0.25f, x[128 + 33] = -0.25f, x[5] = 0.25f;
    uint8_t z[256 / 4 + 32];
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S, x, z, 256));
    QP_CHECK_MSG(z[5] == 0x95, "z[5] = 0x%02x", z[5]);       /* 2<<6 | 1<<4 | 1<<2 | 1 */
    QP_CHECK_MSG(z[33] == 0x85, "z[33] = 0x%02x", z[33]);    /* 2<<6 | 0<<4 | 1<<2 | 1 */
    QP_CHECK(f32_at(z + 64) == 0.25f);
    float back[256];
    QP_CHECK(qp_encoding_dequantize_tensor(QP_ENC_I2_S, z, back, 256));
    QP_CHECK(memcmp(back, x, sizeof back) == 0);
    /* row functions work at unit scale */
    t->dequantize(z, back, 256);
    QP_CHECK(back[5] == 1.0f && back[129] == 1.0f && back[161] == -1.0f && back[0] == 0.0f);
    /* code 3 is illegal */
    char why[128];
    QP_CHECK(t->validate(z, 256, why, sizeof why));
    z[7] = 0xFF;
    QP_CHECK(!t->validate(z, 256, why, sizeof why));

    /* ARM layout: 64-element blocks of 16 bytes; elements 0/16/32/48 = -1,+1,0,-1 -> 0x24 */
    memset(x, 0, sizeof x);
    x[0] = -2, x[16] = 2, x[48] = -2;
    uint8_t a[64 / 4 + 32];
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_I2_S_ARM, x, a, 64));
    QP_CHECK_MSG(a[0] == 0x24, "arm byte 0 = 0x%02x", a[0]);
    QP_CHECK(a[1] == 0x55 && f32_at(a + 16) == 2.0f);
}

static void test_qk256(void) {
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_QK256);
    QP_CHECK(t && t->block_elems == 256 && t->block_bytes == 64);
    /* QK256 (enc_ternary.md): a 0xAA block is all code 2 -> +1.0, and its dot with 0.5s is 128.0 */
    uint8_t w[64 * 64];
    memset(w, 0xAA, sizeof w);
    float y[256], half[256];
    t->dequantize(w, y, 256);
    int ok = 1;
    for (int i = 0; i < 256; i++) ok &= y[i] == 1.0f, half[i] = 0.5f;
    QP_CHECK(ok);
    /* 64 rows of 256: every output is 128.0 */
    ok = 1;
    for (int r = 0; r < 64; r++) ok &= t->vec_dot_f32(w + 64 * r, half, 256) == 128.0f;
    QP_CHECK(ok);
    int8_t a[256];
    memset(a, 3, sizeof a);
    QP_CHECK(t->vec_dot_i8(w, a, 256) == 768.0);
    /* byte i holds elements 4i..4i+3 LSB first: [-2,-1,+1,+2] -> 0 | 1<<2 | 2<<4 | 3<<6 = 0xE4 */
    float x[256] = {-2, -1, 1, 2};
    for (int i = 4; i < 256; i++) x[i] = 1;
    uint8_t q[64];
    t->quantize_ref(x, q, 256);
    QP_CHECK_MSG(q[0] == 0xE4, "q[0] = 0x%02x", q[0]);
    QP_CHECK(q[1] == 0xAA);
    /* tie rule: nearest level, ties toward zero; 0 (no code for it) -> +1 */
    float tie[4] = {0.0f, 1.5f, -1.5f, 1.6f};
    for (int i = 0; i < 4; i++) x[i] = tie[i];
    t->quantize_ref(x, q, 256);
    QP_CHECK_MSG(q[0] == (2 | 2 << 2 | 1 << 4 | 3 << 6), "tie byte 0x%02x", q[0]);
}

static void test_bitnet32(void) {
    /* BitNet32F16: 8 code bytes (code = v + 2, LSB first) + f16 scale at byte 8 */
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_BITNET32F16);
    float x[32] = {0};
    x[0] = 0.5f, x[1] = -0.5f, x[2] = 0.0f, x[3] = 0.5f;
    uint8_t y[10];
    t->quantize_ref(x, y, 32);
    QP_CHECK_MSG(y[0] == (3 | 1 << 2 | 2 << 4 | 3 << 6), "b32 byte 0 = 0x%02x", y[0]);
    QP_CHECK(y[1] == 0xAA && qp_load_u16le(y + 8) == 0x3800); /* f16 0.5 */
    float back[32];
    t->dequantize(y, back, 32);
    QP_CHECK(memcmp(back, x, sizeof back) == 0);
    /* Split32: same codes, scale in a sibling array */
    uint8_t c[8];
    float sc;
    qp_split32_quantize(x, c, &sc, 32);
    QP_CHECK(memcmp(c, y, 8) == 0 && sc == 0.5f);
    qp_split32_dequantize(c, &sc, back, 32);
    QP_CHECK(memcmp(back, x, sizeof back) == 0);
}

static void test_packed_u8(void) {
    /* out = 4, in = 2: packed[0,c] bits 2i+1:2i = W[i, c] + 1 */
    const int8_t w[8] = {-1, 1, 0, 1, 1, 0, 1, -1}; /* W[row][col], rows 0..3 */
    uint8_t p[2];
    qp_bitnet_u8_pack(w, 4, 2, p);
    /* col 0: W = -1, 0, 1, 1 -> 0 | 1<<2 | 2<<4 | 2<<6 = 0xA4; col 1: 1,1,0,-1 -> 2|2<<2|1<<4|0 = 0x1A */
    QP_CHECK_MSG(p[0] == 0xA4 && p[1] == 0x1A, "packed %02x %02x", p[0], p[1]);
    int8_t u[8];
    int64_t bad = -1;
    QP_CHECK(qp_bitnet_u8_unpack(p, 4, 2, u, &bad) && memcmp(u, w, 8) == 0);
    float f[8];
    QP_CHECK(qp_bitnet_u8_to_f32(p, 4, 2, 0.5f, f, &bad) && f[0] == -0.5f && f[1] == 0.5f);
    p[1] = 0xFF;
    QP_CHECK(!qp_bitnet_u8_unpack(p, 4, 2, u, &bad) && bad == 1);
}

static void test_quantizers(void) {
    /* activations: s = 127 / max|x|; round half to even */
    const float x[4] = {1.0f, -0.5f, 0.25f, 0.0f};
    int8_t a[4];
    float s = qp_act_quantize_i8(x, 4, a);
    QP_CHECK(s == 127.0f && a[0] == 127 && a[1] == -64 && a[2] == 32 && a[3] == 0);
    /* absmean: mean|w| = 0.525 -> w/mean = 0.95, -2.86, 0.19, 0 */
    const float w[4] = {0.5f, -1.5f, 0.1f, 0.0f};
    int8_t q[4];
    float sc;
    qp_ternary_absmean(w, 4, q, &sc);
    QP_CHECK(q[0] == 1 && q[1] == -1 && q[2] == 0 && q[3] == 0 && fabsf(sc - 0.525f) < 1e-7f);
}

static void test_tq(void) {
    /* TQ2_0: element 0 = +d, 32 = -d, rest 0: qs[0] = 2 | 0<<2 | 1<<4 | 1<<6 = 0x52; d = f16 */
    float x[256] = {0};
    x[0] = 2.0f, x[32] = -2.0f;
    uint8_t y[66];
    qp_encoding_get(QP_ENC_TQ2_0)->quantize_ref(x, y, 256);
    QP_CHECK_MSG(y[0] == 0x52 && y[1] == 0x55 && qp_load_u16le(y + 64) == 0x4000, "tq2 %02x", y[0]);
    /* TQ1_0: all-zero trits (1,1,1,1,1) = 121 -> ceil(121*256/243) = 128; qh: (1,1,1,1,0)=120 ->
     * ceil(120*256/243) = 127 */
    memset(x, 0, sizeof x);
    x[5] = 1.0f; /* block max 1: element 5 is trit 2 of byte 5 (digit 0): 2*81+27+9+3+1 = 202 */
    uint8_t z[54];
    qp_encoding_get(QP_ENC_TQ1_0)->quantize_ref(x, z, 256);
    QP_CHECK_MSG(z[0] == 128 && z[48] == 127 && z[5] == 213, "tq1 %u %u %u", z[0], z[48], z[5]);
}

static void test_bq4(void) {
    const qp_encoding_traits *t = qp_encoding_get(QP_ENC_BQ4);
    /* decode: scale f16 1.0, zero 8, byte 4 = 0x21 -> q0 1, q1 2 -> -7, -6; 0xF0 -> -8, +7 */
    uint8_t b[20] = {0x00, 0x3C, 8, 0, 0x21, 0xF0};
    float y[32];
    t->dequantize(b, y, 32);
    QP_CHECK(y[0] == -7.0f && y[1] == -6.0f && y[2] == -8.0f && y[3] == 7.0f && y[4] == -8.0f);
    /* signed zero byte, scale 0.5: zero = -2 -> q 0 decodes to +1.0 */
    uint8_t c[20] = {0x00, 0x38, 0xFE, 0, 0x10};
    t->dequantize(c, y, 32);
    QP_CHECK(y[0] == 1.0f && y[1] == 1.5f && y[2] == 1.0f);
    /* encoder: all-zero and constant blocks are exact */
    float x[32];
    uint8_t e[20];
    for (int i = 0; i < 32; i++) x[i] = 0.0f;
    t->quantize_ref(x, e, 32);
    int ok = 1;
    for (int i = 0; i < 20; i++) ok &= e[i] == 0;
    QP_CHECK(ok);
    const float consts[] = {1.0f, -1.0f, 0.0078125f, 3.140625f, -65504.0f};
    for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
        for (int i = 0; i < 32; i++) x[i] = consts[k];
        t->quantize_ref(x, e, 32);
        t->dequantize(e, y, 32);
        QP_CHECK_MSG(memcmp(x, y, sizeof y) == 0, "constant %g decodes to %g", consts[k], y[0]);
        QP_CHECK(e[2] <= 15 && e[3] == 0);
    }
    /* ones as bullet norm weights: scale f16 1.0 (0x3C00), zero 0, nibbles 1 */
    for (int i = 0; i < 32; i++) x[i] = 1.0f;
    t->quantize_ref(x, e, 32);
    QP_CHECK(qp_load_u16le(e) == 0x3C00 && e[2] == 0 && e[4] == 0x11);
}

int main(void) {
    test_i2s();
    test_qk256();
    test_bitnet32();
    test_packed_u8();
    test_quantizers();
    test_tq();
    test_bq4();
    return qp_test_finish();
}
