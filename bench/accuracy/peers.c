/* SPDX-License-Identifier: MIT */
/*
 * The peers' strategies, each modelled as its documented algorithm and fed
 * the arrivals our fleet was fed (compare.c). Models, not the products:
 * no network latency (a message arrives the ms it is sent), no failures,
 * the products' defaults where they have one and the scenario's limit
 * (rate per s, burst) mapped onto each product's limit the way a user
 * would configure it. Each function's comment cites where its algorithm
 * is documented.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"

#define CELL(sc, i, t) ((size_t)(i) * (size_t)(sc)->duration_ms + (size_t)(t))

/* n remote operations by node i at ms t on a timer (keys.c batches them
 * over keys), or tied to a request (solo: one each, whatever the keys). */
static void cost(acc_cost_t *c, const acc_scen_t *sc, int i, uint64_t t, uint64_t n)
{
    c->ops += n;
    if (c->ops_nt != NULL)
        c->ops_nt[CELL(sc, i, t)] += (uint32_t)n;
}

static void solo(acc_cost_t *c, uint64_t n)
{
    c->ops += n;
    c->solo += n;
}

/* Per-request centralized GCRA: redis-cell's CL.THROTTLE
 * (github.com/brandur/redis-cell, README: "generic cell rate algorithm",
 * one command per request). Exact: the ideal itself, one round trip per
 * request. */
static void run_ideal(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm, acc_cost_t *c)
{
    acc_gcra_t g;
    acc_gcra_init(&g, (double)sc->rate, (double)sc->burst);
    c->unit = "Redis";
    for (uint64_t t = 0; t < sc->duration_ms; t++)
        for (int i = 0; i < sc->nodes; i++) {
            uint16_t n = arr[CELL(sc, i, t)], a = 0;
            for (uint16_t k = 0; k < n; k++)
                a += (uint16_t)acc_gcra_take(&g, (double)t);
            adm[CELL(sc, i, t)] = a;
            solo(c, n);
        }
}

/* envoyproxy/ratelimit with its Redis backend (README "Redis", and
 * src/redis/fixed_cache_impl.go): a fixed window per unit (here the
 * second), INCRBY of the hits and EXPIRE pipelined for every request, over
 * the limit when the incremented count exceeds it (refused requests are
 * counted too). One round trip per request; no burst in its model. */
static void run_envoy_rl(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm,
                         acc_cost_t *c)
{
    uint64_t count = 0, window = 0;
    c->unit = "Redis";
    for (uint64_t t = 0; t < sc->duration_ms; t++) {
        if (t / 1000 != window) {
            window = t / 1000;
            count = 0;
        }
        for (int i = 0; i < sc->nodes; i++) {
            uint16_t n = arr[CELL(sc, i, t)], a = 0;
            for (uint16_t k = 0; k < n; k++)
                a += ++count <= sc->rate;
            adm[CELL(sc, i, t)] = a;
            solo(c, n);
        }
    }
}

/* The static even split: Envoy's local rate limit filter
 * (envoy.extensions.filters.http.local_ratelimit, a token bucket per
 * instance: type.v3.TokenBucket's max_tokens, tokens_per_fill,
 * fill_interval; "the bucket will never contain more than max_tokens")
 * configured with the fleet's limit divided by the configured fleet size
 * (expected_nodes): tokens_per_fill = rate x fill_interval / N every
 * fill_interval (100 ms, longer if that is under one token), max_tokens =
 * max(tokens_per_fill, burst / N). Each instance's fill timer has its own
 * phase. No remote operation. */
static void run_static(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm, acc_cost_t *c)
{
    double n = sc->expected > 0 ? sc->expected : (double)sc->nodes, rate = (double)sc->rate;
    uint64_t fill = 100;
    if (rate * (double)fill / 1000.0 / n < 1.0)
        fill = (uint64_t)ceil(1000.0 * n / rate);
    double per_fill = fmax(1.0, floor(rate * (double)fill / 1000.0 / n + 0.5));
    double max_tokens = fmax(per_fill, floor((double)sc->burst / n + 0.5));
    double *tokens = malloc((size_t)sc->nodes * sizeof *tokens);
    if (tokens == NULL)
        return;
    for (int i = 0; i < sc->nodes; i++)
        tokens[i] = max_tokens; /* "also the number of tokens ... initially" */
    c->unit = "Redis";
    for (uint64_t t = 0; t < sc->duration_ms; t++)
        for (int i = 0; i < sc->nodes; i++) {
            uint64_t phase = (uint64_t)i * fill / (uint64_t)sc->nodes;
            if (t > 0 && t % fill == phase)
                tokens[i] = fmin(max_tokens, tokens[i] + per_fill);
            uint16_t want = arr[CELL(sc, i, t)], a = 0;
            while (a < want && tokens[i] >= 1.0) {
                tokens[i] -= 1.0;
                a++;
            }
            adm[CELL(sc, i, t)] = a;
        }
    free(tokens);
}

/* Limitador's redis_cached storage (docs.rs/limitador, storage/redis:
 * DEFAULT_FLUSHING_PERIOD_SEC = 1, DEFAULT_BATCH_SIZE = 100;
 * redis_cached.rs and counters_cache.rs): a limit is max_value per
 * `seconds` (here rate per 1 s, a fixed window whose Redis key expires a
 * window after its creation); each instance decides on its cached copy of
 * the counter (the value Redis returned at the last read or flush) plus
 * its own hits since, reads a counter it does not hold (or whose TTL ran
 * out) from Redis at once, and flushes its pending hits every flush period
 * with a script that increments the counter and returns value and TTL.
 * One round trip per read and per flush batch. */
typedef struct lim_node {
    uint64_t val, pending, expires;
    int cached;
} lim_node_t;

typedef struct lim_redis {
    uint64_t val, expires; /* expires == 0: no key */
} lim_redis_t;

static void lim_read(lim_node_t *n, lim_redis_t *r, uint64_t t)
{
    if (r->expires <= t) {
        r->expires = 0;
        r->val = 0;
    }
    n->val = r->val;
    n->expires = r->expires ? r->expires : t + 1000;
    n->cached = 1;
}

static void lim_flush(lim_node_t *n, lim_redis_t *r, uint64_t t)
{
    if (r->expires <= t) {
        r->val = 0;
        r->expires = t + 1000;
    }
    r->val += n->pending;
    n->pending = 0;
    n->val = r->val;
    n->expires = r->expires;
    n->cached = 1;
}

static void run_limitador(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm,
                          acc_cost_t *c)
{
    lim_node_t *nodes = calloc((size_t)sc->nodes, sizeof *nodes);
    lim_redis_t r = {0, 0};
    if (nodes == NULL)
        return;
    c->unit = "Redis";
    for (uint64_t t = 0; t < sc->duration_ms; t++)
        for (int i = 0; i < sc->nodes; i++) {
            lim_node_t *n = &nodes[i];
            uint64_t phase = (uint64_t)i * 1000u / (uint64_t)sc->nodes;
            if (n->pending > 0 && t % 1000u == phase) {
                lim_flush(n, &r, t);
                cost(c, sc, i, t, 1);
            }
            uint16_t want = arr[CELL(sc, i, t)], a = 0;
            if (want > 0 && (!n->cached || n->expires <= t)) {
                n->pending = 0; /* hits of an expired window count for nothing */
                lim_read(n, &r, t);
                solo(c, 1);
            }
            while (a < want && n->val + n->pending + 1 <= sc->rate) {
                n->pending++;
                a++;
            }
            adm[CELL(sc, i, t)] = a;
        }
    free(nodes);
}

/* gubernator's GLOBAL behaviour (github.com/mailgun/gubernator,
 * docs/architecture.md "Global behavior" and global.go): the owner of a
 * key (consistent hash over the peers; rendezvous hash of the live nodes
 * here) holds its bucket and decides its own requests on it; every other
 * peer decides on its copy of the owner's last status (a fresh bucket if
 * it has none), queues the hits and sends them to the owner
 * GlobalSyncWait after the first queued one (runAsyncHits); the owner
 * applies them and broadcasts its status to every peer GlobalSyncWait
 * after the first change (runBroadcasts, UpdatePeerGlobals). The default
 * algorithm, a token bucket of `limit` hits per `duration` (here rate per
 * 1 s), refilled whole when the duration runs out; hits beyond what
 * remains drain it (DRAIN_OVER_LIMIT). GlobalSyncWait is the scenario's
 * sync interval (100 ms is gubernator's default). One RPC per hit batch
 * and one per peer per broadcast; no Redis. */
typedef struct gub_bucket {
    uint64_t remaining, reset;
    int valid;
} gub_bucket_t;

typedef struct gub_node {
    gub_bucket_t copy;
    uint64_t queued;
    uint64_t send_at; /* ACC_NEVER: nothing queued */
} gub_node_t;

static void gub_fresh(const acc_scen_t *sc, gub_bucket_t *b, uint64_t t)
{
    if (!b->valid || b->reset <= t) {
        b->remaining = sc->rate;
        b->reset = t + 1000;
        b->valid = 1;
    }
}

static int gub_owner(const acc_scen_t *sc, uint64_t t)
{
    int best = -1;
    uint64_t best_h = 0;
    for (int i = 0; i < sc->nodes; i++) {
        uint64_t h = acc_mix64(UINT64_C(0x6b6579) ^ (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15));
        if (acc_node_live(sc, i, t) && (best < 0 || h > best_h)) {
            best = i;
            best_h = h;
        }
    }
    return best;
}

typedef struct gub {
    gub_node_t *nodes;
    gub_bucket_t owner_b;
    int owner;
    uint64_t bcast_at;
} gub_t;

/* The timers due at ms t: hit batches reach the owner, then a due
 * broadcast reaches every live peer. */
static void gub_timers(const acc_scen_t *sc, gub_t *g, uint64_t t, acc_cost_t *c)
{
    for (int i = 0; i < sc->nodes; i++) {
        gub_node_t *n = &g->nodes[i];
        if (n->send_at > t)
            continue;
        gub_fresh(sc, &g->owner_b, t);
        g->owner_b.remaining -= n->queued < g->owner_b.remaining ? n->queued
                                                                 : g->owner_b.remaining;
        n->queued = 0;
        n->send_at = ACC_NEVER;
        cost(c, sc, i, t, 1);
        if (g->bcast_at == ACC_NEVER)
            g->bcast_at = t + sc->interval_ms;
    }
    if (g->bcast_at > t)
        return;
    for (int i = 0; i < sc->nodes; i++)
        if (i != g->owner && acc_node_live(sc, i, t)) {
            g->nodes[i].copy = g->owner_b;
            cost(c, sc, g->owner, t, 1);
        }
    g->bcast_at = ACC_NEVER;
}

static uint16_t gub_decide(const acc_scen_t *sc, gub_t *g, int i, uint16_t want, uint64_t t)
{
    gub_bucket_t *b = i == g->owner ? &g->owner_b : &g->nodes[i].copy;
    gub_fresh(sc, b, t);
    uint16_t a = 0;
    while (a < want && b->remaining > 0) {
        b->remaining--;
        a++;
    }
    if (i == g->owner) {
        if (want > 0 && g->bcast_at == ACC_NEVER)
            g->bcast_at = t + sc->interval_ms;
    } else if (want > 0) {
        g->nodes[i].queued += want; /* every hit is queued, refused or not */
        if (g->nodes[i].send_at == ACC_NEVER)
            g->nodes[i].send_at = t + sc->interval_ms;
    }
    return a;
}

static void run_gubernator(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm,
                           acc_cost_t *c)
{
    gub_t g;
    memset(&g, 0, sizeof g);
    g.nodes = calloc((size_t)sc->nodes, sizeof *g.nodes);
    if (g.nodes == NULL)
        return;
    for (int i = 0; i < sc->nodes; i++)
        g.nodes[i].send_at = ACC_NEVER;
    g.bcast_at = ACC_NEVER;
    g.owner = -1;
    c->unit = "RPC";
    for (uint64_t t = 0; t < sc->duration_ms; t++) {
        int owner = gub_owner(sc, t);
        if (owner != g.owner) {
            /* A new owner has no state for the key: it starts afresh. */
            memset(&g.owner_b, 0, sizeof g.owner_b);
            g.owner = owner;
        }
        gub_timers(sc, &g, t, c);
        for (int i = 0; i < sc->nodes; i++)
            adm[CELL(sc, i, t)] = gub_decide(sc, &g, i, arr[CELL(sc, i, t)], t);
    }
    free(g.nodes);
}

/* Doorman (github.com/youtube/doorman, doc/design.md and
 * doc/algorithms.md, ProportionalShare): every client asks the server for
 * capacity (its wants) every refresh interval and gets a lease; when the
 * sum of the wants of the clients holding leases is under the capacity a
 * client gets what it wants, otherwise wants x capacity / sum of wants,
 * and never more than the capacity not leased to the others. A lease
 * lasts lease_length (20 s here) unless refreshed, so a client that died
 * holds its capacity until then. Here a client's wants are its arrival
 * rate over the last refresh interval (rate / expected_nodes before it
 * has one), it refreshes every 5 s from its first ms (Doorman's example
 * refresh_interval) and enforces its lease as a local GCRA with a tenth
 * of a second's tokens. One RPC per refresh. */
#define DOORMAN_REFRESH_MS 5000u
#define DOORMAN_LEASE_MS 20000u

typedef struct door_client {
    double wants, has;
    uint64_t expires, next, seen;
    acc_gcra_t g;
} door_client_t;

static void door_refresh(const acc_scen_t *sc, door_client_t *cl, int me, uint64_t t)
{
    double cap = (double)sc->rate, all = 0.0, leased = 0.0;
    for (int i = 0; i < sc->nodes; i++) {
        if (cl[i].expires <= t && i != me)
            continue;
        all += cl[i].wants;
        if (i != me)
            leased += cl[i].has;
    }
    double free_cap = fmax(0.0, cap - leased), w = cl[me].wants;
    double gets = all < cap ? fmin(w, free_cap) : fmin(w * cap / all, free_cap);
    cl[me].has = gets;
    cl[me].expires = t + DOORMAN_LEASE_MS;
    acc_gcra_init(&cl[me].g, gets, fmax(1.0, floor(gets / 10.0)));
}

static void run_doorman(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm,
                        acc_cost_t *c)
{
    door_client_t *cl = calloc((size_t)sc->nodes, sizeof *cl);
    if (cl == NULL)
        return;
    double x = sc->expected > 0 ? sc->expected : (double)sc->nodes;
    for (int i = 0; i < sc->nodes; i++) {
        cl[i].wants = (double)sc->rate / x;
        cl[i].next = sc->join_ms[i];
    }
    c->unit = "RPC";
    for (uint64_t t = 0; t < sc->duration_ms; t++)
        for (int i = 0; i < sc->nodes; i++) {
            door_client_t *d = &cl[i];
            if (!acc_node_live(sc, i, t))
                continue;
            if (t == d->next) {
                if (t > sc->join_ms[i])
                    d->wants = (double)d->seen * 1000.0 / DOORMAN_REFRESH_MS;
                d->seen = 0;
                door_refresh(sc, cl, i, t);
                d->next = t + DOORMAN_REFRESH_MS;
                cost(c, sc, i, t, 1);
            }
            uint16_t want = arr[CELL(sc, i, t)], a = 0;
            d->seen += want;
            for (uint16_t k = 0; k < want; k++)
                a += (uint16_t)acc_gcra_take(&d->g, (double)t);
            adm[CELL(sc, i, t)] = a;
        }
    free(cl);
}

const acc_strategy_t acc_strategies[] = {
    {"ideal / redis-cell", "per-request centralized GCRA (redis-cell CL.THROTTLE)", run_ideal,
     0},
    {"envoy ratelimit", "per-request centralized fixed 1-s window (INCRBY+EXPIRE)",
     run_envoy_rl, 0},
    {"static split", "Envoy local rate limit, token bucket of rate/N per node", run_static, 0},
    {"limitador cached", "Limitador redis_cached, flush period 1 s", run_limitador, 0},
    {"gubernator GLOBAL", "owner holds the count, peers on a copy every sync interval",
     run_gubernator, 1},
    {"doorman", "proportional-share leases, refresh 5 s", run_doorman, 0},
    {NULL, NULL, NULL, 0},
};
