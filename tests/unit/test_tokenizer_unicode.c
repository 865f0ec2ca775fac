/* runtime/unicode.c: strict UTF-8 decoding with maximal-subpart replacement lengths (Unicode 3.9 /
 * WHATWG), category flags from the generated tables, the WordPiece normaliser. Expected values
 * are Unicode facts (UnicodeData.txt categories, PropList White_Space, the UTF-8 definition). */
#include <string.h>

#include "qp_test.h"
#include "runtime/unicode.h"

static void check_decode(const char *s, size_t len, size_t want_n, uint32_t want_cp, size_t want_bad) {
    uint32_t cp = 0;
    size_t bad = 0, n = qp_utf8_decode((const uint8_t *)s, len, &cp, &bad);
    QP_CHECK_MSG(n == want_n, "decode length %zu, want %zu", n, want_n);
    if (want_n) QP_CHECK_MSG(cp == want_cp, "U+%04X, want U+%04X", cp, want_cp);
    else QP_CHECK_MSG(bad == want_bad, "maximal subpart %zu, want %zu", bad, want_bad);
}

int main(void) {
    QP_CHECK(strlen(qp_unicode_version) >= 4);
    /* well-formed */
    check_decode("A", 1, 1, 0x41, 0);
    check_decode("\xC3\xA9", 2, 2, 0xE9, 0);
    check_decode("\xE2\x96\x81", 3, 3, 0x2581, 0);
    check_decode("\xF0\x9F\xA6\x99", 4, 4, 0x1F999, 0);
    check_decode("\xF4\x8F\xBF\xBF", 4, 4, 0x10FFFF, 0);
    /* ill-formed: lengths of the maximal subparts */
    check_decode("\x80", 1, 0, 0, 1);             /* lone continuation */
    check_decode("\xC0\xAF", 2, 0, 0, 1);         /* C0/C1 never start a sequence */
    check_decode("\xE2\x82", 2, 0, 0, 2);         /* truncated at the end */
    check_decode("\xE2\x82x", 3, 0, 0, 2);        /* truncated before ASCII */
    check_decode("\xE0\x80\x80", 3, 0, 0, 1);     /* overlong */
    check_decode("\xED\xA0\x80", 3, 0, 0, 1);     /* surrogate */
    check_decode("\xF4\x90\x80\x80", 4, 0, 0, 1); /* above U+10FFFF */
    check_decode("\xF0\x9F\xA6", 3, 0, 0, 3);     /* cut 4-byte sequence */
    check_decode("\xFF", 1, 0, 0, 1);
    QP_CHECK(qp_utf8_valid("h\xC3\xA9llo \xF0\x9F\x98\x81", 11));
    QP_CHECK(!qp_utf8_valid("a\xFF", 2));
    QP_CHECK(qp_utf8_valid("", 0));
    /* encode / decode agree on every scalar value */
    int bad_round = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        char b[4];
        size_t n = qp_utf8_encode(cp, b), bad;
        uint32_t back;
        if (qp_utf8_decode((const uint8_t *)b, n, &back, &bad) != n || back != cp) bad_round++;
    }
    QP_CHECK_EQ_INT(bad_round, 0);
    /* categories */
    QP_CHECK(qp_unicode_flags('a') & QP_UC_L);
    QP_CHECK(qp_unicode_flags(0x4E00) & QP_UC_L);   /* CJK ideograph: Lo */
    QP_CHECK(qp_unicode_flags('7') & QP_UC_N);
    QP_CHECK(qp_unicode_flags(0xBD) & QP_UC_N);     /* ½: No */
    QP_CHECK(qp_unicode_flags('!') & QP_UC_P);
    QP_CHECK(qp_unicode_flags('$') & QP_UC_S);      /* Sc */
    QP_CHECK(qp_unicode_flags(0x301) & QP_UC_M);    /* combining acute */
    QP_CHECK(qp_unicode_flags(' ') & QP_UC_WS);
    QP_CHECK(qp_unicode_flags('\n') & QP_UC_WS);
    QP_CHECK(qp_unicode_flags(0x3000) & QP_UC_WS);
    QP_CHECK(qp_unicode_flags(0x85) & QP_UC_WS);
    QP_CHECK(!(qp_unicode_flags(0x200B) & QP_UC_WS)); /* zero width space is not White_Space */
    QP_CHECK(!(qp_unicode_flags(0x1C) & QP_UC_WS));   /* nor the information separators */
    QP_CHECK(qp_unicode_flags(0xE000) & QP_UC_C);     /* private use */
    QP_CHECK(qp_unicode_flags(0x10FFFF) & QP_UC_C);
    QP_CHECK(qp_unicode_flags(0x110000) == QP_UC_C);
    /* WordPiece normaliser: lower case, accents gone, Hangul decomposed */
    char out[16];
    size_t n = qp_unicode_wpm_normalize(0xC9, out); /* É */
    QP_CHECK(n == 1 && out[0] == 'e');
    n = qp_unicode_wpm_normalize(0x301, out);
    QP_CHECK_EQ_INT(n, 0);
    n = qp_unicode_wpm_normalize('Q', out);
    QP_CHECK(n == 1 && out[0] == 'q');
    n = qp_unicode_wpm_normalize(0xD55C, out); /* 한 -> U+1112 U+1161 U+11AB */
    QP_CHECK(n == 9 && memcmp(out, "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", 9) == 0);
    return qp_test_finish();
}
