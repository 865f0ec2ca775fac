/* Fuzz target: llama2.c checkpoints (probe + qp_llama2c_read) from arbitrary bytes. The reader
 * maps a file, so the input goes to a per-process temp file first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/model_internal.h"

static const char *fuzz_path(void) {
    static char path[512];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/qp_fuzz_llama2c_%ld.bin", dir && *dir ? dir : "/tmp",
                 (long)getpid());
    }
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path();
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t wrote = size ? fwrite(data, 1, size, f) : 0;
    fclose(f);
    if (wrote != size) return 0;
    (void)qp_llama2c_probe(data, size < 64 ? size : 64, size);
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_new(QP_FORMAT_LLAMA2C, path, &m, &e) == QP_OK) {
        qp_status s = qp_llama2c_read(m, path, NULL, &e);
        if (s == QP_OK) s = qp_model_finish(m, &e);
        if (s == QP_OK) {
            /* touch every tensor's bytes: they must lie inside the mapping */
            volatile uint8_t acc = 0;
            for (int64_t i = 0; i < m->n_tensors; i++) {
                const qp_tensor *t = &m->tensors[i];
                if (t->nbytes) acc ^= t->data[0] ^ t->data[t->nbytes - 1];
            }
            (void)acc;
        }
        qp_model_close(m);
    }
    unlink(path);
    return 0;
}
