/* llama.cpp's k-quant scale searches (encodings/kquants_fit.h, enc_kquants.md "Scale fitting").
 * Every float operation in the reference's order; no fused multiply-add (-ffp-contract=off). */
#include <math.h>
#include <string.h>

#include "encodings/encodings_internal.h"
#include "encodings/kquants_fit.h"

#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) { return QP_MAX(lo, QP_MIN(hi, v)); }

/* The first x of largest |x| (0 when every |x| is 0 or NaN). */
static float signed_absmax(int n, const float *x) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

/* weighted sums of one candidate scale for qp_fit_qx */
static void qx_sums(int n, int nmax, const float *x, const float *qw, float iscale, float *sumlx,
                    float *suml2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; ++i) {
        int l = clamp_int(qp_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        float w = qw ? qw[i] : x[i] * x[i];
        a += w * x[i] * (float)l;
        b += w * (float)l * (float)l;
    }
    *sumlx = a;
    *suml2 = b;
}

float qp_fit_qx(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float max = signed_absmax(n, x);
    if (fabsf(max) < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    for (int i = 0; i < n; ++i)
        L[i] = (int8_t)(nmax + clamp_int(qp_nearest_int(iscale * x[i]), -nmax, nmax - 1));
    float sumlx, suml2;
    qx_sums(n, nmax, x, qw, iscale, &sumlx, &suml2);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        qx_sums(n, nmax, x, qw, iscale, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + clamp_int(qp_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float qp_fit_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = signed_absmax(n, x);
    if (fabsf(max) < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = clamp_int(qp_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int new_l = clamp_int(qp_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* weighted error of scale*L + min against x (squared, or absolute with use_mad) */
static float fit_error(int n, const float *x, const float *weights, const uint8_t *L, float scale,
                       float min, bool use_mad) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights ? weights[i] : x[i] * x[i];
        err += w * diff;
    }
    return err;
}

/* The shared search of qkx2 / qkx3: is = 0..nstep candidate scales, each fitted by weighted least
 * squares; code_of picks the codes of a candidate (they differ only there). */
typedef int (*code_fn)(float v, int nmax);
static int code_qkx2(float v, int nmax) { return clamp_int(qp_nearest_int(v), 0, nmax); }
static int code_qkx3(float v, int nmax) { return v > 0 ? qp_nearest_int(QP_MIN(v, (float)nmax)) : 0; }

static float fit_qkx(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                     float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                     bool use_mad, code_fn code_of) {
    float min = x[0], max = x[0];
    float sum_w = weights ? weights[0] : x[0] * x[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights ? weights[i] : x[i] * x[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (code_of == code_qkx2 ? max == min : max <= min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)clamp_int(qp_nearest_int(iscale * (x[i] - min)), 0, nmax);
    float best_error = fit_error(n, x, weights, L, scale, min, use_mad);
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = code_of(iscale * (x[i] - min), nmax);
            Laux[i] = (uint8_t)l;
            float w = weights ? weights[i] : x[i] * x[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = fit_error(n, x, weights, Laux, this_scale, this_min, use_mad);
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

float qp_fit_qkx2(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                  uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    return fit_qkx(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad, code_qkx2);
}

float qp_fit_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                  uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    return fit_qkx(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad, code_qkx3);
}

float qp_fit_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = QP_MAX(max, x[i]);
    if (max < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)qp_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * (float)L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = QP_MIN(nmax, qp_nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = QP_MIN(nmax, qp_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = QP_MIN(nmax, qp_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
