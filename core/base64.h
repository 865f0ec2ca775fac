/* Standard base64 (RFC 4648, '+' '/', '=' padding), as tokenizer.json stores a SentencePiece
 * precompiled_charsmap. */
#ifndef QP_BASE64_H
#define QP_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes qp_base64_decode writes at most for n characters. */
static inline size_t qp_base64_decoded_max(size_t n) { return n / 4 * 3 + 3; }

/* Decodes s[0..n) into out (qp_base64_decoded_max(n) bytes); false on a character outside the
 * alphabet, padding before the end or a length that is not a multiple of 4. */
bool qp_base64_decode(const char *s, size_t n, uint8_t *out, size_t *out_len);

/* Encodes n bytes into out (4 * ((n + 2) / 3) + 1 bytes, NUL-terminated). */
void qp_base64_encode(const uint8_t *p, size_t n, char *out);

#endif
