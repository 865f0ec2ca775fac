/* RDRR (DOPPLER) directory writer: shard_NNNNN.bin + tensors.json + manifest.json (+ side files
 * such as tokenizer.json, + manifest.json.sig when signing). Format: readers/rdrr.md.
 *
 * Use: qp_rdrr_writer_open -> for each tensor qp_rdrr_writer_begin_tensor then
 * qp_rdrr_writer_write (any chunks, exactly `size` bytes in all) -> qp_rdrr_writer_add_file for
 * side files -> qp_rdrr_writer_finish(manifest fields) or qp_rdrr_writer_abort.
 * Everything is written into a staging folder renamed onto the output only by finish: a failed
 * run leaves nothing. Memory: one open shard (buffered), per-group hash states, the manifest
 * JSON and one 32-byte leaf hash per MiB of the current tensor. */
#ifndef QP_RDRR_WRITER_H
#define QP_RDRR_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "quantpack/core.h"
#include "quantpack/status.h"

#define QP_RDRR_SHARD_DEFAULT ((uint64_t)64 << 20)
#define QP_RDRR_ALIGN 4096
#define QP_RDRR_MIN_SHARD ((uint64_t)QP_RDRR_ALIGN)

typedef struct qp_rdrr_writer qp_rdrr_writer;

typedef struct qp_rdrr_writer_opts {
    uint64_t shard_size;        /* 0: 64 MiB; at least QP_RDRR_MIN_SHARD */
    bool no_inline_tensors;     /* only tensors.json (+ tensorsFile) instead of both */
    bool replace;               /* replace an existing non-empty output directory */
    bool no_merkle;             /* skip integrityExtensions.blockMerkle */
    const uint8_t *sign_sk;     /* libsodium Ed25519 secret key (64 bytes) or NULL */
} qp_rdrr_writer_opts;

typedef struct qp_rdrr_tensor_info {
    const char *name;
    const char *dtype;     /* "Q4_K_M", "Q6_K", "F16", "F32", ...: stored as given; which dtypes
                              DOPPLER can load is the converters' rule (convert_rdrr.c
                              rdrr_store_enc, readers/rdrr.md "the dtype rule") */
    int n_dims;
    const int64_t *shape;  /* outermost first, as the manifest lists it */
    uint64_t size;         /* bytes, > 0 */
    const char *role;      /* NULL: qp_rdrr_role_of(name) */
    const char *group;     /* NULL: qp_rdrr_group_of(name); "" for none */
    const char *layout;    /* NULL: no "layout" key */
} qp_rdrr_tensor_info;

QP_NODISCARD qp_status qp_rdrr_writer_open(const char *dir, const qp_rdrr_writer_opts *o,
                                           qp_rdrr_writer **out, qp_err *e);
QP_NODISCARD qp_status qp_rdrr_writer_begin_tensor(qp_rdrr_writer *w, const qp_rdrr_tensor_info *t,
                                                   qp_err *e);
QP_NODISCARD qp_status qp_rdrr_writer_write(qp_rdrr_writer *w, const void *data, size_t n, qp_err *e);
/* A side file (tokenizer.json, tokenizer.model, ...) written beside the shards. The name must be
 * a plain file name. */
QP_NODISCARD qp_status qp_rdrr_writer_add_file(qp_rdrr_writer *w, const char *name, const void *data,
                                               size_t n, qp_err *e);
/* `fields` (taken; freed in every case) holds the caller's top-level manifest keys (version,
 * modelId, modelType, quantization, architecture, inference, ...); the writer appends
 * hashAlgorithm (when absent), groups, shards, tensorsFile, tensors, tensorCount, totalSize and
 * integrityExtensions, writes tensors.json, manifest.json and the signature, and commits the
 * directory. Always frees w. */
QP_NODISCARD qp_status qp_rdrr_writer_finish(qp_rdrr_writer *w, cJSON *fields, qp_err *e);
void qp_rdrr_writer_abort(qp_rdrr_writer *w); /* NULL is fine */

uint64_t qp_rdrr_writer_total_bytes(const qp_rdrr_writer *w); /* shard bytes so far */
int qp_rdrr_writer_n_shards(const qp_rdrr_writer *w);

/* Group id of a tensor name (readers/rdrr.md "groups"): "embed", "head", "layer.N", or "" when
 * none fits. buf needs 32 bytes. */
const char *qp_rdrr_group_of(const char *name, char *buf, size_t cap);
/* Role: "embedding", "lm_head", "norm", "matmul", "other". */
const char *qp_rdrr_role_of(const char *name);

/* ---- signatures (readers/rdrr.md "signature") -------------------------------------------- */
#define QP_RDRR_SIG_FILE "manifest.json.sig"
/* The files an RDRR package folder holds (what -f/--force may replace; anything else in the
 * folder is kept): core.h qp_outdir_kind. */
extern const qp_outdir_kind qp_rdrr_outdir_kind;
/* Key files: secret = 128 hex digits (libsodium's 64-byte Ed25519 secret key) + "\n", mode 0600;
 * public = 64 hex digits + "\n" at "<path>.pub". */
QP_NODISCARD qp_status qp_rdrr_keygen(const char *path, qp_err *e);
QP_NODISCARD qp_status qp_rdrr_key_read_secret(const char *path, uint8_t sk[64], qp_err *e);
QP_NODISCARD qp_status qp_rdrr_key_read_public(const char *path, uint8_t pk[32], qp_err *e);
/* Checks DIR/manifest.json.sig against the bytes of DIR/manifest.json. When pk is non-NULL the
 * signature's public key must equal it; *signer (when non-NULL) receives the public key used. */
QP_NODISCARD qp_status qp_rdrr_verify_signature(const char *dir, const uint8_t *pk, uint8_t signer[32],
                                                qp_err *e);

#endif
