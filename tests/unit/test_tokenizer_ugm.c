/* SentencePiece unigram on a small in-memory vocabulary: the best-score segmentation and the
 * unknown runs worked out by hand from llama.cpp's llm_tokenizer_ugm definition, and every way a
 * precompiled_charsmap can be malformed: a clear CORRUPT status from qp_tokenizer_new or
 * qp_tokenizer_encode, never a read outside the blob (run under ASan in CI). The comparison with
 * llama.cpp itself is peer.tokenizer_ugm_llama. */
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

#define U2581 "\xE2\x96\x81"

static char *g_tok[8] = {"<unk>", U2581, U2581 "a", "a", "b", "ab", "<x>", "zz"};
static float g_sc[8] = {0, -1.0f, -1.0f, -2.0f, -2.0f, -1.5f, 0, -0.5f};
static int32_t g_ty[8] = {QP_TOKTYPE_UNKNOWN, 1, 1, 1, 1, 1, QP_TOKTYPE_USER_DEFINED, QP_TOKTYPE_UNUSED};

static qp_vocab base_vocab(void) {
    qp_vocab v = {.model = QP_TOK_UGM, .n_tokens = 8, .tokens = g_tok, .scores = g_sc, .types = g_ty,
                  .bos_id = -1, .eos_id = -1, .unk_id = 0, .pad_id = -1};
    return v;
}

static bool encode_is(const qp_vocab *v, const char *text, const int32_t *want, int64_t n_want) {
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    int32_t *ids = NULL;
    int64_t n = -1;
    bool ok = qp_tokenizer_new(v, &t, &e) == QP_OK &&
              qp_tokenizer_encode(t, text, strlen(text), false, false, &ids, &n, &e) == QP_OK &&
              n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * 4) == 0);
    if (!ok) {
        fprintf(stderr, "'%s': %s; got %lld ids:", text, e.msg, (long long)n);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    qp_free(ids);
    qp_tokenizer_free(t);
    return ok;
}

static void segmentation(void) {
    qp_vocab v = base_vocab();
    /* "▁ab": ▁ + ab = -2.5 beats ▁a + b = -3 and ▁ + a + b = -5 */
    QP_CHECK(encode_is(&v, "ab", (int32_t[]){1, 5}, 2));
    /* no dummy prefix: ab (-1.5) beats a + b (-4) */
    v.no_space_prefix = true;
    QP_CHECK(encode_is(&v, "ab", (int32_t[]){5}, 1));
    /* unknown code points: unk = lowest NORMAL score (-2) - 10; a run of them is one <unk> */
    QP_CHECK(encode_is(&v, "a\xC3\xA9\xC3\xA9" "b", (int32_t[]){3, 0, 4}, 3));
    /* unused pieces take part; user-defined text is split out before the model runs */
    QP_CHECK(encode_is(&v, "zz<x>a", (int32_t[]){7, 6, 3}, 3));
    /* spaces: each one a U+2581 ... */
    QP_CHECK(encode_is(&v, "a  b", (int32_t[]){3, 1, 1, 4}, 4));
    /* ... or, with remove_extra_whitespaces, one before each word and none at the ends */
    v.remove_extra_spaces = true;
    QP_CHECK(encode_is(&v, "  a  b  ", (int32_t[]){2, 1, 4}, 3));
    /* decoding: the first piece's leading space goes when the dummy prefix is on; unk is empty */
    v.no_space_prefix = false;
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    QP_CHECK(qp_tokenizer_new(&v, &t, &e) == QP_OK);
    char buf[8];
    size_t len = 0;
    QP_CHECK(t && qp_tokenizer_decode_piece(t, -1, 2, buf, sizeof buf, &len, &e) == QP_OK && len == 1 && buf[0] == 'a');
    QP_CHECK(t && qp_tokenizer_decode_piece(t, 2, 2, buf, sizeof buf, &len, &e) == QP_OK && len == 2);
    QP_CHECK(t && qp_tokenizer_decode_piece(t, 2, 0, buf, sizeof buf, &len, &e) == QP_OK && len == 0);
    qp_tokenizer_free(t);
}

/* A charsmap blob: u32 size of the units, the units, the replacement strings. */
static size_t blob(uint8_t *b, uint32_t declared, const uint32_t *units, size_t n_units, const char *strings,
                   size_t sl) {
    qp_store_u32le(b, declared);
    for (size_t i = 0; i < n_units; i++) qp_store_u32le(b + 4 + 4 * i, units[i]);
    memcpy(b + 4 + 4 * n_units, strings, sl);
    return 4 + 4 * n_units + sl;
}

static void bad_charsmap(const char *what, const uint8_t *b, size_t n, bool at_new) {
    qp_vocab v = base_vocab();
    v.charsmap = b;
    v.charsmap_len = n;
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    qp_status s = qp_tokenizer_new(&v, &t, &e);
    if (!at_new && s == QP_OK) {
        int32_t *ids = NULL;
        int64_t k = 0;
        s = qp_tokenizer_encode(t, "ab", 2, false, false, &ids, &k, &e);
        qp_free(ids);
    }
    QP_CHECK_MSG(s == QP_ERR_CORRUPT && strstr(e.msg, "precompiled_charsmap"), "%s: status %d '%s'", what, (int)s,
                 e.msg);
    qp_tokenizer_free(t);
}

static void charsmaps(void) {
    uint8_t b[4096];
    /* a valid one: root (offset 256), 'a' at 256 ^ 'a' leaf -> base 512, value at 512 -> "b" */
    uint32_t u[1024] = {0};
    u[0] = 256u << 10;
    u[256 ^ 'a'] = ((uint32_t)((256 ^ 'a') ^ 512) << 10) | (1u << 8) | 'a';
    u[512] = 0x80000000u | 0;
    size_t n = blob(b, 768 * 4, u, 768, "b", 2);
    qp_vocab v = base_vocab();
    v.charsmap = b;
    v.charsmap_len = n;
    QP_CHECK(encode_is(&v, "ab", (int32_t[]){1, 4, 4}, 3)); /* "a" -> "b": ▁ b b */
    bad_charsmap("3 bytes", b, 3, true);
    bad_charsmap("size past the end", b, blob(b, 800 * 4, u, 768, "b", 2), true);
    bad_charsmap("nothing after the units", b, blob(b, 768 * 4, u, 768, "", 0), true);
    u[0] = 4096u << 10; /* root's children outside the units */
    bad_charsmap("child index out of range", b, blob(b, 768 * 4, u, 768, "b", 2), false);
    u[0] = 256u << 10;
    u[512] = 0x80000000u | 7;
    bad_charsmap("replacement offset out of range", b, blob(b, 768 * 4, u, 768, "b", 2), false);
    u[512] = 0x80000000u | 0;
    bad_charsmap("replacement without NUL", b, blob(b, 768 * 4, u, 768, "bb", 2), false);
}

int main(void) {
    segmentation();
    charsmaps();
    return qp_test_finish();
}
