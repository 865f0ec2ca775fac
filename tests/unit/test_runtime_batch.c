/* The batched prompt path (qp_runtime_forward_batch) on the real stories260K, read through the
 * llama2.c reader (.bin) and the GGUF reader, against llama2.c run.c's own outputs (oracles/):
 *  - the logits of "Once upon a time" (1 403 407 261 378) at positions 0-3 run as one batch are
 *    within 1e-4 of llama2.c's;
 *  - llama2.c's greedy sequence from BOS (257 ids) run as batches (teacher forcing, past the
 *    64-token internal batch) gives, at every position, the same argmax as llama2.c's next token,
 *    and logits equal to the token-by-token path bit for bit (F32 weights);
 *  - a batched prompt (the first 10 ids) followed by free-running greedy decoding reproduces the
 *    other 247 ids exactly;
 * for 1 and 2 threads, at the scalar level and at the CPU's SIMD level. Skips (77) without the
 * fixtures. */
#include <stdint.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

#define MAX_IDS 512
#define V 512

static void check_model(const char *path, const char *tok_path, const int32_t *greedy,
                        int n_greedy, float ref[4][V]) {
    qp_open_opts oo = {tok_path};
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_open(path, &oo, &m, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        return;
    }
    static float all[MAX_IDS * V], tbt[MAX_IDS * V];
    static const int32_t once[5] = {1, 403, 407, 261, 378};
    for (int lv = 0; lv <= qp_test_max_simd_level(); lv++) {
        qp_encoding_simd_force(lv);
        for (int threads = 1; threads <= 2; threads++) {
            qp_runtime *rt = NULL;
            qp_runtime_opts ro = {.n_threads = threads, .n_ctx = 0, .exact = true};
            if (qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
                QP_CHECK_MSG(false, "%s: %s", path, e.msg);
                break;
            }
            float *lg = NULL;
            /* "Once upon a time", positions 0-3, as one batch */
            QP_CHECK(qp_runtime_forward_batch(rt, once, 4, 0, all, &lg, &e) == QP_OK);
            double worst = 0;
            for (int p = 0; p < 4; p++)
                for (int i = 0; i < V; i++) worst = fmax(worst, fabs((double)all[p * V + i] - ref[p][i]));
            QP_CHECK_MSG(worst <= 1e-4, "%s level %d threads %d: batch logits differ from "
                         "llama2.c by %g", path, lv, threads, worst);
            /* llama2.c's greedy sequence, teacher-forced through batches */
            qp_runtime_reset(rt);
            int n = n_greedy - 1;
            QP_CHECK(qp_runtime_forward_batch(rt, greedy, 100, 0, all, &lg, &e) == QP_OK);
            QP_CHECK(qp_runtime_forward_batch(rt, greedy + 100, n - 100, 100, all + 100 * V, &lg,
                                              &e) == QP_OK);
            int bad = -1;
            for (int p = 0; p < n && bad < 0; p++)
                if (qp_logits_argmax(all + (size_t)p * V, V) != greedy[p + 1]) bad = p + 1;
            QP_CHECK_MSG(bad < 0, "%s level %d threads %d: batched argmax differs from llama2.c "
                         "at index %d", path, lv, threads, bad);
            qp_runtime_reset(rt);
            for (int p = 0; p < n; p++) {
                QP_CHECK(qp_runtime_forward(rt, greedy[p], p, &lg, &e) == QP_OK);
                memcpy(tbt + (size_t)p * V, lg, sizeof(float) * V);
            }
            QP_CHECK_MSG(memcmp(all, tbt, sizeof(float) * (size_t)n * V) == 0,
                         "%s level %d threads %d: batched logits differ from token-by-token",
                         path, lv, threads);
            /* batched prompt, then free-running greedy decoding */
            qp_runtime_reset(rt);
            QP_CHECK(qp_runtime_forward_batch(rt, greedy, 10, 0, NULL, &lg, &e) == QP_OK);
            int32_t tok = qp_logits_argmax(lg, V);
            bad = -1;
            for (int p = 10; p < n_greedy && bad < 0; p++) {
                if (tok != greedy[p]) {
                    bad = p;
                    break;
                }
                if (p + 1 < n_greedy) {
                    QP_CHECK(qp_runtime_forward(rt, tok, p, &lg, &e) == QP_OK);
                    tok = qp_logits_argmax(lg, V);
                }
            }
            QP_CHECK_MSG(bad < 0, "%s level %d threads %d: greedy after a batched prompt "
                         "differs from llama2.c at index %d", path, lv, threads, bad);
            qp_runtime_free(rt);
        }
    }
    qp_encoding_simd_force(-1);
    qp_model_close(m);
}

int main(void) {
    qp_test_max_simd_level();
    const char *dir = qp_test_real_dir();
    char bin[1024], gguf[1024], tok[1024], ids[1024], lg[1024];
    qp_test_path(bin, sizeof bin, dir, "stories260K.bin");
    qp_test_path(gguf, sizeof gguf, dir, "stories260K.gguf");
    qp_test_path(tok, sizeof tok, dir, "tok512.bin");
    qp_test_path(ids, sizeof ids, dir, "oracles/stories260K_greedy_bos_256.ids.txt");
    qp_test_path(lg, sizeof lg, dir, "oracles/stories260K_logits_once_upon_a_time_pos0-3.txt");
    if (!qp_path_exists(bin) || !qp_path_exists(gguf) || !qp_path_exists(ids) ||
        !qp_path_exists(lg))
        QP_SKIP("real stories260K fixtures not found under %s", dir);
    static int32_t greedy[MAX_IDS];
    static float ref[4][V];
    int n_greedy = qp_test_oracle_ids(ids, "IDS", greedy, MAX_IDS);
    QP_CHECK_EQ_INT(n_greedy, 257);
    QP_CHECK_EQ_INT(qp_test_oracle_logits(lg, &ref[0][0], 4, V, NULL), 4);
    if (n_greedy != 257) return qp_test_finish();
    check_model(bin, qp_path_exists(tok) ? tok : NULL, greedy, n_greedy, ref);
    check_model(gguf, NULL, greedy, n_greedy, ref);
    return qp_test_finish();
}
