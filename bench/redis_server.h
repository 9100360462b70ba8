/* SPDX-License-Identifier: MIT */
/*
 * A throwaway redis-server for baseline (d) of rl_bench: a free loopback
 * port, no persistence, stopped by PID at exit and on fatal signals.
 *
 * tests/redis_harness.{c,h} does the same job for the Check suites; the
 * bench keeps its own because it must also stop the server when the run is
 * interrupted (Ctrl-C on a three-minute run), which a test fixture never is.
 */
#ifndef RL_BENCH_REDIS_SERVER_H
#define RL_BENCH_REDIS_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct bench_redis {
    pid_t pid; /* 0 when not running */
    int port;
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
