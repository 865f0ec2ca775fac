/* Q1_0_128 and TG128: the 128-element group encodings of the TRLM kinds for the current Trillim
 * SDK's actions 4 (Q1_0_128) and 5 (GROUP_TERNARY_QUANTIZE). Byte layouts and the quantizer's
 * rules: encodings/enc_trlm_groups.md. Both start a block with an f16 scale d:
 *   Q1_0_128: then 16 bytes, bit j%8 of byte j/8 = 1 for +d, 0 for -d;
 *   TG128:    then 32 bytes, code q+1 of element j at bits 2(j%4)+1:2(j%4) of byte j/4. */
#include <math.h>
#include <stdio.h>

#include "encodings/encodings_internal.h"

#define G QP_G128_BLOCK

/* The group's scale as stored: f16 of mean |x| over the counted elements (double sum);
 * nonzero_only counts only x != 0 (TG128), else all (Q1_0_128). 0 for an all-zero group. */
static uint16_t group_scale(const float *x, bool nonzero_only) {
    double sum = 0.0;
    int n = 0;
    for (int j = 0; j < G; j++) {
        if (nonzero_only && !(x[j] != 0.0f)) continue;
        sum += fabs((double)x[j]);
        n++;
    }
    float d = n ? (float)(sum / n) : 0.0f;
    return qp_fp32_to_fp16(isfinite(d) ? d : 0.0f);
}

void qp_q1g128_quantize_ref(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t b = 0; b < n / G; b++, x += G, p += QP_Q1_0_128_BYTES) {
        qp_store_u16le(p, group_scale(x, false));
        for (int j = 0; j < G / 8; j++) p[2 + j] = 0;
        for (int j = 0; j < G; j++)
            if (x[j] >= 0.0f) p[2 + j / 8] |= (uint8_t)(1u << (j % 8));
    }
}

void qp_q1g128_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / G; b++, p += QP_Q1_0_128_BYTES, y += G) {
        float d = qp_fp16_to_fp32(qp_load_u16le(p));
        for (int j = 0; j < G; j++) y[j] = (p[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
    }
}

/* vec_dot: the dequantized value times x, summed in element order (= dequantize then dot). */
float qp_q1g128_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t b = 0; b < n / G; b++, p += QP_Q1_0_128_BYTES, x += G) {
        float d = qp_fp16_to_fp32(qp_load_u16le(p));
        for (int j = 0; j < G; j++) s += ((p[2 + j / 8] >> (j % 8)) & 1 ? d : -d) * x[j];
    }
    return s;
}

bool qp_g128_validate_scales(const void *x, int64_t n, size_t block_bytes, char *why, size_t why_len) {
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / G; b++, p += block_bytes) {
        float d = qp_fp16_to_fp32(qp_load_u16le(p));
        if (!isfinite(d) || d < 0.0f) {
            if (why) snprintf(why, why_len, "block %lld: scale %g (finite, >= 0 needed)", (long long)b, (double)d);
            return false;
        }
    }
    return true;
}

bool qp_q1g128_validate(const void *x, int64_t n, char *why, size_t why_len) {
    return qp_g128_validate_scales(x, n, QP_Q1_0_128_BYTES, why, why_len);
}

static inline int tg_code(const uint8_t *codes, int j) { return (codes[j / 4] >> (2 * (j % 4))) & 3; }

void qp_tg128_quantize_ref(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t b = 0; b < n / G; b++, x += G, p += QP_TG128_BYTES) {
        uint16_t h = group_scale(x, true);
        float d = qp_fp16_to_fp32(h);
        int8_t q[G];
        for (int j = 0; j < G; j++) q[j] = d > 0.0f ? qp_trlm_t2_level(x[j] / d) : 0;
        qp_store_u16le(p, h);
        qp_trlm_t2_pack(q, p + 2, G);
    }
}

void qp_tg128_dequantize(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / G; b++, p += QP_TG128_BYTES, y += G) {
        float d = qp_fp16_to_fp32(qp_load_u16le(p));
        for (int j = 0; j < G; j++) y[j] = (float)(tg_code(p + 2, j) - 1) * d;
    }
}

float qp_tg128_vec_dot(const void *w, const float *x, int64_t n) {
    const uint8_t *p = w;
    float s = 0.0f;
    for (int64_t b = 0; b < n / G; b++, p += QP_TG128_BYTES, x += G) {
        float d = qp_fp16_to_fp32(qp_load_u16le(p));
        for (int j = 0; j < G; j++) s += ((float)(tg_code(p + 2, j) - 1) * d) * x[j];
    }
    return s;
}

bool qp_tg128_validate(const void *x, int64_t n, char *why, size_t why_len) {
    if (!qp_g128_validate_scales(x, n, QP_TG128_BYTES, why, why_len)) return false;
    const uint8_t *p = x;
    for (int64_t b = 0; b < n / G; b++, p += QP_TG128_BYTES)
        for (int j = 0; j < G; j++)
            if (tg_code(p + 2, j) == 3) {
                if (why) snprintf(why, why_len, "block %lld element %d has the invalid ternary code 3", (long long)b, j);
                return false;
            }
    return true;
}
