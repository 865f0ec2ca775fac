/* .bullet round trips:
 *  1. a synthetic model with every header feature (BPE merges, token types, two task heads with
 *     labels, checksum): write -> read -> write gives identical bytes; what was written reads
 *     back (tokens, scores, merges, types, ids, labels, dims, BQ4 bytes);
 *  2. stories260K (llama2.c + tok512.bin) -> .bullet -> back into a llama2.c checkpoint of the
 *     source's own shapes (4 K/V heads, FFN 172) from the decoded weights: the reference runtime
 *     gives the same logits for both (the K/V repeat, FFN padding and name mapping are exact);
 *     and the .bullet re-packs to identical bytes;
 *  3. a task head whose rows are rows of the gen head: its scores through qp_runtime_hidden and
 *     qp_bullet_task_scores equal the runtime's own logits for those token ids. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "converters/convert_bullet.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"
#include "writers/bullet_writer.h"
#include "writers/safetensors_writer.h"

static char g_tmp[512];

static const char *tmp_path(const char *name) {
    static char buf[4][640];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/bullet_rt_%d_%s", g_tmp, (int)getpid(), name);
    return buf[k];
}

static uint32_t g_rng = 12345;
static float frand(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((g_rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* write -> read -> write of a model read from path; out2 must equal path byte for byte */
static void rewrite_identical(const char *path, const char *out2) {
    qp_err e = {0};
    qp_model *m = NULL;
    QP_CHECK_MSG(qp_model_open(path, NULL, &m, &e) == QP_OK, "%s", e.msg);
    if (!m) return;
    qp_bullet_info info;
    qp_bullet_head_info *heads;
    qp_bullet_tensor *bt;
    int64_t n;
    QP_CHECK_MSG(qp_bullet_info_from_model(m, &info, &heads, &bt, &n, &e) == QP_OK, "%s", e.msg);
    QP_CHECK_MSG(qp_bullet_write(out2, &info, bt, n, &e) == QP_OK, "%s", e.msg);
    QP_CHECK_MSG(qp_test_files_equal(path, out2, NULL), "%s re-written differs", path);
    qp_bullet_info_free(&info, heads, bt);
    qp_model_close(m);
}

/* ---- 1 --------------------------------------------------------------------------------------- */

static void synthetic(void) {
    const char *toks[6] = {"a", "b", "ab", "\xc4\xa0x", "<|end|>", "q\"uote"};
    const float scores[6] = {0.5f, -1.0f, 2.25f, 0.0f, -0.125f, 3.0f};
    const int32_t types[6] = {1, 1, 1, 1, 3, 4};
    const char *merges[2] = {"a b", "\xc4\xa0 x"};
    const char *lab_s[3] = {"neg", "neu", "pos\n"};
    const char *lab_n[2] = {"O", "PER"};
    qp_bullet_head_info hi[2] = {{"sentiment", 3, lab_s}, {"ner", 2, lab_n}};
    qp_bullet_info in;
    memset(&in, 0, sizeof in);
    in.model_name = "synthetic \"one\"";
    in.hidden = 64;
    in.n_layers = 1;
    in.n_heads = 4;
    in.max_context = 99;
    in.ff_multiplier = 4;
    in.rope_theta = 10000;
    in.vocab = (qp_bullet_vocab){6, toks, NULL, scores, types, 2, merges, "gpt2", "llama-bpe", -1, 4, -1, -1, false};
    in.has_gen = true;
    in.heads = hi;
    in.n_heads_info = 2;
    in.checksum = true;
    static float w[9][256 * 64];
    for (int t = 0; t < 9; t++)
        for (int i = 0; i < 256 * 64; i++) w[t][i] = frand();
    for (int i = 0; i < 64; i++) w[1][i] = 1.0f; /* a constant norm: exact */
    qp_bullet_tensor bt[16];
    memset(bt, 0, sizeof bt);
    int n = 0;
#define T(NAME, R, D0, D1, W)                                                                     \
    bt[n] = (qp_bullet_tensor){.name = NAME, .rank = R, .dims = {D0, D1}, .f32 = W};              \
    n++
    T("tok_embeddings.weight", 2, 6, 64, w[0]);
    T("layers.0.norm.attn.weight", 1, 64, 0, w[1]);
    T("layers.0.attention.query.weight", 2, 64, 64, w[2]);
    T("layers.0.attention.key.weight", 2, 64, 64, w[3]);
    T("layers.0.attention.value.weight", 2, 64, 64, w[4]);
    T("layers.0.attention.output.weight", 2, 64, 64, w[5]);
    T("layers.0.norm.ffn.weight", 1, 64, 0, w[1]);
    T("layers.0.ffn.w1.weight", 2, 256, 64, w[6]);
    T("layers.0.ffn.w3.weight", 2, 256, 64, w[7]);
    T("layers.0.ffn.w2.weight", 2, 64, 256, w[8]);
    T("final_layernorm.weight", 1, 64, 0, w[1]);
    T("gen_head.weight", 2, 6, 64, w[2]);
    T("sentiment_head.weight", 2, 3, 64, w[3]);
    T("ner_head.weight", 2, 2, 64, w[4]);
    T("output_head.bias", 1, 6, 0, w[5]); /* 1-D, not a multiple of 32: last block padded */
#undef T
    const char *p1 = tmp_path("syn1.bullet"), *p2 = tmp_path("syn2.bullet");
    qp_err e = {0};
    QP_CHECK_MSG(qp_bullet_write(p1, &in, bt, n, &e) == QP_OK, "%s", e.msg);
    qp_model *m = NULL;
    QP_CHECK_MSG(qp_model_open(p1, NULL, &m, &e) == QP_OK, "%s", e.msg);
    if (m) {
        QP_CHECK_EQ_INT(m->n_tensors, n);
        QP_CHECK_EQ_INT(m->vocab.n_tokens, 6);
        QP_CHECK(m->vocab.model == QP_TOK_BPE && strcmp(m->vocab.pre, "llama-bpe") == 0);
        for (int i = 0; i < 6 && m->vocab.n_tokens == 6; i++) {
            QP_CHECK(strcmp(m->vocab.tokens[i], toks[i]) == 0);
            QP_CHECK(m->vocab.scores[i] == scores[i]);
            QP_CHECK(m->vocab.types && m->vocab.types[i] == types[i]);
        }
        QP_CHECK(m->vocab.n_merges == 2 && strcmp(m->vocab.merges[1], merges[1]) == 0);
        QP_CHECK_EQ_INT(m->vocab.eos_id, 4);
        QP_CHECK_EQ_INT(m->vocab.bos_id, -1);
        QP_CHECK_EQ_INT(m->arch.max_pos, 99);
        const qp_meta *md = qp_model_meta(m, "bullet.model_name");
        QP_CHECK(md && strcmp(md->str, "synthetic \"one\"") == 0);
        QP_CHECK(qp_model_meta(m, "bullet.checksum") != NULL);
        QP_CHECK(qp_model_find(m, "output.weight") != NULL);
        QP_CHECK(qp_model_find(m, "blk.0.ffn_down.weight") != NULL);
        qp_bullet_task_head h;
        QP_CHECK_MSG(qp_bullet_task_head_get(m, "sentiment", &h, &e) == QP_OK, "%s", e.msg);
        QP_CHECK(h.n_out == 3 && strcmp(h.labels[2], "pos\n") == 0);
        qp_bullet_task_head_free(&h);
        const qp_tensor *norm = qp_model_find(m, "blk.0.attn_norm.weight");
        float y[64];
        qp_encoding_get(QP_ENC_BQ4)->dequantize(norm->data, y, 64);
        bool ones = true;
        for (int i = 0; i < 64; i++) ones &= y[i] == 1.0f;
        QP_CHECK(ones);
        const qp_tensor *bias = m->tensors + 14;
        QP_CHECK(bias->ne[0] == 6 && bias->nbytes == 20);
        QP_CHECK_EQ_INT(m->n_problems, 0);
        qp_model_close(m);
    }
    rewrite_identical(p1, p2);
    /* the writer refuses what bullet-core would misread */
    bt[2].dims[1] = 48; /* rows of 48 */
    bt[2].dims[0] = 64 * 64 / 48;
    e = (qp_err){0};
    QP_CHECK(qp_bullet_write(p2, &in, bt, n, &e) == QP_ERR_LIMIT && strstr(e.msg, "multiple of 32"));
    bt[2].dims[0] = 64;
    bt[2].dims[1] = 64;
    bt[0].dims[0] = 70000;
    e = (qp_err){0};
    QP_CHECK_MSG(qp_bullet_write(p2, &in, bt, n, &e) == QP_ERR_LIMIT && strstr(e.msg, "65535"), "%s", e.msg);
    bt[0].dims[0] = 6;
    bt[13].name = "sentiment_head.weight"; /* two tensors with one hash */
    e = (qp_err){0};
    QP_CHECK_MSG(qp_bullet_write(p2, &in, bt, n, &e) == QP_ERR_ARG && strstr(e.msg, "hash"), "%s", e.msg);
    bt[13].name = "ner_head.weight";
    in.hidden = 48;
    e = (qp_err){0};
    QP_CHECK(qp_bullet_write(p2, &in, bt, n, &e) == QP_ERR_LIMIT);
    QP_CHECK(access(p2, F_OK) == 0); /* the earlier good file is untouched by failed writes */
    unlink(p1);
    unlink(p2);
}

/* ---- 2, 3 ------------------------------------------------------------------------------------ */

static float *decode(const qp_model *m, const char *canon, int64_t *n) {
    const qp_tensor *t = qp_model_find(m, canon);
    if (!t) return NULL;
    *n = qp_tensor_nelements(t);
    float *x = malloc((size_t)*n * sizeof *x);
    qp_encoding_get(t->enc)->dequantize(t->data, x, *n);
    return x;
}

static void stories(void) {
    char src[1024], tok[1024];
    qp_test_path(src, sizeof src, qp_test_real_dir(), "stories260K.bin");
    qp_test_path(tok, sizeof tok, qp_test_real_dir(), "tok512.bin");
    if (access(src, R_OK) != 0 || access(tok, R_OK) != 0) {
        printf("stories260K missing: part 2 skipped\n");
        return;
    }
    qp_err e = {0};
    qp_open_opts oo = {tok};
    qp_model *sm = NULL, *bm = NULL, *tm = NULL;
    QP_CHECK_MSG(qp_model_open(src, &oo, &sm, &e) == QP_OK, "%s", e.msg);
    if (!sm) return;
    /* heads: sentiment = gen rows of tokens 403 and 407 ("Once", "upon"... whatever they are) */
    const int32_t pick[2] = {403, 407};
    const char *hw = tmp_path("heads.safetensors");
    {
        const qp_tensor *emb = qp_model_find(sm, "token_embd.weight");
        float rows[2 * 64];
        for (int r = 0; r < 2; r++) memcpy(rows + 64 * r, emb->data + (size_t)pick[r] * 64 * 4, 64 * 4);
        qp_st_writer *w = NULL;
        int64_t shape[2] = {2, 64};
        QP_CHECK(qp_st_writer_new(hw, &w, &e) == QP_OK);
        QP_CHECK(qp_st_writer_add_meta(w, "sentiment_labels", "[\"tok403\",\"tok407\"]", &e) == QP_OK);
        QP_CHECK(qp_st_writer_add_tensor(w, "sentiment_head.weight", QP_ENC_F32, 2, shape, &e) == QP_OK);
        QP_CHECK(qp_st_writer_begin(w, &e) == QP_OK);
        QP_CHECK(qp_st_writer_write_tensor(w, rows, sizeof rows, &e) == QP_OK);
        QP_CHECK_MSG(qp_st_writer_finish(w, &e) == QP_OK, "%s", e.msg);
    }
    const char *bp = tmp_path("s260.bullet"), *bp2 = tmp_path("s260b.bullet"), *tp = tmp_path("twin.bin");
    const char *tasks[2] = {"gen", "sentiment"};
    qp_bullet_convert_opts co = {.tasks = tasks, .n_tasks = 2, .head_weights = hw, .checksum = true};
    qp_bullet_convert_stats st;
    QP_CHECK_MSG(qp_convert_to_bullet(sm, bp, &co, &st, &e) == QP_OK, "%s", e.msg);
    QP_CHECK(st.ffn_src == 172 && st.ffn_out == 256 && st.kv_heads_src == 4 && st.tied);
    QP_CHECK_MSG(qp_model_open(bp, NULL, &bm, &e) == QP_OK, "%s", e.msg);
    if (!bm) goto out;
    rewrite_identical(bp, bp2);

    /* the llama2.c twin from the decoded weights, in the source's own shapes */
    size_t n;
    uint8_t *orig = qp_test_read_file(src, &n);
    int32_t hdr[7];
    memcpy(hdr, orig, 28);
    int64_t dim = hdr[0], hid = hdr[1], L = hdr[2], nh = hdr[3], nkv = hdr[4], V = hdr[5];
    int64_t hd = dim / nh, kvd = nkv * hd, g = nh / nkv;
    float *f = (float *)(orig + 28); /* little-endian host */
    size_t o = 0;
    int64_t k;
    float *x = decode(bm, "token_embd.weight", &k);
    memcpy(f + o, x, (size_t)(V * dim) * 4);
    o += (size_t)(V * dim);
    free(x);
    static const char *const order[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                         "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"};
    for (int gi = 0; gi < 9; gi++) {
        for (int64_t l = 0; l < L; l++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%lld.%s.weight", (long long)l, order[gi]);
            x = decode(bm, nm, &k);
            QP_CHECK(x != NULL);
            if (!x) continue;
            if (gi == 2 || gi == 3) { /* repeated K/V heads: keep head j*g of each group */
                for (int64_t j = 0; j < nkv; j++)
                    memcpy(f + o + (size_t)(j * hd * dim), x + (size_t)(j * g * hd * dim), (size_t)(hd * dim) * 4);
                o += (size_t)(kvd * dim);
            } else if (gi == 6 || gi == 8) { /* gate/up: the first hid of 256 rows */
                for (int64_t r = hid; r < 4 * dim; r++)
                    for (int64_t c = 0; c < dim; c++) QP_CHECK(x[r * dim + c] == 0.0f);
                memcpy(f + o, x, (size_t)(hid * dim) * 4);
                o += (size_t)(hid * dim);
            } else if (gi == 7) { /* down: the first hid of 256 columns */
                for (int64_t r = 0; r < dim; r++) {
                    memcpy(f + o + (size_t)(r * hid), x + r * 4 * dim, (size_t)hid * 4);
                    for (int64_t c = hid; c < 4 * dim; c++) QP_CHECK(x[r * 4 * dim + c] == 0.0f);
                }
                o += (size_t)(dim * hid);
            } else {
                memcpy(f + o, x, (size_t)k * 4);
                o += (size_t)k;
            }
            free(x);
        }
    }
    x = decode(bm, "output_norm.weight", &k);
    memcpy(f + o, x, (size_t)dim * 4);
    free(x);
    QP_CHECK(qp_file_write_atomic(tp, orig, n, &e) == QP_OK);
    free(orig);
    QP_CHECK_MSG(qp_model_open(tp, &oo, &tm, &e) == QP_OK, "%s", e.msg);
    if (!tm) goto out;
    {
        qp_runtime *ra = NULL, *rb = NULL, *rf = NULL;
        /* the exact path for the twins (the BQ4 fast dot quantizes activations, the F32 twin's
           matrices have none); the .bullet's fast path (BQ4 fast dot, F16 cache) beside it */
        qp_runtime_opts ro = {.n_threads = 1, .n_ctx = 64, .exact = true};
        qp_runtime_opts rof = {.n_threads = 1, .n_ctx = 64, .exact = false};
        QP_CHECK_MSG(qp_runtime_new(bm, &ro, &ra, &e) == QP_OK, "%s", e.msg);
        QP_CHECK_MSG(qp_runtime_new(tm, &ro, &rb, &e) == QP_OK, "%s", e.msg);
        QP_CHECK_MSG(qp_runtime_new(bm, &rof, &rf, &e) == QP_OK, "%s", e.msg);
        QP_CHECK(rf && qp_runtime_get_config(rf)->n_fast_mats > 0);
        qp_bullet_task_head h;
        QP_CHECK_MSG(qp_bullet_task_head_get(bm, "sentiment", &h, &e) == QP_OK, "%s", e.msg);
        const int32_t ids[12] = {1, 403, 407, 261, 378, 271, 1000 % 512, 42, 300, 301, 302, 2};
        double worst = 0, worst_head = 0, cos_fast = 1;
        int agree = 0, agree_fast = 0;
        for (int i = 0; ra && rb && rf && h.t && i < 12; i++) {
            float *la, *lb, *lf, sc[2];
            QP_CHECK(qp_runtime_forward(rf, ids[i], i, &lf, &e) == QP_OK);
            QP_CHECK(qp_runtime_forward(ra, ids[i], i, &la, &e) == QP_OK);
            QP_CHECK(qp_runtime_forward(rb, ids[i], i, &lb, &e) == QP_OK);
            for (int v = 0; v < 512; v++) worst = fmax(worst, fabs((double)la[v] - (double)lb[v]));
            agree += qp_logits_argmax(la, 512) == qp_logits_argmax(lb, 512);
            agree_fast += qp_logits_argmax(lf, 512) == qp_logits_argmax(la, 512);
            double dot = 0, na = 0, nf = 0;
            for (int v = 0; v < 512; v++) dot += (double)la[v] * lf[v], na += (double)la[v] * la[v], nf += (double)lf[v] * lf[v];
            cos_fast = fmin(cos_fast, dot / sqrt(na * nf));
            qp_bullet_task_scores(&h, qp_runtime_hidden(ra), sc);
            /* the head's rows are BQ4 re-encodings of the same F32 rows the gen head encodes */
            const qp_tensor *gh = qp_model_find(bm, "output.weight");
            QP_CHECK(memcmp(h.t->data, gh->data + 403 * 40, 40) == 0 &&
                     memcmp(h.t->data + 40, gh->data + 407 * 40, 40) == 0);
            for (int r = 0; r < 2; r++) worst_head = fmax(worst_head, fabs((double)sc[r] - (double)la[pick[r]]));
        }
        printf("stories260K .bullet vs its llama2.c twin: max |logit diff| %.3g, argmax agree %d/12; "
               "sentiment head vs gen logits: max diff %.3g; .bullet fast vs exact path: argmax agree %d/12, "
               "min cosine %.6f\n", worst, agree, worst_head, agree_fast, cos_fast);
        QP_CHECK(worst < 1e-4);
        QP_CHECK_EQ_INT(agree, 12);
        QP_CHECK_EQ_INT(agree_fast, 12);
        QP_CHECK(cos_fast >= 0.999);
        QP_CHECK(worst_head < 1e-4);
        QP_CHECK(strcmp(h.labels[0], "tok403") == 0 && strcmp(h.labels[1], "tok407") == 0);
        qp_bullet_task_head_free(&h);
        qp_runtime_free(ra);
        qp_runtime_free(rb);
        qp_runtime_free(rf);
    }
out:
    qp_model_close(sm);
    qp_model_close(bm);
    qp_model_close(tm);
    unlink(bp);
    unlink(bp2);
    unlink(tp);
    unlink(hw);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "%s", qp_test_env("QP_TMP_DIR", "/tmp"));
    if (!qp_test_mkdir_p(g_tmp)) return 1;
    synthetic();
    stories();
    return qp_test_finish();
}
