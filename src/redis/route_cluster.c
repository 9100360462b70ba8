/* SPDX-License-Identifier: MIT */
/*
 * The Redis Cluster route: a hash tag's slot (CRC16 mod 16384) names the
 * master that owns it in the slot map (CLUSTER SLOTS), and each master has
 * one connection (conn.c). A MOVED reply moves the slot to the node it names,
 * retries the command there and asks for a new map; an ASK sends ASKING and
 * the command to the node it names, once; a master lost or unreachable makes
 * the route ask the others for the map until a promoted replica owns its
 * slots. Commands for a slot whose master is down are refused at send (the
 * owner's degraded policy covers the gap; the sync round's cumulative
 * counters resend what they carried).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/alloc.h"
#include "redis/route.h"

#define SLOTS 16384
#define NODES_MAX 32        /* masters, seeds and redirect targets a route knows */
#define NO_NODE 0xff
#define REDIRECTS_MAX 5     /* MOVED/ASK hops one command may take */
#define REFRESH_EVERY_MS 250 /* the map is asked for this often while it is
                                incomplete or one of its masters is down */

typedef struct cl_route cl_route_t;

typedef struct cl_node {
    rl_redis_conn_t conn; /* first: its timers' data is the node */
    char host[256];
    int port;
    int inited;   /* conn initialised (its timers exist) */
    int used;     /* a master of the map, a seed, or a redirect target */
    int mapped;   /* owns slots in the current map */
    cl_route_t *cl;
} cl_node_t;

struct cl_route {
    rl_redis_route_cfg_t cfg;
    cl_node_t nodes[NODES_MAX];
    uint8_t slot_node[SLOTS]; /* NO_NODE: no master known */
    int mapped;               /* a map arrived */
    int want_refresh;         /* MOVED seen, a master lost: ask again */
    int refreshing;           /* a CLUSTER SLOTS is outstanding */
    int told_up;              /* the owner was told `connected` since the last loss */
    int closing;
    unsigned seed_next;
    uint32_t last_attempt;    /* attempts of the node whose connect failed last */
    int handles_open;         /* closed asynchronously: the memory goes after the last */
    uv_timer_t refresh_timer;
};

/* A command in flight, with its arguments kept for a redirect's resend. */
typedef struct cl_req {
    cl_route_t *cl;
    redisCallbackFn *cb;
    void *priv;
    int redirects;
    int reloaded;       /* NOSCRIPT answered once with a load and a retry */
    int argc;
    size_t bytes;
    const char **argv;
    size_t *argl;
} cl_req_t;

static int node_up(const cl_node_t *n)
{
    return n->inited && n->conn.ac != NULL && !n->conn.connecting;
}

/* ------------------------------------------------------------- the nodes */

static const rl_redis_conn_ops_t node_ops;

static cl_node_t *node_find(cl_route_t *cl, const char *host, size_t hlen, int port)
{
    cl_node_t *free_slot = NULL;
    if (hlen == 0 || hlen >= sizeof cl->nodes[0].host)
        return NULL;
    for (int i = 0; i < NODES_MAX; i++) {
        cl_node_t *n = &cl->nodes[i];
        if (n->inited && n->port == port && strlen(n->host) == hlen &&
            memcmp(n->host, host, hlen) == 0)
            return n;
        if (free_slot == NULL && (!n->inited || (!n->used && n->conn.ac == NULL)))
            free_slot = n;
    }
    if (free_slot == NULL)
        return NULL;
    if (!free_slot->inited) {
        rl__redis_conn_init(&free_slot->conn, cl->cfg.loop, cl->cfg.alloc, cl->cfg.url,
                            cl->cfg.rng, cl->cfg.backoff_cap_ms, &node_ops, free_slot);
        free_slot->inited = 1;
        cl->handles_open += 2;
    }
    memcpy(free_slot->host, host, hlen);
    free_slot->host[hlen] = '\0';
    free_slot->port = port;
    /* Used from now on (a map's master, a seed, a redirect's target), so no
     * later lookup takes the entry for another address. */
    free_slot->used = 1;
    free_slot->mapped = 0;
    free_slot->conn.attempt = 0;
    rl__redis_conn_addr(&free_slot->conn, free_slot->host, port);
    return free_slot;
}

/* Start using a node: connect unless connected, connecting or waiting for
 * its reconnect. */
static void node_use(cl_node_t *n)
{
    n->used = 1;
    if (n->conn.ac == NULL && !uv_is_active((uv_handle_t *)&n->conn.retry_timer))
        rl__redis_conn_open(&n->conn);
}

/* Stop using a node (no longer a master): close, no reconnect. */
static void node_unuse(cl_node_t *n)
{
    n->used = n->mapped = 0;
    if (n->inited)
        rl__redis_conn_idle(&n->conn);
}

static cl_node_t *any_master_up(cl_route_t *cl)
{
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].mapped && node_up(&cl->nodes[i]))
            return &cl->nodes[i];
    return NULL;
}

/* The owner hears `connected` once the route can send again. */
static void maybe_tell_up(cl_route_t *cl)
{
    if (cl->told_up || cl->closing || !cl->mapped || any_master_up(cl) == NULL)
        return;
    cl->told_up = 1;
    cl->cfg.ops->connected(cl->cfg.owner);
}

/* Load every script of the owner on a new connection, ahead of anything
 * else queued on it: the SHA is the source's, the same on every server. */
static void preload_scripts(cl_route_t *cl, redisAsyncContext *ac)
{
    const rl_redis_scripts_t *sc = cl->cfg.scripts;
    if (sc == NULL)
        return;
    for (unsigned i = 0; i < sc->n; i++)
        redisAsyncCommand(ac, NULL, NULL, "SCRIPT LOAD %s", sc->s[i].source);
}

/* ------------------------------------------------------------ the map */

static void refresh(cl_route_t *cl);

/* CLUSTER SLOTS: [[start, end, [ip, port, id...], replicas...]...]. A map
 * that is not one is ignored (the next tick asks again). */
static void on_slots(redisAsyncContext *ac, void *r, void *priv)
{
    cl_node_t *asked = priv;
    cl_route_t *cl = asked->cl;
    redisReply *reply = r;
    (void)ac;
    cl->refreshing = 0;
    if (cl->closing || reply == NULL || reply->type != REDIS_REPLY_ARRAY ||
        reply->elements == 0)
        return;
    uint8_t map[SLOTS];
    int in_map[NODES_MAX] = {0};
    memset(map, NO_NODE, sizeof map);
    for (size_t i = 0; i < reply->elements; i++) {
        const redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            return;
        const redisReply *m = e->element[2];
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER || lo < 0 || hi >= SLOTS || lo > hi ||
            m->element[1]->integer <= 0 || m->element[1]->integer > 65535)
            return;
        /* An empty address: the node we asked (Redis's "unknown endpoint"). */
        const char *host = m->element[0]->len ? m->element[0]->str : asked->host;
        size_t hlen = m->element[0]->len ? m->element[0]->len : strlen(asked->host);
        cl_node_t *n = node_find(cl, host, hlen, (int)m->element[1]->integer);
        if (n == NULL)
            return;
        int idx = (int)(n - cl->nodes);
        in_map[idx] = 1;
        memset(map + lo, idx, (size_t)(hi - lo + 1));
    }
    memcpy(cl->slot_node, map, sizeof map);
    cl->mapped = 1;
    cl->want_refresh = 0;
    for (int i = 0; i < NODES_MAX; i++) {
        cl_node_t *n = &cl->nodes[i];
        if (in_map[i]) {
            n->mapped = 1;
            node_use(n);
        } else if (n->used && n != asked) {
            node_unuse(n); /* a replica now, gone, or a seed that is no master */
        } else {
            n->mapped = 0;
        }
    }
    if (!asked->mapped && asked->used)
        node_unuse(asked);
    maybe_tell_up(cl);
}

/* Ask a connected node for the map, or, with none connected, a seed. */
static void refresh(cl_route_t *cl)
{
    if (cl->refreshing || cl->closing)
        return;
    cl_node_t *n = any_master_up(cl);
    for (int i = 0; n == NULL && i < NODES_MAX; i++)
        if (cl->nodes[i].used && node_up(&cl->nodes[i]))
            n = &cl->nodes[i];
    if (n != NULL) {
        if (redisAsyncCommand(n->conn.ac, on_slots, n, "CLUSTER SLOTS") == REDIS_OK)
            cl->refreshing = 1;
        return;
    }
    /* Nothing connected: the next seed (each keeps its own backoff). */
    const rl_redisurl_t *u = cl->cfg.url;
    for (int tries = 0; tries < u->nhosts; tries++) {
        const rl_redisaddr_t *a = &u->hosts[cl->seed_next++ % (unsigned)u->nhosts];
        cl_node_t *s = node_find(cl, a->host, strlen(a->host), a->port);
        if (s == NULL)
            return;
        if (!s->used || (s->conn.ac == NULL && !uv_is_active((uv_handle_t *)&s->conn.retry_timer))) {
            node_use(s);
            return;
        }
    }
}

static int needs_refresh(cl_route_t *cl)
{
    if (!cl->mapped || cl->want_refresh)
        return 1;
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].mapped && !node_up(&cl->nodes[i]))
            return 1;
    return 0;
}

static void on_refresh_tick(uv_timer_t *t)
{
    cl_route_t *cl = t->data;
    if (needs_refresh(cl))
        refresh(cl);
}

/* --------------------------------------------- the nodes' connection events */

static void node_connected(void *owner)
{
    cl_node_t *n = owner;
    cl_route_t *cl = n->cl;
    preload_scripts(cl, n->conn.ac);
    if (!cl->mapped || cl->want_refresh)
        refresh(cl);
    if (n->mapped)
        maybe_tell_up(cl);
}

static int node_counts(const cl_node_t *n)
{
    /* A master's events are the owner's; so are a seed's before any map. */
    return n->mapped || (!n->cl->mapped && n->used);
}

static void node_failed(void *owner, const char *why, const char *detail)
{
    cl_node_t *n = owner;
    cl_route_t *cl = n->cl;
    if (!node_counts(n))
        return;
    cl->last_attempt = n->conn.attempt;
    cl->want_refresh = 1;
    cl->cfg.ops->failed(cl->cfg.owner, why, detail);
    if (!cl->mapped)
        refresh(cl); /* the next seed */
}

static void node_lost(void *owner)
{
    cl_node_t *n = owner;
    cl_route_t *cl = n->cl;
    if (!n->mapped || cl->closing)
        return;
    cl->want_refresh = 1;
    cl->told_up = 0;
    cl->cfg.ops->lost(cl->cfg.owner);
}

static void node_setup_error(void *owner, const redisReply *reply)
{
    cl_node_t *n = owner;
    n->cl->cfg.ops->setup_error(n->cl->cfg.owner, reply);
}

static void node_retry_scheduled(void *owner, uint64_t delay_ms)
{
    cl_node_t *n = owner;
    if (node_counts(n))
        n->cl->cfg.ops->retry_scheduled(n->cl->cfg.owner, delay_ms);
}

static int node_stopping(void *owner)
{
    cl_node_t *n = owner;
    return n->cl->closing || !n->used || n->cl->cfg.ops->stopping(n->cl->cfg.owner);
}

/* Every master's connection carries the owner's name (CLIENT LIST). */
static const char *node_client_name(void *owner)
{
    cl_node_t *n = owner;
    const rl_redis_conn_ops_t *ops = n->cl->cfg.ops;
    return ops->client_name != NULL ? ops->client_name(n->cl->cfg.owner) : NULL;
}

static const rl_redis_conn_ops_t node_ops = {
    .client_name = node_client_name,
    .connected = node_connected,
    .failed = node_failed,
    .lost = node_lost,
    .setup_error = node_setup_error,
    .retry_scheduled = node_retry_scheduled,
    .stopping = node_stopping,
};

/* ---------------------------------------------------------- commands */

static void req_free(cl_req_t *q)
{
    rl__free(q->cl->cfg.alloc, q, q->bytes, 8);
}

static void deliver(cl_req_t *q, redisAsyncContext *ac, void *reply)
{
    q->cb(ac, reply, q->priv);
    req_free(q);
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv);

static int req_send(cl_node_t *n, cl_req_t *q, int asking)
{
    if (!node_up(n))
        return REDIS_ERR;
    if (asking && redisAsyncCommand(n->conn.ac, NULL, NULL, "ASKING") != REDIS_OK)
        return REDIS_ERR;
    return redisAsyncCommandArgv(n->conn.ac, on_reply, q, q->argc, q->argv, q->argl);
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the node it names. */
static cl_node_t *redirect_target(cl_route_t *cl, const char *msg, unsigned *slot)
{
    const char *sp = strchr(msg, ' ');
    if (sp == NULL)
        return NULL;
    char *end;
    long s = strtol(sp + 1, &end, 10);
    if (*end != ' ' || s < 0 || s >= SLOTS)
        return NULL;
    const char *addr = end + 1;
    const char *colon = strrchr(addr, ':');
    if (colon == NULL)
        return NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535)
        return NULL;
    *slot = (unsigned)s;
    return node_find(cl, addr, (size_t)(colon - addr), (int)port);
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    cl_req_t *q = priv;
    cl_route_t *cl = q->cl;
    redisReply *reply = r;
    if (reply == NULL || cl->closing || reply->type != REDIS_REPLY_ERROR) {
        deliver(q, ac, reply);
        return;
    }
    const char *msg = reply->str;
    int moved = strncmp(msg, "MOVED ", 6) == 0, ask = strncmp(msg, "ASK ", 4) == 0;
    if (moved || ask) {
        unsigned slot;
        cl_node_t *n = redirect_target(cl, msg, &slot);
        if (n == NULL) {
            deliver(q, ac, reply);
            return;
        }
        if (moved) {
            /* The map is stale: this slot at least is known now. */
            cl->slot_node[slot] = (uint8_t)(n - cl->nodes);
            n->mapped = 1;
            cl->want_refresh = 1;
        }
        node_use(n);
        if (q->redirects++ < REDIRECTS_MAX && req_send(n, q, ask) == REDIS_OK)
            return;
        deliver(q, ac, NULL); /* its node is not connected yet: as a lost reply */
        return;
    }
    if (strncmp(msg, "NOSCRIPT", 8) == 0 && !q->reloaded && cl->cfg.scripts != NULL) {
        /* This master lost its scripts (SCRIPT FLUSH, a restart behind our
         * back): load them and retry, behind the loads, once. */
        q->reloaded = 1;
        preload_scripts(cl, ac);
        if (redisAsyncCommandArgv(ac, on_reply, q, q->argc, q->argv, q->argl) == REDIS_OK)
            return;
    }
    if (strncmp(msg, "CLUSTERDOWN", 11) == 0 || strncmp(msg, "READONLY", 8) == 0)
        cl->want_refresh = 1;
    deliver(q, ac, reply);
}

static cl_route_t *CL(rl_redis_route_t *r) { return r->impl; }

/* The node a tag goes to, connected or not; NULL tag: any connected master. */
static cl_node_t *tag_node(cl_route_t *cl, const char *tag, size_t tag_len, unsigned *slot)
{
    if (!cl->mapped)
        return NULL;
    if (tag == NULL) {
        *slot = SLOTS;
        return any_master_up(cl);
    }
    *slot = rl__redis_slot(tag, tag_len);
    uint8_t i = cl->slot_node[*slot];
    return i == NO_NODE ? NULL : &cl->nodes[i];
}

static int cluster_can_send(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    unsigned slot;
    cl_node_t *n = tag_node(CL(r), tag, tag_len, &slot);
    return n != NULL && node_up(n);
}

static int cluster_send(rl_redis_route_t *r, const char *tag, size_t tag_len,
                        redisCallbackFn *cb, void *priv, int argc, const char **argv,
                        const size_t *argl)
{
    cl_route_t *cl = CL(r);
    unsigned slot;
    cl_node_t *n = tag_node(cl, tag, tag_len, &slot);
    if (n == NULL || !node_up(n) || argc <= 0)
        return REDIS_ERR;
    size_t text = 0;
    for (int i = 0; i < argc; i++)
        text += argl[i];
    size_t bytes = sizeof(cl_req_t) + (size_t)argc * (sizeof(char *) + sizeof(size_t)) + text;
    cl_req_t *q = rl__calloc(cl->cfg.alloc, bytes, 8);
    if (q == NULL)
        return REDIS_ERR;
    q->cl = cl;
    q->cb = cb;
    q->priv = priv;
    q->argc = argc;
    q->bytes = bytes;
    q->argv = (const char **)(void *)(q + 1);
    q->argl = (size_t *)(void *)(q->argv + argc);
    char *w = (char *)(q->argl + argc);
    for (int i = 0; i < argc; i++) {
        memcpy(w, argv[i], argl[i]);
        q->argv[i] = w;
        q->argl[i] = argl[i];
        w += argl[i];
    }
    if (req_send(n, q, 0) != REDIS_OK) {
        req_free(q);
        return REDIS_ERR;
    }
    return REDIS_OK;
}

/* ------------------------------------------------------------ the route */

static void cluster_connect(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    if (!uv_is_active((uv_handle_t *)&cl->refresh_timer))
        uv_timer_start(&cl->refresh_timer, on_refresh_tick, REFRESH_EVERY_MS, REFRESH_EVERY_MS);
    if (needs_refresh(cl))
        refresh(cl);
}

/* READONLY (a master demoted under us) or rounds unanswered (a frozen
 * master): start every connection over and ask for the map again. */
static void cluster_reset(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    cl->want_refresh = 1;
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].used && cl->nodes[i].conn.ac != NULL)
            rl__redis_conn_drop(&cl->nodes[i].conn);
}

/* The route's memory goes with the last of its handles. */
static void handle_closed(cl_route_t *cl)
{
    if (--cl->handles_open == 0)
        rl__free(cl->cfg.alloc, cl, sizeof *cl, 64);
}

static void on_node_handle_closed(uv_handle_t *h)
{
    cl_node_t *n = h->data; /* a conn's timers point at it, the node's first member */
    handle_closed(n->cl);
}

static void on_refresh_closed(uv_handle_t *h) { handle_closed(h->data); }

static void cluster_close(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    cl->closing = 1;
    r->impl = NULL;
    uv_timer_stop(&cl->refresh_timer);
    /* Pending commands are answered NULL here, before close returns. */
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].inited)
            rl__redis_conn_close_cb(&cl->nodes[i].conn, on_node_handle_closed);
    uv_close((uv_handle_t *)&cl->refresh_timer, on_refresh_closed);
}

static redisAsyncContext *cluster_context(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    unsigned slot;
    cl_node_t *n = tag_node(CL(r), tag, tag_len, &slot);
    return n != NULL && node_up(n) ? n->conn.ac : NULL;
}

static int cluster_connecting(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    if (cl->refreshing)
        return 1;
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].used && cl->nodes[i].conn.connecting)
            return 1;
    return 0;
}

static void cluster_ready(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].inited && node_up(&cl->nodes[i]))
            rl__redis_conn_ready(&cl->nodes[i].conn);
}

static void cluster_retry(rl_redis_route_t *r)
{
    cl_route_t *cl = CL(r);
    for (int i = 0; i < NODES_MAX; i++)
        if (cl->nodes[i].used && cl->nodes[i].conn.ac == NULL)
            rl__redis_conn_schedule(&cl->nodes[i].conn);
    if (needs_refresh(cl))
        refresh(cl);
}

static uint32_t cluster_attempts(rl_redis_route_t *r) { return CL(r)->last_attempt; }

static const rl_redis_route_vt_t cluster_vt = {
    .name = "cluster",
    .connect = cluster_connect,
    .can_send = cluster_can_send,
    .send = cluster_send,
    .reset = cluster_reset,
    .close = cluster_close,
    .context = cluster_context,
    .connecting = cluster_connecting,
    .ready = cluster_ready,
    .retry = cluster_retry,
    .attempts = cluster_attempts,
};

int rl__redis_route_cluster(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg)
{
    cl_route_t *cl = rl__calloc(cfg->alloc, sizeof *cl, 64);
    if (cl == NULL)
        return RL_ENOMEM;
    cl->cfg = *cfg;
    memset(cl->slot_node, NO_NODE, sizeof cl->slot_node);
    for (int i = 0; i < NODES_MAX; i++)
        cl->nodes[i].cl = cl;
    uv_timer_init(cfg->loop, &cl->refresh_timer);
    cl->refresh_timer.data = cl;
    cl->handles_open = 1;
    r->impl = cl;
    r->vt = &cluster_vt;
    return 0;
}
