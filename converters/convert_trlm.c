/* converters/convert_trlm.h: any readable model -> a TRLM directory (the manifest, then the
 * same quantizer as trillim-quantize). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "converters/convert_trlm.h"
#include "converters/hf_folder.h"
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
 * that the caller removes (qp_outdir_abort): converters/hf_folder.md. */
static qp_status stage_hf_folder(const qp_model *src, const char *out, qp_outdir **stage, qp_err *e) {
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

/* Writes the manifest for hf, parses it back and executes it (the trillim-quantize path). A
 * model: qmodel.tensors, rope.cache [, qmodel.lora]; adapter_only (run_adapter_quantizer): the
 * adapter-only manifest, qmodel.lora, and the unused qmodel.tensors the SDK also discards. */
static qp_status quantize_from_manifest(const char *hf, const qp_trillim_config *c,
                                        const qp_trlm_convert_opts *o, const char *mpath,
                                        qp_outdir *od, int64_t *n_tensors, qp_err *e) {
    qp_trillim_manifest *m = NULL, *m2 = NULL;
    uint8_t *mbytes = NULL;
    size_t mlen = 0;
    const bool ao = o->adapter_only;
    char *tpath = qp_outdir_join(od, ao ? ".unused-qmodel.tensors" : "qmodel.tensors"),
         *rpath = qp_outdir_join(od, "rope.cache"), *lpath = qp_outdir_join(od, "qmodel.lora");
    qp_status s = tpath && rpath && lpath ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = qp_trillim_manifest_build(hf, c, o->lora, ao, &m, e);
    if (s == QP_OK) s = qp_trillim_manifest_serialize(m, &mbytes, &mlen, e);
    if (s == QP_OK) s = qp_file_write_atomic(mpath, mbytes, mlen, e);
    if (s == QP_OK) s = qp_trillim_manifest_read(mpath, &m2, e);
    int64_t rank = 0;
    if (s == QP_OK && o->lora) s = qp_trillim_adapter_rank(o->lora, &rank, e);
    if (s == QP_OK) { /* the adapter run passes no rope flags */
        qp_trillim_quant_opts q = {mpath, tpath, c->arch_type, c->hidden, c->intermediate,
                                   c->hidden_orig, c->intermediate_orig, c->norm_eps,
                                   c->tie_embeddings, ao ? NULL : rpath, c->rope_theta, c->max_pos,
                                   c->head_dim, o->lora ? lpath : NULL, rank, c->n_heads,
                                   c->n_kv_heads, 0, 0, 0, 0, 0};
        s = qp_trillim_quantize(m2, &q, e);
    }
    if (ao) unlink(tpath);
    if (s == QP_OK) *n_tensors = ao ? 0 : m->n_entries;
    qp_trillim_manifest_free(m2);
    qp_trillim_manifest_free(m);
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
    qp_outdir *od = NULL, *stage = NULL;
    char *mpath = NULL;
    int64_t n_tensors = 0;
    qp_trillim_config c = {0};
    const bool is_hf = src->format == QP_FORMAT_SAFETENSORS && qp_path_is_dir(src->path);
    qp_status s = o->adapter_only ? check_adapter_only(o, out, e) : QP_OK;
    if (s == QP_OK) s = qp_model_check_for_write(src, o->allow_nonfinite, e);
    if (s == QP_OK) s = qp_model_refuse_experts(src, "TRLM (Trillim's DarkNet)", e);
    if (s == QP_OK && !is_hf) s = stage_hf_folder(src, out, &stage, e);
    /* hf: the Hugging Face folder the SDK's manifest describes (a staged one is removed at the
       end, and its manifest with it) */
    const char *hf = stage ? qp_outdir_path(stage) : src->path;
    if (s == QP_OK) s = qp_trillim_config_from_hf(hf, &c, e);
    if (s == QP_OK) {
        c.target = o->target;
        s = qp_outdir_open(out, o->adapter_only ? &qp_trlm_adapter_outdir_kind : &qp_trlm_outdir_kind,
                           o->force, &od, e);
    }
    if (s == QP_OK && stage && o->save_manifest)
        s = qp_fail(e, QP_ERR_ARG, "%s: --save-manifest needs a Hugging Face folder as the source: the "
                    "manifest of a %s source would name its staged copy, removed after conversion",
                    o->save_manifest, qp_format_name(src->format));
    /* the manifest lives in the staging folder only while the quantizer runs, and is removed
       before the folder is committed, as the SDK's run_model_quantizer removes its own
       (converters/trillim_sdk.md "Where the manifest goes") */
    if (s == QP_OK && !(mpath = qp_outdir_join(od, ".quantize_manifest.bin")))
        s = qp_fail(e, QP_ERR_NOMEM, "out of memory");
    if (s == QP_OK) s = quantize_from_manifest(hf, &c, o, mpath, od, &n_tensors, e);
    if (s == QP_OK && o->save_manifest) s = copy_file(mpath, o->save_manifest, e);
    if (mpath) unlink(mpath);
    if (s == QP_OK) s = write_side_files(hf, &c, o, od, e);
    if (s == QP_OK) {
        s = qp_outdir_commit(od, e);
        od = NULL;
    }
    qp_outdir_abort(od);
    qp_outdir_abort(stage);
    qp_free(mpath);
    qp_trillim_config_free(&c);
    if (s == QP_OK && st) {
        st->n_tensors = n_tensors;
        st->has_tokenizer = src->vocab.n_tokens > 0;
    }
    return s;
}
