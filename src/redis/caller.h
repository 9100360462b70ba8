/* SPDX-License-Identifier: MIT */
/*
 * The per-request client: run one script for one hash tag, with a
 * deadline, either blocking the calling thread or with a callback. Used by
 * the exact path (src/exact/exact.c) and meant for the quota ledger; any client
 * that needs an answer per request, not per round, goes through here.
 *
 * Shape: one library thread (the "caller thread") with its own libuv loop
 * and `pool` routes (redis/route.h), each a pipelined connection (or, for
 * Cluster/Sentinel backends, that backend's set of them). Requests take a
 * slot from a fixed array (no allocation per request; a full array answers
 * RL_CALL_FULL at once), are queued to the thread (one mutex, one
 * uv_async_send), and are sent with EVALSHA to the owner of their tag on
 * route hash(tag) mod pool, so one tag keeps one connection and one order.
 * A NOSCRIPT reply is answered by sending the same request as EVAL, so a
 * flushed cache or a new Cluster node costs one round trip, never a failure.
 *
 * Deadlines and abandonment. Each request is answered exactly once: by its
 * reply, by its deadline (RL_CALL_TIMEOUT), by its connection's loss, or by
 * rl__redis_caller_stop. The answer is claimed by one compare-and-swap on
 * the slot's state, so a reply that comes after the deadline answered is
 * dropped (counted as late), and a slot is reused only once hiredis has
 * returned its callback (the reply, or NULL when the connection went):
 * hiredis matches replies to callbacks in order per connection, so a late
 * reply can only ever reach the slot that sent it, never another caller.
 * A route that has requests in flight and has answered nothing for
 * RL_CALLER_STALL_MS is dropped and reconnected (a frozen server), which
 * answers every request on it.
 *
 * A timeout does not mean "not executed": Redis may run the script after
 * the caller gave up. Callbacks and `parse` hooks run on the caller thread,
 * must not block, and must not call rl__redis_caller_* of the same caller.
 */
#ifndef RL_REDIS_CALLER_H
#define RL_REDIS_CALLER_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "ratelimit.h"
#include "redis/url.h"

/* How a request was answered. */
enum {
    RL_CALL_REPLY = 0,   /* Redis replied (possibly an error reply) */
    RL_CALL_TIMEOUT = 1, /* the deadline passed first: it may still run */
    RL_CALL_UNSENT = 2,  /* not sent: no connection to the tag's owner */
    RL_CALL_LOST = 3,    /* sent, then the connection went: it may have run */
    RL_CALL_FULL = 4,    /* every slot busy: not queued */
    RL_CALL_CLOSED = 5   /* the caller is stopping: not sent, or not answered */
};

#define RL_CALLER_STALL_MS 1000 /* silence with requests in flight: reconnect */
#define RL_CALL_ARGS_MAX 16     /* keys + arguments of one request */
#define RL_CALL_BYTES_MAX 1024  /* their bytes (a quota charge names 4 keys) */
#define RL_CALL_CTX_MAX 256     /* the client's context bytes (see send) */
#define RL_CALLER_SCRIPTS_MAX 4

typedef struct rl_redis_caller rl_redis_caller_t;

/* The answer: status RL_CALL_*, reply non-NULL only with RL_CALL_REPLY and
 * valid only during the call. */
typedef void rl_redis_call_fn(void *ud, int status, const redisReply *reply);

/* Events worth a log line: level RL_LOG_*, msg one line. Caller thread.
 * The line names neither the client nor the server: the owner's hook
 * prefixes what a user knows its connections by, and where they go. */
typedef void rl_redis_caller_log_fn(void *owner, int level, const char *msg);

typedef struct rl_redis_caller_cfg {
    const rl_allocator_t *alloc;  /* must outlive the caller */
    const rl_redisurl_t *url;     /* copied */
    uint32_t pool;                /* routes (connections), >= 1 */
    uint32_t slots;               /* requests in flight or queued, >= 1 */
    uint32_t backoff_cap_ms;      /* reconnect backoff cap (base/backoff.h) */
    const char *const *scripts;   /* sources; must outlive the caller */
    unsigned nscripts;            /* <= RL_CALLER_SCRIPTS_MAX */
    rl_redis_caller_log_fn *log;  /* NULL: no log lines */
    void *owner;
} rl_redis_caller_cfg_t;

/* One request: script number `script` of the caller's scripts, with nkeys
 * keys then nargs arguments (argv/argl: nkeys + nargs entries, copied; at
 * most RL_CALL_ARGS_MAX of them and RL_CALL_BYTES_MAX bytes). The hash tag
 * is the first key's (rl__redis_hash_tag). deadline_ns: uv_hrtime() clock. */
typedef struct rl_redis_call {
    unsigned script;
    int nkeys, nargs;
    const char *const *argv;
    const size_t *argl;
    uint64_t deadline_ns;
} rl_redis_call_t;

typedef struct rl_redis_caller_counters {
    uint64_t sent, replies, timeouts, late, unsent, lost, full, stalls;
    uint64_t in_use; /* slots not free now (queued, in flight, or a late reply awaited) */
} rl_redis_caller_counters_t;

/* Start the thread (every signal blocked on it) and begin connecting.
 * 0, RL_EINVAL (a bad cfg) or RL_ENOMEM. */
int rl__redis_caller_start(rl_redis_caller_t **out, const rl_redis_caller_cfg_t *cfg);

/*
 * Non-blocking: queue the request; `cb` runs once on the caller thread with
 * the answer, by the deadline (give or take the loop's latency). ctx
 * (ctx_len <= RL_CALL_CTX_MAX bytes) is copied into the request's slot and
 * cb gets a pointer to that copy as its ud, aligned for any type: what the
 * client needs to finish the request lives there, with no allocation.
 * 0 when queued; else RL_CALL_FULL, RL_CALL_CLOSED or -1 (a request over
 * the limits above), and cb never runs.
 */
int rl__redis_caller_send(rl_redis_caller_t *c, const rl_redis_call_t *call,
                          rl_redis_call_fn *cb, const void *ctx, size_t ctx_len);

/*
 * Blocking: queue the request and wait for its answer, at most until its
 * deadline (enforced by this thread's own timed wait, whatever the caller
 * thread is doing). `parse` runs on the caller thread with the reply while
 * this thread still waits, so it may write into ud; it runs only when the
 * answer is RL_CALL_REPLY and the waiter has not given up. Returns the
 * RL_CALL_* answer (or -1 as for send). At the deadline the waiter gives up
 * atomically: the reply, if any comes, is dropped.
 */
int rl__redis_caller_wait(rl_redis_caller_t *c, const rl_redis_call_t *call,
                          rl_redis_call_fn *parse, void *ud);

void rl__redis_caller_counters(rl_redis_caller_t *c, rl_redis_caller_counters_t *out);

/* In a child process after fork(): free the memory only (the thread, its
 * loop and its sockets are the parent's). */
void rl__redis_caller_forget(rl_redis_caller_t *c);

/* Answer every queued and in-flight request with RL_CALL_CLOSED (async
 * callbacks run, once each, before this returns; none after), close the
 * connections, join the thread, free. No send or wait may race it. */
void rl__redis_caller_stop(rl_redis_caller_t *c);

#endif
