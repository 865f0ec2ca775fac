/* A program outside the quantpack tree, built against an installed quantpack (tests/e2e/
 * test_install.sh builds it with pkg-config and with find_package): converts a model, verifies
 * the output against it with a receipt, and generates a few tokens greedily from the output.
 *
 * usage: embed SRC OUT gguf|rdrr|trlm|safetensors QUANT RECEIPT N_TOKENS
 * stdout: "ids: <prompt ids> <generated ids>" (as `quantpack run --print-ids` prints them), then
 * "text: <decoded>", "progress: <callbacks> <tensors>", "verdict: PASS|FAIL".
 * Also checks that a conversion whose cancellation flag is set returns QP_ERR_CANCELLED and
 * leaves nothing at OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <quantpack/quantpack.h>

typedef struct counter {
    int64_t calls, last_done, n;
} counter;

static void on_progress(void *user, int64_t done, int64_t n, uint64_t bytes) {
    counter *c = user;
    (void)bytes;
    c->calls++;
    c->last_done = done;
    c->n = n;
}

static int fail(const char *what, const qp_err *e) {
    fprintf(stderr, "embed: %s: %s: %s\n", what, qp_status_name(e->status), e->msg);
    return 1;
}

/* Greedy generation with the runtime and the sampler; prints ids and text. */
static qp_status generate(const qp_model *m, const char *prompt, int n_new, qp_err *e) {
    qp_tokenizer *tok = NULL;
    qp_runtime *rt = NULL;
    qp_sampler *smp = NULL;
    int32_t *ids = NULL, prev;
    int64_t n = 0;
    float *logits = NULL;
    qp_sampler_params sp;
    qp_sampler_params_default(&sp);
    qp_runtime_opts ro = {.n_threads = 1, .n_ctx = 0, .exact = false};
    qp_status s = qp_tokenizer_new(&m->vocab, &tok, e);
    if (s == QP_OK) s = qp_tokenizer_encode(tok, prompt, strlen(prompt), qp_model_adds_bos(m), false, &ids, &n, e);
    if (s == QP_OK) s = qp_runtime_new(m, &ro, &rt, e);
    if (s == QP_OK) s = qp_sampler_new(&sp, qp_runtime_get_config(rt)->vocab, &smp, e);
    if (s == QP_OK) s = qp_runtime_forward_batch(rt, ids, n, 0, NULL, &logits, e);
    for (int64_t i = 0; s == QP_OK && i < n; i++) s = qp_sampler_accept(smp, ids[i], e);
    printf("ids:");
    for (int64_t i = 0; s == QP_OK && i < n; i++) printf(" %d", ids[i]);
    char text[4096] = "";
    size_t used = 0, len = 0;
    int32_t eos = m->arch.eos_id >= 0 ? m->arch.eos_id : m->vocab.eos_id;
    prev = n > 0 ? ids[n - 1] : -1;
    for (int k = 0; s == QP_OK && k < n_new; k++) {
        int32_t next;
        s = qp_sampler_sample(smp, logits, &next, e);
        if (s != QP_OK || next == eos) break;
        printf(" %d", next);
        s = qp_tokenizer_decode_piece(tok, prev, next, text + used, sizeof text - 1 - used, &len, e);
        if (s == QP_OK && len < sizeof text - 1 - used) used += len;
        prev = next;
        if (s == QP_OK) s = qp_sampler_accept(smp, next, e);
        if (s == QP_OK && k + 1 < n_new) s = qp_runtime_forward(rt, next, n + k, &logits, e);
    }
    text[used] = '\0';
    printf("\ntext: %s\n", text);
    qp_free(ids);
    qp_sampler_free(smp);
    qp_runtime_free(rt);
    qp_tokenizer_free(tok);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: embed SRC OUT gguf|rdrr|trlm|safetensors QUANT RECEIPT N_TOKENS\n");
        return 2;
    }
    if (strcmp(qp_version(), QP_VERSION_STRING) != 0) {
        fprintf(stderr, "embed: library %s, headers %s\n", qp_version(), QP_VERSION_STRING);
        return 1;
    }
    qp_err e = {0};
    qp_model *src = NULL, *out = NULL;
    if (qp_model_open(argv[1], NULL, &src, &e) != QP_OK) return fail("open", &e);

    qp_convert_params p;
    qp_convert_params_default(&p);
    p.target = strcmp(argv[3], "rdrr") == 0          ? QP_CONVERT_TO_RDRR
               : strcmp(argv[3], "trlm") == 0        ? QP_CONVERT_TO_TRLM
               : strcmp(argv[3], "safetensors") == 0 ? QP_CONVERT_TO_SAFETENSORS
                                                     : QP_CONVERT_TO_GGUF;
    p.quant = argv[4];
    qp_cancel_flag cancel;
    atomic_init(&cancel, true);
    p.cancel = &cancel;
    qp_status s = qp_convert_model(src, &p, argv[2], NULL, &e);
    if (s != QP_ERR_CANCELLED || access(argv[2], F_OK) == 0) {
        fprintf(stderr, "embed: a cancelled conversion returned %s and %s\n", qp_status_name(s),
                access(argv[2], F_OK) == 0 ? "left its output" : "left nothing");
        qp_model_close(src);
        return 1;
    }
    qp_err_clear(&e);
    counter c = {0, 0, 0};
    p.cancel = NULL;
    p.progress = on_progress;
    p.progress_user = &c;
    qp_convert_result res;
    if (qp_convert_model(src, &p, argv[2], &res, &e) != QP_OK) return fail("convert", &e);
    printf("progress: %lld %lld of %lld tensors\n", (long long)c.calls, (long long)c.last_done,
           (long long)res.n_tensors);

    qp_verify_report *rep = NULL;
    char *json = NULL;
    if (qp_model_open(argv[2], NULL, &out, &e) != QP_OK) return fail("open output", &e);
    if (qp_verify_text(out, src, "Once upon a time", NULL, &rep, &e) != QP_OK ||
        qp_verify_report_json(rep, &json, &e) != QP_OK ||
        qp_file_write_atomic(argv[5], json, strlen(json), &e) != QP_OK)
        return fail("verify", &e);
    bool passed = qp_verify_report_passed(rep);
    if (generate(out, "Once upon a time", atoi(argv[6]), &e) != QP_OK) return fail("generate", &e);
    printf("verdict: %s\n", passed ? "PASS" : "FAIL");
    qp_free(json);
    qp_verify_report_free(rep);
    qp_model_close(out);
    qp_model_close(src);
    return passed ? 0 : 1;
}
