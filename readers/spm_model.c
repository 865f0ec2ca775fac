/* Tokenizer files into qp_vocab, normalised to GGUF "llama" conventions (spm_model.md):
 *   - SentencePiece tokenizer.model (a protobuf ModelProto), read with a minimal bounded
 *     protobuf reader;
 *   - the llama2.c tokenizer .bin (tokenizer.py export), whose spaces become U+2581 again.
 * Both fill m->vocab only on success; every string is copied into the model arena. */
#include <string.h>

#include "core/model_internal.h"

#define SPM_MAX_TOKENS (1 << 24)     /* LIMIT past this many pieces */
#define SPM_MAX_PIECE_LEN (1 << 16)  /* LIMIT past this many bytes in one piece */
#define L2C_TOK_MAX_LEN (1 << 16)    /* LIMIT when max_token_length exceeds this */

static const char k_sp_space[3] = {(char)0xE2, (char)0x96, (char)0x81}; /* U+2581 */

/* ---- common: the arrays of a vocabulary, built in the model arena ---------------------------- */

typedef struct vocab_build {
    int64_t n;
    char **tokens;
    uint32_t *lens;
    float *scores;
    int32_t *types;
    char *blob; /* every piece, NUL-terminated, back to back */
    size_t blob_used, blob_cap;
} vocab_build;

static qp_status vb_alloc(qp_model *m, const char *path, int64_t n, size_t blob_bytes,
                          vocab_build *vb, qp_err *e) {
    qp_arena *a = qp_model_arena(m);
    size_t un = (size_t)n, b1, b2, b3;
    memset(vb, 0, sizeof *vb);
    if (!qp_size_mul(un, sizeof(char *), &b1) || !qp_size_mul(un, sizeof(uint32_t), &b2) ||
        !qp_size_mul(un, sizeof(float), &b3))
        return qp_fail(e, QP_ERR_LIMIT, "%s: %lld tokens overflow the vocabulary size", path,
                       (long long)n);
    vb->n = n;
    vb->tokens = qp_arena_alloc(a, b1);
    vb->lens = qp_arena_alloc(a, b2);
    vb->scores = qp_arena_alloc(a, b3);
    vb->types = qp_arena_alloc(a, b2);
    vb->blob = qp_arena_alloc(a, blob_bytes);
    vb->blob_cap = blob_bytes;
    if (!vb->tokens || !vb->lens || !vb->scores || !vb->types || !vb->blob)
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
    return QP_OK;
}

/* Reserves len + 1 bytes of the blob for token i; the caller writes len bytes. */
static char *vb_reserve(vocab_build *vb, int64_t i, size_t len) {
    size_t end;
    if (!qp_size_add(vb->blob_used, len, &end) || !qp_size_add(end, 1, &end) || end > vb->blob_cap)
        return NULL; /* pass 1 sized the blob; unreachable unless the two passes disagree */
    char *p = vb->blob + vb->blob_used;
    p[len] = '\0';
    vb->tokens[i] = p;
    vb->lens[i] = (uint32_t)len;
    vb->blob_used = end;
    return p;
}

static void vb_install(qp_model *m, const vocab_build *vb) {
    qp_vocab *v = &m->vocab;
    v->model = QP_TOK_SPM;
    memset(v->pre, 0, sizeof v->pre);
    memcpy(v->pre, "default", 7);
    v->n_tokens = vb->n;
    v->tokens = vb->tokens;
    v->token_lens = vb->lens;
    v->scores = vb->scores;
    v->types = vb->types;
    v->n_merges = 0;
    v->merges = NULL;
    v->add_bos = true;
    v->add_eos = false;
}

/* Metadata that may already exist (a second tokenizer read on the same model) is left alone. */
static qp_status meta_bool_once(qp_model *m, const char *key, bool val, qp_err *e) {
    if (qp_model_meta(m, key)) return QP_OK;
    qp_meta *md;
    qp_status s = qp_model_add_meta(m, key, strlen(key), &md, e);
    if (s != QP_OK) return s;
    md->type = QP_META_BOOL;
    md->v.b = val;
    return QP_OK;
}

static qp_status meta_u32_once(qp_model *m, const char *key, uint32_t val, qp_err *e) {
    if (qp_model_meta(m, key)) return QP_OK;
    return qp_model_meta_u32(m, key, val, e);
}

/* ---- a minimal protobuf reader ---------------------------------------------------------------
 * Every read is bounded by the enclosing message (c->size); offsets in messages are absolute
 * file offsets because sub-cursors share the file's base pointer. */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static qp_status pb_varint(qp_cursor *c, uint64_t *out, const char *path, const char *what,
                           qp_err *e) {
    uint64_t v = 0;
    size_t start = c->pos;
    for (unsigned i = 0; i < 10; i++) {
        uint8_t b;
        if (!qp_cursor_u8(c, &b)) {
            c->pos = start;
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: varint runs past the end of "
                           "its message (ends at %zu)", path, what, start, c->size);
        }
        if (i == 9 && b > 1) {
            c->pos = start;
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: varint overflows 64 bits",
                           path, what, start);
        }
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return QP_OK;
        }
    }
    c->pos = start;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: varint longer than 10 bytes", path,
                   what, start);
}

typedef struct pb_field {
    uint32_t num;
    unsigned wire;
    size_t at;           /* offset of the tag */
    uint64_t u;          /* WT_VARINT, WT_I64, WT_I32 value */
    qp_cursor sub;       /* WT_LEN: the payload, bounded */
} pb_field;

/* Reads one field (tag and value) from c. */
static qp_status pb_next(qp_cursor *c, pb_field *f, const char *path, const char *msg, qp_err *e) {
    uint64_t tag = 0;
    f->at = c->pos;
    qp_status s = pb_varint(c, &tag, path, msg, e);
    if (s != QP_OK) return s;
    f->wire = (unsigned)(tag & 7);
    uint64_t num = tag >> 3;
    if (num == 0 || num > 0x1fffffff)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: invalid field number %llu", path,
                       msg, f->at, (unsigned long long)num);
    f->num = (uint32_t)num;
    const uint8_t *p;
    switch (f->wire) {
    case WT_VARINT: return pb_varint(c, &f->u, path, msg, e);
    case WT_I64:
        if (!qp_cursor_u64(c, &f->u))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: field %u: 8-byte value past "
                           "the end of its message (ends at %zu)", path, msg, f->at, f->num, c->size);
        return QP_OK;
    case WT_I32: {
        uint32_t v;
        if (!qp_cursor_u32(c, &v))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: field %u: 4-byte value past "
                           "the end of its message (ends at %zu)", path, msg, f->at, f->num, c->size);
        f->u = v;
        return QP_OK;
    }
    case WT_LEN: {
        uint64_t len = 0;
        s = pb_varint(c, &len, path, msg, e);
        if (s != QP_OK) return s;
        size_t start = c->pos;
        if (len > qp_cursor_left(c) || !qp_cursor_take(c, (size_t)len, &p))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: field %u: length %llu runs "
                           "past the end of its message (%zu bytes left)", path, msg, f->at, f->num,
                           (unsigned long long)len, c->size - start);
        qp_cursor_init(&f->sub, c->base, start + (size_t)len, start);
        return QP_OK;
    }
    default:
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: field %u has wire type %u "
                       "(groups and unknown wire types are not valid here)", path, msg, f->at,
                       f->num, f->wire);
    }
}

static qp_status pb_want(const pb_field *f, unsigned wire, const char *path, const char *what,
                         qp_err *e) {
    if (f->wire == wire) return QP_OK;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: %s at offset %zu: field %u has wire type %u, expected %u",
                   path, what, f->at, f->num, f->wire, wire);
}

/* ---- SentencePiece ModelProto ---------------------------------------------------------------- */

typedef struct spm_piece {
    const uint8_t *text;
    size_t len;
    float score;
    int32_t type;
} spm_piece;

static qp_status spm_parse_piece(qp_cursor *c, int64_t idx, const char *path, spm_piece *out,
                                 qp_err *e) {
    size_t at = c->pos;
    out->text = NULL;
    out->len = 0;
    out->score = 0.0f;
    out->type = QP_TOKTYPE_NORMAL;
    bool have_text = false;
    while (qp_cursor_left(c) > 0) {
        pb_field f;
        qp_status s = pb_next(c, &f, path, "SentencePiece", e);
        if (s != QP_OK) return s;
        if (f.num == 1) {
            if ((s = pb_want(&f, WT_LEN, path, "SentencePiece.piece", e)) != QP_OK) return s;
            out->len = qp_cursor_left(&f.sub);
            if (out->len > SPM_MAX_PIECE_LEN)
                return qp_fail(e, QP_ERR_LIMIT, "%s: piece %lld at offset %zu: %zu bytes (limit %d)",
                               path, (long long)idx, f.at, out->len, SPM_MAX_PIECE_LEN);
            out->text = f.sub.base + f.sub.pos;
            have_text = true;
        } else if (f.num == 2) {
            if ((s = pb_want(&f, WT_I32, path, "SentencePiece.score", e)) != QP_OK) return s;
            uint8_t b[4];
            qp_store_u32le(b, (uint32_t)f.u);
            out->score = qp_load_f32le(b);
        } else if (f.num == 3) {
            if ((s = pb_want(&f, WT_VARINT, path, "SentencePiece.type", e)) != QP_OK) return s;
            if (f.u < QP_TOKTYPE_NORMAL || f.u > QP_TOKTYPE_BYTE)
                return qp_fail(e, QP_ERR_CORRUPT, "%s: piece %lld at offset %zu: unknown type %llu",
                               path, (long long)idx, f.at, (unsigned long long)f.u);
            out->type = (int32_t)f.u; /* SentencePiece's Type numbers equal GGUF's token types */
        }
    }
    if (!have_text)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: piece %lld at offset %zu: no piece text", path,
                       (long long)idx, at);
    return QP_OK;
}

typedef struct spm_spec {
    uint32_t model_type; /* UNIGRAM 1, BPE 2, WORD 3, CHAR 4 */
    bool byte_fallback;
    int64_t unk_id, bos_id, eos_id, pad_id;
    bool add_dummy_prefix;
    bool remove_extra_whitespaces;
} spm_spec;

static qp_status spm_parse_trainer(qp_cursor *c, const char *path, spm_spec *sp, qp_err *e) {
    while (qp_cursor_left(c) > 0) {
        pb_field f;
        qp_status s = pb_next(c, &f, path, "TrainerSpec", e);
        if (s != QP_OK) return s;
        int64_t *id = NULL;
        switch (f.num) {
        case 3:
            if ((s = pb_want(&f, WT_VARINT, path, "TrainerSpec.model_type", e)) != QP_OK) return s;
            sp->model_type = f.u > 0xffffffffu ? 0xffffffffu : (uint32_t)f.u;
            break;
        case 35:
            if ((s = pb_want(&f, WT_VARINT, path, "TrainerSpec.byte_fallback", e)) != QP_OK) return s;
            sp->byte_fallback = f.u != 0;
            break;
        case 40: id = &sp->unk_id; break;
        case 41: id = &sp->bos_id; break;
        case 42: id = &sp->eos_id; break;
        case 43: id = &sp->pad_id; break;
        default: break;
        }
        if (id) {
            if ((s = pb_want(&f, WT_VARINT, path, "TrainerSpec id field", e)) != QP_OK) return s;
            /* int32 in protobuf: negative values are sign-extended to 64 bits */
            *id = (int64_t)(int32_t)(uint32_t)f.u;
        }
    }
    return QP_OK;
}

static qp_status spm_parse_normalizer(qp_cursor *c, const char *path, spm_spec *sp, qp_err *e) {
    while (qp_cursor_left(c) > 0) {
        pb_field f;
        qp_status s = pb_next(c, &f, path, "NormalizerSpec", e);
        if (s != QP_OK) return s;
        if (f.num == 3 || f.num == 4) {
            if ((s = pb_want(&f, WT_VARINT, path, "NormalizerSpec flag", e)) != QP_OK) return s;
            if (f.num == 3) sp->add_dummy_prefix = f.u != 0;
            else sp->remove_extra_whitespaces = f.u != 0;
        }
    }
    return QP_OK;
}

static qp_status spm_check_id(int64_t id, int64_t n, const char *name, const char *path, qp_err *e) {
    if (id == -1 || (id >= 0 && id < n)) return QP_OK;
    return qp_fail(e, QP_ERR_CORRUPT, "%s: trainer_spec.%s = %lld is outside the %lld pieces", path,
                   name, (long long)id, (long long)n);
}

static qp_status spm_read_mapped(qp_model *m, const char *path, const qp_mapped_file *mf,
                                 qp_err *e) {
    spm_spec sp = {.model_type = 1, .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
                   .add_dummy_prefix = true, .remove_extra_whitespaces = true};
    /* pass 1: validate everything, count pieces and their bytes */
    qp_cursor c;
    qp_cursor_init(&c, mf->data, mf->size, 0);
    int64_t n = 0;
    size_t blob = 0;
    bool have_trainer = false;
    while (qp_cursor_left(&c) > 0) {
        pb_field f;
        qp_status s = pb_next(&c, &f, path, "ModelProto", e);
        if (s != QP_OK) return s;
        if (f.num == 1) {
            if ((s = pb_want(&f, WT_LEN, path, "ModelProto.pieces", e)) != QP_OK) return s;
            if (n >= SPM_MAX_TOKENS)
                return qp_fail(e, QP_ERR_LIMIT, "%s: piece at offset %zu: more than %d pieces", path,
                               f.at, SPM_MAX_TOKENS);
            spm_piece pc;
            if ((s = spm_parse_piece(&f.sub, n, path, &pc, e)) != QP_OK) return s;
            if (!qp_size_add(blob, pc.len + 1, &blob))
                return qp_fail(e, QP_ERR_LIMIT, "%s: pieces overflow the size type", path);
            n++;
        } else if (f.num == 2) {
            if ((s = pb_want(&f, WT_LEN, path, "ModelProto.trainer_spec", e)) != QP_OK) return s;
            if ((s = spm_parse_trainer(&f.sub, path, &sp, e)) != QP_OK) return s;
            have_trainer = true;
        } else if (f.num == 3) {
            if ((s = pb_want(&f, WT_LEN, path, "ModelProto.normalizer_spec", e)) != QP_OK) return s;
            if ((s = spm_parse_normalizer(&f.sub, path, &sp, e)) != QP_OK) return s;
        }
    }
    if (n == 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: no pieces in the SentencePiece model (%zu bytes)",
                       path, mf->size);
    if (sp.model_type != 1 && sp.model_type != 2)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: SentencePiece model_type %u (only UNIGRAM 1 and "
                       "BPE 2 are supported)", path, sp.model_type);
    qp_status s;
    if ((s = spm_check_id(sp.unk_id, n, "unk_id", path, e)) != QP_OK) return s;
    if ((s = spm_check_id(sp.bos_id, n, "bos_id", path, e)) != QP_OK) return s;
    if ((s = spm_check_id(sp.eos_id, n, "eos_id", path, e)) != QP_OK) return s;
    if ((s = spm_check_id(sp.pad_id, n, "pad_id", path, e)) != QP_OK) return s;

    /* pass 2: fill (the bytes were validated in pass 1) */
    vocab_build vb;
    if ((s = vb_alloc(m, path, n, blob, &vb, e)) != QP_OK) return s;
    qp_cursor_init(&c, mf->data, mf->size, 0);
    int64_t i = 0;
    while (qp_cursor_left(&c) > 0 && i < n) {
        pb_field f;
        if ((s = pb_next(&c, &f, path, "ModelProto", e)) != QP_OK) return s;
        if (f.num != 1) continue;
        spm_piece pc;
        if ((s = spm_parse_piece(&f.sub, i, path, &pc, e)) != QP_OK) return s;
        char *dst = vb_reserve(&vb, i, pc.len);
        if (!dst) return qp_fail(e, QP_ERR_INTERNAL, "%s: piece %lld: pass sizes disagree", path,
                                 (long long)i);
        if (pc.len) memcpy(dst, pc.text, pc.len);
        vb.scores[i] = pc.score;
        vb.types[i] = pc.type;
        i++;
    }
    if (i != n) return qp_fail(e, QP_ERR_INTERNAL, "%s: pass 2 found %lld of %lld pieces", path,
                               (long long)i, (long long)n);
    if ((s = meta_u32_once(m, "sentencepiece.model_type", sp.model_type, e)) != QP_OK) return s;
    if ((s = meta_bool_once(m, "sentencepiece.byte_fallback", sp.byte_fallback, e)) != QP_OK) return s;
    if ((s = meta_bool_once(m, "sentencepiece.add_dummy_prefix", sp.add_dummy_prefix, e)) != QP_OK)
        return s;
    if ((s = meta_bool_once(m, "sentencepiece.remove_extra_whitespaces",
                            sp.remove_extra_whitespaces, e)) != QP_OK)
        return s;
    vb_install(m, &vb);
    m->vocab.unk_id = (int32_t)sp.unk_id;
    m->vocab.bos_id = (int32_t)sp.bos_id;
    m->vocab.eos_id = (int32_t)sp.eos_id;
    m->vocab.pad_id = (int32_t)sp.pad_id;
    if (!have_trainer)
        qp_model_add_problem(m, "%s: no trainer_spec; assuming unk 0, bos 1, eos 2", path);
    return QP_OK;
}

qp_status qp_vocab_read_spm_model(qp_model *m, const char *path, qp_err *e) {
    if (!m || !path) return qp_fail(e, QP_ERR_ARG, "qp_vocab_read_spm_model: NULL argument");
    qp_mapped_file mf = {0};
    qp_status s = qp_file_map(path, &mf, e);
    if (s != QP_OK) return s;
    s = spm_read_mapped(m, path, &mf, e);
    qp_file_unmap(&mf);
    return s;
}

/* ---- llama2.c tokenizer .bin ------------------------------------------------------------------ */

/* The exporter writes bos/eos as "\n<s>\n" and "\n</s>\n" (for llama2.c's printing); GGUF and the
 * .model call them "<s>" and "</s>". */
static void l2c_strip_special(const uint8_t **p, size_t *len) {
    if ((*len == 5 && memcmp(*p, "\n<s>\n", 5) == 0) || (*len == 6 && memcmp(*p, "\n</s>\n", 6) == 0)) {
        *p += 1;
        *len -= 2;
    }
}

static size_t l2c_count_spaces(const uint8_t *p, size_t len) {
    size_t k = 0;
    for (size_t i = 0; i < len; i++) k += p[i] == ' ';
    return k;
}

static bool is_hex_upper(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

static bool is_byte_piece(const uint8_t *p, size_t len) {
    return len == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && is_hex_upper(p[3]) &&
           is_hex_upper(p[4]) && p[5] == '>';
}

static qp_status l2c_tok_read_mapped(qp_model *m, const char *path, const qp_mapped_file *mf,
                                     qp_err *e) {
    qp_cursor c;
    qp_cursor_init(&c, mf->data, mf->size, 0);
    int32_t max_len;
    if (!qp_cursor_i32(&c, &max_len))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: %zu bytes, too short for the 4-byte max_token_length",
                       path, mf->size);
    if (max_len <= 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: max_token_length at offset 0 is %d (must be > 0)",
                       path, max_len);
    if (max_len > L2C_TOK_MAX_LEN)
        return qp_fail(e, QP_ERR_LIMIT, "%s: max_token_length at offset 0 is %d (limit %d)", path,
                       max_len, L2C_TOK_MAX_LEN);
    /* pass 1: validate and size */
    int64_t n = 0;
    size_t blob = 0;
    while (qp_cursor_left(&c) > 0) {
        size_t at = c.pos;
        float score;
        int32_t len;
        const uint8_t *p;
        if (n >= SPM_MAX_TOKENS)
            return qp_fail(e, QP_ERR_LIMIT, "%s: token %lld at offset %zu: more than %d tokens",
                           path, (long long)n, at, SPM_MAX_TOKENS);
        if (!qp_cursor_f32(&c, &score) || !qp_cursor_i32(&c, &len))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: token %lld at offset %zu: truncated record header "
                           "(%zu bytes left, 8 needed)", path, (long long)n, at, mf->size - at);
        if (len < 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: token %lld at offset %zu: negative length %d",
                           path, (long long)n, at + 4, len);
        if (len > max_len)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: token %lld at offset %zu: length %d exceeds "
                           "max_token_length %d", path, (long long)n, at + 4, len, max_len);
        if (!qp_cursor_take(&c, (size_t)len, &p))
            return qp_fail(e, QP_ERR_CORRUPT, "%s: token %lld at offset %zu: length %d runs past the "
                           "end of the file (%zu bytes left)", path, (long long)n, at + 4, len,
                           qp_cursor_left(&c));
        size_t plen = (size_t)len, need;
        l2c_strip_special(&p, &plen);
        /* each space (1 byte) becomes U+2581 (3 bytes); bounded by 3 * 64 KiB per token */
        need = plen + 2 * l2c_count_spaces(p, plen) + 1;
        if (!qp_size_add(blob, need, &blob))
            return qp_fail(e, QP_ERR_LIMIT, "%s: tokens overflow the size type", path);
        n++;
    }
    if (n == 0)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: no tokens after the 4-byte header", path);
    /* pass 2: fill */
    vocab_build vb;
    qp_status s = vb_alloc(m, path, n, blob, &vb, e);
    if (s != QP_OK) return s;
    qp_cursor_init(&c, mf->data, mf->size, 4);
    for (int64_t i = 0; i < n; i++) {
        float score = 0.0f;
        int32_t len = 0;
        const uint8_t *p = NULL;
        if (!qp_cursor_f32(&c, &score) || !qp_cursor_i32(&c, &len) || len < 0 ||
            !qp_cursor_take(&c, (size_t)len, &p))
            return qp_fail(e, QP_ERR_INTERNAL, "%s: token %lld: pass 2 disagrees", path, (long long)i);
        size_t plen = (size_t)len;
        l2c_strip_special(&p, &plen);
        size_t spaces = l2c_count_spaces(p, plen);
        char *dst = vb_reserve(&vb, i, plen + 2 * spaces);
        if (!dst) return qp_fail(e, QP_ERR_INTERNAL, "%s: token %lld: pass sizes disagree", path,
                                 (long long)i);
        for (size_t k = 0, o = 0; k < plen; k++) {
            if (p[k] == ' ') {
                memcpy(dst + o, k_sp_space, 3);
                o += 3;
            } else {
                dst[o++] = (char)p[k];
            }
        }
        vb.scores[i] = score;
        /* llama2.c's fixed ids: 0 <unk>, 1 <s>, 2 </s> */
        if (i == 0) vb.types[i] = QP_TOKTYPE_UNKNOWN;
        else if (i == 1 || i == 2) vb.types[i] = QP_TOKTYPE_CONTROL;
        else if (is_byte_piece(p, plen)) vb.types[i] = QP_TOKTYPE_BYTE;
        else vb.types[i] = QP_TOKTYPE_NORMAL;
    }
    vb_install(m, &vb);
    m->vocab.unk_id = 0;
    m->vocab.bos_id = n > 1 ? 1 : -1;
    m->vocab.eos_id = n > 2 ? 2 : -1;
    m->vocab.pad_id = -1;
    return QP_OK;
}

qp_status qp_vocab_read_llama2c_bin(qp_model *m, const char *path, qp_err *e) {
    if (!m || !path) return qp_fail(e, QP_ERR_ARG, "qp_vocab_read_llama2c_bin: NULL argument");
    qp_mapped_file mf = {0};
    qp_status s = qp_file_map(path, &mf, e);
    if (s != QP_OK) return s;
    s = l2c_tok_read_mapped(m, path, &mf, e);
    qp_file_unmap(&mf);
    return s;
}
