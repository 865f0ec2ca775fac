/* The scale-fitting searches of llama.cpp's k-quants (ggml-quants.c make_*_quants), shared by the
 * k-quant and legacy encoders (enc_kquants.c, enc_kquants_low.c, enc_legacy.c). Each keeps the
 * reference's float operation order (the build uses -ffp-contract=off): the bytes of every encoder
 * that calls them equal llama.cpp's (tests/peer/test_enc_vs_ggml.c). Written from
 * encodings/enc_kquants.md "Scale fitting". */
#ifndef QP_KQUANTS_FIT_H
#define QP_KQUANTS_FIT_H

#include <stdbool.h>
#include <stdint.h>

/* Symmetric fit, L[i] = l + nmax with l in [-nmax, nmax-1]; weights qw (NULL: x^2). Returns the
 * scale (0 and L = 0 when max |x| < 1e-15). make_qx_quants with rmse_type 1. */
float qp_fit_qx(int n, int nmax, const float *x, int8_t *L, const float *qw);
/* make_q3_quants(n, nmax, x, L, do_rmse = true): symmetric fit refined coordinate-wise (5 passes). */
float qp_fit_q3(int n, int nmax, const float *x, int8_t *L);
/* Asymmetric (scale, min) fits; L in [0, nmax]; *the_min = -min (min <= 0). qkx2: weights given;
 * use_mad: absolute instead of squared error. qkx3: weights NULL means x^2. */
float qp_fit_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                  uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);
float qp_fit_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                  uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);
/* make_qp_quants: non-negative values (sub-block scales) onto 0..nmax with weights qw. */
float qp_fit_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw);

#endif
