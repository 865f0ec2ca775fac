/* qp-gen-fixtures: two runs give the same bytes in every file; every model directory is complete
 * and self-consistent (config vocab = tokenizer size = embedding rows, bos/eos ids); the
 * bitnet-packed tensors unpack, by the formula of encodings/enc_ternary.md implemented here
 * independently, to exactly the bitnet-float weights; llama-sharded holds exactly the tensors of
 * llama-gqa-untied; llama-k256 has its 256/512-wide shapes (all Q4_K/Q6_K under Q4_K_M), GQA 8/4,
 * an untied lm_head and the documented value scales; mixtral has Mixtral's config keys and
 * tensors (router [8, 256] with 4x the projections' std, 8 experts of w1/w3 [256, 256] and w2);
 * gemma/gemma2/gemma3 have their config keys, norms stored as w around 0 (Gemma applies 1 + w),
 * Gemma 2/3's four norms per layer and Gemma 3's q/k norms; gemma3-mm/-mm2 hold gemma3's tensors
 * byte for byte under their layout's text prefix, 8 vision/projector tensors, and a config.json
 * whose text_config leaves rope_theta, rms_norm_eps and the sliding pattern to the defaults; qwen35
 * is Qwen3_5ForConditionalGeneration's layout (text_config, model.language_model.*, delta-net
 * layers 0-2, full attention 3). Safetensors files are parsed here
 * with a minimal independent parser. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/core.h"

static const char *const k_models[] = {"llama-tied", "llama-gqa-untied", "llama-sharded",
                                       "qwen2", "bitnet-float", "bitnet-packed", "llama-k256", "bitnet-silu",
                                       "qwen3", "mixtral", "phi-fused", "gemma", "gemma2", "gemma3",
                                       "gemma3-mm", "gemma3-mm2", "gemma3-mm-rows", "qwen35", "llama-bias", "llama-rope3"};
#define N_MODELS (int)(sizeof k_models / sizeof k_models[0])

/* ---- minimal safetensors parse ---------------------------------------------------------------- */
typedef struct st_file {
    char *bytes;
    size_t len;
    size_t data_start;
    cJSON *header;
} st_file;

static bool st_load(st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->bytes = qp_test_read_file(path, &f->len);
    if (!f->bytes || f->len < 8) return false;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (uint8_t)f->bytes[i];
    if (n > f->len - 8) return false;
    f->data_start = 8 + (size_t)n;
    f->header = cJSON_ParseWithLength(f->bytes + 8, (size_t)n);
    return f->header != NULL;
}

static void st_free(st_file *f) {
    cJSON_Delete(f->header);
    free(f->bytes);
}

typedef struct st_view {
    const char *dtype;
    int n_dims;
    int64_t shape[4];
    const uint8_t *data;
    size_t nbytes;
} st_view;

static bool st_get(const st_file *f, const char *name, st_view *v) {
    cJSON *t = cJSON_GetObjectItemCaseSensitive(f->header, name);
    if (!t) return false;
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
    cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || cJSON_GetArraySize(off) != 2) return false;
    v->dtype = dt->valuestring;
    v->n_dims = cJSON_GetArraySize(sh);
    if (v->n_dims > 4) return false;
    for (int i = 0; i < v->n_dims; i++) v->shape[i] = (int64_t)cJSON_GetArrayItem(sh, i)->valuedouble;
    size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
    size_t en = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
    if (en < b || f->data_start + en > f->len) return false;
    v->data = (const uint8_t *)f->bytes + f->data_start + b;
    v->nbytes = en - b;
    return true;
}

static float bf16_value(const uint8_t *p) {
    uint32_t u = ((uint32_t)p[0] | ((uint32_t)p[1] << 8)) << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ---- determinism -------------------------------------------------------------------------------- */
static bool run_gen(const char *bin, const char *out) {
    return qp_test_system("'%s/qp-gen-fixtures' '%s' > /dev/null", bin, out) == 0;
}

static int compare_dirs(const char *a, const char *b) {
    DIR *d = opendir(a);
    if (!d) return -1;
    int files = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.') continue;
        char pa[2048], pb[2048];
        snprintf(pa, sizeof pa, "%s/%s", a, ent->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, ent->d_name);
        size_t la = 0, lb = 0;
        char *x = qp_test_read_file(pa, &la), *y = qp_test_read_file(pb, &lb);
        QP_CHECK_MSG(x && y && la == lb && memcmp(x, y, la) == 0, "%s differs between runs", pa);
        free(x);
        free(y);
        files++;
    }
    closedir(d);
    /* and b has no extra files */
    int nb = 0;
    d = opendir(b);
    while (d && (ent = readdir(d)) != NULL)
        if (ent->d_name[0] != '.') nb++;
    if (d) closedir(d);
    QP_CHECK_EQ_INT(nb, files);
    return files;
}

/* ---- per-model checks ------------------------------------------------------------------------- */
static cJSON *load_json(const char *dir, const char *name) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    size_t len = 0;
    char *t = qp_test_read_file(p, &len);
    QP_CHECK_MSG(t != NULL, "missing %s", p);
    if (!t) return NULL;
    cJSON *j = cJSON_ParseWithLength(t, len);
    QP_CHECK_MSG(j != NULL, "%s is not JSON", p);
    free(t);
    return j;
}

static int json_int(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? v->valueint : -12345;
}

static void check_consistency(const char *dir, const char *model) {
    char md[2048];
    snprintf(md, sizeof md, "%s/%s", dir, model);
    cJSON *cfg_file = load_json(md, "config.json"), *cfg = cfg_file;
    cJSON *tok = load_json(md, "tokenizer.json");
    cJSON *tcfg = load_json(md, "tokenizer_config.json");
    if (!cfg || !tok || !tcfg) goto done;
    /* Qwen3.5's multimodal layout: the text model's keys and tensors one level down */
    cJSON *text = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    if (text) cfg = text;
    const char *embed = text ? "model.language_model.embed_tokens.weight" : "model.embed_tokens.weight";
    int vocab = json_int(cfg, "vocab_size");
    cJSON *mv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tok, "model"), "vocab");
    cJSON *added = cJSON_GetObjectItemCaseSensitive(tok, "added_tokens");
    int n_tok = cJSON_GetArraySize(mv) + cJSON_GetArraySize(added);
    QP_CHECK_MSG(vocab == n_tok, "%s: vocab_size %d, tokenizer has %d", model, vocab, n_tok);
    QP_CHECK(vocab > 400 && vocab < 420);
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tok, "model"), "merges");
    QP_CHECK_EQ_INT(cJSON_GetArraySize(merges), vocab - 258);
    /* ids are 0..n-1 exactly once */
    char *seen = calloc((size_t)n_tok + 1, 1);
    for (cJSON *x = mv ? mv->child : NULL; x; x = x->next)
        if (x->valueint >= 0 && x->valueint < n_tok) seen[x->valueint]++;
    int bos = -1, eos = -1;
    const char *bos_text = cJSON_GetObjectItemCaseSensitive(tcfg, "bos_token")->valuestring;
    const char *eos_text = cJSON_GetObjectItemCaseSensitive(tcfg, "eos_token")->valuestring;
    for (cJSON *x = added ? added->child : NULL; x; x = x->next) {
        int id = json_int(x, "id");
        const char *content = cJSON_GetObjectItemCaseSensitive(x, "content")->valuestring;
        QP_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "special")));
        if (id >= 0 && id < n_tok) seen[id]++;
        if (strcmp(content, bos_text) == 0) bos = id;
        if (strcmp(content, eos_text) == 0) eos = id;
    }
    int dup_or_missing = 0;
    for (int i = 0; i < n_tok; i++) dup_or_missing += seen[i] != 1;
    QP_CHECK_EQ_INT(dup_or_missing, 0);
    free(seen);
    QP_CHECK_EQ_INT(json_int(cfg, "bos_token_id"), bos);
    QP_CHECK_EQ_INT(json_int(cfg, "eos_token_id"), eos);
    QP_CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tcfg, "add_bos_token")));
    /* embedding rows = vocab; tied models have no lm_head */
    char p[2300];
    snprintf(p, sizeof p, "%s/model.safetensors", md);
    if (strcmp(model, "llama-sharded") == 0) snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", md);
    st_file f;
    if (st_load(&f, p)) {
        st_view v;
        bool tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings"));
        if (st_get(&f, embed, &v)) {
            QP_CHECK_EQ_INT(v.shape[0], vocab);
            QP_CHECK_EQ_INT(v.shape[1], json_int(cfg, "hidden_size"));
        } else {
            QP_CHECK_MSG(strcmp(model, "llama-sharded") == 0, "%s: no embeddings", model);
        }
        if (tied) QP_CHECK(!st_get(&f, "lm_head.weight", &v));
        /* the official 8-byte header padding */
        QP_CHECK((f.data_start - 8) % 8 == 0);
        st_free(&f);
    } else {
        QP_CHECK_MSG(0, "%s: cannot parse", p);
    }
done:
    cJSON_Delete(cfg_file);
    cJSON_Delete(tok);
    cJSON_Delete(tcfg);
}

/* packed U8 [out/4, in]: bits 2i+1:2i of packed[r, c] = q[r + i*out/4, c] + 1; W = q * scale. */
static void check_bitnet(const char *dir) {
    char pf[2048], pp[2048];
    snprintf(pf, sizeof pf, "%s/bitnet-float/model.safetensors", dir);
    snprintf(pp, sizeof pp, "%s/bitnet-packed/model.safetensors", dir);
    st_file ff, fp;
    bool okf = st_load(&ff, pf), okp = st_load(&fp, pp);
    QP_CHECK(okf && okp);
    if (!okf || !okp) return;
    int n_proj = 0;
    long zeros = 0, total = 0;
    for (cJSON *t = ff.header->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        st_view vf, vp, vs;
        QP_CHECK(st_get(&ff, t->string, &vf));
        bool proj = strstr(t->string, "_proj.weight") != NULL;
        if (!proj) { /* everything else is identical in both files */
            QP_CHECK_MSG(st_get(&fp, t->string, &vp) && vp.nbytes == vf.nbytes &&
                             memcmp(vp.data, vf.data, vf.nbytes) == 0 && strcmp(vp.dtype, vf.dtype) == 0,
                         "%s differs", t->string);
            continue;
        }
        n_proj++;
        char sname[256];
        snprintf(sname, sizeof sname, "%s_scale", t->string);
        QP_CHECK_MSG(st_get(&fp, t->string, &vp) && st_get(&fp, sname, &vs), "%s missing", t->string);
        QP_CHECK(strcmp(vf.dtype, "BF16") == 0 && strcmp(vp.dtype, "U8") == 0);
        QP_CHECK(strcmp(vs.dtype, "BF16") == 0 && vs.n_dims == 1 && vs.shape[0] == 1);
        int64_t out = vf.shape[0], in = vf.shape[1], rows = out / 4;
        QP_CHECK(out % 4 == 0 && vp.n_dims == 2 && vp.shape[0] == rows && vp.shape[1] == in);
        if (vp.shape[0] != rows || vp.shape[1] != in) continue;
        float scale = bf16_value(vs.data);
        int ex;
        QP_CHECK(frexp(scale, &ex) == 0.5 && scale > 0.0f); /* a power of two */
        int bad = 0, bad_code = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < in; c++) {
                unsigned byte = vp.data[r * in + c];
                for (int i = 0; i < 4; i++) {
                    int code = (int)((byte >> (2 * i)) & 3u);
                    bad_code += code == 3;
                    float w = (float)(code - 1) * scale;
                    float want = bf16_value(vf.data + 2 * ((r + i * rows) * in + c));
                    bad += w != want;
                    zeros += code == 1;
                    total++;
                }
            }
        QP_CHECK_MSG(bad == 0 && bad_code == 0, "%s: %d mismatches, %d codes 3", t->string, bad, bad_code);
    }
    QP_CHECK_EQ_INT(n_proj, 2 * 7);
    QP_CHECK_MSG(zeros * 100 > total * 28 && zeros * 100 < total * 39, "zeros %ld of %ld", zeros, total);
    /* sub-norms present, shaped [hidden] / [intermediate] */
    st_view v;
    QP_CHECK(st_get(&ff, "model.layers.1.self_attn.attn_sub_norm.weight", &v) && v.shape[0] == 128);
    QP_CHECK(st_get(&ff, "model.layers.1.mlp.ffn_sub_norm.weight", &v) && v.shape[0] == 256);
    st_free(&ff);
    st_free(&fp);
}

static void check_sharded(const char *dir) {
    char p[2048];
    snprintf(p, sizeof p, "%s/llama-gqa-untied/model.safetensors", dir);
    st_file one;
    QP_CHECK(st_load(&one, p));
    st_file sh[2];
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/llama-sharded/model-%05d-of-00002.safetensors", dir, k + 1);
        QP_CHECK(st_load(&sh[k], p));
    }
    cJSON *idx = NULL;
    snprintf(p, sizeof p, "%s/llama-sharded", dir);
    idx = load_json(p, "model.safetensors.index.json");
    cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    double total = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(idx, "metadata"), "total_size")->valuedouble;
    size_t sum = 0;
    int n = 0;
    for (cJSON *t = one.header->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        st_view a, b;
        st_get(&one, t->string, &a);
        cJSON *file = cJSON_GetObjectItemCaseSensitive(wm, t->string);
        QP_CHECK_MSG(cJSON_IsString(file), "%s not in weight_map", t->string);
        if (!cJSON_IsString(file)) continue;
        int k = strstr(file->valuestring, "00001-of") ? 0 : 1;
        QP_CHECK_MSG(st_get(&sh[k], t->string, &b) && a.nbytes == b.nbytes && memcmp(a.data, b.data, a.nbytes) == 0,
                     "%s differs in the sharded copy", t->string);
        sum += a.nbytes;
        n++;
    }
    QP_CHECK_EQ_INT(cJSON_GetArraySize(wm), n);
    QP_CHECK_EQ_INT((long long)total, (long long)sum);
    QP_CHECK(n == 2 + 3 * 9 + 1);
    cJSON_Delete(idx);
    st_free(&one);
    st_free(&sh[0]);
    st_free(&sh[1]);
}

/* llama-k256: rows of 256/512, 8 heads over 4 KV heads, untied, BF16; sample std of the
 * embeddings ~1, projections ~0.05/sqrt(3), norms 1 + that, lm_head ~8x that overall with rows
 * scaled by Zipf's law, c / rank, c = sqrt(408 / sum_k 1/k^2) = 15.8 (fixtures/README.md). */
static double bf16_std(const st_view *v, double mean) {
    size_t n = v->nbytes / 2;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = bf16_value(v->data + 2 * i) - mean;
        s += d * d;
    }
    return n ? sqrt(s / (double)n) : 0;
}

static void check_k256(const char *dir) {
    char md[2048], p[2300];
    snprintf(md, sizeof md, "%s/llama-k256", dir);
    cJSON *cfg = load_json(md, "config.json");
    QP_CHECK_EQ_INT(json_int(cfg, "hidden_size"), 256);
    QP_CHECK_EQ_INT(json_int(cfg, "intermediate_size"), 512);
    QP_CHECK_EQ_INT(json_int(cfg, "num_hidden_layers"), 2);
    QP_CHECK_EQ_INT(json_int(cfg, "num_attention_heads"), 8);
    QP_CHECK_EQ_INT(json_int(cfg, "num_key_value_heads"), 4);
    QP_CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings")));
    cJSON_Delete(cfg);
    snprintf(p, sizeof p, "%s/model.safetensors", md);
    st_file f;
    QP_CHECK(st_load(&f, p));
    if (!f.header) return;
    int n = 0;
    for (cJSON *t = f.header->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        st_view v;
        QP_CHECK(st_get(&f, t->string, &v) && strcmp(v.dtype, "BF16") == 0);
        if (v.n_dims == 2) QP_CHECK_MSG(v.shape[1] % 256 == 0, "%s: rows of %lld", t->string, (long long)v.shape[1]);
        n++;
    }
    QP_CHECK_EQ_INT(n, 2 + 2 * 9 + 1);
    const double w = 0.05 / sqrt(3.0);
    static const struct { const char *name; double mean, std; } k[] = {
        {"model.embed_tokens.weight", 0, 1.0},
        {"model.layers.0.self_attn.q_proj.weight", 0, 1.0},
        {"model.layers.1.mlp.down_proj.weight", 0, 1.0},
        {"model.layers.1.input_layernorm.weight", 1, 1.0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        st_view v;
        bool ok = st_get(&f, k[i].name, &v);
        QP_CHECK_MSG(ok, "llama-k256: no %s", k[i].name);
        if (!ok) continue;
        double want = i == 0 ? 1.0 : w * k[i].std, got = bf16_std(&v, k[i].mean);
        QP_CHECK_MSG(fabs(got / want - 1) < (v.n_dims == 1 ? 0.2 : 0.02), "%s: std %g, want %g",
                     k[i].name, got, want);
    }
    /* lm_head: the row RMS values, largest first, follow 8w * c / k (ranks 1..4 within 15%, the
     * 100th-largest within 30%) and their mean square is (8w)^2 (within 10%) */
    st_view hd;
    bool have_head = st_get(&f, "lm_head.weight", &hd);
    QP_CHECK_MSG(have_head, "llama-k256: no lm_head.weight");
    if (have_head && hd.n_dims == 2 && hd.shape[0] == 408 && hd.shape[1] == 256) {
        double rms[408], inv2 = 0, ms = 0;
        for (int q = 1; q <= 408; q++) inv2 += 1.0 / ((double)q * (double)q);
        for (int r = 0; r < 408; r++) {
            double sq = 0;
            for (int i = 0; i < 256; i++) {
                double x = bf16_value(hd.data + 2 * ((size_t)r * 256 + (size_t)i));
                sq += x * x;
            }
            rms[r] = sqrt(sq / 256);
            ms += sq / 256 / 408;
        }
        for (int i = 0; i < 408; i++) /* descending */
            for (int j = i + 1; j < 408; j++)
                if (rms[j] > rms[i]) {
                    double t = rms[i];
                    rms[i] = rms[j];
                    rms[j] = t;
                }
        const double c = sqrt(408.0 / inv2), head = 8.0 * w;
        static const int ranks[] = {1, 2, 3, 4, 100};
        for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
            double want = head * c / ranks[i], got = rms[ranks[i] - 1];
            QP_CHECK_MSG(fabs(got / want - 1) < (ranks[i] <= 4 ? 0.15 : 0.3),
                         "lm_head: row RMS of rank %d %g, want %g", ranks[i], got, want);
        }
        QP_CHECK_MSG(fabs(sqrt(ms) / head - 1) < 0.1, "lm_head: RMS %g, want %g", sqrt(ms), head);
    } else
        QP_CHECK_MSG(false, "llama-k256: lm_head.weight is not [408, 256]");
    st_view kv;
    if (st_get(&f, "model.layers.0.self_attn.k_proj.weight", &kv)) QP_CHECK_EQ_INT(kv.shape[0], 128);
    st_free(&f);
}

/* qwen3: head_dim 128 given in config.json with 4 heads over hidden 256 (q_proj [512, 256],
 * o_proj [256, 512]), q_norm / k_norm [128] in every layer, no biases. */
static void check_qwen3(const char *dir) {
    char p[2048];
    snprintf(p, sizeof p, "%s/qwen3/model.safetensors", dir);
    st_file f;
    if (!st_load(&f, p)) {
        QP_CHECK_MSG(false, "%s: cannot parse", p);
        return;
    }
    st_view v;
    QP_CHECK(st_get(&f, "model.layers.0.self_attn.q_proj.weight", &v) && v.shape[0] == 512 && v.shape[1] == 256);
    QP_CHECK(st_get(&f, "model.layers.1.self_attn.o_proj.weight", &v) && v.shape[0] == 256 && v.shape[1] == 512);
    QP_CHECK(st_get(&f, "model.layers.1.self_attn.k_proj.weight", &v) && v.shape[0] == 256);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 2; k++) {
            char n[96];
            snprintf(n, sizeof n, "model.layers.%d.self_attn.%s.weight", l, k ? "k_norm" : "q_norm");
            QP_CHECK_MSG(st_get(&f, n, &v) && v.n_dims == 1 && v.shape[0] == 128, "qwen3: %s", n);
        }
    QP_CHECK(!st_get(&f, "model.layers.0.self_attn.q_proj.bias", &v));
    st_free(&f);
}

/* qwen35 (fixtures/README.md): the delta-net tensors of layers 0-2 with transformers' shapes
 * (conv1d [1024, 1, 4]: 2 key heads x 2 + 4 value heads of 128, A_log / dt_bias [4], norm [128]
 * around 1), no self_attn there; layer 3's
 * q_proj [2 x 256, 256] (q and gate), q/k norms [128] around 0 (w of 1 + w), no linear_attn. */
static void check_qwen35(const char *dir) {
    char p[2048];
    snprintf(p, sizeof p, "%s/qwen35/model.safetensors", dir);
    st_file f;
    if (!st_load(&f, p)) {
        QP_CHECK_MSG(false, "%s: cannot parse", p);
        return;
    }
    st_view v;
    char n[128];
    for (int l = 0; l < 4; l++) {
#define LN(suffix) (snprintf(n, sizeof n, "model.language_model.layers.%d.%s", l, suffix), n)
        bool lin = l < 3;
        QP_CHECK_MSG(st_get(&f, LN("linear_attn.conv1d.weight"), &v) == lin &&
                         (!lin || (v.n_dims == 3 && v.shape[0] == 1024 && v.shape[1] == 1 && v.shape[2] == 4)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("linear_attn.in_proj_qkv.weight"), &v) == lin && (!lin || v.shape[0] == 1024), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("linear_attn.A_log"), &v) == lin && (!lin || (v.n_dims == 1 && v.shape[0] == 4)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("linear_attn.out_proj.weight"), &v) == lin &&
                         (!lin || (v.shape[0] == 256 && v.shape[1] == 512)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("linear_attn.norm.weight"), &v) == lin &&
                         (!lin || (v.shape[0] == 128 && fabsf(bf16_value(v.data) - 1.0f) < 0.5f)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("self_attn.q_proj.weight"), &v) == !lin &&
                         (lin || (v.shape[0] == 512 && v.shape[1] == 256)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("self_attn.q_norm.weight"), &v) == !lin &&
                         (lin || (v.shape[0] == 128 && fabsf(bf16_value(v.data)) < 0.5f)), "%s", n);
        QP_CHECK_MSG(st_get(&f, LN("post_attention_layernorm.weight"), &v) && fabsf(bf16_value(v.data)) < 0.5f, "%s", n);
#undef LN
    }
    QP_CHECK(st_get(&f, "lm_head.weight", &v) && !st_get(&f, "model.embed_tokens.weight", &v));
    st_free(&f);
}

/* gemma, gemma2, gemma3 (fixtures/README.md): architectures and Gemma's config keys; norms of
 * mean ~0 (w of 1 + w); four norms per layer for 2/3, q/k norms [128] for 3, no lm_head. */
static void check_gemma(const char *dir, const char *model, const char *arch, int layers, int norms) {
    char md[2048], p[2100];
    snprintf(md, sizeof md, "%s/%s", dir, model);
    cJSON *cfg = load_json(md, "config.json");
    if (cfg) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
        QP_CHECK_MSG(a && cJSON_IsString(a->child) && strcmp(a->child->valuestring, arch) == 0, "%s arch", model);
        cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_activation");
        QP_CHECK_MSG(cJSON_IsString(act) && strcmp(act->valuestring, "gelu_pytorch_tanh") == 0, "%s act", model);
        QP_CHECK_EQ_INT(json_int(cfg, "head_dim"), 128);
        QP_CHECK_EQ_INT(json_int(cfg, "num_hidden_layers"), layers);
        if (norms == 4) QP_CHECK_EQ_INT(json_int(cfg, "sliding_window"), 8);
        cJSON_Delete(cfg);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", md);
    st_file f;
    if (!st_load(&f, p)) {
        QP_CHECK_MSG(false, "%s: cannot parse", p);
        return;
    }
    static const char *const nn[4] = {"input_layernorm", "post_attention_layernorm",
                                      "pre_feedforward_layernorm", "post_feedforward_layernorm"};
    st_view v;
    for (int k = 0; k < 4; k++) {
        char n[128];
        snprintf(n, sizeof n, "model.layers.%d.%s.weight", layers - 1, nn[k]);
        bool ok = st_get(&f, n, &v);
        QP_CHECK_MSG(ok == (k < norms), "%s: %s %s", model, n, ok ? "present" : "absent");
        if (ok) {
            double mean = 0;
            for (int64_t i = 0; i < v.shape[0]; i++) mean += bf16_value(v.data + 2 * i);
            QP_CHECK_MSG(fabs(mean / (double)v.shape[0]) < 0.01, "%s: %s mean %g", model, n, mean);
        }
    }
    bool qk = st_get(&f, "model.layers.0.self_attn.q_norm.weight", &v);
    QP_CHECK_MSG(qk == (strcmp(model, "gemma3") == 0) && (!qk || v.shape[0] == 128), "%s q_norm", model);
    QP_CHECK(!st_get(&f, "lm_head.weight", &v));
    st_free(&f);
}

/* gemma3-mm (prefix "language_model.model.", vision "") and gemma3-mm2 ("model.language_model.",
 * "model."): Gemma3ForConditionalGeneration; every gemma3 tensor "model.X" as "<prefix>X" with
 * the same bytes, plus exactly 8 tensors under <vision>vision_tower. / multi_modal_projector.
 * gemma3-mm-rows: the embeddings have `rows` rows, gemma3's then zeros. */
static void check_gemma3_mm(const char *dir, const char *model, const char *prefix, const char *vision,
                            int rows) {
    char md[2048], p[2100];
    snprintf(md, sizeof md, "%s/%s", dir, model);
    cJSON *cfg = load_json(md, "config.json");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    QP_CHECK_MSG(cJSON_IsArray(ar) && cJSON_IsString(ar->child) &&
                 strcmp(ar->child->valuestring, "Gemma3ForConditionalGeneration") == 0, "%s arch", model);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
    QP_CHECK_MSG(cJSON_IsObject(tc) && json_int(tc, "vocab_size") == rows && json_int(tc, "head_dim") == 128,
                 "%s text_config", model);
    QP_CHECK_MSG(!cJSON_GetObjectItemCaseSensitive(tc, "rope_theta") &&
                 !cJSON_GetObjectItemCaseSensitive(tc, "rms_norm_eps") &&
                 !cJSON_GetObjectItemCaseSensitive(tc, "sliding_window_pattern"), "%s: defaults given", model);
    QP_CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(cfg, "vision_config")));
    cJSON_Delete(cfg);
    st_file f, g;
    snprintf(p, sizeof p, "%s/model.safetensors", md);
    bool ok = st_load(&f, p);
    snprintf(p, sizeof p, "%s/gemma3/model.safetensors", dir);
    ok = st_load(&g, p) && ok;
    QP_CHECK_MSG(ok, "%s: cannot parse", model);
    if (!ok) return;
    int n_text = 0, n_other = 0, n_g3 = 0;
    for (cJSON *t = g.header->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        n_g3++;
        char n[256];
        snprintf(n, sizeof n, "%s%s", prefix, t->string + strlen("model."));
        st_view a, b;
        bool emb = strcmp(t->string, "model.embed_tokens.weight") == 0;
        size_t want = 0; /* the embedding's bytes beyond gemma3's rows */
        bool same = st_get(&g, t->string, &b) && st_get(&f, n, &a);
        if (same && emb) {
            QP_CHECK_EQ_INT(a.shape[0], rows);
            want = b.nbytes / 408 * (size_t)(rows - 408);
            for (size_t i = b.nbytes; i < a.nbytes && i < b.nbytes + want; i++) same = same && a.data[i] == 0;
        }
        same = same && a.nbytes == b.nbytes + want && memcmp(a.data, b.data, b.nbytes) == 0;
        QP_CHECK_MSG(same, "%s: %s is not gemma3's %s", model, n, t->string);
    }
    for (cJSON *t = f.header->child; t; t = t->next) {
        if (strcmp(t->string, "__metadata__") == 0) continue;
        char vt[64], mp[64];
        snprintf(vt, sizeof vt, "%svision_tower.", vision);
        snprintf(mp, sizeof mp, "%smulti_modal_projector.", vision);
        if (strncmp(t->string, prefix, strlen(prefix)) == 0) n_text++;
        else if (strncmp(t->string, vt, strlen(vt)) == 0 || strncmp(t->string, mp, strlen(mp)) == 0) n_other++;
        else QP_CHECK_MSG(false, "%s: unexpected tensor %s", model, t->string);
    }
    QP_CHECK_EQ_INT(n_text, n_g3);
    QP_CHECK_EQ_INT(n_other, 8);
    st_free(&f);
    st_free(&g);
}

/* mixtral: MixtralForCausalLM with 8 experts, top-2; per layer the router and 8 x 3 expert
 * matrices instead of mlp.*, all BF16 [*, 256]; router std 4w, expert std w (fixtures/README.md). */
static void check_mixtral(const char *dir) {
    char md[2048], p[2300];
    snprintf(md, sizeof md, "%s/mixtral", dir);
    cJSON *cfg = load_json(md, "config.json");
    const cJSON *ar = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    QP_CHECK(cJSON_IsArray(ar) && cJSON_IsString(ar->child) &&
             strcmp(ar->child->valuestring, "MixtralForCausalLM") == 0);
    QP_CHECK_EQ_INT(json_int(cfg, "num_local_experts"), 8);
    QP_CHECK_EQ_INT(json_int(cfg, "num_experts_per_tok"), 2);
    QP_CHECK_EQ_INT(json_int(cfg, "intermediate_size"), 256);
    cJSON_Delete(cfg);
    snprintf(p, sizeof p, "%s/model.safetensors", md);
    st_file f;
    QP_CHECK(st_load(&f, p));
    if (!f.header) return;
    int n = 0;
    for (cJSON *t = f.header->child; t; t = t->next) n += strcmp(t->string, "__metadata__") != 0;
    /* embed, norm, lm_head + per layer 2 norms, 4 attention, router, 24 experts */
    QP_CHECK_EQ_INT(n, 3 + 2 * (2 + 4 + 1 + 24));
    QP_CHECK_MSG(!cJSON_GetObjectItemCaseSensitive(f.header, "model.layers.0.mlp.gate_proj.weight"),
                 "mixtral has a dense mlp");
    const double w = 0.05 / sqrt(3.0);
    st_view v;
    bool ok = st_get(&f, "model.layers.1.block_sparse_moe.gate.weight", &v);
    QP_CHECK_MSG(ok && v.shape[0] == 8 && v.shape[1] == 256, "mixtral: router");
    if (ok) QP_CHECK_MSG(fabs(bf16_std(&v, 0) / (4 * w) - 1) < 0.05, "router std %g", bf16_std(&v, 0));
    for (int x = 0; x < 8; x++) {
        static const char *const wn[3] = {"w1", "w2", "w3"};
        for (int k = 0; k < 3; k++) {
            char nm[128];
            snprintf(nm, sizeof nm, "model.layers.1.block_sparse_moe.experts.%d.%s.weight", x, wn[k]);
            ok = st_get(&f, nm, &v);
            QP_CHECK_MSG(ok && strcmp(v.dtype, "BF16") == 0 && v.shape[0] == 256 && v.shape[1] == 256,
                         "mixtral: %s", nm);
            if (ok && x == 7) QP_CHECK_MSG(fabs(bf16_std(&v, 0) / w - 1) < 0.02, "%s std", nm);
        }
    }
    st_free(&f);
}

int main(void) {
    const char *bin = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    qp_test_mkdir_p(tmp);
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/gen-fixtures-a.%ld", tmp, (long)getpid());
    snprintf(b, sizeof b, "%s/gen-fixtures-b.%ld", tmp, (long)getpid());
    QP_CHECK(run_gen(bin, a));
    QP_CHECK(run_gen(bin, b));
    /* a second run over an existing output replaces it cleanly */
    QP_CHECK(run_gen(bin, b));
    for (int i = 0; i < N_MODELS; i++) {
        char da[1100], db[1100];
        snprintf(da, sizeof da, "%s/%s", a, k_models[i]);
        snprintf(db, sizeof db, "%s/%s", b, k_models[i]);
        int files = compare_dirs(da, db);
        QP_CHECK_MSG(files >= 5, "%s: %d files", k_models[i], files);
        if (strncmp(k_models[i], "gemma3-mm", 9) != 0) check_consistency(a, k_models[i]);
    }
    /* nothing but the model folders (no staging debris) */
    int entries = 0;
    DIR *d = opendir(b);
    struct dirent *ent;
    while (d && (ent = readdir(d)) != NULL)
        if (ent->d_name[0] != '.') entries++;
    if (d) closedir(d);
    QP_CHECK_EQ_INT(entries, N_MODELS);
    check_bitnet(a);
    check_sharded(a);
    check_k256(a);
    check_qwen3(a);
    check_mixtral(a);
    check_gemma(a, "gemma", "GemmaForCausalLM", 2, 2);
    check_gemma(a, "gemma2", "Gemma2ForCausalLM", 2, 4);
    check_gemma(a, "gemma3", "Gemma3ForCausalLM", 6, 4);
    check_gemma3_mm(a, "gemma3-mm", "language_model.model.", "", 408);
    check_gemma3_mm(a, "gemma3-mm2", "model.language_model.", "model.", 408);
    check_gemma3_mm(a, "gemma3-mm-rows", "language_model.model.", "", 416);
    check_qwen35(a);
    QP_CHECK_EQ_INT(qp_path_remove_tree(a, NULL), QP_OK);
    QP_CHECK_EQ_INT(qp_path_remove_tree(b, NULL), QP_OK);
    return qp_test_finish();
}
