/* Our GGUF -> GGUF conversion against llama.cpp's llama_model_quantize (libllama from npm
 * @node-llama-cpp/linux-x64 3.22.1, run live): random Llama models of several shapes are written
 * here with our GGUF writer (tied and untied embeddings, n_ff not a multiple of 256, n_embd not a
 * multiple of 256, 8 and 32 layers, F32 and F16 sources), converted by both to Q4_K_M (and
 * Q6_K / Q8_0 / F16 / BF16 for one model), and the files must be byte-identical. Where llama.cpp
 * refuses a conversion, we must refuse it too. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

#include "converters/convert_gguf.h"
#include "qp_test.h"
#include "writers/gguf_writer.h"

/* llama.h of libllama.v0.5.0 (llama.cpp of the node-llama-cpp 3.22.1 build). The layout was
 * checked against the disassembly of llama_model_quantize_default_params in that library: it
 * stores 64 bytes (nthread 0, ftype 7 @4, output/token_embedding types 43 @8/@12, the six bools
 * @16..@21 with quantize_output_tensor = 1, four pointers @24..@55) and two 32-bit words @56/@60
 * (0 and 2) newer than any llama.h we could read; they are kept at their defaults. */
typedef struct llama_model_quantize_params {
    int32_t nthread;
    int32_t ftype;                /* enum llama_ftype */
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

/* llama_model_params: 80 bytes in this build (llama_model_default_params stores 0x00..0x4d);
 * only passed through from llama_model_default_params, so it is kept opaque. */
typedef struct llama_model_params {
    uint64_t opaque[10];
} llama_model_params;

typedef llama_model_quantize_params (*default_params_fn)(void);
typedef llama_model_params (*model_default_params_fn)(void);
typedef void *(*model_load_fn)(const char *, llama_model_params);
typedef void (*model_free_fn)(void *);
typedef void (*load_all_from_path_fn)(const char *);
typedef uint32_t (*quantize_fn)(const char *, const char *, const llama_model_quantize_params *);
typedef void (*log_cb)(int level, const char *text, void *ud);
typedef void (*log_set_fn)(log_cb cb, void *ud);
typedef void (*backend_init_fn)(void);

static void quiet(int level, const char *text, void *ud) {
    (void)level;
    (void)text;
    (void)ud;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* xorshift64*, roughly normal (sum of 4 uniforms) */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng >> 12;
        g_rng ^= g_rng << 25;
        g_rng ^= g_rng >> 27;
        uint64_t r = g_rng * 0x2545F4914F6CDD1Dull;
        s += (float)(r >> 40) / (float)(1u << 24) - 0.5f;
    }
    return s * 0.05f;
}

typedef struct shape {
    const char *label;
    int n_embd, n_ff, n_layer, n_head, n_kv, n_vocab;
    bool tied, f16;
} shape;

static bool add_tensor(qp_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, bool f16,
                       qp_err *e) {
    int64_t ne[2] = {ne0, ne1};
    return qp_gguf_writer_add_tensor(w, name, f16 ? QP_ENC_F16 : QP_ENC_F32, ne1 > 1 ? 2 : 1, ne, e) == QP_OK;
}

static bool write_data(qp_gguf_writer *w, int64_t n, bool f16, bool ones, qp_err *e) {
    size_t es = f16 ? 2 : 4;
    uint8_t *b = qp_malloc((size_t)n * es);
    if (!b) return false;
    for (int64_t i = 0; i < n; i++) {
        float v = ones ? 1.0f + frand() : frand();
        if (i % 997 == 5) v *= 20.0f; /* a few outliers */
        if (f16) qp_store_u16le(b + 2 * i, qp_fp32_to_fp16(v));
        else qp_store_f32le(b + 4 * i, v);
    }
    bool ok = qp_gguf_writer_write_tensor(w, b, (size_t)n * es, e) == QP_OK;
    qp_free(b);
    return ok;
}

/* A random Llama GGUF in convert_hf_to_gguf's tensor order. */
static bool make_model(const shape *s, const char *path, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
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
              qp_gguf_writer_add_u32(w, "general.file_type", s->f16 ? 1 : 0, e) == QP_OK &&
              qp_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", 5, e) == QP_OK;
    /* a vocabulary of <unk> <s> </s> and filler pieces */
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
    ok = ok && qp_gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)s->n_vocab, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.scores", QP_META_F32, (uint64_t)s->n_vocab, scores, e) == QP_OK &&
         qp_gguf_writer_add_array(w, "tokenizer.ggml.token_type", QP_META_I32, (uint64_t)s->n_vocab, types, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, e) == QP_OK &&
         qp_gguf_writer_add_u32(w, "general.quantization_version", 2, e) == QP_OK;
    for (int i = 0; toks && i < s->n_vocab; i++) qp_free(toks[i]);
    qp_free(toks);
    qp_free(scores);
    qp_free(types);
    int hd = s->n_embd / s->n_head;
    /* declare: (name, ne0, ne1, is_norm) in writing order */
    typedef struct td { char name[64]; int64_t ne0, ne1; bool norm; } td;
    int nt = 3 + 9 * s->n_layer;
    td *ts = qp_calloc((size_t)nt, sizeof *ts);
    if (!ts) ok = false;
    int k = 0;
    if (ok) {
        ts[k++] = (td){"token_embd.weight", s->n_embd, s->n_vocab, false};
        for (int l = 0; l < s->n_layer; l++) {
            snprintf(ts[k].name, 64, "blk.%d.attn_norm.weight", l); ts[k].ne0 = s->n_embd; ts[k].ne1 = 1; ts[k++].norm = true;
            snprintf(ts[k].name, 64, "blk.%d.attn_q.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = s->n_embd;
            snprintf(ts[k].name, 64, "blk.%d.attn_k.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = hd * s->n_kv;
            snprintf(ts[k].name, 64, "blk.%d.attn_v.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = hd * s->n_kv;
            snprintf(ts[k].name, 64, "blk.%d.attn_output.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = s->n_embd;
            snprintf(ts[k].name, 64, "blk.%d.ffn_norm.weight", l); ts[k].ne0 = s->n_embd; ts[k].ne1 = 1; ts[k++].norm = true;
            snprintf(ts[k].name, 64, "blk.%d.ffn_gate.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = s->n_ff;
            snprintf(ts[k].name, 64, "blk.%d.ffn_up.weight", l); ts[k].ne0 = s->n_embd; ts[k++].ne1 = s->n_ff;
            snprintf(ts[k].name, 64, "blk.%d.ffn_down.weight", l); ts[k].ne0 = s->n_ff; ts[k++].ne1 = s->n_embd;
        }
        ts[k++] = (td){"output_norm.weight", s->n_embd, 1, true};
        if (!s->tied) ts[k++] = (td){"output.weight", s->n_embd, s->n_vocab, false};
    }
    /* norms stay F32 in llama.cpp's own F16 files */
    for (int i = 0; ok && i < k; i++) ok = add_tensor(w, ts[i].name, ts[i].ne0, ts[i].ne1, s->f16 && !ts[i].norm, e);
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (int i = 0; ok && i < k; i++)
        ok = write_data(w, ts[i].ne0 * ts[i].ne1, s->f16 && !ts[i].norm, ts[i].norm, e);
    qp_free(ts);
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

static bool files_equal(const char *a, const char *b, size_t *diff_at) {
    qp_mapped_file fa = {0}, fb = {0};
    qp_err e = {0};
    bool ok = qp_file_map(a, &fa, &e) == QP_OK && qp_file_map(b, &fb, &e) == QP_OK;
    *diff_at = 0;
    if (ok) {
        size_t n = fa.size < fb.size ? fa.size : fb.size;
        size_t i = 0;
        while (i < n && fa.data[i] == fb.data[i]) i++;
        *diff_at = i;
        ok = i == n && fa.size == fb.size;
    }
    qp_file_unmap(&fa);
    qp_file_unmap(&fb);
    return ok;
}

/* HF fixtures (qp-gen-fixtures): our one-step HF -> Q4_K_M must equal llama.cpp's
 * llama_model_quantize of our HF -> F32 GGUF (the usual convert_hf_to_gguf + llama-quantize path),
 * and llama.cpp must load the result (llama_model_load_from_file). */
static void check_hf(void *h, default_params_fn dflt, quantize_fn quantize, const char *tmp) {
    model_default_params_fn mdp = (model_default_params_fn)(uintptr_t)dlsym(h, "llama_model_default_params");
    model_load_fn load = (model_load_fn)(uintptr_t)dlsym(h, "llama_model_load_from_file");
    model_free_fn mfree = (model_free_fn)(uintptr_t)dlsym(h, "llama_model_free");
    load_all_from_path_fn load_all = (load_all_from_path_fn)(uintptr_t)dlsym(h, "ggml_backend_load_all_from_path");
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    static const char *const k_hf[] = {"llama-tied", "llama-gqa-untied", "llama-sharded", "qwen2"};
    if (load_all) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/@node-llama-cpp/linux-x64/bins/linux-x64",
                 qp_test_env("QP_PEER_DIR", "tests/peer/node_modules"));
        load_all(dir);
    }
    for (size_t i = 0; i < sizeof k_hf / sizeof k_hf[0]; i++) {
        char src[4300], f32[4300], ours[4300], theirs[4300];
        snprintf(src, sizeof src, "%s/%s", fx, k_hf[i]);
        if (!qp_path_is_dir(src)) {
            fprintf(stderr, "note: fixture %s missing; HF checks skipped\n", src);
            continue;
        }
        snprintf(f32, sizeof f32, "%s/peer-hf-%s-f32.gguf", tmp, k_hf[i]);
        snprintf(ours, sizeof ours, "%s/peer-hf-%s-q4km.gguf", tmp, k_hf[i]);
        snprintf(theirs, sizeof theirs, "%s/peer-hf-%s-q4km-llama.gguf", tmp, k_hf[i]);
        qp_err e = {0};
        qp_model *m = NULL;
        QP_CHECK_MSG(qp_model_open(src, NULL, &m, &e) == QP_OK, "%s: %s", src, e.msg);
        if (!m) continue;
        qp_convert_opts o = {0};
        o.threads = 2;
        o.quant = QP_QUANT_F32;
        QP_CHECK_MSG(qp_convert_gguf(m, &o, f32, &e) == QP_OK, "%s F32: %s", k_hf[i], e.msg);
        o.quant = QP_QUANT_Q4_K_M;
        QP_CHECK_MSG(qp_convert_gguf(m, &o, ours, &e) == QP_OK, "%s Q4_K_M: %s", k_hf[i], e.msg);
        qp_model_close(m);
        llama_model_quantize_params p = dflt();
        p.nthread = 2;
        p.ftype = 15;
        QP_CHECK_MSG(quantize(f32, theirs, &p) == 0, "%s: llama_model_quantize failed", k_hf[i]);
        size_t at = 0;
        bool same = files_equal(ours, theirs, &at);
        QP_CHECK_MSG(same, "%s: HF -> Q4_K_M differs from llama_model_quantize(HF -> F32) at byte %zu",
                     k_hf[i], at);
        if (same) printf("%-22s HF -> Q4_K_M byte-identical to llama_model_quantize of HF -> F32\n", k_hf[i]);
        if (mdp && load && mfree) {
            void *model = load(ours, mdp());
            QP_CHECK_MSG(model != NULL, "%s: llama_model_load_from_file refused our Q4_K_M", k_hf[i]);
            if (model) {
                printf("%-22s llama_model_load_from_file accepts our Q4_K_M\n", k_hf[i]);
                mfree(model);
            }
        }
        if (same) {
            remove(f32);
            remove(ours);
            remove(theirs);
        }
    }
    /* BitNet: upstream llama.cpp knows arch "bitnet" and TQ1_0 / TQ2_0 (not microsoft's I2_S) */
    char src[4300];
    snprintf(src, sizeof src, "%s/bitnet-float", fx);
    qp_model *m = NULL;
    qp_err e = {0};
    if (!mdp || !load || !mfree || !qp_path_is_dir(src) || qp_model_open(src, NULL, &m, &e) != QP_OK)
        return;
    static const qp_quant k_tq[] = {QP_QUANT_TQ2_0, QP_QUANT_TQ1_0, QP_QUANT_F16};
    for (size_t i = 0; i < sizeof k_tq / sizeof k_tq[0]; i++) {
        char out[4300];
        snprintf(out, sizeof out, "%s/peer-bitnet-%s.gguf", tmp, qp_quant_name(k_tq[i]));
        qp_convert_opts o = {0};
        o.quant = k_tq[i];
        o.threads = 2;
        QP_CHECK_MSG(qp_convert_gguf(m, &o, out, &e) == QP_OK, "bitnet %s: %s", qp_quant_name(k_tq[i]), e.msg);
        void *model = load(out, mdp());
        QP_CHECK_MSG(model != NULL, "llama_model_load_from_file refused our BitNet %s", qp_quant_name(k_tq[i]));
        if (model) {
            printf("%-22s llama_model_load_from_file accepts our BitNet %s\n", "bitnet-float",
                   qp_quant_name(k_tq[i]));
            mfree(model);
        }
        remove(out);
    }
    /* and the check has teeth: upstream refuses microsoft's I2_S (its id 36 is not an upstream
     * type), as readers/gguf.md says */
    char out[4300];
    snprintf(out, sizeof out, "%s/peer-bitnet-I2_S.gguf", tmp);
    qp_convert_opts o = {0};
    o.quant = QP_QUANT_I2_S;
    QP_CHECK_MSG(qp_convert_gguf(m, &o, out, &e) == QP_OK, "bitnet I2_S: %s", e.msg);
    void *model = load(out, mdp());
    QP_CHECK_MSG(model == NULL, "upstream llama.cpp unexpectedly loads an I2_S file");
    if (model) mfree(model);
    remove(out);
    qp_model_close(m);
}

int main(void) {
    char lib[4096];
    snprintf(lib, sizeof lib, "%s/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so",
             qp_test_env("QP_PEER_DIR", "tests/peer/node_modules"));
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) QP_SKIP("cannot load %s: %s", lib, dlerror());
    default_params_fn dflt = (default_params_fn)(uintptr_t)dlsym(h, "llama_model_quantize_default_params");
    quantize_fn quantize = (quantize_fn)(uintptr_t)dlsym(h, "llama_model_quantize");
    log_set_fn log_set = (log_set_fn)(uintptr_t)dlsym(h, "llama_log_set");
    backend_init_fn binit = (backend_init_fn)(uintptr_t)dlsym(h, "llama_backend_init");
    if (!dflt || !quantize) QP_SKIP("libllama lacks llama_model_quantize");
    if (log_set && !getenv("QP_PEER_VERBOSE")) log_set(quiet, NULL);
    if (binit) binit();

    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmp);
    if (system(cmd) != 0) QP_SKIP("cannot create %s", tmp);

    static const shape k_shapes[] = {
        {"tied-8L-ff512", 256, 512, 8, 4, 2, 320, true, false},
        {"untied-8L-ff688", 256, 688, 8, 8, 8, 300, false, false},
        {"untied-32L-embd128", 128, 352, 32, 4, 1, 260, false, false},
        {"tied-32L-f16", 256, 768, 32, 4, 4, 256, true, true},
        {"untied-8L-f16-ff200", 512, 200, 8, 8, 2, 512, false, true},
    };
    static const struct { qp_quant q; int ftype; } k_q[] = {
        {QP_QUANT_Q4_K_M, 15}, {QP_QUANT_Q6_K, 18}, {QP_QUANT_Q8_0, 7}, {QP_QUANT_F16, 1},
        {QP_QUANT_BF16, 32}, {QP_QUANT_F32, 0},
    };
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        const shape *s = &k_shapes[si];
        char src[4300], ours[4300], theirs[4300];
        snprintf(src, sizeof src, "%s/peer-src-%s.gguf", tmp, s->label);
        qp_err e = {0};
        bool made = make_model(s, src, &e);
        QP_CHECK_MSG(made, "%s: %s", s->label, e.msg);
        if (!made) continue;
        qp_model *m = NULL;
        QP_CHECK_MSG(qp_model_open(src, NULL, &m, &e) == QP_OK, "%s: %s", src, e.msg);
        if (!m) continue;
        size_t nq = si == 1 || si == 4 ? sizeof k_q / sizeof k_q[0] : 1; /* all types on two */
        for (size_t qi = 0; qi < nq; qi++) {
            for (int threads = 1; threads <= 2; threads++) {
                if (threads == 2 && qi > 0) break;
                snprintf(ours, sizeof ours, "%s/peer-ours-%s-%s.gguf", tmp, s->label, qp_quant_name(k_q[qi].q));
                snprintf(theirs, sizeof theirs, "%s/peer-llama-%s-%s.gguf", tmp, s->label, qp_quant_name(k_q[qi].q));
                llama_model_quantize_params p = dflt();
                p.nthread = threads;
                p.ftype = k_q[qi].ftype;
                uint32_t rc = quantize(src, theirs, &p);
                qp_convert_opts o = {0};
                o.quant = k_q[qi].q;
                o.threads = threads;
                qp_err ce = {0};
                qp_status st = qp_convert_gguf(m, &o, ours, &ce);
                if (rc != 0) {
                    QP_CHECK_MSG(st != QP_OK, "%s %s: llama.cpp refused, we converted",
                                 s->label, qp_quant_name(k_q[qi].q));
                    printf("%-22s %-7s both refuse (ours: %s)\n", s->label, qp_quant_name(k_q[qi].q), ce.msg);
                    remove(ours);
                    continue;
                }
                QP_CHECK_MSG(st == QP_OK, "%s %s: %s", s->label, qp_quant_name(k_q[qi].q), ce.msg);
                size_t at = 0;
                bool same = st == QP_OK && files_equal(ours, theirs, &at);
                QP_CHECK_MSG(same, "%s %s threads %d: differs from llama_model_quantize at byte %zu",
                             s->label, qp_quant_name(k_q[qi].q), threads, at);
                if (same)
                    printf("%-22s %-7s threads %d: byte-identical to llama_model_quantize\n", s->label,
                           qp_quant_name(k_q[qi].q), threads);
                if (same) { /* kept for inspection on a mismatch */
                    remove(ours);
                    remove(theirs);
                }
            }
        }
        qp_model_close(m);
        if (qp_test_failed == 0) remove(src);
    }
    check_hf(h, dflt, quantize, tmp);
    return qp_test_finish();
}
