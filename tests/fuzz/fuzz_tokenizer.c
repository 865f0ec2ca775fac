/* Fuzz target: the tokenizers on arbitrary text. Byte 0 selects options (bit 0 parse_special,
 * bit 1 add_bos, bits 2-5 the byte-level pre-tokenizer family, bit 6 the unigram dummy prefix,
 * bit 7 unigram remove_extra_whitespaces; bits 2-5 mod 5 also the unigram vocabulary's Unicode
 * normalizer: none, NFC, NFD, NFKC, NFKD); the rest is the text, encoded with a small in-memory
 * vocabulary of each kind (SentencePiece, byte-level BPE, WordPiece, unigram with a small valid
 * precompiled_charsmap) and decoded again, and once more by the unigram vocabulary whose charsmap
 * is the text's first 2048 bytes (any blob: qp_tokenizer_new / encode may say CORRUPT, nothing else).
 * Checked: encode succeeds, every id is in range, every piece decodes, and for well-formed UTF-8
 * (without special-token parsing) SentencePiece and byte-level BPE give back the exact text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"
#include "runtime/unicode.h"

#define MAXT 400
typedef struct fvocab {
    qp_vocab v;
    char *tok[MAXT];
    uint32_t len[MAXT];
    float sc[MAXT];
    int32_t ty[MAXT];
    char store[MAXT][24];
    char *merge[32];
    char merge_store[32][24];
} fvocab;

static int32_t add(fvocab *f, const char *s, float score, int32_t type) {
    int32_t id = (int32_t)f->v.n_tokens++;
    snprintf(f->store[id], sizeof f->store[id], "%s", s);
    f->tok[id] = f->store[id];
    f->len[id] = (uint32_t)strlen(s);
    f->sc[id] = score;
    f->ty[id] = type;
    return id;
}

static void base(fvocab *f, qp_tok_model model) {
    memset(f, 0, sizeof *f);
    f->v.model = model;
    f->v.tokens = f->tok;
    f->v.token_lens = f->len;
    f->v.scores = f->sc;
    f->v.types = f->ty;
    f->v.merges = f->merge;
    f->v.bos_id = f->v.eos_id = f->v.unk_id = f->v.pad_id = -1;
}

static fvocab g_spm, g_bpe, g_wpm, g_ugm;
static uint8_t g_charsmap[4 + 768 * 4 + 5];

static void build(void) {
    /* SentencePiece: <unk> <s> </s>, byte pieces, U+2581, letters and a few merges */
    base(&g_spm, QP_TOK_SPM);
    g_spm.v.unk_id = add(&g_spm, "<unk>", 0, QP_TOKTYPE_UNKNOWN);
    g_spm.v.bos_id = add(&g_spm, "<s>", 0, QP_TOKTYPE_CONTROL);
    g_spm.v.eos_id = add(&g_spm, "</s>", 0, QP_TOKTYPE_CONTROL);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(&g_spm, s, 0, QP_TOKTYPE_BYTE);
    }
    static const char *const pieces[] = {
        "\xE2\x96\x81", "a", "e", "h", "i", "n", "o", "s", "t", "th", "he", "in", "\xE2\x96\x81t",
        "\xE2\x96\x81th", "\xE2\x96\x81the", "\xC3\xA9", "\xE2\x96\x81\xE2\x96\x81", "on", "\xE4\xB8\xAD"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        add(&g_spm, pieces[i], -(float)i, QP_TOKTYPE_NORMAL);

    /* byte-level BPE: the 256 byte characters, merges, an end-of-text token and a user token */
    base(&g_bpe, QP_TOK_BPE);
    g_bpe.v.scores = NULL;
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) ? (uint32_t)b : next++;
        char s[5] = {0};
        qp_utf8_encode(cp, s);
        add(&g_bpe, s, 0, QP_TOKTYPE_NORMAL);
    }
    static const char *const merges[][2] = {
        {"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}, {"i", "n"}, {"\xC4\xA0", "\xC4\xA0"},
        {"1", "2"}, {"12", "3"}, {"'", "s"}, {"\xC4\x8A", "\xC4\x8A"}, {"\xC3", "\xA9"}};
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        snprintf(g_bpe.merge_store[i], sizeof g_bpe.merge_store[i], "%s %s", merges[i][0], merges[i][1]);
        g_bpe.merge[i] = g_bpe.merge_store[i];
        char both[24];
        snprintf(both, sizeof both, "%s%s", merges[i][0], merges[i][1]);
        add(&g_bpe, both, 0, QP_TOKTYPE_NORMAL);
    }
    g_bpe.v.n_merges = (int64_t)(sizeof merges / sizeof merges[0]);
    g_bpe.v.bos_id = g_bpe.v.eos_id = add(&g_bpe, "<|endoftext|>", 0, QP_TOKTYPE_CONTROL);
    add(&g_bpe, "<|user|>", 0, QP_TOKTYPE_USER_DEFINED);

    /* WordPiece (GGUF style: word starts carry U+2581) */
    base(&g_wpm, QP_TOK_WPM);
    g_wpm.v.scores = NULL;
    add(&g_wpm, "[PAD]", 0, QP_TOKTYPE_CONTROL);
    g_wpm.v.unk_id = add(&g_wpm, "[UNK]", 0, QP_TOKTYPE_CONTROL);
    g_wpm.v.bos_id = add(&g_wpm, "[CLS]", 0, QP_TOKTYPE_CONTROL);
    static const char *const words[] = {"\xE2\x96\x81the", "\xE2\x96\x81\x61", "\xE2\x96\x81hel", "lo",
                                        "\xE2\x96\x81,", "\xE2\x96\x81!", "s", "\xE2\x96\x81\xE4\xB8\xAD"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) add(&g_wpm, words[i], 0, QP_TOKTYPE_NORMAL);

    /* unigram: the SentencePiece pieces with a user-defined and an unused token; a charsmap
     * mapping "a" -> "b " and "\t" -> " " (Darts-clone layout, runtime/tokenizer.md) */
    base(&g_ugm, QP_TOK_UGM);
    g_ugm.v.unk_id = add(&g_ugm, "<unk>", 0, QP_TOKTYPE_UNKNOWN);
    g_ugm.v.eos_id = add(&g_ugm, "</s>", 0, QP_TOKTYPE_CONTROL);
    add(&g_ugm, "<extra_id_0>", 0, QP_TOKTYPE_USER_DEFINED);
    add(&g_ugm, "zz", -1, QP_TOKTYPE_UNUSED);
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) add(&g_ugm, pieces[i], -1.5f - (float)i, QP_TOKTYPE_NORMAL);
    uint32_t u[768] = {0};
    u[0] = 256u << 10;
    u[256 ^ 'a'] = ((uint32_t)((256 ^ 'a') ^ 512) << 10) | (1u << 8) | 'a';
    u[512] = 0x80000000u;
    u[256 ^ '\t'] = ((uint32_t)((256 ^ '\t') ^ 520) << 10) | (1u << 8) | '\t';
    u[520] = 0x80000000u | 3;
    qp_store_u32le(g_charsmap, sizeof u);
    for (size_t i = 0; i < 768; i++) qp_store_u32le(g_charsmap + 4 + 4 * i, u[i]);
    memcpy(g_charsmap + 4 + sizeof u, "b \0 ", 5); /* "b ", " ", each NUL-terminated */
    g_ugm.v.charsmap = g_charsmap;
    g_ugm.v.charsmap_len = sizeof g_charsmap;
}

/* The unigram vocabulary with the blob cm as its charsmap: CORRUPT or success, ids in range. */
static void run_charsmap(const uint8_t *cm, size_t cm_len, const char *text, size_t len) {
    fvocab f = g_ugm;
    f.v.tokens = f.tok;
    f.v.token_lens = f.len;
    f.v.scores = f.sc;
    f.v.types = f.ty;
    for (int64_t i = 0; i < f.v.n_tokens; i++) f.tok[i] = f.store[i];
    f.v.charsmap = cm;
    f.v.charsmap_len = cm_len;
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    qp_status s = qp_tokenizer_new(&f.v, &t, &e);
    int32_t *ids = NULL;
    int64_t n = 0;
    if (s == QP_OK) s = qp_tokenizer_encode(t, text, len, false, false, &ids, &n, &e);
    if (s != QP_OK && s != QP_ERR_CORRUPT) abort();
    for (int64_t i = 0; s == QP_OK && i < n; i++)
        if (ids[i] < 0 || ids[i] >= f.v.n_tokens) abort();
    qp_free(ids);
    qp_tokenizer_free(t);
}

static bool has_u2581(const char *s, size_t len) {
    for (size_t i = 0; i + 3 <= len; i++)
        if (memcmp(s + i, "\xE2\x96\x81", 3) == 0) return true;
    return false;
}

/* one name per family of runtime/tokenizer_pre.c whose regexes differ most (lookaheads, $, \\b,
 * empty matches, cascading counts) */
static const char *const k_pre[16] = {"gpt-2",       "llama-bpe",  "qwen2",      "deepseek-coder",
                                      "deepseek-llm", "deepseek-v3", "tekken",     "gpt-4o",
                                      "tiny_aya",    "superbpe",   "chameleon",  "jais-2",
                                      "exaone-moe",  "bloom",      "default",    "youtu"};

static void run(const fvocab *f, const char *text, size_t len, bool add_bos, bool special) {
    qp_tokenizer *t = NULL;
    qp_err e = {0};
    if (qp_tokenizer_new(&f->v, &t, &e) != QP_OK) abort();
    int32_t *ids = NULL;
    int64_t n = 0;
    if (qp_tokenizer_encode(t, text, len, add_bos, special, &ids, &n, &e) != QP_OK) abort();
    char *dec = malloc(len * 4 + 64);
    if (!dec) abort();
    size_t dl = 0;
    /* SentencePiece cannot round-trip a literal U+2581: it decodes as a space (as everywhere) */
    bool lossless = (f->v.model == QP_TOK_SPM || f->v.model == QP_TOK_BPE) && !special && qp_utf8_valid(text, len) &&
                    !(f->v.model == QP_TOK_SPM && has_u2581(text, len));
    int32_t prev = f->v.model == QP_TOK_SPM ? f->v.bos_id : -1;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= f->v.n_tokens) abort();
        char piece[64];
        size_t k = 0;
        if (qp_tokenizer_decode_piece(t, prev, ids[i], piece, sizeof piece, &k, NULL) != QP_OK || k > sizeof piece)
            abort();
        if (dl + (size_t)k <= len * 4 + 64) memcpy(dec + dl, piece, (size_t)k);
        dl += (size_t)k;
        prev = ids[i];
    }
    if (lossless && (dl != len || memcmp(dec, text, len) != 0)) abort();
    free(dec);
    qp_free(ids);
    qp_tokenizer_free(t);
}

/* No verdict: every input must encode (a failure aborts), so the status is always QP_OK. */
qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    (void)e;
    static bool built;
    if (!built) {
        build();
        built = true;
    }
    if (size == 0 || size > (1 << 16)) return QP_OK;
    uint8_t opt = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    bool special = opt & 1, add_bos = (opt & 2) != 0;
    snprintf(g_bpe.v.pre, sizeof g_bpe.v.pre, "%s", k_pre[(opt >> 2) & 15]);
    run(&g_spm, text, len, add_bos, special);
    run(&g_bpe, text, len, add_bos, special);
    run(&g_wpm, text, len, add_bos, special);
    g_ugm.v.no_space_prefix = !(opt & 64);
    g_ugm.v.remove_extra_spaces = (opt & 128) != 0;
    g_ugm.v.normalizer = (qp_norm_form)(((opt >> 2) & 15) % 5); /* none, NFC, NFD, NFKC, NFKD */
    run(&g_ugm, text, len, add_bos, special);
    run_charsmap(data + 1, len < 2048 ? len : 2048, text, len);
    return QP_OK;
}
