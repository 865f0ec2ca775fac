/* Recipes -> per-tensor plans (converters/recipes.md). The llama.cpp recipes follow
 * src/llama-quant.cpp (llama_tensor_get_type without imatrix, overrides or --pure): the same
 * categories matched by substring, the same counters advanced in the same (sorted) order, the
 * same shape fallbacks. */
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "converters/recipe.h"
#include "readers/bullet_format.h"
#include "readers/gguf_meta.h"
#include "readers/name_map.h"

/* Each recipe: its name, llama.cpp's general.file_type, the encoding of its main tensors, and
 * whether it is a BitNet (ternary) recipe applied to the seven projections only. */
static const struct {
    const char *name;
    uint32_t file_type;
    qp_encoding base;
    bool bitnet;
} k_quants[QP_QUANT_COUNT] = {
    [QP_QUANT_F32] = {.name = "F32", .file_type = 0, .base = QP_ENC_F32},
    [QP_QUANT_F16] = {.name = "F16", .file_type = 1, .base = QP_ENC_F16},
    [QP_QUANT_BF16] = {.name = "BF16", .file_type = 32, .base = QP_ENC_BF16},
    [QP_QUANT_Q8_0] = {.name = "Q8_0", .file_type = 7, .base = QP_ENC_Q8_0},
    [QP_QUANT_Q6_K] = {.name = "Q6_K", .file_type = 18, .base = QP_ENC_Q6_K},
    [QP_QUANT_Q4_K_M] = {.name = "Q4_K_M", .file_type = 15, .base = QP_ENC_Q4_K},
    [QP_QUANT_I2_S] = {.name = "I2_S", .file_type = 40, .base = QP_ENC_I2_S, .bitnet = true},
    [QP_QUANT_TQ1_0] = {.name = "TQ1_0", .file_type = 36, .base = QP_ENC_TQ1_0},
    [QP_QUANT_TQ2_0] = {.name = "TQ2_0", .file_type = 37, .base = QP_ENC_TQ2_0},
    [QP_QUANT_QK256] = {.name = "QK256", .file_type = 40, .base = QP_ENC_QK256, .bitnet = true},
    [QP_QUANT_Q4_0] = {.name = "Q4_0", .file_type = 2, .base = QP_ENC_Q4_0},
    [QP_QUANT_Q4_1] = {.name = "Q4_1", .file_type = 3, .base = QP_ENC_Q4_1},
    [QP_QUANT_Q5_0] = {.name = "Q5_0", .file_type = 8, .base = QP_ENC_Q5_0},
    [QP_QUANT_Q5_1] = {.name = "Q5_1", .file_type = 9, .base = QP_ENC_Q5_1},
    [QP_QUANT_Q2_K] = {.name = "Q2_K", .file_type = 10, .base = QP_ENC_Q2_K},
    [QP_QUANT_Q2_K_S] = {.name = "Q2_K_S", .file_type = 21, .base = QP_ENC_Q2_K},
    [QP_QUANT_Q3_K_S] = {.name = "Q3_K_S", .file_type = 11, .base = QP_ENC_Q3_K},
    [QP_QUANT_Q3_K_M] = {.name = "Q3_K_M", .file_type = 12, .base = QP_ENC_Q3_K},
    [QP_QUANT_Q3_K_L] = {.name = "Q3_K_L", .file_type = 13, .base = QP_ENC_Q3_K},
    [QP_QUANT_Q4_K_S] = {.name = "Q4_K_S", .file_type = 14, .base = QP_ENC_Q4_K},
    [QP_QUANT_Q5_K_S] = {.name = "Q5_K_S", .file_type = 16, .base = QP_ENC_Q5_K},
    [QP_QUANT_Q5_K_M] = {.name = "Q5_K_M", .file_type = 17, .base = QP_ENC_Q5_K},
    [QP_QUANT_IQ4_NL] = {.name = "IQ4_NL", .file_type = 25, .base = QP_ENC_IQ4_NL},
    [QP_QUANT_IQ4_XS] = {.name = "IQ4_XS", .file_type = 30, .base = QP_ENC_IQ4_XS},
};

const char *qp_quant_name(qp_quant q) {
    return (unsigned)q < QP_QUANT_COUNT ? k_quants[q].name : "?";
}

qp_quant qp_quant_from_name(const char *name) {
    if (!name) return QP_QUANT_COUNT;
    for (int i = 0; i < QP_QUANT_COUNT; i++)
        if (strcasecmp(name, k_quants[i].name) == 0) return (qp_quant)i;
    return QP_QUANT_COUNT;
}

uint32_t qp_quant_file_type(qp_quant q) {
    return (unsigned)q < QP_QUANT_COUNT ? k_quants[q].file_type : 0;
}

bool qp_quant_is_ternary(qp_quant q) {
    return (unsigned)q < QP_QUANT_COUNT && k_quants[q].bitnet;
}

bool qp_quant_bitnet_recipe(qp_quant q, const qp_model *m) {
    return qp_quant_is_ternary(q) ||
           ((q == QP_QUANT_TQ1_0 || q == QP_QUANT_TQ2_0) && m && m->arch.family == QP_FAMILY_BITNET);
}

bool qp_recipe_use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* sscanf(name, "blk.%d.", &layer) == 1: "blk." then an optionally signed decimal integer
 * (leading white space allowed, as %d). */
int qp_recipe_layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    while (isspace((unsigned char)*p)) p++;
    int sign = 1;
    if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*p)) return -1;
    long v = 0;
    while (isdigit((unsigned char)*p)) {
        if (v < 100000000) v = v * 10 + (*p - '0');
        p++;
    }
    return (int)(sign * v);
}

/* ---- llama.cpp tensor categories ------------------------------------------------------------ */
typedef enum cat {
    CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER
} cat;

static cat category_of(const char *n) {
    if (strcmp(n, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0)
        return CAT_TOKEN_EMBD;
    if (strstr(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (strstr(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (strstr(n, "attn_v.weight")) return CAT_ATTN_V;
    if (strstr(n, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (strstr(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(n, "ffn_up")) return CAT_FFN_UP;
    if (strstr(n, "ffn_gate")) return CAT_FFN_GATE;
    if (strstr(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool cat_is_attn_v(cat c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ggml_n_dims: trailing 1s do not count (at least 1). */
static int effective_dims(const int64_t *ne, int n_dims) {
    while (n_dims > 1 && ne[n_dims - 1] == 1) n_dims--;
    return n_dims < 1 ? 1 : n_dims;
}

/* llama.cpp tensor_allows_quantization (the checks that can apply to the names we write). */
static bool allows_quantization(const char *name, int n_dims) {
    static const char *const k_never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    if (n_dims < 2) return false;
    if (!ends_with(name, "weight")) return false;
    for (size_t i = 0; i < sizeof k_never / sizeof k_never[0]; i++)
        if (strstr(name, k_never[i])) return false;
    if (strcmp(name, "position_embd.weight") == 0 || strcmp(name, "token_types.weight") == 0)
        return false;
    return true;
}

static bool enc_is_quantized(qp_encoding enc) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    return t && (t->flags & QP_ENC_FLAG_BLOCK);
}

void qp_plan_skip_note(char *buf, size_t cap, int64_t n_skipped, const char *first_name,
                       const char *first_rule) {
    if (n_skipped <= 0) {
        if (cap) buf[0] = '\0';
        return;
    }
    if (n_skipped == 1) snprintf(buf, cap, "%s (%s)", first_name, first_rule);
    else snprintf(buf, cap, "%s (%s) and %lld more (--dry-run lists each)", first_name, first_rule,
                  (long long)n_skipped - 1);
}

qp_status qp_recipe_check_requantize(const qp_model *m, const qp_plan_entry *pe, qp_encoding dst,
                                     bool allow_requantize, qp_err *e) {
    const qp_encoding_traits *st = qp_encoding_get(pe->src_enc), *tr = qp_encoding_get(dst);
    /* widening to a float type is always allowed (it loses nothing more); any other
       quantized -> quantized change needs the flag */
    if (allow_requantize || pe->src_kind != QP_SRC_PLAIN || dst == pe->src_enc ||
        !enc_is_quantized(pe->src_enc) || !tr || (tr->flags & QP_ENC_FLAG_FLOAT))
        return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is already quantized (%s); converting it "
                   "to %s would requantize it: pass --allow-requantize to accept the extra loss",
                   m->path, pe->name, st->upper_name, tr->upper_name);
}

static int64_t blck(qp_encoding enc) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    return t ? t->block_elems : 1;
}

typedef struct qstate {
    const qp_recipe_opts *o;
    const char *arch;
    bool tied, falcon;
    int n_gqa;
    int n_attention_wv, i_attention_wv, n_ffn_down, i_ffn_down;
    int64_t n_fallback;
    int64_t n_expert; /* llama.cpp's hparams.n_expert (its MoE rules) */
} qstate;

static bool ftype_is(const qstate *qs, qp_quant a) { return qs->o->quant == a; }

/* llama_tensor_get_type_impl for attn_v-like tensors (attn_v, attn_qkv, attn_kv_b). */
static qp_encoding attn_v_type(qstate *qs, qp_encoding t) {
    const int i = qs->i_attention_wv, n = qs->n_attention_wv;
    if (ftype_is(qs, QP_QUANT_Q2_K)) t = qs->n_gqa >= 4 ? QP_ENC_Q4_K : QP_ENC_Q3_K;
    else if (ftype_is(qs, QP_QUANT_Q2_K_S) && qs->n_gqa >= 4) t = QP_ENC_Q4_K;
    else if (ftype_is(qs, QP_QUANT_Q3_K_M)) t = i < 2 ? QP_ENC_Q5_K : QP_ENC_Q4_K;
    else if (ftype_is(qs, QP_QUANT_Q3_K_L)) t = QP_ENC_Q5_K;
    else if ((ftype_is(qs, QP_QUANT_IQ4_NL) || ftype_is(qs, QP_QUANT_IQ4_XS)) && qs->n_gqa >= 4) t = QP_ENC_Q5_K;
    else if ((ftype_is(qs, QP_QUANT_Q4_K_M) || ftype_is(qs, QP_QUANT_Q5_K_M)) && qp_recipe_use_more_bits(i, n))
        t = QP_ENC_Q6_K;
    else if (ftype_is(qs, QP_QUANT_Q4_K_S) && i < 4) t = QP_ENC_Q5_K;
    if (qs->o->is_70b && (t == QP_ENC_Q3_K || t == QP_ENC_Q4_K)) t = QP_ENC_Q5_K;
    if (qs->n_expert == 8) t = QP_ENC_Q8_0; /* "for the 8-expert model, bumping this to Q8_0" */
    ++qs->i_attention_wv;
    return t;
}

/* ... for ffn_down: i counts ffn_down tensors (with experts: the layer in the name, llama.cpp's
 * layer_info), n is the layer count */
static qp_encoding ffn_down_type(qstate *qs, qp_encoding t, const char *name) {
    const int i = qs->n_expert > 1 ? qp_recipe_layer_of(name) : qs->i_ffn_down, n = qs->n_ffn_down;
    const bool imatrix = qs->o->tensor.imatrix != NULL;
    if (ftype_is(qs, QP_QUANT_Q2_K)) t = QP_ENC_Q3_K;
    else if (ftype_is(qs, QP_QUANT_Q2_K_S)) {
        if (i < n / 8) t = QP_ENC_Q4_K;
    } else if (ftype_is(qs, QP_QUANT_Q3_K_M))
        t = i < n / 16 ? QP_ENC_Q5_K : !qs->falcon || qp_recipe_use_more_bits(i, n) ? QP_ENC_Q4_K : QP_ENC_Q3_K;
    else if (ftype_is(qs, QP_QUANT_Q3_K_L)) t = qs->falcon ? QP_ENC_Q4_K : QP_ENC_Q5_K;
    else if (ftype_is(qs, QP_QUANT_Q4_K_M)) {
        if (qs->falcon)
            t = i < n / 16 ? QP_ENC_Q6_K : qp_recipe_use_more_bits(i, n) ? QP_ENC_Q5_K : QP_ENC_Q4_K;
        else if (qp_recipe_use_more_bits(i, n))
            t = QP_ENC_Q6_K;
    } else if (i < n / 8 && (ftype_is(qs, QP_QUANT_IQ4_NL) || ftype_is(qs, QP_QUANT_IQ4_XS)) && !imatrix)
        t = QP_ENC_Q5_K;
    else if (ftype_is(qs, QP_QUANT_Q5_K_M) && qp_recipe_use_more_bits(i, n)) t = QP_ENC_Q6_K;
    else if (ftype_is(qs, QP_QUANT_Q4_K_S) && !qs->falcon && i < n / 8) t = QP_ENC_Q5_K;
    else if ((ftype_is(qs, QP_QUANT_Q4_0) || ftype_is(qs, QP_QUANT_Q5_0)) && imatrix && i < n / 8)
        t = ftype_is(qs, QP_QUANT_Q4_0) ? QP_ENC_Q4_1 : QP_ENC_Q5_1;
    ++qs->i_ffn_down;
    return t;
}

/* llama_tensor_get_type_impl for the ftypes we write, with its MoE rules (n_expert == 8: attn_v
 * and attn_k Q8_0, attn_output Q5_K for the K-quant mixes; ffn_down by the layer in its name);
 * the IQ1/IQ2/IQ3 mixtures are not reproduced. */
static bool attn_output_moe_q5k(const qstate *qs) {
    static const qp_quant k_q5k[] = {QP_QUANT_Q2_K, QP_QUANT_Q3_K_S, QP_QUANT_Q3_K_M, QP_QUANT_IQ4_NL,
                                     QP_QUANT_Q4_K_S, QP_QUANT_Q4_K_M, QP_QUANT_IQ4_XS};
    for (size_t i = 0; i < sizeof k_q5k / sizeof k_q5k[0]; i++)
        if (ftype_is(qs, k_q5k[i])) return true;
    return false;
}

static qp_encoding llama_type_impl(qstate *qs, qp_encoding new_type, const qp_plan_entry *pe, cat c) {
    const qp_recipe_opts *o = qs->o;
    if (c == CAT_OUTPUT || (qs->tied && c == CAT_TOKEN_EMBD)) {
        if (o->tensor.has_output_type) new_type = o->tensor.output_type;
        else if (qs->falcon || pe->ne[0] % blck(new_type) != 0) new_type = QP_ENC_Q8_0;
        else if (new_type != QP_ENC_Q8_0) new_type = QP_ENC_Q6_K;
    } else if (c == CAT_TOKEN_EMBD) {
        if (o->tensor.has_token_embd_type) new_type = o->tensor.token_embd_type;
        else if (ftype_is(qs, QP_QUANT_TQ1_0) || ftype_is(qs, QP_QUANT_TQ2_0)) new_type = QP_ENC_Q4_K;
    } else if (cat_is_attn_v(c)) {
        new_type = attn_v_type(qs, new_type);
    } else if (c == CAT_ATTN_K) {
        if (qs->n_expert == 8) new_type = QP_ENC_Q8_0;
    } else if (c == CAT_FFN_DOWN) {
        new_type = ffn_down_type(qs, new_type, pe->name);
    } else if (c == CAT_ATTN_OUTPUT) {
        if (!qs->falcon && qs->n_expert == 8) {
            if (attn_output_moe_q5k(qs)) new_type = QP_ENC_Q5_K;
        } else if (!qs->falcon) {
            if (ftype_is(qs, QP_QUANT_Q2_K)) new_type = QP_ENC_Q3_K;
            else if (ftype_is(qs, QP_QUANT_Q3_K_M)) new_type = QP_ENC_Q4_K;
            else if (ftype_is(qs, QP_QUANT_Q3_K_L)) new_type = QP_ENC_Q5_K;
        } else if (ftype_is(qs, QP_QUANT_Q3_K_L)) {
            new_type = QP_ENC_Q4_K;
        }
    } else if (c == CAT_ATTN_QKV) {
        if (ftype_is(qs, QP_QUANT_Q3_K_M) || ftype_is(qs, QP_QUANT_Q3_K_L)) new_type = QP_ENC_Q4_K;
        else if (ftype_is(qs, QP_QUANT_Q4_K_M)) new_type = QP_ENC_Q5_K;
        else if (ftype_is(qs, QP_QUANT_Q5_K_M)) new_type = QP_ENC_Q6_K;
    }
    return new_type;
}

/* tensor_type_fallback. */
static void llama_fallback(qstate *qs, qp_plan_entry *pe, qp_encoding *type) {
    qp_encoding t = *type;
    if (pe->ne[0] % blck(t) == 0) return;
    ++qs->n_fallback;
    pe->fallback = true;
    qp_encoding r;
    switch (t) {
    case QP_ENC_IQ1_S: case QP_ENC_IQ1_M: case QP_ENC_IQ2_XXS: case QP_ENC_IQ2_XS: case QP_ENC_IQ2_S:
    case QP_ENC_IQ3_XXS: case QP_ENC_IQ3_S: case QP_ENC_IQ4_XS: r = QP_ENC_IQ4_NL; break;
    case QP_ENC_Q2_K: case QP_ENC_Q3_K: case QP_ENC_TQ1_0: case QP_ENC_TQ2_0: r = QP_ENC_Q4_0; break;
    case QP_ENC_Q4_K: r = QP_ENC_Q5_0; break;
    case QP_ENC_Q5_K: r = QP_ENC_Q5_1; break;
    case QP_ENC_Q6_K: r = QP_ENC_Q8_0; break;
    default:
        /* The llama.cpp source we read throws "no tensor type fallback is defined" here; the
         * libllama we test against (npm node-llama-cpp 3.22.1) writes F16 instead (Q8_0 with
         * ne[0] % 32 != 0), and that is the behaviour reproduced. */
        r = QP_ENC_F16;
        break;
    }
    if (pe->ne[0] % blck(r) != 0) r = QP_ENC_F16;
    *type = r;
}

static qp_encoding default_type(qp_quant q) {
    return (unsigned)q < QP_QUANT_COUNT ? k_quants[q].base : QP_ENC_COUNT;
}

/* The seven ternary projections of a BitNet block. */
static bool is_bitnet_projection(const char *n) {
    static const char *const k_proj[] = {".attn_q.weight", ".attn_k.weight", ".attn_v.weight",
                                         ".attn_output.weight", ".ffn_gate.weight",
                                         ".ffn_up.weight", ".ffn_down.weight"};
    if (qp_recipe_layer_of(n) < 0) return false;
    for (size_t i = 0; i < sizeof k_proj / sizeof k_proj[0]; i++)
        if (ends_with(n, k_proj[i])) return true;
    return false;
}

static int cmp_llama(const void *a, const void *b) {
    const qp_plan_entry *x = a, *y = b;
    int la = qp_recipe_layer_of(x->name), lb = qp_recipe_layer_of(y->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(x->name, y->name);
}

void qp_plan_free(qp_plan *p) {
    if (!p) return;
    if (p->names)
        for (int64_t i = 0; i < p->n; i++) qp_free(p->names[i]);
    for (int64_t i = 0; p->t && i < p->n; i++) qp_free(p->t[i].parts);
    qp_free(p->names);
    qp_free(p->t);
    qp_free(p->skipped);
    memset(p, 0, sizeof *p);
}

/* Output name of a source tensor: canon when mapped (HF), else the source name for GGUF /
 * llama2.c sources. NULL: dropped. */
static const char *out_name(const qp_model *m, const qp_tensor *t) {
    if (t->canon) return t->canon;
    return m->format == QP_FORMAT_GGUF ? t->name : NULL;
}

static bool is_weight_scale(const char *name) { return ends_with(name, ".weight_scale"); }

/* Finds "<base>.weight_scale" for the output name "<base>.weight". */
static const qp_tensor *find_scale(const qp_model *m, const char *name) {
    char buf[160];
    size_t n = strlen(name);
    if (n < 7 || n + 7 >= sizeof buf || !ends_with(name, ".weight")) return NULL;
    snprintf(buf, sizeof buf, "%s_scale", name);
    return qp_model_find(m, buf);
}

/* A GGUF source's "<base>.scale" next to a "<base>.weight" whose encoding keeps its scale in a
 * sibling (QP_ENC_FLAG_SIBLING_SCALE: QK256): folded into the decoded weights (and written anew
 * after every such output), so not a tensor of its own. */
static bool is_sibling_scale(const qp_model *m, const qp_tensor *t) {
    size_t n = strlen(t->name);
    char w[160];
    if (m->format != QP_FORMAT_GGUF || n < 6 || n + 2 >= sizeof w || !ends_with(t->name, ".scale"))
        return false;
    snprintf(w, sizeof w, "%.*s.weight", (int)(n - 6), t->name);
    const qp_tensor *wt = qp_model_find(m, w);
    return wt && qp_encoding_has_sibling_scale(wt->enc);
}

static size_t plan_src_bytes(const qp_plan_entry *pe) {
    if (!pe->src) return 0; /* computed (QP_SRC_ROPE_FACTORS) */
    size_t n = 0;
    for (int64_t i = 0; i < pe->n_parts; i++) n += pe->parts[i]->nbytes;
    return pe->n_parts ? n : pe->src->nbytes;
}

/* An HF expert's name "blk.L.ffn_{gate,up,down}.E.weight" (readers/name_map.h): the merged
 * output name "blk.L.ffn_*_exps.weight" into merged and E; false for any other name. */
static bool expert_part(const char *name, char *merged, size_t cap, int64_t *index) {
    static const char *const k_kinds[] = {"ffn_gate", "ffn_up", "ffn_down"};
    int layer = qp_recipe_layer_of(name);
    const char *p = layer >= 0 ? strchr(name + 4, '.') : NULL;
    if (!p) return false;
    p++;
    for (size_t k = 0; k < sizeof k_kinds / sizeof k_kinds[0]; k++) {
        size_t kl = strlen(k_kinds[k]);
        if (strncmp(p, k_kinds[k], kl) != 0 || p[kl] != '.' || !isdigit((unsigned char)p[kl + 1]))
            continue;
        char *end;
        long long x = strtoll(p + kl + 1, &end, 10);
        if (strcmp(end, ".weight") != 0 || x < 0 || x > 100000) return false;
        int n = snprintf(merged, cap, "blk.%d.%s_exps.weight", layer, k_kinds[k]);
        *index = x;
        return n > 0 && (size_t)n < cap;
    }
    return false;
}

/* The sources of a merged expert entry (pe->src is expert 0): expert x from "<stem>.x.weight",
 * each 2-D of expert 0's shape and encoding; ne[2] = n_expert. */
static qp_status gather_experts(const qp_model *m, int64_t n_expert, qp_plan_entry *pe, qp_err *e) {
    if (n_expert <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is an expert, but the configuration "
                       "gives no expert count", m->path, pe->src->name);
    const char *stem_end = strstr(pe->name, "_exps.weight");
    pe->parts = qp_calloc((size_t)n_expert, sizeof *pe->parts);
    if (!pe->parts || !stem_end) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    pe->n_parts = n_expert;
    const qp_tensor *t0 = pe->src;
    for (int64_t x = 0; x < n_expert; x++) {
        char nm[128];
        snprintf(nm, sizeof nm, "%.*s.%lld.weight", (int)(stem_end - pe->name), pe->name, (long long)x);
        const qp_tensor *t = qp_model_find(m, nm);
        if (!t)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: expert tensor '%s' of '%s' is missing (%lld "
                           "experts)", m->path, nm, pe->name, (long long)n_expert);
        if (t->enc != t0->enc || t->n_dims != 2 || t->ne[0] != t0->ne[0] || t->ne[1] != t0->ne[1])
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: expert tensor '%s' differs in shape or "
                           "encoding from '%s'", m->path, t->name, t0->name);
        pe->parts[x] = t;
    }
    pe->n_dims = 3;
    pe->ne[2] = n_expert;
    return QP_OK;
}

/* Which part of a Qwen3.5 tensor holds value heads (rows, or elements within each row), as
 * convert_hf_to_gguf.py's _LinearAttentionVReorderBase reorders them. */
static void vhead_order(const qp_recipe_opts *o, const char *name, qp_vhead_order *v) {
    memset(v, 0, sizeof *v);
    if (o->ssm_nk <= 0 || o->ssm_nv == o->ssm_nk) return;
    static const struct {
        const char *suffix;
        bool value_width, after_keys, in_row;
    } k[] = {
        {"attn_qkv.weight", true, true, false}, {"ssm_conv1d.weight", true, true, false},
        {"attn_gate.weight", true, false, false}, {"ssm_beta.weight", false, false, false},
        {"ssm_alpha.weight", false, false, false}, {"ssm_out.weight", true, false, true},
        {"ssm_dt.bias", false, false, true}, {".ssm_a", false, false, true},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!ends_with(name, k[i].suffix)) continue;
        v->n_k = o->ssm_nk;
        v->per = o->ssm_nv / o->ssm_nk;
        v->width = k[i].value_width ? o->ssm_hv : 1;
        v->off = k[i].after_keys ? 2 * o->ssm_nk * o->ssm_hk : 0;
        v->in_row = k[i].in_row;
        return;
    }
}

void qp_vhead_order_tiled(const qp_arch *a, const char *gguf_name, qp_vhead_order *v) {
    qp_recipe_opts o = {0};
    if (gguf_name && a->family == QP_FAMILY_QWEN35 && a->ssm_heads_tiled && a->ssm_time_step_rank > 0) {
        o.ssm_nk = a->ssm_group_count;
        o.ssm_nv = a->ssm_time_step_rank;
        o.ssm_hk = a->ssm_state_size;
        o.ssm_hv = a->ssm_inner_size / a->ssm_time_step_rank;
    }
    vhead_order(&o, gguf_name ? gguf_name : "", v);
}

/* The named rules by which a source tensor is left out of an output (recipes.md "Every tensor
 * accounted for"); NULL for a tensor that must be mapped. */
static const char *skip_rule(const qp_model *m, const qp_tensor *t) {
    if (ends_with(t->name, ".rotary_emb.inv_freq"))
        return "rotary inv_freq: recomputed from rope_theta by every runtime";
    if (m->format != QP_FORMAT_GGUF && is_weight_scale(t->name))
        return "BitNet weight_scale: folded into its unpacked weight";
    if (is_sibling_scale(m, t)) return "sibling <base>.scale: folded into its decoded weight";
    if (m->format == QP_FORMAT_BULLET && !t->canon) return qp_bullet_skip_rule(t->name);
    if (m->format == QP_FORMAT_SAFETENSORS && !t->canon) return qp_name_map_skip_rule(m->arch.family, t->name);
    return NULL;
}

/* After every entry written in a sibling-scale encoding (QK256), its per-tensor scale as an F32 [1]
 * "<base>.scale" (the name llama.cpp's BitNet graph multiplies by and BitNet-rs looks for first). */
static qp_status add_sibling_scales(const qp_model *m, qp_plan *p, qp_err *e) {
    int64_t k = 0;
    for (int64_t i = 0; i < p->n; i++) k += qp_encoding_has_sibling_scale(p->t[i].dst_enc);
    if (k == 0) return QP_OK;
    int64_t n = p->n + k;
    qp_plan_entry *t = qp_calloc((size_t)n, sizeof *t);
    char **names = qp_calloc((size_t)n, sizeof *names);
    if (!t || !names) {
        qp_free(t);
        qp_free(names);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    }
    int64_t j = 0;
    for (int64_t i = 0; i < p->n; i++) {
        t[j++] = p->t[i];
        if (!qp_encoding_has_sibling_scale(p->t[i].dst_enc)) continue;
        char sn[160];
        qp_plan_entry *se = &t[j];
        if (!qp_gguf_scale_name(p->t[i].name, sn, sizeof sn) || !(names[j] = qp_strdup(sn))) {
            for (int64_t x = 0; x < j; x++) qp_free(names[x]);
            qp_free(t);
            qp_free(names);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        }
        for (int64_t x = 0; x < p->n; x++)
            if (strcmp(p->t[x].name, sn) == 0) {
                for (int64_t y = 0; y <= j; y++) qp_free(names[y]);
                qp_free(t);
                qp_free(names);
                return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' would clash with the %s "
                               "scale of '%s'", m->path, sn, qp_encoding_get(p->t[i].dst_enc)->upper_name,
                               p->t[i].name);
            }
        se->src = p->t[i].src;
        se->name = names[j];
        se->src_kind = QP_SRC_SCALE_OF_PREV;
        se->src_enc = QP_ENC_F32;
        se->dst_enc = QP_ENC_F32;
        se->ggml_type = qp_encoding_get(QP_ENC_F32)->ggml_type;
        se->n_dims = 1;
        for (int d = 0; d < QP_MAX_DIMS; d++) se->ne[d] = 1;
        se->dst_bytes = sizeof(float);
        se->convert = true;
        p->dst_bytes += se->dst_bytes;
        j++;
    }
    /* names of the old entries move with them: rebuild the owned-name list in the new order */
    int64_t o = 0;
    for (int64_t i = 0; i < n; i++)
        if (t[i].src_kind != QP_SRC_SCALE_OF_PREV) names[i] = p->names[o++];
    qp_free(p->t);
    qp_free(p->names);
    p->t = t;
    p->names = names;
    p->n = n;
    return QP_OK;
}

/* llama.cpp's LlamaModel.generate_extra_tensors: a llama3 rope_scaling becomes the F32 tensor
 * "rope_freqs.weight" [head_dim / 2] of per-pair frequency divisors (recipes.md "Rope factors"). */
static qp_status add_rope_factors(const qp_model *m, const qp_recipe_opts *o, qp_plan *p, qp_err *e) {
    if (!o->rope_factors || !(m->arch.rope_llama3.factor > 0.0) || qp_model_find(m, "rope_freqs.weight"))
        return QP_OK;
    int64_t half = m->arch.head_dim / 2;
    if (half <= 0 || m->arch.head_dim % 2 != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: rope_freqs.weight needs an even head_dim, not %lld",
                       m->path, (long long)m->arch.head_dim);
    qp_plan_entry *t = qp_realloc(p->t, (size_t)(p->n + 1) * sizeof *t);
    if (t) p->t = t;
    char **names = t ? qp_realloc(p->names, (size_t)(p->n + 1) * sizeof *names) : NULL;
    if (names) p->names = names;
    char *name = names ? qp_strdup("rope_freqs.weight") : NULL;
    if (!name) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    qp_plan_entry *pe = &p->t[p->n];
    *pe = (qp_plan_entry){.name = name, .src_kind = QP_SRC_ROPE_FACTORS, .src_enc = QP_ENC_F32,
                          .dst_enc = QP_ENC_F32, .ggml_type = qp_encoding_get(QP_ENC_F32)->ggml_type,
                          .n_dims = 1, .dst_bytes = (size_t)half * sizeof(float), .convert = true,
                          .action = "computed from rope_scaling (llama3)"};
    for (int d = 0; d < QP_MAX_DIMS; d++) pe->ne[d] = d == 0 ? half : 1;
    p->names[p->n++] = name;
    p->dst_bytes += pe->dst_bytes;
    return QP_OK;
}

/* The importance weights of an entry, looked up by its output name as llama_model_quantize does:
 * none found is fine (quantized without); a size other than ne[0] x ne[2] is an error except for
 * token_embd (quantized without). */
static qp_status attach_imatrix(const qp_recipe_opts *o, const qp_model *m, qp_plan_entry *pe,
                                cat c, qp_err *e) {
    for (int64_t i = 0; i < o->tensor.n_imatrix; i++) {
        const qp_imatrix_entry *ie = &o->tensor.imatrix[i];
        if (strcmp(ie->name, pe->name) != 0) continue;
        if (ie->n == pe->ne[0] * pe->ne[2]) pe->imatrix = ie->values;
        else if (c != CAT_TOKEN_EMBD)
            return qp_fail(e, QP_ERR_ARG, "%s: the importance matrix has %lld values for tensor '%s', "
                           "which needs %lld (ne[0] x experts): it was made for another model",
                           m->path, (long long)ie->n, pe->name, (long long)(pe->ne[0] * pe->ne[2]));
        break;
    }
    return QP_OK;
}

/* The first --tensor-type pattern that matches name (regexec: a match anywhere), or NULL. */
static const qp_tensor_type_override *override_of(const qp_recipe_opts *o, const char *name,
                                                  qp_status *st, const char *path, qp_err *e) {
    for (int i = 0; i < o->tensor.n_overrides; i++) {
        regex_t re;
        int rc = regcomp(&re, o->tensor.overrides[i].pattern, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[128];
            regerror(rc, &re, msg, sizeof msg);
            *st = qp_fail(e, QP_ERR_ARG, "%s: --tensor-type pattern '%s': %s", path,
                          o->tensor.overrides[i].pattern, msg);
            return NULL;
        }
        rc = regexec(&re, name, 0, NULL, 0);
        regfree(&re);
        if (rc == 0) return &o->tensor.overrides[i];
    }
    return NULL;
}

/* llama_tensor_requires_imatrix: IQ1/IQ2/IQ3_XXS targets, and Q2_K in a Q2_K_S file, except the
 * embeddings and the output. */
static bool requires_imatrix(const qstate *qs, cat c, qp_encoding t) {
    if (c == CAT_TOKEN_EMBD || c == CAT_OUTPUT) return false;
    switch (t) {
    case QP_ENC_IQ3_XXS: case QP_ENC_IQ2_XXS: case QP_ENC_IQ2_XS: case QP_ENC_IQ2_S:
    case QP_ENC_IQ1_M: case QP_ENC_IQ1_S: return true;
    case QP_ENC_Q2_K: return ftype_is(qs, QP_QUANT_Q2_K_S);
    default: return false;
    }
}

/* --token-embedding-type / --output-tensor-type: the type they give a tensor of category c. */
static bool explicit_type(const qp_recipe_opts *o, cat c, qp_encoding *t) {
    if (o->tensor.has_token_embd_type && c == CAT_TOKEN_EMBD) *t = o->tensor.token_embd_type;
    else if (o->tensor.has_output_type && c == CAT_OUTPUT) *t = o->tensor.output_type;
    else return false;
    return true;
}

/* llama_tensor_get_type (a tensor that allows quantization): the per-tensor options, then the
 * ftype's mixture unless --pure or a --tensor-type pattern chose, then the shape fallback. */
static qp_status llama_get_type(qstate *qs, const qp_model *m, qp_plan_entry *pe, cat c,
                                qp_encoding *out, qp_err *e) {
    const qp_recipe_opts *o = qs->o;
    qp_status st = QP_OK;
    qp_encoding t = default_type(o->quant);
    if (!explicit_type(o, c, &t) && enc_is_quantized(t)) {
        const qp_tensor_type_override *ov = override_of(o, pe->name, &st, m->path, e);
        if (st != QP_OK) return st;
        if (ov) t = ov->enc;
        else if (!o->tensor.pure) t = llama_type_impl(qs, t, pe, c);
        llama_fallback(qs, pe, &t);
    }
    if (requires_imatrix(qs, c, t) && !o->tensor.imatrix)
        return qp_fail(e, QP_ERR_ARG, "%s: tensor '%s' would be %s, which needs an importance matrix "
                       "(--imatrix FILE from llama-imatrix), as llama-quantize requires for %s",
                       m->path, pe->name, qp_encoding_get(t)->upper_name, qp_quant_name(o->quant));
    *out = t;
    return QP_OK;
}

static qp_status plan_entry_target(qstate *qs, const qp_model *m, qp_plan_entry *pe, qp_err *e) {
    const qp_recipe_opts *o = qs->o;
    cat c = category_of(pe->name);
    int nd = effective_dims(pe->ne, pe->n_dims);
    qp_encoding src = pe->src_enc;
    qp_encoding dst = src;
    if (pe->src_kind == QP_SRC_BITNET_U8) src = QP_ENC_F32; /* decoded as floats */
    if (qp_quant_bitnet_recipe(o->quant, m)) {
        if (is_bitnet_projection(pe->name) && nd == 2) {
            /* the recipe's ternary type unless a --tensor-type pattern chose (a ternary type is
               reached by BitNet's absmean ternarization, any other by its own encoder) */
            qp_status st = QP_OK;
            const qp_tensor_type_override *ov = override_of(o, pe->name, &st, m->path, e);
            if (st != QP_OK) return st;
            qp_encoding t = ov ? ov->enc : default_type(o->quant);
            const qp_encoding_traits *tt = qp_encoding_get(t);
            if (pe->ne[0] % tt->block_elems != 0) {
                dst = QP_ENC_F32;
                pe->fallback = true;
                qs->n_fallback++;
            } else {
                dst = t;
                pe->ternary = (tt->flags & (QP_ENC_FLAG_TERNARY | QP_ENC_FLAG_SIBLING_SCALE)) != 0;
            }
        } else if (!explicit_type(o, c, &dst)) {
            dst = src == QP_ENC_BF16 ? QP_ENC_F32 : src; /* kept; BF16 widened exactly */
        }
    } else if (allows_quantization(pe->name, nd) && !(o->tensor.leave_output && c == CAT_OUTPUT)) {
        qp_status s = llama_get_type(qs, m, pe, c, &dst, e);
        if (s != QP_OK) return s;
    }
    if (pe->src_kind == QP_SRC_BITNET_U8 && dst == src && !pe->ternary) dst = QP_ENC_F32;
    /* HF sources: as convert_hf_to_gguf.py, 1-D tensors and norms are stored F32 (widened exactly
     * from F16 / BF16); llama.cpp's CPU kernels expect F32 norms. */
    if (m->format != QP_FORMAT_GGUF && dst == pe->src_enc && pe->src_kind == QP_SRC_PLAIN &&
        (dst == QP_ENC_F16 || dst == QP_ENC_BF16) && (nd == 1 || strstr(pe->name, "_norm.weight")))
        dst = QP_ENC_F32;
    /* a kept encoding GGUF has no type for (a .bullet's BQ4 norms) is widened to F32: exact,
     * and widening is always allowed */
    if (dst == pe->src_enc && pe->src_kind == QP_SRC_PLAIN && qp_encoding_gguf_type(dst) < 0)
        dst = QP_ENC_F32;
    /* ... and so are the MoE router and Qwen3.5's conv kernel (convert_hf_to_gguf.py keeps
       FFN_GATE_INP and SSM_CONV1D in F32; ggml's ssm_conv takes F32 only) */
    if (m->format != QP_FORMAT_GGUF &&
        (strstr(pe->name, "ffn_gate_inp.weight") || strstr(pe->name, "ssm_conv1d.weight")) &&
        (dst == QP_ENC_F16 || dst == QP_ENC_BF16))
        dst = QP_ENC_F32;
    pe->dst_enc = dst;
    pe->convert = pe->src_kind != QP_SRC_PLAIN || dst != pe->src_enc || pe->permute_heads > 0 ||
                  pe->plus_one || pe->neg_exp || pe->vheads.n_k > 0;
    if ((pe->permute_heads > 0 || pe->vheads.n_k > 0) && dst == pe->src_enc && !enc_is_quantized(dst))
        pe->convert = true; /* rows are moved, bytes kept */
    const qp_encoding_traits *tr = qp_encoding_get(dst);
    if (!tr || qp_encoding_gguf_type(dst) < 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding %s cannot be stored in GGUF",
                       m->path, pe->name, tr ? tr->upper_name : "?");
    /* an encoding without a GGUF type of its own (QK256) is written under a shared one, told
     * apart by the quantpack.i2s.flavour key (readers/gguf.md "Type 36 flavours") */
    pe->ggml_type = qp_encoding_gguf_type(dst);
    if (pe->convert) {
        const qp_encoding_traits *st = qp_encoding_get(pe->src_enc);
        qp_status rs = qp_recipe_check_requantize(m, pe, dst, o->allow_requantize, e);
        if (rs != QP_OK) return rs;
        if (pe->src_kind == QP_SRC_PLAIN && (!st || !st->dequantize))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': cannot decode source encoding %s",
                           m->path, pe->name, st ? st->upper_name : "?");
        if (!(tr->quantize_ref || tr->quantize || tr->quantize_tensor))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': no quantizer for %s", m->path,
                           pe->name, tr->upper_name);
        if (pe->src_kind == QP_SRC_PLAIN && (st->flags & QP_ENC_FLAG_EXT_SCALE) && !st->tensor_trailer_bytes)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': %s keeps its scales in another "
                           "tensor and cannot be decoded here", m->path, pe->name, st->upper_name);
    }
    int64_t total = 1;
    for (int d = 0; d < pe->n_dims; d++) total *= pe->ne[d];
    if (!qp_encoding_tensor_bytes(dst, total, &pe->dst_bytes))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': %lld elements do not fit %s blocks",
                       m->path, pe->name, (long long)total, tr->upper_name);
    if (!tr->tensor_trailer_bytes && pe->ne[0] % tr->block_elems != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': row length %lld is not a multiple of "
                       "the %s block size %lld", m->path, pe->name, (long long)pe->ne[0],
                       tr->upper_name, (long long)tr->block_elems);
    if (!pe->convert && pe->dst_bytes != plan_src_bytes(pe))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': %zu bytes where %zu were expected",
                       m->path, pe->name, pe->src->nbytes, pe->dst_bytes);
    qp_status s = pe->convert && tr->quantize_imatrix ? attach_imatrix(o, m, pe, c, e) : QP_OK;
    if (s == QP_OK && pe->convert && o->tensor.imatrix && !pe->imatrix && requires_imatrix(qs, c, dst))
        s = qp_fail(e, QP_ERR_ARG, "%s: the importance matrix has no weights for tensor '%s', which "
                    "would be %s in %s (llama-quantize refuses it too)", m->path, pe->name,
                    tr->upper_name, qp_quant_name(o->quant));
    return s;
}

qp_status qp_recipe_plan(const qp_model *m, const qp_recipe_opts *o, qp_plan *out, qp_err *e) {
    if (!m || !o || !out) return qp_fail(e, QP_ERR_ARG, "qp_recipe_plan: NULL argument");
    if ((unsigned)o->quant >= QP_QUANT_COUNT)
        return qp_fail(e, QP_ERR_ARG, "qp_recipe_plan: unknown recipe %d", (int)o->quant);
    qp_plan p = {0};
    p.quant = o->quant;
    p.file_type = qp_quant_file_type(o->quant);
    p.t = qp_calloc(m->n_tensors ? (size_t)m->n_tensors : 1, sizeof *p.t);
    p.names = qp_calloc(m->n_tensors ? (size_t)m->n_tensors : 1, sizeof *p.names);
    p.skipped = qp_calloc(m->n_tensors ? (size_t)m->n_tensors : 1, sizeof *p.skipped);
    if (!p.t || !p.names || !p.skipped) {
        qp_plan_free(&p);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    }
    qp_status s = QP_OK;
    for (int64_t i = 0; i < m->n_tensors && s == QP_OK; i++) {
        const qp_tensor *t = &m->tensors[i];
        const char *rule = skip_rule(m, t);
        if (rule) {
            p.skipped[p.n_skipped++] = (qp_plan_skip){t, rule};
            continue;
        }
        const char *name = out_name(m, t);
        if (!name) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' (%s) has no place in the output: it "
                        "maps to no GGUF name and no rule skips it (architecture '%s' is not fully "
                        "supported; nothing is dropped silently)", m->path, t->name,
                        qp_encoding_get(t->enc) ? qp_encoding_get(t->enc)->upper_name : "?",
                        m->arch_name ? m->arch_name : "unknown");
            break;
        }
        char merged[128];
        int64_t ex = -1;
        if (o->n_expert <= 0 && (strstr(name, "ffn_gate_inp.") || strstr(name, "_exps.") ||
                                 expert_part(name, merged, sizeof merged, &ex))) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has no place in the output: it "
                        "belongs to a mixture of experts, but the configuration gives no expert "
                        "count (num_local_experts / expert_count)", m->path, t->name);
            break;
        }
        ex = -1;
        if (o->merge_experts && m->format != QP_FORMAT_GGUF &&
            expert_part(name, merged, sizeof merged, &ex)) {
            if (ex >= o->n_expert && o->n_expert > 0)
                s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is expert %lld of %lld", m->path,
                            t->name, (long long)ex, (long long)o->n_expert);
            if (ex > 0 && o->n_expert > 0) continue; /* a slice of the entry made at expert 0 */
            name = merged;
        }
        char *copy = s == QP_OK ? qp_strdup(name) : NULL;
        if (!copy) {
            if (s == QP_OK) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
            break;
        }
        qp_plan_entry *pe = &p.t[p.n];
        p.names[p.n++] = copy;
        pe->src = t;
        pe->name = copy;
        pe->src_enc = t->enc;
        pe->n_dims = effective_dims(t->ne, t->n_dims);
        for (int d = 0; d < QP_MAX_DIMS; d++) pe->ne[d] = d < t->n_dims ? t->ne[d] : 1;
        if (ex >= 0 && (s = gather_experts(m, o->n_expert, pe, e)) != QP_OK) break;
        if (qp_encoding_has_sibling_scale(t->enc)) { /* rows decode at unit scale, times the sibling */
            char sn[160];
            if (qp_gguf_scale_name(t->name, sn, sizeof sn)) pe->src_scale = qp_model_find(m, sn);
            float v;
            if (pe->src_scale && !qp_gguf_sibling_scale(m, t, &v)) pe->src_scale = NULL;
        }
        if (m->format != QP_FORMAT_GGUF && t->enc == QP_ENC_U8 && m->arch.family == QP_FAMILY_BITNET) {
            const qp_tensor *sc = find_scale(m, t->name);
            if (!sc) sc = find_scale(m, name);
            if (!sc || t->n_dims != 2 || qp_tensor_nelements(sc) != 1)
                s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': packed U8 BitNet weight without "
                            "a one-element '%s_scale'", m->path, t->name, t->name);
            else if (!qp_encoding_get(sc->enc) || !qp_encoding_get(sc->enc)->dequantize ||
                     (qp_encoding_get(sc->enc)->flags & QP_ENC_FLAG_BLOCK))
                s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': weight_scale of type %s",
                            m->path, sc->name, qp_encoding_get(sc->enc) ?
                            qp_encoding_get(sc->enc)->upper_name : "?");
            pe->src_kind = QP_SRC_BITNET_U8;
            pe->src_scale = sc;
            pe->ne[1] = t->ne[1] * 4;
        }
        pe->plus_one = o->norm_plus_one && ends_with(name, "norm.weight") && !ends_with(name, "ssm_norm.weight");
        pe->neg_exp = o->ssm_a_log && ends_with(name, ".ssm_a");
        vhead_order(o, name, &pe->vheads);
        if (ends_with(name, "ssm_conv1d.weight") && pe->n_dims == 3 && pe->ne[1] == 1) {
            pe->ne[1] = pe->ne[2]; /* HF's Conv1d [channels, 1, kernel] squeezed, as llama.cpp's */
            pe->ne[2] = 1;
            pe->n_dims = 2;
        }
        if (o->permute_qk && pe->n_dims == 2 &&
            (ends_with(name, "attn_q.weight") || ends_with(name, "attn_k.weight") ||
             ends_with(name, "attn_q.bias") || ends_with(name, "attn_k.bias"))) {
            bool is_q = strstr(name, "attn_q.") != NULL;
            pe->permute_heads = is_q ? o->n_head : o->n_head_kv;
        } else if (o->permute_qk && pe->n_dims == 1 &&
                   (ends_with(name, "attn_q.bias") || ends_with(name, "attn_k.bias"))) {
            pe->permute_heads = strstr(name, "attn_q.") ? o->n_head : o->n_head_kv;
        }
        if (pe->permute_heads > 0) {
            int64_t rows = pe->n_dims == 1 ? pe->ne[0] : pe->ne[1];
            if (rows % (2 * pe->permute_heads) != 0)
                s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': %lld rows cannot be split into "
                            "%lld heads of even size for the q/k permutation", m->path, name,
                            (long long)rows, (long long)pe->permute_heads);
        }
    }
    if (s == QP_OK && o->sort_llama && p.n > 1) qsort(p.t, (size_t)p.n, sizeof *p.t, cmp_llama);
    qstate qs = {.o = o, .arch = m->arch_name, .tied = true, .n_expert = o->n_expert};
    qs.falcon = m->arch_name && strcmp(m->arch_name, "falcon") == 0;
    qs.n_gqa = o->n_head_kv > 0 && o->n_head > 0 ? (int)(o->n_head / o->n_head_kv) : 1;
    for (int64_t i = 0; i < p.n && s == QP_OK; i++) {
        cat c = category_of(p.t[i].name);
        if (cat_is_attn_v(c)) qs.n_attention_wv++;
        if (c == CAT_OUTPUT) qs.tied = false;
    }
    if (s == QP_OK) {
        qs.n_ffn_down = (int)o->n_layer;
        if (qs.n_ffn_down <= 0)
            for (int64_t i = 0; i < p.n; i++)
                if (category_of(p.t[i].name) == CAT_FFN_DOWN) qs.n_ffn_down++;
    }
    for (int64_t i = 0; i < p.n && s == QP_OK; i++) {
        s = plan_entry_target(&qs, m, &p.t[i], e);
        if (s == QP_OK) {
            p.src_bytes += plan_src_bytes(&p.t[i]);
            p.dst_bytes += p.t[i].dst_bytes;
        }
    }
    if (s == QP_OK) s = add_sibling_scales(m, &p, e);
    if (s == QP_OK) s = add_rope_factors(m, o, &p, e);
    if (s != QP_OK) {
        qp_plan_free(&p);
        return s;
    }
    p.n_fallback = qs.n_fallback;
    *out = p;
    return QP_OK;
}
