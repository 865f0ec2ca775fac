/* llama2.c checkpoints (karpathy/llama2.c export.py): v0 "legacy" and v1 "ak42" fp32 files are
 * read; v2 (Q8_0 groups) is recognised and refused. Layout, limits and statuses: llama2c.md.
 * Tensors borrow the mapping (F32, no copies) and get GGUF names. */
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "readers/hf_config.h"

#define L2C_MAGIC 0x616b3432u /* "ak42" read as a little-endian uint32 */
#define L2C_V0_HEADER 28u
#define L2C_V1_HEADER 256u

/* Plausibility limits (probe and reader alike): beyond these the header is not trusted. */
#define L2C_MAX_DIM (1 << 17)
#define L2C_MAX_HIDDEN (1 << 20)
#define L2C_MAX_LAYERS (1 << 12)
#define L2C_MAX_SEQ (1 << 24)
#define L2C_MAX_VOCAB (1 << 24)

typedef struct l2c_config {
    int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len; /* vocab: raw, signed */
} l2c_config;

static const char *const k_field_names[7] = {
    "dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len",
};

static void l2c_config_load(const uint8_t *p, l2c_config *c) {
    int32_t v[7];
    for (int i = 0; i < 7; i++) v[i] = (int32_t)qp_load_u32le(p + 4 * i);
    c->dim = v[0];
    c->hidden = v[1];
    c->n_layers = v[2];
    c->n_heads = v[3];
    c->n_kv_heads = v[4];
    c->vocab = v[5];
    c->seq_len = v[6];
}

/* Tensor groups of a checkpoint; each is [n_layers or 1][rows][cols] floats. */
enum {
    G_EMBD, G_RMS_ATT, G_WQ, G_WK, G_WV, G_WO, G_RMS_FFN, G_W1, G_W2, G_W3, G_RMS_FINAL,
    G_FREQ_REAL, G_FREQ_IMAG, G_WCLS, G_COUNT
};

typedef struct l2c_layout {
    size_t elems[G_COUNT];  /* floats in the whole group (all layers) */
    size_t offset[G_COUNT]; /* absolute byte offset of the group */
    bool present[G_COUNT];
    size_t total;           /* bytes of the whole file */
} l2c_layout;

/* Group orders as export.py writes them. */
static const int k_order_v0[] = {G_EMBD, G_RMS_ATT, G_WQ, G_WK, G_WV, G_WO, G_RMS_FFN, G_W1,
                                 G_W2, G_W3, G_RMS_FINAL, G_FREQ_REAL, G_FREQ_IMAG, G_WCLS};
static const int k_order_v1[] = {G_RMS_ATT, G_RMS_FFN, G_RMS_FINAL, G_EMBD, G_WQ, G_WK, G_WV,
                                 G_WO, G_W1, G_W2, G_W3, G_WCLS};

/* Values checked one by one: > 0 (vocab != 0), within the limits, heads dividing. Writes a
 * message and returns the status, or QP_OK. `base` is the file offset of the 7 ints. */
static qp_status l2c_config_check(const l2c_config *c, size_t base, const char *path, qp_err *e) {
    const int32_t v[7] = {c->dim, c->hidden, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab,
                          c->seq_len};
    const int64_t lim[7] = {L2C_MAX_DIM, L2C_MAX_HIDDEN, L2C_MAX_LAYERS, L2C_MAX_DIM, L2C_MAX_DIM,
                            L2C_MAX_VOCAB, L2C_MAX_SEQ};
    for (int i = 0; i < 7; i++) {
        int64_t x = v[i];
        if (i == 5) {
            if (x == 0)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: vocab_size is 0", path,
                               base + 20);
            if (x < 0) x = -x;
        } else if (x <= 0) {
            return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: %s is %lld (must be > 0)",
                           path, base + 4 * (size_t)i, k_field_names[i], (long long)x);
        }
        if (x > lim[i])
            return qp_fail(e, QP_ERR_LIMIT, "%s: header at offset %zu: %s is %lld (limit %lld)", path,
                           base + 4 * (size_t)i, k_field_names[i], (long long)x, (long long)lim[i]);
    }
    if (c->dim % c->n_heads != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: n_heads %d does not divide dim %d",
                       path, base + 12, c->n_heads, c->dim);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: n_kv_heads %d does not divide "
                       "n_heads %d", path, base + 16, c->n_kv_heads, c->n_heads);
    if ((c->dim / c->n_heads) % 2 != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset %zu: head size %d is odd (RoPE "
                       "rotates pairs)", path, base + 12, c->dim / c->n_heads);
    return QP_OK;
}

/* Computes every group's size and offset; false on overflow. */
static bool l2c_layout_compute(const l2c_config *c, unsigned version, bool with_cls, size_t header,
                               l2c_layout *L) {
    size_t dim = (size_t)c->dim, hid = (size_t)c->hidden, nl = (size_t)c->n_layers;
    size_t voc = (size_t)(c->vocab < 0 ? -(int64_t)c->vocab : c->vocab);
    size_t hs = dim / (size_t)c->n_heads, kv = hs * (size_t)c->n_kv_heads;
    size_t dd, kvd, hd, freq;
    memset(L, 0, sizeof *L);
    if (!qp_size_mul(dim, dim, &dd) || !qp_size_mul(kv, dim, &kvd) || !qp_size_mul(hid, dim, &hd) ||
        !qp_size_mul((size_t)c->seq_len, hs / 2, &freq))
        return false;
    bool ok = qp_size_mul(voc, dim, &L->elems[G_EMBD]) && qp_size_mul(nl, dim, &L->elems[G_RMS_ATT]) &&
              qp_size_mul(nl, dd, &L->elems[G_WQ]) && qp_size_mul(nl, kvd, &L->elems[G_WK]) &&
              qp_size_mul(nl, kvd, &L->elems[G_WV]) && qp_size_mul(nl, dd, &L->elems[G_WO]) &&
              qp_size_mul(nl, dim, &L->elems[G_RMS_FFN]) && qp_size_mul(nl, hd, &L->elems[G_W1]) &&
              qp_size_mul(nl, hd, &L->elems[G_W2]) && qp_size_mul(nl, hd, &L->elems[G_W3]);
    if (!ok) return false;
    L->elems[G_RMS_FINAL] = dim;
    L->elems[G_FREQ_REAL] = L->elems[G_FREQ_IMAG] = freq;
    L->elems[G_WCLS] = L->elems[G_EMBD];
    const int *order = version == 0 ? k_order_v0 : k_order_v1;
    size_t n_order = version == 0 ? sizeof k_order_v0 / sizeof k_order_v0[0]
                                  : sizeof k_order_v1 / sizeof k_order_v1[0];
    size_t pos = header;
    for (size_t i = 0; i < n_order; i++) {
        int g = order[i];
        if (g == G_WCLS && !with_cls) continue;
        size_t bytes;
        L->offset[g] = pos;
        L->present[g] = true;
        if (!qp_size_mul(L->elems[g], 4, &bytes) || !qp_size_add(pos, bytes, &pos)) return false;
    }
    L->total = pos;
    return true;
}

bool qp_llama2c_probe(const uint8_t *head, size_t head_len, uint64_t file_size) {
    if (!head || head_len < 8) return false;
    if (qp_load_u32le(head) == L2C_MAGIC) return true;
    if (head_len < L2C_V0_HEADER) return false;
    l2c_config c;
    l2c_config_load(head, &c);
    if (l2c_config_check(&c, 0, "", NULL) != QP_OK) return false;
    /* a plausible header and the size of either layout; or shorter than both: a truncated file,
     * which the reader then names (llama2c.md) */
    bool shorter = true;
    for (int cls = 0; cls < 2; cls++) {
        l2c_layout L;
        if (!l2c_layout_compute(&c, 0, cls == 1, L2C_V0_HEADER, &L)) return false;
        if ((uint64_t)L.total == file_size) return true;
        if ((uint64_t)L.total <= file_size) shorter = false;
    }
    return shorter;
}

/* Adds one F32 tensor (name = canon) with ggml shape {ne0, ne1}. */
static qp_status add_f32(qp_model *m, int fi, const qp_mapped_file *mf, const char *name,
                         size_t offset, int64_t ne0, int64_t ne1, qp_err *e) {
    qp_tensor *t;
    qp_status s = qp_model_add_tensor(m, name, strlen(name), &t, e);
    if (s != QP_OK) return s;
    size_t nbytes = (size_t)ne0 * (size_t)ne1 * 4; /* bounded by the layout computed before */
    if (offset > mf->size || nbytes > mf->size - offset)
        return qp_fail(e, QP_ERR_INTERNAL, "%s: tensor '%s' at offset %zu: %zu bytes past the end",
                       m->path, name, offset, nbytes);
    t->canon = t->name;
    t->enc = QP_ENC_F32;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->data = mf->data + offset;
    t->nbytes = nbytes;
    t->offset = offset;
    t->file_index = fi;
    return QP_OK;
}

static qp_status read_tokenizer(qp_model *m, const qp_open_opts *o, int64_t vocab, qp_err *e) {
    const char *tp = o ? o->tokenizer_path : NULL;
    if (!tp) {
        qp_model_add_problem(m, "no tokenizer: pass --tokenizer (tokenizer.bin or tokenizer.model)");
        return QP_OK;
    }
    qp_status s = qp_vocab_read_file(m, tp, e);
    if (s != QP_OK) return s;
    if (m->vocab.n_tokens != vocab)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tokenizer has %lld tokens but checkpoint %s has "
                       "vocab_size %lld", tp, (long long)m->vocab.n_tokens, m->path,
                       (long long)vocab);
    return QP_OK;
}

qp_status qp_llama2c_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    if (!m || !path) return qp_fail(e, QP_ERR_ARG, "qp_llama2c_read: NULL argument");
    int fi;
    qp_status s = qp_model_add_file(m, path, &fi, e);
    if (s != QP_OK) return s;
    const qp_mapped_file *mf = qp_model_file(m, fi);
    unsigned version = 0;
    size_t header = L2C_V0_HEADER, base = 0;
    bool with_cls;
    l2c_config c;
    if (mf->size >= 8 && qp_load_u32le(mf->data) == L2C_MAGIC) {
        int32_t v = (int32_t)qp_load_u32le(mf->data + 4);
        if (v == 2)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: llama2.c \"ak42\" version 2 (Q8_0 groups, "
                           "runq.c) is not supported; export with --version 0 or 1", path);
        if (v != 1)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: llama2.c \"ak42\" checkpoint of unknown "
                           "version %d at offset 4 (versions 0 and 1 are read)", path, v);
        if (mf->size < L2C_V1_HEADER)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: llama2.c v1 file is %zu bytes, its header alone "
                           "is %u", path, mf->size, L2C_V1_HEADER);
        version = 1;
        header = L2C_V1_HEADER;
        base = 8;
        l2c_config_load(mf->data + 8, &c);
        uint8_t shared = mf->data[36];
        if (shared > 1)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset 36: shared_classifier flag is %u "
                           "(0 or 1)", path, shared);
        if (c.vocab < 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: header at offset 28: v1 vocab_size is %d "
                           "(must be > 0)", path, c.vocab);
        with_cls = shared == 0;
    } else {
        if (mf->size < L2C_V0_HEADER)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, too short for the 28-byte llama2.c "
                           "header", path, mf->size);
        l2c_config_load(mf->data, &c);
        with_cls = c.vocab < 0;
    }
    s = l2c_config_check(&c, base, path, e);
    if (s != QP_OK) return s;
    l2c_layout L;
    if (!l2c_layout_compute(&c, version, with_cls, header, &L))
        return qp_fail(e, QP_ERR_LIMIT, "%s: header sizes overflow (dim %d, hidden_dim %d, "
                       "n_layers %d, vocab_size %d, seq_len %d)", path, c.dim, c.hidden, c.n_layers,
                       c.vocab, c.seq_len);
    if (L.total > mf->size)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: truncated: the file ends at byte offset %zu, the header "
                       "implies %zu bytes (%s classifier)", path, mf->size, L.total,
                       with_cls ? "with a separate" : "shared");
    if (L.total != mf->size) {
        l2c_layout alt;
        bool alt_fits = version == 0 && l2c_layout_compute(&c, 0, !with_cls, header, &alt) &&
                        alt.total == mf->size;
        return qp_fail(e, QP_ERR_CORRUPT, "%s: header implies %zu bytes (%s classifier) but the file "
                       "has %zu%s", path, L.total, with_cls ? "with a separate" : "shared", mf->size,
                       alt_fits ? "; the size fits the other sign of vocab_size" : "");
    }

    int64_t dim = c.dim, hid = c.hidden, nl = c.n_layers, voc = c.vocab < 0 ? -(int64_t)c.vocab : c.vocab;
    int64_t kv = dim / c.n_heads * c.n_kv_heads;
    char name[64];
    if ((s = add_f32(m, fi, mf, "token_embd.weight", L.offset[G_EMBD], dim, voc, e)) != QP_OK) return s;
    static const struct {
        int group;
        const char *fmt;
    } k_layer[] = {
        {G_RMS_ATT, "blk.%d.attn_norm.weight"}, {G_WQ, "blk.%d.attn_q.weight"},
        {G_WK, "blk.%d.attn_k.weight"},         {G_WV, "blk.%d.attn_v.weight"},
        {G_WO, "blk.%d.attn_output.weight"},    {G_RMS_FFN, "blk.%d.ffn_norm.weight"},
        {G_W1, "blk.%d.ffn_gate.weight"},       {G_W2, "blk.%d.ffn_down.weight"},
        {G_W3, "blk.%d.ffn_up.weight"},
    };
    for (int l = 0; l < (int)nl; l++) {
        for (size_t k = 0; k < sizeof k_layer / sizeof k_layer[0]; k++) {
            int g = k_layer[k].group;
            int64_t ne0, ne1;
            switch (g) {
            case G_RMS_ATT: case G_RMS_FFN: ne0 = dim; ne1 = 1; break;
            case G_WQ: case G_WO: ne0 = dim; ne1 = dim; break;
            case G_WK: case G_WV: ne0 = dim; ne1 = kv; break;
            case G_W1: case G_W3: ne0 = dim; ne1 = hid; break;
            default: ne0 = hid; ne1 = dim; break; /* G_W2: [dim][hidden] */
            }
            size_t per = (size_t)(ne0 * ne1) * 4; /* the layout bounded this product */
            size_t off = L.offset[g] + (size_t)l * per;
            snprintf(name, sizeof name, k_layer[k].fmt, l);
            if ((s = add_f32(m, fi, mf, name, off, ne0, ne1, e)) != QP_OK) return s;
        }
    }
    if ((s = add_f32(m, fi, mf, "output_norm.weight", L.offset[G_RMS_FINAL], dim, 1, e)) != QP_OK)
        return s;
    if (with_cls &&
        (s = add_f32(m, fi, mf, "output.weight", L.offset[G_WCLS], dim, voc, e)) != QP_OK)
        return s;

    m->format_version = version;
    m->arch_name = "llama";
    qp_arch *a = &m->arch;
    a->family = QP_FAMILY_LLAMA;
    a->hidden = dim;
    a->intermediate = hid;
    a->n_layers = nl;
    a->n_heads = c.n_heads;
    a->n_kv_heads = c.n_kv_heads;
    a->head_dim = dim / c.n_heads;
    a->vocab = voc;
    a->max_pos = c.seq_len;
    a->norm_eps = 1e-5f;
    a->rope_theta = 10000.0f;
    a->rope_style = QP_ROPE_NORM;
    a->tie_embeddings = !with_cls;
    a->qkv_bias = false;
    a->sub_norms = false;
    a->act = QP_ACT_SILU;
    a->bos_id = 1;
    a->eos_id = 2;
    return read_tokenizer(m, o, voc, e);
}
