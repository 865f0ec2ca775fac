/* qp_chat_render's choices (override name / text, model template, chatml default, fallback by
 * detection, errors) and hostile templates: each fails with its documented status, within the
 * interpreter's bounds, leaving *out untouched (ASan checks no leak on the longjmp path). The
 * rendered text itself is compared with @huggingface/jinja in tests/peer/test_chat_templates.mjs;
 * here only which template ran and how a failure is reported. */
#include <string.h>
#include <time.h>

#include "qp_test.h"
#include "quantpack/chat.h"
#include "quantpack/core.h"
#include "runtime/jinja.h"

static const qp_chat_message k_conv[] = {
    {"system", "Be brief."}, {"user", "Hello"}, {"assistant", "Hi"}, {"user", "Bye"}};

static void check_choices(void) {
    char *out = NULL;
    qp_chat_render_info info;
    qp_err e = {0};
    /* no model, no override: chatml */
    QP_CHECK(qp_chat_render_ex(NULL, NULL, k_conv, 4, true, &out, &info, &e) == QP_OK);
    QP_CHECK(out && strncmp(out, "<|im_start|>system\nBe brief.<|im_end|>", 38) == 0);
    QP_CHECK(strcmp(info.source, "builtin") == 0 && strcmp(info.builtin, "chatml") == 0 && !info.fell_back);
    qp_free(out);
    out = NULL;
    /* every built-in name runs */
    for (const char *const *n = qp_chat_builtin_names(); *n; n++) {
        QP_CHECK_MSG(qp_chat_render_ex(NULL, *n, k_conv, 4, true, &out, &info, &e) == QP_OK, "%s: %s", *n, e.msg);
        QP_CHECK(out && out[0] && strcmp(info.builtin, *n) == 0);
        qp_free(out);
        out = NULL;
    }
    /* neither a name nor template text */
    QP_CHECK(qp_chat_render(NULL, "no-such-template", k_conv, 4, true, &out, &e) == QP_ERR_ARG && !out);
    /* text outside the subset: detected as chatml by its markers, with the reason */
    const char *macro = "{% macro m() %}{% endmacro %}<|im_start|>{{ messages }}";
    QP_CHECK(qp_chat_render_ex(NULL, macro, k_conv, 4, false, &out, &info, &e) == QP_OK);
    QP_CHECK(info.fell_back && strcmp(info.builtin, "chatml") == 0 && strstr(info.reason, "macro"));
    qp_free(out);
    out = NULL;
    /* a template that raises is an error, not a fallback */
    qp_err_clear(&e);
    const char *raises = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}";
    QP_CHECK(qp_chat_render(NULL, raises, k_conv, 4, true, &out, &e) == QP_ERR_ARG && !out);
    QP_CHECK(strstr(e.msg, "System role not supported") != NULL);
    /* detection follows llama.cpp's order */
    QP_CHECK(strcmp(qp_chat_detect_builtin("{{ '<|start_header_id|>' }}<|end_header_id|>"), "llama3") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("[INST] <<SYS>>"), "llama2-sys") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("{{ ' [INST] ' + system_message }}"), "mistral") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("<|user|>x<|endoftext|>"), "zephyr") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("<|assistant|><|end|>"), "phi3") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("<start_of_turn>"), "gemma") == 0);
    QP_CHECK(strcmp(qp_chat_detect_builtin("'Assistant: ' ~ '<|eot_id|>'"), "bitnet") == 0);
    QP_CHECK(qp_chat_detect_builtin("plain text") == NULL);
}

typedef struct hostile { const char *name, *tmpl; qp_status want; } hostile;

static void check_hostile(void) {
    static char deep_paren[4100], deep_if[8000], deep_list[2100];
    memcpy(deep_paren, "{{ ", 3);
    memset(deep_paren + 3, '(', 4000);
    strcpy(deep_paren + 4003, "1");
    memcpy(deep_list, "{{ ", 3);
    memset(deep_list + 3, '[', 2000);
    size_t k = 0;
    for (int i = 0; i < 400; i++) k += (size_t)sprintf(deep_if + k, "{%% if 1 %%}");
    const hostile cases[] = {
        {"unterminated expression", "a {{ x", QP_ERR_FORMAT},
        {"unterminated statement", "{% if x", QP_ERR_FORMAT},
        {"unterminated comment", "{# no end", QP_ERR_FORMAT},
        {"unterminated string", "{{ 'abc }}", QP_ERR_FORMAT},
        {"if without endif", "{% if true %}x", QP_ERR_FORMAT},
        {"for without endfor", "{% for x in [1] %}{{ x }}", QP_ERR_FORMAT},
        {"stray endfor", "{% endfor %}", QP_ERR_FORMAT},
        {"unknown statement", "{% frobnicate %}", QP_ERR_FORMAT},
        {"bad escape", "{{ '\\q' }}", QP_ERR_FORMAT},
        {"bad character", "{{ 1 $ 2 }}", QP_ERR_FORMAT},
        {"4000 parentheses", deep_paren, QP_ERR_LIMIT},
        {"2000 nested lists", deep_list, QP_ERR_LIMIT},
        {"400 nested ifs", deep_if, QP_ERR_LIMIT},
        {"range of 10^9", "{% for i in range(1000000000) %}{% endfor %}", QP_ERR_LIMIT},
        {"10^4 x 10^4 loops", "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}", QP_ERR_LIMIT},
        {"string doubling", "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", QP_ERR_LIMIT},
        {"output flood", "{% for i in range(9000000) %}0123456789{% endfor %}", QP_ERR_LIMIT},
        {"namespace holding itself", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}", QP_ERR_LIMIT},
        {"replace growth", "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('a', 'aaaa') %}{% endfor %}", QP_ERR_LIMIT},
        {"macro", "{% macro f() %}{% endmacro %}", QP_ERR_UNSUPPORTED},
        {"unknown filter", "{{ [1] | map('x') }}", QP_ERR_UNSUPPORTED},
        {"unknown method", "{{ 'a'.zfill(3) }}", QP_ERR_UNSUPPORTED},
        {"raise", "{{ raise_exception('stop') }}", QP_ERR_ARG},
        {"undefined arithmetic", "{{ nothing + 1 }}", QP_ERR_ARG},
        {"none concatenation", "{{ none ~ 'x' }}", QP_ERR_ARG},
        {"integer modulo by zero", "{{ 1 % 0 }}", QP_ERR_ARG},
        {"iterate a number", "{% for x in 3 %}{% endfor %}", QP_ERR_ARG},
        {"NUL byte", "a\0b", QP_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        qp_err e = {0};
        size_t len = strcmp(cases[i].name, "NUL byte") == 0 ? 3 : strlen(cases[i].tmpl);
        clock_t t0 = clock();
        qp_status s = qp_jinja_render(cases[i].tmpl, len, NULL, NULL, &out, NULL, &e);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        QP_CHECK_MSG(s == cases[i].want && !out, "%s: got %s (%s), want %s", cases[i].name, qp_status_name(s),
                     e.msg, qp_status_name(cases[i].want));
        QP_CHECK_MSG(e.msg[0] != '\0', "%s: no message", cases[i].name);
        QP_CHECK_MSG(secs < 10.0, "%s: %.1f s", cases[i].name, secs);
        qp_free(out);
    }
    /* a template over the size limit, and a tighter caller limit */
    qp_jinja_limits lim = qp_jinja_default_limits();
    lim.max_output_bytes = 16;
    char *out = NULL;
    qp_err e = {0};
    QP_CHECK(qp_jinja_render("0123456789{{ 'abcdefghij' }}", 28, NULL, &lim, &out, NULL, &e) == QP_ERR_LIMIT && !out);
    lim = qp_jinja_default_limits();
    lim.max_template_bytes = 4;
    QP_CHECK(qp_jinja_render("hello", 5, NULL, &lim, &out, NULL, &e) == QP_ERR_LIMIT && !out);
}

/* Every prefix of every built-in template, and each with one byte changed at every position to
 * '{', '}', '%', '(' or '\'': a status, never a crash or a leak (ASan); no output on failure. */
static void check_mutations(void) {
    static const char subst[] = "{}%('";
    int renders = 0, accepted = 0;
    for (const char *const *nm = qp_chat_builtin_names(); *nm; nm++) {
        const char *t = qp_chat_builtin_template(*nm);
        size_t n = strlen(t);
        char *buf = qp_malloc(n + 1);
        QP_CHECK(buf != NULL);
        for (size_t i = 0; buf && i <= n; i++) {
            for (int k = -1; k < 5; k++) {
                memcpy(buf, t, n + 1);
                size_t len = k < 0 ? i : n;
                if (k >= 0 && i < n) buf[i] = subst[k];
                else if (k >= 0) continue;
                char *out = NULL;
                qp_err e = {0};
                qp_status s = qp_jinja_render(buf, len, NULL, NULL, &out, NULL, &e);
                renders++;
                accepted += s == QP_OK;
                if (!(s == QP_OK ? out != NULL : out == NULL && e.msg[0] != '\0'))
                    QP_CHECK_MSG(false, "%s mutated at %zu (%d): status %s", *nm, i, k, qp_status_name(s));
                qp_free(out);
            }
        }
        qp_free(buf);
    }
    QP_CHECK(renders > 5000 && accepted > 0 && accepted < renders);
}

int main(void) {
    check_choices();
    check_hostile();
    check_mutations();
    return qp_test_finish();
}
