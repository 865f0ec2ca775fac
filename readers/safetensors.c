/* safetensors reader: a single file, an HF model directory, or a sharded directory with
 * model.safetensors.index.json; plus config.json and the tokenizer beside it.
 * Spec, limits and statuses: readers/safetensors.md. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "readers/name_map.h"
#include "core/json.h"
#include "core/model_internal.h"
#include "core/utf8.h"
#include "readers/hf_config.h"
#include "readers/safetensors_format.h"

#define QP_ST_MAX_INDEX_BYTES ((size_t)100 << 20)
#define QP_ST_MAX_SHARDS 65536

static const char *const k_unsupported_dtypes[] = {
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64", "C128",
};

typedef struct st_span {
    uint64_t begin, end;
    int64_t tensor; /* index into m->tensors */
} st_span;

/* What an index says about the tensors of the shard being read (NULL for plain files). */
typedef struct st_expect {
    const qp_strmap *where;    /* tensor name -> shard number */
    const char *const *shards; /* shard file names by number */
    int64_t shard_no;
} st_expect;

/* ---- helpers ------------------------------------------------------------------------------ */

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Counts structural characters outside strings, a bound on the cJSON nodes parsing allocates. */
static size_t count_json_values(const uint8_t *s, size_t n) {
    size_t count = 1;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
            count++;
        } else if (c == ',' || c == '[' || c == '{' || c == ':') {
            count++;
        }
    }
    return count;
}

/* ---- header framing and entries (readers/safetensors_format.h) ---------------------------- */

qp_status qp_st_header_parse(const uint8_t *data, size_t size, const char *file, cJSON **out,
                             size_t *data_start, qp_err *e) {
    if (size < 8)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: at offset 0: %zu bytes, too short for the 8-byte header "
                                          "length", file, size);
    uint64_t hl = qp_load_u64le(data);
    if (hl > QP_ST_MAX_HEADER)
        return qp_fail(e, QP_ERR_LIMIT, "%s: at offset 0: header length %llu exceeds the %llu-byte limit",
                       file, (unsigned long long)hl, (unsigned long long)QP_ST_MAX_HEADER);
    if (hl > size - 8)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: truncated: the file ends at byte offset %zu, inside the "
                       "%llu-byte header that starts at offset 8", file, size, (unsigned long long)hl);
    if (hl < 2)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: at offset 0: header length %llu is too short for a JSON "
                                          "object", file, (unsigned long long)hl);
    size_t hlen = (size_t)hl;
    const uint8_t *hdr = data + 8;
    size_t bad = qp_utf8_invalid_at(hdr, hlen);
    if (bad != hlen)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: invalid UTF-8", file, 8 + bad);
    size_t first = 0;
    while (first < hlen && is_ws(hdr[first])) first++;
    if (first == hlen || hdr[first] != '{')
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: the header is not a JSON object", file,
                       8 + first);
    if (count_json_values(hdr, hlen) > QP_ST_MAX_JSON_VALUES)
        return qp_fail(e, QP_ERR_LIMIT, "%s: header at offset 8: more than %zu JSON values", file,
                       QP_ST_MAX_JSON_VALUES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)hdr, hlen, &end, false);
    if (!root) {
        size_t pos = end && end >= (const char *)hdr ? (size_t)(end - (const char *)hdr) : 0;
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: invalid JSON", file,
                       8 + (pos > hlen ? hlen : pos));
    }
    qp_status s = QP_OK;
    size_t rest = end ? (size_t)(end - (const char *)hdr) : hlen;
    for (size_t i = rest; i < hlen && s == QP_OK; i++)
        if (!is_ws(hdr[i]))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: bytes after the JSON object (only "
                                           "space padding is allowed)", file, 8 + i);
    if (s == QP_OK && !cJSON_IsObject(root))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset 8: not a JSON object", file);
    if (s == QP_OK) s = qp_json_unique_keys(root, file, "the header at offset 8", e);
    if (s != QP_OK) {
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    *data_start = 8 + hlen;
    return QP_OK;
}

qp_status qp_st_entry_parse(const cJSON *it, const char *file, size_t data_start, qp_st_entry *out,
                            qp_err *e) {
    const char *name = it->string ? it->string : "";
    if (!cJSON_IsObject(it))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): entry is %s, not "
                                          "an object", file, name, qp_json_kind(it));
    qp_status s = qp_json_unique_keys(it, file, "a tensor entry (header at offset 8)", e);
    if (s != QP_OK) return s;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): dtype is %s, not a "
                                          "string", file, name, qp_json_kind(dt));
    if (!cJSON_IsArray(sh))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): shape is %s, not a "
                                          "list", file, name, qp_json_kind(sh));
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): data_offsets is not a "
                                          "list of two integers", file, name);
    qp_st_entry en = {.dtype = dt->valuestring, .n_dims = cJSON_GetArraySize(sh)};
    if (en.n_dims > QP_ST_MAX_DIMS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%.200s' (header at offset 8): %d dimensions (at most "
                                        "%d)", file, name, en.n_dims, QP_ST_MAX_DIMS);
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (!qp_json_uint(x, &v))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): shape[%d] is %s",
                           file, name, d, qp_json_kind(x));
        en.shape[d] = (int64_t)v;
    }
    if (!qp_json_uint(off->child, &en.begin) || !qp_json_uint(off->child->next, &en.end))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): data_offsets are not "
                                          "two non-negative integers", file, name);
    if (en.begin > en.end)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' at offset %llu: data_offsets begin %llu > "
                                          "end %llu", file, name,
                       (unsigned long long)data_start + (unsigned long long)en.begin,
                       (unsigned long long)en.begin, (unsigned long long)en.end);
    *out = en;
    return QP_OK;
}

static qp_status set_canon(qp_model *m, qp_tensor *t, qp_err *e) {
    char buf[256];
    if (!qp_name_map_hf_to_gguf(t->name, buf, sizeof buf)) return QP_OK;
    t->canon = qp_arena_strdup(qp_model_arena(m), buf);
    return t->canon ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
}

static int cmp_span(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->tensor > y->tensor) - (x->tensor < y->tensor);
}

/* ---- __metadata__ ------------------------------------------------------------------------- */

static qp_status read_metadata(qp_model *m, const cJSON *md, const char *file, qp_err *e) {
    if (!cJSON_IsObject(md))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset 8: __metadata__ is %s, not an object of "
                                          "strings", file, qp_json_kind(md));
    qp_status s = qp_json_unique_keys(md, file, "__metadata__ (header at offset 8)", e);
    for (const cJSON *it = md->child; it && s == QP_OK; it = it->next) {
        if (!cJSON_IsString(it))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset 8: __metadata__ value of '%.200s' is "
                                              "%s, not a string", file, it->string, qp_json_kind(it));
        char key[320];
        int kn = snprintf(key, sizeof key, "safetensors.metadata.%s", it->string);
        if (kn < 0 || (size_t)kn >= sizeof key) {
            qp_model_add_problem(m, "%s: __metadata__ key '%.60s...' is too long to keep", file, it->string);
            continue;
        }
        const qp_meta *old = qp_model_meta(m, key);
        if (old) { /* another shard carried the same key */
            if (old->type != QP_META_STRING || strcmp(old->str, it->valuestring) != 0)
                qp_model_add_problem(m, "%s: __metadata__ '%.200s' differs from an earlier shard; keeping "
                                        "the first", file, it->string);
            continue;
        }
        s = qp_model_meta_str(m, key, it->valuestring, strlen(it->valuestring), e);
    }
    return s;
}

/* ---- one tensor entry --------------------------------------------------------------------- */

static qp_status read_tensor(qp_model *m, int fi, const cJSON *it, size_t data_start, size_t data_size,
                             const st_expect *ex, st_span *span, qp_err *e) {
    const char *file = qp_model_file(m, fi)->path;
    const char *name = it->string;
    qp_st_entry en;
    qp_status s = qp_st_entry_parse(it, file, data_start, &en, e);
    if (s != QP_OK) return s;
    const char *dtype = en.dtype;
    qp_encoding enc = qp_encoding_from_st_dtype(dtype, strlen(dtype));
    if (enc == QP_ENC_COUNT) {
        bool known = false;
        for (size_t i = 0; i < sizeof k_unsupported_dtypes / sizeof k_unsupported_dtypes[0]; i++)
            known |= strcmp(dtype, k_unsupported_dtypes[i]) == 0;
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%.200s' (header at offset 8): dtype '%.40s' is "
                                              "%s", file, name, dtype,
                       known ? "not supported (no conversion for it yet)" : "unknown");
    }
    int nd = en.n_dims;
    if (nd > QP_MAX_DIMS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%.200s' (header at offset 8): %d dimensions (at most "
                                        "%d)", file, name, nd, QP_MAX_DIMS);
    const int64_t *dims = en.shape;
    int64_t nel = 1;
    for (int d = 0; d < nd; d++)
        if (!qp_i64_mul(nel, dims[d], &nel))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): shape element "
                                              "count overflows", file, name);
    uint64_t begin = en.begin, end = en.end;
    if (end > data_size)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' at offset %llu: data_offsets end %llu is past "
                                          "the %zu-byte data section (file truncated?)", file, name,
                       (unsigned long long)data_start + (unsigned long long)begin,
                       (unsigned long long)end, data_size);
    size_t nbytes;
    if (!qp_encoding_tensor_bytes(enc, nel, &nbytes))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' (header at offset 8): byte size of %lld "
                                          "%s elements overflows", file, name, (long long)nel, dtype);
    if (end - begin != nbytes)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' at offset %llu: data_offsets [%llu, %llu] hold "
                                          "%llu bytes but %lld %s elements need %zu", file, name,
                       (unsigned long long)data_start + (unsigned long long)begin,
                       (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)(end - begin), (long long)nel, dtype, nbytes);
    if (ex) {
        int64_t want;
        if (!qp_strmap_get(ex->where, name, strlen(name), &want))
            qp_model_add_problem(m, "%s: tensor '%.200s' is not listed in model.safetensors.index.json", file,
                                 name);
        else if (want != ex->shard_no)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' at offset %llu: the index lists it in "
                                              "shard '%s'", file, name,
                           (unsigned long long)data_start + (unsigned long long)begin, ex->shards[want]);
    }
    qp_tensor *t;
    s = qp_model_add_tensor(m, name, strlen(name), &t, e);
    if (s == QP_OK) {
        t->enc = enc;
        s = qp_tensor_set_shape_outer_first(t, dims, nd, e);
    }
    if (s != QP_OK) {
        qp_err_prefix(e, "%s: ", file);
        return s;
    }
    t->data = qp_model_file(m, fi)->data + data_start + begin;
    t->nbytes = nbytes;
    t->offset = (uint64_t)data_start + begin;
    t->file_index = fi;
    span->begin = begin;
    span->end = end;
    span->tensor = m->n_tensors - 1;
    return set_canon(m, t, e);
}

/* ---- one file ----------------------------------------------------------------------------- */

static qp_status check_layout(qp_model *m, const char *file, st_span *spans, size_t n, size_t data_start,
                              size_t data_size, qp_err *e) {
    qsort(spans, n, sizeof *spans, cmp_span);
    uint64_t prev_end = 0;
    int64_t prev = -1, holes = 0;
    uint64_t hole_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (spans[i].begin < prev_end)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%.200s' at offset %llu: data overlaps tensor "
                                              "'%.200s' (which ends at offset %llu)", file,
                           m->tensors[spans[i].tensor].name,
                           (unsigned long long)data_start + (unsigned long long)spans[i].begin,
                           m->tensors[prev].name, (unsigned long long)data_start + (unsigned long long)prev_end);
        if (spans[i].begin > prev_end) {
            holes++;
            hole_bytes += spans[i].begin - prev_end;
        }
        if (spans[i].end >= prev_end) {
            prev_end = spans[i].end;
            prev = spans[i].tensor;
        }
    }
    if (holes)
        qp_model_add_problem(m, "%s: %lld gap(s) between tensors in the data section (%llu unused bytes)",
                             file, (long long)holes, (unsigned long long)hole_bytes);
    if (prev_end < data_size)
        qp_model_add_problem(m, "%s: %llu bytes after the last tensor (offset %llu) belong to no tensor", file,
                             (unsigned long long)(data_size - prev_end),
                             (unsigned long long)data_start + (unsigned long long)prev_end);
    return QP_OK;
}

static qp_status read_file(qp_model *m, const char *path, const st_expect *ex, qp_err *e) {
    int fi;
    qp_status s = qp_model_add_file(m, path, &fi, e);
    if (s != QP_OK) return s;
    const qp_mapped_file *f = qp_model_file(m, fi);
    const char *file = f->path;
    cJSON *root = NULL;
    size_t data_start = 0;
    s = qp_st_header_parse(f->data, f->size, file, &root, &data_start, e);
    if (s != QP_OK) return s;
    size_t data_size = f->size - data_start;
    size_t n_entries = 0;
    for (const cJSON *it = root->child; it; it = it->next) n_entries++;
    st_span *spans = qp_calloc(n_entries ? n_entries : 1, sizeof *spans);
    if (!spans) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    size_t n_spans = 0;
    for (const cJSON *it = root->child; it && s == QP_OK; it = it->next) {
        if (it->string && strcmp(it->string, "__metadata__") == 0) s = read_metadata(m, it, file, e);
        else s = read_tensor(m, fi, it, data_start, data_size, ex, &spans[n_spans++], e);
    }
    if (s == QP_OK) s = check_layout(m, file, spans, n_spans, data_start, data_size, e);
    qp_free(spans);
    cJSON_Delete(root);
    return s;
}

/* ---- sharded directory -------------------------------------------------------------------- */

static bool plain_file_name(const char *s) {
    return s[0] && s[0] != '/' && !strchr(s, '/') && !strchr(s, '\\') && !strstr(s, "..") &&
           strcmp(s, ".") != 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static qp_status read_index(qp_model *m, const char *dir, const char *index_path, qp_err *e) {
    char *text = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(index_path, QP_ST_MAX_INDEX_BYTES, &text, &len, e);
    if (s != QP_OK) return s;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    const char **shards = NULL;
    size_t n_shards = 0;
    qp_strmap where = {0}, shard_no = {0};
    if (!root) {
        size_t pos = end && end >= text ? (size_t)(end - text) : 0;
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: invalid JSON at offset %zu", index_path, pos > len ? len : pos);
    }
    const cJSON *wm = NULL;
    if (s == QP_OK && !cJSON_IsObject(root))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: not a JSON object", index_path);
    if (s == QP_OK) s = qp_json_unique_keys(root, index_path, "the index", e);
    if (s == QP_OK) {
        wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
        if (!cJSON_IsObject(wm)) s = qp_fail(e, QP_ERR_CORRUPT, "%s: 'weight_map' is missing or not an object",
                                             index_path);
    }
    if (s == QP_OK) s = qp_json_unique_keys(wm, index_path, "weight_map", e);
    size_t n_entries = 0;
    for (const cJSON *it = s == QP_OK ? wm->child : NULL; it && s == QP_OK; it = it->next) {
        if (!cJSON_IsString(it))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: weight_map entry '%.200s' is %s, not a file name", index_path,
                        it->string, qp_json_kind(it));
        else if (!plain_file_name(it->valuestring))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: weight_map entry '%.200s' names shard '%.200s', which is not "
                                           "a plain file name inside the directory (absolute paths, '..' "
                                           "and slashes are refused)", index_path, it->string,
                        it->valuestring);
        n_entries++;
    }
    if (s == QP_OK && n_entries == 0) s = qp_fail(e, QP_ERR_CORRUPT, "%s: weight_map is empty", index_path);
    /* distinct shard names, sorted: file index order */
    if (s == QP_OK) {
        shards = qp_calloc(n_entries, sizeof *shards);
        if (!shards) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", index_path);
    }
    for (const cJSON *it = s == QP_OK ? wm->child : NULL; it && s == QP_OK; it = it->next) {
        bool added;
        if (qp_strmap_put(&shard_no, it->valuestring, strlen(it->valuestring), 0, &added) != QP_OK)
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", index_path);
        else if (added) shards[n_shards++] = it->valuestring;
    }
    if (s == QP_OK && n_shards > QP_ST_MAX_SHARDS)
        s = qp_fail(e, QP_ERR_LIMIT, "%s: %zu shards (limit %d)", index_path, n_shards, QP_ST_MAX_SHARDS);
    if (s == QP_OK) {
        qsort(shards, n_shards, sizeof *shards, cmp_str);
        qp_strmap_free(&shard_no);
        for (size_t i = 0; i < n_shards && s == QP_OK; i++)
            if (qp_strmap_put(&shard_no, shards[i], strlen(shards[i]), (int64_t)i, NULL) != QP_OK)
                s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", index_path);
    }
    for (const cJSON *it = s == QP_OK ? wm->child : NULL; it && s == QP_OK; it = it->next) {
        int64_t no = 0;
        qp_strmap_get(&shard_no, it->valuestring, strlen(it->valuestring), &no);
        if (qp_strmap_put(&where, it->string, strlen(it->string), no, NULL) != QP_OK)
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", index_path);
    }
    /* index metadata (total_size, ...) */
    const cJSON *md = s == QP_OK ? cJSON_GetObjectItemCaseSensitive(root, "metadata") : NULL;
    for (const cJSON *it = cJSON_IsObject(md) ? md->child : NULL; it && s == QP_OK; it = it->next) {
        char key[256];
        int kn = snprintf(key, sizeof key, "safetensors.index.%s", it->string);
        if (kn < 0 || (size_t)kn >= sizeof key || qp_model_meta(m, key)) continue;
        uint64_t u;
        if (cJSON_IsString(it)) s = qp_model_meta_str(m, key, it->valuestring, strlen(it->valuestring), e);
        else if (qp_json_uint(it, &u)) {
            qp_meta *mm;
            s = qp_model_add_meta(m, key, strlen(key), &mm, e);
            if (s == QP_OK) {
                mm->type = QP_META_U64;
                mm->v.u = u;
            }
        }
    }
    for (size_t i = 0; i < n_shards && s == QP_OK; i++) {
        char *p = qp_path_join(dir, shards[i]);
        if (!p) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", index_path);
            break;
        }
        if (!qp_path_exists(p)) {
            s = qp_fail(e, QP_ERR_IO, "%s: shard '%s' listed in %s is missing", p, shards[i], index_path);
        } else {
            st_expect ex = {&where, shards, (int64_t)i};
            s = read_file(m, p, &ex, e);
        }
        qp_free(p);
    }
    for (const cJSON *it = s == QP_OK ? wm->child : NULL; it && s == QP_OK; it = it->next)
        if (!qp_strmap_get(&m->priv->by_name, it->string, strlen(it->string), NULL))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s/%s: tensor '%.200s' listed in the index is absent from this "
                                           "shard", dir, it->valuestring, it->string);
    qp_strmap_free(&where);
    qp_strmap_free(&shard_no);
    qp_free(shards);
    cJSON_Delete(root);
    qp_free(text);
    return s;
}

/* Every *.safetensors file in dir, sorted by name (a directory without model.safetensors). */
static qp_status read_dir_files(qp_model *m, const char *dir, qp_err *e) {
    DIR *d = opendir(dir);
    if (!d) return qp_fail(e, QP_ERR_IO, "%s: cannot open directory", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    qp_status s = QP_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && s == QP_OK) {
        size_t l = strlen(de->d_name);
        if (l <= 12 || strcmp(de->d_name + l - 12, ".safetensors") != 0 || de->d_name[0] == '.') continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char **nn = qp_realloc(names, nc * sizeof *nn);
            if (!nn) {
                s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
                break;
            }
            names = nn;
            cap = nc;
        }
        names[n] = qp_strdup(de->d_name);
        if (!names[n]) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
        else n++;
    }
    closedir(d);
    if (s == QP_OK && n == 0) s = qp_fail(e, QP_ERR_FORMAT, "%s: no .safetensors file in the directory", dir);
    if (s == QP_OK) {
        qsort(names, n, sizeof *names, cmp_str);
        if (n > 1)
            qp_model_add_problem(m, "%s: no model.safetensors or index; read %zu .safetensors files in name "
                                    "order", dir, n);
    }
    for (size_t i = 0; i < n && s == QP_OK; i++) {
        char *p = qp_path_join(dir, names[i]);
        s = p ? read_file(m, p, NULL, e) : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
        qp_free(p);
    }
    for (size_t i = 0; i < n; i++) qp_free(names[i]);
    qp_free(names);
    return s;
}

/* ---- tokenizer ---------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Runs a tokenizer reader; QP_ERR_UNSUPPORTED becomes a problem, anything else fails. */
static qp_status tokenizer_step(qp_model *m, qp_status s, const qp_err *le, qp_err *e) {
    if (s == QP_OK) return QP_OK;
    if (s == QP_ERR_UNSUPPORTED) {
        qp_model_add_problem(m, "tokenizer not read: %s", le->msg);
        return QP_OK;
    }
    return qp_fail(e, s, "%s", le->msg);
}

static qp_status read_tokenizer_json(qp_model *m, const char *json_path, qp_err *le) {
    /* tokenizer_config.json beside the tokenizer.json */
    const char *slash = strrchr(json_path, '/');
    char *cfg = NULL;
    if (slash) {
        char *dir = qp_strndup(json_path, (size_t)(slash - json_path));
        cfg = dir ? qp_path_join(dir, "tokenizer_config.json") : NULL;
        qp_free(dir);
    } else {
        cfg = qp_strdup("tokenizer_config.json");
    }
    if (!cfg) return qp_fail(le, QP_ERR_NOMEM, "%s: out of memory", json_path);
    qp_status s = qp_hf_tokenizer_read(m, json_path, cfg, le);
    qp_free(cfg);
    return s;
}

static qp_status read_tokenizer(qp_model *m, const char *dir, const qp_open_opts *o, qp_err *e) {
    qp_err le = {0};
    if (o && o->tokenizer_path) {
        const char *tp = o->tokenizer_path;
        qp_status s = ends_with(tp, ".json") ? read_tokenizer_json(m, tp, &le)
                                             : qp_vocab_read_spm_model(m, tp, &le);
        return tokenizer_step(m, s, &le, e);
    }
    if (!dir) return QP_OK;
    char *tj = qp_path_join(dir, "tokenizer.json"), *tm = qp_path_join(dir, "tokenizer.model");
    qp_status s = QP_OK;
    if (!tj || !tm) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    else if (qp_path_exists(tj)) s = tokenizer_step(m, read_tokenizer_json(m, tj, &le), &le, e);
    else if (qp_path_exists(tm)) s = tokenizer_step(m, qp_vocab_read_spm_model(m, tm, &le), &le, e);
    else qp_model_add_problem(m, "%s: no tokenizer.json or tokenizer.model", dir);
    char *tc = s == QP_OK ? qp_path_join(dir, "tokenizer_config.json") : NULL;
    if (tc) s = qp_hf_chat_template_read(m, tc, e);
    qp_free(tc);
    qp_free(tj);
    qp_free(tm);
    return s;
}

/* ---- architecture from what was read ------------------------------------------------------ */

static const qp_tensor *find_canon(const qp_model *m, const char *canon) {
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].canon && strcmp(m->tensors[i].canon, canon) == 0) return &m->tensors[i];
    return NULL;
}

/* in_hf_folder: a file given on its own whose folder has a config.json; the missing
 * configuration is then the caller's choice of path, named by qp_model_check_for_write. */
static void finish_arch(qp_model *m, bool have_config, bool in_hf_folder) {
    qp_arch *a = &m->arch;
    const qp_tensor *emb = find_canon(m, "token_embd.weight");
    const qp_tensor *out = find_canon(m, "output.weight");
    if (!have_config && emb) {
        /* a bare file: what the tensor shapes say */
        a->hidden = emb->ne[0];
        int64_t layers = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const char *c = m->tensors[i].canon;
            if (!c || strncmp(c, "blk.", 4) != 0) continue;
            long long l = strtoll(c + 4, NULL, 10);
            if (l + 1 > layers) layers = (int64_t)l + 1;
        }
        a->n_layers = layers;
        const qp_tensor *gate = find_canon(m, "blk.0.ffn_gate.weight");
        if (gate) a->intermediate = gate->ne[1];
        a->rope_style = QP_ROPE_NEOX;
        if (!in_hf_folder)
            qp_model_add_problem(m, "no config.json: architecture partly inferred from tensor shapes");
    }
    if (emb && a->vocab == 0) a->vocab = emb->ne[1];
    if (emb && a->vocab != emb->ne[1])
        qp_model_add_problem(m, "config vocab_size %lld differs from token_embd rows %lld", (long long)a->vocab,
                             (long long)emb->ne[1]);
    if (emb && !out && !a->tie_embeddings && m->n_tensors) {
        a->tie_embeddings = true;
        if (have_config)
            qp_model_add_problem(m, "no lm_head weight although tie_word_embeddings is false; treating the "
                                    "output as tied to the embeddings");
    }
    if (m->vocab.n_tokens > 0 && a->vocab > 0 && m->vocab.n_tokens > a->vocab)
        qp_model_add_problem(m, "the tokenizer has %lld tokens but the model only %lld embedding rows",
                             (long long)m->vocab.n_tokens, (long long)a->vocab);
    if (a->bos_id < 0) a->bos_id = m->vocab.bos_id;
    if (a->eos_id < 0) a->eos_id = m->vocab.eos_id;
    if (m->vocab.n_tokens > 0) {
        if (m->vocab.bos_id < 0 && a->bos_id < m->vocab.n_tokens) m->vocab.bos_id = a->bos_id;
        if (m->vocab.eos_id < 0 && a->eos_id < m->vocab.n_tokens) m->vocab.eos_id = a->eos_id;
    }
}

/* ---- entry point -------------------------------------------------------------------------- */

qp_status qp_safetensors_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    qp_status s;
    bool have_config = false, in_hf_folder = false;
    if (qp_path_is_dir(path)) {
        char *idx = qp_path_join(path, "model.safetensors.index.json");
        char *single = qp_path_join(path, "model.safetensors");
        char *cfg = qp_path_join(path, "config.json");
        if (!idx || !single || !cfg) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        else if (qp_path_exists(idx)) s = read_index(m, path, idx, e);
        else if (qp_path_exists(single)) s = read_file(m, single, NULL, e);
        else s = read_dir_files(m, path, e);
        if (s == QP_OK && qp_path_exists(cfg)) {
            s = qp_hf_config_read(m, cfg, e);
            have_config = true;
        }
        qp_free(idx);
        qp_free(single);
        qp_free(cfg);
        if (s == QP_OK) s = read_tokenizer(m, path, o, e);
    } else {
        s = read_file(m, path, NULL, e);
        if (s == QP_OK) s = read_tokenizer(m, NULL, o, e);
        in_hf_folder = s == QP_OK && qp_hf_folder_of_file(path, NULL);
    }
    if (s == QP_OK) finish_arch(m, have_config, in_hf_folder);
    return s;
}
