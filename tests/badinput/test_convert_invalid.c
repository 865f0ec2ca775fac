/* Issue 11, item 8: `convert` never writes a model the runtime would reject. Each case below is
 * built from the generated llama-tied fixture, both as a Hugging Face folder (config.json +
 * model.safetensors) and as a GGUF file, and converted to every target (GGUF, RDRR, .bullet,
 * TRLM for the folder; gguf-to-rdrr for the file): the bad ones must exit 3 with the field or
 * tensor named and leave no output; the good one converts (so the harness can fail). A tensor
 * with a zero dimension (llama.cpp would call the file dims_zero.gguf) is bad input (3), never an
 * internal error (5). NaN/Inf weights are refused unless --allow-nonfinite. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "writers/gguf_writer.h"
#include "writers/safetensors_writer.h"

typedef enum case_kind {
    GOOD_BASE,
    BAD_HEADS_0,        /* num_attention_heads / llama.attention.head_count 0 */
    BAD_LAYERS_2_31,    /* num_hidden_layers / llama.block_count 2^31 */
    BAD_NO_ATTN_V,      /* blk.0.attn_v.weight missing */
    BAD_EMBD_0_ROWS,    /* token_embd.weight [0, 64] */
    BAD_DIMS_ZERO_NORM, /* blk.1.ffn_norm.weight [0]: a zero dimension in a 1-D tensor */
    BAD_NAN_WEIGHT,     /* blk.1.ffn_up.weight element 7 NaN */
    BAD_INF_NORM,       /* output_norm.weight element 3 +Inf */
    CASE_COUNT
} case_kind;

static const struct {
    const char *label;
    const char *cfg_key;     /* config.json integer changed (HF) */
    const char *gguf_key;    /* u32 changed (GGUF) */
    uint64_t value;
    const char *hf_tensor;   /* tensor dropped, reshaped or poisoned */
    const char *gguf_tensor;
    int64_t shape0;          /* reshaped: outermost dimension (HF order) becomes this */
    int64_t bad_index;       /* >= 0: element set to bad_value */
    float bad_value;
    const char *named;       /* the message names this */
} k_case[CASE_COUNT] = {
    [GOOD_BASE] = {"good", NULL, NULL, 0, NULL, NULL, -1, -1, 0, NULL},
    [BAD_HEADS_0] = {"heads0", "num_attention_heads", "llama.attention.head_count", 0, NULL, NULL,
                     -1, -1, 0, "head"},
    [BAD_LAYERS_2_31] = {"layers2e31", "num_hidden_layers", "llama.block_count", 1ull << 31, NULL,
                         NULL, -1, -1, 0, "2147483648"},
    [BAD_NO_ATTN_V] = {"no_attn_v", NULL, NULL, 0, "model.layers.0.self_attn.v_proj.weight",
                       "blk.0.attn_v.weight", -1, -1, 0, "blk.0.attn_v.weight"},
    [BAD_EMBD_0_ROWS] = {"embd0", NULL, NULL, 0, "model.embed_tokens.weight", "token_embd.weight", 0,
                         -1, 0, "token_embd.weight"},
    [BAD_DIMS_ZERO_NORM] = {"dims_zero", NULL, NULL, 0, "model.layers.1.post_attention_layernorm.weight",
                            "blk.1.ffn_norm.weight", 0, -1, 0, "blk.1.ffn_norm.weight"},
    [BAD_NAN_WEIGHT] = {"nan", NULL, NULL, 0, "model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight",
                        -1, 7, NAN, "element 7"},
    [BAD_INF_NORM] = {"inf", NULL, NULL, 0, "model.norm.weight", "output_norm.weight", -1, 3, INFINITY,
                      "element 3"},
};

static bool is_nonfinite_case(case_kind k) { return k == BAD_NAN_WEIGHT || k == BAD_INF_NORM; }

static char g_src[1024], g_tmp[1024], g_bin[1024];

/* The tensor's bytes with the case applied (malloc'd), its byte count in *n and shape in ne. */
static uint8_t *case_bytes(case_kind k, const qp_tensor *t, bool hit, size_t *n) {
    size_t nb = t->nbytes;
    if (hit && k_case[k].shape0 >= 0) nb = 0;
    uint8_t *p = malloc(nb ? nb : 1);
    if (!p) exit(2);
    memcpy(p, t->data, nb);
    if (hit && k_case[k].bad_index >= 0 && t->enc == QP_ENC_F32)
        memcpy(p + 4 * k_case[k].bad_index, &k_case[k].bad_value, 4);
    *n = nb;
    return p;
}

static void replace_int(char *json, const char *key, uint64_t v) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    char *p = strstr(json, pat);
    if (!p) {
        fprintf(stderr, "config.json has no %s\n", key);
        exit(2);
    }
    p += strlen(pat);
    char *end = p;
    while (*end >= '0' && *end <= '9') end++;
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", (unsigned long long)v);
    memmove(p + nl, end, strlen(end) + 1);
    memcpy(p, num, (size_t)nl);
}

/* The tensors of src into one writer (sw: safetensors, HF names and shapes outermost first;
 * gw: GGUF) with case k applied: dropped, reshaped or poisoned. */
static void copy_tensors(case_kind k, const qp_model *src, qp_st_writer *sw, qp_gguf_writer *gw) {
    qp_err e;
    qp_err_clear(&e);
    const char *target = sw ? k_case[k].hf_tensor : k_case[k].gguf_tensor;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            QP_CHECK_EQ_INT(sw ? qp_st_writer_begin(sw, &e) : qp_gguf_writer_begin(gw, &e), QP_OK);
        for (int64_t i = 0; i < src->n_tensors; i++) {
            const qp_tensor *t = &src->tensors[i];
            bool hit = target && strcmp(t->name, target) == 0;
            if (hit && k_case[k].shape0 < 0 && k_case[k].bad_index < 0) continue; /* dropped */
            if (pass == 0) {
                int64_t ne[QP_MAX_DIMS]; /* GGUF order; HF reverses it */
                memcpy(ne, t->ne, sizeof ne);
                if (hit && k_case[k].shape0 >= 0) ne[t->n_dims - 1] = k_case[k].shape0;
                int64_t shape[QP_MAX_DIMS];
                for (int d = 0; d < t->n_dims; d++) shape[d] = ne[t->n_dims - 1 - d];
                QP_CHECK_EQ_INT(sw ? qp_st_writer_add_tensor(sw, t->name, t->enc, t->n_dims, shape, &e)
                                   : qp_gguf_writer_add_tensor(gw, t->name, t->enc, t->n_dims, ne, &e),
                                QP_OK);
            } else {
                size_t n;
                uint8_t *p = case_bytes(k, t, hit, &n);
                QP_CHECK_EQ_INT(sw ? qp_st_writer_write_tensor(sw, p, n, &e)
                                   : qp_gguf_writer_write_tensor(gw, p, n, &e), QP_OK);
                free(p);
            }
        }
    }
}

/* dir = llama-tied as an HF folder with case k applied. */
static void make_hf(case_kind k, const char *dir) {
    QP_CHECK(qp_path_remove_tree(dir, NULL) == QP_OK);
    qp_test_mkdir_p(dir);
    const char *side[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
        char a[2048], b[2048];
        snprintf(a, sizeof a, "%s/%s", g_src, side[i]);
        snprintf(b, sizeof b, "%s/%s", dir, side[i]);
        size_t n = 0;
        char *p = qp_test_read_file(a, &n);
        if (!p) continue;
        char *q = malloc(n + 64);
        memcpy(q, p, n + 1);
        if (i == 0 && k_case[k].cfg_key) replace_int(q, k_case[k].cfg_key, k_case[k].value);
        qp_test_must_write_file(b, q, strlen(q));
        free(p);
        free(q);
    }
    qp_err e;
    qp_err_clear(&e);
    qp_model *src = NULL;
    QP_CHECK_EQ_INT(qp_model_open(g_src, NULL, &src, &e), QP_OK);
    if (!src) exit(2);
    char path[2048];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    qp_st_writer *w = NULL;
    QP_CHECK_EQ_INT(qp_st_writer_new(path, &w, &e), QP_OK);
    copy_tensors(k, src, w, NULL);
    QP_CHECK_EQ_INT(qp_st_writer_finish(w, &e), QP_OK);
    qp_model_close(src);
}

/* path = base (a GGUF) with case k applied. */
static void make_gguf(case_kind k, const char *base, const char *path) {
    qp_err e;
    qp_err_clear(&e);
    qp_model *src = NULL;
    QP_CHECK_EQ_INT(qp_model_open(base, NULL, &src, &e), QP_OK);
    if (!src) exit(2);
    remove(path);
    qp_gguf_writer *w = NULL;
    QP_CHECK_EQ_INT(qp_gguf_writer_new(path, &w, &e), QP_OK);
    for (int64_t i = 0; i < src->n_meta; i++) {
        const qp_meta *md = &src->meta[i];
        if (k_case[k].gguf_key && strcmp(md->key, k_case[k].gguf_key) == 0)
            QP_CHECK_EQ_INT(qp_gguf_writer_add_u32(w, md->key, (uint32_t)k_case[k].value, &e), QP_OK);
        else
            QP_CHECK_EQ_INT(qp_gguf_writer_add_meta(w, md, &e), QP_OK);
    }
    copy_tensors(k, src, NULL, w);
    QP_CHECK_EQ_INT(qp_gguf_writer_finish(w, &e), QP_OK);
    qp_model_close(src);
}

/* Runs `quantpack ARGS SRC -o OUT` (or the alias); checks the exit code, that the message names
 * what it must, and that no output appeared when it failed. */
static void run(case_kind k, const char *what, const char *src, const char *args, const char *out,
                bool out_last, int want) {
    char log[1300], cmd[8192];
    snprintf(log, sizeof log, "%s/log.txt", g_tmp);
    QP_CHECK(qp_path_remove_tree(out, NULL) == QP_OK);
    if (out_last)
        snprintf(cmd, sizeof cmd, "%s '%s' '%s' >'%s' 2>&1", args, src, out, log);
    else
        snprintf(cmd, sizeof cmd, "'%s/quantpack' convert '%s' %s -o '%s' >'%s' 2>&1", g_bin, src,
                 args, out, log);
    int r = system(cmd);
    int rc = r != -1 && WIFEXITED(r) ? WEXITSTATUS(r) : -1;
    size_t n = 0;
    char *msg = qp_test_read_file(log, &n);
    QP_CHECK_MSG(rc == want, "%s %s: exit %d, want %d: %s", k_case[k].label, what, rc, want,
                 msg ? msg : "");
    if (want != 0) {
        QP_CHECK_MSG(!qp_path_exists(out), "%s %s: output %s written", k_case[k].label, what, out);
        QP_CHECK_MSG(msg && k_case[k].named && strstr(msg, k_case[k].named), "%s %s: '%s' not named: %s",
                     k_case[k].label, what, k_case[k].named ? k_case[k].named : "", msg ? msg : "");
    }
    free(msg);
}

int main(void) {
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    snprintf(g_src, sizeof g_src, "%s/llama-tied", fx);
    if (!qp_path_is_dir(g_src)) QP_SKIP("no generated fixtures at %s", g_src);
    snprintf(g_bin, sizeof g_bin, "%s", qp_test_env("QP_BIN_DIR", "bin"));
    snprintf(g_tmp, sizeof g_tmp, "%s/convert_invalid", qp_test_env("QP_TMP_DIR", "/tmp"));
    QP_CHECK(qp_path_remove_tree(g_tmp, NULL) == QP_OK);
    qp_test_mkdir_p(g_tmp);
    char base[1200], hf[1200], gg[1200], out[1300], args[2048];
    snprintf(base, sizeof base, "%s/base.gguf", g_tmp);
    QP_CHECK_EQ_INT(qp_test_system("'%s/quantpack' convert '%s' --to gguf --quant F32 -o '%s' "
                                   ">/dev/null 2>&1", g_bin, g_src, base), 0);

    for (case_kind k = GOOD_BASE; k < CASE_COUNT; k++) {
        int want = k == GOOD_BASE ? 0 : 3;
        snprintf(hf, sizeof hf, "%s/%s", g_tmp, k_case[k].label);
        snprintf(gg, sizeof gg, "%s/%s.gguf", g_tmp, k_case[k].label);
        make_hf(k, hf);
        make_gguf(k, base, gg);
        static const struct {
            const char *to, *args, *ext;
        } k_to[] = {
            {"gguf", "--to gguf --quant Q8_0", ".gguf"},
            {"rdrr", "--to rdrr --quant F16", ""},
            {"bullet", "--to bullet", ".bullet"},
            {"trlm", "--to trlm", ""},
        };
        for (size_t t = 0; t < sizeof k_to / sizeof k_to[0]; t++) {
            char what[64];
            snprintf(what, sizeof what, "folder -> %s", k_to[t].to);
            snprintf(out, sizeof out, "%s/out-%s%s", g_tmp, k_to[t].to, k_to[t].ext);
            run(k, what, hf, k_to[t].args, out, false, want);
            if (strcmp(k_to[t].to, "trlm") == 0) continue; /* TRLM converts HF folders only */
            snprintf(what, sizeof what, "gguf -> %s", k_to[t].to);
            run(k, what, gg, k_to[t].args, out, false, want);
        }
        snprintf(out, sizeof out, "%s/out-passthrough", g_tmp);
        snprintf(args, sizeof args, "'%s/gguf-to-rdrr'", g_bin);
        run(k, "gguf-to-rdrr", gg, args, out, true, want);
        if (is_nonfinite_case(k)) { /* accepted when asked for */
            snprintf(out, sizeof out, "%s/out-allowed.gguf", g_tmp);
            run(k, "gguf --allow-nonfinite", gg, "--to gguf --quant F16 --allow-nonfinite", out,
                false, 0);
        }
        QP_CHECK(qp_path_remove_tree(hf, NULL) == QP_OK);
        remove(gg);
    }
    QP_CHECK(qp_path_remove_tree(g_tmp, NULL) == QP_OK);
    return qp_test_finish();
}
