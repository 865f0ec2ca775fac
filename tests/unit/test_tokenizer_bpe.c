/* Byte-level BPE on small in-memory vocabularies: merge-rank order, the pre-tokenizer word
 * boundaries of the GPT-2, Llama 3, Qwen2 and DeepSeek-Coder patterns (a merge across a word
 * boundary must never happen), added tokens, decoding back to the exact bytes. Expected ids follow
 * from the definitions (GPT-2 bytes_to_unicode, the regexes in tokenizer.md) applied by hand. */
#include <string.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

#define MAXT 300
typedef struct test_vocab {
    qp_vocab v;
    char *tok[MAXT];
    uint32_t len[MAXT];
    int32_t ty[MAXT];
    char store[MAXT][40];
    char *merge[16];
    char merge_store[16][40];
} test_vocab;

static uint32_t byte_cp[256];

static size_t enc_utf8(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static int32_t add(test_vocab *t, const char *s, int32_t type) {
    int32_t id = (int32_t)t->v.n_tokens++;
    snprintf(t->store[id], sizeof t->store[id], "%s", s);
    t->tok[id] = t->store[id];
    t->len[id] = (uint32_t)strlen(s);
    t->ty[id] = type;
    return id;
}

/* the byte-level text of raw bytes s */
static void mapped(const char *s, char *out) {
    size_t k = 0;
    for (; *s; s++) k += enc_utf8(byte_cp[(uint8_t)*s], out + k);
    out[k] = '\0';
}

/* adds the merge "L R" (raw bytes, mapped here) and the token L+R; returns its id */
static int32_t merge(test_vocab *t, const char *l, const char *r) {
    char ml[16], mr[16], both[32];
    mapped(l, ml);
    mapped(r, mr);
    snprintf(t->merge_store[t->v.n_merges], sizeof t->merge_store[0], "%s %s", ml, mr);
    t->merge[t->v.n_merges] = t->merge_store[t->v.n_merges];
    t->v.n_merges++;
    snprintf(both, sizeof both, "%s%s", ml, mr);
    return add(t, both, QP_TOKTYPE_NORMAL);
}

/* ids 0..255: byte b is token b */
static void init_vocab(test_vocab *t, const char *pre) {
    memset(t, 0, sizeof *t);
    t->v.model = QP_TOK_BPE;
    snprintf(t->v.pre, sizeof t->v.pre, "%s", pre);
    t->v.tokens = t->tok;
    t->v.token_lens = t->len;
    t->v.types = t->ty;
    t->v.merges = t->merge;
    t->v.bos_id = t->v.eos_id = t->v.unk_id = t->v.pad_id = -1;
    for (int b = 0; b < 256; b++) {
        char s[4];
        s[enc_utf8(byte_cp[b], s)] = '\0';
        add(t, s, QP_TOKTYPE_NORMAL);
    }
}

static bool encode_is(const qp_tokenizer *tk, const char *text, bool special, const int32_t *want,
                      int64_t n_want) {
    int32_t *ids = NULL;
    int64_t n = -1;
    qp_err e = {0};
    if (qp_tokenizer_encode(tk, text, strlen(text), false, special, &ids, &n, &e) != QP_OK) {
        fprintf(stderr, "encode failed: %s\n", e.msg);
        return false;
    }
    bool same = n == n_want && (n == 0 || memcmp(ids, want, (size_t)n * sizeof *ids) == 0);
    if (!same) {
        fprintf(stderr, "encode '%s': got", text);
        for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    qp_free(ids);
    return same;
}
#define ENC(tk, s, sp, ...)                                                                      \
    do {                                                                                         \
        const int32_t w_[] = {__VA_ARGS__};                                                      \
        QP_CHECK_MSG(encode_is(tk, s, sp, w_, (int64_t)(sizeof w_ / sizeof w_[0])), "'%s'", s);  \
    } while (0)
#define B(c) ((int32_t)(uint8_t)(c))

static qp_tokenizer *make(test_vocab *t) {
    qp_tokenizer *tk = NULL;
    qp_err e = {0};
    qp_status s = qp_tokenizer_new(&t->v, &tk, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    return tk;
}

int main(void) {
    /* GPT-2 bytes_to_unicode, from its definition */
    uint32_t next = 256;
    for (int b = 0; b < 256; b++)
        byte_cp[b] = ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174)) ? (uint32_t)b : next++;

    static test_vocab tv;
    qp_tokenizer *tk;

    /* rank order and ties */
    init_vocab(&tv, "gpt-2");
    int32_t ab = merge(&tv, "a", "b"), bc = merge(&tv, "b", "c");
    tk = make(&tv);
    ENC(tk, "abc", false, ab, B('c'));
    ENC(tk, "abab", false, ab, ab);
    qp_tokenizer_free(tk);
    init_vocab(&tv, "gpt-2");
    bc = merge(&tv, "b", "c");
    ab = merge(&tv, "a", "b");
    tk = make(&tv);
    ENC(tk, "abc", false, B('a'), bc);
    qp_tokenizer_free(tk);

    /* GPT-2 words: "Hello", " world"; "o " can never merge */
    init_vocab(&tv, "gpt-2");
    merge(&tv, "o", " ");
    int32_t sw = merge(&tv, " ", "w");
    int32_t ss = merge(&tv, " ", " ");
    int32_t sh = merge(&tv, " ", "H");
    merge(&tv, "t", "'");
    int32_t qS = merge(&tv, "'", "S");
    int32_t qs = merge(&tv, "'", "s");
    int32_t n34 = merge(&tv, "3", "4");
    tk = make(&tv);
    ENC(tk, "Hello world", false, B('H'), B('e'), B('l'), B('l'), B('o'), sw, B('o'), B('r'), B('l'), B('d'));
    /* a space run before a word leaves its last space to the word */
    ENC(tk, "  Hello", false, B(' '), sh, B('e'), B('l'), B('l'), B('o'));
    ENC(tk, "   ", false, ss, B(' '));                 /* a run at the end stays whole */
    ENC(tk, "it's", false, B('i'), B('t'), qs);        /* 's is its own word */
    ENC(tk, "it'S", false, B('i'), B('t'), B('\''), B('S')); /* case-sensitive: "'", "S" */
    ENC(tk, "t'", false, B('t'), B('\'')); /* the merge "t '" crosses a word boundary */
    ENC(tk, "12345", false, B('1'), B('2'), n34, B('5'));
    qp_tokenizer_free(tk);

    /* Llama 3: case-insensitive contractions, digits in threes */
    snprintf(tv.v.pre, sizeof tv.v.pre, "llama-bpe");
    tk = make(&tv);
    ENC(tk, "it'S", false, B('i'), B('t'), qS);
    ENC(tk, "12345", false, B('1'), B('2'), B('3'), B('4'), B('5'));
    ENC(tk, "a\n\nb", false, B('a'), B('\n'), B('\n'), B('b'));
    qp_tokenizer_free(tk);
    /* Qwen2: single digits */
    snprintf(tv.v.pre, sizeof tv.v.pre, "qwen2");
    tk = make(&tv);
    ENC(tk, "34", false, B('3'), B('4'));
    qp_tokenizer_free(tk);
    /* GPT-2 again for contrast: "34" is one word */
    snprintf(tv.v.pre, sizeof tv.v.pre, "gpt-2");
    tk = make(&tv);
    ENC(tk, "34", false, n34);
    qp_tokenizer_free(tk);

    /* DeepSeek-Coder: newlines isolated; letters with one leading space; single digits */
    init_vocab(&tv, "deepseek-coder");
    merge(&tv, "b", "\n");
    int32_t s_c = merge(&tv, " ", "c");
    merge(&tv, "1", "2");
    tk = make(&tv);
    ENC(tk, "ab\n cd", false, B('a'), B('b'), B('\n'), s_c, B('d'));
    ENC(tk, "12", false, B('1'), B('2'));
    qp_tokenizer_free(tk);

    /* StarCoder family: every \p{N} is a word of its own before the GPT-2 pattern, so " \u00BD"
     * (a No) is " " and "\u00BD" (llama.cpp LLAMA_VOCAB_PRE_TYPE_STARCODER); GPT-2 keeps " \u00BD" */
    init_vocab(&tv, "starcoder");
    int32_t half = merge(&tv, "\xC2", "\xBD");
    int32_t sp_half = merge(&tv, " ", "\xC2\xBD");
    int32_t d12 = merge(&tv, "1", "2");
    tk = make(&tv);
    ENC(tk, " \xC2\xBD", false, B(' '), half);
    ENC(tk, "a12", false, B('a'), B('1'), B('2'));
    qp_tokenizer_free(tk);
    snprintf(tv.v.pre, sizeof tv.v.pre, "gpt-2");
    tk = make(&tv);
    ENC(tk, " \xC2\xBD", false, sp_half);
    ENC(tk, "a12", false, B('a'), d12);
    qp_tokenizer_free(tk);

    /* DeepSeek-LLM: \p{N}+ runs stay whole, a trailing space run is its own word */
    init_vocab(&tv, "deepseek-llm");
    d12 = merge(&tv, "1", "2");
    tk = make(&tv);
    ENC(tk, "12", false, d12);
    qp_tokenizer_free(tk);

    /* unknown pre-tokenizer */
    init_vocab(&tv, "no-such-pre");
    qp_err e = {0};
    QP_CHECK(qp_tokenizer_new(&tv.v, &tk, &e) == QP_ERR_UNSUPPORTED);

    /* added tokens: USER_DEFINED always split out, CONTROL only with parse_special */
    init_vocab(&tv, "gpt-2");
    int32_t ud = add(&tv, "<|u|>", QP_TOKTYPE_USER_DEFINED);
    int32_t ctl = add(&tv, "<|c|>", QP_TOKTYPE_CONTROL);
    int32_t ctl_long = add(&tv, "<|c|>x", QP_TOKTYPE_CONTROL);
    tv.v.bos_id = ctl;
    tk = make(&tv);
    ENC(tk, "a<|u|>b", false, B('a'), ud, B('b'));
    ENC(tk, "<|c|>", false, B('<'), B('|'), B('c'), B('|'), B('>'));
    ENC(tk, "<|c|>y", true, ctl, B('y'));
    ENC(tk, "<|c|>x", true, ctl_long); /* longest first */
    /* decoding gives the exact bytes back; control tokens give nothing */
    const char *text = "h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\xA6\x99\t\n\x01 \x7F";
    int32_t *ids = NULL;
    int64_t n = 0;
    QP_CHECK(qp_tokenizer_encode(tk, text, strlen(text), true, false, &ids, &n, &e) == QP_OK);
    char out[128];
    size_t len = 0;
    for (int64_t i = 0; i < n && len < 100; i++) {
        size_t k = 0;
        QP_CHECK(qp_tokenizer_decode_piece(tk, i ? ids[i - 1] : -1, ids[i], out + len, sizeof out - len, &k,
                                           NULL) == QP_OK);
        len += k;
    }
    QP_CHECK(ids && ids[0] == ctl);
    QP_CHECK(len == strlen(text) && memcmp(out, text, len) == 0);
    qp_free(ids);
    char one[8];
    size_t k1 = 0, k2 = 0;
    QP_CHECK(qp_tokenizer_decode_piece(tk, -1, ud, one, sizeof one, &k1, NULL) == QP_OK && k1 == 5);
    QP_CHECK(qp_tokenizer_decode_piece(tk, -1, B(' '), one, sizeof one, &k2, NULL) == QP_OK && k2 == 1);
    QP_CHECK(one[0] == ' ');
    qp_tokenizer_free(tk);
    return qp_test_finish();
}
