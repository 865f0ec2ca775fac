/* qp-test-chat-render: reads {"template": T, "vars": {...}} as JSON on stdin and prints
 * qp_jinja_render's text (exit 0) or "ERROR <STATUS> <message>" (exit 1). For the peer test
 * tests/peer/test_chat_templates.mjs, which compares with @huggingface/jinja. With --builtins: the
 * library's built-in templates as JSON [{name, template}]; with --model PATH [--render MESSAGES]: the
 * template a model file or folder carries, or a conversation rendered with it (model_template). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantpack/chat.h"
#include "quantpack/core.h"
#include "quantpack/model.h"
#include "runtime/jinja.h"

/* --builtins: the built-in templates as a JSON list of {name, template}. */
static int print_builtins(void) {
    cJSON *arr = cJSON_CreateArray();
    for (const char *const *n = qp_chat_builtin_names(); *n; n++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", *n);
        cJSON_AddStringToObject(o, "template", qp_chat_builtin_template(*n));
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_PrintUnformatted(arr);
    if (text) puts(text);
    free(text);
    cJSON_Delete(arr);
    return text ? 0 : 2;
}

/* --model PATH: the template the model carries (exit 3 when none). --model PATH --render JSON:
 * qp_chat_render of the messages in JSON ([{role, content}]) with add_generation_prompt on, the
 * model's own template and its bos/eos. */
static int model_template(const char *path, const char *messages_json) {
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(path, NULL, &m, &e) != QP_OK) {
        printf("ERROR %s %s", qp_status_name(e.status), e.msg);
        return 1;
    }
    int rc = 0;
    if (!messages_json) {
        const char *t = qp_model_chat_template(m);
        if (t) fputs(t, stdout);
        rc = t ? 0 : 3;
    } else {
        cJSON *arr = cJSON_Parse(messages_json);
        size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
        qp_chat_message *msgs = calloc(n ? n : 1, sizeof *msgs);
        for (const cJSON *it = arr ? arr->child : NULL; it && msgs; it = it->next, i++) {
            msgs[i].role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "role"));
            msgs[i].content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "content"));
        }
        char *out = NULL;
        qp_chat_render_info info;
        if (msgs && qp_chat_render_ex(m, NULL, msgs, n, true, &out, &info, &e) == QP_OK) {
            fputs(out, stdout);
            rc = strcmp(info.source, "model") == 0 ? 0 : 4; /* the model's own template must run */
        } else {
            printf("ERROR %s %s", qp_status_name(e.status), e.msg);
            rc = 1;
        }
        qp_free(out);
        free(msgs);
        cJSON_Delete(arr);
    }
    qp_model_close(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--builtins") == 0) return print_builtins();
    if (argc == 3 && strcmp(argv[1], "--model") == 0) return model_template(argv[2], NULL);
    if (argc == 5 && strcmp(argv[1], "--model") == 0 && strcmp(argv[3], "--render") == 0)
        return model_template(argv[2], argv[4]);
    size_t cap = 1 << 16, len = 0;
    char *in = malloc(cap);
    size_t got;
    while (in && (got = fread(in + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) in = realloc(in, cap *= 2);
    }
    if (!in) return 2;
    cJSON *j = cJSON_ParseWithLength(in, len);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "template");
    if (!cJSON_IsString(t)) {
        fprintf(stderr, "usage: JSON {template, vars} on stdin\n");
        return 2;
    }
    char *out = NULL;
    size_t n = 0;
    qp_err e = {0};
    qp_status s = qp_jinja_render(t->valuestring, strlen(t->valuestring),
                                  cJSON_GetObjectItemCaseSensitive(j, "vars"), NULL, &out, &n, &e);
    int rc = 0;
    if (s == QP_OK) {
        fwrite(out, 1, n, stdout);
    } else {
        printf("ERROR %s %s", qp_status_name(s), e.msg);
        rc = 1;
    }
    qp_free(out);
    cJSON_Delete(j);
    free(in);
    return rc;
}
