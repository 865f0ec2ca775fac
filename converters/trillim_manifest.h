/* The Trillim SDK quantize manifest (.quantize_manifest.bin), v1 and the current SDK's form (a
 * sections block after the entries, actions 4-7): parse and validate untrusted bytes, serialize,
 * and build one from a Hugging Face safetensors directory exactly as the current SDK's build_manifest()
 * does. Layout and rules: readers/trlm.md (v1), converters/trillim_sdk.md (current SDK). */
#ifndef QP_TRILLIM_MANIFEST_H
#define QP_TRILLIM_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "quantpack/status.h"

enum {
    QP_TRILLIM_BF16_RAW = 0,
    QP_TRILLIM_TERNARY_QUANTIZE = 1,
    QP_TRILLIM_EMBEDDING_I8 = 2,
    QP_TRILLIM_REPACK_TERNARY = 3,
    /* the current SDK (converters/trillim_sdk.md) */
    QP_TRILLIM_Q1_0_128 = 4,
    QP_TRILLIM_GROUP_TERNARY_QUANTIZE = 5,
    QP_TRILLIM_Q8_0_QUANTIZE = 6,
    QP_TRILLIM_Q8_0_BLOCKED_32_QUANTIZE = 7,
    QP_TRILLIM_ACTION_COUNT
};
enum {
    QP_TRILLIM_F32 = 0,
    QP_TRILLIM_F16 = 1,
    QP_TRILLIM_BF16 = 2,
    QP_TRILLIM_I8 = 3,
    QP_TRILLIM_U8 = 4,
    QP_TRILLIM_DTYPE_COUNT
};

#define QP_TRILLIM_ENTRY_BYTES 55
#define QP_TRILLIM_SECTION_BYTES 9 /* u8 type, u32 first, u32 count */
#define QP_TRILLIM_SECTION_TEXT_CORE 1
#define QP_TRILLIM_LORA_MAT_BYTES 27
#define QP_TRILLIM_LORA_TARGETS 7
#define QP_TRILLIM_MAX_SHARDS 4096
#define QP_TRILLIM_MAX_ENTRIES 1000000u
#define QP_TRILLIM_MAX_LORA_LAYERS 4096u
#define QP_TRILLIM_MAX_EOS 8

typedef struct qp_trillim_entry {
    uint8_t action, dtype;
    uint32_t rows, cols, padded_rows, padded_cols;
    uint16_t shard;
    uint64_t data_offset, data_size;
    uint8_t has_scale;
    uint16_t scale_shard;
    uint64_t scale_offset, scale_size;
} qp_trillim_entry;

typedef struct qp_trillim_lora_mat {
    uint8_t dtype;
    uint32_t rows, cols;
    uint16_t shard;
    uint64_t offset, size;
} qp_trillim_lora_mat;

typedef struct qp_trillim_lora_slot {
    bool present;
    qp_trillim_lora_mat a, b;
} qp_trillim_lora_slot;

/* A run of entries of one kind (the current SDK writes one TEXT_CORE section over all). */
typedef struct qp_trillim_section {
    uint8_t type;
    uint32_t first, count;
} qp_trillim_section;

typedef struct qp_trillim_manifest {
    uint16_t n_shards;
    char **shards; /* NUL-terminated copies */
    uint32_t n_entries;
    qp_trillim_entry *entries;
    bool has_sections; /* the current SDK's form: u32 n_sections + sections after the entries */
    uint32_t n_sections;
    qp_trillim_section *sections;
    bool has_lora;
    uint32_t lora_layers, lora_targets;
    double lora_scale;
    qp_trillim_lora_slot *lora; /* lora_layers * lora_targets, layer-major */
    char **names; /* the safetensors key of each entry (qp_trillim_manifest_build only; NULL for a
                     parsed manifest: the format has no names) */
} qp_trillim_manifest;

/* Element size of a manifest dtype code; 0 for an unknown code. */
size_t qp_trillim_dtype_size(uint8_t dtype);
const char *qp_trillim_action_name(uint8_t action); /* "BF16_RAW", ...; "?" when unknown */
const char *qp_trillim_dtype_name(uint8_t dtype);

/* Parses manifest bytes (file names the source in messages). Checks the structure: counts,
 * path bytes (non-empty, no NUL, UTF-8), action and dtype codes, shard indices, data_size ==
 * rows x cols x element size, has_scale 0/1, sections (type, range), LoRA block shape. After
 * the entries: the v1 LoRA block when its first two u32 are (layers >= 1, 7), else the current
 * SDK's sections block and an optional LoRA block (converters/trillim_sdk.md). Offsets against shard sizes are
 * checked by qp_trillim_manifest_check_shards. */
QP_NODISCARD qp_status qp_trillim_manifest_parse(const uint8_t *buf, size_t len, const char *file,
                                                 qp_trillim_manifest **out, qp_err *e);
QP_NODISCARD qp_status qp_trillim_manifest_read(const char *path, qp_trillim_manifest **out, qp_err *e);
/* Every data/scale/LoRA range [offset, offset+size) must lie inside its shard (shard_sizes). */
QP_NODISCARD qp_status qp_trillim_manifest_check_shards(const qp_trillim_manifest *m,
                                                        const uint64_t *shard_sizes, const char *file,
                                                        qp_err *e);
void qp_trillim_manifest_free(qp_trillim_manifest *m);
/* The SDK's byte layout; *out is qp_malloc'd. */
QP_NODISCARD qp_status qp_trillim_manifest_serialize(const qp_trillim_manifest *m, uint8_t **out, size_t *len,
                                                     qp_err *e);

/* The current SDK's --quantization (quantize/_quantization.py), the action of the quantizable
 * 2-D float weights (its _quantization_target_action): AUTO = TERNARY_QUANTIZE for BITNET/LLAMA,
 * TERNARY = the same, BF16 = BF16_RAW, Q8_0, Q8_0_BLOCKED_32 (alias "int8"), Q1_0_128,
 * GROUPED_TERNARY_128 = the actions of those names. I8/U8 sources take REPACK_TERNARY under
 * AUTO and TERNARY. Embedding, lm_head and 1-D tensors: BF16_RAW. */
typedef enum qp_trillim_target {
    QP_TRILLIM_TARGET_AUTO = 0,
    QP_TRILLIM_TARGET_TERNARY,
    QP_TRILLIM_TARGET_BF16,
    QP_TRILLIM_TARGET_Q8_0,
    QP_TRILLIM_TARGET_Q8_0_BLOCKED_32,
    QP_TRILLIM_TARGET_Q1_0_128,
    QP_TRILLIM_TARGET_GROUPED_TERNARY_128,
    QP_TRILLIM_TARGET_COUNT
} qp_trillim_target;
/* The SDK's names ("auto", "ternary", "bf16", "q8_0", "q8_0_blocked_32", "int8", "q1_0_128",
 * "grouped_ternary_128"; case-insensitive, as normalize_quantization) -> *t; false otherwise. */
bool qp_trillim_target_from_name(const char *name, qp_trillim_target *t);
/* The quantization name trillim_config.json records (the SDK's _quantization_name): the
 * target's display name ("binary" for q1_0_128, "grouped-ternary" for grouped_ternary_128), for
 * AUTO the arch's default ("ternary" for BITNET and LLAMA). */
const char *qp_trillim_quantization_name(qp_trillim_target t, int arch_type);

/* The model config as the SDK's load_model_config reads config.json (SDK v1's ModelConfig
 * fields plus the current SDK's source_model). */
typedef struct qp_trillim_config {
    int arch_type;  /* 1 BITNET, 2 LLAMA, 4 BONSAI, 5 BONSAI_TERNARY, 6 QWEN3 */
    int activation; /* 0 RELU_SQR, 1 SILU */
    int64_t hidden, intermediate;           /* rounded up to multiples of 128 */
    int64_t hidden_orig, intermediate_orig; /* as config.json gives them */
    int64_t n_layers, n_heads, n_kv_heads, vocab, head_dim, max_pos;
    double norm_eps, rope_theta;
    int64_t rope_dim; /* round(head_dim x partial_rotary_factor): the SDK's --rope-dim */
    bool tie_embeddings, qkv_bias, attn_sub_norm, ffn_sub_norm;
    bool causal_lm_names; /* Qwen3_5ForCausalLM (arch 3, our extension): text model under "model." */
    int n_eos;
    int64_t eos[QP_TRILLIM_MAX_EOS];
    char norm_eps_text[40], rope_theta_text[40]; /* Python str() of the floats */
    qp_trillim_target target; /* the quantizable 2-D float weights' action; set by the caller */
    char *source_model;       /* str(config.json's _name_or_path), "" when absent; owned */
} qp_trillim_config;

QP_NODISCARD qp_status qp_trillim_config_from_hf(const char *model_dir, qp_trillim_config *c, qp_err *e);
void qp_trillim_config_free(qp_trillim_config *c); /* the owned strings; c itself is the caller's */
/* config.json's hidden_act as the SDK maps it (case-insensitive): 0 RELU_SQR for relu_squared,
 * relu2, relu_sqr; 1 SILU for silu, swish; -1 for anything else (refused by the SDK). */
int qp_trillim_activation_of(const cJSON *hidden_act);

/* Builds the manifest for the safetensors model in model_dir (model.safetensors or the index)
 * and, when adapter_dir is non-NULL, the LoRA block from adapter_config.json +
 * adapter_model.safetensors, in the current SDK's form (build_manifest: one TEXT_CORE section
 * over the entries, actions from c->target). Tensor order, padding and skip rules as the SDK. Shard
 * paths are absolute (model_dir and adapter_dir resolved as the SDK resolves them), so the
 * manifest works from any directory. adapter_only (the SDK's skip_model, run_adapter_quantizer):
 * the adapter-only manifest, 1 shard (the adapter's), no entries, no sections, the LoRA block. */
QP_NODISCARD qp_status qp_trillim_manifest_build(const char *model_dir, const qp_trillim_config *c,
                                                 const char *adapter_dir, bool adapter_only,
                                                 qp_trillim_manifest **out, qp_err *e);
/* LoRA rank ("r") of adapter_dir/adapter_config.json. */
QP_NODISCARD qp_status qp_trillim_adapter_rank(const char *adapter_dir, int64_t *rank, qp_err *e);

#endif
