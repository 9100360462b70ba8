/* SPDX-License-Identifier: MIT */
/*
 * Routing: where a command goes. Clients of the Redis layer (the sync
 * round, the node registry, and next the exact path and the quota ledger)
 * send each command for a hash tag, the part of its keys in braces, and the
 * route delivers it to the server that owns that tag. A single server, a
 * Redis Cluster (tag -> slot -> node) and a Sentinel-managed primary are
 * implementations of this one interface, one file each, as curl's lib/vtls
 * has one file per TLS backend:
 *   route_single.c  one server from redis_url (today's only backend).
 * Deadlines stay with the caller (a sync round has one deadline for all its
 * commands); a reply never comes after rl__redis_route_close.
 */
#ifndef RL_REDIS_ROUTE_H
#define RL_REDIS_ROUTE_H

#include <stddef.h>
#include <hiredis/async.h>
#include "redis/conn.h"

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
    /* Free every connection and close its handles. */
    void (*close)(rl_redis_route_t *r);
} rl_redis_route_vt_t;

struct rl_redis_route {
    const rl_redis_route_vt_t *vt;
    rl_redis_conn_t conn; /* route_single: the one connection */
};

/* The single-server backend over an initialised connection. */
void rl__redis_route_single(rl_redis_route_t *r);

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

/* The hash tag of a key name: the bytes between its first '{' and the next
 * '}' when that is not empty, as Redis Cluster reads it; else the whole
 * name. Pure. */
const char *rl__redis_hash_tag(const char *key, size_t len, size_t *tag_len);

#endif
