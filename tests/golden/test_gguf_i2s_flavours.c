/* GGUF type 36 flavours (readers/gguf.md "Type 36 flavours"): hand-made files whose offsets and
 * bytes are computed here, read back with the flavour each tensor must get, and a QK256
 * conversion of the bitnet-float fixture checked against weights computed here from the source.
 * Golden vectors (encodings/enc_ternary.md): microsoft/BitNet's I2_S (byte 0x24 = elements
 * 0/32/64/96 -1,+1,0,-1), BitNet-rs's QK256 0xE4 = [-2,-1,+1,+2], 0xAA = all +1, 256 x 0.5
 * dotted with +1 = 128). */
#include <stdint.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "converters/convert_gguf.h"
#include "readers/gguf_meta.h"


typedef struct tinfo {
    const char *name;
    int n_dims;
    int64_t ne[2];
    uint32_t type;
    const uint8_t *data;
    size_t nbytes;
    uint64_t offset; /* relative, computed by build() unless gap_after of the one before */
    size_t gap_after; /* extra bytes after the padded data (0: packed as llama.cpp) */
} tinfo;

/* keys: "general.architecture" = "bitnet" always; flavour (string) and file_type (u32) when set */
static size_t build(qp_test_buf *b, tinfo *t, int nt, const char *flavour, int file_type) {
    b->n = 0;
    qp_test_put(b, "GGUF", 4);
    qp_test_put_u32(b, 3);
    qp_test_put_u64(b, (uint64_t)nt);
    qp_test_put_u64(b, 1 + (flavour != NULL) + (file_type >= 0));
    qp_test_put_gguf_str(b, "general.architecture"), qp_test_put_u32(b, 8), qp_test_put_gguf_str(b, "bitnet");
    if (flavour) qp_test_put_gguf_str(b, QP_GGUF_I2S_FLAVOUR_KEY), qp_test_put_u32(b, 8), qp_test_put_gguf_str(b, flavour);
    if (file_type >= 0) qp_test_put_gguf_str(b, "general.file_type"), qp_test_put_u32(b, 4), qp_test_put_u32(b, (uint32_t)file_type);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        t[i].offset = off;
        off += (t[i].nbytes + 31) / 32 * 32 + t[i].gap_after;
        qp_test_put_gguf_str(b, t[i].name);
        qp_test_put_u32(b, (uint32_t)t[i].n_dims);
        for (int d = 0; d < t[i].n_dims; d++) qp_test_put_u64(b, (uint64_t)t[i].ne[d]);
        qp_test_put_u32(b, t[i].type);
        qp_test_put_u64(b, t[i].offset);
    }
    while (b->n % 32) qp_test_put(b, "", 1);
    size_t data_start = b->n;
    for (int i = 0; i < nt; i++) {
        while (b->n < data_start + t[i].offset) qp_test_put(b, "", 1);
        qp_test_put(b, t[i].data, t[i].nbytes);
    }
    while (b->n % 32) qp_test_put(b, "", 1);
    return data_start;
}

static char g_path[4200];

static qp_status open_buf(const qp_test_buf *b, qp_model **m, qp_err *e) {
    qp_test_must_write_file(g_path, b->p, b->n);
    *m = NULL;
    qp_err_clear(e);
    return qp_model_open(g_path, NULL, m, e);
}

static bool has_problem(const qp_model *m, const char *s) {
    for (int64_t i = 0; i < m->n_problems; i++)
        if (strstr(m->problems[i], s)) return true;
    return false;
}

/* ---- the hand-made tensors ------------------------------------------------------------- */
static uint8_t g_ms[160];     /* MS I2_S [256, 2]: 512/4 code bytes + f32 0.25 + 28 zeros */
static uint8_t g_qk[128];     /* QK256 [256, 2]: two rows of 64 bytes */
static uint8_t g_scale[4];    /* F32 [1] 0.5 */
static uint8_t g_split[128];  /* Split32 [32, 16] codes */
static uint8_t g_split_sc[64]; /* F32 [16] */
static uint8_t g_b32[60];     /* BitNet32F16 [32, 6]: 6 blocks of 8 code bytes + f16 */

static void make_tensors(void) {
    memset(g_ms, 0x55, 128); /* code 1 = 0 everywhere */
    g_ms[0] = 0x24;          /* elements 0/32/64/96 = -1, +1, 0, -1 */
    qp_store_f32le(g_ms + 128, 0.25f);
    memset(g_qk, 0xAA, 64);  /* row 0: +1 ... */
    g_qk[0] = 0xE4;          /* ... except elements 0..3 = -2, -1, +1, +2 */
    memset(g_qk + 64, 0x00, 64); /* row 1: all -2 */
    qp_store_f32le(g_scale, 0.5f);
    memset(g_split, 0xAA, sizeof g_split);
    for (int i = 0; i < 16; i++) qp_store_f32le(g_split_sc + 4 * i, (float)(i + 1));
    for (int blk = 0; blk < 6; blk++) {
        memset(g_b32 + 10 * blk, 0xAA, 8);
        g_b32[10 * blk + 8] = 0x00, g_b32[10 * blk + 9] = 0x3C; /* f16 1.0 */
    }
}

static void test_mixed_inferred(void) {
    /* one MS I2_S and one QK256 tensor of the same 512 elements, no flavour metadata: MS at 0
     * (160 bytes, exactly n/4 + 32), QK256 at 160 (128 = 2 rows x 64, exactly), scale at 288 */
    tinfo t[3] = {
        {"blk.0.ffn_up.weight", 2, {256, 2}, 36, g_ms, sizeof g_ms, 0, 0},
        {"blk.0.ffn_down.weight", 2, {256, 2}, 36, g_qk, sizeof g_qk, 0, 0},
        {"blk.0.ffn_down.scale", 1, {1, 1}, 0, g_scale, 4, 0, 0},
    };
    static qp_test_buf b;
    size_t ds = build(&b, t, 3, NULL, -1);
    QP_CHECK_EQ_INT(t[1].offset, 160);
    QP_CHECK_EQ_INT(t[2].offset, 288);
    qp_model *m;
    qp_err e;
    qp_status s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) return;
    const qp_tensor *ms = qp_model_find(m, "blk.0.ffn_up.weight");
    const qp_tensor *qk = qp_model_find(m, "blk.0.ffn_down.weight");
    QP_CHECK(ms && ms->enc == QP_ENC_I2_S && ms->nbytes == 160 && ms->offset == ds);
    QP_CHECK(qk && qk->enc == QP_ENC_QK256 && qk->nbytes == 128 && qk->offset == ds + 160);
    QP_CHECK(has_problem(m, "'blk.0.ffn_up.weight' (GGUF type 36): flavour MS I2_S inferred from its 160 bytes"));
    QP_CHECK(has_problem(m, "2 type-36 tensors in all had their flavour inferred"));
    if (ms && ms->enc == QP_ENC_I2_S) {
        float y[512];
        QP_CHECK(qp_encoding_dequantize_tensor(QP_ENC_I2_S, ms->data, y, 512));
        int bad = 0;
        for (int i = 0; i < 512; i++) {
            float want = i == 0 || i == 96 ? -0.25f : i == 32 ? 0.25f : 0.0f;
            bad += y[i] != want;
        }
        QP_CHECK_EQ_INT(bad, 0);
    }
    if (qk && qk->enc == QP_ENC_QK256) {
        const qp_encoding_traits *tr = qp_encoding_get(QP_ENC_QK256);
        float y[256], x[256], sc = 0.0f;
        tr->dequantize(qk->data, y, 256);
        QP_CHECK(y[0] == -2.0f && y[1] == -1.0f && y[2] == 1.0f && y[3] == 2.0f && y[4] == 1.0f && y[255] == 1.0f);
        for (int i = 0; i < 256; i++) x[i] = 0.5f;
        /* row 0: (-2 - 1 + 1 + 2) * 0.5 + 252 * 0.5 = 126; row 1: 256 * -2 * 0.5 = -256 */
        QP_CHECK(tr->vec_dot_f32(qk->data, x, 256) == 126.0f);
        QP_CHECK(tr->vec_dot_f32(qk->data + 64, x, 256) == -256.0f);
        QP_CHECK(qp_gguf_sibling_scale(m, qk, &sc) && sc == 0.5f);
    }
    qp_model_close(m);

    /* the same file saying qk256 for every type-36 tensor: the MS tensor is exactly n/4 + 32 */
    build(&b, t, 3, "qk256", -1);
    s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_ERR_CORRUPT && strstr(e.msg, "blk.0.ffn_up.weight") &&
                 strstr(e.msg, "exactly the size of MS I2_S"), "%s: %s", qp_status_name(s), e.msg);
    qp_model_close(m);
    /* and saying microsoft/BitNet (file_type 40): the QK256 tensor has 128 of 160 bytes */
    build(&b, t, 3, NULL, 40);
    s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_ERR_CORRUPT && strstr(e.msg, "blk.0.ffn_down.weight") && strstr(e.msg, "160") &&
                 strstr(e.msg, "128"), "%s: %s", qp_status_name(s), e.msg);
    qp_model_close(m);
    /* each flavour declared on its own file reads without an "inferred" problem */
    build(&b, t, 1, NULL, 40);
    s = open_buf(&b, &m, &e);
    QP_CHECK(s == QP_OK && qp_model_find(m, "blk.0.ffn_up.weight")->enc == QP_ENC_I2_S && m->n_problems == 0);
    qp_model_close(m);
    build(&b, t + 1, 2, "qk256", -1);
    s = open_buf(&b, &m, &e);
    QP_CHECK(s == QP_OK && qp_model_find(m, "blk.0.ffn_down.weight")->enc == QP_ENC_QK256 && m->n_problems == 0);
    qp_model_close(m);
}

static void test_32_flavours(void) {
    /* Split32 [32, 16]: 128 code bytes + F32 [16] sibling; QK256 would need 16 x 64 */
    tinfo t[2] = {
        {"x.weight", 2, {32, 16}, 36, g_split, sizeof g_split, 0, 0},
        {"x.scale", 1, {16, 1}, 0, g_split_sc, sizeof g_split_sc, 0, 0},
    };
    static qp_test_buf b;
    build(&b, t, 2, NULL, -1);
    qp_model *m;
    qp_err e;
    qp_status s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_OK && qp_model_find(m, "x.weight")->enc == QP_ENC_SPLIT32 &&
                 qp_model_find(m, "x.weight")->nbytes == 128 && has_problem(m, "flavour Split32 inferred"),
                 "%s", e.msg);
    qp_model_close(m);
    /* without the sibling 128 bytes are no flavour: CORRUPT listing every size */
    build(&b, t, 1, NULL, -1);
    s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_ERR_CORRUPT && strstr(e.msg, "QK256 needs 1024, MS I2_S 160, BitNet32F16 160, "
                 "Split32 128 with a sibling scale"), "%s: %s", qp_status_name(s), e.msg);
    qp_model_close(m);
    /* BitNet32F16 [32, 6]: 60 bytes, padded to 64 before the next tensor */
    tinfo u[2] = {
        {"y.weight", 2, {32, 6}, 36, g_b32, sizeof g_b32, 0, 0},
        {"z.weight", 1, {1, 1}, 0, g_scale, 4, 0, 0},
    };
    build(&b, u, 2, NULL, -1);
    s = open_buf(&b, &m, &e);
    QP_CHECK_MSG(s == QP_OK && qp_model_find(m, "y.weight")->enc == QP_ENC_BITNET32F16 &&
                 qp_model_find(m, "y.weight")->nbytes == 60 && has_problem(m, "flavour BitNet32F16 inferred"),
                 "%s", e.msg);
    if (s == QP_OK) {
        float y[192];
        qp_encoding_get(QP_ENC_BITNET32F16)->dequantize(qp_model_find(m, "y.weight")->data, y, 192);
        QP_CHECK(y[0] == 0.0f && y[191] == 0.0f); /* 0xAA: code 2 = v 0 (BitNet-rs pack_2bit_values) */
    }
    qp_model_close(m);
}

/* convert the bitnet-float fixture to QK256 and compare every QK256 tensor, decoded with its
 * sibling scale, with the source weights mapped here: w = q * alpha -> -alpha for q = -1, +alpha
 * for q = 0 and +1 (the tie rule: a ternary zero has no QK256 code and becomes +1) */
static void test_fixture(void) {
    char src[4200], out[4300];
    snprintf(src, sizeof src, "%s/bitnet-float", qp_test_env("QP_FIXTURES_DIR", "fixtures"));
    snprintf(out, sizeof out, "%s.qk256.gguf", g_path);
    qp_model *m = NULL, *g = NULL;
    qp_err e;
    if (qp_model_open(src, NULL, &m, &e) != QP_OK) {
        fprintf(stderr, "note: %s not available (%s); fixture part skipped\n", src, e.msg);
        return;
    }
    qp_convert_opts o = {0};
    o.quant = QP_QUANT_QK256;
    o.threads = 2;
    qp_status s = qp_convert_gguf(m, &o, out, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s == QP_OK) s = qp_model_open(out, NULL, &g, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    int n_qk = 0;
    for (int64_t i = 0; g && i < g->n_tensors; i++) {
        const qp_tensor *t = &g->tensors[i];
        if (t->enc != QP_ENC_QK256) continue;
        n_qk++;
        const qp_tensor *st = qp_model_find(m, t->name); /* canonical name of the HF tensor */
        float sc;
        int64_t n = qp_tensor_nelements(t);
        QP_CHECK(st && qp_tensor_nelements(st) == n && qp_gguf_sibling_scale(g, t, &sc));
        QP_CHECK_EQ_INT(t->nbytes, (size_t)(t->ne[1] * ((t->ne[0] + 255) / 256) * 64));
        if (!st || st->enc != QP_ENC_BF16) continue;
        float alpha = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            float w = qp_bf16_to_fp32(qp_load_u16le(st->data + 2 * k));
            if (w != 0.0f) { alpha = fabsf(w); break; }
        }
        QP_CHECK(sc == alpha);
        float *y = malloc((size_t)n * sizeof *y);
        qp_encoding_get(QP_ENC_QK256)->dequantize(t->data, y, n);
        int64_t bad = 0, zeros = 0;
        for (int64_t k = 0; k < n; k++) {
            float w = qp_bf16_to_fp32(qp_load_u16le(st->data + 2 * k));
            zeros += w == 0.0f;
            bad += y[k] * sc != (w < 0.0f ? -alpha : alpha);
        }
        QP_CHECK_MSG(bad == 0, "%s: %lld of %lld weights differ", t->name, (long long)bad, (long long)n);
        printf("%s: %lld weights, %lld ternary zeros stored as +%g\n", t->name, (long long)n,
               (long long)zeros, (double)alpha);
        free(y);
    }
    QP_CHECK(n_qk >= 2);
    QP_CHECK(g && !has_problem(g, "inferred"));
    qp_model_close(g);
    qp_model_close(m);
    unlink(out);
}

int main(void) {
    snprintf(g_path, sizeof g_path, "%s/i2s_flavours.%ld.gguf", qp_test_env("QP_TMP_DIR", "/tmp"), (long)getpid());
    make_tensors();
    test_mixed_inferred();
    test_32_flavours();
    test_fixture();
    unlink(g_path);
    return qp_test_finish();
}
