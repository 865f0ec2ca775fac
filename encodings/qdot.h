/* Fast-path dots shared by enc_qdot.c (scalar reference) and qdot_avx2.c / qdot_avx512.c
 * (encodings/encodings.md "Fast dots"). */
#ifndef QP_QDOT_H
#define QP_QDOT_H
#include <stddef.h>
#include <stdint.h>

/* tokens whose dots share one unpacking of a weight block (the AVX2 kernels of vec_dot_q8_tile) */
#define QP_QDOT_TOKENS 4

/* float chains of the legacy-block dots (enc_qdot.c legacy_dot): block b steps chain b mod 4 */
#define QP_QDOT_CHAINS 4

/* a rows x tokens dot (encoding.h qp_vec_dot_q8_tile_fn) */
#define QP_QDOT_TILE_DECL(NAME)                                                                  \
    void NAME(const void *w, size_t ldw, int64_t n_rows, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, \
              float *y, size_t ldy)

/* Q4_K's (and Q5_K's) 12 scale bytes -> 8 six-bit scales and 8 six-bit mins; inline, as every
 * super-block of every fast dot unpacks them. */
static inline void qp_q4k_unpack_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s12[j] & 63;
        mn[j] = s12[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s12[j + 8] & 0x0F) | ((s12[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s12[j + 8] >> 4) | ((s12[j + 4] >> 6) << 4));
    }
}

/* Q4_K rows repacked 16 at a time (encodings.md "Repacked Q4_K rows"), QP_Q4K_PACK_BYTES per
 * super-block of the 16 rows: row r's f16 d at 2r and dmin at QP_Q4K_PACK_OFF_DMIN + 2r, the 6-bit
 * scale of sub-block j at QP_Q4K_PACK_OFF_SC + 16j + r, the mins of sub-blocks 2k and 2k + 1 at
 * QP_Q4K_PACK_OFF_MN + 32k + 2r and + 1, and bytes 4q .. 4q + 3 of its qs (q = 0 .. 31) at
 * QP_Q4K_PACK_OFF_QS + 64q + 4r: one 64-byte vector holds a 4-byte group of all 16 rows. */
#define QP_Q4K_PACK_ROWS 16
#define QP_Q4K_PACK_OFF_DMIN 32
#define QP_Q4K_PACK_OFF_SC 64
#define QP_Q4K_PACK_OFF_MN 192
#define QP_Q4K_PACK_OFF_QS 320
#define QP_Q4K_PACK_BYTES 2368
/* rows per group of every repacked layout below (traits q8_pack_rows), simd.c: 16 at the AVX2 and
 * VNNI levels, 0 at the scalar one */
int64_t qp_pack16_rows(void);
/* a dot over packed groups (encoding.h qp_vec_dot_q8_packed_fn) */
#define QP_QDOT_PACKED_DECL(NAME)                                                                \
    void NAME(const void *packed, int64_t n_groups, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y, \
              size_t ldy)
void qp_q4k_pack16(const void *w, size_t ldw, int64_t n, void *out);
QP_QDOT_PACKED_DECL(qp_q4k_packed_dot_q8k_ref);
QP_QDOT_PACKED_DECL(qp_q4k_packed_dot_q8k_avx2);
QP_QDOT_PACKED_DECL(qp_q4k_packed_dot_q8k_vnni);
QP_QDOT_PACKED_DECL(qp_q4k_packed_dot_q8k);

/* BQ4 rows repacked 16 at a time (encodings.md "Repacked BQ4 rows"), QP_BQ4_PACK_BYTES per block
 * of the 16 rows: bytes 4g .. 4g + 3 of row r's 16 code bytes (g = 0 .. 3) at 64g + 4r (one 64-byte
 * vector: a 4-byte group of all 16 rows), row r's f16 scale at QP_BQ4_PACK_OFF_D + 2r, its zero
 * byte at QP_BQ4_PACK_OFF_Z + r. */
#define QP_BQ4_PACK_ROWS 16
#define QP_BQ4_PACK_OFF_D 256
#define QP_BQ4_PACK_OFF_Z 288
#define QP_BQ4_PACK_BYTES 304
void qp_bq4_pack16(const void *w, size_t ldw, int64_t n, void *out);
void qp_q4_0_pack16(const void *w, size_t ldw, int64_t n, void *out); /* Q4_0 rows into the BQ4 layout */
QP_QDOT_PACKED_DECL(qp_bq4_packed_dot_q8_0_ref);
QP_QDOT_PACKED_DECL(qp_bq4_packed_dot_q8_0_avx2);
QP_QDOT_PACKED_DECL(qp_bq4_packed_dot_q8_0_vnni);
QP_QDOT_PACKED_DECL(qp_bq4_packed_dot_q8_0);
/* TQ2_0 rows repacked 16 at a time (encodings.md "Repacked TQ2_0 rows"), QP_TQ2_PACK_BYTES per block
 * of the 16 rows: in a group of nb blocks, block i's codes at QP_TQ2_PACK_CODES * i, the 64-byte
 * vector v (0 .. 15) holding bytes 4r .. 4r + 3 of row r, bits 2s, 2s + 1 of byte j the code
 * (level + 1) of element 16v + 4s + j; after the nb blocks' codes, row r's f16 scale of block i at
 * QP_TQ2_PACK_CODES * nb + 32i + 2r. */
#define QP_TQ2_PACK_ROWS 16
#define QP_TQ2_PACK_CODES 1024
#define QP_TQ2_PACK_BYTES 1056
/* Q6_K rows repacked 16 at a time (encodings.md "Repacked Q6_K rows"), QP_Q6K_PACK_BYTES per
 * super-block of the 16 rows (a multiple of 64, every vector aligned, read front to back): row r's d
 * as a float (the f16, converted exactly) at 4r, the int8 scale of sub-block j at QP_Q6K_PACK_OFF_SC
 * + 16j + r, then for t = 8h + v (h = 0, 1; v = 0 .. 7) three vectors at QP_Q6K_PACK_OFF_Q + 192t:
 * bytes 64h + 4v .. + 3 of row r's ql at + 4r, bytes 64h + 32 + 4v .. + 3 at + 64 + 4r, bytes
 * 32h + 4v .. + 3 of its qh at + 128 + 4r (one 64-byte vector: a 4-byte group of all 16 rows). */
#define QP_Q6K_PACK_ROWS 16
#define QP_Q6K_PACK_OFF_SC 64
#define QP_Q6K_PACK_OFF_Q 320
#define QP_Q6K_PACK_BYTES 3392
_Static_assert(QP_Q6K_PACK_BYTES % 64 == 0 && QP_Q6K_PACK_OFF_Q + 16 * 192 == QP_Q6K_PACK_BYTES, "Q6_K pack");
void qp_q6k_pack16(const void *w, size_t ldw, int64_t n, void *out);
QP_QDOT_PACKED_DECL(qp_q6k_packed_dot_q8k_ref);
QP_QDOT_PACKED_DECL(qp_q6k_packed_dot_q8k_avx2);
QP_QDOT_PACKED_DECL(qp_q6k_packed_dot_q8k_vnni);
QP_QDOT_PACKED_DECL(qp_q6k_packed_dot_q8k);
_Static_assert(QP_Q4K_PACK_ROWS == 16 && QP_BQ4_PACK_ROWS == 16 && QP_TQ2_PACK_ROWS == 16 && QP_Q6K_PACK_ROWS == 16,
               "qp_pack16_rows");
void qp_tq2_0_pack16(const void *w, size_t ldw, int64_t n, void *out);
/* I2_S rows into the same layout (encodings.md "Repacked I2_S rows"): codes level + 1 (the illegal
 * code 3 -> 1, level 0, as the decoder), every block scale f16 1.0 */
void qp_i2s_pack16(const void *w, size_t ldw, int64_t n, void *out);
QP_QDOT_PACKED_DECL(qp_tq2_0_packed_dot_q8k_ref);
QP_QDOT_PACKED_DECL(qp_tq2_0_packed_dot_q8k_vnni);
QP_QDOT_PACKED_DECL(qp_tq2_0_packed_dot_q8k_avx2);
QP_QDOT_PACKED_DECL(qp_tq2_0_packed_dot_q8k);
/* the same groups against int8 activations (encoding.h qp_vec_dot_i8_packed_fn) */
#define QP_I8_PACKED_DECL(NAME)                                                                  \
    void NAME(const void *packed, int64_t n_groups, const int8_t *a, size_t lda, int64_t n_tok, int64_t n, double *y, \
              size_t ldy)
QP_I8_PACKED_DECL(qp_tq2_0_packed_dot_i8_ref);
QP_I8_PACKED_DECL(qp_tq2_0_packed_dot_i8_vnni);
QP_I8_PACKED_DECL(qp_tq2_0_packed_dot_i8_avx2);
QP_I8_PACKED_DECL(qp_tq2_0_packed_dot_i8);

/* scalar references: w a row of n elements, xq the activations in Q8_0 / Q8_K blocks */
float qp_q8_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q8_0_dot_q8_0_tile_ref);
QP_QDOT_TILE_DECL(qp_q4_0_dot_q8_0_tile_ref);
QP_QDOT_TILE_DECL(qp_q5_0_dot_q8_0_tile_ref);
float qp_bq4_dot_q8_0_ref(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_bq4_dot_q8_0_tile_ref);
float qp_q4k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q4k_dot_q8k_tile_ref);
QP_QDOT_TILE_DECL(qp_q5k_dot_q8k_tile_ref);
QP_QDOT_TILE_DECL(qp_q6k_dot_q8k_tile_ref);
float qp_q5k_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_ref(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_tq2_0_dot_q8k_tile_ref);
QP_QDOT_TILE_DECL(qp_tq1_0_dot_q8k_tile_ref);
float qp_i2s_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_ref(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_ref(const void *w, const void *xq, int64_t n);
/* qdot_avx2.c (the _multi kernels: one row, n_tok tokens, y[t * ldy]) */
float qp_q8_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q8_0_dot_q8_0_tile_avx2);
QP_QDOT_TILE_DECL(qp_q4_0_dot_q8_0_tile_avx2);
QP_QDOT_TILE_DECL(qp_q5_0_dot_q8_0_tile_avx2);
float qp_bq4_dot_q8_0_avx2(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_bq4_dot_q8_0_tile_avx2);
float qp_q4k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
void qp_q4k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy);
void qp_q5k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy);
void qp_q6k_dot_q8k_multi_avx2(const void *w, const void *xq, size_t ldxq, int64_t n_tok, int64_t n, float *y, size_t ldy);
float qp_q5k_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_tq2_0_dot_q8k_tile_avx2);
QP_QDOT_TILE_DECL(qp_tq1_0_dot_q8k_tile_avx2);
float qp_i2s_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_avx2(const void *w, const void *xq, int64_t n);
/* qdot_avx512.c (AVX-512 VL + VNNI: vpdpbusd / vpdpwssd; _tile: encoding.h qp_vec_dot_q8_tile_fn) */
float qp_q8_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q8_0_dot_q8_0_tile_vnni);
QP_QDOT_TILE_DECL(qp_q4_0_dot_q8_0_tile_vnni);
QP_QDOT_TILE_DECL(qp_q5_0_dot_q8_0_tile_vnni);
float qp_bq4_dot_q8_0_vnni(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_bq4_dot_q8_0_tile_vnni);
float qp_q4k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q4k_dot_q8k_tile_vnni);
QP_QDOT_TILE_DECL(qp_q5k_dot_q8k_tile_vnni);
QP_QDOT_TILE_DECL(qp_q6k_dot_q8k_tile_vnni);
float qp_q5k_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_tq2_0_dot_q8k_tile_vnni);
QP_QDOT_TILE_DECL(qp_tq1_0_dot_q8k_tile_vnni);
float qp_i2s_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k_vnni(const void *w, const void *xq, int64_t n);
/* simd.c: dispatchers (traits vec_dot_q8) */
float qp_q8_0_dot_q8_0(const void *w, const void *xq, int64_t n);
float qp_q4_0_dot_q8_0(const void *w, const void *xq, int64_t n);
float qp_q5_0_dot_q8_0(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q8_0_dot_q8_0_tile);
QP_QDOT_TILE_DECL(qp_q4_0_dot_q8_0_tile);
QP_QDOT_TILE_DECL(qp_q5_0_dot_q8_0_tile);
float qp_bq4_dot_q8_0(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_bq4_dot_q8_0_tile);
float qp_q4k_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_q6k_dot_q8k(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_q4k_dot_q8k_tile);
QP_QDOT_TILE_DECL(qp_q5k_dot_q8k_tile);
QP_QDOT_TILE_DECL(qp_q6k_dot_q8k_tile);
float qp_q5k_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_tq2_0_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_tq1_0_dot_q8k(const void *w, const void *xq, int64_t n);
QP_QDOT_TILE_DECL(qp_tq2_0_dot_q8k_tile);
QP_QDOT_TILE_DECL(qp_tq1_0_dot_q8k_tile);
float qp_i2s_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_i2s_arm_dot_q8k(const void *w, const void *xq, int64_t n);
float qp_qk256_dot_q8k(const void *w, const void *xq, int64_t n);
#endif
