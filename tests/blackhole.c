/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "blackhole.h"

#define MAX_PAIRS 64

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

/* One poll loop: accept clients, pair each with a connection to the target,
 * and copy bytes both ways unless silent. Bounded: MAX_PAIRS clients. */
static void *run(void *arg)
{
    rl_blackhole_t *b = arg;
    int fds[2 * MAX_PAIRS]; /* client, upstream, client, upstream, ... */
    int n = 0;
    char buf[16384];
    while (!atomic_load(&b->stop)) {
        struct pollfd p[1 + 2 * MAX_PAIRS];
        p[0] = (struct pollfd){.fd = b->listen_fd, .events = POLLIN};
        int silent = atomic_load(&b->silent);
        for (int i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = fds[i], .events = silent ? 0 : POLLIN};
        int polled = n; /* only these have revents: accept appends after them */
        if (poll(p, (nfds_t)(1 + n), 20) <= 0)
            continue;
        if ((p[0].revents & POLLIN) && n + 2 <= 2 * MAX_PAIRS) {
            int c = accept(b->listen_fd, NULL, NULL);
            int u = c >= 0 ? connect_to(b->target) : -1;
            if (c >= 0 && u >= 0) {
                fds[n++] = c;
                fds[n++] = u;
            } else {
                if (c >= 0)
                    close(c);
                if (u >= 0)
                    close(u);
            }
        }
        /* A pair accepted above was not polled: its revents slot is stale,
         * and a read on its silent socket would block the proxy for good. */
        for (int i = 0; i < polled && !silent; i++) {
            if (!(p[1 + i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t got = read(fds[i], buf, sizeof buf);
            int peer = fds[i ^ 1];
            if (got <= 0) { /* one side closed: close the pair */
                close(fds[i]);
                close(peer);
                int lo = i & ~1;
                memmove(&fds[lo], &fds[lo + 2], (size_t)(n - lo - 2) * sizeof fds[0]);
                n -= 2;
                break; /* indexes moved: poll again */
            }
            for (ssize_t off = 0; off < got;) {
                ssize_t w = write(peer, buf + off, (size_t)(got - off));
                if (w <= 0)
                    break;
                off += w;
            }
        }
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return NULL;
}

int rl_blackhole_start(rl_blackhole_t *b, int target_port)
{
    memset(b, 0, sizeof *b);
    b->target = target_port;
    b->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (b->listen_fd < 0 || bind(b->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(b->listen_fd, 16) != 0 ||
        getsockname(b->listen_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    b->port = ntohs(a.sin_port);
    atomic_init(&b->silent, 0);
    atomic_init(&b->stop, 0);
    return pthread_create(&b->thread, NULL, run, b) == 0 ? 0 : -1;
}

void rl_blackhole_silence(rl_blackhole_t *b, int on) { atomic_store(&b->silent, on); }

void rl_blackhole_stop(rl_blackhole_t *b)
{
    atomic_store(&b->stop, 1);
    pthread_join(b->thread, NULL);
    close(b->listen_fd);
}
