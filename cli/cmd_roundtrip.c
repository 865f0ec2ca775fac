/* quantpack roundtrip SRC --via FMT[,FMT...] [-o REPORT_DIR] [--quant Q] [--keep]: converts SRC
 * through each format and back, then proves both hops (cli/roundtrip.md: the paths, the proofs,
 * the report's schema). Exit 0 when every hop passes, 1 when a proof fails, 2-5 as usual. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "converters/tensor_compare.h"
#include "core/json.h"

#define RT_MAX_VIA 16

typedef struct rt_format {
    const char *name;
    qp_convert_target target;
    const char *quant; /* the default --quant of the hop there; NULL: the format takes none */
    const char *file;  /* the intermediate's name in the work folder: via-<n>-<file> */
} rt_format;

/* lossless defaults where the format has them; TRLM's bf16 keeps BF16 sources exactly */
static const rt_format k_formats[] = {
    {"gguf", QP_CONVERT_TO_GGUF, "F32", "gguf.gguf"},
    {"rdrr", QP_CONVERT_TO_RDRR, "F32", "rdrr"},
    {"trlm", QP_CONVERT_TO_TRLM, "bf16", "trlm"},
    {"bullet", QP_CONVERT_TO_BULLET, NULL, "model.bullet"},
    {"safetensors", QP_CONVERT_TO_SAFETENSORS, "F32", "safetensors"},
};
enum { RT_N_FORMATS = sizeof k_formats / sizeof k_formats[0] };

typedef struct rt_args {
    const char *src, *via, *report_dir, *quant, *tokenizer;
    int64_t threads, n_gen;
    bool keep, force, allow_requantize;
    double min_cos, max_kl, min_top1;
    bool given_cos, given_kl, given_top1; /* those three were on the command line */
} rt_args;

/* One path: SRC -> FMT (quant) -> back. */
typedef struct rt_path {
    const rt_format *fmt;
    const char *quant;
} rt_path;

/* Where every path comes back to (cli/roundtrip.md "Back"). */
typedef struct rt_back {
    qp_convert_target target;
    const char *name, *quant, *why;
} rt_back;

typedef struct rt_ctx {
    const rt_args *a;
    qp_open_opts oo;
    qp_model *src;
    rt_back back;
    const char *work; /* the staging folder of the intermediates */
    cJSON *paths;
    int rc;           /* 0, 1 (a proof failed) or the first error's exit code */
} rt_ctx;

typedef struct rt_hop {
    const char *from, *to, *quant;
    const char *proof; /* "verify" or "tensors" */
    bool passed;
    double seconds;    /* the conversion */
    char detail[640];
    cJSON *json;
} rt_hop;

static const char k_usage[] =
    "usage: quantpack roundtrip SRC --via FMT[,FMT...] [-o REPORT_DIR] [--quant Q] [--keep]\n\n"
    "Converts SRC to each FMT (gguf, rdrr, trlm, bullet, safetensors; FMT:Q gives that hop\n"
    "its own --quant) and back to SRC's kind (to GGUF F32 or safetensors F32 when SRC's kind\n"
    "has no F32 writer: llama2.c, TRLM, .bullet), then proves each hop. On a lossless path\n"
    "(F32 or keep, or F16/BF16 over tensors already stored so) both hops must hold SRC's\n"
    "tensors: the same names, shapes and values (bytes when the encodings match, else the\n"
    "F32 decodings bit for bit; q/k rows through the RoPE permutation; containers are not\n"
    "compared), and the intermediate passes verify. Every hop of a lossy path is verified\n"
    "against SRC with the thresholds of the intermediate's encoding class (as verify).\n"
    "Defaults: gguf, rdrr, safetensors F32; trlm bf16; bullet BQ4 (always lossy).\n"
    "Prints a table; -o writes REPORT_DIR/roundtrip.json (schema in cli/roundtrip.md), and\n"
    "with --keep the intermediates in REPORT_DIR/intermediates (else a folder in $TMPDIR,\n"
    "removed at the end and on SIGINT/SIGTERM/SIGHUP).\n"
    "Exit 0 when every hop passes, 1 when a proof fails, 2-5 as for every command.\n";

/* ---- the command line ------------------------------------------------------------------------ */

static const rt_format *format_named(const char *name, size_t len) {
    for (size_t k = 0; k < RT_N_FORMATS; k++)
        if (strlen(k_formats[k].name) == len && strncasecmp(k_formats[k].name, name, len) == 0)
            return &k_formats[k];
    return NULL;
}

/* --via "gguf,rdrr:F16,bullet" -> paths (the words stay in via, split in place). */
static int parse_via(char *via, const rt_args *a, rt_path *paths, int *n) {
    *n = 0;
    for (char *w = strtok(via, ","); w; w = strtok(NULL, ",")) {
        char *colon = strchr(w, ':');
        const rt_format *f = format_named(w, colon ? (size_t)(colon - w) : strlen(w));
        if (!f)
            return qp_cli_usage_error("roundtrip: --via '%s' is not a format (gguf, rdrr, trlm, "
                                      "bullet, safetensors)", w);
        if (*n == RT_MAX_VIA) return qp_cli_usage_error("roundtrip: more than %d --via formats", RT_MAX_VIA);
        const char *q = colon ? colon + 1 : f->quant && a->quant ? a->quant : f->quant;
        if (colon && !f->quant) return qp_cli_usage_error("roundtrip: %s takes no quant ('%s')", f->name, w);
        paths[(*n)++] = (rt_path){f, q && *q ? q : NULL};
    }
    if (*n == 0) return qp_cli_usage_error("roundtrip: --via names no format");
    return QP_CLI_RUN;
}

/* ---- the paths back ------------------------------------------------------------------------- */

/* SRC's kind when it has an F32 writer; else the F32 writer keeping SRC's q/k row order:
 * GGUF for adjacent pairs (llama2.c, .bullet), safetensors for halves (TRLM). */
static rt_back back_of(const qp_model *src) {
    switch (src->format) {
    case QP_FORMAT_GGUF: return (rt_back){QP_CONVERT_TO_GGUF, "gguf", "F32", NULL};
    case QP_FORMAT_RDRR: return (rt_back){QP_CONVERT_TO_RDRR, "rdrr", "F32", NULL};
    case QP_FORMAT_SAFETENSORS: return (rt_back){QP_CONVERT_TO_SAFETENSORS, "safetensors", "F32", NULL};
    default: break;
    }
    if (src->arch.rope_style == QP_ROPE_NORM)
        return (rt_back){QP_CONVERT_TO_GGUF, "gguf", "F32",
                         "SRC's kind has no F32 writer: back to GGUF F32 (adjacent-pair q/k rows as SRC)"};
    return (rt_back){QP_CONVERT_TO_SAFETENSORS, "safetensors", "F32",
                     "SRC's kind has no F32 writer: back to safetensors F32 (half-split q/k rows as SRC)"};
}

/* A Gemma norm is w in an HF folder and 1 + w (rounded to F32) in a GGUF: through the other kind
 * the values change (cli/roundtrip.md). RDRR keeps its source's form. Qwen3.5's norms and A_log
 * (GGUF: 1 + w, -exp(A_log)) change form between an HF folder and a GGUF. */
static bool values_change_form(const qp_model *src, const rt_format *f) {
    if (src->arch.family == QP_FAMILY_QWEN35)
        return f->target == QP_CONVERT_TO_GGUF ? src->format != QP_FORMAT_GGUF
                                               : f->target == QP_CONVERT_TO_SAFETENSORS && src->format == QP_FORMAT_GGUF;
    if (!qp_family_is_gemma(src->arch.family)) return false;
    return src->arch.norm_plus_one ? f->target == QP_CONVERT_TO_GGUF : f->target == QP_CONVERT_TO_SAFETENSORS;
}

/* Whether SRC -> f (quant) -> back keeps every value: a widening quant over tensors that decode
 * without a scale kept elsewhere, Gemma / Qwen3.5 values kept in their form. QP_ROUNDTRIP_CLAIM_LOSSLESS=1
 * (a test hook) claims it always, so a lossy path must fail the tensor proof. */
static bool claims_lossless(const qp_model *src, const rt_format *f, const char *quant) {
    const char *hook = getenv("QP_ROUNDTRIP_CLAIM_LOSSLESS");
    if (hook && strcmp(hook, "1") == 0) return true;
    if (!quant || f->target == QP_CONVERT_TO_TRLM || f->target == QP_CONVERT_TO_BULLET) return false;
    if (values_change_form(src, f)) return false;
    bool widen = strcasecmp(quant, "F32") == 0 || strcasecmp(quant, "keep") == 0;
    qp_encoding q = qp_encoding_from_name(quant);
    if (!widen && q != QP_ENC_F16 && q != QP_ENC_BF16) return false;
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const qp_tensor *x = &src->tensors[i];
        const qp_encoding_traits *t = qp_encoding_get(qp_tensor_stored_enc(x));
        if (t->flags & (QP_ENC_FLAG_EXT_SCALE | QP_ENC_FLAG_SIBLING_SCALE)) return false;
        /* a packed BitNet U8 + weight_scale: the writers fold the scale into float weights */
        const char *name = x->canon ? x->canon : x->name;
        size_t nl = name ? strlen(name) : 0;
        if (nl > 6 && strcmp(name + nl - 6, "_scale") == 0) return false;
        if (!widen && t->id != q) return false;
    }
    return true;
}

/* ---- hops ------------------------------------------------------------------------------------ */

static bool has_tokenizer(const qp_model *m) {
    return m->vocab.n_tokens > 0 && m->vocab.model != QP_TOK_NONE;
}

/* A model the work folder holds, with --tokenizer when it has none of its own. */
static qp_status open_model(const rt_ctx *c, const char *path, qp_model **m, qp_err *e) {
    qp_status s = qp_model_open(path, NULL, m, e);
    if (s != QP_OK || !c->oo.tokenizer_path || (*m)->vocab.n_tokens > 0) return s;
    qp_model_close(*m);
    *m = NULL;
    return qp_model_open(path, &c->oo, m, e);
}

static qp_status convert_hop(const rt_ctx *c, const qp_model *from, qp_convert_target to,
                             const char *quant, const char *out, rt_hop *h, qp_err *e) {
    qp_convert_params p;
    qp_convert_params_default(&p);
    p.target = to;
    p.quant = quant;
    p.n_threads = (int)c->a->threads;
    p.allow_requantize = c->a->allow_requantize;
    double t0 = qp_cli_now_s();
    qp_status s = qp_convert_model(from, &p, out, NULL, e);
    h->seconds = qp_cli_now_s() - t0;
    return s;
}

/* Test hook QP_ROUNDTRIP_TAMPER=FMT: flips the lowest bit of the first tensor's first byte in
 * the single-file intermediate of FMT (gguf, bullet), as a corrupted write would. */
static qp_status tamper_hook(const rt_ctx *c, const rt_format *f, const char *path, qp_err *e) {
    const char *hook = getenv("QP_ROUNDTRIP_TAMPER");
    if (!hook || strcasecmp(hook, f->name) != 0 || qp_path_is_dir(path)) return QP_OK;
    qp_model *m = NULL;
    qp_status s = open_model(c, path, &m, e);
    if (s != QP_OK) return s;
    off_t at = m->n_tensors > 0 ? (off_t)m->tensors[0].offset : -1;
    qp_model_close(m);
    int fd = at >= 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
    unsigned char b = 0;
    bool ok = fd >= 0 && pread(fd, &b, 1, at) == 1 && (b ^= 1, pwrite(fd, &b, 1, at) == 1);
    if (fd >= 0) close(fd);
    return ok ? QP_OK : qp_fail(e, QP_ERR_IO, "%s: test hook QP_ROUNDTRIP_TAMPER: %s", path, strerror(errno));
}

static void add_thresholds(cJSON *o, const qp_verify_thresholds *th) {
    cJSON *t = cJSON_AddObjectToObject(o, "thresholds");
    cJSON_AddStringToObject(t, "class", th->class_name ? th->class_name : "custom");
    cJSON_AddNumberToObject(t, "min_mean_cosine", th->min_cosine);
    cJSON_AddNumberToObject(t, "max_mean_kl", th->max_kl);
    cJSON_AddNumberToObject(t, "min_top1", th->min_top1);
}

/* "; reason; reason" from verify's lines into buf. */
static void one_line(char *buf, size_t cap, const char *reasons) {
    size_t k = 0;
    for (const char *r = reasons; *r && k + 3 < cap; r++) {
        if (r == reasons || r[-1] == '\n') {
            if (*r == '\n') continue;
            buf[k++] = ';';
            buf[k++] = ' ';
        }
        if (*r != '\n' && k + 1 < cap) buf[k++] = *r;
    }
    buf[k] = '\0';
}

/* The verify receipt of out against SRC (SRC's tokenizer, else out's; without either, BOS and
 * four ids spread over the vocabulary as verify does). */
static qp_status verify_hop(const rt_ctx *c, const qp_model *out, const qp_verify_thresholds *th,
                            rt_hop *h, qp_err *e) {
    qp_verify_opts vo = {.n_threads = (int)c->a->threads, .n_generate = c->a->n_gen, .th = *th};
    qp_verify_report *rep = NULL;
    qp_status s;
    if (has_tokenizer(c->src) || has_tokenizer(out)) {
        s = qp_verify_text(out, c->src, "Once upon a time", &vo, &rep, e);
    } else {
        int64_t v = c->src->arch.vocab;
        int32_t ids[5] = {c->src->arch.bos_id >= 0 ? c->src->arch.bos_id : 1, (int32_t)(v / 2),
                          (int32_t)(v / 3), (int32_t)(v / 5), (int32_t)(v / 7)};
        qp_verify_prompt p = {ids, 5, NULL};
        s = qp_verify_run(out, c->src, &p, 1, &vo, &rep, e);
    }
    char *json = NULL;
    if (s == QP_OK) s = qp_verify_report_json(rep, &json, e);
    if (s == QP_OK) {
        const qp_verify_prompt_result *p = qp_verify_report_prompt(rep, 0);
        h->passed = qp_verify_report_passed(rep);
        int n = snprintf(h->detail, sizeof h->detail, "%s: cosine %.9f, KL %.3g, top-1 %.4f, greedy %lld/%lld",
                         th->class_name ? th->class_name : "custom", p->mean_cosine, p->mean_kl,
                         p->top1_agreement, (long long)p->matched, (long long)c->a->n_gen);
        if (!h->passed && n > 0 && (size_t)n < sizeof h->detail)
            one_line(h->detail + n, sizeof h->detail - (size_t)n, qp_verify_report_reasons(rep));
        cJSON_AddItemToObject(h->json, "receipt", cJSON_Parse(json));
    }
    qp_free(json);
    qp_verify_report_free(rep);
    return s;
}

/* Tensor identity of m with SRC (converters/tensor_compare.h) into h. */
static qp_status tensors_hop(const rt_ctx *c, const qp_model *m, rt_hop *h, qp_err *e) {
    qp_tensor_compare_result r;
    qp_status s = qp_models_compare_tensors(c->src, m, &r, e);
    if (s != QP_OK) return s;
    h->passed = r.equal;
    if (r.equal)
        snprintf(h->detail, sizeof h->detail, "%lld tensors equal: %lld same bytes, %lld same F32 "
                 "values, %lld q/k reordered", (long long)r.n_tensors, (long long)r.n_same_bytes,
                 (long long)r.n_same_f32, (long long)r.n_reordered);
    else
        snprintf(h->detail, sizeof h->detail, "%s", r.reason);
    cJSON *t = cJSON_AddObjectToObject(h->json, "tensors");
    cJSON_AddNumberToObject(t, "compared", (double)r.n_tensors);
    cJSON_AddNumberToObject(t, "same_bytes", (double)r.n_same_bytes);
    cJSON_AddNumberToObject(t, "same_f32_values", (double)r.n_same_f32);
    cJSON_AddNumberToObject(t, "qk_rows_reordered", (double)r.n_reordered);
    if (!r.equal) cJSON_AddStringToObject(t, "difference", r.reason);
    return QP_OK;
}

/* Both proofs of a lossless hop 1: the tensors, then the receipt; passes when both do. */
static qp_status tensors_and_verify_hop(const rt_ctx *c, const qp_model *m, const qp_verify_thresholds *th,
                                        rt_hop *h, qp_err *e) {
    qp_status s = tensors_hop(c, m, h, e);
    if (s != QP_OK) return s;
    bool tensors_passed = h->passed;
    char tensors_detail[sizeof h->detail];
    memcpy(tensors_detail, h->detail, sizeof tensors_detail);
    s = verify_hop(c, m, th, h, e);
    if (s != QP_OK) return s;
    char verify_detail[sizeof h->detail];
    memcpy(verify_detail, h->detail, sizeof verify_detail);
    snprintf(h->detail, sizeof h->detail, "%.300s; verify %.300s", tensors_detail, verify_detail);
    h->passed = tensors_passed && h->passed;
    return QP_OK;
}

/* ---- one path -------------------------------------------------------------------------------- */

static void print_row(const rt_path *p, const rt_hop *h, const char *verdict) {
    char hop[48];
    snprintf(hop, sizeof hop, "%s -> %s", h->from, h->to);
    printf("%-12s %-8s %-26s %-14s %-6s %s\n", p->fmt->name, p->quant ? p->quant : "-", hop,
           h->proof ? h->proof : "-", verdict, h->detail);
}

/* Ends a hop: its row on stdout, its JSON in hops, the ctx's exit code. s: the hop's status. */
static void end_hop(rt_ctx *c, const rt_path *p, rt_hop *h, cJSON *hops, qp_status s, qp_err *e) {
    const char *verdict = s != QP_OK ? "error" : h->passed ? "pass" : "FAIL";
    if (s != QP_OK) {
        int code = qp_cli_fail(e); /* the message on stderr */
        snprintf(h->detail, sizeof h->detail, "%.600s", e->msg[0] ? e->msg : qp_status_name(s));
        if (c->rc <= QP_EXIT_VERIFY_FAILED) c->rc = code;
    } else if (!h->passed && c->rc == QP_EXIT_OK) {
        c->rc = QP_EXIT_VERIFY_FAILED;
    }
    cJSON_AddStringToObject(h->json, "from", h->from);
    cJSON_AddStringToObject(h->json, "to", h->to);
    if (h->quant) cJSON_AddStringToObject(h->json, "quant", h->quant);
    cJSON_AddNumberToObject(h->json, "convert_seconds", h->seconds);
    if (h->proof) cJSON_AddStringToObject(h->json, "proof", h->proof);
    cJSON_AddStringToObject(h->json, "verdict", verdict[0] == 'F' ? "fail" : verdict);
    cJSON_AddStringToObject(h->json, "detail", h->detail);
    cJSON_AddItemToArray(hops, h->json);
    print_row(p, h, verdict);
    fflush(stdout);
}

/* The thresholds of a lossy hop: the class of the intermediate's encodings, or the command's. */
static qp_verify_thresholds lossy_thresholds(const rt_ctx *c, const qp_model *via) {
    qp_verify_thresholds th;
    qp_verify_default_thresholds(via, c->src, &th);
    const rt_args *a = c->a;
    if (a->given_cos || a->given_kl || a->given_top1) th.class_name = "custom";
    if (a->given_cos) th.min_cosine = a->min_cos;
    if (a->given_kl) th.max_kl = a->max_kl;
    if (a->given_top1) th.min_top1 = a->min_top1;
    return th;
}

/* SRC -> via: convert (and the test hook), open, prove: a receipt, and the tensors too when the
 * path is lossless. *via is the caller's. */
static qp_status first_hop(rt_ctx *c, const rt_path *p, bool lossless, const char *out,
                           qp_model **via, rt_hop *h, qp_err *e) {
    qp_status s = convert_hop(c, c->src, p->fmt->target, p->quant, out, h, e);
    if (s == QP_OK) s = tamper_hook(c, p->fmt, out, e);
    if (s == QP_OK) s = open_model(c, out, via, e);
    if (s != QP_OK) return s;
    qp_verify_thresholds th;
    if (lossless) qp_verify_default_thresholds(*via, c->src, &th);
    else th = lossy_thresholds(c, *via);
    add_thresholds(h->json, &th);
    /* a mixture of experts changes its tensors' names and count in GGUF (merged experts) */
    if (!lossless || c->src->arch.n_experts > 0) {
        h->proof = "verify";
        return verify_hop(c, *via, &th, h, e);
    }
    h->proof = "tensors+verify";
    return tensors_and_verify_hop(c, *via, &th, h, e);
}

/* via -> back: convert, open, prove by the tensors (lossless) or by verify. */
static qp_status second_hop(rt_ctx *c, const qp_model *via, bool lossless, const char *out,
                            rt_hop *h, qp_err *e) {
    qp_model *back = NULL;
    qp_status s = convert_hop(c, via, c->back.target, c->back.quant, out, h, e);
    if (s == QP_OK) s = open_model(c, out, &back, e);
    if (s == QP_OK && lossless) {
        h->proof = "tensors";
        s = tensors_hop(c, back, h, e);
    } else if (s == QP_OK) {
        h->proof = "verify";
        qp_verify_thresholds th = lossy_thresholds(c, via);
        add_thresholds(h->json, &th);
        s = verify_hop(c, back, &th, h, e);
    }
    qp_model_close(back);
    return s;
}

static void run_path(rt_ctx *c, const rt_path *p, int index) {
    bool lossless = claims_lossless(c->src, p->fmt, p->quant);
    cJSON *pj = cJSON_CreateObject(), *hops = NULL;
    cJSON_AddItemToArray(c->paths, pj);
    cJSON_AddStringToObject(pj, "via", p->fmt->name);
    if (p->quant) cJSON_AddStringToObject(pj, "quant", p->quant);
    cJSON_AddBoolToObject(pj, "lossless", lossless);
    hops = cJSON_AddArrayToObject(pj, "hops");
    char via_file[64], back_file[64]; /* numbered: --via may name a format twice */
    snprintf(via_file, sizeof via_file, "via-%d-%s", index + 1, p->fmt->file);
    snprintf(back_file, sizeof back_file, "back-%d-from-%s", index + 1, p->fmt->name);
    char *out1 = qp_path_join(c->work, via_file), *out2 = qp_path_join(c->work, back_file);
    qp_err e = {0};
    qp_model *via = NULL;
    rt_hop h1 = {.from = "SRC", .to = p->fmt->name, .quant = p->quant, .json = cJSON_CreateObject()};
    qp_status s = out1 && out2 ? first_hop(c, p, lossless, out1, &via, &h1, &e)
                               : qp_fail(&e, QP_ERR_NOMEM, "out of memory");
    end_hop(c, p, &h1, hops, s, &e);
    if (s == QP_OK) {
        rt_hop h2 = {.from = p->fmt->name, .to = c->back.name, .quant = c->back.quant,
                     .json = cJSON_CreateObject()};
        qp_err_clear(&e);
        s = second_hop(c, via, lossless, out2, &h2, &e);
        end_hop(c, p, &h2, hops, s, &e);
    }
    qp_model_close(via);
    for (int k = 0; k < 2 && !c->a->keep; k++) { /* disk use: one path's intermediates at a time */
        const char *o = k ? out2 : out1;
        qp_err_clear(&e);
        if (o && qp_path_remove_tree(o, &e) != QP_OK) fprintf(stderr, "quantpack: warning: %s\n", e.msg);
    }
    qp_free(out1);
    qp_free(out2);
}

/* ---- the work folder and the report ---------------------------------------------------------- */

#define RT_MARKER "roundtrip-intermediates.txt"
static const char *const k_work_patterns[] = {"via-*", "back-*", RT_MARKER, NULL};
static const qp_outdir_kind k_work_kind = {"round-trip intermediates", RT_MARKER, k_work_patterns};

/* Where the intermediates are kept: REPORT_DIR/intermediates, or $TMPDIR/quantpack-roundtrip. */
static void work_path(const rt_args *a, char *path, size_t n) {
    const char *tmp = getenv("TMPDIR");
    if (a->report_dir) snprintf(path, n, "%s/intermediates", a->report_dir);
    else snprintf(path, n, "%s/quantpack-roundtrip", tmp && *tmp ? tmp : "/tmp");
}

/* The work folder, staged beside work_path (a partial output: removed on signals; the staging
 * folders of killed runs are removed first, as every output's are). */
static int open_work(const rt_args *a, qp_outdir **od) {
    char path[4096];
    work_path(a, path, sizeof path);
    if (a->keep) {
        const char *inputs[] = {a->src, a->tokenizer};
        int rc = qp_cli_prepare_output(path, a->force, &k_work_kind, inputs, 2);
        if (rc != QP_EXIT_OK) return rc;
    }
    qp_err e = {0};
    int removed = 0;
    char *marker = NULL;
    static const char text[] = "intermediates of `quantpack roundtrip` (cli/roundtrip.md)\n";
    /* without --keep nothing is ever renamed onto path: a kept folder there does not block */
    qp_status s = qp_output_remove_stale(path, &removed, &e);
    if (s == QP_OK) s = qp_outdir_open(path, &k_work_kind, a->force || !a->keep, od, &e);
    if (s == QP_OK && !(marker = qp_outdir_join(*od, RT_MARKER))) s = qp_fail(&e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = qp_file_write_atomic(marker, text, sizeof text - 1, &e);
    qp_free(marker);
    if (s == QP_OK) return QP_EXIT_OK;
    if (*od) qp_outdir_abort(*od);
    *od = NULL;
    return qp_cli_fail(&e);
}

/* --keep: the work folder renamed onto work_path (*kept, heap); else removed. */
static int close_work(const rt_args *a, qp_outdir *od, char **kept) {
    *kept = NULL;
    if (!a->keep) {
        qp_outdir_abort(od);
        return QP_EXIT_OK;
    }
    char path[4096];
    work_path(a, path, sizeof path);
    qp_err e = {0};
    if (qp_outdir_commit(od, &e) != QP_OK) return qp_cli_fail(&e);
    if (!(*kept = qp_strdup(path))) return qp_cli_error(QP_ERR_NOMEM, "out of memory");
    printf("intermediates kept in %s\n", path);
    return QP_EXIT_OK;
}

/* The report folder exists (made when absent: *made) and its roundtrip.json may be written. */
static int prepare_report(const rt_args *a, char **json_path, bool *made) {
    *json_path = NULL;
    *made = false;
    if (!a->report_dir) return QP_EXIT_OK;
    if (mkdir(a->report_dir, 0777) == 0) *made = true;
    else if (errno != EEXIST)
        return qp_cli_error(QP_ERR_IO, "%s: cannot create the report folder: %s", a->report_dir, strerror(errno));
    if (!qp_path_is_dir(a->report_dir))
        return qp_cli_error(QP_ERR_IO, "%s: not a folder (-o names the report folder)", a->report_dir);
    if (!(*json_path = qp_path_join(a->report_dir, "roundtrip.json"))) return qp_cli_error(QP_ERR_NOMEM, "out of memory");
    const char *inputs[] = {a->src, a->tokenizer};
    return qp_cli_prepare_output(*json_path, a->force, NULL, inputs, 2);
}

static cJSON *report_new(const rt_ctx *c) {
    cJSON *r = qp_json_doc_new("quantpack.roundtrip.report", 1);
    if (!r) return NULL;
    cJSON *s = cJSON_AddObjectToObject(r, "source");
    cJSON_AddStringToObject(s, "path", c->src->path);
    cJSON_AddStringToObject(s, "format", qp_format_name(c->src->format));
    cJSON_AddStringToObject(s, "arch", c->src->arch_name ? c->src->arch_name : "");
    cJSON *b = cJSON_AddObjectToObject(r, "back");
    cJSON_AddStringToObject(b, "format", c->back.name);
    cJSON_AddStringToObject(b, "quant", c->back.quant);
    if (c->back.why) cJSON_AddStringToObject(b, "note", c->back.why);
    return r;
}

static int write_report(cJSON *r, const char *path, int rc, const char *kept) {
    cJSON_AddStringToObject(r, "verdict", rc == QP_EXIT_OK ? "pass" : rc == QP_EXIT_VERIFY_FAILED ? "fail" : "error");
    if (kept) cJSON_AddStringToObject(r, "intermediates", kept);
    else cJSON_AddNullToObject(r, "intermediates");
    if (!path) return QP_EXIT_OK;
    char *text = cJSON_Print(r);
    qp_err e = {0};
    qp_status s = text ? qp_file_write_atomic(path, text, strlen(text), &e) : qp_fail(&e, QP_ERR_NOMEM, "out of memory");
    cJSON_free(text);
    if (s != QP_OK) return qp_cli_fail(&e);
    printf("report: %s\n", path);
    return QP_EXIT_OK;
}

/* ---- the command ----------------------------------------------------------------------------- */

static int run_all(rt_ctx *c, const rt_path *paths, int n, const char *json_path) {
    qp_outdir *od = NULL;
    int rc = open_work(c->a, &od);
    if (rc != QP_EXIT_OK) return rc;
    c->work = qp_outdir_path(od);
    cJSON *report = report_new(c);
    c->paths = cJSON_AddArrayToObject(report, "paths");
    if (!c->paths) {
        cJSON_Delete(report);
        qp_outdir_abort(od);
        return qp_cli_error(QP_ERR_NOMEM, "out of memory");
    }
    if (c->back.why) printf("note: %s\n", c->back.why);
    printf("%-12s %-8s %-26s %-14s %-6s %s\n", "via", "quant", "hop", "proof", "result", "detail");
    for (int i = 0; i < n; i++) run_path(c, &paths[i], i);
    char *kept = NULL;
    rc = close_work(c->a, od, &kept);
    int wrc = write_report(report, json_path, c->rc, kept);
    cJSON_Delete(report);
    qp_free(kept);
    rc = rc != QP_EXIT_OK ? rc : wrc != QP_EXIT_OK ? wrc : c->rc;
    return rc == QP_EXIT_OK ? qp_cli_flush_stdout() : rc;
}

/* Opens SRC and runs every path. */
static int run_source(const rt_args *a, const rt_path *paths, int n, const char *json_path) {
    rt_ctx c = {.a = a, .oo = {.tokenizer_path = a->tokenizer}};
    qp_err e = {0};
    int rc;
    if (qp_model_open(a->src, &c.oo, &c.src, &e) != QP_OK) return qp_cli_fail(&e);
    qp_cli_warn_problems(c.src);
    c.back = back_of(c.src);
    rc = run_all(&c, paths, n, json_path);
    qp_model_close(c.src);
    return rc;
}

int qp_cmd_roundtrip(int argc, char **argv) {
    rt_args a = {.threads = 0, .n_gen = 32};
    const qp_cli_opt opts[] = {
        {"--via", NULL, QP_CLI_STR, &a.via, .arg = "FMT[,FMT...]",
         .help = "gguf, rdrr, trlm, bullet, safetensors; FMT:Q for that hop's quant"},
        {"--output", "-o", QP_CLI_STR, &a.report_dir, .arg = "REPORT_DIR",
         .help = "write REPORT_DIR/roundtrip.json (made when absent)"},
        {"--quant", "-q", QP_CLI_STR, &a.quant, .arg = "Q",
         .help = "the quant of every FMT that takes one (default: F32; trlm bf16)"},
        {"--keep", NULL, QP_CLI_FLAG, &a.keep,
         .help = "keep the intermediates (REPORT_DIR/intermediates, else $TMPDIR)"},
        {"--tokenizer", NULL, QP_CLI_STR, &a.tokenizer, .arg = "FILE",
         .help = "tokenizer for SRC when it has none (llama2.c tokenizer.bin)"},
        QP_CLI_THREADS(&a.threads, 0),
        {"--n-predict", "-n", QP_CLI_I64, &a.n_gen, .lo = 1, .hi = 65536, .arg = "N",
         .help = "greedy tokens of each verify (default 32)"},
        {"--min-cosine", NULL, QP_CLI_F64, &a.min_cos, .arg = "X", .help = "lossy hops: mean cosine must be >= X"},
        {"--max-kl", NULL, QP_CLI_F64, &a.max_kl, .flo = 0, .fhi = DBL_MAX, .arg = "X",
         .help = "lossy hops: mean KL must be <= X"},
        {"--min-top1", NULL, QP_CLI_F64, &a.min_top1, .arg = "X", .help = "lossy hops: top-1 agreement must be >= X"},
        {"--allow-requantize", NULL, QP_CLI_FLAG, &a.allow_requantize,
         .help = "quantized SRC tensors may be quantized again (bullet)"},
        {"--force", "-f", QP_CLI_FLAG, &a.force,
         .help = "replace REPORT_DIR/roundtrip.json and kept intermediates"},
    };
    enum { N_OPTS = sizeof opts / sizeof opts[0], MIN_COS = 7, MAX_KL, MIN_TOP1 };
    const qp_cli_cmd cmd = {"roundtrip", k_usage, NULL, opts, N_OPTS, 0, &a.src, 1, NULL, NULL};
    bool given[N_OPTS];
    int rc = qp_cli_parse(&cmd, argc, argv, given);
    if (rc != QP_CLI_RUN) return rc;
    a.given_cos = given[MIN_COS];
    a.given_kl = given[MAX_KL];
    a.given_top1 = given[MIN_TOP1];
    if (!a.src) return qp_cli_usage_error("roundtrip: no SRC given");
    if (!a.via) return qp_cli_usage_error("roundtrip: --via FMT[,FMT...] is required");
    char via[512];
    if (strlen(a.via) >= sizeof via) return qp_cli_usage_error("roundtrip: --via is too long");
    memcpy(via, a.via, strlen(a.via) + 1);
    rt_path paths[RT_MAX_VIA];
    int n = 0;
    if ((rc = parse_via(via, &a, paths, &n)) != QP_CLI_RUN) return rc;
    char *json_path = NULL;
    bool made = false;
    if ((rc = prepare_report(&a, &json_path, &made)) == QP_EXIT_OK) rc = run_source(&a, paths, n, json_path);
    /* a run that wrote no report leaves no empty report folder (rmdir keeps a non-empty one) */
    if (made && rc > QP_EXIT_VERIFY_FAILED) (void)rmdir(a.report_dir);
    qp_free(json_path);
    return rc;
}
