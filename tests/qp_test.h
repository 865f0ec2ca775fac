/* A tiny test harness: checks count, failures print file:line, main returns non-zero on any
 * failure and prints the closing line "N passed, N failed". QP_SKIP exits 77 (ctest: skipped) for
 * a missing fixture, peer or tool, which tests/CMakeLists.txt turns into a failure in CI and when
 * the real fixtures exist; QP_SKIP_MACHINE is a skip everywhere, for what this machine cannot run
 * (a CPU without SIMD, a file system without sparse files). */
#ifndef QP_TEST_H
#define QP_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int qp_test_passed, qp_test_failed;

#define QP_CHECK(cond)                                                                           \
    do {                                                                                         \
        if (cond) qp_test_passed++;                                                              \
        else {                                                                                   \
            qp_test_failed++;                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

#define QP_CHECK_MSG(cond, ...)                                                                  \
    do {                                                                                         \
        if (cond) qp_test_passed++;                                                              \
        else {                                                                                   \
            qp_test_failed++;                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
        }                                                                                        \
    } while (0)

#define QP_CHECK_EQ_INT(a, b)                                                                    \
    QP_CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))

#define QP_SKIP(...)                                                                             \
    do {                                                                                         \
        fprintf(stderr, "skipped: ");                                                            \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fputc('\n', stderr);                                                                     \
        exit(77);                                                                                \
    } while (0)

/* The line tests/CMakeLists.txt recognises as a skip everywhere (SKIP_REGULAR_EXPRESSION). */
#define QP_SKIP_MACHINE(...)                                                                     \
    do {                                                                                         \
        fprintf(stderr, "skipped on this machine: ");                                            \
        fprintf(stderr, __VA_ARGS__);                                                            \
        fputc('\n', stderr);                                                                     \
        exit(77);                                                                                \
    } while (0)

static inline int qp_test_finish(void) {
    printf("%d passed, %d failed\n", qp_test_passed, qp_test_failed);
    return qp_test_failed ? 1 : 0;
}

/* Environment set by tests/CMakeLists.txt; defaults let a test run by hand from the build dir. */
static inline const char *qp_test_env(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}
static inline const char *qp_test_real_dir(void) {
    return qp_test_env("QP_REAL_FIXTURES", "../shared/fixtures/real");
}
/* Writes dir + "/" + rel into buf; returns buf. */
static inline char *qp_test_path(char *buf, size_t n, const char *dir, const char *rel) {
    snprintf(buf, n, "%s/%s", dir, rel);
    return buf;
}

#endif
