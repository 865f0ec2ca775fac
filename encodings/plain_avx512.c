/* AVX-512 (F+BW+VL+DQ) kernels of the plain float encodings: F32/F16/BF16 dots against F32
 * activations and the multi-vector F32 dot of the runtime's batched matrix product. The
 * level-2 summation structure (encodings/plain_kernels.h) is defined once here and shared by
 * every dot, so a F16 dot equals the F32 dot of the widened row bit for bit. */
#include <immintrin.h>

#include "encodings/plain_kernels.h"

enum { K_F32, K_F16, K_BF16 };

#define QP_INLINE static inline __attribute__((always_inline))

/* Sixteen row elements starting at element i (the lanes in mask; others 0), widened exactly. */
QP_INLINE __m512 load16(int kind, const uint8_t *w, int64_t i, __mmask16 m) {
    if (kind == K_F32) return _mm512_maskz_loadu_ps(m, w + 4 * i);
    __m256i h = _mm256_maskz_loadu_epi16(m, w + 2 * i);
    if (kind == K_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* v = (a0 + a1) + (a2 + a3), then the lanes' pairwise tree in lane order
 * (((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))) + (... v8 .. v15 ...), computed with
 * in-register shuffles: every addition has the same two operands as the written-out tree. */
QP_INLINE float reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 v = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));       /* lane 2k: v2k + v2k+1 */
    v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));       /* lane 4k: pairs of pairs */
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1)); /* lane 8k: quads of pairs */
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E)); /* lane 0: the two halves */
    return _mm512_cvtss_f32(v);
}

#define ALL ((__mmask16)0xffff)

/* Eight 16-bit row elements starting at element i, widened exactly. */
QP_INLINE __m256 load8(int kind, const uint8_t *w, int64_t i) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(w + 2 * i));
    if (kind == K_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

QP_INLINE __m512 join8(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1); }

QP_INLINE float dot_kind(int kind, const void *wp, const float *x, int64_t n) {
    const uint8_t *w = wp;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    if (kind == K_F32) {
        for (; i + 64 <= n; i += 64) {
            a0 = _mm512_fmadd_ps(load16(kind, w, i, ALL), _mm512_loadu_ps(x + i), a0);
            a1 = _mm512_fmadd_ps(load16(kind, w, i + 16, ALL), _mm512_loadu_ps(x + i + 16), a1);
            a2 = _mm512_fmadd_ps(load16(kind, w, i + 32, ALL), _mm512_loadu_ps(x + i + 32), a2);
            a3 = _mm512_fmadd_ps(load16(kind, w, i + 48, ALL), _mm512_loadu_ps(x + i + 48), a3);
        }
    } else {
        /* F16 / BF16 rows: the same four 16-lane accumulators kept as 256-bit halves (lanes 0-7,
           8-15), so every lane takes the same operations (the same bits); decode reads a 16-bit
           row faster so on Zen 4 (one thread over a mapped F16 GGUF: 16.8 -> 19.5-20.2 GB/s) */
        __m256 h[8];
        for (int k = 0; k < 8; k++) h[k] = _mm256_setzero_ps();
        for (; i + 64 <= n; i += 64)
            for (int k = 0; k < 8; k++) h[k] = _mm256_fmadd_ps(load8(kind, w, i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), h[k]);
        a0 = join8(h[0], h[1]);
        a1 = join8(h[2], h[3]);
        a2 = join8(h[4], h[5]);
        a3 = join8(h[6], h[7]);
    }
    if (i + 16 <= n) {
        a0 = _mm512_fmadd_ps(load16(kind, w, i, ALL), _mm512_loadu_ps(x + i), a0);
        i += 16;
        if (i + 16 <= n) {
            a1 = _mm512_fmadd_ps(load16(kind, w, i, ALL), _mm512_loadu_ps(x + i), a1);
            i += 16;
            if (i + 16 <= n) {
                a2 = _mm512_fmadd_ps(load16(kind, w, i, ALL), _mm512_loadu_ps(x + i), a2);
                i += 16;
            }
        }
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        a3 = _mm512_fmadd_ps(load16(kind, w, i, m), _mm512_maskz_loadu_ps(m, x + i), a3);
    }
    return reduce4(a0, a1, a2, a3);
}

float qp_f32_vec_dot_avx512(const void *w, const float *x, int64_t n) {
    return dot_kind(K_F32, w, x, n);
}
float qp_f16_vec_dot_avx512(const void *w, const float *x, int64_t n) {
    return dot_kind(K_F16, w, x, n);
}
float qp_bf16_vec_dot_avx512(const void *w, const float *x, int64_t n) {
    return dot_kind(K_BF16, w, x, n);
}

/* ---- one F32 row against several activation vectors ---------------------------------------
 * Six vectors per pass (24 accumulators + the row chunk + one temporary fit the 32 zmm
 * registers); each vector's accumulators see exactly the operations of dot_kind(K_F32). */
#define NT 6
QP_INLINE void dotn(int nt, const float *w, const float *x, size_t ldx, int64_t n, float *out) {
    __m512 a[NT][4];
    for (int t = 0; t < nt; t++)
        for (int j = 0; j < 4; j++) a[t][j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int j = 0; j < 4; j++) {
            __m512 wj = _mm512_loadu_ps(w + i + 16 * j);
            for (int t = 0; t < nt; t++)
                a[t][j] = _mm512_fmadd_ps(wj, _mm512_loadu_ps(x + (size_t)t * ldx + i + 16 * j),
                                          a[t][j]);
        }
    }
    for (int j = 0; j < 3 && i + 16 <= n; j++, i += 16) {
        __m512 wj = _mm512_loadu_ps(w + i);
        for (int t = 0; t < nt; t++)
            a[t][j] = _mm512_fmadd_ps(wj, _mm512_loadu_ps(x + (size_t)t * ldx + i), a[t][j]);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 wj = _mm512_maskz_loadu_ps(m, w + i);
        for (int t = 0; t < nt; t++)
            a[t][3] = _mm512_fmadd_ps(wj, _mm512_maskz_loadu_ps(m, x + (size_t)t * ldx + i),
                                      a[t][3]);
    }
    for (int t = 0; t < nt; t++) out[t] = reduce4(a[t][0], a[t][1], a[t][2], a[t][3]);
}

void qp_f32_dot_multi_avx512(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n,
                             float *y, size_t ldy) {
    float o[NT];
    int64_t t = 0;
    for (; t + NT <= nx; t += NT) {
        dotn(NT, w, x + (size_t)t * ldx, ldx, n, o);
        for (int k = 0; k < NT; k++) y[(size_t)(t + k) * ldy] = o[k];
    }
    int64_t r = nx - t;
    if (r == 0) return;
    switch (r) { /* constant counts, so the accumulators stay in registers */
    case 1: dotn(1, w, x + (size_t)t * ldx, ldx, n, o); break;
    case 2: dotn(2, w, x + (size_t)t * ldx, ldx, n, o); break;
    case 3: dotn(3, w, x + (size_t)t * ldx, ldx, n, o); break;
    case 4: dotn(4, w, x + (size_t)t * ldx, ldx, n, o); break;
    default: dotn(5, w, x + (size_t)t * ldx, ldx, n, o); break;
    }
    for (int64_t k = 0; k < r; k++) y[(size_t)(t + k) * ldy] = o[k];
}

/* Two F32 rows against several vectors: 2 rows x 3 vectors per pass (24 accumulators), half the
 * activation loads per multiply-add of the one-row kernel; each (row, vector) pair sees exactly
 * the operations of dot_kind(K_F32). */
QP_INLINE void dot2n(int nt, const float *w0, const float *w1, const float *x, size_t ldx,
                     int64_t n, float *o0, float *o1) {
    __m512 a[2][3][4];
    for (int r = 0; r < 2; r++)
        for (int t = 0; t < nt; t++)
            for (int j = 0; j < 4; j++) a[r][t][j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int j = 0; j < 4; j++) {
            __m512 v0 = _mm512_loadu_ps(w0 + i + 16 * j), v1 = _mm512_loadu_ps(w1 + i + 16 * j);
            for (int t = 0; t < nt; t++) {
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + i + 16 * j);
                a[0][t][j] = _mm512_fmadd_ps(v0, xv, a[0][t][j]);
                a[1][t][j] = _mm512_fmadd_ps(v1, xv, a[1][t][j]);
            }
        }
    }
    for (int j = 0; j < 3 && i + 16 <= n; j++, i += 16) {
        __m512 v0 = _mm512_loadu_ps(w0 + i), v1 = _mm512_loadu_ps(w1 + i);
        for (int t = 0; t < nt; t++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + i);
            a[0][t][j] = _mm512_fmadd_ps(v0, xv, a[0][t][j]);
            a[1][t][j] = _mm512_fmadd_ps(v1, xv, a[1][t][j]);
        }
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v0 = _mm512_maskz_loadu_ps(m, w0 + i), v1 = _mm512_maskz_loadu_ps(m, w1 + i);
        for (int t = 0; t < nt; t++) {
            __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)t * ldx + i);
            a[0][t][3] = _mm512_fmadd_ps(v0, xv, a[0][t][3]);
            a[1][t][3] = _mm512_fmadd_ps(v1, xv, a[1][t][3]);
        }
    }
    for (int t = 0; t < nt; t++) {
        o0[t] = reduce4(a[0][t][0], a[0][t][1], a[0][t][2], a[0][t][3]);
        o1[t] = reduce4(a[1][t][0], a[1][t][1], a[1][t][2], a[1][t][3]);
    }
}

void qp_f32_dot_multi2_avx512(const float *w0, const float *w1, const float *x, size_t ldx,
                              int64_t nx, int64_t n, float *y0, float *y1, size_t ldy) {
    float o0[3], o1[3];
    int64_t t = 0;
    for (; t + 3 <= nx; t += 3) {
        dot2n(3, w0, w1, x + (size_t)t * ldx, ldx, n, o0, o1);
        for (int k = 0; k < 3; k++) {
            y0[(size_t)(t + k) * ldy] = o0[k];
            y1[(size_t)(t + k) * ldy] = o1[k];
        }
    }
    int64_t r = nx - t;
    if (r == 0) return;
    if (r == 1) dot2n(1, w0, w1, x + (size_t)t * ldx, ldx, n, o0, o1);
    else dot2n(2, w0, w1, x + (size_t)t * ldx, ldx, n, o0, o1);
    for (int64_t k = 0; k < r; k++) {
        y0[(size_t)(t + k) * ldy] = o0[k];
        y1[(size_t)(t + k) * ldy] = o1[k];
    }
}

/* ---- F16 rows against F16 activations (plain_kernels.h "Fast path") -----------------
 * Four 16-lane accumulators: a[k] lane j is lane 16k + j of the 64; the partial last step by
 * masked (zeroing) loads, whose +0 products change nothing (a lane never holds -0). */
/* a[l] + a[l + h] for h = 32, 16 across the registers, 8 across the halves, then 4, 2, 1 */
QP_INLINE float hdot_reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    __m512 c = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
    __m256 d = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
    __m128 e = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
    e = _mm_add_ps(e, _mm_movehl_ps(e, e));
    e = _mm_add_ss(e, _mm_shuffle_ps(e, e, 1));
    return _mm_cvtss_f32(e);
}

/* the first min(left, 16) lanes */
QP_INLINE __mmask16 lanes_mask(int64_t left) {
    if (left >= 16) return ALL;
    return (__mmask16)((1u << left) - 1u);
}

/* FMA: a product of two F16 values is exact in F32 */
static float hdot_f16(const uint8_t *w, const uint8_t *x, int64_t n) {
    __m512 a[4];
    for (int k = 0; k < 4; k++) a[k] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; k++)
            a[k] = _mm512_fmadd_ps(load16(K_F16, w, i + 16 * k, ALL), load16(K_F16, x, i + 16 * k, ALL),
                                   a[k]);
    for (int k = 0; k < 4 && i + 16 * k < n; k++) {
        const int64_t left = n - i - 16 * k;
        const __mmask16 m = lanes_mask(left);
        a[k] = _mm512_fmadd_ps(load16(K_F16, w, i + 16 * k, m), load16(K_F16, x, i + 16 * k, m), a[k]);
    }
    return hdot_reduce4(a[0], a[1], a[2], a[3]);
}

float qp_f16_dot_f16_avx512(const void *w, const void *x, int64_t n) { return hdot_f16(w, x, n); }


