/* trillim_config.json of a model bundle (converters/trillim_bundle.h). */
#include <string.h>

#include "converters/trillim_bundle.h"
#include "core/buf.h"
#include "core/json.h"
#include "quantpack/core.h"
#include "readers/trlm_bundle.h"
#include "readers/trlm_format.h"

static bool put_py_str(qp_buf *b, const char *s) {
    cJSON *v = cJSON_CreateString(s);
    bool ok = v && qp_json_dump_py(b, v, false, 0);
    cJSON_Delete(v);
    return ok;
}

/* The auto_map references of one kind in a JSON object (_extract_auto_map_refs): auto_map[key]
 * as a string or a list holding a non-empty string, or, for AutoTokenizer, auto_map itself as
 * such a list. */
static bool has_auto_map_ref(const cJSON *obj, const char *key) {
    const cJSON *am = cJSON_GetObjectItemCaseSensitive(obj, "auto_map");
    const cJSON *v = cJSON_IsObject(am) ? cJSON_GetObjectItemCaseSensitive(am, key)
                     : cJSON_IsArray(am) && strcmp(key, "AutoTokenizer") == 0 ? am : NULL;
    if (cJSON_IsString(v)) return v->valuestring[0] != '\0';
    const cJSON *it;
    if (cJSON_IsArray(v))
        cJSON_ArrayForEach(it, v) if (cJSON_IsString(it) && it->valuestring[0]) return true;
    return false;
}

/* remote_code: _bundle_requires_remote_code, the AutoTokenizer references of
 * tokenizer_config.json and config.json. Unreadable or absent files have none. */
static bool requires_remote_code(const char *model_dir) {
    static const char *const k_files[] = {"tokenizer_config.json", "config.json"};
    bool any = false;
    for (size_t k = 0; k < sizeof k_files / sizeof k_files[0] && !any; k++) {
        char *p = qp_path_join(model_dir, k_files[k]), *text = NULL;
        size_t len = 0;
        if (p && qp_path_exists(p) && qp_file_read_all(p, 1 << 24, &text, &len, NULL) == QP_OK) {
            cJSON *j = cJSON_ParseWithLength(text, len);
            any = has_auto_map_ref(j, "AutoTokenizer");
            cJSON_Delete(j);
        }
        qp_free(text);
        qp_free(p);
    }
    return any;
}

qp_status qp_trillim_bundle_write(const char *model_dir, const qp_trillim_config *c, const char *out_path,
                                  qp_err *e) {
    char hash[65];
    char *cfg = qp_path_join(model_dir, "config.json");
    qp_status s = cfg ? qp_trlm_config_hash(cfg, hash, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    qp_free(cfg);
    if (s != QP_OK) return s;
    /* json.dumps(payload, indent=2) + "\n", keys in the SDK's order */
    qp_buf b = {0};
    qp_buf_printf(&b, "{\n  \"trillim_version\": \"%s\",\n  \"format_version\": %d,\n  \"type\": \"model\",\n"
                  "  \"quantization\": \"%s\",\n  \"source_model\": ", QP_TRILLIM_SDK_VERSION,
                  QP_TRLM_BUNDLE_FORMAT, qp_trillim_quantization_name(c->target, c->arch_type));
    bool ok = put_py_str(&b, c->source_model ? c->source_model : "");
    qp_buf_printf(&b, ",\n  \"architecture\": \"%s\",\n  \"platforms\": [\n    \"x86_64\",\n    \"aarch64\"\n  ],\n"
                  "  \"base_model_config_hash\": \"%s\",\n  \"remote_code\": %s\n}\n",
                  qp_trlm_arch_name((uint32_t)c->arch_type), hash, requires_remote_code(model_dir) ? "true" : "false");
    if (b.oom) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    else if (!ok) s = qp_fail(e, QP_ERR_CORRUPT, "%s/config.json: _name_or_path is not valid UTF-8", model_dir);
    else s = qp_file_write_atomic(out_path, b.p, b.len, e);
    qp_buf_free(&b);
    return s;
}
