/* Corrupt Trillim SDK manifests (v1 and the current SDK's sections form) are rejected with
 * specific errors. Every manifest is built here byte by byte (an independent writer, following
 * the SDK's _manifest.py build_manifest: struct.pack of each field); each case mutates one
 * field of a valid one. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "converters/trillim_manifest.h"
#include "converters/trillim_quantize.h"
#include "qp_test.h"
#include "quantpack/core.h"

typedef struct mb {
    uint8_t b[4096];
    size_t n;
} mb;
static void put(mb *m, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) m->b[m->n++] = (uint8_t)(v >> (8 * i));
}
static void put_str(mb *m, const char *s, size_t n) {
    put(m, n, 2);
    memcpy(m->b + m->n, s, n);
    m->n += n;
}

typedef struct ent {
    uint64_t action, dtype, rows, cols, prow, pcol, shard, off, size, has_scale, sshard, soff, ssize;
} ent;

static void put_ent(mb *m, const ent *e) {
    put(m, e->action, 1); put(m, e->dtype, 1); put(m, e->rows, 4); put(m, e->cols, 4);
    put(m, e->prow, 4); put(m, e->pcol, 4); put(m, e->shard, 2); put(m, e->off, 8); put(m, e->size, 8);
    put(m, e->has_scale, 1); put(m, e->sshard, 2); put(m, e->soff, 8); put(m, e->ssize, 8);
}

static const ent k_good = {0, 2, 4, 8, 4, 8, 0, 100, 64, 0, 0, 0, 0};

/* manifest: 1 shard, one entry e, optional LoRA block (layers, targets, present flags) */
static void build(mb *m, const char *path, size_t plen, const ent *e, int lora_targets, bool garbage) {
    m->n = 0;
    put(m, 1, 2);
    put_str(m, path, plen);
    put(m, 1, 4);
    put_ent(m, e);
    if (lora_targets > 0) {
        put(m, 1, 4);
        put(m, (uint64_t)lora_targets, 4);
        double sc = 2.0;
        uint64_t u;
        memcpy(&u, &sc, 8);
        put(m, u, 8);
        for (int t = 0; t < lora_targets; t++) put(m, 0, 1);
    }
    if (garbage) put(m, 0xAB, 1);
}

/* The current SDK's form (_manifest.py): entries, then u32 n_sections + {u8 type, u32 first,
 * u32 count} each, then the LoRA block when an adapter is given (u32 layers, u32 7, f64 scale,
 * u8 present per slot). n_entries 0 is the adapter-only manifest (skip_model=True). */
typedef struct sdk_tail {
    int n_entries, n_sections;
    uint64_t sec_type, sec_first, sec_count;
    int lora_layers, lora_targets; /* 0 layers: no LoRA block */
} sdk_tail;

static void build_sdk(mb *m, const char *path, size_t plen, const ent *e, const sdk_tail *t) {
    m->n = 0;
    put(m, 1, 2);
    put_str(m, path, plen);
    put(m, (uint64_t)t->n_entries, 4);
    for (int i = 0; i < t->n_entries; i++) put_ent(m, e);
    put(m, (uint64_t)t->n_sections, 4);
    for (int i = 0; i < t->n_sections; i++) {
        put(m, t->sec_type, 1);
        put(m, t->sec_first + (uint64_t)i * t->sec_count, 4);
        put(m, t->sec_count, 4);
    }
    if (t->lora_layers > 0) {
        put(m, (uint64_t)t->lora_layers, 4);
        put(m, (uint64_t)t->lora_targets, 4);
        put(m, 0x3ff0000000000000ull, 8); /* f64 1.0 */
        for (int i = 0; i < t->lora_layers * t->lora_targets; i++) put(m, 0, 1);
    }
}

static char g_shard[512];

static void expect(const char *name, const mb *m, qp_status st, const char *frag, bool check_shards) {
    qp_trillim_manifest *man = NULL;
    qp_err e;
    qp_err_clear(&e);
    qp_status s = qp_trillim_manifest_parse(m->b, m->n, "test.manifest", &man, &e);
    if (s == QP_OK && check_shards) {
        uint64_t sz = 1024;
        s = qp_trillim_manifest_check_shards(man, &sz, "test.manifest", &e);
    }
    QP_CHECK_MSG(s == st, "%s: status %s, expected %s (%s)", name, qp_status_name(s), qp_status_name(st), e.msg);
    if (frag) QP_CHECK_MSG(strstr(e.msg, frag) != NULL, "%s: message '%s' lacks '%s'", name, e.msg, frag);
    qp_trillim_manifest_free(man);
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "test-tmp");
    snprintf(g_shard, sizeof g_shard, "%s/trillim_bad_shard.bin", tmp);
    static uint8_t zeros[1024];
    qp_err e;
    QP_CHECK(qp_file_write_atomic(g_shard, zeros, sizeof zeros, &e) == QP_OK);
    size_t pl = strlen(g_shard);
    mb m;
    ent x;

    build(&m, g_shard, pl, &k_good, 0, false);
    expect("valid", &m, QP_OK, NULL, true);
    QP_CHECK_EQ_INT(m.n, 2 + 2 + pl + 4 + 55); /* one 55-byte entry */
    build(&m, g_shard, pl, &k_good, 7, false);
    expect("valid with an empty LoRA block", &m, QP_OK, NULL, true);

    x = k_good; x.action = 9; build(&m, g_shard, pl, &x, 0, false);
    expect("unknown action", &m, QP_ERR_UNSUPPORTED, "unknown action 9", false);
    x = k_good; x.dtype = 7; build(&m, g_shard, pl, &x, 0, false);
    expect("unknown dtype", &m, QP_ERR_UNSUPPORTED, "unknown dtype 7", false);
    x = k_good; x.shard = 3; build(&m, g_shard, pl, &x, 0, false);
    expect("shard index", &m, QP_ERR_CORRUPT, "shard index 3 out of range", false);
    x = k_good; x.size = 63; build(&m, g_shard, pl, &x, 0, false);
    expect("size vs shape", &m, QP_ERR_CORRUPT, "does not match rows x cols x dtype", false);
    x = k_good; x.off = 1000; build(&m, g_shard, pl, &x, 0, false);
    expect("offset outside the shard", &m, QP_ERR_CORRUPT, "outside shard 0", true);
    x = k_good; x.off = UINT64_MAX - 10; build(&m, g_shard, pl, &x, 0, false);
    expect("offset overflow", &m, QP_ERR_CORRUPT, "outside shard 0", true);
    x = k_good; x.prow = 2; build(&m, g_shard, pl, &x, 0, false);
    expect("padded smaller", &m, QP_ERR_CORRUPT, "padded shape", false);
    x = k_good; x.action = 3; build(&m, g_shard, pl, &x, 0, false);
    expect("repack of a float source", &m, QP_ERR_UNSUPPORTED, "needs an I8 or U8 source", false);
    x = k_good; x.action = 3; x.dtype = 4; x.size = 32; build(&m, g_shard, pl, &x, 0, false);
    expect("repack without scale", &m, QP_ERR_CORRUPT, "without a scale", false);
    x = k_good; x.has_scale = 2; build(&m, g_shard, pl, &x, 0, false);
    expect("has_scale 2", &m, QP_ERR_CORRUPT, "has_scale 2", false);
    x = k_good; x.action = 1; x.dtype = 3; x.size = 32; build(&m, g_shard, pl, &x, 0, false);
    expect("ternary quantize of I8", &m, QP_ERR_UNSUPPORTED, "needs a float source", false);
    x = k_good; x.rows = 0; x.size = 0; build(&m, g_shard, pl, &x, 0, false);
    expect("zero rows", &m, QP_ERR_CORRUPT, "bad shape", false);
    build(&m, g_shard, pl, &k_good, 0, false);
    m.n -= 1;
    expect("truncated entry", &m, QP_ERR_CORRUPT, "count 1", false);
    build(&m, g_shard, 0, &k_good, 0, false);
    expect("empty path", &m, QP_ERR_CORRUPT, "empty path", false);
    char nul[8] = {'a', 0, 'b'};
    build(&m, nul, 3, &k_good, 0, false);
    expect("NUL in path", &m, QP_ERR_CORRUPT, "NUL", false);
    build(&m, "\xff\xfe", 2, &k_good, 0, false);
    expect("invalid UTF-8 path", &m, QP_ERR_CORRUPT, "UTF-8", false);
    build(&m, "\xe0\x80\xaf", 3, &k_good, 0, false); /* overlong '/' (was accepted) */
    expect("overlong UTF-8 path", &m, QP_ERR_CORRUPT, "UTF-8", false);
    build(&m, "a\xed\xa0\x80", 4, &k_good, 0, false); /* surrogate U+D800 (was accepted) */
    expect("surrogate in path", &m, QP_ERR_CORRUPT, "UTF-8", false);
    build(&m, "\xf4\x90\x80\x80", 4, &k_good, 0, false); /* U+110000 */
    expect("path above U+10FFFF", &m, QP_ERR_CORRUPT, "UTF-8", false);
    build(&m, g_shard, pl, &k_good, 6, false); /* read as sections: 1 section of type 6 */
    expect("v1 LoRA block with 6 targets", &m, QP_ERR_UNSUPPORTED, "unknown type 6", false);

    /* the current SDK's form */
    sdk_tail tl = {2, 1, 1, 0, 2, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("sections: one TEXT_CORE section", &m, QP_OK, NULL, true);
    QP_CHECK_EQ_INT(m.n, 2 + 2 + pl + 4 + 2 * 55 + 4 + 9);
    {
        qp_trillim_manifest *man = NULL;
        uint8_t *back = NULL;
        size_t blen = 0;
        QP_CHECK(qp_trillim_manifest_parse(m.b, m.n, "t", &man, &e) == QP_OK);
        QP_CHECK(man && man->has_sections && man->n_sections == 1 && man->sections[0].count == 2);
        QP_CHECK(man && qp_trillim_manifest_serialize(man, &back, &blen, &e) == QP_OK);
        QP_CHECK(blen == m.n && back && memcmp(back, m.b, blen) == 0);
        qp_free(back);
        qp_trillim_manifest_free(man);
    }
    tl = (sdk_tail){2, 1, 1, 0, 2, 3, 7};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("sections + LoRA block", &m, QP_OK, NULL, true);
    tl = (sdk_tail){2, 0, 0, 0, 0, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("no sections (n_sections 0)", &m, QP_OK, NULL, true);
    tl = (sdk_tail){0, 0, 0, 0, 0, 30, 7};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("adapter-only manifest (0 entries, 0 sections, 30 LoRA layers)", &m, QP_OK, NULL, true);
    tl = (sdk_tail){0, 0, 0, 0, 0, 2, 5};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("adapter-only, 5 LoRA targets", &m, QP_ERR_UNSUPPORTED, "5 targets per layer", false);
    tl = (sdk_tail){2, 1, 2, 0, 2, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("section type 2", &m, QP_ERR_UNSUPPORTED, "unknown type 2", false);
    tl = (sdk_tail){2, 1, 1, 1, 2, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("section past the entries", &m, QP_ERR_CORRUPT, "outside the 2 entries", false);
    tl = (sdk_tail){2, 1, 1, 0, 0, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("empty section", &m, QP_ERR_CORRUPT, "[0, +0) are empty", false);
    tl = (sdk_tail){2, 2, 1, 0, 1, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    expect("two sections in order", &m, QP_OK, NULL, true);
    m.b[2 + 2 + pl + 4 + 2 * 55 + 4 + 9 + 1] = 0; /* second section starts at 0 again */
    expect("overlapping sections", &m, QP_ERR_CORRUPT, "overlap the previous", false);
    tl = (sdk_tail){2, 1, 1, 0, 2, 0, 0};
    build_sdk(&m, g_shard, pl, &k_good, &tl);
    m.n -= 2;
    expect("truncated section", &m, QP_ERR_CORRUPT, "9 bytes", false);
    m.n -= 9;
    expect("truncated section count", &m, QP_ERR_CORRUPT, "truncated count", false);
    for (uint64_t act = 4; act <= 7; act++) {
        x = k_good; x.action = act; build(&m, g_shard, pl, &x, 0, false);
        expect("actions 4-7 of a float source", &m, QP_OK, NULL, true);
        x.dtype = 3; x.size = 32; build(&m, g_shard, pl, &x, 0, false);
        expect("actions 4-7 of an I8 source", &m, QP_ERR_UNSUPPORTED, "needs a float source", false);
    }
    x = k_good; x.action = 8; build(&m, g_shard, pl, &x, 0, false);
    expect("action 8", &m, QP_ERR_UNSUPPORTED, "unknown action 8", false);
    build(&m, g_shard, pl, &k_good, 7, true);
    expect("bytes after the LoRA block", &m, QP_ERR_CORRUPT, "unexpected bytes", false);
    m.n = 1;
    expect("one byte", &m, QP_ERR_CORRUPT, "no shard count", false);
    m.n = 0; put(&m, 0, 2); put(&m, 0xFFFFFFFFu, 4);
    expect("huge tensor count", &m, QP_ERR_LIMIT, "tensor count", false);

    /* the quantizer: a valid manifest whose shard is missing, and one not in the SDK order */
    {
        qp_trillim_manifest *man = NULL;
        char out[600];
        snprintf(out, sizeof out, "%s/trillim_bad_out.tensors", tmp);
        qp_trillim_quant_opts o = {.manifest_path = "test.manifest", .output = out, .arch = 1, .hidden = 128, .intermediate = 256, .hidden_orig = 128, .intermediate_orig = 256, .norm_eps = 1e-5, .tie_embeddings = true, .rope_theta = 1e4};
        build(&m, "/nonexistent/shard.safetensors", 30, &k_good, 0, false);
        QP_CHECK(qp_trillim_manifest_parse(m.b, m.n, "test.manifest", &man, &e) == QP_OK);
        qp_err_clear(&e);
        QP_CHECK(man && qp_trillim_quantize(man, &o, &e) == QP_ERR_IO && strstr(e.msg, "does not exist"));
        qp_trillim_manifest_free(man);
        build(&m, g_shard, pl, &k_good, 0, false);
        man = NULL;
        QP_CHECK(qp_trillim_manifest_parse(m.b, m.n, "test.manifest", &man, &e) == QP_OK);
        qp_err_clear(&e);
        qp_status s = man ? qp_trillim_quantize(man, &o, &e) : QP_ERR_INTERNAL;
        QP_CHECK_MSG(s == QP_ERR_CORRUPT && strstr(e.msg, "token embedding"), "%s", e.msg);
        QP_CHECK(!qp_path_exists(out));
        qp_trillim_manifest_free(man);
    }
    remove(g_shard);

    /* manifest build reads shard headers through the safetensors reader's parser: what the
     * reader refuses, the builder refuses (the old re-parse accepted each of these) */
    {
        static const struct {
            const char *name, *hdr;
            uint64_t hl; /* 0: the true length */
            qp_status want;
            const char *frag;
        } k_hdr[] = {
            {"duplicate key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             0, QP_ERR_CORRUPT, "duplicate key 'a'"},
            {"bytes after the object", "{}xx", 0, QP_ERR_CORRUPT, "bytes after the JSON object"},
            {"invalid UTF-8", "{\"\xed\xa0\x80\":1}", 0, QP_ERR_CORRUPT, "invalid UTF-8"},
            {"over the limit", "{}", 100000001, QP_ERR_LIMIT, "exceeds the 100000000-byte limit"},
            {"shape not integers", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}",
             0, QP_ERR_CORRUPT, "shape[0] is not an integer"},
        };
        char dir[600], file[700];
        snprintf(dir, sizeof dir, "%s/trillim_bad_model", tmp);
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        QP_CHECK(qp_path_remove_tree(dir, NULL) == QP_OK);
        QP_CHECK(mkdir(dir, 0755) == 0);
        for (size_t i = 0; i < sizeof k_hdr / sizeof k_hdr[0]; i++) {
            uint8_t b[512] = {0};
            size_t hn = strlen(k_hdr[i].hdr);
            qp_store_u64le(b, k_hdr[i].hl ? k_hdr[i].hl : hn);
            memcpy(b + 8, k_hdr[i].hdr, hn);
            QP_CHECK(qp_file_write_atomic(file, b, 8 + hn + 4, &e) == QP_OK);
            qp_trillim_config c = {0};
            qp_trillim_manifest *man = NULL;
            qp_err_clear(&e);
            qp_status s = qp_trillim_manifest_build(dir, &c, NULL, false, &man, &e);
            QP_CHECK_MSG(s == k_hdr[i].want && strstr(e.msg, k_hdr[i].frag), "%s: %s %s", k_hdr[i].name,
                         qp_status_name(s), e.msg);
            qp_trillim_manifest_free(man);
        }
        QP_CHECK(qp_path_remove_tree(dir, NULL) == QP_OK);
    }
    return qp_test_finish();
}
