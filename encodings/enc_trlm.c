/* TRLM_T2: the ternary rows of TRLM v1 (readers/trlm.md, "TERNARY").
 *
 * Element i of a row is the 2-bit code q+1 (0 -> -1, 1 -> 0, 2 -> +1; 3 is invalid) at bits
 * 2*(i%4)+1 : 2*(i%4) of byte i/4. A whole tensor is the codes of all rows followed by one f32
 * scale (the trailer), so w = (code - 1) * scale. Row functions work at unit scale; the runtime
 * multiplies by the trailer scale (QP_ENC_FLAG_EXT_SCALE). */
#include <math.h>
#include <stdio.h>

#include "encodings/encodings_internal.h"

static inline int t2_code(const uint8_t *p, int64_t i) { return (p[i >> 2] >> (2 * (i & 3))) & 3; }

float qp_trlm_t2_scale(const float *w, int64_t n) {
    double sum = 0.0;
    int64_t nz = 0;
    for (int64_t i = 0; i < n; i++) {
        if (w[i] != 0.0f && w[i] == w[i]) {
            sum += fabs((double)w[i]);
            nz++;
        }
    }
    if (nz == 0) return 0.0f;
    float s = (float)(sum / (double)nz);
    return isfinite(s) ? s : 0.0f;
}

int8_t qp_trlm_t2_level(float v) {
    if (!(v == v)) return 0;
    if (v >= 1.5f) return 1;
    if (v <= -1.5f) return -1;
    int q = qp_nearest_int(v);
    return (int8_t)(q > 1 ? 1 : q < -1 ? -1 : q);
}

void qp_trlm_t2_pack(const int8_t *q, uint8_t *y, int64_t n) {
    for (int64_t i = 0; i < (n + 3) / 4; i++) y[i] = 0x55; /* every code 1 (= 0) */
    for (int64_t i = 0; i < n; i++) {
        int sh = (int)(2 * (i & 3));
        y[i >> 2] = (uint8_t)((y[i >> 2] & ~(3u << sh)) | ((unsigned)(q[i] + 1) << sh));
    }
}

void qp_trlm_t2_quantize_ref(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t b = 0; b < n / 4; b++) {
        unsigned byte = 0;
        for (int j = 0; j < 4; j++)
            byte |= (unsigned)(qp_trlm_t2_level(x[4 * b + j]) + 1) << (2 * j);
        p[b] = (uint8_t)byte;
    }
}

void qp_trlm_t2_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        int c = t2_code(p, i);
        y[i] = c == 2 ? 1.0f : c == 0 ? -1.0f : 0.0f;
    }
}

float qp_trlm_t2_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        int c = t2_code(p, i);
        if (c == 2) s += x[i];
        else if (c == 0) s -= x[i];
    }
    return s;
}

bool qp_trlm_t2_validate(const void *x, int64_t n, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        if (t2_code(p, i) == 3) {
            if (why) snprintf(why, why_len, "element %lld has the invalid ternary code 3", (long long)i);
            return false;
        }
    }
    return true;
}

void qp_trlm_t2_quantize_tensor(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    float s = qp_trlm_t2_scale(x, n);
    for (int64_t b = 0; b < n / 4; b++) {
        unsigned byte = 0;
        for (int j = 0; j < 4; j++) {
            float v = s > 0.0f ? x[4 * b + j] / s : 0.0f;
            byte |= (unsigned)(qp_trlm_t2_level(v) + 1) << (2 * j);
        }
        p[b] = (uint8_t)byte;
    }
    qp_store_f32le(p + n / 4, s);
}

void qp_trlm_t2_dequantize_tensor(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    float s = qp_load_f32le(p + n / 4);
    qp_trlm_t2_dequantize(x, y, n);
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}
