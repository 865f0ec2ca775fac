/* Trillim inference independent of the wire protocol (cli/inference_session.h): model + config
 * check, the KV-cache session, generation and its stop rules. Rules: cli/trillim-inference.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/inference_session.h"
#include "quantpack/generate.h"
#include "readers/trlm_bundle.h"
#include "readers/trlm_format.h"

struct qp_inf_session {
    const char *prog;
    qp_inf_config c;
    qp_model *m;
    qp_gen_session *gen; /* the library's generation loop (include/quantpack/generate.h) */
    int64_t n_ctx, vocab, pos;
    /* hist[0..pos): the tokens the client's kv_position counts (the generated ones included);
       the generation session runs those it does not hold yet with the next request's prompt.
       prompt: that request's prompt, hist[0..keep) then its new tokens. */
    int32_t *hist, *prompt;
    int32_t eos[QP_TRILLIM_MAX_EOS];
};

#define INF_INT(field, max) {#field, NULL, QP_CLI_I64, &c->field, .lo = 0, .hi = (max)}
#define INF_BOOL(field) INF_INT(field, 1)
#define INF_NUM(field) {#field, NULL, QP_CLI_F64, &c->field, .flo = 0}

void qp_inf_config_fields(qp_inf_config *c, qp_cli_opt rows[QP_INF_N_FIELDS]) {
    const int64_t big = (int64_t)1 << 31;
    const qp_cli_opt fields[QP_INF_N_FIELDS] = {
        INF_INT(arch_type, big), INF_INT(activation, big), INF_INT(hidden_dim, big),
        INF_INT(intermediate_dim, big), INF_INT(num_layers, big), INF_INT(num_heads, big),
        INF_INT(num_kv_heads, big), INF_INT(vocab_size, big), INF_INT(head_dim, big),
        INF_INT(max_position_embeddings, big), INF_NUM(norm_eps), INF_NUM(rope_theta),
        INF_BOOL(tie_word_embeddings), INF_BOOL(has_qkv_bias), INF_BOOL(has_attn_sub_norm),
        INF_BOOL(has_ffn_sub_norm), INF_INT(num_threads, QP_CLI_MAX_THREADS),
        INF_INT(num_eos_tokens, QP_TRILLIM_MAX_EOS),
    };
    memcpy(rows, fields, sizeof fields);
}

/* The config must describe the model in the folder. */
static int check_config(const char *prog, const qp_inf_config *c, const qp_model *m, const char *dir) {
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
            return qp_inf_error(prog, "%s is %lld but the model in %s has %lld", chk[k].what,
                                (long long)chk[k].got, dir, (long long)chk[k].want);
    if (c->max_position_embeddings < 1 || c->max_position_embeddings > a->max_pos)
        return qp_inf_error(prog, "max_position_embeddings %lld is outside 1..%lld (rope.cache)",
                            (long long)c->max_position_embeddings, (long long)a->max_pos);
    if (!(c->norm_eps > 0) || !(c->rope_theta > 0))
        return qp_inf_error(prog, "norm_eps %g and rope_theta %g must be positive", c->norm_eps, c->rope_theta);
    if (fabs(c->norm_eps - (double)a->norm_eps) > 1e-6 * fabs(c->norm_eps) + 1e-12 ||
        fabs(c->rope_theta - (double)a->rope_theta) > 1e-6 * c->rope_theta)
        return qp_inf_error(prog, "norm_eps %g / rope_theta %g differ from the model's %g / %g",
                            c->norm_eps, c->rope_theta, (double)a->norm_eps, (double)a->rope_theta);
    for (int k = 0; k < c->num_eos_tokens; k++)
        if (c->eos[k] >= a->vocab)
            return qp_inf_error(prog, "EOS token %lld is outside the vocabulary (%lld)", (long long)c->eos[k],
                                (long long)a->vocab);
    return QP_EXIT_OK;
}

/* The model in dir with lora_file merged when given, checked against c. */
static int open_model(const char *prog, const char *dir, const char *lora_file, const qp_inf_config *c,
                      qp_model **out) {
    qp_err e;
    qp_err_clear(&e);
    if (qp_format_detect(dir) != QP_FORMAT_TRLM)
        return qp_inf_error(prog, "%s: not a TRLM model folder (no qmodel.tensors)", dir);
    qp_model *m = NULL;
    if (qp_model_open(dir, NULL, &m, &e) != QP_OK) return qp_cli_fail(&e);
    int rc = QP_EXIT_OK;
    if (lora_file && (qp_trlm_adapter_check(dir, lora_file, &e) != QP_OK ||
                      qp_trlm_apply_lora(m, lora_file, &e) != QP_OK))
        rc = qp_cli_fail(&e);
    if (rc == QP_EXIT_OK) rc = check_config(prog, c, m, dir);
    if (rc != QP_EXIT_OK) {
        qp_model_close(m);
        return rc;
    }
    *out = m;
    return QP_EXIT_OK;
}

int qp_inf_session_open(const char *prog, const char *dir, const char *lora_file, const qp_inf_config *c,
                        qp_inf_session **out) {
    qp_inf_session *s = qp_calloc(1, sizeof *s);
    if (!s) return qp_cli_error(QP_ERR_NOMEM, "%s: out of memory", prog);
    s->prog = prog;
    s->c = *c;
    s->n_ctx = c->max_position_embeddings;
    int rc = open_model(prog, dir, lora_file, c, &s->m);
    if (rc != QP_EXIT_OK) {
        qp_free(s);
        return rc;
    }
    s->vocab = s->m->arch.vocab;
    int threads = (int)c->num_threads;
    if (threads == 0) { /* auto: the SDK's hardware_concurrency - 2 */
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        threads = nc > 3 ? (int)nc - 2 : 1;
    }
    for (int k = 0; k < c->num_eos_tokens; k++) s->eos[k] = c->eos[k] >= 0 ? (int32_t)c->eos[k] : -1;
    qp_runtime_opts ro = {.n_threads = threads, .n_ctx = s->n_ctx, .exact = false};
    qp_err e;
    qp_err_clear(&e);
    if (qp_gen_session_new(s->m, &ro, &s->gen, &e) != QP_OK) rc = qp_cli_fail(&e);
    else if (!(s->hist = qp_malloc((size_t)s->n_ctx * sizeof *s->hist)) ||
             !(s->prompt = qp_malloc((size_t)s->n_ctx * sizeof *s->prompt)))
        rc = qp_cli_error(QP_ERR_NOMEM, "%s: out of memory for %lld positions", prog, (long long)s->n_ctx);
    if (rc != QP_EXIT_OK) {
        qp_inf_session_close(s);
        return rc;
    }
    *out = s;
    return QP_EXIT_OK;
}

void qp_inf_session_close(qp_inf_session *s) {
    if (!s) return;
    qp_free(s->hist);
    qp_free(s->prompt);
    qp_gen_session_free(s->gen);
    qp_model_close(s->m);
    qp_free(s);
}

int64_t qp_inf_session_position(const qp_inf_session *s) { return s->pos; }
int64_t qp_inf_session_vocab(const qp_inf_session *s) { return s->vocab; }
const qp_model *qp_inf_session_model(const qp_inf_session *s) { return s->m; }

int qp_inf_check_sampling(const char *prog, const qp_inf_request *r) {
    if (r->temperature < 0) return qp_inf_error(prog, "temperature %g is negative", r->temperature);
    if (r->top_k < 0 || r->top_k > (1ll << 30)) return qp_inf_error(prog, "top_k %lld is out of range", (long long)r->top_k);
    if (r->top_p < 0) return qp_inf_error(prog, "top_p %g is negative", r->top_p);
    if (!(r->repetition_penalty > 0))
        return qp_inf_error(prog, "repetition_penalty %g must be positive", r->repetition_penalty);
    if (r->rep_penalty_lookback < 0 || r->rep_penalty_lookback > (1ll << 30))
        return qp_inf_error(prog, "rep_penalty_lookback %lld is out of range", (long long)r->rep_penalty_lookback);
    if (r->max_tokens < 0) return qp_inf_error(prog, "max_tokens %lld is negative", (long long)r->max_tokens);
    return 0;
}

/* This request's generation parameters; arg: the session, which on_token prints to. */
static void request_params(qp_inf_session *s, const qp_inf_request *r, qp_gen_params *p) {
    qp_gen_params_default(p);
    p->sampler.temperature = (float)r->temperature;
    p->sampler.top_k = (int32_t)r->top_k;
    p->sampler.top_p = (float)r->top_p;
    p->sampler.repeat_penalty = (float)r->repetition_penalty;
    p->sampler.repeat_last_n = (int32_t)r->rep_penalty_lookback;
    p->max_tokens = r->max_tokens > 0 ? r->max_tokens : -1; /* 0: until EOS or the cache is full */
    p->end_ids = s->eos;
    p->n_end_ids = (size_t)s->c.num_eos_tokens;
}

/* A generated token goes to the client, and to the cache while it has room (a token sampled
 * with the cache full is printed but not cached). */
static void emit_token(qp_inf_session *s, int32_t tok) {
    printf("%d\n", tok);
    fflush(stdout);
    if (s->pos < s->n_ctx) s->hist[s->pos++] = tok;
}

static bool on_token(void *arg, int32_t tok, const char *text, size_t len) {
    (void)text;
    (void)len;
    if (tok >= 0) emit_token(arg, tok);
    return true;
}

/* The prompt: cache positions 0..keep then the new tokens; without new tokens the last kept one
 * is run again, since its logits are not kept (the generation session does so itself). */
static int make_prompt(qp_inf_session *s, const qp_inf_request *r, int64_t *n) {
    if (r->n_tokens == 0 && r->keep == 0)
        return qp_inf_error(s->prog, "%s", "a request with no tokens and an empty cache");
    if (r->keep + r->n_tokens > s->n_ctx)
        return qp_inf_error(s->prog, "%lld new tokens at kv_position %lld exceed max_position_embeddings %lld",
                            (long long)r->n_tokens, (long long)r->keep, (long long)s->n_ctx);
    memcpy(s->prompt, s->hist, (size_t)r->keep * sizeof *s->prompt);
    memcpy(s->prompt + r->keep, r->tokens, (size_t)r->n_tokens * sizeof *r->tokens);
    *n = r->keep + r->n_tokens;
    return 0;
}

int qp_inf_session_generate(qp_inf_session *s, const qp_inf_request *r) {
    if (r->keep < 0 || r->keep > s->pos)
        return qp_inf_error(s->prog, "kv_position %lld is outside 0..%lld (the tokens in the cache)",
                            (long long)r->keep, (long long)s->pos);
    for (int64_t k = 0; k < r->n_tokens; k++)
        if (r->tokens[k] < 0 || r->tokens[k] >= s->vocab)
            return qp_inf_error(s->prog, "token id %d is outside the vocabulary (0..%lld)", r->tokens[k],
                                (long long)s->vocab - 1);
    int64_t n = 0;
    int rc = make_prompt(s, r, &n);
    if (rc) return rc;
    memcpy(s->hist, s->prompt, (size_t)n * sizeof *s->hist);
    s->pos = n;
    qp_gen_params p;
    request_params(s, r, &p);
    p.on_token = on_token;
    p.arg = s;
    qp_gen_result res;
    qp_err e;
    qp_err_clear(&e);
    if (qp_gen_generate(s->gen, s->prompt, n, &p, &res, &e) != QP_OK) return qp_cli_fail(&e);
    if (res.stop == QP_GEN_STOP_EOS) emit_token(s, res.end_token);
    /* a stop other than EOS: the client waits for an EOS id, so one ends the response */
    else if (s->c.num_eos_tokens > 0) printf("%lld\n", (long long)s->c.eos[0]);
    printf("%lld\n", (long long)s->pos);
    return qp_cli_flush_stdout();
}
