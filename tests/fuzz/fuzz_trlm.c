/* libFuzzer target for the TRLM v1 reader (readers/trlm.c). Two modes, chosen by the magic:
 *  - input starting with "TRLA": the bytes become qmodel.lora and qp_trlm_apply_lora merges them
 *    into a fixed valid model (written once per process, below);
 *  - anything else: the bytes become qmodel.tensors of a directory holding a valid rope.cache
 *    (8 positions, head_dim 2) and config.json; a model that opens also gets the fixed valid
 *    qmodel.lora applied (it fails cleanly when the shapes differ).
 * The fixed model: Llama, 1 layer, hidden 4 padded to 8, intermediate 8, vocab 8, tied, head_dim
 * 2; BF16 embedding/norms, TERNARY k/q/o/gate/down, I8ROWS v/up, rows and columns zero-padded.
 * The fixed LoRA: rank 2, slots q and down. Every tensor's first and last byte is read after.
 * QP_FUZZ_KEEP_DIR=DIR uses DIR instead of a temp folder and keeps it (to make seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "fuzz_util.h"
#include "writers/trlm.h"

static char g_dir[256], g_tdir[320], g_bdir[320], g_lora[400];
static bool g_keep;
static volatile uint8_t g_sink;

static void cleanup(void) {
    if (g_keep) return;
    qp_fuzz_rm_dir(g_tdir);
    qp_fuzz_rm_dir(g_bdir);
    unlink(g_lora);
    rmdir(g_dir);
}

static const char k_config[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":4,"
    "\"intermediate_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":2,\"vocab_size\":8,\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,"
    "\"max_position_embeddings\":8,\"tie_word_embeddings\":true}";

/* Data of one record: logical values in the top-left rows x cols, zeros (code 1) as padding. */
static size_t record_data(const qp_trlm_record *r, uint8_t *buf, size_t cap) {
    uint32_t pr = r->padded_rows, pc = r->padded_cols;
    size_t n = (size_t)r->size;
    if (n > cap) abort();
    memset(buf, 0, n);
    if (r->kind == QP_TRLM_KIND_BF16) {
        for (uint32_t y = 0; y < r->rows; y++)
            for (uint32_t x = 0; x < r->cols; x++) {
                uint16_t v = (uint16_t)(0x3f80u + ((y * 3u + x) & 7u) * 16u); /* 1.0 .. 1.875 */
                buf[2 * ((size_t)y * pc + x)] = (uint8_t)v;
                buf[2 * ((size_t)y * pc + x) + 1] = (uint8_t)(v >> 8);
            }
    } else if (r->kind == QP_TRLM_KIND_TERNARY) {
        size_t rb = (pc + 3) / 4;
        int8_t *q = calloc(pc, 1);
        if (!q) abort();
        for (uint32_t y = 0; y < pr; y++) {
            for (uint32_t x = 0; x < pc; x++)
                q[x] = (int8_t)(y < r->rows && x < r->cols ? (int)((x + 2 * y) % 3) - 1 : 0);
            qp_trlm_t2_pack(q, buf + (size_t)y * rb, pc);
        }
        free(q);
        qp_store_f32le(buf + (size_t)pr * rb, r->scale);
    } else {
        for (uint32_t y = 0; y < r->rows; y++)
            for (uint32_t x = 0; x < r->cols; x++) buf[(size_t)y * pc + x] = (uint8_t)(int8_t)((int)(x * 5 + y) % 9 - 4);
        for (uint32_t y = 0; y < pr; y++) qp_store_f32le(buf + (size_t)pr * pc + 4 * (size_t)y, y < r->rows ? 0.25f : 0.0f);
    }
    return n;
}

static void make_base(void) {
    const qp_trlm_kind BF = QP_TRLM_KIND_BF16, TE = QP_TRLM_KIND_TERNARY, I8 = QP_TRLM_KIND_I8ROWS;
    const uint32_t G = QP_TRLM_LAYER_NONE;
    qp_trlm_record rec[11] = {
        {BF, QP_TRLM_ROLE_EMBED, G, 8, 4, 8, 8, 0, 0, 0.0f},
        {BF, QP_TRLM_ROLE_OUTPUT_NORM, G, 4, 1, 4, 1, 0, 0, 0.0f},
        {BF, QP_TRLM_ROLE_ATTN_NORM, 0, 4, 1, 4, 1, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_K, 0, 4, 4, 4, 8, 0, 0, 0.5f},
        {I8, QP_TRLM_ROLE_V, 0, 4, 4, 4, 8, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_Q, 0, 4, 4, 4, 8, 0, 0, 0.25f},
        {TE, QP_TRLM_ROLE_O, 0, 4, 4, 8, 8, 0, 0, 0.125f},
        {BF, QP_TRLM_ROLE_FFN_NORM, 0, 4, 1, 4, 1, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_GATE, 0, 8, 4, 8, 8, 0, 0, 1.0f},
        {I8, QP_TRLM_ROLE_UP, 0, 8, 4, 8, 8, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_DOWN, 0, 4, 8, 8, 8, 0, 0, 0.75f},
    };
    qp_trlm_body body = {11, 8, 8, 4, 8, 1e-5f, 1u, 1};
    char p[400];
    snprintf(p, sizeof p, "%s/qmodel.tensors", g_bdir);
    qp_trlm_writer *w = NULL;
    qp_err e = {0};
    if (qp_trlm_writer_open(p, QP_TRLM_ARCH_LLAMA, &body, rec, &w, &e) != QP_OK) abort();
    for (int i = 0; i < 11; i++) {
        uint8_t buf[512];
        size_t n = record_data(&rec[i], buf, sizeof buf);
        if (qp_trlm_writer_write(w, buf, n, &e) != QP_OK) abort();
    }
    if (qp_trlm_writer_commit(w, &e) != QP_OK) abort();
    /* rank 2 LoRA on q (4 -> 4) and down (8 -> 4) */
    static const float a_q[2 * 4] = {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.5f, 0.0f, 0.25f};
    static const float b_q[4 * 2] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f};
    static const float a_d[2 * 8] = {1, 0, -1, 0.5f, 0.25f, 0, 2, -2, 0.5f, 0.5f, 0, 1, -1, 0.25f, 0, 1};
    static const float b_d[4 * 2] = {0.25f, -0.5f, 1.0f, 0.0f, -0.125f, 0.75f, 0.5f, 0.5f};
    qp_trla_slot slots[QP_TRLA_TARGETS];
    memset(slots, 0, sizeof slots);
    slots[2] = (qp_trla_slot){true, 4, 4, 8, 8, a_q, b_q};
    slots[6] = (qp_trla_slot){true, 8, 4, 8, 8, a_d, b_d};
    if (qp_trla_write(g_lora, 1, 2, 8.0 / 2.0, slots, &e) != QP_OK) abort();
}

static void setup(void) {
    if (g_dir[0]) return;
    g_keep = qp_fuzz_work_dir(g_dir, sizeof g_dir, "trlm");
    snprintf(g_tdir, sizeof g_tdir, "%s/t", g_dir);
    snprintf(g_bdir, sizeof g_bdir, "%s/b", g_dir);
    snprintf(g_lora, sizeof g_lora, "%s/fixed.lora", g_dir);
    mkdir(g_tdir, 0700);
    mkdir(g_bdir, 0700);
    atexit(cleanup);
    qp_err e = {0};
    char p[400];
    snprintf(p, sizeof p, "%s/rope.cache", g_tdir);
    if (qp_trrc_write(p, 8, 2, 10000.0, &e) != QP_OK) abort();
    snprintf(p, sizeof p, "%s/rope.cache", g_bdir);
    if (qp_trrc_write(p, 8, 2, 10000.0, &e) != QP_OK) abort();
    snprintf(p, sizeof p, "%s/config.json", g_tdir);
    if (qp_fuzz_write_file(p, k_config, sizeof k_config - 1) != 0) abort();
    make_base();
}

static void touch(const qp_model *m) {
    g_sink ^= qp_fuzz_touch_tensors(m);
    for (int64_t i = 0; i < m->n_problems; i++) g_sink ^= (uint8_t)m->problems[i][0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    qp_model *m = NULL;
    qp_err e = {0};
    char p[400];
    if (size >= 4 && memcmp(data, "TRLA", 4) == 0) {
        snprintf(p, sizeof p, "%s/qmodel.lora", g_bdir);
        if (qp_fuzz_write_file(p, data, size) != 0) return 0;
        if (qp_model_open(g_bdir, NULL, &m, &e) != QP_OK) abort(); /* the fixed model is valid */
        if (qp_trlm_apply_lora(m, p, &e) == QP_OK) touch(m);
        qp_model_close(m);
        return 0;
    }
    snprintf(p, sizeof p, "%s/qmodel.tensors", g_tdir);
    if (qp_fuzz_write_file(p, data, size) != 0) return 0;
    if (qp_model_open(g_tdir, NULL, &m, &e) == QP_OK) {
        touch(m);
        if (qp_trlm_apply_lora(m, g_lora, &e) == QP_OK) touch(m);
        qp_model_close(m);
    }
    return 0;
}
