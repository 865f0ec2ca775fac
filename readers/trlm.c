/* TRLM v1 reader: a Trillim model directory (qmodel.tensors + rope.cache [+ config.json,
 * tokenizer.json]) -> qp_model; and the LoRA merge of qmodel.lora. Byte tables and the limits
 * enforced here: readers/trlm.md. Every size and offset is checked before use. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "readers/hf_config.h"
#include "core/rope.h"
#include "readers/trlm_format.h"
#include "readers/trlm_bundle.h"

static char *dir_of(const char *path) {
    const char *sl = strrchr(path, '/');
    if (!sl) return qp_strdup(".");
    if (sl == path) return qp_strdup("/");
    return qp_strndup(path, (size_t)(sl - path));
}

typedef struct rope_info {
    bool present;
    uint32_t max_pos, head_dim;
    double theta;
    qp_rope_yarn yarn; /* factor 0: no YARN trailer */
} rope_info;

/* The optional YARN trailer after the tables (converters/trillim_sdk.md "Rope"). */
static qp_status read_yarn_trailer(const uint8_t *t, size_t at, const char *path, rope_info *ri, qp_err *e) {
    qp_rope_yarn *y = &ri->yarn;
    if (memcmp(t, "YARN", 4) != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset %zu: 48 bytes after the tables that are not a "
                       "YARN trailer", path, at);
    y->factor = qp_load_f64le(t + 8);
    y->orig_max_pos = qp_load_u32le(t + 16);
    y->beta_fast = qp_load_f64le(t + 24);
    y->beta_slow = qp_load_f64le(t + 32);
    double mscale = qp_load_f64le(t + 40);
    if (qp_load_u32le(t + 4) != ri->head_dim || qp_load_u32le(t + 20) != 0 || !isfinite(y->factor) ||
        !(y->factor >= 1.0) || y->orig_max_pos == 0 || !(y->beta_fast > 0.0) || !(y->beta_slow > 0.0) ||
        !isfinite(y->beta_fast) || !isfinite(y->beta_slow) || mscale != qp_rope_attention_factor(y))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset %zu: YARN trailer out of range (rope dim %u for "
                       "head_dim %u, factor %g, original positions %lld, betas %g/%g, attention factor %g)",
                       path, at, qp_load_u32le(t + 4), ri->head_dim, y->factor,
                       (long long)y->orig_max_pos, y->beta_fast, y->beta_slow, mscale);
    return QP_OK;
}

static qp_status read_rope(qp_model *m, const char *path, rope_info *ri, qp_err *e) {
    int idx;
    qp_status s = qp_model_add_file(m, path, &idx, e);
    if (s != QP_OK) return s;
    const qp_mapped_file *f = qp_model_file(m, idx);
    const uint8_t *p = f->data;
    size_t n = f->size;
    if (n < QP_TRRC_HEADER_BYTES + QP_TRRC_BODY_HEADER_BYTES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, shorter than the 28-byte TRRC headers", path, n);
    if (memcmp(p, "TRRC", 4) != 0)
        return qp_fail(e, QP_ERR_FORMAT, "%s: offset 0: magic is not TRRC", path);
    if (qp_load_u32le(p + 4) != QP_TRLM_VERSION)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: offset 4: version %u (only 1)", path, qp_load_u32le(p + 4));
    if (qp_load_u32le(p + 8) != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset 8: reserved field is not 0", path);
    ri->max_pos = qp_load_u32le(p + 12);
    ri->head_dim = qp_load_u32le(p + 16);
    ri->theta = qp_load_f64le(p + 20);
    if (ri->max_pos == 0 || ri->max_pos > QP_TRLM_MAX_POS)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset 12: max_pos %u out of range", path, ri->max_pos);
    if (ri->head_dim < 2 || ri->head_dim % 2 || ri->head_dim > 65536)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset 16: head_dim %u (even, 2..65536)", path, ri->head_dim);
    if (!isfinite(ri->theta) || !(ri->theta > 0))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset 20: rope theta %g", path, ri->theta);
    uint64_t want = QP_TRRC_HEADER_BYTES + QP_TRRC_BODY_HEADER_BYTES +
                    2ull * ri->max_pos * (ri->head_dim / 2) * 4ull;
    if (n != want && n != want + QP_TRRC_YARN_BYTES)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, the tables for %u positions x %u need %llu "
                       "(+%d with a YARN trailer)", path, n, ri->max_pos, ri->head_dim / 2,
                       (unsigned long long)want, QP_TRRC_YARN_BYTES);
    if (n != want && (s = read_yarn_trailer(p + want, (size_t)want, path, ri, e)) != QP_OK) return s;
    /* spot checks: position 0 is cos m / sin 0; every value is within [-m, m] (m = the YaRN
       attention factor, 1 without YaRN) */
    const float mag = (float)qp_rope_attention_factor(&ri->yarn);
    const uint8_t *tab = p + QP_TRRC_HEADER_BYTES + QP_TRRC_BODY_HEADER_BYTES;
    size_t nv = (size_t)2 * ri->max_pos * (ri->head_dim / 2);
    for (size_t i = 0; i < nv; i++) {
        float v = qp_load_f32le(tab + 4 * i);
        if (!(v >= -mag && v <= mag))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: offset %zu: table value %g outside [-%g, %g]", path,
                           (size_t)(tab - p) + 4 * i, (double)v, (double)mag, (double)mag);
    }
    for (uint32_t i = 0; i < ri->head_dim / 2; i++)
        if (qp_load_f32le(tab + 4 * i) != mag || qp_load_f32le(tab + nv * 2 + 4 * i) != 0.0f)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: position 0 must have cos %g and sin 0", path, (double)mag);
    ri->present = true;
    return QP_OK;
}

static qp_status decode_record(const uint8_t *p, const qp_trlm_body *b, size_t file_size,
                               uint64_t *prev_end, const char *path, uint32_t i, size_t at,
                               qp_trlm_record *r, qp_err *e) {
    qp_trlm_record_decode(p, r);
    if (p[QP_TRLM_REC_KIND] >= QP_TRLM_KIND_COUNT ||
        (b->version == QP_TRLM_VERSION && p[QP_TRLM_REC_KIND] > QP_TRLM_KIND_I8ROWS))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: unknown kind %u (body version "
                       "%u)", path, i, at + QP_TRLM_REC_KIND, p[QP_TRLM_REC_KIND], b->version);
    if (p[QP_TRLM_REC_KIND] == QP_TRLM_KIND_Q8_0_B32 && r->padded_rows % QP_TRLM_B32_ROWS != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: Q8_0_B32 padded rows %u are "
                       "not a multiple of 32", path, i, at + QP_TRLM_REC_PADDED_ROWS, r->padded_rows);
    if (p[QP_TRLM_REC_ROLE] >= QP_TRLM_ROLE_COUNT)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: unknown role %u", path, i, at + QP_TRLM_REC_ROLE, p[QP_TRLM_REC_ROLE]);
    if (qp_load_u16le(p + QP_TRLM_REC_RESERVED16) != 0 || qp_load_u32le(p + QP_TRLM_REC_RESERVED32) != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: reserved bytes are not 0", path, i, at);
    bool global = r->role <= QP_TRLM_ROLE_OUTPUT_NORM;
    if (global ? r->layer != QP_TRLM_LAYER_NONE : r->layer >= b->n_layers)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: layer %u invalid for its role "
                       "(%u layers)", path, i, at + QP_TRLM_REC_LAYER, r->layer, b->n_layers);
    if (r->rows == 0 || r->cols == 0 || r->rows > QP_TRLM_MAX_DIM || r->cols > QP_TRLM_MAX_DIM ||
        r->padded_rows < r->rows || r->padded_cols < r->cols || r->padded_rows > QP_TRLM_MAX_DIM ||
        r->padded_cols > QP_TRLM_MAX_DIM)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: shape %u x %u padded to %u x %u",
                       path, i, at + QP_TRLM_REC_ROWS, r->rows, r->cols, r->padded_rows, r->padded_cols);
    if (qp_trlm_role_is_1d(r->role) && (r->cols != 1 || r->kind != QP_TRLM_KIND_BF16))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: a 1-D role must be BF16 with 1 "
                       "column", path, i, at);
    uint64_t want = 0;
    if (!qp_trlm_data_size(r->kind, r->padded_rows, r->padded_cols, &want) || r->size != want)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: size %llu, its kind and shape "
                       "need %llu", path, i, at + QP_TRLM_REC_SIZE, (unsigned long long)r->size, (unsigned long long)want);
    if (r->offset % QP_TRLM_ALIGN != 0 || r->offset < *prev_end || r->offset > file_size ||
        r->size > file_size - r->offset)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: data [%llu, +%llu) misaligned, "
                       "overlapping or outside the file (%zu bytes)", path, i, at + QP_TRLM_REC_OFFSET,
                       (unsigned long long)r->offset, (unsigned long long)r->size, file_size);
    *prev_end = r->offset + r->size;
    if (r->kind == QP_TRLM_KIND_TERNARY) {
        if (!isfinite(r->scale) || r->scale < 0.0f)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: ternary scale %g", path, i,
                           at + QP_TRLM_REC_SCALE, (double)r->scale);
    } else if (r->scale != 0.0f) {
        return qp_fail(e, QP_ERR_CORRUPT, "%s: record %u at offset %zu: scale must be 0 for this kind",
                       path, i, at + QP_TRLM_REC_SCALE);
    }
    return QP_OK;
}

/* The block kinds (I8ROWS, Q8_0, Q8_0_B32, Q1_0_128, TG128): padded_rows rows of
 * ceil(padded_cols/block) blocks of the kind's traits encoding, every stored block validated.
 * With cols a multiple of the block the tensor is that encoding: borrowed when the stored rows
 * are exactly the logical ones, else the first cols/block blocks of each row gathered into the
 * arena (de-interleaving Q8_0_B32). Rows ending inside a block are dequantized to F32. */
static qp_status expose_blocks(qp_model *m, const qp_trlm_record *r, const uint8_t *data,
                               const char *path, uint32_t idx, qp_tensor *t, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(qp_trlm_kind_encoding(r->kind));
    const uint32_t rows = r->rows, cols = r->cols, pr = r->padded_rows;
    const size_t be = (size_t)tr->block_elems, bb = tr->block_bytes;
    const size_t nb = ((size_t)r->padded_cols + be - 1) / be, lnb = (size_t)cols / be;
    const size_t n = (size_t)rows * cols;
    qp_arena *ar = qp_model_arena(m);
    char why[128];
    for (uint32_t y = 0; y < pr; y++)
        for (size_t j = 0; j < nb; j++) {
            uint64_t off = qp_trlm_block_offset(r->kind, y, j, nb, bb);
            if (!tr->validate(data + off, (int64_t)be, why, sizeof why))
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' (record %u) at offset %llu: row %u "
                               "block %zu: %s", path, t->name, idx,
                               (unsigned long long)(r->offset + off), y, j, why);
        }
    if (cols % be == 0) {
        t->enc = tr->id;
        t->nbytes = (size_t)rows * lnb * bb;
        if (lnb == nb && r->kind != QP_TRLM_KIND_Q8_0_B32) {
            t->data = data;
            return QP_OK;
        }
        uint8_t *c = qp_arena_alloc(ar, t->nbytes);
        if (!c) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", path, t->name);
        for (uint32_t y = 0; y < rows; y++)
            for (size_t j = 0; j < lnb; j++)
                memcpy(c + ((size_t)y * lnb + j) * bb, data + qp_trlm_block_offset(r->kind, y, j, nb, bb), bb);
        t->data = c;
        return QP_OK;
    }
    float *c = qp_arena_alloc(ar, n * 4);
    float *blk = qp_malloc(be * sizeof *blk);
    if (!c || !blk) {
        qp_free(blk);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", path, t->name);
    }
    for (uint32_t y = 0; y < rows; y++)
        for (size_t j = 0; j * be < cols; j++) {
            tr->dequantize(data + qp_trlm_block_offset(r->kind, y, j, nb, bb), blk, (int64_t)be);
            size_t take = cols - j * be < be ? cols - j * be : be;
            memcpy(c + (size_t)y * cols + j * be, blk, take * sizeof *blk);
        }
    qp_free(blk);
    t->enc = QP_ENC_F32;
    t->nbytes = n * 4;
    t->data = (const uint8_t *)c;
    return QP_OK;
}

/* Exposes one record as a qp_tensor (borrowed when the stored layout is already a traits
 * encoding at the logical shape, else an unpadded copy in the model arena). */
static qp_status expose(qp_model *m, const qp_trlm_record *r, const uint8_t *data,
                        const char *path, uint32_t idx, qp_err *e) {
    char name[64];
    qp_trlm_role_name(r->role, r->layer, name, sizeof name);
    if (m->arch.family == QP_FAMILY_QWEN35 && r->role == QP_TRLM_ROLE_FFN_NORM) /* llama.cpp's qwen35 name */
        snprintf(name, sizeof name, "blk.%u.post_attention_norm.weight", (unsigned)r->layer);
    qp_tensor *t;
    qp_status s = qp_model_add_tensor(m, name, strlen(name), &t, e);
    if (s != QP_OK) return s;
    t->canon = t->name;
    t->offset = r->offset;
    t->file_index = 0;
    uint32_t rows = r->rows, cols = r->cols, pr = r->padded_rows, pc = r->padded_cols;
    if (qp_trlm_role_is_1d(r->role)) {
        t->n_dims = 1;
        t->ne[0] = rows;
        t->ne[1] = t->ne[2] = t->ne[3] = 1;
    } else {
        t->n_dims = 2;
        t->ne[0] = cols;
        t->ne[1] = rows;
        t->ne[2] = t->ne[3] = 1;
    }
    size_t n = (size_t)rows * cols;
    qp_arena *ar = qp_model_arena(m);
    if (r->kind == QP_TRLM_KIND_BF16) {
        t->enc = QP_ENC_BF16;
        t->nbytes = n * 2;
        if (pc == cols) {
            t->data = data;
            return QP_OK;
        }
        uint8_t *c = qp_arena_alloc(ar, n * 2);
        if (!c) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", path, name);
        for (uint32_t y = 0; y < rows; y++) memcpy(c + (size_t)y * cols * 2, data + (size_t)y * pc * 2, (size_t)cols * 2);
        t->data = c;
        return QP_OK;
    }
    if (r->kind == QP_TRLM_KIND_TERNARY) {
        const qp_encoding_traits *t2 = qp_encoding_get(QP_ENC_TRLM_T2);
        size_t rb = ((size_t)pc + 3) / 4;
        char why[128];
        for (uint32_t y = 0; y < pr; y++)
            if (!t2->validate(data + (size_t)y * rb, pc, why, sizeof why))
                return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' (record %u) at offset %llu: row %u: %s",
                               path, name, idx, (unsigned long long)(r->offset + (uint64_t)y * rb), y, why);
        float tr = qp_load_f32le(data + (size_t)pr * rb);
        if (memcmp(&tr, &r->scale, 4) != 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' (record %u): trailer scale %g differs from "
                           "the record's %g", path, name, idx, (double)tr, (double)r->scale);
        if (cols % 4 == 0) {
            t->enc = QP_ENC_TRLM_T2;
            t->nbytes = n / 4 + 4;
            if (pc == cols && pr == rows) {
                t->data = data;
                return QP_OK;
            }
            uint8_t *c = qp_arena_alloc(ar, t->nbytes);
            if (!c) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", path, name);
            for (uint32_t y = 0; y < rows; y++) memcpy(c + (size_t)y * cols / 4, data + (size_t)y * rb, cols / 4);
            qp_store_f32le(c + n / 4, r->scale);
            t->data = c;
            return QP_OK;
        }
        float *c = qp_arena_alloc(ar, n * 4);
        if (!c) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for '%s'", path, name);
        float *row = qp_malloc((size_t)pc * sizeof *row);
        if (!row) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        for (uint32_t y = 0; y < rows; y++) {
            t2->dequantize(data + (size_t)y * rb, row, pc);
            for (uint32_t x = 0; x < cols; x++) c[(size_t)y * cols + x] = row[x] * r->scale;
        }
        qp_free(row);
        t->enc = QP_ENC_F32;
        t->nbytes = n * 4;
        t->data = (const uint8_t *)c;
        return QP_OK;
    }
    return expose_blocks(m, r, data, path, idx, t, e);
}

/* trillim_config.json (the current SDK's bundle metadata), when the folder has one: a model
 * bundle whose architecture agrees with qmodel.tensors' arch id; its fields become metadata
 * (converters/trillim_sdk.md "trillim_config.json"). */
static qp_status read_bundle(qp_model *m, const char *dir, uint32_t arch, qp_err *e) {
    const char *arch_name = qp_trlm_arch_name(arch);
    qp_trlm_bundle b;
    bool present = false;
    qp_status s = qp_trlm_bundle_read(dir, &b, &present, e);
    if (s != QP_OK || !present) return s;
    if (strcmp(b.type, "model") != 0)
        return qp_fail(e, QP_ERR_FORMAT, "%s/%s: type '%s': a LoRA adapter bundle, not a model (give it as "
                       "the adapter of its base model)", dir, QP_TRLM_BUNDLE_FILE, b.type);
    if (b.architecture[0] && (!arch_name || strcmp(b.architecture, arch_name) != 0))
        return qp_fail(e, QP_ERR_CORRUPT, "%s/%s: architecture '%s' but qmodel.tensors has arch id %u (%s)", dir,
                       QP_TRLM_BUNDLE_FILE, b.architecture, arch, arch_name ? arch_name : "?");
    if ((s = qp_model_meta_u32(m, "trillim.format_version", (uint32_t)b.format_version, e)) != QP_OK ||
        (s = qp_model_meta_str(m, "trillim.quantization", b.quantization, strlen(b.quantization), e)) != QP_OK)
        return s;
    return b.config_hash[0] ? qp_model_meta_str(m, "trillim.base_model_config_hash", b.config_hash, 64, e) : QP_OK;
}

qp_status qp_trlm_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    (void)o;
    char *dir = NULL, *tpath = NULL, *rpath = NULL, *cpath = NULL, *tokp = NULL, *tokc = NULL;
    qp_trlm_record *rec = NULL;
    qp_status s = QP_OK;
    if (qp_path_is_dir(path)) {
        dir = qp_strdup(path);
        tpath = qp_path_join(path, "qmodel.tensors");
    } else {
        dir = dir_of(path);
        tpath = qp_strdup(path);
    }
    if (!dir || !tpath || !(rpath = qp_path_join(dir, "rope.cache")) ||
        !(cpath = qp_path_join(dir, "config.json")) || !(tokp = qp_path_join(dir, "tokenizer.json")) ||
        !(tokc = qp_path_join(dir, "tokenizer_config.json"))) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* the files of the folder are regular files inside it, never links out of it */
    const char *pkg_files[] = {qp_path_is_dir(path) ? tpath : NULL, rpath, cpath, tokp, tokc};
    for (size_t k = 0; k < sizeof pkg_files / sizeof pkg_files[0]; k++) {
        if (pkg_files[k] &&
            (s = qp_path_check_regular(pkg_files[k], QP_FILE_NOFOLLOW | QP_FILE_ABSENT_OK, e)) != QP_OK)
            goto done;
    }
    int fi;
    if ((s = qp_model_add_file(m, tpath, &fi, e)) != QP_OK) goto done;
    const qp_mapped_file *f = qp_model_file(m, fi);
    const uint8_t *p = f->data;
    size_t fsz = f->size;
    if (fsz < QP_TRLM_HEADER_BYTES + QP_TRLM_BODY_HEADER_BYTES) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, shorter than the 64 bytes of TRLM headers", tpath, fsz);
        goto done;
    }
    if (memcmp(p, "TRLM", 4) != 0) {
        s = qp_fail(e, QP_ERR_FORMAT, "%s: offset 0: magic is not TRLM", tpath);
        goto done;
    }
    uint32_t ver = qp_load_u32le(p + 4), arch = qp_load_u32le(p + 8);
    if (ver != QP_TRLM_VERSION) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: offset 4: version %u (only 1)", tpath, ver);
        goto done;
    }
    bool qwen35 = arch == QP_TRLM_ARCH_QWEN35;
    if (arch != QP_TRLM_ARCH_BITNET && arch != QP_TRLM_ARCH_LLAMA && !qwen35 && !qp_trlm_arch_is_qwen3(arch)) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: offset 8: architecture %u (1 BITNET, 2 LLAMA, 3 QWEN35, 4 BONSAI, "
                    "5 BONSAI_TERNARY, 6 QWEN3)", tpath, arch);
        goto done;
    }
    if (qp_load_u32le(p + 12) != 0) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: offset 12: reserved field is not 0", tpath);
        goto done;
    }
    const uint8_t *bh = p + QP_TRLM_HEADER_BYTES;
    qp_trlm_body b;
    qp_trlm_body_decode(bh, &b);
    if ((b.version != QP_TRLM_VERSION && b.version != QP_TRLM_BODY_VERSION_GROUPS) ||
        qp_load_u32le(bh + QP_TRLM_BODY_ALIGN) != QP_TRLM_ALIGN || qp_load_u64le(bh + QP_TRLM_BODY_RESERVED) != 0) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: offset 16: body version %u / alignment %u / reserved "
                    "(TRLM bodies: 1 or 2 / 64 / 0)", tpath, b.version, qp_load_u32le(bh + QP_TRLM_BODY_ALIGN));
        goto done;
    }
    if (b.n_tensors == 0 || b.n_tensors > QP_TRLM_MAX_TENSORS || b.n_layers == 0 ||
        b.n_layers > QP_TRLM_MAX_LAYERS || b.hidden_orig == 0 || b.hidden < b.hidden_orig ||
        b.intermediate_orig == 0 || b.intermediate < b.intermediate_orig ||
        b.hidden > QP_TRLM_MAX_DIM || b.intermediate > QP_TRLM_MAX_DIM || b.flags > 1 ||
        !isfinite(b.norm_eps) || !(b.norm_eps > 0.0f)) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: offset 16: body header out of range (%u tensors, %u layers, "
                    "hidden %u/%u, intermediate %u/%u, eps %g, flags %u)", tpath, b.n_tensors,
                    b.n_layers, b.hidden_orig, b.hidden, b.intermediate_orig, b.intermediate,
                    (double)b.norm_eps, b.flags);
        goto done;
    }
    size_t table = QP_TRLM_HEADER_BYTES + QP_TRLM_BODY_HEADER_BYTES;
    if ((uint64_t)b.n_tensors * QP_TRLM_RECORD_BYTES > fsz - table) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: offset %zu: %u records do not fit in the file", tpath, table,
                    b.n_tensors);
        goto done;
    }
    rec = qp_calloc(b.n_tensors, sizeof *rec);
    if (!rec) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t prev_end = table + (uint64_t)b.n_tensors * QP_TRLM_RECORD_BYTES;
    bool has_out = false, has_qb = false, has_sub = false, has_qk_norm = false;
    int64_t qrows = 0, krows = 0, vocab = 0;
    for (uint32_t i = 0; i < b.n_tensors; i++) {
        size_t at = table + (size_t)i * QP_TRLM_RECORD_BYTES;
        if ((s = decode_record(p + at, &b, fsz, &prev_end, tpath, i, at, &rec[i], e)) != QP_OK) goto done;
        has_out |= rec[i].role == QP_TRLM_ROLE_OUTPUT;
        has_qb |= rec[i].role == QP_TRLM_ROLE_Q_BIAS;
        has_sub |= rec[i].role == QP_TRLM_ROLE_ATTN_SUB_NORM;
        has_qk_norm |= rec[i].role == QP_TRLM_ROLE_Q_NORM || rec[i].role == QP_TRLM_ROLE_K_NORM;
        if (rec[i].role == QP_TRLM_ROLE_Q) qrows = rec[i].rows;
        if (rec[i].role == QP_TRLM_ROLE_K) krows = rec[i].rows;
        if (rec[i].role == QP_TRLM_ROLE_EMBED) vocab = rec[i].rows;
    }
    if ((b.flags & 1u) == has_out) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: the tie flag (%u) contradicts the %s of an output record",
                    tpath, b.flags & 1u, has_out ? "presence" : "absence");
        goto done;
    }
    if (has_qk_norm != (qp_trlm_arch_is_qwen3(arch) || qwen35)) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: arch id %u %s q_norm/k_norm records (Qwen3's and Qwen3.5's "
                    "layers: arch 3-6 only, and there always)", tpath, arch, has_qk_norm ? "with" : "without");
        goto done;
    }
    rope_info ri = {0};
    if (qp_path_exists(rpath) && (s = read_rope(m, rpath, &ri, e)) != QP_OK) goto done;
    if (qp_path_exists(cpath) && (s = qp_hf_config_read(m, cpath, e)) != QP_OK) goto done;
    if ((s = read_bundle(m, dir, arch, e)) != QP_OK) goto done;
    if (qp_path_exists(tokp)) {
        qp_err te;
        qp_err_clear(&te);
        qp_status ts = qp_hf_tokenizer_read(m, tokp, qp_path_exists(tokc) ? tokc : NULL, &te);
        if (ts == QP_ERR_UNSUPPORTED) qp_model_add_problem(m, "%s", te.msg);
        else if (ts != QP_OK) {
            s = qp_fail(e, ts, "%s", te.msg);
            goto done;
        }
    }
    /* the chat template, also when the folder has no tokenizer.json (runtime/chat.md) */
    if ((s = qp_hf_chat_template_read(m, tokc, e)) != QP_OK) goto done;
    qp_arch *a = &m->arch;
    /* the activation as the SDK's runtime takes it (_resolve_activation): config.json's
       hidden_act, case-insensitive, else the arch's default (BITNET relu2, LLAMA silu) */
    const qp_meta *ha = qp_model_meta(m, "hf.config.hidden_act");
    int act = ha && ha->type == QP_META_STRING ? qp_trlm_activation_of(ha->str) : arch == QP_TRLM_ARCH_BITNET ? 0 : 1;
    if (act < 0) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: unsupported activation function hidden_act '%s' (the Trillim "
                    "runtime's: silu, swish, relu_squared, relu2, relu_sqr)", cpath, ha->str);
        goto done;
    }
    if (arch == QP_TRLM_ARCH_BITNET) {
        a->family = QP_FAMILY_BITNET;
        a->act = act == 0 ? QP_ACT_RELU2 : QP_ACT_SILU;
        a->act_int8 = true; /* DarkNet's BitNet products take int8 activations */
        if (!m->arch_name) m->arch_name = "bitnet-b1.58";
    } else if (qwen35) { /* the delta-net sizes, interval and partial rotary: config.json's */
        if (a->family != QP_FAMILY_QWEN35) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: arch id 3 (QWEN35) needs the folder's config.json of a "
                        "Qwen3.5 model (its delta-net sizes and full_attention_interval)", tpath);
            goto done;
        }
        a->act = act == 0 ? QP_ACT_RELU2 : QP_ACT_SILU;
        m->arch_name = "qwen35";
    } else if (qp_trlm_arch_is_qwen3(arch)) { /* QWEN3 and the Bonsai checkpoints of it */
        a->family = QP_FAMILY_QWEN3;
        a->qk_norm = true;
        a->act = act == 0 ? QP_ACT_RELU2 : QP_ACT_SILU;
        if (!m->arch_name) m->arch_name = "qwen3";
    } else {
        if (a->family != QP_FAMILY_LLAMA && a->family != QP_FAMILY_MISTRAL && a->family != QP_FAMILY_QWEN2)
            a->family = QP_FAMILY_LLAMA;
        a->qk_norm = false;
        a->act = act == 0 ? QP_ACT_RELU2 : QP_ACT_SILU;
        if (!m->arch_name) m->arch_name = "llama";
    }
    a->hidden = b.hidden_orig;
    a->intermediate = b.intermediate_orig;
    a->n_layers = b.n_layers;
    a->vocab = vocab;
    a->norm_eps = b.norm_eps;
    a->tie_embeddings = !has_out;
    a->qkv_bias = has_qb;
    a->sub_norms = has_sub;
    a->rope_style = QP_ROPE_NEOX;
    if (ri.present && qwen35) { /* rope.cache holds the rotated part (readers/trlm.md "rope.cache") */
        a->rope_dims = ri.head_dim;
        a->max_pos = ri.max_pos;
        a->rope_theta = (float)ri.theta;
        a->rope_yarn = ri.yarn;
    } else if (ri.present) {
        a->head_dim = ri.head_dim;
        a->max_pos = ri.max_pos;
        a->rope_theta = (float)ri.theta;
        a->rope_yarn = ri.yarn;
    }
    if (a->head_dim <= 0 && a->n_heads > 0) a->head_dim = qrows / a->n_heads;
    if (a->head_dim <= 0 || qrows % a->head_dim != 0 || krows % a->head_dim != 0) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the head size is unknown or does not divide the q/k rows "
                    "(rope.cache or config.json gives it)", tpath);
        goto done;
    }
    a->n_heads = qrows / a->head_dim / (qwen35 ? 2 : 1); /* Qwen3.5's q rows: query and output gate */
    a->n_kv_heads = krows / a->head_dim;
    if (a->max_pos <= 0) a->max_pos = 2048;
    for (uint32_t i = 0; i < b.n_tensors; i++)
        if ((s = expose(m, &rec[i], p + rec[i].offset, tpath, i, e)) != QP_OK) goto done;
    if ((s = qp_model_meta_u32(m, "trlm.hidden_dim", b.hidden, e)) != QP_OK ||
        (s = qp_model_meta_u32(m, "trlm.intermediate_dim", b.intermediate, e)) != QP_OK ||
        (s = qp_model_meta_u32(m, "trlm.arch_type", arch, e)) != QP_OK)
        goto done;
    m->format_version = QP_TRLM_VERSION;
done:
    qp_free(rec);
    qp_free(dir);
    qp_free(tpath);
    qp_free(rpath);
    qp_free(cpath);
    qp_free(tokp);
    qp_free(tokc);
    return s;
}

/* ---- qmodel.lora ------------------------------------------------------------------------------ */

qp_status qp_trlm_apply_lora(qp_model *m, const char *lora_path, qp_err *e) {
    static const char *const tnames[QP_TRLA_TARGETS] = {"attn_k", "attn_v", "attn_q", "attn_output",
                                                        "ffn_gate", "ffn_up", "ffn_down"};
    int fi;
    qp_status s = qp_model_add_file(m, lora_path, &fi, e);
    if (s != QP_OK) return s;
    const qp_mapped_file *f = qp_model_file(m, fi);
    const uint8_t *p = f->data;
    size_t n = f->size;
    size_t hb = QP_TRLA_HEADER_BYTES + QP_TRLA_BODY_HEADER_BYTES;
    if (n < hb) return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, shorter than the TRLA headers", lora_path, n);
    if (memcmp(p, "TRLA", 4) != 0) return qp_fail(e, QP_ERR_FORMAT, "%s: offset 0: magic is not TRLA", lora_path);
    if (qp_load_u32le(p + 4) != QP_TRLM_VERSION || qp_load_u32le(p + 8) != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: offset 4: version %u / reserved %u (1 / 0)", lora_path,
                       qp_load_u32le(p + 4), qp_load_u32le(p + 8));
    uint32_t nl = qp_load_u32le(p + 12), nt = qp_load_u32le(p + 16), rank = qp_load_u32le(p + 20),
             dtype = qp_load_u32le(p + 24);
    double scale = qp_load_f64le(p + 28);
    if (nt != QP_TRLA_TARGETS || dtype != 0 || rank == 0 || rank > 65536 || nl == 0 ||
        nl > QP_TRLM_MAX_LAYERS || !isfinite(scale) || qp_load_u64le(p + 36) != 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: offset 12: body header out of range (%u layers, %u targets, "
                       "rank %u, dtype %u, scale %g)", lora_path, nl, nt, rank, dtype, scale);
    if (m->arch.n_layers > 0 && nl != (uint32_t)m->arch.n_layers)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %u layers, the model has %lld", lora_path, nl,
                       (long long)m->arch.n_layers);
    if ((uint64_t)nl * nt * QP_TRLA_SLOT_BYTES > n - hb)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: the slot table does not fit in the file", lora_path);
    uint64_t prev_end = hb + (uint64_t)nl * nt * QP_TRLA_SLOT_BYTES;
    float fs = (float)scale;
    for (uint32_t i = 0; i < nl * nt; i++) {
        size_t at = hb + (size_t)i * QP_TRLA_SLOT_BYTES;
        const uint8_t *sp = p + at;
        uint32_t present = qp_load_u32le(sp);
        if (present > 1 || qp_load_u32le(sp + 20) != 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: slot %u at offset %zu: present flag %u / reserved", lora_path,
                           i, at, present);
        if (!present) continue;
        uint32_t in = qp_load_u32le(sp + 4), out = qp_load_u32le(sp + 8), inp = qp_load_u32le(sp + 12),
                 outp = qp_load_u32le(sp + 16);
        uint64_t off = qp_load_u64le(sp + 24);
        uint64_t size = 4ull * rank * ((uint64_t)inp + outp);
        if (in == 0 || out == 0 || inp < in || outp < out || inp > QP_TRLM_MAX_DIM || outp > QP_TRLM_MAX_DIM ||
            off % QP_TRLM_ALIGN || off < prev_end || off > n || size > n - off)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: slot %u at offset %zu: shape %u x %u (padded %u x %u) or "
                           "data [%llu, +%llu) invalid", lora_path, i, at, in, out, inp, outp,
                           (unsigned long long)off, (unsigned long long)size);
        prev_end = off + size;
        char name[64];
        snprintf(name, sizeof name, "blk.%u.%s.weight", i / nt, tnames[i % nt]);
        qp_tensor *t = (qp_tensor *)qp_model_find(m, name);
        if (!t) return qp_fail(e, QP_ERR_CORRUPT, "%s: slot %u: the model has no tensor '%s'", lora_path, i, name);
        if (t->n_dims != 2 || t->ne[0] != in || t->ne[1] != out)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: slot %u: A/B are for a %u x %u matrix, '%s' is %lld x %lld",
                           lora_path, i, out, in, name, (long long)t->ne[1], (long long)t->ne[0]);
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        size_t rb;
        if (!tr || !tr->dequantize || !qp_encoding_row_bytes(t->enc, in, &rb) || t->nbytes < rb * out)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: slot %u: tensor '%s' cannot be dequantized", lora_path, i, name);
        float ts = 1.0f;
        if ((tr->flags & QP_ENC_FLAG_EXT_SCALE) &&
            !qp_encoding_tensor_scale(t->enc, t->data, t->nbytes, (int64_t)in * out, &ts))
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: slot %u: tensor '%s': no readable scale", lora_path, i, name);
        float *w = qp_arena_alloc(qp_model_arena(m), (size_t)in * out * 4);
        if (!w) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory merging '%s'", lora_path, name);
        const uint8_t *A = p + off, *B = A + 4ull * rank * inp;
        for (uint32_t y = 0; y < out; y++) {
            float *row = w + (size_t)y * in;
            tr->dequantize(t->data + (size_t)y * rb, row, in);
            if (ts != 1.0f)
                for (uint32_t x = 0; x < in; x++) row[x] *= ts;
            for (uint32_t x = 0; x < in; x++) {
                float d = 0.0f;
                for (uint32_t r = 0; r < rank; r++)
                    d += qp_load_f32le(B + 4 * ((size_t)y * rank + r)) * qp_load_f32le(A + 4 * ((size_t)r * inp + x));
                row[x] = row[x] + fs * d;
            }
        }
        t->enc = QP_ENC_F32;
        t->data = (const uint8_t *)w;
        t->nbytes = (size_t)in * out * 4;
    }
    return QP_OK;
}
