/* PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) -> an RDRR adapter
 * directory: manifest.json (modelType/adapterType "lora", loraConfig, tensors
 * layers.N.<module>.lora_a|lora_b in F32, shards as any RDRR model), plus DOPPLER's standalone
 * adapter manifest adapter_manifest.json pointing at a byte-exact copy of
 * adapter_model.safetensors (checksum = its SHA-256). Matrices keep PEFT's orientation:
 * lora_a = lora_A.weight [rank, in], lora_b = lora_B.weight [out, rank]; scale = alpha / rank.
 * Details: readers/rdrr.md "LoRA". */
#ifndef QP_LORA_ADAPTER_H
#define QP_LORA_ADAPTER_H

#include <stdbool.h>
#include <stdint.h>

#include "quantpack/status.h"
#include "writers/rdrr_writer.h"

#define QP_LORA_STANDALONE_FILE "adapter_manifest.json"

typedef struct qp_lora_opts {
    const char *name;       /* NULL: the adapter folder name */
    const char *base_model; /* NULL: adapter_config.json base_model_name_or_path */
    int64_t eos_token_id;   /* < 0: the base model's config.json when it is a local folder, else 2 */
    qp_rdrr_writer_opts w;
} qp_lora_opts;

typedef struct qp_lora_result {
    int64_t n_tensors, rank, n_layers;
    double alpha;
} qp_lora_result;

/* True when dir holds adapter_config.json. */
bool qp_lora_is_adapter_dir(const char *dir);
QP_NODISCARD qp_status qp_lora_convert(const char *peft_dir, const char *out_dir, const qp_lora_opts *o,
                                       qp_lora_result *res, qp_err *e);

#endif
