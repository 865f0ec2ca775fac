/* Any readable Llama-family model -> .bullet (bullet-core's container, BQ4 weights), and the
 * multi-task heads around it. Mapping, padding and refusals: readers/bullet.md. */
#ifndef QP_CONVERT_BULLET_H
#define QP_CONVERT_BULLET_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/recipe.h"
#include "quantpack/model.h"
#include "quantpack/status.h"
#include "writers/bullet_writer.h"

/* After each tensor is encoded: k of n done, its bullet name, source bytes read of total (the
 * progress line, cli/cli.h). */
typedef void (*qp_bullet_progress_fn)(void *ud, int64_t k, int64_t n, const char *name, uint64_t done,
                                      uint64_t total);

typedef struct qp_bullet_convert_opts {
    const char *model_name;       /* NULL: the source file name without its extension */
    const char *const *tasks;     /* extra heads: "sentiment", "ner", ... ("gen" is ignored: the
                                     gen head is always written) */
    int n_tasks;
    const char *head_weights;     /* safetensors with "<task>_head.weight" [n_out, hidden] */
    bool checksum;                /* CSUM record before END! */
    bool allow_nonfinite;         /* write NaN/Inf weights instead of refusing them */
    bool allow_requantize;        /* a quantized source tensor may become BQ4 */
    qp_bullet_progress_fn progress; /* NULL: none (a .bullet re-pack reports none) */
    void *progress_ud;
} qp_bullet_convert_opts;

typedef struct qp_bullet_convert_stats {
    int64_t n_tensors;
    int64_t ffn_src, ffn_out;     /* FFN width of the source and as written (padded to 4 x hidden) */
    int64_t kv_heads_src;         /* K/V heads in the source (written repeated to n_heads) */
    bool permuted_qk;             /* NEOX source: q/k rows reordered to adjacent-pair RoPE */
    bool tied;                    /* gen_head written from the token embedding */
    uint64_t bytes;
} qp_bullet_convert_stats;

/* Writes src to out_path atomically. A .bullet source is re-packed verbatim. */
QP_NODISCARD qp_status qp_convert_to_bullet(const qp_model *src, const char *out_path,
                                            const qp_bullet_convert_opts *o, qp_bullet_convert_stats *st,
                                            qp_err *e);

/* The --dry-run plan: every tensor bullet-core will read, in its name and output shape, with the
 * source tensor, BQ4 bytes and the rewrite as action text (qp_plan_entry.action); the same checks
 * as qp_convert_to_bullet, nothing written. *out borrows the source tensors of m (free it with
 * qp_plan_free before closing m). */
QP_NODISCARD qp_status qp_convert_bullet_plan(const qp_model *src, const qp_bullet_convert_opts *o,
                                              qp_plan *out, qp_err *e);

/* ---- heads (converters/bullet_heads.c) ----------------------------------------------------- */

typedef struct qp_bullet_heads {
    qp_model *file;               /* the opened head-weights file */
    int n;
    qp_bullet_head_info info[QP_BULLET_N_TASKS];
    const qp_tensor *t[QP_BULLET_N_TASKS];
    char **labels[QP_BULLET_N_TASKS]; /* qp_malloc'd blocks */
} qp_bullet_heads;

/* Opens the head weights and finds "<task>_head.weight" (or "<task>") for every task, each
 * [n_out, hidden]; labels from __metadata__ "<task>_labels" (a JSON array or a comma list),
 * else "0".."n_out-1". */
QP_NODISCARD qp_status qp_bullet_heads_load(const char *path, const char *const *tasks, int n_tasks,
                                            int64_t hidden, qp_bullet_heads *h, qp_err *e);
void qp_bullet_heads_free(qp_bullet_heads *h);

/* A task head of a .bullet model: its tensor ("<task>_head.weight") and labels. */
typedef struct qp_bullet_task_head {
    const qp_tensor *t;
    int64_t n_out, hidden;
    char **labels;                /* qp_malloc'd block; n_out entries */
} qp_bullet_task_head;

QP_NODISCARD qp_status qp_bullet_task_head_get(const qp_model *m, const char *task, qp_bullet_task_head *h,
                                               qp_err *e);
void qp_bullet_task_head_free(qp_bullet_task_head *h);
/* scores[k] = row k of the head . hidden (through the encodings table). */
void qp_bullet_task_scores(const qp_bullet_task_head *h, const float *hidden, float *scores);

#endif
