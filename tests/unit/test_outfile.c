/* Atomic outputs (core/outfile.c): exact bytes on commit, nothing after abort or any failure
 * (open error, write error, allocation failure), directory staging and replacement. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/core.h"

static char g_root[1024];

static char *read_file(const char *path, size_t *len) {
    char *buf = NULL;
    qp_err e;
    qp_err_clear(&e);
    if (qp_file_read_all(path, (size_t)64 << 20, &buf, len, &e) != QP_OK) return NULL;
    return buf;
}

static void fresh_dir(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", g_root, name);
    QP_CHECK_EQ_INT(qp_path_remove_tree(out, NULL), QP_OK);
    qp_test_mkdir_p(out);
}

static void test_commit_exact_bytes(void) {
    char dir[1200], path[1300];
    fresh_dir(dir, sizeof dir, "commit");
    snprintf(path, sizeof path, "%s/out.bin", dir);
    size_t big = ((size_t)1 << 20) + 12345; /* larger than the buffer: the direct path */
    uint8_t *expect = malloc(big + 4096 * 3);
    size_t n = 0;
    qp_outfile *f = NULL;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    QP_CHECK(!qp_path_exists(path)); /* nothing under the final name before commit */
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    const char *hello = "hello";
    QP_CHECK_EQ_INT(qp_outfile_write(f, hello, 5, &e), QP_OK);
    memcpy(expect + n, hello, 5);
    n += 5;
    QP_CHECK_EQ_INT(qp_outfile_pad(f, 8, &e), QP_OK);
    memset(expect + n, 0, 3);
    n += 3;
    QP_CHECK_EQ_INT(qp_outfile_tell(f), 8);
    uint8_t *blob = malloc(big);
    for (size_t i = 0; i < big; i++) blob[i] = (uint8_t)(i * 31u + 7u);
    QP_CHECK_EQ_INT(qp_outfile_write(f, blob, big, &e), QP_OK);
    memcpy(expect + n, blob, big);
    n += big;
    /* many small writes crossing the buffer boundary */
    for (size_t i = 0; i < 1000; i++) {
        uint8_t b = (uint8_t)i;
        QP_CHECK_EQ_INT(qp_outfile_write(f, &b, 1, &e), QP_OK);
        expect[n++] = b;
    }
    QP_CHECK_EQ_INT(qp_outfile_pad(f, 4096, &e), QP_OK);
    while (n % 4096) expect[n++] = 0;
    QP_CHECK_EQ_INT(qp_outfile_tell(f), n);
    QP_CHECK(strcmp(qp_outfile_path(f), path) == 0);
    QP_CHECK_EQ_INT(qp_outfile_commit(f, &e), QP_OK);
    size_t got_len = 0;
    char *got = read_file(path, &got_len);
    QP_CHECK(got != NULL);
    QP_CHECK_EQ_INT(got_len, n);
    QP_CHECK(got && got_len == n && memcmp(got, expect, n) == 0);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1); /* no temporary left */
    /* commit replaces an existing file */
    QP_CHECK_EQ_INT(qp_file_write_atomic(path, "xyz", 3, &e), QP_OK);
    qp_free(got);
    got = read_file(path, &got_len);
    QP_CHECK(got && got_len == 3 && memcmp(got, "xyz", 3) == 0);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    /* an empty file */
    char empty[1400];
    snprintf(empty, sizeof empty, "%s/empty.bin", dir);
    QP_CHECK_EQ_INT(qp_file_write_atomic(empty, NULL, 0, &e), QP_OK);
    struct stat st;
    QP_CHECK(stat(empty, &st) == 0 && st.st_size == 0);
    QP_CHECK_EQ_INT(e.status, QP_OK);
    qp_free(got);
    free(blob);
    free(expect);
}

static void test_abort(void) {
    char dir[1200], path[1300];
    fresh_dir(dir, sizeof dir, "abort");
    snprintf(path, sizeof path, "%s/out.bin", dir);
    qp_outfile *f = NULL;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    uint8_t *blob = calloc(1, (size_t)3 << 20);
    QP_CHECK_EQ_INT(qp_outfile_write(f, blob, (size_t)3 << 20, &e), QP_OK);
    qp_outfile_abort(f);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 0);
    qp_outfile_abort(NULL);
    /* abort keeps an older committed file untouched */
    QP_CHECK_EQ_INT(qp_file_write_atomic(path, "old", 3, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_outfile_write(f, "new content", 11, &e), QP_OK);
    qp_outfile_abort(f);
    size_t len = 0;
    char *got = read_file(path, &len);
    QP_CHECK(got && len == 3 && memcmp(got, "old", 3) == 0);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    qp_free(got);
    free(blob);
}

static void test_open_error_names_path(void) {
    char path[1300];
    snprintf(path, sizeof path, "%s/no/such/dir/out.bin", g_root);
    qp_outfile *f = NULL;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_ERR_IO);
    QP_CHECK(f == NULL);
    QP_CHECK_MSG(strstr(e.msg, path) != NULL, "message: %s", e.msg);
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_file_write_atomic(path, "x", 1, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, path) != NULL, "message: %s", e.msg);
}

/* A write that fails (file size limit -> EFBIG) is remembered: later writes and commit return
 * it, and commit leaves no file at all. */
static void test_write_error_remembered(void) {
    char dir[1200], path[1300];
    fresh_dir(dir, sizeof dir, "efbig");
    snprintf(path, sizeof path, "%s/out.bin", dir);
    struct rlimit old;
    if (getrlimit(RLIMIT_FSIZE, &old) != 0) return;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 4096;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return;
    qp_outfile *f = NULL;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    uint8_t *blob = calloc(1, (size_t)2 << 20);
    qp_status s = qp_outfile_write(f, blob, (size_t)2 << 20, &e);
    QP_CHECK_EQ_INT(s, QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, path) != NULL, "message: %s", e.msg);
    qp_err e2;
    qp_err_clear(&e2);
    QP_CHECK_EQ_INT(qp_outfile_write(f, "x", 1, &e2), QP_ERR_IO);
    qp_err_clear(&e2);
    QP_CHECK_EQ_INT(qp_outfile_commit(f, &e2), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e2.msg, path) != NULL, "message: %s", e2.msg);
    setrlimit(RLIMIT_FSIZE, &old);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 0);
    /* buffered data that fails only at the final flush */
    setrlimit(RLIMIT_FSIZE, &lim);
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_outfile_write(f, blob, 100000, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_outfile_commit(f, &e), QP_ERR_IO);
    setrlimit(RLIMIT_FSIZE, &old);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 0);
    free(blob);
}

static void test_alloc_failure_no_debris(void) {
    char dir[1200], path[1300];
    fresh_dir(dir, sizeof dir, "nomem");
    snprintf(path, sizeof path, "%s/out.bin", dir);
    int saw_nomem = 0, saw_ok = 0;
    for (long k = 0; k < 12; k++) {
        qp_err e;
        qp_err_clear(&e);
        qp_alloc_fail_after(k);
        qp_status s = qp_file_write_atomic(path, "abc", 3, &e);
        qp_alloc_fail_after(-1);
        QP_CHECK_MSG(s == QP_OK || s == QP_ERR_NOMEM, "k=%ld status %d: %s", k, (int)s, e.msg);
        if (s == QP_OK) {
            saw_ok++;
            QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
            unlink(path);
        } else {
            saw_nomem++;
            QP_CHECK_MSG(qp_test_count_entries(dir) == 0, "k=%ld: debris after NOMEM", k);
        }
    }
    QP_CHECK(saw_nomem > 0 && saw_ok > 0);
    /* the same for a directory output with a file inside */
    char out[1300];
    snprintf(out, sizeof out, "%s/model", dir);
    saw_nomem = saw_ok = 0;
    for (long k = 0; k < 24; k++) {
        qp_err e;
        qp_err_clear(&e);
        qp_alloc_fail_after(k);
        qp_outdir *d = NULL;
        qp_status s = qp_outdir_open(out, NULL, false, &d, &e);
        char *file = NULL;
        if (s == QP_OK) {
            file = qp_outdir_join(d, "a.txt");
            if (!file) s = qp_fail(&e, QP_ERR_NOMEM, "join");
        }
        if (s == QP_OK) s = qp_file_write_atomic(file, "abc", 3, &e);
        qp_free(file);
        if (s == QP_OK) s = qp_outdir_commit(d, &e);
        else qp_outdir_abort(d);
        qp_alloc_fail_after(-1);
        QP_CHECK_MSG(s == QP_OK || s == QP_ERR_NOMEM, "k=%ld status %d: %s", k, (int)s, e.msg);
        if (s == QP_OK) {
            saw_ok++;
            QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
            QP_CHECK_EQ_INT(qp_test_count_entries(out), 1);
            QP_CHECK_EQ_INT(qp_path_remove_tree(out, NULL), QP_OK);
        } else {
            saw_nomem++;
            QP_CHECK_MSG(qp_test_count_entries(dir) == 0, "k=%ld: debris after NOMEM", k);
        }
    }
    QP_CHECK(saw_nomem > 0 && saw_ok > 0);
}

static void write_in(qp_outdir *d, const char *name, const char *text) {
    char *p = qp_outdir_join(d, name);
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_file_write_atomic(p, text, strlen(text), &e), QP_OK);
    qp_free(p);
}

static const char *const k_pkg_files[] = {"a.txt", "b.txt", "sub", NULL};
static const qp_outdir_kind k_pkg = {"test package", "a.txt", k_pkg_files};

static char *slurp(const char *dir, const char *name) {
    char p[1600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t len = 0;
    return read_file(p, &len);
}

static void test_outdir(void) {
    char dir[1200], out[1300], file[1400];
    fresh_dir(dir, sizeof dir, "outdir");
    snprintf(out, sizeof out, "%s/model", dir);
    snprintf(file, sizeof file, "%s/a.txt", out);
    qp_outdir *d = NULL;
    qp_err e;
    qp_err_clear(&e);
    /* a new directory */
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, false, &d, &e), QP_OK);
    QP_CHECK(!qp_path_exists(out));
    write_in(d, "a.txt", "one");
    QP_CHECK_EQ_INT(qp_outdir_commit(d, &e), QP_OK);
    size_t len = 0;
    char *got = read_file(file, &len);
    QP_CHECK(got && len == 3 && memcmp(got, "one", 3) == 0);
    qp_free(got);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    /* refuses to replace a non-empty directory unless asked */
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, false, &d, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, out) != NULL && strstr(e.msg, "--force"), "message: %s", e.msg);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    /* abort leaves the existing output as it was */
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, true, &d, &e), QP_OK);
    write_in(d, "a.txt", "two");
    write_in(d, "b.txt", "bee");
    qp_outdir_abort(d);
    got = read_file(file, &len);
    QP_CHECK(got && len == 3 && memcmp(got, "one", 3) == 0);
    qp_free(got);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    QP_CHECK_EQ_INT(qp_test_count_entries(out), 1);
    /* replace a previous package: its files go, files and folders it does not own stay */
    char notes[1400], keep[1400];
    snprintf(notes, sizeof notes, "%s/notes.txt", out);
    snprintf(keep, sizeof keep, "%s/keep", out);
    QP_CHECK_EQ_INT(qp_file_write_atomic(notes, "mine", 4, &e), QP_OK);
    mkdir(keep, 0777);
    QP_CHECK_EQ_INT(qp_test_count_entries(out), 3);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, true, &d, &e), QP_OK);
    write_in(d, "b.txt", "bee");
    char *sub = qp_outdir_join(d, "sub");
    mkdir(sub, 0777);
    qp_free(sub);
    write_in(d, "sub/c.txt", "sea");
    QP_CHECK_EQ_INT(qp_outdir_commit(d, &e), QP_OK);
    QP_CHECK(!qp_path_exists(file));                 /* a.txt: the old package's, not rewritten */
    got = slurp(out, "notes.txt");                    /* not the package's: kept */
    QP_CHECK(got && strcmp(got, "mine") == 0);
    qp_free(got);
    QP_CHECK(qp_path_is_dir(keep));
    got = slurp(out, "sub/c.txt");
    QP_CHECK(got && strcmp(got, "sea") == 0);
    qp_free(got);
    QP_CHECK_EQ_INT(qp_test_count_entries(out), 4); /* b.txt sub notes.txt keep */
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    /* a folder that holds no previous package (no marker) is never replaced, even when asked */
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, true, &d, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, "did not write") != NULL, "message: %s", e.msg);
    QP_CHECK_EQ_INT(qp_outdir_open(out, NULL, true, &d, &e), QP_ERR_IO);
    QP_CHECK_EQ_INT(qp_test_count_entries(out), 4);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    /* an empty existing directory is fine without replace */
    QP_CHECK_EQ_INT(qp_path_remove_tree(out, NULL), QP_OK);
    mkdir(out, 0777);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, false, &d, &e), QP_OK);
    write_in(d, "a.txt", "three");
    QP_CHECK_EQ_INT(qp_outdir_commit(d, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_test_count_entries(out), 1);
    /* a file where the directory should go is never replaced */
    QP_CHECK_EQ_INT(qp_path_remove_tree(out, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_file_write_atomic(out, "f", 1, &e), QP_OK);
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outdir_open(out, &k_pkg, true, &d, &e), QP_ERR_IO);
    QP_CHECK(qp_path_exists(out) && !qp_path_is_dir(out));
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 1);
    QP_CHECK_EQ_INT(e.status, QP_ERR_IO);
}

/* Temporary names: ".<name>.quantpack-partial.<pid>.<n>" beside the output. */
static void test_partial_names_and_cleanup(void) {
    char dir[1200], path[1300], want[1400];
    fresh_dir(dir, sizeof dir, "partials");
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    snprintf(want, sizeof want, ".out.gguf.quantpack-partial.%ld.", (long)getpid());
    qp_outfile *f = NULL;
    qp_outdir *d = NULL;
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_outfile_open(path, &f, &e), QP_OK);
    char pkg[1300];
    snprintf(pkg, sizeof pkg, "%s/pkg", dir);
    QP_CHECK_EQ_INT(qp_outdir_open(pkg, &k_pkg, false, &d, &e), QP_OK);
    write_in(d, "a.txt", "x");
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 2);
    DIR *dd = opendir(dir);
    int named = 0;
    for (struct dirent *ent; dd && (ent = readdir(dd)) != NULL;)
        named += strncmp(ent->d_name, want, strlen(want)) == 0 ||
                 strncmp(ent->d_name, ".pkg.quantpack-partial.", 23) == 0;
    if (dd) closedir(dd);
    QP_CHECK_EQ_INT(named, 2);
    /* what a signal handler thread calls: every partial output of the process goes */
    qp_outputs_remove_partials();
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 0);
    qp_outfile_abort(f);
    qp_outdir_abort(d);
    QP_CHECK_EQ_INT(qp_test_count_entries(dir), 0);
    /* committed outputs are no longer partial: removing partials leaves them */
    QP_CHECK_EQ_INT(qp_file_write_atomic(path, "ok", 2, &e), QP_OK);
    qp_outputs_remove_partials();
    QP_CHECK(qp_path_exists(path));
}

/* Partial outputs of killed runs (their pid is gone) are removed by the next run; a live
 * process's are not. */
static void test_remove_stale(void) {
    char dir[1200], path[1300], dead[1500], live[1500], other[1500];
    fresh_dir(dir, sizeof dir, "stale");
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    pid_t child = fork();
    if (child == 0) _exit(0);
    int st;
    waitpid(child, &st, 0); /* child's pid is now free (not reused this fast in practice) */
    snprintf(dead, sizeof dead, "%s/.m.gguf.quantpack-partial.%ld.0", dir, (long)child);
    snprintf(live, sizeof live, "%s/.m.gguf.quantpack-partial.%ld.0", dir, (long)getppid());
    snprintf(other, sizeof other, "%s/.n.gguf.quantpack-partial.%ld.0", dir, (long)child);
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_file_write_atomic(dead, "x", 1, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_file_write_atomic(live, "x", 1, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_file_write_atomic(other, "x", 1, &e), QP_OK);
    char deaddir[1500];
    snprintf(deaddir, sizeof deaddir, "%s/.m.gguf.quantpack-partial.%ld.1", dir, (long)child);
    mkdir(deaddir, 0777);
    int removed = -1;
    QP_CHECK_EQ_INT(qp_output_remove_stale(path, &removed, &e), QP_OK);
    QP_CHECK_EQ_INT(removed, 2);
    QP_CHECK(!qp_path_exists(dead) && !qp_path_exists(deaddir));
    QP_CHECK(qp_path_exists(live) && qp_path_exists(other));
}

/* The output rule: no replacing without force, never an input, only regular files. */
static void test_output_rule(void) {
    char dir[1200], in[1300], out[1300], slink[1300], hard[1300], pkg[1300];
    fresh_dir(dir, sizeof dir, "rule");
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(slink, sizeof slink, "%s/link.gguf", dir);
    snprintf(hard, sizeof hard, "%s/hard.gguf", dir);
    snprintf(pkg, sizeof pkg, "%s/pkg", dir);
    qp_err e;
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_file_write_atomic(in, "in", 2, &e), QP_OK);
    QP_CHECK(symlink(in, slink) == 0);
    QP_CHECK(link(in, hard) == 0);
    const char *inputs[] = {in, NULL};
    qp_output_rule r = {.inputs = inputs};
    QP_CHECK_EQ_INT(qp_output_check(out, &r, &e), QP_OK); /* absent */
    QP_CHECK_EQ_INT(qp_file_write_atomic(out, "old", 3, &e), QP_OK);
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_output_check(out, &r, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, "already exists") && strstr(e.msg, "--force"), "%s", e.msg);
    r.force = true;
    QP_CHECK_EQ_INT(qp_output_check(out, &r, &e), QP_OK);
    /* the input itself, through a symbolic link and through a hard link: refused with force */
    const char *same[] = {in, slink, hard};
    for (int i = 0; i < 3; i++) {
        qp_err_clear(&e);
        QP_CHECK_EQ_INT(qp_output_check(same[i], &r, &e), QP_ERR_IO);
        QP_CHECK_MSG(strstr(e.msg, "is the input") != NULL, "%s: %s", same[i], e.msg);
    }
    /* never a device, a FIFO or a directory */
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_output_check("/dev/null", &r, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, "character device") != NULL, "%s", e.msg);
    char fifo[1300];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    QP_CHECK(mkfifo(fifo, 0666) == 0);
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_output_check(fifo, &r, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, "FIFO") != NULL, "%s", e.msg);
    QP_CHECK_EQ_INT(qp_output_check(dir, &r, &e), QP_ERR_IO);
    /* a folder output holding an input is refused even with force */
    qp_output_rule rd = {.force = true, .directory = true, .kind = &k_pkg, .inputs = inputs};
    qp_err_clear(&e);
    QP_CHECK_EQ_INT(qp_output_check(dir, &rd, &e), QP_ERR_IO);
    QP_CHECK_MSG(strstr(e.msg, "holds the input") != NULL, "%s", e.msg);
    /* a folder output: absent ok; a previous package with force ok; without force refused */
    QP_CHECK_EQ_INT(qp_output_check(pkg, &rd, &e), QP_OK);
    mkdir(pkg, 0777);
    char marker[1400];
    snprintf(marker, sizeof marker, "%s/a.txt", pkg);
    QP_CHECK_EQ_INT(qp_file_write_atomic(marker, "a", 1, &e), QP_OK);
    QP_CHECK_EQ_INT(qp_output_check(pkg, &rd, &e), QP_OK);
    rd.force = false;
    QP_CHECK_EQ_INT(qp_output_check(pkg, &rd, &e), QP_ERR_IO);
    /* the input untouched by all of this */
    size_t len = 0;
    char *got = read_file(in, &len);
    QP_CHECK(got && len == 2 && memcmp(got, "in", 2) == 0);
    qp_free(got);
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    snprintf(g_root, sizeof g_root, "%s/outfile.%ld", tmp, (long)getpid());
    qp_test_mkdir_p(g_root);
    test_commit_exact_bytes();
    test_abort();
    test_open_error_names_path();
    test_write_error_remembered();
    test_alloc_failure_no_debris();
    test_outdir();
    test_partial_names_and_cleanup();
    test_remove_stale();
    test_output_rule();
    QP_CHECK_EQ_INT(qp_path_remove_tree(g_root, NULL), QP_OK);
    return qp_test_finish();
}
