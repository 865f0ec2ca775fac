/* Corrupt .bullet files are rejected with specific statuses and messages naming the offset:
 * bad magics, a header without its terminator or keys, truncation anywhere, dims and ranks out
 * of range, two records with one hash, offsets and sizes past the end, a tokenizer whose count
 * disagrees with the header, unknown quant types, a failed checksum, a missing END!. Every
 * truncation of a valid file fails cleanly (no crash under ASan). The runtime refuses
 * bullet-core's sample file (its tensors hold fewer values than their shapes) by name. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "quantpack/runtime.h"
#include "writers/bullet_writer.h"

static char g_good[600], g_bad[600];
static uint8_t *g_buf;
static size_t g_n;

static qp_status open_bytes(const uint8_t *d, size_t n, qp_err *e) {
    qp_test_must_write_file(g_bad, d, n);
    qp_model *m = NULL;
    qp_status s = qp_model_open(g_bad, NULL, &m, e);
    qp_model_close(m);
    return s;
}

#define EXPECT(d, n, status, needle)                                                              \
    do {                                                                                          \
        qp_err e_ = {0};                                                                          \
        qp_status s_ = open_bytes(d, n, &e_);                                                     \
        QP_CHECK_MSG(s_ == (status) && strstr(e_.msg, needle) != NULL,                            \
                     "status %d (want %d), message \"%s\" (want \"%s\")", (int)s_, (int)(status), \
                     e_.msg, needle);                                                             \
    } while (0)

static uint8_t *copy(void) {
    uint8_t *c = malloc(g_n);
    memcpy(c, g_buf, g_n);
    return c;
}

/* Replaces the header JSON (the 4096-byte area) with text. */
static void set_header(uint8_t *d, const char *text) {
    memset(d, 0, 4096);
    memcpy(d, text, strlen(text));
}

static long header_int(const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr((const char *)g_buf, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static void make_good(bool checksum) {
    const char *toks[4] = {"h", "e", "l", "o"};
    qp_bullet_info in;
    memset(&in, 0, sizeof in);
    in.hidden = 32;
    in.n_layers = 1;
    in.n_heads = 2;
    in.max_context = 16;
    in.vocab = (qp_bullet_vocab){4, toks, NULL, NULL, NULL, 0, NULL, "llama", NULL, -1, -1, -1, -1, false};
    in.has_gen = true;
    in.checksum = checksum;
    static float w[128 * 32];
    for (int i = 0; i < 128 * 32; i++) w[i] = (float)((i * 37) % 17) / 16.0f - 0.5f;
    qp_bullet_tensor bt[12];
    memset(bt, 0, sizeof bt);
    const char *names[12] = {"tok_embeddings.weight", "layers.0.norm.attn.weight",
                             "layers.0.attention.query.weight", "layers.0.attention.key.weight",
                             "layers.0.attention.value.weight", "layers.0.attention.output.weight",
                             "layers.0.norm.ffn.weight", "layers.0.ffn.w1.weight",
                             "layers.0.ffn.w3.weight", "layers.0.ffn.w2.weight",
                             "final_layernorm.weight", "gen_head.weight"};
    const int64_t dims[12][2] = {{4, 32}, {32, 0}, {32, 32}, {32, 32}, {32, 32}, {32, 32},
                                 {32, 0}, {128, 32}, {128, 32}, {32, 128}, {32, 0}, {4, 32}};
    for (int i = 0; i < 12; i++) {
        bt[i].name = names[i];
        bt[i].rank = dims[i][1] ? 2 : 1;
        bt[i].dims[0] = dims[i][0];
        bt[i].dims[1] = dims[i][1];
        bt[i].f32 = w;
    }
    qp_err e = {0};
    QP_CHECK_MSG(qp_bullet_write(g_good, &in, bt, 12, &e) == QP_OK, "%s", e.msg);
    free(g_buf);
    g_buf = qp_test_read_file(g_good, &g_n);
    if (!g_buf) g_n = 0;
}

int main(void) {
    const char *tmp = qp_test_env("QP_TMP_DIR", "/tmp");
    if (!qp_test_mkdir_p(tmp)) return 1;
    snprintf(g_good, sizeof g_good, "%s/bullet_bad_good_%d.bullet", tmp, (int)getpid());
    snprintf(g_bad, sizeof g_bad, "%s/bullet_bad_%d.bullet", tmp, (int)getpid());
    make_good(false);
    {
        qp_err e = {0};
        QP_CHECK_MSG(open_bytes(g_buf, g_n, &e) == QP_OK, "the good file: %s", e.msg);
    }
    long ws = header_int("weights_start");
    size_t rec0 = (size_t)ws + 8, rec1;
    {
        size_t p = rec0 + 22;
        p = (p + 31) / 32 * 32 + 4 * 32 / 32 * 20; /* embedding: 4 x 32 -> 4 blocks */
        rec1 = p;
    }
    uint8_t *d;

    /* magics */
    d = copy();
    d[0] = 'X';
    EXPECT(d, g_n, QP_ERR_FORMAT, "not a recognised model");
    free(d);
    d = copy();
    memcpy(d + 4096, "BULX", 4);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "no \"BULK\" magic");
    free(d);
    d = copy();
    memcpy(d + ws, "BWT1", 4);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "no \"BWT0\" magic");
    free(d);
    d = copy();
    memcpy(d + g_n - 4, "END?", 4);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "no \"END!\" footer");
    free(d);

    /* issue 11: an unknown version or quantization type is refused, not a warning */
    {
        static const struct {
            const char *from, *to, *needle;
        } k_swap[] = {
            {"\"bullet_version\":\"1.0\"", "\"bullet_version\":\"9.9\"", "bullet_version \"9.9\" (this reader knows 1.0)"},
            {"\"type\":\"BQ4\"", "\"type\":\"BQ8\"", "quantization type \"BQ8\" (this reader knows BQ4)"},
        };
        for (size_t i = 0; i < sizeof k_swap / sizeof k_swap[0]; i++) {
            d = copy();
            char *at = strstr((char *)d, k_swap[i].from);
            QP_CHECK_MSG(at != NULL, "header has no %s", k_swap[i].from);
            if (at) memcpy(at, k_swap[i].to, strlen(k_swap[i].to));
            EXPECT(d, g_n, QP_ERR_UNSUPPORTED, k_swap[i].needle);
            free(d);
        }
    }

    /* header */
    d = copy();
    memset(d, ' ', g_n);
    d[0] = '{';
    EXPECT(d, g_n, QP_ERR_CORRUPT, "no 00 00 00 00 terminator");
    free(d);
    char hdr[4096];
    const char *good_hdr = (const char *)g_buf;
    d = copy();
    snprintf(hdr, sizeof hdr, "%s", good_hdr);
    char *p = strstr(hdr, "\"hidden_size\"");
    memcpy(p, "\"hidden_sizX\"", 13);
    set_header(d, hdr);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "\"hidden_size\" is missing");
    free(d);
    d = copy();
    snprintf(hdr, sizeof hdr, "%s", good_hdr);
    p = strstr(hdr, "\"vocab_size\":") + 13;
    memcpy(p, "\"4\"", 3); /* "vocab_size":"4"... -> not an integer where bullet-core reads one */
    set_header(d, hdr);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "\"vocab_size\" is not an integer");
    free(d);
    d = copy();
    {
        char h2[8192];
        snprintf(h2, sizeof h2, "%s", good_hdr);
        char *q = strstr(h2, "\"vocab_size\":4");
        char tail[4096];
        snprintf(tail, sizeof tail, "%s", q + strlen("\"vocab_size\":4"));
        sprintf(q, "\"vocab_size\":70000%s", tail);
        set_header(d, h2);
        EXPECT(d, g_n, QP_ERR_LIMIT, "\"vocab_size\"");
        snprintf(h2, sizeof h2, "%s", good_hdr);
        q = strstr(h2, "\"vocab_size\":4");
        snprintf(tail, sizeof tail, "%s", q + strlen("\"vocab_size\":4"));
        sprintf(q, "\"vocab_size\":5%s", tail);
        set_header(d, h2);
        EXPECT(d, g_n, QP_ERR_CORRUPT, "tokens but the header says vocab_size 5");
        snprintf(h2, sizeof h2, "%s", good_hdr);
        q = strstr(h2, "\"weights_start\":");
        snprintf(tail, sizeof tail, "%s", strchr(q + 16, '}'));
        sprintf(q, "\"weights_start\":999999%s", tail);
        set_header(d, h2);
        EXPECT(d, g_n, QP_ERR_CORRUPT, "past the end of the file");
        snprintf(h2, sizeof h2, "%s", good_hdr);
        q = strstr(h2, "\"weights_start\":");
        snprintf(tail, sizeof tail, "%s", strchr(q + 16, '}'));
        sprintf(q, "\"weights_start\":99999999999%s", tail);
        set_header(d, h2);
        EXPECT(d, g_n, QP_ERR_LIMIT, "\"weights_start\"");
        snprintf(h2, sizeof h2, "%s", good_hdr);
        q = strstr(h2, "\"num_heads\":2");
        q[12] = '3';
        set_header(d, h2);
        EXPECT(d, g_n, QP_ERR_CORRUPT, "even head widths");
    }
    free(d);

    /* tokenizer */
    d = copy();
    d[4096 + 8 + 4] = 0xff; /* token 0 length 0x??ff: runs into the weights */
    d[4096 + 8 + 5] = 0x7f;
    EXPECT(d, g_n, QP_ERR_CORRUPT, "runs past the tokenizer section");
    free(d);

    /* tensor table */
    d = copy();
    memcpy(d + rec1, d + rec0, 8); /* record 1 gets record 0's hash */
    EXPECT(d, g_n, QP_ERR_CORRUPT, "have the same name hash");
    free(d);
    d = copy();
    d[rec0 + 8] = 5;
    EXPECT(d, g_n, QP_ERR_CORRUPT, "rank 5");
    free(d);
    d = copy();
    d[rec0 + 9] = 0;
    d[rec0 + 10] = 0;
    EXPECT(d, g_n, QP_ERR_CORRUPT, "dim 0 is 0");
    free(d);
    d = copy();
    d[rec0 + 9 + 6] = 2; /* dim 3 beyond rank 2 */
    EXPECT(d, g_n, QP_ERR_CORRUPT, "1 past the rank");
    free(d);
    d = copy();
    d[rec0 + 17] = 3;
    EXPECT(d, g_n, QP_ERR_UNSUPPORTED, "quant type 3");
    free(d);
    d = copy();
    d[rec0 + 18] = 21; /* compressed size 80 -> 81 */
    d[rec0 + 19] = 0;
    d[rec0 + 18] = 81;
    EXPECT(d, g_n, QP_ERR_CORRUPT, "not a whole number of 20-byte");
    free(d);
    d = copy();
    d[rec0 + 18] = 0x00;
    d[rec0 + 19] = 0x00;
    d[rec0 + 20] = 0xf0; /* 15.7 MB */
    EXPECT(d, g_n, QP_ERR_CORRUPT, "runs past the end of the file");
    free(d);
    d = copy();
    d[ws + 4] = 0xff;
    d[ws + 5] = 0xff; /* 65535 tensors */
    EXPECT(d, g_n, QP_ERR_CORRUPT, "do not fit the file");
    free(d);

    /* every truncation fails cleanly */
    int trunc_ok = 0;
    for (size_t k = 0; k < g_n; k += (k < 4200 ? 97 : 7)) {
        qp_err e = {0};
        qp_status s = open_bytes(g_buf, k, &e);
        trunc_ok += s != QP_OK;
    }
    QP_CHECK(trunc_ok > 0);
    {
        qp_err e = {0};
        QP_CHECK(open_bytes(g_buf, g_n - 1, &e) == QP_ERR_CORRUPT && strstr(e.msg, "END!"));
        int all = 1;
        for (size_t k = 0; k < g_n; k += 13) {
            qp_err e2 = {0};
            all &= open_bytes(g_buf, k, &e2) != QP_OK;
        }
        QP_CHECK(all);
    }

    /* checksum */
    make_good(true);
    {
        qp_err e = {0};
        QP_CHECK_MSG(open_bytes(g_buf, g_n, &e) == QP_OK, "%s", e.msg);
    }
    d = copy();
    d[g_n - 20] ^= 1; /* a data byte */
    EXPECT(d, g_n, QP_ERR_VERIFY, "checksum mismatch");
    d[g_n - 20] ^= 1;
    memcpy(d + g_n - 16, "CSUX", 4);
    EXPECT(d, g_n, QP_ERR_CORRUPT, "no CSUM record");
    free(d);

    /* the runtime refuses bullet-core's sample file by tensor name */
    char real[1024];
    qp_test_path(real, sizeof real, qp_test_real_dir(), "bullet/tests_sample_model_tiny_model.bullet");
    if (access(real, R_OK) == 0) {
        qp_err e = {0};
        qp_model *m = NULL;
        QP_CHECK_MSG(qp_model_open(real, NULL, &m, &e) == QP_OK, "%s", e.msg);
        qp_runtime *rt = NULL;
        qp_runtime_opts ro = {.n_threads = 1, .n_ctx = 16, .exact = false};
        if (m) {
            qp_status s = qp_runtime_new(m, &ro, &rt, &e);
            QP_CHECK_MSG(s != QP_OK && strstr(e.msg, "tensor '") != NULL, "%s", e.msg);
            printf("runtime on bullet-core's sample file: %s\n", e.msg);
        }
        qp_runtime_free(rt);
        qp_model_close(m);
    }
    unlink(g_good);
    unlink(g_bad);
    free(g_buf);
    return qp_test_finish();
}
