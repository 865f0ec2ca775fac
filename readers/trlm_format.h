/* TRLM v1: the Trillim/DarkNet model directory (qmodel.tensors, rope.cache, qmodel.lora).
 * Headers are public (the Trillim SDK; readers/trlm.md); the bodies are defined by this project, byte by
 * byte, in readers/trlm.md. Every on-disk record is defined here once: encoders for the writer
 * (writers/trlm_writer.c), decoders for the reader (readers/trlm.c). */
#ifndef QP_TRLM_FORMAT_H
#define QP_TRLM_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/model.h"
#include "quantpack/status.h"

/* ---- constants ------------------------------------------------------------------------------ */
#define QP_TRLM_VERSION 1u
#define QP_TRLM_HEADER_BYTES 16   /* "TRLM", version, arch, reserved */
#define QP_TRLM_BODY_HEADER_BYTES 48
#define QP_TRLM_RECORD_BYTES 48
#define QP_TRLM_ALIGN 64          /* every tensor's data starts at a multiple of this */
#define QP_TRRC_HEADER_BYTES 12   /* "TRRC", version, reserved */
#define QP_TRRC_BODY_HEADER_BYTES 16
#define QP_TRRC_YARN_BYTES 48     /* optional trailer: "YARN", rope dim, factor, orig max pos, betas, mscale */
#define QP_TRLA_HEADER_BYTES 12   /* "TRLA", version, reserved */
#define QP_TRLA_BODY_HEADER_BYTES 32
#define QP_TRLA_SLOT_BYTES 32
#define QP_TRLA_TARGETS 7
#define QP_TRLM_MAX_TENSORS 1000000u
#define QP_TRLM_MAX_DIM (1u << 24)
#define QP_TRLM_MAX_LAYERS 4096u
#define QP_TRLM_MAX_POS (1u << 22)
#define QP_TRLM_LAYER_NONE 0xFFFFFFFFu

/* The SDK's ArchitectureType (components/llm/_config.py). QWEN35 (linear attention) is refused;
 * BONSAI, BONSAI_TERNARY and QWEN3 are Qwen3 checkpoints (converters/trillim_sdk.md). */
enum {
    QP_TRLM_ARCH_UNKNOWN = 0, QP_TRLM_ARCH_BITNET = 1, QP_TRLM_ARCH_LLAMA = 2, QP_TRLM_ARCH_QWEN35 = 3,
    QP_TRLM_ARCH_BONSAI = 4, QP_TRLM_ARCH_BONSAI_TERNARY = 5, QP_TRLM_ARCH_QWEN3 = 6
};
/* The SDK's name of an arch id, lower case as trillim_config.json writes it ("bitnet", "llama",
 * "qwen35", "bonsai", "bonsai_ternary", "qwen3"); NULL for other ids. */
const char *qp_trlm_arch_name(uint32_t arch);
/* true for the arch ids whose layers are Qwen3's (per-head q_norm / k_norm): 4, 5, 6 */
static inline bool qp_trlm_arch_is_qwen3(uint32_t arch) {
    return arch >= QP_TRLM_ARCH_BONSAI && arch <= QP_TRLM_ARCH_QWEN3;
}
enum { QP_TRLM_ACTIVATION_RELU_SQR = 0, QP_TRLM_ACTIVATION_SILU = 1 };

/* Storage kind of one tensor in qmodel.tensors. */
typedef enum qp_trlm_kind {
    QP_TRLM_KIND_BF16 = 0,    /* padded_rows x padded_cols bf16 */
    QP_TRLM_KIND_TERNARY = 1, /* padded_rows x ceil(padded_cols/4) code bytes, then f32 scale */
    QP_TRLM_KIND_I8ROWS = 2,  /* padded_rows rows of ceil(padded_cols/32) I8_ROW blocks (36 bytes) */
    /* body version 2 (the current SDK's actions 4-7, converters/trillim_sdk.md) */
    QP_TRLM_KIND_Q8_0 = 3,     /* padded_rows rows of ceil(padded_cols/32) Q8_0 blocks (34 bytes) */
    QP_TRLM_KIND_Q8_0_B32 = 4, /* the same blocks, each 32 rows stored block column by block column */
    QP_TRLM_KIND_Q1_0_128 = 5, /* padded_rows rows of ceil(padded_cols/128) Q1_0_128 blocks (18 bytes) */
    QP_TRLM_KIND_TG128 = 6,    /* padded_rows rows of ceil(padded_cols/128) TG128 blocks (34 bytes) */
    QP_TRLM_KIND_COUNT
} qp_trlm_kind;
#define QP_TRLM_BODY_VERSION_GROUPS 2u /* body version of a file holding a kind >= 3 */
#define QP_TRLM_B32_ROWS 32u           /* rows per interleaved group of KIND_Q8_0_B32 */

/* The traits encoding whose blocks a kind stores (I8ROWS, Q8_0, Q8_0_B32, Q1_0_128, TG128);
 * QP_ENC_COUNT for BF16 and TERNARY. */
qp_encoding qp_trlm_kind_encoding(qp_trlm_kind kind);
/* Byte offset in a tensor's data of block `block` of row `row` (nb blocks a row, bb bytes each):
 * row-major, or for Q8_0_B32 groups of 32 rows with the 32 rows' block j side by side. */
uint64_t qp_trlm_block_offset(qp_trlm_kind kind, uint32_t row, uint64_t block, uint64_t nb, size_t bb);


/* What a tensor is in the model (one per manifest entry, in the SDK's order). */
typedef enum qp_trlm_role {
    QP_TRLM_ROLE_EMBED = 0,
    QP_TRLM_ROLE_OUTPUT,
    QP_TRLM_ROLE_OUTPUT_NORM,
    QP_TRLM_ROLE_ATTN_NORM,
    QP_TRLM_ROLE_ATTN_SUB_NORM,
    QP_TRLM_ROLE_K,
    QP_TRLM_ROLE_V,
    QP_TRLM_ROLE_Q,
    QP_TRLM_ROLE_O,
    QP_TRLM_ROLE_FFN_NORM,
    QP_TRLM_ROLE_GATE,
    QP_TRLM_ROLE_UP,
    QP_TRLM_ROLE_FFN_SUB_NORM,
    QP_TRLM_ROLE_DOWN,
    QP_TRLM_ROLE_Q_BIAS,
    QP_TRLM_ROLE_K_BIAS,
    QP_TRLM_ROLE_V_BIAS,
    QP_TRLM_ROLE_Q_NORM, /* Qwen3 self_attn.q_norm [head_dim] (arch 4-6) */
    QP_TRLM_ROLE_K_NORM, /* Qwen3 self_attn.k_norm [head_dim] */
    /* Qwen3.5's gated delta-net (arch 3; HF's linear_attn.*, values as HF stores them) */
    QP_TRLM_ROLE_SSM_A,      /* A_log [value heads] */
    QP_TRLM_ROLE_SSM_CONV1D, /* conv1d [channels, 1, K] as [channels, K] */
    QP_TRLM_ROLE_SSM_DT,     /* dt_bias [value heads] */
    QP_TRLM_ROLE_SSM_ALPHA,  /* in_proj_a [value heads, hidden] */
    QP_TRLM_ROLE_SSM_BETA,   /* in_proj_b [value heads, hidden] */
    QP_TRLM_ROLE_SSM_QKV,    /* in_proj_qkv [2 keys + values, hidden] */
    QP_TRLM_ROLE_SSM_GATE,   /* in_proj_z [values, hidden] */
    QP_TRLM_ROLE_SSM_NORM,   /* norm [value head dim] (plain w) */
    QP_TRLM_ROLE_SSM_OUT,    /* out_proj [hidden, values] */
    QP_TRLM_ROLE_COUNT
} qp_trlm_role;

/* GGUF-style name of a role ("token_embd.weight", "blk.%u.attn_q.weight", ...) into buf. */
const char *qp_trlm_role_name(qp_trlm_role r, uint32_t layer, char *buf, size_t cap);
bool qp_trlm_role_is_1d(qp_trlm_role r);

/* The body header of qmodel.tensors (after the 16-byte TRLM header). */
typedef struct qp_trlm_body {
    uint32_t n_tensors;
    uint32_t hidden, intermediate, hidden_orig, intermediate_orig;
    float norm_eps;
    uint32_t flags; /* bit 0: tie_embeddings */
    uint32_t n_layers;
    uint32_t version; /* 1, or 2 with kinds >= 3; the writer sets it from the records */
} qp_trlm_body;

/* One tensor record (48 bytes on disk). rows/cols: the logical (unpadded) shape; for 1-D
 * tensors cols = 1. */
typedef struct qp_trlm_record {
    qp_trlm_kind kind;
    qp_trlm_role role;
    uint32_t layer; /* QP_TRLM_LAYER_NONE for embed/output/output_norm */
    uint32_t rows, cols, padded_rows, padded_cols;
    uint64_t offset, size;
    float scale; /* TERNARY: the tensor scale (also in the trailer); else 0 */
} qp_trlm_record;

/* The body version a set of records needs: 1 when every kind is BF16/TERNARY/I8ROWS, else 2. */
uint32_t qp_trlm_body_version(const qp_trlm_record *records, uint32_t n);

/* Bytes of a tensor's data for its kind and padded shape; false on overflow or a bad kind. */
bool qp_trlm_data_size(qp_trlm_kind kind, uint32_t padded_rows, uint32_t padded_cols, uint64_t *out);

void qp_trlm_body_encode(const qp_trlm_body *b, uint8_t out[QP_TRLM_BODY_HEADER_BYTES]);
void qp_trlm_record_encode(const qp_trlm_record *r, uint8_t out[QP_TRLM_RECORD_BYTES]);
/* The inverse of the encoders: fields only, no checks (readers/trlm.c checks each field and names
 * its offset, QP_TRLM_REC_* below). */
void qp_trlm_body_decode(const uint8_t in[QP_TRLM_BODY_HEADER_BYTES], qp_trlm_body *b);
void qp_trlm_record_decode(const uint8_t in[QP_TRLM_RECORD_BYTES], qp_trlm_record *r);

/* Byte offsets of the fields of a 48-byte record (readers/trlm.md "Tensor record"). */
enum {
    QP_TRLM_REC_KIND = 0, QP_TRLM_REC_ROLE = 1, QP_TRLM_REC_RESERVED16 = 2, QP_TRLM_REC_LAYER = 4,
    QP_TRLM_REC_ROWS = 8, QP_TRLM_REC_COLS = 12, QP_TRLM_REC_PADDED_ROWS = 16,
    QP_TRLM_REC_PADDED_COLS = 20, QP_TRLM_REC_OFFSET = 24, QP_TRLM_REC_SIZE = 32,
    QP_TRLM_REC_SCALE = 40, QP_TRLM_REC_RESERVED32 = 44,
};
/* Byte offsets of the fields of the 48-byte body header. */
enum {
    QP_TRLM_BODY_VERSION = 0, QP_TRLM_BODY_N_TENSORS = 4, QP_TRLM_BODY_HIDDEN = 8,
    QP_TRLM_BODY_INTERMEDIATE = 12, QP_TRLM_BODY_HIDDEN_ORIG = 16,
    QP_TRLM_BODY_INTERMEDIATE_ORIG = 20, QP_TRLM_BODY_NORM_EPS = 24, QP_TRLM_BODY_FLAGS = 28,
    QP_TRLM_BODY_N_LAYERS = 32, QP_TRLM_BODY_ALIGN = 36, QP_TRLM_BODY_RESERVED = 40,
};

/* ---- reading (readers/trlm.c) ---------------------------------------------------------------- */
/* Merges the LoRA of a TRLA file into m: every present slot's base tensor (blk.L.attn_k.weight
 * ...) becomes F32 W + scale * (B @ A), held in m's arena (delta summed in f32 over the rank in
 * order, then scaled and added). Works on any model whose tensors the traits can dequantize. */
QP_NODISCARD qp_status qp_trlm_apply_lora(qp_model *m, const char *lora_path, qp_err *e);

#endif
