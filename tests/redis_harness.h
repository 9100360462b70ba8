/* SPDX-License-Identifier: MIT */
/*
 * A throwaway redis-server for integration suites: started on a free
 * loopback port (never --port 0), without persistence, and stopped by PID.
 *
 * Use it from an unchecked fixture (tcase_add_unchecked_fixture): that runs
 * in the runner process, so the teardown stops the server even when a test
 * fails or times out in its forked child. The server also gets SIGKILL if
 * the process that started it dies (PR_SET_PDEATHSIG), so a killed runner
 * leaves no server behind.
 *
 * Environment: RL_SKIP_REDIS=1 turns "redis-server is not installed" into a
 * skip (rl_test_redis_start returns 1) instead of an error.
 */
#ifndef RL_REDIS_HARNESS_H
#define RL_REDIS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct rl_test_redis {
    pid_t pid;      /* 0 when not running */
    int port;
    char log[64];   /* the server's log while it starts; removed once up */
    const char *const *extra; /* more redis-server arguments, NULL-terminated
                                 (rl_test_redis_start_args); NULL: none */
} rl_test_redis_t;

/*
 * Start a server and wait until it answers PING. Returns 0 (running), 1
 * (skipped: not installed and RL_SKIP_REDIS=1) or -1 with a message in err.
 */
int rl_test_redis_start(rl_test_redis_t *srv, char *err, size_t errlen);

/* rl_test_redis_start with more arguments for redis-server after the
 * defaults (which they override), e.g. {"--appendonly", "yes", "--dir",
 * dir, NULL}; `extra` must outlive the server (restarts use it again). */
int rl_test_redis_start_args(rl_test_redis_t *srv, const char *const *extra, char *err,
                             size_t errlen);

/* Kill the server with SIGKILL and start a new one on the same port, with
 * the same arguments: scripts gone, and the data too unless the extra
 * arguments persist it (an append-only file in a --dir). 0, or -1 with a
 * message in err. */
int rl_test_redis_crash_restart(rl_test_redis_t *srv, char *err, size_t errlen);

/* Stop the server by PID (TERM, then KILL) and reap it. Safe to repeat. */
void rl_test_redis_stop(rl_test_redis_t *srv);

/* True when the named program is an executable somewhere on PATH. */
int rl_test_on_path(const char *prog);

#endif
