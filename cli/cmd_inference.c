/* `inference`: Trillim protocol v1 (Trillim's PROTOCOL note, version 1) on stdin/stdout: the model's
 * configuration as --config words, requests as one number a line. Generation:
 * cli/inference_session.c; rules: cli/trillim-inference.md "Protocol v1". */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/inference_session.h"

static const char k_inf_usage[] =
    "usage: inference MODEL_DIR [--lora [ADAPTER_DIR]] --config ARCH ACT HIDDEN INTER LAYERS\n"
    "         HEADS KV_HEADS VOCAB HEAD_DIM MAX_POS NORM_EPS ROPE_THETA TIE QKV_BIAS\n"
    "         ATTN_SUB_NORM FFN_SUB_NORM THREADS N_EOS EOS... [--lora ADAPTER_DIR]\n\n"
    "Trillim protocol v1. Per request, stdin lines: num_tokens (0 quits), reset (0/1),\n"
    "temperature, top_k, top_p, repetition_penalty, rep_penalty_lookback, max_tokens (0 =\n"
    "unlimited, bounded by max positions), then num_tokens token ids. stdout: one generated\n"
    "id per line, then kv_position. A response that stops without an EOS id (max_tokens, a\n"
    "full cache) ends with the first EOS id (not cached), as the SDK reads until one. The\n"
    "repetition penalty looks back over the session's cached tokens (all requests since the\n"
    "last reset 1), as attention does. --lora ADAPTER_DIR (before --config, or after the EOS\n"
    "ids as the SDK passes it) merges ADAPTER_DIR/qmodel.lora; --lora alone merges\n"
    "MODEL_DIR/qmodel.lora. THREADS: 0 (auto) or 1..1024. Malformed input: a message on\n"
    "stderr and exit 3. Rules: cli/trillim-inference.md.\n";

#define PROG "inference"

/* The words of --config -> c, through the option parser's value rules (one row per field); the
 * words after the EOS ids go to *tail (the SDK's `--lora ADAPTER_DIR`). */
static int parse_config(const qp_cli_rest *w, qp_inf_config *c, qp_cli_rest *tail) {
    qp_cli_opt fields[QP_INF_N_FIELDS];
    char why[96];
    memset(c, 0, sizeof *c);
    qp_inf_config_fields(c, fields);
    for (int k = 0; k < QP_INF_N_FIELDS; k++) {
        if (k >= w->argc)
            return qp_cli_usage_error(PROG ": --config is missing %s (field %d)", fields[k].name, k + 1);
        if (!qp_cli_parse_value(&fields[k], w->argv[k], why, sizeof why))
            return qp_cli_usage_error(PROG ": --config field %d (%s) wants %s, not '%s'", k + 1,
                                      fields[k].name, why, w->argv[k]);
    }
    for (int k = 0; k < c->num_eos_tokens; k++) {
        const qp_cli_opt eos = {"EOS token", NULL, QP_CLI_I64, &c->eos[k], .lo = 0, .hi = INT64_MAX};
        const int at = QP_INF_N_FIELDS + k;
        if (at >= w->argc || !qp_cli_parse_value(&eos, w->argv[at], why, sizeof why))
            return qp_cli_usage_error(PROG ": --config EOS token %d missing or invalid", k + 1);
    }
    const int used = QP_INF_N_FIELDS + (int)c->num_eos_tokens;
    /* tail->argv[0] stands for the command name: qp_cli_parse starts at argv[1] */
    tail->argv = w->argv + used - 1;
    tail->argc = w->argc - used + 1;
    if (!(c->norm_eps > 0) || !(c->rope_theta > 0))
        return qp_cli_usage_error(PROG ": norm_eps and rope_theta must be positive");
    return QP_CLI_RUN;
}

/* Reads one protocol line; 1 ok, 0 EOF before any byte, -1 too long (EOF mid-line is a line). */
static int read_line(char *buf, size_t cap) {
    if (!fgets(buf, (int)cap, stdin)) return 0;
    size_t n = strlen(buf);
    if (n == cap - 1 && buf[n - 1] != '\n') return -1;
    return 1;
}

/* One number line: an integer (iv) or a finite number (fv), blanks after it allowed. 0 ok (or *eof
 * at a clean end when eof_ok), else the exit code after the message. */
static int read_num(const char *what, bool is_float, int64_t *iv, double *fv, bool eof_ok, bool *eof) {
    char line[256];
    int r = read_line(line, sizeof line);
    if (r == 0) {
        if (eof_ok) {
            *eof = true;
            return 0;
        }
        return qp_inf_error(PROG, "unexpected end of input while reading %s", what);
    }
    if (r < 0) return qp_inf_error(PROG, "%s: line too long", what);
    size_t n = strlen(line);
    while (n > 0 && strchr(" \t\r\n", line[n - 1])) line[--n] = '\0';
    bool ok = is_float ? qp_cli_parse_f64(line, 0, 0, fv) : qp_cli_parse_i64(line, INT64_MIN, INT64_MAX, iv);
    if (!ok)
        return qp_inf_error(PROG, "%s: '%s' is not %s", what, line, is_float ? "a finite number" : "an integer");
    return 0;
}

/* The header lines and token ids of one request into r (ids into buf, n_ctx entries); *quit on
 * "0" or a clean EOF. */
static int read_request(qp_inf_session *s, int64_t n_ctx, int32_t *buf, qp_inf_request *r, bool *quit) {
    bool eof = false;
    int64_t reset = 0;
    int rc;
    memset(r, 0, sizeof *r);
    if ((rc = read_num("num_tokens", false, &r->n_tokens, NULL, true, &eof)) != 0) return rc;
    if (eof || r->n_tokens == 0) { /* stdin closed between requests: a clean end */
        *quit = true;
        return 0;
    }
    if (r->n_tokens < 0 || r->n_tokens > n_ctx)
        return qp_inf_error(PROG, "num_tokens %lld is outside 0..%lld", (long long)r->n_tokens, (long long)n_ctx);
    if ((rc = read_num("reset_flag", false, &reset, NULL, false, &eof)) != 0 ||
        (rc = read_num("temperature", true, NULL, &r->temperature, false, &eof)) != 0 ||
        (rc = read_num("top_k", false, &r->top_k, NULL, false, &eof)) != 0 ||
        (rc = read_num("top_p", true, NULL, &r->top_p, false, &eof)) != 0 ||
        (rc = read_num("repetition_penalty", true, NULL, &r->repetition_penalty, false, &eof)) != 0 ||
        (rc = read_num("rep_penalty_lookback", false, &r->rep_penalty_lookback, NULL, false, &eof)) != 0 ||
        (rc = read_num("max_tokens", false, &r->max_tokens, NULL, false, &eof)) != 0)
        return rc;
    if (reset != 0 && reset != 1) return qp_inf_error(PROG, "reset_flag %lld is not 0 or 1", (long long)reset);
    if ((rc = qp_inf_check_sampling(PROG, r)) != 0) return rc;
    const int64_t vocab = qp_inf_session_vocab(s);
    for (int64_t k = 0; k < r->n_tokens; k++) {
        int64_t id;
        char what[48];
        snprintf(what, sizeof what, "token id %lld", (long long)k + 1);
        if ((rc = read_num(what, false, &id, NULL, false, &eof)) != 0) return rc;
        if (id < 0 || id >= vocab)
            return qp_inf_error(PROG, "token id %lld is outside the vocabulary (0..%lld)", (long long)id,
                                (long long)vocab - 1);
        buf[k] = (int32_t)id;
    }
    r->tokens = buf;
    r->keep = reset ? 0 : qp_inf_session_position(s); /* v1 continues from the whole cache */
    return 0;
}

/* MODEL_DIR/qmodel.lora for a bare --lora, ADAPTER/qmodel.lora for --lora ADAPTER, else NULL. */
static int lora_file(const char *dir, const char *lora, char **out) {
    *out = NULL;
    if (!lora) return QP_EXIT_OK;
    if (!(*out = qp_path_join(*lora ? lora : dir, "qmodel.lora")))
        return qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
    return QP_EXIT_OK;
}

int qp_cmd_inference(int argc, char **argv) {
    const char *dir = NULL, *lora = NULL;
    qp_cli_rest words = {NULL, 0}, tail = {NULL, 0};
    const qp_cli_opt opts[] = {
        {"--lora", NULL, QP_CLI_OPT_STR, &lora, .arg = "[ADAPTER_DIR]",
         .help = "merge ADAPTER_DIR/qmodel.lora (alone: MODEL_DIR/qmodel.lora);\n"
                 "also taken after the EOS ids"},
        {"--config", NULL, QP_CLI_REST, &words, .arg = "ARCH ... EOS...",
         .help = "the model's configuration: every word after --config"},
    };
    const qp_cli_cmd cmd = {PROG, k_inf_usage, NULL, opts, 2, 0, &dir, 1, NULL, NULL};
    const qp_cli_cmd after = {PROG " (after the EOS ids)", k_inf_usage, NULL, opts, 1, 0, NULL, 0, NULL, NULL};
    qp_inf_config c;
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!dir || !words.argv)
        return qp_cli_usage_error(PROG ": expected MODEL_DIR [--lora [ADAPTER_DIR]] --config ...");
    if ((rc = parse_config(&words, &c, &tail)) != QP_CLI_RUN) return rc;
    if ((rc = qp_cli_parse(&after, tail.argc, tail.argv, NULL)) != QP_CLI_RUN) return rc;

    char *lf = NULL;
    int32_t *buf = NULL;
    qp_inf_session *s = NULL;
    if ((rc = lora_file(dir, lora, &lf)) == QP_EXIT_OK) rc = qp_inf_session_open(PROG, dir, lf, &c, &s);
    /* the prompt buffer: max positions were checked against rope.cache */
    if (rc == QP_EXIT_OK && !(buf = qp_malloc((size_t)c.max_position_embeddings * sizeof *buf)))
        rc = qp_cli_error(QP_ERR_NOMEM, PROG ": out of memory");
    while (rc == QP_EXIT_OK) {
        qp_inf_request r;
        bool quit = false;
        if ((rc = read_request(s, c.max_position_embeddings, buf, &r, &quit)) != 0 || quit) break;
        rc = qp_inf_session_generate(s, &r);
    }
    qp_inf_session_close(s);
    qp_free(lf);
    qp_free(buf);
    return rc;
}
