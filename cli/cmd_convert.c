/* quantpack convert SRC --to gguf|rdrr|trlm|bullet|safetensors ... and the companions bullet-pack and
 * gguf-to-rdrr: one option table for every target, parsed once; each row names the targets that
 * use it, and a row given to a target that does not is refused. The GGUF target lives here
 * (converters/recipes.md); rdrr, trlm, bullet and safetensors run in cli/cmd_rdrr.c,
 * cmd_trillim.c, cmd_bullet.c and cmd_safetensors.c. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "converters/convert_gguf.h"
#include "readers/hf_config.h"
#include "readers/imatrix.h"
#include "writers/rdrr_writer.h"
#include "writers/safetensors_writer.h"
#include "writers/trlm_writer.h"

static void on_progress(void *ud, int64_t k, int64_t n, const qp_plan_entry *pe, uint64_t done,
                        uint64_t total) {
    qp_cli_progress_show(ud, k, n, pe->name, done, total);
}

static void shape_str(const qp_plan_entry *pe, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int d = pe->n_dims - 1; d >= 0 && k < n; d--)
        k += (size_t)snprintf(buf + k, n - k, "%lld%s", (long long)pe->ne[d], d ? ", " : "");
    if (k < n) snprintf(buf + k, n - k, "]");
}

void qp_cli_print_plan(const qp_plan *p) {
    printf("%-40s %-16s %-8s %-8s %12s %12s %s\n", "tensor", "shape", "source", "target",
           "src bytes", "out bytes", "action");
    for (int64_t i = 0; i < p->n; i++) {
        const qp_plan_entry *pe = &p->t[i];
        char shape[64];
        shape_str(pe, shape, sizeof shape);
        const char *act = pe->action ? pe->action
                          : !pe->convert ? "copy"
                          : pe->src_kind == QP_SRC_BITNET_U8 ? "unpack+encode"
                          : pe->permute_heads > 0 ? "permute+encode" : "encode";
        printf("%-40s %-16s %-8s %-8s %12zu %12zu %s%s\n", pe->name, shape,
               pe->src_kind == QP_SRC_BITNET_U8 ? "U8x4" : qp_encoding_get(pe->src_enc)->upper_name,
               qp_encoding_get(pe->dst_enc)->upper_name, pe->src ? pe->src->nbytes : 0, pe->dst_bytes, act,
               pe->fallback ? " (shape fallback)" : "");
    }
    for (int64_t i = 0; i < p->n_skipped; i++)
        printf("skipped %-32s %s\n", p->skipped[i].src->name, p->skipped[i].rule);
    printf("%lld tensors, %llu -> %llu bytes (%.2f MB), %lld shape fallbacks, %lld source tensors "
           "skipped by a rule\n", (long long)p->n, (unsigned long long)p->src_bytes,
           (unsigned long long)p->dst_bytes, (double)p->dst_bytes / 1e6, (long long)p->n_fallback,
           (long long)p->n_skipped);
}

int qp_cli_dry_run_done(qp_model *m, qp_status s, qp_plan *plan, qp_err *e) {
    if (s == QP_OK) {
        qp_cli_print_plan(plan); /* the entries point into m */
        qp_plan_free(plan);
    }
    qp_model_close(m);
    return s == QP_OK ? QP_EXIT_OK : qp_cli_fail(e);
}

/* The per-tensor options and the importance matrix of --to gguf, owned for one conversion. */
typedef struct tensor_args {
    qp_imatrix *im;
    qp_tensor_type_override ov[QP_CLI_LIST_MAX];
    char *patterns[QP_CLI_LIST_MAX];
} tensor_args;

static void tensor_args_free(tensor_args *t) {
    qp_imatrix_free(t->im);
    for (int i = 0; i < QP_CLI_LIST_MAX; i++) free(t->patterns[i]);
}

/* A --*-type value: a block or float encoding quantpack can write into GGUF. */
static bool gguf_type_of(const char *name, qp_encoding *out) {
    qp_encoding enc = qp_encoding_from_name(name);
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t || qp_encoding_gguf_type(enc) < 0 || !t->quantize_ref || (t->flags & QP_ENC_FLAG_EXT_SCALE) ||
        (t->flags & QP_ENC_FLAG_SIBLING_SCALE) || (t->flags & QP_ENC_FLAG_INT) || enc == QP_ENC_Q8_K)
        return false;
    *out = enc;
    return true;
}

static int bad_type(const char *opt, const char *v) {
    char list[512] = "";
    for (int k = 0; k < QP_ENC_COUNT; k++) {
        qp_encoding enc;
        if (!gguf_type_of(qp_encoding_get((qp_encoding)k) ? qp_encoding_get((qp_encoding)k)->name : "", &enc))
            continue;
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", qp_encoding_get(enc)->name);
    }
    return qp_cli_usage_error("convert: %s '%s' is not a type quantpack writes to GGUF (%s)", opt, v, list);
}

/* Fills o from the command line; QP_CLI_RUN or an exit code (message printed). */
static int tensor_options(const qp_cli_convert_args *a, tensor_args *t, qp_tensor_options *o) {
    if (a->output_tensor_type) {
        if (!gguf_type_of(a->output_tensor_type, &o->output_type))
            return bad_type("--output-tensor-type", a->output_tensor_type);
        o->has_output_type = true;
    }
    if (a->token_embedding_type) {
        if (!gguf_type_of(a->token_embedding_type, &o->token_embd_type))
            return bad_type("--token-embedding-type", a->token_embedding_type);
        o->has_token_embd_type = true;
    }
    o->leave_output = a->leave_output_tensor;
    o->pure = a->pure;
    for (int i = 0; i < a->tensor_types.n; i++) {
        const char *w = a->tensor_types.v[i], *eq = strchr(w, '=');
        if (!eq || eq == w || !eq[1])
            return qp_cli_usage_error("convert: --tensor-type wants PATTERN=TYPE, not '%s'", w);
        if (!gguf_type_of(eq + 1, &t->ov[i].enc)) return bad_type("--tensor-type", eq + 1);
        /* llama-quantize lower-cases the pattern */
        t->patterns[i] = strndup(w, (size_t)(eq - w));
        if (!t->patterns[i]) return qp_cli_usage_error("convert: out of memory");
        for (char *c = t->patterns[i]; *c; c++) *c = (char)tolower((unsigned char)*c);
        t->ov[i].pattern = t->patterns[i];
    }
    o->overrides = t->ov;
    o->n_overrides = a->tensor_types.n;
    if (a->imatrix) {
        qp_err e = {0};
        if (qp_imatrix_open(a->imatrix, &t->im, &e) != QP_OK) return qp_cli_fail(&e);
        o->imatrix = t->im->entries;
        o->n_imatrix = t->im->n;
    }
    return QP_CLI_RUN;
}

/* llama-quantize's IQ1/IQ2/IQ3 types, named so a user learns why they are refused */
static bool iq_codebook_quant(const char *quant) {
    static const char *const names[] = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M",
                                        "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(quant, names[i]) == 0) return true;
    return false;
}

static int convert_gguf(const qp_cli_convert_args *a) {
    const char *src = a->src, *quant = a->quant, *out = a->out;
    char list[512] = "";
    for (int k = 0; k < QP_QUANT_COUNT; k++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", qp_quant_name((qp_quant)k));
    }
    if (!quant) return qp_cli_usage_error("convert: --quant is required (--to gguf takes %s)", list);
    qp_quant q = qp_quant_from_name(quant);
    if (q == QP_QUANT_COUNT && iq_codebook_quant(quant))
        return qp_cli_usage_error("convert: --quant %s is not supported: IQ1/IQ2/IQ3 blocks index "
                                  "ggml's codebook tables, which quantpack does not carry "
                                  "(encodings/encodings.md); --to gguf takes %s", quant, list);
    if (q == QP_QUANT_COUNT)
        return qp_cli_usage_error("convert: unknown --quant '%s' (--to gguf takes %s)", quant, list);
    if (!out && !a->dry_run) return qp_cli_usage_error("convert: -o OUT is required");
    int threads = (int)a->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)(n > 64 ? 64 : n) : 1;
    }

    qp_err e = {0};
    qp_open_opts oo = {0};
    oo.tokenizer_path = a->tokenizer;
    qp_model *m = NULL;
    if (qp_model_open(src, &oo, &m, &e) != QP_OK) return qp_cli_fail(&e);
    qp_cli_warn_problems(m);
    if (qp_quant_is_ternary(q) && m->arch.family != QP_FAMILY_BITNET) {
        qp_family fam = m->arch.family;
        qp_model_close(m);
        return qp_cli_usage_error("convert: --quant %s is for BitNet models; %s is %s", quant, src,
                                  qp_family_name(fam));
    }
    qp_convert_opts co = {0};
    tensor_args ta = {0};
    int rc_opts = tensor_options(a, &ta, &co.tensor);
    if (rc_opts != QP_CLI_RUN) {
        tensor_args_free(&ta);
        qp_model_close(m);
        return rc_opts;
    }
    co.quant = q;
    co.threads = threads;
    co.allow_requantize = a->allow_requantize;
    co.allow_nonfinite = a->allow_nonfinite;
    qp_cli_progress pr;
    qp_cli_progress_start(&pr);
    co.progress = on_progress;
    co.progress_ud = &pr;
    qp_plan plan;
    if (qp_convert_gguf_plan(m, &co, &plan, &e) != QP_OK) {
        tensor_args_free(&ta);
        qp_model_close(m);
        return qp_cli_fail(&e);
    }
    int rc = QP_EXIT_OK;
    if (a->dry_run) {
        qp_cli_print_plan(&plan);
    } else if (qp_convert_gguf_write(m, &plan, &co, out, &e) != QP_OK) {
        qp_cli_progress_end(&pr);
        rc = qp_cli_fail(&e);
    } else {
        double el = qp_cli_now_s() - pr.t0;
        fprintf(stderr, "quantpack: wrote %s: %lld tensors, %.2f MB (%s, file type %u) in %.2f s\n", out,
                (long long)plan.n, (double)plan.dst_bytes / 1e6, qp_quant_name(q), plan.file_type, el);
        for (int64_t i = 0; i < plan.n_skipped; i++)
            fprintf(stderr, "quantpack: skipped %s: %s\n", plan.skipped[i].src->name, plan.skipped[i].rule);
        if (m->vocab.n_tokens <= 0) qp_cli_warn_no_tokenizer(out);
    }
    qp_plan_free(&plan);
    tensor_args_free(&ta);
    qp_model_close(m);
    return rc;
}

/* Bits of the rows that are not a target of convert --to: --to itself, and gguf-to-rdrr. */
enum { TO_ARG = 1u << 4, PASSTHRU = 1u << 5 };

static const struct {
    const char *to;
    unsigned bit;
    int (*fn)(const qp_cli_convert_args *a);
} k_targets[] = {
    {"gguf", QP_TO_GGUF, convert_gguf},
    {"rdrr", QP_TO_RDRR, qp_cli_convert_rdrr},     /* cli/cmd_rdrr.c */
    {"trlm", QP_TO_TRLM, qp_cli_convert_trlm},     /* cli/cmd_trillim.c */
    {"bullet", QP_TO_BULLET, qp_cli_convert_bullet}, /* cli/cmd_bullet.c */
    {"safetensors", QP_TO_SAFETENSORS, qp_cli_convert_safetensors}, /* cli/cmd_safetensors.c */
};

static const char k_convert_usage[] =
    "usage: quantpack convert SRC --to gguf --quant Q -o OUT [--threads N]\n"
    "                         [--tokenizer FILE] [--dry-run] [--allow-requantize]\n"
    "       quantpack convert SRC --to rdrr --quant Q4_K_M|Q6_K|F16|BF16|F32|keep -o DIR [--dry-run]\n"
    "       quantpack convert SRC --to trlm -o DIR [--quant Q] [--lora PEFT_DIR] [--dry-run]\n"
    "       quantpack convert SRC --to bullet -o MODEL.bullet [--heads ...] [--dry-run]\n"
    "       quantpack convert SRC --to safetensors [--quant F32|F16|BF16] -o DIR [--dry-run]\n\n"
    "SRC: a safetensors model directory (Llama, Mistral, Qwen2, Qwen3, Qwen3.5 dense (to gguf,\n"
    "     trlm, safetensors), Phi-3, BitNet float or packed; one of its .safetensors files or its\n"
    "     model.safetensors.index.json stands for\n"
    "     it), a GGUF file, a llama2.c checkpoint (with --tokenizer), RDRR, TRLM or .bullet.\n"
    "--quant and --to take any case; an unknown value is answered with the valid ones.\n"
    "gguf (default): every llama-quantize file type: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,\n"
    "     Q2_K_S, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS,\n"
    "     TQ1_0, TQ2_0, F16, BF16, F32 (llama.cpp's mixtures, byte-identical to llama-quantize\n"
    "     for GGUF sources); BitNet models: I2_S, TQ1_0, TQ2_0, QK256 (the projections only). A tensor\n"
    "     that is already quantized is refused unless --allow-requantize. Memory is bounded\n"
    "     by the largest tensor, not the model.\n"
    "rdrr: an RDRR directory for DOPPLER; source names are kept, rows whose length is not a\n"
    "     multiple of 256 are zero-padded for Q4_K (layout \"row\"); only dtypes DOPPLER's\n"
    "     loader decodes are stored (llama.cpp's Q8_0 fallback becomes F16); --quant keep\n"
    "     as gguf-to-rdrr. A PEFT LoRA folder as SRC: an adapter manifest.\n"
    "trlm: Trillim TRLM from a Hugging Face safetensors folder (any other source is first\n"
    "     written as one: converters/hf_folder.md): qmodel.tensors, rope.cache, qmodel.lora\n"
    "     with --lora, config and tokenizer files, trillim_config.json (the SDK's bundle metadata,\n"
    "     format 5) and DIR/inference.config (the --config values of `inference DIR --config\n"
    "     ...`). --quant: the SDK's --quantization of the 2-D weights: auto (the arch's: ternary,\n"
    "     Qwen3 bf16, Bonsai q1_0_128 / grouped_ternary_128), ternary,\n"
    "     bf16, q8_0, q8_0_blocked_32 (int8), q1_0_128, grouped_ternary_128. The SDK's quantize\n"
    "     manifest is removed after quantizing, as the SDK removes it; --save-manifest keeps it.\n"
    "bullet: a .bullet file for bullet-core (see bullet-pack --help).\n"
    "safetensors: a Hugging Face folder (model.safetensors, config.json, generation_config.json,\n"
    "     tokenizer.json + tokenizer_config.json + special_tokens_map.json from any vocabulary)\n"
    "     from any source; q/k rows back in Hugging Face's order; --quant F32, F16 or BF16 for\n"
    "     every tensor (default: F16/BF16 tensors kept, others decoded to F32).\n"
    "An option marked [x,y] is used by those targets only.\n";

static const char k_bullet_usage[] =
    "usage: bullet-pack SRC [--tokenizer FILE] -o MODEL.bullet [--heads gen,sentiment,...]\n"
    "                   [--head-weights FILE.safetensors] [--name NAME] [--checksum]\n"
    "                   [--allow-requantize] [--dry-run]\n\n"
    "Packs a Llama-family model (safetensors directory, GGUF, llama2.c + --tokenizer, or\n"
    ".bullet) for bullet-core: its tensor names, BQ4 weights, BULK tokenizer, header JSON.\n"
    "Grouped K/V heads are written repeated, a narrower FFN zero-padded to 4 x hidden and\n"
    "NEOX q/k rows reordered (all exact); what bullet-core would misread is refused.\n"
    "A source tensor that is already quantized (not F32/F16/BF16) is refused unless\n"
    "--allow-requantize.\n";

static const char k_g2r_usage[] =
    "usage: gguf-to-rdrr MODEL.gguf OUT [--shard-size BYTES] [--sign KEY]\n\n"
    "Packages a GGUF file as an RDRR directory for DOPPLER: names are kept; tensors\n"
    "in a type DOPPLER's loader decodes (F32, F16, BF16, Q4_K, Q6_K) keep their bytes,\n"
    "others (Q8_0, Q5_0, ...) are stored as their exact F32 decoding and listed in\n"
    "quantizationInfo.dtypeChanges (readers/rdrr.md, the dtype rule).\n";

/* A model's .safetensors file or its model.safetensors.index.json, in a folder with config.json,
 * stands for the folder (the file alone names no architecture), with a note. */
static void src_as_folder(qp_cli_convert_args *a) {
    const char *base = strrchr(a->src, '/');
    base = base ? base + 1 : a->src;
    size_t n = strlen(base);
    bool model_file = (n > 12 && strcmp(base + n - 12, ".safetensors") == 0) ||
                      strcmp(base, "model.safetensors.index.json") == 0;
    if (!model_file || !qp_hf_folder_of_file(a->src, &a->src_folder) || !a->src_folder) return;
    fprintf(stderr, "quantpack: %s is a file of the Hugging Face model %s: converting the folder\n",
            a->src, a->src_folder);
    a->src = a->src_folder;
}

/* Parses argv with the one convert table. fixed: the target bit of a companion (its rows only),
 * 0 for convert (every row; the target is --to). Then every row given must be used by the
 * target. *target: the index in k_targets. */
static int convert_parse(const char *name, const char *usage, unsigned fixed, int max_pos,
                         int argc, char **argv, qp_cli_convert_args *a, size_t *target) {
    const unsigned G = QP_TO_GGUF, R = QP_TO_RDRR | PASSTHRU, T = QP_TO_TRLM, B = QP_TO_BULLET,
                   S = QP_TO_SAFETENSORS;
    const qp_cli_opt opts[] = {
        {"--to", NULL, QP_CLI_STR, &a->to, .used_by = TO_ARG, .arg = "TARGET",
         .help = "gguf (default), rdrr, trlm, bullet or safetensors"},
        {"--quant", "-q", QP_CLI_STR, &a->quant, .used_by = G | QP_TO_RDRR | T | S, .arg = "Q",
         .help = "[gguf,rdrr] target encoding recipe;\n[trlm] the SDK's --quantization: auto (ternary), bf16, q8_0, ...;"
                 "\n[safetensors] F32, F16 or BF16"},
        {"--output", "-o", QP_CLI_STR, &a->out, .used_by = G | QP_TO_RDRR | T | B | S, .arg = "OUT",
         .help = "output file or directory"},
        {"--tokenizer", NULL, QP_CLI_STR, &a->tokenizer, .used_by = G | R | T | B | S,
         .arg = "FILE", .help = "tokenizer for sources without one (llama2.c tokenizer.bin)"},
        QP_CLI_THREADS(&a->threads, G | QP_TO_RDRR),
        {"--dry-run", NULL, QP_CLI_FLAG, &a->dry_run, .used_by = G | QP_TO_RDRR | T | B | S,
         .help = "print the plan (tensor, source and target encoding, bytes), write\nnothing"},
        {"--allow-requantize", NULL, QP_CLI_FLAG, &a->allow_requantize, .used_by = G | QP_TO_RDRR | T | B,
         .help = "[gguf,rdrr,trlm,bullet] quantized sources may be quantized again"},
        {"--imatrix", NULL, QP_CLI_STR, &a->imatrix, .used_by = G, .arg = "FILE",
         .help = "[gguf] importance matrix from llama-imatrix (.dat or GGUF), as\nllama-quantize --imatrix"},
        {"--output-tensor-type", NULL, QP_CLI_STR, &a->output_tensor_type, .used_by = G,
         .arg = "TYPE", .help = "[gguf] encoding of output.weight (q8_0, q6_k, f16, ...)"},
        {"--token-embedding-type", NULL, QP_CLI_STR, &a->token_embedding_type, .used_by = G,
         .arg = "TYPE", .help = "[gguf] encoding of token_embd.weight"},
        {"--leave-output-tensor", NULL, QP_CLI_FLAG, &a->leave_output_tensor, .used_by = G,
         .help = "[gguf] output.weight keeps its source encoding"},
        {"--pure", NULL, QP_CLI_FLAG, &a->pure, .used_by = G,
         .help = "[gguf] the recipe's default type for every tensor (no k-quant mixture)"},
        {"--tensor-type", NULL, QP_CLI_LIST, &a->tensor_types, .used_by = G, .arg = "PATTERN=TYPE",
         .help = "[gguf] tensors whose name matches the (POSIX extended, lower-cased)\nregular "
                 "expression get TYPE; repeatable, the first match wins"},
        {"--allow-nonfinite", NULL, QP_CLI_FLAG, &a->allow_nonfinite, .used_by = G | R | T | B | S,
         .help = "write NaN/Inf weights (refused by default)"},
        {"--shard-size", NULL, QP_CLI_BYTES, &a->shard_size, .lo = (int64_t)QP_RDRR_MIN_SHARD,
         .used_by = R, .arg = "BYTES",
         .help = "[rdrr] shard size (default 64M; K/M/G suffixes; minimum 4096)"},
        {"--sign", NULL, QP_CLI_STR, &a->sign, .used_by = R, .arg = "KEY",
         .help = "[rdrr] sign manifest.json with an Ed25519 key from `quantpack keygen`"},
        {"--model-id", NULL, QP_CLI_STR, &a->model_id, .used_by = R, .arg = "ID",
         .help = "[rdrr] modelId (default: the source name)"},
        {"--no-inline-tensors", NULL, QP_CLI_FLAG, &a->no_inline, .used_by = R,
         .help = "[rdrr] tensor locations only in tensors.json (default: both)"},
        {"--force", "-f", QP_CLI_FLAG, &a->force, .used_by = G | R | T | B | S,
         .help = "replace an existing OUT: a file, or a folder holding a previous\npackage of the "
                 "same kind (files quantpack did not write are kept);\nnever an input"},
        {"--replace", NULL, QP_CLI_FLAG, &a->force, .used_by = R, .help = "[rdrr] the same as --force"},
        {"--quiet", NULL, QP_CLI_FLAG, &a->quiet, .used_by = R, .help = "[rdrr] no summary on stderr"},
        {"--lora", NULL, QP_CLI_STR, &a->lora, .used_by = T, .arg = "PEFT_DIR",
         .help = "[trlm] also write qmodel.lora from this PEFT adapter"},
        {"--adapter-only", NULL, QP_CLI_FLAG, &a->adapter_only, .used_by = T,
         .help = "[trlm] with --lora: OUT is the SDK's LoRA adapter bundle\n(qmodel.lora, "
                 "trillim_config.json type lora_adapter,\nthe adapter's files; no model), as "
                 "`trillim quantize\nMODEL ADAPTER` writes it"},
        {"--save-manifest", NULL, QP_CLI_STR, &a->save_manifest, .used_by = T, .arg = "FILE",
         .help = "[trlm] keep the SDK's quantize manifest at FILE (for\ntrillim-quantize; HF "
                 "sources; not kept in OUT)"},
        {"--heads", NULL, QP_CLI_STR, &a->heads, .used_by = B, .arg = "LIST",
         .help = "[bullet] task heads: gen (always written) and any of ner, pos,\nsentiment, "
                 "classifier (from --head-weights)"},
        {"--head-weights", NULL, QP_CLI_STR, &a->head_weights, .used_by = B, .arg = "FILE",
         .help = "[bullet] safetensors with <task>_head.weight [n_out, hidden]; labels\nfrom "
                 "__metadata__ <task>_labels (JSON array or a,b,c)"},
        {"--name", NULL, QP_CLI_STR, &a->name, .used_by = B, .arg = "NAME",
         .help = "[bullet] model name in the header"},
        {"--checksum", NULL, QP_CLI_FLAG, &a->checksum, .used_by = B,
         .help = "[bullet] FNV-1a 64 of the file before END! (flagged in the header)"},
    };
    enum { N_OPTS = sizeof opts / sizeof opts[0] };
    const char *pos[2] = {NULL, NULL};
    const qp_cli_cmd cmd = {name, usage, NULL, opts, N_OPTS, fixed, pos, max_pos, NULL, NULL};
    bool given[N_OPTS];
    memset(a, 0, sizeof *a);
    a->cmd = name;
    int rc = qp_cli_parse(&cmd, argc, argv, given);
    if (rc != QP_CLI_RUN) return rc;
    a->src = pos[0];
    if (max_pos == 2) a->out = pos[1];
    unsigned bit = fixed ? fixed : QP_TO_GGUF;
    if (a->to) {
        bit = 0;
        for (size_t k = 0; k < sizeof k_targets / sizeof k_targets[0]; k++)
            if (strcasecmp(a->to, k_targets[k].to) == 0) bit = k_targets[k].bit;
        if (!bit)
            return qp_cli_usage_error("%s: unknown --to %s (gguf, rdrr, trlm, bullet, safetensors)", name, a->to);
    }
    for (size_t k = 0; k < sizeof k_targets / sizeof k_targets[0]; k++)
        if (k_targets[k].bit & (bit == PASSTHRU ? QP_TO_RDRR : bit)) *target = k;
    for (int k = 0; k < N_OPTS; k++)
        if (given[k] && opts[k].used_by != TO_ARG && !(opts[k].used_by & bit))
            return qp_cli_usage_error("%s --to %s: option '%s' is not used by this target", name,
                                      k_targets[*target].to, opts[k].name);
    if (!a->src) return qp_cli_usage_error("%s: no source model given", name);
    if (!a->gguf_only && fixed != PASSTHRU) src_as_folder(a);
    return QP_CLI_RUN;
}

/* The output rule before any target writes (core/outfile.md): OUT is never an input, is
 * replaced only with --force, and a folder output only when it holds a previous package of the
 * target's kind. */
static int convert_prepare_output(const qp_cli_convert_args *a, unsigned target_bit) {
    if (!a->out || a->dry_run) return QP_EXIT_OK;
    const char *inputs[] = {a->src, a->tokenizer, a->lora, a->head_weights, a->sign};
    const char *all[] = {a->src, a->tokenizer, a->lora, a->head_weights, a->sign, a->out};
    if (a->save_manifest) { /* a file output of its own: the same rule */
        int rc = qp_cli_prepare_output(a->save_manifest, a->force, NULL, all, sizeof all / sizeof all[0]);
        if (rc != QP_EXIT_OK) return rc;
    }
    const qp_outdir_kind *kind = (target_bit & QP_TO_RDRR)          ? &qp_rdrr_outdir_kind
                                 : (target_bit & QP_TO_TRLM) && a->adapter_only ? &qp_trlm_adapter_outdir_kind
                                 : (target_bit & QP_TO_TRLM)        ? &qp_trlm_outdir_kind
                                 : (target_bit & QP_TO_SAFETENSORS) ? &qp_hf_outdir_kind
                                                                    : NULL;
    return qp_cli_prepare_output(a->out, a->force, kind, inputs, sizeof inputs / sizeof inputs[0]);
}

/* The output rule, then the target; frees what parsing kept. */
static int run_target(qp_cli_convert_args *a, unsigned target_bit, int (*fn)(const qp_cli_convert_args *)) {
    int rc = convert_prepare_output(a, target_bit);
    if (rc == QP_EXIT_OK) rc = fn(a);
    qp_free(a->src_folder);
    return rc;
}

int qp_cmd_convert(int argc, char **argv) {
    qp_cli_convert_args a;
    size_t t = 0;
    int rc = convert_parse("convert", k_convert_usage, 0, 1, argc, argv, &a, &t);
    if (rc != QP_CLI_RUN) return rc;
    return run_target(&a, k_targets[t].bit, k_targets[t].fn);
}

int qp_cmd_bullet_pack(int argc, char **argv) {
    qp_cli_convert_args a;
    size_t t = 0;
    int rc = convert_parse("bullet-pack", k_bullet_usage, QP_TO_BULLET, 1, argc, argv, &a, &t);
    if (rc != QP_CLI_RUN) return rc;
    return run_target(&a, QP_TO_BULLET, qp_cli_convert_bullet);
}

int qp_cmd_gguf_to_rdrr(int argc, char **argv) {
    qp_cli_convert_args a;
    size_t t = 0;
    int rc = convert_parse("gguf-to-rdrr", k_g2r_usage, PASSTHRU, 2, argc, argv, &a, &t);
    if (rc != QP_CLI_RUN) return rc;
    if (!a.out) return qp_cli_usage_error("usage: gguf-to-rdrr MODEL.gguf OUT [--shard-size BYTES] [--sign KEY]");
    a.quant = "keep";
    a.gguf_only = true;
    return run_target(&a, QP_TO_RDRR, qp_cli_convert_rdrr);
}
