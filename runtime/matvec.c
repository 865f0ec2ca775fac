/* A small persistent thread pool and the threaded matrix-vector product of the runtime.
 *
 * Every row's dot product is computed by exactly one thread, through the encoding's traits, in
 * a fixed order; threads only choose which rows they take, so logits are identical for every
 * thread count. */
#include <math.h>
#include <pthread.h>

#include "runtime/runtime_internal.h"

struct qp_pool {
    int n_threads;
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation; /* bumped for every job */
    int pending;         /* workers still running the current job */
    bool quit;
    /* the current job */
    qp_par_fn fn;
    void *ctx;
    int64_t n;
    int used; /* threads taking part (<= n_threads) */
};

typedef struct worker_arg {
    qp_pool *pool;
    int tid;
} worker_arg;

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
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        if (tid >= p->used) continue;
        qp_par_fn fn = p->fn;
        void *ctx = p->ctx;
        int64_t b, e;
        chunk(p->n, p->used, tid, &b, &e);
        pthread_mutex_unlock(&p->mu);
        if (e > b) fn(ctx, b, e, tid);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

qp_status qp_pool_new(int n_threads, qp_pool **out, qp_err *e) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 1024) return qp_fail(e, QP_ERR_LIMIT, "%d threads (at most 1024)", n_threads);
    qp_pool *p = qp_calloc(1, sizeof *p);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "out of memory creating the thread pool");
    p->n_threads = n_threads;
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
    p->quit = true;
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->used = used;
    p->pending = used - 1;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    int64_t b, e;
    chunk(n, used, 0, &b, &e);
    if (e > b) fn(ctx, b, e, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

/* ---- matrix-vector ---------------------------------------------------------------------- */

typedef struct matvec_job {
    const qp_matvec_task *tasks;
    int n_tasks;
    int64_t starts[8]; /* first global row of each task */
    float *scratch;
    int64_t scratch_cols;
} matvec_job;

static float row_dot(const qp_matvec_task *tk, int64_t r, float *scratch) {
    const qp_wmat *w = tk->w;
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    if (w->use_i8) {
        double d = w->tr->vec_dot_i8(row, tk->xa, w->cols);
        return (float)(d * (double)w->scale / (double)tk->xa_scale);
    }
    float s;
    if (w->tr->vec_dot_f32) {
        s = w->tr->vec_dot_f32(row, tk->x, w->cols);
    } else {
        w->tr->dequantize(row, scratch, w->cols);
        s = 0.0f;
        for (int64_t i = 0; i < w->cols; i++) s += scratch[i] * tk->x[i];
    }
    return w->scale == 1.0f ? s : s * w->scale;
}

static void matvec_range(void *ctx, int64_t begin, int64_t end, int tid) {
    matvec_job *j = ctx;
    float *scratch = j->scratch ? j->scratch + (size_t)tid * (size_t)j->scratch_cols : NULL;
    int t = 0;
    while (t + 1 < j->n_tasks && j->starts[t + 1] <= begin) t++;
    for (int64_t g = begin; g < end; g++) {
        while (t + 1 < j->n_tasks && j->starts[t + 1] <= g) t++;
        const qp_matvec_task *tk = &j->tasks[t];
        int64_t r = g - j->starts[t];
        tk->y[r] = row_dot(tk, r, scratch);
    }
}

void qp_matvec_multi(qp_pool *pool, const qp_matvec_task *tasks, int n_tasks, float *scratch,
                     int64_t scratch_cols) {
    matvec_job j = {tasks, n_tasks, {0}, scratch, scratch_cols};
    int64_t total = 0, cols = 1;
    for (int t = 0; t < n_tasks && t < 8; t++) {
        j.starts[t] = total;
        total += tasks[t].w->rows;
        if (tasks[t].w->cols > cols) cols = tasks[t].w->cols;
    }
    if (n_tasks > 8) j.n_tasks = 8; /* callers pass at most 3 */
    /* aim at >= ~64K multiply-adds per thread before adding threads */
    int64_t min_rows = 65536 / cols;
    qp_pool_run(pool, total, min_rows < 1 ? 1 : min_rows, matvec_range, &j);
}
