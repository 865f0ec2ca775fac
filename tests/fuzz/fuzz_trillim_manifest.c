/* Fuzz target: Trillim SDK quantize manifests (v1 and the current sections form) from arbitrary bytes. Parses, checks the ranges
 * against a fake shard size, and re-serializes: a manifest that parses must serialize back to
 * exactly the input bytes (the layout has no slack). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "converters/trillim_manifest.h"
#include "fuzz_util.h"
#include "quantpack/core.h"

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    qp_trillim_manifest *m = NULL;
    const qp_status s = qp_trillim_manifest_parse(data, size, "fuzz", &m, e);
    if (s != QP_OK) return s;
    qp_err e2 = {0};
    uint64_t *sizes = qp_calloc(m->n_shards ? m->n_shards : 1, sizeof *sizes);
    if (sizes) {
        for (uint32_t i = 0; i < m->n_shards; i++) sizes[i] = 1u << 20;
        /* either verdict is fine here; e2 keeps it apart from serialize's e */
        if (qp_trillim_manifest_check_shards(m, sizes, "fuzz", &e2) != QP_OK) qp_err_clear(&e2);
        qp_free(sizes);
    }
    uint8_t *out = NULL;
    size_t n = 0;
    if (qp_trillim_manifest_serialize(m, &out, &n, &e2) == QP_OK) {
        if (n != size || memcmp(out, data, n) != 0) abort();
        qp_free(out);
    }
    qp_trillim_manifest_free(m);
    return s;
}
