/* Function declarations for the traits table (converters/encodings.c). One file per encoding
 * family implements them (enc_plain.c, enc_kquants.c, enc_ternary.c, ...). */
#ifndef QP_ENCODINGS_INTERNAL_H
#define QP_ENCODINGS_INTERNAL_H

#include "quantpack/core.h"
#include "quantpack/encoding.h"

/* enc_plain.c */
void qp_f32_quantize(const float *x, void *y, int64_t n);
void qp_f32_dequantize(const void *x, float *y, int64_t n);
float qp_f32_vec_dot(const void *w, const float *x, int64_t n);
bool qp_f32_validate(const void *x, int64_t n, char *why, size_t why_len);
void qp_f16_quantize(const float *x, void *y, int64_t n);
void qp_f16_dequantize(const void *x, float *y, int64_t n);
float qp_f16_vec_dot(const void *w, const float *x, int64_t n);
bool qp_f16_validate(const void *x, int64_t n, char *why, size_t why_len);
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

#endif
