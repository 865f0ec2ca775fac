/* A random Llama GGUF that llama.cpp loads, written with our GGUF writer in convert_hf_to_gguf's
 * tensor order: keys of a llama2-style model, a vocabulary of <unk> <s> </s> and filler pieces
 * "tok<i>", weights ~ N(0, 0.03) from xorshift64* (a sum of 4 uniforms, one process-wide stream
 * from a fixed seed, so a test's files are the same every run), norms ~ 1 and kept F32 (as in
 * llama.cpp's own F16 files). Used by the peer tests; include after qp_test.h. */
#ifndef QP_RANDOM_LLAMA_GGUF_H
#define QP_RANDOM_LLAMA_GGUF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "quantpack/quantpack.h"
#include "writers/gguf_writer.h"

typedef struct random_llama {
    const char *label; /* general.name */
    int n_embd, n_ff, n_layer, n_head, n_kv, n_vocab;
    bool tied;         /* no output.weight */
    bool f16;          /* F16 matrices (general.file_type 1), else F32 */
    bool outliers;     /* every value at index 5 mod 997 of a tensor x20 */
    float output_gain; /* output.weight values x this (0: x1) */
} random_llama;

static uint64_t g_random_llama_rng = 0x9E3779B97F4A7C15ull;
static inline float random_llama_frand(void) {
    float s = 0;
    for (int i = 0; i < 4; i++) {
        g_random_llama_rng ^= g_random_llama_rng >> 12;
        g_random_llama_rng ^= g_random_llama_rng << 25;
        g_random_llama_rng ^= g_random_llama_rng >> 27;
        uint64_t r = g_random_llama_rng * 0x2545F4914F6CDD1Dull;
        s += (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    return s * 0.05f;
}

static const char *const k_random_llama_tok_models[] = {"none", "llama", "gpt2", "bert", "t5"};

/* A unigram ("t5") vocabulary's own keys: unk id, add_space_prefix (only when true: llama.cpp's
 * default is false), remove_extra_whitespaces, precompiled_charsmap. */
static inline bool random_llama_unigram_keys(const qp_vocab *v, qp_gguf_writer *w, qp_err *e) {
    bool ok = v->unk_id < 0 || qp_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk_id, e) == QP_OK;
    if (ok && !v->no_space_prefix) ok = qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", true, e) == QP_OK;
    if (ok) ok = qp_gguf_writer_add_bool(w, "tokenizer.ggml.remove_extra_whitespaces", v->remove_extra_spaces, e) == QP_OK;
    if (ok && v->charsmap)
        ok = qp_gguf_writer_add_array(w, "tokenizer.ggml.precompiled_charsmap", QP_META_U8, v->charsmap_len,
                                      v->charsmap, e) == QP_OK;
    return ok;
}

/* A real vocabulary's keys (tokens, types, merges, ids) with tokenizer.ggml.pre = pre, as
 * convert_hf_to_gguf writes them. */
static inline bool random_llama_vocab_keys(const qp_vocab *v, const char *pre, qp_gguf_writer *w, qp_err *e) {
    const char *model = k_random_llama_tok_models[v->model];
    uint64_t nv = (uint64_t)v->n_tokens;
    bool ok = qp_gguf_writer_add_str(w, "tokenizer.ggml.model", model, strlen(model), e) == QP_OK &&
              qp_gguf_writer_add_str(w, "tokenizer.ggml.pre", pre, strlen(pre), e) == QP_OK &&
              qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", v->tokens, v->token_lens, nv, e) == QP_OK;
    uint8_t *types = qp_malloc((size_t)nv * 4);
    ok = ok && types;
    for (uint64_t i = 0; ok && i < nv; i++) qp_store_u32le(types + 4 * i, (uint32_t)(v->types ? v->types[i] : 1));
    ok = ok && qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, nv, types, e) == QP_OK;
    qp_free(types);
    if (ok && v->n_merges > 0)
        ok = qp_gguf_writer_add_str_array(w, "tokenizer.ggml.merges", v->merges, NULL, (uint64_t)v->n_merges, e) == QP_OK;
    if (ok && v->scores) {
        uint8_t *sc = qp_malloc((size_t)nv * 4);
        ok = sc != NULL;
        for (uint64_t i = 0; ok && i < nv; i++) qp_store_f32le(sc + 4 * i, v->scores[i]);
        ok = ok && qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, nv, sc, e) == QP_OK;
        qp_free(sc);
    }
    if (ok && v->model == QP_TOK_UGM) ok = random_llama_unigram_keys(v, w, e);
    if (ok && v->bos_id >= 0) ok = qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id, e) == QP_OK;
    if (ok && v->eos_id >= 0) ok = qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id, e) == QP_OK;
    return ok && qp_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false, e) == QP_OK &&
           qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e) == QP_OK;
}

/* vocab NULL: the filler vocabulary. */
static inline bool random_llama_keys(const random_llama *s, const qp_vocab *vocab, const char *pre,
                                     qp_gguf_writer *w, qp_err *e) {
    bool ok = qp_gguf_writer_add_str(w, "general.architecture", "llama", 5, e) == QP_OK &&
              qp_gguf_writer_add_str(w, "general.name", s->label, strlen(s->label), e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.context_length", 256, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)s->n_embd, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.block_count", (uint32_t)s->n_layer, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)s->n_ff, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)s->n_head, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)s->n_kv, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "llama.rope.dimension_count",
                                     (uint32_t)(s->n_embd / s->n_head), e) == QP_OK &&
              qp_gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f, e) == QP_OK &&
              qp_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, e) == QP_OK &&
              qp_gguf_writer_add_u32(w, "general.file_type", s->f16 ? 1 : 0, e) == QP_OK;
    if (vocab) return ok && random_llama_vocab_keys(vocab, pre, w, e);
    ok = ok && qp_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, e) == QP_OK;
    char **toks = qp_calloc((size_t)s->n_vocab, sizeof *toks);
    uint8_t *scores = qp_malloc((size_t)s->n_vocab * 4), *types = qp_malloc((size_t)s->n_vocab * 4);
    ok = ok && toks && scores && types;
    for (int i = 0; ok && i < s->n_vocab; i++) {
        char buf[32];
        if (i == 0) snprintf(buf, sizeof buf, "<unk>");
        else if (i == 1) snprintf(buf, sizeof buf, "<s>");
        else if (i == 2) snprintf(buf, sizeof buf, "</s>");
        else snprintf(buf, sizeof buf, "tok%d", i);
        toks[i] = qp_strdup(buf);
        ok = toks[i] != NULL;
        qp_store_f32le(scores + 4 * i, (float)-i);
        qp_store_u32le(types + 4 * i, i == 0 ? 2u : i < 3 ? 3u : 1u);
    }
    uint64_t nv = (uint64_t)s->n_vocab;
    ok = ok && qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, nv, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, nv, scores, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, nv, types, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e) == QP_OK;
    for (int i = 0; toks && i < s->n_vocab; i++) qp_free(toks[i]);
    qp_free(toks);
    qp_free(scores);
    qp_free(types);
    return ok;
}

/* One tensor's values (n of them, F16 or F32 little-endian), drawn in element order. */
static inline bool random_llama_data(qp_gguf_writer *w, int64_t n, bool f16, bool norm,
                                     bool outliers, float gain, qp_err *e) {
    size_t es = f16 ? 2 : 4;
    uint8_t *b = qp_malloc((size_t)n * es);
    if (!b) return false;
    for (int64_t i = 0; i < n; i++) {
        float v = norm ? 1.0f + random_llama_frand() : random_llama_frand() * gain;
        if (outliers && i % 997 == 5) v *= 20.0f;
        if (f16) qp_store_u16le(b + 2 * i, qp_fp32_to_fp16(v));
        else qp_store_f32le(b + 4 * i, v);
    }
    bool ok = qp_gguf_writer_write_tensor(w, b, (size_t)n * es, e) == QP_OK;
    qp_free(b);
    return ok;
}

/* Writes the model s describes to path with vocab (n_vocab must be its size) and pre, or the
 * filler vocabulary when vocab is NULL; false with e set on failure (nothing left at path). */
static inline bool random_llama_write_vocab(const random_llama *s, const qp_vocab *vocab, const char *pre,
                                            const char *path, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
    bool ok = random_llama_keys(s, vocab, pre, w, e);
    int kv = s->n_embd / s->n_head * s->n_kv;
    typedef struct td { char name[64]; int64_t ne0, ne1; } td; /* ne1 1: a norm */
    int nt = 3 + 9 * s->n_layer;
    td *ts = qp_calloc((size_t)nt, sizeof *ts);
    if (!ts) ok = false;
    int k = 0;
#define RL_TD(ne0_, ne1_, ...)                                                                   \
    (snprintf(ts[k].name, sizeof ts[k].name, __VA_ARGS__), ts[k].ne0 = ne0_, ts[k++].ne1 = ne1_)
    if (ok) {
        RL_TD(s->n_embd, s->n_vocab, "token_embd.weight");
        for (int l = 0; l < s->n_layer; l++) {
            RL_TD(s->n_embd, 1, "blk.%d.attn_norm.weight", l);
            RL_TD(s->n_embd, s->n_embd, "blk.%d.attn_q.weight", l);
            RL_TD(s->n_embd, kv, "blk.%d.attn_k.weight", l);
            RL_TD(s->n_embd, kv, "blk.%d.attn_v.weight", l);
            RL_TD(s->n_embd, s->n_embd, "blk.%d.attn_output.weight", l);
            RL_TD(s->n_embd, 1, "blk.%d.ffn_norm.weight", l);
            RL_TD(s->n_embd, s->n_ff, "blk.%d.ffn_gate.weight", l);
            RL_TD(s->n_embd, s->n_ff, "blk.%d.ffn_up.weight", l);
            RL_TD(s->n_ff, s->n_embd, "blk.%d.ffn_down.weight", l);
        }
        RL_TD(s->n_embd, 1, "output_norm.weight");
        if (!s->tied) RL_TD(s->n_embd, s->n_vocab, "output.weight");
    }
#undef RL_TD
    for (int i = 0; ok && i < k; i++) {
        int64_t ne[2] = {ts[i].ne0, ts[i].ne1};
        bool f16 = s->f16 && ts[i].ne1 > 1;
        ok = qp_gguf_writer_add_tensor(w, ts[i].name, f16 ? QP_ENC_F16 : QP_ENC_F32,
                                       ts[i].ne1 > 1 ? 2 : 1, ne, e) == QP_OK;
    }
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (int i = 0; ok && i < k; i++) {
        bool norm = ts[i].ne1 == 1;
        float gain = !strcmp(ts[i].name, "output.weight") && s->output_gain != 0 ? s->output_gain : 1.0f;
        ok = random_llama_data(w, ts[i].ne0 * ts[i].ne1, s->f16 && !norm, norm, s->outliers, gain, e);
    }
    qp_free(ts);
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

static inline bool random_llama_write(const random_llama *s, const char *path, qp_err *e) {
    return random_llama_write_vocab(s, NULL, NULL, path, e);
}

#endif
