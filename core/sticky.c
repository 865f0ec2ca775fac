/* Sticky first error (core/sticky.h). */
#include "core/sticky.h"

#include <stdarg.h>
#include <stdio.h>

qp_status qp_sticky_check(const qp_err *sticky, qp_err *e) {
    if (sticky->status == QP_OK) return QP_OK;
    return qp_fail(e, sticky->status, "%s", sticky->msg);
}

qp_status qp_sticky_fail(qp_err *sticky, qp_err *e, qp_status s, const char *fmt, ...) {
    if (sticky->status == QP_OK && s != QP_OK) {
        sticky->status = s;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sticky->msg, sizeof sticky->msg, fmt, ap);
        va_end(ap);
    }
    return qp_sticky_check(sticky, e);
}

qp_status qp_sticky_take(qp_err *sticky, qp_err *e, const qp_err *from) {
    return qp_sticky_fail(sticky, e, from->status, "%s", from->msg);
}
