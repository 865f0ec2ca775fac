/* AVX-512 VNNI fast-path dots (encodings/encodings.md "Fast dots"): vpdpbusd for the legacy
 * blocks (256-bit, the AVX2 kernel's lanes), 512-bit maddubs + vpdpwssd for Q4_K / Q6_K. Same
 * integers and the same float operations in the same order as enc_qdot.c's references, so the
 * results equal them bit for bit. Called only when cpuid reports AVX512_VNNI (simd.c). */
#include <immintrin.h>

#include "encodings/encodings_internal.h"
#include "encodings/qdot.h"
#include "encodings/qdot_simd.h"

#define QP_VNNI __attribute__((target("avx512vnni")))

QP_VNNI static inline __m256i lane_sums(__m256i w, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}

QP_QDOT_LEGACY_Q8_0(QP_VNNI, qp_q8_0_dot_q8_0_vnni, lane_sums, qp_q8_0_levels256, QP_Q8_0_BYTES)
QP_QDOT_LEGACY_Q8_0(QP_VNNI, qp_q4_0_dot_q8_0_vnni, lane_sums, qp_q4_0_levels256, QP_Q4_0_BYTES)
QP_QDOT_LEGACY_Q8_0(QP_VNNI, qp_q5_0_dot_q8_0_vnni, lane_sums, qp_q5_0_levels256, QP_Q5_0_BYTES)

static inline int32_t hsum512_epi32(__m512i v) { return _mm512_reduce_add_epi32(v); }

static inline __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Q4_K, and Q5_K when five (bit 2j / 2j+1 of qh[l] << 4 for sub-blocks 2j / 2j+1), for nt <=
 * QP_QDOT_TOKENS tokens: each weight block is unpacked once, then every token takes the
 * single-token operations in the single-token order (so y[t] is vec_dot_q8's bits). */
QP_VNNI static inline void k_min_dot(const void *w, const uint8_t *xq, size_t ldxq, int nt, int64_t n,
                                     size_t wbytes, size_t off_qs, bool five, float *y, size_t ldy) {
    const uint8_t *wb = w;
    float sum[QP_QDOT_TOKENS] = {0};
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes) {
        uint8_t sc[8], mn[8];
        qp_q4k_unpack_scales(wb + QP_Q4_K_OFF_SCALES, sc, mn);
        const uint8_t *q = wb + off_qs;
        const __m256i qh = five ? qp_load256(wb + QP_Q5_K_OFF_QH) : _mm256_setzero_si256();
        __m512i lv[4], s[4];
        for (int j = 0; j < 4; j++) {
            const __m256i q4 = qp_load256(q + 32 * j);
            __m256i lo = _mm256_and_si256(q4, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
            }
            lv[j] = join256(lo, hi);
            s[j] = join256(_mm256_set1_epi16(sc[2 * j]), _mm256_set1_epi16(sc[2 * j + 1]));
        }
        const float dw = _cvtsh_ss(qp_load_u16le(wb)), dminw = _cvtsh_ss(qp_load_u16le(wb + 2));
        for (int t = 0; t < nt; t++) {
            const uint8_t *ab = xq + (size_t)t * ldxq + (size_t)i * QP_Q8_K_BYTES;
            const uint8_t *a = ab + QP_Q8_K_OFF_QS;
            __m512i acc = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++)
                acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(lv[j], _mm512_loadu_si512((const void *)(a + 64 * j))), s[j]);
            const int32_t isum = hsum512_epi32(acc);
            const int32_t msum = qp_q4k_min_sum(mn, ab + QP_Q8_K_OFF_BSUMS);
            const float da = qp_load_f32le(ab);
            sum[t] = sum[t] + (dw * da) * (float)isum;
            sum[t] = sum[t] - (dminw * da) * (float)msum;
        }
    }
    for (int t = 0; t < nt; t++) y[(size_t)t * ldy] = sum[t];
}

QP_VNNI float qp_q4k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    float y;
    k_min_dot(w, xq, 0, 1, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS, false, &y, 1);
    return y;
}
QP_VNNI float qp_q5k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    float y;
    k_min_dot(w, xq, 0, 1, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS, true, &y, 1);
    return y;
}
QP_VNNI void qp_q4k_dot_q8k_multi_vnni(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                       float *y, size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        k_min_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS,
                  false, y + (size_t)t * ldy, ldy);
    }
}
QP_VNNI void qp_q5k_dot_q8k_multi_vnni(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                       float *y, size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        k_min_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS,
                  true, y + (size_t)t * ldy, ldy);
    }
}

/* Q6_K for nt <= QP_QDOT_TOKENS tokens: levels and group scales once per super-block, then the
 * single-token operations per token in their order */
QP_VNNI static inline void q6k_dot(const void *w, const uint8_t *xq, size_t ldxq, int nt, int64_t n,
                                   float *y, size_t ldy) {
    const uint8_t *wb = w;
    float sum[QP_QDOT_TOKENS] = {0};
    /* int16 lane i of a 64-element chunk belongs to group i / 8 (16 elements = 8 int16 pairs) */
    const __m512i grp = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                         0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q6_K_BYTES) {
        const int8_t *scb = (const int8_t *)(wb + QP_Q6_K_OFF_SCALES);
        const __m512i sc16 = _mm512_castsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)scb)));
        __m512i lv[4], s[4];
        for (int h = 0; h < 2; h++) {
            __m256i u[4];
            qp_q6k_unsigned_levels(wb + 64 * h, wb + QP_Q6_K_OFF_QH + 32 * h, u);
            for (int c = 0; c < 2; c++) { /* elements 128h + 64c .. +63: groups 8h + 4c .. +3 */
                lv[2 * h + c] = join256(u[2 * c], u[2 * c + 1]);
                s[2 * h + c] = _mm512_permutexvar_epi16(_mm512_add_epi16(grp, _mm512_set1_epi16((short)(8 * h + 4 * c))), sc16);
            }
        }
        const float dw = _cvtsh_ss(qp_load_u16le(wb + QP_Q6_K_OFF_D));
        for (int t = 0; t < nt; t++) {
            const uint8_t *ab = xq + (size_t)t * ldxq + (size_t)i * QP_Q8_K_BYTES;
            const uint8_t *a = ab + QP_Q8_K_OFF_QS;
            __m512i acc = _mm512_setzero_si512();
            for (int k = 0; k < 4; k++)
                acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(lv[k], _mm512_loadu_si512((const void *)(a + 64 * k))), s[k]);
            const int32_t isum = hsum512_epi32(acc) - 32 * qp_q6k_bsum_dot(scb, ab + QP_Q8_K_OFF_BSUMS);
            sum[t] = sum[t] + (dw * qp_load_f32le(ab)) * (float)isum;
        }
    }
    for (int t = 0; t < nt; t++) y[(size_t)t * ldy] = sum[t];
}

QP_VNNI float qp_q6k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    float y;
    q6k_dot(w, xq, 0, 1, n, &y, 1);
    return y;
}
QP_VNNI void qp_q6k_dot_q8k_multi_vnni(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                       float *y, size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        q6k_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, y + (size_t)t * ldy, ldy);
    }
}

/* unsigned codes (<= 4) times int8 activations: 8 exact int32 lane sums (vpdpbusd) */
QP_VNNI static inline __m256i udot(__m256i u, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a);
}
QP_QDOT_TERNARY_ALL(QP_VNNI, vnni, udot)
