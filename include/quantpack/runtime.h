/* The reference CPU runtime: a llama2.c-plain forward pass over any qp_model (Llama, Mistral,
 * Qwen2 with q/k/v bias, BitNet b1.58), weights used in place through the encodings traits
 * table, an F32 KV cache (F16 on the fast path), threads over matrix rows; and the parity checks behind
 * `quantpack verify` (per-position logit metrics, greedy match, receipt JSON).
 * Conventions: runtime/runtime.md. */
#ifndef QUANTPACK_RUNTIME_H
#define QUANTPACK_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- forward pass ------------------------------------------------------------------------ */

typedef struct qp_runtime qp_runtime;

typedef struct qp_runtime_opts {
    int n_threads;    /* <= 0: the number of online cores */
    int64_t n_ctx;    /* KV cache positions; <= 0: min(arch.max_pos, 4096), 2048 if unknown */
    bool exact;       /* false (the default): the fast path, activations quantized per block for
                         the matrices whose encoding has a fast dot (runtime.md "Fast path");
                         true: the exact path (F32 activations, every bit as before) */
    bool kv_f32;      /* the fast path keeps an F32 KV cache instead of F16 (the exact path
                         always keeps F32) */
    bool no_repack;   /* the fast path reads every matrix where the model holds it: no Q4_K
                         repack, no F16 copy at load (less memory, slower; the same logits) */
} qp_runtime_opts;

/* The configuration the runtime resolved from the model's qp_arch and tensor shapes. */
typedef struct qp_runtime_config {
    qp_family family;
    int64_t dim, ffn_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab, n_ctx;
    float norm_eps, rope_theta;
    qp_rope_style rope_style;
    qp_rope_yarn rope_yarn; /* factor 0: plain rope */
    qp_act act;
    bool qkv_bias, sub_norms, tied_output;
    bool qk_norm;  /* per-head RMS norms of q and k before RoPE (Qwen3) */
    bool fused_qkv;     /* q, k, v are row ranges of one attn_qkv [dim, qdim + 2 kvdim] (Phi-3) */
    bool fused_gate_up; /* gate, up are the two halves of one ffn_up [dim, 2 ffn] (Phi-3) */
    int64_t sliding_window; /* qp_arch's; 0: every layer attends to every earlier position */
    int32_t swa_pattern;
    /* Gemma (runtime.md "Gemma"; 0 / false for every other family): */
    float embd_scale;     /* > 0: token embeddings x this (sqrtf(dim)) */
    bool norm_plus_one;   /* every RMS norm weight applied as 1 + w (HF Gemma checkpoints) */
    bool post_norms;      /* RMS norms after attention and after the FFN (Gemma 2/3) */
    float attn_scale;     /* > 0: q x this instead of 1 / sqrt(head_dim) */
    float attn_softcap, final_softcap; /* > 0: c * tanh(x / c) on attention scores / logits */
    float rope_theta_swa; /* > 0: rope base of the sliding layers */
    float rope_freq_scale; /* > 0: positions x this in the other layers (linear scaling) */
    bool act_int8; /* BitNet: int8 activations per token in front of the seven projections */
    int64_t n_experts, n_experts_used; /* MoE FFN (0: dense); ffn_dim is one expert's width */
    /* Qwen3.5 (runtime.md "Qwen3.5"; 0 / false otherwise): qp_arch's fields of the same names */
    int32_t full_attn_interval; /* > 0: a hybrid model, delta-net layers keep a recurrent state */
    int64_t ssm_conv_kernel, ssm_state_size, ssm_group_count, ssm_time_step_rank, ssm_inner_size;
    int64_t rope_dims;          /* RoPE dimensions per head (head_dim unless partial) */
    bool attn_out_gate;         /* attn_q holds q and a sigmoid output gate per head */
    bool ssm_a_log, ssm_heads_tiled;
    int n_threads;
    bool exact;        /* the path that runs (qp_runtime_opts.exact) */
    int n_fast_mats;   /* matrices on a fast dot (0 on the exact path) */
    int n_repacked;    /* of those, matrices repacked or copied into runtime memory at load
                          (runtime.md "Repacked rows"; 0 with opts.no_repack) */
    bool kv_f16;       /* keys and values cached as F16 (the fast path unless opts.kv_f32) */
} qp_runtime_config;

/* Binds every tensor the forward pass needs (by canonical GGUF-style name), checking shape,
 * byte size and that the encoding is readable (vec_dot_f32 or dequantize). Fails with a message
 * naming the missing or malformed tensor. m is borrowed and must outlive the runtime. */
QP_API QP_NODISCARD qp_status qp_runtime_new(const qp_model *m, const qp_runtime_opts *o, qp_runtime **out,
                                      qp_err *e);
QP_API void qp_runtime_free(qp_runtime *rt); /* NULL is fine */

/* Runs one token at position pos (0 <= pos <= number of positions already run since the last
 * reset, pos < n_ctx) and points *logits at vocab floats owned by the runtime, valid until the
 * next call. Positions >= pos are overwritten, so a caller may rewind by passing an earlier pos. */
QP_API QP_NODISCARD qp_status qp_runtime_forward(qp_runtime *rt, int32_t token, int64_t pos, float **logits,
                                          qp_err *e);
/* Runs n_tokens tokens at positions pos .. pos+n_tokens-1 as one batch (prompt processing):
 * each weight row is read once per batch of up to 64 tokens, attention is causal within the
 * batch. Same preconditions as qp_runtime_forward for pos, and pos + n_tokens <= n_ctx. The
 * logits equal those of n_tokens qp_runtime_forward calls: bit for bit for F32/F16/BF16/Q8_0/
 * Q4_K/Q6_K and int8-activation ternary matrices, within float summation-order rounding for
 * encodings whose vec_dot_f32 sums otherwise (runtime/runtime.md).
 * *logits points at the last token's vocab floats (runtime-owned, valid until the next call);
 * all_logits, when non-NULL, receives n_tokens * vocab floats (row i = token i), which costs
 * the output projection of every token. */
QP_API QP_NODISCARD qp_status qp_runtime_forward_batch(qp_runtime *rt, const int32_t *tokens, int64_t n_tokens,
                                                int64_t pos, float *all_logits, float **logits, qp_err *e);
/* A model with recurrent layers (Qwen3.5) cannot rewind: qp_runtime_forward(_batch) takes pos 0
 * (which starts over) or the next position only, and fails (QP_ERR_UNSUPPORTED) otherwise. */
QP_API bool qp_runtime_is_recurrent(const qp_runtime *rt);
/* Forgets the KV cache (next forward must be at pos 0). */
QP_API void qp_runtime_reset(qp_runtime *rt);

QP_API const qp_runtime_config *qp_runtime_get_config(const qp_runtime *rt);
/* The final hidden state of the last qp_runtime_forward: rmsnorm(x) * output_norm, dim floats
 * owned by the runtime, valid until the next call (task heads of .bullet models read it). */
QP_API const float *qp_runtime_hidden(const qp_runtime *rt);

/* ---- parity metrics (runtime/receipt.c) -------------------------------------------------- */

typedef struct qp_logit_stats {
    double cosine;       /* cos(ref, test); 1 when both are all-zero */
    double max_abs_diff; /* max_i |ref_i - test_i| */
    double kl;           /* KL(softmax(ref) || softmax(test)), natural log */
    int32_t top1_ref, top1_test; /* argmax, lowest id on ties */
} qp_logit_stats;

QP_API void qp_logits_compare(const float *ref, const float *test, int64_t n, qp_logit_stats *out);

/* Argmax of n logits, lowest id on ties (NaN never wins). -1 when n <= 0. */
QP_API int32_t qp_logits_argmax(const float *logits, int64_t n);

/* SHA-256 of a file as 64 lower-case hex digits + NUL (OpenSSL libcrypto). */
QP_API QP_NODISCARD qp_status qp_sha256_file(const char *path, char hex[65], qp_err *e);

/* ---- verify: run the same prompts through SRC and OUT ------------------------------------ */

typedef struct qp_verify_thresholds {
    double min_cosine;       /* mean cosine over positions must be >= this */
    double max_kl;           /* mean KL over positions must be <= this */
    double min_top1;         /* top-1 agreement rate over positions must be >= this */
    double min_greedy_match; /* matched greedy prefix / n_generate must be >= this (0 = report) */
    const char *class_name;  /* "identical", "f32", "bf16", "16-bit", "8-bit", "4-bit", "low-bit" */
} qp_verify_thresholds;

/* Default thresholds for OUT against SRC from the OUT weight encodings (runtime/runtime.md). */
QP_API void qp_verify_default_thresholds(const qp_model *out, const qp_model *src,
                                  qp_verify_thresholds *t);

/* verify --fast: OUT's activations are quantized per block (Q8_0 / Q8_K) wherever a matrix has a
 * fast dot, an 8-bit step of its own; a class tighter than "8-bit" then gets the 8-bit
 * thresholds (runtime.md "Fast path"). Leaves t alone when no OUT matrix has a fast dot. */
QP_API void qp_verify_fast_thresholds(const qp_model *out, qp_verify_thresholds *t);

typedef struct qp_verify_prompt {
    const int32_t *ids;
    int64_t n_ids;
    const char *text; /* optional, recorded in the receipt */
} qp_verify_prompt;

typedef struct qp_verify_opts {
    int n_threads;
    bool fast;          /* OUT runs the fast path (SRC always runs exact); the receipt says so */
    int64_t n_generate; /* greedy tokens after each prompt (>= 1) */
    qp_verify_thresholds th;
} qp_verify_opts;

typedef struct qp_verify_prompt_result {
    int64_t n_positions;
    double min_cosine, mean_cosine, max_abs_diff, max_kl, mean_kl, top1_agreement;
    int64_t first_divergence; /* index of the first generated token where OUT's greedy choice
                                 differs from SRC's; -1 when all n_generate match */
    int64_t matched;          /* greedy tokens matched before the first divergence */
} qp_verify_prompt_result;

typedef struct qp_verify_report qp_verify_report;

/* Runs every prompt through both models (teacher-forced on SRC's greedy continuation, then OUT
 * free-runs from its first divergence). Fails only on errors; thresholds decide the verdict. */
QP_API QP_NODISCARD qp_status qp_verify_run(const qp_model *out, const qp_model *src,
                                     const qp_verify_prompt *prompts, int64_t n_prompts,
                                     const qp_verify_opts *o, qp_verify_report **rep, qp_err *e);
/* qp_verify_run of one text prompt: tokenized with SRC's tokenizer (OUT's when SRC has none),
 * BOS as the model adds it. o NULL: 32 greedy tokens, qp_verify_default_thresholds(out, src),
 * every core. QP_ERR_ARG when neither model has a tokenizer or the prompt has no tokens; else as
 * qp_verify_run. The report is the caller's (qp_verify_report_free); its receipt
 * (qp_verify_report_json) records the prompt text. */
QP_API QP_NODISCARD qp_status qp_verify_text(const qp_model *out, const qp_model *src, const char *prompt,
                                             const qp_verify_opts *o, qp_verify_report **rep, qp_err *e);
QP_API void qp_verify_report_free(qp_verify_report *r);
QP_API bool qp_verify_report_passed(const qp_verify_report *r);
/* Whether OUT ran the fast path (the receipt's runtime.path). */
QP_API bool qp_verify_report_fast(const qp_verify_report *r);
QP_API int64_t qp_verify_report_n_prompts(const qp_verify_report *r);
QP_API const qp_verify_prompt_result *qp_verify_report_prompt(const qp_verify_report *r, int64_t i);
/* Why the verdict is "fail": one line per failed threshold, "" when passed. Borrowed. */
QP_API const char *qp_verify_report_reasons(const qp_verify_report *r);
/* The receipt (schema in runtime/runtime.md), hashing both inputs. *json is qp_malloc'd. */
QP_API QP_NODISCARD qp_status qp_verify_report_json(const qp_verify_report *r, char **json, qp_err *e);

#ifdef __cplusplus
}
#endif
#endif
