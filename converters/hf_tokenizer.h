/* Hugging Face tokenizer files from any model's vocabulary (a GGUF's tokenizer.ggml.*, a llama2.c
 * tokenizer.bin, a SentencePiece tokenizer.model, a carried tokenizer.json). Rules and the peer
 * check: converters/hf_folder.md "Tokenizer files". */
#ifndef QP_CONVERTERS_HF_TOKENIZER_H
#define QP_CONVERTERS_HF_TOKENIZER_H

#include "quantpack/model.h"

/* Writes into the existing folder dir: tokenizer.json (the carried text when the source had one,
 * else built from m->vocab so that HF tokenizers gives the ids quantpack's tokenizer gives),
 * tokenizer_config.json (special tokens, add_bos/eos, added_tokens_decoder, chat_template) and
 * special_tokens_map.json. QP_ERR_UNSUPPORTED (nothing written) when the model has no vocabulary
 * or its kind has no tokenizer.json form here (the message says which). */
QP_NODISCARD qp_status qp_hf_tokenizer_write(const qp_model *m, const char *dir, qp_err *e);

#endif
