/* What a non-regular file is, for messages ("a FIFO", "a character device", ...). Internal to
 * core/ (core/file.c, core/outfile.c). */
#ifndef QP_CORE_FILE_MODE_H
#define QP_CORE_FILE_MODE_H

#include <sys/stat.h>

static inline const char *qp_file_mode_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

#endif
