/* Kernels in converters/kquants_avx2.c; called only through converters/simd.c after
 * cpuid says the CPU has them. Quantizers: same bytes as the _ref functions. Dots: same
 * dequantized values, summed in a different order (tolerance in encodings.md). */
#ifndef QP_SIMD_KERNELS_H
#define QP_SIMD_KERNELS_H
#include <stdint.h>

void qp_q4k_quantize_avx2(const float *x, void *y, int64_t n);
void qp_q6k_quantize_avx2(const float *x, void *y, int64_t n);
float qp_q4k_vec_dot_avx2(const void *w, const float *x, int64_t n);
float qp_q6k_vec_dot_avx2(const void *w, const float *x, int64_t n);

#endif
