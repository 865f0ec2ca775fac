/* Helpers of the AVX2 / AVX-512 fast-path dots (qdot_avx2.c, qdot_avx512.c); included only by
 * files compiled with AVX2 enabled. */
#ifndef QP_QDOT_SIMD_H
#define QP_QDOT_SIMD_H
#include <immintrin.h>
#include <string.h>

#include "encodings/encodings_internal.h"

static inline int32_t qp_hsum256_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Q4_0: nibbles - 8 (low nibbles are elements 0..15, high 16..31) */
static inline __m256i qp_q4_0_levels256(const uint8_t *b) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

/* Q5_0 unsigned: nibble | bit i of qh << 4 (level + 16) */
static inline __m256i qp_q5_0_unsigned256(const uint8_t *b) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 6));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    const __m256i qh = _mm256_set1_epi32((int)qp_load_u32le(b + 2));
    /* byte i <- byte i/8 of qh, then test bit i%8 */
    const __m256i spread = _mm256_shuffle_epi8(qh, _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                                                     0x0101010101010101LL, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}
/* Q5_0: (nibble | bit i of qh << 4) - 16 */
static inline __m256i qp_q5_0_levels256(const uint8_t *b) {
    return _mm256_sub_epi8(qp_q5_0_unsigned256(b), _mm256_set1_epi8(16));
}

/* sum over the 8 sub-blocks of min_j * (bsum 2j + bsum 2j+1), exact */
static inline int32_t qp_q4k_min_sum(const uint8_t mn[8], const uint8_t *bsums) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)bsums);
    const __m128i b2 = _mm_loadu_si128((const __m128i *)(const void *)(bsums + 16));
    const __m128i pairs = _mm_hadd_epi16(b, b2); /* |bsum pair| <= 2 * 32 * 127: fits int16 */
    uint64_t m8;
    memcpy(&m8, mn, 8);
    const __m128i m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m8));
    __m128i s = _mm_madd_epi16(pairs, m);
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Q6_K: the 4 x 32 unsigned 6-bit levels (0..63) of one 128-element half, element 32m + l */
static inline void qp_q6k_unsigned_levels(const uint8_t *ql, const uint8_t *qh, __m256i u[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i la = _mm256_loadu_si256((const __m256i *)(const void *)ql);
    const __m256i lb = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)qh);
    u[0] = _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    u[1] = _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(h, m2));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
}

/* Q8_0: the 32 stored int8 levels */
static inline __m256i qp_q8_0_levels256(const uint8_t *b) {
    return _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
}

/* Q4_0 nibbles, unsigned (level + 8): elements 0-15 low nibbles, 16-31 high */
static inline __m256i qp_q4_0_nibbles256(const uint8_t *b) {
    const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + 2));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* Two rows' blocks b0, b1 paired by halves for the tiles: *wl = [b0 elements 0-15 | b1 elements
 * 0-15], *wh = the same for elements 16-31 */
static inline void qp_q8_0_halves(const uint8_t *b0, const uint8_t *b1, __m256i *wl, __m256i *wh) {
    *wl = _mm256_loadu2_m128i((const __m128i *)(const void *)(b1 + 2), (const __m128i *)(const void *)(b0 + 2));
    *wh = _mm256_loadu2_m128i((const __m128i *)(const void *)(b1 + 18), (const __m128i *)(const void *)(b0 + 18));
}
#define QP_QDOT_HALVES_OF(NAME, LV)                                                               \
    static inline void NAME(const uint8_t *b0, const uint8_t *b1, __m256i *wl, __m256i *wh) {     \
        const __m256i l0 = LV(b0), l1 = LV(b1);                                                   \
        *wl = _mm256_permute2x128_si256(l0, l1, 0x20);                                            \
        *wh = _mm256_permute2x128_si256(l0, l1, 0x31);                                            \
    }
QP_QDOT_HALVES_OF(qp_q4_0_halves, qp_q4_0_levels256)
QP_QDOT_HALVES_OF(qp_q5_0_halves, qp_q5_0_levels256)
QP_QDOT_HALVES_OF(qp_q5_0_unsigned_halves, qp_q5_0_unsigned256)
/* Q4_0 unsigned nibbles by halves: [b0 low nibbles | b1 low nibbles], [b0 high | b1 high] */
static inline void qp_q4_0_nibble_halves(const uint8_t *b0, const uint8_t *b1, __m256i *wl, __m256i *wh) {
    const __m256i q = _mm256_loadu2_m128i((const __m128i *)(const void *)(b1 + 2), (const __m128i *)(const void *)(b0 + 2));
    *wl = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
    *wh = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
}

/* BQ4 (enc_bq4.md): the 32 unsigned codes in element order (element 2i the low nibble of byte 4 + i,
 * 2i + 1 its high nibble: each byte zero-extended to a 16-bit word w, then (w | w << 4) & 0x0F0F) */
static inline __m256i qp_bq4_codes256(const uint8_t *b) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(b + 4)));
    return _mm256_and_si256(_mm256_or_si256(w, _mm256_slli_epi16(w, 4)), _mm256_set1_epi16(0x0F0F));
}
QP_QDOT_HALVES_OF(qp_bq4_halves, qp_bq4_codes256)
/* BQ4's -zero (the signed byte 2) in every int16 lane; with the activations' int16 pair sums
 * (maddubs by 1) one madd gives the lanes of -zero sum a */
static inline __m256i qp_bq4_neg_zero16(const uint8_t *b) { return _mm256_set1_epi16((short)-(int8_t)b[2]); }
static inline __m256i qp_pair_sums16(__m256i a) { return _mm256_maddubs_epi16(_mm256_set1_epi8(1), a); }
/* the tile's BQ4 row preparation: -zero of row 2p in lanes 0-7 (int16), of row 2p + 1 in 8-15 */
static inline __m256i qp_bq4_row_zeros(const uint8_t *b0, const uint8_t *b1, __m256i wl, __m256i wh) {
    (void)wl, (void)wh;
    return _mm256_set_m128i(_mm_set1_epi16((short)-(int8_t)b1[2]), _mm_set1_epi16((short)-(int8_t)b0[2]));
}
/* the token's int16 pair sums over both halves (|.| <= 4 * 127): lanes 0-7 and 8-15 each sum to the
 * block's sum of a (the halves are broadcast to both 128-bit lanes) */
static inline __m256i qp_tok_pair_sums(__m256i al, __m256i ah) { return _mm256_add_epi16(qp_pair_sums16(al), qp_pair_sums16(ah)); }
/* The repacked BQ4 kernels' view of a Q8_0 block ab (qdot.h QP_BQ4_PACK_*): ap[2g] = its elements
 * 8g, 8g + 2, 8g + 4, 8g + 6 (the low nibbles of code group g), ap[2g + 1] = 8g + 1, 8g + 3, ...;
 * returns the sum of its 32 activations (vpsadbw of a ^ 0x80, minus 32 * 128) */
static inline int32_t qp_bq4_act_groups(const uint8_t *ab, int32_t ap[8]) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(ab + 2));
    _mm256_storeu_si256((__m256i *)(void *)ap,
                        _mm256_shuffle_epi8(a, _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 0, 2, 4, 6, 1, 3,
                                                                5, 7, 8, 10, 12, 14, 9, 11, 13, 15)));
    const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(a, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    return (int32_t)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
}
/* the tile hooks of encodings without a row preparation, token preparation or token correction */
static inline __m256i qp_no_row_prep(const uint8_t *b0, const uint8_t *b1, __m256i wl, __m256i wh) {
    (void)b0, (void)b1, (void)wh;
    return wl;
}
static inline __m256i qp_same(__m256i v) { return v; }
static inline __m256i qp_no_tok_corr(__m256i al, __m256i ah) {
    (void)ah;
    return al;
}

/* ---- 32-element blocks against Q8_0 (enc_qdot.c legacy_dot) --------------------------------------
 * Both kernels take blocks four at a time: their exact int32 sums go to the four lanes of one vector
 * (lane c = chain c) and one float step s = s + (d_w d_a) isum serves all four chains. */

/* [sum of v0, v1, v2, v3] (exact): the 8 lanes of each summed by a transposed tree */
static inline __m128i qp_qdot_sum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i m01 = _mm256_add_epi32(_mm256_unpacklo_epi32(v0, v1), _mm256_unpackhi_epi32(v0, v1));
    const __m256i m23 = _mm256_add_epi32(_mm256_unpacklo_epi32(v2, v3), _mm256_unpackhi_epi32(v2, v3));
    const __m256i q = _mm256_add_epi32(_mm256_unpacklo_epi64(m01, m23), _mm256_unpackhi_epi64(m01, m23));
    return _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
}

/* the f16 scales at p, p + stride, ... of k <= 4 blocks as floats (lanes past k: 0) */
static inline __m128 qp_qdot_scales4(const uint8_t *p, size_t stride, int k) {
    uint64_t h = 0;
    for (int c = 0; c < k; c++) h |= (uint64_t)qp_load_u16le(p + (size_t)c * stride) << (16 * c);
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
}
/* the f16 scales at rows[c] + off of k <= 4 rows as floats (lanes past k: 0) */
static inline __m128 qp_qdot_row_scales4(const uint8_t *const *rows, size_t off, int k) {
    uint64_t h = 0;
    for (int c = 0; c < k; c++) h |= (uint64_t)qp_load_u16le(rows[c] + off) << (16 * c);
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)h));
}

/* (s0 + s2) + (s1 + s3) */
static inline float qp_qdot_chains_sum(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* The legacy-block dot against Q8_0 activations, one definition for every SIMD level: ATTR is
 * the level's target attribute (or nothing), BLOCK_SUMS(wb, a) 8 exact int32 lanes summing to the
 * isum of the weight block at wb with the 32 activations a. Blocks past the end of a group of four
 * count as isum 0 with scale 0: their lanes add +0, which changes no chain (a chain is never -0). */
#define QP_QDOT_LEGACY_BLOCKS(ATTR, FN, BLOCK_SUMS, BYTES)                                        \
    ATTR static inline __attribute__((always_inline)) __m128 FN##_group(const uint8_t *wb, const uint8_t *ab, int k, __m128 s) { \
        __m256i v[QP_QDOT_CHAINS];                                                                \
        for (int c = 0; c < QP_QDOT_CHAINS; c++)                                                  \
            v[c] = c < k ? BLOCK_SUMS(wb + (size_t)c * (BYTES), qp_q8_0_levels256(ab + (size_t)c * QP_Q8_0_BYTES)) \
                         : _mm256_setzero_si256();                                                \
        const __m128 d = _mm_mul_ps(qp_qdot_scales4(wb, (BYTES), k), qp_qdot_scales4(ab, QP_Q8_0_BYTES, k)); \
        return _mm_add_ps(s, _mm_mul_ps(d, _mm_cvtepi32_ps(qp_qdot_sum4(v[0], v[1], v[2], v[3])))); \
    }                                                                                             \
    ATTR float FN(const void *w, const void *xq, int64_t n) {                                     \
        const uint8_t *wb = w, *ab = xq;                                                          \
        const int64_t nb = n / QP_QK;                                                             \
        __m128 s = _mm_setzero_ps();                                                              \
        int64_t i = 0;                                                                            \
        for (; i + QP_QDOT_CHAINS <= nb; i += QP_QDOT_CHAINS)                                     \
            s = FN##_group(wb + (size_t)i * (BYTES), ab + (size_t)i * QP_Q8_0_BYTES, QP_QDOT_CHAINS, s); \
        if (i < nb) s = FN##_group(wb + (size_t)i * (BYTES), ab + (size_t)i * QP_Q8_0_BYTES, (int)(nb - i), s); \
        return qp_qdot_chains_sum(s);                                                             \
    }
/* the same for blocks of 32 signed levels LV(wb), LANE_SUMS(w, a) the level's 8 exact int32 lane
 * sums of w*a (maddubs+madd on AVX2, vpdpbusd on VNNI) */
#define QP_QDOT_LEGACY_Q8_0(ATTR, FN, LANE_SUMS, LV, BYTES)                                       \
    ATTR static inline __m256i FN##_block_sums(const uint8_t *wb, __m256i a) { return LANE_SUMS(LV(wb), a); } \
    QP_QDOT_LEGACY_BLOCKS(ATTR, FN, FN##_block_sums, BYTES)

/* Tiles: the tn row (or token) pointers base + (first + i) * ld, i < n, of a partial tile whose
 * missing entries (i >= n) repeat the last one */
static inline void qp_tile_ptrs(const void *base, size_t ld, int64_t first, int n, int tn, const uint8_t **p) {
    for (int i = 0; i < tn; i++) p[i] = (const uint8_t *)base + (size_t)(first + (i < n ? i : n - 1)) * ld;
}
/* A rows x tokens function FN (traits vec_dot_q8_tile): one token (decode) row by row through the
 * single dot DOT; several in tiles of TR rows x TT tokens, the tile's TR row pointers wr and TT token
 * pointers xt (partial tiles: nr rows, nt tokens, the last repeated) given to the body (the
 * variadic argument), which computes and stores the tile at rows r0.., tokens t0.. */
#define QP_QDOT_TILE_FN(ATTR, FN, DOT, TR, TT, ...)                                               \
    ATTR void FN(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq,          \
                 int64_t n_tok, int64_t n, float *y, size_t ldy) {                                \
        if (n_tok == 1) {                                                                         \
            for (int64_t r = 0; r < n_rows; r++) y[r] = DOT((const uint8_t *)w + (size_t)r * ldw, xq, n); \
            return;                                                                               \
        }                                                                                         \
        for (int64_t r0 = 0; r0 < n_rows; r0 += (TR)) {                                           \
            const int nr = n_rows - r0 < (TR) ? (int)(n_rows - r0) : (TR);                        \
            const uint8_t *wr[TR];                                                                \
            qp_tile_ptrs(w, ldw, r0, nr, (TR), wr);                                               \
            for (int64_t t0 = 0; t0 < n_tok; t0 += (TT)) {                                        \
                const int nt = n_tok - t0 < (TT) ? (int)(n_tok - t0) : (TT);                      \
                const uint8_t *xt[TT];                                                            \
                qp_tile_ptrs(xq, ldxq, t0, nt, (TT), xt);                                         \
                __VA_ARGS__                                                                       \
            }                                                                                     \
        }                                                                                         \
    }

/* The legacy-block rows x tokens tile (traits vec_dot_q8_tile) for every SIMD level, for prompts:
 * tiles of 2 RP rows x 4 tokens. Per block, rows 2p and 2p + 1 are paired in one vector by halves
 * (HALVES: wl = [row 2p elements 0-15 | row 2p+1 elements 0-15], wh the same for 16-31; levels,
 * or for Q4_0 at VNNI the unsigned nibbles) and made once with ROW_PREP(b0, b1, wl, wh) (b0, b1 the
 * two blocks) for the 4 tokens;
 * a token's halves, each broadcast to both 128-bit lanes and passed through TOK_PREP, and
 * TOK_CORR(al, ah) once for all the rows; PAIR(wl, wh, row prep, al, ah, token corr) gives 4
 * exact int32 partial sums of each of the two (row, token) pairs (lanes 0-3: row 2p, 4-7: row
 * 2p + 1), so 4 tokens' vectors reduce by one transposed tree (12 shuffles for 8 pairs) to
 * lane 4h + t = isum of (row 2p + h, token t), and the float step runs for 8 pairs at once:
 * s = s + (d_w d_a) isum into the block's chain, the reference's operations per lane. Then
 * y = (s0 + s2) + (s1 + s3), DOT's bits for every pair. One token (decode): DOT row by row. Rows
 * and tokens past the ends of a partial tile repeat the last one and are not stored. */
#define QP_QDOT_LEGACY_TILE(ATTR, FN, DOT, HALVES, BYTES, RP, ROW_PREP, TOK_PREP, TOK_CORR, PAIR) \
    ATTR static inline __attribute__((always_inline)) void FN##_block(const uint8_t *const *wr,   \
                                                                      const uint8_t *const *xt,   \
                                                                      int64_t i, __m256 *s) {     \
        __m256i wl[RP], wh[RP], rp[RP], v[RP][4];                                                 \
        for (int p = 0; p < (RP); p++) {                                                          \
            const uint8_t *b0 = wr[2 * p] + (size_t)i * (BYTES), *b1 = wr[2 * p + 1] + (size_t)i * (BYTES); \
            HALVES(b0, b1, &wl[p], &wh[p]);                                                       \
            rp[p] = ROW_PREP(b0, b1, wl[p], wh[p]);                                               \
        }                                                                                         \
        for (int t = 0; t < 4; t++) {                                                             \
            const __m128i *a = (const __m128i *)(const void *)(xt[t] + (size_t)i * QP_Q8_0_BYTES + 2); \
            const __m256i al = TOK_PREP(_mm256_broadcastsi128_si256(_mm_loadu_si128(a)));        \
            const __m256i ah = TOK_PREP(_mm256_broadcastsi128_si256(_mm_loadu_si128(a + 1)));    \
            const __m256i tc = TOK_CORR(al, ah);                                                 \
            for (int p = 0; p < (RP); p++) v[p][t] = PAIR(wl[p], wh[p], rp[p], al, ah, tc);       \
        }                                                                                         \
        const __m128 dw = qp_qdot_row_scales4(wr, (size_t)i * (BYTES), 2 * (RP));                 \
        const __m128 da = qp_qdot_row_scales4(xt, (size_t)i * QP_Q8_0_BYTES, 4);                  \
        const __m256 da2 = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(da), _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3)); \
        for (int p = 0; p < (RP); p++) {                                                          \
            const __m256i q01 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[p][0], v[p][1]), _mm256_unpackhi_epi32(v[p][0], v[p][1])); \
            const __m256i q23 = _mm256_add_epi32(_mm256_unpacklo_epi32(v[p][2], v[p][3]), _mm256_unpackhi_epi32(v[p][2], v[p][3])); \
            const __m256i isum = _mm256_add_epi32(_mm256_unpacklo_epi64(q01, q23), _mm256_unpackhi_epi64(q01, q23)); \
            const __m256 dwp = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dw),                \
                                                        _mm256_setr_epi32(2 * p, 2 * p, 2 * p, 2 * p, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1)); \
            s[p] = _mm256_add_ps(s[p], _mm256_mul_ps(_mm256_mul_ps(dwp, da2), _mm256_cvtepi32_ps(isum))); \
        }                                                                                         \
    }                                                                                             \
    QP_QDOT_TILE_FN(ATTR, FN, DOT, 2 * (RP), 4,                                                     \
                const int64_t nb = n / QP_QK;                                                       \
                __m256 s0[RP], s1[RP], s2[RP], s3[RP];                                            \
                for (int p = 0; p < (RP); p++) s0[p] = s1[p] = s2[p] = s3[p] = _mm256_setzero_ps(); \
                int64_t i = 0;                                                                    \
                for (; i + 4 <= nb; i += 4) {                                                     \
                    FN##_block(wr, xt, i, s0);                                                    \
                    FN##_block(wr, xt, i + 1, s1);                                                \
                    FN##_block(wr, xt, i + 2, s2);                                                \
                    FN##_block(wr, xt, i + 3, s3);                                                \
                }                                                                                 \
                if (i < nb) FN##_block(wr, xt, i++, s0);                                          \
                if (i < nb) FN##_block(wr, xt, i++, s1);                                          \
                if (i < nb) FN##_block(wr, xt, i++, s2);                                          \
                float out[RP][8];                                                                 \
                for (int p = 0; p < (RP); p++)                                                    \
                    _mm256_storeu_ps(out[p], _mm256_add_ps(_mm256_add_ps(s0[p], s2[p]), _mm256_add_ps(s1[p], s3[p]))); \
                for (int t = 0; t < nt; t++)                                                      \
                    for (int r = 0; r < nr; r++) y[(size_t)(t0 + t) * ldy + (size_t)(r0 + r)] = out[r / 2][4 * (r % 2) + t]; \
    )

/* ---- ternary and 2-bit rows against Q8_K (enc_qdot.c ternary_dot) ---------------------------- */

static inline __m256i qp_load256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }

/* sum of Q8_K's 16 block sums (= sum of the 256 activations), exact */
static inline int32_t qp_q8k_bsum_total(const uint8_t *bsums) {
    return qp_hsum256_epi32(_mm256_madd_epi16(qp_load256(bsums), _mm256_set1_epi16(1)));
}

/* token t's 256 activations of block i of the rows at x (ldx bytes apart): Q8_K rows, or int8
 * rows with i8; *asum their sum (exact: 8 maddubs by ones, |lane| <= 8 x 256) */
static inline const int8_t *qp_tq2_block_acts(const void *x, size_t ldx, int t, int64_t i, bool i8, int32_t *asum) {
    const uint8_t *xt = (const uint8_t *)x + (size_t)t * ldx;
    if (!i8) {
        *asum = qp_q8k_bsum_total(xt + (size_t)i * QP_Q8_K_BYTES + QP_Q8_K_OFF_BSUMS);
        return (const int8_t *)(xt + (size_t)i * QP_Q8_K_BYTES + QP_Q8_K_OFF_QS);
    }
    const uint8_t *a = xt + (size_t)i * QP_QK_K;
    __m256i s = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_set1_epi8(1), qp_load256(a + 32 * k)));
    *asum = qp_hsum256_epi32(_mm256_madd_epi16(s, _mm256_set1_epi16(1)));
    return (const int8_t *)a;
}

/* Int8 rows: the activation sums of a call's token tile, made once for all its groups (rows of up
 * to QP_TQ2_SUM_BLOCKS blocks; longer rows make them per group and block as before): sums[t * nb +
 * i] of tokens 0 .. nt - 1, blocks 0 .. nb - 1 */
#define QP_TQ2_SUM_BLOCKS 64
static inline void qp_tq2_i8_sums(const void *x, size_t ldx, int nt, int64_t nb, int32_t *sums) {
    for (int t = 0; t < nt; t++)
        for (int64_t i = 0; i < nb; i++) (void)qp_tq2_block_acts(x, ldx, t, i, true, &sums[t * nb + i]);
}
/* qp_tq2_block_acts, the int8 sum taken from sums when made (non-NULL) */
static inline const int8_t *qp_tq2_block_acts_of(const void *x, size_t ldx, int t, int64_t i, bool i8, const int32_t *sums,
                                                 int64_t nb, int32_t *asum) {
    if (!sums) return qp_tq2_block_acts(x, ldx, t, i, i8, asum);
    *asum = sums[t * nb + i];
    return (const int8_t *)x + (size_t)t * ldx + (size_t)i * QP_QK_K;
}

/* Chunk k (0..7) of 32 elements of a 256-element chunk of a row: *u the unsigned codes (level +
 * the kernel's bias), *a the matching 32 activations (any order inside the chunk: the integer sum
 * does not depend on it). */
/* I2_S code -> level + 1: 0, 1, 2 and the illegal 3 -> 1 (level 0) */
static inline __m256i qp_i2s_unsigned(__m256i c) {
    return _mm256_shuffle_epi8(_mm256_setr_epi8(0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), c);
}
static inline void qp_i2s_chunk(const uint8_t *wb, const uint8_t *aq, int k, __m256i *u, __m256i *a) {
    const int blk = k / 4, s = k % 4; /* element 128blk + 32s + p: bits 7-2s..6-2s of byte 32blk + p */
    const __m256i c = _mm256_and_si256(_mm256_srli_epi16(qp_load256(wb + 32 * blk), 6 - 2 * s), _mm256_set1_epi8(3));
    *u = qp_i2s_unsigned(c);
    *a = qp_load256(aq + 128 * blk + 32 * s);
}
static inline void qp_i2s_arm_chunk(const uint8_t *wb, const uint8_t *aq, int k, __m256i *u, __m256i *a) {
    const int pr = k / 4, s = k % 4; /* 64-blocks 2pr and 2pr+1: element 16s + p of each */
    const __m256i c = _mm256_and_si256(_mm256_srli_epi16(qp_load256(wb + 32 * pr), 6 - 2 * s), _mm256_set1_epi8(3));
    *u = qp_i2s_unsigned(c);
    *a = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(const void *)(aq + 128 * pr + 64 + 16 * s)),
                          _mm_loadu_si128((const __m128i *)(const void *)(aq + 128 * pr + 16 * s)));
}
/* QK256: element i is bits 2(i%4) of byte i/4; LUT -2, -1, +1, +2 -> level + 2 = 0, 1, 3, 4 */
static inline void qp_qk256_chunk(const uint8_t *wb, const uint8_t *aq, int k, __m256i *u, __m256i *a) {
    uint64_t q8;
    memcpy(&q8, wb + 8 * k, 8);
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)q8),
                                            _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                                             4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7));
    const __m256i lo = _mm256_set1_epi32(0x40100401), hi = _mm256_set1_epi32((int)0x80200802u);
    const __m256i lo_set = _mm256_cmpeq_epi8(_mm256_and_si256(rep, lo), lo);
    const __m256i hi_set = _mm256_cmpeq_epi8(_mm256_and_si256(rep, hi), hi);
    *u = _mm256_add_epi8(_mm256_and_si256(lo_set, _mm256_set1_epi8(1)), _mm256_and_si256(hi_set, _mm256_set1_epi8(3)));
    *a = qp_load256(aq + 32 * k);
}
/* TQ1_0 base-3 digits: byte-wise ((uint8)(q * m) * 3) >> 8 with m the multiplier of each 16-bit
 * lane (3^n for digit n) */
static inline __m256i qp_tq1_digits(__m256i q, __m256i m) {
    const __m256i hi_byte = _mm256_set1_epi16((short)0xFF00);
    const __m256i even = _mm256_slli_epi16(_mm256_mullo_epi16(q, m), 8);                      /* (q_even m) << 8 */
    const __m256i odd = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(q, hi_byte), m), hi_byte); /* (q_odd m) << 8 */
    const __m256i three = _mm256_set1_epi16(3);
    return _mm256_or_si256(_mm256_mulhi_epu16(even, three), _mm256_slli_epi16(_mm256_mulhi_epu16(odd, three), 8));
}
static inline __m256i qp_pow3_pair(int n0, int n1) {
    static const short p3[5] = {1, 3, 9, 27, 81};
    return _mm256_set_m128i(_mm_set1_epi16(p3[n1]), _mm_set1_epi16(p3[n0]));
}
/* TQ1_0 chunk k of 32 elements (the activations a + 32k): codes u = level + 1 */
static inline __m256i qp_tq1_0_codes(const uint8_t *wb, int k) {
    if (k < 5) { /* elements 32k + m: digit k of qs[m] */
        static const short p3[5] = {1, 3, 9, 27, 81};
        return qp_tq1_digits(qp_load256(wb), _mm256_set1_epi16(p3[k]));
    }
    const __m128i q16 = _mm_loadu_si128((const __m128i *)(const void *)(wb + 32));
    if (k < 7) /* elements 160 + 16n + m, n = 2(k-5), 2(k-5)+1: digit n of qs[32 + m] */
        return qp_tq1_digits(_mm256_set_m128i(q16, q16), qp_pow3_pair(2 * (k - 5), 2 * (k - 5) + 1));
    /* k = 7: elements 224 + m (digit 4 of qs[32 + m]) and 240 + 4n + j (digit n of qh[j]) */
    uint32_t qh;
    memcpy(&qh, wb + QP_TQ1_0_OFF_QH, 4);
    const __m128i h16 = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)qh),
                                         _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
    const __m256i m = _mm256_set_epi16(27, 27, 9, 9, 3, 3, 1, 1, 81, 81, 81, 81, 81, 81, 81, 81);
    return qp_tq1_digits(_mm256_set_m128i(h16, q16), m);
}
static inline void qp_tq1_0_unpack(const uint8_t *wb, __m256i u[8]) {
    for (int k = 0; k < 8; k++) u[k] = qp_tq1_0_codes(wb, k);
}
/* TQ2_0: element 128h + 32s + m = (qs[32h + m] >> 2s) & 3, chunk k = 4h + s (activations a + 32k);
 * u = level + 1 (the unused code 3 -> 3, level 2, as the reference) */
static inline void qp_tq2_0_unpack(const uint8_t *wb, __m256i u[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i q = qp_load256(wb + 32 * h);
        u[4 * h] = _mm256_and_si256(q, m3);
        for (int s = 1; s < 4; s++) u[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
    }
}

/* The ternary / 2-bit dot against Q8_K for every SIMD level: ATTR the level's target attribute,
 * UDOT(u, a) its 8 exact int32 lane sums of u * a (u unsigned <= 4), CHUNK one of the chunk
 * functions above, BIAS the unsigned offset of the levels, D_OFF the f16 block scale's offset
 * (-1: none). Float steps as enc_qdot.c's ternary_dot. */
#define QP_QDOT_TERNARY_Q8K(ATTR, FN, UDOT, CHUNK, WBYTES, BIAS, D_OFF)                           \
    ATTR float FN(const void *w, const void *xq, int64_t n) {                                     \
        const uint8_t *wb = w, *ab = xq;                                                          \
        float sum = 0.0f;                                                                         \
        for (int64_t i = 0; i < n / QP_QK_K; i++, wb += (WBYTES), ab += QP_Q8_K_BYTES) {          \
            __m256i acc = _mm256_setzero_si256();                                                 \
            for (int k = 0; k < 8; k++) {                                                         \
                __m256i u, a;                                                                     \
                CHUNK(wb, ab + QP_Q8_K_OFF_QS, k, &u, &a);                                        \
                acc = _mm256_add_epi32(acc, UDOT(u, a));                                          \
            }                                                                                     \
            const int32_t isum = qp_hsum256_epi32(acc) - (BIAS) * qp_q8k_bsum_total(ab + QP_Q8_K_OFF_BSUMS); \
            const float da = qp_load_f32le(ab);                                                   \
            const float d = (D_OFF) >= 0 ? _cvtsh_ss(qp_load_u16le(wb + ((D_OFF) >= 0 ? (D_OFF) : 0))) * da : da; \
            sum = sum + d * (float)isum;                                                          \
        }                                                                                         \
        return sum;                                                                               \
    }
#define QP_QDOT_TERNARY_ALL(ATTR, SUFFIX, UDOT)                                                   \
    QP_QDOT_TERNARY_Q8K(ATTR, qp_i2s_dot_q8k_##SUFFIX, UDOT, qp_i2s_chunk, 64, 1, -1)             \
    QP_QDOT_TERNARY_Q8K(ATTR, qp_i2s_arm_dot_q8k_##SUFFIX, UDOT, qp_i2s_arm_chunk, 64, 1, -1)     \
    QP_QDOT_TERNARY_Q8K(ATTR, qp_qk256_dot_q8k_##SUFFIX, UDOT, qp_qk256_chunk, QP_QK256_BYTES, 2, -1)

/* ---- TQ2_0 / TQ1_0 against Q8_K: one row, and rows x tokens ----------------------------------
 * A level gives PAIR(u, ab): for a block's 8 unpacked code chunks u[k] (level + 1, chunk k against
 * the activations at ab + QP_Q8_K_OFF_QS + 32k) 8 int32 lanes whose sum is isum = sum u a - sum of
 * the 16 block sums (sum t a, exact). The drivers sum the lanes of several pairs at once (lane p
 * of a vector = the sum of pair p's lanes, exact) and take the reference's float steps in vector
 * lanes, each lane the operations of enc_qdot.c's ternary_dot for its (row, token) in block
 * order: d = f16(d_w) * d_a; s = s + d * (float)isum. */

/* lane p of the result = the sum of the 8 int32 lanes of v[p] (p < 8) */
static inline __m256i qp_sum8_epi32(const __m256i v[8]) {
    const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}
/* lane p of the result = the sum of the 8 int32 lanes of v[p] (p < 4) */
static inline __m128i qp_sum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* One row: blocks in groups of 4 (their isums in the 4 lanes of one vector, so one reduction and
 * one multiply serve 4 blocks), each lane's product then added to the sum in block order. */
#define QP_QDOT_TQ_ROW(ATTR, FN, PAIR, UNPACK, WBYTES, D_OFF)                                       \
    ATTR float FN(const void *w, const void *xq, int64_t n) {                                       \
        const uint8_t *wb = w, *ab = xq;                                                            \
        const int64_t nb = n / QP_QK_K;                                                             \
        float sum = 0.0f;                                                                           \
        __m256i u[8], v[4];                                                                         \
        int64_t i = 0;                                                                              \
        for (; i + 4 <= nb; i += 4, wb += 4 * (WBYTES), ab += 4 * QP_Q8_K_BYTES) {                  \
            for (int k = 0; k < 4; k++) {                                                           \
                UNPACK(wb + k * (WBYTES), u);                                                       \
                v[k] = PAIR(u, ab + k * QP_Q8_K_BYTES);                                             \
            }                                                                                       \
            const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16(                                          \
                (short)qp_load_u16le(wb + (D_OFF)), (short)qp_load_u16le(wb + (WBYTES) + (D_OFF)),  \
                (short)qp_load_u16le(wb + 2 * (WBYTES) + (D_OFF)), (short)qp_load_u16le(wb + 3 * (WBYTES) + (D_OFF)), 0, 0, 0, 0)); \
            const __m128 da = _mm_setr_ps(qp_load_f32le(ab), qp_load_f32le(ab + QP_Q8_K_BYTES),     \
                                          qp_load_f32le(ab + 2 * QP_Q8_K_BYTES), qp_load_f32le(ab + 3 * QP_Q8_K_BYTES)); \
            const __m128 p = _mm_mul_ps(_mm_mul_ps(dw, da),                                         \
                                        _mm_cvtepi32_ps(qp_sum4_epi32(v[0], v[1], v[2], v[3])));    \
            sum = sum + _mm_cvtss_f32(p);                                                           \
            sum = sum + _mm_cvtss_f32(_mm_movehdup_ps(p));                                          \
            sum = sum + _mm_cvtss_f32(_mm_movehl_ps(p, p));                                         \
            sum = sum + _mm_cvtss_f32(_mm_shuffle_ps(p, p, 3));                                     \
        }                                                                                           \
        for (; i < nb; i++, wb += (WBYTES), ab += QP_Q8_K_BYTES) {                                  \
            UNPACK(wb, u);                                                                          \
            const __m256i z = _mm256_setzero_si256();                                               \
            const int32_t isum = _mm_cvtsi128_si32(qp_sum4_epi32(PAIR(u, ab), z, z, z));            \
            sum = sum + (_cvtsh_ss(qp_load_u16le(wb + (D_OFF))) * qp_load_f32le(ab)) * (float)isum; \
        }                                                                                           \
        return sum;                                                                                 \
    }

/* Rows x tokens (traits vec_dot_q8_tile): one token row by row through DOT; several in tiles of
 * TR rows x TT tokens (TR * TT <= 8): per block each row's codes unpacked once for the tile's
 * tokens, each activation chunk loaded once per row, pair p = r * TT + t in lane p of the
 * reduction and of the float sums. Rows and tokens past the ends of a partial tile repeat the
 * last one and are not stored. */
#define QP_QDOT_TQ_TILE(ATTR, FN, DOT, PAIR, UNPACK, WBYTES, D_OFF, TR, TT)                         \
    QP_QDOT_TILE_FN(ATTR, FN, DOT, TR, TT,                                                          \
                __m256 sum = _mm256_setzero_ps();                                                   \
                for (int64_t i = 0; i < n / QP_QK_K; i++) {                                         \
                    __m256i v[8], u[8];                                                             \
                    float dw[8] = {0}, da[8] = {0};                                                 \
                    for (int p = (TR) * (TT); p < 8; p++) v[p] = _mm256_setzero_si256();            \
                    for (int r = 0; r < (TR); r++) {                                                \
                        const uint8_t *wb = wr[r] + (size_t)i * (WBYTES);                           \
                        UNPACK(wb, u);                                                              \
                        const float d = _cvtsh_ss(qp_load_u16le(wb + (D_OFF)));                     \
                        for (int t = 0; t < (TT); t++) {                                            \
                            const uint8_t *ab = xt[t] + (size_t)i * QP_Q8_K_BYTES;                  \
                            v[r * (TT) + t] = PAIR(u, ab);                                          \
                            dw[r * (TT) + t] = d;                                                   \
                            da[r * (TT) + t] = qp_load_f32le(ab);                                   \
                        }                                                                           \
                    }                                                                               \
                    const __m256 dd = _mm256_mul_ps(_mm256_loadu_ps(dw), _mm256_loadu_ps(da));      \
                    sum = _mm256_add_ps(sum, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(qp_sum8_epi32(v)))); \
                }                                                                                   \
                float s[8];                                                                         \
                _mm256_storeu_ps(s, sum);                                                           \
                for (int t = 0; t < nt; t++)                                                        \
                    for (int r = 0; r < nr; r++) y[(size_t)(t0 + t) * ldy + (size_t)(r0 + r)] = s[r * (TT) + t]; \
    )
/* TQ2_0 and TQ1_0 at one level (SUFFIX avx2 / vnni): the single dot and the TR x TT tile */
#define QP_QDOT_TQ_ALL(ATTR, SUFFIX, PAIR, TR, TT)                                                  \
    QP_QDOT_TQ_ROW(ATTR, qp_tq2_0_dot_q8k_##SUFFIX, PAIR, qp_tq2_0_unpack, QP_TQ2_0_BYTES, QP_TQ2_0_OFF_D) \
    QP_QDOT_TQ_ROW(ATTR, qp_tq1_0_dot_q8k_##SUFFIX, PAIR, qp_tq1_0_unpack, QP_TQ1_0_BYTES, QP_TQ1_0_OFF_D) \
    QP_QDOT_TQ_TILE(ATTR, qp_tq2_0_dot_q8k_tile_##SUFFIX, qp_tq2_0_dot_q8k_##SUFFIX, PAIR, qp_tq2_0_unpack, \
                    QP_TQ2_0_BYTES, QP_TQ2_0_OFF_D, TR, TT)                                         \
    QP_QDOT_TQ_TILE(ATTR, qp_tq1_0_dot_q8k_tile_##SUFFIX, qp_tq1_0_dot_q8k_##SUFFIX, PAIR, qp_tq1_0_unpack, \
                    QP_TQ1_0_BYTES, QP_TQ1_0_OFF_D, TR, TT)

#endif
