#include <stdarg.h>
#include <string.h>

#include "cli/cli.h"

int qp_cli_exit_code(qp_status s) {
    switch (s) {
    case QP_OK: return QP_EXIT_OK;
    case QP_ERR_VERIFY: return QP_EXIT_VERIFY_FAILED;
    case QP_ERR_ARG: return QP_EXIT_USAGE;
    case QP_ERR_FORMAT:
    case QP_ERR_CORRUPT:
    case QP_ERR_UNSUPPORTED:
    case QP_ERR_LIMIT: return QP_EXIT_BAD_INPUT;
    case QP_ERR_IO:
    case QP_ERR_NOMEM: return QP_EXIT_IO;
    default: return QP_EXIT_INTERNAL;
    }
}

int qp_cli_fail(const qp_err *e) {
    fprintf(stderr, "quantpack: error [%s]: %s\n", qp_status_name(e->status),
            e->msg[0] ? e->msg : "(no detail)");
    return qp_cli_exit_code(e->status);
}

int qp_cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("quantpack: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\n(see --help)\n", stderr);
    va_end(ap);
    return QP_EXIT_USAGE;
}

bool qp_cli_is_help(const char *arg) {
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}
