/* TRLM v1 records: role names, data sizes, and the body header and tensor record encoded and
 * decoded in one place (byte tables: readers/trlm.md). */
#include <stdio.h>
#include <string.h>

#include "readers/trlm_format.h"

static const char *const k_role_fmt[QP_TRLM_ROLE_COUNT] = {
    [QP_TRLM_ROLE_EMBED] = "token_embd.weight",
    [QP_TRLM_ROLE_OUTPUT] = "output.weight",
    [QP_TRLM_ROLE_OUTPUT_NORM] = "output_norm.weight",
    [QP_TRLM_ROLE_ATTN_NORM] = "blk.%u.attn_norm.weight",
    [QP_TRLM_ROLE_ATTN_SUB_NORM] = "blk.%u.attn_sub_norm.weight",
    [QP_TRLM_ROLE_K] = "blk.%u.attn_k.weight",
    [QP_TRLM_ROLE_V] = "blk.%u.attn_v.weight",
    [QP_TRLM_ROLE_Q] = "blk.%u.attn_q.weight",
    [QP_TRLM_ROLE_O] = "blk.%u.attn_output.weight",
    [QP_TRLM_ROLE_FFN_NORM] = "blk.%u.ffn_norm.weight",
    [QP_TRLM_ROLE_GATE] = "blk.%u.ffn_gate.weight",
    [QP_TRLM_ROLE_UP] = "blk.%u.ffn_up.weight",
    [QP_TRLM_ROLE_FFN_SUB_NORM] = "blk.%u.ffn_sub_norm.weight",
    [QP_TRLM_ROLE_DOWN] = "blk.%u.ffn_down.weight",
    [QP_TRLM_ROLE_Q_BIAS] = "blk.%u.attn_q.bias",
    [QP_TRLM_ROLE_K_BIAS] = "blk.%u.attn_k.bias",
    [QP_TRLM_ROLE_V_BIAS] = "blk.%u.attn_v.bias",
    [QP_TRLM_ROLE_Q_NORM] = "blk.%u.attn_q_norm.weight",
    [QP_TRLM_ROLE_K_NORM] = "blk.%u.attn_k_norm.weight",
    [QP_TRLM_ROLE_SSM_A] = "blk.%u.ssm_a",
    [QP_TRLM_ROLE_SSM_CONV1D] = "blk.%u.ssm_conv1d.weight",
    [QP_TRLM_ROLE_SSM_DT] = "blk.%u.ssm_dt.bias",
    [QP_TRLM_ROLE_SSM_ALPHA] = "blk.%u.ssm_alpha.weight",
    [QP_TRLM_ROLE_SSM_BETA] = "blk.%u.ssm_beta.weight",
    [QP_TRLM_ROLE_SSM_QKV] = "blk.%u.attn_qkv.weight",
    [QP_TRLM_ROLE_SSM_GATE] = "blk.%u.attn_gate.weight",
    [QP_TRLM_ROLE_SSM_NORM] = "blk.%u.ssm_norm.weight",
    [QP_TRLM_ROLE_SSM_OUT] = "blk.%u.ssm_out.weight",
};

const char *qp_trlm_arch_name(uint32_t arch) {
    static const char *const k_names[] = {"unknown", "bitnet", "llama", "qwen35", "bonsai",
                                          "bonsai_ternary", "qwen3"};
    return arch >= 1 && arch < sizeof k_names / sizeof k_names[0] ? k_names[arch] : NULL;
}

const char *qp_trlm_role_name(qp_trlm_role r, uint32_t layer, char *buf, size_t cap) {
    if ((unsigned)r >= QP_TRLM_ROLE_COUNT || cap == 0) return NULL;
    if (r <= QP_TRLM_ROLE_OUTPUT_NORM) snprintf(buf, cap, "%s", k_role_fmt[r]);
    else snprintf(buf, cap, k_role_fmt[r], (unsigned)layer);
    return buf;
}

bool qp_trlm_role_is_1d(qp_trlm_role r) {
    switch (r) {
    case QP_TRLM_ROLE_OUTPUT_NORM: case QP_TRLM_ROLE_ATTN_NORM: case QP_TRLM_ROLE_ATTN_SUB_NORM:
    case QP_TRLM_ROLE_FFN_NORM: case QP_TRLM_ROLE_FFN_SUB_NORM: case QP_TRLM_ROLE_Q_BIAS:
    case QP_TRLM_ROLE_K_BIAS: case QP_TRLM_ROLE_V_BIAS: case QP_TRLM_ROLE_Q_NORM:
    case QP_TRLM_ROLE_K_NORM: case QP_TRLM_ROLE_SSM_A: case QP_TRLM_ROLE_SSM_DT: case QP_TRLM_ROLE_SSM_NORM:
        return true;
    default:
        return false;
    }
}

qp_encoding qp_trlm_kind_encoding(qp_trlm_kind kind) {
    switch (kind) {
    case QP_TRLM_KIND_I8ROWS: return QP_ENC_I8_ROW;
    case QP_TRLM_KIND_Q8_0: case QP_TRLM_KIND_Q8_0_B32: return QP_ENC_Q8_0;
    case QP_TRLM_KIND_Q1_0_128: return QP_ENC_Q1_0_128;
    case QP_TRLM_KIND_TG128: return QP_ENC_TG128;
    default: return QP_ENC_COUNT;
    }
}

uint64_t qp_trlm_block_offset(qp_trlm_kind kind, uint32_t row, uint64_t block, uint64_t nb, size_t bb) {
    if (kind != QP_TRLM_KIND_Q8_0_B32) return ((uint64_t)row * nb + block) * bb;
    uint64_t group = row / QP_TRLM_B32_ROWS, in_group = row % QP_TRLM_B32_ROWS;
    return ((group * nb + block) * QP_TRLM_B32_ROWS + in_group) * bb;
}

uint32_t qp_trlm_body_version(const qp_trlm_record *records, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (records[i].kind > QP_TRLM_KIND_I8ROWS) return QP_TRLM_BODY_VERSION_GROUPS;
    return QP_TRLM_VERSION;
}

bool qp_trlm_data_size(qp_trlm_kind kind, uint32_t padded_rows, uint32_t padded_cols, uint64_t *out) {
    uint64_t r = padded_rows, c = padded_cols;
    switch (kind) {
    case QP_TRLM_KIND_BF16: *out = r * c * 2u; return true;
    case QP_TRLM_KIND_TERNARY: *out = r * ((c + 3u) / 4u) + 4u; return true;
    default: { /* rows of whole blocks of the kind's encoding */
        qp_encoding enc = qp_trlm_kind_encoding(kind);
        size_t rb;
        if (enc == QP_ENC_COUNT || !qp_encoding_padded_row_bytes(enc, (int64_t)c, &rb)) return false;
        *out = r * rb;
        return true;
    }
    }
}

void qp_trlm_body_encode(const qp_trlm_body *b, uint8_t out[QP_TRLM_BODY_HEADER_BYTES]) {
    memset(out, 0, QP_TRLM_BODY_HEADER_BYTES);
    qp_store_u32le(out + QP_TRLM_BODY_VERSION, b->version ? b->version : QP_TRLM_VERSION);
    qp_store_u32le(out + QP_TRLM_BODY_N_TENSORS, b->n_tensors);
    qp_store_u32le(out + QP_TRLM_BODY_HIDDEN, b->hidden);
    qp_store_u32le(out + QP_TRLM_BODY_INTERMEDIATE, b->intermediate);
    qp_store_u32le(out + QP_TRLM_BODY_HIDDEN_ORIG, b->hidden_orig);
    qp_store_u32le(out + QP_TRLM_BODY_INTERMEDIATE_ORIG, b->intermediate_orig);
    qp_store_f32le(out + QP_TRLM_BODY_NORM_EPS, b->norm_eps);
    qp_store_u32le(out + QP_TRLM_BODY_FLAGS, b->flags);
    qp_store_u32le(out + QP_TRLM_BODY_N_LAYERS, b->n_layers);
    qp_store_u32le(out + QP_TRLM_BODY_ALIGN, QP_TRLM_ALIGN);
    /* 40..47 reserved, zero */
}

void qp_trlm_record_encode(const qp_trlm_record *r, uint8_t out[QP_TRLM_RECORD_BYTES]) {
    memset(out, 0, QP_TRLM_RECORD_BYTES);
    out[QP_TRLM_REC_KIND] = (uint8_t)r->kind;
    out[QP_TRLM_REC_ROLE] = (uint8_t)r->role;
    qp_store_u32le(out + QP_TRLM_REC_LAYER, r->layer);
    qp_store_u32le(out + QP_TRLM_REC_ROWS, r->rows);
    qp_store_u32le(out + QP_TRLM_REC_COLS, r->cols);
    qp_store_u32le(out + QP_TRLM_REC_PADDED_ROWS, r->padded_rows);
    qp_store_u32le(out + QP_TRLM_REC_PADDED_COLS, r->padded_cols);
    qp_store_u64le(out + QP_TRLM_REC_OFFSET, r->offset);
    qp_store_u64le(out + QP_TRLM_REC_SIZE, r->size);
    qp_store_f32le(out + QP_TRLM_REC_SCALE, r->scale);
    /* 44..47 reserved, zero */
}

void qp_trlm_body_decode(const uint8_t in[QP_TRLM_BODY_HEADER_BYTES], qp_trlm_body *b) {
    b->version = qp_load_u32le(in + QP_TRLM_BODY_VERSION);
    b->n_tensors = qp_load_u32le(in + QP_TRLM_BODY_N_TENSORS);
    b->hidden = qp_load_u32le(in + QP_TRLM_BODY_HIDDEN);
    b->intermediate = qp_load_u32le(in + QP_TRLM_BODY_INTERMEDIATE);
    b->hidden_orig = qp_load_u32le(in + QP_TRLM_BODY_HIDDEN_ORIG);
    b->intermediate_orig = qp_load_u32le(in + QP_TRLM_BODY_INTERMEDIATE_ORIG);
    b->norm_eps = qp_load_f32le(in + QP_TRLM_BODY_NORM_EPS);
    b->flags = qp_load_u32le(in + QP_TRLM_BODY_FLAGS);
    b->n_layers = qp_load_u32le(in + QP_TRLM_BODY_N_LAYERS);
}

void qp_trlm_record_decode(const uint8_t in[QP_TRLM_RECORD_BYTES], qp_trlm_record *r) {
    r->kind = (qp_trlm_kind)in[QP_TRLM_REC_KIND];
    r->role = (qp_trlm_role)in[QP_TRLM_REC_ROLE];
    r->layer = qp_load_u32le(in + QP_TRLM_REC_LAYER);
    r->rows = qp_load_u32le(in + QP_TRLM_REC_ROWS);
    r->cols = qp_load_u32le(in + QP_TRLM_REC_COLS);
    r->padded_rows = qp_load_u32le(in + QP_TRLM_REC_PADDED_ROWS);
    r->padded_cols = qp_load_u32le(in + QP_TRLM_REC_PADDED_COLS);
    r->offset = qp_load_u64le(in + QP_TRLM_REC_OFFSET);
    r->size = qp_load_u64le(in + QP_TRLM_REC_SIZE);
    r->scale = qp_load_f32le(in + QP_TRLM_REC_SCALE);
}
