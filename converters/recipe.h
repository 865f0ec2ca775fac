/* Recipes: the per-tensor plan of a conversion (which output name, which target encoding, copy or
 * convert, q/k row permutation). Rules and their upstream sources: converters/recipes.md.
 *
 * The Q4_K_M / Q6_K / Q8_0 / F16 / BF16 / F32 recipes reproduce llama.cpp's llama_model_quantize
 * (llama_tensor_get_type, no imatrix) so that a GGUF -> GGUF conversion is byte-identical to it.
 * The BitNet recipes (I2_S, TQ1_0, TQ2_0, QK256) make the seven projections of every block
 * ternary and keep every other tensor in a float type. */
#ifndef QP_RECIPE_H
#define QP_RECIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/model.h"
#include "readers/imatrix.h"

typedef enum qp_quant {
    QP_QUANT_F32 = 0,
    QP_QUANT_F16,
    QP_QUANT_BF16,
    QP_QUANT_Q8_0,
    QP_QUANT_Q6_K,
    QP_QUANT_Q4_K_M,
    QP_QUANT_I2_S,
    QP_QUANT_TQ1_0,
    QP_QUANT_TQ2_0,
    QP_QUANT_QK256,
    /* the other llama-quantize file types (llama_tensor_get_type's mixtures) */
    QP_QUANT_Q4_0,
    QP_QUANT_Q4_1,
    QP_QUANT_Q5_0,
    QP_QUANT_Q5_1,
    QP_QUANT_Q2_K,
    QP_QUANT_Q2_K_S,
    QP_QUANT_Q3_K_S,
    QP_QUANT_Q3_K_M,
    QP_QUANT_Q3_K_L,
    QP_QUANT_Q4_K_S,
    QP_QUANT_Q5_K_S,
    QP_QUANT_Q5_K_M,
    QP_QUANT_IQ4_NL,
    QP_QUANT_IQ4_XS,
    QP_QUANT_COUNT
} qp_quant;

/* "Q4_K_M", ... */
const char *qp_quant_name(qp_quant q);
/* Case-insensitive; QP_QUANT_COUNT when unknown. */
qp_quant qp_quant_from_name(const char *name);
/* llama_ftype written as general.file_type (F32 0, F16 1, Q8_0 7, Q4_K_M 15, Q6_K 18, BF16 32,
 * TQ1_0 36, TQ2_0 37, I2_S 40 as microsoft/BitNet; QK256 40 as well: it is stored as I2_S). */
uint32_t qp_quant_file_type(qp_quant q);
/* True for the BitNet-only recipes (I2_S, QK256). */
bool qp_quant_is_ternary(qp_quant q);
/* Whether converting m with q takes the BitNet recipe: I2_S and QK256 always, TQ1_0 / TQ2_0 when
 * m is a BitNet model (other models get llama-quantize's TQ1_0 / TQ2_0 mixture). */
bool qp_quant_bitnet_recipe(qp_quant q, const qp_model *m);

/* A --tensor-type PATTERN=TYPE override: tensors whose name the POSIX extended regular expression
 * matches (anywhere in the name, as std::regex_search) get enc; the first matching one wins. */
typedef struct qp_tensor_type_override {
    const char *pattern;
    qp_encoding enc;
} qp_tensor_type_override;

/* qp_imatrix_entry (one tensor's importance weights): readers/imatrix.h */

/* How a source tensor becomes rows of floats. */
typedef enum qp_src_kind {
    QP_SRC_PLAIN = 0,  /* rows of src->enc, decoded with the traits' dequantize */
    QP_SRC_BITNET_U8,  /* microsoft/bitnet-b1.58 packed U8 [out/4, in] times a weight_scale */
    QP_SRC_SCALE_OF_PREV, /* F32 [1] "<base>.scale" of the QK256 entry just before it: the per-tensor
                             scale that entry's encoding chose (src = that entry's source) */
    QP_SRC_ROPE_FACTORS,  /* F32 [head_dim / 2] "rope_freqs.weight" computed from the source's llama3
                             rope_scaling (core/rope.h), as llama.cpp's converter adds it; src NULL */
} qp_src_kind;

/* Qwen3.5's value heads from HF's grouped order (the heads of key head g together) to the tiled
 * order llama.cpp's converter writes (_reorder_v_heads: output head j * n_k + g is input head
 * g * per + j), over the indices [off, off + n_k * per * width) of rows (or, in_row, of the
 * elements within each row); converters/recipes.md "Qwen3.5". */
typedef struct qp_vhead_order {
    int64_t n_k, per, width, off;
    bool in_row;
} qp_vhead_order;

/* The source index of output index i under o (i itself outside the value part). */
static inline int64_t qp_vhead_src(const qp_vhead_order *o, int64_t i) {
    int64_t r = i - o->off, total = o->n_k * o->per * o->width;
    if (o->n_k <= 0 || r < 0 || r >= total) return i;
    int64_t n = r / o->width, j = n / o->n_k, g = n % o->n_k;
    return o->off + (g * o->per + j) * o->width + r % o->width;
}

/* The value-head order of a GGUF Qwen3.5 tensor (by its GGUF name) whose value heads are tiled
 * (a->ssm_heads_tiled), as the GGUF writer reordered it: tiled index i holds HF's grouped index
 * qp_vhead_src(v, i); n_k 0 for any other tensor or model (converters/hf_folder.md "Qwen3.5"). */
void qp_vhead_order_tiled(const qp_arch *a, const char *gguf_name, qp_vhead_order *v);

typedef struct qp_plan_entry {
    const qp_tensor *src;
    const char *name;        /* output name (owned by the plan) */
    qp_src_kind src_kind;
    const qp_tensor *src_scale; /* QP_SRC_BITNET_U8: the [1] weight_scale tensor; QK256 sources:
                                   their "<base>.scale" sibling (rows are multiplied by it) */
    qp_encoding src_enc;     /* the source bytes' encoding */
    qp_encoding dst_enc;
    int ggml_type;           /* output GGUF type id */
    int n_dims;              /* output shape (trailing 1s dropped) */
    int64_t ne[QP_MAX_DIMS];
    size_t dst_bytes;
    bool convert;            /* false: source bytes are copied as they are */
    bool fallback;           /* ne[0] forced a fallback type */
    bool ternary;            /* quantized with a per-tensor ternary scale (BitNet recipes) */
    const float *imatrix;    /* importance weights, ne[0] per expert (ne[2]); NULL: none */
    int64_t permute_heads;   /* > 0: HF -> GGUF q/k row permutation with this many heads */
    bool plus_one;           /* 1 added to every value (Gemma's "*norm.weight" from HF, as
                                convert_hf_to_gguf.py: in F32, or rounded to F16 for F16 sources) */
    bool neg_exp;            /* every value v -> -exp(v) (Qwen3.5's A_log from HF -> ssm_a, as
                                convert_hf_to_gguf.py; the same rounding as plus_one) */
    qp_vhead_order vheads;   /* Qwen3.5 value heads grouped (HF) -> tiled (llama.cpp); n_k 0: none */
    /* MoE experts stored one 2-D tensor each (HF) merged into llama.cpp's 3-D ffn_*_exps: the
       n_parts sources of slices 0..n_parts-1 (ne[2]), written one after the other (src =
       parts[0]); NULL otherwise. Owned by the plan. */
    const qp_tensor **parts;
    int64_t n_parts;
    const char *action;      /* static text the --dry-run table prints for this entry (targets
                                whose rewrites the fields above do not describe); NULL: derived */
} qp_plan_entry;

/* A source tensor left out of the output by a named rule (recipes.md "Every tensor accounted
 * for"); the rule is a static string. */
typedef struct qp_plan_skip {
    const qp_tensor *src;
    const char *rule;
} qp_plan_skip;

typedef struct qp_plan {
    qp_quant quant;
    uint32_t file_type;
    qp_plan_entry *t;        /* in output order */
    int64_t n;
    int64_t n_fallback;
    qp_plan_skip *skipped;   /* source tensors left out, each by a named rule */
    int64_t n_skipped;
    uint64_t src_bytes, dst_bytes;
    char **names;            /* owned name strings */
} qp_plan;

/* A one-line note of the source tensors a conversion left out by a rule: the first one's name
 * and rule, and how many more (--dry-run lists each); "" when n_skipped is 0. */
void qp_plan_skip_note(char *buf, size_t cap, int64_t n_skipped, const char *first_name,
                       const char *first_rule);

/* The one requantize rule of every target (recipes.md): a plain quantized source tensor stored
 * as another quantized encoding needs allow_requantize; widening to F32/F16/BF16 never does.
 * The error names the tensor and both encodings. */
QP_NODISCARD qp_status qp_recipe_check_requantize(const qp_model *m, const qp_plan_entry *pe, qp_encoding dst,
                                                  bool allow_requantize, qp_err *e);

/* llama-quantize's per-tensor options (recipes.md "Per-tensor options"); all zero: none. */
typedef struct qp_tensor_options {
    bool has_output_type, has_token_embd_type; /* false: the recipe's own choice */
    qp_encoding output_type;      /* --output-tensor-type */
    qp_encoding token_embd_type;  /* --token-embedding-type */
    bool leave_output;            /* --leave-output-tensor: output.weight keeps its type */
    bool pure;                    /* --pure: the default type everywhere (no mixture) */
    const qp_tensor_type_override *overrides; /* --tensor-type, n_overrides of them */
    int n_overrides;
    const qp_imatrix_entry *imatrix; /* --imatrix, n_imatrix entries; NULL: none */
    int64_t n_imatrix;
} qp_tensor_options;

typedef struct qp_recipe_opts {
    qp_quant quant;
    bool allow_requantize;  /* quantized sources may be dequantized and quantized again */
    bool permute_qk;        /* apply the HF -> GGUF q/k permutation (llama-style RoPE output) */
    bool sort_llama;        /* output order as llama.cpp: by "blk.N." layer, then strcmp */
    int64_t n_head, n_head_kv; /* for permute_qk */
    int64_t n_layer;        /* for use_more_bits on ffn_down (block_count) */
    bool is_70b;            /* llama.cpp LLM_TYPE_70B (llama, 80 layers, GQA) */
    int64_t n_expert;       /* MoE experts per layer (llama.cpp hparams.n_expert; 0: dense) */
    bool norm_plus_one;     /* Gemma / Qwen3.5 HF source: every "*norm.weight" gets 1 added
                               (plus_one; Qwen3.5's ssm_norm excepted) */
    bool ssm_a_log;         /* Qwen3.5 HF source: "*.ssm_a" holds A_log (neg_exp) */
    /* Qwen3.5 HF source with more value than key heads (else 0): key heads, value heads, key and
       value head widths, for the value-head reorder (qp_vhead_order) */
    int64_t ssm_nk, ssm_nv, ssm_hk, ssm_hv;
    bool merge_experts;     /* per-expert HF tensors -> llama.cpp's merged ffn_*_exps (GGUF);
                               false: one entry per expert (RDRR keeps the source's tensors) */
    qp_tensor_options tensor; /* llama-quantize's per-tensor options and importance matrix */
    bool rope_factors;      /* add "rope_freqs.weight" (QP_SRC_ROPE_FACTORS) when the source has a
                               llama3 rope_scaling and no such tensor (HF -> GGUF) */
} qp_recipe_opts;

/* Builds the plan for m. Every source tensor is accounted for: mapped to an output tensor, or
 * skipped by a named rule (listed in plan->skipped); any other tensor fails the plan with
 * QP_ERR_UNSUPPORTED naming it (a converter never drops what it does not understand). Also fails
 * with QP_ERR_UNSUPPORTED naming the tensor when a quantized source tensor would have to be
 * requantized without allow_requantize, or when a source encoding cannot be decoded. */
QP_NODISCARD qp_status qp_recipe_plan(const qp_model *m, const qp_recipe_opts *o, qp_plan *out, qp_err *e);
void qp_plan_free(qp_plan *p);

/* llama.cpp's use_more_bits(i, n). */
bool qp_recipe_use_more_bits(int i, int n);
/* Layer of "blk.N...." as llama.cpp's sscanf("blk.%d."), -1 otherwise. */
int qp_recipe_layer_of(const char *name);

#endif
