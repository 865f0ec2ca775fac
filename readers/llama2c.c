/* Placeholder until the llama2c reader lands (issue 2). */
#include "core/model_internal.h"

qp_status qp_llama2c_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    (void)m;
    (void)o;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: llama2c reader not built yet", path);
}

bool qp_llama2c_probe(const uint8_t *head, size_t head_len, uint64_t file_size) {
    (void)head;
    (void)head_len;
    (void)file_size;
    return false;
}
