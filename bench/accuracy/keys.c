/* SPDX-License-Identifier: MIT */
/*
 * The matrix's many-keys cells: one limit, many keys, each family's
 * traffic shape on every key. One key in KEYS_HOT_EVERY is hot (the
 * family's load: 2x the key's limit, 3x while bursty is on); the others
 * are quiet (the same shape at a twentieth of that: a tenth of the limit).
 * Our fleet checks every key it runs through the real library against
 * the run's redis-server; the ideal is run on every key, the peers' models
 * on the hot keys and a sample of the quiet ones (weighted by what they
 * stand for). A population above KEYS_RUN_MAX is sampled uniformly: the
 * fleet runs KEYS_RUN_MAX keys of it, the same mix. That holds the
 * accuracy figures because keys are independent in every strategy here
 * (ours: a hash per key, a share per key; the peers: a counter or bucket
 * per key); what the population changes is the cost, which is scaled from
 * the sample (see scale_calls) and the table (max_keys must hold it: the
 * sample does not test that).
 *
 * Arrivals are a Poisson process per (node, key), drawn by thinning: a
 * candidate at the node's peak rate, kept with the ratio of the rate at
 * its ms; a calendar of the next candidate per (node, key) makes a ms cost
 * only the arrivals in it.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"
#include "testutil.h"

#define KEYS_RATE 1000u
#define KEYS_BURST 100u
#define KEYS_HOT_EVERY 50u
#define KEYS_QUIET_SCALE 0.05
#define KEYS_RUN_MAX 1000u
#define KEYS_PEER_QUIET 20u
#define KEYS_PER_CALL 256u /* the sync thread's keys per report script call */
#define VIRTUAL_START_NS UINT64_C(1000000000000)

typedef struct kev {
    uint32_t t, key;
    uint16_t node, n, adm;
} kev_t;

typedef struct krun {
    const acc_opts_t *o;
    acc_scen_t sc;
    rl_test_clock_t clk;
    acc_node_t *nodes;
    uint32_t nkeys, nhot, population;
    char (*names)[16];
    double *next;   /* [node * nkeys + key] next candidate arrival, ms */
    double *peak;   /* [node] the hot keys' peak rate, per ms */
    uint32_t *head; /* [ms] calendar: first entry + 1 */
    uint32_t *link; /* [entry] next entry + 1 in its ms */
    uint64_t draws;
    kev_t *ev;
    size_t nev, cap;
    double calls_scaled; /* script calls per round, scaled to the population */
    uint64_t calls, heartbeats, reports;
    int errors;
} krun_t;

static double unit(krun_t *r)
{
    uint64_t x = acc_mix64((r->o->seed * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)r->population << 40) + ++r->draws);
    return ((double)(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rate_of(const krun_t *r, int node, uint32_t key, uint64_t t)
{
    double per_s = r->sc.offered(&r->sc, node, t);
    return (key < r->nhot ? per_s : per_s * KEYS_QUIET_SCALE) / 1000.0;
}

static double peak_of(const krun_t *r, int node, uint32_t key)
{
    return key < r->nhot ? r->peak[node] : r->peak[node] * KEYS_QUIET_SCALE;
}

/* Draw entry e's next candidate; put it on the calendar unless it falls
 * in ms `now` (the caller takes it at once) or past the run. 1: in `now`. */
static int advance(krun_t *r, uint32_t e, uint64_t now)
{
    int node = (int)(e / r->nkeys);
    double p = peak_of(r, node, e % r->nkeys);
    if (p <= 0.0)
        return 0;
    r->next[e] += -log(unit(r)) / p;
    uint64_t t = (uint64_t)r->next[e];
    if (t == now)
        return 1;
    if (t >= r->sc.duration_ms)
        return 0;
    r->link[e] = r->head[t];
    r->head[t] = e + 1;
    return 0;
}

static int record(krun_t *r, uint64_t t, int node, uint32_t key, uint32_t n, uint32_t adm)
{
    if (r->nev == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 65536;
        kev_t *ev = realloc(r->ev, cap * sizeof *ev);
        if (ev == NULL)
            return -1;
        r->ev = ev;
        r->cap = cap;
    }
    r->ev[r->nev++] = (kev_t){(uint32_t)t, key, (uint16_t)node, (uint16_t)n, (uint16_t)adm};
    return 0;
}

/* Every candidate of ms t: kept by thinning, checked by its node. */
static int drive_ms(krun_t *r, uint64_t t)
{
    uint32_t e1 = r->head[t];
    r->head[t] = 0;
    while (e1 != 0) {
        uint32_t e = e1 - 1, n = 0, adm = 0;
        e1 = r->link[e];
        int node = (int)(e / r->nkeys);
        uint32_t key = e % r->nkeys;
        do
            n += acc_node_live(&r->sc, node, t) &&
                 unit(r) * peak_of(r, node, key) < rate_of(r, node, key, t);
        while (advance(r, e, t));
        for (uint32_t k = 0; k < n; k++) {
            int rc = rl_check(r->nodes[node].rl, r->nodes[node].limit, r->names[key],
                              strlen(r->names[key]), 1, NULL);
            adm += rc == RL_ALLOW;
            if (rc < 0 && r->errors++ == 0)
                fprintf(stderr, "rl_accuracy: rl_check: %s\n", rl_strerror(rc));
        }
        if (n > 0 && record(r, t, node, key, n, adm) != 0)
            return -1;
    }
    return 0;
}

/* Script calls a node's round would send for the population: the sample's
 * key reports scaled up, KEYS_PER_CALL to a call, never fewer calls than
 * the sample sent (a call per virtual shard the reports fall in). */
static double scale_calls(const krun_t *r, uint64_t reports, uint64_t calls)
{
    if (r->population <= r->nkeys)
        return (double)calls;
    double f = (double)r->population / (double)r->nkeys;
    double need = ceil((double)reports * f / KEYS_PER_CALL);
    return need > (double)calls ? need : (double)calls;
}

static void end_round(krun_t *r, uint64_t t)
{
    /* relaxed: this thread is the clock's only writer. */
    uint64_t vms = atomic_load_explicit(&r->clk.precise_ns, memory_order_relaxed) / 1000000u;
    for (int i = 0; i < r->sc.nodes; i++) {
        if (!acc_node_live(&r->sc, i, t) || !acc_node_live(&r->sc, i, t + 1))
            continue;
        uint64_t rep0, c0, rep1, c1;
        acc_node_counters(&r->nodes[i], &rep0, &c0);
        if (acc_node_step(&r->nodes[i], vms) != 0)
            r->errors++;
        acc_node_counters(&r->nodes[i], &rep1, &c1);
        r->calls_scaled += scale_calls(r, rep1 - rep0, c1 - c0);
        r->reports += rep1 - rep0;
    }
}

static int setup(krun_t *r)
{
    size_t pairs = (size_t)r->sc.nodes * r->nkeys;
    r->nodes = calloc((size_t)r->sc.nodes, sizeof *r->nodes);
    r->names = calloc(r->nkeys, sizeof *r->names);
    r->next = calloc(pairs, sizeof *r->next);
    r->link = calloc(pairs, sizeof *r->link);
    r->peak = calloc((size_t)r->sc.nodes, sizeof *r->peak);
    r->head = calloc(r->sc.duration_ms, sizeof *r->head);
    if (r->nodes == NULL || r->names == NULL || r->next == NULL || r->link == NULL ||
        r->peak == NULL || r->head == NULL)
        return -1;
    uint32_t stride = r->population / r->nkeys;
    for (uint32_t k = 0; k < r->nkeys; k++)
        snprintf(r->names[k], sizeof r->names[k], "k%07u", k * stride);
    for (int i = 0; i < r->sc.nodes; i++)
        for (uint64_t t = 0; t < r->sc.duration_ms; t++) {
            double p = r->sc.offered(&r->sc, i, t) / 1000.0;
            r->peak[i] = p > r->peak[i] ? p : r->peak[i];
        }
    for (uint32_t e = 0; e < pairs; e++) {
        r->next[e] = (double)r->sc.join_ms[e / r->nkeys];
        if (advance(r, e, ACC_NEVER))
            return -1; /* cannot be: no ms is ACC_NEVER */
    }
    acc_fleet_cfg_t fc;
    acc_fleet_cfg_init(&fc, r->o, &r->sc, "v");
    fc.clock = &r->clk;
    fc.manual = 1;
    fc.max_keys = 4 * KEYS_RUN_MAX; /* the sample with room */
    for (int i = 0; i < r->sc.nodes; i++)
        if (acc_node_open(&r->nodes[i], &fc, i) != 0)
            return -1;
    return acc_wait_connected(r->nodes, r->sc.nodes, 10000);
}

static int simulate(krun_t *r)
{
    for (uint64_t t = 0; t < r->sc.duration_ms && !acc_interrupted; t++) {
        if (drive_ms(r, t) != 0)
            return -1;
        /* relaxed: see fleet.c's virtual_clock. */
        atomic_fetch_add_explicit(&r->clk.precise_ns, UINT64_C(1000000), memory_order_relaxed);
        if ((t + 1) % r->sc.interval_ms == 0)
            end_round(r, t);
    }
    for (int i = 0; i < r->sc.nodes; i++) {
        uint64_t rep, calls;
        acc_node_counters(&r->nodes[i], &rep, &calls);
        r->calls += calls;
        r->heartbeats += acc_node_heartbeats(&r->nodes[i]);
    }
    return acc_interrupted || r->errors > 0 ? -1 : 0;
}

/* ------------------------------------------------------------ figures */

/* Figures pooled over keys: decisions and over-limit windows summed
 * (weighted), the worst window the worst key's. */
typedef struct pool {
    double dec, allow, refuse, win, err, under, worst, ops;
} pool_t;

static void pool_add(pool_t *p, const acc_figs_t *f, double w, double ops)
{
    p->dec += w * (double)f->decisions;
    p->allow += w * f->wrong_allow * (double)f->decisions;
    p->refuse += w * f->wrong_refuse * (double)f->decisions;
    p->win += w * (double)f->windows;
    p->err += w * f->rate_err * (double)f->windows;
    p->under += w * f->under90 * (double)f->windows;
    p->worst = f->worst > p->worst ? f->worst : p->worst;
    p->ops += w * ops;
}

static void pool_row(const pool_t *p, const char *name, double ops_node_s, acc_row_t *row)
{
    memset(row, 0, sizeof *row);
    snprintf(row->strategy, sizeof row->strategy, "%s", name);
    row->f.decisions = (uint64_t)p->dec;
    row->f.wrong_allow = p->dec > 0 ? p->allow / p->dec : 0.0;
    row->f.wrong_refuse = p->dec > 0 ? p->refuse / p->dec : 0.0;
    row->f.windows = (uint64_t)p->win;
    row->f.rate_err = p->win > 0 ? p->err / p->win : 0.0;
    row->f.under90 = p->win > 0 ? p->under / p->win : 0.0;
    row->f.worst = p->worst;
    row->f.ops_node_s = ops_node_s;
}

static int by_key(const void *a, const void *b)
{
    const kev_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* Is quiet key k one of the peers' sample? Evenly spaced through them. */
static int peer_sampled(const krun_t *r, uint32_t k)
{
    uint32_t quiet = r->nkeys - r->nhot, step = quiet / KEYS_PEER_QUIET;
    return k < r->nhot || step == 0 || ((k - r->nhot) % step == 0 &&
                                        (k - r->nhot) / step < KEYS_PEER_QUIET);
}

typedef struct kbuf {
    acc_scen_t one;              /* the fleet as one node: ours and its ideal */
    uint16_t *arr1, *adm1, *ideal1;
    uint16_t *arr, *adm, *ideal; /* per node: the peers */
    uint32_t *ops_nt;            /* one key's ops of one strategy, by node and ms */
    double *ops_w[ACC_ROWS_MAX]; /* every key's, weighted, per strategy */
    double solo[ACC_ROWS_MAX];   /* and those sent one by one (acc_cost_t.solo) */
    pool_t ours, peer[ACC_ROWS_MAX];
    double worst_adm;
} kbuf_t;

/* How a product sends many keys' operations, x of them (weighted) by one
 * node in one bin: the remote operations that makes. Operations tied to a
 * request go one by one whatever the keys (acc_cost_t.solo: redis-cell's
 * command and envoy ratelimit's pipeline per request, Limitador's read of
 * a counter it lacks); the timed ones are batched. Limitador flushes its
 * pending counters in batches of DEFAULT_BATCH_SIZE = 100 (storage/redis)
 * on a tick per instance, so its flushes of one ms go 100 to an op.
 * gubernator sends a node's queued hits in one request per owner peer and
 * its broadcasts in one per receiving peer every GlobalSyncWait (global.go,
 * up to GlobalBatchLimit = 1000 per request): per sync interval a node
 * makes at most 2(N-1) requests while they stay under 1000 items each.
 * Doorman asks for every resource in one GetCapacity request per refresh
 * (doc/design.md). */
static uint64_t bin_ms(const acc_scen_t *sc, const char *name)
{
    return strcmp(name, "gubernator GLOBAL") == 0 ? sc->interval_ms : 1;
}

static double batched(const acc_scen_t *sc, const char *name, double x)
{
    if (x <= 0.0)
        return 0.0;
    if (strcmp(name, "limitador cached") == 0)
        return ceil(x / 100.0);
    if (strcmp(name, "doorman") == 0)
        return 1.0;
    double peers = 2.0 * (sc->nodes > 1 ? sc->nodes - 1 : 1);
    return fmin(x, fmax(peers, ceil(x / 1000.0))); /* gubernator */
}

static double batched_ops(const acc_scen_t *sc, const char *name, const double *ops_w)
{
    uint64_t bin = bin_ms(sc, name);
    double all = 0.0;
    for (int i = 0; i < sc->nodes; i++)
        for (uint64_t t0 = 0; t0 < sc->duration_ms; t0 += bin) {
            double x = 0.0;
            for (uint64_t t = t0; t < t0 + bin && t < sc->duration_ms; t++)
                x += ops_w[(size_t)i * sc->duration_ms + t];
            all += batched(sc, name, x);
        }
    return all;
}

static void key_figures(const krun_t *r, kbuf_t *b, const kev_t *ev, size_t n, double peer_w)
{
    const acc_scen_t *sc = &r->sc;
    size_t cells = (size_t)sc->nodes * sc->duration_ms;
    memset(b->arr1, 0, sc->duration_ms * sizeof *b->arr1);
    memset(b->adm1, 0, sc->duration_ms * sizeof *b->adm1);
    for (size_t j = 0; j < n; j++) {
        b->arr1[ev[j].t] += ev[j].n;
        b->adm1[ev[j].t] += ev[j].adm;
    }
    acc_cost_t c = {.unit = "Redis"};
    acc_strategies[0].run(&b->one, b->arr1, b->ideal1, &c);
    acc_figs_t f;
    acc_figures(&b->one, b->arr1, b->adm1, b->ideal1, 0, &f);
    pool_add(&b->ours, &f, 1.0, 0.0);
    for (uint64_t t = 0, s = 0; t < sc->duration_ms; t++) {
        s += b->adm1[t];
        if (t >= ACC_WINDOW_MS)
            s -= b->adm1[t - ACC_WINDOW_MS];
        b->worst_adm = (double)s > b->worst_adm ? (double)s : b->worst_adm;
    }
    if (peer_w <= 0.0)
        return;
    memset(b->arr, 0, cells * sizeof *b->arr);
    for (size_t j = 0; j < n; j++)
        b->arr[(size_t)ev[j].node * sc->duration_ms + ev[j].t] += ev[j].n;
    c.ops = 0;
    acc_strategies[0].run(sc, b->arr, b->ideal, &c);
    for (int s = 0; acc_strategies[s].name != NULL && s < ACC_ROWS_MAX; s++) {
        memset(b->ops_nt, 0, cells * sizeof *b->ops_nt);
        acc_cost_t cs = {.unit = "Redis", .ops_nt = b->ops_nt};
        acc_strategies[s].run(sc, b->arr, b->adm, &cs);
        acc_figures(sc, b->arr, b->adm, b->ideal, cs.ops, &f);
        pool_add(&b->peer[s], &f, peer_w, (double)cs.ops);
        for (size_t j = 0; j < cells; j++)
            b->ops_w[s][j] += peer_w * (double)b->ops_nt[j];
        b->solo[s] += peer_w * (double)cs.solo;
    }
}

static int figures(krun_t *r, acc_cell_t *cell)
{
    const acc_scen_t *sc = &r->sc;
    size_t cells = (size_t)sc->nodes * sc->duration_ms;
    kbuf_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return -1;
    b->one = *sc;
    b->one.nodes = 1;
    b->one.join_ms[0] = 0;
    b->one.death_ms[0] = ACC_NEVER;
    b->arr1 = calloc(sc->duration_ms, sizeof *b->arr1);
    b->adm1 = calloc(sc->duration_ms, sizeof *b->adm1);
    b->ideal1 = calloc(sc->duration_ms, sizeof *b->ideal1);
    b->arr = calloc(cells, sizeof *b->arr);
    b->adm = calloc(cells, sizeof *b->adm);
    b->ideal = calloc(cells, sizeof *b->ideal);
    b->ops_nt = calloc(cells, sizeof *b->ops_nt);
    int rc = -1, ns = 0;
    if (b->arr1 == NULL || b->adm1 == NULL || b->ideal1 == NULL || b->arr == NULL ||
        b->adm == NULL || b->ideal == NULL || b->ops_nt == NULL)
        goto out;
    for (; acc_strategies[ns].name != NULL && ns < ACC_ROWS_MAX; ns++)
        if ((b->ops_w[ns] = calloc(cells, sizeof *b->ops_w[ns])) == NULL)
            goto out;
    qsort(r->ev, r->nev, sizeof *r->ev, by_key);
    uint32_t quiet = r->nkeys - r->nhot, sampled = 0;
    for (uint32_t k = r->nhot; k < r->nkeys; k++)
        sampled += (uint32_t)peer_sampled(r, k);
    double quiet_w = sampled > 0 ? (double)quiet / (double)sampled : 0.0;
    size_t j = 0;
    for (uint32_t k = 0; k < r->nkeys; k++) {
        size_t from = j;
        while (j < r->nev && r->ev[j].key == k)
            j++;
        double w = !peer_sampled(r, k) ? 0.0 : k < r->nhot ? 1.0 : quiet_w;
        key_figures(r, b, r->ev + from, j - from, w);
    }
    double f = (double)r->population / (double)r->nkeys;
    double per_node_s = (double)sc->duration_ms / 1000.0 * acc_mean_live(sc);
    acc_bound_t bd;
    acc_bound_init(&bd, sc);
    acc_row_t *row = &cell->rows[0];
    pool_row(&b->ours, acc_policy_name(sc),
             (r->calls_scaled + (double)r->heartbeats) / per_node_s, row);
    row->of_bound = b->worst_adm / acc_bound_at(&bd, ACC_WINDOW_MS);
    cell->nrows = 1;
    /* The population's ops per (node, bin) are the sample's times f. */
    for (int s = 0; s < ns && cell->nrows < ACC_ROWS_MAX; s++) {
        for (size_t x = 0; x < cells; x++)
            b->ops_w[s][x] *= f;
        double ops = batched_ops(sc, acc_strategies[s].name, b->ops_w[s]) + b->solo[s] * f;
        pool_row(&b->peer[s], acc_strategies[s].name, ops / per_node_s,
                 &cell->rows[cell->nrows++]);
    }
    rc = 0;
out:
    free(b->arr1);
    free(b->adm1);
    free(b->ideal1);
    free(b->arr);
    free(b->adm);
    free(b->ideal);
    free(b->ops_nt);
    for (int s = 0; s < ns; s++)
        free(b->ops_w[s]);
    free(b);
    return rc;
}

static void krun_free(krun_t *r)
{
    for (int i = 0; r->nodes != NULL && i < r->sc.nodes; i++)
        acc_node_close(&r->nodes[i]);
    free(r->nodes);
    free(r->names);
    free(r->next);
    free(r->link);
    free(r->peak);
    free(r->head);
    free(r->ev);
    free(r);
}

int acc_keys_cell(const acc_opts_t *o, const char *family, int nodes, uint32_t interval_ms,
                  uint32_t population, acc_cell_t *cell)
{
    krun_t *r = calloc(1, sizeof *r);
    char name[48];
    if (r == NULL)
        return -1;
    r->o = o;
    /* Half a single-key cell's length: the cost is a report per quiet key
     * per node every 10 rounds, and a key's figures settle in a second. */
    if (acc_matrix_scen_len(family, nodes, interval_ms, o->quick, o->quick ? 2000 : 4000, &r->sc,
                            name, sizeof name) != 0) {
        free(r);
        return -1;
    }
    /* Its own Redis key prefix: the single-key cell's must not meet it. */
    char kname[64];
    snprintf(kname, sizeof kname, "k%u-%.40s", (unsigned)(population / 1000u), name + 2);
    r->sc.name = kname;
    r->sc.rate = KEYS_RATE;
    r->sc.burst = KEYS_BURST;
    r->population = population;
    r->nkeys = population < KEYS_RUN_MAX ? population : KEYS_RUN_MAX;
    r->nhot = r->nkeys / KEYS_HOT_EVERY > 0 ? r->nkeys / KEYS_HOT_EVERY : 1;
    atomic_init(&r->clk.precise_ns, VIRTUAL_START_NS);
    r->clk.coarse_tick_ns = 0;
    cell->keys = population;
    cell->run_keys = r->nkeys;
    cell->duration_ms = r->sc.duration_ms;
    int rc = setup(r) == 0 && simulate(r) == 0 ? figures(r, cell) : -1;
    if (rc == 0)
        printf("  %s: %zu arrivals, %llu key reports (%.1f a node-round)\n", kname, r->nev,
               (unsigned long long)r->reports,
               (double)r->reports / acc_mean_live(&r->sc) /
                   (double)(r->sc.duration_ms / r->sc.interval_ms));
    if (rc != 0)
        fprintf(stderr, "rl_accuracy: keys cell %s failed%s\n", kname,
                acc_interrupted ? " (interrupted)" : "");
    krun_free(r);
    return rc;
}
