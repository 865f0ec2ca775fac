#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

int qp_cli_error(qp_status s, const char *fmt, ...) {
    qp_err e;
    qp_err_clear(&e);
    e.status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    return qp_cli_fail(&e);
}

int qp_cli_flush_stdout(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return QP_EXIT_OK;
    return qp_cli_error(QP_ERR_IO, "cannot write standard output");
}

void qp_cli_warn_problems(const qp_model *m) {
    for (int64_t i = 0; i < m->n_problems; i++)
        fprintf(stderr, "quantpack: warning: %s: %s\n", m->path, m->problems[i]);
}

void qp_cli_warn_no_tokenizer(const char *out) {
    fprintf(stderr, "quantpack: warning: %s was written without a tokenizer: "
            "run and tokenize need --tokenizer FILE; pass --tokenizer to the conversion to include "
            "one\n", out);
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

qp_status qp_cli_parse_ids(const char *s, const char *seps, int32_t **out, int64_t *n_out,
                           qp_err *e) {
    int64_t cap = 16, n = 0;
    int32_t *ids = qp_malloc((size_t)cap * sizeof *ids);
    if (!ids) return qp_fail(e, QP_ERR_NOMEM, "out of memory reading token ids");
    for (const char *p = s;;) {
        p += strspn(p, seps);
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX) {
            qp_free(ids);
            return qp_fail(e, QP_ERR_ARG, "token ids must be non-negative integers");
        }
        if (n == cap) {
            int32_t *ni = qp_realloc(ids, (size_t)cap * 2 * sizeof *ni);
            if (!ni) {
                qp_free(ids);
                return qp_fail(e, QP_ERR_NOMEM, "out of memory reading token ids");
            }
            ids = ni;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n_out = n;
    return QP_OK;
}


double qp_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void qp_cli_progress_start(qp_cli_progress *p) {
    *p = (qp_cli_progress){.t0 = qp_cli_now_s(), .after = 1.0, .tty = isatty(STDERR_FILENO) == 1};
    /* test hook (tests/e2e/test_convert_progress.sh): the quiet start, in seconds */
    const char *after = getenv("QP_PROGRESS_AFTER");
    if (after) {
        char *end;
        double v = strtod(after, &end);
        if (end != after && *end == '\0' && v >= 0.0 && v <= 60.0) p->after = v;
    }
}

void qp_cli_progress_show(qp_cli_progress *p, int64_t k, int64_t n, const char *name, uint64_t done,
                          uint64_t total) {
    if (!p->tty) return;
    double t = qp_cli_now_s();
    if (!p->shown && t - p->t0 < p->after) return; /* short runs stay quiet */
    if (k < n && t - p->last < 0.5) return;
    p->last = t;
    p->shown = true;
    double el = t - p->t0;
    fprintf(stderr, "\r[%lld/%lld] %-40.40s %6.1f%%  %8.1f MB/s", (long long)k, (long long)n, name,
            total ? 100.0 * (double)done / (double)total : 100.0, el > 0 ? (double)done / 1e6 / el : 0.0);
    if (k == n) {
        fputc('\n', stderr);
        p->shown = false;
    }
    fflush(stderr);
}

void qp_cli_progress_cb(void *ud, int64_t k, int64_t n, const char *name, uint64_t done, uint64_t total) {
    qp_cli_progress_show(ud, k, n, name, done, total);
}

void qp_cli_progress_end(qp_cli_progress *p) {
    if (p->shown) fputc('\n', stderr);
    p->shown = false;
}

/* ---- outputs: the rule, stale partials, signals (core/outfile.md) --------------------------- */

int qp_cli_prepare_output(const char *path, bool force, const qp_outdir_kind *kind,
                          const char *const *inputs, size_t n) {
    const char *given[QP_CLI_MAX_INPUTS + 1];
    size_t k = 0;
    for (size_t i = 0; i < n && k < QP_CLI_MAX_INPUTS; i++)
        if (inputs[i]) given[k++] = inputs[i];
    given[k] = NULL;
    const qp_output_rule rule = {.force = force, .directory = kind != NULL, .kind = kind, .inputs = given};
    qp_err e;
    qp_err_clear(&e);
    if (qp_output_check(path, &rule, &e) != QP_OK) return qp_cli_fail(&e);
    int removed = 0;
    if (qp_output_remove_stale(path, &removed, &e) != QP_OK) return qp_cli_fail(&e);
    if (removed > 0)
        fprintf(stderr, "quantpack: removed %d partial output%s of %s left by an interrupted run\n",
                removed, removed == 1 ? "" : "s", path);
    return QP_EXIT_OK;
}

static sigset_t g_cleanup_signals;

static void *signal_watcher(void *arg) {
    (void)arg;
    int sig = 0;
    if (sigwait(&g_cleanup_signals, &sig) != 0) return NULL;
    qp_outputs_remove_partials();
    /* the default action now: the process ends as killed by sig (status 128 + sig) */
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig); /* not reached */
}

void qp_cli_clean_up_on_signals(void) {
    sigemptyset(&g_cleanup_signals);
    sigaddset(&g_cleanup_signals, SIGINT);
    sigaddset(&g_cleanup_signals, SIGTERM);
    sigaddset(&g_cleanup_signals, SIGHUP);
    /* past the file size limit a write fails (EFBIG) and the error path removes the partial */
    signal(SIGXFSZ, SIG_IGN);
    /* blocked here, before any other thread exists, so every later thread inherits the mask and
       only the watcher receives them */
    if (pthread_sigmask(SIG_BLOCK, &g_cleanup_signals, NULL) != 0) return;
    pthread_t t;
    if (pthread_create(&t, NULL, signal_watcher, NULL) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &g_cleanup_signals, NULL);
        return;
    }
    pthread_detach(t);
}
