/* Base64 (core/base64.h). */
#include "core/base64.h"

static const char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int digit(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

bool qp_base64_decode(const char *s, size_t n, uint8_t *out, size_t *out_len) {
    if (n % 4) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int pad = (s[i + 3] == '=') + (s[i + 3] == '=' && s[i + 2] == '=');
        if (pad && i + 4 != n) return false;
        uint32_t v = 0;
        for (int j = 0; j < 4; j++) {
            int d = j >= 4 - pad ? 0 : digit(s[i + j]);
            if (d < 0) return false;
            v = v << 6 | (uint32_t)d;
        }
        out[k++] = (uint8_t)(v >> 16);
        if (pad < 2) out[k++] = (uint8_t)(v >> 8);
        if (pad < 1) out[k++] = (uint8_t)v;
    }
    *out_len = k;
    return true;
}

void qp_base64_encode(const uint8_t *p, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[k++] = k_alphabet[v >> 18 & 63];
        out[k++] = k_alphabet[v >> 12 & 63];
        out[k++] = i + 1 < n ? k_alphabet[v >> 6 & 63] : '=';
        out[k++] = i + 2 < n ? k_alphabet[v & 63] : '=';
    }
    out[k] = '\0';
}
