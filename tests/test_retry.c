/* SPDX-License-Identifier: MIT */
/* rl_retry_*: the jitter's bounds, the hint as a floor, giving up, the
 * budget's formula against a model, its window, the hint parser, and one
 * object shared by threads. Every draw is seeded or the test's own. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "testutil.h"
#include "ratelimit.h"

static rl_retry_t *make(rl_retry_config_t *c)
{
    rl_retry_t *r = NULL;
    char err[128];
    int rc = rl_retry_new(&r, c, err, sizeof err);
    ck_assert_msg(rc == 0, "rl_retry_new: %d %s", rc, err);
    return r;
}

static rl_retry_t *seeded(uint64_t seed)
{
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    c.seed = seed;
    c.max_retries = 1000;
    return make(&c);
}

static uint64_t ceiling_of(uint64_t base, uint32_t retry, uint64_t cap)
{
    return retry < 32 && (base << retry) < cap ? base << retry : cap;
}

START_TEST(defaults_are_documented)
{
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    ck_assert_uint_eq(c.size, sizeof c);
    ck_assert_uint_eq(c.base_ms, 100);
    ck_assert_uint_eq(c.throttled_base_ms, 1000);
    ck_assert_uint_eq(c.cap_ms, 20000);
    ck_assert_uint_eq(c.hint_cap_ms, 60000);
    ck_assert_uint_eq(c.max_retries, 5);
    ck_assert_uint_eq(c.budget_k_milli, 2000);
    ck_assert_uint_eq(c.budget_window_ms, 120000);
    ck_assert_uint_eq(c.budget_min_requests, 10);
    ck_assert_uint_eq(c.seed, 0);
    rl_retry_t *r = NULL;
    ck_assert_int_eq(rl_retry_new(&r, NULL, NULL, 0), 0); /* seed from getrandom */
    uint64_t d;
    ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_FAILED, -1, &d), RL_ALLOW);
    ck_assert_uint_le(d, 100);
    ck_assert_int_eq(rl_retry_delay(r, 5, RL_RETRY_FAILED, -1, &d), RL_DENY); /* 5 retries */
    rl_retry_free(r);
    rl_retry_free(NULL);
}
END_TEST

/* Full jitter: retry n waits U(0, min(cap, base x 2^n)), the throttled base
 * after THROTTLED; over many seeded draws both ends of the range are
 * reached and the mean is near its middle. */
START_TEST(jitter_within_bounds)
{
    rl_retry_t *r = seeded(42);
    const int outcomes[2] = {RL_RETRY_FAILED, RL_RETRY_THROTTLED};
    for (int o = 0; o < 2; o++)
        for (uint32_t retry = 0; retry < 24; retry++) { /* capped from retry 8 on */
            uint64_t c = ceiling_of(o ? 1000 : 100, retry, 20000), lo = UINT64_MAX, hi = 0;
            double sum = 0;
            for (int i = 0; i < 2000; i++) {
                uint64_t d;
                ck_assert_int_eq(rl_retry_delay(r, retry, outcomes[o], -1, &d), RL_ALLOW);
                ck_assert_uint_le(d, c);
                lo = d < lo ? d : lo;
                hi = d > hi ? d : hi;
                sum += (double)d;
            }
            ck_assert_uint_le(lo, c / 50);
            ck_assert_uint_ge(hi, c - c / 50);
            double mean = sum / 2000;
            ck_assert_msg(mean > 0.45 * (double)c && mean < 0.55 * (double)c,
                          "retry %u: mean %.1f of ceiling %lu", retry, mean, (unsigned long)c);
        }
    const uint32_t far[] = {31, 32, 63, 64, 999}; /* past any shift: the cap */
    for (size_t i = 0; i < sizeof far / sizeof far[0]; i++)
        for (int k = 0; k < 200; k++) {
            uint64_t d;
            ck_assert_int_eq(rl_retry_delay(r, far[i], RL_RETRY_THROTTLED, -1, &d), RL_ALLOW);
            ck_assert_uint_le(d, 20000);
        }
    rl_retry_free(r);
}
END_TEST

/* A hint is a floor: never before it, at most one ceiling after it. */
START_TEST(hint_is_a_floor)
{
    rl_retry_t *r = seeded(7);
    const int64_t hints[] = {0, 1, 50, 1000, 59999, 60000};
    for (size_t h = 0; h < sizeof hints / sizeof hints[0]; h++)
        for (uint32_t retry = 0; retry < 8; retry++)
            for (int i = 0; i < 500; i++) {
                uint64_t d;
                ck_assert_int_eq(rl_retry_delay(r, retry, RL_RETRY_THROTTLED, hints[h], &d),
                                 RL_ALLOW);
                ck_assert_uint_ge(d, (uint64_t)hints[h]);
                ck_assert_uint_le(d, (uint64_t)hints[h] + ceiling_of(1000, retry, 20000));
            }
    uint64_t d = 1;
    ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_THROTTLED, 60001, &d), RL_DENY);
    ck_assert_uint_eq(d, 60001); /* past hint_cap_ms: give up, saying how long it was */
    ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_OK, -1, &d), RL_EINVAL);
    ck_assert_int_eq(rl_retry_delay(r, 0, 7, -1, &d), RL_EINVAL);
    ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_FAILED, -1, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_retry_delay(NULL, 0, RL_RETRY_FAILED, -1, &d), RL_EINVAL);
    rl_retry_free(r);
}
END_TEST

START_TEST(gives_up_after_max_retries)
{
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    c.seed = 1;
    c.max_retries = 3;
    rl_retry_t *r = make(&c);
    uint64_t d;
    for (uint32_t retry = 0; retry < 3; retry++)
        ck_assert_int_eq(rl_retry_delay(r, retry, RL_RETRY_FAILED, -1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_retry_delay(r, 3, RL_RETRY_FAILED, -1, &d), RL_DENY);
    ck_assert_uint_eq(d, 0);
    ck_assert_int_eq(rl_retry_delay(r, 3, RL_RETRY_THROTTLED, 10, &d), RL_DENY);
    rl_retry_free(r);
    c.max_retries = 0; /* never retry */
    r = make(&c);
    ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_FAILED, -1, &d), RL_DENY);
    rl_retry_free(r);
}
END_TEST

/* The same seed, the same delays; another seed, others. */
START_TEST(seeded_sequences_repeat)
{
    rl_retry_t *a = seeded(2026), *b = seeded(2026), *c = seeded(2027);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t da, db, dc;
        rl_retry_delay(a, 4, RL_RETRY_FAILED, -1, &da);
        rl_retry_delay(b, 4, RL_RETRY_FAILED, -1, &db);
        rl_retry_delay(c, 4, RL_RETRY_FAILED, -1, &dc);
        ck_assert_uint_eq(da, db);
        differ += da != dc;
    }
    ck_assert_int_gt(differ, 90);
    rl_retry_free(a);
    rl_retry_free(b);
    rl_retry_free(c);
}
END_TEST

/* The caller's randomness: the delay is its value modulo ceiling + 1. */
static uint64_t next_value(void *ud)
{
    uint64_t *v = ud;
    return *v;
}

START_TEST(caller_randomness)
{
    uint64_t value = 0;
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    c.random = next_value;
    c.random_ud = &value;
    rl_retry_t *r = make(&c);
    uint64_t d;
    const uint64_t values[] = {0, 1, 99, 100, 101, 12345, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        value = values[i];
        ck_assert_int_eq(rl_retry_delay(r, 0, RL_RETRY_FAILED, -1, &d), RL_ALLOW);
        ck_assert_uint_eq(d, values[i] % 101);
        ck_assert_int_eq(rl_retry_delay(r, 2, RL_RETRY_THROTTLED, 250, &d), RL_ALLOW);
        ck_assert_uint_eq(d, 250 + values[i] % 4001);
    }
    rl_retry_free(r);
}
END_TEST

/* The budget's p = max(0, (requests - K accepts) / (requests + 1)), and
 * rl_retry_admit rejecting exactly when the draw falls below it, against a
 * model fed the same draws, for K = 2 and K = 1.5. */
START_TEST(budget_formula)
{
    const uint32_t ks[] = {2000, 1500};
    for (size_t ki = 0; ki < 2; ki++) {
        uint64_t value = 0;
        rl_retry_config_t c;
        rl_retry_config_init(&c);
        c.random = next_value;
        c.random_ud = &value;
        c.budget_k_milli = ks[ki];
        c.budget_min_requests = 0; /* the formula from the first request */
        rl_retry_t *r = make(&c);
        uint64_t req = 0, acc = 0, lcg = 88172645463325252u;
        for (int i = 0; i < 3000; i++) {
            uint64_t got_req, got_acc;
            uint32_t ppm;
            ck_assert_int_eq(rl_retry_budget(r, 1000, &got_req, &got_acc, &ppm), 0);
            ck_assert_uint_eq(got_req, req);
            ck_assert_uint_eq(got_acc, acc);
            double over = (double)req - (double)acc * ks[ki] / 1000.0;
            double p = over > 0 ? over / (double)(req + 1) : 0;
            ck_assert_msg(ppm + 1 >= (uint32_t)(p * 1e6) && ppm <= (uint32_t)(p * 1e6) + 1,
                          "requests %lu accepts %lu: ppm %u, model %.6f", (unsigned long)req,
                          (unsigned long)acc, ppm, p);
            lcg = lcg * 6364136223846793005u + 1442695040888963407u;
            value = lcg;
            uint64_t n = req * 1000 > acc * ks[ki] ? req * 1000 - acc * ks[ki] : 0;
            int want = n > 0 && value % ((req + 1) * 1000) < n ? RL_DENY : RL_ALLOW;
            ck_assert_int_eq(rl_retry_admit(r, 1000), want);
            req++;
            if ((lcg >> 33) % 5 == 0) { /* one attempt in five is accepted */
                ck_assert_int_eq(rl_retry_record(r, 1000, RL_RETRY_OK), 0);
                acc++;
            } else {
                ck_assert_int_eq(rl_retry_record(r, 1000, (lcg >> 40) & 1 ? RL_RETRY_THROTTLED
                                                                           : RL_RETRY_FAILED),
                                 0);
            }
        }
        rl_retry_free(r);
        /* The edge: one request, no accept: p = 1/2, num 1000 of den 2000. */
        r = make(&c);
        value = 0;
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_ALLOW); /* requests 0: p = 0 */
        value = 999;
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_DENY); /* 999 < 1000 */
        rl_retry_free(r);
        r = make(&c);
        rl_retry_admit(r, 0);
        value = 1000 + 2000 * 12345;
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_ALLOW); /* 1000 is not below 1000 */
        rl_retry_free(r);
        /* Below budget_min_requests nothing is rejected, whatever the draw;
         * from it on, the formula: 3 requests, 0 accepts, p = 3/4. */
        c.budget_min_requests = 3;
        r = make(&c);
        value = 0;
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(rl_retry_admit(r, 0), RL_ALLOW);
        uint32_t ppm3;
        rl_retry_budget(r, 0, NULL, NULL, &ppm3);
        ck_assert_uint_eq(ppm3, 750000);
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_DENY);
        ck_assert_int_eq(rl_retry_record(r, 1000, 3), RL_EINVAL);
        ck_assert_int_eq(rl_retry_admit(NULL, 0), RL_EINVAL);
        ck_assert_int_eq(rl_retry_budget(NULL, 0, NULL, NULL, NULL), RL_EINVAL);
        rl_retry_free(r);
    }
}
END_TEST

/* A client the server refuses wholesale ends up rejecting nearly all its
 * own attempts; once the window has forgotten them it sends again. With
 * K = 0 (off) it never rejects. */
START_TEST(budget_window_forgets)
{
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    c.seed = 5;
    c.budget_window_ms = 8000; /* 8 slots of 1 s */
    rl_retry_t *r = make(&c);
    for (int i = 0; i < 10; i++) { /* a healthy start: 10 sent, 10 accepted */
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_ALLOW);
        rl_retry_record(r, 0, RL_RETRY_OK);
    }
    uint32_t ppm;
    rl_retry_budget(r, 0, NULL, NULL, &ppm);
    ck_assert_uint_eq(ppm, 0);
    int denied = 0;
    for (int i = 0; i < 1000; i++) /* the server refuses everything */
        if (rl_retry_admit(r, 500) == RL_ALLOW)
            rl_retry_record(r, 500, RL_RETRY_THROTTLED);
        else
            denied++;
    ck_assert_int_gt(denied, 900);
    uint64_t req, acc;
    rl_retry_budget(r, 500, &req, &acc, &ppm);
    ck_assert_uint_eq(req, 1010);
    ck_assert_uint_eq(acc, 10);
    ck_assert_uint_eq(ppm, (uint32_t)((1010.0 - 20.0) / 1011.0 * 1e6));
    rl_retry_budget(r, 7999, &req, &acc, NULL); /* still in the window */
    ck_assert_uint_eq(req, 1010);
    rl_retry_budget(r, 8000, &req, &acc, &ppm); /* slot 0 forgotten */
    ck_assert_uint_eq(req, 0);
    ck_assert_uint_eq(ppm, 0);
    ck_assert_int_eq(rl_retry_admit(r, 8000), RL_ALLOW);
    rl_retry_free(r);

    c.budget_k_milli = 0;
    r = make(&c);
    for (int i = 0; i < 1000; i++) {
        ck_assert_int_eq(rl_retry_admit(r, 0), RL_ALLOW);
        rl_retry_record(r, 0, RL_RETRY_FAILED);
    }
    rl_retry_budget(r, 0, &req, NULL, &ppm);
    ck_assert_uint_eq(req, 1000);
    ck_assert_uint_eq(ppm, 0);
    rl_retry_free(r);
}
END_TEST

START_TEST(config_refusals_name_the_field)
{
    static const struct {
        size_t offset;
        uint32_t value;
        const char *field;
    } cases[] = {
        {offsetof(rl_retry_config_t, base_ms), 0, "base_ms"},
        {offsetof(rl_retry_config_t, base_ms), 60001, "base_ms"},
        {offsetof(rl_retry_config_t, throttled_base_ms), 99, "throttled_base_ms"},
        {offsetof(rl_retry_config_t, cap_ms), 999, "cap_ms"},
        {offsetof(rl_retry_config_t, cap_ms), 3600001, "cap_ms"},
        {offsetof(rl_retry_config_t, hint_cap_ms), 86400001, "hint_cap_ms"},
        {offsetof(rl_retry_config_t, max_retries), 1001, "max_retries"},
        {offsetof(rl_retry_config_t, budget_k_milli), 999, "budget_k_milli"},
        {offsetof(rl_retry_config_t, budget_k_milli), 100001, "budget_k_milli"},
        {offsetof(rl_retry_config_t, budget_window_ms), 999, "budget_window_ms"},
        {offsetof(rl_retry_config_t, budget_min_requests), 1000001, "budget_min_requests"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl_retry_config_t c;
        rl_retry_config_init(&c);
        memcpy((char *)&c + cases[i].offset, &cases[i].value, sizeof cases[i].value);
        rl_retry_t *r = (rl_retry_t *)&c;
        char err[160];
        ck_assert_int_eq(rl_retry_new(&r, &c, err, sizeof err), RL_ERANGE);
        ck_assert_ptr_null(r);
        ck_assert_msg(strncmp(err, cases[i].field, strlen(cases[i].field)) == 0 &&
                          err[strlen(cases[i].field)] == ':',
                      "%s: %s", cases[i].field, err);
    }
    rl_retry_config_t c;
    rl_retry_config_init(&c);
    c.size = sizeof c - 8;
    rl_retry_t *r = NULL;
    ck_assert_int_eq(rl_retry_new(&r, &c, NULL, 0), RL_ESIZE);
    ck_assert_int_eq(rl_retry_new(NULL, NULL, NULL, 0), RL_EINVAL);
    rl_retry_config_init_sized(NULL, 64);
}
END_TEST

/* 1994-11-06 08:49:37 UTC, RFC 9110's example date. */
#define EXAMPLE_MS INT64_C(784111777000)

START_TEST(hint_parsing)
{
    static const struct {
        const char *retry_after, *ratelimit;
        int64_t now_offset_ms; /* now = EXAMPLE_MS + this */
        int rc;
        int64_t hint;
    } cases[] = {
        {"120", NULL, 0, 1, 120000},
        {" 5\t", NULL, 0, 1, 5000},
        {"0", NULL, 0, 1, 0},
        {"99999999999999999999", NULL, 0, 1, INT64_C(1000000000000000)},
        {"Sun, 06 Nov 1994 08:49:37 GMT", NULL, -10000, 1, 10000},
        {"Sun, 06 Nov 1994 08:49:37 GMT", NULL, 5000, 1, 0},
        {"Sun, 06 Nov 1994 08:49:37 GMT ", NULL, -1, 1, 1},
        {"Sun, 06 Nov 1994 08:49:37 UTC", NULL, 0, RL_ESPEC, -1},
        {"Sun, 06 Fov 1994 08:49:37 GMT", NULL, 0, RL_ESPEC, -1},
        {"Sunday, 06-Nov-94 08:49:37 GMT", NULL, 0, RL_ESPEC, -1},
        {"-1", NULL, 0, RL_ESPEC, -1},
        {"1.5", NULL, 0, RL_ESPEC, -1},
        {"", NULL, 0, RL_ESPEC, -1},
        {NULL, "\"api\";r=0;t=5", 0, 1, 5000},
        {NULL, "\"api\";r=3;t=5", 0, 0, -1},
        {NULL, "\"a\";r=0;t=2, \"b\";r=0;t=9, \"c\";r=1;t=30", 0, 1, 9000},
        {NULL, "default;r=0;t=4;pk=:YWJj:", 0, 1, 4000},
        {NULL, "\"a\\\"b,c\";r=0;t=3", 0, 1, 3000},
        {NULL, "\"api\";r=zero;t=5", 0, RL_ESPEC, -1},
        {NULL, "\"api\" r=0", 0, RL_ESPEC, -1},
        {NULL, "\"unterminated;r=0;t=1", 0, RL_ESPEC, -1},
        {"3", "\"api\";r=0;t=7", 0, 1, 7000},
        {"30", "\"api\";r=0;t=7", 0, 1, 30000},
        {NULL, NULL, 0, 0, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t hint = 42;
        int rc = rl_retry_hint(cases[i].retry_after, cases[i].ratelimit,
                               (uint64_t)(EXAMPLE_MS + cases[i].now_offset_ms), &hint);
        ck_assert_msg(rc == cases[i].rc && hint == cases[i].hint, "case %zu (%s | %s): %d %lld",
                      i, cases[i].retry_after ? cases[i].retry_after : "-",
                      cases[i].ratelimit ? cases[i].ratelimit : "-", rc, (long long)hint);
    }
    ck_assert_int_eq(rl_retry_hint("1", NULL, 0, NULL), RL_EINVAL);
}
END_TEST

/* What rl_headers writes for a deny reads back as its Retry-After. */
START_TEST(hint_from_rl_headers)
{
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, NULL), 0);
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=api rate=1/m burst=1", err, sizeof err), 0);
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, &d), RL_ALLOW);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, &d), RL_DENY);
    char buf[1024];
    ck_assert_int_gt(rl_headers(&d, buf, sizeof buf), 0);
    char ra[64] = "", rlv[256] = "";
    for (char *line = strtok(buf, "\r\n"); line != NULL; line = strtok(NULL, "\r\n")) {
        if (strncmp(line, "Retry-After: ", 13) == 0)
            snprintf(ra, sizeof ra, "%s", line + 13);
        if (strncmp(line, "RateLimit: ", 11) == 0)
            snprintf(rlv, sizeof rlv, "%s", line + 11);
    }
    int64_t a, b;
    ck_assert_int_eq(rl_retry_hint(ra, NULL, 0, &a), 1);
    ck_assert_int_eq(rl_retry_hint(NULL, rlv, 0, &b), 1);
    uint64_t secs = (d.retry_after_ms + 999) / 1000;
    ck_assert_int_eq(a, (int64_t)(secs * 1000));
    ck_assert_int_eq(b, a);
    rl_close(rl);
}
END_TEST

/* One object shared by threads: every admit and accept counted, no race
 * (TSan runs this). */
enum { THREADS = 8, PER_THREAD = 2000 };

static void *hammer(void *arg)
{
    rl_retry_t *r = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        rl_retry_admit(r, 100);
        rl_retry_record(r, 100, i % 2 ? RL_RETRY_OK : RL_RETRY_THROTTLED);
        uint64_t d;
        rl_retry_delay(r, (uint32_t)(i % 6), RL_RETRY_FAILED, -1, &d);
    }
    return NULL;
}

START_TEST(shared_by_threads)
{
    rl_retry_t *r = seeded(9);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, r), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t req, acc;
    rl_retry_budget(r, 100, &req, &acc, NULL);
    ck_assert_uint_eq(req, THREADS * PER_THREAD);
    ck_assert_uint_eq(acc, THREADS * PER_THREAD / 2);
    rl_retry_free(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("retry");
    TCase *tc = tcase_create("backoff");
    tcase_add_test(tc, defaults_are_documented);
    tcase_add_test(tc, jitter_within_bounds);
    tcase_add_test(tc, hint_is_a_floor);
    tcase_add_test(tc, gives_up_after_max_retries);
    tcase_add_test(tc, seeded_sequences_repeat);
    tcase_add_test(tc, caller_randomness);
    suite_add_tcase(s, tc);
    TCase *tb = tcase_create("budget");
    tcase_add_test(tb, budget_formula);
    tcase_add_test(tb, budget_window_forgets);
    tcase_add_test(tb, config_refusals_name_the_field);
    tcase_add_test(tb, shared_by_threads);
    suite_add_tcase(s, tb);
    TCase *th = tcase_create("hints");
    tcase_add_test(th, hint_parsing);
    tcase_add_test(th, hint_from_rl_headers);
    suite_add_tcase(s, th);
    return s;
}

int main(void) { return rl_test_run(suite()); }
