/* The Q4_K / Q6_K quantizers vectorized ACROSS blocks, written once for every vector width and
 * included by encodings/kquants_avx2.c (8 lanes) and kquants_avx512.c (16 lanes). Lane k of
 * every vector belongs to block k of a group of up to LANES consecutive 256-blocks, and each lane
 * performs exactly the scalar reference's float operations in the same order (same IEEE
 * mul/add/div/sqrt, no FMA: the build uses -ffp-contract=off; branches become compare masks and
 * blends with the same predicates). So the bytes equal quantize_row_q4_K_ref / q6_K_ref at every
 * level (tests/peer/test_enc_vs_ggml.c, tests/unit/test_enc_simd.c). f16 conversions and the final
 * bit packing run per lane through the scalar helpers. Partial groups repeat the last block in the
 * unused lanes.
 *
 * The including file defines, before including this header (once per translation unit):
 *   LANES; V (LANES floats), VI (LANES int32), M (a lane mask: a compare result);
 *   float ops vzero vset vload vstore vadd vsub vmul vdiv vsqrt vabs vneg vcvt (VI -> V)
 *   vblend(a, b, m) / iblend(a, b, m) = m ? b : a, compares LT GT EQ (ordered, quiet) -> M,
 *   mand(m1, m2), mnone(m) (no lane set), mall(m) (every lane set);
 *   int ops izero iset iload istore iadd imin isext8 (low byte sign-extended), vnearest
 *   (qp_nearest_int per lane) and vclamp(l, lo, hi).
 * It defines static q4k_quantize_rows() and q6k_quantize_rows() (whole rows, n a multiple of 256).
 */
#include <string.h>

#include "encodings/encodings_internal.h"

#define QK_K 256

/* lane k = block min(k, nblk - 1) of x: xt[i] holds element i of every lane's block */
static void transpose_in(const float *x, int nblk, V *xt) {
    float tmp[LANES];
    for (int i = 0; i < QK_K; i++) {
        for (int k = 0; k < LANES; k++) tmp[k] = x[(k < nblk ? k : nblk - 1) * QK_K + i];
        xt[i] = vload(tmp);
    }
}

/* ---- Q4_K ------------------------------------------------------------------------------------- */
/* make_qkx2_quants(32, 15, x, w, L, the_min, Laux, -1, 0.1, 20) of enc_kquants.c per lane */
static V make_qkx2_v(const V *x, const V *w, VI *L, V *the_min, VI *Laux) {
    const int nmax = 15, nstep = 20;
    const float rmin = -1.f, rdelta = 0.1f;
    V min = x[0], max = x[0];
    V sum_w = w[0];
    V sum_x = vmul(sum_w, x[0]);
    for (int i = 1; i < 32; ++i) {
        min = vblend(min, x[i], LT(x[i], min));
        max = vblend(max, x[i], GT(x[i], max));
        sum_w = vadd(sum_w, w[i]);
        sum_x = vadd(sum_x, vmul(w[i], x[i]));
    }
    const V zero = vzero();
    min = vblend(min, zero, GT(min, zero));
    const V min0 = min;
    const M eq = EQ(max, min);
    const V range = vsub(max, min);
    V iscale = vdiv(vset((float)nmax), range);
    V scale = vdiv(vset(1.0f), iscale);
    V best_error = zero;
    for (int i = 0; i < 32; ++i) {
        VI l = vclamp(vnearest(vmul(iscale, vsub(x[i], min))), 0, nmax);
        L[i] = l;
        V diff = vsub(vadd(vmul(scale, vcvt(l)), min), x[i]);
        diff = vmul(diff, diff);
        best_error = vadd(best_error, vmul(w[i], diff));
    }
    for (int is = 0; is <= nstep; ++is) {
        const float c = rmin + rdelta * (float)is + (float)nmax;
        /* (max - min) with the current min: the reference updates min as it finds better fits */
        iscale = vdiv(vset(c), vsub(max, min));
        V sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < 32; ++i) {
            VI l = vclamp(vnearest(vmul(iscale, vsub(x[i], min))), 0, nmax);
            Laux[i] = l;
            const V lf = vcvt(l);
            const V wl = vmul(w[i], lf);
            sum_l = vadd(sum_l, wl);
            sum_l2 = vadd(sum_l2, vmul(wl, lf));
            sum_xl = vadd(sum_xl, vmul(wl, x[i]));
        }
        const V D = vsub(vmul(sum_w, sum_l2), vmul(sum_l, sum_l));
        const M dpos = GT(D, zero);
        if (mnone(dpos)) continue;
        V this_scale = vdiv(vsub(vmul(sum_w, sum_xl), vmul(sum_x, sum_l)), D);
        V this_min = vdiv(vsub(vmul(sum_l2, sum_x), vmul(sum_l, sum_xl)), D);
        const M pm = GT(this_min, zero);
        this_min = vblend(this_min, zero, pm);
        this_scale = vblend(this_scale, vdiv(sum_xl, sum_l2), pm);
        V cur_error = zero;
        for (int i = 0; i < 32; ++i) {
            V diff = vsub(vadd(vmul(this_scale, vcvt(Laux[i])), this_min), x[i]);
            diff = vmul(diff, diff);
            cur_error = vadd(cur_error, vmul(w[i], diff));
        }
        const M upd = mand(dpos, LT(cur_error, best_error));
        if (mnone(upd)) continue;
        for (int i = 0; i < 32; ++i) L[i] = iblend(L[i], Laux[i], upd);
        best_error = vblend(best_error, cur_error, upd);
        scale = vblend(scale, this_scale, upd);
        min = vblend(min, this_min, upd);
    }
    /* lanes with max == min: L = 0, scale 0, the_min = -min */
    for (int i = 0; i < 32; ++i) L[i] = iblend(L[i], izero(), eq);
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
    const V zero = vzero();
    V max_scale = zero, max_min = zero;
    for (int j = 0; j < 8; ++j) {
        const V *xs = xt + 32 * j;
        V sum_x2 = zero;
        for (int l = 0; l < 32; ++l) sum_x2 = vadd(sum_x2, vmul(xs[l], xs[l]));
        const V av_x = vsqrt(vdiv(sum_x2, vset(32.0f)));
        for (int l = 0; l < 32; ++l) w[l] = vadd(av_x, vabs(xs[l]));
        scales[j] = make_qkx2_v(xs, w, L + 32 * j, &mins[j], Laux);
        max_scale = vblend(max_scale, scales[j], GT(scales[j], max_scale));
        max_min = vblend(max_min, mins[j], GT(mins[j], max_min));
    }
    const V inv_scale = vblend(zero, vdiv(vset(63.f), max_scale), GT(max_scale, zero));
    const V inv_min = vblend(zero, vdiv(vset(63.f), max_min), GT(max_min, zero));
    int32_t ls[8][LANES], lm[8][LANES];
    for (int j = 0; j < 8; ++j) {
        istore(ls[j], vnearest(vmul(inv_scale, scales[j])));
        istore(lm[j], vnearest(vmul(inv_min, mins[j])));
    }
    float dvf[LANES], mvf[LANES], dback[LANES], mback[LANES];
    vstore(dvf, vdiv(max_scale, vset(63.f)));
    vstore(mvf, vdiv(max_min, vset(63.f)));
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
    const V dv = vload(dback), mv = vload(mback);
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
        const V d = vmul(dv, vcvt(iload(s32)));
        const M dz = EQ(d, zero);
        if (mall(dz)) continue;
        const V dm = vmul(mv, vcvt(iload(m32)));
        for (int ii = 0; ii < 32; ++ii) {
            VI l = vclamp(vnearest(vdiv(vadd(xt[32 * j + ii], dm), d)), 0, 15);
            L[32 * j + ii] = iblend(l, L[32 * j + ii], dz);
        }
    }
    int32_t lt[QK_K][LANES];
    for (int i = 0; i < QK_K; i++) istore(lt[i], L[i]);
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

static void q4k_quantize_rows(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i += LANES) {
        const int cnt = (int)(nb - i < LANES ? nb - i : LANES);
        if (cnt == 1) qp_q4k_quantize_block_ref(x + i * QK_K, y + i * 144);
        else q4k_group(x + i * QK_K, y + i * 144, cnt);
    }
}

/* ---- Q6_K ------------------------------------------------------------------------------------- */
/* make_qx_quants(16, 32, x, L) of enc_kquants.c per lane */
static V make_qx_v(const V *x, VI *L) {
    const int nmax = 32;
    const V zero = vzero();
    V max = zero, amax = zero;
    for (int i = 0; i < 16; ++i) {
        const V ax = vabs(x[i]);
        const M m = GT(ax, amax);
        amax = vblend(amax, ax, m);
        max = vblend(max, x[i], m);
    }
    const M allzero = LT(amax, vset(1e-15f));
    V iscale = vdiv(vset((float)-nmax), max);
    V sumlx = zero, suml2 = zero;
    VI Lt[16];
    for (int i = 0; i < 16; ++i) {
        const VI l = vclamp(vnearest(vmul(iscale, x[i])), -nmax, nmax - 1);
        L[i] = iadd(l, iset(nmax));
        const V lf = vcvt(l);
        const V w = vmul(x[i], x[i]);
        sumlx = vadd(sumlx, vmul(vmul(w, x[i]), lf));
        suml2 = vadd(suml2, vmul(vmul(w, lf), lf));
    }
    V scale = vblend(vdiv(sumlx, suml2), zero, EQ(suml2, zero));
    V best = vmul(scale, sumlx);
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float c = -((float)nmax + 0.1f * (float)is);
        iscale = vdiv(vset(c), max);
        sumlx = suml2 = zero;
        for (int i = 0; i < 16; ++i) {
            const VI l = vclamp(vnearest(vmul(iscale, x[i])), -nmax, nmax - 1);
            Lt[i] = l;
            const V lf = vcvt(l);
            const V w = vmul(x[i], x[i]);
            sumlx = vadd(sumlx, vmul(vmul(w, x[i]), lf));
            suml2 = vadd(suml2, vmul(vmul(w, lf), lf));
        }
        const M upd = mand(GT(suml2, zero), GT(vmul(sumlx, sumlx), vmul(best, suml2)));
        if (mnone(upd)) continue;
        for (int i = 0; i < 16; ++i) L[i] = iblend(L[i], iadd(Lt[i], iset(nmax)), upd);
        const V s = vdiv(sumlx, suml2);
        scale = vblend(scale, s, upd);
        best = vblend(best, vmul(s, sumlx), upd);
    }
    for (int i = 0; i < 16; ++i) L[i] = iblend(L[i], izero(), allzero);
    return vblend(scale, zero, allzero);
}

static void q6k_group(const float *x, uint8_t *y, int nblk) {
    V xt[QK_K];
    VI L[QK_K];
    V scales[16];
    transpose_in(x, nblk, xt);
    const V zero = vzero();
    V max_scale = zero, max_abs_scale = zero;
    for (int ib = 0; ib < 16; ++ib) {
        scales[ib] = make_qx_v(xt + 16 * ib, L + 16 * ib);
        const V abs_scale = vabs(scales[ib]);
        const M m = GT(abs_scale, max_abs_scale);
        max_abs_scale = vblend(max_abs_scale, abs_scale, m);
        max_scale = vblend(max_scale, scales[ib], m);
    }
    float mas[LANES];
    vstore(mas, max_abs_scale);
    const V iscale = vdiv(vset(-128.f), max_scale);
    float inv[LANES], dback[LANES];
    vstore(inv, vdiv(vset(1.0f), iscale));
    uint16_t dh[LANES];
    for (int k = 0; k < LANES; k++) {
        dh[k] = qp_fp32_to_fp16(inv[k]);
        dback[k] = qp_fp16_to_fp32(dh[k]);
    }
    const V dv = vload(dback);
    int32_t sc[16][LANES];
    for (int ib = 0; ib < 16; ++ib) {
        const VI s = isext8(imin(iset(127), vnearest(vmul(iscale, scales[ib])))); /* (int8_t) */
        istore(sc[ib], s);
        const V d = vmul(dv, vcvt(s));
        const M dz = EQ(d, zero);
        if (mall(dz)) continue;
        for (int ii = 0; ii < 16; ++ii) {
            const VI l = iadd(vclamp(vnearest(vdiv(xt[16 * ib + ii], d)), -32, 31), iset(32));
            L[16 * ib + ii] = iblend(l, L[16 * ib + ii], dz);
        }
    }
    int32_t lt[QK_K][LANES];
    for (int i = 0; i < QK_K; i++) istore(lt[i], L[i]);
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

static void q6k_quantize_rows(const float *x, void *vy, int64_t n) {
    uint8_t *y = vy;
    const int64_t nb = n / QK_K;
    for (int64_t i = 0; i < nb; i += LANES) {
        const int cnt = (int)(nb - i < LANES ? nb - i : LANES);
        if (cnt == 1) qp_q6k_quantize_block_ref(x + i * QK_K, y + i * 210);
        else q6k_group(x + i * QK_K, y + i * 210, cnt);
    }
}
