/* quantpack core: allocation, overflow-checked arithmetic, little-endian bounded cursor,
 * read-only file mappings, arenas, F16/BF16 conversions. */
#ifndef QUANTPACK_CORE_H
#define QUANTPACK_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quantpack/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allocation (one wrapper so tests can inject failure) ---------------------------------- */
QP_API void *qp_malloc(size_t n);
QP_API void *qp_calloc(size_t count, size_t size); /* overflow-checked */
/* n bytes for a large buffer read in long streams (the runtime's repacked and copied weights):
 * from 2 MiB up, 2 MiB aligned and its whole 2 MiB pages advised as transparent huge pages
 * (madvise, where the system has it; the size is not rounded up, so no memory is added); freed
 * with qp_free */
QP_API void *qp_malloc_huge(size_t n);
QP_API void *qp_realloc(void *p, size_t n);
QP_API void qp_free(void *p);                      /* qp_free(NULL) is fine */
QP_API char *qp_strdup(const char *s);
QP_API char *qp_strndup(const char *s, size_t n);
/* Test hook: after `n` more successful allocations every allocation fails; -1 disables. Returns
 * the previous setting's count of allocations left (so a test can count the allocations a call
 * made through these wrappers). Thread-safe. */
QP_API long qp_alloc_fail_after(long n);

/* ---- checked arithmetic ------------------------------------------------------------------- */
static inline bool qp_size_mul(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool qp_size_add(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool qp_i64_mul(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool qp_i64_add(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
/* Rounds x up to a multiple of `align` (a power of two); false on overflow. */
static inline bool qp_size_align(size_t x, size_t align, size_t *out) {
    size_t t;
    if (!qp_size_add(x, align - 1, &t)) return false;
    *out = t & ~(align - 1);
    return true;
}

/* ---- little-endian loads and stores (no casts of file bytes to structs) ------------------- */
static inline uint16_t qp_load_u16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t qp_load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t qp_load_u64le(const uint8_t *p) {
    return (uint64_t)qp_load_u32le(p) | ((uint64_t)qp_load_u32le(p + 4) << 32);
}
static inline float qp_load_f32le(const uint8_t *p) {
    uint32_t u = qp_load_u32le(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline double qp_load_f64le(const uint8_t *p) {
    uint64_t u = qp_load_u64le(p);
    double d;
    memcpy(&d, &u, 8);
    return d;
}
static inline void qp_store_u16le(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void qp_store_u32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void qp_store_u64le(uint8_t *p, uint64_t v) {
    qp_store_u32le(p, (uint32_t)v);
    qp_store_u32le(p + 4, (uint32_t)(v >> 32));
}
static inline void qp_store_f32le(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    qp_store_u32le(p, u);
}

/* ---- bounded cursor over untrusted bytes --------------------------------------------------- */
/* Every read checks the bytes remaining; on failure nothing is consumed and false is returned.
 * `pos` is the absolute offset within `base`, for error messages. */
typedef struct qp_cursor {
    const uint8_t *base;
    size_t size;
    size_t pos;
} qp_cursor;

static inline void qp_cursor_init(qp_cursor *c, const void *base, size_t size, size_t pos) {
    c->base = (const uint8_t *)base;
    c->size = size;
    c->pos = pos <= size ? pos : size;
}
static inline size_t qp_cursor_left(const qp_cursor *c) { return c->size - c->pos; }
static inline bool qp_cursor_take(qp_cursor *c, size_t n, const uint8_t **out) {
    if (n > c->size - c->pos) return false;
    *out = c->base + c->pos;
    c->pos += n;
    return true;
}
static inline bool qp_cursor_skip(qp_cursor *c, size_t n) {
    const uint8_t *p;
    return qp_cursor_take(c, n, &p);
}
#define QP_CURSOR_READER(NAME, T, N, LOAD)                                                       \
    static inline bool qp_cursor_##NAME(qp_cursor *c, T *out) {                                  \
        const uint8_t *p;                                                                        \
        if (!qp_cursor_take(c, N, &p)) return false;                                             \
        *out = (T)LOAD(p);                                                                       \
        return true;                                                                             \
    }
#define QP_LOAD_U8(p) (p)[0]
QP_CURSOR_READER(u8, uint8_t, 1, QP_LOAD_U8)
QP_CURSOR_READER(u16, uint16_t, 2, qp_load_u16le)
QP_CURSOR_READER(u32, uint32_t, 4, qp_load_u32le)
QP_CURSOR_READER(u64, uint64_t, 8, qp_load_u64le)
QP_CURSOR_READER(i32, int32_t, 4, qp_load_u32le)
QP_CURSOR_READER(i64, int64_t, 8, qp_load_u64le)
QP_CURSOR_READER(f32, float, 4, qp_load_f32le)
QP_CURSOR_READER(f64, double, 8, qp_load_f64le)
#undef QP_LOAD_U8

/* ---- read-only file mappings (64-bit sizes; files over 4 GiB are fine) --------------------- */
typedef struct qp_mapped_file {
    const uint8_t *data; /* NULL when size == 0 */
    size_t size;
    char *path;          /* owned copy, for messages */
} qp_mapped_file;

/* Every file is opened O_NONBLOCK and checked with fstat before a byte is read: anything but a
 * regular file (a FIFO, a device, a socket, a directory) is refused with QP_ERR_IO and never
 * blocks. QP_FILE_NOFOLLOW also refuses a symbolic link as the last path component (files inside
 * a package folder: RDRR, TRLM); without it a link to a regular file is followed (a Hugging Face
 * cache folder links every file to a blob). */
enum {
    QP_FILE_NOFOLLOW = 1u << 0,
    QP_FILE_ABSENT_OK = 1u << 1, /* qp_path_check_regular: a path that does not exist is QP_OK */
};
/* Opens path for reading under the rules above; *fd (O_CLOEXEC, blocking again) and *size on
 * success. */
QP_API QP_NODISCARD qp_status qp_file_open_regular(const char *path, unsigned flags, int *fd, uint64_t *size,
                                            qp_err *e);
QP_API QP_NODISCARD qp_status qp_file_map(const char *path, qp_mapped_file *out, qp_err *e);
QP_API QP_NODISCARD qp_status qp_file_map_flags(const char *path, unsigned flags, qp_mapped_file *out, qp_err *e);
QP_API void qp_file_unmap(qp_mapped_file *f); /* idempotent; a zeroed struct is fine */
/* Reads a whole (small) file into a NUL-terminated heap buffer; fails past max_size. */
QP_API QP_NODISCARD qp_status qp_file_read_all(const char *path, size_t max_size, char **out, size_t *out_len,
                                        qp_err *e);
QP_API QP_NODISCARD qp_status qp_file_read_all_flags(const char *path, unsigned flags, size_t max_size, char **out,
                                              size_t *out_len, qp_err *e);
/* Reads up to cap bytes from the start of a regular file (format detection): *got and the file's
 * *size. */
QP_API QP_NODISCARD qp_status qp_file_read_head(const char *path, void *buf, size_t cap, size_t *got, uint64_t *size,
                                         qp_err *e);
/* QP_OK when path is a regular file (with QP_FILE_NOFOLLOW: and not a symbolic link); otherwise
 * QP_ERR_IO naming what it is. Opens nothing. */
QP_API QP_NODISCARD qp_status qp_path_check_regular(const char *path, unsigned flags, qp_err *e);
QP_API bool qp_path_is_dir(const char *path);
QP_API bool qp_path_exists(const char *path);
/* Joins dir + "/" + name into a new heap string. */
QP_API char *qp_path_join(const char *dir, const char *name);

/* ---- arena: many small allocations freed at once ------------------------------------------- */
typedef struct qp_arena_chunk qp_arena_chunk;
typedef struct qp_arena {
    qp_arena_chunk *head;
} qp_arena;

QP_API void *qp_arena_alloc(qp_arena *a, size_t n); /* 16-byte aligned, zeroed; NULL on failure */
QP_API char *qp_arena_strndup(qp_arena *a, const char *s, size_t n);
QP_API char *qp_arena_strdup(qp_arena *a, const char *s);
QP_API void qp_arena_free(qp_arena *a);

/* ---- half precision: exact conversions -------------------------------------------------------
 * F16 -> F32 and BF16 -> F32 are exact. F32 -> F16 rounds to nearest even, keeps subnormals,
 * maps NaN to 0x7E00 (as ggml). F32 -> BF16 rounds as ggml: (u + 0x7fff + ((u>>16)&1)) >> 16,
 * NaN -> quiet NaN. */
QP_API float qp_fp16_to_fp32(uint16_t h);
QP_API uint16_t qp_fp32_to_fp16(float f);
QP_API float qp_bf16_to_fp32(uint16_t h);
QP_API uint16_t qp_fp32_to_bf16(float f);
/* The double with the fewest significant digits (6..9) that rounds back to f: 1e-5f -> 1e-05,
 * so JSON and text show what was meant, not 9.99999974737875e-06. */
QP_API double qp_f32_short_double(float f);

/* ---- atomic output files (core/outfile.c) ---------------------------------------------------
 * Every output is written to ".<name>.quantpack-partial.<pid>.<n>" in the directory of <path>
 * and renamed onto <path> only by a successful commit: no partial file ever appears under the
 * final name, and a failed or aborted output leaves nothing behind. Writes are buffered; the
 * first error is kept and returned again by every later call and by commit. Not shared between
 * threads. Every partial output of the process is listed until it is committed or aborted, so
 * qp_outputs_remove_partials can remove them (a signal handler thread does; core/outfile.md). */
typedef struct qp_outfile qp_outfile;

QP_API QP_NODISCARD qp_status qp_outfile_open(const char *path, qp_outfile **out, qp_err *e);
QP_API QP_NODISCARD qp_status qp_outfile_write(qp_outfile *f, const void *data, size_t n, qp_err *e);
/* Writes zero bytes up to the next multiple of alignment (any value >= 1). */
QP_API QP_NODISCARD qp_status qp_outfile_pad(qp_outfile *f, size_t alignment, qp_err *e);
QP_API uint64_t qp_outfile_tell(const qp_outfile *f); /* bytes written so far */
QP_API const char *qp_outfile_path(const qp_outfile *f); /* final path; borrowed */
/* Flushes, fsyncs and renames onto the final path. Always frees f: on any error (now or
 * earlier) the temporary file is removed and the error returned. */
QP_API QP_NODISCARD qp_status qp_outfile_commit(qp_outfile *f, qp_err *e);
QP_API void qp_outfile_abort(qp_outfile *f); /* removes the temporary file and frees f; NULL is fine */
/* One-shot: writes n bytes atomically to path. */
QP_API QP_NODISCARD qp_status qp_file_write_atomic(const char *path, const void *data, size_t n, qp_err *e);

/* Directory outputs (packages): files are written into the staging folder
 * ".<name>.quantpack-partial.<pid>.<n>" beside dir (use qp_outdir_path or qp_outdir_join), which
 * commit renames onto dir. An existing dir that is not empty is replaced only when `replace` is
 * true and it holds a previous package of the same kind (kind->marker is in it); then the files
 * of that package (names matching kind->patterns) are replaced and every other file or folder in
 * dir is kept (hard-linked or moved into the new package before the swap, so dir is a whole
 * package at every moment). kind NULL: a non-empty dir is never replaced. Abort (and a failed
 * commit) removes the staging folder and everything in it. */
typedef struct qp_outdir_kind {
    const char *name;            /* "RDRR package", for messages */
    const char *marker;          /* a file every package of this kind has ("manifest.json") */
    const char *const *patterns; /* NULL-terminated fnmatch(3) patterns of the files it writes */
} qp_outdir_kind;
typedef struct qp_outdir qp_outdir;

QP_API QP_NODISCARD qp_status qp_outdir_open(const char *dir, const qp_outdir_kind *kind, bool replace,
                                      qp_outdir **out, qp_err *e);
QP_API const char *qp_outdir_path(const qp_outdir *d); /* the staging folder; borrowed */
QP_API char *qp_outdir_join(const qp_outdir *d, const char *name); /* heap string; NULL on OOM */
QP_API QP_NODISCARD qp_status qp_outdir_commit(qp_outdir *d, qp_err *e); /* always frees d */
QP_API void qp_outdir_abort(qp_outdir *d);                               /* NULL is fine */

/* ---- the output rule of every command (zstd's): core/outfile.md ----------------------------
 * Before anything is written: an output that resolves to an input (same device and inode,
 * through links; for a folder output, an input inside it) is refused even with force; an
 * existing output is replaced only with force; only regular files (file outputs) or folders
 * holding a previous package of the same kind (folder outputs, see qp_outdir_kind) are
 * replaced, never a device, FIFO or other file. QP_ERR_IO with a message naming the path. */
typedef struct qp_output_rule {
    bool force;                 /* -f/--force */
    bool directory;             /* the output is a folder */
    const qp_outdir_kind *kind; /* folder outputs: the package kind that may be replaced */
    const char *const *inputs;  /* NULL-terminated paths the command reads; NULL: none */
} qp_output_rule;
QP_API QP_NODISCARD qp_status qp_output_check(const char *path, const qp_output_rule *rule, qp_err *e);
/* The name a partial output of path takes: ".<name>.quantpack-partial.<pid>.<n>" beside it, n
 * unique in the process (heap string; NULL on OOM). For writers that create their own file (keys:
 * link(2) instead of rename). */
QP_API char *qp_output_partial_name(const char *path);
/* Removes the partial outputs of path left by runs that were killed (their process is gone):
 * ".<name>.quantpack-partial.<pid>.*" beside path. *removed (optional) counts them. */
QP_API QP_NODISCARD qp_status qp_output_remove_stale(const char *path, int *removed, qp_err *e);
/* Removes every partial output this process has open (files and staging folders). Safe to call
 * from any thread, at any time; outputs committed or aborted since are not touched. */
QP_API void qp_outputs_remove_partials(void);
/* Removes a file or a whole directory tree (symlinks are removed, never followed). */
QP_API QP_NODISCARD qp_status qp_path_remove_tree(const char *path, qp_err *e);

#ifdef __cplusplus
}
#endif
#endif
