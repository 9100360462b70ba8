/* SPDX-License-Identifier: MIT */
/* rl_headers: exact rendering, rounding, saturation, ABI sizes, snprintf contract. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "base/structsize.h"

/* Big enough for any rendering (the worst case is 517 bytes). */
#define OUT_CAP 1024

/* A decision as a current caller fills it (rl_decision_init is not needed:
 * rl_headers only reads, and this keeps the suite free of other modules). */
static rl_decision_t mk(int32_t allowed, uint64_t limit, uint64_t remaining, uint64_t reset_ms,
                        uint64_t retry_after_ms, uint64_t window_ms, const char *policy)
{
    rl_decision_t d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.allowed = allowed;
    d.limit = limit;
    d.remaining = remaining;
    d.reset_ms = reset_ms;
    d.retry_after_ms = retry_after_ms;
    d.window_ms = window_ms;
    d.burst = limit;
    d.policy = policy;
    return d;
}

/* Render into out (OUT_CAP) and check the return value matches the text. */
static void render(const rl_decision_t *d, char *out)
{
    memset(out, 'Z', OUT_CAP);
    int n = rl_headers(d, out, OUT_CAP);
    ck_assert_int_ge(n, 0);
    ck_assert_int_lt(n, OUT_CAP);
    ck_assert_uint_eq(strlen(out), (size_t)n);
}

/* The value of header `name` ("Name: value\r\n") in out, as a string. */
static const char *field(const char *out, const char *name, char *val, size_t cap)
{
    size_t nl = strlen(name);
    for (const char *p = out; *p != '\0';) {
        const char *eol = strstr(p, "\r\n");
        ck_assert_ptr_nonnull(eol);
        if ((size_t)(eol - p) > nl + 2 && memcmp(p, name, nl) == 0 && p[nl] == ':' &&
            p[nl + 1] == ' ') {
            size_t vl = (size_t)(eol - p) - nl - 2;
            ck_assert_uint_lt(vl, cap);
            memcpy(val, p + nl + 2, vl);
            val[vl] = '\0';
            return val;
        }
        p = eol + 2;
    }
    return NULL;
}

START_TEST(allow_exact)
{
    char out[OUT_CAP];
    rl_decision_t d = mk(RL_ALLOW, 100, 99, 600, 0, 60000, "api");
    render(&d, out);
    ck_assert_str_eq(out, "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                          "RateLimit: \"api\";r=99;t=1\r\n"
                          "X-RateLimit-Limit: 100\r\n"
                          "X-RateLimit-Remaining: 99\r\n"
                          "X-RateLimit-Reset: 1\r\n");
}
END_TEST

START_TEST(deny_exact)
{
    char out[OUT_CAP];
    rl_decision_t d = mk(RL_DENY, 10, 0, 9500, 1200, 10000, "login:per-ip_v2.1");
    render(&d, out);
    ck_assert_str_eq(out, "RateLimit-Policy: \"login:per-ip_v2.1\";q=10;w=10\r\n"
                          "RateLimit: \"login:per-ip_v2.1\";r=0;t=2\r\n"
                          "X-RateLimit-Limit: 10\r\n"
                          "X-RateLimit-Remaining: 0\r\n"
                          "X-RateLimit-Reset: 10\r\n"
                          "Retry-After: 2\r\n");
}
END_TEST

/* Anything but RL_ALLOW is a refusal: Retry-After appears. */
START_TEST(non_allow_values_deny)
{
    char out[OUT_CAP], v[64];
    rl_decision_t d = mk(-1, 10, 0, 0, 5000, 1000, "x");
    render(&d, out);
    ck_assert_str_eq(field(out, "Retry-After", v, sizeof v), "5");
    d.allowed = 2;
    render(&d, out);
    ck_assert_str_eq(field(out, "Retry-After", v, sizeof v), "5");
    d.allowed = RL_ALLOW;
    d.retry_after_ms = 7000; /* ignored on an allow */
    render(&d, out);
    ck_assert_ptr_null(field(out, "Retry-After", v, sizeof v));
}
END_TEST

static const struct {
    uint64_t ms;
    const char *s;
} retry_cases[] = {
    {0, "1"}, /* a deny always asks for a wait: 0 would invite a doomed retry */
    {1, "1"},
    {999, "1"},
    {1000, "1"},
    {1001, "2"},
    {1999, "2"},
    {2000, "2"},
    {86400000, "86400"},
    {UINT64_C(18446744073709551000), "18446744073709551"},
    {UINT64_MAX - 1, "18446744073709552"},
    {UINT64_MAX, "18446744073709552"}, /* (ms + 999) / 1000 would wrap to 0 */
};

START_TEST(retry_after_rounding)
{
    char out[OUT_CAP], v[64];
    rl_decision_t d = mk(RL_DENY, 10, 0, 0, retry_cases[_i].ms, 1000, "p");
    render(&d, out);
    ck_assert_str_eq(field(out, "Retry-After", v, sizeof v), retry_cases[_i].s);
}
END_TEST

static const struct {
    uint64_t ms;
    const char *s;  /* X-RateLimit-Reset */
    const char *rl; /* RateLimit, saturated at 15 digits */
} reset_cases[] = {
    {0, "0", "\"p\";r=3;t=0"},
    {1, "1", "\"p\";r=3;t=1"},
    {1000, "1", "\"p\";r=3;t=1"},
    {1001, "2", "\"p\";r=3;t=2"},
    {59999, "60", "\"p\";r=3;t=60"},
    {UINT64_C(999999999999999000), "999999999999999", "\"p\";r=3;t=999999999999999"},
    {UINT64_C(999999999999999001), "1000000000000000", "\"p\";r=3;t=999999999999999"},
    {UINT64_MAX, "18446744073709552", "\"p\";r=3;t=999999999999999"},
};

START_TEST(reset_rounding)
{
    char out[OUT_CAP], v[64];
    rl_decision_t d = mk(RL_ALLOW, 10, 3, reset_cases[_i].ms, 0, 1000, "p");
    render(&d, out);
    ck_assert_str_eq(field(out, "X-RateLimit-Reset", v, sizeof v), reset_cases[_i].s);
    ck_assert_str_eq(field(out, "RateLimit", v, sizeof v), reset_cases[_i].rl);
}
END_TEST

static const struct {
    uint64_t ms;
    const char *w;
} window_cases[] = {
    {0, "1"}, {1, "1"}, {1000, "1"}, {1500, "2"}, {3600000, "3600"},
    {UINT64_C(2592000000), "2592000"}, /* 30 days, the longest period */
    {UINT64_MAX, "999999999999999"},
};

START_TEST(window_rounding)
{
    char out[OUT_CAP], v[64], want[64];
    rl_decision_t d = mk(RL_ALLOW, 5, 5, 0, 0, window_cases[_i].ms, "w");
    render(&d, out);
    strcpy(want, "\"w\";q=5;w=");
    strcat(want, window_cases[_i].w);
    ck_assert_str_eq(field(out, "RateLimit-Policy", v, sizeof v), want);
}
END_TEST

/* Full 20-digit values in the plain fields; Structured Field integers
 * saturate at 15 digits so the field stays valid. */
START_TEST(uint64_max_fields)
{
    char out[OUT_CAP];
    rl_decision_t d = mk(RL_DENY, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                         "big");
    render(&d, out);
    ck_assert_str_eq(out, "RateLimit-Policy: \"big\";q=999999999999999;w=999999999999999\r\n"
                          "RateLimit: \"big\";r=999999999999999;t=999999999999999\r\n"
                          "X-RateLimit-Limit: 18446744073709551615\r\n"
                          "X-RateLimit-Remaining: 18446744073709551615\r\n"
                          "X-RateLimit-Reset: 18446744073709552\r\n"
                          "Retry-After: 18446744073709552\r\n");
}
END_TEST

START_TEST(sf_integer_boundary)
{
    char out[OUT_CAP], v[64];
    rl_decision_t d = mk(RL_ALLOW, UINT64_C(999999999999999), UINT64_C(1000000000000000), 0, 0,
                         1000, "b");
    render(&d, out);
    ck_assert_str_eq(field(out, "RateLimit-Policy", v, sizeof v), "\"b\";q=999999999999999;w=1");
    ck_assert_str_eq(field(out, "RateLimit", v, sizeof v), "\"b\";r=999999999999999;t=0");
    ck_assert_str_eq(field(out, "X-RateLimit-Remaining", v, sizeof v), "1000000000000000");
}
END_TEST

START_TEST(policy_null_and_empty)
{
    char out[OUT_CAP];
    const char *want = "RateLimit-Policy: \"default\";q=3;w=1\r\n"
                       "RateLimit: \"default\";r=2;t=1\r\n"
                       "X-RateLimit-Limit: 3\r\n"
                       "X-RateLimit-Remaining: 2\r\n"
                       "X-RateLimit-Reset: 1\r\n";
    rl_decision_t d = mk(RL_ALLOW, 3, 2, 334, 0, 1000, NULL);
    render(&d, out);
    ck_assert_str_eq(out, want);
    d.policy = "";
    render(&d, out);
    ck_assert_str_eq(out, want);
}
END_TEST

/* Names outside the contract still give valid sf-strings, never a new line. */
START_TEST(policy_escaping)
{
    char out[OUT_CAP], v[256];
    rl_decision_t d = mk(RL_ALLOW, 1, 1, 0, 0, 1000, "a\"b\\c d\r\nX-Evil: 1\x7f\xc3\xa9");
    render(&d, out);
    ck_assert_str_eq(field(out, "RateLimit-Policy", v, sizeof v),
                     "\"a\\\"b\\\\c d__X-Evil: 1___\";q=1;w=1");
    ck_assert_ptr_null(field(out, "X-Evil", v, sizeof v));
}
END_TEST

/* At most RL_NAME_MAX - 1 bytes of the name are read and rendered. */
START_TEST(policy_length_bound)
{
    char name[RL_NAME_MAX + 20], want[RL_NAME_MAX + 40], out[OUT_CAP], v[256];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    rl_decision_t d = mk(RL_ALLOW, 1, 1, 0, 0, 1000, name);
    render(&d, out);
    want[0] = '"';
    memset(want + 1, 'n', RL_NAME_MAX - 1);
    strcpy(want + RL_NAME_MAX, "\";q=1;w=1");
    ck_assert_str_eq(field(out, "RateLimit-Policy", v, sizeof v), want);
    /* Exactly 63 bytes: all of it. */
    name[RL_NAME_MAX - 1] = '\0';
    render(&d, out);
    ck_assert_str_eq(field(out, "RateLimit-Policy", v, sizeof v), want);
}
END_TEST

/* The longest possible text: escaped 63-byte name, every value maximal, deny. */
START_TEST(worst_case_length)
{
    char name[RL_NAME_MAX], out[OUT_CAP];
    memset(name, '"', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    rl_decision_t d = mk(RL_DENY, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                         name);
    ck_assert_int_eq(rl_headers(&d, NULL, 0), 517);
    render(&d, out);
    ck_assert_uint_eq(strlen(out), 517);
}
END_TEST

/* A decision from a caller built against the first layout (no window_ms,
 * burst, policy): exactly that many bytes, so reading past them is caught by
 * ASan and valgrind. */
START_TEST(old_size_struct)
{
    char out[OUT_CAP];
    const char *want = "X-RateLimit-Limit: 100\r\n"
                       "X-RateLimit-Remaining: 0\r\n"
                       "X-RateLimit-Reset: 3\r\n"
                       "Retry-After: 1\r\n";
    rl_decision_t full = mk(RL_DENY, 100, 0, 2001, 10, 60000, "api");
    size_t sz = RL_DECISION_SIZE_MIN;
    ck_assert_uint_eq(sz, offsetof(rl_decision_t, window_ms));
    full.size = sz;
    void *old = malloc(sz);
    ck_assert_ptr_nonnull(old);
    memcpy(old, &full, sz);
    render(old, out);
    ck_assert_str_eq(out, want);
    free(old);

    /* A size that covers window_ms but not policy: still no policy lines. */
    full.size = offsetof(rl_decision_t, policy);
    render(&full, out);
    ck_assert_str_eq(out, want);
    full.size = offsetof(rl_decision_t, policy) + sizeof(full.policy) - 1;
    render(&full, out);
    ck_assert_str_eq(out, want);
}
END_TEST

/* A newer caller's larger struct: accepted, whatever its tail holds. */
START_TEST(larger_struct)
{
    struct {
        rl_decision_t d;
        uint64_t future[4];
    } big;
    char out[OUT_CAP];
    memset(&big, 0xa5, sizeof big);
    big.d = mk(RL_ALLOW, 100, 99, 600, 0, 60000, "api");
    big.d.size = sizeof big;
    render(&big.d, out);
    ck_assert_str_eq(out, "RateLimit-Policy: \"api\";q=100;w=60\r\n"
                          "RateLimit: \"api\";r=99;t=1\r\n"
                          "X-RateLimit-Limit: 100\r\n"
                          "X-RateLimit-Remaining: 99\r\n"
                          "X-RateLimit-Reset: 1\r\n");
}
END_TEST

/* snprintf contract: every len gives the same return and a NUL-terminated
 * prefix, and nothing past len is touched. */
static void check_prefixes(const rl_decision_t *d)
{
    char full[OUT_CAP], buf[OUT_CAP + 8];
    int n = rl_headers(d, NULL, 0);
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, OUT_CAP);
    ck_assert_int_eq(rl_headers(d, full, sizeof full), n);
    ck_assert_uint_eq(strlen(full), (size_t)n);
    for (size_t len = 0; len <= (size_t)n + 1; len++) {
        memset(buf, 'Z', sizeof buf);
        ck_assert_int_eq(rl_headers(d, buf, len), n);
        if (len > 0) {
            size_t w = len - 1 < (size_t)n ? len - 1 : (size_t)n;
            ck_assert_uint_eq(strlen(buf), w);
            ck_assert_int_eq(memcmp(buf, full, w), 0);
        }
        for (size_t i = len; i < sizeof buf; i++)
            ck_assert_msg(buf[i] == 'Z', "len %zu: byte %zu written", len, i);
    }
    /* len 0 with a real buffer writes nothing either. */
    memset(buf, 'Z', sizeof buf);
    ck_assert_int_eq(rl_headers(d, buf, 0), n);
    ck_assert_int_eq(buf[0], 'Z');
}

START_TEST(snprintf_contract)
{
    rl_decision_t d = mk(RL_DENY, 100, 0, 2001, 1500, 60000, "api");
    check_prefixes(&d);
    d = mk(RL_ALLOW, UINT64_MAX, 7, 0, 0, 1, NULL);
    check_prefixes(&d);
    d.size = RL_DECISION_SIZE_MIN;
    check_prefixes(&d);
}
END_TEST

START_TEST(einval)
{
    char buf[16] = "unchanged";
    rl_decision_t d = mk(RL_ALLOW, 1, 1, 0, 0, 1000, "p");
    ck_assert_int_eq(rl_headers(NULL, buf, sizeof buf), RL_EINVAL);
    ck_assert_str_eq(buf, "unchanged");
    ck_assert_int_eq(rl_headers(NULL, NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_headers(&d, NULL, 1), RL_EINVAL);
    ck_assert_int_eq(rl_headers(&d, NULL, SIZE_MAX), RL_EINVAL);
}
END_TEST

START_TEST(esize)
{
    char buf[16] = "unchanged";
    rl_decision_t d = mk(RL_ALLOW, 1, 1, 0, 0, 1000, "p");
    d.size = 0;
    ck_assert_int_eq(rl_headers(&d, buf, sizeof buf), RL_ESIZE);
    ck_assert_str_eq(buf, "unchanged");
    d.size = RL_DECISION_SIZE_MIN - 1;
    ck_assert_int_eq(rl_headers(&d, buf, sizeof buf), RL_ESIZE);
    ck_assert_int_eq(rl_headers(&d, NULL, 0), RL_ESIZE);
    /* Argument errors are reported before the size is looked at. */
    ck_assert_int_eq(rl_headers(&d, NULL, 4), RL_EINVAL);
    d.size = RL_DECISION_SIZE_MIN;
    ck_assert_int_gt(rl_headers(&d, buf, sizeof buf), 0);
}
END_TEST

/* Render d and read RateLimit's t and Retry-After (-1 for an absent one).
 * For loops: only failures go through Check (REQUIRE). */
static void t_and_retry(const rl_decision_t *d, char *out, long long *t, long long *retry)
{
    int n = rl_headers(d, out, OUT_CAP);
    REQUIRE(n > 0 && n < OUT_CAP && strlen(out) == (size_t)n, "rl_headers: %d", n);
    const char *rl = strstr(out, "\r\nRateLimit: ");
    const char *p = rl != NULL ? strstr(rl, ";t=") : NULL;
    *t = p != NULL ? strtoll(p + 3, NULL, 10) : -1;
    const char *ra = strstr(out, "\r\nRetry-After: ");
    *retry = ra != NULL ? strtoll(ra + 15, NULL, 10) : -1;
}

/* A figure in ms of every magnitude: 0, around a second, up to 2^60. */
static uint64_t random_ms(uint64_t *seed)
{
    uint64_t x = next_u64(seed);
    switch (x & 7) {
    case 0:
        return 0;
    case 1:
        return x >> 54; /* under 1024 ms */
    case 2:
        return 1000 * ((x >> 32) % 5); /* whole seconds */
    default:
        return (x >> 4) >> (x >> 58); /* up to 2^60 */
    }
}

START_TEST(deny_retry_after_is_t)
{
    /* On every deny, Retry-After and RateLimit's t are the same number of
     * seconds, over random decisions: the draft's Retry-After SHOULD NOT end
     * before the effective window, and both come from one figure. */
    uint64_t seed = 0x7e77;
    char out[OUT_CAP];
    int later = 0;
    for (int i = 0; i < 100000; i++) {
        uint64_t reset = random_ms(&seed), retry = random_ms(&seed);
        int32_t allowed = next_u64(&seed) % 4 == 0 ? RL_ALLOW : RL_DENY;
        rl_decision_t d = mk(allowed, 100, next_u64(&seed) % 3, reset, retry, 60000, "p");
        long long t, ra;
        t_and_retry(&d, out, &t, &ra);
        REQUIRE(t >= 0, "no t in %s", out);
        if (allowed == RL_ALLOW) {
            REQUIRE(ra == -1, "Retry-After on an allow: %s", out);
            continue;
        }
        REQUIRE(ra >= 1, "deny without a Retry-After of at least 1 s: %s", out);
        REQUIRE(ra == t || (t == 999999999999999LL && ra > t),
                "Retry-After %lld against t=%lld (reset %llu ms, retry %llu ms)", ra, t,
                (unsigned long long)reset, (unsigned long long)retry);
        later += reset / 1000 > retry / 1000 + 1;
    }
    ck_assert_int_gt(later, 1000); /* the case that matters: full much later */
}
END_TEST

START_TEST(deny_retry_after_is_t_from_checks)
{
    /* The same on decisions rl_check makes: random limits, costs and clock
     * steps; every deny's Retry-After equals its t, and a client that waits
     * that long is admitted. */
    rl_test_clock_t clk = {UINT64_C(1000000000000), 0};
    rl_t *rl = rl_test_open(&clk, 1024);
    static const char *units[] = {"s", "m", "h"};
    uint64_t seed = 0xdecade;
    char spec[96], out[OUT_CAP];
    int denies = 0, full_later = 0;
    for (int l = 0; l < 40; l++) {
        uint64_t x = next_u64(&seed);
        unsigned burst = 1 + (unsigned)(x % 50);
        snprintf(spec, sizeof spec, "name=h%d rate=%u/%s burst=%u", l,
                 1 + (unsigned)((x >> 8) % 20), units[(x >> 16) % 3], burst);
        int id = rl_test_add(rl, spec);
        for (int i = 0; i < 300; i++) {
            uint64_t y = next_u64(&seed);
            uint32_t cost = 1 + (uint32_t)(y % burst);
            rl_decision_t d;
            rl_decision_init(&d);
            int rc = rl_check(rl, id, "k", 1, cost, &d);
            REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "rl_check: %d", rc);
            long long t, ra;
            t_and_retry(&d, out, &t, &ra);
            if (rc == RL_DENY) {
                denies++;
                full_later += d.reset_ms / 1000 > d.retry_after_ms / 1000 + 1;
                REQUIRE(ra >= 1 && ra == t, "Retry-After %lld, t=%lld: %s", ra, t, out);
                if (y >> 60 == 0) { /* now and then, wait as told and retry */
                    rl_test_clock_advance(&clk, (uint64_t)ra * 1000000000u);
                    REQUIRE(rl_check(rl, id, "k", 1, cost, NULL) == RL_ALLOW,
                            "refused after waiting Retry-After %lld s", ra);
                }
            }
            rl_test_clock_advance(&clk, (y >> 32) % 2000 * 1000000u);
        }
    }
    ck_assert_int_gt(denies, 1000);
    ck_assert_int_gt(full_later, 100);
    rl_close(rl);
}
END_TEST

/* Retry-After's seconds in a rendering, or 0 when it has none. */
static uint64_t retry_s(const char *out)
{
    char v[64];
    return field(out, "Retry-After", v, sizeof v) != NULL ? strtoull(v, NULL, 10) : 0;
}

/* rl_headers_jitter against its model: Retry-After is
 * ceil((retry + rnd mod (jitter + 1)) / 1000) s, never below rl_headers'
 * (jitter only adds), at most ceil((retry + jitter) / 1000); RateLimit's t
 * follows it; the same rnd gives the same text; an allow is rl_headers'. */
START_TEST(jitter_model)
{
    static const uint64_t retries[] = {0, 1, 999, 1000, 1200, 59999, 3600000};
    static const uint32_t jitters[] = {0, 1, 999, 1000, 5000, 3600000u};
    uint64_t seed = 42;
    for (size_t i = 0; i < sizeof retries / sizeof retries[0]; i++)
        for (size_t j = 0; j < sizeof jitters / sizeof jitters[0]; j++)
            for (int k = 0; k < 40; k++) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                uint64_t rnd = seed;
                rl_decision_t d = mk(RL_DENY, 10, 0, 9000, retries[i], 10000, "p");
                char plain[OUT_CAP], out[OUT_CAP], again[OUT_CAP], v[64], t[64];
                render(&d, plain);
                int n = rl_headers_jitter(&d, jitters[j], rnd, out, OUT_CAP);
                ck_assert_int_eq((size_t)n, strlen(out));
                uint64_t add = rnd % ((uint64_t)jitters[j] + 1);
                uint64_t want = (retries[i] + add + 999) / 1000;
                if (want == 0)
                    want = 1;
                ck_assert_uint_eq(retry_s(out), want);
                ck_assert_uint_ge(retry_s(out), retry_s(plain));
                ck_assert_uint_le(retry_s(out), (retries[i] + jitters[j] + 999) / 1000 + 1);
                snprintf(t, sizeof t, "\"p\";r=0;t=%llu", (unsigned long long)want);
                ck_assert_str_eq(field(out, "RateLimit", v, sizeof v), t);
                ck_assert_int_eq(rl_headers_jitter(&d, jitters[j], rnd, again, OUT_CAP), n);
                ck_assert_str_eq(out, again);
                if (jitters[j] == 0)
                    ck_assert_str_eq(out, plain);
                d.allowed = RL_ALLOW;
                render(&d, plain);
                ck_assert_int_eq(rl_headers_jitter(&d, jitters[j], rnd, out, OUT_CAP), (int)strlen(plain));
                ck_assert_str_eq(out, plain);
            }
}
END_TEST

/* A herd refused together by one bucket: 1000 clients' Retry-After (rnd a
 * per-client value) spread over the whole jitter range, none early. */
START_TEST(jitter_spreads_a_herd)
{
    rl_decision_t d = mk(RL_DENY, 10, 0, 9000, 1000, 10000, "p");
    unsigned seen[12] = {0};
    for (uint64_t c = 0; c < 1000; c++) {
        char out[OUT_CAP];
        uint64_t rnd = (c + 1) * UINT64_C(0x9e3779b97f4a7c15);
        ck_assert_int_gt(rl_headers_jitter(&d, 10000, rnd, out, OUT_CAP), 0);
        uint64_t s = retry_s(out);
        ck_assert_uint_ge(s, 1);
        ck_assert_uint_le(s, 11);
        seen[s]++;
    }
    for (int s = 2; s <= 10; s++)
        ck_assert_uint_gt(seen[s], 50); /* every second of the range is used */
    ck_assert_uint_lt(seen[1], 10);     /* not the herd's one second */
}
END_TEST

START_TEST(jitter_errors)
{
    rl_decision_t d = mk(RL_DENY, 10, 0, 9000, 1000, 10000, "p");
    char out[OUT_CAP];
    memset(out, 'Z', sizeof out);
    ck_assert_int_eq(rl_headers_jitter(&d, 3600000u + 1, 1, out, OUT_CAP),
                     RL_ERANGE);
    ck_assert_int_eq(out[0], 'Z');
    ck_assert_int_eq(rl_headers_jitter(NULL, 10, 1, out, OUT_CAP), RL_EINVAL);
    ck_assert_int_eq(rl_headers_jitter(&d, 10, 1, NULL, 5), RL_EINVAL);
    d.size = RL_DECISION_SIZE_MIN - 1;
    ck_assert_int_eq(rl_headers_jitter(&d, 10, 1, out, OUT_CAP), RL_ESIZE);
    /* Saturation: a retry near UINT64_MAX never wraps to an early one. */
    rl_decision_t m = mk(RL_DENY, 10, 0, 0, UINT64_MAX - 3, 1000, "p");
    ck_assert_int_gt(rl_headers_jitter(&m, 1000, 999, out, OUT_CAP), 0);
    ck_assert_uint_eq(retry_s(out), UINT64_C(18446744073709552));
}
END_TEST

static Suite *headers_suite(void)
{
    Suite *s = suite_create("headers");
    TCase *tc = tcase_create("render");
    tcase_add_test(tc, allow_exact);
    tcase_add_test(tc, deny_exact);
    tcase_add_test(tc, non_allow_values_deny);
    tcase_add_test(tc, deny_retry_after_is_t);
    tcase_add_test(tc, deny_retry_after_is_t_from_checks);
    tcase_add_loop_test(tc, retry_after_rounding, 0,
                        (int)(sizeof retry_cases / sizeof retry_cases[0]));
    tcase_add_loop_test(tc, reset_rounding, 0, (int)(sizeof reset_cases / sizeof reset_cases[0]));
    tcase_add_loop_test(tc, window_rounding, 0,
                        (int)(sizeof window_cases / sizeof window_cases[0]));
    tcase_add_test(tc, uint64_max_fields);
    tcase_add_test(tc, sf_integer_boundary);
    tcase_add_test(tc, policy_null_and_empty);
    tcase_add_test(tc, policy_escaping);
    tcase_add_test(tc, policy_length_bound);
    tcase_add_test(tc, worst_case_length);
    tcase_add_test(tc, jitter_model);
    tcase_add_test(tc, jitter_spreads_a_herd);
    tcase_add_test(tc, jitter_errors);
    suite_add_tcase(s, tc);

    TCase *abi = tcase_create("abi");
    tcase_add_test(abi, old_size_struct);
    tcase_add_test(abi, larger_struct);
    tcase_add_test(abi, snprintf_contract);
    tcase_add_test(abi, einval);
    tcase_add_test(abi, esize);
    suite_add_tcase(s, abi);
    return s;
}

int main(void)
{
    return rl_test_run(headers_suite());
}
