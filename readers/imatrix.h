/* Importance matrices of llama-imatrix, both formats (readers/imatrix.md): the legacy binary .dat
 * and the GGUF imatrix ("<tensor>.in_sum2" / "<tensor>.counts"). Read into per-tensor weights as
 * llama-quantize derives them (sums / count), which converters feed to the encoders'
 * quantize_imatrix. */
#ifndef QP_READERS_IMATRIX_H
#define QP_READERS_IMATRIX_H

#include <stdbool.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/status.h"

/* One tensor's importance weights: ne[0] values per expert (n = ne[0] x experts). */
typedef struct qp_imatrix_entry {
    const char *name;    /* the weight's GGUF name ("blk.0.attn_q.weight") */
    const float *values; /* n finite values */
    int64_t n;
} qp_imatrix_entry;

typedef struct qp_imatrix {
    qp_imatrix_entry *entries; /* in file order (legacy) or sorted by name (GGUF) */
    int64_t n;
    bool legacy;               /* the .dat format */
    int64_t chunk_count;       /* chunks llama-imatrix ran (0 when the file does not say) */
    const char *dataset;       /* first dataset name; NULL when none */
    qp_arena arena;            /* owns names and values */
} qp_imatrix;

/* Reads path (format told by the GGUF magic). Bad files give QP_ERR_FORMAT / QP_ERR_CORRUPT /
 * QP_ERR_LIMIT naming the file, entry and offset; *out is written only on success. */
QP_NODISCARD qp_status qp_imatrix_open(const char *path, qp_imatrix **out, qp_err *e);
void qp_imatrix_free(qp_imatrix *im); /* NULL is fine */

#endif
