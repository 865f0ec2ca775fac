/* The MoE forward path (runtime.md "Mixture of experts") on the generated mixtral fixture (8
 * experts, top-2), read as HF safetensors (one 2-D tensor per expert) and as our Q8_0 GGUF
 * (llama.cpp's merged ffn_*_exps): for the exact and the fast path, 1 and 2 threads, the scalar
 * and the CPU's highest SIMD level, 40 positions run token by token, as one batch and as batches of 13 + 27 give the same
 * logits bit for bit (the experts of a batch are gathered per expert, so which tokens share a
 * batch must not matter); the HF model and its Q8_0 GGUF twin agree within the 8-bit class
 * (cosine >= 0.999, top-1 at >= 38 of 40). Agreement with llama.cpp is the peer test's
 * (tests/peer/test_runtime_vs_llama_quant.c). Skips (77) without the generated fixtures. */
#include <stdint.h>
#include <unistd.h>

#include "converters/convert_gguf.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

enum { N_POS = 40, SPLIT = 13 };

static void ids(int32_t *t) {
    t[0] = 406; /* BOS */
    for (int i = 1; i < N_POS; i++) t[i] = (int32_t)((i * 7919u + 13u) % 400u);
}

/* Logits of N_POS positions: mode 0 token by token, 1 one batch, 2 two batches. */
static bool run(const qp_model *m, bool exact, int threads, int mode, float *out, int64_t *nv) {
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts ro = {.n_threads = threads, .n_ctx = 64, .exact = exact};
    if (qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", m->path, e.msg);
        return false;
    }
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    QP_CHECK_EQ_INT(c->n_experts, 8);
    QP_CHECK_EQ_INT(c->n_experts_used, 2);
    QP_CHECK_EQ_INT(c->ffn_dim, 256);
    *nv = c->vocab;
    int32_t t[N_POS];
    ids(t);
    float *lg = NULL;
    bool ok = true;
    if (mode == 0) {
        for (int p = 0; ok && p < N_POS; p++) {
            ok = qp_runtime_forward(rt, t[p], p, &lg, &e) == QP_OK;
            if (ok) memcpy(out + (size_t)p * (size_t)*nv, lg, (size_t)*nv * sizeof(float));
        }
    } else if (mode == 1) {
        ok = qp_runtime_forward_batch(rt, t, N_POS, 0, out, &lg, &e) == QP_OK;
    } else {
        ok = qp_runtime_forward_batch(rt, t, SPLIT, 0, out, &lg, &e) == QP_OK &&
             qp_runtime_forward_batch(rt, t + SPLIT, N_POS - SPLIT, SPLIT,
                                      out + (size_t)SPLIT * (size_t)*nv, &lg, &e) == QP_OK;
    }
    QP_CHECK_MSG(ok, "%s: %s", m->path, e.msg);
    qp_runtime_free(rt);
    return ok;
}

static float g_ref[N_POS * 512], g_got[N_POS * 512];

static void check_batches(const qp_model *m, const char *what) {
    for (int lv = 0; lv <= qp_test_max_simd_level(); lv = lv < qp_test_max_simd_level() ? qp_test_max_simd_level() : lv + 1) {
        qp_encoding_simd_force(lv);
        for (int exact = 0; exact <= 1; exact++)
            for (int threads = 1; threads <= 2; threads++) {
                int64_t nv = 0;
                if (!run(m, exact, threads, 0, g_ref, &nv)) return;
                for (int mode = 1; mode <= 2; mode++) {
                    if (!run(m, exact, threads, mode, g_got, &nv)) return;
                    size_t n = (size_t)N_POS * (size_t)nv, bad = n;
                    for (size_t i = 0; i < n && bad == n; i++)
                        if (memcmp(&g_ref[i], &g_got[i], sizeof(float)) != 0) bad = i;
                    QP_CHECK_MSG(bad == n, "%s level %d %s threads %d %s: logit %zu differs from "
                                 "token by token (%.9g vs %.9g)", what, lv,
                                 exact ? "exact" : "fast", threads,
                                 mode == 1 ? "one batch" : "13 + 27", bad,
                                 bad < n ? g_got[bad] : 0.0, bad < n ? g_ref[bad] : 0.0);
                }
            }
    }
    qp_encoding_simd_force(qp_test_max_simd_level());
}

int main(void) {
    qp_test_max_simd_level();
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char src[4096], gguf[4300];
    qp_test_path(src, sizeof src, fx, "mixtral");
    if (!qp_path_is_dir(src)) QP_SKIP("generated fixture %s not found", src);
    QP_CHECK(qp_test_mkdir_p(tmp));
    snprintf(gguf, sizeof gguf, "%s/unit-moe-q8_0.%ld.gguf", tmp, (long)getpid());
    qp_model *hf = NULL, *gg = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_model_open(src, NULL, &hf, &e) == QP_OK, "%s: %s", src, e.msg);
    if (!hf) return qp_test_finish();
    QP_CHECK_EQ_INT(hf->arch.n_experts, 8);
    QP_CHECK_EQ_INT(hf->arch.n_experts_used, 2);
    qp_convert_opts o = {0};
    o.quant = QP_QUANT_Q8_0;
    o.threads = 2;
    QP_CHECK_MSG(qp_convert_gguf(hf, &o, gguf, &e) == QP_OK, "Q8_0: %s", e.msg);
    QP_CHECK_MSG(qp_model_open(gguf, NULL, &gg, &e) == QP_OK, "%s: %s", gguf, e.msg);
    if (gg) {
        const qp_tensor *t = qp_model_find(gg, "blk.1.ffn_down_exps.weight");
        QP_CHECK(t && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8);
        QP_CHECK(qp_model_find(gg, "blk.1.ffn_down.3.weight") == NULL);
        check_batches(gg, "GGUF Q8_0");
    }
    check_batches(hf, "HF BF16");
    /* the HF model and its merged GGUF twin (Q8_0 weights: verify's 8-bit class is 0.999) */
    int64_t nv = 0;
    if (gg && run(hf, true, 2, 1, g_ref, &nv) && run(gg, true, 2, 1, g_got, &nv)) {
        double worst = 2;
        int same = 0;
        for (int p = 0; p < N_POS; p++) {
            qp_logit_stats st;
            qp_logits_compare(g_ref + (size_t)p * (size_t)nv, g_got + (size_t)p * (size_t)nv, nv, &st);
            if (st.cosine < worst) worst = st.cosine;
            same += st.top1_ref == st.top1_test;
        }
        printf("HF vs its Q8_0 GGUF: min cosine %.7f, top-1 %d/%d\n", worst, same, N_POS);
        QP_CHECK_MSG(worst >= 0.999, "HF vs Q8_0 GGUF: min cosine %.7f", worst);
        QP_CHECK_MSG(same >= N_POS - 2, "HF vs Q8_0 GGUF: top-1 %d/%d", same, N_POS);
    }
    qp_model_close(gg);
    qp_model_close(hf);
    if (qp_test_failed == 0) remove(gguf);
    return qp_test_finish();
}
