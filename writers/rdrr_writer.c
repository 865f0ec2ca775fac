/* RDRR directory writer. Format and placement rules: readers/rdrr.md. */
#include "writers/rdrr_writer.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "core/hash.h"
#include "quantpack/core.h"

typedef struct rdrr_group {
    char id[32];
    char type[16];
    int64_t layer; /* -1 when none */
    int64_t expert; /* "layer.N.expert.M": M; -1 otherwise */
    qp_sha256 *h;
    cJSON *tensors; /* array of names */
    int *shards;
    int n_shards, cap_shards;
} rdrr_group;

static const char *const k_rdrr_files[] = {"manifest.json", QP_RDRR_SIG_FILE, "tensors.json",
                                           "shard_*.bin", "tokenizer.json", "tokenizer.model",
                                           "tokenizer_config.json", NULL};
const qp_outdir_kind qp_rdrr_outdir_kind = {"RDRR package", "manifest.json", k_rdrr_files};

struct qp_rdrr_writer {
    qp_rdrr_writer_opts o;
    uint64_t shard_size;
    qp_outdir *dir;
    char *out_path;
    /* current shard */
    qp_outfile *sf;
    int shard_index;       /* index of the open shard, or of the next one */
    uint64_t pos;          /* bytes in the open shard */
    qp_sha256 *shard_h;
    uint64_t total;        /* bytes in closed shards */
    cJSON *shards;         /* array */
    /* tensors */
    cJSON *tensors;        /* object name -> entry */
    cJSON *roots;          /* object name -> "sha256:..." */
    cJSON *files;          /* object: every file but the shards and manifest.json -> its sha256
                              (the manifest and its signature cover them; readers/rdrr.md) */
    int64_t n_tensors;
    /* current tensor */
    cJSON *cur;            /* entry (owned by tensors) */
    cJSON *cur_spans;      /* array or NULL when a single span so far */
    char *cur_name;
    uint64_t cur_left;
    uint64_t cur_span_size;
    rdrr_group *cur_group;
    qp_merkle *merkle;
    /* groups */
    rdrr_group *groups;
    int n_groups, cap_groups;
    qp_status failed;
};

static const uint8_t k_zeros[QP_RDRR_ALIGN];

/* ---- names -------------------------------------------------------------------------------- */

static bool has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static long layer_index(const char *name) {
    const char *s = name;
    if (has_prefix(s, "blk.")) {
        s += 4;
    } else {
        /* /layers?[._](\d+)/ as DOPPLER's classifier */
        const char *p = name;
        s = NULL;
        while ((p = strstr(p, "layer")) != NULL) {
            const char *q = p + 5;
            if (*q == 's') q++;
            if ((*q == '.' || *q == '_') && isdigit((unsigned char)q[1])) {
                s = q + 1;
                break;
            }
            p += 5;
        }
        if (!s) return -1;
    }
    if (!isdigit((unsigned char)*s)) return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v > 100000000) return -1;
        s++;
    }
    return v;
}

/* DOPPLER's MoE names (its classification.js): /experts?[._](\d+)/ is an expert, E its number;
 * block_sparse_moe.gate / router / moe.gate the router. */
static long expert_index(const char *name) {
    for (const char *p = strstr(name, "expert"); p; p = strstr(p + 1, "expert")) {
        const char *d = p + 6 + (p[6] == 's');
        if ((*d == '.' || *d == '_') && isdigit((unsigned char)d[1])) return strtol(d + 1, NULL, 10);
    }
    return -1;
}

static bool is_router(const char *name) {
    return strstr(name, "block_sparse_moe.gate") || strstr(name, "router") || strstr(name, "moe.gate");
}

const char *qp_rdrr_group_of(const char *name, char *buf, size_t cap) {
    const char *r = "";
    long li;
    if (has_prefix(name, "blk.") && (li = layer_index(name)) >= 0) {
        snprintf(buf, cap, "layer.%ld", li);
        return buf;
    }
    if (strstr(name, "embed_tokens") || strstr(name, "token_embd") || strstr(name, "wte.weight") ||
        strstr(name, "word_embeddings"))
        r = "embed";
    else if (strstr(name, "lm_head") || strcmp(name, "output.weight") == 0 ||
             strcmp(name, "output.bias") == 0 || has_prefix(name, "output_norm.") ||
             has_prefix(name, "model.norm.") || strcmp(name, "norm.weight") == 0 ||
             strcmp(name, "norm.bias") == 0 || strstr(name, "norm_f") || has_prefix(name, "ln_f.") ||
             strstr(name, ".ln_f.") || (strstr(name, "final") && strstr(name, "norm")))
        r = "head";
    else if ((li = layer_index(name)) >= 0) {
        long ex = expert_index(name);
        if (ex >= 0) snprintf(buf, cap, "layer.%ld.expert.%ld", li, ex);
        else if (is_router(name)) snprintf(buf, cap, "layer.%ld.shared", li);
        else snprintf(buf, cap, "layer.%ld", li);
        return buf;
    }
    snprintf(buf, cap, "%s", r);
    return buf;
}

const char *qp_rdrr_role_of(const char *name) {
    if (strstr(name, "embed_tokens") || strstr(name, "token_embd.weight") ||
        strstr(name, "wte.weight") || strstr(name, "word_embeddings"))
        return "embedding";
    if (strstr(name, "lm_head")) return "lm_head";
    size_t n = strlen(name);
    if (n >= 13 && strcmp(name + n - 13, "output.weight") == 0 && !strstr(name, "attn_"))
        return "lm_head";
    if (strstr(name, "shared_expert") || expert_index(name) >= 0) return "expert";
    if (is_router(name)) return "router";
    if (strstr(name, "norm")) return "norm";
    if (n >= 7 && strcmp(name + n - 7, ".weight") == 0) return "matmul";
    return "other";
}

static bool plain_file_name(const char *s) {
    if (!s[0] || s[0] == '.' || strlen(s) > 200) return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-')) return false;
    return true;
}

/* ---- shards ------------------------------------------------------------------------------- */

static qp_status wfail(qp_rdrr_writer *w, qp_status s) {
    if (s != QP_OK && w->failed == QP_OK) w->failed = s;
    return s;
}

static qp_status open_shard(qp_rdrr_writer *w, qp_err *e) {
    char name[32];
    snprintf(name, sizeof name, "shard_%05d.bin", w->shard_index);
    char *p = qp_outdir_join(w->dir, name);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    qp_status s = qp_outfile_open(p, &w->sf, e);
    qp_free(p);
    w->pos = 0;
    return s;
}

static qp_status close_shard(qp_rdrr_writer *w, qp_err *e) {
    if (!w->sf) return QP_OK;
    qp_outfile *f = w->sf;
    w->sf = NULL;
    uint8_t d[QP_SHA256_BYTES];
    char hex[QP_SHA256_HEX], name[32];
    qp_status s = qp_sha256_final(w->shard_h, d, e);
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return s;
    }
    if ((s = qp_outfile_commit(f, e)) != QP_OK) return s;
    qp_hex_encode(d, sizeof d, hex);
    snprintf(name, sizeof name, "shard_%05d.bin", w->shard_index);
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddItemToArray(w->shards, j)) {
        cJSON_Delete(j);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    }
    if (!cJSON_AddNumberToObject(j, "index", w->shard_index) ||
        !cJSON_AddStringToObject(j, "filename", name) ||
        !cJSON_AddNumberToObject(j, "size", (double)w->pos) ||
        !cJSON_AddStringToObject(j, "hash", hex) || !cJSON_AddStringToObject(j, "blake3", hex) ||
        !cJSON_AddStringToObject(j, "hashAlgorithm", "sha256") ||
        !cJSON_AddNumberToObject(j, "offset", (double)w->total))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    w->total += w->pos;
    w->shard_index++;
    w->pos = 0;
    return QP_OK;
}

/* Writes bytes into the open shard (hashing them). */
static qp_status shard_put(qp_rdrr_writer *w, const void *data, size_t n, qp_err *e) {
    qp_status s = qp_outfile_write(w->sf, data, n, e);
    if (s == QP_OK) s = qp_sha256_update(w->shard_h, data, n, e);
    if (s == QP_OK) w->pos += n;
    return s;
}

static qp_status shard_pad_to(qp_rdrr_writer *w, uint64_t target, qp_err *e) {
    qp_status s = QP_OK;
    while (s == QP_OK && w->pos < target) {
        uint64_t n = target - w->pos;
        if (n > sizeof k_zeros) n = sizeof k_zeros;
        s = shard_put(w, k_zeros, (size_t)n, e);
    }
    return s;
}

/* ---- groups ------------------------------------------------------------------------------- */

static qp_status group_get(qp_rdrr_writer *w, const char *id, rdrr_group **out, qp_err *e) {
    for (int i = 0; i < w->n_groups; i++)
        if (strcmp(w->groups[i].id, id) == 0) {
            *out = &w->groups[i];
            return QP_OK;
        }
    if (w->n_groups == w->cap_groups) {
        int cap = w->cap_groups ? w->cap_groups * 2 : 16;
        rdrr_group *g = qp_realloc(w->groups, (size_t)cap * sizeof *g);
        if (!g) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
        w->groups = g;
        w->cap_groups = cap;
    }
    rdrr_group *g = &w->groups[w->n_groups];
    memset(g, 0, sizeof *g);
    snprintf(g->id, sizeof g->id, "%s", id);
    g->layer = -1;
    g->expert = -1;
    if (has_prefix(id, "layer.")) {
        char *end;
        g->layer = strtol(id + 6, &end, 10);
        if (has_prefix(end, ".expert.")) g->expert = strtol(end + 8, NULL, 10);
        /* DOPPLER's getGroupType: "layer.N.expert.M" is an expert group */
        snprintf(g->type, sizeof g->type, "%s", g->expert >= 0 ? "expert" : "layer");
    } else {
        snprintf(g->type, sizeof g->type, "%s", id);
    }
    g->tensors = cJSON_CreateArray();
    qp_status s = g->tensors ? qp_sha256_new(&g->h, e)
                             : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    if (s != QP_OK) {
        cJSON_Delete(g->tensors);
        return s;
    }
    w->n_groups++;
    *out = g;
    return QP_OK;
}

static qp_status group_add_shard(qp_rdrr_writer *w, rdrr_group *g, int shard, qp_err *e) {
    if (!g) return QP_OK;
    for (int i = 0; i < g->n_shards; i++)
        if (g->shards[i] == shard) return QP_OK;
    if (g->n_shards == g->cap_shards) {
        int cap = g->cap_shards ? g->cap_shards * 2 : 4;
        int *p = qp_realloc(g->shards, (size_t)cap * sizeof *p);
        if (!p) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
        g->shards = p;
        g->cap_shards = cap;
    }
    g->shards[g->n_shards++] = shard; /* shard indices only grow: the list stays sorted */
    return QP_OK;
}

/* ---- writer ------------------------------------------------------------------------------- */

qp_status qp_rdrr_writer_open(const char *dir, const qp_rdrr_writer_opts *o, qp_rdrr_writer **out,
                              qp_err *e) {
    static const qp_rdrr_writer_opts k_default = {0};
    if (!dir || !out) return qp_fail(e, QP_ERR_ARG, "rdrr writer: NULL argument");
    if (!o) o = &k_default;
    uint64_t ss = o->shard_size ? o->shard_size : QP_RDRR_SHARD_DEFAULT;
    if (ss < QP_RDRR_MIN_SHARD)
        return qp_fail(e, QP_ERR_ARG, "%s: shard size %llu is below the minimum %llu", dir,
                       (unsigned long long)ss, (unsigned long long)QP_RDRR_MIN_SHARD);
    if (sodium_init() < 0) return qp_fail(e, QP_ERR_INTERNAL, "libsodium initialisation failed");
    qp_rdrr_writer *w = qp_calloc(1, sizeof *w);
    if (!w) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    w->o = *o;
    w->shard_size = ss;
    w->out_path = qp_strdup(dir);
    w->shards = cJSON_CreateArray();
    w->tensors = cJSON_CreateObject();
    w->roots = cJSON_CreateObject();
    w->files = cJSON_CreateObject();
    qp_status s = QP_OK;
    if (!w->out_path || !w->shards || !w->tensors || !w->roots || !w->files)
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    if (s == QP_OK) s = qp_sha256_new(&w->shard_h, e);
    if (s == QP_OK) s = qp_merkle_new(QP_MERKLE_BLOCK_DEFAULT, &w->merkle, e);
    if (s == QP_OK) s = qp_outdir_open(dir, &qp_rdrr_outdir_kind, o->replace, &w->dir, e);
    if (s != QP_OK) {
        qp_rdrr_writer_abort(w);
        return s;
    }
    *out = w;
    return QP_OK;
}

static qp_status end_tensor(qp_rdrr_writer *w, qp_err *e) {
    if (!w->cur) return QP_OK;
    uint8_t root[QP_SHA256_BYTES];
    char hex[8 + QP_SHA256_HEX];
    qp_status s = qp_merkle_final(w->merkle, root, e);
    if (s != QP_OK) return s;
    memcpy(hex, "sha256:", 7);
    qp_hex_encode(root, sizeof root, hex + 7);
    if (!w->o.no_merkle && !cJSON_AddStringToObject(w->roots, w->cur_name, hex))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    if (w->cur_spans) {
        cJSON *last = cJSON_GetArrayItem(w->cur_spans, cJSON_GetArraySize(w->cur_spans) - 1);
        cJSON_SetNumberHelper(cJSON_GetObjectItemCaseSensitive(last, "size"),
                              (double)w->cur_span_size);
    }
    w->cur = NULL;
    w->cur_spans = NULL;
    qp_free(w->cur_name);
    w->cur_name = NULL;
    w->cur_group = NULL;
    return QP_OK;
}

static qp_status add_span(qp_rdrr_writer *w, qp_err *e) {
    /* The previous span is complete: record its size, then open a span at offset 0 of the new
     * shard. */
    if (!w->cur_spans) {
        w->cur_spans = cJSON_AddArrayToObject(w->cur, "spans");
        if (!w->cur_spans) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
        cJSON *first = cJSON_CreateObject();
        if (!first || !cJSON_AddItemToArray(w->cur_spans, first) ||
            !cJSON_AddNumberToObject(first, "shardIndex",
                                     cJSON_GetObjectItemCaseSensitive(w->cur, "shard")->valuedouble) ||
            !cJSON_AddNumberToObject(first, "offset",
                                     cJSON_GetObjectItemCaseSensitive(w->cur, "offset")->valuedouble) ||
            !cJSON_AddNumberToObject(first, "size", (double)w->cur_span_size))
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    } else {
        cJSON *last = cJSON_GetArrayItem(w->cur_spans, cJSON_GetArraySize(w->cur_spans) - 1);
        cJSON_SetNumberHelper(cJSON_GetObjectItemCaseSensitive(last, "size"),
                              (double)w->cur_span_size);
    }
    cJSON *sp = cJSON_CreateObject();
    if (!sp || !cJSON_AddItemToArray(w->cur_spans, sp) ||
        !cJSON_AddNumberToObject(sp, "shardIndex", w->shard_index) ||
        !cJSON_AddNumberToObject(sp, "offset", 0) || !cJSON_AddNumberToObject(sp, "size", 0))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    w->cur_span_size = 0;
    return group_add_shard(w, w->cur_group, w->shard_index, e);
}

qp_status qp_rdrr_writer_begin_tensor(qp_rdrr_writer *w, const qp_rdrr_tensor_info *t, qp_err *e) {
    if (w->failed) return qp_fail(e, w->failed, "%s: writer failed earlier", w->out_path);
    if (w->cur && w->cur_left)
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: tensor '%s' still has %llu bytes to write",
                                w->out_path, w->cur_name, (unsigned long long)w->cur_left));
    qp_status s = end_tensor(w, e);
    if (s != QP_OK) return wfail(w, s);
    if (!t || !t->name || !t->name[0] || !t->dtype || t->size == 0 || t->n_dims < 0 ||
        t->n_dims > 8)
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: bad tensor description ('%s')", w->out_path,
                                t && t->name ? t->name : "?"));
    if (cJSON_GetObjectItemCaseSensitive(w->tensors, t->name))
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: duplicate tensor '%s'", w->out_path, t->name));
    if (t->size > ((uint64_t)1 << 53))
        return wfail(w, qp_fail(e, QP_ERR_LIMIT, "%s: tensor '%s' too large", w->out_path, t->name));

    /* Placement: 4 KiB aligned in the open shard when it fits; else a new shard when the tensor
     * fits in one; else span shards starting in the space left here. */
    if (w->sf && w->pos > 0) {
        uint64_t aligned = (w->pos + QP_RDRR_ALIGN - 1) / QP_RDRR_ALIGN * QP_RDRR_ALIGN;
        if (aligned + t->size <= w->shard_size || (t->size > w->shard_size && aligned < w->shard_size)) {
            s = shard_pad_to(w, aligned, e);
        } else {
            s = close_shard(w, e);
        }
        if (s != QP_OK) return wfail(w, s);
    }
    if (!w->sf && (s = open_shard(w, e)) != QP_OK) return wfail(w, s);

    char gbuf[32];
    const char *gid = t->group ? t->group : qp_rdrr_group_of(t->name, gbuf, sizeof gbuf);
    rdrr_group *g = NULL;
    if (gid[0] && (s = group_get(w, gid, &g, e)) != QP_OK) return wfail(w, s);

    cJSON *j = cJSON_CreateObject();
    if (!j) return wfail(w, qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path));
    cJSON_AddItemToObject(w->tensors, t->name, j);
    bool ok = (!gid[0] || cJSON_AddStringToObject(j, "group", gid)) &&
              cJSON_AddNumberToObject(j, "shard", w->shard_index) &&
              cJSON_AddNumberToObject(j, "offset", (double)w->pos) &&
              cJSON_AddNumberToObject(j, "size", (double)t->size);
    cJSON *shape = ok ? cJSON_AddArrayToObject(j, "shape") : NULL;
    ok = shape != NULL;
    for (int i = 0; ok && i < t->n_dims; i++)
        ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[i]));
    ok = ok && cJSON_AddStringToObject(j, "dtype", t->dtype) &&
         cJSON_AddStringToObject(j, "role", t->role ? t->role : qp_rdrr_role_of(t->name)) &&
         (!t->layout || cJSON_AddStringToObject(j, "layout", t->layout));
    w->cur_name = qp_strdup(t->name);
    if (g) ok = ok && cJSON_AddItemToArray(g->tensors, cJSON_CreateString(t->name));
    if (!ok || !w->cur_name)
        return wfail(w, qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path));
    w->cur = j;
    w->cur_spans = NULL;
    w->cur_left = t->size;
    w->cur_span_size = 0;
    w->cur_group = g;
    w->n_tensors++;
    return wfail(w, group_add_shard(w, g, w->shard_index, e));
}

qp_status qp_rdrr_writer_write(qp_rdrr_writer *w, const void *data, size_t n, qp_err *e) {
    if (w->failed) return qp_fail(e, w->failed, "%s: writer failed earlier", w->out_path);
    if (!w->cur || n > w->cur_left)
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: %zu bytes written past the declared size of "
                                               "tensor '%s'", w->out_path, n,
                                w->cur_name ? w->cur_name : "(none)"));
    const uint8_t *p = data;
    qp_status s = QP_OK;
    while (n > 0 && s == QP_OK) {
        if (w->pos == w->shard_size) {
            if ((s = close_shard(w, e)) != QP_OK || (s = open_shard(w, e)) != QP_OK ||
                (s = add_span(w, e)) != QP_OK)
                break;
        }
        uint64_t room = w->shard_size - w->pos;
        size_t take = n < room ? n : (size_t)room;
        s = shard_put(w, p, take, e);
        if (s == QP_OK) s = qp_merkle_update(w->merkle, p, take, e);
        if (s == QP_OK && w->cur_group) s = qp_sha256_update(w->cur_group->h, p, take, e);
        w->cur_left -= take;
        w->cur_span_size += take;
        p += take;
        n -= take;
    }
    return wfail(w, s);
}

/* files[name] = SHA-256 of the bytes written under that name. */
static qp_status add_file_hash(qp_rdrr_writer *w, const char *name, const void *data, size_t n,
                               qp_err *e) {
    uint8_t d[QP_SHA256_BYTES];
    char hex[QP_SHA256_HEX];
    qp_status s = qp_sha256_once(data, n, d, e);
    if (s != QP_OK) return s;
    qp_hex_encode(d, sizeof d, hex);
    if (!cJSON_AddStringToObject(w->files, name, hex))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    return QP_OK;
}

qp_status qp_rdrr_writer_add_file(qp_rdrr_writer *w, const char *name, const void *data, size_t n,
                                  qp_err *e) {
    if (w->failed) return qp_fail(e, w->failed, "%s: writer failed earlier", w->out_path);
    if (!plain_file_name(name) || strcmp(name, "manifest.json") == 0 ||
        strcmp(name, "tensors.json") == 0 || has_prefix(name, "shard_"))
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: side file name '%s' not allowed", w->out_path,
                                name));
    if (cJSON_GetObjectItemCaseSensitive(w->files, name))
        return wfail(w, qp_fail(e, QP_ERR_ARG, "%s: side file '%s' added twice", w->out_path, name));
    char *p = qp_outdir_join(w->dir, name);
    if (!p) return wfail(w, qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path));
    qp_status s = qp_file_write_atomic(p, data, n, e);
    qp_free(p);
    if (s == QP_OK) s = add_file_hash(w, name, data, n, e);
    return wfail(w, s);
}

uint64_t qp_rdrr_writer_total_bytes(const qp_rdrr_writer *w) { return w->total + w->pos; }
int qp_rdrr_writer_n_shards(const qp_rdrr_writer *w) { return w->shard_index + (w->sf ? 1 : 0); }

static void free_groups(qp_rdrr_writer *w) {
    for (int i = 0; i < w->n_groups; i++) {
        qp_sha256_free(w->groups[i].h);
        cJSON_Delete(w->groups[i].tensors);
        qp_free(w->groups[i].shards);
    }
    qp_free(w->groups);
    w->groups = NULL;
    w->n_groups = 0;
}

void qp_rdrr_writer_abort(qp_rdrr_writer *w) {
    if (!w) return;
    qp_outfile_abort(w->sf);
    qp_outdir_abort(w->dir);
    qp_sha256_free(w->shard_h);
    qp_merkle_free(w->merkle);
    cJSON_Delete(w->shards);
    cJSON_Delete(w->tensors);
    cJSON_Delete(w->roots);
    cJSON_Delete(w->files);
    free_groups(w);
    qp_free(w->cur_name);
    qp_free(w->out_path);
    qp_free(w);
}

static qp_status write_json(qp_rdrr_writer *w, const char *name, const cJSON *j, char **keep,
                            size_t *keep_len, qp_err *e) {
    char *text = cJSON_Print(j);
    if (!text) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory printing %s", w->out_path, name);
    size_t len = strlen(text);
    char *p = qp_outdir_join(w->dir, name);
    qp_status s = p ? qp_file_write_atomic(p, text, len, e)
                    : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    qp_free(p);
    if (s == QP_OK && keep) {
        *keep = text;
        *keep_len = len;
    } else {
        cJSON_free(text);
    }
    return s;
}

static qp_status sign_manifest(qp_rdrr_writer *w, const char *text, size_t len, qp_err *e) {
    uint8_t sig[crypto_sign_BYTES], pk[crypto_sign_PUBLICKEYBYTES];
    if (crypto_sign_detached(sig, NULL, (const unsigned char *)text, len, w->o.sign_sk) != 0)
        return qp_fail(e, QP_ERR_INTERNAL, "%s: Ed25519 signing failed", w->out_path);
    if (crypto_sign_ed25519_sk_to_pk(pk, w->o.sign_sk) != 0)
        return qp_fail(e, QP_ERR_INTERNAL, "%s: bad Ed25519 secret key", w->out_path);
    char sh[2 * sizeof sig + 1], ph[2 * sizeof pk + 1], dh[QP_SHA256_HEX];
    uint8_t d[QP_SHA256_BYTES];
    qp_status s = qp_sha256_once(text, len, d, e);
    if (s != QP_OK) return s;
    qp_hex_encode(sig, sizeof sig, sh);
    qp_hex_encode(pk, sizeof pk, ph);
    qp_hex_encode(d, sizeof d, dh);
    cJSON *j = cJSON_CreateObject();
    bool ok = j && cJSON_AddStringToObject(j, "algorithm", "ed25519") &&
              cJSON_AddStringToObject(j, "signedFile", "manifest.json") &&
              cJSON_AddStringToObject(j, "signedSha256", dh) &&
              cJSON_AddStringToObject(j, "publicKey", ph) &&
              cJSON_AddStringToObject(j, "signature", sh);
    s = ok ? write_json(w, QP_RDRR_SIG_FILE, j, NULL, NULL, e)
           : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    cJSON_Delete(j);
    return s;
}

qp_status qp_rdrr_writer_finish(qp_rdrr_writer *w, cJSON *fields, qp_err *e) {
    qp_status s = w->failed ? qp_fail(e, w->failed, "%s: writer failed earlier", w->out_path) : QP_OK;
    if (s == QP_OK && w->cur && w->cur_left)
        s = qp_fail(e, QP_ERR_ARG, "%s: tensor '%s' is missing %llu bytes", w->out_path,
                    w->cur_name, (unsigned long long)w->cur_left);
    if (s == QP_OK) s = end_tensor(w, e);
    if (s == QP_OK && w->n_tensors == 0)
        s = qp_fail(e, QP_ERR_ARG, "%s: an RDRR model needs at least one tensor", w->out_path);
    if (s == QP_OK) s = close_shard(w, e);
    if (s == QP_OK && !fields) s = qp_fail(e, QP_ERR_ARG, "%s: no manifest fields", w->out_path);
    cJSON *m = fields;
    fields = NULL;
    if (s == QP_OK && !cJSON_GetObjectItemCaseSensitive(m, "hashAlgorithm") &&
        !cJSON_AddStringToObject(m, "hashAlgorithm", "sha256"))
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    /* groups */
    cJSON *groups = s == QP_OK ? cJSON_AddObjectToObject(m, "groups") : NULL;
    if (s == QP_OK && !groups) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    for (int i = 0; s == QP_OK && i < w->n_groups; i++) {
        rdrr_group *g = &w->groups[i];
        uint8_t d[QP_SHA256_BYTES];
        char hex[QP_SHA256_HEX];
        if ((s = qp_sha256_final(g->h, d, e)) != QP_OK) break;
        qp_hex_encode(d, sizeof d, hex);
        cJSON *j = cJSON_AddObjectToObject(groups, g->id);
        cJSON *sh = j ? cJSON_AddArrayToObject(j, "shards") : NULL;
        bool ok = j && cJSON_AddStringToObject(j, "type", g->type) &&
                  cJSON_AddStringToObject(j, "version", "1.0.0") && sh;
        for (int k = 0; ok && k < g->n_shards; k++)
            ok = cJSON_AddItemToArray(sh, cJSON_CreateNumber(g->shards[k]));
        if (ok) {
            cJSON_AddItemToObject(j, "tensors", g->tensors);
            g->tensors = NULL;
        }
        ok = ok && cJSON_AddStringToObject(j, "hash", hex) &&
             (g->layer < 0 || cJSON_AddNumberToObject(j, "layerIndex", (double)g->layer)) &&
             (g->expert < 0 || cJSON_AddNumberToObject(j, "expertIndex", (double)g->expert));
        if (!ok) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    }
    if (s == QP_OK) {
        cJSON_AddItemToObject(m, "shards", w->shards);
        w->shards = NULL;
        if (!cJSON_AddStringToObject(m, "tensorsFile", "tensors.json"))
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    }
    char *ttext = NULL;
    size_t tlen = 0;
    if (s == QP_OK) s = write_json(w, "tensors.json", w->tensors, &ttext, &tlen, e);
    if (s == QP_OK) s = add_file_hash(w, "tensors.json", ttext, tlen, e);
    if (ttext) cJSON_free(ttext);
    if (s == QP_OK) {
        cJSON_AddItemToObject(m, "files", w->files);
        w->files = NULL;
    }
    if (s == QP_OK) {
        if (!w->o.no_inline_tensors) {
            cJSON_AddItemToObject(m, "tensors", w->tensors);
            w->tensors = NULL;
        }
        cJSON *ie = NULL, *bm = NULL;
        bool ok = cJSON_AddNumberToObject(m, "tensorCount", (double)w->n_tensors) &&
                  cJSON_AddNumberToObject(m, "totalSize", (double)w->total);
        if (ok && !w->o.no_merkle) {
            ok = (ie = cJSON_AddObjectToObject(m, "integrityExtensions")) &&
                 cJSON_AddNumberToObject(ie, "contractVersion", 1) &&
                 (bm = cJSON_AddObjectToObject(ie, "blockMerkle")) &&
                 cJSON_AddNumberToObject(bm, "blockSize", (double)QP_MERKLE_BLOCK_DEFAULT);
            if (ok) {
                cJSON_AddItemToObject(bm, "roots", w->roots);
                w->roots = NULL;
            }
        }
        if (!ok) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", w->out_path);
    }
    char *text = NULL;
    size_t len = 0;
    if (s == QP_OK) s = write_json(w, "manifest.json", m, &text, &len, e);
    if (s == QP_OK && w->o.sign_sk) s = sign_manifest(w, text, len, e);
    if (text) cJSON_free(text);
    cJSON_Delete(m);
    if (s == QP_OK) {
        qp_outdir *d = w->dir;
        w->dir = NULL;
        s = qp_outdir_commit(d, e);
    }
    qp_rdrr_writer_abort(w);
    return s;
}

/* ---- keys and signatures ------------------------------------------------------------------ */

/* Created under a temporary name with its final mode (never world-readable for the secret), then
 * linked to path: link() fails when path exists, so a key is never overwritten, not even by a
 * race. */
static qp_status write_key_file(const char *path, const char *text, mode_t mode, qp_err *e) {
    char *tmp = qp_output_partial_name(path);
    if (!tmp) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, mode);
    qp_status s = QP_OK;
    if (fd < 0) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    } else {
        size_t len = strlen(text);
        if (write(fd, text, len) != (ssize_t)len || fsync(fd) != 0)
            s = qp_fail(e, QP_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        close(fd);
        if (s == QP_OK && link(tmp, path) != 0)
            s = errno == EEXIST
                    ? qp_fail(e, QP_ERR_IO, "%s: already exists; keys are never overwritten", path)
                    : qp_fail(e, QP_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        unlink(tmp);
    }
    qp_free(tmp);
    return s;
}

qp_status qp_rdrr_keygen(const char *path, qp_err *e) {
    if (sodium_init() < 0) return qp_fail(e, QP_ERR_INTERNAL, "libsodium initialisation failed");
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    char skh[2 * sizeof sk + 2], pkh[2 * sizeof pk + 2];
    qp_hex_encode(sk, sizeof sk, skh);
    qp_hex_encode(pk, sizeof pk, pkh);
    sodium_memzero(sk, sizeof sk);
    strcat(skh, "\n");
    strcat(pkh, "\n");
    size_t n = strlen(path) + 5;
    char *pub = qp_malloc(n);
    if (!pub) {
        sodium_memzero(skh, sizeof skh);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(pub, n, "%s.pub", path);
    struct stat st;
    qp_status s = QP_OK;
    if (lstat(pub, &st) == 0) /* checked first: a failure below never leaves half a pair */
        s = qp_fail(e, QP_ERR_IO, "%s: already exists; keys are never overwritten", pub);
    if (s == QP_OK) s = write_key_file(path, skh, 0600, e);
    if (s == QP_OK && (s = write_key_file(pub, pkh, 0644, e)) != QP_OK)
        unlink(path); /* the secret this call created: no key without its public half */
    sodium_memzero(skh, sizeof skh);
    qp_free(pub);
    return s;
}

static qp_status read_hex_file(const char *path, uint8_t *out, size_t n, const char *what,
                               qp_err *e) {
    char *text = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(path, 4096, &text, &len, e);
    if (s != QP_OK) return s;
    while (len > 0 && isspace((unsigned char)text[len - 1])) text[--len] = '\0';
    if (!qp_hex_decode(text, out, n))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: not an Ed25519 %s key file (%zu hex digits expected)",
                    path, what, 2 * n);
    sodium_memzero(text, len);
    qp_free(text);
    return s;
}

qp_status qp_rdrr_key_read_secret(const char *path, uint8_t sk[64], qp_err *e) {
    if (sodium_init() < 0) return qp_fail(e, QP_ERR_INTERNAL, "libsodium initialisation failed");
    qp_status s = read_hex_file(path, sk, crypto_sign_SECRETKEYBYTES, "secret", e);
    if (s != QP_OK) return s;
    /* The last 32 bytes of a libsodium secret key are its public key: check they match. */
    uint8_t seed[32], pk[32], sk2[64];
    crypto_sign_ed25519_sk_to_seed(seed, sk);
    crypto_sign_seed_keypair(pk, sk2, seed);
    bool ok = sodium_memcmp(sk2, sk, 64) == 0;
    sodium_memzero(seed, sizeof seed);
    sodium_memzero(sk2, sizeof sk2);
    if (!ok) {
        sodium_memzero(sk, 64);
        return qp_fail(e, QP_ERR_CORRUPT, "%s: inconsistent Ed25519 secret key", path);
    }
    return QP_OK;
}

qp_status qp_rdrr_key_read_public(const char *path, uint8_t pk[32], qp_err *e) {
    return read_hex_file(path, pk, crypto_sign_PUBLICKEYBYTES, "public", e);
}

qp_status qp_rdrr_verify_signature(const char *dir, const uint8_t *pk, uint8_t signer[32],
                                   qp_err *e) {
    if (sodium_init() < 0) return qp_fail(e, QP_ERR_INTERNAL, "libsodium initialisation failed");
    char *mp = qp_path_join(dir, "manifest.json"), *sp = qp_path_join(dir, QP_RDRR_SIG_FILE);
    char *mtext = NULL, *stext = NULL;
    size_t mlen = 0, slen = 0;
    cJSON *j = NULL;
    qp_status s = mp && sp ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    if (s == QP_OK && !qp_path_exists(sp))
        s = qp_fail(e, QP_ERR_VERIFY, "%s: no signature (%s is missing)", dir, QP_RDRR_SIG_FILE);
    if (s == QP_OK) s = qp_file_read_all(sp, 65536, &stext, &slen, e);
    if (s == QP_OK) s = qp_file_read_all(mp, (size_t)1 << 30, &mtext, &mlen, e);
    if (s == QP_OK && !(j = cJSON_ParseWithLength(stext, slen)))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: not JSON", sp);
    uint8_t sig[64], key[32];
    if (s == QP_OK) {
        const cJSON *alg = cJSON_GetObjectItemCaseSensitive(j, "algorithm");
        const cJSON *pkj = cJSON_GetObjectItemCaseSensitive(j, "publicKey");
        const cJSON *sg = cJSON_GetObjectItemCaseSensitive(j, "signature");
        if (!cJSON_IsString(alg) || strcmp(alg->valuestring, "ed25519") != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: algorithm must be \"ed25519\"", sp);
        else if (!cJSON_IsString(pkj) || !qp_hex_decode(pkj->valuestring, key, 32))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: publicKey is not 64 hex digits", sp);
        else if (!cJSON_IsString(sg) || !qp_hex_decode(sg->valuestring, sig, 64))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: signature is not 128 hex digits", sp);
    }
    if (s == QP_OK && pk && sodium_memcmp(pk, key, 32) != 0)
        s = qp_fail(e, QP_ERR_VERIFY, "%s: signed by a different key than the one given", sp);
    if (s == QP_OK && crypto_sign_verify_detached(sig, (const unsigned char *)mtext, mlen, key) != 0)
        s = qp_fail(e, QP_ERR_VERIFY, "%s: Ed25519 signature does not match the bytes of %s", sp, mp);
    if (s == QP_OK && signer) memcpy(signer, key, 32);
    cJSON_Delete(j);
    qp_free(mtext);
    qp_free(stext);
    qp_free(mp);
    qp_free(sp);
    return s;
}
