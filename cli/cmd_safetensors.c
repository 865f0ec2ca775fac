/* quantpack convert SRC --to safetensors [--quant F32|F16|BF16] -o DIR [--dry-run]: any model
 * as a Hugging Face folder (converters/convert_safetensors.h, converters/hf_folder.md). */
#include <stdio.h>

#include "cli/cli.h"
#include "converters/convert_safetensors.h"

static const char *action_of(const qp_hf_plan_entry *pe) {
    if (pe->permute_heads > 0) return "permute q/k rows";
    if (pe->minus_one) return "decode, w = value - 1";
    return qp_tensor_stored_enc(pe->src) == pe->dst && !pe->src->decoded_copy ? "copy" : "decode";
}

static void print_plan(const qp_hf_plan *p) {
    printf("%-32s %-44s %-14s %-8s %-6s %12s %s\n", "tensor", "Hugging Face name", "shape", "source",
           "target", "out bytes", "action");
    for (int64_t i = 0; i < p->n; i++) {
        const qp_hf_plan_entry *pe = &p->t[i];
        const qp_tensor *t = pe->src;
        if (pe->skip_rule) {
            printf("skipped %-24s %s\n", t->name, pe->skip_rule);
            continue;
        }
        char shape[48];
        if (pe->n_dims == 1) snprintf(shape, sizeof shape, "[%lld]", (long long)pe->ne[0]);
        else snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)pe->ne[1], (long long)pe->ne[0]);
        printf("%-32s %-44s %-14s %-8s %-6s %12llu %s\n", t->name, pe->hf_name, shape,
               qp_encoding_get(qp_tensor_stored_enc(t))->upper_name, qp_encoding_get(pe->dst)->upper_name,
               (unsigned long long)pe->dst_bytes, action_of(pe));
    }
    printf("%lld tensors, %llu bytes (%.2f MB) of tensor data, %lld source tensors skipped by a rule\n",
           (long long)(p->n - p->n_skipped), (unsigned long long)p->dst_bytes, (double)p->dst_bytes / 1e6,
           (long long)p->n_skipped);
}

/* Opens SRC and prints the plan (--dry-run) or writes the folder. */
static int run(const qp_cli_convert_args *a, qp_encoding dtype) {
    qp_err e = {0};
    qp_open_opts oo = {.tokenizer_path = a->tokenizer};
    qp_model *m = NULL;
    if (qp_model_open(a->src, &oo, &m, &e) != QP_OK) return qp_cli_fail(&e);
    qp_cli_warn_problems(m);
    qp_cli_progress pr;
    qp_cli_progress_start(&pr);
    qp_st_convert_opts o = {.folder = {.dtype = dtype, .progress = qp_cli_progress_cb, .progress_user = &pr},
                            .force = a->force, .allow_nonfinite = a->allow_nonfinite};
    qp_st_convert_stats st = {0};
    qp_hf_plan plan = {0};
    qp_status s = a->dry_run ? qp_hf_folder_plan(m, dtype, &plan, &e) : qp_convert_to_safetensors(m, a->out, &o, &st, &e);
    int rc = QP_EXIT_OK;
    if (s != QP_OK) {
        qp_cli_progress_end(&pr);
        rc = qp_cli_fail(&e);
    } else if (a->dry_run) {
        print_plan(&plan);
    } else {
        fprintf(stderr, "quantpack: wrote %s: %lld tensors, %.2f MB (safetensors, %s) in %.2f s\n", a->out,
                (long long)st.n_tensors, (double)st.bytes / 1e6,
                dtype == QP_ENC_COUNT ? "F16/BF16 kept, others F32" : qp_encoding_get(dtype)->upper_name,
                qp_cli_now_s() - pr.t0);
        if (st.n_skipped) fprintf(stderr, "quantpack: left out: %s\n", st.skip_note);
        if (!st.folder.has_tokenizer) {
            if (m->vocab.n_tokens > 0)
                fprintf(stderr, "quantpack: warning: no tokenizer files: %s\n", st.folder.no_tokenizer);
            qp_cli_warn_no_tokenizer(a->out);
        }
    }
    qp_hf_plan_free(&plan);
    qp_model_close(m);
    return rc;
}

int qp_cli_convert_safetensors(const qp_cli_convert_args *a) {
    qp_encoding dtype;
    if (!qp_hf_dtype_from_name(a->quant, &dtype))
        return qp_cli_usage_error("convert: unknown --quant '%s' (--to safetensors takes F32, F16, BF16, keep)", a->quant);
    if (!a->out && !a->dry_run) return qp_cli_usage_error("convert --to safetensors: -o DIR is required");
    return run(a, dtype);
}
