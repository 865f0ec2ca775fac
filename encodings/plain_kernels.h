/* SIMD kernels of the plain float encodings (F32, F16, BF16: encodings/plain_avx2.c) and the
 * dispatchers the runtime's batched matrix product uses (encodings/enc_plain.c).
 *
 * One summation structure for every float dot at a SIMD level, so results do not depend on how
 * a product was scheduled:
 *   scalar: s += w[i] * x[i] in index order (the reference; product rounded, then added);
 *   avx2:   four 8-lane accumulators a0..a3; elements i+8j..i+8j+7 of each 32-element step go
 *           into a_j (FMA); after the last whole step, whole 8-element chunks go into a0, a1, a2
 *           in turn and a zero-padded partial chunk into a3; then v = (a0 + a1) + (a2 + a3) and
 *           ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7));
 *   avx512: the same with 16-lane accumulators and 64-element steps (whole 16-element chunks
 *           into a0, a1, a2, a masked partial chunk into a3), then v = (a0 + a1) + (a2 + a3) and
 *           the pairwise tree of the 16 lanes (((v0 + v1) + (v2 + v3)) + ...) in lane order.
 * Since F16 and BF16 widen to F32 exactly, dot(F16 row, x) at a level is bit-identical to
 * dot(dequantized F32 row, x) at that level; qp_f32_dot_multi is bit-identical to its single
 * dots. The SIMD dots differ from the scalar reference only by summation order and FMA
 * rounding (tests/unit/test_enc_plain_simd.c pins the tolerance). */
#ifndef QP_PLAIN_KERNELS_H
#define QP_PLAIN_KERNELS_H
#include <stddef.h>
#include <stdint.h>

/* plain_avx2.c (called only after cpuid says AVX2 + FMA + F16C) */
float qp_f32_vec_dot_avx2(const void *w, const float *x, int64_t n);
float qp_f16_vec_dot_avx2(const void *w, const float *x, int64_t n);
float qp_bf16_vec_dot_avx2(const void *w, const float *x, int64_t n);
void qp_f32_dot_multi_avx2(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n,
                           float *y, size_t ldy);
/* F16 -> F32 of n elements; returns how many leading elements it converted (it stops before the
 * first 8-element chunk holding an Inf/NaN, whose exact bits the scalar code keeps). */
int64_t qp_f16_dequantize_avx2(const void *x, float *y, int64_t n);
void qp_bf16_dequantize_avx2(const void *x, float *y, int64_t n);

/* plain_avx512.c (called only after cpuid says AVX-512 F+BW+VL+DQ) */
float qp_f32_vec_dot_avx512(const void *w, const float *x, int64_t n);
float qp_f16_vec_dot_avx512(const void *w, const float *x, int64_t n);
float qp_bf16_vec_dot_avx512(const void *w, const float *x, int64_t n);
void qp_f32_dot_multi_avx512(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n,
                             float *y, size_t ldy);
void qp_f32_dot_multi2_avx512(const float *w0, const float *w1, const float *x, size_t ldx,
                              int64_t nx, int64_t n, float *y0, float *y1, size_t ldy);

/* enc_plain.c: y[t * ldy] = dot(w, x + t * ldx) over n elements for t < nx, each equal bit for
 * bit to the F32 traits' vec_dot_f32 at the current SIMD level. */
void qp_f32_dot_multi(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n, float *y,
                      size_t ldy);
/* The same for two rows w0 -> y0[t * ldy], w1 -> y1[t * ldy] (faster at AVX-512). */
void qp_f32_dot_multi2(const float *w0, const float *w1, const float *x, size_t ldx, int64_t nx,
                       int64_t n, float *y0, float *y1, size_t ldy);

#endif
