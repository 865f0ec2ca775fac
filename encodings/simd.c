/* Run-time choice of SIMD kernels (cpuid), shared by every encoding family. The level is decided
 * once per process: QP_FORCE_SCALAR=1 forces scalar, QP_FORCE_AVX2=1 caps it at AVX2; otherwise
 * AVX-512 (F+BW+VL+DQ, ZMM state enabled in XCR0) > AVX2+FMA+F16C > scalar, as the CPU and OS
 * allow. qp_encoding_simd_force() lowers it further for tests. SIMD quantizers produce the same
 * bytes as the references; families without an AVX-512 kernel run their AVX2 kernel at level 2. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define QP_X86 1
#endif

#include "encodings/encodings_internal.h"
#include "encodings/simd_kernels.h"
#include "encodings/qdot.h"

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
    const bool f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    if (f && dq && bw && vl && (xcr0 & 0xe6) == 0xe6) return 2; /* opmask, ZMM_Hi256, Hi16_ZMM */
    return 1;
#else
    return 0;
#endif
}

int qp_simd_level(void) {
    int lv = atomic_load_explicit(&g_level, memory_order_relaxed);
    if (lv < 0) {
        const char *fs = getenv("QP_FORCE_SCALAR");
        const char *fa = getenv("QP_FORCE_AVX2");
        lv = (fs && *fs && strcmp(fs, "0") != 0) ? 0 : detect();
        if (lv > 1 && fa && *fa && strcmp(fa, "0") != 0) lv = 1;
        atomic_store_explicit(&g_level, lv, memory_order_relaxed);
    }
    int f = atomic_load_explicit(&g_forced, memory_order_relaxed);
    return f >= 0 && f < lv ? f : lv;
}

void qp_encoding_simd_force(int level) {
    atomic_store_explicit(&g_forced, level < 0 ? -1 : level, memory_order_relaxed);
}

/* AVX512_VNNI (cpuid 7.0 ECX bit 11), used by the level-2 fast dots (qdot_avx512.c) */
static bool detect_vnni(void) {
#ifdef QP_X86
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1);
#else
    return false;
#endif
}

static int qdot_level(void) {
    static atomic_int vnni = -1;
    int lv = qp_simd_level();
    if (lv < 2) return lv;
    int v = atomic_load_explicit(&vnni, memory_order_relaxed);
    if (v < 0) {
        v = detect_vnni() ? 1 : 0;
        atomic_store_explicit(&vnni, v, memory_order_relaxed);
    }
    return v ? 2 : 1;
}

const char *qp_encoding_simd_level(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512"};
    return names[qp_simd_level()];
}

/* ---- dispatchers ------------------------------------------------------------------------------ */
void qp_q4k_quantize(const float *x, void *y, int64_t n) {
    const int lv = qp_simd_level();
    if (lv >= 2) qp_q4k_quantize_avx512(x, y, n);
    else if (lv >= 1) qp_q4k_quantize_avx2(x, y, n);
    else qp_q4k_quantize_ref(x, y, n);
}
void qp_q6k_quantize(const float *x, void *y, int64_t n) {
    const int lv = qp_simd_level();
    if (lv >= 2) qp_q6k_quantize_avx512(x, y, n);
    else if (lv >= 1) qp_q6k_quantize_avx2(x, y, n);
    else qp_q6k_quantize_ref(x, y, n);
}
float qp_q4k_vec_dot(const void *w, const float *x, int64_t n) {
    if (qp_simd_level() >= 2) return qp_q4k_vec_dot_f32_avx512(w, x, n);
    if (qp_simd_level() >= 1) return qp_q4k_vec_dot_f32_avx2(w, x, n);
    return qp_q4k_vec_dot_ref(w, x, n);
}
float qp_q6k_vec_dot(const void *w, const float *x, int64_t n) {
    if (qp_simd_level() >= 2) return qp_q6k_vec_dot_f32_avx512(w, x, n);
    if (qp_simd_level() >= 1) return qp_q6k_vec_dot_f32_avx2(w, x, n);
    return qp_q6k_vec_dot_ref(w, x, n);
}
float qp_q8_0_vec_dot(const void *w, const float *x, int64_t n) {
    const int lv = qp_simd_level();
    if (lv >= 2) return qp_q8_0_vec_dot_avx512(w, x, n);
    if (lv >= 1) return qp_q8_0_vec_dot_avx2(w, x, n);
    return qp_q8_0_vec_dot_ref(w, x, n);
}

#define QP_DISPATCH_Q(NAME, REF)                                                                 \
    void qp_##NAME##_quantize(const float *x, void *y, int64_t n) {                              \
        if (qp_simd_level() >= 1) qp_##NAME##_quantize_avx2(x, y, n);                            \
        else REF(x, y, n);                                                                       \
    }
QP_DISPATCH_Q(q4_0, qp_q4_0_quantize_ref)
QP_DISPATCH_Q(q5_0, qp_q5_0_quantize_ref)
QP_DISPATCH_Q(q8_0, qp_q8_0_quantize_ref)
#define QP_DISPATCH_Q512(NAME, REF)                                                              \
    void qp_##NAME##_quantize(const float *x, void *y, int64_t n) {                              \
        const int lv = qp_simd_level();                                                          \
        if (lv >= 2) qp_##NAME##_quantize_avx512(x, y, n);                                       \
        else if (lv >= 1) qp_##NAME##_quantize_avx2(x, y, n);                                    \
        else REF(x, y, n);                                                                       \
    }
QP_DISPATCH_Q512(tq1_0, qp_tq1_0_quantize_ref)
QP_DISPATCH_Q512(tq2_0, qp_tq2_0_quantize_ref)
QP_DISPATCH_Q512(qk256, qp_qk256_quantize_ref)
QP_DISPATCH_Q512(bitnet32f16, qp_bitnet32f16_quantize_ref)

#define QP_DISPATCH_I8(NAME)                                                                     \
    double qp_##NAME##_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n) {              \
        if (qp_simd_level() >= 1) return qp_##NAME##_vec_dot_i8_avx2(w, a, n);                   \
        return qp_##NAME##_vec_dot_i8(w, a, n);                                                  \
    }
QP_DISPATCH_I8(tq1_0)
QP_DISPATCH_I8(i2s_arm)
QP_DISPATCH_I8(qk256)
QP_DISPATCH_I8(bitnet32f16)
QP_DISPATCH_I8(split32)
/* I2_S, TQ2_0: VNNI at level 2 when the CPU has it (the same integers at every level) */
#define QP_DISPATCH_I8_VNNI(NAME)                                                                \
    double qp_##NAME##_vec_dot_i8_fast(const void *w, const int8_t *a, int64_t n) {              \
        const int lv = qdot_level();                                                             \
        if (lv >= 2) return qp_##NAME##_vec_dot_i8_vnni(w, a, n);                                \
        if (lv >= 1) return qp_##NAME##_vec_dot_i8_avx2(w, a, n);                                \
        return qp_##NAME##_vec_dot_i8(w, a, n);                                                  \
    }
QP_DISPATCH_I8_VNNI(i2s)
QP_DISPATCH_I8_VNNI(tq2_0)
/* TQ2_0 rows x tokens: the VNNI tile; below, the level's single dot pair by pair */
void qp_tq2_0_vec_dot_i8_tile(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                              int64_t n_tok, int64_t n, double *y, size_t ldy) {
    if (qdot_level() >= 2) qp_tq2_0_vec_dot_i8_tile_vnni(w, ldw, n_rows, a, lda, n_tok, n, y, ldy);
    else qp_vec_dot_i8_pairs(qp_tq2_0_vec_dot_i8_fast, w, ldw, n_rows, a, lda, n_tok, n, y, ldy);
}
void qp_i2s_vec_dot_i8_tile(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, size_t lda,
                            int64_t n_tok, int64_t n, double *y, size_t ldy) {
    const int lv = qdot_level();
    if (lv >= 2) qp_i2s_vec_dot_i8_tile_vnni(w, ldw, n_rows, a, lda, n_tok, n, y, ldy);
    else if (lv >= 1) qp_i2s_vec_dot_i8_tile_avx2(w, ldw, n_rows, a, lda, n_tok, n, y, ldy);
    else qp_vec_dot_i8_pairs(qp_i2s_vec_dot_i8, w, ldw, n_rows, a, lda, n_tok, n, y, ldy);
}

/* fast-path dots: VNNI at level 2 when the CPU has it, else AVX2 (the same bits at every level) */
#define QP_DISPATCH_QDOT(NAME)                                                                   \
    float qp_##NAME(const void *w, const void *xq, int64_t n) {                                  \
        const int lv = qdot_level();                                                             \
        if (lv >= 2) return qp_##NAME##_vnni(w, xq, n);                                          \
        if (lv >= 1) return qp_##NAME##_avx2(w, xq, n);                                          \
        return qp_##NAME##_ref(w, xq, n);                                                        \
    }
QP_DISPATCH_QDOT(q8_0_dot_q8_0)
QP_DISPATCH_QDOT(q4_0_dot_q8_0)
QP_DISPATCH_QDOT(q5_0_dot_q8_0)
QP_DISPATCH_QDOT(bq4_dot_q8_0)
QP_DISPATCH_QDOT(q4k_dot_q8k)
QP_DISPATCH_QDOT(q6k_dot_q8k)
/* rows x tokens: the VNNI tiles at level 2; at level 1 the AVX2 kernels row by row (each weight
 * block unpacked once for QP_QDOT_TOKENS tokens); the same bits at every level */
#define QP_DISPATCH_QDOT_TILE(NAME)                                                              \
    void qp_##NAME##_tile(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq,  \
                          int64_t n_tok, int64_t n, float *y, size_t ldy) {                      \
        const int lv = qdot_level();                                                             \
        if (lv >= 2) qp_##NAME##_tile_vnni(w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);          \
        else if (lv < 1) qp_##NAME##_tile_ref(w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);       \
        else                                                                                     \
            for (int64_t r = 0; r < n_rows; r++)                                                 \
                qp_##NAME##_multi_avx2((const uint8_t *)w + (size_t)r * ldw, xq, ldxq, n_tok, n, \
                                       y + r, ldy);                                              \
    }
/* the legacy blocks' and TQ2_0 / TQ1_0 tiles have a kernel at every level */
#define QP_DISPATCH_QDOT_TILE_ALL(NAME)                                                          \
    void qp_##NAME##_tile(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq,  \
                          int64_t n_tok, int64_t n, float *y, size_t ldy) {                      \
        const int lv = qdot_level();                                                             \
        if (lv >= 2) qp_##NAME##_tile_vnni(w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);          \
        else if (lv >= 1) qp_##NAME##_tile_avx2(w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);     \
        else qp_##NAME##_tile_ref(w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);                   \
    }
QP_DISPATCH_QDOT_TILE_ALL(q8_0_dot_q8_0)
QP_DISPATCH_QDOT_TILE_ALL(q4_0_dot_q8_0)
QP_DISPATCH_QDOT_TILE_ALL(q5_0_dot_q8_0)
QP_DISPATCH_QDOT_TILE_ALL(bq4_dot_q8_0)
QP_DISPATCH_QDOT_TILE_ALL(tq2_0_dot_q8k)
QP_DISPATCH_QDOT_TILE_ALL(tq1_0_dot_q8k)
QP_DISPATCH_QDOT_TILE(q4k_dot_q8k)
QP_DISPATCH_QDOT_TILE(q5k_dot_q8k)
QP_DISPATCH_QDOT_TILE(q6k_dot_q8k)
QP_DISPATCH_QDOT(q5k_dot_q8k)
/* Repacked rows (Q4_K, Q6_K, BQ4 and Q4_0 in its layout, TQ2_0 and I2_S in its): 16-row groups read by the AVX2 and VNNI
 * kernels; 0 at the scalar level, where the file's rows are read. The dots over the groups by
 * level, as QP_DISPATCH_QDOT (Y: float results, or double for int8 activations). */
int64_t qp_pack16_rows(void) { return qdot_level() >= 1 ? 16 : 0; }
#define QP_DISPATCH_PACKED(NAME, X, Y)                                                                                   \
    void qp_##NAME(const void *packed, int64_t n_groups, X xq, size_t ldxq, int64_t n_tok, int64_t n, Y *y, size_t ldy) { \
        const int lv = qdot_level();                                                                                    \
        if (lv >= 2) qp_##NAME##_vnni(packed, n_groups, xq, ldxq, n_tok, n, y, ldy);                                    \
        else if (lv >= 1) qp_##NAME##_avx2(packed, n_groups, xq, ldxq, n_tok, n, y, ldy);                               \
        else qp_##NAME##_ref(packed, n_groups, xq, ldxq, n_tok, n, y, ldy);                                             \
    }
QP_DISPATCH_PACKED(q4k_packed_dot_q8k, const void *, float)
QP_DISPATCH_PACKED(q6k_packed_dot_q8k, const void *, float)
QP_DISPATCH_PACKED(bq4_packed_dot_q8_0, const void *, float)
QP_DISPATCH_PACKED(tq2_0_packed_dot_q8k, const void *, float)
QP_DISPATCH_PACKED(tq2_0_packed_dot_i8, const int8_t *, double)
QP_DISPATCH_QDOT(tq2_0_dot_q8k)
QP_DISPATCH_QDOT(tq1_0_dot_q8k)
QP_DISPATCH_QDOT(i2s_dot_q8k)
QP_DISPATCH_QDOT(i2s_arm_dot_q8k)
QP_DISPATCH_QDOT(qk256_dot_q8k)
