/* Format detection and the reader registry behind qp_model_open. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "core/model_internal.h"
#include "readers/hf_config.h"
#include "readers/name_map.h"
#include "readers/safetensors_format.h"

typedef qp_status (*reader_fn)(qp_model *, const char *, const qp_open_opts *, qp_err *);

static const struct {
    qp_format format;
    reader_fn read;
} k_readers[] = {
    {QP_FORMAT_SAFETENSORS, qp_safetensors_read},
    {QP_FORMAT_GGUF, qp_gguf_read},
    {QP_FORMAT_LLAMA2C, qp_llama2c_read},
    {QP_FORMAT_RDRR, qp_rdrr_read},
    {QP_FORMAT_TRLM, qp_trlm_read},
    {QP_FORMAT_BULLET, qp_bullet_read},
};

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static qp_format detect_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return QP_FORMAT_UNKNOWN;
    qp_format f = QP_FORMAT_UNKNOWN;
    bool manifest = false, safetensors = false, trlm = false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, "manifest.json") == 0) manifest = true;
        else if (strcmp(de->d_name, "qmodel.tensors") == 0) trlm = true;
        else if (has_suffix(de->d_name, ".safetensors") ||
                 strcmp(de->d_name, "model.safetensors.index.json") == 0)
            safetensors = true;
    }
    closedir(d);
    if (trlm) f = QP_FORMAT_TRLM;
    else if (manifest) f = QP_FORMAT_RDRR;
    else if (safetensors) f = QP_FORMAT_SAFETENSORS;
    return f;
}

static qp_format format_of_head(const char *path, const uint8_t *head, size_t n, uint64_t size) {
    if (n >= 4 && memcmp(head, "GGUF", 4) == 0) return QP_FORMAT_GGUF;
    if (n >= 4 && memcmp(head, "TRLM", 4) == 0) return QP_FORMAT_TRLM;
    if (n >= 9 && head[8] == '{') {
        uint64_t hl = qp_load_u64le(head);
        /* a truncated file too: the reader names where it ends (safetensors.md) */
        if (hl >= 2 && hl <= QP_ST_MAX_HEADER) return QP_FORMAT_SAFETENSORS;
    }
    if (n >= 1 && head[0] == '{' && has_suffix(path, ".bullet")) return QP_FORMAT_BULLET;
    if (qp_llama2c_probe(head, n, size)) return QP_FORMAT_LLAMA2C;
    return QP_FORMAT_UNKNOWN;
}

/* The format of a file (format_of_head of its first bytes). A FIFO, a device or an unreadable
 * file: the error in e (qp_file_read_head refuses them before any read blocks). */
static qp_status detect_file(const char *path, qp_format *out, qp_err *e) {
    uint8_t head[64] = {0};
    size_t n = 0;
    uint64_t size = 0;
    qp_status s = qp_file_read_head(path, head, sizeof head, &n, &size, e);
    *out = s == QP_OK ? format_of_head(path, head, n, size) : QP_FORMAT_UNKNOWN;
    return s;
}

qp_format qp_format_detect(const char *path) {
    qp_format f = QP_FORMAT_UNKNOWN;
    if (qp_path_is_dir(path)) return detect_dir(path);
    (void)detect_file(path, &f, NULL);
    return f;
}

qp_status qp_vocab_read_file(qp_model *m, const char *tp, qp_err *e) {
    if (has_suffix(tp, ".model")) return qp_vocab_read_spm_model(m, tp, e);
    if (!has_suffix(tp, ".json")) return qp_vocab_read_llama2c_bin(m, tp, e);
    /* an HF tokenizer.json, with the tokenizer_config.json beside it when there is one */
    const char *slash = strrchr(tp, '/');
    char *dir = slash ? qp_strndup(tp, (size_t)(slash - tp)) : qp_strdup(".");
    char *cfg = dir ? qp_path_join(dir, "tokenizer_config.json") : NULL;
    qp_free(dir);
    if (!cfg) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", tp);
    qp_status s = qp_hf_tokenizer_read(m, tp, qp_path_exists(cfg) ? cfg : NULL, e);
    qp_free(cfg);
    return s;
}

/* --tokenizer for a model whose reader found none (a GGUF, TRLM or .bullet written without
 * one): the file, which must have as many tokens as the embedding has rows. */
static qp_status tokenizer_for(qp_model *m, const char *tp, qp_err *e) {
    qp_status s = qp_vocab_read_file(m, tp, e);
    if (s != QP_OK) return s;
    const qp_tensor *emb = qp_model_find(m, "token_embd.weight");
    int64_t rows = m->arch.vocab > 0 ? m->arch.vocab : emb ? emb->ne[1] : 0;
    if (rows > 0 && m->vocab.n_tokens != rows)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tokenizer has %lld tokens but %s has a vocabulary "
                       "of %lld", tp, (long long)m->vocab.n_tokens, m->path, (long long)rows);
    return QP_OK;
}

qp_status qp_model_open(const char *path, const qp_open_opts *opts, qp_model **out, qp_err *e) {
    static const qp_open_opts k_default = {0};
    if (!path || !out) return qp_fail(e, QP_ERR_ARG, "qp_model_open: NULL argument");
    if (!opts) opts = &k_default;
    qp_status s0;
    if (!qp_path_exists(path)) return qp_fail(e, QP_ERR_IO, "%s: no such file or directory", path);
    qp_format f = QP_FORMAT_UNKNOWN;
    if (qp_path_is_dir(path)) f = detect_dir(path);
    else if ((s0 = detect_file(path, &f, e)) != QP_OK) return s0; /* a FIFO or a device: refused */
    for (size_t i = 0; i < sizeof k_readers / sizeof k_readers[0]; i++) {
        if (k_readers[i].format != f) continue;
        qp_model *m;
        qp_status s = qp_model_new(f, path, &m, e);
        if (s != QP_OK) return s;
        s = k_readers[i].read(m, path, opts, e);
        if (s == QP_OK) s = qp_name_map_family(m, e);
        if (s == QP_OK) s = qp_model_finish(m, e);
        if (s == QP_OK && opts->tokenizer_path && m->vocab.n_tokens <= 0)
            s = tokenizer_for(m, opts->tokenizer_path, e);
        if (s != QP_OK) {
            qp_model_close(m);
            return s;
        }
        *out = m;
        return QP_OK;
    }
    if (f == QP_FORMAT_UNKNOWN)
        return qp_fail(e, QP_ERR_FORMAT, "%s: not a recognised model (expected safetensors, GGUF, "
                                         "llama2.c, TRLM, RDRR or .bullet)", path);
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: %s models cannot be read yet", path, qp_format_name(f));
}

/* A bare tokenizer.json: a model holding only its vocabulary. */
qp_status qp_model_open_tokenizer_json(const char *path, qp_model **out, qp_err *e) {
    if (!path || !out) return qp_fail(e, QP_ERR_ARG, "qp_model_open_tokenizer_json: NULL argument");
    qp_model *m = NULL;
    qp_status s = qp_model_new(QP_FORMAT_UNKNOWN, path, &m, e);
    if (s != QP_OK) return s;
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) : 1;
    char *dir = qp_strndup(slash ? path : ".", dir_len);
    char *cfg = dir ? qp_path_join(dir, "tokenizer_config.json") : NULL;
    if (!dir || !cfg) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = qp_hf_tokenizer_read(m, path, qp_path_exists(cfg) ? cfg : NULL, e);
    qp_free(dir);
    qp_free(cfg);
    if (s != QP_OK) {
        qp_model_close(m);
        return s;
    }
    *out = m;
    return QP_OK;
}
