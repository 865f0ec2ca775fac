/* Hugging Face tokenizer files from any model's vocabulary (converters/hf_tokenizer.h; rules in
 * converters/hf_folder.md "Tokenizer files"). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converters/hf_tokenizer.h"
#include "core/base64.h"
#include "core/json.h"
#include "core/strmap.h"
#include "quantpack/chat.h"
#include "readers/hf_config.h"

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* The vocabulary with its text -> first id index (a later id repeating a text is not reachable
 * by text in quantpack's tokenizer either). */
typedef struct vocab_index {
    const qp_model *m;
    const qp_vocab *v;
    qp_strmap ids;
} vocab_index;

static bool is_byte_piece(const char *s, size_t n) {
    return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>';
}

/* The token's type; inferred as runtime/tokenizer.md says when the vocabulary has none. */
static int32_t token_type(const qp_vocab *v, int64_t i) {
    if (v->types) return v->types[i];
    if (i == v->unk_id) return QP_TOKTYPE_UNKNOWN;
    if (i == v->bos_id || i == v->eos_id) return QP_TOKTYPE_CONTROL;
    if (v->model == QP_TOK_SPM && is_byte_piece(v->tokens[i], v->token_lens[i])) return QP_TOKTYPE_BYTE;
    return QP_TOKTYPE_NORMAL;
}

/* Tokens HF splits out of the text before its model runs (its added_tokens): control, unknown
 * and user-defined ones; special unless user-defined. */
static bool is_added(const qp_vocab *v, int64_t i) {
    const int32_t ty = token_type(v, i);
    return v->token_lens[i] > 0 &&
           (ty == QP_TOKTYPE_CONTROL || ty == QP_TOKTYPE_UNKNOWN || ty == QP_TOKTYPE_USER_DEFINED);
}

static int64_t lookup(const vocab_index *x, const char *s, size_t n) {
    int64_t id;
    return qp_strmap_get(&x->ids, s, n, &id) ? id : -1;
}

static qp_status index_vocab(vocab_index *x, qp_err *e) {
    const qp_vocab *v = x->v;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        if (strlen(v->tokens[i]) != v->token_lens[i])
            return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: token %lld holds a NUL byte, which tokenizer.json "
                           "cannot name", x->m->path, (long long)i);
        if (qp_strmap_put(&x->ids, v->tokens[i], v->token_lens[i], i, NULL) != QP_OK)
            return qp_fail(e, QP_ERR_NOMEM, "out of memory indexing %lld tokens", (long long)v->n_tokens);
    }
    return QP_OK;
}

static cJSON *text_or_null(const qp_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens ? cJSON_CreateString(v->tokens[id]) : cJSON_CreateNull();
}

/* ---- merges ---------------------------------------------------------------------------------- */

typedef struct spm_merge {
    float score; /* of the piece the merge makes */
    int32_t piece, left, right;
} spm_merge;

/* HF's SentencePiece extraction order: the piece's score, highest first, then the piece id,
 * then the sides' ids. */
static int spm_merge_order(const void *pa, const void *pb) {
    const spm_merge *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->piece != b->piece) return a->piece < b->piece ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return (a->right > b->right) - (a->right < b->right);
}

static float piece_score(const qp_vocab *v, int64_t i) {
    float s = v->scores ? v->scores[i] : 0.0f;
    return isnan(s) ? -INFINITY : s;
}

/* Every split of every piece into two pieces (at UTF-8 character boundaries), in HF's order:
 * quantpack's SentencePiece merges the pair whose concatenation scores highest, HF's BPE the
 * pair of lowest rank, so ranks follow scores. */
static qp_status spm_merges(const vocab_index *x, cJSON *out, qp_err *e) {
    const qp_vocab *v = x->v;
    spm_merge *list = NULL;
    size_t n = 0, cap = 0;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        const char *t = v->tokens[i];
        for (size_t k = 1; k < v->token_lens[i]; k++) {
            if (((unsigned char)t[k] & 0xC0) == 0x80) continue;
            int64_t l = lookup(x, t, k), r = l >= 0 ? lookup(x, t + k, v->token_lens[i] - k) : -1;
            if (r < 0) continue;
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 4096;
                spm_merge *nl = qp_realloc(list, nc * sizeof *nl);
                if (!nl) {
                    qp_free(list);
                    return qp_fail(e, QP_ERR_NOMEM, "out of memory for %zu merges", nc);
                }
                list = nl;
                cap = nc;
            }
            list[n++] = (spm_merge){piece_score(v, i), (int32_t)i, (int32_t)l, (int32_t)r};
        }
    }
    if (n) qsort(list, n, sizeof *list, spm_merge_order);
    bool ok = true;
    for (size_t k = 0; ok && k < n; k++) {
        const char *pair[2] = {v->tokens[list[k].left], v->tokens[list[k].right]};
        ok = cJSON_AddItemToArray(out, cJSON_CreateStringArray(pair, 2));
    }
    qp_free(list);
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory writing merges");
}

/* The vocabulary's "left right" merges as [left, right] pairs (split at the first space after
 * the first byte, as quantpack's BPE reads them). */
static qp_status bpe_merges(const qp_vocab *v, cJSON *out, qp_err *e) {
    char *left = NULL;
    bool ok = true;
    for (int64_t i = 0; ok && i < v->n_merges; i++) {
        const char *m = v->merges[i], *sp = m[0] ? strchr(m + 1, ' ') : NULL;
        if (!sp) continue; /* quantpack's tokenizer ignores it too */
        qp_free(left);
        left = qp_malloc((size_t)(sp - m) + 1);
        if (!left) ok = false;
        else {
            memcpy(left, m, (size_t)(sp - m));
            left[sp - m] = '\0';
            const char *pair[2] = {left, sp + 1};
            ok = cJSON_AddItemToArray(out, cJSON_CreateStringArray(pair, 2));
        }
    }
    qp_free(left);
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory writing merges");
}

/* ---- tokenizer.json ------------------------------------------------------------------------ */

static cJSON *added_token(const qp_vocab *v, int64_t i) {
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddNumberToObject(o, "id", (double)i) &&
              cJSON_AddStringToObject(o, "content", v->tokens[i]) &&
              cJSON_AddFalseToObject(o, "single_word") && cJSON_AddFalseToObject(o, "lstrip") &&
              cJSON_AddFalseToObject(o, "rstrip") && cJSON_AddFalseToObject(o, "normalized") &&
              cJSON_AddBoolToObject(o, "special", token_type(v, i) != QP_TOKTYPE_USER_DEFINED);
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

static bool add_added_tokens(const qp_vocab *v, cJSON *root) {
    cJSON *arr = cJSON_AddArrayToObject(root, "added_tokens");
    for (int64_t i = 0; arr && i < v->n_tokens; i++)
        if (is_added(v, i) && !cJSON_AddItemToArray(arr, added_token(v, i))) return false;
    return arr != NULL;
}

static cJSON *typed(const char *type);

/* {"type": "Replace", "pattern": {"String": from}, "content": to}. */
static cJSON *replace_step(const char *from, const char *to) {
    cJSON *o = typed("Replace"), *pat = o ? cJSON_AddObjectToObject(o, "pattern") : NULL;
    if (pat && cJSON_AddStringToObject(pat, "String", from) && cJSON_AddStringToObject(o, "content", to)) return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *typed(const char *type) {
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "type", type)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *sequence(const char *list_key, cJSON *const *items, int n) {
    cJSON *o = typed("Sequence"), *arr = o ? cJSON_AddArrayToObject(o, list_key) : NULL;
    bool ok = arr != NULL;
    for (int i = 0; i < n; i++) {
        if (ok && items[i]) ok = cJSON_AddItemToArray(arr, items[i]);
        else cJSON_Delete(items[i]), ok = false;
    }
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

/* SentencePiece as HF's Llama converter writes it (legacy mode): "▁" before each stretch of text
 * (quantpack's dummy prefix: at the start and after every added token) unless the vocabulary has
 * none (no_space_prefix: Gemma's form, no Prepend and no Strip), spaces as "▁"; the decoder undoes
 * it. */
static bool spm_pipeline(cJSON *root, bool space_prefix) {
    cJSON *prepend = space_prefix ? typed("Prepend") : NULL;
    if (prepend && !cJSON_AddStringToObject(prepend, "prepend", SPM_SPACE)) cJSON_Delete(prepend), prepend = NULL;
    cJSON *replace = replace_step(" ", SPM_SPACE);
    cJSON *norm[2] = {prepend, replace};
    cJSON *strip = space_prefix ? typed("Strip") : NULL;
    if (strip && !(cJSON_AddStringToObject(strip, "content", " ") && cJSON_AddNumberToObject(strip, "start", 1) &&
                   cJSON_AddNumberToObject(strip, "stop", 0)))
        cJSON_Delete(strip), strip = NULL;
    cJSON *dec[4] = {replace_step(SPM_SPACE, " "), typed("ByteFallback"), typed("Fuse"), strip};
    int n_norm = space_prefix ? 2 : 1, n_dec = space_prefix ? 4 : 3;
    return cJSON_AddItemToObject(root, "normalizer",
                                 sequence("normalizers", space_prefix ? norm : norm + 1, n_norm)) &&
           cJSON_AddNullToObject(root, "pre_tokenizer") &&
           cJSON_AddItemToObject(root, "decoder", sequence("decoders", dec, n_dec));
}

/* A unigram vocabulary (runtime/tokenizer.md "SentencePiece unigram") in the form
 * readers/hf_config.c reads back to the same options: the charsmap as a Precompiled normaliser;
 * remove_extra_whitespaces as T5's WhitespaceSplit + Metaspace (every word "▁"-prefixed); else
 * Prepend("▁") for the dummy prefix and spaces as "▁". */
static bool unigram_pipeline(cJSON *root, const qp_vocab *v) {
    bool prefix = !v->no_space_prefix, merge = v->remove_extra_spaces;
    cJSON *norm[3] = {NULL, NULL, NULL};
    int n = 0;
    if (v->charsmap && v->charsmap_len) {
        char *b64 = qp_malloc((v->charsmap_len + 2) / 3 * 4 + 1);
        norm[n] = b64 ? typed("Precompiled") : NULL;
        if (norm[n]) qp_base64_encode(v->charsmap, v->charsmap_len, b64);
        if (norm[n] && !cJSON_AddStringToObject(norm[n], "precompiled_charsmap", b64)) cJSON_Delete(norm[n]), norm[n] = NULL;
        qp_free(b64);
        if (!norm[n++]) return false;
    }
    if (!merge && prefix) {
        norm[n] = typed("Prepend");
        if (norm[n] && !cJSON_AddStringToObject(norm[n], "prepend", SPM_SPACE)) cJSON_Delete(norm[n]), norm[n] = NULL;
        if (!norm[n++]) return false;
    }
    if (!merge && !(norm[n++] = replace_step(" ", SPM_SPACE))) return false;
    cJSON *meta = merge ? typed("Metaspace") : NULL, *pre = NULL;
    if (meta && cJSON_AddStringToObject(meta, "replacement", SPM_SPACE) &&
        cJSON_AddStringToObject(meta, "prepend_scheme", "always") && cJSON_AddTrueToObject(meta, "split")) {
        cJSON *steps[2] = {typed("WhitespaceSplit"), meta};
        pre = sequence("pretokenizers", steps, 2);
        meta = NULL;
    }
    cJSON_Delete(meta);
    cJSON *strip = prefix ? typed("Strip") : NULL;
    if (strip && !(cJSON_AddStringToObject(strip, "content", " ") && cJSON_AddNumberToObject(strip, "start", 1) &&
                   cJSON_AddNumberToObject(strip, "stop", 0)))
        cJSON_Delete(strip), strip = NULL;
    cJSON *dec[3] = {replace_step(SPM_SPACE, " "), typed("Fuse"), strip};
    return cJSON_AddItemToObject(root, "normalizer", n ? sequence("normalizers", norm, n) : cJSON_CreateNull()) &&
           cJSON_AddItemToObject(root, "pre_tokenizer", merge ? pre : cJSON_CreateNull()) &&
           cJSON_AddItemToObject(root, "decoder", sequence("decoders", dec, prefix ? 3 : 2));
}

static cJSON *byte_level(bool add_prefix_space, bool use_regex) {
    cJSON *o = typed("ByteLevel");
    if (o && !(cJSON_AddBoolToObject(o, "add_prefix_space", add_prefix_space) &&
               cJSON_AddTrueToObject(o, "trim_offsets") && cJSON_AddBoolToObject(o, "use_regex", use_regex)))
        cJSON_Delete(o), o = NULL;
    return o;
}

/* Byte-level BPE: the pre-tokenizer's regex (Split, isolated) then GPT-2's byte mapping. */
static bool bpe_pipeline(cJSON *root, const char *regex) {
    cJSON *split = typed("Split"), *pat = split ? cJSON_AddObjectToObject(split, "pattern") : NULL;
    if (!pat || !cJSON_AddStringToObject(pat, "Regex", regex) ||
        !cJSON_AddStringToObject(split, "behavior", "Isolated") || !cJSON_AddFalseToObject(split, "invert")) {
        cJSON_Delete(split);
        return false;
    }
    cJSON *pre[2] = {split, byte_level(false, false)};
    return cJSON_AddNullToObject(root, "normalizer") &&
           cJSON_AddItemToObject(root, "pre_tokenizer", sequence("pretokenizers", pre, 2)) &&
           cJSON_AddItemToObject(root, "decoder", byte_level(true, true));
}

/* One {"SpecialToken": {"id": text, "type_id": type}} or {"Sequence": {"id": A/B, ...}} item. */
static bool template_item(cJSON *arr, const char *kind, const char *id, int type_id) {
    cJSON *o = cJSON_CreateObject(), *inner = o ? cJSON_AddObjectToObject(o, kind) : NULL;
    bool ok = inner && cJSON_AddStringToObject(inner, "id", id) && cJSON_AddNumberToObject(inner, "type_id", type_id);
    if (!ok || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return false;
    }
    return true;
}

static bool template_seq(cJSON *arr, const char *bos, const char *eos, const char *seq, int type_id) {
    return (!bos || template_item(arr, "SpecialToken", bos, type_id)) &&
           template_item(arr, "Sequence", seq, type_id) && (!eos || template_item(arr, "SpecialToken", eos, type_id));
}

static bool special_entry(cJSON *map, const qp_vocab *v, int32_t id) {
    if (id < 0 || id >= v->n_tokens || cJSON_GetObjectItemCaseSensitive(map, v->tokens[id])) return true;
    cJSON *o = cJSON_AddObjectToObject(map, v->tokens[id]);
    const int ids[1] = {id};
    const char *toks[1] = {v->tokens[id]};
    return o && cJSON_AddStringToObject(o, "id", v->tokens[id]) &&
           cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(ids, 1)) &&
           cJSON_AddItemToObject(o, "tokens", cJSON_CreateStringArray(toks, 1));
}

/* TemplateProcessing: BOS when the model adds it (qp_model_adds_bos), EOS when the vocabulary
 * says add_eos. */
static bool post_processor(const qp_model *m, cJSON *root) {
    const qp_vocab *v = &m->vocab;
    const int32_t bos = qp_model_adds_bos(m) && v->bos_id >= 0 && v->bos_id < v->n_tokens ? v->bos_id : -1;
    const int32_t eos = v->add_eos && v->eos_id >= 0 && v->eos_id < v->n_tokens ? v->eos_id : -1;
    const char *bt = bos >= 0 ? v->tokens[bos] : NULL, *et = eos >= 0 ? v->tokens[eos] : NULL;
    cJSON *pp = typed("TemplateProcessing");
    if (!pp || !cJSON_AddItemToObject(root, "post_processor", pp)) {
        cJSON_Delete(pp);
        return false;
    }
    cJSON *single = cJSON_AddArrayToObject(pp, "single"), *pair = cJSON_AddArrayToObject(pp, "pair");
    cJSON *specials = cJSON_AddObjectToObject(pp, "special_tokens");
    return single && pair && specials && template_seq(single, bt, et, "A", 0) &&
           template_seq(pair, bt, et, "A", 0) && template_seq(pair, bt, et, "B", 1) &&
           special_entry(specials, v, bos) && special_entry(specials, v, eos);
}

static bool add_vocab(const vocab_index *x, cJSON *model) {
    const qp_vocab *v = x->v;
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int64_t i = 0; vocab && i < v->n_tokens; i++)
        if (lookup(x, v->tokens[i], v->token_lens[i]) == i &&
            !cJSON_AddNumberToObject(vocab, v->tokens[i], (double)i))
            return false;
    return vocab != NULL;
}

/* model: BPE over the vocabulary; SentencePiece with byte fallback, byte-level without. */
static qp_status bpe_model(const vocab_index *x, cJSON *root, bool ignore_merges, qp_err *e) {
    const qp_vocab *v = x->v;
    const bool spm = v->model == QP_TOK_SPM;
    cJSON *model = typed("BPE");
    bool ok = model && cJSON_AddItemToObject(root, "model", model);
    if (!ok) cJSON_Delete(model);
    ok = ok && cJSON_AddNullToObject(model, "dropout") &&
         cJSON_AddItemToObject(model, "unk_token", text_or_null(v, v->unk_id)) &&
         cJSON_AddNullToObject(model, "continuing_subword_prefix") &&
         cJSON_AddNullToObject(model, "end_of_word_suffix") && cJSON_AddFalseToObject(model, "fuse_unk") &&
         cJSON_AddBoolToObject(model, "byte_fallback", spm) &&
         cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges) && add_vocab(x, model);
    cJSON *merges = ok ? cJSON_AddArrayToObject(model, "merges") : NULL;
    if (!merges) return qp_fail(e, QP_ERR_NOMEM, "out of memory building tokenizer.json");
    return spm ? spm_merges(x, merges, e) : bpe_merges(v, merges, e);
}

/* model: Unigram, [piece, score] per id. */
static qp_status unigram_model(const vocab_index *x, cJSON *root, qp_err *e) {
    const qp_vocab *v = x->v;
    cJSON *model = typed("Unigram");
    bool ok = model && cJSON_AddItemToObject(root, "model", model);
    if (!ok) cJSON_Delete(model);
    ok = ok && cJSON_AddItemToObject(model, "unk_id", v->unk_id >= 0 && v->unk_id < v->n_tokens
                                                          ? cJSON_CreateNumber(v->unk_id) : cJSON_CreateNull());
    cJSON *vocab = ok ? cJSON_AddArrayToObject(model, "vocab") : NULL;
    for (int64_t i = 0; vocab && i < v->n_tokens; i++) {
        cJSON *entry = cJSON_CreateArray();
        if (!entry || !cJSON_AddItemToArray(vocab, entry) || !cJSON_AddItemToArray(entry, cJSON_CreateString(v->tokens[i])) ||
            !cJSON_AddItemToArray(entry, cJSON_CreateNumber((double)piece_score(v, i))))
            vocab = NULL;
    }
    ok = vocab && cJSON_AddFalseToObject(model, "byte_fallback");
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory building tokenizer.json");
}

static qp_status write_tokenizer_json(const vocab_index *x, const char *dir, qp_err *e) {
    const qp_vocab *v = x->v;
    bool ignore_merges = false;
    const char *regex = v->model == QP_TOK_BPE ? qp_hf_pre_regex(v->pre, &ignore_merges) : NULL;
    if (v->model == QP_TOK_BPE && !regex)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the byte-level pre-tokenizer '%s' has no tokenizer.json "
                       "form in quantpack yet", x->m->path, v->pre);
    if (v->model != QP_TOK_BPE && v->model != QP_TOK_SPM && v->model != QP_TOK_UGM)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: a WordPiece vocabulary is not written as tokenizer.json "
                       "yet", x->m->path);
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddStringToObject(root, "version", "1.0") && cJSON_AddNullToObject(root, "truncation") &&
              cJSON_AddNullToObject(root, "padding") && add_added_tokens(v, root) &&
              (regex                     ? bpe_pipeline(root, regex)
               : v->model == QP_TOK_UGM ? unigram_pipeline(root, v)
                                        : spm_pipeline(root, !x->m->vocab.no_space_prefix)) &&
              post_processor(x->m, root);
    qp_status s = !ok                     ? qp_fail(e, QP_ERR_NOMEM, "out of memory")
                  : v->model == QP_TOK_UGM ? unigram_model(x, root, e)
                                           : bpe_model(x, root, ignore_merges, e);
    if (s != QP_OK) {
        cJSON_Delete(root);
        return s;
    }
    return qp_json_write_file(dir, "tokenizer.json", root, true, e);
}

/* ---- tokenizer_config.json, special_tokens_map.json ------------------------------------------ */

static const struct {
    const char *key;
    size_t id_offset;
} k_specials[] = {
    {"bos_token", offsetof(qp_vocab, bos_id)},
    {"eos_token", offsetof(qp_vocab, eos_id)},
    {"unk_token", offsetof(qp_vocab, unk_id)},
    {"pad_token", offsetof(qp_vocab, pad_id)},
};

static int32_t special_id(const qp_vocab *v, size_t k) {
    int32_t id;
    memcpy(&id, (const char *)v + k_specials[k].id_offset, sizeof id);
    return id >= 0 && id < v->n_tokens ? id : -1;
}

/* {content, lstrip, normalized, rstrip, single_word[, special]} as transformers writes them. */
static cJSON *token_object(const qp_vocab *v, int64_t id, bool with_special) {
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "content", v->tokens[id]) && cJSON_AddFalseToObject(o, "lstrip") &&
              cJSON_AddFalseToObject(o, "normalized") && cJSON_AddFalseToObject(o, "rstrip") &&
              cJSON_AddFalseToObject(o, "single_word") &&
              (!with_special || cJSON_AddBoolToObject(o, "special", token_type(v, id) != QP_TOKTYPE_USER_DEFINED));
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

static bool added_tokens_decoder(const qp_vocab *v, cJSON *cfg) {
    cJSON *dec = cJSON_AddObjectToObject(cfg, "added_tokens_decoder");
    for (int64_t i = 0; dec && i < v->n_tokens; i++) {
        if (!is_added(v, i)) continue;
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)i);
        if (!cJSON_AddItemToObject(dec, key, token_object(v, i, true))) return false;
    }
    return dec != NULL;
}

static qp_status write_tokenizer_config(const qp_model *m, const char *dir, qp_err *e) {
    const qp_vocab *v = &m->vocab;
    const char *chat = qp_model_chat_template(m);
    cJSON *cfg = cJSON_CreateObject();
    bool ok = cfg && cJSON_AddBoolToObject(cfg, "add_bos_token", qp_model_adds_bos(m)) &&
              cJSON_AddBoolToObject(cfg, "add_eos_token", v->add_eos) && added_tokens_decoder(v, cfg);
    for (size_t k = 0; ok && k < sizeof k_specials / sizeof k_specials[0]; k++)
        if (special_id(v, k) >= 0) ok = cJSON_AddStringToObject(cfg, k_specials[k].key, v->tokens[special_id(v, k)]);
    ok = ok && cJSON_AddFalseToObject(cfg, "clean_up_tokenization_spaces") &&
         (m->arch.max_pos <= 0 || cJSON_AddNumberToObject(cfg, "model_max_length", (double)m->arch.max_pos)) &&
         cJSON_AddStringToObject(cfg, "tokenizer_class", "PreTrainedTokenizerFast") &&
         (!chat || cJSON_AddStringToObject(cfg, "chat_template", chat));
    return qp_json_write_file(dir, "tokenizer_config.json", cfg, ok, e);
}

static qp_status write_special_tokens_map(const qp_vocab *v, const char *dir, qp_err *e) {
    cJSON *map = cJSON_CreateObject();
    bool ok = map != NULL;
    for (size_t k = 0; ok && k < sizeof k_specials / sizeof k_specials[0]; k++)
        if (special_id(v, k) >= 0)
            ok = cJSON_AddItemToObject(map, k_specials[k].key, token_object(v, special_id(v, k), false));
    return qp_json_write_file(dir, "special_tokens_map.json", map, ok, e);
}

qp_status qp_hf_tokenizer_write(const qp_model *m, const char *dir, qp_err *e) {
    const qp_vocab *v = &m->vocab;
    if (v->model == QP_TOK_NONE || v->n_tokens <= 0 || !v->tokens || !v->token_lens)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: the model has no vocabulary", m->path);
    vocab_index x = {.m = m, .v = v};
    qp_status s = index_vocab(&x, e);
    if (s == QP_OK && v->hf_json) {
        char *path = qp_path_join(dir, "tokenizer.json");
        s = path ? qp_file_write_atomic(path, v->hf_json, v->hf_json_len, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
        qp_free(path);
    } else if (s == QP_OK) {
        s = write_tokenizer_json(&x, dir, e);
    }
    qp_strmap_free(&x.ids);
    if (s == QP_OK) s = write_tokenizer_config(m, dir, e);
    if (s == QP_OK) s = write_special_tokens_map(v, dir, e);
    return s;
}
