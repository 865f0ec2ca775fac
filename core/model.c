/* qp_model construction, lookup and the reader registry. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "quantpack/chat.h"

static const char *const k_format_names[QP_FORMAT_COUNT] = {
    "unknown", "safetensors", "gguf", "llama2c", "trlm", "rdrr", "bullet",
};
static const char *const k_family_names[QP_FAMILY_COUNT] = {
    "unknown", "llama", "mistral", "qwen2", "bitnet", "qwen3", "phi3", "gemma", "gemma2", "gemma3", "qwen35",
};

bool qp_family_is_gemma(qp_family f) {
    return f == QP_FAMILY_GEMMA || f == QP_FAMILY_GEMMA2 || f == QP_FAMILY_GEMMA3;
}

const char *qp_format_name(qp_format f) {
    return (unsigned)f < QP_FORMAT_COUNT ? k_format_names[f] : "unknown";
}
const char *qp_family_name(qp_family f) {
    return (unsigned)f < QP_FAMILY_COUNT ? k_family_names[f] : "unknown";
}

static const char *const k_act_names[] = {"silu", "relu2", "gelu"};

const char *qp_act_name(qp_act a) {
    return (unsigned)a < sizeof k_act_names / sizeof k_act_names[0] ? k_act_names[a] : "unknown";
}

bool qp_act_from_name(const char *name, qp_act *out) {
    for (unsigned i = 0; name && i < sizeof k_act_names / sizeof k_act_names[0]; i++)
        if (strcmp(name, k_act_names[i]) == 0) {
            *out = (qp_act)i;
            return true;
        }
    return false;
}

qp_status qp_model_new(qp_format f, const char *path, qp_model **out, qp_err *e) {
    qp_model *m = qp_calloc(1, sizeof *m);
    qp_model_priv *p = qp_calloc(1, sizeof *p);
    char *pc = path ? qp_strdup(path) : NULL;
    if (!m || !p || (path && !pc)) {
        qp_free(m);
        qp_free(p);
        qp_free(pc);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path ? path : "model");
    }
    m->priv = p;
    m->format = f;
    m->path = pc;
    p->path_owned = pc;
    m->arch.bos_id = m->arch.eos_id = -1;
    m->vocab.bos_id = m->vocab.eos_id = m->vocab.unk_id = m->vocab.pad_id = -1;
    *out = m;
    return QP_OK;
}

void qp_model_close(qp_model *m) {
    if (!m) return;
    qp_model_priv *p = m->priv;
    if (p) {
        for (int i = 0; i < p->n_files; i++) qp_file_unmap(&p->files[i]);
        qp_free(p->files);
        qp_strmap_free(&p->by_name);
        qp_strmap_free(&p->by_canon);
        qp_strmap_free(&p->by_meta);
        qp_arena_free(&p->arena);
        qp_free(p->path_owned);
        qp_free(p);
    }
    qp_free(m->tensors);
    qp_free(m->meta);
    qp_free((void *)m->problems);
    qp_free(m);
}

qp_arena *qp_model_arena(qp_model *m) { return &m->priv->arena; }

qp_status qp_model_add_file(qp_model *m, const char *path, int *index, qp_err *e) {
    qp_model_priv *p = m->priv;
    if (p->n_files == p->cap_files) {
        int nc = p->cap_files ? p->cap_files * 2 : 4;
        qp_mapped_file *nf = qp_realloc(p->files, (size_t)nc * sizeof *nf);
        if (!nf) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        p->files = nf;
        p->cap_files = nc;
    }
    qp_mapped_file f = {0};
    qp_status s = qp_file_map(path, &f, e);
    if (s != QP_OK) return s;
    p->files[p->n_files] = f;
    *index = p->n_files++;
    return QP_OK;
}

const qp_mapped_file *qp_model_file(const qp_model *m, int index) {
    if (index < 0 || index >= m->priv->n_files) return NULL;
    return &m->priv->files[index];
}

static bool grow_array(void **arr, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap) return true;
    int64_t nc = *cap ? *cap * 2 : 16;
    size_t bytes;
    if (!qp_size_mul((size_t)nc, elem, &bytes)) return false;
    void *na = qp_realloc(*arr, bytes);
    if (!na) return false;
    *arr = na;
    *cap = nc;
    return true;
}

qp_status qp_model_add_tensor(qp_model *m, const char *name, size_t name_len, qp_tensor **out,
                              qp_err *e) {
    qp_model_priv *p = m->priv;
    char *nm = qp_arena_strndup(&p->arena, name, name_len);
    if (!nm || !grow_array((void **)&m->tensors, &p->cap_tensors, m->n_tensors, sizeof(qp_tensor)))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory adding a tensor", m->path);
    bool added;
    if (qp_strmap_put(&p->by_name, nm, name_len, m->n_tensors, &added) != QP_OK)
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory adding a tensor", m->path);
    if (!added) return qp_fail(e, QP_ERR_CORRUPT, "%s: duplicate tensor name '%s'", m->path, nm);
    qp_tensor *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = nm;
    t->n_dims = 1;
    for (int i = 0; i < QP_MAX_DIMS; i++) t->ne[i] = 1;
    *out = t;
    return QP_OK;
}

qp_status qp_model_add_meta(qp_model *m, const char *key, size_t key_len, qp_meta **out, qp_err *e) {
    qp_model_priv *p = m->priv;
    if (qp_strmap_get(&p->by_meta, key, key_len, NULL))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: duplicate metadata key '%.*s'", m->path,
                       (int)(key_len > 200 ? 200 : key_len), key);
    char *k = qp_arena_strndup(&p->arena, key, key_len);
    if (!k || !grow_array((void **)&m->meta, &p->cap_meta, m->n_meta, sizeof(qp_meta)) ||
        qp_strmap_put(&p->by_meta, k, key_len, m->n_meta, NULL) != QP_OK)
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory adding metadata", m->path);
    qp_meta *md = &m->meta[m->n_meta++];
    memset(md, 0, sizeof *md);
    md->key = k;
    md->n = 1;
    *out = md;
    return QP_OK;
}

void qp_model_add_problem(qp_model *m, const char *fmt, ...) {
    qp_model_priv *p = m->priv;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = qp_arena_strdup(&p->arena, buf);
    if (!s || !grow_array((void **)&m->problems, &p->cap_problems, m->n_problems, sizeof(char *)))
        return; /* findings are advisory: one that cannot be stored is dropped */
    m->problems[m->n_problems++] = s;
}

qp_status qp_model_finish(qp_model *m, qp_err *e) {
    qp_model_priv *p = m->priv;
    qp_strmap_free(&p->by_canon);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const char *c = m->tensors[i].canon;
        if (!c) continue;
        bool added;
        if (qp_strmap_put(&p->by_canon, c, strlen(c), i, &added) != QP_OK)
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        if (!added) {
            qp_model_add_problem(m, "tensors '%s' and another both map to '%s'; using the first",
                                 m->tensors[i].name, c);
        }
    }
    return QP_OK;
}

const qp_tensor *qp_model_find(const qp_model *m, const char *name) {
    if (!m || !name) return NULL;
    int64_t i;
    size_t n = strlen(name);
    if (qp_strmap_get(&m->priv->by_canon, name, n, &i)) return &m->tensors[i];
    if (qp_strmap_get(&m->priv->by_name, name, n, &i)) return &m->tensors[i];
    return NULL;
}

const qp_meta *qp_model_meta(const qp_model *m, const char *key) {
    if (!m || !key) return NULL;
    int64_t i;
    if (!qp_strmap_get(&m->priv->by_meta, key, strlen(key), &i)) return NULL;
    return &m->meta[i];
}

int64_t qp_tensor_nelements(const qp_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < QP_MAX_DIMS; i++) n *= t->ne[i];
    return n;
}

qp_encoding qp_tensor_stored_enc(const qp_tensor *t) { return t->decoded_copy ? t->stored_enc : t->enc; }

qp_status qp_tensor_set_shape_outer_first(qp_tensor *t, const int64_t *dims, int n_dims, qp_err *e) {
    if (n_dims < 0 || n_dims > QP_MAX_DIMS)
        return qp_fail(e, QP_ERR_LIMIT, "tensor '%s': %d dimensions (at most %d supported)", t->name,
                       n_dims, QP_MAX_DIMS);
    int64_t total = 1;
    for (int i = 0; i < QP_MAX_DIMS; i++) t->ne[i] = 1;
    for (int i = 0; i < n_dims; i++) {
        int64_t d = dims[n_dims - 1 - i];
        if (d < 0 || !qp_i64_mul(total, d, &total))
            return qp_fail(e, QP_ERR_CORRUPT, "tensor '%s': dimension %d (%lld) is invalid or overflows",
                           t->name, n_dims - 1 - i, (long long)d);
        t->ne[i] = d;
    }
    t->n_dims = n_dims;
    return QP_OK;
}

qp_status qp_model_meta_str(qp_model *m, const char *key, const char *val, size_t len, qp_err *e) {
    qp_meta *md = NULL;
    qp_status s = qp_model_add_meta(m, key, strlen(key), &md, e);
    if (s != QP_OK) return s;
    md->type = QP_META_STRING;
    md->str = qp_arena_strndup(&m->priv->arena, val, len);
    md->str_len = len;
    return md->str ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
}

qp_status qp_model_meta_u32(qp_model *m, const char *key, uint32_t v, qp_err *e) {
    qp_meta *md = NULL;
    qp_status s = qp_model_add_meta(m, key, strlen(key), &md, e);
    if (s != QP_OK) return s;
    md->type = QP_META_U32;
    md->v.u = v;
    return QP_OK;
}

qp_status qp_model_meta_f32(qp_model *m, const char *key, float v, qp_err *e) {
    qp_meta *md = NULL;
    qp_status s = qp_model_add_meta(m, key, strlen(key), &md, e);
    if (s != QP_OK) return s;
    md->type = QP_META_F32;
    md->v.f = v;
    return QP_OK;
}

bool qp_model_adds_bos(const qp_model *m) {
    if (m->format == QP_FORMAT_GGUF && m->vocab.model == QP_TOK_SPM &&
        !qp_model_meta(m, "tokenizer.ggml.add_bos_token"))
        return true; /* as llama.cpp */
    return m->vocab.add_bos;
}

const char *qp_model_chat_template(const qp_model *m) {
    const qp_meta *md = m ? qp_model_meta(m, "tokenizer.chat_template") : NULL;
    return md && md->type == QP_META_STRING ? md->str : NULL;
}
