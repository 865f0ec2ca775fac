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

/* Qwen3.5's modules (llama.cpp's qwen35 tensor names): post_attention_layernorm is the FFN's input
 * norm there but keeps llama.cpp's name; the gated delta-net's projections, conv, norm and
 * parameters. A_log and dt_bias have no suffix in HF: qwen35_canon gives them one first. */
static const name_pair k_layer_qwen35[] = {
    {"post_attention_layernorm", "post_attention_norm"},
    {"linear_attn.in_proj_qkv", "attn_qkv"},
    {"linear_attn.in_proj_z", "attn_gate"},
    {"linear_attn.in_proj_b", "ssm_beta"},
    {"linear_attn.in_proj_a", "ssm_alpha"},
    {"linear_attn.conv1d", "ssm_conv1d"},
    {"linear_attn.norm", "ssm_norm"},
    {"linear_attn.out_proj", "ssm_out"},
    {"linear_attn.dt", "ssm_dt"}, /* dt_bias, as "dt.bias" */
    {"linear_attn.A", "ssm_a"},   /* A_log, as "A.weight"; llama.cpp's name has no suffix */
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

static bool ends_with(const char *s, size_t n, const char *lit);

/* The inverse of qwen35_canon: k_layer_qwen35 then the common table; "ssm_a" (no suffix) read as
 * "ssm_a.weight", and HF's suffix-less A_log / dt_bias given back. */
static const char *qwen35_hf_name(const char *gguf_name, char *buf, size_t cap) {
    char g[256];
    size_t n = strlen(gguf_name);
    bool a = ends_with(gguf_name, n, ".ssm_a");
    if (snprintf(g, sizeof g, "%s%s", gguf_name, a ? ".weight" : "") >= (int)sizeof g) return NULL;
    const char *r = map(g, buf, cap, false, k_layer_qwen35, N_OF(k_layer_qwen35));
    if (!r) return map(g, buf, cap, false, k_layer, N_OF(k_layer));
    size_t bl = strlen(r);
    const char *tail = ends_with(r, bl, ".A.weight") ? ".A_log" : ends_with(r, bl, ".dt.bias") ? ".dt_bias" : NULL;
    size_t cut = tail ? (tail[1] == 'A' ? strlen(".A.weight") : strlen(".dt.bias")) : 0;
    if (tail && (bl - cut + strlen(tail) >= cap)) return NULL;
    if (tail) strcpy(buf + bl - cut, tail);
    return r;
}

const char *qp_name_map_gguf_to_hf_family(qp_family f, const char *gguf_name, char *buf, size_t cap) {
    if (f == QP_FAMILY_QWEN35) return gguf_name ? qwen35_hf_name(gguf_name, buf, cap) : NULL;
    const char *hf = has_four_norms(f) ? map(gguf_name, buf, cap, false, k_layer_gemma2, N_OF(k_layer_gemma2))
                     : f == QP_FAMILY_PHI3 ? map(gguf_name, buf, cap, false, k_layer_phi3, N_OF(k_layer_phi3))
                                           : NULL;
    return hf ? hf : qp_name_map_gguf_to_hf(gguf_name, buf, cap);
}

/* A skip rule: the HF names under one of the prefixes are left out, for this reason. */
typedef struct skip_prefixes {
    qp_family family;
    const char *const *prefixes;
    size_t n;
    const char *why;
} skip_prefixes;

static const char *const k_gemma3_vision[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                              "model.multi_modal_projector."};
static const char *const k_qwen35_vision[] = {"model.visual."};
static const char *const k_qwen35_mtp[] = {"mtp."};
static const skip_prefixes k_skip[] = {
    {QP_FAMILY_GEMMA3, k_gemma3_vision, N_OF(k_gemma3_vision),
     "Gemma 3 vision tower / multimodal projector: text model only (llama.cpp's converter writes these to a "
     "separate mmproj file)"},
    {QP_FAMILY_QWEN35, k_qwen35_vision, N_OF(k_qwen35_vision),
     "Qwen3.5 vision tower: not part of the text model (llama.cpp writes it as an mmproj)"},
    {QP_FAMILY_QWEN35, k_qwen35_mtp, N_OF(k_qwen35_mtp),
     "Qwen3.5 MTP block: not run by the main pass (llama.cpp's graph skips it)"},
};

const char *qp_name_map_skip_rule(qp_family f, const char *hf_name) {
    if (!hf_name) return NULL;
    for (size_t r = 0; r < N_OF(k_skip); r++) {
        if (k_skip[r].family != f) continue;
        for (size_t i = 0; i < k_skip[r].n; i++)
            if (strncmp(hf_name, k_skip[r].prefixes[i], strlen(k_skip[r].prefixes[i])) == 0) return k_skip[r].why;
    }
    return NULL;
}

static bool ends_with(const char *s, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(s + n - l, lit, l) == 0;
}

/* A Qwen3.5 tensor's canonical name in buf: A_log / dt_bias given a suffix, then k_layer_qwen35
 * before the common table (map() reads the multimodal checkpoint's "model.language_model." as
 * "model.", as for Gemma 3). NULL when unmapped (the vision tower, the MTP block: skip rules). */
static const char *qwen35_canon(const char *name, char *buf, size_t cap) {
    char hf[256];
    size_t n = strlen(name);
    const char *tail = ends_with(name, n, ".A_log") ? ".A.weight" : ends_with(name, n, ".dt_bias") ? ".dt.bias" : "";
    size_t keep = n - (*tail ? (tail[1] == 'A' ? 6 : 8) : 0);
    if (snprintf(hf, sizeof hf, "%.*s%s", (int)keep, name, tail) >= (int)sizeof hf) return NULL;
    const char *r = map(hf, buf, cap, true, k_layer_qwen35, N_OF(k_layer_qwen35));
    if (!r) r = map(hf, buf, cap, true, k_layer, N_OF(k_layer));
    size_t bl = r ? strlen(r) : 0;
    if (r && ends_with(r, bl, ".ssm_a.weight")) buf[bl - 7] = '\0';
    return r;
}

qp_status qp_name_map_family(qp_model *m, qp_err *e) {
    if (m->arch.family == QP_FAMILY_QWEN35) {
        for (int64_t i = 0; i < m->n_tensors; i++) {
            char buf[256];
            qp_tensor *t = &m->tensors[i];
            const char *c = qwen35_canon(t->name, buf, sizeof buf);
            if (c && !(t->canon = qp_arena_strdup(qp_model_arena(m), c)))
                return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        }
        return QP_OK;
    }
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
