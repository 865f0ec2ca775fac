/* Our GGUF -> GGUF conversion against llama.cpp's llama_model_quantize (libllama from npm
 * @node-llama-cpp/linux-x64 3.22.1, run live): random Llama models of several shapes are written
 * here with our GGUF writer (tied and untied embeddings, n_ff not a multiple of 256, n_embd not a
 * multiple of 256, 8 and 32 layers, F32 and F16 sources), converted by both to Q4_K_M (and
 * Q6_K / Q8_0 / F16 / BF16 for one model), and the files must be byte-identical. Where llama.cpp
 * refuses a conversion, we must refuse it too. */
#include <stdbool.h>
#include <stdint.h>

#include "converters/convert_gguf.h"
#include "peer/llama_peer.h"
#include "peer/random_llama_gguf.h"
#include "qp_test.h"
#include "qp_test_util.h"
#include "imatrix_gen.h"
#include "readers/imatrix.h"

/* Random Llama shapes (random_llama_gguf.h): F32 or F16, a few outliers in every tensor. */
typedef random_llama shape;

/* HF fixtures (qp-gen-fixtures): our one-step HF -> Q4_K_M must equal llama.cpp's
 * llama_model_quantize of our HF -> F32 GGUF (the usual convert_hf_to_gguf + llama-quantize path),
 * and llama.cpp must load the result (llama_model_load_from_file). */
static void check_hf(const char *tmp) {
    const char *fx = qp_test_env("QP_FIXTURES_DIR", "fixtures");
    /* mixtral: 8 experts merged into ffn_*_exps, so llama-quantize's MoE rules (n_expert == 8:
       attn_v/attn_k Q8_0, attn_output Q5_K; ffn_down by layer name) pick every type */
    static const char *const k_hf[] = {"llama-tied", "llama-gqa-untied", "llama-sharded", "qwen2",
                                       "mixtral"};
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
        llama_model_quantize_params p = L.quantize_default_params();
        p.nthread = 2;
        p.ftype = 15;
        QP_CHECK_MSG(L.model_quantize(f32, theirs, &p) == 0, "%s: llama_model_quantize failed", k_hf[i]);
        size_t at = 0;
        bool same = qp_test_files_equal(ours, theirs, &at);
        QP_CHECK_MSG(same, "%s: HF -> Q4_K_M differs from llama_model_quantize(HF -> F32) at byte %zu",
                     k_hf[i], at);
        if (same) printf("%-22s HF -> Q4_K_M byte-identical to llama_model_quantize of HF -> F32\n", k_hf[i]);
        void *model = llama_peer_model_load(ours, NULL);
        QP_CHECK_MSG(model != NULL, "%s: llama_model_load_from_file refused our Q4_K_M", k_hf[i]);
        if (model) {
            printf("%-22s llama_model_load_from_file accepts our Q4_K_M\n", k_hf[i]);
            L.model_free(model);
        }
        if (same) {
            remove(f32);
            remove(ours);
            remove(theirs);
        }
    }
    /* BitNet: upstream llama.cpp's "bitnet" is the 1bitLLM (SiLU) kind with TQ1_0 / TQ2_0 / F16
     * (not microsoft's I2_S): our bitnet-silu fixture must load in each */
    char src[4300];
    snprintf(src, sizeof src, "%s/bitnet-silu", fx);
    qp_model *m = NULL;
    qp_err e = {0};
    if (!qp_path_is_dir(src) || qp_model_open(src, NULL, &m, &e) != QP_OK)
        return;
    static const qp_quant k_tq[] = {QP_QUANT_TQ2_0, QP_QUANT_TQ1_0, QP_QUANT_F16};
    for (size_t i = 0; i < sizeof k_tq / sizeof k_tq[0]; i++) {
        char out[4300];
        snprintf(out, sizeof out, "%s/peer-bitnet-%s.gguf", tmp, qp_quant_name(k_tq[i]));
        qp_convert_opts o = {0};
        o.quant = k_tq[i];
        o.threads = 2;
        QP_CHECK_MSG(qp_convert_gguf(m, &o, out, &e) == QP_OK, "bitnet %s: %s", qp_quant_name(k_tq[i]), e.msg);
        void *model = llama_peer_model_load(out, NULL);
        QP_CHECK_MSG(model != NULL, "llama_model_load_from_file refused our BitNet %s", qp_quant_name(k_tq[i]));
        if (model) {
            printf("%-22s llama_model_load_from_file accepts our BitNet %s\n", "bitnet-silu",
                   qp_quant_name(k_tq[i]));
            L.model_free(model);
        }
        remove(out);
    }
    /* and the check has teeth: the SiLU kind as I2_S is bitnet.cpp's "bitnet" file (its
     * build_bitnet with I2_S kernels, readers/gguf.md "BitNet architectures"), which upstream
     * llama.cpp refuses (no type 36); the ReLU^2 kind (bitnet-float) goes to bitnet.cpp's
     * "bitnet-b1.58", which upstream llama.cpp does not load either */
    char out[4300];
    snprintf(out, sizeof out, "%s/peer-bitnet-I2_S.gguf", tmp);
    qp_convert_opts o = {0};
    o.quant = QP_QUANT_I2_S;
    QP_CHECK_MSG(qp_convert_gguf(m, &o, out, &e) == QP_OK, "bitnet-silu I2_S: %s", e.msg);
    void *i2s = llama_peer_model_load(out, NULL);
    QP_CHECK_MSG(i2s == NULL, "llama.cpp loaded a 'bitnet' file with I2_S tensors");
    if (i2s) L.model_free(i2s);
    else printf("%-22s llama_model_load_from_file refuses our bitnet.cpp I2_S file (no type 36)\n",
                "bitnet-silu");
    remove(out);
    qp_model_close(m);
    snprintf(src, sizeof src, "%s/bitnet-float", fx);
    if (qp_model_open(src, NULL, &m, &e) != QP_OK) {
        QP_CHECK_MSG(false, "%s: %s", src, e.msg);
        return;
    }
    o.quant = QP_QUANT_TQ2_0;
    QP_CHECK_MSG(qp_convert_gguf(m, &o, out, &e) == QP_OK, "bitnet-float TQ2_0: %s", e.msg);
    void *model = llama_peer_model_load(out, NULL);
    QP_CHECK_MSG(model == NULL, "upstream llama.cpp unexpectedly loads a bitnet-b1.58 file");
    if (model) L.model_free(model);
    remove(out);
    qp_model_close(m);
}


/* llama.h's importance-matrix row and tensor-type override (llama_model_quantize_params.imatrix /
 * .tt_overrides: arrays ended by a NULL name / pattern). */
typedef struct { const char *name; const float *data; size_t size; } peer_imatrix_row;
typedef struct { const char *pattern; int32_t type; } peer_tt_override;

/* One conversion by both with the same options; true when the files are byte-identical (or both
 * refuse). what: label for messages. */
static bool same_as_llama(qp_model *m, const char *src, const char *tmp, const char *what, qp_quant q,
                          int ftype, const qp_tensor_options *to, llama_model_quantize_params *p) {
    char ours[4300], theirs[4300];
    snprintf(ours, sizeof ours, "%s/peer-opt-ours.gguf", tmp);
    snprintf(theirs, sizeof theirs, "%s/peer-opt-llama.gguf", tmp);
    p->nthread = 1;
    p->ftype = ftype;
    uint32_t rc = L.model_quantize(src, theirs, p);
    qp_convert_opts o = {0};
    o.quant = q;
    o.threads = 2;
    o.tensor = *to;
    qp_err ce = {0};
    qp_status st = qp_convert_gguf(m, &o, ours, &ce);
    if (rc != 0) {
        QP_CHECK_MSG(st != QP_OK, "%s %s: llama.cpp refused, we converted", what, qp_quant_name(q));
        printf("%-34s %-7s both refuse (ours: %.90s)\n", what, qp_quant_name(q), ce.msg);
        remove(ours);
        return st != QP_OK;
    }
    QP_CHECK_MSG(st == QP_OK, "%s %s: %s", what, qp_quant_name(q), ce.msg);
    size_t at = 0;
    bool same = st == QP_OK && qp_test_files_equal(ours, theirs, &at);
    QP_CHECK_MSG(same, "%s %s: differs from llama_model_quantize at byte %zu", what, qp_quant_name(q), at);
    if (same) printf("%-34s %-7s byte-identical to llama_model_quantize\n", what, qp_quant_name(q));
    remove(ours);
    remove(theirs);
    return same;
}

/* --imatrix (both file formats, written here from known values) and llama-quantize's per-tensor
 * options against llama_model_quantize given the same importance weights / params. */
static void check_imatrix_and_options(const char *tmp) {
    static const random_llama shp = {"imatrix-gqa4", 256, 320, 8, 8, 2, 260, false, false, true, 0};
    char src[4300], dat[4300], gg[4300];
    snprintf(src, sizeof src, "%s/peer-imatrix-src.gguf", tmp);
    snprintf(dat, sizeof dat, "%s/peer-imatrix.dat", tmp);
    snprintf(gg, sizeof gg, "%s/peer-imatrix.gguf", tmp);
    qp_err e = {0};
    QP_CHECK_MSG(random_llama_write(&shp, src, &e), "imatrix source: %s", e.msg);
    qp_model *m = NULL;
    QP_CHECK_MSG(qp_model_open(src, NULL, &m, &e) == QP_OK, "%s: %s", src, e.msg);
    if (!m) return;
    /* known sums and counts for every 2-D weight but one (left out: quantized without); the token
     * embedding gets a wrong-sized row, which llama.cpp ignores for it */
    enum { MAXT = 128 };
    imatrix_gen_entry gen[MAXT];
    peer_imatrix_row rows[MAXT + 1];
    float *sums[MAXT] = {0}, *vals[MAXT] = {0};
    int n = 0;
    uint64_t rng = 12345;
    for (int64_t i = 0; i < m->n_tensors && n < MAXT; i++) {
        const qp_tensor *t = &m->tensors[i];
        if (t->n_dims < 2 || strcmp(t->name, "blk.3.attn_q.weight") == 0) continue;
        int nval = (int)t->ne[0] - (strcmp(t->name, "token_embd.weight") == 0 ? 32 : 0);
        int ncall = 3 + n % 5;
        sums[n] = malloc((size_t)nval * 4);
        vals[n] = malloc((size_t)nval * 4);
        for (int k = 0; k < nval; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)(rng >> 40) / (float)(1u << 24);
            sums[n][k] = (k % 13 == 0) ? 0.0f : (float)ncall * 0.05f * (1.0f + 30.0f * u * u * u);
            vals[n][k] = sums[n][k] / (float)ncall; /* what llama-quantize hands over */
        }
        gen[n] = (imatrix_gen_entry){t->name, sums[n], nval, ncall};
        rows[n] = (peer_imatrix_row){t->name, vals[n], (size_t)nval};
        n++;
    }
    rows[n] = (peer_imatrix_row){NULL, NULL, 0};
    qp_test_buf b = {0};
    imatrix_gen_legacy(&b, gen, n, 10, "gen.txt");
    qp_test_must_write_file(dat, b.p, b.n);
    qp_test_buf_free(&b);
    QP_CHECK_MSG(imatrix_gen_gguf(gg, gen, n, 10, 7, &e), "imatrix GGUF: %s", e.msg);
    qp_imatrix *im_dat = NULL, *im_gg = NULL;
    QP_CHECK_MSG(qp_imatrix_open(dat, &im_dat, &e) == QP_OK, "%s: %s", dat, e.msg);
    QP_CHECK_MSG(qp_imatrix_open(gg, &im_gg, &e) == QP_OK, "%s: %s", gg, e.msg);
    static const struct { qp_quant q; int ftype; } k_iq[] = {
        {QP_QUANT_Q4_K_M, 15}, {QP_QUANT_Q2_K_S, 21}, {QP_QUANT_Q2_K, 10}, {QP_QUANT_Q3_K_M, 12},
        {QP_QUANT_Q4_0, 2}, {QP_QUANT_Q5_0, 8}, {QP_QUANT_Q4_1, 3}, {QP_QUANT_Q5_1, 9},
        {QP_QUANT_Q5_K_S, 16}, {QP_QUANT_Q6_K, 18}, {QP_QUANT_IQ4_NL, 25}, {QP_QUANT_IQ4_XS, 30},
    };
    for (size_t qi = 0; im_dat && im_gg && qi < sizeof k_iq / sizeof k_iq[0]; qi++) {
        for (int fmt = 0; fmt < 2; fmt++) {
            if (fmt == 1 && qi > 2) break; /* the GGUF form: three types are enough */
            const qp_imatrix *im = fmt ? im_gg : im_dat;
            qp_tensor_options to = {0};
            to.imatrix = im->entries;
            to.n_imatrix = im->n;
            llama_model_quantize_params p = L.quantize_default_params();
            p.imatrix = rows;
            same_as_llama(m, src, tmp, fmt ? "imatrix (GGUF format)" : "imatrix (legacy .dat)", k_iq[qi].q,
                          k_iq[qi].ftype, &to, &p);
        }
    }
    qp_imatrix_free(im_dat);
    qp_imatrix_free(im_gg);
    for (int i = 0; i < n; i++) {
        free(sums[i]);
        free(vals[i]);
    }

    /* per-tensor options (no imatrix) */
    const int t_q8 = qp_encoding_get(QP_ENC_Q8_0)->ggml_type, t_q5k = qp_encoding_get(QP_ENC_Q5_K)->ggml_type,
              t_f16 = qp_encoding_get(QP_ENC_F16)->ggml_type, t_iq4 = qp_encoding_get(QP_ENC_IQ4_XS)->ggml_type,
              t_q2k = qp_encoding_get(QP_ENC_Q2_K)->ggml_type;
    {
        qp_tensor_options to = {.has_output_type = true, .output_type = QP_ENC_Q8_0,
                                .has_token_embd_type = true, .token_embd_type = QP_ENC_Q5_K};
        llama_model_quantize_params p = L.quantize_default_params();
        p.output_tensor_type = t_q8;
        p.token_embedding_type = t_q5k;
        same_as_llama(m, src, tmp, "--output/--token-embedding-type", QP_QUANT_Q4_K_M, 15, &to, &p);
        to.output_type = QP_ENC_F16;
        p.output_tensor_type = t_f16;
        same_as_llama(m, src, tmp, "--output/--token-embedding-type", QP_QUANT_F16, 1, &to, &p);
    }
    {
        qp_tensor_options to = {.leave_output = true};
        llama_model_quantize_params p = L.quantize_default_params();
        p.quantize_output_tensor = false;
        same_as_llama(m, src, tmp, "--leave-output-tensor", QP_QUANT_Q3_K_M, 12, &to, &p);
    }
    {
        qp_tensor_options to = {.pure = true};
        llama_model_quantize_params p = L.quantize_default_params();
        p.pure = true;
        same_as_llama(m, src, tmp, "--pure", QP_QUANT_Q4_K_M, 15, &to, &p);
        same_as_llama(m, src, tmp, "--pure", QP_QUANT_Q2_K, 10, &to, &p);
    }
    {
        /* first match wins; a pattern that would apply to attn_v too; a 320-wide ffn_down forced
           to IQ4_XS falls back to IQ4_NL */
        static const qp_tensor_type_override ov[] = {
            {"blk\\.[0-2]\\.attn_v", QP_ENC_Q8_0}, {"attn_(v|k)", QP_ENC_Q5_K}, {"ffn_down", QP_ENC_IQ4_XS},
            {"output", QP_ENC_Q2_K}};
        peer_tt_override tt[] = {{"blk\\.[0-2]\\.attn_v", t_q8}, {"attn_(v|k)", t_q5k}, {"ffn_down", t_iq4},
                                 {"output", t_q2k}, {NULL, 0}};
        qp_tensor_options to = {.overrides = ov, .n_overrides = 4};
        llama_model_quantize_params p = L.quantize_default_params();
        p.tensor_types = tt;
        same_as_llama(m, src, tmp, "--tensor-type PATTERN=TYPE", QP_QUANT_Q4_K_M, 15, &to, &p);
    }
    qp_model_close(m);
    if (qp_test_failed == 0) {
        remove(src);
        remove(dat);
        remove(gg);
    }
}

int main(void) {
    if (!qp_path_exists(llama_peer_lib())) QP_SKIP("cannot load %s: not installed", llama_peer_lib());
    if (!llama_peer_load()) QP_SKIP("cannot load libllama from %s", llama_peer_bins());
    llama_peer_start();

    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    if (!qp_test_mkdir_p(tmp)) QP_SKIP("cannot create %s", tmp);

    static const shape k_shapes[] = {
        {"tied-8L-ff512", 256, 512, 8, 4, 2, 320, true, false, true, 0},
        {"untied-8L-ff688", 256, 688, 8, 8, 8, 300, false, false, true, 0},
        {"untied-32L-embd128", 128, 352, 32, 4, 1, 260, false, false, true, 0},
        {"tied-32L-f16", 256, 768, 32, 4, 4, 256, true, true, true, 0},
        {"untied-8L-f16-ff200", 512, 200, 8, 8, 2, 512, false, true, true, 0},
    };
    /* every llama-quantize file type we write, with its llama_ftype */
    static const struct { qp_quant q; int ftype; } k_q[] = {
        {QP_QUANT_Q4_K_M, 15}, {QP_QUANT_Q6_K, 18}, {QP_QUANT_Q8_0, 7}, {QP_QUANT_F16, 1},
        {QP_QUANT_BF16, 32}, {QP_QUANT_F32, 0}, {QP_QUANT_Q2_K, 10}, {QP_QUANT_Q2_K_S, 21},
        {QP_QUANT_Q3_K_M, 12}, {QP_QUANT_Q4_K_S, 14}, {QP_QUANT_IQ4_XS, 30}, {QP_QUANT_Q5_0, 8},
        {QP_QUANT_Q4_0, 2}, {QP_QUANT_Q4_1, 3}, {QP_QUANT_Q5_1, 9}, {QP_QUANT_Q3_K_S, 11},
        {QP_QUANT_Q3_K_L, 13}, {QP_QUANT_Q5_K_S, 16}, {QP_QUANT_Q5_K_M, 17}, {QP_QUANT_IQ4_NL, 25},
        {QP_QUANT_TQ1_0, 36}, {QP_QUANT_TQ2_0, 37},
    };
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        const shape *s = &k_shapes[si];
        char src[4300], ours[4300], theirs[4300];
        snprintf(src, sizeof src, "%s/peer-src-%s.gguf", tmp, s->label);
        qp_err e = {0};
        bool made = random_llama_write(s, src, &e);
        QP_CHECK_MSG(made, "%s: %s", s->label, e.msg);
        if (!made) continue;
        qp_model *m = NULL;
        QP_CHECK_MSG(qp_model_open(src, NULL, &m, &e) == QP_OK, "%s: %s", src, e.msg);
        if (!m) continue;
        /* every type on the GQA (n_gqa 4) F16 model with short rows (fallbacks); the first six and
         * the n_gqa-dependent ones on the n_gqa 1 model too; Q4_K_M on all (seconds, not minutes) */
        size_t nq = si == 4 ? sizeof k_q / sizeof k_q[0] : si == 1 ? 12 : 1;
        for (size_t qi = 0; qi < nq; qi++) {
            for (int threads = 1; threads <= 2; threads++) {
                if (threads == 2 && qi > 0) break;
                snprintf(ours, sizeof ours, "%s/peer-ours-%s-%s.gguf", tmp, s->label, qp_quant_name(k_q[qi].q));
                snprintf(theirs, sizeof theirs, "%s/peer-llama-%s-%s.gguf", tmp, s->label, qp_quant_name(k_q[qi].q));
                llama_model_quantize_params p = L.quantize_default_params();
                p.nthread = threads;
                p.ftype = k_q[qi].ftype;
                uint32_t rc = L.model_quantize(src, theirs, &p);
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
                bool same = st == QP_OK && qp_test_files_equal(ours, theirs, &at);
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
    check_imatrix_and_options(tmp);
    check_hf(tmp);
    return qp_test_finish();
}
