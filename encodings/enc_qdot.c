/* Fast-path dots (traits vec_dot_q8, encodings/encodings.md "Fast dots"): a weight row against
 * activations quantized per block (Q8_0 for the 32-element legacy blocks, Q8_K for k-quants),
 * integer products summed exactly, then one float step per block. These scalar functions define
 * the result; the AVX2 / AVX-512 VNNI kernels (qdot_avx2.c, qdot_avx512.c) compute the same
 * integers and the same float operations in the same order, so every level gives the same bits. */
#include "encodings/encodings_internal.h"
#include "encodings/qdot.h"

/* ---- 32-element blocks against Q8_0 -------------------------------------------------------- */

/* levels of one weight block: Q8_0 q, Q4_0 nibble - 8, Q5_0 (nibble | high bit << 4) - 16 */
static void q8_0_levels(const uint8_t *b, int8_t q[32]) {
    for (int i = 0; i < 32; i++) q[i] = (int8_t)b[2 + i];
}
static void q4_0_levels(const uint8_t *b, int8_t q[32]) {
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)((b[2 + i] & 0x0F) - 8);
        q[i + 16] = (int8_t)((b[2 + i] >> 4) - 8);
    }
}
static void q5_0_levels(const uint8_t *b, int8_t q[32]) {
    const uint32_t qh = qp_load_u32le(b + 2);
    for (int i = 0; i < 16; i++) {
        q[i] = (int8_t)(((b[6 + i] & 0x0F) | (((qh >> i) & 1u) << 4)) - 16);
        q[i + 16] = (int8_t)(((b[6 + i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - 16);
    }
}

/* the exact integer sum of one weight block's 32 products with the activations a */
static inline int32_t levels_isum(void (*levels)(const uint8_t *, int8_t *), const uint8_t *wb, const int8_t *a) {
    int8_t q[32];
    levels(wb, q);
    int32_t isum = 0;
    for (int j = 0; j < 32; j++) isum += (int32_t)q[j] * a[j];
    return isum;
}
static int32_t q8_0_isum(const uint8_t *wb, const int8_t *a) { return levels_isum(q8_0_levels, wb, a); }
static int32_t q4_0_isum(const uint8_t *wb, const int8_t *a) { return levels_isum(q4_0_levels, wb, a); }
static int32_t q5_0_isum(const uint8_t *wb, const int8_t *a) { return levels_isum(q5_0_levels, wb, a); }
/* BQ4 (enc_bq4.md): element 2i is the low nibble of byte 4 + i, 2i + 1 the high one; level q - zero
 * with zero the signed byte 2 (-128..127, so the level 15 + 128 can pass int8): sum q a - zero sum a,
 * |sum q a| <= 32 * 15 * 127 and |zero sum a| <= 128 * 32 * 127, exact in int32 */
static int32_t bq4_isum(const uint8_t *wb, const int8_t *a) {
    int32_t qa = 0, sa = 0;
    for (int i = 0; i < 16; i++) {
        qa += (wb[4 + i] & 0x0F) * a[2 * i] + (wb[4 + i] >> 4) * a[2 * i + 1];
        sa += a[2 * i] + a[2 * i + 1];
    }
    return qa - (int8_t)wb[2] * sa;
}

/* Per block (f16 scale at byte 0) the exact integer sum of its 32 products, then one float step
 * into chain b mod 4 (four chains: a single dot is not one serial chain of float adds, and a SIMD
 * kernel takes four blocks' steps in the four lanes of one vector); result (s0 + s2) + (s1 + s3). */
static inline void legacy_step(float s[QP_QDOT_CHAINS], int64_t i, const uint8_t *d16, const uint8_t *ab, int32_t isum) {
    const float d = qp_fp16_to_fp32(qp_load_u16le(d16)) * qp_fp16_to_fp32(qp_load_u16le(ab));
    s[i % QP_QDOT_CHAINS] = s[i % QP_QDOT_CHAINS] + d * (float)isum;
}
static float legacy_dot(int32_t (*block_isum)(const uint8_t *, const int8_t *), size_t wbytes, const void *w,
                        const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float s[QP_QDOT_CHAINS] = {0};
    for (int64_t i = 0; i < n / QP_QK; i++, wb += wbytes, ab += QP_Q8_0_BYTES)
        legacy_step(s, i, wb, ab, block_isum(wb, (const int8_t *)(ab + 2)));
    return (s[0] + s[2]) + (s[1] + s[3]);
}

float qp_q8_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q8_0_isum, QP_Q8_0_BYTES, w, xq, n);
}
float qp_q4_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q4_0_isum, QP_Q4_0_BYTES, w, xq, n);
}
float qp_q5_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(q5_0_isum, QP_Q5_0_BYTES, w, xq, n);
}
float qp_bq4_dot_q8_0_ref(const void *w, const void *xq, int64_t n) {
    return legacy_dot(bq4_isum, QP_BQ4_BYTES, w, xq, n);
}

/* 16 BQ4 rows (row r at w + r * ldw) -> the packed layout of qdot.h QP_BQ4_PACK_* */
void qp_bq4_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    uint8_t *o = out;
    for (int64_t i = 0; i < n / QP_QK; i++, o += QP_BQ4_PACK_BYTES)
        for (int r = 0; r < QP_BQ4_PACK_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * ldw + (size_t)i * QP_BQ4_BYTES;
            memcpy(o + QP_BQ4_PACK_OFF_D + 2 * r, b, 2);
            o[QP_BQ4_PACK_OFF_Z + r] = b[2];
            for (int g = 0; g < 4; g++) memcpy(o + 64 * g + 4 * r, b + 4 + 4 * g, 4);
        }
}

/* 16 Q4_0 rows -> the same packed layout (encodings.md "Repacked Q4_0 rows"): a Q4_0 block is a BQ4
 * block of zero 8 (level q - 8, scale d) whose elements j and j + 16 share byte j; BQ4 puts
 * elements 2i, 2i + 1 in byte i, so the codes are re-paired. q4_0_isum = bq4_isum of the re-paired
 * block, exactly, so the BQ4 kernels give every Q4_0 row its single dot's bits. */
void qp_q4_0_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    uint8_t *o = out;
    for (int64_t i = 0; i < n / QP_QK; i++, o += QP_BQ4_PACK_BYTES)
        for (int r = 0; r < QP_BQ4_PACK_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * ldw + (size_t)i * QP_Q4_0_BYTES;
            memcpy(o + QP_BQ4_PACK_OFF_D + 2 * r, b, 2);
            o[QP_BQ4_PACK_OFF_Z + r] = 8;
            for (int k = 0; k < 16; k++) { /* byte k: elements 2k (low), 2k + 1 (high) */
                const int e0 = 2 * k, e1 = 2 * k + 1;
                const int q0 = e0 < 16 ? b[2 + e0] & 0x0F : b[2 + e0 - 16] >> 4;
                const int q1 = e1 < 16 ? b[2 + e1] & 0x0F : b[2 + e1 - 16] >> 4;
                o[64 * (k / 4) + 4 * r + k % 4] = (uint8_t)(q0 | q1 << 4);
            }
        }
}

/* legacy_dot of row r of a packed BQ4 group pg (nb blocks) against the Q8_0 blocks at ab: each
 * block put back as the file stores it */
static float bq4_packed_row(const uint8_t *pg, int r, const uint8_t *ab, int64_t nb) {
    float s[QP_QDOT_CHAINS] = {0};
    for (int64_t i = 0; i < nb; i++, pg += QP_BQ4_PACK_BYTES, ab += QP_Q8_0_BYTES) {
        uint8_t b[QP_BQ4_BYTES] = {0};
        memcpy(b, pg + QP_BQ4_PACK_OFF_D + 2 * r, 2);
        b[2] = pg[QP_BQ4_PACK_OFF_Z + r];
        for (int g = 0; g < 4; g++) memcpy(b + 4 + 4 * g, pg + 64 * g + 4 * r, 4);
        legacy_step(s, i, b, ab, bq4_isum(b, (const int8_t *)(ab + 2)));
    }
    return (s[0] + s[2]) + (s[1] + s[3]);
}

/* A dot over packed groups of `rows` rows (nb blocks of pack_bytes each), by definition each (row,
 * token) through ROW, the single dot read from the layout */
static void packed_dot_ref(float (*row)(const uint8_t *, int, const uint8_t *, int64_t), int rows, size_t pack_bytes,
                           int64_t nb, const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                           float *y, size_t ldy) {
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * pack_bytes;
        for (int64_t t = 0; t < n_tok; t++)
            for (int r = 0; r < rows; r++)
                y[(size_t)t * ldy + (size_t)(g * rows + r)] = row(pg, r, (const uint8_t *)xq + (size_t)t * ldxq, nb);
    }
}

void qp_bq4_packed_dot_q8_0_ref(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                int64_t n, float *y, size_t ldy) {
    packed_dot_ref(bq4_packed_row, QP_BQ4_PACK_ROWS, QP_BQ4_PACK_BYTES, n / QP_QK, packed, n_groups, xq, ldxq, n_tok, y, ldy);
}

/* ---- k-quants against Q8_K ---------------------------------------------------------------- */

/* the float steps of one Q4_K / Q5_K super-block (f16 d and dmin at d16, dmin16; Q8_K block ab) */
static inline float k_min_step(float sum, const uint8_t *d16, const uint8_t *dmin16, const uint8_t *ab, int32_t isum,
                               int32_t msum) {
    const float da = qp_load_f32le(ab);
    const float d = qp_fp16_to_fp32(qp_load_u16le(d16)) * da;
    const float dmin = qp_fp16_to_fp32(qp_load_u16le(dmin16)) * da;
    sum = sum + d * (float)isum;
    return sum - dmin * (float)msum;
}

/* sum of Q8_K block ab's two 16-element sums of sub-block j (elements 32j .. 32j + 31) */
static inline int32_t q8k_sub_sum(const uint8_t *ab, int j) {
    return (int16_t)qp_load_u16le(ab + QP_Q8_K_OFF_BSUMS + 4 * j) + (int16_t)qp_load_u16le(ab + QP_Q8_K_OFF_BSUMS + 4 * j + 2);
}

/* Q4_K and Q5_K (4-bit levels, plus bit 2j / 2j+1 of qh[l] << 4 for Q5_K's sub-blocks 2j / 2j+1):
 * sum_j sc_j (q_j . a_j) in integers, the mins through the activation block sums. */
static float k_min_dot(const void *w, const void *xq, int64_t n, size_t wbytes, size_t off_qs,
                       bool five) {
    const uint8_t *wb = w, *ab = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes, ab += QP_Q8_K_BYTES) {
        uint8_t sc[8], mn[8];
        qp_q4k_unpack_scales(wb + QP_Q4_K_OFF_SCALES, sc, mn);
        const uint8_t *q = wb + off_qs, *qh = wb + QP_Q5_K_OFF_QH;
        const int8_t *a = (const int8_t *)(ab + QP_Q8_K_OFF_QS);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int32_t p = 0;
            for (int l = 0; l < 32; l++) {
                int v = (j & 1) ? q[32 * (j / 2) + l] >> 4 : q[32 * (j / 2) + l] & 0x0F;
                if (five) v |= ((qh[l] >> j) & 1) << 4;
                p += v * a[32 * j + l];
            }
            isum += (int32_t)sc[j] * p;
            msum += (int32_t)mn[j] * q8k_sub_sum(ab, j);
        }
        sum = k_min_step(sum, wb, wb + 2, ab, isum, msum);
    }
    return sum;
}

float qp_q4k_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return k_min_dot(w, xq, n, QP_Q4_K_BYTES, QP_Q4_K_OFF_QS, false);
}
float qp_q5k_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return k_min_dot(w, xq, n, QP_Q5_K_BYTES, QP_Q5_K_OFF_QS, true);
}

/* 16 Q4_K rows (row r at w + r * ldw) -> the packed layout of qdot.h QP_Q4K_PACK_* */
void qp_q4k_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    uint8_t *o = out;
    for (int64_t i = 0; i < n / QP_QK_K; i++, o += QP_Q4K_PACK_BYTES)
        for (int r = 0; r < QP_Q4K_PACK_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * ldw + (size_t)i * QP_Q4_K_BYTES;
            uint8_t sc[8], mn[8];
            qp_q4k_unpack_scales(b + QP_Q4_K_OFF_SCALES, sc, mn);
            memcpy(o + 2 * r, b, 2);
            memcpy(o + QP_Q4K_PACK_OFF_DMIN + 2 * r, b + 2, 2);
            for (int j = 0; j < 8; j++) {
                o[QP_Q4K_PACK_OFF_SC + 16 * j + r] = sc[j];
                o[QP_Q4K_PACK_OFF_MN + 32 * (j / 2) + 2 * r + (j & 1)] = mn[j];
            }
            for (int q = 0; q < 32; q++) memcpy(o + QP_Q4K_PACK_OFF_QS + 64 * q + 4 * r, b + QP_Q4_K_OFF_QS + 4 * q, 4);
        }
}

/* k_min_dot of row r of a packed group pg (nb super-blocks) against the Q8_K blocks at ab */
static float q4k_packed_row(const uint8_t *pg, int r, const uint8_t *ab, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++, pg += QP_Q4K_PACK_BYTES, ab += QP_Q8_K_BYTES) {
        const int8_t *a = (const int8_t *)(ab + QP_Q8_K_OFF_QS);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int32_t p = 0;
            for (int l = 0; l < 32; l++) { /* byte l of sub-block pair j / 2: group q = 8 (j / 2) + l / 4 */
                const uint8_t q = pg[QP_Q4K_PACK_OFF_QS + 64 * (8 * (j / 2) + l / 4) + 4 * r + l % 4];
                p += ((j & 1) ? q >> 4 : q & 0x0F) * a[32 * j + l];
            }
            isum += (int32_t)pg[QP_Q4K_PACK_OFF_SC + 16 * j + r] * p;
            msum += (int32_t)pg[QP_Q4K_PACK_OFF_MN + 32 * (j / 2) + 2 * r + (j & 1)] * q8k_sub_sum(ab, j);
        }
        sum = k_min_step(sum, pg + 2 * r, pg + QP_Q4K_PACK_OFF_DMIN + 2 * r, ab, isum, msum);
    }
    return sum;
}

void qp_q4k_packed_dot_q8k_ref(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                               int64_t n, float *y, size_t ldy) {
    packed_dot_ref(q4k_packed_row, QP_Q4K_PACK_ROWS, QP_Q4K_PACK_BYTES, n / QP_QK_K, packed, n_groups, xq, ldxq, n_tok, y,
                   ldy);
}
/* the exact integer sum of one Q6_K super-block wb (as the file stores it) by the activations a:
 * sum_j sc_j (q_j . a_j) over the 16 sub-blocks of 16, levels q = 6-bit code - 32 */
static int32_t q6k_isum(const uint8_t *wb, const int8_t *a) {
    const int8_t *scb = (const int8_t *)(wb + QP_Q6_K_OFF_SCALES);
    int32_t isum = 0;
    for (int h = 0; h < 2; h++) { /* two halves of 128: ql 64 bytes, qh 32 bytes each */
        const uint8_t *ql = wb + 64 * h, *qh = wb + QP_Q6_K_OFF_QH + 32 * h;
        for (int m = 0; m < 4; m++) { /* element 128h + 32m + l */
            int32_t p[2] = {0, 0};
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = (m & 1) ? ql[l + 32] : ql[l];
                const int v = (int)(((m & 2) ? lo >> 4 : lo & 0x0F) | (((qh[l] >> (2 * m)) & 3) << 4)) - 32;
                p[l / 16] += v * a[128 * h + 32 * m + l];
            }
            isum += scb[8 * h + 2 * m] * p[0] + scb[8 * h + 2 * m + 1] * p[1];
        }
    }
    return isum;
}
/* the float step of one super-block: sum + (d_w d_a) isum */
static inline float q6k_step(float sum, float dw, const uint8_t *ab, int32_t isum) {
    const float d = dw * qp_load_f32le(ab);
    return sum + d * (float)isum;
}
float qp_q6k_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += QP_Q6_K_BYTES, ab += QP_Q8_K_BYTES)
        sum = q6k_step(sum, qp_fp16_to_fp32(qp_load_u16le(wb + QP_Q6_K_OFF_D)), ab,
                       q6k_isum(wb, (const int8_t *)(ab + QP_Q8_K_OFF_QS)));
    return sum;
}

/* 16 Q6_K rows (row r at w + r * ldw) -> the packed layout of qdot.h QP_Q6K_PACK_* */
void qp_q6k_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    uint8_t *o = out;
    for (int64_t i = 0; i < n / QP_QK_K; i++, o += QP_Q6K_PACK_BYTES)
        for (int r = 0; r < QP_Q6K_PACK_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * ldw + (size_t)i * QP_Q6_K_BYTES;
            qp_store_f32le(o + 4 * r, qp_fp16_to_fp32(qp_load_u16le(b + QP_Q6_K_OFF_D)));
            for (int j = 0; j < 16; j++) o[QP_Q6K_PACK_OFF_SC + 16 * j + r] = b[QP_Q6_K_OFF_SCALES + j];
            for (int t = 0; t < 16; t++) { /* t = 8h + v */
                uint8_t *ot = o + QP_Q6K_PACK_OFF_Q + 192 * t + 4 * r;
                const int h = t / 8, v = t % 8;
                memcpy(ot, b + 64 * h + 4 * v, 4);
                memcpy(ot + 64, b + 64 * h + 32 + 4 * v, 4);
                memcpy(ot + 128, b + QP_Q6_K_OFF_QH + 32 * h + 4 * v, 4);
            }
        }
}

/* the Q6_K single dot of row r of a packed group pg (nb super-blocks) against the Q8_K blocks at
 * ab: each super-block's ql, qh and scales put back as the file stores them */
static float q6k_packed_row(const uint8_t *pg, int r, const uint8_t *ab, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++, pg += QP_Q6K_PACK_BYTES, ab += QP_Q8_K_BYTES) {
        uint8_t b[QP_Q6_K_BYTES] = {0};
        for (int t = 0; t < 16; t++) { /* t = 8h + v */
            const uint8_t *pt = pg + QP_Q6K_PACK_OFF_Q + 192 * t + 4 * r;
            const int h = t / 8, v = t % 8;
            memcpy(b + 64 * h + 4 * v, pt, 4);
            memcpy(b + 64 * h + 32 + 4 * v, pt + 64, 4);
            memcpy(b + QP_Q6_K_OFF_QH + 32 * h + 4 * v, pt + 128, 4);
        }
        for (int j = 0; j < 16; j++) b[QP_Q6_K_OFF_SCALES + j] = pg[QP_Q6K_PACK_OFF_SC + 16 * j + r];
        sum = q6k_step(sum, qp_load_f32le(pg + 4 * r), ab, q6k_isum(b, (const int8_t *)(ab + QP_Q8_K_OFF_QS)));
    }
    return sum;
}

void qp_q6k_packed_dot_q8k_ref(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                               int64_t n, float *y, size_t ldy) {
    packed_dot_ref(q6k_packed_row, QP_Q6K_PACK_ROWS, QP_Q6K_PACK_BYTES, n / QP_QK_K, packed, n_groups, xq, ldxq, n_tok, y,
                   ldy);
}

/* ---- ternary and 2-bit rows against Q8_K ---------------------------------------------------- */

/* The 256 levels of one Q8_K-sized chunk of a row (t[e] for element e of the chunk). */
static void tq2_0_levels(const uint8_t *b, int8_t t[256]) { /* 128h + 32k + m: qs[32h+m] >> 2k */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            for (int m = 0; m < 32; m++) t[128 * h + 32 * k + m] = (int8_t)(((b[32 * h + m] >> (2 * k)) & 3) - 1);
}
static int tq1_digit(uint8_t q, int n) { /* digit n of a base-3 byte (enc_ternary.md) */
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    return ((uint8_t)(q * pow3[n]) * 3) >> 8;
}
static void tq1_0_levels(const uint8_t *b, int8_t t[256]) {
    for (int n = 0; n < 5; n++) {
        for (int m = 0; m < 32; m++) t[m + 32 * n] = (int8_t)(tq1_digit(b[m], n) - 1);
        for (int m = 0; m < 16; m++) t[160 + m + 16 * n] = (int8_t)(tq1_digit(b[32 + m], n) - 1);
    }
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) t[240 + j + 4 * n] = (int8_t)(tq1_digit(b[QP_TQ1_0_OFF_QH + j], n) - 1);
}
/* I2_S blocks of be elements: element 32k + p of a 128-block (16k + p of a 64-block) is bits
 * 7-2k..6-2k of byte p; codes 0, 1, 2 -> -1, 0, +1, the illegal 3 -> 0 as the decoders */
static void i2s_levels_be(const uint8_t *b, int8_t t[256], int be) {
    static const int8_t lv[4] = {-1, 0, 1, 0};
    const int q = be / 4;
    for (int blk = 0; blk < 256 / be; blk++)
        for (int k = 0; k < 4; k++)
            for (int p = 0; p < q; p++) t[be * blk + q * k + p] = lv[(b[q * blk + p] >> (6 - 2 * k)) & 3];
}
static void i2s_levels(const uint8_t *b, int8_t t[256]) { i2s_levels_be(b, t, QP_I2S_BLOCK); }
static void i2s_arm_levels(const uint8_t *b, int8_t t[256]) { i2s_levels_be(b, t, QP_I2S_ARM_BLOCK); }
static void qk256_levels(const uint8_t *b, int8_t t[256]) { /* element i: byte i/4, bits 2(i%4) */
    static const int8_t lv[4] = {-2, -1, 1, 2};
    for (int i = 0; i < 256; i++) t[i] = lv[(b[i / 4] >> (2 * (i % 4))) & 3];
}

/* sum_e t_e a_e per 256 elements in integers, then one float step per chunk: sum += (d_w d_a) isum
 * with d_w the chunk's f16 scale at d_off, or sum += d_a isum for rows without block scales
 * (I2_S, QK256: their tensor scale multiplies the row's result, runtime.md). */
static float ternary_dot(void (*levels)(const uint8_t *, int8_t *), size_t wbytes, int d_off,
                         const void *w, const void *xq, int64_t n) {
    const uint8_t *wb = w, *ab = xq;
    float sum = 0.0f;
    int8_t t[256];
    for (int64_t i = 0; i < n / QP_QK_K; i++, wb += wbytes, ab += QP_Q8_K_BYTES) {
        levels(wb, t);
        const int8_t *a = (const int8_t *)(ab + QP_Q8_K_OFF_QS);
        int32_t isum = 0;
        for (int e = 0; e < 256; e++) isum += t[e] * a[e];
        const float da = qp_load_f32le(ab);
        const float d = d_off >= 0 ? qp_fp16_to_fp32(qp_load_u16le(wb + d_off)) * da : da;
        sum = sum + d * (float)isum;
    }
    return sum;
}

float qp_tq2_0_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return ternary_dot(tq2_0_levels, QP_TQ2_0_BYTES, QP_TQ2_0_OFF_D, w, xq, n);
}
float qp_tq1_0_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return ternary_dot(tq1_0_levels, QP_TQ1_0_BYTES, QP_TQ1_0_OFF_D, w, xq, n);
}
float qp_i2s_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return ternary_dot(i2s_levels, 64, -1, w, xq, n);
}
float qp_i2s_arm_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return ternary_dot(i2s_arm_levels, 64, -1, w, xq, n);
}
float qp_qk256_dot_q8k_ref(const void *w, const void *xq, int64_t n) {
    return ternary_dot(qk256_levels, QP_QK256_BYTES, -1, w, xq, n);
}

/* 16 rows of 256-element blocks of wbytes bytes (row r at w + r * ldw) -> the packed layout of
 * qdot.h QP_TQ2_PACK_*. Both encodings keep elements 32k + m of a 128-element half h in byte
 * 32h + m of the block, TQ2_0 at bits 2k (tq2_0_levels), I2_S at bits 6 - 2k (i2s_levels), so the
 * codes of vector v (elements 16v + 4s + j: k = v / 2 % 4, m = 16 (v % 2) + 4s + j) are 2-bit
 * fields of four 4-byte words, moved four bytes at a time. I2_S's illegal code 3 is written as 1
 * (level 0, as its decoders), so the packed code is level + 1 for both. The block's f16 scale
 * comes from byte d_off of the block, or is 1.0 for I2_S (d_off < 0: encodings.md "Repacked I2_S
 * rows"). */
static void pack16_tq2_layout(size_t wbytes, int d_off, const void *w, size_t ldw, int64_t n, void *out) {
    const int64_t nb = n / QP_QK_K;
    const bool i2s = d_off < 0;
    uint8_t *o = out;
    for (int64_t i = 0; i < nb; i++)
        for (int r = 0; r < QP_TQ2_PACK_ROWS; r++) {
            const uint8_t *b = (const uint8_t *)w + (size_t)r * ldw + (size_t)i * wbytes;
            for (int v = 0; v < 16; v++) {
                const int k = v / 2 % 4, shift = i2s ? 6 - 2 * k : 2 * k;
                const uint8_t *q = b + 32 * (v / 8) + 16 * (v % 2);
                uint32_t codes = 0; /* byte j: bits 2s, 2s + 1 the code of element 16v + 4s + j */
                for (int s = 0; s < 4; s++) codes |= ((qp_load_u32le(q + 4 * s) >> shift) & 0x03030303u) << (2 * s);
                if (i2s) codes ^= ((codes >> 1) & codes & 0x55555555u) << 1; /* 3 -> 1 */
                qp_store_u32le(o + QP_TQ2_PACK_CODES * i + 64 * v + 4 * r, codes);
            }
            if (!i2s) memcpy(o + QP_TQ2_PACK_CODES * nb + 32 * i + 2 * r, b + d_off, 2);
            else qp_store_u16le(o + QP_TQ2_PACK_CODES * nb + 32 * i + 2 * r, 0x3C00); /* f16 1.0 */
        }
}
void qp_tq2_0_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    pack16_tq2_layout(QP_TQ2_0_BYTES, QP_TQ2_0_OFF_D, w, ldw, n, out);
}
void qp_i2s_pack16(const void *w, size_t ldw, int64_t n, void *out) {
    pack16_tq2_layout(QP_QK_K / QP_I2S_BLOCK * QP_I2S_BYTES, -1, w, ldw, n, out); /* two 128-element blocks */
}

/* row r of block i of a packed TQ2_0 group pg (nb blocks): sum level x a, and its f16 scale */
static int32_t tq2_0_packed_isum(const uint8_t *pg, int r, int64_t i, const int8_t *a) {
    int32_t isum = 0;
    for (int e = 0; e < 256; e++) {
        const uint8_t q = pg[QP_TQ2_PACK_CODES * i + 64 * (e / 16) + 4 * r + e % 4];
        isum += (((q >> (2 * (e % 16 / 4))) & 3) - 1) * a[e];
    }
    return isum;
}
static float tq2_0_packed_scale(const uint8_t *pg, int r, int64_t i, int64_t nb) {
    return qp_fp16_to_fp32(qp_load_u16le(pg + QP_TQ2_PACK_CODES * nb + 32 * i + 2 * r));
}

/* ternary_dot of row r of a packed TQ2_0 group pg (nb blocks) against the Q8_K blocks at ab */
static float tq2_0_packed_row(const uint8_t *pg, int r, const uint8_t *ab, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++, ab += QP_Q8_K_BYTES) {
        const int32_t isum = tq2_0_packed_isum(pg, r, i, (const int8_t *)(ab + QP_Q8_K_OFF_QS));
        const float d = tq2_0_packed_scale(pg, r, i, nb) * qp_load_f32le(ab);
        sum = sum + d * (float)isum;
    }
    return sum;
}

/* the TQ2_0 vec_dot_i8 (enc_ternary.c tq_vec_dot_i8) of row r of a packed group against a */
static double tq2_0_packed_row_i8(const uint8_t *pg, int r, const int8_t *a, int64_t nb) {
    double s = 0.0;
    for (int64_t i = 0; i < nb; i++, a += QP_QK_K)
        s += (double)tq2_0_packed_scale(pg, r, i, nb) * (double)tq2_0_packed_isum(pg, r, i, a);
    return s;
}
void qp_tq2_0_packed_dot_q8k_ref(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok,
                                 int64_t n, float *y, size_t ldy) {
    packed_dot_ref(tq2_0_packed_row, QP_TQ2_PACK_ROWS, QP_TQ2_PACK_BYTES, n / QP_QK_K, packed, n_groups, xq, ldxq, n_tok,
                   y, ldy);
}
/* the same groups against int8 rows (packed_dot_ref's order, double results) */
void qp_tq2_0_packed_dot_i8_ref(const void *packed, int64_t n_groups, const int8_t *a, size_t lda, int64_t n_tok,
                                int64_t n, double *y, size_t ldy) {
    const int64_t nb = n / QP_QK_K;
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t *pg = (const uint8_t *)packed + (size_t)(g * nb) * QP_TQ2_PACK_BYTES;
        for (int64_t t = 0; t < n_tok; t++)
            for (int r = 0; r < QP_TQ2_PACK_ROWS; r++)
                y[(size_t)t * ldy + (size_t)(g * QP_TQ2_PACK_ROWS + r)] = tq2_0_packed_row_i8(pg, r, a + (size_t)t * lda, nb);
    }
}

/* rows x tokens (traits vec_dot_q8_tile): by definition the single dot of each pair (the SIMD
 * kernels share weight unpacking between tokens and activation loads between rows, and give
 * these bits) */
#define QP_QDOT_TILE_REF(NAME)                                                                       \
    void qp_##NAME##_tile_ref(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq, \
                              int64_t n_tok, int64_t n, float *y, size_t ldy) {                      \
        for (int64_t t = 0; t < n_tok; t++)                                                          \
            for (int64_t r = 0; r < n_rows; r++)                                                     \
                y[(size_t)t * ldy + (size_t)r] =                                                     \
                    qp_##NAME##_ref((const uint8_t *)w + (size_t)r * ldw, (const uint8_t *)xq + (size_t)t * ldxq, n); \
    }
QP_QDOT_TILE_REF(q4k_dot_q8k)
QP_QDOT_TILE_REF(q5k_dot_q8k)
QP_QDOT_TILE_REF(q6k_dot_q8k)
QP_QDOT_TILE_REF(q8_0_dot_q8_0)
QP_QDOT_TILE_REF(q4_0_dot_q8_0)
QP_QDOT_TILE_REF(q5_0_dot_q8_0)
QP_QDOT_TILE_REF(bq4_dot_q8_0)
QP_QDOT_TILE_REF(tq2_0_dot_q8k)
QP_QDOT_TILE_REF(tq1_0_dot_q8k)
