/* Conversion driver: source qp_model -> plan (converters/recipe.h) -> rows encoded on worker
 * threads -> one tensor at a time streamed to the GGUF writer (writers/gguf_writer.h).
 *
 * Memory: the output of at most QP_CONVERT_CHUNK_BYTES of rows (or one whole tensor for the
 * ternary recipes, which need a per-tensor scale) plus one row of floats per thread; source bytes
 * are read from the mapping and released (madvise) after each tensor. Bytes never depend on the
 * thread count. */
#ifndef QP_CONVERT_GGUF_H
#define QP_CONVERT_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/recipe.h"
#include "quantpack/convert.h"
#include "quantpack/model.h"

#define QP_CONVERT_CHUNK_BYTES ((size_t)16 << 20)

/* Called after each tensor (from the calling thread). */
typedef void (*qp_convert_progress_fn)(void *ud, int64_t k, int64_t n, const qp_plan_entry *pe,
                                       uint64_t bytes_done, uint64_t bytes_total);

typedef struct qp_convert_opts {
    qp_quant quant;
    int threads;                 /* <= 0: one */
    bool allow_requantize;
    bool allow_nonfinite;        /* write NaN/Inf weights instead of refusing them */
    qp_tensor_options tensor;    /* llama-quantize's per-tensor options, importance matrix */
    qp_convert_progress_fn progress;
    void *progress_ud;
    const qp_cancel_flag *cancel; /* NULL or set: stop before the next tensor (QP_ERR_CANCELLED) */
} qp_convert_opts;

/* Fills the recipe options the source implies (q/k permutation, sort, layer count, 70B). */
void qp_convert_recipe_opts(const qp_model *m, const qp_convert_opts *o, qp_recipe_opts *ro);
/* The plan of converting m with o. */
QP_NODISCARD qp_status qp_convert_gguf_plan(const qp_model *m, const qp_convert_opts *o, qp_plan *plan,
                                            qp_err *e);
/* Converts m to a GGUF file at out_path following plan (from qp_convert_gguf_plan). Nothing
 * appears at out_path unless everything succeeded. */
QP_NODISCARD qp_status qp_convert_gguf_write(const qp_model *m, const qp_plan *plan, const qp_convert_opts *o,
                                             const char *out_path, qp_err *e);
/* Plan + write. */
QP_NODISCARD qp_status qp_convert_gguf(const qp_model *m, const qp_convert_opts *o, const char *out_path,
                                       qp_err *e);

/* The GGUF architecture name written for m ("llama", "qwen2", "bitnet"); NULL when unknown. */
const char *qp_convert_gguf_arch(const qp_model *m);

/* converters/hf_to_gguf.c: key/values for a source that is not a GGUF file (HF directory,
 * llama2.c): general.*, <arch>.* with llama.cpp's exact types and tokenizer.ggml.* from
 * m->vocab; general.quantization_version and general.file_type last. */
struct qp_gguf_writer;
QP_NODISCARD qp_status qp_hf_gguf_metadata(const qp_model *m, const char *arch, const qp_plan *plan,
                                           struct qp_gguf_writer *w, qp_err *e);
/* converters/hf_to_gguf.c: quantpack's keys for what a BitNet architecture name implies with
 * the output's weights (ms_i2s: its projections are MS I2_S; readers/gguf_meta.h
 * QP_GGUF_FFN_ACT_KEY, QP_GGUF_ACT_QUANT_KEY); nothing for other architectures. */
QP_NODISCARD qp_status qp_gguf_bitnet_keys(const char *arch, bool ms_i2s, struct qp_gguf_writer *w,
                                           qp_err *e);
/* True when a tensor of the plan becomes MS I2_S (bitnet.cpp's type-36 flavour). */
bool qp_plan_has_ms_i2s(const qp_plan *plan);

#endif
