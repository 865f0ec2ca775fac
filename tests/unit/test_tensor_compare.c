/* qp_models_compare_tensors (converters/tensor_compare.h), the proof of a lossless round trip
 * (cli/roundtrip.md): on models built in memory, equal bytes, equal values in another encoding
 * (BF16 vs its F32 widening), q/k rows in the other RoPE order (the permutation written here
 * from llama.cpp's reshape(nh, 2, hd/2, cols).swapaxes(1, 2), not from readers/name_map.h), and
 * each way to differ: one bit of one element, the unpermuted rows, a shape, a missing tensor, a
 * tensor more. */
#include <string.h>

#include "converters/tensor_compare.h"
#include "core/model_internal.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"

enum { HEADS = 2, HD = 8, ROWS = HEADS * HD, COLS = 3 }; /* HD 4 would make the permutation its own inverse */

static float g_q[ROWS * COLS];      /* attn_q, halves order (HF) */
static float g_q_pairs[ROWS * COLS]; /* the same rows in adjacent-pairs order (GGUF llama) */
static float g_norm[COLS] = {1.0f, -0.5f, 0.25f}; /* exact in BF16 */
static uint16_t g_norm_bf16[COLS];

static qp_model *model_new(qp_rope_style rope) {
    qp_model *m = NULL;
    QP_CHECK(qp_model_new(QP_FORMAT_GGUF, "mem", &m, NULL) == QP_OK);
    if (!m) exit(qp_test_finish());
    m->arch.n_heads = HEADS;
    m->arch.n_kv_heads = HEADS;
    m->arch.rope_style = rope;
    return m;
}

static void add(qp_model *m, const char *name, qp_encoding enc, int64_t ne0, int64_t ne1, const void *data) {
    qp_tensor *t = NULL;
    QP_CHECK(qp_model_add_tensor(m, name, strlen(name), &t, NULL) == QP_OK);
    if (!t) exit(qp_test_finish());
    t->canon = qp_arena_strdup(qp_model_arena(m), name);
    t->enc = enc;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->data = data;
    qp_encoding_tensor_bytes(enc, ne0 * ne1, &t->nbytes);
}

static void finish(qp_model *m) { QP_CHECK(qp_model_finish(m, NULL) == QP_OK); }

static qp_model *model_with(qp_rope_style rope, const float *q, qp_encoding norm_enc, const void *norm) {
    qp_model *m = model_new(rope);
    add(m, "blk.0.attn_q.weight", QP_ENC_F32, COLS, ROWS, q);
    add(m, "output_norm.weight", norm_enc, COLS, 1, norm);
    return m;
}

static qp_tensor_compare_result compare(qp_model *a, qp_model *b) {
    finish(a);
    finish(b);
    qp_tensor_compare_result r;
    memset(&r, 0, sizeof r);
    QP_CHECK(qp_models_compare_tensors(a, b, &r, NULL) == QP_OK);
    qp_model_close(a);
    qp_model_close(b);
    return r;
}

static void setup(void) {
    for (int i = 0; i < ROWS * COLS; i++) g_q[i] = (float)(i * 7 % 23) - 11.0f + 0.125f * (float)i;
    /* pairs row h*HD + 2*i + k holds halves row h*HD + k*HD/2 + i */
    for (int h = 0; h < HEADS; h++)
        for (int i = 0; i < HD / 2; i++)
            for (int k = 0; k < 2; k++)
                memcpy(&g_q_pairs[(h * HD + 2 * i + k) * COLS], &g_q[(h * HD + k * HD / 2 + i) * COLS],
                       COLS * sizeof(float));
    for (int i = 0; i < COLS; i++) g_norm_bf16[i] = qp_fp32_to_bf16(g_norm[i]);
}

int main(void) {
    setup();
    qp_tensor_compare_result r;

    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(r.equal && r.n_tensors == 2 && r.n_same_bytes == 2, "copy: %s", r.reason);

    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_BF16, g_norm_bf16),
                model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(r.equal && r.n_same_bytes == 1 && r.n_same_f32 == 1, "BF16 vs F32: %s", r.reason);

    /* HF halves vs GGUF pairs, both ways */
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), model_with(QP_ROPE_NORM, g_q_pairs, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(r.equal && r.n_reordered == 1 && r.n_same_bytes == 1, "halves vs pairs: %s", r.reason);
    r = compare(model_with(QP_ROPE_NORM, g_q_pairs, QP_ENC_F32, g_norm), model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(r.equal && r.n_reordered == 1, "pairs vs halves: %s", r.reason);
    /* the rows not permuted although the orders differ */
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), model_with(QP_ROPE_NORM, g_q, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(!r.equal && strstr(r.reason, "tensor 'blk.0.attn_q.weight': element "), "unpermuted: %s", r.reason);

    /* one bit of one element */
    float q2[ROWS * COLS];
    memcpy(q2, g_q, sizeof q2);
    uint32_t bits;
    memcpy(&bits, &q2[17], 4);
    bits ^= 1;
    memcpy(&q2[17], &bits, 4);
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), model_with(QP_ROPE_NEOX, q2, QP_ENC_F32, g_norm));
    QP_CHECK_MSG(!r.equal && strstr(r.reason, "tensor 'blk.0.attn_q.weight': element 17 differs"), "one bit: %s", r.reason);

    /* a shape: the same bytes as [COLS*ROWS] */
    qp_model *flat = model_new(QP_ROPE_NEOX);
    add(flat, "blk.0.attn_q.weight", QP_ENC_F32, ROWS * COLS, 1, g_q);
    add(flat, "output_norm.weight", QP_ENC_F32, COLS, 1, g_norm);
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), flat);
    QP_CHECK_MSG(!r.equal && strstr(r.reason, "tensor 'blk.0.attn_q.weight': shape [3, 16, 1, 1] vs [48, 1, 1, 1]"),
                 "shape: %s", r.reason);

    /* a tensor missing, a tensor more */
    qp_model *less = model_new(QP_ROPE_NEOX);
    add(less, "blk.0.attn_q.weight", QP_ENC_F32, COLS, ROWS, g_q);
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), less);
    QP_CHECK_MSG(!r.equal && strstr(r.reason, "tensor 'output_norm.weight' is missing from mem"), "missing: %s", r.reason);
    qp_model *more = model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm);
    add(more, "blk.0.attn_norm.weight", QP_ENC_F32, COLS, 1, g_norm);
    r = compare(model_with(QP_ROPE_NEOX, g_q, QP_ENC_F32, g_norm), more);
    QP_CHECK_MSG(!r.equal && r.n_tensors == 2 && strstr(r.reason, "mem has 3 tensors, mem has 2"), "more: %s", r.reason);

    return qp_test_finish();
}
