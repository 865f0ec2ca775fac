/* HF <-> GGUF tensor names (readers/name_map.h). Pure string work on caller buffers. */
#include "readers/name_map.h"

#include "core/model_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct name_pair {
    const char *hf;
    const char *gguf;
} name_pair;

static const name_pair k_global[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
};

static const name_pair k_layer[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"}, /* Qwen3 */
    {"self_attn.k_norm", "attn_k_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"self_attn.attn_sub_norm", "attn_sub_norm"},
    {"mlp.ffn_sub_norm", "ffn_sub_norm"},
    /* 1bitLLM's bitnet_b1_58 names for the same norms (llama.cpp's converter maps them so) */
    {"self_attn.inner_attn_ln", "attn_sub_norm"},
    {"mlp.ffn_layernorm", "ffn_sub_norm"},
    /* Mixtral's router */
    {"block_sparse_moe.gate", "ffn_gate_inp"},
};

/* Mixtral's experts: "block_sparse_moe.experts.E.<w>" <-> "<ffn>.E" (llama.cpp's per-expert
 * names LLM_TENSOR_FFN_*_EXP; converters merge them into ffn_*_exps, converters/recipes.md) */
static const name_pair k_expert[] = {
    {"w1", "ffn_gate"},
    {"w2", "ffn_down"},
    {"w3", "ffn_up"},
};
static const char k_hf_experts[] = "block_sparse_moe.experts.";
/* Phi-3's fused modules, mapped for that family alone (both ways): in another architecture they
 * are not the model's tensors, and gate_up_proj would collide with up_proj. */
static const name_pair k_layer_phi3[] = {
    {"self_attn.qkv_proj", "attn_qkv"}, /* q, k, v rows in one matrix (kept fused) */
    {"mlp.gate_up_proj", "ffn_up"},     /* gate rows then up rows (llama.cpp's ffn_up) */
};

/* Gemma 2 and 3's four norms per layer (llama.cpp's ATTN_POST_NORM, FFN_NORM, FFN_POST_NORM):
 * post_attention_layernorm is the norm after attention there, not the FFN's input norm, so this
 * table replaces the common mapping for those families. */
static const name_pair k_layer_gemma2[] = {
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
};

/* Longest first: ".weight_scale" must win over ".weight" (which is not its suffix anyway, but
 * keep the order explicit). */
static const char *const k_suffixes[] = {".weight_scale", ".weight", ".bias"};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Splits name into a stem and one of the known suffixes. Returns the suffix or NULL. */
static const char *split_suffix(const char *name, size_t *stem_len) {
    size_t n = strlen(name);
    for (size_t i = 0; i < N_OF(k_suffixes); i++) {
        size_t s = strlen(k_suffixes[i]);
        if (n > s && memcmp(name + n - s, k_suffixes[i], s) == 0) {
            *stem_len = n - s;
            return k_suffixes[i];
        }
    }
    return NULL;
}

/* Parses a layer number at s (decimal, no sign, no leading zero unless "0", at most 6 digits)
 * followed by '.'. Returns the digits consumed (excluding the dot) or 0. */
static size_t parse_layer(const char *s, size_t len, unsigned *out) {
    size_t i = 0;
    unsigned v = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
        if (i == 6) return 0;
        v = v * 10u + (unsigned)(s[i] - '0');
        i++;
    }
    if (i == 0 || i >= len || s[i] != '.') return 0;
    if (i > 1 && s[0] == '0') return 0;
    *out = v;
    return i;
}

static bool stem_eq(const char *stem, size_t len, const char *lit) {
    return strlen(lit) == len && memcmp(stem, lit, len) == 0;
}

static const char *emit(char *buf, size_t cap, int n) {
    if (n < 0 || (size_t)n >= cap) return NULL;
    return buf;
}

/* module (module_len bytes, no suffix) as an expert name of the from side; writes the other
 * side's "<module>" into out (outcap bytes). */
static bool map_expert(const char *module, size_t module_len, bool to_gguf, char *out,
                       size_t outcap) {
    size_t pl = to_gguf ? strlen(k_hf_experts) : 0;
    if (to_gguf && (module_len <= pl || memcmp(module, k_hf_experts, pl) != 0)) return false;
    for (size_t i = 0; i < N_OF(k_expert); i++) {
        const char *from = to_gguf ? NULL : k_expert[i].gguf;
        unsigned ex = 0;
        if (to_gguf) {
            size_t d = parse_layer(module + pl, module_len - pl, &ex);
            if (!d || !stem_eq(module + pl + d + 1, module_len - pl - d - 1, k_expert[i].hf)) continue;
            int n = snprintf(out, outcap, "%s.%u", k_expert[i].gguf, ex);
            return n > 0 && (size_t)n < outcap;
        }
        size_t fl = strlen(from);
        if (module_len <= fl + 1 || memcmp(module, from, fl) != 0 || module[fl] != '.') continue;
        /* parse_layer wants a trailing '.': check the digits run to the end */
        size_t dl = module_len - fl - 1;
        char digits[16];
        if (dl >= sizeof digits - 1) continue;
        memcpy(digits, module + fl + 1, dl);
        digits[dl] = '.';
        if (parse_layer(digits, dl + 1, &ex) != dl) continue;
        int n = snprintf(out, outcap, "%s%u.%s", k_hf_experts, ex, k_expert[i].hf);
        return n > 0 && (size_t)n < outcap;
    }
    return false;
}

/* The text model of an HF multimodal wrapper (Gemma3ForConditionalGeneration): its tensors
 * under "language_model.model." (transformers < 4.52), "model.language_model." (later) and
 * "language_model.lm_head." are the causal LM's "model." / "lm_head." ones. Returns name itself
 * or its plain form in buf (NULL when it does not fit). */
static const name_pair k_text_prefixes[] = {
    {"language_model.model.", "model."},
    {"model.language_model.", "model."},
    {"language_model.lm_head.", "lm_head."},
};

static const char *text_model_name(const char *name, char *buf, size_t cap) {
    for (size_t i = 0; i < N_OF(k_text_prefixes); i++) {
        size_t n = strlen(k_text_prefixes[i].hf);
        if (strncmp(name, k_text_prefixes[i].hf, n) == 0)
            return emit(buf, cap, snprintf(buf, cap, "%s%s", k_text_prefixes[i].gguf, name + n));
    }
    return name;
}

static const char *map(const char *name, char *buf, size_t cap, bool to_gguf,
                       const name_pair *layer_tab, size_t n_layer_tab) {
    if (!name || !buf || cap == 0) return NULL;
    char plain[256];
    if (to_gguf && !(name = text_model_name(name, plain, sizeof plain))) return NULL;
    size_t stem_len;
    const char *suffix = split_suffix(name, &stem_len);
    if (!suffix) return NULL;
    for (size_t i = 0; i < N_OF(k_global); i++) {
        const char *from = to_gguf ? k_global[i].hf : k_global[i].gguf;
        const char *to = to_gguf ? k_global[i].gguf : k_global[i].hf;
        if (stem_eq(name, stem_len, from))
            return emit(buf, cap, snprintf(buf, cap, "%s%s", to, suffix));
    }
    const char *prefix = to_gguf ? "model.layers." : "blk.";
    size_t pl = strlen(prefix);
    if (stem_len <= pl || memcmp(name, prefix, pl) != 0) return NULL;
    unsigned layer;
    size_t digits = parse_layer(name + pl, stem_len - pl, &layer);
    if (!digits) return NULL;
    const char *module = name + pl + digits + 1;
    size_t module_len = stem_len - pl - digits - 1;
    for (size_t i = 0; i < n_layer_tab; i++) {
        const char *from = to_gguf ? layer_tab[i].hf : layer_tab[i].gguf;
        const char *to = to_gguf ? layer_tab[i].gguf : layer_tab[i].hf;
        if (stem_eq(module, module_len, from))
            return emit(buf, cap,
                        snprintf(buf, cap, "%s%u.%s%s", to_gguf ? "blk." : "model.layers.", layer, to,
                                 suffix));
    }
    char ex[64];
    if (map_expert(module, module_len, to_gguf, ex, sizeof ex))
        return emit(buf, cap, snprintf(buf, cap, "%s%u.%s%s", to_gguf ? "blk." : "model.layers.",
                                       layer, ex, suffix));
    return NULL;
}

const char *qp_name_map_hf_to_gguf(const char *hf_name, char *buf, size_t cap) {
    return map(hf_name, buf, cap, true, k_layer, N_OF(k_layer));
}

const char *qp_name_map_gguf_to_hf(const char *gguf_name, char *buf, size_t cap) {
    return map(gguf_name, buf, cap, false, k_layer, N_OF(k_layer));
}

static bool has_four_norms(qp_family f) { return f == QP_FAMILY_GEMMA2 || f == QP_FAMILY_GEMMA3; }

const char *qp_name_map_gguf_to_hf_family(qp_family f, const char *gguf_name, char *buf, size_t cap) {
    const char *hf = has_four_norms(f) ? map(gguf_name, buf, cap, false, k_layer_gemma2, N_OF(k_layer_gemma2))
                     : f == QP_FAMILY_PHI3 ? map(gguf_name, buf, cap, false, k_layer_phi3, N_OF(k_layer_phi3))
                                           : NULL;
    return hf ? hf : qp_name_map_gguf_to_hf(gguf_name, buf, cap);
}

const char *qp_name_map_skip_rule(qp_family f, const char *hf_name) {
    static const char *const k_vision[] = {"vision_tower.", "multi_modal_projector.",
                                           "model.vision_tower.", "model.multi_modal_projector."};
    if (f != QP_FAMILY_GEMMA3 || !hf_name) return NULL;
    for (size_t i = 0; i < N_OF(k_vision); i++)
        if (strncmp(hf_name, k_vision[i], strlen(k_vision[i])) == 0)
            return "Gemma 3 vision tower / multimodal projector: text model only (llama.cpp's "
                   "converter writes these to a separate mmproj file)";
    return NULL;
}

qp_status qp_name_map_family(qp_model *m, qp_err *e) {
    bool phi3 = m->arch.family == QP_FAMILY_PHI3;
    bool gemma2 = has_four_norms(m->arch.family);
    if (!phi3 && !gemma2) return QP_OK;
    const name_pair *tab = phi3 ? k_layer_phi3 : k_layer_gemma2;
    size_t n = phi3 ? N_OF(k_layer_phi3) : N_OF(k_layer_gemma2);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        qp_tensor *t = &m->tensors[i];
        char buf[256];
        /* Phi-3's names are unmapped by the common table; Gemma 2/3's replace its mapping */
        if ((phi3 && t->canon) || !map(t->name, buf, sizeof buf, true, tab, n)) continue;
        if (!(t->canon = qp_arena_strdup(qp_model_arena(m), buf)))
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    }
    return QP_OK;
}
