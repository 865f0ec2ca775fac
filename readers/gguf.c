/* GGUF v2/v3 reader: header, metadata, tensor infos and data offsets, every count and size
 * checked against the bytes remaining before anything is allocated. Layout, limits and the
 * status each check returns: readers/gguf.md. Metadata -> qp_arch / qp_vocab: gguf_meta.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model_internal.h"
#include "readers/gguf_meta.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_NAME 64 /* llama.cpp GGML_MAX_NAME: names are at most 63 bytes */
/* Smallest possible encodings, used to bound untrusted counts by the bytes remaining. */
#define GGUF_MIN_KV_BYTES 13u     /* u64 key length + i32 type + 1-byte value */
#define GGUF_MIN_TINFO_BYTES 24u  /* u64 name length + u32 n_dims + i32 type + u64 offset */

typedef struct gguf_reader {
    qp_model *m;
    const char *path;
    qp_cursor c;
    qp_err *e;
} gguf_reader;

static const size_t k_value_size[QP_META_TYPE_COUNT] = {
    [QP_META_U8] = 1, [QP_META_I8] = 1, [QP_META_U16] = 2, [QP_META_I16] = 2, [QP_META_U32] = 4,
    [QP_META_I32] = 4, [QP_META_F32] = 4, [QP_META_BOOL] = 1, [QP_META_STRING] = 0,
    [QP_META_ARRAY] = 0, [QP_META_U64] = 8, [QP_META_I64] = 8, [QP_META_F64] = 8,
};

static qp_status truncated(gguf_reader *r, size_t at, const char *what) {
    return qp_fail(r->e, QP_ERR_CORRUPT, "%s: truncated at offset %zu: %s needs more bytes than the "
                   "%zu-byte file has", r->path, at, what, r->c.size);
}

/* A GGUF string: u64 length + bytes. *s borrows from the mapping. */
static qp_status read_str(gguf_reader *r, const char *what, const uint8_t **s, uint64_t *len) {
    size_t at = r->c.pos;
    uint64_t n;
    if (!qp_cursor_u64(&r->c, &n)) return truncated(r, at, what);
    if (n > qp_cursor_left(&r->c)) {
        r->c.pos = at;
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: %s at offset %zu: length %llu exceeds the %zu bytes "
                       "remaining", r->path, what, at, (unsigned long long)n, qp_cursor_left(&r->c) - 8);
    }
    qp_cursor_take(&r->c, (size_t)n, s);
    *len = n;
    return QP_OK;
}

static qp_status read_scalar(gguf_reader *r, qp_meta *md, qp_meta_type t, size_t at) {
    const uint8_t *p;
    if (!qp_cursor_take(&r->c, k_value_size[t], &p))
        return truncated(r, at, md->key);
    switch (t) {
    case QP_META_U8: md->v.u = p[0]; break;
    case QP_META_I8: md->v.i = (int8_t)p[0]; break;
    case QP_META_U16: md->v.u = qp_load_u16le(p); break;
    case QP_META_I16: md->v.i = (int16_t)qp_load_u16le(p); break;
    case QP_META_U32: md->v.u = qp_load_u32le(p); break;
    case QP_META_I32: md->v.i = (int32_t)qp_load_u32le(p); break;
    case QP_META_F32: md->v.f = qp_load_f32le(p); break;
    case QP_META_BOOL: md->v.b = p[0] != 0; break;
    case QP_META_U64: md->v.u = qp_load_u64le(p); break;
    case QP_META_I64: md->v.i = (int64_t)qp_load_u64le(p); break;
    case QP_META_F64: md->v.f = qp_load_f64le(p); break;
    default: return qp_fail(r->e, QP_ERR_INTERNAL, "%s: key '%s': not a scalar type", r->path, md->key);
    }
    return QP_OK;
}

static qp_status read_array(gguf_reader *r, qp_meta *md, size_t at) {
    int32_t et;
    uint64_t n;
    size_t et_at = r->c.pos;
    if (!qp_cursor_i32(&r->c, &et)) return truncated(r, et_at, "array element type");
    if (et == QP_META_ARRAY)
        return qp_fail(r->e, QP_ERR_UNSUPPORTED, "%s: key '%s' at offset %zu: nested arrays are not "
                       "supported (llama.cpp rejects them)", r->path, md->key, at);
    if (et < 0 || et >= QP_META_TYPE_COUNT)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: key '%s' at offset %zu: unknown array element type "
                       "%d", r->path, md->key, et_at, (int)et);
    size_t n_at = r->c.pos;
    if (!qp_cursor_u64(&r->c, &n)) return truncated(r, n_at, "array count");
    md->type = QP_META_ARRAY;
    md->arr_type = (qp_meta_type)et;
    md->n = n;
    md->raw = r->c.base + r->c.pos;
    size_t left = qp_cursor_left(&r->c);
    if (et != QP_META_STRING) {
        size_t es = k_value_size[et];
        if (n > left / es)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: key '%s' at offset %zu: array of %llu elements "
                           "of %zu bytes exceeds the %zu bytes remaining", r->path, md->key, n_at,
                           (unsigned long long)n, es, left);
        md->raw_size = (size_t)n * es;
        qp_cursor_skip(&r->c, md->raw_size);
        return QP_OK;
    }
    if (n > left / 8)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: key '%s' at offset %zu: array of %llu strings "
                       "exceeds the %zu bytes remaining", r->path, md->key, n_at,
                       (unsigned long long)n, left);
    size_t start = r->c.pos;
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *s;
        uint64_t len;
        qp_status st = read_str(r, md->key, &s, &len);
        if (st != QP_OK) {
            qp_err_prefix(r->e, "array element %llu: ", (unsigned long long)i);
            return st;
        }
    }
    md->raw_size = r->c.pos - start;
    return QP_OK;
}

static qp_status read_kv(gguf_reader *r, int64_t index) {
    size_t at = r->c.pos;
    const uint8_t *key = NULL;
    uint64_t key_len = 0;
    qp_status st = read_str(r, "metadata key", &key, &key_len);
    if (st != QP_OK) {
        qp_err_prefix(r->e, "key %lld: ", (long long)index);
        return st;
    }
    if (key_len == 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: key %lld at offset %zu is empty", r->path,
                       (long long)index, at);
    qp_meta *md;
    st = qp_model_add_meta(r->m, (const char *)key, (size_t)key_len, &md, r->e);
    if (st != QP_OK) {
        qp_err_prefix(r->e, "at offset %zu: ", at);
        return st;
    }
    int32_t t;
    size_t t_at = r->c.pos;
    if (!qp_cursor_i32(&r->c, &t)) return truncated(r, t_at, "value type");
    if (t < 0 || t >= QP_META_TYPE_COUNT)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: key '%s' at offset %zu: unknown value type %d",
                       r->path, md->key, t_at, (int)t);
    md->type = (qp_meta_type)t;
    size_t v_at = r->c.pos;
    if (t == QP_META_STRING) {
        const uint8_t *s = NULL;
        uint64_t len = 0;
        st = read_str(r, md->key, &s, &len);
        if (st != QP_OK) return st;
        md->str = qp_arena_strndup(qp_model_arena(r->m), (const char *)s, (size_t)len);
        if (!md->str) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
        md->str_len = len;
        return QP_OK;
    }
    if (t == QP_META_ARRAY) return read_array(r, md, v_at);
    return read_scalar(r, md, (qp_meta_type)t, v_at);
}

typedef struct span {
    uint64_t start, end;
    int64_t index;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static qp_status read_tensor_info(gguf_reader *r, int64_t index) {
    size_t at = r->c.pos;
    const uint8_t *name = NULL;
    uint64_t name_len = 0;
    qp_status st = read_str(r, "tensor name", &name, &name_len);
    if (st != QP_OK) {
        qp_err_prefix(r->e, "tensor %lld: ", (long long)index);
        return st;
    }
    if (name_len >= GGUF_MAX_NAME)
        return qp_fail(r->e, QP_ERR_LIMIT, "%s: tensor %lld at offset %zu: name of %llu bytes '%.40s...' "
                       "(llama.cpp allows at most %d)", r->path, (long long)index, at,
                       (unsigned long long)name_len, (const char *)name, GGUF_MAX_NAME - 1);
    /* tensor names are embedded NUL-free in practice; a NUL would make two names collide */
    if (memchr(name, 0, (size_t)name_len))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor %lld at offset %zu: name contains a NUL byte",
                       r->path, (long long)index, at);
    qp_tensor *t;
    st = qp_model_add_tensor(r->m, (const char *)name, (size_t)name_len, &t, r->e);
    if (st != QP_OK) {
        qp_err_prefix(r->e, "at offset %zu: ", at);
        return st;
    }
    uint32_t n_dims;
    size_t d_at = r->c.pos;
    if (!qp_cursor_u32(&r->c, &n_dims)) return truncated(r, d_at, "tensor n_dims");
    if (n_dims > QP_MAX_DIMS)
        return qp_fail(r->e, QP_ERR_LIMIT, "%s: tensor '%s' at offset %zu: %u dimensions (GGUF allows "
                       "at most %d)", r->path, t->name, d_at, n_dims, QP_MAX_DIMS);
    int64_t total = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        size_t ne_at = r->c.pos;
        int64_t ne;
        if (!qp_cursor_i64(&r->c, &ne)) return truncated(r, ne_at, "tensor ne");
        if (ne < 0)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: ne[%u] = %lld is "
                           "negative", r->path, t->name, ne_at, d, (long long)ne);
        if (!qp_i64_mul(total, ne, &total))
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: element count "
                           "overflows at ne[%u] = %lld", r->path, t->name, ne_at, d, (long long)ne);
        t->ne[d] = ne;
    }
    t->n_dims = (int)n_dims;
    int32_t type;
    size_t ty_at = r->c.pos;
    if (!qp_cursor_i32(&r->c, &type)) return truncated(r, ty_at, "tensor type");
    qp_encoding enc = qp_encoding_from_ggml_type(type);
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    if (!tr)
        return qp_fail(r->e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' at offset %zu: GGUF type id %d is "
                       "not a known type", r->path, t->name, ty_at, (int)type);
    t->enc = enc;
    /* GGUF type 36 is I2_S in microsoft/BitNet's fork and QK256 / BitNet32F16 / Split32 in
     * BitNet-rs: its layout, block rule and byte size are settled by resolve_i2s_flavours once
     * every key and tensor info is read. */
    if (enc == QP_ENC_I2_S) {
        t->nbytes = 0;
        size_t off_at = r->c.pos;
        if (!qp_cursor_u64(&r->c, &t->offset)) return truncated(r, off_at, "tensor offset");
        return QP_OK;
    }
    /* Row-blocked types need whole blocks per row; types with a per-tensor trailer (I2_S) are
     * packed over the flattened tensor, so only the total must be whole blocks. */
    int64_t blocked = tr->tensor_trailer_bytes ? total : t->ne[0];
    if (blocked % tr->block_elems != 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: %s %lld is not a multiple "
                       "of the %s block size %lld", r->path, t->name, ty_at,
                       tr->tensor_trailer_bytes ? "element count" : "ne[0]", (long long)blocked,
                       tr->upper_name, (long long)tr->block_elems);
    if (!qp_encoding_tensor_bytes(enc, total, &t->nbytes))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: byte size of %lld %s "
                       "elements overflows", r->path, t->name, ty_at, (long long)total, tr->upper_name);
    size_t off_at = r->c.pos;
    if (!qp_cursor_u64(&r->c, &t->offset)) return truncated(r, off_at, "tensor offset");
    return QP_OK;
}

/* Places tensor data: alignment, bounds, overlaps, llama.cpp's running-sum order. */
static qp_status place_tensors(gguf_reader *r, size_t infos_end, size_t alignment) {
    qp_model *m = r->m;
    size_t size = r->c.size;
    size_t data_start;
    if (!qp_size_align(infos_end, alignment, &data_start))
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: data section offset overflows", r->path);
    if (m->n_tensors == 0) return QP_OK;
    if (data_start > size)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: data section at offset %zu (tensor infos end at %zu, "
                       "alignment %zu) starts past the end of the %zu-byte file", r->path, data_start,
                       infos_end, alignment, size);
    uint64_t expect = 0;
    int64_t n_unordered = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        qp_tensor *t = &m->tensors[i];
        uint64_t rel = t->offset;
        if (rel % alignment != 0)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s': data offset %llu is not a multiple "
                           "of the alignment %zu", r->path, t->name, (unsigned long long)rel, alignment);
        size_t end;
        if (rel > size - data_start || !qp_size_add(data_start + (size_t)rel, t->nbytes, &end) ||
            end > size)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu: %zu bytes of data run "
                           "past the end of the %zu-byte file", r->path, t->name,
                           (unsigned long long)rel + data_start, t->nbytes, size);
        t->offset = (uint64_t)data_start + rel;
        t->data = r->c.base + t->offset;
        t->canon = t->name;
        t->file_index = 0;
        if (rel != expect && n_unordered++ == 0)
            qp_model_add_problem(m, "tensor '%s': data offset %llu differs from llama.cpp's running sum "
                                 "%llu (llama.cpp refuses files whose tensors are not packed in "
                                 "tensor-info order)", t->name, (unsigned long long)rel,
                                 (unsigned long long)expect);
        size_t padded;
        if (!qp_size_align(t->nbytes, alignment, &padded) || !qp_size_add((size_t)expect, padded, &padded))
            padded = SIZE_MAX;
        expect = padded;
    }
    if (n_unordered > 1)
        qp_model_add_problem(m, "%lld tensors in all are not at llama.cpp's running-sum offsets",
                             (long long)n_unordered);
    if (n_unordered == 0 && expect > size - data_start)
        qp_model_add_problem(m, "the file ends %llu bytes before the padded end of its data section "
                             "(llama.cpp reads the padding too and refuses the file)",
                             (unsigned long long)(expect - (size - data_start)));
    span *sp = qp_calloc((size_t)m->n_tensors, sizeof *sp);
    if (!sp) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        if (m->tensors[i].nbytes == 0) continue;
        sp[n].start = m->tensors[i].offset;
        sp[n].end = m->tensors[i].offset + m->tensors[i].nbytes;
        sp[n].index = i;
        n++;
    }
    qsort(sp, (size_t)n, sizeof *sp, span_cmp);
    qp_status st = QP_OK;
    for (int64_t i = 1; i < n; i++) {
        if (sp[i].start < sp[i - 1].end) {
            const qp_tensor *a = &m->tensors[sp[i - 1].index], *b = &m->tensors[sp[i].index];
            st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu overlaps tensor '%s' "
                         "(bytes %llu..%llu)", r->path, b->name, (unsigned long long)b->offset, a->name,
                         (unsigned long long)sp[i - 1].start, (unsigned long long)sp[i - 1].end);
            break;
        }
    }
    qp_free(sp);
    return st;
}

static qp_status read_alignment(gguf_reader *r, size_t *out) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    const qp_meta *md = qp_model_meta(r->m, "general.alignment");
    if (!md) return QP_OK;
    if (md->type != QP_META_U32)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: general.alignment has type %d; GGUF requires u32",
                       r->path, (int)md->type);
    if (md->v.u == 0 || (md->v.u & (md->v.u - 1)) != 0)
        return qp_fail(r->e, QP_ERR_CORRUPT, "%s: general.alignment %llu is not a power of two",
                       r->path, (unsigned long long)md->v.u);
    *out = (size_t)md->v.u;
    return QP_OK;
}

/* ---- GGUF type 36: I2_S and its BitNet-rs flavours (readers/gguf.md "Type 36 flavours") -------- */

enum { FL_QK256, FL_MS, FL_B32F16, FL_SPLIT32, FL_COUNT };
static const char *const k_fl_name[FL_COUNT] = {"QK256", "MS I2_S", "BitNet32F16", "Split32"};
static const qp_encoding k_fl_enc[FL_COUNT] = {QP_ENC_QK256, QP_ENC_I2_S, QP_ENC_BITNET32F16,
                                               QP_ENC_SPLIT32};
#define I2S_TOLERANCE 128u /* gguf.md: BitNet-rs's slack tolerated after a tensor */

/* Bytes of tensor t stored as flavour f (the sizes BitNet-rs and microsoft/BitNet compute):
 * QK256 rows * ceil(ne0/256) * 64; MS I2_S ceil(n/128) * 32 + 32; BitNet32F16 ceil(n/32) * 10;
 * Split32 ceil(n/32) * 8. False on overflow. */
static bool fl_need(const qp_tensor *t, int64_t n, int f, size_t *out) {
    qp_encoding enc = k_fl_enc[f];
    if (f == FL_QK256) { /* each row padded to whole blocks */
        size_t rb;
        if (t->ne[0] == 0) { *out = 0; return true; }
        return qp_encoding_padded_row_bytes(enc, t->ne[0], &rb) &&
               qp_size_mul((size_t)(n / t->ne[0]), rb, out);
    }
    /* the flattened tensor padded to whole blocks, then the trailer (MS I2_S: 32 bytes) */
    return qp_encoding_padded_row_bytes(enc, n, out) &&
           qp_size_add(*out, qp_encoding_get(enc)->tensor_trailer_bytes, out);
}

typedef struct off_idx {
    uint64_t off;
    int64_t index;
} off_idx;

static int off_idx_cmp(const void *a, const void *b) {
    const off_idx *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Decides the flavour of every type-36 tensor: by metadata first ('quantpack.i2s.flavour', then
 * general.file_type 40 = microsoft/BitNet I2_S), the bytes the data offsets leave it (up to the
 * next tensor's offset or the end of the file) only checking it; without metadata by those bytes
 * in BitNet-rs's order, recording a problem. Sets enc and nbytes. */
static qp_status resolve_i2s_flavours(gguf_reader *r, size_t infos_end, size_t alignment) {
    qp_model *m = r->m;
    int64_t n36 = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) n36 += m->tensors[i].enc == QP_ENC_I2_S;
    if (n36 == 0) return QP_OK;

    int declared = -1;
    const char *why = NULL;
    const qp_meta *md = qp_model_meta(m, QP_GGUF_I2S_FLAVOUR_KEY);
    if (md) {
        if (md->type != QP_META_STRING)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: metadata '%s' has type %s; a string is "
                           "expected", r->path, QP_GGUF_I2S_FLAVOUR_KEY, qp_gguf_meta_type_name(md->type));
        qp_encoding fe = qp_encoding_from_gguf_flavour(md->str);
        for (int f = 0; f < FL_COUNT; f++)
            if (k_fl_enc[f] == fe) declared = f;
        if (declared < 0)
            return qp_fail(r->e, QP_ERR_UNSUPPORTED, "%s: metadata '%s' = '%.40s' is not a type-36 "
                           "flavour quantpack knows (qk256, i2_s, bitnet32f16, split32)", r->path,
                           QP_GGUF_I2S_FLAVOUR_KEY, md->str);
        why = "metadata '" QP_GGUF_I2S_FLAVOUR_KEY "'";
    } else {
        int64_t ft;
        if (qp_gguf_meta_int(m, "general.file_type", &ft) && ft == 40) {
            declared = FL_MS;
            why = "general.file_type 40 (microsoft/BitNet I2_S)";
        }
    }

    size_t size = r->c.size, data_start;
    if (!qp_size_align(infos_end, alignment, &data_start) || data_start > size)
        data_start = size; /* place_tensors reports it */
    size_t data_len = size - data_start;
    off_idx *ord = qp_calloc((size_t)m->n_tensors, sizeof *ord);
    if (!ord) return qp_fail(r->e, QP_ERR_NOMEM, "%s: out of memory", r->path);
    for (int64_t i = 0; i < m->n_tensors; i++) ord[i] = (off_idx){m->tensors[i].offset, i};
    qsort(ord, (size_t)m->n_tensors, sizeof *ord, off_idx_cmp);

    qp_status st = QP_OK;
    int64_t n_inferred = 0;
    for (int64_t k = 0; k < m->n_tensors && st == QP_OK; k++) {
        qp_tensor *t = &m->tensors[ord[k].index];
        if (t->enc != QP_ENC_I2_S) continue;
        int64_t n = qp_tensor_nelements(t);
        size_t need[FL_COUNT];
        for (int f = 0; f < FL_COUNT; f++)
            if (!fl_need(t, n, f, &need[f])) {
                st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s': byte size of %lld type-36 "
                             "elements overflows", r->path, t->name, (long long)n);
                break;
            }
        if (st != QP_OK) break;
        /* bytes up to the next tensor that starts later, or to the end of the file */
        uint64_t end = data_len;
        for (int64_t j = k + 1; j < m->n_tensors; j++)
            if (ord[j].off > t->offset) {
                end = ord[j].off;
                break;
            }
        if (t->offset > data_len || end > data_len) {
            t->nbytes = need[declared >= 0 ? declared : FL_MS]; /* place_tensors reports it */
            t->enc = k_fl_enc[declared >= 0 ? declared : FL_MS];
            continue;
        }
        size_t avail = (size_t)(end - t->offset);
        char sib[96];
        bool has_sib = qp_gguf_scale_name(t->name, sib, sizeof sib) && qp_model_find(m, sib) != NULL;
        size_t padded[FL_COUNT];
        bool exact[FL_COUNT], fits[FL_COUNT];
        for (int f = 0; f < FL_COUNT; f++) {
            if (!qp_size_align(need[f], alignment, &padded[f])) padded[f] = SIZE_MAX;
            exact[f] = avail == need[f];
            fits[f] = need[f] <= avail && avail <= padded[f]; /* the rest is alignment padding */
        }
        int f = -1;
        if (declared >= 0) {
            f = declared;
            if (!fits[f]) {
                int other = -1;
                for (int g = 0; g < FL_COUNT && other < 0; g++)
                    if (g != f && exact[g] && (g != FL_SPLIT32 || has_sib)) other = g;
                if (avail < need[f])
                    st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at data offset %llu: %s says "
                                 "%s, which needs %zu bytes for %lld elements, but the data offsets "
                                 "leave it %zu bytes%s%s", r->path, t->name,
                                 (unsigned long long)t->offset, why, k_fl_name[f], need[f],
                                 (long long)n, avail, other >= 0 ? ": exactly the size of " : "",
                                 other >= 0 ? k_fl_name[other] : "");
                else if (other >= 0)
                    st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at data offset %llu: %s says "
                                 "%s (%zu bytes for %lld elements), but the data offsets leave it "
                                 "%zu bytes, exactly the size of %s", r->path, t->name,
                                 (unsigned long long)t->offset, why, k_fl_name[f], need[f],
                                 (long long)n, avail, k_fl_name[other]);
                else if (avail - need[f] > I2S_TOLERANCE)
                    st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at data offset %llu: %s says "
                                 "%s, which needs %zu bytes for %lld elements, but the data offsets "
                                 "leave it %zu bytes (%zu more, tolerance %u)", r->path, t->name,
                                 (unsigned long long)t->offset, why, k_fl_name[f], need[f],
                                 (long long)n, avail, avail - need[f], I2S_TOLERANCE);
                else
                    qp_model_add_problem(m, "tensor '%s': %zu bytes before the next tensor where %s "
                                         "needs %zu (within the %u-byte tolerance)", t->name, avail,
                                         k_fl_name[f], need[f], I2S_TOLERANCE);
                if (st != QP_OK) break;
            }
        } else {
            /* exact size, then size up to padding, in BitNet-rs's exact order with microsoft/BitNet's
             * n/4 + 32 after QK256; then within the tolerance in BitNet-rs's close order */
            static const int k_exact_order[FL_COUNT] = {FL_QK256, FL_MS, FL_B32F16, FL_SPLIT32};
            static const int k_close_order[FL_COUNT] = {FL_QK256, FL_SPLIT32, FL_B32F16, FL_MS};
            for (int pass = 0; pass < 3 && f < 0; pass++)
                for (int i = 0; i < FL_COUNT && f < 0; i++) {
                    int g = pass < 2 ? k_exact_order[i] : k_close_order[i];
                    if (g == FL_SPLIT32 && !has_sib) continue;
                    bool ok = pass == 0 ? exact[g]
                            : pass == 1 ? fits[g]
                                        : need[g] <= avail && avail - need[g] <= I2S_TOLERANCE;
                    if (ok) f = g;
                }
            if (f < 0) {
                st = qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at data offset %llu (GGUF type "
                             "36, %lld elements): the data offsets leave it %zu bytes, which is no "
                             "type-36 flavour: QK256 needs %zu, MS I2_S %zu, BitNet32F16 %zu, "
                             "Split32 %zu%s (tolerance %u)", r->path, t->name,
                             (unsigned long long)t->offset, (long long)n, avail, need[FL_QK256],
                             need[FL_MS], need[FL_B32F16], need[FL_SPLIT32],
                             has_sib ? "" : " with a sibling scale", I2S_TOLERANCE);
                break;
            }
            if (n_inferred++ == 0)
                qp_model_add_problem(m, "tensor '%s' (GGUF type 36): flavour %s inferred from its %zu "
                                     "bytes (no '%s' key and general.file_type is not 40)", t->name,
                                     k_fl_name[f], avail, QP_GGUF_I2S_FLAVOUR_KEY);
        }
        /* block rules of the chosen flavour */
        const qp_encoding_traits *tr = qp_encoding_get(k_fl_enc[f]);
        bool flat = f == FL_MS; /* MS I2_S packs the flattened tensor */
        int64_t blocked = flat ? n : t->ne[0];
        if (blocked % tr->block_elems != 0) {
            st = qp_fail(r->e, f == FL_QK256 ? QP_ERR_UNSUPPORTED : QP_ERR_CORRUPT,
                         "%s: tensor '%s': %s %lld is not a multiple of the %s block size %lld%s",
                         r->path, t->name, flat ? "element count" : "ne[0]", (long long)blocked,
                         k_fl_name[f], (long long)tr->block_elems,
                         f == FL_QK256 ? " (padded QK256 rows are not supported)" : "");
            break;
        }
        t->enc = k_fl_enc[f];
        t->nbytes = need[f];
    }
    if (st == QP_OK && n_inferred > 1)
        qp_model_add_problem(m, "%lld type-36 tensors in all had their flavour inferred from their "
                             "size", (long long)n_inferred);
    qp_free(ord);
    return st;
}

/* After placement: the sibling scales of QK256 and Split32 tensors. With the flavour declared in
 * metadata a QK256 tensor's "<base>.scale" must exist (our writer always writes it); inferred
 * QK256 (BitNet-rs GgmlQk256NoScale) may lack it. Present scales: F32 or F16, one element for
 * QK256 (per tensor), ceil(n/32) for Split32, all finite. */
static qp_status check_i2s_siblings(gguf_reader *r) {
    qp_model *m = r->m;
    const qp_meta *md = qp_model_meta(m, QP_GGUF_I2S_FLAVOUR_KEY);
    bool declared = md != NULL;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        bool per_tensor = qp_encoding_has_sibling_scale(t->enc); /* QK256: one element */
        if (!per_tensor && t->enc != QP_ENC_SPLIT32) continue;   /* Split32: one per 32 */
        char sib[96];
        if (!qp_gguf_scale_name(t->name, sib, sizeof sib))
            return qp_fail(r->e, QP_ERR_INTERNAL, "%s: tensor '%s': name too long", r->path, t->name);
        const qp_tensor *s = qp_model_find(m, sib);
        if (!s) {
            if (t->enc == QP_ENC_SPLIT32 || declared)
                return qp_fail(r->e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %llu (%s): its scale "
                               "tensor '%s' is missing", r->path, t->name,
                               (unsigned long long)t->offset, qp_encoding_get(t->enc)->upper_name, sib);
            continue;
        }
        int64_t want = per_tensor ? 1 : (qp_tensor_nelements(t) + 31) / 32;
        if ((s->enc != QP_ENC_F32 && s->enc != QP_ENC_F16) || qp_tensor_nelements(s) != want)
            return qp_fail(r->e, QP_ERR_CORRUPT, "%s: scale tensor '%s' at offset %llu of '%s': %s "
                           "with %lld elements; F32 or F16 with %lld expected", r->path, sib,
                           (unsigned long long)s->offset, t->name,
                           qp_encoding_get(s->enc)->upper_name, (long long)qp_tensor_nelements(s),
                           (long long)want);
        const qp_encoding_traits *st = qp_encoding_get(s->enc);
        for (int64_t j = 0; j < want; j++) {
            float v;
            st->dequantize(s->data + (size_t)j * st->block_bytes, &v, 1);
            if (!isfinite(v))
                return qp_fail(r->e, QP_ERR_CORRUPT, "%s: scale tensor '%s' at offset %llu: element "
                               "%lld is not finite", r->path, sib,
                               (unsigned long long)(s->offset + (uint64_t)j * st->block_bytes),
                               (long long)j);
        }
    }
    return QP_OK;
}

qp_status qp_gguf_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    (void)o;
    int fi;
    qp_status st = qp_model_add_file(m, path, &fi, e);
    if (st != QP_OK) return st;
    const qp_mapped_file *f = qp_model_file(m, fi);
    gguf_reader r = {m, path, {0}, e};
    qp_cursor_init(&r.c, f->data, f->size, 0);

    const uint8_t *magic;
    if (!qp_cursor_take(&r.c, 4, &magic) || memcmp(magic, "GGUF", 4) != 0)
        return qp_fail(e, QP_ERR_FORMAT, "%s: not a GGUF file (no \"GGUF\" magic at offset 0)", path);
    uint32_t version;
    if (!qp_cursor_u32(&r.c, &version)) return truncated(&r, 4, "GGUF version");
    if (version != 0 && (version & 0xFFFFu) == 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: GGUF version field 0x%08x at offset 4 is byte-swapped: "
                       "a big-endian GGUF file, which is not supported", path, version);
    if (version == 1)
        return qp_fail(e, QP_ERR_FORMAT, "%s: GGUF version 1 (32-bit counts) is not supported; "
                       "only versions 2 and 3 are", path);
    if (version < 2 || version > 3)
        return qp_fail(e, QP_ERR_FORMAT, "%s: unknown GGUF version %u at offset 4 (2 and 3 are "
                       "supported)", path, version);
    m->format_version = version;

    int64_t n_tensors, n_kv;
    if (!qp_cursor_i64(&r.c, &n_tensors)) return truncated(&r, 8, "tensor count");
    if (!qp_cursor_i64(&r.c, &n_kv)) return truncated(&r, 16, "metadata count");
    size_t left = qp_cursor_left(&r.c);
    if (n_tensors < 0 || (uint64_t)n_tensors > left / GGUF_MIN_TINFO_BYTES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor count %lld at offset 8 is impossible: %zu bytes "
                       "remain and each tensor info takes at least %u", path, (long long)n_tensors,
                       left, GGUF_MIN_TINFO_BYTES);
    if (n_kv < 0 || (uint64_t)n_kv > left / GGUF_MIN_KV_BYTES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: metadata count %lld at offset 16 is impossible: %zu bytes "
                       "remain and each key/value takes at least %u", path, (long long)n_kv, left,
                       GGUF_MIN_KV_BYTES);
    if ((uint64_t)n_tensors * GGUF_MIN_TINFO_BYTES + (uint64_t)n_kv * GGUF_MIN_KV_BYTES > left)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %lld tensors and %lld keys cannot fit in the %zu bytes "
                       "after the header", path, (long long)n_tensors, (long long)n_kv, left);

    for (int64_t i = 0; i < n_kv; i++) {
        st = read_kv(&r, i);
        if (st != QP_OK) return st;
    }
    size_t alignment;
    st = read_alignment(&r, &alignment);
    if (st != QP_OK) return st;
    if ((uint64_t)n_tensors > qp_cursor_left(&r.c) / GGUF_MIN_TINFO_BYTES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %lld tensor infos cannot fit in the %zu bytes after the "
                       "metadata (offset %zu)", path, (long long)n_tensors, qp_cursor_left(&r.c), r.c.pos);
    for (int64_t i = 0; i < n_tensors; i++) {
        st = read_tensor_info(&r, i);
        if (st != QP_OK) return st;
    }
    st = resolve_i2s_flavours(&r, r.c.pos, alignment);
    if (st != QP_OK) return st;
    st = place_tensors(&r, r.c.pos, alignment);
    if (st != QP_OK) return st;
    st = check_i2s_siblings(&r);
    if (st != QP_OK) return st;
    return qp_gguf_meta_apply(m, e);
}
