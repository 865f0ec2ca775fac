/* A small HTTP server over libmicrohttpd with a route table: quantpack serve's RDRR file
 * handler is the catch-all route "/"; an API can be added under "/v1/" on the same daemon.
 *
 * libmicrohttpd does the HTTP (request line, headers, bodies, keep-alive, HEAD, sendfile) with
 * epoll on a few internal threads, so a slow or stalled client holds a connection slot, never a
 * thread. This wrapper adds what MHD lacks and the limits quantpack wants:
 * - a whole-request deadline: the request line, headers and body must arrive within
 *   request_timeout_s of the connection opening (or of the previous response on keep-alive),
 *   whatever the pace (MHD's own MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s here, only
 *   resets on every byte moved); an expired connection is shut down;
 * - bounded connections in total and per client address, bounded header bytes (the connection's
 *   memory pool), bounded request bodies per route (413 before the handler runs);
 * - the raw request target for each handler (MHD's own URL is percent-decoded, so a decoded
 *   "%2F" or "%00" could not be told apart);
 * - prompt shutdown on SIGINT/SIGTERM: qp_http_server_wait returns, qp_http_server_stop closes
 *   every connection and joins the threads.
 * The pure request parsers quantpack still needs are in cli/http_util.h. */
#ifndef QP_CLI_HTTP_SERVER_H
#define QP_CLI_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

typedef struct qp_http_request {
    struct MHD_Connection *conn;
    const char *method; /* as sent: "GET", "HEAD", "POST", ... */
    const char *target; /* the raw request target, not decoded: path [?query] */
    size_t path_len;    /* bytes of target before '?' or '#' */
    const char *body;   /* the request body (bounded by the route's max_body), NULL when empty */
    size_t body_len;
} qp_http_request;

/* Answers one request, with qp_http_respond* exactly once, and returns what that returned
 * (MHD_NO closes the connection). Runs on one of the daemon's threads: it must not block for
 * long (a slow handler answers with a callback response whose reader suspends the connection
 * while it has no bytes, and resumes it from its own thread: the daemon is started with
 * MHD_ALLOW_SUSPEND_RESUME; cli/serve_api.c). The request
 * and everything it points to are borrowed for the duration of the call. */
typedef enum MHD_Result (*qp_http_handler)(void *ctx, const qp_http_request *req);

typedef struct qp_http_route {
    const char *prefix; /* "/v1/": every path starting with it; "/": every path. First match wins. */
    qp_http_handler handler;
    void *ctx;
    size_t max_body; /* request bodies over this many bytes get 413 without the handler */
} qp_http_route;

typedef struct qp_http_limits {
    unsigned request_timeout_s; /* whole request (line, headers, body) */
    unsigned idle_timeout_s;    /* no byte moved either way (MHD_OPTION_CONNECTION_TIMEOUT) */
    unsigned max_connections;   /* in total (MHD_OPTION_CONNECTION_LIMIT) */
    unsigned max_per_client;    /* per client address (MHD_OPTION_PER_IP_CONNECTION_LIMIT) */
    size_t max_header_bytes;    /* request line + headers (MHD_OPTION_CONNECTION_MEMORY_LIMIT) */
    unsigned threads;           /* MHD worker threads (MHD_OPTION_THREAD_POOL_SIZE) */
} qp_http_limits;

#define QP_HTTP_LIMITS_DEFAULT {10, 30, 512, 64, 32768, 2}

typedef struct qp_http_server qp_http_server;

/* Serves on listen_fd (bound and listening; the server owns it from now on, even on failure).
 * routes (borrowed until qp_http_server_stop) are tried in order. Blocks SIGINT and SIGTERM in
 * the calling thread before starting the daemon's threads, so they go to qp_http_server_wait.
 * log (may be NULL) gets MHD's error messages and one line per cut connection. NULL on failure
 * with a message in err (err_cap bytes). */
qp_http_server *qp_http_server_start(int listen_fd, const qp_http_route *routes, size_t n_routes,
                                     const qp_http_limits *limits, void (*log)(const char *msg),
                                     char *err, size_t err_cap);

/* Enforces the request deadline until SIGINT or SIGTERM arrives; returns the signal number. */
int qp_http_server_wait(qp_http_server *s);

/* Stops accepting, closes every connection, joins the threads, frees s, restores the signal
 * mask. NULL is fine. */
void qp_http_server_stop(qp_http_server *s);

/* The first value of request header name (case-insensitive), or NULL. Borrowed for the call. */
const char *qp_http_header(const qp_http_request *req, const char *name);

/* Calls fn(arg, value) for every header line called name, in order, while it returns true. */
void qp_http_header_each(const qp_http_request *req, const char *name,
                         bool (*fn)(void *arg, const char *value), void *arg);

/* Queues resp with status, after adding "Server: quantpack"; takes resp (destroyed here). */
enum MHD_Result qp_http_respond(const qp_http_request *req, unsigned status,
                                struct MHD_Response *resp);

/* A response with a short text/plain body "<status> <reason>\n" (none for 204/304) and the given
 * extra headers: headers is NULL or {name, value, name, value, ..., NULL}. */
enum MHD_Result qp_http_respond_status(const qp_http_request *req, unsigned status,
                                       const char *const *headers);

#endif
