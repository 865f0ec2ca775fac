/* llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf + .inp/.out, made with the HF
 * tokenizers): every .inp string encoded without BOS and without special-token parsing must give
 * exactly the ids of its .out line. Also: decoding the ids of a lossless tokenizer (SentencePiece
 * with byte fallback, byte-level BPE) gives back the input bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "qp_test.h"
#include "quantpack/quantpack.h"
#include "quantpack/tokenizer.h"

static const char k_sep[] = "\n__ggml_vocab_test__\n";

static bool decode_all(const qp_tokenizer *t, const qp_vocab *v, const int32_t *ids, int64_t n,
                       char **out, size_t *out_len) {
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    if (!buf) return false;
    /* SentencePiece's dummy prefix space is dropped the way it is after a BOS. */
    int32_t prev = v->model == QP_TOK_SPM ? v->bos_id : -1;
    for (int64_t i = 0; i < n; i++) {
        char piece[256];
        size_t k = 0;
        if (qp_tokenizer_decode_piece(t, prev, ids[i], piece, sizeof piece, &k, NULL) != QP_OK ||
            k > sizeof piece) {
            free(buf);
            return false;
        }
        if (len + (size_t)k + 1 > cap) {
            while (len + (size_t)k + 1 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return false;
            }
            buf = nb;
        }
        memcpy(buf + len, piece, (size_t)k);
        len += (size_t)k;
        prev = ids[i];
    }
    *out = buf;
    *out_len = len;
    return true;
}

/* name: the ggml-vocab-NAME vectors; source: NULL for that GGUF, else a SentencePiece
 * tokenizer.model or a llama2.c tokenizer .bin holding the same vocabulary */
static void run_vocab(const char *dir, const char *name, const char *source, bool lossless) {
    char gguf[1024], inp_path[1100], out_path[1100], src[1100], label[1200];
    snprintf(gguf, sizeof gguf, "%s/vocab/ggml-vocab-%s.gguf", dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", gguf);
    snprintf(out_path, sizeof out_path, "%s.out", gguf);
    qp_err e = {0};
    qp_model *m = NULL;
    qp_status s;
    if (!source) {
        snprintf(label, sizeof label, "%s", name);
        s = qp_model_open(gguf, NULL, &m, &e);
        QP_CHECK_MSG(s == QP_OK, "%s: %s", gguf, e.msg);
    } else {
        snprintf(src, sizeof src, "%s/%s", dir, source);
        snprintf(label, sizeof label, "%s (%s)", name, source);
        if (!qp_path_exists(src)) {
            printf("%s: not found, not run\n", src);
            return;
        }
        s = qp_model_new(QP_FORMAT_UNKNOWN, src, &m, &e);
        size_t sl = strlen(src);
        if (s == QP_OK)
            s = sl > 6 && strcmp(src + sl - 6, ".model") == 0 ? qp_vocab_read_spm_model(m, src, &e)
                                                              : qp_vocab_read_llama2c_bin(m, src, &e);
        QP_CHECK_MSG(s == QP_OK, "%s: %s", src, e.msg);
    }
    if (s != QP_OK) {
        qp_model_close(m);
        return;
    }
    name = label;
    qp_tokenizer *t = NULL;
    s = qp_tokenizer_new(&m->vocab, &t, &e);
    QP_CHECK_MSG(s == QP_OK, "%s: %s", name, e.msg);
    char *inp = NULL, *out = NULL;
    size_t inp_len = 0, out_len = 0;
    if (s == QP_OK) s = qp_file_read_all(inp_path, 1 << 20, &inp, &inp_len, &e);
    if (s == QP_OK) s = qp_file_read_all(out_path, 1 << 20, &out, &out_len, &e);
    QP_CHECK_MSG(s == QP_OK, "%s", e.msg);
    int pass = 0, fail = 0, rt_fail = 0;
    char *p = inp, *o = out;
    while (s == QP_OK) {
        char *end = strstr(p, k_sep);
        if (!end) break;
        char *nl = strchr(o, '\n');
        if (!nl) {
            QP_CHECK_MSG(false, "%s: .out has fewer lines than .inp has strings", name);
            fail++;
            break;
        }
        *nl = '\0';
        size_t len = (size_t)(end - p);
        int32_t *ids = NULL;
        int64_t n = 0;
        qp_status es = qp_tokenizer_encode(t, p, len, false, false, &ids, &n, &e);
        bool same = es == QP_OK;
        const char *q = o;
        for (int64_t i = 0; same && i < n; i++) {
            char *next;
            long want = strtol(q, &next, 10);
            if (next == q || want != ids[i]) same = false;
            q = next;
        }
        while (same && *q == ' ') q++;
        if (*q) same = false; /* expected ids left over */
        if (same) {
            pass++;
        } else {
            fail++;
            fprintf(stderr, "%s: string %d (%.*s): want [%s] got [", name, pass + fail - 1,
                    (int)(len > 60 ? 60 : len), p, o);
            for (int64_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? " " : "", ids[i]);
            fprintf(stderr, "]%s%s\n", es == QP_OK ? "" : " error: ", es == QP_OK ? "" : e.msg);
        }
        QP_CHECK(same);
        if (lossless && es == QP_OK) {
            char *dec = NULL;
            size_t dec_len = 0;
            bool ok = decode_all(t, &m->vocab, ids, n, &dec, &dec_len) && dec_len == len &&
                      memcmp(dec, p, len) == 0;
            if (!ok) rt_fail++;
            QP_CHECK_MSG(ok, "%s: decode(encode(string %d)) differs from the string", name,
                         pass + fail - 1);
            free(dec);
        }
        qp_free(ids);
        p = end + sizeof k_sep - 1;
        o = nl + 1;
    }
    printf("%s: %d passed, %d failed (%d strings)%s\n", name, pass, fail, pass + fail,
           lossless ? (rt_fail ? ", decode round trip FAILED" : ", decode round trip ok") : "");
    QP_CHECK_MSG(pass + fail == 46, "%s: %d strings, llama.cpp's files have 46", name, pass + fail);
    qp_free(inp);
    qp_free(out);
    qp_tokenizer_free(t);
    qp_model_close(m);
}

int main(void) {
    const char *dir = qp_test_real_dir();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/vocab/ggml-vocab-llama-spm.gguf", dir);
    if (!qp_path_exists(probe)) QP_SKIP("real fixtures not found at %s", dir);
    run_vocab(dir, "llama-spm", NULL, true);
    run_vocab(dir, "phi-3", NULL, true);
    run_vocab(dir, "gpt-2", NULL, true);
    run_vocab(dir, "deepseek-coder", NULL, true);
    run_vocab(dir, "deepseek-llm", NULL, true);
    run_vocab(dir, "mpt", NULL, true);
    run_vocab(dir, "bert-bge", NULL, false);
    /* the Llama 2 vocabulary through the other two readers gives llama-spm's ids too */
    run_vocab(dir, "llama-spm", "tokenizer.model", true);
    run_vocab(dir, "llama-spm", "tokenizer.bin", true);
    return qp_test_finish();
}
