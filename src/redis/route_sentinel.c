/* SPDX-License-Identifier: MIT */
/*
 * The Sentinel route: one connection to one Sentinel asks for the master
 * (SENTINEL get-master-addr-by-name) and then listens for +switch-master;
 * the master's connection (route->conn) is verified with ROLE and moves to
 * the new address on a failover. A Sentinel that fails gives way to the
 * next of the URL's list; a READONLY reply (the master demoted under us) or
 * a ROLE that is not "master" asks the Sentinels again. Every hash tag lives
 * on the master, as with route_single.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/alloc.h"
#include "redis/route.h"

typedef struct sn_route {
    rl_redis_route_t *r;
    rl_redis_route_cfg_t cfg;
    rl_redisurl_t sentinel_url; /* the URL without credentials or db */
    rl_redis_conn_t sconn;      /* to the current Sentinel */
    unsigned sidx;              /* which of the URL's hosts it is */
    char host[256];             /* the master as the Sentinels name it */
    int port;
    int have_master;
    int asking;                 /* get-master-addr-by-name outstanding */
    int closing;
    int handles_open;
    uint32_t last_attempt;
} sn_route_t;

static sn_route_t *SN(rl_redis_route_t *r) { return r->impl; }

/* Connect the master's connection to host:port unless it is there already. */
static void follow(sn_route_t *sn, const char *host, size_t hlen, int port)
{
    rl_redis_conn_t *m = &sn->r->conn;
    if (hlen == 0 || hlen >= sizeof sn->host || port <= 0 || port > 65535)
        return;
    int same = sn->have_master && sn->port == port && strlen(sn->host) == hlen &&
               memcmp(sn->host, host, hlen) == 0;
    if (same && (m->ac != NULL || uv_is_active((uv_handle_t *)&m->retry_timer)))
        return;
    memcpy(sn->host, host, hlen);
    sn->host[hlen] = '\0';
    sn->port = port;
    sn->have_master = 1;
    rl__redis_conn_idle(m); /* the old master: its pending commands answered NULL */
    m->attempt = 0;
    rl__redis_conn_addr(m, sn->host, port);
    rl__redis_conn_open(m);
}

/* Ask the Sentinels again: a new connection asks first thing. */
static void rediscover(sn_route_t *sn)
{
    if (!sn->closing && !sn->asking)
        rl__redis_conn_drop(&sn->sconn);
}

/* ---------------------------------------------------- the Sentinel's side */

static void on_master_addr(redisAsyncContext *ac, void *r, void *priv)
{
    sn_route_t *sn = priv;
    redisReply *reply = r;
    (void)ac;
    sn->asking = 0;
    if (sn->closing || reply == NULL)
        return;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        reply->element[1]->type == REDIS_REPLY_STRING) {
        rl__redis_conn_ready(&sn->sconn);
        follow(sn, reply->element[0]->str, reply->element[0]->len,
               atoi(reply->element[1]->str));
        return;
    }
    /* A nil (no such master) or an error: as a failed connect, tried again
     * after the backoff. */
    if (!sn->have_master)
        sn->cfg.ops->failed(sn->cfg.owner,
                            reply->type == REDIS_REPLY_NIL ? "Sentinel knows no such master"
                                                           : "Sentinel refused the question",
                            reply->type == REDIS_REPLY_ERROR ? reply->str : NULL);
    rl__redis_conn_drop(&sn->sconn);
}

/* +switch-master: "<name> <old-ip> <old-port> <new-ip> <new-port>". */
static void on_switch(redisAsyncContext *ac, void *r, void *priv)
{
    sn_route_t *sn = priv;
    redisReply *reply = r;
    (void)ac;
    if (sn->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY ||
        reply->elements != 3 || reply->element[2]->type != REDIS_REPLY_STRING)
        return;
    char name[128], oldh[256], newh[256];
    int oldp, newp;
    if (sscanf(reply->element[2]->str, "%127s %255s %d %255s %d", name, oldh, &oldp, newh,
               &newp) != 5 ||
        strcmp(name, sn->cfg.url->master) != 0)
        return;
    (void)oldp;
    follow(sn, newh, strlen(newh), newp);
}

static void s_connected(void *owner)
{
    sn_route_t *sn = owner;
    redisAsyncContext *ac = sn->sconn.ac;
    if (redisAsyncCommand(ac, on_master_addr, sn, "SENTINEL get-master-addr-by-name %s",
                          sn->cfg.url->master) == REDIS_OK)
        sn->asking = 1;
    redisAsyncCommand(ac, on_switch, sn, "SUBSCRIBE +switch-master");
}

/* The next Sentinel of the list, for the next attempt. */
static void next_sentinel(sn_route_t *sn)
{
    const rl_redisurl_t *u = sn->cfg.url;
    sn->sidx = (sn->sidx + 1) % (unsigned)u->nhosts;
    rl__redis_conn_addr(&sn->sconn, u->hosts[sn->sidx].host, u->hosts[sn->sidx].port);
}

static void s_failed(void *owner, const char *why, const char *detail)
{
    sn_route_t *sn = owner;
    next_sentinel(sn);
    if (!sn->have_master) {
        sn->last_attempt = sn->sconn.attempt;
        sn->cfg.ops->failed(sn->cfg.owner, why, detail);
    }
}

static void s_lost(void *owner)
{
    sn_route_t *sn = owner;
    sn->asking = 0;
    next_sentinel(sn);
}

static void s_setup_error(void *owner, const redisReply *reply)
{
    (void)owner, (void)reply; /* no setup: Sentinels are asked without AUTH */
}

static void s_retry_scheduled(void *owner, uint64_t delay_ms)
{
    sn_route_t *sn = owner;
    if (!sn->have_master)
        sn->cfg.ops->retry_scheduled(sn->cfg.owner, delay_ms);
}

static int s_stopping(void *owner)
{
    sn_route_t *sn = owner;
    return sn->closing || sn->cfg.ops->stopping(sn->cfg.owner);
}

static const rl_redis_conn_ops_t sentinel_ops = {
    .connected = s_connected,
    .failed = s_failed,
    .lost = s_lost,
    .setup_error = s_setup_error,
    .retry_scheduled = s_retry_scheduled,
    .stopping = s_stopping,
};

/* ------------------------------------------------------ the master's side */

static void on_role(redisAsyncContext *ac, void *r, void *priv)
{
    sn_route_t *sn = priv;
    redisReply *reply = r;
    (void)ac;
    if (sn->closing || reply == NULL || reply->type == REDIS_REPLY_ERROR)
        return; /* a lost connection is its own event; an error is setup's */
    int master = reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
                 reply->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(reply->element[0]->str, "master") == 0;
    if (!master)
        rediscover(sn); /* the Sentinels' answer was stale: ask again */
}

static void m_connected(void *owner)
{
    sn_route_t *sn = owner;
    /* Behind AUTH and SELECT, before the owner's commands. */
    redisAsyncCommand(sn->r->conn.ac, on_role, sn, "ROLE");
    sn->cfg.ops->connected(sn->cfg.owner);
}

static void m_failed(void *owner, const char *why, const char *detail)
{
    sn_route_t *sn = owner;
    sn->last_attempt = sn->r->conn.attempt;
    sn->cfg.ops->failed(sn->cfg.owner, why, detail);
}

static void m_lost(void *owner)
{
    sn_route_t *sn = owner;
    if (!sn->closing)
        sn->cfg.ops->lost(sn->cfg.owner);
}

static void m_setup_error(void *owner, const redisReply *reply)
{
    sn_route_t *sn = owner;
    sn->cfg.ops->setup_error(sn->cfg.owner, reply);
}

static void m_retry_scheduled(void *owner, uint64_t delay_ms)
{
    sn_route_t *sn = owner;
    sn->cfg.ops->retry_scheduled(sn->cfg.owner, delay_ms);
}

/* The master's connection carries the owner's name (CLIENT LIST); the
 * Sentinels' own connections stay unnamed. */
static const char *m_client_name(void *owner)
{
    sn_route_t *sn = owner;
    const rl_redis_conn_ops_t *ops = sn->cfg.ops;
    return ops->client_name != NULL ? ops->client_name(sn->cfg.owner) : NULL;
}

static const rl_redis_conn_ops_t master_ops = {
    .client_name = m_client_name,
    .connected = m_connected,
    .failed = m_failed,
    .lost = m_lost,
    .setup_error = m_setup_error,
    .retry_scheduled = m_retry_scheduled,
    .stopping = s_stopping,
};

/* ------------------------------------------------------------ the route */

static void sentinel_connect(rl_redis_route_t *r)
{
    sn_route_t *sn = SN(r);
    if (sn->sconn.ac == NULL && !uv_is_active((uv_handle_t *)&sn->sconn.retry_timer))
        rl__redis_conn_open(&sn->sconn);
    if (sn->have_master && r->conn.ac == NULL &&
        !uv_is_active((uv_handle_t *)&r->conn.retry_timer))
        rl__redis_conn_open(&r->conn);
}

static int sentinel_can_send(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    (void)tag, (void)tag_len;
    return r->conn.ac != NULL;
}

static int sentinel_send(rl_redis_route_t *r, const char *tag, size_t tag_len,
                         redisCallbackFn *cb, void *priv, int argc, const char **argv,
                         const size_t *argl)
{
    (void)tag, (void)tag_len;
    if (r->conn.ac == NULL)
        return REDIS_ERR;
    return redisAsyncCommandArgv(r->conn.ac, cb, priv, argc, argv, argl);
}

/* READONLY (the master we hold was demoted) or rounds unanswered (a frozen
 * master): drop it, and ask the Sentinels which master to reconnect to. */
static void sentinel_reset(rl_redis_route_t *r)
{
    rl__redis_conn_drop(&r->conn);
    rediscover(SN(r));
}

static void on_handle_closed(uv_handle_t *h)
{
    rl_redis_conn_t *c = h->data;
    sn_route_t *sn = c->owner;
    if (--sn->handles_open == 0)
        rl__free(sn->cfg.alloc, sn, sizeof *sn, 64);
}

static void sentinel_close(rl_redis_route_t *r)
{
    sn_route_t *sn = SN(r);
    sn->closing = 1;
    r->impl = NULL;
    rl__redis_conn_close_cb(&r->conn, on_handle_closed);
    rl__redis_conn_close_cb(&sn->sconn, on_handle_closed);
}

static redisAsyncContext *sentinel_context(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    (void)tag, (void)tag_len;
    return r->conn.ac;
}

static int sentinel_connecting(rl_redis_route_t *r)
{
    sn_route_t *sn = SN(r);
    return r->conn.connecting || sn->sconn.connecting || sn->asking;
}

static void sentinel_ready(rl_redis_route_t *r)
{
    rl__redis_conn_ready(&r->conn);
    rl__redis_conn_ready(&SN(r)->sconn);
}

static void sentinel_retry(rl_redis_route_t *r)
{
    sn_route_t *sn = SN(r);
    if (sn->have_master && r->conn.ac == NULL)
        rl__redis_conn_schedule(&r->conn);
    if (sn->sconn.ac == NULL)
        rl__redis_conn_schedule(&sn->sconn);
}

static uint32_t sentinel_attempts(rl_redis_route_t *r) { return SN(r)->last_attempt; }

static const rl_redis_route_vt_t sentinel_vt = {
    .name = "sentinel",
    .connect = sentinel_connect,
    .can_send = sentinel_can_send,
    .send = sentinel_send,
    .reset = sentinel_reset,
    .close = sentinel_close,
    .context = sentinel_context,
    .connecting = sentinel_connecting,
    .ready = sentinel_ready,
    .retry = sentinel_retry,
    .attempts = sentinel_attempts,
};

int rl__redis_route_sentinel(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg)
{
    sn_route_t *sn = rl__calloc(cfg->alloc, sizeof *sn, 64);
    if (sn == NULL)
        return RL_ENOMEM;
    sn->r = r;
    sn->cfg = *cfg;
    sn->sentinel_url = *cfg->url;
    sn->sentinel_url.kind = RL_REDISURL_TCP;
    sn->sentinel_url.user[0] = sn->sentinel_url.password[0] = '\0';
    sn->sentinel_url.db = 0;
    rl__redis_conn_init(&sn->sconn, cfg->loop, cfg->alloc, &sn->sentinel_url, cfg->rng,
                        cfg->backoff_cap_ms, &sentinel_ops, sn);
    rl__redis_conn_init(&r->conn, cfg->loop, cfg->alloc, cfg->url, cfg->rng,
                        cfg->backoff_cap_ms, &master_ops, sn);
    sn->handles_open = 4;
    r->impl = sn;
    r->vt = &sentinel_vt;
    return 0;
}
