/* A small persistent thread pool and the threaded matrix products of the runtime.
 *
 * Every row's dot product is computed by exactly one thread, through the encoding's traits, in
 * a fixed order; threads only choose which rows they take, so logits are identical for every
 * thread count and every schedule. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "encodings/plain_kernels.h"
#include "runtime/runtime_internal.h"

/* A job's items are cut into fixed chunks (at most QP_POOL_CHUNKS per thread) that the caller
 * and the workers take in turn from an atomic ticket, so a worker the OS has not scheduled yet
 * (a loaded machine) delays nobody: the others take its chunks, and the caller waits only for
 * chunks already taken. The ticket holds the job id in its high half, so a late worker can never
 * take a chunk of a finished job. Workers wait for jobs by spinning on the job id for a short
 * while (a decode step runs ~5 jobs per layer, a few microseconds each; waking a sleeping thread
 * costs tens), then sleep on a condition variable; the caller spins likewise. */
#define QP_POOL_SPIN 20000 /* pause iterations (~0.1-1 ms) before sleeping */
#define QP_POOL_CHUNKS 8

struct qp_pool {
    int n_threads;
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    atomic_uint_fast64_t job;    /* id of the current job, bumped for every job */
    atomic_uint_fast64_t ticket; /* (job id << 32) | next chunk */
    atomic_int_fast64_t done;    /* chunks of the current job finished */
    atomic_int sleepers;         /* workers blocked (or about to block) on cv_work */
    atomic_bool caller_sleeps;   /* the caller is blocked (or about to block) on cv_done */
    atomic_bool quit;
    /* the current job: written before job is bumped, read after; atomics because a late
       worker may read them while the next job is being set up (its ticket then fails) */
    _Atomic(qp_par_fn) fn;
    _Atomic(void *) ctx;
    atomic_int_fast64_t n, n_chunks;
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

/* Takes and runs chunks of job id until none is left; returns when the ticket is exhausted or
 * belongs to another job. */
static void run_chunks(qp_pool *p, uint64_t id, int tid) {
    qp_par_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    int64_t nch = atomic_load_explicit(&p->n_chunks, memory_order_relaxed);
    uint64_t tag = (id & 0xffffffffu) << 32;
    for (;;) {
        uint64_t t = atomic_load(&p->ticket);
        do {
            if ((t & ~(uint64_t)0xffffffffu) != tag || (int64_t)(t & 0xffffffffu) >= nch) return;
        } while (!atomic_compare_exchange_weak(&p->ticket, &t, t + 1));
        int64_t c = (int64_t)(t & 0xffffffffu);
        fn(ctx, n * c / nch, n * (c + 1) / nch, tid);
        if (atomic_fetch_add(&p->done, 1) + 1 == nch && atomic_load(&p->caller_sleeps)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    qp_pool *p = wa->pool;
    int tid = wa->tid;
    qp_free(wa);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = atomic_load(&p->job);
        for (int spin = 0; g == seen && spin < QP_POOL_SPIN && !atomic_load(&p->quit); spin++) {
            cpu_relax();
            g = atomic_load(&p->job);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (!atomic_load(&p->quit) && (g = atomic_load(&p->job)) == seen)
                pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = g;
        run_chunks(p, g, tid);
    }
    return NULL;
}

qp_status qp_pool_new(int n_threads, qp_pool **out, qp_err *e) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 1024) return qp_fail(e, QP_ERR_LIMIT, "%d threads (at most 1024)", n_threads);
    qp_pool *p = qp_calloc(1, sizeof *p);
    if (!p) return qp_fail(e, QP_ERR_NOMEM, "out of memory creating the thread pool");
    p->n_threads = n_threads;
    atomic_init(&p->job, 0);
    atomic_init(&p->ticket, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeps, false);
    atomic_init(&p->quit, false);
    atomic_init(&p->fn, NULL);
    atomic_init(&p->ctx, NULL);
    atomic_init(&p->n, 0);
    atomic_init(&p->n_chunks, 0);
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
    if (p->n_threads <= 1 || want < 2) {
        fn(ctx, 0, n, 0);
        return;
    }
    int used = want < p->n_threads ? (int)want : p->n_threads;
    int64_t nch = (int64_t)used * QP_POOL_CHUNKS;
    if (nch > n) nch = n;
    uint64_t id = atomic_load(&p->job) + 1;
    /* the previous job is complete: no chunk of it is running and none can be taken */
    atomic_store(&p->ticket, (id & 0xffffffffu) << 32);
    atomic_store(&p->done, 0);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->n_chunks, nch, memory_order_relaxed);
    atomic_store(&p->job, id);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }
    run_chunks(p, id, 0);
    for (int spin = 0; atomic_load(&p->done) < nch && spin < QP_POOL_SPIN; spin++) cpu_relax();
    if (atomic_load(&p->done) < nch) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeps, true);
        while (atomic_load(&p->done) < nch) pthread_cond_wait(&p->cv_done, &p->mu);
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

/* Scales the float dots of one row for every token: act_i8 matrices without vec_dot_i8 were
 * dotted with the int8 activations as floats, so y = dot * scale / xa_scale (in double, as the
 * integer path: an exactly ternary float row then gives the integer path's bits); else
 * y *= scale. */
static void finish(const qp_matvec_task *tk, float *y, size_t ldy, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    if (w->act_i8) {
        for (int64_t t = 0; t < n_tok; t++)
            y[(size_t)t * ldy] = (float)((double)y[(size_t)t * ldy] * (double)w->scale /
                                         (double)tk->xa_scale[t]);
    } else if (w->scale != 1.0f) {
        for (int64_t t = 0; t < n_tok; t++) y[(size_t)t * ldy] *= w->scale;
    }
}

/* An exact int8 dot d of token t -> the row result (runtime.md "BitNet ... activation quantization") */
static inline float i8_result(const qp_matvec_task *tk, double d, int64_t t) {
    return (float)(d * (double)tk->w->scale / (double)tk->xa_scale[t]);
}

/* Row r of one task against every token (runtime_internal.h). */
static void row_all_tokens(const qp_matvec_task *tk, int64_t r, int64_t n_tok, float *scratch) {
    const qp_wmat *w = tk->w;
    const uint8_t *row = w->data + (size_t)r * w->row_bytes;
    float *y = tk->y + r;
    size_t ldy = (size_t)tk->ldy;
    if (w->act_q) {
        for (int64_t t = 0; t < n_tok; t++)
            y[(size_t)t * ldy] = w->tr->vec_dot_q8(row, tk->xq + (size_t)t * tk->ldxq, w->cols);
        finish(tk, y, ldy, n_tok);
        return;
    }
    if (w->use_i8) {
        for (int64_t t = 0; t < n_tok; t++)
            y[(size_t)t * ldy] = i8_result(tk, w->tr->vec_dot_i8(row, tk->xa + (size_t)t * (size_t)tk->ldxa, w->cols), t);
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
    finish(tk, y, ldy, n_tok);
}

/* Rows r and r+1 of one task against n_tok > 1 tokens, widened into scratch[0, 2 * cols). */
static bool pair_ok(const qp_matvec_task *tk, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    return n_tok > 1 && !w->use_i8 && !w->act_q && w->tr->dequantize != NULL;
}

static void row_pair(const qp_matvec_task *tk, int64_t r, int64_t n_tok, float *scratch) {
    const qp_wmat *w = tk->w;
    float *s0 = scratch, *s1 = scratch + w->cols;
    w->tr->dequantize(w->data + (size_t)r * w->row_bytes, s0, w->cols);
    w->tr->dequantize(w->data + (size_t)(r + 1) * w->row_bytes, s1, w->cols);
    size_t ldy = (size_t)tk->ldy;
    qp_f32_dot_multi2(s0, s1, tk->x, (size_t)tk->ldx, n_tok, w->cols, tk->y + r, tk->y + r + 1,
                      ldy);
    finish(tk, tk->y + r, ldy, n_tok);
    finish(tk, tk->y + r + 1, ldy, n_tok);
}

/* Rows [r, r + n) of one task through the encoding's rows x tokens fast dot. */
static void row_tile(const qp_matvec_task *tk, int64_t r, int64_t n, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    w->tr->vec_dot_q8_tile(w->data + (size_t)r * w->row_bytes, w->row_bytes, n, tk->xq, tk->ldxq, n_tok,
                           w->cols, tk->y + r, (size_t)tk->ldy);
    for (int64_t i = r; i < r + n; i++) finish(tk, tk->y + i, (size_t)tk->ldy, n_tok);
}

/* Rows [r, r + n) of one task through the encoding's rows x tokens int8 dot, in calls whose
 * results fit a stack buffer (one token: up to QP_I8_TILE_BUF rows per call, one stream of rows) */
#define QP_I8_TILE_BUF 1024
static void row_tile_i8(const qp_matvec_task *tk, int64_t r, int64_t n, int64_t n_tok);

/* Groups [g0, g1) of g repacked rows against int8 activations, in calls whose results fit a stack
 * buffer: one token all the groups that fit (64 of 16 rows), several tokens in fours against up to
 * 16 groups (the kernels make a token tile's activation sums once for the call's groups, and read
 * the groups, 8-23 KB each for rows of 2048-5632, from L2 for each tile) */
#define QP_I8_PACKED_TOKENS 4
static void packed_groups_i8(const qp_matvec_task *tk, int64_t g, int64_t g0, int64_t g1, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    const int64_t nb = w->cols / w->tr->q8_pack_block_elems;
    const int64_t nt_max = n_tok < QP_I8_PACKED_TOKENS ? n_tok : QP_I8_PACKED_TOKENS, ng_max = QP_I8_TILE_BUF / (g * nt_max);
    double d[QP_I8_TILE_BUF];
    for (int64_t gc = g0; gc < g1; gc += ng_max) {
        const int64_t ng = g1 - gc < ng_max ? g1 - gc : ng_max;
        for (int64_t t0 = 0; t0 < n_tok; t0 += nt_max) {
            const int64_t nt = n_tok - t0 < nt_max ? n_tok - t0 : nt_max;
            w->tr->vec_dot_i8_packed(w->packed + (size_t)(gc * nb) * w->tr->q8_pack_block_bytes, ng,
                                     tk->xa + (size_t)t0 * (size_t)tk->ldxa, (size_t)tk->ldxa, nt, w->cols, d,
                                     (size_t)(ng * g));
            for (int64_t t = 0; t < nt; t++)
                for (int64_t i = 0; i < ng * g; i++)
                    tk->y[(size_t)(t0 + t) * (size_t)tk->ldy + (size_t)(gc * g + i)] =
                        i8_result(tk, d[t * ng * g + i], t0 + t);
        }
    }
}

/* Rows [r, r + n) of one task whose first rows are repacked (runtime.md "Repacked rows"): the
 * groups that start in [r, r + n) (a group started before r belongs to the chunk that holds its
 * start, so every row is computed once), and the rows past the groups through row_tile (int8
 * activations: packed_groups_i8 and row_tile_i8). */
static void row_tile_packed(const qp_matvec_task *tk, int64_t r, int64_t n, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    const int64_t g = w->tr->q8_pack_rows(), nb = w->cols / w->tr->q8_pack_block_elems;
    const int64_t g0 = (r + g - 1) / g, g1 = (r + n < w->packed_rows ? r + n + g - 1 : w->packed_rows) / g;
    if (g1 > g0 && w->use_i8) {
        packed_groups_i8(tk, g, g0, g1, n_tok);
    } else if (g1 > g0) {
        w->tr->vec_dot_q8_packed(w->packed + (size_t)(g0 * nb) * w->tr->q8_pack_block_bytes, g1 - g0, tk->xq, tk->ldxq,
                                 n_tok, w->cols, tk->y + g0 * g, (size_t)tk->ldy);
        for (int64_t i = g0 * g; i < g1 * g; i++) finish(tk, tk->y + i, (size_t)tk->ldy, n_tok);
    }
    const int64_t tail = r > w->packed_rows ? r : w->packed_rows;
    if (tail < r + n) (w->use_i8 ? row_tile_i8 : row_tile)(tk, tail, r + n - tail, n_tok);
}

static void row_tile_i8(const qp_matvec_task *tk, int64_t r, int64_t n, int64_t n_tok) {
    const qp_wmat *w = tk->w;
    double d[QP_I8_TILE_BUF];
    const int64_t nt_max = n_tok < QP_I8_TILE_BUF ? n_tok : QP_I8_TILE_BUF;
    const int64_t nr_max = QP_I8_TILE_BUF / nt_max;
    for (int64_t t0 = 0; t0 < n_tok; t0 += nt_max) {
        const int64_t nt = n_tok - t0 < nt_max ? n_tok - t0 : nt_max;
        for (int64_t r0 = r; r0 < r + n; r0 += nr_max) {
            const int64_t nr = r + n - r0 < nr_max ? r + n - r0 : nr_max;
            w->tr->vec_dot_i8_tile(w->data + (size_t)r0 * w->row_bytes, w->row_bytes, nr,
                                   tk->xa + (size_t)t0 * (size_t)tk->ldxa, (size_t)tk->ldxa, nt, w->cols, d,
                                   (size_t)nr);
            for (int64_t t = 0; t < nt; t++)
                for (int64_t i = 0; i < nr; i++)
                    tk->y[(size_t)(t0 + t) * (size_t)tk->ldy + (size_t)(r0 + i)] =
                        i8_result(tk, d[t * nr + i], t0 + t);
        }
    }
}

static void matmul_range(void *ctx, int64_t begin, int64_t end, int tid) {
    matmul_job *j = ctx;
    float *scratch = j->scratch + (size_t)tid * (size_t)j->scratch_cols;
    int t = 0;
    for (int64_t g = begin; g < end; g++) {
        while (t + 1 < j->n_tasks && j->starts[t + 1] <= g) t++;
        const qp_matvec_task *tk = &j->tasks[t];
        int64_t r = g - j->starts[t];
        const int64_t n = tk->w->rows - r < end - g ? tk->w->rows - r : end - g;
        if (tk->w->packed) {
            row_tile_packed(tk, r, n, j->n_tok);
            g += n - 1;
        } else if (tk->w->act_q && tk->w->tr->vec_dot_q8_tile) {
            row_tile(tk, r, n, j->n_tok);
            g += n - 1;
        } else if (tk->w->use_i8 && tk->w->tr->vec_dot_i8_tile) {
            row_tile_i8(tk, r, n, j->n_tok);
            g += n - 1;
        } else if (g + 1 < end && r + 1 < tk->w->rows && pair_ok(tk, j->n_tok)) {
            row_pair(tk, r, j->n_tok, scratch);
            g++;
        } else {
            row_all_tokens(tk, r, j->n_tok, scratch);
        }
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
