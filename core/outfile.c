/* Atomic output files and directories: write under a temporary name beside the target, rename
 * onto it only when everything succeeded. Contract in include/quantpack/core.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantpack/core.h"

#define QP_OUTFILE_BUF ((size_t)1 << 20)

struct qp_outfile {
    char *path;     /* final name */
    char *tmp;      /* temporary name in the same directory */
    int fd;
    uint8_t *buf;
    size_t buf_len;
    uint64_t written; /* logical bytes (buffered included) */
    qp_err err;       /* first failure; err.status == QP_OK while healthy */
};

struct qp_outdir {
    char *dir;
    char *tmp;
    bool replace;
};

static atomic_ulong g_tmp_counter;

/* "<path>.<tag>.<pid>.<n>" on the heap. */
static char *tmp_name(const char *path, const char *tag) {
    unsigned long n = atomic_fetch_add(&g_tmp_counter, 1ul);
    int len = snprintf(NULL, 0, "%s.%s.%ld.%lu", path, tag, (long)getpid(), n);
    if (len < 0) return NULL;
    char *s = qp_malloc((size_t)len + 1);
    if (!s) return NULL;
    snprintf(s, (size_t)len + 1, "%s.%s.%ld.%lu", path, tag, (long)getpid(), n);
    return s;
}

static void outfile_free(qp_outfile *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    qp_free(f->buf);
    qp_free(f->tmp);
    qp_free(f->path);
    qp_free(f);
}

qp_status qp_outfile_open(const char *path, qp_outfile **out, qp_err *e) {
    if (!path || !*path || !out) return qp_fail(e, QP_ERR_ARG, "qp_outfile_open: no path");
    qp_outfile *f = qp_calloc(1, sizeof *f);
    if (!f) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    f->fd = -1;
    f->path = qp_strdup(path);
    f->buf = qp_malloc(QP_OUTFILE_BUF);
    if (!f->path || !f->buf) {
        outfile_free(f);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    }
    /* A stale temporary of an earlier process with a reused pid is skipped, never clobbered. */
    for (int attempt = 0; attempt < 16 && f->fd < 0; attempt++) {
        qp_free(f->tmp);
        f->tmp = tmp_name(path, "tmp");
        if (!f->tmp) {
            outfile_free(f);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        }
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd < 0 && errno != EEXIST) break;
    }
    if (f->fd < 0) {
        int err = errno;
        qp_status s = qp_fail(e, QP_ERR_IO, "%s: cannot create temporary file %s: %s", path,
                              f->tmp, strerror(err));
        outfile_free(f);
        return s;
    }
    *out = f;
    return QP_OK;
}

static bool write_all(int fd, const uint8_t *p, size_t n, int *err) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            *err = errno;
            return false;
        }
        if (k == 0) {
            *err = EIO;
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Records the first failure in f->err and copies it to e. */
static qp_status outfile_error(qp_outfile *f, qp_err *e) {
    return qp_fail(e, f->err.status, "%s", f->err.msg);
}

static qp_status outfile_flush(qp_outfile *f, qp_err *e) {
    if (f->err.status != QP_OK) return outfile_error(f, e);
    if (f->buf_len == 0) return QP_OK;
    int err = 0;
    if (!write_all(f->fd, f->buf, f->buf_len, &err)) {
        qp_fail(&f->err, QP_ERR_IO, "%s: write failed at byte %llu: %s", f->path,
                (unsigned long long)(f->written - f->buf_len), strerror(err));
        return outfile_error(f, e);
    }
    f->buf_len = 0;
    return QP_OK;
}

qp_status qp_outfile_write(qp_outfile *f, const void *data, size_t n, qp_err *e) {
    if (!f) return qp_fail(e, QP_ERR_ARG, "qp_outfile_write: no file");
    if (f->err.status != QP_OK) return outfile_error(f, e);
    if (n == 0) return QP_OK;
    if (!data) {
        qp_fail(&f->err, QP_ERR_ARG, "%s: write of %zu bytes from NULL", f->path, n);
        return outfile_error(f, e);
    }
    const uint8_t *p = data;
    if (f->buf_len + n <= QP_OUTFILE_BUF) {
        memcpy(f->buf + f->buf_len, p, n);
        f->buf_len += n;
        f->written += n;
        return QP_OK;
    }
    qp_status s = outfile_flush(f, e);
    if (s != QP_OK) return s;
    if (n < QP_OUTFILE_BUF) {
        memcpy(f->buf, p, n);
        f->buf_len = n;
        f->written += n;
        return QP_OK;
    }
    int err = 0;
    if (!write_all(f->fd, p, n, &err)) {
        qp_fail(&f->err, QP_ERR_IO, "%s: write failed at byte %llu: %s", f->path,
                (unsigned long long)f->written, strerror(err));
        return outfile_error(f, e);
    }
    f->written += n;
    return QP_OK;
}

qp_status qp_outfile_pad(qp_outfile *f, size_t alignment, qp_err *e) {
    if (!f) return qp_fail(e, QP_ERR_ARG, "qp_outfile_pad: no file");
    if (alignment == 0) {
        qp_fail(&f->err, QP_ERR_ARG, "%s: padding to an alignment of 0", f->path);
        return outfile_error(f, e);
    }
    static const uint8_t zeros[256];
    size_t need = (size_t)((alignment - f->written % alignment) % alignment);
    while (need > 0) {
        size_t k = need < sizeof zeros ? need : sizeof zeros;
        qp_status s = qp_outfile_write(f, zeros, k, e);
        if (s != QP_OK) return s;
        need -= k;
    }
    return f->err.status == QP_OK ? QP_OK : outfile_error(f, e);
}

uint64_t qp_outfile_tell(const qp_outfile *f) { return f ? f->written : 0; }

const char *qp_outfile_path(const qp_outfile *f) { return f ? f->path : NULL; }

/* Best effort: makes a rename durable. */
static void fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? qp_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : qp_strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    qp_free(dir);
}

qp_status qp_outfile_commit(qp_outfile *f, qp_err *e) {
    if (!f) return qp_fail(e, QP_ERR_ARG, "qp_outfile_commit: no file");
    qp_status s = outfile_flush(f, e);
    if (s == QP_OK && fsync(f->fd) != 0 && errno != EINVAL && errno != EROFS)
        s = qp_fail(e, QP_ERR_IO, "%s: fsync failed: %s", f->path, strerror(errno));
    if (s == QP_OK) {
        int rc = close(f->fd);
        f->fd = -1;
        if (rc != 0) s = qp_fail(e, QP_ERR_IO, "%s: close failed: %s", f->path, strerror(errno));
    }
    if (s == QP_OK && rename(f->tmp, f->path) != 0)
        s = qp_fail(e, QP_ERR_IO, "%s: cannot rename %s onto it: %s", f->path, f->tmp,
                    strerror(errno));
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return s;
    }
    fsync_parent(f->path);
    outfile_free(f);
    return QP_OK;
}

void qp_outfile_abort(qp_outfile *f) {
    if (!f) return;
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
    if (f->tmp) (void)unlink(f->tmp);
    outfile_free(f);
}

qp_status qp_file_write_atomic(const char *path, const void *data, size_t n, qp_err *e) {
    qp_outfile *f;
    qp_status s = qp_outfile_open(path, &f, e);
    if (s != QP_OK) return s;
    s = qp_outfile_write(f, data, n, e);
    if (s != QP_OK) {
        qp_outfile_abort(f);
        return s;
    }
    return qp_outfile_commit(f, e);
}

/* ---- trees ---------------------------------------------------------------------------------- */

static qp_status remove_tree(const char *path, int depth, qp_err *e) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return QP_OK;
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0 && errno != ENOENT)
            return qp_fail(e, QP_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return QP_OK;
    }
    if (depth > 64) return qp_fail(e, QP_ERR_LIMIT, "%s: directory tree deeper than 64", path);
    DIR *d = opendir(path);
    if (!d) return qp_fail(e, QP_ERR_IO, "%s: cannot open directory: %s", path, strerror(errno));
    qp_status s = QP_OK;
    struct dirent *ent;
    while (s == QP_OK && (ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        char *child = qp_path_join(path, ent->d_name);
        if (!child) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        s = remove_tree(child, depth + 1, e);
        qp_free(child);
    }
    closedir(d);
    if (s == QP_OK && rmdir(path) != 0 && errno != ENOENT)
        s = qp_fail(e, QP_ERR_IO, "%s: cannot remove directory: %s", path, strerror(errno));
    return s;
}

qp_status qp_path_remove_tree(const char *path, qp_err *e) {
    if (!path || !*path) return qp_fail(e, QP_ERR_ARG, "qp_path_remove_tree: no path");
    return remove_tree(path, 0, e);
}

/* 1: an empty directory, 0: not empty, -1: error (errno set). */
static int dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    int empty = 1;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    return empty;
}

/* QP_OK when dir may become the target: absent, an empty directory, or replace is allowed. */
static qp_status check_target(const char *dir, bool replace, qp_err *e) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return QP_OK;
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return qp_fail(e, QP_ERR_IO, "%s: exists and is not a directory", dir);
    int empty = dir_is_empty(dir);
    if (empty < 0) return qp_fail(e, QP_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
    if (!empty && !replace)
        return qp_fail(e, QP_ERR_IO, "%s: exists and is not empty (not replacing it)", dir);
    return QP_OK;
}

static void outdir_free(qp_outdir *d) {
    if (!d) return;
    qp_free(d->dir);
    qp_free(d->tmp);
    qp_free(d);
}

qp_status qp_outdir_open(const char *dir, bool replace, qp_outdir **out, qp_err *e) {
    if (!dir || !*dir || !out) return qp_fail(e, QP_ERR_ARG, "qp_outdir_open: no path");
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--; /* "out/" and "out" name the same target */
    qp_outdir *d = qp_calloc(1, sizeof *d);
    if (!d) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    d->replace = replace;
    d->dir = qp_strndup(dir, len);
    if (d->dir) d->tmp = tmp_name(d->dir, "tmp");
    if (!d->dir || !d->tmp) {
        outdir_free(d);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    }
    qp_status s = check_target(d->dir, replace, e);
    if (s == QP_OK && mkdir(d->tmp, 0777) != 0)
        s = qp_fail(e, QP_ERR_IO, "%s: cannot create staging directory %s: %s", d->dir, d->tmp,
                    strerror(errno));
    if (s != QP_OK) {
        outdir_free(d);
        return s;
    }
    *out = d;
    return QP_OK;
}

const char *qp_outdir_path(const qp_outdir *d) { return d ? d->tmp : NULL; }

char *qp_outdir_join(const qp_outdir *d, const char *name) {
    return d && name ? qp_path_join(d->tmp, name) : NULL;
}

void qp_outdir_abort(qp_outdir *d) {
    if (!d) return;
    (void)remove_tree(d->tmp, 0, NULL);
    outdir_free(d);
}

qp_status qp_outdir_commit(qp_outdir *d, qp_err *e) {
    if (!d) return qp_fail(e, QP_ERR_ARG, "qp_outdir_commit: no directory");
    qp_status s = check_target(d->dir, d->replace, e);
    if (s != QP_OK) {
        qp_outdir_abort(d);
        return s;
    }
    if (rename(d->tmp, d->dir) == 0) { /* absent or empty target */
        fsync_parent(d->dir);
        outdir_free(d);
        return QP_OK;
    }
    int err = errno;
    if ((err != ENOTEMPTY && err != EEXIST) || !d->replace) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot rename %s onto it: %s", d->dir, d->tmp, strerror(err));
        qp_outdir_abort(d);
        return s;
    }
    /* Replace a non-empty directory: move it aside, move ours in, then delete the old one. */
    char *old = tmp_name(d->dir, "old");
    if (!old) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", d->dir);
        qp_outdir_abort(d);
        return s;
    }
    if (rename(d->dir, old) != 0) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot move the existing directory aside to %s: %s", d->dir,
                    old, strerror(errno));
        qp_free(old);
        qp_outdir_abort(d);
        return s;
    }
    if (rename(d->tmp, d->dir) != 0) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot rename %s onto it: %s", d->dir, d->tmp, strerror(errno));
        (void)rename(old, d->dir); /* put the previous output back */
        qp_free(old);
        qp_outdir_abort(d);
        return s;
    }
    fsync_parent(d->dir);
    s = remove_tree(old, 0, e);
    if (s != QP_OK) qp_err_prefix(e, "%s: replaced, but the previous copy remains: ", d->dir);
    qp_free(old);
    outdir_free(d);
    return s;
}
