/* Tensor identity of two models, the proof of a lossless round trip (cli/roundtrip.md): the same
 * tensor names, the same shapes and the same values, whatever container holds them. */
#ifndef QP_CONVERTERS_TENSOR_COMPARE_H
#define QP_CONVERTERS_TENSOR_COMPARE_H

#include "quantpack/model.h"

typedef struct qp_tensor_compare_result {
    bool equal;           /* every tensor of a is in b, same shape, same values; no tensor more */
    int64_t n_tensors;    /* tensors of a compared before the verdict */
    int64_t n_same_bytes; /* of those, stored in the same encoding with the same bytes */
    int64_t n_same_f32;   /* different encodings, equal bits once decoded to F32 */
    int64_t n_reordered;  /* q/k tensors equal once decoded, rows in the other RoPE order */
    char reason[512];     /* when !equal: the first difference (tensor, element, both values) */
} qp_tensor_compare_result;

/* Compares every tensor of a with the tensor of b of the same name (canonical GGUF-style name
 * when a has one, else the source name; qp_model_find): shapes (ne) must be equal, then the stored
 * bytes when both store the same encoding, else the F32 decoding of both, bit for bit (a BF16
 * tensor equals its exact F32 widening). When a and b rotate different RoPE pairs (rope_style),
 * the rows of attn_q / attn_k are compared through the permutation of readers/name_map.h, as the
 * converters write them. b must hold no other tensor. Memory: two F32 copies of
 * the largest tensor. Returns QP_OK with r filled whatever the verdict; QP_ERR_UNSUPPORTED when a
 * tensor's encodings differ and one cannot be decoded (message names it), QP_ERR_NOMEM. */
QP_NODISCARD qp_status qp_models_compare_tensors(const qp_model *a, const qp_model *b,
                                                 qp_tensor_compare_result *r, qp_err *e);

#endif
