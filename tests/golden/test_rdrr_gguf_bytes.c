/* gguf-to-rdrr on the real stories260K-Q4_K_M.llamacpp.gguf (made by llama-quantize), checked
 * without any quantpack code but the binary under test: the manifest is read with cJSON, shard
 * hashes are computed with OpenSSL EVP SHA-256 directly (not core/hash.c), and the GGUF is parsed
 * here (header, metadata skipped by type, tensor infos, general.alignment, data section). Checks:
 * every shard's size and SHA-256 match the manifest (and totalSize); every GGUF tensor is in the
 * manifest with its shape reversed (outermost first); a tensor in a type DOPPLER's loader decodes
 * (F32, F16, BF16, Q4_K as "Q4_K_M", Q6_K) keeps its type name and its bytes, gathered from the
 * shards (spans or shard/offset), equal to the GGUF tensor data; any other (this file's Q5_0 and
 * Q8_0 fallbacks) is stored as F32 equal, bit for bit, to ggml's dequantization computed here from
 * ggml-common.h's block layouts (block_q8_0 {half d; int8 qs[32]}, block_q5_0 {half d; u8 qh[4];
 * u8 qs[16]}; dequantize_row_q8_0 / _q5_0) and listed in quantizationInfo.dtypeChanges with its
 * GGUF type as "planned"; no other tensors.
 * Independent of tests/peer/test_rdrr_doppler.mjs (Node). Exit 77 when the fixture is missing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "qp_test.h"
#include "qp_test_util.h"

static void sha256_hex(const uint8_t *p, size_t n, char out[65]) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(c, p, n) != 1 ||
        EVP_DigestFinal_ex(c, d, &dl) != 1 || dl != 32) {
        fprintf(stderr, "EVP SHA-256 failed\n");
        exit(1);
    }
    EVP_MD_CTX_free(c);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* ---- a minimal GGUF v2/v3 reader -------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t n, at;
    int bad;
} rd;

static uint64_t rd_u(rd *r, int bytes) {
    if (r->bad || bytes > 8 || r->n - r->at < (size_t)bytes) { r->bad = 1; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->at + i] << (8 * i);
    r->at += (size_t)bytes;
    return v;
}

static const char *rd_str(rd *r, uint64_t *len) {
    uint64_t l = rd_u(r, 8);
    if (r->bad || l > r->n - r->at) { r->bad = 1; return NULL; }
    const char *s = (const char *)r->p + r->at;
    r->at += (size_t)l;
    *len = l;
    return s;
}

static int scalar_bytes(uint32_t t) { /* GGUF value types */
    static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : -1;
}

static void skip_value(rd *r, uint32_t t, int depth) {
    uint64_t l;
    if (t == 8) { rd_str(r, &l); return; }
    if (t == 9) {
        uint32_t et = (uint32_t)rd_u(r, 4);
        uint64_t cnt = rd_u(r, 8);
        if (depth > 2) { r->bad = 1; return; }
        for (uint64_t i = 0; i < cnt && !r->bad; i++) skip_value(r, et, depth + 1);
        return;
    }
    int b = scalar_bytes(t);
    if (b <= 0) { r->bad = 1; return; }
    rd_u(r, b);
}

/* ggml type -> (block elements, block bytes, name); ggml's block structs (ggml-common.h) */
static const struct { uint32_t id; int be, bb; const char *name; } k_types[] = {
    {0, 1, 4, "F32"},      {1, 1, 2, "F16"},      {2, 32, 18, "Q4_0"},  {3, 32, 20, "Q4_1"},
    {6, 32, 22, "Q5_0"},   {7, 32, 24, "Q5_1"},   {8, 32, 34, "Q8_0"},  {10, 256, 84, "Q2_K"},
    {11, 256, 110, "Q3_K"}, {12, 256, 144, "Q4_K"}, {13, 256, 176, "Q5_K"}, {14, 256, 210, "Q6_K"},
    {30, 1, 2, "BF16"},
};

static float half_to_float(uint16_t h) { /* IEEE binary16 -> binary32, exact */
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0 && man == 0) bits = sign;
    else if (exp == 0) { /* subnormal: normalize */
        int e = -1;
        do { e++; man <<= 1; } while (!(man & 1024));
        bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 1023) << 13;
    } else if (exp == 31) bits = sign | 0x7f800000u | man << 13;
    else bits = sign | (exp + 127 - 15) << 23 | man << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ggml's dequantize_row_q8_0 / dequantize_row_q5_0 for one 32-element block. */
static void dequant_block(uint32_t type, const uint8_t *b, float *y) {
    float d = half_to_float((uint16_t)(b[0] | b[1] << 8));
    if (type == 8) {
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
        return;
    }
    uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
        uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
        int32_t x0 = ((qs[j] & 0x0F) | xh_0) - 16;
        int32_t x1 = ((qs[j] >> 4) | xh_1) - 16;
        y[j] = (float)x0 * d;
        y[j + 16] = (float)x1 * d;
    }
}

typedef struct gtensor {
    char name[128];
    int nd;
    uint64_t ne[4];
    uint32_t type;
    uint64_t off, size, nel;
    const char *tname;
} gtensor;

int main(void) {
    char src[1024], out[1024], bin[1024];
    qp_test_path(src, sizeof src, qp_test_real_dir(), "gguf/stories260K-Q4_K_M.llamacpp.gguf");
    if (access(src, R_OK) != 0) QP_SKIP("%s missing", src);
    const char *bindir = qp_test_env("QP_BIN_DIR", "bin");
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    qp_test_path(bin, sizeof bin, bindir, "gguf-to-rdrr");
    if (access(bin, X_OK) != 0) QP_SKIP("%s missing", bin);
    qp_test_mkdir_p(tmp);
    snprintf(out, sizeof out, "%s/rdrr-gguf-bytes-%d", tmp, (int)getpid());
    /* 16 KiB shards: the ~300 KB model spreads over many shards and the largest tensors (token_embd,
     * output: over 16 KiB) span several */
    int rc = qp_test_system("'%s' '%s' '%s' --shard-size 16384 --quiet", bin, src, out);
    QP_CHECK_MSG(rc == 0, "gguf-to-rdrr failed: %d", rc);
    if (qp_test_failed) return qp_test_finish();

    /* --- the GGUF, parsed here --- */
    size_t gn = 0;
    uint8_t *g = qp_test_read_file(src, &gn);
    QP_CHECK(g != NULL);
    if (!g) return qp_test_finish();
    rd r = {g, gn, 0, 0};
    QP_CHECK(gn >= 24 && memcmp(g, "GGUF", 4) == 0);
    r.at = 4;
    uint32_t ver = (uint32_t)rd_u(&r, 4);
    uint64_t n_t = rd_u(&r, 8), n_kv = rd_u(&r, 8);
    QP_CHECK(ver == 2 || ver == 3);
    QP_CHECK(n_t > 0 && n_t < 100000 && n_kv < 100000);
    uint64_t align = 32;
    for (uint64_t i = 0; i < n_kv && !r.bad; i++) {
        uint64_t kl;
        const char *k = rd_str(&r, &kl);
        uint32_t t = (uint32_t)rd_u(&r, 4);
        if (k && kl == 17 && memcmp(k, "general.alignment", 17) == 0 && t == 4) align = rd_u(&r, 4);
        else skip_value(&r, t, 0);
    }
    QP_CHECK(!r.bad && align > 0 && (align & (align - 1)) == 0);
    gtensor *gt = calloc((size_t)n_t, sizeof *gt);
    QP_CHECK(gt != NULL);
    if (!gt || r.bad) return qp_test_finish();
    for (uint64_t i = 0; i < n_t && !r.bad; i++) {
        uint64_t nl;
        const char *nm = rd_str(&r, &nl);
        if (!nm || nl >= sizeof gt[i].name) { r.bad = 1; break; }
        memcpy(gt[i].name, nm, (size_t)nl);
        gt[i].nd = (int)rd_u(&r, 4);
        if (gt[i].nd < 1 || gt[i].nd > 4) { r.bad = 1; break; }
        uint64_t nel = 1;
        for (int d = 0; d < gt[i].nd; d++) nel *= (gt[i].ne[d] = rd_u(&r, 8));
        gt[i].nel = nel;
        gt[i].type = (uint32_t)rd_u(&r, 4);
        gt[i].off = rd_u(&r, 8);
        int found = 0;
        for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++)
            if (k_types[k].id == gt[i].type) {
                found = 1;
                gt[i].tname = k_types[k].name;
                QP_CHECK_MSG(gt[i].ne[0] % (uint64_t)k_types[k].be == 0, "%s: row not whole blocks", gt[i].name);
                gt[i].size = nel / (uint64_t)k_types[k].be * (uint64_t)k_types[k].bb;
            }
        QP_CHECK_MSG(found, "%s: ggml type %u not in this test's table", gt[i].name, gt[i].type);
    }
    QP_CHECK(!r.bad);
    uint64_t data = (r.at + align - 1) / align * align;
    for (uint64_t i = 0; i < n_t; i++)
        QP_CHECK_MSG(data + gt[i].off + gt[i].size <= gn, "%s outside the GGUF", gt[i].name);
    if (qp_test_failed) return qp_test_finish();

    /* --- the RDRR directory --- */
    char p[2048];
    size_t mn = 0;
    snprintf(p, sizeof p, "%s/manifest.json", out);
    char *mtext = (char *)qp_test_read_file(p, &mn);
    cJSON *man = mtext ? cJSON_ParseWithLength(mtext, mn) : NULL;
    QP_CHECK(man != NULL);
    if (!man) return qp_test_finish();
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(man, "shards");
    int ns = cJSON_GetArraySize(shards);
    QP_CHECK(cJSON_IsArray(shards) && ns >= 3);
    uint8_t **sd = calloc((size_t)ns + 1, sizeof *sd);
    size_t *ss = calloc((size_t)ns + 1, sizeof *ss);
    double total = 0;
    for (int i = 0; i < ns; i++) {
        const cJSON *s = cJSON_GetArrayItem(shards, i);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(s, "filename");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "hash");
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(s, "size");
        QP_CHECK(cJSON_IsString(fn) && cJSON_IsString(h) && cJSON_IsNumber(sz));
        if (!cJSON_IsString(fn) || !cJSON_IsString(h) || !cJSON_IsNumber(sz)) continue;
        QP_CHECK(strchr(fn->valuestring, '/') == NULL);
        snprintf(p, sizeof p, "%s/%s", out, fn->valuestring);
        sd[i] = qp_test_read_file(p, &ss[i]);
        QP_CHECK_MSG(sd[i] != NULL, "%s unreadable", p);
        if (!sd[i]) continue;
        char hex[65];
        sha256_hex(sd[i], ss[i], hex);
        QP_CHECK_MSG(strcmp(hex, h->valuestring) == 0, "shard %d: SHA-256 %s, manifest %s", i, hex, h->valuestring);
        QP_CHECK_MSG((double)ss[i] == sz->valuedouble, "shard %d: %zu bytes, manifest %g", i, ss[i], sz->valuedouble);
        total += (double)ss[i];
    }
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(man, "totalSize");
    QP_CHECK(cJSON_IsNumber(ts) && ts->valuedouble == total);

    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(man, "tensors");
    QP_CHECK_EQ_INT(cJSON_GetArraySize(tensors), (long long)n_t);
    int n_spanning = 0, n_checked = 0, n_decoded = 0;
    for (uint64_t i = 0; i < n_t; i++) {
        const gtensor *G = &gt[i];
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(tensors, G->name);
        QP_CHECK_MSG(t != NULL, "%s missing from the manifest", G->name);
        if (!t) continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
        bool kept = G->type == 0 || G->type == 1 || G->type == 12 || G->type == 14 || G->type == 30;
        const char *want_dt = G->type == 12 ? "Q4_K_M" : kept ? G->tname : "F32";
        uint64_t want_size = kept ? G->size : G->nel * 4;
        QP_CHECK_MSG(kept || G->type == 6 || G->type == 8, "%s: %s: this test decodes Q5_0 and Q8_0 only",
                     G->name, G->tname);
        QP_CHECK_MSG(cJSON_IsString(dt) && strcmp(dt->valuestring, want_dt) == 0, "%s: dtype %s, GGUF %s",
                     G->name, cJSON_IsString(dt) ? dt->valuestring : "?", want_dt);
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
        QP_CHECK_EQ_INT(cJSON_GetArraySize(shape), G->nd);
        for (int d = 0; d < G->nd && d < cJSON_GetArraySize(shape); d++)
            QP_CHECK_MSG(cJSON_GetArrayItem(shape, d)->valuedouble == (double)G->ne[G->nd - 1 - d],
                         "%s: shape[%d]", G->name, d);
        QP_CHECK_MSG(cJSON_GetObjectItemCaseSensitive(t, "size")->valuedouble == (double)want_size,
                     "%s: size", G->name);
        /* gather the stored bytes */
        uint8_t *buf = malloc((size_t)want_size + 1);
        uint64_t done = 0;
        int ok = buf != NULL;
        const cJSON *spans = cJSON_GetObjectItemCaseSensitive(t, "spans");
        if (cJSON_IsArray(spans) && cJSON_GetArraySize(spans) > 0) {
            n_spanning++;
            const cJSON *sp;
            cJSON_ArrayForEach(sp, spans) {
                int si = cJSON_GetObjectItemCaseSensitive(sp, "shardIndex")->valueint;
                uint64_t so = (uint64_t)cJSON_GetObjectItemCaseSensitive(sp, "offset")->valuedouble;
                uint64_t sz = (uint64_t)cJSON_GetObjectItemCaseSensitive(sp, "size")->valuedouble;
                if (!ok || si < 0 || si >= ns || !sd[si] || so + sz > ss[si] || done + sz > want_size) { ok = 0; break; }
                memcpy(buf + done, sd[si] + so, (size_t)sz);
                done += sz;
            }
        } else {
            int si = cJSON_GetObjectItemCaseSensitive(t, "shard")->valueint;
            uint64_t so = (uint64_t)cJSON_GetObjectItemCaseSensitive(t, "offset")->valuedouble;
            if (ok && si >= 0 && si < ns && sd[si] && so + want_size <= ss[si]) {
                memcpy(buf, sd[si] + so, (size_t)want_size);
                done = want_size;
            } else ok = 0;
        }
        QP_CHECK_MSG(ok && done == want_size, "%s: stored bytes not located", G->name);
        if (ok && done == want_size && kept) {
            QP_CHECK_MSG(memcmp(buf, g + data + G->off, (size_t)G->size) == 0,
                         "%s: bytes differ from the GGUF's", G->name);
            n_checked++;
        } else if (ok && done == want_size && (G->type == 6 || G->type == 8)) {
            size_t bb = G->type == 8 ? 34 : 22;
            float y[32];
            uint64_t bad = 0;
            for (uint64_t k = 0; k < G->nel / 32; k++) {
                dequant_block(G->type, g + data + G->off + k * bb, y);
                if (memcmp(y, buf + k * 128, 128) != 0) bad++;
            }
            QP_CHECK_MSG(bad == 0, "%s: %llu of %llu blocks differ from ggml's dequantization", G->name,
                         (unsigned long long)bad, (unsigned long long)(G->nel / 32));
            /* listed as a change, with the GGUF type as planned */
            const cJSON *ch = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(man, "quantizationInfo"), "dtypeChanges"), *c;
            int listed = 0;
            cJSON_ArrayForEach(c, ch) {
                const cJSON *tn = cJSON_GetObjectItemCaseSensitive(c, "tensor");
                const cJSON *pl = cJSON_GetObjectItemCaseSensitive(c, "planned");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "stored");
                if (cJSON_IsString(tn) && strcmp(tn->valuestring, G->name) == 0 && cJSON_IsString(pl) &&
                    strcmp(pl->valuestring, G->tname) == 0 && cJSON_IsString(st) &&
                    strcmp(st->valuestring, "F32") == 0)
                    listed++;
            }
            QP_CHECK_MSG(listed == 1, "%s: not listed once in quantizationInfo.dtypeChanges", G->name);
            n_decoded++;
        }
        free(buf);
    }
    printf("%d shards hashed, %d tensors byte-identical to the GGUF, %d Q5_0/Q8_0 stored as ggml's "
           "F32 dequantization (%d spanning shards)\n", ns, n_checked, n_decoded, n_spanning);
    QP_CHECK(n_spanning > 0);
    QP_CHECK(n_checked == 16 && n_decoded == 32); /* this file: 11 F32 + 5 F16; 29 Q5_0 + 3 Q8_0 */

    for (int i = 0; i < ns; i++) free(sd[i]);
    free(sd);
    free(ss);
    cJSON_Delete(man);
    free(mtext);
    free(gt);
    free(g);
    if (qp_test_system("rm -rf '%s'", out) != 0) fprintf(stderr, "could not remove %s\n", out);
    return qp_test_finish();
}
