/* Streaming safetensors writer: single file, or HF-style shards plus model.safetensors.index.json.
 * Layout and rules: writers/safetensors_writer.md.
 *
 * Use: qp_st_writer_new[_sharded] -> qp_st_writer_add_meta / qp_st_writer_add_tensor for every
 * tensor (declared order = data order) -> qp_st_writer_begin (fixes the header) ->
 * qp_st_writer_write_tensor (whole tensors) or qp_st_writer_write (any chunks) in the declared
 * order -> qp_st_writer_finish (atomic commit of every file) or qp_st_writer_abort (nothing left
 * behind). Memory: the descriptors plus one 1 MiB buffer per shard file; tensor data is streamed.
 * Every call after the first failure returns that failure; finish then removes everything. */
#ifndef QP_SAFETENSORS_WRITER_H
#define QP_SAFETENSORS_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/status.h"
#include "readers/safetensors_format.h" /* QP_ST_MAX_HEADER */

#define QP_ST_WRITER_MAX_DIMS 8

typedef struct qp_st_writer qp_st_writer;

/* One file at path. */
QP_NODISCARD qp_status qp_st_writer_new(const char *path, qp_st_writer **out, qp_err *e);
/* Shards in the existing folder dir: "<prefix>-00001-of-0000N.safetensors" and
 * "<prefix>.safetensors.index.json"; when everything fits in one shard, "<prefix>.safetensors"
 * alone (as transformers does). A shard holds whole tensors of at most max_shard_bytes of data
 * (one larger tensor gets a shard of its own). prefix NULL means "model". */
QP_NODISCARD qp_status qp_st_writer_new_sharded(const char *dir, const char *prefix, uint64_t max_shard_bytes,
                                                qp_st_writer **out, qp_err *e);

/* "__metadata__" string entry (key order kept; duplicate keys are QP_ERR_ARG). */
QP_NODISCARD qp_status qp_st_writer_add_meta(qp_st_writer *w, const char *key, const char *value, qp_err *e);
/* A tensor of a plain encoding that has a safetensors dtype (traits st_dtype); shape is
 * outermost-first as safetensors stores it (n_dims 0 = scalar). */
QP_NODISCARD qp_status qp_st_writer_add_tensor(qp_st_writer *w, const char *name, qp_encoding enc, int n_dims,
                                               const int64_t *shape, qp_err *e);
/* Any dtype string (e.g. "F8_E4M3") with its element size in bytes. */
QP_NODISCARD qp_status qp_st_writer_add_tensor_dtype(qp_st_writer *w, const char *name, const char *dtype,
                                                     size_t elem_bytes, int n_dims, const int64_t *shape,
                                                     qp_err *e);

QP_NODISCARD qp_status qp_st_writer_begin(qp_st_writer *w, qp_err *e);
/* The next tensor, whole: n must equal its byte size and none of it may be written yet. */
QP_NODISCARD qp_status qp_st_writer_write_tensor(qp_st_writer *w, const void *data, size_t n, qp_err *e);
/* Streams n bytes of tensor data continuing where the last call stopped (may cross tensors). */
QP_NODISCARD qp_status qp_st_writer_write(qp_st_writer *w, const void *data, size_t n, qp_err *e);

/* Number of files the output has (1 before begin); valid after begin. */
int qp_st_writer_n_shards(const qp_st_writer *w);
/* Total tensor bytes declared so far. */
uint64_t qp_st_writer_total_bytes(const qp_st_writer *w);

/* Checks every tensor was written in full, commits every file (index last). Always frees w. */
QP_NODISCARD qp_status qp_st_writer_finish(qp_st_writer *w, qp_err *e);
void qp_st_writer_abort(qp_st_writer *w); /* NULL is fine */

/* A Hugging Face model folder as convert --to safetensors writes it (core/outfile.md: what --force
 * may replace): marker model.safetensors; the weights, configs and tokenizer files. */
extern const qp_outdir_kind qp_hf_outdir_kind;

#endif
