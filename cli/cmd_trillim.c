/* Trillim companions: `trillim-quantize` (the SDK v1 command line), `inference` (protocol v1 on
 * stdin/stdout, readers/trlm.md "inference (protocol v1)") and `quantpack convert --to trlm`.
 * Formats and rules: readers/trlm.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "converters/trillim_manifest.h"
#include "converters/trillim_quantize.h"
#include "quantpack/runtime.h"
#include "quantpack/sampler.h"
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
    "layers). Integers are 0..2^31. Byte layouts: readers/trlm.md, converters/trillim_sdk.md.\n"
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

/* convert --to trlm (options parsed by cli/cmd_convert.c). */
int qp_cli_convert_trlm(const qp_cli_convert_args *a) {
    const char *src = a->src, *out = a->out, *tok = a->tokenizer, *lora = a->lora;
    if (!out) return qp_cli_usage_error("convert --to trlm: SRC and -o DIR are required");
    qp_err e;
    qp_err_clear(&e);
    if (!qp_path_is_dir(src)) {
        qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: --to trlm needs a Hugging Face safetensors model folder", src);
        return qp_cli_fail(&e);
    }
    qp_trillim_config c;
    qp_trillim_manifest *m = NULL;
    qp_outdir *od = NULL;
    char *mpath = NULL, *tpath = NULL, *rpath = NULL, *lpath = NULL, *cfgp = NULL;
    uint8_t *mbytes = NULL;
    size_t mlen = 0;
    qp_status s = qp_trillim_config_from_hf(src, &c, &e);
    bool has_tok = false;
    if (s == QP_OK) s = check_source(src, tok, a->allow_nonfinite, &has_tok, &e);
    if (s == QP_OK) s = qp_trillim_manifest_build(src, &c, lora, &m, &e);
    if (s == QP_OK) s = qp_outdir_open(out, &qp_trlm_outdir_kind, a->force, &od, &e);
    if (s == QP_OK && (!(mpath = qp_outdir_join(od, ".quantize_manifest.bin")) ||
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
        char *from = qp_path_join(src, k_side[i]);
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
    uint32_t nt = m ? m->n_entries : 0;
    qp_trillim_manifest_free(m);
    qp_free(mbytes);
    qp_free(mpath);
    qp_free(tpath);
    qp_free(rpath);
    qp_free(lpath);
    qp_free(cfgp);
    if (s != QP_OK) return qp_cli_fail(&e);
    printf("convert: wrote %s (TRLM v1, %u tensors%s)\n", out, nt, lora ? ", LoRA" : "");
    if (!has_tok) qp_cli_warn_no_tokenizer(out);
    return QP_EXIT_OK;
}

/* ---- inference (protocol v1) -------------------------------------------------------------------- */

static const char k_inf_usage[] =
    "usage: inference MODEL_DIR [--lora] --config ARCH ACT HIDDEN INTER LAYERS HEADS KV_HEADS\n"
    "         VOCAB HEAD_DIM MAX_POS NORM_EPS ROPE_THETA TIE QKV_BIAS ATTN_SUB_NORM\n"
    "         FFN_SUB_NORM THREADS N_EOS EOS...\n\n"
    "Trillim protocol v1. Per request, stdin lines: num_tokens (0 quits), reset (0/1),\n"
    "temperature, top_k, top_p, repetition_penalty, rep_penalty_lookback, max_tokens (0 =\n"
    "unlimited, bounded by max positions), then num_tokens token ids. stdout: one generated\n"
    "id per line (EOS included), then kv_position. The repetition penalty looks back over\n"
    "the session's cached tokens (all requests since the last reset 1), as attention does.\n"
    "--lora merges MODEL_DIR/qmodel.lora. THREADS: 0 (auto) or 1..1024.\n"
    "Malformed input: a message on stderr and exit 3.\n";

/* The positional values of --config, in the SDK's order (convert --to trlm writes them to
 * DIR/inference.config). */
typedef struct inf_config {
    int64_t arch_type, activation, hidden_dim, intermediate_dim, num_layers, num_heads,
        num_kv_heads, vocab_size, head_dim, max_position_embeddings;
    double norm_eps, rope_theta;
    int64_t tie_word_embeddings, has_qkv_bias, has_attn_sub_norm, has_ffn_sub_norm, num_threads,
        num_eos_tokens;
    int64_t eos[QP_TRILLIM_MAX_EOS];
} inf_config;

#define INF_INT(field, max) {#field, NULL, QP_CLI_I64, &c->field, .lo = 0, .hi = (max)}
#define INF_BOOL(field) INF_INT(field, 1)
#define INF_NUM(field) {#field, NULL, QP_CLI_F64, &c->field, .flo = 0}

/* The words of --config -> c, through the option parser's value rules (one row per field). */
static int parse_config(const qp_cli_rest *w, inf_config *c) {
    const int64_t big = (int64_t)1 << 31;
    const qp_cli_opt fields[] = {
        INF_INT(arch_type, big), INF_INT(activation, big), INF_INT(hidden_dim, big),
        INF_INT(intermediate_dim, big), INF_INT(num_layers, big), INF_INT(num_heads, big),
        INF_INT(num_kv_heads, big), INF_INT(vocab_size, big), INF_INT(head_dim, big),
        INF_INT(max_position_embeddings, big), INF_NUM(norm_eps), INF_NUM(rope_theta),
        INF_BOOL(tie_word_embeddings), INF_BOOL(has_qkv_bias), INF_BOOL(has_attn_sub_norm),
        INF_BOOL(has_ffn_sub_norm), INF_INT(num_threads, QP_CLI_MAX_THREADS),
        INF_INT(num_eos_tokens, QP_TRILLIM_MAX_EOS),
    };
    enum { N_FIELDS = sizeof fields / sizeof fields[0] };
    char why[96];
    memset(c, 0, sizeof *c);
    for (int k = 0; k < N_FIELDS; k++) {
        if (k >= w->argc)
            return qp_cli_usage_error("inference: --config is missing %s (field %d)", fields[k].name, k + 1);
        if (!qp_cli_parse_value(&fields[k], w->argv[k], why, sizeof why))
            return qp_cli_usage_error("inference: --config field %d (%s) wants %s, not '%s'", k + 1,
                                      fields[k].name, why, w->argv[k]);
    }
    for (int k = 0; k < c->num_eos_tokens; k++) {
        const qp_cli_opt eos = {"EOS token", NULL, QP_CLI_I64, &c->eos[k], .lo = 0, .hi = INT64_MAX};
        const int at = N_FIELDS + k;
        if (at >= w->argc || !qp_cli_parse_value(&eos, w->argv[at], why, sizeof why))
            return qp_cli_usage_error("inference: --config EOS token %d missing or invalid", k + 1);
    }
    if (w->argc != N_FIELDS + c->num_eos_tokens)
        return qp_cli_usage_error("inference: unexpected argument '%s' after the config",
                                  w->argv[N_FIELDS + c->num_eos_tokens]);
    if (!(c->norm_eps > 0) || !(c->rope_theta > 0))
        return qp_cli_usage_error("inference: norm_eps and rope_theta must be positive");
    return QP_CLI_RUN;
}

/* A protocol error: one message, exit 3 (QP_ERR_FORMAT). */
#define inf_error(...) qp_cli_error(QP_ERR_FORMAT, "inference: " __VA_ARGS__)

/* The config must describe the model in the folder. */
static int check_config(const inf_config *c, const qp_model *m, const char *dir) {
    const qp_arch *a = &m->arch;
    const qp_meta *mh = qp_model_meta(m, "trlm.hidden_dim"), *mi = qp_model_meta(m, "trlm.intermediate_dim"),
                  *ma = qp_model_meta(m, "trlm.arch_type");
    const struct { const char *what; int64_t got, want; } chk[] = {
        {"arch_type", c->arch_type, ma ? (int64_t)ma->v.u : -1},
        {"activation", c->activation, a->act == QP_ACT_RELU2 ? 0 : 1},
        {"hidden_dim", c->hidden_dim, mh ? (int64_t)mh->v.u : -1},
        {"intermediate_dim", c->intermediate_dim, mi ? (int64_t)mi->v.u : -1},
        {"num_layers", c->num_layers, a->n_layers},
        {"num_heads", c->num_heads, a->n_heads},
        {"num_kv_heads", c->num_kv_heads, a->n_kv_heads},
        {"vocab_size", c->vocab_size, a->vocab},
        {"head_dim", c->head_dim, a->head_dim},
        {"tie_word_embeddings", c->tie_word_embeddings, a->tie_embeddings},
        {"has_qkv_bias", c->has_qkv_bias, a->qkv_bias},
        {"has_attn_sub_norm", c->has_attn_sub_norm, a->sub_norms},
        {"has_ffn_sub_norm", c->has_ffn_sub_norm, a->sub_norms},
    };
    for (size_t k = 0; k < sizeof chk / sizeof chk[0]; k++)
        if (chk[k].got != chk[k].want)
            return inf_error("--config %s is %lld but the model in %s has %lld", chk[k].what,
                             (long long)chk[k].got, dir, (long long)chk[k].want);
    if (c->max_position_embeddings < 1 || c->max_position_embeddings > a->max_pos)
        return inf_error("--config max_position_embeddings %lld is outside 1..%lld (rope.cache)",
                         (long long)c->max_position_embeddings, (long long)a->max_pos);
    if (fabs(c->norm_eps - (double)a->norm_eps) > 1e-6 * fabs(c->norm_eps) + 1e-12 ||
        fabs(c->rope_theta - (double)a->rope_theta) > 1e-6 * c->rope_theta)
        return inf_error("--config norm_eps %g / rope_theta %g differ from the model's %g / %g",
                         c->norm_eps, c->rope_theta, (double)a->norm_eps, (double)a->rope_theta);
    for (int k = 0; k < c->num_eos_tokens; k++)
        if (c->eos[k] >= a->vocab)
            return inf_error("--config EOS token %lld is outside the vocabulary (%lld)",
                             (long long)c->eos[k], (long long)a->vocab);
    return QP_EXIT_OK;
}

/* ---- the session: requests on stdin, token ids and kv_position on stdout -------------------- */

typedef struct inf_request {
    int64_t n_tokens, reset, top_k, lookback, max_tokens;
    double temperature, top_p, repetition_penalty;
} inf_request;

typedef struct inf_session {
    const inf_config *c;
    qp_runtime *rt;
    qp_sampler *sm;
    int64_t n_ctx, vocab, pos;
    /* ids: this request's prompt; hist: the tokens in the KV cache (hist[k] at position k), which
       every request's sampler re-accepts first, so the repetition penalty looks back across
       requests of the session exactly as attention does (cleared with the cache by reset 1) */
    int32_t *ids, *hist;
} inf_session;

/* Reads one protocol line; 1 ok, 0 EOF before any byte, -1 too long (EOF mid-line is a line). */
static int read_line(char *buf, size_t cap) {
    if (!fgets(buf, (int)cap, stdin)) return 0;
    size_t n = strlen(buf);
    if (n == cap - 1 && buf[n - 1] != '\n') return -1;
    return 1;
}

/* One number line: an integer (iv) or a finite number (fv), blanks after it allowed. 0 ok (or *eof
 * at a clean end when eof_ok), else the exit code after the message. */
static int read_num(const char *what, bool is_float, int64_t *iv, double *fv, bool eof_ok, bool *eof) {
    char line[256];
    int r = read_line(line, sizeof line);
    if (r == 0) {
        if (eof_ok) {
            *eof = true;
            return 0;
        }
        return inf_error("unexpected end of input while reading %s", what);
    }
    if (r < 0) return inf_error("%s: line too long", what);
    size_t n = strlen(line);
    while (n > 0 && strchr(" \t\r\n", line[n - 1])) line[--n] = '\0';
    bool ok = is_float ? qp_cli_parse_f64(line, 0, 0, fv) : qp_cli_parse_i64(line, INT64_MIN, INT64_MAX, iv);
    if (!ok) return inf_error("%s: '%s' is not %s", what, line, is_float ? "a finite number" : "an integer");
    return 0;
}

/* The header lines and token ids of one request into r and s->ids; *quit on "0" or a clean EOF. */
static int read_request(inf_session *s, inf_request *r, bool *quit) {
    bool eof = false;
    int rc;
    if ((rc = read_num("num_tokens", false, &r->n_tokens, NULL, true, &eof)) != 0) return rc;
    if (eof || r->n_tokens == 0) { /* stdin closed between requests: a clean end */
        *quit = true;
        return 0;
    }
    if (r->n_tokens < 0 || r->n_tokens > s->n_ctx)
        return inf_error("num_tokens %lld is outside 0..%lld", (long long)r->n_tokens, (long long)s->n_ctx);
    if ((rc = read_num("reset_flag", false, &r->reset, NULL, false, &eof)) != 0 ||
        (rc = read_num("temperature", true, NULL, &r->temperature, false, &eof)) != 0 ||
        (rc = read_num("top_k", false, &r->top_k, NULL, false, &eof)) != 0 ||
        (rc = read_num("top_p", true, NULL, &r->top_p, false, &eof)) != 0 ||
        (rc = read_num("repetition_penalty", true, NULL, &r->repetition_penalty, false, &eof)) != 0 ||
        (rc = read_num("rep_penalty_lookback", false, &r->lookback, NULL, false, &eof)) != 0 ||
        (rc = read_num("max_tokens", false, &r->max_tokens, NULL, false, &eof)) != 0)
        return rc;
    if (r->reset != 0 && r->reset != 1) return inf_error("reset_flag %lld is not 0 or 1", (long long)r->reset);
    if (r->temperature < 0) return inf_error("temperature %g is negative", r->temperature);
    if (r->top_k < 0 || r->top_k > (1ll << 30)) return inf_error("top_k %lld is out of range", (long long)r->top_k);
    if (r->top_p < 0) return inf_error("top_p %g is negative", r->top_p);
    if (!(r->repetition_penalty > 0))
        return inf_error("repetition_penalty %g must be positive", r->repetition_penalty);
    if (r->lookback < 0 || r->lookback > (1ll << 30))
        return inf_error("rep_penalty_lookback %lld is out of range", (long long)r->lookback);
    if (r->max_tokens < 0) return inf_error("max_tokens %lld is negative", (long long)r->max_tokens);
    for (int64_t k = 0; k < r->n_tokens; k++) {
        int64_t id;
        char what[48];
        snprintf(what, sizeof what, "token id %lld", (long long)k + 1);
        if ((rc = read_num(what, false, &id, NULL, false, &eof)) != 0) return rc;
        if (id < 0 || id >= s->vocab)
            return inf_error("token id %lld is outside the vocabulary (0..%lld)", (long long)id,
                             (long long)s->vocab - 1);
        s->ids[k] = (int32_t)id;
    }
    return 0;
}

/* A fresh sampler with this request's parameters whose history is the cached tokens. */
static int start_sampler(inf_session *s, const inf_request *r) {
    qp_err e;
    qp_err_clear(&e);
    qp_sampler_params sp;
    qp_sampler_params_default(&sp);
    sp.temperature = (float)r->temperature;
    sp.top_k = (int32_t)r->top_k;
    sp.top_p = (float)r->top_p;
    sp.repeat_penalty = (float)r->repetition_penalty;
    sp.repeat_last_n = (int32_t)r->lookback;
    qp_sampler_free(s->sm);
    s->sm = NULL;
    if (qp_sampler_new(&sp, s->vocab, &s->sm, &e) != QP_OK) return qp_cli_fail(&e);
    for (int64_t k = 0; k < s->pos; k++)
        if (qp_sampler_accept(s->sm, s->hist[k], &e) != QP_OK) return qp_cli_fail(&e);
    return 0;
}

/* Prefill, then sample until EOS, max_tokens or a full context; prints the ids and kv_position. */
static int run_request(inf_session *s, const inf_request *r) {
    qp_err e;
    qp_err_clear(&e);
    if (r->reset) {
        qp_runtime_reset(s->rt);
        s->pos = 0;
    }
    if (s->pos + r->n_tokens > s->n_ctx)
        return inf_error("%lld new tokens at kv_position %lld exceed max_position_embeddings %lld",
                         (long long)r->n_tokens, (long long)s->pos, (long long)s->n_ctx);
    int rc = start_sampler(s, r);
    if (rc) return rc;
    float *logits = NULL;
    for (int64_t k = 0; k < r->n_tokens; k++) {
        if (qp_runtime_forward(s->rt, s->ids[k], s->pos, &logits, &e) != QP_OK ||
            qp_sampler_accept(s->sm, s->ids[k], &e) != QP_OK)
            return qp_cli_fail(&e);
        s->hist[s->pos++] = s->ids[k];
    }
    for (int64_t g = 1;; g++) {
        int32_t tok;
        if (qp_sampler_sample(s->sm, logits, &tok, &e) != QP_OK || qp_sampler_accept(s->sm, tok, &e) != QP_OK)
            return qp_cli_fail(&e);
        printf("%d\n", tok);
        fflush(stdout);
        bool stop = r->max_tokens > 0 && g >= r->max_tokens;
        for (int k = 0; k < s->c->num_eos_tokens; k++) stop |= tok == s->c->eos[k];
        if (s->pos >= s->n_ctx) break; /* the context is full: the token is emitted but not cached */
        if (qp_runtime_forward(s->rt, tok, s->pos, &logits, &e) != QP_OK) return qp_cli_fail(&e);
        s->hist[s->pos++] = tok;
        if (stop) break;
    }
    printf("%lld\n", (long long)s->pos);
    fflush(stdout);
    return 0;
}

/* The model in dir, checked against the config, with qmodel.lora merged when asked. */
static int open_model(const char *dir, bool use_lora, const inf_config *c, qp_model **out) {
    qp_err e;
    qp_err_clear(&e);
    if (qp_format_detect(dir) != QP_FORMAT_TRLM) {
        qp_fail(&e, QP_ERR_FORMAT, "%s: not a TRLM model folder (no qmodel.tensors)", dir);
        return qp_cli_fail(&e);
    }
    qp_model *m = NULL;
    if (qp_model_open(dir, NULL, &m, &e) != QP_OK) return qp_cli_fail(&e);
    int rc = QP_EXIT_OK;
    if (use_lora) {
        char *lp = qp_path_join(dir, "qmodel.lora");
        qp_status s = lp ? qp_trlm_apply_lora(m, lp, &e) : qp_fail(&e, QP_ERR_NOMEM, "out of memory");
        qp_free(lp);
        if (s != QP_OK) rc = qp_cli_fail(&e);
    }
    if (rc == QP_EXIT_OK) rc = check_config(c, m, dir);
    if (rc != QP_EXIT_OK) {
        qp_model_close(m);
        return rc;
    }
    *out = m;
    return QP_EXIT_OK;
}

int qp_cmd_inference(int argc, char **argv) {
    const char *dir = NULL;
    bool use_lora = false;
    qp_cli_rest words = {NULL, 0};
    const qp_cli_opt opts[] = {
        {"--lora", NULL, QP_CLI_FLAG, &use_lora, .help = "merge MODEL_DIR/qmodel.lora"},
        {"--config", NULL, QP_CLI_REST, &words, .arg = "ARCH ... EOS...",
         .help = "the model's configuration: every word after --config"},
    };
    const qp_cli_cmd cmd = {"inference", k_inf_usage, NULL, opts, 2, 0, &dir, 1, NULL, NULL};
    inf_config c;
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!dir || !words.argv) return qp_cli_usage_error("inference: expected MODEL_DIR [--lora] --config ...");
    if ((rc = parse_config(&words, &c)) != QP_CLI_RUN) return rc;

    qp_model *m = NULL;
    inf_session s = {.c = &c, .n_ctx = c.max_position_embeddings};
    qp_err e;
    qp_err_clear(&e);
    if ((rc = open_model(dir, use_lora, &c, &m)) != QP_EXIT_OK) return rc;
    s.vocab = m->arch.vocab;
    int threads = (int)c.num_threads;
    if (threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 3 ? (int)nc - 2 : 1;
    }
    qp_runtime_opts ro = {threads, s.n_ctx};
    if (qp_runtime_new(m, &ro, &s.rt, &e) != QP_OK) {
        rc = qp_cli_fail(&e);
        goto done;
    }
    s.ids = qp_malloc((size_t)s.n_ctx * sizeof *s.ids);
    s.hist = qp_malloc((size_t)s.n_ctx * sizeof *s.hist);
    if (!s.ids || !s.hist) {
        rc = qp_cli_error(QP_ERR_NOMEM, "inference: out of memory for %lld positions", (long long)s.n_ctx);
        goto done;
    }
    for (;;) {
        inf_request r;
        bool quit = false;
        if ((rc = read_request(&s, &r, &quit)) != 0 || quit) break;
        if ((rc = run_request(&s, &r)) != 0) break;
    }
done:
    qp_free(s.ids);
    qp_free(s.hist);
    qp_sampler_free(s.sm);
    qp_runtime_free(s.rt);
    qp_model_close(m);
    return rc;
}
