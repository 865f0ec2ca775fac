/* Function declarations for the traits table (encodings/encodings.c). One file per encoding
 * family implements them (enc_plain.c, enc_kquants.c, enc_ternary.c, ...). */
#ifndef QP_ENCODINGS_INTERNAL_H
#define QP_ENCODINGS_INTERNAL_H

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "encodings/block_layouts.h"

/* enc_plain.c */
void qp_f32_quantize(const float *x, void *y, int64_t n);
void qp_f32_dequantize(const void *x, float *y, int64_t n);
float qp_f32_vec_dot(const void *w, const float *x, int64_t n);
bool qp_f32_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_f16_quantize(const float *x, void *y, int64_t n);
void qp_f16_dequantize(const void *x, float *y, int64_t n);
float qp_f16_vec_dot(const void *w, const float *x, int64_t n);
bool qp_f16_validate(const void *x, int64_t n, char *why, size_t why_len);
float qp_f16_dot_f16(const void *w, const void *x, int64_t n);
void qp_f16_dot_f16_tile(const void *w, size_t ldw, int64_t n_rows, const void *x, size_t ldx, int64_t n_tok,
                         int64_t n, float *y, size_t ldy);
void qp_bf16_quantize(const float *x, void *y, int64_t n);
void qp_bf16_dequantize(const void *x, float *y, int64_t n);
float qp_bf16_vec_dot(const void *w, const float *x, int64_t n);
bool qp_bf16_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_f64_dequantize(const void *x, float *y, int64_t n);
void qp_i8_dequantize(const void *x, float *y, int64_t n);
void qp_i16_dequantize(const void *x, float *y, int64_t n);
void qp_i32_dequantize(const void *x, float *y, int64_t n);
void qp_i64_dequantize(const void *x, float *y, int64_t n);
void qp_u8_dequantize(const void *x, float *y, int64_t n);
void qp_u16_dequantize(const void *x, float *y, int64_t n);
void qp_u32_dequantize(const void *x, float *y, int64_t n);
void qp_u64_dequantize(const void *x, float *y, int64_t n);


#define QP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define QP_MAX(a, b) ((a) > (b) ? (a) : (b))

/* llama.cpp's nearest_int: round half to even through the 1.5*2^23 trick. Exact for |f| <=
 * 4194303; other inputs give a defined but meaningless result (no UB). */
static inline int qp_nearest_int(float f) {
    float val = f + 12582912.f;
    uint32_t i;
    memcpy(&i, &val, sizeof i);
    return (int)(i & 0x007fffffu) - 0x00400000;
}

/* enc_kquants.c (block-level functions are shared with the SIMD files) */
void qp_q4k_quantize_block_ref(const float *x, uint8_t *y);
void qp_q4k_quantize_ref(const float *x, void *y, int64_t n);
void qp_q4k_dequantize(const void *x, float *y, int64_t n);
float qp_q4k_vec_dot_ref(const void *w, const float *x, int64_t n);
bool qp_q4k_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_q6k_quantize_block_ref(const float *x, uint8_t *y);
void qp_q6k_quantize_ref(const float *x, void *y, int64_t n);
void qp_q6k_dequantize(const void *x, float *y, int64_t n);
float qp_q6k_vec_dot_ref(const void *w, const float *x, int64_t n);
bool qp_q6k_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_q8k_quantize_ref(const float *x, void *y, int64_t n);
void qp_q8k_dequantize(const void *x, float *y, int64_t n);
float qp_q8k_vec_dot_ref(const void *w, const float *x, int64_t n);
bool qp_q8k_validate(const void *x, int64_t n, char *why, size_t why_len);

/* The f16 at off_d (and at off_dmin when >= 0) of each of nblocks blocks must be finite; false
 * naming the first bad block otherwise. */
bool qp_blocks_validate_f16(const void *x, int64_t nblocks, size_t block_bytes, int off_d,
                            int off_dmin, char *why, size_t why_len);
/* One row of n elements with n importance weights qw (llama.cpp's quantize_<type> with
 * quant_weights; NULL: the same bytes as without an importance matrix). */
void qp_q4k_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
void qp_q6k_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
#define QP_KQUANT_DECL(NAME)                                                                     \
    void qp_##NAME##_quantize_ref(const float *x, void *y, int64_t n);                           \
    void qp_##NAME##_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);      \
    void qp_##NAME##_dequantize(const void *x, float *y, int64_t n);                             \
    float qp_##NAME##_vec_dot_ref(const void *w, const float *x, int64_t n);
QP_KQUANT_DECL(q2k)
QP_KQUANT_DECL(q3k)
QP_KQUANT_DECL(q5k)
QP_KQUANT_DECL(iq4nl)
QP_KQUANT_DECL(iq4xs)
bool qp_q2k_validate(const void *x, int64_t n, char *why, size_t why_len);
bool qp_q3k_validate(const void *x, int64_t n, char *why, size_t why_len);
bool qp_q5k_validate(const void *x, int64_t n, char *why, size_t why_len);
bool qp_iq4_validate_nl(const void *x, int64_t n, char *why, size_t why_len);
bool qp_iq4_validate_xs(const void *x, int64_t n, char *why, size_t why_len);

/* enc_legacy.c */
#define QP_LEGACY_DECL(NAME)                                                                     \
    void qp_##NAME##_quantize_ref(const float *x, void *y, int64_t n);                           \
    void qp_##NAME##_dequantize(const void *x, float *y, int64_t n);                             \
    float qp_##NAME##_vec_dot_ref(const void *w, const float *x, int64_t n);                     \
    bool qp_##NAME##_validate(const void *x, int64_t n, char *why, size_t why_len);             \
    void qp_##NAME##_quantize_imatrix(const float *x, void *y, int64_t n, const float *qw);
QP_LEGACY_DECL(q4_0)
QP_LEGACY_DECL(q4_1)
QP_LEGACY_DECL(q5_0)
QP_LEGACY_DECL(q5_1)
QP_LEGACY_DECL(q8_0)

/* enc_ternary.c */
void qp_tq1_0_quantize_ref(const float *x, void *y, int64_t n);
void qp_tq1_0_dequantize(const void *x, float *y, int64_t n);
float qp_tq1_0_vec_dot_ref(const void *w, const float *x, int64_t n);
double qp_tq1_0_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
bool qp_tq1_0_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_tq2_0_quantize_ref(const float *x, void *y, int64_t n);
void qp_tq2_0_dequantize(const void *x, float *y, int64_t n);
float qp_tq2_0_vec_dot_ref(const void *w, const float *x, int64_t n);
double qp_tq2_0_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
bool qp_tq2_0_validate(const void *x, int64_t n, char *why, size_t why_len);
/* I2_S (x86, 128-element blocks) and I2_S_ARM (64-element blocks): row functions at unit scale */
void qp_i2s_dequantize(const void *x, float *y, int64_t n);
float qp_i2s_vec_dot(const void *w, const float *x, int64_t n);
double qp_i2s_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
/* the scalar rows x tokens int8 dot: dot(row r, token t) for every pair (qp_vec_dot_i8_tile_fn) */
void qp_vec_dot_i8_pairs(qp_vec_dot_i8_fn dot, const void *w, size_t ldw, int64_t n_rows, const int8_t *a,
                         size_t lda, int64_t n_tok, int64_t n, double *y, size_t ldy);
bool qp_i2s_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_i2s_quantize_tensor(const float *x, void *y, int64_t n);
void qp_i2s_dequantize_tensor(const void *x, float *y, int64_t n);
void qp_i2s_arm_dequantize(const void *x, float *y, int64_t n);
float qp_i2s_arm_vec_dot(const void *w, const float *x, int64_t n);
double qp_i2s_arm_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
bool qp_i2s_arm_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_i2s_arm_quantize_tensor(const float *x, void *y, int64_t n);
void qp_i2s_arm_dequantize_tensor(const void *x, float *y, int64_t n);
void qp_qk256_quantize_ref(const float *x, void *y, int64_t n);
void qp_qk256_dequantize(const void *x, float *y, int64_t n);
float qp_qk256_vec_dot(const void *w, const float *x, int64_t n);
double qp_qk256_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
void qp_bitnet32f16_quantize_ref(const float *x, void *y, int64_t n);
void qp_bitnet32f16_dequantize(const void *x, float *y, int64_t n);
float qp_bitnet32f16_vec_dot(const void *w, const float *x, int64_t n);
double qp_bitnet32f16_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
bool qp_bitnet32f16_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_split32_dequantize_unit(const void *x, float *y, int64_t n);
float qp_split32_vec_dot_unit(const void *w, const float *x, int64_t n);
double qp_split32_vec_dot_i8(const void *w, const int8_t *a, int64_t n);

/* enc_bq4.c */
void qp_bq4_quantize_ref(const float *x, void *y, int64_t n);
void qp_bq4_dequantize(const void *x, float *y, int64_t n);
float qp_bq4_vec_dot(const void *w, const float *x, int64_t n);
bool qp_bq4_validate(const void *x, int64_t n, char *why, size_t why_len);

/* enc_trlm.c (TRLM v1 ternary rows, readers/trlm.md) */
void qp_trlm_t2_quantize_ref(const float *x, void *y, int64_t n);
void qp_trlm_t2_dequantize(const void *x, float *y, int64_t n);
float qp_trlm_t2_vec_dot(const void *w, const float *x, int64_t n);
bool qp_trlm_t2_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_trlm_t2_quantize_tensor(const float *x, void *y, int64_t n);
void qp_trlm_t2_dequantize_tensor(const void *x, float *y, int64_t n);
/* The TRLM ternary scale: mean |w| over the nonzero finite w (double sum, rounded to f32);
 * 0 when every w is 0. For exactly ternary input {-a, 0, +a} it is a, so q recovers exactly. */
float qp_trlm_t2_scale(const float *w, int64_t n);
/* round_half_even(v) clamped to [-1, 1]; NaN -> 0. */
int8_t qp_trlm_t2_level(float v);
/* q[n] in {-1,0,1} -> ceil(n/4) code bytes (unused codes in the last byte are 1 = zero). */
void qp_trlm_t2_pack(const int8_t *q, uint8_t *y, int64_t n);

/* enc_i8row.c (I8_ROW: f32 scale + 32 int8 per block, encodings.md) */
void qp_i8row_quantize_ref(const float *x, void *y, int64_t n);
void qp_i8row_dequantize(const void *x, float *y, int64_t n);
float qp_i8row_vec_dot(const void *w, const float *x, int64_t n);
double qp_i8row_vec_dot_i8(const void *w, const int8_t *a, int64_t n);
bool qp_i8row_validate(const void *x, int64_t n, char *why, size_t why_len);

/* enc_trlm_groups.c (Q1_0_128 and TG128: 128-element groups with an f16 scale, enc_trlm_groups.md) */
void qp_q1g128_quantize_ref(const float *x, void *y, int64_t n);
void qp_q1g128_dequantize(const void *x, float *y, int64_t n);
float qp_q1g128_vec_dot(const void *w, const float *x, int64_t n);
bool qp_g128_validate_scales(const void *x, int64_t n, size_t block_bytes, char *why, size_t why_len);
bool qp_q1g128_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_tg128_quantize_ref(const float *x, void *y, int64_t n);
void qp_tg128_dequantize(const void *x, float *y, int64_t n);
float qp_tg128_vec_dot(const void *w, const float *x, int64_t n);
bool qp_tg128_validate(const void *x, int64_t n, char *why, size_t why_len);

/* simd.c: dispatchers (same bytes as the _ref functions; vec_dot within a stated tolerance) */
int qp_simd_level(void); /* 0 scalar, 1 avx2, 2 avx512 */
void qp_q4k_quantize(const float *x, void *y, int64_t n);
void qp_q6k_quantize(const float *x, void *y, int64_t n);
float qp_q4k_vec_dot(const void *w, const float *x, int64_t n);
float qp_q6k_vec_dot(const void *w, const float *x, int64_t n);

#endif
