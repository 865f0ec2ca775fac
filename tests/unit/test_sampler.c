/* Sampler: greedy ties, repetition penalty and its window, temperature, top-k, top-p and the
 * seeded RNG. Expected values are computed by hand from the documented rules (sampler.h); the
 * RNG's first outputs were computed with an independent Python transcription of splitmix64 +
 * xorshift64* (seed 0 -> state 0xe220a8397b1dcdaf, the well-known first splitmix64 output). */
#include <math.h>

#include "qp_test.h"
#include "quantpack/sampler.h"

static qp_sampler *mk(float temp, int top_k, float top_p, float pen, int last_n, uint64_t seed,
                      int64_t nv) {
    qp_sampler_params p;
    qp_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.repeat_penalty = pen;
    p.repeat_last_n = last_n;
    p.seed = seed;
    qp_sampler *s = NULL;
    qp_err e = {0};
    if (qp_sampler_new(&p, nv, &s, &e) != QP_OK) fprintf(stderr, "sampler_new: %s\n", e.msg);
    return s;
}

static int32_t draw(qp_sampler *s, const float *lg) {
    int32_t t = -1;
    QP_CHECK_EQ_INT(qp_sampler_sample(s, lg, &t, NULL), QP_OK);
    return t;
}

static void test_rng(void) {
    QP_CHECK(qp_rng_seed(0) == 0xe220a8397b1dcdafull);
    QP_CHECK(qp_rng_seed(42) == 0xbdd732262feb6e95ull);
    uint64_t st = qp_rng_seed(0);
    QP_CHECK_EQ_INT(qp_rng_u32(&st), 2075964429u);
    QP_CHECK_EQ_INT(qp_rng_u32(&st), 3732923411u);
    QP_CHECK_EQ_INT(qp_rng_u32(&st), 3016112181u);
    st = qp_rng_seed(42);
    QP_CHECK(qp_rng_f32(&st) == 0.194105863571167f);
}

static void test_greedy_and_penalty(void) {
    qp_sampler *s = mk(0.0f, 0, 1.0f, 1.0f, 64, 0, 4);
    const float a[4] = {1, 3, 2, 3};
    QP_CHECK_EQ_INT(draw(s, a), 1); /* tie 1 vs 3: lowest id */
    const float nanl[4] = {NAN, 0.5f, NAN, 0.25f};
    QP_CHECK_EQ_INT(draw(s, nanl), 1);
    qp_sampler_free(s);

    /* {2, -2, 1.5, 0.5}, penalty 2 on {0, 1}: {1, -4, 1.5, 0.5} -> 2 */
    s = mk(0.0f, 0, 1.0f, 2.0f, 64, 0, 4);
    const float b[4] = {2, -2, 1.5f, 0.5f};
    QP_CHECK_EQ_INT(draw(s, b), 0);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 1, NULL), QP_OK);
    QP_CHECK_EQ_INT(draw(s, b), 2);
    /* negative logits are multiplied: {-1, -1.2, -3} with 2 on {0}: {-2, -1.2, -3} -> 1 */
    qp_sampler_reset(s);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    const float neg[4] = {-1, -1.2f, -3, -5};
    QP_CHECK_EQ_INT(draw(s, neg), 1);
    /* a token repeated in the window is penalised once: {3, 0, 1.2} -> {1.5, 0, 1.2} -> 0 */
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    const float once[4] = {3, 0, 1.2f, -1};
    QP_CHECK_EQ_INT(draw(s, once), 0);
    /* the caller's logits are not modified */
    QP_CHECK(once[0] == 3.0f && b[1] == -2.0f);
    qp_sampler_free(s);

    /* window of 2: accept 1, 0, 2 -> window {0, 2}: {2, 1.9, 0} -> {1, 1.9, 0} -> 1 */
    s = mk(0.0f, 0, 1.0f, 2.0f, 2, 0, 3);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 1, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 2, NULL), QP_OK);
    const float w[3] = {2, 1.9f, 0};
    QP_CHECK_EQ_INT(draw(s, w), 1);
    qp_sampler_free(s);
    /* repeat_last_n 0 disables the penalty */
    s = mk(0.0f, 0, 1.0f, 2.0f, 0, 0, 3);
    QP_CHECK_EQ_INT(qp_sampler_accept(s, 0, NULL), QP_OK);
    QP_CHECK_EQ_INT(draw(s, w), 0);
    qp_err e = {0};
    QP_CHECK(qp_sampler_accept(s, 3, &e) == QP_ERR_ARG);
    qp_sampler_free(s);
}

static void test_sampling(void) {
    /* probabilities 0.5, 0.3, 0.2; seed 0 draws u = 0.48334813, 0.86913896, 0.70224333 */
    const float lg[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    /* no truncation: CDF in id order 0.5, 0.8, 1 -> 0, 2, 1 */
    qp_sampler *s = mk(1.0f, 0, 1.0f, 1.0f, 64, 0, 3);
    QP_CHECK_EQ_INT(draw(s, lg), 0);
    QP_CHECK_EQ_INT(draw(s, lg), 2);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    qp_sampler_free(s);
    /* temperature 2: p ~ sqrt -> 0.4155, 0.3218, 0.2628; CDF 0.4155, 0.7373 -> 1, 2, 1 */
    s = mk(2.0f, 0, 1.0f, 1.0f, 64, 0, 3);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    QP_CHECK_EQ_INT(draw(s, lg), 2);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    qp_sampler_free(s);
    /* top_p 0.6: nucleus {0, 1} of mass 0.8; r = u * 0.8 = 0.387, 0.695, 0.562 -> 0, 1, 1 */
    s = mk(1.0f, 0, 0.6f, 1.0f, 64, 0, 3);
    QP_CHECK_EQ_INT(draw(s, lg), 0);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    qp_sampler_free(s);
    /* top_k 2: {0.625, 0.375} -> 0, 1, 1 */
    s = mk(1.0f, 2, 1.0f, 1.0f, 64, 0, 3);
    QP_CHECK_EQ_INT(draw(s, lg), 0);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    QP_CHECK_EQ_INT(draw(s, lg), 1);
    qp_sampler_free(s);
    /* top_p 0.5 keeps only token 0; top_k 1 is greedy whatever the seed */
    s = mk(1.0f, 0, 0.5f, 1.0f, 64, 7, 3);
    int only0 = 1;
    for (int i = 0; i < 200; i++) only0 &= draw(s, lg) == 0;
    QP_CHECK(only0);
    qp_sampler_free(s);
    const float tie[4] = {0.1f, 2.0f, 2.0f, -1.0f};
    s = mk(5.0f, 1, 1.0f, 1.0f, 64, 99, 4);
    int only1 = 1;
    for (int i = 0; i < 200; i++) only1 &= draw(s, tie) == 1;
    QP_CHECK(only1);
    qp_sampler_free(s);
    /* frequencies under top_p 0.6 follow 0.625 / 0.375 (20000 draws: sd ~0.0034) */
    s = mk(1.0f, 0, 0.6f, 1.0f, 64, 12345, 3);
    int cnt[3] = {0, 0, 0};
    for (int i = 0; i < 20000; i++) cnt[draw(s, lg)]++;
    QP_CHECK_MSG(fabs(cnt[0] / 20000.0 - 0.625) < 0.015 && cnt[2] == 0, "%d %d %d", cnt[0],
                 cnt[1], cnt[2]);
    qp_sampler_free(s);
    /* same seed, same stream; different seed, different stream (with overwhelming odds) */
    qp_sampler *s1 = mk(1.0f, 0, 1.0f, 1.0f, 64, 5, 3), *s2 = mk(1.0f, 0, 1.0f, 1.0f, 64, 5, 3),
               *s3 = mk(1.0f, 0, 1.0f, 1.0f, 64, 6, 3);
    int same = 1, diff = 0;
    for (int i = 0; i < 64; i++) {
        int32_t a = draw(s1, lg), b = draw(s2, lg), c = draw(s3, lg);
        same &= a == b;
        diff |= a != c;
    }
    QP_CHECK(same && diff);
    qp_sampler_free(s1);
    qp_sampler_free(s2);
    qp_sampler_free(s3);
    /* a larger vocabulary through the top-p prefilter and the sort: top_p 0.9 over 1000 ids,
       logits -i/10: the nucleus is the first ids, so no draw may exceed the smallest prefix of
       mass >= 0.9 (computed here in double) */
    float big[1000];
    double z = 0, c = 0;
    for (int i = 0; i < 1000; i++) z += exp(-(double)i / 10.0);
    int lim = 0;
    for (int i = 0; i < 1000; i++) {
        big[i] = -(float)i / 10.0f;
        c += exp(-(double)i / 10.0) / z;
        if (c >= 0.9) { lim = i; break; }
    }
    for (int i = lim + 1; i < 1000; i++) big[i] = -(float)i / 10.0f;
    s = mk(1.0f, 0, 0.9f, 1.0f, 64, 3, 1000);
    int maxid = 0;
    for (int i = 0; i < 5000; i++) {
        int32_t t = draw(s, big);
        if (t > maxid) maxid = t;
    }
    QP_CHECK_MSG(maxid <= lim && maxid >= lim - 3, "max id %d, nucleus ends at %d", maxid, lim);
    qp_sampler_free(s);
}

int main(void) {
    test_rng();
    test_greedy_and_penalty();
    test_sampling();
    qp_err e = {0};
    qp_sampler *s = NULL;
    qp_sampler_params p;
    qp_sampler_params_default(&p);
    p.repeat_penalty = 0.0f;
    QP_CHECK(qp_sampler_new(&p, 10, &s, &e) == QP_ERR_ARG && s == NULL);
    return qp_test_finish();
}
