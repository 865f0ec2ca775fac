/* qp-test-slow-client PORT N INTERVAL_MS MAX_S ADDR...: opens N connections to 127.0.0.1:PORT,
 * the i-th from source address ADDR[i % count] (any 127.x.y.z: loopback only), and sends each an
 * HTTP request one header byte every INTERVAL_MS without ever finishing it (a "slowloris"
 * client), until the server has closed every connection or MAX_S seconds have passed. Prints
 *   opened O refused R closed C open S max_ms M
 * refused: closed by the server within 5 s (over a connection limit: at once, or when a loaded
 * server gets to accept it), half its 10 s request deadline; closed: later, by that deadline; open: still open at MAX_S; max_ms: the longest lifetime of a
 * connection the server closed. Used by tests/e2e/test_serve_hostile.sh. */
#define _DEFAULT_SOURCE 1
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s PORT N INTERVAL_MS MAX_S ADDR...\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]), interval = atoi(argv[3]), max_s = atoi(argv[4]);
    int n_addr = argc - 5;
    if (port <= 0 || n <= 0 || n > 4000 || interval <= 0 || max_s <= 0) return 2;
    static const char req[] = "GET /manifest.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int *fd = calloc((size_t)n, sizeof *fd);
    long long *opened_at = calloc((size_t)n, sizeof *opened_at), *closed_at = calloc((size_t)n, sizeof *closed_at);
    size_t *sent = calloc((size_t)n, sizeof *sent);
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    if (!fd || !opened_at || !closed_at || !sent || !p) return 1;
    int opened = 0;
    for (int i = 0; i < n; i++) {
        fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in src = {0}, dst = {0};
        src.sin_family = dst.sin_family = AF_INET;
        dst.sin_port = htons((unsigned short)port);
        if (fd[i] < 0 || inet_pton(AF_INET, argv[5 + i % n_addr], &src.sin_addr) != 1 ||
            inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr) != 1 ||
            (ntohl(src.sin_addr.s_addr) >> 24) != 127 ||
            bind(fd[i], (struct sockaddr *)&src, sizeof src) != 0 ||
            connect(fd[i], (struct sockaddr *)&dst, sizeof dst) != 0) {
            if (fd[i] >= 0) close(fd[i]);
            fd[i] = -1;
            continue;
        }
        opened_at[i] = now_ms();
        opened++;
    }
    long long start = now_ms(), next_byte = start;
    int still = opened;
    while (still > 0 && now_ms() - start < (long long)max_s * 1000) {
        long long t = now_ms();
        if (t >= next_byte) { /* one more header byte on every open connection */
            for (int i = 0; i < n; i++) {
                if (fd[i] < 0 || closed_at[i]) continue;
                char c = req[sent[i] % (sizeof req - 1)];
                if (send(fd[i], &c, 1, MSG_NOSIGNAL) == 1) sent[i]++;
            }
            next_byte = t + interval;
        }
        for (int i = 0; i < n; i++) {
            p[i].fd = fd[i] >= 0 && !closed_at[i] ? fd[i] : -1;
            p[i].events = POLLIN;
            p[i].revents = 0;
        }
        long long wait = next_byte - now_ms();
        if (poll(p, (nfds_t)n, (int)(wait < 0 ? 0 : wait > 200 ? 200 : wait)) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[512];
            ssize_t r = recv(fd[i], buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0) continue; /* an error response before the close */
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            closed_at[i] = now_ms();
            still--;
        }
    }
    int refused = 0, closed = 0;
    long long max_ms = 0;
    for (int i = 0; i < n; i++) {
        if (fd[i] < 0) continue;
        if (closed_at[i]) {
            long long life = closed_at[i] - opened_at[i];
            if (life < 5000) refused++;
            else closed++;
            if (life > max_ms) max_ms = life;
        }
        close(fd[i]);
    }
    printf("opened %d refused %d closed %d open %d max_ms %lld\n", opened, refused, closed, still,
           max_ms);
    free(fd);
    free(opened_at);
    free(closed_at);
    free(sent);
    free(p);
    return 0;
}
