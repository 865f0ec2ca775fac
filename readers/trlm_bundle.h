/* trillim_config.json, the bundle metadata the current Trillim SDK writes beside qmodel.tensors
 * (format_version 5; the SDK's runtime reads 4 and 5), and the base-model config hash it holds.
 * Layout and rules: converters/trillim_sdk.md "trillim_config.json". */
#ifndef QP_READERS_TRLM_BUNDLE_H
#define QP_READERS_TRLM_BUNDLE_H

#include <stdbool.h>
#include <stdint.h>

#include "quantpack/status.h"

#define QP_TRLM_BUNDLE_FILE "trillim_config.json"
#define QP_TRLM_BUNDLE_FORMAT 5 /* CURRENT_FORMAT_VERSION of the SDK's _bundle_metadata.py */

typedef struct qp_trlm_bundle {
    int64_t format_version; /* 4 or 5 */
    char type[16];          /* "model" or "lora_adapter" */
    char quantization[48];  /* "ternary", "bf16", "binary", ...; "" when absent */
    char architecture[32];  /* "bitnet", "llama", "qwen3", "bonsai", ...; "" when absent */
    char config_hash[65];   /* base_model_config_hash, 64 lowercase hex digits; "" when absent */
} qp_trlm_bundle;

/* Reads dir/trillim_config.json. Absent: QP_OK and *present = false. Present: a JSON object
 * (unique keys) with format_version 4 or 5 (else UNSUPPORTED naming the value), type "model" or
 * "lora_adapter", and quantization / architecture / base_model_config_hash strings when given
 * (CORRUPT naming the key otherwise). */
QP_NODISCARD qp_status qp_trlm_bundle_read(const char *dir, qp_trlm_bundle *out, bool *present, qp_err *e);

/* The SDK's compute_base_model_config_hash of config_path: SHA-256 (lowercase hex) of
 * json.dumps({architectures, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, vocab_size}, sort_keys, compact) after text_config is
 * folded into the top level. The head counts must be positive integers (CORRUPT otherwise). */
QP_NODISCARD qp_status qp_trlm_config_hash(const char *config_path, char hex[65], qp_err *e);

/* The SDK runtime's adapter check (_model_dir.py validate_lora_dir) for the folder holding
 * lora_path: when it has a trillim_config.json of type "lora_adapter" (an adapter bundle), its
 * base_model_config_hash must be given (CORRUPT) and equal the hash of model_dir/config.json
 * ("Adapter/model mismatch", CORRUPT naming the adapter's source_model); model_dir without a
 * config.json cannot be checked (IO). A folder without trillim_config.json (SDK v1 adapters) or
 * with a model bundle (the model folder's own qmodel.lora) passes unchecked. */
QP_NODISCARD qp_status qp_trlm_adapter_check(const char *model_dir, const char *lora_path, qp_err *e);

/* config.json's hidden_act as the SDK maps it (_ACTIVATION_MAP, case-insensitive): 0 RELU_SQR
 * for relu_squared, relu2, relu_sqr; 1 SILU for silu, swish; -1 for anything else. */
int qp_trlm_activation_of(const char *hidden_act);

#endif
