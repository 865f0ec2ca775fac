/* The reference runtime against llama.cpp itself: libllama.v0.5.0.so from the npm package
 * @node-llama-cpp/linux-x64 3.22.1 (shared/specs/peers.md), loaded with dlopen. Both run the
 * same token sequence (a prompt, then the runtime's greedy continuation fed to both) one token
 * per decode; every position must have cosine >= 0.9999 and the same top-1 token (issue 3).
 * Models: stories260K.gguf (F32), gguf/llama-2-tiny-random.gguf (F16, untied, 32000 vocab), and
 * generated HF checkpoints converted here by `quantpack convert --to gguf` to F32 and F16:
 * llama-gqa-untied (8 heads over 2 KV heads, untied lm_head, BF16 source) and qwen2 (q/k/v
 * bias, tied, GQA 4/2, theta 1e6). llama.cpp must see the same shape (heads, KV heads, layers,
 * width, vocabulary) as our runtime, so a GQA or untied model can't pass as something simpler.
 *
 * No llama.h ships with the package, so the few prototypes are declared here. The parameter
 * structs are only ever obtained from llama_*_default_params() and handed back unchanged; on
 * x86-64 SysV a struct over 16 bytes is returned through a caller-provided buffer whose address
 * is the hidden first argument (declared here as an explicit pointer, so the test counts the
 * bytes written and checks the struct is that large), and is passed by value as a copy on the
 * stack, so an opaque buffer at least as large as the real struct is ABI-compatible without
 * knowing its field layout. Threads are set with llama_set_n_threads. llama_batch is declared exactly (its
 * 7-field layout has been stable since 2023). One CPU variant is loaded with ggml_backend_load
 * (default libggml-cpu-x64.so; env QP_GGML_CPU=haswell etc.), since llama.cpp's logits depend on
 * the variant (peers.md). Note that llama.cpp is not an F32 reference: F16 matrices take F16
 * activations and the KV cache is F16, which is why the bound is a cosine and not equality.
 * Measured (libggml-cpu-x64): min cosine over positions stories260K 0.9999967 (64),
 * llama-2-tiny-random 0.99999997 (24), llama-gqa-untied F32 0.9999907 / F16 0.9999838 (48),
 * qwen2 F32 0.9999961 / F16 0.9999932 (48); top-1 equal at every position. With the GQA head
 * mapping, the q bias or the untied output broken on purpose in the runtime, the generated
 * models fail (cosines <= 0.99, top-1 mostly different). */
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

extern char **environ;

typedef struct opaque_params {
    _Alignas(16) unsigned char b[1024];
} opaque_params;

typedef struct llama_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} llama_batch;

typedef void (*log_cb)(int level, const char *text, void *user);

static struct {
    void (*backend_init)(void);
    void (*log_set)(log_cb, void *);
    /* struct-returning functions called with the hidden return pointer made explicit (%rdi),
       so the bytes they write can be counted */
    void *(*model_default_params)(void *ret);
    void *(*context_default_params)(void *ret);
    void *(*model_load)(const char *, opaque_params);
    void *(*init_from_model)(void *, opaque_params);
    llama_batch (*batch_get_one)(int32_t *, int32_t);
    int32_t (*decode)(void *, llama_batch);
    float *(*get_logits_ith)(void *, int32_t);
    void (*set_n_threads)(void *, int32_t, int32_t);
    uint32_t (*n_ctx)(const void *);
    void (*free_ctx)(void *);
    void (*model_free)(void *);
    const void *(*model_get_vocab)(const void *);
    int32_t (*vocab_n_tokens)(const void *);
    int32_t (*model_n_embd)(const void *);
    int32_t (*model_n_layer)(const void *);
    int32_t (*model_n_head)(const void *);
    int32_t (*model_n_head_kv)(const void *);
    void *(*backend_load)(const char *);
    size_t (*dev_count)(void);
} L;

static void quiet(int level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

#define SYM(field, lib, name)                                                                    \
    do {                                                                                         \
        *(void **)(&L.field) = dlsym(lib, name);                                                 \
        if (!L.field) {                                                                          \
            fprintf(stderr, "missing symbol %s\n", name);                                        \
            return false;                                                                        \
        }                                                                                        \
    } while (0)

static bool load_llama(const char *bins) {
    char p[2048];
    snprintf(p, sizeof p, "%s/libggml.v0.5.0.so", bins);
    void *gg = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    snprintf(p, sizeof p, "%s/libllama.v0.5.0.so", bins);
    void *ll = gg ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!gg || !ll) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return false;
    }
    SYM(backend_init, ll, "llama_backend_init");
    SYM(log_set, ll, "llama_log_set");
    SYM(model_default_params, ll, "llama_model_default_params");
    SYM(context_default_params, ll, "llama_context_default_params");
    SYM(model_load, ll, "llama_model_load_from_file");
    SYM(init_from_model, ll, "llama_init_from_model");
    SYM(batch_get_one, ll, "llama_batch_get_one");
    SYM(decode, ll, "llama_decode");
    SYM(get_logits_ith, ll, "llama_get_logits_ith");
    SYM(set_n_threads, ll, "llama_set_n_threads");
    SYM(n_ctx, ll, "llama_n_ctx");
    SYM(free_ctx, ll, "llama_free");
    SYM(model_free, ll, "llama_model_free");
    SYM(model_get_vocab, ll, "llama_model_get_vocab");
    SYM(vocab_n_tokens, ll, "llama_vocab_n_tokens");
    SYM(model_n_embd, ll, "llama_model_n_embd");
    SYM(model_n_layer, ll, "llama_model_n_layer");
    SYM(model_n_head, ll, "llama_model_n_head");
    SYM(model_n_head_kv, ll, "llama_model_n_head_kv");
    SYM(backend_load, gg, "ggml_backend_load");
    SYM(dev_count, gg, "ggml_backend_dev_count");
    return true;
}

/* Calls a default-params function twice over different fills; bytes it wrote are the same in
 * both. Returns the params and the size of the struct (last byte written). */
static opaque_params defaults(void *(*fn)(void *), size_t *size_seen) {
    opaque_params x, y;
    memset(&x, 0xA5, sizeof x);
    memset(&y, 0x5A, sizeof y);
    fn(&x);
    fn(&y);
    size_t n = 0;
    for (size_t i = 0; i < sizeof x.b; i++)
        if (x.b[i] != 0xA5 || y.b[i] != 0x5A) n = i + 1;
    *size_seen = n;
    return x;
}

/* Runs `quantpack convert SRC --to gguf --quant QUANT -o OUT` (the CLI as a user runs it), its
 * output going to OUT.log, which is printed when the command fails. */
static bool quantpack_convert(const char *bin_dir, const char *src, const char *quant,
                              const char *out) {
    char exe[4096], log[4400];
    snprintf(exe, sizeof exe, "%s/quantpack", bin_dir);
    snprintf(log, sizeof log, "%s.log", out);
    char *argv[] = {exe, "convert", (char *)src, "--to", "gguf", "--quant", (char *)quant, "-o",
                    (char *)out, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    bool ok = rc == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
    if (!ok) {
        fprintf(stderr, "quantpack convert %s --quant %s failed (spawn %d, status %d):\n", src,
                quant, rc, status);
        FILE *f = fopen(log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
        if (f) fclose(f);
    } else
        remove(log);
    return ok;
}

/* Our runtime runs on 2 threads (its result does not depend on the count: runtime.md), llama.cpp
 * on 1: with 2 threads each its barrier spins against our pool's, and on a loaded 2-core machine
 * that made a 48-position model take ~12 s instead of ~50 ms. */
#define RT_THREADS 2

static void compare_model(const char *path, const int32_t *prompt, int n_prompt, int n_total) {
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(path, NULL, &m, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        return;
    }
    qp_runtime *rt = NULL;
    qp_runtime_opts ro = {RT_THREADS, n_total};
    if (qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        qp_model_close(m);
        return;
    }
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    int64_t nv = c->vocab;
    size_t mps = 0, cps = 0;
    opaque_params mp = defaults(L.model_default_params, &mps);
    opaque_params cp = defaults(L.context_default_params, &cps);
    QP_CHECK_MSG(mps > 16 && mps < 512 && cps > 16 && cps < 512,
                 "default params structs of %zu and %zu bytes", mps, cps);
    void *lm = L.model_load(path, mp);
    QP_CHECK_MSG(lm != NULL, "llama.cpp could not load %s", path);
    void *lc = lm ? L.init_from_model(lm, cp) : NULL;
    QP_CHECK_MSG(lc != NULL, "llama.cpp could not make a context for %s", path);
    if (!lc) {
        if (lm) L.model_free(lm);
        qp_runtime_free(rt);
        qp_model_close(m);
        return;
    }
    L.set_n_threads(lc, 1, 1);
    QP_CHECK_EQ_INT(L.vocab_n_tokens(L.model_get_vocab(lm)), nv);
    QP_CHECK_EQ_INT(L.model_n_embd(lm), c->dim);
    QP_CHECK_EQ_INT(L.model_n_layer(lm), c->n_layers);
    QP_CHECK_EQ_INT(L.model_n_head(lm), c->n_heads);
    QP_CHECK_EQ_INT(L.model_n_head_kv(lm), c->n_kv_heads);
    int n = n_total;
    if ((uint32_t)n > L.n_ctx(lc)) n = (int)L.n_ctx(lc);
    QP_CHECK_MSG(n == n_total, "%s: llama.cpp context of %d positions < %d", path, n, n_total);
    double worst_cos = 1.0, worst_diff = 0.0;
    int top1_same = 0, done = 0, tok = prompt[0];
    for (int p = 0; p < n; p++) {
        float *ours = NULL;
        if (qp_runtime_forward(rt, tok, p, &ours, &e) != QP_OK) {
            QP_CHECK_MSG(false, "%s: %s", path, e.msg);
            break;
        }
        int32_t t = tok;
        llama_batch b = L.batch_get_one(&t, 1);
        if (L.decode(lc, b) != 0) {
            QP_CHECK_MSG(false, "%s: llama_decode failed at position %d", path, p);
            break;
        }
        const float *theirs = L.get_logits_ith(lc, -1);
        qp_logit_stats st;
        qp_logits_compare(theirs, ours, nv, &st);
        if (st.cosine < worst_cos) worst_cos = st.cosine;
        if (st.max_abs_diff > worst_diff) worst_diff = st.max_abs_diff;
        QP_CHECK_MSG(st.cosine >= 0.9999, "%s pos %d: cosine %.9f", path, p, st.cosine);
        QP_CHECK_MSG(st.top1_ref == st.top1_test, "%s pos %d: top-1 llama.cpp %d, ours %d", path,
                     p, st.top1_ref, st.top1_test);
        top1_same += st.top1_ref == st.top1_test;
        done++;
        tok = p + 1 < n_prompt ? prompt[p + 1] : st.top1_test;
    }
    printf("%s: %d positions (prompt %d), threads %d (llama.cpp 1), heads %lld/%lld kv, %s output: min cosine "
           "%.9f, max |diff| %.3g, top-1 equal at %d/%d (params %zu/%zu bytes)\n",
           path, done, n_prompt, RT_THREADS, (long long)c->n_heads, (long long)c->n_kv_heads,
           c->tied_output ? "tied" : "untied", worst_cos, worst_diff, top1_same, done, mps, cps);
    L.free_ctx(lc);
    L.model_free(lm);
    qp_runtime_free(rt);
    qp_model_close(m);
}

/* A generated HF checkpoint converted by the CLI to F32 and F16 GGUFs, each compared. The
 * prompt is 16 ids (BOS 406 first) spread over the 408-token vocabulary, then 32 greedy ones. */
static void compare_generated(const char *fixtures, const char *bin_dir, const char *tmp,
                              const char *name, bool expect_tied, bool expect_bias) {
    static const int32_t prompt[16] = {406, 17, 251, 3, 99, 400, 128, 64, 7, 333, 205, 42, 310,
                                       150, 88, 271};
    static const char *const quants[] = {"F32", "F16"};
    char src[4096];
    snprintf(src, sizeof src, "%s/%s", fixtures, name);
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) {
        char out[4300];
        snprintf(out, sizeof out, "%s/peer-rt-%s-%s.gguf", tmp, name, quants[i]);
        bool conv = quantpack_convert(bin_dir, src, quants[i], out);
        QP_CHECK_MSG(conv, "quantpack convert %s --quant %s", name, quants[i]);
        if (!conv) continue;
        /* the generated model is what its name says (runtime config from the converted file) */
        qp_model *m = NULL;
        qp_err e = {0};
        qp_runtime *rt = NULL;
        qp_runtime_opts ro = {1, 64};
        if (qp_model_open(out, NULL, &m, &e) == QP_OK && qp_runtime_new(m, &ro, &rt, &e) == QP_OK) {
            const qp_runtime_config *c = qp_runtime_get_config(rt);
            QP_CHECK_MSG(c->tied_output == expect_tied, "%s: tied %d", out, c->tied_output);
            QP_CHECK_MSG(c->qkv_bias == expect_bias, "%s: qkv bias %d", out, c->qkv_bias);
            QP_CHECK_MSG(c->n_kv_heads < c->n_heads, "%s: no GQA (%lld/%lld)", out,
                         (long long)c->n_heads, (long long)c->n_kv_heads);
            QP_CHECK_EQ_INT(c->vocab, 408);
        } else
            QP_CHECK_MSG(false, "%s: %s", out, e.msg);
        qp_runtime_free(rt);
        qp_model_close(m);
        int failed = qp_test_failed;
        compare_model(out, prompt, 16, 48);
        if (qp_test_failed == failed) remove(out); /* kept for inspection on a mismatch */
    }
}

int main(void) {
    const char *peer = qp_test_env("QP_PEER_DIR", "tests/peer/node_modules");
    const char *real = qp_test_real_dir();
    const char *fixtures = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    const char *bin_dir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char bins[1024], lib[1200], stories[1024], tiny[1024], gqa[4096], qp[4096];
    snprintf(bins, sizeof bins, "%s/@node-llama-cpp/linux-x64/bins/linux-x64", peer);
    snprintf(lib, sizeof lib, "%s/libllama.v0.5.0.so", bins);
    qp_test_path(stories, sizeof stories, real, "stories260K.gguf");
    qp_test_path(tiny, sizeof tiny, real, "gguf/llama-2-tiny-random.gguf");
    qp_test_path(gqa, sizeof gqa, fixtures, "llama-gqa-untied/config.json");
    qp_test_path(qp, sizeof qp, bin_dir, "quantpack");
    if (!qp_path_exists(lib)) QP_SKIP("libllama peer not installed (%s)", lib);
    if (!qp_path_exists(stories) || !qp_path_exists(tiny))
        QP_SKIP("real GGUF fixtures not found under %s", real);
    if (!qp_path_exists(gqa)) QP_SKIP("generated fixtures not found under %s", fixtures);
    if (!qp_path_exists(qp)) QP_SKIP("quantpack not built (%s)", qp);
    mkdir(tmp, 0755); /* one level, as the other tests; an existing folder is fine */
    if (!load_llama(bins)) {
        QP_CHECK_MSG(false, "could not load libllama from %s", bins);
        return qp_test_finish();
    }
    L.log_set(quiet, NULL);
    char cpu[1200];
    snprintf(cpu, sizeof cpu, "%s/libggml-cpu-%s.so", bins, qp_test_env("QP_GGML_CPU", "x64"));
    QP_CHECK_MSG(L.backend_load(cpu) != NULL, "ggml_backend_load(%s) failed", cpu);
    QP_CHECK(L.dev_count() >= 1);
    L.backend_init();
    const int32_t story_prompt[] = {1, 403, 407, 261, 378}; /* oracles/stories260K_prompt_ids */
    compare_model(stories, story_prompt, 5, 64);
    const int32_t tiny_prompt[] = {1, 450, 4996, 17354, 1701, 29916};
    compare_model(tiny, tiny_prompt, 6, 24);
    compare_generated(fixtures, bin_dir, tmp, "llama-gqa-untied", false, false);
    compare_generated(fixtures, bin_dir, tmp, "qwen2", true, true);
    return qp_test_finish();
}
