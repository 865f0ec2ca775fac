/* Generation sessions (include/quantpack/generate.h) on the real stories260K GGUF, checked
 * against an independent path: a second runtime run token by token with argmax (the llama2.c
 * loop), and the tokenizer's pieces. Covers prefix reuse across turns, stop strings (spanning
 * tokens, held prefixes released), max_tokens, the context end, cancel, a callback stop, pieces
 * that are whole UTF-8 (checked with the C library's mbrtowc), end_ids and the error statuses. */
#include <locale.h>
#include <signal.h>
#include <wchar.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/generate.h"

typedef struct collect {
    int32_t ids[1024];
    int n;
    char text[16384];
    size_t len;
    int pieces_bad_utf8;
    int stop_after;                   /* callback returns false after this many tokens (0: never) */
    volatile sig_atomic_t *cancel_at; /* set after cancel_n tokens */
    int cancel_n;
} collect;

static bool whole_utf8(const char *s, size_t n) {
    mbstate_t st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n;) {
        wchar_t w;
        size_t k = mbrtowc(&w, s + i, n - i, &st);
        if (k == (size_t)-1 || k == (size_t)-2) return false;
        i += k ? k : 1;
    }
    return true;
}

static bool on_token(void *arg, int32_t token, const char *text, size_t len) {
    collect *c = arg;
    if (token >= 0 && c->n < 1024) c->ids[c->n++] = token;
    if (!whole_utf8(text, len)) c->pieces_bad_utf8++;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
        c->text[c->len] = '\0';
    }
    if (c->cancel_at && c->n == c->cancel_n) *c->cancel_at = 1;
    return !(c->stop_after && c->n >= c->stop_after);
}

/* The reference: greedy token by token on its own runtime, until EOS or n tokens. */
static int greedy_ref(const qp_model *m, const int32_t *prompt, int64_t n_prompt, int n, int32_t eos,
                      int32_t *out) {
    qp_runtime *rt = NULL;
    qp_runtime_opts ro = {.n_threads = 1, .n_ctx = 256};
    if (qp_runtime_new(m, &ro, &rt, NULL) != QP_OK) return -1;
    float *logits = NULL;
    int64_t pos = 0;
    for (; pos < n_prompt; pos++)
        if (qp_runtime_forward(rt, prompt[pos], pos, &logits, NULL) != QP_OK) return -1;
    int k = 0;
    while (k < n) {
        int32_t t = qp_logits_argmax(logits, qp_runtime_get_config(rt)->vocab);
        if (t == eos) break;
        out[k++] = t;
        if (qp_runtime_forward(rt, t, pos++, &logits, NULL) != QP_OK) return -1;
    }
    qp_runtime_free(rt);
    return k;
}

static qp_gen_result gen(qp_gen_session *s, const int32_t *p, int64_t n, int64_t max_tokens,
                         const char *const *stop, size_t n_stop, collect *c) {
    qp_gen_params gp;
    qp_gen_params_default(&gp);
    gp.max_tokens = max_tokens;
    gp.stop = stop;
    gp.n_stop = n_stop;
    gp.on_token = on_token;
    gp.arg = c;
    gp.cancel = c->cancel_at;
    qp_gen_result r;
    memset(&r, 0, sizeof r);
    qp_err e = {0};
    qp_status st = qp_gen_generate(s, p, n, &gp, &r, &e);
    QP_CHECK_MSG(st == QP_OK, "%s", e.msg);
    return r;
}

int main(void) {
    setlocale(LC_CTYPE, "C.UTF-8");
    char path[1024];
    qp_test_path(path, sizeof path, qp_test_real_dir(), "stories260K.gguf");
    qp_model *m = NULL;
    if (qp_model_open(path, NULL, &m, NULL) != QP_OK) QP_SKIP("%s not readable", path);
    qp_gen_session *s = NULL;
    qp_runtime_opts ro = {.n_threads = 1, .n_ctx = 256};
    qp_err e = {0};
    QP_CHECK(qp_gen_session_new(m, &ro, &s, &e) == QP_OK);
    if (!s) return qp_test_finish();
    const int32_t eos = m->vocab.eos_id;
    QP_CHECK(qp_gen_is_end_token(s, eos));

    int32_t *p1 = NULL;
    int64_t n1 = 0;
    const char *text1 = "Once upon a time";
    QP_CHECK(qp_gen_tokenize(s, text1, strlen(text1), true, false, &p1, &n1, &e) == QP_OK);
    QP_CHECK(n1 > 2 && p1[0] == m->vocab.bos_id);

    /* 1. greedy equals the token-by-token reference; text equals the pieces */
    collect c1 = {0};
    qp_gen_result r = gen(s, p1, n1, 40, NULL, 0, &c1);
    int32_t ref[64];
    int nref = greedy_ref(m, p1, n1, 40, eos, ref);
    QP_CHECK_EQ_INT(c1.n, nref);
    QP_CHECK(nref > 0 && memcmp(c1.ids, ref, (size_t)nref * sizeof *ref) == 0);
    QP_CHECK_EQ_INT(r.stop, nref == 40 ? QP_GEN_STOP_MAX_TOKENS : QP_GEN_STOP_EOS);
    QP_CHECK_EQ_INT(r.n_generated, c1.n);
    QP_CHECK_EQ_INT(r.n_prompt, n1);
    QP_CHECK_EQ_INT(r.n_reused, 0);
    char pieces[4096];
    size_t pl = 0;
    for (int i = 0; i < c1.n; i++) {
        size_t k = 0;
        int32_t prev = i ? c1.ids[i - 1] : p1[n1 - 1];
        QP_CHECK(qp_tokenizer_decode_piece(qp_gen_session_tokenizer(s), prev, c1.ids[i], pieces + pl,
                                           sizeof pieces - pl, &k, NULL) == QP_OK);
        pl += k;
    }
    QP_CHECK_MSG(pl == c1.len && memcmp(pieces, c1.text, pl) == 0, "'%.*s' vs '%s'", (int)pl, pieces,
                 c1.text);
    printf("greedy: %s\n", c1.text);

    /* 2. the next turn reuses the cache: prompt + reply + new text runs only the new tokens */
    int32_t p2[256];
    int64_t n2 = 0;
    memcpy(p2, p1, (size_t)n1 * sizeof *p1);
    n2 = n1;
    memcpy(p2 + n2, c1.ids, (size_t)c1.n * sizeof *p1);
    n2 += c1.n;
    int32_t *more = NULL;
    int64_t n_more = 0;
    QP_CHECK(qp_gen_tokenize(s, " The dog said", 13, false, false, &more, &n_more, &e) == QP_OK);
    memcpy(p2 + n2, more, (size_t)n_more * sizeof *more);
    n2 += n_more;
    collect c2 = {0};
    r = gen(s, p2, n2, 20, NULL, 0, &c2);
    QP_CHECK_EQ_INT(r.n_reused, n1 + c1.n - 1); /* the reply's last token was never run */
    nref = greedy_ref(m, p2, n2, 20, eos, ref);
    QP_CHECK(c2.n == nref && memcmp(c2.ids, ref, (size_t)nref * sizeof *ref) == 0);

    /* 3. stop strings: one spanning tokens cuts the text before it; a prefix that never
     * completes is released at the end */
    QP_CHECK(c1.len > 24);
    char stop_a[9];
    memcpy(stop_a, c1.text + 11, 8);
    stop_a[8] = '\0';
    const char *stops[] = {"", stop_a};
    collect c3 = {0};
    r = gen(s, p1, n1, 40, stops, 2, &c3);
    QP_CHECK_EQ_INT(r.n_reused, n1 - 1);
    QP_CHECK_EQ_INT(r.stop, QP_GEN_STOP_STRING);
    size_t cut = (size_t)(strstr(c1.text, stop_a) - c1.text);
    QP_CHECK_MSG(c3.len == cut && memcmp(c3.text, c1.text, cut) == 0, "'%s' stop '%s'", c3.text, stop_a);
    char stop_b[64];
    snprintf(stop_b, sizeof stop_b, "%.*s@@", (int)(c1.len < 10 ? c1.len : 10), c1.text + c1.len - 10);
    const char *stops_b[] = {stop_b};
    collect c4 = {0};
    r = gen(s, p1, n1, 40, stops_b, 1, &c4);
    QP_CHECK(c4.len == c1.len && strcmp(c4.text, c1.text) == 0);

    /* 4. max_tokens 0 and 5 */
    collect c5 = {0};
    r = gen(s, p1, n1, 0, NULL, 0, &c5);
    QP_CHECK(r.stop == QP_GEN_STOP_MAX_TOKENS && r.n_generated == 0 && c5.n == 0);
    r = gen(s, p1, n1, 5, NULL, 0, &c5);
    QP_CHECK(r.stop == QP_GEN_STOP_MAX_TOKENS && r.n_generated == 5 && c5.n == 5);

    /* 5. cancel after 3 tokens, callback stop after 2 */
    volatile sig_atomic_t flag = 0;
    collect c6 = {.cancel_at = &flag, .cancel_n = 3};
    r = gen(s, p1, n1, 40, NULL, 0, &c6);
    QP_CHECK(r.stop == QP_GEN_STOP_CANCELLED && r.n_generated == 3);
    collect c7 = {.stop_after = 2};
    r = gen(s, p1, n1, 40, NULL, 0, &c7);
    QP_CHECK(r.stop == QP_GEN_STOP_CALLBACK && r.n_generated == 2);

    /* 6. errors: too long, outside the vocabulary, empty; the session still works after */
    int32_t big[300];
    for (int i = 0; i < 300; i++) big[i] = p1[i % n1];
    qp_gen_params gp;
    qp_gen_params_default(&gp);
    qp_err e1 = {0}, e2 = {0}, e3 = {0}; /* a qp_err keeps its first failure */
    QP_CHECK_EQ_INT(qp_gen_generate(s, big, 300, &gp, NULL, &e1), QP_ERR_LIMIT);
    int32_t bad[2] = {1, 999999};
    QP_CHECK_EQ_INT(qp_gen_generate(s, bad, 2, &gp, NULL, &e2), QP_ERR_ARG);
    QP_CHECK(strstr(e2.msg, "999999") != NULL);
    QP_CHECK_EQ_INT(qp_gen_generate(s, p1, 0, &gp, NULL, &e3), QP_ERR_ARG);
    collect c8 = {0};
    r = gen(s, p1, n1, 40, NULL, 0, &c8);
    QP_CHECK(c8.len == c1.len && strcmp(c8.text, c1.text) == 0);

    /* 7. the context end: greedy until it is full (ctx 256, EOS off by a huge prompt repeat) */
    collect c9 = {0};
    r = gen(s, big, 250, -1, NULL, 0, &c9);
    int64_t n_ctx_ids = 0;
    qp_gen_session_tokens(s, &n_ctx_ids);
    QP_CHECK(r.stop == QP_GEN_STOP_CONTEXT || r.stop == QP_GEN_STOP_EOS);
    printf("context end: stopped %s after %lld tokens\n", qp_gen_stop_name(r.stop), (long long)r.n_generated);
    if (r.stop == QP_GEN_STOP_CONTEXT) QP_CHECK(n_ctx_ids == 256 && r.n_generated == 256 - 250 + 1);

    /* 8. hot sampling over a vocabulary with byte tokens: every piece is whole UTF-8 */
    collect c10 = {0};
    qp_gen_params_default(&gp);
    gp.sampler.temperature = 3.0f;
    gp.sampler.seed = 11;
    gp.max_tokens = 200;
    gp.on_token = on_token;
    gp.arg = &c10;
    qp_gen_session_reset(s);
    QP_CHECK(qp_gen_generate(s, p1, n1, &gp, &r, &e) == QP_OK);
    QP_CHECK_EQ_INT(c10.pieces_bad_utf8, 0);
    size_t multi = 0;
    for (size_t i = 0; i < c10.len; i++) multi += (unsigned char)c10.text[i] >= 0x80;
    printf("hot sampling: %zu bytes, %zu of them non-ASCII\n", c10.len, multi);
    QP_CHECK(whole_utf8(c10.text, c10.len));
    QP_CHECK_EQ_INT(r.n_reused, 0);

    /* 9. end_ids replaces the vocabulary's end tokens: the first greedy run's third token ends it, and
     * is reported; with an empty list it is an ordinary token */
    if (c1.n >= 3) {
        collect c11 = {0};
        qp_gen_params_default(&gp);
        gp.max_tokens = 40;
        gp.on_token = on_token;
        gp.arg = &c11;
        gp.end_ids = &c1.ids[2];
        gp.n_end_ids = 1;
        QP_CHECK(qp_gen_generate(s, p1, n1, &gp, &r, &e) == QP_OK);
        QP_CHECK(r.stop == QP_GEN_STOP_EOS && r.end_token == c1.ids[2] && c11.n == 2);
        QP_CHECK(memcmp(c11.ids, c1.ids, 2 * sizeof *c1.ids) == 0);
        collect c12 = {0};
        gp.arg = &c12;
        gp.n_end_ids = 0; /* the same token is now passed on */
        gp.max_tokens = 3;
        QP_CHECK(qp_gen_generate(s, p1, n1, &gp, &r, &e) == QP_OK);
        QP_CHECK(r.stop == QP_GEN_STOP_MAX_TOKENS && r.end_token == -1 && c12.n == 3);
        QP_CHECK(memcmp(c12.ids, c1.ids, 3 * sizeof *c1.ids) == 0);
    }

    qp_free(p1);
    qp_free(more);
    qp_gen_session_free(s);
    qp_model_close(m);
    return qp_test_finish();
}
