/* Hugging Face model-directory side files: config.json -> qp_arch, tokenizer.json (+
 * tokenizer_config.json) -> qp_vocab. Used by the safetensors reader and by any reader of an
 * HF-style directory. Mapping tables: readers/hf_config.md. */
#ifndef QP_HF_CONFIG_H
#define QP_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/model_internal.h"

/* Limits (exceeding one returns QP_ERR_LIMIT). */
#define QP_HF_JSON_MAX_BYTES ((size_t)512 << 20) /* tokenizer.json / config.json file size */
#define QP_HF_MAX_TOKENS ((int64_t)1 << 22)       /* token ids must be below this */
#define QP_HF_MAX_MERGES ((int64_t)1 << 24)
#define QP_HF_MAX_EXPERTS 512 /* llama.cpp's LLAMA_MAX_EXPERTS */

/* Parses config.json text into m->arch, m->arch_name and "hf.config.*" metadata. `file` names
 * the source in messages. Unknown architectures are kept (family UNKNOWN) with a problem. */
QP_NODISCARD qp_status qp_hf_config_parse(qp_model *m, const char *text, size_t len, const char *file,
                                          qp_err *e);
QP_NODISCARD qp_status qp_hf_config_read(qp_model *m, const char *path, qp_err *e);

/* Parses tokenizer.json (and, when config_path is non-NULL and exists, tokenizer_config.json)
 * into m->vocab; keeps the tokenizer.json text in m->vocab.hf_json. A tokenizer model we do not
 * handle (Unigram, WordLevel) returns QP_ERR_UNSUPPORTED and leaves m->vocab empty. */
QP_NODISCARD qp_status qp_hf_tokenizer_read(qp_model *m, const char *json_path, const char *config_path,
                                            qp_err *e);
QP_NODISCARD qp_status qp_hf_tokenizer_parse(qp_model *m, const char *text, size_t len, const char *file,
                                             const char *config_text, size_t config_len, qp_err *e);

/* The tokenizer.json Split regex of a byte-level BPE vocabulary's pre-tokenizer name (GGUF
 * tokenizer.ggml.pre, as qp_vocab.pre), and whether its BPE model ignores merges (llama-bpe); NULL
 * when the name has no single-regex form here. The reader maps the same regexes back. */
const char *qp_hf_pre_regex(const char *pre, bool *ignore_merges);

/* The chat template of a tokenizer_config.json (its "chat_template": a string, or the "default"
 * entry of a list of {name, template}) into the metadata string tokenizer.chat_template, unless the
 * model has one already or the file is absent. An unreadable file adds a problem, not an error
 * (the tokenizer reader reports its own). Fails only on allocation (QP_ERR_NOMEM). */
QP_NODISCARD qp_status qp_hf_chat_template_read(qp_model *m, const char *config_path, qp_err *e);

/* A .safetensors file given on its own whose folder holds a config.json: that folder is the
 * model. When it is, returns true and, if dir is not NULL, sets *dir to the folder (malloc'd;
 * false with *dir NULL on out of memory). */
bool qp_hf_folder_of_file(const char *path, char **dir);

#endif
