/* libFuzzer target for the RDRR directory reader (readers/rdrr.c). Two modes, chosen by the
 * first byte of the input:
 *  - '{' (manifest mode): the bytes become manifest.json of a directory that holds a fixed, valid
 *    shard set written once per process by the RDRR writer (3 shards of 4 KiB, a tensor spanning
 *    two of them, F32/F16/Q8_0/Q4_K tensors, a Q4_K tensor with zero-padded rows, tensors.json,
 *    group hashes and Merkle roots). The seeds are that writer's manifest.json and edits of it.
 *  - anything else (shard mode): the bytes become shard_00000.bin of a one-shard directory whose
 *    manifest is made per input with the input's size and SHA-256 (so the hash check passes and
 *    the tensor checks behind it run): F32 [4] at 0, Q8_0 [32] at 64, Q4_K [256] at 128, F16
 *    [2,3] at 320, Q4_K rows of 100 padded to 256 (layout "row") at 512 (800 bytes in all).
 * Either way qp_model_open + qp_model_close run and every tensor's first and last byte is read.
 * QP_FUZZ_KEEP_DIR=DIR uses DIR instead of a temp folder and keeps it (to make seeds). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/hash.h"
#include "fuzz_util.h"
#include "quantpack/quantpack.h"
#include "writers/rdrr_writer.h"

static char g_dir[256], g_mdir[320], g_sdir[320];
static bool g_keep;
static volatile uint8_t g_sink;

static void cleanup(void) {
    if (g_keep) return;
    qp_fuzz_rm_dir(g_mdir);
    qp_fuzz_rm_dir(g_sdir);
    rmdir(g_dir);
}

/* Bytes in [0, 0x3f]: every F32/F16 value and every block scale they form is finite. */
static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 7u + seed * 13u + (i >> 5)) & 0x3f);
}

static int add_tensor(qp_rdrr_writer *w, const char *name, const char *dtype, int nd,
                      const int64_t *shape, size_t size, const char *layout, unsigned seed) {
    uint8_t buf[8192];
    if (size > sizeof buf) return -1;
    fill(buf, size, seed);
    qp_rdrr_tensor_info t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = dtype;
    t.n_dims = nd;
    t.shape = shape;
    t.size = size;
    t.layout = layout;
    qp_err e = {0};
    if (qp_rdrr_writer_begin_tensor(w, &t, &e) != QP_OK) return -1;
    return qp_rdrr_writer_write(w, buf, size, &e) == QP_OK ? 0 : -1;
}

/* The fixed shard set of manifest mode, through the real writer. */
static void make_manifest_dir(void) {
    qp_rdrr_writer_opts o;
    memset(&o, 0, sizeof o);
    o.shard_size = 4096;
    o.replace = true;
    qp_rdrr_writer *w = NULL;
    qp_err e = {0};
    if (qp_rdrr_writer_open(g_mdir, &o, &w, &e) != QP_OK) abort();
    static const int64_t s_emb[] = {8, 4}, s_q[] = {2, 256}, s_k[] = {4, 32}, s_n[] = {4},
                         s_up[] = {1100}, s_down[] = {2, 100};
    if (add_tensor(w, "token_embd.weight", "F32", 2, s_emb, 128, NULL, 1) ||
        add_tensor(w, "blk.0.attn_q.weight", "Q4_K_M", 2, s_q, 288, NULL, 2) ||
        add_tensor(w, "blk.0.attn_k.weight", "Q8_0", 2, s_k, 136, NULL, 3) ||
        add_tensor(w, "output_norm.weight", "F16", 1, s_n, 8, NULL, 4) ||
        add_tensor(w, "blk.0.ffn_up.weight", "F32", 1, s_up, 4400, NULL, 5) ||
        add_tensor(w, "blk.0.ffn_down.weight", "Q4_K_M", 2, s_down, 288, "row", 6))
        abort();
    cJSON *f = cJSON_CreateObject();
    cJSON *ar = cJSON_AddObjectToObject(f, "architecture");
    cJSON_AddNumberToObject(f, "version", 1);
    cJSON_AddStringToObject(f, "modelId", "fuzz");
    cJSON_AddNumberToObject(ar, "numLayers", 1);
    cJSON_AddNumberToObject(ar, "hiddenSize", 4);
    cJSON_AddNumberToObject(ar, "vocabSize", 8);
    if (qp_rdrr_writer_finish(w, f, &e) != QP_OK) abort();
}

static void setup(void) {
    if (g_dir[0]) return;
    g_keep = qp_fuzz_work_dir(g_dir, sizeof g_dir, "rdrr");
    snprintf(g_mdir, sizeof g_mdir, "%s/m", g_dir);
    snprintf(g_sdir, sizeof g_sdir, "%s/s", g_dir);
    mkdir(g_sdir, 0700);
    atexit(cleanup);
    make_manifest_dir();
}

static void touch(const qp_model *m) {
    g_sink ^= qp_fuzz_touch_tensors(m);
    for (int64_t i = 0; i < m->n_meta; i++) g_sink ^= (uint8_t)m->meta[i].key[0];
    for (int64_t i = 0; i < m->n_problems; i++) g_sink ^= (uint8_t)m->problems[i][0];
}

static const char k_shard_manifest[] =
    "{\"version\":1,\"modelId\":\"fuzz\",\"hashAlgorithm\":\"sha256\","
    "\"architecture\":{\"numLayers\":1,\"hiddenSize\":4},"
    "\"shards\":[{\"index\":0,\"filename\":\"shard_00000.bin\",\"size\":%zu,\"hash\":\"%s\","
    "\"offset\":0}],\"totalSize\":%zu,\"tensors\":{"
    "\"output_norm.weight\":{\"shard\":0,\"offset\":0,\"size\":16,\"shape\":[4],\"dtype\":\"F32\"},"
    "\"blk.0.attn_k.weight\":{\"shard\":0,\"offset\":64,\"size\":34,\"shape\":[1,32],\"dtype\":\"Q8_0\"},"
    "\"blk.0.attn_q.weight\":{\"shard\":0,\"offset\":128,\"size\":144,\"shape\":[1,256],"
    "\"dtype\":\"Q4_K_M\"},"
    "\"token_embd.weight\":{\"shard\":0,\"offset\":320,\"size\":12,\"shape\":[2,3],\"dtype\":\"F16\"},"
    "\"blk.0.ffn_down.weight\":{\"shard\":0,\"offset\":512,\"size\":288,\"shape\":[2,100],"
    "\"dtype\":\"Q4_K_M\",\"layout\":\"row\"}}}";

qp_status qp_fuzz_one(const uint8_t *data, size_t size, qp_err *e) {
    setup();
    const char *dir;
    char p[400];
    if (size > 0 && data[0] == '{') {
        snprintf(p, sizeof p, "%s/manifest.json", g_mdir);
        if (qp_fuzz_write_file(p, data, size) != 0) return QP_ERR_IO;
        dir = g_mdir;
    } else {
        if (size == 0) return QP_ERR_FORMAT; /* an empty shard is no input */
        uint8_t d[QP_SHA256_BYTES];
        char hex[QP_SHA256_HEX], man[sizeof k_shard_manifest + 160];
        if (qp_sha256_once(data, size, d, NULL) != QP_OK) return QP_ERR_INTERNAL;
        qp_hex_encode(d, sizeof d, hex);
        int n = snprintf(man, sizeof man, k_shard_manifest, size, hex, size);
        if (n < 0 || (size_t)n >= sizeof man) abort();
        snprintf(p, sizeof p, "%s/shard_00000.bin", g_sdir);
        if (qp_fuzz_write_file(p, data, size) != 0) return QP_ERR_IO;
        snprintf(p, sizeof p, "%s/manifest.json", g_sdir);
        if (qp_fuzz_write_file(p, man, (size_t)n) != 0) return QP_ERR_IO;
        dir = g_sdir;
    }
    qp_model *m = NULL;
    const qp_status s = qp_model_open(dir, NULL, &m, e);
    if (s == QP_OK) {
        touch(m);
        qp_model_close(m);
    }
    return s;
}
