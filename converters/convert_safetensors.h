/* convert --to safetensors: any readable model -> a Hugging Face model folder (model.safetensors
 * in F32, F16 or BF16, config.json, generation_config.json, tokenizer files), q/k rows put back in
 * HF's order. Rules: converters/hf_folder.md. */
#ifndef QP_CONVERTERS_CONVERT_SAFETENSORS_H
#define QP_CONVERTERS_CONVERT_SAFETENSORS_H

#include "converters/hf_folder.h"

typedef struct qp_st_convert_opts {
    qp_hf_folder_opts folder; /* dtype, progress, cancel */
    bool force;               /* replace a previous HF folder at out (never an input) */
    bool allow_nonfinite;     /* write NaN/Inf weights */
} qp_st_convert_opts;

typedef struct qp_st_convert_stats {
    int64_t n_tensors, n_skipped;
    char skip_note[256];       /* "" or qp_plan_skip_note's line (recipe.h) */
    uint64_t bytes;            /* tensor data bytes */
    qp_hf_folder_result folder;
} qp_st_convert_stats;

/* The --quant of the target: "F32", "F16", "BF16" (any case) -> that encoding; NULL or "keep" ->
 * QP_ENC_COUNT (F16/BF16 kept, others F32). False for any other name. */
bool qp_hf_dtype_from_name(const char *name, qp_encoding *out);

/* Writes the folder out (staged beside it and renamed: core/outfile.md; an existing out is
 * replaced only with force and only when it holds a previous HF folder, qp_hf_outdir_kind). Every
 * tensor is widened or kept (decoding a quantized tensor loses nothing), so no requantize flag
 * applies. st (may be NULL) is written only on success. */
QP_NODISCARD qp_status qp_convert_to_safetensors(const qp_model *src, const char *out, const qp_st_convert_opts *o,
                                                 qp_st_convert_stats *st, qp_err *e);

#endif
