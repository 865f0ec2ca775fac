/* quantpack serve MODEL|DIR [--port P] [--bind ADDR] [--api-key KEY] [--verbose] [generation
 * options]: the OpenAI-compatible API of cli/serve_api.h under /v1/ and /health for any model the
 * runtime runs, and for an RDRR folder its package files over HTTP (readers/rdrr.md "Serving")
 * on the same libmicrohttpd server (cli/http_server.h). GET/HEAD/OPTIONS, "/" ->
 * manifest.json, single byte ranges (206 / 416), ETag from the manifest's shard hash, If-Range,
 * If-None-Match, CORS as DOPPLER expects. Only regular files inside DIR are served: a path with a
 * segment starting with '.', a symlink at any level or a non-regular file (FIFO, device,
 * socket, folder) gets 403, and no file is opened before its type is known (O_NOFOLLOW,
 * O_NONBLOCK, fstat). Binds 127.0.0.1 unless told otherwise; stops on SIGINT/SIGTERM. */
#define _DEFAULT_SOURCE 1 /* realpath, NI_MAXHOST (glibc) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/http_server.h"
#include "cli/http_util.h"
#include "cli/serve_api.h"

typedef struct etag_entry {
    char *name;
    char etag[80];
} etag_entry;

/* The file route's state: DIR open as a directory, and the ETags of the manifest's shards. */
typedef struct server {
    char root[PATH_MAX]; /* realpath of DIR */
    int root_fd;
    etag_entry *etags;
    int n_etags;
    bool verbose;
} server;

/* ---- manifest etags ----------------------------------------------------------------------- */

/* Reads DIR/manifest.json (a regular file, no symlink, at most 256 MiB) into *text. */
static bool read_manifest(const server *sv, char **text, size_t *len) {
    int fd = openat(sv->root_fd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return false;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)256 << 20) {
        close(fd);
        return false;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *buf = qp_malloc(n + 1);
    while (buf && got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got < n) {
        qp_free(buf);
        return false;
    }
    *text = buf;
    *len = n;
    return true;
}

/* ETags of the manifest's shards: "sha256-<hash>" by file name. A manifest that cannot be read
 * just leaves every file with its weak size-mtime tag. */
static void load_etags(server *sv) {
    char *text = NULL;
    size_t len = 0;
    if (!read_manifest(sv, &text, &len)) return;
    cJSON *j = cJSON_ParseWithLength(text, len);
    qp_free(text);
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(j, "shards");
    int n = cJSON_GetArraySize(shards);
    sv->etags = n > 0 ? qp_calloc((size_t)n, sizeof *sv->etags) : NULL;
    for (int i = 0; sv->etags && i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(shards, i);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(s, "filename");
        if (!cJSON_IsString(fn)) fn = cJSON_GetObjectItemCaseSensitive(s, "fileName");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "hash");
        if (!cJSON_IsString(fn) || !cJSON_IsString(h) || strlen(h->valuestring) != 64) continue;
        bool hex = true;
        for (const char *p = h->valuestring; *p; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) hex = false;
        if (!hex) continue;
        etag_entry *t = &sv->etags[sv->n_etags];
        t->name = qp_strdup(fn->valuestring);
        if (!t->name) continue;
        snprintf(t->etag, sizeof t->etag, "\"sha256-%s\"", h->valuestring);
        sv->n_etags++;
    }
    cJSON_Delete(j);
}

/* ---- the file route ----------------------------------------------------------------------- */

static const char *const k_cors[] = {
    "Access-Control-Allow-Origin", "*",
    "Access-Control-Allow-Methods", "GET, HEAD, OPTIONS",
    "Access-Control-Allow-Headers", "Range, If-Range, If-None-Match, Content-Type",
    "Access-Control-Expose-Headers", "Content-Length, Content-Range, Accept-Ranges, ETag",
    "Access-Control-Max-Age", "86400",
};
#define N_CORS (sizeof k_cors / sizeof k_cors[0])

/* A status-only answer with CORS and up to 4 extra header pairs (name, value, ..., NULL). */
static enum MHD_Result answer_status(const qp_http_request *req, unsigned status,
                                     const char *const *extra) {
    const char *h[N_CORS + 9];
    size_t n = 0;
    for (size_t i = 0; i < N_CORS; i++) h[n++] = k_cors[i];
    for (size_t i = 0; extra && extra[i] && i < 8; i++) h[n++] = extra[i];
    h[n] = NULL;
    return qp_http_respond_status(req, status, h);
}

/* Opens root/rel (rel from qp_http_path_normalize, modified and restored) one segment at a time
 * without following a symlink; only a regular file is kept. 0 with *fd_out and *st, or the
 * HTTP status to answer. A FIFO is opened with O_NONBLOCK, so it never waits for a writer. */
static unsigned open_confined(int root_fd, char *rel, int *fd_out, struct stat *st) {
    int dir = root_fd;
    char *seg = rel;
    for (;;) {
        char *slash = strchr(seg, '/');
        if (slash) *slash = '\0';
        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : O_NONBLOCK);
        int fd = openat(dir, seg, flags);
        int e = errno;
        if (slash) *slash = '/';
        if (dir != root_fd) close(dir);
        if (fd < 0) {
            if (e == ENOENT) return MHD_HTTP_NOT_FOUND;
            if (e == EMFILE || e == ENFILE || e == ENOMEM) return MHD_HTTP_SERVICE_UNAVAILABLE;
            return MHD_HTTP_FORBIDDEN; /* ELOOP: a symlink; ENOTDIR: a symlink or a file; EACCES */
        }
        if (!slash) {
            if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
                close(fd);
                return MHD_HTTP_FORBIDDEN;
            }
            *fd_out = fd;
            return 0;
        }
        dir = fd;
        seg = slash + 1;
    }
}

static const char *etag_of(const server *sv, const char *rel, const struct stat *st, char *buf,
                           size_t cap) {
    if (!strchr(rel, '/'))
        for (int i = 0; i < sv->n_etags; i++)
            if (strcmp(sv->etags[i].name, rel) == 0) return sv->etags[i].etag;
    snprintf(buf, cap, "W/\"%llx-%llx\"", (unsigned long long)st->st_size,
             (unsigned long long)st->st_mtime);
    return buf;
}

typedef struct inm_ctx {
    const char *etag;
    bool match;
} inm_ctx;

/* One If-None-Match header line; several lines are one list (RFC 9110 5.3). */
static bool inm_line(void *arg, const char *value) {
    inm_ctx *c = arg;
    c->match = qp_http_etag_none_match(value, c->etag);
    return !c->match;
}

static enum MHD_Result serve_file(void *ctx, const qp_http_request *req) {
    server *sv = ctx;
    bool head = strcmp(req->method, MHD_HTTP_METHOD_HEAD) == 0;
    if (strcmp(req->method, MHD_HTTP_METHOD_OPTIONS) == 0)
        return answer_status(req, MHD_HTTP_NO_CONTENT, NULL);
    if (!head && strcmp(req->method, MHD_HTTP_METHOD_GET) != 0) {
        const char *allow[] = {MHD_HTTP_HEADER_ALLOW, "GET, HEAD, OPTIONS", NULL};
        return answer_status(req, MHD_HTTP_METHOD_NOT_ALLOWED, allow);
    }
    char rel[QP_HTTP_PATH_MAX + 1];
    size_t rel_len = 0;
    qp_http_path_status ps = qp_http_path_normalize(req->target, req->path_len, rel, sizeof rel,
                                                    &rel_len);
    unsigned status = ps == QP_HTTP_PATH_OK          ? 0
                      : ps == QP_HTTP_PATH_FORBIDDEN ? MHD_HTTP_FORBIDDEN
                      : ps == QP_HTTP_PATH_TOO_LONG  ? MHD_HTTP_URI_TOO_LONG
                                                     : MHD_HTTP_BAD_REQUEST;
    if (status == 0 && rel_len == 0) snprintf(rel, sizeof rel, "manifest.json");
    int fd = -1;
    struct stat st;
    if (status == 0) status = open_confined(sv->root_fd, rel, &fd, &st);
    if (status != 0) {
        if (sv->verbose)
            fprintf(stderr, "quantpack serve: %s %.200s -> %u\n", req->method, req->target, status);
        return answer_status(req, status, NULL);
    }

    uint64_t size = (uint64_t)st.st_size, first = 0, last = 0;
    char ebuf[96];
    const char *etag = etag_of(sv, rel, &st, ebuf, sizeof ebuf);
    inm_ctx inm = {etag, false};
    qp_http_header_each(req, MHD_HTTP_HEADER_IF_NONE_MATCH, inm_line, &inm);
    if (inm.match) {
        close(fd);
        const char *h[] = {MHD_HTTP_HEADER_ETAG, etag, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes",
                           MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache", NULL};
        return answer_status(req, MHD_HTTP_NOT_MODIFIED, h);
    }
    const char *range = qp_http_header(req, MHD_HTTP_HEADER_RANGE);
    const char *if_range = qp_http_header(req, MHD_HTTP_HEADER_IF_RANGE);
    qp_http_range_status rs = qp_http_range_parse(range, size, &first, &last);
    if (rs != QP_HTTP_RANGE_NONE && if_range && !qp_http_etag_if_range(if_range, etag))
        rs = QP_HTTP_RANGE_NONE; /* the client's copy is stale: the whole file */
    char crange[96];
    if (rs == QP_HTTP_RANGE_UNSATISFIABLE) {
        close(fd);
        snprintf(crange, sizeof crange, "bytes */%llu", (unsigned long long)size);
        const char *h[] = {MHD_HTTP_HEADER_CONTENT_RANGE, crange, MHD_HTTP_HEADER_ACCEPT_RANGES,
                           "bytes", MHD_HTTP_HEADER_ETAG, etag, NULL};
        return answer_status(req, MHD_HTTP_RANGE_NOT_SATISFIABLE, h);
    }
    if (rs == QP_HTTP_RANGE_NONE) {
        first = 0;
        last = size ? size - 1 : 0;
    }
    uint64_t len = size ? last - first + 1 : 0;
    struct MHD_Response *resp;
    if (len > 0) {
        resp = MHD_create_response_from_fd_at_offset64(len, fd, first); /* owns fd */
        if (!resp) close(fd);
    } else {
        close(fd);
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) return MHD_NO;
    for (size_t i = 0; i < N_CORS; i += 2) MHD_add_response_header(resp, k_cors[i], k_cors[i + 1]);
    size_t bl = strlen(rel);
    bool json = bl >= 5 && strcmp(rel + bl - 5, ".json") == 0;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            json ? "application/json" : "application/octet-stream");
    if (rs == QP_HTTP_RANGE_OK) {
        snprintf(crange, sizeof crange, "bytes %llu-%llu/%llu", (unsigned long long)first,
                 (unsigned long long)last, (unsigned long long)size);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, crange);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    status = rs == QP_HTTP_RANGE_OK ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK;
    if (sv->verbose)
        fprintf(stderr, "quantpack serve: %s /%s -> %u (%llu bytes)\n", req->method, rel, status,
                (unsigned long long)len);
    return qp_http_respond(req, status, resp);
}

/* ---- listening socket and command --------------------------------------------------------- */

/* The listening socket in *out (written only on success). */
static qp_status open_listener(const char *bind_addr, const char *port, char *shown, size_t cap, int *out,
                               qp_err *e) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(bind_addr, port, &hints, &res);
    if (rc != 0) return qp_fail(e, QP_ERR_IO, "serve: cannot resolve %s: %s", bind_addr, gai_strerror(rc));
    int fd = -1;
    qp_status s = QP_OK; /* the first address that would not listen names the failure */
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 256) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
            if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
                getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                            NI_NUMERICHOST | NI_NUMERICSERV);
            snprintf(shown, cap, ai->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, serv);
            break;
        }
        if (s == QP_OK)
            s = qp_fail(e, QP_ERR_IO, "serve: cannot listen on %s port %s: %s", bind_addr, port,
                        strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return s != QP_OK ? s : qp_fail(e, QP_ERR_IO, "serve: cannot open a socket for %s: %s", bind_addr,
                                        strerror(errno));
    *out = fd;
    return QP_OK;
}

static void serve_log(const char *msg) { fprintf(stderr, "quantpack: serve: %s\n", msg); }

static void server_free(server *sv) {
    for (int i = 0; i < sv->n_etags; i++) qp_free(sv->etags[i].name);
    qp_free(sv->etags);
    if (sv->root_fd >= 0) close(sv->root_fd);
}

/* A folder with a manifest.json: an RDRR package whose files are served. */
static bool is_rdrr_dir(const char *path) {
    struct stat st;
    char man[PATH_MAX];
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    snprintf(man, sizeof man, "%s/manifest.json", path);
    return lstat(man, &st) == 0;
}

/* The id /v1/models lists: the last path segment of the model. */
static void model_id_of(const char *path, char *id, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(id, cap, "%.*s", (int)(n - b), path + b);
}

/* The API over the model: *api stays NULL for an RDRR folder the runtime cannot run (its files
 * are still served, with a warning); for any other model that is an error. 0 or an exit code. */
static int start_api(const qp_cli_gen_args *g, bool rdrr, qp_api_opts *ao, qp_model **m, qp_api **api) {
    qp_err e = {0};
    qp_status s = qp_model_open(g->model, &g->open, m, &e);
    const qp_runtime_opts ro = qp_cli_gen_runtime_opts(g);
    if (s == QP_OK) s = qp_api_new(*m, &ro, ao, api, &e);
    if (s == QP_OK) return 0;
    qp_model_close(*m);
    *m = NULL;
    if (!rdrr) return qp_cli_fail(&e);
    fprintf(stderr, "quantpack: serve: warning: no /v1 API for this package (%s); serving its files\n",
            e.msg);
    return 0;
}

static const char k_serve_usage[] =
    "usage: quantpack serve MODEL|DIR [--port P] [--bind ADDR] [--api-key KEY] [options]\n\n"
    "An OpenAI-compatible API over the reference runtime: GET /v1/models, POST /v1/completions,\n"
    "POST /v1/chat/completions (stream, stop, max_tokens, temperature, top_p, seed; usage\n"
    "counts), GET /health. Requests are answered in order, one generation at a time.\n"
    "For an RDRR DIR its files are served too, under their paths, on the same port (GET, HEAD,\n"
    "OPTIONS; \"/\" is manifest.json; byte ranges; ETag = shard SHA-256; CORS for DOPPLER; only\n"
    "regular files: dot paths, symlinks and FIFOs get 403).\n"
    "Limits: 512 connections, 64 per client address, 32 KiB of headers, 1 MiB API bodies, a\n"
    "request must arrive within 10 s. Stops on Ctrl-C (SIGINT) or SIGTERM.\n";

int qp_cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *bind_addr = "127.0.0.1", *api_key = NULL;
    int64_t port_n = 8765;
    bool verbose = false;
    qp_cli_gen_args g;
    qp_cli_gen_defaults(&g, 0);
    qp_cli_opt opts[QP_CLI_GEN_MAX_ROWS + 4] = {
        {"--port", NULL, QP_CLI_I64, &port_n, .lo = 0, .hi = 65535, .arg = "P",
         .help = "TCP port (default 8765; 0 picks a free one, printed on stderr)"},
        {"--bind", "--host", QP_CLI_STR, &bind_addr, .arg = "ADDR", .help = "address (default 127.0.0.1)"},
        {"--api-key", NULL, QP_CLI_STR, &api_key, .arg = "KEY",
         .help = "require \"Authorization: Bearer KEY\" on /v1/ (401 otherwise)"},
        {"--verbose", NULL, QP_CLI_FLAG, &verbose, .help = "log every request on stderr"},
    };
    const int n_opts = 4 + qp_cli_gen_opts(&g, QP_GEN_OPT_TEMPLATE, opts + 4);
    const qp_cli_cmd cmd = {"serve", k_serve_usage, NULL, opts, n_opts, 0, &dir, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    const bool fixed_seed = g.seed >= 0;
    if (!fixed_seed) g.seed = 0; /* each request without a seed gets a random one */
    if ((rc = qp_cli_gen_finish("serve", &g, dir)) != QP_CLI_RUN) return rc;
    dir = g.model;
    char port[16];
    snprintf(port, sizeof port, "%d", (int)port_n);
    static server sv;
    memset(&sv, 0, sizeof sv);
    sv.root_fd = -1;
    const bool rdrr = is_rdrr_dir(dir);
    if (rdrr && (!realpath(dir, sv.root) ||
                 (sv.root_fd = open(sv.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
        return qp_cli_error(QP_ERR_IO, "serve: %s is not a directory", dir);
    sv.verbose = verbose;
    if (rdrr) load_etags(&sv);

    char *tmpl = NULL, model_id[256];
    model_id_of(dir, model_id, sizeof model_id);
    qp_model *m = NULL;
    qp_api *api = NULL;
    qp_api_opts ao = {model_id, api_key, NULL, g.sampler, fixed_seed, g.n_predict, verbose};
    if ((rc = qp_cli_gen_chat_template(&g, &tmpl)) == 0) {
        ao.chat_template = tmpl ? tmpl : g.chat_template;
        rc = start_api(&g, rdrr, &ao, &m, &api);
    }
    char shown[NI_MAXHOST + NI_MAXSERV + 8];
    qp_err e;
    qp_err_clear(&e);
    int lfd = -1;
    if (rc == 0 && open_listener(bind_addr, port, shown, sizeof shown, &lfd, &e) != QP_OK) rc = qp_cli_fail(&e);
    const qp_http_route routes[] = {
        {"/v1/", qp_api_handle, api, QP_API_MAX_BODY},
        {"/health", qp_api_handle, api, 0},
        {"/", serve_file, &sv, 0},
    };
    const size_t n_routes = (api ? 2 : 0) + (rdrr ? 1 : 0);
    const qp_http_limits limits = QP_HTTP_LIMITS_DEFAULT;
    char err[256];
    qp_http_server *hs = NULL;
    if (rc == 0) {
        hs = qp_http_server_start(lfd, api ? routes : routes + 2, n_routes, &limits,
                                  verbose ? serve_log : NULL, err, sizeof err);
        if (!hs) rc = qp_cli_error(QP_ERR_IO, "serve: %s", err);
    }
    if (rc == 0) {
        fprintf(stderr, "quantpack: serving %s on http://%s/%s (Ctrl-C stops)\n", rdrr ? sv.root : dir, shown,
                api ? " with the API under /v1/" : "");
        fflush(stderr);
        int sig = qp_http_server_wait(hs);
        qp_api_shutdown(api);
        qp_http_server_stop(hs);
        fprintf(stderr, "quantpack: serve stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    qp_api_free(api);
    qp_model_close(m);
    qp_free(tmpl);
    server_free(&sv);
    return rc;
}
