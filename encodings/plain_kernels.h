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

/* Fast path (traits vec_dot_q8 of F16 / BF16, encodings.md "Fast dots"): a 16-bit row against
 * activations rounded once to the row's own type (traits quantize of F16 / BF16). One summation
 * structure at every level, so every level gives the scalar reference's bits: element i adds
 * w_i * x_i into lane i mod 64, in index order (product rounded, then added; a product of two
 * F16 values is exact in F32, so the F16 kernels' FMA gives the same bits; BF16 kernels multiply
 * then add); then lanes l and l + h are added, a[l] = a[l] + a[l + h] for l < h, for h = 32, 16,
 * 8, 4, 2, 1, and the result is a[0]. */
#define QP_HDOT_LANES 64
static inline float qp_hdot_reduce(float a[QP_HDOT_LANES]) {
    for (int h = QP_HDOT_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) a[l] = a[l] + a[l + h];
    return a[0];
}
float qp_f16_dot_f16_avx2(const void *w, const void *x, int64_t n);
float qp_f16_dot_f16_avx512(const void *w, const void *x, int64_t n);
/* rows x tokens (encoding.h qp_vec_dot_q8_tile_fn): tiles of 2 rows x 3 tokens, each pair the
 * single dot's bits (the AVX2 and AVX-512 levels) */
void qp_f16_dot_f16_tile_avx2(const void *w, size_t ldw, int64_t n_rows, const void *x, size_t ldx,
                              int64_t n_tok, int64_t n, float *y, size_t ldy);

#endif
