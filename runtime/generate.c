/* Generation sessions (include/quantpack/generate.h; runtime/runtime.md "Generation"). */
#include "quantpack/generate.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "quantpack/core.h"

enum { PROMPT_CHUNK = 64, MAX_END_IDS = 64 };

struct qp_gen_session {
    const qp_model *m;
    qp_runtime *rt;
    qp_tokenizer *tok;
    int32_t *ids; /* the tokens the KV cache holds, n_ids of n_ctx */
    int64_t n_ids, n_ctx, n_vocab;
    const float *logits; /* of ids[n_ids - 1], runtime-owned; NULL when none */
    int32_t end_ids[MAX_END_IDS];
    int n_end;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- end-of-generation tokens: llama.cpp's rule (llama-vocab.cpp, load), by token text ----- */

/* every token with one of these texts ends generation, whatever its type */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", NULL,
};
/* the FIM pad / repo / file-separator tokens end generation too: a GGUF key, else the first
 * token with one of these texts */
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                              "[PAD]", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>", "<reponame>", NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
/* llama.cpp's end-of-turn (EOT) texts that are not in k_eog_texts: the EOT ends generation too */
static const char *const k_eot_only_texts[] = {"<\uff5cend\u2581of\u2581sentence\uff5c>", NULL};

static bool text_in(const char *t, const char *const *list) {
    for (; *list; list++)
        if (strcmp(t, *list) == 0) return true;
    return false;
}

static const char *token_text(const qp_gen_session *s, int32_t id) {
    const char *t = s->m->vocab.tokens ? s->m->vocab.tokens[id] : NULL;
    return t ? t : "";
}

static void add_end_id(qp_gen_session *s, int32_t id) {
    if (id < 0 || id >= s->n_vocab || s->n_end >= MAX_END_IDS) return;
    for (int i = 0; i < s->n_end; i++)
        if (s->end_ids[i] == id) return;
    s->end_ids[s->n_end++] = id;
}

static void drop_end_id(qp_gen_session *s, int32_t id) {
    for (int i = 0; i < s->n_end; i++)
        if (s->end_ids[i] == id) {
            s->end_ids[i] = s->end_ids[--s->n_end];
            return;
        }
}

/* The id a GGUF key names (tokenizer.ggml.<name>), else the first token whose text is listed. */
static int32_t special_id(const qp_gen_session *s, const char *name, const char *const *texts) {
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s", name);
    const qp_meta *k = qp_model_meta(s->m, key);
    if (k && k->type == QP_META_U32 && k->v.u < (uint64_t)s->n_vocab) /* llama.cpp reads a u32 */
        return (int32_t)k->v.u;
    for (int64_t i = 0; texts && i < s->n_vocab && i < s->m->vocab.n_tokens; i++)
        if (text_in(token_text(s, (int32_t)i), texts)) return (int32_t)i;
    return -1;
}

/* The end id in the set with this text, or -1. */
static int32_t end_id_with_text(const qp_gen_session *s, const char *text) {
    for (int i = 0; i < s->n_end; i++)
        if (strcmp(token_text(s, s->end_ids[i]), text) == 0) return s->end_ids[i];
    return -1;
}

/* FIM pad / repo / separator, every listed text, the EOS, a keyed EOT / EOM; then llama.cpp's two
 * exceptions: <|end|> is not an end beside <|return|> + <|call|> (gpt-oss) or <|calls|> +
 * <|flush|> (solar-open), and </s> is not one beside <|tool_response> (gemma4, paddleocr). */
static void find_end_ids(qp_gen_session *s) {
    const qp_vocab *v = &s->m->vocab;
    add_end_id(s, special_id(s, "fim_pad_token_id", k_fim_pad_texts));
    add_end_id(s, special_id(s, "fim_rep_token_id", k_fim_rep_texts));
    add_end_id(s, special_id(s, "fim_sep_token_id", k_fim_sep_texts));
    for (int64_t i = 0; i < v->n_tokens && i < s->n_vocab; i++)
        if (text_in(token_text(s, (int32_t)i), k_eog_texts)) add_end_id(s, (int32_t)i);
    add_end_id(s, s->m->arch.eos_id >= 0 ? s->m->arch.eos_id : v->eos_id);
    add_end_id(s, special_id(s, "eot_token_id", k_eot_only_texts));
    add_end_id(s, special_id(s, "eom_token_id", NULL));
    bool has_return = end_id_with_text(s, "<|return|>") >= 0, has_flush = end_id_with_text(s, "<|flush|>") >= 0;
    bool has_call = end_id_with_text(s, "<|call|>") >= 0 || end_id_with_text(s, "<|calls|>") >= 0;
    int32_t end = end_id_with_text(s, "<|end|>");
    if (end >= 0 && has_call && (has_return || has_flush)) drop_end_id(s, end);
    int32_t eos_text = end_id_with_text(s, "</s>");
    if (eos_text >= 0 && end_id_with_text(s, "<|tool_response>") >= 0) drop_end_id(s, eos_text);
}

qp_status qp_gen_session_new(const qp_model *m, const qp_runtime_opts *ro, qp_gen_session **out,
                             qp_err *e) {
    qp_runtime_opts def = {.n_threads = 0}; /* every default: the fast path */
    qp_gen_session *s = qp_calloc(1, sizeof *s);
    if (!s) return qp_fail(e, QP_ERR_NOMEM, "generate: out of memory");
    s->m = m;
    qp_status st = qp_runtime_new(m, ro ? ro : &def, &s->rt, e);
    if (st == QP_OK && m->vocab.model != QP_TOK_NONE && m->vocab.n_tokens > 0)
        st = qp_tokenizer_new(&m->vocab, &s->tok, e);
    if (st == QP_OK) {
        const qp_runtime_config *c = qp_runtime_get_config(s->rt);
        s->n_ctx = c->n_ctx;
        s->n_vocab = c->vocab;
        s->ids = qp_malloc((size_t)s->n_ctx * sizeof *s->ids);
        if (!s->ids) st = qp_fail(e, QP_ERR_NOMEM, "generate: out of memory for %lld ids",
                                  (long long)s->n_ctx);
    }
    if (st != QP_OK) {
        qp_gen_session_free(s);
        return st;
    }
    find_end_ids(s);
    *out = s;
    return QP_OK;
}

void qp_gen_session_free(qp_gen_session *s) {
    if (!s) return;
    qp_runtime_free(s->rt);
    qp_tokenizer_free(s->tok);
    qp_free(s->ids);
    qp_free(s);
}

const qp_tokenizer *qp_gen_session_tokenizer(const qp_gen_session *s) { return s->tok; }
const qp_runtime *qp_gen_session_runtime(const qp_gen_session *s) { return s->rt; }
int64_t qp_gen_session_n_ctx(const qp_gen_session *s) { return s->n_ctx; }

const int32_t *qp_gen_session_tokens(const qp_gen_session *s, int64_t *n) {
    *n = s->n_ids;
    return s->ids;
}

void qp_gen_session_reset(qp_gen_session *s) {
    qp_runtime_reset(s->rt);
    s->n_ids = 0;
    s->logits = NULL;
}

qp_status qp_gen_tokenize(const qp_gen_session *s, const char *text, size_t len, bool add_bos,
                          bool parse_special, int32_t **ids, int64_t *n_ids, qp_err *e) {
    if (!s->tok) return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the model has no tokenizer", s->m->path);
    qp_status st = qp_tokenizer_encode(s->tok, text, len, add_bos && qp_model_adds_bos(s->m),
                                       parse_special, ids, n_ids, e);
    const int32_t bos = s->m->vocab.bos_id;
    if (st == QP_OK && add_bos && *n_ids >= 2 && (*ids)[0] == bos && (*ids)[1] == bos) {
        memmove(*ids, *ids + 1, (size_t)(*n_ids - 1) * sizeof **ids); /* the text had its BOS */
        (*n_ids)--;
    }
    return st;
}

/* Whether id ends this call's generation: p's end ids when it names them, else the session's. */
static bool ends_generation(const qp_gen_session *s, const qp_gen_params *p, int32_t id) {
    if (!p->end_ids) return qp_gen_is_end_token(s, id);
    for (size_t i = 0; i < p->n_end_ids; i++)
        if (p->end_ids[i] == id) return true;
    return false;
}

bool qp_gen_is_end_token(const qp_gen_session *s, int32_t id) {
    for (int i = 0; i < s->n_end; i++)
        if (s->end_ids[i] == id) return true;
    return false;
}

const char *qp_gen_stop_name(qp_gen_stop stop) {
    static const char *const names[] = {"none", "eos", "stop", "length", "context", "cancelled",
                                        "callback"};
    return (unsigned)stop < sizeof names / sizeof names[0] ? names[stop] : "none";
}

void qp_gen_params_default(qp_gen_params *p) {
    memset(p, 0, sizeof *p);
    qp_sampler_params_default(&p->sampler);
    p->max_tokens = -1;
}

/* ---- text out: whole UTF-8, stop strings held back ----------------------------------------- */

typedef struct text_out {
    char *held; /* decoded bytes not passed on yet */
    size_t len, cap;
    char *clean; /* the piece being passed on (ill-formed bytes replaced): 3 x held */
    size_t clean_cap;
    const qp_gen_params *p;
} text_out;

/* Bytes of the well-formed UTF-8 sequence at p (n bytes available): its length, 0 when it is
 * ill-formed, or -1 when the n bytes are a proper prefix of a well-formed sequence. */
static int utf8_seq(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len) return 0;
    uint8_t lo = 0x80, hi = 0xBF; /* the second byte's range (Unicode Table 3-7) */
    if (c == 0xE0) lo = 0xA0;
    else if (c == 0xED) hi = 0x9F;
    else if (c == 0xF0) lo = 0x90;
    else if (c == 0xF4) hi = 0x8F;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -1;
        uint8_t b = p[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    }
    return len;
}

/* Copies held[0..n) to t->clean with ill-formed bytes as U+FFFD; stops before a sequence that
 * n cuts short unless final. Returns the clean length; *used gets the bytes consumed. */
static size_t utf8_clean(text_out *t, size_t n, bool final, size_t *used) {
    const uint8_t *p = (const uint8_t *)t->held;
    size_t i = 0, o = 0;
    while (i < n) {
        int k = utf8_seq(p + i, t->len - i);
        if (k < 0 && !final) break; /* may complete with the next token */
        if (k > 0 && i + (size_t)k <= n) {
            memcpy(t->clean + o, p + i, (size_t)k);
            i += (size_t)k;
            o += (size_t)k;
        } else if (k > 0) {
            break; /* a whole sequence straddling n: keep it together */
        } else {
            memcpy(t->clean + o, "\xEF\xBF\xBD", 3);
            i++;
            o += 3;
        }
    }
    *used = i;
    return o;
}

/* Bytes at the end of held that are a proper prefix of some stop string. */
static size_t stop_prefix_len(const text_out *t) {
    size_t best = 0;
    for (size_t k = 0; k < t->p->n_stop; k++) {
        const char *st = t->p->stop[k];
        size_t sl = st ? strlen(st) : 0;
        for (size_t h = sl ? sl - 1 : 0; h > best; h--)
            if (h <= t->len && memcmp(t->held + t->len - h, st, h) == 0) {
                best = h;
                break;
            }
    }
    return best;
}

/* The offset of the earliest stop string in held, or -1. */
static int64_t find_stop(const text_out *t) {
    int64_t at = -1;
    for (size_t k = 0; k < t->p->n_stop; k++) {
        const char *st = t->p->stop[k];
        size_t sl = st ? strlen(st) : 0;
        for (size_t i = 0; sl && i + sl <= t->len && (at < 0 || (int64_t)i < at); i++)
            if (memcmp(t->held + i, st, sl) == 0) {
                at = (int64_t)i;
                break;
            }
    }
    return at;
}

static qp_status held_append(text_out *t, const char *b, size_t n, qp_err *e) {
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n) cap *= 2;
        char *h = qp_realloc(t->held, cap), *c = h ? qp_realloc(t->clean, cap * 3) : NULL;
        if (h) t->held = h;
        if (c) t->clean = c;
        if (!h || !c) return qp_fail(e, QP_ERR_NOMEM, "generate: out of memory for text");
        t->cap = cap;
        t->clean_cap = cap * 3;
    }
    memcpy(t->held + t->len, b, n);
    t->len += n;
    return QP_OK;
}

/* The piece of text ready to pass on after the latest token: into t->clean, *n bytes; *stopped
 * when a stop string appeared (the text before it is passed, the rest dropped); final passes
 * everything held. Consumed bytes leave held. */
static void text_ready(text_out *t, bool final, size_t *n, bool *stopped) {
    int64_t at = find_stop(t);
    *stopped = at >= 0;
    size_t upto = at >= 0 ? (size_t)at : final ? t->len : t->len - stop_prefix_len(t), used = 0;
    if (at >= 0) t->len = (size_t)at; /* the stop string and what follows are dropped */
    *n = utf8_clean(t, upto, final || at >= 0, &used);
    if (used) memmove(t->held, t->held + used, t->len - used);
    t->len -= used;
}

/* Decodes id (after prev) onto the held text. */
static qp_status held_add_piece(text_out *t, const qp_tokenizer *tok, int32_t prev, int32_t id,
                                qp_err *e) {
    char buf[256];
    size_t n = 0;
    qp_status s = qp_tokenizer_decode_piece(tok, prev, id, buf, sizeof buf, &n, e);
    if (s != QP_OK || n <= sizeof buf) return s != QP_OK ? s : held_append(t, buf, n, e);
    char *big = qp_malloc(n);
    if (!big) return qp_fail(e, QP_ERR_NOMEM, "generate: out of memory for a piece");
    size_t n2 = 0;
    s = qp_tokenizer_decode_piece(tok, prev, id, big, n, &n2, e);
    if (s == QP_OK) s = held_append(t, big, n2 < n ? n2 : n, e);
    qp_free(big);
    return s;
}

/* ---- prompt and generation ------------------------------------------------------------------ */

static bool cancelled(const qp_gen_params *p) { return p->cancel && *p->cancel; }

/* Makes the KV cache hold prompt: keeps the common prefix (all but the last token at most, whose
 * logits are needed), runs the rest in chunks. *stop = CANCELLED when cancelled between chunks. */
static qp_status run_prompt(qp_gen_session *s, const int32_t *prompt, int64_t n,
                            const qp_gen_params *p, qp_gen_result *r, qp_err *e) {
    if (n < 1) return qp_fail(e, QP_ERR_ARG, "generate: the prompt has no tokens");
    if (n > s->n_ctx)
        return qp_fail(e, QP_ERR_LIMIT, "generate: the prompt (%lld tokens) does not fit the context of %lld",
                       (long long)n, (long long)s->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (prompt[i] < 0 || prompt[i] >= s->n_vocab)
            return qp_fail(e, QP_ERR_ARG, "generate: prompt token %lld is id %d, outside the vocabulary of %lld",
                           (long long)i, (int)prompt[i], (long long)s->n_vocab);
    int64_t keep = 0;
    while (keep < s->n_ids && keep < n - 1 && s->ids[keep] == prompt[keep]) keep++;
    if (keep < s->n_ids && qp_runtime_is_recurrent(s->rt)) keep = 0; /* no rewinding: start over */
    s->n_ids = keep;
    s->logits = NULL;
    r->n_reused = keep;
    for (int64_t i = keep; i < n; i += PROMPT_CHUNK) {
        if (cancelled(p)) {
            r->stop = QP_GEN_STOP_CANCELLED;
            return QP_OK;
        }
        int64_t c = n - i < PROMPT_CHUNK ? n - i : PROMPT_CHUNK;
        float *logits = NULL;
        qp_status st = qp_runtime_forward_batch(s->rt, prompt + i, c, i, NULL, &logits, e);
        if (st != QP_OK) return st;
        memcpy(s->ids + i, prompt + i, (size_t)c * sizeof *prompt);
        s->n_ids = i + c;
        s->logits = logits;
    }
    return QP_OK;
}

/* A sampler from p whose repetition history is the context. */
static qp_status new_sampler(const qp_gen_session *s, const qp_gen_params *p, qp_sampler **out,
                             qp_err *e) {
    qp_status st = qp_sampler_new(&p->sampler, s->n_vocab, out, e);
    for (int64_t i = 0; st == QP_OK && i < s->n_ids; i++) st = qp_sampler_accept(*out, s->ids[i], e);
    if (st != QP_OK) {
        qp_sampler_free(*out);
        *out = NULL;
    }
    return st;
}

/* Passes the text of token id (or, with final, whatever is left: token -1) to the callback.
 * *stop gets STRING or CALLBACK when generation must end. */
static qp_status pass_text(qp_gen_session *s, text_out *t, int32_t id, bool final,
                           qp_gen_stop *stop, qp_err *e) {
    if (!final && s->tok) {
        int32_t prev = s->n_ids ? s->ids[s->n_ids - 1] : -1;
        qp_status st = held_add_piece(t, s->tok, prev, id, e);
        if (st != QP_OK) return st;
    }
    size_t n = 0;
    bool stopped = false;
    text_ready(t, final, &n, &stopped);
    if (final && n == 0) return QP_OK;
    const qp_gen_params *p = t->p;
    bool go_on = !p->on_token || p->on_token(p->arg, final ? -1 : id, t->clean ? t->clean : "", n);
    if (stopped) *stop = QP_GEN_STOP_STRING;
    else if (!go_on && !final) *stop = QP_GEN_STOP_CALLBACK;
    return QP_OK;
}

/* Samples, passes on and runs tokens until a stop condition. */
static qp_status generate_loop(qp_gen_session *s, qp_sampler *smp, text_out *t, qp_gen_result *r,
                               qp_err *e) {
    const qp_gen_params *p = t->p;
    for (;;) {
        if (p->max_tokens >= 0 && r->n_generated >= p->max_tokens) {
            r->stop = QP_GEN_STOP_MAX_TOKENS;
            return QP_OK;
        }
        if (cancelled(p)) {
            r->stop = QP_GEN_STOP_CANCELLED;
            return QP_OK;
        }
        int32_t next = -1;
        qp_status st = qp_sampler_sample(smp, s->logits, &next, e);
        if (st != QP_OK) return st;
        if (ends_generation(s, p, next)) {
            r->stop = QP_GEN_STOP_EOS;
            r->end_token = next;
            return QP_OK;
        }
        r->n_generated++;
        if ((st = pass_text(s, t, next, false, &r->stop, e)) != QP_OK || r->stop != QP_GEN_STOP_NONE)
            return st;
        if (p->max_tokens >= 0 && r->n_generated >= p->max_tokens) continue; /* not run */
        if (s->n_ids >= s->n_ctx) {
            r->stop = QP_GEN_STOP_CONTEXT;
            return QP_OK;
        }
        float *logits = NULL;
        if ((st = qp_sampler_accept(smp, next, e)) != QP_OK ||
            (st = qp_runtime_forward(s->rt, next, s->n_ids, &logits, e)) != QP_OK)
            return st;
        s->ids[s->n_ids++] = next;
        s->logits = logits;
    }
}

qp_status qp_gen_generate(qp_gen_session *s, const int32_t *prompt, int64_t n_prompt,
                          const qp_gen_params *p, qp_gen_result *res, qp_err *e) {
    qp_gen_result r = {.n_prompt = n_prompt, .end_token = -1};
    text_out t = {.p = p};
    qp_sampler *smp = NULL;
    double t0 = now_s();
    qp_status st = run_prompt(s, prompt, n_prompt, p, &r, e);
    double t1 = now_s();
    r.prompt_s = t1 - t0;
    if (st == QP_OK && r.stop == QP_GEN_STOP_NONE) st = new_sampler(s, p, &smp, e);
    if (st == QP_OK && r.stop == QP_GEN_STOP_NONE) st = generate_loop(s, smp, &t, &r, e);
    if (st == QP_OK) {
        qp_gen_stop ignored = QP_GEN_STOP_NONE;
        st = pass_text(s, &t, -1, true, &ignored, e); /* what was held to the end */
    }
    r.generate_s = now_s() - t1;
    qp_sampler_free(smp);
    qp_free(t.held);
    qp_free(t.clean);
    if (res) *res = r;
    return st;
}
