/* Issue 11, item 2: a converter never drops what it does not map. A Llama folder (the generated
 * llama-tied fixture) with one more tensor: Mixtral-style expert weights or router in a model
 * whose config has no experts, a Phi-3 fused qkv, a Gemma-2 extra norm each fail the plan with
 * QP_ERR_UNSUPPORTED naming the tensor (the same folder without it plans fine); a rotary inv_freq is skipped by its named rule and listed in
 * plan.skipped. The CLI: `convert` exits 3 naming the tensor and writes nothing; an architecture
 * the readers do not know is refused by name; a Mixtral config over dense tensors is refused
 * naming the missing router.
 * The runtime never drops one either: `run` and `verify` on a folder with a tensor it does not
 * read (a Llama model with an extra MLP matrix, or an unmapped tensor) exit 3 naming it; the
 * inv_freq folder (a named rule) runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "converters/convert_gguf.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "writers/safetensors_writer.h"

static char g_src[1024], g_tmp[1024];

static void copy_file(const char *from_dir, const char *to_dir, const char *name) {
    char a[2048], b[2048];
    snprintf(a, sizeof a, "%s/%s", from_dir, name);
    snprintf(b, sizeof b, "%s/%s", to_dir, name);
    size_t n = 0;
    void *p = qp_test_read_file(a, &n);
    if (!p) return;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_file_write_atomic(b, p, n, &e), QP_OK);
    free(p);
}

/* dir = llama-tied's tensors (+ extra, F32 [rows, cols], when extra != NULL) and its side files. */
static void make_model(const char *dir, const char *extra, int64_t rows, int64_t cols) {
    QP_CHECK_EQ_INT(qp_path_remove_tree(dir, NULL), QP_OK);
    qp_test_mkdir_p(dir);
    const char *side[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) copy_file(g_src, dir, side[i]);
    qp_err e;
    qp_err_clear(&e);
    qp_model *src = NULL;
    QP_CHECK_EQ_INT(qp_model_open(g_src, NULL, &src, &e), QP_OK);
    if (!src) return;
    char path[2048];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    qp_st_writer *w = NULL;
    QP_CHECK_EQ_INT(qp_st_writer_new(path, &w, &e), QP_OK);
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const qp_tensor *t = &src->tensors[i];
        int64_t shape[QP_MAX_DIMS];
        for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
        QP_CHECK_EQ_INT(qp_st_writer_add_tensor(w, t->name, t->enc, t->n_dims, shape, &e), QP_OK);
    }
    int64_t eshape[2] = {rows, cols};
    if (extra) QP_CHECK_EQ_INT(qp_st_writer_add_tensor(w, extra, QP_ENC_F32, cols ? 2 : 1, eshape, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_st_writer_begin(w, &e), QP_OK);
    for (int64_t i = 0; i < src->n_tensors; i++)
        QP_CHECK_EQ_INT(qp_st_writer_write_tensor(w, src->tensors[i].data, src->tensors[i].nbytes, &e), QP_OK);
    if (extra) {
        size_t n = (size_t)(rows * (cols ? cols : 1)) * sizeof(float);
        float *z = calloc(1, n);
        QP_CHECK_EQ_INT(qp_st_writer_write_tensor(w, z, n, &e), QP_OK);
        free(z);
    }
    QP_CHECK_EQ_INT(qp_st_writer_finish(w, &e), QP_OK);
    qp_model_close(src);
}

/* `quantpack run DIR` and `quantpack verify DIR --against g_src`: exit 3 with want in the message
 * (want NULL: run exits 0). */
static void check_runtime(const char *bin, const char *dir, const char *want) {
    char cmd[4096];
    const char *verbs[2] = {"run '%s' --ids '1 2' -n 1 -t 1", "verify '%s' --against '%s' -t 1"};
    for (int v = 0; v < (want ? 2 : 1); v++) {
        char args[2600], log[1300];
        snprintf(args, sizeof args, verbs[v], dir, g_src);
        snprintf(log, sizeof log, "%s/runtime.log", g_tmp);
        snprintf(cmd, sizeof cmd, "'%s/quantpack' %s >'%s' 2>&1", bin, args, log);
        int rc = system(cmd);
        int want_rc = want ? 3 : 0;
        QP_CHECK_MSG(WIFEXITED(rc) && WEXITSTATUS(rc) == want_rc, "%s: status %d, %d expected", args,
                     rc, want_rc);
        size_t n = 0;
        char *text = qp_test_read_file(log, &n);
        QP_CHECK_MSG(text && (!want || (strstr(text, want) && strstr(text, "not used by the runtime"))),
                     "%s: no \"%s\" in: %s", args, want ? want : "", text ? text : "(no output)");
        free(text);
    }
}

/* Plans dir as GGUF Q8_0: the status, the message, the number of skipped tensors. */
static qp_status plan(const char *dir, char *msg, size_t cap, int64_t *n_skipped, const char **rule) {
    qp_err e;
    qp_err_clear(&e);
    qp_model *m = NULL;
    qp_status s = qp_model_open(dir, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s: %s", dir, e.msg);
    if (s != QP_OK) return s;
    qp_convert_opts co = {0};
    co.quant = QP_QUANT_Q8_0;
    co.threads = 1;
    qp_plan p;
    memset(&p, 0, sizeof p);
    s = qp_convert_gguf_plan(m, &co, &p, &e);
    snprintf(msg, cap, "%s", e.msg);
    *n_skipped = s == QP_OK ? p.n_skipped : -1;
    static char rule_copy[256];
    rule_copy[0] = '\0';
    if (s == QP_OK && p.n_skipped > 0) snprintf(rule_copy, sizeof rule_copy, "%s", p.skipped[0].rule);
    *rule = rule_copy;
    if (s == QP_OK) qp_plan_free(&p);
    qp_model_close(m);
    return s;
}

int main(void) {
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    snprintf(g_src, sizeof g_src, "%s/llama-tied", fx);
    if (!qp_path_is_dir(g_src)) QP_SKIP("no generated fixtures at %s", g_src);
    snprintf(g_tmp, sizeof g_tmp, "%s/unmapped", qp_test_env("QP_TMP_DIR", "/tmp"));
    qp_test_mkdir_p(g_tmp);
    char dir[1200], msg[QP_ERR_MSG_MAX];
    int64_t n_skipped;
    const char *rule;

    snprintf(dir, sizeof dir, "%s/plain", g_tmp);
    make_model(dir, NULL, 0, 0);
    QP_CHECK_EQ_INT(plan(dir, msg, sizeof msg, &n_skipped, &rule), QP_OK);
    QP_CHECK_EQ_INT(n_skipped, 0);

    static const struct {
        const char *name;
        int64_t rows, cols;
    } k_unmapped[] = {
        /* Mixtral expert and router in a model whose config has no experts */
        {"model.layers.0.block_sparse_moe.experts.0.w1.weight", 128, 64},
        {"model.layers.0.block_sparse_moe.gate.weight", 4, 64},
        {"model.layers.0.self_attn.qkv_proj.weight", 192, 64},            /* Phi-3 fused qkv */
        {"model.layers.0.mlp.gate_up_proj.weight", 256, 64},              /* Phi-3 fused gate_up */
        {"model.layers.0.pre_feedforward_layernorm.weight", 64, 0},       /* Gemma-2 extra norm */
    };
    for (size_t i = 0; i < sizeof k_unmapped / sizeof k_unmapped[0]; i++) {
        snprintf(dir, sizeof dir, "%s/extra%zu", g_tmp, i);
        make_model(dir, k_unmapped[i].name, k_unmapped[i].rows, k_unmapped[i].cols);
        QP_CHECK_EQ_INT(plan(dir, msg, sizeof msg, &n_skipped, &rule), QP_ERR_UNSUPPORTED);
        QP_CHECK_MSG(strstr(msg, k_unmapped[i].name) && strstr(msg, "no place in the output"),
                     "%s: %s", k_unmapped[i].name, msg);
    }
    const char *bin = qp_test_env("QP_BIN_DIR", "bin");
    /* the runtime refuses what it does not read, by name: an unmapped tensor (its HF name) and
     * a mapped one no graph of ours reads (its GGUF name) */
    check_runtime(bin, g_src, NULL);
    snprintf(dir, sizeof dir, "%s/extra0", g_tmp);
    check_runtime(bin, dir, k_unmapped[0].name);
    snprintf(dir, sizeof dir, "%s/unread", g_tmp);
    make_model(dir, "model.layers.1.mlp.down_proj.weight_scale", 1, 0);
    check_runtime(bin, dir, "blk.1.ffn_down.weight_scale");

    /* an o_proj bias alone (no q/k/v ones): the runtime adds it (runs); TRLM and .bullet
     * cannot hold it and refuse it (exit 3, nothing written) */
    snprintf(dir, sizeof dir, "%s/o_bias", g_tmp);
    make_model(dir, "model.layers.1.self_attn.o_proj.bias", 64, 0);
    check_runtime(bin, dir, NULL);
    static const char *const k_no_bias[] = {"trlm", "bullet"};
    for (size_t i = 0; i < sizeof k_no_bias / sizeof k_no_bias[0]; i++) {
        char cmd2[4096], out2[1300];
        snprintf(out2, sizeof out2, "%s/o_bias.%s", g_tmp, k_no_bias[i]);
        snprintf(cmd2, sizeof cmd2, "'%s/quantpack' convert '%s' --to %s -o '%s' 2>&1 | grep -q "
                 "'bias'", bin, dir, k_no_bias[i], out2);
        QP_CHECK_MSG(system(cmd2) == 0, "convert --to %s of a model with an o_proj bias: no refusal "
                     "naming the bias", k_no_bias[i]);
        QP_CHECK_MSG(!qp_path_exists(out2), "%s written", out2);
    }

    /* a named rule: skipped, listed, with the rule's text */
    snprintf(dir, sizeof dir, "%s/inv_freq", g_tmp);
    make_model(dir, "model.layers.0.self_attn.rotary_emb.inv_freq", 8, 0);
    QP_CHECK_EQ_INT(plan(dir, msg, sizeof msg, &n_skipped, &rule), QP_OK);
    QP_CHECK_EQ_INT(n_skipped, 1);
    QP_CHECK_MSG(strstr(rule, "inv_freq") != NULL, "rule: %s", rule);
    check_runtime(bin, dir, NULL);

    /* the CLI: exit 3 naming the tensor, nothing written */
    char cmd[4096], out[1300];
    snprintf(out, sizeof out, "%s/experts.gguf", g_tmp);
    remove(out);
    snprintf(cmd, sizeof cmd, "'%s/quantpack' convert '%s/extra0' --to gguf --quant Q8_0 -o '%s' "
             ">/dev/null 2>&1", bin, g_tmp, out);
    int rc = system(cmd);
    QP_CHECK_MSG(WIFEXITED(rc) && WEXITSTATUS(rc) == 3, "convert with experts: status %d", rc);
    QP_CHECK(!qp_path_exists(out));
    /* an architecture the readers do not know is refused by name, not converted as another;
     * a Mixtral config over a dense model's tensors: refused naming the missing router */
    static const struct { const char *arch, *want; } k_arch[] = {
        {"GPTNeoXForCausalLM", "not supported for conversion"},
        {"MixtralForCausalLM", "blk.0.ffn_gate_inp.weight' needed by the runtime is missing"},
    };
    for (size_t ai = 0; ai < sizeof k_arch / sizeof k_arch[0]; ai++) {
    snprintf(dir, sizeof dir, "%s/arch%zu", g_tmp, ai);
    make_model(dir, NULL, 0, 0);
    char cfg[1300];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    size_t n = 0;
    char *text = qp_test_read_file(cfg, &n);
    QP_CHECK(text != NULL);
    char *at = text ? strstr(text, "LlamaForCausalLM") : NULL;
    QP_CHECK(at != NULL);
    if (at) {
        qp_err e;
        qp_err_clear(&e);
        char *fixed = malloc(n + 16);
        size_t pre = (size_t)(at - text);
        memcpy(fixed, text, pre);
        int k = snprintf(fixed + pre, n + 16 - pre, "%s%s", k_arch[ai].arch, at + strlen("LlamaForCausalLM"));
        QP_CHECK_EQ_INT(qp_file_write_atomic(cfg, fixed, pre + (size_t)k, &e), QP_OK);
        free(fixed);
    }
    free(text);
    snprintf(cmd, sizeof cmd, "'%s/quantpack' convert '%s' --to gguf --quant F16 -o '%s' 2>&1 | "
             "grep -q \"%s\"", bin, dir, out, k_arch[ai].want);
    QP_CHECK_MSG(system(cmd) == 0, "%s over llama tensors: no \"%s\"", k_arch[ai].arch, k_arch[ai].want);
    QP_CHECK(!qp_path_exists(out));
    }
    QP_CHECK_EQ_INT(qp_path_remove_tree(g_tmp, NULL), QP_OK);
    return qp_test_finish();
}
