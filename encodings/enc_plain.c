/* Plain element types: F32, F16, BF16 (read/write), F64 and integers (read). All loads go
 * through little-endian helpers, so the bytes never depend on the host. */
#include <math.h>
#include <stdio.h>

#include "encodings/encodings_internal.h"
#include "encodings/plain_kernels.h"

void qp_f32_quantize(const float *x, void *y, int64_t n) {
    uint8_t *o = y;
    for (int64_t i = 0; i < n; i++) qp_store_f32le(o + 4 * i, x[i]);
}
void qp_f32_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = qp_load_f32le(p + 4 * i);
}
/* The scalar dots are the reference: products summed in index order. The SIMD kernels
 * (plain_avx2.c, plain_avx512.c; summation order in plain_kernels.h) are used when cpuid
 * allows. */
static float f32_vec_dot_ref(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_load_f32le(p + 4 * i) * x[i];
    return s;
}
float qp_f32_vec_dot(const void *w, const float *x, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 2) return qp_f32_vec_dot_avx512(w, x, n);
    if (lv >= 1) return qp_f32_vec_dot_avx2(w, x, n);
    return f32_vec_dot_ref(w, x, n);
}
void qp_f32_dot_multi(const float *w, const float *x, size_t ldx, int64_t nx, int64_t n, float *y,
                      size_t ldy) {
    int lv = qp_simd_level();
    if (lv >= 2) {
        qp_f32_dot_multi_avx512(w, x, ldx, nx, n, y, ldy);
        return;
    }
    if (lv >= 1) {
        qp_f32_dot_multi_avx2(w, x, ldx, nx, n, y, ldy);
        return;
    }
    for (int64_t t = 0; t < nx; t++) y[(size_t)t * ldy] = f32_vec_dot_ref(w, x + (size_t)t * ldx, n);
}
void qp_f32_dot_multi2(const float *w0, const float *w1, const float *x, size_t ldx, int64_t nx,
                       int64_t n, float *y0, float *y1, size_t ldy) {
    if (qp_simd_level() >= 2) {
        qp_f32_dot_multi2_avx512(w0, w1, x, ldx, nx, n, y0, y1, ldy);
        return;
    }
    qp_f32_dot_multi(w0, x, ldx, nx, n, y0, ldy);
    qp_f32_dot_multi(w1, x, ldx, nx, n, y1, ldy);
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
/* Widening is exact, so the F16C path gives the scalar bits (it leaves chunks holding Inf/NaN,
 * whose payload F16C would quiet, to the scalar loop). */
void qp_f16_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    int64_t i = qp_simd_level() >= 1 ? qp_f16_dequantize_avx2(x, y, n) : 0;
    for (; i < n; i++) y[i] = qp_fp16_to_fp32(qp_load_u16le(p + 2 * i));
}
static float f16_vec_dot_ref(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_fp16_to_fp32(qp_load_u16le(p + 2 * i)) * x[i];
    return s;
}
float qp_f16_vec_dot(const void *w, const float *x, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 2) return qp_f16_vec_dot_avx512(w, x, n);
    if (lv >= 1) return qp_f16_vec_dot_avx2(w, x, n);
    return f16_vec_dot_ref(w, x, n);
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
    if (qp_simd_level() >= 1) {
        qp_bf16_dequantize_avx2(x, y, n);
        return;
    }
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++) y[i] = qp_bf16_to_fp32(qp_load_u16le(p + 2 * i));
}
static float bf16_vec_dot_ref(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += qp_bf16_to_fp32(qp_load_u16le(p + 2 * i)) * x[i];
    return s;
}
float qp_bf16_vec_dot(const void *w, const float *x, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 2) return qp_bf16_vec_dot_avx512(w, x, n);
    if (lv >= 1) return qp_bf16_vec_dot_avx2(w, x, n);
    return bf16_vec_dot_ref(w, x, n);
}
/* Fast path: an F16 row against activations rounded to F16 (plain_kernels.h "Fast path"
 * defines the summation; this scalar code is the reference, the kernels give its bits). */
static float hdot_f16_ref(const void *w, const void *x, int64_t n) {
    const uint8_t *pw = w, *px = x;
    float a[QP_HDOT_LANES] = {0};
    for (int64_t i = 0; i < n; i++) {
        const float p =
            qp_fp16_to_fp32(qp_load_u16le(pw + 2 * i)) * qp_fp16_to_fp32(qp_load_u16le(px + 2 * i));
        a[i % QP_HDOT_LANES] = a[i % QP_HDOT_LANES] + p;
    }
    return qp_hdot_reduce(a);
}
float qp_f16_dot_f16(const void *w, const void *x, int64_t n) {
    int lv = qp_simd_level();
    if (lv >= 2) return qp_f16_dot_f16_avx512(w, x, n);
    if (lv >= 1) return qp_f16_dot_f16_avx2(w, x, n);
    return hdot_f16_ref(w, x, n);
}
/* rows x tokens (the same bits at every level): one token row by row through the level's single
 * dot (decode: one sequential stream of weights); several through the AVX2 tiles at both SIMD
 * levels (in cache 5.7 ns per 256 elements x token at the AVX-512 level, where its 512-bit tiles
 * took 8.6); the scalar level each pair's single dot */
static void hdot_pairs(float (*dot)(const void *, const void *, int64_t), const void *w, size_t ldw,
                       int64_t n_rows, const void *x, size_t ldx, int64_t n_tok, int64_t n, float *y,
                       size_t ldy) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t t = 0; t < n_tok; t++)
            y[(size_t)t * ldy + (size_t)r] =
                dot((const uint8_t *)w + (size_t)r * ldw, (const uint8_t *)x + (size_t)t * ldx, n);
}
void qp_f16_dot_f16_tile(const void *w, size_t ldw, int64_t n_rows, const void *x, size_t ldx, int64_t n_tok,
                         int64_t n, float *y, size_t ldy) {
    if (qp_simd_level() >= 1 && n_tok > 1) qp_f16_dot_f16_tile_avx2(w, ldw, n_rows, x, ldx, n_tok, n, y, ldy);
    else hdot_pairs(qp_f16_dot_f16, w, ldw, n_rows, x, ldx, n_tok, n, y, ldy);
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
