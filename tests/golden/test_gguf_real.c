/* Every real GGUF fixture opens, and what we read equals what others know about it:
 *  - facts from fixtures/README.md and from the llama2.c checkpoint stories260K.bin (the same weights,
 *    written by a different program) for stories260K.gguf, llama-2-tiny-random.gguf and the
 *    llama.cpp Q4_K_M quantization of stories260K;
 *  - llama.cpp's own GGUF parser (gguf_* in libggml-base.so from npm @node-llama-cpp/linux-x64,
 *    dlopen'ed from QP_PEER_DIR) for every tensor (name, type id, ne, absolute offset, bytes) and
 *    every key (type, value; arrays element by element, strings included) of every fixture.
 * Skips (77) when the real fixtures are absent; the llama.cpp comparison is skipped with a note
 * when the peer library is not installed. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "readers/gguf_meta.h"

/* ---- the few llama.cpp gguf_* prototypes we call (no headers ship with the npm package) ---- */
struct gguf_init_params_peer {
    bool no_alloc;
    void **ctx;
};
typedef struct peer_api {
    void *(*init)(const char *, struct gguf_init_params_peer);
    void (*free_)(void *);
    uint32_t (*version)(const void *);
    size_t (*data_offset)(const void *);
    int64_t (*n_kv)(const void *);
    const char *(*key)(const void *, int64_t);
    int (*kv_type)(const void *, int64_t);
    int (*arr_type)(const void *, int64_t);
    size_t (*arr_n)(const void *, int64_t);
    const void *(*arr_data)(const void *, int64_t);
    const char *(*arr_str)(const void *, int64_t, size_t);
    const void *(*val_data)(const void *, int64_t);
    const char *(*val_str)(const void *, int64_t);
    int64_t (*n_tensors)(const void *);
    const char *(*tensor_name)(const void *, int64_t);
    int (*tensor_type)(const void *, int64_t);
    size_t (*tensor_offset)(const void *, int64_t);
    size_t (*tensor_size)(const void *, int64_t);
    const int64_t *(*tensor_ne)(const void *, int64_t);
} peer_api;

static bool load_peer(peer_api *p) {
    char path[4096];
    snprintf(path, sizeof path, "%s/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so",
             qp_test_env("QP_PEER_DIR", "tests/peer/node_modules"));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "note: llama.cpp peer not loadable (%s); comparing facts only\n", dlerror());
        return false;
    }
#define SYM(field, name)                                                                         \
    do {                                                                                         \
        *(void **)(&p->field) = dlsym(h, name);                                                  \
        if (!p->field) { fprintf(stderr, "note: peer lacks %s\n", name); return false; }         \
    } while (0)
    SYM(init, "gguf_init_from_file");
    SYM(free_, "gguf_free");
    SYM(version, "gguf_get_version");
    SYM(data_offset, "gguf_get_data_offset");
    SYM(n_kv, "gguf_get_n_kv");
    SYM(key, "gguf_get_key");
    SYM(kv_type, "gguf_get_kv_type");
    SYM(arr_type, "gguf_get_arr_type");
    SYM(arr_n, "gguf_get_arr_n");
    SYM(arr_data, "gguf_get_arr_data");
    SYM(arr_str, "gguf_get_arr_str");
    SYM(val_data, "gguf_get_val_data");
    SYM(val_str, "gguf_get_val_str");
    SYM(n_tensors, "gguf_get_n_tensors");
    SYM(tensor_name, "gguf_get_tensor_name");
    SYM(tensor_type, "gguf_get_tensor_type");
    SYM(tensor_offset, "gguf_get_tensor_offset");
    SYM(tensor_size, "gguf_get_tensor_size");
    SYM(tensor_ne, "gguf_get_tensor_ne");
#undef SYM
    return true;
}

static const size_t k_scalar_size[QP_META_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* Our scalar, re-encoded as the bytes the file stores, equals llama.cpp's value bytes. */
static bool scalar_equal(const qp_meta *md, const void *peer) {
    uint8_t mine[8] = {0};
    switch (md->type) {
    case QP_META_U8: case QP_META_U16: case QP_META_U32: case QP_META_U64:
    case QP_META_I8: case QP_META_I16: case QP_META_I32: case QP_META_I64:
        for (int i = 0; i < 8; i++) mine[i] = (uint8_t)(md->v.u >> (8 * i));
        break;
    case QP_META_F32: {
        float f = (float)md->v.f;
        memcpy(mine, &f, 4);
        break;
    }
    case QP_META_F64: memcpy(mine, &md->v.f, 8); break;
    case QP_META_BOOL: mine[0] = md->v.b ? 1 : 0; break;
    default: return false;
    }
    return memcmp(mine, peer, k_scalar_size[md->type]) == 0;
}

static void compare_with_llamacpp(const peer_api *p, const char *path, const qp_model *m) {
    struct gguf_init_params_peer ip = {true, NULL};
    void *g = p->init(path, ip);
    QP_CHECK_MSG(g != NULL, "llama.cpp cannot open %s", path);
    if (!g) return;
    QP_CHECK_EQ_INT(m->format_version, p->version(g));
    /* tensors, in file order */
    int64_t nt = p->n_tensors(g);
    QP_CHECK_EQ_INT(m->n_tensors, nt);
    size_t data = p->data_offset(g);
    int bad_tensors = 0;
    for (int64_t i = 0; i < nt && i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        const int64_t *ne = p->tensor_ne(g, i);
        bool ok = strcmp(t->name, p->tensor_name(g, i)) == 0 && tr &&
                  tr->ggml_type == p->tensor_type(g, i) &&
                  t->offset == (uint64_t)(data + p->tensor_offset(g, i)) &&
                  t->nbytes == p->tensor_size(g, i);
        for (int d = 0; d < QP_MAX_DIMS; d++) ok = ok && t->ne[d] == ne[d];
        if (!ok && bad_tensors++ < 5)
            fprintf(stderr, "%s: tensor %" PRId64 " '%s' differs from llama.cpp ('%s' type %d offset %zu "
                    "size %zu)\n", path, i, t->name, p->tensor_name(g, i), p->tensor_type(g, i),
                    data + p->tensor_offset(g, i), p->tensor_size(g, i));
        QP_CHECK(ok);
    }
    /* metadata: llama.cpp lists the same keys in the same order */
    int64_t nkv = p->n_kv(g);
    QP_CHECK_EQ_INT(m->n_meta, nkv);
    for (int64_t i = 0; i < nkv && i < m->n_meta; i++) {
        const qp_meta *md = &m->meta[i];
        const char *key = p->key(g, i);
        QP_CHECK_MSG(strcmp(md->key, key) == 0, "%s: key %" PRId64 " '%s' vs llama.cpp '%s'", path, i,
                     md->key, key);
        int type = p->kv_type(g, i);
        QP_CHECK_MSG((int)md->type == type, "%s: '%s' type %d vs llama.cpp %d", path, key, md->type, type);
        if ((int)md->type != type) continue;
        if (md->type == QP_META_STRING) {
            const char *s = p->val_str(g, i);
            QP_CHECK_MSG(strlen(s) == md->str_len && memcmp(s, md->str, md->str_len) == 0,
                         "%s: '%s' string differs", path, key);
        } else if (md->type == QP_META_ARRAY) {
            QP_CHECK_EQ_INT(md->arr_type, p->arr_type(g, i));
            QP_CHECK_EQ_INT(md->n, p->arr_n(g, i));
            if ((int)md->arr_type != p->arr_type(g, i) || md->n != p->arr_n(g, i)) continue;
            if (md->arr_type == QP_META_STRING) {
                size_t pos = 0, bad = 0;
                for (size_t k = 0; k < md->n; k++) {
                    const uint8_t *s;
                    size_t len;
                    const char *ps = p->arr_str(g, i, k);
                    if (!qp_gguf_meta_array_next_str(md, &pos, &s, &len) || strlen(ps) != len ||
                        memcmp(ps, s, len) != 0)
                        bad++;
                }
                QP_CHECK_MSG(bad == 0, "%s: '%s': %zu of %llu strings differ", path, key, bad,
                             (unsigned long long)md->n);
            } else {
                size_t es = k_scalar_size[md->arr_type];
                QP_CHECK_MSG(md->raw_size == md->n * es && memcmp(md->raw, p->arr_data(g, i), md->raw_size) == 0,
                             "%s: '%s' array bytes differ", path, key);
            }
        } else {
            QP_CHECK_MSG(scalar_equal(md, p->val_data(g, i)), "%s: '%s' value differs", path, key);
        }
    }
    /* the decoded vocabulary equals llama.cpp's token strings, scores and types */
    if (m->vocab.n_tokens > 0) {
        int64_t id = -1;
        for (int64_t i = 0; i < nkv; i++)
            if (strcmp(p->key(g, i), "tokenizer.ggml.tokens") == 0) id = i;
        QP_CHECK(id >= 0);
        if (id >= 0) {
            int64_t bad = 0;
            for (int64_t k = 0; k < m->vocab.n_tokens; k++) {
                const char *ps = p->arr_str(g, id, (size_t)k);
                if (strlen(ps) != m->vocab.token_lens[k] || memcmp(ps, m->vocab.tokens[k], strlen(ps)) != 0 ||
                    m->vocab.tokens[k][m->vocab.token_lens[k]] != '\0')
                    bad++;
            }
            QP_CHECK_MSG(bad == 0, "%s: %" PRId64 " decoded tokens differ from llama.cpp's", path, bad);
        }
    }
    p->free_(g);
}

static const qp_tensor *must_find(const qp_model *m, const char *name) {
    const qp_tensor *t = qp_model_find(m, name);
    QP_CHECK_MSG(t != NULL, "%s: no tensor '%s'", m->path, name);
    return t;
}

/* stories260K.gguf: the facts of fixtures/README.md, and its bytes equal the llama2.c checkpoint's. */
static void check_stories(const qp_model *m, const char *dir) {
    const qp_arch *a = &m->arch;
    QP_CHECK_EQ_INT(a->family, QP_FAMILY_LLAMA);
    QP_CHECK_EQ_INT(a->hidden, 64);
    QP_CHECK_EQ_INT(a->intermediate, 172);
    QP_CHECK_EQ_INT(a->n_layers, 5);
    QP_CHECK_EQ_INT(a->n_heads, 8);
    QP_CHECK_EQ_INT(a->n_kv_heads, 4);
    QP_CHECK_EQ_INT(a->head_dim, 8);
    QP_CHECK_EQ_INT(a->vocab, 512);
    QP_CHECK_EQ_INT(a->rope_style, QP_ROPE_NORM);
    QP_CHECK_EQ_INT(m->vocab.model, QP_TOK_SPM);
    QP_CHECK_EQ_INT(m->vocab.n_tokens, 512);
    /* llama2.c tokenizer ids: 0 <unk>, 1 <s>, 2 </s>, 3.. <0x00>.. byte tokens */
    QP_CHECK_EQ_INT(m->vocab.bos_id, 1);
    QP_CHECK_EQ_INT(m->vocab.eos_id, 2);
    QP_CHECK(m->vocab.n_tokens > 3 && strcmp(m->vocab.tokens[3], "<0x00>") == 0);
    QP_CHECK(m->vocab.types && m->vocab.types[3] == QP_TOKTYPE_BYTE);
    QP_CHECK_EQ_INT(m->n_tensors, 3 + 5 * 9);
    for (int64_t i = 0; i < m->n_tensors; i++) QP_CHECK(m->tensors[i].enc == QP_ENC_F32);
    const qp_tensor *emb = must_find(m, "token_embd.weight");
    const qp_tensor *out = must_find(m, "output.weight");
    const qp_tensor *q0 = must_find(m, "blk.0.attn_q.weight");
    const qp_tensor *n0 = must_find(m, "blk.0.attn_norm.weight");
    if (!emb || !out || !q0 || !n0) return;
    QP_CHECK(emb->ne[0] == 64 && emb->ne[1] == 512 && emb->n_dims == 2);
    /* shared classifier: the converter wrote output.weight as a copy of the embedding */
    QP_CHECK(out->nbytes == emb->nbytes && memcmp(out->data, emb->data, emb->nbytes) == 0);
    /* same weights as stories260K.bin: embedding, rms_att[0], wq[0] (no q/k permutation) */
    char path[4096];
    qp_test_path(path, sizeof path, dir, "stories260K.bin");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "note: %s absent; byte comparison skipped\n", path);
        return;
    }
    static uint8_t bin[1056540];
    size_t got = fread(bin, 1, sizeof bin, f);
    fclose(f);
    QP_CHECK_EQ_INT(got, sizeof bin);
    size_t off_emb = 28, off_rms = off_emb + 512 * 64 * 4, off_wq = off_rms + 5 * 64 * 4;
    QP_CHECK(emb->nbytes == 512 * 64 * 4 && memcmp(emb->data, bin + off_emb, emb->nbytes) == 0);
    QP_CHECK(n0->nbytes == 64 * 4 && memcmp(n0->data, bin + off_rms, n0->nbytes) == 0);
    QP_CHECK(q0->nbytes == 64 * 64 * 4 && memcmp(q0->data, bin + off_wq, q0->nbytes) == 0);
}

static void check_tiny_random(const qp_model *m) {
    const qp_arch *a = &m->arch;
    QP_CHECK_EQ_INT(a->family, QP_FAMILY_LLAMA);
    QP_CHECK_EQ_INT(a->hidden, 8);
    QP_CHECK_EQ_INT(a->n_layers, 1);
    QP_CHECK_EQ_INT(a->vocab, 32000);
    QP_CHECK_EQ_INT(m->vocab.n_tokens, 32000);
    QP_CHECK(!a->tie_embeddings);
    const qp_tensor *out = must_find(m, "output.weight");
    const qp_tensor *q = must_find(m, "blk.0.attn_q.weight");
    const qp_tensor *nrm = must_find(m, "output_norm.weight");
    if (out) QP_CHECK(out->ne[0] == 8 && out->ne[1] == 32000);
    if (q) QP_CHECK_EQ_INT(q->enc, QP_ENC_F16);
    if (out) QP_CHECK_EQ_INT(out->enc, QP_ENC_F16);
    if (nrm) QP_CHECK_EQ_INT(nrm->enc, QP_ENC_F32);
    /* the Llama 2 SentencePiece vocabulary */
    QP_CHECK(m->vocab.n_tokens == 32000 && strcmp(m->vocab.tokens[1], "<s>") == 0 &&
             strcmp(m->vocab.tokens[2], "</s>") == 0);
}

/* llama.cpp's Q4_K_M of stories260K: ne[0] = 64 or 172 is not a multiple of 256, so the k-quant
 * fallbacks apply (converters/recipes.md): Q4_K -> Q5_0, Q6_K -> Q8_0 (output), ffn_down (ne[0] 172,
 * not a multiple of 32) -> F16; 1-D norms stay F32. */
static void check_q4km(const qp_model *m) {
    QP_CHECK_EQ_INT(m->n_tensors, 3 + 5 * 9);
    const qp_tensor *t;
    if ((t = must_find(m, "output.weight"))) QP_CHECK_EQ_INT(t->enc, QP_ENC_Q8_0);
    if ((t = must_find(m, "token_embd.weight"))) QP_CHECK_EQ_INT(t->enc, QP_ENC_Q5_0);
    if ((t = must_find(m, "blk.0.ffn_down.weight"))) QP_CHECK_EQ_INT(t->enc, QP_ENC_F16);
    if ((t = must_find(m, "blk.3.attn_q.weight"))) QP_CHECK_EQ_INT(t->enc, QP_ENC_Q5_0);
    if ((t = must_find(m, "blk.0.attn_norm.weight"))) QP_CHECK_EQ_INT(t->enc, QP_ENC_F32);
    if ((t = must_find(m, "token_embd.weight"))) QP_CHECK_EQ_INT(t->nbytes, 512 * 64 / 32 * 22);
    const qp_meta *ft = qp_model_meta(m, "general.file_type");
    QP_CHECK(ft && ft->type == QP_META_U32 && ft->v.u == 15); /* LLAMA_FTYPE_MOSTLY_Q4_K_M */
    QP_CHECK_EQ_INT(m->arch.hidden, 64);
    QP_CHECK_EQ_INT(m->arch.n_layers, 5);
}

int main(void) {
    const char *dir = qp_test_real_dir();
    static const char *const files[] = {
        "stories260K.gguf",
        "gguf/llama-2-tiny-random.gguf",
        "gguf/stories260K-Q4_K_M.llamacpp.gguf",
        "vocab/ggml-vocab-bert-bge.gguf",
        "vocab/ggml-vocab-deepseek-coder.gguf",
        "vocab/ggml-vocab-gpt-2.gguf",
        "vocab/ggml-vocab-llama-spm.gguf",
        "vocab/ggml-vocab-phi-3.gguf",
    };
    char path[4096];
    if (!qp_path_exists(qp_test_path(path, sizeof path, dir, files[0])))
        QP_SKIP("real fixtures not found in %s", dir);
    peer_api peer;
    bool have_peer = load_peer(&peer);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        qp_test_path(path, sizeof path, dir, files[i]);
        if (!qp_path_exists(path)) {
            fprintf(stderr, "note: %s absent\n", path);
            continue;
        }
        qp_err e = {0};
        qp_model *m = NULL;
        qp_status s = qp_model_open(path, NULL, &m, &e);
        QP_CHECK_MSG(s == QP_OK, "%s: %s", path, e.msg);
        if (s != QP_OK) continue;
        QP_CHECK_EQ_INT(m->format, QP_FORMAT_GGUF);
        for (int64_t k = 0; k < m->n_tensors; k++) {
            const qp_tensor *t = &m->tensors[k];
            QP_CHECK(t->canon && strcmp(t->canon, t->name) == 0 && t->data && t->offset % 32 == 0);
        }
        if (i == 0) check_stories(m, dir);
        if (i == 1) check_tiny_random(m);
        if (i == 2) check_q4km(m);
        if (i >= 3) { /* vocab-only files */
            QP_CHECK_EQ_INT(m->n_tensors, 0);
            QP_CHECK(m->vocab.n_tokens > 0 && m->vocab.model != QP_TOK_NONE);
        }
        if (strstr(files[i], "llama-spm")) QP_CHECK_EQ_INT(m->vocab.model, QP_TOK_SPM);
        if (strstr(files[i], "gpt-2") || strstr(files[i], "deepseek"))
            QP_CHECK(m->vocab.model == QP_TOK_BPE && m->vocab.n_merges > 0 && m->vocab.pre[0]);
        if (strstr(files[i], "bert")) QP_CHECK_EQ_INT(m->vocab.model, QP_TOK_WPM);
        if (have_peer) compare_with_llamacpp(&peer, path, m);
        printf("%s: %" PRId64 " tensors, %" PRId64 " keys, %" PRId64 " tokens, %" PRId64 " problems\n",
               files[i], m->n_tensors, m->n_meta, m->vocab.n_tokens, m->n_problems);
        qp_model_close(m);
    }
    if (!have_peer) fprintf(stderr, "note: llama.cpp comparison skipped\n");
    return qp_test_finish();
}
