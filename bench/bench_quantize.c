/* bench_quantize: single-thread quantize throughput, ours vs llama.cpp's ggml_quantize_chunk
 * (libggml-base.so from npm, dlopened) on the same data in the same run, printed as ratios; and
 * the ternary encoders against this machine's single-thread memory read bandwidth.
 *
 *   bin/qp-bench-quantize [MiB]        (default 32 MiB of f32 per encoding; QP_PEER_DIR overrides
 *                                       the peer folder; QP_FORCE_SCALAR=1 for scalar kernels,
 *                                       QP_FORCE_AVX2=1 to stop at AVX2)
 * Times are CPU time of the thread (the machine may be shared), each the best of 3 runs. The
 * ternary encoders run in 15 rounds interleaved with read-bandwidth passes over the same input,
 * every pass starting with the input (and output) flushed from the caches (clflush), so both read
 * from memory; the fastest of each is reported, the bandwidth as the best seen (conservative).
 * QP_BENCH_HOT=1 skips the flushes (input cache-resident: compute-bound numbers).
 * Ternary rows include the absmean quantizer (qp_ternary_absmean, f32 -> int8 levels). I2_S runs
 * twice: on its defined input, a ternary tensor {-s, 0, +s} (one pass, the main row), and on the
 * normal-ish data the other rows use (not ternary: the absmean path, one pass with verified
 * speculation, enc_ternary.md "absmean in one pass"). */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#include "quantpack/quantpack.h"

typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start,
                                    int64_t nrows, int64_t n_per_row, const float *imatrix);
typedef void (*row_fn)(const float *x, void *y, int64_t k);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time of this thread: the machine is shared */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile uint64_t g_sink;
static int g_hot; /* QP_BENCH_HOT=1: leave the ternary input in the caches between runs */

/* Evicts buf from every cache level (clflush), so the next pass reads it from memory. This host's
 * L3 is large enough to hold the whole input: without the flush, "memory" bandwidth would be L3
 * bandwidth whenever the previous pass was recent enough. */
static void flush(const void *buf, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
    if (g_hot) return;
    for (size_t i = 0; i < n; i += 64) _mm_clflush((const uint8_t *)buf + i);
    _mm_mfence();
#else
    (void)buf, (void)n;
#endif
}

/* best-of-3 single-thread read bandwidth over the buffer (GB/s) */
static double read_bandwidth(const uint8_t *buf, size_t n) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        flush(buf, n);
        double t0 = now();
        uint64_t acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
        for (size_t i = 0; i + 32 <= n; i += 32) {
            uint64_t a, b, c, d;
            memcpy(&a, buf + i, 8), memcpy(&b, buf + i + 8, 8), memcpy(&c, buf + i + 16, 8),
                memcpy(&d, buf + i + 24, 8);
            acc0 += a, acc1 ^= b, acc2 += c, acc3 ^= d;
        }
        g_sink = acc0 + acc1 + acc2 + acc3;
        double t = now() - t0;
        if (t < best) best = t;
    }
    return (double)n / best / 1e9;
}

int main(int argc, char **argv) {
    const double mib = argc > 1 ? atof(argv[1]) : 32.0;
    const int64_t cols = 4096;
    int64_t rows = (int64_t)(mib * 1048576.0 / 4.0 / (double)cols);
    if (rows < 1) rows = 1;
    const int64_t n = rows * cols;
    float *x = malloc((size_t)n * 4);
    uint8_t *y = malloc((size_t)n * 4 + 64);
    if (!x || !y) return 4;
    uint64_t s = 42;
    for (int64_t i = 0; i < n; i++) { /* normal-ish data: sum of 4 uniforms */
        float v = 0;
        for (int k = 0; k < 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v += (float)(s >> 40) / 16777216.0f - 0.5f;
        }
        x[i] = v;
    }
    /* I2_S's defined input: the same data ternarized, {-s, 0, +s} with s = 0.0213 */
    float *xt = malloc((size_t)n * 4);
    if (!xt) return 4;
    for (int64_t i = 0; i < n; i++) xt[i] = x[i] > 0.3f ? 0.0213f : x[i] < -0.3f ? -0.0213f : 0.0f;
    const char *hot = getenv("QP_BENCH_HOT");
    g_hot = hot && *hot && strcmp(hot, "0") != 0;
    const char *peer = getenv("QP_PEER_DIR");
    if (!peer || !*peer) peer = QP_BENCH_PEER_DIR;
    char path[4096];
    snprintf(path, sizeof path, "%s/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so", peer);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    quantize_chunk_fn qchunk = h ? (quantize_chunk_fn)(uintptr_t)dlsym(h, "ggml_quantize_chunk") : NULL;
    printf("quantize, single thread, %lld x %lld f32 (%.0f MiB), kernels: %s%s\n", (long long)rows,
           (long long)cols, (double)n * 4 / 1048576.0, qp_encoding_simd_level(),
           qchunk ? "" : "  (peer libggml-base.so not found: no ratios)");
    printf("%-8s %14s %14s %10s\n", "enc", "ours Melem/s", "ggml Melem/s", "ours/ggml");
    static const qp_encoding encs[] = {QP_ENC_Q4_K, QP_ENC_Q6_K, QP_ENC_Q5_0, QP_ENC_Q8_0, QP_ENC_Q4_0,
                                       QP_ENC_Q2_K, QP_ENC_Q3_K, QP_ENC_Q5_K, QP_ENC_Q4_1, QP_ENC_Q5_1,
                                       QP_ENC_IQ4_NL, QP_ENC_IQ4_XS,
                                       QP_ENC_TQ1_0, QP_ENC_TQ2_0, QP_ENC_I2_S, QP_ENC_QK256, QP_ENC_BQ4};
    for (size_t e = 0; e < sizeof encs / sizeof encs[0]; e++) {
        const qp_encoding_traits *t = qp_encoding_get(encs[e]);
        /* k-quants and i-quants fit scales by search and are slow: a quarter of the data is plenty */
        const bool slow = (t->block_elems == 256 && !(t->flags & QP_ENC_FLAG_TERNARY)) || encs[e] == QP_ENC_IQ4_NL;
        const int64_t rr = slow ? (rows + 3) / 4 : rows;
        double best = 1e30, gbest = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            if (t->quantize_tensor) t->quantize_tensor(x, y, rr * cols);
            else for (int64_t i = 0; i < rr; i++) {
                size_t rb;
                qp_encoding_row_bytes(encs[e], cols, &rb);
                t->quantize(x + i * cols, y + (size_t)i * rb, cols);
            }
            double dt = now() - t0;
            if (dt < best) best = dt;
            if (qchunk && t->ggml_type >= 0 && t->ggml_type != 36) {
                t0 = now();
                qchunk(t->ggml_type, x, y, 0, rr, cols, NULL);
                dt = now() - t0;
                if (dt < gbest) gbest = dt;
            }
        }
        const double ours = (double)(rr * cols) / best / 1e6;
        if (gbest < 1e30) {
            const double g = (double)(rr * cols) / gbest / 1e6;
            printf("%-8s %14.1f %14.1f %10.2f\n", t->name, ours, g, ours / g);
        } else {
            printf("%-8s %14.1f %14s %10s\n", t->name, ours, "-", "-");
        }
    }
    /* ternary encoders vs memory read bandwidth: f32 input bytes consumed per second */
    /* interleaved rounds: one read-bandwidth pass, then one run of each encoder; best of each */
    static const qp_encoding tern[] = {QP_ENC_TQ1_0, QP_ENC_TQ2_0, QP_ENC_I2_S, QP_ENC_I2_S,
                                       QP_ENC_QK256, QP_ENC_BITNET32F16, QP_ENC_COUNT /* absmean */};
    /* input of each row: 1 = the ternary tensor xt, 0 = the normal-ish x */
    static const int tern_in[] = {0, 0, 1, 0, 0, 0, 0};
    static const char *const tern_label[] = {NULL, NULL, "i2_s ternary", "i2_s normal", NULL, NULL, "absmean"};
    enum { NT = sizeof tern / sizeof tern[0], ROUNDS = 15 };
    double best[NT], bw = 0.0;
    for (size_t e = 0; e < NT; e++) best[e] = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        const double b = read_bandwidth((const uint8_t *)x, (size_t)n * 4);
        if (b > bw) bw = b;
        for (size_t e = 0; e < NT; e++) {
            const float *in = tern_in[e] ? xt : x;
            flush(in, (size_t)n * 4);
            flush(y, (size_t)n);
            double t0 = now();
            if (tern[e] == QP_ENC_COUNT) {
                float sc;
                qp_ternary_absmean(in, n, (int8_t *)y, &sc);
            } else {
                qp_encoding_quantize_tensor(tern[e], in, y, n);
            }
            double dt = now() - t0;
            if (dt < best[e]) best[e] = dt;
        }
    }
    printf("\nsingle-thread %s read bandwidth: %.2f GB/s (best of %d rounds, interleaved with the encoders)\n",
           g_hot ? "cache-resident (QP_BENCH_HOT)" : "memory", bw, ROUNDS);
    printf("%-14s %12s %20s\n", "enc", "input GB/s", "fraction of read bw");
    for (size_t e = 0; e < NT; e++) {
        const double gbs = (double)n * 4 / best[e] / 1e9;
        printf("%-14s %12.2f %20.2f\n", tern_label[e] ? tern_label[e] : qp_encoding_get(tern[e])->name,
               gbs, gbs / bw);
    }
    if (h) dlclose(h);
    free(x);
    free(xt);
    free(y);
    return 0;
}
