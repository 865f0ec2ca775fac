/* Rope frequencies and YaRN (core/rope.h). */
#include "core/rope.h"

#include <math.h>

#define QP_PI 3.14159265358979323846

static double correction_dim(double rotations, int64_t dim, double theta, double orig_max_pos) {
    return ((double)dim * log(orig_max_pos / (rotations * 2.0 * QP_PI))) / (2.0 * log(theta));
}

double qp_rope_inv_freq(double theta, int64_t dim, const qp_rope_yarn *y, int64_t i) {
    double extrapolation = 1.0 / pow(theta, (double)(2 * i) / (double)dim);
    if (!y || !(y->factor > 0.0)) return extrapolation;
    double beta_fast = y->beta_fast > 0.0 ? y->beta_fast : 32.0;
    double beta_slow = y->beta_slow > 0.0 ? y->beta_slow : 1.0;
    double orig = (double)y->orig_max_pos;
    /* find_correction_range with truncate=True */
    double low = floor(correction_dim(beta_fast, dim, theta, orig));
    double high = ceil(correction_dim(beta_slow, dim, theta, orig));
    if (low < 0.0) low = 0.0;
    if (high > (double)(dim - 1)) high = (double)(dim - 1);
    if (low == high) high += 0.001;
    double ramp = ((double)i - low) / (high - low);
    ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
    double extrapolation_factor = 1.0 - ramp;
    double interpolation = extrapolation / y->factor;
    return interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

double qp_rope_attention_factor(const qp_rope_yarn *y) {
    if (!y || !(y->factor > 1.0)) return 1.0;
    return 0.1 * log(y->factor) + 1.0;
}

double qp_rope_llama3_divisor(double theta, int64_t dim, const qp_rope_llama3 *r, int64_t i) {
    if (!r || !(r->factor > 0.0)) return 1.0;
    double wavelen = 2.0 * QP_PI / qp_rope_inv_freq(theta, dim, NULL, i);
    double orig = (double)r->orig_max_pos;
    if (wavelen < orig / r->high_freq_factor) return 1.0;
    if (wavelen > orig / r->low_freq_factor) return r->factor;
    double smooth = (orig / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return 1.0 / ((1.0 - smooth) / r->factor + smooth);
}

bool qp_rope_llama3_from_divisors(const float *f, double theta, int64_t dim, qp_rope_llama3 *out) {
    qp_rope_llama3 r = {0.0, 1.0, 4.0, 8192};
    for (int64_t i = 0; i < dim / 2; i++)
        if ((double)f[i] > r.factor) r.factor = (double)f[i];
    if (!(r.factor > 1.0) || !isfinite(r.factor)) return false;
    for (int64_t i = 0; i < dim / 2; i++) {
        double d = (double)f[i];
        if (!(d > 1.0 + 1e-6 && d < r.factor * (1.0 - 1e-6))) continue;
        double smooth = (1.0 / d - 1.0 / r.factor) / (1.0 - 1.0 / r.factor);
        double wavelen = 2.0 * QP_PI / qp_rope_inv_freq(theta, dim, NULL, i);
        double orig = round(wavelen * (smooth * (r.high_freq_factor - r.low_freq_factor) + r.low_freq_factor));
        if (!(orig >= 1.0 && orig <= 1e12)) return false;
        r.orig_max_pos = (int64_t)orig;
        break;
    }
    for (int64_t i = 0; i < dim / 2; i++)
        if (fabs(qp_rope_llama3_divisor(theta, dim, &r, i) - (double)f[i]) > 1e-5 * (double)f[i]) return false;
    *out = r;
    return true;
}
