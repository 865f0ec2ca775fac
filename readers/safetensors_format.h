/* safetensors framing, defined once for the reader, the writer and the Trillim manifest builder:
 * an 8-byte little-endian header length N, N bytes of UTF-8 JSON (one object, space padding
 * after it), then the data section. Limits and statuses: readers/safetensors.md. */
#ifndef QP_SAFETENSORS_FORMAT_H
#define QP_SAFETENSORS_FORMAT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/status.h"

/* The largest header read or written: the official library's MAX_HEADER_SIZE (100,000,000). */
#define QP_ST_MAX_HEADER ((uint64_t)100000000)
#define QP_ST_MAX_JSON_VALUES ((size_t)4 << 20) /* commas + containers in one header */
#define QP_ST_MAX_DIMS 8                        /* dimensions of one entry's shape */

/* Parses the header of a safetensors file whose first `size` bytes are data[0..size) (the
 * whole file, or at least its first 8 + N bytes): N <= QP_ST_MAX_HEADER and within size,
 * well-formed UTF-8, one JSON object with at most QP_ST_MAX_JSON_VALUES values and only space
 * after it, no key twice at its top level. On success *root owns the parsed header (free with
 * cJSON_Delete) and *data_start = 8 + N. Messages name `file` and the byte offset. */
QP_NODISCARD qp_status qp_st_header_parse(const uint8_t *data, size_t size, const char *file,
                                          cJSON **root, size_t *data_start, qp_err *e);

/* One tensor entry of a parsed header, as the file gives it. */
typedef struct qp_st_entry {
    const char *dtype;               /* borrowed from the cJSON tree; not checked against a list */
    int n_dims;                      /* 0 (a scalar) ..QP_ST_MAX_DIMS */
    int64_t shape[QP_ST_MAX_DIMS];   /* outermost first; each 0..2^53 */
    uint64_t begin, end;             /* data_offsets within the data section; begin <= end */
} qp_st_entry;

/* Checks the member `it` of a header (not "__metadata__"): an object without duplicate keys,
 * dtype a string, shape a list of at most QP_ST_MAX_DIMS integers, data_offsets two integers
 * with begin <= end (data_start only places the messages). Sizes against the dtype and the data
 * section are the caller's. */
QP_NODISCARD qp_status qp_st_entry_parse(const cJSON *it, const char *file, size_t data_start,
                                         qp_st_entry *out, qp_err *e);

#endif
