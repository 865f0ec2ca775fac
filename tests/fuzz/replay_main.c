/* Replays every file of a corpus folder through a fuzz target's LLVMFuzzerTestOneInput, so the
 * saved corpus runs as an ordinary test (under ASan/UBSan in the sanitizer build). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return -1; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return -1; }
    rewind(f);
    uint8_t *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return -1; }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) { fprintf(stderr, "%s: missing\n", argv[i]); failed++; continue; }
        if (!S_ISDIR(st.st_mode)) { failed += replay_file(argv[i]) != 0; files++; continue; }
        DIR *d = opendir(argv[i]);
        if (!d) { failed++; continue; }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], de->d_name);
            failed += replay_file(path) != 0;
            files++;
        }
        closedir(d);
    }
    printf("%d passed, %d failed\n", files - failed, failed);
    return failed || files == 0 ? 1 : 0;
}
