/* cli/http_util.h on RFC 9110's own examples, and cli/http_server.h on 127.0.0.1: a route table
 * with an API-style "/v1/" route taking bodies up to 64 bytes beside a catch-all "/" taking
 * none (routing on the raw target, bodies by Content-Length and chunked, 413 over the bound,
 * 431 for headers over 4 KiB), the 2 s whole-request deadline against a silent client and one
 * trickling a byte every 300 ms (MHD's idle timeout alone would never fire) but not against a
 * keep-alive connection used for longer, the per-client connection limit, and SIGTERM ending
 * qp_http_server_wait. Every wait is bounded (socket timeouts of 5 s). */
#define _DEFAULT_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli/http_server.h"
#include "cli/http_util.h"
#include "qp_test.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- pure parsers -------------------------------------------------------------------------- */

static void test_path(void) {
    static const struct {
        const char *raw, *want; /* want NULL: not OK */
        qp_http_path_status status;
    } cases[] = {
        {"/", "", QP_HTTP_PATH_OK},
        {"/shard_00000.bin?x=1#f", "shard_00000.bin", QP_HTTP_PATH_OK},
        {"//a///b%20c/", "a/b c", QP_HTTP_PATH_OK},
        {"/a%2Fb", "a/b", QP_HTTP_PATH_OK},
        {"/a%3Fb", "a?b", QP_HTTP_PATH_OK},
        {"/a..b/c.", "a..b/c.", QP_HTTP_PATH_OK},
        {"/../x", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/a/%2e%2E/x", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/a/./x", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/.staging/x", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/a/.hidden", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/a%5c..%5cx", NULL, QP_HTTP_PATH_FORBIDDEN},
        {"/a%00b", NULL, QP_HTTP_PATH_BAD},
        {"/a%0ab", NULL, QP_HTTP_PATH_BAD},
        {"/a%zz", NULL, QP_HTTP_PATH_BAD},
        {"/a%4", NULL, QP_HTTP_PATH_BAD},
        {"a/b", NULL, QP_HTTP_PATH_BAD},
        {"", NULL, QP_HTTP_PATH_BAD},
        {"/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17", NULL, QP_HTTP_PATH_TOO_LONG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[QP_HTTP_PATH_MAX + 1];
        size_t n = 99;
        qp_http_path_status s = qp_http_path_normalize(cases[i].raw, strlen(cases[i].raw), out,
                                                       sizeof out, &n);
        QP_CHECK_MSG(s == cases[i].status, "%s: status %d", cases[i].raw, (int)s);
        if (cases[i].want && s == QP_HTTP_PATH_OK)
            QP_CHECK_MSG(strcmp(out, cases[i].want) == 0 && n == strlen(out), "%s -> '%s'",
                         cases[i].raw, out);
    }
    char seg[300] = "/";
    memset(seg + 1, 'a', 256);
    seg[257] = '\0';
    char out[QP_HTTP_PATH_MAX + 1];
    size_t n;
    QP_CHECK(qp_http_path_normalize(seg, strlen(seg), out, sizeof out, &n) == QP_HTTP_PATH_TOO_LONG);
    QP_CHECK(qp_http_path_normalize("/abc", 4, out, 3, &n) == QP_HTTP_PATH_TOO_LONG); /* no room for NUL */
    QP_CHECK(qp_http_path_normalize("/abc", 4, out, 4, &n) == QP_HTTP_PATH_OK && n == 3);
}

static void test_range(void) {
    /* RFC 9110 14.1.2's examples on a 10000-byte representation, then the edges. */
    static const struct {
        const char *value;
        uint64_t size;
        qp_http_range_status status;
        uint64_t first, last;
    } cases[] = {
        {"bytes=0-499", 10000, QP_HTTP_RANGE_OK, 0, 499},
        {"bytes=500-999", 10000, QP_HTTP_RANGE_OK, 500, 999},
        {"bytes=-500", 10000, QP_HTTP_RANGE_OK, 9500, 9999},
        {"bytes=9500-", 10000, QP_HTTP_RANGE_OK, 9500, 9999},
        {"bytes=0-0,-1", 10000, QP_HTTP_RANGE_NONE, 0, 0}, /* several: the whole file */
        {"Bytes=0-9", 10000, QP_HTTP_RANGE_OK, 0, 9},
        {" bytes=, 5-9 ,", 10000, QP_HTTP_RANGE_OK, 5, 9},
        {"bytes=9990-20000", 10000, QP_HTTP_RANGE_OK, 9990, 9999},
        {"bytes=-20000", 10000, QP_HTTP_RANGE_OK, 0, 9999},
        {"bytes=99999999999999999999999-", 10000, QP_HTTP_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=0-99999999999999999999999", 10000, QP_HTTP_RANGE_OK, 0, 9999},
        {"bytes=10000-", 10000, QP_HTTP_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=-0", 10000, QP_HTTP_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=0-", 0, QP_HTTP_RANGE_UNSATISFIABLE, 0, 0},
        {"bytes=5-4", 10000, QP_HTTP_RANGE_NONE, 0, 0},
        {"bytes=", 10000, QP_HTTP_RANGE_NONE, 0, 0},
        {"bytes=+5-9", 10000, QP_HTTP_RANGE_NONE, 0, 0},
        {"bytes=5 -9", 10000, QP_HTTP_RANGE_NONE, 0, 0},
        {"bytes=a-b", 10000, QP_HTTP_RANGE_NONE, 0, 0},
        {"items=0-9", 10000, QP_HTTP_RANGE_NONE, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t a = 77, b = 77;
        qp_http_range_status s = qp_http_range_parse(cases[i].value, cases[i].size, &a, &b);
        QP_CHECK_MSG(s == cases[i].status, "'%s': status %d", cases[i].value, (int)s);
        if (s == QP_HTTP_RANGE_OK && cases[i].status == QP_HTTP_RANGE_OK)
            QP_CHECK_MSG(a == cases[i].first && b == cases[i].last, "'%s': %llu-%llu",
                         cases[i].value, (unsigned long long)a, (unsigned long long)b);
        if (s != QP_HTTP_RANGE_OK) QP_CHECK(a == 77 && b == 77);
    }
    QP_CHECK(qp_http_range_parse(NULL, 10, NULL, NULL) == QP_HTTP_RANGE_NONE);
}

static void test_etag(void) {
    const char *e = "\"sha256-ab\"", *w = "W/\"5-6\"";
    /* RFC 9110 8.8.3.2: weak comparison matches W/"1" and "1"; strong does not. */
    QP_CHECK(qp_http_etag_none_match("\"sha256-ab\"", e));
    QP_CHECK(qp_http_etag_none_match("W/\"sha256-ab\"", e));
    QP_CHECK(qp_http_etag_none_match("\"5-6\"", w));
    QP_CHECK(qp_http_etag_none_match(" \"x\" ,, W/\"sha256-ab\" ", e));
    QP_CHECK(qp_http_etag_none_match("*", e));
    QP_CHECK(!qp_http_etag_none_match("**", e));
    QP_CHECK(!qp_http_etag_none_match("x\"sha256-ab\"", e));
    QP_CHECK(!qp_http_etag_none_match("\"sha256-ab\"x", e));
    QP_CHECK(!qp_http_etag_none_match("\"sha256-abc\"", e));
    QP_CHECK(!qp_http_etag_none_match("\"sha256-a\"", e));
    QP_CHECK(!qp_http_etag_none_match("\"x\" \"sha256-ab\"", e)); /* no comma: malformed */
    QP_CHECK(!qp_http_etag_none_match("\"sha256-ab\", \"open", e));
    QP_CHECK(!qp_http_etag_none_match("\"sha256 ab\"", "\"sha256 ab\"")); /* SP is not etagc */
    QP_CHECK(!qp_http_etag_none_match("", e));
    QP_CHECK(!qp_http_etag_none_match(NULL, e));
    QP_CHECK(qp_http_etag_if_range(" \"sha256-ab\" ", e));
    QP_CHECK(!qp_http_etag_if_range("W/\"sha256-ab\"", e));
    QP_CHECK(!qp_http_etag_if_range("\"5-6\"", w));
    QP_CHECK(!qp_http_etag_if_range("\"sha256-ab\", \"x\"", e));
    QP_CHECK(!qp_http_etag_if_range("Sat, 29 Oct 1994 19:43:31 GMT", e));
}

/* ---- the server ---------------------------------------------------------------------------- */

/* Echoes route name, raw target and body: "<name> <target> <body>". */
static enum MHD_Result echo(void *ctx, const qp_http_request *req) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s %s %.*s", (const char *)ctx, req->target,
                     (int)req->body_len, req->body ? req->body : "");
    struct MHD_Response *r = MHD_create_response_from_buffer((size_t)n, buf, MHD_RESPMEM_MUST_COPY);
    return qp_http_respond(req, MHD_HTTP_OK, r);
}

static int g_port;

static int connect_from(const char *src_addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in src = {0}, dst = {0};
    src.sin_family = dst.sin_family = AF_INET;
    dst.sin_port = htons((unsigned short)g_port);
    inet_pton(AF_INET, src_addr, &src.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    struct timeval tv = {5, 0};
    if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Sends req (Connection: close expected in it) and reads the whole answer into out. */
static bool exchange(const char *req, size_t req_len, char *out, size_t cap) {
    int fd = connect_from("127.0.0.1");
    if (fd < 0) return false;
    bool ok = send(fd, req, req_len, MSG_NOSIGNAL) == (ssize_t)req_len;
    size_t n = 0;
    while (ok && n + 1 < cap) {
        ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
    }
    out[n] = '\0';
    close(fd);
    return ok && n > 0;
}

static bool ask(const char *req, char *out, size_t cap) { return exchange(req, strlen(req), out, cap); }

/* Seconds until the server closes fd (reads return 0 or fail), at most limit s. */
static double seconds_to_close(int fd, double limit, int trickle_ms) {
    double t0 = now_s();
    const char *bytes = "GET / HTTP/1.1\r\nHost: x\r\nX-A: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    size_t sent = 0;
    while (now_s() - t0 < limit) {
        if (trickle_ms > 0 && bytes[sent]) send(fd, bytes + sent++, 1, MSG_NOSIGNAL);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, trickle_ms > 0 ? trickle_ms : 100) > 0) {
            char c[256];
            ssize_t r = recv(fd, c, sizeof c, MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN)) return now_s() - t0;
        }
    }
    return limit;
}

static void *client(void *arg) {
    (void)arg;
    char out[4096];
    QP_CHECK(ask("GET /v1/models?x=%2F HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 200") && strstr(out, "\r\n\r\nv1 /v1/models?x=%2F "), "%s", out);
    QP_CHECK(strstr(out, "Server: quantpack") != NULL);
    QP_CHECK(ask("GET /files%2Fa HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "\r\n\r\nroot /files%2Fa ") != NULL, "%s", out);
    QP_CHECK(ask("GET /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "\r\n\r\nroot /v1 ") != NULL, "%s", out);
    /* bodies: Content-Length and chunked, within and over the route's 64 bytes */
    QP_CHECK(ask("POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 10\r\n\r\n0123456789",
                 out, sizeof out));
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 200") && strstr(out, "v1 /v1/echo 0123456789"), "%s", out);
    QP_CHECK(ask("POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5\r\nabcde\r\n3\r\nfgh\r\n0\r\n\r\n", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "v1 /v1/echo abcdefgh") != NULL, "%s", out);
    QP_CHECK(ask("POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 65\r\n\r\n"
                 "00000000001111111111222222222233333333334444444444555555555566666", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 413") != NULL, "%s", out);
    QP_CHECK(ask("POST /v1/echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "28\r\n0000000000111111111122222222223333333333\r\n"
                 "28\r\n0000000000111111111122222222223333333333\r\n0\r\n\r\n", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 413") != NULL, "%s", out);
    QP_CHECK(ask("POST /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\nz", out, sizeof out));
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 413") != NULL, "%s", out);
    /* headers over the 4 KiB bound are refused; the server goes on */
    char big[6000];
    int n = snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: ");
    memset(big + n, 'a', 5000);
    memcpy(big + n + 5000, "\r\n\r\n", 5);
    exchange(big, strlen(big), out, sizeof out);
    QP_CHECK_MSG(strncmp(out, "HTTP/1.1 431", 12) == 0, "%s", out);

    /* the deadline (2 s) against silence and against a byte every 300 ms */
    int fd = connect_from("127.0.0.1");
    double t = seconds_to_close(fd, 6, 0);
    QP_CHECK_MSG(t > 1.9 && t < 3.5, "silent connection closed after %.2f s", t);
    close(fd);
    fd = connect_from("127.0.0.1");
    t = seconds_to_close(fd, 6, 300);
    QP_CHECK_MSG(t > 1.9 && t < 3.5, "trickling connection closed after %.2f s", t);
    close(fd);
    /* keep-alive: requests at 0, 1.4 and 2.8 s on one connection are all answered (the 2 s
     * clock restarts after each answer) */
    fd = connect_from("127.0.0.1");
    const char *ka = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 3; i++) {
        if (i) usleep(1400 * 1000);
        QP_CHECK(send(fd, ka, strlen(ka), MSG_NOSIGNAL) == (ssize_t)strlen(ka));
        ssize_t got = recv(fd, out, sizeof out - 1, 0);
        out[got > 0 ? got : 0] = '\0';
        QP_CHECK_MSG(strncmp(out, "HTTP/1.1 200", 12) == 0, "keep-alive request %d: '%s'", i, out);
    }
    close(fd);

    /* per client 3 (from 127.0.0.7): the 4th connection is closed at once */
    int c[4];
    for (int i = 0; i < 4; i++) c[i] = connect_from("127.0.0.7");
    QP_CHECK(c[3] >= 0);
    t = c[3] >= 0 ? seconds_to_close(c[3], 1.5, 0) : 0;
    QP_CHECK_MSG(t < 1.4, "4th connection from one address still open after %.2f s", t);
    t = c[0] >= 0 ? seconds_to_close(c[0], 0.3, 0) : 0;
    QP_CHECK_MSG(t >= 0.3, "1st connection closed after %.2f s", t);
    /* another address is still served */
    int other = connect_from("127.0.0.8");
    const char *r = "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    QP_CHECK(other >= 0 && send(other, r, strlen(r), MSG_NOSIGNAL) > 0);
    ssize_t got = other >= 0 ? recv(other, out, sizeof out - 1, 0) : -1;
    out[got > 0 ? got : 0] = '\0';
    QP_CHECK_MSG(strstr(out, "HTTP/1.1 200") != NULL, "%s", out);
    if (other >= 0) close(other);
    kill(getpid(), SIGTERM); /* with c[] still open */
    for (int i = 0; i < 4; i++)
        if (c[i] >= 0) close(c[i]);
    return NULL;
}

static void test_server(void) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 64) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) != 0) {
        QP_CHECK_MSG(false, "cannot listen on 127.0.0.1: %s", strerror(errno));
        return;
    }
    g_port = ntohs(a.sin_port);
    const qp_http_route routes[] = {{"/v1/", echo, "v1", 64}, {"/", echo, "root", 0}};
    const qp_http_limits limits = {2, 10, 16, 3, 4096, 2};
    char err[256];
    qp_http_server *s = qp_http_server_start(lfd, routes, 2, &limits, NULL, err, sizeof err);
    QP_CHECK_MSG(s != NULL, "%s", err);
    if (!s) return;
    pthread_t th;
    QP_CHECK(pthread_create(&th, NULL, client, NULL) == 0);
    int sig = qp_http_server_wait(s);
    double t0 = now_s();
    qp_http_server_stop(s);
    double stop = now_s() - t0;
    pthread_join(th, NULL);
    QP_CHECK_EQ_INT(sig, SIGTERM);
    QP_CHECK_MSG(stop < 1.0, "stop took %.2f s", stop);
}

int main(void) {
    test_path();
    test_range();
    test_etag();
    test_server();
    return qp_test_finish();
}
