/* Fuzz target: .bullet files (qp_bullet_read) from arbitrary bytes, then what a caller does with
 * a model that opened: touch every tensor's bytes, decode BQ4 rows, look up task heads, and
 * turn the model back into writer input (qp_bullet_info_from_model). The reader maps a file, so
 * the input goes to a per-process temp file first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "converters/convert_bullet.h"
#include "core/model_internal.h"
#include "fuzz_util.h"
#include "writers/bullet_writer.h"

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    const char *path = qp_fuzz_input_file("bullet", ".bullet", data, size);
    if (!path) return QP_ERR_IO;
    qp_model *m = NULL;
    qp_status s = qp_model_new(QP_FORMAT_BULLET, path, &m, e);
    if (s == QP_OK) {
        s = qp_bullet_read(m, path, NULL, e);
        if (s == QP_OK) s = qp_model_finish(m, e);
        if (s == QP_OK) {
            volatile float acc = 0;
            const qp_encoding_traits *tr = qp_encoding_get(QP_ENC_BQ4);
            for (int64_t i = 0; i < m->n_tensors; i++) {
                const qp_tensor *t = &m->tensors[i];
                if (t->nbytes) acc += (float)(t->data[0] ^ t->data[t->nbytes - 1]);
                if (t->nbytes >= 20) {
                    float y[32];
                    tr->dequantize(t->data + (t->nbytes / 20 - 1) * 20, y, 32);
                    acc += y[31];
                }
            }
            for (int64_t i = 0; i < m->vocab.n_tokens; i++)
                if (m->vocab.token_lens[i]) acc += (float)(uint8_t)m->vocab.tokens[i][m->vocab.token_lens[i] - 1];
            static const char *const tasks[] = {"sentiment", "ner", "pos", "classifier"};
            for (int k = 0; k < 4; k++) {
                qp_bullet_task_head h;
                qp_err e2 = {0};
                if (qp_bullet_task_head_get(m, tasks[k], &h, &e2) == QP_OK) {
                    float hidden[64] = {0}, sc[8];
                    if (h.hidden <= 64 && h.n_out <= 8) qp_bullet_task_scores(&h, hidden, sc);
                    acc += (float)h.labels[h.n_out - 1][0];
                    qp_bullet_task_head_free(&h);
                }
            }
            qp_bullet_info info;
            qp_bullet_head_info *heads = NULL;
            qp_bullet_tensor *bt = NULL;
            int64_t n = 0;
            qp_err e3 = {0};
            if (qp_bullet_info_from_model(m, &info, &heads, &bt, &n, &e3) == QP_OK)
                qp_bullet_info_free(&info, heads, bt);
            (void)acc;
        }
        qp_model_close(m);
    }
    unlink(path);
    return s;
}
