/* Any opened model as a Hugging Face safetensors folder (converters/hf_folder.h,
 * converters/hf_folder.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converters/hf_folder.h"
#include "converters/hf_tokenizer.h"
#include "core/json.h"
#include "core/rope.h"
#include "readers/bullet_format.h"
#include "readers/model_check.h"
#include "readers/name_map.h"
#include "writers/safetensors_writer.h"

/* The HF class and model_type the Trillim SDK and our HF reader know each family by. */
static const struct {
    qp_family family;
    const char *cls, *model_type;
} k_hf_classes[] = {
    {QP_FAMILY_LLAMA, "LlamaForCausalLM", "llama"},
    {QP_FAMILY_MISTRAL, "MistralForCausalLM", "mistral"},
    {QP_FAMILY_QWEN2, "Qwen2ForCausalLM", "qwen2"},
    {QP_FAMILY_BITNET, "BitNetForCausalLM", "bitnet"},
    {QP_FAMILY_QWEN3, "Qwen3ForCausalLM", "qwen3"},
    {QP_FAMILY_PHI3, "Phi3ForCausalLM", "phi3"},
    {QP_FAMILY_GEMMA, "GemmaForCausalLM", "gemma"},
    {QP_FAMILY_GEMMA2, "Gemma2ForCausalLM", "gemma2"},
    {QP_FAMILY_GEMMA3, "Gemma3ForCausalLM", "gemma3_text"},
    {QP_FAMILY_QWEN35, "Qwen3_5ForCausalLM", "qwen3_5_text"},
};

static int hf_class(qp_family f) {
    for (size_t i = 0; i < sizeof k_hf_classes / sizeof k_hf_classes[0]; i++)
        if (k_hf_classes[i].family == f) return (int)i;
    return -1;
}

/* Heads whose rows are rotated as adjacent pairs in the source and must become HF's halves:
 * q and k (weights and biases) of a QP_ROPE_NORM model (llama2.c, GGUF "llama"); else 0. */
static int64_t pair_heads(const qp_model *m, const qp_tensor *t) {
    if (m->arch.rope_style != QP_ROPE_NORM || !t->canon) return 0;
    if (strstr(t->canon, ".attn_q.")) return m->arch.n_heads;
    if (strstr(t->canon, ".attn_k.")) return m->arch.n_kv_heads;
    return 0;
}

static bool canon_ends(const qp_tensor *t, const char *lit) {
    size_t n = t->canon ? strlen(t->canon) : 0, k = strlen(lit);
    return n >= k && strcmp(t->canon + n - k, lit) == 0;
}

/* A Gemma or Qwen3.5 norm stored as 1 + w (GGUF, as llama.cpp's converter writes it; Qwen3.5's
 * gated ssm_norm excepted): HF stores w. */
static bool norm_minus_one(const qp_model *m, const qp_tensor *t) {
    bool family = qp_family_is_gemma(m->arch.family) ||
                  (m->arch.family == QP_FAMILY_QWEN35 && !canon_ends(t, "ssm_norm.weight"));
    return family && !m->arch.norm_plus_one && canon_ends(t, "norm.weight");
}

/* Qwen3.5's ssm_a stored as -exp(A_log) (GGUF): HF stores A_log. */
static bool a_log_of(const qp_model *m, const qp_tensor *t) {
    return m->arch.family == QP_FAMILY_QWEN35 && !m->arch.ssm_a_log && canon_ends(t, ".ssm_a");
}

/* Qwen3.5's conv kernel: [ch, K] (GGUF) or HF's [ch, 1, K]; written as the latter. */
static bool conv_kernel(const qp_model *m, const qp_tensor *t) {
    return m->arch.family == QP_FAMILY_QWEN35 && canon_ends(t, "ssm_conv1d.weight") &&
           (t->n_dims == 2 || (t->n_dims == 3 && t->ne[1] == 1));
}

static int64_t entry_nelements(const qp_hf_plan_entry *pe) { return pe->ne[0] * pe->ne[1]; }

/* The entry's source bytes: all of src, or expert pe->expert's rows of a merged tensor. */
static const uint8_t *entry_data(const qp_hf_plan_entry *pe) {
    size_t row_bytes = 0;
    if (pe->expert < 0 || !qp_encoding_row_bytes(pe->src->enc, pe->ne[0], &row_bytes)) return pe->src->data;
    return (const uint8_t *)pe->src->data + (size_t)pe->expert * (size_t)pe->ne[1] * row_bytes;
}

/* Qwen3.5's value heads from the tiled order in src back to HF's grouped order in out. */
static void vheads_grouped(const qp_hf_plan_entry *pe, const float *src, float *out) {
    const qp_vhead_order *v = &pe->vheads;
    const int64_t len = pe->ne[0];
    for (int64_t r = 0; r < pe->ne[1]; r++) {
        if (!v->in_row) {
            memcpy(out + qp_vhead_src(v, r) * len, src + r * len, (size_t)len * sizeof *out);
            continue;
        }
        for (int64_t c = 0; c < len; c++) out[r * len + qp_vhead_src(v, c)] = src[r * len + c];
    }
}

/* The entry as F32 rows in HF order into out (its nelements floats); tmp: the same size. */
static qp_status decode_tensor(const qp_model *m, const qp_hf_plan_entry *pe, float *out, float *tmp, qp_err *e) {
    const qp_tensor *t = pe->src;
    const int64_t n = entry_nelements(pe), heads = pe->permute_heads;
    /* a q/k bias is one column: its elements are the rows that move */
    const int64_t row_len = pe->n_dims == 1 ? 1 : pe->ne[0], rows = pe->n_dims == 1 ? n : pe->ne[1];
    float *dst = heads || pe->vheads.n_k > 0 ? tmp : out;
    if (pe->scale) {
        float sc = 0.0f;
        int64_t bad = 0;
        if (!qp_encoding_dequantize_tensor(pe->scale->enc, pe->scale->data, &sc, 1))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor %s: its encoding cannot be decoded to F32", m->path,
                           pe->scale->name);
        if (!qp_bitnet_u8_to_f32(t->data, rows, row_len, sc, dst, &bad))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor %s: element %lld holds code 3 (not a ternary weight)",
                           m->path, t->name, (long long)bad);
    } else if (!qp_encoding_dequantize_tensor(t->enc, entry_data(pe), dst, n)) {
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor %s: its encoding cannot be decoded to F32", m->path, t->name);
    }
    for (int64_t i = 0; pe->log_neg && i < n; i++) {
        if (!(dst[i] < 0.0f))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor %s: element %lld is %g, not -exp(A_log) (< 0)", m->path,
                           t->name, (long long)i, (double)dst[i]);
        dst[i] = logf(-dst[i]);
    }
    for (int64_t i = 0; pe->minus_one && i < n; i++) dst[i] -= 1.0f;
    if (pe->vheads.n_k > 0) vheads_grouped(pe, dst, out);
    if (!heads) return QP_OK;
    if (rows % heads || (rows / heads) % 2)
        return qp_fail(e, QP_ERR_FORMAT, "%s: tensor %s: %lld rows do not split into %lld heads of an even size",
                       m->path, t->name, (long long)rows, (long long)heads);
    for (int64_t r = 0; r < rows; r++)
        memcpy(out + r * row_len, tmp + qp_qk_row_in_pairs(r, heads, rows) * row_len, (size_t)row_len * sizeof *out);
    return QP_OK;
}

/* A microsoft/bitnet-b1.58 packed projection (U8 [out/4, in], readers/model_check.h): its
 * one-element "<name>_scale" sibling, else NULL. */
static const qp_tensor *packed_scale(const qp_model *m, const qp_tensor *t) {
    char sn[300];
    const char *name = t->canon ? t->canon : t->name;
    if (t->enc != QP_ENC_U8 || t->n_dims != 2 || snprintf(sn, sizeof sn, "%s_scale", name) >= (int)sizeof sn)
        return NULL;
    const qp_tensor *sc = qp_model_find(m, sn);
    return sc && qp_tensor_nelements(sc) == 1 ? sc : NULL;
}

/* The weight whose "<weight>_scale" t is, when that weight is a packed BitNet projection. */
static bool is_folded_scale(const qp_model *m, const qp_tensor *t) {
    const char *name = t->canon ? t->canon : t->name;
    size_t n = strlen(name), k = strlen("_scale");
    char wn[300];
    if (n <= k || n - k >= sizeof wn || strcmp(name + n - k, "_scale") != 0) return false;
    memcpy(wn, name, n - k);
    wn[n - k] = '\0';
    const qp_tensor *w = qp_model_find(m, wn);
    return w && packed_scale(m, w) == t;
}

/* llama.cpp's rope frequency table (Llama 3 GGUFs): HF computes it from config.json; a packed
 * BitNet weight's scale: folded into its unpacked floats. */
static const char *skip_rule(const qp_model *m, const qp_tensor *t) {
    if (m->format == QP_FORMAT_BULLET && !t->canon) return qp_bullet_skip_rule(t->name);
    const char *vision = m->format == QP_FORMAT_SAFETENSORS && !t->canon ? qp_name_map_skip_rule(m->arch.family, t->name) : NULL;
    if (vision) return vision;
    if (is_folded_scale(m, t)) return "packed BitNet weight_scale: folded into its weight, written as floats";
    return t->canon && strcmp(t->canon, "rope_freqs.weight") == 0
               ? "rope frequencies: written as config.json rope_scaling (llama3), which Hugging Face computes them from"
               : NULL;
}

static qp_encoding target_encoding(const qp_tensor *t, qp_encoding dtype) {
    if (dtype != QP_ENC_COUNT) return dtype;
    return t->enc == QP_ENC_F16 || t->enc == QP_ENC_BF16 ? t->enc : QP_ENC_F32;
}

void qp_hf_plan_free(qp_hf_plan *p) {
    if (!p) return;
    qp_free(p->t);
    memset(p, 0, sizeof *p);
}

/* A GGUF's merged experts "blk.L.ffn_{gate,up,down}_exps.weight" (3-D: ne[2] experts): the
 * per-expert GGUF name "blk.L.ffn_gate.E.weight" of expert E into buf (the name map takes it to
 * Mixtral's block_sparse_moe.experts.E.w1/w3/w2); false for any other tensor. */
static bool expert_gguf_name(const qp_tensor *t, int64_t expert, char *buf, size_t cap) {
    const char *c = t->canon, *x = c ? strstr(c, "_exps.weight") : NULL;
    if (t->n_dims != 3 || !x || strcmp(x, "_exps.weight") != 0) return false;
    int n = snprintf(buf, cap, "%.*s.%lld.weight", (int)(x - c), c, (long long)expert);
    return n > 0 && (size_t)n < cap;
}

/* The source tensors' written count: a merged expert tensor is ne[2] tensors. */
static int64_t plan_count(const qp_model *m) {
    int64_t n = 0;
    char buf[256];
    for (int64_t i = 0; i < m->n_tensors; i++)
        n += expert_gguf_name(&m->tensors[i], 0, buf, sizeof buf) ? m->tensors[i].ne[2] : 1;
    return n;
}

/* Fills pe for source t (expert: -1, or the expert of a merged tensor, named by gguf_name). */
static qp_status plan_entry(const qp_model *m, const qp_tensor *t, int64_t expert, const char *gguf_name,
                            qp_encoding dtype, qp_hf_plan_entry *pe, qp_err *e) {
    *pe = (qp_hf_plan_entry){.src = t, .expert = expert};
    if (!gguf_name || !qp_name_map_gguf_to_hf_family(m->arch.family, gguf_name, pe->hf_name, sizeof pe->hf_name))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor %s has no Hugging Face name", m->path, t->name);
    const bool conv = conv_kernel(m, t);
    if (t->n_dims > 2 && expert < 0 && !conv)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor %s has %d dimensions", m->path, t->name, t->n_dims);
    pe->n_dims = t->n_dims == 1 ? 1 : 2;
    pe->scale = expert < 0 ? packed_scale(m, t) : NULL;
    pe->ne[0] = t->ne[0];
    pe->ne[1] = t->n_dims == 1 ? 1 : pe->scale ? 4 * t->ne[1] : conv ? t->ne[t->n_dims - 1] : t->ne[1];
    pe->dst = target_encoding(t, dtype);
    pe->permute_heads = pair_heads(m, t);
    pe->minus_one = norm_minus_one(m, t);
    pe->log_neg = a_log_of(m, t);
    pe->conv_kernel = conv;
    qp_vhead_order_tiled(&m->arch, t->canon, &pe->vheads);
    pe->dst_bytes = (uint64_t)entry_nelements(pe) * qp_encoding_get(pe->dst)->block_bytes;
    return QP_OK;
}

qp_status qp_hf_folder_plan(const qp_model *m, qp_encoding dtype, qp_hf_plan *out, qp_err *e) {
    qp_hf_plan p = {0};
    const int64_t cap = plan_count(m);
    p.t = qp_calloc((size_t)(cap ? cap : 1), sizeof *p.t);
    if (!p.t) return qp_fail(e, QP_ERR_NOMEM, "out of memory for %lld tensors", (long long)cap);
    qp_status s = QP_OK;
    for (int64_t i = 0; s == QP_OK && i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        const char *rule = skip_rule(m, t);
        char name[256];
        if (rule) {
            p.t[p.n++] = (qp_hf_plan_entry){.src = t, .expert = -1, .skip_rule = rule};
            p.n_skipped++;
        } else if (expert_gguf_name(t, 0, name, sizeof name)) {
            for (int64_t x = 0; s == QP_OK && x < t->ne[2]; x++)
                if ((s = plan_entry(m, t, x, expert_gguf_name(t, x, name, sizeof name) ? name : NULL, dtype,
                                    &p.t[p.n], e)) == QP_OK)
                    p.dst_bytes += p.t[p.n++].dst_bytes;
        } else if ((s = plan_entry(m, t, -1, t->canon, dtype, &p.t[p.n], e)) == QP_OK) {
            p.dst_bytes += p.t[p.n++].dst_bytes;
        }
    }
    if (s != QP_OK) {
        qp_hf_plan_free(&p);
        return s;
    }
    *out = p;
    return QP_OK;
}

/* pe's tensor in its target dtype: the F32 values themselves, or their F16/BF16 encoding in tmp
 * (round to nearest even, the traits' reference). Returns the bytes to write. */
static const void *encode_target(const qp_hf_plan_entry *pe, float *f32, void *tmp, int64_t n) {
    if (pe->dst == QP_ENC_F32) return f32;
    (void)qp_encoding_quantize_tensor(pe->dst, f32, tmp, n); /* plain types take any n */
    return tmp;
}

static qp_status write_tensors(const qp_model *m, const char *dir, const qp_hf_plan *plan,
                               const qp_hf_folder_opts *o, qp_err *e) {
    char *path = qp_path_join(dir, "model.safetensors");
    qp_st_writer *w = NULL;
    qp_status s = path ? qp_st_writer_new(path, &w, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    int64_t largest = 0, n_out = plan->n - plan->n_skipped;
    for (int64_t i = 0; s == QP_OK && i < plan->n; i++) {
        const qp_hf_plan_entry *pe = &plan->t[i];
        if (pe->skip_rule) continue;
        const int64_t shape[3] = {pe->n_dims == 1 ? pe->ne[0] : pe->ne[1], pe->conv_kernel ? 1 : pe->ne[0], pe->ne[0]};
        s = qp_st_writer_add_tensor(w, pe->hf_name, pe->dst, pe->conv_kernel ? 3 : pe->n_dims, shape, e);
        if (entry_nelements(pe) > largest) largest = entry_nelements(pe);
    }
    if (s == QP_OK) s = qp_st_writer_begin(w, e);
    float *buf = NULL, *tmp = NULL;
    if (s == QP_OK && (!(buf = qp_calloc((size_t)largest, sizeof *buf)) || !(tmp = qp_calloc((size_t)largest, sizeof *tmp))))
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory for a tensor of %lld floats", (long long)largest);
    uint64_t done = 0;
    for (int64_t i = 0, k = 0; s == QP_OK && i < plan->n; i++) {
        const qp_hf_plan_entry *pe = &plan->t[i];
        if (pe->skip_rule) continue;
        if (o->cancel && atomic_load(o->cancel)) {
            s = qp_fail(e, QP_ERR_CANCELLED, "cancelled before tensor %s", pe->src->name);
            break;
        }
        const int64_t n = entry_nelements(pe);
        s = decode_tensor(m, pe, buf, tmp, e);
        if (s == QP_OK) s = qp_st_writer_write_tensor(w, encode_target(pe, buf, tmp, n), (size_t)pe->dst_bytes, e);
        done += pe->dst_bytes;
        if (s == QP_OK && o->progress) o->progress(o->progress_user, ++k, n_out, pe->src->name, done, plan->dst_bytes);
    }
    if (s == QP_OK) s = qp_st_writer_finish(w, e);
    else qp_st_writer_abort(w);
    qp_free(buf);
    qp_free(tmp);
    qp_free(path);
    return s;
}

/* A float key, or null when v is 0 (disabled; Gemma 2's absent soft-caps would mean 50 / 30). */
static bool add_float_or_null(cJSON *j, const char *key, float v) {
    return v > 0 ? cJSON_AddNumberToObject(j, key, qp_f32_short_double(v)) != NULL
                 : cJSON_AddNullToObject(j, key) != NULL;
}

/* Gemma 3's rope_scaling: linear with factor 1 / rope_freq_scale, or null. */
static bool add_rope_scaling(cJSON *j, const qp_arch *a) {
    if (!(a->rope_freq_scale > 0) || a->rope_freq_scale == 1.0f) return cJSON_AddNullToObject(j, "rope_scaling");
    cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
    return rs && cJSON_AddStringToObject(rs, "rope_type", "linear") &&
           cJSON_AddNumberToObject(rs, "factor", qp_f32_short_double(1.0f / a->rope_freq_scale));
}

/* Gemma 3's layer_types: layer l slides unless (l + 1) % swa_pattern == 0 (readers/hf_config.c). */
static bool add_layer_types(cJSON *j, const qp_arch *a) {
    cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
    bool ok = lt && cJSON_AddNumberToObject(j, "sliding_window_pattern", a->swa_pattern);
    for (int64_t l = 0; ok && l < a->n_layers; l++) {
        bool sliding = a->swa_pattern <= 1 || (l + 1) % a->swa_pattern != 0;
        ok = cJSON_AddItemToArray(lt, cJSON_CreateString(sliding ? "sliding_attention" : "full_attention"));
    }
    return ok;
}

/* Gemma 1/2/3's own keys (readers/hf_config.md "Gemma"): hidden_activation; 2/3:
 * query_pre_attn_scalar,
 * the soft-caps, the sliding window; 3: its pattern, the local rope base, rope_scaling. */
static bool add_gemma_keys(cJSON *j, const qp_arch *a) {
    if (!cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh")) return false;
    if (a->family == QP_FAMILY_GEMMA) return true;
    bool ok = cJSON_AddNumberToObject(j, "query_pre_attn_scalar", qp_arch_query_pre_attn_scalar(a)) &&
              add_float_or_null(j, "attn_logit_softcapping", a->attn_softcap) &&
              add_float_or_null(j, "final_logit_softcapping", a->final_softcap) &&
              (a->sliding_window > 0 ? cJSON_AddNumberToObject(j, "sliding_window", (double)a->sliding_window)
                                     : cJSON_AddNullToObject(j, "sliding_window"));
    if (!ok || a->family == QP_FAMILY_GEMMA2) return ok;
    return add_layer_types(j, a) && add_rope_scaling(j, a) &&
           cJSON_AddNumberToObject(j, "rope_local_base_freq",
                                   qp_f32_short_double(a->rope_theta_swa > 0 ? a->rope_theta_swa : a->rope_theta));
}

/* Phi-3's and Mixtral's sliding window (transformers' Phi3Config / MixtralConfig; null: none,
 * which an absent key would not say: older MixtralConfig defaults it to 4096), and Phi-3's
 * original_max_position_embeddings (the context; used with rope_scaling, which is null here). */
static bool add_phi3_moe_keys(cJSON *j, const qp_arch *a) {
    return (a->family != QP_FAMILY_PHI3 ||
            cJSON_AddNumberToObject(j, "original_max_position_embeddings", (double)a->max_pos)) &&
           (a->sliding_window > 0 ? cJSON_AddNumberToObject(j, "sliding_window", (double)a->sliding_window)
                                  : cJSON_AddNullToObject(j, "sliding_window"));
}

/* Llama 3.1's rope_scaling (readers/hf_config.md): the source's, or derived from a GGUF's
 * rope_freqs.weight (core/rope.h); a rope_freqs no llama3 scaling gives is refused, not dropped. */
static qp_status llama3_rope_of(const qp_model *m, qp_rope_llama3 *r, qp_err *e) {
    *r = m->arch.rope_llama3;
    const qp_tensor *t = qp_model_find(m, "rope_freqs.weight");
    if (r->factor > 0.0 || !t) return QP_OK;
    int64_t n = qp_tensor_nelements(t), dim = m->arch.rope_dims > 0 ? m->arch.rope_dims : m->arch.head_dim;
    if (dim <= 0 && m->arch.n_heads > 0) dim = m->arch.hidden / m->arch.n_heads;
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    float *f = n == dim / 2 && n > 0 && tr && tr->dequantize && t->data &&
                       t->nbytes >= (size_t)n * tr->block_bytes && tr->block_elems == 1
                   ? qp_malloc((size_t)n * sizeof *f) : NULL;
    if (f) tr->dequantize(t->data, f, n);
    bool all_ones = f != NULL;
    for (int64_t i = 0; f && i < n; i++) all_ones = all_ones && f[i] == 1.0f;
    bool fit = f && (all_ones || qp_rope_llama3_from_divisors(f, m->arch.rope_theta > 0.0f ? m->arch.rope_theta : 10000.0,
                                                              dim, r));
    qp_free(f);
    if (fit) return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: rope_freqs.weight (%lld factors) is no llama3 rope_scaling "
                   "(low_freq_factor 1, high_freq_factor 4) that config.json could say: not written as "
                   "a Hugging Face folder", m->path, (long long)n);
}

static bool add_llama3_rope(cJSON *j, const qp_rope_llama3 *r) {
    if (!(r->factor > 0.0)) return true;
    cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
    return rs && cJSON_AddStringToObject(rs, "rope_type", "llama3") &&
           cJSON_AddNumberToObject(rs, "factor", r->factor) &&
           cJSON_AddNumberToObject(rs, "low_freq_factor", r->low_freq_factor) &&
           cJSON_AddNumberToObject(rs, "high_freq_factor", r->high_freq_factor) &&
           cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)r->orig_max_pos);
}

/* Qwen3.5's keys (transformers' Qwen3_5TextConfig; readers/hf_config.c qwen35_fields): the
 * delta-net sizes, the layer pattern both ways, the gated attention output and the partial rotary
 * (top level and in transformers 5's rope_parameters). */
static bool add_qwen35_keys(cJSON *j, const qp_arch *a) {
    const int64_t nv = a->ssm_time_step_rank, every = a->full_attn_interval > 0 ? a->full_attn_interval : 4;
    const double partial = a->rope_dims > 0 && a->head_dim > 0 ? (double)a->rope_dims / (double)a->head_dim : 1.0;
    cJSON *lt = cJSON_AddArrayToObject(j, "layer_types"), *rp = cJSON_AddObjectToObject(j, "rope_parameters");
    bool ok = lt && rp && nv > 0 && cJSON_AddNumberToObject(j, "full_attention_interval", (double)every) &&
              cJSON_AddNumberToObject(j, "linear_conv_kernel_dim", (double)a->ssm_conv_kernel) &&
              cJSON_AddNumberToObject(j, "linear_key_head_dim", (double)a->ssm_state_size) &&
              cJSON_AddNumberToObject(j, "linear_num_key_heads", (double)a->ssm_group_count) &&
              cJSON_AddNumberToObject(j, "linear_num_value_heads", (double)nv) &&
              cJSON_AddNumberToObject(j, "linear_value_head_dim", (double)(a->ssm_inner_size / nv)) &&
              cJSON_AddBoolToObject(j, "attn_output_gate", true) &&
              cJSON_AddNumberToObject(j, "partial_rotary_factor", partial) &&
              cJSON_AddStringToObject(rp, "rope_type", "default") &&
              cJSON_AddNumberToObject(rp, "rope_theta", qp_f32_short_double(a->rope_theta)) &&
              cJSON_AddNumberToObject(rp, "partial_rotary_factor", partial);
    for (int64_t l = 0; ok && l < a->n_layers; l++)
        ok = cJSON_AddItemToArray(lt, cJSON_CreateString((l + 1) % every ? "linear_attention" : "full_attention"));
    return ok;
}

/* config.json: what qp_trillim_config_from_hf and our HF reader read back. */
static qp_status write_config(const qp_model *m, const char *dir, qp_err *e) {
    const qp_arch *a = &m->arch;
    /* a mixture of experts is transformers' Mixtral (its per-expert names: readers/name_map.h) */
    const bool moe = a->n_experts > 0;
    const int c = hf_class(a->family);
    const char *cls = moe ? "MixtralForCausalLM" : c >= 0 ? k_hf_classes[c].cls : NULL;
    const bool gemma = qp_family_is_gemma(a->family);
    if (!cls) return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: family %s has no Hugging Face class", m->path, qp_family_name(a->family));
    qp_rope_llama3 rope3;
    qp_status rs = llama3_rope_of(m, &rope3, e);
    if (rs != QP_OK) return rs;
    const int32_t bos = a->bos_id >= 0 ? a->bos_id : m->vocab.bos_id, eos = a->eos_id >= 0 ? a->eos_id : m->vocab.eos_id;
    cJSON *j = cJSON_CreateObject(), *archs = cJSON_AddArrayToObject(j, "architectures");
    bool ok = archs && cJSON_AddItemToArray(archs, cJSON_CreateString(cls)) &&
              cJSON_AddStringToObject(j, "model_type", moe ? "mixtral" : k_hf_classes[c].model_type) &&
              (!moe || (cJSON_AddNumberToObject(j, "num_local_experts", (double)a->n_experts) &&
                        cJSON_AddNumberToObject(j, "num_experts_per_tok", (double)a->n_experts_used))) &&
              cJSON_AddNumberToObject(j, "hidden_size", (double)a->hidden) &&
              cJSON_AddNumberToObject(j, "intermediate_size", (double)a->intermediate) &&
              cJSON_AddNumberToObject(j, "num_hidden_layers", (double)a->n_layers) &&
              cJSON_AddNumberToObject(j, "num_attention_heads", (double)a->n_heads) &&
              cJSON_AddNumberToObject(j, "num_key_value_heads", (double)a->n_kv_heads) &&
              cJSON_AddNumberToObject(j, "head_dim", (double)a->head_dim) &&
              cJSON_AddNumberToObject(j, "vocab_size", (double)a->vocab) &&
              cJSON_AddNumberToObject(j, "max_position_embeddings", (double)a->max_pos) &&
              cJSON_AddNumberToObject(j, "rms_norm_eps", qp_f32_short_double(a->norm_eps)) &&
              cJSON_AddNumberToObject(j, "rope_theta", qp_f32_short_double(a->rope_theta)) &&
              cJSON_AddStringToObject(j, "hidden_act", a->act == QP_ACT_RELU2  ? "relu2"
                                                       : a->act == QP_ACT_GELU ? "gelu_pytorch_tanh"
                                                                               : "silu") &&
              (!gemma || add_gemma_keys(j, a)) && (!(moe || a->family == QP_FAMILY_PHI3) || add_phi3_moe_keys(j, a)) &&
              add_llama3_rope(j, &rope3) &&
              (a->family != QP_FAMILY_QWEN35 || add_qwen35_keys(j, a)) &&
              cJSON_AddBoolToObject(j, "tie_word_embeddings", a->tie_embeddings) &&
              /* transformers' LlamaAttention biases q, k, v and o with attention_bias, LlamaMLP
                 gate, up and down with mlp_bias: without the keys it would drop the biases */
              cJSON_AddBoolToObject(j, "attention_bias", a->qkv_bias || qp_model_find(m, "blk.0.attn_output.bias")) &&
              (!qp_model_find(m, "blk.0.ffn_down.bias") || cJSON_AddBoolToObject(j, "mlp_bias", true)) &&
              (bos < 0 || cJSON_AddNumberToObject(j, "bos_token_id", bos)) &&
              (eos < 0 || cJSON_AddNumberToObject(j, "eos_token_id", eos)) &&
              cJSON_AddStringToObject(j, "torch_dtype", "float32");
    return qp_json_write_file(dir, "config.json", j, ok, e);
}

/* generation_config.json: the bos/eos ids, as transformers writes them for a causal LM. */
static qp_status write_generation_config(const qp_model *m, const char *dir, qp_err *e) {
    const qp_arch *a = &m->arch;
    const int32_t bos = a->bos_id >= 0 ? a->bos_id : m->vocab.bos_id, eos = a->eos_id >= 0 ? a->eos_id : m->vocab.eos_id;
    cJSON *j = cJSON_CreateObject();
    bool ok = j && (bos < 0 || cJSON_AddNumberToObject(j, "bos_token_id", bos)) &&
              (eos < 0 || cJSON_AddNumberToObject(j, "eos_token_id", eos));
    return qp_json_write_file(dir, "generation_config.json", j, ok, e);
}

qp_status qp_hf_folder_write_plan(const qp_model *m, const char *dir, const qp_hf_plan *plan,
                                  const qp_hf_folder_opts *o, qp_hf_folder_result *res, qp_err *e) {
    qp_status s = write_config(m, dir, e);
    if (s == QP_OK) s = write_tensors(m, dir, plan, o, e);
    if (s == QP_OK) s = write_generation_config(m, dir, e);
    if (s != QP_OK) return s;
    /* a vocabulary without a tokenizer.json form leaves the folder without tokenizer files (the
     * caller says when OUT has no tokenizer) */
    qp_err te = {0};
    s = qp_hf_tokenizer_write(m, dir, &te);
    if (res) {
        res->has_tokenizer = s == QP_OK;
        snprintf(res->no_tokenizer, sizeof res->no_tokenizer, "%s", s == QP_OK ? "" : te.msg);
    }
    if (s == QP_ERR_UNSUPPORTED) return QP_OK;
    return s == QP_OK ? QP_OK : qp_fail(e, s, "%s", te.msg);
}

qp_status qp_hf_folder_write(const qp_model *m, const char *dir, qp_err *e) {
    const qp_hf_folder_opts o = {.dtype = QP_ENC_F32};
    qp_hf_plan plan;
    qp_status s = qp_hf_folder_plan(m, o.dtype, &plan, e);
    if (s == QP_OK) s = qp_hf_folder_write_plan(m, dir, &plan, &o, NULL, e);
    qp_hf_plan_free(&plan);
    return s;
}
