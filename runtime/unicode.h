/* Unicode helpers for the tokenizers: strict UTF-8 (core/utf8.h), general-category flags and the
 * WordPiece normaliser. Tables are generated (runtime/unicode_tables.c by
 * scripts/gen_unicode_tables.py); the Unicode version is qp_unicode_version. */
#ifndef QP_UNICODE_H
#define QP_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/utf8.h" /* qp_utf8_decode / encode / valid */

/* Category flags: the major general category (exactly one of L..C) plus WS for White_Space. */
enum {
    QP_UC_L = 1,   /* letters \p{L} */
    QP_UC_N = 2,   /* numbers \p{N} */
    QP_UC_P = 4,   /* punctuation \p{P} */
    QP_UC_S = 8,   /* symbols \p{S} */
    QP_UC_M = 16,  /* marks \p{M} */
    QP_UC_Z = 32,  /* separators \p{Z} */
    QP_UC_C = 64,  /* other \p{C}, including unassigned code points and surrogates */
    QP_UC_WS = 128 /* White_Space property (\s) */
};

typedef struct qp_unicode_range {
    uint32_t lo, hi;
    uint8_t flags;
} qp_unicode_range;

typedef struct qp_unicode_map {
    uint32_t cp;
    char utf8[16]; /* NUL-terminated replacement */
} qp_unicode_map;

extern const char qp_unicode_version[];
extern const qp_unicode_range qp_unicode_ranges[];
extern const size_t qp_unicode_n_ranges;
extern const qp_unicode_map qp_unicode_wpm_map[];
extern const size_t qp_unicode_n_wpm_map;

#define QP_UNICODE_REPLACEMENT 0xFFFDu

/* Flags of a code point (values above U+10FFFF give QP_UC_C). */
unsigned qp_unicode_flags(uint32_t cp);

/* Length of the UTF-8 sequence that lead byte c announces (1 for continuation / invalid bytes),
 * as llama.cpp's and sentencepiece's character splitting does. */
static inline size_t qp_utf8_lead_len(uint8_t c) {
    static const uint8_t k[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return k[c >> 4];
}

/* WordPiece (BERT uncased) normalisation of one code point: lower-case, NFD, marks (Mn)
 * dropped. Writes up to 16 bytes of UTF-8 into out and returns the length (0 when the code point
 * disappears). */
size_t qp_unicode_wpm_normalize(uint32_t cp, char out[16]);

#endif
