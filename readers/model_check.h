/* The model checks the reference runtime applies, shared with the converters so that a
 * conversion never writes a model the runtime then rejects (issue 11, item 8).
 *
 * qp_model_check derives the runtime configuration from m's architecture (falling back to tensor
 * shapes where the source gives no value), checks every value against the runtime's ranges and
 * every tensor the forward pass needs (by canonical GGUF-style name) for presence and shape. It
 * reads no tensor bytes: byte sizes and encodings are checked where the bytes are read
 * (runtime/weights.c, the conversion drivers). */
#ifndef QP_MODEL_CHECK_H
#define QP_MODEL_CHECK_H

#include "quantpack/model.h"
#include "quantpack/runtime.h"

/* Fills cfg (optional; written only on success) with family, dim, ffn_dim, n_layers, n_heads,
 * n_kv_heads, head_dim, vocab, norm_eps, rope_theta, rope_style, act, sub_norms, qkv_bias and
 * tied_output; n_ctx and n_threads are left 0. Fails with QP_ERR_UNSUPPORTED naming the field
 * (an out-of-range or inconsistent value) or the tensor (missing, or a shape other than the one
 * the runtime needs). */
QP_NODISCARD qp_status qp_model_check(const qp_model *m, qp_runtime_config *cfg, qp_err *e);

/* The tensor named (canonical name first, as qp_model_find) in *out; QP_ERR_UNSUPPORTED "tensor
 * 'x' needed by the runtime is missing" when absent. */
QP_NODISCARD qp_status qp_model_need(const qp_model *m, const char *name, const qp_tensor **out, qp_err *e);

/* MoE expert matrices (runtime/runtime.md "Mixture of experts"). Expert e of kind k in layer L
 * is stored either merged, llama.cpp's 3-D "blk.L.ffn_{gate,up,down}_exps.weight" with
 * ne=[cols, rows, n_experts] (slice e), or as its own 2-D "blk.L.ffn_{gate,up,down}.e.weight"
 * ne=[cols, rows] (HF sources through readers/name_map.h; slice 0). */
typedef enum qp_expert_kind { QP_EXPERT_GATE = 0, QP_EXPERT_UP = 1, QP_EXPERT_DOWN = 2 } qp_expert_kind;
/* "ffn_gate", "ffn_up", "ffn_down" */
const char *qp_expert_kind_name(qp_expert_kind k);
/* The tensor holding expert `expert` (merged first) with its shape checked, and the expert's
 * slice in it. QP_ERR_UNSUPPORTED naming the tensor when absent or of another shape. */
QP_NODISCARD qp_status qp_model_expert(const qp_model *m, int64_t layer, qp_expert_kind kind,
                                       int64_t expert, int64_t n_experts, int64_t cols,
                                       int64_t rows, const qp_tensor **t, int64_t *slice, qp_err *e);

/* For outputs that cannot hold a mixture of experts (TRLM, .bullet): QP_ERR_UNSUPPORTED naming
 * the architecture and the target when m has experts; QP_OK otherwise. */
QP_NODISCARD qp_status qp_model_refuse_experts(const qp_model *m, const char *target, qp_err *e);

/* Gemma 2/3's query_pre_attn_scalar: 1 / attn_scale^2 (the integer when within 1e-3 of it, as in
 * every published config), head_dim when the scale is derived from it (attn_scale 0). */
double qp_arch_query_pre_attn_scalar(const qp_arch *a);
/* For outputs that do not take Gemma (TRLM and .bullet: their runtimes have no Gemma graph):
 * QP_ERR_UNSUPPORTED naming the family and the target when m is Gemma 1/2/3; QP_OK otherwise. */
QP_NODISCARD qp_status qp_model_refuse_gemma(const qp_model *m, const char *target, qp_err *e);
/* For outputs whose runtimes do not apply Llama 3.1's per-pair rope factors (TRLM, .bullet, RDRR):
 * QP_ERR_UNSUPPORTED naming the target when m has a llama3 rope_scaling or a rope_freqs.weight
 * with a factor other than 1; QP_OK otherwise. */
QP_NODISCARD qp_status qp_model_refuse_rope_factors(const qp_model *m, const char *target, qp_err *e);

/* Why tensor t of m is legitimately left unread by the runtime, or NULL when it must be consumed
 * (runtime/weights.c refuses a model with a tensor it neither binds nor finds a rule for): HF's
 * rotary inv_freq (recomputed from rope_theta), a
 * .bullet's biases and task heads (qp_bullet_skip_rule), Gemma 3's vision tower
 * (qp_name_map_skip_rule). The converters' own skip rules (converters/recipe.c, hf_folder.c) are
 * theirs: scales they fold into a weight are read by the runtime from the scaled tensor. */
const char *qp_model_unused_rule(const qp_model *m, const qp_tensor *t);

/* True when the runtime reads "<name>" as a BitNet packed U8 projection of rows x cols
 * (microsoft/bitnet-b1.58: U8 [rows/4, cols] with a "<name>_scale"). */
bool qp_model_check_is_packed(const qp_tensor *t, int64_t cols, int64_t rows);

/* Non-finite values (issue 11, item 8): scans one tensor with its encoding's validate (every
 * element of float tensors, every block scale of block-quantized ones; encodings whose scale is
 * per tensor or whose rows are padded are not scanned). Fails with QP_ERR_CORRUPT naming the
 * file, the tensor, its offset and the first bad element (or block). One pass over the bytes. */
QP_NODISCARD qp_status qp_tensor_check_values(const qp_model *m, const qp_tensor *t, qp_err *e);
/* qp_tensor_check_values over every tensor of m; the first failure. */
QP_NODISCARD qp_status qp_model_check_values(const qp_model *m, qp_err *e);

/* What every conversion driver runs before it opens its output: qp_model_check, then (unless
 * allow_nonfinite) qp_model_check_values, whose message then says how to write the model anyway. */
QP_NODISCARD qp_status qp_model_check_for_write(const qp_model *m, bool allow_nonfinite, qp_err *e);

#endif
