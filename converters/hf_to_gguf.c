/* GGUF key/values for sources that are not GGUF files (HF directories, llama2.c checkpoints):
 * the keys llama.cpp reads for the architecture, with its exact types (u32 counts and token ids,
 * f32 epsilon and theta, bool add_bos), and the tokenizer from m->vocab
 * (converters/recipes.md, "Metadata of HF sources"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "converters/convert_gguf.h"
#include "quantpack/chat.h"
#include "readers/gguf_meta.h"
#include "writers/gguf_writer.h"

static qp_status add_u32_opt(qp_gguf_writer *w, const char *arch, const char *suffix, int64_t v,
                             qp_err *e) {
    if (v <= 0) return QP_OK;
    if (v > (int64_t)UINT32_MAX)
        return qp_fail(e, QP_ERR_LIMIT, "%s.%s = %lld does not fit the u32 llama.cpp reads", arch,
                       suffix, (long long)v);
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return qp_gguf_writer_add_u32(w, key, (uint32_t)v, e);
}

static qp_status add_f32_key(qp_gguf_writer *w, const char *arch, const char *suffix, float v,
                             qp_err *e) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return qp_gguf_writer_add_f32(w, key, v, e);
}

static const char *base_name(const char *path) {
    if (!path) return "model";
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    const char *s = path + n;
    while (s > path && s[-1] != '/') s--;
    return s;
}

/* A unigram vocabulary's normaliser keys, as convert_hf_to_gguf.py's T5 path writes them. */
static qp_status unigram_kvs(const qp_vocab *v, qp_gguf_writer *w, qp_err *e) {
    qp_status s = qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", !v->no_space_prefix, e);
    if (s == QP_OK)
        s = qp_gguf_writer_add_bool(w, "tokenizer.ggml.remove_extra_whitespaces", v->remove_extra_spaces, e);
    if (s == QP_OK && v->charsmap && v->charsmap_len > 0)
        s = qp_gguf_writer_add_array(w, "tokenizer.ggml.precompiled_charsmap", QP_META_U8,
                                     (uint64_t)v->charsmap_len, v->charsmap, e);
    return s;
}

/* The token list as convert_hf_to_gguf.py writes it: the vocabulary, then "[PAD<id>]" for every
 * embedding row beyond it (get_vocab_base and _create_vocab_sentencepiece fill ids up to
 * vocab_size so; Gemma 3's 262208 rows over a 262145-token tokenizer), type UNUSED and score
 * -10000, so that llama.cpp's loader finds as many tokens as token_embd has rows. */
typedef struct gguf_tokens {
    int64_t n;
    char **strs;
    uint32_t *lens;
    char *pad_text; /* the "[PAD<id>]" strings, 24 bytes each */
} gguf_tokens;

static qp_status gguf_tokens_make(const qp_model *m, gguf_tokens *out, qp_err *e) {
    const qp_vocab *v = &m->vocab;
    const qp_tensor *emb = qp_model_find(m, "token_embd.weight");
    int64_t rows = emb && emb->n_dims >= 2 ? emb->ne[1] : 0, n = rows > v->n_tokens ? rows : v->n_tokens;
    *out = (gguf_tokens){n, NULL, NULL, NULL};
    out->strs = qp_calloc((size_t)n, sizeof *out->strs);
    out->lens = qp_calloc((size_t)n, sizeof *out->lens);
    out->pad_text = qp_calloc((size_t)(n - v->n_tokens) + 1, 24);
    if (!out->strs || !out->lens || !out->pad_text)
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(out->strs, v->tokens, (size_t)v->n_tokens * sizeof *out->strs);
    memcpy(out->lens, v->token_lens, (size_t)v->n_tokens * sizeof *out->lens);
    for (int64_t i = v->n_tokens; i < n; i++) {
        char *p = out->pad_text + 24 * (i - v->n_tokens);
        out->lens[i] = (uint32_t)snprintf(p, 24, "[PAD%lld]", (long long)i);
        out->strs[i] = p;
    }
    return QP_OK;
}

static void gguf_tokens_free(gguf_tokens *t) {
    qp_free(t->strs);
    qp_free(t->lens);
    qp_free(t->pad_text);
}

/* tokenizer.ggml.scores / token_type over the padded list (pads: -10000, UNUSED); the types are
 * written whenever there are pads, so llama.cpp sees them as unused. */
static qp_status score_and_type_kvs(const qp_vocab *v, int64_t n, qp_gguf_writer *w, qp_err *e) {
    bool types = v->types || n > v->n_tokens;
    if (!v->scores && !types) return QP_OK;
    uint8_t *buf = qp_malloc((size_t)n * 4);
    if (!buf) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory");
    qp_status s = QP_OK;
    if (v->scores) {
        for (int64_t i = 0; i < n; i++) qp_store_f32le(buf + 4 * i, i < v->n_tokens ? v->scores[i] : -10000.0f);
        s = qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, (uint64_t)n, buf, e);
    }
    if (s == QP_OK && types) {
        for (int64_t i = 0; i < n; i++)
            qp_store_u32le(buf + 4 * i, (uint32_t)(i >= v->n_tokens ? QP_TOKTYPE_UNUSED
                                                   : v->types ? v->types[i] : QP_TOKTYPE_NORMAL));
        s = qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, (uint64_t)n, buf, e);
    }
    qp_free(buf);
    return s;
}

static qp_status tokenizer_kvs(const qp_model *m, qp_gguf_writer *w, qp_err *e) {
    const qp_vocab *v = &m->vocab;
    if (v->model == QP_TOK_NONE || v->n_tokens <= 0 || !v->tokens) return QP_OK;
    static const char *const k_models[] = {[QP_TOK_SPM] = "llama", [QP_TOK_BPE] = "gpt2",
                                           [QP_TOK_WPM] = "bert", [QP_TOK_UGM] = "t5"};
    const char *model = k_models[v->model];
    qp_status s = qp_gguf_writer_add_str(w, "tokenizer.ggml.model", model, strlen(model), e);
    if (s == QP_OK && v->model == QP_TOK_BPE) {
        const char *pre = v->pre[0] ? v->pre : "default";
        s = qp_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, strlen(pre), e);
    }
    gguf_tokens tl = {0};
    if (s == QP_OK) s = gguf_tokens_make(m, &tl, e);
    if (s == QP_OK) s = qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", tl.strs, tl.lens, (uint64_t)tl.n, e);
    if (s == QP_OK) s = score_and_type_kvs(v, tl.n, w, e);
    gguf_tokens_free(&tl);
    if (s == QP_OK && v->model == QP_TOK_BPE && v->n_merges > 0 && v->merges)
        s = qp_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", v->merges, NULL,
                                         (uint64_t)v->n_merges, e);
    static const char *const k_ids[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                         "tokenizer.ggml.unknown_token_id",
                                         "tokenizer.ggml.padding_token_id"};
    int32_t ids[4] = {v->bos_id, v->eos_id, v->unk_id, v->pad_id};
    for (int i = 0; i < 4 && s == QP_OK; i++)
        if (ids[i] >= 0) s = qp_gguf_writer_add_u32(w, k_ids[i], (uint32_t)ids[i], e);
    if (s == QP_OK) s = qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos, e);
    if (s == QP_OK) s = qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos, e);
    if (s == QP_OK && v->model == QP_TOK_SPM && v->no_space_prefix)
        s = qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", false, e);
    if (s == QP_OK && v->model == QP_TOK_UGM) s = unigram_kvs(v, w, e);
    /* the chat template, where convert_hf_to_gguf.py writes it (runtime/chat.md) */
    const char *ct = qp_model_chat_template(m);
    if (s == QP_OK && ct) s = qp_gguf_writer_add_str(w, "tokenizer.chat_template", ct, strlen(ct), e);
    return s;
}

qp_status qp_gguf_bitnet_keys(const char *arch, bool ms_i2s, qp_gguf_writer *w, qp_err *e) {
    qp_act act;
    bool i8;
    if (!arch || !qp_gguf_bitnet_arch(arch, ms_i2s, &act, &i8)) return QP_OK;
    const char *an = qp_act_name(act), *qn = i8 ? QP_ACT_QUANT_INT8 : QP_ACT_QUANT_NONE;
    qp_status s = qp_gguf_writer_add_str(w, QP_GGUF_FFN_ACT_KEY, an, strlen(an), e);
    if (s == QP_OK) s = qp_gguf_writer_add_str(w, QP_GGUF_ACT_QUANT_KEY, qn, strlen(qn), e);
    return s;
}

/* What llama.cpp's Gemma 2/3 loaders cannot be told is refused (recipes.md "Gemma"): q's scale
 * is derived there from the layer count and shapes (query_pre_attn_scalar is not in GGUF), and
 * Gemma 3's graph has no attention soft-cap. */
static qp_status check_gemma_gguf(const qp_model *m, qp_err *e) {
    const qp_arch *a = &m->arch;
    bool g2 = a->family == QP_FAMILY_GEMMA2;
    int64_t hd = a->head_dim > 0 ? a->head_dim : a->hidden / a->n_heads;
    int64_t d = a->n_layers == (g2 ? 46 : 62) ? a->hidden / a->n_heads : hd;
    if (a->attn_scale > 0.0f && a->attn_scale != 1.0f / sqrtf((float)d))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: query_pre_attn_scalar %.6g differs from the %lld "
                       "llama.cpp derives for this %s model (GGUF has no key for it)", m->path,
                       1.0 / ((double)a->attn_scale * a->attn_scale), (long long)d, qp_family_name(a->family));
    if (!g2 && a->attn_softcap > 0.0f)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: attn_logit_softcapping on a Gemma 3 model: "
                       "llama.cpp's gemma3 graph has none", m->path);
    return QP_OK;
}

/* Gemma 2/3's keys (convert_hf_to_gguf.py's Gemma2Model / Gemma3Model). */
static qp_status gemma_keys(const qp_model *m, const char *arch, qp_gguf_writer *w, qp_err *e) {
    const qp_arch *a = &m->arch;
    bool g2 = a->family == QP_FAMILY_GEMMA2;
    qp_status s = check_gemma_gguf(m, e);
    if (s == QP_OK && g2) s = add_f32_key(w, arch, "attn_logit_softcapping", a->attn_softcap, e);
    if (s == QP_OK && (g2 || a->final_softcap > 0.0f))
        s = add_f32_key(w, arch, "final_logit_softcapping", a->final_softcap, e);
    if (s == QP_OK && (g2 || a->swa_pattern != 1)) s = add_u32_opt(w, arch, "attention.sliding_window", a->sliding_window, e);
    if (s == QP_OK && !g2 && a->swa_pattern != 6)
        s = add_u32_opt(w, arch, "attention.sliding_window_pattern", a->swa_pattern, e);
    if (s == QP_OK && !g2 && a->rope_theta_swa > 0.0f) s = add_f32_key(w, arch, "rope.freq_base_swa", a->rope_theta_swa, e);
    if (s == QP_OK && a->rope_freq_scale > 0.0f) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        s = qp_gguf_writer_add_str(w, key, "linear", 6, e);
        if (s == QP_OK) s = add_f32_key(w, arch, "rope.scaling.factor", 1.0f / a->rope_freq_scale, e);
    }
    return s;
}

/* Qwen3.5's keys (convert_hf_to_gguf.py's Qwen3NextModel / Qwen3_5TextModel): the delta-net
 * sizes as ssm.*, full_attention_interval, the M-RoPE sections (text positions: every section
 * rotates by the same position, which is plain NEOX RoPE over rope.dimension_count). Value
 * heads are written in llama.cpp's tiled order (the recipe's qp_vhead_order). */
static qp_status qwen35_keys(const qp_model *m, const char *arch, qp_gguf_writer *w, qp_err *e) {
    const qp_arch *a = &m->arch;
    qp_status s = add_u32_opt(w, arch, "ssm.conv_kernel", a->ssm_conv_kernel, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "ssm.state_size", a->ssm_state_size, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "ssm.group_count", a->ssm_group_count, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "ssm.time_step_rank", a->ssm_time_step_rank, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "ssm.inner_size", a->ssm_inner_size, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "full_attention_interval", a->full_attn_interval, e);
    /* rope_parameters.mrope_section + a 0 (llama.cpp's default [11, 11, 10, 0] when absent) */
    int32_t sec[4] = {11, 11, 10, 0};
    const qp_meta *tc = qp_model_meta(m, "hf.config.text_config");
    if (!tc) tc = qp_model_meta(m, "hf.config.rope_parameters"); /* Qwen3_5ForCausalLM */
    const char *ms = tc && tc->str ? strstr(tc->str, "\"mrope_section\":[") : NULL;
    if (ms) sscanf(ms + 17, "%d,%d,%d", &sec[0], &sec[1], &sec[2]);
    uint8_t le[16];
    for (int i = 0; i < 4; i++) qp_store_u32le(le + 4 * i, (uint32_t)sec[i]);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
    if (s == QP_OK) s = qp_gguf_writer_add_array(w, key, QP_META_I32, 4, le, e);
    return s;
}

/* The keys of one architecture beyond the common ones, as convert_hf_to_gguf.py writes them. */
static qp_status arch_keys(const qp_model *m, const char *arch, qp_gguf_writer *w, qp_err *e) {
    const qp_arch *a = &m->arch;
    char key[128];
    qp_status s = QP_OK;
    if (a->family == QP_FAMILY_GEMMA2 || a->family == QP_FAMILY_GEMMA3) return gemma_keys(m, arch, w, e);
    if (a->family == QP_FAMILY_QWEN35) return qwen35_keys(m, arch, w, e);
    if (a->family == QP_FAMILY_PHI3) { /* Phi3MiniModel: sliding_window (0 when null) always */
        const qp_meta *orig = qp_model_meta(m, "hf.config.original_max_position_embeddings");
        if (orig && orig->type == QP_META_I64)
            s = add_u32_opt(w, arch, "rope.scaling.original_context_length", orig->v.i, e);
        snprintf(key, sizeof key, "%s.attention.sliding_window", arch);
        if (s == QP_OK && a->sliding_window > (int64_t)UINT32_MAX)
            s = qp_fail(e, QP_ERR_LIMIT, "%s = %lld does not fit u32", key, (long long)a->sliding_window);
        if (s == QP_OK) s = qp_gguf_writer_add_u32(w, key, (uint32_t)a->sliding_window, e);
    }
    return s;
}

qp_status qp_hf_gguf_metadata(const qp_model *m, const char *arch, const qp_plan *plan,
                              qp_gguf_writer *w, qp_err *e) {
    const qp_arch *a = &m->arch;
    if (a->hidden <= 0 || a->n_layers <= 0 || a->n_heads <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the source gives no architecture (hidden %lld, "
                       "layers %lld, heads %lld)", m->path, (long long)a->hidden,
                       (long long)a->n_layers, (long long)a->n_heads);
    qp_status s = qp_gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), e);
    const char *name = base_name(m->path);
    if (s == QP_OK) s = qp_gguf_writer_add_str(w, "general.name", name, strlen(name), e);
    int64_t head_dim = a->head_dim > 0 ? a->head_dim : a->hidden / a->n_heads;
    int64_t n_kv = a->n_kv_heads > 0 ? a->n_kv_heads : a->n_heads;
    if (s == QP_OK) s = add_u32_opt(w, arch, "vocab_size", a->vocab, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "context_length", a->max_pos > 0 ? a->max_pos : 2048, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "embedding_length", a->hidden, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "block_count", a->n_layers, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "feed_forward_length", a->intermediate, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "attention.head_count", a->n_heads, e);
    if (s == QP_OK) s = add_u32_opt(w, arch, "attention.head_count_kv", n_kv, e);
    if (s == QP_OK && (head_dim * a->n_heads != a->hidden || a->family == QP_FAMILY_QWEN35)) {
        s = add_u32_opt(w, arch, "attention.key_length", head_dim, e);
        if (s == QP_OK) s = add_u32_opt(w, arch, "attention.value_length", head_dim, e);
    }
    if (s == QP_OK) s = add_u32_opt(w, arch, "rope.dimension_count", a->rope_dims > 0 ? a->rope_dims : head_dim, e);
    /* MoE: llama.cpp's LLM_KV_EXPERT_COUNT / LLM_KV_EXPERT_USED_COUNT (convert_hf_to_gguf.py's
       add_expert_count / add_expert_used_count, after the rope keys) */
    if (s == QP_OK) s = add_u32_opt(w, arch, "expert_count", a->n_experts, e);
    if (s == QP_OK && a->n_experts > 0)
        s = add_u32_opt(w, arch, "expert_used_count", a->n_experts_used, e);
    if (s == QP_OK)
        s = add_f32_key(w, arch, "rope.freq_base", a->rope_theta > 0 ? a->rope_theta : 10000.0f, e);
    if (s == QP_OK)
        s = add_f32_key(w, arch, "attention.layer_norm_rms_epsilon",
                        a->norm_eps > 0 ? a->norm_eps : 1e-5f, e);
    if (s == QP_OK) s = arch_keys(m, arch, w, e);
    if (s == QP_OK) s = tokenizer_kvs(m, w, e);
    if (s == QP_OK) s = qp_gguf_bitnet_keys(arch, qp_plan_has_ms_i2s(plan), w, e);
    if (s == QP_OK) s = qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e);
    if (s == QP_OK) s = qp_gguf_writer_add_u32(w, "general.file_type", plan->file_type, e);
    return s;
}
