/* Any readable model -> an RDRR directory for DOPPLER (readers/rdrr.md).
 *
 * Only dtypes doppler-gpu's loader decodes are stored (F32, F16, BF16, Q4_K_M, whole-row Q6_K;
 * readers/rdrr.md "dtype rule"): any other is stored in the nearest one, each change listed in
 * quantizationInfo.dtypeChanges {tensor, planned, stored, reason} and counted in the result, or
 * the conversion is refused naming the tensor.
 * passthrough (gguf-to-rdrr): every tensor's bytes, name and type are kept exactly as the source
 * stores them when DOPPLER decodes the type; others are stored decoded to F32. Otherwise the llama.cpp recipe of `quant` (converters/recipe.h) chooses each
 * tensor's encoding, names stay the source's (HF names pass through, q/k rows are never
 * permuted), and a block-quantized tensor whose rows are not a multiple of the block uses the
 * "row" layout: each row zero-padded to a multiple of 256 before Q4_K quantization. */
#ifndef QP_CONVERT_RDRR_H
#define QP_CONVERT_RDRR_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/recipe.h"
#include "quantpack/convert.h"
#include "quantpack/model.h"
#include "writers/rdrr_writer.h"

/* After tensor k of n (1-based), named name: source bytes read of src_total (what the shared
 * progress line shows, cli/cli.h) and out_bytes written so far (qp_convert_model's bytes_done). */
typedef void (*qp_rdrr_progress_fn)(void *ud, int64_t k, int64_t n, const char *name, uint64_t src_done,
                                    uint64_t src_total, uint64_t out_bytes);

typedef struct qp_rdrr_convert_opts {
    bool passthrough;            /* keep every tensor's bytes (gguf-to-rdrr) */
    qp_quant quant;              /* !passthrough: Q4_K_M, Q6_K, Q8_0, F16, BF16, F32 */
    bool allow_requantize;
    bool allow_nonfinite;        /* write NaN/Inf weights instead of refusing them */
    const char *model_id;        /* NULL: the source file or folder name */
    qp_rdrr_writer_opts w;       /* shard size, signing key, replace, ... */
    qp_rdrr_progress_fn progress;
    void *progress_ud;
    const qp_cancel_flag *cancel; /* NULL or set: stop before the next tensor (QP_ERR_CANCELLED) */
} qp_rdrr_convert_opts;

typedef struct qp_rdrr_convert_result {
    int64_t n_tensors;
    int64_t n_padded_rows;       /* tensors written with zero-padded rows */
    uint64_t total_bytes;        /* shard bytes */
    int n_shards;
    const char *tokenizer_note;  /* static text: what was done with the tokenizer */
    bool no_tokenizer;           /* the package holds no tokenizer */
    int64_t n_dtype_changes;     /* tensors stored in another dtype than planned (see below) */
    char dtype_note[192];        /* "" or a one-line summary of those changes */
    int64_t n_skipped;           /* source tensors left out by a rule (a .bullet's task heads) */
    char skip_note[256];         /* "" or qp_plan_skip_note's line */
} qp_rdrr_convert_result;

/* Writes the RDRR directory out_dir. Nothing appears there unless everything succeeded.
 * res may be NULL. */
/* --dry-run: the plan of a (non-passthrough) conversion with each entry's encoding and bytes as
 * stored in RDRR (the DOPPLER dtype rule; fallback set where that differs from the recipe's);
 * the same checks as qp_convert_rdrr, nothing written. Free with qp_plan_free. */
QP_NODISCARD qp_status qp_convert_rdrr_plan(const qp_model *m, const qp_rdrr_convert_opts *o, qp_plan *plan,
                                            qp_err *e);
QP_NODISCARD qp_status qp_convert_rdrr(const qp_model *m, const qp_rdrr_convert_opts *o, const char *out_dir,
                                       qp_rdrr_convert_result *res, qp_err *e);

/* The Llama-style inference block doppler-gpu 0.5.1 accepts, unfilled (caller owns it). */
struct cJSON *qp_rdrr_default_inference(void);

/* The manifest "architecture" block of m (for adapters: their base model). */
struct cJSON *qp_rdrr_architecture_json(const qp_model *m);

/* The DOPPLER dtype string of an encoding ("Q4_K_M" for Q4_K, else the upper-case name). */
const char *qp_rdrr_dtype_name(qp_encoding enc);

/* A SentencePiece tokenizer.model (protobuf) from an SPM vocabulary (pieces, scores, types, BPE
 * model type, byte fallback, special ids). *out is qp_malloc'd. */
QP_NODISCARD qp_status qp_rdrr_spm_model_bytes(const qp_vocab *v, uint8_t **out, size_t *out_len, qp_err *e);

#endif
