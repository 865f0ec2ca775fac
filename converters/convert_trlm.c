/* converters/convert_trlm.h: any readable model -> a TRLM directory (the manifest, then the
 * same quantizer as trillim-quantize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "converters/convert_trlm.h"
#include "converters/hf_folder.h"
#include "converters/recipe.h"
#include "converters/trillim_bundle.h"
#include "converters/trillim_quantize.h"
#include "core/json.h"
#include "readers/model_check.h"
#include "writers/trlm_writer.h"

static qp_status copy_file(const char *src, const char *dst, qp_err *e) {
    char *buf = NULL;
    size_t len = 0;
    qp_status s = qp_file_read_all(src, (size_t)1 << 30, &buf, &len, e);
    if (s == QP_OK) s = qp_file_write_atomic(dst, buf, len, e);
    qp_free(buf);
    return s;
}

/* A source that is not a Hugging Face folder becomes one first, in a staging folder beside out
 * (for a plan without out: in the temporary directory) that the caller removes (qp_outdir_abort):
 * converters/hf_folder.md. */
static qp_status stage_hf_folder(const qp_model *src, const char *out, qp_outdir **stage, qp_err *e) {
    char tmp[512];
    if (!out) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/quantpack-trlm-plan-%ld", dir && *dir ? dir : "/tmp", (long)getpid());
        out = tmp;
    }
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--;
    char *target = qp_malloc(n + sizeof ".hf-source");
    if (!target) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    memcpy(target, out, n);
    memcpy(target + n, ".hf-source", sizeof ".hf-source");
    qp_status s = qp_outdir_open(target, NULL, false, stage, e);
    if (s == QP_OK) s = qp_hf_folder_write(src, qp_outdir_path(*stage), e);
    qp_free(target);
    return s;
}

/* The Hugging Face side files the SDK copies into a bundle (_output.py _MODEL_ALLOWLIST), and
 * the tokenizer file given, copied beside. */
static qp_status copy_side_files(const char *hf, const char *tok, qp_outdir *od, qp_err *e) {
    static const char *const k_side[] = {
        "added_tokens.json", "chat_template.jinja", "config.json", "generation_config.json", "merges.txt",
        "sentencepiece.bpe.model", "special_tokens_map.json", "spiece.model", "tokenizer.json",
        "tokenizer.model", "tokenizer_config.json", "vocab.json", "vocab.txt"};
    qp_status s = QP_OK;
    for (size_t i = 0; s == QP_OK && i < sizeof k_side / sizeof k_side[0]; i++) {
        char *from = qp_path_join(hf, k_side[i]);
        char *to = qp_outdir_join(od, k_side[i]);
        if (!from || !to) s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
        else if (qp_path_exists(from)) s = copy_file(from, to, e);
        qp_free(from);
        qp_free(to);
    }
    if (s == QP_OK && tok) {
        const char *base = strrchr(tok, '/');
        base = base ? base + 1 : tok;
        char *to = qp_outdir_join(od, base);
        s = to ? copy_file(tok, to, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
        qp_free(to);
    }
    return s;
}

/* inference.config: the one-line configuration the v1 inference binary reads. */
static qp_status write_inference_config(const qp_trillim_config *c, const char *path, qp_err *e) {
    char line[1024], eps[40], theta[40];
    qp_py_float_repr(c->norm_eps, eps, sizeof eps);
    qp_py_float_repr(c->rope_theta, theta, sizeof theta);
    int n = snprintf(line, sizeof line, "%d %d %lld %lld %lld %lld %lld %lld %lld %lld %s %s %d %d %d %d 0 %d",
                     c->arch_type, c->activation, (long long)c->hidden, (long long)c->intermediate,
                     (long long)c->n_layers, (long long)c->n_heads, (long long)c->n_kv_heads,
                     (long long)c->vocab, (long long)c->head_dim, (long long)c->max_pos, eps, theta,
                     c->tie_embeddings, c->qkv_bias, c->attn_sub_norm, c->ffn_sub_norm, c->n_eos);
    for (int i = 0; i < c->n_eos && n > 0 && (size_t)n < sizeof line - 24; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %lld", (long long)c->eos[i]);
    if (n <= 0 || (size_t)n >= sizeof line - 2)
        return qp_fail(e, QP_ERR_INTERNAL, "%s: configuration line too long", path);
    line[n++] = '\n';
    return qp_file_write_atomic(path, line, (size_t)n, e);
}

/* The source is a Hugging Face folder (the SDK's manifest describes it directly); any other source
 * is staged as one first. */
static bool is_hf_folder(const qp_model *src) {
    return src->format == QP_FORMAT_SAFETENSORS && qp_path_is_dir(src->path);
}

/* What the conversion reads: the Hugging Face folder (the source's own, or staged), its config,
 * the SDK's manifest of it, and for a staged folder the plan that says which source tensor each
 * key came from. */
typedef struct trlm_source {
    qp_outdir *stage;           /* NULL: the source is the folder */
    const char *hf;
    qp_trillim_config c;
    qp_trillim_manifest *man;
    qp_hf_plan hfp;
} trlm_source;

static void source_close(trlm_source *ts) {
    qp_trillim_manifest_free(ts->man);
    qp_hf_plan_free(&ts->hfp);
    qp_trillim_config_free(&ts->c);
    qp_outdir_abort(ts->stage);
    memset(ts, 0, sizeof *ts);
}

static qp_status source_open(const qp_model *src, const char *out, const qp_trlm_convert_opts *o,
                             trlm_source *ts, qp_err *e) {
    memset(ts, 0, sizeof *ts);
    const bool staged = !is_hf_folder(src);
    qp_status s = qp_model_check_for_write(src, o->allow_nonfinite, e);
    if (s == QP_OK) s = qp_model_refuse_experts(src, "TRLM (Trillim's DarkNet)", e);
    if (s == QP_OK) s = qp_model_refuse_gemma(src, "TRLM (Trillim's DarkNet)", e);
    if (s == QP_OK) s = qp_model_refuse_rope_factors(src, "TRLM (Trillim's DarkNet)", e);
    if (s == QP_OK && staged) s = qp_hf_folder_plan(src, QP_ENC_F32, &ts->hfp, e);
    if (s == QP_OK && staged) s = stage_hf_folder(src, out, &ts->stage, e);
    ts->hf = ts->stage ? qp_outdir_path(ts->stage) : src->path;
    if (s == QP_OK) s = qp_trillim_config_from_hf(ts->hf, &ts->c, e);
    ts->c.target = o->target;
    if (s == QP_OK) s = qp_trillim_manifest_build(ts->hf, &ts->c, o->lora, o->adapter_only, &ts->man, e);
    return s;
}

/* The source tensor a manifest key was read from. */
static const qp_tensor *source_tensor(const qp_model *src, const trlm_source *ts, const char *key) {
    if (!ts->stage) return qp_model_find(src, key);
    for (int64_t i = 0; i < ts->hfp.n; i++)
        if (!ts->hfp.t[i].skip_rule && strcmp(ts->hfp.t[i].hf_name, key) == 0) return ts->hfp.t[i].src;
    return NULL;
}

/* The options of trillim-quantize for this model (qp_trillim_quantize). */
static qp_trillim_quant_opts quant_opts(const qp_trillim_config *c, const char *mpath, const char *tpath,
                                        const char *rpath, const char *lpath, int64_t rank) {
    return (qp_trillim_quant_opts){
        .manifest_path = mpath, .output = tpath, .arch = c->arch_type, .hidden = c->hidden,
        .intermediate = c->intermediate, .hidden_orig = c->hidden_orig,
        .intermediate_orig = c->intermediate_orig, .norm_eps = c->norm_eps,
        .tie_embeddings = c->tie_embeddings, .rope_output = rpath, .rope_theta = c->rope_theta,
        .max_pos = c->max_pos, .head_dim = c->head_dim, .rope_dim = c->rope_dim, .lora_output = lpath,
        .lora_rank = rank,
        .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads};
}

/* One plan row per manifest entry: its key, the source tensor, the encoding and bytes the action
 * stores; the one requantize rule checked on each (recipe.h). */
static qp_status plan_rows(const qp_model *src, const trlm_source *ts, bool allow_requantize,
                           qp_plan *p, qp_err *e) {
    const qp_trillim_manifest *m = ts->man;
    const qp_trillim_quant_opts q = quant_opts(&ts->c, NULL, NULL, NULL, NULL, 0);
    p->t = qp_calloc(m->n_entries ? m->n_entries : 1, sizeof *p->t);
    p->names = qp_calloc(m->n_entries ? m->n_entries : 1, sizeof *p->names);
    if (!p->t || !p->names) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const qp_trillim_entry *t = &m->entries[i];
        const qp_tensor *st = source_tensor(src, ts, m->names[i]);
        if (!st)
            return qp_fail(e, QP_ERR_INTERNAL, "%s: no source tensor for the manifest's '%s'", src->path,
                           m->names[i]);
        if (!(p->names[i] = qp_strdup(m->names[i]))) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
        qp_plan_entry *pe = &p->t[p->n++];
        uint64_t bytes = 0;
        *pe = (qp_plan_entry){.src = st, .name = p->names[i], .src_enc = st->enc, .convert = true,
                              .n_dims = t->cols == 1 ? 1 : 2, .ne = {t->cols == 1 ? t->rows : t->cols,
                                                                     t->cols == 1 ? 1 : t->rows, 1, 1},
                              .action = qp_trillim_action_name(t->action),
                              /* a pre-quantized ternary source repacked is not requantized */
                              .src_kind = t->action == QP_TRILLIM_REPACK_TERNARY ? QP_SRC_BITNET_U8 : QP_SRC_PLAIN};
        qp_status s = qp_trillim_entry_output(t, &q, &pe->dst_enc, &bytes, e);
        if (s == QP_OK) s = qp_recipe_check_requantize(src, pe, pe->dst_enc, allow_requantize, e);
        if (s != QP_OK) return s;
        pe->dst_bytes = (size_t)bytes;
        p->src_bytes += st->nbytes;
        p->dst_bytes += bytes;
    }
    return QP_OK;
}

/* Whether t is read by a plan row: its source, or the "<key>_scale" of a pre-quantized weight. */
static bool plan_reads(const qp_plan *p, const qp_tensor *t) {
    size_t n = strlen(t->name);
    bool scale = n > 6 && strcmp(t->name + n - 6, "_scale") == 0;
    for (int64_t k = 0; k < p->n; k++)
        if (p->t[k].src == t ||
            (scale && strlen(p->t[k].name) == n - 6 && strncmp(p->t[k].name, t->name, n - 6) == 0))
            return true;
    return false;
}

/* The source tensors no manifest entry reads, each with its rule: the staging folder's (a
 * .bullet's task heads) or the SDK builder's. */
static qp_status plan_skipped(const qp_model *src, const trlm_source *ts, qp_plan *p, qp_err *e) {
    static const char k_sdk_rule[] = "left out by the Trillim SDK's manifest builder (a tied "
                                     "lm_head, rotary tables)";
    p->skipped = qp_calloc(src->n_tensors ? (size_t)src->n_tensors : 1, sizeof *p->skipped);
    if (!p->skipped) return qp_fail(e, QP_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < src->n_tensors; i++) {
        const qp_tensor *t = &src->tensors[i];
        bool used = plan_reads(p, t);
        const char *rule = k_sdk_rule;
        for (int64_t k = 0; ts->stage && k < ts->hfp.n; k++)
            if (ts->hfp.t[k].src == t && ts->hfp.t[k].skip_rule) rule = ts->hfp.t[k].skip_rule;
        if (!used) p->skipped[p->n_skipped++] = (qp_plan_skip){t, rule};
    }
    return QP_OK;
}

/* The plan of a conversion: the manifest's rows, then (for a model, not an adapter bundle, whose
 * manifest reads no model tensor) the source tensors it leaves out. */
static qp_status plan_build(const qp_model *src, const trlm_source *ts, const qp_trlm_convert_opts *o,
                            qp_plan *p, qp_err *e) {
    qp_status s = plan_rows(src, ts, o->allow_requantize, p, e);
    if (s == QP_OK && !o->adapter_only) s = plan_skipped(src, ts, p, e);
    return s;
}

qp_status qp_convert_trlm_plan(const qp_model *src, const qp_trlm_convert_opts *o, qp_plan *out, qp_err *e) {
    trlm_source ts;
    qp_plan p = {0};
    qp_status s = source_open(src, NULL, o, &ts, e);
    if (s == QP_OK) s = plan_build(src, &ts, o, &p, e);
    source_close(&ts);
    if (s != QP_OK) {
        qp_plan_free(&p);
        return s;
    }
    *out = p;
    return QP_OK;
}

/* The converter's progress from trillim-quantize's: entry k's key. */
typedef struct progress_relay {
    const qp_trlm_convert_opts *o;
    const qp_trillim_manifest *man;
} progress_relay;

static void relay_progress(void *ud, int64_t k, int64_t n, uint64_t done, uint64_t total) {
    const progress_relay *r = ud;
    r->o->progress(r->o->progress_ud, k, n, r->man->names[k - 1], done, total);
}

/* Writes the manifest, parses it back and executes it (the trillim-quantize path). A model:
 * qmodel.tensors, rope.cache [, qmodel.lora]; adapter_only (run_adapter_quantizer): the
 * adapter-only manifest, qmodel.lora, and the unused qmodel.tensors the SDK also discards. */
static qp_status quantize_from_manifest(const trlm_source *ts, const qp_trlm_convert_opts *o,
                                        const char *mpath, qp_outdir *od, qp_err *e) {
    qp_trillim_manifest *m2 = NULL;
    uint8_t *mbytes = NULL;
    size_t mlen = 0;
    const bool ao = o->adapter_only;
    char *tpath = qp_outdir_join(od, ao ? ".unused-qmodel.tensors" : "qmodel.tensors"),
         *rpath = qp_outdir_join(od, "rope.cache"), *lpath = qp_outdir_join(od, "qmodel.lora");
    qp_status s = tpath && rpath && lpath ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = qp_trillim_manifest_serialize(ts->man, &mbytes, &mlen, e);
    if (s == QP_OK) s = qp_file_write_atomic(mpath, mbytes, mlen, e);
    if (s == QP_OK) s = qp_trillim_manifest_read(mpath, &m2, e);
    int64_t rank = 0;
    if (s == QP_OK && o->lora) s = qp_trillim_adapter_rank(o->lora, &rank, e);
    if (s == QP_OK) { /* the adapter run passes no rope flags */
        qp_trillim_quant_opts q = quant_opts(&ts->c, mpath, tpath, ao ? NULL : rpath, o->lora ? lpath : NULL, rank);
        progress_relay relay = {o, ts->man};
        if (o->progress && m2->n_entries == ts->man->n_entries) {
            q.progress = relay_progress;
            q.progress_ud = &relay;
        }
        s = qp_trillim_quantize(m2, &q, e);
    }
    if (ao) unlink(tpath);
    qp_trillim_manifest_free(m2);
    qp_free(mbytes);
    qp_free(tpath);
    qp_free(rpath);
    qp_free(lpath);
    return s;
}

/* What goes beside qmodel.tensors (the model) or qmodel.lora (an adapter bundle). */
static qp_status write_side_files(const char *hf, const qp_trillim_config *c, const qp_trlm_convert_opts *o,
                                  qp_outdir *od, qp_err *e) {
    char *cfgp = qp_outdir_join(od, "inference.config"), *bundlep = qp_outdir_join(od, "trillim_config.json");
    qp_status s = cfgp && bundlep ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK && o->adapter_only) {
        s = qp_trillim_adapter_files_copy(o->lora, od, e);
        if (s == QP_OK) s = qp_trillim_adapter_bundle_write(hf, o->lora, c, bundlep, e);
    } else if (s == QP_OK) {
        s = copy_side_files(hf, o->tokenizer, od, e);
        if (s == QP_OK) s = write_inference_config(c, cfgp, e);
        if (s == QP_OK) s = qp_trillim_bundle_write(hf, c, bundlep, e);
    }
    qp_free(cfgp);
    qp_free(bundlep);
    /* the SDK's publish marker (quantize/_output.py mark_staging_complete), last, as the SDK
       writes it into its staging folder before the rename (converters/trillim_sdk.md) */
    char *marker = s == QP_OK ? qp_outdir_join(od, ".trillim-quantize-complete") : NULL;
    if (s == QP_OK) s = marker ? qp_file_write_atomic(marker, "ready\n", 6, e) : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    qp_free(marker);
    return s;
}

/* The adapter-only form's preconditions, as the SDK's quantize() checks them. */
static qp_status check_adapter_only(const qp_trlm_convert_opts *o, const char *out, qp_err *e) {
    if (!o->lora) return qp_fail(e, QP_ERR_ARG, "an adapter bundle (--adapter-only) needs --lora PEFT_DIR");
    if (o->target != QP_TRILLIM_TARGET_AUTO)
        return qp_fail(e, QP_ERR_ARG, "--quant only applies when quantizing a base model, not an adapter "
                       "bundle (the SDK's quantize() refuses it too)");
    if (o->tokenizer) return qp_fail(e, QP_ERR_ARG, "--tokenizer: an adapter bundle copies the adapter's own files");
    char *model = qp_path_join(out, "qmodel.tensors");
    bool is_model = model && qp_path_exists(model);
    qp_free(model);
    if (is_model) /* -f would mix the bundle into a model folder (its qmodel.lora is the marker) */
        return qp_fail(e, QP_ERR_IO, "%s: holds a TRLM model (qmodel.tensors); an adapter bundle goes into a "
                       "folder of its own", out);
    return QP_OK;
}

qp_status qp_convert_to_trlm(const qp_model *src, const char *out, const qp_trlm_convert_opts *o,
                             qp_trlm_convert_stats *st, qp_err *e) {
    qp_status s = o->adapter_only ? check_adapter_only(o, out, e) : QP_OK;
    if (s != QP_OK) return s;
    /* checked before anything is staged: the manifest of a staged source would name its copy */
    if (o->save_manifest && !is_hf_folder(src))
        return qp_fail(e, QP_ERR_ARG, "%s: --save-manifest needs a Hugging Face folder as the source: the "
                       "manifest of a %s source would name its staged copy, removed after conversion",
                       o->save_manifest, qp_format_name(src->format));
    qp_outdir *od = NULL;
    char *mpath = NULL;
    trlm_source ts;
    qp_plan plan = {0};
    s = source_open(src, out, o, &ts, e);
    if (s == QP_OK) s = plan_build(src, &ts, o, &plan, e);
    if (s == QP_OK)
        s = qp_outdir_open(out, o->adapter_only ? &qp_trlm_adapter_outdir_kind : &qp_trlm_outdir_kind,
                           o->force, &od, e);
    /* the manifest lives in the partial folder only while the quantizer runs, and is removed
       before the folder is committed, as the SDK's run_model_quantizer removes its own
       (converters/trillim_sdk.md "Where the manifest goes") */
    if (s == QP_OK && !(mpath = qp_outdir_join(od, ".quantize_manifest.bin")))
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = quantize_from_manifest(&ts, o, mpath, od, e);
    if (s == QP_OK && o->save_manifest) s = copy_file(mpath, o->save_manifest, e);
    if (mpath) unlink(mpath);
    if (s == QP_OK) s = write_side_files(ts.hf, &ts.c, o, od, e);
    if (s == QP_OK) {
        s = qp_outdir_commit(od, e);
        od = NULL;
    }
    qp_outdir_abort(od);
    if (s == QP_OK && st) {
        st->n_tensors = o->adapter_only ? 0 : ts.man->n_entries;
        st->has_tokenizer = src->vocab.n_tokens > 0;
        st->n_skipped = plan.n_skipped;
        qp_plan_skip_note(st->skip_note, sizeof st->skip_note, plan.n_skipped,
                          plan.n_skipped ? plan.skipped[0].src->name : "",
                          plan.n_skipped ? plan.skipped[0].rule : "");
    }
    source_close(&ts);
    qp_plan_free(&plan);
    qp_free(mpath);
    return s;
}
