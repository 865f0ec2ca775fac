/* converters/convert_safetensors.h: any readable model -> a Hugging Face folder. */
#include <strings.h>

#include "converters/convert_safetensors.h"
#include "converters/recipe.h"
#include "readers/model_check.h"
#include "writers/safetensors_writer.h"

bool qp_hf_dtype_from_name(const char *name, qp_encoding *out) {
    static const struct {
        const char *name;
        qp_encoding enc;
    } k[] = {{"keep", QP_ENC_COUNT}, {"F32", QP_ENC_F32}, {"F16", QP_ENC_F16}, {"BF16", QP_ENC_BF16}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!name || strcasecmp(name, k[i].name) == 0) {
            *out = name ? k[i].enc : QP_ENC_COUNT;
            return true;
        }
    return false;
}

qp_status qp_convert_to_safetensors(const qp_model *src, const char *out, const qp_st_convert_opts *o,
                                    qp_st_convert_stats *st, qp_err *e) {
    qp_hf_plan plan = {0};
    qp_outdir *od = NULL;
    qp_hf_folder_result res = {0};
    qp_status s = qp_model_check_for_write(src, o->allow_nonfinite, e);
    if (s == QP_OK) s = qp_hf_folder_plan(src, o->folder.dtype, &plan, e);
    if (s == QP_OK) s = qp_outdir_open(out, &qp_hf_outdir_kind, o->force, &od, e);
    if (s == QP_OK) s = qp_hf_folder_write_plan(src, qp_outdir_path(od), &plan, &o->folder, &res, e);
    if (s == QP_OK) {
        s = qp_outdir_commit(od, e);
        od = NULL;
    }
    qp_outdir_abort(od);
    if (s == QP_OK && st) {
        st->n_tensors = plan.n - plan.n_skipped;
        st->n_skipped = plan.n_skipped;
        const qp_hf_plan_entry *first = NULL;
        for (int64_t i = 0; !first && i < plan.n; i++)
            if (plan.t[i].skip_rule) first = &plan.t[i];
        qp_plan_skip_note(st->skip_note, sizeof st->skip_note, plan.n_skipped,
                          first ? first->src->name : "", first ? first->skip_rule : "");
        st->bytes = plan.dst_bytes;
        st->folder = res;
    }
    qp_hf_plan_free(&plan);
    return s;
}
