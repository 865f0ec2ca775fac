#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_mode.h"
#include "quantpack/core.h"

qp_status qp_file_open_regular(const char *path, unsigned flags, int *out_fd, uint64_t *size, qp_err *e) {
    if (!path || !out_fd) return qp_fail(e, QP_ERR_ARG, "qp_file_open_regular: NULL argument");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int oflags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | ((flags & QP_FILE_NOFOLLOW) ? O_NOFOLLOW : 0);
    int fd = open(path, oflags);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP && (flags & QP_FILE_NOFOLLOW))
            return qp_fail(e, QP_ERR_IO, "%s: is a symbolic link; package files must be regular files "
                           "inside the package", path);
        return qp_fail(e, QP_ERR_IO, "%s: cannot open: %s", path, strerror(err));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: is %s, not a regular file", path, qp_file_mode_kind(st.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return qp_fail(e, QP_ERR_IO, "%s: cannot set blocking mode: %s", path, strerror(err));
    }
    *out_fd = fd;
    if (size) *size = st.st_size < 0 ? 0 : (uint64_t)st.st_size;
    return QP_OK;
}

qp_status qp_file_map_flags(const char *path, unsigned flags, qp_mapped_file *out, qp_err *e) {
    int fd;
    uint64_t fsize;
    qp_status s = qp_file_open_regular(path, flags, &fd, &fsize, e);
    if (s != QP_OK) return s;
    if (fsize > (uint64_t)SIZE_MAX) {
        close(fd);
        return qp_fail(e, QP_ERR_LIMIT, "%s: file too large to map", path);
    }
    size_t size = (size_t)fsize;
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

qp_status qp_file_map(const char *path, qp_mapped_file *out, qp_err *e) {
    return qp_file_map_flags(path, 0, out, e);
}

void qp_file_unmap(qp_mapped_file *f) {
    if (!f) return;
    if (f->data && f->size) munmap((void *)f->data, f->size);
    qp_free(f->path);
    f->data = NULL;
    f->size = 0;
    f->path = NULL;
}

/* read() until n bytes or the end of the file; false on an error (errno kept). */
static bool read_full(int fd, uint8_t *p, size_t n, size_t *got) {
    *got = 0;
    while (*got < n) {
        ssize_t k = read(fd, p + *got, n - *got);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (k == 0) break;
        *got += (size_t)k;
    }
    return true;
}

qp_status qp_file_read_all_flags(const char *path, unsigned flags, size_t max_size, char **out,
                                 size_t *out_len, qp_err *e) {
    int fd;
    uint64_t size;
    qp_status s = qp_file_open_regular(path, flags, &fd, &size, e);
    if (s != QP_OK) return s;
    if (size > max_size) {
        close(fd);
        return qp_fail(e, QP_ERR_LIMIT, "%s: %llu bytes, larger than the %zu-byte limit", path,
                       (unsigned long long)size, max_size);
    }
    /* one byte more than the size: a file that grew since fstat is caught as over the size */
    char *buf = qp_malloc((size_t)size + 2);
    if (!buf) {
        close(fd);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got;
    bool ok = read_full(fd, (uint8_t *)buf, (size_t)size + 1, &got);
    int err = errno;
    close(fd);
    if (!ok || got > size) {
        qp_free(buf);
        return ok ? qp_fail(e, QP_ERR_IO, "%s: changed while being read", path)
                  : qp_fail(e, QP_ERR_IO, "%s: read error: %s", path, strerror(err));
    }
    buf[got] = '\0';
    *out = buf;
    if (out_len) *out_len = got;
    return QP_OK;
}

qp_status qp_file_read_all(const char *path, size_t max_size, char **out, size_t *out_len, qp_err *e) {
    return qp_file_read_all_flags(path, 0, max_size, out, out_len, e);
}

qp_status qp_file_read_head(const char *path, void *buf, size_t cap, size_t *got, uint64_t *size,
                            qp_err *e) {
    int fd;
    qp_status s = qp_file_open_regular(path, 0, &fd, size, e);
    if (s != QP_OK) return s;
    bool ok = read_full(fd, buf, cap, got);
    int err = errno;
    close(fd);
    return ok ? QP_OK : qp_fail(e, QP_ERR_IO, "%s: read error: %s", path, strerror(err));
}

qp_status qp_path_check_regular(const char *path, unsigned flags, qp_err *e) {
    struct stat st;
    int rc = (flags & QP_FILE_NOFOLLOW) ? lstat(path, &st) : stat(path, &st);
    if (rc != 0 && errno == ENOENT && (flags & QP_FILE_ABSENT_OK)) return QP_OK;
    if (rc != 0) return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return qp_fail(e, QP_ERR_IO, "%s: is a symbolic link; package files must be regular files "
                       "inside the package", path);
    if (!S_ISREG(st.st_mode))
        return qp_fail(e, QP_ERR_IO, "%s: is %s, not a regular file", path, qp_file_mode_kind(st.st_mode));
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
