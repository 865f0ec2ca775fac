#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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

bool qp_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool qp_cli_parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v) return false;
    *out = v;
    return true;
}

bool qp_cli_parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v) return false;
    *out = v;
    return true;
}

bool qp_cli_parse_ids(const char *s, const char *seps, int32_t **out, int64_t *n_out) {
    int64_t cap = 16, n = 0;
    int32_t *ids = qp_malloc((size_t)cap * sizeof *ids);
    if (!ids) return false;
    for (const char *p = s;;) {
        p += strspn(p, seps);
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX) {
            qp_free(ids);
            return false;
        }
        if (n == cap) {
            int32_t *ni = qp_realloc(ids, (size_t)cap * 2 * sizeof *ni);
            if (!ni) {
                qp_free(ids);
                return false;
            }
            ids = ni;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n_out = n;
    return true;
}

bool qp_cli_add_bos(const qp_model *m) {
    if (m->format == QP_FORMAT_GGUF && m->vocab.model == QP_TOK_SPM &&
        !qp_model_meta(m, "tokenizer.ggml.add_bos_token"))
        return true; /* as llama.cpp */
    return m->vocab.add_bos;
}

double qp_cli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool is_opt(const char *a, const char *name, const char *alias) {
    return strcmp(a, name) == 0 || (alias && strcmp(a, alias) == 0);
}

int qp_cli_parse_common(int argc, char **argv, int *i, qp_cli_model_opts *o) {
    const char *a = argv[*i];
    const unsigned t = o->takes;
    /* options without a value */
    if ((t & QP_CLI_OPT_PROMPT) && strcmp(a, "--no-bos") == 0) {
        o->no_bos = true;
        return 1;
    }
    /* options with one: which one, else not ours */
    enum { PROMPT, IDS, TOK, THREADS, N, CTX, TEMP, TOP_K, TOP_P, REP_PEN, REP_LAST, SEED } k;
    if ((t & QP_CLI_OPT_PROMPT) && is_opt(a, "-p", "--prompt")) k = PROMPT;
    else if ((t & QP_CLI_OPT_PROMPT) && is_opt(a, "--ids", NULL)) k = IDS;
    else if ((t & QP_CLI_OPT_TOKENIZER) && is_opt(a, "--tokenizer", NULL)) k = TOK;
    else if ((t & QP_CLI_OPT_THREADS) && is_opt(a, "--threads", "-t")) k = THREADS;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "-n", "--n-predict")) k = N;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--ctx", NULL)) k = CTX;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--temp", "--temperature")) k = TEMP;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--top-k", NULL)) k = TOP_K;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--top-p", NULL)) k = TOP_P;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--repeat-penalty", NULL)) k = REP_PEN;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--repeat-last-n", NULL)) k = REP_LAST;
    else if ((t & QP_CLI_OPT_GENERATE) && is_opt(a, "--seed", NULL)) k = SEED;
    else return 0;
    if (*i + 1 >= argc) {
        qp_cli_usage_error("%s: %s needs a value", o->cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    qp_sampler_params *sp = &o->sampler;
    int64_t iv;
    bool ok = true;
    switch (k) {
    case PROMPT: o->prompt = v; break;
    case IDS: o->ids = v; break;
    case TOK: o->open.tokenizer_path = v; break;
    case THREADS: ok = qp_cli_parse_i64(v, 1, 1024, &o->threads); break;
    case N: ok = qp_cli_parse_i64(v, 0, 1 << 24, &o->n_new); break;
    case CTX: ok = qp_cli_parse_i64(v, 1, 1 << 20, &o->ctx); break;
    case TEMP: ok = qp_cli_parse_float(v, &sp->temperature); break;
    case TOP_K:
        if ((ok = qp_cli_parse_i64(v, 0, INT32_MAX, &iv))) sp->top_k = (int32_t)iv;
        break;
    case TOP_P: ok = qp_cli_parse_float(v, &sp->top_p); break;
    case REP_PEN: ok = qp_cli_parse_float(v, &sp->repeat_penalty) && sp->repeat_penalty > 0.0f; break;
    case REP_LAST:
        if ((ok = qp_cli_parse_i64(v, -1, INT32_MAX, &iv))) sp->repeat_last_n = (int32_t)iv;
        break;
    case SEED: {
        char *end;
        errno = 0;
        unsigned long long sv = strtoull(v, &end, 10);
        if ((ok = !errno && end != v && !*end)) sp->seed = sv;
        break;
    }
    }
    if (ok) return 1;
    /* the message names the option as the manual does (-n, --temp, --threads) */
    const char *name = k == N ? "-n" : k == TEMP ? "--temp" : k == THREADS ? "--threads" : a;
    qp_cli_usage_error("%s: bad %s '%s'", o->cmd, name, v);
    return -1;
}

/* ---- outputs: the rule, stale partials, signals (core/outfile.md) --------------------------- */

int qp_cli_prepare_output(const char *path, const qp_output_rule *rule) {
    qp_err e;
    qp_err_clear(&e);
    if (qp_output_check(path, rule, &e) != QP_OK) return qp_cli_fail(&e);
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
