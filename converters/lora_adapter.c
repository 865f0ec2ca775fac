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

bool qp_lora_is_adapter_dir(const char *dir) {
    if (!qp_path_is_dir(dir)) return false;
    char *p = qp_path_join(dir, "adapter_config.json");
    bool r = p && qp_path_exists(p);
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

/* One conversion: the PEFT folder's config and weights, checked and sorted. */
typedef struct lora_conv {
    const char *peft_dir;
    char *cp, *wp;          /* adapter_config.json, adapter_model.safetensors */
    cJSON *cfg;
    int64_t rank;
    double alpha;
    qp_model *m;
    lora_t *lt;             /* one per tensor, sorted by layer, module, A/B */
    bool used[N_MODULES];   /* modules with at least one matrix */
    long max_layer;
    int64_t in_dim;         /* columns of lora_A: the base hidden size */
} lora_conv;

/* adapter_config.json: LORA, an integer rank 1..1024 and lora_alpha >= 0.1 (DOPPLER's ranges). */
static qp_status read_config(lora_conv *c, qp_err *e) {
    char *text = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(c->cp, (size_t)1 << 20, &text, &len, e);
    if (s == QP_OK && !(c->cfg = cJSON_ParseWithLength(text, len)))
        s = qp_fail(e, QP_ERR_CORRUPT, "%s: not valid JSON", c->cp);
    qp_free(text);
    if (s != QP_OK) return s;
    const cJSON *rj = cJSON_GetObjectItemCaseSensitive(c->cfg, "r");
    const cJSON *aj = cJSON_GetObjectItemCaseSensitive(c->cfg, "lora_alpha");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(c->cfg, "peft_type");
    if (cJSON_IsString(pt) && strcmp(pt->valuestring, "LORA") != 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: peft_type \"%s\" (only LORA)", c->cp,
                       pt->valuestring);
    if (!qp_json_int(rj, 1, 1024, &c->rank))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: \"r\" must be an integer 1..1024 (DOPPLER's range)",
                       c->cp);
    if (!cJSON_IsNumber(aj) || !(aj->valuedouble >= 0.1) || aj->valuedouble > 1e9)
        return qp_fail(e, QP_ERR_CORRUPT, "%s: \"lora_alpha\" must be a number >= 0.1", c->cp);
    c->alpha = aj->valuedouble;
    return QP_OK;
}

/* One weight: a layers.N.<module>.lora_A|B.weight name, a 2-D float matrix, the rank on the
 * right axis. */
static qp_status classify(lora_conv *c, const qp_tensor *t, lora_t *x, qp_err *e) {
    x->t = t;
    const qp_encoding_traits *tr = qp_encoding_get(t->enc);
    if (!parse_name(t->name, &x->layer, &x->module, &x->kind))
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' is not layers.N.<module>.lora_A|B."
                       "weight with module q/k/v/o/gate/up/down_proj", c->wp, t->name);
    if (t->n_dims != 2 || !tr || !(tr->flags & QP_ENC_FLAG_FLOAT) || !tr->dequantize)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s' must be a 2-D float matrix", c->wp,
                       t->name);
    if ((x->kind == 0 && t->ne[1] != c->rank) || (x->kind == 1 && t->ne[0] != c->rank))
        return qp_fail(e, QP_ERR_CORRUPT, "%s: tensor '%s' shape [%lld, %lld] does not have rank "
                       "%lld on the %s axis", c->wp, t->name, (long long)t->ne[1],
                       (long long)t->ne[0], (long long)c->rank, x->kind == 0 ? "first" : "second");
    c->used[x->module] = true;
    if (x->kind == 0) c->in_dim = t->ne[0];
    if (x->layer > c->max_layer) c->max_layer = x->layer;
    return QP_OK;
}

/* adapter_model.safetensors: every tensor classified, no matrix twice, every A with its B
 * (DOPPLER refuses incomplete pairs). */
static qp_status read_weights(lora_conv *c, qp_err *e) {
    qp_status s = qp_model_open(c->wp, NULL, &c->m, e);
    if (s != QP_OK) return s;
    const qp_model *m = c->m;
    if (m->format != QP_FORMAT_SAFETENSORS)
        return qp_fail(e, QP_ERR_FORMAT, "%s: not a safetensors file", c->wp);
    if (m->n_tensors == 0) return qp_fail(e, QP_ERR_CORRUPT, "%s: no tensors", c->wp);
    if (!(c->lt = qp_calloc((size_t)m->n_tensors, sizeof *c->lt)))
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", c->wp);
    for (int64_t i = 0; i < m->n_tensors; i++)
        if ((s = classify(c, &m->tensors[i], &c->lt[i], e)) != QP_OK) return s;
    const lora_t *lt = c->lt;
    int64_t n = m->n_tensors;
    qsort(c->lt, (size_t)n, sizeof *c->lt, cmp_lora);
    for (int64_t i = 1; i < n; i++)
        if (cmp_lora(&lt[i - 1], &lt[i]) == 0)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' and '%s' are the same LoRA matrix", c->wp,
                           lt[i - 1].t->name, lt[i].t->name);
    for (int64_t i = 0; i < n; i++) {
        const lora_t *y = lt[i].kind == 0 ? (i + 1 < n ? &lt[i + 1] : NULL)
                                          : (i > 0 ? &lt[i - 1] : NULL);
        if (!y || y->layer != lt[i].layer || y->module != lt[i].module)
            return qp_fail(e, QP_ERR_CORRUPT, "%s: '%s' has no lora_%c partner", c->wp,
                           lt[i].t->name, lt[i].kind == 0 ? 'B' : 'A');
    }
    return QP_OK;
}

/* The matrices as F32 RDRR tensors "layers.N.<module>.lora_a|b" in sorted order. */
static qp_status write_matrices(const lora_conv *c, qp_rdrr_writer *w, qp_err *e) {
    float *f = NULL;
    qp_status s = QP_OK;
    for (int64_t i = 0; s == QP_OK && i < c->m->n_tensors; i++) {
        const qp_tensor *t = c->lt[i].t;
        char name[96];
        const lora_t *x = &c->lt[i];
        snprintf(name, sizeof name, "layers.%ld.%s.lora_%c", x->layer, k_modules[x->module],
                 x->kind ? 'b' : 'a');
        int64_t n = qp_tensor_nelements(t);
        int64_t shape[2] = {t->ne[1], t->ne[0]};
        qp_rdrr_tensor_info ti = {0};
        ti.name = name;
        ti.dtype = "F32";
        ti.n_dims = 2;
        ti.shape = shape;
        ti.size = (uint64_t)n * 4;
        ti.role = "other";
        if ((s = qp_rdrr_writer_begin_tensor(w, &ti, e)) != QP_OK) break;
        qp_free(f);
        if (!(f = qp_malloc((size_t)n * sizeof *f))) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", c->wp);
            break;
        }
        qp_encoding_get(t->enc)->dequantize(t->data, f, n);
        for (int64_t k = 0; k < n; k++) qp_store_f32le((uint8_t *)&f[k], f[k]);
        s = qp_rdrr_writer_write(w, f, (size_t)n * 4, e);
    }
    qp_free(f);
    return s;
}

/* Names the outputs carry: the adapter's name and id, its base model and the EOS id. */
typedef struct lora_ident {
    char nbuf[128], id[128];
    const char *name, *base;
    int64_t eos;
} lora_ident;

static void lora_identify(const lora_conv *c, const qp_lora_opts *o, lora_ident *d) {
    d->name = o->name ? o->name : base_name(c->peft_dir, d->nbuf, sizeof d->nbuf);
    const cJSON *bm = cJSON_GetObjectItemCaseSensitive(c->cfg, "base_model_name_or_path");
    d->base = o->base_model ? o->base_model
              : cJSON_IsString(bm) && bm->valuestring[0] ? bm->valuestring : "unknown";
    d->eos = o->eos_token_id >= 0 ? o->eos_token_id : base_eos(d->base);
    if (d->eos < 0) d->eos = 2;
    size_t k = 0;
    for (const char *p = d->name; *p && k + 1 < sizeof d->id; p++)
        d->id[k++] = isalnum((unsigned char)*p) || *p == '_' || *p == '-' ? *p : '-';
    d->id[k] = '\0';
}

static bool add_modules(cJSON *arr, const bool used[N_MODULES]) {
    for (int i = 0; i < N_MODULES; i++)
        if (used[i] && !cJSON_AddItemToArray(arr, cJSON_CreateString(k_modules[i]))) return false;
    return true;
}

/* The RDRR manifest's adapter fields (rdrr.md "LoRA"). */
static bool lora_fields(cJSON *fields, const lora_conv *c, const lora_ident *d) {
    cJSON *inf = qp_rdrr_default_inference(), *lc, *tm;
    bool ok = inf && cJSON_AddNumberToObject(fields, "version", 1) &&
              cJSON_AddStringToObject(fields, "modelId", d->name) &&
              cJSON_AddStringToObject(fields, "modelType", "lora") &&
              cJSON_AddStringToObject(fields, "adapterType", "lora") &&
              cJSON_AddStringToObject(fields, "baseModel", d->base) &&
              cJSON_AddStringToObject(fields, "quantization", "F32") &&
              cJSON_AddStringToObject(fields, "hashAlgorithm", "sha256") &&
              cJSON_AddNumberToObject(fields, "eos_token_id", (double)d->eos);
    if (!ok || !cJSON_AddItemToObject(fields, "inference", inf)) {
        cJSON_Delete(inf);
        return false;
    }
    const cJSON *dr = cJSON_GetObjectItemCaseSensitive(c->cfg, "lora_dropout");
    return add_architecture(fields, d->base, c->max_layer + 1, c->in_dim) &&
           (lc = cJSON_AddObjectToObject(fields, "loraConfig")) &&
           cJSON_AddNumberToObject(lc, "rank", (double)c->rank) &&
           cJSON_AddNumberToObject(lc, "alpha", c->alpha) &&
           cJSON_AddNumberToObject(lc, "scale", c->alpha / (double)c->rank) &&
           (tm = cJSON_AddArrayToObject(lc, "targetModules")) && add_modules(tm, c->used) &&
           (!cJSON_IsNumber(dr) || cJSON_AddNumberToObject(lc, "dropout", dr->valuedouble));
}

/* DOPPLER's standalone adapter manifest: the PEFT file itself as the weights. */
static bool lora_standalone(cJSON *sa, const lora_conv *c, const lora_ident *d, const char *hex,
                            size_t wlen) {
    cJSON *tm, *md;
    return cJSON_AddStringToObject(sa, "id", d->id) &&
           cJSON_AddStringToObject(sa, "name", d->name) &&
           cJSON_AddStringToObject(sa, "version", "1.0.0") &&
           cJSON_AddStringToObject(sa, "baseModel", d->base) &&
           cJSON_AddNumberToObject(sa, "rank", (double)c->rank) &&
           cJSON_AddNumberToObject(sa, "alpha", c->alpha) &&
           (tm = cJSON_AddArrayToObject(sa, "targetModules")) && add_modules(tm, c->used) &&
           cJSON_AddStringToObject(sa, "checksum", hex) &&
           cJSON_AddStringToObject(sa, "checksumAlgorithm", "sha256") &&
           cJSON_AddStringToObject(sa, "weightsFormat", "safetensors") &&
           cJSON_AddStringToObject(sa, "weightsPath", "adapter_model.safetensors") &&
           cJSON_AddNumberToObject(sa, "weightsSize", (double)wlen) &&
           (md = cJSON_AddObjectToObject(sa, "metadata")) &&
           cJSON_AddStringToObject(md, "source", "peft") &&
           cJSON_AddStringToObject(md, "rdrrManifest", "manifest.json");
}

/* adapter_model.safetensors byte for byte and the standalone manifest beside it. */
static qp_status write_standalone(const lora_conv *c, const lora_ident *d, qp_rdrr_writer *w,
                                  const char *out_dir, qp_err *e) {
    char *wbytes = NULL;
    size_t wlen = 0;
    uint8_t digest[QP_SHA256_BYTES];
    char hex[QP_SHA256_HEX];
    qp_status s = qp_file_read_all(c->wp, (size_t)4 << 30, &wbytes, &wlen, e);
    if (s == QP_OK) s = qp_sha256_once(wbytes, wlen, digest, e);
    if (s == QP_OK) s = qp_rdrr_writer_add_file(w, "adapter_model.safetensors", wbytes, wlen, e);
    qp_free(wbytes);
    if (s != QP_OK) return s;
    qp_hex_encode(digest, sizeof digest, hex);
    cJSON *sa = cJSON_CreateObject();
    char *text = sa && lora_standalone(sa, c, d, hex, wlen) ? cJSON_Print(sa) : NULL;
    cJSON_Delete(sa);
    if (!text) return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", out_dir);
    s = qp_rdrr_writer_add_file(w, QP_LORA_STANDALONE_FILE, text, strlen(text), e);
    cJSON_free(text);
    return s;
}

qp_status qp_lora_convert(const char *peft_dir, const char *out_dir, const qp_lora_opts *o,
                          qp_lora_result *res, qp_err *e) {
    static const qp_lora_opts k_default = {NULL, NULL, -1, {0}};
    if (!o) o = &k_default;
    lora_conv c = {.peft_dir = peft_dir, .max_layer = -1, .in_dim = 1};
    c.cp = qp_path_join(peft_dir, "adapter_config.json");
    c.wp = qp_path_join(peft_dir, "adapter_model.safetensors");
    qp_rdrr_writer *w = NULL;
    cJSON *fields = NULL;
    qp_status s;
    if (!c.cp || !c.wp) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", peft_dir);
        goto done;
    }
    if ((s = read_config(&c, e)) != QP_OK || (s = read_weights(&c, e)) != QP_OK ||
        (s = qp_rdrr_writer_open(out_dir, &o->w, &w, e)) != QP_OK ||
        (s = write_matrices(&c, w, e)) != QP_OK)
        goto done;
    lora_ident d;
    lora_identify(&c, o, &d);
    if ((s = write_standalone(&c, &d, w, out_dir, e)) != QP_OK) goto done;
    fields = cJSON_CreateObject();
    if (!fields || !lora_fields(fields, &c, &d)) {
        s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", out_dir);
        goto done;
    }
    qp_rdrr_writer *ww = w;
    w = NULL;
    s = qp_rdrr_writer_finish(ww, fields, e);
    fields = NULL;
    if (s == QP_OK && res) {
        res->n_tensors = c.m->n_tensors;
        res->rank = c.rank;
        res->alpha = c.alpha;
        res->n_layers = c.max_layer + 1;
    }
done:
    qp_rdrr_writer_abort(w);
    cJSON_Delete(fields);
    cJSON_Delete(c.cfg);
    qp_model_close(c.m);
    qp_free(c.lt);
    qp_free(c.cp);
    qp_free(c.wp);
    return s;
}
