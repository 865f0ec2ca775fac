/* qp-test-chat-render: reads {"template": T, "vars": {...}} as JSON on stdin and prints
 * qp_jinja_render's text (exit 0) or "ERROR <STATUS> <message>" (exit 1). For the peer test
 * tests/peer/test_chat_templates.mjs, which compares with @huggingface/jinja. With --builtins: the
 * library's built-in templates as JSON [{name, template}]. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantpack/chat.h"
#include "quantpack/core.h"
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

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--builtins") == 0) return print_builtins();
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
