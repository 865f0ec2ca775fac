/* Issue 5: a quantpack Q4_K_M GGUF runs the same in llama.cpp and in our reference runtime.
 * `quantpack convert SRC --to gguf --quant Q4_K_M` (the CLI) makes the file from the generated
 * safetensors fixtures llama-tied, llama-gqa-untied (GQA 8/2, untied lm_head, BF16) and qwen2
 * (q/k/v bias), from the real stories260K.gguf, and from a random 256-wide Llama GGUF written
 * here (kquant-random) so that one file is all Q4_K/Q6_K. llama.cpp (libllama.v0.5.0.so from
 * npm @node-llama-cpp/linux-x64 3.22.1, dlopen, one CPU variant: libggml-cpu-x64.so or env
 * QP_GGML_CPU) must load it and see the same shape; our runtime runs the prompt then its greedy
 * tokens, and llama.cpp is fed the same tokens one per llama_decode. Per position:
 *   A  llama.cpp(Q4_K_M) vs ours(Q4_K_M): cosine >= 0.999 and the same top-1 (stories260K,
 *      kquant-random); documented, measured per-model bounds for the three random HF fixtures;
 *   B  llama.cpp on its own F32 dequantization of the same file (llama_model_quantize, all-F32,
 *      allow_requantize) vs ours(Q4_K_M): cosine >= 0.9999 and the same top-1, every model;
 *   C  llama.cpp(Q4_K_M) vs llama.cpp(F32 of it): printed only.
 * Why A needs more room than B: llama.cpp quantizes the activations of every Q5_0/Q8_0 product
 * to Q8_0 and of every Q4_K/Q6_K product to Q8_K (and keeps an F16 KV cache), our runtime dots
 * the same weights with F32 activations. B shows our decoding and products equal llama.cpp's
 * F32 computation of exactly those weights; C shows A's residual is llama.cpp's own: C's
 * minimum cosines and top-1 flips are those of A (measured numbers at the cases below).
 *
 * What Q4_K_M means on small shapes: llama.cpp's mix falls back from Q4_K/Q6_K to Q5_0/Q8_0 for
 * rows whose length is not a multiple of 256, so the 64/128-wide fixtures are mostly Q5_0 (the
 * mix is printed; llama-gqa-untied and kquant-random must hold Q4_K/Q6_K matrices).
 *
 * The loader below is the one of test_runtime_vs_llama.c (kept in step by hand: each test stays
 * a single file). */
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"
#include "writers/gguf_writer.h"

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

/* llama_model_quantize_params of libllama.v0.5.0, as test_convert_vs_llama_quantize.c declares
 * it (checked there against the disassembly of llama_model_quantize_default_params: 64 bytes). */
typedef struct llama_model_quantize_params {
    int32_t nthread;
    int32_t ftype;                /* enum llama_ftype: 0 = all F32 */
    int32_t output_tensor_type;   /* enum ggml_type */
    int32_t token_embedding_type; /* enum ggml_type */
    bool allow_requantize;
    bool quantize_output_tensor;
    bool only_copy;
    bool pure;
    bool keep_split;
    bool dry_run;
    void *imatrix;
    void *kv_overrides;
    void *tensor_types;
    void *prune_layers;
    int32_t reserved_56;
    int32_t reserved_60;
} llama_model_quantize_params;
_Static_assert(sizeof(llama_model_quantize_params) == 64, "v0.5.0 layout is 64 bytes");

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
    llama_model_quantize_params (*quantize_default_params)(void);
    uint32_t (*model_quantize)(const char *, const char *, const llama_model_quantize_params *);
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
    SYM(quantize_default_params, ll, "llama_model_quantize_default_params");
    SYM(model_quantize, ll, "llama_model_quantize");
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

/* Our runtime on 2 threads (the count does not change its logits: runtime.md), llama.cpp on 1
 * (two spinning pools on a loaded 2-core machine made each model take seconds instead of ms). */
#define RT_THREADS 2

typedef struct peer_case {
    const char *label;
    const char *src;       /* converted with quantpack convert --quant Q4_K_M */
    const int32_t *prompt;
    int n_prompt, n_total; /* positions after the prompt take our greedy tokens */
    /* llama.cpp on the Q4_K_M file vs our runtime on it, per position: */
    double min_cosine;     /* cosine >= this */
    double top1_margin;    /* 0: same top-1; else our top-1 may differ when it is within this of
                              llama.cpp's best logit in llama.cpp's own logits (a near-tie) */
    double min_top1;       /* top-1 agreement rate over the positions */
    bool need_kquant;      /* at least one Q4_K/Q6_K matrix in the file */
} peer_case;

typedef struct pair_stats {
    int positions, top1_same, min_cos_pos;
    double min_cos, mean_cos, max_diff, max_flip_gap;
} pair_stats;

/* The encodings of the 2-D tensors, as "Q5_0 x18, Q8_0 x2, ..."; returns the number of Q4_K
 * and Q6_K ones. */
static int encoding_mix(const qp_model *m, char *buf, size_t n) {
    int counts[256] = {0}, kq = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        if (t->n_dims < 2 || (unsigned)t->enc >= 256) continue;
        counts[t->enc]++;
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        if (tr && (!strcmp(tr->upper_name, "Q4_K") || !strcmp(tr->upper_name, "Q6_K"))) kq++;
    }
    size_t used = 0;
    buf[0] = 0;
    for (int enc = 0; enc < 256; enc++) {
        if (!counts[enc] || used >= n) continue;
        const qp_encoding_traits *tr = qp_encoding_get((qp_encoding)enc);
        int w = snprintf(buf + used, n - used, "%s%s x%d", used ? ", " : "",
                         tr ? tr->upper_name : "?", counts[enc]);
        if (w > 0) used += (size_t)w;
    }
    return kq;
}

/* Our runtime on path, one token per step: the prompt, then its greedy tokens up to n_total.
 * Fills tokens[n_total] and logits (n_total x vocab, qp_malloc'd) and the resolved config. */
static bool run_ours(const peer_case *pc, const char *path, int32_t *tokens, float **logits,
                     qp_runtime_config *cfg) {
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts ro = {RT_THREADS, pc->n_total};
    if (qp_model_open(path, NULL, &m, &e) != QP_OK || qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        qp_model_close(m);
        return false;
    }
    *cfg = *qp_runtime_get_config(rt);
    int64_t nv = cfg->vocab;
    *logits = qp_malloc((size_t)pc->n_total * (size_t)nv * sizeof(float));
    bool ok = *logits != NULL;
    int32_t tok = pc->prompt[0];
    for (int p = 0; ok && p < pc->n_total; p++) {
        float *out = NULL;
        tokens[p] = tok;
        ok = qp_runtime_forward(rt, tok, p, &out, &e) == QP_OK;
        QP_CHECK_MSG(ok, "%s pos %d: %s", path, p, e.msg);
        if (!ok) break;
        memcpy(*logits + (size_t)p * (size_t)nv, out, (size_t)nv * sizeof(float));
        tok = p + 1 < pc->n_prompt ? pc->prompt[p + 1] : qp_logits_argmax(out, nv);
    }
    qp_runtime_free(rt);
    qp_model_close(m);
    if (!ok) {
        qp_free(*logits);
        *logits = NULL;
    }
    return ok;
}

/* llama.cpp on path, fed the same tokens one per llama_decode; it must see the shape cfg
 * describes. logits: n x vocab, qp_malloc'd. */
static bool run_llama(const char *path, const int32_t *tokens, int n,
                      const qp_runtime_config *cfg, float **logits) {
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
        return false;
    }
    L.set_n_threads(lc, 1, 1);
    int64_t nv = cfg->vocab;
    bool ok = true;
#define SAME(a, b)                                                                               \
    do {                                                                                         \
        ok = ok && (long long)(a) == (long long)(b);                                             \
        QP_CHECK_EQ_INT(a, b);                                                                   \
    } while (0)
    SAME(L.vocab_n_tokens(L.model_get_vocab(lm)), nv);
    SAME(L.model_n_embd(lm), cfg->dim);
    SAME(L.model_n_layer(lm), cfg->n_layers);
    SAME(L.model_n_head(lm), cfg->n_heads);
    SAME(L.model_n_head_kv(lm), cfg->n_kv_heads);
#undef SAME
    QP_CHECK_MSG(L.n_ctx(lc) >= (uint32_t)n, "%s: llama.cpp context of %u positions", path,
                 L.n_ctx(lc));
    *logits = ok && L.n_ctx(lc) >= (uint32_t)n
                  ? qp_malloc((size_t)n * (size_t)nv * sizeof(float)) : NULL;
    ok = *logits != NULL;
    for (int p = 0; ok && p < n; p++) {
        int32_t t = tokens[p];
        ok = L.decode(lc, L.batch_get_one(&t, 1)) == 0;
        QP_CHECK_MSG(ok, "%s: llama_decode failed at position %d", path, p);
        const float *lg = ok ? L.get_logits_ith(lc, -1) : NULL;
        if (lg) memcpy(*logits + (size_t)p * (size_t)nv, lg, (size_t)nv * sizeof(float));
        ok = ok && lg;
    }
    L.free_ctx(lc);
    L.model_free(lm);
    if (!ok) {
        qp_free(*logits);
        *logits = NULL;
    }
    return ok;
}

/* Position by position, ref (llama.cpp) against test; check: require cosine >= min_cosine and
 * the top-1 rule (top1_margin as in peer_case) at every position. */
static void compare_runs(const char *label, const char *what, const float *ref, const float *test,
                         int n, int n_prompt, int64_t nv, bool check, double min_cosine,
                         double top1_margin, pair_stats *ps) {
    memset(ps, 0, sizeof *ps);
    ps->min_cos = 2.0;
    ps->min_cos_pos = -1;
    double sum = 0.0;
    for (int p = 0; p < n; p++) {
        const float *r = ref + (size_t)p * (size_t)nv, *t = test + (size_t)p * (size_t)nv;
        qp_logit_stats st;
        qp_logits_compare(r, t, nv, &st);
        if (st.cosine < ps->min_cos) {
            ps->min_cos = st.cosine;
            ps->min_cos_pos = p;
        }
        if (st.max_abs_diff > ps->max_diff) ps->max_diff = st.max_abs_diff;
        sum += st.cosine;
        double gap = (double)r[st.top1_ref] - (double)r[st.top1_test];
        if (gap > ps->max_flip_gap) ps->max_flip_gap = gap;
        ps->top1_same += st.top1_ref == st.top1_test;
        ps->positions++;
        if (!check) continue;
        QP_CHECK_MSG(st.cosine >= min_cosine, "%s %s pos %d: cosine %.9f < %g", label, what, p,
                     st.cosine, min_cosine);
        QP_CHECK_MSG(st.top1_ref == st.top1_test || (top1_margin > 0 && gap <= top1_margin),
                     "%s %s pos %d: top-1 %d, ours %d (%.4f below it in the reference's logits)",
                     label, what, p, st.top1_ref, st.top1_test, gap);
    }
    ps->mean_cos = n ? sum / n : 0.0;
    printf("  %-42s %d positions (prompt %d): min cosine %.7f (pos %d), mean %.7f, max |diff| "
           "%.3g, top-1 equal %d/%d (largest flip gap %.3g)\n",
           what, ps->positions, n_prompt, ps->min_cos, ps->min_cos_pos, ps->mean_cos,
           ps->max_diff, ps->top1_same, ps->positions, ps->max_flip_gap);
}

/* One model: quantpack convert -> Q4_K_M; llama.cpp's own F32 dequantization of that file
 * (llama_model_quantize, ftype all-F32, allow_requantize); our runtime on the Q4_K_M file and
 * llama.cpp on both files, fed the same tokens. Checked:
 *   A  llama.cpp(Q4_K_M) vs ours(Q4_K_M): the issue-5 bound of the case;
 *   B  llama.cpp(F32 of the same weights) vs ours(Q4_K_M): cosine >= 0.9999, same top-1 (the
 *      weights as llama.cpp decodes them, products with F32 activations as ours);
 *   C  llama.cpp(Q4_K_M) vs llama.cpp(F32 of it): not checked, printed. It is llama.cpp's own
 *      activation-quantization error, the part of A that B shows is not ours. */
static void check_case(const peer_case *pc, const char *bin_dir, const char *tmp) {
    char q4[4300], deq[4300];
    snprintf(q4, sizeof q4, "%s/peer-rtq-%s-Q4_K_M.gguf", tmp, pc->label);
    snprintf(deq, sizeof deq, "%s/peer-rtq-%s-Q4_K_M-llama-f32.gguf", tmp, pc->label);
    bool conv = quantpack_convert(bin_dir, pc->src, "Q4_K_M", q4);
    QP_CHECK_MSG(conv, "quantpack convert %s --quant Q4_K_M", pc->src);
    if (!conv) return;
    int failed = qp_test_failed;
    qp_model *m = NULL;
    qp_err e = {0};
    char mix[512] = "?";
    if (qp_model_open(q4, NULL, &m, &e) == QP_OK) {
        const qp_meta *ft = qp_model_meta(m, "general.file_type");
        QP_CHECK_MSG(ft && ft->v.u == 15, "%s: general.file_type is not 15 (Q4_K_M)", q4);
        int kq = encoding_mix(m, mix, sizeof mix);
        QP_CHECK_MSG(!pc->need_kquant || kq > 0, "%s: no Q4_K/Q6_K matrix (%s)", q4, mix);
        qp_model_close(m);
    } else
        QP_CHECK_MSG(false, "%s: %s", q4, e.msg);
    llama_model_quantize_params qp = L.quantize_default_params();
    qp.nthread = 1;
    qp.ftype = 0; /* LLAMA_FTYPE_ALL_F32 */
    qp.allow_requantize = true;
    bool deq_ok = L.model_quantize(q4, deq, &qp) == 0;
    QP_CHECK_MSG(deq_ok, "%s: llama_model_quantize to F32 failed", q4);
    int32_t tokens[256];
    float *ours = NULL, *lq = NULL, *lf = NULL;
    qp_runtime_config cfg;
    int n = pc->n_total;
    if (n <= 256 && run_ours(pc, q4, tokens, &ours, &cfg)) {
        printf("%s -> Q4_K_M (%s): heads %lld/%lld kv, %s output\n", pc->label, mix,
               (long long)cfg.n_heads, (long long)cfg.n_kv_heads,
               cfg.tied_output ? "tied" : "untied");
        pair_stats a, b, c;
        if (run_llama(q4, tokens, n, &cfg, &lq)) {
            compare_runs(pc->label, "A llama.cpp(Q4_K_M) vs ours(Q4_K_M):", lq, ours, n,
                         pc->n_prompt, cfg.vocab, true, pc->min_cosine, pc->top1_margin, &a);
            QP_CHECK_MSG((double)a.top1_same >= pc->min_top1 * a.positions,
                         "%s: top-1 agreement %d/%d < %g", pc->label, a.top1_same, a.positions,
                         pc->min_top1);
        }
        if (deq_ok && run_llama(deq, tokens, n, &cfg, &lf)) {
            compare_runs(pc->label, "B llama.cpp(F32 of it) vs ours(Q4_K_M):", lf, ours, n,
                         pc->n_prompt, cfg.vocab, true, 0.9999, 0, &b);
            if (lq)
                compare_runs(pc->label, "C llama.cpp(Q4_K_M) vs llama.cpp(F32 of it):", lq, lf,
                             n, pc->n_prompt, cfg.vocab, false, 0, 0, &c);
        }
    } else
        QP_CHECK_MSG(false, "%s: our runtime did not run", pc->label);
    qp_free(ours);
    qp_free(lq);
    qp_free(lf);
    if (qp_test_failed == failed) { /* kept for inspection on a mismatch */
        remove(q4);
        remove(deq);
    }
}

/* A random Llama GGUF (F32) written with our GGUF writer, wide enough (256) for Q4_K_M to be
 * real k-quants: Q4_K / Q6_K everywhere, so llama.cpp takes the Q8_K activation path in every
 * product. 2 layers, 4 heads over 2 KV heads (head dim 64), ffn 512, vocab 512, untied output.
 * Weights ~ N(0, 0.03) from xorshift64* (a sum of 4 uniforms), norms ~ 1, output.weight x8 so
 * the logits spread over a few units instead of being near-uniform (clear top-1 tokens). */
enum { KQ_EMBD = 256, KQ_FF = 512, KQ_LAYERS = 2, KQ_HEADS = 4, KQ_KV = 2, KQ_VOCAB = 512 };

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng >> 12;
        g_rng ^= g_rng << 25;
        g_rng ^= g_rng >> 27;
        uint64_t r = g_rng * 0x2545F4914F6CDD1Dull;
        s += (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    return s * 0.05f;
}

static bool make_kquant_source(const char *path, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
    bool ok = qp_gguf_writer_add_str(w, "general.architecture", "llama", 5, e) == QP_OK &&
              qp_gguf_writer_add_str(w, "general.name", "kquant-random", 13, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.context_length", 256, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.embedding_length", KQ_EMBD, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.block_count", KQ_LAYERS, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.feed_forward_length", KQ_FF, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.attention.head_count", KQ_HEADS, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.attention.head_count_kv", KQ_KV, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.rope.dimension_count", KQ_EMBD / KQ_HEADS, e) == QP_OK &&
              qp_gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f, e) == QP_OK &&
              qp_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "general.file_type", 0, e) == QP_OK &&
              qp_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, e) == QP_OK;
    /* a vocabulary of <unk> <s> </s> and filler pieces */
    char *toks[KQ_VOCAB] = {0};
    static uint8_t scores[KQ_VOCAB * 4], types[KQ_VOCAB * 4];
    for (int i = 0; ok && i < KQ_VOCAB; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "");
        if (i > 2) snprintf(buf, sizeof buf, "tok%d", i);
        toks[i] = qp_strdup(buf);
        ok = toks[i] != NULL;
        qp_store_f32le(scores + 4 * i, (float)-i);
        qp_store_u32le(types + 4 * i, i == 0 ? 2u : i < 3 ? 3u : 1u);
    }
    ok = ok &&
         qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, KQ_VOCAB, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, KQ_VOCAB, scores, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, KQ_VOCAB, types, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e) == QP_OK;
    for (int i = 0; i < KQ_VOCAB; i++) qp_free(toks[i]);
    const int kv = KQ_EMBD / KQ_HEADS * KQ_KV;
    struct { char name[48]; int64_t ne0, ne1; } ts[3 + 9 * KQ_LAYERS];
    int k = 0;
#define TD(ne0_, ne1_, ...) (snprintf(ts[k].name, sizeof ts[k].name, __VA_ARGS__), ts[k].ne0 = ne0_, ts[k++].ne1 = ne1_)
    TD(KQ_EMBD, KQ_VOCAB, "token_embd.weight");
    for (int l = 0; l < KQ_LAYERS; l++) {
        TD(KQ_EMBD, 1, "blk.%d.attn_norm.weight", l);
        TD(KQ_EMBD, KQ_EMBD, "blk.%d.attn_q.weight", l);
        TD(KQ_EMBD, kv, "blk.%d.attn_k.weight", l);
        TD(KQ_EMBD, kv, "blk.%d.attn_v.weight", l);
        TD(KQ_EMBD, KQ_EMBD, "blk.%d.attn_output.weight", l);
        TD(KQ_EMBD, 1, "blk.%d.ffn_norm.weight", l);
        TD(KQ_EMBD, KQ_FF, "blk.%d.ffn_gate.weight", l);
        TD(KQ_EMBD, KQ_FF, "blk.%d.ffn_up.weight", l);
        TD(KQ_FF, KQ_EMBD, "blk.%d.ffn_down.weight", l);
    }
    TD(KQ_EMBD, 1, "output_norm.weight");
    TD(KQ_EMBD, KQ_VOCAB, "output.weight");
#undef TD
    for (int i = 0; ok && i < k; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        ok = qp_gguf_writer_add_tensor(w, ts[i].name, QP_ENC_F32, ts[i].ne1 > 1 ? 2 : 1, ne, e) == QP_OK;
    }
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (int i = 0; ok && i < k; i++) {
        size_t n = (size_t)(ts[i].ne0 * ts[i].ne1);
        uint8_t *b = qp_malloc(n * 4);
        ok = b != NULL;
        for (size_t j = 0; ok && j < n; j++)
            qp_store_f32le(b + 4 * j, ts[i].ne1 == 1 ? 1.0f + frand() : frand() * (i == k - 1 ? 8.0f : 1.0f));
        ok = ok && qp_gguf_writer_write_tensor(w, b, n * 4, e) == QP_OK;
        qp_free(b);
    }
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

int main(void) {
    const char *peer = qp_test_env("QP_PEER_DIR", "tests/peer/node_modules");
    const char *real = qp_test_real_dir();
    const char *fixtures = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    const char *bin_dir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char bins[1024], lib[1200], stories[1024], tied[4096], gqa[4096], qwen[4096], qp[4096];
    snprintf(bins, sizeof bins, "%s/@node-llama-cpp/linux-x64/bins/linux-x64", peer);
    snprintf(lib, sizeof lib, "%s/libllama.v0.5.0.so", bins);
    qp_test_path(stories, sizeof stories, real, "stories260K.gguf");
    qp_test_path(tied, sizeof tied, fixtures, "llama-tied");
    qp_test_path(gqa, sizeof gqa, fixtures, "llama-gqa-untied");
    qp_test_path(qwen, sizeof qwen, fixtures, "qwen2");
    qp_test_path(qp, sizeof qp, bin_dir, "quantpack");
    if (!qp_path_exists(lib)) QP_SKIP("libllama peer not installed (%s)", lib);
    if (!qp_path_exists(stories)) QP_SKIP("real fixture %s not found", stories);
    if (!qp_path_is_dir(tied) || !qp_path_is_dir(gqa) || !qp_path_is_dir(qwen))
        QP_SKIP("generated fixtures not found under %s", fixtures);
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

    static const int32_t story_prompt[] = {1, 403, 407, 261, 378}; /* oracles/stories260K_prompt_ids */
    static const int32_t gen_prompt[16] = {406, 17, 251, 3, 99, 400, 128, 64, 7, 333, 205, 42,
                                           310, 150, 88, 271};
    const peer_case cases[] = {
        /* the issue-5 bound: measured A min 0.99962 (x64), 0.99953 (haswell/skylakex/icelake/
         * zen4/sapphirerapids builds); top-1 64/64 */
        {"stories260K", stories, story_prompt, 5, 64, 0.999, 0, 1.0, false},
        /* Per-model bounds for the random HF fixtures, whose 64/128-wide rows make Q4_K_M
         * mostly Q5_0 with Q8_0 activations in llama.cpp. Measured on every CPU variant above,
         * A (llama.cpp vs ours) and C (llama.cpp vs llama.cpp's own F32 of the same file):
         *   llama-tied:       A min 0.99584, top-1 43/48, flips within 0.247; C min 0.99601,
         *                     the same 5 flips; B min 0.99999, 48/48
         *   llama-gqa-untied: A min 0.99312, 43/48, flips within 0.216; C min 0.99315, 43/48;
         *                     B min 0.99998, 48/48
         *   qwen2:            A min 0.99582 (0.99609 on AVX2+ builds), 42-43/48, flips within
         *                     0.315; C min 0.99581, 43/48; B min 0.99999, 48/48
         * so the 0.999 bound fails on them for llama.cpp's own activation quantization (C), not
         * for our runtime (B). Their A bound: cosine >= 0.99 / 0.993, top-1 equal at >= 85% of
         * the positions and any other top-1 within 0.4 of llama.cpp's best logit. */
        {"llama-tied", tied, gen_prompt, 16, 48, 0.993, 0.4, 0.85, false},
        {"llama-gqa-untied", gqa, gen_prompt, 16, 48, 0.99, 0.4, 0.85, true},
        {"qwen2", qwen, gen_prompt, 16, 48, 0.993, 0.4, 0.85, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], bin_dir, tmp);

    char kq_src[4300];
    snprintf(kq_src, sizeof kq_src, "%s/peer-rtq-kquant-random-f32.gguf", tmp);
    qp_err e = {0};
    bool made = make_kquant_source(kq_src, &e);
    QP_CHECK_MSG(made, "%s: %s", kq_src, e.msg);
    /* 48 given ids (BOS, then a fixed pseudo-random walk over the vocabulary): a random model's
     * greedy continuation falls into a two-token loop whose logits tie within 1e-3 */
    int32_t kq_prompt[48];
    kq_prompt[0] = 1;
    for (int i = 1; i < 48; i++) kq_prompt[i] = 3 + (int32_t)((i * 7919u + 13u) % (KQ_VOCAB - 3));
    /* measured A min 0.99977 (0.99977 on every variant), top-1 48/48; B 0.9999993 */
    const peer_case kq = {"kquant-random", kq_src, kq_prompt, 48, 48, 0.999, 0, 1.0, true};
    if (made) check_case(&kq, bin_dir, tmp);
    if (made && qp_test_failed == 0) remove(kq_src);
    return qp_test_finish();
}
