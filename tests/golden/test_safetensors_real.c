/* The safetensors reader on files written by others ($QP_REAL_FIXTURES/safetensors, fixtures/README.md):
 *  - hf-samples-{f,d,e,overall}: the official Python library (numpy), metadata {"test":"a"},
 *    np.arange(-3, 3) cast to each dtype, so unsigned dtypes hold -3..2 modulo 2^bits; header NOT
 *    padded to 8 bytes;
 *  - candle-jfk-codes: the Rust crate, I64 [1,2,828], padded header, no __metadata__; expected
 *    values read from the file's bytes with Python's struct module (first six codes, min, max, sum).
 * Plus an HF directory made of symlinks to real files: hf-samples-overall as model.safetensors and
 * the phi-3 tokenizer.json + tokenizer_config.json, compared token by token (text and GGUF token
 * type) with llama.cpp's own conversion of that tokenizer, vocab/ggml-vocab-phi-3.gguf, whose
 * SentencePiece scores must order the merged pieces as our merge-rank scores do. */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qp_test.h"
#include "quantpack/quantpack.h"

static int64_t wrap(int64_t v, int bits) { /* numpy's astype(uintN) of a negative int */
    if (v >= 0 || bits >= 64) return v;
    return v + ((int64_t)1 << bits);
}

typedef struct expect {
    const char *name;
    qp_encoding enc;
    int unsigned_bits; /* 0 for signed and float dtypes */
    uint64_t begin;    /* data_offsets[0] as in the header */
} expect;

static void check_values(const qp_tensor *t, const expect *x) {
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    QP_CHECK(tr && tr->dequantize);
    if (!tr || !tr->dequantize) return;
    float y[6];
    QP_CHECK_EQ_INT(qp_tensor_nelements(t), 6);
    tr->dequantize(t->data, y, 6);
    for (int i = 0; i < 6; i++) {
        double want = x->unsigned_bits ? (double)(uint64_t)wrap(i - 3, x->unsigned_bits) : (double)(i - 3);
        QP_CHECK_MSG((double)y[i] == (double)(float)want, "%s[%d] = %g, want %g", x->name, i, (double)y[i],
                     want);
    }
}

static void check_sample(const char *dir, const char *file, const expect *xs, int n, uint64_t header_len) {
    char path[4096];
    qp_test_path(path, sizeof path, dir, file);
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = qp_model_open(path, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "%s: %s", file, e.msg);
    if (s != QP_OK) return;
    QP_CHECK(m->format == QP_FORMAT_SAFETENSORS);
    QP_CHECK_EQ_INT(m->n_tensors, n);
    QP_CHECK_EQ_INT(m->n_problems, 0);
    for (int64_t i = 0; i < m->n_problems; i++) fprintf(stderr, "problem: %s\n", m->problems[i]);
    const qp_meta *md = qp_model_meta(m, "safetensors.metadata.test");
    QP_CHECK(md && md->type == QP_META_STRING && strcmp(md->str, "a") == 0);
    for (int i = 0; i < n; i++) {
        const qp_tensor *t = qp_model_find(m, xs[i].name);
        QP_CHECK_MSG(t != NULL, "%s: tensor %s missing", file, xs[i].name);
        if (!t) continue;
        QP_CHECK_MSG(t->enc == xs[i].enc, "%s: %s encoding %d", file, xs[i].name, (int)t->enc);
        QP_CHECK_EQ_INT(t->n_dims, 1);
        QP_CHECK_EQ_INT(t->ne[0], 6);
        QP_CHECK(t->canon == NULL);
        QP_CHECK_EQ_INT(t->file_index, 0);
        QP_CHECK_EQ_INT(t->offset, 8 + header_len + xs[i].begin);
        QP_CHECK_EQ_INT(t->nbytes, 6 * qp_encoding_get(xs[i].enc)->block_bytes);
        check_values(t, &xs[i]);
    }
    qp_model_close(m);
}

static void check_candle(const char *dir) {
    char path[4096];
    qp_test_path(path, sizeof path, dir, "candle-jfk-codes.safetensors");
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = qp_model_open(path, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "candle: %s", e.msg);
    if (s != QP_OK) return;
    QP_CHECK_EQ_INT(m->n_tensors, 1);
    QP_CHECK_EQ_INT(m->n_meta, 0);
    QP_CHECK_EQ_INT(m->n_problems, 0);
    const qp_tensor *t = qp_model_find(m, "codes");
    QP_CHECK(t != NULL);
    if (t) {
        QP_CHECK(t->enc == QP_ENC_I64);
        QP_CHECK_EQ_INT(t->n_dims, 3);
        QP_CHECK(t->ne[0] == 828 && t->ne[1] == 2 && t->ne[2] == 1 && t->ne[3] == 1);
        QP_CHECK_EQ_INT(t->offset, 80); /* 8 + 72-byte padded header */
        QP_CHECK_EQ_INT(t->nbytes, 13248);
        float *y = malloc(1656 * sizeof *y);
        qp_encoding_get(t->enc)->dequantize(t->data, y, 1656);
        static const float first[6] = {865, 62, 408, 408, 475, 1022};
        for (int i = 0; i < 6; i++) QP_CHECK_MSG(y[i] == first[i], "codes[%d] = %g", i, (double)y[i]);
        double sum = 0, lo = 1e9, hi = -1e9;
        for (int i = 0; i < 1656; i++) {
            sum += y[i];
            lo = y[i] < lo ? y[i] : lo;
            hi = y[i] > hi ? y[i] : hi;
        }
        QP_CHECK(sum == 960640.0 && lo == 0 && hi == 1023);
        QP_CHECK(y[1653] == 873 && y[1654] == 796 && y[1655] == 889);
        free(y);
    }
    qp_model_close(m);
}

/* The tokenizer arrays of a llama.cpp vocab GGUF, scanned with a few lines of independent code
 * (GGUF v3: magic, version, n_tensors, n_kv, then key, type, value per entry). */
typedef struct gguf_vocab {
    int64_t n;
    char **tok;
    float *score;
    int32_t *type;
} gguf_vocab;

typedef struct rd {
    const uint8_t *p, *end;
} rd;

static bool rd_take(rd *r, size_t n, const uint8_t **out) {
    if ((size_t)(r->end - r->p) < n) return false;
    *out = r->p;
    r->p += n;
    return true;
}
static uint64_t rd_u64(rd *r, bool *ok) {
    const uint8_t *b;
    if (!rd_take(r, 8, &b)) { *ok = false; return 0; }
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}
static uint32_t rd_u32(rd *r, bool *ok) {
    const uint8_t *b;
    if (!rd_take(r, 4, &b)) { *ok = false; return 0; }
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static const size_t k_gguf_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static bool read_gguf_vocab(const char *path, gguf_vocab *v) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)size);
    bool ok = buf && fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    rd r = {buf, buf + size};
    const uint8_t *b;
    ok = ok && rd_take(&r, 4, &b) && memcmp(b, "GGUF", 4) == 0;
    rd_u32(&r, &ok);
    rd_u64(&r, &ok);
    uint64_t n_kv = rd_u64(&r, &ok);
    for (uint64_t k = 0; k < n_kv && ok; k++) {
        uint64_t kl = rd_u64(&r, &ok);
        const uint8_t *key = NULL;
        ok = ok && rd_take(&r, (size_t)kl, &key);
        uint32_t type = rd_u32(&r, &ok);
        if (!ok || type > 12) return false;
        uint32_t et = type;
        uint64_t n = 1;
        if (type == 9) {
            et = rd_u32(&r, &ok);
            n = rd_u64(&r, &ok);
            if (!ok || et > 12 || et == 9) return false;
        }
        bool is_tok = kl == 21 && memcmp(key, "tokenizer.ggml.tokens", 21) == 0;
        bool is_score = kl == 21 && memcmp(key, "tokenizer.ggml.scores", 21) == 0;
        bool is_type = kl == 25 && memcmp(key, "tokenizer.ggml.token_type", 25) == 0;
        if (is_tok) { v->n = (int64_t)n; v->tok = calloc(n, sizeof(char *)); }
        if (is_score) v->score = calloc(n, sizeof(float));
        if (is_type) v->type = calloc(n, sizeof(int32_t));
        for (uint64_t i = 0; i < n && ok; i++) {
            if (et == 8) {
                uint64_t sl = rd_u64(&r, &ok);
                ok = ok && rd_take(&r, (size_t)sl, &b);
                if (ok && is_tok) {
                    v->tok[i] = calloc(1, (size_t)sl + 1);
                    memcpy(v->tok[i], b, (size_t)sl);
                }
            } else {
                ok = rd_take(&r, k_gguf_size[et], &b);
                if (ok && is_score) memcpy(&v->score[i], b, 4);
                if (ok && is_type) v->type[i] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 |
                                                          (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
            }
        }
    }
    free(buf);
    return ok && v->tok && v->score && v->type;
}

static int cmp_by_real_score(const void *a, const void *b, const float *real) {
    float x = real[*(const int *)a], y = real[*(const int *)b];
    return x > y ? -1 : x < y ? 1 : 0;
}
static const float *g_real;
static int cmp_ids(const void *a, const void *b) { return cmp_by_real_score(a, b, g_real); }

static void check_hf_dir(const char *real) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char dir[1024], src[4096], dst[4096];
    mkdir(tmp, 0777);
    char real_abs[2100], cwd[1024];
    if (real[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(real_abs, sizeof real_abs, "%.1000s", real);
    else snprintf(real_abs, sizeof real_abs, "%.1000s/%.1000s", cwd, real);
    snprintf(dir, sizeof dir, "%s/st_real_dir_%d", tmp, (int)getpid());
    QP_CHECK(mkdir(dir, 0777) == 0 || errno == EEXIST);
    static const char *const links[][2] = {
        {"safetensors/hf-samples-overall.safetensors", "model.safetensors"},
        {"hf-tokenizers/phi-3/tokenizer.json", "tokenizer.json"},
        {"hf-tokenizers/phi-3/tokenizer_config.json", "tokenizer_config.json"},
    };
    for (int i = 0; i < 3; i++) {
        qp_test_path(src, sizeof src, real_abs, links[i][0]);
        qp_test_path(dst, sizeof dst, dir, links[i][1]);
        unlink(dst);
        QP_CHECK(symlink(src, dst) == 0);
    }
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = qp_model_open(dir, NULL, &m, &e);
    QP_CHECK_MSG(s == QP_OK, "hf dir: %s", e.msg);
    gguf_vocab gv = {0};
    qp_test_path(src, sizeof src, real, "vocab/ggml-vocab-phi-3.gguf");
    bool have_gguf = read_gguf_vocab(src, &gv);
    QP_CHECK_MSG(have_gguf, "cannot scan %s", src);
    if (s == QP_OK && have_gguf) {
        const qp_vocab *v = &m->vocab;
        QP_CHECK(v->model == QP_TOK_SPM);
        QP_CHECK(strcmp(v->pre, "default") == 0);
        QP_CHECK(v->hf_json != NULL && v->hf_json_len > 1000);
        QP_CHECK_EQ_INT(v->n_tokens, 32011); /* ids 0..32010 (<|user|>); llama.cpp pads to 32064 */
        QP_CHECK(gv.n >= v->n_tokens);
        QP_CHECK_EQ_INT(v->n_merges, 61249);
        QP_CHECK(v->n_merges > 0 && strcmp(v->merges[0], "\xe2\x96\x81 t") == 0);
        int bad_tokens = 0, bad_types = 0;
        for (int64_t i = 0; i < v->n_tokens && i < gv.n; i++) {
            if (strcmp(v->tokens[i], gv.tok[i]) != 0 && bad_tokens++ < 5)
                fprintf(stderr, "token %lld: '%s' vs llama.cpp '%s'\n", (long long)i, v->tokens[i], gv.tok[i]);
            if (v->types[i] != gv.type[i] && bad_types++ < 5)
                fprintf(stderr, "type of %lld ('%s'): %d, llama.cpp %d\n", (long long)i, gv.tok[i], v->types[i],
                        gv.type[i]);
        }
        QP_CHECK_EQ_INT(bad_tokens, 0);
        QP_CHECK_EQ_INT(bad_types, 0);
        /* tokenizer_config.json: bos <s>, eos <|endoftext|>, unk <unk>, no BOS added */
        QP_CHECK_EQ_INT(v->bos_id, 1);
        QP_CHECK_EQ_INT(v->eos_id, 32000);
        QP_CHECK_EQ_INT(v->unk_id, 0);
        QP_CHECK(!v->add_bos && !v->add_eos);
        /* merge-rank scores order the merged pieces as SentencePiece's own scores do */
        QP_CHECK(v->scores != NULL);
        if (v->scores) {
            int *ids = malloc(32000 * sizeof *ids), n = 0;
            for (int i = 259; i < 32000; i++)
                if (v->scores[i] < 0) ids[n++] = i; /* produced by a merge */
            QP_CHECK(n > 29000);
            g_real = gv.score;
            qsort(ids, (size_t)n, sizeof *ids, cmp_ids);
            int violations = 0;
            for (int k = 1; k < n; k++)
                if (gv.score[ids[k - 1]] > gv.score[ids[k]] && v->scores[ids[k - 1]] < v->scores[ids[k]])
                    violations++;
            QP_CHECK_EQ_INT(violations, 0);
            free(ids);
        }
        QP_CHECK(m->arch.family == QP_FAMILY_UNKNOWN); /* no config.json */
    }
    for (int64_t i = 0; i < gv.n && gv.tok; i++) free(gv.tok[i]);
    free(gv.tok);
    free(gv.score);
    free(gv.type);
    qp_model_close(m);
    for (int i = 0; i < 3; i++) {
        qp_test_path(dst, sizeof dst, dir, links[i][1]);
        unlink(dst);
    }
    rmdir(dir);
}

int main(void) {
    const char *real = qp_test_real_dir();
    char dir[1024];
    qp_test_path(dir, sizeof dir, real, "safetensors");
    char probe[4096];
    if (access(qp_test_path(probe, sizeof probe, dir, "hf-samples-overall.safetensors"), R_OK) != 0)
        QP_SKIP("%s not present", probe);

    static const expect f[] = {{"f", QP_ENC_F32, 0, 0}};
    static const expect d[] = {{"d", QP_ENC_F64, 0, 0}};
    static const expect e16[] = {{"e", QP_ENC_F16, 0, 0}};
    check_sample(dir, "hf-samples-f.safetensors", f, 1, 0x53);
    check_sample(dir, "hf-samples-d.safetensors", d, 1, 0x53);
    check_sample(dir, "hf-samples-e.safetensors", e16, 1, 0x53);
    static const expect all[] = {
        {"B", QP_ENC_U8, 8, 0},     {"H", QP_ENC_U16, 16, 6},   {"I", QP_ENC_U32, 32, 18},
        {"b", QP_ENC_I8, 0, 42},    {"d", QP_ENC_F64, 0, 48},   {"e", QP_ENC_F16, 0, 96},
        {"f", QP_ENC_F32, 0, 108},  {"h", QP_ENC_I16, 0, 132},  {"i", QP_ENC_I32, 0, 144},
    };
    check_sample(dir, "hf-samples-overall.safetensors", all, 9, 0x20e);
    check_candle(dir);
    char tok[4096];
    if (access(qp_test_path(tok, sizeof tok, real, "hf-tokenizers/phi-3/tokenizer.json"), R_OK) == 0)
        check_hf_dir(real);
    else
        fprintf(stderr, "note: phi-3 tokenizer fixture absent; directory check skipped\n");
    return qp_test_finish();
}
