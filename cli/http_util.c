/* Request-path normalisation, Range parsing and entity-tag comparison (cli/http_util.h). */
#include "cli/http_util.h"

#include <stdbool.h>
#include <string.h>

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Checks the segment out[start, end) and returns its status. */
static qp_http_path_status check_segment(const char *out, size_t start, size_t end) {
    if (end - start > 255) return QP_HTTP_PATH_TOO_LONG;
    if (out[start] == '.') return QP_HTTP_PATH_FORBIDDEN;
    return QP_HTTP_PATH_OK;
}

qp_http_path_status qp_http_path_normalize(const char *raw, size_t raw_len, char *out, size_t cap,
                                           size_t *out_len) {
    if (raw_len == 0 || raw[0] != '/' || cap == 0) return QP_HTTP_PATH_BAD;
    size_t limit = cap < QP_HTTP_PATH_MAX + 1 ? cap : QP_HTTP_PATH_MAX + 1; /* with the NUL */
    size_t n = 0, seg_start = 0;
    bool in_segment = false;
    int depth = 0;
    for (size_t i = 0; i < raw_len && raw[i] != '?' && raw[i] != '#'; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == '%') {
            int hi = i + 1 < raw_len ? hex_value((unsigned char)raw[i + 1]) : -1;
            int lo = hi >= 0 && i + 2 < raw_len ? hex_value((unsigned char)raw[i + 2]) : -1;
            if (lo < 0) return QP_HTTP_PATH_BAD;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (c < 0x20 || c == 0x7f) return QP_HTTP_PATH_BAD;
        if (c == '\\') return QP_HTTP_PATH_FORBIDDEN;
        if (c == '/') { /* a segment ends; empty ones are dropped */
            if (in_segment) {
                qp_http_path_status s = check_segment(out, seg_start, n);
                if (s != QP_HTTP_PATH_OK) return s;
            }
            in_segment = false;
            continue;
        }
        if (!in_segment) {
            if (++depth > QP_HTTP_PATH_DEPTH) return QP_HTTP_PATH_TOO_LONG;
            if (n > 0) {
                if (n + 1 >= limit) return QP_HTTP_PATH_TOO_LONG;
                out[n++] = '/';
            }
            seg_start = n;
            in_segment = true;
        }
        if (n + 1 >= limit) return QP_HTTP_PATH_TOO_LONG;
        out[n++] = (char)c;
    }
    if (in_segment) {
        qp_http_path_status s = check_segment(out, seg_start, n);
        if (s != QP_HTTP_PATH_OK) return s;
    }
    out[n] = '\0';
    *out_len = n;
    return QP_HTTP_PATH_OK;
}

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static const char *skip_ows(const char *p) {
    while (is_ows(*p)) p++;
    return p;
}

/* Reads 1*DIGIT at *p (saturating at UINT64_MAX) and moves *p past it; false when none. */
static bool read_u64(const char **p, uint64_t *v) {
    const char *s = *p;
    if (*s < '0' || *s > '9') return false;
    uint64_t x = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        x = x > (UINT64_MAX - d) / 10 ? UINT64_MAX : x * 10 + d;
    }
    *p = s;
    *v = x;
    return true;
}

static bool starts_with_nocase(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) {
        char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        if (c != *prefix) return false;
    }
    return true;
}

qp_http_range_status qp_http_range_parse(const char *value, uint64_t size, uint64_t *first,
                                         uint64_t *last) {
    if (!value) return QP_HTTP_RANGE_NONE;
    const char *p = skip_ows(value);
    if (!starts_with_nocase(p, "bytes=")) return QP_HTTP_RANGE_NONE;
    p += 6;
    int count = 0;
    bool suffix = false;
    uint64_t a = 0, b = UINT64_MAX;
    for (;;) {
        p = skip_ows(p);
        if (*p == ',') { /* empty list element */
            p++;
            continue;
        }
        if (*p == '\0') break;
        if (++count > 1) return QP_HTTP_RANGE_NONE; /* several ranges: the whole file */
        if (*p == '-') {
            p++;
            suffix = true;
            if (!read_u64(&p, &a)) return QP_HTTP_RANGE_NONE;
        } else {
            if (!read_u64(&p, &a) || *p != '-') return QP_HTTP_RANGE_NONE;
            p++;
            if (*p >= '0' && *p <= '9') read_u64(&p, &b);
            if (b < a) return QP_HTTP_RANGE_NONE; /* invalid: last-pos < first-pos */
        }
        p = skip_ows(p);
        if (*p != ',' && *p != '\0') return QP_HTTP_RANGE_NONE;
    }
    if (count == 0) return QP_HTTP_RANGE_NONE;
    if (size == 0) return QP_HTTP_RANGE_UNSATISFIABLE;
    if (suffix) {
        if (a == 0) return QP_HTTP_RANGE_UNSATISFIABLE;
        *first = a >= size ? 0 : size - a;
        *last = size - 1;
    } else {
        if (a >= size) return QP_HTTP_RANGE_UNSATISFIABLE;
        *first = a;
        *last = b >= size ? size - 1 : b;
    }
    return QP_HTTP_RANGE_OK;
}

/* Reads one entity-tag at *p: [W/] DQUOTE *etagc DQUOTE, etagc = %x21 / %x23-7E / %x80-FF.
 * *opaque / *opaque_len: the quoted opaque-tag (quotes included). */
static bool read_etag(const char **p, const char **opaque, size_t *opaque_len, bool *weak) {
    const char *s = *p;
    *weak = s[0] == 'W' && s[1] == '/';
    if (*weak) s += 2;
    if (*s != '"') return false;
    const char *start = s++;
    for (; *s != '"'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x21 || c == 0x7f) return false; /* also the end of the string */
    }
    s++;
    *opaque = start;
    *opaque_len = (size_t)(s - start);
    *p = s;
    return true;
}

/* Parses our own tag: the whole of etag must be one entity-tag. */
static bool own_etag(const char *etag, const char **opaque, size_t *len, bool *weak) {
    return etag && read_etag(&etag, opaque, len, weak) && *etag == '\0';
}

bool qp_http_etag_none_match(const char *value, const char *etag) {
    const char *mine;
    size_t mine_len;
    bool mine_weak;
    if (!value || !own_etag(etag, &mine, &mine_len, &mine_weak)) return false;
    const char *p = skip_ows(value);
    if (*p == '*') return *skip_ows(p + 1) == '\0';
    bool matched = false;
    for (;;) {
        p = skip_ows(p);
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == '\0') break;
        const char *tag;
        size_t len;
        bool weak;
        if (!read_etag(&p, &tag, &len, &weak)) return false;
        p = skip_ows(p);
        if (*p != ',' && *p != '\0') return false;
        if (len == mine_len && memcmp(tag, mine, len) == 0) matched = true; /* weak comparison */
    }
    return matched;
}

bool qp_http_etag_if_range(const char *value, const char *etag) {
    const char *mine, *tag;
    size_t mine_len, len;
    bool mine_weak, weak;
    if (!value || !own_etag(etag, &mine, &mine_len, &mine_weak) || mine_weak) return false;
    const char *p = skip_ows(value);
    if (!read_etag(&p, &tag, &len, &weak) || weak || *skip_ows(p) != '\0') return false;
    return len == mine_len && memcmp(tag, mine, len) == 0;
}
