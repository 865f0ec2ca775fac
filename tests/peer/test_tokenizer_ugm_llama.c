/* SentencePiece unigram ("t5") vocabularies against llama.cpp itself. A unigram vocabulary is
 * generated from the corpus below (every code point but a few left out of every piece so unknown
 * runs happen, and a pseudo-random ~45% of its 2..6-code-point substrings, "▁"-prefixed words
 * included, each with a random float score), with <pad> </s> <unk>, user-defined <extra_id_N>, an
 * unused token, a control token, a byte token and a piece whose score is set against the unknown
 * score. It is written as a small Llama GGUF in five forms (T5's
 * options: dummy prefix + remove_extra_whitespaces; dummy prefix only; neither, the key absent;
 * those two again with a precompiled_charsmap built here from SentencePiece's layout: a Darts-clone
 * XOR double array of keys -> NUL-terminated replacements), loaded by llama.cpp (the npm peer's
 * libllama: llama_tokenize without and with special parsing, llama_detokenize) and by quantpack
 * (qp_model_open + qp_tokenizer_encode / qp_tokenizer_decode_piece). Ids and detokenized text
 * must be equal for every string. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "peer/llama_peer.h"
#include "peer/random_llama_gguf.h"
#include "core/strmap.h"
#include "runtime/unicode.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

static const char *const k_corpus[] = {
    "Hello World! It's a test of the unigram model.",
    "translate English to German: The house is wonderful.",
    "summarize: studies have shown that owning a dog is good for you",
    "   leading and trailing   ",
    "runs   of    spaces\tand\ttabs\nand\r\nnewlines\n\n",
    "1 12 123 1234 12345 3.14159 1,000,000 2024-11-26",
    "\u4f60\u597d\u4e16\u754c\uff0c\u8fd9\u662f\u4e00\u4e2a\u6d4b\u8bd5\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\U0001f999 llama \U0001f680\U0001f680 rockets \u2764\ufe0f emoji",
    "Cr\u00e8me br\u00fbl\u00e9e caf\u00e9 cafe\u0301 na\u00efve",
    "\uff21\uff22\uff23 full width, \ufb01ne ligature, zero\u200bwidth, ideographic\u3000space, nb\u00a0sp",
    "an <extra_id_0> sentinel and <extra_id_1> another <ext partial",
    "unused zzqq here and <ctl> control text",
    "x marks the spot: xylophone, xenon, box",
    "MixedCASEwithDIGITS123abc456DEF",
    "Q Qa aQ QQ",
    "",
    " ",
    "\n",
    "a",
};
enum { N_CORPUS = sizeof k_corpus / sizeof k_corpus[0] };

/* ---- the vocabulary ------------------------------------------------------------------------- */

typedef struct gen_vocab {
    qp_vocab v;
    qp_strmap seen;
    int64_t cap;
} gen_vocab;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545F4914F6CDD1Dull) >> 32);
}

static void add_token(gen_vocab *g, const char *s, size_t n, int32_t type, float score) {
    int64_t old;
    if (qp_strmap_get(&g->seen, s, n, &old)) return;
    if (g->v.n_tokens == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 256;
        g->v.tokens = qp_realloc(g->v.tokens, (size_t)g->cap * sizeof *g->v.tokens);
        g->v.token_lens = qp_realloc(g->v.token_lens, (size_t)g->cap * sizeof *g->v.token_lens);
        g->v.scores = qp_realloc(g->v.scores, (size_t)g->cap * sizeof *g->v.scores);
        g->v.types = qp_realloc(g->v.types, (size_t)g->cap * sizeof *g->v.types);
        QP_CHECK(g->v.tokens && g->v.token_lens && g->v.scores && g->v.types);
    }
    int64_t i = g->v.n_tokens++;
    g->v.tokens[i] = qp_strndup(s, n);
    QP_CHECK(g->v.tokens[i] && qp_strmap_put(&g->seen, g->v.tokens[i], n, i, NULL) == QP_OK);
    g->v.token_lens[i] = (uint32_t)n;
    g->v.scores[i] = score;
    g->v.types[i] = type;
}

/* -1 .. -13 (single code points 4 lower): above the fixed -25 below */
static float random_score(void) { return -1.0f - (float)(rnd() % 1000003) / 83333.0f; }

/* Code points left out of the vocabulary: text made of them becomes <unk>. */
static bool left_out(const char *s, size_t n) {
    static const char *const k_out[] = {"\U0001f999", "\U0001f680", "\u754c", "\u2764", "Q"};
    for (size_t i = 0; i < sizeof k_out / sizeof k_out[0]; i++)
        if (n == strlen(k_out[i]) && memcmp(s, k_out[i], n) == 0) return true;
    return false;
}

/* Pieces from one corpus string, spaces as U+2581 and a leading U+2581. */
static void pieces_of(gen_vocab *g, const char *text) {
    char buf[1024];
    size_t n = 0;
    memcpy(buf, "\xE2\x96\x81", 3);
    n = 3;
    for (const char *p = text; *p && n < sizeof buf - 4; p++) {
        if (*p == ' ') {
            memcpy(buf + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = *p;
        }
    }
    size_t starts[512], ns = 0;
    for (size_t i = 0; i < n; i += qp_utf8_lead_len((uint8_t)buf[i])) starts[ns++] = i;
    starts[ns] = n;
    for (size_t a = 0; a < ns; a++) {
        if (left_out(buf + starts[a], starts[a + 1] - starts[a])) continue;
        add_token(g, buf + starts[a], starts[a + 1] - starts[a], QP_TOKTYPE_NORMAL, random_score() - 4);
        for (size_t k = 2; k <= 6 && a + k <= ns && !left_out(buf + starts[a + k - 1], starts[a + k] - starts[a + k - 1]); k++)
            if (rnd() % 100 < 45) add_token(g, buf + starts[a], starts[a + k] - starts[a], QP_TOKTYPE_NORMAL, random_score());
    }
}

static void build_vocab(gen_vocab *g) {
    memset(g, 0, sizeof *g);
    g->v.model = QP_TOK_UGM;
    g->v.bos_id = g->v.pad_id = -1;
    add_token(g, "<pad>", 5, QP_TOKTYPE_CONTROL, 0);
    add_token(g, "</s>", 4, QP_TOKTYPE_CONTROL, 0);
    add_token(g, "<unk>", 5, QP_TOKTYPE_UNKNOWN, 0);
    g->v.eos_id = 1;
    g->v.unk_id = 2;
    add_token(g, "<extra_id_0>", 12, QP_TOKTYPE_USER_DEFINED, 0);
    add_token(g, "<extra_id_1>", 12, QP_TOKTYPE_USER_DEFINED, 0);
    add_token(g, "<ctl>", 5, QP_TOKTYPE_CONTROL, 0);
    add_token(g, "zzqq", 4, QP_TOKTYPE_UNUSED, 5); /* unused pieces take part (llama.cpp) */
    /* the lowest NORMAL score, so the unknown score is -35: "▁Q" (-37; unused, so not the
     * lowest NORMAL) beats "▁" (-2.5) + unk by 0.5 */
    add_token(g, "never matched", 13, QP_TOKTYPE_NORMAL, -25);
    add_token(g, "\xE2\x96\x81Q", 4, QP_TOKTYPE_UNUSED, -37);
    add_token(g, "<0x41>", 6, QP_TOKTYPE_BYTE, 0);
    add_token(g, "\xE2\x96\x81", 3, QP_TOKTYPE_NORMAL, -2.5f);
    /* what the charsmap below writes must be coverable too */
    add_token(g, "X", 1, QP_TOKTYPE_NORMAL, -6.0f);
    add_token(g, "\xC3\xA9", 2, QP_TOKTYPE_NORMAL, -6.5f);
    for (int i = 0; i < N_CORPUS; i++) pieces_of(g, k_corpus[i]);
}

static void free_vocab(gen_vocab *g) {
    for (int64_t i = 0; i < g->v.n_tokens; i++) qp_free(g->v.tokens[i]);
    qp_free(g->v.tokens);
    qp_free(g->v.token_lens);
    qp_free(g->v.scores);
    qp_free(g->v.types);
    qp_strmap_free(&g->seen);
}

/* ---- a precompiled_charsmap, built from SentencePiece's layout ----------------------------- */

static const struct { const char *key, *repl; } k_rules[] = {
    {"\t", " "}, {"\n", " "}, {"\r\n", " "}, {"\u3000", " "}, {"\u00a0", " "},
    {"\uff21", "A"}, {"\uff22", "B"}, {"\uff23", "C"}, {"\ufb01", "fi"},
    {"e\u0301", "\u00e9"}, {"\u200b", ""}, {"x", "X"},
};
enum { N_RULES = sizeof k_rules / sizeof k_rules[0], MAX_NODES = 128, MAX_UNITS = 4096 };

typedef struct cm_node {
    int kids[256];
    int rule; /* -1: not a key */
} cm_node;

/* Darts-clone XOR double array: the unit at position q of a node holds its label (bits 0..7),
 * has_leaf (bit 8) and offset = q ^ base (bits 10..30), its children sit at base ^ label and its
 * value unit (bit 31 | replacement offset) at base ^ 0. */
static size_t build_charsmap(uint8_t **out) {
    static cm_node nodes[MAX_NODES];
    int n_nodes = 1;
    memset(nodes, 0, sizeof nodes);
    for (int i = 0; i < MAX_NODES; i++) nodes[i].rule = -1;
    for (int r = 0; r < N_RULES; r++) {
        int at = 0;
        for (const uint8_t *p = (const uint8_t *)k_rules[r].key; *p; p++) {
            if (!nodes[at].kids[*p]) nodes[at].kids[*p] = n_nodes++;
            at = nodes[at].kids[*p];
        }
        nodes[at].rule = r;
    }
    QP_CHECK(n_nodes < MAX_NODES);
    static uint32_t units[MAX_UNITS];
    static bool used[MAX_UNITS];
    memset(units, 0, sizeof units);
    memset(used, 0, sizeof used);
    int pos[MAX_NODES], queue[MAX_NODES], qn = 1;
    uint32_t repl_at[N_RULES];
    char strings[512];
    size_t sl = 0;
    for (int r = 0; r < N_RULES; r++) {
        repl_at[r] = (uint32_t)sl;
        memcpy(strings + sl, k_rules[r].repl, strlen(k_rules[r].repl) + 1);
        sl += strlen(k_rules[r].repl) + 1;
    }
    pos[0] = 0;
    used[0] = true;
    queue[0] = 0;
    size_t top = 0;
    for (int qi = 0; qi < qn; qi++) {
        int nd = queue[qi];
        uint32_t base = 1;
        for (;; base++) { /* children labels and, for a key, the value at base ^ 0 */
            bool ok = !(nodes[nd].rule >= 0 && used[base]) && base != 0;
            for (int c = 1; ok && c < 256; c++)
                if (nodes[nd].kids[c] && (used[base ^ (uint32_t)c] || (base ^ (uint32_t)c) == 0)) ok = false;
            if (ok) break;
        }
        QP_CHECK(base < MAX_UNITS - 256);
        uint32_t p = (uint32_t)pos[nd];
        units[p] |= ((p ^ base) << 10) | (nodes[nd].rule >= 0 ? 1u << 8 : 0);
        if (nodes[nd].rule >= 0) {
            used[base] = true;
            units[base] = 0x80000000u | repl_at[nodes[nd].rule];
        }
        for (int c = 1; c < 256; c++) {
            if (!nodes[nd].kids[c]) continue;
            uint32_t q = base ^ (uint32_t)c;
            used[q] = true;
            units[q] = (uint32_t)c;
            pos[nodes[nd].kids[c]] = (int)q;
            queue[qn++] = nodes[nd].kids[c];
        }
        if ((base | 0xFF) + 1 > top) top = (base | 0xFF) + 1;
    }
    size_t total = 4 + top * 4 + sl;
    uint8_t *b = qp_malloc(total);
    QP_CHECK(b != NULL);
    qp_store_u32le(b, (uint32_t)(top * 4));
    for (size_t i = 0; i < top; i++) qp_store_u32le(b + 4 + 4 * i, units[i]);
    memcpy(b + 4 + top * 4, strings, sl);
    *out = b;
    return total;
}

/* ---- comparison ----------------------------------------------------------------------------- */

static bool same_ids(const int32_t *a, int32_t na, const int32_t *b, int64_t nb) {
    return na >= 0 && nb == na && (na == 0 || memcmp(a, b, (size_t)na * 4) == 0);
}

static void show(const char *form, int k, const char *what, const int32_t *want, int32_t nw,
                 const int32_t *got, int64_t ng) {
    fprintf(stderr, "%s: string %d '%.50s' (%s): llama.cpp %d ids, quantpack %lld\n  llama.cpp:", form, k,
            k_corpus[k], what, nw, (long long)ng);
    for (int32_t i = 0; i < nw && i < 24; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n  quantpack:");
    for (int64_t i = 0; i < ng && i < 24; i++) fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n");
}

/* Our text for ids: every piece after its predecessor. */
static size_t our_detokenize(const qp_tokenizer *t, const int32_t *ids, int64_t n, char *buf, size_t cap) {
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t len = 0;
        qp_err e = {0};
        QP_CHECK(qp_tokenizer_decode_piece(t, i ? ids[i - 1] : -1, ids[i], at < cap ? buf + at : NULL,
                                           at < cap ? cap - at : 0, &len, &e) == QP_OK);
        at += len;
    }
    return at;
}

/* One string in one form: ids (special parsing off and on) and the detokenized text. */
static int compare_string(const char *form, int k, const void *lv, const qp_tokenizer *t) {
    static int32_t want[4096];
    static char want_text[8192], got_text[8192];
    const char *s = k_corpus[k];
    int differ = 0;
    for (int special = 0; special < 2; special++) {
        int32_t nw = L.tokenize(lv, s, (int32_t)strlen(s), want, 4096, false, special);
        int32_t *got = NULL;
        int64_t ng = -1;
        qp_err e = {0};
        QP_CHECK_MSG(qp_tokenizer_encode(t, s, strlen(s), false, special, &got, &ng, &e) == QP_OK, "%s", e.msg);
        if (!same_ids(want, nw, got, ng)) {
            show(form, k, special ? "special" : "plain", want, nw, got, ng);
            differ++;
        } else if (!special) {
            int32_t wl = L.detokenize(lv, want, nw, want_text, sizeof want_text, false, false);
            size_t gl = our_detokenize(t, got, ng, got_text, sizeof got_text);
            if (wl < 0 || (size_t)wl != gl || memcmp(want_text, got_text, gl) != 0) {
                fprintf(stderr, "%s: string %d detokenized: llama.cpp '%.*s' (%d), quantpack '%.*s' (%zu)\n", form,
                        k, wl > 0 ? wl : 0, want_text, wl, (int)gl, got_text, gl);
                differ++;
            }
        }
        qp_free(got);
    }
    return differ;
}

/* Writes the vocabulary in one form, loads it in both, compares every string. */
static void run_form(gen_vocab *g, const char *form, const char *tmp) {
    char path[1200];
    snprintf(path, sizeof path, "%s/ugm_%s.gguf", tmp, form);
    random_llama spec = {.label = form, .n_embd = 8, .n_ff = 16, .n_layer = 1, .n_head = 1, .n_kv = 1,
                         .n_vocab = (int)g->v.n_tokens, .tied = true};
    qp_err e = {0};
    QP_CHECK_MSG(random_llama_write_vocab(&spec, &g->v, "default", path, &e), "%s: %s", form, e.msg);
    void *model = llama_peer_model_load(path, NULL);
    QP_CHECK_MSG(model != NULL, "%s: llama.cpp refused the vocabulary", form);
    qp_model *m = NULL;
    qp_tokenizer *t = NULL;
    QP_CHECK_MSG(qp_model_open(path, NULL, &m, &e) == QP_OK, "%s: %s", form, e.msg);
    QP_CHECK_MSG(m && m->vocab.model == QP_TOK_UGM && qp_tokenizer_new(&m->vocab, &t, &e) == QP_OK, "%s: %s",
                 form, e.msg);
    int differ = 0;
    for (int k = 0; model && t && k < N_CORPUS; k++) differ += compare_string(form, k, L.model_get_vocab(model), t);
    QP_CHECK_MSG(differ == 0, "%s: %d of %d comparisons differ from llama.cpp", form, differ, 3 * N_CORPUS);
    printf("%-18s %d tokens: %d strings x (ids, ids with special parsing, text) equal to llama.cpp\n", form,
           (int)g->v.n_tokens, N_CORPUS);
    qp_tokenizer_free(t);
    qp_model_close(m);
    if (model) L.model_free(model);
    remove(path);
}

int main(void) {
    if (!qp_path_exists(llama_peer_lib())) QP_SKIP("llama.cpp peer not installed (%s)", llama_peer_lib());
    QP_CHECK(llama_peer_load());
    llama_peer_start();
    gen_vocab g;
    build_vocab(&g);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/tokenizer_ugm_llama_XXXXXX", qp_test_tmp_dir("/tmp"));
    QP_CHECK_MSG(mkdtemp(tmp) != NULL, "mkdtemp(%s) failed", tmp);
    g.v.remove_extra_spaces = true;
    run_form(&g, "t5", tmp);
    g.v.remove_extra_spaces = false;
    run_form(&g, "prefix-only", tmp);
    g.v.no_space_prefix = true;
    run_form(&g, "no-prefix", tmp);
    uint8_t *cm = NULL;
    g.v.charsmap_len = build_charsmap(&cm);
    g.v.charsmap = cm;
    g.v.no_space_prefix = false;
    g.v.remove_extra_spaces = true;
    run_form(&g, "t5+charsmap", tmp);
    g.v.remove_extra_spaces = false;
    run_form(&g, "charsmap", tmp);
    qp_free(cm);
    free_vocab(&g);
    rmdir(tmp);
    return qp_test_finish();
}
