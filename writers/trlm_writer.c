/* TRLM v1 writer: qmodel.tensors, rope.cache, qmodel.lora. Byte tables: readers/trlm.md.
 * Every file goes through qp_outfile (temp name, renamed on success). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "writers/trlm_writer.h"

#include "core/rope.h"

static const char *const k_trlm_files[] = {
    "qmodel.tensors", "rope.cache", "qmodel.lora", "inference.config", ".quantize_manifest.bin",
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
    "tokenizer.model", "special_tokens_map.json", NULL};
const qp_outdir_kind qp_trlm_outdir_kind = {"TRLM model folder", "qmodel.tensors", k_trlm_files};
/* the SDK's LoRA adapter bundle: qmodel.lora, trillim_config.json and the adapter's own files */
static const char *const k_trlm_adapter_files[] = {
    "qmodel.lora", "trillim_config.json", ".quantize_manifest.bin", ".unused-qmodel.tensors",
    "adapter_config.json", "*.json", "*.txt", "*.model", "*.jinja", "README.md", NULL};
const qp_outdir_kind qp_trlm_adapter_outdir_kind = {"TRLM LoRA adapter folder", "qmodel.lora",
                                                    k_trlm_adapter_files};

/* ---- qmodel.tensors ------------------------------------------------------------------------- */

struct qp_trlm_writer {
    qp_outfile *f;
    const qp_trlm_record *records;
    uint32_t n, cur;
    uint64_t written; /* bytes of the current record written */
};

static qp_status writer_pad_to(qp_trlm_writer *w, uint64_t off, qp_err *e) {
    static const uint8_t zeros[QP_TRLM_ALIGN] = {0};
    uint64_t at = qp_outfile_tell(w->f);
    if (at > off) return qp_fail(e, QP_ERR_INTERNAL, "trlm writer: data past offset %llu",
                                 (unsigned long long)off);
    return off > at ? qp_outfile_write(w->f, zeros, (size_t)(off - at), e) : QP_OK;
}

qp_status qp_trlm_writer_open(const char *path, uint32_t arch, const qp_trlm_body *body,
                              qp_trlm_record *records, qp_trlm_writer **out, qp_err *e) {
    if (!path || !body || (!records && body->n_tensors) || !out)
        return qp_fail(e, QP_ERR_ARG, "qp_trlm_writer_open: NULL argument");
    if (body->n_tensors > QP_TRLM_MAX_TENSORS)
        return qp_fail(e, QP_ERR_LIMIT, "%s: %u tensors (at most %u)", path, body->n_tensors,
                       QP_TRLM_MAX_TENSORS);
    /* lay out the data: after the record table, each tensor aligned */
    uint64_t off = QP_TRLM_HEADER_BYTES + QP_TRLM_BODY_HEADER_BYTES +
                   (uint64_t)body->n_tensors * QP_TRLM_RECORD_BYTES;
    for (uint32_t i = 0; i < body->n_tensors; i++) {
        qp_trlm_record *r = &records[i];
        uint64_t sz;
        if (!qp_trlm_data_size(r->kind, r->padded_rows, r->padded_cols, &sz))
            return qp_fail(e, QP_ERR_ARG, "%s: tensor %u has an unknown kind %d", path, i, (int)r->kind);
        off = (off + QP_TRLM_ALIGN - 1) / QP_TRLM_ALIGN * QP_TRLM_ALIGN;
        r->offset = off;
        r->size = sz;
        off += sz;
    }
    qp_trlm_writer *w = qp_calloc(1, sizeof *w);
    if (!w) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    qp_status s = qp_outfile_open(path, &w->f, e);
    if (s != QP_OK) {
        qp_free(w);
        return s;
    }
    w->records = records;
    w->n = body->n_tensors;
    uint8_t hdr[QP_TRLM_HEADER_BYTES];
    memcpy(hdr, "TRLM", 4);
    qp_store_u32le(hdr + 4, QP_TRLM_VERSION);
    qp_store_u32le(hdr + 8, arch);
    qp_store_u32le(hdr + 12, 0);
    uint8_t bh[QP_TRLM_BODY_HEADER_BYTES];
    qp_trlm_body versioned = *body;
    versioned.version = qp_trlm_body_version(records, body->n_tensors);
    qp_trlm_body_encode(&versioned, bh);
    s = qp_outfile_write(w->f, hdr, sizeof hdr, e);
    if (s == QP_OK) s = qp_outfile_write(w->f, bh, sizeof bh, e);
    for (uint32_t i = 0; s == QP_OK && i < w->n; i++) {
        uint8_t rec[QP_TRLM_RECORD_BYTES];
        qp_trlm_record_encode(&records[i], rec);
        s = qp_outfile_write(w->f, rec, sizeof rec, e);
    }
    if (s == QP_OK && w->n > 0) s = writer_pad_to(w, records[0].offset, e);
    if (s != QP_OK) {
        qp_trlm_writer_abort(w);
        return s;
    }
    *out = w;
    return QP_OK;
}

qp_status qp_trlm_writer_write(qp_trlm_writer *w, const void *data, size_t n, qp_err *e) {
    const uint8_t *p = data;
    while (n > 0) {
        if (w->cur >= w->n)
            return qp_fail(e, QP_ERR_INTERNAL, "%s: data beyond the last tensor",
                           qp_outfile_path(w->f));
        const qp_trlm_record *r = &w->records[w->cur];
        uint64_t left = r->size - w->written;
        size_t take = n < left ? n : (size_t)left;
        qp_status s = qp_outfile_write(w->f, p, take, e);
        if (s != QP_OK) return s;
        p += take;
        n -= take;
        w->written += take;
        if (w->written == r->size) {
            w->cur++;
            w->written = 0;
            if (w->cur < w->n && (s = writer_pad_to(w, w->records[w->cur].offset, e)) != QP_OK)
                return s;
        }
    }
    return QP_OK;
}

qp_status qp_trlm_writer_commit(qp_trlm_writer *w, qp_err *e) {
    if (!w) return qp_fail(e, QP_ERR_ARG, "qp_trlm_writer_commit: NULL writer");
    if (w->cur != w->n) {
        qp_status s = qp_fail(e, QP_ERR_INTERNAL, "%s: only %u of %u tensors written",
                              qp_outfile_path(w->f), w->cur, w->n);
        qp_trlm_writer_abort(w);
        return s;
    }
    qp_status s = qp_outfile_commit(w->f, e);
    qp_free(w);
    return s;
}

void qp_trlm_writer_abort(qp_trlm_writer *w) {
    if (!w) return;
    qp_outfile_abort(w->f);
    qp_free(w);
}

/* ---- rope.cache ------------------------------------------------------------------------------ */

double qp_trrc_angle(uint32_t pos, uint32_t i, uint32_t head_dim, double theta) {
    double inv_freq = pow(theta, -(double)(2u * i) / (double)head_dim);
    return (double)pos * inv_freq;
}

static void store_f64le(uint8_t *p, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    qp_store_u64le(p, u);
}

/* The YaRN trailer after the tables (converters/trillim_sdk.md "Rope"). */
static qp_status write_yarn_trailer(qp_outfile *f, uint32_t head_dim, const qp_rope_yarn *y, qp_err *e) {
    uint8_t t[QP_TRRC_YARN_BYTES] = {0};
    memcpy(t, "YARN", 4);
    qp_store_u32le(t + 4, head_dim); /* rope dim */
    store_f64le(t + 8, y->factor);
    qp_store_u32le(t + 16, (uint32_t)y->orig_max_pos);
    store_f64le(t + 24, y->beta_fast > 0.0 ? y->beta_fast : 32.0);
    store_f64le(t + 32, y->beta_slow > 0.0 ? y->beta_slow : 1.0);
    store_f64le(t + 40, qp_rope_attention_factor(y));
    return qp_outfile_write(f, t, sizeof t, e);
}

qp_status qp_trrc_write(const char *path, uint32_t max_pos, uint32_t head_dim, double theta,
                        const qp_rope_yarn *yarn, qp_err *e) {
    if (yarn && !(yarn->factor > 0.0)) yarn = NULL;
    if (yarn && (!(yarn->factor >= 1.0) || !isfinite(yarn->factor) || yarn->orig_max_pos <= 0 ||
                 yarn->orig_max_pos > QP_TRLM_MAX_POS || !(yarn->beta_fast >= 0.0) ||
                 !(yarn->beta_slow >= 0.0) || !isfinite(yarn->beta_fast) || !isfinite(yarn->beta_slow)))
        return qp_fail(e, QP_ERR_ARG, "%s: bad YaRN parameters: factor %g, original max positions %lld, "
                       "beta_fast %g, beta_slow %g", path, yarn->factor, (long long)yarn->orig_max_pos,
                       yarn->beta_fast, yarn->beta_slow);
    double mscale = qp_rope_attention_factor(yarn);
    if (max_pos == 0 || max_pos > QP_TRLM_MAX_POS || head_dim == 0 || head_dim % 2 != 0 ||
        head_dim > 65536 || !(theta > 0.0) || !isfinite(theta))
        return qp_fail(e, QP_ERR_ARG, "%s: bad rope parameters: max_pos %u, head_dim %u, theta %g",
                       path, max_pos, head_dim, theta);
    uint32_t half = head_dim / 2;
    float *row = qp_malloc((size_t)half * 2 * sizeof *row);
    uint8_t *buf = qp_malloc((size_t)half * 4);
    if (!row || !buf) {
        qp_free(row);
        qp_free(buf);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    qp_outfile *f = NULL;
    qp_status s = qp_outfile_open(path, &f, e);
    if (s == QP_OK) {
        uint8_t hdr[QP_TRRC_HEADER_BYTES + QP_TRRC_BODY_HEADER_BYTES];
        memcpy(hdr, "TRRC", 4);
        qp_store_u32le(hdr + 4, QP_TRLM_VERSION);
        qp_store_u32le(hdr + 8, 0);
        qp_store_u32le(hdr + 12, max_pos);
        qp_store_u32le(hdr + 16, head_dim);
        uint64_t tb;
        memcpy(&tb, &theta, 8);
        qp_store_u64le(hdr + 20, tb);
        s = qp_outfile_write(f, hdr, sizeof hdr, e);
    }
    for (int table = 0; table < 2 && s == QP_OK; table++) {
        for (uint32_t p = 0; p < max_pos && s == QP_OK; p++) {
            for (uint32_t i = 0; i < half; i++) {
                double a = yarn ? (double)p * qp_rope_inv_freq(theta, head_dim, yarn, i)
                                : qp_trrc_angle(p, i, head_dim, theta);
                qp_store_f32le(buf + 4 * i, (float)((table == 0 ? cos(a) : sin(a)) * mscale));
            }
            s = qp_outfile_write(f, buf, (size_t)half * 4, e);
        }
    }
    if (s == QP_OK && yarn) s = write_yarn_trailer(f, head_dim, yarn, e);
    qp_free(row);
    qp_free(buf);
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return s;
    }
    return qp_outfile_commit(f, e);
}

/* ---- qmodel.lora ----------------------------------------------------------------------------- */

qp_status qp_trla_write(const char *path, uint32_t n_layers, uint32_t rank, double scale,
                        const qp_trla_slot *slots, qp_err *e) {
    if (n_layers == 0 || n_layers > QP_TRLM_MAX_LAYERS || rank == 0 || rank > 65536 ||
        !isfinite(scale))
        return qp_fail(e, QP_ERR_ARG, "%s: bad LoRA parameters: %u layers, rank %u, scale %g",
                       path, n_layers, rank, scale);
    uint32_t n_slots = n_layers * QP_TRLA_TARGETS;
    uint64_t off = QP_TRLA_HEADER_BYTES + QP_TRLA_BODY_HEADER_BYTES + (uint64_t)n_slots * QP_TRLA_SLOT_BYTES;
    uint64_t *offs = qp_calloc(n_slots, sizeof *offs);
    if (!offs) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    size_t maxrow = 1;
    for (uint32_t i = 0; i < n_slots; i++) {
        const qp_trla_slot *sl = &slots[i];
        if (!sl->present) continue;
        if (sl->in_orig == 0 || sl->out_orig == 0 || sl->in_padded < sl->in_orig ||
            sl->out_padded < sl->out_orig || sl->in_padded > QP_TRLM_MAX_DIM ||
            sl->out_padded > QP_TRLM_MAX_DIM || !sl->a || !sl->b) {
            qp_free(offs);
            return qp_fail(e, QP_ERR_ARG, "%s: LoRA slot %u has a bad shape", path, i);
        }
        off = (off + QP_TRLM_ALIGN - 1) / QP_TRLM_ALIGN * QP_TRLM_ALIGN;
        offs[i] = off;
        off += 4ull * rank * ((uint64_t)sl->in_padded + sl->out_padded);
        if (sl->in_padded > maxrow) maxrow = sl->in_padded;
    }
    if (rank > maxrow) maxrow = rank;
    uint8_t *buf = qp_calloc(maxrow, 4);
    qp_outfile *f = NULL;
    qp_status s = buf ? qp_outfile_open(path, &f, e) : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    if (s == QP_OK) {
        uint8_t hdr[QP_TRLA_HEADER_BYTES + QP_TRLA_BODY_HEADER_BYTES] = {0};
        memcpy(hdr, "TRLA", 4);
        qp_store_u32le(hdr + 4, QP_TRLM_VERSION);
        qp_store_u32le(hdr + 12, n_layers);
        qp_store_u32le(hdr + 16, QP_TRLA_TARGETS);
        qp_store_u32le(hdr + 20, rank);
        qp_store_u32le(hdr + 24, 0); /* dtype: F32 */
        uint64_t sb;
        memcpy(&sb, &scale, 8);
        qp_store_u64le(hdr + 28, sb);
        s = qp_outfile_write(f, hdr, sizeof hdr, e);
    }
    for (uint32_t i = 0; i < n_slots && s == QP_OK; i++) {
        uint8_t rec[QP_TRLA_SLOT_BYTES] = {0};
        const qp_trla_slot *sl = &slots[i];
        if (sl->present) {
            qp_store_u32le(rec + 0, 1);
            qp_store_u32le(rec + 4, sl->in_orig);
            qp_store_u32le(rec + 8, sl->out_orig);
            qp_store_u32le(rec + 12, sl->in_padded);
            qp_store_u32le(rec + 16, sl->out_padded);
            qp_store_u64le(rec + 24, offs[i]);
        }
        s = qp_outfile_write(f, rec, sizeof rec, e);
    }
    for (uint32_t i = 0; i < n_slots && s == QP_OK; i++) {
        const qp_trla_slot *sl = &slots[i];
        if (!sl->present) continue;
        s = qp_outfile_pad(f, QP_TRLM_ALIGN, e);
        /* A: rank rows of in_padded */
        for (uint32_t r = 0; r < rank && s == QP_OK; r++) {
            memset(buf, 0, (size_t)sl->in_padded * 4);
            for (uint32_t c = 0; c < sl->in_orig; c++)
                qp_store_f32le(buf + 4 * c, sl->a[(size_t)r * sl->in_orig + c]);
            s = qp_outfile_write(f, buf, (size_t)sl->in_padded * 4, e);
        }
        /* B: out_padded rows of rank */
        for (uint32_t o = 0; o < sl->out_padded && s == QP_OK; o++) {
            memset(buf, 0, (size_t)rank * 4);
            if (o < sl->out_orig)
                for (uint32_t r = 0; r < rank; r++)
                    qp_store_f32le(buf + 4 * r, sl->b[(size_t)o * rank + r]);
            s = qp_outfile_write(f, buf, (size_t)rank * 4, e);
        }
    }
    qp_free(buf);
    qp_free(offs);
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return s;
    }
    return qp_outfile_commit(f, e);
}
