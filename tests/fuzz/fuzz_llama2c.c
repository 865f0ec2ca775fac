/* Fuzz target: llama2.c checkpoints (probe + qp_llama2c_read) from arbitrary bytes. The reader
 * maps a file, so the input goes to a per-process temp file first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "fuzz_util.h"

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    const char *path = qp_fuzz_input_file("llama2c", ".bin", data, size);
    if (!path) return QP_ERR_IO;
    (void)qp_llama2c_probe(data, size < 64 ? size : 64, size);
    qp_model *m = NULL;
    qp_status s = qp_model_new(QP_FORMAT_LLAMA2C, path, &m, e);
    if (s == QP_OK) {
        s = qp_llama2c_read(m, path, NULL, e);
        if (s == QP_OK) s = qp_model_finish(m, e);
        if (s == QP_OK) {
            volatile uint8_t acc = qp_fuzz_touch_tensors(m);
            (void)acc;
        }
        qp_model_close(m);
    }
    unlink(path);
    return s;
}
