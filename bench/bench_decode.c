/* qp-bench-decode [MODEL.gguf] [--threads N] [--prompt P] [--gen G] [--cpu VARIANT]
 *                 [--dim D --layers L --ffn F --vocab V --heads H --kv-heads K]
 *                 [--arch llama|bitnet|bitnet-b1.58]
 *                 [--peer-model PEER.gguf] [--write PATH]
 * Prompt and decode tokens/s of the reference runtime and of llama.cpp (libllama.v0.5.0.so from
 * the npm peer, dlopen) on the same GGUF with the same thread count, printed with their ratio,
 * and the fraction of the measured memory read bandwidth each decode reaches (bytes of weights
 * read per token / bandwidth measured here with the same thread count = the decode limit).
 * --peer-model gives llama.cpp another file (an I2_S model, which llama.cpp cannot load, against
 * its TQ2_0 twin). Without MODEL a random F16 GGUF (default dim 512, 8 layers, ffn 1408, vocab
 * 8192, heads dim/64; --arch bitnet: llama.cpp's BitNet with float activations, bitnet-b1.58:
 * int8 activations as microsoft/BitNet, both with the sub-norms and a tied output) is written to $TMPDIR and removed afterwards; --write PATH only writes it (streamed
 * tensor by tensor, bounded memory; bench/bench_tinyllama.sh makes the TinyLlama-1.1B shape). Both process the prompt as one batch (the runtime
 * through qp_runtime_forward_batch; --token-by-token runs it one qp_runtime_forward at a time).
 * --repeat R runs each side R times and keeps the best speeds (the machine is shared). Prints
 * the SIMD level of the runtime's kernels. --cpu picks one libggml-cpu-VARIANT.so (default: the best one ggml scores for
 * this CPU, via ggml_backend_load_all_from_path). Same ABI notes as
 * tests/peer/llama_peer.h (the declarations and the loader: tests/peer/llama_peer_abi.h). */
#include <errno.h>
#include <pthread.h>
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

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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

typedef struct shape {
    int64_t dim, layers, ffn, vocab, heads, kv_heads;
    const char *arch; /* llama, or bitnet / bitnet-b1.58 (sub-norms, tied output) */
} shape;

static qp_status write_vocab(qp_gguf_writer *w, int64_t vocab, qp_err *e) {
    char **toks = calloc((size_t)vocab, sizeof *toks);
    float *scores = calloc((size_t)vocab, sizeof *scores);
    int32_t *types = calloc((size_t)vocab, sizeof *types);
    qp_status s = toks && scores && types ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "bench: out of memory");
    for (int64_t i = 0; s == QP_OK && i < vocab; i++) {
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
    if (!s) s = qp_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, e);
    if (!s) s = qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)vocab, e);
    if (!s) s = qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, (uint64_t)vocab, scores, e);
    if (!s) s = qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, (uint64_t)vocab, types, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, e);
    for (int64_t i = 0; toks && i < vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return s;
}

static qp_status write_hparams(qp_gguf_writer *w, const shape *sh, qp_err *e) {
    const char *arch = sh->arch;
    char k[96];
#define KEY(suffix) (snprintf(k, sizeof k, "%s." suffix, arch), k)
    qp_status s = qp_gguf_writer_add_str(w, "general.architecture", arch, strlen(arch), e);
    if (!s) s = qp_gguf_writer_add_str(w, "general.name", "qp-bench-random", 15, e);
    if (!s) s = qp_gguf_writer_add_u32(w, "general.file_type", 1, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("context_length"), 2048, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)sh->dim, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)sh->layers, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)sh->ffn, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("rope.dimension_count"), (uint32_t)(sh->dim / sh->heads), e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)sh->heads, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->kv_heads, e);
    if (!s) s = qp_gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f, e);
    if (!s) s = qp_gguf_writer_add_f32(w, KEY("rope.freq_base"), 10000.0f, e);
    if (!s) s = qp_gguf_writer_add_u32(w, KEY("vocab_size"), (uint32_t)sh->vocab, e);
#undef KEY
    return s ? s : write_vocab(w, sh->vocab, e);
}

typedef struct synth_tensor {
    char name[64];
    int nd;
    int64_t ne[2];
    qp_encoding enc;
    float sc, off;
} synth_tensor;

/* The tensor list of the shape (norms F32 around 1, matrices F16 uniform in +-1/16). */
static int tensor_list(const shape *sh, synth_tensor *t, int cap) {
    int nt = 0;
    const int64_t kvdim = sh->dim / sh->heads * sh->kv_heads;
    const float ws = 1.0f / 16.0f;
#define T(NAME, ND, NE0, NE1, ENC, SC, OFF)                                                     \
    do {                                                                                        \
        if (nt < cap) {                                                                         \
            snprintf(t[nt].name, sizeof t[nt].name, "%s", NAME);                                \
            t[nt].nd = ND; t[nt].ne[0] = NE0; t[nt].ne[1] = NE1; t[nt].enc = ENC;               \
            t[nt].sc = SC; t[nt].off = OFF;                                                     \
        }                                                                                       \
        nt++;                                                                                   \
    } while (0)
    T("token_embd.weight", 2, sh->dim, sh->vocab, QP_ENC_F16, 1.0f, 0.0f);
    for (int64_t l = 0; l < sh->layers; l++) {
        char nm[64];
#define NM(s) (snprintf(nm, sizeof nm, "blk.%lld." s, (long long)l), nm)
        T(NM("attn_norm.weight"), 1, sh->dim, 1, QP_ENC_F32, 0.1f, 1.0f);
        T(NM("attn_q.weight"), 2, sh->dim, sh->dim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_k.weight"), 2, sh->dim, kvdim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_v.weight"), 2, sh->dim, kvdim, QP_ENC_F16, ws, 0.0f);
        T(NM("attn_output.weight"), 2, sh->dim, sh->dim, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_norm.weight"), 1, sh->dim, 1, QP_ENC_F32, 0.1f, 1.0f);
        T(NM("ffn_gate.weight"), 2, sh->dim, sh->ffn, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_up.weight"), 2, sh->dim, sh->ffn, QP_ENC_F16, ws, 0.0f);
        T(NM("ffn_down.weight"), 2, sh->ffn, sh->dim, QP_ENC_F16, ws, 0.0f);
        if (strcmp(sh->arch, "llama") != 0) {
            T(NM("attn_sub_norm.weight"), 1, sh->dim, 1, QP_ENC_F32, 0.1f, 1.0f);
            T(NM("ffn_sub_norm.weight"), 1, sh->ffn, 1, QP_ENC_F32, 0.1f, 1.0f);
        }
#undef NM
    }
    T("output_norm.weight", 1, sh->dim, 1, QP_ENC_F32, 0.1f, 1.0f);
    if (strcmp(sh->arch, "llama") == 0) T("output.weight", 2, sh->dim, sh->vocab, QP_ENC_F16, ws, 0.0f);
#undef T
    return nt;
}

static qp_status synth(const char *path, const shape *sh, qp_err *e) {
    int nt = tensor_list(sh, NULL, 0);
    synth_tensor *t = calloc((size_t)nt, sizeof *t);
    if (!t) return qp_fail(e, QP_ERR_NOMEM, "bench: out of memory");
    tensor_list(sh, t, nt);
    qp_gguf_writer *w = NULL;
    qp_status s = qp_gguf_writer_new(path, &w, e);
    if (s == QP_OK) s = write_hparams(w, sh, e);
    for (int i = 0; s == QP_OK && i < nt; i++)
        s = qp_gguf_writer_add_tensor(w, t[i].name, t[i].enc, t[i].nd, t[i].ne, e);
    if (s == QP_OK) s = qp_gguf_writer_begin(w, e);
    for (int i = 0; s == QP_OK && i < nt; i++)
        s = write_tensor(w, t[i].enc, t[i].ne[0] * t[i].ne[1], t[i].sc, t[i].off, e);
    free(t);
    if (s != QP_OK) {
        if (w) qp_gguf_writer_abort(w);
        return s;
    }
    return qp_gguf_writer_finish(w, e);
}

/* ---- measurements -------------------------------------------------------------------------- */

typedef struct result {
    double prompt_tps, decode_tps;
    double prompt_cpu_tps, decode_cpu_tps; /* per second of process CPU time (a loaded machine) */
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
    double t0 = now_s(), c0 = cpu_s();
    qp_status st = QP_OK;
    if (g_token_by_token)
        for (int i = 0; st == QP_OK && i < np; i++) st = qp_runtime_forward(rt, prompt[i], i, &lg, &e);
    else
        st = qp_runtime_forward_batch(rt, prompt, np, 0, NULL, &lg, &e);
    double t1 = now_s(), c1 = cpu_s();
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
    double t2 = now_s(), c2 = cpu_s();
    if (st != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        qp_runtime_free(rt);
        qp_model_close(m);
        return 1;
    }
    r->prompt_tps = np / (t1 - t0);
    r->decode_tps = ng / (t2 - t1);
    r->prompt_cpu_tps = np / (c1 - c0);
    r->decode_cpu_tps = ng / (c2 - c1);
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
    double t0 = now_s(), c0 = cpu_s();
    int rc = L.decode(lc, L.batch_get_one(toks, np));
    double t1 = now_s(), c1 = cpu_s();
    const float *lg = L.get_logits_ith(lc, -1);
    int32_t tok = qp_logits_argmax(lg, nv);
    r->first_token = tok;
    for (int i = 0; rc == 0 && i < ng; i++) {
        int32_t t = tok;
        rc = L.decode(lc, L.batch_get_one(&t, 1));
        tok = qp_logits_argmax(L.get_logits_ith(lc, -1), nv);
    }
    double t2 = now_s(), c2 = cpu_s();
    free(toks);
    r->prompt_tps = np / (t1 - t0);
    r->decode_tps = ng / (t2 - t1);
    r->prompt_cpu_tps = np / (c1 - c0);
    r->decode_cpu_tps = ng / (c2 - c1);
    L.free_ctx(lc);
    L.model_free(lm);
    if (rc != 0) fprintf(stderr, "bench: llama_decode failed (%d)\n", rc);
    return rc != 0;
}

/* ---- memory read bandwidth ------------------------------------------------------------------- */

typedef struct bw_slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_slice;

static void *bw_read(void *arg) {
    bw_slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a0 += s->p[i];
        a1 += s->p[i + 1];
        a2 += s->p[i + 2];
        a3 += s->p[i + 3];
    }
    s->sum = a0 ^ a1 ^ a2 ^ a3;
    return NULL;
}

/* Read bandwidth in bytes/s with `threads` threads each summing its slice of a 512 MiB buffer
 * (far beyond the caches), best of 5: the limit a decode of bytes_per_token can reach. */
static double read_bandwidth(int threads) {
    const size_t bytes = (size_t)512 << 20, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    bw_slice sl[64];
    pthread_t th[64];
    if (threads > 64) threads = 64;
    double best = 0;
    uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
        for (int t = 0; t < threads; t++) {
            sl[t] = (bw_slice){buf + n * (size_t)t / (size_t)threads,
                               n * (size_t)(t + 1) / (size_t)threads - n * (size_t)t / (size_t)threads, 0};
            if (t > 0 && pthread_create(&th[t], NULL, bw_read, &sl[t]) != 0) bw_read(&sl[t]), th[t] = 0;
        }
        bw_read(&sl[0]);
        for (int t = 1; t < threads; t++)
            if (th[t]) pthread_join(th[t], NULL);
        double dt = now_s() - t0;
        for (int t = 0; t < threads; t++) sink ^= sl[t].sum;
        if ((double)bytes / dt > best) best = (double)bytes / dt;
    }
    free(buf);
    if (sink == 42) fprintf(stderr, " "); /* keeps the sums */
    return best;
}

/* Bytes of weights a decode step reads: every tensor but the token embedding, which is read one
 * row per token unless it is also the output (no output.weight). */
static double weight_bytes_per_token(const qp_model *m) {
    double b = 0;
    bool tied = qp_model_find(m, "output.weight") == NULL;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        if (!tied && strcmp(t->name, "token_embd.weight") == 0) continue;
        b += (double)t->nbytes;
    }
    return b;
}

static int usage(void) {
    fprintf(stderr, "usage: qp-bench-decode [MODEL.gguf] [--threads N] [--prompt P] [--gen G] "
                    "[--cpu VARIANT] [--dim D --layers L --ffn F --vocab V --heads H --kv-heads K] "
                    "[--arch llama|bitnet|bitnet-b1.58] [--peer-model PEER.gguf] [--write PATH] [--repeat R] "
                    "[--token-by-token] [--exact]\n");
    return 2;
}

/* Loads libllama and the ggml CPU backend (one variant or the best for this CPU). */
static int load_peer(const char *cpu) {
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
    return 0;
}

static void keep_best(result *best, const result *r) {
    if (r->prompt_tps > best->prompt_tps) best->prompt_tps = r->prompt_tps;
    if (r->decode_tps > best->decode_tps) best->decode_tps = r->decode_tps;
    if (r->prompt_cpu_tps > best->prompt_cpu_tps) best->prompt_cpu_tps = r->prompt_cpu_tps;
    if (r->decode_cpu_tps > best->decode_cpu_tps) best->decode_cpu_tps = r->decode_cpu_tps;
    best->first_token = r->first_token;
}

int main(int argc, char **argv) {
    const char *model = NULL, *cpu = NULL, *peer_model = NULL, *write_only = NULL;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), np = 64, ng = 64, repeat = 1;
    shape sh = {512, 8, 1408, 8192, 0, 0, "llama"};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--threads") == 0) threads = atoi(v), i++;
        else if (strcmp(argv[i], "--prompt") == 0) np = atoi(v), i++;
        else if (strcmp(argv[i], "--gen") == 0) ng = atoi(v), i++;
        else if (strcmp(argv[i], "--cpu") == 0) cpu = v, i++;
        else if (strcmp(argv[i], "--dim") == 0) sh.dim = atoll(v), i++;
        else if (strcmp(argv[i], "--layers") == 0) sh.layers = atoll(v), i++;
        else if (strcmp(argv[i], "--ffn") == 0) sh.ffn = atoll(v), i++;
        else if (strcmp(argv[i], "--vocab") == 0) sh.vocab = atoll(v), i++;
        else if (strcmp(argv[i], "--heads") == 0) sh.heads = atoll(v), i++;
        else if (strcmp(argv[i], "--kv-heads") == 0) sh.kv_heads = atoll(v), i++;
        else if (strcmp(argv[i], "--arch") == 0) sh.arch = v, i++;
        else if (strcmp(argv[i], "--peer-model") == 0) peer_model = v, i++;
        else if (strcmp(argv[i], "--write") == 0) write_only = v, i++;
        else if (strcmp(argv[i], "--repeat") == 0) repeat = atoi(v), i++;
        else if (strcmp(argv[i], "--token-by-token") == 0) g_token_by_token = true;
        else if (strcmp(argv[i], "--exact") == 0) g_exact = true;
        else if (argv[i][0] == '-') return usage();
        else model = argv[i];
    }
    if (sh.heads == 0) sh.heads = sh.dim / 64;
    if (sh.kv_heads == 0) sh.kv_heads = sh.heads;
    if (threads < 1 || np < 1 || ng < 1 || repeat < 1 || sh.dim < 64 || sh.layers < 1 || sh.ffn < 1 ||
        sh.vocab < 300 || sh.heads < 1 || sh.dim % sh.heads || (sh.dim / sh.heads) % 2 ||
        sh.kv_heads < 1 || sh.heads % sh.kv_heads || sh.layers > 512 ||
        (strcmp(sh.arch, "llama") != 0 && strcmp(sh.arch, "bitnet") != 0 &&
         strcmp(sh.arch, "bitnet-b1.58") != 0)) {
        fprintf(stderr, "bench: bad arguments\n");
        return 2;
    }
    char tmp[1024] = "";
    qp_err e = {0};
    if (write_only || !model) {
        const char *td = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        if (!write_only) snprintf(tmp, sizeof tmp, "%s/qp-bench-decode-%ld.gguf", td, (long)getpid());
        const char *out = write_only ? write_only : tmp;
        if (synth(out, &sh, &e) != QP_OK) {
            fprintf(stderr, "bench: %s\n", e.msg);
            return 1;
        }
        printf("model: random F16 %s, dim %lld, %lld layers, ffn %lld, vocab %lld, %lld heads, %lld KV "
               "heads%s%s\n", sh.arch, (long long)sh.dim, (long long)sh.layers,
               (long long)sh.ffn, (long long)sh.vocab, (long long)sh.heads, (long long)sh.kv_heads,
               write_only ? " -> " : "", write_only ? write_only : "");
        if (write_only) return 0;
        model = tmp;
    }
    int rc = load_peer(cpu);
    if (rc != 0) {
        if (tmp[0]) unlink(tmp);
        return rc;
    }
    qp_model *m = NULL;
    if (qp_model_open(model, NULL, &m, &e) != QP_OK) {
        fprintf(stderr, "bench: %s\n", e.msg);
        if (tmp[0]) unlink(tmp);
        return 1;
    }
    int64_t nv = m->arch.vocab > 0 ? m->arch.vocab : 0;
    if (nv <= 0) {
        const qp_tensor *te = qp_model_find(m, "token_embd.weight");
        nv = te ? te->ne[1] : 0;
    }
    const double bpt = weight_bytes_per_token(m);
    qp_model_close(m);
    if (!peer_model) peer_model = model;
    double pbpt = bpt;
    if (peer_model != model && qp_model_open(peer_model, NULL, &m, &e) == QP_OK) {
        pbpt = weight_bytes_per_token(m);
        qp_model_close(m);
    }
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    prompt[0] = 1;
    for (int i = 1; i < np; i++) prompt[i] = (int32_t)(3 + (i * 7919) % (nv - 3));
    result ours = {0}, theirs = {0}, r;
    rc = run_llama(peer_model, threads, prompt, np, ng, nv, &r); /* warm the page cache */
    for (int k = 0; rc == 0 && k < repeat; k++) {
        rc |= run_ours(model, threads, prompt, np, ng, &r);
        keep_best(&ours, &r);
        rc |= run_llama(peer_model, threads, prompt, np, ng, nv, &r);
        keep_best(&theirs, &r);
    }
    if (rc == 0) {
        const double bw = read_bandwidth(threads);
        double la[3] = {0, 0, 0};
        FILE *lf = fopen("/proc/loadavg", "r");
        if (lf) {
            if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = 0;
            fclose(lf);
        }
        printf("model %s, %d threads, prompt %d tokens, decode %d tokens, best of %d, load "
               "average %.2f\n", model, threads, np, ng, repeat, la[0]);
        printf("  read bandwidth %.2f GB/s (%d threads); weights per token: ours %.1f MB, llama.cpp "
               "%.1f MB\n", bw * 1e-9, threads, bpt * 1e-6, pbpt * 1e-6);
        printf("  quantpack runtime (%s, %s path, %s prompt): prompt %8.2f tok/s  decode %8.2f tok/s"
               "  (%.0f%% of bandwidth)\n", qp_encoding_simd_level(), g_exact ? "exact" : "fast",
               g_token_by_token ? "token-by-token" : "batched", ours.prompt_tps, ours.decode_tps,
               100.0 * ours.decode_tps * bpt / bw);
        printf("  llama.cpp (%s%s%s): prompt %8.2f tok/s  decode %8.2f tok/s  (%.0f%% of bandwidth)\n",
               cpu ? cpu : "best", peer_model != model ? ", " : "", peer_model != model ? peer_model : "",
               theirs.prompt_tps, theirs.decode_tps, 100.0 * theirs.decode_tps * pbpt / bw);
        printf("  ratio quantpack/llama.cpp: prompt %.3f  decode %.3f  (first greedy token %d vs %d)\n",
               ours.prompt_tps / theirs.prompt_tps, ours.decode_tps / theirs.decode_tps,
               ours.first_token, theirs.first_token);
        /* tokens per CPU-second: on a shared machine (load above the core count) the wall rates
         * above measure the scheduler; at 1 thread these do not (llama.cpp's spinning workers
         * count against it at 2) */
        printf("  per CPU-second: ours prompt %.2f decode %.2f, llama.cpp prompt %.2f decode %.2f; "
               "ratio prompt %.3f decode %.3f\n", ours.prompt_cpu_tps, ours.decode_cpu_tps,
               theirs.prompt_cpu_tps, theirs.decode_cpu_tps,
               ours.prompt_cpu_tps / theirs.prompt_cpu_tps, ours.decode_cpu_tps / theirs.decode_cpu_tps);
    }
    free(prompt);
    if (tmp[0]) unlink(tmp);
    return rc;
}
