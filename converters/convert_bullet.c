/* Llama-family model -> .bullet. bullet-core's runtime (bullet-core.cpp, BulletRunner::forward)
 * fixes several things the source may not match; each is either an exact rewrite or a refusal:
 *   - K/V: its attention has n_heads K/V heads of width hidden/n_heads -> grouped K/V heads are
 *     written repeated (exact: head h uses K/V head h / (n_heads / n_kv_heads));
 *   - RoPE: adjacent pairs (2i, 2i+1), theta 10000 -> NEOX (HF) sources get their q/k rows
 *     reordered inside each head (row 2i <- i, 2i+1 <- i + d/2; exact); other thetas refused;
 *   - FFN width: 4 x hidden -> a narrower FFN is zero-padded (gate/up rows, down columns; exact:
 *     silu(0) * 0 = 0), a wider one refused;
 *   - every row is read as whole 32-element blocks -> hidden must be a multiple of 32;
 *   - no biases, no sub-norms, SiLU only.
 * Tensors are written in bullet-core's names with BQ4 through the encodings table, streamed one
 * at a time (memory bounded by the largest tensor). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "converters/convert_bullet.h"
#include "converters/recipe.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "readers/model_check.h"

typedef enum { K_PLAIN, K_QK, K_PAD_ROWS, K_PAD_COLS } xform;

typedef struct job {
    const qp_model *m;
    const qp_tensor *src;
    xform kind;
    int64_t rows, cols;         /* output shape [rows, cols] */
    int64_t src_rows, src_cols;
    int64_t hd, n_heads, n_src_heads;
    bool permute;               /* NEOX -> adjacent pairs */
    struct progress *pr;        /* NULL: no progress reported */
    int64_t index;              /* place in the plan */
} job;

/* The progress callback and the source bytes read so far. */
typedef struct progress {
    qp_bullet_progress_fn fn;
    void *ud;
    int64_t n;
    uint64_t done, total;
} progress;

static qp_status fill(void *ud, const qp_bullet_tensor *bt, float *dst, qp_err *e) {
    const job *j = ud;
    const qp_tensor *t = j->src;
    int64_t n = qp_tensor_nelements(t);
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    size_t need;
    if (!tr || !qp_encoding_tensor_bytes(t->enc, n, &need) || t->nbytes < need)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding cannot be read or size "
                       "%zu is short", j->m->path, t->name, t->nbytes);
    float *x = j->kind == K_PLAIN ? dst : qp_malloc((size_t)n * sizeof *x);
    if (!x) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", j->m->path, t->name);
    if (!qp_encoding_dequantize_tensor(t->enc, t->data, x, n)) {
        if (x != dst) qp_free(x);
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': encoding %s cannot be dequantized",
                       j->m->path, t->name, tr->upper_name);
    }
    int64_t C = j->cols;
    switch (j->kind) {
    case K_PLAIN: break;
    case K_QK: {
        int64_t g = j->n_heads / j->n_src_heads, hd = j->hd;
        for (int64_t h = 0; h < j->n_heads; h++) {
            const float *sh = x + (h / g) * hd * C;
            float *dh = dst + h * hd * C;
            for (int64_t r = 0; r < hd; r++) {
                int64_t from = j->permute ? (r % 2 == 0 ? r / 2 : r / 2 + hd / 2) : r;
                memcpy(dh + r * C, sh + from * C, (size_t)C * sizeof *dst);
            }
        }
        break;
    }
    case K_PAD_ROWS:
        memcpy(dst, x, (size_t)(j->src_rows * C) * sizeof *dst);
        memset(dst + j->src_rows * C, 0, (size_t)((j->rows - j->src_rows) * C) * sizeof *dst);
        break;
    case K_PAD_COLS:
        for (int64_t r = 0; r < j->rows; r++) {
            memcpy(dst + r * C, x + r * j->src_cols, (size_t)j->src_cols * sizeof *dst);
            memset(dst + r * C + j->src_cols, 0, (size_t)(C - j->src_cols) * sizeof *dst);
        }
        break;
    }
    if (x != dst) qp_free(x);
    if (j->pr && j->pr->fn) {
        j->pr->done += t->nbytes;
        j->pr->fn(j->pr->ud, j->index + 1, j->pr->n, bt->name, j->pr->done, j->pr->total);
    }
    return QP_OK;
}

static qp_status need(const qp_model *m, const char *name, const qp_tensor **out, qp_err *e) {
    const qp_tensor *t = qp_model_find(m, name);
    if (!t) return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is missing", m->path, name);
    *out = t;
    return QP_OK;
}

static qp_status check_shape(const qp_model *m, const qp_tensor *t, int64_t cols, int64_t rows,
                             qp_err *e) {
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' has ne=[%lld, %lld, %lld, %lld]; "
                       "expected [%lld, %lld]", m->path, t->name, (long long)t->ne[0],
                       (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                       (long long)cols, (long long)rows);
    return QP_OK;
}

static void base_name(const char *path, char *out, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b && b[1] ? b + 1 : path;
    snprintf(out, cap, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
    for (char *p = out; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = '_';
}

static const char *tok_model_name(qp_tok_model t) {
    switch (t) {
    case QP_TOK_SPM: return "llama";
    case QP_TOK_BPE: return "gpt2";
    case QP_TOK_WPM: return "bert";
    default: return NULL;
    }
}

static qp_status repack_bullet(const qp_model *src, const char *out, const qp_bullet_convert_opts *o,
                               qp_bullet_convert_stats *st, qp_err *e) {
    qp_bullet_info info;
    qp_bullet_head_info *heads = NULL;
    qp_bullet_tensor *bt = NULL;
    int64_t n = 0;
    qp_status s = qp_bullet_info_from_model(src, &info, &heads, &bt, &n, e);
    if (s != QP_OK) return s;
    if (o && o->model_name) info.model_name = o->model_name;
    if (o && o->checksum) info.checksum = true;
    s = qp_bullet_write(out, &info, bt, n, e);
    if (st) st->n_tensors = n;
    qp_bullet_info_free(&info, heads, bt);
    return s;
}

/* The source's dimensions, as bullet-core's runtime will read them. */
typedef struct bullet_dims {
    int64_t dim, vocab;       /* hidden size, embedding rows */
    int64_t nh, nkv, hd;      /* query heads, source K/V heads, head width */
    int64_t layers;
    int64_t ffn, ffn_out;     /* FFN width of the source and as written (4 x hidden) */
    bool neox;                /* q/k rows are reordered to adjacent-pair RoPE */
} bullet_dims;

/* Any mapped bias (a GGUF's blk.N.attn_output.bias without q/k/v ones, an FFN bias): bullet-core's
 * runtime has none, so such a model is refused rather than written without them. */
static bool has_bias(const qp_model *m) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const char *n = m->tensors[i].canon; /* a .bullet source's own biases are unmapped */
        size_t l = n ? strlen(n) : 0;
        if (l > 5 && strcmp(n + l - 5, ".bias") == 0) return true;
    }
    return false;
}

/* Everything bullet-core's runtime fixes, checked before anything is planned. */
static qp_status check_model(const qp_model *m, bullet_dims *d, const qp_tensor **emb_out,
                             qp_err *e) {
    const qp_arch *a = &m->arch;
    const qp_tensor *emb = NULL;
    qp_status s = need(m, "token_embd.weight", &emb, e);
    if (s != QP_OK) return s;
    int64_t dim = a->hidden > 0 ? a->hidden : emb->ne[0];
    int64_t vocab = emb->ne[1];
    int64_t nh = a->n_heads, nkv = a->n_kv_heads > 0 ? a->n_kv_heads : a->n_heads;
    int64_t hd = a->head_dim > 0 ? a->head_dim : (nh > 0 ? dim / nh : 0);
    int64_t layers = a->n_layers;
    if (a->family == QP_FAMILY_BITNET || a->family == QP_FAMILY_PHI3 || a->sub_norms || a->qkv_bias || has_bias(m) ||
        a->qk_norm || qp_model_find(m, "blk.0.attn_q_norm.weight") || a->act != QP_ACT_SILU)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: %s models (biases, sub-norms, q/k norms, fused "
                       "q/k/v or gate/up, or a non-SiLU FFN) "
                       "cannot be written for bullet-core's runtime, which has none of these",
                       m->path, a->family == QP_FAMILY_BITNET ? "BitNet" : qp_family_name(a->family));
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || hd <= 0 || nh * hd != dim || layers <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: %lld heads of %lld (kv %lld) over hidden %lld, %lld "
                       "layers: bullet-core needs heads x head width = hidden", m->path, (long long)nh,
                       (long long)hd, (long long)nkv, (long long)dim, (long long)layers);
    if (a->rope_theta > 0.0f && a->rope_theta != 10000.0f)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: RoPE theta %g; bullet-core's apply_rope fixes it "
                       "at 10000 and would misread this model", m->path, (double)a->rope_theta);
    if (dim % 32 != 0 || dim > QP_BULLET_MAX_DIM)
        return qp_fail(e, QP_ERR_LIMIT, "%s: hidden size %lld: .bullet needs a multiple of 32 up to "
                       "65535 (bullet-core reads rows as whole 32-element BQ4 blocks)", m->path,
                       (long long)dim);
    if (vocab > QP_BULLET_MAX_VOCAB)
        return qp_fail(e, QP_ERR_LIMIT, "%s: vocabulary of %lld tokens: .bullet dims are u16, so the "
                       "embedding holds at most 65535 rows", m->path, (long long)vocab);
    const qp_vocab *v = &m->vocab;
    if (v->n_tokens <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the source has no tokenizer (pass --tokenizer); "
                       "bullet-core reads one from every .bullet", m->path);
    if (v->n_tokens != vocab)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the tokenizer has %lld tokens but the embedding "
                       "%lld rows", m->path, (long long)v->n_tokens, (long long)vocab);
    const qp_tensor *g0 = NULL;
    if ((s = need(m, "blk.0.ffn_gate.weight", &g0, e)) != QP_OK) return s;
    int64_t ffn = g0->ne[1], ffn_out = 4 * dim;
    if (ffn > ffn_out)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: FFN width %lld exceeds 4 x hidden (%lld), which "
                       "bullet-core's runtime fixes", m->path, (long long)ffn, (long long)ffn_out);
    *d = (bullet_dims){dim, vocab, nh, nkv, hd, layers, ffn, ffn_out, a->rope_style == QP_ROPE_NEOX};
    *emb_out = emb;
    return QP_OK;
}

/* The tensors to write, in bullet-core's order: names, fill jobs, output shapes. */
typedef struct bullet_plan {
    const qp_model *m;
    bullet_dims d;
    qp_bullet_tensor *bt;
    job *jobs;
    char (*names)[64];
    int64_t n;
} bullet_plan;

/* Appends one output tensor [rows, cols] (rank 1 when rows == 1) filled from src. */
static job *plan_add(bullet_plan *p, const char *bname, const qp_tensor *src, xform kind,
                     int64_t rows, int64_t cols) {
    int64_t n = p->n++;
    snprintf(p->names[n], sizeof p->names[n], "%s", bname);
    p->jobs[n] = (job){.m = p->m, .src = src, .kind = kind, .rows = rows, .cols = cols,
                       .src_rows = src->ne[1], .src_cols = src->ne[0], .hd = p->d.hd,
                       .n_heads = p->d.nh, .n_src_heads = p->d.nh, .index = n};
    qp_bullet_tensor *t = &p->bt[n];
    t->name = p->names[n];
    t->fill = fill;
    t->ud = &p->jobs[n];
    if (rows == 1) {
        t->rank = 1;
        t->dims[0] = cols;
    } else {
        t->rank = 2;
        t->dims[0] = rows;
        t->dims[1] = cols;
    }
    return &p->jobs[n];
}

/* A norm weight of exactly [dim] elements. */
static qp_status check_norm(const qp_model *m, const qp_tensor *t, int64_t dim, qp_err *e) {
    if (qp_tensor_nelements(t) != dim || t->ne[0] != dim)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is not [%lld]", m->path, t->name,
                       (long long)dim);
    return QP_OK;
}

/* The nine tensors of layer l: found, shaped as bullet-core expects, rewritten where needed. */
static qp_status plan_layer(bullet_plan *p, int64_t l, qp_err *e) {
    static const char *const canon[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                          "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
    const qp_model *m = p->m;
    const bullet_dims *d = &p->d;
    int64_t dim = d->dim, nh = d->nh, nkv = d->nkv, hd = d->hd, ffn = d->ffn, ffn_out = d->ffn_out;
    const qp_tensor *t[9];
    for (int k = 0; k < 9; k++) {
        char cn[64], bn[64];
        snprintf(cn, sizeof cn, "blk.%lld.%s.weight", (long long)l, canon[k]);
        qp_status s = need(m, cn, &t[k], e);
        if (s != QP_OK) return s;
        if (!qp_bullet_name_from_canon(cn, bn, sizeof bn))
            return qp_fail(e, QP_ERR_INTERNAL, "no bullet name for %s", cn);
    }
    int64_t want[9][2] = {{dim, 1},   {dim, nh * hd}, {dim, nkv * hd}, {dim, nkv * hd},
                          {nh * hd, dim}, {dim, 1},   {dim, ffn},     {dim, ffn}, {ffn, dim}};
    for (int k = 0; k < 9; k++) {
        qp_status s = k == 0 || k == 5 ? check_norm(m, t[k], dim, e)
                                       : check_shape(m, t[k], want[k][0], want[k][1], e);
        if (s != QP_OK) return s;
    }
    bool pad = ffn != ffn_out;
    char bn[64];
    job *j;
    snprintf(bn, sizeof bn, "layers.%lld.norm.attn.weight", (long long)l);
    plan_add(p, bn, t[0], K_PLAIN, 1, dim);
    snprintf(bn, sizeof bn, "layers.%lld.attention.query.weight", (long long)l);
    j = plan_add(p, bn, t[1], d->neox ? K_QK : K_PLAIN, dim, dim);
    j->permute = d->neox;
    snprintf(bn, sizeof bn, "layers.%lld.attention.key.weight", (long long)l);
    j = plan_add(p, bn, t[2], (d->neox || nkv != nh) ? K_QK : K_PLAIN, dim, dim);
    j->permute = d->neox;
    j->n_src_heads = nkv;
    snprintf(bn, sizeof bn, "layers.%lld.attention.value.weight", (long long)l);
    j = plan_add(p, bn, t[3], nkv != nh ? K_QK : K_PLAIN, dim, dim);
    j->n_src_heads = nkv;
    snprintf(bn, sizeof bn, "layers.%lld.attention.output.weight", (long long)l);
    plan_add(p, bn, t[4], K_PLAIN, dim, dim);
    snprintf(bn, sizeof bn, "layers.%lld.norm.ffn.weight", (long long)l);
    plan_add(p, bn, t[5], K_PLAIN, 1, dim);
    snprintf(bn, sizeof bn, "layers.%lld.ffn.w1.weight", (long long)l);
    plan_add(p, bn, t[6], pad ? K_PAD_ROWS : K_PLAIN, ffn_out, dim);
    snprintf(bn, sizeof bn, "layers.%lld.ffn.w3.weight", (long long)l);
    plan_add(p, bn, t[7], pad ? K_PAD_ROWS : K_PLAIN, ffn_out, dim);
    snprintf(bn, sizeof bn, "layers.%lld.ffn.w2.weight", (long long)l);
    plan_add(p, bn, t[8], pad ? K_PAD_COLS : K_PLAIN, dim, ffn_out);
    return QP_OK;
}

/* final_layernorm and gen_head (the token embedding when the source has no output.weight). */
static qp_status plan_output(bullet_plan *p, const qp_tensor *emb, bool *tied, qp_err *e) {
    const qp_model *m = p->m;
    int64_t dim = p->d.dim;
    const qp_tensor *fn = NULL;
    qp_status s = need(m, "output_norm.weight", &fn, e);
    if (s != QP_OK) return s;
    if (qp_tensor_nelements(fn) != dim)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is not [%lld]", m->path, fn->name,
                       (long long)dim);
    plan_add(p, "final_layernorm.weight", fn, K_PLAIN, 1, dim);
    const qp_tensor *outw = qp_model_find(m, "output.weight");
    *tied = outw == NULL;
    if (!outw) outw = emb;
    s = check_shape(m, outw, dim, p->d.vocab, e);
    if (s != QP_OK) return s;
    plan_add(p, "gen_head.weight", outw, K_PLAIN, p->d.vocab, dim);
    return QP_OK;
}

/* "<task>_head.weight" for every extra task; without --head-weights only "gen" is accepted. */
static qp_status plan_heads(bullet_plan *p, const qp_bullet_convert_opts *o, qp_bullet_heads *heads,
                            qp_err *e) {
    if (!o->head_weights) {
        for (int i = 0; i < o->n_tasks; i++)
            if (strcmp(o->tasks[i], "gen") != 0)
                return qp_fail(e, QP_ERR_ARG, "head '%s' needs --head-weights FILE.safetensors",
                               o->tasks[i]);
        return QP_OK;
    }
    if (o->n_tasks <= 0) return QP_OK;
    int64_t dim = p->d.dim;
    qp_status s = qp_bullet_heads_load(o->head_weights, o->tasks, o->n_tasks, dim, heads, e);
    if (s != QP_OK) return s;
    for (int i = 0; i < heads->n; i++) {
        char bn[64];
        snprintf(bn, sizeof bn, "%s_head.weight", heads->info[i].task);
        plan_add(p, bn, heads->t[i], K_PLAIN, heads->t[i]->ne[1], dim);
        if (heads->t[i]->ne[1] == 1) { /* a one-row head is still [1, hidden] */
            qp_bullet_tensor *t = &p->bt[p->n - 1];
            t->rank = 2;
            t->dims[0] = 1;
            t->dims[1] = dim;
        }
    }
    return QP_OK;
}

/* The header and tokenizer of the output. Borrows from m, o, heads and name. */
static void fill_info(const qp_model *m, const bullet_dims *d, const qp_bullet_convert_opts *o,
                      const qp_bullet_heads *heads, const char *name, qp_bullet_info *info) {
    const qp_vocab *v = &m->vocab;
    int64_t max_pos = m->arch.max_pos;
    memset(info, 0, sizeof *info);
    info->model_name = o->model_name ? o->model_name : name;
    info->hidden = d->dim;
    info->n_layers = d->layers;
    info->n_heads = d->nh;
    info->max_context = max_pos <= 0                ? 2048
                        : max_pos > QP_BULLET_INT_MAX ? QP_BULLET_INT_MAX
                                                      : max_pos;
    info->ff_multiplier = 4;
    info->rope_theta = 10000;
    info->vocab.n_tokens = v->n_tokens;
    info->vocab.tokens = (const char *const *)v->tokens;
    info->vocab.token_lens = v->token_lens;
    info->vocab.scores = v->scores;
    info->vocab.types = v->types;
    info->vocab.n_merges = v->n_merges;
    info->vocab.merges = (const char *const *)v->merges;
    info->vocab.model = tok_model_name(v->model);
    info->vocab.pre = v->model == QP_TOK_BPE && v->pre[0] ? v->pre : NULL;
    info->vocab.bos_id = v->bos_id;
    info->vocab.eos_id = v->eos_id;
    info->vocab.unk_id = v->unk_id;
    info->vocab.pad_id = v->pad_id;
    info->vocab.add_bos = v->add_bos;
    info->has_gen = true;
    info->heads = heads->info;
    info->n_heads_info = heads->n;
    info->checksum = o->checksum;
}

/* Every tensor is stored as BQ4: a quantized source tensor needs allow_requantize (the one rule,
 * converters/recipe.h). */
static qp_status check_requantize(const bullet_plan *p, bool allow_requantize, qp_err *e) {
    for (int64_t i = 0; i < p->n; i++) {
        const qp_tensor *src = p->jobs[i].src;
        qp_plan_entry pe = {.name = src->name, .src = src, .src_kind = QP_SRC_PLAIN, .src_enc = src->enc};
        qp_status s = qp_recipe_check_requantize(p->m, &pe, QP_ENC_BQ4, allow_requantize, e);
        if (s != QP_OK) return s;
    }
    return QP_OK;
}

/* Everything bullet-core's runtime fixes checked, then the output tensors, their fill jobs and
 * the heads planned (p->bt, p->jobs, p->names allocated; the caller frees them and heads). */
static qp_status plan_model(const qp_model *m, const qp_bullet_convert_opts *o, bullet_plan *p,
                            qp_bullet_heads *heads, bool *tied, qp_err *e) {
    const qp_tensor *emb = NULL;
    qp_status s = check_model(m, &p->d, &emb, e);
    if (s != QP_OK) return s;
    int64_t cap = 3 + 9 * p->d.layers + (o->head_weights ? o->n_tasks : 0);
    p->bt = qp_calloc((size_t)cap, sizeof *p->bt);
    p->jobs = qp_calloc((size_t)cap, sizeof *p->jobs);
    p->names = qp_calloc((size_t)cap, sizeof *p->names);
    if (!p->bt || !p->jobs || !p->names) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    if ((s = check_shape(m, emb, p->d.dim, p->d.vocab, e)) != QP_OK) return s;
    plan_add(p, "tok_embeddings.weight", emb, K_PLAIN, p->d.vocab, p->d.dim);
    for (int64_t l = 0; l < p->d.layers; l++)
        if ((s = plan_layer(p, l, e)) != QP_OK) return s;
    if ((s = plan_output(p, emb, tied, e)) != QP_OK) return s;
    if ((s = plan_heads(p, o, heads, e)) != QP_OK) return s;
    return check_requantize(p, o->allow_requantize, e);
}

static void plan_free(bullet_plan *p, qp_bullet_heads *heads) {
    qp_bullet_heads_free(heads);
    qp_free(p->bt);
    qp_free(p->jobs);
    qp_free(p->names);
}

/* The runtime's model checks every target makes before it writes or plans. */
static qp_status check_source(const qp_model *m, const qp_bullet_convert_opts *o, qp_err *e) {
    qp_status s = qp_model_check_for_write(m, o->allow_nonfinite, e);
    if (s == QP_OK) s = qp_model_refuse_experts(m, ".bullet (bullet-core)", e);
    if (s == QP_OK) s = qp_model_refuse_rope_factors(m, ".bullet (bullet-core)", e);
    return s == QP_OK ? qp_model_refuse_gemma(m, ".bullet (bullet-core)", e) : s;
}

qp_status qp_convert_to_bullet(const qp_model *m, const char *out, const qp_bullet_convert_opts *o,
                               qp_bullet_convert_stats *st, qp_err *e) {
    static const qp_bullet_convert_opts k_default = {0};
    qp_bullet_convert_stats dummy;
    if (!o) o = &k_default;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    /* never write a model the runtime rejects (readers/model_check.h) */
    qp_status s = check_source(m, o, e);
    if (s != QP_OK) return s;
    if (m->format == QP_FORMAT_BULLET) return repack_bullet(m, out, o, st, e);
    bullet_plan p = {.m = m};
    qp_bullet_heads heads;
    memset(&heads, 0, sizeof heads);
    s = plan_model(m, o, &p, &heads, &st->tied, e);
    if (s == QP_OK) {
        progress pr = {o->progress, o->progress_ud, p.n, 0, 0};
        for (int64_t i = 0; i < p.n; i++) {
            pr.total += p.jobs[i].src->nbytes;
            p.jobs[i].pr = &pr;
        }
        char name[128];
        base_name(m->path, name, sizeof name);
        qp_bullet_info info;
        fill_info(m, &p.d, o, &heads, name, &info);
        s = qp_bullet_write(out, &info, p.bt, p.n, e);
    }
    st->n_tensors = p.n;
    st->ffn_src = p.d.ffn;
    st->ffn_out = p.d.ffn_out;
    st->kv_heads_src = p.d.nkv;
    st->permuted_qk = p.d.neox;
    plan_free(&p, &heads);
    return s;
}

/* The --dry-run text of a job's rewrite. */
static const char *job_action(const job *j) {
    bool repeat = j->n_src_heads != j->n_heads;
    switch (j->kind) {
    case K_QK:
        return repeat && j->permute ? "repeat-kv+rope-reorder+encode"
               : repeat             ? "repeat-kv+encode"
                                    : "rope-reorder+encode";
    case K_PAD_ROWS: return "pad-rows+encode";
    case K_PAD_COLS: return "pad-cols+encode";
    default: return "encode";
    }
}

/* One plan row: name, shape (outer-first dims, stored inner-first), source encoding, bytes. */
static qp_status plan_row(qp_plan *out, const qp_tensor *src, const char *name, int rank,
                          const int64_t *dims, qp_encoding dst, const char *action, qp_err *e) {
    char *copy = qp_strdup(name);
    if (!copy) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    out->names[out->n] = copy;
    qp_plan_entry *pe = &out->t[out->n++];
    *pe = (qp_plan_entry){.src = src, .name = copy, .src_enc = src->enc, .dst_enc = dst,
                          .n_dims = rank, .convert = src->enc != dst, .action = action};
    int64_t total = 1;
    for (int d = 0; d < QP_MAX_DIMS; d++) pe->ne[d] = d < rank ? dims[rank - 1 - d] : 1;
    for (int d = 0; d < rank; d++) total *= dims[d];
    if (!qp_encoding_tensor_bytes(dst, total, &pe->dst_bytes))
        return qp_fail(e, QP_ERR_LIMIT, "tensor '%s': %lld elements", name, (long long)total);
    out->src_bytes += src->nbytes;
    out->dst_bytes += pe->dst_bytes;
    return QP_OK;
}

static qp_status plan_alloc(qp_plan *out, int64_t n, qp_err *e) {
    memset(out, 0, sizeof *out);
    out->t = qp_calloc(n ? (size_t)n : 1, sizeof *out->t);
    out->names = qp_calloc(n ? (size_t)n : 1, sizeof *out->names);
    return out->t && out->names ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory for %lld tensors", (long long)n);
}

qp_status qp_convert_bullet_plan(const qp_model *m, const qp_bullet_convert_opts *o, qp_plan *out,
                                 qp_err *e) {
    static const qp_bullet_convert_opts k_default = {0};
    if (!o) o = &k_default;
    qp_plan pl = {0};
    qp_status s = check_source(m, o, e);
    if (s != QP_OK) return s;
    if (m->format == QP_FORMAT_BULLET) { /* re-packed block for block */
        s = plan_alloc(&pl, m->n_tensors, e);
        for (int64_t i = 0; s == QP_OK && i < m->n_tensors; i++) {
            const qp_tensor *t = &m->tensors[i];
            int64_t dims[QP_MAX_DIMS];
            for (int d = 0; d < t->n_dims; d++) dims[d] = t->ne[t->n_dims - 1 - d];
            s = plan_row(&pl, t, t->name, t->n_dims, dims, t->enc, "copy", e);
        }
    } else {
        bullet_plan p = {.m = m};
        qp_bullet_heads heads;
        memset(&heads, 0, sizeof heads);
        bool tied = false;
        s = plan_model(m, o, &p, &heads, &tied, e);
        if (s == QP_OK) s = plan_alloc(&pl, p.n, e);
        for (int64_t i = 0; s == QP_OK && i < p.n; i++)
            s = plan_row(&pl, p.jobs[i].src, p.bt[i].name, p.bt[i].rank, p.bt[i].dims, QP_ENC_BQ4,
                         job_action(&p.jobs[i]), e);
        plan_free(&p, &heads);
    }
    if (s != QP_OK) {
        qp_plan_free(&pl);
        return s;
    }
    *out = pl;
    return QP_OK;
}
