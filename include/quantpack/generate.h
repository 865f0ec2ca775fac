/* Text generation over the reference runtime: one session per conversation, the one place
 * `quantpack run`, `chat` and `serve` generate from (and the embedding API's generation).
 *
 * A session owns a runtime (its KV cache), a tokenizer (when the model has a vocabulary) and the
 * list of token ids the KV cache holds. Each qp_gen_generate call is given the WHOLE prompt of
 * the turn (for a chat, the rendered conversation so far); the session keeps the longest prefix
 * it already ran, rewinds to it and runs only the new tokens (batched, in chunks of 64), then
 * samples new tokens one at a time with a qp_sampler made from that call's parameters. So a
 * chat feeds only its new turn, and a server answering requests that share a prefix reuses it.
 *
 * Each sampled token is passed to a callback with the text that became final with it: pieces
 * are always whole, valid UTF-8 (an incomplete sequence at the end of a piece is held until its
 * last byte arrives; an ill-formed byte becomes U+FFFD), and text that may be the start of a
 * stop string is held until it is known not to be one, so a stop string is never passed on.
 *
 * Generation stops at an end-of-generation token (llama.cpp's set: the vocabulary's EOS, tokens
 * whose text ends a turn: <|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...,
 * the FIM pad / repo / separator tokens; runtime/runtime.md "Generation"), after a stop string, after max_tokens, at the end of the
 * context, when *cancel becomes non-zero (checked before every forward pass and between prompt
 * chunks), or when the callback returns false; qp_gen_result.stop tells which. An
 * end-of-generation token is neither passed to the callback, counted, nor run. A sampled token
 * is run when the next one is to be sampled, so the KV cache ends holding the prompt and the
 * reply but its last token (the next call's prompt, which carries the reply, runs it then).
 * Text still held at the end (the start of a stop string that did not come, an incomplete
 * UTF-8 sequence, then ended by U+FFFD) is passed in one last callback with token -1.
 *
 * Errors: statuses as everywhere (QP_ERR_LIMIT for a prompt longer than the context, QP_ERR_ARG
 * for an id outside the vocabulary or an empty prompt, QP_ERR_NOMEM), with a message in e.
 * After an error the session stays usable: its KV cache holds a valid prefix of what it was fed.
 * A session is not thread-safe: one call at a time (a server queues its requests).
 * Conventions and the stop-string rule: runtime/runtime.md "Generation". */
#ifndef QUANTPACK_GENERATE_H
#define QUANTPACK_GENERATE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/runtime.h"
#include "quantpack/sampler.h"
#include "quantpack/status.h"
#include "quantpack/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qp_gen_session qp_gen_session;

/* Builds a runtime over m with *ro (NULL: default options) and a tokenizer over m's vocabulary
 * (none when m has no vocabulary: then the callback gets empty text and prompts are ids only).
 * m is borrowed and must outlive the session. *out is written only on success. */
QP_API QP_NODISCARD qp_status qp_gen_session_new(const qp_model *m, const qp_runtime_opts *ro,
                                          qp_gen_session **out, qp_err *e);
QP_API void qp_gen_session_free(qp_gen_session *s); /* NULL is fine */

/* Borrowed, valid until qp_gen_session_free. The tokenizer is NULL for a model without a
 * vocabulary. The runtime may be read (qp_runtime_get_config) but must not be run directly. */
QP_API const qp_tokenizer *qp_gen_session_tokenizer(const qp_gen_session *s);
QP_API const qp_runtime *qp_gen_session_runtime(const qp_gen_session *s);
/* The token ids the KV cache holds now (borrowed until the next call on s) and their count. */
QP_API const int32_t *qp_gen_session_tokens(const qp_gen_session *s, int64_t *n);
/* Context length in tokens (the runtime's n_ctx). */
QP_API int64_t qp_gen_session_n_ctx(const qp_gen_session *s);
/* Forgets the KV cache: the next call runs its whole prompt. */
QP_API void qp_gen_session_reset(qp_gen_session *s);

/* Tokenizes text with the session's tokenizer: BOS prepended when add_bos and the vocabulary
 * adds one (qp_model_adds_bos) and the text does not already begin with it (a chat template
 * that writes bos_token, with parse_special), special token texts ("<|im_start|>") recognised
 * when parse_special. *ids is qp_malloc'd (caller frees with qp_free), written only on success.
 * QP_ERR_UNSUPPORTED when the model has no vocabulary. */
QP_API QP_NODISCARD qp_status qp_gen_tokenize(const qp_gen_session *s, const char *text, size_t len,
                                       bool add_bos, bool parse_special, int32_t **ids,
                                       int64_t *n_ids, qp_err *e);

/* Whether id ends generation for this vocabulary (see above). */
QP_API bool qp_gen_is_end_token(const qp_gen_session *s, int32_t id);

typedef enum qp_gen_stop {
    QP_GEN_STOP_NONE = 0,    /* not stopped (only before a call) */
    QP_GEN_STOP_EOS,         /* an end-of-generation token was sampled */
    QP_GEN_STOP_STRING,      /* a stop string appeared (it and what follows it are dropped) */
    QP_GEN_STOP_MAX_TOKENS,  /* max_tokens tokens were generated */
    QP_GEN_STOP_CONTEXT,     /* the context is full */
    QP_GEN_STOP_CANCELLED,   /* *cancel became non-zero */
    QP_GEN_STOP_CALLBACK,    /* the callback returned false */
} qp_gen_stop;

/* "eos", "stop", "length", "context", "cancelled", "callback" ("none" for NONE). */
QP_API const char *qp_gen_stop_name(qp_gen_stop stop);

/* One generated token: its id and the text that became final with it (len bytes of valid UTF-8,
 * not NUL-terminated, possibly 0 bytes when the token's text is held back or the model has no
 * vocabulary); token -1 for the text held to the end (see above). Return false to stop
 * (QP_GEN_STOP_CALLBACK; ignored for token -1). text is valid for the call only. */
typedef bool (*qp_gen_on_token)(void *arg, int32_t token, const char *text, size_t len);

typedef struct qp_gen_params {
    qp_sampler_params sampler; /* a sampler is made from these for each call */
    int64_t max_tokens;        /* tokens to generate at most; < 0: until EOS or the context end */
    const char *const *stop;   /* n_stop stop strings (borrowed for the call; "" ignored) */
    size_t n_stop;
    const volatile sig_atomic_t *cancel; /* may be NULL; non-zero stops (QP_GEN_STOP_CANCELLED) */
    const int32_t *end_ids;    /* non-NULL: these n_end_ids ids (0 allowed: none) end generation */
    size_t n_end_ids;          /* instead of the vocabulary's (a client that names its EOS ids) */
    qp_gen_on_token on_token;  /* may be NULL */
    void *arg;
} qp_gen_params;

/* sampler defaults (qp_sampler_params_default), max_tokens -1, no stop strings, no cancel flag,
 * the vocabulary's end tokens, no callback. */
QP_API void qp_gen_params_default(qp_gen_params *p);

typedef struct qp_gen_result {
    qp_gen_stop stop;
    int32_t end_token;    /* the end-of-generation token sampled (stop EOS), else -1 */
    int64_t n_prompt;     /* tokens of the prompt */
    int64_t n_reused;     /* of them already in the KV cache (not run again) */
    int64_t n_generated;  /* tokens sampled and passed to the callback (no end token) */
    double prompt_s;      /* seconds running the prompt's new tokens */
    double generate_s;    /* seconds sampling and running the generated tokens */
} qp_gen_result;

/* Runs the prompt (n_prompt >= 1 ids; the KV cache keeps what it shares with it) and generates
 * until a stop condition. *res (may be NULL) is written on success and on error (counts so far).
 * Returns QP_OK whatever the stop reason; an error only for a failure. */
QP_API QP_NODISCARD qp_status qp_gen_generate(qp_gen_session *s, const int32_t *prompt, int64_t n_prompt,
                                       const qp_gen_params *p, qp_gen_result *res, qp_err *e);

#ifdef __cplusplus
}
#endif
#endif
