/* Placeholder until the safetensors reader lands (issue 2). */
#include "core/model_internal.h"

qp_status qp_safetensors_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e) {
    (void)m;
    (void)o;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: safetensors reader not built yet", path);
}
