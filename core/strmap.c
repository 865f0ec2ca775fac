#include <string.h>

#include "core/strmap.h"
#include "quantpack/core.h"

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static bool find_slot(const qp_strmap *m, const char *key, size_t len, size_t *slot) {
    size_t mask = m->cap - 1, i = (size_t)hash_bytes(key, len) & mask;
    for (;;) {
        if (!m->keys[i]) {
            *slot = i;
            return false;
        }
        if (m->key_lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            *slot = i;
            return true;
        }
        i = (i + 1) & mask;
    }
}

static bool grow(qp_strmap *m) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    qp_strmap n = {0};
    n.cap = ncap;
    n.keys = qp_calloc(ncap, sizeof *n.keys);
    n.key_lens = qp_calloc(ncap, sizeof *n.key_lens);
    n.vals = qp_calloc(ncap, sizeof *n.vals);
    if (!n.keys || !n.key_lens || !n.vals) {
        qp_strmap_free(&n);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t s;
        find_slot(&n, m->keys[i], m->key_lens[i], &s);
        n.keys[s] = m->keys[i];
        n.key_lens[s] = m->key_lens[i];
        n.vals[s] = m->vals[i];
        n.count++;
    }
    qp_strmap_free(m);
    *m = n;
    return true;
}

qp_status qp_strmap_put(qp_strmap *m, const char *key, size_t len, int64_t val, bool *added) {
    if ((m->count + 1) * 2 > m->cap && !grow(m)) return QP_ERR_NOMEM;
    size_t s;
    bool found = find_slot(m, key, len, &s);
    if (added) *added = !found;
    if (found) return QP_OK;
    m->keys[s] = key;
    m->key_lens[s] = len;
    m->vals[s] = val;
    m->count++;
    return QP_OK;
}

bool qp_strmap_get(const qp_strmap *m, const char *key, size_t len, int64_t *val) {
    if (!m->cap) return false;
    size_t s;
    if (!find_slot(m, key, len, &s)) return false;
    if (val) *val = m->vals[s];
    return true;
}

void qp_strmap_free(qp_strmap *m) {
    qp_free(m->keys);
    qp_free(m->key_lens);
    qp_free(m->vals);
    memset(m, 0, sizeof *m);
}
