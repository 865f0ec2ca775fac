/* A growable byte buffer for building headers, manifests and other small outputs in memory.
 *
 * Appends never fail loudly: the first growth that cannot be made (out of memory, or a size past
 * PTRDIFF_MAX, which no allocation can reach) sets the sticky `oom` flag, and every later append is a no-op. Callers
 * build the whole output, then check `oom` once (and report QP_ERR_NOMEM). The contents are
 * always followed by a NUL byte once anything was appended, so text can be used as a C string.
 * A zeroed qp_buf is empty and ready; qp_buf_free releases it. Internal to the library (core/). */
#ifndef QP_CORE_BUF_H
#define QP_CORE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct qp_buf {
    uint8_t *p;     /* NULL until the first append; p[len] == '\0' after it */
    size_t len;
    size_t cap;     /* bytes allocated (>= len + 1 once p is set) */
    bool oom;       /* sticky: a growth failed; the contents stop at the last complete append */
} qp_buf;

/* Makes room for `extra` more bytes (and the NUL after them). False when the buffer has failed. */
bool qp_buf_reserve(qp_buf *b, size_t extra);
/* Appends n bytes and returns where they go (the caller fills them), or NULL once failed. */
uint8_t *qp_buf_grow(qp_buf *b, size_t n);
/* Appends n bytes; returns !b->oom. */
bool qp_buf_put(qp_buf *b, const void *data, size_t n);
bool qp_buf_str(qp_buf *b, const char *s); /* strlen(s) bytes, no NUL */
/* printf-style append: the whole formatted text or (on failure, including an encoding error
 * from vsnprintf) nothing and the buffer fails; never a silent truncation. */
bool qp_buf_printf(qp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s[0..n): '"', '\\' and every byte below 0x20 escaped (\b \f \n \r \t
 * in their short forms, others as \u00XX); all other bytes (UTF-8) verbatim. */
bool qp_buf_json_str(qp_buf *b, const char *s, size_t n);
/* Little-endian integers. */
bool qp_buf_u8(qp_buf *b, uint8_t v);
bool qp_buf_u16le(qp_buf *b, uint16_t v);
bool qp_buf_u32le(qp_buf *b, uint32_t v);
bool qp_buf_u64le(qp_buf *b, uint64_t v);

/* Empties the buffer (keeps its memory and the sticky flag). */
void qp_buf_clear(qp_buf *b);
/* Hands the bytes to the caller (free with qp_free; NULL when nothing was appended) and leaves
 * the buffer empty. */
uint8_t *qp_buf_take(qp_buf *b, size_t *len);
void qp_buf_free(qp_buf *b); /* back to the zeroed state; a zeroed buffer is fine */

#endif
