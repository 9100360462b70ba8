/* SPDX-License-Identifier: MIT */
/* Bucket math through the public API, driven by the injectable clock. */
#include <stdlib.h>
#include "testutil.h"
#include "instance.h"

#define MS UINT64_C(1000000)
#define SEC (1000 * MS)

static rl_test_clock_t clk;
static rl_t *rl;

static void setup(void)
{
    /* Exact math first: the coarse source reads the same as the precise
     * one here; coarse_ticks_keep_configured_rate opens its own instance. */
    atomic_init(&clk.precise_ns, 100000 * SEC);
    clk.coarse_tick_ns = 0;
    rl = rl_test_open(&clk, 1024);
}

static void teardown(void) { rl_close(rl); }

static int take(int id, const char *key, uint32_t cost, rl_decision_t *d)
{
    rl_decision_t local;
    if (d == NULL)
        d = &local;
    rl_decision_init(d);
    return rl_check(rl, id, key, strlen(key), cost, d);
}

/* Admit as many cost-1 checks as the bucket allows right now. */
static int drain(int id, const char *key)
{
    int n = 0;
    while (take(id, key, 1, NULL) == RL_ALLOW)
        n++;
    return n;
}

START_TEST(burst_then_deny)
{
    int id = rl_test_add(rl, "name=b rate=10/s burst=7");
    ck_assert_int_eq(drain(id, "k"), 7);
    rl_decision_t d;
    ck_assert_int_eq(take(id, "k", 1, &d), RL_DENY);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.retry_after_ms, 100);
    ck_assert_uint_eq(d.reset_ms, 700);
    ck_assert_uint_eq(d.limit, 10);
    ck_assert_uint_eq(d.burst, 7);
    ck_assert_uint_eq(d.window_ms, 1000);
    ck_assert_str_eq(d.policy, "b");
}
END_TEST

START_TEST(refill_exact)
{
    int id = rl_test_add(rl, "name=r rate=10/s burst=1");
    ck_assert_int_eq(take(id, "k", 1, NULL), RL_ALLOW);
    rl_decision_t d;
    ck_assert_int_eq(take(id, "k", 1, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 100);
    rl_test_clock_advance(&clk, 99 * MS);
    ck_assert_int_eq(take(id, "k", 1, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 1);
    rl_test_clock_advance(&clk, 1 * MS);
    ck_assert_int_eq(take(id, "k", 1, &d), RL_ALLOW);
    ck_assert_uint_eq(d.retry_after_ms, 0);
}
END_TEST

/* Over a long run the admitted count is exactly burst + rate x elapsed.
 * (burst >= 2: with burst 1 a token due between two samples is admitted
 * late and the lateness is lost, as in any token bucket.) */
static void long_run(const char *spec, uint64_t step_ns, uint64_t steps, uint64_t expect)
{
    int id = rl_test_add(rl, spec);
    uint64_t admitted = 0;
    for (uint64_t i = 0; i < steps; i++) {
        admitted += (uint64_t)drain(id, "k");
        rl_test_clock_advance(&clk, step_ns);
    }
    /* T is rounded up by < 1/16 ns a token: a token due exactly at the end
     * is a few ns late. */
    rl_test_clock_advance(&clk, 1000);
    admitted += (uint64_t)drain(id, "k");
    ck_assert_uint_eq(admitted, expect);
}

START_TEST(rate_per_minute)
{
    /* 100/m: one token every 600 ms; 10 minutes in 50 ms steps. */
    long_run("name=m rate=100/m burst=5", 50 * MS, 12000, 5 + 1000);
}
END_TEST

START_TEST(rate_per_hour_and_day)
{
    long_run("name=h rate=7/h burst=2", 60 * SEC, 600, 2 + 70);
    long_run("name=d rate=3/d burst=2", 3600 * SEC, 240, 2 + 30);
}
END_TEST

START_TEST(rate_not_dividing_period)
{
    /* 3/s: T = 333333333.33 ns, rounded up to 1/16 ns; 1000 s admits 3000. */
    long_run("name=f rate=3/s burst=2", 10 * MS, 100000, 2 + 3000);
}
END_TEST

START_TEST(cost_above_one)
{
    int id = rl_test_add(rl, "name=c rate=10/s burst=10");
    rl_decision_t d;
    ck_assert_int_eq(take(id, "k", 4, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 6);
    ck_assert_int_eq(take(id, "k", 4, &d), RL_ALLOW);
    ck_assert_int_eq(take(id, "k", 4, &d), RL_DENY);
    ck_assert_uint_eq(d.remaining, 2);
    ck_assert_uint_eq(d.retry_after_ms, 200);
    ck_assert_int_eq(take(id, "k", 2, &d), RL_ALLOW);
    ck_assert_int_eq(take(id, "k", 11, &d), RL_ECOST);
    ck_assert_int_eq(d.allowed, RL_DENY);
    ck_assert_int_eq(take(id, "k", 10, &d), RL_DENY);
}
END_TEST

START_TEST(peek_charges_nothing)
{
    int id = rl_test_add(rl, "name=p rate=10/s burst=3");
    rl_decision_t d;
    ck_assert_int_eq(take(id, "k", 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 3);
    ck_assert(d.flags & RL_FLAG_PEEK);
    ck_assert_int_eq(take(id, "k", 1, NULL), RL_ALLOW);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(take(id, "k", 0, &d), RL_ALLOW);
        ck_assert_uint_eq(d.remaining, 2);
    }
    ck_assert_int_eq(drain(id, "k"), 2);
    ck_assert_int_eq(take(id, "k", 0, &d), RL_DENY);
    ck_assert_uint_eq(d.retry_after_ms, 100);
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(rl, &s), 0);
    ck_assert_uint_eq(s.admitted, 3); /* peeks are not counted */
    ck_assert_uint_eq(s.denied, 1);
}
END_TEST

START_TEST(refund_gives_back_never_past_full)
{
    int id = rl_test_add(rl, "name=f rate=1/h burst=5");
    ck_assert_int_eq(drain(id, "k"), 5);
    ck_assert_int_eq(rl_refund(rl, id, "k", 1, 3), 0);
    ck_assert_int_eq(drain(id, "k"), 3);
    ck_assert_int_eq(rl_refund(rl, id, "k", 1, 100), 0);
    ck_assert_int_eq(drain(id, "k"), 5);
    ck_assert_int_eq(rl_refund(rl, id, "never-seen", 10, 1), 0);
    ck_assert_int_eq(rl_refund(rl, id, "k", 1, 0), 0);
}
END_TEST

START_TEST(idle_for_years)
{
    int id = rl_test_add(rl, "name=y rate=1000/s burst=4");
    ck_assert_int_eq(drain(id, "k"), 4);
    rl_test_clock_advance(&clk, UINT64_C(5) * 365 * 86400 * SEC);
    ck_assert_int_eq(drain(id, "k"), 4);
    /* Far past the 18-year range instance time saturates: no overflow,
     * no tokens beyond a burst, and time no longer refills. */
    rl_test_clock_advance(&clk, UINT64_C(1) << 62);
    ck_assert_int_eq(drain(id, "k"), 4);
    rl_test_clock_advance(&clk, SEC);
    ck_assert_int_eq(drain(id, "k"), 0);
}
END_TEST

START_TEST(clock_backwards_creates_nothing)
{
    int id = rl_test_add(rl, "name=bk rate=10/s burst=2");
    ck_assert_int_eq(drain(id, "k"), 2);
    atomic_store(&clk.precise_ns, atomic_load(&clk.precise_ns) - 3600 * SEC);
    ck_assert_int_eq(drain(id, "k"), 0);
    /* Time goes on from where it was (less the clamp's 1 ms grain): one
     * emission interval, one token. */
    rl_test_clock_advance(&clk, 100 * MS + 2 * MS);
    ck_assert_int_eq(drain(id, "k"), 1);
    /* A forward jump refills at most one burst. */
    rl_test_clock_advance(&clk, 3600 * SEC);
    ck_assert_int_eq(drain(id, "k"), 2);
}
END_TEST

static int32_t source_of(int id)
{
    rl_limit_params_t p;
    rl__params_read(rl__limit_get(&rl->limits, id), &p);
    return p.clock_source;
}

/* The coarse source ticks every 4 ms while precise time moves in 10 us
 * steps: each limit admits its configured rate whichever source it got. */
static uint64_t admitted_over_one_second(int id)
{
    uint64_t n = 0;
    for (int step = 0; step < 100000; step++) {
        for (int k = 0; k < 3; k++)
            n += take(id, "k", 1, NULL) == RL_ALLOW;
        rl_test_clock_advance(&clk, 10000);
    }
    return n;
}

START_TEST(coarse_ticks_keep_configured_rate)
{
    rl_close(rl);
    clk.coarse_tick_ns = 4 * MS;
    rl = rl_test_open(&clk, 1024);
    int fast = rl_test_add(rl, "name=fast rate=100000/s burst=10");
    int slow = rl_test_add(rl, "name=slow rate=100/s burst=10");
    /* 100000/s x 4 ms = 400 tokens a tick > burst 10: must not use coarse. */
    ck_assert_int_eq(source_of(fast), RL_CLOCK_PRECISE);
    /* 100/s x 4 ms = 0.4 token a tick <= burst - 1: coarse is exact. */
    ck_assert_int_eq(source_of(slow), RL_CLOCK_COARSE);
    /* Burst 1 has no room to bank a token noticed a tick late. */
    ck_assert_int_eq(source_of(rl_test_add(rl, "name=one rate=1/s burst=1")), RL_CLOCK_PRECISE);
    uint64_t a = admitted_over_one_second(fast);
    ck_assert_uint_ge(a, 100000);
    ck_assert_uint_le(a, 100000 + 10);
    uint64_t b = admitted_over_one_second(slow);
    /* Coarse time lags precise by under one tick at either end. */
    ck_assert_uint_ge(b, 100 + 10 - 1);
    ck_assert_uint_le(b, 100 + 10);
}
END_TEST

START_TEST(update_keeps_state)
{
    int id = rl_test_add(rl, "name=u rate=1/h burst=10");
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(take(id, "k", 1, NULL), RL_ALLOW);
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=u rate=2/h burst=10", err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, id, &lim), 0);
    rl_decision_t d;
    ck_assert_int_eq(take(id, "k", 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 4); /* tokens kept, not time debt */
    ck_assert_uint_eq(d.limit, 2);
    rl_test_clock_advance(&clk, 1800 * SEC);
    ck_assert_int_eq(take(id, "k", 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 5); /* and refills at the new rate */
    /* A smaller burst keeps what is owed (5 tokens, not 3): the key is
     * empty until it has paid the 2 over the burst, then refills. */
    ck_assert_int_eq(rl_limit_parse(&lim, "name=u rate=2/h burst=3", err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, id, &lim), 0);
    ck_assert_int_eq(take(id, "k", 0, &d), RL_DENY);
    ck_assert_uint_eq(d.remaining, 0);
    rl_test_clock_advance(&clk, 1800 * SEC);
    ck_assert_int_eq(drain(id, "k"), 0); /* owes 4 */
    rl_test_clock_advance(&clk, 3600 * SEC);
    ck_assert_int_eq(drain(id, "k"), 1); /* owed 2, then one more taken */
    ck_assert_int_eq(rl_limit_parse(&lim, "name=other rate=2/h", err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, id, &lim), RL_ENAME);
}
END_TEST

START_TEST(shadow_never_denies)
{
    int id = rl_test_add(rl, "name=s rate=1/h burst=2 shadow=1");
    int flagged = 0;
    for (int i = 0; i < 5; i++) {
        rl_decision_t d;
        ck_assert_int_eq(take(id, "k", 1, &d), RL_ALLOW);
        flagged += (d.flags & RL_FLAG_SHADOW) != 0;
    }
    ck_assert_int_eq(flagged, 3);
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    ck_assert_int_eq(rl_limit_stats(rl, id, &s), 0);
    ck_assert_uint_eq(s.shadow_denied, 3);
    ck_assert_uint_eq(s.admitted, 5);
    ck_assert_uint_eq(s.denied, 0);
}
END_TEST

START_TEST(ms_rate)
{
    long_run("name=ms rate=1/250ms burst=1", 50 * MS, 200, 1 + 40);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bucket");
    TCase *tc = tcase_create("gcra");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, burst_then_deny);
    tcase_add_test(tc, refill_exact);
    tcase_add_test(tc, rate_per_minute);
    tcase_add_test(tc, rate_per_hour_and_day);
    tcase_add_test(tc, rate_not_dividing_period);
    tcase_add_test(tc, cost_above_one);
    tcase_add_test(tc, peek_charges_nothing);
    tcase_add_test(tc, refund_gives_back_never_past_full);
    tcase_add_test(tc, idle_for_years);
    tcase_add_test(tc, clock_backwards_creates_nothing);
    tcase_add_test(tc, coarse_ticks_keep_configured_rate);
    tcase_add_test(tc, update_keeps_state);
    tcase_add_test(tc, shadow_never_denies);
    tcase_add_test(tc, ms_rate);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
