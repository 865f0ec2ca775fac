/* trillim-quantize as a library call: executes a Trillim SDK v1 manifest (actions BF16_RAW,
 * TERNARY_QUANTIZE, EMBEDDING_I8, REPACK_TERNARY, padding to padded_rows x padded_cols) into
 * qmodel.tensors, rope.cache and qmodel.lora (TRLM v1 bodies: readers/trlm.md). */
#ifndef QP_TRILLIM_QUANTIZE_H
#define QP_TRILLIM_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/trillim_manifest.h"
#include "quantpack/status.h"

typedef struct qp_trillim_quant_opts {
    const char *manifest_path; /* names the manifest in messages */
    const char *output;        /* qmodel.tensors (required) */
    int arch;                  /* 1 BITNET, 2 LLAMA */
    int64_t hidden, intermediate, hidden_orig, intermediate_orig;
    double norm_eps;
    bool tie_embeddings;
    const char *rope_output;   /* NULL: no rope.cache */
    double rope_theta;
    int64_t max_pos, head_dim;
    const char *lora_output;   /* NULL: no qmodel.lora */
    int64_t lora_rank, n_heads, n_kv_heads;
} qp_trillim_quant_opts;

/* Validates everything (manifest against its shards and the options, the role of every entry)
 * before writing; outputs appear only when every file succeeded. */
QP_NODISCARD qp_status qp_trillim_quantize(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                                           qp_err *e);

#endif
