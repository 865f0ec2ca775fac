/* Exact JSON integers and duplicate-key checks over cJSON (core/json.h). */
#include "core/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "quantpack/core.h"

bool qp_json_int(const cJSON *it, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(it)) return false;
    if (lo < -QP_JSON_INT_MAX) lo = -QP_JSON_INT_MAX;
    if (hi > QP_JSON_INT_MAX) hi = QP_JSON_INT_MAX;
    double d = it->valuedouble; /* NaN fails both comparisons */
    if (!(d >= (double)lo && d <= (double)hi) || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

bool qp_json_get_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    return obj && qp_json_int(cJSON_GetObjectItemCaseSensitive(obj, key), lo, hi, out);
}

bool qp_json_uint(const cJSON *it, uint64_t *out) {
    int64_t v;
    if (!qp_json_int(it, 0, QP_JSON_INT_MAX, &v)) return false;
    *out = (uint64_t)v;
    return true;
}

bool qp_json_get_uint(const cJSON *obj, const char *key, uint64_t *out) {
    return obj && qp_json_uint(cJSON_GetObjectItemCaseSensitive(obj, key), out);
}

const char *qp_json_kind(const cJSON *it) {
    if (!it) return "missing";
    if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        if (d < 0) return "negative";
        if (d != floor(d)) return "not an integer";
        return d > (double)QP_JSON_INT_MAX ? "too large" : "a number";
    }
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsArray(it)) return "a list";
    if (cJSON_IsObject(it)) return "an object";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsNull(it)) return "null";
    return "invalid";
}

qp_status qp_json_unique_keys(const cJSON *obj, const char *file, const char *what, qp_err *e) {
    if (!cJSON_IsObject(obj)) return QP_OK;
    qp_strmap seen = {0};
    qp_status s = QP_OK;
    for (const cJSON *it = obj->child; it && s == QP_OK; it = it->next) {
        const char *k = it->string ? it->string : "";
        bool added;
        if (qp_strmap_put(&seen, k, strlen(k), 0, &added) != QP_OK)
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory checking keys of %s", file, what);
        else if (!added) s = qp_fail(e, QP_ERR_CORRUPT, "%s: duplicate key '%.200s' in %s", file, k, what);
    }
    qp_strmap_free(&seen);
    return s;
}

qp_status qp_json_write_file(const char *dir, const char *name, cJSON *j, bool built, qp_err *e) {
    char *text = built && j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    char *path = qp_path_join(dir, name);
    qp_status s = text && path ? qp_file_write_atomic(path, text, strlen(text), e)
                               : qp_fail(e, QP_ERR_NOMEM, "out of memory writing %s", name);
    free(text);
    qp_free(path);
    return s;
}
