/* GGUF writer round trip: a file with every value type (scalars and arrays, strings included),
 * a non-default alignment, tensors with trailing 1s and 3 dimensions is written, read back with
 * our reader, written again from what was read, and the two files must be byte-identical. An
 * independent parser (@huggingface/gguf, run with node) must read the same keys, types, tensor
 * names, types, shapes and offsets. Misuse (duplicate key or tensor, too long a name, short data)
 * must fail and leave nothing at the final path. */
#include <dirent.h>
#include <stdint.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "writers/gguf_writer.h"

static const char *g_tmp;

static qp_meta meta_of(const char *key, qp_meta_type t) {
    qp_meta m;
    memset(&m, 0, sizeof m);
    m.key = key;
    m.type = t;
    m.n = 1;
    return m;
}

typedef struct tspec {
    const char *name;
    qp_encoding enc;
    int n_dims;
    int64_t ne[4];
} tspec;

static const tspec k_tensors[] = {
    {"token_embd.weight", QP_ENC_F16, 2, {64, 10, 1, 1}},
    {"blk.0.attn_norm.weight", QP_ENC_F32, 2, {64, 1, 1, 1}}, /* written with n_dims 1 */
    {"blk.0.ffn_up.weight", QP_ENC_Q8_0, 2, {64, 3, 1, 1}},
    {"blk.0.experts.weight", QP_ENC_BF16, 3, {32, 2, 3, 1}},
    {"scalar.weight", QP_ENC_F32, 4, {1, 1, 1, 1}},
};
#define N_TENSORS (sizeof k_tensors / sizeof k_tensors[0])

static size_t tensor_bytes(const tspec *t) {
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    size_t b = 0;
    qp_encoding_tensor_bytes(t->enc, n, &b);
    return b;
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + seed * 7u + (i >> 3)) & 0xFF);
    /* keep Q8_0 / F16 scales finite: clear the exponent's top bit of every other byte pair */
    for (size_t i = 1; i < n; i += 2) p[i] &= 0x3F;
}

static bool write_original(const char *path, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
    bool ok = true;
    qp_meta m;
    m = meta_of("general.architecture", QP_META_STRING);
    m.str = "llama";
    m.str_len = 5;
    ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    ok = ok && qp_gguf_writer_add_u32(w, "general.alignment", 64, e) == QP_OK;
    m = meta_of("t.u8", QP_META_U8); m.v.u = 250; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.i8", QP_META_I8); m.v.i = -100; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.u16", QP_META_U16); m.v.u = 65000; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.i16", QP_META_I16); m.v.i = -32000; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.u32", QP_META_U32); m.v.u = 4000000000u; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.i32", QP_META_I32); m.v.i = -2000000000; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.f32", QP_META_F32); m.v.f = (double)1e-5f; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.bool", QP_META_BOOL); m.v.b = true; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.u64", QP_META_U64); m.v.u = 0xFFFFFFFFFFFFull * 3; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.i64", QP_META_I64); m.v.i = -5000000000ll; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.f64", QP_META_F64); m.v.f = 3.141592653589793; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    m = meta_of("t.empty_string", QP_META_STRING); m.str = ""; ok = ok && qp_gguf_writer_add_meta(w, &m, e) == QP_OK;
    char *strs[] = {"<unk>", "", "h\xc3\xa9llo", "a b"};
    ok = ok && qp_gguf_writer_add_str_array(w, "t.arr_str", strs, NULL, 4, e) == QP_OK;
    uint8_t f32s[12];
    qp_store_f32le(f32s, 0.5f); qp_store_f32le(f32s + 4, -2.0f); qp_store_f32le(f32s + 8, 1e30f);
    ok = ok && qp_gguf_writer_add_array(w, "t.arr_f32", QP_META_F32, 3, f32s, e) == QP_OK;
    uint8_t i32s[8];
    qp_store_u32le(i32s, (uint32_t)-1); qp_store_u32le(i32s + 4, 6);
    ok = ok && qp_gguf_writer_add_array(w, "t.arr_i32", QP_META_I32, 2, i32s, e) == QP_OK;
    uint8_t u64s[16];
    qp_store_u64le(u64s, 1); qp_store_u64le(u64s + 8, UINT64_MAX);
    ok = ok && qp_gguf_writer_add_array(w, "t.arr_u64", QP_META_U64, 2, u64s, e) == QP_OK;
    uint8_t bools[3] = {1, 0, 1};
    ok = ok && qp_gguf_writer_add_array(w, "t.arr_bool", QP_META_BOOL, 3, bools, e) == QP_OK;
    ok = ok && qp_gguf_writer_add_array(w, "t.arr_empty", QP_META_U8, 0, NULL, e) == QP_OK;
    for (size_t i = 0; ok && i < N_TENSORS; i++)
        ok = qp_gguf_writer_add_tensor(w, k_tensors[i].name, k_tensors[i].enc, k_tensors[i].n_dims,
                                       k_tensors[i].ne, e) == QP_OK;
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (size_t i = 0; ok && i < N_TENSORS; i++) {
        size_t n = tensor_bytes(&k_tensors[i]);
        uint8_t *b = qp_malloc(n);
        if (!b) return false;
        fill(b, n, (unsigned)i);
        /* stream in two pieces */
        ok = qp_gguf_writer_write(w, b, n / 3, e) == QP_OK &&
             qp_gguf_writer_write(w, b + n / 3, n - n / 3, e) == QP_OK &&
             qp_gguf_writer_end_tensor(w, e) == QP_OK;
        qp_free(b);
    }
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

static bool rewrite(const qp_model *m, const char *path, qp_err *e) {
    qp_gguf_writer *w;
    if (qp_gguf_writer_new(path, &w, e) != QP_OK) return false;
    bool ok = true;
    for (int64_t i = 0; ok && i < m->n_meta; i++) ok = qp_gguf_writer_add_meta(w, &m->meta[i], e) == QP_OK;
    for (int64_t i = 0; ok && i < m->n_tensors; i++)
        ok = qp_gguf_writer_add_tensor(w, m->tensors[i].name, m->tensors[i].enc, m->tensors[i].n_dims,
                                       m->tensors[i].ne, e) == QP_OK;
    ok = ok && qp_gguf_writer_begin(w, e) == QP_OK;
    for (int64_t i = 0; ok && i < m->n_tensors; i++)
        ok = qp_gguf_writer_write_tensor(w, m->tensors[i].data, m->tensors[i].nbytes, e) == QP_OK;
    if (!ok) {
        qp_gguf_writer_abort(w);
        return false;
    }
    return qp_gguf_writer_finish(w, e) == QP_OK;
}

static bool same_files(const char *a, const char *b) {
    qp_mapped_file fa = {0}, fb = {0};
    qp_err e = {0};
    bool ok = qp_file_map(a, &fa, &e) == QP_OK && qp_file_map(b, &fb, &e) == QP_OK &&
              fa.size == fb.size && memcmp(fa.data, fb.data, fa.size) == 0;
    qp_file_unmap(&fa);
    qp_file_unmap(&fb);
    return ok;
}

/* No "<name>.tmp.*" left in the folder. */
static int count_debris(const char *base) {
    DIR *d = opendir(g_tmp);
    int n = 0;
    struct dirent *de;
    size_t bl = strlen(base);
    while (d && (de = readdir(d)) != NULL)
        if (strncmp(de->d_name, base, bl) == 0 && strstr(de->d_name + bl, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* A fresh error record: qp_fail keeps the first failure of a record. */
static qp_err *E(void) {
    static qp_err e;
    qp_err_clear(&e);
    return &e;
}

static void check_misuse(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gguf-writer-misuse.gguf", g_tmp);
    remove(path);
    qp_gguf_writer *w;
    int64_t ne[2] = {32, 2};
    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_u32(w, "a", 1, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_u32(w, "a", 2, E()) == QP_ERR_ARG);
    qp_gguf_writer_abort(w);

    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_tensor(w, "x", QP_ENC_F32, 2, ne, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_tensor(w, "x", QP_ENC_F32, 2, ne, E()) == QP_ERR_ARG);
    qp_gguf_writer_abort(w);

    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                       QP_ENC_F32, 2, ne, E()) == QP_ERR_LIMIT);
    qp_gguf_writer_abort(w);

    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    int64_t bad[1] = {33};
    QP_CHECK(qp_gguf_writer_add_tensor(w, "q", QP_ENC_Q8_0, 1, bad, E()) == QP_ERR_ARG);
    qp_gguf_writer_abort(w);

    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_u32(w, "general.alignment", 48, E()) == QP_ERR_ARG);
    qp_gguf_writer_abort(w);

    /* short data: finish fails, nothing at path, no temporary left */
    QP_CHECK(qp_gguf_writer_new(path, &w, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_add_tensor(w, "x", QP_ENC_F32, 2, ne, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_begin(w, E()) == QP_OK);
    float z[64] = {0};
    QP_CHECK(qp_gguf_writer_write(w, z, 100, E()) == QP_OK);
    QP_CHECK(qp_gguf_writer_write(w, z, 200, E()) == QP_ERR_INTERNAL); /* 300 > 256 bytes */
    QP_CHECK(qp_gguf_writer_finish(w, E()) != QP_OK);
    QP_CHECK(!qp_path_exists(path));
    QP_CHECK_EQ_INT(count_debris("gguf-writer-misuse.gguf"), 0);
}

/* Parses path with @huggingface/gguf and checks keys, types, tensor infos against m. */
static void check_peer(const char *path, const qp_model *m) {
    const char *peer = qp_test_env("QP_PEER_DIR", "");
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/@huggingface/gguf/package.json", peer);
    if (!*peer || !qp_path_exists(probe)) {
        fprintf(stderr, "note: @huggingface/gguf not found; peer check skipped\n");
        return;
    }
    char cmd[12000];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && node -e \"const {gguf}=require('@huggingface/gguf');"
             "gguf(process.argv[1],{allowLocalFile:true,typedMetadata:true}).then(r=>{"
             "for(const [k,v] of Object.entries(r.typedMetadata)){if(['version','tensor_count','kv_count'].includes(k))continue;"
             "console.log('K '+k+' '+v.type+' '+(v.subType===undefined?'-':v.subType)+' '+(Array.isArray(v.value)?v.value.length:'s'));}"
             "for(const t of r.tensorInfos)console.log('T '+t.name+' '+t.dtype+' '+t.n_dims+' '+t.shape.join(',')+' '+(BigInt(r.tensorDataOffset)+BigInt(t.offset)));"
             "}).catch(x=>{console.log('ERR '+x);process.exit(1);})\" '%s'",
             peer, path);
    FILE *p = popen(cmd, "r");
    if (!p) {
        QP_CHECK_MSG(false, "cannot run node");
        return;
    }
    char line[4096];
    int64_t nk = 0, nt = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == 'K') {
            char key[512], sub[16], cnt[32];
            int type;
            if (sscanf(line, "K %511s %d %15s %31s", key, &type, sub, cnt) != 4) continue;
            const qp_meta *md = qp_model_meta(m, key);
            QP_CHECK_MSG(md && (int)md->type == type, "peer key %s type %d", key, type);
            if (md && md->type == QP_META_ARRAY) {
                QP_CHECK_MSG(atoi(sub) == (int)md->arr_type, "peer key %s subtype %s", key, sub);
                QP_CHECK_MSG(strtoull(cnt, NULL, 10) == md->n, "peer key %s count %s", key, cnt);
            }
            nk++;
        } else if (line[0] == 'T') {
            char name[128], shape[128];
            int dtype, nd;
            unsigned long long off;
            if (sscanf(line, "T %127s %d %d %127s %llu", name, &dtype, &nd, shape, &off) != 5) continue;
            const qp_tensor *t = qp_model_find(m, name);
            QP_CHECK_MSG(t != NULL, "peer tensor %s", name);
            if (t) {
                char want[128];
                size_t k = 0;
                for (int d = 0; d < t->n_dims; d++)
                    k += (size_t)snprintf(want + k, sizeof want - k, "%s%lld", d ? "," : "", (long long)t->ne[d]);
                QP_CHECK_MSG(dtype == qp_encoding_get(t->enc)->ggml_type, "peer %s dtype %d", name, dtype);
                QP_CHECK_MSG(nd == t->n_dims && strcmp(shape, want) == 0, "peer %s shape %s vs %s", name, shape, want);
                QP_CHECK_MSG(off == t->offset, "peer %s offset %llu vs %llu", name, off, (unsigned long long)t->offset);
            }
            nt++;
        } else {
            QP_CHECK_MSG(false, "peer: %s", line);
        }
    }
    int rc = pclose(p);
    QP_CHECK_MSG(rc == 0, "node exited with %d", rc);
    QP_CHECK_EQ_INT(nk, m->n_meta);
    QP_CHECK_EQ_INT(nt, m->n_tensors);
}

int main(void) {
    g_tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    char a[4096], b[4096];
    if (!qp_test_mkdir_p(g_tmp)) QP_SKIP("cannot create %s", g_tmp);
    snprintf(a, sizeof a, "%s/gguf-writer-a.gguf", g_tmp);
    snprintf(b, sizeof b, "%s/gguf-writer-b.gguf", g_tmp);
    qp_err e = {0};
    QP_CHECK_MSG(write_original(a, &e), "%s", e.msg);
    qp_model *m = NULL;
    QP_CHECK_MSG(qp_model_open(a, NULL, &m, &e) == QP_OK, "%s", e.msg);
    if (m) {
        QP_CHECK_EQ_INT(m->format_version, 3);
        QP_CHECK_EQ_INT(m->n_meta, 20);
        QP_CHECK_EQ_INT(m->n_tensors, (int64_t)N_TENSORS);
        const qp_tensor *t = qp_model_find(m, "blk.0.attn_norm.weight");
        QP_CHECK(t && t->n_dims == 1 && t->ne[0] == 64);
        t = qp_model_find(m, "scalar.weight");
        QP_CHECK(t && t->n_dims == 1 && t->ne[0] == 1);
        t = qp_model_find(m, "blk.0.experts.weight");
        QP_CHECK(t && t->n_dims == 3 && t->ne[2] == 3 && t->enc == QP_ENC_BF16);
        for (int64_t i = 0; i < m->n_tensors; i++) QP_CHECK(m->tensors[i].offset % 64 == 0);
        const qp_meta *md = qp_model_meta(m, "t.i64");
        QP_CHECK(md && md->type == QP_META_I64 && md->v.i == -5000000000ll);
        md = qp_model_meta(m, "t.f32");
        QP_CHECK(md && md->type == QP_META_F32 && (float)md->v.f == 1e-5f);
        md = qp_model_meta(m, "t.arr_str");
        QP_CHECK(md && md->type == QP_META_ARRAY && md->arr_type == QP_META_STRING && md->n == 4);
        /* the data of each tensor came back as written */
        for (size_t i = 0; i < N_TENSORS; i++) {
            t = qp_model_find(m, k_tensors[i].name);
            size_t n = tensor_bytes(&k_tensors[i]);
            uint8_t *want = qp_malloc(n);
            fill(want, n, (unsigned)i);
            QP_CHECK_MSG(t && t->nbytes == n && memcmp(t->data, want, n) == 0, "data of %s", k_tensors[i].name);
            qp_free(want);
        }
        QP_CHECK_MSG(rewrite(m, b, &e), "%s", e.msg);
        QP_CHECK_MSG(same_files(a, b), "write -> read -> write is not byte-identical");
        check_peer(a, m);
        qp_model_close(m);
    }
    check_misuse();
    remove(a);
    remove(b);
    return qp_test_finish();
}
