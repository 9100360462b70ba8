/* SPDX-License-Identifier: MIT */
/*
 * Fleet-wide in-flight limits (kind=inflight mode=global) on a private
 * redis-server: three node processes, each on its own manual clock, run
 * their sync rounds in lockstep on one virtual time (100 ms a round), and
 * acquire and release permits between rounds. Checked:
 * - the bound: the permits the nodes hold (each node's own count, summed
 *   at round boundaries) never pass max, under random acquires and
 *   releases with random hold times, on two keys;
 * - a node killed (SIGKILL) with permits held: Redis stops counting its
 *   block within one lease (2 rounds), and the others take it over;
 * - Redis killed, then restarted empty, for each on_failure: closed admits
 *   nothing new once the lease is gone, local a key's max / 3 per node,
 *   open max per node, and what they hold stays within the header's
 *   formula; after the restart the bound holds again once the excess is
 *   released;
 * - rl_close hands the node's blocks back: no field of it stays in Redis;
 * - on one node, threads racing acquires and releases on a key never hold
 *   more than its block (the clock frozen, against a counting model).
 * And the refusals: adaptive limits and partitions with mode=global.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "procs.h"
#include "redis_harness.h"
#include "instance.h"
#include "sync/sync.h"

enum {
    NODES = 3,
    KEYS = 2,
    MAX = 10,
    INTERVAL_MS = 100,
    HELD_MAX = 64, /* permits a node may hold (>= MAX, and open's MAX a key) */
};

static const char secret[] = "inflight-global-secret-0123456789";
static const uint64_t START_NS = UINT64_C(7000000000000);

/* ------------------------------------------------------------ a node */

enum { OP_ROUND, OP_WORK, OP_GRAB, OP_DROP, OP_CLOSE };

typedef struct cmd {
    int op;
    int key;       /* OP_GRAB, OP_DROP: the key */
    uint32_t n;    /* OP_WORK: operations; OP_GRAB: acquires to try */
    uint32_t seed; /* OP_WORK */
    uint64_t vt_ns;
} cmd_t;

typedef struct reply {
    int rc;                /* OP_ROUND: rl__sync_step's */
    uint32_t held[KEYS];   /* the node's own count after the command */
    uint32_t admitted;     /* this command's acquires admitted */
    uint32_t bad;          /* an answer that was neither allow nor deny */
} reply_t;

typedef struct node {
    int idx;
    rl_test_clock_t clk;
    rl_t *rl;
    int limit;
    rl_permit_t held[KEYS][HELD_MAX];
    uint32_t n[KEYS];
    uint32_t rng;
} node_t;

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static const char *key_of(int k) { return k == 0 ? "tenant-a" : "tenant-b"; }

static void node_open(node_t *n, const char *url, const char *on_failure)
{
    atomic_init(&n->clk.precise_ns, START_NS);
    n->clk.coarse_tick_ns = 0;
    rl_config_t c;
    rl_config_init(&c);
    char name[16];
    snprintf(name, sizeof name, "ifg%d-", n->idx);
    c.redis_url = url;
    c.node_id = name;
    c.sync_interval_ms = INTERVAL_MS;
    c.expected_nodes = NODES;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "ifg";
    c.clock = rl_test_clock_fn;
    c.clock_ud = &n->clk;
    if (rl__open(&n->rl, &c, 1) != 0)
        _exit(5);
    char spec[128];
    snprintf(spec, sizeof spec, "name=db kind=inflight max=%d mode=global on_failure=%s", MAX,
             on_failure);
    rl_limit_t lim;
    char err[160];
    if (rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err) != 0)
        _exit(6);
    n->limit = rl_limit_add(n->rl, &lim);
    if (n->limit <= 0)
        _exit(7);
}

static int acquire(node_t *n, int k, reply_t *o)
{
    if (n->n[k] == HELD_MAX)
        return RL_DENY;
    rl_permit_t p;
    int rc = rl_inflight_acquire(n->rl, n->limit, key_of(k), strlen(key_of(k)),
                                 RL_INFLIGHT_NO_CLASS, &p, NULL);
    if (rc == RL_ALLOW) {
        n->held[k][n->n[k]++] = p;
        o->admitted++;
    } else if (rc != RL_DENY) {
        o->bad++;
    }
    return rc;
}

static void release_at(node_t *n, int k, uint32_t i, reply_t *o)
{
    if (rl_inflight_release(n->rl, &n->held[k][i], RL_INFLIGHT_SUCCESS, 0) != 0)
        o->bad++;
    n->held[k][i] = n->held[k][--n->n[k]];
}

/* Random acquires and releases: a permit is held a random number of steps
 * (each step releases one at random with probability 2/5). */
static void node_work(node_t *n, const cmd_t *k, reply_t *o)
{
    n->rng = k->seed | 1u;
    for (uint32_t i = 0; i < k->n; i++) {
        uint32_t r = next_rand(&n->rng);
        int key = (int)(r >> 8) % KEYS;
        if (r % 5 < 3 || n->n[key] == 0)
            acquire(n, key, o);
        else
            release_at(n, key, (r >> 16) % n->n[key], o);
    }
}

static void node_main(int idx, const char *url, const char *on_failure, int in, int out)
{
    static node_t n;
    memset(&n, 0, sizeof n);
    n.idx = idx;
    node_open(&n, url, on_failure);
    rl_test_put(out, &idx, sizeof idx); /* ready */
    for (;;) {
        cmd_t k;
        rl_test_get(in, &k, sizeof k);
        reply_t o;
        memset(&o, 0, sizeof o); /* padding too: the bytes go down a pipe */
        atomic_store(&n.clk.precise_ns, k.vt_ns);
        if (k.op == OP_ROUND) {
            o.rc = rl__sync_step(n.rl->sync, k.vt_ns / 1000000u);
        } else if (k.op == OP_WORK) {
            node_work(&n, &k, &o);
        } else if (k.op == OP_GRAB) {
            for (uint32_t i = 0; i < k.n; i++)
                acquire(&n, k.key, &o);
        } else if (k.op == OP_DROP) {
            while (n.n[k.key] > 0)
                release_at(&n, k.key, 0, &o);
        } else {
            rl_close(n.rl);
            rl_test_put(out, &o, sizeof o);
            _exit(0);
        }
        for (int j = 0; j < KEYS; j++)
            o.held[j] = n.n[j];
        rl_test_put(out, &o, sizeof o);
    }
}

/* ---------------------------------------------------------- the parent */

typedef struct fleet {
    rl_test_redis_t srv; /* the fleet's own server: a test kills and restarts it */
    char url[64];
    rl_test_procs_t procs;
    uint64_t vt;
    reply_t last[NODES];
} fleet_t;

static void fleet_kill(void *p)
{
    fleet_t *f = p;
    rl_test_procs_stop(&f->procs);
    rl_test_redis_stop(&f->srv);
    free(f);
}

typedef struct proc_args {
    const char *url, *on_failure;
} proc_args_t;

static void proc_main(int idx, int in, int out, void *arg)
{
    const proc_args_t *a = arg;
    node_main(idx, a->url, a->on_failure, in, out);
}

static fleet_t *fleet_start(const char *on_failure)
{
    fleet_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    rl_test_hold(f, fleet_kill);
    char err[256];
    ck_assert_msg(rl_test_redis_start(&f->srv, err, sizeof err) == 0, "%s", err);
    snprintf(f->url, sizeof f->url, "redis://127.0.0.1:%d", f->srv.port);
    f->vt = START_NS;
    proc_args_t args = {f->url, on_failure};
    rl_test_procs_start(&f->procs, NODES, proc_main, &args);
    return f;
}

static reply_t node_do(fleet_t *f, int i, int op, int key, uint32_t n, uint32_t seed)
{
    cmd_t k = {op, key, n, seed, f->vt};
    rl_test_put(f->procs.to[i], &k, sizeof k);
    reply_t o;
    rl_test_get(f->procs.from[i], &o, sizeof o);
    ck_assert_uint_eq(o.bad, 0);
    f->last[i] = o;
    return o;
}

/* One round on every live node at the next virtual time; the nodes whose
 * round reached Redis. */
static int fleet_round(fleet_t *f)
{
    f->vt += (uint64_t)INTERVAL_MS * 1000000u;
    int ok = 0;
    for (int i = 0; i < NODES; i++)
        if (f->procs.pid[i] > 0)
            ok += node_do(f, i, OP_ROUND, 0, 0, 0).rc == 0;
    return ok;
}

/* Rounds until every live node's reaches Redis (the first connect and
 * script loads, or a reconnect, run on real timers: bounded waits). */
static void fleet_connect(fleet_t *f, int live)
{
    for (int tries = 0; tries < 300; tries++) {
        if (fleet_round(f) == live)
            return;
        rl_test_sleep_ms(50);
    }
    ck_abort_msg("the nodes did not reach Redis");
}

static uint32_t held_sum(const fleet_t *f, int key)
{
    uint32_t s = 0;
    for (int i = 0; i < NODES; i++)
        if (f->procs.pid[i] > 0)
            s += f->last[i].held[key];
    return s;
}

/* The fields of Redis's lease hashes named after node i (its incarnation
 * starts with its node_id). */
static int node_fields(const fleet_t *f, int i)
{
    redisContext *r = rl_test_redis_client(f->srv.port);
    redisReply *keys = redisCommand(r, "KEYS {ifg:f1:db}:k:*");
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    char prefix[16];
    snprintf(prefix, sizeof prefix, "ifg%d-", i);
    int n = 0;
    for (size_t k = 0; k < keys->elements; k++) {
        redisReply *h = redisCommand(r, "HKEYS %s", keys->element[k]->str);
        for (size_t j = 0; j < h->elements; j++)
            n += strncmp(h->element[j]->str, prefix, strlen(prefix)) == 0;
        freeReplyObject(h);
    }
    freeReplyObject(keys);
    rl_test_release(r);
    return n;
}

/* Round, then each live node's work, the bound checked after each node's. */
static void fleet_step(fleet_t *f, uint32_t seed, uint32_t *peak)
{
    ck_assert_int_eq(fleet_round(f), NODES);
    for (int i = 0; i < NODES; i++) {
        node_do(f, i, OP_WORK, 0, 6, seed * 7919u + (uint32_t)i * 104729u + 1u);
        for (int k = 0; k < KEYS; k++) {
            uint32_t s = held_sum(f, k);
            ck_assert_msg(s <= MAX, "key %d: the fleet holds %u permits, max %d", k, s, MAX);
            if (s > *peak)
                *peak = s;
        }
    }
}

START_TEST(fleet_holds_at_most_max)
{
    if (rl_test_redis_skipped())
        return;
    fleet_t *f = fleet_start("closed");
    for (int i = 0; i < NODES; i++)
        node_do(f, i, OP_WORK, 0, 0, 0);
    fleet_connect(f, NODES);
    uint32_t peak = 0, admitted = 0;
    for (uint32_t step = 0; step < 150; step++) {
        fleet_step(f, step, &peak);
        for (int i = 0; i < NODES; i++)
            admitted += f->last[i].admitted;
    }
    /* The test could fail: the fleet reached the cap, and admitted many
     * times it over the run. */
    ck_assert_uint_ge(peak, MAX - 1);
    ck_assert_uint_ge(admitted, 20 * MAX);
}
END_TEST

/* Node 0 holds the whole of key 0; the others want it too. */
static void node0_takes_all(fleet_t *f)
{
    for (int i = 0; i < NODES; i++)
        node_do(f, i, OP_WORK, 0, 0, 0);
    fleet_connect(f, NODES);
    for (int r = 0; r < 12 && f->last[0].held[0] < MAX; r++) {
        ck_assert_int_eq(fleet_round(f), NODES);
        node_do(f, 0, OP_GRAB, 0, MAX, 0);
    }
    ck_assert_uint_eq(f->last[0].held[0], MAX);
    for (int i = 1; i < NODES; i++)
        ck_assert_uint_eq(node_do(f, i, OP_GRAB, 0, MAX, 0).admitted, 0);
}

START_TEST(a_killed_holder_returns_its_block_within_a_lease)
{
    if (rl_test_redis_skipped())
        return;
    fleet_t *f = fleet_start("closed");
    node0_takes_all(f);
    ck_assert_int_gt(node_fields(f, 0), 0);
    rl_test_procs_kill(&f->procs, 0);
    /* Its last report was the round before: its block lives one lease
     * (2 rounds) from then. */
    int rounds = 0;
    uint32_t back = 0;
    while (back == 0 && rounds < 6) {
        ck_assert_int_eq(fleet_round(f), NODES - 1);
        rounds++;
        for (int i = 1; i < NODES; i++)
            node_do(f, i, OP_GRAB, 0, MAX, 0);
        back = held_sum(f, 0);
        ck_assert_uint_le(back, MAX);
    }
    ck_assert_int_le(rounds, 2);
    ck_assert_int_eq(node_fields(f, 0), 0);
    /* And the survivors take all of it over in a few more rounds. */
    for (int r = 0; r < 6 && held_sum(f, 0) < MAX; r++) {
        ck_assert_int_eq(fleet_round(f), NODES - 1);
        for (int i = 1; i < NODES; i++)
            node_do(f, i, OP_GRAB, 0, MAX, 0);
        ck_assert_uint_le(held_sum(f, 0), MAX);
    }
    ck_assert_uint_eq(held_sum(f, 0), MAX);
    printf("inflight_global: a killed holder's block came back in %d round(s) of %d ms\n",
           rounds, INTERVAL_MS);
}
END_TEST

/* Redis killed with every node holding 2 of key 0; what each on_failure
 * admits once the lease is gone; Redis back empty. `admit` is what one
 * node may hold by on_failure without a lease. */
static void outage(const char *on_failure, uint32_t admit)
{
    fleet_t *f = fleet_start(on_failure);
    for (int i = 0; i < NODES; i++)
        node_do(f, i, OP_WORK, 0, 0, 0);
    fleet_connect(f, NODES);
    for (int r = 0; r < 12; r++) {
        ck_assert_int_eq(fleet_round(f), NODES);
        for (int i = 0; i < NODES; i++)
            if (f->last[i].held[0] < 2)
                node_do(f, i, OP_GRAB, 0, 2 - f->last[i].held[0], 0);
    }
    ck_assert_uint_eq(held_sum(f, 0), 2 * NODES);
    rl_test_redis_kill(&f->srv);
    /* Two rounds that fail: the lease (3/4 of 2 rounds after the last
     * round that renewed it) is gone. */
    ck_assert_int_eq(fleet_round(f), 0);
    ck_assert_int_eq(fleet_round(f), 0);
    for (int i = 0; i < NODES; i++) {
        uint32_t before = f->last[i].held[0];
        reply_t o = node_do(f, i, OP_GRAB, 0, MAX, 0);
        uint32_t expect = admit > before ? admit - before : 0;
        ck_assert_msg(o.admitted == expect, "on_failure=%s: node %d admitted %u, expected %u",
                      on_failure, i, o.admitted, expect);
    }
    /* The bound's exception: each cut-off node holds at most what it held
     * when cut off or on_failure's cap, whichever is more. */
    uint32_t per = admit > 2 ? admit : 2;
    ck_assert_uint_le(held_sum(f, 0), NODES * per);
    char err[256];
    ck_assert_msg(rl_test_redis_restart(&f->srv, err, sizeof err) == 0, "%s", err);
    fleet_connect(f, NODES);
    /* Back on an empty server: the excess is released, and from then on
     * the bound holds again. */
    for (int i = 0; i < NODES; i++)
        node_do(f, i, OP_DROP, 0, 0, 0);
    uint32_t peak = 0;
    for (uint32_t step = 0; step < 40; step++)
        fleet_step(f, step + 1000u, &peak);
    ck_assert_uint_ge(peak, MAX / 2);
}

START_TEST(outage_closed_admits_nothing_new)
{
    if (rl_test_redis_skipped())
        return;
    outage("closed", 0);
}
END_TEST

START_TEST(outage_local_admits_a_third)
{
    if (rl_test_redis_skipped())
        return;
    outage("local", MAX / NODES);
}
END_TEST

START_TEST(outage_open_admits_max)
{
    if (rl_test_redis_skipped())
        return;
    outage("open", MAX);
}
END_TEST

START_TEST(close_hands_the_blocks_back)
{
    if (rl_test_redis_skipped())
        return;
    fleet_t *f = fleet_start("closed");
    node0_takes_all(f);
    ck_assert_int_gt(node_fields(f, 0), 0);
    cmd_t k = {OP_CLOSE, 0, 0, 0, f->vt};
    rl_test_put(f->procs.to[0], &k, sizeof k);
    reply_t o;
    rl_test_get(f->procs.from[0], &o, sizeof o);
    rl_test_procs_reap(&f->procs, 0);
    ck_assert_int_eq(node_fields(f, 0), 0);
    /* At once, not a lease later: the next round hands it out. */
    ck_assert_int_eq(fleet_round(f), NODES - 1);
    for (int i = 1; i < NODES; i++)
        node_do(f, i, OP_GRAB, 0, MAX, 0);
    ck_assert_uint_gt(held_sum(f, 0), 0);
}
END_TEST

static void stop_server(void *srv)
{
    rl_test_redis_stop(srv);
    free(srv);
}

typedef struct race {
    rl_t *rl;
    int limit;
    _Atomic uint32_t held;   /* the model: permits admitted and not yet released */
    _Atomic uint32_t peak;
    _Atomic uint32_t over;   /* admissions the model saw past the block */
    _Atomic uint64_t allowed, denied;
    uint32_t block;
    pthread_barrier_t go;
} race_t;

static void *racer(void *p)
{
    race_t *r = p;
    pthread_barrier_wait(&r->go);
    for (int i = 0; i < 20000; i++) {
        rl_permit_t pm;
        int rc = rl_inflight_acquire(r->rl, r->limit, "hot", 3, RL_INFLIGHT_NO_CLASS, &pm, NULL);
        if (rc != RL_ALLOW) {
            atomic_fetch_add(&r->denied, 1);
            continue;
        }
        atomic_fetch_add(&r->allowed, 1);
        uint32_t now = atomic_fetch_add(&r->held, 1) + 1;
        if (now > r->block)
            atomic_fetch_add(&r->over, 1);
        uint32_t pk = atomic_load(&r->peak);
        while (now > pk && !atomic_compare_exchange_weak(&r->peak, &pk, now))
            ;
        if (i % 4 == 0)
            sched_yield(); /* held across a switch: the others meet a full block */
        atomic_fetch_sub(&r->held, 1); /* before the release: the model never lags it */
        if (rl_inflight_release(r->rl, &pm, RL_INFLIGHT_SUCCESS, 0) != 0)
            atomic_fetch_add(&r->over, 1000000);
    }
    return NULL;
}

/* One node on a private server, manual rounds on clk. */
static rl_t *lone_node(rl_test_clock_t *clk)
{
    rl_test_redis_t *srv = calloc(1, sizeof *srv);
    ck_assert_ptr_nonnull(srv);
    rl_test_hold(srv, stop_server);
    char err[256], url[64];
    ck_assert_msg(rl_test_redis_start(srv, err, sizeof err) == 0, "%s", err);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv->port);
    atomic_store(&clk->precise_ns, START_NS);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.node_id = "race";
    c.sync_interval_ms = INTERVAL_MS;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "ifr";
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

/* A manual round that reaches Redis (bounded retries while it connects). */
static void lone_round(rl_t *rl, rl_test_clock_t *clk)
{
    for (int tries = 0; tries < 300; tries++) {
        rl_test_clock_advance(clk, (uint64_t)INTERVAL_MS * 1000000u);
        if (rl__sync_step(rl->sync, atomic_load(&clk->precise_ns) / 1000000u) == 0)
            return;
        rl_test_sleep_ms(50);
    }
    ck_abort_msg("no round reached Redis");
}

/* A caller that takes and gives back one permit at a time, quickly: at a
 * round's instant it mostly holds none, and its block still follows the
 * most it held (1, and headroom), so it is never refused after warm-up. */
START_TEST(a_steady_caller_keeps_its_block)
{
    if (rl_test_redis_skipped())
        return;
    static rl_test_clock_t clk;
    rl_t *rl = lone_node(&clk);
    int id = rl_test_add(rl, "name=db kind=inflight max=16 mode=global");
    rl_permit_t p;
    for (int r = 0; r < 5; r++) {
        lone_round(rl, &clk);
        for (int i = 0; i < 50; i++)
            if (rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL) == RL_ALLOW)
                ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    }
    for (int r = 0; r < 20; r++) {
        lone_round(rl, &clk);
        for (int i = 0; i < 50; i++) {
            ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                             RL_ALLOW);
            ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
        }
    }
}
END_TEST

START_TEST(racing_threads_stay_within_the_block)
{
    if (rl_test_redis_skipped())
        return;
    static rl_test_clock_t clk;
    rl_t *rl = lone_node(&clk);
    int id = rl_test_add(rl, "name=db kind=inflight max=16 mode=global");
    /* A demand of 5 (held and denied), rounds until the node holds 5. Its
     * block is then the demand and its headroom (a quarter, rounded up,
     * and one more): 5 + 2 + 1 = 8 of max 16, until the next round, which
     * never comes (the clock stays, and the lease with it). */
    rl_permit_t held[9], pm;
    uint32_t got = 0;
    for (int tries = 0; tries < 300 && got < 5; tries++) {
        while (got < 5 && rl_inflight_acquire(rl, id, "hot", 3, RL_INFLIGHT_NO_CLASS, &held[got],
                                              NULL) == RL_ALLOW)
            got++;
        for (uint32_t i = got + 1; i < 5; i++) /* the deny above was the first */
            ck_assert_int_eq(rl_inflight_acquire(rl, id, "hot", 3, RL_INFLIGHT_NO_CLASS, &pm, NULL),
                             RL_DENY);
        if (got == 5)
            break;
        rl_test_clock_advance(&clk, (uint64_t)INTERVAL_MS * 1000000u);
        if (rl__sync_step(rl->sync, atomic_load(&clk.precise_ns) / 1000000u) != 0)
            rl_test_sleep_ms(50);
    }
    ck_assert_uint_eq(got, 5);
    for (; got < 8; got++)
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "hot", 3, RL_INFLIGHT_NO_CLASS, &held[got],
                                             NULL),
                         RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "hot", 3, RL_INFLIGHT_NO_CLASS, &pm, NULL),
                     RL_DENY); /* the block is 8, not max */
    /* Three stay held: the racers share the other five. */
    for (int i = 3; i < 8; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &held[i], RL_INFLIGHT_SUCCESS, 0), 0);
    static race_t r;
    memset(&r, 0, sizeof r);
    r.rl = rl;
    r.limit = id;
    r.block = 5;
    pthread_t th[8];
    ck_assert_int_eq(pthread_barrier_init(&r.go, NULL, 8), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, racer, &r), 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r.go);
    ck_assert_uint_eq(atomic_load(&r.over), 0);
    ck_assert_uint_le(atomic_load(&r.peak), 5);
    ck_assert_uint_gt(atomic_load(&r.allowed), 0);
    printf("inflight_global: 8 racers on 5 of a block of 8: %llu admitted, %llu denied, peak %u\n",
           (unsigned long long)atomic_load(&r.allowed), (unsigned long long)atomic_load(&r.denied),
           atomic_load(&r.peak));
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &held[i], RL_INFLIGHT_SUCCESS, 0), 0);
}
END_TEST

START_TEST(global_refuses_adaptive_and_partitions)
{
    rl_limit_t lim;
    char err[200];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a kind=inflight limit=adaptive mode=global", err,
                                    sizeof err),
                     RL_EMODE);
    ck_assert_ptr_nonnull(strstr(err, "mode=global"));
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a kind=inflight max=8 partitions=x:0.5 "
                                          "mode=global", err, sizeof err),
                     RL_EMODE);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a kind=inflight max=8 on_failure=open", err,
                                    sizeof err),
                     RL_ERANGE);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a kind=inflight max=8 mode=global on_failure=open",
                                    err, sizeof err),
                     0);
    ck_assert_int_eq(lim.mode, RL_MODE_GLOBAL);
    ck_assert_int_eq(lim.on_failure, RL_FAIL_OPEN);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inflight_global");
    TCase *tc = tcase_create("fleet");
    tcase_set_timeout(tc, 300);
    rl_test_redis_fixture(tc); /* the skip decision; each fleet starts its own */
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_test(tc, fleet_holds_at_most_max);
    tcase_add_test(tc, a_killed_holder_returns_its_block_within_a_lease);
    tcase_add_test(tc, outage_closed_admits_nothing_new);
    tcase_add_test(tc, outage_local_admits_a_third);
    tcase_add_test(tc, outage_open_admits_max);
    tcase_add_test(tc, close_hands_the_blocks_back);
    tcase_add_test(tc, racing_threads_stay_within_the_block);
    tcase_add_test(tc, a_steady_caller_keeps_its_block);
    suite_add_tcase(s, tc);
    TCase *spec = tcase_create("spec");
    tcase_add_test(spec, global_refuses_adaptive_and_partitions);
    suite_add_tcase(s, spec);
    return s;
}

int main(void) { return rl_test_run(suite()); }
