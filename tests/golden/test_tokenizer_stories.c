/* llama2.c oracles for stories260K with its tok512.bin tokenizer (opened through the checkpoint
 * with qp_open_opts.tokenizer_path, as `--tokenizer` does):
 *  - encode: the prompt of oracles/stories260K_prompt_ids.txt with BOS gives its PROMPT_IDS;
 *  - decode: the 256 greedy ids of oracles/stories260K_greedy_bos_256.ids.txt, printed piece by
 *    piece as run.c does (decode(prev, id), single non-printable bytes skipped by safe_printf,
 *    and run.c's final "\n"), reproduce oracles/stories260K_greedy_bos_256.txt byte for byte. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

/* Parses the integers after `key` up to the end of that line. */
static int parse_ids(const char *text, const char *key, int32_t *ids, int cap) {
    const char *p = strstr(text, key);
    if (!p) return -1;
    p += strlen(key);
    int n = 0;
    while (*p && *p != '\n' && n < cap) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

int main(void) {
    const char *dir = qp_test_real_dir();
    char model_path[1024], tok_path[1024], prompt_path[1024], ids_path[1024], txt_path[1024];
    qp_test_path(model_path, sizeof model_path, dir, "stories260K.bin");
    qp_test_path(tok_path, sizeof tok_path, dir, "tok512.bin");
    qp_test_path(prompt_path, sizeof prompt_path, dir, "oracles/stories260K_prompt_ids.txt");
    qp_test_path(ids_path, sizeof ids_path, dir, "oracles/stories260K_greedy_bos_256.ids.txt");
    qp_test_path(txt_path, sizeof txt_path, dir, "oracles/stories260K_greedy_bos_256.txt");
    if (!qp_path_exists(model_path) || !qp_path_exists(tok_path) || !qp_path_exists(prompt_path))
        QP_SKIP("stories260K fixtures not found in %s", dir);

    qp_err e = {0};
    qp_open_opts opts = {.tokenizer_path = tok_path};
    qp_model *m = NULL;
    qp_status s = qp_model_open(model_path, &opts, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) return qp_test_finish();
    qp_tokenizer *t = NULL;
    s = qp_tokenizer_new(&m->vocab, &t, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) return qp_test_finish();
    QP_CHECK_EQ_INT(qp_tokenizer_n_vocab(t), 512);

    /* encode */
    char *prompt_txt = NULL;
    size_t prompt_len = 0;
    s = qp_file_read_all(prompt_path, 1 << 16, &prompt_txt, &prompt_len, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    const char *q0 = s == QP_OK ? strchr(prompt_txt, '"') : NULL;
    const char *q1 = q0 ? strchr(q0 + 1, '"') : NULL;
    int32_t want[64];
    int n_want = s == QP_OK ? parse_ids(prompt_txt, "PROMPT_IDS:", want, 64) : -1;
    QP_CHECK_MSG(q0 && q1 && n_want > 0, "cannot parse %s", prompt_path);
    if (q0 && q1 && n_want > 0) {
        int32_t *ids = NULL;
        int64_t n = 0;
        s = qp_tokenizer_encode(t, q0 + 1, (size_t)(q1 - q0 - 1), true, false, &ids, &n, &e);
        QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
        bool same = s == QP_OK && n == n_want;
        for (int i = 0; same && i < n_want; i++) same = ids[i] == want[i];
        printf("encode \"%.*s\":", (int)(q1 - q0 - 1), q0 + 1);
        for (int64_t i = 0; i < n; i++) printf(" %d", ids[i]);
        printf(" (oracle %s)\n", same ? "matches" : "DIFFERS");
        QP_CHECK(same);
        qp_free(ids);
    }
    qp_free(prompt_txt);

    /* decode */
    char *ids_txt = NULL, *want_txt = NULL;
    size_t ids_len = 0, want_len = 0;
    s = qp_file_read_all(ids_path, 1 << 20, &ids_txt, &ids_len, &e);
    if (s == QP_OK) s = qp_file_read_all(txt_path, 1 << 20, &want_txt, &want_len, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s == QP_OK) {
        static int32_t ids[4096];
        int n = parse_ids(ids_txt, "IDS:", ids, 4096);
        /* "PROMPT_IDS:" also contains "IDS:"; take the line that starts with it */
        const char *line = strstr(ids_txt, "\nIDS:");
        if (line) n = parse_ids(line, "IDS:", ids, 4096);
        QP_CHECK_MSG(n > 1, "cannot parse %s", ids_path);
        char *got = malloc(1 << 20);
        size_t len = 0;
        for (int i = 1; got && i < n; i++) {
            char piece[512];
            size_t k = 0;
            bool ok = qp_tokenizer_decode_piece(t, ids[i - 1], ids[i], piece, sizeof piece, &k, NULL) == QP_OK &&
                      k <= sizeof piece;
            QP_CHECK_MSG(ok, "id %d", ids[i]);
            if (!ok) break;
            if (k == 1 && !isprint((unsigned char)piece[0]) && !isspace((unsigned char)piece[0]))
                continue; /* run.c's safe_printf */
            memcpy(got + len, piece, (size_t)k);
            len += (size_t)k;
        }
        if (got) got[len++] = '\n'; /* run.c prints a newline after generating */
        bool same = got && len == want_len && memcmp(got, want_txt, len) == 0;
        if (!same && got) {
            size_t i = 0;
            while (i < len && i < want_len && got[i] == want_txt[i]) i++;
            fprintf(stderr, "decode differs at byte %zu (got %zu bytes, want %zu)\n", i, len,
                    want_len);
        }
        printf("decode of %d greedy ids: %zu bytes, %s the oracle text\n", n - 1, len,
               same ? "equal to" : "DIFFERENT from");
        QP_CHECK(same);
        free(got);
    }
    qp_free(ids_txt);
    qp_free(want_txt);
    qp_tokenizer_free(t);
    qp_model_close(m);
    return qp_test_finish();
}
