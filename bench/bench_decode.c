/* qp-bench-decode [MODEL.gguf] [--threads N] [--prompt P] [--gen G] [--cpu VARIANT]
 *                 [--dim D --layers L --ffn F --vocab V]
 * Prompt and decode tokens/s of the reference runtime and of llama.cpp (libllama.v0.5.0.so from
 * the npm peer, dlopen) on the same GGUF with the same thread count, printed with their ratio.
 * Without MODEL a random F16 Llama GGUF (default dim 512, 8 layers, ffn 1408, vocab 8192) is
 * written to $TMPDIR and removed afterwards. Both process the prompt as one batch (the runtime
 * through qp_runtime_forward_batch; --token-by-token runs it one qp_runtime_forward at a time).
 * --repeat R runs each side R times and keeps the best speeds (the machine is shared). Prints
 * the SIMD level of the runtime's kernels. --cpu picks one libggml-cpu-VARIANT.so (default: the best one ggml scores for
 * this CPU, via ggml_backend_load_all_from_path). Same ABI notes as
 * tests/peer/llama_peer.h (the declarations and the loader: tests/peer/llama_peer_abi.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"
#include "tests/peer/llama_peer_abi.h"
#include "writers/gguf_writer.h"

#ifndef QP_BENCH_PEER_DIR
#define QP_BENCH_PEER_DIR "tests/peer/node_modules"
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- a random F16 Llama GGUF with a SentencePiece-style vocabulary llama.cpp accepts ------ */

static uint64_t g_rng = 0x5EED5EEDull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static qp_status write_tensor(qp_gguf_writer *w, qp_encoding enc, int64_t n, float scale,
                              float offset, qp_err *e) {
    const qp_encoding_traits *tr = qp_encoding_get(enc);
    int64_t chunk = 1 << 16;
    float *x = malloc((size_t)chunk * sizeof *x);
    uint8_t *y = malloc((size_t)chunk * tr->block_bytes);
    qp_status s = x && y ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "bench: out of memory");
    for (int64_t i = 0; s == QP_OK && i < n; i += chunk) {
        int64_t m = n - i < chunk ? n - i : chunk;
        for (int64_t k = 0; k < m; k++) x[k] = offset + scale * frand();
        tr->quantize_ref(x, y, m);
        s = qp_gguf_writer_write(w, y, (size_t)m * tr->block_bytes, e);
    }
    free(x);
    free(y);
    return s == QP_OK ? qp_gguf_writer_end_tensor(w, e) : s;
}

static qp_status synth(const char *path, int64_t dim, int64_t layers, int64_t ffn, int64_t vocab,
                       int64_t heads, qp_err *e) {
    qp_gguf_writer *w = NULL;
    qp_status s = qp_gguf_writer_new(path, &w, e);
    if (s != QP_OK) return s;
    char **toks = calloc((size_t)vocab, sizeof *toks);
    float *scores = calloc((size_t)vocab, sizeof *scores);
    int32_t *types = calloc((size_t)vocab, sizeof *types);
    for (int64_t i = 0; i < vocab; i++) {
        char b[32];
        if (i == 0) snprintf(b, sizeof b, "<unk>");
        else if (i == 1) snprintf(b, sizeof b, "<s>");
        else if (i == 2) snprintf(b, sizeof b, "</s>");
        else if (i < 259) snprintf(b, sizeof b, "<0x%02X>", (unsigned)(i - 3));
        else snprintf(b, sizeof b, "\xe2\x96\x81t%lld", (long long)i);
        toks[i] = strdup(b);
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : (i < 3 ? 3 : (i < 259 ? 6 : 1));
    }
    s = qp_gguf_writer_add_str(w, "general.architecture", "llama", 5, e);
    if (!s) s = qp_gguf_writer_add_str(w, "general.name", "qp-bench-random", 15, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "general.file_type", 1, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.context_length", 2048, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)dim, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.block_count", (uint32_t)layers, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)ffn, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.rope.dimension_count", (uint32_t)(dim / heads), e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)heads, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)heads, e);
    if (!s) s = qp_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, e);
    if (!s) s = qp_gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "llama.vocab_size", (uint32_t)vocab, e);
    if (!s) s = qp_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, e);
    if (!s) s = qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)vocab, e);
    if (!s) s = qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, (uint64_t)vocab, scores, e);
    if (!s) s = qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, (uint64_t)vocab, types, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, e);
    for (int64_t i = 0; i < vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    struct { char name[64]; int nd; int64_t ne[2]; qp_encoding enc; float sc, off; } t[512];
    int nt = 0;
#define T(NAME, ND, NE0, NE1, ENC, SC, OFF)                                                     \
    do {                                                                                        \
        snprintf(t[nt].name, sizeof t[nt].name, "%s", NAME);                                    \
        t[nt].nd = ND; t[nt].ne[0] = NE0; t[nt].ne[1] = NE1; t[nt].enc = ENC;                   \
        t[nt].sc = SC; t[nt].off = OFF; nt++;                                                   \
    } while (0)
    float ws = 1.0f / 16.0f;
    T("token_embd.weight", 2, dim, vocab, QP_ENC_F16, 1.0f, 0.0f);
    for (int64_t l = 0; l < layers && nt < 500; l++) {
        char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%lld." s, (long long)l), nm)
        T(NM("attn_norm.weight"), 1, dim, 1, QP_ENC_F32, 0.1f, 1.0f);
        T(NM("attn_q.weight"), 2, dim, dim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_k.weight"), 2, dim, dim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_v.weight"), 2, dim, dim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_output.weight"), 2, dim, dim, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_norm.weight"), 1, dim, 1, QP_ENC_F32, 0.1f, 1.0f);
        T(NM("ffn_gate.weight"), 2, dim, ffn, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_up.weight"), 2, dim, ffn, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_down.weight"), 2, ffn, dim, QP_ENC_F16, ws, 0.0f);
#undef NM
    }
    T("output_norm.weight", 1, dim, 1, QP_ENC_F32, 0.1f, 1.0f);
    T("output.weight", 2, dim, vocab, QP_ENC_F16, ws, 0.0f);
#undef T
    for (int i = 0; s == QP_OK && i < nt; i++)
        s = qp_gguf_writer_add_tensor(w, t[i].name, t[i].enc, t[i].nd, t[i].ne, e);
    if (s == QP_OK) s = qp_gguf_writer_begin(w, e);
    for (int i = 0; s == QP_OK && i < nt; i++)
        s = write_tensor(w, t[i].enc, t[i].ne[0] * t[i].ne[1], t[i].sc, t[i].off, e);
    if (s != QP_OK) {
        qp_gguf_writer_abort(w);
        return s;
    }
    return qp_gguf_writer_finish(w, e);
}

/* ---- measurements -------------------------------------------------------------------------- */

typedef struct result {
    double prompt_tps, decode_tps;
    int32_t first_token;
} result;

static bool g_token_by_token, g_exact;

static int run_ours(const char *path, int threads, const int32_t *prompt, int np, int ng,
                    result *r) {
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = np + ng + 1, .exact = g_exact};
    if (qp_model_open(path, NULL, &m, &e) != QP_OK || qp_runtime_new(m, &o, &rt, &e) != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        qp_model_close(m);
        return 1;
    }
    int64_t nv = qp_runtime_get_config(rt)->vocab;
    float *lg = NULL;
    double t0 = now_s();
    qp_status st = QP_OK;
    if (g_token_by_token)
        for (int i = 0; st == QP_OK && i < np; i++) st = qp_runtime_forward(rt, prompt[i], i, &lg, &e);
    else
        st = qp_runtime_forward_batch(rt, prompt, np, 0, NULL, &lg, &e);
    double t1 = now_s();
    if (st != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        qp_runtime_free(rt);
        qp_model_close(m);
        return 1;
    }
    int32_t tok = qp_logits_argmax(lg, nv);
    r->first_token = tok;
    for (int i = 0; i < ng && st == QP_OK; i++) {
        st = qp_runtime_forward(rt, tok, np + i, &lg, &e);
        if (st == QP_OK) tok = qp_logits_argmax(lg, nv);
    }
    double t2 = now_s();
    if (st != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        qp_runtime_free(rt);
        qp_model_close(m);
        return 1;
    }
    r->prompt_tps = np / (t1 - t0);
    r->decode_tps = ng / (t2 - t1);
    qp_runtime_free(rt);
    qp_model_close(m);
    return 0;
}

static int run_llama(const char *path, int threads, const int32_t *prompt, int np, int ng,
                     int64_t nv, result *r) {
    llama_peer_params mp, cp;
    memset(&mp, 0, sizeof mp);
    memset(&cp, 0, sizeof cp);
    L.model_default_params(&mp);
    L.context_default_params(&cp);
    void *lm = L.model_load(path, mp);
    void *lc = lm ? L.init_from_model(lm, cp) : NULL;
    if (!lc) {
        fprintf(stderr, "bench: llama.cpp could not load %s\n", path);
        if (lm) L.model_free(lm);
        return 1;
    }
    L.set_n_threads(lc, threads, threads);
    if ((uint32_t)(np + ng) > L.n_ctx(lc)) fprintf(stderr, "bench: llama.cpp n_ctx %u too small\n", L.n_ctx(lc));
    int32_t *toks = malloc((size_t)np * sizeof *toks);
    memcpy(toks, prompt, (size_t)np * sizeof *toks);
    double t0 = now_s();
    int rc = L.decode(lc, L.batch_get_one(toks, np));
    double t1 = now_s();
    const float *lg = L.get_logits_ith(lc, -1);
    int32_t tok = qp_logits_argmax(lg, nv);
    r->first_token = tok;
    for (int i = 0; rc == 0 && i < ng; i++) {
        int32_t t = tok;
        rc = L.decode(lc, L.batch_get_one(&t, 1));
        tok = qp_logits_argmax(L.get_logits_ith(lc, -1), nv);
    }
    double t2 = now_s();
    free(toks);
    r->prompt_tps = np / (t1 - t0);
    r->decode_tps = ng / (t2 - t1);
    L.free_ctx(lc);
    L.model_free(lm);
    if (rc != 0) fprintf(stderr, "bench: llama_decode failed (%d)\n", rc);
    return rc != 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *cpu = NULL;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), np = 64, ng = 64, repeat = 1;
    int64_t dim = 512, layers = 8, ffn = 1408, vocab = 8192;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--threads") == 0) threads = atoi(v), i++;
        else if (strcmp(argv[i], "--prompt") == 0) np = atoi(v), i++;
        else if (strcmp(argv[i], "--gen") == 0) ng = atoi(v), i++;
        else if (strcmp(argv[i], "--cpu") == 0) cpu = v, i++;
        else if (strcmp(argv[i], "--dim") == 0) dim = atoll(v), i++;
        else if (strcmp(argv[i], "--layers") == 0) layers = atoll(v), i++;
        else if (strcmp(argv[i], "--ffn") == 0) ffn = atoll(v), i++;
        else if (strcmp(argv[i], "--vocab") == 0) vocab = atoll(v), i++;
        else if (strcmp(argv[i], "--repeat") == 0) repeat = atoi(v), i++;
        else if (strcmp(argv[i], "--token-by-token") == 0) g_token_by_token = true;
        else if (strcmp(argv[i], "--exact") == 0) g_exact = true;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: qp-bench-decode [MODEL.gguf] [--threads N] [--prompt P] "
                            "[--gen G] [--cpu VARIANT] [--dim D --layers L --ffn F --vocab V] "
                            "[--repeat R] [--token-by-token] [--exact]\n");
            return 2;
        } else model = argv[i];
    }
    if (threads < 1 || np < 1 || ng < 1 || repeat < 1 || dim < 64 || dim % 64 || layers < 1 || ffn < 1 ||
        vocab < 300) {
        fprintf(stderr, "bench: bad arguments\n");
        return 2;
    }
    const char *peer = getenv("QP_PEER_DIR") ? getenv("QP_PEER_DIR") : QP_BENCH_PEER_DIR;
    char bins[1024];
    snprintf(bins, sizeof bins, "%s/@node-llama-cpp/linux-x64/bins/linux-x64", peer);
    if (!llama_peer_load_from(bins)) {
        fprintf(stderr, "bench: libllama not found under %s\n", bins);
        return 77;
    }
    L.log_set(llama_peer_quiet, NULL);
    if (cpu) {
        char p[1200];
        snprintf(p, sizeof p, "%s/libggml-cpu-%s.so", bins, cpu);
        if (!L.backend_load(p)) {
            fprintf(stderr, "bench: cannot load %s\n", p);
            return 1;
        }
    } else {
        L.backend_load_all_from_path(bins);
    }
    L.backend_init();
    char tmp[1024] = "";
    qp_err e = {0};
    if (!model) {
        const char *td = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(tmp, sizeof tmp, "%s/qp-bench-decode-%ld.gguf", td, (long)getpid());
        if (synth(tmp, dim, layers, ffn, vocab, dim / 64, &e) != QP_OK) {
            fprintf(stderr, "bench: %s\n", e.msg);
            return 1;
        }
        model = tmp;
        printf("model: random F16 llama, dim %lld, %lld layers, ffn %lld, vocab %lld, %lld heads\n",
               (long long)dim, (long long)layers, (long long)ffn, (long long)vocab,
               (long long)(dim / 64));
    }
    qp_model *m = NULL;
    if (qp_model_open(model, NULL, &m, &e) != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        return 1;
    }
    int64_t nv = m->arch.vocab > 0 ? m->arch.vocab : 0;
    if (nv <= 0) {
        const qp_tensor *te = qp_model_find(m, "token_embd.weight");
        nv = te ? te->ne[1] : 0;
    }
    qp_model_close(m);
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    prompt[0] = 1;
    for (int i = 1; i < np; i++) prompt[i] = (int32_t)(3 + (i * 7919) % (nv - 3));
    result ours = {0}, theirs = {0}, r;
    int rc = run_llama(model, threads, prompt, np, ng, nv, &r); /* warm the page cache */
    for (int k = 0; rc == 0 && k < repeat; k++) {
        rc |= run_ours(model, threads, prompt, np, ng, &r);
        if (r.prompt_tps > ours.prompt_tps) ours.prompt_tps = r.prompt_tps;
        if (r.decode_tps > ours.decode_tps) ours.decode_tps = r.decode_tps;
        ours.first_token = r.first_token;
        rc |= run_llama(model, threads, prompt, np, ng, nv, &r);
        if (r.prompt_tps > theirs.prompt_tps) theirs.prompt_tps = r.prompt_tps;
        if (r.decode_tps > theirs.decode_tps) theirs.decode_tps = r.decode_tps;
        theirs.first_token = r.first_token;
    }
    if (rc == 0) {
        double la[3] = {0, 0, 0};
        FILE *lf = fopen("/proc/loadavg", "r");
        if (lf) {
            if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = 0;
            fclose(lf);
        }
        printf("model %s, %d threads, prompt %d tokens, decode %d tokens, best of %d, load "
               "average %.2f\n", model, threads, np, ng, repeat, la[0]);
        printf("  quantpack runtime (%s, %s path, %s prompt): prompt %8.2f tok/s  decode %8.2f tok/s\n",
               qp_encoding_simd_level(), g_exact ? "exact" : "fast", g_token_by_token ? "token-by-token" : "batched",
               ours.prompt_tps, ours.decode_tps);
        printf("  llama.cpp (%s): prompt %8.2f tok/s  decode %8.2f tok/s\n", cpu ? cpu : "best",
               theirs.prompt_tps, theirs.decode_tps);
        printf("  ratio quantpack/llama.cpp: prompt %.3f  decode %.3f  (first greedy token %d vs %d)\n",
               ours.prompt_tps / theirs.prompt_tps, ours.decode_tps / theirs.decode_tps,
               ours.first_token, theirs.first_token);
    }
    free(prompt);
    if (tmp[0]) unlink(tmp);
    return rc;
}
