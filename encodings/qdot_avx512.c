/* AVX-512 VNNI fast-path dots (encodings/encodings.md "Fast dots"): vpdpbusd for the legacy
 * blocks (256-bit, the AVX2 kernel's lanes), maddubs + vpdpwssd for Q4_K / Q5_K / Q6_K. Same
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
/* prompts: 4 rows x 4 tokens (two row pairs). A pair's partial sums are vpdpbusd of the token's
 * a + 128 (unsigned, made once per token block) by the signed levels, started from -128 x the
 * levels' partial sums (made once per row-pair block): sum (a + 128) w - 128 sum w = sum a w
 * exactly, without a sign operation per pair. */
QP_VNNI static inline __m256i minus_128_sums(const uint8_t *b0, const uint8_t *b1, __m256i wl, __m256i wh) {
    (void)b0, (void)b1;
    const __m256i b = _mm256_set1_epi8((char)0x80);
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), b, wl), b, wh));
}
static inline __m256i plus_128(__m256i a) { return _mm256_xor_si256(a, _mm256_set1_epi8((char)0x80)); }
QP_VNNI static inline __m256i biased_dot(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah,
                                         __m256i tok_corr) {
    (void)tok_corr;
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(row_prep, al, wl), ah, wh);
}
QP_QDOT_LEGACY_TILE(QP_VNNI, qp_q8_0_dot_q8_0_tile_vnni, qp_q8_0_dot_q8_0_vnni, qp_q8_0_halves, QP_Q8_0_BYTES, 2,
                    minus_128_sums, plus_128, qp_no_tok_corr, biased_dot)

/* Q4_0 and Q5_0: their stored codes u = level + B (B = 8, 16) are unsigned, so vpdpbusd takes them
 * against the signed activations as they are, started from -B x the activations' partial sums
 * (once per token block): sum u a - B sum a = sum (u - B) a exactly; no signed levels, no sign
 * operation, no +128. */
#define QP_VNNI_UNSIGNED_CODES(ENC, B, CODES, HALVES, BYTES)                                       \
    QP_VNNI static inline __m256i ENC##_single_sums(__m256i u, __m256i a) {                       \
        return _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a),                \
                                _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(B), a)); \
    }                                                                                             \
    QP_VNNI static inline __m256i ENC##_tok_corr(__m256i al, __m256i ah) {                        \
        const __m256i e = _mm256_set1_epi8(B);                                                    \
        return _mm256_sub_epi32(_mm256_setzero_si256(),                                           \
                                _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), e, al), e, ah)); \
    }                                                                                             \
    QP_QDOT_LEGACY_Q8_0(QP_VNNI, qp_##ENC##_dot_q8_0_vnni, ENC##_single_sums, CODES, BYTES)       \
    QP_QDOT_LEGACY_TILE(QP_VNNI, qp_##ENC##_dot_q8_0_tile_vnni, qp_##ENC##_dot_q8_0_vnni, HALVES, BYTES, 2, qp_no_row_prep, \
                        qp_same, ENC##_tok_corr, unsigned_dot)
QP_VNNI static inline __m256i unsigned_dot(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah,
                                           __m256i tok_corr) {
    (void)row_prep;
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(tok_corr, wl, al), wh, ah);
}
QP_VNNI_UNSIGNED_CODES(q4_0, 8, qp_q4_0_nibbles256, qp_q4_0_nibble_halves, QP_Q4_0_BYTES)
QP_VNNI_UNSIGNED_CODES(q5_0, 16, qp_q5_0_unsigned256, qp_q5_0_unsigned_halves, QP_Q5_0_BYTES)
/* BQ4: the unsigned codes by vpdpbusd, started from -zero x the activations' pair sums (vpdpwssd):
 * sum q a - zero sum a, exact (enc_qdot.c bq4_isum); tiles 4 rows x 4 tokens, the token's pair sums
 * made once per token block, each row pair's -zero once per row-pair block */
QP_VNNI static inline __m256i bq4_block_sums(const uint8_t *wb, __m256i a) {
    const __m256i corr = _mm256_dpwssd_epi32(_mm256_setzero_si256(), qp_pair_sums16(a), qp_bq4_neg_zero16(wb));
    return _mm256_dpbusd_epi32(corr, qp_bq4_codes256(wb), a);
}
QP_QDOT_LEGACY_BLOCKS(QP_VNNI, qp_bq4_dot_q8_0_vnni, bq4_block_sums, QP_BQ4_BYTES)
QP_VNNI static inline __m256i bq4_pair_dot(__m256i wl, __m256i wh, __m256i row_prep, __m256i al, __m256i ah,
                                           __m256i tok_corr) {
    const __m256i corr = _mm256_dpwssd_epi32(_mm256_setzero_si256(), tok_corr, row_prep);
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(corr, wl, al), wh, ah);
}
QP_QDOT_LEGACY_TILE(QP_VNNI, qp_bq4_dot_q8_0_tile_vnni, qp_bq4_dot_q8_0_vnni, qp_bq4_halves, QP_BQ4_BYTES, 2, qp_bq4_row_zeros,
                    qp_same, qp_tok_pair_sums, bq4_pair_dot)

/* unsigned codes (<= 4) times int8 activations: 8 exact int32 lane sums (vpdpbusd) */
QP_VNNI static inline __m256i udot(__m256i u, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a);
}
QP_QDOT_TERNARY_ALL(QP_VNNI, vnni, udot)
/* TQ2_0 / TQ1_0 (qdot_simd.h QP_QDOT_TQ_ROW): the codes by the activations through vpdpbusd in two
 * chains, the first started from minus the block sums (vpdpwssd by -1); tiles of 2 rows x 4 tokens
 * (each row's 8 code vectors serve 4 tokens; 8 pair vectors reduced together) */
QP_VNNI static inline __m256i tq_pair(const __m256i u[8], const uint8_t *ab) {
    const uint8_t *a = ab + QP_Q8_K_OFF_QS;
    __m256i c0 = _mm256_dpwssd_epi32(_mm256_setzero_si256(), qp_load256(ab + QP_Q8_K_OFF_BSUMS), _mm256_set1_epi16(-1));
    __m256i c1 = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) {
        c0 = _mm256_dpbusd_epi32(c0, u[k], qp_load256(a + 32 * k));
        c1 = _mm256_dpbusd_epi32(c1, u[k + 4], qp_load256(a + 128 + 32 * k));
    }
    return _mm256_add_epi32(c0, c1);
}
QP_QDOT_TQ_ALL(QP_VNNI, vnni, tq_pair, 2, 4)

/* ---- row x token tiles (traits vec_dot_q8_tile) ----------------------------------------------
 * Prompts: tiles of TR rows x TT tokens with TR * TT = 16 pairs (4 x 4), pair p = r * TT + t in
 * lane p of one 512-bit vector; each weight block is unpacked once for 4 tokens and each
 * activation load serves 4 rows. The tile's rows are read one after the other (the order the
 * hardware prefetcher follows; reading them block by block in step was 2x slower from memory),
 * each (row, block, token) leaving its vector of exact int32 partial sums in a buffer; then per
 * block the 16 pairs' sums are reduced together (reduce16) and the reference's float steps
 * (enc_qdot.c) run in the 16 lanes at once, the same operations in the same order per lane, so
 * y equals vec_dot_q8 of each (row, token) bit for bit. Rows and tokens past the ends of a
 * partial tile repeat the last one and are not stored. */
#define QP_TILE_PAIRS 16
#define QP_TILE_BLOCKS 16 /* super-blocks per pass (the buffer: 16 x 16 x 64 bytes) */

static inline __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* 128-bit lane l of the result = [sum of lane l of a, of b, of c, of d] (4 int32 each) */
static inline __m512i lane_sums4(__m512i a, __m512i b, __m512i c, __m512i d) {
    const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

/* lane p = the sum of the 16 int32 of v[p] (exact, wrapping like any int32 sum) */
static inline __m512i reduce16(const __m512i v[QP_TILE_PAIRS]) {
    __m512i x[4];
    for (int g = 0; g < 4; g++) x[g] = lane_sums4(v[4 * g], v[4 * g + 1], v[4 * g + 2], v[4 * g + 3]);
    const __m512i y01 = _mm512_add_epi32(_mm512_shuffle_i32x4(x[0], x[1], 0x44), _mm512_shuffle_i32x4(x[0], x[1], 0xEE));
    const __m512i y23 = _mm512_add_epi32(_mm512_shuffle_i32x4(x[2], x[3], 0x44), _mm512_shuffle_i32x4(x[2], x[3], 0xEE));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(y01, y23, 0x88), _mm512_shuffle_i32x4(y01, y23, 0xDD));
}

static inline __m512i lanes4(__m128i a, __m128i b, __m128i c, __m128i d) {
    return _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(a), b, 1), c, 2), d, 3);
}

/* lane p = sum of the 8 int16 products of m[row of p] and b[token of p] (the Q4_K min sums) */
static inline __m512i pair_madd16(const __m128i *m, const __m128i *b, int tt) {
    __m512i v[4];
    for (int k = 0; k < 4; k++) { /* 128-bit lane g of v[k] holds pair 4g + k */
        const __m512i mm = lanes4(m[k / tt], m[(4 + k) / tt], m[(8 + k) / tt], m[(12 + k) / tt]);
        const __m512i bb = lanes4(b[k % tt], b[(4 + k) % tt], b[(8 + k) % tt], b[(12 + k) % tt]);
        v[k] = _mm512_madd_epi16(mm, bb);
    }
    return lane_sums4(v[0], v[1], v[2], v[3]);
}

/* lane p = row value u[p / tt] (row_of) or token value u[p % tt] (tok_of) */
static inline __m512i row_of(const uint32_t *u, int tt) {
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (tt > 1) idx = _mm512_srli_epi32(idx, tt == 4 ? 2 : 1);
    return _mm512_permutexvar_epi32(idx, _mm512_loadu_si512((const void *)u));
}
static inline __m512 tok_of(const float *f, int tt) {
    const __m512i idx = _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(tt - 1));
    return _mm512_permutexvar_ps(idx, _mm512_loadu_ps(f));
}
/* the f16 in the low (hi = false) or high half of each 32-bit lane, as float */
static inline __m512 f16_lanes(__m512i v, bool hi) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(hi ? _mm512_srli_epi32(v, 16) : v));
}

static inline void store_tile(__m512 sum, int tt, int nr, int nt, float *y, size_t ldy) {
    float f[QP_TILE_PAIRS];
    _mm512_storeu_ps(f, sum);
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) y[(size_t)t * ldy + (size_t)r] = f[r * tt + t];
}

/* Q4_K / Q5_K levels of one super-block in element order: v[k] = sub-blocks 2k | 2k + 1 (the low
 * and the high nibbles of bytes 32k .. 32k + 31), plus bit 2k / 2k + 1 of qh[l] << 4 for Q5_K */
QP_VNNI static inline void q4k_levels512(const uint8_t *wb, size_t off_qs, bool five, __m512i v[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(wb + QP_Q5_K_OFF_QH)))
                            : _mm512_setzero_si512();
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    for (int k = 0; k < 4; k++) {
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(wb + off_qs + 32 * k)));
        v[k] = _mm512_and_si512(_mm512_srlv_epi16(q, shift), m4);
        if (five) {
            const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8((char)(1 << (2 * k)))),
                                                   _mm256_set1_epi8((char)(1 << (2 * k + 1))), 1);
            v[k] = _mm512_mask_add_epi8(v[k], _mm512_test_epi8_mask(qh, bit), v[k], _mm512_set1_epi8(16)); /* bit 4 clear */
        }
    }
}

/* 8 six-bit scales and mins of a Q4_K / Q5_K block as 8 int16 each (qp_q4k_unpack_scales) with
 * byte shuffles: bytes [sc0..3 | sc4..7 | mn0..3 | mn4..7] are s0..3 & 63 | s8..11 & 15 | s4..7 &
 * 63 | s8..11 >> 4, plus bits 6-7 of s0..3 (for sc4..7) and s4..7 (mn4..7) moved to bits 4-5.
 * Reads 16 bytes from s12 (the 4 after the scales are the block's next field). */
static inline __m128i q4k_scale_bytes(const uint8_t *s12) {
    const __m128i s = _mm_loadu_si128((const __m128i *)(const void *)s12);
    const __m128i a = _mm_shuffle_epi8(s, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i lo = _mm_and_si128(a, _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0));
    const __m128i nib = _mm_and_si128(_mm_srli_epi16(a, 4), _mm_setr_epi32(0, 0, 0, 0x0F0F0F0F));
    const __m128i b = _mm_shuffle_epi8(s, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i top = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(_mm_or_si128(lo, nib), top);
}
static inline void q4k_scales16(const uint8_t *s12, __m128i *sc, __m128i *mn) {
    uint32_t u[3];
    memcpy(u, s12, 12);
    const uint64_t s = (uint64_t)(u[0] & 0x3F3F3F3Fu) |
                       (uint64_t)((u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4)) << 32;
    const uint64_t m = (uint64_t)(u[1] & 0x3F3F3F3Fu) |
                       (uint64_t)(((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4)) << 32;
    *sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)s));
    *mn = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)m));
}

typedef enum { TILE_Q4K, TILE_Q5K, TILE_Q6K } tile_kind;

/* One (row, block): the int32 partial-sum vectors of its tt tokens into acc[t], its min
 * scales into *mn (Q4_K / Q5_K) and its f16 scale pair (d, dmin; Q6_K: d) into *dd. */
QP_VNNI __attribute__((always_inline)) static inline void
row_block(tile_kind kind, const uint8_t *wb, const uint8_t *const *ab, int tt, __m512i *acc, __m128i *mn, uint32_t *dd) {
    __m512i lv[4], s[4];
    if (kind == TILE_Q6K) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(wb + QP_Q6_K_OFF_SCALES)));
        const __m512i grp = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                             0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
        for (int h = 0; h < 2; h++) {
            __m256i u[4];
            qp_q6k_unsigned_levels(wb + 64 * h, wb + QP_Q6_K_OFF_QH + 32 * h, u);
            lv[2 * h] = join256(u[0], u[1]);
            lv[2 * h + 1] = join256(u[2], u[3]);
        }
        for (int k = 0; k < 4; k++)
            s[k] = _mm512_permutexvar_epi16(_mm512_add_epi16(grp, _mm512_set1_epi16((short)(4 * k))), _mm512_castsi256_si512(sc16));
        for (int t = 0; t < tt; t++) /* the level bias: - 32 sum_j scale_j bsum_j */
            acc[t] = _mm512_zextsi256_si512(_mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)(const void *)(ab[t] + QP_Q8_K_OFF_BSUMS))), 5)));
        *dd = qp_load_u16le(wb + QP_Q6_K_OFF_D);
    } else {
        __m128i sc;
        q4k_scales16(wb + QP_Q4_K_OFF_SCALES, &sc, mn);
        q4k_levels512(wb, kind == TILE_Q5K ? QP_Q5_K_OFF_QS : QP_Q4_K_OFF_QS, kind == TILE_Q5K, lv);
        for (int k = 0; k < 4; k++)
            s[k] = _mm512_permutexvar_epi16(_mm512_inserti64x4(_mm512_set1_epi16((short)(2 * k)), _mm256_set1_epi16((short)(2 * k + 1)), 1),
                                            _mm512_castsi128_si512(sc));
        for (int t = 0; t < tt; t++) acc[t] = _mm512_setzero_si512();
        *dd = qp_load_u32le(wb);
    }
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < tt; t++)
            acc[t] = _mm512_dpwssd_epi32(acc[t], _mm512_maddubs_epi16(lv[k], _mm512_loadu_si512((const void *)(ab[t] + QP_Q8_K_OFF_QS + 64 * k))), s[k]);
}

/* One tile: tr rows (wrow) x tt tokens (xtok) over nb super-blocks -> 16 lanes of sums */
QP_VNNI __attribute__((always_inline)) static inline __m512
tile(tile_kind kind, const uint8_t *const *wrow, const uint8_t *const *xtok, int tr, int tt, int64_t nb, size_t wbytes) {
    __m512 sum = _mm512_setzero_ps();
    __m512i acc[QP_TILE_BLOCKS][QP_TILE_PAIRS];
    __m128i mn[QP_TILE_BLOCKS][QP_TILE_PAIRS];
    uint32_t dd[QP_TILE_BLOCKS][QP_TILE_PAIRS];
    for (int64_t i0 = 0; i0 < nb; i0 += QP_TILE_BLOCKS) {
        const int nbc = nb - i0 < QP_TILE_BLOCKS ? (int)(nb - i0) : QP_TILE_BLOCKS;
        for (int r = 0; r < tr; r++)
            for (int i = 0; i < nbc; i++) {
                const uint8_t *ab[4];
                for (int t = 0; t < tt; t++) ab[t] = xtok[t] + (size_t)(i0 + i) * QP_Q8_K_BYTES;
                row_block(kind, wrow[r] + (size_t)(i0 + i) * wbytes, ab, tt, &acc[i][r * tt], &mn[i][r], &dd[i][r]);
            }
        for (int i = 0; i < nbc; i++) {
            float da[QP_TILE_PAIRS];
            __m128i bp[4];
            for (int t = 0; t < tt; t++) {
                const uint8_t *ab = xtok[t] + (size_t)(i0 + i) * QP_Q8_K_BYTES;
                da[t] = qp_load_f32le(ab);
                bp[t] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS)),
                                       _mm_loadu_si128((const __m128i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS + 16)));
            }
            for (int t = tt; t < QP_TILE_PAIRS; t++) da[t] = 0.0f;
            const __m512 a = tok_of(da, tt);
            const __m512i w16 = row_of(dd[i], tt);
            const __m512 isum = _mm512_cvtepi32_ps(reduce16(acc[i]));
            sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(f16_lanes(w16, false), a), isum));
            if (kind != TILE_Q6K) {
                const __m512 msum = _mm512_cvtepi32_ps(pair_madd16(mn[i], bp, tt));
                sum = _mm512_sub_ps(sum, _mm512_mul_ps(_mm512_mul_ps(f16_lanes(w16, true), a), msum));
            }
        }
    }
    return sum;
}

/* rows outer, tokens inner: a tile's rows stay in L1 while every token group passes */
QP_VNNI __attribute__((always_inline)) static inline void
tile_shape(tile_kind kind, int tr, int tt, const uint8_t *w, size_t ldw, int64_t n_rows, const uint8_t *xq, size_t ldxq,
           int64_t n_tok, int64_t n, float *y, size_t ldy) {
    const size_t wbytes = kind == TILE_Q6K ? QP_Q6_K_BYTES : kind == TILE_Q5K ? QP_Q5_K_BYTES : QP_Q4_K_BYTES;
    for (int64_t r0 = 0; r0 < n_rows; r0 += tr) {
        const int nr = n_rows - r0 < tr ? (int)(n_rows - r0) : tr;
        const uint8_t *wr[QP_TILE_PAIRS];
        for (int r = 0; r < tr; r++) wr[r] = w + (size_t)(r0 + (r < nr ? r : nr - 1)) * ldw;
        for (int64_t t0 = 0; t0 < n_tok; t0 += tt) {
            const int nt = n_tok - t0 < tt ? (int)(n_tok - t0) : tt;
            const uint8_t *xt[4];
            for (int t = 0; t < tt; t++) xt[t] = xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * ldxq;
            store_tile(tile(kind, wr, xt, tr, tt, n / QP_QK_K, wbytes), tt, nr, nt, y + (size_t)t0 * ldy + (size_t)r0, ldy);
        }
    }
}

/* One row, one token: row_block's vector reduced with the min sums (lane 0: isum, lane 1: msum),
 * then the reference's float steps */
QP_VNNI __attribute__((always_inline)) static inline float single_dot(tile_kind kind, const uint8_t *wb, const uint8_t *ab,
                                                                      int64_t n, size_t wbytes) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes, ab += QP_Q8_K_BYTES) {
        __m512i acc;
        __m128i mn = _mm_setzero_si128(), bp = _mm_setzero_si128();
        uint32_t dd;
        row_block(kind, wb, &ab, 1, &acc, &mn, &dd);
        if (kind != TILE_Q6K)
            bp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS)),
                                _mm_loadu_si128((const __m128i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS + 16)));
        const __m256i a8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(a8), _mm256_extracti128_si256(a8, 1));
        __m128i h = _mm_hadd_epi32(a4, _mm_madd_epi16(mn, bp));
        h = _mm_hadd_epi32(h, h);
        /* lane 0: (d * da) * isum, lane 1: (dmin * da) * msum */
        const __m128 p = _mm_mul_ps(_mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(qp_load_f32le(ab))),
                                    _mm_cvtepi32_ps(h));
        sum = sum + _mm_cvtss_f32(p);
        if (kind != TILE_Q6K) sum = sum - _mm_cvtss_f32(_mm_movehdup_ps(p));
    }
    return sum;
}
/* One Q4_K / Q5_K row, one token, in 256-bit vectors with short dependency chains per block (so
 * more blocks overlap): on this AMD Zen 4 8.9 -> 6.7 ns per Q4_K super-block in cache against
 * row_block's 512-bit form. A sub-block's levels are a 32-byte load masked (low nibbles) or shifted and
 * masked (high), its scale an in-lane byte shuffle of the scale bytes (zero-extended words), and the
 * min sums one madd of the 16 block sums by the mins each repeated twice; the same exact
 * integers, then the reference's float steps. */
QP_VNNI __attribute__((always_inline)) static inline float k_min_row(const uint8_t *wb, const uint8_t *ab, int64_t n, size_t wbytes,
                                                                     size_t off_qs, bool five) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m128i mn_twice = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes, ab += QP_Q8_K_BYTES) {
        const __m128i v = q4k_scale_bytes(wb + QP_Q4_K_OFF_SCALES);
        const __m256i v2 = _mm256_broadcastsi128_si256(v);
        const __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(const void *)(wb + QP_Q5_K_OFF_QH)) : _mm256_setzero_si256();
        const uint8_t *a = ab + QP_Q8_K_OFF_QS;
        __m256i ac[4];
        for (int k = 0; k < 4; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(wb + off_qs + 32 * k));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one), 4));
            }
            ac[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(const void *)(a + 64 * k))),
                                      _mm256_shuffle_epi8(v2, _mm256_set1_epi16((short)(0xFF00 | (2 * k)))));
            ac[k] = _mm256_dpwssd_epi32(ac[k], _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(const void *)(a + 64 * k + 32))),
                                        _mm256_shuffle_epi8(v2, _mm256_set1_epi16((short)(0xFF00 | (2 * k + 1)))));
        }
        const __m256i acc = _mm256_add_epi32(_mm256_add_epi32(ac[0], ac[1]), _mm256_add_epi32(ac[2], ac[3]));
        const __m256i m8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS)),
                                             _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, mn_twice)));
        const __m256i h = _mm256_hadd_epi32(acc, m8); /* per 128: acc pairs, then min pairs */
        __m128i x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        x = _mm_hadd_epi32(x, x); /* lane 0: isum, lane 1: msum */
        const __m128 p = _mm_mul_ps(_mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)qp_load_u32le(wb))), _mm_set1_ps(qp_load_f32le(ab))),
                                    _mm_cvtepi32_ps(x));
        sum = sum + _mm_cvtss_f32(p);
        sum = sum - _mm_cvtss_f32(_mm_movehdup_ps(p));
    }
    return sum;
}

QP_VNNI float qp_q4k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    return k_min_row(w, xq, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS, false);
}
QP_VNNI float qp_q5k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    return k_min_row(w, xq, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS, true);
}
QP_VNNI float qp_q6k_dot_q8k_vnni(const void *w, const void *xq, int64_t n) {
    return single_dot(TILE_Q6K, w, xq, n, QP_Q6_K_BYTES);
}

/* ---- k-quant prompts with rows in lanes ----------------------------------------------------
 * For batches of QP_LANE_MIN_TOKENS(kind) tokens or more, 16 rows at once with row r in int32 lane r:
 * each super-block of the 16 rows is unpacked once (gathered, one 4-byte group of every row per
 * vector) into a lane_block for every token of the batch, and a token's activations are 4-byte
 * broadcasts, so a sub-block's integer sum is vpdpbusd of the unsigned levels (exact: 32 * 63 *
 * 128 < 2^31) times its scale (vpmulld), with no horizontal reduction. Q4_K / Q5_K: isum, then
 * msum from the min pairs and the token's sub-block sums; Q6_K: levels u = q + 32, isum = sum_j
 * sc_j (u_j . a_j) - 32 sum_j sc_j bsum_j (the same exact integer as sum_j sc_j (q_j . a_j)). The
 * reference's float steps (enc_qdot.c) run in the 16 lanes at once, every lane its row's
 * single-dot operations in their order, so y keeps the single dot's bits. Sums cross the
 * QP_LANE_BLOCKS passes in y (float stores are exact). */
#define QP_LANE_ROWS 16
#define QP_LANE_TOKENS 4
#define QP_LANE_BLOCKS 4
/* batches from which the lanes beat the 4 x 4 tiles (in cache, 512 x 2048 rows: Q4_K 3.58 -> 3.27 ns
 * per super-block x token at 8 tokens, Q6_K, whose unpacking costs more, 3.66 -> 3.47 at 12 but
 * 3.61 -> 4.54 at 8) */
#define QP_LANE_MIN_TOKENS(KIND) ((KIND) == TILE_Q6K ? 12 : 8)

typedef struct lane_block {
    __m512i lv[64];   /* lane r = the unsigned levels of elements 4q .. 4q + 3 of row r */
    __m512i sc[16];   /* lane r = scale of sub-block j of row r (Q4_K / Q5_K: 8 of 32, Q6_K: 16 of 16) */
    __m512i pair[8];  /* lane r = int16 pair: Q4_K / Q5_K mins of sub-blocks 2k, 2k + 1 (4); Q6_K scales (8) */
    __m512 d, dmin;   /* lane r = the row's d and dmin (Q6_K: d) */
} lane_block;

/* byte b of every lane of v as int32, zero- or sign-extended */
static inline __m512i lane_byte(__m512i v, int b) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * b), _mm512_set1_epi32(0xFF));
}
static inline __m512i lane_sbyte(__m512i v, int b) {
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24);
}
/* the 16 rows' 4 bytes at offset off of their blocks (row r at blk + lane r of row_off) */
#define LANE_GATHER(blk, off) _mm512_i32gather_epi32(row_off, (const void *)((blk) + (off)), 1)

QP_VNNI __attribute__((always_inline)) static inline void lane_unpack_q4k(const uint8_t *blk, __m512i row_off, bool five, lane_block *lb) {
    const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
    const size_t off_qs = five ? QP_Q5_K_OFF_QS : QP_Q4_K_OFF_QS;
    for (int k = 0; k < 4; k++) /* sub-blocks 2k (low nibbles) and 2k + 1 (high) of bytes 32k .. 32k + 31 */
        for (int g = 0; g < 8; g++) {
            const __m512i q = LANE_GATHER(blk, off_qs + 32 * k + 4 * g);
            lb->lv[16 * k + g] = _mm512_and_si512(q, nib);
            lb->lv[16 * k + 8 + g] = _mm512_and_si512(_mm512_srli_epi32(q, 4), nib);
        }
    if (five)
        for (int g = 0; g < 8; g++) {
            const __m512i h = LANE_GATHER(blk, QP_Q5_K_OFF_QH + 4 * g);
            for (int j = 0; j < 8; j++)
                lb->lv[8 * j + g] = _mm512_or_si512(lb->lv[8 * j + g], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, j), _mm512_set1_epi32(0x01010101)), 4));
        }
    /* qp_q4k_unpack_scales in 16 lanes: u0..u2 the 12 scale bytes */
    const __m512i u0 = LANE_GATHER(blk, QP_Q4_K_OFF_SCALES), u1 = LANE_GATHER(blk, QP_Q4_K_OFF_SCALES + 4);
    const __m512i u2 = LANE_GATHER(blk, QP_Q4_K_OFF_SCALES + 8);
    const __m512i m63 = _mm512_set1_epi32(63), m15 = _mm512_set1_epi32(15);
    __m512i mn[8];
    for (int j = 0; j < 4; j++) {
        lb->sc[j] = _mm512_and_si512(lane_byte(u0, j), m63);
        mn[j] = _mm512_and_si512(lane_byte(u1, j), m63);
        lb->sc[j + 4] = _mm512_or_si512(_mm512_and_si512(lane_byte(u2, j), m15), _mm512_slli_epi32(_mm512_srli_epi32(lane_byte(u0, j), 6), 4));
        mn[j + 4] = _mm512_or_si512(_mm512_srli_epi32(lane_byte(u2, j), 4), _mm512_slli_epi32(_mm512_srli_epi32(lane_byte(u1, j), 6), 4));
    }
    for (int k = 0; k < 4; k++) lb->pair[k] = _mm512_or_si512(mn[2 * k], _mm512_slli_epi32(mn[2 * k + 1], 16));
    const __m512i dd = LANE_GATHER(blk, 0);
    lb->d = f16_lanes(dd, false);
    lb->dmin = f16_lanes(dd, true);
}

/* Q6_K: elements 128h + 32m + l, l = 4g .. 4g + 3: nibble m / 2 of ql[64h + 32(m & 1) + l] | bits
 * 2m, 2m + 1 of qh[32h + l] << 4 (enc_qdot.c qp_q6k_dot_q8k_ref) */
QP_VNNI __attribute__((always_inline)) static inline void lane_unpack_q6k(const uint8_t *blk, __m512i row_off, lane_block *lb) {
    const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F), two = _mm512_set1_epi32(0x03030303);
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 8; g++) {
            const __m512i qh = LANE_GATHER(blk, QP_Q6_K_OFF_QH + 32 * h + 4 * g);
            for (int c = 0; c < 2; c++) {
                const __m512i ql = LANE_GATHER(blk, 64 * h + 32 * c + 4 * g);
                for (int m = c; m < 4; m += 2) {
                    const __m512i lo = m & 2 ? _mm512_and_si512(_mm512_srli_epi32(ql, 4), nib) : _mm512_and_si512(ql, nib);
                    lb->lv[32 * h + 8 * m + g] = _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 2 * m), two), 4));
                }
            }
        }
    for (int c = 0; c < 4; c++) {
        const __m512i s4 = LANE_GATHER(blk, QP_Q6_K_OFF_SCALES + 4 * c);
        for (int b = 0; b < 4; b++) lb->sc[4 * c + b] = lane_sbyte(s4, b);
    }
    for (int k = 0; k < 8; k++)
        lb->pair[k] = _mm512_or_si512(_mm512_and_si512(lb->sc[2 * k], _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(lb->sc[2 * k + 1], 16));
    lb->d = f16_lanes(LANE_GATHER(blk, QP_Q6_K_OFF_D - 2), true); /* the f16 d: the high half of bytes 206..209 */
    lb->dmin = _mm512_setzero_ps();
}

/* lane r = sum_j mn_j(row r) (bsum_2j + bsum_2j+1) of the Q8_K block ab, from the min pairs
 * (lane r of pair[k] = the int16 mins of sub-blocks 2k, 2k + 1) */
QP_VNNI static inline __m512i lane_min_sums(const __m512i pair[4], const uint8_t *ab) {
    const uint8_t *bs = ab + QP_Q8_K_OFF_BSUMS;
    const __m128i bp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)(const void *)bs), /* the 8 sub-block sums */
                                      _mm_loadu_si128((const __m128i *)(const void *)(bs + 16)));
    __m512i msum = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++)
        msum = _mm512_add_epi32(msum, _mm512_madd_epi16(pair[k], _mm512_permutexvar_epi32(_mm512_set1_epi32(k), _mm512_castsi128_si512(bp))));
    return msum;
}
/* enc_qdot.c k_min_step in 16 lanes: sum + (d da) isum - (dmin da) msum, in that order */
static inline __m512 lane_k_min_step(__m512 sum, __m512 d, __m512 dmin, const uint8_t *ab, __m512i isum, __m512i msum) {
    const __m512 da = _mm512_set1_ps(qp_load_f32le(ab));
    sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum)));
    return _mm512_sub_ps(sum, _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum)));
}

/* fields of a packed Q4_K super-block pb (qdot.h QP_Q4K_PACK_*), lane r = row r: sub-block j's
 * scale; the int16 min pair of sub-blocks 2k, 2k + 1; the 16 f16 at pb as float */
static inline __m512i packed_scales(const uint8_t *pb, int j) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(pb + QP_Q4K_PACK_OFF_SC + 16 * j)));
}
static inline __m512i packed_min_pairs(const uint8_t *pb, int k) {
    return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(pb + QP_Q4K_PACK_OFF_MN + 32 * k)));
}
static inline __m512 packed_f16(const uint8_t *pb) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)pb));
}
/* lane r = the int8 scale of sub-block j of row r in a packed Q6_K super-block pb */
static inline __m512i q6k_packed_scales(const uint8_t *pb, int j) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(pb + QP_Q6K_PACK_OFF_SC + 16 * j)));
}

/* One packed group of 16 Q4_K rows (nb super-blocks at pg) against one token's Q8_K blocks ab:
 * lane r = row r's single dot. Per super-block 32 vector loads of 4-byte groups of the 16 rows,
 * each giving the low- and high-nibble levels for vpdpbusd against 4-byte activation broadcasts;
 * sub-block j's integer sum times its scale (vpmulld), the min sums from the min pairs, then the
 * reference's float steps in the 16 lanes. */
QP_VNNI static inline __m512 packed_token(const uint8_t *pg, const uint8_t *ab, int64_t nb) {
    const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, pg += QP_Q4K_PACK_BYTES, ab += QP_Q8_K_BYTES) {
        const uint8_t *a = ab + QP_Q8_K_OFF_QS;
        __m512i isum = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) { /* sub-blocks 2k (low nibbles), 2k + 1 (high) */
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            for (int g = 0; g < 8; g++) {
                const __m512i q = _mm512_loadu_si512((const void *)(pg + QP_Q4K_PACK_OFF_QS + 64 * (8 * k + g)));
                lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(q, nib), _mm512_set1_epi32((int)qp_load_u32le(a + 64 * k + 4 * g)));
                hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi32(q, 4), nib),
                                         _mm512_set1_epi32((int)qp_load_u32le(a + 64 * k + 32 + 4 * g)));
            }
            isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(lo, packed_scales(pg, 2 * k)),
                                                           _mm512_mullo_epi32(hi, packed_scales(pg, 2 * k + 1))));
        }
        __m512i pair[4];
        for (int k = 0; k < 4; k++) pair[k] = packed_min_pairs(pg, k);
        sum = lane_k_min_step(sum, packed_f16(pg), packed_f16(pg + QP_Q4K_PACK_OFF_DMIN), ab, isum, lane_min_sums(pair, ab));
    }
    return sum;
}

/* One packed group of 16 Q6_K rows (qdot.h QP_Q6K_PACK_*; nb super-blocks at pg) against one
 * token's Q8_K blocks ab: lane r = row r's single dot. Per half h of a super-block, per qh vector v
 * (bytes l .. l + 3 of the 16 rows' qh[32h ..], l = 4 (v % 8)) and the ql vectors of l (Q0: ql[64h
 * + l ..], Q1: ql[64h + 32 + l ..]), the unsigned levels u = q + 32 of elements 128h + 32m + l ..
 * + 3 (m = 0 .. 3) are one vpternlogd each: bits 0-3 from Q0, Q1, Q0 >> 4, Q1 >> 4, bits 4-5 from
 * the qh field 2m moved there (qh & 0x33 << 4, qh & 0xCC << 2, qh & 0x33, qh & 0xCC >> 2: 16-bit
 * shifts whose bits from the neighbour byte land in bits 0-3, which the select ignores, and bits
 * 6-7 zero), then vpdpbusd against the 4-byte broadcast of those activations into the chain of the
 * element's sub-block j = 8h + 2m + l / 16, started from -32 bsum_j, so chain j ends at sum_j (u -
 * 32) a = q_j . a_j exactly (|.| <= 16 x 63 x 128); isum = sum_j sc_j chain_j (vpmulld by the
 * sign-extended scales), then the reference's float step in the 16 lanes. */
#define QP_SEL_LO4 0xE4 /* vpternlogd: c ? a : b, bit by bit */
QP_VNNI static inline __m512 q6k_packed_token(const uint8_t *pg, const uint8_t *ab, int64_t nb) {
    const __m512i m33 = _mm512_set1_epi8(0x33), mcc = _mm512_set1_epi8((char)0xCC), lo4 = _mm512_set1_epi8(0x0F);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++, pg += QP_Q6K_PACK_BYTES, ab += QP_Q8_K_BYTES) {
        const uint8_t *a = ab + QP_Q8_K_OFF_QS;
        int32_t bias[16] __attribute__((aligned(64)));
        _mm512_store_si512((void *)bias, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(
            _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(ab + QP_Q8_K_OFF_BSUMS))), 5)));
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i c[8]; /* chain 2m + l / 16: sub-block 8h + 2m + l / 16 */
            for (int s = 0; s < 8; s++) c[s] = _mm512_set1_epi32(bias[8 * h + s]);
#pragma GCC unroll 8
            for (int v = 0; v < 8; v++) {
                const __m512i hv = _mm512_loadu_si512((const void *)(pg + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v) + 128));
                const __m512i q0 = _mm512_loadu_si512((const void *)(pg + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v)));
                const __m512i q1 = _mm512_loadu_si512((const void *)(pg + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v) + 64));
                const __m512i h33 = _mm512_and_si512(hv, m33), hcc = _mm512_and_si512(hv, mcc);
                const __m512i u0 = _mm512_ternarylogic_epi32(q0, _mm512_slli_epi16(h33, 4), lo4, QP_SEL_LO4);
                const __m512i u1 = _mm512_ternarylogic_epi32(q1, _mm512_slli_epi16(hcc, 2), lo4, QP_SEL_LO4);
                const __m512i u2 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q0, 4), h33, lo4, QP_SEL_LO4);
                const __m512i u3 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q1, 4), _mm512_srli_epi16(hcc, 2), lo4, QP_SEL_LO4);
                const uint8_t *av = a + 128 * h + 4 * v;
                const int k = v / 4;
                c[k] = _mm512_dpbusd_epi32(c[k], u0, _mm512_set1_epi32((int)qp_load_u32le(av)));
                c[2 + k] = _mm512_dpbusd_epi32(c[2 + k], u1, _mm512_set1_epi32((int)qp_load_u32le(av + 32)));
                c[4 + k] = _mm512_dpbusd_epi32(c[4 + k], u2, _mm512_set1_epi32((int)qp_load_u32le(av + 64)));
                c[6 + k] = _mm512_dpbusd_epi32(c[6 + k], u3, _mm512_set1_epi32((int)qp_load_u32le(av + 96)));
            }
            for (int s = 0; s < 8; s++)
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(c[s], q6k_packed_scales(pg, 8 * h + s)));
        }
        const __m512 d = _mm512_loadu_ps((const void *)pg);
        sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(qp_load_f32le(ab))), _mm512_cvtepi32_ps(isum)));
    }
    return sum;
}

/* the 16 rows of lb against QP_LANE_TOKENS tokens' Q8_K blocks ab[t]: sum[t] takes the block's
 * float steps */
QP_VNNI __attribute__((always_inline)) static inline void lane_tokens(tile_kind kind, const lane_block *lb, const uint8_t *const *ab,
                                                                      __m512 *sum) {
    const int n_sub = kind == TILE_Q6K ? 16 : 8, per_sub = 64 / n_sub; /* 4-byte groups per sub-block */
    __m512i isum[QP_LANE_TOKENS];
    for (int t = 0; t < QP_LANE_TOKENS; t++) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < n_sub; j++)
        for (int t = 0; t < QP_LANE_TOKENS; t++) {
            const uint8_t *a = ab[t] + QP_Q8_K_OFF_QS + 4 * per_sub * j;
            __m512i p = _mm512_setzero_si512();
            for (int g = 0; g < per_sub; g++)
                p = _mm512_dpbusd_epi32(p, lb->lv[per_sub * j + g], _mm512_set1_epi32((int)qp_load_u32le(a + 4 * g)));
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(p, lb->sc[j]));
        }
    for (int t = 0; t < QP_LANE_TOKENS; t++) {
        if (kind != TILE_Q6K) {
            sum[t] = lane_k_min_step(sum[t], lb->d, lb->dmin, ab[t], isum[t], lane_min_sums(lb->pair, ab[t]));
            continue;
        }
        const uint8_t *bs = ab[t] + QP_Q8_K_OFF_BSUMS; /* the level bias sum_j sc_j bsum_j over the 16 sums */
        __m512i msum = _mm512_setzero_si512();
        for (int k = 0; k < 8; k++) msum = _mm512_add_epi32(msum, _mm512_madd_epi16(lb->pair[k], _mm512_set1_epi32((int)qp_load_u32le(bs + 4 * k))));
        isum[t] = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(msum, 5));
        sum[t] = _mm512_add_ps(sum[t], _mm512_mul_ps(_mm512_mul_ps(lb->d, _mm512_set1_ps(qp_load_f32le(ab[t]))), _mm512_cvtepi32_ps(isum[t])));
    }
}

/* A super-block of 16 repacked Q4_K rows (qdot.h QP_Q4K_PACK_*) or Q6_K rows (QP_Q6K_PACK_*, the
 * levels as q6k_packed_token makes them): plain loads, no gathers */
QP_VNNI __attribute__((always_inline)) static inline void lane_unpack_packed(tile_kind kind, const uint8_t *pb, lane_block *lb) {
    const __m512i nib = _mm512_set1_epi32(0x0F0F0F0F);
    if (kind == TILE_Q6K) {
        const __m512i m33 = _mm512_set1_epi8(0x33), mcc = _mm512_set1_epi8((char)0xCC);
        for (int h = 0; h < 2; h++)
            for (int v = 0; v < 8; v++) { /* lv[32h + 8m + v]: elements 128h + 32m + 4v .. + 3 */
                const __m512i hv = _mm512_loadu_si512((const void *)(pb + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v) + 128));
                const __m512i q0 = _mm512_loadu_si512((const void *)(pb + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v)));
                const __m512i q1 = _mm512_loadu_si512((const void *)(pb + QP_Q6K_PACK_OFF_Q + 192 * (8 * h + v) + 64));
                const __m512i h33 = _mm512_and_si512(hv, m33), hcc = _mm512_and_si512(hv, mcc);
                lb->lv[32 * h + v] = _mm512_ternarylogic_epi32(q0, _mm512_slli_epi16(h33, 4), nib, QP_SEL_LO4);
                lb->lv[32 * h + 8 + v] = _mm512_ternarylogic_epi32(q1, _mm512_slli_epi16(hcc, 2), nib, QP_SEL_LO4);
                lb->lv[32 * h + 16 + v] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q0, 4), h33, nib, QP_SEL_LO4);
                lb->lv[32 * h + 24 + v] =
                    _mm512_ternarylogic_epi32(_mm512_srli_epi16(q1, 4), _mm512_srli_epi16(hcc, 2), nib, QP_SEL_LO4);
            }
        for (int j = 0; j < 16; j++) lb->sc[j] = q6k_packed_scales(pb, j);
        for (int k = 0; k < 8; k++)
            lb->pair[k] = _mm512_or_si512(_mm512_and_si512(lb->sc[2 * k], _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(lb->sc[2 * k + 1], 16));
        lb->d = _mm512_loadu_ps((const void *)pb);
        lb->dmin = _mm512_setzero_ps();
        return;
    }
    for (int k = 0; k < 4; k++)
        for (int g = 0; g < 8; g++) {
            const __m512i q = _mm512_loadu_si512((const void *)(pb + QP_Q4K_PACK_OFF_QS + 64 * (8 * k + g)));
            lb->lv[16 * k + g] = _mm512_and_si512(q, nib);
            lb->lv[16 * k + 8 + g] = _mm512_and_si512(_mm512_srli_epi32(q, 4), nib);
        }
    for (int j = 0; j < 8; j++) lb->sc[j] = packed_scales(pb, j);
    for (int k = 0; k < 4; k++) lb->pair[k] = packed_min_pairs(pb, k);
    lb->d = packed_f16(pb);
    lb->dmin = packed_f16(pb + QP_Q4K_PACK_OFF_DMIN);
}

/* rows [0, n_rows) in groups of 16 (a last partial group repeats its last row and stores only its
 * own) against n_tok tokens; packed: w holds n_rows / 16 groups of repacked Q4_K or Q6_K rows (ldw
 * unused) */
QP_VNNI __attribute__((always_inline)) static inline void
lane_rows(tile_kind kind, bool packed, const uint8_t *w, size_t ldw, int64_t n_rows, const uint8_t *xq, size_t ldxq, int64_t n_tok,
          int64_t n, float *y, size_t ldy) {
    const int64_t nb = n / QP_QK_K;
    const size_t wbytes = packed ? (kind == TILE_Q6K ? QP_Q6K_PACK_BYTES : QP_Q4K_PACK_BYTES)
                          : kind == TILE_Q6K ? QP_Q6_K_BYTES : kind == TILE_Q5K ? QP_Q5_K_BYTES : QP_Q4_K_BYTES;
    const size_t group_bytes = packed ? (size_t)nb * wbytes : QP_LANE_ROWS * ldw;
    lane_block lb[QP_LANE_BLOCKS];
    for (int64_t r0 = 0; r0 < n_rows; r0 += QP_LANE_ROWS) {
        const int nr = n_rows - r0 < QP_LANE_ROWS ? (int)(n_rows - r0) : QP_LANE_ROWS;
        const __mmask16 keep = (__mmask16)((1u << nr) - 1u);
        const __m512i row_off = _mm512_mullo_epi32(_mm512_min_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                                    _mm512_set1_epi32(nr - 1)),
                                                   _mm512_set1_epi32((int)ldw));
        const uint8_t *wg = w + (size_t)(r0 / QP_LANE_ROWS) * group_bytes;
        for (int64_t i0 = 0; i0 < nb; i0 += QP_LANE_BLOCKS) {
            const int nbc = nb - i0 < QP_LANE_BLOCKS ? (int)(nb - i0) : QP_LANE_BLOCKS;
            for (int i = 0; i < nbc; i++) {
                if (packed) lane_unpack_packed(kind, wg + (size_t)(i0 + i) * wbytes, &lb[i]);
                else if (kind == TILE_Q6K) lane_unpack_q6k(wg + (size_t)(i0 + i) * wbytes, row_off, &lb[i]);
                else lane_unpack_q4k(wg + (size_t)(i0 + i) * wbytes, row_off, kind == TILE_Q5K, &lb[i]);
            }
            for (int64_t t0 = 0; t0 < n_tok; t0 += QP_LANE_TOKENS) {
                const int nt = n_tok - t0 < QP_LANE_TOKENS ? (int)(n_tok - t0) : QP_LANE_TOKENS;
                const uint8_t *xt[QP_LANE_TOKENS];
                __m512 sum[QP_LANE_TOKENS];
                for (int t = 0; t < QP_LANE_TOKENS; t++) {
                    xt[t] = xq + (size_t)(t0 + (t < nt ? t : nt - 1)) * ldxq;
                    sum[t] = i0 == 0 || t >= nt ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep, y + (size_t)(t0 + t) * ldy + (size_t)r0);
                }
                for (int i = 0; i < nbc; i++) {
                    const uint8_t *ab[QP_LANE_TOKENS];
                    for (int t = 0; t < QP_LANE_TOKENS; t++) ab[t] = xt[t] + (size_t)(i0 + i) * QP_Q8_K_BYTES;
                    lane_tokens(kind, &lb[i], ab, sum);
                }
                for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy + (size_t)r0, keep, sum[t]);
            }
        }
    }
}

/* k-quant batches: rows in lanes for the groups of 16 (when the row offsets fit a gather's int32
 * indices and the batch has QP_LANE_MIN_TOKENS tokens), the 4 x 4 tiles for the rest */
QP_VNNI __attribute__((always_inline)) static inline void k_batch(tile_kind kind, const uint8_t *w, size_t ldw, int64_t n_rows,
                                                                  const uint8_t *xq, size_t ldxq, int64_t n_tok, int64_t n,
                                                                  float *y, size_t ldy) {
    int64_t lanes = 0;
    if (n_tok >= QP_LANE_MIN_TOKENS(kind) && ldw <= (size_t)INT32_MAX / QP_LANE_ROWS) {
        lanes = n_rows / QP_LANE_ROWS * QP_LANE_ROWS;
        lane_rows(kind, false, w, ldw, lanes, xq, ldxq, n_tok, n, y, ldy);
    }
    if (lanes < n_rows) tile_shape(kind, 4, 4, w + (size_t)lanes * ldw, ldw, n_rows - lanes, xq, ldxq, n_tok, n, y + lanes, ldy);
}

/* One token: row by row through the single-row kernels (decode reads the weights once, and
 * one sequential stream reads memory faster than 16 rows' tiles did: 12-18 GB/s vs 12-14 on
 * one thread). Several: 4 rows x 4 tokens. */
#define QP_QDOT_TILE_VNNI(NAME, KIND)                                                               \
    QP_VNNI void qp_##NAME##_tile_vnni(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq, \
                                       int64_t n_tok, int64_t n, float *y, size_t ldy) {            \
        if (n_tok == 1)                                                                             \
            for (int64_t r = 0; r < n_rows; r++) y[r] = qp_##NAME##_vnni((const uint8_t *)w + (size_t)r * ldw, xq, n); \
        else k_batch(KIND, w, ldw, n_rows, xq, ldxq, n_tok, n, y, ldy);                             \
    }
QP_QDOT_TILE_VNNI(q4k_dot_q8k, TILE_Q4K)
QP_QDOT_TILE_VNNI(q5k_dot_q8k, TILE_Q5K)
QP_QDOT_TILE_VNNI(q6k_dot_q8k, TILE_Q6K)

/* Repacked Q4_K or Q6_K groups (encoding.h qp_vec_dot_q8_packed_fn): batches of QP_LANE_MIN_TOKENS
 * or more through the lanes (each super-block of a group unpacked once for the batch), fewer token
 * by token through the decode kernel (one sequential stream of the groups) */
QP_VNNI __attribute__((always_inline)) static inline void k_packed(tile_kind kind, const uint8_t *p, int64_t n_groups, const uint8_t *xq,
                                                                   size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy) {
    if (n_tok >= QP_LANE_MIN_TOKENS(TILE_Q4K)) {
        lane_rows(kind, true, p, 0, n_groups * QP_LANE_ROWS, xq, ldxq, n_tok, n, y, ldy);
        return;
    }
    const int64_t nb = n / QP_QK_K;
    const size_t group_bytes = (size_t)nb * (kind == TILE_Q6K ? QP_Q6K_PACK_BYTES : QP_Q4K_PACK_BYTES);
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t t = 0; t < n_tok; t++) {
            const uint8_t *pg = p + (size_t)g * group_bytes, *ab = xq + (size_t)t * ldxq;
            _mm512_storeu_ps(y + (size_t)t * ldy + (size_t)(g * QP_LANE_ROWS),
                             kind == TILE_Q6K ? q6k_packed_token(pg, ab, nb) : packed_token(pg, ab, nb));
        }
}
QP_VNNI void qp_q4k_packed_dot_q8k_vnni(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                        int64_t n, float *y, size_t ldy) {
    k_packed(TILE_Q4K, packed, n_groups, xq, ldxq, n_tok, n, y, ldy);
}
/* Q6_K: the lanes from 8 tokens as Q4_K (the packed levels cost a few logic operations per vector,
 * not the gathers that make the file's rows wait for 12) */
QP_VNNI void qp_q6k_packed_dot_q8k_vnni(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                        int64_t n, float *y, size_t ldy) {
    k_packed(TILE_Q6K, packed, n_groups, xq, ldxq, n_tok, n, y, ldy);
}

/* Repacked BQ4 groups (qdot.h QP_BQ4_PACK_*; encoding.h qp_vec_dot_q8_packed_fn): 16 rows in the
 * 16 int32 lanes. Per block: the 4 code vectors give the low nibbles (elements 8g + 2j of every row)
 * and the high ones (8g + 2j + 1); a token's 32 activations are reordered (pshufb: per 8-element
 * group the 4 even elements, then the 4 odd ones) and broadcast 4 bytes at a time, so 8 vpdpbusd
 * give every row's sum q a, started from -zero_r x the block's activation sum (vpmulld); then the
 * reference's float step in the 16 lanes, chain b mod 4, and (s0 + s2) + (s1 + s3): every row its
 * single dot's bits. One token (decode): one sequential pass over the group; several: tiles of
 * QP_QDOT_TOKENS tokens, each block's codes unpacked once for them. */
typedef struct bq4_lanes {
    __m512i lo[4], hi[4], z;
    __m512 d;
} bq4_lanes;
QP_VNNI static inline __attribute__((always_inline)) void bq4_unpack_lanes(const uint8_t *pb, bq4_lanes *l) {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 4; g++) {
        const __m512i q = _mm512_loadu_si512((const void *)(pb + 64 * g));
        l->lo[g] = _mm512_and_si512(q, nib);
        l->hi[g] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nib);
    }
    l->z = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(pb + QP_BQ4_PACK_OFF_Z)));
    l->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(pb + QP_BQ4_PACK_OFF_D)));
}
/* s + (d_w d_a) isum for the 16 rows of l against the Q8_0 block ab */
QP_VNNI static inline __attribute__((always_inline)) __m512 bq4_lanes_step(const bq4_lanes *l, const uint8_t *ab, __m512 s) {
    int32_t ap[8];
    const int32_t asum = qp_bq4_act_groups(ab, ap);
    __m512i acc = _mm512_mullo_epi32(l->z, _mm512_set1_epi32(-asum));
    for (int g = 0; g < 4; g++) {
        acc = _mm512_dpbusd_epi32(acc, l->lo[g], _mm512_set1_epi32(ap[2 * g]));
        acc = _mm512_dpbusd_epi32(acc, l->hi[g], _mm512_set1_epi32(ap[2 * g + 1]));
    }
    const __m512 d = _mm512_mul_ps(l->d, _mm512_set1_ps(_cvtsh_ss(qp_load_u16le(ab))));
    return _mm512_add_ps(s, _mm512_mul_ps(d, _mm512_cvtepi32_ps(acc)));
}
/* block i of a group (pg) against QP_QDOT_TOKENS tokens (xt), into their chains s[t] */
QP_VNNI static inline __attribute__((always_inline)) void bq4_lanes_block(const uint8_t *pg, const uint8_t *const *xt, int64_t i,
                                                                          __m512 *s) {
    bq4_lanes l;
    bq4_unpack_lanes(pg + (size_t)i * QP_BQ4_PACK_BYTES, &l);
    for (int t = 0; t < QP_QDOT_TOKENS; t++) s[t] = bq4_lanes_step(&l, xt[t] + (size_t)i * QP_Q8_0_BYTES, s[t]);
}
QP_VNNI static inline __attribute__((always_inline)) __m512 bq4_token_block(const uint8_t *pg, const uint8_t *ab, int64_t i,
                                                                             __m512 s) {
    bq4_lanes l;
    bq4_unpack_lanes(pg + (size_t)i * QP_BQ4_PACK_BYTES, &l);
    return bq4_lanes_step(&l, ab + (size_t)i * QP_Q8_0_BYTES, s);
}
QP_VNNI static inline __m512 bq4_packed_token(const uint8_t *pg, const uint8_t *ab, int64_t nb) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        s0 = bq4_token_block(pg, ab, i, s0);
        s1 = bq4_token_block(pg, ab, i + 1, s1);
        s2 = bq4_token_block(pg, ab, i + 2, s2);
        s3 = bq4_token_block(pg, ab, i + 3, s3);
    }
    if (i < nb) s0 = bq4_token_block(pg, ab, i++, s0);
    if (i < nb) s1 = bq4_token_block(pg, ab, i++, s1);
    if (i < nb) s2 = bq4_token_block(pg, ab, i++, s2);
    return _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3));
}
QP_VNNI void qp_bq4_packed_dot_q8_0_vnni(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                         int64_t n, float *y, size_t ldy) {
    const int64_t nb = n / QP_QK;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * QP_BQ4_PACK_BYTES;
        float *yg = y + (size_t)(g * QP_BQ4_PACK_ROWS);
        if (n_tok == 1) {
            _mm512_storeu_ps(yg, bq4_packed_token(pg, xq, nb));
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += QP_QDOT_TOKENS) {
            const int nt = n_tok - t0 < QP_QDOT_TOKENS ? (int)(n_tok - t0) : QP_QDOT_TOKENS;
            const uint8_t *xt[QP_QDOT_TOKENS];
            qp_tile_ptrs(xq, ldxq, t0, nt, QP_QDOT_TOKENS, xt);
            __m512 s0[QP_QDOT_TOKENS], s1[QP_QDOT_TOKENS], s2[QP_QDOT_TOKENS], s3[QP_QDOT_TOKENS];
            for (int t = 0; t < QP_QDOT_TOKENS; t++) s0[t] = s1[t] = s2[t] = s3[t] = _mm512_setzero_ps();
            int64_t i = 0;
            for (; i + 4 <= nb; i += 4) {
                bq4_lanes_block(pg, xt, i, s0);
                bq4_lanes_block(pg, xt, i + 1, s1);
                bq4_lanes_block(pg, xt, i + 2, s2);
                bq4_lanes_block(pg, xt, i + 3, s3);
            }
            if (i < nb) bq4_lanes_block(pg, xt, i++, s0);
            if (i < nb) bq4_lanes_block(pg, xt, i++, s1);
            if (i < nb) bq4_lanes_block(pg, xt, i++, s2);
            for (int t = 0; t < nt; t++)
                _mm512_storeu_ps(yg + (size_t)(t0 + t) * ldy, _mm512_add_ps(_mm512_add_ps(s0[t], s2[t]), _mm512_add_ps(s1[t], s3[t])));
        }
    }
}

/* Repacked TQ2_0 groups (qdot.h QP_TQ2_PACK_*, encodings.md "Repacked TQ2_0 rows"): lane r = row r.
 * Per block, each of the 16 code vectors is masked in place (w & 3 << 2s: code x 4^s, at most 192,
 * no shifts) and vpdpbusd'd against the token's 4 activations of each s (a 4-byte broadcast) into
 * chain s, so chain s holds 4^s x the sum of its codes by the activations (exact: at most 16 x 4 x
 * 192 x 128 per lane); isum = c0 + c1 / 4 + c2 / 16 + c3 / 64 (exact arithmetic shifts of exact
 * multiples) - asum, the block's activation sum (codes are level + 1). TT tokens share each masked
 * vector; one token keeps two chains per s. a[t]: token t's 256 activations of the block. */
#define QP_TQ2_TT 4
QP_VNNI __attribute__((always_inline)) static inline void tq2_packed_block(const uint8_t *codes, const int8_t *const a[],
                                                                           const int32_t asum[], int tt, __m512i isum[]) {
    const int ch = tt == 1 ? 2 : 1;
    __m512i acc[QP_TQ2_TT][2][4];
    for (int t = 0; t < tt; t++)
        for (int c = 0; c < ch; c++)
            for (int s = 0; s < 4; s++) acc[t][c][s] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int v = 0; v < 16; v++) {
        const __m512i w = _mm512_loadu_si512((const void *)(codes + 64 * v));
        __m512i u[4];
        for (int s = 0; s < 4; s++) u[s] = _mm512_and_si512(w, _mm512_set1_epi8((char)(3 << (2 * s))));
        for (int t = 0; t < tt; t++)
            for (int s = 0; s < 4; s++) {
                const int32_t a4 = (int32_t)qp_load_u32le((const uint8_t *)a[t] + 16 * v + 4 * s);
                acc[t][v % ch][s] = _mm512_dpbusd_epi32(acc[t][v % ch][s], u[s], _mm512_set1_epi32(a4));
            }
    }
    for (int t = 0; t < tt; t++) {
        __m512i c[4];
        for (int s = 0; s < 4; s++) c[s] = ch == 2 ? _mm512_add_epi32(acc[t][0][s], acc[t][1][s]) : acc[t][0][s];
        const __m512i hi = _mm512_add_epi32(_mm512_srai_epi32(c[1], 2),
                                            _mm512_add_epi32(_mm512_srai_epi32(c[2], 4), _mm512_srai_epi32(c[3], 6)));
        isum[t] = _mm512_sub_epi32(_mm512_add_epi32(c[0], hi), _mm512_set1_epi32(asum[t]));
    }
}

/* One group (nb blocks at pg) against tt tokens, lane r of token t's 16 results at y + t * ldy.
 * Q8_K activations (xq: Q8_K rows of ldxq bytes; y float): the reference's float step d = f16(d_w)
 * d_a, s = s + d isum; int8 ones (a: rows of lda; y double): s += (double)d_w * (double)isum in
 * two 8-lane halves (enc_ternary.c tq_vec_dot_i8). */
QP_VNNI __attribute__((always_inline)) static inline void tq2_packed_group(const uint8_t *pg, int64_t nb, bool i8, const void *x,
                                                                           size_t ldx, int tt, const int32_t *sums, void *y,
                                                                           size_t ldy) {
    __m512 sum[QP_TQ2_TT];
    __m512d lo[QP_TQ2_TT], hi[QP_TQ2_TT];
    for (int t = 0; t < tt; t++) sum[t] = _mm512_setzero_ps(), lo[t] = hi[t] = _mm512_setzero_pd();
    for (int64_t i = 0; i < nb; i++) {
        __m512i isum[QP_TQ2_TT];
        const int8_t *a[QP_TQ2_TT];
        int32_t asum[QP_TQ2_TT];
        for (int t = 0; t < tt; t++) a[t] = qp_tq2_block_acts_of(x, ldx, t, i, i8, sums, nb, &asum[t]);
        tq2_packed_block(pg + (size_t)i * QP_TQ2_PACK_CODES, a, asum, tt, isum);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(pg + QP_TQ2_PACK_CODES * nb + 32 * i)));
        for (int t = 0; t < tt; t++) {
            if (i8) {
                lo[t] = _mm512_add_pd(lo[t], _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(dw)),
                                                           _mm512_cvtepi32_pd(_mm512_castsi512_si256(isum[t]))));
                hi[t] = _mm512_add_pd(hi[t], _mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(dw, 1)),
                                                           _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(isum[t], 1))));
                continue;
            }
            const float da = qp_load_f32le((const uint8_t *)x + (size_t)t * ldx + (size_t)i * QP_Q8_K_BYTES);
            const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(da));
            sum[t] = _mm512_add_ps(sum[t], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t])));
        }
    }
    for (int t = 0; t < tt; t++) {
        if (!i8) {
            _mm512_storeu_ps((float *)y + (size_t)t * ldy, sum[t]);
            continue;
        }
        _mm512_storeu_pd((double *)y + (size_t)t * ldy, lo[t]);
        _mm512_storeu_pd((double *)y + (size_t)t * ldy + 8, hi[t]);
    }
}

/* group g against the tokens t0 .. t0 + 3 (fewer at the end; a constant count per call: the
 * chains stay in registers); x / ldx and y of tq2_packed_group, sums: qp_tq2_i8_sums of those tokens
 * or NULL */
QP_VNNI __attribute__((always_inline)) static inline void tq2_packed_at(const void *packed, int64_t g, int64_t t0, int64_t n_tok,
                                                                        int64_t nb, bool i8, const void *x, size_t ldx,
                                                                        const int32_t *sums, void *y, size_t ldy) {
    const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * QP_TQ2_PACK_BYTES;
    const int tt = n_tok - t0 < QP_TQ2_TT ? (int)(n_tok - t0) : QP_TQ2_TT;
    const void *xt = (const uint8_t *)x + (size_t)t0 * ldx;
    void *yg = (uint8_t *)y + ((size_t)t0 * ldy + (size_t)(g * QP_TQ2_PACK_ROWS)) * (i8 ? sizeof(double) : sizeof(float));
    switch (tt) {
    case 1: tq2_packed_group(pg, nb, i8, xt, ldx, 1, sums, yg, ldy); break;
    case 2: tq2_packed_group(pg, nb, i8, xt, ldx, 2, sums, yg, ldy); break;
    case 3: tq2_packed_group(pg, nb, i8, xt, ldx, 3, sums, yg, ldy); break;
    default: tq2_packed_group(pg, nb, i8, xt, ldx, 4, sums, yg, ldy); break;
    }
}
/* n_groups groups x n_tok tokens in fours: a group's tokens one after another (its codes stay in
 * cache); int8 rows of up to QP_TQ2_SUM_BLOCKS blocks a token tile's groups one after another, the
 * tile's activation sums made once for them (the caller bounds the groups per call) */
QP_VNNI __attribute__((always_inline)) static inline void tq2_packed(const void *packed, int64_t n_groups, bool i8, const void *x,
                                                                     size_t ldx, int64_t n_tok, int64_t n, void *y, size_t ldy) {
    const int64_t nb = n / QP_QK_K;
    if (!i8 || nb > QP_TQ2_SUM_BLOCKS) {
        for (int64_t g = 0; g < n_groups; g++)
            for (int64_t t0 = 0; t0 < n_tok; t0 += QP_TQ2_TT) tq2_packed_at(packed, g, t0, n_tok, nb, i8, x, ldx, NULL, y, ldy);
        return;
    }
    int32_t sums[QP_TQ2_TT * QP_TQ2_SUM_BLOCKS];
    for (int64_t t0 = 0; t0 < n_tok; t0 += QP_TQ2_TT) {
        qp_tq2_i8_sums((const int8_t *)x + (size_t)t0 * ldx, ldx, n_tok - t0 < QP_TQ2_TT ? (int)(n_tok - t0) : QP_TQ2_TT, nb, sums);
        for (int64_t g = 0; g < n_groups; g++) tq2_packed_at(packed, g, t0, n_tok, nb, true, x, ldx, sums, y, ldy);
    }
}
QP_VNNI void qp_tq2_0_packed_dot_q8k_vnni(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                          int64_t n, float *y, size_t ldy) {
    tq2_packed(packed, n_groups, false, xq, ldxq, n_tok, n, y, ldy);
}
QP_VNNI void qp_tq2_0_packed_dot_i8_vnni(const void *packed, int64_t n_groups, const int8_t *a, size_t lda, int64_t n_tok,
                                         int64_t n, double *y, size_t ldy) {
    tq2_packed(packed, n_groups, true, a, lda, n_tok, n, y, ldy);
}
