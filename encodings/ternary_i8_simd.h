/* The I2_S exact int8 dots (traits vec_dot_i8, vec_dot_i8_tile) for one SIMD level, written once
 * and instantiated by ternary_avx2.c (maddubs + madd) and ternary_avx512.c (vpdpbusd, VNNI);
 * included only by files compiled with AVX2 enabled. enc_ternary.md "SIMD paths" says how:
 *  - a 32-byte block's codes become unsigned levels u = level + 1 (0, 1, 2; the illegal code 3
 *    -> 1, level 0, as the scalar decoder) by two 16-entry byte shuffles per nibble, no shifts
 *    per code: the high nibble holds elements p and 32 + p, the low one 64 + p and 96 + p;
 *  - sum level * a = sum u * a - sum a; sum a is made once per token (not per row), so a pair
 *    costs one PAIR per 32 elements;
 *  - int32 lanes are flushed to int64 every QP_I2S_FLUSH blocks, so no row length overflows.
 * The integers are exact, so every level and the tile give the scalar path's double. */
#ifndef QP_TERNARY_I8_SIMD_H
#define QP_TERNARY_I8_SIMD_H
#include <immintrin.h>
#include <stdint.h>

/* blocks between int32 flushes: a lane takes <= 4 * 4 * 2 * 128 = 4096 per block, 2^21 per flush */
#define QP_I2S_FLUSH 512
/* a row's weights are prefetched this many bytes ahead (one token, from memory, VNNI level,
 * best of 5 x 5 alternated: rows of 5632 15.0-18.2 -> 18.4-19.0 GB/s, rows of 2048 18.8-19.4 ->
 * 19.1-19.8; a plain read loop 17-21) */
#define QP_I2S_AHEAD 512
/* tokens whose activation sums a tile call keeps at once */
#define QP_I2S_TOK_GROUP 64

/* u of elements 32k + p (k = 0, 1 from the high nibble, 2, 3 from the low one) of one block */
static inline __m256i qp_i2s_nibble(__m256i v, int high) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    return _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, m4);
}
/* lut_hi maps a nibble to u of its upper code (bits 3:2), lut_lo to u of its lower (bits 1:0) */
static inline __m256i qp_i2s_u_of(__m256i nibble, int upper) {
    const __m256i hi = _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1,
                                        0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 1);
    const __m256i lo = _mm256_setr_epi8(0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1,
                                        0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1);
    return _mm256_shuffle_epi8(upper ? hi : lo, nibble);
}

static inline int64_t qp_i2s_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* sum of n int8 (n a multiple of 32), exact: byte sums of a + 128 in 64-bit lanes, minus 128 n */
static inline int64_t qp_i8_sum(const int8_t *a, int64_t n) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m256i s = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += 32)
        s = _mm256_add_epi64(s, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a + i)), bias),
                                                _mm256_setzero_si256()));
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
    return (int64_t)_mm_cvtsi128_si64(h) - 128 * n;
}

/* Instantiates, for one level (ATTR its target attribute, PAIR(acc, u, a) = acc + the exact lane
 * sums of u * a in the level's accumulator, WIDEN(acc) = its 8 int32 lane sums, SPAN the blocks an
 * accumulator takes before it is widened, TR x TT the prompt tile; VNNI: int32 lanes, WIDEN the
 * identity, SPAN = QP_I2S_FLUSH; AVX2: int16 lanes of maddubs, one madd per SPAN blocks):
 *   double qp_i2s_vec_dot_i8_SUFFIX(w, a, n)             one row (traits vec_dot_i8)
 *   void qp_i2s_vec_dot_i8_tile_SUFFIX(...)              rows x tokens (qp_vec_dot_i8_tile_fn)
 * One token: row after row (one sequential stream of weights, four independent accumulators).
 * Several: tiles of TR rows x TT tokens; a block's nibbles and u are made once for the TT tokens
 * and each 32 activations are loaded once for the TR rows; rows and tokens past the end of a
 * partial tile repeat the last one and are not stored. */
#define QP_I2S_I8_KERNELS(ATTR, SUFFIX, PAIR, WIDEN, SPAN, TR, TT)                                            \
    /* sum of u * a over nb blocks */                                                             \
    ATTR static inline int64_t i2s_row_u_##SUFFIX(const uint8_t *w, const int8_t *a, int64_t nb) { \
        int64_t s = 0;                                                                            \
        for (int64_t b0 = 0; b0 < nb; b0 += QP_I2S_FLUSH) {                                       \
            const int64_t b1 = nb - b0 < QP_I2S_FLUSH ? nb : b0 + QP_I2S_FLUSH;                   \
            __m256i acc32 = _mm256_setzero_si256();                                               \
            for (int64_t bs = b0; bs < b1; bs += (SPAN)) {                                        \
                const int64_t be = b1 - bs < (SPAN) ? b1 : bs + (SPAN);                           \
                __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), \
                                  _mm256_setzero_si256()};                                        \
                for (int64_t b = bs; b < be; b++) {                                               \
                    _mm_prefetch((const char *)(uintptr_t)(w + 32 * b + QP_I2S_AHEAD), _MM_HINT_T0); \
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 32 * b));          \
                    const __m256i hi = qp_i2s_nibble(v, 1), lo = qp_i2s_nibble(v, 0);             \
                    const int8_t *ab = a + 128 * b;                                               \
                    acc[0] = PAIR(acc[0], qp_i2s_u_of(hi, 1), _mm256_loadu_si256((const __m256i *)ab)); \
                    acc[1] = PAIR(acc[1], qp_i2s_u_of(hi, 0), _mm256_loadu_si256((const __m256i *)(ab + 32))); \
                    acc[2] = PAIR(acc[2], qp_i2s_u_of(lo, 1), _mm256_loadu_si256((const __m256i *)(ab + 64))); \
                    acc[3] = PAIR(acc[3], qp_i2s_u_of(lo, 0), _mm256_loadu_si256((const __m256i *)(ab + 96))); \
                }                                                                                 \
                acc32 = _mm256_add_epi32(acc32, _mm256_add_epi32(_mm256_add_epi32(WIDEN(acc[0]), WIDEN(acc[1])), \
                                                                 _mm256_add_epi32(WIDEN(acc[2]), WIDEN(acc[3])))); \
            }                                                                                     \
            s += qp_i2s_hsum_epi32(acc32);                                                        \
        }                                                                                         \
        return s;                                                                                 \
    }                                                                                             \
    ATTR double qp_i2s_vec_dot_i8_##SUFFIX(const void *w, const int8_t *a, int64_t n) {          \
        const int64_t nb = n / 128;                                                               \
        return (double)(i2s_row_u_##SUFFIX(w, a, nb) - qp_i8_sum(a, 128 * nb));                   \
    }                                                                                             \
    /* y[t * ldy + r] for rows wr[0 .. nr) x tokens xt[0 .. nt) (arrays padded to TR / TT) */     \
    ATTR static void i2s_tile_##SUFFIX(const uint8_t *const *wr, int nr, const int8_t *const *xt, \
                                       const int64_t *sa, int nt, int64_t nb, double *y, size_t ldy) { \
        int64_t tot[TR][TT] = {{0}};                                                              \
        for (int64_t b0 = 0; b0 < nb; b0 += QP_I2S_FLUSH) {                                       \
            const int64_t b1 = nb - b0 < QP_I2S_FLUSH ? nb : b0 + QP_I2S_FLUSH;                   \
            __m256i acc32[TR][TT];                                                                \
            for (int r = 0; r < (TR); r++)                                                        \
                for (int t = 0; t < (TT); t++) acc32[r][t] = _mm256_setzero_si256();              \
            for (int64_t bs = b0; bs < b1; bs += (SPAN)) {                                        \
                const int64_t be = b1 - bs < (SPAN) ? b1 : bs + (SPAN);                           \
                __m256i acc[TR][TT];                                                              \
                for (int r = 0; r < (TR); r++)                                                    \
                    for (int t = 0; t < (TT); t++) acc[r][t] = _mm256_setzero_si256();            \
                for (int64_t b = bs; b < be; b++)                                                 \
                    for (int k = 0; k < 4; k++) {                                                 \
                        __m256i u[TR];                                                            \
                        for (int r = 0; r < (TR); r++)                                            \
                            u[r] = qp_i2s_u_of(qp_i2s_nibble(_mm256_loadu_si256((const __m256i *)(wr[r] + 32 * b)), \
                                                             k < 2), k % 2 == 0);                 \
                        for (int t = 0; t < (TT); t++) {                                          \
                            const __m256i at = _mm256_loadu_si256((const __m256i *)(xt[t] + 128 * b + 32 * k)); \
                            for (int r = 0; r < (TR); r++) acc[r][t] = PAIR(acc[r][t], u[r], at); \
                        }                                                                         \
                    }                                                                             \
                for (int r = 0; r < (TR); r++)                                                    \
                    for (int t = 0; t < (TT); t++) acc32[r][t] = _mm256_add_epi32(acc32[r][t], WIDEN(acc[r][t])); \
            }                                                                                     \
            for (int r = 0; r < (TR); r++)                                                        \
                for (int t = 0; t < (TT); t++) tot[r][t] += qp_i2s_hsum_epi32(acc32[r][t]);       \
        }                                                                                         \
        for (int t = 0; t < nt; t++)                                                              \
            for (int r = 0; r < nr; r++) y[(size_t)t * ldy + (size_t)r] = (double)(tot[r][t] - sa[t]); \
    }                                                                                             \
    ATTR void qp_i2s_vec_dot_i8_tile_##SUFFIX(const void *w, size_t ldw, int64_t n_rows, const int8_t *a, \
                                              size_t lda, int64_t n_tok, int64_t n, double *y, size_t ldy) { \
        const int64_t nb = n / 128;                                                               \
        const uint8_t *w8 = w;                                                                    \
        for (int64_t g0 = 0; g0 < n_tok; g0 += QP_I2S_TOK_GROUP) {                                \
            const int64_t ng = n_tok - g0 < QP_I2S_TOK_GROUP ? n_tok - g0 : QP_I2S_TOK_GROUP;     \
            int64_t sa[QP_I2S_TOK_GROUP];                                                         \
            for (int64_t t = 0; t < ng; t++) sa[t] = qp_i8_sum(a + (size_t)(g0 + t) * lda, 128 * nb); \
            if (ng == 1) {                                                                        \
                for (int64_t r = 0; r < n_rows; r++)                                              \
                    y[(size_t)g0 * ldy + (size_t)r] =                                             \
                        (double)(i2s_row_u_##SUFFIX(w8 + (size_t)r * ldw, a + (size_t)g0 * lda, nb) - sa[0]); \
                continue;                                                                         \
            }                                                                                     \
            for (int64_t r0 = 0; r0 < n_rows; r0 += (TR)) {                                       \
                const int nr = n_rows - r0 < (TR) ? (int)(n_rows - r0) : (TR);                    \
                const uint8_t *wr[TR];                                                            \
                for (int r = 0; r < (TR); r++) wr[r] = w8 + (size_t)(r0 + (r < nr ? r : nr - 1)) * ldw; \
                for (int64_t t0 = 0; t0 < ng; t0 += (TT)) {                                       \
                    const int nt = ng - t0 < (TT) ? (int)(ng - t0) : (TT);                        \
                    const int8_t *xt[TT];                                                         \
                    for (int t = 0; t < (TT); t++)                                                \
                        xt[t] = a + (size_t)(g0 + t0 + (t < nt ? t : nt - 1)) * lda;              \
                    i2s_tile_##SUFFIX(wr, nr, xt, sa + t0, nt, nb, y + (size_t)(g0 + t0) * ldy + (size_t)r0, ldy); \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }

#endif
