/* SPDX-License-Identifier: MIT */
/*
 * Exact local buckets under races: rl_limit_update racing checks, first
 * checks of a new key racing each other, lowering and restoring a burst,
 * and the 4-year refill edge. The clock is frozen through the clock hook
 * (or moved only by the test), so the bound the header states is exact:
 * with the clock frozen, a key admits at most the largest burst in force,
 * whatever the threads and updates do (ratelimit.h, rl_limit_update).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "instance.h"

static rl_test_clock_t frozen = {.precise_ns = UINT64_C(5000000000)};

/* Loop divisor: the thread checkers (helgrind, drd) and memcheck serialise
 * the racing threads and run them ~50x slower; RL_TEST_SCALE overrides. The
 * bounds asserted do not depend on the loop sizes. */
static int scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return atoi(e);
    return getenv("RL_VALGRIND") != NULL ? 16 : 1;
}

static void update(rl_t *rl, int id, const char *spec)
{
    rl_limit_t lim;
    char err[256] = "";
    int rc = rl_limit_parse(&lim, spec, err, sizeof err);
    ck_assert_msg(rc == 0, "rl_limit_parse(%s): %s", spec, err);
    rc = rl_limit_update(rl, id, &lim);
    ck_assert_msg(rc == 0, "rl_limit_update(%s): %s", spec, rl_err_name(rc));
}

static uint64_t drain(rl_t *rl, int id, const char *key)
{
    uint64_t n = 0;
    while (rl_check(rl, id, key, strlen(key), 1, NULL) == RL_ALLOW)
        n++;
    return n;
}

static uint64_t remaining(rl_t *rl, int id, const char *key)
{
    rl_decision_t d;
    rl_decision_init(&d);
    rl_check(rl, id, key, strlen(key), 0, &d);
    return d.remaining;
}

/* ------------------------------------------------ checkers on one key */

typedef struct spinner {
    rl_t *rl;
    int id;
    const char *key;
    _Atomic int *stop;
    _Atomic uint64_t *started;
    uint64_t admitted;
} spinner_t;

static void *spin_run(void *arg)
{
    spinner_t *s = arg;
    size_t len = strlen(s->key);
    /* relaxed: a flag and a counter between test threads, nothing published. */
    atomic_fetch_add_explicit(s->started, 1, memory_order_relaxed);
    while (!atomic_load_explicit(s->stop, memory_order_relaxed))
        s->admitted += rl_check(s->rl, s->id, s->key, len, 1, NULL) == RL_ALLOW;
    return NULL;
}

typedef struct spinners {
    pthread_t th[4];
    spinner_t s[4];
    _Atomic int stop;
    _Atomic uint64_t started;
    int n;
} spinners_t;

static void spinners_start(spinners_t *g, int n, rl_t *rl, int id, const char *key)
{
    g->n = n;
    atomic_init(&g->stop, 0);
    atomic_init(&g->started, 0);
    for (int i = 0; i < n; i++) {
        g->s[i] = (spinner_t){rl, id, key, &g->stop, &g->started, 0};
        ck_assert_int_eq(pthread_create(&g->th[i], NULL, spin_run, &g->s[i]), 0);
    }
    /* Every checker is running before the caller races it (no sleep: poll). */
    while (atomic_load(&g->started) < (uint64_t)n)
        sched_yield();
}

static uint64_t spinners_stop(spinners_t *g)
{
    atomic_store(&g->stop, 1);
    uint64_t sum = 0;
    for (int i = 0; i < g->n; i++) {
        pthread_join(g->th[i], NULL);
        sum += g->s[i].admitted;
    }
    return sum;
}

/* A drained key, then an update to a slower rate while checks race it: the
 * key's debt is 10 tokens at either rate, so nothing more is admitted. The
 * update used to publish 100/s before converting the key's 10 ms of debt
 * (10 tokens at 1000/s, 1 at 100/s): up to 9 slipped through. */
START_TEST(update_racing_checks_admits_nothing_more)
{
    for (int trial = 0; trial < 30; trial++) {
        rl_t *rl = rl_test_open(&frozen, 16384);
        int id = rl_test_add(rl, "name=u rate=1000/s burst=10 mode=local");
        ck_assert_uint_eq(drain(rl, id, "k"), 10);
        spinners_t g;
        spinners_start(&g, 3, rl, id, "k");
        update(rl, id, "name=u rate=100/s burst=10 mode=local");
        uint64_t extra = spinners_stop(&g);
        ck_assert_msg(extra == 0, "trial %d: %llu admitted after the update", trial,
                      (unsigned long long)extra);
        ck_assert_uint_eq(remaining(rl, id, "k"), 0);
        rl_close(rl);
    }
}
END_TEST

/* Flipping the rate 1000/s <-> 1/s under 4 checkers, clock frozen: the key
 * holds one debt in tokens through every conversion, so across all threads
 * and flips it admits at most the burst (10). It admitted thousands. */
START_TEST(rate_flips_under_checkers_admit_at_most_the_burst)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, "name=f rate=1000/s burst=10 mode=local");
    spinners_t g;
    spinners_start(&g, 4, rl, id, "k");
    for (int i = 0; i < 3000 / scale(); i++)
        update(rl, id, i % 2 == 0 ? "name=f rate=1/s burst=10 mode=local"
                                  : "name=f rate=1000/s burst=10 mode=local");
    uint64_t admitted = spinners_stop(&g);
    admitted += drain(rl, id, "k");
    ck_assert_uint_le(admitted, 10);
    ck_assert_uint_ge(admitted, 1);
    rl_close(rl);
}
END_TEST

/* One thread at a time, the model is exact: the debt in tokens survives any
 * sequence of rate changes, so drains between flips add up to the burst. */
START_TEST(rate_flips_one_thread_exact)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, "name=f rate=1000/s burst=10 mode=local");
    uint64_t admitted = 0;
    for (int i = 0; i < 200; i++) {
        if (i % 7 == 0)
            admitted += rl_check(rl, id, "k", 1, 1, NULL) == RL_ALLOW;
        update(rl, id, i % 2 == 0 ? "name=f rate=1/s burst=10 mode=local"
                                  : "name=f rate=3/m burst=10 mode=local");
    }
    admitted += drain(rl, id, "k");
    ck_assert_uint_eq(admitted, 10);
    rl_close(rl);
}
END_TEST

/* The header: an update keeps the tokens consumed. Take 7 of 10, lower the
 * burst to 5 (0 left: 7 are owed), restore 10: 3 left, not 5. */
START_TEST(lowering_then_restoring_a_burst_refills_nothing)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, "name=b rate=10/s burst=10 mode=local");
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    update(rl, id, "name=b rate=10/s burst=5 mode=local");
    ck_assert_uint_eq(remaining(rl, id, "k"), 0);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    update(rl, id, "name=b rate=10/s burst=10 mode=local");
    ck_assert_uint_eq(remaining(rl, id, "k"), 3);
    /* And the debt still pays off at the rate: 0.2 s later, 2 more. */
    rl_test_clock_t clk = {.precise_ns = UINT64_C(5000000000)};
    rl_t *r2 = rl_test_open(&clk, 64);
    int i2 = rl_test_add(r2, "name=b rate=10/s burst=10 mode=local");
    for (int i = 0; i < 7; i++)
        ck_assert_int_eq(rl_check(r2, i2, "k", 1, 1, NULL), RL_ALLOW);
    update(r2, i2, "name=b rate=10/s burst=5 mode=local");
    rl_test_clock_advance(&clk, 200000000);
    ck_assert_uint_eq(remaining(r2, i2, "k"), 0); /* owes 5 of a burst of 5 */
    update(r2, i2, "name=b rate=10/s burst=10 mode=local");
    ck_assert_uint_eq(remaining(r2, i2, "k"), 5);
    rl_close(r2);
    rl_close(rl);
}
END_TEST

/* burst 100 -> 10 -> 100, ten times, draining in between, clock frozen:
 * 100 in all (it admitted 1000), alone and with 4 threads racing. */
START_TEST(burst_cycles_admit_the_burst_once)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, "name=c rate=10/s burst=100 mode=local");
    uint64_t admitted = 0;
    for (int i = 0; i < 10; i++) {
        admitted += drain(rl, id, "k");
        update(rl, id, "name=c rate=10/s burst=10 mode=local");
        admitted += drain(rl, id, "k");
        update(rl, id, "name=c rate=10/s burst=100 mode=local");
    }
    admitted += drain(rl, id, "k");
    ck_assert_uint_eq(admitted, 100);

    /* Same T throughout, so no conversion and no stalled-check allowance:
     * exactly the burst, across threads. */
    int i2 = rl_test_add(rl, "name=c2 rate=10/s burst=100 mode=local");
    spinners_t g;
    spinners_start(&g, 4, rl, i2, "k");
    for (int i = 0; i < 400; i++)
        update(rl, i2, i % 2 == 0 ? "name=c2 rate=10/s burst=10 mode=local"
                                  : "name=c2 rate=10/s burst=100 mode=local");
    admitted = spinners_stop(&g) + drain(rl, i2, "k");
    ck_assert_uint_eq(admitted, 100);
    rl_close(rl);
}
END_TEST

/* ----------------------------------------- first checks of new keys */

#define NEWKEYS_FULL 200000

#define STEP 32 /* keys between two rendezvous of the threads */

typedef struct firsts {
    rl_t *rl;
    int id;
    int nthreads;
    int nkeys;
    _Atomic uint64_t *arrived; /* rendezvous: threads x steps passed */
    unsigned char *admitted;   /* per key */
} firsts_t;

static void *firsts_run(void *arg)
{
    firsts_t *f = arg;
    char key[32];
    for (int k = 0; k < f->nkeys; k++) {
        if (k % STEP == 0) {
            /* Keep the threads on the same few keys, so first checks of a
             * key overlap (a thread ahead would simply find the slot). */
            uint64_t want = (uint64_t)(k / STEP + 1) * (uint64_t)f->nthreads;
            /* relaxed: a rendezvous counter; nothing is published by it. */
            atomic_fetch_add_explicit(f->arrived, 1, memory_order_relaxed);
            while (atomic_load_explicit(f->arrived, memory_order_relaxed) < want)
                sched_yield();
        }
        int n = snprintf(key, sizeof key, "new:%d", k);
        f->admitted[k] = rl_check(f->rl, f->id, key, (size_t)n, 1, NULL) == RL_ALLOW;
    }
    return NULL;
}

/* 4 threads walk the same new keys in step, so first checks of a key race
 * (claims, duplicate slots, merges). A frozen clock and burst 1: each key
 * is admitted exactly once; burst 1000: every charge counts, whichever of
 * two duplicate slots it landed on (merging kept the larger debt, and lost
 * the other slot's charges). */
START_TEST(first_checks_of_a_new_key_count_once)
{
    enum { THREADS = 4 };
    int burst = _i == 0 ? 1 : 1000;
    const int nkeys = NEWKEYS_FULL / scale();
    rl_t *rl = rl_test_open(&frozen, (uint32_t)(nkeys + nkeys / 4));
    int id = rl_test_add(rl, burst == 1 ? "name=n rate=1/d burst=1 mode=local"
                                        : "name=n rate=1/d burst=1000 mode=local");
    _Atomic uint64_t arrived = 0;
    firsts_t f[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (firsts_t){rl, id, THREADS, nkeys, &arrived, calloc((size_t)nkeys, 1)};
        ck_assert_ptr_nonnull(f[i].admitted);
        pthread_create(&th[i], NULL, firsts_run, &f[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    int twice = 0, never = 0, lost = 0;
    char key[32];
    for (int k = 0; k < nkeys; k++) {
        int n = 0;
        for (int i = 0; i < THREADS; i++)
            n += f[i].admitted[k];
        twice += burst == 1 && n > 1;
        never += n == 0;
        if (burst > 1) {
            snprintf(key, sizeof key, "new:%d", k);
            lost += remaining(rl, id, key) != (uint64_t)(burst - THREADS);
        }
    }
    /* Every key had room: none was sent to the no-slot path (whose shared
     * bucket would admit a key a second time) by lost claim races. */
    rl_stats_t st;
    rl_stats_init(&st);
    rl_stats(rl, &st);
    ck_assert_msg(twice == 0 && never == 0 && lost == 0 && st.noslot == 0,
                  "%d keys admitted more than once, %d never, %d lost charges, %llu without a slot",
                  twice, never, lost, (unsigned long long)st.noslot);
    for (int i = 0; i < THREADS; i++)
        free(f[i].admitted);
    rl_close(rl);
}
END_TEST

/* The interleaving behind those double admissions, made deterministic: a
 * claimer B of key k is stalled between claiming its home slot and
 * publishing it; A's first check claims the next slot, publishes and is
 * admitted; then B publishes (a CAS from its claim, as claimers do) and C
 * checks: C found B's nearer slot, full, and was admitted too (burst 1).
 * Now A's claim kills B's, B's publish fails, B gives its claim up. */
START_TEST(stalled_claim_of_the_same_key_cannot_admit_again)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    int id = rl_test_add(rl, "name=s rate=1/d burst=1 mode=local");
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    rl_probe_t p;
    rl__probe_init(&p, &rl->table, &rl->kh, rl__keyhash(&rl->kh, "k", 1), rl__limit_ref(id),
                   ls->salt);
    rl_slot_t *b = &rl->table.slots[p.home];
    uint64_t claim = p.keybits | RL_CTRL_MAKE(0, 0, 0, RL_SLOT_CLAIMING);
    uint64_t empty = 0;
    ck_assert(atomic_compare_exchange_strong(&b->ctrl, &empty, claim));
    atomic_store(&b->id_lo, p.id.lo);
    atomic_store(&b->id_hi, p.id.hi);
    atomic_store(&b->tat, 0); /* full */

    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW); /* A */
    uint64_t c = claim;
    int published =
        atomic_compare_exchange_strong(&b->ctrl, &c, p.keybits | RL_CTRL_MAKE(0, 0, 0, RL_SLOT_LIVE));
    if (!published) /* killed: B gives its claim up */
        atomic_store(&b->ctrl, RL_CTRL_MAKE(0, 0, RL_CTRL_GEN(c) + 1, RL_SLOT_TOMB));
    ck_assert_msg(rl_check(rl, id, "k", 1, 1, NULL) == RL_DENY,
                  "C admitted again (B's claim %s)", published ? "published" : "given up");
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------- a model with time */

/* Random checks, clock steps and rate/burst updates on one key, against the
 * bound stated in ratelimit.h: over any prefix of the run, admitted <= the
 * largest burst in force + the tokens the rates in force refilled (exact,
 * in 128-bit rationals of the fixed-point clock). */
START_TEST(updates_with_time_keep_the_bound)
{
    static const struct {
        uint64_t count, period_ms, burst;
    } cfg[] = {{1000, 1000, 10}, {1, 1000, 10}, {100, 1000, 5}, {3, 60000, 40}, {7, 10, 3}};
    uint64_t seed = 42;
    for (int run = 0; run < 20; run++) {
        rl_test_clock_t clk = {.precise_ns = UINT64_C(5000000000)};
        rl_t *rl = rl_test_open(&clk, 64);
        int c = 0;
        char spec[128];
        snprintf(spec, sizeof spec, "name=m rate=%llu/%llums burst=%llu mode=local",
                 (unsigned long long)cfg[c].count, (unsigned long long)cfg[c].period_ms,
                 (unsigned long long)cfg[c].burst);
        int id = rl_test_add(rl, spec);
        uint64_t maxburst = cfg[c].burst, admitted = 0;
        /* Tokens refilled, exactly: sum of dt_ns * count / (period_ms * 1e6)
         * over a common denominator of 60000 ms * 1e6 (every period divides
         * 60000 ms), floor'd when compared. */
        unsigned __int128 refill_num = 0;
        const unsigned __int128 refill_den = (unsigned __int128)60000 * 1000000;
        for (int step = 0; step < 400; step++) {
            uint64_t r = next_u64(&seed);
            switch (r % 4) {
            case 0: { /* time passes */
                uint64_t dt = (r >> 8) % 3000000; /* < 3 ms */
                rl_test_clock_advance(&clk, dt);
                refill_num += (unsigned __int128)dt * cfg[c].count * (60000 / cfg[c].period_ms);
                break;
            }
            case 1: { /* an update */
                c = (int)((r >> 8) % (sizeof cfg / sizeof cfg[0]));
                snprintf(spec, sizeof spec, "name=m rate=%llu/%llums burst=%llu mode=local",
                         (unsigned long long)cfg[c].count, (unsigned long long)cfg[c].period_ms,
                         (unsigned long long)cfg[c].burst);
                update(rl, id, spec);
                if (cfg[c].burst > maxburst)
                    maxburst = cfg[c].burst;
                break;
            }
            default: { /* checks */
                uint32_t cost = 1 + (uint32_t)((r >> 8) % 3);
                if (cost > cfg[c].burst)
                    cost = 1;
                if (rl_check(rl, id, "k", 1, cost, NULL) == RL_ALLOW)
                    admitted += cost;
            }
            }
            uint64_t refill = (uint64_t)(refill_num / refill_den);
            ck_assert_msg(admitted <= maxburst + refill,
                          "run %d step %d: admitted %llu > burst %llu + refill %llu", run, step,
                          (unsigned long long)admitted, (unsigned long long)maxburst,
                          (unsigned long long)refill);
        }
        rl_close(rl);
    }
}
END_TEST

/* ------------------------------------------------------- the 4-year edge */

/* 97/d with burst 141717 refills in exactly 1461 days (4 x 365.25): the
 * documented limit is "at most 4 years", so it is accepted; one token more
 * is refused. The check used T rounded up, and refused the edge. */
START_TEST(refill_of_exactly_four_years_is_accepted)
{
    rl_t *rl = rl_test_open(&frozen, 64);
    rl_limit_t lim;
    char err[256] = "";
    ck_assert_int_eq(rl_limit_parse(&lim, "name=y rate=97/d burst=141717", err, sizeof err), 0);
    ck_assert_int_ge(rl_limit_add(rl, &lim), 0);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=y2 rate=97/d burst=141718", err, sizeof err),
                     RL_ERANGE);
    ck_assert_msg(strstr(err, "4 years") != NULL, "message: %s", err);
    rl_rate_t rate = {97, 86400000};
    rl_gcra_t g;
    ck_assert_int_eq(rl__gcra_from_rate(&g, &rate, 141717, "rate", err, sizeof err), 0);
    ck_assert_int_eq(rl__gcra_from_rate(&g, &rate, 141718, "rate", err, sizeof err), RL_ERANGE);
    /* and the longest-refill bucket works: it admits its burst, then denies */
    int id = rl_test_add(rl, "name=y3 rate=97/d burst=141717 mode=local");
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 141717, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exactness");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, update_racing_checks_admits_nothing_more);
    tcase_add_test(tc, rate_flips_under_checkers_admit_at_most_the_burst);
    tcase_add_test(tc, rate_flips_one_thread_exact);
    tcase_add_test(tc, lowering_then_restoring_a_burst_refills_nothing);
    tcase_add_test(tc, burst_cycles_admit_the_burst_once);
    tcase_add_loop_test(tc, first_checks_of_a_new_key_count_once, 0, 2);
    tcase_add_test(tc, stalled_claim_of_the_same_key_cannot_admit_again);
    tcase_add_test(tc, updates_with_time_keep_the_bound);
    tcase_add_test(tc, refill_of_exactly_four_years_is_accepted);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
