/* Command-line front end: the only code that prints or chooses exit codes. */
#ifndef QP_CLI_H
#define QP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "quantpack/quantpack.h"
#include "quantpack/sampler.h"

/* Exit codes scripts can rely on (README "Exit codes"). */
enum {
    QP_EXIT_OK = 0,
    QP_EXIT_VERIFY_FAILED = 1, /* a check ran and failed (verify thresholds, hashes) */
    QP_EXIT_USAGE = 2,         /* bad command line */
    QP_EXIT_BAD_INPUT = 3,     /* input not recognised, corrupt, unsupported or over a limit */
    QP_EXIT_IO = 4,            /* I/O error or out of memory */
    QP_EXIT_INTERNAL = 5,
};

/* Maps a library status to an exit code. */
int qp_cli_exit_code(qp_status s);
/* Prints "quantpack: <msg>" (or the status name) to stderr and returns the exit code. */
int qp_cli_fail(const qp_err *e);
/* Prints "quantpack: <fmt>" to stderr and returns QP_EXIT_USAGE. */
int qp_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* True when argv[i] is -h or --help. */
bool qp_cli_is_help(const char *arg);

/* Option values: true when the whole of s is a base-10 integer in [lo, hi] / a number (not NaN). */
bool qp_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool qp_cli_parse_float(const char *s, float *out);
bool qp_cli_parse_double(const char *s, double *out);
/* "1 403 407" -> *ids (qp_malloc'd, caller frees), non-negative int32 separated by any run of
 * the characters of seps. False on a bad number or no memory (nothing allocated). */
bool qp_cli_parse_ids(const char *s, const char *seps, int32_t **ids, int64_t *n);
/* Whether a prompt gets BOS: the vocabulary's add_bos; GGUF SPM without
 * tokenizer.ggml.add_bos_token adds it (as llama.cpp). */
bool qp_cli_add_bos(const qp_model *m);
/* Before a command writes path: the output rule (core.h qp_output_check: never over an input,
 * never an existing output without force, only regular files or a previous package), then the
 * partial outputs of killed runs removed (with a note on stderr). 0, or the exit code after the
 * message. */
int qp_cli_prepare_output(const char *path, const qp_output_rule *rule);
/* For commands that write outputs: SIGINT, SIGTERM and SIGHUP remove every partial output, then
 * end the process as the signal would (exit status 128 + N); SIGXFSZ is ignored so a write past
 * the size limit fails and cleans up. Call before starting any thread. */
void qp_cli_clean_up_on_signals(void);
/* Monotonic clock in seconds (durations only). */
double qp_cli_now_s(void);

/* The model options of the commands that run a model (run, run --task, verify), parsed by
 * qp_cli_parse_common. The command fills cmd, takes and the defaults; given values overwrite them. */
enum {
    QP_CLI_OPT_PROMPT = 1 << 0,    /* -p/--prompt TEXT, --ids "1 403 ...", --no-bos */
    QP_CLI_OPT_TOKENIZER = 1 << 1, /* --tokenizer FILE */
    QP_CLI_OPT_THREADS = 1 << 2,   /* --threads/-t N (1..1024) */
    QP_CLI_OPT_GENERATE = 1 << 3,  /* -n/--n-predict N (0..2^24), --ctx N (1..2^20), --temp/
                                      --temperature, --top-k, --top-p, --repeat-penalty,
                                      --repeat-last-n, --seed */
};
typedef struct qp_cli_model_opts {
    const char *cmd; /* message prefix: "<cmd>: bad --top-k '...'" */
    unsigned takes;  /* QP_CLI_OPT_* */
    const char *prompt, *ids;
    bool no_bos;
    qp_open_opts open; /* tokenizer_path */
    int64_t threads, n_new, ctx;
    qp_sampler_params sampler;
} qp_cli_model_opts;
/* Parses argv[*i] when it is one of the options o->takes names: returns 1 with *i on its last
 * word; 0 when it is not one of them; -1 after printing the usage error (exit QP_EXIT_USAGE). */
int qp_cli_parse_common(int argc, char **argv, int *i, qp_cli_model_opts *o);

/* Commands: argv[0] is the command name. */
int qp_cmd_inspect(int argc, char **argv);
int qp_cmd_convert(int argc, char **argv);
int qp_cmd_tokenize(int argc, char **argv);
int qp_cmd_run(int argc, char **argv);
int qp_cmd_verify(int argc, char **argv);
int qp_cmd_encode(int argc, char **argv);
int qp_cmd_decode(int argc, char **argv);
/* RDRR (cli/cmd_rdrr.c, cli/cmd_serve.c) */
int qp_cmd_gguf_to_rdrr(int argc, char **argv);
int qp_cmd_convert_rdrr(int argc, char **argv);
int qp_cmd_keygen(int argc, char **argv);
int qp_cmd_verify_signature(int argc, char **argv);
int qp_cmd_serve(int argc, char **argv);
/* Trillim (cli/cmd_trillim.c) */
int qp_cmd_trillim_quantize(int argc, char **argv);
int qp_cmd_inference(int argc, char **argv);
int qp_cmd_convert_trlm(int argc, char **argv);

/* .bullet (cli/cmd_bullet.c) */
int qp_cmd_bullet_pack(int argc, char **argv);
int qp_cmd_bullet_convert(int argc, char **argv);
int qp_cmd_run_task(int argc, char **argv);

#endif
