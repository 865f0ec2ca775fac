/* include/quantpack/convert.h: one call over the GGUF, RDRR, .bullet, TRLM and safetensors converters, with the
 * output rule of core/outfile.md applied as the convert command applies it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "converters/convert_bullet.h"
#include "converters/convert_gguf.h"
#include "converters/convert_rdrr.h"
#include "converters/convert_safetensors.h"
#include "converters/convert_trlm.h"
#include "quantpack/convert.h"
#include "writers/safetensors_writer.h"
#include "writers/trlm_writer.h"

void qp_convert_params_default(qp_convert_params *p) {
    memset(p, 0, sizeof *p);
    p->target = QP_CONVERT_TO_GGUF;
}

static int threads_of(int n) {
    if (n > 0) return n;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)(cores > 64 ? 64 : cores) : 1;
}

static bool cancelled(const qp_convert_params *p) { return p->cancel && atomic_load(p->cancel); }

/* The recipe named by p->quant for GGUF and RDRR (NULL: Q4_K_M); a BitNet recipe only for a
 * BitNet model, and never for RDRR (DOPPLER has no ternary dtype). */
static qp_status quant_of(const qp_model *m, const qp_convert_params *p, const char *out_path,
                          qp_quant *q, qp_err *e) {
    *q = p->quant ? qp_quant_from_name(p->quant) : QP_QUANT_Q4_K_M;
    if (*q == QP_QUANT_COUNT)
        return qp_fail(e, QP_ERR_ARG, "%s: unknown quant '%s'", out_path, p->quant);
    if (!qp_quant_is_ternary(*q)) return QP_OK;
    if (p->target == QP_CONVERT_TO_RDRR)
        return qp_fail(e, QP_ERR_ARG, "%s: quant %s is not an RDRR dtype", out_path, p->quant);
    if (m->arch.family != QP_FAMILY_BITNET)
        return qp_fail(e, QP_ERR_ARG, "%s: quant %s is for BitNet models; %s is %s", out_path,
                       p->quant, m->path, qp_family_name(m->arch.family));
    return QP_OK;
}

typedef struct progress_relay {
    const qp_convert_params *p;
} progress_relay;

static void relay_gguf(void *ud, int64_t k, int64_t n, const qp_plan_entry *pe, uint64_t done,
                       uint64_t total) {
    (void)pe;
    (void)total;
    const progress_relay *r = ud;
    r->p->progress(r->p->progress_user, k, n, done);
}

static void relay_rdrr(void *ud, int64_t k, int64_t n, const char *name, uint64_t src_done,
                       uint64_t src_total, uint64_t out_bytes) {
    (void)name;
    (void)src_done;
    (void)src_total;
    const progress_relay *r = ud;
    r->p->progress(r->p->progress_user, k, n, out_bytes);
}

static qp_status to_gguf(const qp_model *m, const qp_convert_params *p, qp_quant q,
                         const char *out_path, qp_convert_result *res, qp_err *e) {
    progress_relay relay = {p};
    qp_convert_opts co;
    memset(&co, 0, sizeof co);
    co.quant = q;
    co.threads = threads_of(p->n_threads);
    co.allow_requantize = p->allow_requantize;
    co.allow_nonfinite = p->allow_nonfinite;
    co.progress = p->progress ? relay_gguf : NULL;
    co.progress_ud = &relay;
    co.cancel = p->cancel;
    qp_plan plan;
    qp_status s = qp_convert_gguf_plan(m, &co, &plan, e);
    if (s != QP_OK) return s;
    s = qp_convert_gguf_write(m, &plan, &co, out_path, e);
    if (s == QP_OK) *res = (qp_convert_result){plan.n, plan.n_skipped, plan.dst_bytes};
    qp_plan_free(&plan);
    return s;
}

static qp_status to_rdrr(const qp_model *m, const qp_convert_params *p, qp_quant q,
                         const char *out_path, qp_convert_result *res, qp_err *e) {
    progress_relay relay = {p};
    qp_rdrr_convert_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.quant = q;
    ro.allow_requantize = p->allow_requantize;
    ro.allow_nonfinite = p->allow_nonfinite;
    ro.w.replace = p->force;
    ro.progress = p->progress ? relay_rdrr : NULL;
    ro.progress_ud = &relay;
    ro.cancel = p->cancel;
    qp_rdrr_convert_result r;
    memset(&r, 0, sizeof r);
    qp_status s = qp_convert_rdrr(m, &ro, out_path, &r, e);
    if (s == QP_OK) *res = (qp_convert_result){r.n_tensors, 0, r.total_bytes};
    return s;
}

static qp_status to_bullet(const qp_model *m, const qp_convert_params *p, const char *out_path,
                           qp_convert_result *res, qp_err *e) {
    if (p->quant)
        return qp_fail(e, QP_ERR_ARG, "%s: .bullet weights are BQ4; quant must be NULL, not '%s'",
                       out_path, p->quant);
    qp_bullet_convert_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.allow_nonfinite = p->allow_nonfinite;
    bo.allow_requantize = p->allow_requantize;
    qp_bullet_convert_stats st;
    memset(&st, 0, sizeof st);
    qp_status s = qp_convert_to_bullet(m, out_path, &bo, &st, e);
    if (s != QP_OK) return s;
    *res = (qp_convert_result){st.n_tensors, 0, st.bytes};
    if (p->progress) p->progress(p->progress_user, st.n_tensors, st.n_tensors, st.bytes);
    return QP_OK;
}

/* TRLM: quant names how 2-D float weights are stored (the SDK's --quantization). */
static qp_status to_trlm(const qp_model *m, const qp_convert_params *p, const char *out_path,
                         qp_convert_result *res, qp_err *e) {
    qp_trlm_convert_opts to = {.target = QP_TRILLIM_TARGET_AUTO, .force = p->force,
                               .allow_nonfinite = p->allow_nonfinite,
                               .allow_requantize = p->allow_requantize};
    if (p->quant && !qp_trillim_target_from_name(p->quant, &to.target))
        return qp_fail(e, QP_ERR_ARG, "%s: unknown TRLM quant '%s' (auto, ternary, bf16, q8_0, q8_0_blocked_32, int8, "
                      "q1_0_128, grouped_ternary_128)",
                       out_path, p->quant);
    qp_trlm_convert_stats st = {0};
    qp_status s = qp_convert_to_trlm(m, out_path, &to, &st, e);
    if (s != QP_OK) return s;
    *res = (qp_convert_result){st.n_tensors, st.n_skipped, 0};
    if (p->progress) p->progress(p->progress_user, st.n_tensors, st.n_tensors, 0);
    return QP_OK;
}

static void relay_hf(void *ud, int64_t k, int64_t n, const char *name, uint64_t done, uint64_t total) {
    (void)name;
    (void)total;
    const progress_relay *r = ud;
    r->p->progress(r->p->progress_user, k, n, done);
}

/* SAFETENSORS: quant names the dtype (F32, F16, BF16; NULL or keep). */
static qp_status to_safetensors(const qp_model *m, const qp_convert_params *p, const char *out_path,
                                qp_convert_result *res, qp_err *e) {
    progress_relay relay = {p};
    qp_st_convert_opts so = {.folder = {.progress = p->progress ? relay_hf : NULL, .progress_user = &relay,
                                        .cancel = p->cancel},
                             .force = p->force, .allow_nonfinite = p->allow_nonfinite};
    if (!qp_hf_dtype_from_name(p->quant, &so.folder.dtype))
        return qp_fail(e, QP_ERR_ARG, "%s: unknown safetensors quant '%s' (F32, F16, BF16, keep)", out_path, p->quant);
    qp_st_convert_stats st = {0};
    qp_status s = qp_convert_to_safetensors(m, out_path, &so, &st, e);
    if (s == QP_OK) *res = (qp_convert_result){st.n_tensors, st.n_skipped, st.bytes};
    return s;
}

qp_status qp_convert_model(const qp_model *src, const qp_convert_params *p, const char *out_path,
                           qp_convert_result *res, qp_err *e) {
    if (!src || !p || !out_path)
        return qp_fail(e, QP_ERR_ARG, "qp_convert_model: NULL %s",
                       !src ? "src" : !p ? "params" : "out_path");
    if ((unsigned)p->target >= QP_CONVERT_TARGET_COUNT)
        return qp_fail(e, QP_ERR_ARG, "%s: unknown conversion target %d", out_path, (int)p->target);
    qp_quant q = QP_QUANT_COUNT;
    if (p->target == QP_CONVERT_TO_GGUF || p->target == QP_CONVERT_TO_RDRR) {
        qp_status s = quant_of(src, p, out_path, &q, e);
        if (s != QP_OK) return s;
    }
    const char *const inputs[] = {src->path, NULL};
    const qp_outdir_kind *kind = p->target == QP_CONVERT_TO_RDRR          ? &qp_rdrr_outdir_kind
                                 : p->target == QP_CONVERT_TO_TRLM        ? &qp_trlm_outdir_kind
                                 : p->target == QP_CONVERT_TO_SAFETENSORS ? &qp_hf_outdir_kind
                                                                          : NULL;
    const qp_output_rule rule = {.force = p->force,
                                 .directory = kind != NULL,
                                 .kind = kind,
                                 .inputs = inputs};
    qp_status s = qp_output_check(out_path, &rule, e);
    if (s == QP_OK) s = qp_output_remove_stale(out_path, NULL, e);
    if (s != QP_OK) return s;
    if (cancelled(p)) return qp_fail(e, QP_ERR_CANCELLED, "%s: cancelled before it started", out_path);
    qp_convert_result r = {0, 0, 0};
    switch (p->target) {
    case QP_CONVERT_TO_GGUF: s = to_gguf(src, p, q, out_path, &r, e); break;
    case QP_CONVERT_TO_RDRR: s = to_rdrr(src, p, q, out_path, &r, e); break;
    case QP_CONVERT_TO_TRLM: s = to_trlm(src, p, out_path, &r, e); break;
    case QP_CONVERT_TO_SAFETENSORS: s = to_safetensors(src, p, out_path, &r, e); break;
    default: s = to_bullet(src, p, out_path, &r, e); break;
    }
    if (s == QP_OK && res) *res = r;
    return s;
}
