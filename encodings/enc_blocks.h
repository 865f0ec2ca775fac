/* Helpers shared by the encoding families (enc_kquants.c, enc_ternary.c, ...). */
#ifndef QP_ENC_BLOCKS_H
#define QP_ENC_BLOCKS_H

#include "quantpack/encoding.h"

/* f32 dot of a row through its block decoder: one block of be (<= 256) elements at a time (bb
 * bytes each), accumulated in element order, so it equals dequantize-then-dot exactly. The
 * reference vec_dot of every block encoding. */
static inline float qp_dot_via_blocks(qp_dequantize_fn deq, int64_t be, size_t bb, const void *w,
                                      const float *x, int64_t n) {
    float tmp[256];
    float s = 0.0f;
    const uint8_t *p = w;
    for (int64_t i = 0; i < n / be; i++) {
        deq(p + (size_t)i * bb, tmp, be);
        for (int64_t k = 0; k < be; k++) s += tmp[k] * x[i * be + k];
    }
    return s;
}

#endif
