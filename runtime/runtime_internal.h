/* Internals of the reference runtime shared by forward.c, weights.c, matvec.c and receipt.c. */
#ifndef QP_RUNTIME_INTERNAL_H
#define QP_RUNTIME_INTERNAL_H

#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "quantpack/runtime.h"

/* ---- thread pool (matvec.c) ----------------------------------------------------------------
 * qp_pool_run cuts [0, n) into fixed contiguous chunks (a few per thread) that the caller
 * (tid 0) and the workers take in turn, and returns when all are done; fn gets the taker's tid
 * (for per-thread scratch). Which thread computes an item never changes what the item
 * computes, so results do not depend on the thread count or the schedule. */
typedef struct qp_pool qp_pool;
typedef void (*qp_par_fn)(void *ctx, int64_t begin, int64_t end, int tid);

QP_NODISCARD qp_status qp_pool_new(int n_threads, qp_pool **out, qp_err *e);
void qp_pool_free(qp_pool *p);
int qp_pool_threads(const qp_pool *p);
/* Runs fn over [0, n); with work < min_items_per_thread * threads fewer threads are used. */
void qp_pool_run(qp_pool *p, int64_t n, int64_t min_items_per_thread, qp_par_fn fn, void *ctx);

/* ---- weight views (weights.c) -------------------------------------------------------------- */
/* A matrix of `rows` rows of `cols` elements each, row r at data + r * row_bytes. */
typedef struct qp_wmat {
    const char *name;
    const uint8_t *data;
    const qp_encoding_traits *tr;
    int64_t rows, cols;
    size_t row_bytes;
    float scale;  /* per-tensor scale outside the rows (I2_S trailer, QK256 sibling "<base>.scale");
                     1 otherwise */
    bool act_i8;  /* activations are int8-quantized per token first (runtime.md "BitNet activation
                     quantization"): the seven projections of a BitNet model whatever their
                     encoding, and any matrix whose encoding is ternary (QP_ENC_FLAG_TERNARY) */
    bool use_i8;  /* act_i8 and tr->vec_dot_i8 present: integer dot with int8 activations */
    const qp_encoding_traits *act_q; /* fast path: activations quantized by these traits
                                        (tr->act_encoding) and dotted by tr->vec_dot_q8; NULL on
                                        the exact path and for encodings without a fast dot */
    uint8_t *owned; /* data owned by the runtime (a packed BitNet U8 projection unpacked at bind
                       time); NULL when borrowed from the model */
    uint8_t *packed;     /* fast path: rows [0, packed_rows) repacked (tr->q8_pack, runtime.md
                            "Repacked rows"), runtime-owned; NULL when none. Rows from packed_rows on
                            are read from data. */
    int64_t packed_rows; /* a multiple of tr->q8_pack_rows() */
    uint8_t *copied;     /* fast path: the F16 rows copied into runtime memory (data points into
                            it; runtime.md "Repacked rows"); NULL when none */
} qp_wmat;

typedef struct qp_layer_weights {
    qp_wmat wq, wk, wv, wo, w_gate, w_up, w_down;
    float *attn_norm, *ffn_norm;          /* [dim] */
    float *attn_sub_norm, *ffn_sub_norm;  /* [n_heads*head_dim], [ffn_dim]; NULL when absent */
    float *bq, *bk, *bv;                  /* NULL when absent */
    float *bo;                            /* [dim]: attn_output.bias (HF attention_bias on Llama
                                             biases o_proj too); NULL when absent */
    float *b_gate, *b_up, *b_down;        /* [ffn], [ffn], [dim]: ffn_{gate,up,down}.bias (HF
                                             mlp_bias); NULL when absent */
    float *q_norm, *k_norm;               /* [head_dim] each (Qwen3, Gemma 3); NULL when absent */
    float *post_attn_norm, *post_ffn_norm; /* [dim] each (Gemma 2/3); NULL when absent */
    /* MoE (runtime.md "Mixture of experts"; w_gate/w_up/w_down unused): the router
       [dim -> n_experts] and expert x's gate, up, down at experts[3 * x + QP_EXPERT_*] */
    qp_wmat router;
    qp_wmat *experts;
    /* Qwen3.5 (runtime.md "Qwen3.5"): a full-attention layer's wq has 2 x qdim rows (q and the
     * output gate per head); a delta-net layer (recurrent) has instead: */
    bool recurrent;
    qp_wmat ssm_qkv, ssm_z, ssm_beta, ssm_alpha, ssm_out; /* attn_qkv, attn_gate, ssm_beta,
                                                             ssm_alpha, ssm_out */
    float *ssm_conv;  /* [conv channels][kernel] */
    float *ssm_dt;    /* [value heads] */
    float *ssm_a;     /* [value heads]: -exp(A_log), whichever the model stores */
    float *ssm_norm;  /* [value head width], applied as stored (no 1 + w) */
} qp_layer_weights;

typedef struct qp_weights {
    qp_wmat tok_embd; /* rows = vocab, cols = dim */
    qp_wmat output;   /* rows = vocab, cols = dim (== tok_embd when tied) */
    float *output_norm;
    float *rope_factors; /* rope_dims / 2 divisors of the rotation frequencies (GGUF rope_freqs.weight
                            or HF llama3 rope_scaling, core/rope.h); NULL: none */
    qp_layer_weights *layers;
    int64_t n_layers;
} qp_weights;

/* Resolves cfg (fields 0 in the arch are taken from tensor shapes) and binds every tensor. */
QP_NODISCARD qp_status qp_weights_bind(const qp_model *m, qp_runtime_config *cfg, qp_weights *w, qp_err *e);
void qp_weights_free(qp_weights *w);
/* Dequantizes row r of w into out (w->cols floats). */
void qp_wmat_row(const qp_wmat *w, int64_t r, float *out);

/* ---- Qwen3.5's gated delta-net, one token (delta_net.c) ------------------------------------
 * qkv: the token's attn_qkv product (2 key + value channels), convolved in place with the
 * layer's conv state (kernel - 1 earlier inputs per channel, shifted) and SiLU'd; then per value
 * head the state S (key width x value width) is decayed, updated by the delta rule and read
 * with q; out (value width per head) = rmsnorm(o) * ssm_norm * silu(z). beta_alpha: the token's
 * ssm_beta then ssm_alpha products (value heads each). */
void qp_delta_net_token(const qp_runtime_config *c, const qp_layer_weights *L, float *conv_state,
                        float *state, float *qkv, const float *z, const float *beta_alpha, float *out);

/* ---- matrix products (matvec.c) ------------------------------------------------------------
 * For n_tok tokens t: y[t * ldy + r] = dot(row r of w, token t's activations) for every row.
 *  - w->act_q (fast path): tr->vec_dot_q8(row, xq + t * ldxq) * scale for every token;
 * Rows of several matrices are dispatched together (q/k/v, gate/up) so one pool round covers
 * them; threads split the rows into fixed contiguous chunks. Per (row, token):
 *  - w->use_i8: vec_dot_i8(row, xa + t * ldxa) * scale / xa_scale[t] (exact integer sum);
 *  - n_tok == 1: tr->vec_dot_f32 when present, else dequantize the row into scratch and dot;
 *  - n_tok > 1 with tr->dequantize: the row is widened once into the thread's scratch, then
 *    dotted with every token by qp_f32_dot_multi (equal to vec_dot_f32 bit for bit when that
 *    sums like the F32 kernel: F32/F16/BF16/Q8_0/Q4_K/Q6_K, encodings/plain_kernels.h; else it
 *    differs by summation order);
 *    two rows at a time when a thread has two rows of one task (qp_f32_dot_multi2).
 * scratch holds n_threads * scratch_cols floats, scratch_cols >= 2 * the longest row. */
typedef struct qp_matvec_task {
    const qp_wmat *w;
    const float *x;       /* F32 activations of token t at x + t * ldx (for act_i8 weights
                             without vec_dot_i8: the int8 codes as floats; the row results are
                             then multiplied by scale / xa_scale[t] in double) */
    int64_t ldx;
    const int8_t *xa;     /* int8 activations when w->use_i8, at xa + t * ldxa */
    int64_t ldxa;
    const float *xa_scale; /* per token: x ~= xa / xa_scale[t] */
    const uint8_t *xq;    /* w->act_q: token t's quantized activations at xq + t * ldxq */
    size_t ldxq;
    float *y;             /* y + t * ldy */
    int64_t ldy;
} qp_matvec_task;

/* ---- attention kernels (attn_avx2.c): o[i] += a * v[i] with FMA, v F32 or F16 (F16C) --------- */
void qp_attn_accum_avx2(float *o, const float *v, float a, int64_t n);
void qp_attn_accum_f16_avx2(float *o, const uint16_t *v, float a, int64_t n);

void qp_matmul_multi(qp_pool *pool, const qp_matvec_task *tasks, int n_tasks, int64_t n_tok,
                     float *scratch, int64_t scratch_cols);

#endif
