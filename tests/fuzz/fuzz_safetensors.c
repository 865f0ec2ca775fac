/* libFuzzer target for the safetensors reader. Input starting with '{' is JSON: it becomes both
 * config.json and tokenizer.json (and tokenizer_config.json) of an HF directory beside a fixed
 * valid model.safetensors, which exercises readers/hf_config.c. Any other input is written as a
 * single .safetensors file. Either way qp_model_open + qp_model_close run and every tensor's
 * first and last byte is touched (out-of-bounds data pointers fault under ASan). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "quantpack/quantpack.h"

static char g_dir[256], g_file[320], g_hfdir[320];
static volatile uint8_t g_sink;

static void cleanup(void) {
    qp_fuzz_rm_dir(g_hfdir);
    qp_fuzz_rm_dir(g_dir);
}

static void setup(void) {
    if (g_dir[0]) return;
    snprintf(g_dir, sizeof g_dir, "%.200s/qp_fuzz_st_%d", qp_fuzz_tmp(), (int)getpid());
    mkdir(g_dir, 0700);
    snprintf(g_file, sizeof g_file, "%s/in.safetensors", g_dir);
    snprintf(g_hfdir, sizeof g_hfdir, "%s/hf", g_dir);
    mkdir(g_hfdir, 0700);
    atexit(cleanup);
    /* a fixed valid model: token_embd [4, 2] F32 and a norm */
    static const char hdr[] = "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4,2],"
                              "\"data_offsets\":[0,32]},\"model.norm.weight\":{\"dtype\":\"F32\","
                              "\"shape\":[2],\"data_offsets\":[32,40]}}";
    uint8_t buf[512] = {0};
    size_t hl = sizeof hdr - 1;
    qp_store_u64le(buf, hl);
    memcpy(buf + 8, hdr, hl);
    char p[400];
    snprintf(p, sizeof p, "%s/model.safetensors", g_hfdir);
    qp_fuzz_write_file(p, buf, 8 + hl + 40);
}

static void touch(const qp_model *m) {
    g_sink ^= qp_fuzz_touch_tensors(m);
    for (int64_t i = 0; i < m->vocab.n_tokens; i++) {
        const char *s = m->vocab.tokens[i];
        if (m->vocab.token_lens[i]) g_sink ^= (uint8_t)(s[0] ^ s[m->vocab.token_lens[i] - 1]);
    }
    for (int64_t i = 0; i < m->vocab.n_merges; i++) g_sink ^= (uint8_t)m->vocab.merges[i][0];
    for (int64_t i = 0; i < m->n_meta; i++) g_sink ^= (uint8_t)m->meta[i].key[0];
}

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    setup();
    const char *path = g_file;
    if (size > 0 && data[0] == '{') {
        static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json"};
        for (int i = 0; i < 3; i++) {
            char p[400];
            snprintf(p, sizeof p, "%s/%s", g_hfdir, names[i]);
            if (qp_fuzz_write_file(p, data, size) != 0) return QP_ERR_IO;
        }
        path = g_hfdir;
    } else if (qp_fuzz_write_file(g_file, data, size) != 0) {
        return QP_ERR_IO;
    }
    qp_model *m = NULL;
    const qp_status s = qp_model_open(path, NULL, &m, e);
    if (s == QP_OK) {
        touch(m);
        qp_model_close(m);
    }
    return s;
}
