/* RoPE conventions on the generated HF models (qp-gen-fixtures, $QP_FIXTURES_DIR): each HF
 * checkpoint (rotate-halves, QP_ROPE_NEOX) must give the same logits as its GGUF-convention twin
 * built here by permuting the q/k rows (and q/k biases) of every head as llama.cpp's converter
 * does (converters/recipes.md "HF and llama.cpp sources": GGUF row h*hd + 2i + p = HF row
 * h*hd + p*hd/2 + i) and flipping rope_style to QP_ROPE_NORM (adjacent pairs). Also runs
 * qp_verify_run on the pair: class "identical", verdict pass. */
#include <stdint.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"

#define MAXBUF 64

typedef struct twin {
    qp_model *m;
    uint8_t *bufs[MAXBUF];
    int nbufs;
} twin;

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static qp_status make_twin(const qp_model *src, twin *tw, qp_err *e) {
    memset(tw, 0, sizeof *tw);
    qp_status s = qp_model_new(QP_FORMAT_GGUF, "gguf-twin", &tw->m, e);
    if (s != QP_OK) return s;
    qp_model *m = tw->m;
    m->arch = src->arch;
    m->arch.rope_style = QP_ROPE_NORM;
    m->arch_name = src->arch_name;
    m->vocab = src->vocab; /* borrowed (arena of src, which outlives the twin): the same tokenizer */
    int64_t hd = src->arch.head_dim > 0 ? src->arch.head_dim : src->arch.hidden / src->arch.n_heads;
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const qp_tensor *st = &src->tensors[i];
        const char *nm = st->canon ? st->canon : st->name;
        qp_tensor *t;
        s = qp_model_add_tensor(m, nm, strlen(nm), &t, e);
        if (s != QP_OK) return s;
        t->canon = qp_arena_strdup(qp_model_arena(m), nm);
        t->enc = st->enc;
        t->n_dims = st->n_dims;
        memcpy(t->ne, st->ne, sizeof t->ne);
        t->data = st->data;
        t->nbytes = st->nbytes;
        bool q = ends_with(nm, "attn_q.weight") || ends_with(nm, "attn_q.bias");
        bool k = ends_with(nm, "attn_k.weight") || ends_with(nm, "attn_k.bias");
        if (!q && !k) continue;
        /* rows: ne[1] for a matrix, single elements for a bias */
        bool bias = ends_with(nm, ".bias");
        int64_t rows = bias ? st->ne[0] : st->ne[1];
        size_t rb;
        if (bias) qp_encoding_row_bytes(st->enc, 1, &rb);
        else qp_encoding_row_bytes(st->enc, st->ne[0], &rb);
        int64_t heads = rows / hd;
        uint8_t *buf = malloc(st->nbytes);
        if (!buf || tw->nbufs == MAXBUF) return qp_fail(e, QP_ERR_NOMEM, "twin: out of memory");
        tw->bufs[tw->nbufs++] = buf;
        for (int64_t h = 0; h < heads; h++)
            for (int64_t p = 0; p < 2; p++)
                for (int64_t r = 0; r < hd / 2; r++)
                    memcpy(buf + (size_t)(h * hd + 2 * r + p) * rb,
                           st->data + (size_t)(h * hd + p * hd / 2 + r) * rb, rb);
        t->data = buf;
    }
    return qp_model_finish(m, e);
}

static void free_twin(twin *tw) {
    for (int i = 0; i < tw->nbufs; i++) free(tw->bufs[i]);
    qp_model_close(tw->m);
}

static void check(const char *dir, const char *name) {
    char path[1024];
    qp_test_path(path, sizeof path, dir, name);
    qp_model *hf = NULL;
    qp_err e = {0};
    if (qp_model_open(path, NULL, &hf, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", path, e.msg);
        return;
    }
    QP_CHECK_MSG(hf->arch.rope_style == QP_ROPE_NEOX, "%s: HF checkpoint not marked NEOX", name);
    twin tw;
    if (make_twin(hf, &tw, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s twin: %s", name, e.msg);
        free_twin(&tw);
        qp_model_close(hf);
        return;
    }
    qp_runtime *a = NULL, *b = NULL;
    qp_runtime_opts o = {.n_threads = 2, .n_ctx = 64, .exact = true};
    if (qp_runtime_new(hf, &o, &a, &e) != QP_OK || qp_runtime_new(tw.m, &o, &b, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", name, e.msg);
    } else {
        int64_t nv = qp_runtime_get_config(a)->vocab;
        int32_t tok = hf->arch.bos_id >= 0 ? hf->arch.bos_id : 1;
        double worst = 0, scale = 0;
        int same_top1 = 1;
        for (int p = 0; p < 24; p++) {
            float *la, *lb;
            if (qp_runtime_forward(a, tok, p, &la, &e) != QP_OK ||
                qp_runtime_forward(b, tok, p, &lb, &e) != QP_OK) {
                QP_CHECK_MSG(false, "%s: %s", name, e.msg);
                break;
            }
            for (int64_t i = 0; i < nv; i++) {
                worst = fmax(worst, fabs((double)la[i] - lb[i]));
                scale = fmax(scale, fabs((double)la[i]));
            }
            int32_t ta = qp_logits_argmax(la, nv), tb = qp_logits_argmax(lb, nv);
            same_top1 &= ta == tb;
            tok = ta;
        }
        QP_CHECK_MSG(worst <= 1e-4 * fmax(1.0, scale), "%s: HF and GGUF-convention twin differ by "
                     "%g (logit scale %g)", name, worst, scale);
        QP_CHECK_MSG(same_top1, "%s: greedy tokens differ", name);
        printf("%s: HF (NEOX) vs GGUF twin (NORM): max |diff| %.3g over 24 positions, logit "
               "scale %.3g\n", name, worst, scale);
        /* the same pair through verify */
        int32_t prompt[3] = {hf->arch.bos_id >= 0 ? hf->arch.bos_id : 1, 5, 9};
        qp_verify_prompt vp = {prompt, 3, NULL};
        qp_verify_opts vo;
        memset(&vo, 0, sizeof vo);
        vo.n_threads = 2;
        vo.n_generate = 8;
        qp_verify_default_thresholds(tw.m, hf, &vo.th);
        QP_CHECK_MSG(strcmp(vo.th.class_name, "identical") == 0, "class %s", vo.th.class_name);
        qp_verify_report *rep = NULL;
        if (qp_verify_run(tw.m, hf, &vp, 1, &vo, &rep, &e) == QP_OK) {
            QP_CHECK_MSG(qp_verify_report_passed(rep), "%s: verify failed: %s", name,
                         qp_verify_report_reasons(rep));
            const qp_verify_prompt_result *pr = qp_verify_report_prompt(rep, 0);
            QP_CHECK(pr && pr->n_positions == 3 + 8 - 1 && pr->first_divergence == -1 &&
                     pr->matched == 8);
        } else {
            QP_CHECK_MSG(false, "%s: verify: %s", name, e.msg);
        }
        qp_verify_report_free(rep);
        /* the same weights under a changed tokenizer: verify fails and says what differs */
        const qp_vocab good = tw.m->vocab;
        char **toks = malloc((size_t)good.n_tokens * sizeof *toks);
        uint32_t *lens = malloc((size_t)good.n_tokens * sizeof *lens);
        memcpy(toks, good.tokens, (size_t)good.n_tokens * sizeof *toks);
        memcpy(lens, good.token_lens, (size_t)good.n_tokens * sizeof *lens);
        char empty[1] = "";
        for (int k = 0; k < 4; k++) {
            qp_vocab v = good;
            const char *want = NULL;
            switch (k) {
            case 0: v.bos_id = good.bos_id + 1; want = "BOS id"; break;
            case 1: v.tokens = toks; v.token_lens = lens; toks[7] = empty; lens[7] = 0; want = "token 7"; break;
            case 2: v.model = QP_TOK_NONE; want = "the output's is none"; break;
            default: v.eos_id = -1; want = "EOS id -1"; break;
            }
            tw.m->vocab = v;
            rep = NULL;
            if (qp_verify_run(tw.m, hf, &vp, 1, &vo, &rep, &e) == QP_OK) {
                QP_CHECK_MSG(!qp_verify_report_passed(rep) &&
                                 strstr(qp_verify_report_reasons(rep), want) != NULL,
                             "%s: changed tokenizer %d: %s", name, k, qp_verify_report_reasons(rep));
            } else {
                QP_CHECK_MSG(false, "%s: verify: %s", name, e.msg);
            }
            qp_verify_report_free(rep);
            toks[7] = good.tokens[7];
            lens[7] = good.token_lens[7];
        }
        tw.m->vocab = good;
        free(toks);
        free(lens);
    }
    qp_runtime_free(a);
    qp_runtime_free(b);
    free_twin(&tw);
    qp_model_close(hf);
}

int main(void) {
    const char *dir = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    char probe[1024];
    qp_test_path(probe, sizeof probe, dir, "llama-tied/config.json");
    if (!qp_path_exists(probe)) QP_SKIP("generated fixtures not found in %s (qp-gen-fixtures)", dir);
    check(dir, "llama-tied");
    check(dir, "llama-gqa-untied");
    check(dir, "qwen2");
    check(dir, "bitnet-float");
    return qp_test_finish();
}
