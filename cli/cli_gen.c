/* The options run, chat and serve share, spelled as llama.cpp's tools spell them (cli/cli.h
 * "generation options"). */
#include <float.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

int qp_cli_gen_opts(qp_cli_gen_args *g, unsigned what, qp_cli_opt *rows) {
    qp_sampler_params *sp = &g->sampler;
    const unsigned G = g->used_by;
    int n = 0;
    rows[n++] = (qp_cli_opt){"--model", "-m", QP_CLI_STR, &g->model, .arg = "MODEL",
                             .help = "the model (or give it as the first argument)"};
    rows[n++] = (qp_cli_opt){"--tokenizer", NULL, QP_CLI_STR, &g->open.tokenizer_path, .arg = "FILE",
                             .help = "tokenizer for sources without one (llama2.c tokenizer.bin)"};
    if (what & QP_GEN_OPT_FILE)
        rows[n++] = (qp_cli_opt){"--file", "-f", QP_CLI_STR, &g->file, .used_by = G, .arg = "FILE",
                                 .help = what & QP_GEN_OPT_TEMPLATE ? "system prompt from FILE"
                                                                    : "prompt from FILE"};
    rows[n++] = (qp_cli_opt){"--n-predict", "-n", QP_CLI_I64, &g->n_predict, .lo = -1, .hi = 1 << 24,
                             .used_by = G, .arg = "N",
                             .help = "new tokens at most (-1: until EOS or the context is full)"};
    rows[n++] = (qp_cli_opt){"--ctx-size", "-c", QP_CLI_I64, &g->ctx, .lo = 1, .hi = 1 << 20,
                             .used_by = G, .arg = "N",
                             .help = "context (KV cache) positions (default min(model's, 4096))"};
    rows[n++] = (qp_cli_opt){"--ctx", NULL, QP_CLI_I64, &g->ctx, .lo = 1, .hi = 1 << 20, .used_by = G};
    rows[n++] = (qp_cli_opt){"--temp", "--temperature", QP_CLI_F32, &sp->temperature, .flo = 0,
                             .fhi = FLT_MAX, .used_by = G, .arg = "T",
                             .help = "temperature >= 0 (default 0 = greedy, lowest id on ties)"};
    rows[n++] = (qp_cli_opt){"--top-k", NULL, QP_CLI_I32, &sp->top_k, .lo = 0, .hi = INT32_MAX,
                             .used_by = G, .arg = "K", .help = "keep the K most likely tokens (0 = off)"};
    rows[n++] = (qp_cli_opt){"--top-p", NULL, QP_CLI_F32, &sp->top_p, .flo = 0, .fhi = 1, .used_by = G,
                             .arg = "P", .help = "nucleus sampling, 0 < P <= 1 (1 = off)"};
    rows[n++] = (qp_cli_opt){"--repeat-penalty", NULL, QP_CLI_F32, &sp->repeat_penalty, .flo = FLT_MIN,
                             .fhi = FLT_MAX, .used_by = G, .arg = "R",
                             .help = "llama.cpp-style repetition penalty (1 = off)"};
    rows[n++] = (qp_cli_opt){"--repeat-last-n", NULL, QP_CLI_I32, &sp->repeat_last_n, .lo = -1,
                             .hi = INT32_MAX, .used_by = G, .arg = "L",
                             .help = "penalty window in tokens (default 64; 0 off, -1 all)"};
    rows[n++] = (qp_cli_opt){"--seed", "-s", QP_CLI_I64, &g->seed, .lo = -1, .hi = INT64_MAX,
                             .used_by = G, .arg = "S",
                             .help = "RNG seed (default -1: random, shown on stderr)"};
    if (what & QP_GEN_OPT_TEMPLATE)
        rows[n++] = (qp_cli_opt){"--chat-template", NULL, QP_CLI_STR, &g->chat_template,
                                 .arg = "NAME|FILE",
                                 .help = "chat template: a known name or a Jinja file (default:\nthe model's own)"};
    rows[n++] = (qp_cli_opt){"--no-repack", "-nr", QP_CLI_FLAG, &g->no_repack,
                             .help = "read the weights where the file holds them: no Q4_K / Q6_K\nrepack or F16 copy at load (less memory, slower; the same output)"};
    rows[n++] = (qp_cli_opt)QP_CLI_THREADS(&g->threads, 0);
    return n;
}

void qp_cli_gen_defaults(qp_cli_gen_args *g, unsigned used_by) {
    memset(g, 0, sizeof *g);
    g->used_by = used_by;
    g->n_predict = -1;
    g->seed = -1;
    qp_sampler_params_default(&g->sampler);
}

/* A seed nobody chose: getrandom, else the clock and the pid. */
static uint64_t random_seed(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v >> 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) >> 1;
}

int qp_cli_gen_finish(const char *cmd, qp_cli_gen_args *g, const char *positional) {
    if (g->model && positional)
        return qp_cli_usage_error("%s: the model is given twice ('%s' and -m '%s')", cmd, positional,
                                  g->model);
    if (!g->model) g->model = positional;
    if (!g->model) return qp_cli_usage_error("%s: no MODEL given (quantpack %s MODEL or -m MODEL)", cmd, cmd);
    if (g->sampler.top_p <= 0)
        return qp_cli_usage_error("%s: --top-p wants a number in (0, 1] (1 = off), not 0", cmd);
    if (g->seed < 0) {
        g->sampler.seed = random_seed();
        fprintf(stderr, "quantpack %s: seed %" PRIu64 " (random; -s S repeats it)\n", cmd, g->sampler.seed);
    } else {
        g->sampler.seed = (uint64_t)g->seed;
    }
    return QP_CLI_RUN;
}

qp_runtime_opts qp_cli_gen_runtime_opts(const qp_cli_gen_args *g) {
    qp_runtime_opts ro = {.n_threads = (int)g->threads, .n_ctx = g->ctx, .exact = g->exact,
                          .no_repack = g->no_repack};
    return ro;
}

int qp_cli_gen_chat_template(const qp_cli_gen_args *g, char **text) {
    *text = NULL;
    const char *t = g->chat_template;
    if (!t || strchr(t, '/') == NULL) return 0; /* a built-in name (or none) */
    qp_err e = {0};
    size_t len = 0;
    if (qp_file_read_all(t, (size_t)1 << 20, text, &len, &e) != QP_OK) return qp_cli_fail(&e);
    return 0;
}
