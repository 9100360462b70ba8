/* SPDX-License-Identifier: MIT */
/*
 * Quotas without Redis (quota/spec.c): the spec grammar and its every error,
 * the struct's validation, and an instance with no Redis refusing quotas.
 */
#include <stdio.h>
#include <string.h>
#include "testutil.h"
#include "quota/spec.h"
#include "quota/period.h"

#define DAY UINT64_C(86400000)
#define HOUR UINT64_C(3600000)


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
    Suite *s = suite_create("quota_spec");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, parse_full_spec);
    tcase_add_test(tc, parse_errors_name_the_word);
    tcase_add_test(tc, validate_fields);
    tcase_add_test(tc, local_only_has_no_quotas);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
