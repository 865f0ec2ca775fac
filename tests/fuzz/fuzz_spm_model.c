/* Fuzz target: the tokenizer-file readers (SentencePiece tokenizer.model protobuf and the
 * llama2.c tokenizer .bin) on arbitrary bytes, each into a fresh model. The verdict: accepted when
 * either reader accepts the input (else the SentencePiece reader's status). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/model_internal.h"
#include "fuzz_util.h"

/* Reads the vocabulary and walks it: every token must be NUL-terminated at its length. Returns
 * the reader's status. */
static qp_status run(qp_status (*fn)(qp_model *, const char *, qp_err *), const char *path, qp_err *e) {
    qp_model *m = NULL;
    qp_status s = qp_model_new(QP_FORMAT_UNKNOWN, path, &m, e);
    if (s != QP_OK) return s;
    s = fn(m, path, e);
    if (s == QP_OK) {
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
    return s;
}

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    const char *path = qp_fuzz_input_file("spm_model", ".bin", data, size);
    if (!path) return QP_ERR_IO;
    const qp_status spm = run(qp_vocab_read_spm_model, path, e);
    qp_err e_bin = {0};
    const qp_status bin = run(qp_vocab_read_llama2c_bin, path, &e_bin);
    unlink(path);
    if (spm != QP_OK && bin == QP_OK) *e = e_bin;
    return spm == QP_OK ? spm : bin == QP_OK ? bin : spm;
}
