/* Private to runtime/tokenizer*.c: the small backtracking regex engine the byte-level BPE
 * pre-tokenizers run (tokenizer.md "Pre-tokenizer regexes"). It compiles only the patterns of the
 * table in tokenizer_bpe.c (never user input) and matches over code points with their category
 * flags, with llama.cpp's semantics: ECMAScript priority (leftmost alternative, greedy
 * quantifiers), \p{L}/\p{N}/\p{P}/\p{S}/\p{M} as llama.cpp's collapsed classes (ASCII by its
 * explicit lists, other code points by category, whitespace never in a category), \s = White_Space,
 * \d and \w ASCII. */
#ifndef QP_TOKENIZER_REGEX_H
#define QP_TOKENIZER_REGEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"

typedef struct qp_tok_regex qp_tok_regex;

/* Compiles pattern; CORRUPT naming the offset for syntax it does not know. */
QP_NODISCARD qp_status qp_tok_regex_compile(const char *pattern, qp_tok_regex **out, qp_err *e);
void qp_tok_regex_free(qp_tok_regex *re);

/* The matcher's backtracking stack, kept between calls (free .stack with qp_free). */
typedef struct qp_tok_regex_scratch {
    void *stack;
    int cap;
} qp_tok_regex_scratch;

/* A text being matched: code points and their qp_unicode_flags, positions [0, n). */
typedef struct qp_tok_regex_text {
    const uint32_t *cp;
    const uint8_t *fl;
    size_t n;
    uint64_t steps_left; /* backtracking budget; matching fails with LIMIT when it runs out */
    qp_tok_regex_scratch *scratch;
} qp_tok_regex_text;

/* The highest-priority match starting exactly at position at (not_null: an empty match does not
 * count). *len gets its length in code points, or -1 when there is none. */
QP_NODISCARD qp_status qp_tok_regex_match_at(const qp_tok_regex *re, qp_tok_regex_text *t, size_t at,
                                             bool not_null, int64_t *len, qp_err *e);

#endif
