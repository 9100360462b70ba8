/* SPDX-License-Identifier: MIT */
/* Reconnect backoff: bounds, and the spread of a reconnect storm. */
#include "testutil.h"
#include "base/backoff.h"

START_TEST(delays_within_bounds)
{
    uint64_t rng = 12345;
    for (uint32_t attempt = 0; attempt < 40; attempt++)
        for (int i = 0; i < 1000; i++) {
            uint64_t d = rl__backoff_ms(&rng, attempt, 800);
            uint64_t ceiling = attempt < 5 ? 50u << attempt : 800;
            ck_assert_uint_le(d, ceiling > 800 ? 800 : ceiling);
        }
}
END_TEST

/*
 * 50 instances lose Redis at t = 0; it is back at t = 3 s. Each retries on
 * the schedule (a failed attempt costs nothing; the next one is scheduled at
 * once). Where do their first attempts after 3 s fall? With the default
 * 950 ms cap they are uniform over 950 ms, so a 100 ms window holds 5.3 on
 * average. Independent random points still cluster (a scan statistic): over
 * 1000 seeds the busiest 100 ms window held 10.4 on average, at most 17.
 * Checked over 50 seeds: on average at most a quarter in the busiest window,
 * and never more than 36%.
 */
START_TEST(reconnect_storm_is_spread)
{
    enum { N = 50, SEEDS = 50 };
    int total_worst = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        uint64_t back_at[N];
        for (int i = 0; i < N; i++) {
            uint64_t rng = seed * 1000003u + (uint64_t)i * 7919u + 1; /* per instance */
            uint64_t t = 0;
            uint32_t attempt = 0;
            while (t < 3000)
                t += rl__backoff_ms(&rng, attempt++, 950);
            back_at[i] = t;
        }
        int worst = 0;
        for (int i = 0; i < N; i++) {
            int in = 0;
            for (int j = 0; j < N; j++)
                in += back_at[j] >= back_at[i] && back_at[j] < back_at[i] + 100;
            if (in > worst)
                worst = in;
        }
        ck_assert_msg(worst * 100 <= N * 36, "seed %llu: %d of %d reconnects in one 100 ms window",
                      (unsigned long long)seed, worst, N);
        total_worst += worst;
    }
    ck_assert_msg(total_worst * 4 <= N * SEEDS, "busiest window: %.1f of %d on average",
                  (double)total_worst / SEEDS, N);
}
END_TEST

/* Without the phase draw at the cap, retries at U(0, cap) crowd the start
 * of the recovery; this keeps the schedule from drifting back to that. */
START_TEST(first_capped_attempt_draws_a_phase)
{
    uint64_t rng = 99;
    int below_cap = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t r2 = rng + (uint64_t)i;
        below_cap += rl__backoff_ms(&r2, 5, 950) < 950; /* 50 << 5 >= 950: first capped */
    }
    ck_assert_int_gt(below_cap, 900);
    uint64_t r3 = 7;
    ck_assert_uint_eq(rl__backoff_ms(&r3, 6, 950), 950); /* later ones keep the phase */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, delays_within_bounds);
    tcase_add_test(tc, reconnect_storm_is_spread);
    tcase_add_test(tc, first_capped_attempt_draws_a_phase);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
