/* quantpack: one multi-call binary. `quantpack CMD ...`, or a companion name (a link to this
 * binary such as trillim-quantize) dispatches on argv[0]. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

typedef int (*cmd_fn)(int argc, char **argv);

/* writes: the command writes output files (partial outputs are removed on SIGINT/TERM/HUP) */
static const struct {
    const char *name;
    cmd_fn fn;
    bool writes;
    const char *summary;
} k_commands[] = {
    {"inspect", qp_cmd_inspect, false, "describe any supported model file or directory"},
    {"convert", qp_cmd_convert, true, "convert a model to GGUF (Q4_K_M, Q8_0, F16, I2_S, TQ2_0, ...)"},
    {"tokenize", qp_cmd_tokenize, false, "print the token ids of a text"},
    {"run", qp_cmd_run, false, "generate text with the reference runtime"},
    {"chat", qp_cmd_chat, false, "chat with a model (its chat template, line editing, history)"},
    {"verify", qp_cmd_verify, true, "compare an output model with its source (parity receipt)"},
    {"roundtrip", qp_cmd_roundtrip, true, "convert through formats and back, prove every hop"},
    {"encode", qp_cmd_encode, true, "f32 rows -> encoded rows (encode --list: every encoding)"},
    {"decode", qp_cmd_decode, true, "encoded rows -> f32 rows"},
    {"serve", qp_cmd_serve, false, "OpenAI-compatible API for a model; an RDRR folder's files too"},
    {"keygen", qp_cmd_keygen, true, "write an Ed25519 key pair for signing manifests"},
    {"verify-signature", qp_cmd_verify_signature, false, "check an RDRR manifest signature"},
};

/* Companion executables: argv[0] basename -> handler (added by the format issues). */
static const struct {
    const char *name;
    cmd_fn fn;
    bool writes;
    const char *summary;
} k_companions[] = {
    {"quantpack-inspect", qp_cmd_inspect, false, NULL},
    {"bullet-pack", qp_cmd_bullet_pack, true, "pack a model as a .bullet file for bullet-core"},
    {"gguf-to-rdrr", qp_cmd_gguf_to_rdrr, true, "package a GGUF file as an RDRR directory"},
    {"trillim-quantize", qp_cmd_trillim_quantize, true, "Trillim SDK v1 quantizer (TRLM)"},
    {"inference", qp_cmd_inference, false, "Trillim protocol v1 on stdin/stdout"},
    {"trillim-inference", qp_cmd_trillim_inference, false,
     "the current Trillim SDK's key=value protocol on stdin/stdout"},
};

static void usage(FILE *f) {
    fprintf(f, "quantpack %s: convert, package and verify language models\n\n"
               "usage: quantpack COMMAND [ARGS...]   (quantpack COMMAND --help for details)\n\n"
               "commands:\n", QP_VERSION_STRING);
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\ncompanion names (links to this program; NAME --help):\n");
    for (size_t i = 0; i < sizeof k_companions / sizeof k_companions[0]; i++)
        if (k_companions[i].summary)
            fprintf(f, "  %-16s %s\n", k_companions[i].name, k_companions[i].summary);
    fprintf(f, "\nquantpack --version, NAME --version: the version\n");
    fprintf(f, "\nexit codes: 0 ok, 1 verification failed, 2 usage error, 3 bad or unsupported "
               "input, 4 I/O error or out of memory, 5 internal error\n");
}

int main(int argc, char **argv) {
    /* Test hook (tests/e2e/test_cli_options.sh): QP_FAIL_ALLOC_AFTER=N lets N allocations through
     * qp_malloc succeed and fails the rest, so each command's out-of-memory path can be run. */
    const char *fail_after = getenv("QP_FAIL_ALLOC_AFTER");
    int64_t n_ok;
    if (fail_after && qp_cli_parse_i64(fail_after, 0, LONG_MAX, &n_ok)) qp_alloc_fail_after((long)n_ok);
    const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
    base = base ? base + 1 : (argc > 0 ? argv[0] : "quantpack");
    if (argc == 2 && strcmp(argv[1], "--version") == 0) { /* every name answers it */
        if (strcmp(base, "quantpack") == 0) printf("quantpack %s\n", QP_VERSION_STRING);
        else printf("%s (quantpack) %s\n", base, QP_VERSION_STRING);
        return qp_cli_flush_stdout();
    }
    for (size_t i = 0; i < sizeof k_companions / sizeof k_companions[0]; i++)
        if (strcmp(base, k_companions[i].name) == 0) {
            if (k_companions[i].writes) qp_cli_clean_up_on_signals();
            return k_companions[i].fn(argc, argv);
        }
    if (argc < 2) {
        usage(stderr);
        return QP_EXIT_USAGE;
    }
    if (qp_cli_is_help(argv[1])) {
        usage(stdout);
        return QP_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(argv[1], k_commands[i].name) == 0) {
            if (k_commands[i].writes) qp_cli_clean_up_on_signals();
            return k_commands[i].fn(argc - 1, argv + 1);
        }
    return qp_cli_usage_error("unknown command '%s'", argv[1]);
}
