/* Rotary embedding frequencies, plain or with YaRN scaling, as Hugging Face transformers'
 * _compute_default_rope_parameters / _compute_yarn_parameters define them (evaluated in double;
 * converters/trillim_sdk.md "Rope"). One definition for the rope.cache writer and the runtime. */
#ifndef QP_CORE_ROPE_H
#define QP_CORE_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "quantpack/model.h"

/* inv_freq[i] for i in [0, dim/2): theta^(-2i/dim), blended with theta^(-2i/dim) / factor by
 * YaRN's linear ramp between the correction dims of beta_fast and beta_slow over orig_max_pos
 * when y && y->factor > 0. */
double qp_rope_inv_freq(double theta, int64_t dim, const qp_rope_yarn *y, int64_t i);
/* The factor cos and sin are multiplied by: 0.1 ln(factor) + 1 for YaRN with factor > 1,
 * else 1 (HF's get_mscale with mscale 1; the SDK passes no attention_factor). */
double qp_rope_attention_factor(const qp_rope_yarn *y);

/* The divisor of inv_freq[i] (theta^(-2i/dim)) under Llama 3.1's scaling: 1 when the wavelength
 * 2 pi / inv_freq is below orig_max_pos / high_freq_factor, factor above orig_max_pos /
 * low_freq_factor, between them 1 / ((1 - s) / factor + s) with s = (orig_max_pos / wavelength -
 * low_freq_factor) / (high_freq_factor - low_freq_factor); 1 when r is NULL or r->factor is 0.
 * These are llama.cpp's rope_freqs.weight values (its converter's rope factors). */
double qp_rope_llama3_divisor(double theta, int64_t dim, const qp_rope_llama3 *r, int64_t i);
/* The llama3 rope_scaling that gives the divisors f[0..dim/2) (a GGUF's rope_freqs.weight), with
 * Llama 3.x's low_freq_factor 1 and high_freq_factor 4: factor = the largest divisor,
 * original_max_position_embeddings from the first smoothed pair (else 8192, llama.cpp's
 * default), accepted only when every recomputed divisor is within a relative 1e-5 of f (they are
 * determined only up to a common scale of the three). False when no such scaling fits. */
bool qp_rope_llama3_from_divisors(const float *f, double theta, int64_t dim, qp_rope_llama3 *out);

#endif
