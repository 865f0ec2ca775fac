/* qp_model: one description of a model, filled the same way by every reader.
 *
 * Ownership: a qp_model owns its file mappings and an arena holding every string and array it
 * exposes. Tensor data pointers borrow from the mappings and stay valid until qp_model_close.
 * Callers treat every field as read-only. */
#ifndef QUANTPACK_MODEL_H
#define QUANTPACK_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define QP_MAX_DIMS 4

typedef enum qp_format {
    QP_FORMAT_UNKNOWN = 0,
    QP_FORMAT_SAFETENSORS,  /* a .safetensors file or an HF model directory */
    QP_FORMAT_GGUF,
    QP_FORMAT_LLAMA2C,      /* llama2.c checkpoint (.bin) */
    QP_FORMAT_TRLM,
    QP_FORMAT_RDRR,
    QP_FORMAT_BULLET,
    QP_FORMAT_COUNT
} qp_format;

QP_API const char *qp_format_name(qp_format f); /* "safetensors", "gguf", "llama2c", ... */

typedef enum qp_family {
    QP_FAMILY_UNKNOWN = 0,
    QP_FAMILY_LLAMA,
    QP_FAMILY_MISTRAL,
    QP_FAMILY_QWEN2,
    QP_FAMILY_BITNET,
    QP_FAMILY_QWEN3,  /* Qwen2's graph without q/k/v bias, with per-head q/k RMS norms */
    QP_FAMILY_PHI3,   /* Llama's block with fused attn_qkv and gate+up in one ffn_up */
    QP_FAMILY_GEMMA,  /* GeGLU, embeddings x sqrt(hidden), RMS norms as (1 + w) in HF */
    QP_FAMILY_GEMMA2, /* Gemma + post-attention/post-FFN norms, soft-capping, sliding window */
    QP_FAMILY_GEMMA3, /* Gemma 2 + q/k norms, local/global rope bases, no attention soft-cap */
    QP_FAMILY_QWEN35, /* Qwen3.5 dense: gated delta-net (linear attention) layers, every
                         full_attn_interval-th layer gated full attention (runtime.md "Qwen3.5") */
    QP_FAMILY_COUNT
} qp_family;

QP_API const char *qp_family_name(qp_family f); /* "llama", "mistral", "qwen2", "bitnet", "qwen3",
                                                   "phi3", "gemma", "gemma2", "gemma3", "qwen35" */
/* True for the Gemma families (runtime/runtime.md "Gemma"). */
QP_API bool qp_family_is_gemma(qp_family f);

typedef enum qp_rope_style {
    QP_ROPE_NORM = 0, /* rotate adjacent pairs (2i, 2i+1): llama2.c, GGUF "llama" */
    QP_ROPE_NEOX = 1, /* rotate halves (i, i + d/2): HF checkpoints, BitNet GGUFs */
} qp_rope_style;

typedef enum qp_act {
    QP_ACT_SILU = 0, /* SiLU-gated FFN: down(silu(gate(x)) * up(x)) */
    QP_ACT_RELU2 = 1, /* BitNet: down(relu(gate(x))^2 * up(x)) */
    QP_ACT_GELU = 2,  /* GeGLU (Gemma): down(gelu_tanh(gate(x)) * up(x)), HF gelu_pytorch_tanh */
} qp_act;

QP_API const char *qp_act_name(qp_act a); /* "silu", "relu2", "gelu"; "unknown" otherwise */
/* The activation named name ("silu", "relu2", "gelu"); false for any other name. */
QP_API bool qp_act_from_name(const char *name, qp_act *out);

/* YaRN rope scaling (Hugging Face _compute_yarn_parameters; converters/trillim_sdk.md "Rope"):
 * factor 0 = none; beta_fast / beta_slow 0 = HF's defaults 32 / 1. core/rope.h computes it. */
typedef struct qp_rope_yarn {
    double factor;
    int64_t orig_max_pos;
    double beta_fast, beta_slow;
} qp_rope_yarn;

/* Llama 3.1's rope scaling (HF rope_scaling {"rope_type": "llama3"}; transformers'
 * _compute_llama3_parameters): each rotation frequency divided by a factor in [1, factor] chosen
 * by its wavelength against orig_max_pos. factor 0 = none. core/rope.h computes it. */
typedef struct qp_rope_llama3 {
    double factor, low_freq_factor, high_freq_factor;
    int64_t orig_max_pos;
} qp_rope_llama3;

/* The architecture, as every source is mapped into it. Unknown values are 0 (or -1 for ids). */
typedef struct qp_arch {
    qp_family family;
    int64_t hidden;        /* embedding width */
    int64_t intermediate;  /* FFN width */
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t vocab;
    int64_t max_pos;       /* context length */
    float norm_eps;        /* RMSNorm epsilon */
    float rope_theta;
    qp_rope_style rope_style;
    qp_rope_yarn rope_yarn; /* TRLM rope.cache's YaRN trailer; zero otherwise */
    qp_rope_llama3 rope_llama3; /* HF config.json's llama3 rope_scaling; zero otherwise */
    bool tie_embeddings;   /* output projection shares token embeddings */
    bool qkv_bias;         /* q/k/v projections have biases (Qwen2) */
    bool sub_norms;        /* BitNet attn_sub_norm / ffn_sub_norm */
    bool qk_norm;          /* per-head RMS norms of q and k before RoPE (Qwen3 attn_q_norm /
                              attn_k_norm, [head_dim] each) */
    int64_t sliding_window; /* > 0: a sliding layer attends to the last sliding_window positions */
    int32_t swa_pattern;   /* layer l slides when sliding_window > 0 and (swa_pattern <= 1 or
                              l % swa_pattern < swa_pattern - 1), llama.cpp's set_swa_pattern */
    /* Gemma (runtime/runtime.md "Gemma"): */
    bool norm_plus_one;    /* RMS norm weights are stored as w and applied as (1 + w) (HF Gemma
                              checkpoints; llama.cpp's converter writes 1 + w) */
    float attn_scale;      /* > 0: q is scaled by this (query_pre_attn_scalar^-1/2); 0: head_dim^-1/2 */
    float attn_softcap;    /* > 0: attention scores -> c * tanh(s / c) (Gemma 2) */
    float final_softcap;   /* > 0: logits -> c * tanh(l / c) (Gemma 2) */
    float rope_theta_swa;  /* > 0: rope base of the sliding-window layers (Gemma 3's local base) */
    float rope_freq_scale; /* > 0: positions x this in the non-sliding layers (linear rope
                              scaling, 1 / factor); 0: 1 */
    qp_act act;
    /* BitNet: the inputs of the seven projections are quantized to int8 per token (BitLinear;
     * bitnet.cpp). Set by the readers from what the source says (runtime/runtime.md). */
    bool act_int8;
    /* Mixture of experts (Mixtral): n_experts FFNs per layer, a router picks n_experts_used per
     * token (runtime/runtime.md "Mixture of experts"); 0 for a dense FFN. */
    int64_t n_experts, n_experts_used;
    /* Qwen3.5 (runtime/runtime.md "Qwen3.5"; 0 / false for every other family): layer l is gated
     * full attention when (l + 1) % full_attn_interval == 0, a gated delta-net layer otherwise;
     * the delta-net sizes as llama.cpp's ssm.* keys name them. */
    int32_t full_attn_interval;
    int64_t ssm_conv_kernel;  /* causal depthwise conv width (linear_conv_kernel_dim) */
    int64_t ssm_state_size;   /* key head width (linear_key_head_dim) */
    int64_t ssm_group_count;  /* key heads (linear_num_key_heads) */
    int64_t ssm_time_step_rank; /* value heads (linear_num_value_heads) */
    int64_t ssm_inner_size;   /* value heads x value head width */
    int64_t rope_dims;        /* > 0: RoPE rotates the first rope_dims of each head (partial) */
    bool ssm_a_log;           /* ssm_a holds HF's A_log (applied as -exp); false: llama.cpp's -exp(A_log) */
    bool ssm_heads_tiled;     /* value head h reads key head h % key heads (llama.cpp's GGUF order);
                                 false: h / (value heads / key heads) (HF's grouped order) */
    int32_t bos_id;        /* -1 when none */
    int32_t eos_id;        /* -1 when none */
} qp_arch;

typedef struct qp_tensor {
    const char *name;  /* as stored in the source (HF, GGUF or synthesized for llama2.c) */
    const char *canon; /* GGUF-style name ("blk.0.attn_q.weight"); NULL when not mapped */
    qp_encoding enc;
    int n_dims;
    int64_t ne[QP_MAX_DIMS]; /* ne[0] = innermost (row length), as ggml; unused dims are 1 */
    const uint8_t *data;     /* borrowed from the mapping */
    size_t nbytes;
    uint64_t offset;         /* absolute byte offset of data in its file */
    int file_index;          /* index into the model's files (shards) */
    /* true when data is a copy decoded from what the file stores (an RDRR Q4_K tensor whose rows
     * are zero-padded to 256 is read as F32 without the padding): stored_enc is then the file's
     * encoding. false (as zeroed): enc is the file's encoding. qp_tensor_stored_enc reads both. */
    bool decoded_copy;
    qp_encoding stored_enc;
} qp_tensor;

/* Tokenizer models, named as GGUF's tokenizer.ggml.model. */
typedef enum qp_tok_model {
    QP_TOK_NONE = 0,
    QP_TOK_SPM,  /* "llama": SentencePiece BPE with scores and byte fallback */
    QP_TOK_BPE,  /* "gpt2": byte-level BPE with merges and a pre-tokenizer */
    QP_TOK_WPM,  /* "bert": WordPiece */
    QP_TOK_UGM,  /* "t5": SentencePiece unigram (Viterbi over scored pieces) */
} qp_tok_model;

/* A Unicode normalisation form a tokenizer.json normalizer applies before its model. */
typedef enum qp_norm_form {
    QP_NORM_NONE = 0,
    QP_NORM_NFC,
    QP_NORM_NFD,
    QP_NORM_NFKC,
    QP_NORM_NFKD,
} qp_norm_form;

/* GGUF token types. */
enum {
    QP_TOKTYPE_UNDEFINED = 0,
    QP_TOKTYPE_NORMAL = 1,
    QP_TOKTYPE_UNKNOWN = 2,
    QP_TOKTYPE_CONTROL = 3,
    QP_TOKTYPE_USER_DEFINED = 4,
    QP_TOKTYPE_UNUSED = 5,
    QP_TOKTYPE_BYTE = 6,
};

/* Flags of a tokenizer.json added token (HF AddedToken). */
enum {
    QP_ADDED_LSTRIP = 1,      /* whitespace before it is part of the match (dropped) */
    QP_ADDED_RSTRIP = 2,      /* whitespace after it is part of the match (dropped) */
    QP_ADDED_SINGLE_WORD = 4, /* read, not applied (runtime/tokenizer.md) */
    QP_ADDED_NORMALIZED = 8   /* matched in the normalised text when the vocabulary has a Unicode
                                 normalizer (runtime/tokenizer.md); HF's default: not special */
};

typedef struct qp_vocab {
    qp_tok_model model;
    char pre[48];          /* byte-level pre-tokenizer name ("default", "llama-bpe", ...) */
    int64_t n_tokens;
    char **tokens;         /* NUL-terminated copies; token_lens has the true lengths */
    uint32_t *token_lens;
    float *scores;         /* may be NULL */
    int32_t *types;        /* QP_TOKTYPE_*; may be NULL */
    uint8_t *added_flags;  /* QP_ADDED_* of tokenizer.json added_tokens; may be NULL (GGUF
                              cannot hold them: llama.cpp sets them per model in code) */
    int64_t n_merges;
    char **merges;         /* "left right", as tokenizer.ggml.merges */
    int32_t bos_id, eos_id, unk_id, pad_id; /* -1 when none */
    bool add_bos, add_eos;
    bool no_space_prefix;  /* SentencePiece without the dummy-prefix space (GGUF
                              tokenizer.ggml.add_space_prefix false; Gemma 3; a "t5" GGUF
                              without that key, as llama.cpp) */
    bool remove_extra_spaces; /* unigram: collapse space runs, drop leading/trailing spaces
                                 (GGUF tokenizer.ggml.remove_extra_whitespaces) */
    const uint8_t *charsmap;  /* unigram: SentencePiece precompiled_charsmap (GGUF
                                 tokenizer.ggml.precompiled_charsmap); NULL when none */
    size_t charsmap_len;
    qp_norm_form normalizer;  /* tokenizer.json NFC / NFD / NFKC / NFKD normalizer, applied to the
                                 text between special tokens (GGUF has no key for it) */
    char *hf_json;         /* tokenizer.json text when the source had one (for carrying over) */
    size_t hf_json_len;
} qp_vocab;

/* Free-form metadata, typed as GGUF values (value type ids are GGUF's). */
typedef enum qp_meta_type {
    QP_META_U8 = 0, QP_META_I8 = 1, QP_META_U16 = 2, QP_META_I16 = 3, QP_META_U32 = 4,
    QP_META_I32 = 5, QP_META_F32 = 6, QP_META_BOOL = 7, QP_META_STRING = 8, QP_META_ARRAY = 9,
    QP_META_U64 = 10, QP_META_I64 = 11, QP_META_F64 = 12, QP_META_TYPE_COUNT
} qp_meta_type;

typedef struct qp_meta {
    const char *key;
    qp_meta_type type;
    qp_meta_type arr_type; /* element type when type == QP_META_ARRAY */
    uint64_t n;            /* elements for arrays, 1 for scalars */
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
    } v;                   /* scalar value (integers widened, floats as double) */
    const char *str;       /* QP_META_STRING: NUL-terminated copy */
    uint64_t str_len;
    const uint8_t *raw;    /* QP_META_ARRAY: element bytes as in a GGUF file (strings as u64 len
                              + bytes each); borrowed from the mapping or the arena */
    size_t raw_size;
} qp_meta;

typedef struct qp_model_priv qp_model_priv;

typedef struct qp_model {
    qp_format format;
    uint32_t format_version;  /* GGUF 2/3, llama2.c 0/1/2, ... */
    const char *path;
    const char *arch_name;    /* "llama", "qwen2", "bitnet", as the source names it */
    qp_arch arch;
    qp_tensor *tensors;
    int64_t n_tensors;
    qp_vocab vocab;
    qp_meta *meta;
    int64_t n_meta;
    const char **problems;    /* non-fatal findings, for inspect */
    int64_t n_problems;
    qp_model_priv *priv;
} qp_model;

typedef struct qp_open_opts {
    const char *tokenizer_path; /* for sources without one (llama2.c): tokenizer.bin/.model/.json */
} qp_open_opts;

/* Detects the format of path (file magic or directory contents). */
QP_API qp_format qp_format_detect(const char *path);

/* Opens any supported model. *out is written only on success. */
QP_API QP_NODISCARD qp_status qp_model_open(const char *path, const qp_open_opts *opts, qp_model **out, qp_err *e);
QP_API void qp_model_close(qp_model *m); /* NULL is fine */
/* Opens a bare tokenizer.json (with tokenizer_config.json beside it when present) as a model that
 * holds only its vocabulary. *out is written only on success. */
QP_API QP_NODISCARD qp_status qp_model_open_tokenizer_json(const char *path, qp_model **out, qp_err *e);

/* Finds a tensor by canonical (GGUF-style) name, falling back to the source name. Borrowed. */
QP_API const qp_tensor *qp_model_find(const qp_model *m, const char *name);
QP_API const qp_meta *qp_model_meta(const qp_model *m, const char *key);
/* Whether a prompt gets BOS: the vocabulary's add_bos; a GGUF SentencePiece vocabulary without
 * tokenizer.ggml.add_bos_token adds it (llama.cpp's default). */
QP_API bool qp_model_adds_bos(const qp_model *m);

/* Element count of a tensor (product of ne). */
QP_API int64_t qp_tensor_nelements(const qp_tensor *t);
/* The encoding the file stores the tensor in (stored_enc for a decoded copy, else enc): what
 * inspect lists and what verify's thresholds are chosen by. */
QP_API qp_encoding qp_tensor_stored_enc(const qp_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
