/* RDRR commands: the gguf-to-rdrr companion, `convert --to rdrr`, `keygen` and
 * `verify-signature` (readers/rdrr.md). */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "cli/cli.h"
#include "converters/convert_rdrr.h"
#include "converters/lora_adapter.h"
#include "core/hash.h"
#include "writers/rdrr_writer.h"

static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || s[0] == '-') return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024ull * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B') end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    if (*end || v > UINT64_MAX / mul) return false;
    *out = (uint64_t)v * mul;
    return true;
}

typedef struct rdrr_args {
    const char *src, *out, *quant, *sign, *tok, *model_id;
    uint64_t shard_size;
    bool replace, no_inline, requant, quiet;
} rdrr_args;

static int run_convert(const rdrr_args *a, bool passthrough) {
    qp_err e = {0};
    uint8_t sk[64];
    qp_rdrr_convert_opts o;
    memset(&o, 0, sizeof o);
    o.passthrough = passthrough;
    o.model_id = a->model_id;
    o.allow_requantize = a->requant;
    o.w.shard_size = a->shard_size;
    o.w.replace = a->replace;
    o.w.no_inline_tensors = a->no_inline;
    if (!passthrough) {
        o.quant = qp_quant_from_name(a->quant);
        if (o.quant == QP_QUANT_COUNT)
            return qp_cli_usage_error("unknown --quant '%s' (Q4_K_M, Q6_K, Q8_0, F16, BF16, F32)", a->quant);
    }
    if (a->sign) {
        if (qp_rdrr_key_read_secret(a->sign, sk, &e) != QP_OK) return qp_cli_fail(&e);
        o.w.sign_sk = sk;
    }
    qp_open_opts oo = {0};
    oo.tokenizer_path = a->tok;
    qp_model *m = NULL;
    double t0 = qp_cli_now_s();
    if (qp_model_open(a->src, &oo, &m, &e) != QP_OK) {
        sodium_memzero(sk, sizeof sk);
        return qp_cli_fail(&e);
    }
    if (passthrough && m->format != QP_FORMAT_GGUF) {
        qp_model_close(m);
        sodium_memzero(sk, sizeof sk);
        return qp_cli_usage_error("gguf-to-rdrr: %s is not a GGUF file (%s)", a->src,
                                  qp_format_name(m->format));
    }
    qp_rdrr_convert_result r;
    memset(&r, 0, sizeof r);
    qp_status s = qp_convert_rdrr(m, &o, a->out, &r, &e);
    sodium_memzero(sk, sizeof sk);
    qp_model_close(m);
    if (s != QP_OK) return qp_cli_fail(&e);
    if (!a->quiet) {
        double el = qp_cli_now_s() - t0;
        fprintf(stderr, "quantpack: wrote %s: %lld tensors, %d shard%s, %.2f MB in %.2f s%s%s\n",
                a->out, (long long)r.n_tensors, r.n_shards, r.n_shards == 1 ? "" : "s",
                (double)r.total_bytes / 1e6, el, a->sign ? ", signed" : "",
                r.n_padded_rows ? " (some rows zero-padded to 256: layout \"row\")" : "");
        fprintf(stderr, "quantpack: tokenizer: %s\n", r.tokenizer_note ? r.tokenizer_note : "-");
    }
    return QP_EXIT_OK;
}

/* The options both RDRR commands take: 1 when argv[*i] is one (*i on its last word), 0 when not,
 * -1 after a usage error. */
static int parse_common(int argc, char **argv, int *i, rdrr_args *a) {
    const char *x = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(x, "--replace") == 0 || strcmp(x, "--force") == 0) a->replace = true;
    else if (strcmp(x, "--no-inline-tensors") == 0) a->no_inline = true;
    else if (strcmp(x, "--quiet") == 0) a->quiet = true;
    else if (!v) return 0;
    else if (strcmp(x, "--sign") == 0) a->sign = argv[++*i];
    else if (strcmp(x, "--model-id") == 0) a->model_id = argv[++*i];
    else if (strcmp(x, "--tokenizer") == 0) a->tok = argv[++*i];
    else if (strcmp(x, "--shard-size") == 0) {
        if (!parse_size(v, &a->shard_size) || a->shard_size < QP_RDRR_MIN_SHARD) {
            qp_cli_usage_error("--shard-size wants a byte count >= %llu (suffix K, M, G allowed), "
                               "not '%s'", (unsigned long long)QP_RDRR_MIN_SHARD, v);
            return -1;
        }
        ++*i;
    } else return 0;
    return 1;
}

static const char k_common_help[] =
    "  --shard-size BYTES   shard size (default 64M; K/M/G suffixes; minimum 4096)\n"
    "  --sign KEY           sign manifest.json with an Ed25519 key from `quantpack keygen`\n"
    "  --model-id ID        modelId (default: the source name)\n"
    "  --no-inline-tensors  tensor locations only in tensors.json (default: both)\n"
    "  --replace            replace an existing non-empty OUT\n";

int qp_cmd_gguf_to_rdrr(int argc, char **argv) {
    rdrr_args a;
    memset(&a, 0, sizeof a);
    for (int i = 1; i < argc; i++) {
        if (qp_cli_is_help(argv[i])) {
            printf("usage: gguf-to-rdrr MODEL.gguf OUT [--shard-size BYTES] [--sign KEY]\n\n"
                   "Packages a GGUF file as an RDRR directory for DOPPLER: every tensor's bytes,\n"
                   "type and name are kept exactly (Q4_K, Q6_K, F16, ... pass through).\n\n%s",
                   k_common_help);
            return QP_EXIT_OK;
        }
        int r = parse_common(argc, argv, &i, &a);
        if (r < 0) return QP_EXIT_USAGE;
        if (r > 0) continue;
        if (argv[i][0] == '-' && argv[i][1]) return qp_cli_usage_error("gguf-to-rdrr: unknown or incomplete option '%s'", argv[i]);
        if (!a.src) a.src = argv[i];
        else if (!a.out) a.out = argv[i];
        else return qp_cli_usage_error("gguf-to-rdrr: unexpected argument '%s'", argv[i]);
    }
    if (!a.src || !a.out) return qp_cli_usage_error("usage: gguf-to-rdrr MODEL.gguf OUT [--shard-size BYTES] [--sign KEY]");
    return run_convert(&a, true);
}

int qp_cmd_convert_rdrr(int argc, char **argv) {
    rdrr_args a;
    memset(&a, 0, sizeof a);
    for (int i = 1; i < argc; i++) {
        const char *x = argv[i];
        bool has_val = i + 1 < argc;
        if (qp_cli_is_help(x)) {
            printf("usage: quantpack convert SRC --to rdrr --quant Q4_K_M|Q6_K|Q8_0|F16|BF16|F32 -o OUT\n"
                   "                         [options]\n\n"
                   "Writes an RDRR directory for DOPPLER; source names are kept, rows whose length\n"
                   "is not a multiple of 256 are zero-padded for Q4_K (layout \"row\").\n"
                   "--quant keep: copy every tensor's bytes (as gguf-to-rdrr).\n\n%s"
                   "  --tokenizer FILE     tokenizer for sources without one (llama2.c)\n"
                   "  --allow-requantize   quantized sources may be quantized again\n",
                   k_common_help);
            return QP_EXIT_OK;
        }
        int r = parse_common(argc, argv, &i, &a);
        if (r < 0) return QP_EXIT_USAGE;
        if (r > 0) continue;
        if (strcmp(x, "--to") == 0 && has_val) {
            if (strcmp(argv[++i], "rdrr") != 0) return qp_cli_usage_error("convert: --to %s is not rdrr", argv[i]);
        } else if ((strcmp(x, "--quant") == 0 || strcmp(x, "-q") == 0) && has_val) a.quant = argv[++i];
        else if ((strcmp(x, "-o") == 0 || strcmp(x, "--output") == 0) && has_val) a.out = argv[++i];
        else if (strcmp(x, "--allow-requantize") == 0) a.requant = true;
        else if (strcmp(x, "--threads") == 0 && has_val) i++; /* accepted; RDRR encodes on one thread */
        else if (x[0] == '-' && x[1]) return qp_cli_usage_error("convert: unknown or incomplete option '%s'", x);
        else if (!a.src) a.src = x;
        else return qp_cli_usage_error("convert: unexpected argument '%s'", x);
    }
    if (!a.src) return qp_cli_usage_error("convert: no source model given");
    if (!a.out) return qp_cli_usage_error("convert: -o OUT is required");
    if (qp_lora_is_adapter_dir(a.src)) {
        qp_lora_opts lo;
        memset(&lo, 0, sizeof lo);
        lo.name = a.model_id;
        lo.eos_token_id = -1;
        lo.w.shard_size = a.shard_size;
        lo.w.replace = a.replace;
        lo.w.no_inline_tensors = a.no_inline;
        qp_err e = {0};
        uint8_t sk[64];
        if (a.sign) {
            if (qp_rdrr_key_read_secret(a.sign, sk, &e) != QP_OK) return qp_cli_fail(&e);
            lo.w.sign_sk = sk;
        }
        qp_lora_result lr;
        qp_status s = qp_lora_convert(a.src, a.out, &lo, &lr, &e);
        sodium_memzero(sk, sizeof sk);
        if (s != QP_OK) return qp_cli_fail(&e);
        if (!a.quiet)
            fprintf(stderr, "quantpack: wrote LoRA adapter %s: %lld tensors, rank %lld, alpha %g, "
                            "%lld layers (manifest.json + " QP_LORA_STANDALONE_FILE ")\n", a.out,
                    (long long)lr.n_tensors, (long long)lr.rank, lr.alpha, (long long)lr.n_layers);
        return QP_EXIT_OK;
    }
    if (!a.quant) return qp_cli_usage_error("convert: --quant is required (Q4_K_M, Q6_K, Q8_0, F16, BF16, F32, keep)");
    bool keep = strcmp(a.quant, "keep") == 0;
    return run_convert(&a, keep);
}

int qp_cmd_keygen(int argc, char **argv) {
    if (argc != 2 || qp_cli_is_help(argv[1])) {
        FILE *f = argc == 2 ? stdout : stderr;
        fprintf(f, "usage: quantpack keygen OUT.key\n\nWrites an Ed25519 key pair: OUT.key (secret, "
                   "mode 0600, 128 hex digits) and OUT.key.pub (64 hex digits).\n");
        return argc == 2 ? QP_EXIT_OK : QP_EXIT_USAGE;
    }
    qp_err e = {0};
    if (qp_rdrr_keygen(argv[1], &e) != QP_OK) return qp_cli_fail(&e);
    fprintf(stderr, "quantpack: wrote %s and %s.pub\n", argv[1], argv[1]);
    return QP_EXIT_OK;
}

int qp_cmd_verify_signature(int argc, char **argv) {
    const char *dir = NULL, *pub = NULL;
    for (int i = 1; i < argc; i++) {
        if (qp_cli_is_help(argv[i])) {
            printf("usage: quantpack verify-signature RDRR_DIR [--pubkey KEY.pub]\n\n"
                   "Checks RDRR_DIR/manifest.json.sig (Ed25519 over the exact bytes of manifest.json);\n"
                   "with --pubkey the signer must be that key. Exit 0 valid, 1 invalid.\n");
            return QP_EXIT_OK;
        }
        if (strcmp(argv[i], "--pubkey") == 0 && i + 1 < argc) pub = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) return qp_cli_usage_error("verify-signature: unknown option '%s'", argv[i]);
        else if (!dir) dir = argv[i];
        else return qp_cli_usage_error("verify-signature: unexpected argument '%s'", argv[i]);
    }
    if (!dir) return qp_cli_usage_error("usage: quantpack verify-signature RDRR_DIR [--pubkey KEY.pub]");
    qp_err e = {0};
    uint8_t pk[32], signer[32];
    if (pub && qp_rdrr_key_read_public(pub, pk, &e) != QP_OK) return qp_cli_fail(&e);
    if (qp_rdrr_verify_signature(dir, pub ? pk : NULL, signer, &e) != QP_OK) return qp_cli_fail(&e);
    char hex[65];
    qp_hex_encode(signer, 32, hex);
    printf("signature ok: %s/manifest.json signed by ed25519:%s%s\n", dir, hex,
           pub ? " (the given key)" : " (key not pinned: pass --pubkey to require one)");
    return QP_EXIT_OK;
}
