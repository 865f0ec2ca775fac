/* Parity metrics, verify runs and the versioned receipt JSON (runtime/runtime.md "verify"). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"
#include "quantpack/quantpack.h"
#include "runtime/runtime_internal.h"

/* ---- metrics ------------------------------------------------------------------------------- */

int32_t qp_logits_argmax(const float *logits, int64_t n) {
    if (n <= 0) return -1;
    int64_t best = -1;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return (int32_t)(best < 0 ? 0 : best);
}

void qp_logits_compare(const float *ref, const float *test, int64_t n, qp_logit_stats *out) {
    double dot = 0.0, na = 0.0, nb = 0.0, mad = 0.0;
    double ma = -INFINITY, mb = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double a = ref[i], b = test[i];
        dot += a * b;
        na += a * a;
        nb += b * b;
        double d = fabs(a - b);
        if (d > mad || isnan(d)) mad = d;
        if (a > ma) ma = a;
        if (b > mb) mb = b;
    }
    if (na == 0.0 && nb == 0.0) out->cosine = 1.0;
    else if (na == 0.0 || nb == 0.0) out->cosine = 0.0;
    else out->cosine = dot / (sqrt(na) * sqrt(nb));
    /* KL(P || Q) = sum p (log p - log q), with log-softmax in double */
    double sa = 0.0, sb = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sa += exp((double)ref[i] - ma);
        sb += exp((double)test[i] - mb);
    }
    double lza = ma + log(sa), lzb = mb + log(sb), kl = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double lpa = (double)ref[i] - lza, lpb = (double)test[i] - lzb;
        double pa = exp(lpa);
        if (pa > 0.0) kl += pa * (lpa - lpb);
    }
    out->kl = kl < 0.0 ? 0.0 : kl; /* rounding can give -1e-17 */
    out->max_abs_diff = mad;
    out->top1_ref = qp_logits_argmax(ref, n);
    out->top1_test = qp_logits_argmax(test, n);
}

qp_status qp_sha256_file(const char *path, char hex[65], qp_err *e) {
    int fd;
    qp_status so = qp_file_open_regular(path, 0, &fd, NULL, e);
    if (so != QP_OK) return so;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: cannot open for hashing", path);
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char *buf = qp_malloc(1 << 20);
    qp_status s = QP_OK;
    if (!ctx || !buf || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: cannot set up SHA-256", path);
        goto done;
    }
    for (;;) {
        size_t n = fread(buf, 1, 1 << 20, f);
        if (n > 0 && EVP_DigestUpdate(ctx, buf, n) != 1) {
            s = qp_fail(e, QP_ERR_INTERNAL, "%s: SHA-256 update failed", path);
            goto done;
        }
        if (n < (1 << 20)) {
            if (ferror(f)) s = qp_fail(e, QP_ERR_IO, "%s: read error while hashing", path);
            break;
        }
    }
    if (s == QP_OK) {
        unsigned char md[32];
        unsigned int len = 0;
        if (EVP_DigestFinal_ex(ctx, md, &len) != 1 || len != 32) {
            s = qp_fail(e, QP_ERR_INTERNAL, "%s: SHA-256 final failed", path);
            goto done;
        }
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    }
done:
    EVP_MD_CTX_free(ctx);
    qp_free(buf);
    fclose(f);
    return s;
}

/* ---- thresholds ---------------------------------------------------------------------------- */

/* A microsoft/bitnet-b1.58 packed projection: U8 "<base>.weight" with a one-element
 * "<base>.weight_scale" (what runtime/weights.c unpacks: four ternary weights per byte). */
static bool is_bitnet_packed(const qp_model *m, const qp_tensor *x) {
    if (x->enc != QP_ENC_U8) return false;
    const char *name = x->canon ? x->canon : x->name;
    size_t nl = name ? strlen(name) : 0;
    char sn[200];
    if (nl < 7 || strcmp(name + nl - 7, ".weight") != 0 ||
        snprintf(sn, sizeof sn, "%s_scale", name) >= (int)sizeof sn)
        return false;
    const qp_tensor *st = qp_model_find(m, sn);
    return st && qp_tensor_nelements(st) == 1;
}

void qp_verify_default_thresholds(const qp_model *out, const qp_model *src,
                                  qp_verify_thresholds *t) {
    double min_bpw = 64.0;
    bool ternary = false, identical = src != NULL, any = false, bf16 = false;
    for (int64_t i = 0; out && i < out->n_tensors; i++) {
        const qp_tensor *x = &out->tensors[i];
        if (x->n_dims < 2 || x->ne[1] < 2) continue;
        /* by what the file stores: a decoded copy (RDRR padded rows) keeps its stored class */
        qp_encoding xe = qp_tensor_stored_enc(x);
        const qp_encoding_traits *tr = qp_encoding_get(xe);
        if (!tr || tr->block_elems <= 0) continue;
        any = true;
        double bpw = (double)tr->block_bytes * 8.0 / (double)tr->block_elems;
        /* the U8 container of a packed BitNet checkpoint holds 2-bit ternary codes */
        if (is_bitnet_packed(out, x)) {
            bpw = 2.0;
            ternary = true;
        }
        if (bpw < min_bpw) min_bpw = bpw;
        if (tr->flags & QP_ENC_FLAG_TERNARY) ternary = true;
        if (xe == QP_ENC_BF16) bf16 = true;
        if (src) {
            const qp_tensor *y = qp_model_find(src, x->canon ? x->canon : x->name);
            if (!y || qp_tensor_stored_enc(y) != xe || y->decoded_copy || x->decoded_copy)
                identical = false;
        }
    }
    if (!any) identical = false;
    if (identical || min_bpw >= 32.0) {
        *t = (qp_verify_thresholds){0.99999, 1e-5, 1.0, 1.0, identical ? "identical" : "f32"};
    } else if (ternary || min_bpw < 4.0) {
        *t = (qp_verify_thresholds){0.95, 0.5, 0.8, 0.0, "low-bit"};
    } else if (min_bpw >= 16.0 && bf16) {
        /* 8 significant bits, not F16's 11: 64x F16's error (runtime.md "verify") */
        *t = (qp_verify_thresholds){0.9995, 5e-3, 0.95, 0.0, "bf16"};
    } else if (min_bpw >= 16.0) {
        *t = (qp_verify_thresholds){0.9999, 1e-3, 0.95, 0.0, "16-bit"};
    } else if (min_bpw >= 8.0) {
        *t = (qp_verify_thresholds){0.999, 1e-2, 0.9, 0.0, "8-bit"};
    } else {
        *t = (qp_verify_thresholds){0.99, 0.1, 0.9, 0.0, "4-bit"};
    }
}

void qp_verify_fast_thresholds(const qp_model *out, qp_verify_thresholds *t) {
    bool fast = false;
    for (int64_t i = 0; out && i < out->n_tensors && !fast; i++) {
        const qp_tensor *x = &out->tensors[i];
        const qp_encoding_traits *tr = qp_encoding_get(x->enc);
        /* 8-bit activation blocks, not the F16 / BF16 rounding of 16-bit rows' activations */
        const qp_encoding_traits *at = tr && tr->vec_dot_q8 ? qp_encoding_get(tr->act_encoding) : NULL;
        fast = x->n_dims >= 2 && at && !(at->flags & QP_ENC_FLAG_FLOAT);
    }
    if (fast && t->min_cosine > 0.999)
        *t = (qp_verify_thresholds){0.999, 1e-2, 0.9, 0.0, "8-bit"};
}

/* ---- verify run ---------------------------------------------------------------------------- */

typedef struct prompt_rec {
    int32_t *ids;
    int64_t n_ids;
    char *text;
    int32_t *src_gen, *out_gen; /* n_generate each */
    qp_logit_stats *pos;        /* n_positions */
    int32_t *pos_token;         /* input token at each position */
    qp_verify_prompt_result res;
} prompt_rec;

struct qp_verify_report {
    char *out_path, *src_path;
    qp_format out_fmt, src_fmt;
    char out_arch[64], src_arch[64];
    qp_verify_thresholds th;
    char class_name[32];
    int n_threads;
    bool path_fast;  /* OUT ran the fast path */
    int n_fast_mats; /* OUT's matrices on a fast dot */
    bool kv_f16;     /* OUT's KV cache is F16 (the fast path's) */
    int64_t n_generate;
    prompt_rec *prompts;
    int64_t n_prompts;
    /* summary */
    int64_t positions;
    double min_cosine, mean_cosine, max_abs_diff, mean_kl, max_kl, top1, greedy_match;
    bool passed;
    char reasons[2048];
};

void qp_verify_report_free(qp_verify_report *r) {
    if (!r) return;
    for (int64_t i = 0; i < r->n_prompts; i++) {
        prompt_rec *p = &r->prompts[i];
        qp_free(p->ids);
        qp_free(p->text);
        qp_free(p->src_gen);
        qp_free(p->out_gen);
        qp_free(p->pos);
        qp_free(p->pos_token);
    }
    qp_free(r->prompts);
    qp_free(r->out_path);
    qp_free(r->src_path);
    qp_free(r);
}

bool qp_verify_report_fast(const qp_verify_report *r) { return r->path_fast; }

bool qp_verify_report_passed(const qp_verify_report *r) { return r && r->passed; }
int64_t qp_verify_report_n_prompts(const qp_verify_report *r) { return r ? r->n_prompts : 0; }
const qp_verify_prompt_result *qp_verify_report_prompt(const qp_verify_report *r, int64_t i) {
    return r && i >= 0 && i < r->n_prompts ? &r->prompts[i].res : NULL;
}
const char *qp_verify_report_reasons(const qp_verify_report *r) { return r ? r->reasons : ""; }

/* Positions are compared in chunks of this many (bounds the two logit buffers to
 * 2 * chunk * vocab floats). */
#define QP_VERIFY_CHUNK 64

static qp_status run_prompt(qp_runtime *rs, qp_runtime *ro, int64_t vocab, prompt_rec *p,
                            int64_t n_gen, qp_err *e) {
    int64_t P = p->n_ids, npos = P + n_gen - 1;
    int64_t chunk = npos < QP_VERIFY_CHUNK ? npos : QP_VERIFY_CHUNK;
    p->src_gen = qp_calloc((size_t)n_gen, sizeof(int32_t));
    p->out_gen = qp_calloc((size_t)n_gen, sizeof(int32_t));
    p->pos = qp_calloc((size_t)npos, sizeof(qp_logit_stats));
    p->pos_token = qp_calloc((size_t)npos, sizeof(int32_t));
    size_t nbuf;
    if (!qp_size_mul((size_t)chunk, (size_t)vocab, &nbuf))
        return qp_fail(e, QP_ERR_NOMEM, "verify: out of memory");
    float *ls_all = qp_malloc(nbuf * sizeof(float)), *lo_all = qp_malloc(nbuf * sizeof(float));
    qp_status s = QP_OK;
    if (!p->src_gen || !p->out_gen || !p->pos || !p->pos_token || !ls_all || !lo_all) {
        s = qp_fail(e, QP_ERR_NOMEM, "verify: out of memory");
        goto done;
    }
    qp_runtime_reset(rs);
    qp_runtime_reset(ro);
    int64_t first_div = -1;
    /* Teacher forcing: SRC runs the prompt batched and its greedy continuation token by token
     * (each token is the argmax of the previous position); OUT then runs the same input tokens
     * batched. The batched logits equal token by token (bit for bit for F32/F16/BF16/Q8_0/
     * Q4_K/Q6_K and int8-activation matrices; runtime.md), so the receipt is the one a
     * token-by-token run gives. */
    for (int64_t pos0 = 0; pos0 < npos; pos0 += chunk) {
        int64_t n = npos - pos0 < chunk ? npos - pos0 : chunk;
        float *lg;
        int64_t np = P > pos0 ? (P - pos0 < n ? P - pos0 : n) : 0; /* prompt tokens here */
        if (np > 0 &&
            (s = qp_runtime_forward_batch(rs, p->ids + pos0, np, pos0, ls_all, &lg, e)) !=
                QP_OK) {
            qp_err_prefix(e, "verify (against model): ");
            goto done;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = pos0 + i;
            float *ls = ls_all + (size_t)i * (size_t)vocab;
            p->pos_token[pos] = pos < P ? p->ids[pos] : p->src_gen[pos - P];
            if (i >= np) {
                if ((s = qp_runtime_forward(rs, p->pos_token[pos], pos, &lg, e)) != QP_OK) {
                    qp_err_prefix(e, "verify (against model): ");
                    goto done;
                }
                memcpy(ls, lg, (size_t)vocab * sizeof(float));
            }
            if (pos >= P - 1) p->src_gen[pos - (P - 1)] = qp_logits_argmax(ls, vocab);
        }
        if ((s = qp_runtime_forward_batch(ro, p->pos_token + pos0, n, pos0, lo_all, &lg, e)) !=
            QP_OK) {
            qp_err_prefix(e, "verify (output model): ");
            goto done;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = pos0 + i;
            qp_logits_compare(ls_all + (size_t)i * (size_t)vocab,
                              lo_all + (size_t)i * (size_t)vocab, vocab, &p->pos[pos]);
            if (pos >= P - 1) {
                int64_t j = pos - (P - 1);
                p->out_gen[j] = p->pos[pos].top1_test;
                if (first_div < 0 && p->out_gen[j] != p->src_gen[j]) first_div = j;
            }
        }
    }
    /* OUT free-runs from its first divergence: its own greedy continuation. A recurrent OUT
     * (Qwen3.5) cannot rewind: the input both runs shared is replayed from position 0 first. */
    float *lo_re;
    if (first_div >= 0 && qp_runtime_is_recurrent(ro) &&
        (s = qp_runtime_forward_batch(ro, p->pos_token, P + first_div, 0, NULL, &lo_re, e)) != QP_OK) {
        qp_err_prefix(e, "verify (output model): ");
        goto done;
    }
    if (first_div >= 0) {
        for (int64_t j = first_div + 1; j < n_gen; j++) {
            float *lo;
            if ((s = qp_runtime_forward(ro, p->out_gen[j - 1], P + j - 1, &lo, e)) != QP_OK) {
                qp_err_prefix(e, "verify (output model): ");
                goto done;
            }
            p->out_gen[j] = qp_logits_argmax(lo, vocab);
        }
    }
    qp_verify_prompt_result *r = &p->res;
    r->n_positions = npos;
    r->min_cosine = INFINITY;
    double sc = 0.0, sk = 0.0;
    int64_t agree = 0;
    for (int64_t i = 0; i < npos; i++) {
        const qp_logit_stats *st = &p->pos[i];
        if (!(st->cosine >= r->min_cosine)) r->min_cosine = st->cosine;
        sc += st->cosine;
        sk += st->kl;
        if (!(st->kl <= r->max_kl)) r->max_kl = st->kl;
        if (!(st->max_abs_diff <= r->max_abs_diff)) r->max_abs_diff = st->max_abs_diff;
        if (st->top1_ref == st->top1_test) agree++;
    }
    r->mean_cosine = sc / (double)npos;
    r->mean_kl = sk / (double)npos;
    r->top1_agreement = (double)agree / (double)npos;
    r->first_divergence = first_div;
    r->matched = first_div < 0 ? n_gen : first_div;
done:
    qp_free(ls_all);
    qp_free(lo_all);
    return s;
}

static void add_reason(qp_verify_report *r, const char *fmt, double v, double th) {
    size_t k = strlen(r->reasons);
    if (k + 1 >= sizeof r->reasons) return;
    snprintf(r->reasons + k, sizeof r->reasons - k, fmt, v, th);
}

/* True when v's tokens from `from` on are all UNUSED: the "[PAD<id>]" fill up to the embedding
 * rows a GGUF writer adds (converters/recipes.md "Metadata of HF sources"), no text maps to them. */
static bool unused_from(const qp_vocab *v, int64_t from) {
    for (int64_t i = from; i < v->n_tokens; i++)
        if (!v->types || v->types[i] != QP_TOKTYPE_UNUSED) return false;
    return true;
}

/* The first difference between two tokenizers that changes what the model reads or writes:
 * the model kind, the token strings (but trailing UNUSED padding on either side), the special
 * ids, add_bos, the BPE merges. False and a sentence in why when they differ (a model without a
 * tokenizer differs from one with). */
static bool vocab_same(const qp_model *om, const qp_model *sm, char *why, size_t cap) {
    const qp_vocab *o = &om->vocab, *s = &sm->vocab;
    static const char *const k_kind[] = {"none", "SentencePiece", "byte-level BPE", "WordPiece"};
    if (o->model != s->model) {
        snprintf(why, cap, "tokenizer differs: the output's is %s, the source's %s",
                 (unsigned)o->model < 4 ? k_kind[o->model] : "?", (unsigned)s->model < 4 ? k_kind[s->model] : "?");
        return false;
    }
    if (o->model == QP_TOK_NONE) return true;
    int64_t n = o->n_tokens < s->n_tokens ? o->n_tokens : s->n_tokens;
    if (!unused_from(o, n) || !unused_from(s, n)) {
        snprintf(why, cap, "tokenizer differs: %lld tokens in the output, %lld in the source",
                 (long long)o->n_tokens, (long long)s->n_tokens);
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t lo = o->token_lens ? o->token_lens[i] : (uint32_t)strlen(o->tokens[i]);
        uint32_t ls = s->token_lens ? s->token_lens[i] : (uint32_t)strlen(s->tokens[i]);
        if (lo != ls || memcmp(o->tokens[i], s->tokens[i], lo) != 0) {
            snprintf(why, cap, "tokenizer differs: token %lld is '%.40s' in the output, '%.40s' in "
                     "the source", (long long)i, o->tokens[i], s->tokens[i]);
            return false;
        }
    }
    const struct { const char *name; int32_t a, b; } ids[] = {
        {"BOS", o->bos_id, s->bos_id}, {"EOS", o->eos_id, s->eos_id}, {"UNK", o->unk_id, s->unk_id}};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++)
        if (ids[k].a != ids[k].b) {
            snprintf(why, cap, "tokenizer differs: %s id %d in the output, %d in the source",
                     ids[k].name, ids[k].a, ids[k].b);
            return false;
        }
    bool ob = qp_model_adds_bos(om), sb = qp_model_adds_bos(sm);
    if (ob != sb) {
        snprintf(why, cap, "tokenizer differs: the output %s BOS, the source %s", ob ? "adds" : "does not add",
                 sb ? "does" : "does not");
        return false;
    }
    if (o->model == QP_TOK_BPE) {
        if (o->n_merges != s->n_merges) {
            snprintf(why, cap, "tokenizer differs: %lld merges in the output, %lld in the source",
                     (long long)o->n_merges, (long long)s->n_merges);
            return false;
        }
        for (int64_t i = 0; i < o->n_merges; i++)
            if (strcmp(o->merges[i], s->merges[i]) != 0) {
                snprintf(why, cap, "tokenizer differs: merge %lld is '%.40s' in the output, '%.40s' "
                         "in the source", (long long)i, o->merges[i], s->merges[i]);
                return false;
            }
    }
    return true;
}

qp_status qp_verify_run(const qp_model *out, const qp_model *src, const qp_verify_prompt *prompts,
                        int64_t n_prompts, const qp_verify_opts *o, qp_verify_report **rep,
                        qp_err *e) {
    if (!out || !src || !prompts || !o || !rep || n_prompts <= 0)
        return qp_fail(e, QP_ERR_ARG, "qp_verify_run: missing argument or no prompts");
    if (o->n_generate < 1 || o->n_generate > (1 << 20))
        return qp_fail(e, QP_ERR_ARG, "verify: n_generate %lld must be in 1..%d",
                       (long long)o->n_generate, 1 << 20);
    int64_t need_ctx = 0;
    for (int64_t i = 0; i < n_prompts; i++) {
        if (prompts[i].n_ids < 1 || !prompts[i].ids)
            return qp_fail(e, QP_ERR_ARG, "verify: prompt %lld is empty", (long long)i + 1);
        if (prompts[i].n_ids > (1 << 20))
            return qp_fail(e, QP_ERR_LIMIT, "verify: prompt %lld is too long", (long long)i + 1);
        int64_t n = prompts[i].n_ids + o->n_generate;
        if (n > need_ctx) need_ctx = n;
    }
    qp_runtime_opts ro_opts = {.n_threads = o->n_threads, .n_ctx = need_ctx, .exact = true};
    qp_runtime *rs = NULL, *ro = NULL;
    qp_verify_report *r = NULL;
    qp_status s = qp_runtime_new(src, &ro_opts, &rs, e);
    if (s != QP_OK) {
        qp_err_prefix(e, "verify (against model): ");
        return s;
    }
    ro_opts.exact = !o->fast;
    if ((s = qp_runtime_new(out, &ro_opts, &ro, e)) != QP_OK) {
        qp_err_prefix(e, "verify (output model): ");
        goto fail;
    }
    const qp_runtime_config *cs = qp_runtime_get_config(rs), *co = qp_runtime_get_config(ro);
    if (cs->vocab != co->vocab) {
        s = qp_fail(e, QP_ERR_UNSUPPORTED,
                    "verify: vocabularies differ (%s: %lld tokens, %s: %lld tokens)", out->path,
                    (long long)co->vocab, src->path, (long long)cs->vocab);
        goto fail;
    }
    for (int64_t i = 0; i < n_prompts; i++)
        for (int64_t k = 0; k < prompts[i].n_ids; k++)
            if (prompts[i].ids[k] < 0 || prompts[i].ids[k] >= cs->vocab) {
                s = qp_fail(e, QP_ERR_ARG, "verify: prompt %lld: token id %d outside 0..%lld",
                            (long long)i + 1, prompts[i].ids[k], (long long)cs->vocab - 1);
                goto fail;
            }
    r = qp_calloc(1, sizeof *r);
    if (!r || !(r->prompts = qp_calloc((size_t)n_prompts, sizeof *r->prompts)) ||
        !(r->out_path = qp_strdup(out->path ? out->path : "")) ||
        !(r->src_path = qp_strdup(src->path ? src->path : ""))) {
        s = qp_fail(e, QP_ERR_NOMEM, "verify: out of memory");
        goto fail;
    }
    r->n_prompts = n_prompts;
    r->out_fmt = out->format;
    r->src_fmt = src->format;
    snprintf(r->out_arch, sizeof r->out_arch, "%s", out->arch_name ? out->arch_name : "");
    snprintf(r->src_arch, sizeof r->src_arch, "%s", src->arch_name ? src->arch_name : "");
    r->th = o->th;
    snprintf(r->class_name, sizeof r->class_name, "%s", o->th.class_name ? o->th.class_name : "custom");
    r->th.class_name = r->class_name;
    r->n_threads = co->n_threads;
    r->path_fast = !co->exact;
    r->n_fast_mats = co->n_fast_mats;
    r->kv_f16 = co->kv_f16;
    r->n_generate = o->n_generate;
    for (int64_t i = 0; i < n_prompts; i++) {
        prompt_rec *p = &r->prompts[i];
        p->n_ids = prompts[i].n_ids;
        p->ids = qp_malloc((size_t)p->n_ids * sizeof(int32_t));
        if (!p->ids || (prompts[i].text && !(p->text = qp_strdup(prompts[i].text)))) {
            s = qp_fail(e, QP_ERR_NOMEM, "verify: out of memory");
            goto fail;
        }
        memcpy(p->ids, prompts[i].ids, (size_t)p->n_ids * sizeof(int32_t));
        if ((s = run_prompt(rs, ro, cs->vocab, p, o->n_generate, e)) != QP_OK) goto fail;
    }
    /* summary over every position of every prompt */
    r->min_cosine = INFINITY;
    double sc = 0.0, sk = 0.0;
    int64_t agree = 0, matched = 0;
    for (int64_t i = 0; i < n_prompts; i++) {
        const prompt_rec *p = &r->prompts[i];
        for (int64_t k = 0; k < p->res.n_positions; k++) {
            const qp_logit_stats *st = &p->pos[k];
            if (!(st->cosine >= r->min_cosine)) r->min_cosine = st->cosine;
            if (!(st->max_abs_diff <= r->max_abs_diff)) r->max_abs_diff = st->max_abs_diff;
            if (!(st->kl <= r->max_kl)) r->max_kl = st->kl;
            sc += st->cosine;
            sk += st->kl;
            if (st->top1_ref == st->top1_test) agree++;
            r->positions++;
        }
        matched += p->res.matched;
    }
    r->mean_cosine = sc / (double)r->positions;
    r->mean_kl = sk / (double)r->positions;
    r->top1 = (double)agree / (double)r->positions;
    r->greedy_match = (double)matched / (double)(o->n_generate * n_prompts);
    r->passed = true;
    char why[256];
    if (!vocab_same(out, src, why, sizeof why)) {
        r->passed = false;
        size_t k = strlen(r->reasons);
        snprintf(r->reasons + k, sizeof r->reasons - k, "%s\n", why);
    }
    if (!(r->mean_cosine >= r->th.min_cosine)) {
        r->passed = false;
        add_reason(r, "mean cosine %.9g < %.9g\n", r->mean_cosine, r->th.min_cosine);
    }
    if (!(r->mean_kl <= r->th.max_kl)) {
        r->passed = false;
        add_reason(r, "mean KL %.6g > %.6g\n", r->mean_kl, r->th.max_kl);
    }
    if (!(r->top1 >= r->th.min_top1)) {
        r->passed = false;
        add_reason(r, "top-1 agreement %.6g < %.6g\n", r->top1, r->th.min_top1);
    }
    if (!(r->greedy_match >= r->th.min_greedy_match)) {
        r->passed = false;
        add_reason(r, "greedy match %.6g < %.6g\n", r->greedy_match, r->th.min_greedy_match);
    }
    qp_runtime_free(rs);
    qp_runtime_free(ro);
    *rep = r;
    return QP_OK;
fail:
    qp_verify_report_free(r);
    qp_runtime_free(rs);
    qp_runtime_free(ro);
    return s;
}

/* ---- receipt JSON -------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* {"path", "format", "arch", "bytes", "sha256"} for a file; {"path", ..., "files": [{"name",
 * "bytes", "sha256"}]} for a directory (regular files at its top level, sorted by name). */
static qp_status input_json(const char *path, qp_format fmt, const char *arch, cJSON **out,
                            qp_err *e) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return qp_fail(e, QP_ERR_NOMEM, "receipt: out of memory");
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "format", qp_format_name(fmt));
    cJSON_AddStringToObject(o, "arch", arch);
    char hex[65];
    struct stat st;
    qp_status s;
    if (!qp_path_is_dir(path)) {
        if ((s = qp_sha256_file(path, hex, e)) != QP_OK) goto fail;
        if (stat(path, &st) == 0) cJSON_AddNumberToObject(o, "bytes", (double)st.st_size);
        cJSON_AddStringToObject(o, "sha256", hex);
        *out = o;
        return QP_OK;
    }
    DIR *d = opendir(path);
    if (!d) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot list directory for hashing", path);
        goto fail;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    bool oom = false;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nn = qp_realloc(names, nc * sizeof *nn);
            if (!nn) { oom = true; break; }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = qp_strdup(de->d_name))) { oom = true; break; }
        n++;
    }
    closedir(d);
    cJSON *files = oom ? NULL : cJSON_AddArrayToObject(o, "files");
    s = oom || !files ? qp_fail(e, QP_ERR_NOMEM, "out of memory") : QP_OK;
    if (s == QP_OK) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; s == QP_OK && i < n; i++) {
        char *full = qp_path_join(path, names[i]);
        if (!full) { s = qp_fail(e, QP_ERR_NOMEM, "out of memory"); break; }
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            s = qp_sha256_file(full, hex, e);
            if (s == QP_OK) {
                cJSON *f = cJSON_CreateObject();
                cJSON_AddStringToObject(f, "name", names[i]);
                cJSON_AddNumberToObject(f, "bytes", (double)st.st_size);
                cJSON_AddStringToObject(f, "sha256", hex);
                cJSON_AddItemToArray(files, f);
            }
        }
        qp_free(full);
    }
    for (size_t i = 0; i < n; i++) qp_free(names[i]);
    qp_free(names);
    if (s != QP_OK) goto fail;
    *out = o;
    return QP_OK;
fail:
    cJSON_Delete(o);
    return s;
}

static cJSON *ids_json(const int32_t *ids, int64_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

qp_status qp_verify_report_json(const qp_verify_report *r, char **json, qp_err *e) {
    if (!r || !json) return qp_fail(e, QP_ERR_ARG, "qp_verify_report_json: NULL argument");
    cJSON *root = qp_json_doc_new("quantpack.verify.receipt", 1);
    if (!root) return qp_fail(e, QP_ERR_NOMEM, "receipt: out of memory");
    cJSON *inputs = cJSON_AddObjectToObject(root, "inputs");
    cJSON *in_out = NULL, *in_src = NULL;
    qp_status s = input_json(r->out_path, r->out_fmt, r->out_arch, &in_out, e);
    if (s == QP_OK) s = input_json(r->src_path, r->src_fmt, r->src_arch, &in_src, e);
    if (s != QP_OK) {
        cJSON_Delete(in_out);
        cJSON_Delete(root);
        return s;
    }
    cJSON_AddItemToObject(inputs, "out", in_out);
    cJSON_AddItemToObject(inputs, "against", in_src);
    cJSON *rt = cJSON_AddObjectToObject(root, "runtime");
    cJSON_AddStringToObject(rt, "name", "quantpack reference CPU runtime");
    cJSON_AddStringToObject(rt, "kv_cache", r->kv_f16 ? "f16" : "f32"); /* OUT's (SRC: f32) */
    cJSON_AddNumberToObject(rt, "threads", r->n_threads);
    cJSON_AddStringToObject(rt, "path", r->path_fast ? "fast" : "exact");
    cJSON_AddNumberToObject(rt, "fast_matrices", r->n_fast_mats);
    cJSON_AddNumberToObject(rt, "n_generate", (double)r->n_generate);
    cJSON *th = cJSON_AddObjectToObject(root, "thresholds");
    cJSON_AddStringToObject(th, "class", r->class_name);
    cJSON_AddNumberToObject(th, "min_mean_cosine", r->th.min_cosine);
    cJSON_AddNumberToObject(th, "max_mean_kl", r->th.max_kl);
    cJSON_AddNumberToObject(th, "min_top1", r->th.min_top1);
    cJSON_AddNumberToObject(th, "min_greedy_match", r->th.min_greedy_match);
    cJSON *ps = cJSON_AddArrayToObject(root, "prompts");
    for (int64_t i = 0; i < r->n_prompts; i++) {
        const prompt_rec *p = &r->prompts[i];
        cJSON *pj = cJSON_CreateObject();
        cJSON_AddItemToArray(ps, pj);
        if (p->text) cJSON_AddStringToObject(pj, "text", p->text);
        cJSON_AddItemToObject(pj, "ids", ids_json(p->ids, p->n_ids));
        cJSON_AddNumberToObject(pj, "n_positions", (double)p->res.n_positions);
        cJSON_AddNumberToObject(pj, "min_cosine", p->res.min_cosine);
        cJSON_AddNumberToObject(pj, "mean_cosine", p->res.mean_cosine);
        cJSON_AddNumberToObject(pj, "max_abs_diff", p->res.max_abs_diff);
        cJSON_AddNumberToObject(pj, "mean_kl", p->res.mean_kl);
        cJSON_AddNumberToObject(pj, "max_kl", p->res.max_kl);
        cJSON_AddNumberToObject(pj, "top1_agreement", p->res.top1_agreement);
        cJSON *g = cJSON_AddObjectToObject(pj, "greedy");
        cJSON_AddNumberToObject(g, "n", (double)r->n_generate);
        cJSON_AddNumberToObject(g, "matched", (double)p->res.matched);
        cJSON_AddBoolToObject(g, "exact", p->res.first_divergence < 0);
        cJSON_AddNumberToObject(g, "first_divergence", (double)p->res.first_divergence);
        cJSON_AddItemToObject(g, "against_ids", ids_json(p->src_gen, r->n_generate));
        cJSON_AddItemToObject(g, "out_ids", ids_json(p->out_gen, r->n_generate));
        cJSON *rows = cJSON_AddArrayToObject(pj, "positions");
        for (int64_t k = 0; k < p->res.n_positions; k++) {
            const qp_logit_stats *st = &p->pos[k];
            cJSON *row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "pos", (double)k);
            cJSON_AddNumberToObject(row, "token", p->pos_token[k]);
            cJSON_AddNumberToObject(row, "cosine", st->cosine);
            cJSON_AddNumberToObject(row, "max_abs_diff", st->max_abs_diff);
            cJSON_AddNumberToObject(row, "kl", st->kl);
            cJSON_AddNumberToObject(row, "top1_against", st->top1_ref);
            cJSON_AddNumberToObject(row, "top1_out", st->top1_test);
            cJSON_AddItemToArray(rows, row);
        }
    }
    cJSON *sm = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sm, "positions", (double)r->positions);
    cJSON_AddNumberToObject(sm, "min_cosine", r->min_cosine);
    cJSON_AddNumberToObject(sm, "mean_cosine", r->mean_cosine);
    cJSON_AddNumberToObject(sm, "max_abs_diff", r->max_abs_diff);
    cJSON_AddNumberToObject(sm, "mean_kl", r->mean_kl);
    cJSON_AddNumberToObject(sm, "max_kl", r->max_kl);
    cJSON_AddNumberToObject(sm, "top1_agreement", r->top1);
    cJSON_AddNumberToObject(sm, "greedy_match", r->greedy_match);
    cJSON_AddStringToObject(root, "verdict", r->passed ? "pass" : "fail");
    cJSON *reasons = cJSON_AddArrayToObject(root, "reasons");
    const char *p = r->reasons;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
        cJSON_AddItemToArray(reasons, cJSON_CreateString(line));
        p += len + (nl ? 1 : 0);
    }
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    if (!txt) return qp_fail(e, QP_ERR_NOMEM, "receipt: out of memory");
    size_t n = strlen(txt);
    char *copy = qp_malloc(n + 2);
    if (!copy) {
        cJSON_free(txt);
        return qp_fail(e, QP_ERR_NOMEM, "receipt: out of memory");
    }
    memcpy(copy, txt, n);
    copy[n] = '\n';
    copy[n + 1] = '\0';
    cJSON_free(txt);
    *json = copy;
    return QP_OK;
}
