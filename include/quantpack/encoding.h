/* The one traits table of tensor encodings. Nothing outside converters/encodings*.c switches on
 * an encoding: callers look up a qp_encoding_traits and call through it. */
#ifndef QUANTPACK_ENCODING_H
#define QUANTPACK_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Order is internal (not a file format); file type ids live in the traits (ggml_type). */
typedef enum qp_encoding {
    /* plain types */
    QP_ENC_F32 = 0,
    QP_ENC_F16,
    QP_ENC_BF16,
    QP_ENC_F64,
    QP_ENC_I8,
    QP_ENC_I16,
    QP_ENC_I32,
    QP_ENC_I64,
    QP_ENC_U8,
    QP_ENC_U16,
    QP_ENC_U32,
    QP_ENC_U64,
    QP_ENC_BOOL,
    /* llama.cpp block types */
    QP_ENC_Q4_0,
    QP_ENC_Q4_1,
    QP_ENC_Q5_0,
    QP_ENC_Q5_1,
    QP_ENC_Q8_0,
    QP_ENC_Q8_1,
    QP_ENC_Q2_K,
    QP_ENC_Q3_K,
    QP_ENC_Q4_K,
    QP_ENC_Q5_K,
    QP_ENC_Q6_K,
    QP_ENC_Q8_K,
    QP_ENC_IQ2_XXS,
    QP_ENC_IQ2_XS,
    QP_ENC_IQ3_XXS,
    QP_ENC_IQ1_S,
    QP_ENC_IQ4_NL,
    QP_ENC_IQ3_S,
    QP_ENC_IQ2_S,
    QP_ENC_IQ4_XS,
    QP_ENC_IQ1_M,
    QP_ENC_TQ1_0,
    QP_ENC_TQ2_0,
    QP_ENC_MXFP4,
    /* BitNet family */
    QP_ENC_I2_S,      /* microsoft/BitNet x86 layout, 128-element blocks + per-tensor f32 trailer */
    /* add new encodings above this line (the encodings issue appends I2_S_ARM, QK256, BQ4, ...) */
    QP_ENC_COUNT
} qp_encoding;

enum {
    QP_ENC_FLAG_FLOAT = 1u << 0,   /* plain floating-point element type */
    QP_ENC_FLAG_INT = 1u << 1,     /* plain integer / bool element type */
    QP_ENC_FLAG_BLOCK = 1u << 2,   /* block-quantized */
    QP_ENC_FLAG_TERNARY = 1u << 3, /* values in {-1,0,+1} * scale */
};

/* x: n floats (n a multiple of block_elems) -> y: n/block_elems blocks. Deterministic bytes. */
typedef void (*qp_quantize_fn)(const float *x, void *y, int64_t n);
/* x: n/block_elems blocks -> y: n floats. */
typedef void (*qp_dequantize_fn)(const void *x, float *y, int64_t n);
/* Dot product of one encoded row of n elements with n F32 activations. */
typedef float (*qp_vec_dot_f32_fn)(const void *w, const float *x, int64_t n);
/* Checks untrusted blocks (NaN/Inf scales, illegal codes). Returns false and writes a reason
 * naming the block index into why (when non-NULL) on the first bad block. */
typedef bool (*qp_validate_fn)(const void *x, int64_t n, char *why, size_t why_len);

typedef struct qp_encoding_traits {
    qp_encoding id;
    const char *name;         /* lower-case: "f32", "q4_k", "i2_s" */
    const char *upper_name;   /* as GGUF / llama.cpp print it: "F32", "Q4_K" */
    int64_t block_elems;      /* 1 for plain types */
    size_t block_bytes;       /* bytes per block (element size for plain types) */
    int ggml_type;            /* GGUF tensor type id; -1 when none */
    const char *st_dtype;     /* safetensors dtype ("F32", "BF16", "BOOL"); NULL when none */
    unsigned flags;           /* QP_ENC_FLAG_* */
    size_t tensor_trailer_bytes; /* bytes after the blocks of a whole tensor (I2_S: 32) */
    qp_quantize_fn quantize_ref;     /* NULL when we cannot write it */
    qp_dequantize_fn dequantize;     /* NULL when we cannot read it */
    qp_vec_dot_f32_fn vec_dot_f32;   /* NULL when not usable by the runtime */
    qp_validate_fn validate;         /* NULL when every bit pattern is valid */
    const char *error_bound;  /* documented bound of quantize->dequantize, human-readable */
} qp_encoding_traits;

/* Traits of an encoding; NULL for an out-of-range value. */
const qp_encoding_traits *qp_encoding_get(qp_encoding enc);
/* Lookups; return QP_ENC_COUNT when there is no match. */
qp_encoding qp_encoding_from_name(const char *lower_or_upper_name);
qp_encoding qp_encoding_from_ggml_type(int64_t ggml_type);
qp_encoding qp_encoding_from_st_dtype(const char *dtype, size_t len);

/* Bytes of n elements (n must be a multiple of block_elems), excluding any tensor trailer.
 * False when n is negative, not a multiple, or the size overflows. */
bool qp_encoding_row_bytes(qp_encoding enc, int64_t n, size_t *out);
/* Bytes of a whole tensor of n_elems elements, including the trailer. */
bool qp_encoding_tensor_bytes(qp_encoding enc, int64_t n_elems, size_t *out);

#ifdef __cplusplus
}
#endif
#endif
