/* SPDX-License-Identifier: MIT */
/*
 * A per-request Redis client: one thread with its own libuv loop (every
 * signal blocked), one route (redis/route.h) and one script registry
 * (redis/scripts.h). Any thread runs "script S for hash tag T" and waits
 * for the reply at most a deadline (rl__redis_client_call); the loop thread
 * itself sends with a callback (rl__redis_client_send). The client decides
 * nothing: what a reply, a timeout or a lost connection means is its
 * owner's (the quota ledger today), told through the reply function and
 * rl_redis_client_ops_t.
 *
 * Deadlines: a call that misses its deadline returns RL_REDIS_CALL_TIMEOUT
 * and its connection is dropped and made again (never reused: a server that
 * stopped answering would make every later call wait its whole deadline
 * too); its reply, should it still come, is discarded. A timeout does not
 * mean the script did not run.
 */
#ifndef RL_REDIS_CLIENT_H
#define RL_REDIS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "ratelimit.h"
#include "redis/url.h"

typedef struct rl_redis_client rl_redis_client_t;

/* What a call came to. */
enum {
    RL_REDIS_CALL_OK = 0,       /* the reply went to the reply function */
    RL_REDIS_CALL_DOWN = -1,    /* not connected, or the connection went first */
    RL_REDIS_CALL_TIMEOUT = -2, /* no reply within the deadline */
    RL_REDIS_CALL_NOMEM = -3    /* the call could not be allocated */
};

/* A reply (never NULL; an error reply included), on the loop thread. For a
 * blocking call it runs while the caller still waits, so priv may point
 * into the caller's stack. */
typedef void rl_redis_reply_fn(void *priv, const redisReply *reply);

/* rl__redis_client_send's completion, on the loop thread: rc is a
 * RL_REDIS_CALL_* code, reply NULL unless rc is RL_REDIS_CALL_OK. */
typedef void rl_redis_done_fn(void *priv, int rc, const redisReply *reply);

typedef struct rl_redis_client_ops {
    /* Connected (a command can be sent). Loop thread. */
    void (*up)(void *owner);
    /* A connect failed or the connection went. Loop thread. */
    void (*down)(void *owner);
    /* rl__redis_client_wake was called (coalesced). Loop thread. */
    void (*woken)(void *owner);
} rl_redis_client_ops_t;

/*
 * Start the thread and start connecting. sources[0, n) (n <=
 * RL_REDIS_SCRIPTS_MAX), alloc, url and ops must outlive the client; calls
 * and the client's memory go through alloc (from the calling threads and
 * the loop thread). 0 or RL_ENOMEM.
 */
int rl__redis_client_start(rl_redis_client_t **out, const rl_allocator_t *alloc,
                           const rl_redisurl_t *url, uint32_t backoff_cap_ms,
                           const char *const *sources, unsigned n,
                           const rl_redis_client_ops_t *ops, void *owner);

/* Close the connection (pending sends complete RL_REDIS_CALL_DOWN), stop
 * the thread, free the client. No call may race it. NULL is a no-op. */
void rl__redis_client_stop(rl_redis_client_t *c);

/* The child's copy after fork(): free the memory only (the thread and the
 * sockets are the parent's). */
void rl__redis_client_forget(rl_redis_client_t *c);

/*
 * Run script `script` (EVALSHA, or EVAL with its source while it is not
 * loaded, or after NOSCRIPT) for the hash tag tag[0, tag_len), with
 * args[0, nargs) of which the first nkeys are key names, and wait at most
 * deadline_ms. Any thread but the loop's. RL_REDIS_CALL_OK after fn ran with
 * the reply; RL_REDIS_CALL_DOWN at once when not connected; TIMEOUT; NOMEM.
 */
int rl__redis_client_call(rl_redis_client_t *c, unsigned script, const char *tag,
                          size_t tag_len, int nkeys, int nargs, const char *const *args,
                          const size_t *argl, uint32_t deadline_ms, rl_redis_reply_fn *fn,
                          void *priv);

/* The same from the loop thread, without waiting: done runs once, with
 * the reply, or before this returns when the call cannot be sent (DOWN,
 * NOMEM). done must not send again on DOWN: wait for ops->up. */
void rl__redis_client_send(rl_redis_client_t *c, unsigned script, const char *tag,
                           size_t tag_len, int nkeys, int nargs, const char *const *args,
                           const size_t *argl, rl_redis_done_fn *done, void *priv);

/* Whether the client is connected now (any thread; a hint). */
int rl__redis_client_up(rl_redis_client_t *c);

/* Run ops->woken on the loop thread soon (any thread; coalesced). */
void rl__redis_client_wake(rl_redis_client_t *c);

/* Drop the connection and connect again, as after a missed deadline (loop
 * thread). */
void rl__redis_client_reset(rl_redis_client_t *c);

/* Start a one-shot timer on the loop (loop thread): ops->woken runs after
 * delay_ms, unless it is started again first. */
void rl__redis_client_wake_after(rl_redis_client_t *c, uint64_t delay_ms);

#endif
