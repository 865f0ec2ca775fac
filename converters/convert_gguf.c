/* Conversion driver to GGUF (converters/convert_gguf.h, converters/recipes.md). */
#define _DEFAULT_SOURCE /* madvise(MADV_DONTNEED): posix_madvise's DONTNEED is a no-op in glibc */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "converters/convert_gguf.h"
#include "core/model_internal.h"
#include "core/rope.h"
#include "readers/gguf_meta.h"
#include "readers/model_check.h"
#include "readers/name_map.h"
#include "writers/gguf_writer.h"

const char *qp_convert_gguf_arch(const qp_model *m) {
    if (m->format == QP_FORMAT_GGUF && m->arch_name) return m->arch_name;
    switch (m->arch.family) {
    case QP_FAMILY_LLAMA:
    case QP_FAMILY_MISTRAL: return "llama";
    case QP_FAMILY_QWEN2: return "qwen2";
    case QP_FAMILY_QWEN3: return "qwen3";
    case QP_FAMILY_PHI3: return "phi3";
    case QP_FAMILY_GEMMA: return "gemma";
    case QP_FAMILY_GEMMA2: return "gemma2";
    case QP_FAMILY_GEMMA3: return "gemma3";
    case QP_FAMILY_QWEN35: return "qwen35";
    /* the consumer that runs the kind (readers/gguf.md "BitNet architectures"): llama.cpp's
       "bitnet" is the SiLU graph, bitnet.cpp's "bitnet-b1.58" the ReLU^2 one */
    case QP_FAMILY_BITNET:
        return m->arch.act == QP_ACT_SILU ? "bitnet" : m->arch.act == QP_ACT_RELU2 ? "bitnet-b1.58"
                                                                                  : NULL;
    default: return m->arch_name;
    }
}

/* GGUF type ids from 36 on (I2_S and the flavours sharing its id) exist only in forks of ggml. */
#define GGML_UPSTREAM_TYPE_END 36

bool qp_plan_has_ms_i2s(const qp_plan *plan) {
    for (int64_t i = 0; i < plan->n; i++)
        if (plan->t[i].dst_enc == QP_ENC_I2_S) return true;
    return false;
}

/* A BitNet file is written only for a consumer that runs it (readers/gguf.md "BitNet
 * architectures"): the activation must be the one its architecture name means, and a "bitnet"
 * file is either llama.cpp's (upstream ggml types only) or bitnet.cpp's (MS I2_S projections,
 * no ternary type of llama.cpp's beside them). */
static qp_status check_bitnet_target(const qp_model *m, const char *arch, const qp_plan *plan,
                                     qp_err *e) {
    qp_act act;
    bool i8, ms_i2s = qp_plan_has_ms_i2s(plan);
    if (!arch || !qp_gguf_bitnet_arch(arch, ms_i2s, &act, &i8)) return QP_OK;
    if (m->arch.act != act)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: general.architecture '%s' means %s to the "
                       "runtime that runs it, but this model's FFN activation is %s; no consumer "
                       "runs that combination", m->path, arch, qp_act_name(act),
                       qp_act_name(m->arch.act));
    if (strcmp(arch, "bitnet") != 0) return QP_OK;
    for (int64_t i = 0; i < plan->n; i++) {
        qp_encoding enc = plan->t[i].dst_enc;
        int id = qp_encoding_gguf_type(enc);
        bool upstream = id >= 0 && id < GGML_UPSTREAM_TYPE_END;
        bool llama_ternary = enc == QP_ENC_TQ1_0 || enc == QP_ENC_TQ2_0;
        if (ms_i2s ? enc == QP_ENC_I2_S || (upstream && !llama_ternary) : upstream) continue;
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' would be %s in a 'bitnet' file (%s): "
                       "use TQ1_0, TQ2_0 or F16 (llama.cpp) or I2_S (bitnet.cpp)", m->path,
                       plan->t[i].name, qp_encoding_get(enc)->upper_name,
                       ms_i2s ? "its other projections are bitnet.cpp's I2_S, and no consumer "
                                "loads both kinds of ternary type"
                              : "neither llama.cpp nor bitnet.cpp runs that type under 'bitnet'");
    }
    return QP_OK;
}

void qp_convert_recipe_opts(const qp_model *m, const qp_convert_opts *o, qp_recipe_opts *ro) {
    memset(ro, 0, sizeof *ro);
    ro->quant = o->quant;
    ro->allow_requantize = o->allow_requantize;
    ro->tensor = o->tensor;
    ro->sort_llama = true;
    ro->rope_factors = m->format != QP_FORMAT_GGUF; /* a GGUF source carries its own rope_freqs */
    const char *arch = qp_convert_gguf_arch(m);
    /* HF checkpoints rotate halves; GGUF "llama" rotates adjacent pairs (spec "HF -> GGUF") */
    ro->permute_qk = m->format != QP_FORMAT_GGUF && m->arch.rope_style == QP_ROPE_NEOX && arch &&
                     strcmp(arch, "llama") == 0;
    ro->n_head = m->arch.n_heads;
    ro->n_head_kv = m->arch.n_kv_heads > 0 ? m->arch.n_kv_heads : m->arch.n_heads;
    int64_t nl = m->arch.n_layers;
    if (m->format == QP_FORMAT_GGUF && arch) {
        char key[96];
        int64_t v;
        snprintf(key, sizeof key, "%s.block_count", arch);
        if (qp_gguf_meta_int(m, key, &v)) nl = v;
    }
    ro->n_layer = nl;
    ro->is_70b = arch && strcmp(arch, "llama") == 0 && nl == 80 && m->arch.n_heads > 0 &&
                 m->arch.n_heads != ro->n_head_kv;
    ro->n_expert = m->arch.n_experts;
    ro->merge_experts = true;
    ro->norm_plus_one = m->format != QP_FORMAT_GGUF && m->arch.norm_plus_one;
    ro->ssm_a_log = m->format != QP_FORMAT_GGUF && m->arch.ssm_a_log;
    if (m->format != QP_FORMAT_GGUF && m->arch.family == QP_FAMILY_QWEN35 && !m->arch.ssm_heads_tiled &&
        m->arch.ssm_time_step_rank > 0) {
        ro->ssm_nk = m->arch.ssm_group_count;
        ro->ssm_nv = m->arch.ssm_time_step_rank;
        ro->ssm_hk = m->arch.ssm_state_size;
        ro->ssm_hv = m->arch.ssm_inner_size / m->arch.ssm_time_step_rank;
    }
}

qp_status qp_convert_gguf_plan(const qp_model *m, const qp_convert_opts *o, qp_plan *plan, qp_err *e) {
    qp_recipe_opts ro;
    qp_convert_recipe_opts(m, o, &ro);
    if (ro.permute_qk && (ro.n_head <= 0 || ro.n_head_kv <= 0))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the q/k permutation needs the head counts, which "
                       "the source does not give", m->path);
    return qp_recipe_plan(m, &ro, plan, e);
}

/* ---- row sources ------------------------------------------------------------------------------ */

typedef struct job {
    const qp_plan_entry *pe;
    int64_t row_len;       /* elements per row */
    int64_t n_rows;
    size_t src_row_bytes;
    size_t dst_row_bytes;
    float weight_scale;    /* QP_SRC_BITNET_U8; per-tensor scale of EXT_SCALE sources (I2_S) and
                              of QK256 sources with a sibling scale */
    /* per chunk */
    int64_t r0, r1;
    uint8_t *out;          /* rows r0..r1 */
    float *f32_out;        /* when non-NULL: decode only, into floats (whole-tensor path) */
    bool bad;              /* a packed code 3 was found */
    int64_t bad_row;
} job;

/* Gemma's and Qwen3.5's norms from HF (recipes.md "Gemma"): convert_hf_to_gguf.py adds 1 in the
 * tensor's torch dtype, F32 for BF16/F32 sources (widened first) and F16 for F16 ones (rounded to
 * F16); Qwen3.5's A_log becomes -exp(A_log) the same way (neg_exp). */
static void add_one(float *row, int64_t n, bool f16, bool neg_exp) {
    const qp_encoding_traits *h = qp_encoding_get(QP_ENC_F16);
    for (int64_t c = 0; c < n; c++) {
        row[c] = neg_exp ? -expf(row[c]) : row[c] + 1.0f;
        if (f16) {
            uint8_t b[2];
            h->quantize_ref(&row[c], b, 1);
            h->dequantize(b, &row[c], 1);
        }
    }
}

/* Qwen3.5's value heads reordered within one row (ssm_out's columns, ssm_a / ssm_dt). */
static void vheads_in_row(const qp_vhead_order *v, float *row, int64_t n, float *tmp) {
    memcpy(tmp, row, (size_t)n * sizeof(float));
    for (int64_t c = 0; c < n; c++) row[c] = tmp[qp_vhead_src(v, c)];
}

/* tmp: row_len floats of scratch (the in-row value-head reorder) */
static void decode_row(const job *j, int64_t r, float *row, float *tmp) {
    const qp_plan_entry *pe = j->pe;
    int64_t rin = pe->permute_heads > 0 ? qp_qk_row_in_halves(r, pe->permute_heads, j->n_rows) : r;
    if (pe->vheads.n_k > 0 && !pe->vheads.in_row) rin = qp_vhead_src(&pe->vheads, r);
    if (pe->src_kind == QP_SRC_BITNET_U8) {
        int64_t q = j->n_rows / 4, in = j->row_len;
        int64_t pr = rin % q, shift = 2 * (rin / q);
        const uint8_t *p = pe->src->data + (size_t)pr * (size_t)in;
        for (int64_t c = 0; c < in; c++) {
            int code = (p[c] >> shift) & 3;
            row[c] = code == 3 ? NAN : (float)(code - 1) * j->weight_scale;
        }
        return;
    }
    const qp_encoding_traits *st = qp_encoding_get(pe->src_enc);
    st->dequantize(pe->src->data + (size_t)rin * j->src_row_bytes, row, j->row_len);
    /* rows decode at unit scale (encoding.h; QK256: times its "<base>.scale" sibling) */
    if ((st->flags & QP_ENC_FLAG_EXT_SCALE) || pe->src_scale)
        for (int64_t c = 0; c < j->row_len; c++) row[c] *= j->weight_scale;
    if (pe->plus_one || pe->neg_exp) add_one(row, j->row_len, pe->src_enc == QP_ENC_F16, pe->neg_exp);
    if (pe->vheads.n_k > 0 && pe->vheads.in_row) vheads_in_row(&pe->vheads, row, j->row_len, tmp);
}

typedef struct worker {
    job *j;
    int64_t a, b; /* rows of the chunk */
    float *row, *tmp; /* row_len floats each */
    bool bad;
    int64_t bad_row;
} worker;

static void *work_rows(void *arg) {
    worker *w = arg;
    job *j = w->j;
    const qp_encoding_traits *dt = qp_encoding_get(j->pe->dst_enc);
    qp_quantize_fn q = dt->quantize ? dt->quantize : dt->quantize_ref;
    const float *qw = j->pe->imatrix; /* ne[0] weights per expert (ne[2]) */
    const int64_t rows_per_expert = j->pe->ne[1] > 0 ? j->pe->ne[1] : 1;
    for (int64_t r = w->a; r < w->b; r++) {
        float *row = j->f32_out ? j->f32_out + (size_t)r * (size_t)j->row_len : w->row;
        decode_row(j, r, row, w->tmp);
        if (j->pe->src_kind == QP_SRC_BITNET_U8)
            for (int64_t c = 0; c < j->row_len; c++)
                if (isnan(row[c]) && !w->bad) {
                    w->bad = true;
                    w->bad_row = r;
                }
        uint8_t *dst = j->out ? j->out + (size_t)(r - j->r0) * j->dst_row_bytes : NULL;
        if (j->f32_out) continue;
        if (qw) dt->quantize_imatrix(row, dst, j->row_len, qw + (r / rows_per_expert) * j->row_len);
        else q(row, dst, j->row_len);
    }
    return NULL;
}

/* Runs rows j->r0..j->r1 on n threads (static split: bytes do not depend on n); rows_scratch holds
 * 2 x row_len floats per thread. */
static qp_status run_rows(job *j, int n_threads, float *rows_scratch, qp_err *e) {
    int64_t n = j->r1 - j->r0;
    int nt = n_threads;
    if (nt < 1) nt = 1;
    if (nt > 64) nt = 64;
    if ((int64_t)nt > n) nt = (int)(n > 0 ? n : 1);
    worker ws[64];
    pthread_t th[64];
    for (int t = 0; t < nt; t++) {
        float *sc = rows_scratch + (size_t)t * 2 * (size_t)j->row_len;
        ws[t] = (worker){j, j->r0 + n * t / nt, j->r0 + n * (t + 1) / nt, sc, sc + j->row_len, false, 0};
    }
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&th[t], NULL, work_rows, &ws[t]) != 0) break;
        started = t;
    }
    /* rows of threads that could not start run here */
    work_rows(&ws[0]);
    for (int t = started + 1; t < nt; t++) work_rows(&ws[t]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < nt; t++)
        if (ws[t].bad) {
            j->bad = true;
            j->bad_row = ws[t].bad_row;
            return qp_fail(e, QP_ERR_CORRUPT, "tensor '%s': packed ternary code 3 (invalid) in row "
                           "%lld", j->pe->src->name, (long long)ws[t].bad_row);
        }
    return QP_OK;
}

/* Drops the mapped pages of a source tensor from memory (they are re-read if needed). Only a
 * tensor inside its file's mapping: a copy the reader made on the heap (TRLM rows, RDRR decoded
 * tensors) would lose its page, and the allocator's data beside it, to MADV_DONTNEED. */
static void release_source(const qp_model *m, const qp_tensor *t) {
    if (!t || !t->data || t->nbytes == 0) return;
    const qp_mapped_file *f = qp_model_file(m, t->file_index);
    if (!f || !f->data || t->data < f->data || t->nbytes > f->size ||
        (size_t)(t->data - f->data) > f->size - t->nbytes)
        return;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0) return;
    uintptr_t a = (uintptr_t)t->data, b = a + t->nbytes;
    uintptr_t a0 = a & ~(uintptr_t)(ps - 1);
    (void)madvise((void *)a0, b - a0, MADV_DONTNEED);
}

/* True when every value is 0 or +-s for one s > 0 (or all are 0). */
static bool exactly_ternary(const float *x, int64_t n, float *s_out) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a == 0.0f) continue;
        if (!(a == a)) return false;
        if (s == 0.0f) s = a;
        else if (a != s) return false;
    }
    *s_out = s;
    return true;
}

/* The bytes of one entry's source tensor (or of one expert slice of a merged entry). */
static qp_status write_data(const qp_model *m, const qp_plan_entry *pe, const qp_convert_opts *o,
                            qp_gguf_writer *w, float *qk_scale, qp_err *e) {
    const qp_tensor *t = pe->src;
    if (qp_encoding_has_sibling_scale(pe->dst_enc)) { /* a copy keeps its source's scale (1: none) */
        *qk_scale = 1.0f;
        if (qp_encoding_has_sibling_scale(pe->src_enc)) (void)qp_gguf_sibling_scale(m, t, qk_scale);
    }
    if (!pe->convert) {
        size_t done = 0;
        while (done < t->nbytes) {
            size_t k = t->nbytes - done;
            if (k > QP_CONVERT_CHUNK_BYTES) k = QP_CONVERT_CHUNK_BYTES;
            qp_status s = qp_gguf_writer_write(w, t->data + done, k, e);
            if (s != QP_OK) return s;
            done += k;
        }
        release_source(m, t);
        return QP_OK;
    }
    job j = {0};
    j.pe = pe;
    int64_t total = 1;
    for (int d = 0; d < QP_MAX_DIMS; d++) total *= pe->ne[d];
    if (total <= 0) /* a zero dimension: bad input, not a broken invariant */
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' has a zero dimension (ne=[%lld, %lld, "
                       "%lld, %lld])", m->path, t->name, (long long)pe->ne[0], (long long)pe->ne[1],
                       (long long)pe->ne[2], (long long)pe->ne[3]);
    j.row_len = pe->n_dims == 1 && pe->permute_heads > 0 ? 1 : pe->ne[0];
    j.n_rows = j.row_len ? total / j.row_len : 0;
    if (pe->src_kind == QP_SRC_PLAIN) {
        if (!qp_encoding_row_bytes(pe->src_enc, j.row_len, &j.src_row_bytes))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': rows of %lld elements do not fit "
                           "%s blocks", m->path, t->name, (long long)j.row_len,
                           qp_encoding_get(pe->src_enc)->upper_name);
        size_t need;
        if (!qp_size_mul(j.src_row_bytes, (size_t)j.n_rows, &need) || need > t->nbytes)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': %zu bytes, fewer than its shape needs",
                           m->path, t->name, t->nbytes);
        const qp_encoding_traits *st = qp_encoding_get(pe->src_enc);
        j.weight_scale = 1.0f;
        if ((st->flags & QP_ENC_FLAG_EXT_SCALE) &&
            !qp_encoding_tensor_scale(pe->src_enc, t->data, t->nbytes, total, &j.weight_scale))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': %s without a per-tensor scale "
                           "cannot be decoded", m->path, t->name, st->upper_name);
        if (pe->src_scale && !qp_gguf_sibling_scale(m, t, &j.weight_scale))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': cannot read its scale tensor '%s'",
                           m->path, t->name, pe->src_scale->name);
    } else {
        const qp_tensor *sc = pe->src_scale;
        float f[1];
        qp_encoding_get(sc->enc)->dequantize(sc->data, f, 1);
        j.weight_scale = f[0];
        if ((size_t)(j.n_rows / 4) * (size_t)j.row_len > t->nbytes)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': too few bytes", m->path, t->name);
    }
    int nt = o->threads > 0 ? o->threads : 1;
    if (nt > 64) nt = 64;
    float *scratch = qp_calloc((size_t)nt * 2, (size_t)j.row_len * sizeof(float)); /* row, tmp */
    if (!scratch) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
    qp_status s = QP_OK;
    const qp_encoding_traits *dt = qp_encoding_get(pe->dst_enc);
    bool whole = pe->ternary || dt->tensor_trailer_bytes || !(dt->quantize || dt->quantize_ref);
    if (whole) {
        /* the whole tensor as floats: a per-tensor scale needs every value first */
        float *x = qp_malloc((size_t)total * sizeof(float));
        uint8_t *y = qp_malloc(pe->dst_bytes ? pe->dst_bytes : 1);
        if (!x || !y) s = qp_fail(e, QP_ERR_NOMEM, "%s: tensor '%s': out of memory for %lld floats",
                                  m->path, pe->name, (long long)total);
        if (s == QP_OK) {
            j.f32_out = x;
            j.r0 = 0;
            j.r1 = j.n_rows;
            s = run_rows(&j, nt, scratch, e);
        }
        if (s == QP_OK && pe->ternary) {
            float sc;
            if (!exactly_ternary(x, total, &sc)) {
                /* BitNet b1.58 weight quantization: absmean scale, round, clamp to {-1,0,1} */
                int8_t *q = qp_malloc((size_t)total);
                if (!q) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
                else {
                    qp_ternary_absmean(x, total, q, &sc);
                    for (int64_t i = 0; i < total; i++) x[i] = (float)q[i] * sc;
                    qp_free(q);
                }
            }
            /* QK256 stores the unit-scale levels; the scale goes to "<base>.scale". Its LUT has
             * no 0: the encoder maps 0 to +1 (encodings/enc_ternary.md), lossy by design. */
            if (s == QP_OK && qp_encoding_has_sibling_scale(pe->dst_enc)) {
                *qk_scale = sc;
                if (sc > 0.0f)
                    for (int64_t i = 0; i < total; i++) x[i] /= sc;
            }
        }
        if (s == QP_OK && !qp_encoding_quantize_tensor(pe->dst_enc, x, y, total))
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': cannot encode as %s", m->path,
                        pe->name, dt->upper_name);
        if (s == QP_OK) s = qp_gguf_writer_write(w, y, pe->dst_bytes, e);
        qp_free(x);
        qp_free(y);
    } else {
        if (!qp_encoding_row_bytes(pe->dst_enc, j.row_len, &j.dst_row_bytes) || j.dst_row_bytes == 0)
            s = qp_fail(e, QP_ERR_INTERNAL, "tensor '%s': bad row size", pe->name);
        int64_t rows_per_chunk = 1;
        if (s == QP_OK) {
            rows_per_chunk = (int64_t)(QP_CONVERT_CHUNK_BYTES / j.dst_row_bytes);
            if (rows_per_chunk < 1) rows_per_chunk = 1;
            if (rows_per_chunk > j.n_rows) rows_per_chunk = j.n_rows > 0 ? j.n_rows : 1;
        }
        uint8_t *buf = s == QP_OK ? qp_malloc((size_t)rows_per_chunk * j.dst_row_bytes) : NULL;
        if (s == QP_OK && !buf) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", m->path);
        for (int64_t r0 = 0; s == QP_OK && r0 < j.n_rows; r0 += rows_per_chunk) {
            j.r0 = r0;
            j.r1 = r0 + rows_per_chunk < j.n_rows ? r0 + rows_per_chunk : j.n_rows;
            j.out = buf;
            s = run_rows(&j, nt, scratch, e);
            if (s == QP_OK)
                s = qp_gguf_writer_write(w, buf, (size_t)(j.r1 - j.r0) * j.dst_row_bytes, e);
        }
        qp_free(buf);
    }
    qp_free(scratch);
    if (s != QP_OK) return s;
    release_source(m, t);
    return QP_OK;
}

/* One output tensor: its source's bytes, or a merged MoE entry's experts one after the other
 * (each a 2-D slice with its own rows of importance weights), so memory stays bounded by one
 * expert's chunk of rows. */
static qp_status write_entry(const qp_model *m, const qp_plan_entry *pe, const qp_convert_opts *o,
                             qp_gguf_writer *w, float *qk_scale, qp_err *e) {
    qp_status s = QP_OK;
    if (pe->src_kind == QP_SRC_SCALE_OF_PREV) { /* the scale the QK256 entry before it chose */
        uint8_t b[4];
        qp_store_f32le(b, *qk_scale);
        s = qp_gguf_writer_write(w, b, sizeof b, e);
    } else if (pe->src_kind == QP_SRC_ROPE_FACTORS) {
        for (int64_t i = 0; s == QP_OK && i < pe->ne[0]; i++) {
            uint8_t b[4]; /* F32 as convert_hf_to_gguf.py stores them */
            qp_store_f32le(b, (float)qp_rope_llama3_divisor(m->arch.rope_theta > 0.0f ? m->arch.rope_theta : 10000.0,
                                                            2 * pe->ne[0], &m->arch.rope_llama3, i));
            s = qp_gguf_writer_write(w, b, sizeof b, e);
        }
    } else if (pe->n_parts > 0) {
        for (int64_t x = 0; s == QP_OK && x < pe->n_parts; x++) {
            qp_plan_entry part = *pe;
            part.src = pe->parts[x];
            part.parts = NULL;
            part.n_parts = 0;
            part.n_dims = 2;
            part.ne[2] = 1;
            part.dst_bytes = pe->dst_bytes / (size_t)pe->n_parts;
            part.imatrix = pe->imatrix ? pe->imatrix + x * pe->ne[0] : NULL;
            s = write_data(m, &part, o, w, qk_scale, e);
        }
    } else {
        s = write_data(m, pe, o, w, qk_scale, e);
    }
    return s == QP_OK ? qp_gguf_writer_end_tensor(w, e) : s;
}

static bool is_split_key(const char *k) { return strncmp(k, "split.", 6) == 0; }

/* Keys not copied from a GGUF source: rewritten for the output (the BitNet keys because the
 * output's weights decide what "bitnet" computes). */
static bool rewritten_key(const qp_model *m, const char *k) {
    qp_act act;
    bool i8;
    if (qp_gguf_bitnet_arch(m->arch_name, false, &act, &i8) &&
        (strcmp(k, QP_GGUF_FFN_ACT_KEY) == 0 || strcmp(k, QP_GGUF_ACT_QUANT_KEY) == 0))
        return true;
    return is_split_key(k) || strcmp(k, "general.quantization_version") == 0 ||
           strcmp(k, "general.file_type") == 0 || strcmp(k, QP_GGUF_I2S_FLAVOUR_KEY) == 0;
}

static qp_status gguf_source_metadata(const qp_model *m, const qp_plan *plan, qp_gguf_writer *w,
                                      qp_err *e) {
    qp_status s = QP_OK;
    for (int64_t i = 0; i < m->n_meta; i++) {
        const qp_meta *md = &m->meta[i];
        if (rewritten_key(m, md->key)) continue;
        if ((s = qp_gguf_writer_add_meta(w, md, e)) != QP_OK) return s;
    }
    if ((s = qp_gguf_bitnet_keys(m->arch_name, qp_plan_has_ms_i2s(plan), w, e)) != QP_OK) return s;
    s = qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e);
    if (s == QP_OK) s = qp_gguf_writer_add_u32(w, "general.file_type", plan->file_type, e);
    return s;
}

qp_status qp_convert_gguf_write(const qp_model *m, const qp_plan *plan, const qp_convert_opts *o,
                                const char *out_path, qp_err *e) {
    if (!m || !plan || !o || !out_path) return qp_fail(e, QP_ERR_ARG, "qp_convert_gguf_write: NULL argument");
    /* never write a model the runtime rejects (readers/model_check.h) */
    qp_status s = qp_model_check_for_write(m, o->allow_nonfinite, e);
    if (s != QP_OK) return s;
    const char *arch = qp_convert_gguf_arch(m);
    if (!arch && m->format != QP_FORMAT_GGUF)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture '%s' (%s activation) has no GGUF "
                       "mapping", m->path, m->arch_name ? m->arch_name : "unknown",
                       qp_act_name(m->arch.act));
    if ((s = check_bitnet_target(m, arch, plan, e)) != QP_OK) return s;
    qp_gguf_writer *w;
    if ((s = qp_gguf_writer_new(out_path, &w, e)) != QP_OK) return s;
    if (m->format == QP_FORMAT_GGUF)
        s = gguf_source_metadata(m, plan, w, e);
    else
        s = qp_hf_gguf_metadata(m, arch, plan, w, e);
    /* tensors written under a shared GGUF type (QK256 under 36) say which flavour they are
     * (readers/gguf.md "Type 36 flavours"); one file holds one flavour */
    const char *flavour = NULL;
    for (int64_t i = 0; s == QP_OK && i < plan->n; i++) {
        const qp_encoding_traits *dt = qp_encoding_get(plan->t[i].dst_enc);
        if (!dt || dt->ggml_type >= 0 || !dt->gguf_flavour) continue;
        if (flavour && strcmp(flavour, dt->gguf_flavour) != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: one GGUF file cannot hold both %s and %s tensors "
                        "under type %d", m->path, flavour, dt->gguf_flavour, dt->gguf_shared_type);
        flavour = dt->gguf_flavour;
    }
    if (s == QP_OK && flavour)
        s = qp_gguf_writer_add_str(w, QP_GGUF_I2S_FLAVOUR_KEY, flavour, strlen(flavour), e);
    for (int64_t i = 0; s == QP_OK && i < plan->n; i++) {
        const qp_plan_entry *pe = &plan->t[i];
        s = qp_gguf_writer_add_tensor_sized(w, pe->name, pe->ggml_type, pe->n_dims, pe->ne,
                                            pe->dst_bytes, e);
    }
    if (s == QP_OK) s = qp_gguf_writer_begin(w, e);
    uint64_t done = 0;
    float qk_scale = 1.0f;
    for (int64_t i = 0; s == QP_OK && i < plan->n; i++) {
        if (o->cancel && atomic_load(o->cancel)) {
            s = qp_fail(e, QP_ERR_CANCELLED, "%s: cancelled before tensor '%s' (%lld of %lld)",
                        out_path, plan->t[i].name, (long long)i + 1, (long long)plan->n);
            break;
        }
        s = write_entry(m, &plan->t[i], o, w, &qk_scale, e);
        if (s != QP_OK) {
            qp_err_prefix(e, "while writing %s: ", out_path);
            break;
        }
        done += plan->t[i].dst_bytes;
        if (o->progress) o->progress(o->progress_ud, i + 1, plan->n, &plan->t[i], done, plan->dst_bytes);
    }
    if (s != QP_OK) {
        qp_gguf_writer_abort(w);
        return s;
    }
    return qp_gguf_writer_finish(w, e);
}

qp_status qp_convert_gguf(const qp_model *m, const qp_convert_opts *o, const char *out_path, qp_err *e) {
    qp_plan plan;
    qp_status s = qp_convert_gguf_plan(m, o, &plan, e);
    if (s != QP_OK) return s;
    s = qp_convert_gguf_write(m, &plan, o, out_path, e);
    qp_plan_free(&plan);
    return s;
}
