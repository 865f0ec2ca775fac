/* A Jinja subset for chat templates: lexer, parser and evaluator in one module (runtime/jinja.md).
 *
 * The subset is what real chat templates use (Llama 2/3, Mistral, ChatML/Qwen3, Phi-3, Gemma 3,
 * Zephyr, BitNet): text, {{ }}, {% if/elif/else/for/set/break/continue %}, {# #}, whitespace
 * control, loop.*, namespace(), filters, tests, string/dict methods, slicing, raise_exception and
 * strftime_now, with the semantics of @huggingface/jinja 0.5.11 (the renderer transformers.js
 * uses), which the peer test compares against byte for byte.
 *
 * Every render is bounded (template size, nesting depth, evaluation steps, memory, output size):
 * a hostile template fails with QP_ERR_LIMIT, never hangs or grows without bound. Statuses:
 *   QP_ERR_FORMAT       the template is not valid Jinja (syntax)
 *   QP_ERR_UNSUPPORTED  it uses a statement, filter, test or method the subset lacks
 *   QP_ERR_ARG          it raised (raise_exception) or applied an operation to values that do
 *                       not support it (the message says which)
 *   QP_ERR_LIMIT        a bound was reached
 *   QP_ERR_NOMEM        an allocation failed */
#ifndef QP_RUNTIME_JINJA_H
#define QP_RUNTIME_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "quantpack/status.h"

typedef struct cJSON cJSON;

typedef struct qp_jinja_limits {
    size_t max_template_bytes; /* default 1 MiB */
    int max_depth;             /* nesting of blocks and expressions; default 64 */
    uint64_t max_steps;        /* evaluated nodes and loop iterations; default 10 M */
    size_t max_memory_bytes;   /* values built during the render; default 64 MiB */
    size_t max_output_bytes;   /* rendered text; default 16 MiB */
} qp_jinja_limits;

/* The defaults above. */
qp_jinja_limits qp_jinja_default_limits(void);

/* Renders tmpl (tmpl_len bytes, need not be NUL-terminated) with the variables of the JSON
 * object vars (messages, add_generation_prompt, bos_token, ...; NULL = none). lim NULL = the
 * defaults. *out (qp_malloc'd, NUL-terminated, *out_len bytes without the NUL) is written only on
 * success. */
QP_NODISCARD qp_status qp_jinja_render(const char *tmpl, size_t tmpl_len, const cJSON *vars,
                                       const qp_jinja_limits *lim, char **out, size_t *out_len,
                                       qp_err *e);

#endif
