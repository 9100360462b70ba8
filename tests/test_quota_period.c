/* SPDX-License-Identifier: MIT */
/*
 * The quota periods' UTC arithmetic (quota/period.c): checked at the
 * calendar's awkward boundaries and against libc's gmtime_r over random
 * moments.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "quota/spec.h"
#include "quota/period.h"

#define DAY UINT64_C(86400000)
#define HOUR UINT64_C(3600000)

/* Unix ms of dates (computed with Python's calendar.timegm). */
#define D_2023_02_01 UINT64_C(1675209600000)
#define D_2023_03_01 UINT64_C(1677628800000)
#define D_2023_12_25 UINT64_C(1703462400000)
#define D_2024_01_01 UINT64_C(1704067200000)
#define D_2024_01_08 UINT64_C(1704672000000)
#define D_2024_01_31 UINT64_C(1706659200000)
#define D_2024_02_01 UINT64_C(1706745600000)
#define D_2024_02_28 UINT64_C(1709078400000)
#define D_2024_02_29 UINT64_C(1709164800000)
#define D_2024_03_01 UINT64_C(1709251200000)
#define D_2024_12_01 UINT64_C(1733011200000)
#define D_2024_12_31 UINT64_C(1735603200000)
#define D_2025_01_01 UINT64_C(1735689600000)
#define D_2100_02_01 UINT64_C(4105123200000)
#define D_2100_03_01 UINT64_C(4107542400000)
#define D_2000_02_01 UINT64_C(949363200000)
#define D_2000_03_01 UINT64_C(951868800000)

static void expect_period(int32_t kind, uint64_t fixed, uint64_t now, uint64_t start,
                          uint64_t end)
{
    uint64_t s = 0, e = 0;
    rl__quota_period(kind, fixed, now, &s, &e);
    ck_assert_msg(s == start && e == end,
                  "period %d at %llu: [%llu, %llu), expected [%llu, %llu)", (int)kind,
                  (unsigned long long)now, (unsigned long long)s, (unsigned long long)e,
                  (unsigned long long)start, (unsigned long long)end);
}

START_TEST(month_boundaries)
{
    /* Jan 31 -> Feb 1 */
    expect_period(RL_PERIOD_MONTH, 0, D_2024_02_01 - 1, D_2024_01_01, D_2024_02_01);
    expect_period(RL_PERIOD_MONTH, 0, D_2024_02_01, D_2024_02_01, D_2024_03_01);
    expect_period(RL_PERIOD_DAY, 0, D_2024_01_31 + 5, D_2024_01_31, D_2024_02_01);
    /* Feb 28 -> 29 -> Mar 1 in a leap year */
    expect_period(RL_PERIOD_DAY, 0, D_2024_02_28 + DAY - 1, D_2024_02_28, D_2024_02_29);
    expect_period(RL_PERIOD_DAY, 0, D_2024_02_29, D_2024_02_29, D_2024_03_01);
    expect_period(RL_PERIOD_MONTH, 0, D_2024_02_29 + DAY - 1, D_2024_02_01, D_2024_03_01);
    expect_period(RL_PERIOD_MONTH, 0, D_2024_03_01, D_2024_03_01, D_2024_03_01 + 31 * DAY);
    /* ... and not in 2023, nor in 2100 (a century), but in 2000 */
    expect_period(RL_PERIOD_MONTH, 0, D_2023_03_01 - 1, D_2023_02_01, D_2023_03_01);
    expect_period(RL_PERIOD_MONTH, 0, D_2100_03_01 - 1, D_2100_02_01, D_2100_03_01);
    ck_assert_uint_eq(D_2100_03_01 - D_2100_02_01, 28 * DAY);
    expect_period(RL_PERIOD_MONTH, 0, D_2000_03_01 - 1, D_2000_02_01, D_2000_03_01);
    ck_assert_uint_eq(D_2000_03_01 - D_2000_02_01, 29 * DAY);
    /* Dec 31 -> Jan 1 */
    expect_period(RL_PERIOD_MONTH, 0, D_2025_01_01 - 1, D_2024_12_01, D_2025_01_01);
    expect_period(RL_PERIOD_DAY, 0, D_2025_01_01 - 1, D_2024_12_31, D_2025_01_01);
    expect_period(RL_PERIOD_MONTH, 0, D_2025_01_01, D_2025_01_01, D_2025_01_01 + 31 * DAY);
    expect_period(RL_PERIOD_HOUR, 0, D_2025_01_01 - 1, D_2025_01_01 - HOUR, D_2025_01_01);
}
END_TEST

START_TEST(week_and_fixed_boundaries)
{
    /* 2024-01-01 is a Monday: Sunday Dec 31's week began Monday Dec 25. */
    expect_period(RL_PERIOD_WEEK, 0, D_2024_01_01 - 1, D_2023_12_25, D_2024_01_01);
    expect_period(RL_PERIOD_WEEK, 0, D_2024_01_01, D_2024_01_01, D_2024_01_08);
    expect_period(RL_PERIOD_WEEK, 0, D_2024_01_08 - 1, D_2024_01_01, D_2024_01_08);
    /* The epoch's week (Thursday 1970-01-01) began in 1969. */
    expect_period(RL_PERIOD_WEEK, 0, 0, 0, 4 * DAY);
    /* Fixed 30 d: multiples of 30 days since the epoch. */
    uint64_t p = 30 * DAY;
    uint64_t b = D_2024_01_01 / p * p + p;
    expect_period(RL_PERIOD_FIXED, p, b - 1, b - p, b);
    expect_period(RL_PERIOD_FIXED, p, b, b, b + p);
}
END_TEST

START_TEST(calendar_matches_libc)
{
    /* Random moments from 1970 to 2200 against gmtime_r: the period's start
     * has the calendar fields of a boundary, and the moment lies inside. */
    uint64_t rng = 42;
    for (int i = 0; i < 20000; i++) {
        uint64_t now = next_u64(&rng) % (UINT64_C(7258118400) * 1000);
        for (int32_t kind = RL_PERIOD_HOUR; kind <= RL_PERIOD_MONTH; kind++) {
            uint64_t s, e;
            rl__quota_period(kind, 0, now, &s, &e);
            REQUIRE(s <= now && now < e, "kind %d: %llu outside its period", (int)kind,
                    (unsigned long long)now);
            time_t ts = (time_t)(s / 1000), te = (time_t)(e / 1000), tn = (time_t)(now / 1000);
            struct tm a, b, n;
            gmtime_r(&ts, &a);
            gmtime_r(&te, &b);
            gmtime_r(&tn, &n);
            REQUIRE(s % 1000 == 0 && a.tm_sec == 0 && a.tm_min == 0, "not a whole hour");
            if (kind == RL_PERIOD_HOUR)
                REQUIRE(e - s == HOUR && a.tm_hour == n.tm_hour, "hour");
            if (kind >= RL_PERIOD_DAY)
                REQUIRE(a.tm_hour == 0 && b.tm_hour == 0, "kind %d: not midnight", (int)kind);
            if (kind == RL_PERIOD_DAY)
                REQUIRE(e - s == DAY && a.tm_mday == n.tm_mday, "day");
            if (kind == RL_PERIOD_WEEK)
                REQUIRE((e - s == 7 * DAY && a.tm_wday == 1) || s == 0, "week starts on %d", a.tm_wday);
            if (kind == RL_PERIOD_MONTH)
                REQUIRE(a.tm_mday == 1 && b.tm_mday == 1 && a.tm_mon == n.tm_mon &&
                            a.tm_year == n.tm_year && (b.tm_mon == (a.tm_mon + 1) % 12),
                        "month at %llu", (unsigned long long)now);
        }
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quota_period");
    TCase *tc = tcase_create("period");
    tcase_add_test(tc, month_boundaries);
    tcase_add_test(tc, week_and_fixed_boundaries);
    tcase_add_test(tc, calendar_matches_libc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
