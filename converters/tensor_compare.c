/* converters/tensor_compare.h: tensor identity of two models (cli/roundtrip.md "Proofs"). */
#include <stdio.h>
#include <string.h>

#include "converters/tensor_compare.h"
#include "readers/name_map.h"

static const char *key_of(const qp_tensor *t) { return t->canon ? t->canon : t->name; }

static bool same_shape(const qp_tensor *a, const qp_tensor *b) {
    for (int d = 0; d < QP_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d]) return false;
    return true;
}

static void shape_text(const qp_tensor *t, char *buf, size_t n) {
    snprintf(buf, n, "[%lld, %lld, %lld, %lld]", (long long)t->ne[0], (long long)t->ne[1],
             (long long)t->ne[2], (long long)t->ne[3]);
}

/* t decoded to n floats in out; false when its encoding has no decoder. */
static bool decode_f32(const qp_tensor *t, float *out, int64_t n) {
    if (t->enc == QP_ENC_F32) {
        memcpy(out, t->data, (size_t)n * sizeof(float));
        return true;
    }
    return qp_encoding_dequantize_tensor(t->enc, t->data, out, n);
}

/* The heads of a q/k tensor whose rows a and b keep in different RoPE orders (readers/name_map.h:
 * adjacent pairs vs halves); 0 when the order is the same. */
static int64_t reordered_heads(const qp_model *a, const qp_model *b, const qp_tensor *ta) {
    if (a->arch.rope_style == b->arch.rope_style || !ta->canon) return 0;
    if (strstr(ta->canon, ".attn_q.")) return a->arch.n_heads;
    if (strstr(ta->canon, ".attn_k.")) return a->arch.n_kv_heads > 0 ? a->arch.n_kv_heads : a->arch.n_heads;
    return 0;
}

/* Element i of b -> its element in a: the same, or b's row taken from a's other row order. */
typedef struct row_order {
    int64_t heads, rows, row_len;
    bool b_in_pairs; /* b rotates adjacent pairs, a halves */
} row_order;

static int64_t a_index(const row_order *o, int64_t i) {
    if (!o->heads) return i;
    int64_t r = i / o->row_len, c = i % o->row_len;
    int64_t ra = o->b_in_pairs ? qp_qk_row_in_halves(r, o->heads, o->rows) : qp_qk_row_in_pairs(r, o->heads, o->rows);
    return ra * o->row_len + c;
}

/* Decodes ta and tb into fa and fb and compares the bits (b's element i with a's a_index(i));
 * writes r->reason on a difference. */
static qp_status compare_decoded(const qp_tensor *ta, const qp_tensor *tb, const row_order *o, float *fa,
                                 float *fb, int64_t n, qp_tensor_compare_result *r, qp_err *e) {
    const qp_tensor *bad = !decode_f32(ta, fa, n) ? ta : !decode_f32(tb, fb, n) ? tb : NULL;
    if (bad)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tensor '%s': %s cannot be decoded to F32 for the "
                       "comparison", bad->name, qp_encoding_get(bad->enc)->upper_name);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = a_index(o, i);
        uint32_t ba, bb;
        memcpy(&ba, &fa[k], 4);
        memcpy(&bb, &fb[i], 4);
        if (ba == bb) continue;
        snprintf(r->reason, sizeof r->reason, "tensor '%s': element %lld differs: %.9g (%s) vs "
                 "%.9g (%s)", key_of(ta), (long long)k, (double)fa[k],
                 qp_encoding_get(ta->enc)->upper_name, (double)fb[i],
                 qp_encoding_get(tb->enc)->upper_name);
        return QP_OK;
    }
    if (o->heads) r->n_reordered++;
    else r->n_same_f32++;
    return QP_OK;
}

/* One tensor pair: same shape, then bytes or decoded values. r->reason set on a difference. */
static qp_status compare_one(const qp_model *a, const qp_model *b, const qp_tensor *ta, const qp_tensor *tb,
                             float **buf, int64_t *cap, qp_tensor_compare_result *r, qp_err *e) {
    if (!same_shape(ta, tb)) {
        char sa[96], sb[96];
        shape_text(ta, sa, sizeof sa);
        shape_text(tb, sb, sizeof sb);
        snprintf(r->reason, sizeof r->reason, "tensor '%s': shape %s vs %s", key_of(ta), sa, sb);
        return QP_OK;
    }
    int64_t n = qp_tensor_nelements(ta);
    row_order o = {reordered_heads(a, b, ta), 0, ta->n_dims == 1 ? 1 : ta->ne[0],
                   b->arch.rope_style == QP_ROPE_NORM};
    o.rows = o.row_len > 0 ? n / o.row_len : 0;
    if (o.heads && (o.rows % o.heads || (o.rows / o.heads) % 2)) {
        snprintf(r->reason, sizeof r->reason, "tensor '%s': %lld rows do not split into %lld heads "
                 "of an even size", key_of(ta), (long long)o.rows, (long long)o.heads);
        return QP_OK;
    }
    if (!o.heads && ta->enc == tb->enc && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) == 0) {
        r->n_same_bytes++;
        return QP_OK;
    }
    if (n > *cap) {
        float *p = qp_realloc(*buf, (size_t)n * 2 * sizeof(float));
        if (!p) return qp_fail(e, QP_ERR_NOMEM, "tensor '%s': out of memory for %lld floats",
                               ta->name, (long long)n * 2);
        *buf = p;
        *cap = n;
    }
    return compare_decoded(ta, tb, &o, *buf, *buf + n, n, r, e);
}

/* 1 when x has llama.cpp's rope_freqs.weight that y computes from its llama3 rope_scaling
 * instead (an HF folder beside its GGUF: recipes.md "Rope factors"), else 0. */
static int64_t computed_rope_freqs(const qp_model *x, const qp_model *y) {
    return qp_model_find(x, "rope_freqs.weight") && !qp_model_find(y, "rope_freqs.weight") &&
           y->arch.rope_llama3.factor > 0.0;
}

qp_status qp_models_compare_tensors(const qp_model *a, const qp_model *b,
                                    qp_tensor_compare_result *r, qp_err *e) {
    memset(r, 0, sizeof *r);
    float *buf = NULL;
    int64_t cap = 0;
    qp_status s = QP_OK;
    for (int64_t i = 0; i < a->n_tensors && s == QP_OK && !r->reason[0]; i++) {
        const qp_tensor *ta = &a->tensors[i], *tb = qp_model_find(b, key_of(ta));
        if (!tb && computed_rope_freqs(a, b) && ta == qp_model_find(a, "rope_freqs.weight")) continue;
        if (!tb) snprintf(r->reason, sizeof r->reason, "tensor '%s' is missing from %s", key_of(ta), b->path);
        else s = compare_one(a, b, ta, tb, &buf, &cap, r, e);
        if (s == QP_OK && !r->reason[0]) r->n_tensors++;
    }
    qp_free(buf);
    if (s != QP_OK) return s;
    if (!r->reason[0] && b->n_tensors - computed_rope_freqs(b, a) != a->n_tensors - computed_rope_freqs(a, b))
        snprintf(r->reason, sizeof r->reason, "%s has %lld tensors, %s has %lld", b->path,
                 (long long)b->n_tensors, a->path, (long long)a->n_tensors);
    r->equal = !r->reason[0];
    return QP_OK;
}
