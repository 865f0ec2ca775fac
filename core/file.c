#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantpack/core.h"

qp_status qp_file_map(const char *path, qp_mapped_file *out, qp_err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return qp_fail(e, QP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return qp_fail(e, QP_ERR_LIMIT, "%s: file too large to map", path);
    }
    size_t size = (size_t)st.st_size;
    void *p = NULL;
    if (size > 0) {
        p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            close(fd);
            return qp_fail(e, QP_ERR_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(err));
        }
    }
    close(fd);
    char *copy = qp_strdup(path);
    if (!copy) {
        if (p) munmap(p, size);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    out->data = p;
    out->size = size;
    out->path = copy;
    return QP_OK;
}

void qp_file_unmap(qp_mapped_file *f) {
    if (!f) return;
    if (f->data && f->size) munmap((void *)f->data, f->size);
    qp_free(f->path);
    f->data = NULL;
    f->size = 0;
    f->path = NULL;
}

qp_status qp_file_read_all(const char *path, size_t max_size, char **out, size_t *out_len, qp_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return qp_fail(e, QP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = qp_malloc(cap);
    if (!buf) {
        fclose(f);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max_size) {
                qp_free(buf);
                fclose(f);
                return qp_fail(e, QP_ERR_LIMIT, "%s: larger than the %zu-byte limit", path, max_size);
            }
            char *nb = qp_realloc(buf, cap * 2);
            if (!nb) {
                qp_free(buf);
                fclose(f);
                return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        qp_free(buf);
        return qp_fail(e, QP_ERR_IO, "%s: read error", path);
    }
    if (len > max_size) {
        qp_free(buf);
        return qp_fail(e, QP_ERR_LIMIT, "%s: larger than the %zu-byte limit", path, max_size);
    }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return QP_OK;
}

bool qp_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool qp_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *qp_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = qp_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b);
    p[k + b] = '\0';
    return p;
}
