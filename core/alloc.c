#define _DEFAULT_SOURCE 1 /* madvise, MADV_HUGEPAGE (glibc) */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "quantpack/core.h"

/* Failure injection for tests: the number of allocations that still succeed, -1 = never fail.
 * Atomic, so allocations on worker threads count exactly once each (no lost decrement, no
 * allocation past the limit). */
static atomic_long g_fail_after = -1;

long qp_alloc_fail_after(long n) {
    return atomic_exchange_explicit(&g_fail_after, n < 0 ? -1 : n, memory_order_relaxed);
}

static bool should_fail(void) {
    long left = atomic_load_explicit(&g_fail_after, memory_order_relaxed);
    while (left > 0)
        if (atomic_compare_exchange_weak_explicit(&g_fail_after, &left, left - 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return false;
    return left == 0;
}

void *qp_malloc(size_t n) {
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *qp_malloc_huge(size_t n) {
    const size_t huge = (size_t)2 << 20;
    if (n < huge) return qp_malloc(n);
    if (should_fail() || n > SIZE_MAX - huge) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, huge, n) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n / huge * huge, MADV_HUGEPAGE); /* whole huge pages only; advice: 4 KB pages serve if refused */
#endif
    return p;
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
