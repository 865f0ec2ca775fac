/* Which tokens end generation, judged by llama.cpp. For each vocabulary, a tiny Llama GGUF is
 * written around it (peer/random_llama_gguf.h), loaded by llama.cpp (the npm peer's libllama) and
 * by quantpack (qp_model_open + a generation session), and for every id llama_vocab_is_eog must
 * equal qp_gen_is_end_token. Vocabularies: the seven real ggml-vocab-*.gguf files of llama.cpp's
 * vocab tests (../shared/fixtures/real/vocab), and the real Llama SPM vocabulary with end-of-turn,
 * FIM and look-alike texts written over normal pieces, as control, normal and user-defined
 * tokens, including the combinations llama.cpp treats specially (<|return|> + <|call|> + <|end|>,
 * <|tool_response> + </s>). runtime/runtime.md "Generation" gives the rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "peer/llama_peer.h"
#include "peer/random_llama_gguf.h"
#include "quantpack/generate.h"
#include "quantpack/quantpack.h"

typedef struct piece {
    const char *text;
    int32_t type; /* QP_TOKTYPE_* */
} piece;

/* Compares every id of the vocabulary at path; returns the ids that differ. */
static int compare_file(const char *label, const char *path) {
    void *model = llama_peer_model_load(path, NULL);
    QP_CHECK_MSG(model != NULL, "%s: llama.cpp could not load %s", label, path);
    if (!model) return 1;
    const void *lv = L.model_get_vocab(model);
    qp_model *m = NULL;
    qp_gen_session *s = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_model_open(path, NULL, &m, &e) == QP_OK, "%s: %s", label, e.msg);
    QP_CHECK_MSG(m && qp_gen_session_new(m, NULL, &s, &e) == QP_OK, "%s: %s", label, e.msg);
    int differ = 0, n_eog = 0;
    int32_t n = L.vocab_n_tokens(lv);
    for (int32_t id = 0; s && id < n; id++) {
        bool want = L.vocab_is_eog(lv, id), got = qp_gen_is_end_token(s, id);
        n_eog += want;
        if (want != got && differ++ < 8)
            fprintf(stderr, "%s: id %d '%s' (type %d): llama.cpp %s, quantpack %s\n", label, id,
                    m->vocab.tokens[id], m->vocab.types ? m->vocab.types[id] : -1,
                    want ? "ends" : "does not end", got ? "ends" : "does not end");
    }
    printf("%-34s %6d ids, %d end generation in llama.cpp, %d differ\n", label, n, n_eog, differ);
    qp_gen_session_free(s);
    qp_model_close(m);
    L.model_free(model);
    return differ;
}

/* Writes a tiny Llama around vocab (the given pre-tokenizer name) and compares it. */
static void check_vocab(const char *label, const qp_vocab *vocab, const char *pre, const char *tmp) {
    char path[1200];
    snprintf(path, sizeof path, "%s/eog_%s.gguf", tmp, label);
    random_llama spec = {.label = label, .n_embd = 8, .n_ff = 16, .n_layer = 1, .n_head = 1,
                         .n_kv = 1, .n_vocab = (int)vocab->n_tokens, .tied = true};
    qp_err e = {0};
    bool ok = random_llama_write_vocab(&spec, vocab, pre, path, &e);
    QP_CHECK_MSG(ok, "%s: %s", label, e.msg);
    if (ok) QP_CHECK_MSG(compare_file(label, path) == 0, "%s: end tokens differ", label);
    remove(path);
}

/* The SPM vocabulary with pieces[] written over ids 31000.. (normal pieces of Llama's vocabulary). */
static void check_pieces(const char *label, const qp_vocab *base, const piece *pieces, int n,
                         const char *tmp) {
    qp_vocab v = *base;
    v.tokens = qp_calloc((size_t)v.n_tokens, sizeof *v.tokens);
    v.token_lens = qp_calloc((size_t)v.n_tokens, sizeof *v.token_lens);
    v.types = qp_calloc((size_t)v.n_tokens, sizeof *v.types);
    QP_CHECK(v.tokens && v.token_lens && v.types);
    if (v.tokens && v.token_lens && v.types) {
        for (int64_t i = 0; i < v.n_tokens; i++) {
            v.tokens[i] = base->tokens[i];
            v.token_lens[i] = base->token_lens[i];
            v.types[i] = base->types ? base->types[i] : QP_TOKTYPE_NORMAL;
        }
        for (int k = 0; k < n; k++) {
            v.tokens[31000 + k] = (char *)pieces[k].text;
            v.token_lens[31000 + k] = (uint32_t)strlen(pieces[k].text);
            v.types[31000 + k] = pieces[k].type;
        }
        check_vocab(label, &v, "default", tmp);
    }
    qp_free(v.tokens);
    qp_free(v.token_lens);
    qp_free(v.types);
}

enum { C = QP_TOKTYPE_CONTROL, N = QP_TOKTYPE_NORMAL, U = QP_TOKTYPE_USER_DEFINED };

static const piece k_turn_ends[] = {
    {"<|eot_id|>", C}, {"<|im_end|>", C}, {"<|end|>", C}, {"<end_of_turn>", C},
    {"<|endoftext|>", C}, {"<|eom_id|>", C}, {"<EOT>", C}, {"_<EOT>", C}, {"[EOT]", C},
    {"[EOS]", C}, {"<|end_of_text|>", C}, {"<end_of_utterance>", C}, {"<eos>", C}, {"<turn|>", C},
    {"<|END_OF_TURN_TOKEN|>", C}, {"<|flush|>", C}, {"<|im_start|>", C}, {"<|user|>", C},
    {"<start_of_turn>", C}, {"<|begin_of_text|>", C},
};
/* the same texts as normal and user-defined pieces */
static const piece k_turn_ends_plain[] = {
    {"<|eot_id|>", N}, {"<|im_end|>", U}, {"<|end|>", N}, {"<end_of_turn>", U},
    {"<|endoftext|>", N}, {"<|eom_id|>", U}, {"<EOT>", N}, {"<|end_of_text|>", U},
};
static const piece k_fim[] = {
    {"<|fim_prefix|>", C}, {"<|fim_suffix|>", C}, {"<|fim_middle|>", C}, {"<|fim_pad|>", C},
    {"<|repo_name|>", C}, {"<|file_sep|>", C}, {"<|im_end|>", C},
};
/* one spelling per vocabulary, as real ones have (with several, llama.cpp takes whichever its hash
 * map yields first) */
static const piece k_fim_granite[] = {{"<fim_prefix>", C}, {"<fim_pad>", C}, {"<reponame>", C}};
static const piece k_fim_starcoder[] = {{"<fim-prefix>", C}, {"<fim-pad>", C}, {"<fim-repo>", C}};
static const piece k_fim_codellama[] = {{"<PRE>", C}, {"<PAD>", C}, {"<REPO>", C}, {"<EOT>", C}};
static const piece k_fim_kimi[] = {{"[PAD]", C}, {"<|fim_repo|>", C}, {"[EOT]", C}, {"[EOS]", C}};
static const piece k_harmony[] = {
    {"<|return|>", C}, {"<|call|>", C}, {"<|end|>", C}, {"<|start|>", C}, {"<|channel|>", C},
};
static const piece k_harmony_half[] = {{"<|return|>", C}, {"<|end|>", C}};
static const piece k_solar[] = {{"<|calls|>", C}, {"<|flush|>", C}, {"<|end|>", C}};
static const piece k_tool_response[] = {{"<|tool_response>", C}, {"<turn|>", C}};
static const piece k_command_r[] = {{"<|END_OF_TURN_TOKEN|>", C}, {"<|START_OF_TURN_TOKEN|>", C}};
static const piece k_deepseek3[] = {{"<\uff5cend\u2581of\u2581sentence\uff5c>", C},
                                    {"<|EOT|>", C}};

int main(void) {
    const char *dir = qp_test_real_dir();
    static const char *const vocabs[] = {"bert-bge", "deepseek-coder", "deepseek-llm", "gpt-2",
                                         "llama-spm", "mpt", "phi-3"};
    char vpath[1024];
    snprintf(vpath, sizeof vpath, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    if (!qp_path_exists(vpath)) QP_SKIP("real fixtures not found at %s", dir);
    if (!qp_path_exists(llama_peer_lib())) QP_SKIP("llama.cpp peer not installed (%s)", llama_peer_lib());
    QP_CHECK(llama_peer_load());
    llama_peer_start();
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s/vocab_eog_XXXXXX", qp_test_tmp_dir("/tmp"));
    QP_CHECK_MSG(mkdtemp(tmp) != NULL, "mkdtemp(%s) failed", tmp);
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        char p[1200], label[64];
        snprintf(p, sizeof p, "%s/vocab/ggml-vocab-%s.gguf", dir, vocabs[i]);
        snprintf(label, sizeof label, "vocab-%s", vocabs[i]);
        qp_model *m = NULL;
        qp_err e = {0};
        QP_CHECK_MSG(qp_model_open(p, NULL, &m, &e) == QP_OK, "%s: %s", p, e.msg);
        if (m) check_vocab(label, &m->vocab, m->vocab.pre[0] ? m->vocab.pre : "default", tmp);
        qp_model_close(m);
    }
    qp_model *spm = NULL;
    qp_err e = {0};
    QP_CHECK_MSG(qp_model_open(vpath, NULL, &spm, &e) == QP_OK, "%s: %s", vpath, e.msg);
#define PIECES(label, arr) check_pieces(label, &spm->vocab, arr, (int)(sizeof arr / sizeof arr[0]), tmp)
    if (spm) {
        PIECES("turn-ends", k_turn_ends);
        PIECES("turn-ends-not-control", k_turn_ends_plain);
        PIECES("fim-qwen", k_fim);
        PIECES("fim-granite", k_fim_granite);
        PIECES("fim-starcoder", k_fim_starcoder);
        PIECES("fim-codellama", k_fim_codellama);
        PIECES("fim-kimi", k_fim_kimi);
        PIECES("harmony", k_harmony);
        PIECES("harmony-without-call", k_harmony_half);
        PIECES("solar-open", k_solar);
        PIECES("tool-response-and-eos", k_tool_response);
        PIECES("command-r", k_command_r);
        PIECES("deepseek-v3", k_deepseek3);
    }
#undef PIECES
    qp_model_close(spm);
    rmdir(tmp);
    return qp_test_finish();
}
