/* quantpack serve DIR [--port P] [--bind ADDR]: a small HTTP/1.1 file server for RDRR
 * directories (readers/rdrr.md "serving"): GET/HEAD/OPTIONS, "/" -> manifest.json, single byte
 * ranges (206 / 416), ETag from the manifest's shard hash, If-Range, If-None-Match, CORS as
 * DOPPLER expects, 403 outside DIR, 404 when missing, one thread per connection (bounded),
 * keep-alive, clean shutdown on SIGINT/SIGTERM. Binds 127.0.0.1 unless told otherwise. */
#define _DEFAULT_SOURCE 1 /* realpath, NI_MAXHOST (glibc) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"

#define MAX_CONNS 512
#define MAX_HEADER 16384
#define IO_TIMEOUT_S 15
#define SEND_BUF ((size_t)256 << 10)

typedef struct etag_entry {
    char *name;
    char etag[80];
} etag_entry;

typedef struct server {
    char root[PATH_MAX];     /* realpath of DIR */
    size_t root_len;
    etag_entry *etags;
    int n_etags;
    bool verbose;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;
    int fds[MAX_CONNS];      /* open client sockets, -1 when free */
} server;

static volatile sig_atomic_t g_stop;
static int g_wake[2] = {-1, -1};

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_wake[1] >= 0) {
        ssize_t r = write(g_wake[1], "x", 1);
        (void)r;
    }
}

/* ---- manifest etags ----------------------------------------------------------------------- */

static void load_etags(server *sv) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", sv->root);
    char *text = NULL;
    size_t len = 0;
    qp_err e = {0};
    if (qp_file_read_all(path, (size_t)256 << 20, &text, &len, &e) != QP_OK) return;
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

/* ---- request handling --------------------------------------------------------------------- */

static bool send_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static const char k_cors[] =
    "Access-Control-Allow-Origin: *\r\n"
    "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
    "Access-Control-Allow-Headers: Range, If-Range, If-None-Match, Content-Type\r\n"
    "Access-Control-Expose-Headers: Content-Length, Content-Range, Accept-Ranges, ETag\r\n"
    "Access-Control-Max-Age: 86400\r\n";

static bool send_simple(int fd, int code, const char *reason, const char *extra, bool head,
                        bool keep) {
    char body[128], hdr[1024];
    int bl = snprintf(body, sizeof body, "%d %s\n", code, reason);
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %d %s\r\nServer: quantpack\r\n%sContent-Type: text/plain\r\n"
                      "Content-Length: %d\r\nConnection: %s\r\n%s\r\n",
                      code, reason, k_cors, code == 204 ? 0 : bl, keep ? "keep-alive" : "close",
                      extra ? extra : "");
    if (!send_all(fd, hdr, (size_t)hl)) return false;
    return head || code == 204 || send_all(fd, body, (size_t)bl);
}

static int hexv(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes %XX in place; false on a bad escape or an encoded NUL. */
static bool url_decode(char *s) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%') {
            int a = hexv(p[1]), b = a >= 0 ? hexv(p[2]) : -1;
            if (a < 0 || b < 0 || (a == 0 && b == 0)) return false;
            *o++ = (char)(a << 4 | b);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return true;
}

/* 0 ok (full path in out), 403 outside the root, 404 missing. */
static int resolve(const server *sv, char *target, char *out, size_t cap) {
    char *q = strpbrk(target, "?#");
    if (q) *q = '\0';
    if (!url_decode(target) || target[0] != '/') return 403;
    if (strcmp(target, "/") == 0) target = "/manifest.json";
    /* Any ".." segment or backslash is refused before touching the file system. */
    for (const char *p = target; *p; p++) {
        if (*p == '\\') return 403;
        if (p[0] == '.' && p[1] == '.' && (p == target || p[-1] == '/') && (p[2] == '/' || !p[2]))
            return 403;
    }
    char joined[PATH_MAX * 2];
    snprintf(joined, sizeof joined, "%s%s", sv->root, target);
    char real[PATH_MAX];
    if (!realpath(joined, real)) return errno == ENOENT || errno == ENOTDIR ? 404 : 403;
    /* Symlinks that leave the directory are outside it too. */
    if (strncmp(real, sv->root, sv->root_len) != 0 || real[sv->root_len] != '/') return 403;
    const char *base = strrchr(real, '/');
    if (base && base[1] == '.') return 404; /* staging folders, temp files, dot files */
    snprintf(out, cap, "%s", real);
    return 0;
}

static const char *find_header(char *const *names, char *const *vals, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcasecmp(names[i], name) == 0) return vals[i];
    return NULL;
}

/* Parses a single "bytes=" range against size. 1: range set; 0: ignore (serve all);
 * -1: unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *a, uint64_t *b) {
    while (*h == ' ') h++;
    if (strncasecmp(h, "bytes=", 6) != 0) return 0;
    h += 6;
    if (strchr(h, ',')) return 0; /* multiple ranges: answered with the whole file */
    char *end;
    if (*h == '-') {
        if (h[1] < '0' || h[1] > '9') return 0;
        unsigned long long n = strtoull(h + 1, &end, 10);
        while (*end == ' ') end++;
        if (*end) return 0;
        if (n == 0 || size == 0) return -1;
        *a = n >= size ? 0 : size - n;
        *b = size - 1;
        return 1;
    }
    if (*h < '0' || *h > '9') return 0;
    unsigned long long x = strtoull(h, &end, 10);
    if (*end != '-') return 0;
    const char *r = end + 1;
    unsigned long long y = UINT64_MAX;
    if (*r >= '0' && *r <= '9') {
        y = strtoull(r, &end, 10);
        r = end;
    }
    while (*r == ' ') r++;
    if (*r) return 0;
    if (y < x) return 0;
    if (x >= size) return -1;
    *a = x;
    *b = y >= size ? size - 1 : y;
    return 1;
}

static const char *etag_of(const server *sv, const char *path, const struct stat *st, char *buf,
                           size_t cap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(path, sv->root, sv->root_len) == 0 && path[sv->root_len] == '/' &&
        strchr(path + sv->root_len + 1, '/') == NULL) {
        for (int i = 0; i < sv->n_etags; i++)
            if (strcmp(sv->etags[i].name, base) == 0) return sv->etags[i].etag;
    }
    snprintf(buf, cap, "W/\"%llx-%llx\"", (unsigned long long)st->st_size,
             (unsigned long long)st->st_mtime);
    return buf;
}

/* Serves one parsed request; false when the connection must close. */
static bool serve_request(server *sv, int fd, const char *method, char *target, char *const *hn,
                          char *const *hv, int nh, bool keep) {
    bool head = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "OPTIONS") == 0) return send_simple(fd, 204, "No Content", NULL, true, keep) && keep;
    if (!head && strcmp(method, "GET") != 0)
        return send_simple(fd, 405, "Method Not Allowed", "Allow: GET, HEAD, OPTIONS\r\n", false, keep) && keep;
    char path[PATH_MAX];
    int r = resolve(sv, target, path, sizeof path);
    if (r == 403) return send_simple(fd, 403, "Forbidden", NULL, head, keep) && keep;
    if (r == 404) return send_simple(fd, 404, "Not Found", NULL, head, keep) && keep;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (f >= 0) close(f);
        return send_simple(fd, 404, "Not Found", NULL, head, keep) && keep;
    }
    uint64_t size = (uint64_t)st.st_size, a = 0, b = size ? size - 1 : 0;
    char ebuf[96];
    const char *etag = etag_of(sv, path, &st, ebuf, sizeof ebuf);
    const char *inm = find_header(hn, hv, nh, "If-None-Match");
    if (inm && (strstr(inm, etag) || strcmp(inm, "*") == 0)) {
        char extra[160];
        snprintf(extra, sizeof extra, "ETag: %s\r\nAccept-Ranges: bytes\r\n", etag);
        close(f);
        char hdr[1024];
        int hl = snprintf(hdr, sizeof hdr,
                          "HTTP/1.1 304 Not Modified\r\nServer: quantpack\r\n%s%sConnection: %s\r\n\r\n",
                          k_cors, extra, keep ? "keep-alive" : "close");
        return send_all(fd, hdr, (size_t)hl) && keep;
    }
    const char *range = find_header(hn, hv, nh, "Range");
    const char *ifr = find_header(hn, hv, nh, "If-Range");
    int pr = range ? parse_range(range, size, &a, &b) : 0;
    if (pr != 0 && ifr && strcmp(ifr, etag) != 0) pr = 0, a = 0, b = size ? size - 1 : 0;
    if (pr < 0) {
        char extra[160];
        snprintf(extra, sizeof extra, "Content-Range: bytes */%llu\r\nAccept-Ranges: bytes\r\nETag: %s\r\n",
                 (unsigned long long)size, etag);
        close(f);
        return send_simple(fd, 416, "Range Not Satisfiable", extra, head, keep) && keep;
    }
    uint64_t len = size ? b - a + 1 : 0;
    if (pr == 0) {
        a = 0;
        len = size;
    }
    const char *base = strrchr(path, '/');
    size_t bl = strlen(base);
    const char *ctype = bl > 5 && strcmp(base + bl - 5, ".json") == 0 ? "application/json"
                                                                       : "application/octet-stream";
    char hdr[2048], cr[128] = "";
    if (pr > 0)
        snprintf(cr, sizeof cr, "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)a,
                 (unsigned long long)(a + len - 1), (unsigned long long)size);
    int hl = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %s\r\nServer: quantpack\r\n%sContent-Type: %s\r\n"
                      "Content-Length: %llu\r\n%sAccept-Ranges: bytes\r\nETag: %s\r\n"
                      "Cache-Control: no-cache\r\nConnection: %s\r\n\r\n",
                      pr > 0 ? "206 Partial Content" : "200 OK", k_cors, ctype,
                      (unsigned long long)len, cr, etag, keep ? "keep-alive" : "close");
    bool ok = send_all(fd, hdr, (size_t)hl);
    if (ok && !head && len > 0) {
        char *buf = qp_malloc(SEND_BUF);
        ok = buf != NULL;
        uint64_t off = a, left = len;
        while (ok && left > 0) {
            size_t want = left < SEND_BUF ? (size_t)left : SEND_BUF;
            ssize_t got = pread(f, buf, want, (off_t)off);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) ok = false; /* file shrank: the connection is unusable now */
            else {
                ok = send_all(fd, buf, (size_t)got);
                off += (uint64_t)got;
                left -= (uint64_t)got;
            }
        }
        qp_free(buf);
    }
    close(f);
    if (sv->verbose)
        fprintf(stderr, "quantpack serve: %s %s -> %d (%llu bytes)\n", method, path,
                pr > 0 ? 206 : 200, (unsigned long long)len);
    return ok && keep;
}

typedef struct conn {
    server *sv;
    int fd;
    int slot;
} conn;

static void handle_conn(server *sv, int fd) {
    char *buf = qp_malloc(MAX_HEADER + 1);
    if (!buf) return;
    size_t have = 0;
    for (;;) {
        /* Read until the end of the headers. */
        char *end = NULL;
        while (!(end = have ? strstr(buf, "\r\n\r\n") : NULL)) {
            if (have >= MAX_HEADER) {
                send_simple(fd, 431, "Request Header Fields Too Large", NULL, false, false);
                qp_free(buf);
                return;
            }
            ssize_t r = recv(fd, buf + have, MAX_HEADER - have, 0);
            if (r < 0 && errno == EINTR && !g_stop) continue;
            if (r <= 0) {
                qp_free(buf);
                return;
            }
            have += (size_t)r;
            buf[have] = '\0';
            if (memchr(buf, '\0', have)) {
                send_simple(fd, 400, "Bad Request", NULL, false, false);
                qp_free(buf);
                return;
            }
        }
        size_t req_len = (size_t)(end - buf) + 4;
        *end = '\0';
        /* Request line. */
        char *line_end = strstr(buf, "\r\n");
        if (line_end) *line_end = '\0';
        char *sp1 = strchr(buf, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) != 0) {
            send_simple(fd, 400, "Bad Request", NULL, false, false);
            break;
        }
        *sp1 = '\0';
        *sp2 = '\0';
        char *method = buf, *target = sp1 + 1;
        bool http10 = strcmp(sp2 + 1, "HTTP/1.0") == 0;
        char *hn[64], *hv[64];
        int nh = 0;
        bool bad = false, has_body = false;
        for (char *p = line_end ? line_end + 2 : NULL; p && *p && nh < 64;) {
            char *nl = strstr(p, "\r\n");
            if (nl) *nl = '\0';
            char *colon = strchr(p, ':');
            if (!colon) {
                bad = true;
                break;
            }
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            size_t vl = strlen(v);
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) v[--vl] = '\0';
            hn[nh] = p;
            hv[nh++] = v;
            if ((strcasecmp(p, "Content-Length") == 0 && strcmp(v, "0") != 0) ||
                strcasecmp(p, "Transfer-Encoding") == 0)
                has_body = true;
            p = nl ? nl + 2 : NULL;
        }
        if (bad) {
            send_simple(fd, 400, "Bad Request", NULL, false, false);
            break;
        }
        const char *connh = find_header(hn, hv, nh, "Connection");
        bool keep = !http10 && !has_body && !g_stop && !(connh && strcasecmp(connh, "close") == 0);
        if (http10 && connh && strcasecmp(connh, "keep-alive") == 0 && !has_body) keep = true;
        if (!serve_request(sv, fd, method, target, hn, hv, nh, keep)) break;
        memmove(buf, buf + req_len, have - req_len);
        have -= req_len;
        buf[have] = '\0';
    }
    qp_free(buf);
}

static void *conn_main(void *arg) {
    conn c = *(conn *)arg;
    qp_free(arg);
    handle_conn(c.sv, c.fd);
    pthread_mutex_lock(&c.sv->mu);
    c.sv->fds[c.slot] = -1;
    close(c.fd);
    c.sv->active--;
    pthread_cond_broadcast(&c.sv->cv);
    pthread_mutex_unlock(&c.sv->mu);
    return NULL;
}

/* The listening socket, or -1 with the reason in e. */
static int open_listener(const char *bind_addr, const char *port, char *shown, size_t cap, qp_err *e) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(bind_addr, port, &hints, &res);
    if (rc != 0) {
        qp_fail(e, QP_ERR_IO, "serve: cannot resolve %s: %s", bind_addr, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
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
        qp_fail(e, QP_ERR_IO, "serve: cannot listen on %s port %s: %s", bind_addr, port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0 && e->status == QP_OK)
        qp_fail(e, QP_ERR_IO, "serve: cannot open a socket for %s: %s", bind_addr, strerror(errno));
    return fd;
}

int qp_cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *bind_addr = "127.0.0.1";
    int64_t port_n = 8765;
    bool verbose = false;
    const qp_cli_opt opts[] = {
        {"--port", NULL, QP_CLI_I64, &port_n, .lo = 0, .hi = 65535, .arg = "P",
         .help = "TCP port (default 8765; 0 picks a free one, printed on stderr)"},
        {"--bind", NULL, QP_CLI_STR, &bind_addr, .arg = "ADDR", .help = "address (default 127.0.0.1)"},
        {"--verbose", NULL, QP_CLI_FLAG, &verbose, .help = "log every request on stderr"},
    };
    const qp_cli_cmd cmd = {"serve",
                            "usage: quantpack serve DIR [--port P] [--bind ADDR] [--verbose]\n\n"
                            "Serves an RDRR directory over HTTP/1.1 (GET, HEAD, OPTIONS; \"/\" is\n"
                            "manifest.json; byte ranges; ETag = shard SHA-256; CORS for DOPPLER).\n"
                            "Stops cleanly on Ctrl-C (SIGINT) or SIGTERM.\n",
                            NULL, opts, 3, 0, &dir, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if (!dir) return qp_cli_usage_error("usage: quantpack serve DIR [--port P] [--bind ADDR]");
    char port[16];
    snprintf(port, sizeof port, "%d", (int)port_n);
    static server sv;
    memset(&sv, 0, sizeof sv);
    if (!realpath(dir, sv.root) || !qp_path_is_dir(sv.root))
        return qp_cli_error(QP_ERR_IO, "serve: %s is not a directory", dir);
    sv.root_len = strlen(sv.root);
    if (sv.root_len == 1) sv.root_len = 0; /* "/" */
    sv.verbose = verbose;
    for (int i = 0; i < MAX_CONNS; i++) sv.fds[i] = -1;
    pthread_mutex_init(&sv.mu, NULL);
    pthread_cond_init(&sv.cv, NULL);
    load_etags(&sv);

    char shown[NI_MAXHOST + NI_MAXSERV + 8];
    qp_err e;
    qp_err_clear(&e);
    int lfd = open_listener(bind_addr, port, shown, sizeof shown, &e);
    if (lfd < 0) return qp_cli_fail(&e);
    if (pipe(g_wake) != 0) {
        close(lfd);
        return qp_cli_error(QP_ERR_IO, "serve: cannot make a pipe: %s", strerror(errno));
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, "quantpack: serving %s on http://%s/ (Ctrl-C stops)\n", sv.root, shown);
    fflush(stderr);

    while (!g_stop) {
        struct pollfd p[2] = {{lfd, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
        int r = poll(p, 2, 1000);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0 || !(p[0].revents & POLLIN)) continue;
        int cfd = accept(lfd, NULL, NULL);
        if (cfd < 0) continue;
        struct timeval tv = {IO_TIMEOUT_S, 0};
        setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        pthread_mutex_lock(&sv.mu);
        while (sv.active >= MAX_CONNS && !g_stop) pthread_cond_wait(&sv.cv, &sv.mu);
        int slot = -1;
        for (int i = 0; i < MAX_CONNS && slot < 0; i++)
            if (sv.fds[i] < 0) slot = i;
        conn *c = slot >= 0 ? qp_malloc(sizeof *c) : NULL;
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 256 << 10);
        if (c) {
            c->sv = &sv;
            c->fd = cfd;
            c->slot = slot;
            sv.fds[slot] = cfd;
            sv.active++;
            if (pthread_create(&th, &at, conn_main, c) != 0) {
                sv.fds[slot] = -1;
                sv.active--;
                qp_free(c);
                c = NULL;
            }
        }
        pthread_attr_destroy(&at);
        pthread_mutex_unlock(&sv.mu);
        if (!c) close(cfd);
    }
    /* Shutdown: stop accepting, wake every connection, wait for the threads (bounded). */
    close(lfd);
    pthread_mutex_lock(&sv.mu);
    for (int i = 0; i < MAX_CONNS; i++)
        if (sv.fds[i] >= 0) shutdown(sv.fds[i], SHUT_RDWR);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (sv.active > 0)
        if (pthread_cond_timedwait(&sv.cv, &sv.mu, &until) != 0) break;
    int left = sv.active;
    pthread_mutex_unlock(&sv.mu);
    fprintf(stderr, "quantpack: serve stopped%s\n", left ? " (some connections still open)" : "");
    if (left) return QP_EXIT_OK; /* threads hold sv; exiting the process ends them */
    for (int i = 0; i < sv.n_etags; i++) qp_free(sv.etags[i].name);
    qp_free(sv.etags);
    close(g_wake[0]);
    close(g_wake[1]);
    return QP_EXIT_OK;
}
