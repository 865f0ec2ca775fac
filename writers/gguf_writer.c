/* Streaming GGUF v3 writer (writers/gguf_writer.md). Key/values and tensor infos are serialized
 * into memory as they are added; begin() writes them behind the header, then tensor data is
 * streamed through a qp_outfile (temporary file renamed on success). */
#include <string.h>

#include "core/buf.h"
#include "core/sticky.h"
#include "core/strmap.h"
#include "writers/gguf_writer.h"

typedef struct tinfo {
    uint64_t nbytes;
    uint64_t offset; /* relative to the data section */
    char *name;
} tinfo;

enum { ST_DECLARE = 0, ST_DATA, ST_DONE };

struct qp_gguf_writer {
    char *path;
    qp_outfile *out;
    qp_err err; /* first failure */
    int state;
    qp_buf kv, ti;
    int64_t n_kv;
    char **keys; /* owned copies (the strmap borrows them) */
    size_t cap_keys;
    qp_strmap key_map, name_map;
    tinfo *t;
    int64_t n_t, cap_t;
    uint64_t data_size; /* running sum of padded sizes */
    size_t alignment;
    int64_t cur;         /* tensor being written */
    uint64_t cur_written;
};

static const size_t k_elem_size[QP_META_TYPE_COUNT] = {
    [QP_META_U8] = 1, [QP_META_I8] = 1, [QP_META_U16] = 2, [QP_META_I16] = 2, [QP_META_U32] = 4,
    [QP_META_I32] = 4, [QP_META_F32] = 4, [QP_META_BOOL] = 1, [QP_META_STRING] = 0,
    [QP_META_ARRAY] = 0, [QP_META_U64] = 8, [QP_META_I64] = 8, [QP_META_F64] = 8,
};

/* The first failure sticks in w->err (core/sticky.h); every later call returns it. */
static qp_status werr(qp_gguf_writer *w, qp_err *e) { return qp_sticky_check(&w->err, e); }
#define WFAIL(w, e, st, ...) qp_sticky_fail(&(w)->err, (e), (st), __VA_ARGS__)

/* A GGUF string: u64 length, then the bytes. */
static bool wb_str(qp_buf *b, const char *s, size_t n) {
    return qp_buf_u64le(b, n) && qp_buf_put(b, s, n);
}

qp_status qp_gguf_writer_new(const char *path, qp_gguf_writer **out, qp_err *e) {
    if (!path || !*path || !out) return qp_fail(e, QP_ERR_ARG, "qp_gguf_writer_new: no path");
    qp_gguf_writer *w = qp_calloc(1, sizeof *w);
    if (!w) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    w->path = qp_strdup(path);
    if (!w->path) {
        qp_free(w);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    w->alignment = QP_GGUF_DEFAULT_ALIGNMENT;
    w->cur = -1;
    *out = w;
    return QP_OK;
}

static void writer_free(qp_gguf_writer *w) {
    if (!w) return;
    qp_outfile_abort(w->out);
    for (int64_t i = 0; i < w->n_kv; i++) qp_free(w->keys[i]);
    qp_free(w->keys);
    for (int64_t i = 0; i < w->n_t; i++) qp_free(w->t[i].name);
    qp_free(w->t);
    qp_strmap_free(&w->key_map);
    qp_strmap_free(&w->name_map);
    qp_buf_free(&w->kv);
    qp_buf_free(&w->ti);
    qp_free(w->path);
    qp_free(w);
}

void qp_gguf_writer_abort(qp_gguf_writer *w) { writer_free(w); }

static qp_status check_declaring(qp_gguf_writer *w, const char *what, qp_err *e) {
    if (w->err.status != QP_OK) return werr(w, e);
    if (w->state != ST_DECLARE)
        return WFAIL(w, e, QP_ERR_ARG, "%s: %s after the header was written", w->path, what);
    return QP_OK;
}

/* Registers key (copied) and writes its string into the kv buffer. */
static qp_status begin_kv(qp_gguf_writer *w, const char *key, qp_meta_type type, qp_err *e) {
    qp_status s = check_declaring(w, "key/value", e);
    if (s != QP_OK) return s;
    if (!key || !*key) return WFAIL(w, e, QP_ERR_ARG, "%s: empty metadata key", w->path);
    size_t klen = strlen(key);
    if ((size_t)w->n_kv >= w->cap_keys) {
        size_t cap = w->cap_keys ? w->cap_keys * 2 : 64;
        char **k = qp_realloc(w->keys, cap * sizeof *k);
        if (!k) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        w->keys = k;
        w->cap_keys = cap;
    }
    char *copy = qp_strdup(key);
    if (!copy) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    bool added = false;
    qp_status ps = qp_strmap_put(&w->key_map, copy, klen, w->n_kv, &added);
    if (!added) {
        qp_free(copy);
        if (ps != QP_OK) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        return WFAIL(w, e, QP_ERR_ARG, "%s: duplicate metadata key '%s'", w->path, key);
    }
    w->keys[w->n_kv++] = copy;
    if (!wb_str(&w->kv, key, klen) || !qp_buf_u32le(&w->kv, (uint32_t)type))
        return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    return QP_OK;
}

static qp_status kv_bytes(qp_gguf_writer *w, const void *p, size_t n, qp_err *e) {
    if (!qp_buf_put(&w->kv, p, n)) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    return QP_OK;
}

static qp_status scalar(qp_gguf_writer *w, const char *key, qp_meta_type t, const uint8_t *le,
                        qp_err *e) {
    qp_status s = begin_kv(w, key, t, e);
    return s != QP_OK ? s : kv_bytes(w, le, k_elem_size[t], e);
}

qp_status qp_gguf_writer_add_u32(qp_gguf_writer *w, const char *key, uint32_t v, qp_err *e) {
    uint8_t b[4];
    qp_store_u32le(b, v);
    if (key && strcmp(key, "general.alignment") == 0) {
        if (v == 0 || (v & (v - 1)) != 0)
            return WFAIL(w, e, QP_ERR_ARG, "%s: general.alignment %u is not a power of two",
                         w->path, v);
        if (w->n_t > 0)
            return WFAIL(w, e, QP_ERR_ARG, "%s: general.alignment must come before the tensors",
                         w->path);
    }
    qp_status s = scalar(w, key, QP_META_U32, b, e);
    if (s == QP_OK && strcmp(key, "general.alignment") == 0) w->alignment = v;
    return s;
}
qp_status qp_gguf_writer_add_i32(qp_gguf_writer *w, const char *key, int32_t v, qp_err *e) {
    uint8_t b[4];
    qp_store_u32le(b, (uint32_t)v);
    return scalar(w, key, QP_META_I32, b, e);
}
qp_status qp_gguf_writer_add_f32(qp_gguf_writer *w, const char *key, float v, qp_err *e) {
    uint8_t b[4];
    qp_store_f32le(b, v);
    return scalar(w, key, QP_META_F32, b, e);
}
qp_status qp_gguf_writer_add_bool(qp_gguf_writer *w, const char *key, bool v, qp_err *e) {
    uint8_t b[1] = {v ? 1 : 0};
    return scalar(w, key, QP_META_BOOL, b, e);
}
qp_status qp_gguf_writer_add_str(qp_gguf_writer *w, const char *key, const char *str, size_t len,
                                 qp_err *e) {
    if (!str && len) return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': NULL string", w->path, key);
    qp_status s = begin_kv(w, key, QP_META_STRING, e);
    if (s != QP_OK) return s;
    if (!wb_str(&w->kv, str ? str : "", len))
        return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    return QP_OK;
}

static qp_status array_head(qp_gguf_writer *w, const char *key, qp_meta_type et, uint64_t n,
                            qp_err *e) {
    if ((unsigned)et >= QP_META_TYPE_COUNT || et == QP_META_ARRAY)
        return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': array element type %d is not allowed",
                     w->path, key ? key : "", (int)et);
    qp_status s = begin_kv(w, key, QP_META_ARRAY, e);
    if (s != QP_OK) return s;
    if (!qp_buf_u32le(&w->kv, (uint32_t)et) || !qp_buf_u64le(&w->kv, n))
        return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    return QP_OK;
}

qp_status qp_gguf_writer_add_array(qp_gguf_writer *w, const char *key, qp_meta_type et, uint64_t n,
                                   const void *le, qp_err *e) {
    if (et == QP_META_STRING)
        return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': use add_str_array for strings", w->path,
                     key ? key : "");
    size_t bytes = 0;
    if ((unsigned)et < QP_META_TYPE_COUNT && et != QP_META_ARRAY &&
        (n > SIZE_MAX || !qp_size_mul((size_t)n, k_elem_size[et], &bytes)))
        return WFAIL(w, e, QP_ERR_LIMIT, "%s: key '%s': array of %llu elements is too large",
                     w->path, key ? key : "", (unsigned long long)n);
    qp_status s = array_head(w, key, et, n, e);
    if (s != QP_OK) return s;
    if (bytes && !le) return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': NULL array", w->path, key);
    return kv_bytes(w, le, bytes, e);
}

qp_status qp_gguf_writer_add_str_array(qp_gguf_writer *w, const char *key, char *const *strs,
                                       const uint32_t *lens, uint64_t n, qp_err *e) {
    if (n && !strs) return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': NULL array", w->path, key);
    qp_status s = array_head(w, key, QP_META_STRING, n, e);
    if (s != QP_OK) return s;
    for (uint64_t i = 0; i < n; i++) {
        const char *p = strs[i] ? strs[i] : "";
        size_t len = lens ? lens[i] : strlen(p);
        if (!wb_str(&w->kv, p, len)) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    }
    return QP_OK;
}

/* Checks that raw holds exactly n GGUF strings. */
static bool raw_strings_ok(const uint8_t *raw, size_t size, uint64_t n) {
    size_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (size - pos < 8) return false;
        uint64_t len = qp_load_u64le(raw + pos);
        pos += 8;
        if (len > size - pos) return false;
        pos += (size_t)len;
    }
    return pos == size;
}

qp_status qp_gguf_writer_add_meta(qp_gguf_writer *w, const qp_meta *m, qp_err *e) {
    if (!m || !m->key) return WFAIL(w, e, QP_ERR_ARG, "%s: NULL metadata entry", w->path);
    uint8_t b[8];
    switch (m->type) {
    case QP_META_U8: case QP_META_I8: case QP_META_BOOL:
        b[0] = m->type == QP_META_BOOL ? (uint8_t)(m->v.b ? 1 : 0)
               : m->type == QP_META_U8 ? (uint8_t)m->v.u : (uint8_t)(int8_t)m->v.i;
        return scalar(w, m->key, m->type, b, e);
    case QP_META_U16: qp_store_u16le(b, (uint16_t)m->v.u); return scalar(w, m->key, m->type, b, e);
    case QP_META_I16:
        qp_store_u16le(b, (uint16_t)(int16_t)m->v.i);
        return scalar(w, m->key, m->type, b, e);
    case QP_META_U32: return qp_gguf_writer_add_u32(w, m->key, (uint32_t)m->v.u, e);
    case QP_META_I32: return qp_gguf_writer_add_i32(w, m->key, (int32_t)m->v.i, e);
    case QP_META_F32: return qp_gguf_writer_add_f32(w, m->key, (float)m->v.f, e);
    case QP_META_U64: qp_store_u64le(b, m->v.u); return scalar(w, m->key, m->type, b, e);
    case QP_META_I64: qp_store_u64le(b, (uint64_t)m->v.i); return scalar(w, m->key, m->type, b, e);
    case QP_META_F64: {
        uint64_t u;
        double d = m->v.f;
        memcpy(&u, &d, 8);
        qp_store_u64le(b, u);
        return scalar(w, m->key, m->type, b, e);
    }
    case QP_META_STRING: return qp_gguf_writer_add_str(w, m->key, m->str, (size_t)m->str_len, e);
    case QP_META_ARRAY: {
        if ((unsigned)m->arr_type >= QP_META_TYPE_COUNT || m->arr_type == QP_META_ARRAY)
            return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': array element type %d is not allowed",
                         w->path, m->key, (int)m->arr_type);
        if (m->raw_size && !m->raw)
            return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': NULL array bytes", w->path, m->key);
        if (m->arr_type == QP_META_STRING) {
            if (!raw_strings_ok(m->raw, m->raw_size, m->n))
                return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': %zu raw bytes are not %llu GGUF "
                             "strings", w->path, m->key, m->raw_size, (unsigned long long)m->n);
        } else {
            size_t need;
            if (m->n > SIZE_MAX || !qp_size_mul((size_t)m->n, k_elem_size[m->arr_type], &need) ||
                need != m->raw_size)
                return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': %zu raw bytes for %llu elements",
                             w->path, m->key, m->raw_size, (unsigned long long)m->n);
        }
        qp_status s = array_head(w, m->key, m->arr_type, m->n, e);
        return s != QP_OK ? s : kv_bytes(w, m->raw, m->raw_size, e);
    }
    default:
        return WFAIL(w, e, QP_ERR_ARG, "%s: key '%s': unknown value type %d", w->path, m->key,
                     (int)m->type);
    }
}

bool qp_gguf_writer_has_key(const qp_gguf_writer *w, const char *key) {
    int64_t v;
    return w && key && qp_strmap_get(&w->key_map, key, strlen(key), &v);
}

qp_status qp_gguf_writer_add_tensor_sized(qp_gguf_writer *w, const char *name, int ggml_type,
                                          int n_dims, const int64_t *ne, size_t nbytes, qp_err *e) {
    qp_status s = check_declaring(w, "tensor info", e);
    if (s != QP_OK) return s;
    size_t nlen = name ? strlen(name) : 0;
    if (nlen == 0 || nlen > QP_GGUF_MAX_NAME)
        return WFAIL(w, e, QP_ERR_LIMIT, "%s: tensor name '%s' must be 1..%d bytes", w->path,
                     name ? name : "", QP_GGUF_MAX_NAME);
    if (n_dims < 1 || n_dims > QP_MAX_DIMS || !ne)
        return WFAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': %d dimensions (1..%d allowed)", w->path,
                     name, n_dims, QP_MAX_DIMS);
    if (ggml_type < 0)
        return WFAIL(w, e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding has no GGUF type id",
                     w->path, name);
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 0)
            return WFAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': ne[%d] = %lld is negative", w->path,
                         name, d, (long long)ne[d]);
    while (n_dims > 1 && ne[n_dims - 1] == 1) n_dims--;
    if (w->n_t >= w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        tinfo *t = qp_realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        w->t = t;
        w->cap_t = cap;
    }
    char *copy = qp_strdup(name);
    if (!copy) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    bool added = false;
    qp_status ps = qp_strmap_put(&w->name_map, copy, nlen, w->n_t, &added);
    if (!added) {
        qp_free(copy);
        if (ps != QP_OK) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
        return WFAIL(w, e, QP_ERR_ARG, "%s: duplicate tensor name '%s'", w->path, name);
    }
    tinfo *t = &w->t[w->n_t++];
    t->name = copy;
    t->nbytes = nbytes;
    t->offset = w->data_size;
    size_t padded;
    if (!qp_size_align(nbytes, w->alignment, &padded) ||
        w->data_size > UINT64_MAX - (uint64_t)padded)
        return WFAIL(w, e, QP_ERR_LIMIT, "%s: tensor '%s': data section size overflows", w->path,
                     name);
    w->data_size += padded;
    bool ok = wb_str(&w->ti, name, nlen) && qp_buf_u32le(&w->ti, (uint32_t)n_dims);
    for (int d = 0; ok && d < n_dims; d++) ok = qp_buf_u64le(&w->ti, (uint64_t)ne[d]);
    ok = ok && qp_buf_u32le(&w->ti, (uint32_t)ggml_type) && qp_buf_u64le(&w->ti, t->offset);
    if (!ok) return WFAIL(w, e, QP_ERR_NOMEM, "%s: out of memory", w->path);
    return QP_OK;
}

qp_status qp_gguf_writer_add_tensor(qp_gguf_writer *w, const char *name, qp_encoding enc,
                                    int n_dims, const int64_t *ne, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    if (!tr || tr->ggml_type < 0)
        return WFAIL(w, e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding %s has no GGUF type id",
                     w->path, name ? name : "", tr ? tr->upper_name : "?");
    if (n_dims < 1 || n_dims > QP_MAX_DIMS || !ne)
        return WFAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': %d dimensions (1..%d allowed)", w->path,
                     name ? name : "", n_dims, QP_MAX_DIMS);
    int64_t total = 1;
    for (int d = 0; d < n_dims; d++)
        if (ne[d] < 0 || !qp_i64_mul(total, ne[d], &total))
            return WFAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': bad shape (ne[%d] = %lld)", w->path,
                         name ? name : "", d, (long long)ne[d]);
    int64_t blocked = tr->tensor_trailer_bytes ? total : ne[0];
    if (blocked % tr->block_elems != 0)
        return WFAIL(w, e, QP_ERR_ARG, "%s: tensor '%s': %lld is not a multiple of the %s block "
                     "size %lld", w->path, name ? name : "", (long long)blocked, tr->upper_name,
                     (long long)tr->block_elems);
    size_t nbytes;
    if (!qp_encoding_tensor_bytes(enc, total, &nbytes))
        return WFAIL(w, e, QP_ERR_LIMIT, "%s: tensor '%s': byte size overflows", w->path,
                     name ? name : "");
    return qp_gguf_writer_add_tensor_sized(w, name, tr->ggml_type, n_dims, ne, nbytes, e);
}

int64_t qp_gguf_writer_n_tensors(const qp_gguf_writer *w) { return w ? w->n_t : 0; }

static uint64_t meta_size(const qp_gguf_writer *w) {
    uint64_t head = 24 + (uint64_t)w->kv.len + (uint64_t)w->ti.len;
    uint64_t a = w->alignment;
    return (head + a - 1) / a * a;
}

uint64_t qp_gguf_writer_file_size(const qp_gguf_writer *w) {
    if (!w) return 0;
    return meta_size(w) + w->data_size; /* valid until begin() */
}

qp_status qp_gguf_writer_begin(qp_gguf_writer *w, qp_err *e) {
    qp_status s = check_declaring(w, "begin", e);
    if (s != QP_OK) return s;
    s = qp_outfile_open(w->path, &w->out, &w->err);
    if (s != QP_OK) return werr(w, e);
    uint8_t h[24];
    memcpy(h, "GGUF", 4);
    qp_store_u32le(h + 4, QP_GGUF_VERSION);
    qp_store_u64le(h + 8, (uint64_t)w->n_t);
    qp_store_u64le(h + 16, (uint64_t)w->n_kv);
    if (qp_outfile_write(w->out, h, sizeof h, &w->err) != QP_OK ||
        qp_outfile_write(w->out, w->kv.p, w->kv.len, &w->err) != QP_OK ||
        qp_outfile_write(w->out, w->ti.p, w->ti.len, &w->err) != QP_OK)
        return werr(w, e);
    /* llama.cpp pads the meta data to the alignment even when there are no tensors */
    if (qp_outfile_pad(w->out, w->alignment, &w->err) != QP_OK) return werr(w, e);
    qp_buf_free(&w->kv);
    qp_buf_free(&w->ti);
    memset(&w->kv, 0, sizeof w->kv);
    memset(&w->ti, 0, sizeof w->ti);
    w->state = ST_DATA;
    w->cur = 0;
    w->cur_written = 0;
    return QP_OK;
}

qp_status qp_gguf_writer_write(qp_gguf_writer *w, const void *data, size_t n, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "qp_gguf_writer_write: no writer");
    if (w->err.status != QP_OK) return werr(w, e);
    if (w->state != ST_DATA || w->cur >= w->n_t)
        return WFAIL(w, e, QP_ERR_ARG, "%s: tensor data written with no tensor pending", w->path);
    tinfo *t = &w->t[w->cur];
    if ((uint64_t)n > t->nbytes - w->cur_written)
        return WFAIL(w, e, QP_ERR_INTERNAL, "%s: tensor '%s': %llu bytes written, more than its "
                     "%llu", w->path, t->name, (unsigned long long)(w->cur_written + n),
                     (unsigned long long)t->nbytes);
    if (qp_outfile_write(w->out, data, n, &w->err) != QP_OK) return werr(w, e);
    w->cur_written += n;
    return QP_OK;
}

qp_status qp_gguf_writer_end_tensor(qp_gguf_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "qp_gguf_writer_end_tensor: no writer");
    if (w->err.status != QP_OK) return werr(w, e);
    if (w->state != ST_DATA || w->cur >= w->n_t)
        return WFAIL(w, e, QP_ERR_ARG, "%s: end of tensor with no tensor pending", w->path);
    tinfo *t = &w->t[w->cur];
    if (w->cur_written != t->nbytes)
        return WFAIL(w, e, QP_ERR_INTERNAL, "%s: tensor '%s': %llu of %llu bytes written",
                     w->path, t->name, (unsigned long long)w->cur_written,
                     (unsigned long long)t->nbytes);
    if (qp_outfile_pad(w->out, w->alignment, &w->err) != QP_OK) return werr(w, e);
    w->cur++;
    w->cur_written = 0;
    return QP_OK;
}

qp_status qp_gguf_writer_write_tensor(qp_gguf_writer *w, const void *data, size_t n, qp_err *e) {
    qp_status s = qp_gguf_writer_write(w, data, n, e);
    return s != QP_OK ? s : qp_gguf_writer_end_tensor(w, e);
}

qp_status qp_gguf_writer_finish(qp_gguf_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "qp_gguf_writer_finish: no writer");
    qp_status s = QP_OK;
    if (w->err.status == QP_OK && w->state == ST_DECLARE) s = qp_gguf_writer_begin(w, e);
    if (s == QP_OK && w->err.status == QP_OK && w->cur != w->n_t)
        qp_fail(&w->err, QP_ERR_INTERNAL, "%s: %lld of %lld tensors written", w->path,
                (long long)w->cur, (long long)w->n_t);
    if (w->err.status != QP_OK) {
        s = werr(w, e);
        writer_free(w);
        return s;
    }
    qp_outfile *out = w->out;
    w->out = NULL;
    s = qp_outfile_commit(out, e);
    w->state = ST_DONE;
    writer_free(w);
    return s;
}
