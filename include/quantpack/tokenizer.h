/* Tokenizers built from a qp_vocab: SentencePiece-style BPE ("llama"), byte-level BPE ("gpt2",
 * with its pre-tokenizer variants) and WordPiece ("bert"). Owned by runtime/tokenizer*.c. */
#ifndef QUANTPACK_TOKENIZER_H
#define QUANTPACK_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct qp_tokenizer qp_tokenizer;

/* Builds a tokenizer over v. v is borrowed and must outlive the tokenizer. */
QP_API QP_NODISCARD qp_status qp_tokenizer_new(const qp_vocab *v, qp_tokenizer **out, qp_err *e);
QP_API void qp_tokenizer_free(qp_tokenizer *t); /* NULL is fine */

/* Encodes len bytes of UTF-8 text. add_bos prepends the BOS id (when the vocab has one);
 * parse_special recognises special/control token texts such as "<s>" inside text.
 * *ids is allocated with qp_malloc (caller frees with qp_free); written only on success. */
QP_API QP_NODISCARD qp_status qp_tokenizer_encode(const qp_tokenizer *t, const char *text, size_t len, bool add_bos,
                                           bool parse_special, int32_t **ids, int64_t *n_ids, qp_err *e);

/* Writes the bytes that token `id` contributes to decoded text when it follows prev_id (-1 at
 * the start): byte tokens give their byte, SentencePiece's U+2581 becomes a space and the
 * leading space right after BOS is dropped (as llama2.c and llama.cpp print). *len gets the
 * number of bytes the piece has (it may exceed cap, then only cap bytes are written; buf may be
 * NULL with cap 0 to ask the size). QP_ERR_ARG for an id outside the vocabulary. */
QP_API QP_NODISCARD qp_status qp_tokenizer_decode_piece(const qp_tokenizer *t, int32_t prev_id, int32_t id,
                                                 char *buf, size_t cap, size_t *len, qp_err *e);

QP_API int64_t qp_tokenizer_n_vocab(const qp_tokenizer *t);

#ifdef __cplusplus
}
#endif
#endif
