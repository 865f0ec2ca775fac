/* Small helpers the tests share: whole files in and out, folders, running a command and getting
 * its exit code, and the llama2.c oracle files (fixtures/README.md). Everything is static inline: a
 * test includes what it uses. Failures return NULL/false/-1 and leave the verdict to the test
 * (a check, a skip or an exit), except the qp_test_must_* ones, which exit 2 (harness broken). */
#ifndef QP_TEST_UTIL_H
#define QP_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "qp_test.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"

extern char **environ;

/* ---- files --------------------------------------------------------------------------------- */

/* The highest SIMD level of this CPU (0 scalar, 1 avx2, 2 avx512), read once before any
 * qp_encoding_simd_force (tests call it first); tests run every level up to it. */
static inline int qp_test_max_simd_level(void) {
    static int lv = -1;
    if (lv < 0) {
        const char *l = qp_encoding_simd_level();
        lv = strcmp(l, "avx512") == 0 ? 2 : (strcmp(l, "avx2") == 0 ? 1 : 0);
    }
    return lv;
}

/* The whole file, malloc'd (free()), with a NUL byte after its *n bytes; NULL when it cannot be
 * opened or read in full. */
static inline void *qp_test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *b = sz >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)sz + 1) : NULL;
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (!b) return NULL;
    b[sz] = 0;
    *n = (size_t)sz;
    return b;
}

/* Writes exactly data[0..n) to path (created or truncated); false on any error. */
static inline bool qp_test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = !n || fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* qp_test_write_file, or "cannot write PATH" and exit 2. */
static inline void qp_test_must_write_file(const char *path, const void *data, size_t n) {
    if (!qp_test_write_file(path, data, n)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

/* True when both files can be mapped and hold the same bytes; *diff_at: the first offset that
 * differs (the shorter size when one is a prefix of the other, 0 when one cannot be mapped). */
static inline bool qp_test_files_equal(const char *a, const char *b, size_t *diff_at) {
    qp_mapped_file fa = {0}, fb = {0};
    qp_err e = {0};
    bool ok = qp_file_map(a, &fa, &e) == QP_OK && qp_file_map(b, &fb, &e) == QP_OK;
    size_t i = 0;
    if (ok) {
        size_t n = fa.size < fb.size ? fa.size : fb.size;
        while (i < n && fa.data[i] == fb.data[i]) i++;
        ok = i == n && fa.size == fb.size;
    }
    if (diff_at) *diff_at = i;
    qp_file_unmap(&fa);
    qp_file_unmap(&fb);
    return ok;
}

/* ---- bytes built by hand (little-endian), for files a test writes itself ------------------ */

/* A growable byte buffer; a zeroed one is empty. qp_test_buf_free releases it. */
typedef struct qp_test_buf {
    uint8_t *p;
    size_t n, cap;
} qp_test_buf;

/* Appends n bytes (exit 2 when out of memory). */
static inline void qp_test_put(qp_test_buf *b, const void *x, size_t n) {
    if (n > b->cap - b->n) {
        size_t cap = (b->n + n) * 2 + 64;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "test buffer: out of memory\n");
            exit(2);
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
}
static inline void qp_test_put_u8(qp_test_buf *b, uint8_t v) { qp_test_put(b, &v, 1); }
static inline void qp_test_put_u32(qp_test_buf *b, uint32_t v) {
    uint8_t t[4];
    qp_store_u32le(t, v);
    qp_test_put(b, t, 4);
}
static inline void qp_test_put_u64(qp_test_buf *b, uint64_t v) {
    uint8_t t[8];
    qp_store_u64le(t, v);
    qp_test_put(b, t, 8);
}
static inline void qp_test_put_f32(qp_test_buf *b, float f) {
    uint8_t t[4];
    qp_store_f32le(t, f);
    qp_test_put(b, t, 4);
}
/* A GGUF string: u64 length, then the bytes. */
static inline void qp_test_put_gguf_str(qp_test_buf *b, const char *s) {
    qp_test_put_u64(b, strlen(s));
    qp_test_put(b, s, strlen(s));
}
static inline void qp_test_buf_free(qp_test_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- folders ------------------------------------------------------------------------------- */

/* mkdir -p: true when path is a folder afterwards. */
static inline bool qp_test_mkdir_p(const char *path) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) return false;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0777);
            *p = '/';
        }
    }
    mkdir(buf, 0777);
    return qp_path_is_dir(buf);
}

/* $QP_TMP_DIR (dflt when unset), made with its parents when missing: nothing guarantees an
 * earlier test made it. NULL when it cannot be made. */
static inline const char *qp_test_tmp_dir(const char *dflt) {
    const char *tmp = qp_test_env("QP_TMP_DIR", dflt);
    return qp_test_mkdir_p(tmp) ? tmp : NULL;
}

/* Entries in dir other than . and ..; -1 when it cannot be read. */
static inline int qp_test_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL)
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- commands ------------------------------------------------------------------------------ */

/* Exit code of a shell command (printf-style; quote paths in the format), -1 when it could not
 * run or did not exit normally. */
__attribute__((format(printf, 1, 2))) static inline int qp_test_system(const char *fmt, ...) {
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd) return -1;
    int r = system(cmd);
    return r != -1 && WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* Runs argv[0] (a path) with argv, no shell. With log: stdout and stderr go to that file, which
 * is printed to stderr and kept when the command fails, removed when it exits 0. Returns the
 * exit code, -1 when it could not be spawned or did not exit normally. */
static inline int qp_test_spawn(char *const argv[], const char *log) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log) {
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = 0;
    int code = rc == 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
                   ? WEXITSTATUS(status) : -1;
    if (log && code != 0) {
        fprintf(stderr, "%s exited %d (spawn %d, status %d):\n", argv[0], code, rc, status);
        FILE *f = fopen(log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
        if (f) fclose(f);
    } else if (log)
        remove(log);
    return code;
}

/* ---- llama2.c oracles ($QP_REAL_FIXTURES/oracles, run.c's own outputs) ------------------------- */

/* The integers after "KEY:" on the first line holding KEY at its start or after a space (so
 * "IDS" is not "PROMPT_IDS"), at most max; the count, or -1 when the file or the key is
 * missing. */
static inline int qp_test_oracle_ids(const char *path, const char *key, int32_t *ids, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[8192];
    int n = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        char *k = line;
        while ((k = strstr(k, key)) != NULL && !((k == line || k[-1] == ' ') && k[kl] == ':'))
            k++;
        if (!k) continue;
        n = 0;
        char *p = k + kl + 1, *end;
        for (;;) {
            long v = strtol(p, &end, 10);
            if (end == p || n == max) break;
            ids[n++] = (int32_t)v;
            p = end;
        }
        break;
    }
    fclose(f);
    return n;
}

/* "LOGITS pos=P token=T: v0 v1 ..." lines with 0 <= P < max_pos into logits[P * n_vocab + i]
 * (and T into tokens[P] when tokens is not NULL). Returns the lines read, -1 when the file is
 * missing or a line holds fewer than n_vocab values. */
static inline int qp_test_oracle_logits(const char *path, float *logits, int max_pos, int n_vocab,
                                        int32_t *tokens) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char line[1 << 16];
    int npos = 0;
    while (fgets(line, sizeof line, f)) {
        int pos, tok, off = 0;
        if (sscanf(line, "LOGITS pos=%d token=%d:%n", &pos, &tok, &off) != 2 || pos < 0 ||
            pos >= max_pos)
            continue;
        char *p = line + off, *end;
        int i = 0;
        for (; i < n_vocab; i++) {
            float v = strtof(p, &end);
            if (end == p) break;
            logits[(size_t)pos * (size_t)n_vocab + (size_t)i] = v;
            p = end;
        }
        if (i != n_vocab) {
            fclose(f);
            return -1;
        }
        if (tokens) tokens[pos] = tok;
        npos++;
    }
    fclose(f);
    return npos;
}

#endif
