/* SPDX-License-Identifier: MIT */
/*
 * A TCP proxy between one node and Redis that can cut the node off: while
 * cut it closes the node's connections and every new one as soon as it is
 * accepted, so the node's rounds fail at once (a partition the node sees,
 * as a refused or reset connection), not after a round deadline. The
 * partition scenario puts one node behind it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "acc.h"

#define CUT_PAIRS 16

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

/* One poll loop: pair each client with a connection to Redis and copy
 * bytes both ways; while cut, no pair lives. */
static void *run(void *arg)
{
    acc_cut_t *c = arg;
    int fds[2 * CUT_PAIRS]; /* client, upstream, client, upstream, ... */
    int n = 0;
    char buf[16384];
    /* relaxed (both flags, everywhere here): each is a self-contained
     * command; nothing else is published through them. */
    while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
        int cut = atomic_load_explicit(&c->cut, memory_order_relaxed);
        if (cut)
            close_all(fds, &n);
        struct pollfd p[1 + 2 * CUT_PAIRS];
        p[0] = (struct pollfd){.fd = c->listen_fd, .events = POLLIN};
        for (int i = 0; i < n; i++)
            p[1 + i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        int polled = n; /* only these have revents: accept appends after them */
        if (poll(p, (nfds_t)(1 + n), 5) <= 0)
            continue;
        if (p[0].revents & POLLIN) {
            int cl = accept(c->listen_fd, NULL, NULL);
            int up = cl >= 0 && !cut && n + 2 <= 2 * CUT_PAIRS ? connect_to(c->target) : -1;
            if (up >= 0) {
                fds[n++] = cl;
                fds[n++] = up;
            } else if (cl >= 0) {
                close(cl);
            }
        }
        /* A pair accepted above was not polled: its revents slot is stale,
         * and a read on its silent socket would block this thread for good
         * (the proxy then stops forwarding, and acc_cut_stop never joins). */
        for (int i = 0; i < polled; i++) {
            if (!(p[1 + i].revents & (POLLIN | POLLHUP | POLLERR)))
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
    close_all(fds, &n);
    return NULL;
}

int acc_cut_start(acc_cut_t *c, int target_port)
{
    memset(c, 0, sizeof *c);
    c->target = target_port;
    atomic_init(&c->cut, 0);
    atomic_init(&c->stop, 0);
    c->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (c->listen_fd < 0 || bind(c->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(c->listen_fd, 16) != 0 ||
        getsockname(c->listen_fd, (struct sockaddr *)&a, &len) != 0) {
        if (c->listen_fd >= 0)
            close(c->listen_fd);
        return -1;
    }
    c->port = ntohs(a.sin_port);
    if (pthread_create(&c->thread, NULL, run, c) != 0) {
        close(c->listen_fd);
        return -1;
    }
    c->running = 1;
    return 0;
}

void acc_cut_set(acc_cut_t *c, int cut)
{
    /* relaxed: see run. */
    atomic_store_explicit(&c->cut, cut, memory_order_relaxed);
}

void acc_cut_stop(acc_cut_t *c)
{
    if (!c->running)
        return;
    /* relaxed: see run; the join orders the rest. */
    atomic_store_explicit(&c->stop, 1, memory_order_relaxed);
    pthread_join(c->thread, NULL);
    close(c->listen_fd);
    c->running = 0;
}
