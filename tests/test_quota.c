/* SPDX-License-Identifier: MIT */
/*
 * Quotas against a real redis-server: idempotent charges raced from
 * threads on two instances, exhaustion at exactly the amount, calendar
 * periods through the time hook (and quota.lua's period arithmetic against
 * quota/period.c's), durability across a SIGKILL with appendfsync always,
 * the fail-open journal replayed exactly once, and every bad input.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
#include <uv.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "quota/quota.h"
#include "quota/period.h"
#include "redis/keys.h"
#include "redis/uvloop.h"

#define DAY UINT64_C(86400000)
#define SECRET "quota-test-secret-0123456789"

/* The tests that size work by it run 1/16 as much under valgrind. */
static unsigned scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return (unsigned)atoi(e);
    return getenv("RL_VALGRIND") != NULL ? 16 : 1;
}

static rl_t *open_at(const char *u, uint32_t journal_max)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = u;
    c.key_secret = SECRET;
    c.key_secret_len = strlen(SECRET);
    c.key_prefix = "qt";
    c.log_quiet = 1;
    c.reconnect_max_ms = 50;
    c.quota_journal_max = journal_max;
    /* Generous: a noisy box must never turn a slow answer into a degraded
     * one in the tests that count exactly. */
    c.quota_timeout_ms = 30000;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

static int add(rl_t *rl, const char *spec)
{
    rl_quota_t q;
    char err[200];
    ck_assert_msg(rl_quota_parse(&q, spec, err, sizeof err) == 0, "%s: %s", spec, err);
    int id = rl_quota_add(rl, &q);
    ck_assert_msg(id >= 0, "%s: %s", spec, rl_err_name(id));
    return id;
}

/* Redis's usage for (quota, key), read through the library, waiting until
 * Redis answers (not degraded). */
static uint64_t usage(rl_t *rl, int q, const char *key)
{
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    WAIT_FOR(rl_quota_get(rl, q, key, strlen(key), &r) >= 0 && !(r.flags & RL_FLAG_DEGRADED));
    return r.used;
}

static rl_stats_t stats(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(rl, &s), 0);
    return s;
}

/* ------------------------------------------------- idempotent charges */

#define RACE_THREADS 4
#define RACE_IDS_MAX 4096

typedef struct first {
    int allowed;
    uint64_t used, reset;
} first_t;

typedef struct racer {
    rl_t *rl[2];
    int q[2];
    int t;
    unsigned n;
    uint64_t seed;
    first_t first[RACE_IDS_MAX];
    unsigned ids;      /* distinct ids charged */
    unsigned allowed;  /* of those, first answered allow */
    unsigned retries, bad_retries, degraded;
    uint64_t *used_seen; /* shared: used values of first allows */
    _Atomic unsigned *used_n;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    for (unsigned i = 0; i < r->n; i++) {
        int retry = r->ids > 0 && next_u64(&r->seed) % 10 < 3;
        unsigned id = retry ? (unsigned)(next_u64(&r->seed) % r->ids) : r->ids;
        char rid[32];
        int len = snprintf(rid, sizeof rid, "t%d-%u", r->t, id);
        int inst = (int)(next_u64(&r->seed) & 1);
        rl_quota_result_t out;
        rl_quota_result_init(&out);
        int rc = rl_quota_charge(r->rl[inst], r->q[inst], "tenant", 6, 1, rid, (size_t)len,
                                 &out);
        if (rc < 0 || (out.flags & RL_FLAG_DEGRADED)) {
            r->degraded++;
            continue;
        }
        if (!retry) {
            r->first[id] = (first_t){rc, out.used, out.reset_unix_ms};
            r->ids++;
            if (rc == RL_ALLOW) {
                r->allowed++;
                unsigned k = atomic_fetch_add(r->used_n, 1);
                r->used_seen[k] = out.used;
            }
            continue;
        }
        r->retries++;
        first_t f = r->first[id];
        if (rc != f.allowed || out.used != f.used || out.reset_unix_ms != f.reset ||
            !(out.flags & RL_FLAG_DUPLICATE))
            r->bad_retries++;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(retried_ids_are_charged_once)
{
    /* 10000 charges from 4 threads, each on either of 2 instances, 30% of
     * them retrying an id the thread charged before (maybe through the
     * other instance). The amount runs out part way, so first answers are
     * allows and denies both. */
    if (rl_test_redis_skipped())
        return;
    unsigned total = 10000 / scale() / RACE_THREADS * RACE_THREADS;
    uint64_t amount = total / 2;
    rl_t *a = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    rl_t *b = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    char spec[96];
    snprintf(spec, sizeof spec, "name=race amount=%llu period=month", (unsigned long long)amount);
    int qa = add(a, spec), qb = add(b, spec);
    /* One moment for every charge: no month boundary mid-test. */
    rl__quota_set_time(a, UINT64_C(1706000000000));
    rl__quota_set_time(b, UINT64_C(1706000000000));
    static racer_t r[RACE_THREADS];
    static uint64_t used_seen[10000];
    _Atomic unsigned used_n = 0;
    pthread_t th[RACE_THREADS];
    for (int t = 0; t < RACE_THREADS; t++) {
        memset(&r[t], 0, sizeof r[t]);
        r[t] = (racer_t){.rl = {a, b}, .q = {qa, qb}, .t = t, .n = total / RACE_THREADS,
                         .seed = 77u + (uint64_t)t, .used_seen = used_seen, .used_n = &used_n};
        ck_assert_int_eq(pthread_create(&th[t], NULL, race, &r[t]), 0);
    }
    unsigned ids = 0, allowed = 0, retries = 0, bad = 0, degraded = 0;
    for (int t = 0; t < RACE_THREADS; t++) {
        pthread_join(th[t], NULL);
        ids += r[t].ids;
        allowed += r[t].allowed;
        retries += r[t].retries;
        bad += r[t].bad_retries;
        degraded += r[t].degraded;
    }
    ck_assert_uint_eq(degraded, 0);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_gt(retries, total / 5);
    ck_assert_uint_gt(ids, amount); /* the amount ran out: denies were answered too */
    ck_assert_uint_eq(allowed, amount);
    /* Redis's counter is the number of distinct ids charged, and the
     * allowed charges saw it move by one each: used 1..amount, once each. */
    ck_assert_uint_eq(usage(a, qa, "tenant"), allowed);
    ck_assert_uint_eq(usage(b, qb, "tenant"), allowed);
    ck_assert_uint_eq(atomic_load(&used_n), allowed);
    qsort(used_seen, allowed, sizeof used_seen[0], cmp_u64);
    for (unsigned i = 0; i < allowed; i++)
        REQUIRE(used_seen[i] == i + 1, "allowed charge %u saw used %llu", i,
                (unsigned long long)used_seen[i]);
    rl_stats_t s = stats(a), sb = stats(b);
    ck_assert_uint_eq(s.quota_charges + sb.quota_charges, total);
    ck_assert_uint_eq(s.quota_duplicates + sb.quota_duplicates, retries);
    rl_test_release_all();
}
END_TEST

/* ---------------------------------------------------------- exhaustion */

typedef struct exhauster {
    rl_t *rl;
    int q, t;
    unsigned allowed, denied, errors;
    uint64_t used[100];
} exhauster_t;

static void *exhaust(void *arg)
{
    exhauster_t *e = arg;
    for (unsigned i = 0; i < 20; i++) {
        char rid[32];
        int len = snprintf(rid, sizeof rid, "x%d-%u", e->t, i);
        rl_quota_result_t out;
        rl_quota_result_init(&out);
        int rc = rl_quota_charge(e->rl, e->q, "shared", 6, 1, rid, (size_t)len, &out);
        if (rc == RL_ALLOW && !(out.flags & RL_FLAG_DEGRADED) && e->allowed < 100)
            e->used[e->allowed++] = out.used;
        else if (rc == RL_DENY && !(out.flags & RL_FLAG_DEGRADED))
            e->denied++;
        else
            e->errors++;
    }
    return NULL;
}

START_TEST(exhaustion_allows_exactly_the_amount)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    int q = add(rl, "name=exhaust amount=100 period=day");
    rl__quota_set_time(rl, UINT64_C(1706000000000));
    static exhauster_t e[16];
    pthread_t th[16];
    for (int t = 0; t < 16; t++) {
        e[t] = (exhauster_t){.rl = rl, .q = q, .t = t};
        ck_assert_int_eq(pthread_create(&th[t], NULL, exhaust, &e[t]), 0);
    }
    unsigned allowed = 0, denied = 0, errors = 0;
    int seen[101] = {0};
    for (int t = 0; t < 16; t++) {
        pthread_join(th[t], NULL);
        allowed += e[t].allowed;
        denied += e[t].denied;
        errors += e[t].errors;
        for (unsigned i = 0; i < e[t].allowed; i++)
            if (e[t].used[i] >= 1 && e[t].used[i] <= 100)
                seen[e[t].used[i]]++;
    }
    ck_assert_uint_eq(errors, 0);
    ck_assert_uint_eq(allowed, 100);
    ck_assert_uint_eq(denied, 16 * 20 - 100);
    for (int u = 1; u <= 100; u++)
        ck_assert_int_eq(seen[u], 1);
    ck_assert_uint_eq(usage(rl, q, "shared"), 100);
    rl_test_release_all();
}
END_TEST

/* ------------------------------------------------------------ calendar */

/* One charge at `at` with a new id: its answer. */
static rl_quota_result_t charge_at(rl_t *rl, int q, uint64_t at, const char *key, uint64_t cost)
{
    static unsigned n;
    char rid[32];
    int len = snprintf(rid, sizeof rid, "cal-%u", n++);
    rl__quota_set_time(rl, at);
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    int rc = rl_quota_charge(rl, q, key, strlen(key), cost, rid, (size_t)len, &r);
    ck_assert_int_ge(rc, 0);
    ck_assert_uint_eq(r.flags & RL_FLAG_DEGRADED, 0);
    return r;
}

/* The raw counter in Redis: {tag}:p:<start>. */
static long long raw_counter(rl_t *rl, const char *quota, const char *key, uint64_t start)
{
    char tag[200], name[260];
    rl__redis_quota_tag(&rl->kh, rl->key_prefix, quota, rl__keyhash(&rl->kh, key, strlen(key)),
                        tag, sizeof tag);
    snprintf(name, sizeof name, "%s:p:%llu", tag, (unsigned long long)start);
    redisContext *c = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(c != NULL && c->err == 0);
    redisReply *r = redisCommand(c, "GET %s", name);
    ck_assert_ptr_nonnull(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Just before `boundary` and at it: the period changes there, usage starts
 * again, and each counter is named by its period's start. */
static void crosses(rl_t *rl, int q, const char *quota, uint64_t prev_start, uint64_t boundary,
                    uint64_t next_end, const char *key)
{
    rl_quota_result_t r = charge_at(rl, q, boundary - 1, key, 3);
    ck_assert_uint_eq(r.used, 3);
    ck_assert_uint_eq(r.reset_unix_ms, boundary);
    r = charge_at(rl, q, boundary - 1, key, 2);
    ck_assert_uint_eq(r.used, 5);
    r = charge_at(rl, q, boundary, key, 1);
    ck_assert_msg(r.used == 1 && r.reset_unix_ms == next_end,
                  "%s at %llu: used %llu reset %llu, expected 1 and %llu", quota,
                  (unsigned long long)boundary, (unsigned long long)r.used,
                  (unsigned long long)r.reset_unix_ms, (unsigned long long)next_end);
    ck_assert_int_eq(raw_counter(rl, quota, key, prev_start), 5);
    ck_assert_int_eq(raw_counter(rl, quota, key, boundary), 1);
}

START_TEST(calendar_periods_through_the_time_hook)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    int month = add(rl, "name=cal-month amount=1000 period=month");
    int day = add(rl, "name=cal-day amount=1000 period=day");
    int week = add(rl, "name=cal-week amount=1000 period=week");
    int fixed = add(rl, "name=cal-30d amount=1000 period=30d");
    /* Jan 31 -> Feb 1 (2024) */
    crosses(rl, month, "cal-month", 1704067200000, 1706745600000, 1709251200000, "a");
    /* Feb 28 -> 29 -> Mar 1 in a leap year */
    crosses(rl, day, "cal-day", 1709078400000, 1709164800000, 1709251200000, "b");
    crosses(rl, day, "cal-day", 1709164800000, 1709251200000, 1709337600000, "c");
    crosses(rl, month, "cal-month", 1706745600000, 1709251200000, 1709251200000 + 31 * DAY, "d");
    /* Dec 31 -> Jan 1 */
    crosses(rl, month, "cal-month", 1733011200000, 1735689600000, 1735689600000 + 31 * DAY, "e");
    crosses(rl, day, "cal-day", 1735603200000, 1735689600000, 1735689600000 + DAY, "f");
    /* Sunday Dec 31 2023 -> Monday Jan 1 2024 */
    crosses(rl, week, "cal-week", 1703462400000, 1704067200000, 1704672000000, "g");
    /* A fixed 30 d period: boundaries at multiples of 30 days. */
    uint64_t p = 30 * DAY, b = UINT64_C(1704067200000) / p * p + p;
    crosses(rl, fixed, "cal-30d", b - p, b, b + p, "h");
    rl_test_release_all();
}
END_TEST

START_TEST(lua_periods_match_c)
{
    /* quota.lua's calendar against quota/period.c at random moments up to
     * 2200, for every kind of period. */
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    const char *specs[] = {"name=m0 amount=5 period=hour", "name=m1 amount=5 period=day",
                           "name=m2 amount=5 period=week", "name=m3 amount=5 period=month",
                           "name=m4 amount=5 period=7d"};
    int q[5];
    for (int k = 0; k < 5; k++)
        q[k] = add(rl, specs[k]);
    uint64_t rng = 9;
    unsigned n = 400 / scale();
    for (unsigned i = 0; i < n; i++) {
        uint64_t now = 1 + next_u64(&rng) % (UINT64_C(7258118400) * 1000);
        rl__quota_set_time(rl, now);
        for (int k = 0; k < 5; k++) {
            rl_quota_result_t r;
            rl_quota_result_init(&r);
            ck_assert_int_ge(rl_quota_get(rl, q[k], "k", 1, &r), 0);
            uint64_t s, e;
            rl__quota_period(k, k == 4 ? 7 * DAY : 0, now, &s, &e);
            REQUIRE(r.reset_unix_ms == e && !(r.flags & RL_FLAG_DEGRADED),
                    "kind %d at %llu: Lua %llu, C %llu", k, (unsigned long long)now,
                    (unsigned long long)r.reset_unix_ms, (unsigned long long)e);
        }
    }
    rl_test_release_all();
}
END_TEST

/* --------------------------------------------------------- persistence */

typedef struct persister {
    rl_t *rl;
    int q, t;
    _Atomic unsigned *acked;
    unsigned target;
    unsigned degraded;
    unsigned mine;
} persister_t;

static void *persist(void *arg)
{
    persister_t *p = arg;
    for (unsigned i = 0; atomic_load(p->acked) < p->target; i++) {
        char rid[32];
        int len = snprintf(rid, sizeof rid, "p%d-%u", p->t, i);
        rl_quota_result_t out;
        rl_quota_result_init(&out);
        int rc = rl_quota_charge(p->rl, p->q, "durable", 7, 1, rid, (size_t)len, &out);
        if (rc == RL_ALLOW && !(out.flags & RL_FLAG_DEGRADED)) {
            atomic_fetch_add(p->acked, 1);
            p->mine++;
        } else {
            p->degraded++;
            rl_test_poll_pause(2); /* Redis is restarting: do not spin */
        }
    }
    return NULL;
}

static char aof_dir[64];
static const char *aof_args[] = {"--appendonly", "yes", "--appendfsync", "always", "--dir",
                                 aof_dir, NULL};

START_TEST(acknowledged_charges_survive_sigkill)
{
    /* appendonly yes, appendfsync always: Redis answers a write only once
     * it is in the append-only file, so a SIGKILL loses no charge a caller
     * was told about. */
    if (rl_test_redis_skipped())
        return;
    snprintf(aof_dir, sizeof aof_dir, "/tmp/rl-quota-aof-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(aof_dir));
    rl_test_redis_t aof;
    char err[256], u[64];
    ck_assert_msg(rl_test_redis_start_args(&aof, aof_args, err, sizeof err) == 0, "%s", err);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", aof.port);
    rl_t *rl = rl_test_hold(open_at(u, 100), rl_test_close_fn);
    int q = add(rl, "name=durable amount=1000000000 period=month on_failure=closed");
    _Atomic unsigned acked = 0;
    unsigned target = 600 / scale();
    persister_t p[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        p[t] = (persister_t){.rl = rl, .q = q, .t = t, .acked = &acked, .target = target};
        ck_assert_int_eq(pthread_create(&th[t], NULL, persist, &p[t]), 0);
    }
    WAIT_FOR(atomic_load(&acked) >= target / 2);
    ck_assert_msg(rl_test_redis_crash_restart(&aof, err, sizeof err) == 0, "%s", err);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    unsigned a = atomic_load(&acked), degraded = p[0].degraded + p[1].degraded;
    uint64_t used = usage(rl, q, "durable");
    /* Every acknowledged charge is counted; a charge whose answer was lost
     * with the server may be counted too (a timeout is not "not charged"). */
    ck_assert_msg(used >= a && used <= (uint64_t)a + degraded,
                  "Redis counts %llu after the crash; callers were told %u allowed (%u "
                  "degraded answers)", (unsigned long long)used, a, degraded);
    rl_test_release_all();
    rl_test_redis_stop(&aof);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", aof_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ------------------------------------------------------ fail-open journal */

static int charge_id(rl_t *rl, int q, const char *key, const char *prefix, unsigned i,
                     uint32_t *flags)
{
    char rid[40];
    int len = snprintf(rid, sizeof rid, "%s-%u", prefix, i);
    rl_quota_result_t out;
    rl_quota_result_init(&out);
    int rc = rl_quota_charge(rl, q, key, strlen(key), 1, rid, (size_t)len, &out);
    *flags = out.flags;
    return rc;
}

START_TEST(journal_replays_exactly_once)
{
    /* Redis stopped: 500 charges of an open quota are allowed and journaled
     * (with 50 retried ids among them); the journal of a second instance
     * holds 100 and loses 50. Redis back: each journal is replayed, the
     * first with its first answers "lost" (sent again), and Redis counts
     * each distinct id once: +500, no more. */
    if (rl_test_redis_skipped())
        return;
    snprintf(aof_dir, sizeof aof_dir, "/tmp/rl-quota-aof-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(aof_dir));
    rl_test_redis_t aof;
    char err[256], u[64];
    ck_assert_msg(rl_test_redis_start_args(&aof, aof_args, err, sizeof err) == 0, "%s", err);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", aof.port);
    rl_t *rl = rl_test_hold(open_at(u, 1000), rl_test_close_fn);
    rl_t *small = rl_test_hold(open_at(u, 100), rl_test_close_fn);
    int q = add(rl, "name=open amount=1000000 period=month on_failure=open");
    int qs = add(small, "name=open amount=1000000 period=month on_failure=open");
    uint32_t flags;
    for (unsigned i = 0; i < 10; i++) {
        ck_assert_int_eq(charge_id(rl, q, "j", "before", i, &flags), RL_ALLOW);
        ck_assert_uint_eq(flags, 0);
    }
    ck_assert_uint_eq(usage(rl, q, "j"), 10);

    rl_test_redis_stop(&aof);
    for (unsigned i = 0; i < 500; i++) {
        ck_assert_int_eq(charge_id(rl, q, "j", "out", i, &flags), RL_ALLOW);
        ck_assert_uint_eq(flags, RL_FLAG_DEGRADED);
    }
    for (unsigned i = 0; i < 50; i++) /* retries during the outage */
        ck_assert_int_eq(charge_id(rl, q, "j", "out", i * 7, &flags), RL_ALLOW);
    for (unsigned i = 0; i < 150; i++)
        ck_assert_int_eq(charge_id(small, qs, "s", "small", i, &flags), RL_ALLOW);
    rl_stats_t s = stats(rl), ss = stats(small);
    ck_assert_uint_eq(s.quota_degraded, 550);
    ck_assert_uint_eq(s.quota_journaled, 550);
    ck_assert_uint_eq(s.quota_lost, 0);
    ck_assert_uint_eq(ss.quota_journaled, 100);
    ck_assert_uint_eq(ss.quota_lost, 50);
    ck_assert_uint_eq(ss.quota_journal_len, 100);
    char text[65536];
    ck_assert_int_lt(rl_metrics_text(small, text, sizeof text), (int)sizeof text);
    ck_assert_ptr_nonnull(strstr(text, "\nratelimit_quota_lost_total 50\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nratelimit_quota_journal_entries 100\n"));

    /* The first 20 replayed answers are taken as lost: sent again. */
    rl__quota_lose_acks(rl, 20);
    ck_assert_msg(rl_test_redis_crash_restart(&aof, err, sizeof err) == 0, "%s", err);
    WAIT_FOR(stats(rl).quota_journal_len == 0 && stats(small).quota_journal_len == 0);
    s = stats(rl);
    ck_assert_uint_eq(s.quota_replayed, 550);
    ck_assert_uint_eq(usage(rl, q, "j"), 10 + 500);
    ck_assert_uint_eq(usage(small, qs, "s"), 100);
    ck_assert_uint_eq(stats(small).quota_replayed, 100);
    /* Retried once more now, an outage id is a duplicate: charged once. */
    rl_quota_result_t out;
    rl_quota_result_init(&out);
    ck_assert_int_eq(rl_quota_charge(rl, q, "j", 1, 1, "out-3", 5, &out), RL_ALLOW);
    ck_assert_uint_eq(out.flags, RL_FLAG_DUPLICATE);
    ck_assert_uint_eq(usage(rl, q, "j"), 510);
    rl_test_release_all();
    rl_test_redis_stop(&aof);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", aof_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(closed_quota_denies_while_redis_is_out)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at("redis://127.0.0.1:1", 100), rl_test_close_fn);
    int q = add(rl, "name=closed amount=10 period=day");
    rl_quota_result_t out;
    rl_quota_result_init(&out);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, "id", 2, &out), RL_DENY);
    ck_assert_uint_eq(out.flags, RL_FLAG_DEGRADED);
    ck_assert_uint_eq(out.remaining, 10);
    ck_assert_uint_gt(out.reset_unix_ms, 0);
    rl_stats_t s = stats(rl);
    ck_assert_uint_eq(s.quota_degraded, 1);
    ck_assert_uint_eq(s.quota_journaled, 0);
    rl_test_release_all();
}
END_TEST

/* ------------------------------------------------------------ bad input */

START_TEST(bad_inputs)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    int q = add(rl, "name=bad amount=10 period=day");
    rl_quota_result_t out;
    rl_quota_result_init(&out);
    char longid[RL_QUOTA_ID_MAX + 1], longkey[RL_MAX_KEY_LEN + 1];
    memset(longid, 'i', sizeof longid);
    memset(longkey, 'k', sizeof longkey);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, "", 0, &out), RL_ERANGE);
    ck_assert_int_eq(out.allowed, RL_DENY);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, longid, sizeof longid, &out), RL_ERANGE);
    ck_assert_int_ge(rl_quota_charge(rl, q, "k", 1, 1, longid, RL_QUOTA_ID_MAX, &out), 0);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, NULL, 3, &out), RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 0, "id", 2, &out), RL_ERANGE);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 11, "id", 2, &out), RL_ECOST);
    ck_assert_int_eq(rl_quota_charge(rl, q + 1, "k", 1, 1, "id", 2, &out), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_charge(rl, -1, "k", 1, 1, "id", 2, &out), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_charge(rl, q, "", 0, 1, "id", 2, &out), RL_EKEYLEN);
    ck_assert_int_eq(rl_quota_charge(rl, q, longkey, sizeof longkey, 1, "id", 2, &out),
                     RL_EKEYLEN);
    ck_assert_int_eq(rl_quota_charge(rl, q, NULL, 1, 1, "id", 2, &out), RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge(NULL, q, "k", 1, 1, "id", 2, &out), RL_EINVAL);
    ck_assert_int_eq(rl_quota_get(rl, q, NULL, 1, &out), RL_EINVAL);
    ck_assert_int_eq(rl_quota_get(rl, q + 1, "k", 1, &out), RL_ENOTFOUND);
    rl_quota_result_t small = {.size = 8};
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, "id", 2, &small), RL_ESIZE);
    ck_assert_int_eq(rl_quota_get(rl, q, "k", 1, &small), RL_ESIZE);
    /* A charge with no out is fine. */
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, "noout", 5, NULL), RL_ALLOW);
    /* Names: unique; a removed quota's id is never valid again. */
    rl_quota_t def;
    ck_assert_int_eq(rl_quota_parse(&def, "name=bad amount=3", NULL, 0), 0);
    ck_assert_int_eq(rl_quota_add(rl, &def), RL_EEXIST);
    ck_assert_int_eq(rl_quota_remove(rl, q), 0);
    ck_assert_int_eq(rl_quota_remove(rl, q), RL_ENOTFOUND);
    ck_assert_int_eq(rl_quota_charge(rl, q, "k", 1, 1, "id", 2, &out), RL_ENOTFOUND);
    int q2 = rl_quota_add(rl, &def);
    ck_assert_int_ge(q2, 0);
    ck_assert_int_ne(q2, q);
    /* The struct's own checks (every field: test_quota_spec). */
    def.amount = 0;
    ck_assert_int_eq(rl_quota_add(rl, &def), RL_ERANGE);
    def.amount = 1;
    def.on_failure = RL_FAIL_LOCAL;
    ck_assert_int_eq(rl_quota_add(rl, &def), RL_EMODE);
    /* At most RL_QUOTA_MAX. */
    int made = 1;
    for (int i = 0; made < RL_QUOTA_MAX; i++, made++) {
        char spec[64];
        snprintf(spec, sizeof spec, "name=many%d amount=1", i);
        add(rl, spec);
    }
    ck_assert_int_eq(rl_quota_parse(&def, "name=onemore amount=1", NULL, 0), 0);
    ck_assert_int_eq(rl_quota_add(rl, &def), RL_ELIMITS);
    rl_test_release_all();
}
END_TEST

/* ------------------------------------------------------- async charges */

/* A libuv host: charges issued from its loop, at most ASYNC_WINDOW in
 * flight, answers handed back with uv_async_send as a host would. */
#define ASYNC_TOTAL 10000
#define ASYNC_WINDOW 128

typedef struct async_req {
    struct async_host *h;
    unsigned idx;  /* charge number */
    unsigned id;   /* request id number */
    int retry;
    _Atomic int rc;
    _Atomic unsigned calls; /* cb runs: must end at 1 */
    rl_quota_result_t r;
} async_req_t;

typedef struct async_host {
    rl_t *rl;
    int q;
    uv_loop_t loop;
    uv_async_t wake;
    unsigned total, sent, done;
    unsigned ids;
    uint64_t seed;
    _Atomic unsigned answered; /* written on the exact thread */
    unsigned inline_answers, errors;
    async_req_t *reqs;
    first_t *first;
} async_host_t;

static void on_async_charge(void *ud, int rc, const rl_quota_result_t *r)
{
    async_req_t *q = ud;
    q->r = *r;
    /* relaxed: the release below publishes rc and r with it. */
    atomic_store_explicit(&q->rc, rc, memory_order_relaxed);
    atomic_fetch_add_explicit(&q->calls, 1, memory_order_release);
    atomic_fetch_add_explicit(&q->h->answered, 1, memory_order_release);
    uv_async_send(&q->h->wake);
}

static void async_issue(async_host_t *h)
{
    /* acquire: the answers counted are visible with their results. */
    while (h->sent < h->total &&
           h->sent - atomic_load_explicit(&h->answered, memory_order_acquire) < ASYNC_WINDOW) {
        async_req_t *q = &h->reqs[h->sent];
        q->h = h;
        q->idx = h->sent;
        q->retry = h->ids > 0 && next_u64(&h->seed) % 10 < 3;
        q->id = q->retry ? (unsigned)(next_u64(&h->seed) % h->ids) : h->ids++;
        rl_quota_result_init(&q->r);
        char rid[32];
        int len = snprintf(rid, sizeof rid, "a-%u", q->id);
        h->sent++;
        int rc = rl_quota_charge_async(h->rl, h->q, "loop", 4, 1, rid, (size_t)len,
                                       on_async_charge, q);
        if (rc != RL_PENDING) {
            h->inline_answers++;
            atomic_fetch_add_explicit(&h->answered, 1, memory_order_relaxed);
        }
    }
}

static void on_wake(uv_async_t *a)
{
    async_host_t *h = a->data;
    async_issue(h);
    /* acquire: pairs with the callbacks' release. */
    if (atomic_load_explicit(&h->answered, memory_order_acquire) == h->total)
        uv_close((uv_handle_t *)&h->wake, NULL);
}

START_TEST(async_charges_from_a_loop)
{
    /* 10000 charges from a uv loop, 30% retrying an earlier id (often while
     * the first is still in flight): every callback runs once, Redis counts
     * each distinct id once, and a retry answered after its first got the
     * first's answer. */
    if (rl_test_redis_skipped())
        return;
    static async_host_t h;
    memset(&h, 0, sizeof h);
    h.total = ASYNC_TOTAL / scale();
    h.seed = 4242;
    h.rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    h.q = add(h.rl, "name=async amount=1000000 period=month");
    rl__quota_set_time(h.rl, UINT64_C(1706000000000));
    h.reqs = calloc(h.total, sizeof *h.reqs);
    ck_assert_ptr_nonnull(h.reqs);
    ck_assert_int_eq(uv_loop_init(&h.loop), 0);
    ck_assert_int_eq(uv_async_init(&h.loop, &h.wake, on_wake), 0);
    h.wake.data = &h;
    async_issue(&h);
    ck_assert_int_eq(uv_run(&h.loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(rl__uv_loop_close(&h.loop), 0);
    ck_assert_uint_eq(h.inline_answers, 0);
    /* Each id's answers: exactly one not a duplicate (its charge), the
     * rest duplicates of it, with the same figures. */
    unsigned *charged = calloc(h.ids, sizeof *charged);
    first_t *first = calloc(h.ids, sizeof *first);
    ck_assert_ptr_nonnull(charged);
    ck_assert_ptr_nonnull(first);
    unsigned dups = 0;
    for (unsigned i = 0; i < h.total; i++) {
        async_req_t *q = &h.reqs[i];
        /* acquire: pairs with the callback's release. */
        ck_assert_uint_eq(atomic_load_explicit(&q->calls, memory_order_acquire), 1);
        ck_assert_int_eq(atomic_load_explicit(&q->rc, memory_order_relaxed), RL_ALLOW);
        ck_assert_uint_eq(q->r.flags & RL_FLAG_DEGRADED, 0);
        if (q->r.flags & RL_FLAG_DUPLICATE) {
            dups++;
            continue;
        }
        charged[q->id]++;
        first[q->id] = (first_t){RL_ALLOW, q->r.used, q->r.reset_unix_ms};
    }
    for (unsigned id = 0; id < h.ids; id++)
        REQUIRE(charged[id] == 1, "id %u charged %u times", id, charged[id]);
    for (unsigned i = 0; i < h.total; i++) {
        async_req_t *q = &h.reqs[i];
        if (q->r.flags & RL_FLAG_DUPLICATE)
            REQUIRE(q->r.used == first[q->id].used &&
                        q->r.reset_unix_ms == first[q->id].reset,
                    "retry %u of id %u: used %llu, first %llu", i, q->id,
                    (unsigned long long)q->r.used, (unsigned long long)first[q->id].used);
    }
    ck_assert_uint_eq(dups, h.total - h.ids);
    ck_assert_uint_gt(dups, h.total / 5);
    ck_assert_uint_eq(usage(h.rl, h.q, "loop"), h.ids);
    rl_stats_t s = stats(h.rl);
    ck_assert_uint_eq(s.quota_charges, h.total);
    ck_assert_uint_eq(s.quota_duplicates, dups);
    free(charged);
    free(first);
    rl_test_release_all();
    free(h.reqs);
}
END_TEST

static _Atomic unsigned close_calls, close_open_degraded;

static void on_close_charge(void *ud, int rc, const rl_quota_result_t *r)
{
    _Atomic unsigned *mine = ud;
    /* relaxed: counters read after rl_close joined the thread. */
    atomic_fetch_add_explicit(mine, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&close_calls, 1, memory_order_relaxed);
    if (rc == RL_ALLOW && r->flags == RL_FLAG_DEGRADED && r->used == 0)
        atomic_fetch_add_explicit(&close_open_degraded, 1, memory_order_relaxed);
}

START_TEST(async_close_with_charges_in_flight)
{
    /* Redis frozen (SIGSTOP): every charge stays in flight until rl_close,
     * which answers each once (open: allowed, degraded) before it returns. */
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = open_at(rl_test_redis_url(), 1000);
    int q = add(rl, "name=closing amount=1000 period=day on_failure=open");
    usage(rl, q, "warm"); /* the connection is up */
    static _Atomic unsigned each[200];
    for (unsigned i = 0; i < 200; i++)
        atomic_store(&each[i], 0);
    atomic_store(&close_calls, 0);
    atomic_store(&close_open_degraded, 0);
    kill(rl_test_redis()->pid, SIGSTOP);
    for (unsigned i = 0; i < 200; i++) {
        char rid[16];
        int len = snprintf(rid, sizeof rid, "c%u", i);
        ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 1, rid, (size_t)len,
                                               on_close_charge, &each[i]),
                         RL_PENDING);
    }
    rl_close(rl);
    unsigned seen = atomic_load(&close_calls);
    kill(rl_test_redis()->pid, SIGCONT);
    ck_assert_uint_eq(seen, 200);
    ck_assert_uint_eq(atomic_load(&close_open_degraded), 200);
    for (unsigned i = 0; i < 200; i++)
        ck_assert_uint_eq(atomic_load(&each[i]), 1);
}
END_TEST

static void on_never(void *ud, int rc, const rl_quota_result_t *r)
{
    (void)rc;
    (void)r;
    atomic_fetch_add((_Atomic unsigned *)ud, 1);
}

START_TEST(async_bad_inputs_answer_inline)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = rl_test_hold(open_at(rl_test_redis_url(), 100), rl_test_close_fn);
    int q = add(rl, "name=abad amount=10 period=day");
    static _Atomic unsigned never;
    atomic_store(&never, 0);
    ck_assert_int_eq(rl_quota_charge_async(NULL, q, "k", 1, 1, "i", 1, on_never, &never),
                     RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 1, "i", 1, NULL, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, NULL, 1, 1, "i", 1, on_never, &never),
                     RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 1, NULL, 1, on_never, &never),
                     RL_EINVAL);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 0, 1, "i", 1, on_never, &never),
                     RL_EKEYLEN);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 1, "i", 0, on_never, &never),
                     RL_ERANGE);
    char big[RL_QUOTA_ID_MAX + 1];
    memset(big, 'x', sizeof big);
    ck_assert_int_eq(
        rl_quota_charge_async(rl, q, "k", 1, 1, big, sizeof big, on_never, &never), RL_ERANGE);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 0, "i", 1, on_never, &never),
                     RL_ERANGE);
    ck_assert_int_eq(rl_quota_charge_async(rl, q, "k", 1, 11, "i", 1, on_never, &never),
                     RL_ECOST);
    ck_assert_int_eq(rl_quota_charge_async(rl, q + 1, "k", 1, 1, "i", 1, on_never, &never),
                     RL_ENOTFOUND);
    ck_assert_uint_eq(atomic_load(&never), 0);
    ck_assert_uint_eq(stats(rl).quota_charges, 0);
    rl_test_release_all();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quota");
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, retried_ids_are_charged_once);
    tcase_add_test(tc, exhaustion_allows_exactly_the_amount);
    tcase_add_test(tc, calendar_periods_through_the_time_hook);
    tcase_add_test(tc, lua_periods_match_c);
    tcase_add_test(tc, closed_quota_denies_while_redis_is_out);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, async_charges_from_a_loop);
    tcase_add_test(tc, async_close_with_charges_in_flight);
    tcase_add_test(tc, async_bad_inputs_answer_inline);
    suite_add_tcase(s, tc);
    TCase *own = tcase_create("own_server");
    tcase_add_checked_fixture(own, NULL, rl_test_release_all);
    tcase_set_timeout(own, 300);
    tcase_add_test(own, acknowledged_charges_survive_sigkill);
    tcase_add_test(own, journal_replays_exactly_once);
    suite_add_tcase(s, own);
    return s;
}

int main(void) { return rl_test_run(suite()); }
