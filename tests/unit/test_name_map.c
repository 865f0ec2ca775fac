/* HF <-> GGUF tensor names (readers/name_map.h). Expected names: llama.cpp's gguf-py
 * tensor_mapping.py (restated in converters/recipes.md "HF and llama.cpp sources") and llama.cpp's
 * tensor names (the GGUF column matches the tensor names in the real fixture
 * gguf/llama-2-tiny-random.gguf). */
#include "readers/name_map.h"
#include "qp_test.h"

static const struct {
    const char *hf, *gguf;
} k_pairs[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
    {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
    {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
    {"model.layers.2.self_attn.v_proj.weight", "blk.2.attn_v.weight"},
    {"model.layers.31.self_attn.o_proj.weight", "blk.31.attn_output.weight"},
    {"model.layers.7.post_attention_layernorm.weight", "blk.7.ffn_norm.weight"},
    {"model.layers.10.mlp.gate_proj.weight", "blk.10.ffn_gate.weight"},
    {"model.layers.10.mlp.up_proj.weight", "blk.10.ffn_up.weight"},
    {"model.layers.10.mlp.down_proj.weight", "blk.10.ffn_down.weight"},
    {"model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias"},
    {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
    {"model.layers.3.self_attn.v_proj.bias", "blk.3.attn_v.bias"},
    {"model.layers.4.self_attn.attn_sub_norm.weight", "blk.4.attn_sub_norm.weight"},
    {"model.layers.4.mlp.ffn_sub_norm.weight", "blk.4.ffn_sub_norm.weight"},
    {"model.layers.4.self_attn.q_proj.weight_scale", "blk.4.attn_q.weight_scale"},
    {"model.layers.4.mlp.down_proj.weight_scale", "blk.4.ffn_down.weight_scale"},
    {"model.layers.123456.mlp.up_proj.weight", "blk.123456.ffn_up.weight"},
    {"model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight"}, /* Qwen3 */
    {"model.layers.2.self_attn.k_norm.weight", "blk.2.attn_k_norm.weight"},
};

static const char *const k_unmapped_hf[] = {
    "model.layers.0.self_attn.rotary_emb.inv_freq",
    "model.layers.0.self_attn.q_proj", /* no suffix */
    "model.layers.0.self_attn.q_proj.scales",
    "model.layers.x.mlp.up_proj.weight",
    "model.layers.01.mlp.up_proj.weight", /* leading zero */
    "model.layers..mlp.up_proj.weight",
    "model.layers.1234567.mlp.up_proj.weight", /* over 6 digits */
    "model.layers.0.mlp.up_proj.weight.weight",
    "model.embed_tokens.weightx",
    "embed_tokens.weight",
    "lm_head",
    ".weight",
    "",
    "B",
    "model.layers.0.weight",
    "model.layers.0.mlp.weight",
    "model.layers.-1.mlp.up_proj.weight",
    /* Phi-3's fused modules map only for that family (qp_name_map_family) */
    "model.layers.0.self_attn.qkv_proj.weight",
    "model.layers.0.mlp.gate_up_proj.weight",
};

static const char *const k_unmapped_gguf[] = {
    "token_embd", "blk.0.attn_q", "blk.a.attn_q.weight", "blk.0.attn_qkv.weight", "rope_freqs.weight",
    "blk.00.attn_q.weight", "output.weight.bias", "",
};

int main(void) {
    char buf[128];
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) {
        const char *g = qp_name_map_hf_to_gguf(k_pairs[i].hf, buf, sizeof buf);
        QP_CHECK_MSG(g == buf && strcmp(g, k_pairs[i].gguf) == 0, "%s -> %s (want %s)", k_pairs[i].hf,
                     g ? g : "NULL", k_pairs[i].gguf);
        const char *h = qp_name_map_gguf_to_hf(k_pairs[i].gguf, buf, sizeof buf);
        QP_CHECK_MSG(h == buf && strcmp(h, k_pairs[i].hf) == 0, "%s -> %s (want %s)", k_pairs[i].gguf,
                     h ? h : "NULL", k_pairs[i].hf);
    }
    for (size_t i = 0; i < sizeof k_unmapped_hf / sizeof k_unmapped_hf[0]; i++)
        QP_CHECK_MSG(qp_name_map_hf_to_gguf(k_unmapped_hf[i], buf, sizeof buf) == NULL, "'%s' mapped",
                     k_unmapped_hf[i]);
    for (size_t i = 0; i < sizeof k_unmapped_gguf / sizeof k_unmapped_gguf[0]; i++)
        QP_CHECK_MSG(qp_name_map_gguf_to_hf(k_unmapped_gguf[i], buf, sizeof buf) == NULL, "'%s' mapped",
                     k_unmapped_gguf[i]);
    /* a GGUF name is never an HF name and vice versa */
    QP_CHECK(qp_name_map_hf_to_gguf("blk.0.attn_q.weight", buf, sizeof buf) == NULL);
    QP_CHECK(qp_name_map_gguf_to_hf("model.layers.0.self_attn.q_proj.weight", buf, sizeof buf) == NULL);
    /* Gemma 2/3's four norms back to their HF names; other families keep the common mapping */
    static const struct { qp_family f; const char *gguf, *hf; } k_family[] = {
        {QP_FAMILY_GEMMA2, "blk.3.ffn_norm.weight", "model.layers.3.pre_feedforward_layernorm.weight"},
        {QP_FAMILY_GEMMA3, "blk.3.post_attention_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
        {QP_FAMILY_GEMMA2, "blk.0.post_ffw_norm.weight", "model.layers.0.post_feedforward_layernorm.weight"},
        {QP_FAMILY_GEMMA3, "blk.1.attn_q.weight", "model.layers.1.self_attn.q_proj.weight"},
        {QP_FAMILY_GEMMA, "blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
        {QP_FAMILY_LLAMA, "blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
    };
    for (size_t i = 0; i < sizeof k_family / sizeof k_family[0]; i++) {
        const char *h = qp_name_map_gguf_to_hf_family(k_family[i].f, k_family[i].gguf, buf, sizeof buf);
        QP_CHECK_MSG(h && strcmp(h, k_family[i].hf) == 0, "%s -> %s (want %s)", k_family[i].gguf, h ? h : "NULL",
                     k_family[i].hf);
    }
    QP_CHECK(qp_name_map_gguf_to_hf_family(QP_FAMILY_LLAMA, "blk.3.post_ffw_norm.weight", buf, sizeof buf) == NULL);
    /* skip rules, one table: a family's prefixes only (names from google/gemma-3-4b-it and the
     * Qwen3.5 checkpoints: model.visual.*, mtp.*) */
    static const struct {
        qp_family f;
        const char *hf, *why; /* why: a word of the rule, NULL: not skipped */
    } k_skip[] = {
        {QP_FAMILY_GEMMA3, "vision_tower.vision_model.post_layernorm.weight", "Gemma 3 vision"},
        {QP_FAMILY_GEMMA3, "model.multi_modal_projector.mm_soft_emb_norm.weight", "Gemma 3 vision"},
        {QP_FAMILY_QWEN35, "model.visual.blocks.0.attn.qkv.weight", "Qwen3.5 vision"},
        {QP_FAMILY_QWEN35, "mtp.layers.0.mlp.gate_proj.weight", "Qwen3.5 MTP"},
        {QP_FAMILY_QWEN35, "mtp.fc.weight", "Qwen3.5 MTP"},
        {QP_FAMILY_QWEN35, "model.language_model.layers.0.mlp.gate_proj.weight", NULL},
        {QP_FAMILY_QWEN35, "vision_tower.vision_model.post_layernorm.weight", NULL},
        {QP_FAMILY_GEMMA3, "model.visual.blocks.0.attn.qkv.weight", NULL},
        {QP_FAMILY_GEMMA3, "mtp.fc.weight", NULL},
        {QP_FAMILY_LLAMA, "vision_tower.x.weight", NULL},
    };
    for (size_t i = 0; i < sizeof k_skip / sizeof k_skip[0]; i++) {
        const char *r = qp_name_map_skip_rule(k_skip[i].f, k_skip[i].hf);
        QP_CHECK_MSG(k_skip[i].why ? r && strstr(r, k_skip[i].why) : !r, "skip %s: %s", k_skip[i].hf, r ? r : "NULL");
    }
    QP_CHECK(qp_name_map_skip_rule(QP_FAMILY_QWEN35, NULL) == NULL);
    /* buffers: exact fit works, one byte less fails, NULLs fail */
    const char *want = "blk.10.ffn_gate.weight";
    size_t need = strlen(want) + 1;
    QP_CHECK(qp_name_map_hf_to_gguf("model.layers.10.mlp.gate_proj.weight", buf, need) != NULL);
    QP_CHECK(qp_name_map_hf_to_gguf("model.layers.10.mlp.gate_proj.weight", buf, need - 1) == NULL);
    QP_CHECK(qp_name_map_hf_to_gguf(NULL, buf, sizeof buf) == NULL);
    QP_CHECK(qp_name_map_hf_to_gguf("lm_head.weight", NULL, 16) == NULL);
    QP_CHECK(qp_name_map_hf_to_gguf("lm_head.weight", buf, 0) == NULL);
    return qp_test_finish();
}
