#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "quantpack/quantpack.h"

static const char *const k_status_names[QP_STATUS_COUNT] = {
    "OK", "IO", "NOMEM", "FORMAT", "CORRUPT", "UNSUPPORTED", "LIMIT", "ARG", "VERIFY", "INTERNAL",
    "CANCELLED",
};

const char *qp_status_name(qp_status s) {
    if ((unsigned)s >= QP_STATUS_COUNT) return "UNKNOWN";
    return k_status_names[s];
}

qp_status qp_fail(qp_err *e, qp_status s, const char *fmt, ...) {
    if (!e || s == QP_OK) return s;
    if (e->status != QP_OK) return e->status; /* keep the first, most specific failure */
    e->status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return s;
}

void qp_err_prefix(qp_err *e, const char *fmt, ...) {
    if (!e) return;
    char prefix[QP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    size_t pl = strnlen(prefix, sizeof prefix - 1), ml = strnlen(e->msg, sizeof e->msg - 1);
    if (pl + ml > sizeof e->msg - 1) ml = sizeof e->msg - 1 - pl;
    memmove(e->msg + pl, e->msg, ml);
    memcpy(e->msg, prefix, pl);
    e->msg[pl + ml] = '\0';
}

const char *qp_version(void) { return QP_VERSION_STRING; }
