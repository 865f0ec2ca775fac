/* Trillim SDK quantize manifest (v1 and the current SDK's sections form): parse/validate,
 * serialize, build from safetensors. Layout and rules: readers/trlm.md ("The quantize
 * manifest"), converters/trillim_sdk.md (sections, actions 4-7). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "converters/trillim_manifest.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/utf8.h"
#include "readers/trlm_bundle.h"
#include "readers/safetensors_format.h"
#include "quantpack/core.h"

size_t qp_trillim_dtype_size(uint8_t dtype) {
    static const size_t k[QP_TRILLIM_DTYPE_COUNT] = {4, 2, 2, 1, 1};
    return dtype < QP_TRILLIM_DTYPE_COUNT ? k[dtype] : 0;
}

const char *qp_trillim_action_name(uint8_t action) {
    static const char *const k[QP_TRILLIM_ACTION_COUNT] = {
        "BF16_RAW", "TERNARY_QUANTIZE", "EMBEDDING_I8", "REPACK_TERNARY", "Q1_0_128",
        "GROUP_TERNARY_QUANTIZE", "Q8_0_QUANTIZE", "Q8_0_BLOCKED_32_QUANTIZE"};
    return action < QP_TRILLIM_ACTION_COUNT ? k[action] : "?";
}

const char *qp_trillim_dtype_name(uint8_t dtype) {
    static const char *const k[QP_TRILLIM_DTYPE_COUNT] = {"F32", "F16", "BF16", "I8", "U8"};
    return dtype < QP_TRILLIM_DTYPE_COUNT ? k[dtype] : "?";
}

void qp_trillim_manifest_free(qp_trillim_manifest *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_shards; i++) qp_free(m->shards[i]);
    qp_free(m->shards);
    qp_free(m->entries);
    qp_free(m->sections);
    qp_free(m->lora);
    for (uint32_t i = 0; m->names && i < m->n_entries; i++) qp_free(m->names[i]);
    qp_free(m->names);
    qp_free(m);
}

/* ---- parse ------------------------------------------------------------------------------------ */

static bool is_float_dtype(uint8_t d) {
    return d == QP_TRILLIM_F32 || d == QP_TRILLIM_F16 || d == QP_TRILLIM_BF16;
}

static qp_status parse_mat(qp_cursor *c, const qp_trillim_manifest *m, const char *file,
                           const char *what, uint32_t layer, uint32_t target,
                           qp_trillim_lora_mat *x, qp_err *e) {
    size_t at = c->pos;
    if (!qp_cursor_u8(c, &x->dtype) || !qp_cursor_u32(c, &x->rows) || !qp_cursor_u32(c, &x->cols) ||
        !qp_cursor_u16(c, &x->shard) || !qp_cursor_u64(c, &x->offset) || !qp_cursor_u64(c, &x->size))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u %s at offset %zu: truncated "
                       "(27 bytes needed)", file, layer, target, what, at);
    if (!is_float_dtype(x->dtype))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: LoRA layer %u target %u %s at offset %zu: dtype "
                       "%u (%s) is not F32/F16/BF16", file, layer, target, what, at, x->dtype,
                       qp_trillim_dtype_name(x->dtype));
    if (x->shard >= m->n_shards)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u %s at offset %zu: shard "
                       "index %u out of range (%u shards)", file, layer, target, what, at,
                       x->shard, m->n_shards);
    uint64_t need = (uint64_t)x->rows * x->cols * qp_trillim_dtype_size(x->dtype);
    if (x->rows == 0 || x->cols == 0 || x->size != need)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u %s at offset %zu: size %llu "
                       "does not match %u x %u x %zu bytes", file, layer, target, what, at,
                       (unsigned long long)x->size, x->rows, x->cols,
                       qp_trillim_dtype_size(x->dtype));
    return QP_OK;
}

static qp_status parse_entry(qp_cursor *c, const qp_trillim_manifest *m, const char *file,
                             uint32_t i, qp_trillim_entry *t, qp_err *e) {
    size_t at = c->pos;
    if (!qp_cursor_u8(c, &t->action) || !qp_cursor_u8(c, &t->dtype) || !qp_cursor_u32(c, &t->rows) ||
        !qp_cursor_u32(c, &t->cols) || !qp_cursor_u32(c, &t->padded_rows) ||
        !qp_cursor_u32(c, &t->padded_cols) || !qp_cursor_u16(c, &t->shard) ||
        !qp_cursor_u64(c, &t->data_offset) || !qp_cursor_u64(c, &t->data_size) ||
        !qp_cursor_u8(c, &t->has_scale) || !qp_cursor_u16(c, &t->scale_shard) ||
        !qp_cursor_u64(c, &t->scale_offset) || !qp_cursor_u64(c, &t->scale_size))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: truncated (55 bytes "
                       "needed, %zu left)", file, i, at, c->size - at);
    if (t->action >= QP_TRILLIM_ACTION_COUNT)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u at offset %zu: unknown action %u",
                       file, i, at, t->action);
    if (t->dtype >= QP_TRILLIM_DTYPE_COUNT)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u at offset %zu: unknown dtype %u",
                       file, i, at + 1, t->dtype);
    if (t->shard >= m->n_shards)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: shard index %u out of "
                       "range (%u shards)", file, i, at + 18, t->shard, m->n_shards);
    if (t->rows == 0 || t->cols == 0 || t->rows > (1u << 24) || t->cols > (1u << 24))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: bad shape %u x %u",
                       file, i, at + 2, t->rows, t->cols);
    if (t->padded_rows < t->rows || t->padded_cols < t->cols || t->padded_rows > (1u << 24) ||
        t->padded_cols > (1u << 24))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: padded shape %u x %u "
                       "smaller than %u x %u", file, i, at + 10, t->padded_rows, t->padded_cols,
                       t->rows, t->cols);
    uint64_t need = (uint64_t)t->rows * t->cols * qp_trillim_dtype_size(t->dtype);
    if (t->data_size != need)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: data_size %llu does "
                       "not match rows x cols x dtype (%u x %u x %zu = %llu)", file, i, at + 28,
                       (unsigned long long)t->data_size, t->rows, t->cols,
                       qp_trillim_dtype_size(t->dtype), (unsigned long long)need);
    if (t->has_scale > 1)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: has_scale %u (0 or 1)",
                       file, i, at + 36, t->has_scale);
    bool int_src = t->dtype == QP_TRILLIM_I8 || t->dtype == QP_TRILLIM_U8;
    if (t->action == QP_TRILLIM_REPACK_TERNARY) {
        if (!int_src)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u at offset %zu: REPACK_TERNARY "
                           "needs an I8 or U8 source, not %s", file, i, at,
                           qp_trillim_dtype_name(t->dtype));
        if (!t->has_scale)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: REPACK_TERNARY "
                           "without a scale tensor", file, i, at);
    } else if (int_src) {
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u at offset %zu: action %s needs "
                       "a float source, not %s", file, i, at, qp_trillim_action_name(t->action),
                       qp_trillim_dtype_name(t->dtype));
    }
    if (t->has_scale) {
        if (t->scale_shard >= m->n_shards)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor entry %u at offset %zu: scale shard index "
                           "%u out of range (%u shards)", file, i, at + 37, t->scale_shard,
                           m->n_shards);
        if (t->scale_size != 2 && t->scale_size != 4)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor entry %u at offset %zu: scale_size "
                           "%llu (a BF16 or F32 scalar, 2 or 4 bytes)", file, i, at + 47,
                           (unsigned long long)t->scale_size);
    }
    return QP_OK;
}

/* After the entries: a v1 LoRA block starts (layers >= 1, targets 7); the current SDK's sections
 * block starts n_sections and then a section type (only TEXT_CORE = 1 is defined) or, with no
 * sections, a LoRA block's layer count. A 7 in the second word is therefore v1
 * (converters/trillim_sdk.md "Telling the forms apart"). */
static bool is_v1_lora_block(const qp_cursor *c) {
    if (qp_cursor_left(c) < 8) return false;
    const uint8_t *p = c->base + c->pos;
    return qp_load_u32le(p) >= 1 && qp_load_u32le(p + 4) == QP_TRILLIM_LORA_TARGETS;
}

static qp_status parse_sections(qp_cursor *c, qp_trillim_manifest *m, const char *file, qp_err *e) {
    size_t at = c->pos;
    uint32_t n;
    if (!qp_cursor_u32(c, &n))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: sections block at offset %zu: truncated count", file, at);
    if ((uint64_t)n * QP_TRILLIM_SECTION_BYTES > qp_cursor_left(c))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: sections block at offset %zu: %u sections need %llu "
                       "bytes, %zu left", file, at, n,
                       (unsigned long long)n * QP_TRILLIM_SECTION_BYTES, qp_cursor_left(c));
    m->has_sections = true;
    m->sections = qp_calloc(n ? n : 1, sizeof *m->sections);
    if (!m->sections) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    uint64_t next = 0; /* sections are in order and do not overlap */
    for (uint32_t i = 0; i < n; i++) {
        qp_trillim_section *sc = &m->sections[i];
        at = c->pos;
        if (!qp_cursor_u8(c, &sc->type) || !qp_cursor_u32(c, &sc->first) || !qp_cursor_u32(c, &sc->count))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: section %u at offset %zu: truncated", file, i, at);
        m->n_sections = i + 1;
        if (sc->type != QP_TRILLIM_SECTION_TEXT_CORE)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: section %u at offset %zu: unknown type %u (the "
                           "SDK defines 1, TEXT_CORE)", file, i, at, sc->type);
        if (sc->count == 0 || sc->first < next || (uint64_t)sc->first + sc->count > m->n_entries)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: section %u at offset %zu: entries [%u, +%u) are "
                           "empty, overlap the previous section or lie outside the %u entries", file,
                           i, at + 1, sc->first, sc->count, m->n_entries);
        next = (uint64_t)sc->first + sc->count;
    }
    return QP_OK;
}

/* The LoRA block: u32 layers, u32 targets (7), f64 scale, then the slots; it ends the file. */
static qp_status parse_lora(qp_cursor *c, qp_trillim_manifest *m, const char *file, qp_err *e) {
    size_t at = c->pos;
    uint32_t nl, ntg;
    double sc;
    if (!qp_cursor_u32(c, &nl) || !qp_cursor_u32(c, &ntg) || !qp_cursor_f64(c, &sc))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA block at offset %zu: truncated (16-byte header)",
                       file, at);
    if (ntg != QP_TRILLIM_LORA_TARGETS)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: LoRA block at offset %zu: %u targets per layer "
                       "(the SDK writes 7: k, v, q, o, gate, up, down)", file, at + 4, ntg);
    if (nl == 0 || nl > QP_TRILLIM_MAX_LORA_LAYERS || (uint64_t)nl * ntg > qp_cursor_left(c))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA block at offset %zu: bad layer count %u", file,
                    at, nl);
    if (!isfinite(sc))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA block at offset %zu: scale is not finite", file,
                    at + 8);
    m->has_lora = true;
    m->lora_layers = nl;
    m->lora_targets = ntg;
    m->lora_scale = sc;
    m->lora = qp_calloc((size_t)nl * ntg, sizeof *m->lora);
    if (!m->lora)
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    for (uint32_t l = 0; l < nl; l++) {
        for (uint32_t t = 0; t < ntg; t++) {
            qp_trillim_lora_slot *sl = &m->lora[(size_t)l * ntg + t];
            uint8_t pr;
            at = c->pos;
            if (!qp_cursor_u8(c, &pr))
                return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u at offset %zu: "
                               "truncated", file, l, t, at);
            if (pr > 1)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u at offset %zu: "
                               "present flag %u (0 or 1)", file, l, t, at, pr);
            sl->present = pr == 1;
            if (!sl->present) continue;
            qp_status s;
            if ((s = parse_mat(c, m, file, "A", l, t, &sl->a, e)) != QP_OK ||
                (s = parse_mat(c, m, file, "B", l, t, &sl->b, e)) != QP_OK)
                return s;
            if (sl->a.rows != sl->b.cols)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: LoRA layer %u target %u: A has rank %u rows "
                               "but B has %u columns", file, l, t, sl->a.rows, sl->b.cols);
        }
    }
    if (qp_cursor_left(c) > 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu unexpected bytes after the LoRA block at offset "
                       "%zu", file, qp_cursor_left(c), c->pos);
    return QP_OK;
}

qp_status qp_trillim_manifest_parse(const uint8_t *buf, size_t len, const char *file,
                                    qp_trillim_manifest **out, qp_err *e) {
    if (!file) file = "manifest";
    qp_trillim_manifest *m = qp_calloc(1, sizeof *m);
    if (!m) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
    qp_cursor c;
    qp_cursor_init(&c, buf, len, 0);
    qp_status s = QP_OK;
    uint16_t ns;
    if (!qp_cursor_u16(&c, &ns)) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: truncated at offset 0: no shard count", file);
        goto fail;
    }
    if (ns > QP_TRILLIM_MAX_SHARDS) {
        s = qp_fail(e, QP_ERR_LIMIT, "%s: %u shards (at most %d)", file, ns, QP_TRILLIM_MAX_SHARDS);
        goto fail;
    }
    m->shards = qp_calloc(ns ? ns : 1, sizeof *m->shards);
    if (!m->shards) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
        goto fail;
    }
    for (uint16_t i = 0; i < ns; i++) {
        size_t at = c.pos;
        uint16_t pl;
        const uint8_t *p;
        if (!qp_cursor_u16(&c, &pl) || !qp_cursor_take(&c, pl, &p)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard path %u at offset %zu: truncated", file, i, at);
            goto fail;
        }
        if (pl == 0 || memchr(p, 0, pl) || !qp_utf8_valid(p, pl)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: shard path %u at offset %zu: %s", file, i, at,
                        pl == 0 ? "empty path" : memchr(p, 0, pl) ? "contains a NUL byte"
                                                                 : "not valid UTF-8");
            goto fail;
        }
        if (!(m->shards[i] = qp_strndup((const char *)p, pl))) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
            goto fail;
        }
        m->n_shards = (uint16_t)(i + 1);
    }
    size_t at = c.pos;
    uint32_t nt;
    if (!qp_cursor_u32(&c, &nt)) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: truncated at offset %zu: no tensor count", file, at);
        goto fail;
    }
    if (nt > QP_TRILLIM_MAX_ENTRIES || (uint64_t)nt * QP_TRILLIM_ENTRY_BYTES > qp_cursor_left(&c)) {
        s = qp_fail(e, nt > QP_TRILLIM_MAX_ENTRIES ? QP_ERR_LIMIT : QP_ERR_CORRUPT,
                    "%s: tensor count %u at offset %zu: needs %llu bytes of 55-byte entries, %zu "
                    "left", file, nt, at, (unsigned long long)nt * QP_TRILLIM_ENTRY_BYTES,
                    qp_cursor_left(&c));
        goto fail;
    }
    m->entries = qp_calloc(nt ? nt : 1, sizeof *m->entries);
    if (!m->entries) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
        goto fail;
    }
    for (uint32_t i = 0; i < nt; i++) {
        if ((s = parse_entry(&c, m, file, i, &m->entries[i], e)) != QP_OK) goto fail;
        m->n_entries = i + 1;
    }
    if (qp_cursor_left(&c) > 0 && !is_v1_lora_block(&c) &&
        (s = parse_sections(&c, m, file, e)) != QP_OK)
        goto fail;
    if (qp_cursor_left(&c) > 0 && (s = parse_lora(&c, m, file, e)) != QP_OK) goto fail;
    *out = m;
    return QP_OK;
fail:
    qp_trillim_manifest_free(m);
    return s;
}

qp_status qp_trillim_manifest_read(const char *path, qp_trillim_manifest **out, qp_err *e) {
    char *buf = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(path, (size_t)1 << 30, &buf, &len, e);
    if (s != QP_OK) return s;
    s = qp_trillim_manifest_parse((const uint8_t *)buf, len, path, out, e);
    qp_free(buf);
    return s;
}

static qp_status check_range(const char *file, const char *what, uint32_t i, uint16_t shard,
                             uint64_t off, uint64_t size, const qp_trillim_manifest *m,
                             const uint64_t *sizes, qp_err *e) {
    if (off > sizes[shard] || size > sizes[shard] - off)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %s %u: bytes [%llu, %llu) lie outside shard %u '%s' "
                       "(%llu bytes)", file, what, i, (unsigned long long)off,
                       (unsigned long long)off + size, shard, m->shards[shard],
                       (unsigned long long)sizes[shard]);
    return QP_OK;
}

qp_status qp_trillim_manifest_check_shards(const qp_trillim_manifest *m, const uint64_t *sizes,
                                           const char *file, qp_err *e) {
    qp_status s;
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const qp_trillim_entry *t = &m->entries[i];
        if ((s = check_range(file, "tensor entry", i, t->shard, t->data_offset, t->data_size, m,
                             sizes, e)) != QP_OK)
            return s;
        if (t->has_scale && (s = check_range(file, "scale of tensor entry", i, t->scale_shard,
                                             t->scale_offset, t->scale_size, m, sizes, e)) != QP_OK)
            return s;
    }
    if (m->has_lora)
        for (uint32_t i = 0; i < m->lora_layers * m->lora_targets; i++) {
            const qp_trillim_lora_slot *sl = &m->lora[i];
            if (!sl->present) continue;
            if ((s = check_range(file, "LoRA A of slot", i, sl->a.shard, sl->a.offset, sl->a.size,
                                 m, sizes, e)) != QP_OK ||
                (s = check_range(file, "LoRA B of slot", i, sl->b.shard, sl->b.offset, sl->b.size,
                                 m, sizes, e)) != QP_OK)
                return s;
        }
    return QP_OK;
}

/* ---- serialize --------------------------------------------------------------------------------- */

static void put_lora_mat(qp_buf *b, const qp_trillim_lora_mat *x) {
    qp_buf_u8(b, x->dtype);
    qp_buf_u32le(b, x->rows);
    qp_buf_u32le(b, x->cols);
    qp_buf_u16le(b, x->shard);
    qp_buf_u64le(b, x->offset);
    qp_buf_u64le(b, x->size);
}

qp_status qp_trillim_manifest_serialize(const qp_trillim_manifest *m, uint8_t **out, size_t *len,
                                        qp_err *e) {
    qp_buf b = {0};
    qp_buf_u16le(&b, m->n_shards);
    for (uint32_t i = 0; i < m->n_shards; i++) {
        size_t pl = strlen(m->shards[i]);
        if (pl > 65535) {
            qp_buf_free(&b);
            return qp_fail(e, QP_ERR_LIMIT, "shard path %u is %zu bytes (at most 65535)", i, pl);
        }
        qp_buf_u16le(&b, (uint16_t)pl);
        qp_buf_put(&b, m->shards[i], pl);
    }
    qp_buf_u32le(&b, m->n_entries);
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const qp_trillim_entry *t = &m->entries[i];
        qp_buf_u8(&b, t->action);
        qp_buf_u8(&b, t->dtype);
        qp_buf_u32le(&b, t->rows);
        qp_buf_u32le(&b, t->cols);
        qp_buf_u32le(&b, t->padded_rows);
        qp_buf_u32le(&b, t->padded_cols);
        qp_buf_u16le(&b, t->shard);
        qp_buf_u64le(&b, t->data_offset);
        qp_buf_u64le(&b, t->data_size);
        qp_buf_u8(&b, t->has_scale);
        qp_buf_u16le(&b, t->scale_shard);
        qp_buf_u64le(&b, t->scale_offset);
        qp_buf_u64le(&b, t->scale_size);
    }
    if (m->has_sections) {
        qp_buf_u32le(&b, m->n_sections);
        for (uint32_t i = 0; i < m->n_sections; i++) {
            qp_buf_u8(&b, m->sections[i].type);
            qp_buf_u32le(&b, m->sections[i].first);
            qp_buf_u32le(&b, m->sections[i].count);
        }
    }
    if (m->has_lora) {
        qp_buf_u32le(&b, m->lora_layers);
        qp_buf_u32le(&b, m->lora_targets);
        uint64_t u;
        memcpy(&u, &m->lora_scale, 8);
        qp_buf_u64le(&b, u);
        for (uint32_t i = 0; i < m->lora_layers * m->lora_targets; i++) {
            const qp_trillim_lora_slot *sl = &m->lora[i];
            qp_buf_u8(&b, sl->present ? 1 : 0);
            if (sl->present) {
                put_lora_mat(&b, &sl->a);
                put_lora_mat(&b, &sl->b);
            }
        }
    }
    if (b.oom) {
        qp_buf_free(&b);
        return qp_fail(e, QP_ERR_NOMEM, "out of memory serializing the manifest");
    }
    *out = qp_buf_take(&b, len);
    return QP_OK;
}

/* ---- build from a safetensors directory ------------------------------------------------------- */

typedef struct st_shard {
    char *path;
    cJSON *header;
    uint64_t data_start;
} st_shard;

typedef struct st_list {
    st_shard *v;
    int n, cap;
} st_list;

static void st_list_free(st_list *l) {
    for (int i = 0; i < l->n; i++) {
        qp_free(l->v[i].path);
        cJSON_Delete(l->v[i].header);
    }
    qp_free(l->v);
    memset(l, 0, sizeof *l);
}

/* The header of one safetensors file, through the reader's parser (readers/safetensors_format.h). */
static qp_status read_st_header(const char *path, cJSON **out, uint64_t *data_start, qp_err *e) {
    qp_mapped_file f = {0};
    qp_status s = qp_file_map(path, &f, e);
    size_t ds = 0;
    if (s == QP_OK) s = qp_st_header_parse(f.data, f.size, path, out, &ds, e);
    qp_file_unmap(&f);
    if (s == QP_OK) *data_start = ds;
    return s;
}

static int st_list_find(const st_list *l, const char *path) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->v[i].path, path) == 0) return i;
    return -1;
}

static qp_status st_list_add(st_list *l, const char *path, int *idx, qp_err *e) {
    int f = st_list_find(l, path);
    if (f >= 0) {
        *idx = f;
        return QP_OK;
    }
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 8;
        st_shard *nv = qp_realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
        l->v = nv;
        l->cap = nc;
    }
    st_shard *s = &l->v[l->n];
    memset(s, 0, sizeof *s);
    if (!(s->path = qp_strdup(path))) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    qp_status st = read_st_header(path, &s->header, &s->data_start, e);
    if (st != QP_OK) {
        qp_free(s->path);
        return st;
    }
    *idx = l->n++;
    return QP_OK;
}

static qp_status dtype_code(const char *file, const char *key, const char *dt, uint8_t *code,
                            qp_err *e) {
    static const char *const k[QP_TRILLIM_DTYPE_COUNT] = {"F32", "F16", "BF16", "I8", "U8"};
    for (uint8_t i = 0; i < QP_TRILLIM_DTYPE_COUNT; i++)
        if (dt && strcmp(dt, k[i]) == 0) {
            *code = i;
            return QP_OK;
        }
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': unknown safetensors dtype %s", file,
                   key, dt ? dt : "(none)");
}

/* One tensor of a header: dtype, shape (outermost first, up to QP_ST_MAX_DIMS), begin/end. */
static qp_status tensor_info(const st_shard *sh, const char *key, uint8_t *dt, int64_t *shape,
                             int *nd, uint64_t *begin, uint64_t *end, qp_err *e) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(sh->header, key);
    if (!t) return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': not in the header", sh->path, key);
    qp_st_entry en;
    qp_status st = qp_st_entry_parse(t, sh->path, (size_t)sh->data_start, &en, e);
    if (st == QP_OK) st = dtype_code(sh->path, key, en.dtype, dt, e);
    if (st != QP_OK) return st;
    for (int i = 0; i < en.n_dims; i++)
        if (en.shape[i] > (int64_t)UINT32_MAX)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s': bad shape", sh->path, key);
    memcpy(shape, en.shape, (size_t)en.n_dims * sizeof *shape);
    *nd = en.n_dims;
    *begin = en.begin;
    *end = en.end;
    return QP_OK;
}

/* Architecture registry of the current SDK (quantize/_config.py _ARCH_REGISTRY; plus Mistral /
 * Qwen2 as LLAMA, a documented extension). Qwen3_5ForConditionalGeneration is QWEN35 (its text
 * model; converters/trillim_sdk.md "Arch ids"); so is Qwen3_5ForCausalLM (our extension: the text
 * model alone, as a GGUF qwen35 is staged, hf_folder.md "Qwen3.5"). */
static int arch_of(const char *name, bool *causal_lm_names) {
    static const struct { const char *n; int a; bool causal_lm_names; } k[] = {
        {"bitnetforcausallm", 1, false}, {"bitnetbpeforcausallm", 1, false}, {"llamaforcausallm", 2, false},
        {"mistralforcausallm", 2, false}, {"qwen2forcausallm", 2, false},
        {"qwen3_5forconditionalgeneration", 3, false}, {"qwen3_5forcausallm", 3, true}, {"qwen3forcausallm", 6, false}};
    char low[128];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    low[i] = '\0';
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++)
        if (strcmp(low, k[j].n) == 0) {
            *causal_lm_names = k[j].causal_lm_names;
            return k[j].a;
        }
    return 0;
}

/* All tensor names of a model dir (index weight_map keys, or the single file's header). */
typedef struct name_list {
    char **v;
    int n;
} name_list;

static void names_free(name_list *l) {
    for (int i = 0; i < l->n; i++) qp_free(l->v[i]);
    qp_free(l->v);
    l->v = NULL;
    l->n = 0;
}

static qp_status names_from_object(cJSON *obj, name_list *l, qp_err *e) {
    int n = cJSON_GetArraySize(obj);
    l->v = qp_calloc((size_t)(n ? n : 1), sizeof *l->v);
    if (!l->v) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    cJSON *it;
    cJSON_ArrayForEach(it, obj) {
        if (!it->string || strcmp(it->string, "__metadata__") == 0) continue;
        if (!(l->v[l->n] = qp_strdup(it->string))) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
        l->n++;
    }
    return QP_OK;
}

static qp_status read_json(const char *path, cJSON **out, qp_err *e) {
    char *txt = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(path, (size_t)512 << 20, &txt, &len, e);
    if (s != QP_OK) return s;
    cJSON *j = cJSON_ParseWithLength(txt, len);
    qp_free(txt);
    if (!j) return qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON", path);
    *out = j;
    return QP_OK;
}

static qp_status model_names(const char *dir, name_list *l, qp_err *e) {
    char *single = qp_path_join(dir, "model.safetensors");
    char *index = qp_path_join(dir, "model.safetensors.index.json");
    qp_status s = QP_OK;
    if (!single || !index) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    else if (qp_path_exists(index)) {
        /* the SDK's _get_all_tensor_names prefers the index */
        cJSON *j = NULL;
        s = read_json(index, &j, e);
        cJSON *wm = j ? cJSON_GetObjectItemCaseSensitive(j, "weight_map") : NULL;
        if (s == QP_OK && !cJSON_IsObject(wm)) s = qp_fail(e, QP_ERR_CORRUPT, "%s: no weight_map", index);
        else if (s == QP_OK) s = names_from_object(wm, l, e);
        cJSON_Delete(j);
    } else if (qp_path_exists(single)) {
        cJSON *h = NULL;
        uint64_t ds;
        s = read_st_header(single, &h, &ds, e);
        if (s == QP_OK) s = names_from_object(h, l, e);
        cJSON_Delete(h);
    } else {
        s = qp_fail(e, QP_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    qp_free(single);
    qp_free(index);
    return s;
}

static bool any_contains(const name_list *l, const char *sub) {
    for (int i = 0; i < l->n; i++)
        if (strstr(l->v[i], sub)) return true;
    return false;
}

/* An integer of config.json: absent or null -> dflt; anything but an integer in the int32 range
 * is refused (range checks of the values follow). */
static qp_status cfg_int(const cJSON *cfg, const char *file, const char *key, int64_t dflt,
                         int64_t *out, qp_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return QP_OK;
    }
    if (qp_json_int(v, INT32_MIN, INT32_MAX, out)) return QP_OK;
    if (cJSON_IsNumber(v))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is %.17g, not an integer in %d..%d", file, key,
                       v->valuedouble, INT32_MIN, INT32_MAX);
    return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' is %s, not an integer", file, key, qp_json_kind(v));
}

/* _legacy_readme_bonsai_arch_type: a README.md mentioning "bonsai" (any case) is BONSAI_TERNARY
 * when it says "ternary" and none of "1-bit", "1 bit", "1bit", else BONSAI; otherwise, or
 * unreadable, the arch stays. (The SDK warns that this guess is deprecated.) */
static void readme_bonsai_arch(const char *model_dir, int *arch) {
    char *p = qp_path_join(model_dir, "README.md"), *text = NULL;
    size_t len = 0;
    if (p && qp_path_exists(p) && qp_file_read_all(p, (size_t)16 << 20, &text, &len, NULL) == QP_OK) {
        for (size_t i = 0; i < len; i++)
            if (text[i] >= 'A' && text[i] <= 'Z') text[i] = (char)(text[i] + 32);
            else if (text[i] == '\0') text[i] = ' ';
        if (strstr(text, "bonsai")) {
            bool one_bit = strstr(text, "1-bit") || strstr(text, "1 bit") || strstr(text, "1bit");
            *arch = strstr(text, "ternary") && !one_bit ? 5 : 4;
        }
    }
    qp_free(text);
    qp_free(p);
}

/* _resolve_bonsai_arch_info: a Qwen3 folder's trillim_source.json {"architecture": "qwen3" |
 * "bonsai" | "bonsai_ternary"} (any case, trimmed) makes it QWEN3 (6), BONSAI (4) or
 * BONSAI_TERNARY (5); another value or a missing one is refused as the SDK refuses it. Without
 * the file, the SDK's deprecated README.md guess. */
static qp_status bonsai_arch(const char *model_dir, int *arch, qp_err *e) {
    char *p = qp_path_join(model_dir, "trillim_source.json");
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    cJSON *j = NULL;
    qp_status s = qp_path_exists(p) ? read_json(p, &j, e) : QP_OK;
    if (s == QP_OK && !j) readme_bonsai_arch(model_dir, arch);
    const cJSON *a = j ? cJSON_GetObjectItemCaseSensitive(j, "architecture") : NULL;
    char v[32] = "";
    if (j && cJSON_IsString(a)) {
        const char *b = a->valuestring, *end = b + strlen(b);
        while (*b == ' ' || *b == '\t' || *b == '\n' || *b == '\r') b++;
        while (end > b && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r')) end--;
        for (size_t i = 0; b + i < end && i + 1 < sizeof v; i++)
            v[i] = (char)(b[i] >= 'A' && b[i] <= 'Z' ? b[i] + 32 : b[i]);
    }
    if (s == QP_OK && j) {
        if (!cJSON_IsObject(j) || !v[0])
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: a JSON object with a non-empty \"architecture\" needed", p);
        else if (strcmp(v, "bonsai") == 0) *arch = 4;
        else if (strcmp(v, "bonsai_ternary") == 0) *arch = 5;
        else if (strcmp(v, "qwen3") != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture marker '%s' (qwen3, bonsai, "
                        "bonsai_ternary)", p, v);
    }
    cJSON_Delete(j);
    qp_free(p);
    return s;
}

/* canonicalize_model_config (_bundle_metadata.py): a non-empty text_config object merged over the
 * other top-level keys (Qwen3_5ForConditionalGeneration), architectures kept from the top level. */
static qp_status canonical_config(cJSON *cfg, const char *file, qp_err *e) {
    cJSON *tc = cJSON_DetachItemFromObjectCaseSensitive(cfg, "text_config");
    cJSON *archs = cJSON_IsObject(tc) && tc->child ? cJSON_DetachItemFromObjectCaseSensitive(cfg, "architectures") : NULL;
    bool ok = !cJSON_IsObject(tc) || !tc->child || qp_json_overlay(cfg, tc, true, NULL); /* _merge_nested_dicts */
    if (archs) { /* the top level's architectures win over text_config's */
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "architectures");
        cJSON_AddItemToObject(cfg, "architectures", archs);
    }
    cJSON_Delete(tc);
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", file);
}

/* _resolve_rope_theta and _resolve_partial_rotary_factor: the top-level key first for the
 * theta, rope_parameters' first for the factor. */
static void rope_fields(const cJSON *cfg, qp_trillim_config *c) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(cfg, "rope_parameters");
    if (!cJSON_IsObject(rp)) rp = NULL;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(cfg, "rope_theta");
    if ((!th || cJSON_IsNull(th)) && rp) th = cJSON_GetObjectItemCaseSensitive(rp, "rope_theta");
    c->rope_theta = cJSON_IsNumber(th) ? th->valuedouble : 10000.0;
    const cJSON *pf = rp ? cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor") : NULL;
    if (!pf || cJSON_IsNull(pf)) pf = cJSON_GetObjectItemCaseSensitive(cfg, "partial_rotary_factor");
    double f = cJSON_IsNumber(pf) ? pf->valuedouble : 1.0;
    c->rope_dim = (int64_t)nearbyint((double)c->head_dim * f); /* Python round(): half to even */
}

qp_status qp_trillim_config_from_hf(const char *model_dir, qp_trillim_config *c, qp_err *e) {
    memset(c, 0, sizeof *c);
    char *cfg_path = qp_path_join(model_dir, "config.json");
    if (!cfg_path) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    cJSON *cfg = NULL;
    name_list names = {0};
    qp_status s = read_json(cfg_path, &cfg, e);
    if (s == QP_OK) s = canonical_config(cfg, cfg_path, e);
    if (s != QP_OK) goto done;
    cJSON *archs = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const char *aname = cJSON_IsString(a0) ? a0->valuestring : "Unknown";
    c->arch_type = arch_of(aname, &c->causal_lm_names);
    if (!c->arch_type) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: unsupported architecture '%s' (BitNetForCausalLM, "
                    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)",
                    cfg_path, aname);
        goto done;
    }
    if (c->arch_type == 6 && (s = bonsai_arch(model_dir, &c->arch_type, e)) != QP_OK) goto done;
    if ((s = model_names(model_dir, &names, e)) != QP_OK) goto done;
    bool bitnet = c->arch_type == 1;
    c->activation = bitnet ? 0 : 1;
    c->attn_sub_norm = bitnet && (any_contains(&names, "attn_sub_norm") || any_contains(&names, "inner_attn_ln"));
    c->ffn_sub_norm = bitnet && (any_contains(&names, "ffn_sub_norm") || any_contains(&names, "ffn_layernorm"));
    if ((s = cfg_int(cfg, cfg_path, "hidden_size", 2560, &c->hidden_orig, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "intermediate_size", 6912, &c->intermediate_orig, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "num_hidden_layers", 30, &c->n_layers, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "num_attention_heads", 20, &c->n_heads, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "num_key_value_heads", c->n_heads, &c->n_kv_heads, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "vocab_size", 128256, &c->vocab, e)) != QP_OK)
        goto done;
    if (c->n_heads <= 0 || c->hidden_orig <= 0 || c->intermediate_orig <= 0 || c->n_layers <= 0 ||
        c->n_kv_heads <= 0 || c->vocab <= 0 || c->hidden_orig > (1 << 24) ||
        c->intermediate_orig > (1 << 24)) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: dimensions out of range", cfg_path);
        goto done;
    }
    int64_t head_dim = c->hidden_orig / c->n_heads;
    if ((s = cfg_int(cfg, cfg_path, "head_dim", head_dim, &c->head_dim, e)) != QP_OK ||
        (s = cfg_int(cfg, cfg_path, "max_position_embeddings", 4096, &c->max_pos, e)) != QP_OK)
        goto done;
    c->hidden = (c->hidden_orig + 127) / 128 * 128;
    c->intermediate = (c->intermediate_orig + 127) / 128 * 128;
    cJSON *eps = cJSON_GetObjectItemCaseSensitive(cfg, "rms_norm_eps");
    if (!cJSON_IsNumber(eps)) eps = cJSON_GetObjectItemCaseSensitive(cfg, "layer_norm_epsilon");
    c->norm_eps = cJSON_IsNumber(eps) ? eps->valuedouble : 1e-6;
    rope_fields(cfg, c);
    qp_py_float_repr(c->norm_eps, c->norm_eps_text, sizeof c->norm_eps_text);
    qp_py_float_repr(c->rope_theta, c->rope_theta_text, sizeof c->rope_theta_text);
    cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act");
    if (act && !cJSON_IsNull(act) && (c->activation = qp_trillim_activation_of(act)) < 0) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: unsupported activation function hidden_act %s (the "
                    "SDK's: silu, swish, relu_squared, relu2, relu_sqr)",
                    cfg_path, cJSON_IsString(act) ? act->valuestring : qp_json_kind(act));
        goto done;
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(cfg, "_name_or_path");
    if (!(c->source_model = qp_strdup(cJSON_IsString(src) ? src->valuestring : ""))) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "attention_bias");
    c->qkv_bias = cJSON_IsBool(ab) ? cJSON_IsTrue(ab) : false;
    if (any_contains(&names, "q_proj.bias") || any_contains(&names, "k_proj.bias") ||
        any_contains(&names, "v_proj.bias"))
        c->qkv_bias = true;
    /* config.json alone, as the SDK's _resolve_tied_embeddings (v1 and current): a tied model's
     * lm_head.weight, when present, is left out of the manifest (transformers ties it too) */
    cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
    c->tie_embeddings = cJSON_IsBool(tie) ? cJSON_IsTrue(tie) : false;
    /* EOS list: config.json eos_token_id (int or list; default 128009), then the stop tokens of
     * tokenizer.json's added_tokens; deduplicated in order. */
    int64_t eos_all[64];
    int ne = 0;
    cJSON *eos = cJSON_GetObjectItemCaseSensitive(cfg, "eos_token_id");
    if (cJSON_IsArray(eos)) {
        cJSON *it;
        cJSON_ArrayForEach(it, eos) {
            if (ne < 64 && qp_json_int(it, INT32_MIN, INT32_MAX, &eos_all[ne])) ne++;
        }
    } else if (cJSON_IsNumber(eos)) {
        if (qp_json_int(eos, INT32_MIN, INT32_MAX, &eos_all[ne])) ne++;
    } else if (!eos) { /* the SDK runtime's _DEFAULT_EOS_TOKENS (QWEN3 151645; BONSAI has none: 2) */
        eos_all[ne++] = c->arch_type == 6 ? 151645 : c->arch_type >= 4 ? 2 : 128009;
    }
    char *tok_path = qp_path_join(model_dir, "tokenizer.json");
    if (tok_path && qp_path_exists(tok_path)) {
        /* optional: an unreadable tokenizer.json adds no stop ids */
        cJSON *tj = NULL;
        if (read_json(tok_path, &tj, NULL) != QP_OK) tj = NULL;
        cJSON *added = tj ? cJSON_GetObjectItemCaseSensitive(tj, "added_tokens") : NULL;
        static const char *const stops[] = {"<|eot_id|>", "<|im_end|>", "<|end_of_text|>",
                                            "<|endoftext|>", "</s>"};
        cJSON *it;
        if (cJSON_IsArray(added))
            cJSON_ArrayForEach(it, added) {
                cJSON *ct = cJSON_GetObjectItemCaseSensitive(it, "content");
                cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
                int64_t idv;
                if (!cJSON_IsString(ct) || !qp_json_int(id, INT32_MIN, INT32_MAX, &idv)) continue;
                for (size_t k = 0; k < sizeof stops / sizeof stops[0]; k++)
                    if (strcmp(ct->valuestring, stops[k]) == 0 && ne < 64) eos_all[ne++] = idv;
            }
        cJSON_Delete(tj);
    }
    qp_free(tok_path);
    for (int i = 0; i < ne; i++) {
        bool dup = false;
        for (int j = 0; j < c->n_eos; j++) dup |= c->eos[j] == eos_all[i];
        if (!dup && c->n_eos < QP_TRILLIM_MAX_EOS) c->eos[c->n_eos++] = eos_all[i];
    }
done:
    names_free(&names);
    cJSON_Delete(cfg);
    qp_free(cfg_path);
    if (s != QP_OK) qp_trillim_config_free(c);
    return s;
}

void qp_trillim_config_free(qp_trillim_config *c) {
    qp_free(c->source_model);
    c->source_model = NULL;
}

int qp_trillim_activation_of(const cJSON *hidden_act) {
    return cJSON_IsString(hidden_act) ? qp_trlm_activation_of(hidden_act->valuestring) : -1;
}

/* ---- manifest build --------------------------------------------------------------------------- */

typedef struct item {
    const char *key;
    int shard;
    int64_t k0, k1, k2, k3; /* the SDK's sort key */
    int64_t seq;            /* original order (stable sort) */
} item;

static int item_cmp(const void *pa, const void *pb) {
    const item *a = pa, *b = pb;
    int64_t ka[5] = {a->k0, a->k1, a->k2, a->k3, a->seq}, kb[5] = {b->k0, b->k1, b->k2, b->k3, b->seq};
    for (int i = 0; i < 5; i++)
        if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* re.search(r"\.layers\.(\d+)\.", key) */
static bool layer_of(const char *key, int64_t *layer) {
    for (const char *p = strstr(key, ".layers."); p; p = strstr(p + 1, ".layers.")) {
        const char *d = p + 8;
        int64_t v = 0;
        const char *q = d;
        while (*q >= '0' && *q <= '9' && v < 100000000) v = v * 10 + (*q++ - '0');
        if (q > d && *q == '.') {
            *layer = v;
            return true;
        }
    }
    return false;
}

/* The embedding_key / final_norm_key of the SDK's arch entries (Qwen3.5's text model sits under
 * model.language_model.). */
static const char *embedding_key(const qp_trillim_config *c) {
    return c->arch_type == 3 && !c->causal_lm_names ? "model.language_model.embed_tokens.weight"
                                                    : "model.embed_tokens.weight";
}
static const char *final_norm_key(const qp_trillim_config *c) {
    return c->arch_type == 3 && !c->causal_lm_names ? "model.language_model.norm.weight" : "model.norm.weight";
}

static void sort_key(item *it, const qp_trillim_config *c) {
    const char *key = it->key;
    static const char *const llama_order[] = {"input_layernorm", "self_attn.k_proj", "self_attn.v_proj",
                                              "self_attn.q_proj", "self_attn.o_proj",
                                              "post_attention_layernorm", "mlp.gate_proj",
                                              "mlp.up_proj", "mlp.down_proj"};
    static const char *const qwen3_order[] = {"input_layernorm", "self_attn.k_proj", "self_attn.v_proj",
                                              "self_attn.q_proj", "self_attn.q_norm", "self_attn.k_norm",
                                              "self_attn.o_proj", "post_attention_layernorm",
                                              "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    static const char *const qwen35_order[] = {
        "input_layernorm", "linear_attn.A_log", "linear_attn.conv1d.weight", "linear_attn.dt_bias",
        "linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight", "linear_attn.in_proj_qkv.weight",
        "linear_attn.in_proj_z.weight", "linear_attn.norm.weight", "linear_attn.out_proj.weight",
        "self_attn.k_norm.weight", "self_attn.q_norm.weight", "self_attn.k_proj", "self_attn.v_proj",
        "self_attn.q_proj", "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
        "mlp.down_proj"};
    const char *order[20];
    int n = 0;
    if (c->arch_type == 3) {
        for (size_t i = 0; i < sizeof qwen35_order / sizeof qwen35_order[0]; i++) order[n++] = qwen35_order[i];
    } else if (c->arch_type >= 4) {
        for (size_t i = 0; i < sizeof qwen3_order / sizeof qwen3_order[0]; i++) order[n++] = qwen3_order[i];
    } else if (c->arch_type == 1) {
        order[n++] = "input_layernorm";
        if (c->attn_sub_norm) order[n++] = "self_attn.attn_sub_norm";
        order[n++] = "self_attn.k_proj";
        order[n++] = "self_attn.v_proj";
        order[n++] = "self_attn.q_proj";
        order[n++] = "self_attn.o_proj";
        order[n++] = "post_attention_layernorm";
        order[n++] = "mlp.gate_proj";
        order[n++] = "mlp.up_proj";
        if (c->ffn_sub_norm) order[n++] = "mlp.ffn_sub_norm";
        order[n++] = "mlp.down_proj";
    } else {
        for (size_t i = 0; i < sizeof llama_order / sizeof llama_order[0]; i++) order[n++] = llama_order[i];
    }
    int64_t layer;
    it->k1 = it->k2 = -1;
    it->k3 = 0;
    if (strcmp(key, embedding_key(c)) == 0) it->k0 = 0;
    else if (strncmp(key, "lm_head.", 8) == 0) it->k0 = 0, it->k1 = 0;
    else if (strcmp(key, final_norm_key(c)) == 0) it->k0 = 1;
    else if (layer_of(key, &layer)) {
        it->k0 = 2;
        it->k1 = layer;
        it->k2 = 999;
        for (int i = 0; i < n; i++)
            if (strstr(key, order[i])) {
                it->k2 = i;
                break;
            }
        it->k3 = ends_with(key, ".bias") ? 1 : 0;
    } else {
        it->k0 = 3;
    }
}

static uint32_t pad_dim(int64_t d, const qp_trillim_config *c, bool *padded) {
    if (d == c->intermediate_orig && c->intermediate != c->intermediate_orig) {
        *padded = true;
        return (uint32_t)c->intermediate;
    }
    if (d == c->hidden_orig && c->hidden != c->hidden_orig) {
        *padded = true;
        return (uint32_t)c->hidden;
    }
    return (uint32_t)d;
}

static const char *const k_lora_targets[QP_TRILLIM_LORA_TARGETS] = {
    "self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};

/* _parse_adapter_tensor_key: "<prefix><layer>.<target>.lora_<A|B>.weight" with one of the two
 * prefixes and a LORA_TARGETS target; the layer, or -1 when the key is not one. */
static int64_t lora_key_layer(const char *key) {
    static const char *const k_prefix[] = {"base_model.model.model.layers.", "model.layers."};
    for (int p = 0; p < 2; p++) {
        size_t pl = strlen(k_prefix[p]);
        if (strncmp(key, k_prefix[p], pl) != 0) continue;
        const char *d = key + pl, *q = d;
        int64_t layer = 0;
        while (*q >= '0' && *q <= '9' && layer < 100000000) layer = layer * 10 + (*q++ - '0');
        if (q == d || *q != '.') return -1;
        for (int t = 0; t < QP_TRILLIM_LORA_TARGETS; t++) {
            size_t tl = strlen(k_lora_targets[t]);
            if (strncmp(q + 1, k_lora_targets[t], tl) == 0 &&
                (strcmp(q + 1 + tl, ".lora_A.weight") == 0 || strcmp(q + 1 + tl, ".lora_B.weight") == 0))
                return layer;
        }
        return -1;
    }
    return -1;
}

/* _read_adapter_metadata's refusals: target_modules naming a module outside LORA_TARGETS (short
 * names as _SHORT_TO_FULL maps them), an adapter tensor that is not a LoRA A/B of one of them, or
 * one for a layer the model does not have. Without them a tensor would be silently dropped. */
static qp_status check_adapter_tensors(const cJSON *ac, const cJSON *header, const qp_trillim_config *c,
                                       const char *cfgp, const char *stp, qp_err *e) {
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(ac, "target_modules"), *it;
    if (tm && !cJSON_IsArray(tm))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: target_modules must be a list", cfgp);
    cJSON_ArrayForEach(it, tm) {
        bool known = false;
        for (int t = 0; t < QP_TRILLIM_LORA_TARGETS && cJSON_IsString(it); t++)
            known |= strcmp(it->valuestring, k_lora_targets[t]) == 0 ||
                     strcmp(it->valuestring, strchr(k_lora_targets[t], '.') + 1) == 0;
        if (!known)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: target module %s is not one the SDK takes (k, v, q, o, "
                           "gate, up, down projections)", cfgp, cJSON_IsString(it) ? it->valuestring : "?");
    }
    cJSON_ArrayForEach(it, header) {
        if (!it->string || strcmp(it->string, "__metadata__") == 0) continue;
        int64_t layer = lora_key_layer(it->string);
        if (layer < 0)
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is not a LoRA A/B of the k, v, q, o, gate, up "
                           "or down projection of a layer (layer unsupported)", stp, it->string);
        if (layer >= c->n_layers)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' is for layer %lld; the base model has %lld layers",
                           stp, it->string, (long long)layer, (long long)c->n_layers);
    }
    return QP_OK;
}

static qp_status build_lora(const char *adapter_dir, const qp_trillim_config *c, st_list *shards,
                            qp_trillim_manifest *m, qp_err *e) {
    char *cfgp = qp_path_join(adapter_dir, "adapter_config.json");
    char *stp = qp_path_join(adapter_dir, "adapter_model.safetensors");
    cJSON *ac = NULL;
    qp_status s = QP_OK;
    if (!cfgp || !stp) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!qp_path_exists(cfgp)) {
        s = qp_fail(e, QP_ERR_IO, "No adapter_config.json found in %s", cfgp);
        goto done;
    }
    if ((s = read_json(cfgp, &ac, e)) != QP_OK) goto done;
    int64_t r;
    if (!qp_json_get_int(ac, "r", 1, 65536, &r)) {
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: \"r\" missing or out of range", cfgp);
        goto done;
    }
    double rank = (double)r;
    cJSON *al = cJSON_GetObjectItemCaseSensitive(ac, "lora_alpha");
    double alpha = cJSON_IsNumber(al) ? al->valuedouble : rank;
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(ac, "use_rslora");
    m->lora_scale = cJSON_IsTrue(rs) ? alpha / sqrt(rank) : alpha / rank;
    int idx;
    if ((s = st_list_add(shards, stp, &idx, e)) != QP_OK) goto done;
    const st_shard *sh = &shards->v[idx];
    if ((s = check_adapter_tensors(ac, sh->header, c, cfgp, stp, e)) != QP_OK) goto done;
    m->has_lora = true;
    m->lora_layers = (uint32_t)c->n_layers;
    m->lora_targets = QP_TRILLIM_LORA_TARGETS;
    m->lora = qp_calloc((size_t)m->lora_layers * QP_TRILLIM_LORA_TARGETS, sizeof *m->lora);
    if (!m->lora) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (uint32_t l = 0; l < m->lora_layers; l++) {
        for (int t = 0; t < QP_TRILLIM_LORA_TARGETS; t++) {
            char keys[2][256];
            bool found[2] = {false, false};
            for (int ab = 0; ab < 2; ab++) {
                const char *pf[2] = {"base_model.model.model.layers.", "model.layers."};
                for (int k = 0; k < 2 && !found[ab]; k++) {
                    snprintf(keys[ab], sizeof keys[ab], "%s%u.%s.lora_%c.weight", pf[k], l,
                             k_lora_targets[t], ab ? 'B' : 'A');
                    found[ab] = cJSON_GetObjectItemCaseSensitive(sh->header, keys[ab]) != NULL;
                }
            }
            if (!found[0] || !found[1]) continue;
            qp_trillim_lora_slot *sl = &m->lora[(size_t)l * QP_TRILLIM_LORA_TARGETS + t];
            qp_trillim_lora_mat *mats[2] = {&sl->a, &sl->b};
            for (int ab = 0; ab < 2; ab++) {
                uint8_t dt;
                int64_t shape[QP_ST_MAX_DIMS] = {0};
                int nd;
                uint64_t b, en;
                if ((s = tensor_info(sh, keys[ab], &dt, shape, &nd, &b, &en, e)) != QP_OK) goto done;
                if (nd != 2) {
                    s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' is not 2-D", stp, keys[ab]);
                    goto done;
                }
                mats[ab]->dtype = dt;
                mats[ab]->rows = (uint32_t)shape[0];
                mats[ab]->cols = (uint32_t)shape[1];
                mats[ab]->shard = (uint16_t)idx;
                mats[ab]->offset = sh->data_start + b;
                mats[ab]->size = en - b;
            }
            sl->present = true;
        }
    }
done:
    cJSON_Delete(ac);
    qp_free(cfgp);
    qp_free(stp);
    return s;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

qp_status qp_trillim_adapter_rank(const char *adapter_dir, int64_t *rank, qp_err *e) {
    char *p = qp_path_join(adapter_dir, "adapter_config.json");
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    cJSON *j = NULL;
    int64_t r;
    qp_status s = read_json(p, &j, e);
    if (s == QP_OK && !qp_json_get_int(j, "r", 1, 65536, &r))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: \"r\" missing or out of range", p);
    else if (s == QP_OK) *rank = r;
    cJSON_Delete(j);
    qp_free(p);
    return s;
}

/* State of one manifest build: the shard headers read so far and the tensors in SDK order. */
typedef struct manifest_build {
    const char *model_dir;
    const qp_trillim_config *c;
    st_list shards;
    cJSON *index;       /* model.safetensors.index.json when the model is sharded */
    const cJSON *wm;    /* its weight_map (scale tensors are looked up there) */
    item *items;
    int n_items, cap_items;
} manifest_build;

/* The shards of an index (get_sharded_files): its sorted unique file names, each a plain name
 * in the model folder. */
static qp_status list_index_shards(manifest_build *b, const char *index_path, qp_err *e) {
    qp_status s = read_json(index_path, &b->index, e);
    if (s != QP_OK) return s;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(b->index, "weight_map");
    if (!cJSON_IsObject(wm)) return qp_fail(e, QP_ERR_CORRUPT, "%s: no weight_map object", index_path);
    b->wm = wm;
    int n = cJSON_GetArraySize(wm), n_files = 0;
    char **files = qp_calloc((size_t)(n ? n : 1), sizeof *files);
    if (!files) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, wm) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, '/') || !strcmp(it->valuestring, "..")) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: weight_map entry '%s' is not a file name in the "
                        "model folder", index_path, it->string ? it->string : "?");
            break;
        }
        bool dup = false;
        for (int i = 0; i < n_files; i++) dup |= strcmp(files[i], it->valuestring) == 0;
        if (!dup) files[n_files++] = it->valuestring;
    }
    if (s == QP_OK) qsort(files, (size_t)n_files, sizeof *files, str_cmp);
    for (int i = 0; i < n_files && s == QP_OK; i++) {
        char *p = qp_path_join(b->model_dir, files[i]);
        int idx;
        s = p ? st_list_add(&b->shards, p, &idx, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
        qp_free(p);
    }
    qp_free(files);
    return s;
}

/* The model's shards: model.safetensors wins; else the index's. */
static qp_status list_model_shards(manifest_build *b, qp_err *e) {
    char *single = qp_path_join(b->model_dir, "model.safetensors");
    char *index_path = qp_path_join(b->model_dir, "model.safetensors.index.json");
    qp_status s = QP_OK;
    int idx;
    if (!single || !index_path) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    else if (qp_path_exists(single)) s = st_list_add(&b->shards, single, &idx, e);
    else if (qp_path_exists(index_path)) s = list_index_shards(b, index_path, e);
    else s = qp_fail(e, QP_ERR_IO, "No model.safetensors or model.safetensors.index.json found in %s",
                     b->model_dir);
    qp_free(single);
    qp_free(index_path);
    return s;
}

/* A q/k/v projection's bias (TRLM roles Q/K/V_BIAS, each right after its weight). */
static bool is_qkv_bias(const char *key) {
    return ends_with(key, ".q_proj.bias") || ends_with(key, ".k_proj.bias") || ends_with(key, ".v_proj.bias");
}

/* The tensors to quantize, in header order shard by shard, then sorted by the SDK's key. */
static qp_status collect_items(manifest_build *b, int n_model_shards, qp_err *e) {
    for (int si = 0; si < n_model_shards; si++) {
        const cJSON *it;
        cJSON_ArrayForEach(it, b->shards.v[si].header) {
            const char *key = it->string;
            if (!key || strcmp(key, "__metadata__") == 0) continue;
            if (strstr(key, "rotary_emb") || strstr(key, "inv_freq")) continue;
            /* determine_language_model_only: Qwen3.5's vision tower and MTP block are dropped */
            if (b->c->arch_type == 3 && (strncmp(key, "model.visual.", 13) == 0 || strncmp(key, "mtp.", 4) == 0))
                continue;
            if (b->c->tie_embeddings && strstr(key, "lm_head")) continue;
            if (ends_with(key, "_scale")) continue;
            if (ends_with(key, ".bias") && !is_qkv_bias(key))
                return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor %s: the SDK would write this bias as a "
                               "BF16_RAW record after its weight, but TRLM has no role for it and the "
                               "runtime no such bias (q/k/v_proj biases only)", b->model_dir, key);
            if (b->n_items == b->cap_items) {
                int nc = b->cap_items ? b->cap_items * 2 : 64;
                item *ni = qp_realloc(b->items, (size_t)nc * sizeof *ni);
                if (!ni) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
                b->items = ni;
                b->cap_items = nc;
            }
            item *x = &b->items[b->n_items];
            x->key = key;
            x->shard = si;
            x->seq = b->n_items;
            sort_key(x, b->c);
            b->n_items++;
        }
    }
    if (b->n_items > 0) qsort(b->items, (size_t)b->n_items, sizeof *b->items, item_cmp);
    return QP_OK;
}

/* The "<key>_scale" tensor of a pre-quantized (I8/U8) weight: in the shard the index names,
 * else in the weight's own shard; absent is fine (has_scale stays 0). */
static qp_status find_scale(manifest_build *b, const item *x, qp_trillim_entry *t, qp_err *e) {
    char skey[512];
    snprintf(skey, sizeof skey, "%s_scale", x->key);
    int sidx = x->shard;
    const cJSON *f = b->wm ? cJSON_GetObjectItemCaseSensitive(b->wm, skey) : NULL;
    if (cJSON_IsString(f)) {
        char *p = qp_path_join(b->model_dir, f->valuestring);
        qp_status s = p ? st_list_add(&b->shards, p, &sidx, e)
                        : qp_fail(e, QP_ERR_NOMEM, "out of memory");
        qp_free(p);
        if (s != QP_OK) return s;
    }
    const st_shard *ssh = &b->shards.v[sidx];
    if (!cJSON_GetObjectItemCaseSensitive(ssh->header, skey)) return QP_OK;
    uint8_t sdt;
    int64_t sshape[QP_ST_MAX_DIMS];
    int snd;
    uint64_t sb, se;
    qp_status s = tensor_info(ssh, skey, &sdt, sshape, &snd, &sb, &se, e);
    if (s != QP_OK) return s;
    t->has_scale = 1;
    t->scale_shard = (uint16_t)sidx;
    t->scale_offset = ssh->data_start + sb;
    t->scale_size = se - sb;
    return QP_OK;
}

static const char *const k_target_names[QP_TRILLIM_TARGET_COUNT] = {
    "auto", "ternary", "bf16", "q8_0", "q8_0_blocked_32", "q1_0_128", "grouped_ternary_128"};

bool qp_trillim_target_from_name(const char *name, qp_trillim_target *t) {
    if (strcasecmp(name, "int8") == 0) name = "q8_0_blocked_32"; /* the SDK's one alias */
    for (int k = 0; k < QP_TRILLIM_TARGET_COUNT; k++)
        if (strcasecmp(name, k_target_names[k]) == 0) {
            *t = (qp_trillim_target)k;
            return true;
        }
    return false;
}

const char *qp_trillim_quantization_name(qp_trillim_target t, int arch_type) {
    static const char *const k_display[QP_TRILLIM_TARGET_COUNT] = {
        "auto", "ternary", "bf16", "q8_0", "q8_0_blocked_32", "binary", "grouped-ternary"};
    static const char *const k_auto_by_arch[] = {"ternary", "ternary", "ternary", "ternary",
                                                 "binary", "grouped-ternary", "bf16"};
    if (t != QP_TRILLIM_TARGET_AUTO) return k_display[t];
    return arch_type >= 0 && arch_type <= 6 ? k_auto_by_arch[arch_type] : "ternary";
}

/* _quantization_target_action: AUTO is _quantized_tensor_action, by arch first (BONSAI
 * Q1_0_128, BONSAI_TERNARY GROUP_TERNARY, QWEN3 BF16_RAW), then by dtype. */
static uint8_t target_action(qp_trillim_target t, uint8_t dtype, int arch) {
    static const uint8_t k_auto_by_arch[] = {[4] = QP_TRILLIM_Q1_0_128,
                                             [5] = QP_TRILLIM_GROUP_TERNARY_QUANTIZE,
                                             [6] = QP_TRILLIM_BF16_RAW};
    if (t == QP_TRILLIM_TARGET_AUTO && arch >= 4 && arch <= 6) return k_auto_by_arch[arch];
    static const uint8_t k_action[QP_TRILLIM_TARGET_COUNT] = {
        QP_TRILLIM_TERNARY_QUANTIZE, QP_TRILLIM_TERNARY_QUANTIZE, QP_TRILLIM_BF16_RAW,
        QP_TRILLIM_Q8_0_QUANTIZE, QP_TRILLIM_Q8_0_BLOCKED_32_QUANTIZE, QP_TRILLIM_Q1_0_128,
        QP_TRILLIM_GROUP_TERNARY_QUANTIZE};
    bool prequantized = dtype == QP_TRILLIM_I8 || dtype == QP_TRILLIM_U8;
    if (prequantized && (t == QP_TRILLIM_TARGET_AUTO || t == QP_TRILLIM_TARGET_TERNARY))
        return QP_TRILLIM_REPACK_TERNARY;
    return k_action[t];
}

/* One manifest entry: shape (padded as the SDK pads), where the bytes are, and the action. */
static qp_status plan_entry(manifest_build *b, const item *x, qp_trillim_entry *t, qp_err *e) {
    const qp_trillim_config *c = b->c;
    const st_shard *sh = &b->shards.v[x->shard];
    uint8_t dt;
    int64_t shape[QP_ST_MAX_DIMS] = {0};
    int nd;
    uint64_t begin, end;
    qp_status s = tensor_info(sh, x->key, &dt, shape, &nd, &begin, &end, e);
    if (s != QP_OK) return s;
    int64_t row = nd >= 1 ? shape[0] : 1, col = 1;
    for (int d = 1; d < nd; d++) col = col > (1 << 24) ? col : col * shape[d]; /* math.prod(shape[1:]) */
    if (row <= 0 || col <= 0 || row > (1 << 24) || col > (1 << 24))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': shape out of range", sh->path,
                       x->key);
    bool is_1d = col == 1;
    bool is_embed = strcmp(x->key, embedding_key(c)) == 0;
    bool is_head = strncmp(x->key, "lm_head.", 8) == 0;
    /* the Bonsai family quantizes the embedding and lm_head too (_is_bonsai_family) */
    bool quant = c->arch_type == 4 || c->arch_type == 5 ? !is_1d : !(is_1d || is_embed || is_head);
    bool padded = false;
    uint32_t pr = (uint32_t)row, pc = (uint32_t)col;
    int64_t padded_shape[QP_ST_MAX_DIMS];
    for (int d = 0; d < nd; d++) padded_shape[d] = pad_dim(shape[d], c, &padded);
    if (padded) {
        pr = nd >= 1 ? (uint32_t)padded_shape[0] : 1;
        int64_t prod = 1;
        for (int d = 1; d < nd; d++) prod *= padded_shape[d];
        pc = (uint32_t)prod;
    }
    t->dtype = dt;
    t->rows = (uint32_t)row;
    t->cols = (uint32_t)col;
    t->padded_rows = pr;
    t->padded_cols = pc;
    t->shard = (uint16_t)x->shard;
    t->data_offset = sh->data_start + begin;
    t->data_size = end - begin;
    t->action = quant ? target_action(c->target, dt, c->arch_type) : QP_TRILLIM_BF16_RAW;
    if (t->action == QP_TRILLIM_Q8_0_BLOCKED_32_QUANTIZE) t->padded_rows = (t->padded_rows + 31) / 32 * 32;
    return t->action == QP_TRILLIM_REPACK_TERNARY ? find_scale(b, x, t, e) : QP_OK;
}

/* The shard paths move from the build into the manifest. */
static qp_status take_shards(manifest_build *b, qp_trillim_manifest *m, qp_err *e) {
    st_list *l = &b->shards;
    if (l->n > QP_TRILLIM_MAX_SHARDS)
        return qp_fail(e, QP_ERR_LIMIT, "%d shard files (at most %d)", l->n, QP_TRILLIM_MAX_SHARDS);
    m->shards = qp_calloc((size_t)l->n, sizeof *m->shards);
    if (!m->shards) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < l->n; i++) {
        m->shards[i] = l->v[i].path;
        l->v[i].path = NULL;
        m->n_shards = (uint16_t)(i + 1);
    }
    return QP_OK;
}

/* The SDK resolves the model and adapter folders (Path.resolve) before it writes their shard
 * paths, so the manifest names absolute files. */
static qp_status absolute_dir(const char *dir, char **out, qp_err *e) {
    char *abs = realpath(dir, NULL);
    if (!abs) return qp_fail(e, QP_ERR_IO, "%s: cannot resolve the folder's absolute path", dir);
    *out = qp_strdup(abs);
    free(abs); /* realpath allocates with malloc */
    return *out ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory");
}

qp_status qp_trillim_manifest_build(const char *model_dir, const qp_trillim_config *c,
                                    const char *adapter_dir, bool adapter_only,
                                    qp_trillim_manifest **out, qp_err *e) {
    manifest_build b = {.c = c};
    char *abs_model = NULL, *abs_adapter = NULL;
    qp_trillim_manifest *m = qp_calloc(1, sizeof *m);
    qp_status s;
    if (!m) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((s = absolute_dir(model_dir, &abs_model, e)) != QP_OK ||
        (adapter_dir && (s = absolute_dir(adapter_dir, &abs_adapter, e)) != QP_OK))
        goto done;
    b.model_dir = abs_model;
    if (adapter_only && !abs_adapter) {
        s = qp_fail(e, QP_ERR_ARG, "an adapter-only manifest needs an adapter folder");
        goto done;
    }
    /* skip_model (run_adapter_quantizer): no model shards, entries or sections */
    if (!adapter_only && (s = list_model_shards(&b, e)) != QP_OK) goto done;
    if ((s = collect_items(&b, b.shards.n, e)) != QP_OK) goto done;
    m->entries = qp_calloc((size_t)(b.n_items ? b.n_items : 1), sizeof *m->entries);
    m->names = qp_calloc((size_t)(b.n_items ? b.n_items : 1), sizeof *m->names);
    if (!m->entries || !m->names) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < b.n_items; i++) {
        if ((s = plan_entry(&b, &b.items[i], &m->entries[i], e)) != QP_OK) goto done;
        m->n_entries = (uint32_t)(i + 1);
        if (!(m->names[i] = qp_strdup(b.items[i].key))) {
            s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    /* one TEXT_CORE section over the entries (none without entries) */
    m->has_sections = true;
    if (!(m->sections = qp_calloc(1, sizeof *m->sections))) {
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (m->n_entries > 0) {
        m->n_sections = 1;
        m->sections[0] = (qp_trillim_section){QP_TRILLIM_SECTION_TEXT_CORE, 0, m->n_entries};
    }
    if (abs_adapter && (s = build_lora(abs_adapter, c, &b.shards, m, e)) != QP_OK) goto done;
    s = take_shards(&b, m, e);
done:
    qp_free(abs_model);
    qp_free(abs_adapter);
    st_list_free(&b.shards);
    cJSON_Delete(b.index);
    qp_free(b.items);
    if (s != QP_OK) {
        qp_trillim_manifest_free(m);
        return s;
    }
    *out = m;
    return QP_OK;
}
