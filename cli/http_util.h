/* The parts of HTTP request handling quantpack still writes itself, as pure functions (no I/O,
 * no allocation, no printing) so tests/fuzz/fuzz_serve_request.c can drive them: request-path
 * normalisation and confinement, Range parsing (RFC 9110 14.2) and entity-tag comparison for
 * If-None-Match / If-Range (RFC 9110 8.8.3, 13.1.2, 13.1.5). Everything else of HTTP (request
 * line, headers, framing, keep-alive, timeouts) is libmicrohttpd's (cli/http_server.h). */
#ifndef QP_CLI_HTTP_UTIL_H
#define QP_CLI_HTTP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest normalised path and the deepest one qp_http_path_normalize accepts. */
#define QP_HTTP_PATH_MAX 1024
#define QP_HTTP_PATH_DEPTH 16

typedef enum qp_http_path_status {
    QP_HTTP_PATH_OK = 0,
    QP_HTTP_PATH_BAD,       /* 400: no leading '/', a bad %XX escape, a NUL or control byte */
    QP_HTTP_PATH_FORBIDDEN, /* 403: a segment starting with '.' (".", "..", dot files and
                               folders), a backslash */
    QP_HTTP_PATH_TOO_LONG,  /* 414: over QP_HTTP_PATH_MAX bytes, QP_HTTP_PATH_DEPTH segments or
                               255 bytes in one segment */
} qp_http_path_status;

/* Normalises a raw request target ("/a/b%20c?x=1"): the query ('?') and fragment ('#') are cut,
 * %XX escapes decoded (a decoded '/' separates segments like a literal one), empty segments
 * dropped. On QP_HTTP_PATH_OK, out (cap bytes) holds the relative path "a/b c" (segments joined
 * by '/', no leading or trailing '/', "" for the root) and *out_len its length; every segment is
 * non-empty, starts with no '.', and has no '\\', no byte below 0x20 and no 0x7f. out is
 * unspecified on any other status. raw need not be NUL-terminated. */
qp_http_path_status qp_http_path_normalize(const char *raw, size_t raw_len, char *out, size_t cap,
                                           size_t *out_len);

typedef enum qp_http_range_status {
    QP_HTTP_RANGE_NONE = 0,      /* no usable Range: answer 200 with the whole representation
                                    (absent, another unit, malformed, or several ranges) */
    QP_HTTP_RANGE_OK,            /* one satisfiable range: 206 [*first, *last] */
    QP_HTTP_RANGE_UNSATISFIABLE, /* 416 with "Content-Range: bytes * /size" */
} qp_http_range_status;

/* Parses a Range header value (NULL: absent) against a representation of size bytes: "bytes=a-b",
 * "bytes=a-" and "bytes=-n" (unit case-insensitive, OWS around list elements, empty elements
 * ignored). A last-pos past the end is clipped; a first-pos at or past the end, a suffix of 0 or
 * any range of an empty representation is unsatisfiable; numbers saturate at UINT64_MAX. On
 * QP_HTTP_RANGE_OK, *first <= *last < size; *first and *last are untouched otherwise. */
qp_http_range_status qp_http_range_parse(const char *value, uint64_t size, uint64_t *first,
                                         uint64_t *last);

/* If-None-Match (weak comparison, RFC 9110 13.1.2): true when value is "*" or a comma-separated
 * list of entity-tags ([W/]"opaque") one of which has the same opaque-tag as etag (itself
 * [W/]"opaque"). A malformed list matches nothing (the condition is ignored), so a value that
 * merely contains etag, or a tag with a prefix or suffix added, never matches. */
bool qp_http_etag_none_match(const char *value, const char *etag);

/* If-Range (strong comparison, RFC 9110 13.1.5): true only when value is exactly one strong
 * entity-tag equal to etag and etag is strong; an HTTP-date or a weak tag never matches. */
bool qp_http_etag_if_range(const char *value, const char *etag);

#endif
