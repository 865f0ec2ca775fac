/* Any opened model as a Hugging Face safetensors folder, the form the Trillim SDK quantizes
 * (convert --to trlm from a GGUF, a llama2.c checkpoint or an RDRR package). Rules:
 * converters/hf_folder.md. */
#ifndef QP_CONVERTERS_HF_FOLDER_H
#define QP_CONVERTERS_HF_FOLDER_H

#include "quantpack/model.h"

/* Writes into the existing folder dir: model.safetensors (every tensor under its HF name as F32,
 * decoded one tensor at a time; q/k rows in HF's rotate-halves order), config.json from m->arch,
 * and the tokenizer files from any vocabulary (converters/hf_tokenizer.h; none when its kind has
 * no tokenizer.json form). A tensor without an HF name fails naming it. */
QP_NODISCARD qp_status qp_hf_folder_write(const qp_model *m, const char *dir, qp_err *e);

#endif
