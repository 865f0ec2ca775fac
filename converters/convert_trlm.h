/* Any readable model -> a TRLM directory for the Trillim SDK (qmodel.tensors, rope.cache,
 * optional qmodel.lora, inference.config, and the Hugging Face side files the SDK reads):
 * the same manifest-then-quantize path as trillim-quantize. A source that is not a Hugging Face
 * folder (a GGUF, a llama2.c checkpoint, an RDRR package, a single safetensors file) is first
 * written as one beside the output (converters/hf_folder.md), removed at the end. The manifest is
 * not part of the output (the SDK deletes its own after quantizing): o->save_manifest keeps a copy.
 * Format and rules: readers/trlm.md, converters/trillim_sdk.md. */
#ifndef QP_CONVERT_TRLM_H
#define QP_CONVERT_TRLM_H

#include <stdbool.h>
#include <stdint.h>

#include "converters/recipe.h"
#include "converters/trillim_manifest.h"
#include "quantpack/model.h"
#include "quantpack/status.h"

typedef struct qp_trlm_convert_opts {
    qp_trillim_target target; /* how 2-D float weights are stored (auto, ternary, bf16, q8_0) */
    const char *lora;         /* PEFT adapter folder, or NULL */
    const char *tokenizer;    /* a tokenizer file copied beside the model, or NULL */
    const char *save_manifest; /* also keep the quantize manifest at this file (HF sources), or NULL */
    bool adapter_only;        /* out is the SDK's LoRA adapter bundle of lora for this base model
                                 (qmodel.lora, trillim_config.json "lora_adapter", the adapter's
                                 files; no model): `trillim quantize MODEL ADAPTER` */
    bool force;               /* replace a previous TRLM folder at out (core/outfile.md) */
    bool allow_nonfinite;     /* write NaN/Inf weights instead of refusing the model */
    bool allow_requantize;    /* a quantized source tensor may get a quantizing action */
    /* after each tensor is written: k of n, its key, source bytes read of total; NULL: none */
    void (*progress)(void *ud, int64_t k, int64_t n, const char *name, uint64_t done, uint64_t total);
    void *progress_ud;
} qp_trlm_convert_opts;

typedef struct qp_trlm_convert_stats {
    int64_t n_tensors;        /* manifest entries written */
    bool has_tokenizer;       /* the source carried a vocabulary */
    int64_t n_skipped;        /* source tensors no manifest entry reads (listed by the plan) */
    char skip_note[256];      /* "" or qp_plan_skip_note's line (recipe.h) */
} qp_trlm_convert_stats;

/* The --dry-run plan: one row per manifest entry (its safetensors key, the source tensor and
 * encoding, the encoding and bytes its action stores in qmodel.tensors, the action's name), in
 * the SDK's order; the same checks as qp_convert_to_trlm, including the one requantize rule
 * (recipe.h: a quantized source tensor given a quantizing action needs allow_requantize; BF16_RAW
 * widens). A source that is not a Hugging Face folder is staged as one in the temporary
 * directory (TMPDIR) and removed before returning. *out borrows src's tensors (qp_plan_free). */
QP_NODISCARD qp_status qp_convert_trlm_plan(const qp_model *src, const qp_trlm_convert_opts *o,
                                            struct qp_plan *out, qp_err *e);

/* Writes src (opened from its path, with o->tokenizer as its tokenizer when given) to the TRLM
 * folder out. The runtime's model checks run first (readers/model_check.h); nothing appears at
 * out unless everything succeeded. st (may be NULL) is written on success. */
QP_NODISCARD qp_status qp_convert_to_trlm(const qp_model *src, const char *out,
                                          const qp_trlm_convert_opts *o, qp_trlm_convert_stats *st,
                                          qp_err *e);

#endif
