/* Fuzz target: the tokenizer-file readers (SentencePiece tokenizer.model protobuf and the
 * llama2.c tokenizer .bin) on arbitrary bytes, each into a fresh model. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "fuzz_util.h"

/* Reads the vocabulary and walks it: every token must be NUL-terminated at its length. */
static void run(qp_status (*fn)(qp_model *, const char *, qp_err *), const char *path) {
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_new(QP_FORMAT_UNKNOWN, path, &m, &e) != QP_OK) return;
    if (fn(m, path, &e) == QP_OK) {
        const qp_vocab *v = &m->vocab;
        volatile size_t acc = 0;
        for (int64_t i = 0; i < v->n_tokens; i++) {
            if (v->tokens[i][v->token_lens[i]] != '\0') abort();
            acc += v->token_lens[i] + (size_t)v->types[i];
        }
        (void)acc;
        if (v->bos_id >= v->n_tokens || v->eos_id >= v->n_tokens || v->unk_id >= v->n_tokens) abort();
    }
    qp_model_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = qp_fuzz_input_file("spm_model", ".bin", data, size);
    if (!path) return 0;
    run(qp_vocab_read_spm_model, path);
    run(qp_vocab_read_llama2c_bin, path);
    unlink(path);
    return 0;
}
