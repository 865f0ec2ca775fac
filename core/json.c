/* Exact JSON integers and duplicate-key checks over cJSON (core/json.h). */
#include "core/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "core/utf8.h"
#include "quantpack/core.h"
#include "quantpack/quantpack.h"

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

static bool skipped(const char *key, const char *const *skip) {
    for (; skip && *skip; skip++)
        if (strcmp(key, *skip) == 0) return true;
    return false;
}

bool qp_json_overlay(cJSON *dst, const cJSON *src, bool nested, const char *const *skip) {
    for (const cJSON *it = src->child; it; it = it->next) {
        if (!it->string || skipped(it->string, skip)) continue;
        cJSON *cur = cJSON_GetObjectItemCaseSensitive(dst, it->string);
        if (nested && cJSON_IsObject(cur) && cJSON_IsObject(it)) {
            if (!qp_json_overlay(cur, it, true, NULL)) return false;
            continue;
        }
        cJSON *copy = cJSON_Duplicate(it, true);
        if (!copy) return false;
        cJSON_DeleteItemFromObjectCaseSensitive(dst, it->string);
        cJSON_AddItemToObject(dst, it->string, copy);
    }
    return true;
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

cJSON *qp_json_doc_new(const char *schema, int version) {
    cJSON *r = cJSON_CreateObject(), *tool = NULL;
    bool ok = r && cJSON_AddStringToObject(r, "schema", schema) &&
              cJSON_AddNumberToObject(r, "schema_version", version) &&
              (tool = cJSON_AddObjectToObject(r, "tool")) && cJSON_AddStringToObject(tool, "name", "quantpack") &&
              cJSON_AddStringToObject(tool, "version", QP_VERSION_STRING);
    if (ok) return r;
    cJSON_Delete(r);
    return NULL;
}

/* ---- Python's text of values ------------------------------------------------------------ */

void qp_py_float_repr(double v, char *buf, size_t cap) {
    if (!isfinite(v)) {
        snprintf(buf, cap, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* digits and exponent of the shortest form */
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') neg = true, p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    size_t o = 0;
    char res[80];
    if (neg) res[o++] = '-';
    if (exp10 < -4 || exp10 >= 16) {
        res[o++] = digits[0];
        if (nd > 1) {
            res[o++] = '.';
            for (size_t i = 1; i < nd; i++) res[o++] = digits[i];
        }
        o += (size_t)snprintf(res + o, sizeof res - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        res[o++] = '0';
        res[o++] = '.';
        for (int i = 0; i < -exp10 - 1; i++) res[o++] = '0';
        for (size_t i = 0; i < nd; i++) res[o++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++) res[o++] = (size_t)i < nd ? digits[i] : '0';
        res[o++] = '.';
        if ((size_t)exp10 + 1 < nd)
            for (size_t i = (size_t)exp10 + 1; i < nd; i++) res[o++] = digits[i];
        else
            res[o++] = '0';
    }
    res[o] = '\0';
    snprintf(buf, cap, "%s", res);
}

/* A string as Python's json.dumps writes it with ensure_ascii: '"', '\\', \b \f \n \r \t short,
 * every other code point outside ' '..'~' as \uXXXX (UTF-16 surrogate pairs above U+FFFF). */
static bool dump_py_str(qp_buf *b, const char *s) {
    static const char k_short[][3] = {['\b'] = "\\b", ['\f'] = "\\f", ['\n'] = "\\n", ['\r'] = "\\r",
                                      ['\t'] = "\\t", ['"'] = "\\\"", ['\\'] = "\\\\"};
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s), at = 0;
    qp_buf_u8(b, '"');
    while (at < n) {
        uint32_t cp;
        size_t bad = 0, used = qp_utf8_decode(p + at, n - at, &cp, &bad);
        if (used == 0 || bad) return false;
        at += used;
        if (cp < sizeof k_short / sizeof k_short[0] && k_short[cp][0]) qp_buf_str(b, k_short[cp]);
        else if (cp >= 0x20 && cp <= 0x7e) qp_buf_u8(b, (uint8_t)cp);
        else if (cp <= 0xffff) qp_buf_printf(b, "\\u%04x", (unsigned)cp);
        else qp_buf_printf(b, "\\u%04x\\u%04x", 0xd800u + ((cp - 0x10000u) >> 10), 0xdc00u + ((cp - 0x10000u) & 0x3ffu));
    }
    return qp_buf_u8(b, '"');
}

static int cmp_member_names(const void *x, const void *y) {
    return strcmp((*(const cJSON *const *)x)->string, (*(const cJSON *const *)y)->string);
}

/* A newline and indent x depth spaces (json.dumps with indent); nothing when indent is 0. */
static bool dump_py_newline(qp_buf *b, int indent, int depth) {
    if (!indent) return true;
    bool ok = qp_buf_u8(b, '\n');
    for (int i = 0; ok && i < indent * depth; i++) ok = qp_buf_u8(b, ' ');
    return ok;
}

/* json.dumps(v, sort_keys=sort_keys) with indent (0: compact separators (",", ":"); else
 * separators (",", ": ") and one member a line). */
static bool dump_py(qp_buf *b, const cJSON *v, bool sort_keys, int indent, int depth) {
    if (depth > 64) return false;
    if (!v || cJSON_IsNull(v)) return qp_buf_str(b, "null");
    if (cJSON_IsBool(v)) return qp_buf_str(b, cJSON_IsTrue(v) ? "true" : "false");
    if (cJSON_IsString(v)) return dump_py_str(b, v->valuestring);
    if (cJSON_IsNumber(v)) {
        int64_t i;
        if (qp_json_int(v, -QP_JSON_INT_MAX, QP_JSON_INT_MAX, &i)) return qp_buf_printf(b, "%lld", (long long)i);
        char f[40];
        qp_py_float_repr(v->valuedouble, f, sizeof f);
        return qp_buf_str(b, f);
    }
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return false;
    int n = cJSON_GetArraySize(v);
    const cJSON **items = qp_malloc((size_t)(n > 0 ? n : 1) * sizeof *items);
    if (!items) return false;
    int k = 0;
    for (const cJSON *it = v->child; it && k < n; it = it->next) items[k++] = it;
    bool obj = cJSON_IsObject(v), ok = true;
    if (obj && sort_keys) qsort(items, (size_t)k, sizeof *items, cmp_member_names);
    qp_buf_u8(b, obj ? '{' : '[');
    for (int i = 0; ok && i < k; i++) {
        if (i) qp_buf_u8(b, ',');
        ok = dump_py_newline(b, indent, depth + 1);
        if (ok && obj) ok = dump_py_str(b, items[i]->string) && qp_buf_str(b, indent ? ": " : ":");
        ok = ok && dump_py(b, items[i], sort_keys, indent, depth + 1);
    }
    qp_free((void *)items);
    if (ok && k > 0) ok = dump_py_newline(b, indent, depth);
    return ok && qp_buf_u8(b, obj ? '}' : ']');
}

bool qp_json_dump_py(qp_buf *b, const cJSON *v, bool sort_keys, int depth) {
    return dump_py(b, v, sort_keys, 0, depth);
}

bool qp_json_dump_py_indent(qp_buf *b, const cJSON *v, int indent) {
    return dump_py(b, v, false, indent, 0);
}
