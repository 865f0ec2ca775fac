/* AVX2 kernels for Q4_K / Q6_K (placeholder: reference path until the vector code lands). */
#include "converters/encodings_internal.h"
#include "converters/simd_kernels.h"

void qp_q4k_quantize_avx2(const float *x, void *y, int64_t n) { qp_q4k_quantize_ref(x, y, n); }
void qp_q6k_quantize_avx2(const float *x, void *y, int64_t n) { qp_q6k_quantize_ref(x, y, n); }
float qp_q4k_vec_dot_avx2(const void *w, const float *x, int64_t n) { return qp_q4k_vec_dot_ref(w, x, n); }
float qp_q6k_vec_dot_avx2(const void *w, const float *x, int64_t n) { return qp_q6k_vec_dot_ref(w, x, n); }
void qp_q4k_quantize_avx512(const float *x, void *y, int64_t n) { qp_q4k_quantize_avx2(x, y, n); }
void qp_q6k_quantize_avx512(const float *x, void *y, int64_t n) { qp_q6k_quantize_avx2(x, y, n); }
