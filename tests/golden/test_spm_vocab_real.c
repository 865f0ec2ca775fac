/* Tokenizer-file readers on real files: Meta's Llama 2 tokenizer.model (SentencePiece protobuf)
 * and its llama2.c export tokenizer.bin must both equal the vocabulary llama.cpp wrote into
 * ggml-vocab-llama-spm.gguf (tokens byte for byte, scores bit for bit, token types), which is
 * read here by a tiny independent GGUF parser and, when it works, also by qp_model_open. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "qp_test_util.h"

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd_u64(const uint8_t *p) { return rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }

/* ---- tiny GGUF key/value walker: finds the three tokenizer arrays and a few scalars ---------- */
typedef struct gg_vocab {
    const uint8_t *tokens, *scores, *types;
    uint64_t n_tokens, n_scores, n_types;
    int64_t bos, eos, unk;
    int add_bos;
    char model[32];
} gg_vocab;

static bool gg_skip(const uint8_t *b, size_t size, size_t *p, uint32_t t) {
    static const size_t k[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (t == 8) {
        if (*p + 8 > size) return false;
        uint64_t n = rd_u64(b + *p);
        if (n > size - *p - 8) return false;
        *p += 8 + n;
        return true;
    }
    if (t == 9) {
        if (*p + 12 > size) return false;
        uint32_t at = rd_u32(b + *p);
        uint64_t n = rd_u64(b + *p + 4);
        *p += 12;
        for (uint64_t i = 0; i < n; i++)
            if (!gg_skip(b, size, p, at)) return false;
        return true;
    }
    if (t >= 13 || !k[t] || *p + k[t] > size) return false;
    *p += k[t];
    return true;
}

static bool gg_parse(const uint8_t *b, size_t size, gg_vocab *v) {
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->unk = -1;
    v->add_bos = -1;
    if (size < 24 || memcmp(b, "GGUF", 4) != 0) return false;
    uint64_t nkv = rd_u64(b + 16);
    size_t p = 24;
    for (uint64_t i = 0; i < nkv; i++) {
        if (p + 8 > size) return false;
        uint64_t kl = rd_u64(b + p);
        if (kl > 200 || p + 8 + kl + 4 > size) return false;
        char key[256];
        memcpy(key, b + p + 8, kl);
        key[kl] = 0;
        p += 8 + kl;
        uint32_t t = rd_u32(b + p);
        p += 4;
        if (t == 9 && p + 12 <= size) {
            uint64_t n = rd_u64(b + p + 4);
            if (!strcmp(key, "tokenizer.ggml.tokens")) { v->tokens = b + p + 12; v->n_tokens = n; }
            if (!strcmp(key, "tokenizer.ggml.scores")) { v->scores = b + p + 12; v->n_scores = n; }
            if (!strcmp(key, "tokenizer.ggml.token_type")) { v->types = b + p + 12; v->n_types = n; }
        }
        if (t == 4 && p + 4 <= size) {
            if (!strcmp(key, "tokenizer.ggml.bos_token_id")) v->bos = rd_u32(b + p);
            if (!strcmp(key, "tokenizer.ggml.eos_token_id")) v->eos = rd_u32(b + p);
            if (!strcmp(key, "tokenizer.ggml.unknown_token_id")) v->unk = rd_u32(b + p);
        }
        if (t == 7 && p < size && !strcmp(key, "tokenizer.ggml.add_bos_token")) v->add_bos = b[p];
        if (t == 8 && p + 8 <= size && !strcmp(key, "tokenizer.ggml.model")) {
            uint64_t n = rd_u64(b + p);
            if (n < sizeof v->model && n <= size - p - 8) memcpy(v->model, b + p + 8, n);
        }
        if (!gg_skip(b, size, &p, t)) return false;
    }
    return v->tokens && v->scores && v->types;
}

/* Compares a vocabulary read by us with the GGUF's arrays; returns mismatch counts. */
static void compare(const char *what, const qp_vocab *v, const gg_vocab *g, bool check_scores,
                    bool check_types) {
    QP_CHECK_MSG(v->n_tokens == (int64_t)g->n_tokens, "%s: %lld tokens vs %llu", what,
                 (long long)v->n_tokens, (unsigned long long)g->n_tokens);
    if (v->n_tokens != (int64_t)g->n_tokens) return;
    size_t p = 0;
    int64_t bad_tok = 0, bad_score = 0, bad_type = 0, first_bad = -1;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        uint64_t len = rd_u64(g->tokens + p);
        if (len != v->token_lens[i] || memcmp(g->tokens + p + 8, v->tokens[i], len) != 0 ||
            strlen(v->tokens[i]) != v->token_lens[i]) {
            bad_tok++;
            if (first_bad < 0) first_bad = i;
        }
        p += 8 + len;
        if (check_scores) bad_score += memcmp(g->scores + 4 * i, &v->scores[i], 4) != 0;
        if (check_types) bad_type += (int32_t)rd_u32(g->types + 4 * i) != v->types[i];
    }
    QP_CHECK_MSG(bad_tok == 0, "%s: %lld pieces differ (first id %lld)", what, (long long)bad_tok,
                 (long long)first_bad);
    QP_CHECK_MSG(bad_score == 0, "%s: %lld scores differ", what, (long long)bad_score);
    QP_CHECK_MSG(bad_type == 0, "%s: %lld types differ", what, (long long)bad_type);
    QP_CHECK_EQ_INT(v->bos_id, g->bos);
    QP_CHECK_EQ_INT(v->eos_id, g->eos);
    QP_CHECK_EQ_INT(v->unk_id, g->unk);
    QP_CHECK_EQ_INT(v->add_bos, g->add_bos == 1);
    QP_CHECK(v->model == QP_TOK_SPM && strcmp(g->model, "llama") == 0);
}

static qp_model *read_with(qp_status (*fn)(qp_model *, const char *, qp_err *), const char *path) {
    qp_model *m = NULL;
    qp_err e = {0};
    if (qp_model_new(QP_FORMAT_UNKNOWN, path, &m, &e) != QP_OK) return NULL;
    qp_status s = fn(m, path, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) {
        qp_model_close(m);
        return NULL;
    }
    return m;
}

int main(void) {
    const char *dir = qp_test_real_dir();
    char model_path[1024], bin_path[1024], gguf_path[1024], tok512[1024];
    qp_test_path(model_path, sizeof model_path, dir, "tokenizer.model");
    qp_test_path(bin_path, sizeof bin_path, dir, "tokenizer.bin");
    qp_test_path(gguf_path, sizeof gguf_path, dir, "vocab/ggml-vocab-llama-spm.gguf");
    qp_test_path(tok512, sizeof tok512, dir, "tok512.bin");
    size_t ngg = 0;
    uint8_t *gb = qp_test_read_file(gguf_path, &ngg);
    if (!gb || !qp_path_exists(model_path) || !qp_path_exists(bin_path) || !qp_path_exists(tok512))
        QP_SKIP("tokenizer.model, tokenizer.bin, tok512.bin or vocab/ggml-vocab-llama-spm.gguf not in %s",
                dir);
    gg_vocab g;
    QP_CHECK(gg_parse(gb, ngg, &g));
    QP_CHECK_EQ_INT(g.n_tokens, 32000);
    QP_CHECK_EQ_INT(g.n_scores, 32000);
    QP_CHECK_EQ_INT(g.n_types, 32000);

    /* tokenizer.model: pieces as stored, scores and types */
    qp_model *mm = read_with(qp_vocab_read_spm_model, model_path);
    if (mm) {
        compare("tokenizer.model", &mm->vocab, &g, true, true);
        QP_CHECK_EQ_INT(mm->vocab.pad_id, -1);
        const qp_meta *md = qp_model_meta(mm, "sentencepiece.model_type");
        QP_CHECK(md && md->v.u == 2); /* Llama 2's tokenizer is BPE */
        md = qp_model_meta(mm, "sentencepiece.byte_fallback");
        QP_CHECK(md && md->type == QP_META_BOOL && md->v.b);
        md = qp_model_meta(mm, "sentencepiece.add_dummy_prefix");
        QP_CHECK(md && md->type == QP_META_BOOL && md->v.b);
    }
    /* tokenizer.bin: llama2.c's export, normalised back (spaces -> U+2581, "\n<s>\n" -> "<s>") */
    qp_model *mb = read_with(qp_vocab_read_llama2c_bin, bin_path);
    if (mb) compare("tokenizer.bin", &mb->vocab, &g, true, true);
    /* the two sources agree with each other too, piece for piece */
    if (mm && mb && mm->vocab.n_tokens == mb->vocab.n_tokens) {
        int64_t same = 0;
        for (int64_t i = 0; i < mm->vocab.n_tokens; i++)
            same += mm->vocab.token_lens[i] == mb->vocab.token_lens[i] &&
                    memcmp(mm->vocab.tokens[i], mb->vocab.tokens[i], mm->vocab.token_lens[i]) == 0 &&
                    mm->vocab.types[i] == mb->vocab.types[i];
        QP_CHECK_EQ_INT(same, 32000);
    }
    /* the GGUF through our own reader, once it reads GGUF */
    qp_model *gm = NULL;
    qp_err ge = {0};
    qp_status gs = qp_model_open(gguf_path, NULL, &gm, &ge);
    if (gs == QP_OK) {
        compare("ggml-vocab-llama-spm.gguf via qp_model_open", &gm->vocab, &g, true, true);
        if (mm && gm->vocab.n_tokens == mm->vocab.n_tokens) {
            int64_t same = 0;
            for (int64_t i = 0; i < mm->vocab.n_tokens; i++)
                same += gm->vocab.token_lens[i] == mm->vocab.token_lens[i] &&
                        memcmp(gm->vocab.tokens[i], mm->vocab.tokens[i], mm->vocab.token_lens[i]) == 0;
            QP_CHECK_EQ_INT(same, 32000);
        }
        qp_model_close(gm);
    } else {
        fprintf(stderr, "note: GGUF reader unavailable (%s: %s); compared through this test's own "
                        "GGUF parser only\n", qp_status_name(gs), ge.msg);
    }
    /* tok512.bin: 512 tokens, ids 3..258 the byte tokens */
    qp_model *ms = read_with(qp_vocab_read_llama2c_bin, tok512);
    if (ms) {
        QP_CHECK_EQ_INT(ms->vocab.n_tokens, 512);
        int bytes = 0;
        for (int64_t i = 0; i < ms->vocab.n_tokens; i++)
            bytes += ms->vocab.types[i] == QP_TOKTYPE_BYTE && i >= 3 && i <= 258;
        QP_CHECK_EQ_INT(bytes, 256);
    }
    qp_model_close(mm);
    qp_model_close(mb);
    qp_model_close(ms);
    free(gb);
    return qp_test_finish();
}
