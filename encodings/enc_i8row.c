/* I8_ROW: int8 rows with f32 scales, for embeddings and output heads (encodings/encodings.md,
 * "I8_ROW"; TRLM I8ROWS tensors are stored in it, readers/trlm.md).
 *
 * Block of 32 elements in 36 bytes: f32 LE scale d, then 32 int8 q (two's complement); w = q * d.
 * quantize_ref: d = max|x| / 127 over the block (f32 division), q = clamp(round_half_even(x / d),
 * -127, 127), an all-zero block is d = 0 and q = 0 (exact). The scale is per 32-element block,
 * not per row: the traits table sizes a row as n / block_elems * block_bytes (linear in n), the
 * runtime steps rows by that size, so a per-row trailer (n + 4 bytes) cannot be described, and a
 * per-block scale keeps the bytes of a tensor independent of how its rows are split into calls. */
#include <math.h>
#include <stdio.h>

#include "encodings/encodings_internal.h"

#define I8ROW_QK QP_QK
#define I8ROW_BYTES QP_I8_ROW_BYTES
/* vec_dot_f32 widens rows up to this many elements on the stack and reuses the F32 dot, so it is
 * bit-identical to dequantize-then-F32-dot at every SIMD level (the runtime's batched path). */
#define I8ROW_STACK_ELEMS 8192

void qp_i8row_quantize_ref(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t b = 0; b < n / I8ROW_QK; b++, x += I8ROW_QK, p += I8ROW_BYTES) {
        float amax = 0.0f;
        for (int j = 0; j < I8ROW_QK; j++) {
            float a = fabsf(x[j]);
            if (a > amax) amax = a; /* NaN never compares greater: ignored */
        }
        float d = amax / 127.0f;
        qp_store_f32le(p, d);
        for (int j = 0; j < I8ROW_QK; j++) {
            int q = 0;
            float v = d > 0.0f ? x[j] / d : 0.0f;
            if (v == v) q = v >= 127.0f ? 127 : v <= -127.0f ? -127 : qp_nearest_int(v);
            p[4 + j] = (uint8_t)(int8_t)q;
        }
    }
}

void qp_i8row_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / I8ROW_QK; b++, p += I8ROW_BYTES, y += I8ROW_QK) {
        float d = qp_load_f32le(p);
        for (int j = 0; j < I8ROW_QK; j++) y[j] = (float)(int8_t)p[4 + j] * d;
    }
}

float qp_i8row_vec_dot(const void *w, const float *x, int64_t n) {
    if (n <= I8ROW_STACK_ELEMS) {
        float buf[I8ROW_STACK_ELEMS];
        qp_i8row_dequantize(w, buf, n);
        return qp_f32_vec_dot(buf, x, n);
    }
    /* longer rows: the scalar reference order (= dequantize then dot, element by element) */
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t b = 0; b < n / I8ROW_QK; b++, p += I8ROW_BYTES, x += I8ROW_QK) {
        float d = qp_load_f32le(p);
        for (int j = 0; j < I8ROW_QK; j++) s += ((float)(int8_t)p[4 + j] * d) * x[j];
    }
    return s;
}

double qp_i8row_vec_dot_i8(const void *w, const int8_t *a, int64_t n) {
    const uint8_t *p = w;
    double s = 0.0;
    for (int64_t b = 0; b < n / I8ROW_QK; b++, p += I8ROW_BYTES, a += I8ROW_QK) {
        int32_t acc = 0;
        for (int j = 0; j < I8ROW_QK; j++) acc += (int32_t)(int8_t)p[4 + j] * (int32_t)a[j];
        s += (double)qp_load_f32le(p) * (double)acc;
    }
    return s;
}

bool qp_i8row_validate(const void *x, int64_t n, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / I8ROW_QK; b++, p += I8ROW_BYTES) {
        float d = qp_load_f32le(p);
        if (!isfinite(d) || d < 0.0f) {
            if (why)
                snprintf(why, why_len, "block %lld has the scale %g (finite and >= 0 needed)",
                         (long long)b, (double)d);
            return false;
        }
    }
    return true;
}
