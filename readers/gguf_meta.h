/* GGUF metadata: typed getters over a model's qp_meta list (any reader's, not only GGUF's) and
 * the mapping of GGUF keys into qp_arch and qp_vocab. Internal to the library. */
#ifndef QP_GGUF_META_H
#define QP_GGUF_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"

/* True for the GGUF integer value types (u8..i64; not bool). */
bool qp_gguf_meta_type_is_int(qp_meta_type t);

/* Integer value of `key` stored with any integer type. False when absent, not an integer, or a
 * u64 above INT64_MAX. */
bool qp_gguf_meta_int(const qp_model *m, const char *key, int64_t *out);
/* Floating value of `key` stored as f32 or f64. */
bool qp_gguf_meta_float(const qp_model *m, const char *key, double *out);
bool qp_gguf_meta_bool(const qp_model *m, const char *key, bool *out);
/* Borrowed NUL-terminated string (valid until qp_model_close); *len (when non-NULL) gets the
 * stored length. NULL when absent or not a string. */
const char *qp_gguf_meta_str(const qp_model *m, const char *key, size_t *len);
/* The array entry for `key` when it is an array of elem_type; NULL otherwise. */
const qp_meta *qp_gguf_meta_array(const qp_model *m, const char *key, qp_meta_type elem_type);

/* Walks an array of strings: start with *pos = 0; each call yields the next element borrowed
 * from md->raw (not NUL-terminated). False at the end or on a malformed raw buffer. */
bool qp_gguf_meta_array_next_str(const qp_meta *md, size_t *pos, const uint8_t **s, size_t *len);

/* "u32", "string", ... for messages. */
const char *qp_gguf_meta_type_name(qp_meta_type t);

/* GGUF type 36 flavours (readers/gguf.md "Type 36 flavours"). quantpack writes this string key
 * ("qk256") into the GGUF files whose type-36 tensors are QK256; the reader also accepts "i2_s",
 * "bitnet32f16" and "split32". */
#define QP_GGUF_I2S_FLAVOUR_KEY "quantpack.i2s.flavour"

/* quantpack's keys for the hyperparameters of a BitNet model that its consumer's architecture
 * name implies and no consumer key states (readers/gguf.md "BitNet architectures"): the FFN
 * activation ("silu", "relu2") and the activation quantization in front of the projections
 * ("none", "int8_per_token"). Written into every BitNet GGUF we make; when present they must
 * agree with general.architecture, else the file is refused. */
#define QP_GGUF_FFN_ACT_KEY "quantpack.ffn_activation"
#define QP_GGUF_ACT_QUANT_KEY "quantpack.activation_quant"
#define QP_ACT_QUANT_NONE "none"
#define QP_ACT_QUANT_INT8 "int8_per_token"

/* What a BitNet general.architecture means to the consumer that runs it: "bitnet" is the 1bitLLM
 * graph (SiLU): float activations in llama.cpp (upstream types), int8 activations per token in
 * bitnet.cpp when its projections are MS I2_S (ms_i2s: its I2_S kernels quantize each row);
 * "bitnet-b1.58" and its earlier name "bitnet-25" (bitnet.cpp, the 2B4T graph: ReLU^2, int8
 * activations per token). False for other names. */
bool qp_gguf_bitnet_arch(const char *arch, bool ms_i2s, qp_act *act, bool *act_int8);

/* Name of the sibling scale tensor of a weight: "<base>.scale" for "<base>.weight" (llama.cpp's
 * BitNet "blk.N.attn_q.scale", BitNet-rs's first candidate), else "<name>.scale". False when it
 * does not fit buf. */
bool qp_gguf_scale_name(const char *weight_name, char *buf, size_t n);

/* Per-tensor scale of a QK256 tensor t of m: the one element of its F32/F16 sibling
 * "<base>.scale" (the GGUF reader has checked it is there, one element and finite). Returns false
 * when t is not QK256 or has no such sibling (BitNet-rs GgmlQk256NoScale: scale 1). The rows of
 * t decode at unit scale (LUT [-2,-1,+1,+2]); the weights are the rows times this scale. */
bool qp_gguf_sibling_scale(const qp_model *m, const qp_tensor *t, float *scale);
/* The same for a weight of any encoding: the one F32/F16 element of "<base>.scale" when present
 * (llama.cpp's and bitnet.cpp's optional per-tensor BitNet scales, blk.N.attn_q.scale ...:
 * their graphs multiply the projection's result by it). False when absent or not one element. */
bool qp_gguf_projection_scale(const qp_model *m, const qp_tensor *t, float *scale);

/* Fills m->arch_name, m->arch and m->vocab from GGUF metadata and the tensor table (call after
 * every tensor is added). Inconsistent tokenizer arrays, and quantpack keys that contradict the
 * architecture, give QP_ERR_CORRUPT; types that llama.cpp would refuse are recorded as
 * problems. */
QP_NODISCARD qp_status qp_gguf_meta_apply(qp_model *m, qp_err *e);

#endif
