/* trillim_config.json and the base-model config hash (readers/trlm_bundle.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/hash.h"
#include "core/json.h"
#include "quantpack/core.h"
#include "readers/trlm_bundle.h"

enum { BUNDLE_MAX_BYTES = 1 << 20 };

static qp_status read_object(const char *path, cJSON **out, qp_err *e) {
    char *text = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(path, BUNDLE_MAX_BYTES, &text, &len, e);
    if (s != QP_OK) return s;
    cJSON *j = cJSON_ParseWithLength(text, len);
    qp_free(text);
    if (!j) return qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON", path);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return qp_fail(e, QP_ERR_CORRUPT, "%s: not a JSON object", path);
    }
    if ((s = qp_json_unique_keys(j, path, "the top level", e)) != QP_OK) {
        cJSON_Delete(j);
        return s;
    }
    *out = j;
    return QP_OK;
}

/* An optional string member into dst (cap bytes); absent leaves dst empty. */
static qp_status get_text(const cJSON *j, const char *key, const char *path, char *dst, size_t cap, qp_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    dst[0] = '\0';
    if (!v) return QP_OK;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is %s, not a string of at most %zu bytes", path, key,
                       cJSON_IsString(v) ? "longer" : qp_json_kind(v), cap - 1);
    memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
    return QP_OK;
}

static qp_status check_bundle(const cJSON *j, const char *path, qp_trlm_bundle *b, qp_err *e) {
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(j, "format_version");
    if (!qp_json_int(fv, 0, INT32_MAX, &b->format_version) || (b->format_version != 4 && b->format_version != 5))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: format_version is %s (the Trillim SDK reads bundles of "
                       "format 4 and 5)", path, cJSON_IsNumber(fv) ? "another number" : qp_json_kind(fv));
    qp_status s;
    if ((s = get_text(j, "type", path, b->type, sizeof b->type, e)) != QP_OK ||
        (s = get_text(j, "quantization", path, b->quantization, sizeof b->quantization, e)) != QP_OK ||
        (s = get_text(j, "architecture", path, b->architecture, sizeof b->architecture, e)) != QP_OK ||
        (s = get_text(j, "base_model_config_hash", path, b->config_hash, sizeof b->config_hash, e)) != QP_OK)
        return s;
    if (strcmp(b->type, "model") != 0 && strcmp(b->type, "lora_adapter") != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: type '%s' (model or lora_adapter)", path, b->type);
    uint8_t raw[32];
    if (b->config_hash[0] && (strlen(b->config_hash) != 64 || !qp_hex_decode(b->config_hash, raw, 32)))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: base_model_config_hash '%s' is not 64 hex digits", path,
                       b->config_hash);
    return QP_OK;
}

qp_status qp_trlm_bundle_read(const char *dir, qp_trlm_bundle *out, bool *present, qp_err *e) {
    char *path = qp_path_join(dir, QP_TRLM_BUNDLE_FILE);
    if (!path) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    *present = false;
    qp_status s = qp_path_check_regular(path, QP_FILE_NOFOLLOW | QP_FILE_ABSENT_OK, e);
    if (s == QP_OK && qp_path_exists(path)) {
        cJSON *j = NULL;
        qp_trlm_bundle b = {0};
        s = read_object(path, &j, e);
        if (s == QP_OK) s = check_bundle(j, path, &b, e);
        if (s == QP_OK) {
            *out = b;
            *present = true;
        }
        cJSON_Delete(j);
    }
    qp_free(path);
    return s;
}

qp_status qp_trlm_adapter_check(const char *model_dir, const char *lora_path, qp_err *e) {
    const char *sl = strrchr(lora_path, '/');
    char *adir = sl ? qp_strndup(lora_path, (size_t)(sl - lora_path) + (sl == lora_path)) : qp_strdup(".");
    char *cfg = qp_path_join(model_dir, "config.json");
    qp_trlm_bundle b;
    bool present = false;
    char hash[65];
    qp_status s = adir && cfg ? qp_trlm_bundle_read(adir, &b, &present, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK && present && strcmp(b.type, "lora_adapter") == 0) {
        if (!b.config_hash[0])
            s = qp_fail(e, QP_ERR_CORRUPT, "%s/%s: adapter compatibility metadata (base_model_config_hash) is "
                        "missing", adir, QP_TRLM_BUNDLE_FILE);
        else if (!qp_path_exists(cfg))
            s = qp_fail(e, QP_ERR_IO, "%s: no config.json to check the adapter %s against", model_dir, adir);
        else if ((s = qp_trlm_config_hash(cfg, hash, e)) == QP_OK && strcmp(hash, b.config_hash) != 0)
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: adapter/model mismatch: this adapter was quantized for a "
                        "different base model (base_model_config_hash %.12s..., %s has %.12s...)", adir,
                        b.config_hash, model_dir, hash);
    }
    qp_free(adir);
    qp_free(cfg);
    return s;
}

/* ---- base_model_config_hash ------------------------------------------------------------------- */

/* canonicalize_model_config for one top-level key: text_config's value wins over the top level's
 * ("architectures": the top level's wins). NULL when neither has it. */
static const cJSON *canonical(const cJSON *cfg, const char *key) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const cJSON *inner = cJSON_IsObject(tc) && tc->child ? cJSON_GetObjectItemCaseSensitive(tc, key) : NULL;
    if (strcmp(key, "architectures") == 0) return top ? top : inner;
    return inner ? inner : top;
}

/* _require_positive_int of a head count (JSON integers only). */
static qp_status head_count(const cJSON *v, const char *key, const char *path, double *out, qp_err *e) {
    int64_t n;
    if (!qp_json_int(v, 1, INT32_MAX, &n))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %s must be a positive integer (it is %s)", path, key, qp_json_kind(v));
    *out = (double)n;
    return QP_OK;
}

/* The identity object of compute_base_model_config_hash, values copied from cfg. */
static qp_status identity_of(const cJSON *cfg, const char *path, cJSON *id, qp_err *e) {
    static const char *const k_copied[] = {"hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size"};
    const cJSON *arch = canonical(cfg, "architectures");
    cJSON *a = arch ? cJSON_Duplicate(arch, true) : cJSON_CreateArray();
    if (!a || !cJSON_AddItemToObject(id, "architectures", a)) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < sizeof k_copied / sizeof k_copied[0]; k++) {
        const cJSON *v = canonical(cfg, k_copied[k]);
        cJSON *c = v ? cJSON_Duplicate(v, true) : cJSON_CreateNull();
        if (!c || !cJSON_AddItemToObject(id, k_copied[k], c)) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    }
    double heads = 0, kv_heads = 0;
    qp_status s = head_count(canonical(cfg, "num_attention_heads"), "num_attention_heads", path, &heads, e);
    const cJSON *kv = canonical(cfg, "num_key_value_heads");
    if (s == QP_OK) s = kv ? head_count(kv, "num_key_value_heads", path, &kv_heads, e) : QP_OK;
    if (s == QP_OK && !kv) kv_heads = heads;
    if (s == QP_OK && (!cJSON_AddNumberToObject(id, "num_attention_heads", heads) ||
                       !cJSON_AddNumberToObject(id, "num_key_value_heads", kv_heads)))
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    return s;
}

qp_status qp_trlm_config_hash(const char *config_path, char hex[65], qp_err *e) {
    cJSON *cfg = NULL, *id = NULL;
    qp_buf text = {0};
    qp_status s = read_object(config_path, &cfg, e);
    if (s == QP_OK && !(id = cJSON_CreateObject())) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = identity_of(cfg, config_path, id, e);
    if (s == QP_OK && !qp_json_dump_py(&text, id, true, 0))
        s = qp_fail(e, text.oom ? QP_ERR_NOMEM : QP_ERR_CORRUPT, "%s: the architecture fields cannot be written "
                    "as JSON (invalid UTF-8 or nested deeper than 64)", config_path);
    uint8_t digest[QP_SHA256_BYTES];
    if (s == QP_OK) s = qp_sha256_once(text.p, text.len, digest, e);
    if (s == QP_OK) qp_hex_encode(digest, sizeof digest, hex);
    qp_buf_free(&text);
    cJSON_Delete(id);
    cJSON_Delete(cfg);
    return s;
}

int qp_trlm_activation_of(const char *hidden_act) {
    static const struct { const char *name; int act; } k_acts[] = {
        {"relu_squared", 0}, {"relu2", 0}, {"relu_sqr", 0}, {"silu", 1}, {"swish", 1}};
    for (size_t k = 0; k < sizeof k_acts / sizeof k_acts[0]; k++)
        if (strcasecmp(hidden_act, k_acts[k].name) == 0) return k_acts[k].act;
    return -1;
}
