/* Importance-matrix files written by the tests themselves from known values, in both
 * llama-imatrix formats (readers/imatrix.md): the legacy .dat byte stream and the GGUF imatrix
 * ("<name>.in_sum2" / "<name>.counts" F32 tensors, imatrix.* keys). Include after qp_test_util.h. */
#ifndef QP_TEST_IMATRIX_GEN_H
#define QP_TEST_IMATRIX_GEN_H

#include <stdbool.h>
#include <string.h>

#include "qp_test_util.h"
#include "writers/gguf_writer.h"

typedef struct imatrix_gen_entry {
    const char *name;  /* the weight's name */
    const float *sums; /* nval sums of squared activations */
    int nval;
    int ncall;         /* the count the sums are divided by */
} imatrix_gen_entry;

/* i32 n; per entry i32 len, name, i32 ncall, i32 nval, f32 sums; then i32 chunks, i32 len, dataset */
static inline void imatrix_gen_legacy(qp_test_buf *b, const imatrix_gen_entry *en, int n, int chunks,
                                      const char *dataset) {
    qp_test_put_u32(b, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        qp_test_put_u32(b, (uint32_t)strlen(en[i].name));
        qp_test_put(b, en[i].name, strlen(en[i].name));
        qp_test_put_u32(b, (uint32_t)en[i].ncall);
        qp_test_put_u32(b, (uint32_t)en[i].nval);
        for (int k = 0; k < en[i].nval; k++) qp_test_put_f32(b, en[i].sums[k]);
    }
    if (dataset) {
        qp_test_put_u32(b, (uint32_t)chunks);
        qp_test_put_u32(b, (uint32_t)strlen(dataset));
        qp_test_put(b, dataset, strlen(dataset));
    }
}

/* The GGUF form; keys: which of imatrix.datasets / chunk_count / chunk_size to write (bits 0..2). */
static inline bool imatrix_gen_gguf(const char *path, const imatrix_gen_entry *en, int n, int chunks,
                                    unsigned keys, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
    char *ds[] = {"imatrix-gen"};
    bool ok = qp_gguf_writer_add_str(w, "general.type", "imatrix", 7, e) == QP_OK;
    if (ok && (keys & 1)) ok = qp_gguf_writer_add_str_array(w, "imatrix.datasets", ds, NULL, 1, e) == QP_OK;
    if (ok && (keys & 2)) ok = qp_gguf_writer_add_u32(w, "imatrix.chunk_count", (uint32_t)chunks, e) == QP_OK;
    if (ok && (keys & 4)) ok = qp_gguf_writer_add_u32(w, "imatrix.chunk_size", 512, e) == QP_OK;
    char name[128];
    for (int i = 0; ok && i < n; i++) {
        int64_t ne_s[2] = {en[i].nval, 1}, ne_c[2] = {1, 1};
        snprintf(name, sizeof name, "%s.in_sum2", en[i].name);
        ok = qp_gguf_writer_add_tensor(w, name, QP_ENC_F32, 2, ne_s, e) == QP_OK;
        snprintf(name, sizeof name, "%s.counts", en[i].name);
        ok = ok && qp_gguf_writer_add_tensor(w, name, QP_ENC_F32, 2, ne_c, e) == QP_OK;
    }
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (int i = 0; ok && i < n; i++) {
        float c = (float)en[i].ncall;
        ok = qp_gguf_writer_write_tensor(w, en[i].sums, (size_t)en[i].nval * 4, e) == QP_OK &&
             qp_gguf_writer_write_tensor(w, &c, 4, e) == QP_OK;
    }
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

#endif
