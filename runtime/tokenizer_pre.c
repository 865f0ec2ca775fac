/* Byte-level BPE pre-tokenizers: every llama.cpp LLAMA_VOCAB_PRE_TYPE_* family with its regex
 * list, selected by the GGUF tokenizer.ggml.pre name (tokenizer.md "Pre-tokenizers"). Each regex
 * of a family splits every piece left by the previous one into its matches and the gaps between
 * them (llama.cpp's unicode_regex_split). The GPT-2 and Llama 3 patterns run hand-written
 * matchers (as llama.cpp's custom fast paths do); every other pattern runs tokenizer_regex.c. */
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/tokenizer_regex.h"
#include "runtime/unicode.h"

/* ---- the families --------------------------------------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" RE_LLAMA3_TAIL
#define RE_QWEN2 RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" RE_LLAMA3_TAIL
#define RE_CJK_KANA "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+"
#define RE_DS3_WORDS                                                                               \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
#define RE_KIMI_K2 "\\p{Han}+" /* llama.cpp's marker for its hand-written Kimi K2 splitter */
#define RE_DS3_MAIN RE_DS3_WORDS "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
/* llama.cpp's AFMoE digit splitter: a run of \p{N} is cut into its first (length mod 3) code
 * points, then threes (the regex below gives the same pieces); its CJK / Asian-script ranges as
 * llama.cpp's source spells them (the third starts at U+8C48, NFC of U+F900). */
#define RE_AFMOE_DIGITS "\\p{N}{1,3}(?=(?:\\p{N}{3})*(?!\\p{N}))"
#define RE_AFMOE_ASIAN                                                                             \
    "[\u4E00-\u9FFF\u3400-\u4DBF\u8C48-\uFAFF\u3040-\u309F\u30A0-\u30FF\uFF65-\uFF9F\u2F00-\u2FDF"     \
    "\u0E40-\u0E7F\u0E80-\u0EFF\u1780-\u17FF\u1000-\u109F\uAA60-\uAA7F\uA9E0-\uA9FF\uAC00-\uD7AF"      \
    "\u1100-\u11FF]+"
#define RE_CASED(up, low, tail)                                                                    \
    "[^\\r\\n\\p{L}\\p{N}]?" up "*" low "+" tail "|[^\\r\\n\\p{L}\\p{N}]?" up "+" low "*" tail
#define RE_UP_CLASS "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_LOW_CLASS "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define RE_UP_LOOK "((?=[\\p{L}])([^a-z]))"
#define RE_LOW_LOOK "((?=[\\p{L}])([^A-Z]))"
#define RE_UP_LOOK_M "((?=[\\p{L}\\p{M}])([^a-z]))"
#define RE_LOW_LOOK_M "((?=[\\p{L}\\p{M}])([^A-Z]))"
#define RE_SLASH_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_PORO " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+"

typedef struct pre_family {
    const char *label;
    const char *regex[7]; /* NULL-terminated */
    unsigned flags;       /* QP_PRE_* */
} pre_family;

#define PRE_IGNORE_MERGES QP_PRE_IGNORE_MERGES
#define PRE_RAW_UTF8 QP_PRE_RAW_UTF8
#define PRE_SPM_LIKE (QP_PRE_RAW_UTF8 | QP_PRE_ESCAPE_SPACES)

/* llama.cpp llm_tokenizer_bpe's regex_exprs, family by family. */
static const pre_family k_families[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0},
    {"gpt2", {RE_GPT2}, 0},
    {"llama3", {RE_LLAMA3}, PRE_IGNORE_MERGES},
    {"llama3-merges", {RE_LLAMA3}, 0}, /* dbrx, smaug, chatglm4 */
    {"jais2",
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                      "\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|"
                      "\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"},
     0},
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
       "\u0295-\u02AF\u0370-\u0373\u0376-\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
       "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-"
       "\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A"
       "\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D"
       "\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3"
       "\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115"
       "\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-"
       "\u2149\u214E\u2183-\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2-\u2CF3\uA640-"
       "\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
       "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
       "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
       "\U0001E900-\U0001E943]+",
      "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+", "\\s+$", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}+"},
     0},
    {"deepseek-v3", {"\\p{N}{1,3}", RE_CJK_KANA, RE_DS3_MAIN}, 0},
    {"spark2_5",
     {"\\p{N}{1,3}", RE_CJK_KANA, RE_DS3_WORDS "| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+", "\\p{N}"},
     0},
    {"youtu",
     {"[\uAC00-\uD7A3\u3131-\u318E]+|[\uFF01\u2026\u201C\u201D\u2018\u2019\u2014\uFF1A\uFF1B"
      "\uFF0C\u3001-\u303F\uFE30-\uFE4F]+|[\u3105-\u312F]+|[\u4E00-\u9FA5\u3040-\u309F\u30A0-"
      "\u30FF]+",
      RE_CASED(RE_UP_CLASS, RE_LOW_CLASS, RE_CONTRACTIONS "?") "|\\p{N}" RE_SLASH_TAIL},
     PRE_IGNORE_MERGES},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}"}, 0},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"}, 0},
    {"starcoder", {"\\p{N}", RE_GPT2}, 0},
    {"qwen2", {RE_QWEN2}, 0},
    {"qwen35",
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     0},
    {"poro", {RE_PORO}, 0},
    {"viking", {RE_PORO, "\\p{N}"}, 0},
    {"tekken", {RE_CASED(RE_UP_LOOK, RE_LOW_LOOK, "") "|\\p{N}" RE_SLASH_TAIL}, PRE_IGNORE_MERGES},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
     0},
    {"gpt-4o", {RE_CASED(RE_UP_LOOK, RE_LOW_LOOK, RE_CONTRACTIONS "?") "|\\p{N}{1,3}" RE_SLASH_TAIL}, 0},
    {"granite-embed-multi",
     {RE_CASED(RE_UP_LOOK_M, RE_LOW_LOOK_M, RE_CONTRACTIONS "?") "|\\p{N}{1,3}" RE_SLASH_TAIL},
     PRE_IGNORE_MERGES},
    {"tiny_aya",
     {"\\d{1,3}(?=(?:\\d{3})*\\b)",
      RE_CASED(RE_UP_CLASS, RE_LOW_CLASS, RE_CONTRACTIONS "?") "|\\p{N}{1,3}" RE_SLASH_TAIL},
     0},
    {"superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}, 0},
    {"bailingmoe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\"
      "s\\p{L}\\p{N}]+"
      "[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     0},
    {"seed-coder",
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
                      "\\s+(?!\\S)|\\s+"},
     0},
    {"ufakzeka", {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" RE_LLAMA3_TAIL}, 0},
    {"laguna", {"[^\\n]+|[\\n]+", RE_QWEN2}, 0},
    {"exaone-moe",
     {RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N"
      "}]+"
                      "[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"},
     0},
    {"afmoe", {RE_AFMOE_DIGITS, RE_AFMOE_ASIAN, RE_DS3_MAIN}, 0},
    {"kimi-k2", {RE_KIMI_K2}, 0},
    {"whitespace", {"\\S+"}, PRE_RAW_UTF8}, /* jina-embeddings-v2-base-zh */
    {"gemma4", {"[^\\n]+|[\\n]+"}, PRE_SPM_LIKE | QP_PRE_NEWLINES_WHOLE},
    {"sarvam-moe", {"[^\\n]+|[\\n]+"}, PRE_SPM_LIKE},
    {"minicpm5", {"\\p{N}{1,3}", RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+" RE_LLAMA3_TAIL}, PRE_IGNORE_MERGES},
};

/* tokenizer.ggml.pre names -> family label, as llama_vocab::impl::load maps them. */
static const struct {
    const char *name, *family;
} k_names[] = {
    {"", "default"}, {"default", "default"},
    {"llama3", "llama3"}, {"llama-v3", "llama3"}, {"llama-bpe", "llama3"}, {"falcon3", "llama3"},
    {"falcon-h1", "llama3"}, {"pixtral", "llama3"}, {"midm-2.0", "llama3"}, {"lfm2", "llama3"},
    {"jina-v5-nano", "llama3"},
    {"dbrx", "llama3-merges"}, {"smaug-bpe", "llama3-merges"}, {"glm4", "llama3-merges"},
    {"chatglm-bpe", "llama3-merges"},
    {"jais-2", "jais2"},
    {"deepseek-llm", "deepseek-llm"}, {"deepseek-coder", "deepseek-coder"},
    {"deepseek-v3", "deepseek-v3"}, {"hunyuan-dense", "deepseek-v3"}, {"joyai-llm", "deepseek-v3"},
    {"hy_v4", "deepseek-v3"}, {"spark2_5", "spark2_5"}, {"youtu", "youtu"},
    {"falcon", "falcon"},
    {"starcoder", "starcoder"}, {"refact", "starcoder"}, {"command-r", "starcoder"},
    {"smollm", "starcoder"}, {"codeshell", "starcoder"}, {"exaone", "starcoder"},
    {"minerva-7b", "starcoder"}, {"mellum2", "starcoder"},
    {"gpt-2", "gpt2"}, {"gpt2", "gpt2"}, {"phi-2", "gpt2"}, {"jina-es", "gpt2"}, {"jina-de", "gpt2"},
    {"gigachat", "gpt2"}, {"jina-v2-es", "gpt2"}, {"jina-v2-de", "gpt2"}, {"a.x-4.0", "gpt2"},
    {"mellum", "gpt2"}, {"modern-bert", "gpt2"}, {"jina-v1-en", "gpt2"}, {"jina-v2-code", "gpt2"},
    {"roberta-bpe", "gpt2"}, {"mpt", "gpt2"}, {"olmo", "gpt2"}, {"jais", "gpt2"},
    {"trillion", "gpt2"}, {"granite-docling", "gpt2"}, {"exaone4", "gpt2"},
    {"qwen2", "qwen2"}, {"deepseek-r1-qwen", "qwen2"}, {"kormo", "qwen2"}, {"f2llmv2", "qwen2"},
    {"stablelm2", "qwen2"}, {"hunyuan", "qwen2"}, {"solar-open", "qwen2"}, {"megrez", "qwen2"},
    {"grok-2", "qwen2"},
    {"qwen35", "qwen35"},
    {"poro-chat", "poro"}, {"bloom", "poro"}, {"gpt3-finnish", "poro"}, {"viking", "viking"},
    {"tekken", "tekken"}, {"chameleon", "chameleon"},
    {"gpt-4o", "gpt-4o"}, {"llama4", "gpt-4o"}, {"kanana2", "gpt-4o"}, {"talkie", "gpt-4o"},
    {"minimax-m2", "gpt-4o"},
    {"granite-embed-multi-97m", "granite-embed-multi"},
    {"tiny_aya", "tiny_aya"}, {"cohere2moe", "tiny_aya"},
    {"superbpe", "superbpe"},
    {"bailingmoe", "bailingmoe"}, {"bailingmoe2", "bailingmoe"}, {"llada-moe", "bailingmoe"},
    {"seed-coder", "seed-coder"}, {"ufakzeka", "ufakzeka"}, {"laguna", "laguna"},
    {"exaone-moe", "exaone-moe"}, {"minicpm5", "minicpm5"}, {"whitespace", "whitespace"},
    {"gemma4", "gemma4"}, {"granite-embed-multi-311m", "gemma4"}, {"sarvam-moe", "sarvam-moe"},
    {"afmoe", "afmoe"}, {"kimi-k2", "kimi-k2"},
};

enum { FAST_NONE, FAST_GPT2, FAST_LLAMA3, FAST_KIMI_K2 };

struct qp_tok_pre {
    const pre_family *family;
    int n;
    qp_tok_regex *re[7];
    int fast[7];
};

void qp_tok_pre_free(qp_tok_pre *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) qp_tok_regex_free(p->re[i]);
    qp_free(p);
}

unsigned qp_tok_pre_flags(const qp_tok_pre *p) { return p->family->flags; }

static const pre_family *family_of(const char *name, size_t name_cap) {
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strncmp(name, k_names[i].name, name_cap) != 0) continue;
        for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++)
            if (strcmp(k_families[f].label, k_names[i].family) == 0) return &k_families[f];
    }
    return NULL;
}

qp_status qp_tok_pre_new(const char *name, size_t name_cap, qp_tok_pre **out, qp_err *e) {
    const pre_family *fam = family_of(name, name_cap);
    if (!fam)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tokenizer: byte-level BPE pre-tokenizer '%.*s' is not "
                                              "supported (see runtime/tokenizer.md for the names that are)",
                       (int)strnlen(name, name_cap), name);
    qp_tok_pre *p = qp_calloc(1, sizeof *p);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (pre-tokenizer)");
    p->family = fam;
    for (; p->n < 7 && fam->regex[p->n]; p->n++) {
        const char *re = fam->regex[p->n];
        p->fast[p->n] = strcmp(re, RE_GPT2) == 0     ? FAST_GPT2
                        : strcmp(re, RE_LLAMA3) == 0 ? FAST_LLAMA3
                        : strcmp(re, RE_KIMI_K2) == 0 ? FAST_KIMI_K2
                                                      : FAST_NONE;
        if (p->fast[p->n] != FAST_NONE) continue;
        qp_status s = qp_tok_regex_compile(re, &p->re[p->n], e);
        if (s != QP_OK) {
            qp_tok_pre_free(p);
            return s;
        }
    }
    *out = p;
    return QP_OK;
}

/* ---- the hand-written GPT-2 and Llama 3 matchers: length of the match at i (0 if none) -------- */

typedef struct pre_text {
    const uint32_t *cp;
    const uint8_t *fl;
} pre_text;

#define IS_L(i) (pt->fl[i] & QP_UC_L)
#define IS_N(i) (pt->fl[i] & QP_UC_N)
#define IS_WS(i) (pt->fl[i] & QP_UC_WS)
#define IS_OTHER(i) (!(pt->fl[i] & (QP_UC_WS | QP_UC_L | QP_UC_N)))

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd (case-insensitive when ci). */
static size_t match_contraction(const pre_text *pt, size_t i, size_t end, bool ci) {
    if (pt->cp[i] != '\'' || i + 1 >= end) return 0;
    uint32_t a = ci ? ascii_lower(pt->cp[i + 1]) : pt->cp[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= end) return 0;
    uint32_t b = ci ? ascii_lower(pt->cp[i + 2]) : pt->cp[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a whitespace position: a run followed by a non-space keeps its last space
 * for the next word (unless the run is that one space). */
static size_t match_space_run(const pre_text *pt, size_t i, size_t end) {
    size_t k = i;
    while (k < end && IS_WS(k)) k++;
    if (k < end && k - i > 1) return k - i - 1;
    return k - i;
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const pre_text *pt, size_t i, size_t end) {
    size_t n = match_contraction(pt, i, end, false);
    if (n) return n;
    size_t j = pt->cp[i] == ' ' ? i + 1 : i;
    if (j < end && IS_L(j)) {
        while (j < end && IS_L(j)) j++;
        return j - i;
    }
    if (j < end && IS_N(j)) {
        while (j < end && IS_N(j)) j++;
        return j - i;
    }
    if (j < end && IS_OTHER(j)) {
        while (j < end && IS_OTHER(j)) j++;
        return j - i;
    }
    return match_space_run(pt, i, end);
}

static size_t match_llama3_tail(const pre_text *pt, size_t i, size_t end);

/* Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 * ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const pre_text *pt, size_t i, size_t end) {
    size_t n = match_contraction(pt, i, end, true);
    if (n) return n;
    uint32_t c = pt->cp[i];
    if (IS_L(i) || (c != '\r' && c != '\n' && !IS_N(i) && i + 1 < end && IS_L(i + 1))) {
        size_t j = i + 1;
        while (j < end && IS_L(j)) j++;
        return j - i;
    }
    if (IS_N(i)) {
        size_t j = i;
        while (j < end && j - i < 3 && IS_N(j)) j++;
        return j - i;
    }
    return match_llama3_tail(pt, i, end);
}

/* Llama 3's ` ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+` */
static size_t match_llama3_tail(const pre_text *pt, size_t i, size_t end) {
    size_t j = pt->cp[i] == ' ' ? i + 1 : i;
    if (j < end && IS_OTHER(j)) {
        while (j < end && IS_OTHER(j)) j++;
        while (j < end && (pt->cp[j] == '\r' || pt->cp[j] == '\n')) j++;
        return j - i;
    }
    /* whitespace: \s*[\r\n]+ ends after the last newline of the run */
    size_t k = i, last_nl = SIZE_MAX;
    while (k < end && IS_WS(k)) {
        if (pt->cp[k] == '\r' || pt->cp[k] == '\n') last_nl = k;
        k++;
    }
    if (last_nl != SIZE_MAX) return last_nl + 1 - i;
    return match_space_run(pt, i, end);
}

/* llama.cpp's unicode_cpt_is_han: CJK ideographs, extensions A-F, compatibility ideographs. */
static bool is_han(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2EBEF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

#define IS_L_NOT_HAN(k) ((k) < end && IS_L(k) && !is_han(pt->cp[k]))

/* Kimi K2, as llama.cpp's hand-written splitter runs it: a Han run; else a non-Han letter run
 * (after one optional character that is no letter, number, \r or \n) with an optional
 * case-insensitive contraction; else \p{N}{1,3}; else Llama 3's tail. */
static size_t match_kimi_k2(const pre_text *pt, size_t i, size_t end) {
    uint32_t c = pt->cp[i];
    size_t j = i;
    if (is_han(c)) {
        while (j < end && is_han(pt->cp[j])) j++;
        return j - i;
    }
    bool lead = c != '\r' && c != '\n' && !IS_L(i) && !IS_N(i);
    if (IS_L_NOT_HAN(i) || (lead && IS_L_NOT_HAN(i + 1))) {
        j = lead ? i + 1 : i;
        while (IS_L_NOT_HAN(j)) j++;
        return j + (j < end ? match_contraction(pt, j, end, true) : 0) - i;
    }
    if (IS_N(i)) {
        while (j < end && j - i < 3 && IS_N(j)) j++;
        return j - i;
    }
    return match_llama3_tail(pt, i, end);
}

/* ---- splitting ------------------------------------------------------------------------------ */

typedef struct piece_list {
    qp_tok_piece *p;
    size_t n, cap;
} piece_list;

static bool push_piece(piece_list *l, size_t s, size_t e) {
    if (s >= e) return true; /* empty pieces produce no tokens (llama.cpp's empty words) */
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        qp_tok_piece *q = qp_realloc(l->p, nc * sizeof *q);
        if (!q) return false;
        l->p = q;
        l->cap = nc;
    }
    l->p[l->n++] = (qp_tok_piece){(uint32_t)s, (uint32_t)e};
    return true;
}

/* One hand-written pattern over one piece: matches and the gaps between them. */
static bool split_fast(int fast, const pre_text *pt, qp_tok_piece pc, piece_list *out) {
    size_t i = pc.start, gap = i;
    bool ok = true;
    while (ok && i < pc.end) {
        size_t m = fast == FAST_GPT2     ? match_gpt2(pt, i, pc.end)
                   : fast == FAST_LLAMA3 ? match_llama3(pt, i, pc.end)
                                         : match_kimi_k2(pt, i, pc.end);
        if (m == 0) {
            i++;
            continue;
        }
        ok = push_piece(out, gap, i) && push_piece(out, i, i + m);
        i += m;
        gap = i;
    }
    return ok && push_piece(out, gap, pc.end);
}

/* One regex over one piece, as std::regex_iterator walks it: leftmost match; after an empty
 * match, a non-empty match at the same place, else the search goes on one position later. */
static qp_status split_regex(const qp_tok_regex *re, const pre_text *pt, qp_tok_piece pc, piece_list *out,
                             qp_tok_regex_scratch *scratch, qp_err *e) {
    qp_tok_regex_text t = {.cp = pt->cp + pc.start, .fl = pt->fl + pc.start, .n = pc.end - pc.start,
                           .scratch = scratch};
    t.steps_left = ((uint64_t)1 << 22) + (uint64_t)t.n * 512;
    size_t i = 0, gap = 0;
    bool not_null = false, ok = true;
    qp_status s = QP_OK;
    while (ok && i <= t.n) {
        int64_t m = -1;
        s = qp_tok_regex_match_at(re, &t, i, not_null, &m, e);
        if (s != QP_OK) break;
        if (m < 0) {
            not_null = false;
            i++;
            continue;
        }
        ok = push_piece(out, pc.start + gap, pc.start + i) &&
             push_piece(out, pc.start + i, pc.start + i + (size_t)m);
        gap = i + (size_t)m;
        not_null = m == 0;
        i += (size_t)m;
    }
    if (s == QP_OK && ok) ok = push_piece(out, pc.start + gap, pc.end);
    if (s == QP_OK && !ok) s = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (pieces)");
    return s;
}

qp_status qp_tok_pre_split(const qp_tok_pre *p, const uint32_t *cp, const uint8_t *fl, size_t n,
                           qp_tok_piece **pieces, size_t *n_pieces, qp_err *e) {
    pre_text pt = {cp, fl};
    piece_list a = {0}, b = {0};
    qp_tok_regex_scratch scratch = {0};
    qp_status s = push_piece(&a, 0, n) ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (pieces)");
    for (int r = 0; s == QP_OK && r < p->n; r++) {
        b.n = 0;
        for (size_t k = 0; s == QP_OK && k < a.n; k++) {
            if (p->fast[r] == FAST_NONE) s = split_regex(p->re[r], &pt, a.p[k], &b, &scratch, e);
            else if (!split_fast(p->fast[r], &pt, a.p[k], &b))
                s = qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (pieces)");
        }
        piece_list tmp = a;
        a = b;
        b = tmp;
    }
    qp_free(scratch.stack);
    qp_free(b.p);
    if (s != QP_OK) {
        qp_free(a.p);
        return s;
    }
    *pieces = a.p;
    *n_pieces = a.n;
    return QP_OK;
}
