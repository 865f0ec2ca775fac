/* The checks every reader of JSON makes over cJSON: exact integers and unique keys.
 * cJSON stores numbers as doubles and keeps duplicate keys silently (GetObjectItem finds the
 * first, while JavaScript's JSON.parse and Python's json keep the last), so readers of untrusted
 * JSON take integers only through qp_json_int and check objects with qp_json_unique_keys.
 * Internal (core/). Also the one way JSON side files are written (qp_json_write_file). */
#ifndef QP_CORE_JSON_H
#define QP_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "quantpack/status.h"

/* 2^53: every integer of at most this magnitude is exact in a double, and no larger one is. */
#define QP_JSON_INT_MAX ((int64_t)1 << 53)

/* True, with *out set, when `it` is a JSON number with an integer value in [lo, hi] (the bounds
 * are clamped to +-QP_JSON_INT_MAX). False for NULL, a non-number, a fraction, NaN/inf and any
 * value out of range; *out is then untouched. */
bool qp_json_int(const cJSON *it, int64_t lo, int64_t hi, int64_t *out);
/* The same for an object member (obj may be NULL). */
bool qp_json_get_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out);
/* qp_json_int over [0, 2^53] with an unsigned result, for sizes and offsets (callers compare
 * with their own limits after). */
bool qp_json_uint(const cJSON *it, uint64_t *out);
bool qp_json_get_uint(const cJSON *obj, const char *key, uint64_t *out);

/* What `it` is, for a message about a value that was not the expected kind: "missing", "a
 * string", "a list", "an object", "a boolean", "null", and for numbers "negative", "not an
 * integer", "too large" (past 2^53) or "a number". */
const char *qp_json_kind(const cJSON *it);

/* Every member of src into dst, replacing dst's member of the same name (Python's {**dst, **src});
 * nested: two objects of the same name merged member by member instead (the Trillim SDK's
 * _merge_nested_dicts); members named in skip (NULL-terminated, or NULL) left out. false when
 * out of memory. */
bool qp_json_overlay(cJSON *dst, const cJSON *src, bool nested, const char *const *skip);

/* QP_ERR_CORRUPT naming the first key that appears twice among obj's members ("<file>:
 * duplicate key 'k' in <what>"), QP_ERR_NOMEM, or QP_OK (also for NULL or a non-object). */
QP_NODISCARD qp_status qp_json_unique_keys(const cJSON *obj, const char *file, const char *what, qp_err *e);

/* Writes j as dir/name (pretty-printed; qp_file_write_atomic) and deletes j. built: whether the
 * caller finished building j; false (an allocation failed on the way) returns QP_ERR_NOMEM. */
QP_NODISCARD qp_status qp_json_write_file(const char *dir, const char *name, cJSON *j, bool built, qp_err *e);

/* The header every JSON document quantpack writes starts with (the verify receipt, the roundtrip
 * report): {"schema": schema, "schema_version": version, "tool": {"name": "quantpack",
 * "version": QP_VERSION_STRING}}; the caller adds the rest. NULL when out of memory. */
cJSON *qp_json_doc_new(const char *schema, int version);

/* Python's repr/str of a float: the shortest round-trip digits ("1e-05", "10000.0", "0.1"). */
void qp_py_float_repr(double v, char *buf, size_t cap);
/* Appends Python's json.dumps(v, separators=(",", ":"), sort_keys=sort_keys) (ensure_ascii, the
 * default) of v; depth counts nesting (pass 0; deeper than 64 fails). Numbers: an integral
 * value within 2^53 as an integer (cJSON cannot tell 2 from 2.0), others as Python's float repr.
 * False on invalid UTF-8, too deep a value or out of memory. */
bool qp_json_dump_py(qp_buf *b, const cJSON *v, bool sort_keys, int depth);
/* json.dumps(v, indent=indent) (separators (",", ": "), one member a line, keys in order). */
bool qp_json_dump_py_indent(qp_buf *b, const cJSON *v, int indent);

#endif
