/* Core: status, checked arithmetic, cursor, arena, strmap, half-precision conversions, traits. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/strmap.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Reference F32->F16 through double arithmetic (independent of the bit-twiddling version). */
static uint16_t ref_fp32_to_fp16(float f) {
    if (isnan(f)) return 0x7e00;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    /* candidates: scan all finite halves of this sign near a (binary search over magnitude) */
    int lo = 0, hi = 0x7bff;
    while (lo < hi) { /* first half >= a */
        int mid = (lo + hi) / 2;
        if ((double)qp_fp16_to_fp32((uint16_t)mid) < a) lo = mid + 1; else hi = mid;
    }
    int best = lo;
    if (lo > 0) {
        double up = (double)qp_fp16_to_fp32((uint16_t)lo), dn = (double)qp_fp16_to_fp32((uint16_t)(lo - 1));
        if (a - dn < up - a || (a - dn == up - a && ((lo - 1) & 1) == 0)) best = lo - 1;
    }
    return (uint16_t)(sign | best);
}

/* Allocation-failure injection from several threads: each allocation takes one of the budget
 * atomically, so exactly the budget succeeds (a plain counter loses decrements). */
enum { INJ_THREADS = 4, INJ_ALLOCS = 100000, INJ_BUDGET = 200001 };
static void *inj_worker(void *arg) {
    long *ok = arg;
    for (int i = 0; i < INJ_ALLOCS; i++) {
        void *p = qp_malloc(8);
        if (p) (*ok)++;
        qp_free(p);
    }
    return NULL;
}
static void test_alloc_injection_threads(void) {
    pthread_t th[INJ_THREADS];
    long ok[INJ_THREADS] = {0};
    QP_CHECK_EQ_INT(qp_alloc_fail_after(INJ_BUDGET), -1);
    for (int i = 0; i < INJ_THREADS; i++) QP_CHECK(pthread_create(&th[i], NULL, inj_worker, &ok[i]) == 0);
    for (int i = 0; i < INJ_THREADS; i++) pthread_join(th[i], NULL);
    const long left = qp_alloc_fail_after(-1);
    QP_CHECK_EQ_INT(left, 0);
    QP_CHECK_EQ_INT(ok[0] + ok[1] + ok[2] + ok[3], INJ_BUDGET);
}

int main(void) {
    /* status */
    qp_err e = {0};
    QP_CHECK(qp_fail(&e, QP_ERR_CORRUPT, "x %d", 1) == QP_ERR_CORRUPT);
    QP_CHECK(strcmp(e.msg, "x 1") == 0);
    qp_fail(&e, QP_ERR_IO, "second");
    QP_CHECK(e.status == QP_ERR_CORRUPT && strcmp(e.msg, "x 1") == 0);
    qp_err_prefix(&e, "f: ");
    QP_CHECK(strcmp(e.msg, "f: x 1") == 0);
    QP_CHECK(strcmp(qp_status_name(QP_ERR_LIMIT), "LIMIT") == 0);

    /* checked arithmetic */
    size_t s;
    QP_CHECK(!qp_size_mul(SIZE_MAX / 2 + 1, 2, &s));
    QP_CHECK(qp_size_mul(3, 4, &s) && s == 12);
    QP_CHECK(!qp_size_add(SIZE_MAX, 1, &s));
    QP_CHECK(qp_size_align(33, 32, &s) && s == 64);
    QP_CHECK(!qp_size_align(SIZE_MAX - 3, 32, &s));
    int64_t i64;
    QP_CHECK(!qp_i64_mul(INT64_MAX, 2, &i64));

    /* cursor */
    const uint8_t buf[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    qp_cursor c;
    qp_cursor_init(&c, buf, sizeof buf, 0);
    uint32_t u32;
    uint64_t u64;
    QP_CHECK(qp_cursor_u32(&c, &u32) && u32 == 0x04030201u);
    QP_CHECK(!qp_cursor_u64(&c, &u64) && c.pos == 4); /* 5 left: fails, consumes nothing */
    QP_CHECK(qp_cursor_skip(&c, 5) && qp_cursor_left(&c) == 0);
    QP_CHECK(!qp_cursor_skip(&c, 1));
    qp_cursor_init(&c, buf, sizeof buf, 100);
    QP_CHECK(c.pos == sizeof buf);

    /* arena */
    qp_arena a = {0};
    char *x = qp_arena_strdup(&a, "hello");
    void *big = qp_arena_alloc(&a, 1 << 20);
    char *y = qp_arena_strndup(&a, "world!!", 5);
    QP_CHECK(x && big && y && strcmp(x, "hello") == 0 && strcmp(y, "world") == 0);
    QP_CHECK(((uintptr_t)big & 15) == 0);
    qp_arena_free(&a);

    /* strmap */
    qp_strmap m = {0};
    char keys[1000][16];
    for (int i = 0; i < 1000; i++) {
        snprintf(keys[i], 16, "k%d", i);
        bool added = false;
        QP_CHECK(qp_strmap_put(&m, keys[i], strlen(keys[i]), i, &added) == QP_OK && added);
    }
    bool added = true;
    QP_CHECK(qp_strmap_put(&m, "k7", 2, 99, &added) == QP_OK && !added);
    QP_CHECK(qp_strmap_put(&m, "k8", 2, 99, NULL) == QP_OK);
    int64_t v = -1;
    QP_CHECK(qp_strmap_get(&m, "k7", 2, &v) && v == 7);
    QP_CHECK(qp_strmap_get(&m, "k999", 4, &v) && v == 999);
    QP_CHECK(!qp_strmap_get(&m, "k1000", 5, &v));
    qp_strmap_free(&m);

    /* allocation failure injection */
    qp_alloc_fail_after(0);
    QP_CHECK(qp_malloc(10) == NULL);
    qp_alloc_fail_after(-1);
    void *p = qp_malloc(10);
    QP_CHECK(p != NULL);
    qp_free(p);
    QP_CHECK(qp_calloc(SIZE_MAX / 2, 4) == NULL);
    /* qp_malloc_huge: small sizes as qp_malloc, from 2 MiB 2 MiB-aligned and writable to the
     * end; injected failures and sizes past SIZE_MAX count as failures */
    const size_t mib2 = (size_t)2 << 20;
    unsigned char *hp = qp_malloc_huge(3 * mib2 + 5);
    QP_CHECK(hp != NULL && (uintptr_t)hp % mib2 == 0);
    if (hp) {
        memset(hp, 0xA5, 3 * mib2 + 5);
        QP_CHECK(hp[3 * mib2 + 4] == 0xA5);
    }
    qp_free(hp);
    qp_free(qp_malloc_huge(10));
    qp_alloc_fail_after(0);
    QP_CHECK(qp_malloc_huge(mib2) == NULL && qp_malloc_huge(10) == NULL);
    qp_alloc_fail_after(-1);
    QP_CHECK(qp_malloc_huge(SIZE_MAX - 5) == NULL);
    test_alloc_injection_threads();

    /* F16: every half round-trips exactly through F32 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = qp_fp16_to_fp32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) { if (!isnan(f)) bad++; continue; }
        if (qp_fp32_to_fp16(f) != h) bad++;
    }
    QP_CHECK_EQ_INT(bad, 0);
    QP_CHECK(qp_fp16_to_fp32(0x3c00) == 1.0f && qp_fp16_to_fp32(0x0001) == ldexpf(1.0f, -24));
    QP_CHECK(qp_fp32_to_fp16(NAN) == 0x7e00);
    QP_CHECK(qp_fp32_to_fp16(65520.0f) == 0x7c00 && qp_fp32_to_fp16(65519.996f) == 0x7bff);
    QP_CHECK(qp_fp32_to_fp16(ldexpf(1.0f, -25)) == 0 && qp_fp32_to_fp16(-ldexpf(1.5f, -25)) == 0x8001);
    /* F32 -> F16 rounding against an independent reference on a sweep of bit patterns */
    bad = 0;
    for (uint32_t u = 0; u < 0x80000000u; u += 0x1235u) {
        float f = u2f(u);
        if (qp_fp32_to_fp16(f) != ref_fp32_to_fp16(f)) bad++;
        if (qp_fp32_to_fp16(-f) != ref_fp32_to_fp16(-f)) bad++;
    }
    QP_CHECK_EQ_INT(bad, 0);

    /* BF16 */
    QP_CHECK(qp_fp32_to_bf16(1.0f) == 0x3f80 && qp_bf16_to_fp32(0x3f80) == 1.0f);
    QP_CHECK(qp_fp32_to_bf16(u2f(0x3f808000u)) == 0x3f80); /* tie to even (down) */
    QP_CHECK(qp_fp32_to_bf16(u2f(0x3f818000u)) == 0x3f82); /* tie to even (up) */
    QP_CHECK(isnan(qp_bf16_to_fp32(qp_fp32_to_bf16(NAN))));
    QP_CHECK(f2u(qp_bf16_to_fp32(0x8000)) == 0x80000000u);

    /* traits table: ids match their slots, names and type ids round-trip */
    for (int i = 0; i < QP_ENC_COUNT; i++) {
        const qp_encoding_traits *t = qp_encoding_get((qp_encoding)i);
        QP_CHECK_MSG(t != NULL, "encoding %d has no traits", i);
        if (!t) continue;
        QP_CHECK_EQ_INT(t->id, i);
        QP_CHECK_EQ_INT(qp_encoding_from_name(t->name), i);
        if (t->ggml_type >= 0) QP_CHECK_EQ_INT(qp_encoding_from_ggml_type(t->ggml_type), i);
        QP_CHECK(t->block_elems > 0 && t->block_bytes > 0);
    }
    QP_CHECK(qp_encoding_from_st_dtype("BF16", 4) == QP_ENC_BF16);
    QP_CHECK(qp_encoding_from_ggml_type(1000) == QP_ENC_COUNT);
    QP_CHECK(qp_encoding_row_bytes(QP_ENC_Q4_K, 512, &s) && s == 288);
    QP_CHECK(!qp_encoding_row_bytes(QP_ENC_Q4_K, 100, &s));
    QP_CHECK(qp_encoding_tensor_bytes(QP_ENC_I2_S, 256, &s) && s == 64 + 32);
    return qp_test_finish();
}
