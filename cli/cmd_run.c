/* quantpack run MODEL [--tokenizer FILE] (-p PROMPT | --ids "1 403 ...") [-n N] [--temp T]
 * [--top-k K] [--top-p P] [--repeat-penalty R] [--repeat-last-n L] [--seed S] [--threads N]
 * [--ctx N] [--no-bos] [--print-ids]: generates text with the reference runtime. The prompt and
 * then each generated piece go to stdout as they are made (flushed per token); statistics go to
 * stderr. Stops at EOS or after N new tokens. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_f(const char *s, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || v != v) return false;
    *out = v;
    return true;
}

/* "1 403 407" -> ids (qp_malloc'd). */
static bool parse_ids(const char *s, int32_t **out, int64_t *n_out) {
    int64_t cap = 16, n = 0;
    int32_t *ids = qp_malloc((size_t)cap * sizeof *ids);
    if (!ids) return false;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX) {
            qp_free(ids);
            return false;
        }
        if (n == cap) {
            int32_t *ni = qp_realloc(ids, (size_t)cap * 2 * sizeof *ni);
            if (!ni) {
                qp_free(ids);
                return false;
            }
            ids = ni;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n_out = n;
    return true;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    for (int i = 1; i + 1 < argc; i++) /* --task: .bullet task heads, cli/cmd_bullet.c */
        if (strcmp(argv[i], "--task") == 0) return qp_cmd_run_task(argc, argv);
    const char *path = NULL, *prompt = NULL, *ids_arg = NULL;
    qp_open_opts oo = {0};
    qp_sampler_params sp;
    qp_sampler_params_default(&sp);
    int64_t n_new = 128, threads = 0, ctx = 0;
    bool no_bos = false, print_ids = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t iv;
        if (qp_cli_is_help(a)) {
            run_help(stdout);
            return QP_EXIT_OK;
        }
#define NEED_VALUE()                                                                             \
    do {                                                                                         \
        if (!v) return qp_cli_usage_error("run: %s needs a value", a);                           \
        i++;                                                                                     \
    } while (0)
        if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0) {
            NEED_VALUE();
            prompt = v;
        } else if (strcmp(a, "--ids") == 0) {
            NEED_VALUE();
            ids_arg = v;
        } else if (strcmp(a, "--tokenizer") == 0) {
            NEED_VALUE();
            oo.tokenizer_path = v;
        } else if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) {
            NEED_VALUE();
            if (!parse_i64(v, 0, 1 << 24, &n_new)) return qp_cli_usage_error("run: bad -n '%s'", v);
        } else if (strcmp(a, "--temp") == 0 || strcmp(a, "--temperature") == 0) {
            NEED_VALUE();
            if (!parse_f(v, &sp.temperature)) return qp_cli_usage_error("run: bad --temp '%s'", v);
        } else if (strcmp(a, "--top-k") == 0) {
            NEED_VALUE();
            if (!parse_i64(v, 0, INT32_MAX, &iv)) return qp_cli_usage_error("run: bad --top-k '%s'", v);
            sp.top_k = (int32_t)iv;
        } else if (strcmp(a, "--top-p") == 0) {
            NEED_VALUE();
            if (!parse_f(v, &sp.top_p)) return qp_cli_usage_error("run: bad --top-p '%s'", v);
        } else if (strcmp(a, "--repeat-penalty") == 0) {
            NEED_VALUE();
            if (!parse_f(v, &sp.repeat_penalty) || !(sp.repeat_penalty > 0.0f))
                return qp_cli_usage_error("run: bad --repeat-penalty '%s'", v);
        } else if (strcmp(a, "--repeat-last-n") == 0) {
            NEED_VALUE();
            if (!parse_i64(v, -1, INT32_MAX, &iv))
                return qp_cli_usage_error("run: bad --repeat-last-n '%s'", v);
            sp.repeat_last_n = (int32_t)iv;
        } else if (strcmp(a, "--seed") == 0) {
            NEED_VALUE();
            char *end;
            errno = 0;
            unsigned long long sv = strtoull(v, &end, 10);
            if (errno || end == v || *end) return qp_cli_usage_error("run: bad --seed '%s'", v);
            sp.seed = sv;
        } else if (strcmp(a, "--threads") == 0 || strcmp(a, "-t") == 0) {
            NEED_VALUE();
            if (!parse_i64(v, 1, 1024, &threads)) return qp_cli_usage_error("run: bad --threads '%s'", v);
        } else if (strcmp(a, "--ctx") == 0) {
            NEED_VALUE();
            if (!parse_i64(v, 1, 1 << 20, &ctx)) return qp_cli_usage_error("run: bad --ctx '%s'", v);
        } else if (strcmp(a, "--no-bos") == 0) {
            no_bos = true;
        } else if (strcmp(a, "--print-ids") == 0) {
            print_ids = true;
        } else if (a[0] == '-' && a[1]) {
            return qp_cli_usage_error("run: unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return qp_cli_usage_error("run: unexpected argument '%s' (quote the prompt)", a);
        }
#undef NEED_VALUE
    }
    if (!path) {
        run_help(stderr);
        return QP_EXIT_USAGE;
    }
    if ((prompt != NULL) == (ids_arg != NULL))
        return qp_cli_usage_error("run: give either -p PROMPT or --ids \"ID ...\"");

    qp_err e = {0};
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_tokenizer *tok = NULL;
    qp_sampler *smp = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    int rc = QP_EXIT_OK;
    qp_status s = qp_model_open(path, &oo, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    bool have_vocab = m->vocab.model != QP_TOK_NONE && m->vocab.n_tokens > 0;
    if (have_vocab && (s = qp_tokenizer_new(&m->vocab, &tok, &e)) != QP_OK) goto fail;
    if (prompt) {
        if (!tok) {
            qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: no tokenizer in this model%s; use --ids", path,
                    oo.tokenizer_path ? "" : " (pass --tokenizer FILE)");
            goto fail;
        }
        bool add_bos = m->vocab.add_bos;
        if (m->format == QP_FORMAT_GGUF && m->vocab.model == QP_TOK_SPM &&
            !qp_model_meta(m, "tokenizer.ggml.add_bos_token"))
            add_bos = true; /* as llama.cpp */
        if ((s = qp_tokenizer_encode(tok, prompt, strlen(prompt), add_bos && !no_bos, false,
                                     &ids, &n_ids, &e)) != QP_OK)
            goto fail;
    } else if (!parse_ids(ids_arg, &ids, &n_ids)) {
        rc = qp_cli_usage_error("run: --ids must be non-negative integers");
        goto done;
    }
    if (n_ids == 0) {
        rc = qp_cli_usage_error("run: the prompt has no tokens");
        goto done;
    }
    qp_runtime_opts ro = {(int)threads, ctx};
    if ((s = qp_runtime_new(m, &ro, &rt, &e)) != QP_OK) goto fail;
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    if ((s = qp_sampler_new(&sp, c->vocab, &smp, &e)) != QP_OK) goto fail;
    int32_t eos = m->arch.eos_id >= 0 ? m->arch.eos_id : m->vocab.eos_id;

    /* prompt */
    if (print_ids) {
        for (int64_t i = 0; i < n_ids; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    } else if (tok) {
        for (int64_t i = 0; i < n_ids; i++) put_piece(tok, i ? ids[i - 1] : -1, ids[i]);
    }
    fflush(stdout);
    float *logits = NULL;
    double t0 = now_s();
    if (n_ids > c->n_ctx) {
        qp_fail(&e, QP_ERR_LIMIT, "the prompt (%lld tokens) does not fit the context of %lld",
                (long long)n_ids, (long long)c->n_ctx);
        goto fail;
    }
    /* the prompt as one batch (runtime.md: same logits as token by token) */
    if ((s = qp_runtime_forward_batch(rt, ids, n_ids, 0, NULL, &logits, &e)) != QP_OK) goto fail;
    for (int64_t i = 0; i < n_ids; i++)
        if ((s = qp_sampler_accept(smp, ids[i], &e)) != QP_OK) goto fail;
    double t1 = now_s();
    int64_t n_gen = 0, pos = n_ids;
    int32_t prev = ids[n_ids - 1];
    bool hit_eos = false, hit_ctx = false;
    while (n_gen < n_new) {
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
        if (n_gen == n_new) break;
        if (pos >= c->n_ctx) {
            hit_ctx = true;
            break;
        }
        if ((s = qp_sampler_accept(smp, next, &e)) != QP_OK) goto fail;
        if ((s = qp_runtime_forward(rt, next, pos++, &logits, &e)) != QP_OK) goto fail;
    }
    double t2 = now_s();
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
