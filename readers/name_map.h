/* Tensor names: Hugging Face (transformers Llama / Mistral / Qwen2 / BitNet) <-> GGUF.
 *
 *   model.embed_tokens               <-> token_embd
 *   model.norm                       <-> output_norm
 *   lm_head                          <-> output
 *   model.layers.N.input_layernorm   <-> blk.N.attn_norm
 *   model.layers.N.self_attn.q_proj  <-> blk.N.attn_q      (k_proj, v_proj alike)
 *   model.layers.N.self_attn.o_proj  <-> blk.N.attn_output
 *   model.layers.N.post_attention_layernorm <-> blk.N.ffn_norm
 *   model.layers.N.mlp.gate_proj     <-> blk.N.ffn_gate    (up_proj, down_proj alike)
 *   model.layers.N.self_attn.attn_sub_norm <-> blk.N.attn_sub_norm   (BitNet)
 *   model.layers.N.mlp.ffn_sub_norm  <-> blk.N.ffn_sub_norm           (BitNet)
 *   model.layers.N.self_attn.q_norm  <-> blk.N.attn_q_norm  (k_norm alike; Qwen3)
 *   model.layers.N.self_attn.qkv_proj -> blk.N.attn_qkv, mlp.gate_up_proj -> blk.N.ffn_up
 *                                       (Phi-3 only: qp_name_map_family)
 *   Gemma 2 / 3 only (qp_name_map_family, replacing the line above for post_attention_layernorm):
 *   model.layers.N.post_attention_layernorm   -> blk.N.post_attention_norm
 *   model.layers.N.pre_feedforward_layernorm  -> blk.N.ffn_norm
 *   model.layers.N.post_feedforward_layernorm -> blk.N.post_ffw_norm
 *   Qwen3.5 only (qp_name_map_family, HF -> GGUF):
 *   post_attention_layernorm -> post_attention_norm, linear_attn.in_proj_qkv -> attn_qkv,
 *   in_proj_z -> attn_gate, in_proj_b -> ssm_beta, in_proj_a -> ssm_alpha, conv1d -> ssm_conv1d,
 *   norm -> ssm_norm, out_proj -> ssm_out, dt_bias -> ssm_dt.bias, A_log -> ssm_a (no suffix)
 *   model.layers.N.block_sparse_moe.gate <-> blk.N.ffn_gate_inp       (Mixtral router)
 *   model.layers.N.block_sparse_moe.experts.E.w1 <-> blk.N.ffn_gate.E (w2: ffn_down, w3: ffn_up;
 *                                                   llama.cpp's per-expert names, merged into
 *                                                   blk.N.ffn_*_exps by the converters)
 * with the suffix ".weight", ".bias" or ".weight_scale" (BitNet packed checkpoints) kept as is.
 * HF -> GGUF also reads the text model of a multimodal checkpoint (Gemma3ForConditionalGeneration,
 * Qwen3_5ForConditionalGeneration):
 *   language_model.model.X and model.language_model.X as model.X, language_model.lm_head as lm_head.
 * Everything else (rotary_emb.inv_freq, unknown modules, other suffixes) is unmapped.
 *
 * Only names are mapped here, never bytes. HF q_proj / k_proj weights are stored for RoPE that
 * rotates halves (i, i + d/2); llama.cpp's "llama" architecture rotates adjacent pairs, so a
 * converter writing GGUF "llama" must permute the rows of attn_q (n_head) and attn_k
 * (n_head_kv): w.reshape(nh, 2, rows/nh/2, cols).swapaxes(1, 2).reshape(rows, cols)
 * (converters/recipes.md, "HF and llama.cpp sources"). A reader that only maps names keeps
 * qp_arch.rope_style = QP_ROPE_NEOX to say the bytes are still in the halves order. */
#ifndef QP_NAME_MAP_H
#define QP_NAME_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"

/* That permutation as row indices, for a q/k tensor of `rows` rows in `heads` heads of an even
 * size (rows = heads * head_dim): row r in the adjacent-pairs order (GGUF "llama", llama2.c) ->
 * the same row in the halves order (HF): out[h, i, j] = in[h, j, i] for shape (heads, hd/2, 2). */
static inline int64_t qp_qk_row_in_halves(int64_t r, int64_t heads, int64_t rows) {
    const int64_t hd = rows / heads, half = hd / 2, h = r / hd, k = r % hd;
    return h * hd + (k % 2) * half + k / 2;
}
/* The inverse: row r in the halves order -> the same row in the adjacent-pairs order. */
static inline int64_t qp_qk_row_in_pairs(int64_t r, int64_t heads, int64_t rows) {
    const int64_t hd = rows / heads, half = hd / 2, h = r / hd, i = r % hd;
    return h * hd + 2 * (i % half) + i / half;
}

/* Writes the GGUF name of hf_name into buf (cap bytes, NUL included) and returns buf; returns
 * NULL when the name has no GGUF equivalent or does not fit. */
const char *qp_name_map_hf_to_gguf(const char *hf_name, char *buf, size_t cap);
/* The inverse: GGUF name -> HF name; NULL when unmapped or when it does not fit. */
const char *qp_name_map_gguf_to_hf(const char *gguf_name, char *buf, size_t cap);
/* The same for a model of family f: Gemma 2/3's ffn_norm, post_attention_norm and post_ffw_norm
 * become pre_feedforward_layernorm, post_attention_layernorm and post_feedforward_layernorm;
 * Phi-3's attn_qkv and ffn_up become self_attn.qkv_proj and mlp.gate_up_proj. */
const char *qp_name_map_gguf_to_hf_family(qp_family f, const char *gguf_name, char *buf, size_t cap);
/* After the architecture is known: a family's own module names (Phi-3's self_attn.qkv_proj ->
 * attn_qkv, mlp.gate_up_proj -> ffn_up, on tensors still without a canonical name; Gemma 2/3's
 * four norms, replacing the common mapping; Qwen3.5's names above). */
QP_NODISCARD qp_status qp_name_map_family(qp_model *m, qp_err *e);
/* Why an HF tensor of a model of family f is left out of every output (the converters' skip
 * rules, converters/recipes.md "Every tensor accounted for"), or NULL: Gemma 3's vision tower and
 * multimodal projector, Qwen3.5's vision tower (model.visual.) and MTP block (mtp.) (the text
 * model is converted; llama.cpp writes the vision towers to an mmproj file). One prefix table. */
const char *qp_name_map_skip_rule(qp_family f, const char *hf_name);

#endif
