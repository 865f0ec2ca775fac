/* Exact half-precision conversions (bit manipulation only; no FPU rounding modes involved). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantpack/core.h"

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float qp_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        return bits_f32(sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13));
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

uint16_t qp_fp32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return 0x7e00u; /* NaN, as ggml */
    if (abs >= 0x47800000u) {               /* >= 65536: overflow or inf */
        /* values in [65520, 65536) round to inf too; handled below for the normal path */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (abs < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        if (abs < 0x33000000u) return sign; /* < 2^-25 rounds to zero (2^-25 itself ties to 0) */
        uint32_t exp = abs >> 23;
        uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; /* 14..24 + ... : bits to drop to reach 2^-24 units */
        /* value = man * 2^(exp-150); in units of 2^-24: man >> (126 - exp) */
        uint32_t q = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    /* normal */
    uint32_t exp = (abs >> 23) - 127 + 15;
    uint32_t man = abs & 0x7fffffu;
    uint32_t q = (exp << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++; /* may carry into exp: correct */
    return (uint16_t)(sign | q);
}

float qp_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t qp_fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u); /* quiet NaN */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

double qp_f32_short_double(float f) {
    char buf[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}
