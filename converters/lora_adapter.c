/* PEFT LoRA adapter -> RDRR adapter + DOPPLER standalone adapter manifest
 * (converters/lora_adapter.h, readers/rdrr.md "LoRA"). */
#include "converters/lora_adapter.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "converters/convert_rdrr.h"
#include "core/hash.h"
#include "core/json.h"
#include "quantpack/model.h"

static const char *const k_modules[] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                        "gate_proj", "up_proj", "down_proj"};
#define N_MODULES 7

int qp_lora_is_adapter_dir(const char *dir) {
    if (!qp_path_is_dir(dir)) return 0;
    char *p = qp_path_join(dir, "adapter_config.json");
    int r = p && qp_path_exists(p);
    qp_free(p);
    return r;
}

typedef struct lora_t {
    const qp_tensor *t;
    long layer;
    int module;
    int kind; /* 0 = A, 1 = B */
} lora_t;

/* "...layers.{i}.<...>.<module>.lora_A.weight" -> layer, module, kind. */
static bool parse_name(const char *name, long *layer, int *module, int *kind) {
    const char *p = strstr(name, "layers.");
    if (!p || !isdigit((unsigned char)p[7])) return false;
    char *end;
    *layer = strtol(p + 7, &end, 10);
    if (*end != '.' || *layer < 0 || *layer > 100000) return false;
    const char *k = strstr(end, ".lora_A.weight");
    *kind = 0;
    if (!k) {
        k = strstr(end, ".lora_B.weight");
        *kind = 1;
    }
    if (!k || k[14] != '\0') return false;
    const char *ms = k;
    while (ms > end && ms[-1] != '.') ms--;
    size_t ml = (size_t)(k - ms);
    for (int i = 0; i < N_MODULES; i++)
        if (strlen(k_modules[i]) == ml && strncmp(ms, k_modules[i], ml) == 0) {
            *module = i;
            return true;
        }
    return false;
}

static int cmp_lora(const void *a, const void *b) {
    const lora_t *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->module != y->module) return x->module - y->module;
    return x->kind - y->kind;
}

static const char *base_name(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t len = n - b < cap ? n - b : cap - 1;
    memcpy(buf, path + b, len);
    buf[len] = '\0';
    if (!buf[0]) snprintf(buf, cap, "adapter");
    return buf;
}

static int64_t base_eos(const char *base) {
    if (!base || !qp_path_is_dir(base)) return -1;
    char *p = qp_path_join(base, "config.json");
    char *text = NULL;
    size_t len = 0;
    int64_t r = -1;
    if (p && qp_file_read_all(p, (size_t)16 << 20, &text, &len, NULL) == QP_OK) {
        cJSON *j = cJSON_ParseWithLength(text, len);
        const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_id");
        if (cJSON_IsArray(eos)) eos = cJSON_GetArrayItem(eos, 0);
        if (!qp_json_int(eos, 0, INT32_MAX - 1, &r)) r = -1;
        cJSON_Delete(j);
    }
    qp_free(text);
    qp_free(p);
    return r;
}

/* doppler-gpu 0.5.1 checks architecture.headDim/maxSeqLen even for adapters: the base model's
 * architecture when it can be opened here, else the shape the adapter itself shows (hidden from
 * lora_A, layer count; one head of hiddenSize), documented in readers/rdrr.md. */
static bool add_architecture(cJSON *fields, const char *base, int64_t n_layers, int64_t hidden) {
    qp_model *bm = NULL;
    cJSON *ar = NULL;
    if (base && qp_path_exists(base) && qp_model_open(base, NULL, &bm, NULL) == QP_OK) {
        ar = qp_rdrr_architecture_json(bm);
        qp_model_close(bm);
    }
    if (!ar) {
        ar = cJSON_CreateObject();
        if (!ar || !cJSON_AddNumberToObject(ar, "numLayers", (double)n_layers) ||
            !cJSON_AddNumberToObject(ar, "hiddenSize", (double)hidden) ||
            !cJSON_AddNumberToObject(ar, "numAttentionHeads", 1) ||
            !cJSON_AddNumberToObject(ar, "headDim", (double)hidden) ||
            !cJSON_AddNumberToObject(ar, "maxSeqLen", 2048) ||
            !cJSON_AddBoolToObject(ar, "inferredFromAdapter", true)) {
            cJSON_Delete(ar);
            return false;
        }
    }
    return cJSON_AddItemToObject(fields, "architecture", ar);
}

qp_status qp_lora_convert(const char *peft_dir, const char *out_dir, const qp_lora_opts *o,
                          qp_lora_result *res, qp_err *e) {
    static const qp_lora_opts k_default = {NULL, NULL, -1, {0}};
    if (!o) o = &k_default;
    char *cp = qp_path_join(peft_dir, "adapter_config.json");
    char *wp = qp_path_join(peft_dir, "adapter_model.safetensors");
    char *text = NULL, *wbytes = NULL;
    size_t len = 0, wlen = 0;
    cJSON *cfg = NULL, *fields = NULL, *standalone = NULL;
    qp_model *m = NULL;
    lora_t *lt = NULL;
    qp_rdrr_writer *w = NULL;
    float *f = NULL;
    qp_status s = cp && wp ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", peft_dir);
    if (s == QP_OK) s = qp_file_read_all(cp, (size_t)1 << 20, &text, &len, e);
    if (s == QP_OK && !(cfg = cJSON_ParseWithLength(text, len)))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON", cp);
    const cJSON *rj = cJSON_GetObjectItemCaseSensitive(cfg, "r");
    const cJSON *aj = cJSON_GetObjectItemCaseSensitive(cfg, "lora_alpha");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(cfg, "peft_type");
    int64_t rank = 0;
    double alpha = 0;
    if (s == QP_OK) {
        if (cJSON_IsString(pt) && strcmp(pt->valuestring, "LORA") != 0)
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: peft_type \"%s\" (only LORA)", cp, pt->valuestring);
        else if (!qp_json_int(rj, 1, 1024, &rank))
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: \"r\" must be an integer 1..1024 (DOPPLER's range)", cp);
        else if (!cJSON_IsNumber(aj) || !(aj->valuedouble >= 0.1) || aj->valuedouble > 1e9)
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: \"lora_alpha\" must be a number >= 0.1", cp);
        else
            alpha = aj->valuedouble;
    }
    if (s == QP_OK) s = qp_model_open(wp, NULL, &m, e);
    if (s == QP_OK && m->format != QP_FORMAT_SAFETENSORS)
        s = qp_fail(e, QP_ERR_FORMAT, "%s: not a safetensors file", wp);
    if (s == QP_OK && m->n_tensors == 0) s = qp_fail(e, QP_ERR_CORRUPT, "%s: no tensors", wp);
    if (s == QP_OK && !(lt = qp_calloc((size_t)m->n_tensors, sizeof *lt)))
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", wp);
    bool used[N_MODULES] = {false};
    long max_layer = -1;
    int64_t in_dim = 1;
    for (int64_t i = 0; s == QP_OK && i < m->n_tensors; i++) {
        const qp_tensor *t = &m->tensors[i];
        lora_t *x = &lt[i];
        x->t = t;
        const qp_encoding_traits *tr = qp_encoding_get(t->enc);
        if (!parse_name(t->name, &x->layer, &x->module, &x->kind)) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is not layers.N.<module>.lora_A|B.weight "
                                               "with module q/k/v/o/gate/up/down_proj", wp, t->name);
        } else if (t->n_dims != 2 || !tr || !(tr->flags & QP_ENC_FLAG_FLOAT) || !tr->dequantize) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' must be a 2-D float matrix", wp, t->name);
        } else if ((x->kind == 0 && t->ne[1] != rank) || (x->kind == 1 && t->ne[0] != rank)) {
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' shape [%lld, %lld] does not have rank %lld "
                                           "on the %s axis", wp, t->name, (long long)t->ne[1],
                        (long long)t->ne[0], (long long)rank, x->kind == 0 ? "first" : "second");
        }
        if (s == QP_OK) {
            used[x->module] = true;
            if (x->kind == 0) in_dim = t->ne[0];
            if (x->layer > max_layer) max_layer = x->layer;
        }
    }
    if (s == QP_OK) qsort(lt, (size_t)m->n_tensors, sizeof *lt, cmp_lora);
    for (int64_t i = 1; s == QP_OK && i < m->n_tensors; i++)
        if (cmp_lora(&lt[i - 1], &lt[i]) == 0)
            s = qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' and '%s' are the same LoRA matrix", wp,
                        lt[i - 1].t->name, lt[i].t->name);
    /* Every (layer, module) needs both A and B (DOPPLER refuses incomplete pairs). */
    for (int64_t i = 0; s == QP_OK && i < m->n_tensors; i++) {
        bool pair = lt[i].kind == 0 ? i + 1 < m->n_tensors && lt[i + 1].layer == lt[i].layer &&
                                          lt[i + 1].module == lt[i].module
                                    : i > 0 && lt[i - 1].layer == lt[i].layer && lt[i - 1].module == lt[i].module;
        if (!pair) s = qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' has no lora_%c partner", wp, lt[i].t->name,
                               lt[i].kind == 0 ? 'B' : 'A');
    }
    if (s == QP_OK) s = qp_rdrr_writer_open(out_dir, &o->w, &w, e);
    for (int64_t i = 0; s == QP_OK && i < m->n_tensors; i++) {
        const qp_tensor *t = lt[i].t;
        char name[96];
        snprintf(name, sizeof name, "layers.%ld.%s.lora_%c", lt[i].layer, k_modules[lt[i].module],
                 lt[i].kind ? 'b' : 'a');
        int64_t n = qp_tensor_nelements(t);
        int64_t shape[2] = {t->ne[1], t->ne[0]};
        qp_rdrr_tensor_info ti = {0};
        ti.name = name;
        ti.dtype = "F32";
        ti.n_dims = 2;
        ti.shape = shape;
        ti.size = (uint64_t)n * 4;
        ti.role = "other";
        s = qp_rdrr_writer_begin_tensor(w, &ti, e);
        qp_free(f);
        f = s == QP_OK ? qp_malloc((size_t)n * sizeof *f) : NULL;
        if (s == QP_OK && !f) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", wp);
        if (s == QP_OK) {
            qp_encoding_get(t->enc)->dequantize(t->data, f, n);
            for (int64_t k = 0; k < n; k++) qp_store_f32le((uint8_t *)&f[k], f[k]);
            s = qp_rdrr_writer_write(w, f, (size_t)n * 4, e);
        }
    }
    char nbuf[128], idbuf[128];
    const char *name = o->name ? o->name : base_name(peft_dir, nbuf, sizeof nbuf);
    const cJSON *bm = cJSON_GetObjectItemCaseSensitive(cfg, "base_model_name_or_path");
    const char *base = o->base_model ? o->base_model
                       : cJSON_IsString(bm) && bm->valuestring[0] ? bm->valuestring : "unknown";
    int64_t eos = o->eos_token_id >= 0 ? o->eos_token_id : base_eos(base);
    if (eos < 0) eos = 2;
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < sizeof idbuf; p++)
        idbuf[k++] = isalnum((unsigned char)*p) || *p == '_' || *p == '-' ? *p : '-';
    idbuf[k] = '\0';
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(cfg, "lora_dropout");
    /* The standalone manifest's weights: the PEFT file itself, byte for byte. */
    uint8_t d[QP_SHA256_BYTES];
    char hex[QP_SHA256_HEX];
    if (s == QP_OK) s = qp_file_read_all(wp, (size_t)4 << 30, &wbytes, &wlen, e);
    if (s == QP_OK) s = qp_sha256_once(wbytes, wlen, d, e);
    if (s == QP_OK) s = qp_rdrr_writer_add_file(w, "adapter_model.safetensors", wbytes, wlen, e);
    if (s == QP_OK) {
        qp_hex_encode(d, sizeof d, hex);
        fields = cJSON_CreateObject();
        standalone = cJSON_CreateObject();
        cJSON *lc = NULL, *tm = NULL, *tm2 = NULL, *md = NULL, *inf = qp_rdrr_default_inference();
        bool ok = fields && standalone && inf && cJSON_AddNumberToObject(fields, "version", 1) &&
                  cJSON_AddStringToObject(fields, "modelId", name) &&
                  cJSON_AddStringToObject(fields, "modelType", "lora") &&
                  cJSON_AddStringToObject(fields, "adapterType", "lora") &&
                  cJSON_AddStringToObject(fields, "baseModel", base) &&
                  cJSON_AddStringToObject(fields, "quantization", "F32") &&
                  cJSON_AddStringToObject(fields, "hashAlgorithm", "sha256") &&
                  cJSON_AddNumberToObject(fields, "eos_token_id", (double)eos) &&
                  cJSON_AddItemToObject(fields, "inference", inf) &&
                  add_architecture(fields, base, max_layer + 1, in_dim) &&
                  (lc = cJSON_AddObjectToObject(fields, "loraConfig")) &&
                  cJSON_AddNumberToObject(lc, "rank", (double)rank) &&
                  cJSON_AddNumberToObject(lc, "alpha", alpha) &&
                  cJSON_AddNumberToObject(lc, "scale", alpha / (double)rank) &&
                  (tm = cJSON_AddArrayToObject(lc, "targetModules")) &&
                  (!cJSON_IsNumber(dr) || cJSON_AddNumberToObject(lc, "dropout", dr->valuedouble)) &&
                  cJSON_AddStringToObject(standalone, "id", idbuf) &&
                  cJSON_AddStringToObject(standalone, "name", name) &&
                  cJSON_AddStringToObject(standalone, "version", "1.0.0") &&
                  cJSON_AddStringToObject(standalone, "baseModel", base) &&
                  cJSON_AddNumberToObject(standalone, "rank", (double)rank) &&
                  cJSON_AddNumberToObject(standalone, "alpha", alpha) &&
                  (tm2 = cJSON_AddArrayToObject(standalone, "targetModules")) &&
                  cJSON_AddStringToObject(standalone, "checksum", hex) &&
                  cJSON_AddStringToObject(standalone, "checksumAlgorithm", "sha256") &&
                  cJSON_AddStringToObject(standalone, "weightsFormat", "safetensors") &&
                  cJSON_AddStringToObject(standalone, "weightsPath", "adapter_model.safetensors") &&
                  cJSON_AddNumberToObject(standalone, "weightsSize", (double)wlen) &&
                  (md = cJSON_AddObjectToObject(standalone, "metadata")) &&
                  cJSON_AddStringToObject(md, "source", "peft") &&
                  cJSON_AddStringToObject(md, "rdrrManifest", "manifest.json");
        if (!ok && inf && !cJSON_GetObjectItemCaseSensitive(fields, "inference")) cJSON_Delete(inf);
        for (int i = 0; ok && i < N_MODULES; i++)
            if (used[i])
                ok = cJSON_AddItemToArray(tm, cJSON_CreateString(k_modules[i])) &&
                     cJSON_AddItemToArray(tm2, cJSON_CreateString(k_modules[i]));
        char *st = ok ? cJSON_Print(standalone) : NULL;
        if (!st) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", out_dir);
        else s = qp_rdrr_writer_add_file(w, QP_LORA_STANDALONE_FILE, st, strlen(st), e);
        if (st) cJSON_free(st);
    }
    if (s == QP_OK) {
        qp_rdrr_writer *ww = w;
        w = NULL;
        s = qp_rdrr_writer_finish(ww, fields, e);
        fields = NULL;
    }
    if (s == QP_OK && res) {
        res->n_tensors = m->n_tensors;
        res->rank = rank;
        res->alpha = alpha;
        res->n_layers = max_layer + 1;
    }
    qp_rdrr_writer_abort(w);
    cJSON_Delete(fields);
    cJSON_Delete(standalone);
    cJSON_Delete(cfg);
    qp_model_close(m);
    qp_free(f);
    qp_free(lt);
    qp_free(text);
    qp_free(wbytes);
    qp_free(cp);
    qp_free(wp);
    return s;
}
