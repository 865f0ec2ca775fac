/* AVX2 + FMA + F16C kernels of the plain float encodings: F32/F16/BF16 dots against F32
 * activations, the multi-vector F32 dot of the runtime's batched matrix product, and exact
 * F16/BF16 widening. The summation structure is defined once (encodings/plain_kernels.h) and
 * shared by every dot here, so a F16 dot equals the F32 dot of the widened row bit for bit. */
#include <immintrin.h>
#include <string.h>

#include "encodings/plain_kernels.h"
#include "quantpack/core.h"

enum { K_F32, K_F16, K_BF16 };

#define QP_INLINE static inline __attribute__((always_inline))

/* Eight row elements starting at element i, widened to F32 (exactly). */
QP_INLINE __m256 load8(int kind, const uint8_t *w, int64_t i) {
    if (kind == K_F32) return _mm256_loadu_ps((const float *)(const void *)(w + 4 * i));
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(w + 2 * i));
    if (kind == K_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The last n - i < 8 row elements (widened) and activations, zero-padded to 8 lanes. */
QP_INLINE void load_partial(int kind, const uint8_t *w, const float *x, int64_t i, int64_t n,
                            __m256 *wv, __m256 *xv) {
    float tw[8] = {0}, tx[8] = {0};
    for (int64_t k = i; k < n; k++) {
        uint16_t h;
        if (kind == K_F32) memcpy(&tw[k - i], w + 4 * k, 4);
        else {
            memcpy(&h, w + 2 * k, 2);
            tw[k - i] = kind == K_F16 ? qp_fp16_to_fp32(h) : qp_bf16_to_fp32(h);
        }
        tx[k - i] = x[k];
    }
    *wv = _mm256_loadu_ps(tw);
    *xv = _mm256_loadu_ps(tx);
}

/* v = (a0 + a1) + (a2 + a3), then ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)) with
 * in-register shuffles (every addition has the same two operands as the written-out tree). */
QP_INLINE float reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0xB1));
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E));
    v = _mm256_add_ps(v, _mm256_permute2f128_ps(v, v, 1));
    return _mm256_cvtss_f32(v);
}

QP_INLINE float dot_kind(int kind, const void *wp, const float *x, int64_t n) {
    const uint8_t *w = wp;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load8(kind, w, i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load8(kind, w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8(kind, w, i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8(kind, w, i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    if (i + 8 <= n) {
        a0 = _mm256_fmadd_ps(load8(kind, w, i), _mm256_loadu_ps(x + i), a0);
        i += 8;
        if (i + 8 <= n) {
            a1 = _mm256_fmadd_ps(load8(kind, w, i), _mm256_loadu_ps(x + i), a1);
            i += 8;
            if (i + 8 <= n) {
                a2 = _mm256_fmadd_ps(load8(kind, w, i), _mm256_loadu_ps(x + i), a2);
                i += 8;
            }
        }
    }
    if (i < n) {
        __m256 wv, xv;
        load_partial(kind, w, x, i, n, &wv, &xv);
        a3 = _mm256_fmadd_ps(wv, xv, a3);
    }
    return reduce4(a0, a1, a2, a3);
}

float qp_f32_vec_dot_avx2(const void *w, const float *x, int64_t n) {
    return dot_kind(K_F32, w, x, n);
}
float qp_f16_vec_dot_avx2(const void *w, const float *x, int64_t n) {
    return dot_kind(K_F16, w, x, n);
}
float qp_bf16_vec_dot_avx2(const void *w, const float *x, int64_t n) {
    return dot_kind(K_BF16, w, x, n);
}

/* ---- one F32 row against several activation vectors ---------------------------------------
 * Three vectors per pass (12 accumulators + the row chunk + one temporary fit the 16 ymm
 * registers); each vector's accumulators see exactly the operations of dot_kind(K_F32). */
#define FMA_T(T, J, OFF)                                                                         \
    a[T][J] = _mm256_fmadd_ps(wj, _mm256_loadu_ps(x##T + i + (OFF)), a[T][J])

static void dot3(const float *w, const float *x0, const float *x1, const float *x2, int64_t n,
                 float out[3]) {
    __m256 a[3][4];
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 4; j++) a[t][j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 wj = _mm256_loadu_ps(w + i);
        FMA_T(0, 0, 0); FMA_T(1, 0, 0); FMA_T(2, 0, 0);
        wj = _mm256_loadu_ps(w + i + 8);
        FMA_T(0, 1, 8); FMA_T(1, 1, 8); FMA_T(2, 1, 8);
        wj = _mm256_loadu_ps(w + i + 16);
        FMA_T(0, 2, 16); FMA_T(1, 2, 16); FMA_T(2, 2, 16);
        wj = _mm256_loadu_ps(w + i + 24);
        FMA_T(0, 3, 24); FMA_T(1, 3, 24); FMA_T(2, 3, 24);
    }
    for (int j = 0; j < 3 && i + 8 <= n; j++, i += 8) {
        __m256 wj = _mm256_loadu_ps(w + i);
        switch (j) {
        case 0: FMA_T(0, 0, 0); FMA_T(1, 0, 0); FMA_T(2, 0, 0); break;
        case 1: FMA_T(0, 1, 0); FMA_T(1, 1, 0); FMA_T(2, 1, 0); break;
        default: FMA_T(0, 2, 0); FMA_T(1, 2, 0); FMA_T(2, 2, 0); break;
        }
    }
    const float *xs[3] = {x0, x1, x2};
    for (int t = 0; t < 3; t++) {
        if (i < n) {
            __m256 wv, xv;
            load_partial(K_F32, (const uint8_t *)w, xs[t], i, n, &wv, &xv);
            a[t][3] = _mm256_fmadd_ps(wv, xv, a[t][3]);
        }
        out[t] = reduce4(a[t][0], a[t][1], a[t][2], a[t][3]);
    }
}
#undef FMA_T

void qp_f32_dot_multi_avx2(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n,
                           float *y, size_t ldy) {
    int64_t t = 0;
    for (; t + 3 <= nx; t += 3) {
        float o[3];
        const float *xt = x + (size_t)t * ldx;
        dot3(w, xt, xt + ldx, xt + 2 * ldx, n, o);
        y[(size_t)t * ldy] = o[0];
        y[(size_t)(t + 1) * ldy] = o[1];
        y[(size_t)(t + 2) * ldy] = o[2];
    }
    for (; t < nx; t++) y[(size_t)t * ldy] = dot_kind(K_F32, w, x + (size_t)t * ldx, n);
}

/* ---- exact widening -------------------------------------------------------------------------- */
int64_t qp_f16_dequantize_avx2(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    const __m128i emask = _mm_set1_epi16(0x7c00);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i));
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, emask), emask))) break;
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    return i;
}

void qp_bf16_dequantize_avx2(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8(K_BF16, p, i));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        y[i] = qp_bf16_to_fp32(h);
    }
}

/* ---- F16 rows against F16 activations (plain_kernels.h "Fast path") -----------------
 * Eight 8-lane accumulators: a[k] lane j is lane 8k + j of the 64.
 * a[l] + a[l + h] for h = 32, 16, 8 across the registers, then 4, 2, 1 within one */
QP_INLINE float hdot_reduce8(__m256 a[8]) {
    for (int k = 0; k < 4; k++) a[k] = _mm256_add_ps(a[k], a[k + 4]);
    for (int k = 0; k < 2; k++) a[k] = _mm256_add_ps(a[k], a[k + 2]);
    __m256 d = _mm256_add_ps(a[0], a[1]);
    __m128 e = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
    e = _mm_add_ps(e, _mm_movehl_ps(e, e));
    e = _mm_add_ss(e, _mm_shuffle_ps(e, e, 1));
    return _mm_cvtss_f32(e);
}

/* FMA: a product of two F16 values is exact in F32 */
static float hdot_f16(const uint8_t *w, const uint8_t *x, int64_t n) {
    __m256 a[8];
    for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_fmadd_ps(load8(K_F16, w, i + 8 * k), load8(K_F16, x, i + 8 * k), a[k]);
    if (i < n) { /* zero padding adds +0 products: a lane never holds -0, so they change nothing */
        uint8_t tw[2 * 64] = {0}, tx[2 * 64] = {0};
        memcpy(tw, w + 2 * i, (size_t)(2 * (n - i)));
        memcpy(tx, x + 2 * i, (size_t)(2 * (n - i)));
        for (int k = 0; k < 8; k++)
            a[k] = _mm256_fmadd_ps(load8(K_F16, tw, 8 * k), load8(K_F16, tx, 8 * k), a[k]);
    }
    return hdot_reduce8(a);
}

float qp_f16_dot_f16_avx2(const void *w, const void *x, int64_t n) { return hdot_f16(w, x, n); }

/* nr rows x nt tokens at once (nr <= 2, nt <= 3). A pair's 64 lanes need all 16 ymm registers,
 * so the whole 64-element blocks run in 4 passes, pass p keeping lanes 16p .. 16p + 15 (a[2p],
 * a[2p + 1]) of the 6 pairs in 12 registers over the whole row (from L1 after the first pass);
 * each lane still adds its elements in index order, the partial last block is added after the
 * passes as hdot_f16 adds it, and the reduction is hdot_reduce8: each y is qp_f16_dot_f16_avx2's
 * bits. Per 8 elements nr + nt widenings for nr x nt FMAs (pair by pair: 2 for 1). */
QP_INLINE void hdot_rt(int nr, int nt, const uint8_t *w, size_t ldw, const uint8_t *x, size_t ldx, int64_t n,
                       float *y, size_t ldy) {
    __m256 acc[2][3][8];
    const int64_t nf = n / 64 * 64;
    for (int p = 0; p < 4; p++) {
        __m256 a[2][3][2];
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) a[r][t][0] = a[r][t][1] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nf; i += 64)
            for (int c = 0; c < 2; c++) {
                const int64_t e = i + 16 * p + 8 * c;
                __m256 wv[2];
                for (int r = 0; r < nr; r++) wv[r] = load8(K_F16, w + (size_t)r * ldw, e);
                for (int t = 0; t < nt; t++) {
                    const __m256 xv = load8(K_F16, x + (size_t)t * ldx, e);
                    for (int r = 0; r < nr; r++) a[r][t][c] = _mm256_fmadd_ps(wv[r], xv, a[r][t][c]);
                }
            }
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < nt; t++) acc[r][t][2 * p] = a[r][t][0], acc[r][t][2 * p + 1] = a[r][t][1];
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            if (nf < n) { /* the zero-padded last block, as hdot_f16 */
                uint8_t tw[2 * 64] = {0}, tx[2 * 64] = {0};
                memcpy(tw, w + (size_t)r * ldw + 2 * nf, (size_t)(2 * (n - nf)));
                memcpy(tx, x + (size_t)t * ldx + 2 * nf, (size_t)(2 * (n - nf)));
                for (int k = 0; k < 8; k++) acc[r][t][k] = _mm256_fmadd_ps(load8(K_F16, tw, 8 * k), load8(K_F16, tx, 8 * k), acc[r][t][k]);
            }
            y[(size_t)t * ldy + (size_t)r] = hdot_reduce8(acc[r][t]);
        }
}

void qp_f16_dot_f16_tile_avx2(const void *wp, size_t ldw, int64_t n_rows, const void *xp, size_t ldx, int64_t n_tok,
                              int64_t n, float *y, size_t ldy) {
    const uint8_t *w = wp, *x = xp;
    for (int64_t r = 0; r < n_rows; r += 2) {
        const int nr = n_rows - r >= 2 ? 2 : 1;
        for (int64_t t = 0; t < n_tok; t += 3) {
            const int nt = n_tok - t >= 3 ? 3 : (int)(n_tok - t);
            const uint8_t *wr = w + (size_t)r * ldw, *xt = x + (size_t)t * ldx;
            float *yt = y + (size_t)t * ldy + (size_t)r;
            /* constant counts, so the accumulators stay in registers */
            if (nr == 2 && nt == 3) hdot_rt(2, 3, wr, ldw, xt, ldx, n, yt, ldy);
            else if (nr == 2 && nt == 2) hdot_rt(2, 2, wr, ldw, xt, ldx, n, yt, ldy);
            else if (nr == 2) hdot_rt(2, 1, wr, ldw, xt, ldx, n, yt, ldy);
            else if (nt == 3) hdot_rt(1, 3, wr, ldw, xt, ldx, n, yt, ldy);
            else if (nt == 2) hdot_rt(1, 2, wr, ldw, xt, ldx, n, yt, ldy);
            else hdot_rt(1, 1, wr, ldw, xt, ldx, n, yt, ldy);
        }
    }
}
