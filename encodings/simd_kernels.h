/* SIMD kernels (encodings/<family>_avx2.c, <family>_avx512.c) and their run-time dispatchers
 * (encodings/simd.c). Kernels are called only through the dispatchers, after cpuid says the CPU
 * has them.
 * Quantizers: same bytes as the _ref functions. Float dots: same dequantized values, summed in a
 * different order (tolerance in encodings.md). vec_dot_i8: exact (same integers, same double
 * accumulation in block order as the scalar functions). */
#ifndef QP_SIMD_KERNELS_H
#define QP_SIMD_KERNELS_H
#include <stdbool.h>
#include <stdint.h>

/* kquants_avx2.c */
void qp_q4k_quantize_avx2(const float *x, void *y, int64_t n);
void qp_q6k_quantize_avx2(const float *x, void *y, int64_t n);
/* kquants_dot_avx2.c, kquants_dot_avx512.c: Q4_K/Q6_K dots with SIMD block widening, equal to
 * the F32 dot of the dequantized row at the same level (encodings/plain_kernels.h) */
float qp_q4k_vec_dot_f32_avx2(const void *w, const float *x, int64_t n);
float qp_q6k_vec_dot_f32_avx2(const void *w, const float *x, int64_t n);
float qp_q4k_vec_dot_f32_avx512(const void *w, const float *x, int64_t n);
float qp_q6k_vec_dot_f32_avx512(const void *w, const float *x, int64_t n);
/* legacy_dot_avx2.c, legacy_dot_avx512.c: Q8_0 dots equal to the F32 dot of the dequantized row
 * at the same level (encodings/plain_kernels.h) */
float qp_q8_0_vec_dot_avx2(const void *w, const float *x, int64_t n);
float qp_q8_0_vec_dot_avx512(const void *w, const float *x, int64_t n);
/* kquants_avx512.c */
void qp_q4k_quantize_avx512(const float *x, void *y, int64_t n);
void qp_q6k_quantize_avx512(const float *x, void *y, int64_t n);

/* legacy_avx2.c */
void qp_q4_0_quantize_avx2(const float *x, void *y, int64_t n);
void qp_q5_0_quantize_avx2(const float *x, void *y, int64_t n);
void qp_q8_0_quantize_avx2(const float *x, void *y, int64_t n);

/* ternary_avx2.c: row quantizers */
void qp_tq1_0_quantize_avx2(const float *x, void *y, int64_t n);
void qp_tq2_0_quantize_avx2(const float *x, void *y, int64_t n);
void qp_qk256_quantize_avx2(const float *x, void *y, int64_t n);
void qp_bitnet32f16_quantize_avx2(const float *x, void *y, int64_t n);
/* ternary_avx2.c: whole-tensor helpers of enc_ternary.c (I2_S, absmean). n a multiple of 16.
 * stats: adds |x[i]| (as double) into lanes[i % 16] in index order per lane, max |x| into *amax
 * (x known NaN-free), returns true when some x is NaN; *nonter set true when some x is neither 0
 * nor +-f (f = first nonzero |x| of the tensor, or 0). */
bool qp_tern_stats_avx2(const float *x, int64_t n, double *lanes, float *amax, float f, bool *nonter);
/* levels q[i] = clamp(rint(x[i] * s), -1, 1) */
void qp_tern_levels_avx2(const float *x, int64_t n, float s, int8_t *q);
/* I2_S codes of nb blocks of be (64 or 128) elements: mode 0 absmean (c = level(x*s) + 1),
 * mode 1 ternary (|x| < 1e-6 -> 1, x > 0 -> 2, else 0). */
void qp_i2s_codes_avx2(const float *x, int64_t nb, int be, int mode, float s, uint8_t *y);
/* absmean in one pass (enc_ternary.c absmean_one_pass), ternary_avx2.c:
 * over n (multiple of 32) floats / nb blocks of be: lanes[i % 16] += |x[i]| (double, index order,
 * as qp_tern_stats_avx2), *lo = max(*lo, largest |x| < t), *hi = min(*hi, smallest |x| >= t), and
 * the codes with s as qp_tern_levels_avx2 / qp_i2s_codes_avx2 mode 0, where t must be the smallest
 * float a with fl(a * s) > 0.5 (s > 0). NaN elements may spoil the bounds: the caller falls back
 * when the sum is not finite. */
void qp_tern_absmean_spec_avx2(const float *x, int64_t n, double *lanes, float t, float *lo, float *hi,
                               float s, int8_t *q);
void qp_i2s_absmean_spec_avx2(const float *x, int64_t nb, int be, double *lanes, float t, float *lo,
                              float *hi, float s, uint8_t *y);
/* ternary_avx512.c: the same contracts */
void qp_tern_absmean_spec_avx512(const float *x, int64_t n, double *lanes, float t, float *lo, float *hi,
                                 float s, int8_t *q);
void qp_i2s_absmean_spec_avx512(const float *x, int64_t nb, int be, double *lanes, float t, float *lo,
                                float *hi, float s, uint8_t *y);
void qp_tq1_0_quantize_avx512(const float *x, void *y, int64_t n);
void qp_tq2_0_quantize_avx512(const float *x, void *y, int64_t n);
void qp_qk256_quantize_avx512(const float *x, void *y, int64_t n);
void qp_bitnet32f16_quantize_avx512(const float *x, void *y, int64_t n);
bool qp_tern_stats_avx512(const float *x, int64_t n, double *lanes, float *amax, float f, bool *nonter);
void qp_tern_levels_avx512(const float *x, int64_t n, float s, int8_t *q);
void qp_i2s_codes_avx512(const float *x, int64_t nb, int be, int mode, float s, uint8_t *y);
/* I2_S one pass over ternary input (enc_ternary.c i2s_one_pass), ternary_avx2.c / ternary_avx512.c:
 * codes of nb blocks of be elements when every x is +-0 or +-f (f > 0, not NaN): 1 for +-0 or when
 * f <= 1e-6f, else 2 for x > 0, 0 for x < 0. Returns true when every block was coded, false (y
 * partly written) at the first block holding any other value (or NaN). */
bool qp_i2s_ternary_codes_avx2(const float *x, int64_t nb, int be, float f, uint8_t *y);
bool qp_i2s_ternary_codes_avx512(const float *x, int64_t nb, int be, float f, uint8_t *y);
/* ternary_avx2.c: qp_act_quantize_i8's maximum (false when x holds a NaN) and its codes of the
 * first n / 32 * 32 elements, the reference's bytes */
bool qp_act_amax_avx2(const float *x, int64_t n, float *amax);
void qp_act_codes_avx2(const float *x, int64_t n, float s, int8_t *a);
/* ternary_avx2.c: exact int8 dots */
double qp_tq1_0_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_tq2_0_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_i2s_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_i2s_arm_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_qk256_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_bitnet32f16_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
double qp_split32_vec_dot_i8_avx2(const void *w, const int8_t *a, int64_t n);
/* I2_S rows x tokens (encoding.h qp_vec_dot_i8_tile_fn), ternary_i8_simd.h: AVX2 and VNNI
 * (ternary_avx512.c, only when cpuid reports AVX512_VNNI) */
void qp_i2s_vec_dot_i8_tile_avx2(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                                 int64_t n_tok, int64_t n, double *y, size_t ldy);
double qp_i2s_vec_dot_i8_vnni(const void *w, const int8_t *a, int64_t n);
double qp_tq2_0_vec_dot_i8_vnni(const void *w, const int8_t *a, int64_t n);
void qp_tq2_0_vec_dot_i8_tile_vnni(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                                   int64_t n_tok, int64_t n, double *y, size_t ldy);
void qp_i2s_vec_dot_i8_tile_vnni(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                                 int64_t n_tok, int64_t n, double *y, size_t ldy);

/* simd.c: dispatchers used by the traits table (the _ref / scalar function at level 0) */
void qp_q4_0_quantize(const float *x, void *y, int64_t n);
void qp_q5_0_quantize(const float *x, void *y, int64_t n);
void qp_q8_0_quantize(const float *x, void *y, int64_t n);
void qp_tq1_0_quantize(const float *x, void *y, int64_t n);
void qp_tq2_0_quantize(const float *x, void *y, int64_t n);
void qp_qk256_quantize(const float *x, void *y, int64_t n);
void qp_bitnet32f16_quantize(const float *x, void *y, int64_t n);
float qp_q8_0_vec_dot(const void *w, const float *x, int64_t n);
double qp_tq1_0_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_tq2_0_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_i2s_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_i2s_arm_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_qk256_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_bitnet32f16_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
double qp_split32_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n);
void qp_i2s_vec_dot_i8_tile(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                            int64_t n_tok, int64_t n, double *y, size_t ldy);
void qp_tq2_0_vec_dot_i8_tile(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                              int64_t n_tok, int64_t n, double *y, size_t ldy);

#endif
