/* The one option parser of every command (cli/cli.h "options"): a table of rows, one pass over
 * argv, strict numbers, one message per mistake. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

bool qp_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool qp_cli_parse_f64(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) return false;
    if ((lo != 0 || hi != 0) && (v < lo || v > hi)) return false;
    *out = v;
    return true;
}

/* A byte count: digits, then K/M/G (x1024^k), then an optional B or iB. */
static bool parse_bytes(const char *s, uint64_t lo, uint64_t *out) {
    if (*s < '0' || *s > '9') return false; /* strtoull would take "-1" and " 1" */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024ull * 1024 * 1024, end++;
    if (mul > 1 && end[0] == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B') end++;
    if (*end || v > UINT64_MAX / mul || v * mul < lo) return false;
    *out = (uint64_t)v * mul;
    return true;
}

bool qp_cli_parse_value(const qp_cli_opt *o, const char *s, char *why, size_t cap) {
    int64_t iv;
    double dv;
    switch (o->kind) {
    case QP_CLI_FLAG: *(bool *)o->dst = true; return true;
    case QP_CLI_STR:
    case QP_CLI_OPT_STR: *(const char **)o->dst = s; return true;
    case QP_CLI_REST: return false; /* taken by qp_cli_parse itself */
    case QP_CLI_LIST: {
        qp_cli_list *l = o->dst;
        if (l->n >= QP_CLI_LIST_MAX) {
            snprintf(why, cap, "at most %d occurrences", QP_CLI_LIST_MAX);
            return false;
        }
        l->v[l->n++] = s;
        return true;
    }
    case QP_CLI_I64:
    case QP_CLI_I32:
        if (qp_cli_parse_i64(s, o->lo, o->hi, &iv)) {
            if (o->kind == QP_CLI_I64) *(int64_t *)o->dst = iv;
            else *(int32_t *)o->dst = (int32_t)iv;
            return true;
        }
        if (o->hi == INT64_MAX || (o->kind == QP_CLI_I32 && o->hi == INT32_MAX))
            snprintf(why, cap, "an integer >= %" PRId64, o->lo);
        else snprintf(why, cap, "an integer in %" PRId64 "..%" PRId64, o->lo, o->hi);
        return false;
    case QP_CLI_U64: {
        char *end;
        errno = 0;
        unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
        if (s[0] >= '0' && s[0] <= '9' && !errno && !*end) {
            *(uint64_t *)o->dst = v;
            return true;
        }
        snprintf(why, cap, "an integer in 0..%" PRIu64, UINT64_MAX);
        return false;
    }
    case QP_CLI_BYTES:
        if (parse_bytes(s, (uint64_t)o->lo, (uint64_t *)o->dst)) return true;
        snprintf(why, cap, "a byte count >= %" PRId64 " (suffix K, M, G allowed)", o->lo);
        return false;
    case QP_CLI_F32:
    case QP_CLI_F64:
        if (qp_cli_parse_f64(s, o->flo, o->fhi, &dv) && (o->kind == QP_CLI_F64 || fabs(dv) <= FLT_MAX)) {
            if (o->kind == QP_CLI_F64) *(double *)o->dst = dv;
            else *(float *)o->dst = (float)dv;
            return true;
        }
        if (o->flo == 0 && o->fhi == 0) snprintf(why, cap, "a finite number");
        else if (o->fhi >= FLT_MAX) snprintf(why, cap, "a finite number >= %g", o->flo);
        else snprintf(why, cap, "a number in %g..%g", o->flo, o->fhi);
        return false;
    }
    return false;
}

static bool row_taken(const qp_cli_cmd *c, const qp_cli_opt *o) {
    return c->accept == 0 || o->used_by == 0 || (o->used_by & c->accept);
}

/* The row named by word (up to len characters: "--name" of "--name=value"), or -1. */
static int find_row(const qp_cli_cmd *c, const char *word, size_t len) {
    for (int k = 0; k < c->n_opts; k++) {
        const qp_cli_opt *o = &c->opts[k];
        if (!row_taken(c, o)) continue;
        if ((strlen(o->name) == len && strncmp(o->name, word, len) == 0) ||
            (o->alias && strlen(o->alias) == len && strncmp(o->alias, word, len) == 0))
            return k;
    }
    return -1;
}

static int add_positional(const qp_cli_cmd *c, const char *word, int *n) {
    if (*n >= c->max_pos)
        return qp_cli_usage_error("%s: unexpected argument '%s'%s", c->name, word,
                                  c->pos_hint ? c->pos_hint : "");
    c->pos[(*n)++] = word;
    return QP_CLI_RUN;
}

int qp_cli_parse(const qp_cli_cmd *c, int argc, char **argv, bool *given) {
    int n_pos = 0;
    bool options_end = false;
    if (given) memset(given, 0, (size_t)c->n_opts * sizeof *given);
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        int rc = QP_CLI_RUN;
        if (options_end || w[0] != '-' || w[1] == '\0') {
            if ((rc = add_positional(c, w, &n_pos)) != QP_CLI_RUN) return rc;
            continue;
        }
        if (strcmp(w, "--") == 0) {
            options_end = true;
            continue;
        }
        if (qp_cli_is_help(w)) {
            qp_cli_help(c, stdout);
            return qp_cli_flush_stdout();
        }
        const char *eq = w[1] == '-' ? strchr(w, '=') : NULL;
        size_t len = eq ? (size_t)(eq - w) : strlen(w);
        int k = find_row(c, w, len);
        if (k < 0) return qp_cli_usage_error("%s: unknown option '%.*s'", c->name, (int)len, w);
        const qp_cli_opt *o = &c->opts[k];
        if (given) given[k] = true;
        if (o->kind == QP_CLI_REST) {
            if (eq) return qp_cli_usage_error("%s: %s takes the words after it, not '='", c->name, o->name);
            qp_cli_rest *r = o->dst;
            r->argv = argv + i + 1;
            r->argc = argc - i - 1;
            break;
        }
        if (o->kind == QP_CLI_FLAG) {
            if (eq) return qp_cli_usage_error("%s: %s takes no value", c->name, o->name);
            *(bool *)o->dst = true;
            continue;
        }
        if (o->kind == QP_CLI_OPT_STR && !eq && (i + 1 >= argc || argv[i + 1][0] == '-')) {
            *(const char **)o->dst = ""; /* given without its value */
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return qp_cli_usage_error("%s: %s needs a value", c->name, o->name);
        char why[96];
        if (!qp_cli_parse_value(o, v, why, sizeof why))
            return qp_cli_usage_error("%s: %s wants %s, not '%s'", c->name, o->name, why, v);
    }
    if (c->n_pos) *c->n_pos = n_pos;
    return QP_CLI_RUN;
}

void qp_cli_help(const qp_cli_cmd *c, FILE *f) {
    if (c->usage) fputs(c->usage, f);
    bool any = false;
    for (int k = 0; k < c->n_opts; k++) {
        const qp_cli_opt *o = &c->opts[k];
        if (!row_taken(c, o) || !o->help) continue;
        if (!any) fputs("\noptions:\n", f);
        any = true;
        char left[64];
        /* a short alias first (-n, --n-predict), a long one after the name */
        const bool short_alias = o->alias && o->alias[1] != '-';
        snprintf(left, sizeof left, "%s%s%s%s%s%s%s", short_alias ? o->alias : "",
                 short_alias ? ", " : "", o->name, o->alias && !short_alias ? ", " : "",
                 o->alias && !short_alias ? o->alias : "", o->arg ? " " : "", o->arg ? o->arg : "");
        const int col = 24;
        int n = fprintf(f, "  %s", left);
        for (const char *h = o->help;;) {
            const char *nl = strchr(h, '\n');
            int hl = nl ? (int)(nl - h) : (int)strlen(h);
            if (n > col) {
                fputc('\n', f);
                n = 0;
            }
            fprintf(f, "%*s%.*s\n", col + 1 - n, "", hl, h);
            n = 0;
            if (!nl) break;
            h = nl + 1;
        }
    }
    if (c->more) {
        fputc('\n', f);
        fputs(c->more, f);
    }
}
