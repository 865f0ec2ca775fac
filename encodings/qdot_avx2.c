/* AVX2 fast-path dots (encodings/encodings.md "Fast dots"): the integers of enc_qdot.c's scalar
 * references through maddubs/madd, and the same float operations in the same order, so the
 * results equal the references bit for bit. */
#include <immintrin.h>

#include "encodings/encodings_internal.h"
#include "encodings/qdot.h"
#include "encodings/qdot_simd.h"

/* lane k of the result = sum of w*a over elements 4k..4k+3 of the block (exact) */
static inline __m256i lane_sums(__m256i w, __m256i a) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

QP_QDOT_LEGACY_Q8_0(, qp_q8_0_dot_q8_0_avx2, lane_sums, qp_q8_0_levels256, QP_Q8_0_BYTES)
QP_QDOT_LEGACY_Q8_0(, qp_q4_0_dot_q8_0_avx2, lane_sums, qp_q4_0_levels256, QP_Q4_0_BYTES)
QP_QDOT_LEGACY_Q8_0(, qp_q5_0_dot_q8_0_avx2, lane_sums, qp_q5_0_levels256, QP_Q5_0_BYTES)
/* prompts: 2 rows x 4 tokens (one row pair: AVX2's 16 ymm registers), each half by lane_sums */
static inline __m256i no_row_prep(__m256i wl, __m256i wh) {
    (void)wh;
    return wl;
}
static inline __m256i same(__m256i v) { return v; }
static inline __m256i pair_sums(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah, __m256i tok_corr) {
    (void)row_prep, (void)tok_corr;
    return _mm256_add_epi32(lane_sums(wl, al), lane_sums(wh, ah));
}
static inline __m256i no_tok_corr(__m256i al, __m256i ah) {
    (void)ah;
    return al;
}
QP_QDOT_LEGACY_TILE(, qp_q8_0_dot_q8_0_tile_avx2, qp_q8_0_dot_q8_0_avx2, qp_q8_0_halves, QP_Q8_0_BYTES, 1, no_row_prep, same,
                    no_tok_corr, pair_sums)
QP_QDOT_LEGACY_TILE(, qp_q4_0_dot_q8_0_tile_avx2, qp_q4_0_dot_q8_0_avx2, qp_q4_0_halves, QP_Q4_0_BYTES, 1, no_row_prep, same,
                    no_tok_corr, pair_sums)
QP_QDOT_LEGACY_TILE(, qp_q5_0_dot_q8_0_tile_avx2, qp_q5_0_dot_q8_0_avx2, qp_q5_0_halves, QP_Q5_0_BYTES, 1, no_row_prep, same,
                    no_tok_corr, pair_sums)

/* Q4_K, and Q5_K when five (its fifth bits: bit 2j / 2j+1 of qh[l] for sub-blocks 2j / 2j+1),
 * for nt <= QP_QDOT_TOKENS tokens: each weight block is unpacked once, then every token takes the
 * single-token operations in the single-token order (so y[t] is vec_dot_q8's bits). */
static inline void k_min_dot(const void *w, const uint8_t *xq, size_t ldxq, int nt, int64_t n,
                             size_t wbytes, size_t off_qs, bool five, float *y, size_t ldy) {
    const uint8_t *wb = w;
    float sum[QP_QDOT_TOKENS] = {0};
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes) {
        uint8_t sc[8], mn[8];
        qp_q4k_unpack_scales(wb + QP_Q4_K_OFF_SCALES, sc, mn);
        const uint8_t *q = wb + off_qs;
        const __m256i qh = five ? qp_load256(wb + QP_Q5_K_OFF_QH) : _mm256_setzero_si256();
        __m256i lv[8], s[8];
        for (int j = 0; j < 4; j++) {
            const __m256i q4 = qp_load256(q + 32 * j);
            __m256i lo = _mm256_and_si256(q4, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
            }
            lv[2 * j] = lo;
            lv[2 * j + 1] = hi;
            s[2 * j] = _mm256_set1_epi16(sc[2 * j]);
            s[2 * j + 1] = _mm256_set1_epi16(sc[2 * j + 1]);
        }
        const float dw = _cvtsh_ss(qp_load_u16le(wb)), dminw = _cvtsh_ss(qp_load_u16le(wb + 2));
        for (int t = 0; t < nt; t++) {
            const uint8_t *ab = xq + (size_t)t * ldxq + (size_t)i * QP_Q8_K_BYTES;
            const uint8_t *a = ab + QP_Q8_K_OFF_QS;
            __m256i acc = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++)
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lv[j], qp_load256(a + 32 * j)), s[j]));
            const int32_t isum = qp_hsum256_epi32(acc);
            const int32_t msum = qp_q4k_min_sum(mn, ab + QP_Q8_K_OFF_BSUMS);
            const float da = qp_load_f32le(ab);
            sum[t] = sum[t] + (dw * da) * (float)isum;
            sum[t] = sum[t] - (dminw * da) * (float)msum;
        }
    }
    for (int t = 0; t < nt; t++) y[(size_t)t * ldy] = sum[t];
}

float qp_q4k_dot_q8k_avx2(const void *w, const void *xq, int64_t n) {
    float y;
    k_min_dot(w, xq, 0, 1, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS, false, &y, 1);
    return y;
}
float qp_q5k_dot_q8k_avx2(const void *w, const void *xq, int64_t n) {
    float y;
    k_min_dot(w, xq, 0, 1, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS, true, &y, 1);
    return y;
}
void qp_q4k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y,
                               size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        k_min_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS, false,
                  y + (size_t)t * ldy, ldy);
    }
}
void qp_q5k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y,
                               size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        k_min_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS, true,
                  y + (size_t)t * ldy, ldy);
    }
}

/* Q6_K for nt <= QP_QDOT_TOKENS tokens: levels and scales unpacked once per super-block, then the
 * single-token operations per token in their order */
static inline void q6k_dot(const void *w, const uint8_t *xq, size_t ldxq, int nt, int64_t n, float *y,
                           size_t ldy) {
    const uint8_t *wb = w;
    float sum[QP_QDOT_TOKENS] = {0};
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q6_K_BYTES) {
        const int8_t *scb = (const int8_t *)(wb + QP_Q6_K_OFF_SCALES);
        __m256i u[8], s[8];
        for (int h = 0; h < 2; h++) {
            qp_q6k_unsigned_levels(wb + 64 * h, wb + QP_Q6_K_OFF_QH + 32 * h, u + 4 * h);
            for (int m = 0; m < 4; m++) s[4 * h + m] = qp_scale_pair16(scb[8 * h + 2 * m], scb[8 * h + 2 * m + 1]);
        }
        const float dw = _cvtsh_ss(qp_load_u16le(wb + QP_Q6_K_OFF_D));
        for (int t = 0; t < nt; t++) {
            const uint8_t *ab = xq + (size_t)t * ldxq + (size_t)i * QP_Q8_K_BYTES;
            const uint8_t *a = ab + QP_Q8_K_OFF_QS;
            __m256i acc = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++)
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], qp_load256(a + 32 * k)), s[k]));
            const int32_t isum = qp_hsum256_epi32(acc) - 32 * qp_q6k_bsum_dot(scb, ab + QP_Q8_K_OFF_BSUMS);
            sum[t] = sum[t] + (dw * qp_load_f32le(ab)) * (float)isum;
        }
    }
    for (int t = 0; t < nt; t++) y[(size_t)t * ldy] = sum[t];
}

float qp_q6k_dot_q8k_avx2(const void *w, const void *xq, int64_t n) {
    float y;
    q6k_dot(w, xq, 0, 1, n, &y, 1);
    return y;
}
void qp_q6k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y,
                               size_t ldy) {
    for (int64_t t = 0; t < n_tok; t += QP_QDOT_TOKENS) {
        const int nt = n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS;
        q6k_dot(w, (const uint8_t *)xq + (size_t)t * ldxq, ldxq, nt, n, y + (size_t)t * ldy, ldy);
    }
}

/* unsigned codes (<= 4) times int8 activations: 8 exact int32 lane sums */
static inline __m256i udot(__m256i u, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}
QP_QDOT_TERNARY_ALL(, avx2, udot)
/* TQ2_0 / TQ1_0 (qdot_simd.h QP_QDOT_TQ_ROW): maddubs of the codes (<= 3) by the activations summed
 * in int16 (|lane| <= 8 * 2 * 3 * 127 + 16 * 127 < 2^15: no saturation), minus the block sums, then
 * one madd; tiles of 2 rows x 4 tokens (a row's 8 code vectors at a time; 1 x 4, half the 8-lane
 * reduction and float steps idle, ran prompts at 133 against 197 tok/s per CPU-s) */
static inline __m256i tq_pair(const __m256i u[8], const uint8_t *ab) {
    const uint8_t *a = ab + QP_Q8_K_OFF_QS;
    __m256i s0 = _mm256_maddubs_epi16(u[0], qp_load256(a)), s1 = _mm256_maddubs_epi16(u[4], qp_load256(a + 128));
    for (int k = 1; k < 4; k++) {
        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(u[k], qp_load256(a + 32 * k)));
        s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(u[k + 4], qp_load256(a + 128 + 32 * k)));
    }
    const __m256i s = _mm256_sub_epi16(_mm256_add_epi16(s0, s1), qp_load256(ab + QP_Q8_K_OFF_BSUMS));
    return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}
QP_QDOT_TQ_ALL(, avx2, tq_pair, 2, 4)
