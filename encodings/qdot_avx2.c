/* AVX2 fast-path dots (encodings/encodings.md "Fast dots"): the integers of enc_qdot.c's scalar
 * references through maddubs/madd, and the same float operations in the same order, so the
 * results equal the references bit for bit. */
#include <immintrin.h>
#include <string.h>

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
/* BQ4: unsigned codes by maddubs + madd, plus -zero x the activations' pair sums by one madd */
static inline __m256i bq4_block_sums(const uint8_t *wb, __m256i a) {
    const __m256i qa = _mm256_madd_epi16(_mm256_maddubs_epi16(qp_bq4_codes256(wb), a), _mm256_set1_epi16(1));
    return _mm256_add_epi32(qa, _mm256_madd_epi16(qp_pair_sums16(a), qp_bq4_neg_zero16(wb)));
}
QP_QDOT_LEGACY_BLOCKS(, qp_bq4_dot_q8_0_avx2, bq4_block_sums, QP_BQ4_BYTES)
/* prompts: 2 rows x 4 tokens (one row pair: AVX2's 16 ymm registers), each half by lane_sums */
static inline __m256i pair_sums(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah, __m256i tok_corr) {
    (void)row_prep, (void)tok_corr;
    return _mm256_add_epi32(lane_sums(wl, al), lane_sums(wh, ah));
}
QP_QDOT_LEGACY_TILE(, qp_q8_0_dot_q8_0_tile_avx2, qp_q8_0_dot_q8_0_avx2, qp_q8_0_halves, QP_Q8_0_BYTES, 1, qp_no_row_prep,
                    qp_same, qp_no_tok_corr, pair_sums)
QP_QDOT_LEGACY_TILE(, qp_q4_0_dot_q8_0_tile_avx2, qp_q4_0_dot_q8_0_avx2, qp_q4_0_halves, QP_Q4_0_BYTES, 1, qp_no_row_prep,
                    qp_same, qp_no_tok_corr, pair_sums)
QP_QDOT_LEGACY_TILE(, qp_q5_0_dot_q8_0_tile_avx2, qp_q5_0_dot_q8_0_avx2, qp_q5_0_halves, QP_Q5_0_BYTES, 1, qp_no_row_prep,
                    qp_same, qp_no_tok_corr, pair_sums)
/* BQ4: the codes' maddubs of both halves summed in int16 (|.| <= 2 * 2 * 15 * 127), one madd, plus
 * the row pair's -zero (row_prep) x the token's pair sums (tok_corr) */
static inline __m256i bq4_pair_sums(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah, __m256i tok_corr) {
    const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(wl, al), _mm256_maddubs_epi16(wh, ah));
    return _mm256_add_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)), _mm256_madd_epi16(tok_corr, row_prep));
}
QP_QDOT_LEGACY_TILE(, qp_bq4_dot_q8_0_tile_avx2, qp_bq4_dot_q8_0_avx2, qp_bq4_halves, QP_BQ4_BYTES, 1, qp_bq4_row_zeros,
                    qp_same, qp_tok_pair_sums, bq4_pair_sums)

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

/* Q6_K's 16 scales as int16 (sc16: groups 0-7 in the low 128-bit lane, 8-15 in the high) -> the
 * 8 multipliers of the 32-element chunks: chunk 4h + m (groups 8h + 2m, 8h + 2m + 1) as int16
 * lanes 0-7 = s_{8h+2m}, 8-15 = s_{8h+2m+1}: one lane permute per half and one byte shuffle each */
static inline void q6k_chunk_scales(__m256i sc16, __m256i s[8]) {
    const __m256i lo = _mm256_permute4x64_epi64(sc16, 0x44), hi = _mm256_permute4x64_epi64(sc16, 0xEE);
    for (int m = 0; m < 4; m++) {
        const char a = (char)(4 * m), b = (char)(4 * m + 2);
        const __m256i pick = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                              b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
        s[m] = _mm256_shuffle_epi8(lo, pick);
        s[4 + m] = _mm256_shuffle_epi8(hi, pick);
    }
}

/* Q6_K for nt <= QP_QDOT_TOKENS tokens: levels u = q + 32 and chunk scales unpacked once per
 * super-block; per token the lanes start at -32 sum_j sc_j bsum_j (madd of the 16 scales by the 16
 * block sums) and take the 8 chunks' maddubs (u <= 63: |pair| <= 2 x 63 x 128 < 2^15) and madd by
 * the scales, so one reduction gives isum = sum_j sc_j (q_j . a_j) exactly; then the single-token
 * float step. y[t] is vec_dot_q8's bits. */
__attribute__((always_inline)) static inline void q6k_dot(const void *w, const uint8_t *xq, size_t ldxq, int nt, int64_t n,
                                                          float *y, size_t ldy) {
    const uint8_t *wb = w;
    float sum[QP_QDOT_TOKENS] = {0};
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q6_K_BYTES) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(wb + QP_Q6_K_OFF_SCALES)));
        __m256i u[8], s[8];
        for (int h = 0; h < 2; h++) qp_q6k_unsigned_levels(wb + 64 * h, wb + QP_Q6_K_OFF_QH + 32 * h, u + 4 * h);
        q6k_chunk_scales(sc16, s);
        const float dw = _cvtsh_ss(qp_load_u16le(wb + QP_Q6_K_OFF_D));
        for (int t = 0; t < nt; t++) {
            const uint8_t *ab = xq + (size_t)t * ldxq + (size_t)i * QP_Q8_K_BYTES;
            const uint8_t *a = ab + QP_Q8_K_OFF_QS;
            __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_slli_epi32(_mm256_madd_epi16(sc16, qp_load256(ab + QP_Q8_K_OFF_BSUMS)), 5));
            __m256i acc2 = _mm256_setzero_si256();
            for (int k = 0; k < 4; k++) {
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], qp_load256(a + 32 * k)), s[k]));
                acc2 = _mm256_add_epi32(acc2, _mm256_madd_epi16(_mm256_maddubs_epi16(u[4 + k], qp_load256(a + 128 + 32 * k)), s[4 + k]));
            }
            const int32_t isum = qp_hsum256_epi32(_mm256_add_epi32(acc, acc2));
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
        const uint8_t *x = (const uint8_t *)xq + (size_t)t * ldxq;
        switch (n_tok - t < QP_QDOT_TOKENS ? (int)(n_tok - t) : QP_QDOT_TOKENS) { /* constant token counts */
        case 4: q6k_dot(w, x, ldxq, 4, n, y + (size_t)t * ldy, ldy); break;
        case 3: q6k_dot(w, x, ldxq, 3, n, y + (size_t)t * ldy, ldy); break;
        case 2: q6k_dot(w, x, ldxq, 2, n, y + (size_t)t * ldy, ldy); break;
        default: q6k_dot(w, x, ldxq, 1, n, y + (size_t)t * ldy, ldy); break;
        }
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

/* ---- repacked Q4_K groups (qdot.h QP_Q4K_PACK_*, encodings.md "Repacked Q4_K rows") ----------
 * A 64-byte vector of the layout (one 4-byte group of 16 rows) is two ymm halves: rows 0-7 and
 * 8-15, row r in int32 lane r % 8. Per sub-block, maddubs of the 4-bit levels (unsigned, <= 15)
 * by a 4-byte activation broadcast gives int16 pairs (|15 x 128 x 2| = 3840, no saturation), the
 * sub-block's 8 groups are added in int16 (16 products per lane: |16 x 15 x 128| = 30720 <
 * 2^15, exact), then one madd by the row's scale repeated in both int16 halves of its lane gives
 * sc_j (q_j . a_j) in int32. A kernel call takes NH halves x NT tokens (NH * NT <= 4: 8 int16
 * chains), so a group vector serves NT tokens and an activation broadcast NH halves. Float steps:
 * enc_qdot.c k_min_step in the 8 lanes (every lane its row's single-dot operations in order). */

/* lane r = byte r of p8 in both int16 halves */
static inline __m256i packed_scale16(const uint8_t *p8) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p8));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
static inline __m256i bcast32(const uint8_t *p) { return _mm256_set1_epi32((int)qp_load_u32le(p)); }

/* lane r = sum_j mn_j(row 8h + r) (bsum_2j + bsum_2j+1) of the Q8_K block ab (pb a packed super-block) */
static inline __m256i packed_min_sums(const uint8_t *pb, int h, const uint8_t *ab) {
    const uint8_t *bs = ab + QP_Q8_K_OFF_BSUMS;
    const __m128i bp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(const void *)bs), /* the 8 sub-block sums */
                                      _mm_loadu_si128((const __m128i *)(const void *)(bs + 16)));
    const __m256i b2 = _mm256_broadcastsi128_si256(bp);
    const __m256i bk[4] = {_mm256_shuffle_epi32(b2, 0x00), _mm256_shuffle_epi32(b2, 0x55), _mm256_shuffle_epi32(b2, 0xAA),
                           _mm256_shuffle_epi32(b2, 0xFF)};
    __m256i msum = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        const __m256i pair = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(pb + QP_Q4K_PACK_OFF_MN + 32 * k + 16 * h)));
        msum = _mm256_add_epi32(msum, _mm256_madd_epi16(pair, bk[k]));
    }
    return msum;
}

/* halves h0 .. h0 + nh - 1 of a group (nb packed super-blocks at pg) against the nt tokens xt[t]:
 * sum[hh * nt + t] = the 8 rows' single dots (lane r = row 8 (h0 + hh) + r) */
__attribute__((always_inline)) static inline void packed_q4k(const uint8_t *pg, int h0, int nh, const uint8_t *const *xt, int nt,
                                                             int64_t nb, __m256 *sum) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int p = 0; p < nh * nt; p++) sum[p] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, pg += QP_Q4K_PACK_BYTES) {
        __m256i isum[4];
        for (int p = 0; p < nh * nt; p++) isum[p] = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) { /* sub-blocks 2k (low nibbles), 2k + 1 (high) */
            __m256i lo[4], hi[4];
            for (int p = 0; p < nh * nt; p++) lo[p] = hi[p] = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                __m256i al[4], ah[4];
                for (int t = 0; t < nt; t++) {
                    const uint8_t *a = xt[t] + (size_t)i * QP_Q8_K_BYTES + QP_Q8_K_OFF_QS + 64 * k + 4 * g;
                    al[t] = bcast32(a);
                    ah[t] = bcast32(a + 32);
                }
                for (int hh = 0; hh < nh; hh++) {
                    const __m256i q = qp_load256(pg + QP_Q4K_PACK_OFF_QS + 64 * (8 * k + g) + 32 * (h0 + hh));
                    const __m256i ql = _mm256_and_si256(q, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                    for (int t = 0; t < nt; t++) {
                        lo[hh * nt + t] = _mm256_add_epi16(lo[hh * nt + t], _mm256_maddubs_epi16(ql, al[t]));
                        hi[hh * nt + t] = _mm256_add_epi16(hi[hh * nt + t], _mm256_maddubs_epi16(qh, ah[t]));
                    }
                }
            }
            for (int hh = 0; hh < nh; hh++) {
                const __m256i sl = packed_scale16(pg + QP_Q4K_PACK_OFF_SC + 16 * (2 * k) + 8 * (h0 + hh));
                const __m256i sh = packed_scale16(pg + QP_Q4K_PACK_OFF_SC + 16 * (2 * k + 1) + 8 * (h0 + hh));
                for (int t = 0; t < nt; t++) {
                    const int p = hh * nt + t;
                    isum[p] = _mm256_add_epi32(isum[p], _mm256_add_epi32(_mm256_madd_epi16(lo[p], sl), _mm256_madd_epi16(hi[p], sh)));
                }
            }
        }
        for (int hh = 0; hh < nh; hh++) {
            const int h = h0 + hh;
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pg + 16 * h)));
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pg + QP_Q4K_PACK_OFF_DMIN + 16 * h)));
            for (int t = 0; t < nt; t++) {
                const int p = hh * nt + t;
                const uint8_t *ab = xt[t] + (size_t)i * QP_Q8_K_BYTES;
                const __m256 da = _mm256_set1_ps(qp_load_f32le(ab));
                const __m256i msum = packed_min_sums(pg, h, ab);
                sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[p])));
                sum[p] = _mm256_sub_ps(sum[p], _mm256_mul_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(msum)));
            }
        }
    }
}

/* ---- repacked Q6_K groups (qdot.h QP_Q6K_PACK_*, encodings.md "Repacked Q6_K rows") ----------
 * The 64-byte vectors as two ymm halves, as Q4_K's. Per vector triple (Q0, Q1, qh) the unsigned
 * levels u = q + 32 (0 .. 63) of the 4 element groups m: bits 0-3 from Q0, Q1, Q0 >> 4, Q1 >> 4
 * masked, bits 4-5 the qh field 2m moved there and masked (16-bit shifts: what crosses from the
 * neighbour byte is masked off), or'ed. maddubs by the token's 4-byte activation broadcast gives
 * int16 pairs |<= 2 x 63 x 128 = 16128|; two of them (8 products per lane) added in int16 (|<=
 * 32256|, exact: a third could saturate), then one madd by the row's sub-block scale repeated in
 * both int16 halves of its lane adds sc_j x those 8 products to isum in int32. isum starts from
 * -32 sum_j sc_j bsum_j (madd of the int16 scale pairs by the block sums' pairs), so it ends at the
 * reference's sum_j sc_j (q_j . a_j) exactly; then the reference's float step in the 8 lanes. */

/* lane r = the int8 scale of sub-block j of row 8h + r (int32) */
static inline __m256i q6k_scale32(const uint8_t *pb, int j, int h) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(pb + QP_Q6K_PACK_OFF_SC + 16 * j + 8 * h)));
}
/* lane r = the int16 pair (lo of lane r of a, lo of lane r of b) */
static inline __m256i int16_pair(__m256i a, __m256i b) { return _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA); }

/* 4 unsigned level vectors of triple t (rows 8h .. 8h + 7): u[m] = elements 128 (t / 8) + 32m + 4 (t % 8) .. + 3 */
static inline void q6k_levels_avx2(const uint8_t *pb, int t, int h, __m256i u[4]) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F), f45 = _mm256_set1_epi8(0x30);
    const uint8_t *p = pb + QP_Q6K_PACK_OFF_Q + 192 * t + 32 * h;
    const __m256i q0 = qp_load256(p), q1 = qp_load256(p + 64), qh = qp_load256(p + 128);
    u[0] = _mm256_or_si256(_mm256_and_si256(q0, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), f45));
    u[1] = _mm256_or_si256(_mm256_and_si256(q1, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), f45));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q0, 4), lo4), _mm256_and_si256(qh, f45));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), lo4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), f45));
}

/* halves h0 .. h0 + nh - 1 of a group (nb packed super-blocks at pg) against the nt tokens xt[t]:
 * sum[hh * nt + t] = the 8 rows' single dots (lane r = row 8 (h0 + hh) + r) */
__attribute__((always_inline)) static inline void packed_q6k(const uint8_t *pg, int h0, int nh, const uint8_t *const *xt, int nt,
                                                             int64_t nb, __m256 *sum) {
    for (int p = 0; p < nh * nt; p++) sum[p] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, pg += QP_Q6K_PACK_BYTES) {
        __m256i isum[4], both[2][16];
        for (int hh = 0; hh < nh; hh++) {
            __m256i sc[16], pair[8];
            for (int j = 0; j < 16; j++) sc[j] = q6k_scale32(pg, j, h0 + hh);
            for (int k = 0; k < 8; k++) pair[k] = int16_pair(sc[2 * k], sc[2 * k + 1]);
            for (int t = 0; t < nt; t++) { /* the level bias: -32 sum_j sc_j bsum_j */
                const uint8_t *bs = xt[t] + (size_t)i * QP_Q8_K_BYTES + QP_Q8_K_OFF_BSUMS;
                __m256i bias = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) bias = _mm256_add_epi32(bias, _mm256_madd_epi16(pair[k], bcast32(bs + 4 * k)));
                isum[hh * nt + t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
            }
            for (int j = 0; j < 16; j++) both[hh][j] = int16_pair(sc[j], sc[j]);
        }
        for (int t0 = 0; t0 < 16; t0 += 2) /* triples t0, t0 + 1: the same 4 sub-blocks 8h + 2m + (t0 % 8) / 4 */
            for (int hh = 0; hh < nh; hh++) {
                __m256i u0[4], u1[4];
                q6k_levels_avx2(pg, t0, h0 + hh, u0);
                q6k_levels_avx2(pg, t0 + 1, h0 + hh, u1);
                for (int t = 0; t < nt; t++) {
                    const uint8_t *a = xt[t] + (size_t)i * QP_Q8_K_BYTES + QP_Q8_K_OFF_QS + 128 * (t0 / 8) + 4 * (t0 % 8);
                    for (int m = 0; m < 4; m++) {
                        const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(u0[m], bcast32(a + 32 * m)),
                                                             _mm256_maddubs_epi16(u1[m], bcast32(a + 32 * m + 4)));
                        isum[hh * nt + t] = _mm256_add_epi32(isum[hh * nt + t],
                                                             _mm256_madd_epi16(p16, both[hh][8 * (t0 / 8) + 2 * m + (t0 % 8) / 4]));
                    }
                }
            }
        for (int hh = 0; hh < nh; hh++) {
            const __m256 d = _mm256_loadu_ps((const float *)(const void *)(pg + 32 * (h0 + hh)));
            for (int t = 0; t < nt; t++) {
                const int p = hh * nt + t;
                const __m256 da = _mm256_set1_ps(qp_load_f32le(xt[t] + (size_t)i * QP_Q8_K_BYTES));
                sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[p])));
            }
        }
    }
}

/* encoding.h qp_vec_dot_q8_packed_fn for Q4_K (six false) or Q6_K groups: one token both halves at
 * once (decode: one stream of the groups); several, each half against tokens in fours (a group's
 * super-blocks re-read from cache) */
__attribute__((always_inline)) static inline void packed_k_call(bool six, const uint8_t *pg, int h0, int nh, const uint8_t *const *xt,
                                                                int nt, int64_t nb, __m256 *sum) {
    if (six) packed_q6k(pg, h0, nh, xt, nt, nb, sum);
    else packed_q4k(pg, h0, nh, xt, nt, nb, sum);
}
__attribute__((always_inline)) static inline void packed_k_avx2(bool six, const void *packed, int64_t n_groups, const void *xq,
                                                                size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy) {
    const int64_t nb = n / QP_QK_K;
    const size_t group_bytes = (size_t)nb * (six ? QP_Q6K_PACK_BYTES : QP_Q4K_PACK_BYTES);
    const uint8_t *x = xq;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *pg = (const uint8_t *)packed + (size_t)g * group_bytes;
        float *yg = y + (size_t)(g * 16);
        __m256 sum[4];
        if (n_tok == 1) {
            packed_k_call(six, pg, 0, 2, &x, 1, nb, sum);
            _mm256_storeu_ps(yg, sum[0]);
            _mm256_storeu_ps(yg + 8, sum[1]);
            continue;
        }
        for (int h = 0; h < 2; h++)
            for (int64_t t0 = 0; t0 < n_tok; t0 += 4) {
                const int nt = n_tok - t0 < 4 ? (int)(n_tok - t0) : 4;
                const uint8_t *xt[4];
                for (int t = 0; t < nt; t++) xt[t] = x + (size_t)(t0 + t) * ldxq;
                switch (nt) { /* constant token counts: the chains stay in registers */
                case 4: packed_k_call(six, pg, h, 1, xt, 4, nb, sum); break;
                case 3: packed_k_call(six, pg, h, 1, xt, 3, nb, sum); break;
                case 2: packed_k_call(six, pg, h, 1, xt, 2, nb, sum); break;
                default: packed_k_call(six, pg, h, 1, xt, 1, nb, sum); break;
                }
                for (int t = 0; t < nt; t++) _mm256_storeu_ps(yg + (size_t)(t0 + t) * ldy + 8 * h, sum[t]);
            }
    }
}
void qp_q4k_packed_dot_q8k_avx2(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                int64_t n, float *y, size_t ldy) {
    packed_k_avx2(false, packed, n_groups, xq, ldxq, n_tok, n, y, ldy);
}
void qp_q6k_packed_dot_q8k_avx2(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                int64_t n, float *y, size_t ldy) {
    packed_k_avx2(true, packed, n_groups, xq, ldxq, n_tok, n, y, ldy);
}

/* Repacked BQ4 groups (qdot.h QP_BQ4_PACK_*), AVX2: the 16 rows as two halves of 8 int32 lanes (a
 * 64-byte code vector is two 32-byte ones), token by token. Per block the token's activations are
 * reordered as in the VNNI kernel (qdot_avx512.c); per half, the low / high nibbles of the 4 code
 * vectors by maddubs against 4-byte activation broadcasts, summed in int16 (|lane| <= 8 * 2 * 15 *
 * 127 < 2^15: no saturation), one madd, plus -zero_r x the block's activation sum (vpmulld), then
 * the reference's float step in the 8 lanes, chain b mod 4. */
static inline void bq4_packed_block(const uint8_t *pb, const uint8_t *ab, __m256 *s_lo, __m256 *s_hi) {
    const __m256i nib = _mm256_set1_epi8(0x0F);
    int32_t ap[8];
    const __m256i nsum = _mm256_set1_epi32(-qp_bq4_act_groups(ab, ap));
    const __m256 da = _mm256_set1_ps(_cvtsh_ss(qp_load_u16le(ab)));
    for (int h = 0; h < 2; h++) {
        __m256i p = _mm256_setzero_si256();
        for (int g = 0; g < 4; g++) {
            const __m256i q = qp_load256(pb + 64 * g + 32 * h);
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(q, nib), _mm256_set1_epi32(ap[2 * g])));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), nib), _mm256_set1_epi32(ap[2 * g + 1])));
        }
        uint64_t z8;
        memcpy(&z8, pb + QP_BQ4_PACK_OFF_Z + 8 * h, 8);
        const __m256i corr = _mm256_mullo_epi32(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128((long long)z8)), nsum);
        const __m256i isum = _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), corr);
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pb + QP_BQ4_PACK_OFF_D + 16 * h))), da);
        __m256 *s = h ? s_hi : s_lo;
        *s = _mm256_add_ps(*s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum)));
    }
}
void qp_bq4_packed_dot_q8_0_avx2(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                 float *y, size_t ldy) {
    const int64_t nb = n / QP_QK;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t t = 0; t < n_tok; t++) {
            const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * QP_BQ4_PACK_BYTES;
            const uint8_t *ab = (const uint8_t *)xq + (size_t)t * ldxq;
            __m256 s[2][QP_QDOT_CHAINS];
            for (int c = 0; c < QP_QDOT_CHAINS; c++) s[0][c] = s[1][c] = _mm256_setzero_ps();
            int64_t i = 0;
            for (; i + 4 <= nb; i += 4)
                for (int c = 0; c < QP_QDOT_CHAINS; c++)
                    bq4_packed_block(pg + (size_t)(i + c) * QP_BQ4_PACK_BYTES, ab + (size_t)(i + c) * QP_Q8_0_BYTES, &s[0][c], &s[1][c]);
            for (int c = 0; i < nb; i++, c++)
                bq4_packed_block(pg + (size_t)i * QP_BQ4_PACK_BYTES, ab + (size_t)i * QP_Q8_0_BYTES, &s[0][c], &s[1][c]);
            float *yt = y + (size_t)t * ldy + (size_t)(g * QP_BQ4_PACK_ROWS);
            for (int h = 0; h < 2; h++)
                _mm256_storeu_ps(yt + 8 * h, _mm256_add_ps(_mm256_add_ps(s[h][0], s[h][2]), _mm256_add_ps(s[h][1], s[h][3])));
        }
}

/* Repacked TQ2_0 groups (qdot.h QP_TQ2_PACK_*, encodings.md "Repacked TQ2_0 rows"), AVX2: a 64-byte
 * code vector is two ymm halves (rows 0-7, 8-15; row r in int32 lane r % 8). Each half gives 4 code
 * vectors (w >> 2s) & 3 (0..3, shifted down: maddubs of codes masked in place, up to 192, could
 * saturate int16), maddubs'd against the token's 4 activations of s (a 4-byte broadcast): int16
 * pairs |<= 2 x 3 x 128 = 768|; 8 vectors x 4 s summed in int16 (|<= 24576| < 2^15: exact), then
 * one madd to int32, twice per block; isum = that - asum (codes are level + 1). NH halves x NT
 * tokens per call (NH * NT <= 4). Float steps those of the VNNI kernel in 8 lanes. */
#define QP_TQ2_AVX2_TT 4
/* the codes are prefetched this many bytes ahead (one cache line per code vector) */
#define QP_TQ2_AHEAD 2048
__attribute__((always_inline)) static inline void tq2_packed_block_avx2(const uint8_t *codes, int h0, int nh, const int8_t *const a[],
                                                                        const int32_t asum[], int nt, __m256i isum[]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int p = 0; p < nh * nt; p++) isum[p] = _mm256_set1_epi32(-asum[p % nt]);
    for (int v0 = 0; v0 < 16; v0 += 8) {
        __m256i acc[QP_TQ2_AVX2_TT];
        for (int p = 0; p < nh * nt; p++) acc[p] = _mm256_setzero_si256();
        for (int v = v0; v < v0 + 8; v++) {
            _mm_prefetch((const char *)(uintptr_t)(codes + 64 * v + QP_TQ2_AHEAD), _MM_HINT_T0);
            for (int hh = 0; hh < nh; hh++) {
                const __m256i w = qp_load256(codes + 64 * v + 32 * (h0 + hh));
                const __m256i u[4] = {_mm256_and_si256(w, m3), _mm256_and_si256(_mm256_srli_epi16(w, 2), m3),
                                      _mm256_and_si256(_mm256_srli_epi16(w, 4), m3), _mm256_and_si256(_mm256_srli_epi16(w, 6), m3)};
                for (int t = 0; t < nt; t++)
                    for (int s = 0; s < 4; s++)
                        acc[hh * nt + t] = _mm256_add_epi16(acc[hh * nt + t],
                                                            _mm256_maddubs_epi16(u[s], bcast32((const uint8_t *)a[t] + 16 * v + 4 * s)));
            }
        }
        for (int p = 0; p < nh * nt; p++) isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(acc[p], _mm256_set1_epi16(1)));
    }
}
/* halves h0 .. h0 + nh - 1 of one group (nb blocks at pg) against nt tokens (x / ldx, y / ldy as
 * in qdot_avx512.c tq2_packed_group: Q8_K rows and float y, or int8 rows and double y) */
__attribute__((always_inline)) static inline void tq2_packed_avx2(const uint8_t *pg, int64_t nb, int h0, int nh, bool i8, const void *x,
                                                                  size_t ldx, int nt, const int32_t *sums, void *y, size_t ldy) {
    __m256 sum[QP_TQ2_AVX2_TT];
    __m256d lo[QP_TQ2_AVX2_TT], hi[QP_TQ2_AVX2_TT];
    for (int p = 0; p < nh * nt; p++) sum[p] = _mm256_setzero_ps(), lo[p] = hi[p] = _mm256_setzero_pd();
    for (int64_t o = 0; o < 32 * nb; o += 64) /* the next group's scales: a second stream the hardware does not follow */
        _mm_prefetch((const char *)(uintptr_t)(pg + nb * (QP_TQ2_PACK_BYTES + QP_TQ2_PACK_CODES) + o), _MM_HINT_T0);
    for (int64_t i = 0; i < nb; i++) {
        __m256i isum[QP_TQ2_AVX2_TT];
        const int8_t *a[QP_TQ2_AVX2_TT];
        int32_t asum[QP_TQ2_AVX2_TT];
        for (int t = 0; t < nt; t++) a[t] = qp_tq2_block_acts_of(x, ldx, t, i, i8, sums, nb, &asum[t]);
        tq2_packed_block_avx2(pg + (size_t)i * QP_TQ2_PACK_CODES, h0, nh, a, asum, nt, isum);
        for (int hh = 0; hh < nh; hh++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(pg + QP_TQ2_PACK_CODES * nb + 32 * i + 16 * (h0 + hh))));
            for (int t = 0; t < nt; t++) {
                const int p = hh * nt + t;
                if (i8) {
                    lo[p] = _mm256_add_pd(lo[p], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(dw)),
                                                               _mm256_cvtepi32_pd(_mm256_castsi256_si128(isum[p]))));
                    hi[p] = _mm256_add_pd(hi[p], _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(dw, 1)),
                                                               _mm256_cvtepi32_pd(_mm256_extracti128_si256(isum[p], 1))));
                    continue;
                }
                const float da = qp_load_f32le((const uint8_t *)x + (size_t)t * ldx + (size_t)i * QP_Q8_K_BYTES);
                const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(da));
                sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[p])));
            }
        }
    }
    for (int hh = 0; hh < nh; hh++)
        for (int t = 0; t < nt; t++) {
            const int p = hh * nt + t;
            const size_t at = (size_t)t * ldy + (size_t)(8 * (h0 + hh));
            if (!i8) {
                _mm256_storeu_ps((float *)y + at, sum[p]);
                continue;
            }
            _mm256_storeu_pd((double *)y + at, lo[p]);
            _mm256_storeu_pd((double *)y + at + 4, hi[p]);
        }
}
/* group g against the tokens t0 .. t0 + 3 (fewer at the end): one token both halves at once
 * (decode: one stream of the groups); several each half against them (a constant count per call:
 * the chains stay in registers); sums: qp_tq2_i8_sums of those tokens or NULL */
__attribute__((always_inline)) static inline void tq2_packed_at_avx2(const void *packed, int64_t g, int64_t t0, int64_t n_tok,
                                                                     int64_t nb, bool i8, const void *x, size_t ldx,
                                                                     const int32_t *sums, void *y, size_t ldy) {
    const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * QP_TQ2_PACK_BYTES;
    const int nt = n_tok - t0 < QP_TQ2_AVX2_TT ? (int)(n_tok - t0) : QP_TQ2_AVX2_TT;
    const void *xt = (const uint8_t *)x + (size_t)t0 * ldx;
    void *yt = (uint8_t *)y + ((size_t)t0 * ldy + (size_t)(g * QP_TQ2_PACK_ROWS)) * (i8 ? sizeof(double) : sizeof(float));
    if (n_tok == 1) {
        tq2_packed_avx2(pg, nb, 0, 2, i8, xt, ldx, 1, sums, yt, ldy);
        return;
    }
    for (int h = 0; h < 2; h++) switch (nt) {
        case 4: tq2_packed_avx2(pg, nb, h, 1, i8, xt, ldx, 4, sums, yt, ldy); break;
        case 3: tq2_packed_avx2(pg, nb, h, 1, i8, xt, ldx, 3, sums, yt, ldy); break;
        case 2: tq2_packed_avx2(pg, nb, h, 1, i8, xt, ldx, 2, sums, yt, ldy); break;
        default: tq2_packed_avx2(pg, nb, h, 1, i8, xt, ldx, 1, sums, yt, ldy); break;
        }
}
/* the loop orders of qdot_avx512.c tq2_packed */
__attribute__((always_inline)) static inline void tq2_packed_groups_avx2(const void *packed, int64_t n_groups, bool i8, const void *x,
                                                                         size_t ldx, int64_t n_tok, int64_t n, void *y, size_t ldy) {
    const int64_t nb = n / QP_QK_K;
    if (!i8 || nb > QP_TQ2_SUM_BLOCKS) {
        for (int64_t g = 0; g < n_groups; g++)
            for (int64_t t0 = 0; t0 < n_tok; t0 += QP_TQ2_AVX2_TT) tq2_packed_at_avx2(packed, g, t0, n_tok, nb, i8, x, ldx, NULL, y, ldy);
        return;
    }
    int32_t sums[QP_TQ2_AVX2_TT * QP_TQ2_SUM_BLOCKS];
    for (int64_t t0 = 0; t0 < n_tok; t0 += QP_TQ2_AVX2_TT) {
        qp_tq2_i8_sums((const int8_t *)x + (size_t)t0 * ldx, ldx, n_tok - t0 < QP_TQ2_AVX2_TT ? (int)(n_tok - t0) : QP_TQ2_AVX2_TT, nb,
                       sums);
        for (int64_t g = 0; g < n_groups; g++) tq2_packed_at_avx2(packed, g, t0, n_tok, nb, true, x, ldx, sums, y, ldy);
    }
}
void qp_tq2_0_packed_dot_q8k_avx2(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                  float *y, size_t ldy) {
    tq2_packed_groups_avx2(packed, n_groups, false, xq, ldxq, n_tok, n, y, ldy);
}
void qp_tq2_0_packed_dot_i8_avx2(const void *packed, int64_t n_groups, const int8_t *a, size_t lda, int64_t n_tok, int64_t n,
                                 double *y, size_t ldy) {
    tq2_packed_groups_avx2(packed, n_groups, true, a, lda, n_tok, n, y, ldy);
}
