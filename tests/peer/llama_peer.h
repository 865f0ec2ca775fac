/* llama.cpp as a live peer: libggml/libllama.v0.5.0.so from the npm package
 * @node-llama-cpp/linux-x64 3.22.1 (tests/peer/README.md) under $QP_PEER_DIR, loaded with dlopen,
 * one CPU variant pinned. Used by the peer tests (test_runtime_vs_llama.c,
 * test_runtime_vs_llama_quant.c, test_convert_vs_llama_quantize.c); include after qp_test.h.
 *
 * No llama.h ships with the package, so the few prototypes are declared here. The parameter
 * structs of model and context are only ever obtained from llama_*_default_params() and handed
 * back unchanged; on x86-64 SysV a struct over 16 bytes is returned through a caller-provided
 * buffer whose address is the hidden first argument (declared here as an explicit pointer, so the
 * bytes written can be counted and the struct checked to be that large), and is passed by value
 * as a copy on the stack, so an opaque buffer at least as large as the real struct is
 * ABI-compatible without knowing its field layout. llama_batch is declared exactly (its 7-field
 * layout has been stable since 2023); llama_model_quantize_params too (checked below). One CPU
 * variant is loaded with ggml_backend_load (default libggml-cpu-x64.so; env QP_GGML_CPU=haswell
 * etc.), since llama.cpp's logits depend on the variant (tests/peer/README.md). llama.cpp
 * logs only with QP_PEER_VERBOSE set. */
#ifndef QP_LLAMA_PEER_H
#define QP_LLAMA_PEER_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "peer/llama_peer_abi.h"
#include "quantpack/runtime.h"

/* The folder of the peer's libraries: $QP_PEER_DIR/@node-llama-cpp/linux-x64/bins/linux-x64. */
static inline const char *llama_peer_bins(void) {
    static char bins[1024];
    snprintf(bins, sizeof bins, "%s/@node-llama-cpp/linux-x64/bins/linux-x64",
             qp_test_env("QP_PEER_DIR", "tests/peer/node_modules"));
    return bins;
}

/* libllama's path, to test whether the peer is installed at all (tests skip without it). */
static inline const char *llama_peer_lib(void) {
    static char lib[1200];
    snprintf(lib, sizeof lib, "%s/libllama.v0.5.0.so", llama_peer_bins());
    return lib;
}


/* llama_peer_load_from on the peer's folder under $QP_PEER_DIR. */
static inline bool llama_peer_load(void) { return llama_peer_load_from(llama_peer_bins()); }


/* After llama_peer_load: silences llama.cpp's log (unless QP_PEER_VERBOSE), loads the one CPU
 * variant libggml-cpu-$QP_GGML_CPU.so (default x64) and initialises the backend. Checked: the
 * variant loads and ggml sees at least one device. */
static inline void llama_peer_start(void) {
    if (!getenv("QP_PEER_VERBOSE")) L.log_set(llama_peer_quiet, NULL);
    char cpu[1200];
    snprintf(cpu, sizeof cpu, "%s/libggml-cpu-%s.so", llama_peer_bins(),
             qp_test_env("QP_GGML_CPU", "x64"));
    QP_CHECK_MSG(L.backend_load(cpu) != NULL, "ggml_backend_load(%s) failed", cpu);
    QP_CHECK(L.dev_count() >= 1);
    L.backend_init();
}

/* Calls a default-params function twice over different fills; bytes it wrote are the same in
 * both. Returns the params and the size of the struct (last byte written). */
static inline llama_peer_params llama_peer_defaults(void *(*fn)(void *), size_t *size_seen) {
    llama_peer_params x, y;
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

/* One model loaded in llama.cpp with a context of default parameters, decoding on 1 thread. */
typedef struct llama_peer_session {
    void *model, *ctx;
    size_t model_params_size, ctx_params_size; /* as llama_peer_defaults saw them */
} llama_peer_session;

/* llama_model_load_from_file(path) with the default model parameters (their size checked);
 * NULL when llama.cpp refuses the file (not a check: some callers expect a refusal). */
static inline void *llama_peer_model_load(const char *path, size_t *params_size) {
    size_t mps = 0;
    llama_peer_params mp = llama_peer_defaults(L.model_default_params, &mps);
    QP_CHECK_MSG(mps > 16 && mps < 512, "default model params struct of %zu bytes", mps);
    if (params_size) *params_size = mps;
    return L.model_load(path, mp);
}

/* Loads path and makes its context; checked: the default params structs have plausible sizes,
 * the model loads, the context is made. On failure nothing is left open. */
static inline bool llama_peer_open(llama_peer_session *s, const char *path) {
    memset(s, 0, sizeof *s);
    size_t cps = 0;
    llama_peer_params cp = llama_peer_defaults(L.context_default_params, &cps);
    s->ctx_params_size = cps;
    QP_CHECK_MSG(cps > 16 && cps < 512, "default context params struct of %zu bytes", cps);
    s->model = llama_peer_model_load(path, &s->model_params_size);
    QP_CHECK_MSG(s->model != NULL, "llama.cpp could not load %s", path);
    s->ctx = s->model ? L.init_from_model(s->model, cp) : NULL;
    QP_CHECK_MSG(s->ctx != NULL, "llama.cpp could not make a context for %s", path);
    if (!s->ctx) {
        if (s->model) L.model_free(s->model);
        s->model = NULL;
        return false;
    }
    L.set_n_threads(s->ctx, 1, 1);
    return true;
}

static inline void llama_peer_close(llama_peer_session *s) {
    if (s->ctx) L.free_ctx(s->ctx);
    if (s->model) L.model_free(s->model);
    s->ctx = s->model = NULL;
}

/* llama.cpp must see the shape our runtime resolved (vocabulary, width, layers, heads, KV heads),
 * so a GQA or untied model can't pass as something simpler. Each is a check; true when all hold. */
static inline bool llama_peer_check_shape(const llama_peer_session *s, const qp_runtime_config *c) {
    bool ok = true;
#define LLAMA_PEER_SAME(a, b)                                                                    \
    do {                                                                                         \
        ok = ok && (long long)(a) == (long long)(b);                                             \
        QP_CHECK_EQ_INT(a, b);                                                                   \
    } while (0)
    LLAMA_PEER_SAME(L.vocab_n_tokens(L.model_get_vocab(s->model)), c->vocab);
    LLAMA_PEER_SAME(L.model_n_embd(s->model), c->dim);
    LLAMA_PEER_SAME(L.model_n_layer(s->model), c->n_layers);
    LLAMA_PEER_SAME(L.model_n_head(s->model), c->n_heads);
    LLAMA_PEER_SAME(L.model_n_head_kv(s->model), c->n_kv_heads);
#undef LLAMA_PEER_SAME
    return ok;
}

/* Decodes one token at the next position (one llama_decode); returns llama.cpp's logits of it
 * (borrowed until the next decode), or NULL after a failed check naming path and pos. */
static inline const float *llama_peer_step(llama_peer_session *s, int32_t token, const char *path,
                                           int pos) {
    int32_t t = token;
    bool ok = L.decode(s->ctx, L.batch_get_one(&t, 1)) == 0;
    QP_CHECK_MSG(ok, "%s: llama_decode failed at position %d", path, pos);
    const float *lg = ok ? L.get_logits_ith(s->ctx, -1) : NULL;
    QP_CHECK_MSG(!ok || lg != NULL, "%s: no logits at position %d", path, pos);
    return lg;
}

/* Runs `quantpack convert SRC --to gguf --quant QUANT -o OUT` (the CLI as a user runs it), its
 * output going to OUT.log, which is printed (and kept) when the command fails. */
/* -f: a file left by an interrupted earlier run is replaced, not a failure */
static inline bool llama_peer_convert(const char *bin_dir, const char *src, const char *quant,
                                      const char *out) {
    char exe[4096], log[4400];
    snprintf(exe, sizeof exe, "%s/quantpack", bin_dir);
    snprintf(log, sizeof log, "%s.log", out);
    char *argv[] = {exe, "convert", (char *)src, "--to", "gguf", "--quant", (char *)quant, "-o",
                    (char *)out, "-f", NULL};
    int rc = qp_test_spawn(argv, log);
    if (rc != 0) fprintf(stderr, "quantpack convert %s --quant %s failed (exit %d)\n", src, quant, rc);
    return rc == 0;
}

#endif
