/* Sticky first error: objects that take many calls (writers, output files) keep their first
 * failure in a qp_err of their own and return it again from every later call, so a caller may
 * check only the last call (as zstd's streaming API and writers/gguf_writer.h promise).
 * Internal (core/). */
#ifndef QP_CORE_STICKY_H
#define QP_CORE_STICKY_H

#include "quantpack/status.h"

/* Records (s, message) in *sticky unless it already holds a failure, then copies the sticky
 * failure (the first one) to e. Returns its status. */
QP_NODISCARD qp_status qp_sticky_fail(qp_err *sticky, qp_err *e, qp_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Records a failure reported by a callee in `from` (status and message) the same way. */
QP_NODISCARD qp_status qp_sticky_take(qp_err *sticky, qp_err *e, const qp_err *from);
/* The sticky state: QP_OK while healthy; otherwise copies the first failure to e. */
QP_NODISCARD qp_status qp_sticky_check(const qp_err *sticky, qp_err *e);

#endif
