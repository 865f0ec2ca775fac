/* quantpack tokenize MODEL [--tokenizer FILE] [--no-bos] [--special] (--stdin | TEXT):
 * prints the token ids of TEXT (or of all of standard input, byte for byte) on one line. MODEL is
 * any model qp_model_open reads (a vocab-only GGUF works), or a bare tokenizer.json (with its
 * tokenizer_config.json beside it when present). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/utf8.h"
#include "quantpack/tokenizer.h"

#define TOKENIZE_MAX_INPUT ((size_t)1 << 30)

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* "ID 'piece'": the vocabulary string of id; well-formed UTF-8 as it is, control bytes, ' and \
 * and ill-formed bytes as \xNN. */
static void print_piece(const qp_vocab *v, int32_t id) {
    printf("%6" PRId32 " '", id);
    if (id >= 0 && id < v->n_tokens) {
        const uint8_t *p = (const uint8_t *)v->tokens[id];
        size_t len = v->token_lens ? v->token_lens[id] : strlen(v->tokens[id]);
        for (size_t k = 0; k < len;) {
            uint32_t cp;
            size_t bad, n = qp_utf8_decode(p + k, len - k, &cp, &bad);
            if (n > 1) {
                fwrite(p + k, 1, n, stdout);
                k += n;
                continue;
            }
            if (n == 1 && p[k] >= 0x20 && p[k] < 0x7f && p[k] != '\'' && p[k] != '\\') putchar(p[k]);
            else printf("\\x%02x", p[k]);
            k++;
        }
    }
    puts("'");
}

static qp_status read_stdin(char **out, size_t *out_len, qp_err *e) {
    size_t cap = 1 << 16, len = 0;
    char *buf = qp_malloc(cap);
    if (!buf) return qp_fail(e, QP_ERR_NOMEM, "out of memory reading standard input");
    for (;;) {
        if (len == cap) {
            if (cap >= TOKENIZE_MAX_INPUT) {
                qp_free(buf);
                return qp_fail(e, QP_ERR_LIMIT, "standard input is over %zu bytes",
                               TOKENIZE_MAX_INPUT);
            }
            char *nb = qp_realloc(buf, cap * 2);
            if (!nb) {
                qp_free(buf);
                return qp_fail(e, QP_ERR_NOMEM, "out of memory reading standard input");
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, stdin);
        len += n;
        if (n == 0) break;
    }
    if (ferror(stdin)) {
        qp_free(buf);
        return qp_fail(e, QP_ERR_IO, "cannot read standard input");
    }
    *out = buf;
    *out_len = len;
    return QP_OK;
}

int qp_cmd_tokenize(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}; /* MODEL, TEXT */
    int n_pos = 0;
    bool use_stdin = false, no_bos = false, special = false, pieces = false;
    qp_open_opts opts = {0};
    const qp_cli_opt rows[] = {
        {"--tokenizer", NULL, QP_CLI_STR, &opts.tokenizer_path, .arg = "FILE",
         .help = "tokenizer for sources without one (llama2.c tokenizer.bin)"},
        {"--no-bos", NULL, QP_CLI_FLAG, &no_bos,
         .help = "do not prepend BOS (it is added when the vocabulary says so)"},
        {"--special", NULL, QP_CLI_FLAG, &special,
         .help = "recognise control tokens such as <s> written in the text"},
        {"--stdin", NULL, QP_CLI_FLAG, &use_stdin,
         .help = "read the text from standard input, verbatim (no newline is\nstripped)"},
        {"--pieces", NULL, QP_CLI_FLAG, &pieces,
         .help = "one token a line: its id and its vocabulary string, quoted\n(bytes outside "
                 "printable ASCII as \\xNN), as llama-tokenize shows them"},
    };
    const qp_cli_cmd cmd = {
        "tokenize",
        "usage: quantpack tokenize MODEL [--tokenizer FILE] [--no-bos] [--special] "
        "(--stdin | TEXT)\n\n"
        "Prints the token ids of TEXT, space-separated on one line. MODEL is a model file or\n"
        "directory (a vocab-only GGUF is fine) or a tokenizer.json. A TEXT starting with '-'\n"
        "goes after --.\n",
        "Invalid UTF-8 is tokenized as if each ill-formed sequence were U+FFFD.\n",
        rows, 5, 0, pos, 2, &n_pos, " (quote the TEXT)"};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    const char *path = pos[0], *text = pos[1];
    if (!path) return qp_cli_usage_error("tokenize: no MODEL given");
    if (use_stdin == (text != NULL))
        return qp_cli_usage_error("tokenize: give either TEXT or --stdin");

    qp_err e = {0};
    qp_model *m = NULL;
    qp_status s = has_suffix(path, ".json") && !qp_path_is_dir(path)
                      ? qp_model_open_tokenizer_json(path, &m, &e)
                      : qp_model_open(path, &opts, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    if (m->vocab.model == QP_TOK_NONE || m->vocab.n_tokens <= 0) {
        qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: no tokenizer in this model%s", path,
                opts.tokenizer_path ? "" : " (pass --tokenizer FILE)");
        qp_model_close(m);
        return qp_cli_fail(&e);
    }
    qp_tokenizer *t = NULL;
    s = qp_tokenizer_new(&m->vocab, &t, &e);
    if (s != QP_OK) {
        qp_err_prefix(&e, "%s: ", path);
        qp_model_close(m);
        return qp_cli_fail(&e);
    }
    char *buf = NULL;
    size_t len = 0;
    if (use_stdin) s = read_stdin(&buf, &len, &e);
    else len = strlen(text);
    const bool add_bos = qp_model_adds_bos(m); /* as llama.cpp: GGUF SPM without the key adds it */
    int32_t *ids = NULL;
    int64_t n = 0;
    if (s == QP_OK)
        s = qp_tokenizer_encode(t, use_stdin ? buf : text, len, add_bos && !no_bos, special, &ids,
                                &n, &e);
    if (s != QP_OK) {
        rc = qp_cli_fail(&e);
    } else {
        if (pieces) {
            for (int64_t i = 0; i < n; i++) print_piece(&m->vocab, ids[i]);
        } else {
            for (int64_t i = 0; i < n; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
            putchar('\n');
        }
        rc = qp_cli_flush_stdout();
    }
    qp_free(ids);
    qp_free(buf);
    qp_tokenizer_free(t);
    qp_model_close(m);
    return rc;
}
