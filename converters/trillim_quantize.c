/* trillim-quantize: manifest -> qmodel.tensors + rope.cache + qmodel.lora.
 * Rules (roles, padding, scales): readers/trlm.md. */
#include "converters/trillim_quantize.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "encodings/encodings_internal.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "writers/trlm_writer.h"

#define R(x) QP_TRLM_ROLE_##x
static const qp_trlm_role k_pat_llama[] = {R(ATTN_NORM), R(K), R(V), R(Q), R(O), R(FFN_NORM),
                                           R(GATE), R(UP), R(DOWN)};
static const qp_trlm_role k_pat_bias[] = {R(ATTN_NORM), R(K), R(K_BIAS), R(V), R(V_BIAS), R(Q),
                                          R(Q_BIAS), R(O), R(FFN_NORM), R(GATE), R(UP), R(DOWN)};
static const qp_trlm_role k_pat_bitnet[] = {R(ATTN_NORM), R(ATTN_SUB_NORM), R(K), R(V), R(Q), R(O),
                                            R(FFN_NORM), R(GATE), R(UP), R(FFN_SUB_NORM), R(DOWN)};
/* the current SDK's Qwen3ForCausalLM component_order (arch 4-6) */
static const qp_trlm_role k_pat_qwen3[] = {R(ATTN_NORM), R(K), R(V), R(Q), R(Q_NORM), R(K_NORM), R(O),
                                           R(FFN_NORM), R(GATE), R(UP), R(DOWN)};
/* the same with attention_bias: the SDK sorts each q/k/v bias right after its weight */
static const qp_trlm_role k_pat_qwen3_bias[] = {R(ATTN_NORM), R(K), R(K_BIAS), R(V), R(V_BIAS), R(Q), R(Q_BIAS),
                                                R(Q_NORM), R(K_NORM), R(O), R(FFN_NORM), R(GATE), R(UP), R(DOWN)};
/* the current SDK's Qwen3_5ForConditionalGeneration component_order (arch 3), each layer holding
 * only its own: a gated delta-net layer, then a full-attention one */
static const qp_trlm_role k_pat_qwen35_linear[] = {R(ATTN_NORM), R(SSM_A), R(SSM_CONV1D), R(SSM_DT), R(SSM_ALPHA),
                                                   R(SSM_BETA), R(SSM_QKV), R(SSM_GATE), R(SSM_NORM), R(SSM_OUT),
                                                   R(FFN_NORM), R(GATE), R(UP), R(DOWN)};
static const qp_trlm_role k_pat_qwen35_full[] = {R(ATTN_NORM), R(K_NORM), R(Q_NORM), R(K), R(V), R(Q), R(O),
                                                 R(FFN_NORM), R(GATE), R(UP), R(DOWN)};
#undef R

typedef struct pattern {
    const qp_trlm_role *roles;
    uint32_t n;
} pattern;

/* The TRLM kind each manifest action is stored as (converters/trillim_sdk.md "Bodies"). */
static qp_trlm_kind kind_of_action(uint8_t action) {
    static const qp_trlm_kind k[QP_TRILLIM_ACTION_COUNT] = {
        [QP_TRILLIM_BF16_RAW] = QP_TRLM_KIND_BF16,
        [QP_TRILLIM_TERNARY_QUANTIZE] = QP_TRLM_KIND_TERNARY,
        [QP_TRILLIM_EMBEDDING_I8] = QP_TRLM_KIND_I8ROWS,
        [QP_TRILLIM_REPACK_TERNARY] = QP_TRLM_KIND_TERNARY,
        [QP_TRILLIM_Q1_0_128] = QP_TRLM_KIND_Q1_0_128,
        [QP_TRILLIM_GROUP_TERNARY_QUANTIZE] = QP_TRLM_KIND_TG128,
        [QP_TRILLIM_Q8_0_QUANTIZE] = QP_TRLM_KIND_Q8_0,
        [QP_TRILLIM_Q8_0_BLOCKED_32_QUANTIZE] = QP_TRLM_KIND_Q8_0_B32,
    };
    return k[action]; /* the parser admits only known actions */
}

/* Logical rows of an entry: a U8 REPACK_TERNARY source packs 4 rows per byte row. */
static uint32_t logical_rows(const qp_trillim_entry *t) {
    return t->action == QP_TRILLIM_REPACK_TERNARY && t->dtype == QP_TRILLIM_U8 ? t->rows * 4 : t->rows;
}

static uint32_t pad_rule(uint32_t d, const qp_trillim_quant_opts *o) {
    if ((int64_t)d == o->intermediate_orig && o->intermediate != o->intermediate_orig)
        return (uint32_t)o->intermediate;
    if ((int64_t)d == o->hidden_orig && o->hidden != o->hidden_orig) return (uint32_t)o->hidden;
    return d;
}

qp_status qp_trillim_entry_output(const qp_trillim_entry *t, const qp_trillim_quant_opts *o,
                                  qp_encoding *enc, uint64_t *bytes, qp_err *e) {
    if (t->action >= QP_TRILLIM_ACTION_COUNT)
        return qp_fail(e, QP_ERR_ARG, "manifest action %u is not one we know", t->action);
    qp_trlm_kind kind = kind_of_action(t->action);
    uint32_t rows = logical_rows(t), pr = rows == t->rows ? t->padded_rows : pad_rule(rows, o);
    if (!qp_trlm_data_size(kind, pr, t->padded_cols, bytes))
        return qp_fail(e, QP_ERR_LIMIT, "a %u x %u tensor is too large for TRLM", pr, t->padded_cols);
    *enc = kind == QP_TRLM_KIND_BF16      ? QP_ENC_BF16
           : kind == QP_TRLM_KIND_TERNARY ? QP_ENC_TRLM_T2
                                          : qp_trlm_kind_encoding(kind);
    return QP_OK;
}

#define N_PAT(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))

/* Whether entries t[0..n) have the 1-D/2-D shapes of the roles pat[0..n). */
static bool fits(const qp_trillim_entry *t, uint32_t avail, const qp_trlm_role *pat, uint32_t n) {
    if (avail < n) return false;
    for (uint32_t k = 0; k < n; k++)
        if (qp_trlm_role_is_1d(pat[k]) != (t[k].cols == 1)) return false;
    return true;
}

/* Arch 3's layers after entry i: each a delta-net layer (14) or a full-attention one (11), told
 * apart by the third entry (conv1d, 2-D, or q_norm, 1-D); the layer kind is checked against
 * the interval pattern by the reader (config.json's full_attention_interval). */
static qp_status assign_qwen35_layers(const qp_trillim_entry *t, uint32_t n, uint32_t i, qp_trlm_record *rec,
                                      uint32_t *n_layers, const char *file, qp_err *e) {
    uint32_t l = 0;
    while (i < n) {
        const qp_trlm_role *pat = k_pat_qwen35_linear;
        uint32_t np = N_PAT(k_pat_qwen35_linear);
        if (!fits(t + i, n - i, pat, np)) pat = k_pat_qwen35_full, np = N_PAT(k_pat_qwen35_full);
        if (!fits(t + i, n - i, pat, np))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entries from %u (layer %u) follow neither of the SDK's "
                           "Qwen3.5 layer layouts (delta-net, 14: input_layernorm, A_log, conv1d, dt_bias, in_proj_a, "
                           "in_proj_b, in_proj_qkv, in_proj_z, norm, out_proj, post_attention_layernorm, gate, up, "
                           "down; full attention, 11: input_layernorm, k_norm, q_norm, k, v, q, o, "
                           "post_attention_layernorm, gate, up, down) in order and 1-D/2-D shape", file, i, l);
        for (uint32_t k = 0; k < np; k++) rec[i + k].role = pat[k], rec[i + k].layer = l;
        i += np;
        if (++l > QP_TRLM_MAX_LAYERS)
            return qp_fail(e, QP_ERR_LIMIT, "%s: more than %u layers", file, QP_TRLM_MAX_LAYERS);
    }
    *n_layers = l;
    return l ? QP_OK : qp_fail(e, QP_ERR_CORRUPT, "%s: no layer entries", file);
}

/* Assigns a role and layer to every entry (SDK v1 order). */
static qp_status assign_roles(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                              qp_trlm_record *rec, uint32_t *n_layers, const char *file, qp_err *e) {
    uint32_t n = m->n_entries, i = 0;
    const qp_trillim_entry *t = m->entries;
    if (n < 3 || t[0].cols == 1)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: the first tensor entry must be the 2-D token "
                       "embedding (%u entries)", file, n);
    rec[i].role = QP_TRLM_ROLE_EMBED, rec[i].layer = QP_TRLM_LAYER_NONE, i++;
    if (t[i].cols != 1) {
        if (o->tie_embeddings)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry 1 is a 2-D lm_head but "
                           "--tie-embeddings was given (the SDK skips lm_head when tied)", file);
        rec[i].role = QP_TRLM_ROLE_OUTPUT, rec[i].layer = QP_TRLM_LAYER_NONE, i++;
    }
    if (i >= n || t[i].cols != 1)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u must be the 1-D final norm", file, i);
    rec[i].role = QP_TRLM_ROLE_OUTPUT_NORM, rec[i].layer = QP_TRLM_LAYER_NONE, i++;
    if (o->arch == QP_TRLM_ARCH_QWEN35) return assign_qwen35_layers(t, n, i, rec, n_layers, file, e);
    uint32_t rest = n - i;
    pattern pats[3];
    int n_pats = 3;
    if (qp_trlm_arch_is_qwen3((uint32_t)o->arch)) {
        pats[0] = (pattern){k_pat_qwen3, 11};
        pats[1] = (pattern){k_pat_qwen3_bias, 14};
        n_pats = 2;
    } else if (o->arch == QP_TRLM_ARCH_BITNET) {
        pats[0] = (pattern){k_pat_bitnet, 11};
        pats[1] = (pattern){k_pat_llama, 9};
        pats[2] = (pattern){k_pat_bias, 12};
    } else {
        pats[0] = (pattern){k_pat_llama, 9};
        pats[1] = (pattern){k_pat_bias, 12};
        pats[2] = (pattern){k_pat_bitnet, 11};
    }
    for (int p = 0; p < n_pats; p++) {
        if (rest == 0 || rest % pats[p].n != 0) continue;
        bool ok = true;
        for (uint32_t k = 0; k < rest && ok; k++) {
            qp_trlm_role r = pats[p].roles[k % pats[p].n];
            ok = qp_trlm_role_is_1d(r) == (t[i + k].cols == 1);
        }
        if (!ok) continue;
        for (uint32_t k = 0; k < rest; k++) {
            rec[i + k].role = pats[p].roles[k % pats[p].n];
            rec[i + k].layer = k / pats[p].n;
        }
        *n_layers = rest / pats[p].n;
        if (*n_layers > QP_TRLM_MAX_LAYERS)
            return qp_fail(e, QP_ERR_LIMIT, "%s: %u layers (at most %u)", file, *n_layers,
                           QP_TRLM_MAX_LAYERS);
        return QP_OK;
    }
    if (n_pats == 2)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: the %u per-layer tensor entries (after entry %u) do not "
                       "follow the SDK's Qwen3 layer layout (11 per layer: input_layernorm, k, v, q, "
                       "q_norm, k_norm, o, post_attention_layernorm, gate, up, down; 14 with each q/k/v "
                       "bias after its weight) in order and 1-D/2-D shape", file, rest, i);
    return qp_fail(e, QP_ERR_CORRUPT, "%s: the %u per-layer tensor entries (after entry %u) follow "
                   "none of the SDK v1 layer layouts (Llama: 9 per layer, Llama with q/k/v bias: "
                   "12, BitNet with sub-norms: 11) in order and 1-D/2-D shape", file, rest, i);
}

/* Shape rules between roles (readers/trlm.md, "Roles"). */
static qp_status check_shapes(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                              const qp_trlm_record *rec, uint32_t n_layers, const char *file,
                              qp_err *e) {
    const uint32_t H = (uint32_t)o->hidden_orig, I = (uint32_t)o->intermediate_orig;
    /* per layer, the rows/cols of each role (from its first layer: Qwen3.5's layer 0 has no q),
       checked against every layer */
    uint32_t rows0[QP_TRLM_ROLE_COUNT] = {0}, cols0[QP_TRLM_ROLE_COUNT] = {0};
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const qp_trlm_record *r = &rec[i];
        const qp_trillim_entry *t = &m->entries[i];
        if (qp_trlm_role_is_1d(r->role) && t->action != QP_TRILLIM_BF16_RAW)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u (1-D %s) has action %s; "
                           "1-D tensors are BF16_RAW", file, i, qp_trlm_role_name(r->role, r->layer,
                           (char[64]){0}, 64), qp_trillim_action_name(t->action));
        if (r->layer == QP_TRLM_LAYER_NONE || (rows0[r->role] == 0 && cols0[r->role] == 0)) {
            rows0[r->role] = r->rows;
            cols0[r->role] = r->cols;
        } else if (rows0[r->role] != r->rows || cols0[r->role] != r->cols) {
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u (layer %u): shape %u x %u "
                           "differs from the first layer's %u x %u", file, i, r->layer, r->rows, r->cols,
                           rows0[r->role], cols0[r->role]);
        }
    }
    (void)n_layers;
    /* Qwen3.5's q_proj holds the query and its output gate: 2 x the o input */
    uint32_t q_out = o->arch == QP_TRLM_ARCH_QWEN35 ? rows0[QP_TRLM_ROLE_Q] / 2 : rows0[QP_TRLM_ROLE_Q];
    struct { qp_trlm_role role; int dim; uint32_t want; const char *what; } rules[] = {
        {QP_TRLM_ROLE_EMBED, 1, H, "hidden"},       {QP_TRLM_ROLE_OUTPUT_NORM, 0, H, "hidden"},
        {QP_TRLM_ROLE_ATTN_NORM, 0, H, "hidden"},   {QP_TRLM_ROLE_FFN_NORM, 0, H, "hidden"},
        {QP_TRLM_ROLE_Q, 1, H, "hidden"},           {QP_TRLM_ROLE_K, 1, H, "hidden"},
        {QP_TRLM_ROLE_V, 1, H, "hidden"},           {QP_TRLM_ROLE_O, 0, H, "hidden"},
        {QP_TRLM_ROLE_O, 1, q_out, "q rows (Qwen3.5: half of them)"},
        {QP_TRLM_ROLE_V, 0, rows0[QP_TRLM_ROLE_K], "k rows"},
        {QP_TRLM_ROLE_GATE, 0, I, "intermediate"},  {QP_TRLM_ROLE_GATE, 1, H, "hidden"},
        {QP_TRLM_ROLE_UP, 0, I, "intermediate"},    {QP_TRLM_ROLE_UP, 1, H, "hidden"},
        {QP_TRLM_ROLE_DOWN, 0, H, "hidden"},        {QP_TRLM_ROLE_DOWN, 1, I, "intermediate"},
        {QP_TRLM_ROLE_FFN_SUB_NORM, 0, I, "intermediate"},
        {QP_TRLM_ROLE_ATTN_SUB_NORM, 0, rows0[QP_TRLM_ROLE_Q], "q rows"},
        {QP_TRLM_ROLE_OUTPUT, 1, H, "hidden"},
        {QP_TRLM_ROLE_OUTPUT, 0, rows0[QP_TRLM_ROLE_EMBED], "vocab"},
        {QP_TRLM_ROLE_Q_BIAS, 0, rows0[QP_TRLM_ROLE_Q], "q rows"},
        {QP_TRLM_ROLE_K_BIAS, 0, rows0[QP_TRLM_ROLE_K], "k rows"},
        {QP_TRLM_ROLE_V_BIAS, 0, rows0[QP_TRLM_ROLE_V], "v rows"},
        {QP_TRLM_ROLE_Q_NORM, 0, (uint32_t)o->head_dim, "head_dim"},
        {QP_TRLM_ROLE_K_NORM, 0, (uint32_t)o->head_dim, "head_dim"},
        {QP_TRLM_ROLE_SSM_QKV, 1, H, "hidden"},     {QP_TRLM_ROLE_SSM_GATE, 1, H, "hidden"},
        {QP_TRLM_ROLE_SSM_ALPHA, 1, H, "hidden"},   {QP_TRLM_ROLE_SSM_BETA, 1, H, "hidden"},
        {QP_TRLM_ROLE_SSM_BETA, 0, rows0[QP_TRLM_ROLE_SSM_ALPHA], "value heads"},
        {QP_TRLM_ROLE_SSM_A, 0, rows0[QP_TRLM_ROLE_SSM_ALPHA], "value heads"},
        {QP_TRLM_ROLE_SSM_DT, 0, rows0[QP_TRLM_ROLE_SSM_ALPHA], "value heads"},
        {QP_TRLM_ROLE_SSM_CONV1D, 0, rows0[QP_TRLM_ROLE_SSM_QKV], "in_proj_qkv rows"},
        {QP_TRLM_ROLE_SSM_OUT, 0, H, "hidden"},
        {QP_TRLM_ROLE_SSM_OUT, 1, rows0[QP_TRLM_ROLE_SSM_GATE], "in_proj_z rows"},
    };
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const qp_trlm_record *r = &rec[i];
        for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
            if (rules[k].role != r->role) continue;
            uint32_t got = rules[k].dim == 0 ? r->rows : r->cols;
            if (got != rules[k].want) {
                char nm[64];
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u (%s): %s %u, expected %u "
                               "(%s)", file, i, qp_trlm_role_name(r->role, r->layer, nm, sizeof nm),
                               rules[k].dim == 0 ? "rows" : "cols", got, rules[k].want,
                               rules[k].what);
            }
        }
    }
    return QP_OK;
}

/* Source element i of an entry as float. */
static float src_float(const uint8_t *p, uint8_t dtype, size_t i) {
    switch (dtype) {
    case QP_TRILLIM_F32: return qp_load_f32le(p + 4 * i);
    case QP_TRILLIM_F16: return qp_fp16_to_fp32(qp_load_u16le(p + 2 * i));
    default: return qp_bf16_to_fp32(qp_load_u16le(p + 2 * i));
    }
}

typedef struct shards {
    qp_mapped_file *f;
    int n;
} shards;

static const uint8_t *at(const shards *sh, uint16_t shard, uint64_t off) {
    return sh->f[shard].data + off;
}

/* A block kind (I8ROWS, Q8_0, Q8_0_B32, Q1_0_128, TG128): every padded row (zeros beyond the
 * source, all-zero padding rows) through the kind's quantize_ref, its blocks placed at
 * qp_trlm_block_offset (readers/trlm.md, converters/trillim_sdk.md). */
static qp_status encode_blocks(const qp_trillim_entry *t, const qp_trlm_record *r, const uint8_t *src,
                               uint8_t *out, const char *file, uint32_t idx, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(qp_trlm_kind_encoding(r->kind));
    const size_t be = (size_t)tr->block_elems, bb = tr->block_bytes;
    const size_t nb = ((size_t)r->padded_cols + be - 1) / be, row_len = nb * be;
    float *row = qp_malloc(row_len * sizeof *row);
    uint8_t *coded = qp_malloc(nb * bb);
    qp_status s = QP_OK;
    if (!row || !coded) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor entry %u", file, idx);
    for (uint32_t y = 0; s == QP_OK && y < r->padded_rows; y++) {
        memset(row, 0, row_len * sizeof *row);
        for (uint32_t x = 0; y < r->rows && x < r->cols; x++) {
            size_t si = (size_t)y * r->cols + x;
            row[x] = src_float(src, t->dtype, si);
            if (!isfinite(row[x])) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u: element %zu is not finite",
                            file, idx, si);
                break;
            }
        }
        if (s != QP_OK) break;
        tr->quantize_ref(row, coded, (int64_t)row_len);
        for (size_t j = 0; j < nb; j++)
            memcpy(out + qp_trlm_block_offset(r->kind, y, j, nb, bb), coded + j * bb, bb);
    }
    qp_free(row);
    qp_free(coded);
    return s;
}

/* Builds the stored bytes of one entry into out (record size bytes). */
static qp_status encode_entry(const qp_trillim_entry *t, const qp_trlm_record *r, const shards *sh,
                              uint8_t *out, const char *file, uint32_t idx, qp_err *e) {
    const uint8_t *src = at(sh, t->shard, t->data_offset);
    uint32_t rows = r->rows, cols = r->cols, pr = r->padded_rows, pc = r->padded_cols;
    size_t n = (size_t)rows * cols;
    memset(out, 0, (size_t)r->size);
    if (r->kind == QP_TRLM_KIND_BF16) {
        for (uint32_t y = 0; y < rows; y++)
            for (uint32_t x = 0; x < cols; x++) {
                size_t si = (size_t)y * cols + x;
                uint16_t v = t->dtype == QP_TRILLIM_BF16 ? qp_load_u16le(src + 2 * si)
                                                         : qp_fp32_to_bf16(src_float(src, t->dtype, si));
                qp_store_u16le(out + 2 * ((size_t)y * pc + x), v);
            }
        return QP_OK;
    }
    if (qp_trlm_kind_encoding(r->kind) != QP_ENC_COUNT) return encode_blocks(t, r, src, out, file, idx, e);
    /* TERNARY */
    int8_t *q = qp_malloc(n ? n : 1);
    float *w = NULL;
    float scale = 0.0f;
    qp_status s = QP_OK;
    if (!q) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor entry %u", file, idx);
    if (t->action == QP_TRILLIM_TERNARY_QUANTIZE) {
        w = qp_malloc(n * sizeof *w);
        if (!w) {
            qp_free(q);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for tensor entry %u", file, idx);
        }
        for (size_t i = 0; i < n; i++) {
            w[i] = src_float(src, t->dtype, i);
            if (!isfinite(w[i])) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u: element %zu is not finite",
                            file, idx, i);
                goto out;
            }
        }
        scale = qp_trlm_t2_scale(w, (int64_t)n);
        for (size_t i = 0; i < n; i++) q[i] = scale > 0.0f ? qp_trlm_t2_level(w[i] / scale) : 0;
    } else {
        const uint8_t *sp = at(sh, t->scale_shard, t->scale_offset);
        scale = t->scale_size == 4 ? qp_load_f32le(sp) : qp_bf16_to_fp32(qp_load_u16le(sp));
        if (!isfinite(scale) || scale < 0.0f) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u: scale at shard %u offset %llu is %g "
                        "(finite and >= 0 needed)", file, idx, t->scale_shard,
                        (unsigned long long)t->scale_offset, (double)scale);
            goto out;
        }
        if (t->dtype == QP_TRILLIM_U8) {
            int64_t bad = -1;
            if (!qp_bitnet_u8_unpack(src, rows, cols, q, &bad)) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at shard offset %llu: packed "
                            "element %lld has the invalid code 3", file, idx,
                            (unsigned long long)t->data_offset, (long long)bad);
                goto out;
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                int8_t v = (int8_t)src[i];
                if (v < -1 || v > 1) {
                    s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at shard offset %llu: I8 "
                                "element %zu is %d, not ternary", file, idx,
                                (unsigned long long)(t->data_offset + i), i, v);
                    goto out;
                }
                q[i] = v;
            }
        }
    }
    {
        size_t rb = ((size_t)pc + 3) / 4;
        int8_t *row = qp_calloc(pc, 1);
        if (!row) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
            goto out;
        }
        for (uint32_t y = 0; y < pr; y++) {
            memset(row, 0, pc);
            if (y < rows) memcpy(row, q + (size_t)y * cols, cols);
            qp_trlm_t2_pack(row, out + (size_t)y * rb, pc);
        }
        qp_free(row);
        qp_store_f32le(out + (size_t)pr * rb, scale);
    }
out:
    if (s == QP_OK) ((qp_trlm_record *)r)->scale = scale;
    qp_free(q);
    qp_free(w);
    return s;
}

/* Expected (in, out) of LoRA target t (k, v, q, o, gate, up, down). */
static void lora_dims(int t, const qp_trillim_quant_opts *o, uint32_t *in, uint32_t *out) {
    uint32_t H = (uint32_t)o->hidden_orig, I = (uint32_t)o->intermediate_orig;
    uint32_t qd = (uint32_t)(o->n_heads * o->head_dim), kvd = (uint32_t)(o->n_kv_heads * o->head_dim);
    static const int k_in_hidden[7] = {1, 1, 1, 0, 1, 1, 0};
    *in = k_in_hidden[t] ? H : t == 3 ? qd : I;
    *out = t == 0 || t == 1 ? kvd : t == 2 ? qd : t == 3 ? H : t == 6 ? H : I;
}

static qp_status lora_to_float(const shards *sh, const qp_trillim_lora_mat *x, float **out,
                               const char *file, qp_err *e) {
    size_t n = (size_t)x->rows * x->cols;
    float *v = qp_malloc(n * sizeof *v);
    if (!v) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    const uint8_t *p = at(sh, x->shard, x->offset);
    for (size_t i = 0; i < n; i++) {
        v[i] = src_float(p, x->dtype, i);
        if (!isfinite(v[i])) {
            qp_free(v);
            return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA matrix at shard %u offset %llu: element %zu "
                           "is not finite", file, x->shard, (unsigned long long)x->offset, i);
        }
    }
    *out = v;
    return QP_OK;
}

static qp_status write_lora(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                            uint32_t n_layers, const shards *sh, const char *file, qp_err *e) {
    if (!m->has_lora)
        return qp_fail(e, QP_ERR_ARG, "%s: --lora-output given but the manifest has no LoRA block",
                       file);
    if (o->lora_rank <= 0 || o->n_heads <= 0 || o->n_kv_heads <= 0 || o->head_dim <= 0)
        return qp_fail(e, QP_ERR_ARG, "--lora-output needs --lora-rank, --num-heads, --num-kv-heads "
                       "and --head-dim (positive)");
    if (m->n_entries > 0 && m->lora_layers != n_layers)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: the LoRA block has %u layers, the model %u", file,
                       m->lora_layers, n_layers);
    uint32_t ns = m->lora_layers * QP_TRLA_TARGETS;
    qp_trla_slot *slots = qp_calloc(ns, sizeof *slots);
    float **bufs = qp_calloc((size_t)ns * 2, sizeof *bufs);
    qp_status s = QP_OK;
    if (!slots || !bufs) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
        goto done;
    }
    for (uint32_t i = 0; i < ns; i++) {
        const qp_trillim_lora_slot *ls = &m->lora[i];
        if (!ls->present) continue;
        uint32_t in, out, l = i / QP_TRLA_TARGETS;
        int tg = (int)(i % QP_TRLA_TARGETS);
        lora_dims(tg, o, &in, &out);
        if (ls->a.rows != (uint32_t)o->lora_rank || ls->b.cols != (uint32_t)o->lora_rank ||
            ls->a.cols != in || ls->b.rows != out) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %d: A %u x %u and B %u x %u do "
                        "not match rank %lld, in %u, out %u", file, l, tg, ls->a.rows, ls->a.cols,
                        ls->b.rows, ls->b.cols, (long long)o->lora_rank, in, out);
            goto done;
        }
        if ((s = lora_to_float(sh, &ls->a, &bufs[2 * i], file, e)) != QP_OK ||
            (s = lora_to_float(sh, &ls->b, &bufs[2 * i + 1], file, e)) != QP_OK)
            goto done;
        slots[i] = (qp_trla_slot){true, in, out, pad_rule(in, o), pad_rule(out, o), bufs[2 * i],
                                  bufs[2 * i + 1]};
    }
    s = qp_trla_write(o->lora_output, m->lora_layers, (uint32_t)o->lora_rank, m->lora_scale, slots, e);
done:
    if (bufs)
        for (uint32_t i = 0; i < 2 * ns; i++) qp_free(bufs[i]);
    qp_free(bufs);
    qp_free(slots);
    return s;
}

/* --arch and the current SDK's rope flags (converters/trillim_sdk.md "Arch ids", "Rope"). */
static qp_status check_arch_and_rope(const qp_trillim_quant_opts *o, qp_err *e) {
    if (o->arch < QP_TRLM_ARCH_BITNET || o->arch > QP_TRLM_ARCH_QWEN3)
        return qp_fail(e, QP_ERR_ARG, "--arch %d: 1 (BITNET), 2 (LLAMA), 3 (QWEN35), 4 (BONSAI), 5 "
                       "(BONSAI_TERNARY), 6 (QWEN3)", o->arch);
    bool qk_norms = qp_trlm_arch_is_qwen3((uint32_t)o->arch) || o->arch == QP_TRLM_ARCH_QWEN35;
    if (qk_norms && o->head_dim <= 0)
        return qp_fail(e, QP_ERR_ARG, "--arch %d (q/k norms) needs --head-dim: the q_norm/k_norm "
                       "length", o->arch);
    if (o->arch == QP_TRLM_ARCH_QWEN35 && (o->rope_dim < 0 || o->rope_dim > o->head_dim || o->rope_dim % 2 != 0))
        return qp_fail(e, QP_ERR_ARG, "--rope-dim %lld: an even number up to --head-dim %lld",
                       (long long)o->rope_dim, (long long)o->head_dim);
    /* partial rotary: Qwen3.5 only (runtime.md "Qwen3.5": the first rope-dim dimensions of a head) */
    if (o->arch != QP_TRLM_ARCH_QWEN35 && o->rope_dim != 0 && o->head_dim > 0 && o->rope_dim != o->head_dim)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "--rope-dim %lld with --head-dim %lld: partial rotary "
                       "embeddings are not run by this runtime (rope-dim must equal head-dim)",
                       (long long)o->rope_dim, (long long)o->head_dim);
    bool yarn = o->yarn_factor != 0.0;
    if (yarn != (o->yarn_orig_max_pos != 0) || (!yarn && (o->yarn_beta_slow != 0.0 || o->yarn_beta_fast != 0.0)))
        return qp_fail(e, QP_ERR_ARG, "--yarn-factor and --yarn-orig-max-pos go together (the SDK "
                       "passes both for rope_type yarn), and --yarn-beta-* only with them");
    return QP_OK;
}

qp_status qp_trillim_quantize(const qp_trillim_manifest *m, const qp_trillim_quant_opts *o,
                              qp_err *e) {
    const char *file = o->manifest_path ? o->manifest_path : "manifest";
    if (!o->output) return qp_fail(e, QP_ERR_ARG, "--output is required");
    qp_status s0 = check_arch_and_rope(o, e);
    if (s0 != QP_OK) return s0;
    if (o->hidden_orig <= 0 || o->intermediate_orig <= 0 || o->hidden < o->hidden_orig ||
        o->intermediate < o->intermediate_orig || o->hidden > QP_TRLM_MAX_DIM ||
        o->intermediate > QP_TRLM_MAX_DIM)
        return qp_fail(e, QP_ERR_ARG, "dimensions: hidden %lld (orig %lld), intermediate %lld (orig "
                       "%lld): padded dims must be >= the original ones, all positive",
                       (long long)o->hidden, (long long)o->hidden_orig, (long long)o->intermediate,
                       (long long)o->intermediate_orig);
    if (!(o->norm_eps > 0.0) || !isfinite(o->norm_eps))
        return qp_fail(e, QP_ERR_ARG, "--norm-eps %g must be positive", o->norm_eps);
    shards sh = {qp_calloc(m->n_shards ? m->n_shards : 1, sizeof(qp_mapped_file)), 0};
    uint64_t *sizes = qp_calloc(m->n_shards ? m->n_shards : 1, sizeof *sizes);
    qp_trlm_record *rec = qp_calloc(m->n_entries ? m->n_entries : 1, sizeof *rec);
    uint8_t *buf = NULL;
    qp_trlm_writer *w = NULL;
    bool rope_done = false, lora_done = false;
    qp_status s = QP_OK;
    uint32_t n_layers = 0;
    if (!sh.f || !sizes || !rec) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint16_t i = 0; i < m->n_shards; i++) {
        if (!qp_path_exists(m->shards[i]) || qp_path_is_dir(m->shards[i])) {
            s = qp_fail(e, QP_ERR_IO, "%s: shard %u '%s' %s", file, i, m->shards[i],
                        qp_path_is_dir(m->shards[i]) ? "is a directory" : "does not exist");
            goto done;
        }
        if ((s = qp_file_map(m->shards[i], &sh.f[i], e)) != QP_OK) {
            qp_err_prefix(e, "%s: shard %u: ", file, i);
            goto done;
        }
        sh.n = i + 1;
        sizes[i] = sh.f[i].size;
    }
    if ((s = qp_trillim_manifest_check_shards(m, sizes, file, e)) != QP_OK) goto done;
    if (m->n_entries > 0) {
        for (uint32_t i = 0; i < m->n_entries; i++) {
            const qp_trillim_entry *t = &m->entries[i];
            qp_trlm_record *r = &rec[i];
            r->rows = logical_rows(t);
            r->cols = t->cols;
            uint32_t want_pr = pad_rule(t->rows, o), want_pc = pad_rule(t->cols, o);
            if (t->action == QP_TRILLIM_Q8_0_BLOCKED_32_QUANTIZE) /* the SDK's _round_up(row, 32) */
                want_pr = (want_pr + QP_TRLM_B32_ROWS - 1) / QP_TRLM_B32_ROWS * QP_TRLM_B32_ROWS;
            if (t->padded_rows != want_pr || t->padded_cols != want_pc) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u: padded shape %u x %u, expected "
                            "%u x %u for %u x %u (hidden %lld->%lld, intermediate %lld->%lld)",
                            file, i, t->padded_rows, t->padded_cols, want_pr, want_pc, t->rows,
                            t->cols, (long long)o->hidden_orig, (long long)o->hidden,
                            (long long)o->intermediate_orig, (long long)o->intermediate);
                goto done;
            }
            r->padded_rows = r->rows == t->rows ? t->padded_rows : pad_rule(r->rows, o);
            r->padded_cols = t->padded_cols;
            r->kind = kind_of_action(t->action);
        }
        if ((s = assign_roles(m, o, rec, &n_layers, file, e)) != QP_OK ||
            (s = check_shapes(m, o, rec, n_layers, file, e)) != QP_OK)
            goto done;
    }
    qp_trlm_body body = {m->n_entries, (uint32_t)o->hidden, (uint32_t)o->intermediate,
                         (uint32_t)o->hidden_orig, (uint32_t)o->intermediate_orig,
                         (float)o->norm_eps, 0, n_layers, 0};
    bool has_output = false;
    for (uint32_t i = 0; i < m->n_entries; i++) has_output |= rec[i].role == QP_TRLM_ROLE_OUTPUT;
    if (!has_output) body.flags |= 1u;
    for (uint32_t i = 0; i < m->n_entries; i++)
        if (!qp_trlm_data_size(rec[i].kind, rec[i].padded_rows, rec[i].padded_cols, &rec[i].size)) {
            s = qp_fail(e, QP_ERR_INTERNAL, "tensor entry %u: bad kind", i);
            goto done;
        }
    uint64_t max_size = 1;
    for (uint32_t i = 0; i < m->n_entries; i++)
        if (rec[i].size > max_size) max_size = rec[i].size;
    if (max_size > SIZE_MAX / 2 || !(buf = qp_malloc((size_t)max_size))) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory (%llu bytes for one tensor)",
                    (unsigned long long)max_size);
        goto done;
    }
    /* pass 1: ternary scales (validates every source value before anything is written) */
    for (uint32_t i = 0; i < m->n_entries; i++)
        if ((s = encode_entry(&m->entries[i], &rec[i], &sh, buf, file, i, e)) != QP_OK) goto done;
    if ((s = qp_trlm_writer_open(o->output, (uint32_t)o->arch, &body, rec, &w, e)) != QP_OK) goto done;
    uint64_t src_done = 0, src_total = 0;
    for (uint32_t i = 0; i < m->n_entries; i++) src_total += m->entries[i].data_size;
    for (uint32_t i = 0; i < m->n_entries; i++) {
        if ((s = encode_entry(&m->entries[i], &rec[i], &sh, buf, file, i, e)) != QP_OK ||
            (s = qp_trlm_writer_write(w, buf, (size_t)rec[i].size, e)) != QP_OK)
            goto done;
        src_done += m->entries[i].data_size;
        if (o->progress) o->progress(o->progress_ud, i + 1, m->n_entries, src_done, src_total);
    }
    if (o->rope_output) {
        if (o->head_dim <= 0 || o->max_pos <= 0 || o->max_pos > QP_TRLM_MAX_POS) {
            s = qp_fail(e, QP_ERR_ARG, "--rope-output needs --head-dim and --max-pos (1..%u)",
                        QP_TRLM_MAX_POS);
            goto done;
        }
        const qp_rope_yarn yarn = {o->yarn_factor, o->yarn_orig_max_pos, o->yarn_beta_fast,
                                   o->yarn_beta_slow};
        /* partial rotary (Qwen3.5): the table of the rotated rope-dim dimensions (readers/trlm.md) */
        int64_t rd = o->arch == QP_TRLM_ARCH_QWEN35 && o->rope_dim > 0 ? o->rope_dim : o->head_dim;
        if ((s = qp_trrc_write(o->rope_output, (uint32_t)o->max_pos, (uint32_t)rd,
                               o->rope_theta, &yarn, e)) != QP_OK)
            goto done;
        rope_done = true;
    }
    if (o->lora_output) {
        if ((s = write_lora(m, o, n_layers, &sh, file, e)) != QP_OK) goto done;
        lora_done = true;
    }
    s = qp_trlm_writer_commit(w, e);
    w = NULL;
done:
    qp_trlm_writer_abort(w);
    if (s != QP_OK) {
        if (rope_done) unlink(o->rope_output);
        if (lora_done) unlink(o->lora_output);
    }
    for (int i = 0; i < sh.n; i++) qp_file_unmap(&sh.f[i]);
    qp_free(sh.f);
    qp_free(sizes);
    qp_free(rec);
    qp_free(buf);
    return s;
}
