/* SPDX-License-Identifier: MIT */
/*
 * Hot keys' token leases (src/local/lease.h) against a model, the clock frozen
 * through the clock hook and moved only by the test:
 * - 2..8 threads on one hot key: admitted <= burst + rate x elapsed (no
 *   growth: a lease holds tokens already charged to the bucket) and
 *   >= min(offered, that) - stripes x batch (tokens leased, not yet handed
 *   out), with a harvest (rl_hotkeys) racing the checks; the counters then
 *   equal what was answered plus what the leases still hold, exactly;
 * - one thread: a hot key's first check leases a batch, a drain admits the
 *   burst exactly, a refund gives back exactly what it refunds;
 * - a synced hot key whose slot sync rounds harvest while it leases: each
 *   token counted once;
 * - checks that must not lease: cost > 1, a small burst, a rate under
 *   100,000/s, rl_check_multi, an rl_open_shared instance.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "sync/sync.h"
#include "local/shareword.h"
#include "local/lease.h"

static rl_test_clock_t frozen = {.precise_ns = UINT64_C(5000000000)};

/* The hot key's limit: a rate that leases (local/lease.h: 100,000/s or more). */
#define SPEC "name=h rate=1000000/s burst=4000 mode=local"
#define BURST 4000
#define RATE_MS 1000 /* tokens per millisecond */

static uint64_t batch(rl_t *rl)
{
    rl_gcra_t g = {.t_fp = UINT64_C(1000) << RL_FP_SHIFT, .tau_fp = 0, .burst = BURST};
    return rl__lease_batch(&rl->leases, &g);
}

/* Loop divisor under the thread checkers and memcheck (RL_TEST_SCALE
 * overrides); the bounds asserted do not depend on the loop sizes. */
static int scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return atoi(e);
    return getenv("RL_VALGRIND") != NULL ? 8 : 1;
}

static rl_slot_t *key_slot(rl_t *rl, int id, const char *key)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    ck_assert_ptr_nonnull(ls);
    rl_probe_t p;
    rl__probe_init(&p, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, strlen(key)),
                   rl__limit_ref(id), ls->salt);
    rl_slotref_t ref;
    ck_assert_int_eq(rl__table_find(&rl->table, &p, &ref), 1);
    return ref.slot;
}

/* Mark the key hot as rl_hotkeys does for a key over its hot= (hot/hot.c). */
static void mark_hot(rl_t *rl, int id, const char *key)
{
    /* relaxed: as hot/hot.c's marks; checks read the bit relaxed. */
    atomic_fetch_or_explicit(&key_slot(rl, id, key)->share, RL_SHAREWORD_HOT,
                             memory_order_relaxed);
}

/* Tokens the key's leases hold now (no check running). */
static uint64_t leased(rl_t *rl, int id, const char *key)
{
    rl_slot_t *s = key_slot(rl, id, key);
    size_t i = (size_t)(s - rl->table.slots);
    /* relaxed: the checkers were joined. */
    uint64_t me = rl__lease_owner(i, atomic_load_explicit(&s->ctrl, memory_order_relaxed));
    uint64_t n = 0;
    for (unsigned k = 0; k < rl->leases.stripes; k++) {
        uint64_t w = atomic_load_explicit(rl__lease_line(&rl->leases, i, k), memory_order_relaxed);
        if (RL_LEASE_OWNER(w) == me)
            n += RL_LEASE_TOK(w);
    }
    return n;
}

static rl_stats_t stats(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st;
}

static uint64_t remaining(rl_t *rl, int id, const char *key)
{
    rl_decision_t d;
    rl_decision_init(&d);
    rl_check(rl, id, key, strlen(key), 0, &d);
    return d.remaining;
}

static uint64_t drain(rl_t *rl, int id, const char *key)
{
    uint64_t n = 0;
    while (rl_check(rl, id, key, strlen(key), 1, NULL) == RL_ALLOW)
        n++;
    return n;
}

/* ------------------------------------------- threads on one hot key */

typedef struct checker {
    pthread_t th;
    rl_t *rl;
    int id;
    uint64_t n, admitted;
    _Atomic int *go;
} checker_t;

static void *checker_run(void *arg)
{
    checker_t *c = arg;
    /* relaxed: a start flag between test threads; nothing is published. */
    while (!atomic_load_explicit(c->go, memory_order_relaxed))
        sched_yield();
    for (uint64_t i = 0; i < c->n; i++)
        c->admitted += rl_check(c->rl, c->id, "hot", 3, 1, NULL) == RL_ALLOW;
    return NULL;
}

#define ROUNDS 4

/* _i threads (2..8) race one hot key in ROUNDS rounds, the clock advanced
 * one millisecond between rounds; each round offers twice what the bucket can
 * pay, and a harvest (rl_hotkeys folds and zeroes the slot's counters, as
 * the sync thread's harvest does; it also drops the mark of a limit with
 * no hot=, which the test sets again) races the checkers. */
START_TEST(threads_on_a_hot_key_keep_the_bounds)
{
    const int nth = _i;
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, SPEC);
    ck_assert_ptr_nonnull(rl->leases.line);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW); /* its slot */
    mark_hot(rl, id, "hot");
    const uint64_t b = batch(rl);
    ck_assert_uint_ge(b, 2);
    const uint64_t slack = rl->leases.stripes * b;
    /* the mark is in force: this check leases a batch */
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(stats(rl).admitted, 1 + b);
    uint64_t admitted = 2, offered = 2, elapsed_ms = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t cap = BURST + RATE_MS * elapsed_ms; /* what the bucket paid, at most */
        uint64_t want = 2 * (r == 0 ? BURST : RATE_MS) / (uint64_t)scale();
        checker_t c[8];
        _Atomic int go = 0;
        for (int t = 0; t < nth; t++) {
            c[t] = (checker_t){.rl = rl, .id = id, .n = want / (uint64_t)nth + 1, .go = &go};
            ck_assert_int_eq(pthread_create(&c[t].th, NULL, checker_run, &c[t]), 0);
        }
        /* relaxed: as in checker_run. */
        atomic_store_explicit(&go, 1, memory_order_relaxed);
        rl_hotkey_t hk[2];
        rl_hotkey_init(&hk[0]);
        rl_hotkey_init(&hk[1]);
        ck_assert_int_ge(rl_hotkeys(rl, id, hk, 2), 0);
        mark_hot(rl, id, "hot");
        for (int t = 0; t < nth; t++) {
            pthread_join(c[t].th, NULL);
            admitted += c[t].admitted;
            offered += c[t].n;
        }
        ck_assert_msg(admitted <= cap,
                      "%d threads, round %d: admitted %llu > burst + rate x elapsed = %llu",
                      nth, r, (unsigned long long)admitted, (unsigned long long)cap);
        uint64_t low = (offered < cap ? offered : cap) - slack;
        ck_assert_msg(admitted >= low,
                      "%d threads, round %d: admitted %llu < %llu (min(offered %llu, %llu) - "
                      "stripes x batch %llu)",
                      nth, r, (unsigned long long)admitted, (unsigned long long)low,
                      (unsigned long long)offered, (unsigned long long)cap,
                      (unsigned long long)slack);
        /* Counted once each: answered, plus leased tokens not yet handed out. */
        rl_stats_t st = stats(rl);
        uint64_t held = leased(rl, id, "hot");
        ck_assert_uint_le(held, slack);
        ck_assert_uint_eq(st.admitted, admitted + held);
        ck_assert_uint_eq(st.denied, offered - admitted);
        rl_test_clock_advance(&frozen, UINT64_C(1000000));
        elapsed_ms++;
    }
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------------- one thread */

/* The first check of a hot key takes a batch from the bucket: one token
 * for itself, the rest leased and counted admitted with it; the next
 * checks leave the bucket alone. Drained, the key admitted its burst
 * exactly (a deny takes what another CPU's lease holds first), and its
 * counters say so. */
START_TEST(one_thread_leases_a_batch_and_drains_the_burst)
{
    /* On one CPU, so the checks below find the lease the first one made
     * (the case runs in its own process). */
    cpu_set_t set, was;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    was = set;
    int cpu = 0;
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set))
        cpu++;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ck_assert_int_eq(sched_setaffinity(0, sizeof set, &set), 0);
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, SPEC);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    mark_hot(rl, id, "hot");
    const uint64_t b = batch(rl);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "hot"), BURST - 1 - b);
    ck_assert_uint_eq(leased(rl, id, "hot"), b - 1);
    ck_assert_uint_eq(stats(rl).admitted, 1 + b);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "hot"), BURST - 1 - b);
    ck_assert_uint_eq(stats(rl).admitted, 1 + b);
    ck_assert_uint_eq(3 + drain(rl, id, "hot"), BURST);
    ck_assert_uint_eq(leased(rl, id, "hot"), 0);
    rl_stats_t st = stats(rl);
    ck_assert_uint_eq(st.admitted, BURST);
    ck_assert_uint_eq(st.denied, 1);
    /* a decision on a hot key says so */
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, &d), RL_DENY);
    ck_assert_uint_ne(d.flags & RL_FLAG_HOT, 0);
    rl_close(rl);
    /* CK_FORK=no (valgrind) runs the next cases in this process */
    ck_assert_int_eq(sched_setaffinity(0, sizeof was, &was), 0);
}
END_TEST

/* A refund on a hot key goes to its bucket: exactly what it gives back is
 * admitted again, leases or not; the counts keep the request admitted. */
START_TEST(refund_on_a_hot_key_gives_back_exactly)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, SPEC);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    mark_hot(rl, id, "hot");
    ck_assert_uint_eq(1 + drain(rl, id, "hot"), BURST);
    ck_assert_int_eq(rl_refund(rl, id, "hot", 3, 5), 0);
    ck_assert_uint_eq(stats(rl).admitted, BURST);
    ck_assert_uint_eq(drain(rl, id, "hot"), 5);
    /* a whole batch back: it is leased again, and admitted once */
    ck_assert_int_eq(rl_refund(rl, id, "hot", 3, 200), 0);
    ck_assert_uint_eq(drain(rl, id, "hot"), 200);
    ck_assert_uint_eq(stats(rl).admitted, BURST + 205);
    ck_assert_uint_eq(leased(rl, id, "hot"), 0);
    rl_close(rl);
}
END_TEST

/* What never leases: a check of cost > 1, a key whose burst is too small
 * for a batch, one whose rate is under 100,000/s, rl_check_multi (its undo
 * refunds the bucket). Each charges the bucket word as any key's check:
 * the counters follow the answers. */
START_TEST(checks_that_do_not_lease)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, SPEC);
    int small = rl_test_add(rl, "name=s rate=1000000/s burst=10 mode=local");
    int slow = rl_test_add(rl, "name=l rate=99999/s burst=4000 mode=local");
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, small, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, slow, "hot", 3, 1, NULL), RL_ALLOW);
    mark_hot(rl, id, "hot");
    mark_hot(rl, small, "hot");
    mark_hot(rl, slow, "hot");
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 7, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "hot"), BURST - 8);
    rl_request_t req;
    rl_request_init(&req);
    req.limit = id;
    req.key = "hot";
    req.key_len = 3;
    ck_assert_int_eq(rl_check_multi(rl, &req, 1, sizeof req, NULL, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "hot"), BURST - 9);
    ck_assert_uint_eq(leased(rl, id, "hot"), 0);
    ck_assert_int_eq(rl_check(rl, slow, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, slow, "hot"), BURST - 2);
    ck_assert_uint_eq(leased(rl, slow, "hot"), 0);
    ck_assert_uint_eq(stats(rl).admitted, 6);
    ck_assert_uint_eq(1 + drain(rl, small, "hot"), 10);
    ck_assert_uint_eq(leased(rl, small, "hot"), 0);
    rl_close(rl);
}
END_TEST

/* Two hot keys whose slots share a lease group: a line one holds tokens
 * in is not taken from it; the other is charged as any key there. Each
 * drains its burst exactly, and the counts are the answers. */
START_TEST(hot_keys_sharing_a_group)
{
    /* room for the keys tried (a group is found in 64 tries on average) */
    rl_t *rl = rl_test_open(&frozen, 4096);
    int id = rl_test_add(rl, SPEC);
    char k[2][16];
    size_t g0 = 0;
    int found = 0;
    for (int n = 0; n < 1000 && found < 2; n++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", n);
        ck_assert_int_eq(rl_check(rl, id, key, strlen(key), 1, NULL), RL_ALLOW);
        size_t g = (size_t)(key_slot(rl, id, key) - rl->table.slots) & (RL_LEASE_GROUPS - 1);
        if (found == 0 || g == g0) {
            g0 = g;
            snprintf(k[found++], sizeof k[0], "%s", key);
        }
    }
    ck_assert_int_eq(found, 2);
    mark_hot(rl, id, k[0]);
    mark_hot(rl, id, k[1]);
    uint64_t before = stats(rl).admitted;
    ck_assert_int_eq(rl_check(rl, id, k[0], strlen(k[0]), 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(leased(rl, id, k[0]), batch(rl) - 1);
    /* k[1] on the same CPU: the line is k[0]'s; a batch is not stored */
    ck_assert_uint_eq(1 + drain(rl, id, k[1]), BURST);
    ck_assert_uint_eq(leased(rl, id, k[1]), 0);
    ck_assert_uint_eq(2 + drain(rl, id, k[0]), BURST);
    ck_assert_uint_eq(leased(rl, id, k[0]), 0);
    ck_assert_uint_eq(stats(rl).admitted - before, 2 * BURST - 2);
    rl_close(rl);
}
END_TEST

/* An rl_open_shared instance has no leases (hot/hot.c marks no key there, and
 * lease lines would have to live in the mapping): a key marked hot anyway
 * is charged on its bucket word, one token a check. */
START_TEST(shared_instance_does_not_lease)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_keys = 64;
    cfg.clock = rl_test_clock_fn;
    cfg.clock_ud = &frozen;
    rl_t *rl;
    ck_assert_int_eq(rl_open_shared(&rl, &cfg), 0);
    ck_assert_ptr_null(rl->leases.line);
    int id = rl_test_add(rl, SPEC);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    mark_hot(rl, id, "hot");
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "hot"), BURST - 2);
    ck_assert_uint_eq(stats(rl).admitted, 2);
    ck_assert_uint_eq(2 + drain(rl, id, "hot"), BURST);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------ a synced hot key */

/* One sync round at virtual time clk + 100 ms; the first may find the
 * script still loading: retried (bounded) until one reaches Redis. */
static void sync_round(rl_t *rl, rl_test_clock_t *clk)
{
    int ok = -1;
    for (int tries = 0; tries < 300 && ok != 0; tries++) {
        rl_test_clock_advance(clk, 100000000);
        ok = rl__sync_step(rl->sync, atomic_load(&clk->precise_ns) / 1000000);
        if (ok != 0) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_int_eq(ok, 0);
}

/* A synced hot key leasing on 4 threads while sync rounds harvest its slot
 * (manual rounds, virtual time; each round swaps the slot's counters, folds
 * them into the limit's totals and reports the same figure): rl_stats is
 * what the checks were answered plus what the leases still hold, each
 * token once: none harvested twice, none lost. */
START_TEST(synced_hot_key_reports_each_token_once)
{
    if (rl_test_redis_skipped())
        return;
    static rl_test_clock_t clk = {UINT64_C(5000000000000), 0};
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "lease";
    c.sync_interval_ms = 100;
    c.expected_nodes = 1;
    /* a round that misses its deadline on a loaded machine does not
     * degrade it (a degraded check decides by on_failure, never leases) */
    c.degrade_after_failures = 100;
    c.key_secret = "lease-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = "hl";
    c.clock = rl_test_clock_fn;
    c.clock_ud = &clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    int id = rl_test_add(rl, "name=gh rate=1000000/s burst=4000");
    /* Healthy first (a failed first round, the script loading, degrades
     * it; a degraded check decides by on_failure and never leases). */
    for (int tries = 0; tries < 100 && rl_test_health(rl) != RL_HEALTH_HEALTHY; tries++)
        sync_round(rl, &clk);
    ck_assert_int_eq(rl_test_health(rl), RL_HEALTH_HEALTHY);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    mark_hot(rl, id, "hot");
    /* before the first round the key runs at the pre-sync share (the whole
     * rate with one node expected): it leases */
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    ck_assert_uint_eq(stats(rl).admitted, 1 + batch(rl));
    uint64_t answered = 2;
    for (int r = 0; r < 6; r++) {
        checker_t ck[4];
        _Atomic int go = 0;
        for (int t = 0; t < 4; t++) {
            ck[t] = (checker_t){.rl = rl, .id = id, .n = 3000 / (uint64_t)scale(), .go = &go};
            ck_assert_int_eq(pthread_create(&ck[t].th, NULL, checker_run, &ck[t]), 0);
        }
        /* relaxed: as in checker_run. */
        atomic_store_explicit(&go, 1, memory_order_relaxed);
        sync_round(rl, &clk); /* harvests while the checkers run */
        for (int t = 0; t < 4; t++) {
            pthread_join(ck[t].th, NULL);
            answered += ck[t].admitted;
        }
        mark_hot(rl, id, "hot");
    }
    sync_round(rl, &clk);
    uint64_t held = leased(rl, id, "hot");
    rl_stats_t st = stats(rl);
    ck_assert_msg(st.admitted == answered + held, "%llu admitted for %llu answered + %llu leased",
                  (unsigned long long)st.admitted, (unsigned long long)answered,
                  (unsigned long long)held);
    ck_assert_uint_eq(st.degraded, 0);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, threads_on_a_hot_key_keep_the_bounds, 2, 9);
    tcase_add_test(tc, one_thread_leases_a_batch_and_drains_the_burst);
    tcase_add_test(tc, refund_on_a_hot_key_gives_back_exactly);
    tcase_add_test(tc, checks_that_do_not_lease);
    tcase_add_test(tc, hot_keys_sharing_a_group);
    tcase_add_test(tc, shared_instance_does_not_lease);
    suite_add_tcase(s, tc);
    TCase *rd = tcase_create("redis");
    rl_test_redis_fixture(rd);
    tcase_set_timeout(rd, 300);
    tcase_add_test(rd, synced_hot_key_reports_each_token_once);
    suite_add_tcase(s, rd);
    return s;
}

int main(void) { return rl_test_run(suite()); }
