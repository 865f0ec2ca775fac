#include <stdlib.h>
#include <string.h>

#include "quantpack/core.h"

/* Failure injection for tests: -1 = never fail. Not thread-safe by design (tests only). */
static long g_fail_after = -1;

void qp_alloc_fail_after(long n) { g_fail_after = n; }

static int should_fail(void) {
    if (g_fail_after < 0) return 0;
    if (g_fail_after == 0) return 1;
    g_fail_after--;
    return 0;
}

void *qp_malloc(size_t n) {
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *qp_calloc(size_t count, size_t size) {
    size_t total;
    if (!qp_size_mul(count, size, &total)) return NULL;
    if (should_fail()) return NULL;
    return calloc(total ? total : 1, 1);
}

void *qp_realloc(void *p, size_t n) {
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void qp_free(void *p) { free(p); }

char *qp_strndup(const char *s, size_t n) {
    char *d = qp_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *qp_strdup(const char *s) { return qp_strndup(s, strlen(s)); }
