/* Trillim inference independent of the wire protocol (cli/inference_session.h): model + config
 * check, the KV-cache session, generation and its stop rules. Rules: cli/trillim-inference.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/inference_session.h"
#include "quantpack/runtime.h"
#include "quantpack/sampler.h"
#include "readers/trlm_format.h"

struct qp_inf_session {
    const char *prog;
    qp_inf_config c;
    qp_model *m;
    qp_runtime *rt;
    qp_sampler *sm;
    int64_t n_ctx, vocab, pos;
    /* hist[k]: the token at cache position k; every request's sampler re-accepts hist[0..pos-1]
       first, so the repetition penalty looks back across requests exactly as attention does */
    int32_t *hist;
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
    if (lora_file && qp_trlm_apply_lora(m, lora_file, &e) != QP_OK) rc = qp_cli_fail(&e);
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
    qp_runtime_opts ro = {.n_threads = threads, .n_ctx = s->n_ctx, .exact = false};
    qp_err e;
    qp_err_clear(&e);
    if (qp_runtime_new(s->m, &ro, &s->rt, &e) != QP_OK) rc = qp_cli_fail(&e);
    else if (!(s->hist = qp_malloc((size_t)s->n_ctx * sizeof *s->hist)))
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
    qp_sampler_free(s->sm);
    qp_runtime_free(s->rt);
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

/* A fresh sampler with this request's parameters whose history is the cached tokens. */
static int start_sampler(qp_inf_session *s, const qp_inf_request *r) {
    qp_err e;
    qp_err_clear(&e);
    qp_sampler_params sp;
    qp_sampler_params_default(&sp);
    sp.temperature = (float)r->temperature;
    sp.top_k = (int32_t)r->top_k;
    sp.top_p = (float)r->top_p;
    sp.repeat_penalty = (float)r->repetition_penalty;
    sp.repeat_last_n = (int32_t)r->rep_penalty_lookback;
    qp_sampler_free(s->sm);
    s->sm = NULL;
    if (qp_sampler_new(&sp, s->vocab, &s->sm, &e) != QP_OK) return qp_cli_fail(&e);
    for (int64_t k = 0; k < s->pos; k++)
        if (qp_sampler_accept(s->sm, s->hist[k], &e) != QP_OK) return qp_cli_fail(&e);
    return 0;
}

/* Cache positions keep.. get tokens (the cache is rewound to keep first); *logits: the last one's.
 * Without new tokens the last kept one is run again, since its logits are not kept. */
static int prefill(qp_inf_session *s, const qp_inf_request *r, float **logits) {
    const int32_t *tokens = r->tokens;
    int64_t n = r->n_tokens, at = r->keep;
    if (n == 0) {
        if (at == 0) return qp_inf_error(s->prog, "%s", "a request with no tokens and an empty cache");
        tokens = &s->hist[--at];
        n = 1;
    }
    if (at + n > s->n_ctx)
        return qp_inf_error(s->prog, "%lld new tokens at kv_position %lld exceed max_position_embeddings %lld",
                            (long long)n, (long long)at, (long long)s->n_ctx);
    if (at == 0) qp_runtime_reset(s->rt);
    qp_err e;
    qp_err_clear(&e);
    if (qp_runtime_forward_batch(s->rt, tokens, n, at, NULL, logits, &e) != QP_OK) return qp_cli_fail(&e);
    memmove(s->hist + at, tokens, (size_t)n * sizeof *tokens);
    s->pos = at + n;
    return 0;
}

static bool is_eos(const qp_inf_config *c, int32_t tok) {
    for (int k = 0; k < c->num_eos_tokens; k++)
        if (tok == c->eos[k]) return true;
    return false;
}

int qp_inf_session_generate(qp_inf_session *s, const qp_inf_request *r) {
    if (r->keep < 0 || r->keep > s->pos)
        return qp_inf_error(s->prog, "kv_position %lld is outside 0..%lld (the tokens in the cache)",
                            (long long)r->keep, (long long)s->pos);
    for (int64_t k = 0; k < r->n_tokens; k++)
        if (r->tokens[k] < 0 || r->tokens[k] >= s->vocab)
            return qp_inf_error(s->prog, "token id %d is outside the vocabulary (0..%lld)", r->tokens[k],
                                (long long)s->vocab - 1);
    float *logits = NULL;
    int rc = prefill(s, r, &logits);
    if (rc == 0) rc = start_sampler(s, r);
    if (rc) return rc;
    qp_err e;
    qp_err_clear(&e);
    bool eos = false;
    for (int64_t g = 1;; g++) {
        int32_t tok;
        if (qp_sampler_sample(s->sm, logits, &tok, &e) != QP_OK || qp_sampler_accept(s->sm, tok, &e) != QP_OK)
            return qp_cli_fail(&e);
        printf("%d\n", tok);
        fflush(stdout);
        eos = is_eos(&s->c, tok);
        if (s->pos >= s->n_ctx) break; /* the cache is full: the token is printed but not cached */
        if (qp_runtime_forward(s->rt, tok, s->pos, &logits, &e) != QP_OK) return qp_cli_fail(&e);
        s->hist[s->pos++] = tok;
        if (eos || (r->max_tokens > 0 && g >= r->max_tokens)) break;
    }
    /* a stop other than EOS: the client waits for an EOS id, so one ends the response */
    if (!eos && s->c.num_eos_tokens > 0) printf("%lld\n", (long long)s->c.eos[0]);
    printf("%lld\n", (long long)s->pos);
    return qp_cli_flush_stdout();
}
