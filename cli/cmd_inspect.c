/* quantpack inspect PATH [--json] [--tokenizer FILE]: architecture, tokenizer, tensors, totals,
 * metadata and problems of any supported model. The --json shape is documented in
 * cli/inspect-json.md and is stable (fields are only ever added). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <string.h>

#include "cli/cli.h"
#include "readers/model_check.h"

static const char *const k_meta_type_names[QP_META_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
static const char *const k_tok_names[] = {"none", "llama", "gpt2", "bert", "t5"};
static const char *const k_rope_names[] = {"norm", "neox"};

static const char *meta_type_name(qp_meta_type t) {
    return (unsigned)t < QP_META_TYPE_COUNT ? k_meta_type_names[t] : "unknown";
}

static const char *enc_name(qp_encoding e) {
    const qp_encoding_traits *t = qp_encoding_get(e);
    return t ? t->upper_name : "UNKNOWN";
}

/* A double printed with 17 significant digits so it parses back to the same bits (cJSON's own
 * printer keeps 15 when they compare equal within an epsilon); non-finite values become null. */
static cJSON *json_number_exact(double d) {
    if (d != d || d - d != 0) return cJSON_CreateNull();
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", d);
    return cJSON_CreateRaw(buf);
}

static cJSON *meta_value_json(const qp_meta *m) {
    switch (m->type) {
    case QP_META_U8: case QP_META_U16: case QP_META_U32: case QP_META_U64:
        return cJSON_CreateNumber((double)m->v.u);
    case QP_META_I8: case QP_META_I16: case QP_META_I32: case QP_META_I64:
        return cJSON_CreateNumber((double)m->v.i);
    case QP_META_F32: case QP_META_F64: return json_number_exact(m->v.f);
    case QP_META_BOOL: return cJSON_CreateBool(m->v.b);
    case QP_META_STRING: return cJSON_CreateString(m->str ? m->str : "");
    default: return cJSON_CreateNull();
    }
}

/* The first elements of an array value, decoded from the GGUF element bytes in md->raw (at most
 * `max`); strings as JSON strings, 64-bit integers as numbers (exact below 2^53). */
static cJSON *meta_array_head_json(const qp_meta *md, uint64_t max) {
    static const size_t k_elem_size[QP_META_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    cJSON *arr = cJSON_CreateArray();
    size_t pos = 0;
    for (uint64_t i = 0; arr && md->raw && i < md->n && i < max; i++) {
        const uint8_t *p = md->raw + pos;
        size_t left = md->raw_size - pos, es = (unsigned)md->arr_type < QP_META_TYPE_COUNT ? k_elem_size[md->arr_type] : 0;
        cJSON *v = NULL;
        if (md->arr_type == QP_META_STRING) {
            if (left < 8 || qp_load_u64le(p) > left - 8) break;
            size_t len = (size_t)qp_load_u64le(p);
            char *s = qp_strndup((const char *)p + 8, len);
            if (!s) break;
            v = cJSON_CreateString(s);
            qp_free(s);
            es = 8 + len;
        } else if (es == 0 || left < es) {
            break;
        } else {
            switch (md->arr_type) {
            case QP_META_U8: v = cJSON_CreateNumber(p[0]); break;
            case QP_META_I8: v = cJSON_CreateNumber((int8_t)p[0]); break;
            case QP_META_U16: v = cJSON_CreateNumber(qp_load_u16le(p)); break;
            case QP_META_I16: v = cJSON_CreateNumber((int16_t)qp_load_u16le(p)); break;
            case QP_META_U32: v = cJSON_CreateNumber(qp_load_u32le(p)); break;
            case QP_META_I32: v = cJSON_CreateNumber((int32_t)qp_load_u32le(p)); break;
            case QP_META_F32: v = json_number_exact(qp_load_f32le(p)); break;
            case QP_META_BOOL: v = cJSON_CreateBool(p[0] != 0); break;
            case QP_META_U64: v = cJSON_CreateNumber((double)qp_load_u64le(p)); break;
            case QP_META_I64: v = cJSON_CreateNumber((double)(int64_t)qp_load_u64le(p)); break;
            case QP_META_F64: v = json_number_exact(qp_load_f64le(p)); break;
            default: break;
            }
        }
        if (!v) break;
        cJSON_AddItemToArray(arr, v);
        pos += es;
    }
    return arr;
}

static void print_meta_value(const qp_meta *m) {
    switch (m->type) {
    case QP_META_U8: case QP_META_U16: case QP_META_U32: case QP_META_U64:
        printf("%" PRIu64, m->v.u);
        break;
    case QP_META_I8: case QP_META_I16: case QP_META_I32: case QP_META_I64:
        printf("%" PRId64, m->v.i);
        break;
    case QP_META_F32: case QP_META_F64: printf("%.9g", m->v.f); break;
    case QP_META_BOOL: printf("%s", m->v.b ? "true" : "false"); break;
    case QP_META_STRING: {
        uint64_t n = m->str_len > 80 ? 80 : m->str_len;
        putchar('"');
        for (uint64_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)m->str[i];
            if (c < 32 || c == 127) printf("\\x%02x", c);
            else putchar(c);
        }
        printf("\"%s", m->str_len > 80 ? "..." : "");
        break;
    }
    case QP_META_ARRAY:
        printf("[%s x %" PRIu64 "]", meta_type_name(m->arr_type), m->n);
        break;
    default: printf("?"); break;
    }
}

static void shape_string(const qp_tensor *t, char *buf, size_t n) {
    /* outermost first, as PyTorch prints shapes: [rows, cols] */
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = t->n_dims - 1; i >= 0 && k < n; i--)
        k += (size_t)snprintf(buf + k, n - k, "%" PRId64 "%s", t->ne[i], i ? ", " : "");
    if (k < n) snprintf(buf + k, n - k, "]");
}

typedef struct totals {
    uint64_t bytes;
    int64_t params;
    int64_t count_by_enc[QP_ENC_COUNT];
} totals;

static void compute_totals(const qp_model *m, totals *t) {
    memset(t, 0, sizeof *t);
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *x = &m->tensors[i];
        t->bytes += x->nbytes;
        t->params += qp_tensor_nelements(x);
        qp_encoding xe = qp_tensor_stored_enc(x);
        if ((unsigned)xe < QP_ENC_COUNT) t->count_by_enc[xe]++;
    }
}

/* Findings of inspect itself, after the reader's problems: a model without a tokenizer, tensors
 * holding NaN/Inf (readers/model_check.h; one pass over the bytes, float tensors and block scales
 * only). At most QP_INSPECT_MAX_FINDINGS lines, then a count of the rest. */
#define QP_INSPECT_MAX_FINDINGS 16
typedef struct findings {
    char *line[QP_INSPECT_MAX_FINDINGS + 1];
    int n;
    int64_t more;
} findings;

static void add_line(findings *f, const char *text) {
    size_t n = strlen(text) + 1;
    char *c = qp_malloc(n);
    if (!c) return;
    memcpy(c, text, n);
    f->line[f->n++] = c;
}

static void collect_findings(const qp_model *m, findings *f) {
    memset(f, 0, sizeof *f);
    if (m->vocab.n_tokens <= 0)
        add_line(f, "no tokenizer: run, tokenize and converted outputs need one (--tokenizer FILE)");
    for (int64_t i = 0; i < m->n_tensors; i++) {
        qp_err e = {0};
        if (qp_tensor_check_values(m, &m->tensors[i], &e) == QP_OK) continue;
        if (f->n < QP_INSPECT_MAX_FINDINGS) add_line(f, e.msg);
        else f->more++;
    }
    if (f->more > 0) {
        char buf[96];
        snprintf(buf, sizeof buf, "... and %lld more tensors with non-finite values", (long long)f->more);
        add_line(f, buf);
    }
}

static void free_findings(findings *f) {
    for (int i = 0; i < f->n; i++) qp_free(f->line[i]);
}

static int print_json(const qp_model *m, const findings *f) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "schema_version", 1);
    cJSON_AddStringToObject(root, "path", m->path ? m->path : "");
    cJSON_AddStringToObject(root, "format", qp_format_name(m->format));
    cJSON_AddNumberToObject(root, "format_version", m->format_version);

    const qp_arch *a = &m->arch;
    cJSON *ja = cJSON_AddObjectToObject(root, "architecture");
    cJSON_AddStringToObject(ja, "name", m->arch_name ? m->arch_name : "");
    cJSON_AddStringToObject(ja, "family", qp_family_name(a->family));
    cJSON_AddNumberToObject(ja, "hidden", (double)a->hidden);
    cJSON_AddNumberToObject(ja, "intermediate", (double)a->intermediate);
    cJSON_AddNumberToObject(ja, "n_layers", (double)a->n_layers);
    cJSON_AddNumberToObject(ja, "n_heads", (double)a->n_heads);
    cJSON_AddNumberToObject(ja, "n_kv_heads", (double)a->n_kv_heads);
    cJSON_AddNumberToObject(ja, "head_dim", (double)a->head_dim);
    cJSON_AddNumberToObject(ja, "vocab", (double)a->vocab);
    cJSON_AddNumberToObject(ja, "max_pos", (double)a->max_pos);
    cJSON_AddNumberToObject(ja, "norm_eps", a->norm_eps);
    cJSON_AddNumberToObject(ja, "rope_theta", a->rope_theta);
    cJSON_AddStringToObject(ja, "rope_style", k_rope_names[a->rope_style & 1]);
    cJSON_AddBoolToObject(ja, "tie_embeddings", a->tie_embeddings);
    cJSON_AddBoolToObject(ja, "qkv_bias", a->qkv_bias);
    cJSON_AddBoolToObject(ja, "sub_norms", a->sub_norms);
    cJSON_AddNumberToObject(ja, "n_experts", (double)a->n_experts);
    cJSON_AddNumberToObject(ja, "n_experts_used", (double)a->n_experts_used);
    cJSON_AddStringToObject(ja, "activation", qp_act_name(a->act));
    cJSON_AddStringToObject(ja, "activation_quant", a->act_int8 ? "int8_per_token" : "none");
    cJSON_AddNumberToObject(ja, "bos_id", a->bos_id);
    cJSON_AddNumberToObject(ja, "eos_id", a->eos_id);

    const qp_vocab *v = &m->vocab;
    cJSON *jv = cJSON_AddObjectToObject(root, "tokenizer");
    cJSON_AddStringToObject(jv, "model", (unsigned)v->model < sizeof k_tok_names / sizeof k_tok_names[0] ? k_tok_names[v->model] : "unknown");
    cJSON_AddStringToObject(jv, "pre", v->pre);
    cJSON_AddNumberToObject(jv, "n_tokens", (double)v->n_tokens);
    cJSON_AddNumberToObject(jv, "n_merges", (double)v->n_merges);
    cJSON_AddNumberToObject(jv, "bos_id", v->bos_id);
    cJSON_AddNumberToObject(jv, "eos_id", v->eos_id);
    cJSON_AddNumberToObject(jv, "unk_id", v->unk_id);
    cJSON_AddNumberToObject(jv, "pad_id", v->pad_id);
    cJSON_AddBoolToObject(jv, "add_bos", v->add_bos);
    cJSON_AddBoolToObject(jv, "add_eos", v->add_eos);

    cJSON *jt = cJSON_AddArrayToObject(root, "tensors");
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        if (t->canon) cJSON_AddStringToObject(o, "canonical", t->canon);
        else cJSON_AddNullToObject(o, "canonical");
        cJSON_AddStringToObject(o, "encoding", enc_name(qp_tensor_stored_enc(t)));
        if (t->decoded_copy) cJSON_AddStringToObject(o, "decoded_to", enc_name(t->enc));
        const qp_encoding_traits *tr = qp_encoding_get(qp_tensor_stored_enc(t));
        cJSON_AddNumberToObject(o, "ggml_type", tr ? tr->ggml_type : -1);
        cJSON *ne = cJSON_AddArrayToObject(o, "ne");
        for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(ne, cJSON_CreateNumber((double)t->ne[d]));
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = t->n_dims - 1; d >= 0; d--) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
        cJSON_AddNumberToObject(o, "offset", (double)t->offset);
        cJSON_AddNumberToObject(o, "file", t->file_index);
        cJSON_AddItemToArray(jt, o);
    }

    totals tot;
    compute_totals(m, &tot);
    cJSON *jtot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(jtot, "n_tensors", (double)m->n_tensors);
    cJSON_AddNumberToObject(jtot, "bytes", (double)tot.bytes);
    cJSON_AddNumberToObject(jtot, "params", (double)tot.params);
    cJSON *jenc = cJSON_AddObjectToObject(jtot, "by_encoding");
    for (int i = 0; i < QP_ENC_COUNT; i++)
        if (tot.count_by_enc[i]) cJSON_AddNumberToObject(jenc, enc_name((qp_encoding)i), (double)tot.count_by_enc[i]);

    cJSON *jm = cJSON_AddArrayToObject(root, "metadata");
    for (int64_t i = 0; i < m->n_meta; i++) {
        const qp_meta *md = &m->meta[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "key", md->key);
        cJSON_AddStringToObject(o, "type", meta_type_name(md->type));
        if (md->type == QP_META_ARRAY) {
            cJSON_AddStringToObject(o, "elem_type", meta_type_name(md->arr_type));
            cJSON_AddNumberToObject(o, "count", (double)md->n);
            cJSON_AddItemToObject(o, "head", meta_array_head_json(md, 8));
        } else {
            cJSON_AddItemToObject(o, "value", meta_value_json(md));
        }
        cJSON_AddItemToArray(jm, o);
    }
    cJSON *jp = cJSON_AddArrayToObject(root, "problems");
    for (int64_t i = 0; i < m->n_problems; i++) cJSON_AddItemToArray(jp, cJSON_CreateString(m->problems[i]));
    for (int i = 0; i < f->n; i++) cJSON_AddItemToArray(jp, cJSON_CreateString(f->line[i]));

    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return qp_cli_error(QP_ERR_NOMEM, "out of memory printing JSON");
    puts(text);
    cJSON_free(text);
    return QP_EXIT_OK;
}

static void print_human(const qp_model *m, const findings *f) {
    const qp_arch *a = &m->arch;
    printf("%s: %s", m->path, qp_format_name(m->format));
    if (m->format_version) printf(" v%u", m->format_version);
    printf("\n\narchitecture: %s (family %s)\n", m->arch_name ? m->arch_name : "?", qp_family_name(a->family));
    printf("  hidden %" PRId64 ", intermediate %" PRId64 ", layers %" PRId64 ", heads %" PRId64
           ", kv heads %" PRId64 ", head dim %" PRId64 "\n",
           a->hidden, a->intermediate, a->n_layers, a->n_heads, a->n_kv_heads, a->head_dim);
    printf("  vocab %" PRId64 ", context %" PRId64 ", norm eps %g, rope theta %g (%s)\n", a->vocab,
           a->max_pos, (double)a->norm_eps, (double)a->rope_theta, k_rope_names[a->rope_style & 1]);
    printf("  activation %s (%s activations), tied embeddings %s, qkv bias %s, sub-norms %s, "
           "bos %d, eos %d\n", qp_act_name(a->act), a->act_int8 ? "int8 per-token" : "float",
           a->tie_embeddings ? "yes" : "no",
           a->qkv_bias ? "yes" : "no", a->sub_norms ? "yes" : "no", a->bos_id, a->eos_id);
    if (a->n_experts > 0)
        printf("  mixture of experts: %" PRId64 " experts, %" PRId64 " per token\n", a->n_experts,
               a->n_experts_used);
    const qp_vocab *v = &m->vocab;
    printf("\ntokenizer: %s", (unsigned)v->model < sizeof k_tok_names / sizeof k_tok_names[0] ? k_tok_names[v->model] : "?");
    if (v->pre[0]) printf(" (pre-tokenizer %s)", v->pre);
    printf(", %" PRId64 " tokens, %" PRId64 " merges, bos %d, eos %d, unk %d, pad %d%s%s\n",
           v->n_tokens, v->n_merges, v->bos_id, v->eos_id, v->unk_id, v->pad_id,
           v->add_bos ? ", adds bos" : "", v->add_eos ? ", adds eos" : "");

    printf("\n%-44s %-8s %-22s %12s %14s\n", "tensor", "encoding", "shape", "bytes", "offset");
    for (int64_t i = 0; i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        char shape[96];
        shape_string(t, shape, sizeof shape);
        printf("%-44s %-8s %-22s %12zu %14" PRIu64 "%s%s\n", t->name,
               enc_name(qp_tensor_stored_enc(t)), shape,
               t->nbytes, t->offset, t->canon && strcmp(t->canon, t->name) ? "  -> " : "",
               t->canon && strcmp(t->canon, t->name) ? t->canon : "");
    }
    totals tot;
    compute_totals(m, &tot);
    printf("\ntotal: %" PRId64 " tensors, %" PRId64 " parameters, %" PRIu64 " bytes (", m->n_tensors,
           tot.params, tot.bytes);
    bool first = true;
    for (int i = 0; i < QP_ENC_COUNT; i++) {
        if (!tot.count_by_enc[i]) continue;
        printf("%s%s x%" PRId64, first ? "" : ", ", enc_name((qp_encoding)i), tot.count_by_enc[i]);
        first = false;
    }
    printf(")\n");
    if (m->n_meta) {
        printf("\nmetadata (%" PRId64 " keys):\n", m->n_meta);
        for (int64_t i = 0; i < m->n_meta; i++) {
            printf("  %-48s %-6s ", m->meta[i].key, meta_type_name(m->meta[i].type));
            print_meta_value(&m->meta[i]);
            putchar('\n');
        }
    }
    printf("\nproblems: %s\n", m->n_problems || f->n ? "" : "none");
    for (int64_t i = 0; i < m->n_problems; i++) printf("  - %s\n", m->problems[i]);
    for (int i = 0; i < f->n; i++) printf("  - %s\n", f->line[i]);
}

/* --json on failure: {"error": {"status": "CORRUPT", "message": "...", "exit_code": 3}} on stdout
 * (cli/inspect-json.md), the usual message on stderr, the usual exit code. */
static int json_error(const qp_err *e) {
    int rc = qp_cli_fail(e);
    cJSON *root = cJSON_CreateObject();
    cJSON *je = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(je, "status", qp_status_name(e->status));
    cJSON_AddStringToObject(je, "message", e->msg);
    cJSON_AddNumberToObject(je, "exit_code", rc);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (text) puts(text);
    cJSON_free(text);
    return rc;
}

int qp_cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    bool json = false;
    qp_open_opts opts = {0};
    const qp_cli_opt rows[] = {
        {"--json", NULL, QP_CLI_FLAG, &json, .help = "stable machine-readable output (cli/inspect-json.md)"},
        {"--tokenizer", NULL, QP_CLI_STR, &opts.tokenizer_path, .arg = "FILE",
         .help = "tokenizer for sources without one (llama2.c tokenizer.bin)"},
    };
    const qp_cli_cmd cmd = {
        "inspect",
        "usage: quantpack inspect PATH [--json] [--tokenizer FILE]\n\n"
        "Describes a safetensors file or HF model directory, a GGUF file or a llama2.c\n"
        "checkpoint: architecture, tokenizer, tensor table (name, encoding, shape, bytes,\n"
        "offset), totals, metadata and every problem found. Exits 3 on a bad file.\n",
        NULL, rows, 2, 0, &path, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!path) return qp_cli_usage_error("inspect: no PATH given");
    qp_err e = {0};
    qp_model *m = NULL;
    if (qp_model_open(path, &opts, &m, &e) != QP_OK) return json ? json_error(&e) : qp_cli_fail(&e);
    findings f;
    collect_findings(m, &f);
    rc = json ? print_json(m, &f) : (print_human(m, &f), QP_EXIT_OK);
    free_findings(&f);
    qp_model_close(m);
    return rc == QP_EXIT_OK ? qp_cli_flush_stdout() : rc;
}
