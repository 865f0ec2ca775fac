/* quantpack convert SRC --to gguf --quant Q -o OUT [--threads N] [--tokenizer FILE] [--dry-run]
 * [--allow-requantize]: any readable model to a GGUF file (converters/recipes.md); --to rdrr,
 * trlm and bullet are handed to their own commands. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "converters/convert_gguf.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: quantpack convert SRC --to gguf --quant Q -o OUT [--threads N]\n"
            "                         [--tokenizer FILE] [--dry-run] [--allow-requantize]\n\n"
            "SRC: a safetensors model directory (Llama, Mistral, Qwen2, BitNet float or packed),\n"
            "     a GGUF file, or a llama2.c checkpoint (with --tokenizer).\n"
            "Q:   Q4_K_M, Q6_K, Q8_0, F16, BF16, F32 (llama.cpp's recipes, byte-identical to\n"
            "     llama-quantize for GGUF sources); for BitNet: I2_S, TQ1_0, TQ2_0, QK256.\n"
            "--dry-run prints the plan (tensor, source and target encoding, bytes) and writes\n"
            "nothing. A tensor that is already quantized is refused unless --allow-requantize.\n"
            "Memory is bounded by the largest tensor, not the model.\n\n"
            "Other targets (each has its own --help):\n"
            "  quantpack convert SRC --to rdrr --quant Q4_K_M|F16|F32 -o DIR   DOPPLER RDRR\n"
            "  quantpack convert SRC --to trlm -o DIR [--lora PEFT_DIR]       Trillim TRLM\n"
            "  quantpack convert SRC --to bullet -o MODEL.bullet             bullet-core BQ4\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct progress {
    double t0, last;
    bool shown;
} progress;

static void on_progress(void *ud, int64_t k, int64_t n, const qp_plan_entry *pe, uint64_t done,
                        uint64_t total) {
    progress *p = ud;
    double t = now_s();
    if (!p->shown && t - p->t0 < 1.0) return; /* short runs stay quiet */
    if (k < n && t - p->last < 0.5) return;
    p->last = t;
    p->shown = true;
    double el = t - p->t0;
    fprintf(stderr, "\r[%lld/%lld] %-40.40s %6.1f%%  %8.1f MB/s", (long long)k, (long long)n,
            pe->name, total ? 100.0 * (double)done / (double)total : 100.0,
            el > 0 ? (double)done / 1e6 / el : 0.0);
    if (k == n) fputc('\n', stderr);
    fflush(stderr);
}

static void shape_str(const qp_plan_entry *pe, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int d = pe->n_dims - 1; d >= 0 && k < n; d--)
        k += (size_t)snprintf(buf + k, n - k, "%lld%s", (long long)pe->ne[d], d ? ", " : "");
    if (k < n) snprintf(buf + k, n - k, "]");
}

static void print_plan(const qp_plan *p) {
    printf("%-40s %-16s %-8s %-8s %12s %12s %s\n", "tensor", "shape", "source", "target",
           "src bytes", "out bytes", "action");
    for (int64_t i = 0; i < p->n; i++) {
        const qp_plan_entry *pe = &p->t[i];
        char shape[64];
        shape_str(pe, shape, sizeof shape);
        const char *act = !pe->convert ? "copy"
                          : pe->src_kind == QP_SRC_BITNET_U8 ? "unpack+encode"
                          : pe->permute_heads > 0 ? "permute+encode" : "encode";
        printf("%-40s %-16s %-8s %-8s %12zu %12zu %s%s\n", pe->name, shape,
               pe->src_kind == QP_SRC_BITNET_U8 ? "U8x4" : qp_encoding_get(pe->src_enc)->upper_name,
               qp_encoding_get(pe->dst_enc)->upper_name, pe->src->nbytes, pe->dst_bytes, act,
               pe->fallback ? " (shape fallback)" : "");
    }
    for (int64_t i = 0; i < p->n_skipped; i++)
        printf("skipped %-32s %s\n", p->skipped[i].src->name, p->skipped[i].rule);
    printf("%lld tensors, %llu -> %llu bytes (%.2f MB), %lld shape fallbacks, %lld source tensors "
           "skipped by a rule\n", (long long)p->n, (unsigned long long)p->src_bytes,
           (unsigned long long)p->dst_bytes, (double)p->dst_bytes / 1e6, (long long)p->n_fallback,
           (long long)p->n_skipped);
}

/* Targets other than GGUF have their own option sets and live beside their format. */
static const struct {
    const char *to;
    int (*fn)(int argc, char **argv);
} k_other_targets[] = {
    {"bullet", qp_cmd_bullet_convert}, /* cli/cmd_bullet.c */
    {"trlm", qp_cmd_convert_trlm},     /* cli/cmd_trillim.c */
    {"rdrr", qp_cmd_convert_rdrr},     /* cli/cmd_rdrr.c */
};

int qp_cmd_convert(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--to") != 0) continue;
        for (size_t k = 0; k < sizeof k_other_targets / sizeof k_other_targets[0]; k++)
            if (strcmp(argv[i + 1], k_other_targets[k].to) == 0) return k_other_targets[k].fn(argc, argv);
    }
    const char *src = NULL, *to = NULL, *quant = NULL, *out = NULL, *tok = NULL;
    int threads = 0;
    bool dry = false, requant = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (qp_cli_is_help(a)) {
            usage(stdout);
            return QP_EXIT_OK;
        }
        bool has_val = i + 1 < argc;
        if (strcmp(a, "--to") == 0 && has_val) to = argv[++i];
        else if ((strcmp(a, "--quant") == 0 || strcmp(a, "-q") == 0) && has_val) quant = argv[++i];
        else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && has_val) out = argv[++i];
        else if (strcmp(a, "--tokenizer") == 0 && has_val) tok = argv[++i];
        else if (strcmp(a, "--threads") == 0 && has_val) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 256) return qp_cli_usage_error("--threads wants 1..256, not '%s'", argv[i]);
            threads = (int)v;
        } else if (strcmp(a, "--dry-run") == 0) dry = true;
        else if (strcmp(a, "--allow-requantize") == 0) requant = true;
        else if (a[0] == '-' && a[1]) return qp_cli_usage_error("convert: unknown or incomplete option '%s'", a);
        else if (!src) src = a;
        else return qp_cli_usage_error("convert: unexpected argument '%s'", a);
    }
    if (!src) return qp_cli_usage_error("convert: no source model given");
    if (!to) to = "gguf";
    if (strcmp(to, "gguf") != 0)
        return qp_cli_usage_error("convert: unknown --to %s (gguf, trlm, rdrr, bullet)", to);
    if (!quant) return qp_cli_usage_error("convert: --quant is required (Q4_K_M, Q6_K, Q8_0, F16, BF16, "
                                          "F32, I2_S, TQ1_0, TQ2_0, QK256)");
    qp_quant q = qp_quant_from_name(quant);
    if (q == QP_QUANT_COUNT) return qp_cli_usage_error("convert: unknown --quant '%s'", quant);
    if (!out && !dry) return qp_cli_usage_error("convert: -o OUT is required");
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)(n > 64 ? 64 : n) : 1;
    }

    qp_err e = {0};
    qp_open_opts oo = {0};
    oo.tokenizer_path = tok;
    qp_model *m = NULL;
    if (qp_model_open(src, &oo, &m, &e) != QP_OK) return qp_cli_fail(&e);
    if (qp_quant_is_ternary(q) && m->arch.family != QP_FAMILY_BITNET) {
        qp_family fam = m->arch.family;
        qp_model_close(m);
        return qp_cli_usage_error("convert: --quant %s is for BitNet models; %s is %s", quant, src,
                                  qp_family_name(fam));
    }
    qp_convert_opts co = {0};
    co.quant = q;
    co.threads = threads;
    co.allow_requantize = requant;
    progress pr = {now_s(), 0, false};
    co.progress = on_progress;
    co.progress_ud = &pr;
    qp_plan plan;
    if (qp_convert_gguf_plan(m, &co, &plan, &e) != QP_OK) {
        qp_model_close(m);
        return qp_cli_fail(&e);
    }
    int rc = QP_EXIT_OK;
    if (dry) {
        print_plan(&plan);
    } else if (qp_convert_gguf_write(m, &plan, &co, out, &e) != QP_OK) {
        if (pr.shown) fputc('\n', stderr);
        rc = qp_cli_fail(&e);
    } else {
        double el = now_s() - pr.t0;
        fprintf(stderr, "quantpack: wrote %s: %lld tensors, %.2f MB (%s, file type %u) in %.2f s\n", out,
                (long long)plan.n, (double)plan.dst_bytes / 1e6, qp_quant_name(q), plan.file_type, el);
        for (int64_t i = 0; i < plan.n_skipped; i++)
            fprintf(stderr, "quantpack: skipped %s: %s\n", plan.skipped[i].src->name, plan.skipped[i].rule);
    }
    qp_plan_free(&plan);
    qp_model_close(m);
    return rc;
}
