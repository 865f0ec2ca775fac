/* Files larger than 4 GiB: a sparse safetensors file whose second tensor starts past 2^32 is
 * mapped and read in place (64-bit sizes and offsets end to end), without reading the hole. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    qp_test_mkdir_p(tmp);
    char path[4096];
    snprintf(path, sizeof path, "%s/large-sparse.safetensors", tmp);

    const uint64_t big = (5ull << 30) + 3; /* 5 GiB + 3 bytes of U8 */
    char header[256];
    int hl = snprintf(header, sizeof header,
                      "{\"hole\":{\"dtype\":\"U8\",\"shape\":[%llu],\"data_offsets\":[0,%llu]},"
                      "\"tail\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%llu,%llu]}}",
                      (unsigned long long)big, (unsigned long long)big, (unsigned long long)big,
                      (unsigned long long)(big + 8));
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) QP_SKIP("cannot create %s", path);
    uint8_t len8[8];
    qp_store_u64le(len8, (uint64_t)hl);
    uint8_t tail[8];
    qp_store_f32le(tail, 1.5f);
    qp_store_f32le(tail + 4, -2.25f);
    off_t data = (off_t)(8 + hl);
    int ok = write(fd, len8, 8) == 8 && write(fd, header, (size_t)hl) == hl &&
             pwrite(fd, tail, 8, data + (off_t)big) == 8;
    close(fd);
    if (!ok) {
        unlink(path);
        QP_SKIP_MACHINE("cannot write a sparse 5 GiB file in %s", tmp);
    }

    qp_err e = {0};
    qp_model *m = NULL;
    qp_status s = qp_model_open(path, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s == QP_OK) {
        const qp_tensor *hole = qp_model_find(m, "hole"), *t = qp_model_find(m, "tail");
        QP_CHECK(hole && hole->nbytes == big && hole->ne[0] == (int64_t)big);
        QP_CHECK(t && t->offset == (uint64_t)data + big && t->offset > UINT32_MAX);
        if (t) {
            float v[2];
            qp_encoding_get(t->enc)->dequantize(t->data, v, 2);
            QP_CHECK(v[0] == 1.5f && v[1] == -2.25f);
        }
        if (hole) QP_CHECK(hole->data[big - 1] == 0); /* last byte of the hole, past 4 GiB */
        qp_model_close(m);
    }
    unlink(path);
    return qp_test_finish();
}
