/* SPDX-License-Identifier: MIT */
/*
 * A TCP proxy for fault tests: forwards 127.0.0.1:<port> to a target port,
 * and on command makes a network partition of one of two kinds:
 * - silent: every socket stays open and nothing is forwarded, in either
 *   direction (the peers notice only by their deadlines);
 * - cut: every connection is closed, and each new one as soon as it is
 *   accepted (the peer sees a reset or refused connection at once).
 */
#ifndef RL_BLACKHOLE_H
#define RL_BLACKHOLE_H

#include <pthread.h>
#include <stdatomic.h>

/* What the proxy does (rl_blackhole_set). */
enum {
    RL_BLACKHOLE_FORWARD, /* copy bytes both ways */
    RL_BLACKHOLE_SILENT,
    RL_BLACKHOLE_CUT,
};

typedef struct rl_blackhole {
    int listen_fd;
    int port;    /* where clients connect */
    int target;  /* where it forwards to */
    int running; /* started and not yet stopped */
    _Atomic int mode; /* RL_BLACKHOLE_* */
    _Atomic int stop;
    pthread_t thread;
} rl_blackhole_t;

/* Listen on a free loopback port (b->port), forwarding. 0 or -1. */
int rl_blackhole_start(rl_blackhole_t *b, int target_port);
void rl_blackhole_set(rl_blackhole_t *b, int mode);
/* Stop the proxy and close its sockets; nothing on a zeroed proxy (one
 * never started) or one stopped already. */
void rl_blackhole_stop(rl_blackhole_t *b);

#endif
