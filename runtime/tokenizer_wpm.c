/* WordPiece ("bert" vocabularies, as llama.cpp's converter writes them: word-initial pieces carry
 * a U+2581 prefix, continuation pieces are bare). Normalisation as HF's BertNormalizer for
 * uncased models: control characters dropped, whitespace split, CJK ideographs and punctuation
 * isolated, accents stripped (NFD, Mn removed), lower case. Then greedy longest-match-first per
 * word; a word with no full segmentation (or over 100 characters) becomes [UNK]. */
#include <string.h>

#include "runtime/tokenizer_internal.h"
#include "runtime/unicode.h"

#define WPM_MAX_WORD_CHARS 100 /* HF WordPiece max_input_chars_per_word */

qp_status qp_tok_wpm_init(qp_tokenizer *t, qp_err *e) {
    (void)e;
    uint32_t mx = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        uint32_t l = t->v->token_lens ? t->v->token_lens[id]
                                      : (uint32_t)(t->v->tokens[id] ? strlen(t->v->tokens[id]) : 0);
        if (l > mx) mx = l;
    }
    t->max_token_len = mx;
    return QP_OK;
}

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_punct(uint32_t c, unsigned fl) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126) || (fl & QP_UC_P);
}

/* Segments one normalised word w[0..n) (bytes; nchars characters). */
static bool wpm_word(const qp_tokenizer *t, const char *w, size_t n, size_t nchars, char *buf,
                     qp_ids *out) {
    if (n == 0) return true;
    size_t mark = out->n;
    bool ok = nchars <= WPM_MAX_WORD_CHARS;
    for (size_t i = 0; ok && i < n;) {
        size_t max_end = n - i > t->max_token_len ? i + t->max_token_len : n;
        int32_t found = -1;
        size_t end;
        for (end = max_end; end > i; end--) {
            if (end < n && ((uint8_t)w[end] & 0xC0) == 0x80) continue; /* mid-character */
            size_t k = 0;
            if (i == 0) {
                memcpy(buf, "\xE2\x96\x81", 3);
                k = 3;
            }
            memcpy(buf + k, w + i, end - i);
            found = qp_tok_lookup(t, buf, k + end - i);
            if (found >= 0) break;
        }
        if (found < 0) {
            ok = false;
            break;
        }
        if (!qp_ids_push(out, found)) return false;
        i = end;
    }
    if (ok) return true;
    out->n = mark; /* no full segmentation: the whole word is unknown */
    if (t->v->unk_id >= 0 && t->v->unk_id < t->n_tokens) return qp_ids_push(out, t->v->unk_id);
    return true;
}

qp_status qp_tok_wpm_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                            qp_err *e) {
    /* Normalised text is at most 16 bytes per code point; words are cut at 101 characters, so
     * a word buffer of 101 * 16 bytes plus the lookup buffer is enough. */
    enum { WORD_CAP = (WPM_MAX_WORD_CHARS + 1) * 16 };
    char *word = qp_malloc(WORD_CAP);
    char *buf = qp_malloc(WORD_CAP + 3);
    if (!word || !buf) {
        qp_free(word);
        qp_free(buf);
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
    }
    size_t wn = 0, wchars = 0;
    bool ok = true;
    const uint8_t *p = (const uint8_t *)text;
    for (size_t i = 0; ok && i < len;) {
        uint32_t c;
        size_t bad = 1, k = p[i] < 0x80 ? (c = p[i], 1) : qp_utf8_decode(p + i, len - i, &c, &bad);
        if (!k) {
            c = QP_UNICODE_REPLACEMENT;
            k = bad;
        }
        i += k;
        unsigned f0 = qp_unicode_flags(c);
        if (c == 0 || c == QP_UNICODE_REPLACEMENT ||
            ((f0 & QP_UC_C) && c != '\t' && c != '\n' && c != '\r'))
            continue;
        char norm[16];
        size_t nn = is_cjk(c) ? qp_utf8_encode(c, norm) : qp_unicode_wpm_normalize(c, norm);
        for (size_t j = 0; ok && j < nn;) {
            uint32_t d;
            size_t b2 = 1, dk = qp_utf8_decode((const uint8_t *)norm + j, nn - j, &d, &b2);
            if (!dk) break;
            unsigned f = qp_unicode_flags(d);
            bool ws = (f & QP_UC_WS) != 0, iso = is_punct(d, f) || is_cjk(d);
            if (ws || iso) {
                ok = wpm_word(t, word, wn, wchars, buf, out);
                wn = wchars = 0;
                if (ok && iso) ok = wpm_word(t, norm + j, dk, 1, buf, out);
            } else if (wchars <= WPM_MAX_WORD_CHARS) { /* longer words are [UNK] anyway */
                memcpy(word + wn, norm + j, dk);
                wn += dk;
                wchars++;
            }
            j += dk;
        }
    }
    if (ok) ok = wpm_word(t, word, wn, wchars, buf, out);
    qp_free(word);
    qp_free(buf);
    return ok ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory while encoding");
}
