/* The request handling quantpack serve still writes itself (cli/http_util.h), on hostile input:
 * the input is up to three lines, a request target, a Range value and an If-None-Match value.
 * Beyond memory safety, each parser's contract is checked (abort on a violation):
 * - a normalised path is confined: no empty segment, no segment starting with '.', no '\\',
 *   no control byte, no leading or trailing '/', within QP_HTTP_PATH_MAX; normalising "/" + it
 *   again gives it back unchanged;
 * - a range is inside the representation, for sizes 0, 1, 1000, 2^40 and UINT64_MAX;
 * - an If-None-Match list matches our tag only when one of its elements is it (with or without
 *   W/): a tag with a byte added or removed never matches; If-Range never matches a weak tag.
 * The status qp_fuzz_one returns (the verdict a seed's name states, tests/fuzz/replay_main.c) is
 * the path normaliser's: QP_OK when the target is served from inside the folder, QP_ERR_FORMAT
 * (400/414) or QP_ERR_ARG (403: dot segment, backslash) when it is refused. */
#include <stdlib.h>
#include <string.h>

#include "cli/http_util.h"
#include "fuzz_util.h"

static void check(bool ok) {
    if (!ok) abort();
}

static qp_status check_path(const char *raw, size_t len, qp_err *e) {
    char out[QP_HTTP_PATH_MAX + 1], again[QP_HTTP_PATH_MAX + 2];
    size_t n = 0, n2 = 0;
    qp_http_path_status ps = qp_http_path_normalize(raw, len, out, sizeof out, &n);
    if (ps == QP_HTTP_PATH_FORBIDDEN) return qp_fail(e, QP_ERR_ARG, "path refused (403)");
    if (ps != QP_HTTP_PATH_OK) return qp_fail(e, QP_ERR_FORMAT, "bad path (%d)", (int)ps);
    check(n == strlen(out) && n <= QP_HTTP_PATH_MAX);
    check(n == 0 || (out[0] != '/' && out[n - 1] != '/'));
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        check(c >= 0x20 && c != 0x7f && c != '\\');
        bool seg_start = i == 0 || out[i - 1] == '/';
        check(!seg_start || (c != '.' && c != '/'));
    }
    again[0] = '/';
    memcpy(again + 1, out, n + 1);
    char out2[QP_HTTP_PATH_MAX + 1];
    /* '%', '?' and '#' decoded from escapes would be read differently the second time */
    if (strpbrk(out, "%?#")) return QP_OK;
    check(qp_http_path_normalize(again, n + 1, out2, sizeof out2, &n2) == QP_HTTP_PATH_OK);
    check(n2 == n && memcmp(out, out2, n) == 0);
    return QP_OK;
}

static void check_range(const char *value) {
    static const uint64_t sizes[] = {0, 1, 1000, (uint64_t)1 << 40, UINT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t first = 7, last = 7;
        qp_http_range_status s = qp_http_range_parse(value, sizes[i], &first, &last);
        if (s == QP_HTTP_RANGE_OK) check(first <= last && last < sizes[i]);
        else check(first == 7 && last == 7);
    }
}

static void check_etag(const char *value) {
    static const char *const tags[] = {"\"sha256-00ff\"", "W/\"3e8-5f5e100\"", "\"\""};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        const char *tag = tags[i];
        const char *opaque = tag[0] == 'W' ? tag + 2 : tag;
        bool m = qp_http_etag_none_match(value, tag);
        size_t lead = strspn(value, " \t"), star = strspn(value + lead, "*");
        bool any = star == 1 && value[lead + 1 + strspn(value + lead + 1, " \t")] == '\0';
        if (m && !any) check(strstr(value, opaque) != NULL);
        if (tag[0] == 'W') check(!qp_http_etag_if_range(value, tag));
        if (qp_http_etag_if_range(value, tag)) check(strstr(value, tag) != NULL);
    }
    /* exact, weak and listed forms of a tag match; one byte more or less does not */
    char buf[96];
    check(qp_http_etag_none_match("\"sha256-00ff\"", "\"sha256-00ff\""));
    snprintf(buf, sizeof buf, "W/\"sha256-00ff\" , \"x\"");
    check(qp_http_etag_none_match(buf, "\"sha256-00ff\""));
    check(!qp_http_etag_none_match("\"sha256-00ff0\"", "\"sha256-00ff\""));
    check(!qp_http_etag_none_match("x\"sha256-00ff\"", "\"sha256-00ff\""));
}

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    if (size > 8192) return qp_fail(e, QP_ERR_LIMIT, "input over 8192 bytes");
    char *text = malloc(size + 1);
    if (!text) return qp_fail(e, QP_ERR_IO, "harness: out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    char *line[3] = {text, NULL, NULL};
    size_t len0 = size;
    char *nl = memchr(text, '\n', size);
    if (nl) {
        len0 = (size_t)(nl - text);
        *nl = '\0';
        line[1] = nl + 1;
        char *nl2 = strchr(line[1], '\n');
        if (nl2) {
            *nl2 = '\0';
            line[2] = nl2 + 1;
        }
    }
    qp_status st = check_path(line[0], len0, e); /* may hold NUL bytes: the length counts */
    check_range(line[1] ? line[1] : line[0]);
    check_etag(line[2] ? line[2] : line[0]);
    free(text);
    return st;
}
