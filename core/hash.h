/* SHA-256 through OpenSSL libcrypto (EVP): one-shot, streaming, whole files; lowercase hex; and
 * the block Merkle root RDRR manifests carry (integrityExtensions.blockMerkle).
 *
 * Merkle construction (readers/rdrr.md "Block Merkle roots", same as DOPPLER's merkle.js):
 *   leaves  = SHA-256 of each block_size-byte block of the data (the last block may be short);
 *             empty data has the one leaf SHA-256("").
 *   parents = SHA-256(left || right) over the 32-byte raw digests, pairing neighbours left to
 *             right; an odd last node is paired with itself.
 *   root    = the single node left; written as "sha256:" + 64 lowercase hex digits. */
#ifndef QP_CORE_HASH_H
#define QP_CORE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/status.h"

#define QP_SHA256_BYTES 32
#define QP_SHA256_HEX 65 /* 64 digits + NUL */
#define QP_MERKLE_BLOCK_DEFAULT ((size_t)1 << 20)

typedef struct qp_sha256 qp_sha256;

QP_NODISCARD qp_status qp_sha256_new(qp_sha256 **out, qp_err *e);
QP_NODISCARD qp_status qp_sha256_update(qp_sha256 *h, const void *data, size_t n, qp_err *e);
/* Writes the digest and resets h for a new message. */
QP_NODISCARD qp_status qp_sha256_final(qp_sha256 *h, uint8_t out[QP_SHA256_BYTES], qp_err *e);
void qp_sha256_free(qp_sha256 *h); /* NULL is fine */

QP_NODISCARD qp_status qp_sha256_once(const void *data, size_t n, uint8_t out[QP_SHA256_BYTES], qp_err *e);
/* Streams the file (no mapping); hex is 64 lowercase digits + NUL. */
QP_NODISCARD qp_status qp_hash_sha256_file(const char *path, char hex[QP_SHA256_HEX], qp_err *e);

/* n bytes -> 2n lowercase hex digits + NUL. */
void qp_hex_encode(const uint8_t *bytes, size_t n, char *out);
/* 2n hex digits (either case) -> n bytes; false on a bad digit or length. */
bool qp_hex_decode(const char *hex, uint8_t *out, size_t n);

/* Streaming Merkle root over fixed-size blocks (see the top of this file). */
typedef struct qp_merkle qp_merkle;

QP_NODISCARD qp_status qp_merkle_new(size_t block_size, qp_merkle **out, qp_err *e);
QP_NODISCARD qp_status qp_merkle_update(qp_merkle *m, const void *data, size_t n, qp_err *e);
/* Writes the root and resets m for new data. */
QP_NODISCARD qp_status qp_merkle_final(qp_merkle *m, uint8_t root[QP_SHA256_BYTES], qp_err *e);
void qp_merkle_free(qp_merkle *m); /* NULL is fine */
QP_NODISCARD qp_status qp_merkle_root(const void *data, size_t n, size_t block_size,
                                      uint8_t root[QP_SHA256_BYTES], qp_err *e);

#endif
