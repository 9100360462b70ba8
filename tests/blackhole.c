/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "blackhole.h"

#define MAX_PAIRS 64
/* How long a command (a mode, stop) may wait for the proxy to see it. */
#define POLL_MS 5

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void close_all(int *fds, int *n)
{
    for (int i = 0; i < *n; i++)
        close(fds[i]);
    *n = 0;
}

/* Copy what the polled sockets have to their peers; a side that closed
 * closes its pair, and the pairs moved: the rest waits for the next poll. */
static void forward(int *fds, int *n, const struct pollfd *p, int polled)
{
    char buf[16384];
    for (int i = 0; i < polled; i++) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t got = read(fds[i], buf, sizeof buf);
        int peer = fds[i ^ 1];
        if (got <= 0) {
            close(fds[i]);
            close(peer);
            int lo = i & ~1;
            memmove(&fds[lo], &fds[lo + 2], (size_t)(*n - lo - 2) * sizeof fds[0]);
            *n -= 2;
            return;
        }
        for (ssize_t off = 0; off < got;) {
            ssize_t w = write(peer, buf + off, (size_t)(got - off));
            if (w <= 0)
                break;
            off += w;
        }
    }
}

/* One poll loop: accept clients, pair each with a connection to the
 * target, and copy bytes both ways while forwarding. Bounded: MAX_PAIRS
 * clients; one more is closed once accepted. */
static void *run(void *arg)
{
    rl_blackhole_t *b = arg;
    int fds[2 * MAX_PAIRS]; /* client, upstream, client, upstream, ... */
    int n = 0;
    /* relaxed (both flags, everywhere here): each is a self-contained
     * command; nothing else is published through them. */
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
        int mode = atomic_load_explicit(&b->mode, memory_order_relaxed);
        if (mode == RL_BLACKHOLE_CUT)
            close_all(fds, &n);
        struct pollfd p[1 + 2 * MAX_PAIRS];
        p[0] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        for (int i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = fds[i],
                                       .events = mode == RL_BLACKHOLE_FORWARD ? POLLIN : 0};
        int polled = n; /* only these have revents: accept appends after them */
        if (poll(p, (nfds_t)(1 + n), POLL_MS) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            int cl = accept(b->listen_fd, NULL, NULL);
            int up = cl >= 0 && mode != RL_BLACKHOLE_CUT && n + 2 <= 2 * MAX_PAIRS
                         ? connect_to(b->target)
                         : -1;
            if (up >= 0) {
                fds[n++] = cl;
                fds[n++] = up;
            } else if (cl >= 0) {
                close(cl);
            }
        }
        /* A pair accepted above was not polled: its revents slot is stale,
         * and a read on its silent socket would block the proxy for good
         * (it would then forward nothing, and rl_blackhole_stop never
         * joins). A silent proxy reads nothing. */
        if (mode == RL_BLACKHOLE_FORWARD)
            forward(fds, &n, p + 1, polled);
    }
    close_all(fds, &n);
    return NULL;
}

int rl_blackhole_start(rl_blackhole_t *b, int target_port)
{
    memset(b, 0, sizeof *b);
    b->target = target_port;
    atomic_init(&b->mode, RL_BLACKHOLE_FORWARD);
    atomic_init(&b->stop, 0);
    b->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (b->listen_fd < 0 || bind(b->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(b->listen_fd, 16) != 0 ||
        getsockname(b->listen_fd, (struct sockaddr *)&a, &len) != 0) {
        if (b->listen_fd >= 0)
            close(b->listen_fd);
        return -1;
    }
    b->port = ntohs(a.sin_port);
    if (pthread_create(&b->thread, NULL, run, b) != 0) {
        close(b->listen_fd);
        return -1;
    }
    b->running = 1;
    return 0;
}

void rl_blackhole_set(rl_blackhole_t *b, int mode)
{
    /* relaxed: see run */
    atomic_store_explicit(&b->mode, mode, memory_order_relaxed);
}

void rl_blackhole_stop(rl_blackhole_t *b)
{
    if (!b->running)
        return;
    /* relaxed: see run; the join orders the rest */
    atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
    pthread_join(b->thread, NULL);
    close(b->listen_fd);
    b->running = 0;
}
