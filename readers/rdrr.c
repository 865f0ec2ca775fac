/* RDRR directory reader (readers/rdrr.md "Reading"): manifest.json (+ tensors.json), shards
 * mapped and checked (name confined to the directory, size, SHA-256; group hashes and block
 * Merkle roots when present) before any tensor is exposed. */
#include <math.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "quantpack/chat.h"
#include "readers/name_map.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/model_internal.h"
#include "readers/hf_config.h"

#define RDRR_MAX_MANIFEST ((size_t)256 << 20)
#define RDRR_MAX_SHARDS 1000000
#define RDRR_MAX_TENSORS ((int64_t)1 << 22)

typedef struct rd {
    qp_model *m;
    const char *dir;
    const char *mpath;   /* manifest path, for messages */
    int n_shards;
    int *shard_file;     /* model file index of shard i */
    uint64_t *shard_size;
    const uint8_t **shard_data;
    const cJSON *files;  /* manifest "files" (name -> sha256), NULL when the manifest has none */
} rd;

/* A file name inside the directory: no separators, no "..", no leading dot, printable ASCII. */
static bool safe_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 255 || s[0] == '.') return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-')) return false;
    return true;
}

static bool is_hex64(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static qp_status read_shards(rd *r, const cJSON *man, qp_err *e) {
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(man, "shards");
    if (!cJSON_IsArray(shards) || cJSON_GetArraySize(shards) == 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: \"shards\" must be a non-empty array", r->mpath);
    int n = cJSON_GetArraySize(shards);
    if (n > RDRR_MAX_SHARDS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: %d shards (limit %d)", r->mpath, n, RDRR_MAX_SHARDS);
    qp_arena *a = qp_model_arena(r->m);
    r->shard_file = qp_arena_alloc(a, (size_t)n * sizeof *r->shard_file);
    r->shard_size = qp_arena_alloc(a, (size_t)n * sizeof *r->shard_size);
    r->shard_data = qp_arena_alloc(a, (size_t)n * sizeof *r->shard_data);
    if (!r->shard_file || !r->shard_size || !r->shard_data)
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
    uint64_t running = 0;
    qp_strmap names;
    memset(&names, 0, sizeof names);
    qp_sha256 *h = NULL;
    qp_status s = qp_sha256_new(&h, e);
    const cJSON *sh_next = shards->child; /* walked, not indexed: GetArrayItem is linear */
    for (int i = 0; s == QP_OK && i < n; i++) {
        const cJSON *sh = sh_next;
        sh_next = sh ? sh->next : NULL;
        const cJSON *idx = cJSON_GetObjectItemCaseSensitive(sh, "index");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(sh, "filename");
        if (!cJSON_IsString(fn)) fn = cJSON_GetObjectItemCaseSensitive(sh, "fileName");
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(sh, "hash");
        if (!cJSON_IsString(hash)) hash = cJSON_GetObjectItemCaseSensitive(sh, "blake3");
        uint64_t size = 0, off = 0, ix = 0;
        if (!cJSON_IsObject(sh)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d is not an object", r->mpath, i);
        } else if (idx && (!qp_json_uint(idx, &ix) || ix != (uint64_t)i)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d has index field != its position", r->mpath, i);
        } else if (!cJSON_IsString(fn)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d has no filename", r->mpath, i);
        } else if (!safe_name(fn->valuestring)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d file name '%s' is not a plain file name "
                                           "inside the directory (refused)", r->mpath, i, fn->valuestring);
        } else if (!qp_json_get_uint(sh, "size", &size) || size == 0) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d ('%s') has no valid size", r->mpath, i,
                        fn->valuestring);
        } else if (!cJSON_IsString(hash) || !is_hex64(hash->valuestring)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d ('%s') hash is not 64 lowercase hex digits",
                        r->mpath, i, fn->valuestring);
        } else if (cJSON_GetObjectItemCaseSensitive(sh, "offset") &&
                   (!qp_json_get_uint(sh, "offset", &off) || off != running)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d ('%s') offset is not the sum of the "
                                           "previous sizes (%llu)", r->mpath, i, fn->valuestring,
                        (unsigned long long)running);
        }
        if (s != QP_OK) break;
        running += size;
        /* duplicate names through a map (a pairwise scan is quadratic in up to 10^6 shards) */
        int64_t k = -1;
        bool added;
        if (qp_strmap_put(&names, fn->valuestring, strlen(fn->valuestring), i, &added) != QP_OK) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
            break;
        }
        if (!added && qp_strmap_get(&names, fn->valuestring, strlen(fn->valuestring), &k)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shards %lld and %d are both '%s'", r->mpath,
                        (long long)k, i, fn->valuestring);
            break;
        }
        char *p = qp_path_join(r->dir, fn->valuestring);
        struct stat st;
        if (!p) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
        } else if (lstat(p, &st) != 0) {
            s = qp_fail(e, QP_ERR_IO, "%s: shard %d '%s' is missing", r->dir, i, fn->valuestring);
        } else if (!S_ISREG(st.st_mode)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d '%s' is not a regular file (symlinks are "
                                           "refused)", r->dir, i, fn->valuestring);
        } else if ((uint64_t)st.st_size != size) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard %d '%s' has %llu bytes, the manifest says %llu",
                        r->dir, i, fn->valuestring, (unsigned long long)st.st_size,
                        (unsigned long long)size);
        } else {
            int fi;
            s = qp_model_add_file(r->m, p, &fi, e);
            if (s == QP_OK) {
                const qp_mapped_file *mf = qp_model_file(r->m, fi);
                if (mf->size != size) {
                    s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard '%s' changed size while opening", r->dir,
                                fn->valuestring);
                } else {
                    uint8_t d[QP_SHA256_BYTES];
                    char hex[QP_SHA256_HEX];
                    s = qp_sha256_update(h, mf->data, mf->size, e);
                    if (s == QP_OK) s = qp_sha256_final(h, d, e);
                    if (s == QP_OK) {
                        qp_hex_encode(d, sizeof d, hex);
                        if (strcmp(hex, hash->valuestring) != 0)
                            s = qp_fail(e, QP_ERR_VERIFY, "%s: shard %d '%s': SHA-256 %s does not "
                                                          "match the manifest's %s (corrupted shard)",
                                        r->dir, i, fn->valuestring, hex, hash->valuestring);
                    }
                    r->shard_file[i] = fi;
                    r->shard_size[i] = size;
                    r->shard_data[i] = mf->data;
                }
            }
        }
        qp_free(p);
    }
    qp_sha256_free(h);
    qp_strmap_free(&names);
    if (s != QP_OK) return s;
    r->n_shards = n;
    uint64_t total;
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(man, "totalSize");
    if (ts && (!qp_json_uint(ts, &total) || total != running))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: totalSize is not the sum of the shard sizes (%llu)",
                       r->mpath, (unsigned long long)running);
    return QP_OK;
}

static qp_encoding enc_of_dtype(const char *d) {
    if (strcasecmp(d, "Q4_K_M") == 0 || strcasecmp(d, "Q4_K_S") == 0) return QP_ENC_Q4_K;
    return qp_encoding_from_name(d);
}

static bool gguf_style(const char *name) {
    return strncmp(name, "blk.", 4) == 0 || strcmp(name, "token_embd.weight") == 0 ||
           strcmp(name, "output.weight") == 0 || strncmp(name, "output_norm.", 12) == 0;
}

/* Bytes of one tensor (contiguous: a pointer into a shard, or an arena copy of its spans). */
static qp_status tensor_bytes(rd *r, const char *name, const cJSON *t, uint64_t size,
                              const uint8_t **data, int *file, uint64_t *offset, qp_err *e) {
    const cJSON *spans = cJSON_GetObjectItemCaseSensitive(t, "spans");
    if (spans && cJSON_IsArray(spans) && cJSON_GetArraySize(spans) > 0) {
        int n = cJSON_GetArraySize(spans);
        uint8_t *buf = qp_arena_alloc(qp_model_arena(r->m), (size_t)size);
        if (!buf) return qp_fail(e, QP_ERR_NOMEM, "%s: tensor '%s': out of memory for %llu bytes",
                                 r->mpath, name, (unsigned long long)size);
        uint64_t done = 0;
        const cJSON *sp_next = spans->child;
        for (int i = 0; i < n; i++) {
            const cJSON *sp = sp_next;
            sp_next = sp ? sp->next : NULL;
            uint64_t si, so, ss;
            const cJSON *sij = cJSON_GetObjectItemCaseSensitive(sp, "shardIndex");
            if (!sij) sij = cJSON_GetObjectItemCaseSensitive(sp, "shard");
            if (!qp_json_uint(sij, &si) || !qp_json_get_uint(sp, "offset", &so) ||
                !qp_json_get_uint(sp, "size", &ss) || ss == 0)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' span %d is malformed", r->mpath,
                               name, i);
            if (si >= (uint64_t)r->n_shards || so > r->shard_size[si] || ss > r->shard_size[si] - so)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' span %d (shard %llu, offset %llu, "
                                                  "%llu bytes) lies outside its shard", r->mpath, name,
                               i, (unsigned long long)si, (unsigned long long)so,
                               (unsigned long long)ss);
            if (ss > size - done)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': spans hold more than its size "
                                                  "%llu", r->mpath, name, (unsigned long long)size);
            memcpy(buf + done, r->shard_data[si] + so, (size_t)ss);
            if (i == 0) {
                *file = r->shard_file[si];
                *offset = so;
            }
            done += ss;
        }
        if (done != size)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': spans hold %llu bytes, size is %llu",
                           r->mpath, name, (unsigned long long)done, (unsigned long long)size);
        *data = buf;
        return QP_OK;
    }
    uint64_t si, so;
    const cJSON *sij = cJSON_GetObjectItemCaseSensitive(t, "shard");
    if (!sij) sij = cJSON_GetObjectItemCaseSensitive(t, "shardIndex");
    if (!qp_json_uint(sij, &si) || !qp_json_get_uint(t, "offset", &so))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has no shard/offset", r->mpath, name);
    if (si >= (uint64_t)r->n_shards || so > r->shard_size[si] || size > r->shard_size[si] - so)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' (shard %llu, offset %llu, %llu bytes) lies "
                                          "outside its shard", r->mpath, name, (unsigned long long)si,
                       (unsigned long long)so, (unsigned long long)size);
    *data = r->shard_data[si] + so;
    *file = r->shard_file[si];
    *offset = so;
    return QP_OK;
}

/* Byte ranges of the tensors (and of each span) must not overlap: the writer never shares bytes,
 * and without this rule a small manifest could make the reader hash and validate the same shard
 * bytes once per tensor (millions of times). Entries too malformed to give a range are skipped
 * here and refused by read_tensor. */
typedef struct range {
    uint64_t shard, off, size;
    const char *name;
} range;

static int range_cmp(const void *a, const void *b) {
    const range *x = a, *y = b;
    if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

static bool add_range(range **v, size_t *n, size_t *cap, uint64_t si, uint64_t so, uint64_t ss,
                      const char *name) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        range *nv = qp_realloc(*v, nc * sizeof *nv);
        if (!nv) return false;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = (range){si, so, ss, name};
    return true;
}

static qp_status check_overlaps(rd *r, const cJSON *tensors, qp_err *e) {
    range *v = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) {
        uint64_t size, si, so, ss;
        if (!ok || !t->string || !qp_json_get_uint(t, "size", &size)) continue;
        const cJSON *spans = cJSON_GetObjectItemCaseSensitive(t, "spans");
        if (cJSON_IsArray(spans) && cJSON_GetArraySize(spans) > 0) {
            const cJSON *sp;
            cJSON_ArrayForEach(sp, spans) {
                const cJSON *sij = cJSON_GetObjectItemCaseSensitive(sp, "shardIndex");
                if (!sij) sij = cJSON_GetObjectItemCaseSensitive(sp, "shard");
                if (qp_json_uint(sij, &si) && qp_json_get_uint(sp, "offset", &so) &&
                    qp_json_get_uint(sp, "size", &ss) && ss > 0 &&
                    !(ok = add_range(&v, &n, &cap, si, so, ss, t->string)))
                    break;
            }
            continue;
        }
        const cJSON *sij = cJSON_GetObjectItemCaseSensitive(t, "shard");
        if (!sij) sij = cJSON_GetObjectItemCaseSensitive(t, "shardIndex");
        if (qp_json_uint(sij, &si) && qp_json_get_uint(t, "offset", &so) &&
            size > 0)
            ok = add_range(&v, &n, &cap, si, so, size, t->string);
    }
    qp_status s = ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
    if (s == QP_OK && n > 1) {
        qsort(v, n, sizeof *v, range_cmp);
        for (size_t i = 0; i + 1 < n; i++) {
            /* qp_json_uint caps values at 2^53, so off + size does not wrap */
            if (v[i].shard == v[i + 1].shard && v[i].off + v[i].size > v[i + 1].off) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensors '%s' and '%s' overlap in shard %llu at "
                                               "offset %llu (tensors never share bytes)", r->mpath,
                            v[i].name, v[i + 1].name, (unsigned long long)v[i].shard,
                            (unsigned long long)v[i + 1].off);
                break;
            }
        }
    }
    qp_free(v);
    return s;
}

static qp_status read_tensor(rd *r, const cJSON *t, const cJSON *roots, qp_err *e) {
    const char *name = t->string;
    if (!name || !name[0] || !cJSON_IsObject(t))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: a tensor entry is malformed", r->mpath);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    uint64_t size;
    if (!cJSON_IsString(dt))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has no dtype", r->mpath, name);
    qp_encoding enc = enc_of_dtype(dt->valuestring);
    if (enc == QP_ENC_COUNT)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': dtype '%s' is not supported",
                       r->mpath, name, dt->valuestring);
    if (!qp_json_get_uint(t, "size", &size) || size == 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has no valid size", r->mpath, name);
    int nd = cJSON_GetArraySize(shape);
    if (!cJSON_IsArray(shape) || nd > QP_MAX_DIMS)
        return qp_fail(e, nd > QP_MAX_DIMS ? QP_ERR_LIMIT : QP_ERR_CORRUPT,
                       "%s: tensor '%s': shape must be an array of at most %d dims", r->mpath, name,
                       QP_MAX_DIMS);
    int64_t ne[QP_MAX_DIMS] = {1, 1, 1, 1}, n_el = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t v;
        if (!qp_json_uint(cJSON_GetArrayItem(shape, i), &v) || v == 0 || v > ((uint64_t)1 << 40) ||
            !qp_i64_mul(n_el, (int64_t)v, &n_el) || n_el > ((int64_t)1 << 48))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': bad shape", r->mpath, name);
        ne[nd - 1 - i] = (int64_t)v;
    }
    const uint8_t *data = NULL;
    int file = -1;
    uint64_t offset = 0;
    qp_status s = tensor_bytes(r, name, t, size, &data, &file, &offset, e);
    if (s != QP_OK) return s;
    /* Block Merkle root, when the manifest has one for this tensor. */
    const cJSON *root = roots ? cJSON_GetObjectItemCaseSensitive(roots, name) : NULL;
    if (root) {
        uint8_t d[QP_SHA256_BYTES];
        char hex[8 + QP_SHA256_HEX];
        if (!cJSON_IsString(root) || strncmp(root->valuestring, "sha256:", 7) != 0)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': Merkle root is not \"sha256:...\"",
                           r->mpath, name);
        s = qp_merkle_root(data, (size_t)size, QP_MERKLE_BLOCK_DEFAULT, d, e);
        if (s != QP_OK) return s;
        memcpy(hex, "sha256:", 7);
        qp_hex_encode(d, sizeof d, hex + 7);
        if (strcmp(hex, root->valuestring) != 0)
            return qp_fail(e, QP_ERR_VERIFY, "%s: tensor '%s': block Merkle root %s does not match the "
                                             "manifest's %s", r->mpath, name, hex, root->valuestring);
    }
    /* Sizes: exact, or Q4_K-style rows zero-padded to a multiple of 256 (layout "row"). */
    size_t want = 0;
    bool exact = qp_encoding_tensor_bytes(enc, n_el, &want) && want == size;
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    int64_t row = ne[0], rows = n_el / ne[0];
    int64_t padded = (row + 255) / 256 * 256;
    size_t prow = 0, ptotal = 0;
    bool is_padded = !exact && (tr->flags & QP_ENC_FLAG_BLOCK) && tr->dequantize &&
                     qp_encoding_row_bytes(enc, padded, &prow) &&
                     qp_size_mul(prow, (size_t)rows, &ptotal) && ptotal == size;
    if (!exact && !is_padded)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': %llu bytes do not hold %s of shape %lld "
                                          "elements", r->mpath, name, (unsigned long long)size,
                       dt->valuestring, (long long)n_el);
    if (tr->validate) {
        char why[160];
        int64_t check_n = is_padded ? padded * rows : n_el;
        if (!tr->validate(data, check_n, why, sizeof why))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': %s", r->mpath, name, why);
    }
    qp_tensor *q;
    s = qp_model_add_tensor(r->m, name, strlen(name), &q, e);
    if (s != QP_OK) return s;
    q->n_dims = nd > 0 ? nd : 1;
    memcpy(q->ne, ne, sizeof ne);
    q->file_index = file;
    q->offset = offset;
    if (is_padded) {
        /* Our runtime reads rows of exactly ne[0]: keep an F32 copy without the padding. */
        size_t nbytes;
        if (!qp_size_mul((size_t)n_el, sizeof(float), &nbytes))
            return qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s' too large", r->mpath, name);
        float *f = qp_arena_alloc(qp_model_arena(r->m), nbytes);
        float *tmp = qp_malloc((size_t)padded * sizeof *tmp);
        if (!f || !tmp) {
            qp_free(tmp);
            return qp_fail(e, QP_ERR_NOMEM, "%s: tensor '%s': out of memory", r->mpath, name);
        }
        for (int64_t i = 0; i < rows; i++) {
            tr->dequantize(data + (size_t)i * prow, tmp, padded);
            memcpy(f + i * row, tmp, (size_t)row * sizeof *f);
        }
        qp_free(tmp);
        q->enc = QP_ENC_F32;
        q->decoded_copy = true;
        q->stored_enc = enc;
        q->data = (const uint8_t *)f;
        q->nbytes = nbytes;
        qp_model_add_problem(r->m, "tensor '%s': %s rows zero-padded to %lld (layout \"row\"); "
                                   "dequantized to F32 for the runtime", name, dt->valuestring,
                             (long long)padded);
    } else {
        q->enc = enc;
        q->data = data;
        q->nbytes = (size_t)size;
    }
    char buf[256];
    const char *canon = gguf_style(name) ? name : qp_name_map_hf_to_gguf(name, buf, sizeof buf);
    if (canon) {
        q->canon = qp_arena_strdup(qp_model_arena(r->m), canon);
        if (!q->canon) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
    }
    return QP_OK;
}

/* Group hashes: SHA-256 of the listed tensors' stored bytes, in the listed order. */
static qp_status check_groups(rd *r, const cJSON *man, const cJSON *tensors, qp_err *e) {
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(man, "groups");
    if (!groups) return QP_OK;
    if (!cJSON_IsObject(groups))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: \"groups\" is not an object", r->mpath);
    /* name -> entry index (cJSON object lookups are linear) and "already listed" marks: a tensor
     * in two listings would be hashed again and again, which bounds nothing */
    int64_t nt = cJSON_GetArraySize(tensors), j = 0;
    const cJSON **tj = qp_calloc(nt > 0 ? (size_t)nt : 1, sizeof *tj);
    bool *listed = qp_calloc(nt > 0 ? (size_t)nt : 1, sizeof *listed);
    qp_strmap idx;
    memset(&idx, 0, sizeof idx);
    qp_status s = tj && listed ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
    const cJSON *te;
    cJSON_ArrayForEach(te, tensors) {
        if (s != QP_OK || j >= nt) break;
        tj[j] = te;
        if (te->string && qp_strmap_put(&idx, te->string, strlen(te->string), j, NULL) != QP_OK)
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
        j++;
    }
    qp_sha256 *h = NULL;
    if (s == QP_OK) s = qp_sha256_new(&h, e);
    const cJSON *g;
    cJSON_ArrayForEach(g, groups) {
        if (s != QP_OK) break;
        const cJSON *hash = cJSON_GetObjectItemCaseSensitive(g, "hash");
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(g, "tensors");
        if (!cJSON_IsString(hash) || !is_hex64(hash->valuestring) || !cJSON_IsArray(list)) continue;
        const cJSON *tn;
        cJSON_ArrayForEach(tn, list) {
            if (s != QP_OK) break;
            int64_t ti = -1;
            const cJSON *t = cJSON_IsString(tn) && qp_strmap_get(&idx, tn->valuestring,
                                                                 strlen(tn->valuestring), &ti)
                                 ? tj[ti] : NULL;
            uint64_t size;
            const uint8_t *data;
            int file;
            uint64_t off;
            if (!t || !qp_json_get_uint(t, "size", &size)) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: group '%s' lists an unknown tensor", r->mpath,
                            g->string);
                break;
            }
            if (listed[ti]) {
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: group '%s' lists tensor '%s', already listed "
                                               "(a tensor belongs to one group, once)", r->mpath,
                            g->string, tn->valuestring);
                break;
            }
            listed[ti] = true;
            /* Stored bytes (spans gathered again: a group hash covers what is on disk). */
            const qp_tensor *qt = cJSON_GetObjectItemCaseSensitive(t, "spans")
                                      ? qp_model_find(r->m, tn->valuestring) : NULL;
            if (qt && qt->nbytes == size && strcmp(qt->name, tn->valuestring) == 0)
                data = qt->data; /* the gathered copy of a spanning tensor */
            else
                s = tensor_bytes(r, tn->valuestring, t, size, &data, &file, &off, e);
            if (s == QP_OK) s = qp_sha256_update(h, data, (size_t)size, e);
        }
        uint8_t d[QP_SHA256_BYTES];
        char hex[QP_SHA256_HEX];
        if (s == QP_OK) s = qp_sha256_final(h, d, e);
        if (s == QP_OK) {
            qp_hex_encode(d, sizeof d, hex);
            if (strcmp(hex, hash->valuestring) != 0)
                s = qp_fail(e, QP_ERR_VERIFY, "%s: group '%s': SHA-256 %s does not match the "
                                              "manifest's %s", r->mpath, g->string, hex,
                            hash->valuestring);
        }
    }
    qp_sha256_free(h);
    qp_strmap_free(&idx);
    qp_free(tj);
    qp_free(listed);
    return s;
}

static double num_or(const cJSON *o, const char *k, double dflt) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

static int64_t int_or(const cJSON *o, const char *k, int64_t dflt) {
    uint64_t v;
    return qp_json_get_uint(o, k, &v) && v < ((uint64_t)1 << 40) ? (int64_t)v : dflt;
}

static bool bool_or(const cJSON *o, const char *k, bool dflt) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(it) ? cJSON_IsTrue(it) : dflt;
}

static const char *str_or(const cJSON *o, const char *k, const char *dflt) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(it) ? it->valuestring : dflt;
}

/* Gemma's fields as DOPPLER reads them (readers/rdrr.md "Gemma"; converters/convert_rdrr.c
 * writes them): norms 1 + w when rmsNormWeightOffset, q scale from queryPreAttnScalar, soft-caps,
 * the sliding window and the layer pattern (alternating odd: every other layer global, every_n:
 * every period-th with offset period - 1; any other is refused), the local rope base and linear
 * scaling. */
static qp_status read_gemma(rd *r, const cJSON *inf, qp_err *e) {
    qp_arch *a = &r->m->arch;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(inf, "normalization");
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(inf, "attention");
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(inf, "rope");
    const cJSON *outp = cJSON_GetObjectItemCaseSensitive(inf, "output");
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(inf, "layerPattern");
    a->act = QP_ACT_GELU;
    a->rope_style = QP_ROPE_NEOX;
    a->norm_plus_one = bool_or(norm, "rmsNormWeightOffset", false);
    const double qpas = num_or(att, "queryPreAttnScalar", (double)a->head_dim);
    if (!(qpas > 0) || !isfinite(qpas))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: inference.attention.queryPreAttnScalar is not positive", r->mpath);
    if (a->family != QP_FAMILY_GEMMA) a->attn_scale = (float)(1.0 / sqrt(qpas));
    a->attn_softcap = (float)num_or(att, "attnLogitSoftcapping", 0);
    a->final_softcap = (float)num_or(outp, "finalLogitSoftcapping", 0);
    a->sliding_window = int_or(att, "slidingWindow", 0);
    a->rope_theta_swa = (float)num_or(rope, "ropeLocalTheta", a->family == QP_FAMILY_GEMMA2 ? a->rope_theta : 0);
    const char *st = str_or(rope, "ropeScalingType", NULL);
    const double f = num_or(rope, "ropeScalingFactor", 1);
    if (st && (strcmp(st, "linear") != 0 || !(f >= 1) || !isfinite(f)))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: rope scaling '%.32s' of a Gemma model is not read "
                       "(linear with factor >= 1 is)", r->mpath, st);
    if (st) a->rope_freq_scale = (float)(1.0 / f);
    const char *type = str_or(lp, "type", "uniform"), *gp = str_or(lp, "globalPattern", "");
    const int64_t period = int_or(lp, "period", 0), offset = int_or(lp, "offset", -1);
    if (strcmp(type, "alternating") == 0 && strcmp(gp, "odd") == 0) a->swa_pattern = 2;
    else if (strcmp(type, "every_n") == 0 && period >= 2 && period <= 4096 && offset == period - 1)
        a->swa_pattern = (int32_t)period;
    else if (strcmp(type, "uniform") == 0) a->swa_pattern = 1;
    else
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: inference.layerPattern '%.32s' is not one quantpack "
                       "runs for Gemma (alternating odd, every_n with offset period - 1, uniform)",
                       r->mpath, type);
    return QP_OK;
}

static qp_status read_arch(rd *r, const cJSON *man, qp_err *e) {
    qp_model *m = r->m;
    qp_arch *a = &m->arch;
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(man, "architecture");
    const cJSON *inf = cJSON_GetObjectItemCaseSensitive(man, "inference");
    const cJSON *qpx = cJSON_GetObjectItemCaseSensitive(man, "quantpack");
    a->n_layers = int_or(ar, "numLayers", 0);
    a->hidden = int_or(ar, "hiddenSize", 0);
    a->intermediate = int_or(ar, "intermediateSize", 0);
    a->n_heads = int_or(ar, "numAttentionHeads", 0);
    a->n_kv_heads = int_or(ar, "numKeyValueHeads", a->n_heads);
    a->head_dim = int_or(ar, "headDim", 0);
    a->vocab = int_or(ar, "vocabSize", 0);
    a->max_pos = int_or(ar, "maxSeqLen", 0);
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(inf, "normalization");
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(inf, "rope");
    const cJSON *ffn = cJSON_GetObjectItemCaseSensitive(inf, "ffn");
    const cJSON *outp = cJSON_GetObjectItemCaseSensitive(inf, "output");
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(inf, "attention");
    a->norm_eps = (float)num_or(norm, "rmsNormEps", num_or(ar, "rmsNormEps", 1e-5));
    a->rope_theta = (float)num_or(rope, "ropeTheta", num_or(ar, "ropeTheta", 10000.0));
    const char *act = str_or(ffn, "activation", str_or(ar, "hiddenActivation", "silu"));
    a->act = strcmp(act, "relu2") == 0 ? QP_ACT_RELU2
             : strncmp(act, "gelu", 4) == 0 ? QP_ACT_GELU : QP_ACT_SILU;
    a->tie_embeddings = bool_or(outp, "tieWordEmbeddings", false);
    /* DOPPLER's moeConfig (Mixtral-style experts, one tensor each; readers/rdrr.md) */
    const cJSON *moe = cJSON_GetObjectItemCaseSensitive(man, "moeConfig");
    if (moe && !cJSON_IsNull(moe)) {
        a->n_experts = int_or(moe, "numExperts", 0);
        a->n_experts_used = int_or(moe, "numExpertsPerToken", 0);
        const char *fmt = str_or(moe, "expertFormat", "");
        if (a->n_experts <= 0 || a->n_experts_used <= 0 || a->n_experts_used > a->n_experts ||
            strcmp(fmt, "mixtral") != 0)
            return qp_fail(e, a->n_experts > 0 && strcmp(fmt, "mixtral") != 0 ? QP_ERR_UNSUPPORTED
                                                                          : QP_ERR_CORRUPT,
                           "%s: moeConfig {numExperts %lld, numExpertsPerToken %lld, expertFormat "
                           "'%.32s'}: only Mixtral-style experts with 1 <= per token <= experts are "
                           "read", r->mpath, (long long)a->n_experts, (long long)a->n_experts_used,
                           fmt);
    }
    a->qkv_bias = bool_or(att, "attentionBias", false);
    a->bos_id = -1;
    a->eos_id = -1;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(man, "eos_token_id");
    if (cJSON_IsArray(eos)) eos = cJSON_GetArrayItem(eos, 0);
    int64_t eos_id;
    if (qp_json_int(eos, 0, INT32_MAX - 1, &eos_id)) a->eos_id = (int32_t)eos_id;
    /* Family and rope order: from our block when present, else guessed from the names. */
    const char *fam = str_or(qpx, "family", "llama");
    a->family = QP_FAMILY_LLAMA;
    for (int f = 1; f < QP_FAMILY_COUNT; f++)
        if (strcmp(fam, qp_family_name((qp_family)f)) == 0) a->family = (qp_family)f;
    bool gguf_names = false;
    for (int64_t i = 0; i < m->n_tensors; i++)
        if (strncmp(m->tensors[i].name, "blk.", 4) == 0) gguf_names = true;
    const char *rs = str_or(qpx, "ropeStyle", gguf_names ? "norm" : "neox");
    a->rope_style = strcmp(rs, "neox") == 0 ? QP_ROPE_NEOX : QP_ROPE_NORM;
    a->sub_norms = bool_or(qpx, "subNorms", a->family == QP_FAMILY_BITNET);
    a->act_int8 = bool_or(qpx, "activationInt8", a->family == QP_FAMILY_BITNET);
    a->tie_embeddings = bool_or(qpx, "tieEmbeddings", a->tie_embeddings);
    a->qkv_bias = bool_or(qpx, "qkvBias", a->qkv_bias);
    int64_t b = int_or(qpx, "bosTokenId", -1);
    if (b >= 0 && b < 2147483647) a->bos_id = (int32_t)b;
    const char *an = str_or(qpx, "archName", qp_family_name(a->family));
    m->arch_name = qp_arena_strdup(qp_model_arena(m), an[0] ? an : qp_family_name(a->family));
    if (!qp_model_find(m, "output.weight") && qp_model_find(m, "token_embd.weight"))
        a->tie_embeddings = true;
    if (!m->arch_name) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
    if (qp_family_is_gemma(a->family)) {
        qp_status gs = read_gemma(r, inf, e);
        if (gs != QP_OK) return gs;
    }
    const char *keys[] = {"modelId", "modelType", "quantization", "hashAlgorithm"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = str_or(man, keys[i], NULL);
        char k[64];
        snprintf(k, sizeof k, "rdrr.%s", keys[i]);
        qp_status s = v ? qp_model_meta_str(m, k, v, strlen(v), e) : QP_OK;
        if (s != QP_OK) return s;
    }
    return QP_OK;
}

#define RDRR_MAX_FILES 64

/* "files": every file of the package but the shards and manifest.json, with its SHA-256, so the
 * manifest's hashes (and its signature) cover all of it (readers/rdrr.md "Files"). Every listed
 * file must be a regular file inside the folder whose bytes hash to its entry. A manifest without
 * the map (other writers, older packages) is read, with a problem recorded. */
static qp_status check_files(rd *r, const cJSON *man, qp_err *e) {
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files");
    if (!files) {
        qp_model_add_problem(r->m, "manifest has no \"files\" map: its tensors and tokenizer files are "
                             "not covered by its hashes or signature");
        return QP_OK;
    }
    if (!cJSON_IsObject(files) || cJSON_GetArraySize(files) > RDRR_MAX_FILES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: \"files\" must be an object of at most %d file names",
                       r->mpath, RDRR_MAX_FILES);
    qp_status ks = qp_json_unique_keys(files, r->mpath, "\"files\"", e);
    if (ks != QP_OK) return ks;
    const cJSON *f;
    cJSON_ArrayForEach(f, files) {
        const char *name = f->string;
        if (!name || !safe_name(name) || strcmp(name, "manifest.json") == 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: files: '%s' is not a plain file name of the package",
                           r->mpath, name ? name : "");
        if (!cJSON_IsString(f) || !is_hex64(f->valuestring))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: files: '%s' needs 64 lowercase hex digits (SHA-256)",
                           r->mpath, name);
        char *p = qp_path_join(r->dir, name);
        if (!p) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
        char hex[QP_SHA256_HEX];
        qp_status s = qp_path_check_regular(p, QP_FILE_NOFOLLOW, e);
        if (s == QP_OK) s = qp_hash_sha256_file(p, hex, e);
        if (s == QP_OK && strcmp(hex, f->valuestring) != 0)
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: SHA-256 %s, the manifest's files map says %s (the file "
                        "was changed after the package was written)", p, hex, f->valuestring);
        qp_free(p);
        if (s != QP_OK) return s;
    }
    r->files = files;
    return QP_OK;
}

/* A package file the reader uses (tensors file, tokenizer files): when the manifest has a files
 * map it must be listed there, so no file outside the hashes changes what is read. */
static qp_status check_listed(const rd *r, const char *name, qp_err *e) {
    if (!r->files || cJSON_GetObjectItemCaseSensitive(r->files, name)) return QP_OK;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is read but not in the manifest's files map (not covered "
                   "by its hashes or signature)", r->mpath, name);
}

static qp_status read_tokenizer(rd *r, const cJSON *man, const qp_open_opts *o, qp_err *e) {
    qp_model *m = r->m;
    const char *file = NULL;
    bool spm = false;
    char *own = NULL;
    if (o && o->tokenizer_path) {
        file = o->tokenizer_path;
        size_t n = strlen(file);
        spm = n > 6 && strcmp(file + n - 6, ".model") == 0;
    } else {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(man, "tokenizer");
        const char *type = str_or(tok, "type", "");
        const char *name = NULL;
        if (strcmp(type, "sentencepiece") == 0) {
            name = str_or(tok, "sentencepieceModel", "tokenizer.model");
            spm = true;
        } else if (tok) {
            name = str_or(tok, "file", "tokenizer.json");
        }
        if (!name) {
            char *p = qp_path_join(r->dir, "tokenizer.json");
            char *q = qp_path_join(r->dir, "tokenizer.model");
            if (p && qp_path_exists(p)) name = "tokenizer.json";
            else if (q && qp_path_exists(q)) name = "tokenizer.model", spm = true;
            qp_free(p);
            qp_free(q);
        }
        if (!name) {
            qp_model_add_problem(m, "no tokenizer in the directory");
            return QP_OK;
        }
        if (!safe_name(name))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tokenizer file name '%s' is not a plain file name "
                                              "inside the directory (refused)", r->mpath, name);
        own = qp_path_join(r->dir, name);
        if (!own) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", r->mpath);
        file = own;
        /* a package's own tokenizer file: a regular file inside it, never a link out of it, and
           covered by the manifest's files map when it has one */
        qp_status cs = qp_path_check_regular(own, QP_FILE_NOFOLLOW | QP_FILE_ABSENT_OK, e);
        if (cs == QP_OK && qp_path_exists(own)) cs = check_listed(r, name, e);
        if (cs != QP_OK) {
            qp_free(own);
            return cs;
        }
    }
    qp_err le = {0};
    qp_status s = QP_OK;
    if (spm) {
        s = qp_vocab_read_spm_model(m, file, &le);
    } else {
        char *cfg = qp_path_join(r->dir, "tokenizer_config.json");
        bool has_cfg = cfg && qp_path_exists(cfg);
        if (has_cfg) s = qp_path_check_regular(cfg, QP_FILE_NOFOLLOW, e);
        if (has_cfg && s == QP_OK && !(o && o->tokenizer_path)) s = check_listed(r, "tokenizer_config.json", e);
        if (s != QP_OK) {
            qp_free(cfg);
            qp_free(own);
            return s;
        }
        s = qp_hf_tokenizer_read(m, file, has_cfg ? cfg : NULL, &le);
        qp_free(cfg);
    }
    if (s != QP_OK) {
        if (s == QP_ERR_NOMEM) {
            qp_free(own);
            return qp_fail(e, s, "%s", le.msg);
        }
        qp_model_add_problem(m, "tokenizer not loaded: %s", le.msg);
    }
    qp_free(own);
    /* The manifest's ids and flags (DOPPLER's tokenizer reads them) override the file's when
     * they name a token of the vocabulary; a tokenizer given with --tokenizer keeps its own. */
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(man, "tokenizer");
    if (s == QP_OK && tok && !(o && o->tokenizer_path)) {
        static const char *const keys[4] = {"bosTokenId", "eosTokenId", "unkTokenId", "padTokenId"};
        int32_t *dst[4] = {&m->vocab.bos_id, &m->vocab.eos_id, &m->vocab.unk_id, &m->vocab.pad_id};
        for (int k = 0; k < 4; k++) {
            int64_t id = int_or(tok, keys[k], -1);
            if (id >= 0 && id < m->vocab.n_tokens) *dst[k] = (int32_t)id;
        }
        m->vocab.add_bos = bool_or(tok, "addBosToken", m->vocab.add_bos);
        m->vocab.add_eos = bool_or(tok, "addEosToken", m->vocab.add_eos);
    }
    /* the chat template DOPPLER keeps in tokenizer.chatTemplate (readers/rdrr.md) */
    const cJSON *ct = tok ? cJSON_GetObjectItemCaseSensitive(tok, "chatTemplate") : NULL;
    if (cJSON_IsString(ct) && !qp_model_chat_template(m)) {
        qp_status cs = qp_model_meta_str(m, "tokenizer.chat_template", ct->valuestring,
                                         strlen(ct->valuestring), e);
        if (cs != QP_OK) return cs;
    }
    if (m->arch.bos_id < 0) m->arch.bos_id = m->vocab.bos_id;
    if (m->arch.eos_id < 0) m->arch.eos_id = m->vocab.eos_id;
    /* as the safetensors reader: ids the manifest names fill what tokenizer.json leaves unset
     * (the package carries no tokenizer_config.json) */
    if (m->vocab.n_tokens > 0) {
        if (m->vocab.bos_id < 0 && m->arch.bos_id < m->vocab.n_tokens) m->vocab.bos_id = m->arch.bos_id;
        if (m->vocab.eos_id < 0 && m->arch.eos_id < m->vocab.n_tokens) m->vocab.eos_id = m->arch.eos_id;
    }
    return QP_OK;
}

/* Byte offset of the first "\u0000" escape inside a JSON string of text, or -1. cJSON decodes it
 * to a NUL byte, which would silently cut a shard or tensor name at that point. */
static long escaped_nul_at(const char *text, size_t len) {
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        if (!in_str) {
            in_str = text[i] == '"';
        } else if (text[i] == '"') {
            in_str = false;
        } else if (text[i] == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0)
                return (long)i;
            i++; /* the escaped character */
        }
    }
    return -1;
}

/* Parses a manifest or tensors file: CORRUPT when not JSON or when a string holds "\u0000". */
static qp_status parse_json(const char *file, const char *text, size_t len, cJSON **out, qp_err *e) {
    long nul = escaped_nul_at(text, len);
    if (nul >= 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: a string holds an escaped NUL (\\u0000) at byte %ld "
                       "(a name would be cut there; refused)", file, nul);
    if (!(*out = cJSON_ParseWithLength(text, len)))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON (truncated or damaged near byte %zu of "
                       "%zu)", file, (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - text : 0), len);
    return QP_OK;
}

qp_status qp_rdrr_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    rd r;
    memset(&r, 0, sizeof r);
    r.m = m;
    r.dir = path;
    char *mp = qp_path_join(path, "manifest.json");
    if (!mp) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    r.mpath = mp;
    char *text = NULL, *ttext = NULL;
    size_t len = 0, tlen = 0;
    cJSON *man = NULL, *tfile = NULL;
    qp_status s = qp_file_read_all_flags(mp, QP_FILE_NOFOLLOW, RDRR_MAX_MANIFEST, &text, &len, e);
    if (s == QP_OK) s = parse_json(mp, text, len, &man, e);
    if (s == QP_OK && !cJSON_IsObject(man))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: the manifest is not a JSON object", mp);
    /* cJSON reads the first of two equal keys, DOPPLER's JSON.parse the last: refuse both */
    if (s == QP_OK) s = qp_json_unique_keys(man, mp, "the manifest", e);
    if (s == QP_OK) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(man, "version");
        double ver = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsString(v) ? strtod(v->valuestring, NULL) : 0;
        if (!(ver >= 1))
            s = qp_fail(e, QP_ERR_FORMAT, "%s: \"version\" must be a number >= 1", mp);
        else if (ver >= 2) /* DOPPLER writes RDRR_VERSION 1; a later layout is not guessed at */
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: manifest \"version\" %g: this reader knows "
                        "version 1 only", mp, ver);
        m->format_version = ver >= 1 && ver < 1000 ? (uint32_t)ver : 0;
    }
    if (s == QP_OK) {
        const char *ha = str_or(man, "hashAlgorithm", "sha256");
        if (strcmp(ha, "sha256") != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: hashAlgorithm \"%s\": only sha256 is checked", mp, ha);
    }
    if (s == QP_OK) s = check_files(&r, man, e);
    if (s == QP_OK) s = read_shards(&r, man, e);
    const cJSON *tensors = NULL;
    if (s == QP_OK) {
        tensors = cJSON_GetObjectItemCaseSensitive(man, "tensors");
        if (!tensors) {
            const char *tf = str_or(man, "tensorsFile", NULL);
            if (!tf) s = qp_fail(e, QP_ERR_CORRUPT, "%s: neither \"tensors\" nor \"tensorsFile\"", mp);
            else if (!safe_name(tf))
                s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensorsFile '%s' is not a plain file name inside "
                                               "the directory (refused)", mp, tf);
            else if ((s = check_listed(&r, tf, e)) == QP_OK) {
                char *tp = qp_path_join(path, tf);
                s = tp ? qp_file_read_all_flags(tp, QP_FILE_NOFOLLOW, RDRR_MAX_MANIFEST, &ttext, &tlen, e)
                       : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", mp);
                if (s == QP_OK) s = parse_json(tp, ttext, tlen, &tfile, e);
                qp_free(tp);
                tensors = tfile;
            }
        }
    }
    if (s == QP_OK && !cJSON_IsObject(tensors))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: \"tensors\" must be an object", mp);
    if (s == QP_OK && cJSON_GetArraySize(tensors) > RDRR_MAX_TENSORS)
        s = qp_fail(e, QP_ERR_LIMIT, "%s: too many tensors", mp);
    if (s == QP_OK) s = qp_json_unique_keys(tensors, mp, "\"tensors\"", e);
    if (s == QP_OK) s = check_overlaps(&r, tensors, e);
    const cJSON *roots = NULL;
    if (s == QP_OK) {
        const cJSON *bm = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(man, "integrityExtensions"), "blockMerkle");
        if (bm) {
            uint64_t bs;
            if (!qp_json_get_uint(bm, "blockSize", &bs) ||
                bs != QP_MERKLE_BLOCK_DEFAULT)
                qp_model_add_problem(m, "blockMerkle.blockSize is not 1 MiB: Merkle roots not checked");
            else roots = cJSON_GetObjectItemCaseSensitive(bm, "roots");
        }
    }
    const cJSON *t;
    if (s == QP_OK) {
        cJSON_ArrayForEach(t, tensors) {
            if ((s = read_tensor(&r, t, roots, e)) != QP_OK) break;
        }
    }
    if (s == QP_OK && m->n_tensors == 0) s = qp_fail(e, QP_ERR_CORRUPT, "%s: no tensors", mp);
    if (s == QP_OK) s = qp_model_finish(m, e);
    if (s == QP_OK) s = check_groups(&r, man, tensors, e);
    if (s == QP_OK) s = read_arch(&r, man, e);
    if (s == QP_OK) s = read_tokenizer(&r, man, o, e);
    cJSON_Delete(man);
    cJSON_Delete(tfile);
    qp_free(text);
    qp_free(ttext);
    qp_free(mp);
    return s;
}
