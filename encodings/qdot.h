/* Fast-path dots shared by enc_qdot.c (scalar reference) and qdot_avx2.c / qdot_avx512.c
 * (encodings/encodings.md "Fast dots"). */
#ifndef QP_QDOT_H
#define QP_QDOT_H
#include <stdint.h>

/* The fixed reduction of 8 float lanes: (a0+a4)+(a2+a6) + (a1+a5)+(a3+a7), as an AVX2 256-bit
 * horizontal add does it (low + high 128, then movehl, then the odd lane). */
static inline float qp_qdot_hsum8(const float a[8]) {
    const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
    return (s0 + s2) + (s1 + s3);
}

/* Q4_K's 12 scale bytes -> 8 six-bit scales and 8 six-bit mins. */
void qp_q4k_unpack_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8]);

/* scalar references: w a row of n elements, xq the activations in Q8_0 / Q8_K blocks */
float qp_q8_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
float qp_q4k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_q5k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_i2s_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_ref(const void *w, const void *xq, int64_t n);
/* qdot_avx2.c */
float qp_q8_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
float qp_q4k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_q5k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_i2s_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
/* qdot_avx512.c (AVX-512 VL + VNNI: vpdpbusd / vpdpwssd) */
float qp_q8_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
float qp_q4k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_q5k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_i2s_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
/* simd.c: dispatchers (traits vec_dot_q8) */
float qp_q8_0_dot_q8_0(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0(const void *w, const void *xq, int64_t n);
float qp_q4k_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_q5k_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_i2s_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k(const void *w, const void *xq, int64_t n);
#endif
