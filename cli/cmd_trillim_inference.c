/* `trillim-inference MODEL_DIR`: the current Trillim SDK's protocol (components/llm/_engine.py)
 * on stdin/stdout: count-prefixed key=value blocks, an init block then requests. Generation:
 * cli/inference_session.c; rules: cli/trillim-inference.md "trillim-inference". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inference_session.h"

static const char k_ti_usage[] =
    "usage: trillim-inference MODEL_DIR\n\n"
    "The current Trillim SDK's inference protocol on stdin/stdout. Blocks: a line with the\n"
    "number of key=value lines, then those lines. First the init block (arch_type, activation,\n"
    "hidden_dim, intermediate_dim, num_layers, num_heads, num_kv_heads, vocab_size, head_dim,\n"
    "max_position_embeddings, norm_eps, rope_theta, tie_word_embeddings, has_qkv_bias,\n"
    "has_attn_sub_norm, has_ffn_sub_norm, quantization, eos_tokens=ID,ID...; optional\n"
    "num_threads, lora_dir (a folder holding qmodel.lora; an SDK adapter bundle must match the\n"
    "model's config hash), lora_quant, unembed_quant, model_quant). arch_type is the file's:\n"
    "1 BITNET, 2 LLAMA, 4 BONSAI, 5 BONSAI_TERNARY, 6 QWEN3. Then requests (kv_position =\n"
    "cached tokens kept, tokens=ID,ID..., temperature, top_k, top_p, repetition_penalty,\n"
    "rep_penalty_lookback, max_tokens; 0 = unlimited); a count line 0 or EOF between requests\n"
    "ends. Each response: one generated id a line (a stop without EOS ends with the first EOS\n"
    "id, not cached), then kv_position. Malformed input: a message on stderr and exit 3.\n"
    "Rules: cli/trillim-inference.md.\n";

#define PROG "trillim-inference"
enum { MAX_KEYS = 64, KEY_LINE_MAX = 4096 };

/* One key=value block: its lines (owned) and the rows their keys name. */
typedef struct kv_block {
    char *lines[MAX_KEYS];
    int n;
} kv_block;

static void block_free(kv_block *b) {
    for (int i = 0; i < b->n; i++) qp_free(b->lines[i]);
    b->n = 0;
}

/* One line of at most max bytes (the newline removed, a '\r' before it too) into *out (owned).
 * 1 ok, 0 EOF before any byte, else the exit code after the message. */
static int read_line(const char *what, size_t max, char **out) {
    size_t n = 0, cap = 64;
    char *buf = qp_malloc(cap);
    if (!buf) return qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
    int ch;
    while ((ch = getchar()) != EOF && ch != '\n') {
        if (n == max) {
            qp_free(buf);
            return qp_inf_error(PROG, "%s: line longer than %zu bytes", what, max);
        }
        if (n + 1 == cap) {
            char *nb = qp_realloc(buf, cap *= 2);
            if (!nb) {
                qp_free(buf);
                return qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
            }
            buf = nb;
        }
        buf[n++] = (char)ch;
    }
    if (ch == EOF && n == 0) {
        qp_free(buf);
        return 0;
    }
    if (n > 0 && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    *out = buf;
    return 1;
}

/* The count line, then its key=value lines into the rows (every key a row's name, none twice;
 * the first n_required rows must all be there). given[k]: row k was in the block. *quit on a count
 * of 0 or a clean EOF when quit_ok. 0, or the exit code after the message. */
static int read_block(const char *what, const qp_cli_opt *rows, int n_rows, int n_required, size_t long_max,
                      bool quit_ok, kv_block *b, bool *given, bool *quit) {
    char *line = NULL;
    int64_t count;
    int rc = read_line(what, 32, &line);
    if (rc == 0) {
        if (quit_ok) *quit = true;
        return quit_ok ? 0 : qp_inf_error(PROG, "unexpected end of input before the %s", what);
    }
    if (rc != 1) return rc;
    bool ok = qp_cli_parse_i64(line, 0, MAX_KEYS, &count);
    if (!ok) rc = qp_inf_error(PROG, "%s: the count line '%s' is not a number of lines in 0..%d", what, line, MAX_KEYS);
    qp_free(line);
    if (!ok) return rc;
    if (count == 0) {
        if (quit_ok) *quit = true;
        return quit_ok ? 0 : qp_inf_error(PROG, "the %s has no lines", what);
    }
    memset(given, 0, (size_t)n_rows * sizeof *given);
    for (b->n = 0; b->n < count;) {
        if ((rc = read_line(what, long_max, &line)) != 1)
            return rc ? rc : qp_inf_error(PROG, "unexpected end of input in the %s (line %d of %lld)", what, b->n + 1,
                                          (long long)count);
        b->lines[b->n++] = line;
        char *eq = strchr(line, '=');
        if (!eq || eq == line) return qp_inf_error(PROG, "%s: '%s' is not key=value", what, line);
        *eq = '\0';
        int k = 0;
        while (k < n_rows && strcmp(rows[k].name, line) != 0) k++;
        if (k == n_rows) return qp_inf_error(PROG, "%s: unknown key '%s'", what, line);
        if (given[k]) return qp_inf_error(PROG, "%s: key '%s' given twice", what, line);
        given[k] = true;
        char why[96];
        if (!qp_cli_parse_value(&rows[k], eq + 1, why, sizeof why))
            return qp_inf_error(PROG, "%s: %s wants %s, not '%s'", what, line, why, eq + 1);
    }
    for (int k = 0; k < n_required; k++)
        if (!given[k]) return qp_inf_error(PROG, "%s: key '%s' is missing", what, rows[k].name);
    return 0;
}

/* "1,22,333" (possibly empty) -> ids, each in 0..vocab-1, at most max. 0 or the exit code. */
static int parse_id_list(const char *what, const char *s, int64_t vocab, int64_t max, int32_t *ids, int64_t *n) {
    *n = 0;
    if (!*s) return 0;
    for (const char *p = s;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char word[24];
        int64_t v;
        if (len == 0 || len >= sizeof word) return qp_inf_error(PROG, "%s: '%s' is not a list of ids", what, s);
        memcpy(word, p, len);
        word[len] = '\0';
        if (!qp_cli_parse_i64(word, 0, vocab - 1, &v))
            return qp_inf_error(PROG, "%s: '%s' is not an id in 0..%lld", what, word, (long long)vocab - 1);
        if (*n == max) return qp_inf_error(PROG, "%s: more than %lld ids", what, (long long)max);
        ids[(*n)++] = (int32_t)v;
        if (!comma) return 0;
        p = comma;
    }
}

/* What the init block names besides the model config. */
typedef struct init_extra {
    const char *quantization, *eos, *lora_dir, *lora_quant, *unembed_quant, *model_quant;
} init_extra;

#define TI_STR(name, dst) {name, NULL, QP_CLI_STR, (dst), .arg = NULL}
#define TI_NUM(name, dst) {name, NULL, QP_CLI_F64, (dst), .arg = NULL}

/* The init block -> c and x (strings borrowed from b). */
static int read_init(kv_block *b, qp_inf_config *c, init_extra *x) {
    qp_cli_opt rows[QP_INF_N_FIELDS + 6];
    bool given[QP_INF_N_FIELDS + 6];
    memset(c, 0, sizeof *c);
    memset(x, 0, sizeof *x);
    qp_inf_config_fields(c, rows); /* rows 0..15 required, 16 num_threads, 17 replaced below */
    const qp_cli_opt more[] = {
        TI_STR("eos_tokens", &x->eos), TI_STR("quantization", &x->quantization),
        rows[QP_INF_FIELD_THREADS], TI_STR("lora_dir", &x->lora_dir), TI_STR("lora_quant", &x->lora_quant),
        TI_STR("unembed_quant", &x->unembed_quant), TI_STR("model_quant", &x->model_quant),
    };
    memcpy(rows + QP_INF_FIELD_THREADS, more, sizeof more);
    const int n_rows = QP_INF_FIELD_THREADS + (int)(sizeof more / sizeof more[0]);
    bool quit = false;
    int rc = read_block("init block", rows, n_rows, QP_INF_FIELD_THREADS + 1, KEY_LINE_MAX, false, b, given, &quit);
    if (rc) return rc;
    int32_t eos[QP_TRILLIM_MAX_EOS];
    int64_t n_eos;
    if ((rc = parse_id_list("eos_tokens", x->eos, INT32_MAX, QP_TRILLIM_MAX_EOS, eos, &n_eos)) != 0) return rc;
    c->num_eos_tokens = n_eos;
    for (int64_t k = 0; k < n_eos; k++) c->eos[k] = eos[k];
    /* every text but eos_tokens and quantization (the SDK sends its bundle's value, "" when the
       bundle has none): non-empty */
    for (int k = QP_INF_FIELD_THREADS + 1; k < n_rows; k++)
        if (given[k] && rows[k].kind == QP_CLI_STR && !**(const char **)rows[k].dst &&
            (const char **)rows[k].dst != &x->quantization)
            return qp_inf_error(PROG, "init block: %s is empty", rows[k].name);
    /* DarkNet's runtime requantization (the SDK passes the user's strings through) has no
       counterpart here: the reference runtime computes from the stored weights */
    const char *const requant[][2] = {{"lora_quant", x->lora_quant}, {"unembed_quant", x->unembed_quant},
                                      {"model_quant", x->model_quant}};
    for (size_t k = 0; k < sizeof requant / sizeof requant[0]; k++)
        if (requant[k][1])
            return qp_inf_error(PROG, "init block: %s=%s is not supported (quantpack runs the stored weights; "
                                "requantize with `quantpack convert --to trlm --quant` instead)",
                                requant[k][0], requant[k][1]);
    return 0;
}

/* The init block's quantization is what the SDK read from the bundle's trillim_config.json:
 * when both are there they must agree. */
static int check_quantization(const qp_inf_session *s, const char *dir, const char *quantization) {
    const qp_meta *mq = qp_model_meta(qp_inf_session_model(s), "trillim.quantization");
    if (!quantization || !quantization[0] || !mq || !mq->str || strcmp(mq->str, quantization) == 0) return 0;
    return qp_inf_error(PROG, "init block: quantization '%s' but %s/trillim_config.json says '%s'", quantization,
                        dir, mq->str);
}

/* One request block -> r (ids into buf, n_ctx entries); *quit on a count of 0 or EOF. */
static int read_request(qp_inf_session *s, int64_t n_ctx, int32_t *buf, qp_inf_request *r, bool *quit) {
    const char *tokens = NULL;
    int64_t reset = -1;
    memset(r, 0, sizeof *r);
    r->keep = -1;
    const int64_t big = INT64_MAX;
    const qp_cli_opt rows[] = {
        TI_STR("tokens", &tokens),
        TI_NUM("temperature", &r->temperature),
        {"top_k", NULL, QP_CLI_I64, &r->top_k, .lo = 0, .hi = big},
        TI_NUM("top_p", &r->top_p),
        TI_NUM("repetition_penalty", &r->repetition_penalty),
        {"rep_penalty_lookback", NULL, QP_CLI_I64, &r->rep_penalty_lookback, .lo = 0, .hi = big},
        {"max_tokens", NULL, QP_CLI_I64, &r->max_tokens, .lo = 0, .hi = big},
        {"kv_position", NULL, QP_CLI_I64, &r->keep, .lo = 0, .hi = big},
        {"reset", NULL, QP_CLI_I64, &reset, .lo = 0, .hi = 1}, /* the SDK of April 2026 */
    };
    enum { N_ROWS = sizeof rows / sizeof rows[0], N_REQUIRED = 7 };
    bool given[N_ROWS];
    kv_block b = {0};
    int rc = read_block("request", rows, N_ROWS, N_REQUIRED, (size_t)n_ctx * 12 + 16, true, &b, given, quit);
    if (rc == 0 && !*quit) {
        if (given[N_ROWS - 1] == given[N_ROWS - 2])
            rc = qp_inf_error(PROG, "request: %s", "give kv_position (or reset), one of them");
        else if (reset >= 0)
            r->keep = reset ? 0 : qp_inf_session_position(s);
    }
    if (rc == 0 && !*quit) rc = qp_inf_check_sampling(PROG, r);
    if (rc == 0 && !*quit) rc = parse_id_list("tokens", tokens, qp_inf_session_vocab(s), n_ctx, buf, &r->n_tokens);
    r->tokens = buf;
    block_free(&b);
    return rc;
}

int qp_cmd_trillim_inference(int argc, char **argv) {
    const char *dir = NULL;
    const qp_cli_cmd cmd = {PROG, k_ti_usage, NULL, NULL, 0, 0, &dir, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!dir) return qp_cli_usage_error(PROG ": expected MODEL_DIR");
    kv_block init = {0};
    qp_inf_config c;
    init_extra x;
    char *lora = NULL;
    int32_t *buf = NULL;
    qp_inf_session *s = NULL;
    if ((rc = read_init(&init, &c, &x)) == 0 && x.lora_dir && !(lora = qp_path_join(x.lora_dir, "qmodel.lora")))
        rc = qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
    if (rc == 0) rc = qp_inf_session_open(PROG, dir, lora, &c, &s);
    if (rc == 0) rc = check_quantization(s, dir, x.quantization);
    /* the prompt buffer: max positions were checked against rope.cache */
    if (rc == 0 && !(buf = qp_malloc((size_t)c.max_position_embeddings * sizeof *buf)))
        rc = qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
    while (rc == 0) {
        qp_inf_request r;
        bool quit = false;
        if ((rc = read_request(s, c.max_position_embeddings, buf, &r, &quit)) != 0 || quit) break;
        rc = qp_inf_session_generate(s, &r);
    }
    qp_inf_session_close(s);
    block_free(&init);
    qp_free(lora);
    qp_free(buf);
    return rc;
}
