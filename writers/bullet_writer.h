/* .bullet writer (bullet-core's container: header JSON, BULK tokenizer, BWT0 BQ4 tensors, END!)
 * and the format constants and helpers shared with readers/bullet.c. Layout: writers/bullet.md. */
#ifndef QP_BULLET_WRITER_H
#define QP_BULLET_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/status.h"

#define QP_BULLET_HEADER_RESERVE 4096u  /* the builder reserves 4096 bytes for the JSON */
#define QP_BULLET_TOK_ALIGN 4096u       /* tokenizer section alignment */
#define QP_BULLET_WEIGHTS_ALIGN 64u     /* weights section alignment */
#define QP_BULLET_DATA_ALIGN 32u        /* tensor data alignment (absolute file offsets) */
#define QP_BULLET_BLOCK_ELEMS 32
#define QP_BULLET_BLOCK_BYTES 20u
#define QP_BULLET_MAX_DIM 65535         /* u16 dims */
#define QP_BULLET_MAX_HEADER (1u << 20) /* our limit on the header JSON */
#define QP_BULLET_MAX_TENSORS (1u << 20)
#define QP_BULLET_MAX_VOCAB 65535       /* the embedding's rows are a u16 dim */
#define QP_BULLET_MAX_MERGES (1u << 24)
#define QP_BULLET_MAX_LAYERS 4096
#define QP_BULLET_MAX_LABELS 4096
#define QP_BULLET_INT_MAX 2147483647LL  /* bullet-core parses header integers with std::stoi */

/* Quant type ids of the tensor table (only BQ4 is implemented by bullet-core's runtime). */
enum { QP_BULLET_QT_BQ4 = 0, QP_BULLET_QT_BQ5 = 1, QP_BULLET_QT_BQ8 = 2, QP_BULLET_QT_FP16 = 3 };

/* The heads bullet-core's runtime looks up ("<task>_head.weight"). */
#define QP_BULLET_N_TASKS 5
extern const char *const qp_bullet_tasks[QP_BULLET_N_TASKS]; /* gen ner pos sentiment classifier */
/* Index of a task name ("cls" is an alias of "classifier"); -1 when unknown. */
int qp_bullet_task_index(const char *name);

/* FNV-1a 64 (basis 0xcbf29ce484222325, prime 0x100000001b3), as bullet-core hashes names. */
uint64_t qp_bullet_fnv1a64(const void *data, size_t n);
uint64_t qp_bullet_fnv1a64_update(uint64_t h, const void *data, size_t n);

/* bullet-core name -> canonical GGUF-style name ("layers.3.ffn.w1.weight" ->
 * "blk.3.ffn_gate.weight", "gen_head.weight" -> "output.weight"); false when it has none. */
bool qp_bullet_canon_name(const char *bullet_name, char *out, size_t cap);
/* The reverse, for converters: canonical -> bullet-core name; false when bullet-core has none. */
bool qp_bullet_name_from_canon(const char *canon, char *out, size_t cap);

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
 * includes the bracketing refinement; converters/enc_bq4.md). Re-encodes every whole block of x
 * into y with the table, so y ends as qp_encoding_quantize_tensor(QP_ENC_BQ4, x, y, n) writes it. */
void qp_bullet_bq4_refine(const float *x, uint8_t *y, int64_t n);

/* Writes path atomically (temp + rename). Checks every limit (dims, u16 token lengths, rows
 * that are not a whole number of 32-element blocks, int32 header values) before writing. */
qp_status qp_bullet_write(const char *path, const qp_bullet_info *info,
                          const qp_bullet_tensor *tensors, int64_t n_tensors, qp_err *e);

/* Fills info/tensors from a .bullet model read by readers/bullet.c (tensors copied verbatim),
 * so write(read(file)) reproduces file. Arrays are qp_malloc'd into *tensors (caller frees with
 * qp_free); everything else borrows from m. */
qp_status qp_bullet_info_from_model(const qp_model *m, qp_bullet_info *info,
                                    qp_bullet_head_info **heads, qp_bullet_tensor **tensors,
                                    int64_t *n_tensors, qp_err *e);
void qp_bullet_info_free(qp_bullet_info *info, qp_bullet_head_info *heads,
                         qp_bullet_tensor *tensors);

#endif
