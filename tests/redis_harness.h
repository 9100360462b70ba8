/* SPDX-License-Identifier: MIT */
/*
 * A throwaway redis-server for integration suites: started on a free
 * loopback port (never --port 0), without persistence, and stopped by PID.
 *
 * A suite that needs one server takes it from redis_fixture.h (an unchecked
 * fixture: it runs in the runner process, so the teardown stops the server
 * even when a test fails or times out in its forked child); these are for
 * the servers a test starts itself, and for the topologies below. The
 * server also gets SIGKILL if the process that started it dies
 * (PR_SET_PDEATHSIG), so a killed runner leaves no server behind.
 *
 * Environment: RL_SKIP_REDIS=1 turns "redis-server is not installed" into a
 * skip (rl_test_redis_start returns 1) instead of an error. RL_TEST_SERVER=
 * valkey runs valkey-server (and valkey-cli for the cluster tooling) in
 * place of redis-server and redis-cli: the same suites on the other engine.
 */
#ifndef RL_REDIS_HARNESS_H
#define RL_REDIS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

/* What a server runs as (rl_test_redis_start_as). */
enum {
    RL_TEST_REDIS_PLAIN,    /* a standalone server */
    RL_TEST_REDIS_CLUSTER,  /* a Redis Cluster node (not yet in a cluster) */
    RL_TEST_REDIS_REPLICA,  /* a replica of 127.0.0.1:peer_port */
    RL_TEST_REDIS_SENTINEL, /* a Sentinel watching 127.0.0.1:peer_port as
                               RL_TEST_SENTINEL_MASTER */
    RL_TEST_REDIS_UNIX,     /* standalone, also on the unix socket
                               <dir>/redis.sock */
};

#define RL_TEST_SENTINEL_MASTER "rlmaster"
/* Sentinel timings: a primary is down after 1 s without an answer; a
 * failover may take this long before another is tried. */
#define RL_TEST_SENTINEL_DOWN_MS 1000
#define RL_TEST_SENTINEL_FAILOVER_MS 5000

typedef struct rl_test_redis {
    pid_t pid;      /* 0 when not running */
    int port;
    char log[64];   /* the server's log while it starts; removed once up */
    int mode;       /* RL_TEST_REDIS_* */
    int peer_port;  /* REPLICA, SENTINEL: the primary */
    char dir[64];   /* the server's files, its --dir (removed at stop) */
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
 * dir, NULL}; `extra` must outlive the server (restarts use it again:
 * rl_test_redis_crash_restart then keeps the data an append-only file in
 * that --dir holds). */
int rl_test_redis_start_args(rl_test_redis_t *srv, const char *const *extra, char *err,
                             size_t errlen);

/* The same, as a cluster node, a replica or a Sentinel. */
int rl_test_redis_start_as(rl_test_redis_t *srv, int mode, int peer_port, char *err,
                           size_t errlen);

/* A loopback port nobody listens on right now (another process may take it
 * first): for a second listener of a server, such as its TLS port. */
int rl_test_free_port(void);

/* Kill the server with SIGKILL and reap it (its files stay, for a restart
 * with rl_test_redis_restart). */
void rl_test_redis_kill(rl_test_redis_t *srv);

/* Start a killed server again on its port, with its files. 0 or -1. */
int rl_test_redis_restart(rl_test_redis_t *srv, char *err, size_t errlen);

/*
 * Run a program (argv[0] on PATH) to its end, at most timeout_ms (then it
 * is killed): its exit status, or -1; its stdout and stderr in out.
 */
int rl_test_run_prog(const char *const *argv, unsigned timeout_ms, char *out, size_t outlen);

/* A Redis Cluster of 3 masters with one replica each, on free loopback
 * ports, built with redis-cli --cluster create; 0 once every node says
 * cluster_state:ok and sees 3 masters, each with its replica. */
typedef struct rl_test_cluster {
    rl_test_redis_t node[6];
} rl_test_cluster_t;
int rl_test_cluster_start(rl_test_cluster_t *c, char *err, size_t errlen);
void rl_test_cluster_stop(rl_test_cluster_t *c);

/* A primary, its replica and 3 Sentinels watching it; 0 once every
 * Sentinel knows the replica and the 2 other Sentinels. */
typedef struct rl_test_sentinels {
    rl_test_redis_t primary, replica, sentinel[3];
} rl_test_sentinels_t;
int rl_test_sentinels_start(rl_test_sentinels_t *s, char *err, size_t errlen);
void rl_test_sentinels_stop(rl_test_sentinels_t *s);

/* Kill the server with SIGKILL and start a new, empty one on the same port
 * (scripts and data gone). 0, or -1 with a message in err. */
int rl_test_redis_crash_restart(rl_test_redis_t *srv, char *err, size_t errlen);

/* Stop the server by PID (TERM, then KILL) and reap it. Safe to repeat. */
void rl_test_redis_stop(rl_test_redis_t *srv);

/* 1 under RL_TEST_SERVER=valkey. */
int rl_test_valkey(void);
/* The server and the CLI the suites run: redis-server and redis-cli, or
 * valkey-server and valkey-cli. */
const char *rl_test_server_prog(void);
const char *rl_test_cli_prog(void);

/* True when the named program is an executable somewhere on PATH. */
int rl_test_on_path(const char *prog);

#endif
