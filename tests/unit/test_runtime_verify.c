/* qp_verify_run runs the teacher-forced positions batched (qp_runtime_forward_batch with
 * all_logits, runtime/receipt.c). Its results must be those of the token-by-token procedure
 * (runtime.md "quantpack verify"), recomputed here with qp_runtime_forward and
 * qp_logits_compare: every per-prompt number equal bit for bit on stories260K.gguf against
 * stories260K.bin (F32) and its Q8_0 and F16 conversions, and within 1e-5 (relative) with the same greedy
 * run against llama.cpp's Q4_K_M (Q5_0 matrices: batched differs by summation order); a prompt
 * longer than verify's 64-position chunk, a one-token prompt, 1-2 threads.
 * Default threshold classes of the BitNet fixtures (qp-gen-fixtures, $QP_FIXTURES_DIR): the packed
 * checkpoint (U8 + weight_scale: ternary codes) is "low-bit" like I2_S, not "8-bit"; its float
 * twin (BF16) is "bf16" (BF16's own class, 8 significant bits, not F16's "16-bit"); and the packed checkpoint verifies against the float one.
 * An RDRR Q4_K_M package of stories260K (rows of 64 zero-padded to 256, read back as F32 copies)
 * is classed by its stored encodings: "4-bit" (was "8-bit" when the reader's F32 copies and a
 * Q8_0 lm_head counted) and passes against stories260K.gguf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

enum { NGEN = 60 };

/* The token-by-token procedure: SRC and OUT at every position on the prompt + SRC's greedy
 * continuation, then OUT free-running from its first divergence. */
static bool reference(const qp_model *out, const qp_model *src, const int32_t *ids, int64_t P,
                      int threads, qp_verify_prompt_result *r) {
    qp_runtime *rs = NULL, *ro = NULL;
    qp_err e = {0};
    qp_runtime_opts o = {.n_threads = threads, .n_ctx = P + NGEN, .exact = true};
    if (qp_runtime_new(src, &o, &rs, &e) != QP_OK || qp_runtime_new(out, &o, &ro, &e) != QP_OK) {
        fprintf(stderr, "runtime: %s\n", e.msg);
        qp_runtime_free(rs);
        return false;
    }
    int64_t V = qp_runtime_get_config(rs)->vocab, npos = P + NGEN - 1;
    int32_t sg[NGEN], og[NGEN];
    int64_t first = -1, agree = 0;
    double sc = 0, sk = 0;
    memset(r, 0, sizeof *r);
    r->min_cosine = INFINITY;
    for (int64_t pos = 0; pos < npos; pos++) {
        int32_t tok = pos < P ? ids[pos] : sg[pos - P];
        float *ls, *lo;
        if (qp_runtime_forward(rs, tok, pos, &ls, &e) != QP_OK ||
            qp_runtime_forward(ro, tok, pos, &lo, &e) != QP_OK)
            return false;
        qp_logit_stats st;
        qp_logits_compare(ls, lo, V, &st);
        if (pos >= P - 1) {
            int64_t j = pos - (P - 1);
            sg[j] = st.top1_ref;
            og[j] = st.top1_test;
            if (first < 0 && og[j] != sg[j]) first = j;
        }
        if (!(st.cosine >= r->min_cosine)) r->min_cosine = st.cosine;
        if (!(st.kl <= r->max_kl)) r->max_kl = st.kl;
        if (!(st.max_abs_diff <= r->max_abs_diff)) r->max_abs_diff = st.max_abs_diff;
        sc += st.cosine;
        sk += st.kl;
        agree += st.top1_ref == st.top1_test;
    }
    r->n_positions = npos;
    r->mean_cosine = sc / (double)npos;
    r->mean_kl = sk / (double)npos;
    r->top1_agreement = (double)agree / (double)npos;
    r->first_divergence = first;
    r->matched = first < 0 ? NGEN : first;
    qp_runtime_free(rs);
    qp_runtime_free(ro);
    return true;
}

/* exact: every number bit for bit (F32/F16/BF16/Q8_0/Q4_K/Q6_K matrices); else (Q5_0, whose
 * SIMD dot sums in another order than its batched path) within 1e-5 relative and the same greedy run. */
static void check_pair(const char *label, const qp_model *out, const qp_model *src, bool exact) {
    static int32_t long_p[100], short_p[1] = {1};
    for (int i = 0; i < 100; i++) long_p[i] = i == 0 ? 1 : (int32_t)((i * 37 + 11) % 500 + 3);
    qp_verify_prompt prompts[2] = {{long_p, 100, NULL}, {short_p, 1, NULL}};
    for (int threads = 1; threads <= 2; threads++) {
        qp_verify_opts vo;
        memset(&vo, 0, sizeof vo);
        vo.n_threads = threads;
        vo.n_generate = NGEN;
        qp_verify_default_thresholds(out, src, &vo.th);
        qp_verify_report *rep = NULL;
        qp_err e = {0};
        QP_CHECK(qp_verify_run(out, src, prompts, 2, &vo, &rep, &e) == QP_OK);
        if (!rep) continue;
        for (int k = 0; k < 2; k++) {
            qp_verify_prompt_result ref;
            QP_CHECK(reference(out, src, prompts[k].ids, prompts[k].n_ids, threads, &ref));
            const qp_verify_prompt_result *got = qp_verify_report_prompt(rep, k);
            double tol = exact ? 0.0 : 1e-5;
#define NEAR(x) (fabs(got->x - ref.x) <= tol * fmax(1.0, fabs(ref.x)))
            bool same = got && got->n_positions == ref.n_positions && NEAR(min_cosine) &&
                        NEAR(mean_cosine) && NEAR(max_abs_diff) && NEAR(max_kl) && NEAR(mean_kl) &&
                        got->top1_agreement == ref.top1_agreement &&
                        got->first_divergence == ref.first_divergence &&
                        got->matched == ref.matched;
            if (got && !exact && threads == 1)
                printf("  (batched - token by token: mean cosine %.3g, min cosine %.3g, max |diff| "
                       "%.3g, max KL %.3g, mean KL %.3g)\n", got->mean_cosine - ref.mean_cosine,
                       got->min_cosine - ref.min_cosine, got->max_abs_diff - ref.max_abs_diff,
                       got->max_kl - ref.max_kl, got->mean_kl - ref.mean_kl);
#undef NEAR
            QP_CHECK_MSG(same, "%s prompt %d threads %d: batched verify differs from token by token",
                         label, k, threads);
            if (threads == 1)
                printf("%s prompt %d (%lld ids): %lld positions, mean cosine %.9f, max |diff| %.3g, "
                       "greedy %lld/%d (first divergence %lld): %s\n", label, k,
                       (long long)prompts[k].n_ids, (long long)ref.n_positions, ref.mean_cosine,
                       ref.max_abs_diff, (long long)ref.matched, NGEN,
                       (long long)ref.first_divergence, same ? "equal" : "DIFFERENT");
        }
        qp_verify_report_free(rep);
    }
}

/* One 5-token prompt through qp_verify_run at thresholds th: it must pass. */
static void check_passes(const char *label, const qp_model *out, const qp_model *src,
                         int32_t ids[5], int64_t n_generate, const qp_verify_thresholds *th) {
    qp_verify_prompt pr = {ids, 5, NULL};
    qp_verify_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.n_threads = 1;
    vo.n_generate = n_generate;
    vo.th = *th;
    qp_verify_report *rep = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_verify_run(out, src, &pr, 1, &vo, &rep, &e) == QP_OK, "%s: %s", label, e.msg);
    QP_CHECK(rep && qp_verify_report_passed(rep));
    printf("%s: class %s, %s\n", label, th->class_name,
           rep && qp_verify_report_passed(rep) ? "pass" : "FAIL");
    qp_verify_report_free(rep);
}

static void check_bitnet_classes(void) {
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    char fdir[1024], pdir[1024];
    qp_test_path(fdir, sizeof fdir, fx, "bitnet-float");
    qp_test_path(pdir, sizeof pdir, fx, "bitnet-packed");
    if (!qp_path_exists(fdir) || !qp_path_exists(pdir)) {
        printf("BitNet threshold classes: skipped (fixtures missing in %s)\n", fx);
        return;
    }
    qp_model *fl = NULL, *pk = NULL;
    qp_err e = {0};
    QP_CHECK(qp_model_open(fdir, NULL, &fl, &e) == QP_OK);
    QP_CHECK(qp_model_open(pdir, NULL, &pk, &e) == QP_OK);
    if (fl && pk) {
        qp_verify_thresholds th;
        qp_verify_default_thresholds(pk, fl, &th);
        QP_CHECK_MSG(!strcmp(th.class_name, "low-bit") && th.min_cosine == 0.95 && th.max_kl == 0.5 &&
                     th.min_top1 == 0.8, "packed vs float: class %s", th.class_name);
        qp_verify_default_thresholds(pk, NULL, &th);
        QP_CHECK_MSG(!strcmp(th.class_name, "low-bit"), "packed alone: class %s", th.class_name);
        qp_verify_default_thresholds(pk, pk, &th);
        QP_CHECK_MSG(!strcmp(th.class_name, "identical"), "packed vs packed: class %s", th.class_name);
        qp_verify_default_thresholds(fl, pk, &th);
        QP_CHECK_MSG(!strcmp(th.class_name, "bf16") && th.min_cosine == 0.9995 && th.max_kl == 5e-3,
                     "float vs packed: class %s", th.class_name);
        /* same weights: the packed checkpoint passes against the float one */
        static int32_t ids[5] = {1, 40, 91, 7, 250};
        qp_verify_default_thresholds(pk, fl, &th);
        check_passes("BitNet packed vs float", pk, fl, ids, 8, &th);
    }
    qp_model_close(pk);
    qp_model_close(fl);
}

static void check_rdrr_q4_class(const qp_model *src, const char *src_path) {
    const char *bin_dir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    char out[1200], cmd[4096];
    snprintf(out, sizeof out, "%s/runtime_verify_rdrr_q4_%d", tmp, (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && rm -rf '%s' && '%s/quantpack' convert '%s' --to rdrr "
             "--quant Q4_K_M -o '%s' >/dev/null 2>&1", tmp, out, bin_dir, src_path, out);
    int rc = system(cmd);
    QP_CHECK_MSG(rc == 0, "convert --to rdrr: %d", rc);
    qp_model *m = NULL;
    qp_err e = {0};
    if (rc != 0 || qp_model_open(out, NULL, &m, &e) != QP_OK) return;
    const qp_tensor *q = qp_model_find(m, "blk.0.attn_q.weight");
    QP_CHECK(q && q->decoded_copy && q->enc == QP_ENC_F32 && qp_tensor_stored_enc(q) == QP_ENC_Q4_K);
    const qp_tensor *o = qp_model_find(m, "output.weight");
    QP_CHECK(o && !o->decoded_copy && qp_tensor_stored_enc(o) == QP_ENC_F16);
    qp_verify_thresholds th;
    qp_verify_default_thresholds(m, src, &th);
    QP_CHECK_MSG(!strcmp(th.class_name, "4-bit"), "RDRR Q4_K_M: class %s", th.class_name);
    static int32_t ids[5] = {1, 403, 407, 261, 378};
    check_passes("RDRR Q4_K_M vs stories260K.gguf", m, src, ids, 16, &th);
    qp_model_close(m);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", out);
}

int main(void) {
    check_bitnet_classes();
    const char *real = qp_test_real_dir();
    char a[1024], b[1024], c[1024];
    qp_test_path(a, sizeof a, real, "stories260K.gguf");
    qp_test_path(b, sizeof b, real, "gguf/stories260K-Q4_K_M.llamacpp.gguf");
    qp_test_path(c, sizeof c, real, "stories260K.bin");
    if (!qp_path_exists(a) || !qp_path_exists(b) || !qp_path_exists(c))
        QP_SKIP("stories260K fixtures missing in %s", real);
    qp_model *src = NULL, *q4 = NULL, *bin = NULL;
    qp_err e = {0};
    QP_CHECK(qp_model_open(a, NULL, &src, &e) == QP_OK);
    QP_CHECK(qp_model_open(b, NULL, &q4, &e) == QP_OK);
    QP_CHECK(qp_model_open(c, NULL, &bin, &e) == QP_OK);
    if (src) check_rdrr_q4_class(src, a);
    if (src && bin) check_pair("stories260K.bin vs .gguf", bin, src, true);
    if (src && q4) check_pair("llama.cpp Q4_K_M (Q5_0/Q8_0/F16) vs stories260K.gguf", q4, src, false);
    /* Q8_0 and F16 made by the quantpack binary: bit for bit */
    const char *bin_dir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    const char *quants[2] = {"Q8_0", "F16"};
    for (int i = 0; i < 2; i++) {
        char out[1200], cmd[4096];
        snprintf(out, sizeof out, "%s/runtime_verify_%s.gguf", tmp, quants[i]);
        snprintf(cmd, sizeof cmd, "mkdir -p '%s' && '%s/quantpack' convert '%s' --to gguf --quant %s -f -o "
                 "'%s' >/dev/null 2>&1", tmp, bin_dir, a, quants[i], out);
        int rc = system(cmd);
        QP_CHECK_MSG(rc == 0, "convert %s: %d", quants[i], rc);
        qp_model *m = NULL;
        if (rc == 0 && qp_model_open(out, NULL, &m, &e) == QP_OK) {
            char label[64];
            snprintf(label, sizeof label, "%s vs stories260K.gguf", quants[i]);
            check_pair(label, m, src, true);
        }
        qp_model_close(m);
    }
    qp_model_close(bin);
    qp_model_close(q4);
    qp_model_close(src);
    return qp_test_finish();
}
