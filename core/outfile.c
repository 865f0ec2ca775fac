/* Atomic output files and directories: write under a temporary name beside the target, rename
 * onto it only when everything succeeded. Contract in include/quantpack/core.h. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sticky.h"
#include "core/file_mode.h"
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
    const qp_outdir_kind *kind;
};

static atomic_ulong g_tmp_counter;

#define PARTIAL_TAG "quantpack-partial"

/* "<dir of path>/.<name of path>.quantpack-<tag>.<pid>.<n>" on the heap. */
static char *tmp_name(const char *path, const char *tag) {
    unsigned long n = atomic_fetch_add(&g_tmp_counter, 1ul);
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    int len = snprintf(NULL, 0, "%.*s.%s.quantpack-%s.%ld.%lu", dl, path, base, tag, (long)getpid(), n);
    if (len < 0) return NULL;
    char *s = qp_malloc((size_t)len + 1);
    if (!s) return NULL;
    snprintf(s, (size_t)len + 1, "%.*s.%s.quantpack-%s.%ld.%lu", dl, path, base, tag, (long)getpid(), n);
    return s;
}

char *qp_output_partial_name(const char *path) { return path ? tmp_name(path, "partial") : NULL; }

/* ---- the partial outputs of this process (removed on a signal) -------------------------------- */

typedef struct partial {
    char *path;
    bool dir;
} partial;
static pthread_mutex_t g_partials_lock = PTHREAD_MUTEX_INITIALIZER;
static partial *g_partials;
static size_t g_n_partials, g_cap_partials;

static bool partial_add(const char *path, bool dir) {
    char *copy = qp_strdup(path);
    if (!copy) return false;
    pthread_mutex_lock(&g_partials_lock);
    bool ok = true;
    if (g_n_partials == g_cap_partials) {
        size_t nc = g_cap_partials ? 2 * g_cap_partials : 16;
        partial *np = qp_realloc(g_partials, nc * sizeof *np);
        if (np) {
            g_partials = np;
            g_cap_partials = nc;
        } else {
            ok = false;
        }
    }
    if (ok) g_partials[g_n_partials++] = (partial){copy, dir};
    pthread_mutex_unlock(&g_partials_lock);
    if (!ok) qp_free(copy);
    return ok;
}

static void partial_remove(const char *path) {
    pthread_mutex_lock(&g_partials_lock);
    for (size_t i = g_n_partials; i-- > 0;)
        if (strcmp(g_partials[i].path, path) == 0) {
            qp_free(g_partials[i].path);
            g_partials[i] = g_partials[--g_n_partials];
            break;
        }
    if (g_n_partials == 0) {
        qp_free(g_partials);
        g_partials = NULL;
        g_cap_partials = 0;
    }
    pthread_mutex_unlock(&g_partials_lock);
}

static qp_status remove_tree(const char *path, int depth, qp_err *e);

/* Another thread may still be writing into a staging folder while a signal removes it: an entry
 * it creates or renames in between the listing and rmdir makes rmdir fail (ENOTEMPTY), so the
 * removal is tried again (a few times: the writer's next step in a removed folder fails). */
void qp_outputs_remove_partials(void) {
    pthread_mutex_lock(&g_partials_lock);
    for (size_t i = 0; i < g_n_partials; i++) {
        if (!g_partials[i].dir) (void)unlink(g_partials[i].path);
        for (int k = 0; g_partials[i].dir && k < 8 && remove_tree(g_partials[i].path, 0, NULL) != QP_OK; k++) {
        }
    }
    pthread_mutex_unlock(&g_partials_lock);
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
        f->tmp = tmp_name(path, "partial");
        if (!f->tmp) {
            outfile_free(f);
            return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        }
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd < 0 && errno != EEXIST) break;
    }
    if (f->fd >= 0 && !partial_add(f->tmp, false)) {
        (void)unlink(f->tmp);
        outfile_free(f);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
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

static qp_status outfile_flush(qp_outfile *f, qp_err *e) {
    if (f->err.status != QP_OK) return qp_sticky_check(&f->err, e);
    if (f->buf_len == 0) return QP_OK;
    int err = 0;
    if (!write_all(f->fd, f->buf, f->buf_len, &err))
        return qp_sticky_fail(&f->err, e, QP_ERR_IO, "%s: write failed at byte %llu: %s", f->path,
                              (unsigned long long)(f->written - f->buf_len), strerror(err));
    f->buf_len = 0;
    return QP_OK;
}

qp_status qp_outfile_write(qp_outfile *f, const void *data, size_t n, qp_err *e) {
    if (!f) return qp_fail(e, QP_ERR_ARG, "qp_outfile_write: no file");
    if (f->err.status != QP_OK) return qp_sticky_check(&f->err, e);
    if (n == 0) return QP_OK;
    if (!data)
        return qp_sticky_fail(&f->err, e, QP_ERR_ARG, "%s: write of %zu bytes from NULL", f->path, n);
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
    if (!write_all(f->fd, p, n, &err))
        return qp_sticky_fail(&f->err, e, QP_ERR_IO, "%s: write failed at byte %llu: %s", f->path,
                              (unsigned long long)f->written, strerror(err));
    f->written += n;
    return QP_OK;
}

qp_status qp_outfile_pad(qp_outfile *f, size_t alignment, qp_err *e) {
    if (!f) return qp_fail(e, QP_ERR_ARG, "qp_outfile_pad: no file");
    if (alignment == 0)
        return qp_sticky_fail(&f->err, e, QP_ERR_ARG, "%s: padding to an alignment of 0", f->path);
    static const uint8_t zeros[256];
    size_t need = (size_t)((alignment - f->written % alignment) % alignment);
    while (need > 0) {
        size_t k = need < sizeof zeros ? need : sizeof zeros;
        qp_status s = qp_outfile_write(f, zeros, k, e);
        if (s != QP_OK) return s;
        need -= k;
    }
    return qp_sticky_check(&f->err, e);
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
    partial_remove(f->tmp);
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
    if (f->tmp) {
        (void)unlink(f->tmp);
        partial_remove(f->tmp);
    }
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

static qp_status dir_is_empty(const char *path, bool *empty, qp_err *e) {
    DIR *d = opendir(path);
    if (!d) return qp_fail(e, QP_ERR_IO, "%s: cannot read directory: %s", path, strerror(errno));
    *empty = true;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0) {
            *empty = false;
            break;
        }
    }
    closedir(d);
    return QP_OK;
}

static bool kind_owns(const qp_outdir_kind *k, const char *name) {
    for (const char *const *p = k ? k->patterns : NULL; p && *p; p++)
        if (fnmatch(*p, name, FNM_PERIOD) == 0) return true;
    return false;
}

/* QP_OK when dir may become the target: absent, an empty directory, or (replace) a directory
 * holding a previous package of the kind. */
static qp_status check_target(const char *dir, const qp_outdir_kind *kind, bool replace, qp_err *e) {
    struct stat st;
    if (lstat(dir, &st) != 0) {
        if (errno == ENOENT) return QP_OK;
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return qp_fail(e, QP_ERR_IO, "%s: exists and is not a directory", dir);
    bool empty = false;
    qp_status s = dir_is_empty(dir, &empty, e);
    if (s != QP_OK) return s;
    if (empty) return QP_OK;
    if (!replace)
        return qp_fail(e, QP_ERR_IO, "%s: exists and is not empty (not replacing it; -f/--force "
                       "replaces a previous package)", dir);
    char *marker = kind && kind->marker ? qp_path_join(dir, kind->marker) : NULL;
    struct stat mst;
    bool is_pkg = marker && lstat(marker, &mst) == 0 && S_ISREG(mst.st_mode);
    qp_free(marker);
    if (!is_pkg)
        return qp_fail(e, QP_ERR_IO, "%s: exists, is not empty and holds no %s (no %s): not "
                       "replacing a folder quantpack did not write", dir,
                       kind ? kind->name : "package", kind && kind->marker ? kind->marker : "marker");
    return QP_OK;
}

static void outdir_free(qp_outdir *d) {
    if (!d) return;
    qp_free(d->dir);
    qp_free(d->tmp);
    qp_free(d);
}

qp_status qp_outdir_open(const char *dir, const qp_outdir_kind *kind, bool replace, qp_outdir **out,
                         qp_err *e) {
    if (!dir || !*dir || !out) return qp_fail(e, QP_ERR_ARG, "qp_outdir_open: no path");
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--; /* "out/" and "out" name the same target */
    qp_outdir *d = qp_calloc(1, sizeof *d);
    if (!d) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    d->replace = replace;
    d->kind = kind;
    d->dir = qp_strndup(dir, len);
    if (d->dir) d->tmp = tmp_name(d->dir, "partial");
    if (!d->dir || !d->tmp) {
        outdir_free(d);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    }
    qp_status s = check_target(d->dir, kind, replace, e);
    if (s == QP_OK && mkdir(d->tmp, 0777) != 0)
        s = qp_fail(e, QP_ERR_IO, "%s: cannot create staging directory %s: %s", d->dir, d->tmp,
                    strerror(errno));
    if (s == QP_OK && !partial_add(d->tmp, true)) {
        (void)rmdir(d->tmp);
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", dir);
    }
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
    partial_remove(d->tmp);
    outdir_free(d);
}

/* Moves the entries of the old package folder that are not the kind's files into the staging
 * folder before the swap: regular files as hard links (the old folder keeps them until it is
 * deleted), anything else (folders, links) renamed, recorded in *moved so a failed swap can move
 * them back. Names the new package also has are the new package's. */
typedef struct kept {
    char **names;
    size_t n, cap;
} kept;

static qp_status keep_foreign(qp_outdir *d, kept *moved, qp_err *e) {
    DIR *dd = opendir(d->dir);
    if (!dd) return qp_fail(e, QP_ERR_IO, "%s: cannot read directory: %s", d->dir, strerror(errno));
    qp_status s = QP_OK;
    struct dirent *ent;
    while (s == QP_OK && (ent = readdir(dd)) != NULL) {
        const char *nm = ent->d_name;
        if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 || kind_owns(d->kind, nm)) continue;
        char *from = qp_path_join(d->dir, nm), *to = qp_path_join(d->tmp, nm);
        struct stat st;
        if (!from || !to) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", d->dir);
        } else if (lstat(to, &st) == 0) {
            /* the new package writes this name: its file wins */
        } else if (lstat(from, &st) != 0) {
            s = qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", from, strerror(errno));
        } else if (S_ISREG(st.st_mode)) {
            if (link(from, to) != 0)
                s = qp_fail(e, QP_ERR_IO, "%s: cannot keep it in the new package (link): %s", from,
                            strerror(errno));
        } else {
            if (moved->n == moved->cap) {
                size_t nc = moved->cap ? 2 * moved->cap : 8;
                char **nn = qp_realloc(moved->names, nc * sizeof *nn);
                if (!nn) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", d->dir);
                else moved->names = nn, moved->cap = nc;
            }
            char *copy = s == QP_OK ? qp_strdup(nm) : NULL;
            if (s == QP_OK && !copy) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", d->dir);
            if (s == QP_OK && rename(from, to) != 0) {
                s = qp_fail(e, QP_ERR_IO, "%s: cannot keep it in the new package (rename): %s", from,
                            strerror(errno));
                qp_free(copy);
            } else if (s == QP_OK) {
                moved->names[moved->n++] = copy;
            }
        }
        qp_free(from);
        qp_free(to);
    }
    closedir(dd);
    return s;
}

/* Puts the renamed foreign entries back into d->dir (a failed replacement) and frees the list. */
static void unkeep_foreign(const qp_outdir *d, const char *moved_into, kept *moved, bool put_back) {
    for (size_t i = 0; i < moved->n; i++) {
        if (put_back) {
            char *from = qp_path_join(moved_into, moved->names[i]);
            char *to = qp_path_join(d->dir, moved->names[i]);
            if (from && to) (void)rename(from, to);
            qp_free(from);
            qp_free(to);
        }
        qp_free(moved->names[i]);
    }
    qp_free(moved->names);
    memset(moved, 0, sizeof *moved);
}

static qp_status commit_fail(qp_outdir *d, qp_status s) {
    qp_outdir_abort(d);
    return s;
}

qp_status qp_outdir_commit(qp_outdir *d, qp_err *e) {
    if (!d) return qp_fail(e, QP_ERR_ARG, "qp_outdir_commit: no directory");
    qp_status s = check_target(d->dir, d->kind, d->replace, e);
    if (s != QP_OK) return commit_fail(d, s);
    if (rename(d->tmp, d->dir) == 0) { /* absent or empty target */
        partial_remove(d->tmp);
        fsync_parent(d->dir);
        outdir_free(d);
        return QP_OK;
    }
    int err = errno;
    if ((err != ENOTEMPTY && err != EEXIST) || !d->replace)
        return commit_fail(d, qp_fail(e, QP_ERR_IO, "%s: cannot rename %s onto it: %s", d->dir,
                                      d->tmp, strerror(err)));
    /* Replace a previous package: keep what is not the package's, move the old folder aside,
     * move ours in, then delete the old one (only the package's files are left in it). */
    kept moved = {0};
    s = keep_foreign(d, &moved, e);
    if (s != QP_OK) {
        unkeep_foreign(d, d->tmp, &moved, true);
        return commit_fail(d, s);
    }
    char *old = tmp_name(d->dir, "old");
    if (!old) {
        unkeep_foreign(d, d->tmp, &moved, true);
        return commit_fail(d, qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", d->dir));
    }
    if (rename(d->dir, old) != 0) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot move the existing directory aside to %s: %s", d->dir,
                    old, strerror(errno));
        qp_free(old);
        unkeep_foreign(d, d->tmp, &moved, true);
        return commit_fail(d, s);
    }
    if (rename(d->tmp, d->dir) != 0) {
        s = qp_fail(e, QP_ERR_IO, "%s: cannot rename %s onto it: %s", d->dir, d->tmp, strerror(errno));
        (void)rename(old, d->dir); /* put the previous output back */
        qp_free(old);
        unkeep_foreign(d, d->tmp, &moved, true);
        return commit_fail(d, s);
    }
    unkeep_foreign(d, NULL, &moved, false);
    partial_remove(d->tmp);
    fsync_parent(d->dir);
    s = remove_tree(old, 0, e);
    if (s != QP_OK) qp_err_prefix(e, "%s: replaced, but the previous copy remains: ", d->dir);
    qp_free(old);
    outdir_free(d);
    return s;
}

/* ---- the output rule ---------------------------------------------------------------------- */

/* Whether b is a or inside it (both resolved; false when either cannot be resolved). */
static bool path_inside(const char *a, const char *b) {
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    bool in = false;
    if (ra && rb) {
        size_t n = strlen(ra);
        in = strncmp(ra, rb, n) == 0 && (rb[n] == '\0' || rb[n] == '/' || (n == 1 && ra[0] == '/'));
    }
    free(ra);
    free(rb);
    return in;
}

qp_status qp_output_check(const char *path, const qp_output_rule *r, qp_err *e) {
    static const qp_output_rule k_default = {0};
    if (!path || !*path) return qp_fail(e, QP_ERR_ARG, "qp_output_check: no path");
    if (!r) r = &k_default;
    struct stat lst, st;
    if (lstat(path, &lst) != 0) {
        if (errno == ENOENT) return QP_OK;
        return qp_fail(e, QP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    bool resolves = stat(path, &st) == 0;
    for (const char *const *in = r->inputs; in && *in; in++) {
        struct stat ist;
        if (resolves && stat(*in, &ist) == 0 && ist.st_dev == st.st_dev && ist.st_ino == st.st_ino)
            return qp_fail(e, QP_ERR_IO, "%s: is the input %s (refusing to write over an input, even "
                           "with --force)", path, *in);
        if (r->directory && resolves && S_ISDIR(st.st_mode) && path_inside(path, *in))
            return qp_fail(e, QP_ERR_IO, "%s: holds the input %s (refusing to replace it, even with "
                           "--force)", path, *in);
    }
    if (r->directory) {
        if (S_ISLNK(lst.st_mode))
            return qp_fail(e, QP_ERR_IO, "%s: is a symbolic link; give the folder itself", path);
        return check_target(path, r->kind, r->force, e);
    }
    if (!S_ISREG(lst.st_mode))
        return qp_fail(e, QP_ERR_IO, "%s: exists and is %s; only regular files are written", path,
                       qp_file_mode_kind(lst.st_mode));
    if (!r->force)
        return qp_fail(e, QP_ERR_IO, "%s: already exists; not replacing it (-f/--force replaces it)",
                       path);
    return QP_OK;
}

qp_status qp_output_remove_stale(const char *path, int *removed, qp_err *e) {
    if (removed) *removed = 0;
    if (!path || !*path) return qp_fail(e, QP_ERR_ARG, "qp_output_remove_stale: no path");
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    char *p = qp_strndup(path, len);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
    char *slash = strrchr(p, '/');
    const char *base = slash ? slash + 1 : p;
    char *dir = slash ? qp_strndup(p, slash == p ? 1 : (size_t)(slash - p)) : qp_strdup(".");
    size_t pl = strlen(base) + 32;
    char *prefix = qp_malloc(pl), *prefix_old = qp_malloc(pl);
    qp_status s = QP_OK;
    if (!dir || !prefix || !prefix_old) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    snprintf(prefix, pl, ".%s." PARTIAL_TAG ".", base);
    snprintf(prefix_old, pl, ".%s.quantpack-old.", base);
    DIR *dd = opendir(dir);
    if (!dd) goto done; /* no folder: nothing stale */
    struct dirent *ent;
    while (s == QP_OK && (ent = readdir(dd)) != NULL) {
        const char *nm = ent->d_name, *rest = NULL;
        if (strncmp(nm, prefix, strlen(prefix)) == 0) rest = nm + strlen(prefix);
        else if (strncmp(nm, prefix_old, strlen(prefix_old)) == 0) rest = nm + strlen(prefix_old);
        if (!rest) continue;
        char *end;
        long pid = strtol(rest, &end, 10);
        if (end == rest || *end != '.' || pid <= 0 || pid > INT_MAX) continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive */
        char *full = qp_path_join(dir, nm);
        if (!full) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        s = remove_tree(full, 0, e);
        qp_free(full);
        if (s == QP_OK && removed) (*removed)++;
    }
    closedir(dd);
done:
    qp_free(prefix);
    qp_free(prefix_old);
    qp_free(dir);
    qp_free(p);
    return s;
}
