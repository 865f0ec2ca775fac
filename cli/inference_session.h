/* Trillim inference, independent of the wire protocol: the model folder opened and checked
 * against the client's configuration, and a session that keeps the KV cache across requests,
 * prefills, samples and prints the response. `inference` (cli/cmd_inference.c, protocol v1) and
 * `trillim-inference` (the current SDK's key=value protocol) parse
 * their own lines into these structs. Rules: cli/trillim-inference.md. */
#ifndef QP_CLI_INFERENCE_SESSION_H
#define QP_CLI_INFERENCE_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/cli.h"
#include "converters/trillim_manifest.h"

/* The model description the client sends (v1: the --config words; current: the init block). */
typedef struct qp_inf_config {
    int64_t arch_type, activation, hidden_dim, intermediate_dim, num_layers, num_heads,
        num_kv_heads, vocab_size, head_dim, max_position_embeddings;
    double norm_eps, rope_theta;
    int64_t tie_word_embeddings, has_qkv_bias, has_attn_sub_norm, has_ffn_sub_norm, num_threads,
        num_eos_tokens;
    int64_t eos[QP_TRILLIM_MAX_EOS];
} qp_inf_config;

/* The config fields as parser rows (qp_cli_parse_value) pointing into c, in protocol v1's order:
 * the 16 model fields, num_threads, num_eos_tokens. Both protocols name them the same. */
enum { QP_INF_N_FIELDS = 18, QP_INF_FIELD_THREADS = 16, QP_INF_FIELD_N_EOS = 17 };
void qp_inf_config_fields(qp_inf_config *c, qp_cli_opt rows[QP_INF_N_FIELDS]);

/* One request. keep: the cached tokens it continues from (0 = a fresh conversation; v1 reset 0
 * sends the whole cache, the current protocol sends kv_position); tokens: n_tokens new ids. */
typedef struct qp_inf_request {
    int64_t keep, n_tokens;
    const int32_t *tokens;
    double temperature, top_p, repetition_penalty;
    int64_t top_k, rep_penalty_lookback, max_tokens;
} qp_inf_request;

typedef struct qp_inf_session qp_inf_session;

/* prog names the binary in messages ("inference"). Opens dir (a TRLM folder), merges
 * lora_file (a qmodel.lora, or NULL), checks c against the model and starts the runtime with
 * c->max_position_embeddings positions. QP_EXIT_OK, or the exit code after the message. */
int qp_inf_session_open(const char *prog, const char *dir, const char *lora_file,
                        const qp_inf_config *c, qp_inf_session **out);
void qp_inf_session_close(qp_inf_session *s);
/* Tokens in the KV cache (the last kv_position printed). */
int64_t qp_inf_session_position(const qp_inf_session *s);
int64_t qp_inf_session_vocab(const qp_inf_session *s);
/* The open model (borrowed, valid until close). */
const qp_model *qp_inf_session_model(const qp_inf_session *s);
/* The sampling values of r in range (the message names the field): 0 or the exit code. */
int qp_inf_check_sampling(const char *prog, const qp_inf_request *r);
/* Runs r: keeps r->keep cached tokens, prefills r->tokens, samples until an EOS id, max_tokens
 * (0 = unlimited) or a full cache; prints one id per line, then kv_position. A stop other than
 * an EOS id prints the first EOS id of the config after the last token (not cached), because
 * both SDK clients read token lines until an EOS id. 0, or the exit code after the message. */
int qp_inf_session_generate(qp_inf_session *s, const qp_inf_request *r);

/* A protocol error: one message, exit 3 (QP_ERR_FORMAT). */
#define qp_inf_error(prog, fmt, ...) qp_cli_error(QP_ERR_FORMAT, "%s: " fmt, (prog), __VA_ARGS__)

#endif
