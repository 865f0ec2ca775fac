/* Replays every file of a corpus folder through a fuzz target, so the saved corpus runs as an
 * ordinary test (under ASan/UBSan in the sanitizer build). It calls the target's qp_fuzz_one (the
 * code behind its LLVMFuzzerTestOneInput, fuzz_util.h), which returns the reader's status.
 *
 * Usage: replay_<reader> [-v] DIR|FILE...   (-v prints every seed's verdict and status)
 *
 * Every input must not crash. A seed whose file name states a verdict must also give it. The
 * name (extension included) is split into words at '_', '-' and '.':
 *   a word "valid"                the reader must accept the input (QP_OK);
 *   a word "bad" or "truncated"   the reader must refuse it with a status (anything but QP_OK);
 *   neither                       no verdict: it only must not crash (libFuzzer's hash-named
 *                                 finds, seeds kept for coverage of a path either way).
 * A name with words of both kinds is itself a failure. Examples: valid_f32_i8, m_valid.json,
 * bad_dup_key, t_bad_kind.bin, v0_truncated.bin. Which call's status is "the reader's" is stated
 * at each target's qp_fuzz_one (for instance fuzz_trlm: qp_trlm_apply_lora for a TRLA input).
 * A seed added to a corpus gets a verdict word whenever its author knows the verdict.
 *
 * Prints one line per seed whose verdict differs (status and message), then
 * "N passed, N failed (N valid, N bad checked)"; exits 1 when a seed failed or none was found. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "quantpack/status.h"

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e);

typedef enum verdict { VERDICT_NONE, VERDICT_VALID, VERDICT_BAD, VERDICT_BOTH } verdict;

static verdict name_verdict(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    bool valid = false, bad = false;
    for (const char *w = base; *w;) {
        const size_t n = strcspn(w, "_-.");
        if (n == 5 && strncmp(w, "valid", 5) == 0) valid = true;
        if ((n == 3 && strncmp(w, "bad", 3) == 0) || (n == 9 && strncmp(w, "truncated", 9) == 0))
            bad = true;
        w += n + (w[n] != '\0');
    }
    return valid && bad ? VERDICT_BOTH : valid ? VERDICT_VALID : bad ? VERDICT_BAD : VERDICT_NONE;
}

typedef struct tally {
    int files, failed, valid, bad;
    bool verbose;
} tally;

static void replay_file(const char *path, tally *t) {
    t->files++;
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    uint8_t *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) {
        fprintf(stderr, "%s: cannot read\n", path);
        t->failed++;
        if (f) fclose(f);
        return;
    }
    rewind(f);
    const size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    qp_err e = {0};
    const qp_status s = qp_fuzz_one(buf, got, &e);
    free(buf);
    const verdict v = name_verdict(path);
    static const char *const names[] = {"none", "valid", "bad", "valid and bad"};
    if (t->verbose) printf("%-5s %-13s %s%s%s\n", names[v], qp_status_name(s), path, e.msg[0] ? ": " : "", e.msg);
    if (v == VERDICT_BOTH) {
        fprintf(stderr, "%s: the name says both valid and bad\n", path);
        t->failed++;
    } else if (v == VERDICT_VALID && s != QP_OK) {
        fprintf(stderr, "%s: named valid but refused: %s: %s\n", path, qp_status_name(s), e.msg);
        t->failed++;
    } else if (v == VERDICT_BAD && s == QP_OK) {
        fprintf(stderr, "%s: named bad but accepted\n", path);
        t->failed++;
    }
    t->valid += v == VERDICT_VALID;
    t->bad += v == VERDICT_BAD;
}

int main(int argc, char **argv) {
    tally t = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) {
            t.verbose = true;
            continue;
        }
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: missing\n", argv[i]);
            t.files++, t.failed++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            replay_file(argv[i], &t);
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "%s: cannot open\n", argv[i]);
            t.files++, t.failed++;
            continue;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            replay_file(path, &t);
        }
        closedir(d);
    }
    printf("%d passed, %d failed (%d valid, %d bad checked)\n", t.files - t.failed, t.failed, t.valid,
           t.bad);
    return t.failed || t.files == 0 ? 1 : 0;
}
