/* Encoding is O(n log n): 1 MB inputs that make one huge merge sequence (a single SentencePiece
 * fragment, one 1 MB byte-level BPE "word" of spaces, 1 MB of '<' against special tokens) finish in
 * seconds. A quadratic encoder needs ~10^12 steps here and would time out. */
#include <string.h>
#include <time.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

#define MB (1u << 20)
#define LIMIT_SECONDS 20.0 /* generous for sanitizer builds on a loaded machine */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define MAXT 4000
static char *tok[MAXT];
static uint32_t lens[MAXT];
static float scores[MAXT];
static int32_t types[MAXT];
static char store[MAXT][24];
static char *merges[8];

static int32_t add(qp_vocab *v, const char *s, float score, int32_t type) {
    int32_t id = (int32_t)v->n_tokens++;
    snprintf(store[id], sizeof store[id], "%s", s);
    tok[id] = store[id];
    lens[id] = (uint32_t)strlen(s);
    scores[id] = score;
    types[id] = type;
    return id;
}

static void time_encode(const char *what, const qp_vocab *v, const char *text, size_t len,
                        bool special, int64_t min_ids, int64_t max_ids) {
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_tokenizer_new(v, &t, &e) == QP_OK, "%s", e.msg);
    if (!t) return;
    double t0 = now();
    int32_t *ids = NULL;
    int64_t n = 0;
    qp_status s = qp_tokenizer_encode(t, text, len, false, special, &ids, &n, &e);
    double dt = now() - t0;
    QP_CHECK_MSG(s == QP_OK, "%s: %s", what, e.msg);
    QP_CHECK_MSG(n >= min_ids && n <= max_ids, "%s: %lld ids", what, (long long)n);
    QP_CHECK_MSG(dt < LIMIT_SECONDS, "%s took %.1f s", what, dt);
    printf("%-40s %zu bytes -> %lld ids in %.3f s\n", what, len, (long long)n, dt);
    qp_free(ids);
    qp_tokenizer_free(t);
}

int main(void) {
    char *text = malloc(MB + 1);
    if (!text) return 1;
    qp_vocab v = {.tokens = tok, .token_lens = lens, .scores = scores, .types = types,
                  .bos_id = -1, .eos_id = -1, .unk_id = -1, .pad_id = -1};

    /* SentencePiece: pieces a, aa, aaaa, ... 512 a's (longer is better: merges cascade) */
    v.model = QP_TOK_SPM;
    add(&v, "\xE2\x96\x81", -1, QP_TOKTYPE_NORMAL);
    add(&v, "a", -1, QP_TOKTYPE_NORMAL);
    char piece[24];
    for (int k = 2; k <= 16; k *= 2) {
        memset(piece, 'a', (size_t)k);
        piece[k] = '\0';
        add(&v, piece, (float)k, QP_TOKTYPE_NORMAL);
    }
    add(&v, "<s>", 0, QP_TOKTYPE_CONTROL);
    v.unk_id = add(&v, "<unk>", 0, QP_TOKTYPE_UNKNOWN); /* no byte pieces: unknown chars -> unk */
    memset(text, 'a', MB);
    time_encode("spm: 1 MB of 'a'", &v, text, MB, false, MB / 16, MB / 16 + 2);
    for (size_t i = 0; i < MB; i++) text[i] = "a a<s>aa"[i % 8];
    time_encode("spm: 1 MB of 'a a<s>aa' with specials", &v, text, MB, true, MB / 8, MB);
    memset(text, '<', MB);
    time_encode("spm: 1 MB of '<' with specials", &v, text, MB, true, MB + 1, MB + 1);
    for (size_t i = 0; i < MB; i++) text[i] = (char)(0x80 | (i & 0x3F)); /* all invalid */
    time_encode("spm: 1 MB of invalid UTF-8", &v, text, MB, false, MB + 1, MB + 1);
    /* thousands of user-defined "<uN>" tokens (as Gemma's <unusedN>) against text full of '<' */
    int64_t before = v.n_tokens;
    for (int k = 0; k < 3000; k++) {
        char u[16];
        snprintf(u, sizeof u, "<u%d>", k);
        add(&v, u, 0, QP_TOKTYPE_USER_DEFINED);
    }
    for (size_t i = 0; i < MB; i++) text[i] = "<u1"[i % 3];
    time_encode("spm: 1 MB of '<u1' vs 3000 user tokens", &v, text, MB, false, MB / 3, MB + 1);
    for (size_t i = 0; i < MB; i++) text[i] = "<u12>"[i % 5];
    time_encode("spm: 1 MB of '<u12>' vs 3000 user tokens", &v, text, MB, false, MB / 5, MB / 5 + 3);
    v.n_tokens = before;

    /* byte-level BPE: every byte a token, merges build runs of spaces */
    memset(&v, 0, sizeof v);
    v.tokens = tok;
    v.token_lens = lens;
    v.types = types;
    v.bos_id = v.eos_id = v.unk_id = v.pad_id = -1;
    v.model = QP_TOK_BPE;
    snprintf(v.pre, sizeof v.pre, "gpt-2");
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) ? (uint32_t)b : next++;
        char s[4] = {0};
        if (cp < 0x80) s[0] = (char)cp;
        else { s[0] = (char)(0xC0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3F)); }
        add(&v, s, 0, QP_TOKTYPE_NORMAL);
    }
    /* space is U+0120 "Ġ" = C4 A0 */
    static char m[4][40];
    const char *g = "\xC4\xA0";
    snprintf(m[0], sizeof m[0], "%s %s", g, g);
    snprintf(m[1], sizeof m[1], "%s%s %s%s", g, g, g, g);
    snprintf(m[2], sizeof m[2], "%s%s%s%s %s%s%s%s", g, g, g, g, g, g, g, g);
    snprintf(m[3], sizeof m[3], "a a");
    for (int k = 0; k < 4; k++) merges[k] = m[k];
    v.merges = merges;
    v.n_merges = 4;
    char gg[40];
    snprintf(gg, sizeof gg, "%s%s", g, g);
    add(&v, gg, 0, QP_TOKTYPE_NORMAL);
    snprintf(gg, sizeof gg, "%s%s%s%s", g, g, g, g);
    add(&v, gg, 0, QP_TOKTYPE_NORMAL);
    snprintf(gg, sizeof gg, "%s%s%s%s%s%s%s%s", g, g, g, g, g, g, g, g);
    add(&v, gg, 0, QP_TOKTYPE_NORMAL);
    add(&v, "aa", 0, QP_TOKTYPE_NORMAL);
    memset(text, ' ', MB);
    time_encode("bpe: 1 MB of spaces (one word)", &v, text, MB, false, MB / 8, MB / 8 + 8);
    memset(text, 'a', MB);
    time_encode("bpe: 1 MB of 'a' (one word)", &v, text, MB, false, MB / 2, MB / 2 + 1);
    for (size_t i = 0; i < MB; i++) text[i] = "hello world, 123 \xC3\xA9t\xC3\xA9!\n"[i % 22];
    time_encode("bpe: 1 MB of mixed text", &v, text, MB, false, MB / 4, MB);
    snprintf(v.pre, sizeof v.pre, "llama-bpe");
    time_encode("bpe llama-bpe: 1 MB of mixed text", &v, text, MB, false, MB / 4, MB);
    snprintf(v.pre, sizeof v.pre, "deepseek-coder");
    time_encode("bpe deepseek-coder: 1 MB of mixed text", &v, text, MB, false, MB / 4, MB);
    free(text);
    return qp_test_finish();
}
