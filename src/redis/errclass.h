/* SPDX-License-Identifier: MIT */
/*
 * Classes of Redis failures, one table. Each row: the enum name, the word
 * that names it everywhere else (rl_stats_t.sync_err_<word>, the metrics
 * label class="<word>"), and what falls in it. stats.c and metrics.c expand
 * this table, and stats.c checks the public rl_stats_t fields against it
 * (same order, consecutive), so a class is added here and nowhere else.
 */
#ifndef RL_REDIS_ERRCLASS_H
#define RL_REDIS_ERRCLASS_H

#define RL_REDIS_ERR_MAP(X)                                                          \
    X(CONNECT, connect, "refused, unreachable, or the connect deadline")             \
    X(TIMEOUT, timeout, "replies missed their deadline")                             \
    X(NOSCRIPT, noscript, "script cache flushed: reloaded")                          \
    X(READONLY, readonly, "a replica now (failover): reconnect")                     \
    X(LOADING, loading, "the server is loading its dataset (or MASTERDOWN)")         \
    X(BUSY, busy, "a script or DEBUG SLEEP holds the server")                        \
    X(OOM, oom, "maxmemory reached")                                                 \
    X(AUTH, auth, "NOAUTH, WRONGPASS, NOPERM")                                       \
    X(OTHER, other, "any other error reply, or a malformed one")

typedef enum rl_redis_err {
#define RL_X_(up, word, doc) RL_REDIS_ERR_##up,
    RL_REDIS_ERR_MAP(RL_X_)
#undef RL_X_
    RL_REDIS_ERR_N
} rl_redis_err_t;

#endif
