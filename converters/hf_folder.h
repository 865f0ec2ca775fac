/* Any opened model as a Hugging Face safetensors folder: convert --to safetensors
 * (converters/convert_safetensors.h) and the form the Trillim SDK quantizes (convert --to trlm from
 * a GGUF, a llama2.c checkpoint or an RDRR package). Rules: converters/hf_folder.md. */
#ifndef QP_CONVERTERS_HF_FOLDER_H
#define QP_CONVERTERS_HF_FOLDER_H

#include "converters/recipe.h"
#include "quantpack/convert.h"
#include "quantpack/model.h"

/* One written tensor: its source (or one expert of a GGUF's merged ffn_*_exps), its HF name and
 * shape, the dtype it is written in and whether its rows are put back in HF's rotate-halves
 * order; or the rule that leaves a source tensor out. */
typedef struct qp_hf_plan_entry {
    const qp_tensor *src;
    int64_t expert;          /* >= 0: this expert's [ne1, ne0] slice of a 3-D src; -1: all of src */
    int n_dims;              /* 1 or 2: the written tensor */
    int64_t ne[2];           /* its ne[0] (row length) and ne[1] (rows; 1 for 1-D) */
    const qp_tensor *scale;  /* a packed BitNet U8 src: its one-element weight_scale (rows x 4,
                                written as the floats (code - 1) * scale) */
    char hf_name[256];
    qp_encoding dst;         /* QP_ENC_F32, F16 or BF16 */
    int64_t permute_heads;   /* > 0: q/k rows from pairs to halves over this many heads */
    bool minus_one;          /* a Gemma / Qwen3.5 norm stored as 1 + w (GGUF): w = value - 1 is written */
    bool log_neg;            /* Qwen3.5's ssm_a (-exp(A_log)): A_log = log(-value) is written */
    bool conv_kernel;        /* Qwen3.5's ssm_conv1d [ch, K]: written as HF's Conv1d [ch, 1, K] */
    qp_vhead_order vheads;   /* Qwen3.5 value heads tiled (GGUF) -> grouped (HF); n_k 0: none */
    uint64_t dst_bytes;
    const char *skip_rule;   /* non-NULL: not written, for this reason */
} qp_hf_plan_entry;

typedef struct qp_hf_plan {
    qp_hf_plan_entry *t;     /* every source tensor (merged experts: one per expert), in source order */
    int64_t n, n_skipped;
    uint64_t dst_bytes;
} qp_hf_plan;

/* Called after each tensor is written: k of n, its source name, output bytes so far of total. */
typedef void (*qp_hf_progress_cb)(void *user, int64_t k, int64_t n, const char *name, uint64_t done,
                                  uint64_t total);

typedef struct qp_hf_folder_opts {
    qp_encoding dtype;               /* QP_ENC_F32/F16/BF16 for every tensor; QP_ENC_COUNT: F16
                                        and BF16 tensors keep their type, every other becomes F32 */
    qp_hf_progress_cb progress;      /* NULL: none */
    void *progress_user;
    const qp_cancel_flag *cancel;    /* NULL: none; checked before each tensor (QP_ERR_CANCELLED) */
} qp_hf_folder_opts;

typedef struct qp_hf_folder_result {
    bool has_tokenizer;              /* the tokenizer files were written */
    char no_tokenizer[1024];         /* else why not (qp_err message) */
} qp_hf_folder_result;

/* The plan for m (out written only on success; free with qp_hf_plan_free). A tensor without an
 * HF name and no skip rule, or of more than 2 dimensions (other than merged experts), fails naming
 * it (UNSUPPORTED). */
QP_NODISCARD qp_status qp_hf_folder_plan(const qp_model *m, qp_encoding dtype, qp_hf_plan *out, qp_err *e);
void qp_hf_plan_free(qp_hf_plan *p); /* NULL is fine */

/* Writes into the existing folder dir: model.safetensors (plan's tensors, decoded one at a time;
 * memory: two copies of the largest tensor as F32), config.json from m->arch,
 * generation_config.json and the tokenizer files from any vocabulary (converters/hf_tokenizer.h;
 * none, with res->no_tokenizer saying why, when its kind has no tokenizer.json form). */
QP_NODISCARD qp_status qp_hf_folder_write_plan(const qp_model *m, const char *dir, const qp_hf_plan *plan,
                                               const qp_hf_folder_opts *o, qp_hf_folder_result *res, qp_err *e);
/* The same with every tensor as F32, no progress (the TRLM staging folder). */
QP_NODISCARD qp_status qp_hf_folder_write(const qp_model *m, const char *dir, qp_err *e);

#endif
