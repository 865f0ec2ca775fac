/* Helper of tests/peer/test_hf_tokenizer_files.mjs.
 *   qp-test-hf-tokenizer write SRC DIR [TOKENIZER]: opens any model qp_model_open reads (a
 *     vocab-only GGUF, a llama2.c checkpoint with TOKENIZER, ...) and writes its Hugging Face
 *     tokenizer files into the existing folder DIR (qp_hf_tokenizer_write). Exit 0 written, 3
 *     UNSUPPORTED (message on stderr), 1 any other failure.
 *     SRC "-" with TOKENIZER: a model holding only that vocabulary (tokenizer.model, .bin).
 *   qp-test-hf-tokenizer encode MODEL [TOKENIZER]: reads a JSON list of strings on stdin and prints
 *     {"plain": [[ids]...], "bos": [[ids]...]}: quantpack's tokenizer with special-token parsing,
 *     without BOS and with BOS as the model adds it. MODEL may be a tokenizer.json. One process
 *     for a whole corpus (opening a 32000-token tokenizer.json takes ~0.2 s). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "converters/hf_tokenizer.h"
#include "core/model_internal.h"
#include "quantpack/model.h"
#include "quantpack/tokenizer.h"

/* path "-": a model holding only TOKENIZER's vocabulary (tokenizer.model, tokenizer.bin). */
static qp_status open_model(const char *path, const char *tokenizer, qp_model **m, qp_err *e) {
    if (strcmp(path, "-") == 0 && tokenizer) {
        qp_status s = qp_model_new(QP_FORMAT_UNKNOWN, tokenizer, m, e);
        if (s == QP_OK && (s = qp_vocab_read_file(*m, tokenizer, e)) != QP_OK) {
            qp_model_close(*m);
            *m = NULL;
        }
        return s;
    }
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".json") == 0) return qp_model_open_tokenizer_json(path, m, e);
    qp_open_opts oo = {.tokenizer_path = tokenizer};
    return qp_model_open(path, &oo, m, e);
}

static cJSON *ids_array(const int32_t *ids, int64_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

/* Encodes every string of the JSON list on stdin twice (no BOS / model's BOS). */
static qp_status encode_all(const qp_model *m, qp_err *e) {
    static char buf[1 << 22];
    size_t len = fread(buf, 1, sizeof buf - 1, stdin);
    buf[len] = '\0';
    cJSON *in = cJSON_Parse(buf), *out = cJSON_CreateObject();
    cJSON *plain = cJSON_AddArrayToObject(out, "plain"), *bos = cJSON_AddArrayToObject(out, "bos");
    qp_tokenizer *t = NULL;
    qp_status s = cJSON_IsArray(in) ? qp_tokenizer_new(&m->vocab, &t, e)
                                    : qp_fail(e, QP_ERR_ARG, "stdin is not a JSON list of strings");
    const cJSON *it;
    cJSON_ArrayForEach(it, in) {
        for (int k = 0; s == QP_OK && k < 2; k++) {
            int32_t *ids = NULL;
            int64_t n = 0;
            const char *text = cJSON_IsString(it) ? it->valuestring : "";
            s = qp_tokenizer_encode(t, text, strlen(text), k == 1 && qp_model_adds_bos(m), true, &ids, &n, e);
            if (s == QP_OK) cJSON_AddItemToArray(k ? bos : plain, ids_array(ids, n));
            qp_free(ids);
        }
    }
    if (s == QP_OK) {
        char *text = cJSON_PrintUnformatted(out);
        if (text) puts(text);
        free(text);
    }
    qp_tokenizer_free(t);
    cJSON_Delete(in);
    cJSON_Delete(out);
    return s;
}

int main(int argc, char **argv) {
    const bool write = argc >= 4 && argc <= 5 && strcmp(argv[1], "write") == 0;
    const bool encode = argc >= 3 && argc <= 4 && strcmp(argv[1], "encode") == 0;
    if (!write && !encode) {
        fprintf(stderr, "usage: qp-test-hf-tokenizer write SRC DIR [TOKENIZER] | encode MODEL [TOKENIZER]\n");
        return 2;
    }
    qp_model *m = NULL;
    qp_err e = {0};
    qp_status s = open_model(argv[2], write ? (argc == 5 ? argv[4] : NULL) : (argc == 4 ? argv[3] : NULL), &m, &e);
    if (s == QP_OK) s = write ? qp_hf_tokenizer_write(m, argv[3], &e) : encode_all(m, &e);
    qp_model_close(m);
    if (s != QP_OK) fprintf(stderr, "%s: %s\n", qp_status_name(s), e.msg);
    return s == QP_OK ? 0 : s == QP_ERR_UNSUPPORTED ? 3 : 1;
}
