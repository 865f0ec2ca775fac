/* For readers only: building a qp_model. Not part of the public API. */
#ifndef QP_MODEL_INTERNAL_H
#define QP_MODEL_INTERNAL_H

#include "quantpack/model.h"
#include "core/strmap.h"

struct qp_model_priv {
    qp_arena arena;
    qp_mapped_file *files;
    int n_files, cap_files;
    int64_t cap_tensors, cap_meta, cap_problems;
    qp_strmap by_name;  /* source name -> tensor index */
    qp_strmap by_canon; /* canonical name -> tensor index (built by qp_model_finish) */
    qp_strmap by_meta;  /* metadata key -> index */
    char *path_owned;
};

/* A new empty model. */
QP_NODISCARD qp_status qp_model_new(qp_format f, const char *path, qp_model **out, qp_err *e);
qp_arena *qp_model_arena(qp_model *m);
/* Maps a file and writes its index (>= 0) to *index. */
QP_NODISCARD qp_status qp_model_add_file(qp_model *m, const char *path, int *index, qp_err *e);
const qp_mapped_file *qp_model_file(const qp_model *m, int index);
/* Appends a zeroed tensor with the given source name (copied into the arena) and points *out at
 * it. Fails with QP_ERR_CORRUPT when the name is already present. *out is valid until the next
 * qp_model_add_tensor call. */
QP_NODISCARD qp_status qp_model_add_tensor(qp_model *m, const char *name, size_t name_len, qp_tensor **out,
                                           qp_err *e);
/* Appends a zeroed metadata entry with the key copied and points *out at it (valid until the next
 * qp_model_add_meta call); QP_ERR_CORRUPT on a duplicate key. */
QP_NODISCARD qp_status qp_model_add_meta(qp_model *m, const char *key, size_t key_len, qp_meta **out,
                                         qp_err *e);
/* Records a non-fatal finding (formatted) for inspect. Findings are advisory: one that cannot be
 * stored for lack of memory is dropped. */
void qp_model_add_problem(qp_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Builds the canonical-name index; call once after all tensors are added. */
QP_NODISCARD qp_status qp_model_finish(qp_model *m, qp_err *e);

/* Convenience setters for metadata copied into the arena. */
QP_NODISCARD qp_status qp_model_meta_str(qp_model *m, const char *key, const char *val, size_t len,
                                         qp_err *e);
QP_NODISCARD qp_status qp_model_meta_u32(qp_model *m, const char *key, uint32_t v, qp_err *e);
QP_NODISCARD qp_status qp_model_meta_f32(qp_model *m, const char *key, float v, qp_err *e);

/* Sets tensor shape from dims listed outermost-first (safetensors/PyTorch order). */
QP_NODISCARD qp_status qp_tensor_set_shape_outer_first(qp_tensor *t, const int64_t *dims, int n_dims,
                                                       qp_err *e);

/* Reader entry points (readers/): each fills a model created by qp_model_new. */
QP_NODISCARD qp_status qp_safetensors_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);
QP_NODISCARD qp_status qp_gguf_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);
QP_NODISCARD qp_status qp_llama2c_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);
QP_NODISCARD qp_status qp_rdrr_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);
/* readers/trlm.c */
QP_NODISCARD qp_status qp_trlm_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);
QP_NODISCARD qp_status qp_bullet_read(qp_model *m, const char *path, const qp_open_opts *o, qp_err *e);

/* Tokenizer files into m->vocab (readers/spm_model.c): the SentencePiece tokenizer.model
 * protobuf and the llama2.c tokenizer .bin, both normalised to GGUF "llama" conventions. */
QP_NODISCARD qp_status qp_vocab_read_spm_model(qp_model *m, const char *path, qp_err *e);
QP_NODISCARD qp_status qp_vocab_read_llama2c_bin(qp_model *m, const char *path, qp_err *e);
/* A tokenizer file by its name: *.model (SentencePiece), *.json (HF tokenizer.json with its
 * tokenizer_config.json beside it), else llama2.c tokenizer.bin (readers/open.c). */
QP_NODISCARD qp_status qp_vocab_read_file(qp_model *m, const char *path, qp_err *e);

/* Probe: true when the first bytes (and the file size) look like a llama2.c checkpoint. */
bool qp_llama2c_probe(const uint8_t *head, size_t head_len, uint64_t file_size);

#endif
