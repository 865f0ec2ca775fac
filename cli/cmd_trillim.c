/* Trillim companions: `trillim-quantize` (the SDK v1 command line), `inference` (protocol v1 on
 * stdin/stdout, shared/seeds/000_27cc55f45ce5de42.txt) and `quantpack convert --to trlm`.
 * Formats and rules: readers/trlm.md. */
#include <errno.h>
#include <stdarg.h>
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
#include "writers/trlm_writer.h"

static bool parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s) return false;
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
    if (*end) return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v)) return false;
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') end++;
    if (*end) return false;
    *out = v;
    return true;
}

/* ---- trillim-quantize --------------------------------------------------------------------------- */

static void tq_usage(FILE *f) {
    fprintf(f,
            "usage: trillim-quantize --manifest M --output DIR/qmodel.tensors --arch N\n"
            "         --hidden-dim H --intermediate-dim I --hidden-dim-orig H0\n"
            "         --intermediate-dim-orig I0 --norm-eps E [--tie-embeddings]\n"
            "         [--rope-output DIR/rope.cache --rope-theta T --max-pos P] --head-dim D\n"
            "         [--lora-output DIR/qmodel.lora --lora-rank R --num-heads NH --num-kv-heads NKV]\n\n"
            "Executes a Trillim SDK v1 quantize manifest (55-byte tensor entries, optional LoRA block):\n"
            "actions BF16_RAW, TERNARY_QUANTIZE, EMBEDDING_I8, REPACK_TERNARY, padded to the manifest's\n"
            "padded rows x cols. Writes qmodel.tensors (TRLM v1), rope.cache (TRRC) and qmodel.lora (TRLA)\n"
            "atomically (temp name, renamed when every file succeeded). --arch: 1 BITNET, 2 LLAMA.\n"
            "Byte layouts: readers/trlm.md. Exit codes: 0 ok, 2 usage, 3 bad input, 4 I/O.\n");
}

int qp_cmd_trillim_quantize(int argc, char **argv) {
    qp_trillim_quant_opts o = {0};
    const char *manifest = NULL;
    bool have[9] = {false};
    o.rope_theta = 10000.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (qp_cli_is_help(a)) {
            tq_usage(stdout);
            return QP_EXIT_OK;
        }
        if (strcmp(a, "--tie-embeddings") == 0) {
            o.tie_embeddings = true;
            continue;
        }
        static const char *const k_val[] = {"--manifest", "--output", "--arch", "--hidden-dim",
                                            "--intermediate-dim", "--hidden-dim-orig",
                                            "--intermediate-dim-orig", "--norm-eps", "--rope-output",
                                            "--rope-theta", "--max-pos", "--head-dim", "--lora-output",
                                            "--lora-rank", "--num-heads", "--num-kv-heads"};
        int k = -1;
        for (int j = 0; j < (int)(sizeof k_val / sizeof k_val[0]); j++)
            if (strcmp(a, k_val[j]) == 0) k = j;
        if (k < 0) return qp_cli_usage_error("trillim-quantize: unknown argument '%s'", a);
        if (i + 1 >= argc) return qp_cli_usage_error("trillim-quantize: %s needs a value", a);
        const char *v = argv[++i];
        int64_t iv = 0;
        double dv = 0;
        bool is_int = k == 2 || (k >= 3 && k <= 6) || k == 10 || k == 11 || k >= 13;
        bool is_f = k == 7 || k == 9;
        if (is_int && (!parse_i64(v, &iv) || iv < 0 || iv > (1ll << 31)))
            return qp_cli_usage_error("trillim-quantize: %s '%s' is not a non-negative integer", a, v);
        if (is_f && !parse_f64(v, &dv))
            return qp_cli_usage_error("trillim-quantize: %s '%s' is not a finite number", a, v);
        switch (k) {
        case 0: manifest = v; break;
        case 1: o.output = v; break;
        case 2: o.arch = (int)iv; break;
        case 3: o.hidden = iv; break;
        case 4: o.intermediate = iv; break;
        case 5: o.hidden_orig = iv; break;
        case 6: o.intermediate_orig = iv; break;
        case 7: o.norm_eps = dv; break;
        case 8: o.rope_output = v; break;
        case 9: o.rope_theta = dv; break;
        case 10: o.max_pos = iv; break;
        case 11: o.head_dim = iv; break;
        case 12: o.lora_output = v; break;
        case 13: o.lora_rank = iv; break;
        case 14: o.n_heads = iv; break;
        case 15: o.n_kv_heads = iv; break;
        }
        if (k <= 7) have[k] = true;
    }
    static const char *const k_req[] = {"--manifest", "--output", "--arch", "--hidden-dim",
                                        "--intermediate-dim", "--hidden-dim-orig",
                                        "--intermediate-dim-orig", "--norm-eps"};
    for (int k = 0; k < 8; k++)
        if (!have[k]) return qp_cli_usage_error("trillim-quantize: %s is required", k_req[k]);
    o.manifest_path = manifest;
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
    char *probe = qp_path_join(out, "qmodel.tensors");
    bool replace = probe && qp_path_exists(probe);
    qp_free(probe);
    qp_trillim_config c;
    qp_trillim_manifest *m = NULL;
    qp_outdir *od = NULL;
    char *mpath = NULL, *tpath = NULL, *rpath = NULL, *lpath = NULL, *cfgp = NULL;
    uint8_t *mbytes = NULL;
    size_t mlen = 0;
    qp_status s = qp_trillim_config_from_hf(src, &c, &e);
    if (s == QP_OK) s = qp_trillim_manifest_build(src, &c, lora, &m, &e);
    if (s == QP_OK) s = qp_outdir_open(out, &qp_trlm_outdir_kind, replace, &od, &e);
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
                                   rank, c.n_heads, c.n_kv_heads};
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
    return QP_EXIT_OK;
}

/* ---- inference (protocol v1) -------------------------------------------------------------------- */

static void inf_usage(FILE *f) {
    fprintf(f, "usage: inference MODEL_DIR [--lora] --config ARCH ACT HIDDEN INTER LAYERS HEADS KV_HEADS\n"
               "         VOCAB HEAD_DIM MAX_POS NORM_EPS ROPE_THETA TIE QKV_BIAS ATTN_SUB_NORM\n"
               "         FFN_SUB_NORM THREADS N_EOS EOS...\n\n"
               "Trillim protocol v1. Per request, stdin lines: num_tokens (0 quits), reset (0/1),\n"
               "temperature, top_k, top_p, repetition_penalty, rep_penalty_lookback, max_tokens (0 =\n"
               "unlimited, bounded by max positions), then num_tokens token ids. stdout: one generated\n"
               "id per line (EOS included), then kv_position. The repetition penalty looks back over\n"
               "the session's cached tokens (all requests since the last reset 1), as attention does.\n"
               "--lora merges MODEL_DIR/qmodel.lora.\n"
               "Malformed input: a message on stderr and exit 3.\n");
}

typedef struct inf_config {
    int64_t v[18];
    double eps, theta;
    int64_t eos[QP_TRILLIM_MAX_EOS];
} inf_config;

static int inf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int inf_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("inference: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return QP_EXIT_BAD_INPUT;
}

/* Reads one protocol line; 1 ok, 0 EOF before any byte, -1 error (too long / EOF mid-line ok). */
static int read_line(char *buf, size_t cap) {
    if (!fgets(buf, (int)cap, stdin)) return 0;
    size_t n = strlen(buf);
    if (n == cap - 1 && buf[n - 1] != '\n') return -1;
    return 1;
}

static int read_num(const char *what, bool is_float, int64_t *iv, double *fv, bool eof_ok, int *eof) {
    char line[256];
    int r = read_line(line, sizeof line);
    if (r == 0) {
        if (eof_ok) {
            *eof = 1;
            return 0;
        }
        return inf_error("unexpected end of input while reading %s", what);
    }
    if (r < 0) return inf_error("%s: line too long", what);
    bool ok = is_float ? parse_f64(line, fv) : parse_i64(line, iv);
    if (!ok) {
        line[strcspn(line, "\r\n")] = '\0';
        return inf_error("%s: '%s' is not %s", what, line, is_float ? "a finite number" : "an integer");
    }
    return 0;
}

int qp_cmd_inference(int argc, char **argv) {
    if (argc >= 2 && qp_cli_is_help(argv[1])) {
        inf_usage(stdout);
        return QP_EXIT_OK;
    }
    if (argc < 3) {
        inf_usage(stderr);
        return QP_EXIT_USAGE;
    }
    const char *dir = argv[1];
    int i = 2;
    bool use_lora = false;
    if (i < argc && strcmp(argv[i], "--lora") == 0) use_lora = true, i++;
    if (i >= argc || strcmp(argv[i], "--config") != 0)
        return qp_cli_usage_error("inference: expected --config after the model folder");
    i++;
    inf_config c;
    memset(&c, 0, sizeof c);
    static const char *const k_names[18] = {"arch_type", "activation", "hidden_dim", "intermediate_dim",
                                            "num_layers", "num_heads", "num_kv_heads", "vocab_size",
                                            "head_dim", "max_position_embeddings", "norm_eps",
                                            "rope_theta", "tie_word_embeddings", "has_qkv_bias",
                                            "has_attn_sub_norm", "has_ffn_sub_norm", "num_threads",
                                            "num_eos_tokens"};
    for (int k = 0; k < 18; k++, i++) {
        if (i >= argc) return qp_cli_usage_error("inference: --config is missing %s (field %d)", k_names[k], k + 1);
        bool ok = k == 10 ? parse_f64(argv[i], &c.eps) : k == 11 ? parse_f64(argv[i], &c.theta)
                                                                : parse_i64(argv[i], &c.v[k]);
        if (!ok || (k != 10 && k != 11 && (c.v[k] < 0 || c.v[k] > (1ll << 31))))
            return qp_cli_usage_error("inference: --config field %d (%s) '%s' is not valid", k + 1,
                                      k_names[k], argv[i]);
    }
    int64_t n_eos = c.v[17];
    if (n_eos > QP_TRILLIM_MAX_EOS) return qp_cli_usage_error("inference: %lld EOS tokens (at most 8)", (long long)n_eos);
    for (int k = 0; k < n_eos; k++, i++) {
        if (i >= argc || !parse_i64(argv[i], &c.eos[k]) || c.eos[k] < 0)
            return qp_cli_usage_error("inference: --config EOS token %d missing or invalid", k + 1);
    }
    if (i != argc) return qp_cli_usage_error("inference: unexpected argument '%s' after the config", argv[i]);
    for (int k = 12; k <= 15; k++)
        if (c.v[k] > 1) return qp_cli_usage_error("inference: --config %s must be 0 or 1", k_names[k]);
    if (!(c.eps > 0) || !(c.theta > 0)) return qp_cli_usage_error("inference: norm_eps and rope_theta must be positive");

    qp_err e;
    qp_err_clear(&e);
    if (qp_format_detect(dir) != QP_FORMAT_TRLM) {
        qp_fail(&e, QP_ERR_FORMAT, "%s: not a TRLM model folder (no qmodel.tensors)", dir);
        return qp_cli_fail(&e);
    }
    qp_model *m = NULL;
    qp_runtime *rt = NULL;
    qp_sampler *sm = NULL;
    int rc = QP_EXIT_OK;
    if (qp_model_open(dir, NULL, &m, &e) != QP_OK) return qp_cli_fail(&e);
    if (use_lora) {
        char *lp = qp_path_join(dir, "qmodel.lora");
        qp_status s = lp ? qp_trlm_apply_lora(m, lp, &e) : qp_fail(&e, QP_ERR_NOMEM, "out of memory");
        qp_free(lp);
        if (s != QP_OK) {
            rc = qp_cli_fail(&e);
            goto done;
        }
    }
    /* the config must describe this model */
    const qp_arch *a = &m->arch;
    const qp_meta *mh = qp_model_meta(m, "trlm.hidden_dim"), *mi = qp_model_meta(m, "trlm.intermediate_dim"),
                  *ma = qp_model_meta(m, "trlm.arch_type");
    struct { const char *what; int64_t got, want; } chk[] = {
        {"arch_type", c.v[0], ma ? (int64_t)ma->v.u : -1},
        {"activation", c.v[1], a->act == QP_ACT_RELU2 ? 0 : 1},
        {"hidden_dim", c.v[2], mh ? (int64_t)mh->v.u : -1},
        {"intermediate_dim", c.v[3], mi ? (int64_t)mi->v.u : -1},
        {"num_layers", c.v[4], a->n_layers},
        {"num_heads", c.v[5], a->n_heads},
        {"num_kv_heads", c.v[6], a->n_kv_heads},
        {"vocab_size", c.v[7], a->vocab},
        {"head_dim", c.v[8], a->head_dim},
        {"tie_word_embeddings", c.v[12], a->tie_embeddings},
        {"has_qkv_bias", c.v[13], a->qkv_bias},
        {"has_attn_sub_norm", c.v[14], a->sub_norms},
        {"has_ffn_sub_norm", c.v[15], a->sub_norms},
    };
    for (size_t k = 0; k < sizeof chk / sizeof chk[0]; k++)
        if (chk[k].got != chk[k].want) {
            rc = inf_error("--config %s is %lld but the model in %s has %lld", chk[k].what,
                           (long long)chk[k].got, dir, (long long)chk[k].want);
            goto done;
        }
    if (c.v[9] < 1 || c.v[9] > a->max_pos) {
        rc = inf_error("--config max_position_embeddings %lld is outside 1..%lld (rope.cache)",
                       (long long)c.v[9], (long long)a->max_pos);
        goto done;
    }
    if (fabs(c.eps - (double)a->norm_eps) > 1e-6 * fabs(c.eps) + 1e-12 ||
        fabs(c.theta - (double)a->rope_theta) > 1e-6 * c.theta) {
        rc = inf_error("--config norm_eps %g / rope_theta %g differ from the model's %g / %g", c.eps,
                       c.theta, (double)a->norm_eps, (double)a->rope_theta);
        goto done;
    }
    for (int k = 0; k < n_eos; k++)
        if (c.eos[k] >= a->vocab) {
            rc = inf_error("--config EOS token %lld is outside the vocabulary (%lld)", (long long)c.eos[k],
                           (long long)a->vocab);
            goto done;
        }
    int threads = (int)c.v[16];
    if (threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 3 ? (int)nc - 2 : 1;
    }
    qp_runtime_opts ro = {threads, c.v[9]};
    if (qp_runtime_new(m, &ro, &rt, &e) != QP_OK) {
        rc = qp_cli_fail(&e);
        goto done;
    }
    int64_t n_ctx = c.v[9], vocab = a->vocab, pos = 0;
    qp_sampler_params sp;
    qp_sampler_params_default(&sp);
    /* ids: this request's prompt; hist: the tokens in the KV cache (hist[k] at position k), which
       every request's sampler re-accepts first, so the repetition penalty looks back across
       requests of the session exactly as attention does (cleared with the cache by reset 1) */
    int32_t *ids = qp_malloc((size_t)n_ctx * sizeof *ids), *hist = qp_malloc((size_t)n_ctx * sizeof *hist);
    if (!ids || !hist) {
        rc = inf_error("out of memory");
        goto done;
    }
    for (;;) {
        int64_t nt, reset, topk, lookback, maxt;
        double temp, topp, rep;
        int eof = 0;
        if ((rc = read_num("num_tokens", false, &nt, NULL, true, &eof)) != 0) break;
        if (eof) break; /* stdin closed between requests: a clean end */
        if (nt == 0) break;
        if (nt < 0 || nt > n_ctx) {
            rc = inf_error("num_tokens %lld is outside 0..%lld", (long long)nt, (long long)n_ctx);
            break;
        }
        if ((rc = read_num("reset_flag", false, &reset, NULL, false, &eof)) != 0 ||
            (rc = read_num("temperature", true, NULL, &temp, false, &eof)) != 0 ||
            (rc = read_num("top_k", false, &topk, NULL, false, &eof)) != 0 ||
            (rc = read_num("top_p", true, NULL, &topp, false, &eof)) != 0 ||
            (rc = read_num("repetition_penalty", true, NULL, &rep, false, &eof)) != 0 ||
            (rc = read_num("rep_penalty_lookback", false, &lookback, NULL, false, &eof)) != 0 ||
            (rc = read_num("max_tokens", false, &maxt, NULL, false, &eof)) != 0)
            break;
        if (reset != 0 && reset != 1) { rc = inf_error("reset_flag %lld is not 0 or 1", (long long)reset); break; }
        if (temp < 0) { rc = inf_error("temperature %g is negative", temp); break; }
        if (topk < 0 || topk > (1ll << 30)) { rc = inf_error("top_k %lld is out of range", (long long)topk); break; }
        if (topp < 0) { rc = inf_error("top_p %g is negative", topp); break; }
        if (!(rep > 0)) { rc = inf_error("repetition_penalty %g must be positive", rep); break; }
        if (lookback < 0 || lookback > (1ll << 30)) { rc = inf_error("rep_penalty_lookback %lld is out of range", (long long)lookback); break; }
        if (maxt < 0) { rc = inf_error("max_tokens %lld is negative", (long long)maxt); break; }
        for (int64_t k = 0; k < nt; k++) {
            int64_t id;
            char what[48];
            snprintf(what, sizeof what, "token id %lld", (long long)k + 1);
            if ((rc = read_num(what, false, &id, NULL, false, &eof)) != 0) break;
            if (id < 0 || id >= vocab) {
                rc = inf_error("token id %lld is outside the vocabulary (0..%lld)", (long long)id, (long long)vocab - 1);
                break;
            }
            ids[k] = (int32_t)id;
        }
        if (rc) break;
        if (reset) {
            qp_runtime_reset(rt);
            pos = 0;
        }
        if (pos + nt > n_ctx) {
            rc = inf_error("%lld new tokens at kv_position %lld exceed max_position_embeddings %lld",
                           (long long)nt, (long long)pos, (long long)n_ctx);
            break;
        }
        /* the sampler holds this request's parameters; its history is the cached tokens */
        qp_sampler_free(sm);
        sm = NULL;
        sp.temperature = (float)temp;
        sp.top_k = (int32_t)topk;
        sp.top_p = (float)topp;
        sp.repeat_penalty = (float)rep;
        sp.repeat_last_n = (int32_t)lookback;
        if (qp_sampler_new(&sp, vocab, &sm, &e) != QP_OK) { rc = qp_cli_fail(&e); break; }
        for (int64_t k = 0; k < pos && rc == 0; k++)
            if (qp_sampler_accept(sm, hist[k], &e) != QP_OK) rc = qp_cli_fail(&e);
        float *logits = NULL;
        for (int64_t k = 0; k < nt && rc == 0; k++) {
            if (qp_runtime_forward(rt, ids[k], pos, &logits, &e) != QP_OK ||
                qp_sampler_accept(sm, ids[k], &e) != QP_OK)
                rc = qp_cli_fail(&e);
            hist[pos++] = ids[k];
        }
        if (rc) break;
        int64_t g = 0;
        for (;;) {
            int32_t tok;
            if (qp_sampler_sample(sm, logits, &tok, &e) != QP_OK || qp_sampler_accept(sm, tok, &e) != QP_OK) {
                rc = qp_cli_fail(&e);
                break;
            }
            printf("%d\n", tok);
            fflush(stdout);
            g++;
            bool stop = maxt > 0 && g >= maxt;
            for (int k = 0; k < n_eos; k++) stop |= tok == c.eos[k];
            if (pos < n_ctx) {
                if (qp_runtime_forward(rt, tok, pos, &logits, &e) != QP_OK) {
                    rc = qp_cli_fail(&e);
                    break;
                }
                hist[pos++] = tok;
            } else {
                stop = true; /* the context is full: the token is emitted but not cached */
            }
            if (stop) break;
        }
        if (rc) break;
        printf("%lld\n", (long long)pos);
        fflush(stdout);
    }
    qp_free(ids);
    qp_free(hist);
done:
    qp_sampler_free(sm);
    qp_runtime_free(rt);
    qp_model_close(m);
    return rc;
}
