/* Converting a model from a program: what `quantpack convert SRC --to gguf|rdrr|bullet|trlm|safetensors` does,
 * as one call over the converters (converters/convert_api.c).
 *
 * Use: qp_model_open (quantpack/model.h) -> qp_convert_params_default -> set target, quant and
 * out_path's options -> qp_convert_model -> qp_model_close. The source stays open and unchanged;
 * the output can be opened again with qp_model_open and compared with the source by
 * qp_verify_run (quantpack/runtime.h).
 *
 * Targets and recipes (converters/recipes.md, readers/rdrr.md, readers/bullet.md):
 * - QP_CONVERT_TO_GGUF: one .gguf file. quant: Q4_K_M, Q6_K, Q8_0, F16, BF16, F32 (llama.cpp's
 *   recipes, byte-identical to llama-quantize for GGUF sources); for BitNet models also I2_S,
 *   TQ1_0, TQ2_0, QK256.
 * - QP_CONVERT_TO_RDRR: an RDRR directory for DOPPLER (manifest.json, tensors.json, shards with
 *   SHA-256s). quant: Q4_K_M, Q6_K, Q8_0, F16, BF16, F32; DOPPLER-unreadable dtypes are stored
 *   in the nearest readable one (listed in the manifest's quantizationInfo.dtypeChanges).
 * - QP_CONVERT_TO_BULLET: one .bullet file for bullet-core, BQ4 weights; quant must be NULL.
 * - QP_CONVERT_TO_TRLM: a TRLM directory for the Trillim SDK (qmodel.tensors, rope.cache,
 *   trillim_config.json, inference.config and the Hugging Face side files), as `convert --to
 *   trlm` writes it (readers/trlm.md). quant: NULL or "auto" (ternary projections), "ternary",
 *   "bf16", "q8_0", "q8_0_blocked_32" ("int8"), "q1_0_128", "grouped_ternary_128" (the current
 *   SDK's --quantization); a LoRA adapter is taken by the command
 *   only. A source that is not a Hugging Face folder is staged as one beside the output.
 * - QP_CONVERT_TO_SAFETENSORS: a Hugging Face folder (model.safetensors, config.json,
 *   generation_config.json, tokenizer files), as `convert --to safetensors` writes it
 *   (converters/hf_folder.md). quant: NULL or "keep" (F16/BF16 tensors kept, others F32), "F32",
 *   "F16", "BF16" (any case). Decoding quantized tensors only widens them: no allow_requantize.
 *
 * Output rule (core/outfile.md), the same as the command's: nothing appears at out_path unless
 * the whole conversion succeeded (the output is written under a partial name beside it and
 * renamed); an existing output is replaced only with params.force, and then only a regular file
 * or a folder holding a previous package of the target's kind (RDRR, TRLM, HF folder); an output that resolves to the source is
 * always refused (QP_ERR_IO naming the path).
 *
 * Memory: bounded by the largest tensor (GGUF: at most 16 MiB of encoded rows in flight plus one
 * row of floats per thread), never the model size. Bytes never depend on n_threads.
 *
 * Threads: qp_convert_model runs on the calling thread and starts n_threads workers for the rows
 * of each tensor; it returns when they have ended. The progress callback is called from the
 * calling thread. Another thread (or a signal handler) may set *cancel at any time. */
#ifndef QUANTPACK_CONVERT_H
#define QUANTPACK_CONVERT_H

#ifdef __cplusplus
#include <atomic>
#else
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
typedef std::atomic_bool qp_cancel_flag;
#else
/* Set to true (atomic_store) to cancel a conversion in progress. */
typedef atomic_bool qp_cancel_flag;
#endif

typedef enum qp_convert_target {
    QP_CONVERT_TO_GGUF = 0,   /* one .gguf file */
    QP_CONVERT_TO_RDRR = 1,   /* one RDRR directory */
    QP_CONVERT_TO_BULLET = 2, /* one .bullet file */
    QP_CONVERT_TO_TRLM = 3,   /* one TRLM directory (Trillim) */
    QP_CONVERT_TO_SAFETENSORS = 4, /* one Hugging Face folder */
    QP_CONVERT_TARGET_COUNT
} qp_convert_target;

/* Called on the calling thread after each tensor is written: tensors_done of n_tensors,
 * bytes_done output bytes so far. GGUF, RDRR and SAFETENSORS report every tensor; BULLET and TRLM report once, when
 * the file is complete. It must not call qp_convert_model. */
typedef void (*qp_convert_progress_cb)(void *user, int64_t tensors_done, int64_t n_tensors,
                                       uint64_t bytes_done);

typedef struct qp_convert_params {
    qp_convert_target target;
    const char *quant;        /* recipe name, any case (see above); NULL: "Q4_K_M" for GGUF and
                                 RDRR; must be NULL for BULLET */
    int n_threads;            /* workers for the rows of a tensor; <= 0: one per online core,
                                 at most 64 */
    bool allow_requantize;    /* an already quantized source tensor may be quantized again
                                 (widening to F16/BF16/F32 never needs it) */
    bool allow_nonfinite;     /* write NaN/Inf weights instead of refusing the model */
    bool force;               /* replace an existing output (never an input) */
    qp_convert_progress_cb progress; /* NULL: none */
    void *progress_user;      /* passed to progress */
    const qp_cancel_flag *cancel; /* NULL: none. Checked before each tensor (GGUF, RDRR) or
                                     before the file is started (BULLET, TRLM): when set the
                                     conversion stops, removes its partial output and returns
                                     QP_ERR_CANCELLED */
} qp_convert_params;

typedef struct qp_convert_result {
    int64_t n_tensors;        /* tensors written */
    int64_t n_skipped;        /* source tensors left out by a named rule (GGUF: rope frequency
                                 tables and the like, listed by `convert --dry-run`) */
    uint64_t bytes;           /* GGUF: tensor data bytes; RDRR: shard bytes; BULLET: file bytes */
} qp_convert_result;

/* target GGUF, quant NULL (Q4_K_M), n_threads 0 (every core), every flag false, no callback,
 * no cancel flag. */
QP_API void qp_convert_params_default(qp_convert_params *p);

/* Converts the open model src to out_path under p (see the rules above). res (may be NULL) is
 * written only on success. Fails with:
 * - QP_ERR_ARG: an unknown target or quant, a quant the target does not take, a BitNet recipe
 *   for a model that is not BitNet, NULL src/p/out_path;
 * - QP_ERR_IO: out_path exists and force is false, or it is the source, or it cannot be written;
 * - QP_ERR_UNSUPPORTED / QP_ERR_CORRUPT: a source tensor no rule maps, a quantized tensor without
 *   allow_requantize, NaN/Inf weights without allow_nonfinite, a model the runtime would refuse
 *   (every message names the tensor);
 * - QP_ERR_NOMEM, QP_ERR_CANCELLED.
 * On any failure nothing is left at out_path (a previous output there is untouched). */
QP_API QP_NODISCARD qp_status qp_convert_model(const qp_model *src, const qp_convert_params *p,
                                               const char *out_path, qp_convert_result *res,
                                               qp_err *e);

#ifdef __cplusplus
}
#endif
#endif
