/* .bullet (bullet-core's container) format constants and the helpers the reader and the writer
 * share. Layout and limits: readers/bullet.md. */
#ifndef QP_BULLET_FORMAT_H
#define QP_BULLET_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Why a converter leaves out a named tensor of a .bullet that has no canonical name: a ".bias"
 * (bullet-core's runtime never reads one), output_head.weight beside a gen_head (the runtime reads
 * gen_head), a task head ("<task>_head.weight": no other format has a place for it). NULL for
 * any other name (a converter refuses it). A static string. */
const char *qp_bullet_skip_rule(const char *name);

/* FNV-1a 64 (basis 0xcbf29ce484222325, prime 0x100000001b3), as bullet-core hashes names. */
uint64_t qp_bullet_fnv1a64(const void *data, size_t n);
uint64_t qp_bullet_fnv1a64_update(uint64_t h, const void *data, size_t n);

/* bullet-core name -> canonical GGUF-style name ("layers.3.ffn.w1.weight" ->
 * "blk.3.ffn_gate.weight", "gen_head.weight" -> "output.weight"); false when it has none. */
bool qp_bullet_canon_name(const char *bullet_name, char *out, size_t cap);
/* The reverse, for converters: canonical -> bullet-core name; false when bullet-core has none. */
bool qp_bullet_name_from_canon(const char *canon, char *out, size_t cap);

#endif
