/* Peer test: our quantizers and dequantizers against llama.cpp's own libggml-base.so (npm
 * @node-llama-cpp/linux-x64 3.22.1). For every encoding llama.cpp also has, quantize megabytes of
 * varied data with ggml_quantize_chunk (or quantize_row_*_ref) and with ours, require identical
 * bytes, then dequantize with both libraries and require identical float bit patterns. Runs the
 * scalar path and every SIMD level this CPU has. Size: QP_PEER_MB (default 4) MiB of f32 per
 * encoding and path. Skips (77) when the peer library is absent. */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

typedef size_t (*quantize_chunk_fn)(int type, const float *src, void *dst, int64_t start,
                                    int64_t nrows, int64_t n_per_row, const float *imatrix);
typedef void (*row_fn)(const float *x, void *y, int64_t k);
typedef void (*deq_fn)(const void *x, float *y, int64_t k);

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double unif(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
/* importance weights draw from their own stream, so every SIMD level sees the same data */
static uint64_t g_rng_w = 0x2545f4914f6cdd1dull;
static double unif_w(void) {
    uint64_t save = g_rng;
    g_rng = g_rng_w;
    double u = unif();
    g_rng_w = g_rng;
    g_rng = save;
    return u;
}
static float gauss(void) {
    double u = unif(), v = unif();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* Fills n values (n a multiple of 32) with one of many patterns, chosen per 32-element group. */
static void fill(float *x, int64_t n, int style) {
    for (int64_t g = 0; g < n; g += 32) {
        int kind = style >= 0 ? style : (int)(next_u64() % 14);
        float scale = 1.0f;
        float c = gauss();
        for (int k = 0; k < 32; k++) {
            float v;
            switch (kind) {
            case 0: v = gauss(); break;                                  /* normal */
            case 1: v = gauss() / (float)sqrt(unif() + 1e-4); break;     /* heavy tail */
            case 2: v = 0.0f; break;                                     /* all zero */
            case 3: v = c; break;                                        /* constant */
            case 4: v = gauss() * 1e-6f; break;                          /* tiny */
            case 5: v = gauss() * 1e-39f; break;                         /* subnormal */
            case 6: v = gauss() * 3e4f; break;                           /* near f16 max */
            case 7: v = (float)((int)(next_u64() % 17) - 8); break;      /* integers: ties */
            case 8: v = (k == 5) ? 50.0f * c : gauss() * 0.01f; break;   /* spike */
            case 9: v = (float)((int)(next_u64() % 3) - 1) * 0.37f; break; /* ternary */
            case 10: v = fabsf(gauss()) + 0.5f; break;                   /* all positive */
            case 11: v = -fabsf(gauss()) * 7.0f; break;                  /* all negative */
            case 12: v = gauss() * 1e-20f; break;                        /* very small */
            default: v = (float)(next_u64() % 1024) / 64.0f - 8.0f; break; /* dyadic grid */
            }
            x[g + k] = v * scale;
        }
    }
}

typedef struct {
    qp_encoding enc;
    int ggml_type;
    const char *deq_name;
    const char *ref_name; /* used instead of ggml_quantize_chunk when non-NULL */
} peer_case;

static const peer_case k_cases[] = {
    {QP_ENC_Q4_0, 2, "dequantize_row_q4_0", NULL},
    {QP_ENC_Q4_1, 3, "dequantize_row_q4_1", NULL},
    {QP_ENC_Q5_0, 6, "dequantize_row_q5_0", NULL},
    {QP_ENC_Q5_1, 7, "dequantize_row_q5_1", NULL},
    {QP_ENC_Q8_0, 8, "dequantize_row_q8_0", NULL},
    {QP_ENC_Q2_K, 10, "dequantize_row_q2_K", NULL},
    {QP_ENC_Q3_K, 11, "dequantize_row_q3_K", NULL},
    {QP_ENC_Q4_K, 12, "dequantize_row_q4_K", NULL},
    {QP_ENC_Q5_K, 13, "dequantize_row_q5_K", NULL},
    {QP_ENC_Q6_K, 14, "dequantize_row_q6_K", NULL},
    {QP_ENC_Q8_K, 15, "dequantize_row_q8_K", "quantize_row_q8_K_ref"},
    {QP_ENC_TQ1_0, 34, "dequantize_row_tq1_0", NULL},
    {QP_ENC_TQ2_0, 35, "dequantize_row_tq2_0", NULL},
    {QP_ENC_IQ4_NL, 20, "dequantize_row_iq4_nl", NULL},
    {QP_ENC_IQ4_XS, 23, "dequantize_row_iq4_xs", NULL},
};

static int64_t g_rows_total, g_blocks_total, g_bad_blocks, g_bad_floats;

int main(void) {
    char path[4096];
    const char *peer = qp_test_env("QP_PEER_DIR", "tests/peer/node_modules");
    snprintf(path, sizeof path, "%s/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so", peer);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) QP_SKIP("peer libggml-base.so not loadable: %s", dlerror());
    quantize_chunk_fn qchunk = (quantize_chunk_fn)(uintptr_t)dlsym(h, "ggml_quantize_chunk");
    QP_CHECK(qchunk != NULL);
    if (!qchunk) return qp_test_finish();

    const double mb = atof(qp_test_env("QP_PEER_MB", "4"));
    const int64_t target = (int64_t)(mb * 1024 * 1024 / 4);
    static const int64_t k_lens256[] = {256, 512, 768, 1024, 2048, 2560, 4096};
    static const int64_t k_lens32[] = {32, 64, 96, 160, 288, 800, 2080, 4096, 4128};
    const int levels = strcmp(qp_encoding_simd_level(), "avx512") == 0 ? 3
                       : strcmp(qp_encoding_simd_level(), "avx2") == 0 ? 2 : 1;

    for (size_t ci = 0; ci < sizeof k_cases / sizeof k_cases[0]; ci++) {
        const peer_case *pc = &k_cases[ci];
        const qp_encoding_traits *t = qp_encoding_get(pc->enc);
        deq_fn gdeq = (deq_fn)(uintptr_t)dlsym(h, pc->deq_name);
        row_fn gref = pc->ref_name ? (row_fn)(uintptr_t)dlsym(h, pc->ref_name) : NULL;
        QP_CHECK_MSG(t && t->quantize_ref && t->dequantize && gdeq && (!pc->ref_name || gref),
                     "%s: missing function", pc->deq_name);
        if (!t || !t->quantize_ref || !t->dequantize || !gdeq || (pc->ref_name && !gref)) continue;
        for (int lv = 0; lv < levels; lv++) {
            qp_encoding_simd_force(lv);
            int64_t done = 0, bad_blocks = 0, bad_floats = 0, blocks = 0, rows = 0;
            int64_t imatrix_blocks = 0, imatrix_bad = 0;
            g_rng = 0x1234567ull + ci; /* same data for every level */
            while (done < target) {
                const int64_t *lens = t->block_elems == 256 ? k_lens256 : k_lens32;
                const size_t nl = t->block_elems == 256 ? sizeof k_lens256 / 8 : sizeof k_lens32 / 8;
                const int64_t cols = lens[next_u64() % nl];
                const int64_t nrows = 1 + (int64_t)(next_u64() % 8);
                const int64_t n = cols * nrows;
                size_t rb = 0;
                qp_encoding_row_bytes(pc->enc, n, &rb);
                float *x = malloc((size_t)n * 4), *y1 = malloc((size_t)n * 4), *y2 = malloc((size_t)n * 4);
                uint8_t *a = malloc(rb), *b = malloc(rb);
                fill(x, n, (int)(next_u64() % 4) == 0 ? (int)(next_u64() % 14) : -1);
                /* ggml's quantize_row_q8_K_ref leaves bsums of an all-zero block untouched (stale
                 * memory); we write zeros, so start ggml's buffer zeroed too. */
                memset(a, 0, rb);
                if (gref) gref(x, a, n);
                else qchunk(pc->ggml_type, x, a, 0, nrows, cols, NULL);
                /* ours, row by row, through the fast path (the level forced above) */
                size_t rowb = rb / (size_t)nrows;
                for (int64_t r = 0; r < nrows; r++) t->quantize(x + r * cols, b + (size_t)r * rowb, cols);
                const int64_t nb = n / t->block_elems;
                for (int64_t k = 0; k < nb; k++)
                    if (memcmp(a + k * t->block_bytes, b + k * t->block_bytes, t->block_bytes) != 0) {
                        if (bad_blocks < 3)
                            fprintf(stderr, "%s level %d: block %lld of a %lldx%lld tensor differs\n",
                                    t->name, lv, (long long)k, (long long)nrows, (long long)cols);
                        bad_blocks++;
                    }
                if (lv == 0) {
                    /* the reference entry point must agree too */
                    t->quantize_ref(x, b, n);
                    QP_CHECK_MSG(memcmp(a, b, rb) == 0, "%s quantize_ref on a whole tensor differs", t->name);
                }
                if (lv == 0 && t->quantize_imatrix) {
                    /* with importance weights (one per column, as llama-imatrix writes them; some
                     * zero, spread over four decades): ggml_quantize_chunk vs ours row by row */
                    float *qw = malloc((size_t)cols * 4);
                    uint8_t *ia = malloc(rb), *ib = malloc(rb);
                    for (int64_t c = 0; c < cols; c++)
                        qw[c] = unif_w() < 1.0 / 16 ? 0.0f : (float)pow(10.0, 4 * unif_w() - 2);
                    qchunk(pc->ggml_type, x, ia, 0, nrows, cols, qw);
                    for (int64_t r = 0; r < nrows; r++)
                        t->quantize_imatrix(x + r * cols, ib + (size_t)r * rowb, cols, qw);
                    for (int64_t k = 0; k < nb; k++)
                        if (memcmp(ia + k * t->block_bytes, ib + k * t->block_bytes, t->block_bytes) != 0) {
                            if (imatrix_bad < 3)
                                fprintf(stderr, "%s imatrix: block %lld of a %lldx%lld tensor differs\n",
                                        t->name, (long long)k, (long long)nrows, (long long)cols);
                            imatrix_bad++;
                        }
                    imatrix_blocks += nb;
                    free(qw); free(ia); free(ib);
                }
                gdeq(a, y1, n);
                t->dequantize(a, y2, n);
                for (int64_t k = 0; k < n; k++) {
                    uint32_t u1, u2;
                    memcpy(&u1, &y1[k], 4);
                    memcpy(&u2, &y2[k], 4);
                    if (u1 != u2) {
                        if (bad_floats < 3)
                            fprintf(stderr, "%s: dequantized element %lld: ggml %08x ours %08x\n",
                                    t->name, (long long)k, u1, u2);
                        bad_floats++;
                    }
                }
                blocks += nb;
                rows += nrows;
                done += n;
                free(x); free(y1); free(y2); free(a); free(b);
            }
            printf("%-6s %-6s: %lld rows, %lld blocks, %.1f MiB: %lld blocks differ, %lld floats differ\n",
                   t->name, lv == 0 ? "scalar" : lv == 1 ? "avx2" : "avx512", (long long)rows,
                   (long long)blocks, (double)done * 4 / 1048576.0, (long long)bad_blocks,
                   (long long)bad_floats);
            QP_CHECK_MSG(bad_blocks == 0, "%s level %d: %lld of %lld blocks differ", t->name, lv,
                         (long long)bad_blocks, (long long)blocks);
            QP_CHECK_MSG(bad_floats == 0, "%s: %lld dequantized floats differ", t->name, (long long)bad_floats);
            if (imatrix_blocks)
                printf("%-6s imatrix: %lld blocks with importance weights, %lld differ\n", t->name,
                       (long long)imatrix_blocks, (long long)imatrix_bad);
            QP_CHECK_MSG(imatrix_bad == 0, "%s with importance weights: %lld of %lld blocks differ",
                         t->name, (long long)imatrix_bad, (long long)imatrix_blocks);
            g_blocks_total += imatrix_blocks; g_bad_blocks += imatrix_bad;
            g_rows_total += rows; g_blocks_total += blocks; g_bad_blocks += bad_blocks; g_bad_floats += bad_floats;
            if (!(t->quantize != t->quantize_ref)) break; /* no SIMD path: one level is enough */
        }
    }
    qp_encoding_simd_force(-1);
    printf("total: %lld rows, %lld blocks compared, %lld differ; %lld floats differ\n",
           (long long)g_rows_total, (long long)g_blocks_total, (long long)g_bad_blocks,
           (long long)g_bad_floats);
    dlclose(h);
    return qp_test_finish();
}
