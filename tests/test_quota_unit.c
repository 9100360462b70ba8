/* SPDX-License-Identifier: MIT */
/*
 * Quotas without Redis: the spec grammar and its every error, the UTC
 * period arithmetic (checked at the calendar's awkward boundaries and
 * against libc's gmtime_r over random moments), and the journal's ring.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "quotadef.h"
#include "quotajournal.h"
#include "quotaperiod.h"
#include "alloc.h"

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

/* ------------------------------------------------------------- the spec */

START_TEST(parse_full_spec)
{
    rl_quota_t q;
    char err[200];
    ck_assert_int_eq(rl_quota_parse(&q, "name=plan amount=1000000 period=month dedup=24h "
                                        "on_failure=open", err, sizeof err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(q.size, sizeof q);
    ck_assert_str_eq(q.name, "plan");
    ck_assert_uint_eq(q.amount, 1000000);
    ck_assert_int_eq(q.period, RL_PERIOD_MONTH);
    ck_assert_uint_eq(q.dedup_ms, 24 * HOUR);
    ck_assert_int_eq(q.on_failure, RL_FAIL_OPEN);
    ck_assert_int_eq(rl_quota_parse(&q, "name=sms amount=500 period=30d", err, sizeof err), 0);
    ck_assert_int_eq(q.period, RL_PERIOD_FIXED);
    ck_assert_uint_eq(q.period_ms, 30 * DAY);
    ck_assert_int_eq(q.on_failure, RL_FAIL_CLOSED); /* the defaults */
    ck_assert_uint_eq(q.dedup_ms, DAY);
    const char *kinds[] = {"hour", "day", "week", "month"};
    for (int i = 0; i < 4; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "name=p amount=1 period=%s", kinds[i]);
        ck_assert_int_eq(rl_quota_parse(&q, spec, err, sizeof err), 0);
        ck_assert_int_eq(q.period, i);
        ck_assert_uint_eq(q.period_ms, 0);
        ck_assert_str_eq(rl__quota_period_name(q.period), kinds[i]);
    }
    ck_assert_int_eq(rl_quota_parse(&q, "  name=p\tamount=9007199254740991 dedup=1s  ", err,
                                    sizeof err), 0);
    ck_assert_uint_eq(q.amount, RL_QUOTA_AMOUNT_MAX);
}
END_TEST

static const struct {
    const char *spec;
    int code;
    const char *names; /* the message must contain this */
} bad_specs[] = {
    {"", RL_ESPEC, "missing name"},
    {"name=p", RL_ESPEC, "missing amount"},
    {"amount=5", RL_ESPEC, "missing name"},
    {"name=p amount=5 colour=red", RL_ESPEC, "\"colour\""},
    {"name=p amount=5 amount=6", RL_ESPEC, "duplicate word \"amount\""},
    {"name=p amount", RL_ESPEC, "\"amount\" has no '='"},
    {"name=p amount=", RL_ESPEC, "amount: empty"},
    {"name=p amount=0", RL_ERANGE, "amount: \"0\""},
    {"name=p amount=9007199254740992", RL_ERANGE, "amount: \"9007199254740992\""},
    {"name=p amount=99999999999999999999999", RL_ERANGE, "amount"},
    {"name=p amount=1.5", RL_ESPEC, "amount: \"1.5\""},
    {"name=p amount=-3", RL_ESPEC, "amount: \"-3\""},
    {"name=p amount=5 period=fortnight", RL_ESPEC, "period: unknown value \"fortnight\""},
    {"name=p amount=5 period=fixed", RL_ESPEC, "period"},
    {"name=p amount=5 period=30", RL_ESPEC, "period: \"30\" has no unit"},
    {"name=p amount=5 period=30x", RL_ESPEC, "period: \"30x\" has unknown unit \"x\""},
    {"name=p amount=5 period=0d", RL_ERANGE, "period: \"0\" must be at least 1"},
    {"name=p amount=5 period=500ms", RL_ERANGE, "period: \"500ms\""},
    {"name=p amount=5 period=401d", RL_ERANGE, "period: \"401d\""},
    {"name=p amount=5 period=99999999999999999999d", RL_ERANGE, "period"},
    {"name=p amount=5 dedup=abc", RL_ESPEC, "dedup: \"abc\""},
    {"name=p amount=5 dedup=0s", RL_ERANGE, "dedup: \"0\" must be at least 1"},
    {"name=p amount=5 dedup=999ms", RL_ERANGE, "dedup: \"999ms\""},
    {"name=p amount=5 dedup=32d", RL_ERANGE, "dedup: \"32d\""},
    {"name=p amount=5 on_failure=local", RL_EMODE, "on_failure: unknown value \"local\""},
    {"name=p amount=5 on_failure=maybe", RL_EMODE, "on_failure"},
    {"name=p/q amount=5", RL_ENAME, "name: \"p/q\""},
    {"name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa amount=5", RL_ENAME,
     "longer than 63"},
    {"name=p\x01 amount=5", RL_ENAME, "\\x01"},
};

START_TEST(parse_errors_name_the_word)
{
    rl_quota_t q;
    char err[300];
    ck_assert_int_eq(rl_quota_parse(NULL, "name=p amount=1", err, sizeof err), RL_EINVAL);
    ck_assert_int_eq(rl_quota_parse(&q, NULL, err, sizeof err), RL_EINVAL);
    for (size_t i = 0; i < sizeof bad_specs / sizeof bad_specs[0]; i++) {
        snprintf(err, sizeof err, "stale");
        int rc = rl_quota_parse(&q, bad_specs[i].spec, err, sizeof err);
        ck_assert_msg(rc == bad_specs[i].code, "\"%s\": %s, expected %s (%s)",
                      bad_specs[i].spec, rl_err_name(rc), rl_err_name(bad_specs[i].code), err);
        ck_assert_msg(strstr(err, bad_specs[i].names) != NULL,
                      "\"%s\": message \"%s\" does not say \"%s\"", bad_specs[i].spec, err,
                      bad_specs[i].names);
    }
    /* No buffer: the code alone. */
    ck_assert_int_eq(rl_quota_parse(&q, "name=p", NULL, 0), RL_ESPEC);
}
END_TEST

START_TEST(validate_fields)
{
    rl_quota_t q;
    rl_quota_init(&q);
    strcpy(q.name, "v");
    q.amount = 1;
    ck_assert_int_eq(rl__quota_validate(&q, NULL, 0), 0);
    char err[200];
    rl_quota_t b = q;
    b.amount = 0;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "amount"));
    b = q;
    b.period = 7;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    b = q;
    b.period_ms = 1000; /* a calendar period with a length */
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "period_ms"));
    b = q;
    b.period = RL_PERIOD_FIXED;
    b.period_ms = 1500; /* not whole seconds */
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    b.period_ms = 0;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    b = q;
    b.dedup_ms = 0;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "dedup_ms"));
    b = q;
    b.on_failure = RL_FAIL_LOCAL;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_EMODE);
    b = q;
    b.name[0] = '\0';
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ENAME);
    b = q;
    b.size = 8;
    ck_assert_int_eq(rl__quota_validate(&b, err, sizeof err), RL_ESIZE);
}
END_TEST

/* ---------------------------------------------------------- the journal */

START_TEST(journal_is_a_bounded_fifo)
{
    rl_allocator_t a = {0};
    rl__alloc_defaults(&a);
    rl_qjournal_t j;
    ck_assert_int_eq(rl__qjournal_init(&j, &a, 4), 0);
    rl_qjentry_t e = {0}, out;
    ck_assert_int_eq(rl__qjournal_peek(&j, &out), -1);
    uint64_t next_in = 1, next_out = 1;
    /* Around the ring several times: full refuses, order is kept. */
    for (int round = 0; round < 5; round++) {
        while (j.len < 4) {
            e.cost = next_in++;
            ck_assert_int_eq(rl__qjournal_push(&j, &e), 0);
        }
        e.cost = 999;
        ck_assert_int_eq(rl__qjournal_push(&j, &e), -1);
        for (int k = 0; k < 3; k++) {
            ck_assert_int_eq(rl__qjournal_peek(&j, &out), 0);
            ck_assert_uint_eq(out.cost, next_out++);
            rl__qjournal_pop(&j);
        }
    }
    rl__qjournal_destroy(&j, &a);
    /* A journal of 0 keeps nothing. */
    ck_assert_int_eq(rl__qjournal_init(&j, &a, 0), 0);
    ck_assert_int_eq(rl__qjournal_push(&j, &e), -1);
    rl__qjournal_pop(&j);
    rl__qjournal_destroy(&j, &a);
}
END_TEST

START_TEST(local_only_has_no_quotas)
{
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, NULL), 0);
    rl_quota_t q;
    ck_assert_int_eq(rl_quota_parse(&q, "name=p amount=5", NULL, 0), 0);
    ck_assert_int_eq(rl_quota_add(rl, &q), RL_ENOTSUP);
    ck_assert_int_eq(rl_quota_charge(rl, 0, "k", 1, 1, "id", 2, NULL), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_get(rl, 0, "k", 1, NULL), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_remove(rl, 0), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_add(NULL, &q), RL_EINVAL);
    ck_assert_int_eq(rl_quota_add(rl, NULL), RL_EINVAL);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quota_unit");
    TCase *tc = tcase_create("period");
    tcase_add_test(tc, month_boundaries);
    tcase_add_test(tc, week_and_fixed_boundaries);
    tcase_add_test(tc, calendar_matches_libc);
    suite_add_tcase(s, tc);
    tc = tcase_create("spec");
    tcase_add_test(tc, parse_full_spec);
    tcase_add_test(tc, parse_errors_name_the_word);
    tcase_add_test(tc, validate_fields);
    tcase_add_test(tc, journal_is_a_bounded_fifo);
    tcase_add_test(tc, local_only_has_no_quotas);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
