/* qp_verify_text (include/quantpack/runtime.h): one text prompt through qp_verify_run. */
#include <string.h>

#include "quantpack/runtime.h"
#include "quantpack/tokenizer.h"

static bool has_tokenizer(const qp_model *m) {
    return m->vocab.n_tokens > 0 && m->vocab.model != QP_TOK_NONE;
}

qp_status qp_verify_text(const qp_model *out, const qp_model *src, const char *prompt,
                         const qp_verify_opts *o, qp_verify_report **rep, qp_err *e) {
    if (!out || !src || !prompt || !rep) return qp_fail(e, QP_ERR_ARG, "qp_verify_text: NULL argument");
    const qp_model *tm = has_tokenizer(src) ? src : has_tokenizer(out) ? out : NULL;
    if (!tm)
        return qp_fail(e, QP_ERR_ARG, "verify: neither %s nor %s has a tokenizer for the prompt",
                       out->path, src->path);
    qp_verify_opts vo;
    if (o) {
        vo = *o;
    } else {
        memset(&vo, 0, sizeof vo);
        vo.n_generate = 32;
        qp_verify_default_thresholds(out, src, &vo.th);
    }
    qp_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    qp_status s = qp_tokenizer_new(&tm->vocab, &tok, e);
    if (s == QP_OK) s = qp_tokenizer_encode(tok, prompt, strlen(prompt), qp_model_adds_bos(tm), false, &ids,
                                            &n, e);
    if (s == QP_OK && n == 0) s = qp_fail(e, QP_ERR_ARG, "verify: the prompt \"%.64s\" has no tokens", prompt);
    if (s == QP_OK) {
        const qp_verify_prompt vp = {ids, n, prompt};
        s = qp_verify_run(out, src, &vp, 1, &vo, rep, e);
    }
    qp_free(ids);
    qp_tokenizer_free(tok);
    return s;
}
