/* quantpack run MODEL (-p PROMPT | -f FILE | --ids "1 403 ...") [generation options of
 * cli/cli_gen.c] [--no-bos] [--print-ids]: generates text through a generation session
 * (include/quantpack/generate.h). The prompt and then each generated piece go to stdout as they
 * are made (flushed per token); statistics go to stderr. Stops at EOS, after N new tokens or
 * when the context is full. */
#include <float.h>
#include <inttypes.h>
#include <string.h>

#include "cli/cli.h"
#include "quantpack/generate.h"
#include "quantpack/runtime.h"
#include "quantpack/sampler.h"
#include "quantpack/tokenizer.h"

/* Writes the piece of id (after prev) to stdout. */
static void put_piece(const qp_tokenizer *t, int32_t prev, int32_t id) {
    char buf[256];
    size_t n, n2;
    if (qp_tokenizer_decode_piece(t, prev, id, buf, sizeof buf, &n, NULL) != QP_OK) return;
    if (n <= sizeof buf) {
        fwrite(buf, 1, n, stdout);
        return;
    }
    char *big = qp_malloc(n);
    if (big && qp_tokenizer_decode_piece(t, prev, id, big, n, &n2, NULL) == QP_OK && n2 == n)
        fwrite(big, 1, n, stdout);
    qp_free(big);
}

typedef struct run_out {
    bool print_ids, text;
    int64_t n;
} run_out;

/* Each generated token as it comes: its text, or its id (--print-ids, or no vocabulary). */
static bool print_token(void *arg, int32_t token, const char *text, size_t len) {
    run_out *o = arg;
    if (o->text && !o->print_ids) fwrite(text, 1, len, stdout);
    else if (token >= 0) printf(o->n++ || o->print_ids ? " %" PRId32 : "%" PRId32, token);
    fflush(stdout);
    return true;
}

/* The prompt's token ids: -p / -f text through the tokenizer, or --ids as given. */
static qp_status prompt_ids(const qp_cli_run_args *a, const qp_gen_session *gs, int32_t **ids,
                            int64_t *n_ids, qp_err *e) {
    if (a->ids) return qp_cli_parse_ids(a->ids, " ,\t\n", ids, n_ids, e);
    if (!qp_gen_session_tokenizer(gs))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: no tokenizer in this model%s; use --ids", a->path,
                       a->g.open.tokenizer_path ? "" : " (pass --tokenizer FILE)");
    char *text = NULL;
    size_t len = 0;
    qp_status s = QP_OK;
    if (a->g.file) s = qp_file_read_all(a->g.file, (size_t)64 << 20, &text, &len, e);
    if (s != QP_OK) return s;
    const char *p = text ? text : a->prompt;
    s = qp_gen_tokenize(gs, p, text ? len : strlen(p), !a->no_bos, false, ids, n_ids, e);
    qp_free(text);
    return s;
}

/* Text generation: the prompt, then each new piece, to stdout as it is made. */
static int run_gen(const qp_cli_run_args *a) {
    qp_err e = {0};
    qp_model *m = NULL;
    qp_gen_session *gs = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = QP_EXIT_OK;
    qp_status s = qp_model_open(a->path, &a->g.open, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    const qp_runtime_opts ro = qp_cli_gen_runtime_opts(&a->g);
    if ((s = qp_gen_session_new(m, &ro, &gs, &e)) != QP_OK) goto fail;
    if ((s = prompt_ids(a, gs, &ids, &n_ids, &e)) != QP_OK) goto fail;
    if (n_ids == 0) {
        rc = qp_cli_usage_error("run: the prompt has no tokens");
        goto done;
    }
    const qp_tokenizer *tok = qp_gen_session_tokenizer(gs);
    if (a->print_ids) {
        for (int64_t i = 0; i < n_ids; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    } else if (tok) {
        for (int64_t i = 0; i < n_ids; i++) put_piece(tok, i ? ids[i - 1] : -1, ids[i]);
    }
    fflush(stdout);
    run_out out = {a->print_ids, tok != NULL, 0};
    qp_gen_params gp;
    qp_gen_params_default(&gp);
    gp.sampler = a->g.sampler;
    gp.max_tokens = a->g.n_predict;
    gp.on_token = print_token;
    gp.arg = &out;
    qp_gen_result r;
    if ((s = qp_gen_generate(gs, ids, n_ids, &gp, &r, &e)) != QP_OK) goto fail;
    putchar('\n');
    rc = qp_cli_flush_stdout();
    const qp_runtime_config *c = qp_runtime_get_config(qp_gen_session_runtime(gs));
    fprintf(stderr,
            "quantpack run: %lld prompt tokens in %.3f s (%.2f tok/s), %lld new tokens in %.3f s "
            "(%.2f tok/s), %d threads, %s path (%d matrices repacked), seed %" PRIu64 ", stopped: %s\n",
            (long long)n_ids, r.prompt_s, (double)n_ids / (r.prompt_s > 0 ? r.prompt_s : 1e-9),
            (long long)r.n_generated, r.generate_s,
            (double)r.n_generated / (r.generate_s > 0 ? r.generate_s : 1e-9), c->n_threads,
            c->exact ? "exact" : "fast", c->n_repacked, a->g.sampler.seed, qp_gen_stop_name(r.stop));
    goto done;
fail:
    putchar('\n');
    fflush(stdout);
    rc = qp_cli_fail(&e);
done:
    qp_gen_session_free(gs);
    qp_free(ids);
    qp_model_close(m);
    return rc;
}

static const char k_run_usage[] =
    "usage: quantpack run MODEL (-p PROMPT | -f FILE | --ids \"ID ID ...\") [options]\n"
    "       quantpack run MODEL --task sentiment|ner|pos|classifier (-p TEXT | --ids ...)\n\n"
    "Generates text with the reference CPU runtime: the prompt, then each new piece, is\n"
    "written to stdout as it is made; statistics (tokens/s) go to stderr. Stops at EOS,\n"
    "after N new tokens or when the context is full. --task runs a .bullet task head over the input instead.\n";

/* Parses the command line once, then runs generation or the task head (cli/cmd_bullet.c). */
int qp_cmd_run(int argc, char **argv) {
    qp_cli_run_args a = {0};
    const unsigned G = QP_RUN_GEN, T = QP_RUN_TASK;
    qp_cli_gen_defaults(&a.g, G);
    qp_cli_opt opts[QP_CLI_GEN_MAX_ROWS + 6] = {
        {"--prompt", "-p", QP_CLI_STR, &a.prompt, .arg = "TEXT",
         .help = "prompt text (BOS is prepended when the vocabulary says so)"},
        {"--ids", NULL, QP_CLI_STR, &a.ids, .arg = "\"1 403 ...\"", .help = "prompt as token ids (used as given)"},
        {"--task", NULL, QP_CLI_STR, &a.task, .arg = "NAME",
         .help = "gen (text, the default), or a .bullet task head: sentiment, ner, pos,\nclassifier"},
        {"--no-bos", NULL, QP_CLI_FLAG, &a.no_bos, .help = "do not prepend BOS to -p text"},
        {"--print-ids", NULL, QP_CLI_FLAG, &a.print_ids, .used_by = G,
         .help = "print token ids (one line) instead of text"},
        {"--exact", NULL, QP_CLI_FLAG, &a.g.exact,
         .help = "the exact path (F32 activations, as verify) instead of the\nfast one"},
    };
    const int n_opts = 6 + qp_cli_gen_opts(&a.g, QP_GEN_OPT_FILE, opts + 6);
    const qp_cli_cmd cmd = {"run", k_run_usage, NULL, opts, n_opts, 0, &a.path, 1, NULL,
                            " (quote the prompt)"};
    bool given[QP_CLI_GEN_MAX_ROWS + 6];
    int rc = qp_cli_parse(&cmd, argc, argv, given);
    if (rc != QP_CLI_RUN) return rc;
    bool task = a.task && strcmp(a.task, "gen") != 0;
    for (int k = 0; k < n_opts; k++)
        if (given[k] && task && opts[k].used_by && !(opts[k].used_by & T))
            return qp_cli_usage_error("run --task %s: option '%s' is not used by task heads", a.task,
                                      opts[k].name);
    if (task) a.g.seed = 0; /* no sampling: no seed to show */
    if ((rc = qp_cli_gen_finish("run", &a.g, a.path)) != QP_CLI_RUN) return rc;
    a.path = a.g.model;
    if ((a.prompt != NULL) + (a.ids != NULL) + (a.g.file != NULL) != 1)
        return qp_cli_usage_error("run: give one of -p PROMPT, -f FILE or --ids \"ID ...\"");
    return task ? qp_cli_run_task(&a) : run_gen(&a);
}
