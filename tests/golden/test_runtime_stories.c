/* The reference runtime on the real stories260K, read through both the llama2.c reader
 * (stories260K.bin) and the GGUF reader (stories260K.gguf), against llama2.c run.c's own outputs
 * ($QP_REAL_FIXTURES/oracles/, fixtures/README.md):
 *  - greedy decoding from BOS reproduces stories260K_greedy_bos_256.ids.txt exactly (BOS + 256);
 *  - the logits at positions 0-3 of "Once upon a time" (1 403 407 261 378) are within 1e-4 of
 *    stories260K_logits_once_upon_a_time_pos0-3.txt, for 1 and 3 threads, with an F32 KV cache;
 *  - with the fast path's F16 KV cache (1 thread) the same greedy ids, and the logits within
 *    2e-2 of llama2.c's (runtime.md "KV cache": measured 7.6e-3). */
#include <stdint.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

#define MAX_IDS 512

static void check_model(const char *path, const char *tok_path, const int32_t *greedy,
                        int n_greedy, float ref[4][512], const int32_t *ref_tok, int n_ref) {
    qp_open_opts oo = {tok_path};
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(path, &oo, &m, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        return;
    }
    for (int run = 0; run < 3; run++) {
        const int threads = run == 1 ? 3 : 1;
        const bool kv_f32 = run < 2;
        const double bound = kv_f32 ? 1e-4 : 2e-2;
        qp_runtime *rt = NULL;
        qp_runtime_opts ro = {.n_threads = threads, .n_ctx = 0, .exact = false, .kv_f32 = kv_f32};
        if (qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
            QP_CHECK_MSG(false, "%s: %s", path, e.msg);
            break;
        }
        QP_CHECK_EQ_INT(qp_runtime_get_config(rt)->vocab, 512);
        /* logits at positions 0-3 of the prompt */
        double worst = 0;
        for (int p = 0; p < n_ref; p++) {
            float *lg = NULL;
            if (qp_runtime_forward(rt, ref_tok[p], p, &lg, &e) != QP_OK) {
                QP_CHECK_MSG(false, "%s: %s", path, e.msg);
                break;
            }
            for (int i = 0; i < 512; i++) {
                double d = fabs((double)lg[i] - ref[p][i]);
                if (!(d <= worst)) worst = d;
            }
        }
        QP_CHECK_MSG(worst <= bound, "%s (%d threads, KV %s): logits differ from llama2.c by %g", path,
                     threads, kv_f32 ? "f32" : "f16", worst);
        QP_CHECK(qp_runtime_get_config(rt)->kv_f16 == !kv_f32);
        printf("%s, %d threads, KV %s: max |logit - llama2.c| at positions 0-%d = %.3g\n", path,
               threads, kv_f32 ? "f32" : "f16", n_ref - 1, worst);
        /* greedy from BOS */
        qp_runtime_reset(rt);
        int32_t tok = greedy[0];
        int match = 1, first_bad = -1;
        for (int p = 0; p + 1 < n_greedy; p++) {
            float *lg = NULL;
            if (qp_runtime_forward(rt, tok, p, &lg, &e) != QP_OK) {
                QP_CHECK_MSG(false, "%s: %s", path, e.msg);
                match = 0;
                break;
            }
            tok = qp_logits_argmax(lg, 512);
            if (tok != greedy[p + 1]) {
                match = 0;
                first_bad = p + 1;
                break;
            }
        }
        QP_CHECK_MSG(match, "%s (%d threads): greedy output differs from llama2.c at index %d",
                     path, threads, first_bad);
        qp_runtime_free(rt);
    }
    qp_model_close(m);
}

int main(void) {
    const char *dir = qp_test_real_dir();
    char bin[1024], gguf[1024], tok[1024], ids[1024], lg[1024], prompt[1024];
    qp_test_path(bin, sizeof bin, dir, "stories260K.bin");
    qp_test_path(gguf, sizeof gguf, dir, "stories260K.gguf");
    qp_test_path(tok, sizeof tok, dir, "tok512.bin");
    qp_test_path(ids, sizeof ids, dir, "oracles/stories260K_greedy_bos_256.ids.txt");
    qp_test_path(lg, sizeof lg, dir, "oracles/stories260K_logits_once_upon_a_time_pos0-3.txt");
    qp_test_path(prompt, sizeof prompt, dir, "oracles/stories260K_prompt_ids.txt");
    if (!qp_path_exists(bin) || !qp_path_exists(gguf) || !qp_path_exists(ids) ||
        !qp_path_exists(lg))
        QP_SKIP("real stories260K fixtures not found under %s", dir);

    static int32_t greedy[MAX_IDS], prompt_ids[64];
    int n_greedy = qp_test_oracle_ids(ids, "IDS", greedy, MAX_IDS);
    QP_CHECK_EQ_INT(n_greedy, 257); /* BOS + 256 generated */
    QP_CHECK_EQ_INT(greedy[0], 1);
    int n_prompt = qp_test_oracle_ids(prompt, "PROMPT_IDS", prompt_ids, 64);
    static float ref[4][512];
    int32_t ref_tok[4];
    int n_ref = qp_test_oracle_logits(lg, &ref[0][0], 4, 512, ref_tok);
    QP_CHECK_EQ_INT(n_ref, 4);
    /* the logits file was made on the prompt file's ids */
    QP_CHECK(n_prompt >= 4);
    for (int p = 0; p < 4 && p < n_prompt; p++) QP_CHECK_EQ_INT(ref_tok[p], prompt_ids[p]);
    if (n_greedy != 257 || n_ref != 4) return qp_test_finish();

    check_model(bin, qp_path_exists(tok) ? tok : NULL, greedy, n_greedy, ref, ref_tok, n_ref);
    check_model(gguf, NULL, greedy, n_greedy, ref, ref_tok, n_ref);
    return qp_test_finish();
}
