/* SPDX-License-Identifier: MIT */
/*
 * One Redis connection on a libuv loop (the loop's thread only): connect
 * with a deadline, pipeline the setup (AUTH, SELECT, CLIENT SETNAME) before
 * anything the owner sends, and reconnect after a loss with the backoff of base/backoff.h.
 * A rediss URL's connections are TLS (redis/tls.h): a failed handshake is
 * a failed connect whose detail says why (expired, wrong host, unknown CA,
 * timed out), naming the server.
 * It decides nothing: what a failure means (an error counted, a health
 * state, a log line) is the owner's, told through rl_redis_conn_ops_t.
 */
#ifndef RL_REDIS_CONN_H
#define RL_REDIS_CONN_H

#include <stdint.h>
#include <hiredis/async.h>
#include <uv.h>
#include "ratelimit.h"
#include "redis/url.h"

/* How long a connect, and a new connection's setup, may take. */
#define RL_REDIS_CONNECT_DEADLINE_MS 1000
/* The same over TLS: the handshake adds a round trip or two and the
 * public-key work of both ends. */
#define RL_REDIS_TLS_CONNECT_DEADLINE_MS 3000
/* A connection's CLIENT SETNAME name, its terminator included: a prefix and
 * an incarnation (a 64-byte node_id, ':', 16 hex digits) fit; a longer one
 * is cut. */
#define RL_REDIS_CONN_NAME_MAX 128

typedef struct rl_redis_conn_ops {
    /* Connected, and the setup commands (AUTH, SELECT, CLIENT SETNAME)
     * answered: the owner's own commands never run before the URL's db is
     * selected. A SELECT the server refuses fails the connect instead
     * (setup_error, then failed, then a reconnect). */
    void (*connected)(void *owner);
    /* A connect failed (refused, unreachable, its deadline): why names it,
     * detail is hiredis's text or NULL when not worth a log line. A
     * reconnect is scheduled after the call. */
    void (*failed)(void *owner, const char *why, const char *detail);
    /* An established connection went away (not on rl__redis_conn_close). */
    void (*lost)(void *owner);
    /* A setup command's error reply. */
    void (*setup_error)(void *owner, const redisReply *reply);
    /* A reconnect attempt is scheduled delay_ms from now. */
    void (*retry_scheduled)(void *owner, uint64_t delay_ms);
    /* Nonzero once the owner is shutting down: no reconnect then. */
    int (*stopping)(void *owner);
    /* Optional (NULL: unnamed): the name every connection of the owner
     * gives itself (CLIENT SETNAME, after AUTH and SELECT), so CLIENT LIST
     * tells whose it is; NULL or "" returned: unnamed. Made fit for Redis
     * by rl__redis_client_name. A route backend that wraps the owner's ops
     * in its own (route_cluster.c's node_ops, route_sentinel.c's
     * master_ops) forwards this, so a cluster's masters and a Sentinel
     * set's master see the same name. */
    const char *(*client_name)(void *owner);
} rl_redis_conn_ops_t;

typedef struct rl_redis_conn {
    redisAsyncContext *ac; /* NULL while not connected */
    void *tls;             /* a rediss URL's: ac's SSL object (ac owns it);
                              NULL with ac, and for a plain connection */
    int connecting;        /* connect sent, or its setup not yet answered */
    unsigned setup_pending; /* setup commands not yet answered */
    uint32_t attempt;      /* reconnect attempts since the last success */
    uint32_t backoff_cap_ms;
    uint64_t *rng;         /* the owner's jitter state */
    uv_loop_t *loop;
    const rl_allocator_t *alloc;
    const rl_redisurl_t *url; /* credentials, db, a unix socket's path */
    const char *host;         /* where a TCP connect goes: url's host, or
                                 the node a route chose (rl__redis_conn_addr) */
    int port;
    uv_timer_t connect_timer;
    uv_timer_t retry_timer;
    const rl_redis_conn_ops_t *ops;
    void *owner;
} rl_redis_conn_t;

/* Set up (no connect yet); every pointer must outlive the connection. */
void rl__redis_conn_init(rl_redis_conn_t *c, uv_loop_t *loop, const rl_allocator_t *alloc,
                         const rl_redisurl_t *url, uint64_t *rng, uint32_t backoff_cap_ms,
                         const rl_redis_conn_ops_t *ops, void *owner);

/*
 * name as CLIENT SETNAME takes it, into out[RL_REDIS_CONN_NAME_MAX]: Redis
 * refuses a name with a space, a newline or any byte outside '!'..'~', so
 * each such byte becomes '_', and a name longer than
 * RL_REDIS_CONN_NAME_MAX - 1 bytes is cut. NULL gives "". Pure.
 */
void rl__redis_client_name(char *out, const char *name);

/* Connect to host:port from now on (a cluster node, the master Sentinels
 * name); host must outlive the connection or the next call. */
static inline void rl__redis_conn_addr(rl_redis_conn_t *c, const char *host, int port)
{
    c->host = host;
    c->port = port;
}

/* Start connecting now. */
void rl__redis_conn_open(rl_redis_conn_t *c);

/* The owner's setup succeeded (its scripts are loaded): the backoff
 * starts again from its base on the next loss. */
static inline void rl__redis_conn_ready(rl_redis_conn_t *c) { c->attempt = 0; }

/* Drop the connection (pending callbacks get NULL replies; `lost` runs if
 * it was established) and schedule a reconnect. */
void rl__redis_conn_drop(rl_redis_conn_t *c);

/* Schedule a reconnect unless one is pending or the owner is stopping. */
void rl__redis_conn_schedule(rl_redis_conn_t *c);

/* Stop the timers, free the connection, close the handles (the loop then
 * ends once nothing else is active). */
void rl__redis_conn_close(rl_redis_conn_t *c);

/* The same, cb called once for each of its two handles when closed (the
 * connection's memory may go after the second). */
void rl__redis_conn_close_cb(rl_redis_conn_t *c, uv_close_cb cb);

/* Free the connection and stop reconnecting, handles kept: a route's
 * server it no longer uses (open may start it again). */
void rl__redis_conn_idle(rl_redis_conn_t *c);

#endif
