/* HF directories: config.json -> qp_arch, tokenizer.json + tokenizer_config.json -> qp_vocab,
 * tensor names -> canonical GGUF names (readers/hf_config.md). Each directory is written here from
 * literal JSON, and every expectation is read off that literal input by the table in
 * readers/hf_config.md (not from our own output). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static char g_root[1024];

static void write_text(const char *dir, const char *name, const char *text) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) exit(1);
    fputs(text, f);
    fclose(f);
}

/* model.safetensors: zero-filled F32 tensors given as {name, rows, cols} (cols 0 = 1-D). */
typedef struct tdesc {
    const char *name;
    int rows, cols;
} tdesc;

static void write_model(const char *dir, const tdesc *ts, int n) {
    char hdr[4096];
    size_t k = 0, off = 0;
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)ts[i].rows * (size_t)(ts[i].cols ? ts[i].cols : 1) * 4;
        if (ts[i].cols)
            k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                                  "\"data_offsets\":[%zu,%zu]}", i ? "," : "", ts[i].name, ts[i].rows,
                                  ts[i].cols, off, off + bytes);
        else
            k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                                  "\"data_offsets\":[%zu,%zu]}", i ? "," : "", ts[i].name, ts[i].rows, off,
                                  off + bytes);
        off += bytes;
    }
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, "}");
    char p[2048];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    FILE *f = fopen(p, "wb");
    uint8_t len[8];
    qp_store_u64le(len, k);
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, k, f);
    for (size_t i = 0; i < off; i++) fputc(0, f);
    fclose(f);
}

static void new_dir(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", g_root, name);
    mkdir(out, 0777);
}

static qp_model *open_ok(const char *path, const qp_open_opts *o) {
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = qp_model_open(path, o, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s: %s", path, e.msg);
    return s == QP_OK ? m : NULL;
}

static bool has_problem(const qp_model *m, const char *needle) {
    for (int64_t i = 0; i < m->n_problems; i++)
        if (strstr(m->problems[i], needle)) return true;
    return false;
}

static const tdesc k_llama_tensors[] = {
    {"model.embed_tokens.weight", 10, 8},
    {"model.norm.weight", 8, 0},
    {"model.layers.0.input_layernorm.weight", 8, 0},
    {"model.layers.0.self_attn.q_proj.weight", 8, 8},
    {"model.layers.0.self_attn.k_proj.weight", 4, 8},
    {"model.layers.0.self_attn.rotary_emb.inv_freq", 2, 0},
    {"model.layers.1.mlp.gate_proj.weight", 12, 8},
};

/* GPT-2 style byte-level BPE; "Ġ" is U+0120. ids 0..6 plus added 8 (id 7 is a gap). */
static const char k_bpe_tokenizer[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":8,\"content\":\"<|endoftext|>\",\"special\":true},"
    "{\"id\":1,\"content\":\"b\",\"special\":false}],"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xc4\xa0\":3,\"\xc4\xa0" "a\":4,"
    "\"abb\":5,\"<0x41>\":6},\"merges\":[\"a b\",[\"\xc4\xa0\",\"a\"],\"ab b\"]}}";

static void test_llama(void) {
    char dir[2048];
    new_dir(dir, sizeof dir, "llama");
    write_model(dir, k_llama_tensors, 7);
    write_text(dir, "config.json",
               "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":8,"
               "\"intermediate_size\":12,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
               "\"num_key_value_heads\":1,\"vocab_size\":10,\"max_position_embeddings\":256,"
               "\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"tie_word_embeddings\":true,"
               "\"hidden_act\":\"silu\",\"bos_token_id\":8,\"eos_token_id\":[8,5],"
               "\"rope_scaling\":{\"factor\":8.0},\"torch_dtype\":\"bfloat16\"}");
    write_text(dir, "tokenizer.json", k_bpe_tokenizer);
    write_text(dir, "tokenizer_config.json",
               "{\"bos_token\":{\"content\":\"<|endoftext|>\",\"lstrip\":false},\"eos_token\":\"<|endoftext|>\","
               "\"add_bos_token\":true}");
    qp_model *m = open_ok(dir, NULL);
    if (!m) return;
    const qp_arch *a = &m->arch;
    QP_CHECK(a->family == QP_FAMILY_LLAMA && m->arch_name && strcmp(m->arch_name, "llama") == 0);
    QP_CHECK(a->hidden == 8 && a->intermediate == 12 && a->n_layers == 2 && a->n_heads == 2);
    QP_CHECK(a->n_kv_heads == 1 && a->head_dim == 4 && a->vocab == 10 && a->max_pos == 256);
    QP_CHECK(a->norm_eps == 1e-5f && a->rope_theta == 500000.0f && a->rope_style == QP_ROPE_NEOX);
    QP_CHECK(a->tie_embeddings && !a->qkv_bias && !a->sub_norms && a->act == QP_ACT_SILU);
    QP_CHECK(a->bos_id == 8 && a->eos_id == 8);
    const qp_meta *eos = qp_model_meta(m, "hf.eos_token_ids");
    QP_CHECK(eos && eos->type == QP_META_ARRAY && eos->arr_type == QP_META_I32 && eos->n == 2 &&
             qp_load_u32le(eos->raw + 4) == 5);
    const qp_meta *td = qp_model_meta(m, "hf.config.torch_dtype");
    QP_CHECK(td && td->type == QP_META_STRING && strcmp(td->str, "bfloat16") == 0);
    const qp_meta *hs = qp_model_meta(m, "hf.config.hidden_size");
    QP_CHECK(hs && hs->type == QP_META_I64 && hs->v.i == 8);
    const qp_meta *rs = qp_model_meta(m, "hf.config.rope_scaling");
    QP_CHECK(rs && rs->type == QP_META_STRING && strstr(rs->str, "\"factor\""));
    QP_CHECK(has_problem(m, "rope_scaling"));
    /* names */
    const qp_tensor *t = qp_model_find(m, "blk.0.attn_k.weight");
    QP_CHECK(t && strcmp(t->name, "model.layers.0.self_attn.k_proj.weight") == 0 && t->ne[0] == 8 && t->ne[1] == 4);
    QP_CHECK(qp_model_find(m, "token_embd.weight") && qp_model_find(m, "output_norm.weight"));
    QP_CHECK(qp_model_find(m, "blk.1.ffn_gate.weight") && qp_model_find(m, "blk.0.attn_norm.weight"));
    const qp_tensor *inv = qp_model_find(m, "model.layers.0.self_attn.rotary_emb.inv_freq");
    QP_CHECK(inv && inv->canon == NULL);
    /* tokenizer */
    const qp_vocab *v = &m->vocab;
    QP_CHECK(v->model == QP_TOK_BPE && strcmp(v->pre, "gpt-2") == 0);
    QP_CHECK_EQ_INT(v->n_tokens, 9);
    QP_CHECK(strcmp(v->tokens[4], "\xc4\xa0" "a") == 0 && v->token_lens[4] == 3);
    QP_CHECK(strcmp(v->tokens[7], "[PAD7]") == 0 && v->types[7] == QP_TOKTYPE_UNUSED);
    QP_CHECK(has_problem(m, "[PADn]"));
    QP_CHECK(v->types[8] == QP_TOKTYPE_CONTROL && v->types[1] == QP_TOKTYPE_USER_DEFINED);
    QP_CHECK(v->types[6] == QP_TOKTYPE_NORMAL); /* "<0x41>" is not a byte token in byte-level BPE */
    QP_CHECK(v->types[0] == QP_TOKTYPE_NORMAL);
    QP_CHECK_EQ_INT(v->n_merges, 3);
    QP_CHECK(v->n_merges == 3 && strcmp(v->merges[0], "a b") == 0 &&
             strcmp(v->merges[1], "\xc4\xa0 a") == 0 && strcmp(v->merges[2], "ab b") == 0);
    QP_CHECK(v->scores == NULL);
    QP_CHECK(v->bos_id == 8 && v->eos_id == 8 && v->add_bos && !v->add_eos);
    QP_CHECK(v->hf_json && v->hf_json_len == strlen(k_bpe_tokenizer) &&
             memcmp(v->hf_json, k_bpe_tokenizer, v->hf_json_len) == 0);
    qp_model_close(m);
}

/* SentencePiece-style BPE (byte_fallback, Metaspace): scores = -merge rank. */
static const char k_spm_tokenizer[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":true},"
    "{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"}]},"
    "\"pre_tokenizer\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"}]},"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,\"<s>\":1,"
    "\"</s>\":2,\"<0x0A>\":3,\"\xe2\x96\x81\":4,\"t\":5,\"h\":6,\"\xe2\x96\x81t\":7,\"\xe2\x96\x81th\":8,\"xyz\":9},"
    "\"merges\":[\"\xe2\x96\x81 t\",\"\xe2\x96\x81t h\"]}}";

static void test_qwen2_spm(void) {
    char dir[2048];
    new_dir(dir, sizeof dir, "qwen2");
    static const tdesc ts[] = {
        {"model.embed_tokens.weight", 10, 8},
        {"model.layers.0.self_attn.q_proj.bias", 8, 0},
        {"lm_head.weight", 10, 8},
    };
    write_model(dir, ts, 3);
    write_text(dir, "config.json",
               "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":8,\"num_attention_heads\":2,"
               "\"num_hidden_layers\":1,\"vocab_size\":10,\"tie_word_embeddings\":false,\"eos_token_id\":2,"
               "\"bos_token_id\":null}");
    write_text(dir, "tokenizer.json", k_spm_tokenizer);
    qp_model *m = open_ok(dir, NULL);
    if (!m) return;
    QP_CHECK(m->arch.family == QP_FAMILY_QWEN2 && strcmp(m->arch_name, "qwen2") == 0);
    QP_CHECK(m->arch.qkv_bias && !m->arch.tie_embeddings && m->arch.n_kv_heads == 2);
    QP_CHECK(m->arch.rope_theta == 10000.0f && m->arch.eos_id == 2);
    QP_CHECK(qp_model_find(m, "blk.0.attn_q.bias") && qp_model_find(m, "output.weight"));
    const qp_vocab *v = &m->vocab;
    QP_CHECK(v->model == QP_TOK_SPM && strcmp(v->pre, "default") == 0);
    QP_CHECK(v->types[0] == QP_TOKTYPE_CONTROL && v->types[1] == QP_TOKTYPE_CONTROL);
    QP_CHECK(v->types[3] == QP_TOKTYPE_BYTE && v->types[9] == QP_TOKTYPE_NORMAL);
    QP_CHECK(v->unk_id == 0 && v->add_bos); /* no tokenizer_config: SentencePiece adds BOS */
    QP_CHECK(v->scores && v->scores[7] == -0.0f && v->scores[8] == -1.0f);
    QP_CHECK(v->scores && v->scores[5] == 0.0f && v->scores[4] == 0.0f && v->scores[3] == 0.0f);
    QP_CHECK(v->scores && v->scores[9] == -2.0f); /* no merge makes "xyz": below every merge */
    QP_CHECK(v->eos_id == 2); /* from config.json */
    qp_model_close(m);
}

static void test_bitnet_mistral_unknown(void) {
    char dir[2048];
    new_dir(dir, sizeof dir, "bitnet");
    static const tdesc ts[] = {
        {"model.embed_tokens.weight", 10, 8},
        {"model.layers.0.self_attn.attn_sub_norm.weight", 8, 0},
        {"model.layers.0.mlp.ffn_sub_norm.weight", 12, 0},
        {"model.layers.0.mlp.down_proj.weight_scale", 1, 0},
    };
    write_model(dir, ts, 4);
    write_text(dir, "config.json",
               "{\"architectures\":[\"BitNetForCausalLM\"],\"hidden_size\":8,\"num_attention_heads\":2,"
               "\"hidden_act\":\"relu2\",\"num_hidden_layers\":1,\"head_dim\":4}");
    qp_model *m = open_ok(dir, NULL);
    if (m) {
        QP_CHECK(m->arch.family == QP_FAMILY_BITNET && strcmp(m->arch_name, "bitnet-b1.58") == 0 && m->arch.act_int8);
        QP_CHECK(m->arch.sub_norms && m->arch.act == QP_ACT_RELU2 && m->arch.tie_embeddings);
        QP_CHECK(qp_model_find(m, "blk.0.attn_sub_norm.weight") && qp_model_find(m, "blk.0.ffn_sub_norm.weight"));
        QP_CHECK(qp_model_find(m, "blk.0.ffn_down.weight_scale"));
        QP_CHECK(m->arch.vocab == 10); /* from the embedding rows */
        QP_CHECK(has_problem(m, "no tokenizer"));
        qp_model_close(m);
    }
    new_dir(dir, sizeof dir, "mistral");
    write_model(dir, k_llama_tensors, 7);
    write_text(dir, "config.json",
               "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":8,\"num_attention_heads\":2,"
               "\"num_key_value_heads\":null,\"head_dim\":null,\"attention_bias\":true}");
    m = open_ok(dir, NULL);
    if (m) {
        QP_CHECK(m->arch.family == QP_FAMILY_MISTRAL && strcmp(m->arch_name, "llama") == 0);
        QP_CHECK(m->arch.n_kv_heads == 2 && m->arch.head_dim == 4 && m->arch.qkv_bias);
        qp_model_close(m);
    }
    new_dir(dir, sizeof dir, "unknown");
    write_model(dir, k_llama_tensors, 7);
    write_text(dir, "config.json", "{\"architectures\":[\"GPTNeoXForCausalLM\"],\"model_type\":\"gpt_neox\"}");
    m = open_ok(dir, NULL);
    if (m) {
        QP_CHECK(m->arch.family == QP_FAMILY_UNKNOWN && strcmp(m->arch_name, "gpt_neox") == 0);
        QP_CHECK(has_problem(m, "GPTNeoXForCausalLM"));
        qp_model_close(m);
    }
}

static void test_overrides(void) {
    char dir[2048], tok[2048], file[2100];
    new_dir(dir, sizeof dir, "bare");
    write_model(dir, k_llama_tensors, 7);
    new_dir(tok, sizeof tok, "tokdir");
    write_text(tok, "tokenizer.json", k_spm_tokenizer);
    write_text(tok, "tokenizer_config.json", "{\"add_bos_token\":false,\"eos_token\":\"</s>\"}");
    /* a single file: no config; --tokenizer points at a tokenizer.json elsewhere */
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    char tj[2200];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", tok);
    qp_open_opts o = {.tokenizer_path = tj};
    qp_model *m = open_ok(file, &o);
    if (m) {
        QP_CHECK(m->vocab.model == QP_TOK_SPM && m->vocab.n_tokens == 10);
        QP_CHECK(!m->vocab.add_bos && m->vocab.eos_id == 2);
        QP_CHECK(m->arch.hidden == 8 && m->arch.vocab == 10 && m->arch.n_layers == 2 && m->arch.intermediate == 0);
        QP_CHECK(has_problem(m, "no config.json"));
        qp_model_close(m);
    }
    /* tokenizer.model only: handed to the SentencePiece reader (a problem while it is not built) */
    const char *real = qp_test_real_dir();
    char spm[2048];
    snprintf(spm, sizeof spm, "%.1000s/tokenizer.model", real);
    if (access(spm, R_OK) == 0) {
        char link[2200], abs_spm[2100], cwd[1024];
        if (spm[0] != '/' && getcwd(cwd, sizeof cwd)) snprintf(abs_spm, sizeof abs_spm, "%.1000s/%.1000s", cwd, spm);
        else snprintf(abs_spm, sizeof abs_spm, "%.2000s", spm);
        snprintf(link, sizeof link, "%s/tokenizer.model", dir);
        unlink(link);
        QP_CHECK(symlink(abs_spm, link) == 0);
        m = open_ok(dir, NULL);
        if (m) {
            QP_CHECK(m->vocab.n_tokens == 32000 || has_problem(m, "tokenizer not read"));
            qp_model_close(m);
        }
    }
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    mkdir(tmp, 0777);
    snprintf(g_root, sizeof g_root, "%.900s/st_hf_%d", tmp, (int)getpid());
    if (mkdir(g_root, 0777) != 0 && errno != EEXIST) return 1;
    test_llama();
    test_qwen2_spm();
    test_bitnet_mistral_unknown();
    test_overrides();
    int rc = qp_test_finish();
    if (rc == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", g_root);
    }
    return rc;
}
