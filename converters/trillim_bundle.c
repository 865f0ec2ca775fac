/* trillim_config.json of a model or LoRA adapter bundle, and an adapter bundle's support files
 * (converters/trillim_bundle.h). */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
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

static cJSON *read_json_object(const char *path) {
    char *text = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    if (qp_path_exists(path) && qp_file_read_all(path, 1 << 24, &text, &len, NULL) == QP_OK) {
        j = cJSON_ParseWithLength(text, len);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            j = NULL;
        }
    }
    qp_free(text);
    return j;
}

/* remote_code: the AutoTokenizer references of dir's tokenizer_config.json and config.json
 * (_bundle_requires_remote_code), and for an adapter also config.json's AutoConfig
 * (_has_remote_code_references). Unreadable or absent files have none. */
static bool requires_remote_code(const char *dir, bool auto_config) {
    static const char *const k_files[] = {"tokenizer_config.json", "config.json"};
    bool any = false;
    for (size_t k = 0; k < sizeof k_files / sizeof k_files[0] && !any; k++) {
        char *p = qp_path_join(dir, k_files[k]);
        cJSON *j = p ? read_json_object(p) : NULL;
        any = has_auto_map_ref(j, "AutoTokenizer") || (auto_config && k == 1 && has_auto_map_ref(j, "AutoConfig"));
        cJSON_Delete(j);
        qp_free(p);
    }
    return any;
}

/* json.dumps(payload, indent=2) + "\n" of write_model_metadata / write_adapter_metadata, keys in
 * the SDK's order. */
static qp_status write_bundle(const char *model_dir, const char *type, const char *quantization,
                              const char *source_model, int arch, bool remote, const char *out_path,
                              qp_err *e) {
    char hash[65];
    char *cfg = qp_path_join(model_dir, "config.json");
    qp_status s = cfg ? qp_trlm_config_hash(cfg, hash, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    qp_free(cfg);
    if (s != QP_OK) return s;
    qp_buf b = {0};
    qp_buf_printf(&b, "{\n  \"trillim_version\": \"%s\",\n  \"format_version\": %d,\n  \"type\": \"%s\",\n"
                  "  \"quantization\": \"%s\",\n  \"source_model\": ", QP_TRILLIM_SDK_VERSION,
                  QP_TRLM_BUNDLE_FORMAT, type, quantization);
    bool ok = put_py_str(&b, source_model);
    qp_buf_printf(&b, ",\n  \"architecture\": \"%s\",\n  \"platforms\": [\n    \"x86_64\",\n    \"aarch64\"\n  ],\n"
                  "  \"base_model_config_hash\": \"%s\",\n  \"remote_code\": %s\n}\n",
                  qp_trlm_arch_name((uint32_t)arch), hash, remote ? "true" : "false");
    if (b.oom) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    else if (!ok) s = qp_fail(e, QP_ERR_CORRUPT, "%s: source_model is not valid UTF-8", out_path);
    else s = qp_file_write_atomic(out_path, b.p, b.len, e);
    qp_buf_free(&b);
    return s;
}

qp_status qp_trillim_bundle_write(const char *model_dir, const qp_trillim_config *c, const char *out_path,
                                  qp_err *e) {
    return write_bundle(model_dir, "model", qp_trillim_quantization_name(c->target, c->arch_type),
                        c->source_model ? c->source_model : "", c->arch_type,
                        requires_remote_code(model_dir, false), out_path, e);
}

qp_status qp_trillim_adapter_bundle_write(const char *model_dir, const char *adapter_dir,
                                          const qp_trillim_config *c, const char *out_path, qp_err *e) {
    char *p = qp_path_join(adapter_dir, "adapter_config.json");
    cJSON *ac = p ? read_json_object(p) : NULL;
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(ac, "base_model_name_or_path");
    /* str(payload.get("base_model_name_or_path", "")): strings as they are; other JSON values
       ("None" for null) are not reproduced and written as "" (converters/trillim_sdk.md) */
    qp_status s = write_bundle(model_dir, "lora_adapter",
                               qp_trillim_quantization_name(QP_TRILLIM_TARGET_AUTO, c->arch_type),
                               cJSON_IsString(src) ? src->valuestring : "", c->arch_type,
                               requires_remote_code(adapter_dir, true), out_path, e);
    cJSON_Delete(ac);
    qp_free(p);
    return s;
}

/* copy_adapter_support_files' skip rule (_should_skip_adapter_path) for a file's own name. */
static bool adapter_file_skipped(const char *name) {
    static const char *const k_excluded[] = {".quantize_manifest.bin", "qmodel.lora", "qmodel.tensors",
                                             "rope.cache", "trillim_config.json", "adapter_model.safetensors",
                                             "adapter_model.bin", ".unused-qmodel.tensors"};
    for (size_t k = 0; k < sizeof k_excluded / sizeof k_excluded[0]; k++)
        if (strcmp(name, k_excluded[k]) == 0) return true;
    size_t n = strlen(name);
    return strncmp(name, "adapter_model.safetensors.", 26) == 0 || (n >= 4 && strcmp(name + n - 4, ".pyc") == 0) ||
           (n >= 4 && strcmp(name + n - 4, ".tmp") == 0);
}

/* _sanitize_adapter_tokenizer_loader_fields: without an AutoTokenizer of the adapter's own,
 * tokenizer_class and auto_map's AutoTokenizer go (auto_map too when it empties or is a list). */
static void sanitize_loader_fields(cJSON *j) {
    cJSON_DeleteItemFromObjectCaseSensitive(j, "tokenizer_class");
    cJSON *am = cJSON_GetObjectItemCaseSensitive(j, "auto_map");
    if (cJSON_IsObject(am)) {
        cJSON_DeleteItemFromObjectCaseSensitive(am, "AutoTokenizer");
        if (!am->child) cJSON_DeleteItemFromObjectCaseSensitive(j, "auto_map");
    } else if (cJSON_IsArray(am)) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "auto_map");
    }
}

/* One support file: config.json / tokenizer_config.json that parse as objects rewritten as the
 * SDK's _write_json (sanitized unless the adapter declares its AutoTokenizer), others copied. */
static qp_status copy_adapter_file(const char *from, const char *name, bool explicit_tok, const char *to,
                                   qp_err *e) {
    cJSON *j = strcmp(name, "config.json") == 0 || strcmp(name, "tokenizer_config.json") == 0
                   ? read_json_object(from) : NULL;
    char *buf = NULL;
    size_t len = 0;
    qp_status s;
    if (j) {
        if (!explicit_tok) sanitize_loader_fields(j);
        qp_buf b = {0};
        bool ok = qp_json_dump_py_indent(&b, j, 2) && qp_buf_u8(&b, '\n');
        s = ok ? qp_file_write_atomic(to, b.p, b.len, e)
               : qp_fail(e, b.oom ? QP_ERR_NOMEM : QP_ERR_CORRUPT, "%s: cannot be written back as JSON "
                         "(invalid UTF-8 or nested deeper than 64)", from);
        qp_buf_free(&b);
        cJSON_Delete(j);
        return s;
    }
    s = qp_file_read_all(from, (size_t)1 << 30, &buf, &len, e);
    if (s == QP_OK) s = qp_file_write_atomic(to, buf, len, e);
    qp_free(buf);
    return s;
}

/* rel's folders in the bundle (each made when absent), before the first file copied into rel:
 * the SDK makes a destination's parents per file, so a folder without copied files is not made. */
static qp_status make_out_dirs(qp_outdir *od, const char *rel, qp_err *e) {
    char part[4096];
    size_t n = strlen(rel);
    if (n >= sizeof part) return qp_fail(e, QP_ERR_LIMIT, "adapter path %s is too long", rel);
    qp_status s = QP_OK;
    for (size_t i = 1; s == QP_OK && i <= n; i++) {
        if (rel[i] != '/' && rel[i] != '\0') continue;
        memcpy(part, rel, i);
        part[i] = '\0';
        char *p = qp_outdir_join(od, part);
        if (!p) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        else if (mkdir(p, 0777) != 0 && errno != EEXIST) s = qp_fail(e, QP_ERR_IO, "%s: cannot make the folder", p);
        qp_free(p);
    }
    return s;
}

enum { ADAPTER_MAX_DEPTH = 16 };

/* copy_adapter_support_files walks the adapter folder with rglob: every file of every subfolder
 * (links to folders are not followed; __pycache__ anywhere is left out), each skipped by its own
 * name at any depth (_should_skip_adapter_path); config.json and tokenizer_config.json are
 * rewritten at the top level only (rel NULL), copied as they are in a subfolder. */
static qp_status copy_adapter_tree(const char *dir, const char *rel, bool explicit_tok, qp_outdir *od,
                                   int depth, qp_err *e) {
    if (depth > ADAPTER_MAX_DEPTH)
        return qp_fail(e, QP_ERR_LIMIT, "%s: adapter folders nested deeper than %d", dir, ADAPTER_MAX_DEPTH);
    DIR *d = opendir(dir);
    if (!d) return qp_fail(e, QP_ERR_IO, "%s: cannot list the adapter folder", dir);
    qp_status s = QP_OK;
    bool made = rel == NULL;
    for (struct dirent *de; s == QP_OK && (de = readdir(d));) {
        const char *name = de->d_name;
        if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) continue;
        char *from = qp_path_join(dir, name), *sub = rel ? qp_path_join(rel, name) : qp_strdup(name);
        struct stat st;
        if (!from || !sub) {
            s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        } else if (lstat(from, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (strcmp(name, "__pycache__") != 0) s = copy_adapter_tree(from, sub, explicit_tok, od, depth + 1, e);
        } else if (!adapter_file_skipped(name) && qp_path_check_regular(from, 0, NULL) == QP_OK) {
            char *to = NULL;
            if (!made) s = make_out_dirs(od, rel, e), made = s == QP_OK;
            if (s == QP_OK && !(to = qp_outdir_join(od, sub))) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
            if (s == QP_OK) s = copy_adapter_file(from, rel ? "" : name, explicit_tok, to, e);
            qp_free(to);
        }
        qp_free(from);
        qp_free(sub);
    }
    closedir(d);
    return s;
}

qp_status qp_trillim_adapter_files_copy(const char *adapter_dir, qp_outdir *od, qp_err *e) {
    char *cp = qp_path_join(adapter_dir, "config.json"), *tp = qp_path_join(adapter_dir, "tokenizer_config.json");
    cJSON *cj = cp ? read_json_object(cp) : NULL, *tj = tp ? read_json_object(tp) : NULL;
    const bool explicit_tok = has_auto_map_ref(cj, "AutoTokenizer") || has_auto_map_ref(tj, "AutoTokenizer");
    cJSON_Delete(cj);
    cJSON_Delete(tj);
    qp_free(cp);
    qp_free(tp);
    return copy_adapter_tree(adapter_dir, NULL, explicit_tok, od, 0, e);
}
