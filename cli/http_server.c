/* libmicrohttpd with a route table, a whole-request deadline and signal-driven shutdown
 * (cli/http_server.h). */
#define _DEFAULT_SOURCE 1 /* strncasecmp */
#include "cli/http_server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "quantpack/core.h"

/* One per open connection (MHD's socket context): the deadline of the request it is receiving. */
typedef struct conn_track {
    int fd;
    int64_t since_ms;  /* when the current request began: connection opened or last response done */
    bool receiving;    /* until the whole request has arrived */
    bool cut;          /* shut down by the deadline */
    struct conn_track *prev, *next;
} conn_track;

/* One per request (MHD's request context, made when the request line arrives). */
typedef struct req_state {
    char *target; /* raw request target */
    const qp_http_route *route;
    bool started, too_big;
    char *body;
    size_t body_len, body_cap;
} req_state;

struct qp_http_server {
    struct MHD_Daemon *daemon;
    const qp_http_route *routes;
    size_t n_routes;
    qp_http_limits limits;
    void (*log)(const char *msg);
    sigset_t old_mask;
    pthread_mutex_t mu; /* guards conns and every conn_track's fields */
    conn_track *conns;
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void logf_(qp_http_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(qp_http_server *s, const char *fmt, ...) {
    if (!s->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->log(msg);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    qp_http_server *s = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n') msg[--n] = '\0';
    if (s->log) s->log(msg);
}

/* ---- connection tracking and the request deadline ------------------------------------------ */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    qp_http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_track *t = qp_calloc(1, sizeof *t);
        if (!t || !ci) { /* untracked: only MHD's idle timeout applies */
            qp_free(t);
            return;
        }
        t->fd = ci->connect_fd;
        t->since_ms = now_ms();
        t->receiving = true;
        pthread_mutex_lock(&s->mu);
        t->next = s->conns;
        if (s->conns) s->conns->prev = t;
        s->conns = t;
        pthread_mutex_unlock(&s->mu);
        *socket_context = t;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_track *t = *socket_context;
        if (!t) return;
        /* MHD closes the socket after this returns: the sweep never sees a reused fd. */
        pthread_mutex_lock(&s->mu);
        if (t->prev) t->prev->next = t->next;
        else s->conns = t->next;
        if (t->next) t->next->prev = t->prev;
        pthread_mutex_unlock(&s->mu);
        qp_free(t);
        *socket_context = NULL;
    }
}

static conn_track *track_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The whole request has arrived (receiving = false) or a response is done and the next request
 * on this connection may begin (receiving = true, clock restarted). */
static void set_receiving(qp_http_server *s, struct MHD_Connection *c, bool receiving) {
    conn_track *t = track_of(c);
    if (!t) return;
    pthread_mutex_lock(&s->mu);
    t->receiving = receiving;
    if (receiving) t->since_ms = now_ms();
    pthread_mutex_unlock(&s->mu);
}

/* Shuts down every connection whose request has not fully arrived within the deadline; MHD then
 * sees the end of the stream and closes it. */
static void sweep(qp_http_server *s) {
    int64_t limit = (int64_t)s->limits.request_timeout_s * 1000, now = now_ms();
    int cut = 0;
    pthread_mutex_lock(&s->mu);
    for (conn_track *t = s->conns; t; t = t->next) {
        if (!t->receiving || t->cut || now - t->since_ms <= limit) continue;
        shutdown(t->fd, SHUT_RDWR);
        t->cut = true;
        cut++;
    }
    pthread_mutex_unlock(&s->mu);
    if (cut) logf_(s, "closed %d connection(s) past the %u s request deadline", cut,
                   s->limits.request_timeout_s);
}

/* ---- requests ------------------------------------------------------------------------------ */

static size_t path_len_of(const char *target) { return strcspn(target, "?#"); }

static const qp_http_route *match_route(const qp_http_server *s, const char *target) {
    size_t path_len = path_len_of(target);
    for (size_t i = 0; i < s->n_routes; i++) {
        size_t n = strlen(s->routes[i].prefix);
        if (n <= path_len && memcmp(target, s->routes[i].prefix, n) == 0) return &s->routes[i];
    }
    return NULL;
}

static req_state *req_new(const char *target) {
    req_state *r = qp_calloc(1, sizeof *r);
    if (r) r->target = qp_strdup(target);
    if (r && !r->target) {
        qp_free(r);
        r = NULL;
    }
    return r;
}

static void req_free(req_state *r) {
    if (!r) return;
    qp_free(r->target);
    qp_free(r->body);
    qp_free(r);
}

/* The request line has arrived: uri is the raw target (MHD decodes its own copy later). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)cls;
    (void)c;
    return req_new(uri);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    req_free(*req_cls);
    *req_cls = NULL;
    set_receiving(cls, c, true);
}

/* Declared body bigger than max (Content-Length), or a chunked body where none is allowed. */
static bool body_too_big(struct MHD_Connection *c, size_t max) {
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        uint64_t v = 0;
        for (const char *p = cl; *p >= '0' && *p <= '9'; p++)
            v = v > (UINT64_MAX - 9) / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*p - '0');
        if (v > max) return true;
    }
    return max == 0 &&
           MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
    (void)version;
    qp_http_server *s = cls;
    req_state *r = *req_cls;
    if (!r) { /* no request-line callback (out of memory there): MHD's decoded URL */
        if (!(r = req_new(url))) return MHD_NO;
        *req_cls = r;
    }
    qp_http_request req = {c, method, r->target, path_len_of(r->target), NULL, 0};
    if (!r->started) { /* headers are in */
        r->started = true;
        r->route = match_route(s, r->target);
        if (!r->route) {
            set_receiving(s, c, false);
            return qp_http_respond_status(&req, MHD_HTTP_NOT_FOUND, NULL);
        }
        if (body_too_big(c, r->route->max_body)) { /* answered now; MHD closes after it */
            set_receiving(s, c, false);
            return qp_http_respond_status(&req, MHD_HTTP_CONTENT_TOO_LARGE, NULL);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->too_big || n > r->route->max_body - r->body_len) {
            r->too_big = true;
            return MHD_YES;
        }
        if (r->body_len + n > r->body_cap) {
            size_t cap = r->body_cap ? r->body_cap : 4096;
            while (cap < r->body_len + n) cap = cap > r->route->max_body / 2 ? r->route->max_body : cap * 2;
            char *b = qp_realloc(r->body, cap);
            if (!b) return MHD_NO;
            r->body = b;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, upload, n);
        r->body_len += n;
        return MHD_YES;
    }
    set_receiving(s, c, false); /* the whole request is in */
    if (r->too_big) return qp_http_respond_status(&req, MHD_HTTP_CONTENT_TOO_LARGE, NULL);
    req.body = r->body;
    req.body_len = r->body_len;
    return r->route->handler(r->route->ctx, &req);
}

/* ---- responses ----------------------------------------------------------------------------- */

const char *qp_http_header(const qp_http_request *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

typedef struct each_ctx {
    const char *name;
    bool (*fn)(void *arg, const char *value);
    void *arg;
} each_ctx;

static enum MHD_Result each_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    (void)kind;
    each_ctx *e = cls;
    if (!key || strcasecmp(key, e->name) != 0) return MHD_YES;
    return e->fn(e->arg, value ? value : "") ? MHD_YES : MHD_NO;
}

void qp_http_header_each(const qp_http_request *req, const char *name,
                         bool (*fn)(void *arg, const char *value), void *arg) {
    each_ctx e = {name, fn, arg};
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, each_header, &e);
}

enum MHD_Result qp_http_respond(const qp_http_request *req, unsigned status,
                                struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Server", "quantpack");
    enum MHD_Result rc = MHD_queue_response(req->conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static const char *reason_of(unsigned status) {
    const char *r = MHD_get_reason_phrase_for(status);
    return r && *r ? r : "Unknown";
}

enum MHD_Result qp_http_respond_status(const qp_http_request *req, unsigned status,
                                       const char *const *headers) {
    char body[96];
    int n = 0;
    if (status != MHD_HTTP_NO_CONTENT && status != MHD_HTTP_NOT_MODIFIED)
        n = snprintf(body, sizeof body, "%u %s\n", status, reason_of(status));
    if (n < 0) n = 0;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer((size_t)n, body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (n > 0) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
        MHD_add_response_header(resp, headers[i], headers[i + 1]);
    return qp_http_respond(req, status, resp);
}

/* ---- the daemon ---------------------------------------------------------------------------- */

qp_http_server *qp_http_server_start(int listen_fd, const qp_http_route *routes, size_t n_routes,
                                     const qp_http_limits *limits, void (*log)(const char *msg),
                                     char *err, size_t err_cap) {
    qp_http_server *s = qp_calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_cap, "out of memory");
        close(listen_fd);
        return NULL;
    }
    s->routes = routes;
    s->n_routes = n_routes;
    s->limits = *limits;
    s->log = log;
    pthread_mutex_init(&s->mu, NULL);
    /* SIGINT/SIGTERM wait for qp_http_server_wait: blocked here, inherited by MHD's threads. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &s->old_mask);
    signal(SIGPIPE, SIG_IGN); /* and MHD told so: it may then use sendfile */
    /* Each connection may hold a socket and a file: make room for the connection limit. */
    struct rlimit rl;
    rlim_t want = (rlim_t)limits->max_connections * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    bool v6 = getsockname(listen_fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET6;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | (v6 ? MHD_USE_IPv6 : 0) |
                     (log ? MHD_USE_ERROR_LOG : 0);
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, /* first, or MHD logs the rest itself */
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, limits->threads,
        MHD_OPTION_CONNECTION_LIMIT, limits->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits->max_per_client,
        MHD_OPTION_CONNECTION_TIMEOUT, limits->idle_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits->max_header_bytes,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
        MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, err_cap, "libmicrohttpd did not start (%s)", strerror(errno));
        close(listen_fd);
        pthread_sigmask(SIG_SETMASK, &s->old_mask, NULL);
        pthread_mutex_destroy(&s->mu);
        qp_free(s);
        return NULL;
    }
    return s;
}

int qp_http_server_wait(qp_http_server *s) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    const struct timespec tick = {0, 200 * 1000 * 1000};
    for (;;) {
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) return sig;
        sweep(s);
    }
}

void qp_http_server_stop(qp_http_server *s) {
    if (!s) return;
    MHD_socket lfd = MHD_quiesce_daemon(s->daemon); /* no new connections from here on */
    MHD_stop_daemon(s->daemon);                       /* closes every connection, joins */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    /* A second SIGINT/SIGTERM sent meanwhile is consumed, not delivered when unblocked. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &s->old_mask, NULL);
    pthread_mutex_destroy(&s->mu);
    qp_free(s);
}
