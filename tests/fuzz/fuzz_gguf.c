/* libFuzzer target for the GGUF reader: the input is written to a per-process temp file, opened
 * with qp_model_open (format detection included) and closed; on success every tensor's first and
 * last byte and every decoded token is touched so ASan sees any out-of-bounds pointer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "quantpack/quantpack.h"

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    const char *path = qp_fuzz_input_file("gguf", ".gguf", data, size);
    if (!path) return QP_ERR_IO;
    qp_model *m = NULL;
    const qp_status s = qp_model_open(path, NULL, &m, e);
    if (s == QP_OK) {
        volatile uint8_t sink = qp_fuzz_touch_tensors(m);
        for (int64_t i = 0; i < m->n_tensors; i++) sink ^= (uint8_t)m->tensors[i].name[0];
        for (int64_t i = 0; i < m->vocab.n_tokens; i++) {
            const char *tok = m->vocab.tokens[i];
            sink ^= (uint8_t)tok[m->vocab.token_lens[i]]; /* the NUL */
            if (m->vocab.scores) {
                uint32_t bits;
                memcpy(&bits, &m->vocab.scores[i], 4);
                sink ^= (uint8_t)bits;
            }
            if (m->vocab.types) sink ^= (uint8_t)m->vocab.types[i];
        }
        for (int64_t i = 0; i < m->vocab.n_merges; i++) sink ^= (uint8_t)m->vocab.merges[i][0];
        for (int64_t i = 0; i < m->n_meta; i++) {
            const qp_meta *md = &m->meta[i];
            if (md->type == QP_META_ARRAY && md->raw_size) sink ^= md->raw[0] ^ md->raw[md->raw_size - 1];
            if (md->type == QP_META_STRING) sink ^= (uint8_t)md->str[md->str_len];
        }
        (void)sink;
        qp_model_close(m);
    }
    unlink(path);
    return s;
}
