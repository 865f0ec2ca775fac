/* GGUF metadata -> qp_arch and qp_vocab, and typed getters over qp_meta. Key names and the types
 * llama.cpp demands: readers/gguf.md ("Limits", "Problems") and converters/recipes.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "readers/gguf_meta.h"

static const char *const k_type_names[QP_META_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *qp_gguf_meta_type_name(qp_meta_type t) {
    return (unsigned)t < QP_META_TYPE_COUNT ? k_type_names[t] : "unknown";
}

bool qp_gguf_meta_type_is_int(qp_meta_type t) {
    switch (t) {
    case QP_META_U8: case QP_META_I8: case QP_META_U16: case QP_META_I16: case QP_META_U32:
    case QP_META_I32: case QP_META_U64: case QP_META_I64: return true;
    default: return false;
    }
}

static bool is_signed(qp_meta_type t) {
    return t == QP_META_I8 || t == QP_META_I16 || t == QP_META_I32 || t == QP_META_I64;
}

static bool meta_int(const qp_meta *md, int64_t *out) {
    if (!md || !qp_gguf_meta_type_is_int(md->type)) return false;
    if (is_signed(md->type)) {
        *out = md->v.i;
        return true;
    }
    if (md->v.u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)md->v.u;
    return true;
}

bool qp_gguf_meta_int(const qp_model *m, const char *key, int64_t *out) {
    return meta_int(qp_model_meta(m, key), out);
}

bool qp_gguf_meta_float(const qp_model *m, const char *key, double *out) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md || (md->type != QP_META_F32 && md->type != QP_META_F64)) return false;
    *out = md->v.f;
    return true;
}

bool qp_gguf_meta_bool(const qp_model *m, const char *key, bool *out) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md || md->type != QP_META_BOOL) return false;
    *out = md->v.b;
    return true;
}

const char *qp_gguf_meta_str(const qp_model *m, const char *key, size_t *len) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md || md->type != QP_META_STRING || !md->str) return NULL;
    if (len) *len = (size_t)md->str_len;
    return md->str;
}

const qp_meta *qp_gguf_meta_array(const qp_model *m, const char *key, qp_meta_type elem_type) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md || md->type != QP_META_ARRAY || md->arr_type != elem_type) return NULL;
    return md;
}

bool qp_gguf_meta_array_next_str(const qp_meta *md, size_t *pos, const uint8_t **s, size_t *len) {
    if (!md || md->type != QP_META_ARRAY || md->arr_type != QP_META_STRING || !md->raw) return false;
    qp_cursor c;
    qp_cursor_init(&c, md->raw, md->raw_size, *pos);
    uint64_t n;
    if (!qp_cursor_u64(&c, &n) || n > qp_cursor_left(&c)) return false;
    qp_cursor_take(&c, (size_t)n, s);
    *len = (size_t)n;
    *pos = c.pos;
    return true;
}

/* ---- type expectations of llama.cpp (a mismatch makes it refuse the file) ---------------- */

static void expect_type(qp_model *m, const char *key, qp_meta_type want) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md || md->type == want) return;
    /* llama.cpp accepts per-layer arrays for some counts; leave those to the arch check */
    if (md->type == QP_META_ARRAY && md->arr_type == want) return;
    qp_model_add_problem(m, "metadata '%s' is %s; llama.cpp requires %s and would refuse the file", key,
                         qp_gguf_meta_type_name(md->type), qp_gguf_meta_type_name(want));
}

/* Integer of any type, or element 0 of an integer array (llama.cpp's per-layer arrays). */
static bool arch_int(qp_model *m, const char *key, int64_t *out) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md) return false;
    if (md->type == QP_META_ARRAY && qp_gguf_meta_type_is_int(md->arr_type) && md->n > 0 && md->raw) {
        qp_meta first = {0};
        first.type = md->arr_type;
        const uint8_t *p = md->raw;
        switch (md->arr_type) {
        case QP_META_U8: first.v.u = p[0]; break;
        case QP_META_I8: first.v.i = (int8_t)p[0]; break;
        case QP_META_U16: first.v.u = qp_load_u16le(p); break;
        case QP_META_I16: first.v.i = (int16_t)qp_load_u16le(p); break;
        case QP_META_U32: first.v.u = qp_load_u32le(p); break;
        case QP_META_I32: first.v.i = (int32_t)qp_load_u32le(p); break;
        case QP_META_U64: first.v.u = qp_load_u64le(p); break;
        default: first.v.i = (int64_t)qp_load_u64le(p); break;
        }
        md = &first;
        if (!meta_int(md, out)) return false;
    } else if (!meta_int(md, out)) {
        qp_model_add_problem(m, "metadata '%s' (%s) is not a usable integer; ignored", key,
                             qp_gguf_meta_type_name(md->type));
        return false;
    }
    if (*out < 0) {
        qp_model_add_problem(m, "metadata '%s' is negative (%lld); ignored", key, (long long)*out);
        return false;
    }
    return true;
}

/* Builds "<arch>.<suffix>" into buf. */
static const char *arch_key(char *buf, size_t n, const char *arch, const char *suffix) {
    snprintf(buf, n, "%s.%s", arch, suffix);
    return buf;
}

static bool has_tensor(const qp_model *m, const char *name) { return qp_model_find(m, name) != NULL; }

/* bitnet.cpp's weights: any tensor in its I2_S (the type-36 flavour microsoft/BitNet writes) */
static bool has_ms_i2s(const qp_model *m) {
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].enc == QP_ENC_I2_S) return true;
    return false;
}

bool qp_gguf_bitnet_arch(const char *arch, bool ms_i2s, qp_act *act, bool *act_int8) {
    if (!arch) return false;
    if (strcmp(arch, "bitnet") == 0) {
        *act = QP_ACT_SILU;
        *act_int8 = ms_i2s;
        return true;
    }
    if (strcmp(arch, "bitnet-b1.58") == 0 || strcmp(arch, "bitnet-25") == 0) {
        *act = QP_ACT_RELU2;
        *act_int8 = true;
        return true;
    }
    return false;
}

/* The quantpack keys (QP_GGUF_FFN_ACT_KEY, QP_GGUF_ACT_QUANT_KEY): read when the architecture
 * implies nothing, else they must say what it implies. */
static qp_status apply_declared(qp_model *m, const char *arch, qp_err *e) {
    qp_arch *a = &m->arch;
    bool known = a->family != QP_FAMILY_UNKNOWN;
    const qp_meta *md = qp_model_meta(m, QP_GGUF_FFN_ACT_KEY);
    if (md) {
        qp_act act;
        if (md->type != QP_META_STRING || !qp_act_from_name(md->str, &act))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: metadata '%s' is not one of silu, relu2, gelu",
                           m->path, QP_GGUF_FFN_ACT_KEY);
        if (known && act != a->act)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: metadata '%s' = '%s' contradicts "
                           "general.architecture '%.64s', which its consumer runs with %s",
                           m->path, QP_GGUF_FFN_ACT_KEY, md->str, arch, qp_act_name(a->act));
        a->act = act;
    }
    md = qp_model_meta(m, QP_GGUF_ACT_QUANT_KEY);
    if (md) {
        bool i8 = md->type == QP_META_STRING && strcmp(md->str, QP_ACT_QUANT_INT8) == 0;
        if (md->type != QP_META_STRING || (!i8 && strcmp(md->str, QP_ACT_QUANT_NONE) != 0))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: metadata '%s' is not '%s' or '%s'", m->path,
                           QP_GGUF_ACT_QUANT_KEY, QP_ACT_QUANT_NONE, QP_ACT_QUANT_INT8);
        if (known && i8 != a->act_int8)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: metadata '%s' = '%s' contradicts "
                           "general.architecture '%.64s', whose consumer computes with %s",
                           m->path, QP_GGUF_ACT_QUANT_KEY, md->str, arch,
                           a->act_int8 ? "int8 activations per token" : "float activations");
        a->act_int8 = i8;
    }
    return QP_OK;
}

/* Gemma 2/3 as llama.cpp's loaders read them (runtime.md "Gemma"): the sliding window (Gemma 2:
 * 4096 when absent) and its pattern (2 / 6, or attention.sliding_window_pattern), soft-caps
 * (Gemma 2: 50 / 30 when absent), rope.freq_base_swa (Gemma 2: rope.freq_base; Gemma 3: 10000),
 * linear rope scaling (rope.scaling.factor), and q's scale 1 / sqrtf(head_dim), or
 * 1 / sqrtf(hidden / heads) for the 27B models (46 / 62 layers), as llama.cpp derives it. */
static void gemma_keys(qp_model *m, const char *arch) {
    qp_arch *a = &m->arch;
    bool g2 = a->family == QP_FAMILY_GEMMA2;
    char k[160];
    int64_t v;
    double d;
    a->sliding_window = g2 ? 4096 : 0;
    if (arch_int(m, arch_key(k, sizeof k, arch, "attention.sliding_window"), &v)) a->sliding_window = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "attention.sliding_window_pattern"), &v) && v > 0 && v <= 4096)
        a->swa_pattern = (int32_t)v;
    a->attn_softcap = g2 ? 50.0f : 0.0f;
    a->final_softcap = g2 ? 30.0f : 0.0f;
    if (g2 && qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "attn_logit_softcapping"), &d)) a->attn_softcap = (float)d;
    if (qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "final_logit_softcapping"), &d)) a->final_softcap = (float)d;
    a->rope_theta_swa = g2 ? a->rope_theta : 10000.0f;
    if (qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "rope.freq_base_swa"), &d)) a->rope_theta_swa = (float)d;
    const char *st = qp_gguf_meta_str(m, arch_key(k, sizeof k, arch, "rope.scaling.type"), NULL);
    if (st && strcmp(st, "linear") == 0 &&
        qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "rope.scaling.factor"), &d) && d > 0)
        a->rope_freq_scale = (float)(1.0 / d);
    bool big = a->n_layers == (g2 ? 46 : 62);
    if (a->n_heads > 0 && a->head_dim > 0)
        a->attn_scale = 1.0f / sqrtf((float)(big ? a->hidden / a->n_heads : a->head_dim));
}

/* Qwen3.5 as llama.cpp's qwen35 loader reads it: the ssm.* sizes, full_attention_interval (4
 * when absent), rope.dimension_count (the rotated part of each head); ssm_a holds -exp(A_log);
 * value heads in the tiled order (converters/recipes.md "Qwen3.5"). */
static void qwen35_keys(qp_model *m, const char *arch) {
    qp_arch *a = &m->arch;
    char k[160];
    int64_t v;
    static const char *const keys[5] = {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count",
                                        "ssm.time_step_rank", "ssm.inner_size"};
    int64_t *dst[5] = {&a->ssm_conv_kernel, &a->ssm_state_size, &a->ssm_group_count,
                       &a->ssm_time_step_rank, &a->ssm_inner_size};
    for (int i = 0; i < 5; i++)
        if (arch_int(m, arch_key(k, sizeof k, arch, keys[i]), &v)) *dst[i] = v;
    a->full_attn_interval = 4;
    if (arch_int(m, arch_key(k, sizeof k, arch, "full_attention_interval"), &v) && v > 0 && v <= 4096)
        a->full_attn_interval = (int32_t)v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "rope.dimension_count"), &v)) a->rope_dims = v;
    a->ssm_heads_tiled = true; /* its converter reorders value heads for the graph's ggml_repeat */
}

static qp_status apply_arch(qp_model *m, qp_err *e) {
    qp_arch *a = &m->arch;
    const char *arch = qp_gguf_meta_str(m, "general.architecture", NULL);
    if (!arch) {
        if (qp_model_meta(m, "general.architecture"))
            qp_model_add_problem(m, "metadata 'general.architecture' is not a string");
        else
            qp_model_add_problem(m, "no 'general.architecture': llama.cpp cannot load this file");
        return QP_OK;
    }
    m->arch_name = arch;
    if (strcmp(arch, "llama") == 0) {
        a->family = QP_FAMILY_LLAMA;
        a->rope_style = QP_ROPE_NORM;
    } else if (strcmp(arch, "qwen2") == 0) {
        a->family = QP_FAMILY_QWEN2;
        a->rope_style = QP_ROPE_NEOX;
        a->qkv_bias = true;
    } else if (strcmp(arch, "qwen3") == 0) { /* llama.cpp's build_qwen3: NEOX, q/k norms, no bias */
        a->family = QP_FAMILY_QWEN3;
        a->rope_style = QP_ROPE_NEOX;
        a->qk_norm = true;
    } else if (strcmp(arch, "phi3") == 0) { /* llama.cpp's phi3: NEOX, attn_qkv, ffn_up = gate|up */
        a->family = QP_FAMILY_PHI3;
        a->rope_style = QP_ROPE_NEOX;
        a->swa_pattern = 1;
    } else if (strcmp(arch, "gemma") == 0 || strcmp(arch, "gemma2") == 0 || strcmp(arch, "gemma3") == 0) {
        /* llama.cpp's gemma / gemma2 / gemma3: NEOX, GeGLU, norms stored as 1 + w */
        a->family = arch[5] == '\0' ? QP_FAMILY_GEMMA : arch[5] == '2' ? QP_FAMILY_GEMMA2 : QP_FAMILY_GEMMA3;
        a->rope_style = QP_ROPE_NEOX;
        a->act = QP_ACT_GELU;
        a->swa_pattern = a->family == QP_FAMILY_GEMMA2 ? 2 : a->family == QP_FAMILY_GEMMA3 ? 6 : 0;
    } else if (strcmp(arch, "qwen35") == 0) { /* llama.cpp's qwen35: runtime.md "Qwen3.5" */
        a->family = QP_FAMILY_QWEN35;
        a->rope_style = QP_ROPE_NEOX;
        a->qk_norm = true;
    } else if (qp_gguf_bitnet_arch(arch, has_ms_i2s(m), &a->act, &a->act_int8)) {
        a->family = QP_FAMILY_BITNET;
        a->rope_style = QP_ROPE_NEOX; /* llama.cpp and bitnet.cpp: LLAMA_ROPE_TYPE_NEOX */
        a->sub_norms = true;          /* both graphs require attn_sub_norm / ffn_sub_norm */
    } else {
        a->family = QP_FAMILY_UNKNOWN;
        qp_model_add_problem(m, "architecture '%.64s' is not one quantpack can run", arch);
    }
    qp_status st = apply_declared(m, arch, e);
    if (st != QP_OK) return st;
    if (strlen(arch) > 100) return QP_OK; /* no key of ours can be that long; skip the per-arch keys */

    char k[160];
    int64_t v;
    static const char *const u32_keys[] = {
        "context_length", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.head_count_kv", "rope.dimension_count",
        "expert_count", "expert_used_count",
    };
    for (size_t i = 0; i < sizeof u32_keys / sizeof u32_keys[0]; i++)
        expect_type(m, arch_key(k, sizeof k, arch, u32_keys[i]), QP_META_U32);
    expect_type(m, arch_key(k, sizeof k, arch, "attention.layer_norm_rms_epsilon"), QP_META_F32);
    expect_type(m, arch_key(k, sizeof k, arch, "rope.freq_base"), QP_META_F32);

    if (arch_int(m, arch_key(k, sizeof k, arch, "context_length"), &v)) a->max_pos = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "embedding_length"), &v)) a->hidden = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "block_count"), &v)) a->n_layers = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "feed_forward_length"), &v)) a->intermediate = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "attention.head_count"), &v)) a->n_heads = v;
    a->n_kv_heads = a->n_heads;
    if (arch_int(m, arch_key(k, sizeof k, arch, "attention.head_count_kv"), &v)) a->n_kv_heads = v;
    /* llama.cpp: n_embd_head_k = attention.key_length, else n_embd / n_head; the rotated part
       (rope.dimension_count) is all of it for every architecture the runtime runs */
    bool q35 = a->family == QP_FAMILY_QWEN35; /* rotates part of each head */
    if (arch_int(m, arch_key(k, sizeof k, arch, "attention.key_length"), &v)) a->head_dim = v;
    else if (!q35 && arch_int(m, arch_key(k, sizeof k, arch, "rope.dimension_count"), &v)) a->head_dim = v;
    else if (a->n_heads > 0) a->head_dim = a->hidden / a->n_heads;
    /* MoE (llama.cpp's n_expert / n_expert_used; runtime.md "Mixture of experts") */
    if (arch_int(m, arch_key(k, sizeof k, arch, "expert_count"), &v)) a->n_experts = v;
    if (arch_int(m, arch_key(k, sizeof k, arch, "expert_used_count"), &v)) a->n_experts_used = v;
    double d;
    if (qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "attention.layer_norm_rms_epsilon"), &d))
        a->norm_eps = (float)d;
    a->rope_theta = 10000.0f;
    if (qp_gguf_meta_float(m, arch_key(k, sizeof k, arch, "rope.freq_base"), &d)) a->rope_theta = (float)d;
    if (a->swa_pattern > 0 && arch_int(m, arch_key(k, sizeof k, arch, "attention.sliding_window"), &v))
        a->sliding_window = v;

    if (a->family == QP_FAMILY_GEMMA2 || a->family == QP_FAMILY_GEMMA3) gemma_keys(m, arch);
    if (q35) qwen35_keys(m, arch);

    if (m->n_tensors > 0) {
        a->tie_embeddings = !has_tensor(m, "output.weight");
        if (has_tensor(m, "blk.0.attn_q.bias")) a->qkv_bias = true;
    }
    return QP_OK;
}

/* ---- vocabulary ------------------------------------------------------------------------- */

/* Copies a string array into the arena: one block for every byte plus a NUL each. */
static qp_status copy_str_array(qp_model *m, const qp_meta *md, char ***out, uint32_t **lens, qp_err *e) {
    qp_arena *ar = qp_model_arena(m);
    size_t n = (size_t)md->n, ptr_bytes, len_bytes;
    if (!qp_size_mul(n, sizeof(char *), &ptr_bytes) || !qp_size_mul(n, sizeof(uint32_t), &len_bytes))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s': %zu strings overflow", m->path, md->key, n);
    char **ptrs = qp_arena_alloc(ar, ptr_bytes ? ptr_bytes : 1);
    uint32_t *ls = lens ? qp_arena_alloc(ar, len_bytes ? len_bytes : 1) : NULL;
    /* each stored string has an 8-byte length, so raw_size bytes hold every string + its NUL */
    char *text = qp_arena_alloc(ar, md->raw_size ? md->raw_size : 1);
    if (!ptrs || (lens && !ls) || !text) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    size_t pos = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *s;
        size_t len;
        if (!qp_gguf_meta_array_next_str(md, &pos, &s, &len) || len > UINT32_MAX || len + 1 > md->raw_size - used)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s': element %zu is malformed", m->path, md->key, i);
        memcpy(text + used, s, len);
        text[used + len] = '\0';
        ptrs[i] = text + used;
        if (ls) ls[i] = (uint32_t)len;
        used += len + 1;
    }
    *out = ptrs;
    if (lens) *lens = ls;
    return QP_OK;
}

static qp_status array_matching(qp_model *m, const char *key, qp_meta_type want, int64_t n_tokens,
                                const qp_meta **out, qp_err *e) {
    *out = NULL;
    const qp_meta *md = qp_model_meta(m, key);
    if (!md) return QP_OK;
    if (md->type != QP_META_ARRAY || md->arr_type != want)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is %s%s%s; expected an array of %s", m->path, key,
                       qp_gguf_meta_type_name(md->type), md->type == QP_META_ARRAY ? " of " : "",
                       md->type == QP_META_ARRAY ? qp_gguf_meta_type_name(md->arr_type) : "",
                       qp_gguf_meta_type_name(want));
    if (n_tokens >= 0 && md->n != (uint64_t)n_tokens)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' has %llu entries but tokenizer.ggml.tokens has %lld",
                       m->path, key, (unsigned long long)md->n, (long long)n_tokens);
    *out = md;
    return QP_OK;
}

static void special_id(qp_model *m, const char *key, int32_t *out) {
    const qp_meta *md = qp_model_meta(m, key);
    if (!md) return;
    expect_type(m, key, QP_META_U32);
    int64_t v;
    if (!meta_int(md, &v)) {
        qp_model_add_problem(m, "metadata '%s' (%s) is not an integer; ignored", key,
                             qp_gguf_meta_type_name(md->type));
        return;
    }
    if (md->type == QP_META_U32 && md->v.u == UINT32_MAX) return; /* llama.cpp's "none" (-1) */
    if (v < 0 || v > INT32_MAX || (m->vocab.n_tokens > 0 && v >= m->vocab.n_tokens)) {
        qp_model_add_problem(m, "metadata '%s' = %lld is outside the %lld-token vocabulary; ignored "
                             "(llama.cpp also ignores it)", key, (long long)v, (long long)m->vocab.n_tokens);
        return;
    }
    *out = (int32_t)v;
}

/* The "t5" (unigram) keys: llama.cpp's default ids where the file gives none (eos 1, unk 2,
 * pad 0), tokenizer.ggml.remove_extra_whitespaces and the precompiled_charsmap bytes (an array of
 * u8 or i8, borrowed; its layout is checked by the tokenizer). */
static qp_status apply_unigram(qp_model *m, qp_err *e) {
    qp_vocab *vb = &m->vocab;
    static const struct { const char *key; int32_t id; } k_defaults[3] = {
        {"tokenizer.ggml.eos_token_id", 1}, {"tokenizer.ggml.unknown_token_id", 2},
        {"tokenizer.ggml.padding_token_id", 0}};
    int32_t *dst[3] = {&vb->eos_id, &vb->unk_id, &vb->pad_id};
    for (int i = 0; i < 3; i++)
        if (!qp_model_meta(m, k_defaults[i].key) && k_defaults[i].id < vb->n_tokens) *dst[i] = k_defaults[i].id;
    bool b;
    expect_type(m, "tokenizer.ggml.remove_extra_whitespaces", QP_META_BOOL);
    if (qp_gguf_meta_bool(m, "tokenizer.ggml.remove_extra_whitespaces", &b)) vb->remove_extra_spaces = b;
    const qp_meta *cm = qp_model_meta(m, "tokenizer.ggml.precompiled_charsmap");
    if (!cm) return QP_OK;
    if (cm->type != QP_META_ARRAY || (cm->arr_type != QP_META_U8 && cm->arr_type != QP_META_I8))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: 'tokenizer.ggml.precompiled_charsmap' is %s; expected an "
                       "array of u8 or i8", m->path, qp_gguf_meta_type_name(cm->type));
    vb->charsmap = cm->raw;
    vb->charsmap_len = cm->raw_size;
    return QP_OK;
}

static qp_status apply_vocab(qp_model *m, qp_err *e) {
    qp_vocab *vb = &m->vocab;
    const char *model = qp_gguf_meta_str(m, "tokenizer.ggml.model", NULL);
    if (model) {
        if (strcmp(model, "llama") == 0) vb->model = QP_TOK_SPM;
        else if (strcmp(model, "gpt2") == 0) vb->model = QP_TOK_BPE;
        else if (strcmp(model, "bert") == 0) vb->model = QP_TOK_WPM;
        else if (strcmp(model, "t5") == 0) vb->model = QP_TOK_UGM;
        else {
            vb->model = QP_TOK_NONE;
            if (strcmp(model, "no_vocab") != 0)
                qp_model_add_problem(m, "tokenizer model '%.64s' is not supported; no tokenizer", model);
        }
    } else if (qp_model_meta(m, "tokenizer.ggml.model")) {
        qp_model_add_problem(m, "metadata 'tokenizer.ggml.model' is not a string");
    }
    size_t pre_len;
    const char *pre = qp_gguf_meta_str(m, "tokenizer.ggml.pre", &pre_len);
    if (pre) {
        if (pre_len >= sizeof vb->pre || strlen(pre) != pre_len)
            qp_model_add_problem(m, "tokenizer.ggml.pre '%.64s' is too long or has a NUL; ignored", pre);
        else
            memcpy(vb->pre, pre, pre_len + 1);
    }

    const qp_meta *tok;
    qp_status st = array_matching(m, "tokenizer.ggml.tokens", QP_META_STRING, -1, &tok, e);
    if (st != QP_OK) return st;
    if (tok) {
        if (tok->n > (uint64_t)INT32_MAX)
            return qp_fail(e, QP_ERR_LIMIT, "%s: %llu tokens (at most %d supported)", m->path,
                           (unsigned long long)tok->n, INT32_MAX);
        st = copy_str_array(m, tok, &vb->tokens, &vb->token_lens, e);
        if (st != QP_OK) return st;
        vb->n_tokens = (int64_t)tok->n;
    }
    const qp_meta *scores, *types, *merges;
    st = array_matching(m, "tokenizer.ggml.scores", QP_META_F32, vb->n_tokens, &scores, e);
    if (st == QP_OK) st = array_matching(m, "tokenizer.ggml.token_type", QP_META_I32, vb->n_tokens, &types, e);
    if (st == QP_OK) st = array_matching(m, "tokenizer.ggml.merges", QP_META_STRING, -1, &merges, e);
    if (st != QP_OK) return st;
    qp_arena *ar = qp_model_arena(m);
    if (scores && vb->n_tokens > 0) {
        vb->scores = qp_arena_alloc(ar, (size_t)vb->n_tokens * sizeof(float));
        if (!vb->scores) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        for (int64_t i = 0; i < vb->n_tokens; i++) vb->scores[i] = qp_load_f32le(scores->raw + 4 * i);
    }
    if (types && vb->n_tokens > 0) {
        vb->types = qp_arena_alloc(ar, (size_t)vb->n_tokens * sizeof(int32_t));
        if (!vb->types) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        for (int64_t i = 0; i < vb->n_tokens; i++) vb->types[i] = (int32_t)qp_load_u32le(types->raw + 4 * i);
    }
    if (merges) {
        st = copy_str_array(m, merges, &vb->merges, NULL, e);
        if (st != QP_OK) return st;
        vb->n_merges = (int64_t)merges->n;
    }
    if (vb->model == QP_TOK_BPE && !merges)
        qp_model_add_problem(m, "gpt2 tokenizer without tokenizer.ggml.merges: llama.cpp refuses it");
    expect_type(m, "tokenizer.ggml.tokens", QP_META_ARRAY);
    expect_type(m, "tokenizer.ggml.add_bos_token", QP_META_BOOL);
    expect_type(m, "tokenizer.ggml.add_eos_token", QP_META_BOOL);
    special_id(m, "tokenizer.ggml.bos_token_id", &vb->bos_id);
    special_id(m, "tokenizer.ggml.eos_token_id", &vb->eos_id);
    special_id(m, "tokenizer.ggml.unknown_token_id", &vb->unk_id);
    special_id(m, "tokenizer.ggml.padding_token_id", &vb->pad_id);
    bool b;
    if (qp_gguf_meta_bool(m, "tokenizer.ggml.add_bos_token", &b)) vb->add_bos = b;
    if (qp_gguf_meta_bool(m, "tokenizer.ggml.add_eos_token", &b)) vb->add_eos = b;
    expect_type(m, "tokenizer.ggml.add_space_prefix", QP_META_BOOL);
    if (vb->model == QP_TOK_UGM) vb->no_space_prefix = true; /* llama.cpp's default for "t5" */
    if (qp_gguf_meta_bool(m, "tokenizer.ggml.add_space_prefix", &b)) vb->no_space_prefix = !b;
    if (vb->model == QP_TOK_UGM) return apply_unigram(m, e);
    return QP_OK;
}

qp_status qp_gguf_meta_apply(qp_model *m, qp_err *e) {
    qp_status st = apply_vocab(m, e);
    if (st != QP_OK) return st;
    if ((st = apply_arch(m, e)) != QP_OK) return st;
    qp_arch *a = &m->arch;
    if (m->vocab.n_tokens > 0) {
        a->vocab = m->vocab.n_tokens;
    } else {
        const qp_tensor *emb = qp_model_find(m, "token_embd.weight");
        if (emb && emb->n_dims >= 2) a->vocab = emb->ne[1];
    }
    a->bos_id = m->vocab.bos_id;
    a->eos_id = m->vocab.eos_id;
    return QP_OK;
}

bool qp_gguf_scale_name(const char *weight_name, char *buf, size_t n) {
    if (!weight_name || !buf || n == 0) return false;
    size_t len = strlen(weight_name);
    if (len >= 7 && strcmp(weight_name + len - 7, ".weight") == 0) len -= 7;
    if (len > INT32_MAX) return false;
    int k = snprintf(buf, n, "%.*s.scale", (int)len, weight_name);
    return k > 0 && (size_t)k < n;
}

bool qp_gguf_sibling_scale(const qp_model *m, const qp_tensor *t, float *scale) {
    return t && qp_encoding_has_sibling_scale(t->enc) && qp_gguf_projection_scale(m, t, scale);
}

bool qp_gguf_projection_scale(const qp_model *m, const qp_tensor *t, float *scale) {
    char name[160];
    if (!m || !t || !qp_gguf_scale_name(t->name, name, sizeof name)) return false;
    const qp_tensor *s = qp_model_find(m, name);
    if (!s || !s->data || qp_tensor_nelements(s) != 1 || (s->enc != QP_ENC_F32 && s->enc != QP_ENC_F16))
        return false;
    const qp_encoding_traits *tr = qp_encoding_get(s->enc);
    if (s->nbytes < tr->block_bytes) return false;
    tr->dequantize(s->data, scale, 1);
    return true;
}
