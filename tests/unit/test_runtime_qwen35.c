/* Qwen3.5 in the runtime (runtime.md "Qwen3.5") on the generated qwen35 fixture (Qwen3_5ForConditional-
 * Generation's text model: 3 gated delta-net layers, 1 gated full-attention layer):
 *  - the config is read from text_config (delta-net sizes, interval, partial rotary 0.25 of 128);
 *  - prompt processing (batched, split anywhere) = decode token by token, bit for bit on the
 *    exact path (BF16 matrices) and on the fast path, 1 and 2 threads;
 *  - position 0 starts over (the recurrent state is zeroed): the same logits again;
 *  - rewinding elsewhere is refused (QP_ERR_UNSUPPORTED, named), the model still runs after;
 *  - a generation session whose next prompt shares only part of the cache (which a KV cache
 *    would keep) gives the logits of a fresh session;
 *  - what is not implemented is refused by name (layer_types off the interval pattern,
 *    attn_output_gate false).
 * That the computation is Qwen3.5's is the peer test's job (peer.runtime_vs_llama_quant: llama.cpp
 * on the same GGUF files). */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "quantpack/generate.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

enum { N = 40, VOCAB = 408 };

static const int32_t k_ids[N] = {406, 17, 251, 3,  99,  400, 128, 64,  7,   333, 205, 42, 310, 150,
                                 88,  271, 5,  19, 260, 301, 77,  12,  140, 222, 9,   390, 45, 66,
                                 180, 31,  2,  250, 111, 370, 8,   199, 321, 54,  73,  160};

/* Logits of k_ids token by token (or in batches of `chunk`) into out (N x VOCAB). */
static bool run(const qp_model *m, bool exact, int threads, int chunk, float *out) {
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = 64, .exact = exact};
    qp_runtime *rt = NULL;
    qp_err e = {0};
    bool ok = qp_runtime_new(m, &o, &rt, &e) == QP_OK;
    QP_CHECK_MSG(ok, "runtime: %s", e.msg);
    for (int p = 0; ok && p < N; p += chunk) {
        int n = N - p < chunk ? N - p : chunk;
        float *lg;
        ok = chunk == 1 ? qp_runtime_forward(rt, k_ids[p], p, &lg, &e) == QP_OK
                        : qp_runtime_forward_batch(rt, k_ids + p, n, p, out + (size_t)p * VOCAB, &lg, &e) == QP_OK;
        QP_CHECK_MSG(ok, "pos %d: %s", p, e.msg);
        if (ok && chunk == 1) memcpy(out + (size_t)p * VOCAB, lg, VOCAB * sizeof(float));
    }
    qp_runtime_free(rt);
    return ok;
}

static bool same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void test_config(const qp_model *m) {
    const qp_arch *a = &m->arch;
    QP_CHECK_EQ_INT(a->family, QP_FAMILY_QWEN35);
    QP_CHECK_EQ_INT(a->full_attn_interval, 4);
    QP_CHECK_EQ_INT(a->ssm_conv_kernel, 4);
    QP_CHECK_EQ_INT(a->ssm_state_size, 128);
    QP_CHECK_EQ_INT(a->ssm_group_count, 2);
    QP_CHECK_EQ_INT(a->ssm_time_step_rank, 4);
    QP_CHECK_EQ_INT(a->ssm_inner_size, 512);
    QP_CHECK_EQ_INT(a->rope_dims, 32);
    QP_CHECK_EQ_INT(a->head_dim, 128);
    QP_CHECK(a->norm_plus_one && a->ssm_a_log && a->qk_norm && !a->ssm_heads_tiled);
    QP_CHECK(a->rope_theta == 1e7f);
}

static void test_batch_equals_decode(const qp_model *m) {
    float *tok = malloc(sizeof(float) * N * VOCAB), *bat = malloc(sizeof(float) * N * VOCAB);
    QP_CHECK(tok && bat);
    for (int exact = 1; tok && bat && exact >= 0; exact--) {
        bool ok = run(m, exact, 1, 1, tok);
        static const int chunks[] = {N, 7, 3};
        for (size_t c = 0; ok && c < sizeof chunks / sizeof chunks[0]; c++)
            for (int th = 1; th <= 2; th++) {
                memset(bat, 0, sizeof(float) * N * VOCAB);
                QP_CHECK_MSG(run(m, exact, th, chunks[c], bat) && same(tok, bat, (size_t)N * VOCAB),
                             "%s path, batches of %d, %d threads: logits differ from token by token",
                             exact ? "exact" : "fast", chunks[c], th);
            }
        bool finite = true;
        for (size_t i = 0; i < (size_t)N * VOCAB; i++) finite = finite && isfinite(tok[i]);
        QP_CHECK(finite);
    }
    free(tok);
    free(bat);
}

static void test_restart_and_rewind(const qp_model *m) {
    qp_runtime_opts o = {.n_threads = 1, .n_ctx = 64, .exact = true};
    qp_runtime *rt = NULL;
    qp_err e = {0};
    if (qp_runtime_new(m, &o, &rt, &e) != QP_OK) {
        QP_CHECK_MSG(false, "runtime: %s", e.msg);
        return;
    }
    QP_CHECK(qp_runtime_is_recurrent(rt));
    float first[VOCAB], *lg;
    QP_CHECK(qp_runtime_forward_batch(rt, k_ids, 10, 0, NULL, &lg, &e) == QP_OK);
    memcpy(first, lg, sizeof first);
    QP_CHECK(qp_runtime_forward_batch(rt, k_ids, 10, 10, NULL, &lg, &e) == QP_OK); /* continues */
    /* a rewind to a middle position would need the state of that position: refused */
    qp_status s = qp_runtime_forward(rt, k_ids[5], 5, &lg, &e);
    QP_CHECK_MSG(s == QP_ERR_UNSUPPORTED && strstr(e.msg, "cannot rewind") && strstr(e.msg, "qwen35"),
                 "rewind: %d %s", (int)s, e.msg);
    /* position 0 starts over: the first run's logits again */
    QP_CHECK(qp_runtime_forward_batch(rt, k_ids, 10, 0, NULL, &lg, &e) == QP_OK && same(first, lg, VOCAB));
    qp_runtime_free(rt);
}

/* Session 1 runs k_ids[0..30), then a prompt sharing its first 20 ids; session 2 runs only the
 * second prompt: the generated tokens must be equal (the state is not reused half-way). */
static void test_session_prefix(const qp_model *m) {
    qp_runtime_opts o = {.n_threads = 1, .n_ctx = 64, .exact = true};
    qp_gen_session *s1 = NULL, *s2 = NULL;
    qp_err e = {0};
    if (qp_gen_session_new(m, &o, &s1, &e) != QP_OK || qp_gen_session_new(m, &o, &s2, &e) != QP_OK) {
        QP_CHECK_MSG(false, "session: %s", e.msg);
        qp_gen_session_free(s1);
        return;
    }
    int32_t second[25];
    memcpy(second, k_ids, 20 * sizeof(int32_t));
    memcpy(second + 20, k_ids + 33, 5 * sizeof(int32_t));
    qp_gen_params p;
    qp_gen_params_default(&p);
    p.sampler.temperature = 0.0f;
    p.max_tokens = 8;
    p.end_ids = second; /* no end token: n_end_ids 0 */
    p.n_end_ids = 0;
    qp_gen_result r1, r2;
    int64_t n1, n2;
    QP_CHECK(qp_gen_generate(s1, k_ids, 30, &p, &r1, &e) == QP_OK);
    QP_CHECK(qp_gen_generate(s1, second, 25, &p, &r1, &e) == QP_OK);
    QP_CHECK(qp_gen_generate(s2, second, 25, &p, &r2, &e) == QP_OK);
    const int32_t *t1 = qp_gen_session_tokens(s1, &n1), *t2 = qp_gen_session_tokens(s2, &n2);
    QP_CHECK_MSG(n1 == n2 && n1 > 25 && memcmp(t1, t2, (size_t)n1 * sizeof(int32_t)) == 0,
                 "a shared prefix changed the continuation (%lld / %lld tokens)", (long long)n1, (long long)n2);
    QP_CHECK_EQ_INT(r1.n_reused, 0);
    qp_gen_session_free(s1);
    qp_gen_session_free(s2);
}

/* The fixture's folder with config.json changed (one substitution; its other files linked),
 * opened: must fail naming what. */
static void test_refusals(const char *dir, const char *tmp) {
    char tdir[4300], lk[4400], tg[4400];
    snprintf(tdir, sizeof tdir, "%s/qwen35-refuse", tmp);
    mkdir(tdir, 0777);
    static const char *const files[] = {"model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(lk, sizeof lk, "%s/%s", tdir, files[i]);
        snprintf(tg, sizeof tg, "%s/%s", dir, files[i]);
        remove(lk);
        QP_CHECK(symlink(tg, lk) == 0);
    }
    static const struct {
        const char *from, *to, *needle;
    } k_cases[] = {
        {"\"full_attention\"]", "\"linear_attention\"]", "layer_types[3]"},
        {"\"attn_output_gate\": true", "\"attn_output_gate\": false", "attn_output_gate"},
    };
    char src[4200], text[8192];
    snprintf(src, sizeof src, "%s/config.json", dir);
    FILE *f = fopen(src, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    QP_CHECK(n > 0);
    for (size_t i = 0; n > 0 && i < sizeof k_cases / sizeof k_cases[0]; i++) {
        char *at = strstr(text, k_cases[i].from), out[8300], path[4400];
        QP_CHECK(at != NULL);
        if (!at) continue;
        snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, k_cases[i].to, at + strlen(k_cases[i].from));
        snprintf(path, sizeof path, "%s/config.json", tdir);
        FILE *w = fopen(path, "wb");
        if (w) {
            fputs(out, w);
            fclose(w);
        }
        qp_model *m = NULL;
        qp_err e = {0};
        qp_status s = qp_model_open(tdir, NULL, &m, &e);
        QP_CHECK_MSG(s == QP_ERR_UNSUPPORTED && strstr(e.msg, k_cases[i].needle), "case %zu: %d %s", i,
                     (int)s, e.msg);
        qp_model_close(m);
        remove(path);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(lk, sizeof lk, "%s/%s", tdir, files[i]);
        remove(lk);
    }
    rmdir(tdir);
}

int main(void) {
    const char *fixtures = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char dir[4096];
    qp_test_path(dir, sizeof dir, fixtures, "qwen35");
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(dir, NULL, &m, &e) != QP_OK) QP_SKIP("%s: %s", dir, e.msg);
    test_config(m);
    test_batch_equals_decode(m);
    test_restart_and_rewind(m);
    test_session_prefix(m);
    qp_model_close(m);
    test_refusals(dir, tmp);
    return qp_test_finish();
}
