/* Sampler: repetition penalty -> temperature -> top-k -> top-p -> seeded draw (sampler.h). */
#include <math.h>
#include <stdlib.h>

#include "quantpack/core.h"
#include "quantpack/sampler.h"

struct qp_sampler {
    qp_sampler_params p;
    int64_t n_vocab;
    uint64_t rng;
    int32_t *hist;
    int64_t n_hist, cap_hist;
    float *work;       /* n_vocab adjusted logits */
    int32_t *idx;      /* candidate ids */
    double *prob;      /* candidate probabilities */
    uint8_t *seen;     /* n_vocab flags for the penalty window */
    int32_t *tmp;      /* merge space */
};

void qp_sampler_params_default(qp_sampler_params *p) {
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

uint64_t qp_rng_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 0x9E3779B97F4A7C15ull; /* xorshift must not start at 0 */
}

uint32_t qp_rng_u32(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

float qp_rng_f32(uint64_t *state) { return (float)(qp_rng_u32(state) >> 8) / 16777216.0f; }

qp_status qp_sampler_new(const qp_sampler_params *p, int64_t n_vocab, qp_sampler **out, qp_err *e) {
    if (!p || !out) return qp_fail(e, QP_ERR_ARG, "qp_sampler_new: NULL argument");
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return qp_fail(e, QP_ERR_ARG, "sampler: vocabulary of %lld tokens", (long long)n_vocab);
    if (!(p->temperature == p->temperature) || !(p->top_p == p->top_p) ||
        !(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty) || !isfinite(p->temperature))
        return qp_fail(e, QP_ERR_ARG,
                       "sampler: temperature, top_p must be numbers and repeat_penalty > 0");
    qp_sampler *s = qp_calloc(1, sizeof *s);
    if (!s) return qp_fail(e, QP_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = qp_rng_seed(p->seed);
    s->work = qp_calloc((size_t)n_vocab, sizeof *s->work);
    s->idx = qp_calloc((size_t)n_vocab, sizeof *s->idx);
    s->prob = qp_calloc((size_t)n_vocab, sizeof *s->prob);
    s->seen = qp_calloc((size_t)n_vocab, 1);
    s->tmp = qp_calloc((size_t)n_vocab, sizeof *s->tmp);
    if (!s->work || !s->idx || !s->prob || !s->seen || !s->tmp) {
        qp_sampler_free(s);
        return qp_fail(e, QP_ERR_NOMEM, "sampler: out of memory");
    }
    *out = s;
    return QP_OK;
}

void qp_sampler_free(qp_sampler *s) {
    if (!s) return;
    qp_free(s->hist);
    qp_free(s->work);
    qp_free(s->idx);
    qp_free(s->prob);
    qp_free(s->seen);
    qp_free(s->tmp);
    qp_free(s);
}

void qp_sampler_reset(qp_sampler *s) {
    if (s) s->n_hist = 0;
}

qp_status qp_sampler_accept(qp_sampler *s, int32_t token, qp_err *e) {
    if (token < 0 || token >= s->n_vocab)
        return qp_fail(e, QP_ERR_ARG, "sampler: token %d outside the vocabulary", token);
    if (s->p.repeat_last_n == 0) return QP_OK;
    int64_t keep = s->p.repeat_last_n;
    if (keep > 0 && s->n_hist == keep) { /* slide the window */
        for (int64_t i = 1; i < keep; i++) s->hist[i - 1] = s->hist[i];
        s->n_hist--;
    }
    if (s->n_hist == s->cap_hist) {
        int64_t nc = s->cap_hist ? s->cap_hist * 2 : 64;
        if (nc > (int64_t)1 << 40) return qp_fail(e, QP_ERR_LIMIT, "sampler: history too long");
        int32_t *nh = qp_realloc(s->hist, (size_t)nc * sizeof *nh);
        if (!nh) return qp_fail(e, QP_ERR_NOMEM, "sampler: out of memory");
        s->hist = nh;
        s->cap_hist = nc;
    }
    s->hist[s->n_hist++] = token;
    return QP_OK;
}

/* Candidate order: higher logit first, then lower id. */
static bool before(const float *lg, int32_t a, int32_t b) {
    return lg[a] > lg[b] || (lg[a] == lg[b] && a < b);
}

/* Sorts ids[0..n) by (logit desc, id asc): merge sort with insertion sort on short runs. */
static void sort_candidates(int32_t *ids, int32_t *tmp, int64_t n, const float *lg) {
    if (n <= 16) {
        for (int64_t i = 1; i < n; i++) {
            int32_t v = ids[i];
            int64_t j = i;
            while (j > 0 && before(lg, v, ids[j - 1])) {
                ids[j] = ids[j - 1];
                j--;
            }
            ids[j] = v;
        }
        return;
    }
    int64_t h = n / 2;
    sort_candidates(ids, tmp, h, lg);
    sort_candidates(ids + h, tmp, n - h, lg);
    int64_t a = 0, b = h, k = 0;
    while (a < h && b < n) tmp[k++] = before(lg, ids[b], ids[a]) ? ids[b++] : ids[a++];
    while (a < h) tmp[k++] = ids[a++];
    while (b < n) tmp[k++] = ids[b++];
    for (int64_t i = 0; i < n; i++) ids[i] = tmp[i];
}

/* The k best ids, sorted, by insertion into a bounded list (k small) or a full sort. */
static int64_t top_k_ids(int32_t *ids, int32_t *tmp, int64_t n, int64_t k, const float *lg) {
    if (k > 256) {
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)i;
        sort_candidates(ids, tmp, n, lg);
        return k;
    }
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = (int32_t)i;
        if (m == k && !before(lg, v, ids[m - 1])) continue;
        int64_t j = m < k ? m++ : k - 1;
        while (j > 0 && before(lg, v, ids[j - 1])) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = v;
    }
    return m;
}

qp_status qp_sampler_sample(qp_sampler *s, const float *logits, int32_t *token, qp_err *e) {
    if (!s || !logits || !token) return qp_fail(e, QP_ERR_ARG, "qp_sampler_sample: NULL argument");
    int64_t n = s->n_vocab;
    float *w = s->work;
    for (int64_t i = 0; i < n; i++) w[i] = isnan(logits[i]) ? -INFINITY : logits[i];

    /* repetition penalty over the window (each distinct token once) */
    float pen = s->p.repeat_penalty;
    if (pen != 1.0f && s->p.repeat_last_n != 0 && s->n_hist > 0) {
        int64_t from = 0;
        if (s->p.repeat_last_n > 0 && s->n_hist > s->p.repeat_last_n)
            from = s->n_hist - s->p.repeat_last_n;
        for (int64_t i = from; i < s->n_hist; i++) {
            int32_t t = s->hist[i];
            if (s->seen[t]) continue;
            s->seen[t] = 1;
            w[t] = w[t] > 0.0f ? w[t] / pen : w[t] * pen;
        }
        for (int64_t i = from; i < s->n_hist; i++) s->seen[s->hist[i]] = 0;
    }

    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (w[i] > w[best]) best = (int32_t)i;
    if (!(s->p.temperature > 0.0f) || !isfinite(w[best])) {
        *token = best; /* greedy (or nothing finite to sample from) */
        return QP_OK;
    }
    float inv_t = 1.0f / s->p.temperature;
    for (int64_t i = 0; i < n; i++) w[i] *= inv_t;

    int32_t *ids = s->idx;
    double *pr = s->prob;
    double mx = (double)w[best];
    bool use_k = s->p.top_k > 0 && s->p.top_k < n;
    bool use_p = s->p.top_p > 0.0f && s->p.top_p < 1.0f;
    int64_t nc = 0;
    if (use_k) {
        nc = top_k_ids(ids, s->tmp, n, s->p.top_k, w);
    } else if (use_p) {
        /* Tokens with p < (1 - top_p) / (n - 1) can never enter the nucleus (llama2.c's
           argument); drop them before sorting. The softmax below still divides by the full sum. */
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += exp((double)w[i] - mx);
        double cutoff = (1.0 - (double)s->p.top_p) / (double)(n - 1) * sum;
        for (int64_t i = 0; i < n; i++)
            if (exp((double)w[i] - mx) >= cutoff) ids[nc++] = (int32_t)i;
        sort_candidates(ids, s->tmp, nc, w);
    } else {
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)i; /* id order */
        nc = n;
    }
    /* softmax over the candidates in double; without top-k over the whole vocabulary */
    double sum = 0.0;
    if (use_k) {
        for (int64_t i = 0; i < nc; i++) sum += exp((double)w[ids[i]] - mx);
    } else {
        for (int64_t i = 0; i < n; i++) sum += exp((double)w[i] - mx);
    }
    for (int64_t i = 0; i < nc; i++) pr[i] = exp((double)w[ids[i]] - mx) / sum;
    /* nucleus: the smallest prefix whose mass reaches top_p */
    double mass = 1.0;
    if (use_p) {
        double c = 0.0;
        int64_t i = 0;
        for (; i < nc; i++) {
            c += pr[i];
            if (c >= (double)s->p.top_p) break;
        }
        nc = i < nc ? i + 1 : nc;
        mass = c;
    }
    double r = (double)qp_rng_f32(&s->rng) * mass, c = 0.0;
    int32_t pick = ids[nc - 1];
    for (int64_t i = 0; i < nc; i++) {
        c += pr[i];
        if (r < c) {
            pick = ids[i];
            break;
        }
    }
    *token = pick;
    return QP_OK;
}
