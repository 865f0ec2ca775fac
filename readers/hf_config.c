/* config.json -> qp_arch and tokenizer.json (+ tokenizer_config.json) -> qp_vocab.
 * Spec: readers/hf_config.md. Library code: no printing; every failure names the file. */
#include "readers/hf_config.h"

#include "quantpack/chat.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/base64.h"
#include "core/json.h"

/* ---- small JSON helpers ------------------------------------------------------------------- */

/* Byte offset of a cJSON parse failure, for messages. */
static size_t parse_error_offset(const char *text, size_t len, const char *end) {
    if (!end || end < text) return 0;
    size_t off = (size_t)(end - text);
    return off > len ? len : off;
}

static qp_status parse_json(const char *text, size_t len, const char *file, cJSON **out, qp_err *e) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON (parse error at byte offset %zu)", file,
                       parse_error_offset(text, len, end));
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return qp_fail(e, QP_ERR_CORRUPT, "%s: top-level JSON value is not an object", file);
    }
    *out = root;
    return QP_OK;
}

/* Non-negative integer no larger than max. Absent or null -> *present = false. */
static qp_status get_uint(const cJSON *obj, const char *key, int64_t max, const char *file,
                          int64_t *out, bool *present, qp_err *e) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = false;
    if (!it || cJSON_IsNull(it)) return QP_OK;
    int64_t v;
    if (qp_json_int(it, 0, max, &v)) {
        *out = v;
        *present = true;
        return QP_OK;
    }
    double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (d > (double)max && d == floor(d))
        return qp_fail(e, QP_ERR_LIMIT, "%s: '%s' = %.0f exceeds the limit %lld", file, key, d,
                       (long long)max);
    return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is %s, not a non-negative integer", file, key,
                   qp_json_kind(it));
}

static qp_status get_float(const cJSON *obj, const char *key, const char *file, double *out,
                           bool *present, qp_err *e) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = false;
    if (!it || cJSON_IsNull(it)) return QP_OK;
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is not a finite number", file, key);
    *out = it->valuedouble;
    *present = true;
    return QP_OK;
}

static qp_status get_bool(const cJSON *obj, const char *key, const char *file, bool *out,
                          bool *present, qp_err *e) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    *present = false;
    if (!it || cJSON_IsNull(it)) return QP_OK;
    if (!cJSON_IsBool(it)) return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is not a boolean", file, key);
    *out = cJSON_IsTrue(it);
    *present = true;
    return QP_OK;
}

static const char *get_str(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) && it->valuestring ? it->valuestring : NULL;
}

/* ---- config.json -------------------------------------------------------------------------- */

static const struct {
    const char *hf_arch;    /* architectures[0] */
    const char *model_type; /* model_type */
    qp_family family;
    const char *arch_name;  /* GGUF general.architecture we would write */
} k_families[] = {
    {"LlamaForCausalLM", "llama", QP_FAMILY_LLAMA, "llama"},
    {"MistralForCausalLM", "mistral", QP_FAMILY_MISTRAL, "llama"},
    {"Qwen2ForCausalLM", "qwen2", QP_FAMILY_QWEN2, "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", QP_FAMILY_QWEN3, "qwen3"},
    {"Phi3ForCausalLM", "phi3", QP_FAMILY_PHI3, "phi3"},
    /* microsoft/bitnet-b1.58-2B-4T (relu2: bitnet.cpp's "bitnet-b1.58") and 1bitLLM's
       bitnet_b1_58 (silu: llama.cpp's "bitnet"); arch_name is set from hidden_act below */
    {"BitNetForCausalLM", "bitnet", QP_FAMILY_BITNET, "bitnet-b1.58"},
    {"BitnetForCausalLM", "bitnet", QP_FAMILY_BITNET, "bitnet"},
    /* Mixtral-style MoE: Mistral's attention, experts as llama.cpp's "llama" with expert_count
       (num_local_experts / num_experts_per_tok read by moe_fields) */
    {"MixtralForCausalLM", "mixtral", QP_FAMILY_MISTRAL, "llama"},
    /* Gemma 1, 2 and 3; Gemma3ForConditionalGeneration (model_type "gemma3") is read as its
       text model (text_model_view), the vision tower left out by the converters */
    {"GemmaForCausalLM", "gemma", QP_FAMILY_GEMMA, "gemma"},
    {"Gemma2ForCausalLM", "gemma2", QP_FAMILY_GEMMA2, "gemma2"},
    {"Gemma3ForCausalLM", "gemma3_text", QP_FAMILY_GEMMA3, "gemma3"},
    {"Gemma3ForConditionalGeneration", "gemma3", QP_FAMILY_GEMMA3, "gemma3"},
    /* Qwen3.5 dense; Qwen3_5ForConditionalGeneration is read as its text model the same way
       (text_model_view), the vision tower and MTP block left out: llama.cpp's "qwen35" */
    {"Qwen3_5ForCausalLM", "qwen3_5_text", QP_FAMILY_QWEN35, "qwen35"},
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", QP_FAMILY_QWEN35, "qwen35"},
};

#define N_FAMILIES (sizeof k_families / sizeof k_families[0])

/* Every top-level config value as "hf.config.<key>": strings, booleans, integers (I64), other
 * numbers (F64); arrays and objects as their compact JSON text. */
static qp_status config_meta(qp_model *m, const cJSON *root, const char *file, qp_err *e) {
    qp_arena *a = qp_model_arena(m);
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!it->string || cJSON_IsNull(it)) continue;
        char key[256];
        int kn = snprintf(key, sizeof key, "hf.config.%s", it->string);
        if (kn < 0 || (size_t)kn >= sizeof key) {
            qp_model_add_problem(m, "%s: key '%.60s...' too long to keep as metadata", file, it->string);
            continue;
        }
        qp_status s = QP_OK;
        if (cJSON_IsString(it)) {
            s = qp_model_meta_str(m, key, it->valuestring, strlen(it->valuestring), e);
        } else if (cJSON_IsBool(it)) {
            qp_meta *md;
            if ((s = qp_model_add_meta(m, key, strlen(key), &md, e)) != QP_OK) return s;
            md->type = QP_META_BOOL;
            md->v.b = cJSON_IsTrue(it);
        } else if (cJSON_IsNumber(it)) {
            qp_meta *md;
            if ((s = qp_model_add_meta(m, key, strlen(key), &md, e)) != QP_OK) return s;
            int64_t i;
            if (qp_json_int(it, INT64_MIN, INT64_MAX, &i)) {
                md->type = QP_META_I64;
                md->v.i = i;
            } else {
                md->type = QP_META_F64;
                md->v.f = it->valuedouble;
            }
        } else {
            char *txt = cJSON_PrintUnformatted(it);
            if (!txt) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
            s = qp_model_meta_str(m, key, txt, strlen(txt), e);
            cJSON_free(txt);
        }
        if (s != QP_OK) return s;
    }
    (void)a;
    return QP_OK;
}

/* bos_token_id / eos_token_id: an integer or a list of integers (first one used; the list is
 * kept as an I32 array "hf.<key>s"). */
static qp_status token_id_field(qp_model *m, const cJSON *root, const char *key, const char *file,
                                int32_t *out, qp_err *e) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return QP_OK;
    if (cJSON_IsNumber(it)) {
        int64_t v;
        bool present;
        qp_status s = get_uint(root, key, INT32_MAX, file, &v, &present, e);
        if (s != QP_OK) return s;
        if (present) *out = (int32_t)v;
        return QP_OK;
    }
    if (!cJSON_IsArray(it))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is neither an integer nor a list", file, key);
    int n = cJSON_GetArraySize(it);
    if (n == 0) return QP_OK;
    uint8_t *raw = qp_arena_alloc(qp_model_arena(m), (size_t)n * 4);
    if (!raw) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    int i = 0;
    for (const cJSON *x = it->child; x; x = x->next, i++) {
        int64_t id;
        if (!qp_json_int(x, 0, INT32_MAX, &id))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s'[%d] is not a valid token id", file, key, i);
        qp_store_u32le(raw + 4 * i, (uint32_t)id);
        if (i == 0) *out = (int32_t)id;
    }
    char mk[64];
    snprintf(mk, sizeof mk, "hf.%ss", key);
    qp_meta *md;
    qp_status s = qp_model_add_meta(m, mk, strlen(mk), &md, e);
    if (s != QP_OK) return s;
    md->type = QP_META_ARRAY;
    md->arr_type = QP_META_I32;
    md->n = (uint64_t)n;
    md->raw = raw;
    md->raw_size = (size_t)n * 4;
    return QP_OK;
}

/* Mixtral's router: num_local_experts experts per layer, num_experts_per_tok of them per token
 * (transformers MixtralConfig defaults 8 and 2 when the architecture is Mixtral). */
static qp_status moe_fields(const cJSON *root, bool mixtral, const char *file, qp_arch *a,
                            qp_err *e) {
    int64_t v;
    bool have;
    if (mixtral) {
        a->n_experts = 8;
        a->n_experts_used = 2;
    }
    qp_status s = get_uint(root, "num_local_experts", QP_HF_MAX_EXPERTS, file, &v, &have, e);
    if (s == QP_OK && have) a->n_experts = v;
    if (s == QP_OK) s = get_uint(root, "num_experts_per_tok", QP_HF_MAX_EXPERTS, file, &v, &have, e);
    if (s == QP_OK && have) a->n_experts_used = v;
    if (s == QP_OK && a->n_experts > 0 &&
        (a->n_experts_used < 1 || a->n_experts_used > a->n_experts))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: num_experts_per_tok %lld is not in 1..num_local_experts "
                    "(%lld)", file, (long long)a->n_experts_used, (long long)a->n_experts);
    return s;
}

/* A float that may be null (0: disabled) with a default when absent. */
static qp_status get_float_or(const cJSON *root, const char *key, double dflt, const char *file,
                              float *out, qp_err *e) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    double d = dflt;
    bool have;
    qp_status s = get_float(root, key, file, &d, &have, e);
    if (s != QP_OK) return s;
    if (it && cJSON_IsNull(it)) d = 0.0;
    if (d < 0) return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is negative", file, key);
    *out = (float)d;
    return QP_OK;
}

/* Gemma 3's sliding layers: sliding_window_pattern (layer l slides unless (l + 1) % pattern == 0,
 * transformers' Gemma3 default 6), and layer_types when given must say the same. */
static qp_status gemma3_layers(const cJSON *root, const char *file, qp_arch *a, qp_err *e) {
    int64_t v = 6;
    bool have;
    qp_status s = get_uint(root, "sliding_window_pattern", 4096, file, &v, &have, e);
    if (s != QP_OK) return s;
    a->swa_pattern = (int32_t)v;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return QP_OK;
    if (!cJSON_IsArray(lt))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: 'layer_types' is not a list", file);
    int l = 0;
    for (const cJSON *x = lt->child; x; x = x->next, l++) {
        bool sliding = a->swa_pattern <= 1 || (l + 1) % a->swa_pattern != 0;
        const char *want = sliding ? "sliding_attention" : "full_attention";
        if (!cJSON_IsString(x) || strcmp(x->valuestring, want) != 0)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: layer_types[%d] is not '%s': only every "
                           "%d-th layer global (llama.cpp's Gemma 3 pattern) is supported", file, l,
                           want, (int)a->swa_pattern);
    }
    return QP_OK;
}

/* Gemma 1/2/3 (runtime/runtime.md "Gemma"): GeGLU (hidden_activation gelu_pytorch_tanh, the
 * HF default), RMS norms as (1 + w), tied embeddings unless said otherwise; Gemma 2/3:
 * query_pre_attn_scalar, soft-capping and the sliding window with transformers' defaults;
 * Gemma 3: rope_local_base_freq and linear rope_scaling. */
static qp_status gemma_fields(const cJSON *root, const char *file, qp_arch *a, qp_err *e) {
    const char *act = get_str(root, "hidden_activation");
    if (act && strcmp(act, "gelu_pytorch_tanh") != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: hidden_activation '%.40s' is not supported for "
                       "Gemma (gelu_pytorch_tanh is, as llama.cpp computes)", file, act);
    a->act = QP_ACT_GELU;
    a->norm_plus_one = true;
    a->tie_embeddings = true;
    bool b, have;
    qp_status s = get_bool(root, "tie_word_embeddings", file, &b, &have, e);
    if (s == QP_OK && have) a->tie_embeddings = b;
    if (s != QP_OK || a->family == QP_FAMILY_GEMMA) return s;
    float qpas = 256.0f;
    int64_t v = 4096;
    s = get_float_or(root, "query_pre_attn_scalar", 256.0, file, &qpas, e);
    if (s == QP_OK && !(qpas > 0))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: 'query_pre_attn_scalar' is not positive", file);
    if (s == QP_OK) a->attn_scale = 1.0f / sqrtf(qpas);
    bool g2 = a->family == QP_FAMILY_GEMMA2;
    if (s == QP_OK) s = get_float_or(root, "attn_logit_softcapping", g2 ? 50.0 : 0.0, file, &a->attn_softcap, e);
    if (s == QP_OK) s = get_float_or(root, "final_logit_softcapping", g2 ? 30.0 : 0.0, file, &a->final_softcap, e);
    if (s == QP_OK) s = get_uint(root, "sliding_window", INT32_MAX, file, &v, &have, e);
    if (s == QP_OK) a->sliding_window = v;
    a->swa_pattern = 2; /* Gemma 2: even layers slide */
    if (s == QP_OK && !g2) {
        s = gemma3_layers(root, file, a, e);
        if (!cJSON_GetObjectItemCaseSensitive(root, "rope_theta")) a->rope_theta = 1000000.0f;
        a->rope_theta_swa = 10000.0f;
        if (s == QP_OK) s = get_float_or(root, "rope_local_base_freq", 10000.0, file, &a->rope_theta_swa, e);
    }
    return s;
}

/* A key of Qwen3.5's rope: rope_parameters.<key> (transformers 5), else the top-level <key>. */
static qp_status qwen35_rope_key(const cJSON *root, const char *key, const char *file, double *out,
                                 bool *have, qp_err *e) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    qp_status s = QP_OK;
    *have = false;
    if (cJSON_IsObject(rp)) s = get_float(rp, key, file, out, have, e);
    if (s == QP_OK && !*have) s = get_float(root, key, file, out, have, e);
    return s;
}

/* Qwen3.5 (runtime/runtime.md "Qwen3.5"): the gated delta-net sizes, full_attention_interval
 * (layer_types, when given, must be that pattern), partial rotary, the output gate, RMS norms as
 * (1 + w) (Qwen3_5RMSNorm; the delta-net's gated norm excepted), A_log stored as the log. */
static qp_status qwen35_fields(const cJSON *root, const char *file, qp_arch *a, qp_err *e) {
    int64_t v = 4;
    bool have, b;
    qp_status s = get_uint(root, "full_attention_interval", 4096, file, &v, &have, e);
    a->full_attn_interval = (int32_t)v;
    static const char *const keys[] = {"linear_conv_kernel_dim", "linear_key_head_dim",
                                       "linear_num_key_heads", "linear_num_value_heads",
                                       "linear_value_head_dim"};
    int64_t val[5] = {4, 128, 16, 32, 128}; /* Qwen3_5TextConfig's defaults */
    for (int i = 0; s == QP_OK && i < 5; i++) {
        s = get_uint(root, keys[i], 1 << 16, file, &v, &have, e);
        if (s == QP_OK && have) val[i] = v;
    }
    a->ssm_conv_kernel = val[0];
    a->ssm_state_size = val[1];
    a->ssm_group_count = val[2];
    a->ssm_time_step_rank = val[3];
    a->ssm_inner_size = val[3] * val[4];
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    int l = 0;
    for (const cJSON *x = cJSON_IsArray(lt) ? lt->child : NULL; s == QP_OK && x; x = x->next, l++) {
        const char *want = (l + 1) % a->full_attn_interval == 0 ? "full_attention" : "linear_attention";
        if (!cJSON_IsString(x) || strcmp(x->valuestring, want) != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: layer_types[%d] is not '%s': only every "
                        "full_attention_interval-th layer (%d) full (llama.cpp's qwen35 pattern) is "
                        "supported", file, l, want, (int)a->full_attn_interval);
    }
    if (s == QP_OK) s = get_bool(root, "attn_output_gate", file, &b, &have, e);
    if (s == QP_OK && have && !b)
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: attn_output_gate false is not implemented (Qwen3.5 "
                    "gates every full-attention output)", file);
    double d = 0.25;
    if (s == QP_OK) s = qwen35_rope_key(root, "partial_rotary_factor", file, &d, &have, e);
    if (s == QP_OK && !(d > 0 && d <= 1))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: partial_rotary_factor %g is not in (0, 1]", file, d);
    a->rope_dims = (int64_t)((double)a->head_dim * d);
    if (s == QP_OK) s = qwen35_rope_key(root, "rope_theta", file, &d, &have, e);
    if (s == QP_OK && have) a->rope_theta = d > 0 ? (float)d : a->rope_theta;
    a->qk_norm = true;
    a->norm_plus_one = true;
    a->ssm_a_log = true;
    return s;
}

/* A number of rope_scaling that must be finite and above min (or at least min when equal_ok). */
static bool rope_number(const cJSON *rs, const char *key, double min, bool equal_ok, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(rs, key);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) return false;
    *out = it->valuedouble;
    return *out > min || (equal_ok && *out == min);
}

/* Llama 3.1's {"rope_type": "llama3", factor >= 1, low_freq_factor > 0, high_freq_factor >
 * low_freq_factor, original_max_position_embeddings a positive integer} into arch.rope_llama3. */
static qp_status llama3_rope_scaling(qp_model *m, const cJSON *rs, const char *file, qp_err *e) {
    qp_rope_llama3 r = {0};
    double orig = 0.0;
    const char *bad = !rope_number(rs, "factor", 1.0, true, &r.factor) ? "factor"
                      : !rope_number(rs, "low_freq_factor", 0.0, false, &r.low_freq_factor) ? "low_freq_factor"
                      : !rope_number(rs, "high_freq_factor", r.low_freq_factor, false, &r.high_freq_factor)
                          ? "high_freq_factor"
                      : !rope_number(rs, "original_max_position_embeddings", 0.0, false, &orig) ||
                              orig != floor(orig) || orig > 1e12
                          ? "original_max_position_embeddings"
                          : NULL;
    if (bad)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: rope_scaling (llama3): '%s' is missing or out of range "
                       "(factor >= 1, 0 < low_freq_factor < high_freq_factor, "
                       "original_max_position_embeddings a positive integer)", file, bad);
    r.orig_max_pos = (int64_t)orig;
    m->arch.rope_llama3 = r;
    return QP_OK;
}

/* rope_scaling: Gemma 3's linear scaling of its global layers (rope_type or type "linear",
 * factor); Llama 3.1's "llama3" for Llama / Mistral (llama.cpp's LlamaModel writes it as
 * rope_freqs.weight); any other kept as metadata, and qp_model_check refuses it for Gemma. */
static qp_status rope_scaling_field(qp_model *m, const cJSON *root, const char *file, qp_err *e) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return QP_OK;
    const char *type = get_str(rs, "rope_type");
    if (!type) type = get_str(rs, "type");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factor");
    if (m->arch.family == QP_FAMILY_GEMMA3 && type && strcmp(type, "linear") == 0 &&
        cJSON_IsNumber(f) && f->valuedouble >= 1.0 && isfinite(f->valuedouble)) {
        m->arch.rope_freq_scale = (float)(1.0 / f->valuedouble);
        return QP_OK;
    }
    if ((m->arch.family == QP_FAMILY_LLAMA || m->arch.family == QP_FAMILY_MISTRAL) && type &&
        strcmp(type, "llama3") == 0)
        return llama3_rope_scaling(m, rs, file, e);
    qp_model_add_problem(m, "%s: rope_scaling is set; it is kept as metadata but not applied", file);
    return QP_OK;
}

/* transformers' Gemma3TextConfig defaults (configuration_gemma3.py): what a
 * Gemma3ForConditionalGeneration's text_config leaves out. */
static const char k_gemma3_text_defaults[] =
    "{\"model_type\": \"gemma3_text\", \"vocab_size\": 262208, \"hidden_size\": 2304, "
    "\"intermediate_size\": 9216, \"num_hidden_layers\": 26, \"num_attention_heads\": 8, "
    "\"num_key_value_heads\": 4, \"head_dim\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\", "
    "\"max_position_embeddings\": 131072, \"initializer_range\": 0.02, \"rms_norm_eps\": 1e-6, "
    "\"use_cache\": true, \"pad_token_id\": 0, \"eos_token_id\": 1, \"bos_token_id\": 2, "
    "\"tie_word_embeddings\": true, \"rope_theta\": 1000000.0, \"attention_bias\": false, "
    "\"attention_dropout\": 0.0, \"query_pre_attn_scalar\": 256, \"sliding_window\": 4096, "
    "\"final_logit_softcapping\": null, \"attn_logit_softcapping\": null, "
    "\"rope_scaling\": null, \"rope_local_base_freq\": 10000.0, \"sliding_window_pattern\": 6}";

/* A multimodal checkpoint's config.json (Gemma3ForConditionalGeneration,
 * Qwen3_5ForConditionalGeneration) as the configuration of its text model, merged as llama.cpp's
 * converter merges it ({**config, **text_config}) over the text config's defaults (Gemma3TextConfig's;
 * none for Qwen3.5, whose defaults qwen35_fields applies): the top-level keys (architectures,
 * torch_dtype, tie_word_embeddings, the bos/eos ids) but vision_config, then text_config's. *out is
 * a new object (the caller deletes it). */
static qp_status text_model_view(const cJSON *root, const char *defaults, const char *file, cJSON **out,
                                 qp_err *e) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (tc && !cJSON_IsNull(tc) && !cJSON_IsObject(tc))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: 'text_config' is not an object", file);
    qp_status s = tc ? qp_json_unique_keys(tc, file, "text_config", e) : QP_OK;
    if (s != QP_OK) return s;
    cJSON *view = cJSON_Parse(defaults);
    if (!view) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    static const char *const k_sub_configs[] = {"text_config", "vision_config", NULL};
    if (!qp_json_overlay(view, root, false, k_sub_configs) || (cJSON_IsObject(tc) && !qp_json_overlay(view, tc, false, NULL))) {
        cJSON_Delete(view);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    }
    *out = view;
    return QP_OK;
}

/* The multimodal wrappers read as their text model, and that text config's defaults. */
static const struct {
    const char *hf_arch, *model_type, *defaults;
} k_multimodal[] = {
    {"Gemma3ForConditionalGeneration", "gemma3", k_gemma3_text_defaults},
    {"Qwen3_5ForConditionalGeneration", "qwen3_5", "{}"},
};

/* The defaults of the text config when arch0 (else model_type) names a multimodal wrapper, else NULL. */
static const char *multimodal_defaults(const char *arch0, const char *model_type) {
    for (size_t i = 0; i < sizeof k_multimodal / sizeof k_multimodal[0]; i++)
        if (arch0 ? strcmp(arch0, k_multimodal[i].hf_arch) == 0
                  : model_type && strcmp(model_type, k_multimodal[i].model_type) == 0)
            return k_multimodal[i].defaults;
    return NULL;
}

qp_status qp_hf_config_parse(qp_model *m, const char *text, size_t len, const char *file, qp_err *e) {
    cJSON *root, *top = NULL;
    qp_status s = parse_json(text, len, file, &root, e);
    if (s != QP_OK) return s;
    s = qp_json_unique_keys(root, file, "the top-level object", e);
    const cJSON *archs0 = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const char *mm_defaults = multimodal_defaults(
        cJSON_IsArray(archs0) && cJSON_IsString(archs0->child) ? archs0->child->valuestring : NULL,
        get_str(root, "model_type"));
    if (s == QP_OK && mm_defaults) {
        top = root;
        s = text_model_view(top, mm_defaults, file, &root, e);
        if (s != QP_OK) root = top, top = NULL;
    }
    qp_arch *a = &m->arch;
    const char *arch0 = NULL, *model_type = get_str(root, "model_type");
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (cJSON_IsArray(archs) && cJSON_IsString(archs->child)) arch0 = archs->child->valuestring;
    else if (archs && !cJSON_IsNull(archs) && s == QP_OK)
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: 'architectures' is not a list of strings", file);

    int fam = -1;
    for (size_t i = 0; i < N_FAMILIES && arch0; i++)
        if (strcmp(arch0, k_families[i].hf_arch) == 0) fam = (int)i;
    for (size_t i = 0; i < N_FAMILIES && fam < 0 && !arch0 && model_type; i++)
        if (strcmp(model_type, k_families[i].model_type) == 0) fam = (int)i;
    if (s == QP_OK) {
        if (fam >= 0) {
            a->family = k_families[fam].family;
            m->arch_name = k_families[fam].arch_name;
        } else {
            a->family = QP_FAMILY_UNKNOWN;
            const char *nm = model_type ? model_type : arch0;
            m->arch_name = nm ? qp_arena_strdup(qp_model_arena(m), nm) : NULL;
            if (nm && !m->arch_name) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
            qp_model_add_problem(m, "%s: architecture '%s' is not one quantpack maps (Llama, Mistral, "
                                    "Qwen2, Qwen3, Qwen3.5 dense, Phi-3, Gemma 1/2/3, BitNet); read as family unknown", file,
                                 arch0 ? arch0 : model_type ? model_type : "(none given)");
        }
    }

    int64_t v;
    bool have;
#define UINT_FIELD(KEY, MAX, DST)                                                                \
    if (s == QP_OK) {                                                                            \
        s = get_uint(root, KEY, MAX, file, &v, &have, e);                                        \
        if (s == QP_OK && have) DST = v;                                                         \
    }
    UINT_FIELD("hidden_size", (int64_t)1 << 20, a->hidden)
    UINT_FIELD("intermediate_size", (int64_t)1 << 22, a->intermediate)
    UINT_FIELD("num_hidden_layers", 4096, a->n_layers)
    UINT_FIELD("num_attention_heads", 4096, a->n_heads)
    UINT_FIELD("vocab_size", QP_HF_MAX_TOKENS, a->vocab)
    UINT_FIELD("max_position_embeddings", INT32_MAX, a->max_pos)
    a->n_kv_heads = a->n_heads;
    UINT_FIELD("num_key_value_heads", 4096, a->n_kv_heads)
    if (a->n_heads > 0 && a->hidden % a->n_heads == 0) a->head_dim = a->hidden / a->n_heads;
    UINT_FIELD("head_dim", (int64_t)1 << 16, a->head_dim)
#undef UINT_FIELD
    if (s == QP_OK && a->n_kv_heads > 0 && a->n_heads % a->n_kv_heads != 0)
        qp_model_add_problem(m, "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                             file, (long long)a->n_heads, (long long)a->n_kv_heads);
    if (s == QP_OK && a->n_heads > 0 && a->hidden % a->n_heads != 0 &&
        !cJSON_GetObjectItemCaseSensitive(root, "head_dim"))
        qp_model_add_problem(m, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld",
                             file, (long long)a->hidden, (long long)a->n_heads);

    double d;
    a->rope_theta = 10000.0f;
    if (s == QP_OK) s = get_float(root, "rms_norm_eps", file, &d, &have, e);
    if (s == QP_OK && have) {
        if (d < 0) s = qp_fail(e, QP_ERR_CORRUPT, "%s: 'rms_norm_eps' is negative", file);
        a->norm_eps = (float)d;
    }
    if (s == QP_OK) s = get_float(root, "rope_theta", file, &d, &have, e);
    if (s == QP_OK && have) {
        if (!(d > 0)) s = qp_fail(e, QP_ERR_CORRUPT, "%s: 'rope_theta' is not positive", file);
        a->rope_theta = (float)d;
    }
    a->rope_style = QP_ROPE_NEOX;
    bool b;
    if (s == QP_OK) s = get_bool(root, "tie_word_embeddings", file, &b, &have, e);
    if (s == QP_OK) a->tie_embeddings = have ? b : false;
    a->qkv_bias = a->family == QP_FAMILY_QWEN2;
    if (s == QP_OK) s = get_bool(root, "attention_bias", file, &b, &have, e);
    if (s == QP_OK && have && b) a->qkv_bias = true;
    a->sub_norms = a->family == QP_FAMILY_BITNET;
    a->qk_norm = a->family == QP_FAMILY_QWEN3; /* Qwen3Attention's q_norm / k_norm */
    /* Phi-3's sliding_window (every layer; null: none) */
    if (s == QP_OK && a->family == QP_FAMILY_PHI3) {
        s = get_uint(root, "sliding_window", INT32_MAX, file, &v, &have, e);
        if (s == QP_OK && have) a->sliding_window = v;
        a->swa_pattern = 1;
    }
    a->act = QP_ACT_SILU;
    const char *act = get_str(root, "hidden_act");
    if (!act) act = get_str(root, "hidden_activation");
    if (act) {
        if (strcmp(act, "relu2") == 0) a->act = QP_ACT_RELU2;
        else if (strncmp(act, "gelu", 4) == 0) a->act = QP_ACT_GELU;
        else if (strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0)
            qp_model_add_problem(m, "%s: hidden_act '%.40s' is not handled; assuming silu", file, act);
    } else if (a->family == QP_FAMILY_BITNET) {
        a->act = QP_ACT_RELU2;
    }
    /* BitLinear quantizes every projection's input to int8 per token (transformers' BitNet
       integration, 1bitLLM's modeling code); the GGUF name follows the activation
       (readers/gguf.md "BitNet architectures") */
    a->act_int8 = a->family == QP_FAMILY_BITNET;
    if (a->family == QP_FAMILY_BITNET)
        m->arch_name = a->act == QP_ACT_SILU ? "bitnet" : "bitnet-b1.58";
    if (s == QP_OK)
        s = moe_fields(root, fam >= 0 && strcmp(k_families[fam].hf_arch, "MixtralForCausalLM") == 0,
                       file, a, e);
    if (s == QP_OK && qp_family_is_gemma(a->family)) s = gemma_fields(root, file, a, e);
    if (s == QP_OK && a->family == QP_FAMILY_QWEN35) s = qwen35_fields(root, file, a, e);
    if (s == QP_OK) s = token_id_field(m, root, "bos_token_id", file, &a->bos_id, e);
    if (s == QP_OK) s = token_id_field(m, root, "eos_token_id", file, &a->eos_id, e);
    if (s == QP_OK) s = rope_scaling_field(m, root, file, e);
    if (s == QP_OK) s = config_meta(m, root, file, e);
    cJSON_Delete(root);
    cJSON_Delete(top);
    return s;
}

qp_status qp_hf_config_read(qp_model *m, const char *path, qp_err *e) {
    char *text = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(path, QP_HF_JSON_MAX_BYTES, &text, &len, e);
    if (s != QP_OK) return s;
    s = qp_hf_config_parse(m, text, len, path, e);
    qp_free(text);
    return s;
}

/* ---- tokenizer.json ----------------------------------------------------------------------- */

typedef struct tok_build {
    qp_model *m;
    const char *file;
    qp_arena *arena;
    /* parts of tokenizer.json (borrowed from its parse) */
    const cJSON *model, *vocab, *merges, *added; /* added: NULL when absent or null */
    const char *unk_text;                        /* model.unk_token */
    bool wordpiece, spm, unigram;                /* else byte-level BPE */
    /* the table being built (arena arrays) */
    int64_t n;
    char **tokens;
    uint32_t *lens;
    int32_t *types;
    uint8_t *added_flags; /* QP_ADDED_* per id; NULL until an added token has one */
    float *scores;  /* SentencePiece-style BPE and unigram only */
    qp_strmap ids;  /* token text -> id; keys are the arena copies */
} tok_build;

/* The byte-level pre-tokenizers a tokenizer.json's pre_tokenizer describes, as llama.cpp names
 * them: each form is the sequence of splitting steps of the pre_tokenizer (Split regexes as the
 * published tokenizer.json files write them, Digits as \p{N} or \p{N}+, ByteLevel with use_regex
 * as its built-in GPT-2 regex), with model.ignore_merges where that tells two names apart.
 * qp_hf_pre_regex (the tokenizer.json writer) and tok_kind (this reader) share the table; the
 * runtime's regexes for each name are in runtime/tokenizer_pre.c. */
#define GPT2_REGEX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define HF_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define HF_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define LLAMA3_REGEX(digits) HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" digits HF_TAIL
#define HF_CASED(tail)                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" tail         \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" tail
#define HF_SLASH_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define HF_CJK "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"

typedef struct hf_pre_form {
    const char *pre;      /* llama.cpp's name (tokenizer.ggml.pre) */
    int ignore_merges;    /* the model.ignore_merges this form needs: 1, 0, or -1 for either */
    const char *steps[7]; /* NULL-terminated */
    const char *aliases;  /* other names with this form, ',' around each (the writer's lookup) */
} hf_pre_form;

static const hf_pre_form k_pre_forms[] = {
    {"llama-bpe", 1, {LLAMA3_REGEX("{1,3}")},
     ",llama3,llama-v3,falcon3,falcon-h1,pixtral,midm-2.0,lfm2,jina-v5-nano,"},
    {"smaug-bpe", 0, {LLAMA3_REGEX("{1,3}")}, ",dbrx,glm4,chatglm-bpe,"},
    {"qwen2", -1, {LLAMA3_REGEX("")},
     ",deepseek-r1-qwen,kormo,f2llmv2,stablelm2,hunyuan,solar-open,megrez,grok-2,"},
    {"gpt-2", -1, {GPT2_REGEX},
     ",gpt2,phi-2,jina-es,jina-de,gigachat,jina-v2-es,jina-v2-de,a.x-4.0,mellum,modern-bert,jina-v1-en,"
     "jina-v2-code,roberta-bpe,mpt,olmo,jais,trillion,granite-docling,exaone4,"},
    {"starcoder", -1, {"\\p{N}", GPT2_REGEX},
     ",refact,command-r,smollm,codeshell,exaone,minerva-7b,mellum2,"},
    {"deepseek-coder", -1, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", HF_CJK, "\\p{N}"}, ","},
    {"deepseek-llm", -1,
     {"[\r\n]",
      "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
      "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
      "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
      "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
      "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
      "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"
      "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
      "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"
      "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
      "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
      "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
      "\U0001E900-\U0001E943]+",
      "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$", HF_CJK, "\\p{N}+"},
     ","},
    {"deepseek-v3", -1,
     {"\\p{N}{1,3}", "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}"
      "\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     ",hunyuan-dense,joyai-llm,hy_v4,"},
    {"tekken", 1, {HF_CASED("") "|\\p{N}" HF_SLASH_TAIL}, ","},
    {"gpt-4o", -1, {HF_CASED(HF_CONTRACTIONS "?") "|\\p{N}{1,3}" HF_SLASH_TAIL},
     ",llama4,kanana2,talkie,minimax-m2,"},
    {"tiny_aya", -1, {"\\d{1,3}(?=(?:\\d{3})*\\b)", HF_CASED(HF_CONTRACTIONS "?") "|\\p{N}{1,3}" HF_SLASH_TAIL},
     ",cohere2moe,"},
    {"qwen35", -1,
     {HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     ","},
    {"jais-2", -1,
     {HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                      "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|"
                      "\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"},
     ","},
    {"bailingmoe", -1,
     {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|"
      "\\s+(?!\\S)|\\s+"},
     ",bailingmoe2,llada-moe,"},
    {"seed-coder", -1,
     {HF_CONTRACTIONS "|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     ","},
    {"exaone-moe", -1,
     {HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                      "[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     ","},
    {"minicpm5", 1, {"\\p{N}{1,3}", HF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+" HF_TAIL}, ","},
};

const char *qp_hf_pre_regex(const char *pre, bool *ignore_merges) {
    char key[64];
    snprintf(key, sizeof key, ",%s,", pre ? pre : "");
    for (size_t i = 0; i < sizeof k_pre_forms / sizeof k_pre_forms[0]; i++) {
        const hf_pre_form *f = &k_pre_forms[i];
        if (strcmp(pre ? pre : "", f->pre) != 0 && !strstr(f->aliases, key)) continue;
        if (f->steps[1]) return NULL; /* several steps: no single-regex form */
        *ignore_merges = f->ignore_merges == 1;
        return f->steps[0];
    }
    return NULL;
}

/* The pre_tokenizer's splitting steps in order (see k_pre_forms); false when a component is one
 * no byte-level form has (Whitespace, Metaspace, Split on a string, ...). */
typedef struct pre_steps {
    const char *step[8];
    int n;
    bool known;
} pre_steps;

static void collect_steps(const cJSON *c, pre_steps *ps, int depth) {
    const char *type = cJSON_IsObject(c) && depth < 8 ? get_str(c, "type") : NULL;
    if (!type) {
        ps->known = false;
        return;
    }
    const char *step = NULL;
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, "pretokenizers");
        for (const cJSON *x = cJSON_IsArray(arr) ? arr->child : NULL; x; x = x->next) collect_steps(x, ps, depth + 1);
        return;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        const cJSON *ur = cJSON_GetObjectItemCaseSensitive(c, "use_regex");
        if (ur && !cJSON_IsTrue(ur)) return;
        step = GPT2_REGEX;
    } else if (strcmp(type, "Digits") == 0) {
        step = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "individual_digits")) ? "\\p{N}" : "\\p{N}+";
    } else if (strcmp(type, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(c, "pattern");
        step = cJSON_IsObject(pat) ? get_str(pat, "Regex") : NULL;
    }
    if (!step || ps->n == 8) ps->known = false;
    else ps->step[ps->n++] = step;
}

/* llama.cpp's name for a byte-level pre_tokenizer, or NULL when no form matches. */
static const char *pre_name_of(const cJSON *pre_tokenizer, bool ignore_merges) {
    pre_steps ps = {.known = true};
    collect_steps(pre_tokenizer, &ps, 0);
    for (size_t i = 0; ps.known && i < sizeof k_pre_forms / sizeof k_pre_forms[0]; i++) {
        const hf_pre_form *f = &k_pre_forms[i];
        if (f->ignore_merges >= 0 && f->ignore_merges != (int)ignore_merges) continue;
        int k = 0;
        while (k < ps.n && f->steps[k] && strcmp(f->steps[k], ps.step[k]) == 0) k++;
        if (k == ps.n && !f->steps[k]) return f->pre;
    }
    return NULL;
}

typedef struct tok_hints {
    bool byte_level, metaspace, byte_fallback_decoder;
    const char *regex; /* first Split pattern.Regex found */
} tok_hints;

/* Walks a pre_tokenizer / decoder / normalizer value (single or Sequence). */
static void scan_component(const cJSON *c, tok_hints *h, int depth) {
    if (!cJSON_IsObject(c) || depth > 8) return;
    const char *type = get_str(c, "type");
    if (!type) return;
    if (strcmp(type, "Sequence") == 0) {
        static const char *const lists[] = {"pretokenizers", "decoders", "normalizers", "processors"};
        for (size_t i = 0; i < 4; i++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, lists[i]);
            if (!cJSON_IsArray(arr)) continue;
            for (const cJSON *x = arr->child; x; x = x->next) scan_component(x, h, depth + 1);
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        h->byte_level = true;
    } else if (strcmp(type, "Metaspace") == 0) {
        h->metaspace = true;
    } else if (strcmp(type, "ByteFallback") == 0) {
        h->byte_fallback_decoder = true;
    } else if (strcmp(type, "Split") == 0 && !h->regex) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(c, "pattern");
        const char *re = cJSON_IsObject(pat) ? get_str(pat, "Regex") : NULL;
        if (re) h->regex = re;
    }
}

static bool is_byte_token(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    return n == 6 && memcmp(s, "<0x", 3) == 0 && strchr(hex, s[3]) && s[3] && strchr(hex, s[4]) &&
           s[4] && s[5] == '>';
}

/* Added tokens llama.cpp's converter treats as control even when not marked special. */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
    return (n >= 4 && memcmp(t, "<|", 2) == 0 && memcmp(t + n - 2, "|>", 2) == 0) ||
           strcmp(t, "<pad>") == 0 || strcmp(t, "<mask>") == 0 ||
           (n > 8 && memcmp(t, "<unused", 7) == 0 && t[n - 1] == '>');
}

static qp_status tok_id(const cJSON *idv, const char *file, const char *what, const char *tok,
                        int64_t *out, qp_err *e) {
    if (qp_json_int(idv, 0, QP_HF_MAX_TOKENS - 1, out)) return QP_OK;
    if (!cJSON_IsNumber(idv))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %s token '%.80s' has no integer id", file, what, tok);
    double d = idv->valuedouble;
    if (d >= (double)QP_HF_MAX_TOKENS && d == floor(d))
        return qp_fail(e, QP_ERR_LIMIT, "%s: %s token '%.80s' has id %.0f (limit %lld)", file, what, tok,
                       d, (long long)QP_HF_MAX_TOKENS);
    return qp_fail(e, QP_ERR_CORRUPT, "%s: %s token '%.80s' has an invalid id %g", file, what, tok, d);
}

static qp_status set_token(tok_build *tb, int64_t id, const char *text, int32_t type, qp_err *e) {
    size_t n = strlen(text);
    if (n > UINT32_MAX) return qp_fail(e, QP_ERR_LIMIT, "%s: token %lld too long", tb->file, (long long)id);
    char *c = qp_arena_strndup(tb->arena, text, n);
    if (!c) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
    tb->tokens[id] = c;
    tb->lens[id] = (uint32_t)n;
    tb->types[id] = type;
    return QP_OK;
}

/* tokenizer_config.json special token: "text" or {"content": "text", ...}. */
static const char *special_text(const cJSON *cfg, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(it)) return it->valuestring;
    if (cJSON_IsObject(it)) return get_str(it, "content");
    return NULL;
}

static int32_t lookup_id(const tok_build *tb, const char *text) {
    int64_t id;
    if (!text || !qp_strmap_get(&tb->ids, text, strlen(text), &id)) return -1;
    return (int32_t)id;
}

/* TemplateProcessing whose "single" template starts with a special token: the tokenizer adds a
 * BOS. Returns that token's text or NULL. */
static const char *template_bos(const cJSON *pp, int depth) {
    if (!cJSON_IsObject(pp) || depth > 4) return NULL;
    const char *type = get_str(pp, "type");
    if (!type) return NULL;
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        for (const cJSON *x = cJSON_IsArray(arr) ? arr->child : NULL; x; x = x->next) {
            const char *r = template_bos(x, depth + 1);
            if (r) return r;
        }
        return NULL;
    }
    if (strcmp(type, "TemplateProcessing") != 0) return NULL;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *first = cJSON_IsArray(single) ? single->child : NULL;
    const cJSON *sp = cJSON_IsObject(first) ? cJSON_GetObjectItemCaseSensitive(first, "SpecialToken") : NULL;
    return cJSON_IsObject(sp) ? get_str(sp, "id") : NULL;
}

static qp_status read_merges(tok_build *tb, const cJSON *merges, bool spm, float *scores, qp_err *e) {
    qp_model *m = tb->m;
    qp_vocab *v = &m->vocab;
    if (!merges || cJSON_IsNull(merges)) return QP_OK;
    if (!cJSON_IsArray(merges)) return qp_fail(e, QP_ERR_CORRUPT, "%s: model.merges is not a list", tb->file);
    int64_t n = cJSON_GetArraySize(merges);
    if (n > QP_HF_MAX_MERGES)
        return qp_fail(e, QP_ERR_LIMIT, "%s: %lld merges (limit %lld)", tb->file, (long long)n,
                       (long long)QP_HF_MAX_MERGES);
    v->merges = qp_arena_alloc(tb->arena, (size_t)(n ? n : 1) * sizeof(char *));
    if (!v->merges) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
    int64_t r = 0, not_in_vocab = 0;
    char *joined = NULL;
    size_t joined_cap = 0;
    qp_status s = QP_OK;
    for (const cJSON *x = merges->child; x; x = x->next, r++) {
        const char *left, *right;
        size_t ll, rl;
        if (cJSON_IsString(x)) {
            const char *sp = strchr(x->valuestring, ' ');
            if (!sp || sp == x->valuestring || !sp[1] || strchr(sp + 1, ' ')) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: merge %lld ('%.80s') is not \"left right\"",
                            tb->file, (long long)r, x->valuestring);
                break;
            }
            left = x->valuestring;
            ll = (size_t)(sp - left);
            right = sp + 1;
            rl = strlen(right);
        } else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2 && cJSON_IsString(x->child) &&
                   cJSON_IsString(x->child->next)) {
            left = x->child->valuestring;
            ll = strlen(left);
            right = x->child->next->valuestring;
            rl = strlen(right);
        } else {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: merge %lld is neither \"left right\" nor [left, right]",
                        tb->file, (long long)r);
            break;
        }
        size_t need = ll + rl + 2;
        if (need > joined_cap) {
            char *nb = qp_realloc(joined, need * 2);
            if (!nb) {
                s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
                break;
            }
            joined = nb;
            joined_cap = need * 2;
        }
        memcpy(joined, left, ll);
        joined[ll] = ' ';
        memcpy(joined + ll + 1, right, rl);
        joined[ll + 1 + rl] = '\0';
        v->merges[r] = qp_arena_strndup(tb->arena, joined, ll + 1 + rl);
        if (!v->merges[r]) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
            break;
        }
        /* the token this merge produces: left + right */
        memmove(joined + ll, joined + ll + 1, rl + 1);
        int64_t id;
        if (qp_strmap_get(&tb->ids, joined, ll + rl, &id)) {
            if (spm && scores && scores[id] == 1.0f) scores[id] = -(float)r;
        } else {
            not_in_vocab++;
        }
    }
    qp_free(joined);
    if (s != QP_OK) return s;
    v->n_merges = n;
    if (not_in_vocab)
        qp_model_add_problem(m, "%s: %lld merges produce a token missing from the vocabulary", tb->file,
                             (long long)not_in_vocab);
    return QP_OK;
}

/* The parts of tokenizer.json: model (BPE or WordPiece) with its vocab and merges, added_tokens. */
static qp_status tok_sections(tok_build *tb, const cJSON *root, qp_err *e) {
    const char *file = tb->file;
    qp_status s = qp_json_unique_keys(root, file, "the top-level object", e);
    if (s != QP_OK) return s;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: 'model' is missing or not an object", file);
    if ((s = qp_json_unique_keys(model, file, "'model'", e)) != QP_OK) return s;
    const char *type = get_str(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!type) type = merges ? "BPE" : "(none)";
    bool wordpiece = strcmp(type, "WordPiece") == 0, unigram = strcmp(type, "Unigram") == 0;
    if (strcmp(type, "BPE") != 0 && !wordpiece && !unigram)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tokenizer model type '%.40s' is not handled (BPE, "
                                              "WordPiece and Unigram are)", file, type);
    if (unigram ? !cJSON_IsArray(vocab) : !cJSON_IsObject(vocab))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: model.vocab is missing or not %s", file,
                       unigram ? "a list of [piece, score]" : "an object");
    if (!unigram && (s = qp_json_unique_keys(vocab, file, "model.vocab", e)) != QP_OK) return s;
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: 'added_tokens' is not a list", file);
    tb->model = model;
    tb->vocab = vocab;
    tb->merges = merges;
    tb->added = cJSON_IsArray(added) ? added : NULL;
    tb->wordpiece = wordpiece;
    tb->unigram = unigram;
    tb->unk_text = get_str(model, "unk_token");
    return QP_OK;
}

/* Whether a SentencePiece-style tokenizer.json adds the dummy-prefix space: a Prepend("▁")
 * normalizer, or a Metaspace pre-tokenizer whose prepend_scheme is not "never" (add_prefix_space,
 * default true, in older files). Gemma 3 has neither. */
static bool spm_space_prefix(const cJSON *c, int depth) {
    const char *type = cJSON_IsObject(c) && depth < 8 ? get_str(c, "type") : NULL;
    if (!type) return false;
    if (strcmp(type, "Sequence") == 0) {
        static const char *const lists[] = {"normalizers", "pretokenizers"};
        for (size_t i = 0; i < 2; i++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, lists[i]);
            for (const cJSON *x = cJSON_IsArray(arr) ? arr->child : NULL; x; x = x->next)
                if (spm_space_prefix(x, depth + 1)) return true;
        }
        return false;
    }
    if (strcmp(type, "Prepend") == 0) {
        const char *p = get_str(c, "prepend");
        return p && strcmp(p, "\u2581") == 0;
    }
    if (strcmp(type, "Metaspace") != 0) return false;
    const char *scheme = get_str(c, "prepend_scheme");
    if (scheme) return strcmp(scheme, "never") != 0;
    const cJSON *aps = cJSON_GetObjectItemCaseSensitive(c, "add_prefix_space");
    return !aps || cJSON_IsTrue(aps);
}

/* The first component of type `type` in a normalizer / pre_tokenizer (single or Sequence). */
static const cJSON *find_component(const cJSON *c, const char *type, int depth) {
    const char *t = cJSON_IsObject(c) && depth < 8 ? get_str(c, "type") : NULL;
    if (!t) return NULL;
    if (strcmp(t, type) == 0) return c;
    if (strcmp(t, "Sequence") != 0) return NULL;
    static const char *const lists[] = {"normalizers", "pretokenizers"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(c, lists[i]);
        for (const cJSON *x = cJSON_IsArray(arr) ? arr->child : NULL; x; x = x->next) {
            const cJSON *r = find_component(x, type, depth + 1);
            if (r) return r;
        }
    }
    return NULL;
}

/* A Precompiled normaliser's precompiled_charsmap (base64) into the vocabulary. */
static qp_status read_charsmap(tok_build *tb, const cJSON *pc, qp_err *e) {
    const char *b64 = get_str(pc, "precompiled_charsmap");
    if (!b64) return QP_OK; /* null: no map */
    size_t n = strlen(b64), len = 0;
    uint8_t *out = qp_arena_alloc(tb->arena, qp_base64_decoded_max(n));
    if (!out) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
    if (!qp_base64_decode(b64, n, out, &len))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: the Precompiled normalizer's precompiled_charsmap is not "
                                          "base64", tb->file);
    tb->m->vocab.charsmap = out;
    tb->m->vocab.charsmap_len = len;
    return QP_OK;
}

/* A Unigram model's options (runtime/tokenizer.md "SentencePiece unigram"): the dummy prefix from
 * Metaspace / Prepend("▁"), remove_extra_whitespaces from a WhitespaceSplit pre-tokenizer, the
 * charsmap of a Precompiled normalizer. */
static qp_status unigram_kind(tok_build *tb, const cJSON *root, qp_err *e) {
    qp_vocab *v = &tb->m->vocab;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    v->model = QP_TOK_UGM;
    snprintf(v->pre, sizeof v->pre, "default");
    v->no_space_prefix = !spm_space_prefix(norm, 0) && !spm_space_prefix(pre, 0);
    v->remove_extra_spaces = find_component(pre, "WhitespaceSplit", 0) != NULL;
    const cJSON *pc = find_component(norm, "Precompiled", 0);
    return pc ? read_charsmap(tb, pc, e) : QP_OK;
}

/* A NFC / NFD / NFKC / NFKD step of the normalizer (the first one found). */
static qp_norm_form norm_form(const cJSON *norm) {
    static const char *const k_forms[] = {[QP_NORM_NFC] = "NFC", [QP_NORM_NFD] = "NFD", [QP_NORM_NFKC] = "NFKC",
                                          [QP_NORM_NFKD] = "NFKD"};
    for (int f = QP_NORM_NFC; f <= QP_NORM_NFKD; f++)
        if (find_component(norm, k_forms[f], 0)) return (qp_norm_form)f;
    return QP_NORM_NONE;
}

/* The tokenizer kind (WordPiece, SentencePiece-style BPE with byte fallback, byte-level BPE)
 * and llama.cpp's pre-tokenizer name from the pre_tokenizer / decoder components. */
static qp_status tok_kind(tok_build *tb, const cJSON *root, qp_err *e) {
    qp_model *m = tb->m;
    qp_vocab *v = &m->vocab;
    tok_hints h = {0};
    bool byte_fallback = false, have;
    qp_status s = get_bool(tb->model, "byte_fallback", tb->file, &byte_fallback, &have, e);
    if (s != QP_OK) return s;
    scan_component(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &h, 0);
    scan_component(cJSON_GetObjectItemCaseSensitive(root, "decoder"), &h, 0);
    v->normalizer = norm_form(cJSON_GetObjectItemCaseSensitive(root, "normalizer"));
    if (tb->unigram) return unigram_kind(tb, root, e);
    bool wordpiece = tb->wordpiece;
    bool spm = !wordpiece && (byte_fallback || h.metaspace || h.byte_fallback_decoder);
    tb->spm = spm;
    v->model = wordpiece ? QP_TOK_WPM : spm ? QP_TOK_SPM : QP_TOK_BPE;
    snprintf(v->pre, sizeof v->pre, "default");
    if (spm)
        v->no_space_prefix = !spm_space_prefix(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0) &&
                             !spm_space_prefix(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0);
    if (!wordpiece && !spm && !h.byte_level)
        qp_model_add_problem(m, "%s: BPE without a ByteLevel or Metaspace component; read as "
                                "byte-level BPE", tb->file);
    if (!spm && !wordpiece) {
        bool ignore_merges = false;
        if ((s = get_bool(tb->model, "ignore_merges", tb->file, &ignore_merges, &have, e)) != QP_OK) return s;
        const char *name = pre_name_of(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), ignore_merges);
        if (name) snprintf(v->pre, sizeof v->pre, "%s", name);
        else
            qp_model_add_problem(m, "%s: a pre_tokenizer no llama.cpp pre-tokenizer matches; read as "
                                    "llama.cpp's 'default'", tb->file);
    }
    if (h.regex) return qp_model_meta_str(m, "tokenizer.hf.pre_regex", h.regex, strlen(h.regex), e);
    return QP_OK;
}

/* Checks every id of model.vocab and added_tokens; the largest decides the table size. */
static qp_status tok_alloc(tok_build *tb, qp_err *e) {
    const char *file = tb->file;
    int64_t max_id = tb->unigram ? (int64_t)cJSON_GetArraySize(tb->vocab) - 1 : -1, id;
    if (max_id >= QP_HF_MAX_TOKENS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: %lld pieces (limit %lld)", file, (long long)max_id + 1,
                       (long long)QP_HF_MAX_TOKENS);
    for (const cJSON *x = tb->unigram ? NULL : tb->vocab->child; x; x = x->next) {
        qp_status s = tok_id(x, file, "vocab", x->string ? x->string : "", &id, e);
        if (s != QP_OK) return s;
        if (id > max_id) max_id = id;
    }
    for (const cJSON *x = tb->added ? tb->added->child : NULL; x; x = x->next) {
        const char *content = cJSON_IsObject(x) ? get_str(x, "content") : NULL;
        if (!content)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: an added_tokens entry has no string 'content'", file);
        qp_status s = tok_id(cJSON_GetObjectItemCaseSensitive(x, "id"), file, "added", content, &id, e);
        if (s != QP_OK) return s;
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return qp_fail(e, QP_ERR_CORRUPT, "%s: the vocabulary is empty", file);
    tb->n = max_id + 1;
    size_t n = (size_t)tb->n;
    tb->tokens = qp_arena_alloc(tb->arena, n * sizeof(char *));
    tb->lens = qp_arena_alloc(tb->arena, n * sizeof(uint32_t));
    tb->types = qp_arena_alloc(tb->arena, n * sizeof(int32_t));
    if (tb->spm || tb->unigram) tb->scores = qp_arena_alloc(tb->arena, n * sizeof(float));
    if (!tb->tokens || !tb->lens || !tb->types || ((tb->spm || tb->unigram) && !tb->scores))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for %lld tokens", file, (long long)tb->n);
    return QP_OK;
}

/* Unigram model.vocab: [piece, score] per id; model.unk_id (null: none). */
static qp_status tok_fill_unigram(tok_build *tb, qp_err *e) {
    int64_t id = 0, unk = -1;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(tb->model, "unk_id");
    if (u && !cJSON_IsNull(u) && !qp_json_int(u, 0, tb->n - 1, &unk))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: model.unk_id is not an id of the vocabulary", tb->file);
    for (const cJSON *x = tb->vocab->child; x; x = x->next, id++) {
        const cJSON *piece = cJSON_IsArray(x) ? x->child : NULL, *score = piece ? piece->next : NULL;
        if (!cJSON_IsString(piece) || !cJSON_IsNumber(score) || score->next)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: model.vocab entry %lld is not [piece, score]", tb->file,
                           (long long)id);
        tb->scores[id] = (float)score->valuedouble;
        qp_status s = set_token(tb, id, piece->valuestring, id == unk ? QP_TOKTYPE_UNKNOWN : QP_TOKTYPE_NORMAL, e);
        if (s != QP_OK) return s;
    }
    tb->m->vocab.unk_id = (int32_t)unk;
    tb->unk_text = unk >= 0 ? tb->tokens[unk] : NULL;
    return QP_OK;
}

/* model.vocab entries (ids checked by tok_alloc): two texts on one id are refused. */
static qp_status tok_fill_vocab(tok_build *tb, qp_err *e) {
    if (tb->unigram) return tok_fill_unigram(tb, e);
    for (const cJSON *x = tb->vocab->child; x; x = x->next) {
        int64_t id = 0;
        qp_status s = tok_id(x, tb->file, "vocab", x->string, &id, e);
        if (s != QP_OK) return s;
        if (tb->tokens[id])
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tokens '%.80s' and '%.80s' share id %lld in "
                                              "model.vocab", tb->file, tb->tokens[id], x->string,
                           (long long)id);
        int32_t ty = QP_TOKTYPE_NORMAL;
        if (tb->spm && is_byte_token(x->string, strlen(x->string))) ty = QP_TOKTYPE_BYTE;
        if (tb->unk_text && strcmp(tb->unk_text, x->string) == 0) ty = QP_TOKTYPE_UNKNOWN;
        if ((s = set_token(tb, id, x->string, ty, e)) != QP_OK) return s;
    }
    return QP_OK;
}

/* HF AddedToken's lstrip / rstrip / single_word / normalized booleans of entry x into id's flags. */
static qp_status set_added_flags(tok_build *tb, const cJSON *x, int64_t id, qp_err *e) {
    static const struct { const char *key; uint8_t flag; } k_flags[] = {
        {"lstrip", QP_ADDED_LSTRIP}, {"rstrip", QP_ADDED_RSTRIP},
        {"single_word", QP_ADDED_SINGLE_WORD}, {"normalized", QP_ADDED_NORMALIZED}};
    uint8_t f = 0;
    for (size_t k = 0; k < sizeof k_flags / sizeof k_flags[0]; k++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, k_flags[k].key))) f |= k_flags[k].flag;
    /* HF's default: normalized unless special */
    if (!cJSON_GetObjectItemCaseSensitive(x, "normalized") && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "special")))
        f |= QP_ADDED_NORMALIZED;
    if (!f) return QP_OK;
    if (!tb->added_flags) {
        tb->added_flags = qp_arena_alloc(tb->arena, (size_t)tb->n);
        if (!tb->added_flags)
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for added-token flags", tb->file);
    }
    tb->added_flags[id] = f;
    return QP_OK;
}

/* added_tokens: their type always; their text where the id is new. An added token that gives a
 * model.vocab id different text is refused: HF keeps encoding with model.vocab's text and decodes
 * with the added one, a vocabulary holds one text per id, so the encoder would lose the model's
 * token (with every byte symbol replaced, text was dropped with exit 0). */
static qp_status tok_fill_added(tok_build *tb, qp_err *e) {
    for (const cJSON *x = tb->added ? tb->added->child : NULL; x; x = x->next) {
        const char *content = get_str(x, "content");
        int64_t id = 0;
        qp_status s = tok_id(cJSON_GetObjectItemCaseSensitive(x, "id"), tb->file, "added", content, &id, e);
        if (s != QP_OK) return s;
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "special")) ||
                       looks_special(content);
        int32_t ty = special ? QP_TOKTYPE_CONTROL : QP_TOKTYPE_USER_DEFINED;
        if ((s = set_added_flags(tb, x, id, e)) != QP_OK) return s;
        if (tb->tokens[id] && strcmp(tb->tokens[id], content) == 0) {
            tb->types[id] = ty; /* as llama.cpp: added_tokens decide the type, even of <unk> */
            continue;
        }
        if (tb->tokens[id])
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: added_tokens give id %lld, model.vocab's '%.80s', "
                           "to different text '%.80s'; such a vocabulary cannot be encoded as its "
                           "model does (refused)", tb->file, (long long)id, tb->tokens[id], content);
        if ((s = set_token(tb, id, content, ty, e)) != QP_OK) return s;
    }
    return QP_OK;
}

/* Ids without a token get "[PADn]"; then the text -> id index (the first id wins when an added
 * token repeats a text). */
static qp_status tok_fill_gaps(tok_build *tb, qp_err *e) {
    int64_t gaps = 0;
    for (int64_t i = 0; i < tb->n; i++) {
        if (tb->tokens[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%lld]", (long long)i);
        qp_status s = set_token(tb, i, pad, QP_TOKTYPE_UNUSED, e);
        if (s != QP_OK) return s;
        gaps++;
    }
    if (gaps)
        qp_model_add_problem(tb->m, "%s: %lld token ids have no token; filled with [PADn] placeholders",
                             tb->file, (long long)gaps);
    for (int64_t i = 0; i < tb->n; i++)
        if (qp_strmap_put(&tb->ids, tb->tokens[i], tb->lens[i], i, NULL) != QP_OK)
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tb->file);
    return QP_OK;
}

/* Merges (not for WordPiece) and, for SentencePiece-style BPE, scores: -rank for merge results,
 * 0 for single characters, bytes and specials, below every merge for the rest. */
static qp_status tok_merges_and_scores(tok_build *tb, qp_err *e) {
    float *scores = tb->scores;
    if (tb->unigram) return QP_OK; /* scores are the model's */
    /* 1.0 marks "not produced by a merge yet" (never a real -rank value) */
    for (int64_t i = 0; scores && i < tb->n; i++) scores[i] = 1.0f;
    if (!tb->wordpiece) {
        qp_status s = read_merges(tb, tb->merges, tb->spm, scores, e);
        if (s != QP_OK) return s;
    }
    if (!scores) return QP_OK;
    int64_t n_merges = tb->m->vocab.n_merges;
    float floor_score = -(float)(n_merges > 0 ? n_merges : 0);
    for (int64_t i = 0; i < tb->n; i++) {
        if (scores[i] != 1.0f) continue;
        /* single characters, bytes and specials never come from a merge: 0; other tokens no
         * merge can produce rank below every merge */
        unsigned lead = (unsigned char)tb->tokens[i][0];
        unsigned char_len = 1u + (lead >= 0xC0) + (lead >= 0xE0) + (lead >= 0xF0);
        bool one_char = tb->lens[i] > 0 && tb->lens[i] == char_len;
        scores[i] = one_char || tb->types[i] != QP_TOKTYPE_NORMAL ? 0.0f : floor_score;
    }
    return QP_OK;
}

/* The table into m->vocab, with unk and the BOS a TemplateProcessing post-processor adds. */
static void tok_publish(tok_build *tb, const cJSON *root) {
    qp_vocab *v = &tb->m->vocab;
    v->n_tokens = tb->n;
    v->tokens = tb->tokens;
    v->token_lens = tb->lens;
    v->types = tb->types;
    v->added_flags = tb->added_flags;
    v->scores = tb->scores;
    v->unk_id = lookup_id(tb, tb->unk_text);
    v->add_bos = tb->spm;
    v->add_eos = false;
    const char *bos = template_bos(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0);
    if (bos) {
        v->add_bos = true;
        v->bos_id = lookup_id(tb, bos);
    }
}

/* tokenizer_config.json "chat_template": a string, or a list of {name, template} whose "default"
 * (else first) entry is the template, as convert_hf_to_gguf.py picks it; kept as the metadata
 * string tokenizer.chat_template (qp_model_chat_template). Absent: nothing. */
static qp_status chat_template(qp_model *m, const cJSON *cfg, const char *file, qp_err *e) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsArray(c)) {
        const cJSON *pick = NULL, *it;
        cJSON_ArrayForEach(it, c) {
            const char *nm = cJSON_IsObject(it) ? get_str(it, "name") : NULL;
            if (!pick || (nm && strcmp(nm, "default") == 0)) pick = it;
        }
        c = cJSON_IsObject(pick) ? cJSON_GetObjectItemCaseSensitive(pick, "template") : NULL;
    }
    if (!c || cJSON_IsNull(c) || qp_model_chat_template(m)) return QP_OK;
    if (!cJSON_IsString(c)) {
        qp_model_add_problem(m, "%s: chat_template is not a string or a list of {name, template}; ignored", file);
        return QP_OK;
    }
    return qp_model_meta_str(m, "tokenizer.chat_template", c->valuestring, strlen(c->valuestring), e);
}

/* tokenizer_config.json: bos/eos/unk/pad tokens (marked control / unknown) and add_bos/add_eos. */
static qp_status tok_config(tok_build *tb, const char *text, size_t len, qp_err *e) {
    static const char k_cfg_name[] = "tokenizer_config.json";
    static const char *const keys[4] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    qp_vocab *v = &tb->m->vocab;
    cJSON *cfg;
    qp_status s = parse_json(text, len, k_cfg_name, &cfg, e);
    if (s != QP_OK) return s;
    s = qp_json_unique_keys(cfg, k_cfg_name, "the top-level object", e);
    int32_t *dst[4] = {&v->bos_id, &v->eos_id, &v->unk_id, &v->pad_id};
    for (int k = 0; k < 4 && s == QP_OK; k++) {
        const char *t = special_text(cfg, keys[k]);
        if (!t) continue;
        int32_t tid = lookup_id(tb, t);
        if (tid < 0) {
            qp_model_add_problem(tb->m, "%s: %s '%.60s' is not in the vocabulary", k_cfg_name,
                                 keys[k], t);
            continue;
        }
        *dst[k] = tid;
        if (tb->types[tid] == QP_TOKTYPE_NORMAL)
            tb->types[tid] = k == 2 ? QP_TOKTYPE_UNKNOWN : QP_TOKTYPE_CONTROL;
    }
    bool b, have;
    if (s == QP_OK) s = get_bool(cfg, "add_bos_token", k_cfg_name, &b, &have, e);
    if (s == QP_OK && have) v->add_bos = b;
    if (s == QP_OK) s = get_bool(cfg, "add_eos_token", k_cfg_name, &b, &have, e);
    if (s == QP_OK && have) v->add_eos = b;
    if (s == QP_OK) s = chat_template(tb->m, cfg, k_cfg_name, e);
    cJSON_Delete(cfg);
    return s;
}

qp_status qp_hf_tokenizer_parse(qp_model *m, const char *text, size_t len, const char *file,
                                const char *config_text, size_t config_len, qp_err *e) {
    qp_vocab *v = &m->vocab;
    cJSON *root;
    qp_status s = parse_json(text, len, file, &root, e);
    if (s != QP_OK) return s;
    tok_build tb = {.m = m, .file = file, .arena = qp_model_arena(m)};
    if ((s = tok_sections(&tb, root, e)) != QP_OK || (s = tok_kind(&tb, root, e)) != QP_OK ||
        (s = tok_alloc(&tb, e)) != QP_OK || (s = tok_fill_vocab(&tb, e)) != QP_OK ||
        (s = tok_fill_added(&tb, e)) != QP_OK || (s = tok_fill_gaps(&tb, e)) != QP_OK ||
        (s = tok_merges_and_scores(&tb, e)) != QP_OK)
        goto done;
    tok_publish(&tb, root);
    if (config_text && (s = tok_config(&tb, config_text, config_len, e)) != QP_OK) goto done;
    if (v->unk_id >= 0 && tb.types[v->unk_id] == QP_TOKTYPE_NORMAL)
        tb.types[v->unk_id] = QP_TOKTYPE_UNKNOWN;
    v->hf_json = qp_arena_strndup(tb.arena, text, len);
    v->hf_json_len = len;
    if (!v->hf_json) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
done:
    if (s != QP_OK) {
        /* leave no half-built vocabulary behind (arrays stay in the arena until close) */
        memset(v, 0, sizeof *v);
        v->bos_id = v->eos_id = v->unk_id = v->pad_id = -1;
    }
    qp_strmap_free(&tb.ids);
    cJSON_Delete(root);
    return s;
}

qp_status qp_hf_tokenizer_read(qp_model *m, const char *json_path, const char *config_path, qp_err *e) {
    char *text = NULL, *cfg = NULL;
    size_t len = 0, cfg_len = 0;
    qp_status s = qp_file_read_all(json_path, QP_HF_JSON_MAX_BYTES, &text, &len, e);
    if (s == QP_OK && config_path && qp_path_exists(config_path))
        s = qp_file_read_all(config_path, QP_HF_JSON_MAX_BYTES, &cfg, &cfg_len, e);
    if (s == QP_OK) s = qp_hf_tokenizer_parse(m, text, len, json_path, cfg, cfg_len, e);
    qp_free(text);
    qp_free(cfg);
    return s;
}

qp_status qp_hf_chat_template_read(qp_model *m, const char *config_path, qp_err *e) {
    if (qp_model_chat_template(m) || !config_path || !qp_path_exists(config_path)) return QP_OK;
    char *text = NULL;
    size_t len = 0;
    qp_err le = {0};
    qp_status s = qp_file_read_all(config_path, QP_HF_JSON_MAX_BYTES, &text, &len, &le);
    cJSON *cfg = s == QP_OK ? cJSON_ParseWithLength(text, len) : NULL;
    qp_free(text);
    if (s == QP_ERR_NOMEM) return qp_fail(e, s, "%s", le.msg);
    if (!cfg) {
        qp_model_add_problem(m, "%s: not readable JSON; no chat template", config_path);
        return QP_OK;
    }
    s = chat_template(m, cfg, config_path, e);
    cJSON_Delete(cfg);
    return s;
}

bool qp_hf_folder_of_file(const char *path, char **dir) {
    if (dir) *dir = NULL;
    if (qp_path_is_dir(path)) return false;
    const char *slash = strrchr(path, '/');
    char *d = slash ? qp_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : qp_strdup(".");
    char *cfg = d ? qp_path_join(d, "config.json") : NULL;
    bool yes = cfg && qp_path_exists(cfg);
    qp_free(cfg);
    if (yes && dir) *dir = d;
    else qp_free(d);
    return yes;
}
