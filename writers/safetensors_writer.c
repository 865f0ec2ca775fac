/* Streaming safetensors writer. Format and choices: writers/safetensors_writer.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/sticky.h"
#include "core/strmap.h"
#include "writers/safetensors_writer.h"

typedef struct st_desc {
    char *name;
    char *dtype;
    int n_dims;
    int64_t shape[QP_ST_WRITER_MAX_DIMS];
    uint64_t nbytes;
    uint64_t begin; /* data offset within its shard */
    int shard;
} st_desc;

typedef struct st_meta {
    char *key;
    char *value;
} st_meta;

struct qp_st_writer {
    char *path;      /* single file: the file; sharded: the folder */
    char *prefix;    /* sharded only */
    uint64_t max_shard; /* 0 = single file */
    st_desc *t;
    int64_t n_t, cap_t;
    st_meta *m;
    int64_t n_m, cap_m;
    qp_strmap names, keys;
    bool begun;
    int n_shards;
    char **shard_paths;   /* final paths */
    qp_outfile **files;   /* opened lazily, committed by finish */
    int64_t cur;          /* index of the tensor being written */
    uint64_t filled;      /* bytes of t[cur] written */
    uint64_t total;
    qp_err err;           /* first failure (sticky) */
};

/* A Hugging Face model folder (safetensors_writer.h). */
static const char *const k_hf_files[] = {"model.safetensors", "model-*-of-*.safetensors",
                                         "model.safetensors.index.json", "config.json",
                                         "generation_config.json", "tokenizer.json",
                                         "tokenizer_config.json", "special_tokens_map.json", NULL};
const qp_outdir_kind qp_hf_outdir_kind = {"Hugging Face model folder", "model.safetensors", k_hf_files};

/* ---- writer --------------------------------------------------------------------------------- */

/* The first failure sticks in w->err (core/sticky.h); every later call returns it. */
#define W_FAIL(w, e, st, ...) qp_sticky_fail(&(w)->err, (e), (st), __VA_ARGS__)
static qp_status w_sticky(qp_st_writer *w, qp_err *e) { return qp_sticky_check(&w->err, e); }
/* Copies a failure reported in tmp (by a core call) into the writer. */
static qp_status w_take(qp_st_writer *w, qp_err *e, const qp_err *tmp) {
    return qp_sticky_take(&w->err, e, tmp);
}

static qp_status writer_new(const char *path, const char *prefix, uint64_t max_shard,
                            qp_st_writer **out, qp_err *e) {
    if (!path || !*path || !out) return qp_fail(e, QP_ERR_ARG, "safetensors writer: no path");
    qp_st_writer *w = qp_calloc(1, sizeof *w);
    if (!w) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    w->path = qp_strdup(path);
    w->prefix = prefix ? qp_strdup(prefix) : NULL;
    w->max_shard = max_shard;
    w->n_shards = 1;
    if (!w->path || (prefix && !w->prefix)) {
        qp_st_writer_abort(w);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = w;
    return QP_OK;
}

qp_status qp_st_writer_new(const char *path, qp_st_writer **out, qp_err *e) {
    return writer_new(path, NULL, 0, out, e);
}

qp_status qp_st_writer_new_sharded(const char *dir, const char *prefix, uint64_t max_shard_bytes,
                                   qp_st_writer **out, qp_err *e) {
    if (max_shard_bytes == 0)
        return qp_fail(e, QP_ERR_ARG, "%s: shard size limit must be positive", dir ? dir : "?");
    if (prefix && (!*prefix || strchr(prefix, '/')))
        return qp_fail(e, QP_ERR_ARG, "%s: bad shard file prefix '%s'", dir ? dir : "?", prefix);
    return writer_new(dir, prefix ? prefix : "model", max_shard_bytes, out, e);
}

qp_status qp_st_writer_add_meta(qp_st_writer *w, const char *key, const char *value, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    if (w->err.status != QP_OK) return w_sticky(w, e);
    if (w->begun) return W_FAIL(w, e, QP_ERR_ARG, "%s: metadata added after begin", w->path);
    if (!key || !value) return W_FAIL(w, e, QP_ERR_ARG, "%s: metadata with NULL key or value", w->path);
    if (w->n_m == w->cap_m) {
        int64_t cap = w->cap_m ? w->cap_m * 2 : 8;
        st_meta *nm = qp_realloc(w->m, (size_t)cap * sizeof *nm);
        if (!nm) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        w->m = nm;
        w->cap_m = cap;
    }
    st_meta *m = &w->m[w->n_m];
    m->key = qp_strdup(key);
    m->value = qp_strdup(value);
    if (!m->key || !m->value) {
        qp_free(m->key);
        qp_free(m->value);
        return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    }
    bool added = false;
    qp_status ps = qp_strmap_put(&w->keys, m->key, strlen(m->key), w->n_m, &added);
    if (!added) {
        qp_free(m->key);
        qp_free(m->value);
        if (ps != QP_OK) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        return W_FAIL(w, e, QP_ERR_ARG, "%s: duplicate metadata key '%s'", w->path, key);
    }
    w->n_m++;
    return QP_OK;
}

qp_status qp_st_writer_add_tensor_dtype(qp_st_writer *w, const char *name, const char *dtype,
                                        size_t elem_bytes, int n_dims, const int64_t *shape,
                                        qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    if (w->err.status != QP_OK) return w_sticky(w, e);
    if (w->begun) return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor added after begin", w->path);
    if (!name || !*name) return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor without a name", w->path);
    if (strcmp(name, "__metadata__") == 0)
        return W_FAIL(w, e, QP_ERR_ARG, "%s: '__metadata__' is not a tensor name", w->path);
    if (!dtype || !*dtype || elem_bytes == 0)
        return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': no dtype", w->path, name);
    for (const char *c = dtype; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': bad dtype '%s'", w->path, name, dtype);
    if (n_dims < 0 || n_dims > QP_ST_WRITER_MAX_DIMS || (n_dims > 0 && !shape))
        return W_FAIL(w, e, QP_ERR_LIMIT, "%s: tensor '%s': %d dimensions (at most %d)", w->path,
                      name, n_dims, QP_ST_WRITER_MAX_DIMS);
    uint64_t nbytes = elem_bytes;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] < 0)
            return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': negative dimension %lld", w->path,
                          name, (long long)shape[i]);
        if (__builtin_mul_overflow(nbytes, (uint64_t)shape[i], &nbytes))
            return W_FAIL(w, e, QP_ERR_LIMIT, "%s: tensor '%s': size overflows", w->path, name);
    }
    if (__builtin_add_overflow(w->total, nbytes, &w->total))
        return W_FAIL(w, e, QP_ERR_LIMIT, "%s: total size overflows", w->path);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        st_desc *nt = qp_realloc(w->t, (size_t)cap * sizeof *nt);
        if (!nt) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        w->t = nt;
        w->cap_t = cap;
    }
    st_desc *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = qp_strdup(name);
    t->dtype = qp_strdup(dtype);
    if (!t->name || !t->dtype) {
        qp_free(t->name);
        qp_free(t->dtype);
        return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    }
    bool added = false;
    qp_status ps = qp_strmap_put(&w->names, t->name, strlen(t->name), w->n_t, &added);
    if (!added) {
        qp_free(t->name);
        qp_free(t->dtype);
        if (ps != QP_OK) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        return W_FAIL(w, e, QP_ERR_ARG, "%s: duplicate tensor name '%s'", w->path, name);
    }
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->shape[i] = shape[i];
    t->nbytes = nbytes;
    w->n_t++;
    return QP_OK;
}

qp_status qp_st_writer_add_tensor(qp_st_writer *w, const char *name, qp_encoding enc, int n_dims,
                                  const int64_t *shape, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    if (!tr || !tr->st_dtype || tr->block_elems != 1 || tr->tensor_trailer_bytes != 0)
        return W_FAIL(w, e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding %s has no safetensors dtype",
                      w->path, name ? name : "?", tr ? tr->name : "?");
    return qp_st_writer_add_tensor_dtype(w, name, tr->st_dtype, tr->block_bytes, n_dims, shape, e);
}

int qp_st_writer_n_shards(const qp_st_writer *w) { return w ? w->n_shards : 0; }
uint64_t qp_st_writer_total_bytes(const qp_st_writer *w) { return w ? w->total : 0; }

static char *shard_name(const qp_st_writer *w, int k) {
    char name[512];
    int n;
    if (w->max_shard == 0) return qp_strdup(w->path);
    if (w->n_shards == 1) n = snprintf(name, sizeof name, "%s.safetensors", w->prefix);
    else n = snprintf(name, sizeof name, "%s-%05d-of-%05d.safetensors", w->prefix, k + 1, w->n_shards);
    if (n < 0 || (size_t)n >= sizeof name) return NULL;
    return qp_path_join(w->path, name);
}

qp_status qp_st_writer_begin(qp_st_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    if (w->err.status != QP_OK) return w_sticky(w, e);
    if (w->begun) return W_FAIL(w, e, QP_ERR_ARG, "%s: begin called twice", w->path);
    /* Assign shards greedily in declared order; offsets are relative to each shard's data. */
    int shard = 0;
    uint64_t used = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        st_desc *t = &w->t[i];
        if (w->max_shard && used > 0 && t->nbytes > w->max_shard - used) {
            if (shard == 99998) return W_FAIL(w, e, QP_ERR_LIMIT, "%s: more than 99999 shards", w->path);
            shard++;
            used = 0;
        }
        t->shard = shard;
        t->begin = used;
        used += t->nbytes;
    }
    w->n_shards = shard + 1;
    w->shard_paths = qp_calloc((size_t)w->n_shards, sizeof *w->shard_paths);
    w->files = qp_calloc((size_t)w->n_shards, sizeof *w->files);
    if (!w->shard_paths || !w->files) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    for (int k = 0; k < w->n_shards; k++) {
        w->shard_paths[k] = shard_name(w, k);
        if (!w->shard_paths[k]) return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    }
    w->begun = true;
    w->cur = 0;
    w->filled = 0;
    return QP_OK;
}

/* Opens shard k and writes its header: u64 length, JSON padded with spaces to a multiple of 8. */
static qp_status open_shard(qp_st_writer *w, int k, qp_err *e) {
    if (w->files[k]) return QP_OK;
    qp_buf b = {0};
    qp_buf_str(&b, "{");
    bool first = true;
    if (w->n_m > 0) {
        qp_buf_str(&b, "\"__metadata__\":{");
        for (int64_t i = 0; i < w->n_m; i++) {
            if (i) qp_buf_str(&b, ",");
            qp_buf_json_str(&b, w->m[i].key, strlen(w->m[i].key));
            qp_buf_str(&b, ":");
            qp_buf_json_str(&b, w->m[i].value, strlen(w->m[i].value));
        }
        qp_buf_str(&b, "}");
        first = false;
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const st_desc *t = &w->t[i];
        if (t->shard != k) continue;
        if (!first) qp_buf_str(&b, ",");
        first = false;
        qp_buf_json_str(&b, t->name, strlen(t->name));
        qp_buf_str(&b, ":{\"dtype\":");
        qp_buf_json_str(&b, t->dtype, strlen(t->dtype));
        qp_buf_str(&b, ",\"shape\":[");
        for (int d = 0; d < t->n_dims; d++) qp_buf_printf(&b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        qp_buf_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                      (unsigned long long)(t->begin + t->nbytes));
    }
    qp_buf_str(&b, "}");
    while (!b.oom && b.len % 8) qp_buf_str(&b, " ");
    if (b.oom) {
        qp_buf_free(&b);
        return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory building the header", w->shard_paths[k]);
    }
    if (b.len > QP_ST_MAX_HEADER) {
        qp_buf_free(&b);
        return W_FAIL(w, e, QP_ERR_LIMIT, "%s: header of %zu bytes exceeds the %zu-byte limit",
                      w->shard_paths[k], b.len, (size_t)QP_ST_MAX_HEADER);
    }
    qp_err tmp;
    qp_err_clear(&tmp);
    qp_outfile *f = NULL;
    uint8_t len8[8];
    qp_store_u64le(len8, (uint64_t)b.len);
    qp_status s = qp_outfile_open(w->shard_paths[k], &f, &tmp);
    if (s == QP_OK) s = qp_outfile_write(f, len8, 8, &tmp);
    if (s == QP_OK) s = qp_outfile_write(f, b.p, b.len, &tmp);
    qp_buf_free(&b);
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return w_take(w, e, &tmp);
    }
    w->files[k] = f;
    return QP_OK;
}

static qp_status check_writing(qp_st_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    if (w->err.status != QP_OK) return w_sticky(w, e);
    if (!w->begun) return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor data before begin", w->path);
    return QP_OK;
}

static qp_status put_bytes(qp_st_writer *w, const uint8_t *p, size_t n, qp_err *e) {
    st_desc *t = &w->t[w->cur];
    qp_status s = open_shard(w, t->shard, e);
    if (s != QP_OK) return s;
    qp_err tmp;
    qp_err_clear(&tmp);
    if (qp_outfile_write(w->files[t->shard], p, n, &tmp) != QP_OK) return w_take(w, e, &tmp);
    w->filled += n;
    return QP_OK;
}

qp_status qp_st_writer_write(qp_st_writer *w, const void *data, size_t n, qp_err *e) {
    qp_status s = check_writing(w, e);
    if (s != QP_OK) return s;
    if (n && !data) return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor data NULL", w->path);
    const uint8_t *p = data;
    while (n > 0) {
        while (w->cur < w->n_t && w->filled == w->t[w->cur].nbytes) {
            w->cur++;
            w->filled = 0;
        }
        if (w->cur == w->n_t)
            return W_FAIL(w, e, QP_ERR_ARG, "%s: %zu bytes of tensor data beyond the last tensor",
                          w->path, n);
        uint64_t left = w->t[w->cur].nbytes - w->filled;
        size_t k = left < n ? (size_t)left : n;
        s = put_bytes(w, p, k, e);
        if (s != QP_OK) return s;
        p += k;
        n -= k;
    }
    return QP_OK;
}

qp_status qp_st_writer_write_tensor(qp_st_writer *w, const void *data, size_t n, qp_err *e) {
    qp_status s = check_writing(w, e);
    if (s != QP_OK) return s;
    while (w->cur < w->n_t && w->filled > 0 && w->filled == w->t[w->cur].nbytes) {
        w->cur++;
        w->filled = 0;
    }
    if (w->cur == w->n_t)
        return W_FAIL(w, e, QP_ERR_ARG, "%s: write of a tensor after the last declared one", w->path);
    st_desc *t = &w->t[w->cur];
    if (w->filled != 0)
        return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s' is partly written (%llu of %llu bytes)",
                      w->path, t->name, (unsigned long long)w->filled, (unsigned long long)t->nbytes);
    if ((uint64_t)n != t->nbytes)
        return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': %zu bytes given, %llu declared", w->path,
                      t->name, n, (unsigned long long)t->nbytes);
    if (n && !data) return W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': data NULL", w->path, t->name);
    if (n) {
        s = put_bytes(w, data, n, e);
        if (s != QP_OK) return s;
    }
    w->cur++;
    w->filled = 0;
    return QP_OK;
}

static int cmp_names(const void *a, const void *b) {
    const st_desc *x = *(const st_desc *const *)a, *y = *(const st_desc *const *)b;
    return strcmp(x->name, y->name);
}

/* model.safetensors.index.json as transformers writes it: indent 2, keys sorted, final newline. */
static qp_status write_index(qp_st_writer *w, qp_err *e) {
    char name[512];
    int nn = snprintf(name, sizeof name, "%s.safetensors.index.json", w->prefix);
    if (nn < 0 || (size_t)nn >= sizeof name) return W_FAIL(w, e, QP_ERR_LIMIT, "%s: prefix too long", w->path);
    char *path = qp_path_join(w->path, name);
    const st_desc **order = qp_calloc(w->n_t ? (size_t)w->n_t : 1, sizeof *order);
    if (!path || !order) {
        qp_free(path);
        qp_free(order);
        return W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    }
    for (int64_t i = 0; i < w->n_t; i++) order[i] = &w->t[i];
    qsort(order, (size_t)w->n_t, sizeof *order, cmp_names);
    qp_buf b = {0};
    qp_buf_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                  (unsigned long long)w->total);
    for (int64_t i = 0; i < w->n_t; i++) {
        qp_buf_str(&b, i ? ",\n    " : "\n    ");
        qp_buf_json_str(&b, order[i]->name, strlen(order[i]->name));
        qp_buf_str(&b, ": ");
        const char *sp = w->shard_paths[order[i]->shard];
        const char *base = strrchr(sp, '/');
        base = base ? base + 1 : sp;
        qp_buf_json_str(&b, base, strlen(base));
    }
    qp_buf_str(&b, w->n_t ? "\n  }\n}\n" : "}\n}\n");
    qp_free(order);
    qp_status s;
    if (b.oom) {
        s = W_FAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", path);
    } else {
        qp_err tmp;
        qp_err_clear(&tmp);
        s = qp_file_write_atomic(path, b.p, b.len, &tmp);
        if (s != QP_OK) s = w_take(w, e, &tmp);
    }
    qp_buf_free(&b);
    qp_free(path);
    return s;
}

qp_status qp_st_writer_finish(qp_st_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "safetensors writer: NULL");
    qp_status s = check_writing(w, e);
    if (s == QP_OK) {
        while (w->cur < w->n_t && w->filled == w->t[w->cur].nbytes) {
            w->cur++;
            w->filled = 0;
        }
        if (w->cur < w->n_t)
            s = W_FAIL(w, e, QP_ERR_ARG, "%s: tensor '%s' not written in full (%llu of %llu bytes)",
                       w->path, w->t[w->cur].name, (unsigned long long)w->filled,
                       (unsigned long long)w->t[w->cur].nbytes);
    }
    for (int k = 0; s == QP_OK && k < w->n_shards; k++) s = open_shard(w, k, e);
    /* Commit every shard; on a failure remove the ones already renamed. */
    int committed = 0;
    for (int k = 0; s == QP_OK && k < w->n_shards; k++) {
        qp_err tmp;
        qp_err_clear(&tmp);
        qp_outfile *f = w->files[k];
        w->files[k] = NULL;
        if (qp_outfile_commit(f, &tmp) != QP_OK) s = w_take(w, e, &tmp);
        else committed++;
    }
    if (s == QP_OK && w->max_shard && w->n_shards > 1) s = write_index(w, e);
    if (s != QP_OK)
        for (int k = 0; k < committed; k++)
            if (qp_path_remove_tree(w->shard_paths[k], NULL) != QP_OK)
                qp_err_prefix(e, "%s is left behind after: ", w->shard_paths[k]);
    qp_st_writer_abort(w);
    return s;
}

void qp_st_writer_abort(qp_st_writer *w) {
    if (!w) return;
    for (int k = 0; w->files && k < w->n_shards; k++) qp_outfile_abort(w->files[k]);
    for (int k = 0; w->shard_paths && k < w->n_shards; k++) qp_free(w->shard_paths[k]);
    qp_free(w->files);
    qp_free(w->shard_paths);
    for (int64_t i = 0; i < w->n_t; i++) {
        qp_free(w->t[i].name);
        qp_free(w->t[i].dtype);
    }
    for (int64_t i = 0; i < w->n_m; i++) {
        qp_free(w->m[i].key);
        qp_free(w->m[i].value);
    }
    qp_free(w->t);
    qp_free(w->m);
    qp_strmap_free(&w->names);
    qp_strmap_free(&w->keys);
    qp_free(w->path);
    qp_free(w->prefix);
    qp_free(w);
}
