/* llama-imatrix files (readers/imatrix.md). Every count is checked against the bytes left
 * before anything is allocated; values are derived as llama-quantize's load_imatrix does. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quantpack/model.h"
#include "readers/imatrix.h"

#define IMATRIX_MAX_NAME 4096

static qp_status check_finite(const char *path, const char *name, const float *v, int64_t n,
                              qp_err *e) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: entry '%s': value %lld is not finite (%g); "
                           "llama-quantize refuses it too", path, name, (long long)i, (double)v[i]);
    return QP_OK;
}

static bool name_taken(const qp_imatrix *im, const char *name, size_t len) {
    for (int64_t i = 0; i < im->n; i++)
        if (strlen(im->entries[i].name) == len && memcmp(im->entries[i].name, name, len) == 0) return true;
    return false;
}

/* ---- legacy .dat: i32 n_entries; per entry i32 len, name, i32 ncall, i32 nval, f32 sums[nval];
 *      then optionally i32 chunk_count, i32 len, dataset name -------------------------------- */
static qp_status read_legacy(const char *path, const uint8_t *d, size_t size, qp_imatrix *im,
                             qp_err *e) {
    qp_cursor c;
    qp_cursor_init(&c, d, size, 0);
    int32_t n_entries;
    if (!qp_cursor_i32(&c, &n_entries) || n_entries < 1)
        return qp_fail(e, QP_ERR_FORMAT, "%s: not an importance matrix (no GGUF magic, and a legacy "
                       ".dat would start with a positive entry count)", path);
    /* each entry takes at least 12 bytes + one value: bound the table before allocating it */
    if ((uint64_t)n_entries > size / 16)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %d entries cannot fit in %zu bytes", path, n_entries, size);
    im->entries = qp_arena_alloc(&im->arena, (size_t)n_entries * sizeof *im->entries);
    if (!im->entries) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    for (int32_t i = 0; i < n_entries; i++) {
        size_t at = c.pos;
        int32_t len, ncall, nval;
        const uint8_t *name, *vals;
        if (!qp_cursor_i32(&c, &len) || len < 0 || len > IMATRIX_MAX_NAME || !qp_cursor_take(&c, (size_t)len, &name))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: entry %d at offset %zu: bad or truncated name", path, i, at);
        if (memchr(name, 0, (size_t)len) || len == 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: entry %d at offset %zu: empty name or a NUL in it", path, i, at);
        if (name_taken(im, (const char *)name, (size_t)len))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: entry %d at offset %zu: '%.*s' appears twice", path, i,
                           at, len, (const char *)name);
        if (!qp_cursor_i32(&c, &ncall) || !qp_cursor_i32(&c, &nval) || nval < 1 ||
            !qp_cursor_take(&c, (size_t)nval * 4, &vals))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: entry '%.*s' at offset %zu: bad or truncated values",
                           path, len, (const char *)name, at);
        qp_imatrix_entry *en = &im->entries[im->n];
        float *v = qp_arena_alloc(&im->arena, (size_t)nval * sizeof(float));
        en->name = qp_arena_strndup(&im->arena, (const char *)name, (size_t)len);
        if (!v || !en->name) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        /* llama-quantize: sums / ncall (a float division) when ncall > 0, else the sums */
        for (int32_t k = 0; k < nval; k++) {
            float s = qp_load_f32le(vals + 4 * (size_t)k);
            v[k] = ncall > 0 ? s / (float)ncall : s;
        }
        en->values = v;
        en->n = nval;
        im->n++;
        qp_status st = check_finite(path, en->name, v, nval, e);
        if (st != QP_OK) return st;
    }
    int32_t chunks, dlen;
    const uint8_t *ds;
    if (qp_cursor_i32(&c, &chunks)) {
        im->chunk_count = chunks;
        if (qp_cursor_i32(&c, &dlen) && dlen > 0 && dlen <= IMATRIX_MAX_NAME && qp_cursor_take(&c, (size_t)dlen, &ds))
            im->dataset = qp_arena_strndup(&im->arena, (const char *)ds, (size_t)dlen);
    }
    im->legacy = true;
    return QP_OK;
}

/* ---- GGUF imatrix: "<name>.in_sum2" F32 [ne0, n_mat] and "<name>.counts" F32 [1, n_mat], keys
 *      imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size --------------------------- */
static const qp_tensor *partner(const qp_model *m, const char *base, size_t blen, const char *suffix) {
    char name[IMATRIX_MAX_NAME + 16];
    if (blen > IMATRIX_MAX_NAME) return NULL;
    snprintf(name, sizeof name, "%.*s%s", (int)blen, base, suffix);
    return qp_model_find(m, name);
}

static bool ends_with(const char *s, const char *suf, size_t *base_len) {
    size_t a = strlen(s), b = strlen(suf);
    if (a <= b || strcmp(s + a - b, suf) != 0) return false;
    *base_len = a - b;
    return true;
}

static qp_status gguf_entry(const char *path, const qp_model *m, const qp_tensor *sums, size_t blen,
                            qp_imatrix *im, qp_err *e) {
    const qp_tensor *counts = partner(m, sums->name, blen, ".counts");
    if (!counts)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has no '%.*s.counts'", path, sums->name,
                       (int)blen, sums->name);
    if (sums->enc != QP_ENC_F32 || counts->enc != QP_ENC_F32)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%.*s': sums and counts must be F32", path, (int)blen, sums->name);
    int64_t nsums = qp_tensor_nelements(sums), ncounts = qp_tensor_nelements(counts);
    if (ncounts < 1 || nsums < 1 || nsums % ncounts != 0 || sums->nbytes < (size_t)nsums * 4 ||
        counts->nbytes < (size_t)ncounts * 4)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%.*s': %lld sums do not split into %lld counts", path,
                       (int)blen, sums->name, (long long)nsums, (long long)ncounts);
    const int64_t ne0 = nsums / ncounts;
    qp_imatrix_entry *en = &im->entries[im->n];
    float *v = qp_arena_alloc(&im->arena, (size_t)nsums * sizeof(float));
    en->name = qp_arena_strndup(&im->arena, sums->name, blen);
    if (!v || !en->name) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    /* llama-quantize: counts rounded to integers (lround); sums / count, 1 where count is 0 */
    for (int64_t j = 0; j < ncounts; j++) {
        float cnt = qp_load_f32le(counts->data + 4 * j);
        if (!isfinite(cnt) || fabsf(cnt) > 9e18f)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s': count %lld is %g", path, counts->name, (long long)j,
                           (double)cnt);
        const float count = (float)lroundf(cnt);
        for (int64_t i = 0; i < ne0; i++)
            v[j * ne0 + i] = count > 0.0f ? qp_load_f32le(sums->data + 4 * (j * ne0 + i)) / count : 1.0f;
    }
    en->values = v;
    en->n = nsums;
    im->n++;
    return check_finite(path, en->name, v, nsums, e);
}

static qp_status read_gguf(const char *path, qp_imatrix *im, qp_err *e) {
    qp_model *m = NULL;
    qp_status s = qp_model_open(path, NULL, &m, e);
    if (s != QP_OK) return s;
    static const char *const k_keys[] = {"imatrix.datasets", "imatrix.chunk_count", "imatrix.chunk_size"};
    for (size_t k = 0; k < 3 && s == QP_OK; k++)
        if (!qp_model_meta(m, k_keys[k]))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: GGUF without the key %s: not an llama-imatrix file", path, k_keys[k]);
    const qp_meta *cc = qp_model_meta(m, "imatrix.chunk_count");
    if (s == QP_OK && cc->type != QP_META_STRING && cc->type != QP_META_ARRAY) im->chunk_count = (int64_t)cc->v.u;
    im->entries = s == QP_OK ? qp_arena_alloc(&im->arena, (size_t)(m->n_tensors + 1) * sizeof *im->entries) : NULL;
    if (s == QP_OK && !im->entries) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < m->n_tensors && s == QP_OK; i++) {
        size_t blen;
        const qp_tensor *t = &m->tensors[i];
        if (ends_with(t->name, ".in_sum2", &blen)) s = gguf_entry(path, m, t, blen, im, e);
        else if (ends_with(t->name, ".counts", &blen) && !partner(m, t->name, blen, ".in_sum2"))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has no '%.*s.in_sum2'", path, t->name, (int)blen, t->name);
    }
    if (s == QP_OK && im->n == 0) s = qp_fail(e, QP_ERR_CORRUPT, "%s: no '<tensor>.in_sum2' entries", path);
    qp_model_close(m);
    return s;
}

qp_status qp_imatrix_open(const char *path, qp_imatrix **out, qp_err *e) {
    if (!path || !out) return qp_fail(e, QP_ERR_ARG, "qp_imatrix_open: NULL argument");
    qp_imatrix *im = qp_calloc(1, sizeof *im);
    if (!im) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    qp_mapped_file f = {0};
    qp_status s = qp_file_map(path, &f, e);
    if (s == QP_OK) {
        if (f.size >= 4 && memcmp(f.data, "GGUF", 4) == 0) s = read_gguf(path, im, e);
        else s = read_legacy(path, f.data, f.size, im, e);
    }
    qp_file_unmap(&f);
    if (s != QP_OK) {
        qp_imatrix_free(im);
        return s;
    }
    *out = im;
    return QP_OK;
}

void qp_imatrix_free(qp_imatrix *im) {
    if (!im) return;
    qp_arena_free(&im->arena);
    qp_free(im);
}
