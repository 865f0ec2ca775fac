/* Writers of the TRLM v1 directory files: qmodel.tensors, rope.cache, qmodel.lora. The byte
 * layouts are defined with the reader (readers/trlm_format.h, readers/trlm.md). */
#ifndef QP_TRLM_WRITER_H
#define QP_TRLM_WRITER_H

#include "readers/trlm_format.h"

/* The files a TRLM folder holds (what -f/--force may replace; anything else in the folder is
 * kept): core.h qp_outdir_kind. */
extern const qp_outdir_kind qp_trlm_outdir_kind;
extern const qp_outdir_kind qp_trlm_adapter_outdir_kind; /* a LoRA adapter bundle (qmodel.lora) */

/* ---- qmodel.tensors writer (writers/trlm_writer.c) -------------------------------------------
 * open (declares every record: offsets are laid out at once) -> for each record in order:
 * write its data in any chunks (exactly record.size bytes) -> commit (atomic rename) or abort. */
typedef struct qp_trlm_writer qp_trlm_writer;

QP_NODISCARD qp_status qp_trlm_writer_open(const char *path, uint32_t arch, const qp_trlm_body *body,
                                           qp_trlm_record *records, qp_trlm_writer **out, qp_err *e);
QP_NODISCARD qp_status qp_trlm_writer_write(qp_trlm_writer *w, const void *data, size_t n, qp_err *e);
QP_NODISCARD qp_status qp_trlm_writer_commit(qp_trlm_writer *w, qp_err *e); /* always frees w */
void qp_trlm_writer_abort(qp_trlm_writer *w);                    /* NULL is fine */

/* rope.cache: cos/sin tables for max_pos positions x head_dim/2 frequencies (readers/trlm.md);
 * with yarn (factor > 0) the YaRN frequencies and attention factor of core/rope.h, then the
 * 48-byte YARN trailer (converters/trillim_sdk.md "Rope"). yarn NULL: plain, as before. */
QP_NODISCARD qp_status qp_trrc_write(const char *path, uint32_t max_pos, uint32_t head_dim, double theta,
                                     const qp_rope_yarn *yarn, qp_err *e);
/* The angle table value as the writer computes it (for checks): pos * theta^(-2i/head_dim). */
double qp_trrc_angle(uint32_t pos, uint32_t i, uint32_t head_dim, double theta);

/* qmodel.lora writer: one slot per layer x target (k, v, q, o, gate, up, down). */
typedef struct qp_trla_slot {
    bool present;
    uint32_t in_orig, out_orig, in_padded, out_padded;
    const float *a; /* rank x in_orig (row-major), borrowed */
    const float *b; /* out_orig x rank */
} qp_trla_slot;

QP_NODISCARD qp_status qp_trla_write(const char *path, uint32_t n_layers, uint32_t rank, double scale,
                                     const qp_trla_slot *slots, qp_err *e);

#endif
