/* llama.cpp's ABI as the peer tests and the benches use it: the few declarations of
 * libggml/libllama.v0.5.0.so (npm @node-llama-cpp/linux-x64 3.22.1) and one dlopen loader, with no
 * test-framework dependency (bench/ includes it too). Why opaque parameter buffers are
 * ABI-compatible: tests/peer/llama_peer.h. */
#ifndef QP_LLAMA_PEER_ABI_H
#define QP_LLAMA_PEER_ABI_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Any llama_*_params obtained from its default function and passed back by value. */
typedef struct llama_peer_params {
    _Alignas(16) unsigned char b[1024];
} llama_peer_params;

typedef struct llama_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} llama_batch;

/* llama_model_quantize_params of libllama.v0.5.0 (llama.cpp of the node-llama-cpp 3.22.1 build).
 * The layout was checked against the disassembly of llama_model_quantize_default_params in that
 * library: it stores 64 bytes (nthread 0, ftype 7 @4, output/token_embedding types 43 @8/@12, the
 * six bools @16..@21 with quantize_output_tensor = 1, four pointers @24..@55) and two 32-bit words
 * @56/@60 (0 and 2) newer than any llama.h we could read; they are kept at their defaults. */
typedef struct llama_model_quantize_params {
    int32_t nthread;
    int32_t ftype;                /* enum llama_ftype: 0 = all F32 */
    int32_t output_tensor_type;   /* enum ggml_type */
    int32_t token_embedding_type; /* enum ggml_type */
    bool allow_requantize;
    bool quantize_output_tensor;
    bool only_copy;
    bool pure;
    bool keep_split;
    bool dry_run;
    void *imatrix;
    void *kv_overrides;
    void *tensor_types;
    void *prune_layers;
    int32_t reserved_56;
    int32_t reserved_60;
} llama_model_quantize_params;
_Static_assert(sizeof(llama_model_quantize_params) == 64, "v0.5.0 layout is 64 bytes");

typedef void (*llama_peer_log_cb)(int level, const char *text, void *user);

static struct {
    void (*backend_init)(void);
    void (*log_set)(llama_peer_log_cb, void *);
    /* struct-returning functions called with the hidden return pointer made explicit (%rdi),
       so the bytes they write can be counted */
    void *(*model_default_params)(void *ret);
    void *(*context_default_params)(void *ret);
    void *(*model_load)(const char *, llama_peer_params);
    void *(*init_from_model)(void *, llama_peer_params);
    llama_batch (*batch_get_one)(int32_t *, int32_t);
    int32_t (*decode)(void *, llama_batch);
    float *(*get_logits_ith)(void *, int32_t);
    void (*set_n_threads)(void *, int32_t, int32_t);
    uint32_t (*n_ctx)(const void *);
    void (*free_ctx)(void *);
    void (*model_free)(void *);
    const void *(*model_get_vocab)(const void *);
    int32_t (*vocab_n_tokens)(const void *);
    bool (*vocab_is_eog)(const void *, int32_t);
    int32_t (*tokenize)(const void *vocab, const char *text, int32_t text_len, int32_t *tokens,
                        int32_t n_tokens_max, bool add_special, bool parse_special);
    int32_t (*detokenize)(const void *vocab, const int32_t *tokens, int32_t n_tokens, char *text,
                          int32_t text_len_max, bool remove_special, bool unparse_special);
    int32_t (*model_n_embd)(const void *);
    int32_t (*model_n_layer)(const void *);
    int32_t (*model_n_head)(const void *);
    int32_t (*model_n_head_kv)(const void *);
    llama_model_quantize_params (*quantize_default_params)(void);
    uint32_t (*model_quantize)(const char *, const char *, const llama_model_quantize_params *);
    void *(*backend_load)(const char *);
    size_t (*dev_count)(void);
    void (*backend_load_all_from_path)(const char *);
} L;

static inline void llama_peer_quiet(int level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

/* dlopens libggml and libllama from the folder bins and resolves every symbol of L; false (the
 * reason on stderr) when a library or a symbol is missing. */
static inline bool llama_peer_load_from(const char *bins) {
    char p[2048];
    snprintf(p, sizeof p, "%s/libggml.v0.5.0.so", bins);
    void *gg = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    snprintf(p, sizeof p, "%s/libllama.v0.5.0.so", bins);
    void *ll = gg ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!gg || !ll) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return false;
    }
    const struct {
        void **slot;
        void *lib;
        const char *name;
    } syms[] = {
        {(void **)&L.backend_init, ll, "llama_backend_init"},
        {(void **)&L.log_set, ll, "llama_log_set"},
        {(void **)&L.model_default_params, ll, "llama_model_default_params"},
        {(void **)&L.context_default_params, ll, "llama_context_default_params"},
        {(void **)&L.model_load, ll, "llama_model_load_from_file"},
        {(void **)&L.init_from_model, ll, "llama_init_from_model"},
        {(void **)&L.batch_get_one, ll, "llama_batch_get_one"},
        {(void **)&L.decode, ll, "llama_decode"},
        {(void **)&L.get_logits_ith, ll, "llama_get_logits_ith"},
        {(void **)&L.set_n_threads, ll, "llama_set_n_threads"},
        {(void **)&L.n_ctx, ll, "llama_n_ctx"},
        {(void **)&L.free_ctx, ll, "llama_free"},
        {(void **)&L.model_free, ll, "llama_model_free"},
        {(void **)&L.model_get_vocab, ll, "llama_model_get_vocab"},
        {(void **)&L.vocab_n_tokens, ll, "llama_vocab_n_tokens"},
        {(void **)&L.vocab_is_eog, ll, "llama_vocab_is_eog"},
        {(void **)&L.tokenize, ll, "llama_tokenize"},
        {(void **)&L.detokenize, ll, "llama_detokenize"},
        {(void **)&L.model_n_embd, ll, "llama_model_n_embd"},
        {(void **)&L.model_n_layer, ll, "llama_model_n_layer"},
        {(void **)&L.model_n_head, ll, "llama_model_n_head"},
        {(void **)&L.model_n_head_kv, ll, "llama_model_n_head_kv"},
        {(void **)&L.quantize_default_params, ll, "llama_model_quantize_default_params"},
        {(void **)&L.model_quantize, ll, "llama_model_quantize"},
        {(void **)&L.backend_load, gg, "ggml_backend_load"},
        {(void **)&L.dev_count, gg, "ggml_backend_dev_count"},
        {(void **)&L.backend_load_all_from_path, gg, "ggml_backend_load_all_from_path"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(syms[i].lib, syms[i].name);
        if (!*syms[i].slot) {
            fprintf(stderr, "missing symbol %s\n", syms[i].name);
            return false;
        }
    }
    return true;
}

#endif
