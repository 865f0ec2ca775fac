/* A string -> int64 hash map (open addressing, FNV-1a) for duplicate detection and lookups.
 * Keys are borrowed: they must outlive the map. */
#ifndef QP_STRMAP_H
#define QP_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct qp_strmap {
    const char **keys;
    size_t *key_lens;
    int64_t *vals;
    size_t cap, count;
} qp_strmap;

/* Inserts key -> val. Returns 1 when inserted, 0 when the key exists (map unchanged), -1 on
 * allocation failure. */
int qp_strmap_put(qp_strmap *m, const char *key, size_t len, int64_t val);
/* Returns true and writes *val when key is present. */
bool qp_strmap_get(const qp_strmap *m, const char *key, size_t len, int64_t *val);
void qp_strmap_free(qp_strmap *m);

#endif
