/* The llama2.c reader on the real stories260K.bin + tok512.bin (karpathy/tinyllamas), checked
 * against the raw file bytes (offsets computed here from the export.py layout, independently of
 * the reader) and against stories260K.gguf, written by llama.cpp's convert-llama2c-to-ggml:
 * every tensor must be bit-identical and the vocabulary equal after normalisation.
 * The GGUF side goes through qp_model_open when the GGUF reader works, else through a tiny
 * GGUF parser in this file (so the comparison always runs against the peer's file). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"

static int32_t rd_i32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}
static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- a tiny GGUF v3 parser (just enough for this file: strings, arrays, tensor infos) ------- */
typedef struct mini_tensor {
    char name[96];
    uint32_t n_dims, type;
    uint64_t ne[4];
    const uint8_t *data;
} mini_tensor;

typedef struct mini_gguf {
    const uint8_t *buf;
    size_t size;
    mini_tensor t[128];
    uint64_t n_t;
    const uint8_t *tokens, *scores, *types; /* array payloads */
    uint64_t n_tokens;
    bool ok;
} mini_gguf;

static size_t mini_scalar_size(uint32_t t) {
    static const size_t k[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? k[t] : 0;
}

/* Skips one value of type t at *p; false when it runs off the end. */
static bool mini_skip(const mini_gguf *g, size_t *p, uint32_t t) {
    if (t == 8) {
        if (*p + 8 > g->size) return false;
        uint64_t n = rd_u64(g->buf + *p);
        if (n > g->size - *p - 8) return false;
        *p += 8 + n;
        return true;
    }
    if (t == 9) {
        if (*p + 12 > g->size) return false;
        uint32_t at = (uint32_t)rd_i32(g->buf + *p);
        uint64_t n = rd_u64(g->buf + *p + 4);
        *p += 12;
        for (uint64_t i = 0; i < n; i++)
            if (!mini_skip(g, p, at)) return false;
        return true;
    }
    size_t s = mini_scalar_size(t);
    if (!s || *p + s > g->size) return false;
    *p += s;
    return true;
}

static bool mini_gguf_parse(mini_gguf *g, const uint8_t *buf, size_t size) {
    memset(g, 0, sizeof *g);
    g->buf = buf;
    g->size = size;
    if (size < 24 || memcmp(buf, "GGUF", 4) != 0) return false;
    uint64_t nt = rd_u64(buf + 8), nkv = rd_u64(buf + 16);
    size_t p = 24;
    uint64_t align = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        if (p + 8 > size) return false;
        uint64_t kl = rd_u64(buf + p);
        if (kl > 200 || p + 8 + kl + 4 > size) return false;
        char key[256];
        memcpy(key, buf + p + 8, kl);
        key[kl] = 0;
        p += 8 + kl;
        uint32_t t = (uint32_t)rd_i32(buf + p);
        p += 4;
        if (t == 9 && p + 12 <= size) {
            uint64_t n = rd_u64(buf + p + 4);
            if (strcmp(key, "tokenizer.ggml.tokens") == 0) { g->tokens = buf + p + 12; g->n_tokens = n; }
            if (strcmp(key, "tokenizer.ggml.scores") == 0) g->scores = buf + p + 12;
            if (strcmp(key, "tokenizer.ggml.token_type") == 0) g->types = buf + p + 12;
        }
        if (strcmp(key, "general.alignment") == 0 && t == 4) align = (uint32_t)rd_i32(buf + p);
        if (!mini_skip(g, &p, t)) return false;
    }
    if (nt > 128) return false;
    uint64_t offs[128];
    for (uint64_t i = 0; i < nt; i++) {
        mini_tensor *t = &g->t[i];
        if (p + 8 > size) return false;
        uint64_t nl = rd_u64(buf + p);
        if (nl >= sizeof t->name || p + 8 + nl + 4 > size) return false;
        memcpy(t->name, buf + p + 8, nl);
        t->name[nl] = 0;
        p += 8 + nl;
        t->n_dims = (uint32_t)rd_i32(buf + p);
        p += 4;
        if (t->n_dims > 4 || p + 8 * t->n_dims + 12 > size) return false;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++, p += 8) t->ne[d] = rd_u64(buf + p);
        t->type = (uint32_t)rd_i32(buf + p);
        offs[i] = rd_u64(buf + p + 4);
        p += 12;
    }
    size_t data = (p + align - 1) / align * align;
    for (uint64_t i = 0; i < nt; i++) {
        if (offs[i] > size - data) return false;
        g->t[i].data = buf + data + offs[i];
    }
    g->n_t = nt;
    g->ok = true;
    return true;
}

static const mini_tensor *mini_find(const mini_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_t; i++)
        if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
    return NULL;
}

/* ---- expected layout of a v0 checkpoint, from export.py's legacy_export -------------------- */
typedef struct expect {
    char name[64];
    size_t offset;  /* bytes */
    int64_t ne0, ne1;
} expect;

static int build_expectations(const int32_t *h, expect *ex) {
    int64_t dim = h[0], hid = h[1], L = h[2], nh = h[3], nkv = h[4], voc = h[5];
    int64_t kvd = dim / nh * nkv;
    size_t off = 28;
    int n = 0;
    /* groups stacked over all layers, in export order */
    struct { const char *fmt; int64_t ne0, ne1; int per_layer; } g[] = {
        {"token_embd.weight", dim, voc < 0 ? -voc : voc, 0},
        {"blk.%d.attn_norm.weight", dim, 1, 1},
        {"blk.%d.attn_q.weight", dim, dim, 1},
        {"blk.%d.attn_k.weight", dim, kvd, 1},
        {"blk.%d.attn_v.weight", dim, kvd, 1},
        {"blk.%d.attn_output.weight", dim, dim, 1},
        {"blk.%d.ffn_norm.weight", dim, 1, 1},
        {"blk.%d.ffn_gate.weight", dim, hid, 1},
        {"blk.%d.ffn_down.weight", hid, dim, 1},
        {"blk.%d.ffn_up.weight", dim, hid, 1},
        {"output_norm.weight", dim, 1, 0},
    };
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        int reps = g[k].per_layer ? (int)L : 1;
        for (int l = 0; l < reps; l++) {
            snprintf(ex[n].name, sizeof ex[n].name, g[k].fmt, l);
            ex[n].offset = off;
            ex[n].ne0 = g[k].ne0;
            ex[n].ne1 = g[k].ne1;
            off += (size_t)(g[k].ne0 * g[k].ne1) * 4;
            n++;
        }
    }
    return n;
}

int main(void) {
    char bin[1024], tok[1024], gguf[1024];
    const char *dir = qp_test_real_dir();
    qp_test_path(bin, sizeof bin, dir, "stories260K.bin");
    qp_test_path(tok, sizeof tok, dir, "tok512.bin");
    qp_test_path(gguf, sizeof gguf, dir, "stories260K.gguf");
    size_t nraw = 0, ngg = 0;
    uint8_t *raw = qp_test_read_file(bin, &nraw);
    uint8_t *ggraw = qp_test_read_file(gguf, &ngg);
    FILE *tf = fopen(tok, "rb");
    if (!raw || !ggraw || !tf) QP_SKIP("real fixtures stories260K.bin/.gguf or tok512.bin not in %s", dir);
    fclose(tf);

    /* header facts straight from the bytes, as fixtures/README.md states them */
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = rd_i32(raw + 4 * i);
    const int32_t want_h[7] = {64, 172, 5, 8, 4, 512, 512};
    for (int i = 0; i < 7; i++) QP_CHECK_EQ_INT(h[i], want_h[i]);
    QP_CHECK_EQ_INT(nraw, 1056540);

    QP_CHECK(qp_format_detect(bin) == QP_FORMAT_LLAMA2C);
    QP_CHECK(qp_format_detect(tok) == QP_FORMAT_UNKNOWN);

    qp_open_opts opts = {.tokenizer_path = tok};
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = qp_model_open(bin, &opts, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s != QP_OK) return qp_test_finish();

    QP_CHECK(m->format == QP_FORMAT_LLAMA2C);
    QP_CHECK_EQ_INT(m->format_version, 0);
    QP_CHECK(m->arch_name && strcmp(m->arch_name, "llama") == 0);
    QP_CHECK(m->arch.family == QP_FAMILY_LLAMA);
    QP_CHECK_EQ_INT(m->arch.hidden, 64);
    QP_CHECK_EQ_INT(m->arch.intermediate, 172);
    QP_CHECK_EQ_INT(m->arch.n_layers, 5);
    QP_CHECK_EQ_INT(m->arch.n_heads, 8);
    QP_CHECK_EQ_INT(m->arch.n_kv_heads, 4);
    QP_CHECK_EQ_INT(m->arch.head_dim, 8);
    QP_CHECK_EQ_INT(m->arch.vocab, 512);
    QP_CHECK_EQ_INT(m->arch.max_pos, 512);
    QP_CHECK(m->arch.tie_embeddings);
    QP_CHECK(m->arch.rope_style == QP_ROPE_NORM);
    QP_CHECK(m->arch.act == QP_ACT_SILU);
    QP_CHECK(m->arch.norm_eps == 1e-5f);
    QP_CHECK(m->arch.rope_theta == 10000.0f);
    QP_CHECK_EQ_INT(m->arch.bos_id, 1);
    QP_CHECK_EQ_INT(m->arch.eos_id, 2);

    /* tensors: count, names, shapes, and bytes at the offsets export.py implies */
    expect ex[64];
    int nex = build_expectations(h, ex);
    QP_CHECK_EQ_INT(nex, 47);
    QP_CHECK_EQ_INT(m->n_tensors, 47); /* shared classifier: no output.weight */
    QP_CHECK(qp_model_find(m, "output.weight") == NULL);
    for (int i = 0; i < nex; i++) {
        const qp_tensor *t = qp_model_find(m, ex[i].name);
        QP_CHECK_MSG(t != NULL, "missing %s", ex[i].name);
        if (!t) continue;
        QP_CHECK(t->canon && strcmp(t->canon, ex[i].name) == 0);
        QP_CHECK(t->enc == QP_ENC_F32);
        QP_CHECK_EQ_INT(t->n_dims, ex[i].ne1 > 1 ? 2 : 1);
        QP_CHECK_EQ_INT(t->ne[0], ex[i].ne0);
        QP_CHECK_EQ_INT(t->ne[1], ex[i].ne1);
        QP_CHECK_EQ_INT(t->offset, ex[i].offset);
        QP_CHECK_EQ_INT(t->nbytes, (size_t)(ex[i].ne0 * ex[i].ne1) * 4);
        QP_CHECK_MSG(t->nbytes == (size_t)(ex[i].ne0 * ex[i].ne1) * 4 &&
                     ex[i].offset + t->nbytes <= nraw &&
                     memcmp(t->data, raw + ex[i].offset, t->nbytes) == 0, "bytes of %s", ex[i].name);
    }
    /* after output_norm: freq_cis real + imag, seq_len * head_size / 2 each, then end of file */
    size_t freq_end = ex[nex - 1].offset + 64 * 4 + 2 * (512 * 8 / 2) * 4;
    QP_CHECK_EQ_INT(freq_end, nraw);

    const qp_tensor *emb = qp_model_find(m, "token_embd.weight");
    if (emb) {
        float first, last, rf, rl;
        memcpy(&first, emb->data, 4);
        memcpy(&last, emb->data + emb->nbytes - 4, 4);
        memcpy(&rf, raw + 28, 4);
        memcpy(&rl, raw + 28 + 4 * (512 * 64 - 1), 4);
        QP_CHECK(memcmp(&first, &rf, 4) == 0);
        QP_CHECK(memcmp(&last, &rl, 4) == 0);
        QP_CHECK(first == -0.29474878311157227f); /* bytes 50 e9 96 be at offset 28 */
    }

    /* tokenizer: tok512.bin normalised */
    const qp_vocab *v = &m->vocab;
    QP_CHECK(v->model == QP_TOK_SPM);
    QP_CHECK_EQ_INT(v->n_tokens, 512);
    QP_CHECK_EQ_INT(v->bos_id, 1);
    QP_CHECK_EQ_INT(v->eos_id, 2);
    QP_CHECK_EQ_INT(v->unk_id, 0);
    QP_CHECK(v->add_bos && !v->add_eos);
    if (v->n_tokens == 512) {
        QP_CHECK(strcmp(v->tokens[0], "<unk>") == 0 && v->types[0] == QP_TOKTYPE_UNKNOWN);
        QP_CHECK(strcmp(v->tokens[1], "<s>") == 0 && v->types[1] == QP_TOKTYPE_CONTROL);
        QP_CHECK(strcmp(v->tokens[2], "</s>") == 0 && v->types[2] == QP_TOKTYPE_CONTROL);
        int bytes_ok = 0;
        for (int i = 3; i <= 258; i++) {
            char want[8];
            snprintf(want, sizeof want, "<0x%02X>", i - 3);
            bytes_ok += strcmp(v->tokens[i], want) == 0 && v->types[i] == QP_TOKTYPE_BYTE;
        }
        QP_CHECK_EQ_INT(bytes_ok, 256);
        int byte_types = 0;
        for (int i = 0; i < 512; i++) byte_types += v->types[i] == QP_TOKTYPE_BYTE;
        QP_CHECK_EQ_INT(byte_types, 256);
        QP_CHECK(strcmp(v->tokens[259], "\xe2\x96\x81t") == 0); /* " t" in the .bin */
    }

    /* the peer's conversion: stories260K.gguf */
    mini_gguf *g = calloc(1, sizeof *g);
    QP_CHECK(g && mini_gguf_parse(g, ggraw, ngg));
    qp_model *gm = NULL;
    qp_err ge = {0};
    qp_status gs = qp_model_open(gguf, NULL, &gm, &ge);
    if (gs != QP_OK)
        fprintf(stderr, "note: GGUF reader unavailable (%s: %s); comparing through this test's own "
                        "GGUF parser only\n", qp_status_name(gs), ge.msg);
    if (g && g->ok) {
        QP_CHECK_EQ_INT(g->n_t, 48); /* the converter writes output.weight even when tied */
        int identical = 0;
        for (int64_t i = 0; i < m->n_tensors; i++) {
            const qp_tensor *t = &m->tensors[i];
            const mini_tensor *o = mini_find(g, t->canon);
            QP_CHECK_MSG(o != NULL, "%s missing in the GGUF", t->canon);
            if (!o) continue;
            bool same = o->type == 0 && o->n_dims == (uint32_t)t->n_dims &&
                        o->ne[0] == (uint64_t)t->ne[0] && o->ne[1] == (uint64_t)t->ne[1] &&
                        o->data + t->nbytes <= ggraw + ngg && memcmp(o->data, t->data, t->nbytes) == 0;
            QP_CHECK_MSG(same, "%s differs from the GGUF", t->canon);
            identical += same;
            if (gs == QP_OK) {
                const qp_tensor *q = qp_model_find(gm, t->canon);
                QP_CHECK_MSG(q && q->enc == QP_ENC_F32 && q->ne[0] == t->ne[0] && q->ne[1] == t->ne[1] &&
                             q->nbytes == t->nbytes && memcmp(q->data, t->data, t->nbytes) == 0,
                             "%s differs from the GGUF (read by qp_model_open)", t->canon);
            }
        }
        QP_CHECK_EQ_INT(identical, 47);
        const mini_tensor *out = mini_find(g, "output.weight");
        QP_CHECK(out && emb && memcmp(out->data, emb->data, emb->nbytes) == 0);
        /* vocabulary: the converter's tokens/scores/types equal our normalisation of tok512 */
        QP_CHECK_EQ_INT(g->n_tokens, 512);
        if (g->n_tokens == 512 && v->n_tokens == 512 && g->tokens && g->scores && g->types) {
            size_t p = 0;
            int tok_eq = 0, score_eq = 0, type_eq = 0;
            for (int i = 0; i < 512; i++) {
                uint64_t len = rd_u64(g->tokens + p);
                tok_eq += len == v->token_lens[i] && memcmp(g->tokens + p + 8, v->tokens[i], len) == 0;
                p += 8 + len;
                score_eq += memcmp(g->scores + 4 * i, &v->scores[i], 4) == 0; /* bits, -0.0 too */
                type_eq += rd_i32(g->types + 4 * i) == v->types[i];
            }
            QP_CHECK_EQ_INT(tok_eq, 512);
            QP_CHECK_EQ_INT(score_eq, 512);
            QP_CHECK_EQ_INT(type_eq, 512);
        }
    }
    qp_model_close(gm);
    free(g);
    qp_model_close(m);

    /* without --tokenizer: empty vocab and a problem saying so */
    s = qp_model_open(bin, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    if (s == QP_OK) {
        QP_CHECK_EQ_INT(m->vocab.n_tokens, 0);
        bool said = false;
        for (int64_t i = 0; i < m->n_problems; i++) said |= strstr(m->problems[i], "--tokenizer") != NULL;
        QP_CHECK(said);
        qp_model_close(m);
    }
    /* a tokenizer of the wrong size: tokenizer.bin has 32000 tokens, the checkpoint 512 */
    char big[1024];
    qp_test_path(big, sizeof big, dir, "tokenizer.bin");
    opts.tokenizer_path = big;
    qp_err_clear(&e);
    s = qp_model_open(bin, &opts, &m, &e);
    QP_CHECK_EQ_INT(s, QP_ERR_CORRUPT);
    QP_CHECK_MSG(strstr(e.msg, "32000") && strstr(e.msg, "512"), "%s", e.msg);
    free(raw);
    free(ggraw);
    return qp_test_finish();
}
