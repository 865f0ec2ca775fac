/* Strict UTF-8 decoding, encoding and validation (core/utf8.h). */
#include "core/utf8.h"

size_t qp_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, size_t *bad) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        v = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        v = c & 0x0Fu;
        if (c == 0xE0) lo = 0xA0;      /* no overlong forms */
        else if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        v = c & 0x07u;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t i = 1; i <= need; i++) {
        uint8_t b = i < len ? s[i] : 0;
        uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (i >= len || b < l || b > h) {
            *bad = i;
            return 0;
        }
        v = (v << 6) | (b & 0x3Fu);
    }
    *cp = v;
    return need + 1;
}

size_t qp_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t qp_utf8_invalid_at(const void *s, size_t len) {
    const uint8_t *p = s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t bad, n = qp_utf8_decode(p + i, len - i, &cp, &bad);
        if (n == 0) return i;
        i += n;
    }
    return len;
}
