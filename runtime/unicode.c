/* Category lookups and WordPiece normalisation over the generated tables. */
#include "runtime/unicode.h"

#include <string.h>

unsigned qp_unicode_flags(uint32_t cp) {
    size_t lo = 0, hi = qp_unicode_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < qp_unicode_ranges[mid].lo) hi = mid;
        else if (cp > qp_unicode_ranges[mid].hi) lo = mid + 1;
        else return qp_unicode_ranges[mid].flags;
    }
    return QP_UC_C;
}

size_t qp_unicode_wpm_normalize(uint32_t cp, char out[16]) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable: canonical decomposition into jamo */
        uint32_t s = cp - 0xAC00, l = 0x1100 + s / 588, v = 0x1161 + (s % 588) / 28, t = s % 28;
        size_t n = qp_utf8_encode(l, out);
        n += qp_utf8_encode(v, out + n);
        if (t) n += qp_utf8_encode(0x11A7 + t, out + n);
        return n;
    }
    size_t lo = 0, hi = qp_unicode_n_wpm_map;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < qp_unicode_wpm_map[mid].cp) hi = mid;
        else if (cp > qp_unicode_wpm_map[mid].cp) lo = mid + 1;
        else {
            size_t n = strlen(qp_unicode_wpm_map[mid].utf8);
            memcpy(out, qp_unicode_wpm_map[mid].utf8, n);
            return n;
        }
    }
    return qp_utf8_encode(cp, out);
}
