/* The one traits table of tensor encodings. Nothing outside encodings/encodings*.c switches on
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
    QP_ENC_I2_S_ARM,  /* microsoft/BitNet ARM layout: 64-element blocks of 16 bytes + trailer */
    QP_ENC_QK256,     /* BitNet-rs GgmlQk256NoScale: 256 elements in 64 bytes, LUT [-2,-1,1,2] */
    QP_ENC_BITNET32F16, /* BitNet-rs BitNet32F16: 32 elements in 8 bytes + inline f16 scale */
    QP_ENC_SPLIT32,   /* BitNet-rs Split32WithSibling: 32 elements in 8 bytes, scales elsewhere */
    QP_ENC_BQ4,       /* bullet-core BQ4: 32 elements in 20 bytes (f16 scale, i8 zero, nibbles) */
    QP_ENC_TRLM_T2,   /* TRLM v1 ternary rows: 4 codes per byte (q+1, LSB first) + f32 tensor scale
                         trailer; F32 activations (readers/trlm.md) */
    QP_ENC_I8_ROW,    /* int8 rows for embeddings: 32 elements in 36 bytes (f32 absmax/127 scale, then
                         32 int8); TRLM I8ROWS tensors (encodings/encodings.md "I8_ROW") */
    QP_ENC_Q1_0_128,  /* TRLM Q1_0_128 (Trillim action 4): 128 elements in 18 bytes (f16 d, 16 bytes
                         of sign bits, w = +-d); encodings/enc_trlm_groups.md */
    QP_ENC_TG128,     /* TRLM grouped ternary (action 5): 128 elements in 34 bytes (f16 d, 32 bytes
                         of 2-bit codes q+1); encodings/enc_trlm_groups.md */
    /* add new encodings above this line */
    QP_ENC_COUNT
} qp_encoding;

enum {
    QP_ENC_FLAG_FLOAT = 1u << 0,   /* plain floating-point element type */
    QP_ENC_FLAG_INT = 1u << 1,     /* plain integer / bool element type */
    QP_ENC_FLAG_BLOCK = 1u << 2,   /* block-quantized */
    QP_ENC_FLAG_TERNARY = 1u << 3, /* values in {-1,0,+1} * scale */
    /* The scale lives outside the rows (I2_S: per-tensor trailer; SPLIT32: sibling tensor). The
     * row functions (dequantize, vec_dot_*) then work at unit scale: multiply by the scale from
     * qp_encoding_tensor_scale() (I2_S) or the sibling tensor. quantize_tensor writes it. */
    QP_ENC_FLAG_EXT_SCALE = 1u << 4,
    /* The rows decode at unit scale and the tensor's scale, when there is one, is a one-element
     * F32/F16 sibling tensor "<base>.scale" next to "<base>.weight" (QK256, as BitNet-rs and
     * llama.cpp's BitNet graph name it). A converter folds the source's sibling into the decoded
     * weights, never copies it as a tensor of its own, and writes a fresh one after every output
     * tensor of such an encoding. Without a sibling the scale is 1. */
    QP_ENC_FLAG_SIBLING_SCALE = 1u << 5,
    /* The runtime's fast path reads these rows from its own copy, made once at load (runtime.md
     * "Repacked rows": runtime memory has transparent huge pages, a file mapping 4 KB pages). */
    QP_ENC_FLAG_FAST_COPY = 1u << 6,
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
/* Dot product of one encoded row of n elements with n int8 activations (ternary and other
 * integer-level encodings): sum over blocks of block_scale * (exact integer sum of level * a),
 * accumulated in double in block order. Encodings without a per-block scale (I2_S, QK256,
 * SPLIT32) use block_scale 1, so the result is the exact integer sum. */
typedef double (*qp_vec_dot_i8_fn)(const void *w, const int8_t *a, int64_t n);
/* One row of n elements (a multiple of block_elems) with n importance weights qw (llama.cpp's
 * quantize_<type>(..., quant_weights), the importance matrix of llama-imatrix); qw NULL gives the
 * bytes of quantize. */
typedef void (*qp_quantize_imatrix_fn)(const float *x, void *y, int64_t n, const float *qw);
/* Fast-path dot (runtime.md "Fast path"): one encoded row of n elements with n activations
 * quantized by the traits of act_encoding (Q8_0 or Q8_K blocks); integer block products, one
 * float step per block; the same bits at every SIMD level (encodings.md "Fast dots"). */
typedef float (*qp_vec_dot_q8_fn)(const void *w, const void *xq, int64_t n);
/* The same dot for n_rows rows (row r at w + r * ldw) x n_tok tokens at once: y[t * ldy + r] =
 * vec_dot_q8(w + r * ldw, xq + t * ldxq, n) bit for bit; a tile of rows shares the activation
 * loads and a tile of tokens shares the unpacking of each weight block. */
typedef void (*qp_vec_dot_q8_tile_fn)(const void *w, size_t ldw, int64_t n_rows, const void *xq,
                                      size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy);
/* Rows repacked once at load for the fast path (encodings.md "Repacked Q4_K rows"): pack writes
 * the q8_pack_rows() rows at w, w + ldw, ... (n elements each, n a multiple of
 * q8_pack_block_elems) interleaved, q8_pack_block_bytes bytes per q8_pack_block_elems elements of
 * those rows; vec_dot_q8_packed dots n_groups such groups (group g at packed + g * (n /
 * q8_pack_block_elems) * q8_pack_block_bytes) with n_tok tokens: y[t * ldy + g * rows + r] =
 * vec_dot_q8(row g * rows + r, token t) bit for bit. */
typedef void (*qp_q8_pack_fn)(const void *w, size_t ldw, int64_t n, void *out);
typedef void (*qp_vec_dot_q8_packed_fn)(const void *packed, int64_t n_groups, const void *xq, size_t ldxq,
                                        int64_t n_tok, int64_t n, float *y, size_t ldy);
/* vec_dot_i8 for n_rows rows (row r at w + r * ldw) x n_tok tokens (token t's int8 activations at
 * a + t * lda) at once: y[t * ldy + r] = vec_dot_i8(w + r * ldw, a + t * lda, n) exactly. */
typedef void (*qp_vec_dot_i8_tile_fn)(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                                      int64_t n_tok, int64_t n, double *y, size_t ldy);
/* vec_dot_i8 over n_groups groups of the q8_pack layout (the int8-activation products, runtime.md
 * "Repacked rows"): y[t * ldy + g * rows + r] = vec_dot_i8(row g * rows + r, a + t * lda, n) exactly. */
typedef void (*qp_vec_dot_i8_packed_fn)(const void *packed, int64_t n_groups, const int8_t *a, size_t lda,
                                        int64_t n_tok, int64_t n, double *y, size_t ldy);
/* Whole tensor of n elements -> qp_encoding_tensor_bytes() bytes, including any trailer. */
typedef void (*qp_quantize_tensor_fn)(const float *x, void *y, int64_t n);

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
    /* Fields added by the encodings issue (NULL when absent). */
    qp_quantize_fn quantize;          /* fastest path (SIMD when the CPU has it); same bytes as
                                         quantize_ref; NULL when quantize_ref is NULL */
    qp_vec_dot_i8_fn vec_dot_i8;      /* see qp_vec_dot_i8_fn */
    qp_quantize_tensor_fn quantize_tensor; /* whole tensor incl. trailer; NULL when rows suffice */
    qp_dequantize_fn dequantize_tensor;    /* whole tensor incl. trailer scale; NULL likewise */
    /* GGUF: an encoding without a type id of its own is written under a shared one (QK256 under
     * type 36, I2_S's id; 0 = none), and every encoding that shares type 36 names its flavour in
     * the file's quantpack.i2s.flavour key (readers/gguf.md "Type 36 flavours"); NULL = none. */
    int gguf_shared_type;
    const char *gguf_flavour;
    /* with an importance matrix (NULL: the encoding does not use one; quantize applies) */
    qp_quantize_imatrix_fn quantize_imatrix;
    /* Fast path (NULL when absent): vec_dot_q8 against activations quantized with
     * qp_encoding_get(act_encoding)->quantize (QP_ENC_Q8_0 or QP_ENC_Q8_K; QP_ENC_F16 for F16
     * rows: the activations rounded to F16). */
    qp_vec_dot_q8_fn vec_dot_q8;
    qp_encoding act_encoding;
    qp_vec_dot_q8_tile_fn vec_dot_q8_tile; /* NULL: vec_dot_q8 pair by pair */
    qp_vec_dot_i8_tile_fn vec_dot_i8_tile; /* NULL: vec_dot_i8 pair by pair */
    /* Fast path over repacked rows (qp_q8_pack_fn; NULL when absent): q8_pack_rows() rows per
     * group, 0 when the current SIMD level has no kernel for the layout (the file's rows are
     * then read as they are); vec_dot_q8_packed works at every level. A packed block holds
     * q8_pack_block_elems elements of each row (a multiple of block_elems: I2_S's 128-element
     * rows go into TQ2_0's 256-element layout); rows of other lengths are not repacked. */
    int64_t (*q8_pack_rows)(void);
    int64_t q8_pack_block_elems;
    size_t q8_pack_block_bytes;
    qp_q8_pack_fn q8_pack;
    qp_vec_dot_q8_packed_fn vec_dot_q8_packed;
    qp_vec_dot_i8_packed_fn vec_dot_i8_packed; /* the same layout with int8 activations (NULL: none) */
} qp_encoding_traits;

/* Traits of an encoding; NULL for an out-of-range value. */
QP_API const qp_encoding_traits *qp_encoding_get(qp_encoding enc);
/* The GGUF type id a tensor of this encoding is written under: its own ggml_type, else its
 * gguf_shared_type; -1 when GGUF cannot hold it. */
QP_API int qp_encoding_gguf_type(qp_encoding enc);
/* Whether an encoding's tensor scale is a "<base>.scale" sibling (QP_ENC_FLAG_SIBLING_SCALE). */
QP_API bool qp_encoding_has_sibling_scale(qp_encoding enc);
/* The encoding a quantpack.i2s.flavour value names (gguf_flavour); QP_ENC_COUNT when none. */
QP_API qp_encoding qp_encoding_from_gguf_flavour(const char *flavour);
/* Lookups; return QP_ENC_COUNT when there is no match. */
QP_API qp_encoding qp_encoding_from_name(const char *lower_or_upper_name);
QP_API qp_encoding qp_encoding_from_ggml_type(int64_t ggml_type);
QP_API qp_encoding qp_encoding_from_st_dtype(const char *dtype, size_t len);

/* Bytes of n elements (n must be a multiple of block_elems), excluding any tensor trailer.
 * False when n is negative, not a multiple, or the size overflows. */
QP_API bool qp_encoding_row_bytes(qp_encoding enc, int64_t n, size_t *out);
/* Bytes of n elements zero-padded up to whole blocks: ceil(n / block_elems) * block_bytes
 * (no trailer). False when n is negative or the size overflows. */
QP_API bool qp_encoding_padded_row_bytes(qp_encoding enc, int64_t n, size_t *out);
/* Bytes of a whole tensor of n_elems elements, including the trailer. */
QP_API bool qp_encoding_tensor_bytes(qp_encoding enc, int64_t n_elems, size_t *out);
/* Per-tensor scale of an encoding with QP_ENC_FLAG_EXT_SCALE and a trailer (I2_S, I2_S_ARM):
 * reads the f32 at byte n/4 of a tensor of tensor_bytes bytes. False when the bytes are too few or
 * the encoding has no trailer scale. Encodings without one report 1.0f. */
QP_API bool qp_encoding_tensor_scale(qp_encoding enc, const void *tensor, size_t tensor_bytes,
                              int64_t n_elems, float *scale);

/* Whole tensors of n elements: through quantize_tensor / dequantize_tensor when the encoding
 * has them, else the row functions over all n. x/y sized by qp_encoding_tensor_bytes. Return
 * false (nothing written) when the encoding cannot do it or n is not a multiple of the block. */
QP_API bool qp_encoding_quantize_tensor(qp_encoding enc, const float *x, void *y, int64_t n);
QP_API bool qp_encoding_dequantize_tensor(qp_encoding enc, const void *x, float *y, int64_t n);

/* ---- SIMD dispatch ---------------------------------------------------------------------------
 * "scalar", "avx2" or "avx512": the kernels the traits' quantize / vec_dot use in this process
 * (cpuid at first use; QP_FORCE_SCALAR=1 in the environment forces "scalar"). */
QP_API const char *qp_encoding_simd_level(void);
/* Test hook: 0 = scalar, 1 = up to AVX2, 2 = up to AVX-512, -1 = back to cpuid. Never above
 * what the CPU has. Not thread-safe: call before starting threads. */
QP_API void qp_encoding_simd_force(int level);

/* ---- ternary helpers (encodings/enc_ternary.md "BitNet b1.58") ------------------------------
 * BitNet b1.58 absmean weight quantization of one tensor: mean = max(mean|w|, 1e-5) (summed in
 * double, rounded to float), q = clamp(round_half_even(w / mean), -1, 1). Writes q[n] and the
 * dequant scale *scale = mean (w ~= q * mean). */
QP_API void qp_ternary_absmean(const float *w, int64_t n, int8_t *q, float *scale);
/* Per-token activation quantization: s = 127 / max(max|x|, 1e-5); a = clamp(round_half_even(x*s),
 * -128, 127). Returns s (x ~= a / s). */
QP_API float qp_act_quantize_i8(const float *x, int64_t n, int8_t *a);

/* microsoft/bitnet-b1.58 packed checkpoint form: U8 [out/4, in], bits 2i+1:2i of packed[r,c] hold
 * W[r + i*out/4, c] + 1 (codes 0 -> -1, 1 -> 0, 2 -> +1), with a sibling weight_scale.
 * out must be a multiple of 4. unpack fails (false, *bad_index set) on code 3. */
QP_API void qp_bitnet_u8_pack(const int8_t *w, int64_t out, int64_t in, uint8_t *packed);
QP_API bool qp_bitnet_u8_unpack(const uint8_t *packed, int64_t out, int64_t in, int8_t *w,
                         int64_t *bad_index);
QP_API bool qp_bitnet_u8_to_f32(const uint8_t *packed, int64_t out, int64_t in, float weight_scale,
                         float *w, int64_t *bad_index);
/* Levels q[n] in {-1, 0, +1} (n a multiple of 128) -> n/4 bytes of x86 I2_S blocks (no trailer):
 * byte 32b + p = c[128b+p]<<6 | c[128b+32+p]<<4 | c[128b+64+p]<<2 | c[128b+96+p], c = q + 1. */
QP_API void qp_i2s_pack_levels(const int8_t *q, uint8_t *y, int64_t n);

/* Split32WithSibling: n elements (multiple of 32) -> n/4 code bytes + n/32 f32 block scales
 * (absmax per block; q = clamp(round_half_even(x / scale), -1, 1)); and back. */
QP_API void qp_split32_quantize(const float *x, uint8_t *codes, float *scales, int64_t n);
QP_API void qp_split32_dequantize(const uint8_t *codes, const float *scales, float *y, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
