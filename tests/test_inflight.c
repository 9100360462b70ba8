/* SPDX-License-Identifier: MIT */
/*
 * In-flight limits (rl_inflight_*): the spec words, acquire and release,
 * the decision and its headers, classes, leaks reclaimed past max_hold,
 * double and foreign releases refused, and 8 racing threads that never
 * hold more than the limit (a model counts what the callers hold; the
 * clock is frozen through the hook).
 */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "ratelimit.h"
#include "testutil.h"

static rl_test_clock_t clk = {.precise_ns = UINT64_C(5000000000)};

static int parse(const char *spec, rl_limit_t *lim, char *err, size_t n)
{
    return rl_limit_parse_sized(lim, sizeof *lim, spec, err, n);
}

START_TEST(spec_words)
{
    rl_limit_t lim;
    char err[256];
    ck_assert_int_eq(parse("name=db kind=inflight max=64", &lim, err, sizeof err), 0);
    ck_assert_int_eq(lim.kind, RL_KIND_INFLIGHT);
    ck_assert_uint_eq(lim.inflight_max, 64);
    ck_assert_int_eq(lim.mode, RL_MODE_LOCAL);
    ck_assert_int_eq(lim.on_failure, RL_FAIL_CLOSED);
    ck_assert_int_eq(lim.inflight_algo, RL_INFLIGHT_FIXED);
    ck_assert_int_eq(parse("name=db kind=inflight limit=adaptive max_hold=30s "
                           "partitions=live:0.8,batch:0.2",
                           &lim, err, sizeof err),
                     0);
    ck_assert_int_eq(lim.inflight_algo, RL_INFLIGHT_GRADIENT2);
    ck_assert_uint_eq(lim.max_hold_ms, 30000);
    ck_assert_str_eq(lim.classes[0].name, "live");
    ck_assert_uint_eq(lim.classes[0].share_ppm, 800000);
    ck_assert_str_eq(lim.classes[1].name, "batch");
    ck_assert_uint_eq(lim.classes[1].share_ppm, 200000);
    ck_assert_int_eq(parse("name=db kind=inflight limit=adaptive algo=vegas min=5 max=50",
                           &lim, err, sizeof err),
                     0);
    ck_assert_int_eq(lim.inflight_algo, RL_INFLIGHT_VEGAS);
    ck_assert_uint_eq(lim.inflight_min, 5);
    ck_assert_int_eq(parse("name=db kind=inflight limit=adaptive algo=aimd max_hold=500ms",
                           &lim, err, sizeof err),
                     0);
    ck_assert_int_eq(lim.inflight_algo, RL_INFLIGHT_AIMD);
    ck_assert_uint_eq(lim.max_hold_ms, 500);

    static const struct {
        const char *spec;
        int rc;
        const char *says;
    } bad[] = {
        {"name=db kind=inflight", RL_ESPEC, "missing max"},
        {"name=db kind=semaphore max=1", RL_EMODE, "kind"},
        {"name=db kind=inflight max=0", RL_ERANGE, "max"},
        {"name=db kind=inflight max=1000001", RL_ERANGE, "max"},
        {"name=db kind=inflight max=4 rate=10/s", RL_ERANGE, "rate"},
        {"name=db kind=inflight max=4 algo=vegas", RL_ERANGE, "algo"},
        {"name=db kind=inflight max=4 min=2", RL_ERANGE, "min"},
        {"name=db kind=inflight max=4 limit=elastic", RL_EMODE, "limit"},
        {"name=db kind=inflight limit=adaptive algo=bbr", RL_EMODE, "algo"},
        {"name=db kind=inflight limit=adaptive min=300", RL_ERANGE, "inflight_min"},
        {"name=db kind=inflight limit=adaptive mode=global", RL_EMODE, "mode=global"},
        {"name=db kind=inflight max=4 mode=tiered", RL_EMODE, "mode"},
        {"name=db kind=inflight max=4 mode=exact", RL_ERANGE, "max_hold"},
        {"name=db kind=inflight max=4 mode=exact max_hold=1s partitions=a:0.5", RL_EMODE,
         "partitions"},
        {"name=db kind=inflight limit=adaptive mode=exact max_hold=1s", RL_EMODE, "adaptive"},
        {"name=db kind=inflight max=4 on_failure=open", RL_ERANGE, "on_failure"},
        {"name=db kind=inflight max=4 max_hold=2d", RL_ERANGE, "max_hold"},
        {"name=db kind=inflight max=4 max_hold=10", RL_ESPEC, "max_hold"},
        {"name=db kind=inflight max=4 max_hold=-5s", RL_ESPEC, "max_hold"},
        {"name=db kind=inflight max=4 partitions=a:0.6,b:0.6", RL_ERANGE, "add up"},
        {"name=db kind=inflight max=4 partitions=a:0.5,a:0.5", RL_ENAME, "twice"},
        {"name=db kind=inflight max=4 partitions=a", RL_ESPEC, "NAME:FRACTION"},
        {"name=db kind=inflight max=4 partitions=a:0.1,", RL_ESPEC, "comma"},
        {"name=db kind=inflight max=4 partitions=a:0.1,b:0.1,c:0.1,d:0.1,e:0.1", RL_ERANGE,
         "at most"},
        {"name=db kind=inflight max=4 partitions=a$:0.1", RL_ENAME, "classes"},
        {"name=api rate=10/s max=4", RL_ERANGE, "kind inflight"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].spec, &lim, err, sizeof err);
        ck_assert_msg(rc == bad[i].rc, "%s: %s (%s), not %s", bad[i].spec, rl_err_name(rc), err,
                      rl_err_name(bad[i].rc));
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "%s: \"%s\" does not say %s",
                      bad[i].spec, err, bad[i].says);
    }
    /* A caller whose struct predates the in-flight fields cannot take them. */
    ck_assert_int_eq(rl_limit_parse_sized(&lim, offsetof(rl_limit_t, kind),
                                          "name=db kind=inflight max=4", err, sizeof err),
                     RL_ESIZE);
}
END_TEST

START_TEST(acquire_release)
{
    rl_t *rl = rl_test_open(&clk, 0);
    int id = rl_test_add(rl, "name=db kind=inflight max=2");
    rl_permit_t p[3];
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[0], &d),
                     RL_ALLOW);
    ck_assert_uint_eq(d.inflight, 1);
    ck_assert_uint_eq(d.limit, 2);
    ck_assert_uint_eq(d.remaining, 1);
    ck_assert_uint_eq(d.flags, RL_FLAG_INFLIGHT);
    ck_assert_str_eq(d.policy, "db");
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[1], &d),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[2], &d),
                     RL_DENY);
    ck_assert_uint_eq(d.inflight, 2);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.retry_after_ms, 1000); /* no release yet: no latency known */
    char h[512];
    ck_assert_int_gt(rl_headers(&d, h, sizeof h), 0);
    ck_assert_ptr_nonnull(strstr(h, "RateLimit-Policy: \"db\";q=2\r\n"));
    ck_assert_ptr_nonnull(strstr(h, "RateLimit: \"db\";r=0;t=1\r\n"));
    ck_assert_ptr_nonnull(strstr(h, "Retry-After: 1\r\n"));
    ck_assert_ptr_null(strstr(h, "X-RateLimit-Reset"));
    /* Another key has its own count. */
    rl_permit_t q;
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "other", 5, RL_INFLIGHT_NO_CLASS, &q, NULL),
                     RL_ALLOW);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight, 3);
    ck_assert_uint_eq(st.inflight_limit, 2);
    ck_assert_uint_eq(st.admitted, 3);
    ck_assert_uint_eq(st.denied, 1);
    /* The instance's totals count the admissions too (on the permit
     * records, not the limit's stripes). */
    rl_stats_t all;
    rl_stats_init(&all);
    ck_assert_int_eq(rl_stats(rl, &all), 0);
    ck_assert_uint_eq(all.admitted, 3);
    ck_assert_int_eq(rl_inflight_release(rl, &p[0], RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[0], &d),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_release(rl, &p[0], RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_release(rl, &p[1], RL_INFLIGHT_IGNORED, 0), 0);
    ck_assert_int_eq(rl_inflight_release(rl, &q, RL_INFLIGHT_DROPPED, 0), 0);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    char m[8192];
    ck_assert_int_lt(rl_metrics_text(rl, m, sizeof m), (int)sizeof m);
    ck_assert_ptr_nonnull(strstr(m, "ratelimit_limit_inflight{limit=\"db\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(m, "ratelimit_limit_inflight_limit{limit=\"db\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(m, "ratelimit_limit_inflight_reclaimed_total{limit=\"db\"} 0"));
    rl_close(rl);
}
END_TEST

START_TEST(kinds_kept_apart)
{
    rl_t *rl = rl_test_open(&clk, 0);
    int db = rl_test_add(rl, "name=db kind=inflight max=2");
    int api = rl_test_add(rl, "name=api rate=10/s");
    rl_permit_t p;
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, db, "k", 1, 1, &d), RL_ENOTSUP);
    ck_assert_int_eq(rl_check(rl, db, "k", 1, 0, NULL), RL_ENOTSUP);
    ck_assert_int_eq(rl_refund(rl, db, "k", 1, 1), RL_ENOTSUP);
    ck_assert_int_eq(rl_inflight_acquire(rl, api, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_EMODE);
    ck_assert_int_eq(rl_inflight_class(rl, api, "x"), RL_EMODE);
    ck_assert_int_eq(rl_inflight_acquire(rl, db, "k", 0, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_EKEYLEN);
    ck_assert_int_eq(rl_inflight_acquire(rl, db, "k", 1, 0, &p, NULL), RL_ERANGE);
    ck_assert_int_eq(rl_inflight_acquire(rl, db, "k", 1, RL_INFLIGHT_NO_CLASS, NULL, NULL),
                     RL_EINVAL);
    ck_assert_int_eq(rl_inflight_acquire(rl, db + 1000, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ENOTFOUND);
    /* An update keeps the kind; it may move max. */
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(parse("name=db rate=1/s", &lim, err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, db, &lim), RL_EMODE);
    ck_assert_int_eq(parse("name=db kind=inflight max=3", &lim, err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, db, &lim), 0);
    rl_permit_t h[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, db, "k", 1, RL_INFLIGHT_NO_CLASS, &h[i], NULL),
                         RL_ALLOW);
    rl_limit_t got;
    rl_limit_init(&got);
    ck_assert_int_eq(rl_limit_get(rl, db, &got), 0);
    ck_assert_uint_eq(got.inflight_max, 3);
    ck_assert_uint_eq(got.rate.count, 0);
    ck_assert_int_eq(parse("name=db kind=inflight max=3 max_keys=5000", &lim, err, sizeof err),
                     0);
    ck_assert_int_eq(rl_limit_update(rl, db, &lim), RL_ERANGE);
    /* Removed: its permits and its id are gone. */
    ck_assert_int_eq(rl_limit_remove(rl, db), 0);
    ck_assert_int_eq(rl_inflight_release(rl, &h[0], RL_INFLIGHT_SUCCESS, 0), RL_ENOTFOUND);
    ck_assert_int_eq(rl_inflight_acquire(rl, db, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ENOTFOUND);
    int again = rl_test_add(rl, "name=db kind=inflight max=1");
    ck_assert_int_eq(rl_inflight_acquire(rl, again, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_release(rl, &h[1], RL_INFLIGHT_SUCCESS, 0), RL_ENOTFOUND);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

START_TEST(bad_releases)
{
    rl_t *rl = rl_test_open(&clk, 0);
    rl_t *other = rl_test_open(&clk, 0);
    int id = rl_test_add(rl, "name=db kind=inflight max=2");
    int oid = rl_test_add(other, "name=db kind=inflight max=2");
    ck_assert_int_eq(id, oid); /* same id: only the instance tells them apart */
    rl_permit_t p, copy, zero;
    memset(&zero, 0, sizeof zero);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    copy = p;
    ck_assert_int_eq(rl_inflight_release(other, &copy, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    copy = p;
    ck_assert_int_eq(rl_inflight_release(rl, &copy, 7, 0), RL_ERANGE);
    ck_assert_int_eq(rl_inflight_release(rl, &zero, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL); /* zeroed */
    ck_assert_int_eq(rl_inflight_release(rl, &copy, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    /* The record is reused; the old copy still cannot release the new life. */
    rl_permit_t n1, n2, n3;
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &n1, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_release(rl, &copy, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &n2, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &n3, NULL),
                     RL_DENY); /* the count was not corrupted by the refused releases */
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight, 2);
    ck_assert_uint_eq(st.inflight_late, 0);
    ck_assert_int_eq(rl_inflight_release(rl, &n1, RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_release(rl, &n2, RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(other);
    rl_close(rl);
}
END_TEST

START_TEST(leaks_reclaimed)
{
    rl_t *rl = rl_test_open(&clk, 0);
    int id = rl_test_add(rl, "name=db kind=inflight max=2 max_hold=100ms");
    rl_permit_t a, b, c, late;
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &a, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &b, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &c, NULL),
                     RL_DENY);
    rl_test_clock_advance(&clk, 99 * 1000000u);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &c, NULL),
                     RL_DENY); /* not yet max_hold */
    /* Both leaked: the first acquire at least max_hold / 4 after the last
     * sweep (which ran at 99 ms) sweeps again and reclaims them. */
    rl_test_clock_advance(&clk, 26 * 1000000u);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &c, NULL),
                     RL_ALLOW);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight_reclaimed, 2);
    ck_assert_uint_eq(st.inflight, 1);
    /* A late release is a counted no-op, once; the count is untouched. */
    late = a;
    ck_assert_int_eq(rl_inflight_release(rl, &a, RL_INFLIGHT_SUCCESS, 0), RL_INFLIGHT_RECLAIMED);
    ck_assert_int_eq(rl_inflight_release(rl, &late, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    ck_assert_int_eq(rl_inflight_release(rl, &b, RL_INFLIGHT_SUCCESS, 0), RL_INFLIGHT_RECLAIMED);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight_late, 2);
    ck_assert_uint_eq(st.inflight, 1);
    char m[8192];
    ck_assert_int_lt(rl_metrics_text(rl, m, sizeof m), (int)sizeof m);
    ck_assert_ptr_nonnull(strstr(m, "ratelimit_limit_inflight_reclaimed_total{limit=\"db\"} 2"));
    ck_assert_ptr_nonnull(strstr(m, "ratelimit_limit_inflight_late_total{limit=\"db\"} 2"));
    ck_assert_int_eq(rl_inflight_release(rl, &c, RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

START_TEST(partitions_borrow)
{
    rl_t *rl = rl_test_open(&clk, 0);
    int id = rl_test_add(rl, "name=db kind=inflight max=10 partitions=live:0.5,batch:0.3");
    int live = rl_inflight_class(rl, id, "live");
    int batch = rl_inflight_class(rl, id, "batch");
    ck_assert_int_eq(live, 0);
    ck_assert_int_eq(batch, 1);
    ck_assert_int_eq(rl_inflight_class(rl, id, "none"), RL_ENOTFOUND);
    rl_permit_t p[20];
    int n = 0;
    /* Batch borrows the idle capacity: the whole limit. */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, batch, &p[n++], NULL), RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, batch, &p[n], NULL), RL_DENY);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[n], NULL),
                     RL_DENY);
    /* Live, under its cap of 5, still passes the full limit, up to its cap. */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, live, &p[n++], NULL), RL_ALLOW);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, live, &p[n], &d), RL_DENY);
    ck_assert_uint_eq(d.inflight, 15);
    while (n > 0)
        ck_assert_int_eq(rl_inflight_release(rl, &p[--n], RL_INFLIGHT_SUCCESS, 0), 0);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    rl_close(rl);
}
END_TEST

START_TEST(no_entry_or_permit)
{
    rl_t *rl = rl_test_open(&clk, 0);
    /* One key wanted, max 2: a pool of 2 permits and 16 key entries. */
    int id = rl_test_add(rl, "name=db kind=inflight max=2 max_keys=1");
    rl_permit_t p[40];
    rl_decision_t d;
    rl_decision_init(&d);
    int allowed = 0, noslot = 0;
    for (int i = 0; i < 40; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "key%d", i);
        int rc = rl_inflight_acquire(rl, id, k, (size_t)n, RL_INFLIGHT_NO_CLASS, &p[allowed], &d);
        if (rc == RL_ALLOW)
            allowed++;
        else
            noslot += (d.flags & RL_FLAG_NOSLOT) != 0;
    }
    ck_assert_int_eq(allowed, 2);
    ck_assert_int_eq(noslot, 38);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    ck_assert_uint_eq(st.noslot, 38);
    ck_assert_uint_eq(st.inflight, 2);
    while (allowed > 0)
        ck_assert_int_eq(rl_inflight_release(rl, &p[--allowed], RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

/* With Redis, mode=global is fleet-wide: a fixed max only, and without a
 * lease (Redis never answers here) on_failure=closed admits nothing. */
START_TEST(global_with_redis_is_fleet_wide)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = "redis://127.0.0.1:1";
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    rl_limit_t lim;
    rl_limit_init(&lim);
    strcpy(lim.name, "db");
    lim.kind = RL_KIND_INFLIGHT;
    lim.inflight_max = 4;
    lim.inflight_algo = RL_INFLIGHT_VEGAS;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_EMODE); /* mode left at global */
    lim.inflight_algo = RL_INFLIGHT_FIXED;
    int gid = rl_limit_add(rl, &lim);
    ck_assert_int_ge(gid, 0);
    rl_permit_t g;
    ck_assert_int_eq(rl_inflight_acquire(rl, gid, "k", 1, RL_INFLIGHT_NO_CLASS, &g, NULL),
                     RL_DENY);
    lim.mode = RL_MODE_LOCAL;
    ck_assert_int_eq(rl_limit_update(rl, gid, &lim), RL_EMODE); /* fixed when added */
    strcpy(lim.name, "db2");
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    rl_permit_t p;
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

/* One window's worth of releases: n permits held at once, then released
 * with `outcome` and `lat_ns`, and the clock moved past the window. */
static void window_of(rl_t *rl, int id, int n, int32_t outcome, uint64_t lat_ns)
{
    rl_permit_t p[16];
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], NULL),
                         RL_ALLOW);
    rl_test_clock_advance(&clk, (uint64_t)RL_INFLIGHT_WINDOW_MS * 1000000u);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], outcome, lat_ns), 0);
}

static uint64_t limit_now(rl_t *rl, int id)
{
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, id, &st), 0);
    return st.inflight_limit;
}

START_TEST(adaptive_through_releases)
{
    rl_t *rl = rl_test_open(&clk, 0);
    int id = rl_test_add(rl, "name=db kind=inflight limit=adaptive algo=aimd min=5 max=50");
    ck_assert_uint_eq(limit_now(rl, id), 20);
    window_of(rl, id, 10, RL_INFLIGHT_DROPPED, 0);
    ck_assert_uint_eq(limit_now(rl, id), 18); /* x 0.9 on drops */
    /* Under the floor, or ignored: no samples, no window. */
    window_of(rl, id, 12, RL_INFLIGHT_SUCCESS, RL_INFLIGHT_RTT_FLOOR_NS - 1);
    window_of(rl, id, 12, RL_INFLIGHT_IGNORED, 0);
    ck_assert_uint_eq(limit_now(rl, id), 18);
    /* Used (10 of 18 held at once), served in 5 ms: +1. */
    window_of(rl, id, 10, RL_INFLIGHT_SUCCESS, 5000000u);
    ck_assert_uint_eq(limit_now(rl, id), 19);
    rl_permit_t p[20];
    rl_decision_t d;
    rl_decision_init(&d);
    for (int i = 0; i < 19; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], NULL),
                         RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[19], &d),
                     RL_DENY);
    ck_assert_uint_eq(d.limit, 19);
    ck_assert_uint_eq(d.retry_after_ms, 5); /* the last window's mean latency */
    for (int i = 0; i < 19; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_IGNORED, 0), 0);
    /* An update to fixed: the limit is its max from then on. */
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(parse("name=db kind=inflight max=7", &lim, err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, id, &lim), 0);
    ck_assert_uint_eq(limit_now(rl, id), 7);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------------ racing threads */

#define RACE_THREADS 8
#define RACE_ITERS 20000
#define RACE_MAX 5
#define RACE_KEYS 12

typedef struct race {
    rl_t *rl;
    int id;
    int cls; /* -1: no classes */
    int nkeys; /* keys "a", "b", ...: 2, or RACE_KEYS */
    _Atomic int held[RACE_KEYS];  /* the model: permits the callers hold, per key */
    _Atomic int peak[RACE_KEYS];
    _Atomic int allowed;
} race_t;

typedef struct racer {
    race_t *r;
    uint64_t seed;
} racer_t;

static void *racer_main(void *arg)
{
    racer_t *me = arg;
    race_t *r = me->r;
    rl_permit_t mine[4];
    int key_of[4];
    int n = 0;
    for (int i = 0; i < RACE_ITERS; i++) {
        uint64_t x = next_u64(&me->seed);
        if (n < 4 && (x & 1) == 0) {
            int k = (int)((x >> 1) % (uint64_t)r->nkeys);
            char name = (char)('a' + k);
            int rc = rl_inflight_acquire(r->rl, r->id, &name, 1, RL_INFLIGHT_NO_CLASS,
                                         &mine[n], NULL);
            REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "acquire: %s", rl_err_name(rc));
            if (rc == RL_ALLOW) {
                int h = atomic_fetch_add(&r->held[k], 1) + 1;
                int p = atomic_load(&r->peak[k]);
                while (h > p && !atomic_compare_exchange_weak(&r->peak[k], &p, h))
                    ;
                atomic_fetch_add(&r->allowed, 1);
                key_of[n++] = k;
            }
        } else if (n > 0) {
            int j = (int)((x >> 8) % (uint64_t)n);
            rl_permit_t copy = mine[j];
            /* The model lets go first: the library may hand the permit to
             * another thread the moment it is released. */
            atomic_fetch_sub(&r->held[key_of[j]], 1);
            int rc = rl_inflight_release(r->rl, &mine[j], RL_INFLIGHT_SUCCESS, 0);
            REQUIRE(rc == 0, "release: %s", rl_err_name(rc));
            if ((x >> 20) % 16 == 0) { /* now and then, a double release */
                rc = rl_inflight_release(r->rl, &copy, RL_INFLIGHT_SUCCESS, 0);
                REQUIRE(rc == RL_EINVAL, "double release: %s", rl_err_name(rc));
            }
            mine[j] = mine[n - 1];
            key_of[j] = key_of[n - 1];
            n--;
        }
    }
    while (n > 0) {
        atomic_fetch_sub(&r->held[key_of[n - 1]], 1);
        REQUIRE(rl_inflight_release(r->rl, &mine[--n], RL_INFLIGHT_SUCCESS, 0) == 0, "release");
    }
    return NULL;
}

START_TEST(race_never_past_max)
{
    rl_t *rl = rl_test_open(&clk, 0);
    race_t r = {.rl = rl, .nkeys = 2};
    r.id = rl_test_add(rl, "name=db kind=inflight max=5");
    pthread_t t[RACE_THREADS];
    racer_t rs[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        rs[i] = (racer_t){&r, (uint64_t)i * 7919u + 1};
        ck_assert_int_eq(pthread_create(&t[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_le(atomic_load(&r.peak[0]), RACE_MAX);
    ck_assert_int_le(atomic_load(&r.peak[1]), RACE_MAX);
    ck_assert_int_ge(atomic_load(&r.peak[0]), 1);
    ck_assert_int_gt(atomic_load(&r.allowed), RACE_THREADS * RACE_ITERS / 20);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, r.id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0); /* every permit came back, none twice */
    ck_assert_uint_eq(st.admitted, (uint64_t)atomic_load(&r.allowed));
    /* The pool is whole again: the limit can be filled once more. */
    rl_permit_t p[RACE_MAX + 1];
    for (int i = 0; i < RACE_MAX; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, r.id, "a", 1, RL_INFLIGHT_NO_CLASS, &p[i], NULL),
                         RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, r.id, "a", 1, RL_INFLIGHT_NO_CLASS, &p[RACE_MAX],
                                         NULL),
                     RL_DENY);
    for (int i = 0; i < RACE_MAX; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

/* The same race on 12 keys in a table of 16 entries (max_keys=4): keys
 * share probe windows, so entries are claimed, given way, revived by their
 * key and taken over by another key's claim all the time; still no key ever
 * holds more than max, and every count comes back. */
START_TEST(race_keys_share_entries)
{
    rl_t *rl = rl_test_open(&clk, 0);
    race_t r = {.rl = rl, .nkeys = RACE_KEYS};
    r.id = rl_test_add(rl, "name=db kind=inflight max=5 max_keys=4");
    pthread_t t[RACE_THREADS];
    racer_t rs[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        rs[i] = (racer_t){&r, (uint64_t)i * 104729u + 3};
        ck_assert_int_eq(pthread_create(&t[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    int used = 0;
    for (int k = 0; k < RACE_KEYS; k++) {
        ck_assert_int_le(atomic_load(&r.peak[k]), RACE_MAX);
        used += atomic_load(&r.peak[k]) > 0;
    }
    ck_assert_int_ge(used, RACE_KEYS / 2);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(rl, r.id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    ck_assert_uint_eq(st.admitted, (uint64_t)atomic_load(&r.allowed));
    rl_close(rl);
}
END_TEST

/* A key's first acquires racing: each round, RACE_THREADS threads released
 * together acquire one fresh key (a claim each) and hold what they got
 * until all have tried: a key kept to one entry admits RACE_MAX, never
 * more (two entries for it would admit up to twice that). */
typedef struct firsts {
    rl_t *rl;
    int id;
    pthread_barrier_t go;
    _Atomic int allowed;
    _Atomic int worst;
} firsts_t;

#define FIRST_ROUNDS 1500

static void *firsts_main(void *arg)
{
    firsts_t *f = arg;
    for (int round = 0; round < FIRST_ROUNDS; round++) {
        char key[16];
        int n = snprintf(key, sizeof key, "fresh%d", round);
        pthread_barrier_wait(&f->go);
        rl_permit_t p;
        int rc = rl_inflight_acquire(f->rl, f->id, key, (size_t)n, RL_INFLIGHT_NO_CLASS, &p,
                                     NULL);
        REQUIRE(rc == RL_ALLOW || rc == RL_DENY, "acquire: %s", rl_err_name(rc));
        if (rc == RL_ALLOW)
            atomic_fetch_add(&f->allowed, 1);
        if (pthread_barrier_wait(&f->go) == PTHREAD_BARRIER_SERIAL_THREAD) {
            int a = atomic_exchange(&f->allowed, 0);
            int w = atomic_load(&f->worst);
            if (a > w)
                atomic_store(&f->worst, a);
        }
        pthread_barrier_wait(&f->go);
        if (rc == RL_ALLOW)
            REQUIRE(rl_inflight_release(f->rl, &p, RL_INFLIGHT_SUCCESS, 0) == 0, "release");
    }
    return NULL;
}

START_TEST(race_first_acquires)
{
    firsts_t f = {.rl = rl_test_open(&clk, 0)};
    f.id = rl_test_add(f.rl, "name=db kind=inflight max=5");
    ck_assert_int_eq(pthread_barrier_init(&f.go, NULL, RACE_THREADS), 0);
    pthread_t t[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, firsts_main, &f), 0);
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&f.go);
    ck_assert_int_eq(atomic_load(&f.worst), RACE_MAX);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(f.rl, f.id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    rl_close(f.rl);
}
END_TEST

/* Acquirers and releasers racing the removal and re-adding of their limit:
 * every call answers a verdict or RL_ENOTFOUND, never touches a freed
 * block (ASan, valgrind), and a removed limit's permits are RL_ENOTFOUND. */
typedef struct churn {
    rl_t *rl;
    _Atomic int id;
    _Atomic int stop;
} churn_t;

static void *churn_main(void *arg)
{
    churn_t *c = arg;
    rl_permit_t p;
    while (!atomic_load(&c->stop)) {
        int id = atomic_load(&c->id);
        int rc = rl_inflight_acquire(c->rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL);
        REQUIRE(rc == RL_ALLOW || rc == RL_DENY || rc == RL_ENOTFOUND, "acquire: %s",
                rl_err_name(rc));
        if (rc == RL_ALLOW) {
            rc = rl_inflight_release(c->rl, &p, RL_INFLIGHT_SUCCESS, 0);
            REQUIRE(rc == 0 || rc == RL_ENOTFOUND, "release: %s", rl_err_name(rc));
        }
        rl_limit_stats_t st;
        rl_limit_stats_init(&st);
        rc = rl_limit_stats(c->rl, id, &st);
        REQUIRE(rc == 0 || rc == RL_ENOTFOUND, "stats: %s", rl_err_name(rc));
    }
    return NULL;
}

START_TEST(removal_races_calls)
{
    churn_t c = {.rl = rl_test_open(&clk, 0)};
    atomic_store(&c.id, rl_test_add(c.rl, "name=db kind=inflight max=3"));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, churn_main, &c), 0);
    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(rl_limit_remove(c.rl, atomic_load(&c.id)), 0);
        atomic_store(&c.id, rl_test_add(c.rl, "name=db kind=inflight max=3"));
    }
    atomic_store(&c.stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(c.rl, atomic_load(&c.id), &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    rl_close(c.rl);
}
END_TEST

START_TEST(retired_blocks_bounded)
{
    /* A removed in-flight limit's block is kept until rl_close (calls never
     * count themselves in): replacing limits again and again must end in a
     * refusal, not in memory that grows without bound. */
    rl_t *rl = rl_test_open(&clk, 0);
    int keep = rl_test_add(rl, "name=keep kind=inflight max=2");
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(parse("name=big kind=inflight max=16 max_keys=65536", &lim, err, sizeof err),
                     0);
    int added = 0, rc = 0;
    for (int i = 0; i < 64; i++) { /* 64 x 16 x 65536 permit records: far past the cap */
        rc = rl_limit_add(rl, &lim);
        if (rc < 0)
            break;
        added++;
        ck_assert_int_eq(rl_limit_remove(rl, rc), 0);
    }
    ck_assert_int_eq(rc, RL_ENOMEM);
    ck_assert_int_ge(added, 2);
    /* What is live still works: an update in place, an acquire, a rate limit. */
    ck_assert_int_eq(parse("name=keep kind=inflight max=3", &lim, err, sizeof err), 0);
    ck_assert_int_eq(rl_limit_update(rl, keep, &lim), 0);
    rl_permit_t p;
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_inflight_acquire(rl, keep, "k", 1, RL_INFLIGHT_NO_CLASS, &p, &d), RL_ALLOW);
    ck_assert_uint_eq(d.limit, 3);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_ge(rl_test_add(rl, "name=rate rate=10/s"), 0);
    rl_close(rl); /* frees every retired block: ASan and valgrind see no leak */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inflight");
    TCase *tc = tcase_create("local");
    tcase_add_test(tc, spec_words);
    tcase_add_test(tc, acquire_release);
    tcase_add_test(tc, kinds_kept_apart);
    tcase_add_test(tc, bad_releases);
    tcase_add_test(tc, leaks_reclaimed);
    tcase_add_test(tc, partitions_borrow);
    tcase_add_test(tc, no_entry_or_permit);
    tcase_add_test(tc, global_with_redis_is_fleet_wide);
    tcase_add_test(tc, adaptive_through_releases);
    tcase_add_test(tc, race_never_past_max);
    tcase_add_test(tc, race_keys_share_entries);
    tcase_add_test(tc, race_first_acquires);
    tcase_add_test(tc, removal_races_calls);
    tcase_add_test(tc, retired_blocks_bounded);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
