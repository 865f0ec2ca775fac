/* Command-line front end: the only code that prints or chooses exit codes. */
#ifndef QP_CLI_H
#define QP_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "quantpack/quantpack.h"

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
