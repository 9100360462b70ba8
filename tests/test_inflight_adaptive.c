/* SPDX-License-Identifier: MIT */
/*
 * The adaptive algorithms (inflight/adaptive.c) against a simulated
 * service, window by window, deterministic (no clock): a service with a
 * concurrency knee K, whose latency is its base up to K and past it rises
 * as (c / K)^4 (a pool whose contention grows faster than its queue), and
 * whose requests time out (dropped) past twice the base. Demand always
 * fills the limit. Each algorithm must settle within 20% of the knee,
 * come back there after a latency spike, and keep moving (not freeze)
 * while every request fails, then recover.
 */
#include <check.h>
#include <stdio.h>
#include "ratelimit.h"
#include "inflight/adaptive.h"
#include "local/inflightdef.h"
#include "testutil.h"

#define BASE_NS 10000000.0 /* 10 ms */
#define SAMPLES 10

typedef struct sim {
    rl_adapt_t a;
    uint32_t limit;
    double knee;
    int linear; /* latency linear past the knee, and no timeouts */
} sim_t;

static void sim_init(sim_t *s, int32_t algo, double knee)
{
    rl_limit_t lim;
    rl_limit_init(&lim);
    lim.kind = RL_KIND_INFLIGHT;
    lim.inflight_algo = algo;
    rl_inflight_def_t d;
    rl__inflight_resolve(&lim, &d); /* the published defaults */
    rl__adapt_init(&s->a, algo, d.min, d.max, 42);
    s->limit = (uint32_t)s->a.limit;
    s->knee = knee;
    s->linear = 0;
}

/* One window at the current limit; spike multiplies the latency; fail
 * drops every request. */
static uint32_t sim_window(sim_t *s, double spike, int fail)
{
    double c = s->limit, r = c / s->knee;
    double lat = (c <= s->knee ? BASE_NS : BASE_NS * (s->linear ? r : r * r * r * r)) * spike;
    rl_adapt_window_t w = {.max_inflight = s->limit};
    if (fail || (lat > 2 * BASE_NS && !s->linear))
        w.drops = SAMPLES;
    else {
        w.samples = SAMPLES;
        w.rtt_sum_ns = (uint64_t)(lat * SAMPLES);
    }
    s->limit = rl__adapt_update(&s->a, &w);
    return s->limit;
}

/* The mean limit over n windows, with the lowest and highest seen. */
static double sim_run(sim_t *s, int n, uint32_t *lo, uint32_t *hi)
{
    double sum = 0;
    *lo = UINT32_MAX;
    *hi = 0;
    for (int i = 0; i < n; i++) {
        uint32_t l = sim_window(s, 1.0, 0);
        sum += l;
        *lo = l < *lo ? l : *lo;
        *hi = l > *hi ? l : *hi;
    }
    return sum / n;
}

static const char *algo_name(int32_t algo)
{
    return algo == RL_INFLIGHT_GRADIENT2 ? "gradient2" : algo == RL_INFLIGHT_VEGAS ? "vegas"
                                                                                  : "aimd";
}

static void near_knee(sim_t *s, const char *when)
{
    uint32_t lo, hi;
    double mean = sim_run(s, 300, &lo, &hi);
    ck_assert_msg(mean >= 0.8 * s->knee && mean <= 1.2 * s->knee && lo >= 0.7 * s->knee &&
                      hi <= 1.3 * s->knee,
                  "%s, knee %.0f, %s: mean %.1f (%u..%u), not within 20%%", algo_name(s->a.algo),
                  s->knee, when, mean, lo, hi);
}

START_TEST(converges_near_the_knee)
{
    static const double knees[] = {40, 100, 150};
    for (int32_t algo = RL_INFLIGHT_GRADIENT2; algo <= RL_INFLIGHT_AIMD; algo++)
        for (size_t k = 0; k < sizeof knees / sizeof knees[0]; k++) {
            sim_t s;
            sim_init(&s, algo, knees[k]);
            for (int i = 0; i < 1500; i++)
                sim_window(&s, 1.0, 0);
            near_knee(&s, "settled");
        }
}
END_TEST

START_TEST(recovers_after_a_spike)
{
    for (int32_t algo = RL_INFLIGHT_GRADIENT2; algo <= RL_INFLIGHT_AIMD; algo++) {
        sim_t s;
        sim_init(&s, algo, 100);
        for (int i = 0; i < 1500; i++)
            sim_window(&s, 1.0, 0);
        uint32_t before = s.limit, during = s.limit;
        for (int i = 0; i < 30; i++) /* latency x4 for 30 windows */
            during = sim_window(&s, 4.0, 0);
        ck_assert_msg(during < 0.8 * before, "%s: %u during the spike, %u before it",
                      algo_name(algo), during, before);
        for (int i = 0; i < 600; i++)
            sim_window(&s, 1.0, 0);
        near_knee(&s, "after a spike");
    }
}
END_TEST

START_TEST(keeps_moving_when_all_fail)
{
    for (int32_t algo = RL_INFLIGHT_GRADIENT2; algo <= RL_INFLIGHT_AIMD; algo++) {
        sim_t s;
        sim_init(&s, algo, 100);
        for (int i = 0; i < 1500; i++)
            sim_window(&s, 1.0, 0);
        uint32_t before = s.limit;
        for (int i = 0; i < 300; i++) /* every request fails */
            sim_window(&s, 1.0, 1);
        ck_assert_msg(s.limit == s.a.min, "%s: %u after 300 windows of failures (min %u, %u "
                      "before)", algo_name(algo), s.limit, s.a.min, before);
        for (int i = 0; i < 1500; i++)
            sim_window(&s, 1.0, 0);
        near_knee(&s, "after every request failed");
    }
}
END_TEST

START_TEST(an_empty_window_changes_nothing)
{
    for (int32_t algo = RL_INFLIGHT_GRADIENT2; algo <= RL_INFLIGHT_AIMD; algo++) {
        sim_t s;
        sim_init(&s, algo, 100);
        rl_adapt_window_t none = {0};
        ck_assert_uint_eq(rl__adapt_update(&s.a, &none), 20);
        /* Application-limited windows (demand under half the limit) do not
         * raise it, whatever their latency. */
        rl_adapt_window_t idle = {.samples = 10, .rtt_sum_ns = 10 * 1000000u, .max_inflight = 2};
        for (int i = 0; i < 100; i++)
            rl__adapt_update(&s.a, &idle);
        ck_assert_msg((uint32_t)s.a.limit <= 20, "%s: %u from idle windows", algo_name(algo),
                      (uint32_t)s.a.limit);
    }
}
END_TEST

/* What the header and adaptive.c say of a service that never drops and
 * whose latency is linear past its knee (a queue in front of K workers):
 * Vegas finds the knee, Gradient2's long RTT follows its short one up and
 * the limit climbs to its max. */
START_TEST(linear_queue_without_timeouts)
{
    sim_t s;
    sim_init(&s, RL_INFLIGHT_VEGAS, 100);
    s.linear = 1;
    for (int i = 0; i < 1500; i++)
        sim_window(&s, 1.0, 0);
    near_knee(&s, "a linear queue");
    sim_init(&s, RL_INFLIGHT_GRADIENT2, 100);
    s.linear = 1;
    for (int i = 0; i < 1500; i++)
        sim_window(&s, 1.0, 0);
    ck_assert_uint_eq(s.limit, s.a.max);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inflight_adaptive");
    TCase *tc = tcase_create("sim");
    tcase_add_test(tc, converges_near_the_knee);
    tcase_add_test(tc, recovers_after_a_spike);
    tcase_add_test(tc, keeps_moving_when_all_fail);
    tcase_add_test(tc, an_empty_window_changes_nothing);
    tcase_add_test(tc, linear_queue_without_timeouts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
