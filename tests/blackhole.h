/* SPDX-License-Identifier: MIT */
/*
 * A TCP proxy for fault tests: forwards 127.0.0.1:<port> to a target port
 * until told to go silent, after which it keeps every socket open and
 * forwards nothing, in either direction (a silent network partition).
 */
#ifndef RL_BLACKHOLE_H
#define RL_BLACKHOLE_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct rl_blackhole {
    int listen_fd;
    int port;   /* where clients connect */
    int target; /* where it forwards to */
    _Atomic int silent;
    _Atomic int stop;
    pthread_t thread;
} rl_blackhole_t;

int rl_blackhole_start(rl_blackhole_t *b, int target_port);
void rl_blackhole_silence(rl_blackhole_t *b, int on);
void rl_blackhole_stop(rl_blackhole_t *b);

#endif
