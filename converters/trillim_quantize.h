/* trillim-quantize as a library call: executes a Trillim SDK manifest (v1 actions BF16_RAW,
 * TERNARY_QUANTIZE, EMBEDDING_I8, REPACK_TERNARY; the current SDK's actions 4-7: see
 * converters/trillim_sdk.md; padding to padded_rows x padded_cols) into qmodel.tensors,
 * rope.cache and qmodel.lora (TRLM bodies: readers/trlm.md). */
#ifndef QP_TRILLIM_QUANTIZE_H
#define QP_TRILLIM_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/trillim_manifest.h"
#include "quantpack/encoding.h"
#include "quantpack/status.h"

typedef struct qp_trillim_quant_opts {
    const char *manifest_path; /* names the manifest in messages */
    const char *output;        /* qmodel.tensors (required) */
    int arch;                  /* 1 BITNET, 2 LLAMA, 4-6 Qwen3 (BONSAI, BONSAI_TERNARY, QWEN3); 3 refused */
    int64_t hidden, intermediate, hidden_orig, intermediate_orig;
    double norm_eps;
    bool tie_embeddings;
    const char *rope_output;   /* NULL: no rope.cache */
    double rope_theta;
    int64_t max_pos, head_dim;
    const char *lora_output;   /* NULL: no qmodel.lora */
    int64_t lora_rank, n_heads, n_kv_heads;
    /* the current SDK's rope flags: --rope-dim (0: not given = head_dim), YaRN when yarn_factor
     * is given (yarn_orig_max_pos required; betas 0 = not given: HF's defaults 32 / 1) */
    int64_t rope_dim;
    double yarn_factor;
    int64_t yarn_orig_max_pos;
    double yarn_beta_slow, yarn_beta_fast;
    /* after each tensor is written: entry k of n (1-based), source bytes read of total; NULL: none */
    void (*progress)(void *ud, int64_t k, int64_t n, uint64_t done, uint64_t total);
    void *progress_ud;
} qp_trillim_quant_opts;

/* What entry t becomes in qmodel.tensors under o: its encoding (BF16, TRLM_T2 for the ternary
 * actions, else the blocks of the action's kind) and its data bytes (padded as o pads). */
QP_NODISCARD qp_status qp_trillim_entry_output(const qp_trillim_entry *t, const qp_trillim_quant_opts *o,
                                               qp_encoding *enc, uint64_t *bytes, qp_err *e);

/* Validates everything (manifest against its shards and the options, the role of every entry)
 * before writing; outputs appear only when every file succeeded. */
QP_NODISCARD qp_status qp_trillim_quantize(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                                           qp_err *e);

#endif
