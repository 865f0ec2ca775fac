/* SentencePiece BPE on small in-memory vocabularies: score order and leftmost ties, the dummy
 * prefix, byte fallback, special tokens, invalid UTF-8, decoding, and allocation failures. The
 * expected ids follow from the algorithm's definition (llama.cpp llm_tokenizer_spm, llama2.c
 * encode) applied by hand to these vocabularies. */
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

#define MAXT 400
typedef struct test_vocab {
    qp_vocab v;
    char *tok[MAXT];
    uint32_t len[MAXT];
    float sc[MAXT];
    int32_t ty[MAXT];
    char store[MAXT][16];
} test_vocab;

static int32_t add(test_vocab *t, const char *s, float score, int32_t type) {
    int32_t id = (int32_t)t->v.n_tokens++;
    snprintf(t->store[id], sizeof t->store[id], "%s", s);
    t->tok[id] = t->store[id];
    t->len[id] = (uint32_t)strlen(s);
    t->sc[id] = score;
    t->ty[id] = type;
    return id;
}

/* <unk> <s> </s> <0x00>..<0xFF>, then the pieces given (text, score) */
static void init_vocab(test_vocab *t) {
    memset(t, 0, sizeof *t);
    t->v.model = QP_TOK_SPM;
    t->v.tokens = t->tok;
    t->v.token_lens = t->len;
    t->v.scores = t->sc;
    t->v.types = t->ty;
    t->v.bos_id = 1;
    t->v.eos_id = 2;
    t->v.unk_id = 0;
    t->v.pad_id = -1;
    t->v.add_bos = true;
    add(t, "<unk>", 0, QP_TOKTYPE_UNKNOWN);
    add(t, "<s>", 0, QP_TOKTYPE_CONTROL);
    add(t, "</s>", 0, QP_TOKTYPE_CONTROL);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(t, s, 0, QP_TOKTYPE_BYTE);
    }
}

#define U2581 "\xE2\x96\x81"

static bool encode_is(const qp_tokenizer *tk, const char *text, size_t len, bool bos, bool special,
                      const int32_t *want, int64_t n_want) {
    int32_t *ids = NULL;
    int64_t n = -1;
    qp_err e = {0};
    if (qp_tokenizer_encode(tk, text, len, bos, special, &ids, &n, &e) != QP_OK) {
        fprintf(stderr, "encode failed: %s\n", e.msg);
        return false;
    }
    bool same = n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!same) {
        fprintf(stderr, "encode '%.*s': got", (int)len, text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    qp_free(ids);
    return same;
}
#define ENC(tk, s, bos, sp, ...)                                                                 \
    do {                                                                                         \
        const int32_t w_[] = {__VA_ARGS__};                                                      \
        QP_CHECK_MSG(encode_is(tk, s, strlen(s), bos, sp, w_, (int64_t)(sizeof w_ / sizeof w_[0])), \
                     "'%s'", s);                                                                 \
    } while (0)

/* The length of id's piece after prev (decode_piece must succeed). */
static size_t piece_len(const qp_tokenizer *tk, int32_t prev, int32_t id, char *buf, size_t cap) {
    size_t n = SIZE_MAX;
    QP_CHECK(qp_tokenizer_decode_piece(tk, prev, id, buf, cap, &n, NULL) == QP_OK);
    return n;
}

int main(void) {
    static test_vocab tv;
    qp_err e = {0};
    qp_tokenizer *tk = NULL;

    /* score order: ab (-1) beats bc (-2); "abc" is not a piece */
    init_vocab(&tv);
    int32_t sp = add(&tv, U2581, -10, QP_TOKTYPE_NORMAL);
    int32_t a = add(&tv, "a", -20, QP_TOKTYPE_NORMAL), b = add(&tv, "b", -20, QP_TOKTYPE_NORMAL);
    int32_t c = add(&tv, "c", -20, QP_TOKTYPE_NORMAL);
    int32_t ab = add(&tv, "ab", -1, QP_TOKTYPE_NORMAL), bc = add(&tv, "bc", -2, QP_TOKTYPE_NORMAL);
    QP_CHECK(qp_tokenizer_new(&tv.v, &tk, &e) == QP_OK);
    QP_CHECK_EQ_INT(qp_tokenizer_n_vocab(tk), tv.v.n_tokens);
    ENC(tk, "abc", false, false, sp, ab, c);
    ENC(tk, "abc", true, false, 1, sp, ab, c);
    ENC(tk, "bcab", false, false, sp, bc, ab);
    ENC(tk, "a b", false, false, sp, a, sp, b); /* spaces become U+2581 */
    /* empty text: nothing, or BOS alone */
    int32_t *ids = NULL;
    int64_t n = -1;
    QP_CHECK(qp_tokenizer_encode(tk, "", 0, false, false, &ids, &n, &e) == QP_OK && n == 0);
    qp_free(ids);
    ENC(tk, "", true, false, 1);
    /* byte fallback: é = C3 A9 is no piece */
    ENC(tk, "\xC3\xA9", false, false, sp, 3 + 0xC3, 3 + 0xA9);
    /* invalid UTF-8: each ill-formed sequence is read as U+FFFD (EF BF BD) */
    ENC(tk, "a\xFF", false, false, sp, a, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD);
    ENC(tk, "\xE2\x82", false, false, sp, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD);
    /* NUL bytes inside the text are text */
    {
        const int32_t w[] = {sp, a, 3 + 0x00, b};
        QP_CHECK(encode_is(tk, "a\0b", 3, false, false, w, 4));
    }
    /* special tokens: only with parse_special; the text after one gets a dummy prefix again */
    ENC(tk, "a<s>b", false, true, sp, a, 1, sp, b);
    ENC(tk, "a</s>", false, false, sp, a, 3 + '<', 3 + '/', 3 + 's', 3 + '>');
    /* decode */
    char buf[16];
    QP_CHECK_EQ_INT(piece_len(tk, -1, sp, buf, sizeof buf), 1);
    QP_CHECK(buf[0] == ' ');
    QP_CHECK_EQ_INT(piece_len(tk, 1, sp, buf, sizeof buf), 0); /* after BOS */
    QP_CHECK_EQ_INT(piece_len(tk, -1, 3 + 0x0A, buf, sizeof buf), 1);
    QP_CHECK(buf[0] == '\n');
    QP_CHECK_EQ_INT(piece_len(tk, -1, 1, buf, sizeof buf), 0);  /* control */
    QP_CHECK_EQ_INT(piece_len(tk, -1, ab, buf, sizeof buf), 2);
    QP_CHECK(memcmp(buf, "ab", 2) == 0);
    QP_CHECK_EQ_INT(piece_len(tk, -1, ab, buf, 1), 2);         /* truncated */
    QP_CHECK_EQ_INT(piece_len(tk, -1, ab, NULL, 0), 2);        /* size query */
    size_t pn = 7;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_tokenizer_decode_piece(tk, -1, -1, buf, sizeof buf, &pn, &e), QP_ERR_ARG);
    QP_CHECK_EQ_INT(qp_tokenizer_decode_piece(tk, -1, (int32_t)tv.v.n_tokens, buf, sizeof buf, &pn, &e),
                    QP_ERR_ARG);
    QP_CHECK(pn == 7 && strstr(e.msg, "token id -1") != NULL); /* *len untouched; the first id named */
    qp_tokenizer_free(tk);

    /* the opposite scores: bc first */
    tv.sc[ab] = -2;
    tv.sc[bc] = -1;
    QP_CHECK(qp_tokenizer_new(&tv.v, &tk, &e) == QP_OK);
    ENC(tk, "abc", false, false, sp, a, bc);
    qp_tokenizer_free(tk);
    /* equal scores: the leftmost pair */
    tv.sc[ab] = tv.sc[bc] = -1;
    QP_CHECK(qp_tokenizer_new(&tv.v, &tk, &e) == QP_OK);
    ENC(tk, "abc", false, false, sp, ab, c);
    qp_tokenizer_free(tk);
    /* merges continue through longer pieces: a+b -> ab, ab+c -> abc, U+2581+abc */
    int32_t abc = add(&tv, "abc", -3, QP_TOKTYPE_NORMAL);
    int32_t sabc = add(&tv, U2581 "abc", -4, QP_TOKTYPE_NORMAL);
    QP_CHECK(qp_tokenizer_new(&tv.v, &tk, &e) == QP_OK);
    ENC(tk, "abc", false, false, sabc);
    ENC(tk, "abcabc", false, false, sabc, abc);
    qp_tokenizer_free(tk);

    /* no byte tokens and no unk: unknown characters are dropped, nothing crashes */
    test_vocab *t2 = &tv;
    memset(t2, 0, sizeof *t2);
    t2->v.model = QP_TOK_SPM;
    t2->v.tokens = t2->tok;
    t2->v.token_lens = t2->len;
    t2->v.bos_id = t2->v.eos_id = t2->v.unk_id = t2->v.pad_id = -1;
    int32_t x = add(t2, "x", 0, QP_TOKTYPE_UNDEFINED);
    QP_CHECK(qp_tokenizer_new(&t2->v, &tk, &e) == QP_OK);
    ENC(tk, "x", true, true, x); /* no BOS id: none added; U+2581 has no piece */
    qp_tokenizer_free(tk);

    /* bad vocabularies */
    qp_vocab empty = {.model = QP_TOK_SPM, .bos_id = -1, .eos_id = -1, .unk_id = -1, .pad_id = -1};
    qp_err_clear(&e);
    QP_CHECK(qp_tokenizer_new(&empty, &tk, &e) == QP_ERR_CORRUPT);
    empty.model = QP_TOK_NONE;
    qp_err_clear(&e);
    QP_CHECK(qp_tokenizer_new(&empty, &tk, &e) == QP_ERR_UNSUPPORTED);
    qp_err_clear(&e);
    QP_CHECK(qp_tokenizer_new(NULL, &tk, &e) == QP_ERR_ARG);
    qp_tokenizer_free(NULL);

    /* allocation failures anywhere: a status, never a crash or a leak (ASan build) */
    init_vocab(&tv);
    add(&tv, U2581, -10, QP_TOKTYPE_NORMAL);
    add(&tv, "ab", -1, QP_TOKTYPE_NORMAL);
    int nomem = 0, ok = 0;
    for (long k = 0; k < 40; k++) {
        qp_err_clear(&e);
        qp_alloc_fail_after(k);
        qp_tokenizer *t3 = NULL;
        qp_status s = qp_tokenizer_new(&tv.v, &t3, &e);
        if (s == QP_OK) {
            int32_t *i3 = NULL;
            int64_t n3 = 0;
            s = qp_tokenizer_encode(t3, "ab ab \xFF ab", 10, true, true, &i3, &n3, &e);
            if (s == QP_OK) qp_free(i3);
            qp_tokenizer_free(t3);
        }
        qp_alloc_fail_after(-1);
        if (s == QP_OK) ok++;
        else if (s == QP_ERR_NOMEM) nomem++;
        else QP_CHECK_MSG(false, "unexpected status %d", (int)s);
    }
    QP_CHECK(nomem > 0 && ok > 0);
    return qp_test_finish();
}
