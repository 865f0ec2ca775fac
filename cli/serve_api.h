/* The OpenAI-compatible API of `quantpack serve MODEL` (cli/serve_api.md): routes "/v1/" and
 * "/health" on the libmicrohttpd server of cli/http_server.h, beside the RDRR file route.
 *
 * Requests are parsed, checked and tokenized on the daemon's threads (400 for what is wrong,
 * before anything is queued); generation requests then go to one FIFO served by one worker
 * thread with one generation session (include/quantpack/generate.h), so they are answered in
 * the order they arrived, one generation at a time, and a conversation that shares a prefix with
 * the previous request reuses its KV cache. The response (200, chunked) is produced while the
 * worker generates: its connection is suspended while no bytes are ready (MHD's content reader
 * pattern), so a waiting or slow request holds no daemon thread. A client that goes away cancels
 * its generation. */
#ifndef QP_CLI_SERVE_API_H
#define QP_CLI_SERVE_API_H

#include "cli/http_server.h"
#include "quantpack/quantpack.h"

typedef struct qp_api qp_api;

typedef struct qp_api_opts {
    const char *model_id;      /* the id /v1/models lists (borrowed) */
    const char *api_key;       /* NULL: none; else "Authorization: Bearer KEY" on /v1/ (borrowed) */
    const char *chat_template; /* --chat-template NAME|FILE text, or NULL (borrowed) */
    qp_sampler_params sampler; /* request defaults; a request's own values replace them */
    bool fixed_seed;           /* sampler.seed for requests without one; else a random seed each */
    int64_t n_predict;         /* default max_tokens (-1: until EOS or the context end) */
    bool verbose;              /* one line per request on stderr */
} qp_api_opts;

/* A generation session over m (borrowed, must outlive the API) and the worker thread. */
QP_NODISCARD qp_status qp_api_new(const qp_model *m, const qp_runtime_opts *ro, const qp_api_opts *o,
                                  qp_api **out, qp_err *e);
/* The route handler of "/v1/" and "/health" (ctx = the qp_api). */
enum MHD_Result qp_api_handle(void *ctx, const qp_http_request *req);
/* Before qp_http_server_stop: cancels every generation and resumes every suspended connection
 * (libmicrohttpd must not be stopped with one suspended). */
void qp_api_shutdown(qp_api *a);
/* After qp_http_server_stop: joins the worker and frees everything. NULL is fine. */
void qp_api_free(qp_api *a);

/* Bytes a request body may have on the API routes. */
#define QP_API_MAX_BODY ((size_t)1 << 20)

#endif
