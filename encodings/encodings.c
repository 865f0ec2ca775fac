/* The traits table: every tensor encoding quantpack reads or writes, in one place.
 * Block sizes and GGUF type ids: encodings/enc_kquants.md and enc_ternary.md. */
#include <string.h>
#include <strings.h>

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"
#include "encodings/qdot.h"

/* One designated row per encoding (fields: include/quantpack/encoding.h). A function left out is
 * NULL: encodings without quantize_ref/dequantize are known by size only. */
static const qp_encoding_traits k_traits[QP_ENC_COUNT] = {
    [QP_ENC_F32] = {
        .id = QP_ENC_F32,
        .name = "f32",
        .upper_name = "F32",
        .block_elems = 1,
        .block_bytes = 4,
        .ggml_type = 0,
        .st_dtype = "F32",
        .flags = QP_ENC_FLAG_FLOAT,
        .quantize_ref = qp_f32_quantize,
        .dequantize = qp_f32_dequantize,
        .vec_dot_f32 = qp_f32_vec_dot,
        .validate = qp_f32_validate,
        .error_bound = "exact",
        .quantize = qp_f32_quantize,
    },
    [QP_ENC_F16] = {
        .id = QP_ENC_F16,
        .name = "f16",
        .upper_name = "F16",
        .block_elems = 1,
        .block_bytes = 2,
        .ggml_type = 1,
        .st_dtype = "F16",
        .flags = QP_ENC_FLAG_FLOAT | QP_ENC_FLAG_FAST_COPY, /* F16 decode 0.94x -> 1.10x llama.cpp */
        .quantize_ref = qp_f16_quantize,
        .dequantize = qp_f16_dequantize,
        .vec_dot_f32 = qp_f16_vec_dot,
        .validate = qp_f16_validate,
        .vec_dot_q8 = qp_f16_dot_f16, /* activations rounded to F16 once per token */
        .vec_dot_q8_tile = qp_f16_dot_f16_tile,
        .act_encoding = QP_ENC_F16,
        .error_bound = "round to nearest even: relative 2^-11 in the normal range",
        .quantize = qp_f16_quantize,
    },
    [QP_ENC_BF16] = {
        .id = QP_ENC_BF16,
        .name = "bf16",
        .upper_name = "BF16",
        .block_elems = 1,
        .block_bytes = 2,
        .ggml_type = 30,
        .st_dtype = "BF16",
        .flags = QP_ENC_FLAG_FLOAT,
        .quantize_ref = qp_bf16_quantize,
        .dequantize = qp_bf16_dequantize,
        .vec_dot_f32 = qp_bf16_vec_dot,
        .validate = qp_bf16_validate,
        .error_bound = "round to nearest even: relative 2^-8",
        .quantize = qp_bf16_quantize,
    },
    [QP_ENC_F64] = {
        .id = QP_ENC_F64,
        .name = "f64",
        .upper_name = "F64",
        .block_elems = 1,
        .block_bytes = 8,
        .ggml_type = 28,
        .st_dtype = "F64",
        .flags = QP_ENC_FLAG_FLOAT,
        .dequantize = qp_f64_dequantize,
        .error_bound = "read only (narrowed to f32)",
    },
    [QP_ENC_I8] = {
        .id = QP_ENC_I8,
        .name = "i8",
        .upper_name = "I8",
        .block_elems = 1,
        .block_bytes = 1,
        .ggml_type = 24,
        .st_dtype = "I8",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_i8_dequantize,
        .error_bound = "exact",
    },
    [QP_ENC_I16] = {
        .id = QP_ENC_I16,
        .name = "i16",
        .upper_name = "I16",
        .block_elems = 1,
        .block_bytes = 2,
        .ggml_type = 25,
        .st_dtype = "I16",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_i16_dequantize,
        .error_bound = "exact",
    },
    [QP_ENC_I32] = {
        .id = QP_ENC_I32,
        .name = "i32",
        .upper_name = "I32",
        .block_elems = 1,
        .block_bytes = 4,
        .ggml_type = 26,
        .st_dtype = "I32",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_i32_dequantize,
        .error_bound = "exact below 2^24",
    },
    [QP_ENC_I64] = {
        .id = QP_ENC_I64,
        .name = "i64",
        .upper_name = "I64",
        .block_elems = 1,
        .block_bytes = 8,
        .ggml_type = 27,
        .st_dtype = "I64",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_i64_dequantize,
        .error_bound = "exact below 2^24",
    },
    [QP_ENC_U8] = {
        .id = QP_ENC_U8,
        .name = "u8",
        .upper_name = "U8",
        .block_elems = 1,
        .block_bytes = 1,
        .ggml_type = -1,
        .st_dtype = "U8",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_u8_dequantize,
        .error_bound = "exact",
    },
    [QP_ENC_U16] = {
        .id = QP_ENC_U16,
        .name = "u16",
        .upper_name = "U16",
        .block_elems = 1,
        .block_bytes = 2,
        .ggml_type = -1,
        .st_dtype = "U16",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_u16_dequantize,
        .error_bound = "exact",
    },
    [QP_ENC_U32] = {
        .id = QP_ENC_U32,
        .name = "u32",
        .upper_name = "U32",
        .block_elems = 1,
        .block_bytes = 4,
        .ggml_type = -1,
        .st_dtype = "U32",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_u32_dequantize,
        .error_bound = "exact below 2^24",
    },
    [QP_ENC_U64] = {
        .id = QP_ENC_U64,
        .name = "u64",
        .upper_name = "U64",
        .block_elems = 1,
        .block_bytes = 8,
        .ggml_type = -1,
        .st_dtype = "U64",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_u64_dequantize,
        .error_bound = "exact below 2^24",
    },
    [QP_ENC_BOOL] = {
        .id = QP_ENC_BOOL,
        .name = "bool",
        .upper_name = "BOOL",
        .block_elems = 1,
        .block_bytes = 1,
        .ggml_type = -1,
        .st_dtype = "BOOL",
        .flags = QP_ENC_FLAG_INT,
        .dequantize = qp_u8_dequantize,
        .error_bound = "exact",
    },
    /* llama.cpp block types: bytes of quantize_ref equal llama.cpp's quantize_row_*_ref */
    [QP_ENC_Q4_0] = {
        .id = QP_ENC_Q4_0,
        .name = "q4_0",
        .upper_name = "Q4_0",
        .block_elems = QP_QK,
        .block_bytes = QP_Q4_0_BYTES,
        .ggml_type = 2,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q4_0_quantize_ref,
        .dequantize = qp_q4_0_dequantize,
        .vec_dot_f32 = qp_q4_0_vec_dot_ref,
        .validate = qp_q4_0_validate,
        .error_bound = "per 32-block: |err| <= amax/8 * (1 + 2^-7) + 2^-21 (f16 d)",
        .quantize = qp_q4_0_quantize,
        .quantize_imatrix = qp_q4_0_quantize_imatrix,
        .vec_dot_q8 = qp_q4_0_dot_q8_0,
        .vec_dot_q8_tile = qp_q4_0_dot_q8_0_tile,
        .q8_pack_rows = qp_pack16_rows, /* the BQ4 layout and kernels (encodings.md "Repacked Q4_0 rows") */
        .q8_pack_block_elems = QP_QK,
        .q8_pack_block_bytes = QP_BQ4_PACK_BYTES,
        .q8_pack = qp_q4_0_pack16,
        .vec_dot_q8_packed = qp_bq4_packed_dot_q8_0,
        .act_encoding = QP_ENC_Q8_0,
    },
    [QP_ENC_Q4_1] = {
        .id = QP_ENC_Q4_1,
        .name = "q4_1",
        .upper_name = "Q4_1",
        .block_elems = QP_QK,
        .block_bytes = QP_Q4_1_BYTES,
        .ggml_type = 3,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q4_1_quantize_ref,
        .dequantize = qp_q4_1_dequantize,
        .vec_dot_f32 = qp_q4_1_vec_dot_ref,
        .validate = qp_q4_1_validate,
        .error_bound = "per 32-block: |err| <= (max-min)/30 + f16 rounding of d and m",
        .quantize = qp_q4_1_quantize_ref,
        .quantize_imatrix = qp_q4_1_quantize_imatrix,
    },
    [QP_ENC_Q5_0] = {
        .id = QP_ENC_Q5_0,
        .name = "q5_0",
        .upper_name = "Q5_0",
        .block_elems = QP_QK,
        .block_bytes = QP_Q5_0_BYTES,
        .ggml_type = 6,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q5_0_quantize_ref,
        .dequantize = qp_q5_0_dequantize,
        .vec_dot_f32 = qp_q5_0_vec_dot_ref,
        .validate = qp_q5_0_validate,
        .error_bound = "per 32-block: |err| <= amax/16 * (1 + 2^-6) + 2^-20 (f16 d)",
        .quantize = qp_q5_0_quantize,
        .quantize_imatrix = qp_q5_0_quantize_imatrix,
        .vec_dot_q8 = qp_q5_0_dot_q8_0,
        .vec_dot_q8_tile = qp_q5_0_dot_q8_0_tile,
        .act_encoding = QP_ENC_Q8_0,
    },
    [QP_ENC_Q5_1] = {
        .id = QP_ENC_Q5_1,
        .name = "q5_1",
        .upper_name = "Q5_1",
        .block_elems = QP_QK,
        .block_bytes = QP_Q5_1_BYTES,
        .ggml_type = 7,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q5_1_quantize_ref,
        .dequantize = qp_q5_1_dequantize,
        .vec_dot_f32 = qp_q5_1_vec_dot_ref,
        .validate = qp_q5_1_validate,
        .error_bound = "per 32-block: |err| <= (max-min)/62 + f16 rounding of d and m",
        .quantize = qp_q5_1_quantize_ref,
        .quantize_imatrix = qp_q5_1_quantize_imatrix,
    },
    [QP_ENC_Q8_0] = {
        .id = QP_ENC_Q8_0,
        .name = "q8_0",
        .upper_name = "Q8_0",
        .block_elems = QP_QK,
        .block_bytes = QP_Q8_0_BYTES,
        .ggml_type = 8,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q8_0_quantize_ref,
        .dequantize = qp_q8_0_dequantize,
        .vec_dot_f32 = qp_q8_0_vec_dot,
        .validate = qp_q8_0_validate,
        .error_bound = "per 32-block: |err| <= amax/254 * 1.13 + 2^-18 (f16 d)",
        .quantize = qp_q8_0_quantize,
        .vec_dot_q8 = qp_q8_0_dot_q8_0,
        .vec_dot_q8_tile = qp_q8_0_dot_q8_0_tile,
        .act_encoding = QP_ENC_Q8_0,
    },
    [QP_ENC_Q8_1] = {
        .id = QP_ENC_Q8_1,
        .name = "q8_1",
        .upper_name = "Q8_1",
        .block_elems = QP_QK,
        .block_bytes = QP_Q8_1_BYTES,
        .ggml_type = 9,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_Q2_K] = {
        .id = QP_ENC_Q2_K,
        .name = "q2_k",
        .upper_name = "Q2_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q2_K_BYTES,
        .ggml_type = 10,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q2k_quantize_ref,
        .dequantize = qp_q2k_dequantize,
        .vec_dot_f32 = qp_q2k_vec_dot_ref,
        .validate = qp_q2k_validate,
        .error_bound = "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.45 (see enc_kquants.md)",
        .quantize = qp_q2k_quantize_ref,
        .quantize_imatrix = qp_q2k_quantize_imatrix,
    },
    [QP_ENC_Q3_K] = {
        .id = QP_ENC_Q3_K,
        .name = "q3_k",
        .upper_name = "Q3_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q3_K_BYTES,
        .ggml_type = 11,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q3k_quantize_ref,
        .dequantize = qp_q3k_dequantize,
        .vec_dot_f32 = qp_q3k_vec_dot_ref,
        .validate = qp_q3k_validate,
        .error_bound = "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.25 (see enc_kquants.md)",
        .quantize = qp_q3k_quantize_ref,
        .quantize_imatrix = qp_q3k_quantize_imatrix,
    },
    [QP_ENC_Q4_K] = {
        .id = QP_ENC_Q4_K,
        .name = "q4_k",
        .upper_name = "Q4_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q4_K_BYTES,
        .ggml_type = 12,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q4k_quantize_ref,
        .dequantize = qp_q4k_dequantize,
        .vec_dot_f32 = qp_q4k_vec_dot,
        .validate = qp_q4k_validate,
        .error_bound =
            "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.12 (see "
            "enc_kquants.md)",
        .quantize = qp_q4k_quantize,
        .quantize_imatrix = qp_q4k_quantize_imatrix,
        .vec_dot_q8 = qp_q4k_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
        .vec_dot_q8_tile = qp_q4k_dot_q8k_tile,
        .q8_pack_rows = qp_pack16_rows,
        .q8_pack_block_elems = QP_QK_K,
        .q8_pack_block_bytes = QP_Q4K_PACK_BYTES,
        .q8_pack = qp_q4k_pack16,
        .vec_dot_q8_packed = qp_q4k_packed_dot_q8k,
    },
    [QP_ENC_Q5_K] = {
        .id = QP_ENC_Q5_K,
        .name = "q5_k",
        .upper_name = "Q5_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q5_K_BYTES,
        .ggml_type = 13,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q5k_quantize_ref,
        .dequantize = qp_q5k_dequantize,
        .vec_dot_f32 = qp_q5k_vec_dot_ref,
        .validate = qp_q5k_validate,
        .error_bound = "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.06 (see enc_kquants.md)",
        .quantize = qp_q5k_quantize_ref,
        .quantize_imatrix = qp_q5k_quantize_imatrix,
        .vec_dot_q8 = qp_q5k_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
        .vec_dot_q8_tile = qp_q5k_dot_q8k_tile,
    },
    [QP_ENC_Q6_K] = {
        .id = QP_ENC_Q6_K,
        .name = "q6_k",
        .upper_name = "Q6_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q6_K_BYTES,
        .ggml_type = 14,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q6k_quantize_ref,
        .dequantize = qp_q6k_dequantize,
        .vec_dot_f32 = qp_q6k_vec_dot,
        .validate = qp_q6k_validate,
        .error_bound =
            "fitted (no closed form); measured on N(0,1): rmse/rms <= 0.03 (see "
            "enc_kquants.md)",
        .quantize = qp_q6k_quantize,
        .quantize_imatrix = qp_q6k_quantize_imatrix,
        .vec_dot_q8 = qp_q6k_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
        .vec_dot_q8_tile = qp_q6k_dot_q8k_tile,
        .q8_pack_rows = qp_pack16_rows,
        .q8_pack_block_elems = QP_QK_K,
        .q8_pack_block_bytes = QP_Q6K_PACK_BYTES,
        .q8_pack = qp_q6k_pack16,
        .vec_dot_q8_packed = qp_q6k_packed_dot_q8k,
    },
    [QP_ENC_Q8_K] = {
        .id = QP_ENC_Q8_K,
        .name = "q8_k",
        .upper_name = "Q8_K",
        .block_elems = QP_QK_K,
        .block_bytes = QP_Q8_K_BYTES,
        .ggml_type = 15,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q8k_quantize_ref,
        .dequantize = qp_q8k_dequantize,
        .vec_dot_f32 = qp_q8k_vec_dot_ref,
        .validate = qp_q8k_validate,
        .error_bound = "per 256-block: |err| <= amax/254 (d kept as f32)",
        .quantize = qp_q8k_quantize_ref,
    },
    [QP_ENC_IQ2_XXS] = {
        .id = QP_ENC_IQ2_XXS,
        .name = "iq2_xxs",
        .upper_name = "IQ2_XXS",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ2_XXS_BYTES,
        .ggml_type = 16,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ2_XS] = {
        .id = QP_ENC_IQ2_XS,
        .name = "iq2_xs",
        .upper_name = "IQ2_XS",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ2_XS_BYTES,
        .ggml_type = 17,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ3_XXS] = {
        .id = QP_ENC_IQ3_XXS,
        .name = "iq3_xxs",
        .upper_name = "IQ3_XXS",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ3_XXS_BYTES,
        .ggml_type = 18,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ1_S] = {
        .id = QP_ENC_IQ1_S,
        .name = "iq1_s",
        .upper_name = "IQ1_S",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ1_S_BYTES,
        .ggml_type = 19,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ4_NL] = {
        .id = QP_ENC_IQ4_NL,
        .name = "iq4_nl",
        .upper_name = "IQ4_NL",
        .block_elems = QP_QK,
        .block_bytes = QP_IQ4_NL_BYTES,
        .ggml_type = 20,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_iq4nl_quantize_ref,
        .dequantize = qp_iq4nl_dequantize,
        .vec_dot_f32 = qp_iq4nl_vec_dot_ref,
        .validate = qp_iq4_validate_nl,
        .error_bound = "fitted non-linear levels (no closed form); measured on N(0,1): rmse/rms <= 0.12 (see enc_kquants.md)",
        .quantize = qp_iq4nl_quantize_ref,
        .quantize_imatrix = qp_iq4nl_quantize_imatrix,
    },
    [QP_ENC_IQ3_S] = {
        .id = QP_ENC_IQ3_S,
        .name = "iq3_s",
        .upper_name = "IQ3_S",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ3_S_BYTES,
        .ggml_type = 21,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ2_S] = {
        .id = QP_ENC_IQ2_S,
        .name = "iq2_s",
        .upper_name = "IQ2_S",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ2_S_BYTES,
        .ggml_type = 22,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_IQ4_XS] = {
        .id = QP_ENC_IQ4_XS,
        .name = "iq4_xs",
        .upper_name = "IQ4_XS",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ4_XS_BYTES,
        .ggml_type = 23,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_iq4xs_quantize_ref,
        .dequantize = qp_iq4xs_dequantize,
        .vec_dot_f32 = qp_iq4xs_vec_dot_ref,
        .validate = qp_iq4_validate_xs,
        .error_bound = "fitted non-linear levels (no closed form); measured on N(0,1): rmse/rms <= 0.12 (see enc_kquants.md)",
        .quantize = qp_iq4xs_quantize_ref,
        .quantize_imatrix = qp_iq4xs_quantize_imatrix,
    },
    [QP_ENC_IQ1_M] = {
        .id = QP_ENC_IQ1_M,
        .name = "iq1_m",
        .upper_name = "IQ1_M",
        .block_elems = QP_QK_K,
        .block_bytes = QP_IQ1_M_BYTES,
        .ggml_type = 29,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    /* ternary (enc_ternary.c, enc_ternary.md) */
    [QP_ENC_TQ1_0] = {
        .id = QP_ENC_TQ1_0,
        .name = "tq1_0",
        .upper_name = "TQ1_0",
        .block_elems = QP_QK_K,
        .block_bytes = QP_TQ1_0_BYTES,
        .ggml_type = 34,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY,
        .quantize_ref = qp_tq1_0_quantize_ref,
        .dequantize = qp_tq1_0_dequantize,
        .vec_dot_f32 = qp_tq1_0_vec_dot_ref,
        .validate = qp_tq1_0_validate,
        .error_bound =
            "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + "
            "f16(amax) rounding",
        .quantize = qp_tq1_0_quantize,
        .vec_dot_i8 = qp_tq1_0_vec_dot_i8_fast,
        .vec_dot_q8 = qp_tq1_0_dot_q8k,
        .vec_dot_q8_tile = qp_tq1_0_dot_q8k_tile,
        .act_encoding = QP_ENC_Q8_K,
    },
    [QP_ENC_TQ2_0] = {
        .id = QP_ENC_TQ2_0,
        .name = "tq2_0",
        .upper_name = "TQ2_0",
        .block_elems = QP_QK_K,
        .block_bytes = QP_TQ2_0_BYTES,
        .ggml_type = 35,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY,
        .quantize_ref = qp_tq2_0_quantize_ref,
        .dequantize = qp_tq2_0_dequantize,
        .vec_dot_f32 = qp_tq2_0_vec_dot_ref,
        .validate = qp_tq2_0_validate,
        .error_bound =
            "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + "
            "f16(amax) rounding",
        .quantize = qp_tq2_0_quantize,
        .vec_dot_i8 = qp_tq2_0_vec_dot_i8_fast,
        .vec_dot_i8_tile = qp_tq2_0_vec_dot_i8_tile,
        .vec_dot_q8 = qp_tq2_0_dot_q8k,
        .vec_dot_q8_tile = qp_tq2_0_dot_q8k_tile,
        .act_encoding = QP_ENC_Q8_K,
        .q8_pack_rows = qp_pack16_rows,
        .q8_pack_block_elems = QP_QK_K,
        .q8_pack_block_bytes = QP_TQ2_PACK_BYTES,
        .q8_pack = qp_tq2_0_pack16,
        .vec_dot_q8_packed = qp_tq2_0_packed_dot_q8k,
        .vec_dot_i8_packed = qp_tq2_0_packed_dot_i8,
    },
    [QP_ENC_MXFP4] = {
        .id = QP_ENC_MXFP4,
        .name = "mxfp4",
        .upper_name = "MXFP4",
        .block_elems = QP_QK,
        .block_bytes = QP_MXFP4_BYTES,
        .ggml_type = 39,
        .flags = QP_ENC_FLAG_BLOCK,
    },
    [QP_ENC_I2_S] = {
        .id = QP_ENC_I2_S,
        .name = "i2_s",
        .upper_name = "I2_S",
        .block_elems = QP_I2S_BLOCK,
        .block_bytes = QP_I2S_BYTES,
        .ggml_type = 36,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY | QP_ENC_FLAG_EXT_SCALE,
        .tensor_trailer_bytes = QP_I2S_TRAILER,
        .dequantize = qp_i2s_dequantize,
        .vec_dot_f32 = qp_i2s_vec_dot,
        .validate = qp_i2s_validate,
        .error_bound = "exact for ternary tensors {-s,0,+s}; else absmean ternarization (lossy)",
        .vec_dot_i8 = qp_i2s_vec_dot_i8_fast,
        .vec_dot_i8_tile = qp_i2s_vec_dot_i8_tile,
        .quantize_tensor = qp_i2s_quantize_tensor,
        .dequantize_tensor = qp_i2s_dequantize_tensor,
        .gguf_flavour = "i2_s",
        .vec_dot_q8 = qp_i2s_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
        /* TQ2_0's layout and kernels (encodings.md "Repacked I2_S rows") */
        .q8_pack_rows = qp_pack16_rows,
        .q8_pack_block_elems = QP_QK_K,
        .q8_pack_block_bytes = QP_TQ2_PACK_BYTES,
        .q8_pack = qp_i2s_pack16,
        .vec_dot_q8_packed = qp_tq2_0_packed_dot_q8k,
        .vec_dot_i8_packed = qp_tq2_0_packed_dot_i8,
    },
    [QP_ENC_I2_S_ARM] = {
        .id = QP_ENC_I2_S_ARM,
        .name = "i2_s_arm",
        .upper_name = "I2_S_ARM",
        .block_elems = QP_I2S_ARM_BLOCK,
        .block_bytes = QP_I2S_ARM_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY | QP_ENC_FLAG_EXT_SCALE,
        .tensor_trailer_bytes = QP_I2S_TRAILER,
        .dequantize = qp_i2s_arm_dequantize,
        .vec_dot_f32 = qp_i2s_arm_vec_dot,
        .validate = qp_i2s_arm_validate,
        .error_bound = "exact for ternary tensors {-s,0,+s}; else absmean ternarization (lossy)",
        .vec_dot_i8 = qp_i2s_arm_vec_dot_i8_fast,
        .quantize_tensor = qp_i2s_arm_quantize_tensor,
        .dequantize_tensor = qp_i2s_arm_dequantize_tensor,
        .vec_dot_q8 = qp_i2s_arm_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
    },
    [QP_ENC_QK256] = {
        .id = QP_ENC_QK256,
        .name = "qk256",
        .upper_name = "QK256",
        .block_elems = QP_QK256_BLOCK,
        .block_bytes = QP_QK256_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_SIBLING_SCALE,
        .quantize_ref = qp_qk256_quantize_ref,
        .dequantize = qp_qk256_dequantize,
        .vec_dot_f32 = qp_qk256_vec_dot,
        .error_bound =
            "exact for values in {-2,-1,+1,+2}; nearest level otherwise (ternary 0 -> +1)",
        .quantize = qp_qk256_quantize,
        .vec_dot_i8 = qp_qk256_vec_dot_i8_fast,
        .gguf_shared_type = 36, /* I2_S's id (BitNet-rs reads it from type 36) */
        .gguf_flavour = "qk256",
        .vec_dot_q8 = qp_qk256_dot_q8k,
        .act_encoding = QP_ENC_Q8_K,
    },
    [QP_ENC_BITNET32F16] = {
        .id = QP_ENC_BITNET32F16,
        .name = "bitnet32f16",
        .upper_name = "BitNet32F16",
        .block_elems = QP_QK,
        .block_bytes = QP_BITNET32F16_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY,
        .quantize_ref = qp_bitnet32f16_quantize_ref,
        .dequantize = qp_bitnet32f16_dequantize,
        .vec_dot_f32 = qp_bitnet32f16_vec_dot,
        .validate = qp_bitnet32f16_validate,
        .error_bound =
            "exact for ternary blocks {-a,0,+a} (a an f16); else |err| <= amax/2 + f16 "
            "rounding",
        .quantize = qp_bitnet32f16_quantize,
        .vec_dot_i8 = qp_bitnet32f16_vec_dot_i8_fast,
        .gguf_flavour = "bitnet32f16",
    },
    [QP_ENC_SPLIT32] = {
        .id = QP_ENC_SPLIT32,
        .name = "split32",
        .upper_name = "Split32",
        .block_elems = QP_QK,
        .block_bytes = QP_SPLIT32_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_TERNARY | QP_ENC_FLAG_EXT_SCALE,
        .dequantize = qp_split32_dequantize_unit,
        .vec_dot_f32 = qp_split32_vec_dot_unit,
        .error_bound = "codes only; scales in a sibling tensor (qp_split32_quantize)",
        .vec_dot_i8 = qp_split32_vec_dot_i8_fast,
        .gguf_flavour = "split32",
    },
    /* bullet-core (enc_bq4.c, enc_bq4.md) */
    [QP_ENC_BQ4] = {
        .id = QP_ENC_BQ4,
        .name = "bq4",
        .upper_name = "BQ4",
        .block_elems = QP_QK,
        .block_bytes = QP_BQ4_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_bq4_quantize_ref,
        .dequantize = qp_bq4_dequantize,
        .vec_dot_f32 = qp_bq4_vec_dot,
        .validate = qp_bq4_validate,
        .error_bound =
            "per 32-block: |err| <= scale/2, scale = (max(hi,0)-min(lo,0))/15 rounded up to "
            "f16; constant and all-zero blocks exact",
        .quantize = qp_bq4_quantize_ref,
        .vec_dot_q8 = qp_bq4_dot_q8_0,
        .vec_dot_q8_tile = qp_bq4_dot_q8_0_tile,
        .q8_pack_rows = qp_pack16_rows,
        .q8_pack_block_elems = QP_QK,
        .q8_pack_block_bytes = QP_BQ4_PACK_BYTES,
        .q8_pack = qp_bq4_pack16,
        .vec_dot_q8_packed = qp_bq4_packed_dot_q8_0,
        .act_encoding = QP_ENC_Q8_0,
    },
    /* TRLM v1 ternary (enc_trlm.c, readers/trlm.md); not flagged T: the runtime keeps F32 activations */
    [QP_ENC_TRLM_T2] = {
        .id = QP_ENC_TRLM_T2,
        .name = "trlm_t2",
        .upper_name = "TRLM_T2",
        .block_elems = QP_TRLM_T2_BLOCK,
        .block_bytes = 1,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK | QP_ENC_FLAG_EXT_SCALE,
        .tensor_trailer_bytes = QP_TRLM_T2_TRAILER,
        .quantize_ref = qp_trlm_t2_quantize_ref,
        .dequantize = qp_trlm_t2_dequantize,
        .vec_dot_f32 = qp_trlm_t2_vec_dot,
        .validate = qp_trlm_t2_validate,
        .error_bound =
            "exact for ternary tensors {-s,0,+s}; else ternarization with s = mean |w| over "
            "nonzero w (lossy)",
        .quantize = qp_trlm_t2_quantize_ref,
        .quantize_tensor = qp_trlm_t2_quantize_tensor,
        .dequantize_tensor = qp_trlm_t2_dequantize_tensor,
    },
    /* int8 rows for embeddings (enc_i8row.c, encodings.md "I8_ROW"; TRLM I8ROWS) */
    [QP_ENC_I8_ROW] = {
        .id = QP_ENC_I8_ROW,
        .name = "i8_row",
        .upper_name = "I8_ROW",
        .block_elems = QP_QK,
        .block_bytes = QP_I8_ROW_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_i8row_quantize_ref,
        .dequantize = qp_i8row_dequantize,
        .vec_dot_f32 = qp_i8row_vec_dot,
        .validate = qp_i8row_validate,
        .error_bound =
            "per 32-block: |err| <= amax/254 * (1 + 2^-14) when d = amax/127 is a normal "
            "f32; all-zero blocks exact",
        .quantize = qp_i8row_quantize_ref,
        .vec_dot_i8 = qp_i8row_vec_dot_i8,
    },
    /* Trillim's current actions 4 and 5 (enc_trlm_groups.c, enc_trlm_groups.md; TRLM kinds 5, 6) */
    [QP_ENC_Q1_0_128] = {
        .id = QP_ENC_Q1_0_128,
        .name = "q1_0_128",
        .upper_name = "Q1_0_128",
        .block_elems = QP_G128_BLOCK,
        .block_bytes = QP_Q1_0_128_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_q1g128_quantize_ref,
        .dequantize = qp_q1g128_dequantize,
        .vec_dot_f32 = qp_q1g128_vec_dot,
        .validate = qp_q1g128_validate,
        .error_bound =
            "exact for groups {-a,+a} with a an f16 value; else sign(w) x f16(mean |w|) per "
            "128-group (lossy)",
        .quantize = qp_q1g128_quantize_ref,
    },
    [QP_ENC_TG128] = {
        .id = QP_ENC_TG128,
        .name = "tg128",
        .upper_name = "TG128",
        .block_elems = QP_G128_BLOCK,
        .block_bytes = QP_TG128_BYTES,
        .ggml_type = -1,
        .flags = QP_ENC_FLAG_BLOCK,
        .quantize_ref = qp_tg128_quantize_ref,
        .dequantize = qp_tg128_dequantize,
        .vec_dot_f32 = qp_tg128_vec_dot,
        .validate = qp_tg128_validate,
        .error_bound =
            "exact for groups {-a,0,+a} with a an f16 value; else ternary with d = f16(mean |w| "
            "over nonzero w) per 128-group (lossy)",
        .quantize = qp_tg128_quantize_ref,
    },
};

const qp_encoding_traits *qp_encoding_get(qp_encoding enc) {
    if ((unsigned)enc >= QP_ENC_COUNT || !k_traits[enc].name) return NULL;
    return &k_traits[enc];
}

int qp_encoding_gguf_type(qp_encoding enc) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t) return -1;
    return t->ggml_type >= 0 ? t->ggml_type : t->gguf_shared_type > 0 ? t->gguf_shared_type : -1;
}

bool qp_encoding_has_sibling_scale(qp_encoding enc) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    return t && (t->flags & QP_ENC_FLAG_SIBLING_SCALE) != 0;
}

qp_encoding qp_encoding_from_gguf_flavour(const char *flavour) {
    if (!flavour) return QP_ENC_COUNT;
    for (int i = 0; i < QP_ENC_COUNT; i++)
        if (k_traits[i].gguf_flavour && strcmp(k_traits[i].gguf_flavour, flavour) == 0)
            return (qp_encoding)i;
    return QP_ENC_COUNT;
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

bool qp_encoding_padded_row_bytes(qp_encoding enc, int64_t n, size_t *out) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t || n < 0) return false;
    int64_t blocks = n / t->block_elems + (n % t->block_elems != 0);
    return qp_size_mul((size_t)blocks, t->block_bytes, out);
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
