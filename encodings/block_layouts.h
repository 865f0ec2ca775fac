/* Block layouts of every block encoding, named once. The structs document the byte layout and
 * pin it with static asserts (size and field offsets); the code reads and writes blocks through
 * byte offsets and the qp_load_* / qp_store_* helpers, never by casting file bytes to a struct.
 * Every size here is the one in the traits table (encodings.c uses these names) and in
 * encodings/encodings.md, encodings/enc_kquants.md, encodings/enc_ternary.md, encodings/enc_bq4.md. */
#ifndef QP_BLOCK_LAYOUTS_H
#define QP_BLOCK_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

#define QP_QK 32    /* elements of a llama.cpp legacy block (Q4_0 .. Q8_1), BQ4, I8_ROW, ... */
#define QP_QK_K 256 /* elements of a llama.cpp k-quant super-block (Q2_K .. Q8_K, TQ*, IQ*) */

typedef uint16_t qp_half; /* IEEE binary16 bits, little-endian on disk */

/* ---- llama.cpp legacy blocks (32 elements) ----------------------------------------------------- */
typedef struct { qp_half d; uint8_t qs[QP_QK / 2]; } qp_block_q4_0;
typedef struct { qp_half d, m; uint8_t qs[QP_QK / 2]; } qp_block_q4_1;
typedef struct { qp_half d; uint8_t qh[4]; uint8_t qs[QP_QK / 2]; } qp_block_q5_0;
typedef struct { qp_half d, m; uint8_t qh[4]; uint8_t qs[QP_QK / 2]; } qp_block_q5_1;
typedef struct { qp_half d; int8_t qs[QP_QK]; } qp_block_q8_0;
typedef struct { qp_half d, s; int8_t qs[QP_QK]; } qp_block_q8_1;
#define QP_Q4_0_BYTES 18
#define QP_Q4_1_BYTES 20
#define QP_Q5_0_BYTES 22
#define QP_Q5_1_BYTES 24
#define QP_Q8_0_BYTES 34
#define QP_Q8_1_BYTES 36
_Static_assert(sizeof(qp_block_q4_0) == QP_Q4_0_BYTES && offsetof(qp_block_q4_0, qs) == 2, "Q4_0");
_Static_assert(sizeof(qp_block_q4_1) == QP_Q4_1_BYTES && offsetof(qp_block_q4_1, qs) == 4, "Q4_1");
_Static_assert(sizeof(qp_block_q5_0) == QP_Q5_0_BYTES && offsetof(qp_block_q5_0, qs) == 6, "Q5_0");
_Static_assert(sizeof(qp_block_q5_1) == QP_Q5_1_BYTES && offsetof(qp_block_q5_1, qs) == 8, "Q5_1");
_Static_assert(sizeof(qp_block_q8_0) == QP_Q8_0_BYTES && offsetof(qp_block_q8_0, qs) == 2, "Q8_0");
_Static_assert(sizeof(qp_block_q8_1) == QP_Q8_1_BYTES && offsetof(qp_block_q8_1, qs) == 4, "Q8_1");

/* ---- llama.cpp k-quant super-blocks (256 elements) --------------------------------------------- */
typedef struct { uint8_t scales[16]; uint8_t qs[QP_QK_K / 4]; qp_half d, dmin; } qp_block_q2_k;
typedef struct { uint8_t hmask[QP_QK_K / 8]; uint8_t qs[QP_QK_K / 4]; uint8_t scales[12]; qp_half d; } qp_block_q3_k;
typedef struct { qp_half d, dmin; uint8_t scales[12]; uint8_t qs[QP_QK_K / 2]; } qp_block_q4_k;
typedef struct { qp_half d, dmin; uint8_t scales[12]; uint8_t qh[QP_QK_K / 8]; uint8_t qs[QP_QK_K / 2]; } qp_block_q5_k;
typedef struct { uint8_t ql[QP_QK_K / 2]; uint8_t qh[QP_QK_K / 4]; int8_t scales[QP_QK_K / 16]; qp_half d; } qp_block_q6_k;
typedef struct { float d; int8_t qs[QP_QK_K]; int16_t bsums[QP_QK_K / 16]; } qp_block_q8_k;
#define QP_Q2_K_BYTES 84
#define QP_Q3_K_BYTES 110
#define QP_Q4_K_BYTES 144
#define QP_Q5_K_BYTES 176
#define QP_Q6_K_BYTES 210
#define QP_Q8_K_BYTES 292
#define QP_Q4_K_OFF_SCALES 4
#define QP_Q4_K_OFF_QS 16
#define QP_Q5_K_OFF_QH 16
#define QP_Q5_K_OFF_QS 48
#define QP_Q6_K_OFF_QH 128
#define QP_Q6_K_OFF_SCALES 192
#define QP_Q6_K_OFF_D 208
#define QP_Q8_K_OFF_QS 4
#define QP_Q8_K_OFF_BSUMS 260
_Static_assert(sizeof(qp_block_q2_k) == QP_Q2_K_BYTES, "Q2_K");
_Static_assert(sizeof(qp_block_q3_k) == QP_Q3_K_BYTES, "Q3_K");
_Static_assert(sizeof(qp_block_q4_k) == QP_Q4_K_BYTES && offsetof(qp_block_q4_k, scales) == QP_Q4_K_OFF_SCALES &&
               offsetof(qp_block_q4_k, qs) == QP_Q4_K_OFF_QS, "Q4_K");
_Static_assert(sizeof(qp_block_q5_k) == QP_Q5_K_BYTES && offsetof(qp_block_q5_k, qh) == QP_Q5_K_OFF_QH &&
               offsetof(qp_block_q5_k, qs) == QP_Q5_K_OFF_QS, "Q5_K");
_Static_assert(sizeof(qp_block_q6_k) == QP_Q6_K_BYTES && offsetof(qp_block_q6_k, qh) == QP_Q6_K_OFF_QH &&
               offsetof(qp_block_q6_k, scales) == QP_Q6_K_OFF_SCALES && offsetof(qp_block_q6_k, d) == QP_Q6_K_OFF_D,
               "Q6_K");
_Static_assert(sizeof(qp_block_q8_k) == QP_Q8_K_BYTES && offsetof(qp_block_q8_k, qs) == QP_Q8_K_OFF_QS &&
               offsetof(qp_block_q8_k, bsums) == QP_Q8_K_OFF_BSUMS, "Q8_K");

/* ---- ternary (enc_ternary.md) ------------------------------------------------------------------ */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; qp_half d; } qp_block_tq1_0; /* base-3, 5 per byte */
typedef struct { uint8_t qs[QP_QK_K / 4]; qp_half d; } qp_block_tq2_0;        /* 2 bits per element */
typedef struct { uint8_t qs[8]; qp_half d; } qp_block_bitnet32f16;            /* BitNet-rs */
#define QP_TQ1_0_BYTES 54
#define QP_TQ1_0_OFF_QH 48
#define QP_TQ1_0_OFF_D 52
#define QP_TQ2_0_BYTES 66
#define QP_TQ2_0_OFF_D 64
#define QP_BITNET32F16_BYTES 10
_Static_assert(sizeof(qp_block_tq1_0) == QP_TQ1_0_BYTES && offsetof(qp_block_tq1_0, qh) == QP_TQ1_0_OFF_QH &&
               offsetof(qp_block_tq1_0, d) == QP_TQ1_0_OFF_D, "TQ1_0");
_Static_assert(sizeof(qp_block_tq2_0) == QP_TQ2_0_BYTES && offsetof(qp_block_tq2_0, d) == QP_TQ2_0_OFF_D, "TQ2_0");
_Static_assert(sizeof(qp_block_bitnet32f16) == QP_BITNET32F16_BYTES, "BitNet32F16");
/* Scale-free ternary codes, 2 bits per element (the scale is a trailer or a sibling tensor). */
#define QP_I2S_BLOCK 128        /* microsoft/BitNet x86 I2_S: 128 elements in 32 bytes */
#define QP_I2S_BYTES 32
#define QP_I2S_TRAILER 32       /* f32 tensor scale + 28 zero bytes after the blocks */
#define QP_I2S_ARM_BLOCK 64     /* microsoft/BitNet ARM I2_S: 64 elements in 16 bytes */
#define QP_I2S_ARM_BYTES 16
#define QP_QK256_BLOCK 256      /* BitNet-rs GgmlQk256NoScale: 256 elements in 64 bytes */
#define QP_QK256_BYTES 64
#define QP_SPLIT32_BYTES 8      /* BitNet-rs Split32WithSibling: 32 elements in 8 bytes */
#define QP_TRLM_T2_BLOCK 4      /* TRLM v1 ternary rows: 4 codes per byte, f32 tensor-scale trailer */
#define QP_TRLM_T2_TRAILER 4
_Static_assert(QP_I2S_BLOCK / 4 == QP_I2S_BYTES && QP_I2S_ARM_BLOCK / 4 == QP_I2S_ARM_BYTES &&
               QP_QK256_BLOCK / 4 == QP_QK256_BYTES && QP_QK / 4 == QP_SPLIT32_BYTES, "2-bit codes");

/* ---- others ------------------------------------------------------------------------------------ */
typedef struct { qp_half scale; int8_t zero; uint8_t pad; uint8_t qs[QP_QK / 2]; } qp_block_bq4;
typedef struct { float d; int8_t qs[QP_QK]; } qp_block_i8_row;
typedef struct { uint8_t e; uint8_t qs[QP_QK / 2]; } qp_block_mxfp4;
#define QP_BQ4_BYTES 20
#define QP_I8_ROW_BYTES 36
#define QP_MXFP4_BYTES 17
#define QP_G128_BLOCK 128       /* TRLM Q1_0_128 / TG128 groups (enc_trlm_groups.md) */
#define QP_Q1_0_128_BYTES 18    /* f16 d + 128 sign bits */
#define QP_TG128_BYTES 34       /* f16 d + 128 2-bit codes */
_Static_assert(sizeof(qp_block_bq4) == QP_BQ4_BYTES && offsetof(qp_block_bq4, qs) == 4, "BQ4");
_Static_assert(sizeof(qp_block_i8_row) == QP_I8_ROW_BYTES && offsetof(qp_block_i8_row, qs) == 4, "I8_ROW");
_Static_assert(sizeof(qp_block_mxfp4) == QP_MXFP4_BYTES, "MXFP4");

/* i-quants (known by size only: read, inspected and copied, never decoded) */
#define QP_IQ2_XXS_BYTES 66
#define QP_IQ2_XS_BYTES 74
#define QP_IQ3_XXS_BYTES 98
#define QP_IQ1_S_BYTES 50
#define QP_IQ4_NL_BYTES 18
#define QP_IQ3_S_BYTES 110
#define QP_IQ2_S_BYTES 82
#define QP_IQ4_XS_BYTES 136
#define QP_IQ1_M_BYTES 56

#endif
