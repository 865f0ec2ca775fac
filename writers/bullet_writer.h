/* .bullet writer (bullet-core's container: header JSON, BULK tokenizer, BWT0 BQ4 tensors, END!).
 * The format's constants and name helpers live with the reader (readers/bullet_format.h);
 * layout: readers/bullet.md. */
#ifndef QP_BULLET_WRITER_H
#define QP_BULLET_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/status.h"
#include "readers/bullet_format.h"

/* One tensor to write. Shape outer-first as bullet-core writes it ([out, in] for matrices).
 * Exactly one data source: bq4 (encoded blocks copied verbatim), f32 (encoded with BQ4 through
 * the encodings table), or fill (called once to produce the F32 values). */
typedef struct qp_bullet_tensor {
    const char *name;        /* bullet-core name; hashed with FNV-1a 64 */
    bool use_hash;           /* write `hash` as is (a record whose name is unknown) */
    uint64_t hash;
    int rank;                /* 1..4 */
    int64_t dims[4];         /* outer-first; each 1..65535 */
    const uint8_t *bq4;
    size_t bq4_bytes;
    const float *f32;
    qp_status (*fill)(void *ud, const struct qp_bullet_tensor *t, float *dst, qp_err *e);
    void *ud;
} qp_bullet_tensor;

typedef struct qp_bullet_vocab {
    int64_t n_tokens;
    const char *const *tokens;
    const uint32_t *token_lens; /* NULL: strlen */
    const float *scores;        /* NULL: 0 */
    const int32_t *types;       /* NULL: no token_types key */
    int64_t n_merges;
    const char *const *merges;  /* "left right" (split at the first space) */
    const char *model;          /* "llama", "gpt2", "bert" or NULL (bullet-core's own) */
    const char *pre;            /* pre-tokenizer name or NULL */
    int32_t bos_id, eos_id, unk_id, pad_id; /* -1 when none */
    bool add_bos;
} qp_bullet_vocab;

typedef struct qp_bullet_head_info {
    const char *task;        /* one of qp_bullet_tasks, not "gen" */
    int64_t n_labels;
    const char *const *labels;
} qp_bullet_head_info;

typedef struct qp_bullet_info {
    const char *model_name;  /* NULL: "bullet-model" */
    int64_t hidden, n_layers, n_heads, max_context;
    int64_t ff_multiplier;   /* 0: not written */
    int64_t rope_theta;      /* 0: not written */
    qp_bullet_vocab vocab;
    bool has_gen;            /* writes "gen" first in "tasks" */
    const qp_bullet_head_info *heads;
    int64_t n_heads_info;
    bool checksum;           /* "checksum":"fnv1a64" + CSUM record before END! */
} qp_bullet_info;

/* Kept for old callers: BQ4 as the writer stores it is the encodings table's encoder alone (it
 * includes the bracketing refinement; encodings/enc_bq4.md). Re-encodes every whole block of x
 * into y with the table, so y ends as qp_encoding_quantize_tensor(QP_ENC_BQ4, x, y, n) writes it. */
void qp_bullet_bq4_refine(const float *x, uint8_t *y, int64_t n);

/* Writes path atomically (temp + rename). Checks every limit (dims, u16 token lengths, rows
 * that are not a whole number of 32-element blocks, int32 header values) before writing. */
QP_NODISCARD qp_status qp_bullet_write(const char *path, const qp_bullet_info *info,
                                       const qp_bullet_tensor *tensors, int64_t n_tensors, qp_err *e);

/* Fills info/tensors from a .bullet model read by readers/bullet.c (tensors copied verbatim),
 * so write(read(file)) reproduces file. Arrays are qp_malloc'd into *tensors (caller frees with
 * qp_free); everything else borrows from m. */
QP_NODISCARD qp_status qp_bullet_info_from_model(const qp_model *m, qp_bullet_info *info,
                                                 qp_bullet_head_info **heads, qp_bullet_tensor **tensors,
                                                 int64_t *n_tensors, qp_err *e);
void qp_bullet_info_free(qp_bullet_info *info, qp_bullet_head_info *heads,
                         qp_bullet_tensor *tensors);

#endif
