/* Model -> RDRR directory (converters/convert_rdrr.h, readers/rdrr.md). */
#include "converters/convert_rdrr.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "quantpack/chat.h"

#include "core/buf.h"
#include "core/model_internal.h"
#include "quantpack/core.h"
#include "quantpack/encoding.h"
#include "readers/model_check.h"

/* The inference block doppler-gpu 0.5.1's parseManifest accepts for a Llama-style model
 * (readers/rdrr.md, "inference"); model values are filled in by fill_inference. */
static const char k_inference_llama[] =
    "{\"attention\":{\"queryPreAttnScalar\":32,\"queryKeyNorm\":false,\"valueNorm\":false,\"attentionBia"
    "s\":false,\"causal\":true,\"slidingWindow\":null,\"attnLogitSoftcapping\":null},\"normalization\":{"
    "\"rmsNormWeightOffset\":false,\"rmsNormEps\":1e-05,\"postAttentionNorm\":false,\"preFeedforwardNo"
    "rm\":false,\"postFeedforwardNorm\":false},\"ffn\":{\"activation\":\"silu\",\"gatedActivation\":true,\""
    "branchMode\":\"auto\",\"useDoubleWideMlp\":false,\"swigluLimit\":null},\"rope\":{\"ropeTheta\":10000,"
    "\"ropeScalingFactor\":1,\"ropeScalingType\":null,\"ropeLocalTheta\":null,\"mropeInterleaved\":fals"
    "e,\"mropeSection\":null,\"partialRotaryFactor\":null,\"ropeLocalPartialRotaryFactor\":null,\"rope"
    "FrequencyBaseDim\":null,\"ropeLocalFrequencyBaseDim\":null,\"yarnBetaFast\":null,\"yarnBetaSlow\""
    ":null,\"yarnOriginalMaxPos\":null,\"longropeShortFactor\":null,\"longropeLongFactor\":null,\"long"
    "ropeOriginalMaxPos\":null,\"ropeLocalYarnBetaFast\":null,\"ropeLocalYarnBetaSlow\":null,\"ropeLo"
    "calYarnOriginalMaxPos\":null},\"output\":{\"tieWordEmbeddings\":true,\"scaleEmbeddings\":false,\"e"
    "mbeddingScale\":null,\"logitInputScale\":1,\"embeddingTranspose\":false,\"finalLogitSoftcapping\""
    ":null,\"embeddingVocabSize\":null,\"embeddingPostprocessor\":null},\"layerPattern\":{\"type\":\"uni"
    "form\",\"globalPattern\":null,\"period\":null,\"offset\":null,\"residualBranchScale\":1},\"chatTempl"
    "ate\":{\"type\":null,\"enabled\":false},\"session\":{\"compute\":{\"defaults\":{\"activationDtype\":\"f3"
    "2\",\"mathDtype\":\"f32\",\"accumDtype\":\"f32\",\"outputDtype\":\"f32\"}},\"kvcache\":{\"kvDtype\":\"f32\",\""
    "layout\":\"contiguous\",\"pageSize\":256,\"tiering\":{\"mode\":\"off\",\"hotWindow\":1024,\"coldPageSize"
    "\":256,\"coldDtype\":\"f16\",\"compression\":{\"mode\":\"none\",\"blockSize\":1,\"bitWidth\":4,\"prodMode\""
    ":false},\"gating\":{\"mode\":\"auto\",\"minAluBwRatio\":0}},\"quantization\":{\"mode\":\"none\",\"bitWidt"
    "h\":4,\"prodMode\":false}},\"decodeLoop\":{\"batchSize\":1,\"stopCheckMode\":\"batch\",\"readbackInter"
    "val\":1,\"readbackMode\":\"sequential\",\"ringTokens\":1,\"ringStop\":1,\"ringStaging\":1,\"disableCom"
    "mandBatching\":false}}}"
    ;

#define CHUNK_BYTES ((size_t)16 << 20)

const char *qp_rdrr_dtype_name(qp_encoding enc) {
    if (enc == QP_ENC_Q4_K) return "Q4_K_M";
    const qp_encoding_traits *t = qp_encoding_get(enc);
    return t ? t->upper_name : "UNKNOWN";
}

/* "q4k", "q6k", "q8", "f16", ... for variant tags. */
static void short_dtype(qp_encoding enc, char *buf, size_t cap) {
    const qp_encoding_traits *t = qp_encoding_get(enc);
    const char *n = t ? t->name : "x";
    size_t k = 0;
    for (const char *p = n; *p && k + 1 < cap; p++)
        if (*p != '_') buf[k++] = *p;
    buf[k] = '\0';
    if (strcmp(buf, "q80") == 0) snprintf(buf, cap, "q8");
}

static void lower_dtype(qp_encoding enc, char *buf, size_t cap) {
    const char *n = qp_rdrr_dtype_name(enc);
    size_t k = 0;
    for (const char *p = n; *p && k + 1 < cap; p++) buf[k++] = (char)tolower((unsigned char)*p);
    buf[k] = '\0';
}

/* ---- SentencePiece model writer ---------------------------------------------------------- */

static void pb_varint(qp_buf *b, uint64_t v) {
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    qp_buf_put(b, t, k);
}

static void pb_key(qp_buf *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_bytes(qp_buf *b, unsigned field, const void *d, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    qp_buf_put(b, d, n);
}

static void pb_int(qp_buf *b, unsigned field, int64_t v) {
    pb_key(b, field, 0);
    pb_varint(b, (uint64_t)v);
}

qp_status qp_rdrr_spm_model_bytes(const qp_vocab *v, uint8_t **out, size_t *out_len, qp_err *e) {
    if (v->model != QP_TOK_SPM || v->n_tokens <= 0)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tokenizer.model: the vocabulary is not SentencePiece");
    qp_buf b = {0}, piece = {0}, sub = {0};
    bool byte_fallback = false;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        qp_buf_clear(&piece);
        pb_bytes(&piece, 1, v->tokens[i], v->token_lens[i]);
        uint8_t f[4];
        qp_store_f32le(f, v->scores ? v->scores[i] : 0.0f);
        pb_key(&piece, 2, 5);
        qp_buf_put(&piece, f, 4);
        int32_t type = v->types ? v->types[i] : QP_TOKTYPE_NORMAL;
        if (type < 1 || type > 6) type = QP_TOKTYPE_NORMAL;
        if (type == QP_TOKTYPE_BYTE) byte_fallback = true;
        if (type != QP_TOKTYPE_NORMAL) pb_int(&piece, 3, type);
        if (piece.oom) break;
        pb_bytes(&b, 1, piece.p, piece.len);
    }
    /* TrainerSpec: model_type BPE (2), byte_fallback, unk/bos/eos/pad ids. */
    pb_int(&sub, 3, 2);
    if (byte_fallback) pb_int(&sub, 35, 1);
    pb_int(&sub, 40, v->unk_id);
    pb_int(&sub, 41, v->bos_id);
    pb_int(&sub, 42, v->eos_id);
    pb_int(&sub, 43, v->pad_id);
    pb_bytes(&b, 2, sub.p, sub.len);
    /* NormalizerSpec: identity, add_dummy_prefix true, remove_extra_whitespaces false (Llama). */
    qp_buf_clear(&sub);
    pb_bytes(&sub, 1, "identity", 8);
    pb_int(&sub, 3, 1);
    pb_int(&sub, 4, 0);
    pb_bytes(&b, 3, sub.p, sub.len);
    bool oom = b.oom || piece.oom || sub.oom;
    qp_buf_free(&piece);
    qp_buf_free(&sub);
    if (oom) {
        qp_buf_free(&b);
        return qp_fail(e, QP_ERR_NOMEM, "tokenizer.model: out of memory");
    }
    *out = qp_buf_take(&b, out_len);
    return QP_OK;
}

/* ---- manifest fields ---------------------------------------------------------------------- */


static bool set_num(cJSON *obj, const char *key, double v) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) return cJSON_AddNumberToObject(obj, key, v) != NULL;
    cJSON *n = cJSON_CreateNumber(v);
    return n && cJSON_ReplaceItemInObjectCaseSensitive(obj, key, n);
}

static bool set_bool(cJSON *obj, const char *key, bool v) {
    cJSON *n = cJSON_CreateBool(v);
    if (!n) return false;
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return cJSON_AddItemToObject(obj, key, n);
    return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, n);
}

static bool set_str(cJSON *obj, const char *key, const char *v) {
    cJSON *n = cJSON_CreateString(v);
    if (!n) return false;
    if (!cJSON_GetObjectItemCaseSensitive(obj, key)) return cJSON_AddItemToObject(obj, key, n);
    return cJSON_ReplaceItemInObjectCaseSensitive(obj, key, n);
}

cJSON *qp_rdrr_default_inference(void) { return cJSON_Parse(k_inference_llama); }

struct tally {
    qp_encoding emb, head, weights;
    bool has_emb, has_head;
    bool post_attn_norm, pre_ffn_norm, post_ffn_norm, qk_norm; /* DOPPLER's tensor/config checks */
    int64_t counts[QP_ENC_COUNT];
};
typedef struct tally tally;
static bool set_num_or_null(cJSON *obj, const char *key, double v) {
    if (v > 0) return set_num(obj, key, v);
    cJSON *n = cJSON_CreateNull();
    return n && cJSON_ReplaceItemInObjectCaseSensitive(obj, key, n);
}

/* The layer pattern DOPPLER derives its layer types from (its layer-pattern rules): Gemma 2's
 * odd layers global ("alternating", "odd"), Gemma 3's every swa_pattern-th ("every_n", period,
 * offset period - 1); no sliding window: "uniform". */
static bool set_layer_pattern(cJSON *lp, const qp_arch *a) {
    if (!(a->sliding_window > 0) || a->swa_pattern <= 1) return true;
    if (a->swa_pattern == 2)
        return set_str(lp, "type", "alternating") && set_str(lp, "globalPattern", "odd");
    return set_str(lp, "type", "every_n") && set_num(lp, "period", a->swa_pattern) &&
           set_num(lp, "offset", a->swa_pattern - 1);
}

/* Gemma 1/2/3 as DOPPLER's own gemma3 conversion configs say it (readers/rdrr.md "Gemma"):
 * rmsNormWeightOffset (norms applied as 1 + w) when the source stores w (HF), scaleEmbeddings
 * (x sqrt(hidden)), query_pre_attn_scalar, the soft-caps and sliding window, Gemma 3's local rope
 * base (with ropeLocalScalingFactor 1, which DOPPLER requires beside it) and linear scaling of
 * the global layers. */
static bool fill_gemma(cJSON *inf, const qp_arch *a) {
    cJSON *att = cJSON_GetObjectItemCaseSensitive(inf, "attention");
    cJSON *norm = cJSON_GetObjectItemCaseSensitive(inf, "normalization");
    cJSON *rope = cJSON_GetObjectItemCaseSensitive(inf, "rope");
    cJSON *outp = cJSON_GetObjectItemCaseSensitive(inf, "output");
    cJSON *lp = cJSON_GetObjectItemCaseSensitive(inf, "layerPattern");
    const bool scaled = a->rope_freq_scale > 0 && a->rope_freq_scale != 1.0f;
    bool ok = lp && set_num(att, "queryPreAttnScalar", qp_arch_query_pre_attn_scalar(a)) &&
              set_num_or_null(att, "attnLogitSoftcapping", qp_f32_short_double(a->attn_softcap)) &&
              set_num_or_null(att, "slidingWindow", (double)a->sliding_window) &&
              set_bool(norm, "rmsNormWeightOffset", a->norm_plus_one) &&
              set_bool(outp, "scaleEmbeddings", true) &&
              set_num_or_null(outp, "finalLogitSoftcapping", qp_f32_short_double(a->final_softcap)) &&
              set_layer_pattern(lp, a);
    if (ok && a->rope_theta_swa > 0 && a->family == QP_FAMILY_GEMMA3)
        ok = set_num(rope, "ropeLocalTheta", qp_f32_short_double(a->rope_theta_swa)) &&
             set_num(rope, "ropeLocalScalingFactor", 1) && cJSON_AddNullToObject(rope, "ropeLocalScalingType");
    if (ok && scaled)
        ok = set_str(rope, "ropeScalingType", "linear") &&
             set_num(rope, "ropeScalingFactor", qp_f32_short_double(1.0f / a->rope_freq_scale));
    return ok;
}

static cJSON *fill_inference(const qp_model *m, int64_t head_dim, const tally *t) {
    cJSON *inf = cJSON_Parse(k_inference_llama);
    if (!inf) return NULL;
    const qp_arch *a = &m->arch;
    cJSON *att = cJSON_GetObjectItemCaseSensitive(inf, "attention");
    cJSON *norm = cJSON_GetObjectItemCaseSensitive(inf, "normalization");
    cJSON *ffn = cJSON_GetObjectItemCaseSensitive(inf, "ffn");
    cJSON *rope = cJSON_GetObjectItemCaseSensitive(inf, "rope");
    cJSON *outp = cJSON_GetObjectItemCaseSensitive(inf, "output");
    bool ok = att && norm && ffn && rope && outp &&
              set_num(att, "queryPreAttnScalar", (double)head_dim) &&
              set_bool(att, "attentionBias", a->qkv_bias) &&
              set_num(norm, "rmsNormEps", qp_f32_short_double(a->norm_eps > 0 ? a->norm_eps : 1e-5f)) &&
              set_str(ffn, "activation", qp_act_name(a->act)) &&
              set_num(rope, "ropeTheta", qp_f32_short_double(a->rope_theta > 0 ? a->rope_theta : 10000.0f)) &&
              set_bool(outp, "tieWordEmbeddings", a->tie_embeddings) &&
              /* doppler-gpu's tensor-config validator ties these flags to tensor names (HF Llama's
               * post_attention_layernorm is its pre-FFN norm, yet the flag must say true). */
              set_bool(norm, "postAttentionNorm", t->post_attn_norm) &&
              set_bool(norm, "preFeedforwardNorm", t->pre_ffn_norm) &&
              set_bool(norm, "postFeedforwardNorm", t->post_ffn_norm) &&
              set_bool(att, "queryKeyNorm", t->qk_norm);
    if (ok && qp_family_is_gemma(a->family)) ok = fill_gemma(inf, a);
    if (!ok) {
        cJSON_Delete(inf);
        return NULL;
    }
    return inf;
}


static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static void tally_add(tally *t, const char *name, qp_encoding enc, int n_dims) {
    if (ends_with(name, "post_attention_layernorm.weight")) t->post_attn_norm = true;
    if (ends_with(name, "pre_feedforward_layernorm.weight")) t->pre_ffn_norm = true;
    if (ends_with(name, "post_feedforward_layernorm.weight")) t->post_ffn_norm = true;
    if (strstr(name, "self_attn.q_norm.weight") || strstr(name, "self_attn.k_norm.weight")) t->qk_norm = true;
    const char *role = qp_rdrr_role_of(name);
    if (strcmp(role, "embedding") == 0) {
        t->emb = enc;
        t->has_emb = true;
    } else if (strcmp(role, "lm_head") == 0) {
        t->head = enc;
        t->has_head = true;
    } else if (n_dims >= 2 && strcmp(role, "matmul") == 0 && (int)enc < QP_ENC_COUNT) {
        t->counts[enc]++;
    }
}

static qp_encoding tally_weights(const tally *t) {
    qp_encoding best = QP_ENC_COUNT;
    int64_t bc = 0;
    for (int i = 0; i < QP_ENC_COUNT; i++)
        if (t->counts[i] > bc) {
            bc = t->counts[i];
            best = (qp_encoding)i;
        }
    /* A Q4_K_M file mixes Q4_K and Q6_K: any Q4_K makes it Q4_K_M. */
    if (t->counts[QP_ENC_Q4_K] > 0) best = QP_ENC_Q4_K;
    if (best == QP_ENC_COUNT) best = t->has_emb ? t->emb : QP_ENC_F32;
    return best;
}

static const char *model_id_of(const char *path, char *buf, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    size_t len = n - b;
    const char *dot = NULL;
    for (size_t i = b; i < n; i++)
        if (path[i] == '.') dot = path + i;
    if (dot && dot > path + b) len = (size_t)(dot - (path + b));
    if (len == 0 || len >= cap) len = len >= cap ? cap - 1 : 0;
    if (len == 0) {
        snprintf(buf, cap, "model");
        return buf;
    }
    memcpy(buf, path + b, len);
    buf[len] = '\0';
    return buf;
}

/* The file's own label (GGUF general.file_type: "Q4_K_M" even when short rows fell back to
 * Q5_0) when every tensor kept its dtype, else the dtype most weights are stored in. */
static const char *quant_name(const qp_model *m, qp_encoding weights, bool changed) {
    const qp_meta *ft = changed ? NULL : qp_model_meta(m, "general.file_type");
    if (ft && ft->type != QP_META_STRING && ft->type != QP_META_ARRAY) {
        for (int q = 0; q < QP_QUANT_COUNT; q++)
            if ((uint64_t)qp_quant_file_type((qp_quant)q) == ft->v.u) return qp_quant_name((qp_quant)q);
    }
    return qp_rdrr_dtype_name(weights);
}

/* ---- manifest.tokenizer ------------------------------------------------------------------- */

/* The ids and flags DOPPLER's converter writes (converter/core.js buildSentencepieceTokenizer):
 * bosTokenId, eosTokenId, eosTokens, padTokenId, unkTokenId (each only when the source has it),
 * addBosToken, addEosToken. DOPPLER's SentencePiece tokenizer refuses a model without unk and its
 * bundled tokenizer adds BOS only when addBosToken says so. addBosToken: qp_model_adds_bos (a
 * GGUF "llama" vocabulary without tokenizer.ggml.add_bos_token adds BOS, as llama.cpp). */
static bool add_tokenizer_ids(cJSON *tok, const qp_model *m, int32_t bos, int32_t eos) {
    const qp_vocab *v = &m->vocab;
    bool add_bos = qp_model_adds_bos(m);
    cJSON *eos_list = NULL;
    bool ok = (bos < 0 || cJSON_AddNumberToObject(tok, "bosTokenId", bos)) &&
              (eos < 0 || (cJSON_AddNumberToObject(tok, "eosTokenId", eos) &&
                           (eos_list = cJSON_AddArrayToObject(tok, "eosTokens")) &&
                           cJSON_AddItemToArray(eos_list, cJSON_CreateNumber(eos)))) &&
              (v->pad_id < 0 || cJSON_AddNumberToObject(tok, "padTokenId", v->pad_id)) &&
              (v->unk_id < 0 || cJSON_AddNumberToObject(tok, "unkTokenId", v->unk_id)) &&
              cJSON_AddBoolToObject(tok, "addBosToken", add_bos && bos >= 0) &&
              cJSON_AddBoolToObject(tok, "addEosToken", v->add_eos && eos >= 0);
    return ok;
}

/* DOPPLER's formatter type (inference.chatTemplate.type) for the template's markers, or NULL. */
static const char *chat_template_type(const char *t) {
    if (strstr(t, "<|im_start|>")) return "chatml";
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "<start_of_turn>")) return "gemma";
    return NULL;
}

static cJSON *manifest_fields(const qp_model *m, const qp_rdrr_convert_opts *o, const tally *t,
                              const char *tok_kind, int64_t n_vocab_tokens, bool changed,
                              const char *chat_template) {
    const qp_arch *a = &m->arch;
    char idbuf[128], wq[24], eq[24], hq[24], ws[24], es[24], hs[24], tag[96];
    const char *id = o->model_id ? o->model_id : model_id_of(m->path, idbuf, sizeof idbuf);
    qp_encoding we = tally_weights(t);
    qp_encoding ee = t->has_emb ? t->emb : we;
    qp_encoding he = t->has_head ? t->head : ee;
    lower_dtype(we, wq, sizeof wq);
    lower_dtype(ee, eq, sizeof eq);
    lower_dtype(he, hq, sizeof hq);
    short_dtype(we, ws, sizeof ws);
    short_dtype(ee, es, sizeof es);
    short_dtype(he, hs, sizeof hs);
    if (strcmp(es, hs) == 0) snprintf(tag, sizeof tag, "%s-eh%s-af32", ws, es);
    else snprintf(tag, sizeof tag, "%s-e%s-h%s-af32", ws, es, hs);

    int64_t heads = a->n_heads > 0 ? a->n_heads : 1;
    int64_t head_dim = a->head_dim > 0 ? a->head_dim : (a->hidden > 0 ? a->hidden / heads : 0);
    int64_t kv = a->n_kv_heads > 0 ? a->n_kv_heads : heads;
    int64_t vocab = a->vocab > 0 ? a->vocab : m->vocab.n_tokens;
    int32_t eos = m->vocab.eos_id >= 0 ? m->vocab.eos_id : a->eos_id;
    int32_t bos = m->vocab.bos_id >= 0 ? m->vocab.bos_id : a->bos_id;

    cJSON *j = cJSON_CreateObject();
    cJSON *qi = NULL, *ar = NULL, *tok = NULL, *qpx = NULL, *inf = NULL, *ident = NULL;
    bool ok = j && cJSON_AddNumberToObject(j, "version", 1) &&
              cJSON_AddStringToObject(j, "modelId", id) &&
              cJSON_AddStringToObject(j, "modelType", "transformer") &&
              cJSON_AddStringToObject(j, "quantization", quant_name(m, we, changed)) &&
              (qi = cJSON_AddObjectToObject(j, "quantizationInfo")) &&
              cJSON_AddStringToObject(qi, "weights", wq) &&
              cJSON_AddStringToObject(qi, "embeddings", eq) &&
              cJSON_AddStringToObject(qi, "lmHead", hq) &&
              cJSON_AddStringToObject(qi, "compute", "f32") &&
              cJSON_AddStringToObject(qi, "layout", "row") &&
              cJSON_AddStringToObject(qi, "variantTag", tag) &&
              cJSON_AddStringToObject(j, "hashAlgorithm", "sha256") &&
              (ar = cJSON_AddObjectToObject(j, "architecture")) &&
              cJSON_AddNumberToObject(ar, "numLayers", (double)a->n_layers) &&
              cJSON_AddNumberToObject(ar, "hiddenSize", (double)a->hidden) &&
              cJSON_AddNumberToObject(ar, "intermediateSize", (double)a->intermediate) &&
              cJSON_AddNumberToObject(ar, "numAttentionHeads", (double)heads) &&
              cJSON_AddNumberToObject(ar, "numKeyValueHeads", (double)kv) &&
              cJSON_AddNumberToObject(ar, "headDim", (double)head_dim) &&
              cJSON_AddNumberToObject(ar, "vocabSize", (double)vocab) &&
              cJSON_AddNumberToObject(ar, "maxSeqLen", (double)(a->max_pos > 0 ? a->max_pos : 2048)) &&
              cJSON_AddNumberToObject(ar, "ropeTheta",
                                      qp_f32_short_double(a->rope_theta > 0 ? a->rope_theta : 10000.0f)) &&
              cJSON_AddNumberToObject(ar, "rmsNormEps",
                                      qp_f32_short_double(a->norm_eps > 0 ? a->norm_eps : 1e-5f)) &&
              cJSON_AddStringToObject(ar, "hiddenActivation", qp_act_name(a->act)) &&
              cJSON_AddNumberToObject(j, "eos_token_id", eos >= 0 ? eos : 2) &&
              (inf = fill_inference(m, head_dim, t)) && cJSON_AddItemToObject(j, "inference", inf);
    if (!ok && inf && !cJSON_GetObjectItemCaseSensitive(j, "inference")) cJSON_Delete(inf);
    if (ok && tok_kind) {
        ok = (tok = cJSON_AddObjectToObject(j, "tokenizer")) != NULL;
        if (ok && strcmp(tok_kind, "bundled") == 0)
            ok = cJSON_AddStringToObject(tok, "type", "bundled") &&
                 cJSON_AddNumberToObject(tok, "vocabSize", (double)n_vocab_tokens) &&
                 cJSON_AddStringToObject(tok, "file", "tokenizer.json");
        else if (ok)
            ok = cJSON_AddStringToObject(tok, "type", "sentencepiece") &&
                 cJSON_AddStringToObject(tok, "sentencepieceModel", "tokenizer.model") &&
                 cJSON_AddNumberToObject(tok, "vocabSize", (double)n_vocab_tokens);
        ok = ok && add_tokenizer_ids(tok, m, bos, eos);
        if (ok && chat_template) {
            const char *ct = chat_template_type(chat_template);
            cJSON *ctj = cJSON_GetObjectItemCaseSensitive(inf, "chatTemplate");
            ok = cJSON_AddStringToObject(tok, "chatTemplate", chat_template) && ctj &&
                 (ct ? set_str(ctj, "type", ct) : true) && set_bool(ctj, "enabled", ct != NULL);
        }
    }
    /* DOPPLER's moeConfig (its converter's normalizeMoEConfig; readers/rdrr.md) */
    cJSON *moe = NULL;
    if (ok && a->n_experts > 0)
        ok = (moe = cJSON_AddObjectToObject(j, "moeConfig")) &&
             cJSON_AddNumberToObject(moe, "numExperts", (double)a->n_experts) &&
             cJSON_AddNumberToObject(moe, "numExpertsPerToken", (double)a->n_experts_used) &&
             cJSON_AddStringToObject(moe, "expertFormat", "mixtral");
    ok = ok && (ident = cJSON_AddObjectToObject(j, "artifactIdentity")) &&
         cJSON_AddStringToObject(ident, "sourceFormat", qp_format_name(m->format)) &&
         cJSON_AddStringToObject(ident, "artifactCompleteness", "complete");
    /* What the reference runtime needs and DOPPLER's blocks do not say (readers/rdrr.md). */
    ok = ok && (qpx = cJSON_AddObjectToObject(j, "quantpack")) &&
         cJSON_AddNumberToObject(qpx, "version", 1) &&
         cJSON_AddStringToObject(qpx, "family", qp_family_name(a->family)) &&
         cJSON_AddStringToObject(qpx, "archName", m->arch_name ? m->arch_name : "") &&
         cJSON_AddStringToObject(qpx, "ropeStyle", a->rope_style == QP_ROPE_NEOX ? "neox" : "norm") &&
         cJSON_AddBoolToObject(qpx, "qkvBias", a->qkv_bias) &&
         cJSON_AddBoolToObject(qpx, "subNorms", a->sub_norms) &&
         cJSON_AddBoolToObject(qpx, "activationInt8", a->act_int8) &&
         cJSON_AddBoolToObject(qpx, "tieEmbeddings", a->tie_embeddings) &&
         cJSON_AddNumberToObject(qpx, "bosTokenId", bos) &&
         cJSON_AddNumberToObject(qpx, "eosTokenId", eos) &&
         cJSON_AddStringToObject(qpx, "sourceFormat", qp_format_name(m->format));
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

cJSON *qp_rdrr_architecture_json(const qp_model *m) {
    const qp_arch *a = &m->arch;
    int64_t heads = a->n_heads > 0 ? a->n_heads : 1;
    int64_t head_dim = a->head_dim > 0 ? a->head_dim : (a->hidden > 0 ? a->hidden / heads : 0);
    cJSON *ar = cJSON_CreateObject();
    bool ok = ar && cJSON_AddNumberToObject(ar, "numLayers", (double)a->n_layers) &&
              cJSON_AddNumberToObject(ar, "hiddenSize", (double)a->hidden) &&
              cJSON_AddNumberToObject(ar, "intermediateSize", (double)a->intermediate) &&
              cJSON_AddNumberToObject(ar, "numAttentionHeads", (double)heads) &&
              cJSON_AddNumberToObject(ar, "numKeyValueHeads",
                                      (double)(a->n_kv_heads > 0 ? a->n_kv_heads : heads)) &&
              cJSON_AddNumberToObject(ar, "headDim", (double)head_dim) &&
              cJSON_AddNumberToObject(ar, "vocabSize", (double)(a->vocab > 0 ? a->vocab : m->vocab.n_tokens)) &&
              cJSON_AddNumberToObject(ar, "maxSeqLen", (double)(a->max_pos > 0 ? a->max_pos : 2048)) &&
              cJSON_AddNumberToObject(ar, "ropeTheta",
                                      qp_f32_short_double(a->rope_theta > 0 ? a->rope_theta : 10000.0f));
    if (!ok) {
        cJSON_Delete(ar);
        return NULL;
    }
    return ar;
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* The dtypes doppler-gpu 0.5.1's loader decodes (src/rules/loader/tensor-loader.rules.json and
 * src/loader/tensors/tensor-loader.js): F32, F16, BF16, "Q4_K_M" (Q4_K blocks, flat or rows
 * zero-padded to 256 with layout "row": its row-wise dequantizer) and Q6_K in whole 256-element
 * rows (its Q6_K kernel decodes size/210 blocks back to back: no row padding). Any other dtype
 * falls through to its "float" rule and is read as F32 words: garbage, NaN included.
 *
 * rdrr_store_enc: the encoding a tensor the plan (or a GGUF source) gives as `want` with rows of
 * row_len is stored in, and *why (static text) when that differs from want:
 *  - F32, F16, BF16, Q4_K, whole-row Q6_K: kept;
 *  - passthrough (gguf-to-rdrr): any other dtype with a float meaning is decoded to F32, the
 *    exact values the source holds (never requantized); integer dtypes and encodings whose
 *    scale lives outside the rows (I2_S trailer, QK256 sibling) are refused (returns
 *    QP_ENC_COUNT);
 *  - convert: an 8-bit or wider fallback (Q8_0: llama.cpp's choice for Q6_K rows that are not
 *    a multiple of 256) becomes F16 from the source values; a narrower one (Q5_0, Q5_1, Q4_0,
 *    IQ4_NL, ...) becomes Q4_K with rows zero-padded to 256, the layout DOPPLER's own converter
 *    gives short rows. */
static qp_encoding rdrr_store_enc(qp_encoding want, int64_t row_len, bool passthrough,
                                  const char **why) {
    *why = NULL;
    if (want == QP_ENC_F32 || want == QP_ENC_F16 || want == QP_ENC_BF16 || want == QP_ENC_Q4_K)
        return want;
    if (want == QP_ENC_Q6_K && row_len % 256 == 0) return want;
    const qp_encoding_traits *t = qp_encoding_get(want);
    unsigned refused = QP_ENC_FLAG_INT | QP_ENC_FLAG_EXT_SCALE | QP_ENC_FLAG_SIBLING_SCALE;
    if (!t || !t->dequantize || (t->flags & refused)) return QP_ENC_COUNT;
    if (passthrough) {
        *why = "DOPPLER has no decoder for it: stored decoded to F32 (the exact values)";
        return QP_ENC_F32;
    }
    if (want == QP_ENC_Q6_K) {
        *why = "Q6_K rows not a multiple of 256 (DOPPLER's Q6_K kernel has no row padding): F16";
        return QP_ENC_F16;
    }
    double bpw = t->block_elems > 0 ? (double)t->block_bytes * 8.0 / (double)t->block_elems : 32.0;
    if (bpw >= 8.0) {
        *why = "DOPPLER has no decoder for it: F16 from the source values";
        return QP_ENC_F16;
    }
    *why = "DOPPLER has no decoder for it: Q4_K with rows zero-padded to 256 (layout \"row\")";
    return QP_ENC_Q4_K;
}

/* What rdrr_store_enc changed, for the conversion report and quantizationInfo.dtypeChanges. */
typedef struct dtype_changes {
    cJSON *list;    /* [{tensor, planned, stored, reason}] */
    int64_t n;
    qp_encoding first_from, first_to;
    bool mixed;     /* more than one (from, to) pair */
} dtype_changes;

static bool note_change(dtype_changes *c, const char *name, qp_encoding from, qp_encoding to,
                        const char *why) {
    if (c->n == 0) {
        c->first_from = from;
        c->first_to = to;
    } else if (from != c->first_from || to != c->first_to) {
        c->mixed = true;
    }
    c->n++;
    cJSON *j = cJSON_CreateObject();
    bool ok = j && cJSON_AddItemToArray(c->list, j);
    if (!ok) cJSON_Delete(j);
    return ok && cJSON_AddStringToObject(j, "tensor", name) &&
           cJSON_AddStringToObject(j, "planned", qp_rdrr_dtype_name(from)) &&
           cJSON_AddStringToObject(j, "stored", qp_rdrr_dtype_name(to)) &&
           cJSON_AddStringToObject(j, "reason", why);
}

static void shape_outer_first(const int64_t *ne, int n_dims, int64_t *shape) {
    for (int i = 0; i < n_dims; i++) shape[i] = ne[n_dims - 1 - i];
}

static qp_status write_passthrough(qp_rdrr_writer *w, const qp_tensor *t, qp_err *e) {
    int64_t shape[QP_MAX_DIMS];
    int nd = t->n_dims;
    shape_outer_first(t->ne, nd, shape);
    qp_rdrr_tensor_info ti = {0};
    ti.name = t->name;
    ti.dtype = qp_rdrr_dtype_name(t->enc);
    ti.n_dims = nd;
    ti.shape = shape;
    ti.size = t->nbytes;
    qp_status s = qp_rdrr_writer_begin_tensor(w, &ti, e);
    for (size_t off = 0; s == QP_OK && off < t->nbytes; off += CHUNK_BYTES) {
        size_t n = t->nbytes - off < CHUNK_BYTES ? t->nbytes - off : CHUNK_BYTES;
        s = qp_rdrr_writer_write(w, t->data + off, n, e);
    }
    return s;
}

/* The name a plan entry is stored under: the source's (HF and GGUF names pass through), but a
 * .bullet's tensors take their canonical GGUF names, which DOPPLER reads (bullet-core's are not). */
static const char *stored_name(const qp_model *m, const qp_plan_entry *pe) {
    return m->format == QP_FORMAT_BULLET ? pe->name : pe->src->name;
}

/* One plan entry, stored as name: rows decoded to floats, zero-padded when padded_len > row_len,
 * encoded and streamed in chunks of rows. */
static qp_status write_converted(qp_rdrr_writer *w, const qp_plan_entry *pe, const char *name,
                                 qp_encoding dst, bool *padded, qp_err *e) {
    const qp_tensor *src = pe->src;
    const qp_encoding_traits *st = qp_encoding_get(pe->src_enc), *dt = qp_encoding_get(dst);
    if (pe->src_kind != QP_SRC_PLAIN || !st || !st->dequantize)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': this source layout cannot be "
                                              "written as RDRR", src->name, src->name);
    qp_quantize_fn qf = dt->quantize ? dt->quantize : dt->quantize_ref;
    int64_t row_len = src->ne[0], n_el = qp_tensor_nelements(src);
    if (row_len <= 0 || n_el % row_len)
        return qp_fail(e, QP_ERR_CORRUPT, "tensor '%s': bad shape", src->name);
    int64_t rows = n_el / row_len;
    int64_t padded_len = row_len;
    if (row_len % dt->block_elems) padded_len = (row_len + 255) / 256 * 256;
    *padded = padded_len != row_len;
    size_t src_row_bytes, dst_row_bytes, tensor_bytes;
    if (!qp_encoding_row_bytes(pe->src_enc, row_len, &src_row_bytes) ||
        !qp_encoding_row_bytes(dst, padded_len, &dst_row_bytes) ||
        !qp_size_mul(dst_row_bytes, (size_t)rows, &tensor_bytes) ||
        src_row_bytes * (size_t)rows > src->nbytes)
        return qp_fail(e, QP_ERR_CORRUPT, "tensor '%s': sizes do not add up", src->name);
    bool copy = dst == pe->src_enc && !*padded;
    if (!copy && !qf)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "tensor '%s': cannot encode %s", src->name, dt->name);
    int64_t shape[QP_MAX_DIMS];
    shape_outer_first(src->ne, src->n_dims, shape);
    qp_rdrr_tensor_info ti = {0};
    ti.name = name;
    ti.dtype = qp_rdrr_dtype_name(dst);
    ti.n_dims = src->n_dims;
    ti.shape = shape;
    ti.size = tensor_bytes;
    if (dt->flags & QP_ENC_FLAG_BLOCK) ti.layout = "row";
    qp_status s = qp_rdrr_writer_begin_tensor(w, &ti, e);
    if (s != QP_OK || copy) {
        for (size_t off = 0; s == QP_OK && off < tensor_bytes; off += CHUNK_BYTES) {
            size_t n = tensor_bytes - off < CHUNK_BYTES ? tensor_bytes - off : CHUNK_BYTES;
            s = qp_rdrr_writer_write(w, src->data + off, n, e);
        }
        return s;
    }
    size_t rows_per_chunk = CHUNK_BYTES / dst_row_bytes;
    if (rows_per_chunk == 0) rows_per_chunk = 1;
    if (rows_per_chunk > (size_t)rows) rows_per_chunk = (size_t)rows;
    float *f = qp_calloc((size_t)padded_len, sizeof *f);
    uint8_t *buf = qp_malloc(rows_per_chunk * dst_row_bytes);
    if (!f || !buf) s = qp_fail(e, QP_ERR_NOMEM, "tensor '%s': out of memory", src->name);
    for (int64_t r = 0; s == QP_OK && r < rows;) {
        size_t k = 0;
        for (; k < rows_per_chunk && r < rows; k++, r++) {
            st->dequantize(src->data + (size_t)r * src_row_bytes, f, row_len);
            qf(f, buf + k * dst_row_bytes, padded_len); /* f[row_len..] stays zero */
        }
        s = qp_rdrr_writer_write(w, buf, k * dst_row_bytes, e);
    }
    qp_free(f);
    qp_free(buf);
    return s;
}

static qp_status carry_tokenizer(const qp_model *m, qp_rdrr_writer *w, const char **kind,
                                 const char **note, qp_err *e) {
    *kind = NULL;
    *note = "no tokenizer in the source: none written";
    qp_status s = QP_OK;
    if (m->vocab.hf_json && m->vocab.hf_json_len) {
        s = qp_rdrr_writer_add_file(w, "tokenizer.json", m->vocab.hf_json, m->vocab.hf_json_len, e);
        *kind = "bundled";
        *note = "tokenizer.json carried over";
    }
    /* An HF folder's tokenizer.model travels too. */
    char *tm = qp_path_is_dir(m->path) ? qp_path_join(m->path, "tokenizer.model") : NULL;
    if (s == QP_OK && tm && qp_path_exists(tm)) {
        char *text = NULL;
        size_t len = 0;
        s = qp_file_read_all(tm, (size_t)64 << 20, &text, &len, e);
        if (s == QP_OK) s = qp_rdrr_writer_add_file(w, "tokenizer.model", text, len, e);
        qp_free(text);
        if (s == QP_OK && !*kind) {
            *kind = "sentencepiece";
            *note = "tokenizer.model carried over";
        }
    } else if (s == QP_OK && !*kind && m->vocab.model == QP_TOK_SPM && m->vocab.n_tokens > 0) {
        uint8_t *b = NULL;
        size_t n = 0;
        s = qp_rdrr_spm_model_bytes(&m->vocab, &b, &n, e);
        if (s == QP_OK) s = qp_rdrr_writer_add_file(w, "tokenizer.model", b, n, e);
        qp_free(b);
        *kind = "sentencepiece";
        *note = "tokenizer.model written from the source's SentencePiece vocabulary";
    } else if (s == QP_OK && !*kind && m->vocab.n_tokens > 0) {
        *note = "the source vocabulary (not SentencePiece, no tokenizer.json) was not carried over";
    }
    qp_free(tm);
    return s;
}

/* DOPPLER's Mixtral experts are the HF per-expert tensors (its expert-loader reads
 * "[model.]layers.N.block_sparse_moe.experts.E.w{1,2,3}.weight"; readers/rdrr.md "Mixture of
 * experts"); llama.cpp's merged ffn_*_exps have no such names and names are never remapped. */
static qp_status check_moe_layout(const qp_model *m, qp_err *e) {
    if (m->arch.n_experts <= 0 || m->format == QP_FORMAT_SAFETENSORS || m->format == QP_FORMAT_RDRR)
        return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: a %s mixture of experts (%lld experts) keeps them "
                   "merged in ffn_*_exps, which DOPPLER's expert loader cannot read: convert the "
                   "Hugging Face checkpoint to RDRR instead", m->path, qp_format_name(m->format),
                   (long long)m->arch.n_experts);
}

/* Qwen3.5 is refused (no delta-net layers in RDRR). RDRR keeps the source's tensor names;
 * DOPPLER's layer loader finds Gemma 2/3's pre-FFN norm
 * only under HF's pre_feedforward_layernorm (a GGUF's ffn_norm is taken as its post-attention
 * norm), so those GGUF sources are refused (readers/rdrr.md "Gemma"). */
static qp_status refuse_gemma_gguf_names(const qp_model *m, qp_err *e) {
    const qp_family f = m->arch.family;
    if (f == QP_FAMILY_QWEN35) /* and Qwen3.5's delta-net layers are not in DOPPLER's spec */
        return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture 'qwen35': RDRR's manifest and "
                       "DOPPLER's runtime have no linear-attention (gated delta-net) layers", m->path);
    if ((f != QP_FAMILY_GEMMA2 && f != QP_FAMILY_GEMMA3) || m->format == QP_FORMAT_SAFETENSORS ||
        m->format == QP_FORMAT_RDRR)
        return QP_OK;
    return qp_fail(e, QP_ERR_UNSUPPORTED, "%s: architecture '%s' from a %s: RDRR keeps the tensor "
                   "names and DOPPLER's layer loader reads the pre-FFN norm only as HF's "
                   "pre_feedforward_layernorm (ffn_norm would be taken as the post-attention norm); "
                   "convert the Hugging Face checkpoint to RDRR instead", m->path,
                   qp_family_name(f), qp_format_name(m->format));
}

/* The recipe's plan (no passthrough) and the checks every RDRR output passes: nothing written. */
static qp_status rdrr_recipe_plan(const qp_model *m, const qp_rdrr_convert_opts *o, qp_plan *plan,
                                  qp_err *e) {
    qp_recipe_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.quant = o->quant;
    ro.allow_requantize = o->allow_requantize;
    ro.permute_qk = false; /* RDRR keeps the source's rows and names */
    ro.sort_llama = false;
    ro.n_head = m->arch.n_heads;
    ro.n_head_kv = m->arch.n_kv_heads > 0 ? m->arch.n_kv_heads : m->arch.n_heads;
    ro.n_layer = m->arch.n_layers;
    ro.n_expert = m->arch.n_experts; /* experts stay one tensor each (readers/rdrr.md) */
    if (o->quant != QP_QUANT_Q4_K_M && o->quant != QP_QUANT_Q6_K && o->quant != QP_QUANT_F16 &&
        o->quant != QP_QUANT_BF16 && o->quant != QP_QUANT_F32)
        return qp_fail(e, QP_ERR_UNSUPPORTED, "RDRR output: --quant %s is not a dtype DOPPLER's "
                                              "loader decodes (Q4_K_M, Q6_K, F16, BF16, F32)",
                       qp_quant_name(o->quant));
    qp_status s = qp_recipe_plan(m, &ro, plan, e);
    if (s != QP_OK) return s;
    /* never write a model the runtime rejects (readers/model_check.h) */
    if ((s = qp_model_check_for_write(m, o->allow_nonfinite, e)) != QP_OK || (s = check_moe_layout(m, e)) != QP_OK ||
        (s = refuse_gemma_gguf_names(m, e)) != QP_OK ||
        (s = qp_model_refuse_rope_factors(m, "RDRR (DOPPLER)", e)) != QP_OK)
        qp_plan_free(plan);
    return s;
}

qp_status qp_convert_rdrr_plan(const qp_model *m, const qp_rdrr_convert_opts *o, qp_plan *plan, qp_err *e) {
    if (!m || !o || !plan || o->passthrough) return qp_fail(e, QP_ERR_ARG, "rdrr plan: bad argument");
    qp_status s = rdrr_recipe_plan(m, o, plan, e);
    if (s != QP_OK) return s;
    plan->dst_bytes = 0;
    plan->n_fallback = 0;
    for (int64_t i = 0; s == QP_OK && i < plan->n; i++) {
        qp_plan_entry *pe = &plan->t[i];
        const char *why = NULL;
        qp_encoding dst = rdrr_store_enc(pe->dst_enc, pe->src->ne[0], false, &why);
        int64_t row_len = pe->src->ne[0], n_el = qp_tensor_nelements(pe->src);
        size_t row_bytes = 0;
        if (dst == QP_ENC_COUNT || row_len <= 0 || n_el % row_len ||
            !qp_encoding_padded_row_bytes(dst, row_len, &row_bytes))
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s cannot be stored in RDRR",
                        m->path, pe->src->name, qp_rdrr_dtype_name(pe->dst_enc));
        else
            s = qp_recipe_check_requantize(m, pe, dst, o->allow_requantize, e);
        pe->fallback |= why != NULL;
        pe->convert |= dst != pe->src_enc;
        pe->dst_enc = dst;
        pe->dst_bytes = row_bytes * (size_t)(n_el / (row_len > 0 ? row_len : 1));
        plan->dst_bytes += pe->dst_bytes;
        plan->n_fallback += pe->fallback;
    }
    if (s != QP_OK) qp_plan_free(plan);
    return s;
}

qp_status qp_convert_rdrr(const qp_model *m, const qp_rdrr_convert_opts *o, const char *out_dir,
                          qp_rdrr_convert_result *res, qp_err *e) {
    if (!m || !o || !out_dir) return qp_fail(e, QP_ERR_ARG, "convert rdrr: NULL argument");
    qp_plan plan;
    memset(&plan, 0, sizeof plan);
    bool have_plan = !o->passthrough;
    qp_status s = have_plan ? rdrr_recipe_plan(m, o, &plan, e)
                            : qp_model_check_for_write(m, o->allow_nonfinite, e);
    if (s == QP_OK && !have_plan) s = check_moe_layout(m, e);
    if (s == QP_OK && !have_plan) s = refuse_gemma_gguf_names(m, e);
    if (s != QP_OK) return s;
    qp_rdrr_writer *w = NULL;
    s = qp_rdrr_writer_open(out_dir, &o->w, &w, e);
    if (s != QP_OK) {
        if (have_plan) qp_plan_free(&plan);
        return s;
    }
    tally t;
    memset(&t, 0, sizeof t);
    dtype_changes changes = {0};
    if (!(changes.list = cJSON_CreateArray())) s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", out_dir);
    int64_t n = have_plan ? plan.n : m->n_tensors, padded_count = 0;
    uint64_t src_total = 0, src_done = 0;
    for (int64_t i = 0; i < n; i++) src_total += have_plan ? plan.t[i].src->nbytes : m->tensors[i].nbytes;
    for (int64_t i = 0; s == QP_OK && i < n; i++) {
        if (o->cancel && atomic_load(o->cancel)) {
            s = qp_fail(e, QP_ERR_CANCELLED, "%s: cancelled before tensor %lld of %lld", out_dir,
                        (long long)i + 1, (long long)n);
            break;
        }
        qp_plan_entry one;
        const qp_plan_entry *pe = have_plan ? &plan.t[i] : NULL;
        if (!have_plan) { /* gguf-to-rdrr: the source's bytes, or their exact F32 decoding */
            memset(&one, 0, sizeof one);
            one.src = &m->tensors[i];
            one.src_kind = QP_SRC_PLAIN;
            one.src_enc = one.dst_enc = m->tensors[i].enc;
            pe = &one;
        }
        const char *why = NULL;
        qp_encoding dst = rdrr_store_enc(pe->dst_enc, pe->src->ne[0], !have_plan, &why);
        if (dst == QP_ENC_COUNT) {
            s = qp_fail(e, QP_ERR_UNSUPPORTED, "%s: tensor '%s': dtype %s: DOPPLER's loader has no "
                                               "decoder for it and it has no float decoding to "
                                               "store instead; refused", m->path, pe->src->name,
                        qp_rdrr_dtype_name(pe->dst_enc));
            break;
        }
        if (have_plan && (s = qp_recipe_check_requantize(m, pe, dst, o->allow_requantize, e)) != QP_OK)
            break;
        const char *name = have_plan ? stored_name(m, pe) : pe->src->name;
        if (why && !note_change(&changes, name, pe->dst_enc, dst, why)) {
            s = qp_fail(e, QP_ERR_NOMEM, "%s: out of memory", out_dir);
            break;
        }
        if (!have_plan && dst == pe->src_enc) {
            s = write_passthrough(w, pe->src, e);
        } else {
            bool padded = false;
            s = write_converted(w, pe, name, dst, &padded, e);
            if (padded) padded_count++;
        }
        tally_add(&t, name, dst, pe->src->n_dims);
        src_done += pe->src->nbytes;
        if (s == QP_OK && o->progress)
            o->progress(o->progress_ud, i + 1, n, name, src_done, src_total,
                        qp_rdrr_writer_total_bytes(w));
    }
    const char *tok_kind = NULL, *note = NULL;
    if (s == QP_OK) s = carry_tokenizer(m, w, &tok_kind, &note, e);
    char skip_note[sizeof res->skip_note];
    int64_t n_skipped = plan.n_skipped;
    qp_plan_skip_note(skip_note, sizeof skip_note, n_skipped, n_skipped ? plan.skipped[0].src->name : "",
                      n_skipped ? plan.skipped[0].rule : "");
    if (have_plan) qp_plan_free(&plan);
    if (s != QP_OK) {
        cJSON_Delete(changes.list);
        qp_rdrr_writer_abort(w);
        return s;
    }
    const char *chat = tok_kind ? qp_model_chat_template(m) : NULL;
    cJSON *fields = manifest_fields(m, o, &t, tok_kind, m->vocab.n_tokens, changes.n > 0, chat);
    cJSON *qi = fields ? cJSON_GetObjectItemCaseSensitive(fields, "quantizationInfo") : NULL;
    if (qi && changes.n > 0) {
        cJSON_AddItemToObject(qi, "dtypeChanges", changes.list);
        changes.list = NULL;
    }
    bool attached = changes.list == NULL;
    cJSON_Delete(changes.list);
    if (!fields || !qi || (changes.n > 0 && !attached)) {
        cJSON_Delete(fields);
        qp_rdrr_writer_abort(w);
        return qp_fail(e, QP_ERR_NOMEM, "%s: out of memory building the manifest", out_dir);
    }
    int n_shards = qp_rdrr_writer_n_shards(w);
    uint64_t total = qp_rdrr_writer_total_bytes(w);
    s = qp_rdrr_writer_finish(w, fields, e);
    if (s == QP_OK && res) {
        res->n_tensors = n;
        res->n_padded_rows = padded_count;
        res->total_bytes = total;
        res->n_shards = n_shards;
        res->tokenizer_note = note;
        res->no_tokenizer = tok_kind == NULL;
        res->n_dtype_changes = changes.n;
        res->n_skipped = n_skipped;
        memcpy(res->skip_note, skip_note, sizeof skip_note);
        if (changes.n > 0)
            snprintf(res->dtype_note, sizeof res->dtype_note, "%lld tensor%s stored as %s instead of %s%s "
                     "(no DOPPLER decoder; quantizationInfo.dtypeChanges lists each and why)",
                     (long long)changes.n, changes.n == 1 ? "" : "s",
                     qp_rdrr_dtype_name(changes.first_to), qp_rdrr_dtype_name(changes.first_from),
                     changes.mixed ? " and others" : "");
    }
    return s;
}
