/* SPDX-License-Identifier: MIT */
/*
 * Tiered mode against a real Redis: one ledger. Two instances with manual
 * sync rounds and a clock frozen through the clock hook drive one key from
 * several threads each; what their callers were told was admitted equals
 * what Redis holds for the key (the sync-reported total `a` plus what the
 * exact script charged, `xc`), round after round: nothing counted twice,
 * nothing lost. Near the limit every local admit is confirmed in Redis and
 * a local deny never reaches it; far from the limit no check does.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "redis/keys.h"
#include "exact/exact.h"
#include "sync/sync.h"

static const char secret[] = "tiered-test-secret-0123456789abcd";

/* A node with manual sync rounds on the shared frozen clock; a generous
 * exact deadline and one pool connection: a confirmation this test makes
 * is answered by Redis, never by on_failure (a degraded answer fails it). */
static rl_t *open_node(const char *node, uint32_t expected, rl_test_clock_t *clk)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.expected_nodes = expected;
    c.sync_interval_ms = 100;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.exact_timeout_ms = 10000;
    c.exact_pool_size = 1;
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

static rl_sync_counters_t sync_counters(rl_t *rl)
{
    rl_sync_counters_t c;
    rl__sync_counters(rl->sync, &c);
    return c;
}

static uint64_t redis_sent(rl_t *rl)
{
    rl_exact_counters_t c;
    rl__exact_counters(rl->exact, &c);
    return c.sent;
}

/* The exact thread is connected: an exact limit's peek is answered by Redis. */
static void wait_ready(rl_t *rl)
{
    int id = rl_test_add(rl, "name=ready rate=1/s mode=exact");
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, id, "warmup", 6, 0, &d);
        if ((d.flags & RL_FLAG_EXACT) && sync_counters(rl).connected == 1)
            return;
        ck_assert_msg(rl_test_now_ns() < until, "exact path or sync never came up");
        rl_test_poll_pause(i);
    }
}

/* A field of the key's hash in Redis (0 when absent); may be negative. */
static long long ledger_field(rl_t *rl, const char *limit, const char *key, const char *field)
{
    char name[200];
    rl__redis_key_name(&rl->kh, rl->key_prefix, limit, rl__keyhash(&rl->kh, key, strlen(key)),
                       name, sizeof name);
    redisContext *r = rl_test_redis_client(0);
    redisReply *rep = redisCommand(r, "HGET %s %s", name, field);
    ck_assert_ptr_nonnull(rep);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    rl_test_release(r);
    return v;
}

/* The key hash's PTTL in Redis, ms. */
static long long ledger_pttl(rl_t *rl, const char *limit, const char *key)
{
    char name[200];
    rl__redis_key_name(&rl->kh, rl->key_prefix, limit, rl__keyhash(&rl->kh, key, strlen(key)),
                       name, sizeof name);
    redisContext *r = rl_test_redis_client(0);
    redisReply *rep = redisCommand(r, "PTTL %s", name);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    rl_test_release(r);
    return v;
}

/* What the callers were told, by path. */
typedef struct tally {
    uint64_t local_allows;  /* decided by the local tier (not confirmed) */
    uint64_t exact_allows;  /* confirmed by Redis */
    uint64_t exact_denies;  /* admitted locally, denied by Redis */
    uint64_t local_denies;  /* denied by the local tier */
    uint64_t degraded;      /* answered by on_failure: must stay 0 */
} tally_t;

typedef struct driver {
    rl_t *rl;
    int id;
    unsigned checks;
    tally_t t;
} driver_t;

static void *drive(void *arg)
{
    driver_t *d = arg;
    for (unsigned i = 0; i < d->checks; i++) {
        rl_decision_t dec;
        rl_decision_init(&dec);
        int rc = rl_check(d->rl, d->id, "k", 1, 1, &dec);
        if (dec.flags & RL_FLAG_DEGRADED)
            d->t.degraded++;
        else if (dec.flags & RL_FLAG_EXACT)
            *(rc == RL_ALLOW ? &d->t.exact_allows : &d->t.exact_denies) += 1;
        else
            *(rc == RL_ALLOW ? &d->t.local_allows : &d->t.local_denies) += 1;
    }
    return NULL;
}

enum { NODES = 2, THREADS = 3 };

/* THREADS threads on each node, `checks` each, the clock frozen. */
static void phase(rl_t **nodes, const int *ids, unsigned checks, tally_t *sum)
{
    driver_t d[NODES * THREADS];
    pthread_t th[NODES * THREADS];
    for (int i = 0; i < NODES * THREADS; i++) {
        d[i] = (driver_t){nodes[i % NODES], ids[i % NODES], checks, {0, 0, 0, 0, 0}};
        ck_assert_int_eq(pthread_create(&th[i], NULL, drive, &d[i]), 0);
    }
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < NODES * THREADS; i++) {
        pthread_join(th[i], NULL);
        sum->local_allows += d[i].t.local_allows;
        sum->exact_allows += d[i].t.exact_allows;
        sum->exact_denies += d[i].t.exact_denies;
        sum->local_denies += d[i].t.local_denies;
        sum->degraded += d[i].t.degraded;
    }
}

/* One sync round on every node (Redis TIME: exact.lua uses it too). */
static void sync_all(rl_t **nodes)
{
    for (int i = 0; i < NODES; i++)
        ck_assert_int_eq(rl__sync_step(nodes[i]->sync, 0), 0);
}

/* Rounds until Redis's ledger holds `want` (every local admit reported;
 * a quiet key reports on a later round), then one more: it must not move. */
static void ledger_settles(rl_t **nodes, uint64_t want)
{
    long long got = -1;
    for (int round = 0; round < 40; round++) {
        sync_all(nodes);
        got = ledger_field(nodes[0], "t", "k", "a") + ledger_field(nodes[0], "t", "k", "xc");
        if (got >= (long long)want)
            break;
    }
    ck_assert_msg(got == (long long)want, "Redis's ledger %lld, callers admitted %llu", got,
                  (unsigned long long)want);
    sync_all(nodes);
    got = ledger_field(nodes[0], "t", "k", "a") + ledger_field(nodes[0], "t", "k", "xc");
    ck_assert_msg(got == (long long)want, "a settled ledger moved: %lld, callers admitted %llu",
                  got, (unsigned long long)want);
}

START_TEST(tiered_one_ledger)
{
    rl_test_redis_flushall();
    rl_test_clock_t clk;
    atomic_init(&clk.precise_ns, UINT64_C(3000000000000));
    clk.coarse_tick_ns = 0;
    rl_t *nodes[NODES] = {open_node("ta", NODES, &clk), open_node("tb", NODES, &clk)};
    int ids[NODES];
    for (int i = 0; i < NODES; i++) {
        wait_ready(nodes[i]);
        /* 1/m: Redis's bucket does not refill a token while the test runs;
         * the local tier refills only when the test moves the frozen clock. */
        ids[i] = rl_test_add(nodes[i], "name=t rate=1/m burst=100 mode=tiered");
    }
    uint64_t admitted = 0;
    tally_t s;

    /* Far from the limit: 2 x 3 x 5 checks of a 100-token burst, all
     * decided locally (the pre-sync share is 50 tokens a node), none in
     * Redis. */
    uint64_t sent0 = redis_sent(nodes[0]) + redis_sent(nodes[1]);
    phase(nodes, ids, 5, &s);
    ck_assert_uint_eq(s.local_allows, 30);
    ck_assert_uint_eq(redis_sent(nodes[0]) + redis_sent(nodes[1]), sent0);
    admitted += s.local_allows;
    ledger_settles(nodes, admitted);

    /* Up to 25 more a node, whatever the shares allow: still far (the
     * threshold is 20% of the burst and a token per live node, 22), still
     * no check in Redis, and the ledger follows. */
    for (int i = 0; i < NODES; i++)
        for (int k = 0; k < 15; k++) {
            rl_decision_t d;
            rl_decision_init(&d);
            admitted += rl_check(nodes[i], ids[i], "k", 1, 1, &d) == RL_ALLOW;
            ck_assert_uint_eq(d.flags & (RL_FLAG_EXACT | RL_FLAG_DEGRADED), 0);
        }
    ck_assert_uint_eq(redis_sent(nodes[0]) + redis_sent(nodes[1]), sent0);
    ledger_settles(nodes, admitted);
    /* Local tokens to the threshold, then under it: a batch at a time, a
     * round between (each round's shares split what is left, so a node's
     * local tokens shrink as the key nears its limit). */
    for (int batch = 0; ledger_field(nodes[0], "t", "k", "xn") >= 22; batch++) {
        ck_assert_msg(batch < 20, "the key never went under its threshold: %lld left",
                      ledger_field(nodes[0], "t", "k", "xn"));
        for (int i = 0; i < NODES; i++)
            for (int k = 0; k < 5; k++)
                admitted += rl_check(nodes[i], ids[i], "k", 1, 1, NULL) == RL_ALLOW;
        ck_assert_uint_eq(redis_sent(nodes[0]) + redis_sent(nodes[1]), sent0);
        ledger_settles(nodes, admitted);
    }
    /* The sync reports charged Redis's bucket each admit once (1/m: a token
     * may have been minted). */
    long long xn = ledger_field(nodes[0], "t", "k", "xn");
    ck_assert_int_ge(xn, 100 - (long long)admitted);
    ck_assert_int_le(xn, 100 - (long long)admitted + 1);
    ck_assert_int_lt(xn, 22);
    /* The bucket lives until it would be full again (80 tokens at 1/m:
     * 80 minutes; the report's TTL is two bursts' worth of time): a lost
     * bucket would be a full one. */
    ck_assert_int_gt(ledger_pttl(nodes[0], "t", "k"), 60LL * 60 * 1000);

    /* Near: every local admit goes to Redis and Redis decides; every local
     * deny stays here. The threads ask 2 x 3 x 50 times, more than the
     * nodes' local tokens: the rest is flagrant abuse, denied locally. */
    long long left = ledger_field(nodes[0], "t", "k", "xn");
    sent0 = redis_sent(nodes[0]) + redis_sent(nodes[1]);
    phase(nodes, ids, 50, &s);
    uint64_t sent = redis_sent(nodes[0]) + redis_sent(nodes[1]) - sent0;
    ck_assert_uint_eq(s.degraded, 0);
    ck_assert_uint_eq(s.local_allows, 0);
    ck_assert_uint_eq(sent, s.exact_allows + s.exact_denies);
    ck_assert_uint_ge(sent, 1);
    ck_assert_uint_lt(sent, 300);
    ck_assert_uint_eq(s.local_denies, 300 - sent);
    /* Redis admits what its bucket holds (1/m: a token may be minted
     * meanwhile), all of it when asked for more. */
    ck_assert_uint_le(s.exact_allows, (uint64_t)left + 1);
    ck_assert_uint_ge(s.exact_allows, sent < (uint64_t)left ? sent : (uint64_t)left);
    admitted += s.exact_allows;
    ledger_settles(nodes, admitted);

    /* The frozen clock moves 10 minutes a round: the local tier refills
     * (its shares of 1/m), Redis's bucket holds what TIME gave it. Whatever
     * each side decides, the ledger holds exactly what the callers were
     * told. */
    for (int round = 0; round < 3; round++) {
        rl_test_clock_advance(&clk, UINT64_C(600000000000));
        phase(nodes, ids, 40, &s);
        ck_assert_uint_eq(s.degraded, 0);
        admitted += s.exact_allows + s.local_allows;
        ledger_settles(nodes, admitted);
    }
    for (int i = 0; i < NODES; i++)
        rl_test_release(nodes[NODES - 1 - i]);
}
END_TEST

/* near=: the confirm threshold is that share of the burst (rounded up) plus
 * a token per live node, the default 20%. Four limits of one shape, driven
 * alike to the same fleet-wide remaining (80 of 100), differ only in near=:
 * a check confirms in Redis exactly when the model says the key is near;
 * at 80 left the default (20 + 2) and near=0.78 (78 + 2, not under 80)
 * stay local, near=0.79 and near=0.9 confirm. (Not 1: 100 is under
 * 100 + 2, near from the first check.) */
START_TEST(tiered_near_threshold)
{
    rl_test_redis_flushall();
    rl_test_clock_t clk;
    atomic_init(&clk.precise_ns, UINT64_C(3000000000000));
    clk.coarse_tick_ns = 0;
    rl_t *nodes[NODES] = {open_node("na", NODES, &clk), open_node("nb", NODES, &clk)};
    static const struct {
        const char *name, *near;
        uint64_t ppm;
    } lims[] = {
        {"n_default", "", 200000},
        {"n78", " near=0.78", 780000},
        {"n79", " near=0.79", 790000},
        {"n90", " near=0.9", 900000},
    };
    enum { NLIM = sizeof lims / sizeof lims[0] };
    int ids[NLIM][NODES];
    for (int i = 0; i < NODES; i++) {
        wait_ready(nodes[i]);
        for (int l = 0; l < NLIM; l++) {
            char spec[128];
            /* 1/h: Redis's bucket refills no whole token while the test
             * runs; the frozen clock refills no local one. */
            snprintf(spec, sizeof spec, "name=%s rate=1/h burst=100 mode=tiered%s",
                     lims[l].name, lims[l].near);
            ids[l][i] = rl_test_add(nodes[i], spec);
        }
    }
    uint64_t confirmed[NLIM];
    for (int l = 0; l < NLIM; l++) {
        /* 10 a node from the pre-sync share of 50: all local, none near
         * (100 is not under any threshold here). */
        uint64_t sent0 = redis_sent(nodes[0]) + redis_sent(nodes[1]);
        for (int i = 0; i < NODES; i++)
            for (int k = 0; k < 10; k++) {
                rl_decision_t d;
                rl_decision_init(&d);
                ck_assert_int_eq(rl_check(nodes[i], ids[l][i], "k", 1, 1, &d), RL_ALLOW);
                ck_assert_uint_eq(d.flags & (RL_FLAG_EXACT | RL_FLAG_DEGRADED), 0);
            }
        ck_assert_uint_eq(redis_sent(nodes[0]) + redis_sent(nodes[1]), sent0);
        /* Both nodes' admits reported, then a round that hands out shares
         * (and NEAR) from that ledger. */
        long long got = -1;
        for (int round = 0; round < 40 && got != 20; round++) {
            sync_all(nodes);
            got = ledger_field(nodes[0], lims[l].name, "k", "a") +
                  ledger_field(nodes[0], lims[l].name, "k", "xc");
        }
        ck_assert_int_eq(got, 20);
        sync_all(nodes);
        long long left = ledger_field(nodes[0], lims[l].name, "k", "xn");
        ck_assert_int_eq(left, 80);
        /* The model: near while remaining < ceil(burst x near) + nodes. */
        uint64_t below = (100 * lims[l].ppm + 999999) / 1000000 + NODES;
        int near = (uint64_t)left < below;
        sent0 = redis_sent(nodes[0]) + redis_sent(nodes[1]);
        for (int i = 0; i < NODES; i++) {
            rl_decision_t d;
            rl_decision_init(&d);
            int rc = rl_check(nodes[i], ids[l][i], "k", 1, 1, &d);
            ck_assert_uint_eq(d.flags & RL_FLAG_DEGRADED, 0);
            ck_assert_msg(!!(d.flags & RL_FLAG_EXACT) == near,
                          "%s node %d: %lld left, threshold %llu: confirmed %d", lims[l].name, i, left,
                          (unsigned long long)below, !!(d.flags & RL_FLAG_EXACT));
            /* 80 left, 30 of a node's share: whoever decides, it admits. */
            ck_assert_int_eq(rc, RL_ALLOW);
        }
        confirmed[l] = redis_sent(nodes[0]) + redis_sent(nodes[1]) - sent0;
        ck_assert_uint_eq(confirmed[l], near ? NODES : 0);
    }
    /* A larger near= confirms earlier than the default: at the same
     * remaining, more of its checks reached Redis. */
    ck_assert_uint_eq(confirmed[0], 0);
    ck_assert_uint_eq(confirmed[1], 0);
    ck_assert_uint_eq(confirmed[2], NODES);
    ck_assert_uint_eq(confirmed[3], NODES);
    for (int i = 0; i < NODES; i++)
        rl_test_release(nodes[NODES - 1 - i]);
}
END_TEST

/* rl_check_async of a tiered key: inline far from the limit and for a
 * local deny, RL_PENDING for a local admit near it, the callback once, on
 * the exact thread, with Redis's verdict. */
static _Atomic unsigned cb_calls, cb_exact_allows;

static void on_async(void *ud, int rc, const rl_decision_t *d)
{
    (void)ud;
    if (rc == RL_ALLOW && d != NULL && (d->flags & RL_FLAG_EXACT))
        atomic_fetch_add(&cb_exact_allows, 1);
    atomic_fetch_add(&cb_calls, 1);
}

START_TEST(tiered_async_pending_near_limit)
{
    rl_test_redis_flushall();
    rl_test_clock_t clk;
    atomic_init(&clk.precise_ns, UINT64_C(3000000000000));
    clk.coarse_tick_ns = 0;
    rl_t *n = open_node("solo", 1, &clk);
    wait_ready(n);
    /* One node: the threshold is 2 (20% of 10) plus 1 (a live node). */
    int id = rl_test_add(n, "name=a rate=1/m burst=10 mode=tiered");
    for (int k = 0; k < 8; k++)
        ck_assert_int_eq(rl_check_async(n, id, "k", 1, 1, on_async, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check_async(n, id, "far", 3, 1, on_async, NULL), RL_ALLOW);
    for (int round = 0; round < 40 && ledger_field(n, "a", "k", "a") < 8; round++)
        ck_assert_int_eq(rl__sync_step(n->sync, 0), 0);
    ck_assert_int_eq(ledger_field(n, "a", "k", "a"), 8);
    ck_assert_int_eq(ledger_field(n, "a", "k", "xn"), 2);
    /* Near: the local tier's two tokens go to Redis, which has two. */
    uint64_t sent0 = redis_sent(n);
    unsigned pending = 0;
    for (int k = 0; k < 10; k++) {
        int rc = rl_check_async(n, id, "k", 1, 1, on_async, NULL);
        ck_assert(rc == RL_PENDING || rc == RL_DENY);
        pending += rc == RL_PENDING;
    }
    ck_assert_uint_ge(pending, 1);
    ck_assert_uint_le(pending, 2);
    WAIT_FOR(atomic_load(&cb_calls) == pending);
    ck_assert_uint_eq(atomic_load(&cb_exact_allows), pending);
    ck_assert_uint_eq(redis_sent(n) - sent0, pending);
    ck_assert_int_eq(ledger_field(n, "a", "k", "xc"), (long long)pending);
    /* Far keys stay inline. */
    ck_assert_int_eq(rl_check_async(n, id, "far", 3, 1, on_async, NULL), RL_ALLOW);
    ck_assert_uint_eq(redis_sent(n) - sent0, pending);
    rl_test_release(n);
}
END_TEST

/* A tiered limit's Redis bucket counts in token-microseconds as exact's
 * does: the same 2^53 bound, the same error, naming the mode. */
START_TEST(tiered_limit_range)
{
    rl_limit_t lim;
    char err[200];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=big rate=1000000/d burst=1000000 mode=tiered",
                                    err, sizeof err),
                     RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "mode=tiered"));
    ck_assert_int_eq(rl_limit_parse(&lim, "name=big rate=1000/d burst=1000 mode=tiered", err,
                                    sizeof err),
                     0);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=big rate=1000000/d burst=1000000 mode=global",
                                    err, sizeof err),
                     0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tiered");
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tiered_one_ledger);
    tcase_add_test(tc, tiered_async_pending_near_limit);
    tcase_add_test(tc, tiered_near_threshold);
    suite_add_tcase(s, tc);
    TCase *uc = tcase_create("unit");
    tcase_add_test(uc, tiered_limit_range);
    suite_add_tcase(s, uc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
