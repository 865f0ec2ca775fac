/* A string -> int64 hash map (open addressing, FNV-1a) for duplicate detection and lookups.
 * Keys are borrowed: they must outlive the map. */
#ifndef QP_STRMAP_H
#define QP_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/status.h"

typedef struct qp_strmap {
    const char **keys;
    size_t *key_lens;
    int64_t *vals;
    size_t cap, count;
} qp_strmap;

/* Inserts key -> val and sets *added (when non-NULL); when the key exists the map is unchanged
 * and *added is false. QP_ERR_NOMEM (no message: the caller names the key) on allocation failure. */
QP_NODISCARD qp_status qp_strmap_put(qp_strmap *m, const char *key, size_t len, int64_t val, bool *added);
/* Returns true and writes *val when key is present. */
bool qp_strmap_get(const qp_strmap *m, const char *key, size_t len, int64_t *val);
void qp_strmap_free(qp_strmap *m);

#endif
