/* Trillim companions: `trillim-quantize` (the SDK v1 command line) and `quantpack convert --to
 * trlm`. Formats and rules: readers/trlm.md. The inference binaries: cli/cmd_inference.c (v1),
 * the current SDK's trillim-inference, cli/inference_session.c (shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "converters/hf_folder.h"
#include "converters/trillim_manifest.h"
#include "converters/trillim_quantize.h"
#include "readers/model_check.h"
#include "writers/trlm_writer.h"

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
    "(temp name, renamed when every file succeeded). --arch: 1 BITNET, 2 LLAMA (3 QWEN35,\n"
    "4 BONSAI, 5 BONSAI_TERNARY, 6 QWEN3 are recognised and refused: no runtime for their\n"
    "layers). --rope-dim must equal --head-dim (no partial rotary); --yarn-* writes YaRN\n"
    "rope scaling into rope.cache (betas default to 32 / 1, as Hugging Face).\n"
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

static qp_status copy_file(const char *src, const char *dst, qp_err *e) {
    char *buf = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(src, (size_t)1 << 30, &buf, &len, e);
    if (s == QP_OK) s = qp_file_write_atomic(dst, buf, len, e);
    qp_free(buf);
    return s;
}

/* The runtime's checks on the source before anything is written (readers/model_check.h). */
static qp_status check_source(const char *src, const char *tok, bool allow_nonfinite,
                              bool *has_tokenizer, qp_err *e) {
    qp_open_opts oo = {0};
    oo.tokenizer_path = tok;
    qp_model *sm = NULL;
    qp_status s = qp_model_open(src, &oo, &sm, e);
    if (s == QP_OK) s = qp_model_check_for_write(sm, allow_nonfinite, e);
    if (s == QP_OK) *has_tokenizer = sm->vocab.n_tokens > 0;
    qp_model_close(sm);
    return s;
}

/* A source that is not a Hugging Face folder (a GGUF, a llama2.c checkpoint, an RDRR package)
 * becomes one first, in a staging folder beside out that the caller removes (qp_outdir_abort):
 * converters/hf_folder.md. */
static qp_status stage_hf_folder(const char *src, const char *tok, const char *out, qp_outdir **stage, qp_err *e) {
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--;
    char *target = qp_malloc(n + sizeof ".hf-source");
    if (!target) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    memcpy(target, out, n);
    memcpy(target + n, ".hf-source", sizeof ".hf-source");
    qp_open_opts oo = {0};
    oo.tokenizer_path = tok;
    qp_model *sm = NULL;
    qp_status s = qp_model_open(src, &oo, &sm, e);
    if (s == QP_OK) s = qp_outdir_open(target, NULL, false, stage, e);
    if (s == QP_OK) s = qp_hf_folder_write(sm, qp_outdir_path(*stage), e);
    qp_model_close(sm);
    qp_free(target);
    return s;
}

/* convert --to trlm (options parsed by cli/cmd_convert.c). */
int qp_cli_convert_trlm(const qp_cli_convert_args *a) {
    const char *src = a->src, *out = a->out, *tok = a->tokenizer, *lora = a->lora;
    if (!out) return qp_cli_usage_error("convert --to trlm: SRC and -o DIR are required");
    qp_trillim_target target = QP_TRILLIM_TARGET_AUTO;
    if (a->quant && !qp_trillim_target_from_name(a->quant, &target))
        return qp_cli_usage_error("convert --to trlm: unknown --quant '%s' (auto, ternary, bf16, q8_0)", a->quant);
    qp_err e;
    qp_err_clear(&e);
    qp_trillim_config c;
    qp_trillim_manifest *m = NULL;
    qp_outdir *od = NULL, *stage = NULL;
    char *mpath = NULL, *tpath = NULL, *rpath = NULL, *lpath = NULL, *cfgp = NULL;
    uint8_t *mbytes = NULL;
    size_t mlen = 0;
    bool has_tok = false;
    const bool is_hf = qp_path_is_dir(src) && qp_format_detect(src) == QP_FORMAT_SAFETENSORS;
    qp_status s = check_source(src, tok, a->allow_nonfinite, &has_tok, &e);
    if (s == QP_OK && !is_hf) s = stage_hf_folder(src, tok, out, &stage, &e);
    /* hf: the Hugging Face folder the SDK's manifest describes (the staged one is removed at the
       end, so its manifest stays there too) */
    const char *hf = stage ? qp_outdir_path(stage) : src;
    if (s == QP_OK) s = qp_trillim_config_from_hf(hf, &c, &e);
    c.target = target;
    if (s == QP_OK) s = qp_trillim_manifest_build(hf, &c, lora, &m, &e);
    if (s == QP_OK) s = qp_outdir_open(out, &qp_trlm_outdir_kind, a->force, &od, &e);
    if (s == QP_OK && (!(mpath = stage ? qp_outdir_join(stage, ".quantize_manifest.bin")
                                       : qp_outdir_join(od, ".quantize_manifest.bin")) ||
                       !(tpath = qp_outdir_join(od, "qmodel.tensors")) ||
                       !(rpath = qp_outdir_join(od, "rope.cache")) ||
                       !(lpath = qp_outdir_join(od, "qmodel.lora")) ||
                       !(cfgp = qp_outdir_join(od, "inference.config"))))
        s = qp_fail(&e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = qp_trillim_manifest_serialize(m, &mbytes, &mlen, &e);
    if (s == QP_OK) s = qp_file_write_atomic(mpath, mbytes, mlen, &e);
    /* the same code path as trillim-quantize: parse the manifest bytes back, then execute */
    qp_trillim_manifest *m2 = NULL;
    if (s == QP_OK) s = qp_trillim_manifest_read(mpath, &m2, &e);
    if (s == QP_OK) {
        int64_t rank = 0;
        if (lora) s = qp_trillim_adapter_rank(lora, &rank, &e);
        qp_trillim_quant_opts o = {mpath, tpath, c.arch_type, c.hidden, c.intermediate,
                                   c.hidden_orig, c.intermediate_orig, c.norm_eps, c.tie_embeddings,
                                   rpath, c.rope_theta, c.max_pos, c.head_dim, lora ? lpath : NULL,
                                   rank, c.n_heads, c.n_kv_heads, 0, 0, 0, 0, 0};
        if (s == QP_OK) s = qp_trillim_quantize(m2, &o, &e);
    }
    qp_trillim_manifest_free(m2);
    /* side files: config.json, tokenizer files, generation_config.json */
    static const char *const k_side[] = {"config.json", "generation_config.json", "tokenizer.json",
                                         "tokenizer_config.json", "tokenizer.model",
                                         "special_tokens_map.json"};
    for (size_t i = 0; s == QP_OK && i < sizeof k_side / sizeof k_side[0]; i++) {
        char *from = qp_path_join(hf, k_side[i]);
        char *to = qp_outdir_join(od, k_side[i]);
        if (!from || !to) s = qp_fail(&e, QP_ERR_NOMEM, "out of memory");
        else if (qp_path_exists(from)) s = copy_file(from, to, &e);
        qp_free(from);
        qp_free(to);
    }
    if (s == QP_OK && tok) {
        const char *base = strrchr(tok, '/');
        base = base ? base + 1 : tok;
        char *to = qp_outdir_join(od, base);
        s = to ? copy_file(tok, to, &e) : qp_fail(&e, QP_ERR_NOMEM, "out of memory");
        qp_free(to);
    }
    if (s == QP_OK) {
        char line[1024], eps[40], theta[40];
        qp_trillim_py_float(c.norm_eps, eps, sizeof eps);
        qp_trillim_py_float(c.rope_theta, theta, sizeof theta);
        int n = snprintf(line, sizeof line, "%d %d %lld %lld %lld %lld %lld %lld %lld %lld %s %s %d %d %d %d 0 %d",
                         c.arch_type, c.activation, (long long)c.hidden, (long long)c.intermediate,
                         (long long)c.n_layers, (long long)c.n_heads, (long long)c.n_kv_heads,
                         (long long)c.vocab, (long long)c.head_dim, (long long)c.max_pos, eps, theta,
                         c.tie_embeddings, c.qkv_bias, c.attn_sub_norm, c.ffn_sub_norm, c.n_eos);
        for (int i = 0; i < c.n_eos && n > 0 && (size_t)n < sizeof line - 24; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, " %lld", (long long)c.eos[i]);
        if (n > 0 && (size_t)n < sizeof line - 2) line[n++] = '\n';
        s = qp_file_write_atomic(cfgp, line, (size_t)n, &e);
    }
    if (s == QP_OK) {
        s = qp_outdir_commit(od, &e);
        od = NULL;
    }
    qp_outdir_abort(od);
    qp_outdir_abort(stage);
    uint32_t nt = m ? m->n_entries : 0;
    qp_trillim_manifest_free(m);
    qp_free(mbytes);
    qp_free(mpath);
    qp_free(tpath);
    qp_free(rpath);
    qp_free(lpath);
    qp_free(cfgp);
    if (s != QP_OK) return qp_cli_fail(&e);
    printf("convert: wrote %s (TRLM, %u tensors%s)\n", out, nt, lora ? ", LoRA" : "");
    if (!has_tok) qp_cli_warn_no_tokenizer(out);
    return QP_EXIT_OK;
}
