/* .bullet against bullet-core's own files and formulas:
 *  1. both real fixtures (written by bullet-core's builder) parse; an independent minimal parser
 *     here walks their BWT0 tables and every record matches a tensor of ours (hash of the
 *     recovered name, offset, size, dims);
 *  2. every tensor decodes with bullet-core's formula (fp16_to_fp32 + dequant_block_bq4,
 *     re-implemented below from its public source) bit-identically to our traits table;
 *  3. a re-pack of their weights with our writer reads back to the same tensors: BQ4 blocks
 *     copied verbatim are byte-identical; re-encoding the decoded F32 values stays within half
 *     a step of our encoder's scale;
 *  4. our BQ4 encoder against bullet-builder's quantize_block_bq4 (re-implemented here) on every
 *     tensor of the real stories260K: no worse in max |error| and in squared error, per tensor;
 *     exact on constant blocks (where the builder's decodes all-ones norm weights to 0). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "writers/bullet_writer.h"

/* ---- bullet-core, re-implemented from its public source (bullet-core.cpp, bullet-builder.cpp) */

static uint64_t ref_fnv(const char *s) {
    uint64_t h = 14695981039346656037ULL;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static float ref_fp16_to_fp32(uint16_t h) { /* bullet-core.cpp fp16_to_fp32 */
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, ex = (h & 0x7C00u) >> 10, mant = (uint32_t)(h & 0x03FF) << 13;
    uint32_t bits;
    if (ex == 0) {
        if (mant == 0) bits = sign;
        else return (sign ? -1.0f : 1.0f) * (float)(h & 0x03FF) * (1.0f / 16777216.0f);
    } else if (ex == 0x1F) {
        bits = sign | 0x7F800000u | mant;
    } else {
        bits = sign | ((ex + 112) << 23) | mant;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void ref_dequant_block(const uint8_t *b, float *out) { /* dequant_block_bq4 */
    float scale = ref_fp16_to_fp32((uint16_t)(b[0] | b[1] << 8));
    int zero = (int8_t)b[2];
    for (int i = 0; i < 16; i++) {
        out[2 * i] = (float)((b[4 + i] & 0x0F) - zero) * scale;
        out[2 * i + 1] = (float)((b[4 + i] >> 4) - zero) * scale;
    }
}

static uint16_t builder_fp32_to_fp16(float f) { /* bullet-builder.cpp: truncating, no subnormals */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 31) & 1, ex = (x >> 23) & 0xFF, mant = x & 0x7FFFFF;
    if (ex == 0) return (uint16_t)(sign << 15);
    if (ex == 0xFF) return (uint16_t)((sign << 15) | 0x7C00 | (mant ? 1 : 0));
    int ne = (int)ex - 127 + 15;
    if (ne >= 31) return (uint16_t)((sign << 15) | 0x7C00);
    if (ne <= 0) return (uint16_t)(sign << 15);
    return (uint16_t)((sign << 15) | ((uint32_t)ne << 10) | (mant >> 13));
}

static void builder_quantize_block(const float *src, uint8_t *dst) { /* quantize_block_bq4 */
    float mn = src[0], mx = src[0];
    for (int i = 1; i < 32; i++) {
        if (src[i] < mn) mn = src[i];
        if (src[i] > mx) mx = src[i];
    }
    float scale = (mx - mn) / 15.0f;
    if (scale < 1e-8f) scale = 1e-8f;
    double zr = round((double)(-mn / scale));
    /* static_cast<int8_t> of an out-of-range value is undefined in C++; wrap as x86 does */
    int8_t zero = (int8_t)(uint8_t)(int64_t)(fabs(zr) < 9e18 ? zr : 0);
    uint16_t sh = builder_fp32_to_fp16(scale);
    dst[0] = (uint8_t)sh;
    dst[1] = (uint8_t)(sh >> 8);
    dst[2] = (uint8_t)zero;
    dst[3] = 0;
    for (int i = 0; i < 16; i++) {
        int q1 = (int)round((double)((src[2 * i] - mn) / scale));
        int q2 = (int)round((double)((src[2 * i + 1] - mn) / scale));
        if (q1 < 0) q1 = 0;
        if (q1 > 15) q1 = 15;
        if (q2 < 0) q2 = 0;
        if (q2 > 15) q2 = 15;
        dst[4 + i] = (uint8_t)((q2 << 4) | q1);
    }
}

/* ---- a minimal independent walk of the file ---------------------------------------------- */

typedef struct rec {
    uint64_t hash, data_at;
    int rank;
    uint16_t dims[4];
    uint32_t csize;
} rec;

static long json_int(const uint8_t *d, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr((const char *)d, pat);
    if (!p) return -1;
    return strtol(p + strlen(pat), NULL, 10);
}

static int walk(const uint8_t *d, size_t n, rec *out, int cap) {
    long ws = json_int(d, "weights_start");
    if (ws < 0 || (size_t)ws + 8 > n || memcmp(d + ws, "BWT0", 4) != 0) return -1;
    uint32_t cnt = (uint32_t)(d[ws + 4] | d[ws + 5] << 8 | d[ws + 6] << 16 | (uint32_t)d[ws + 7] << 24);
    size_t p = (size_t)ws + 8;
    for (uint32_t i = 0; i < cnt && (int)i < cap; i++) {
        rec *r = &out[i];
        memcpy(&r->hash, d + p, 8); /* little-endian host */
        r->rank = d[p + 8];
        for (int k = 0; k < 4; k++) r->dims[k] = (uint16_t)(d[p + 9 + 2 * k] | d[p + 10 + 2 * k] << 8);
        memcpy(&r->csize, d + p + 18, 4);
        p += 22;
        p = (p + 31) / 32 * 32;
        r->data_at = p;
        p += r->csize;
        if (p > n) return -1;
    }
    if (p + 4 > n || memcmp(d + p, "END!", 4) != 0) return -1;
    return (int)cnt;
}

/* ---- 1-3: the real files ------------------------------------------------------------------ */

static void check_file(const char *path, int want_tensors, int want_hidden, int want_vocab) {
    size_t n;
    uint8_t *d = qp_test_read_file(path, &n);
    QP_CHECK(d != NULL);
    if (!d) return;
    d[n] = 0;
    rec recs[256];
    int nr = walk(d, n, recs, 256);
    QP_CHECK_EQ_INT(nr, want_tensors);
    qp_err e = {0};
    qp_model *m = NULL;
    qp_status s = qp_model_open(path, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) {
        free(d);
        return;
    }
    QP_CHECK(m->format == QP_FORMAT_BULLET);
    QP_CHECK_EQ_INT(m->n_tensors, nr);
    QP_CHECK_EQ_INT(m->arch.hidden, want_hidden);
    QP_CHECK_EQ_INT(m->vocab.n_tokens, want_vocab);
    QP_CHECK_EQ_INT(m->arch.vocab, json_int(d, "vocab_size"));
    QP_CHECK_EQ_INT(m->arch.n_layers, json_int(d, "num_layers"));
    QP_CHECK_EQ_INT(m->arch.n_heads, json_int(d, "num_heads"));
    const qp_encoding_traits *tr = qp_encoding_get(QP_ENC_BQ4);
    int64_t total_blocks = 0, named = 0;
    for (int i = 0; i < nr && i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        const rec *r = &recs[i];
        if (t->name[0] != '0') {
            named++;
            QP_CHECK_MSG(ref_fnv(t->name) == r->hash, "%s", t->name);
        }
        QP_CHECK_EQ_INT(t->offset, r->data_at);
        QP_CHECK_EQ_INT(t->nbytes, r->csize);
        QP_CHECK_EQ_INT(t->n_dims, r->rank);
        for (int k = 0; k < r->rank; k++) QP_CHECK_EQ_INT(t->ne[r->rank - 1 - k], r->dims[k]);
        /* decode: bullet-core's formula vs ours, bit for bit */
        int64_t nb = (int64_t)(r->csize / 20);
        float *a = malloc((size_t)nb * 32 * sizeof *a), *b = malloc((size_t)nb * 32 * sizeof *b);
        for (int64_t k = 0; k < nb; k++) ref_dequant_block(d + r->data_at + 20 * k, a + 32 * k);
        tr->dequantize(t->data, b, nb * 32);
        QP_CHECK_MSG(memcmp(a, b, (size_t)nb * 32 * sizeof *a) == 0, "tensor %s decodes differently",
                     t->name);
        total_blocks += nb;
        free(a);
        free(b);
    }
    printf("%s: %d tensors (%lld named), %lld BQ4 blocks decode identically to bullet-core's formula\n",
           path, nr, (long long)named, (long long)total_blocks);
    QP_CHECK_EQ_INT(named, nr); /* every hash is a candidate name (bullet.md) */

    /* 3a. re-pack verbatim: the same names, dims and block bytes */
    qp_bullet_info info;
    qp_bullet_head_info *heads = NULL;
    qp_bullet_tensor *bt = NULL;
    int64_t nbt = 0;
    char out[512];
    const char *tmp = qp_test_tmp_dir("/tmp");
    QP_CHECK_MSG(tmp != NULL, "cannot create QP_TMP_DIR");
    snprintf(out, sizeof out, "%s/bullet_real_repack_%d.bullet", tmp ? tmp : "/tmp", (int)getpid());
    s = qp_bullet_info_from_model(m, &info, &heads, &bt, &nbt, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    /* bullet-core's sample builder stores 8192 values whatever the declared shape: re-pack what
     * is stored, as [stored / row, row] (our writer refuses shapes it does not hold) */
    float **f32 = calloc((size_t)nbt + 1, sizeof *f32);
    for (int64_t i = 0; s == QP_OK && i < nbt; i++) {
        const qp_tensor *t = &m->tensors[i];
        int64_t stored = (int64_t)t->nbytes / 20 * 32, row = t->ne[0];
        if (t->nbytes == (size_t)((qp_tensor_nelements(t) + 31) / 32 * 20)) {
            stored = qp_tensor_nelements(t); /* a 1-D tensor's padded last block is not data */
        } else {
            bt[i].rank = 2;
            bt[i].dims[0] = stored / row;
            bt[i].dims[1] = row;
        }
        /* whole blocks: dequantize decodes n / 32 blocks, so a 1-D tensor's padded last block is
         * decoded too (with `stored` floats its last values stayed uninitialized: a flaky 5e7) */
        int64_t whole = (int64_t)t->nbytes / 20 * 32;
        f32[i] = malloc((size_t)(whole > stored ? whole : stored) * sizeof(float));
        tr->dequantize(t->data, f32[i], whole);
    }
    if (s == QP_OK) {
        s = qp_bullet_write(out, &info, bt, nbt, &e);
        QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
        qp_model *m2 = NULL;
        if (s == QP_OK && (s = qp_model_open(out, NULL, &m2, &e)) == QP_OK) {
            QP_CHECK_EQ_INT(m2->n_tensors, m->n_tensors);
            for (int64_t i = 0; i < m2->n_tensors && i < m->n_tensors; i++) {
                QP_CHECK(strcmp(m2->tensors[i].name, m->tensors[i].name) == 0);
                QP_CHECK(m2->tensors[i].nbytes == m->tensors[i].nbytes &&
                         memcmp(m2->tensors[i].data, m->tensors[i].data, m->tensors[i].nbytes) == 0);
            }
            QP_CHECK_EQ_INT(m2->vocab.n_tokens, m->vocab.n_tokens);
            for (int64_t i = 0; i < m2->vocab.n_tokens && i < m->vocab.n_tokens; i++)
                QP_CHECK(strcmp(m2->vocab.tokens[i], m->vocab.tokens[i]) == 0 &&
                         m2->vocab.scores[i] == m->vocab.scores[i]);
            QP_CHECK(m2->n_problems <= m->n_problems);
        } else {
            QP_CHECK_MSG(0, "re-read: %s", e.msg);
        }
        qp_model_close(m2);
        /* 3b. re-pack from the decoded F32 values through our encoder */
        for (int64_t i = 0; i < nbt; i++) {
            bt[i].bq4 = NULL;
            bt[i].bq4_bytes = 0;
            bt[i].f32 = f32[i];
        }
        s = qp_bullet_write(out, &info, bt, nbt, &e);
        QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
        m2 = NULL;
        if (s == QP_OK && (s = qp_model_open(out, NULL, &m2, &e)) == QP_OK) {
            double worst = 0;
            for (int64_t i = 0; i < m2->n_tensors && i < nbt; i++) {
                const qp_tensor *t = &m2->tensors[i];
                QP_CHECK(strcmp(t->name, m->tensors[i].name) == 0);
                int64_t stored = qp_tensor_nelements(t);
                QP_CHECK_EQ_INT(t->nbytes, m->tensors[i].nbytes);
                int64_t nb32 = (int64_t)t->nbytes / 20 * 32;
                float *y = malloc((size_t)nb32 * sizeof *y);
                tr->dequantize(t->data, y, nb32);
                for (int64_t k = 0; k < stored; k++) {
                    float sc = ref_fp16_to_fp32((uint16_t)(t->data[20 * (k / 32)] | t->data[20 * (k / 32) + 1] << 8));
                    double err = fabs((double)y[k] - (double)f32[i][k]);
                    QP_CHECK_MSG(err <= 0.5 * sc * 1.0001 + 1e-12, "%s[%lld]: %g vs %g", t->name,
                                 (long long)k, y[k], f32[i][k]);
                    if (err > worst) worst = err;
                }
                free(y);
            }
            printf("  F32 re-pack: max |error| %.3g (bound: half our scale per block)\n", worst);
        } else {
            QP_CHECK_MSG(0, "re-read: %s", e.msg);
        }
        qp_model_close(m2);
    }
    for (int64_t i = 0; i < nbt; i++) free(f32[i]);
    free(f32);
    unlink(out);
    qp_bullet_info_free(&info, heads, bt);
    qp_model_close(m);
    free(d);
}

/* ---- 4: our encoder against the builder's on stories260K ---------------------------------- */

typedef struct errs {
    double max_abs, sse;
} errs;

static errs err_of(const float *x, const float *y, int64_t n) {
    errs r = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > r.max_abs) r.max_abs = d;
        r.sse += d * d;
    }
    return r;
}

static void compare_encoders(const float *x, int64_t n, const char *name, int *n_checked) {
    int64_t nb = n / 32;
    uint8_t *ours = malloc((size_t)nb * 20), *theirs = malloc((size_t)nb * 20);
    float *yo = malloc((size_t)n * sizeof *yo), *yt = malloc((size_t)n * sizeof *yt);
    QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_BQ4, x, ours, n));
    qp_bullet_bq4_refine(x, ours, n); /* exactly what the writer stores */
    for (int64_t b = 0; b < nb; b++) {
        builder_quantize_block(x + 32 * b, theirs + 20 * b);
        ref_dequant_block(ours + 20 * b, yo + 32 * b); /* both decoded with bullet-core's formula */
        ref_dequant_block(theirs + 20 * b, yt + 32 * b);
    }
    errs eo = err_of(x, yo, n), et = err_of(x, yt, n);
    QP_CHECK_MSG(eo.max_abs <= et.max_abs && eo.sse <= et.sse,
                 "%s: ours max %.4g sse %.4g, bullet-builder max %.4g sse %.4g", name, eo.max_abs,
                 eo.sse, et.max_abs, et.sse);
    printf("  %-28s ours: max %.3e rmse %.3e | bullet-builder: max %.3e rmse %.3e\n", name,
           eo.max_abs, sqrt(eo.sse / (double)n), et.max_abs, sqrt(et.sse / (double)n));
    (*n_checked)++;
    free(ours);
    free(theirs);
    free(yo);
    free(yt);
}

static void check_encoder_stories(const char *real) {
    char p[1024], tk[1024];
    qp_test_path(p, sizeof p, real, "stories260K.bin");
    qp_test_path(tk, sizeof tk, real, "tok512.bin");
    if (access(p, R_OK) != 0) {
        printf("stories260K.bin missing: encoder comparison skipped\n");
        return;
    }
    qp_open_opts oo = {tk};
    qp_model *m = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_model_open(p, &oo, &m, &e) == QP_OK, "%s", e.msg);
    if (!m) return;
    int checked = 0;
    printf("BQ4 error per stories260K tensor (both decoded with bullet-core's formula):\n");
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        int64_t n = qp_tensor_nelements(t);
        if (n % 32 != 0 || !t->canon) continue;
        float *x = malloc((size_t)n * sizeof *x);
        QP_CHECK(qp_encoding_dequantize_tensor(t->enc, t->data, x, n));
        compare_encoders(x, n, t->canon, &checked);
        free(x);
    }
    QP_CHECK(checked >= 40);
    qp_model_close(m);

    /* constant blocks: ours exact, the builder's all-ones decodes to 0 */
    float ones[64], neg[64], mix[64], y[64];
    uint8_t blk[40];
    for (int i = 0; i < 64; i++) {
        ones[i] = 1.0f;
        neg[i] = -0.5f;
        mix[i] = i % 3 ? 0.25f : 0.0f;
    }
    const float *cases[3] = {ones, neg, mix};
    for (int c = 0; c < 3; c++) {
        QP_CHECK(qp_encoding_quantize_tensor(QP_ENC_BQ4, cases[c], blk, 64));
        ref_dequant_block(blk, y);
        ref_dequant_block(blk + 20, y + 32);
        QP_CHECK_MSG(memcmp(y, cases[c], sizeof y) == 0, "constant case %d not exact", c);
    }
    builder_quantize_block(ones, blk);
    ref_dequant_block(blk, y);
    QP_CHECK(y[0] == 0.0f); /* the builder's breakage the sound encoder avoids */
}

int main(void) {
    const char *real = qp_test_real_dir();
    char a[1024], b[1024];
    qp_test_path(a, sizeof a, real, "bullet/tests_sample_model_tiny_model.bullet");
    qp_test_path(b, sizeof b, real, "bullet/integration_tiny.bullet");
    if (access(a, R_OK) != 0 || access(b, R_OK) != 0) QP_SKIP("real .bullet fixtures missing");
    check_file(a, 21, 256, 4);
    check_file(b, 23, 32, 100);
    check_encoder_stories(real);
    return qp_test_finish();
}
