/* quantpack verify OUT --against SRC [--prompts FILE] [--receipt FILE.json] [-n N]
 * [--tokenizer FILE] [--threads N] [--min-cosine X] [--max-kl X] [--min-top1 X]
 * [--min-greedy X] [--pubkey K.pub]: runs the same prompts through both models with the
 * reference runtime and compares the logits at every position (runtime/runtime.md "verify").
 * quantpack verify RDRR_DIR [--pubkey K.pub] (no --against): the integrity check alone: every
 * shard, group and Merkle hash (the reader), then manifest.json.sig (readers/rdrr.md "Signature":
 * only --pubkey makes the signer trusted; a key found in the signature or beside the manifest is
 * reported, never trusted). An RDRR OUT with --against gets the same signature check first.
 * Exit 0 pass, 1 fail (thresholds, hashes, a bad or missing-but-required signature), 2 usage,
 * 3/4/5 as for every command. */
#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include "cli/cli.h"
#include "core/hash.h"
#include "quantpack/runtime.h"
#include "quantpack/tokenizer.h"
#include "writers/rdrr_writer.h"

#define VERIFY_MAX_PROMPTS 1024

static const char k_verify_usage[] =
    "usage: quantpack verify OUT --against SRC [options]\n\n"
    "Runs the same prompts through SRC and OUT (teacher-forced on SRC's greedy\n"
    "continuation) and compares the logits at every position: cosine similarity, max\n"
    "|diff|, KL(softmax(SRC) || softmax(OUT)), top-1 agreement, and the greedy tokens\n"
    "(exact match, first divergence). Exit 0 when every threshold holds, 1 when not.\n"
    "Thresholds default by OUT's lowest-precision matrix encoding (runtime.md).\n\n"
    "usage: quantpack verify RDRR_DIR [--pubkey K.pub]\n\n"
    "Integrity of an RDRR directory without running it: every shard SHA-256, group hash\n"
    "and block Merkle root, then the Ed25519 signature manifest.json.sig when present.\n"
    "Only --pubkey makes the check trusted: the public key written in the signature (or\n"
    "a K.pub lying beside the manifest) could have been replaced together with it, so\n"
    "without --pubkey a valid signature is reported as \"signed, key not given\". A bad\n"
    "signature, a signer other than --pubkey, or --pubkey on an unsigned directory fail\n"
    "(exit 1).\n";

typedef struct prompt_list {
    qp_verify_prompt p[VERIFY_MAX_PROMPTS];
    int32_t *ids[VERIFY_MAX_PROMPTS];
    char *text[VERIFY_MAX_PROMPTS];
    int64_t n;
} prompt_list;

static void prompts_free(prompt_list *pl) {
    for (int64_t i = 0; i < pl->n; i++) {
        qp_free(pl->ids[i]);
        qp_free(pl->text[i]);
    }
    pl->n = 0;
}

/* Adds a text prompt (tokenized) or an "ids:" prompt. Returns an exit code or -1 on success. */
/* --tokenizer is for the model without one (a llama2.c checkpoint): a model whose own files
 * give a tokenizer (an HF folder, a GGUF) keeps it, so one flag serves OUT and SRC. */
static qp_status open_with_tokenizer(const char *path, const qp_open_opts *oo, qp_model **m, qp_err *e) {
    qp_status s = qp_model_open(path, NULL, m, e);
    if (s != QP_OK || !oo->tokenizer_path || (*m)->vocab.n_tokens > 0) return s;
    qp_model_close(*m);
    *m = NULL;
    return qp_model_open(path, oo, m, e);
}

static int add_prompt(prompt_list *pl, const char *line, const qp_tokenizer *tok,
                      const qp_model *tm, int64_t lineno) {
    if (pl->n == VERIFY_MAX_PROMPTS)
        return qp_cli_usage_error("verify: more than %d prompts", VERIFY_MAX_PROMPTS);
    int64_t i = pl->n;
    int32_t *ids = NULL;
    int64_t n = 0;
    if (strncmp(line, "ids:", 4) == 0) {
        qp_err e = {0};
        if (qp_cli_parse_ids(line + 4, " \t,\r", &ids, &n, &e) == QP_ERR_NOMEM) return qp_cli_fail(&e);
        if (e.status != QP_OK || n == 0) {
            qp_free(ids);
            return qp_cli_usage_error("verify: prompts line %lld: bad id list", (long long)lineno);
        }
    } else {
        if (!tok)
            return qp_cli_usage_error("verify: prompts line %lld is text but neither model has a "
                                      "tokenizer (use \"ids: ...\" or --tokenizer)",
                                      (long long)lineno);
        qp_err e = {0};
        if (qp_tokenizer_encode(tok, line, strlen(line), qp_model_adds_bos(tm), false, &ids, &n, &e) !=
            QP_OK)
            return qp_cli_fail(&e);
        if (n == 0) {
            qp_free(ids);
            return qp_cli_usage_error("verify: prompts line %lld has no tokens", (long long)lineno);
        }
        if (!(pl->text[i] = qp_strdup(line))) {
            qp_free(ids);
            return qp_cli_error(QP_ERR_NOMEM, "out of memory");
        }
    }
    pl->ids[i] = ids;
    pl->p[i].ids = ids;
    pl->p[i].n_ids = n;
    pl->p[i].text = pl->text[i];
    pl->n++;
    return -1;
}

static int read_prompts(prompt_list *pl, const char *file, const qp_tokenizer *tok,
                        const qp_model *tm) {
    char *buf = NULL;
    size_t len = 0;
    qp_err e = {0};
    if (qp_file_read_all(file, (size_t)64 << 20, &buf, &len, &e) != QP_OK) return qp_cli_fail(&e);
    int rc = -1;
    int64_t lineno = 0;
    for (char *p = buf; rc < 0 && p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *end = nl ? nl : buf + len;
        lineno++;
        *end = '\0';
        if (end > p && end[-1] == '\r') end[-1] = '\0';
        if (*p && *p != '#') rc = add_prompt(pl, p, tok, tm, lineno);
        p = end + 1;
    }
    qp_free(buf);
    if (rc < 0 && pl->n == 0) rc = qp_cli_usage_error("verify: %s has no prompts", file);
    return rc;
}

static void print_summary(const qp_verify_report *r, const qp_verify_thresholds *th,
                          const prompt_list *pl) {
    printf("verify: OUT on the %s path\n", qp_verify_report_fast(r) ? "fast" : "exact");
    printf("verify: class %s (min mean cosine %.9g, max mean KL %.3g, min top-1 %.3g, min greedy "
           "%.3g)\n", th->class_name ? th->class_name : "custom", th->min_cosine, th->max_kl,
           th->min_top1, th->min_greedy_match);
    for (int64_t i = 0; i < qp_verify_report_n_prompts(r); i++) {
        const qp_verify_prompt_result *p = qp_verify_report_prompt(r, i);
        printf("prompt %lld (%lld tokens): %lld positions, cosine min %.9f mean %.9f, max |diff| "
               "%.3g, KL mean %.3g max %.3g, top-1 %.4f, greedy %lld/%lld",
               (long long)i + 1, (long long)pl->p[i].n_ids, (long long)p->n_positions,
               p->min_cosine, p->mean_cosine, p->max_abs_diff, p->mean_kl, p->max_kl,
               p->top1_agreement, (long long)p->matched,
               (long long)(p->n_positions - pl->p[i].n_ids + 1));
        if (p->first_divergence >= 0) printf(" (first divergence at token %lld)",
                                             (long long)p->first_divergence);
        putchar('\n');
    }
    if (qp_verify_report_passed(r)) printf("verdict: PASS\n");
    else printf("verdict: FAIL\n%s", qp_verify_report_reasons(r));
}

/* ---- RDRR: signature and integrity (readers/rdrr.md "Signature") ----------------------------- */

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A signature problem is a failed verification (exit 1) unless the cause is I/O or memory. */
static int sig_fail(qp_err *e) {
    if (e->status != QP_ERR_IO && e->status != QP_ERR_NOMEM && e->status != QP_ERR_INTERNAL)
        e->status = QP_ERR_VERIFY;
    return qp_cli_fail(e);
}

/* Checks DIR/manifest.json.sig. With pubkey the signer must be that key (trusted). Without it a
 * valid signature is reported as "signed, key not given": its key comes from the signature file
 * itself, and a *.pub beside the manifest is only compared (a different key fails), never
 * trusted, since whoever can change the manifest can change those too. */
static int check_rdrr_signature(const char *dir, const char *pubkey) {
    qp_err e = {0};
    char *sp = qp_path_join(dir, QP_RDRR_SIG_FILE);
    if (!sp) return qp_cli_error(QP_ERR_NOMEM, "out of memory");
    bool signed_dir = qp_path_exists(sp);
    qp_free(sp);
    if (!signed_dir) {
        if (pubkey) {
            qp_fail(&e, QP_ERR_VERIFY, "%s: not signed (no %s), but --pubkey %s asks for a signature "
                                       "by that key", dir, QP_RDRR_SIG_FILE, pubkey);
            return qp_cli_fail(&e);
        }
        printf("signature: none (%s/%s absent; --pubkey would require one)\n", dir, QP_RDRR_SIG_FILE);
        return QP_EXIT_OK;
    }
    uint8_t pk[32], signer[32];
    char hex[QP_SHA256_HEX];
    if (pubkey) {
        if (qp_rdrr_key_read_public(pubkey, pk, &e) != QP_OK) return qp_cli_fail(&e);
        if (qp_rdrr_verify_signature(dir, pk, signer, &e) != QP_OK) return sig_fail(&e);
        qp_hex_encode(signer, 32, hex);
        printf("signature ok (trusted): %s/manifest.json signed by ed25519:%s, the key in %s\n", dir,
               hex, pubkey);
        return QP_EXIT_OK;
    }
    if (qp_rdrr_verify_signature(dir, NULL, signer, &e) != QP_OK) return sig_fail(&e);
    qp_hex_encode(signer, 32, hex);
    /* public keys shipped beside the manifest: compared, not trusted */
    char beside[512] = "";
    DIR *d = opendir(dir);
    struct dirent *de;
    int rc = QP_EXIT_OK;
    while (d && rc == QP_EXIT_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".pub")) continue;
        char *kp = qp_path_join(dir, de->d_name);
        qp_err ke = {0};
        if (!kp) rc = qp_cli_error(QP_ERR_NOMEM, "out of memory");
        else if (qp_rdrr_key_read_public(kp, pk, &ke) == QP_OK) {
            if (memcmp(pk, signer, 32) != 0) {
                qp_fail(&e, QP_ERR_VERIFY, "%s/%s: signed by ed25519:%s, not by the key %s lying "
                                           "beside the manifest", dir, QP_RDRR_SIG_FILE, hex, kp);
                rc = qp_cli_fail(&e);
            } else if (!beside[0]) {
                snprintf(beside, sizeof beside, "; equal to %s beside it, which proves no more", kp);
            }
        }
        qp_free(kp);
    }
    if (d) closedir(d);
    if (rc != QP_EXIT_OK) return rc;
    printf("signed, key not given: %s/%s is a valid Ed25519 signature by ed25519:%s, the key "
           "written in the signature itself%s. Anyone who can change the manifest can replace the "
           "signature and its key too: pass --pubkey K.pub (a key obtained separately) for a "
           "trusted check\n", dir, QP_RDRR_SIG_FILE, hex, beside);
    return QP_EXIT_OK;
}

/* verify RDRR_DIR without --against: signature first (it covers the manifest), then every hash
 * the manifest lists, checked by the reader (readers/rdrr.c). */
static int verify_rdrr_dir(const char *dir, const char *pubkey, const qp_open_opts *oo) {
    int rc = check_rdrr_signature(dir, pubkey);
    if (rc != QP_EXIT_OK) return rc;
    if ((rc = qp_cli_flush_stdout()) != QP_EXIT_OK) return rc; /* the signature line first */
    qp_err e = {0};
    qp_model *m = NULL;
    if (qp_model_open(dir, oo, &m, &e) != QP_OK) return qp_cli_fail(&e);
    printf("integrity ok: %s: %lld tensors; every shard SHA-256, group hash and block Merkle root "
           "listed in manifest.json matches\n", dir, (long long)m->n_tensors);
    for (int64_t i = 0; i < m->n_problems; i++) printf("note: %s\n", m->problems[i]);
    qp_model_close(m);
    return qp_cli_flush_stdout();
}

int qp_cmd_verify(int argc, char **argv) {
    const char *out_path = NULL, *src_path = NULL, *prompts_file = NULL, *receipt = NULL,
               *pubkey = NULL;
    qp_open_opts oo = {0};
    int64_t n_gen = 32, threads = 0;
    double min_cos = 0, max_kl = 0, min_top1 = 0, min_greedy = 0;
    bool force = false, fast = false;
    const qp_cli_opt opts[] = {
        {"--against", NULL, QP_CLI_STR, &src_path, .arg = "SRC", .help = "the model OUT was made from"},
        {"--prompts", NULL, QP_CLI_STR, &prompts_file, .arg = "FILE",
         .help = "one prompt per line: text, or \"ids: 1 403 407\"; lines that\n"
                 "are empty or start with # are skipped. Default: \"Once upon\n"
                 "a time\" when there is a tokenizer, else BOS + 4 fixed ids"},
        {"--receipt", NULL, QP_CLI_STR, &receipt, .arg = "FILE",
         .help = "write the receipt JSON (schema in runtime/runtime.md)"},
        {"--n-predict", "-n", QP_CLI_I64, &n_gen, .lo = 1, .hi = 65536, .arg = "N",
         .help = "greedy tokens generated after each prompt (default 32)"},
        {"--tokenizer", NULL, QP_CLI_STR, &oo.tokenizer_path, .arg = "FILE",
         .help = "tokenizer for OUT or SRC when it has none (llama2.c tokenizer.bin)"},
        QP_CLI_THREADS(&threads, 0),
        {"--min-cosine", NULL, QP_CLI_F64, &min_cos, .arg = "X", .help = "mean cosine over positions must be >= X"},
        {"--max-kl", NULL, QP_CLI_F64, &max_kl, .flo = 0, .fhi = DBL_MAX, .arg = "X",
         .help = "mean KL over positions must be <= X"},
        {"--min-top1", NULL, QP_CLI_F64, &min_top1, .arg = "X", .help = "top-1 agreement rate must be >= X"},
        {"--min-greedy", NULL, QP_CLI_F64, &min_greedy, .arg = "X",
         .help = "matched greedy prefix / N must be >= X"},
        {"--pubkey", NULL, QP_CLI_STR, &pubkey, .arg = "K.pub",
         .help = "RDRR OUT: manifest.json.sig must be valid and made by this key"},
        {"--force", "-f", QP_CLI_FLAG, &force, .help = "replace an existing --receipt FILE"},
        {"--fast", NULL, QP_CLI_FLAG, &fast,
         .help = "run OUT on the fast path (as run does; SRC stays exact); the\nreceipt's runtime.path says which ran"},
    };
    enum { N_OPTS = sizeof opts / sizeof opts[0], MIN_COS = 6, MAX_KL, MIN_TOP1, MIN_GREEDY };
    const qp_cli_cmd cmd = {"verify", k_verify_usage, NULL, opts, N_OPTS, 0, &out_path, 1, NULL, NULL};
    bool given[N_OPTS];
    int prc = qp_cli_parse(&cmd, argc, argv, given);
    if (prc != QP_CLI_RUN) return prc;
    if (!out_path) return qp_cli_usage_error("verify: no OUT given");
    bool rdrr = qp_format_detect(out_path) == QP_FORMAT_RDRR;
    if (!src_path && rdrr) return verify_rdrr_dir(out_path, pubkey, &oo);
    if (pubkey && !rdrr) return qp_cli_usage_error("verify: --pubkey is for RDRR directories");
    if (!src_path) return qp_cli_usage_error("verify: --against SRC is required (or OUT is an RDRR "
                                             "directory: the integrity check alone)");
    if (receipt) { /* checked before the run: the receipt never replaces a model or a file */
        const char *inputs[] = {out_path, src_path, prompts_file, oo.tokenizer_path};
        int orc = qp_cli_prepare_output(receipt, force, NULL, inputs, sizeof inputs / sizeof inputs[0]);
        if (orc != QP_EXIT_OK) return orc;
    }
    if (rdrr) {
        int rc = check_rdrr_signature(out_path, pubkey);
        if (rc != QP_EXIT_OK) return rc;
    }

    qp_err e = {0};
    qp_model *out = NULL, *src = NULL;
    qp_tokenizer *tok = NULL;
    qp_verify_report *rep = NULL;
    prompt_list *pl = qp_calloc(1, sizeof *pl);
    char *json = NULL;
    int rc = QP_EXIT_OK;
    if (!pl) return qp_cli_error(QP_ERR_NOMEM, "out of memory");
    if (open_with_tokenizer(out_path, &oo, &out, &e) != QP_OK ||
        open_with_tokenizer(src_path, &oo, &src, &e) != QP_OK) {
        rc = qp_cli_fail(&e);
        goto done;
    }
    /* the tokenizer of SRC, else of OUT */
    const qp_model *tm = src->vocab.n_tokens > 0 && src->vocab.model != QP_TOK_NONE ? src
                         : out->vocab.n_tokens > 0 && out->vocab.model != QP_TOK_NONE ? out
                                                                                     : NULL;
    if (tm && qp_tokenizer_new(&tm->vocab, &tok, &e) != QP_OK) {
        rc = qp_cli_fail(&e);
        goto done;
    }
    if (prompts_file) {
        int r = read_prompts(pl, prompts_file, tok, tm);
        if (r >= 0) {
            rc = r;
            goto done;
        }
    } else if (tok) {
        int r = add_prompt(pl, "Once upon a time", tok, tm, 0);
        if (r >= 0) {
            rc = r;
            goto done;
        }
    } else {
        /* no tokenizer: BOS (or 1) and four ids spread over the vocabulary */
        int64_t v = src->arch.vocab > 0 ? src->arch.vocab : out->arch.vocab;
        int32_t bos = src->arch.bos_id >= 0 ? src->arch.bos_id : 1;
        char line[128];
        snprintf(line, sizeof line, "ids: %d %lld %lld %lld %lld", bos, (long long)(v / 2),
                 (long long)(v / 3), (long long)(v / 5), (long long)(v / 7));
        int r = add_prompt(pl, line, NULL, NULL, 0);
        if (r >= 0) {
            rc = r;
            goto done;
        }
    }
    qp_verify_opts vo;
    memset(&vo, 0, sizeof vo);
    vo.n_threads = (int)threads;
    vo.n_generate = n_gen;
    vo.fast = fast;
    qp_verify_default_thresholds(out, src, &vo.th);
    if (fast) qp_verify_fast_thresholds(out, &vo.th);
    if (given[MIN_COS] || given[MAX_KL] || given[MIN_TOP1] || given[MIN_GREEDY]) vo.th.class_name = "custom";
    if (given[MIN_COS]) vo.th.min_cosine = min_cos;
    if (given[MAX_KL]) vo.th.max_kl = max_kl;
    if (given[MIN_TOP1]) vo.th.min_top1 = min_top1;
    if (given[MIN_GREEDY]) vo.th.min_greedy_match = min_greedy;
    if (qp_verify_run(out, src, pl->p, pl->n, &vo, &rep, &e) != QP_OK) {
        rc = qp_cli_fail(&e);
        goto done;
    }
    print_summary(rep, &vo.th, pl);
    if (receipt) {
        if (qp_verify_report_json(rep, &json, &e) != QP_OK ||
            qp_file_write_atomic(receipt, json, strlen(json), &e) != QP_OK) {
            rc = qp_cli_fail(&e);
            goto done;
        }
        printf("receipt: %s\n", receipt);
    }
    rc = qp_verify_report_passed(rep) ? QP_EXIT_OK : QP_EXIT_VERIFY_FAILED;
    if (rc == QP_EXIT_OK) rc = qp_cli_flush_stdout();
done:
    qp_free(json);
    qp_verify_report_free(rep);
    if (pl) prompts_free(pl);
    qp_free(pl);
    qp_tokenizer_free(tok);
    qp_model_close(out);
    qp_model_close(src);
    return rc;
}
