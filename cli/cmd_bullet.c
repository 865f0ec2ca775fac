/* .bullet commands:
 *   bullet-pack SRC [--tokenizer FILE] -o MODEL.bullet [--heads gen,sentiment,...]
 *               [--head-weights FILE.safetensors] [--name NAME] [--checksum]
 *   quantpack convert SRC --to bullet -o OUT [same options]
 *   quantpack run MODEL --task gen|sentiment|ner|pos|classifier (-p TEXT | --ids "...")
 * Layout, mapping and limits: readers/bullet.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "converters/convert_bullet.h"
#include "quantpack/runtime.h"
#include "quantpack/tokenizer.h"

/* --dry-run: the plan as bullet-core will read the file; closes m, writes nothing. */
static int print_plan(qp_model *m, const qp_bullet_convert_opts *co) {
    qp_err e = {0};
    qp_plan plan;
    qp_status s = qp_convert_bullet_plan(m, co, &plan, &e);
    return qp_cli_dry_run_done(m, s, &plan, &e);
}

/* Packs a->src as .bullet (options parsed by cli/cmd_convert.c). */
int qp_cli_convert_bullet(const qp_cli_convert_args *a) {
    const char *name = a->cmd, *heads = a->heads;
    qp_open_opts oo = {0};
    oo.tokenizer_path = a->tokenizer;
    qp_bullet_convert_opts co = {0};
    co.head_weights = a->head_weights;
    co.model_name = a->name;
    co.checksum = a->checksum;
    co.allow_nonfinite = a->allow_nonfinite;
    co.allow_requantize = a->allow_requantize;
    if (!a->out && !a->dry_run) return qp_cli_usage_error("%s: -o MODEL.bullet is required", name);
    char buf[256];
    const char *tasks[QP_BULLET_N_TASKS + 1];
    int n_tasks = 0;
    if (heads) {
        if (strlen(heads) >= sizeof buf) return qp_cli_usage_error("%s: --heads is too long", name);
        strcpy(buf, heads);
        for (char *tokp = strtok(buf, ","); tokp; tokp = strtok(NULL, ",")) {
            if (qp_bullet_task_index(tokp) < 0)
                return qp_cli_usage_error("%s: unknown head '%s' (gen, ner, pos, sentiment, classifier)",
                                          name, tokp);
            if (n_tasks == QP_BULLET_N_TASKS) return qp_cli_usage_error("%s: too many heads", name);
            tasks[n_tasks++] = tokp;
        }
    }
    co.tasks = tasks;
    co.n_tasks = n_tasks;
    bool extra = false;
    for (int i = 0; i < n_tasks; i++) extra |= strcmp(tasks[i], "gen") != 0;
    if (extra && !co.head_weights)
        return qp_cli_usage_error("%s: heads other than gen need --head-weights FILE.safetensors", name);
    if (!extra && co.head_weights)
        return qp_cli_usage_error("%s: --head-weights without --heads naming a task head", name);
    qp_err e = {0};
    qp_model *m = NULL;
    if (qp_model_open(a->src, &oo, &m, &e) != QP_OK) return qp_cli_fail(&e);
    qp_cli_warn_problems(m);
    if (a->dry_run) return print_plan(m, &co);
    qp_cli_progress pr;
    qp_cli_progress_start(&pr);
    co.progress = qp_cli_progress_cb;
    co.progress_ud = &pr;
    qp_bullet_convert_stats st;
    qp_status s = qp_convert_to_bullet(m, a->out, &co, &st, &e);
    int64_t n_heads = m->arch.n_heads;
    qp_model_close(m);
    if (s != QP_OK) {
        qp_cli_progress_end(&pr);
        return qp_cli_fail(&e);
    }
    fprintf(stderr, "%s: wrote %s: %lld tensors", name, a->out, (long long)st.n_tensors);
    if (st.ffn_out && st.ffn_src != st.ffn_out)
        fprintf(stderr, ", FFN %lld zero-padded to %lld", (long long)st.ffn_src, (long long)st.ffn_out);
    if (st.kv_heads_src && st.kv_heads_src != n_heads)
        fprintf(stderr, ", %lld K/V heads repeated to %lld", (long long)st.kv_heads_src, (long long)n_heads);
    if (st.permuted_qk) fprintf(stderr, ", q/k rows reordered for adjacent-pair RoPE");
    if (st.tied) fprintf(stderr, ", gen_head from the tied embedding");
    fprintf(stderr, "\n");
    return QP_EXIT_OK;
}

/* ---- run --task ------------------------------------------------------------------------------ */

/* run --task NAME (options parsed by cli/cmd_run.c): a .bullet task head over the input. */
int qp_cli_run_task(const qp_cli_run_args *a) {
    const char *task = a->task, *path = a->path;
    int ti = qp_bullet_task_index(task);
    if (ti < 0) return qp_cli_usage_error("run: unknown task '%s' (gen, ner, pos, sentiment, classifier)", task);
    bool per_token = ti == 1 || ti == 2; /* ner, pos */

    qp_err e = {0};
    qp_model *m = NULL;
    qp_tokenizer *tok = NULL;
    qp_runtime *rt = NULL;
    qp_bullet_task_head head = {0};
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    float *scores = NULL;
    int rc = QP_EXIT_OK;
    qp_status s = qp_model_open(path, &a->g.open, &m, &e);
    if (s != QP_OK) return qp_cli_fail(&e);
    if ((s = qp_bullet_task_head_get(m, task, &head, &e)) != QP_OK) goto fail;
    if (m->vocab.model != QP_TOK_NONE && m->vocab.n_tokens > 0 &&
        (s = qp_tokenizer_new(&m->vocab, &tok, &e)) != QP_OK)
        goto fail;
    if (a->prompt) {
        if (!tok) {
            qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: no tokenizer we can run; use --ids", path);
            goto fail;
        }
        if ((s = qp_tokenizer_encode(tok, a->prompt, strlen(a->prompt), m->vocab.add_bos && !a->no_bos,
                                     false, &ids, &n_ids, &e)) != QP_OK)
            goto fail;
    } else if ((s = qp_cli_parse_ids(a->ids, " ,\t\n", &ids, &n_ids, &e)) != QP_OK) {
        goto fail;
    }
    if (n_ids == 0) {
        rc = qp_cli_usage_error("run: the input has no tokens");
        goto done;
    }
    qp_runtime_opts ro = {.n_threads = (int)a->g.threads, .n_ctx = 0, .exact = a->g.exact, .no_repack = a->g.no_repack};
    if ((s = qp_runtime_new(m, &ro, &rt, &e)) != QP_OK) goto fail;
    const qp_runtime_config *c = qp_runtime_get_config(rt);
    if (n_ids > c->n_ctx) {
        qp_fail(&e, QP_ERR_LIMIT, "the input (%lld tokens) does not fit the context of %lld",
                (long long)n_ids, (long long)c->n_ctx);
        goto fail;
    }
    scores = qp_malloc((size_t)head.n_out * sizeof *scores);
    if (!scores) {
        qp_fail(&e, QP_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < n_ids; i++) {
        float *logits;
        if ((s = qp_runtime_forward(rt, ids[i], i, &logits, &e)) != QP_OK) goto fail;
        if (!per_token) continue;
        qp_bullet_task_scores(&head, qp_runtime_hidden(rt), scores);
        int64_t best = 0;
        for (int64_t k = 1; k < head.n_out; k++)
            if (scores[k] > scores[best]) best = k;
        char piece[256];
        size_t pl = 0;
        if (!tok || qp_tokenizer_decode_piece(tok, i ? ids[i - 1] : -1, ids[i], piece, sizeof piece, &pl,
                                              NULL) != QP_OK)
            pl = (size_t)snprintf(piece, sizeof piece, "%d", (int)ids[i]);
        if (pl > sizeof piece) pl = sizeof piece;
        printf("%.*s\t%s\t%.6f\n", (int)pl, piece, head.labels[best], (double)scores[best]);
    }
    if (!per_token) {
        /* class scores of the last position: softmax over the head's outputs */
        qp_bullet_task_scores(&head, qp_runtime_hidden(rt), scores);
        double mx = scores[0], sum = 0;
        for (int64_t k = 1; k < head.n_out; k++) mx = fmax(mx, scores[k]);
        for (int64_t k = 0; k < head.n_out; k++) sum += exp((double)scores[k] - mx);
        for (int64_t k = 0; k < head.n_out; k++)
            printf("%s: %.6f\n", head.labels[k], exp((double)scores[k] - mx) / sum);
    }
    rc = qp_cli_flush_stdout();
    goto done;
fail:
    rc = qp_cli_fail(&e);
done:
    qp_free(scores);
    qp_free(ids);
    qp_runtime_free(rt);
    qp_tokenizer_free(tok);
    qp_bullet_task_head_free(&head);
    qp_model_close(m);
    return rc;
}
