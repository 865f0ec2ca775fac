/* Trillim companions: `trillim-quantize` (the SDK v1 command line) and `quantpack convert --to
 * trlm`. Formats and rules: readers/trlm.md. The inference binaries: cli/cmd_inference.c (v1),
 * the current SDK's trillim-inference, cli/inference_session.c (shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "converters/convert_trlm.h"
#include "converters/trillim_manifest.h"
#include "converters/trillim_quantize.h"

/* ---- trillim-quantize --------------------------------------------------------------------------- */

static const char k_tq_usage[] =
    "usage: trillim-quantize --manifest M --output DIR/qmodel.tensors --arch N\n"
    "         --hidden-dim H --intermediate-dim I --hidden-dim-orig H0\n"
    "         --intermediate-dim-orig I0 --norm-eps E [--tie-embeddings]\n"
    "         [--rope-output DIR/rope.cache --rope-theta T --max-pos P] --head-dim D\n"
    "         [--lora-output DIR/qmodel.lora --lora-rank R --num-heads NH --num-kv-heads NKV]\n"
    "         [--rope-dim R] [--yarn-factor F --yarn-orig-max-pos P [--yarn-beta-slow B]\n"
    "          [--yarn-beta-fast B]]\n\n"
    "Executes a Trillim SDK quantize manifest: v1 (55-byte tensor entries, optional LoRA block)\n"
    "or the current SDK's (a sections block after the entries, actions 4-7). Actions BF16_RAW,\n"
    "TERNARY_QUANTIZE, EMBEDDING_I8, REPACK_TERNARY, padded to the manifest's padded rows x\n"
    "cols. Writes qmodel.tensors (TRLM), rope.cache (TRRC) and qmodel.lora (TRLA) atomically\n"
    "(temp name, renamed when every file succeeded). --arch: 1 BITNET, 2 LLAMA, 3 QWEN35\n"
    "(Qwen3.5 dense: delta-net and full-attention layers), 4 BONSAI, 5 BONSAI_TERNARY, 6 QWEN3\n"
    "(Qwen3 layers with q_norm/k_norm). --rope-dim must equal --head-dim but for --arch 3\n"
    "(partial rotary: rope.cache holds the rotated dimensions);\n"
    "--yarn-* writes YaRN rope scaling into rope.cache (betas default to 32 / 1, as HF).\n"
    "Integers are 0..2^31. Byte layouts: readers/trlm.md, converters/trillim_sdk.md.\n"
    "Exit codes: 0 ok, 2 usage, 3 bad input, 4 I/O.\n";

/* The SDK's integer options: 0..2^31 */
#define TQ_INT(name, dst) {name, NULL, QP_CLI_I64, (dst), .lo = 0, .hi = (int64_t)1 << 31, .arg = "N"}
#define TQ_NUM(name, dst) {name, NULL, QP_CLI_F64, (dst), .arg = "X"}
#define TQ_STR(name, dst) {name, NULL, QP_CLI_STR, (dst), .arg = "PATH"}

int qp_cmd_trillim_quantize(int argc, char **argv) {
    qp_trillim_quant_opts o = {0};
    const char *manifest = NULL;
    int64_t arch = 0;
    o.rope_theta = 10000.0;
    const qp_cli_opt opts[] = {
        /* required: the first eight */
        TQ_STR("--manifest", &manifest),
        TQ_STR("--output", &o.output),
        TQ_INT("--arch", &arch),
        TQ_INT("--hidden-dim", &o.hidden),
        TQ_INT("--intermediate-dim", &o.intermediate),
        TQ_INT("--hidden-dim-orig", &o.hidden_orig),
        TQ_INT("--intermediate-dim-orig", &o.intermediate_orig),
        TQ_NUM("--norm-eps", &o.norm_eps),
        {"--tie-embeddings", NULL, QP_CLI_FLAG, &o.tie_embeddings, .help = NULL},
        TQ_STR("--rope-output", &o.rope_output),
        TQ_NUM("--rope-theta", &o.rope_theta),
        TQ_INT("--max-pos", &o.max_pos),
        TQ_INT("--head-dim", &o.head_dim),
        TQ_STR("--lora-output", &o.lora_output),
        TQ_INT("--lora-rank", &o.lora_rank),
        TQ_INT("--num-heads", &o.n_heads),
        TQ_INT("--num-kv-heads", &o.n_kv_heads),
        TQ_INT("--rope-dim", &o.rope_dim),
        {"--yarn-factor", NULL, QP_CLI_F64, &o.yarn_factor, .flo = 1.0, .fhi = 1e6, .arg = "F"},
        TQ_INT("--yarn-orig-max-pos", &o.yarn_orig_max_pos),
        {"--yarn-beta-slow", NULL, QP_CLI_F64, &o.yarn_beta_slow, .flo = 1e-6, .fhi = 1e6, .arg = "B"},
        {"--yarn-beta-fast", NULL, QP_CLI_F64, &o.yarn_beta_fast, .flo = 1e-6, .fhi = 1e6, .arg = "B"},
    };
    enum { N_OPTS = sizeof opts / sizeof opts[0], N_REQUIRED = 8 };
    const qp_cli_cmd cmd = {"trillim-quantize", k_tq_usage, NULL, opts, N_OPTS, 0, NULL, 0, NULL, NULL};
    bool given[N_OPTS];
    int rc = qp_cli_parse(&cmd, argc, argv, given);
    if (rc != QP_CLI_RUN) return rc;
    for (int k = 0; k < N_REQUIRED; k++)
        if (!given[k]) return qp_cli_usage_error("trillim-quantize: %s is required", opts[k].name);
    o.arch = (int)arch;
    o.manifest_path = manifest;
    /* The SDK's own binary replaces its outputs, so this drop-in does too (force), but never an
     * input and only regular files (core/outfile.md). */
    const char *outs[] = {o.output, o.rope_output, o.lora_output};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
        if (outs[k] && (rc = qp_cli_prepare_output(outs[k], true, NULL, &manifest, 1)) != QP_EXIT_OK)
            return rc;
    qp_err e;
    qp_err_clear(&e);
    qp_trillim_manifest *m = NULL;
    if (qp_trillim_manifest_read(manifest, &m, &e) != QP_OK) return qp_cli_fail(&e);
    qp_status s = qp_trillim_quantize(m, &o, &e);
    uint32_t n = m->n_entries;
    qp_trillim_manifest_free(m);
    if (s != QP_OK) return qp_cli_fail(&e);
    printf("trillim-quantize: wrote %s (%u tensors)%s%s%s%s\n", o.output, n,
           o.rope_output ? ", " : "", o.rope_output ? o.rope_output : "", o.lora_output ? ", " : "",
           o.lora_output ? o.lora_output : "");
    return QP_EXIT_OK;
}

/* ---- convert --to trlm -------------------------------------------------------------------------- */

/* convert --to trlm (options parsed by cli/cmd_convert.c; the work: converters/convert_trlm.c). */
int qp_cli_convert_trlm(const qp_cli_convert_args *a) {
    if (!a->out && !a->dry_run) return qp_cli_usage_error("convert --to trlm: SRC and -o DIR are required");
    qp_trlm_convert_opts o = {.target = QP_TRILLIM_TARGET_AUTO, .lora = a->lora,
                              .tokenizer = a->tokenizer, .save_manifest = a->save_manifest,
                              .adapter_only = a->adapter_only,
                              .force = a->force,
                              .allow_nonfinite = a->allow_nonfinite,
                              .allow_requantize = a->allow_requantize};
    if (a->quant && !qp_trillim_target_from_name(a->quant, &o.target))
        return qp_cli_usage_error("convert --to trlm: unknown --quant '%s' (auto, ternary, bf16, q8_0, "
                                   "q8_0_blocked_32, int8, q1_0_128, grouped_ternary_128)", a->quant);
    qp_err e;
    qp_err_clear(&e);
    qp_open_opts oo = {0};
    oo.tokenizer_path = a->tokenizer;
    qp_model *sm = NULL;
    if (qp_model_open(a->src, &oo, &sm, &e) != QP_OK) return qp_cli_fail(&e);
    if (a->dry_run) {
        qp_plan plan;
        qp_status s = qp_convert_trlm_plan(sm, &o, &plan, &e);
        return qp_cli_dry_run_done(sm, s, &plan, &e);
    }
    qp_cli_progress pr;
    qp_cli_progress_start(&pr);
    o.progress = qp_cli_progress_cb;
    o.progress_ud = &pr;
    qp_trlm_convert_stats st = {0};
    qp_status s = qp_convert_to_trlm(sm, a->out, &o, &st, &e);
    qp_model_close(sm);
    if (s != QP_OK) {
        qp_cli_progress_end(&pr);
        return qp_cli_fail(&e);
    }
    if (a->adapter_only) {
        printf("convert: wrote %s (TRLM LoRA adapter bundle)\n", a->out);
        return QP_EXIT_OK;
    }
    printf("convert: wrote %s (TRLM, %lld tensors%s)\n", a->out, (long long)st.n_tensors,
           a->lora ? ", LoRA" : "");
    if (st.n_skipped) fprintf(stderr, "quantpack: left out: %s\n", st.skip_note);
    if (!st.has_tokenizer) qp_cli_warn_no_tokenizer(a->out);
    return QP_EXIT_OK;
}
