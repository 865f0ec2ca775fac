/* SHA-256 (OpenSSL EVP) and block Merkle roots. Construction: core/hash.h. */
#include "core/hash.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "quantpack/core.h"

struct qp_sha256 {
    EVP_MD_CTX *ctx;
};

static qp_status evp_fail(qp_err *e, const char *what) {
    return qp_fail(e, QP_ERR_INTERNAL, "sha256: %s failed (OpenSSL)", what);
}

qp_status qp_sha256_new(qp_sha256 **out, qp_err *e) {
    qp_sha256 *h = qp_calloc(1, sizeof *h);
    if (!h) return qp_fail(e, QP_ERR_NOMEM, "sha256: out of memory");
    h->ctx = EVP_MD_CTX_new();
    if (!h->ctx) {
        qp_free(h);
        return qp_fail(e, QP_ERR_NOMEM, "sha256: out of memory (EVP_MD_CTX_new)");
    }
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
        qp_sha256_free(h);
        return evp_fail(e, "EVP_DigestInit_ex");
    }
    *out = h;
    return QP_OK;
}

qp_status qp_sha256_update(qp_sha256 *h, const void *data, size_t n, qp_err *e) {
    if (n == 0) return QP_OK;
    if (EVP_DigestUpdate(h->ctx, data, n) != 1) return evp_fail(e, "EVP_DigestUpdate");
    return QP_OK;
}

qp_status qp_sha256_final(qp_sha256 *h, uint8_t out[QP_SHA256_BYTES], qp_err *e) {
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(h->ctx, out, &len) != 1 || len != QP_SHA256_BYTES)
        return evp_fail(e, "EVP_DigestFinal_ex");
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) return evp_fail(e, "EVP_DigestInit_ex");
    return QP_OK;
}

void qp_sha256_free(qp_sha256 *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    qp_free(h);
}

qp_status qp_sha256_once(const void *data, size_t n, uint8_t out[QP_SHA256_BYTES], qp_err *e) {
    unsigned int len = 0;
    if (EVP_Digest(n ? data : "", n, out, &len, EVP_sha256(), NULL) != 1 || len != QP_SHA256_BYTES)
        return evp_fail(e, "EVP_Digest");
    return QP_OK;
}

void qp_hex_encode(const uint8_t *bytes, size_t n, char *out) {
    static const char k[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = k[bytes[i] >> 4];
        out[2 * i + 1] = k[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool qp_hex_decode(const char *hex, uint8_t *out, size_t n) {
    if (!hex || strlen(hex) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int a = hexval(hex[2 * i]), b = hexval(hex[2 * i + 1]);
        if (a < 0 || b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

qp_status qp_hash_sha256_file(const char *path, char hex[QP_SHA256_HEX], qp_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return qp_fail(e, QP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    qp_sha256 *h = NULL;
    qp_status s = qp_sha256_new(&h, e);
    enum { BUF = 1 << 20 };
    uint8_t *buf = s == QP_OK ? qp_malloc(BUF) : NULL;
    if (s == QP_OK && !buf) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    uint64_t off = 0;
    while (s == QP_OK) {
        size_t n = fread(buf, 1, BUF, f);
        if (n > 0) s = qp_sha256_update(h, buf, n, e);
        off += n;
        if (n < BUF) {
            if (ferror(f))
                s = qp_fail(e, QP_ERR_IO, "%s: read error at offset %llu", path,
                            (unsigned long long)off);
            break;
        }
    }
    uint8_t d[QP_SHA256_BYTES];
    if (s == QP_OK) s = qp_sha256_final(h, d, e);
    if (s == QP_OK) qp_hex_encode(d, sizeof d, hex);
    qp_free(buf);
    qp_sha256_free(h);
    fclose(f);
    return s;
}

/* ---- Merkle ------------------------------------------------------------------------------- */

struct qp_merkle {
    size_t block_size;
    size_t fill;        /* bytes of the current block hashed so far */
    uint64_t total;
    qp_sha256 *block;
    uint8_t *leaves;    /* n_leaves * 32 */
    size_t n_leaves, cap_leaves;
};

qp_status qp_merkle_new(size_t block_size, qp_merkle **out, qp_err *e) {
    if (block_size == 0) return qp_fail(e, QP_ERR_ARG, "merkle: block size 0");
    qp_merkle *m = qp_calloc(1, sizeof *m);
    if (!m) return qp_fail(e, QP_ERR_NOMEM, "merkle: out of memory");
    m->block_size = block_size;
    qp_status s = qp_sha256_new(&m->block, e);
    if (s != QP_OK) {
        qp_free(m);
        return s;
    }
    *out = m;
    return QP_OK;
}

void qp_merkle_free(qp_merkle *m) {
    if (!m) return;
    qp_sha256_free(m->block);
    qp_free(m->leaves);
    qp_free(m);
}

static qp_status push_leaf(qp_merkle *m, qp_err *e) {
    if (m->n_leaves == m->cap_leaves) {
        size_t cap = m->cap_leaves ? m->cap_leaves * 2 : 16, bytes;
        if (!qp_size_mul(cap, QP_SHA256_BYTES, &bytes))
            return qp_fail(e, QP_ERR_LIMIT, "merkle: too many blocks");
        uint8_t *p = qp_realloc(m->leaves, bytes);
        if (!p) return qp_fail(e, QP_ERR_NOMEM, "merkle: out of memory");
        m->leaves = p;
        m->cap_leaves = cap;
    }
    qp_status s = qp_sha256_final(m->block, m->leaves + m->n_leaves * QP_SHA256_BYTES, e);
    if (s == QP_OK) m->n_leaves++;
    m->fill = 0;
    return s;
}

qp_status qp_merkle_update(qp_merkle *m, const void *data, size_t n, qp_err *e) {
    const uint8_t *p = data;
    while (n > 0) {
        size_t take = m->block_size - m->fill;
        if (take > n) take = n;
        qp_status s = qp_sha256_update(m->block, p, take, e);
        if (s != QP_OK) return s;
        m->fill += take;
        m->total += take;
        p += take;
        n -= take;
        if (m->fill == m->block_size && (s = push_leaf(m, e)) != QP_OK) return s;
    }
    return QP_OK;
}

qp_status qp_merkle_final(qp_merkle *m, uint8_t root[QP_SHA256_BYTES], qp_err *e) {
    qp_status s = QP_OK;
    /* A short last block, or the single empty leaf of empty data. */
    if (m->fill > 0 || m->total == 0) s = push_leaf(m, e);
    size_t n = m->n_leaves;
    uint8_t *lv = m->leaves;
    while (s == QP_OK && n > 1) {
        size_t k = 0;
        for (size_t i = 0; i < n && s == QP_OK; i += 2, k++) {
            uint8_t pair[2 * QP_SHA256_BYTES];
            memcpy(pair, lv + i * QP_SHA256_BYTES, QP_SHA256_BYTES);
            memcpy(pair + QP_SHA256_BYTES, lv + (i + 1 < n ? i + 1 : i) * QP_SHA256_BYTES,
                   QP_SHA256_BYTES);
            s = qp_sha256_once(pair, sizeof pair, lv + k * QP_SHA256_BYTES, e);
        }
        n = k;
    }
    if (s == QP_OK) memcpy(root, lv, QP_SHA256_BYTES);
    m->n_leaves = 0;
    m->fill = 0;
    m->total = 0;
    return s;
}

qp_status qp_merkle_root(const void *data, size_t n, size_t block_size,
                         uint8_t root[QP_SHA256_BYTES], qp_err *e) {
    qp_merkle *m = NULL;
    qp_status s = qp_merkle_new(block_size, &m, e);
    if (s == QP_OK) s = qp_merkle_update(m, data, n, e);
    if (s == QP_OK) s = qp_merkle_final(m, root, e);
    qp_merkle_free(m);
    return s;
}
