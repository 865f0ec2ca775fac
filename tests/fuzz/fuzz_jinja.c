/* The chat-template interpreter (runtime/jinja.h) on hostile templates: the input is the template
 * text, rendered with a fixed conversation (system, user, assistant, user; bos/eos strings) and
 * small limits (1 M steps, 8 MiB of values, 1 MiB of output, depth 48) so every input finishes
 * fast. Beyond memory safety: an accepted render returns NUL-terminated text of the stated length
 * within the output limit; a refused one leaves *out untouched and names its cause. The verdict
 * (tests/fuzz/replay_main.c) is qp_jinja_render's status. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "runtime/jinja.h"

static const char k_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
    " {\"role\": \"assistant\", \"content\": \" ok \"}, {\"role\": \"user\", \"content\": \"Bye\"}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    cJSON *vars = cJSON_Parse(k_vars);
    if (!vars) abort();
    qp_jinja_limits lim = qp_jinja_default_limits();
    lim.max_steps = 1000000;
    lim.max_memory_bytes = (size_t)8 << 20;
    lim.max_output_bytes = (size_t)1 << 20;
    lim.max_depth = 48;
    char *out = NULL;
    size_t n = 0;
    qp_status s = qp_jinja_render((const char *)data, size, vars, &lim, &out, &n, e);
    if (s == QP_OK) {
        if (!out || out[n] != '\0' || n > lim.max_output_bytes) abort();
    } else if (out || !e || e->msg[0] == '\0') {
        abort();
    }
    free(out);
    cJSON_Delete(vars);
    return s;
}
