/* Growable byte buffer: checked doubling, sticky failure, untruncated printf. */
#include "core/buf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "quantpack/core.h"

#define QP_BUF_MIN_CAP 256
#define QP_BUF_MAX ((size_t)PTRDIFF_MAX) /* no object can be larger (malloc refuses more) */

bool qp_buf_reserve(qp_buf *b, size_t extra) {
    if (b->oom) return false;
    size_t need;
    if (!qp_size_add(b->len, extra, &need) || !qp_size_add(need, 1, &need) || need > QP_BUF_MAX) {
        b->oom = true;
        return false;
    }
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : QP_BUF_MIN_CAP;
    while (cap < need) cap = cap > QP_BUF_MAX / 2 ? QP_BUF_MAX : cap * 2;
    uint8_t *p = qp_realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

uint8_t *qp_buf_grow(qp_buf *b, size_t n) {
    if (!qp_buf_reserve(b, n)) return NULL;
    uint8_t *at = b->p + b->len;
    b->len += n;
    b->p[b->len] = '\0';
    return at;
}

bool qp_buf_put(qp_buf *b, const void *data, size_t n) {
    uint8_t *at = qp_buf_grow(b, n);
    if (at && n) memcpy(at, data, n);
    return at != NULL;
}

bool qp_buf_str(qp_buf *b, const char *s) { return qp_buf_put(b, s, strlen(s)); }

bool qp_buf_printf(qp_buf *b, const char *fmt, ...) {
    if (b->oom) return false;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return false;
    }
    if (!qp_buf_reserve(b, (size_t)n)) return false;
    va_start(ap, fmt);
    int k = vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (k != n) { /* the arguments formatted differently the second time: a broken invariant */
        b->p[b->len] = '\0';
        b->oom = true;
        return false;
    }
    b->len += (size_t)n;
    return true;
}

bool qp_buf_json_str(qp_buf *b, const char *s, size_t n) {
    qp_buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': qp_buf_put(b, "\\\"", 2); break;
        case '\\': qp_buf_put(b, "\\\\", 2); break;
        case '\b': qp_buf_put(b, "\\b", 2); break;
        case '\f': qp_buf_put(b, "\\f", 2); break;
        case '\n': qp_buf_put(b, "\\n", 2); break;
        case '\r': qp_buf_put(b, "\\r", 2); break;
        case '\t': qp_buf_put(b, "\\t", 2); break;
        default:
            if (c < 0x20) qp_buf_printf(b, "\\u%04x", (unsigned)c);
            else qp_buf_put(b, &s[i], 1);
        }
    }
    return qp_buf_put(b, "\"", 1);
}

bool qp_buf_u8(qp_buf *b, uint8_t v) { return qp_buf_put(b, &v, 1); }
bool qp_buf_u16le(qp_buf *b, uint16_t v) {
    uint8_t *p = qp_buf_grow(b, 2);
    if (p) qp_store_u16le(p, v);
    return p != NULL;
}
bool qp_buf_u32le(qp_buf *b, uint32_t v) {
    uint8_t *p = qp_buf_grow(b, 4);
    if (p) qp_store_u32le(p, v);
    return p != NULL;
}
bool qp_buf_u64le(qp_buf *b, uint64_t v) {
    uint8_t *p = qp_buf_grow(b, 8);
    if (p) qp_store_u64le(p, v);
    return p != NULL;
}

void qp_buf_clear(qp_buf *b) {
    b->len = 0;
    if (b->p) b->p[0] = '\0';
}

uint8_t *qp_buf_take(qp_buf *b, size_t *len) {
    uint8_t *p = b->p;
    if (len) *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void qp_buf_free(qp_buf *b) {
    qp_free(b->p);
    *b = (qp_buf){0};
}
