/* quantpack status codes and caller-owned error messages.
 *
 * Every library function that can fail returns a qp_status and, when given a non-NULL qp_err,
 * writes a message naming the file, the tensor and the byte offset involved. Library code never
 * prints and keeps no global error state; only cli/ prints and chooses exit codes.
 *
 * One return convention (as libsodium has one):
 * - a fallible function returns qp_status and is declared QP_NODISCARD; what it produces (an
 *   object, an index, a pointer into a model) goes to an out-parameter written only on success,
 *   never as pointer-or-NULL or index-or--1. Callers pass the status on as they got it
 *   (`s = f(...); if (s != QP_OK) return s;`), never re-guess it from e (which may be NULL);
 * - a predicate returns bool, never int 1/0/-1; a lookup returns a borrowed pointer or NULL
 *   (qp_model_find), bool with an out-parameter (qp_strmap_get), or an id whose -1 already
 *   means "none" (token ids, qp_bullet_task_index);
 * - allocation helpers (qp_malloc, qp_strdup, qp_path_join) return NULL only for out of memory,
 *   as malloc does;
 * - what cannot fail returns void or its value (qp_model_add_problem, qp_err_prefix). qp_fail
 *   records a message and returns a status for `return qp_fail(...)`; it is not QP_NODISCARD. */
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
    QP_ERR_CANCELLED = 10,  /* the caller's cancellation flag was set (quantpack/convert.h) */
    QP_STATUS_COUNT
} qp_status;

/* Marks a qp_status-returning declaration: ignoring its result is a compile error under -Werror.
 * GCC warns even through a (void) cast, so a result is used, not silenced. */
#if defined(__GNUC__) || defined(__clang__)
#define QP_NODISCARD __attribute__((warn_unused_result))
#else
#define QP_NODISCARD
#endif

/* Marks a declaration of the public API (include/quantpack/ only). The library is compiled with
 * -fvisibility=hidden, so libquantpack.so exports exactly the functions declared with QP_API and
 * nothing of core/, readers/, writers/, ... (tests/e2e/test_install.sh checks both ways with nm -D).
 * Every function declared in a public header carries it. */
#if defined(__GNUC__) || defined(__clang__)
#define QP_API __attribute__((visibility("default")))
#else
#define QP_API
#endif

#define QP_ERR_MSG_MAX 1024

typedef struct qp_err {
    qp_status status;
    char msg[QP_ERR_MSG_MAX];
} qp_err;

/* Stable upper-case name such as "CORRUPT". */
QP_API const char *qp_status_name(qp_status s);

/* Records status and a printf-style message in e (when e is non-NULL) and returns s, so readers
 * can write `return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' at offset %zu: ...", ...)`.
 * A message already recorded is kept when `e->status != QP_OK` unless QP_OK was set: the first,
 * most specific failure wins. */
QP_API qp_status qp_fail(qp_err *e, qp_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes context ("while reading X: ") to an existing message; NULL e is fine. The caller
 * returns the status it already holds. */
QP_API void qp_err_prefix(qp_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void qp_err_clear(qp_err *e) {
    if (e) { e->status = QP_OK; e->msg[0] = '\0'; }
}

#ifdef __cplusplus
}
#endif
#endif
