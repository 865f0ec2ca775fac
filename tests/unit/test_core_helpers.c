/* The shared core helpers: growable buffer (core/buf.h), UTF-8 validation (core/utf8.h), cJSON
 * checks (core/json.h), sticky first error (core/sticky.h). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/sticky.h"
#include "core/utf8.h"
#include "qp_test.h"
#include "quantpack/core.h"
#include "quantpack/quantpack.h"

static void test_buf_basic(void) {
    qp_buf b = {0};
    QP_CHECK(b.p == NULL && b.len == 0);
    QP_CHECK(qp_buf_str(&b, "ab") && b.len == 2 && strcmp((char *)b.p, "ab") == 0);
    QP_CHECK(qp_buf_put(&b, NULL, 0) && b.len == 2);
    QP_CHECK(qp_buf_u8(&b, 0x01) && qp_buf_u16le(&b, 0x0302) && qp_buf_u32le(&b, 0x07060504u) &&
             qp_buf_u64le(&b, 0x0f0e0d0c0b0a0908ull));
    QP_CHECK(b.len == 17);
    for (int i = 0; i < 15; i++) QP_CHECK_EQ_INT(b.p[2 + i], i + 1);
    QP_CHECK(b.p[b.len] == 0);
    qp_buf_clear(&b);
    QP_CHECK(b.len == 0 && b.p[0] == 0);
    /* growth across many doublings keeps every byte */
    for (int i = 0; i < 100000; i++) qp_buf_u8(&b, (uint8_t)(i * 7));
    bool same = b.len == 100000 && !b.oom;
    for (int i = 0; same && i < 100000; i++) same = b.p[i] == (uint8_t)(i * 7);
    QP_CHECK(same && b.cap >= b.len + 1);
    size_t n = 0;
    uint8_t *p = qp_buf_take(&b, &n);
    QP_CHECK(p && n == 100000 && b.p == NULL && b.len == 0 && b.cap == 0);
    qp_free(p);
    qp_buf_free(&b);
}

static void test_buf_printf(void) {
    qp_buf b = {0};
    QP_CHECK(qp_buf_printf(&b, "%d-%s", 42, "x") && strcmp((char *)b.p, "42-x") == 0);
    /* long formatted text is never cut (the old fixed 128-byte scratch truncated it) */
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    QP_CHECK(qp_buf_printf(&b, "<%s>", big));
    QP_CHECK(b.len == 4 + 2 + 4999 && b.p[4] == '<' && b.p[b.len - 1] == '>' && b.p[b.len] == 0);
    QP_CHECK(strspn((char *)b.p + 5, "q") == 4999);
    qp_buf_free(&b);
    QP_CHECK(b.p == NULL && !b.oom);
}

static void test_buf_json(void) {
    qp_buf b = {0};
    const char s[] = "a\"b\\c\n\t\r\b\f\x01\x1f\xc3\xa9";
    QP_CHECK(qp_buf_json_str(&b, s, sizeof s - 1));
    QP_CHECK_MSG(strcmp((char *)b.p, "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\xc3\xa9\"") == 0,
                 "%s", (char *)b.p);
    qp_buf_clear(&b);
    QP_CHECK(qp_buf_json_str(&b, "a\0b", 3) && b.len == 10 && memcmp(b.p, "\"a\\u0000b\"", 10) == 0);
    qp_buf_free(&b);
}

/* Allocation failure: the flag sticks, later appends do nothing, the contents stay whole. */
static void test_buf_oom(void) {
    for (long k = 0; k < 4; k++) {
        qp_buf b = {0};
        qp_alloc_fail_after(k);
        size_t last_ok = 0;
        for (int i = 0; i < 5000; i++) {
            if (qp_buf_printf(&b, "%04d,", i)) last_ok = b.len;
        }
        qp_alloc_fail_after(-1);
        QP_CHECK(b.oom);
        QP_CHECK(b.len == last_ok && b.len % 5 == 0);
        QP_CHECK(!qp_buf_str(&b, "x") && b.len == last_ok); /* sticky after memory returns */
        QP_CHECK(!qp_buf_u32le(&b, 1) && !qp_buf_grow(&b, 1) && b.len == last_ok);
        bool whole = true;
        for (size_t i = 0; i + 5 <= b.len && whole; i += 5) {
            char t[24];
            snprintf(t, sizeof t, "%04d,", (int)(i / 5));
            whole = memcmp(b.p + i, t, 5) == 0;
        }
        QP_CHECK(whole);
        qp_buf_free(&b);
        QP_CHECK(!b.oom && b.p == NULL);
    }
    /* sizes that overflow size_t or pass PTRDIFF_MAX fail without reaching the allocator (an
     * attempt would abort under ASan) */
    qp_buf b = {0};
    QP_CHECK(qp_buf_str(&b, "abc"));
    QP_CHECK(!qp_buf_reserve(&b, SIZE_MAX - 2) && b.oom && b.len == 3);
    QP_CHECK(qp_buf_grow(&b, 1) == NULL);
    qp_buf_free(&b);
    b = (qp_buf){0};
    QP_CHECK(!qp_buf_reserve(&b, (size_t)PTRDIFF_MAX) && b.oom); /* + the NUL passes the limit */
    qp_buf_free(&b);
    b = (qp_buf){0};
    QP_CHECK(!qp_buf_reserve(&b, SIZE_MAX / 2 + 10) && b.oom && b.p == NULL);
    qp_buf_free(&b);
}

/* Unicode 15 table 3-7, each boundary on both sides; the offset names the first bad sequence. */
static void test_utf8(void) {
    static const struct {
        const char *s;
        size_t bad; /* offset of the first ill-formed sequence; SIZE_MAX = valid */
    } k[] = {
        {"", SIZE_MAX},
        {"plain ascii \x7f", SIZE_MAX},
        {"\xc2\x80 \xdf\xbf", SIZE_MAX},                   /* U+0080, U+07FF */
        {"\xe0\xa0\x80 \xef\xbf\xbf", SIZE_MAX},           /* U+0800, U+FFFF */
        {"\xed\x9f\xbf \xee\x80\x80", SIZE_MAX},           /* U+D7FF, U+E000 around surrogates */
        {"\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf", SIZE_MAX},   /* U+10000, U+10FFFF */
        {"h\xc3\xa9llo \xf0\x9f\x98\x81", SIZE_MAX},
        {"a\xc0\xaf", 1},             /* overlong '/' in two bytes */
        {"ab\xc1\xbf", 2},            /* overlong U+007F */
        {"\xe0\x80\xaf", 0},          /* overlong '/' in three bytes */
        {"\xe0\x9f\xbf", 0},          /* overlong U+07FF */
        {"\xf0\x8f\xbf\xbf", 0},      /* overlong U+FFFF in four bytes */
        {"x\xed\xa0\x80", 1},         /* U+D800 */
        {"x\xed\xbf\xbf", 1},         /* U+DFFF */
        {"\xed\xa0\xbd\xed\xb8\x81", 0}, /* CESU-8 surrogate pair */
        {"\xf4\x90\x80\x80", 0},      /* U+110000 */
        {"\xf5\x80\x80\x80", 0},      /* lead bytes F5..FF */
        {"ok\xff", 2},
        {"\x80", 0},                  /* lone continuation */
        {"\xc3", 0},                  /* truncated at the end */
        {"\xe2\x82", 0},
        {"\xf0\x9f\x98", 0},
        {"\xc3(", 0},                 /* continuation missing */
        {"\xe2\x28\xa1", 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].s), want = k[i].bad == SIZE_MAX ? n : k[i].bad;
        size_t got = qp_utf8_invalid_at(k[i].s, n);
        QP_CHECK_MSG(got == want, "case %zu: first invalid at %zu, expected %zu", i, got, want);
        QP_CHECK(qp_utf8_valid(k[i].s, n) == (k[i].bad == SIZE_MAX));
    }
    QP_CHECK(!qp_utf8_valid("a\0\xff", 3) && qp_utf8_valid("a\0b", 3)); /* NUL is valid UTF-8 */
    /* every code point round-trips through encode/decode; surrogates never decode */
    bool all = true;
    for (uint32_t cp = 0; cp <= 0x10FFFF && all; cp++) {
        char b[4];
        size_t n = qp_utf8_encode(cp, b), bad = 0;
        uint32_t back = 0;
        size_t m = qp_utf8_decode((const uint8_t *)b, n, &back, &bad);
        bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
        all = surrogate ? m == 0 : m == n && back == cp && qp_utf8_valid(b, n);
    }
    QP_CHECK(all);
}

static void test_json(void) {
    cJSON *j = cJSON_Parse("{\"a\":5,\"neg\":-3,\"frac\":2.5,\"big\":9007199254740992,"
                           "\"bigger\":9007199254740994,\"huge\":1e300,\"s\":\"5\",\"n\":null,"
                           "\"t\":true,\"l\":[1],\"o\":{},\"z\":-0.0}");
    QP_CHECK(j != NULL);
    int64_t v = 77;
    uint64_t u = 77;
    QP_CHECK(qp_json_get_int(j, "a", 0, 10, &v) && v == 5);
    QP_CHECK(!qp_json_get_int(j, "a", 6, 10, &v) && v == 5); /* out of range: untouched */
    QP_CHECK(!qp_json_get_int(j, "a", 0, 4, &v));
    QP_CHECK(qp_json_get_int(j, "neg", -3, -3, &v) && v == -3);
    QP_CHECK(!qp_json_get_uint(j, "neg", &u) && u == 77);
    QP_CHECK(!qp_json_get_int(j, "frac", INT64_MIN, INT64_MAX, &v));
    QP_CHECK(qp_json_get_uint(j, "big", &u) && u == (uint64_t)1 << 53);
    QP_CHECK(!qp_json_get_uint(j, "bigger", &u) && !qp_json_get_int(j, "huge", 0, INT64_MAX, &v));
    QP_CHECK(!qp_json_get_int(j, "s", 0, 10, &v) && !qp_json_get_int(j, "n", 0, 10, &v));
    QP_CHECK(!qp_json_get_int(j, "missing", 0, 10, &v) && !qp_json_get_int(NULL, "a", 0, 10, &v));
    QP_CHECK(qp_json_get_int(j, "z", 0, 0, &v) && v == 0);
    cJSON *nan = cJSON_CreateNumber(NAN);
    QP_CHECK(!qp_json_int(nan, INT64_MIN, INT64_MAX, &v));
    cJSON_Delete(nan);
    static const struct { const char *key, *kind; } kinds[] = {
        {"a", "a number"}, {"neg", "negative"}, {"frac", "not an integer"}, {"bigger", "too large"},
        {"s", "a string"}, {"n", "null"}, {"t", "a boolean"}, {"l", "a list"}, {"o", "an object"},
        {"missing", "missing"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *k = qp_json_kind(cJSON_GetObjectItemCaseSensitive(j, kinds[i].key));
        QP_CHECK_MSG(strcmp(k, kinds[i].kind) == 0, "%s: %s", kinds[i].key, k);
    }
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK(qp_json_unique_keys(j, "f.json", "the top", &e) == QP_OK);
    QP_CHECK(qp_json_unique_keys(NULL, "f.json", "x", &e) == QP_OK);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"x\":1,\"y\":{\"k\":1,\"k\":2},\"z\":3,\"x\":4}");
    QP_CHECK(qp_json_unique_keys(j, "f.json", "the top", &e) == QP_ERR_CORRUPT);
    QP_CHECK_MSG(strcmp(e.msg, "f.json: duplicate key 'x' in the top") == 0, "%s", e.msg);
    qp_err_clear(&e);
    QP_CHECK(qp_json_unique_keys(cJSON_GetObjectItemCaseSensitive(j, "y"), "f.json", "y", &e) ==
             QP_ERR_CORRUPT);
    qp_err_clear(&e);
    qp_alloc_fail_after(0);
    qp_status s = qp_json_unique_keys(j, "f.json", "the top", &e);
    qp_alloc_fail_after(-1);
    QP_CHECK(s == QP_ERR_NOMEM);
    cJSON_Delete(j);
}

/* qp_json_doc_new: the header the verify receipt and the roundtrip report share (runtime.md
 * "Receipt JSON", cli/roundtrip.md), keys in that order. */
static void test_json_doc_header(void) {
    cJSON *j = qp_json_doc_new("quantpack.test.doc", 3);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    char want[256];
    snprintf(want, sizeof want,
             "{\"schema\":\"quantpack.test.doc\",\"schema_version\":3,\"tool\":{\"name\":\"quantpack\","
             "\"version\":\"%s\"}}", QP_VERSION_STRING);
    QP_CHECK_MSG(text && strcmp(text, want) == 0, "doc header: %s", text ? text : "(null)");
    free(text);
    cJSON_Delete(j);
}

static void test_sticky(void) {
    qp_err sticky, e;
    qp_err_clear(&sticky);
    qp_err_clear(&e);
    QP_CHECK(qp_sticky_check(&sticky, &e) == QP_OK && e.status == QP_OK);
    QP_CHECK(qp_sticky_fail(&sticky, &e, QP_ERR_IO, "first %d", 1) == QP_ERR_IO);
    QP_CHECK(strcmp(sticky.msg, "first 1") == 0 && strcmp(e.msg, "first 1") == 0);
    qp_err e2;
    qp_err_clear(&e2);
    QP_CHECK(qp_sticky_fail(&sticky, &e2, QP_ERR_ARG, "second") == QP_ERR_IO); /* first kept */
    QP_CHECK(e2.status == QP_ERR_IO && strcmp(e2.msg, "first 1") == 0);
    qp_err_clear(&e2);
    QP_CHECK(qp_sticky_check(&sticky, &e2) == QP_ERR_IO && strcmp(e2.msg, "first 1") == 0);
    QP_CHECK(qp_sticky_check(&sticky, NULL) == QP_ERR_IO);
    qp_err from = {QP_ERR_CORRUPT, "from callee"};
    qp_err fresh;
    qp_err_clear(&fresh);
    QP_CHECK(qp_sticky_take(&fresh, NULL, &from) == QP_ERR_CORRUPT && strcmp(fresh.msg, "from callee") == 0);
    QP_CHECK(qp_sticky_take(&sticky, NULL, &from) == QP_ERR_IO);
}

int main(void) {
    test_json_doc_header();
    test_sticky();
    test_json();
    test_utf8();
    test_buf_basic();
    test_buf_printf();
    test_buf_json();
    test_buf_oom();
    return qp_test_finish();
}
