/* Golden TRLM bytes for the current Trillim SDK's actions 4-7 (converters/trillim_sdk.md).
 * A one-layer Llama model is written here as a raw BF16 shard and a current-SDK manifest
 * (sections block; an independent writer following _manifest.py's struct.pack fields), run
 * through qp_trillim_quantize, and every stored block of every quantized record is compared
 * with bytes computed in this file by small implementations of the documented formulas that
 * share nothing with the encoder (the compiler's _Float16 for f16, rintf/roundf, own packing):
 *   action 6 Q8_0 (ggml quantize_row_q8_0_ref): d = amax/127, f16(d), q = roundf(x * (1/d));
 *   action 7 Q8_0 with 32 rows interleaved per block column, padded rows rounded up to 32;
 *   action 4 Q1_0_128: d = f16(mean |x| over 128, double sum), bit j = x_j >= 0 (+d);
 *   action 5 TG128: d = f16(mean |x| over the nonzero x), q = clamp(rint(x / f16d), -1, 1),
 *            code q+1 at bits 2(j%4) of byte j/4.
 * Sources: float values for every action; sign-valued (+-a per group) for action 4 and ternary
 * ({-a, 0, a} per group) for action 5, which must come back exactly through the reader (weight
 * level: every dequantized element equals the source). With `embed` the embedding (40 rows)
 * takes the action too (Bonsai), so action 7 pads it to 64 rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "converters/trillim_manifest.h"
#include "converters/trillim_quantize.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"

enum { H = 128, I = 256, KV = 64, V = 40, NT = 11 };
typedef enum { SRC_FLOAT, SRC_SIGN, SRC_TERN } src_kind;

typedef struct tdesc {
    int rows, cols; /* cols 1: a 1-D norm */
} tdesc;
/* current SDK order for LlamaForCausalLM, tied (no lm_head): embed, norm, then one layer */
static const tdesc k_t[NT] = {{V, H}, {H, 1}, {H, 1}, {KV, H}, {KV, H}, {H, H}, {H, H},
                              {H, 1}, {I, H}, {I, H}, {H, I}};

static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
static float bf16_round(float f) { /* f is exactly representable below */
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}
/* source value of tensor t at (r, c): exactly a bf16 */
static float src_value(int t, int r, int c, src_kind k) {
    uint64_t h = mix(((uint64_t)t << 40) ^ ((uint64_t)r << 20) ^ (uint64_t)c);
    if (k_t[t].cols == 1) return 1.0f + (float)(h % 16) / 64.0f;
    float a = ldexpf(1.0f, -3 - (int)((r * 7 + c / 128) % 3)); /* one a per 128-group */
    if (k == SRC_SIGN) return h & 1 ? a : -a;
    if (k == SRC_TERN) return (float)((int)(h % 3) - 1) * a;
    return bf16_round(((float)(h % 20001) / 10000.0f - 1.0f) * 0.25f);
}

static uint16_t f16_bits(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float f16_value(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

/* the expected block (block_bytes) of n = 32 or 128 source values x */
static size_t ref_block(int action, const float *x, uint8_t *out) {
    if (action == 6 || action == 7) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = f16_bits(d);
        out[0] = (uint8_t)h, out[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)(int)roundf(x[j] * id);
        return 34;
    }
    double sum = 0.0;
    int cnt = 0;
    for (int j = 0; j < 128; j++)
        if (action == 4 || x[j] != 0.0f) sum += fabs((double)x[j]), cnt++;
    uint16_t h = f16_bits(cnt ? (float)(sum / cnt) : 0.0f);
    out[0] = (uint8_t)h, out[1] = (uint8_t)(h >> 8);
    if (action == 4) {
        memset(out + 2, 0, 16);
        for (int j = 0; j < 128; j++)
            if (x[j] >= 0.0f) out[2 + j / 8] |= (uint8_t)(1u << (j % 8));
        return 18;
    }
    float d = f16_value(h);
    memset(out + 2, 0, 32);
    for (int j = 0; j < 128; j++) {
        float q = d > 0.0f ? rintf(x[j] / d) : 0.0f;
        q = q > 1.0f ? 1.0f : q < -1.0f ? -1.0f : q;
        out[2 + j / 4] = (uint8_t)(out[2 + j / 4] | (((int)q + 1) << (2 * (j % 4))));
    }
    return 34;
}

static void put(uint8_t *b, size_t *n, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) b[(*n)++] = (uint8_t)(v >> (8 * i));
}

static void run_case(const char *tmp, int action, src_kind sk, bool embed) {
    char dir[512], shard[600], tens[600], rope[600], label[64];
    snprintf(label, sizeof label, "action %d src %d embed %d", action, (int)sk, (int)embed);
    snprintf(dir, sizeof dir, "%s/trlm_sdk_a%d_s%d_e%d", tmp, action, (int)sk, (int)embed);
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK(qp_path_remove_tree(dir, NULL) == QP_OK && mkdir(dir, 0755) == 0);
    snprintf(shard, sizeof shard, "%s/shard.bin", dir);
    snprintf(tens, sizeof tens, "%s/qmodel.tensors", dir);
    snprintf(rope, sizeof rope, "%s/rope.cache", dir);
    /* the shard: each tensor's BF16 values back to back */
    size_t total = 0, off[NT];
    for (int t = 0; t < NT; t++) off[t] = total, total += (size_t)k_t[t].rows * k_t[t].cols * 2;
    uint8_t *sb = malloc(total);
    for (int t = 0; t < NT; t++)
        for (int r = 0; r < k_t[t].rows; r++)
            for (int c = 0; c < k_t[t].cols; c++) {
                float v = src_value(t, r, c, sk);
                uint32_t u;
                memcpy(&u, &v, 4);
                size_t at = off[t] + 2 * ((size_t)r * k_t[t].cols + c);
                sb[at] = (uint8_t)(u >> 16), sb[at + 1] = (uint8_t)(u >> 24);
            }
    QP_CHECK(qp_file_write_atomic(shard, sb, total, &e) == QP_OK);
    /* the manifest, current SDK form */
    static uint8_t mb[8192];
    size_t n = 0;
    put(mb, &n, 1, 2);
    put(mb, &n, strlen(shard), 2);
    memcpy(mb + n, shard, strlen(shard));
    n += strlen(shard);
    put(mb, &n, NT, 4);
    int act[NT];
    for (int t = 0; t < NT; t++) {
        act[t] = k_t[t].cols == 1 || (t == 0 && !embed) ? 0 : action;
        int pr = k_t[t].rows;
        if (act[t] == 7) pr = (pr + 31) / 32 * 32;
        put(mb, &n, (uint64_t)act[t], 1); put(mb, &n, 2, 1); /* BF16 */
        put(mb, &n, (uint64_t)k_t[t].rows, 4); put(mb, &n, (uint64_t)k_t[t].cols, 4);
        put(mb, &n, (uint64_t)pr, 4); put(mb, &n, (uint64_t)k_t[t].cols, 4);
        put(mb, &n, 0, 2); put(mb, &n, off[t], 8);
        put(mb, &n, (uint64_t)k_t[t].rows * k_t[t].cols * 2, 8);
        put(mb, &n, 0, 1); put(mb, &n, 0, 2); put(mb, &n, 0, 8); put(mb, &n, 0, 8);
    }
    put(mb, &n, 1, 4); /* one TEXT_CORE section over all entries */
    put(mb, &n, 1, 1); put(mb, &n, 0, 4); put(mb, &n, NT, 4);
    qp_trillim_manifest *man = NULL;
    QP_CHECK_MSG(qp_trillim_manifest_parse(mb, n, "golden.manifest", &man, &e) == QP_OK, "%s: %s", label, e.msg);
    qp_trillim_quant_opts o = {0};
    o.manifest_path = "golden.manifest";
    o.output = tens;
    o.arch = 2;
    o.hidden = o.hidden_orig = H;
    o.intermediate = o.intermediate_orig = I;
    o.norm_eps = 1e-5;
    o.tie_embeddings = true;
    o.rope_output = rope;
    o.rope_theta = 10000.0;
    o.max_pos = 64;
    o.head_dim = 32;
    o.rope_dim = 32;
    qp_status s = man ? qp_trillim_quantize(man, &o, &e) : QP_ERR_INTERNAL;
    QP_CHECK_MSG(s == QP_OK, "%s: quantize: %s", label, e.msg);
    qp_trillim_manifest_free(man);
    char *file = NULL;
    size_t flen = 0;
    QP_CHECK(qp_file_read_all(tens, (size_t)1 << 26, &file, &flen, &e) == QP_OK);
    const uint8_t *f = (const uint8_t *)file;
    QP_CHECK_EQ_INT(qp_load_u32le(f + 16), 2); /* body version 2: kinds >= 3 */
    int bad = 0, checked = 0;
    for (int t = 0; t < NT && file; t++) {
        if (act[t] == 0) continue;
        const uint8_t *rec = f + 64 + 48 * t;
        int want_kind = action == 6 ? 3 : action == 7 ? 4 : action == 4 ? 5 : 6;
        QP_CHECK_MSG(rec[0] == want_kind, "%s: record %d kind %d, want %d", label, t, rec[0], want_kind);
        uint64_t doff = qp_load_u64le(rec + 24);
        int be = action >= 6 ? 32 : 128, rows = k_t[t].rows, cols = k_t[t].cols, nb = cols / be;
        int prows = action == 7 ? (rows + 31) / 32 * 32 : rows;
        size_t bb = action >= 6 ? 34 : action == 4 ? 18 : 34;
        QP_CHECK_EQ_INT(qp_load_u64le(rec + 32), (uint64_t)prows * nb * bb);
        for (int r = 0; r < prows; r++)
            for (int j = 0; j < nb; j++) {
                float x[128] = {0};
                for (int k = 0; k < be && r < rows; k++) x[k] = src_value(t, r, j * be + k, sk);
                uint8_t want[34];
                ref_block(action, x, want);
                /* Q8_0_B32: the 32 rows of a group side by side per block column */
                size_t at = action == 7 ? (((size_t)(r / 32) * nb + j) * 32 + r % 32) * bb
                                        : ((size_t)r * nb + j) * bb;
                checked++;
                if (memcmp(f + doff + at, want, bb) != 0 && bad++ < 3)
                    QP_CHECK_MSG(0, "%s: tensor %d row %d block %d differs from the formula", label, t, r, j);
            }
    }
    QP_CHECK_MSG(bad == 0 && checked > 0, "%s: %d of %d blocks differ", label, bad, checked);
    free(file);
    /* lossless sources come back exactly through the reader */
    if ((action == 4 && sk == SRC_SIGN) || (action == 5 && sk == SRC_TERN)) {
        qp_model *m = NULL;
        s = qp_model_open(dir, NULL, &m, &e);
        QP_CHECK_MSG(s == QP_OK, "%s: open: %s", label, e.msg);
        static const char *const names[NT] = {"token_embd.weight", NULL, NULL, "blk.0.attn_k.weight",
                                              "blk.0.attn_v.weight", "blk.0.attn_q.weight",
                                              "blk.0.attn_output.weight", NULL, "blk.0.ffn_gate.weight",
                                              "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"};
        int diff = 0;
        for (int t = 0; m && t < NT; t++) {
            if (!names[t] || act[t] == 0) continue;
            const qp_tensor *x = qp_model_find(m, names[t]);
            QP_CHECK_MSG(x && x->enc == (action == 4 ? QP_ENC_Q1_0_128 : QP_ENC_TG128), "%s: %s", label, names[t]);
            if (!x) continue;
            float *w = malloc((size_t)k_t[t].rows * k_t[t].cols * sizeof *w);
            QP_CHECK(qp_encoding_dequantize_tensor(x->enc, x->data, w, (int64_t)k_t[t].rows * k_t[t].cols));
            for (int r = 0; r < k_t[t].rows; r++)
                for (int c = 0; c < k_t[t].cols; c++)
                    diff += w[(size_t)r * k_t[t].cols + c] != src_value(t, r, c, sk);
            free(w);
        }
        QP_CHECK_MSG(diff == 0, "%s: %d weights differ from the source", label, diff);
        qp_model_close(m);
    }
    free(sb);
    QP_CHECK(qp_path_remove_tree(dir, NULL) == QP_OK);
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    mkdir(tmp, 0755);
    static const struct { int action; src_kind sk; bool embed; } k_cases[] = {
        {6, SRC_FLOAT, false}, {6, SRC_FLOAT, true}, {7, SRC_FLOAT, false}, {7, SRC_FLOAT, true},
        {4, SRC_FLOAT, true},  {4, SRC_SIGN, true},  {5, SRC_FLOAT, true},  {5, SRC_TERN, false},
        {5, SRC_TERN, true},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        run_case(tmp, k_cases[i].action, k_cases[i].sk, k_cases[i].embed);
    return qp_test_finish();
}
