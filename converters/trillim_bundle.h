/* trillim_config.json as the current Trillim SDK's `trillim quantize` writes it
 * (quantize/_output.py write_model_metadata). Layout: converters/trillim_sdk.md
 * "trillim_config.json"; the reader: readers/trlm_bundle.h. */
#ifndef QP_TRILLIM_BUNDLE_H
#define QP_TRILLIM_BUNDLE_H

#include "converters/trillim_manifest.h"
#include "quantpack/status.h"

/* The SDK version whose bundle layout is written (its pyproject version at commit 3e7124d). */
#define QP_TRILLIM_SDK_VERSION "0.11.0"

/* Writes out_path (atomically): the model bundle metadata of the Hugging Face folder model_dir
 * quantized with c (c->target names the quantization). */
QP_NODISCARD qp_status qp_trillim_bundle_write(const char *model_dir, const qp_trillim_config *c,
                                               const char *out_path, qp_err *e);

#endif
