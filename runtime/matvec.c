/* A small persistent thread pool and the threaded matrix-vector product of the runtime.
 *
 * Every row's dot product is computed by exactly one thread, through the encoding's traits, in
 * a fixed order; threads only choose which rows they take, so logits are identical for every
 * thread count. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "converters/plain_kernels.h"
#include "runtime/runtime_internal.h"

/* Workers wait for a job by spinning on an atomic generation counter for a short while (a job
 * round of a decode step is a few microseconds; waking a sleeping thread costs tens), then sleep
 * on a condition variable. The caller spins likewise for the workers to finish. */
#define QP_POOL_SPIN 20000 /* pause iterations (~0.1-1 ms) before sleeping */

struct qp_pool {
    int n_threads;
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t generation; /* bumped for every job */
    atomic_int pending;              /* workers still running the current job */
    atomic_int sleepers;             /* workers blocked (or about to block) on cv_work */
    atomic_bool caller_sleeps;       /* the caller is blocked (or about to block) on cv_done */
    atomic_bool quit;
    /* the current job, written before generation is bumped */
    qp_par_fn fn;
    void *ctx;
    int64_t n;
    int used; /* threads taking part (<= n_threads) */
};

typedef struct worker_arg {
    qp_pool *pool;
    int tid;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void chunk(int64_t n, int used, int tid, int64_t *b, int64_t *e) {
    *b = n * tid / used;
    *e = n * (tid + 1) / used;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    qp_pool *p = wa->pool;
    int tid = wa->tid;
    qp_free(wa);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load(&p->generation);
        for (int spin = 0; g == seen && spin < QP_POOL_SPIN && !atomic_load(&p->quit); spin++) {
            cpu_relax();
            g = atomic_load(&p->generation);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!atomic_load(&p->quit) && (g = atomic_load(&p->generation)) == seen)
                pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = g;
        if (tid < p->used) {
            int64_t b, e;
            chunk(p->n, p->used, tid, &b, &e);
            if (e > b) p->fn(p->ctx, b, e, tid);
        }
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeps)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

qp_status qp_pool_new(int n_threads, qp_pool **out, qp_err *e) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 1024) return qp_fail(e, QP_ERR_LIMIT, "%d threads (at most 1024)", n_threads);
    qp_pool *p = qp_calloc(1, sizeof *p);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "out of memory creating the thread pool");
    p->n_threads = n_threads;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeps, false);
    atomic_init(&p->quit, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->threads = qp_calloc((size_t)n_threads, sizeof *p->threads);
        if (!p->threads) {
            qp_pool_free(p);
            return qp_fail(e, QP_ERR_NOMEM, "out of memory creating the thread pool");
        }
        for (int t = 1; t < n_threads; t++) {
            worker_arg *wa = qp_malloc(sizeof *wa);
            if (!wa) {
                qp_pool_free(p);
                return qp_fail(e, QP_ERR_NOMEM, "out of memory creating the thread pool");
            }
            wa->pool = p;
            wa->tid = t;
            if (pthread_create(&p->threads[t], NULL, worker_main, wa) != 0) {
                qp_free(wa);
                qp_pool_free(p);
                return qp_fail(e, QP_ERR_INTERNAL, "could not start worker thread %d", t);
            }
            p->n_started = t;
        }
    }
    *out = p;
    return QP_OK;
}

void qp_pool_free(qp_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t <= p->n_started; t++) pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    qp_free(p->threads);
    qp_free(p);
}

int qp_pool_threads(const qp_pool *p) { return p->n_threads; }

void qp_pool_run(qp_pool *p, int64_t n, int64_t min_items_per_thread, qp_par_fn fn, void *ctx) {
    if (n <= 0) return;
    int64_t want = min_items_per_thread > 0 ? n / min_items_per_thread : n;
    int used = p->n_threads;
    if (want < used) used = want < 1 ? 1 : (int)want;
    if (used <= 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->used = used;
    /* every worker sees the generation and reports back; those with tid >= used skip the work */
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
    int64_t b, e;
    chunk(n, used, 0, &b, &e);
    if (e > b) fn(ctx, b, e, 0);
    for (int spin = 0; atomic_load(&p->pending) > 0 && spin < QP_POOL_SPIN; spin++) cpu_relax();
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeps, true);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->cv_done, &p->mu);
        atomic_store(&p->caller_sleeps, false);
        pthread_mutex_unlock(&p->mu);
    }
}

/* ---- matrix products ---------------------------------------------------------------------- */

typedef struct matmul_job {
    const qp_matvec_task *tasks;
    int n_tasks;
    int64_t starts[8]; /* first global row of each task */
    int64_t n_tok;
    float *scratch;
    int64_t scratch_cols;
} matmul_job;

/* Row r of one task against every token (runtime_internal.h). */
static void row_all_tokens(const qp_matvec_task *tk, int64_t r, int64_t n_tok, float *scratch) {
    const qp_wmat *w = tk->w;
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    float *y = tk->y + r;
    size_t ldy = (size_t)tk->ldy;
    if (w->use_i8) {
        for (int64_t t = 0; t < n_tok; t++) {
            double d = w->tr->vec_dot_i8(row, tk->xa + (size_t)t * (size_t)tk->ldxa, w->cols);
            y[(size_t)t * ldy] = (float)(d * (double)w->scale / (double)tk->xa_scale[t]);
        }
        return;
    }
    if (w->tr->vec_dot_f32 && (n_tok == 1 || !w->tr->dequantize)) {
        for (int64_t t = 0; t < n_tok; t++)
            y[(size_t)t * ldy] = w->tr->vec_dot_f32(row, tk->x + (size_t)t * (size_t)tk->ldx,
                                                    w->cols);
    } else {
        w->tr->dequantize(row, scratch, w->cols);
        qp_f32_dot_multi(scratch, tk->x, (size_t)tk->ldx, n_tok, w->cols, y, ldy);
    }
    if (w->scale != 1.0f)
        for (int64_t t = 0; t < n_tok; t++) y[(size_t)t * ldy] *= w->scale;
}

static void matmul_range(void *ctx, int64_t begin, int64_t end, int tid) {
    matmul_job *j = ctx;
    float *scratch = j->scratch + (size_t)tid * (size_t)j->scratch_cols;
    int t = 0;
    for (int64_t g = begin; g < end; g++) {
        while (t + 1 < j->n_tasks && j->starts[t + 1] <= g) t++;
        row_all_tokens(&j->tasks[t], g - j->starts[t], j->n_tok, scratch);
    }
}

void qp_matmul_multi(qp_pool *pool, const qp_matvec_task *tasks, int n_tasks, int64_t n_tok,
                     float *scratch, int64_t scratch_cols) {
    matmul_job j = {tasks, n_tasks < 8 ? n_tasks : 8, {0}, n_tok, scratch, scratch_cols};
    int64_t total = 0, cols = 1;
    for (int t = 0; t < j.n_tasks; t++) {
        j.starts[t] = total;
        total += tasks[t].w->rows;
        if (tasks[t].w->cols > cols) cols = tasks[t].w->cols;
    }
    /* aim at >= ~64K multiply-adds per thread before adding threads */
    int64_t per_row = cols * (n_tok > 0 ? n_tok : 1);
    int64_t min_rows = 65536 / per_row;
    qp_pool_run(pool, total, min_rows < 1 ? 1 : min_rows, matmul_range, &j);
}
