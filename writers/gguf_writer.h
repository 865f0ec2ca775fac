/* Streaming GGUF v3 writer. Layout and rules: writers/gguf_writer.md.
 *
 * Use: qp_gguf_writer_new -> key/values (qp_gguf_writer_add_meta or the typed helpers) and
 * tensor infos (qp_gguf_writer_add_tensor) in file order -> qp_gguf_writer_begin (writes the
 * header, the key/values, the tensor infos and the padding) -> the data of every tensor in the
 * declared order (qp_gguf_writer_write in any chunks, qp_gguf_writer_end_tensor after each, or
 * qp_gguf_writer_write_tensor for a whole tensor) -> qp_gguf_writer_finish (atomic rename onto
 * the final path) or qp_gguf_writer_abort (nothing left behind).
 *
 * Memory: the serialized key/values and tensor infos plus a 1 MiB output buffer; tensor data is
 * streamed. Bytes depend only on the calls made (never on the machine or the thread count).
 * Every call after the first failure returns that failure. */
#ifndef QP_GGUF_WRITER_H
#define QP_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/model.h"
#include "quantpack/status.h"

#define QP_GGUF_VERSION 3u
#define QP_GGUF_DEFAULT_ALIGNMENT 32u
#define QP_GGUF_MAX_NAME 63 /* llama.cpp GGML_MAX_NAME - 1 */

typedef struct qp_gguf_writer qp_gguf_writer;

/* A writer whose output will appear at path (temporary file beside it until finish). */
QP_NODISCARD qp_status qp_gguf_writer_new(const char *path, qp_gguf_writer **out, qp_err *e);

/* Any qp_meta as a reader produced it (scalars from v, strings from str/str_len, arrays from
 * arr_type/n/raw/raw_size with strings as u64 length + bytes). Duplicate or empty keys, nested
 * arrays and malformed raw array bytes are QP_ERR_ARG. "general.alignment" must be a u32 power of
 * two; it sets the alignment of the data section. */
QP_NODISCARD qp_status qp_gguf_writer_add_meta(qp_gguf_writer *w, const qp_meta *m, qp_err *e);
QP_NODISCARD qp_status qp_gguf_writer_add_u32(qp_gguf_writer *w, const char *key, uint32_t v, qp_err *e);
QP_NODISCARD qp_status qp_gguf_writer_add_i32(qp_gguf_writer *w, const char *key, int32_t v, qp_err *e);
QP_NODISCARD qp_status qp_gguf_writer_add_f32(qp_gguf_writer *w, const char *key, float v, qp_err *e);
QP_NODISCARD qp_status qp_gguf_writer_add_bool(qp_gguf_writer *w, const char *key, bool v, qp_err *e);
QP_NODISCARD qp_status qp_gguf_writer_add_str(qp_gguf_writer *w, const char *key, const char *s, size_t len,
                                              qp_err *e);
/* Array of n fixed-size elements (elem_type not STRING/ARRAY) from little-endian bytes. */
QP_NODISCARD qp_status qp_gguf_writer_add_array(qp_gguf_writer *w, const char *key, qp_meta_type elem_type,
                                                uint64_t n, const void *le_bytes, qp_err *e);
/* Array of n strings (lens may be NULL: strlen). */
QP_NODISCARD qp_status qp_gguf_writer_add_str_array(qp_gguf_writer *w, const char *key, char *const *strs,
                                                    const uint32_t *lens, uint64_t n, qp_err *e);
/* True when key was added. */
bool qp_gguf_writer_has_key(const qp_gguf_writer *w, const char *key);

/* A tensor info: name (1..63 bytes, unique), ne[0..n_dims-1] with ne[0] the row length; trailing
 * 1s are dropped from n_dims (at least 1 is kept) as ggml_n_dims does. enc must have a GGUF type
 * id. Its byte size is qp_encoding_tensor_bytes; offsets are the running sum of sizes padded to
 * the alignment. */
QP_NODISCARD qp_status qp_gguf_writer_add_tensor(qp_gguf_writer *w, const char *name, qp_encoding enc,
                                                 int n_dims, const int64_t *ne, qp_err *e);
/* Same, with an explicit byte size (for layouts whose size is not the traits' size). */
QP_NODISCARD qp_status qp_gguf_writer_add_tensor_sized(qp_gguf_writer *w, const char *name, int ggml_type,
                                                       int n_dims, const int64_t *ne, size_t nbytes,
                                                       qp_err *e);

int64_t qp_gguf_writer_n_tensors(const qp_gguf_writer *w);
/* Byte size of the whole file once every key and tensor info is added (call before begin). */
uint64_t qp_gguf_writer_file_size(const qp_gguf_writer *w);

QP_NODISCARD qp_status qp_gguf_writer_begin(qp_gguf_writer *w, qp_err *e);
/* Streams n bytes of the current tensor (never more than its size). */
QP_NODISCARD qp_status qp_gguf_writer_write(qp_gguf_writer *w, const void *data, size_t n, qp_err *e);
/* Ends the current tensor: checks that all its bytes came and writes the zero padding. */
QP_NODISCARD qp_status qp_gguf_writer_end_tensor(qp_gguf_writer *w, qp_err *e);
/* write + end_tensor of a whole tensor. */
QP_NODISCARD qp_status qp_gguf_writer_write_tensor(qp_gguf_writer *w, const void *data, size_t n, qp_err *e);
/* Checks that every tensor was written, then commits (flush, fsync, rename). Always frees w. */
QP_NODISCARD qp_status qp_gguf_writer_finish(qp_gguf_writer *w, qp_err *e);
/* Removes the temporary file and frees w; NULL is fine. */
void qp_gguf_writer_abort(qp_gguf_writer *w);

#endif
