/* quantpack run MODEL [--tokenizer FILE] (-p PROMPT | --ids "1 403 ...") [-n N] [--temp T]
 * [--top-k K] [--top-p P] [--repeat-penalty R] [--repeat-last-n L] [--seed S] [--threads N]
 * [--ctx N] [--no-bos] [--print-ids]: generates text with the reference runtime. The prompt and
 * then each generated piece go to stdout as they are made (flushed per token); statistics go to
 * stderr. Stops at EOS or after N new tokens. */
#include <inttypes.h>
#include <string.h>

#include "cli/cli.h"
#include "quantpack/runtime.h"
#include "quantpack/sampler.h"
#include "quantpack/tokenizer.h"

static void run_help(FILE *f) {
    fprintf(f,
            "usage: quantpack run MODEL (-p PROMPT | --ids \"ID ID ...\") [options]\n\n"
            "Generates text with the reference CPU runtime: the prompt, then each new piece, is\n"
            "written to stdout as it is made; statistics (tokens/s) go to stderr.\n\n"
            "  -p, --prompt TEXT     prompt text (BOS is prepended when the vocabulary says so)\n"
            "  --ids \"1 403 ...\"     prompt as token ids (used as given)\n"
            "  --tokenizer FILE      tokenizer for sources without one (llama2.c tokenizer.bin)\n"
            "  -n N                  new tokens at most (default 128); stops earlier at EOS\n"
            "  --temp T              temperature (default 0 = greedy, lowest id on ties)\n"
            "  --top-k K             keep the K most likely tokens (0 = off)\n"
            "  --top-p P             nucleus sampling (1 = off)\n"
            "  --repeat-penalty R    llama.cpp-style repetition penalty (1 = off)\n"
            "  --repeat-last-n L     penalty window in tokens (default 64; 0 off, -1 all)\n"
            "  --seed S              RNG seed (default 0; the same seed gives the same text)\n"
            "  --threads N           threads (default: all cores); results do not depend on it\n"
            "  --ctx N               KV cache positions (default min(model context, 4096))\n"
            "  --no-bos              do not prepend BOS to -p text\n"
            "  --print-ids           print token ids (one line) instead of text\n");
}

/* Writes the piece of id (after prev) to stdout. */
static void put_piece(const qp_tokenizer *t, int32_t prev, int32_t id) {
    char buf[256];
    int64_t n = qp_tokenizer_decode_piece(t, prev, id, buf, sizeof buf);
    if (n < 0) return;
    if ((size_t)n <= sizeof buf) {
        fwrite(buf, 1, (size_t)n, stdout);
        return;
    }
    char *big = qp_malloc((size_t)n);
    if (big && qp_tokenizer_decode_piece(t, prev, id, big, (size_t)n) == n)
        fwrite(big, 1, (size_t)n, stdout);
    qp_free(big);
}

int qp_cmd_run(int argc, char **argv) {
    /* --task NAME other than gen: .bullet task heads (cli/cmd_bullet.c); --task gen is plain run */
    int task_at = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--task") == 0) task_at = i;
    if (task_at && strcmp(argv[task_at + 1], "gen") != 0) return qp_cmd_run_task(argc, argv);
    const char *path = NULL;
    qp_cli_model_opts o = {.cmd = "run",
                           .takes = QP_CLI_OPT_PROMPT | QP_CLI_OPT_TOKENIZER | QP_CLI_OPT_THREADS |
                                    QP_CLI_OPT_GENERATE,
                           .n_new = 128};
    qp_sampler_params_default(&o.sampler);
    bool print_ids = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (qp_cli_is_help(a)) {
            run_help(stdout);
            return QP_EXIT_OK;
        }
        int r = qp_cli_parse_common(argc, argv, &i, &o);
        if (r < 0) return QP_EXIT_USAGE;
        if (r > 0) continue;
        if (i == task_at) i++; /* --task gen */
        else if (strcmp(a, "--print-ids") == 0) print_ids = true;
        else if (a[0] == '-' && a[1]) return qp_cli_usage_error("run: unknown option '%s'", a);
        else if (!path) path = a;
        else return qp_cli_usage_error("run: unexpected argument '%s' (quote the prompt)", a);
    }
    if (!path) {
        run_help(stderr);
        return QP_EXIT_USAGE;
    }
    if ((o.prompt != NULL) == (o.ids != NULL))
        return qp_cli_usage_error("run: give either -p PROMPT or --ids \"ID ...\"");

    qp_err e = {0};
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_tokenizer *tok = NULL;
    qp_sampler *smp = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = QP_EXIT_OK;
    qp_status s = qp_model_open(path, &o.open, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    bool have_vocab = m->vocab.model != QP_TOK_NONE && m->vocab.n_tokens > 0;
    if (have_vocab && (s = qp_tokenizer_new(&m->vocab, &tok, &e)) != QP_OK) goto fail;
    if (o.prompt) {
        if (!tok) {
            qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: no tokenizer in this model%s; use --ids", path,
                    o.open.tokenizer_path ? "" : " (pass --tokenizer FILE)");
            goto fail;
        }
        const bool add_bos = qp_cli_add_bos(m) && !o.no_bos;
        if ((s = qp_tokenizer_encode(tok, o.prompt, strlen(o.prompt), add_bos, false, &ids, &n_ids,
                                     &e)) != QP_OK)
            goto fail;
    } else if (!qp_cli_parse_ids(o.ids, " ,\t\n", &ids, &n_ids)) {
        rc = qp_cli_usage_error("run: --ids must be non-negative integers");
        goto done;
    }
    if (n_ids == 0) {
        rc = qp_cli_usage_error("run: the prompt has no tokens");
        goto done;
    }
    qp_runtime_opts ro = {(int)o.threads, o.ctx};
    if ((s = qp_runtime_new(m, &ro, &rt, &e)) != QP_OK) goto fail;
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    if ((s = qp_sampler_new(&o.sampler, c->vocab, &smp, &e)) != QP_OK) goto fail;
    int32_t eos = m->arch.eos_id >= 0 ? m->arch.eos_id : m->vocab.eos_id;

    /* prompt */
    if (print_ids) {
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
    while (n_gen < o.n_new) {
        int32_t next;
        if ((s = qp_sampler_sample(smp, logits, &next, &e)) != QP_OK) goto fail;
        n_gen++;
        if (next == eos) {
            hit_eos = true;
            break;
        }
        if (print_ids) printf(" %" PRId32, next);
        else if (tok) put_piece(tok, prev, next);
        else printf("%s%" PRId32, n_gen > 1 ? " " : "", next);
        fflush(stdout);
        prev = next;
        if (n_gen == o.n_new) break;
        if (pos >= c->n_ctx) {
            hit_ctx = true;
            break;
        }
        if ((s = qp_sampler_accept(smp, next, &e)) != QP_OK) goto fail;
        if ((s = qp_runtime_forward(rt, next, pos++, &logits, &e)) != QP_OK) goto fail;
    }
    double t2 = qp_cli_now_s();
    putchar('\n');
    if (fflush(stdout) != 0) rc = QP_EXIT_IO;
    int64_t n_decoded = pos - n_ids; /* forward passes after the prompt */
    fprintf(stderr,
            "quantpack run: %lld prompt tokens in %.3f s (%.2f tok/s), %lld new tokens, %lld "
            "decode steps in %.3f s (%.2f tok/s), %d threads%s%s\n",
            (long long)n_ids, t1 - t0, (double)n_ids / (t1 - t0 > 0 ? t1 - t0 : 1e-9),
            (long long)n_gen, (long long)n_decoded, t2 - t1,
            (double)n_decoded / (t2 - t1 > 0 ? t2 - t1 : 1e-9), c->n_threads,
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
