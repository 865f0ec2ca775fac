/* Placeholder until the tokenizer.model / tokenizer.bin readers land (issue 2). */
#include "core/model_internal.h"

qp_status qp_vocab_read_spm_model(qp_model *m, const char *path, qp_err *e) {
    (void)m;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tokenizer.model reader not built yet", path);
}

qp_status qp_vocab_read_llama2c_bin(qp_model *m, const char *path, qp_err *e) {
    (void)m;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: llama2.c tokenizer reader not built yet", path);
}
