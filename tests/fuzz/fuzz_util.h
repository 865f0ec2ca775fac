/* Boilerplate the fuzz targets share: the entry point, per-process temp files and folders (readers
 * map files, so an input goes to disk first), writing bytes, removing what a target made, and
 * reading every tensor's first and last byte so ASan sees an out-of-bounds data pointer. Include
 * it once per target (it defines LLVMFuzzerTestOneInput). */
#ifndef QP_FUZZ_UTIL_H
#define QP_FUZZ_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantpack/quantpack.h"

/* Each target defines qp_fuzz_one: it runs the reader on the input, exercises what a caller does
 * with an accepted result, and returns the reader's status on the input (QP_OK = accepted; the
 * message in *e). It aborts on a broken invariant; a failure of the harness itself (a temp file
 * that cannot be written) is QP_ERR_IO. The replay driver (replay_main.c) calls it to check the
 * verdict a seed's name states; libFuzzer calls LLVMFuzzerTestOneInput below, which runs the same
 * code and ignores the verdict. */
qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    qp_err e = {0};
    (void)qp_fuzz_one(data, size, &e);
    return 0;
}

/* $TMPDIR, or /tmp when unset or empty. */
static inline const char *qp_fuzz_tmp(void) {
    const char *dir = getenv("TMPDIR");
    return dir && *dir ? dir : "/tmp";
}

/* Writes exactly data[0..size) to path; 0, or -1 on any error. */
static inline int qp_fuzz_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = size ? fwrite(data, 1, size, f) : 0;
    int rc = fclose(f);
    return n == size && rc == 0 ? 0 : -1;
}

/* The input written to this process's temp file $TMPDIR/qp_fuzz_<name>_<pid><ext> (the same
 * path on every call); NULL when it could not be written. Unlink it when done. */
static inline const char *qp_fuzz_input_file(const char *name, const char *ext, const uint8_t *data,
                                             size_t size) {
    static char path[512];
    if (!path[0])
        snprintf(path, sizeof path, "%.200s/qp_fuzz_%s_%ld%s", qp_fuzz_tmp(), name, (long)getpid(),
                 ext);
    return qp_fuzz_write_file(path, data, size) == 0 ? path : NULL;
}

/* Makes this process's work folder $TMPDIR/qp_fuzz_<name>_<pid> into dir (size n), or with
 * QP_FUZZ_KEEP_DIR=DIR that folder, which is then kept (to make seeds): returns true when kept. */
static inline bool qp_fuzz_work_dir(char *dir, size_t n, const char *name) {
    const char *keep = getenv("QP_FUZZ_KEEP_DIR");
    if (keep && *keep) snprintf(dir, n, "%.200s", keep);
    else snprintf(dir, n, "%.200s/qp_fuzz_%s_%d", qp_fuzz_tmp(), name, (int)getpid());
    mkdir(dir, 0700);
    return keep && *keep;
}

/* Unlinks every file in dir (whatever the writers made there), then removes dir when that left
 * it empty (a sub-folder is removed first by its own call). */
static inline void qp_fuzz_rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *ent;
    while (d && (ent = readdir(d)) != NULL) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* XOR of every tensor's first and last data byte: each must lie inside its mapping. */
static inline uint8_t qp_fuzz_touch_tensors(const qp_model *m) {
    uint8_t x = 0;
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        if (t->nbytes) x ^= (uint8_t)(t->data[0] ^ t->data[t->nbytes - 1]);
    }
    return x;
}

#endif
