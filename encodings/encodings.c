/* The traits table: every tensor encoding quantpack reads or writes, in one place.
 * Block sizes and GGUF type ids: shared/specs/gguf-kquants.md and ternary.md. */
#include <string.h>
#include <strings.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"

#define F QP_ENC_FLAG_FLOAT
#define I QP_ENC_FLAG_INT
#define B QP_ENC_FLAG_BLOCK
#define T QP_ENC_FLAG_TERNARY
#define X QP_ENC_FLAG_EXT_SCALE

/* id, name, UPPER, block elems, block bytes, ggml type, safetensors dtype, flags, trailer,
 * quantize_ref, dequantize, vec_dot_f32, validate, error bound, quantize (fast), vec_dot_i8,
 * quantize_tensor, dequantize_tensor. Encodings not listed with functions are known by size only. */
static const qp_encoding_traits k_traits[QP_ENC_COUNT] = {
    [QP_ENC_F32] = {QP_ENC_F32, "f32", "F32", 1, 4, 0, "F32", F, 0, qp_f32_quantize,
                    qp_f32_dequantize, qp_f32_vec_dot, qp_f32_validate, "exact", qp_f32_quantize,
                    NULL, NULL, NULL},
    [QP_ENC_F16] = {QP_ENC_F16, "f16", "F16", 1, 2, 1, "F16", F, 0, qp_f16_quantize,
                    qp_f16_dequantize, qp_f16_vec_dot, qp_f16_validate,
                    "round to nearest even: relative 2^-11 in the normal range", qp_f16_quantize, NULL,
                    NULL, NULL},
    [QP_ENC_BF16] = {QP_ENC_BF16, "bf16", "BF16", 1, 2, 30, "BF16", F, 0, qp_bf16_quantize,
                     qp_bf16_dequantize, qp_bf16_vec_dot, qp_bf16_validate,
                     "round to nearest even: relative 2^-8", qp_bf16_quantize, NULL, NULL, NULL},
    [QP_ENC_F64] = {QP_ENC_F64, "f64", "F64", 1, 8, 28, "F64", F, 0, NULL, qp_f64_dequantize, NULL,
                    NULL, "read only (narrowed to f32)"},
    [QP_ENC_I8] = {QP_ENC_I8, "i8", "I8", 1, 1, 24, "I8", I, 0, NULL, qp_i8_dequantize, NULL, NULL, "exact"},
    [QP_ENC_I16] = {QP_ENC_I16, "i16", "I16", 1, 2, 25, "I16", I, 0, NULL, qp_i16_dequantize, NULL, NULL, "exact"},
    [QP_ENC_I32] = {QP_ENC_I32, "i32", "I32", 1, 4, 26, "I32", I, 0, NULL, qp_i32_dequantize, NULL, NULL,
                    "exact below 2^24"},
    [QP_ENC_I64] = {QP_ENC_I64, "i64", "I64", 1, 8, 27, "I64", I, 0, NULL, qp_i64_dequantize, NULL, NULL,
                    "exact below 2^24"},
    [QP_ENC_U8] = {QP_ENC_U8, "u8", "U8", 1, 1, -1, "U8", I, 0, NULL, qp_u8_dequantize, NULL, NULL, "exact"},
    [QP_ENC_U16] = {QP_ENC_U16, "u16", "U16", 1, 2, -1, "U16", I, 0, NULL, qp_u16_dequantize, NULL, NULL, "exact"},
    [QP_ENC_U32] = {QP_ENC_U32, "u32", "U32", 1, 4, -1, "U32", I, 0, NULL, qp_u32_dequantize, NULL, NULL,
                    "exact below 2^24"},
    [QP_ENC_U64] = {QP_ENC_U64, "u64", "U64", 1, 8, -1, "U64", I, 0, NULL, qp_u64_dequantize, NULL, NULL,
                    "exact below 2^24"},
    [QP_ENC_BOOL] = {QP_ENC_BOOL, "bool", "BOOL", 1, 1, -1, "BOOL", I, 0, NULL, qp_u8_dequantize, NULL,
                     NULL, "exact"},
    /* llama.cpp block types: bytes of quantize_ref equal llama.cpp's quantize_row_*_ref */
    [QP_ENC_Q4_0] = {QP_ENC_Q4_0, "q4_0", "Q4_0", 32, 18, 2, NULL, B, 0, qp_q4_0_quantize_ref,
                     qp_q4_0_dequantize, qp_q4_0_vec_dot_ref, qp_q4_0_validate,
                     "per 32-block: |err| <= amax/8 * (1 + 2^-7) + 2^-21 (f16 d)", qp_q4_0_quantize, NULL, NULL, NULL},
    [QP_ENC_Q4_1] = {QP_ENC_Q4_1, "q4_1", "Q4_1", 32, 20, 3, NULL, B, 0, qp_q4_1_quantize_ref,
                     qp_q4_1_dequantize, qp_q4_1_vec_dot_ref, qp_q4_1_validate,
                     "per 32-block: |err| <= (max-min)/30 + f16 rounding of d and m", qp_q4_1_quantize_ref,
                     NULL, NULL, NULL},
    [QP_ENC_Q5_0] = {QP_ENC_Q5_0, "q5_0", "Q5_0", 32, 22, 6, NULL, B, 0, qp_q5_0_quantize_ref,
                     qp_q5_0_dequantize, qp_q5_0_vec_dot_ref, qp_q5_0_validate,
                     "per 32-block: |err| <= amax/16 * (1 + 2^-6) + 2^-20 (f16 d)", qp_q5_0_quantize, NULL, NULL, NULL},
    [QP_ENC_Q5_1] = {QP_ENC_Q5_1, "q5_1", "Q5_1", 32, 24, 7, NULL, B, 0, qp_q5_1_quantize_ref,
                     qp_q5_1_dequantize, qp_q5_1_vec_dot_ref, qp_q5_1_validate,
                     "per 32-block: |err| <= (max-min)/62 + f16 rounding of d and m", qp_q5_1_quantize_ref,
                     NULL, NULL, NULL},
    [QP_ENC_Q8_0] = {QP_ENC_Q8_0, "q8_0", "Q8_0", 32, 34, 8, NULL, B, 0, qp_q8_0_quantize_ref,
                     qp_q8_0_dequantize, qp_q8_0_vec_dot, qp_q8_0_validate,
                     "per 32-block: |err| <= amax/254 * 1.13 + 2^-18 (f16 d)", qp_q8_0_quantize, NULL, NULL, NULL},
    [QP_ENC_Q8_1] = {QP_ENC_Q8_1, "q8_1", "Q8_1", 32, 36, 9, NULL, B, 0, NULL, NULL, NULL, NULL, NULL,
                     NULL, NULL, NULL, NULL},
    [QP_ENC_Q2_K] = {QP_ENC_Q2_K, "q2_k", "Q2_K", 256, 84, 10, NULL, B, 0, NULL, NULL, NULL, NULL, NULL,
                     NULL, NULL, NULL, NULL},
    [QP_ENC_Q3_K] = {QP_ENC_Q3_K, "q3_k", "Q3_K", 256, 110, 11, NULL, B, 0, NULL, NULL, NULL, NULL, NULL,
                     NULL, NULL, NULL, NULL},
    [QP_ENC_Q4_K] = {QP_ENC_Q4_K, "q4_k", "Q4_K", 256, 144, 12, NULL, B, 0, qp_q4k_quantize_ref,
                     qp_q4k_dequantize, qp_q4k_vec_dot, qp_q4k_validate,
                     "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.12 (see enc_kquants.md)",
                     qp_q4k_quantize, NULL, NULL, NULL},
    [QP_ENC_Q5_K] = {QP_ENC_Q5_K, "q5_k", "Q5_K", 256, 176, 13, NULL, B, 0, NULL, NULL, NULL, NULL, NULL,
                     NULL, NULL, NULL, NULL},
    [QP_ENC_Q6_K] = {QP_ENC_Q6_K, "q6_k", "Q6_K", 256, 210, 14, NULL, B, 0, qp_q6k_quantize_ref,
                     qp_q6k_dequantize, qp_q6k_vec_dot, qp_q6k_validate,
                     "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.03 (see enc_kquants.md)",
                     qp_q6k_quantize, NULL, NULL, NULL},
    [QP_ENC_Q8_K] = {QP_ENC_Q8_K, "q8_k", "Q8_K", 256, 292, 15, NULL, B, 0, qp_q8k_quantize_ref,
                     qp_q8k_dequantize, qp_q8k_vec_dot_ref, qp_q8k_validate,
                     "per 256-block: |err| <= amax/254 (d kept as f32)", qp_q8k_quantize_ref, NULL, NULL,
                     NULL},
    [QP_ENC_IQ2_XXS] = {QP_ENC_IQ2_XXS, "iq2_xxs", "IQ2_XXS", 256, 66, 16, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ2_XS] = {QP_ENC_IQ2_XS, "iq2_xs", "IQ2_XS", 256, 74, 17, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ3_XXS] = {QP_ENC_IQ3_XXS, "iq3_xxs", "IQ3_XXS", 256, 98, 18, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ1_S] = {QP_ENC_IQ1_S, "iq1_s", "IQ1_S", 256, 50, 19, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ4_NL] = {QP_ENC_IQ4_NL, "iq4_nl", "IQ4_NL", 32, 18, 20, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ3_S] = {QP_ENC_IQ3_S, "iq3_s", "IQ3_S", 256, 110, 21, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ2_S] = {QP_ENC_IQ2_S, "iq2_s", "IQ2_S", 256, 82, 22, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ4_XS] = {QP_ENC_IQ4_XS, "iq4_xs", "IQ4_XS", 256, 136, 23, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_IQ1_M] = {QP_ENC_IQ1_M, "iq1_m", "IQ1_M", 256, 56, 29, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    /* ternary (enc_ternary.c, enc_ternary.md) */
    [QP_ENC_TQ1_0] = {QP_ENC_TQ1_0, "tq1_0", "TQ1_0", 256, 54, 34, NULL, B | T, 0, qp_tq1_0_quantize_ref,
                      qp_tq1_0_dequantize, qp_tq1_0_vec_dot_ref, qp_tq1_0_validate,
                      "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + f16(amax) rounding",
                      qp_tq1_0_quantize, qp_tq1_0_vec_dot_i8_fast, NULL, NULL},
    [QP_ENC_TQ2_0] = {QP_ENC_TQ2_0, "tq2_0", "TQ2_0", 256, 66, 35, NULL, B | T, 0, qp_tq2_0_quantize_ref,
                      qp_tq2_0_dequantize, qp_tq2_0_vec_dot_ref, qp_tq2_0_validate,
                      "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + f16(amax) rounding",
                      qp_tq2_0_quantize, qp_tq2_0_vec_dot_i8_fast, NULL, NULL},
    [QP_ENC_MXFP4] = {QP_ENC_MXFP4, "mxfp4", "MXFP4", 32, 17, 39, NULL, B, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    [QP_ENC_I2_S] = {QP_ENC_I2_S, "i2_s", "I2_S", 128, 32, 36, NULL, B | T | X, 32, NULL,
                     qp_i2s_dequantize, qp_i2s_vec_dot, qp_i2s_validate,
                     "exact for ternary tensors {-s,0,+s}; else absmean ternarization (lossy)", NULL,
                     qp_i2s_vec_dot_i8_fast, qp_i2s_quantize_tensor, qp_i2s_dequantize_tensor},
    [QP_ENC_I2_S_ARM] = {QP_ENC_I2_S_ARM, "i2_s_arm", "I2_S_ARM", 64, 16, -1, NULL, B | T | X, 32, NULL,
                         qp_i2s_arm_dequantize, qp_i2s_arm_vec_dot, qp_i2s_arm_validate,
                         "exact for ternary tensors {-s,0,+s}; else absmean ternarization (lossy)", NULL,
                         qp_i2s_arm_vec_dot_i8_fast, qp_i2s_arm_quantize_tensor, qp_i2s_arm_dequantize_tensor},
    [QP_ENC_QK256] = {QP_ENC_QK256, "qk256", "QK256", 256, 64, -1, NULL, B, 0, qp_qk256_quantize_ref,
                      qp_qk256_dequantize, qp_qk256_vec_dot, NULL,
                      "exact for values in {-2,-1,+1,+2}; nearest level otherwise (ternary 0 -> +1)",
                      qp_qk256_quantize, qp_qk256_vec_dot_i8_fast, NULL, NULL},
    [QP_ENC_BITNET32F16] = {QP_ENC_BITNET32F16, "bitnet32f16", "BitNet32F16", 32, 10, -1, NULL, B | T, 0,
                            qp_bitnet32f16_quantize_ref, qp_bitnet32f16_dequantize,
                            qp_bitnet32f16_vec_dot, qp_bitnet32f16_validate,
                            "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + f16 rounding",
                            qp_bitnet32f16_quantize, qp_bitnet32f16_vec_dot_i8_fast, NULL, NULL},
    [QP_ENC_SPLIT32] = {QP_ENC_SPLIT32, "split32", "Split32", 32, 8, -1, NULL, B | T | X, 0, NULL,
                        qp_split32_dequantize_unit, qp_split32_vec_dot_unit, NULL,
                        "codes only; scales in a sibling tensor (qp_split32_quantize)", NULL,
                        qp_split32_vec_dot_i8_fast, NULL, NULL},
    /* bullet-core (enc_bq4.c, enc_bq4.md) */
    [QP_ENC_BQ4] = {QP_ENC_BQ4, "bq4", "BQ4", 32, 20, -1, NULL, B, 0, qp_bq4_quantize_ref,
                    qp_bq4_dequantize, qp_bq4_vec_dot, qp_bq4_validate,
                    "per 32-block: |err| <= scale/2, scale = (max(hi,0)-min(lo,0))/15 rounded up to f16; constant and all-zero blocks exact",
                    qp_bq4_quantize_ref, NULL, NULL, NULL},
    /* TRLM v1 ternary (enc_trlm.c, readers/trlm.md); not flagged T: the runtime keeps F32 activations */
    [QP_ENC_TRLM_T2] = {QP_ENC_TRLM_T2, "trlm_t2", "TRLM_T2", 4, 1, -1, NULL, B | X, 4, qp_trlm_t2_quantize_ref,
                        qp_trlm_t2_dequantize, qp_trlm_t2_vec_dot, qp_trlm_t2_validate,
                        "exact for ternary tensors {-s,0,+s}; else ternarization with s = mean |w| over nonzero w (lossy)",
                        qp_trlm_t2_quantize_ref, NULL, qp_trlm_t2_quantize_tensor, qp_trlm_t2_dequantize_tensor},
    /* int8 rows for embeddings (enc_i8row.c, encodings.md "I8_ROW"; TRLM I8ROWS) */
    [QP_ENC_I8_ROW] = {QP_ENC_I8_ROW, "i8_row", "I8_ROW", 32, 36, -1, NULL, B, 0, qp_i8row_quantize_ref,
                       qp_i8row_dequantize, qp_i8row_vec_dot, qp_i8row_validate,
                       "per 32-block: |err| <= amax/254 * (1 + 2^-14) when d = amax/127 is a normal f32; all-zero blocks exact",
                       qp_i8row_quantize_ref, qp_i8row_vec_dot_i8, NULL, NULL},
};

const qp_encoding_traits *qp_encoding_get(qp_encoding enc) {
    if ((unsigned)enc >= QP_ENC_COUNT || !k_traits[enc].name) return NULL;
    return &k_traits[enc];
}

qp_encoding qp_encoding_from_name(const char *name) {
    if (!name) return QP_ENC_COUNT;
    for (int i = 0; i < QP_ENC_COUNT; i++)
        if (k_traits[i].name && strcasecmp(k_traits[i].name, name) == 0) return (qp_encoding)i;
    return QP_ENC_COUNT;
}

qp_encoding qp_encoding_from_ggml_type(int64_t ggml_type) {
    if (ggml_type < 0) return QP_ENC_COUNT;
    for (int i = 0; i < QP_ENC_COUNT; i++)
        if (k_traits[i].name && k_traits[i].ggml_type == ggml_type) return (qp_encoding)i;
    return QP_ENC_COUNT;
}

qp_encoding qp_encoding_from_st_dtype(const char *dtype, size_t len) {
    for (int i = 0; i < QP_ENC_COUNT; i++) {
        const char *d = k_traits[i].st_dtype;
        if (d && strlen(d) == len && memcmp(d, dtype, len) == 0) return (qp_encoding)i;
    }
    return QP_ENC_COUNT;
}

bool qp_encoding_row_bytes(qp_encoding enc, int64_t n, size_t *out) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t || n < 0 || n % t->block_elems != 0) return false;
    return qp_size_mul((size_t)(n / t->block_elems), t->block_bytes, out);
}

bool qp_encoding_tensor_bytes(qp_encoding enc, int64_t n_elems, size_t *out) {
    size_t b;
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t || !qp_encoding_row_bytes(enc, n_elems, &b)) return false;
    return qp_size_add(b, t->tensor_trailer_bytes, out);
}

bool qp_encoding_tensor_scale(qp_encoding enc, const void *tensor, size_t tensor_bytes,
                              int64_t n_elems, float *scale) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    size_t rb, need;
    if (!t || !qp_encoding_row_bytes(enc, n_elems, &rb)) return false;
    if (!(t->flags & QP_ENC_FLAG_EXT_SCALE) || t->tensor_trailer_bytes < 4) {
        *scale = 1.0f;
        return !(t->flags & QP_ENC_FLAG_EXT_SCALE);
    }
    if (!qp_size_add(rb, 4, &need) || tensor_bytes < need) return false;
    *scale = qp_load_f32le((const uint8_t *)tensor + rb);
    return true;
}

bool qp_encoding_quantize_tensor(qp_encoding enc, const float *x, void *y, int64_t n) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    size_t b;
    if (!t || !qp_encoding_tensor_bytes(enc, n, &b)) return false;
    if (t->quantize_tensor) t->quantize_tensor(x, y, n);
    else if (t->quantize) t->quantize(x, y, n);
    else if (t->quantize_ref) t->quantize_ref(x, y, n);
    else return false;
    return true;
}

bool qp_encoding_dequantize_tensor(qp_encoding enc, const void *x, float *y, int64_t n) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    size_t b;
    if (!t || !qp_encoding_tensor_bytes(enc, n, &b)) return false;
    if (t->dequantize_tensor) t->dequantize_tensor(x, y, n);
    else if (t->dequantize && !(t->flags & QP_ENC_FLAG_EXT_SCALE)) t->dequantize(x, y, n);
    else return false;
    return true;
}
