/* SPDX-License-Identifier: MIT */
/*
 * Reservations (rl_reserve, rl_settle, rl_release, expiry) on local limits,
 * with the clock frozen or stepped through the hook: against a GCRA model
 * of the bucket (decisions, debt paid back to the instant), the overshoot
 * bound the header states, 8 racing threads (no token created or lost),
 * the table's generations (double settle, another instance's handle) and
 * its bound (RL_EFULL, reuse after expiry), and every bad input.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define T_NS UINT64_C(1000000) /* rate=1000/s: one token a millisecond */
#define BURST 100

static rl_test_clock_t clk;

static int log_lines;
static void count_log(void *ud, int32_t level, const char *msg)
{
    (void)ud;
    if (level == RL_LOG_WARN && strstr(msg, "within its ttl") != NULL)
        __atomic_fetch_add(&log_lines, 1, __ATOMIC_RELAXED);
}

static rl_t *open_n(uint32_t max_reservations)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = rl_test_clock_fn;
    cfg.clock_ud = &clk;
    cfg.max_reservations = max_reservations;
    cfg.log = count_log;
    rl_t *rl = NULL;
    int rc = rl_open(&rl, &cfg);
    ck_assert_msg(rc == 0, "rl_open: %s", rl_strerror(rc));
    return rl_test_hold(rl, rl_test_close_fn);
}

static void reset_clock(void)
{
    atomic_store(&clk.precise_ns, UINT64_C(1000000000000));
    clk.coarse_tick_ns = 0;
    log_lines = 0;
}

static int add_limit(rl_t *rl)
{
    return rl_test_add(rl, "name=tok rate=1000/s burst=100 mode=local");
}

static uint64_t remaining(rl_t *rl, int id, const char *key)
{
    rl_decision_t d;
    rl_decision_init(&d);
    rl_check(rl, id, key, strlen(key), 0, &d);
    return d.remaining;
}

static int reserve(rl_t *rl, int id, const char *key, uint32_t est, rl_reservation_t *r)
{
    rl_reservation_init(r);
    return rl_reserve(rl, id, key, strlen(key), est, 1000, r, NULL);
}

/* Settle up, down, even and release move the bucket by the difference. */
START_TEST(settle_moves_the_difference)
{
    reset_clock();
    rl_t *rl = open_n(16);
    int id = add_limit(rl);
    rl_reservation_t r;
    rl_decision_t d;
    rl_decision_init(&d);
    rl_reservation_init(&r);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 10, 1000, &r, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 90);
    ck_assert_int_eq(r.estimate, 10);
    ck_assert_int_eq(r.limit, id);
    ck_assert_uint_eq(r.ready_in_ms, 0);
    ck_assert_int_eq(rl_settle(rl, &r, 4), 0);
    ck_assert_uint_eq(remaining(rl, id, "k"), 96);
    ck_assert_int_eq(reserve(rl, id, "k", 10, &r), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &r, 30), 0);
    ck_assert_uint_eq(remaining(rl, id, "k"), 66);
    ck_assert_int_eq(reserve(rl, id, "k", 20, &r), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &r, 20), 0);
    ck_assert_uint_eq(remaining(rl, id, "k"), 46);
    ck_assert_int_eq(reserve(rl, id, "k", 40, &r), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, id, "k"), 6);
    ck_assert_int_eq(rl_release(rl, &r), 0);
    ck_assert_uint_eq(remaining(rl, id, "k"), 46);
    /* the estimate is what is admitted: 47 would not fit */
    ck_assert_int_eq(reserve(rl, id, "k", 47, &r), RL_DENY);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.reserved, 4);
    ck_assert_uint_eq(s.denied, 1);
    ck_assert_uint_eq(s.settled_up, 1);
    ck_assert_uint_eq(s.settled_down, 1);
    ck_assert_uint_eq(s.settled_even, 1);
    ck_assert_uint_eq(s.released, 1);
    ck_assert_uint_eq(s.debt_tokens, 20);
    ck_assert_uint_eq(s.refund_tokens, 6 + 40);
    ck_assert_uint_eq(s.in_flight, 0);
    ck_assert_uint_eq(s.capacity, 16);
    rl_limit_stats_t ls;
    rl_limit_stats_init(&ls);
    ck_assert_int_eq(rl_limit_stats(rl, id, &ls), 0);
    ck_assert_uint_eq(ls.admitted, 4 + 0);
    ck_assert_uint_eq(ls.denied, 1);
}
END_TEST

/* A larger actual goes into debt past the burst: the key denies until
 * refill has paid it back, and admits at exactly that instant. */
START_TEST(debt_is_paid_back_exactly_by_refill)
{
    reset_clock();
    rl_t *rl = open_n(16);
    int id = add_limit(rl);
    rl_reservation_t r;
    ck_assert_int_eq(reserve(rl, id, "k", 50, &r), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &r, 250), 0);
    /* 250 tokens owed, 100 of burst: one more token conforms once 151 have
     * refilled */
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 151);
    ck_assert_int_eq(reserve(rl, id, "k", 1, &r), RL_DENY);
    rl_test_clock_advance(&clk, 151 * T_NS - 1);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    rl_test_clock_advance(&clk, 1);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
}
END_TEST

/* A second settle, a settle after a release, a zeroed handle and another
 * instance's handle are refused, changing nothing. */
START_TEST(generations_refuse_stale_handles)
{
    reset_clock();
    rl_t *a = open_n(4), *b = open_n(4);
    int ia = add_limit(a), ib = add_limit(b);
    rl_reservation_t r, rb, z;
    ck_assert_int_eq(reserve(a, ia, "k", 10, &r), RL_ALLOW);
    ck_assert_int_eq(reserve(b, ib, "k", 10, &rb), RL_ALLOW);
    ck_assert_int_eq(rl_settle(a, &rb, 0), RL_EINVAL);
    ck_assert_int_eq(rl_release(b, &r), RL_EINVAL);
    rl_reservation_init(&z);
    ck_assert_int_eq(rl_settle(a, &z, 0), RL_EINVAL);
    ck_assert_int_eq(rl_settle(a, &r, 10), 0);
    ck_assert_int_eq(rl_settle(a, &r, 0), RL_EINVAL);
    ck_assert_int_eq(rl_release(a, &r), RL_EINVAL);
    ck_assert_uint_eq(remaining(a, ia, "k"), 90);
    ck_assert_int_eq(rl_release(b, &rb), 0);
    ck_assert_int_eq(rl_release(b, &rb), RL_EINVAL);
    ck_assert_uint_eq(remaining(b, ib, "k"), 100);
    /* the entry reused: the old handle names an older generation */
    rl_reservation_t r2;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(reserve(a, ia, "k", 1, &r2), RL_ALLOW);
        ck_assert_int_eq(rl_settle(a, &r, 0), RL_EINVAL);
        ck_assert_int_eq(rl_settle(a, &r2, 1), 0);
    }
    /* a denied reservation's handle is nothing */
    ck_assert_int_eq(reserve(a, ia, "k", 100, &r2), RL_DENY);
    ck_assert_int_eq(rl_settle(a, &r2, 0), RL_EINVAL);
}
END_TEST

/* Not settled within its ttl: settled at its estimate, counted, logged
 * once; a late settle says so and charges nothing. */
START_TEST(expiry_settles_at_the_estimate)
{
    reset_clock();
    rl_t *rl = open_n(2);
    int id = add_limit(rl);
    rl_reservation_t a, b, c;
    rl_reservation_init(&a);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 30, 100, &a, NULL), RL_ALLOW);
    rl_reservation_init(&b);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 20, 200, &b, NULL), RL_ALLOW);
    rl_reservation_init(&c);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 100, &c, NULL), RL_EFULL);
    rl_test_clock_advance(&clk, 100 * T_NS);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 100, &c, NULL), RL_EFULL); /* not past yet */
    rl_test_clock_advance(&clk, 1);
    /* a's entry expired: claimed again for c */
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 5, 100, &c, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &a, 0), RL_EINVAL); /* reused since */
    rl_test_clock_advance(&clk, 100 * T_NS);
    ck_assert_int_eq(rl_settle(rl, &b, 0), RL_EEXPIRED);
    ck_assert_int_eq(rl_settle(rl, &b, 0), RL_EEXPIRED);
    rl_test_clock_advance(&clk, 1000 * T_NS);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0); /* expires c */
    ck_assert_uint_eq(s.expired, 3);
    ck_assert_uint_eq(s.in_flight, 0);
    ck_assert_uint_eq(s.full, 2);
    ck_assert_int_eq(log_lines, 3);
    ck_assert_int_eq(rl_settle(rl, &c, 5), RL_EEXPIRED);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.expired, 3);
    ck_assert_int_eq(log_lines, 3);
}
END_TEST

/* With the clock frozen, an expired reservation keeps its estimate charged:
 * the bucket is as if it had been settled at it. */
START_TEST(expired_tokens_stay_charged)
{
    reset_clock();
    rl_t *rl = open_n(2);
    int id = rl_test_add(rl, "name=slow rate=1/h burst=100 mode=local");
    rl_reservation_t a;
    rl_reservation_init(&a);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 30, 1, &a, NULL), RL_ALLOW);
    rl_test_clock_advance(&clk, 2 * T_NS);
    ck_assert_int_eq(rl_release(rl, &a), RL_EEXPIRED);
    ck_assert_uint_eq(remaining(rl, id, "k"), 70);
}
END_TEST

START_TEST(bad_inputs)
{
    reset_clock();
    rl_t *rl = open_n(2);
    int id = add_limit(rl);
    rl_reservation_t r;
    rl_reservation_init(&r);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_reserve(NULL, id, "k", 1, 1, 1, &r, &d), RL_EINVAL);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, NULL, &d), RL_EINVAL);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 0, 1, &r, &d), RL_EINVAL);
    ck_assert_int_eq(d.allowed, RL_DENY);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 0, &r, &d), RL_EINVAL);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, RL_RESERVE_TTL_MAX_MS + 1, &r, &d),
                     RL_EINVAL);
    ck_assert_int_eq(rl_reserve_wait(rl, id, "k", 1, 1, RL_WAIT_MAX_MS + 1, 1, &r, &d),
                     RL_EINVAL);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 0, 1, 1, &r, &d), RL_EKEYLEN);
    ck_assert_int_eq(rl_reserve(rl, id, NULL, 1, 1, 1, &r, &d), RL_EINVAL);
    ck_assert_int_eq(rl_reserve(rl, id + 1, "k", 1, 1, 1, &r, &d), RL_ENOTFOUND);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, BURST + 1, 1, &r, &d), RL_ECOST);
    r.size = 8;
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, &r, &d), RL_EINVAL);
    rl_reservation_init(&r);
    d.size = 4;
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, &r, &d), RL_ESIZE);
    rl_decision_init(&d);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, &r, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &r, RL_COST_SETTLE_MAX + 1), RL_ERANGE);
    ck_assert_int_eq(rl_settle(NULL, &r, 1), RL_EINVAL);
    ck_assert_int_eq(rl_settle(rl, NULL, 1), RL_EINVAL);
    ck_assert_int_eq(rl_settle(rl, &r, 1), 0); /* still in flight after ERANGE */
    /* a removed limit: the entry is freed, nothing to charge */
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, &r, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_limit_remove(rl, id), 0);
    ck_assert_int_eq(rl_settle(rl, &r, 5), RL_ENOTFOUND);
    ck_assert_int_eq(rl_settle(rl, &r, 5), RL_EINVAL);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    s.size = 8;
    ck_assert_int_eq(rl_reserve_stats(rl, &s), RL_ESIZE);
    ck_assert_int_eq(rl_reserve_stats(rl, NULL), RL_EINVAL);
    ck_assert_str_eq(rl_err_name(RL_EFULL), "RL_EFULL");
    ck_assert_str_eq(rl_err_name(RL_EEXPIRED), "RL_EEXPIRED");
    /* max_reservations out of range, reserved3 set */
    rl_config_t cfg;
    rl_config_init(&cfg);
    ck_assert_uint_eq(cfg.max_reservations, 4096);
    cfg.max_reservations = (1u << 20) + 1;
    rl_t *bad = NULL;
    ck_assert_int_eq(rl_open(&bad, &cfg), RL_ERANGE);
    rl_config_init(&cfg);
    cfg.reserved3 = 1;
    ck_assert_int_eq(rl_open(&bad, &cfg), RL_ERANGE);
    /* a config of the layout before the reservations' fields opens, at the
     * default */
    rl_config_init_sized(&cfg, offsetof(rl_config_t, max_reservations));
    ck_assert_int_eq(rl_open(&bad, &cfg), 0);
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(bad, &s), 0);
    ck_assert_uint_eq(s.capacity, 4096);
    rl_close(bad);
    /* none: every reserve is refused RL_EFULL */
    rl_t *none = open_n(0);
    int in = add_limit(none);
    ck_assert_int_eq(rl_reserve(none, in, "k", 1, 1, 1, &r, &d), RL_EFULL);
}
END_TEST

/* ------------------------------------------------------------- models */

/* The bucket as the header describes it, in ns: GCRA with debt. */
typedef struct model {
    uint64_t tat;
} model_t;

static int model_admit(model_t *m, uint64_t now, uint64_t cost)
{
    uint64_t base = m->tat > now ? m->tat : now;
    if (base + cost * T_NS - now > BURST * T_NS)
        return 0;
    m->tat = base + cost * T_NS;
    return 1;
}

static void model_debt(model_t *m, uint64_t now, uint64_t n)
{
    m->tat = (m->tat > now ? m->tat : now) + n * T_NS;
}

static void model_refund(model_t *m, uint64_t now, uint64_t n)
{
    if (m->tat > now)
        m->tat = m->tat - now > n * T_NS ? m->tat - n * T_NS : now;
}

#define NRES 64

typedef struct open_res {
    rl_reservation_t r;
    uint64_t est, actual;
    int live;
} open_res_t;

/* One key, the clock stepping: every decision agrees with the model, and
 * at every admission the tokens used by the work admitted so far are within
 * burst + rate x elapsed + the sum over in-flight reservations of
 * max(0, actual - estimate) (include/ratelimit.h, overshoot bound). */
START_TEST(model_and_overshoot_bound)
{
    reset_clock();
    rl_t *rl = open_n(NRES);
    int id = add_limit(rl);
    uint64_t seed = 0x5eed;
    model_t m = {0};
    uint64_t t0 = atomic_load(&clk.precise_ns);
    open_res_t res[NRES];
    memset(res, 0, sizeof res);
    uint64_t used = 0; /* tokens of the work admitted: actuals */
    uint64_t worst = 0;
    for (int step = 0; step < 200000; step++) {
        uint64_t now = atomic_load(&clk.precise_ns);
        int slot = (int)(next_u64(&seed) % NRES);
        open_res_t *o = &res[slot];
        if (!o->live) {
            o->est = 1 + next_u64(&seed) % 30;
            uint64_t pick = next_u64(&seed) % 4;
            o->actual = pick == 0 ? 0 : pick == 1 ? o->est : next_u64(&seed) % 80;
            int want = model_admit(&m, now, o->est);
            int got = reserve(rl, id, "k", (uint32_t)o->est, &o->r);
            REQUIRE(got == (want ? RL_ALLOW : RL_DENY), "step %d: reserve %llu: %d, model %d",
                    step, (unsigned long long)o->est, got, want);
            if (got == RL_ALLOW) {
                o->live = 1;
                used += o->actual;
                uint64_t excess = 0;
                for (int j = 0; j < NRES; j++)
                    if (res[j].live && res[j].actual > res[j].est)
                        excess += res[j].actual - res[j].est;
                uint64_t allowance = BURST + (now - t0) / T_NS;
                REQUIRE(used <= allowance + excess,
                        "step %d: used %llu > burst + rate x t %llu + in flight %llu", step,
                        (unsigned long long)used, (unsigned long long)allowance,
                        (unsigned long long)excess);
                if (used > allowance && used - allowance > worst)
                    worst = used - allowance;
            }
        } else if (next_u64(&seed) % 8 == 0) {
            ck_assert_int_eq(rl_release(rl, &o->r), 0);
            model_refund(&m, now, o->est);
            used -= o->actual; /* the work never happened */
            o->live = 0;
        } else {
            ck_assert_int_eq(rl_settle(rl, &o->r, (uint32_t)o->actual), 0);
            if (o->actual > o->est)
                model_debt(&m, now, o->actual - o->est);
            else
                model_refund(&m, now, o->est - o->actual);
            o->live = 0;
        }
        rl_test_clock_advance(&clk, next_u64(&seed) % (2 * T_NS));
    }
    ck_assert_msg(worst > 0, "the run never used more than the bucket allows: it tests nothing");
}
END_TEST

/* ------------------------------------------------------------- racing */

#define THREADS 8
#define ROUNDS 20000

typedef struct racer {
    rl_t *rl;
    int id;
    uint64_t seed;
    int64_t charged; /* tokens this thread left on the bucket */
    uint64_t reserved, denied, up, down, even, released, debt, refund;
    rl_reservation_t keep[8]; /* left in flight at the end */
    uint64_t keep_est[8];
    int nkeep;
} racer_t;

static void *race(void *arg)
{
    racer_t *z = arg;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t est = 1 + next_u64(&z->seed) % 20;
        rl_reservation_t r;
        int rc = reserve(z->rl, z->id, "hot", (uint32_t)est, &r);
        if (rc == RL_DENY) {
            z->denied++;
            continue;
        }
        REQUIRE(rc == RL_ALLOW, "reserve: %d", rc);
        z->reserved++;
        uint64_t what = next_u64(&z->seed) % 4;
        if (what == 0) {
            REQUIRE(rl_release(z->rl, &r) == 0, "release");
            z->released++;
            z->refund += est;
            continue;
        }
        uint64_t actual = what == 1 ? est : next_u64(&z->seed) % 25;
        REQUIRE(rl_settle(z->rl, &r, (uint32_t)actual) == 0, "settle");
        REQUIRE(rl_settle(z->rl, &r, (uint32_t)actual) == RL_EINVAL, "second settle");
        z->charged += (int64_t)actual;
        if (actual > est) {
            z->up++;
            z->debt += actual - est;
        } else if (actual < est) {
            z->down++;
            z->refund += est - actual;
        } else {
            z->even++;
        }
        if (i % 2000 == 0 && z->nkeep < 8) { /* leave a few in flight */
            uint64_t k = 1 + next_u64(&z->seed) % 5;
            if (reserve(z->rl, z->id, "hot", (uint32_t)k, &z->keep[z->nkeep]) == RL_ALLOW) {
                z->reserved++;
                z->keep_est[z->nkeep++] = k;
                z->charged += (int64_t)k;
            } else {
                z->denied++;
            }
        }
    }
    return NULL;
}

/* 8 threads reserve, settle (up, down, even) and release on one key with
 * the clock frozen: the bucket ends holding exactly the tokens the model
 * says (the settled actuals and the estimates in flight), which refill
 * pays back to the instant; the counters add up. A burst of 10^9 admits
 * every reservation; one of 100 denies most of them once in debt. */
static void race_on(const char *spec, uint64_t burst)
{
    reset_clock();
    rl_t *rl = open_n(THREADS * 8 + 8);
    int id = rl_test_add(rl, spec);
    racer_t z[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&z[i], 0, sizeof z[i]);
        z[i].rl = rl;
        z[i].id = id;
        z[i].seed = 0x1000 + (uint64_t)i;
        pthread_create(&th[i], NULL, race, &z[i]);
    }
    int64_t charged = 0;
    uint64_t reserved = 0, denied = 0, up = 0, down = 0, even = 0, released = 0, debt = 0,
             refund = 0, kept = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        charged += z[i].charged;
        reserved += z[i].reserved;
        denied += z[i].denied;
        up += z[i].up;
        down += z[i].down;
        even += z[i].even;
        released += z[i].released;
        debt += z[i].debt;
        refund += z[i].refund;
        kept += (uint64_t)z[i].nkeep;
    }
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.reserved, reserved);
    ck_assert_uint_eq(s.denied, denied);
    ck_assert_uint_eq(s.settled_up, up);
    ck_assert_uint_eq(s.settled_down, down);
    ck_assert_uint_eq(s.settled_even, even);
    ck_assert_uint_eq(s.released, released);
    ck_assert_uint_eq(s.debt_tokens, debt);
    ck_assert_uint_eq(s.refund_tokens, refund);
    ck_assert_uint_eq(s.in_flight, kept);
    ck_assert_uint_eq(s.expired, 0);
    ck_assert_msg(charged > 0, "nothing left charged");
    if ((uint64_t)charged < burst) {
        /* A charge of what is left conforms, one more does not. */
        uint64_t left = burst - (uint64_t)charged;
        ck_assert_int_eq(rl_check(rl, id, "hot", 3, (uint32_t)left + 1, NULL), RL_DENY);
        ck_assert_int_eq(rl_check(rl, id, "hot", 3, (uint32_t)left, NULL), RL_ALLOW);
        charged = (int64_t)burst;
    } else {
        ck_assert_msg(denied > 0, "in debt, yet nothing was denied");
    }
    /* The bucket owes `charged` tokens: one more conforms exactly when
     * refill has paid back all but burst - 1 of them. */
    uint64_t wait_ns = ((uint64_t)charged + 1 - burst) * T_NS;
    rl_test_clock_advance(&clk, wait_ns - 1);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_DENY);
    rl_test_clock_advance(&clk, 1);
    ck_assert_int_eq(rl_check(rl, id, "hot", 3, 1, NULL), RL_ALLOW);
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < z[i].nkeep; j++)
            ck_assert_int_eq(rl_settle(rl, &z[i].keep[j], (uint32_t)z[i].keep_est[j]), 0);
}

START_TEST(racing_threads_create_and_lose_nothing)
{
    race_on("name=tok rate=1000/s burst=1000000000 mode=local", 1000000000);
}
END_TEST

START_TEST(racing_threads_in_debt_create_and_lose_nothing)
{
    race_on("name=tok rate=1000/s burst=100 mode=local", 100);
}
END_TEST


/* ------------------------------------------------------------- waits */

static int wait_res(rl_t *rl, int id, uint32_t est, uint32_t max_wait, rl_reservation_t *r,
                    rl_decision_t *d)
{
    rl_reservation_init(r);
    return rl_reserve_wait(rl, id, "w", 1, est, max_wait, 10000, r, d);
}

/* The non-blocking wait: turns in arrival order, a deny at once when the
 * turn is beyond max_wait_ms, and a cancel that gives back exactly the
 * estimate. */
START_TEST(reserve_wait_turns_and_cancel)
{
    reset_clock();
    rl_t *rl = open_n(16);
    int id = rl_test_add(rl, "name=w rate=1000/s burst=10 mode=local");
    ck_assert_int_eq(rl_check(rl, id, "w", 1, 10, NULL), RL_ALLOW);
    rl_reservation_t a, b, c, e;
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(wait_res(rl, id, 5, 10, &a, &d), RL_ALLOW);
    ck_assert_uint_eq(a.ready_in_ms, 5);
    ck_assert_int_eq(wait_res(rl, id, 5, 10, &b, &d), RL_ALLOW);
    ck_assert_uint_eq(b.ready_in_ms, 10);
    /* one more token would be 11 ms away: refused now, nothing charged */
    ck_assert_int_eq(wait_res(rl, id, 1, 10, &c, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 11);
    ck_assert_int_eq(rl_check(rl, id, "w", 1, 1, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 11);
    /* the second waiter gives up: its 5 tokens, exactly, come back */
    ck_assert_int_eq(rl_release(rl, &b), 0);
    ck_assert_int_eq(wait_res(rl, id, 1, 10, &c, &d), RL_ALLOW);
    ck_assert_uint_eq(c.ready_in_ms, 6);
    /* time passes: the turns come closer by as much */
    rl_test_clock_advance(&clk, 4 * T_NS);
    ck_assert_int_eq(wait_res(rl, id, 4, 10, &e, &d), RL_ALLOW);
    ck_assert_uint_eq(e.ready_in_ms, 6);
    ck_assert_int_eq(rl_release(rl, &e), 0);
    ck_assert_int_eq(rl_release(rl, &c), 0);
    ck_assert_int_eq(rl_release(rl, &a), 0);
    /* every waiter cancelled: the bucket is as the first check left it,
     * 4 ms refilled */
    ck_assert_uint_eq(remaining(rl, id, "w"), 4);
    /* max_wait_ms 0 is rl_reserve */
    ck_assert_int_eq(wait_res(rl, id, 5, 0, &a, &d), RL_DENY);
    ck_assert_int_eq(wait_res(rl, id, 4, 0, &a, &d), RL_ALLOW);
    ck_assert_uint_eq(a.ready_in_ms, 0);
}
END_TEST

typedef struct waiter {
    rl_t *rl;
    int id;
    uint64_t seed;
    int n;
    uint32_t cost[64];
    uint64_t ready[64];
    int admitted[64];
} waiter_t;

static void *wait_race(void *arg)
{
    waiter_t *w = arg;
    for (int i = 0; i < w->n; i++) {
        rl_reservation_t r;
        w->cost[i] = 1 + (uint32_t)(next_u64(&w->seed) % 9);
        int rc = wait_res(w->rl, w->id, w->cost[i], 200, &r, NULL);
        REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "reserve_wait: %d", rc);
        w->admitted[i] = rc == RL_ALLOW;
        w->ready[i] = r.ready_in_ms;
    }
    return NULL;
}

static int by_ready(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* 8 threads queue on one key with the clock frozen: the turns handed out
 * are the queue's, in the order the charges landed (each turn is the
 * previous one plus its own cost), never past max_wait_ms, and a refused
 * waiter took nothing. */
START_TEST(racing_waiters_queue_in_order)
{
    reset_clock();
    rl_t *rl = open_n(8 * 64 + 8);
    int id = rl_test_add(rl, "name=w rate=1000/s burst=10 mode=local");
    waiter_t w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].rl = rl;
        w[i].id = id;
        w[i].seed = 77 + (uint64_t)i;
        w[i].n = 64;
        pthread_create(&th[i], NULL, wait_race, &w[i]);
    }
    uint64_t turns[THREADS * 64][2];
    size_t n = 0;
    uint64_t total = 0, refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        for (int j = 0; j < w[i].n; j++) {
            if (!w[i].admitted[j]) {
                refused++;
                continue;
            }
            turns[n][0] = w[i].ready[j];
            turns[n++][1] = w[i].cost[j];
            total += w[i].cost[j];
        }
    }
    ck_assert_msg(refused > 0, "no waiter was refused: max_wait_ms untested");
    qsort(turns, n, sizeof turns[0], by_ready);
    /* The first turns fit in the burst (ready 0); after them each turn is
     * the one before plus its own cost, in ms (one token a ms). */
    uint64_t at0 = 0;
    size_t k = 0;
    while (k < n && turns[k][0] == 0)
        at0 += turns[k++][1];
    ck_assert_uint_le(at0, 10);
    uint64_t tail = at0;
    for (; k < n; k++) {
        tail += turns[k][1];
        ck_assert_uint_eq(turns[k][0], tail - 10);
        ck_assert_uint_le(turns[k][0], 200);
    }
    ck_assert_uint_eq(tail, total);
    /* and the bucket holds exactly those tokens: the next turn is after them */
    rl_reservation_t r;
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(wait_res(rl, id, 1, RL_WAIT_MAX_MS, &r, &d), RL_ALLOW);
    ck_assert_uint_eq(r.ready_in_ms, total + 1 - 10);
}
END_TEST

typedef struct blocked {
    rl_t *rl;
    int id;
    uint32_t cost, max_wait;
    int rc;
    _Atomic int done;
} blocked_t;

static void *block(void *arg)
{
    blocked_t *b = arg;
    rl_decision_t d;
    rl_decision_init(&d);
    b->rc = rl_wait(b->rl, b->id, "w", 1, b->cost, b->max_wait, &d);
    atomic_store(&b->done, 1);
    return NULL;
}

/* rl_wait: a deny at once when the turn is too far (nothing charged), an
 * allow at once within the burst, and a sleep that the instance clock
 * ends: the waiter returns once the hook's time reaches its turn. */
START_TEST(wait_blocks_until_its_turn)
{
    reset_clock();
    rl_t *rl = open_n(4);
    int id = rl_test_add(rl, "name=w rate=1/s burst=5 mode=local");
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_wait(rl, id, "w", 1, 5, 0, &d), RL_ALLOW);
    ck_assert_int_eq(rl_wait(rl, id, "w", 1, 2, 1999, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 2000);
    ck_assert_int_eq(rl_wait(rl, id, "w", 1, 6, 100000, &d), RL_ECOST);
    ck_assert_int_eq(rl_wait(rl, id, "w", 1, 0, 1, &d), RL_EINVAL);
    ck_assert_int_eq(rl_wait(rl, id, "w", 1, 1, RL_WAIT_MAX_MS + 1, &d), RL_EINVAL);
    ck_assert_int_eq(rl_wait(rl, id, "w", 0, 1, 1, &d), RL_EKEYLEN);
    ck_assert_int_eq(rl_wait(rl, id + 1, "w", 1, 1, 1, &d), RL_ENOTFOUND);
    /* a waiter for 2 tokens: 2 s of instance time; the test moves the
     * hook's clock there (the real-time bound is 2 s too, so the return is
     * the clock's whenever this box is quick) */
    blocked_t b = {.rl = rl, .id = id, .cost = 2, .max_wait = 2000};
    pthread_t th;
    pthread_create(&th, NULL, block, &b);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    /* its turn taken (counted before it sleeps), then the time moved */
    WAIT_FOR(rl_reserve_stats(rl, &s) == 0 && s.waits == 2);
    rl_test_clock_advance(&clk, UINT64_C(2000000000));
    pthread_join(th, NULL);
    ck_assert_int_eq(b.rc, RL_ALLOW);
    /* its tokens were taken: the bucket is empty at the turn */
    ck_assert_int_eq(rl_check(rl, id, "w", 1, 1, NULL), RL_DENY);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.waits, 2);
    ck_assert_uint_eq(s.waits_slept, 1);
    ck_assert_uint_eq(s.waits_refused, 1);
}
END_TEST

/* ------------------------------------------------------ failure answers */

/* A global limit while the instance is degraded: on_failure=open admits
 * without holding (settle and release move nothing), closed denies. A
 * shadow limit's would-deny is admitted the same way. */
START_TEST(unbacked_admissions_hold_nothing)
{
    rl_t *rl = rl_test_hold(rl_test_open_degraded(50), rl_test_close_fn);
    int open = rl_test_add(rl, "name=o rate=1/h burst=2 mode=global on_failure=open");
    int closed = rl_test_add(rl, "name=c rate=1/h burst=2 mode=global on_failure=closed");
    rl_reservation_t r;
    rl_decision_t d;
    rl_decision_init(&d);
    rl_reservation_init(&r);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_reserve(rl, open, "k", 1, 2, 1000, &r, &d), RL_ALLOW);
        ck_assert_uint_ne(d.flags & RL_FLAG_DEGRADED, 0);
        ck_assert_int_eq(rl_settle(rl, &r, 2000), 0);
    }
    ck_assert_int_eq(rl_reserve(rl, closed, "k", 1, 1, 1000, &r, &d), RL_DENY);
    ck_assert_uint_ne(d.flags & RL_FLAG_DEGRADED, 0);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.reserved, 3);
    ck_assert_uint_eq(s.settled_up, 3);
    ck_assert_uint_eq(s.denied, 1);

    reset_clock();
    rl_t *l = open_n(4);
    int sh = rl_test_add(l, "name=s rate=1/h burst=2 mode=local shadow=1");
    ck_assert_int_eq(rl_reserve(l, sh, "k", 1, 2, 1000, &r, &d), RL_ALLOW);
    ck_assert_uint_eq(d.flags & RL_FLAG_SHADOW, 0);
    rl_reservation_t r2;
    rl_reservation_init(&r2);
    ck_assert_int_eq(rl_reserve(l, sh, "k", 1, 2, 1000, &r2, &d), RL_ALLOW);
    ck_assert_uint_ne(d.flags & RL_FLAG_SHADOW, 0);
    ck_assert_int_eq(rl_release(l, &r2), 0); /* held nothing: gives nothing */
    ck_assert_uint_eq(remaining(l, sh, "k"), 0);
    ck_assert_int_eq(rl_release(l, &r), 0);
    ck_assert_uint_eq(remaining(l, sh, "k"), 2);
}
END_TEST

/* A shared instance has no reservation table. */
START_TEST(shared_instance_refuses)
{
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open_shared(&rl, NULL), 0);
    rl_test_hold(rl, rl_test_close_fn);
    int id = add_limit(rl);
    rl_reservation_t r;
    rl_reservation_init(&r);
    ck_assert_int_eq(rl_reserve(rl, id, "k", 1, 1, 1, &r, NULL), RL_ENOTSUP);
    ck_assert_int_eq(rl_settle(rl, &r, 1), RL_ENOTSUP);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.capacity, 0);
}
END_TEST

/* ------------------------------------------------------------- multi */

static void mreq(rl_request_t *r, int id, const char *key, uint32_t cost)
{
    rl_request_init(r);
    r->limit = id;
    r->key = key;
    r->key_len = strlen(key);
    r->cost = cost;
}

/* An LLM request's three budgets at once: all admitted and each settled on
 * its own, or none held; a full table or a bad request charges nothing. */
START_TEST(multi_all_or_nothing)
{
    reset_clock();
    rl_t *rl = open_n(4);
    int in = rl_test_add(rl, "name=in rate=1/h burst=100 mode=local");
    int outl = rl_test_add(rl, "name=out rate=1/h burst=50 mode=local");
    int rq = rl_test_add(rl, "name=req rate=1/h burst=2 mode=local");
    rl_request_t q[3];
    mreq(&q[0], in, "u", 30);
    mreq(&q[1], outl, "u", 40);
    mreq(&q[2], rq, "u", 1);
    rl_reservation_t r[3];
    for (int i = 0; i < 3; i++)
        rl_reservation_init(&r[i]);
    rl_decision_t d[3];
    for (int i = 0; i < 3; i++)
        rl_decision_init(&d[i]);
    size_t den = 99;
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 1000, r, d, &den), RL_ALLOW);
    ck_assert_uint_eq(den, 3);
    ck_assert_uint_eq(d[1].remaining, 10);
    ck_assert_int_eq(rl_settle(rl, &r[0], 30), 0);
    ck_assert_int_eq(rl_settle(rl, &r[1], 55), 0); /* 5 of debt on out */
    ck_assert_int_eq(rl_settle(rl, &r[2], 1), 0);
    ck_assert_uint_eq(remaining(rl, in, "u"), 70);
    ck_assert_uint_eq(remaining(rl, outl, "u"), 0);
    ck_assert_uint_eq(remaining(rl, rq, "u"), 1);
    /* out is in debt: denied at index 1, in's 30 given back */
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 1000, r, d, &den), RL_DENY);
    ck_assert_uint_eq(den, 1);
    ck_assert_int_eq(d[0].allowed, RL_DENY);
    ck_assert_uint_eq(d[0].remaining, 70);
    ck_assert_int_eq(d[2].allowed, RL_DENY);
    ck_assert_int_eq(rl_settle(rl, &r[0], 0), RL_EINVAL);
    ck_assert_uint_eq(remaining(rl, in, "u"), 70);
    ck_assert_uint_eq(remaining(rl, rq, "u"), 1);
    /* a bad request: nothing charged, its index */
    mreq(&q[1], outl, "u", 51);
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 1000, r, d, &den), RL_ECOST);
    ck_assert_uint_eq(den, 1);
    mreq(&q[1], outl, "", 1);
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 1000, r, d, &den), RL_EKEYLEN);
    mreq(&q[1], outl, "v", 1);
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 0, r, d, &den), RL_EINVAL);
    ck_assert_int_eq(rl_reserve_multi(rl, q, RL_MULTI_MAX + 1, sizeof q[0], 1, r, d, &den),
                     RL_ERANGE);
    /* two of four entries held: three cannot be claimed, nothing charged */
    rl_reservation_t h1, h2;
    ck_assert_int_eq(reserve(rl, in, "x", 1, &h1), RL_ALLOW);
    ck_assert_int_eq(reserve(rl, in, "x", 1, &h2), RL_ALLOW);
    ck_assert_int_eq(rl_reserve_multi(rl, q, 3, sizeof q[0], 1000, r, d, &den), RL_EFULL);
    ck_assert_uint_eq(remaining(rl, in, "u"), 70);
    ck_assert_int_eq(rl_reserve_multi(rl, q, 2, sizeof q[0], 1000, r, d, &den), RL_ALLOW);
    ck_assert_uint_eq(remaining(rl, in, "u"), 40);
    ck_assert_int_eq(rl_release(rl, &r[0]), 0);
    ck_assert_int_eq(rl_release(rl, &r[1]), 0);
    ck_assert_uint_eq(remaining(rl, in, "u"), 70);
    ck_assert_uint_eq(remaining(rl, outl, "v"), 50);
}
END_TEST

typedef struct pairer {
    rl_t *rl;
    int a, b;
    uint64_t seed;
    uint64_t allowed, denied;
} pairer_t;

static void *pair_race(void *arg)
{
    pairer_t *p = arg;
    for (int i = 0; i < 5000; i++) {
        uint32_t c = 1 + (uint32_t)(next_u64(&p->seed) % 10);
        rl_request_t q[2];
        mreq(&q[0], p->a, "x", c);
        mreq(&q[1], p->b, "x", c);
        rl_reservation_t r[2];
        rl_reservation_init(&r[0]);
        rl_reservation_init(&r[1]);
        int rc = rl_reserve_multi(p->rl, q, 2, sizeof q[0], 1000, r, NULL, NULL);
        REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "multi: %d", rc);
        if (rc == RL_DENY) {
            p->denied++;
            continue;
        }
        p->allowed++;
        uint32_t actual = (uint32_t)(next_u64(&p->seed) % 15);
        REQUIRE(rl_settle(p->rl, &r[0], actual) == 0, "settle a");
        REQUIRE(rl_settle(p->rl, &r[1], actual) == 0, "settle b");
    }
    return NULL;
}

/* 8 threads reserve the same cost on two limits at once and settle both
 * alike, with the clock frozen: whatever the interleaving, the two buckets
 * end holding the same tokens (a batch is never half admitted), and
 * pay back on the same instant. */
START_TEST(racing_multi_never_half_admits)
{
    reset_clock();
    rl_t *rl = open_n(64);
    int a = rl_test_add(rl, "name=a rate=1000/s burst=200 mode=local");
    int b = rl_test_add(rl, "name=b rate=1000/s burst=1000 mode=local");
    pairer_t p[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&p[i], 0, sizeof p[i]);
        p[i].rl = rl;
        p[i].a = a;
        p[i].b = b;
        p[i].seed = 300 + (uint64_t)i;
        pthread_create(&th[i], NULL, pair_race, &p[i]);
    }
    uint64_t denied = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        denied += p[i].denied;
    }
    ck_assert_msg(denied > 0, "no batch denied");
    /* a is in debt (or empty); b holds the same tokens of a larger burst:
     * find a's payback instant, then b must admit 800 at once more */
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, a, "x", 1, 1, &d), RL_DENY);
    uint64_t wait_ms = d.retry_after_ms;
    rl_test_clock_advance(&clk, wait_ms * T_NS - T_NS);
    ck_assert_int_eq(rl_check(rl, a, "x", 1, 1, NULL), RL_DENY);
    ck_assert_int_eq(rl_check(rl, b, "x", 1, 801, NULL), RL_DENY);
    ck_assert_int_eq(rl_check(rl, b, "x", 1, 800, NULL), RL_ALLOW);
    rl_test_clock_advance(&clk, T_NS);
    ck_assert_int_eq(rl_check(rl, a, "x", 1, 1, NULL), RL_ALLOW);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_test(tc, settle_moves_the_difference);
    tcase_add_test(tc, debt_is_paid_back_exactly_by_refill);
    tcase_add_test(tc, generations_refuse_stale_handles);
    tcase_add_test(tc, expiry_settles_at_the_estimate);
    tcase_add_test(tc, expired_tokens_stay_charged);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, model_and_overshoot_bound);
    tcase_add_test(tc, racing_threads_create_and_lose_nothing);
    tcase_add_test(tc, racing_threads_in_debt_create_and_lose_nothing);
    tcase_add_test(tc, reserve_wait_turns_and_cancel);
    tcase_add_test(tc, racing_waiters_queue_in_order);
    tcase_add_test(tc, wait_blocks_until_its_turn);
    tcase_add_test(tc, unbacked_admissions_hold_nothing);
    tcase_add_test(tc, shared_instance_refuses);
    tcase_add_test(tc, multi_all_or_nothing);
    tcase_add_test(tc, racing_multi_never_half_admits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
