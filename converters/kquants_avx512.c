/* AVX-512 Q4_K / Q6_K quantizers: the AVX2 kernels of converters/kquants_avx2.c with 16 lanes
 * (16 consecutive 256-blocks per group) and mask registers instead of blend masks. Same
 * construction and the same guarantee: each lane performs exactly the scalar reference's float
 * operations in the same order (no FMA: -ffp-contract=off; branches become mask blends with the
 * same predicates), so the bytes equal quantize_row_q4_K_ref / q6_K_ref (peer test at every level).
 * Generated from the AVX2 file by a mechanical translation; keep the two in step. */
#include <immintrin.h>
#include <string.h>

#include "converters/encodings_internal.h"
#include "converters/simd_kernels.h"

#define QK_K 256
#define LANES 16

typedef __m512 V;
typedef __m512i VI;
typedef __mmask16 M;

static inline V vset(float f) { return _mm512_set1_ps(f); }
static inline V vblend(V a, V b, M m) { return _mm512_mask_blend_ps(m, a, b); } /* m ? b : a */
static inline VI iblend(VI a, VI b, M m) { return _mm512_mask_blend_epi32(m, a, b); }
static inline V vabs(V x) { return _mm512_abs_ps(x); }
static inline V vneg(V x) { return _mm512_xor_ps(vset(-0.0f), x); }
static inline VI vnearest(V f) {
    VI i = _mm512_castps_si512(_mm512_add_ps(f, vset(12582912.f)));
    return _mm512_sub_epi32(_mm512_and_si512(i, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x400000));
}
static inline VI vclamp(VI l, int lo, int hi) {
    return _mm512_max_epi32(_mm512_set1_epi32(lo), _mm512_min_epi32(_mm512_set1_epi32(hi), l));
}
static inline V vcvt(VI i) { return _mm512_cvtepi32_ps(i); }
#define LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define GT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)
#define EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)

/* load lane k = x + blk[k]*256 + off .. for `cnt` consecutive elements into xt[cnt] */
static void transpose_in(const float *x, int nblk, V *xt) {
    float tmp[LANES];
    for (int i = 0; i < QK_K; i++) {
        for (int k = 0; k < LANES; k++) tmp[k] = x[(k < nblk ? k : nblk - 1) * QK_K + i];
        xt[i] = _mm512_loadu_ps(tmp);
    }
}

/* ---- Q4_K ------------------------------------------------------------------------------------- */
static V make_qkx2_v(const V *x, const V *w, VI *L, V *the_min, VI *Laux) {
    const int nmax = 15, nstep = 20;
    const float rmin = -1.f, rdelta = 0.1f;
    V min = x[0], max = x[0];
    V sum_w = w[0];
    V sum_x = _mm512_mul_ps(sum_w, x[0]);
    for (int i = 1; i < 32; ++i) {
        min = vblend(min, x[i], LT(x[i], min));
        max = vblend(max, x[i], GT(x[i], max));
        sum_w = _mm512_add_ps(sum_w, w[i]);
        sum_x = _mm512_add_ps(sum_x, _mm512_mul_ps(w[i], x[i]));
    }
    const V zero = _mm512_setzero_ps();
    min = vblend(min, zero, GT(min, zero));
    const V min0 = min;
    const M eq = EQ(max, min);
    const V range = _mm512_sub_ps(max, min);
    V iscale = _mm512_div_ps(vset((float)nmax), range);
    V scale = _mm512_div_ps(vset(1.0f), iscale);
    V best_error = zero;
    for (int i = 0; i < 32; ++i) {
        VI l = vclamp(vnearest(_mm512_mul_ps(iscale, _mm512_sub_ps(x[i], min))), 0, nmax);
        L[i] = l;
        V diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(scale, vcvt(l)), min), x[i]);
        diff = _mm512_mul_ps(diff, diff);
        best_error = _mm512_add_ps(best_error, _mm512_mul_ps(w[i], diff));
    }
    for (int is = 0; is <= nstep; ++is) {
        const float c = rmin + rdelta * (float)is + (float)nmax;
        /* (max - min) with the current min: the reference updates min as it finds better fits */
        iscale = _mm512_div_ps(vset(c), _mm512_sub_ps(max, min));
        V sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < 32; ++i) {
            VI l = vclamp(vnearest(_mm512_mul_ps(iscale, _mm512_sub_ps(x[i], min))), 0, nmax);
            Laux[i] = l;
            const V lf = vcvt(l);
            const V wl = _mm512_mul_ps(w[i], lf);
            sum_l = _mm512_add_ps(sum_l, wl);
            sum_l2 = _mm512_add_ps(sum_l2, _mm512_mul_ps(wl, lf));
            sum_xl = _mm512_add_ps(sum_xl, _mm512_mul_ps(wl, x[i]));
        }
        const V D = _mm512_sub_ps(_mm512_mul_ps(sum_w, sum_l2), _mm512_mul_ps(sum_l, sum_l));
        const M dpos = GT(D, zero);
        if (dpos == 0) continue;
        V this_scale = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_w, sum_xl), _mm512_mul_ps(sum_x, sum_l)), D);
        V this_min = _mm512_div_ps(_mm512_sub_ps(_mm512_mul_ps(sum_l2, sum_x), _mm512_mul_ps(sum_l, sum_xl)), D);
        const M pm = GT(this_min, zero);
        this_min = vblend(this_min, zero, pm);
        this_scale = vblend(this_scale, _mm512_div_ps(sum_xl, sum_l2), pm);
        V cur_error = zero;
        for (int i = 0; i < 32; ++i) {
            V diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(this_scale, vcvt(Laux[i])), this_min), x[i]);
            diff = _mm512_mul_ps(diff, diff);
            cur_error = _mm512_add_ps(cur_error, _mm512_mul_ps(w[i], diff));
        }
        const M upd = (M)(dpos & LT(cur_error, best_error));
        if (upd == 0) continue;
        for (int i = 0; i < 32; ++i) L[i] = iblend(L[i], Laux[i], upd);
        best_error = vblend(best_error, cur_error, upd);
        scale = vblend(scale, this_scale, upd);
        min = vblend(min, this_min, upd);
    }
    /* lanes with max == min: L = 0, scale 0, the_min = -min */
    for (int i = 0; i < 32; ++i) L[i] = iblend(L[i], _mm512_setzero_si512(), eq);
    scale = vblend(scale, zero, eq);
    min = vblend(min, min0, eq);
    *the_min = vneg(min);
    return scale;
}

static void q4k_group(const float *x, uint8_t *y, int nblk) {
    V xt[QK_K];
    VI L[QK_K];
    VI Laux[32];
    V w[32];
    V scales[8], mins[8];
    transpose_in(x, nblk, xt);
    const V zero = _mm512_setzero_ps();
    V max_scale = zero, max_min = zero;
    for (int j = 0; j < 8; ++j) {
        const V *xs = xt + 32 * j;
        V sum_x2 = zero;
        for (int l = 0; l < 32; ++l) sum_x2 = _mm512_add_ps(sum_x2, _mm512_mul_ps(xs[l], xs[l]));
        const V av_x = _mm512_sqrt_ps(_mm512_div_ps(sum_x2, vset(32.0f)));
        for (int l = 0; l < 32; ++l) w[l] = _mm512_add_ps(av_x, vabs(xs[l]));
        scales[j] = make_qkx2_v(xs, w, L + 32 * j, &mins[j], Laux);
        max_scale = vblend(max_scale, scales[j], GT(scales[j], max_scale));
        max_min = vblend(max_min, mins[j], GT(mins[j], max_min));
    }
    const V inv_scale = vblend(zero, _mm512_div_ps(vset(63.f), max_scale), GT(max_scale, zero));
    const V inv_min = vblend(zero, _mm512_div_ps(vset(63.f), max_min), GT(max_min, zero));
    int32_t ls[8][LANES], lm[8][LANES];
    for (int j = 0; j < 8; ++j) {
        _mm512_storeu_si512((void *)ls[j], vnearest(_mm512_mul_ps(inv_scale, scales[j])));
        _mm512_storeu_si512((void *)lm[j], vnearest(_mm512_mul_ps(inv_min, mins[j])));
    }
    float dvf[LANES], mvf[LANES], dback[LANES], mback[LANES];
    _mm512_storeu_ps(dvf, _mm512_div_ps(max_scale, vset(63.f)));
    _mm512_storeu_ps(mvf, _mm512_div_ps(max_min, vset(63.f)));
    uint8_t sc[LANES][12];
    uint16_t dh[LANES], mh[LANES];
    for (int k = 0; k < LANES; k++) {
        memset(sc[k], 0, 12);
        for (int j = 0; j < 8; ++j) {
            uint8_t a = (uint8_t)ls[j][k], b = (uint8_t)lm[j][k];
            a = QP_MIN(63, a);
            b = QP_MIN(63, b);
            if (j < 4) {
                sc[k][j] = a;
                sc[k][j + 4] = b;
            } else {
                sc[k][j + 4] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
                sc[k][j - 4] |= (uint8_t)((a >> 4) << 6);
                sc[k][j] |= (uint8_t)((b >> 4) << 6);
            }
        }
        dh[k] = qp_fp32_to_fp16(dvf[k]);
        mh[k] = qp_fp32_to_fp16(mvf[k]);
        dback[k] = qp_fp16_to_fp32(dh[k]);
        mback[k] = qp_fp16_to_fp32(mh[k]);
    }
    const V dv = _mm512_loadu_ps(dback), mv = _mm512_loadu_ps(mback);
    for (int j = 0; j < 8; ++j) {
        int32_t s32[LANES], m32[LANES];
        for (int k = 0; k < LANES; k++) {
            const uint8_t *q = sc[k];
            if (j < 4) {
                s32[k] = q[j] & 63;
                m32[k] = q[j + 4] & 63;
            } else {
                s32[k] = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
                m32[k] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
            }
        }
        const V d = _mm512_mul_ps(dv, vcvt(_mm512_loadu_si512((const void *)s32)));
        const M dz = EQ(d, zero);
        if (dz == 0xFFFF) continue;
        const V dm = _mm512_mul_ps(mv, vcvt(_mm512_loadu_si512((const void *)m32)));
        for (int ii = 0; ii < 32; ++ii) {
            VI l = vclamp(vnearest(_mm512_div_ps(_mm512_add_ps(xt[32 * j + ii], dm), d)), 0, 15);
            L[32 * j + ii] = iblend(l, L[32 * j + ii], dz);
        }
    }
    int32_t lt[QK_K][LANES];
    for (int i = 0; i < QK_K; i++) _mm512_storeu_si512((void *)lt[i], L[i]);
    for (int k = 0; k < nblk; k++) {
        uint8_t *b = y + (size_t)k * 144;
        qp_store_u16le(b, dh[k]);
        qp_store_u16le(b + 2, mh[k]);
        memcpy(b + 4, sc[k], 12);
        uint8_t *q = b + 16;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(lt[j + l][k] | (lt[j + l + 32][k] << 4));
            q += 32;
        }
    }
}

void qp_q4k_quantize_avx512(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i += LANES) {
        const int cnt = (int)(nb - i < LANES ? nb - i : LANES);
        if (cnt == 1) qp_q4k_quantize_block_ref(x + i * QK_K, y + i * 144);
        else q4k_group(x + i * QK_K, y + i * 144, cnt);
    }
}

/* ---- Q6_K ------------------------------------------------------------------------------------- */
static V make_qx_v(const V *x, VI *L) {
    const int nmax = 32;
    const V zero = _mm512_setzero_ps();
    V max = zero, amax = zero;
    for (int i = 0; i < 16; ++i) {
        const V ax = vabs(x[i]);
        const M m = GT(ax, amax);
        amax = vblend(amax, ax, m);
        max = vblend(max, x[i], m);
    }
    const M allzero = LT(amax, vset(1e-15f));
    V iscale = _mm512_div_ps(vset((float)-nmax), max);
    V sumlx = zero, suml2 = zero;
    VI Lt[16];
    for (int i = 0; i < 16; ++i) {
        const VI l = vclamp(vnearest(_mm512_mul_ps(iscale, x[i])), -nmax, nmax - 1);
        L[i] = _mm512_add_epi32(l, _mm512_set1_epi32(nmax));
        const V lf = vcvt(l);
        const V w = _mm512_mul_ps(x[i], x[i]);
        sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w, x[i]), lf));
        suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w, lf), lf));
    }
    V scale = vblend(_mm512_div_ps(sumlx, suml2), zero, EQ(suml2, zero));
    V best = _mm512_mul_ps(scale, sumlx);
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float c = -((float)nmax + 0.1f * (float)is);
        iscale = _mm512_div_ps(vset(c), max);
        sumlx = suml2 = zero;
        for (int i = 0; i < 16; ++i) {
            const VI l = vclamp(vnearest(_mm512_mul_ps(iscale, x[i])), -nmax, nmax - 1);
            Lt[i] = l;
            const V lf = vcvt(l);
            const V w = _mm512_mul_ps(x[i], x[i]);
            sumlx = _mm512_add_ps(sumlx, _mm512_mul_ps(_mm512_mul_ps(w, x[i]), lf));
            suml2 = _mm512_add_ps(suml2, _mm512_mul_ps(_mm512_mul_ps(w, lf), lf));
        }
        const M upd = (M)(GT(suml2, zero) & GT(_mm512_mul_ps(sumlx, sumlx), _mm512_mul_ps(best, suml2)));
        if (upd == 0) continue;
        for (int i = 0; i < 16; ++i) L[i] = iblend(L[i], _mm512_add_epi32(Lt[i], _mm512_set1_epi32(nmax)), upd);
        const V s = _mm512_div_ps(sumlx, suml2);
        scale = vblend(scale, s, upd);
        best = vblend(best, _mm512_mul_ps(s, sumlx), upd);
    }
    for (int i = 0; i < 16; ++i) L[i] = iblend(L[i], _mm512_setzero_si512(), allzero);
    return vblend(scale, zero, allzero);
}

static void q6k_group(const float *x, uint8_t *y, int nblk) {
    V xt[QK_K];
    VI L[QK_K];
    V scales[16];
    transpose_in(x, nblk, xt);
    const V zero = _mm512_setzero_ps();
    V max_scale = zero, max_abs_scale = zero;
    for (int ib = 0; ib < 16; ++ib) {
        scales[ib] = make_qx_v(xt + 16 * ib, L + 16 * ib);
        const V abs_scale = vabs(scales[ib]);
        const M m = GT(abs_scale, max_abs_scale);
        max_abs_scale = vblend(max_abs_scale, abs_scale, m);
        max_scale = vblend(max_scale, scales[ib], m);
    }
    float mas[LANES];
    _mm512_storeu_ps(mas, max_abs_scale);
    const V iscale = _mm512_div_ps(vset(-128.f), max_scale);
    float inv[LANES], dback[LANES];
    _mm512_storeu_ps(inv, _mm512_div_ps(vset(1.0f), iscale));
    uint16_t dh[LANES];
    for (int k = 0; k < LANES; k++) {
        dh[k] = qp_fp32_to_fp16(inv[k]);
        dback[k] = qp_fp16_to_fp32(dh[k]);
    }
    const V dv = _mm512_loadu_ps(dback);
    int32_t sc[16][LANES];
    for (int ib = 0; ib < 16; ++ib) {
        VI s = _mm512_min_epi32(_mm512_set1_epi32(127), vnearest(_mm512_mul_ps(iscale, scales[ib])));
        s = _mm512_srai_epi32(_mm512_slli_epi32(s, 24), 24); /* (int8_t) */
        _mm512_storeu_si512((void *)sc[ib], s);
        const V d = _mm512_mul_ps(dv, vcvt(s));
        const M dz = EQ(d, zero);
        if (dz == 0xFFFF) continue;
        for (int ii = 0; ii < 16; ++ii) {
            VI l = vclamp(vnearest(_mm512_div_ps(xt[16 * ib + ii], d)), -32, 31);
            l = _mm512_add_epi32(l, _mm512_set1_epi32(32));
            L[16 * ib + ii] = iblend(l, L[16 * ib + ii], dz);
        }
    }
    int32_t lt[QK_K][LANES];
    for (int i = 0; i < QK_K; i++) _mm512_storeu_si512((void *)lt[i], L[i]);
    for (int k = 0; k < nblk; k++) {
        uint8_t *b = y + (size_t)k * 210;
        if (mas[k] < 1e-15f) {
            memset(b, 0, 210);
            continue;
        }
        uint8_t *ql = b, *qh = b + 128;
        for (int ib = 0; ib < 16; ib++) b[192 + ib] = (uint8_t)(int8_t)sc[ib][k];
        qp_store_u16le(b + 208, dh[k]);
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const int l0 = lt[j + l][k], l1 = lt[j + l + 32][k], l2 = lt[j + l + 64][k],
                          l3 = lt[j + l + 96][k];
                ql[l] = (uint8_t)((l0 & 0xF) | ((l2 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((l1 & 0xF) | ((l3 & 0xF) << 4));
                qh[l] = (uint8_t)((l0 >> 4) | ((l1 >> 4) << 2) | ((l2 >> 4) << 4) | ((l3 >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

void qp_q6k_quantize_avx512(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i += LANES) {
        const int cnt = (int)(nb - i < LANES ? nb - i : LANES);
        if (cnt == 1) qp_q6k_quantize_block_ref(x + i * QK_K, y + i * 210);
        else q6k_group(x + i * QK_K, y + i * 210, cnt);
    }
}
