/* quantpack status codes and caller-owned error messages.
 *
 * Every library function that can fail returns a qp_status and, when given a non-NULL qp_err,
 * writes a message naming the file, the tensor and the byte offset involved. Library code never
 * prints and keeps no global error state; only cli/ prints and chooses exit codes. */
#ifndef QUANTPACK_STATUS_H
#define QUANTPACK_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Append-only: values are stable across versions (they appear in --json output). */
typedef enum qp_status {
    QP_OK = 0,
    QP_ERR_IO = 1,          /* open/read/write/rename failed */
    QP_ERR_NOMEM = 2,       /* allocation failed */
    QP_ERR_FORMAT = 3,      /* not this format: bad magic, unknown version */
    QP_ERR_CORRUPT = 4,     /* right format, inconsistent content: sizes, offsets, truncation */
    QP_ERR_UNSUPPORTED = 5, /* valid but not handled: unknown dtype, architecture, layout */
    QP_ERR_LIMIT = 6,       /* a value exceeds a documented limit (dims, counts, string lengths) */
    QP_ERR_ARG = 7,         /* bad argument from the caller / command line */
    QP_ERR_VERIFY = 8,      /* a parity or integrity check failed (hash, receipt threshold) */
    QP_ERR_INTERNAL = 9,    /* broken invariant; a bug */
    QP_STATUS_COUNT
} qp_status;

#define QP_ERR_MSG_MAX 1024

typedef struct qp_err {
    qp_status status;
    char msg[QP_ERR_MSG_MAX];
} qp_err;

/* Stable upper-case name such as "CORRUPT". */
const char *qp_status_name(qp_status s);

/* Records status and a printf-style message in e (when e is non-NULL) and returns s, so readers
 * can write `return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: ...", ...)`.
 * A message already recorded is kept when `e->status != QP_OK` unless QP_OK was set: the first,
 * most specific failure wins. */
qp_status qp_fail(qp_err *e, qp_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes context ("while reading X: ") to an existing message. Returns e->status. */
qp_status qp_err_prefix(qp_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void qp_err_clear(qp_err *e) {
    if (e) { e->status = QP_OK; e->msg[0] = '\0'; }
}

#ifdef __cplusplus
}
#endif
#endif
