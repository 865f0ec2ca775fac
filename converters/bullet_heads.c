/* Multi-task heads of .bullet models: loading head weights from safetensors for the writer, and
 * scoring a hidden state with a head of a .bullet model (bullet-core's compute_logits: the head
 * "<task>_head.weight" [n_out, hidden] times the final-norm hidden state). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "converters/convert_bullet.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"

/* n labels into one qp_malloc'd block (pointer array + strings). */
static char **labels_block(const char *const *src, const size_t *lens, int64_t n) {
    size_t total = (size_t)n * sizeof(char *);
    for (int64_t i = 0; i < n; i++) total += lens[i] + 1;
    char **arr = qp_malloc(total);
    if (!arr) return NULL;
    char *p = (char *)(arr + n);
    for (int64_t i = 0; i < n; i++) {
        memcpy(p, src[i], lens[i]);
        p[lens[i]] = '\0';
        arr[i] = p;
        p += lens[i] + 1;
    }
    return arr;
}

static char **default_labels(int64_t n) {
    char(*tmp)[24] = qp_malloc((size_t)n * sizeof *tmp);
    const char **ptrs = qp_malloc((size_t)n * sizeof *ptrs);
    size_t *lens = qp_malloc((size_t)n * sizeof *lens);
    char **out = NULL;
    if (tmp && ptrs && lens) {
        for (int64_t i = 0; i < n; i++) {
            lens[i] = (size_t)snprintf(tmp[i], sizeof tmp[i], "%" PRId64, i);
            ptrs[i] = tmp[i];
        }
        out = labels_block(ptrs, lens, n);
    }
    qp_free(tmp);
    qp_free(ptrs);
    qp_free(lens);
    return out;
}

/* "[\"a\",\"b\"]" or "a,b" -> n labels; NULL when the count differs from want. */
static char **parse_labels(const char *s, int64_t want) {
    const char *ptrs[QP_BULLET_MAX_LABELS];
    size_t lens[QP_BULLET_MAX_LABELS];
    int64_t n = 0;
    char **out = NULL;
    cJSON *root = s[0] == '[' ? cJSON_Parse(s) : NULL;
    if (root) {
        const cJSON *it;
        cJSON_ArrayForEach(it, root) {
            if (!cJSON_IsString(it) || n >= QP_BULLET_MAX_LABELS) {
                n = -1;
                break;
            }
            ptrs[n] = it->valuestring;
            lens[n++] = strlen(it->valuestring);
        }
    } else {
        const char *p = s;
        while (n >= 0) {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            if (n >= QP_BULLET_MAX_LABELS) {
                n = -1;
                break;
            }
            ptrs[n] = p;
            lens[n++] = l;
            if (!c) break;
            p = c + 1;
        }
    }
    if (n == want) out = labels_block(ptrs, lens, n);
    cJSON_Delete(root);
    return out;
}

void qp_bullet_heads_free(qp_bullet_heads *h) {
    if (!h) return;
    for (int i = 0; i < QP_BULLET_N_TASKS; i++) qp_free(h->labels[i]);
    qp_model_close(h->file);
    memset(h, 0, sizeof *h);
}

qp_status qp_bullet_heads_load(const char *path, const char *const *tasks, int n_tasks,
                               int64_t hidden, qp_bullet_heads *h, qp_err *e) {
    memset(h, 0, sizeof *h);
    qp_status s = qp_model_open(path, NULL, &h->file, e);
    if (s != QP_OK) return s;
    for (int i = 0; i < n_tasks && s == QP_OK; i++) {
        if (strcmp(tasks[i], "gen") == 0) continue;
        int ti = qp_bullet_task_index(tasks[i]);
        if (ti < 1) {
            s = qp_fail(e, QP_ERR_ARG, "head '%s' is not one bullet-core's runtime looks up (gen, ner, "
                        "pos, sentiment, classifier)", tasks[i]);
            break;
        }
        const char *task = qp_bullet_tasks[ti];
        for (int k = 0; k < h->n; k++)
            if (strcmp(h->info[k].task, task) == 0)
                s = qp_fail(e, QP_ERR_ARG, "head '%s' is listed twice", task);
        if (s != QP_OK) break;
        char nm[64];
        snprintf(nm, sizeof nm, "%s_head.weight", task);
        const qp_tensor *t = qp_model_find(h->file, nm);
        if (!t) t = qp_model_find(h->file, task);
        if (!t) {
            s = qp_fail(e, QP_ERR_ARG, "%s: no tensor '%s' (or '%s') for head '%s'", path, nm, task, task);
            break;
        }
        if (t->n_dims != 2 || t->ne[0] != hidden || t->ne[1] < 1 || t->ne[1] > QP_BULLET_MAX_LABELS) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has ne=[%lld, %lld]; a head is [n_out, "
                        "hidden=%lld] with 1..%d outputs", path, t->name, (long long)t->ne[0],
                        (long long)t->ne[1], (long long)hidden, QP_BULLET_MAX_LABELS);
            break;
        }
        int64_t n_out = t->ne[1];
        char key[128];
        snprintf(key, sizeof key, "safetensors.metadata.%s_labels", task);
        const qp_meta *md = qp_model_meta(h->file, key);
        char **labels = NULL;
        if (md && md->type == QP_META_STRING) {
            labels = parse_labels(md->str, n_out);
            if (!labels) {
                s = qp_fail(e, QP_ERR_ARG, "%s: __metadata__ %s_labels does not name %lld labels "
                            "(a JSON array of strings or a comma list)", path, task, (long long)n_out);
                break;
            }
        } else {
            labels = default_labels(n_out);
        }
        if (!labels) {
            s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
            break;
        }
        h->labels[h->n] = labels;
        h->t[h->n] = t;
        h->info[h->n].task = task;
        h->info[h->n].n_labels = n_out;
        h->info[h->n].labels = (const char *const *)labels;
        h->n++;
    }
    if (s != QP_OK) qp_bullet_heads_free(h);
    return s;
}

/* ---- heads of a .bullet model ---------------------------------------------------------------- */

qp_status qp_bullet_task_head_get(const qp_model *m, const char *task, qp_bullet_task_head *h,
                                  qp_err *e) {
    memset(h, 0, sizeof *h);
    int ti = qp_bullet_task_index(task);
    if (ti < 1)
        return qp_fail(e, QP_ERR_ARG, "task '%s' is not a head bullet-core knows (ner, pos, sentiment, "
                       "classifier; gen generates)", task);
    char nm[64];
    snprintf(nm, sizeof nm, "%s_head.weight", qp_bullet_tasks[ti]);
    const qp_tensor *t = qp_model_find(m, nm);
    if (!t) return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: no '%s' in this model", m->path, nm);
    int64_t hidden = m->arch.hidden;
    size_t rb;
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (!tr || !tr->dequantize || t->ne[0] != hidden || t->ne[2] != 1 || t->ne[3] != 1 ||
        !qp_encoding_row_bytes(t->enc, hidden, &rb) || t->nbytes < rb * (size_t)t->ne[1])
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' at offset %llu is not a readable [n_out, %lld] "
                       "head", m->path, nm, (unsigned long long)t->offset, (long long)hidden);
    h->t = t;
    h->hidden = hidden;
    h->n_out = t->ne[1];
    char key[80];
    snprintf(key, sizeof key, "bullet.%s_labels", qp_bullet_tasks[ti]);
    const qp_meta *md = qp_model_meta(m, key);
    if (md && md->type == QP_META_ARRAY && md->arr_type == QP_META_STRING && md->raw &&
        (int64_t)md->n == h->n_out) {
        const char **ptrs = qp_malloc((size_t)md->n * sizeof *ptrs);
        size_t *lens = qp_malloc((size_t)md->n * sizeof *lens);
        if (ptrs && lens) {
            size_t o = 0;
            for (uint64_t i = 0; i < md->n; i++) {
                lens[i] = (size_t)qp_load_u64le(md->raw + o);
                ptrs[i] = (const char *)md->raw + o + 8;
                o += 8 + lens[i];
            }
            h->labels = labels_block(ptrs, lens, h->n_out);
        }
        qp_free(ptrs);
        qp_free(lens);
    } else {
        h->labels = default_labels(h->n_out);
    }
    if (!h->labels) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    return QP_OK;
}

void qp_bullet_task_head_free(qp_bullet_task_head *h) {
    if (!h) return;
    qp_free(h->labels);
    memset(h, 0, sizeof *h);
}

void qp_bullet_task_scores(const qp_bullet_task_head *h, const float *hidden, float *scores) {
    const qp_encoding_traits *tr = qp_encoding_get(h->t->enc);
    size_t rb = 0;
    qp_encoding_row_bytes(h->t->enc, h->hidden, &rb);
    for (int64_t k = 0; k < h->n_out; k++) {
        const uint8_t *w = h->t->data + (size_t)k * rb;
        if (tr->vec_dot_f32) {
            scores[k] = tr->vec_dot_f32(w, hidden, h->hidden);
        } else {
            float *tmp = qp_malloc((size_t)h->hidden * sizeof *tmp);
            float sum = 0.0f;
            if (tmp) {
                tr->dequantize(w, tmp, h->hidden);
                for (int64_t i = 0; i < h->hidden; i++) sum += tmp[i] * hidden[i];
            }
            qp_free(tmp);
            scores[k] = sum;
        }
    }
}
