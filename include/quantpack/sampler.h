/* Token sampler with the parameters of the Trillim inference protocol v1 (temperature, top_k,
 * top_p, repetition penalty with a lookback window) plus a seed. Deterministic for a given seed.
 *
 * Order (as Hugging Face transformers' logits processors): repetition penalty -> temperature ->
 * top-k -> top-p -> draw. temperature <= 0 is greedy: argmax after the penalty, lowest id on
 * ties. Details and the RNG: runtime/runtime.md. */
#ifndef QUANTPACK_SAMPLER_H
#define QUANTPACK_SAMPLER_H

#include <stdint.h>

#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qp_sampler_params {
    float temperature;      /* <= 0: greedy */
    int32_t top_k;          /* <= 0 or >= vocab: off */
    float top_p;            /* >= 1 (or <= 0): off */
    float repeat_penalty;   /* 1: off. Positive logits of recent tokens are divided by it,
                               negative (and zero) ones multiplied (llama.cpp / HF). */
    int32_t repeat_last_n;  /* lookback window over accepted tokens; 0: off; < 0: all */
    uint64_t seed;
} qp_sampler_params;

/* temperature 0 (greedy), top_k 0, top_p 1, repeat_penalty 1, repeat_last_n 64, seed 0. */
QP_API void qp_sampler_params_default(qp_sampler_params *p);

typedef struct qp_sampler qp_sampler;

QP_API QP_NODISCARD qp_status qp_sampler_new(const qp_sampler_params *p, int64_t n_vocab, qp_sampler **out,
                                      qp_err *e);
QP_API void qp_sampler_free(qp_sampler *s); /* NULL is fine */
/* Forgets the token history (the repetition window); the RNG stream continues. */
QP_API void qp_sampler_reset(qp_sampler *s);
/* Records a token (prompt or generated) in the history the repetition penalty looks back on. */
QP_API QP_NODISCARD qp_status qp_sampler_accept(qp_sampler *s, int32_t token, qp_err *e);
/* Picks the next token from n_vocab logits (not modified). Does not accept it. */
QP_API QP_NODISCARD qp_status qp_sampler_sample(qp_sampler *s, const float *logits, int32_t *token, qp_err *e);

/* The RNG: state seeded by splitmix64(seed); xorshift64* steps (Vigna): x ^= x >> 12;
 * x ^= x << 25; x ^= x >> 27; out = (x * 0x2545F4914F6CDD1D) >> 32. f32 = (u32 >> 8) / 2^24. */
QP_API uint64_t qp_rng_seed(uint64_t seed);
QP_API uint32_t qp_rng_u32(uint64_t *state);
QP_API float qp_rng_f32(uint64_t *state); /* in [0, 1) */

#ifdef __cplusplus
}
#endif
#endif
