/* quantpack encode / decode: raw little-endian f32 rows <-> encoded rows exactly as they sit in a
 * GGUF tensor (I2_S / I2_S_ARM with their 32-byte trailer), through the encodings traits table.
 *
 *   quantpack encode --type NAME --cols N IN.f32 OUT
 *   quantpack decode --type NAME --cols N IN OUT.f32
 *   quantpack encode --list
 *
 * Output goes to a temporary name and is renamed on success (qp_outfile). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void list_encodings(void) {
    printf("%-12s %-12s %6s %6s %7s %5s  %-8s %-10s %-7s %-7s\n", "name", "gguf-name", "block",
           "bytes", "bpw", "ggml", "quantize", "dequantize", "vec_dot", "dot_i8");
    for (int i = 0; i < QP_ENC_COUNT; i++) {
        const qp_encoding_traits *t = qp_encoding_get((qp_encoding)i);
        if (!t) continue;
        char ggml[16];
        if (t->ggml_type >= 0) snprintf(ggml, sizeof ggml, "%d", t->ggml_type);
        else snprintf(ggml, sizeof ggml, "-");
        const bool q = t->quantize_ref || t->quantize_tensor;
        const bool d = t->dequantize_tensor || (t->dequantize && !(t->flags & QP_ENC_FLAG_EXT_SCALE));
        printf("%-12s %-12s %6lld %6zu %7.4f %5s  %-8s %-10s %-7s %-7s\n", t->name, t->upper_name,
               (long long)t->block_elems, t->block_bytes,
               8.0 * (double)t->block_bytes / (double)t->block_elems, ggml, q ? "yes" : "no",
               d ? "yes" : (t->dequantize ? "unit" : "no"), t->vec_dot_f32 ? "yes" : "no",
               t->vec_dot_i8 ? "yes" : "no");
    }
    printf("\n\"unit\": codes decode at unit scale; the scale lives in a sibling tensor.\n"
           "SIMD kernels in use: %s (QP_FORCE_SCALAR=1 forces scalar)\n", qp_encoding_simd_level());
}

typedef struct {
    const char *type;
    int64_t cols;
    const char *in, *out;
} enc_args;

static int run(int argc, char **argv, bool decode) {
    enc_args a = {.cols = -1};
    bool list = false, force = false;
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    const qp_cli_opt opts[] = {
        {"--type", NULL, QP_CLI_STR, &a.type, .arg = "NAME", .help = "encoding (encode --list)"},
        {"--cols", NULL, QP_CLI_I64, &a.cols, .lo = 1, .hi = INT64_MAX, .arg = "N",
         .help = "columns per row (a multiple of the encoding's block)"},
        {"--force", "-f", QP_CLI_FLAG, &force, .help = "replace an existing OUT (never the input)"},
        {"--list", NULL, QP_CLI_FLAG, &list, .help = "encode: print every encoding and its facts"},
    };
    const qp_cli_cmd cmd = {
        decode ? "decode" : "encode",
        "usage: quantpack encode --type NAME --cols N IN.f32 OUT\n"
        "       quantpack decode --type NAME --cols N IN OUT.f32\n"
        "       quantpack encode --list\n\n"
        "IN.f32 / OUT.f32 are raw little-endian float32 rows of N columns. Encoded output is\n"
        "the tensor bytes as stored in GGUF (I2_S appends its 32-byte scale trailer).\n"
        "N must be a multiple of the encoding's block; the input must hold whole rows.\n",
        NULL, opts, decode ? 3 : 4, 0, pos, 2, &n_pos, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (list) {
        list_encodings();
        return qp_cli_flush_stdout();
    }
    if (!a.type) return qp_cli_usage_error("%s: --type NAME is required (encode --list)", cmd.name);
    if (a.cols < 0) return qp_cli_usage_error("%s: --cols N is required", cmd.name);
    if (n_pos != 2) return qp_cli_usage_error("%s: wants an input and an output path", cmd.name);
    a.in = pos[0];
    a.out = pos[1];
    if ((rc = qp_cli_prepare_output(a.out, force, NULL, &a.in, 1)) != QP_EXIT_OK) return rc;
    const qp_encoding enc = qp_encoding_from_name(a.type);
    const qp_encoding_traits *t = qp_encoding_get(enc);
    if (!t) return qp_cli_usage_error("unknown encoding '%s' (see quantpack encode --list)", a.type);
    if (a.cols % t->block_elems != 0)
        return qp_cli_usage_error("--cols %lld is not a multiple of %s's block of %lld elements",
                                  (long long)a.cols, t->name, (long long)t->block_elems);
    const bool can_q = t->quantize_tensor || t->quantize;
    const bool can_d = t->dequantize_tensor || (t->dequantize && !(t->flags & QP_ENC_FLAG_EXT_SCALE));
    qp_err e;
    qp_err_clear(&e);
    if (decode ? !can_d : !can_q) {
        qp_fail(&e, QP_ERR_UNSUPPORTED, "%s: quantpack cannot %s this encoding%s", t->name,
                decode ? "decode" : "encode",
                (t->flags & QP_ENC_FLAG_EXT_SCALE) ? " on its own (its scales live in a sibling tensor)" : "");
        return qp_cli_fail(&e);
    }
    size_t row_bytes = 0;
    if (!qp_encoding_row_bytes(enc, (int64_t)a.cols, &row_bytes)) {
        qp_fail(&e, QP_ERR_LIMIT, "--cols %lld is too large", (long long)a.cols);
        return qp_cli_fail(&e);
    }
    qp_mapped_file in = {0};
    if (qp_file_map(a.in, &in, &e) != QP_OK) return qp_cli_fail(&e);
    const size_t in_row = decode ? row_bytes : (size_t)a.cols * 4;
    const size_t trailer = decode ? t->tensor_trailer_bytes : 0;
    int64_t rows = 0;
    if (in.size < trailer || (in.size - trailer) % in_row != 0 || in.size == trailer) {
        qp_fail(&e, QP_ERR_CORRUPT,
                "%s: %zu bytes is not a whole number of %s rows of %lld columns (%zu bytes each%s)",
                a.in, in.size, decode ? t->name : "f32", (long long)a.cols, in_row,
                trailer ? " plus a 32-byte trailer" : "");
        qp_file_unmap(&in);
        return qp_cli_fail(&e);
    }
    rows = (int64_t)((in.size - trailer) / in_row);
    const int64_t n = rows * (int64_t)a.cols;
    size_t out_bytes = 0;
    bool ok = decode ? qp_size_mul((size_t)n, 4, &out_bytes) : qp_encoding_tensor_bytes(enc, n, &out_bytes);
    float *x = NULL;
    uint8_t *buf = NULL;
    if (ok) {
        x = qp_malloc((size_t)n * sizeof(float));
        buf = qp_malloc(out_bytes ? out_bytes : 1);
    }
    if (!ok || !x || !buf) {
        qp_free(x);
        qp_free(buf);
        qp_file_unmap(&in);
        qp_fail(&e, QP_ERR_NOMEM, "%s: cannot hold %lld elements in memory", a.in, (long long)n);
        return qp_cli_fail(&e);
    }
    qp_status s = QP_OK;
    if (decode) {
        char why[256] = "";
        if (t->validate && !t->validate(in.data, n, why, sizeof why)) {
            s = qp_fail(&e, QP_ERR_CORRUPT, "%s: bad %s data: %s", a.in, t->name, why);
        } else {
            qp_encoding_dequantize_tensor(enc, in.data, x, n);
            for (int64_t i = 0; i < n; i++) qp_store_f32le(buf + 4 * i, x[i]);
        }
    } else {
        for (int64_t i = 0; i < n; i++) x[i] = qp_load_f32le(in.data + 4 * i);
        if (t->quantize_tensor) {
            t->quantize_tensor(x, buf, n);
        } else {
            for (int64_t r = 0; r < rows; r++)
                t->quantize(x + r * a.cols, buf + (size_t)r * row_bytes, (int64_t)a.cols);
        }
    }
    qp_file_unmap(&in);
    qp_free(x);
    if (s == QP_OK) s = qp_file_write_atomic(a.out, buf, out_bytes, &e);
    qp_free(buf);
    if (s != QP_OK) return qp_cli_fail(&e);
    fprintf(stderr, "quantpack: %s %lld rows x %lld cols as %s: %zu bytes -> %s\n",
            decode ? "decoded" : "encoded", (long long)rows, (long long)a.cols, t->name, out_bytes, a.out);
    return QP_EXIT_OK;
}

int qp_cmd_encode(int argc, char **argv) { return run(argc, argv, false); }
int qp_cmd_decode(int argc, char **argv) { return run(argc, argv, true); }
