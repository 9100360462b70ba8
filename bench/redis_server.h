/* SPDX-License-Identifier: MIT */
/*
 * A throwaway redis-server for rl_bench and rl_bench_health: started by the
 * launcher the tests use (tests/redis_harness.h: a free loopback port, no
 * persistence, stopped by PID), and stopped at exit and on fatal signals
 * too, since a bench run can be interrupted (Ctrl-C), which a test fixture
 * never is.
 */
#ifndef RL_BENCH_REDIS_SERVER_H
#define RL_BENCH_REDIS_SERVER_H

#include <stddef.h>
#include <sys/types.h>
#include "redis_harness.h"

typedef struct bench_redis {
    pid_t pid; /* 0 when not running */
    int port;
    rl_test_redis_t srv;
} bench_redis_t;

/*
 * Start a server and wait until it answers PING. Must be called from the
 * thread that will later call bench_redis_stop (the server is tied to it by
 * PR_SET_PDEATHSIG). Returns 0 (running), 1 (redis-server not installed:
 * skip) or -1 (failed); `why` gets a message for 1 and -1.
 */
int bench_redis_start(bench_redis_t *r, char *why, size_t len);

/* Stop the server by PID (TERM, then KILL) and reap it. Safe to repeat. */
void bench_redis_stop(bench_redis_t *r);

#endif
