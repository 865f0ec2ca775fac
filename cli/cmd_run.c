/* quantpack run MODEL [--tokenizer FILE] (-p PROMPT | --ids "1 403 ...") [-n N] [--temp T]
 * [--top-k K] [--top-p P] [--repeat-penalty R] [--repeat-last-n L] [--seed S] [--threads N]
 * [--ctx N] [--no-bos] [--print-ids] [--exact]: generates text with the reference runtime. The prompt and
 * then each generated piece go to stdout as they are made (flushed per token); statistics go to
 * stderr. Stops at EOS or after N new tokens. */
#include <float.h>
#include <inttypes.h>
#include <string.h>

#include "cli/cli.h"
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

/* Text generation: the prompt, then each new piece, to stdout as it is made. */
static int run_gen(const qp_cli_run_args *a) {
    qp_err e = {0};
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_tokenizer *tok = NULL;
    qp_sampler *smp = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = QP_EXIT_OK;
    qp_status s = qp_model_open(a->path, &a->open, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    bool have_vocab = m->vocab.model != QP_TOK_NONE && m->vocab.n_tokens > 0;
    if (have_vocab && (s = qp_tokenizer_new(&m->vocab, &tok, &e)) != QP_OK) goto fail;
    if (a->prompt) {
        if (!tok) {
            qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: no tokenizer in this model%s; use --ids", a->path,
                    a->open.tokenizer_path ? "" : " (pass --tokenizer FILE)");
            goto fail;
        }
        const bool add_bos = qp_model_adds_bos(m) && !a->no_bos;
        if ((s = qp_tokenizer_encode(tok, a->prompt, strlen(a->prompt), add_bos, false, &ids, &n_ids,
                                     &e)) != QP_OK)
            goto fail;
    } else if ((s = qp_cli_parse_ids(a->ids, " ,\t\n", &ids, &n_ids, &e)) != QP_OK) {
        goto fail;
    }
    if (n_ids == 0) {
        rc = qp_cli_usage_error("run: the prompt has no tokens");
        goto done;
    }
    qp_runtime_opts ro = {(int)a->threads, a->ctx, a->exact};
    if ((s = qp_runtime_new(m, &ro, &rt, &e)) != QP_OK) goto fail;
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    if ((s = qp_sampler_new(&a->sampler, c->vocab, &smp, &e)) != QP_OK) goto fail;
    int32_t eos = m->arch.eos_id >= 0 ? m->arch.eos_id : m->vocab.eos_id;

    /* prompt */
    if (a->print_ids) {
        for (int64_t i = 0; i < n_ids; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    } else if (tok) {
        for (int64_t i = 0; i < n_ids; i++) put_piece(tok, i ? ids[i - 1] : -1, ids[i]);
    }
    fflush(stdout);
    float *logits = NULL;
    double t0 = qp_cli_now_s();
    if (n_ids > c->n_ctx) {
        qp_fail(&e, QP_ERR_LIMIT, "the prompt (%lld tokens) does not fit the context of %lld",
                (long long)n_ids, (long long)c->n_ctx);
        goto fail;
    }
    /* the prompt as one batch (runtime.md: same logits as token by token) */
    if ((s = qp_runtime_forward_batch(rt, ids, n_ids, 0, NULL, &logits, &e)) != QP_OK) goto fail;
    for (int64_t i = 0; i < n_ids; i++)
        if ((s = qp_sampler_accept(smp, ids[i], &e)) != QP_OK) goto fail;
    double t1 = qp_cli_now_s();
    int64_t n_gen = 0, pos = n_ids;
    int32_t prev = ids[n_ids - 1];
    bool hit_eos = false, hit_ctx = false;
    while (n_gen < a->n_new) {
        int32_t next;
        if ((s = qp_sampler_sample(smp, logits, &next, &e)) != QP_OK) goto fail;
        n_gen++;
        if (next == eos) {
            hit_eos = true;
            break;
        }
        if (a->print_ids) printf(" %" PRId32, next);
        else if (tok) put_piece(tok, prev, next);
        else printf("%s%" PRId32, n_gen > 1 ? " " : "", next);
        fflush(stdout);
        prev = next;
        if (n_gen == a->n_new) break;
        if (pos >= c->n_ctx) {
            hit_ctx = true;
            break;
        }
        if ((s = qp_sampler_accept(smp, next, &e)) != QP_OK) goto fail;
        if ((s = qp_runtime_forward(rt, next, pos++, &logits, &e)) != QP_OK) goto fail;
    }
    double t2 = qp_cli_now_s();
    putchar('\n');
    rc = qp_cli_flush_stdout();
    int64_t n_decoded = pos - n_ids; /* forward passes after the prompt */
    fprintf(stderr,
            "quantpack run: %lld prompt tokens in %.3f s (%.2f tok/s), %lld new tokens, %lld "
            "decode steps in %.3f s (%.2f tok/s), %d threads, %s path%s%s\n",
            (long long)n_ids, t1 - t0, (double)n_ids / (t1 - t0 > 0 ? t1 - t0 : 1e-9),
            (long long)n_gen, (long long)n_decoded, t2 - t1,
            (double)n_decoded / (t2 - t1 > 0 ? t2 - t1 : 1e-9), c->n_threads,
            c->exact ? "exact" : "fast",
            hit_eos ? ", stopped at EOS" : "", hit_ctx ? ", stopped: context full" : "");
    goto done;
fail:
    putchar('\n');
    fflush(stdout);
    rc = qp_cli_fail(&e);
done:
    qp_sampler_free(smp);
    qp_runtime_free(rt);
    qp_tokenizer_free(tok);
    qp_free(ids);
    qp_model_close(m);
    return rc;
}

static const char k_run_usage[] =
    "usage: quantpack run MODEL (-p PROMPT | --ids \"ID ID ...\") [options]\n"
    "       quantpack run MODEL --task sentiment|ner|pos|classifier (-p TEXT | --ids ...)\n\n"
    "Generates text with the reference CPU runtime: the prompt, then each new piece, is\n"
    "written to stdout as it is made; statistics (tokens/s) go to stderr. Stops at EOS or\n"
    "after N new tokens. --task runs a .bullet task head over the input instead.\n";

/* Parses the command line once, then runs generation or the task head (cli/cmd_bullet.c). */
int qp_cmd_run(int argc, char **argv) {
    qp_cli_run_args a = {.n_new = 128};
    qp_sampler_params_default(&a.sampler);
    qp_sampler_params *sp = &a.sampler;
    const unsigned G = QP_RUN_GEN, T = QP_RUN_TASK;
    const qp_cli_opt opts[] = {
        {"--prompt", "-p", QP_CLI_STR, &a.prompt, .arg = "TEXT",
         .help = "prompt text (BOS is prepended when the vocabulary says so)"},
        {"--ids", NULL, QP_CLI_STR, &a.ids, .arg = "\"1 403 ...\"", .help = "prompt as token ids (used as given)"},
        {"--tokenizer", NULL, QP_CLI_STR, &a.open.tokenizer_path, .arg = "FILE",
         .help = "tokenizer for sources without one (llama2.c tokenizer.bin)"},
        {"--task", NULL, QP_CLI_STR, &a.task, .arg = "NAME",
         .help = "gen (text, the default), or a .bullet task head: sentiment, ner, pos,\nclassifier"},
        {"--n-predict", "-n", QP_CLI_I64, &a.n_new, .lo = 0, .hi = 1 << 24, .used_by = G, .arg = "N",
         .help = "new tokens at most (default 128); stops earlier at EOS"},
        {"--temp", "--temperature", QP_CLI_F32, &sp->temperature, .used_by = G, .arg = "T",
         .help = "temperature (default 0 = greedy, lowest id on ties)"},
        {"--top-k", NULL, QP_CLI_I32, &sp->top_k, .lo = 0, .hi = INT32_MAX, .used_by = G, .arg = "K",
         .help = "keep the K most likely tokens (0 = off)"},
        {"--top-p", NULL, QP_CLI_F32, &sp->top_p, .used_by = G, .arg = "P", .help = "nucleus sampling (1 = off)"},
        {"--repeat-penalty", NULL, QP_CLI_F32, &sp->repeat_penalty, .flo = FLT_MIN, .fhi = FLT_MAX,
         .used_by = G, .arg = "R", .help = "llama.cpp-style repetition penalty (1 = off)"},
        {"--repeat-last-n", NULL, QP_CLI_I32, &sp->repeat_last_n, .lo = -1, .hi = INT32_MAX,
         .used_by = G, .arg = "L", .help = "penalty window in tokens (default 64; 0 off, -1 all)"},
        {"--seed", NULL, QP_CLI_U64, &sp->seed, .used_by = G, .arg = "S",
         .help = "RNG seed (default 0; the same seed gives the same text)"},
        QP_CLI_THREADS(&a.threads, 0),
        {"--ctx", NULL, QP_CLI_I64, &a.ctx, .lo = 1, .hi = 1 << 20, .used_by = G, .arg = "N",
         .help = "KV cache positions (default min(model context, 4096))"},
        {"--no-bos", NULL, QP_CLI_FLAG, &a.no_bos, .help = "do not prepend BOS to -p text"},
        {"--print-ids", NULL, QP_CLI_FLAG, &a.print_ids, .used_by = G,
         .help = "print token ids (one line) instead of text"},
        {"--exact", NULL, QP_CLI_FLAG, &a.exact,
         .help = "the exact path (F32 activations, as verify) instead of the\nfast one"},
    };
    enum { N_OPTS = sizeof opts / sizeof opts[0] };
    const qp_cli_cmd cmd = {"run", k_run_usage, NULL, opts, N_OPTS, 0, &a.path, 1, NULL,
                            " (quote the prompt)"};
    bool given[N_OPTS];
    int rc = qp_cli_parse(&cmd, argc, argv, given);
    if (rc != QP_CLI_RUN) return rc;
    bool task = a.task && strcmp(a.task, "gen") != 0;
    for (int k = 0; k < N_OPTS; k++)
        if (given[k] && task && opts[k].used_by && !(opts[k].used_by & T))
            return qp_cli_usage_error("run --task %s: option '%s' is not used by task heads", a.task,
                                      opts[k].name);
    if (!a.path) return qp_cli_usage_error("run: no MODEL given");
    if ((a.prompt != NULL) == (a.ids != NULL))
        return qp_cli_usage_error("run: give either -p PROMPT or --ids \"ID ...\"");
    return task ? qp_cli_run_task(&a) : run_gen(&a);
}
