/* Corrupt llama2.c checkpoints, tokenizer .bin files and tokenizer.model protobufs, generated
 * here: each must give its exact status (never a crash), and `quantpack inspect` must exit 3. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "qp_test_util.h"

static char g_dir[1024];

/* A path under the temp folder, valid until free_paths() at the end of the run. */
static char *g_paths[256];
static int g_n_paths;

static const char *tmp_path(const char *name) {
    size_t n = strlen(g_dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p || g_n_paths == 256) exit(1);
    snprintf(p, n, "%s/%s", g_dir, name);
    g_paths[g_n_paths++] = p;
    return p;
}

static void free_paths(void) {
    while (g_n_paths > 0) free(g_paths[--g_n_paths]);
}


/* ---- bytes: qp_test_buf (qp_test_util.h) and a protobuf varint ---------------------------- */
static void put_i32(qp_test_buf *b, int32_t v) { qp_test_put_u32(b, (uint32_t)v); }
static void put_varint(qp_test_buf *b, uint64_t v) {
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        qp_test_put(b, &c, 1);
    } while (v);
}
static void pb_tag(qp_test_buf *b, unsigned field, unsigned wire) { put_varint(b, (uint64_t)field << 3 | wire); }
static void pb_bytes(qp_test_buf *b, unsigned field, const void *d, size_t n) {
    pb_tag(b, field, 2);
    put_varint(b, n);
    qp_test_put(b, d, n);
}

/* ---- checkpoints -------------------------------------------------------------------------- */
/* Float count of a v0 checkpoint, from export.py's legacy_export (written out independently of
 * the reader): embedding, 9 per-layer groups, final norm, freq_cis real + imag, classifier. */
static size_t v0_floats(const int32_t *h) {
    size_t dim = (size_t)h[0], hid = (size_t)h[1], L = (size_t)h[2], nh = (size_t)h[3];
    size_t kvd = dim / nh * (size_t)h[4], voc = (size_t)(h[5] < 0 ? -h[5] : h[5]);
    size_t n = voc * dim;
    n += L * (dim + dim * dim + 2 * kvd * dim + dim * dim + dim + 3 * hid * dim);
    n += dim + 2 * (size_t)h[6] * (dim / nh / 2);
    if (h[5] < 0) n += voc * dim;
    return n;
}

/* Writes a v0 checkpoint with `floats` floats after the header (value i * 0.001). */
static const char *write_v0(const char *name, const int32_t *h, size_t floats) {
    qp_test_buf b = {0};
    for (int i = 0; i < 7; i++) put_i32(&b, h[i]);
    for (size_t i = 0; i < floats; i++) qp_test_put_f32(&b, (float)i * 0.001f);
    const char *p = tmp_path(name);
    qp_test_must_write_file(p, b.p, b.n);
    qp_test_buf_free(&b);
    return p;
}

static qp_status read_ckpt(const char *path, const char *tok, qp_model **keep, qp_err *e) {
    qp_model *m = NULL;
    qp_err_clear(e);
    if (qp_model_new(QP_FORMAT_LLAMA2C, path, &m, e) != QP_OK) return QP_ERR_NOMEM;
    qp_open_opts o = {.tokenizer_path = tok};
    qp_status s = qp_llama2c_read(m, path, &o, e);
    if (s == QP_OK) s = qp_model_finish(m, e);
    if (keep && s == QP_OK) *keep = m;
    else qp_model_close(m);
    return s;
}

#define EXPECT_CKPT(path, tok, want)                                                             \
    do {                                                                                         \
        qp_err e_;                                                                               \
        qp_status s_ = read_ckpt(path, tok, NULL, &e_);                                          \
        QP_CHECK_MSG(s_ == (want), "%s: got %s (%s), want %s", path, qp_status_name(s_), e_.msg, \
                     qp_status_name(want));                                                      \
    } while (0)

static qp_status read_vocab(qp_status (*fn)(qp_model *, const char *, qp_err *), const char *path,
                            qp_model **keep, qp_err *e) {
    qp_model *m = NULL;
    qp_err_clear(e);
    if (qp_model_new(QP_FORMAT_UNKNOWN, path, &m, e) != QP_OK) return QP_ERR_NOMEM;
    qp_status s = fn(m, path, e);
    if (keep && s == QP_OK) *keep = m;
    else qp_model_close(m);
    return s;
}

#define EXPECT_VOCAB(fn, path, want)                                                             \
    do {                                                                                         \
        qp_err e_;                                                                               \
        qp_status s_ = read_vocab(fn, path, NULL, &e_);                                          \
        QP_CHECK_MSG(s_ == (want), "%s: got %s (%s), want %s", path, qp_status_name(s_), e_.msg, \
                     qp_status_name(want));                                                      \
    } while (0)

static int inspect_exit(const char *path, const char *tok) {
    return qp_test_system("'%s/quantpack' inspect '%s'%s%s%s >/dev/null 2>&1",
                          qp_test_env("QP_BIN_DIR", "bin"), path, tok ? " --tokenizer '" : "",
                          tok ? tok : "", tok ? "'" : "");
}

/* A llama2.c tokenizer .bin from (score, bytes) records. */
static const char *write_tok(const char *name, int32_t max_len, const char *const *pieces, int n,
                             const int32_t *len_override) {
    qp_test_buf b = {0};
    put_i32(&b, max_len);
    for (int i = 0; i < n; i++) {
        qp_test_put_f32(&b, -(float)i);
        int32_t len = len_override && len_override[i] != INT32_MIN ? len_override[i]
                                                                    : (int32_t)strlen(pieces[i]);
        put_i32(&b, len);
        qp_test_put(&b, pieces[i], strlen(pieces[i]));
    }
    const char *p = tmp_path(name);
    qp_test_must_write_file(p, b.p, b.n);
    qp_test_buf_free(&b);
    return p;
}

static void append_piece(qp_test_buf *m, const char *text, float score, int type) {
    qp_test_buf p = {0};
    pb_bytes(&p, 1, text, strlen(text));
    pb_tag(&p, 2, 5);
    qp_test_put_f32(&p, score);
    if (type) {
        pb_tag(&p, 3, 0);
        put_varint(&p, (uint64_t)type);
    }
    pb_bytes(m, 1, p.p, p.n);
    free(p.p);
}

/* A small valid ModelProto: <unk> <s> </s> <0x41> ▁a b, BPE, byte fallback, plus unknown fields
 * of every wire type that the reader must skip. */
static void valid_model(qp_test_buf *m) {
    append_piece(m, "<unk>", 0.0f, 2);
    append_piece(m, "<s>", 0.0f, 3);
    append_piece(m, "</s>", 0.0f, 3);
    append_piece(m, "<0x41>", 0.0f, 6);
    append_piece(m, "\xe2\x96\x81" "a", -1.5f, 0); /* type absent: NORMAL */
    append_piece(m, "b", -2.5f, 1);
    qp_test_buf t = {0};
    pb_bytes(&t, 2, "prefix", 6);  /* model_prefix: skipped */
    pb_tag(&t, 3, 0);
    put_varint(&t, 2);             /* BPE */
    pb_tag(&t, 10, 5);
    qp_test_put_f32(&t, 0.9995f);          /* character_coverage: fixed32, skipped */
    pb_tag(&t, 35, 0);
    put_varint(&t, 1);             /* byte_fallback */
    pb_tag(&t, 43, 0);
    put_varint(&t, UINT64_MAX);    /* pad_id = -1 as a 10-byte varint */
    pb_bytes(m, 2, t.p, t.n);
    free(t.p);
    qp_test_buf n = {0};
    pb_bytes(&n, 1, "identity", 8);
    pb_tag(&n, 3, 0);
    put_varint(&n, 0); /* add_dummy_prefix false */
    pb_bytes(m, 3, n.p, n.n);
    free(n.p);
    pb_tag(m, 99, 1); /* unknown fixed64 at top level */
    put_i32(m, 1);
    put_i32(m, 2);
}

static const char *write_buf(const char *name, const qp_test_buf *b) {
    const char *p = tmp_path(name);
    qp_test_must_write_file(p, b->p, b->n);
    return p;
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s/llama2c_bad", qp_test_env("QP_TMP_DIR", "test-tmp"));
    if (!qp_test_mkdir_p(g_dir)) return 1;

    /* ---- checkpoints ---- */
    const int32_t good[7] = {8, 16, 2, 2, 1, 16, 4};
    size_t nf = v0_floats(good);
    const char *ok = write_v0("ok.bin", good, nf);
    qp_model *m = NULL;
    qp_err e;
    qp_status s = read_ckpt(ok, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (m) {
        QP_CHECK_EQ_INT(m->n_tensors, 1 + 2 * 9 + 1);
        const qp_tensor *k = qp_model_find(m, "blk.1.attn_k.weight");
        QP_CHECK(k && k->ne[0] == 8 && k->ne[1] == 4);
        QP_CHECK(m->arch.tie_embeddings);
        qp_model_close(m);
        m = NULL;
    }
    QP_CHECK(qp_format_detect(ok) == QP_FORMAT_LLAMA2C);
    QP_CHECK_EQ_INT(inspect_exit(ok, NULL), 0);

    int32_t cls[7];
    memcpy(cls, good, sizeof cls);
    cls[5] = -16;
    const char *okcls = write_v0("ok_cls.bin", cls, v0_floats(cls));
    s = read_ckpt(okcls, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (m) {
        QP_CHECK(qp_model_find(m, "output.weight") != NULL && !m->arch.tie_embeddings);
        qp_model_close(m);
        m = NULL;
    }
    /* classifier sign wrong: the file carries a classifier, the header says shared */
    const char *wrongsign = write_v0("wrong_sign.bin", good, v0_floats(cls));
    EXPECT_CKPT(wrongsign, NULL, QP_ERR_CORRUPT);
    read_ckpt(wrongsign, NULL, NULL, &e);
    QP_CHECK_MSG(strstr(e.msg, "other sign") != NULL, "%s", e.msg);

    EXPECT_CKPT(write_v0("short_header.bin", good, 0), NULL, QP_ERR_CORRUPT);
    {
        qp_test_buf b = {0};
        for (int i = 0; i < 5; i++) put_i32(&b, good[i]);
        EXPECT_CKPT(write_buf("truncated_header.bin", &b), NULL, QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
    }
    const char *trunc = write_v0("truncated.bin", good, nf - 1);
    EXPECT_CKPT(trunc, NULL, QP_ERR_CORRUPT);
    read_ckpt(trunc, NULL, NULL, &e);
    char want_msg[64];
    snprintf(want_msg, sizeof want_msg, "%zu", 28 + 4 * nf);
    QP_CHECK_MSG(strstr(e.msg, want_msg) && strstr(e.msg, "truncated.bin"), "%s", e.msg);
    EXPECT_CKPT(write_v0("one_extra.bin", good, nf + 1), NULL, QP_ERR_CORRUPT);
    {
        const char *half = write_v0("half_float.bin", good, nf);
        QP_CHECK(truncate(half, (off_t)(28 + 4 * nf - 2)) == 0); /* cut inside the last float */
        EXPECT_CKPT(half, NULL, QP_ERR_CORRUPT);
    }
    /* issue 11: a truncated checkpoint is detected as llama2.c and the reader names where it
     * ends (was "not a recognised model") */
    QP_CHECK(qp_format_detect(trunc) == QP_FORMAT_LLAMA2C);
    snprintf(want_msg, sizeof want_msg, "truncated: the file ends at byte offset %zu", 28 + 4 * (nf - 1));
    QP_CHECK_MSG(strstr(e.msg, want_msg) != NULL, "%s", e.msg);
    QP_CHECK_EQ_INT(inspect_exit(trunc, NULL), 3);

    static const struct {
        int field;
        int32_t value;
        qp_status want;
    } k_hdr[] = {
        {0, 0, QP_ERR_CORRUPT},           {1, 0, QP_ERR_CORRUPT},
        {2, 0, QP_ERR_CORRUPT},           {3, 0, QP_ERR_CORRUPT},
        {4, 0, QP_ERR_CORRUPT},           {5, 0, QP_ERR_CORRUPT},
        {6, 0, QP_ERR_CORRUPT},           {0, -8, QP_ERR_CORRUPT},
        {2, -1, QP_ERR_CORRUPT},          {6, INT32_MIN, QP_ERR_CORRUPT},
        {0, INT32_MAX, QP_ERR_LIMIT},     {1, INT32_MAX, QP_ERR_LIMIT},
        {2, 1 << 20, QP_ERR_LIMIT},       {5, INT32_MIN, QP_ERR_LIMIT},
        {6, INT32_MAX, QP_ERR_LIMIT},     {3, 3, QP_ERR_CORRUPT}, /* 3 heads do not divide 8 */
        {4, 3, QP_ERR_CORRUPT},           {4, 4, QP_ERR_CORRUPT}, /* more kv heads than heads */
        {3, 8, QP_ERR_CORRUPT},           /* head size 1 is odd */
        {-1, 0, QP_ERR_CORRUPT},          /* 4 heads, 3 kv heads: 3 does not divide 4 */
    };
    for (size_t i = 0; i < sizeof k_hdr / sizeof k_hdr[0]; i++) {
        int32_t h[7];
        memcpy(h, good, sizeof h);
        if (k_hdr[i].field >= 0) h[k_hdr[i].field] = k_hdr[i].value;
        else h[3] = 4, h[4] = 3;
        char name[64];
        snprintf(name, sizeof name, "hdr_%zu.bin", i);
        EXPECT_CKPT(write_v0(name, h, nf), NULL, k_hdr[i].want);
    }
    /* absurd dims whose products overflow 64 bits if multiplied unchecked */
    {
        const int32_t h[7] = {1 << 30, 1 << 30, 1 << 30, 2, 1, -(1 << 30), 1 << 30};
        const char *p = write_v0("overflow.bin", h, 16);
        EXPECT_CKPT(p, NULL, QP_ERR_LIMIT);
        QP_CHECK(qp_format_detect(p) == QP_FORMAT_UNKNOWN);
    }
    /* "ak42" headers: v1 (fp32, 256-byte header) is read; v2 and unknown versions refused */
    {
        qp_test_buf b = {0};
        put_i32(&b, 0x616b3432);
        put_i32(&b, 1);
        for (int i = 0; i < 7; i++) put_i32(&b, good[i]);
        uint8_t shared = 1, zero[256] = {0};
        qp_test_put(&b, &shared, 1);
        qp_test_put(&b, zero, 256 - b.n);
        size_t v1f = v0_floats(good) - 2 * 4 * (8 / 2 / 2); /* v1 has no freq_cis */
        for (size_t i = 0; i < v1f; i++) qp_test_put_f32(&b, (float)i);
        const char *v1 = write_buf("v1.bin", &b);
        s = read_ckpt(v1, NULL, &m, &e);
        QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
        if (m) {
            QP_CHECK_EQ_INT(m->format_version, 1);
            /* v1 order: attention norms, ffn norms, final norm, then the embedding */
            const qp_tensor *t = qp_model_find(m, "token_embd.weight");
            QP_CHECK(t && t->offset == 256 + 4 * (2 * 8 + 2 * 8 + 8));
            qp_model_close(m);
            m = NULL;
        }
        b.p[36] = 7;
        EXPECT_CKPT(write_buf("v1_flag.bin", &b), NULL, QP_ERR_CORRUPT);
        b.p[36] = 1;
        b.n -= 4;
        EXPECT_CKPT(write_buf("v1_short.bin", &b), NULL, QP_ERR_CORRUPT);
        b.p[4] = 2;
        const char *v2 = write_buf("v2.bin", &b);
        EXPECT_CKPT(v2, NULL, QP_ERR_UNSUPPORTED);
        read_ckpt(v2, NULL, NULL, &e);
        QP_CHECK_MSG(strstr(e.msg, "version 2") != NULL, "%s", e.msg);
        QP_CHECK(qp_format_detect(v2) == QP_FORMAT_LLAMA2C);
        QP_CHECK_EQ_INT(inspect_exit(v2, NULL), 3);
        b.p[4] = 9;
        EXPECT_CKPT(write_buf("v9.bin", &b), NULL, QP_ERR_UNSUPPORTED);
        b.p[4] = 1;
        b.n = 20;
        EXPECT_CKPT(write_buf("v1_tiny.bin", &b), NULL, QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
    }

    /* ---- llama2.c tokenizer .bin ---- */
    const char *pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", " a b", "c"};
    int np = 6;
    const char *tok_ok = write_tok("tok_ok.bin", 6, pieces, np, NULL);
    s = read_vocab(qp_vocab_read_llama2c_bin, tok_ok, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (m) {
        const qp_vocab *v = &m->vocab;
        QP_CHECK_EQ_INT(v->n_tokens, 6);
        QP_CHECK(strcmp(v->tokens[1], "<s>") == 0 && strcmp(v->tokens[2], "</s>") == 0);
        QP_CHECK(strcmp(v->tokens[4], "\xe2\x96\x81" "a\xe2\x96\x81" "b") == 0);
        QP_CHECK_EQ_INT(v->token_lens[4], 8);
        QP_CHECK(v->types[0] == QP_TOKTYPE_UNKNOWN && v->types[2] == QP_TOKTYPE_CONTROL &&
                 v->types[3] == QP_TOKTYPE_BYTE && v->types[5] == QP_TOKTYPE_NORMAL);
        QP_CHECK(v->scores[5] == -5.0f);
        qp_model_close(m);
        m = NULL;
    }
    /* a 16-token tokenizer with the 16-vocab checkpoint is accepted; 6 tokens is a mismatch */
    EXPECT_CKPT(ok, tok_ok, QP_ERR_CORRUPT);
    read_ckpt(ok, tok_ok, NULL, &e);
    QP_CHECK_MSG(strstr(e.msg, "6 tokens") && strstr(e.msg, "16"), "%s", e.msg);
    QP_CHECK_EQ_INT(inspect_exit(ok, tok_ok), 3);
    {
        const char *p16[16];
        for (int i = 0; i < 16; i++) p16[i] = i < np ? pieces[i] : "x";
        const char *t16 = write_tok("tok16.bin", 6, p16, 16, NULL);
        EXPECT_CKPT(ok, t16, QP_OK);
        EXPECT_CKPT(ok, tmp_path("missing_tokenizer.bin"), QP_ERR_IO);
    }
    {
        int32_t lens[6] = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, 50};
        EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_past_eof.bin", 60, pieces, np, lens),
                     QP_ERR_CORRUPT);
        lens[5] = -1;
        EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_neg_len.bin", 6, pieces, np, lens),
                     QP_ERR_CORRUPT);
        lens[5] = 7; /* longer than max_token_length 6 */
        EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_over_max.bin", 6, pieces, np, lens),
                     QP_ERR_CORRUPT);
    }
    EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_huge_max.bin", INT32_MAX, pieces, np, NULL),
                 QP_ERR_LIMIT);
    EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_zero_max.bin", 0, pieces, np, NULL),
                 QP_ERR_CORRUPT);
    EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_neg_max.bin", -5, pieces, np, NULL),
                 QP_ERR_CORRUPT);
    EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_tok("tok_empty.bin", 6, pieces, 0, NULL),
                 QP_ERR_CORRUPT);
    {
        qp_test_buf b = {0};
        put_i32(&b, 6);
        qp_test_put_f32(&b, 1.0f);
        qp_test_put(&b, "\x01\x00", 2); /* record header cut after 6 of 8 bytes */
        EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_buf("tok_cut_record.bin", &b), QP_ERR_CORRUPT);
        b.n = 2;
        EXPECT_VOCAB(qp_vocab_read_llama2c_bin, write_buf("tok_2bytes.bin", &b), QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
    }
    EXPECT_VOCAB(qp_vocab_read_llama2c_bin, tmp_path("no_such_tokenizer.bin"), QP_ERR_IO);

    /* ---- SentencePiece tokenizer.model ---- */
    qp_test_buf mb = {0};
    valid_model(&mb);
    const char *model_ok = write_buf("ok.model", &mb);
    s = read_vocab(qp_vocab_read_spm_model, model_ok, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (m) {
        const qp_vocab *v = &m->vocab;
        QP_CHECK_EQ_INT(v->n_tokens, 6);
        QP_CHECK(v->types[0] == QP_TOKTYPE_UNKNOWN && v->types[1] == QP_TOKTYPE_CONTROL &&
                 v->types[3] == QP_TOKTYPE_BYTE && v->types[4] == QP_TOKTYPE_NORMAL &&
                 v->types[5] == QP_TOKTYPE_NORMAL);
        QP_CHECK(strcmp(v->tokens[4], "\xe2\x96\x81" "a") == 0 && v->scores[4] == -1.5f);
        QP_CHECK_EQ_INT(v->pad_id, -1);
        QP_CHECK_EQ_INT(v->bos_id, 1);
        const qp_meta *md = qp_model_meta(m, "sentencepiece.add_dummy_prefix");
        QP_CHECK(md && md->type == QP_META_BOOL && !md->v.b);
        md = qp_model_meta(m, "sentencepiece.model_type");
        QP_CHECK(md && md->v.u == 2);
        qp_model_close(m);
        m = NULL;
    }
    /* with a 6-token checkpoint the .model is accepted through qp_model_open */
    {
        int32_t h6[7];
        memcpy(h6, good, sizeof h6);
        h6[5] = 6;
        const char *c6 = write_v0("vocab6.bin", h6, v0_floats(h6));
        EXPECT_CKPT(c6, model_ok, QP_OK);
        QP_CHECK_EQ_INT(inspect_exit(c6, model_ok), 0);
    }
    {
        qp_test_buf b = {0};
        qp_test_put(&b, mb.p, mb.n);
        uint8_t c = 0x80;
        qp_test_put(&b, &c, 1); /* a tag varint that never ends */
        const char *p = write_buf("trunc_varint.model", &b);
        EXPECT_VOCAB(qp_vocab_read_spm_model, p, QP_ERR_CORRUPT);
        QP_CHECK_EQ_INT(inspect_exit(ok, p), 3);
        qp_test_buf_free(&b);
    }
    {
        qp_test_buf b = {0};
        qp_test_put(&b, mb.p, mb.n);
        pb_tag(&b, 1, 2);
        put_varint(&b, 1000); /* length past the end */
        qp_test_put(&b, "xx", 2);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("len_past_end.model", &b), QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
    }
    {
        /* a piece whose inner length runs past the piece (but not past the file) */
        qp_test_buf b = {0}, p = {0};
        pb_tag(&p, 1, 2);
        put_varint(&p, 5);
        qp_test_put(&p, "ab", 2);
        pb_bytes(&b, 1, p.p, p.n);
        qp_test_put(&b, mb.p, mb.n);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("len_past_msg.model", &b), QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
        free(p.p);
    }
    {
        qp_test_buf b = {0};
        qp_test_put(&b, mb.p, mb.n);
        pb_tag(&b, 7, 3); /* start-group */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("wire3.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 7, 6);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("wire6.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 1, 0); /* pieces as a varint */
        put_varint(&b, 5);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("wrong_wire.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 0, 0); /* field number 0 */
        put_varint(&b, 5);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("field0.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 99, 0);
        uint8_t eleven[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
        qp_test_put(&b, eleven, 11);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("varint11.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 99, 0);
        uint8_t ten[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
        qp_test_put(&b, ten, 10); /* 10 bytes but more than 64 bits */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("varint65.model", &b), QP_ERR_CORRUPT);
        b.n = mb.n;
        pb_tag(&b, 99, 5);
        qp_test_put(&b, "ab", 2); /* fixed32 cut short */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("fixed32_cut.model", &b), QP_ERR_CORRUPT);
        qp_test_buf_free(&b);
    }
    {
        qp_test_buf b = {0};
        append_piece(&b, "<unk>", 0.0f, 9); /* type 9 does not exist */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("bad_type.model", &b), QP_ERR_CORRUPT);
        b.n = 0;
        pb_bytes(&b, 1, "", 0); /* a piece without text */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("no_text.model", &b), QP_ERR_CORRUPT);
        b.n = 0;
        pb_bytes(&b, 3, "", 0); /* no pieces at all */
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("no_pieces.model", &b), QP_ERR_CORRUPT);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("empty.model", &(qp_test_buf){0}), QP_ERR_CORRUPT);
        b.n = 0;
        append_piece(&b, "<unk>", 0.0f, 2);
        qp_test_buf t = {0};
        pb_tag(&t, 41, 0);
        put_varint(&t, 5); /* bos_id 5 of 1 piece */
        pb_bytes(&b, 2, t.p, t.n);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("bos_range.model", &b), QP_ERR_CORRUPT);
        t.n = 0;
        b.n = 0;
        append_piece(&b, "<unk>", 0.0f, 2);
        pb_tag(&t, 3, 0);
        put_varint(&t, 3); /* WORD model */
        pb_bytes(&b, 2, t.p, t.n);
        EXPECT_VOCAB(qp_vocab_read_spm_model, write_buf("word.model", &b), QP_ERR_UNSUPPORTED);
        free(t.p);
        qp_test_buf_free(&b);
    }
    free(mb.p);

    /* an HF tokenizer.json (real phi-3 file: 32000 Llama 2 pieces + 11 added tokens) goes to the
     * HF tokenizer reader; its token count must match the checkpoint's vocab_size */
    {
        char tj[1200];
        snprintf(tj, sizeof tj, "%s/hf-tokenizers/phi-3/tokenizer.json", qp_test_real_dir());
        if (qp_path_exists(tj)) {
            int32_t hv[7] = {2, 2, 1, 1, 1, 32011, 1};
            const char *cv = write_v0("vocab32011.bin", hv, v0_floats(hv));
            s = read_ckpt(cv, tj, &m, &e);
            QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
            if (m) {
                QP_CHECK_EQ_INT(m->vocab.n_tokens, 32011);
                QP_CHECK(m->vocab.n_tokens > 1 && strcmp(m->vocab.tokens[1], "<s>") == 0);
                qp_model_close(m);
                m = NULL;
            }
            EXPECT_CKPT(ok, tj, QP_ERR_CORRUPT);
        } else {
            fprintf(stderr, "note: %s absent; tokenizer.json case not run\n", tj);
        }
    }
    free_paths();
    return qp_test_finish();
}
