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
/* The same for a status and a message made here: qp_cli_error(QP_ERR_NOMEM, "out of memory"). */
int qp_cli_error(qp_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Flushes stdout: QP_EXIT_OK, or QP_EXIT_IO after the message "cannot write standard output". */
int qp_cli_flush_stdout(void);
/* "quantpack: warning: OUT was written without a tokenizer ..." on stderr. */
void qp_cli_warn_no_tokenizer(const char *out);
/* The source's problems (ids the reader ignored, ...) as warnings before a conversion: what
 * the output will not carry is never dropped without a word. */
void qp_cli_warn_problems(const qp_model *m);
/* Prints "quantpack: <fmt>" to stderr and returns QP_EXIT_USAGE. */
int qp_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* True when argv[i] is -h or --help. */
bool qp_cli_is_help(const char *arg);

/* ---- options (cli/cli_args.c): one table-driven parser for every command ------------------
 * A command lists its options as an array of qp_cli_opt and its positional arguments in a
 * qp_cli_cmd, then calls qp_cli_parse once. Options are written `--name VALUE` or
 * `--name=VALUE` (an alias such as -n: `-n VALUE`); a flag takes no value; `--` ends the options.
 * Numbers are parsed strictly: the whole word, base 10, inside the row's range, no overflow
 * (99999999999999999999 is refused, never clamped); floats are finite. --help/-h prints the
 * usage and the option table. The last of repeated options wins, except QP_CLI_LIST rows, which
 * collect every occurrence. */
typedef enum qp_cli_kind {
    QP_CLI_FLAG,  /* bool: set to true */
    QP_CLI_STR,   /* const char *: the word as given */
    QP_CLI_OPT_STR, /* const char *: the next word unless it starts with '-' ("" when absent) */
    QP_CLI_I64,   /* int64_t in [lo, hi] */
    QP_CLI_I32,   /* int32_t in [lo, hi] (within int32) */
    QP_CLI_U64,   /* uint64_t, any value (seeds) */
    QP_CLI_BYTES, /* uint64_t byte count >= lo; suffix K, M or G (x1024^k), then B or iB */
    QP_CLI_F32,   /* float in [flo, fhi] */
    QP_CLI_F64,   /* double in [flo, fhi] */
    QP_CLI_REST,  /* qp_cli_rest: every later word, as given (inference --config ...) */
    QP_CLI_LIST,  /* qp_cli_list: every occurrence's word, in order (repeatable option) */
} qp_cli_kind;

#define QP_CLI_LIST_MAX 64
typedef struct qp_cli_list {
    const char *v[QP_CLI_LIST_MAX];
    int n;
} qp_cli_list;

typedef struct qp_cli_rest {
    char **argv;
    int argc;
} qp_cli_rest;

typedef struct qp_cli_opt {
    const char *name;  /* "--threads"; in a field table (qp_cli_parse_value) the field's name */
    const char *alias; /* "-t", or NULL */
    qp_cli_kind kind;
    void *dst;         /* of the type kind names */
    int64_t lo, hi;    /* QP_CLI_I64 / I32; BYTES: lo only */
    double flo, fhi;   /* QP_CLI_F32 / F64 (both 0: any finite value) */
    unsigned used_by;  /* sub-command bits (convert --to X, run --task); 0 = every one */
    const char *arg;   /* value name in the help ("N", "FILE") */
    const char *help;  /* one or more lines, '\n' separated */
} qp_cli_opt;

/* The one range of --threads in every command (inference's num_threads too, where 0 = auto):
 * the runtime's thread pool takes at most 1024. */
#define QP_CLI_MAX_THREADS 1024
#define QP_CLI_THREADS(dst, used)                                                              \
    {"--threads", "-t", QP_CLI_I64, (dst), .lo = 1, .hi = QP_CLI_MAX_THREADS, .used_by = (used), \
     .arg = "N", .help = "threads, 1..1024 (default: all cores); results do not depend on it"}

typedef struct qp_cli_cmd {
    const char *name;     /* message prefix: "convert --to rdrr" */
    const char *usage;    /* --help: printed before the option list */
    const char *more;     /* --help: printed after it (or NULL) */
    const qp_cli_opt *opts;
    int n_opts;
    unsigned accept;      /* only rows with used_by & accept (or used_by 0); 0 = every row */
    const char **pos;     /* positional arguments, in order (NULL: none taken) */
    int max_pos;
    int *n_pos;           /* how many were given (may be NULL) */
    const char *pos_hint; /* appended to "unexpected argument 'x'" (may be NULL) */
} qp_cli_cmd;

/* What qp_cli_parse returns when the command should go on. */
#define QP_CLI_RUN (-1)

/* Parses argv[1..argc-1] into the rows' destinations; given (n_opts entries, may be NULL) records
 * which rows were on the command line. Returns QP_CLI_RUN, or an exit code after printing:
 * QP_EXIT_OK for --help (on stdout), QP_EXIT_USAGE with one message for an unknown option, a
 * missing or malformed value, or a surplus argument. */
int qp_cli_parse(const qp_cli_cmd *c, int argc, char **argv, bool *given);
/* Prints the usage text, the option table and the closing text. */
void qp_cli_help(const qp_cli_cmd *c, FILE *f);
/* Parses one value for row o (its kind and range); false with the expected form in why
 * ("an integer in 1..1024"). Also used for positional field tables (inference --config). */
bool qp_cli_parse_value(const qp_cli_opt *o, const char *s, char *why, size_t why_cap);
/* Strict base-10 numbers: the whole of s, no overflow, inside the range; floats finite. */
bool qp_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool qp_cli_parse_f64(const char *s, double lo, double hi, double *out);

/* "1 403 407" -> *ids (qp_malloc'd, caller frees), non-negative int32 separated by any run of
 * the characters of seps. QP_ERR_ARG on a bad number, QP_ERR_NOMEM; nothing allocated then. */
qp_status qp_cli_parse_ids(const char *s, const char *seps, int32_t **ids, int64_t *n, qp_err *e);
/* Before a command writes path: the output rule (core.h qp_output_check: never over an input,
 * never an existing output without force, only regular files or a previous package of kind for a
 * folder output, kind NULL for a file), then the partial outputs of killed runs removed (with a
 * note on stderr). inputs: n paths the command reads, NULL entries skipped. 0, or the exit code
 * after the message. */
#define QP_CLI_MAX_INPUTS 8
int qp_cli_prepare_output(const char *path, bool force, const qp_outdir_kind *kind,
                          const char *const *inputs, size_t n);
/* For commands that write outputs: SIGINT, SIGTERM and SIGHUP remove every partial output, then
 * end the process as the signal would (exit status 128 + N); SIGXFSZ is ignored so a write past
 * the size limit fails and cleans up. Call before starting any thread. */
void qp_cli_clean_up_on_signals(void);
/* Monotonic clock in seconds (durations only). */
double qp_cli_now_s(void);

/* The --dry-run table of a conversion plan (converters/recipe.h) on stdout: tensor, shape, source
 * and target encoding, bytes, action; then the totals (cli/cmd_convert.c). */
struct qp_plan;
void qp_cli_print_plan(const struct qp_plan *p);
/* The end of a target's --dry-run: s is its plan function's status; prints *plan (then frees it)
 * or the error, closes m; the exit code. */
int qp_cli_dry_run_done(qp_model *m, qp_status s, struct qp_plan *plan, qp_err *e);

/* The conversion progress line of every convert target: "[k/n] name  pct%  MB/s" rewritten in
 * place on stderr, only when stderr is a terminal and the run has lasted a second (short runs and
 * logs stay quiet; QP_PROGRESS_AFTER=SECONDS, 0..60, changes that second: a test hook); a newline
 * ends it after the last tensor. qp_cli_progress_start first. */
typedef struct qp_cli_progress {
    double t0, last, after;
    bool shown, tty;
} qp_cli_progress;
void qp_cli_progress_start(qp_cli_progress *p);
void qp_cli_progress_show(qp_cli_progress *p, int64_t k, int64_t n, const char *name, uint64_t done,
                          uint64_t total);
/* qp_cli_progress_show for the converters' callbacks (ud: the qp_cli_progress). */
void qp_cli_progress_cb(void *ud, int64_t k, int64_t n, const char *name, uint64_t done, uint64_t total);
/* Ends a line left open by a failed run. */
void qp_cli_progress_end(qp_cli_progress *p);

/* ---- generation options (cli/cli_gen.c): run, chat and serve take them as llama.cpp's tools
 * do: -m MODEL, -c/--ctx-size, -s/--seed (-1 or absent: random, shown on stderr), -n -1 (until
 * EOS or the context end), -t, -f FILE, sampling values checked (temperature >= 0,
 * 0 < top_p <= 1, top_k >= 0, repeat penalty > 0), --chat-template NAME|FILE. */
enum { QP_GEN_OPT_FILE = 1u << 0, QP_GEN_OPT_TEMPLATE = 1u << 1 };
#define QP_CLI_GEN_MAX_ROWS 16
typedef struct qp_cli_gen_args {
    const char *model, *file, *chat_template;
    qp_open_opts open; /* tokenizer_path */
    int64_t threads, ctx, n_predict, seed;
    bool exact; /* --exact: the exact path instead of the fast one (runtime.md "Fast path") */
    bool no_repack; /* --no-repack: no load-time copies (runtime.md "Repacked rows") */
    qp_sampler_params sampler;
    unsigned used_by; /* the used_by bits of the sampling rows */
} qp_cli_gen_args;
/* Defaults: n_predict -1, seed -1 (random), sampler defaults (greedy). */
void qp_cli_gen_defaults(qp_cli_gen_args *g, unsigned used_by);
/* Writes the shared rows (QP_GEN_OPT_* in what add -f and --chat-template) into rows (room for
 * QP_CLI_GEN_MAX_ROWS) and returns how many. */
int qp_cli_gen_opts(qp_cli_gen_args *g, unsigned what, qp_cli_opt *rows);
/* After qp_cli_parse: the model from -m or the positional argument (not both), top_p > 0, the
 * seed chosen (a random one is printed on stderr). QP_CLI_RUN or the exit code after a message. */
int qp_cli_gen_finish(const char *cmd, qp_cli_gen_args *g, const char *positional);
qp_runtime_opts qp_cli_gen_runtime_opts(const qp_cli_gen_args *g);
/* --chat-template NAME|FILE: a value with a '/' is a file whose text is put in *text (caller
 * frees with qp_free; at most 1 MiB), else a built-in name (*text NULL: use g->chat_template).
 * 0, or the exit code after the message. */
int qp_cli_gen_chat_template(const qp_cli_gen_args *g, char **text);

/* run and run --task: cli/cmd_run.c parses once, then runs text generation or hands a task
 * head to cli/cmd_bullet.c. Rows' used_by bits: */
enum { QP_RUN_GEN = 1u << 0, QP_RUN_TASK = 1u << 1 };
typedef struct qp_cli_run_args {
    const char *path, *task, *prompt, *ids;
    bool no_bos, print_ids;
    qp_cli_gen_args g; /* model (path), open, threads, n_predict, ctx, sampler */
} qp_cli_run_args;

/* convert (every target), bullet-pack and gguf-to-rdrr: cli/cmd_convert.c parses once with one
 * table, then the target's function runs. Rows' used_by bits: */
enum { QP_TO_GGUF = 1u << 0, QP_TO_RDRR = 1u << 1, QP_TO_TRLM = 1u << 2, QP_TO_BULLET = 1u << 3,
       QP_TO_SAFETENSORS = 1u << 6 };
typedef struct qp_cli_convert_args {
    const char *cmd; /* message prefix */
    const char *src, *out, *to, *quant, *tokenizer;
    int64_t threads;
    bool dry_run, allow_requantize, allow_nonfinite;
    const char *sign, *model_id; /* rdrr */
    bool gguf_only;              /* gguf-to-rdrr: SRC must be a GGUF file (bytes kept) */
    char *src_folder;            /* owned: the Hugging Face folder SRC named a file of (src) */
    uint64_t shard_size;
    bool force, no_inline, quiet; /* force: -f/--force (--replace), every target */
    const char *lora, *save_manifest;        /* trlm */
    bool adapter_only;                       /* trlm */
    const char *heads, *head_weights, *name; /* bullet */
    bool checksum;
    /* gguf: llama-quantize's importance matrix and per-tensor options */
    const char *imatrix, *output_tensor_type, *token_embedding_type;
    bool leave_output_tensor, pure;
    qp_cli_list tensor_types; /* PATTERN=TYPE */
} qp_cli_convert_args;

/* Commands: argv[0] is the command name. */
int qp_cmd_inspect(int argc, char **argv);
int qp_cmd_convert(int argc, char **argv);
int qp_cmd_tokenize(int argc, char **argv);
int qp_cmd_run(int argc, char **argv);
int qp_cmd_verify(int argc, char **argv);
/* convert through formats and back, prove each hop (cli/cmd_roundtrip.c, cli/roundtrip.md) */
int qp_cmd_roundtrip(int argc, char **argv);
int qp_cmd_encode(int argc, char **argv);
int qp_cmd_decode(int argc, char **argv);
/* RDRR (cli/cmd_rdrr.c, cli/cmd_serve.c) */
int qp_cmd_gguf_to_rdrr(int argc, char **argv);
int qp_cli_convert_rdrr(const qp_cli_convert_args *a);
int qp_cmd_keygen(int argc, char **argv);
int qp_cmd_verify_signature(int argc, char **argv);
int qp_cmd_serve(int argc, char **argv);
int qp_cmd_chat(int argc, char **argv);
/* Trillim (cli/cmd_trillim.c; the inference binaries share cli/inference_session.c) */
int qp_cmd_trillim_quantize(int argc, char **argv);
int qp_cmd_inference(int argc, char **argv);          /* cli/cmd_inference.c (protocol v1) */
int qp_cmd_trillim_inference(int argc, char **argv);  /* cli/cmd_trillim_inference.c */
int qp_cli_convert_trlm(const qp_cli_convert_args *a);
/* convert --to safetensors (cli/cmd_safetensors.c). */
int qp_cli_convert_safetensors(const qp_cli_convert_args *a);

/* .bullet (cli/cmd_bullet.c) */
int qp_cmd_bullet_pack(int argc, char **argv);
int qp_cli_convert_bullet(const qp_cli_convert_args *a);
int qp_cli_run_task(const qp_cli_run_args *a);

#endif
