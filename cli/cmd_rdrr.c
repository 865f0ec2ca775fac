/* RDRR commands: the gguf-to-rdrr companion, `convert --to rdrr`, `keygen` and
 * `verify-signature` (readers/rdrr.md). */
#include <string.h>
#include <strings.h>

#include <sodium.h>

#include "cli/cli.h"
#include "converters/convert_rdrr.h"
#include "converters/lora_adapter.h"
#include "core/hash.h"
#include "writers/rdrr_writer.h"

static void on_progress(void *ud, int64_t k, int64_t n, const char *name, uint64_t src_done,
                        uint64_t src_total, uint64_t out_bytes) {
    (void)out_bytes;
    qp_cli_progress_show(ud, k, n, name, src_done, src_total);
}

/* --dry-run: the plan as RDRR would store it; closes m, writes nothing. */
static int print_plan(qp_model *m, const qp_rdrr_convert_opts *o) {
    qp_err e = {0};
    qp_plan plan;
    qp_status s = qp_convert_rdrr_plan(m, o, &plan, &e);
    return qp_cli_dry_run_done(m, s, &plan, &e);
}

static int run_convert(const qp_cli_convert_args *a, bool passthrough) {
    qp_err e = {0};
    uint8_t sk[64];
    qp_rdrr_convert_opts o;
    memset(&o, 0, sizeof o);
    o.passthrough = passthrough;
    o.model_id = a->model_id;
    o.allow_requantize = a->allow_requantize;
    o.allow_nonfinite = a->allow_nonfinite;
    o.w.shard_size = a->shard_size;
    o.w.replace = a->force;
    o.w.no_inline_tensors = a->no_inline;
    if (!passthrough) {
        o.quant = qp_quant_from_name(a->quant);
        if (o.quant == QP_QUANT_COUNT)
            return qp_cli_usage_error("%s: unknown --quant '%s' (Q4_K_M, Q6_K, F16, BF16, F32, "
                                      "keep)", a->cmd, a->quant);
    }
    if (a->sign) {
        if (qp_rdrr_key_read_secret(a->sign, sk, &e) != QP_OK) return qp_cli_fail(&e);
        o.w.sign_sk = sk;
    }
    qp_open_opts oo = {0};
    oo.tokenizer_path = a->tokenizer;
    qp_model *m = NULL;
    double t0 = qp_cli_now_s();
    if (qp_model_open(a->src, &oo, &m, &e) != QP_OK) {
        sodium_memzero(sk, sizeof sk);
        return qp_cli_fail(&e);
    }
    if (!a->quiet) qp_cli_warn_problems(m);
    if (passthrough && m->format != QP_FORMAT_GGUF) {
        qp_format f = m->format;
        qp_model_close(m);
        sodium_memzero(sk, sizeof sk);
        return qp_cli_usage_error("%s: %s is not a GGUF file (%s)", a->cmd, a->src, qp_format_name(f));
    }
    if (a->dry_run) return print_plan(m, &o);
    qp_rdrr_convert_result r;
    memset(&r, 0, sizeof r);
    qp_cli_progress pr;
    qp_cli_progress_start(&pr);
    o.progress = on_progress;
    o.progress_ud = &pr;
    qp_status s = qp_convert_rdrr(m, &o, a->out, &r, &e);
    sodium_memzero(sk, sizeof sk);
    qp_model_close(m);
    if (s != QP_OK) {
        qp_cli_progress_end(&pr);
        return qp_cli_fail(&e);
    }
    if (!a->quiet) {
        double el = qp_cli_now_s() - t0;
        fprintf(stderr, "quantpack: wrote %s: %lld tensors, %d shard%s, %.2f MB in %.2f s%s%s\n",
                a->out, (long long)r.n_tensors, r.n_shards, r.n_shards == 1 ? "" : "s",
                (double)r.total_bytes / 1e6, el, a->sign ? ", signed" : "",
                r.n_padded_rows ? " (some rows zero-padded to 256: layout \"row\")" : "");
        fprintf(stderr, "quantpack: tokenizer: %s\n", r.tokenizer_note ? r.tokenizer_note : "-");
        if (r.n_dtype_changes) fprintf(stderr, "quantpack: dtypes: %s\n", r.dtype_note);
        if (r.n_skipped) fprintf(stderr, "quantpack: left out: %s\n", r.skip_note);
    }
    if (r.no_tokenizer) qp_cli_warn_no_tokenizer(a->out);
    return QP_EXIT_OK;
}

/* convert --to rdrr and gguf-to-rdrr (options parsed by cli/cmd_convert.c). */
int qp_cli_convert_rdrr(const qp_cli_convert_args *args) {
    const qp_cli_convert_args a = *args;
    if (!a.out && !a.dry_run) return qp_cli_usage_error("%s: -o OUT is required", a.cmd);
    if (!a.gguf_only && qp_lora_is_adapter_dir(a.src)) {
        if (a.dry_run) return qp_cli_usage_error("%s: --dry-run plans a model, not a LoRA adapter", a.cmd);
        qp_lora_opts lo;
        memset(&lo, 0, sizeof lo);
        lo.name = a.model_id;
        lo.eos_token_id = -1;
        lo.w.shard_size = a.shard_size;
        lo.w.replace = a.force;
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
    if (!a.quant)
        return qp_cli_usage_error("%s: --quant is required (Q4_K_M, Q6_K, F16, BF16, F32, keep)", a.cmd);
    bool keep = strcasecmp(a.quant, "keep") == 0;
    if (keep && a.dry_run) return qp_cli_usage_error("%s: --dry-run needs a --quant recipe, not keep", a.cmd);
    return run_convert(&a, keep);
}

int qp_cmd_keygen(int argc, char **argv) {
    const char *out = NULL;
    const qp_cli_cmd cmd = {"keygen",
                            "usage: quantpack keygen OUT.key\n\nWrites an Ed25519 key pair: OUT.key "
                            "(secret, mode 0600, 128 hex digits) and OUT.key.pub (64 hex digits).\n",
                            NULL, NULL, 0, 0, &out, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!out) return qp_cli_usage_error("keygen: no OUT.key given");
    qp_err e = {0};
    if (qp_rdrr_keygen(out, &e) != QP_OK) return qp_cli_fail(&e);
    fprintf(stderr, "quantpack: wrote %s and %s.pub\n", out, out);
    return QP_EXIT_OK;
}

int qp_cmd_verify_signature(int argc, char **argv) {
    const char *dir = NULL, *pub = NULL;
    const qp_cli_opt opts[] = {
        {"--pubkey", NULL, QP_CLI_STR, &pub, .arg = "KEY.pub", .help = "the signer must be this key"},
    };
    const qp_cli_cmd cmd = {"verify-signature",
                            "usage: quantpack verify-signature RDRR_DIR [--pubkey KEY.pub]\n\n"
                            "Checks RDRR_DIR/manifest.json.sig (Ed25519 over the exact bytes of "
                            "manifest.json);\nwith --pubkey the signer must be that key. Exit 0 "
                            "valid, 1 invalid.\n",
                            NULL, opts, 1, 0, &dir, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
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
