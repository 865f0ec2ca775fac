/* Chat templates: built-ins, llama.cpp's detection, and rendering a conversation
 * (include/quantpack/chat.h, runtime/chat.md). */
#include "quantpack/chat.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "quantpack/core.h"
#include "runtime/jinja.h"

/* Built-ins: each writes the prompt llama.cpp's llm_chat_apply_template writes for that name
 * (src/llama-chat.cpp), as Jinja run by our interpreter. "mistral" is llama.cpp's "mistral-v1";
 * "bitnet" is the format of microsoft/BitNet's llama.cpp fork ("System: ", "User: ",
 * "Assistant: " turns ending in <|eot_id|>). */
static const struct { const char *name; const char *text; } k_builtins[] = {
    {"chatml",
     "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"},
    {"llama2",
     "[INST] {% set ns = namespace(inside=true) %}{% for m in messages %}"
     "{% if not ns.inside %}{% set ns.inside = true %}[INST] {% endif %}"
     "{% if m.role == 'system' %}{{ m.content + '\\n' }}{% elif m.role == 'user' %}{{ m.content + ' [/INST]' }}"
     "{% else %}{{ m.content + '</s>' }}{% set ns.inside = false %}{% endif %}{% endfor %}"},
    {"llama2-sys",
     "[INST] {% set ns = namespace(inside=true) %}{% for m in messages %}"
     "{% if not ns.inside %}{% set ns.inside = true %}[INST] {% endif %}"
     "{% if m.role == 'system' %}{{ '<<SYS>>\\n' + m.content + '\\n<</SYS>>\\n\\n' }}"
     "{% elif m.role == 'user' %}{{ m.content + ' [/INST]' }}"
     "{% else %}{{ m.content + '</s>' }}{% set ns.inside = false %}{% endif %}{% endfor %}"},
    {"llama3",
     "{% for m in messages %}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim"
     " + '<|eot_id|>' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    {"mistral",
     "{% set ns = namespace(inside=false) %}{% for m in messages %}"
     "{% if not ns.inside %}{% set ns.inside = true %} [INST] {% endif %}"
     "{% if m.role == 'system' %}{{ m.content + '\\n\\n' }}{% elif m.role == 'user' %}{{ m.content + ' [/INST]' }}"
     "{% else %}{{ ' ' + m.content + '</s>' }}{% set ns.inside = false %}{% endif %}{% endfor %}"},
    {"phi3",
     "{% for m in messages %}{{ '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    {"gemma",
     "{% set ns = namespace(sys='') %}{% for m in messages %}"
     "{% if m.role == 'system' %}{% set ns.sys = ns.sys + m.content | trim %}{% else %}"
     "{% set role = 'model' if m.role == 'assistant' else m.role %}{{ '<start_of_turn>' + role + '\\n' }}"
     "{% if ns.sys and role != 'model' %}{{ ns.sys + '\\n\\n' }}{% set ns.sys = '' %}{% endif %}"
     "{{ m.content | trim + '<end_of_turn>\\n' }}{% endif %}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    {"zephyr",
     "{% for m in messages %}{{ '<|' + m.role + '|>\\n' + m.content + '<|endoftext|>\\n' }}{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
    {"bitnet",
     "{% for m in messages %}{% if m.role == 'system' %}{{ 'System: ' + m.content | trim + '<|eot_id|>' }}"
     "{% elif m.role == 'user' %}{{ 'User: ' + m.content + '<|eot_id|>' }}"
     "{% elif m.role == 'assistant' %}{{ 'Assistant: ' + m.content + '<|eot_id|>' }}{% endif %}{% endfor %}"
     "{% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}"},
};
#define N_BUILTINS (sizeof k_builtins / sizeof k_builtins[0])

const char *qp_chat_builtin_template(const char *name) {
    for (size_t i = 0; name && i < N_BUILTINS; i++)
        if (strcmp(k_builtins[i].name, name) == 0) return k_builtins[i].text;
    return NULL;
}

static const char *builtin_name(const char *name) {
    for (size_t i = 0; name && i < N_BUILTINS; i++)
        if (strcmp(k_builtins[i].name, name) == 0) return k_builtins[i].name;
    return NULL;
}

const char *const *qp_chat_builtin_names(void) {
    static const char *names[N_BUILTINS + 1];
    for (size_t i = 0; i < N_BUILTINS; i++) names[i] = k_builtins[i].name;
    names[N_BUILTINS] = NULL;
    return names;
}

static bool has(const char *t, const char *s) { return strstr(t, s) != NULL; }

const char *qp_chat_detect_builtin(const char *t) {
    if (!t) return NULL;
    const char *named = builtin_name(t);
    if (named) return named;
    if (has(t, "<|im_start|>")) return "chatml";
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
        if (has(t, "' [INST] ' + system_message") || has(t, " [INST]")) return "mistral";
        return has(t, "<<SYS>>") ? "llama2-sys" : "llama2";
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return "phi3";
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return "zephyr";
    if (has(t, "<start_of_turn>")) return "gemma";
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return "llama3";
    if (has(t, "<|eot_id|>") && has(t, "Assistant: ")) return "bitnet";
    return NULL;
}

/* ---- rendering ------------------------------------------------------------------------------ */

static const char *token_text(const qp_model *m, int32_t id) {
    if (!m || id < 0 || id >= m->vocab.n_tokens || !m->vocab.tokens) return "";
    return m->vocab.tokens[id];
}

/* {messages, add_generation_prompt, bos_token, eos_token} */
static cJSON *render_vars(const qp_model *m, const qp_chat_message *msgs, size_t n, bool add_gen) {
    cJSON *v = cJSON_CreateObject(), *arr = NULL;
    bool ok = v && (arr = cJSON_AddArrayToObject(v, "messages")) &&
              cJSON_AddBoolToObject(v, "add_generation_prompt", add_gen) &&
              cJSON_AddStringToObject(v, "bos_token", token_text(m, m ? m->vocab.bos_id : -1)) &&
              cJSON_AddStringToObject(v, "eos_token", token_text(m, m ? m->vocab.eos_id : -1));
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o) &&
             cJSON_AddStringToObject(o, "role", msgs[i].role ? msgs[i].role : "") &&
             cJSON_AddStringToObject(o, "content", msgs[i].content ? msgs[i].content : "");
    }
    if (!ok) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static bool looks_like_template(const char *s) { return has(s, "{{") || has(s, "{%"); }

static void set_info(qp_chat_render_info *info, const char *source, const char *builtin) {
    if (!info) return;
    info->source = source;
    info->builtin = builtin;
}

qp_status qp_chat_render_ex(const qp_model *m, const char *tmpl_override, const qp_chat_message *msgs,
                            size_t n_msgs, bool add_generation_prompt, char **out,
                            qp_chat_render_info *info, qp_err *e) {
    if (!out || (!msgs && n_msgs)) return qp_fail(e, QP_ERR_ARG, "qp_chat_render: NULL argument");
    if (info) memset(info, 0, sizeof *info);
    const char *text, *source, *builtin = NULL;
    if (tmpl_override) {
        builtin = builtin_name(tmpl_override);
        if (!builtin && !looks_like_template(tmpl_override))
            return qp_fail(e, QP_ERR_ARG, "chat template '%.60s' is neither a built-in name nor template text",
                           tmpl_override);
        text = builtin ? qp_chat_builtin_template(builtin) : tmpl_override;
        source = builtin ? "builtin" : "override";
    } else if (m && qp_model_chat_template(m)) {
        text = qp_model_chat_template(m);
        source = "model";
    } else {
        builtin = "chatml"; /* llama.cpp's default for a model without a template */
        text = qp_chat_builtin_template(builtin);
        source = "builtin";
    }
    cJSON *vars = render_vars(m, msgs, n_msgs, add_generation_prompt);
    if (!vars) return qp_fail(e, QP_ERR_NOMEM, "chat template: out of memory");
    qp_err le = {0};
    qp_status s = qp_jinja_render(text, strlen(text), vars, NULL, out, NULL, &le);
    if ((s == QP_ERR_UNSUPPORTED || s == QP_ERR_FORMAT) && !builtin) {
        const char *det = qp_chat_detect_builtin(text);
        builtin = det ? det : "chatml";
        if (info) {
            info->fell_back = true;
            snprintf(info->reason, sizeof info->reason, "%.255s", le.msg);
        }
        source = "builtin";
        text = qp_chat_builtin_template(builtin);
        qp_err_clear(&le);
        s = qp_jinja_render(text, strlen(text), vars, NULL, out, NULL, &le);
    }
    cJSON_Delete(vars);
    if (s != QP_OK) return qp_fail(e, s, "%s", le.msg);
    set_info(info, source, builtin);
    return QP_OK;
}

qp_status qp_chat_render(const qp_model *m, const char *tmpl_override, const qp_chat_message *msgs,
                         size_t n_msgs, bool add_generation_prompt, char **out, qp_err *e) {
    return qp_chat_render_ex(m, tmpl_override, msgs, n_msgs, add_generation_prompt, out, NULL, e);
}
