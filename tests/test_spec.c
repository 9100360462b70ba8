/* SPDX-License-Identifier: MIT */
/* rl_limit_parse: the limit spec grammar, its error codes and messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "base/structsize.h"
#include "local/limitdef.h"

static rl_limit_t parse_ok(const char *spec)
{
    rl_limit_t lim;
    char err[256] = "stale";
    int rc = rl_limit_parse(&lim, spec, err, sizeof err);
    ck_assert_msg(rc == 0, "\"%s\": %s (%s)", spec, rl_err_name(rc), err);
    ck_assert_str_eq(err, "");
    ck_assert_uint_eq(lim.size, sizeof lim); /* the header's rl_limit_parse: this layout */
    return lim;
}

/* The error code, and a message that names `needle` (the offending word). */
static void expect_err(const char *spec, int code, const char *needle)
{
    rl_limit_t lim;
    char err[256];
    memset(err, 'Z', sizeof err);
    int rc = rl_limit_parse(&lim, spec, err, sizeof err);
    ck_assert_msg(rc == code, "\"%s\": got %s, want %s (%s)", spec, rl_err_name(rc),
                  rl_err_name(code), rc == 0 ? "" : err);
    ck_assert_msg(memchr(err, '\0', sizeof err) != NULL, "\"%s\": message not terminated", spec);
    ck_assert_msg(strstr(err, needle) != NULL, "\"%s\": message \"%s\" does not name \"%s\"",
                  spec, err, needle);
}

/* ------------------------------------------------------------ valid specs */

/* Whole specs and every field each parses to: the defaults of a minimal
 * one, and a spec that sets every field. */
static const struct {
    const char *spec, *name;
    uint64_t count, period_ms, burst;
    int32_t mode, on_failure;
    uint64_t degraded_count, degraded_period_ms;
    int32_t shadow;
    uint64_t max_keys;
} whole[] = {
    {"name=api rate=100/s", "api", 100, 1000, 0, RL_MODE_GLOBAL, RL_FAIL_LOCAL, 0, 0, 0, 0},
    {"name=api rate=100/s burst=200 mode=local on_failure=local degraded_rate=20/s shadow=0 "
     "max_keys=100000",
     "api", 100, 1000, 200, RL_MODE_LOCAL, RL_FAIL_LOCAL, 20, 1000, 0, 100000},
};

START_TEST(test_whole_spec)
{
    rl_limit_t lim = parse_ok(whole[_i].spec);
    ck_assert_str_eq(lim.name, whole[_i].name);
    ck_assert_uint_eq(lim.rate.count, whole[_i].count);
    ck_assert_uint_eq(lim.rate.period_ms, whole[_i].period_ms);
    ck_assert_uint_eq(lim.burst, whole[_i].burst);
    ck_assert_int_eq(lim.mode, whole[_i].mode);
    ck_assert_int_eq(lim.on_failure, whole[_i].on_failure);
    ck_assert_uint_eq(lim.degraded_rate.count, whole[_i].degraded_count);
    ck_assert_uint_eq(lim.degraded_rate.period_ms, whole[_i].degraded_period_ms);
    ck_assert_int_eq(lim.shadow, whole[_i].shadow);
    ck_assert_uint_eq(lim.max_keys, whole[_i].max_keys);
}
END_TEST

START_TEST(test_every_field_overwritten)
{
    /* *out starts dirty: the parse must reset what the spec does not set. */
    rl_limit_t lim;
    memset(&lim, 0xA5, sizeof lim);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=x rate=1/s", NULL, 0), 0);
    ck_assert_uint_eq(lim.size, sizeof lim);
    /* The exported function (what a 0.1 binary calls) writes the 0.1
     * layout and leaves the rest of a newer struct alone. */
    memset(&lim, 0xA5, sizeof lim);
    ck_assert_int_eq((rl_limit_parse)(&lim, "name=x rate=1/s", NULL, 0), 0);
    ck_assert_uint_eq(lim.size, RL_LIMIT_SIZE_MIN);
    ck_assert_uint_eq(((unsigned char *)&lim)[RL_LIMIT_SIZE_MIN], 0xA5);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=x rate=1/s", NULL, 0), 0);
    ck_assert_uint_eq(lim.burst, 0);
    ck_assert_int_eq(lim.mode, 0);
    ck_assert_int_eq(lim.on_failure, 0);
    ck_assert_uint_eq(lim.degraded_rate.count, 0);
    ck_assert_uint_eq(lim.degraded_rate.period_ms, 0);
    ck_assert_int_eq(lim.shadow, 0);
    ck_assert_uint_eq(lim.max_keys, 0);
}
END_TEST

static const struct {
    const char *rate;
    uint64_t count, period_ms;
} units[] = {
    {"1/ms", 1, 1},
    {"3/250ms", 3, 250},
    {"100/s", 100, 1000},
    {"5/10s", 5, 10000},
    {"5/m", 5, 60000},
    {"1000/15m", 1000, 900000},
    {"7/h", 7, 3600000},
    {"7/2h", 7, 7200000},
    {"1/d", 1, 86400000},
    {"1/30d", 1, 2592000000u},
    {"1/720h", 1, 2592000000u},
    {"100000000/s", 100000000, 1000},
    {"007/01s", 7, 1000},
    {"1/2592000000ms", 1, 2592000000u},
};

START_TEST(test_units)
{
    char spec[64];
    snprintf(spec, sizeof spec, "name=u rate=%s degraded_rate=%s", units[_i].rate,
             units[_i].rate);
    rl_limit_t lim = parse_ok(spec);
    ck_assert_uint_eq(lim.rate.count, units[_i].count);
    ck_assert_uint_eq(lim.rate.period_ms, units[_i].period_ms);
    ck_assert_uint_eq(lim.degraded_rate.count, units[_i].count);
    ck_assert_uint_eq(lim.degraded_rate.period_ms, units[_i].period_ms);
}
END_TEST

static const struct {
    const char *spec;
    int32_t mode, on_failure, shadow;
} choices[] = {
    {"mode=global", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 0},
    {"mode=local", RL_MODE_LOCAL, RL_FAIL_LOCAL, 0},
    {"mode=exact", RL_MODE_EXACT, RL_FAIL_CLOSED, 0},
    {"mode=tiered", RL_MODE_TIERED, RL_FAIL_CLOSED, 0},
    {"on_failure=local", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 0},
    {"on_failure=open", RL_MODE_GLOBAL, RL_FAIL_OPEN, 0},
    {"on_failure=closed", RL_MODE_GLOBAL, RL_FAIL_CLOSED, 0},
    {"shadow=0", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 0},
    {"shadow=1", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 1},
    {"shadow=false", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 0},
    {"shadow=true", RL_MODE_GLOBAL, RL_FAIL_LOCAL, 1},
    {"mode=tiered on_failure=closed shadow=true", RL_MODE_TIERED, RL_FAIL_CLOSED, 1},
};

START_TEST(test_choices)
{
    char spec[128];
    snprintf(spec, sizeof spec, "name=c rate=1/s %s", choices[_i].spec);
    rl_limit_t lim = parse_ok(spec);
    ck_assert_int_eq(lim.mode, choices[_i].mode);
    ck_assert_int_eq(lim.on_failure, choices[_i].on_failure);
    ck_assert_int_eq(lim.shadow, choices[_i].shadow);
}
END_TEST

START_TEST(test_whitespace_and_order)
{
    rl_limit_t lim = parse_ok(" \t name=a.b:c-d_E9\t\t  burst=5   rate=10/m\t");
    ck_assert_str_eq(lim.name, "a.b:c-d_E9");
    ck_assert_uint_eq(lim.rate.count, 10);
    ck_assert_uint_eq(lim.rate.period_ms, 60000);
    ck_assert_uint_eq(lim.burst, 5);
}
END_TEST

START_TEST(test_limits_at_the_edge)
{
    char spec[128];
    char name[RL_NAME_MAX];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    /* burst 10^9 refills in under 4 years only at 8/s or more. */
    snprintf(spec, sizeof spec, "name=%s rate=1000/s max_keys=4294967295 burst=1000000000",
             name);
    rl_limit_t lim = parse_ok(spec);
    ck_assert_str_eq(lim.name, name);
    ck_assert_uint_eq(lim.max_keys, UINT32_MAX);
    ck_assert_uint_eq(lim.burst, 1000000000);
    lim = parse_ok("name=a rate=1/s max_keys=1 burst=1");
    ck_assert_uint_eq(lim.max_keys, 1);
    ck_assert_uint_eq(lim.burst, 1);
}
END_TEST

START_TEST(test_long_whitespace)
{
    /* Bounded work, nothing kept: a megabyte of blanks around a valid spec. */
    size_t pad = 1u << 20;
    const char *body = "name=big rate=1/s";
    char *spec = malloc(2 * pad + strlen(body) + 1);
    ck_assert_ptr_nonnull(spec);
    memset(spec, ' ', pad);
    strcpy(spec + pad, body);
    memset(spec + pad + strlen(body), '\t', pad);
    spec[2 * pad + strlen(body)] = '\0';
    rl_limit_t lim = parse_ok(spec);
    ck_assert_str_eq(lim.name, "big");
    free(spec);
}
END_TEST

/* ------------------------------------------------------------------ syntax */

/* A spec rl_limit_parse refuses: the error code, and a word its message
 * names (expect_err). */
typedef struct bad_spec {
    const char *spec;
    int code;
    const char *needle;
} bad_spec_t;

static const bad_spec_t syntax_errors[] = {
    /* unknown word */
    {"name=api rate=1/s brust=5", RL_ESPEC, "\"brust\""},
    {"Name=api rate=1/s", RL_ESPEC, "\"Name\""},
    {"name=api rate=1/s =5", RL_ESPEC, "unknown word \"\""},
    {"name=api rate=1/s max_keys2=5", RL_ESPEC, "\"max_keys2\""},
    /* duplicate */
    {"name=api rate=1/s rate=2/s", RL_ESPEC, "duplicate word \"rate\""},
    {"name=a name=b rate=1/s", RL_ESPEC, "\"name\""},
    {"name=a rate=1/s shadow=0 shadow=0", RL_ESPEC, "\"shadow\""},
    /* missing equals */
    {"name=api rate", RL_ESPEC, "\"rate\""},
    {"name=api rate=1/s shadow", RL_ESPEC, "\"shadow\""},
    {"name=api rate =1/s", RL_ESPEC, "\"rate\""},
    /* empty value */
    {"name= rate=1/s", RL_ESPEC, "name"},
    {"name=a rate=", RL_ESPEC, "rate"},
    {"name=a rate=1/s burst=", RL_ESPEC, "burst"},
    {"name=a rate=1/s mode=", RL_ESPEC, "mode"},
    /* missing required */
    {"rate=1/s", RL_ESPEC, "name"},
    {"name=api", RL_ESPEC, "rate"},
    {"name=api burst=5 mode=local", RL_ESPEC, "rate"},
    {"", RL_ESPEC, "name"},
    {" \t ", RL_ESPEC, "name"},
    /* bad unit */
    {"name=a rate=100/x", RL_ESPEC, "unknown unit \"x\""},
    {"name=a rate=100/x", RL_ESPEC, "rate"},
    {"name=a rate=100/sec", RL_ESPEC, "\"sec\""},
    {"name=a rate=100/S", RL_ESPEC, "\"S\""},
    {"name=a rate=100/us", RL_ESPEC, "\"us\""},
    {"name=a rate=100/1.5s", RL_ESPEC, "\".5s\""},
    {"name=a rate=100/s/s", RL_ESPEC, "\"s/s\""},
    {"name=a rate=100/", RL_ESPEC, "no unit"},
    {"name=a rate=100/5", RL_ESPEC, "rate"},
    {"name=a rate=100", RL_ESPEC, "rate"},
    {"name=a rate=100s", RL_ESPEC, "rate"},
    {"name=a rate=1/s degraded_rate=1/y", RL_ESPEC, "degraded_rate"},
    /* first error wins */
    {"name=a/b rate=1/x", RL_ENAME, "name"},
    {"rate=1/x name=a/b", RL_ESPEC, "rate"},
    {"brust=1 rate=1/x", RL_ESPEC, "brust"},
};

START_TEST(test_syntax_error)
{
    expect_err(syntax_errors[_i].spec, syntax_errors[_i].code, syntax_errors[_i].needle);
}
END_TEST

/* ----------------------------------------------------------------- numbers */

static const struct {
    const char *num;
    int code;
} numbers[] = {
    {"-5", RL_ERANGE},
    {"-0", RL_ERANGE},
    {"0", RL_ERANGE},
    {"000", RL_ERANGE},
    {"nan", RL_ERANGE},
    {"NaN", RL_ERANGE},
    {"inf", RL_ERANGE},
    {"-inf", RL_ERANGE},
    {"Infinity", RL_ERANGE},
    {"18446744073709551616", RL_ERANGE},
    {"99999999999999999999999999999999", RL_ERANGE},
    {"1.5", RL_ESPEC},
    {"1.", RL_ESPEC},
    {".5", RL_ESPEC},
    {"1e3", RL_ESPEC},
    {"+5", RL_ESPEC},
    {"0x10", RL_ESPEC},
    {"abc", RL_ESPEC},
    {"5abc", RL_ESPEC},
    {"--5", RL_ESPEC},
    {"-", RL_ESPEC},
    {"nanx", RL_ESPEC},
    {"99999999999999999999999x", RL_ESPEC},
};

/* The same rule for every number: the count, the multiplier, burst, max_keys. */
START_TEST(test_bad_numbers)
{
    const char *n = numbers[_i].num;
    int code = numbers[_i].code;
    char spec[128], needle[64];
    snprintf(needle, sizeof needle, "\"%s\"", n);

    snprintf(spec, sizeof spec, "name=a rate=%s/s", n);
    expect_err(spec, code, "rate: count");
    expect_err(spec, code, needle);
    snprintf(spec, sizeof spec, "name=a rate=1/s degraded_rate=%s/m", n);
    expect_err(spec, code, "degraded_rate: count");
    snprintf(spec, sizeof spec, "name=a rate=1/s burst=%s", n);
    expect_err(spec, code, "burst");
    expect_err(spec, code, needle);
    snprintf(spec, sizeof spec, "name=a rate=1/s max_keys=%s", n);
    expect_err(spec, code, "max_keys");
    expect_err(spec, code, needle);
}
END_TEST

static const bad_spec_t number_errors[] = {
    /* empty count */
    {"name=a rate=/s", RL_ESPEC, "rate: count \"\""},
    /* multiplier */
    {"name=a rate=5/0s", RL_ERANGE, "rate: multiplier \"0\""},
    {"name=a rate=5/00ms", RL_ERANGE, "multiplier"},
    {"name=a rate=5/99999999999999999999999s", RL_ERANGE, "multiplier"},
    /* Fits uint64, but times the unit it would wrap: caught before the multiply. */
    {"name=a rate=1/18446744073709551615d", RL_ERANGE, "rate"},
    {"name=a rate=1/213503982334602d", RL_ERANGE, "30 days"},
    /* uint64 overflow */
    /* UINT64_MAX itself reads fine; the rate check then refuses it. */
    {"name=a rate=18446744073709551615/s", RL_ERANGE, "rate"},
    {"name=a rate=18446744073709551616/s", RL_ERANGE, "too large"},
    {"name=a rate=1/s burst=18446744073709551615", RL_ERANGE, "burst"},
    {"name=a rate=1/s burst=18446744073709551616", RL_ERANGE, "burst"},
    {"name=a rate=1/s max_keys=4294967296", RL_ERANGE, "max_keys"},
};

START_TEST(test_number_error)
{
    expect_err(number_errors[_i].spec, number_errors[_i].code, number_errors[_i].needle);
}
END_TEST

/* ------------------------------------------------------------------ ranges */

static const bad_spec_t range_errors[] = {
    /* rate range */
    {"name=a rate=100000001/s", RL_ERANGE, "rate"},
    {"name=a rate=100001/ms", RL_ERANGE, "100000000/s"},
    {"name=a rate=1/31d", RL_ERANGE, "rate"},
    {"name=a rate=1/721h", RL_ERANGE, "30 days"},
    {"name=a rate=1/2592000001ms", RL_ERANGE, "rate"},
    {"name=a rate=1/s degraded_rate=200000000/s", RL_ERANGE, "degraded_rate"},
    {"name=a rate=1/s degraded_rate=1/31d", RL_ERANGE, "degraded_rate"},
    /* burst range */
    {"name=a rate=1/s burst=1000000001", RL_ERANGE, "burst"},
    {"name=a rate=1/s burst=0", RL_ERANGE, "burst"},
    /* 1500 days to refill: more than 4 years. */
    {"name=a rate=1/d burst=1500", RL_ERANGE, "burst"},
    /* The default burst (count) is checked too. */
    {"name=a rate=1000000001/10d", RL_ERANGE, "burst"},
    /* bad name */
    {"name=a/b rate=1/s", RL_ENAME, "name"},
    {"name=a/b rate=1/s", RL_ENAME, "\"a/b\""},
    {"name=caf\xc3\xa9 rate=1/s", RL_ENAME, "\"caf\\xc3\\xa9\""},
    {"name=a\"b rate=1/s", RL_ENAME, "\"a\\x22b\""},
    {"name=a\nb rate=1/s", RL_ENAME, "\\x0a"},
    {"name=a=b rate=1/s", RL_ENAME, "\"a=b\""},
    /* bad mode */
    {"name=a rate=1/s mode=fast", RL_EMODE, "mode: unknown value \"fast\""},
    {"name=a rate=1/s mode=Local", RL_EMODE, "\"Local\""},
    {"name=a rate=1/s mode=0", RL_EMODE, "mode"},
    {"name=a rate=1/s on_failure=deny", RL_EMODE, "on_failure: unknown value \"deny\""},
    {"name=a rate=1/s on_failure=global", RL_EMODE, "on_failure"},
    /* bad shadow */
    {"name=a rate=1/s shadow=2", RL_ERANGE, "shadow: unknown value \"2\""},
    {"name=a rate=1/s shadow=-1", RL_ERANGE, "shadow"},
    {"name=a rate=1/s shadow=yes", RL_ESPEC, "shadow: unknown value \"yes\""},
    {"name=a rate=1/s shadow=TRUE", RL_ESPEC, "shadow"},
    /* max keys zero */
    {"name=a rate=1/s max_keys=0", RL_ERANGE, "max_keys"},
};

START_TEST(test_range_error)
{
    expect_err(range_errors[_i].spec, range_errors[_i].code, range_errors[_i].needle);
}
END_TEST

START_TEST(test_name_too_long)
{
    char spec[128];
    char name[RL_NAME_MAX + 1];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    snprintf(spec, sizeof spec, "name=%s rate=1/s", name);
    expect_err(spec, RL_ENAME, "name");
    expect_err(spec, RL_ENAME, "longer than 63");
}
END_TEST

START_TEST(test_huge_token)
{
    /* A megabyte-long name: an error, and a message of bounded length. */
    size_t n = 1u << 20;
    char *spec = malloc(n + 32);
    ck_assert_ptr_nonnull(spec);
    strcpy(spec, "rate=1/s name=");
    size_t off = strlen(spec);
    memset(spec + off, 'q', n);
    spec[off + n] = '\0';
    rl_limit_t lim;
    char err[1024];
    ck_assert_int_eq(rl_limit_parse(&lim, spec, err, sizeof err), RL_ENAME);
    ck_assert_ptr_nonnull(strstr(err, "name"));
    ck_assert_ptr_nonnull(strstr(err, "..."));
    ck_assert_uint_lt(strlen(err), 200);

    /* One huge token with no '=' at all. */
    memset(spec, 'w', off + n);
    ck_assert_int_eq(rl_limit_parse(&lim, spec, err, sizeof err), RL_ESPEC);
    ck_assert_ptr_nonnull(strstr(err, "www"));
    ck_assert_uint_lt(strlen(err), 200);
    free(spec);
}
END_TEST

/* near=: tiered mode's confirm threshold, a fraction of the burst in
 * (0, 1], hot='s number form; refused on any other mode. */
START_TEST(test_near)
{
    static const struct {
        const char *v;
        int rc;
        uint32_t ppm;
    } cases[] = {
        {"0.2", 0, 200000},        {"1", 0, 1000000},        {"1.000000", 0, 1000000},
        {"0.000001", 0, 1},        {"0.35", 0, 350000},      {"00.5", 0, 500000},
        {"0", RL_ERANGE, 0},       {"0.000000", RL_ERANGE, 0}, {"-1", RL_ERANGE, 0},
        {"1.000001", RL_ERANGE, 0}, {"2", RL_ERANGE, 0},     {"99999999999", RL_ERANGE, 0},
        {"inf", RL_ERANGE, 0},     {".5", RL_ESPEC, 0},      {"0.", RL_ESPEC, 0},
        {"0.1234567", RL_ESPEC, 0}, {"20%", RL_ESPEC, 0},    {"1e-1", RL_ESPEC, 0},
        {"+0.5", RL_ESPEC, 0},     {"-0.5", RL_ESPEC, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[128], err[256];
        snprintf(spec, sizeof spec, "name=a rate=10/s mode=tiered near=%s", cases[i].v);
        rl_limit_t lim;
        int rc = rl_limit_parse(&lim, spec, err, sizeof err);
        ck_assert_msg(rc == cases[i].rc, "near=%s: %s (%s)", cases[i].v, rl_err_name(rc), err);
        if (rc == 0)
            ck_assert_uint_eq(lim.near_ppm, cases[i].ppm);
        else
            ck_assert_msg(strstr(err, "near") != NULL, "near=%s: %s", cases[i].v, err);
    }
    /* Absent: 0, the default threshold. */
    ck_assert_uint_eq(parse_ok("name=a rate=10/s mode=tiered").near_ppm, 0);
    /* Order does not matter; only tiered takes it. */
    ck_assert_uint_eq(parse_ok("near=0.5 name=a rate=10/s mode=tiered").near_ppm, 500000);
    expect_err("name=a rate=10/s near=0.5", RL_ERANGE, "near: only mode=tiered");
    expect_err("name=a rate=10/s mode=exact near=0.5", RL_ERANGE, "near");
    expect_err("name=a rate=10/s mode=local near=0.5", RL_ERANGE, "near");
    expect_err("name=a rate=10/s mode=tiered near=0.5 near=0.5", RL_ESPEC, "duplicate word \"near\"");
    /* The exported 0.1-layout function has no field for it. */
    rl_limit_t lim;
    char err[256];
    ck_assert_int_eq((rl_limit_parse)(&lim, "name=a rate=10/s mode=tiered near=0.5", err,
                                      sizeof err),
                     RL_ESIZE);
    ck_assert_ptr_nonnull(strstr(err, "near"));
}
END_TEST

/* hot_policy= and hot_every=: keywords and their range; refused where the
 * policy can never apply, each message naming the word. */
START_TEST(test_hot_policy)
{
    rl_limit_t lim = parse_ok("name=a rate=10/s hot=0.5 hot_policy=local");
    ck_assert_int_eq(lim.hot_policy, RL_HOT_POLICY_LOCAL);
    ck_assert_uint_eq(lim.hot_every, 0); /* the default, RL_HOT_EVERY_DEFAULT */
    lim = parse_ok("hot_every=10 name=a hot_policy=local rate=10/s hot=0.5");
    ck_assert_uint_eq(lim.hot_every, 10);
    ck_assert_uint_eq(parse_ok("name=a rate=10/s hot=0.5 hot_policy=local hot_every=2").hot_every,
                      2);
    lim = parse_ok("name=a rate=10/s hot_policy=sync");
    ck_assert_int_eq(lim.hot_policy, RL_HOT_POLICY_SYNC);
    ck_assert_int_eq(parse_ok("name=a rate=10/s").hot_policy, RL_HOT_POLICY_SYNC);
    expect_err("name=a rate=10/s hot=0.5 hot_policy=static", RL_EMODE,
               "hot_policy: unknown value \"static\" (use sync or local)");
    expect_err("name=a rate=10/s hot=0.5 hot_policy=Local", RL_EMODE, "hot_policy");
    expect_err("name=a rate=10/s hot_policy=local", RL_ERANGE, "hot_policy: local needs hot=");
    expect_err("name=a rate=10/s hot=0.5 hot_policy=local mode=local", RL_ERANGE,
               "hot_policy: local applies to mode=global only");
    expect_err("name=a rate=10/s hot=0.5 hot_policy=local mode=exact", RL_ERANGE, "hot_policy");
    expect_err("name=a rate=10/s hot=0.5 hot_policy=local mode=tiered", RL_ERANGE,
               "hot_policy");
    expect_err("name=a rate=10/s hot=0.5 hot_every=4", RL_ERANGE,
               "hot_every: only hot_policy=local");
    expect_err("name=a rate=10/s hot=0.5 hot_policy=sync hot_every=4", RL_ERANGE, "hot_every");
    static const struct {
        const char *v;
        int rc;
    } bad[] = {{"1", RL_ERANGE},  {"0", RL_ERANGE},   {"11", RL_ERANGE}, {"-2", RL_ERANGE},
               {"nan", RL_ERANGE}, {"2.5", RL_ESPEC}, {"x", RL_ESPEC},   {"", RL_ESPEC}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char spec[128];
        snprintf(spec, sizeof spec, "name=a rate=10/s hot=0.5 hot_policy=local hot_every=%s",
                 bad[i].v);
        expect_err(spec, bad[i].rc, "hot_every");
    }
    expect_err("name=a rate=10/s hot=0.5 hot_policy=local hot_policy=local", RL_ESPEC,
               "duplicate word \"hot_policy\"");
    /* A struct without the fields: sync is their default (nothing to
     * write), local has no field to go in. */
    char err[256];
    ck_assert_int_eq((rl_limit_parse)(&lim, "name=a rate=10/s hot_policy=sync", err, sizeof err),
                     0);
    ck_assert_int_eq(rl_limit_parse_sized(&lim, offsetof(rl_limit_t, hot_policy),
                                          "name=a rate=10/s hot=0.5 hot_policy=local", err,
                                          sizeof err),
                     RL_ESIZE);
    ck_assert_ptr_nonnull(strstr(err, "hot_policy"));
    /* Set directly: rl_limit_add's validation, the field named. */
    rl_t *rl = NULL;
    rl_config_t c;
    rl_config_init(&c);
    c.log_quiet = 1;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    lim = parse_ok("name=a rate=10/s hot=0.5 hot_policy=local");
    lim.hot_every = 1;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.hot_every = RL_HOT_EVERY_MAX + 1;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.hot_every = RL_HOT_EVERY_MAX;
    lim.hot_policy = 2;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_EMODE);
    lim.hot_policy = RL_HOT_POLICY_LOCAL;
    lim.hot_ppm = 0;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.hot_ppm = 500000;
    lim.mode = RL_MODE_TIERED;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.mode = RL_MODE_GLOBAL;
    lim.hot_policy = RL_HOT_POLICY_SYNC;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE); /* hot_every without local */
    lim.hot_policy = RL_HOT_POLICY_LOCAL;
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    char msg[256];
    rl_limit_t bad_lim = lim;
    bad_lim.hot_every = 1;
    ck_assert_int_eq(rl__limit_validate(&bad_lim, msg, sizeof msg), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(msg, "hot_every: 1 is outside 2..10"));
    rl_close(rl);
}
END_TEST

/* Set directly: the same range, and the same refusal outside tiered. */
START_TEST(test_near_field)
{
    rl_limit_t lim = parse_ok("name=a rate=10/s mode=tiered");
    rl_t *rl = NULL;
    rl_config_t c;
    rl_config_init(&c);
    c.log_quiet = 1;
    c.redis_url = "redis://127.0.0.1:1"; /* tiered needs one; never reached */
    c.key_secret = "spec-test-secret-0123456789";
    c.key_secret_len = 27;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    lim.near_ppm = RL_NEAR_PPM_MAX + 1;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.near_ppm = RL_NEAR_PPM_MAX;
    lim.mode = RL_MODE_GLOBAL;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.mode = RL_MODE_TIERED;
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    rl_limit_t got;
    rl_limit_init(&got);
    ck_assert_int_eq(rl_limit_get(rl, id, &got), 0);
    ck_assert_uint_eq(got.near_ppm, RL_NEAR_PPM_MAX);
    /* An update leaving tiered must clear it. */
    got.mode = RL_MODE_GLOBAL;
    ck_assert_int_eq(rl_limit_update(rl, id, &got), RL_ERANGE);
    got.near_ppm = 0;
    ck_assert_int_eq(rl_limit_update(rl, id, &got), 0);
    rl_close(rl);
}
END_TEST

/* ---------------------------------------------------- arguments and buffers */

START_TEST(test_null_arguments)
{
    rl_limit_t lim;
    char err[64];
    ck_assert_int_eq(rl_limit_parse(NULL, "name=a rate=1/s", err, sizeof err), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "out"));
    ck_assert_int_eq(rl_limit_parse(&lim, NULL, err, sizeof err), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "spec"));
    ck_assert_int_eq(rl_limit_parse(NULL, NULL, NULL, 0), RL_EINVAL);
}
END_TEST

START_TEST(test_err_null_or_empty)
{
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/x", NULL, 0), RL_ESPEC);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/x", NULL, 100), RL_ESPEC);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/s", NULL, 0), 0);

    char err[8];
    memset(err, 'Z', sizeof err);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/x", err, 0), RL_ESPEC);
    for (size_t i = 0; i < sizeof err; i++)
        ck_assert_int_eq(err[i], 'Z');

    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/x", err, 1), RL_ESPEC);
    ck_assert_int_eq(err[0], '\0');
    for (size_t i = 1; i < sizeof err; i++)
        ck_assert_int_eq(err[i], 'Z');
}
END_TEST

START_TEST(test_err_truncation)
{
    const char *spec = "name=a rate=1/s brust=5";
    rl_limit_t lim;
    char full[256];
    ck_assert_int_eq(rl_limit_parse(&lim, spec, full, sizeof full), RL_ESPEC);
    ck_assert_uint_gt(strlen(full), 16);

    for (size_t len = 2; len <= 16; len++) {
        char err[32];
        memset(err, 'Z', sizeof err);
        ck_assert_int_eq(rl_limit_parse(&lim, spec, err, len), RL_ESPEC);
        ck_assert_uint_eq(strlen(err), len - 1);
        ck_assert_int_eq(strncmp(err, full, len - 1), 0);
        for (size_t i = len; i < sizeof err; i++)
            ck_assert_int_eq(err[i], 'Z');
    }
}
END_TEST

START_TEST(test_err_cleared_on_success)
{
    rl_limit_t lim;
    char err[64] = "left over";
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=1/s", err, sizeof err), 0);
    ck_assert_str_eq(err, "");
}
END_TEST

static Suite *spec_suite(void)
{
    Suite *s = suite_create("spec");
    TCase *ok = tcase_create("valid");
    tcase_add_loop_test(ok, test_whole_spec, 0, (int)(sizeof whole / sizeof whole[0]));
    tcase_add_test(ok, test_every_field_overwritten);
    tcase_add_loop_test(ok, test_units, 0, (int)(sizeof units / sizeof units[0]));
    tcase_add_loop_test(ok, test_choices, 0, (int)(sizeof choices / sizeof choices[0]));
    tcase_add_test(ok, test_whitespace_and_order);
    tcase_add_test(ok, test_limits_at_the_edge);
    tcase_add_test(ok, test_long_whitespace);
    suite_add_tcase(s, ok);

    TCase *syn = tcase_create("syntax");
    tcase_add_loop_test(syn, test_syntax_error, 0,
                        (int)(sizeof syntax_errors / sizeof syntax_errors[0]));
    suite_add_tcase(s, syn);

    TCase *num = tcase_create("numbers");
    tcase_add_loop_test(num, test_bad_numbers, 0, (int)(sizeof numbers / sizeof numbers[0]));
    tcase_add_loop_test(num, test_number_error, 0,
                        (int)(sizeof number_errors / sizeof number_errors[0]));
    suite_add_tcase(s, num);

    TCase *range = tcase_create("ranges");
    tcase_add_loop_test(range, test_range_error, 0,
                        (int)(sizeof range_errors / sizeof range_errors[0]));
    tcase_add_test(range, test_name_too_long);
    tcase_add_test(range, test_huge_token);
    tcase_add_test(range, test_near);
    tcase_add_test(range, test_near_field);
    tcase_add_test(range, test_hot_policy);
    suite_add_tcase(s, range);

    TCase *args = tcase_create("arguments");
    tcase_add_test(args, test_null_arguments);
    tcase_add_test(args, test_err_null_or_empty);
    tcase_add_test(args, test_err_truncation);
    tcase_add_test(args, test_err_cleared_on_success);
    suite_add_tcase(s, args);
    return s;
}

int main(void)
{
    return rl_test_run(spec_suite());
}
