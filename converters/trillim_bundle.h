/* trillim_config.json as the current Trillim SDK's `trillim quantize` writes it, and an adapter
 * bundle's support files (quantize/_output.py write_model_metadata, write_adapter_metadata,
 * copy_adapter_support_files). Layout: converters/trillim_sdk.md "trillim_config.json",
 * "LoRA adapter bundles"; the reader: readers/trlm_bundle.h. */
#ifndef QP_TRILLIM_BUNDLE_H
#define QP_TRILLIM_BUNDLE_H

#include "converters/trillim_manifest.h"
#include "quantpack/core.h"
#include "quantpack/status.h"

/* The SDK version whose bundle layout is written (its pyproject version at commit 3e7124d). */
#define QP_TRILLIM_SDK_VERSION "0.11.0"

/* Writes out_path (atomically): the model bundle metadata of the Hugging Face folder model_dir
 * quantized with c (c->target names the quantization). */
QP_NODISCARD qp_status qp_trillim_bundle_write(const char *model_dir, const qp_trillim_config *c,
                                               const char *out_path, qp_err *e);
/* The adapter bundle's trillim_config.json (write_adapter_metadata): type "lora_adapter", the
 * arch's default quantization name, source_model = adapter_config.json's base_model_name_or_path,
 * the base model's config hash (model_dir/config.json), remote_code from adapter_dir's own files. */
QP_NODISCARD qp_status qp_trillim_adapter_bundle_write(const char *model_dir, const char *adapter_dir,
                                                       const qp_trillim_config *c, const char *out_path,
                                                       qp_err *e);
/* copy_adapter_support_files: every regular file of adapter_dir (and its subfolders) into od except the
 * weights (adapter_model.safetensors*, adapter_model.bin), the SDK's artifacts (qmodel.*,
 * rope.cache, trillim_config.json, the manifest), *.pyc and *.tmp; config.json and
 * tokenizer_config.json rewritten as json.dumps(indent=2) + "\n" without tokenizer_class and
 * auto_map.AutoTokenizer unless the adapter declares an AutoTokenizer itself (top level only).
 * Subfolders too, as the SDK's rglob (not __pycache__; the same skip rule on each file's name). */
QP_NODISCARD qp_status qp_trillim_adapter_files_copy(const char *adapter_dir, qp_outdir *od, qp_err *e);

#endif
