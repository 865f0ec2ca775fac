/* qp_hf_folder_write (converters/hf_folder.c, the first step of convert --to trlm from a GGUF,
 * llama2.c or RDRR source): the written Hugging Face folder must compute what its source computes.
 *  - fixtures llama-gqa-untied (rotate-pairs GGUF: q/k rows permuted by our GGUF writer, which
 *    golden tests hold to llama.cpp's bytes; 4 q heads / 2 kv heads) and qwen2 (rotate-halves,
 *    q/k/v biases): HF folder -> GGUF F32 -> HF folder; every logit of the round trip equals the
 *    ORIGINAL HF folder's (not our output's) and config.json reads back to the same arch;
 *  - convert --to trlm from that GGUF and from an RDRR F32 package of the fixture writes the
 *    same qmodel.tensors and rope.cache bytes as from the HF folder itself;
 *  - the real stories260K.bin (llama2.c, rotate pairs), when $QP_REAL_FIXTURES has it: the HF
 *    folder's logits equal the checkpoint's (llama2.c oracles pin the checkpoint's own run), and
 *    convert --to trlm --quant q8_0 of it passes `quantpack verify` against the checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "converters/hf_folder.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

static const char *g_bin, *g_fix, *g_tmp;
enum { NP = 8 };

static qp_model *open_model(const char *path, const char *tok) {
    qp_open_opts oo = {0};
    oo.tokenizer_path = tok;
    qp_model *m = NULL;
    qp_err e;
    if (qp_model_open(path, &oo, &m, &e) != QP_OK) {
        fprintf(stderr, "open %s: %s\n", path, e.msg);
        return NULL;
    }
    return m;
}

/* NP prompt tokens (spread over the vocabulary) -> NP x vocab logits. */
static float *logits(const qp_model *m) {
    qp_runtime *rt = NULL;
    qp_err e;
    qp_runtime_opts o = {.n_threads = 1, .n_ctx = 64, .exact = true};
    if (qp_runtime_new(m, &o, &rt, &e) != QP_OK) {
        fprintf(stderr, "runtime: %s\n", e.msg);
        return NULL;
    }
    const int64_t V = m->arch.vocab;
    float *all = calloc((size_t)(NP * V), sizeof *all), *lg = NULL;
    qp_status s = QP_OK;
    for (int i = 0; i < NP && s == QP_OK; i++) {
        s = qp_runtime_forward(rt, (int32_t)((1 + 37 * i) % V), i, &lg, &e);
        if (s == QP_OK) memcpy(all + (size_t)i * V, lg, (size_t)V * sizeof *all);
    }
    QP_CHECK_MSG(s == QP_OK, "forward: %s", e.msg);
    qp_runtime_free(rt);
    return all;
}

/* src -> HF folder dir; its logits against ref's: max |diff| <= tol, same arch. */
static void check_folder(const char *what, const qp_model *src, const qp_model *ref, const char *dir, double tol) {
    qp_err e;
    mkdir(dir, 0755);
    QP_CHECK_MSG(qp_hf_folder_write(src, dir, &e) == QP_OK, "%s: %s", what, e.msg);
    qp_model *hf = open_model(dir, NULL);
    QP_CHECK_MSG(hf != NULL, "%s: the folder does not open", what);
    if (!hf) return;
    const qp_arch *a = &hf->arch, *b = &ref->arch;
    QP_CHECK_MSG(a->family == b->family && a->hidden == b->hidden && a->intermediate == b->intermediate &&
                     a->n_layers == b->n_layers && a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads &&
                     a->head_dim == b->head_dim && a->vocab == b->vocab && a->norm_eps == b->norm_eps &&
                     a->rope_theta == b->rope_theta && a->tie_embeddings == b->tie_embeddings &&
                     a->qkv_bias == b->qkv_bias && a->rope_style == QP_ROPE_NEOX,
                 "%s: config.json does not read back to the source's arch", what);
    float *x = logits(hf), *y = logits(ref);
    double md = 0;
    for (size_t i = 0; x && y && i < (size_t)(NP * b->vocab); i++) {
        double d = fabs((double)x[i] - y[i]);
        if (d > md || d != d) md = d;
    }
    printf("%s: max |logit diff| %.3g (tolerance %.3g)\n", what, md, tol);
    QP_CHECK_MSG(x && y && md <= tol, "%s: max |diff| %g", what, md);
    free(x);
    free(y);
    qp_model_close(hf);
}

static void round_trip(const char *name) {
    char src[512], gguf[512], dir[512], cmd[2048];
    snprintf(src, sizeof src, "%s/%s", g_fix, name);
    snprintf(gguf, sizeof gguf, "%s/hf_folder_%s.gguf", g_tmp, name);
    snprintf(dir, sizeof dir, "%s/hf_folder_%s", g_tmp, name);
    snprintf(cmd, sizeof cmd, "%s/quantpack convert %s --to gguf --quant F32 -f -o %s >/dev/null", g_bin, src, gguf);
    QP_CHECK_EQ_INT(system(cmd), 0);
    qp_model *g = open_model(gguf, NULL), *ref = open_model(src, NULL);
    QP_CHECK(g && ref);
    if (g && ref) check_folder(name, g, ref, dir, 0);
    qp_model_close(g);
    qp_model_close(ref);
}

static bool same_file(const char *a, const char *b) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cmp -s %.600s %.600s", a, b);
    return system(cmd) == 0;
}

/* convert --to trlm from the HF folder, its GGUF F32 and an RDRR F32 package: the same bytes. */
static void trlm_from_every_source(const char *name) {
    char src[512], cmd[2048], a[600], b[600];
    const char *kinds[] = {"gguf", "rdrr"};
    snprintf(src, sizeof src, "%s/%s", g_fix, name);
    snprintf(cmd, sizeof cmd, "%s/quantpack convert %s --to trlm -f -o %s/hf_folder_%s.trlm >/dev/null &&"
             " %s/quantpack convert %s --to rdrr --quant F32 -f -o %s/hf_folder_%s.rdrr >/dev/null &&"
             " %s/quantpack convert %s/hf_folder_%s.gguf --to trlm -f -o %s/hf_folder_%s.gguf.trlm >/dev/null &&"
             " %s/quantpack convert %s/hf_folder_%s.rdrr --to trlm -f -o %s/hf_folder_%s.rdrr.trlm >/dev/null",
             g_bin, src, g_tmp, name, g_bin, src, g_tmp, name, g_bin, g_tmp, name, g_tmp, name, g_bin, g_tmp,
             name, g_tmp, name);
    QP_CHECK_EQ_INT(system(cmd), 0);
    for (int k = 0; k < 2; k++)
        for (int f = 0; f < 2; f++) {
            const char *file = f ? "rope.cache" : "qmodel.tensors";
            snprintf(a, sizeof a, "%s/hf_folder_%s.trlm/%s", g_tmp, name, file);
            snprintf(b, sizeof b, "%s/hf_folder_%s.%s.trlm/%s", g_tmp, name, kinds[k], file);
            QP_CHECK_MSG(same_file(a, b), "%s: %s from the %s differs from the HF folder's", name, file, kinds[k]);
        }
    snprintf(a, sizeof a, "%s/hf_folder_%s.gguf.trlm.hf-source", g_tmp, name);
    QP_CHECK_MSG(!qp_path_exists(a), "the staging folder %s was left behind", a);
}

int main(void) {
    g_bin = qp_test_env("QP_BIN_DIR", "bin");
    g_fix = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    g_tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    char p[600], tok[600], dir[600];
    snprintf(p, sizeof p, "%s/llama-gqa-untied/config.json", g_fix);
    if (!qp_path_exists(p)) QP_SKIP("fixtures not generated (%s)", g_fix);
    mkdir(g_tmp, 0755);
    round_trip("llama-gqa-untied");
    round_trip("qwen2");
    trlm_from_every_source("llama-gqa-untied");
    const char *real = qp_test_real_dir();
    qp_test_path(p, sizeof p, real, "stories260K.bin");
    qp_test_path(tok, sizeof tok, real, "tok512.bin");
    if (qp_path_exists(p)) {
        qp_model *m = open_model(p, tok);
        QP_CHECK(m != NULL);
        snprintf(dir, sizeof dir, "%s/hf_folder_stories260K", g_tmp);
        if (m) check_folder("stories260K.bin", m, m, dir, 1e-4);
        qp_model_close(m);
        char cmd[3000];
        snprintf(cmd, sizeof cmd, "%s/quantpack convert %s --tokenizer %s --to trlm --quant q8_0 -f -o %s/hf_folder_s260.trlm"
                 " >/dev/null && %s/quantpack verify %s/hf_folder_s260.trlm --against %s --tokenizer %s | tail -n 2",
                 g_bin, p, tok, g_tmp, g_bin, g_tmp, p, tok);
        QP_CHECK_MSG(system(cmd) == 0, "stories260K.bin -> TRLM q8_0 does not verify against the checkpoint");
    }
    return qp_test_finish();
}
