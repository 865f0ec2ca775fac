/* Plain element types: F32, F16, BF16 (read/write), F64 and integers (read). All loads go
 * through little-endian helpers, so the bytes never depend on the host. */
#include <math.h>
#include <stdio.h>

#include "converters/encodings_internal.h"

void qp_f32_quantize(const float *x, void *y, int64_t n) {
    uint8_t *o = y;
    for (int64_t i = 0; i < n; i++) qp_store_f32le(o + 4 * i, x[i]);
}
void qp_f32_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = qp_load_f32le(p + 4 * i);
}
float qp_f32_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_load_f32le(p + 4 * i) * x[i];
    return s;
}
bool qp_f32_validate(const void *x, int64_t n, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(qp_load_f32le(p + 4 * i))) {
            if (why) snprintf(why, why_len, "element %lld is not finite", (long long)i);
            return false;
        }
    }
    return true;
}

void qp_f16_quantize(const float *x, void *y, int64_t n) {
    uint8_t *o = y;
    for (int64_t i = 0; i < n; i++) qp_store_u16le(o + 2 * i, qp_fp32_to_fp16(x[i]));
}
void qp_f16_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = qp_fp16_to_fp32(qp_load_u16le(p + 2 * i));
}
float qp_f16_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_fp16_to_fp32(qp_load_u16le(p + 2 * i)) * x[i];
    return s;
}
bool qp_f16_validate(const void *x, int64_t n, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        if ((qp_load_u16le(p + 2 * i) & 0x7c00u) == 0x7c00u) {
            if (why) snprintf(why, why_len, "element %lld is not finite", (long long)i);
            return false;
        }
    }
    return true;
}

void qp_bf16_quantize(const float *x, void *y, int64_t n) {
    uint8_t *o = y;
    for (int64_t i = 0; i < n; i++) qp_store_u16le(o + 2 * i, qp_fp32_to_bf16(x[i]));
}
void qp_bf16_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = qp_bf16_to_fp32(qp_load_u16le(p + 2 * i));
}
float qp_bf16_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_bf16_to_fp32(qp_load_u16le(p + 2 * i)) * x[i];
    return s;
}
bool qp_bf16_validate(const void *x, int64_t n, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) {
        if ((qp_load_u16le(p + 2 * i) & 0x7f80u) == 0x7f80u) {
            if (why) snprintf(why, why_len, "element %lld is not finite", (long long)i);
            return false;
        }
    }
    return true;
}

void qp_f64_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = (float)qp_load_f64le(p + 8 * i);
}

#define QP_INT_DEQUANT(NAME, SZ, LOAD, T)                                                        \
    void qp_##NAME##_dequantize(const void *x, float *y, int64_t n) {                           \
        const uint8_t *p = x;                                                                    \
        for (int64_t i = 0; i < n; i++) y[i] = (float)(T)LOAD(p + (SZ) * i);                    \
    }
#define LOAD_U8(p) (*(p))
QP_INT_DEQUANT(i8, 1, LOAD_U8, int8_t)
QP_INT_DEQUANT(u8, 1, LOAD_U8, uint8_t)
QP_INT_DEQUANT(i16, 2, qp_load_u16le, int16_t)
QP_INT_DEQUANT(u16, 2, qp_load_u16le, uint16_t)
QP_INT_DEQUANT(i32, 4, qp_load_u32le, int32_t)
QP_INT_DEQUANT(u32, 4, qp_load_u32le, uint32_t)
QP_INT_DEQUANT(i64, 8, qp_load_u64le, int64_t)
QP_INT_DEQUANT(u64, 8, qp_load_u64le, uint64_t)
