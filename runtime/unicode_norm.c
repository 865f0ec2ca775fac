/* Unicode normalisation (UAX #15): full decomposition from the generated tables (Hangul
 * algorithmically), canonical ordering of combining marks by combining class (stable), then for
 * NFC / NFKC canonical composition of starters with the marks that follow them unblocked. */
#include "runtime/unicode_norm.h"

#include <string.h>

#include "core/utf8.h"
#include "quantpack/core.h"

enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19, V_COUNT = 21,
       T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static unsigned ccc_of(uint32_t cp) {
    size_t lo = 0, hi = qp_unicode_n_ccc_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < qp_unicode_ccc_ranges[mid].lo) hi = mid;
        else if (cp > qp_unicode_ccc_ranges[mid].hi) lo = mid + 1;
        else return qp_unicode_ccc_ranges[mid].ccc;
    }
    return 0;
}

static const qp_unicode_decomp *decomp_of(const qp_unicode_decomp *t, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < t[mid].cp) hi = mid;
        else if (cp > t[mid].cp) lo = mid + 1;
        else return &t[mid];
    }
    return NULL;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    size_t lo = 0, hi = qp_unicode_n_compose;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const qp_unicode_pair *p = &qp_unicode_compose[mid];
        if (a < p->first || (a == p->first && b < p->second)) hi = mid;
        else if (a > p->first || b > p->second) lo = mid + 1;
        else return p->composite;
    }
    return 0;
}

typedef struct cps {
    uint32_t *p;
    size_t n, cap;
} cps;

static bool cps_push(cps *c, uint32_t cp) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64, bytes;
        if (!qp_size_mul(cap, sizeof *c->p, &bytes)) return false;
        uint32_t *p = qp_realloc(c->p, bytes);
        if (!p) return false;
        c->p = p;
        c->cap = cap;
    }
    c->p[c->n++] = cp;
    return true;
}

/* Appends the full decomposition of cp (canonical, or compatibility when compat). */
static bool decompose(uint32_t cp, bool compat, cps *out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE, t = s % T_COUNT;
        return cps_push(out, L_BASE + s / N_COUNT) && cps_push(out, V_BASE + (s % N_COUNT) / T_COUNT) &&
               (t == 0 || cps_push(out, T_BASE + t));
    }
    const qp_unicode_decomp *d = compat ? decomp_of(qp_unicode_compat, qp_unicode_n_compat, cp)
                                        : decomp_of(qp_unicode_canonical, qp_unicode_n_canonical, cp);
    if (!d) return cps_push(out, cp);
    for (uint32_t i = 0; i < d->n; i++)
        if (!cps_push(out, d->seq[i])) return false;
    return true;
}

/* Canonical ordering: each run of non-starters sorted stably by combining class (insertion sort:
 * runs are short). */
static void canonical_order(cps *c) {
    for (size_t i = 1; i < c->n; i++) {
        unsigned ci = ccc_of(c->p[i]);
        if (ci == 0) continue;
        size_t j = i;
        uint32_t x = c->p[i];
        while (j > 0 && ccc_of(c->p[j - 1]) > ci) {
            c->p[j] = c->p[j - 1];
            j--;
        }
        c->p[j] = x;
    }
}

/* Canonical composition in place (UAX #15's algorithm). */
static void compose(cps *c) {
    if (c->n == 0) return;
    size_t starter = 0, out = 1;
    unsigned last = ccc_of(c->p[0]) ? 256 : 0;
    for (size_t i = 1; i < c->n; i++) {
        uint32_t ch = c->p[i];
        unsigned cc = ccc_of(ch);
        uint32_t comp = last != 256 ? compose_pair(c->p[starter], ch) : 0;
        if (comp && (last < cc || last == 0)) {
            c->p[starter] = comp;
            continue;
        }
        if (cc == 0) starter = out;
        last = cc;
        c->p[out++] = ch;
    }
    c->n = out;
}

qp_status qp_unicode_normalize(qp_norm_form form, const char *text, size_t len, char **out, size_t *out_len,
                               qp_err *e) {
    bool compat = form == QP_NORM_NFKC || form == QP_NORM_NFKD;
    bool recompose = form == QP_NORM_NFC || form == QP_NORM_NFKC;
    cps c = {0};
    bool ok = true;
    const uint8_t *p = (const uint8_t *)text;
    for (size_t i = 0; ok && i < len;) {
        uint32_t cp = p[i];
        size_t bad = 1, k = cp < 0x80 ? 1 : qp_utf8_decode(p + i, len - i, &cp, &bad);
        if (!k) { /* not reached for sanitised text: pass the byte's replacement */
            cp = 0xFFFD;
            k = bad;
        }
        ok = form == QP_NORM_NONE ? cps_push(&c, cp) : decompose(cp, compat, &c);
        i += k;
    }
    if (ok && form != QP_NORM_NONE) canonical_order(&c);
    if (ok && recompose) compose(&c);
    size_t bytes = 0;
    char *buf = ok && qp_size_mul(c.n, 4, &bytes) ? qp_malloc(bytes + 1) : NULL;
    if (!buf) {
        qp_free(c.p);
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (normalising %zu bytes)", len);
    }
    size_t k = 0;
    for (size_t i = 0; i < c.n; i++) k += qp_utf8_encode(c.p[i], buf + k);
    qp_free(c.p);
    *out = buf;
    *out_len = k;
    return QP_OK;
}
