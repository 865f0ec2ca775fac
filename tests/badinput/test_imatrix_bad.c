/* readers/imatrix.c on importance-matrix files built here from an enum, both formats (legacy .dat
 * bytes by hand, GGUF through tests/imatrix_gen.h): each bad one gets its exact status and a
 * message naming the file; the good ones give llama-quantize's values (sums / count; legacy ncall
 * 0: the sums; GGUF count 0: 1); every truncation of a good .dat is refused cleanly; the CLI exits 3
 * on a bad --imatrix and names it. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "imatrix_gen.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "readers/imatrix.h"

static const float k_sums[4] = {6.0f, 0.0f, 3.0f, 1.5f};

typedef enum kind {
    GOOD_LEGACY,          /* sums / ncall */
    GOOD_LEGACY_NCALL0,   /* ncall 0: the sums as they are */
    GOOD_LEGACY_NO_TAIL,  /* no chunk count / dataset after the entries */
    GOOD_GGUF,
    BAD_EMPTY,
    BAD_N_ZERO,
    BAD_N_HUGE,
    BAD_NAME_LEN_NEG,
    BAD_NAME_TRUNC,
    BAD_NAME_NUL,
    BAD_NVAL_ZERO,
    BAD_VALUES_TRUNC,
    BAD_DUPLICATE,
    BAD_NAN,
    BAD_INF,
    BAD_GGUF_NO_KEYS,
    BAD_GGUF_NO_COUNTS,
    BAD_GGUF_NO_SUMS,
    BAD_GGUF_F16_SUMS,
    BAD_GGUF_SPLIT,
    BAD_GGUF_NAN_COUNT,
    KIND_COUNT
} kind;

static void put_entry(qp_test_buf *b, const char *name, int32_t len, int32_t ncall, int32_t nval,
                      const float *v, int nv) {
    qp_test_put_u32(b, (uint32_t)len);
    qp_test_put(b, name, strlen(name));
    qp_test_put_u32(b, (uint32_t)ncall);
    qp_test_put_u32(b, (uint32_t)nval);
    for (int k = 0; k < nv; k++) qp_test_put_f32(b, v[k]);
}

/* Writes the file of kind k to path; returns the status the reader must give. */
static qp_status make(kind k, const char *path) {
    qp_test_buf b = {0};
    qp_err e = {0};
    imatrix_gen_entry en[2] = {{"blk.0.ffn_down.weight", k_sums, 4, 3}, {"output.weight", k_sums, 4, 2}};
    float nan4[4] = {1, NAN, 1, 1}, inf4[4] = {1, 1, INFINITY, 1};
    qp_status want = QP_OK;
    switch (k) {
    case GOOD_LEGACY: imatrix_gen_legacy(&b, en, 2, 7, "wiki.txt"); break;
    case GOOD_LEGACY_NCALL0: en[0].ncall = 0; imatrix_gen_legacy(&b, en, 1, 7, "wiki.txt"); break;
    case GOOD_LEGACY_NO_TAIL: imatrix_gen_legacy(&b, en, 2, 0, NULL); break;
    case GOOD_GGUF: QP_CHECK(imatrix_gen_gguf(path, en, 2, 7, 7, &e)); return QP_OK;
    case BAD_EMPTY: want = QP_ERR_FORMAT; break;
    case BAD_N_ZERO: qp_test_put_u32(&b, 0); want = QP_ERR_FORMAT; break;
    case BAD_N_HUGE: qp_test_put_u32(&b, 0x7fffffff); put_entry(&b, "a", 1, 1, 4, k_sums, 4); want = QP_ERR_CORRUPT; break;
    case BAD_NAME_LEN_NEG: qp_test_put_u32(&b, 1); put_entry(&b, "a", -5, 1, 4, k_sums, 4); want = QP_ERR_CORRUPT; break;
    case BAD_NAME_TRUNC: qp_test_put_u32(&b, 1); qp_test_put_u32(&b, 200); qp_test_put(&b, "abc", 3); want = QP_ERR_CORRUPT; break;
    case BAD_NAME_NUL:
        qp_test_put_u32(&b, 1);
        qp_test_put_u32(&b, 3);
        qp_test_put(&b, "a\0b", 3);
        qp_test_put_u32(&b, 1);
        qp_test_put_u32(&b, 4);
        for (int i = 0; i < 4; i++) qp_test_put_f32(&b, k_sums[i]);
        want = QP_ERR_CORRUPT;
        break;
    case BAD_NVAL_ZERO: qp_test_put_u32(&b, 1); put_entry(&b, "a", 1, 1, 0, k_sums, 0); want = QP_ERR_CORRUPT; break;
    case BAD_VALUES_TRUNC: qp_test_put_u32(&b, 1); put_entry(&b, "a", 1, 1, 400, k_sums, 4); want = QP_ERR_CORRUPT; break;
    case BAD_DUPLICATE: en[1].name = en[0].name; imatrix_gen_legacy(&b, en, 2, 7, "x"); want = QP_ERR_CORRUPT; break;
    case BAD_NAN: en[0].sums = nan4; imatrix_gen_legacy(&b, en, 1, 7, "x"); want = QP_ERR_CORRUPT; break;
    case BAD_INF: en[0].sums = inf4; imatrix_gen_legacy(&b, en, 1, 7, "x"); want = QP_ERR_CORRUPT; break;
    case BAD_GGUF_NO_KEYS: QP_CHECK(imatrix_gen_gguf(path, en, 2, 7, 3, &e)); return QP_ERR_CORRUPT;
    case BAD_GGUF_NO_COUNTS:
    case BAD_GGUF_NO_SUMS:
    case BAD_GGUF_F16_SUMS:
    case BAD_GGUF_SPLIT:
    case BAD_GGUF_NAN_COUNT: {
        qp_gguf_writer *w;
        QP_CHECK(qp_gguf_writer_new(path, &w, &e) == QP_OK);
        char *ds[] = {"x"};
        QP_CHECK(qp_gguf_writer_add_str_array(w, "imatrix.datasets", ds, NULL, 1, &e) == QP_OK);
        QP_CHECK(qp_gguf_writer_add_u32(w, "imatrix.chunk_count", 1, &e) == QP_OK);
        QP_CHECK(qp_gguf_writer_add_u32(w, "imatrix.chunk_size", 512, &e) == QP_OK);
        int64_t ne_s[2] = {k == BAD_GGUF_SPLIT ? 10 : 4, 1}, ne_c[2] = {k == BAD_GGUF_SPLIT ? 3 : 1, 1};
        qp_encoding se = k == BAD_GGUF_F16_SUMS ? QP_ENC_F16 : QP_ENC_F32;
        bool sums = k != BAD_GGUF_NO_SUMS, counts = k != BAD_GGUF_NO_COUNTS;
        if (sums) QP_CHECK(qp_gguf_writer_add_tensor(w, "a.weight.in_sum2", se, 2, ne_s, &e) == QP_OK);
        if (counts) QP_CHECK(qp_gguf_writer_add_tensor(w, "a.weight.counts", QP_ENC_F32, 2, ne_c, &e) == QP_OK);
        QP_CHECK(qp_gguf_writer_begin(w, &e) == QP_OK);
        float z[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, c[3] = {k == BAD_GGUF_NAN_COUNT ? NAN : 2, 2, 2};
        if (sums) QP_CHECK(qp_gguf_writer_write_tensor(w, z, (size_t)ne_s[0] * (se == QP_ENC_F16 ? 2 : 4), &e) == QP_OK);
        if (counts) QP_CHECK(qp_gguf_writer_write_tensor(w, c, (size_t)ne_c[0] * 4, &e) == QP_OK);
        QP_CHECK(qp_gguf_writer_finish(w, &e) == QP_OK);
        return QP_ERR_CORRUPT;
    }
    case KIND_COUNT: break;
    }
    qp_test_must_write_file(path, b.p, b.n);
    qp_test_buf_free(&b);
    return want;
}

static const qp_imatrix_entry *find(const qp_imatrix *im, const char *name) {
    for (int64_t i = 0; i < im->n; i++)
        if (strcmp(im->entries[i].name, name) == 0) return &im->entries[i];
    return NULL;
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    if (!qp_test_mkdir_p(tmp)) QP_SKIP("cannot create %s", tmp);
    char path[4300];
    snprintf(path, sizeof path, "%s/imatrix-bad.bin", tmp);
    for (int k = 0; k < KIND_COUNT; k++) {
        qp_status want = make((kind)k, path);
        qp_imatrix *im = NULL;
        qp_err e = {0};
        qp_status got = qp_imatrix_open(path, &im, &e);
        QP_CHECK_MSG(got == want, "kind %d: status %d, want %d (%s)", k, got, want, e.msg);
        if (got != QP_OK) {
            QP_CHECK_MSG(strstr(e.msg, path) != NULL, "kind %d: message does not name the file: %s", k, e.msg);
            QP_CHECK(im == NULL);
            continue;
        }
        const qp_imatrix_entry *d = find(im, "blk.0.ffn_down.weight");
        QP_CHECK_MSG(d && d->n == 4, "kind %d: entry missing", k);
        if (d && d->n == 4) {
            const float div = k == GOOD_LEGACY_NCALL0 ? 1.0f : 3.0f;
            for (int i = 0; i < 4; i++)
                QP_CHECK_MSG(d->values[i] == k_sums[i] / div, "kind %d value %d: %g", k, i, (double)d->values[i]);
        }
        QP_CHECK_EQ_INT(im->legacy, k != GOOD_GGUF);
        QP_CHECK_EQ_INT(im->chunk_count, k == GOOD_LEGACY_NO_TAIL ? 0 : 7);
        qp_imatrix_free(im);
    }
    /* GGUF: a count of 0 gives weights 1 (the tensor never saw input) */
    imatrix_gen_entry z = {"w.weight", k_sums, 4, 0};
    qp_err e = {0};
    QP_CHECK(imatrix_gen_gguf(path, &z, 1, 1, 7, &e));
    qp_imatrix *im = NULL;
    QP_CHECK(qp_imatrix_open(path, &im, &e) == QP_OK);
    if (im) {
        for (int i = 0; i < 4; i++) QP_CHECK(im->entries[0].values[i] == 1.0f);
        qp_imatrix_free(im);
    }
    /* every truncation of a good legacy file: a status, never a crash (the tail is optional, so a
     * cut inside it is still good) */
    qp_test_buf b = {0};
    imatrix_gen_entry en[2] = {{"blk.0.ffn_down.weight", k_sums, 4, 3}, {"output.weight", k_sums, 4, 2}};
    imatrix_gen_legacy(&b, en, 2, 7, "wiki.txt");
    const size_t body = b.n - 4 - 4 - 8;
    for (size_t cut = 0; cut < b.n; cut++) {
        qp_test_must_write_file(path, b.p, cut);
        qp_status s = qp_imatrix_open(path, &im, &e);
        QP_CHECK_MSG((s == QP_OK) == (cut >= body), "cut at %zu of %zu: status %d", cut, b.n, s);
        if (s == QP_OK) qp_imatrix_free(im);
        im = NULL;
    }
    qp_test_buf_free(&b);
    /* the CLI: exit 3, the file named */
    make(BAD_NAN, path);
    char cmd[9000], out[4300];
    snprintf(out, sizeof out, "%s/imatrix-bad-out.gguf", tmp);
    snprintf(cmd, sizeof cmd, "'%s/quantpack' convert '%s/llama-k256' --quant Q4_K_M --imatrix '%s' -o '%s' 2>&1",
             qp_test_env("QP_BIN_DIR", "build/bin"), qp_test_env("QP_FIXTURES_DIR", "fixtures"), path, out);
    FILE *p = popen(cmd, "r");
    char msg[2048] = "";
    size_t got = p ? fread(msg, 1, sizeof msg - 1, p) : 0;
    msg[got] = 0;
    int st = p ? pclose(p) : -1;
    QP_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 3, "CLI exit %d: %s", WIFEXITED(st) ? WEXITSTATUS(st) : -1, msg);
    QP_CHECK_MSG(strstr(msg, "not finite") && strstr(msg, path), "CLI message: %s", msg);
    QP_CHECK(!qp_path_exists(out));
    remove(path);
    return qp_test_finish();
}
