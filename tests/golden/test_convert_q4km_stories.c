/* stories260K.gguf (F32) -> Q4_K_M must be byte-identical to llama.cpp's own output of the same
 * conversion ($QP_REAL_FIXTURES/gguf/stories260K-Q4_K_M.llamacpp.gguf, made by llama-quantize), with
 * 1, 2 and 3 threads. On a mismatch the first differing byte is located (which tensor). */
#include <stdint.h>

#include "converters/convert_gguf.h"
#include "qp_test.h"
#include "qp_test_util.h"

static void locate(const qp_model *ref, uint64_t off) {
    for (int64_t i = 0; i < ref->n_tensors; i++) {
        const qp_tensor *t = &ref->tensors[i];
        if (off >= t->offset && off < t->offset + t->nbytes) {
            fprintf(stderr, "  first difference at %llu: tensor '%s' (%s), byte %llu of %zu\n",
                    (unsigned long long)off, t->name, qp_encoding_get(t->enc)->upper_name,
                    (unsigned long long)(off - t->offset), t->nbytes);
            return;
        }
    }
    fprintf(stderr, "  first difference at %llu: header / metadata / padding\n", (unsigned long long)off);
}

int main(void) {
    char src[4096], ref[4096], out[4096];
    qp_test_path(src, sizeof src, qp_test_real_dir(), "stories260K.gguf");
    qp_test_path(ref, sizeof ref, qp_test_real_dir(), "gguf/stories260K-Q4_K_M.llamacpp.gguf");
    FILE *f1 = fopen(src, "rb"), *f2 = fopen(ref, "rb");
    if (!f1 || !f2) {
        if (f1) fclose(f1);
        if (f2) fclose(f2);
        QP_SKIP("real fixtures not found under %s", qp_test_real_dir());
    }
    fclose(f1);
    fclose(f2);
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    if (!qp_test_mkdir_p(tmp)) QP_SKIP("cannot create %s", tmp);

    qp_err e = {0};
    qp_model *m = NULL, *mref = NULL;
    QP_CHECK(qp_model_open(src, NULL, &m, &e) == QP_OK);
    QP_CHECK(qp_model_open(ref, NULL, &mref, &e) == QP_OK);
    if (!m || !mref) {
        fprintf(stderr, "%s\n", e.msg);
        return qp_test_finish();
    }
    qp_mapped_file want = {0};
    QP_CHECK(qp_file_map(ref, &want, &e) == QP_OK);

    static const int k_threads[] = {1, 2, 3};
    for (size_t k = 0; k < sizeof k_threads / sizeof k_threads[0]; k++) {
        snprintf(out, sizeof out, "%s/stories260K-Q4_K_M.t%d.gguf", tmp, k_threads[k]);
        qp_convert_opts o = {0};
        o.quant = QP_QUANT_Q4_K_M;
        o.threads = k_threads[k];
        qp_err ce = {0};
        qp_status s = qp_convert_gguf(m, &o, out, &ce);
        QP_CHECK_MSG(s == QP_OK, "convert: %s", ce.msg);
        qp_mapped_file got = {0};
        if (s != QP_OK || qp_file_map(out, &got, &e) != QP_OK) continue;
        QP_CHECK_MSG(got.size == want.size, "%zu bytes, llama.cpp wrote %zu", got.size, want.size);
        size_t n = got.size < want.size ? got.size : want.size;
        size_t diff = n;
        for (size_t i = 0; i < n; i++)
            if (got.data[i] != want.data[i]) {
                diff = i;
                break;
            }
        QP_CHECK_MSG(diff == n && got.size == want.size, "threads %d: output differs from llama.cpp's",
                     k_threads[k]);
        if (diff != n) locate(mref, diff);
        qp_file_unmap(&got);
        remove(out);
    }
    qp_file_unmap(&want);
    qp_model_close(m);
    qp_model_close(mref);
    return qp_test_finish();
}
