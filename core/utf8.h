/* Strict UTF-8 (Unicode 15, table 3-7 "well-formed byte sequences"): no overlong forms, no
 * surrogates U+D800..U+DFFF, nothing above U+10FFFF, no truncated sequence. The one validator
 * for readers (safetensors headers, Trillim manifests) and the tokenizers. Internal (core/). */
#ifndef QP_CORE_UTF8_H
#define QP_CORE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes one well-formed UTF-8 sequence at s[0..len) (len > 0). Returns its length (1..4) and
 * writes *cp; for an ill-formed sequence returns 0 and writes in *bad the length of its maximal
 * subpart (1..3: the bytes to replace with one U+FFFD, as WHATWG / Unicode 3.9 "substitution of
 * maximal subparts"). */
size_t qp_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, size_t *bad);

/* Encodes cp (<= U+10FFFF) into out; returns 1..4. */
size_t qp_utf8_encode(uint32_t cp, char out[4]);

/* Offset of the first byte of the first ill-formed sequence in s[0..len), or len when all of it
 * is well-formed. */
size_t qp_utf8_invalid_at(const void *s, size_t len);

/* True when s[0..len) is well-formed UTF-8. */
static inline bool qp_utf8_valid(const void *s, size_t len) { return qp_utf8_invalid_at(s, len) == len; }

#endif
