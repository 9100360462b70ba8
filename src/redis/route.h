/* SPDX-License-Identifier: MIT */
/*
 * Routing: where a command goes. Clients of the Redis layer (the sync
 * round, the node registry, and next the exact path and the quota ledger)
 * send each command for a hash tag, the part of its keys in braces, and the
 * route delivers it to the server that owns that tag. A single server, a
 * Redis Cluster (tag -> slot -> node) and a Sentinel-managed primary are
 * implementations of this one interface, one file each, as curl's lib/vtls
 * has one file per TLS backend:
 *   route_single.c    one server from redis_url (TCP or a unix socket);
 *   route_cluster.c   Redis Cluster: slot map, one connection per master,
 *                     MOVED and ASK followed, remapped on a failover;
 *   route_sentinel.c  the master a set of Sentinels names, followed through
 *                     failovers (+switch-master, READONLY).
 * A route belongs to one libuv loop (its thread); a process may hold any
 * number of routes, one per loop and client. The connection events of every
 * server a route holds reach the owner's rl_redis_conn_ops_t (connected per
 * server, so the owner's script loads follow; lost when any goes).
 * Deadlines stay with the caller (a sync round has one deadline for all its
 * commands); a reply never comes after rl__redis_route_close.
 */
#ifndef RL_REDIS_ROUTE_H
#define RL_REDIS_ROUTE_H

#include <stddef.h>
#include <hiredis/async.h>
#include "redis/conn.h"
#include "redis/scripts.h"

typedef struct rl_redis_route rl_redis_route_t;

typedef struct rl_redis_route_vt {
    const char *name;
    /* Start connecting (the backend's servers, its discovery). */
    void (*connect)(rl_redis_route_t *r);
    /* Whether a command for tag can be sent now (its owner connected). */
    int (*can_send)(rl_redis_route_t *r, const char *tag, size_t tag_len);
    /* Queue argv on the owner of tag (NULL: any server, e.g. PING); cb gets
     * the reply, or NULL when the connection goes first. REDIS_OK or
     * REDIS_ERR (not connected, hiredis refused). */
    int (*send)(rl_redis_route_t *r, const char *tag, size_t tag_len, redisCallbackFn *cb,
                void *priv, int argc, const char **argv, const size_t *argl);
    /* Drop every connection and reconnect (a failover seen: READONLY). */
    void (*reset)(rl_redis_route_t *r);
    /* Free every connection and close its handles (and the backend's
     * memory: the route may be initialised again). */
    void (*close)(rl_redis_route_t *r);
    /* Added with the Cluster and Sentinel backends (appended: the ops above
     * keep their meaning). */
    /* The connection commands for tag go on (NULL: any connected server),
     * for what a client queues with hiredis itself (SCRIPT LOAD); NULL when
     * none is connected. Valid until the loop runs again. */
    redisAsyncContext *(*context)(rl_redis_route_t *r, const char *tag, size_t tag_len);
    /* Nonzero while a connect or a discovery is under way. */
    int (*connecting)(rl_redis_route_t *r);
    /* The owner's setup succeeded: reconnect backoffs start from the base. */
    void (*ready)(rl_redis_route_t *r);
    /* Schedule a reconnect of whatever is down (no-op while one is pending
     * or nothing is down). */
    void (*retry)(rl_redis_route_t *r);
    /* Failed connect attempts in a row (the owner logs the first only). */
    uint32_t (*attempts)(rl_redis_route_t *r);
} rl_redis_route_vt_t;

struct rl_redis_route {
    const rl_redis_route_vt_t *vt;
    rl_redis_conn_t conn; /* single: the one connection; sentinel: the master's */
    void *impl;           /* cluster, sentinel: the backend's state */
};

/* What a route needs; every pointer must outlive it. */
typedef struct rl_redis_route_cfg {
    uv_loop_t *loop;
    const rl_allocator_t *alloc;
    const rl_redisurl_t *url;
    uint64_t *rng;                     /* the owner's jitter state */
    uint32_t backoff_cap_ms;
    const rl_redis_conn_ops_t *ops;    /* the owner's connection events */
    void *owner;
    /* The owner's scripts, or NULL: a backend that adds a server (a cluster
     * master, a promoted replica) loads them there before any command, so
     * an EVALSHA on it never meets NOSCRIPT for want of a load; a NOSCRIPT
     * it still meets (SCRIPT FLUSH) makes it load them and retry once. */
    const rl_redis_scripts_t *scripts;
    /* Every connection's CLIENT SETNAME (rl__redis_conn_set_name), or NULL. */
    const char *client_name;
} rl_redis_route_cfg_t;

/* Set up the backend url->kind names (no connect yet). 0, or RL_ENOMEM. */
int rl__redis_route_init(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg);

/* The single-server backend over an initialised connection. */
void rl__redis_route_single(rl_redis_route_t *r);
/* route_cluster.c, route_sentinel.c: 0, or RL_ENOMEM. */
int rl__redis_route_cluster(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg);
int rl__redis_route_sentinel(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg);

static inline void rl__redis_route_connect(rl_redis_route_t *r) { r->vt->connect(r); }
static inline int rl__redis_route_can_send(rl_redis_route_t *r, const char *tag, size_t n)
{
    return r->vt->can_send(r, tag, n);
}
static inline int rl__redis_route_send(rl_redis_route_t *r, const char *tag, size_t tag_len,
                                       redisCallbackFn *cb, void *priv, int argc,
                                       const char **argv, const size_t *argl)
{
    return r->vt->send(r, tag, tag_len, cb, priv, argc, argv, argl);
}
static inline void rl__redis_route_reset(rl_redis_route_t *r) { r->vt->reset(r); }
static inline void rl__redis_route_close(rl_redis_route_t *r) { r->vt->close(r); }
static inline redisAsyncContext *rl__redis_route_context(rl_redis_route_t *r, const char *tag,
                                                         size_t tag_len)
{
    return r->vt->context(r, tag, tag_len);
}
static inline int rl__redis_route_connecting(rl_redis_route_t *r)
{
    return r->vt->connecting(r);
}
static inline void rl__redis_route_ready(rl_redis_route_t *r) { r->vt->ready(r); }
static inline void rl__redis_route_retry(rl_redis_route_t *r) { r->vt->retry(r); }
static inline uint32_t rl__redis_route_attempts(rl_redis_route_t *r)
{
    return r->vt->attempts(r);
}

/* The hash tag of a key name: the bytes between its first '{' and the next
 * '}' when that is not empty, as Redis Cluster reads it; else the whole
 * name. Pure. */
const char *rl__redis_hash_tag(const char *key, size_t len, size_t *tag_len);

/* The Redis Cluster slot of a hash tag: CRC16/XMODEM mod 16384. Pure. */
unsigned rl__redis_slot(const char *tag, size_t tag_len);

#endif
