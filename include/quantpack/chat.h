/* Chat templates: the template a model carries, and rendering a conversation with it
 * (runtime/chat.md; the Jinja subset: runtime/jinja.md).
 *
 * Ownership: strings passed in are borrowed for the call; *out is qp_malloc'd (free with
 * qp_free), written only on success. */
#ifndef QUANTPACK_CHAT_H
#define QUANTPACK_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "quantpack/model.h"
#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qp_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content;
} qp_chat_message;

/* The template the model carries (GGUF tokenizer.chat_template, tokenizer_config.json
 * chat_template string or the "default" of a named list, RDRR manifest tokenizer.chatTemplate,
 * TRLM folder's tokenizer_config.json), or NULL. Borrowed; valid until qp_model_close. Every
 * reader keeps it as the model metadata string "tokenizer.chat_template". */
QP_API const char *qp_model_chat_template(const qp_model *m);

/* Renders msgs with tmpl_override (template text, or a built-in name such as "llama2",
 * "llama3", "chatml", "mistral", "phi3", "gemma", "zephyr", "bitnet"), or when NULL the
 * model's own template, or when the model has none / the template uses what the
 * interpreter lacks, the built-in chosen by pattern detection as llama.cpp does
 * (llama-chat.cpp's llm_chat_detect_template; chatml when nothing matches). bos/eos strings
 * come from the model's vocabulary (m may be NULL: empty strings, and no model template).
 * *out is malloc'd, NUL-terminated.
 * Errors: QP_ERR_ARG for an override that is neither a built-in name nor template text, or a
 * template that raised (raise_exception: e.g. roles that do not alternate); QP_ERR_LIMIT when a
 * template exceeds the interpreter's bounds; QP_ERR_NOMEM. */
QP_API QP_NODISCARD qp_status qp_chat_render(const qp_model *m, const char *tmpl_override,
                                      const qp_chat_message *msgs, size_t n_msgs,
                                      bool add_generation_prompt, char **out, qp_err *e);

/* What qp_chat_render_ex ran. */
typedef struct qp_chat_render_info {
    const char *source;       /* "override", "model", or "builtin" (static strings) */
    const char *builtin;      /* the built-in's name when one ran, else NULL (static) */
    bool fell_back;           /* the template given could not run in the subset; builtin ran */
    char reason[256];         /* why it fell back (the interpreter's message), else "" */
} qp_chat_render_info;

/* qp_chat_render, filling *info (may be NULL) with what ran. */
QP_API QP_NODISCARD qp_status qp_chat_render_ex(const qp_model *m, const char *tmpl_override,
                                         const qp_chat_message *msgs, size_t n_msgs,
                                         bool add_generation_prompt, char **out,
                                         qp_chat_render_info *info, qp_err *e);

/* The Jinja text of a built-in template ("chatml", "llama2", ...; see qp_chat_builtin_names),
 * or NULL for an unknown name. Static. */
QP_API const char *qp_chat_builtin_template(const char *name);
/* NULL-terminated list of the built-in names. Static. */
QP_API const char *const *qp_chat_builtin_names(void);
/* The built-in llama.cpp's pattern detection picks for template text (llm_chat_detect_template
 * order, restricted to our built-ins), or NULL when nothing matches. Static. */
QP_API const char *qp_chat_detect_builtin(const char *tmpl);

#ifdef __cplusplus
}
#endif
#endif
