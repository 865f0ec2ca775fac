/* libFuzzer target for the TRLM v1 reader (readers/trlm.c). Two modes, chosen by the magic:
 *  - input starting with "TRLA": the bytes become qmodel.lora and qp_trlm_apply_lora merges them
 *    into a fixed valid model (written once per process, below);
 *  - anything else: the bytes become qmodel.tensors of a directory holding a valid rope.cache
 *    (8 positions, head_dim 2) and config.json; a model that opens also gets the fixed valid
 *    qmodel.lora applied (it fails cleanly when the shapes differ).
 * The fixed model (readers/trlm.md): Llama, 1 layer, hidden 32 (unpadded), intermediate 64
 * padded to 96, 2 heads of 8 (rope.cache head_dim 8), 1 kv head, vocab 8, tied. BF16 norms;
 * TERNARY k/v/q (unpadded: borrowed TRLM_T2) and gate (rows padded: copied TRLM_T2); I8ROWS in
 * the current layout (rows of I8_ROW blocks, each row zero-padded to a multiple of 32, made by
 * the I8_ROW traits' quantize_ref as the writer does) for all three reader paths: the embedding
 * 8 x 32 and up 64 (padded 96) x 32 run in place (cols a multiple of 32, no column padding), down
 * 32 x 64 padded to 96 columns is the copy of the first 2 blocks of each row, o 32 x 16 ends
 * inside a block (-> F32). The fixed LoRA: rank 2, slots q (32 -> 16, a TRLM_T2 base) and down
 * (64 padded 96 -> 32, an I8_ROW base). Every tensor's first and last byte is read after.
 * QP_FUZZ_KEEP_DIR=DIR uses DIR instead of a temp folder and keeps it (to make seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "encodings/encodings_internal.h"
#include "fuzz_util.h"
#include "writers/trlm_writer.h"

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
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":32,"
    "\"intermediate_size\":64,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":1,\"head_dim\":8,\"vocab_size\":8,\"rms_norm_eps\":1e-05,"
    "\"rope_theta\":10000.0,\"max_position_embeddings\":8,\"tie_word_embeddings\":true}";

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
        /* I8ROWS: each padded row (logical values, zeros beyond cols; padding rows all zero)
           through I8_ROW's quantize_ref, ceil(pc/32) blocks of 36 bytes */
        const qp_encoding_traits *i8 = qp_encoding_get(QP_ENC_I8_ROW);
        size_t nb = ((size_t)pc + 31) / 32, rb = nb * 36;
        if (!i8 || !i8->quantize_ref || (size_t)pr * rb != n) abort();
        float *row = calloc(nb * 32, sizeof *row);
        if (!row) abort();
        for (uint32_t y = 0; y < pr; y++) {
            for (uint32_t x = 0; x < nb * 32; x++)
                row[x] = y < r->rows && x < r->cols ? 0.25f * (float)((int)((x * 5 + y * 3) % 9) - 4) *
                                                          (1.0f + 0.125f * (float)(x / 32 + y % 3))
                                                    : 0.0f;
            i8->quantize_ref(row, buf + (size_t)y * rb, (int64_t)nb * 32);
        }
        free(row);
    }
    return n;
}

static void make_base(void) {
    const qp_trlm_kind BF = QP_TRLM_KIND_BF16, TE = QP_TRLM_KIND_TERNARY, I8 = QP_TRLM_KIND_I8ROWS;
    const uint32_t G = QP_TRLM_LAYER_NONE;
    qp_trlm_record rec[11] = {
        {I8, QP_TRLM_ROLE_EMBED, G, 8, 32, 8, 32, 0, 0, 0.0f},        /* I8_ROW in place */
        {BF, QP_TRLM_ROLE_OUTPUT_NORM, G, 32, 1, 32, 1, 0, 0, 0.0f},
        {BF, QP_TRLM_ROLE_ATTN_NORM, 0, 32, 1, 32, 1, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_K, 0, 8, 32, 8, 32, 0, 0, 0.5f},
        {TE, QP_TRLM_ROLE_V, 0, 8, 32, 8, 32, 0, 0, 0.375f},
        {TE, QP_TRLM_ROLE_Q, 0, 16, 32, 16, 32, 0, 0, 0.25f},
        {I8, QP_TRLM_ROLE_O, 0, 32, 16, 32, 16, 0, 0, 0.0f},          /* I8ROWS -> F32 */
        {BF, QP_TRLM_ROLE_FFN_NORM, 0, 32, 1, 32, 1, 0, 0, 0.0f},
        {TE, QP_TRLM_ROLE_GATE, 0, 64, 32, 96, 32, 0, 0, 1.0f},
        {I8, QP_TRLM_ROLE_UP, 0, 64, 32, 96, 32, 0, 0, 0.0f},         /* in place, padding rows */
        {I8, QP_TRLM_ROLE_DOWN, 0, 32, 64, 32, 96, 0, 0, 0.0f},       /* copied, padded columns */
    };
    qp_trlm_body body = {11, 32, 96, 32, 64, 1e-5f, 1u, 1, 0};
    char p[400];
    snprintf(p, sizeof p, "%s/qmodel.tensors", g_bdir);
    qp_trlm_writer *w = NULL;
    qp_err e = {0};
    if (qp_trlm_writer_open(p, QP_TRLM_ARCH_LLAMA, &body, rec, &w, &e) != QP_OK) abort();
    uint8_t *buf = malloc(4096);
    if (!buf) abort();
    for (int i = 0; i < 11; i++) {
        size_t n = record_data(&rec[i], buf, 4096);
        if (qp_trlm_writer_write(w, buf, n, &e) != QP_OK) abort();
    }
    free(buf);
    if (qp_trlm_writer_commit(w, &e) != QP_OK) abort();
    /* rank 2 LoRA on q (32 -> 16) and down (64, padded 96 -> 32); A is rank x in, B out x rank
       (the writer zero-pads A to in_padded columns) */
    static float a_q[2 * 32], b_q[16 * 2], a_d[2 * 64], b_d[32 * 2];
    for (int i = 0; i < 2 * 32; i++) a_q[i] = 0.125f * (float)(i % 7 - 3);
    for (int i = 0; i < 16 * 2; i++) b_q[i] = 0.0625f * (float)(i % 5 - 2);
    for (int i = 0; i < 2 * 64; i++) a_d[i] = 0.25f * (float)(i % 3 - 1);
    for (int i = 0; i < 32 * 2; i++) b_d[i] = 0.5f * (float)(i % 4) - 0.75f;
    qp_trla_slot slots[QP_TRLA_TARGETS];
    memset(slots, 0, sizeof slots);
    slots[2] = (qp_trla_slot){true, 32, 16, 32, 16, a_q, b_q};
    slots[6] = (qp_trla_slot){true, 64, 32, 96, 32, a_d, b_d};
    if (qp_trla_write(g_lora, 1, 2, 8.0 / 2.0, slots, &e) != QP_OK) abort();
}

/* The fixed model exercises the reader paths named above (else the template went stale): I8_ROW
 * borrowed from the mapping (embedding, up), I8_ROW copied (down), F32 (o), TRLM_T2. */
static void check_base(void) {
    static const struct {
        const char *name;
        qp_encoding enc;
        int in_place; /* 1 borrowed from the mapping, 0 a copy in the arena */
    } want[] = {
        {"token_embd.weight", QP_ENC_I8_ROW, 1},     {"blk.0.ffn_up.weight", QP_ENC_I8_ROW, 1},
        {"blk.0.ffn_down.weight", QP_ENC_I8_ROW, 0}, {"blk.0.attn_output.weight", QP_ENC_F32, 0},
        {"blk.0.attn_q.weight", QP_ENC_TRLM_T2, 1},  {"blk.0.ffn_gate.weight", QP_ENC_TRLM_T2, 0},
    };
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(g_bdir, NULL, &m, &e) != QP_OK) abort();
    const qp_mapped_file *f = qp_model_file(m, 0);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const qp_tensor *t = qp_model_find(m, want[i].name);
        if (!t || t->enc != want[i].enc) abort();
        int in_place = t->data >= f->data && t->data < f->data + f->size;
        if (in_place != want[i].in_place) abort();
    }
    qp_model_close(m);
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
    if (qp_trrc_write(p, 8, 8, 10000.0, NULL, &e) != QP_OK) abort();
    snprintf(p, sizeof p, "%s/rope.cache", g_bdir);
    if (qp_trrc_write(p, 8, 8, 10000.0, NULL, &e) != QP_OK) abort();
    snprintf(p, sizeof p, "%s/config.json", g_tdir);
    if (qp_fuzz_write_file(p, k_config, sizeof k_config - 1) != 0) abort();
    make_base();
    check_base();
}

static void touch(const qp_model *m) {
    g_sink ^= qp_fuzz_touch_tensors(m);
    for (int64_t i = 0; i < m->n_problems; i++) g_sink ^= (uint8_t)m->problems[i][0];
}

/* The verdict: qp_trlm_apply_lora's status for a TRLA input, qp_model_open's otherwise. */
qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    setup();
    qp_model *m = NULL;
    char p[400];
    if (size >= 4 && memcmp(data, "TRLA", 4) == 0) {
        snprintf(p, sizeof p, "%s/qmodel.lora", g_bdir);
        if (qp_fuzz_write_file(p, data, size) != 0) return QP_ERR_IO;
        qp_err e_base = {0};
        if (qp_model_open(g_bdir, NULL, &m, &e_base) != QP_OK) abort(); /* the fixed model is valid */
        const qp_status s = qp_trlm_apply_lora(m, p, e);
        if (s == QP_OK) touch(m);
        qp_model_close(m);
        return s;
    }
    snprintf(p, sizeof p, "%s/qmodel.tensors", g_tdir);
    if (qp_fuzz_write_file(p, data, size) != 0) return QP_ERR_IO;
    const qp_status s = qp_model_open(g_tdir, NULL, &m, e);
    if (s == QP_OK) {
        touch(m);
        qp_err e_lora = {0};
        if (qp_trlm_apply_lora(m, g_lora, &e_lora) == QP_OK) touch(m);
        qp_model_close(m);
    }
    return s;
}
