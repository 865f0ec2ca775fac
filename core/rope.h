/* Rotary embedding frequencies, plain or with YaRN scaling, as Hugging Face transformers'
 * _compute_default_rope_parameters / _compute_yarn_parameters define them (evaluated in double;
 * converters/trillim_sdk.md "Rope"). One definition for the rope.cache writer and the runtime. */
#ifndef QP_CORE_ROPE_H
#define QP_CORE_ROPE_H

#include <stdint.h>

#include "quantpack/model.h"

/* inv_freq[i] for i in [0, dim/2): theta^(-2i/dim), blended with theta^(-2i/dim) / factor by
 * YaRN's linear ramp between the correction dims of beta_fast and beta_slow over orig_max_pos
 * when y && y->factor > 0. */
double qp_rope_inv_freq(double theta, int64_t dim, const qp_rope_yarn *y, int64_t i);
/* The factor cos and sin are multiplied by: 0.1 ln(factor) + 1 for YaRN with factor > 1,
 * else 1 (HF's get_mscale with mscale 1; the SDK passes no attention_factor). */
double qp_rope_attention_factor(const qp_rope_yarn *y);

#endif
