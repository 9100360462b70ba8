/* SPDX-License-Identifier: MIT */
/*
 * Reservations of exact and tiered limits against a real Redis
 * (lua/reserve.lua): the Redis bucket against a model (rates whose refill
 * within a test is no whole token, so the model is exact), 8 racing threads
 * that neither create nor lose a token, rl_check and rl_reserve sharing one
 * budget, a settle charged once however often it is sent, a settle after
 * Redis lost its data, expiry at the estimate (the instance clock frozen
 * through the hook), rl_reserve_multi all or nothing, and on_failure with
 * Redis frozen or killed.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "redis/keys.h"
#include "reserve/reserve.h"
#include "reserve/exact.h"

static const char secret[] = "reserve-exact-secret-0123456789ab";

/* A rate whose refill over a test is no whole token: 1 an hour (and 100
 * an hour for the big burst: one token in 36 s, longer than the test). */
#define SLOW "rate=1/h"

static rl_t *open_node(rl_test_clock_t *clk, uint32_t timeout_ms)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "rx";
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.exact_timeout_ms = timeout_ms;
    c.log_quiet = 1;
    if (clk != NULL) {
        c.clock = rl_test_clock_fn;
        c.clock_ud = clk;
    }
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    rl_test_hold(rl, rl_test_close_fn);
    return rl;
}

/* Add a limit and wait until Redis answers its checks (a peek, which
 * charges nothing): the exact thread's connection is up, so a test's
 * first reserve is Redis's, not on_failure's. */
static int add_limit(rl_t *rl, const char *spec)
{
    rl_limit_t lim;
    char err[128];
    ck_assert_msg(rl_limit_parse(&lim, spec, err, sizeof err) == 0, "%s", err);
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    for (unsigned i = 0; strstr(spec, "mode=exact") != NULL; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, id, "warmup", 6, 0, &d);
        if (d.flags & RL_FLAG_EXACT)
            return id;
        ck_assert_msg(i < 2000, "the exact path never answered");
        rl_test_poll_pause(i);
    }
    return id;
}

/* The bucket's tokens in Redis (xn), or `absent` when there is no bucket. */
static long long tokens(rl_t *rl, const char *limit, const char *key, long long absent)
{
    char name[200];
    rl__redis_key_name(&rl->kh, rl->key_prefix, limit, rl__keyhash(&rl->kh, key, strlen(key)),
                       name, sizeof name);
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *rep = redisCommand(r, "HGET %s xn", name);
    ck_assert(rep != NULL);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : absent;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

static int reserve(rl_t *rl, int id, const char *key, uint32_t est, uint32_t ttl_ms,
                   rl_reservation_t *res, rl_decision_t *d)
{
    rl_reservation_init(res);
    rl_decision_init(d);
    return rl_reserve(rl, id, key, strlen(key), est, ttl_ms, res, d);
}

static uint64_t rsvx_lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* One thread: a model step after each call, against the bucket in Redis:
 * reserve, settle above, below or at the estimate, release, and rl_check,
 * denials included, debt past the burst included. */
START_TEST(exact_model_single)
{
    rl_t *rl = open_node(NULL, 2000);
    int id = add_limit(rl, "name=xm " SLOW " burst=100 mode=exact");
    long long model = 100;
    uint64_t seed = 7;
    for (int step = 0; step < 300; step++) {
        uint32_t est = 1 + (uint32_t)(rsvx_lcg(&seed) % 30);
        rl_reservation_t res;
        rl_decision_t d;
        int rc = reserve(rl, id, "k", est, 60000, &res, &d);
        ck_assert_int_ge(rc, 0);
        ck_assert(d.flags & RL_FLAG_EXACT);
        if (rc == RL_DENY) {
            ck_assert_int_lt(model, (long long)est); /* denied only when short */
            ck_assert_int_eq(tokens(rl, "xm", "k", 100), model);
            /* Refill is too slow to come back: pay the debt with a refund. */
            model = 100;
            redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
            ck_assert(r != NULL && r->err == 0);
            char name[200];
            rl__redis_key_name(&rl->kh, rl->key_prefix, "xm", rl__keyhash(&rl->kh, "k", 1), name,
                               sizeof name);
            freeReplyObject(redisCommand(r, "DEL %s", name));
            redisFree(r);
            continue;
        }
        ck_assert_int_ge(model, (long long)est);
        model -= est;
        ck_assert_int_eq(tokens(rl, "xm", "k", 100), model);
        uint32_t which = (uint32_t)(rsvx_lcg(&seed) % 4);
        if (which == 0) {
            ck_assert_int_eq(rl_release(rl, &res), 0);
            model += est;
        } else {
            uint32_t actual = (uint32_t)(rsvx_lcg(&seed) % 60);
            ck_assert_int_eq(rl_settle(rl, &res, actual), 0);
            model -= (long long)actual - est;
            if (model > 100)
                model = 100;
        }
        ck_assert_int_eq(tokens(rl, "xm", "k", 100), model);
        /* rl_check on the same key takes from the same bucket. */
        if (which == 3) {
            rl_decision_init(&d);
            rc = rl_check(rl, id, "k", 1, 2, &d);
            ck_assert_int_eq(rc, model >= 2 ? RL_ALLOW : RL_DENY);
            if (rc == RL_ALLOW)
                model -= 2;
            ck_assert_int_eq(tokens(rl, "xm", "k", 100), model);
        }
    }
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.in_flight, 0);
    ck_assert_uint_eq(s.expired, 0);
    ck_assert_uint_gt(s.settled_up, 0);
    ck_assert_uint_gt(s.settled_down, 0);
    ck_assert_uint_gt(s.released, 0);
}
END_TEST

typedef struct racer {
    rl_t *rl;
    int id;
    uint64_t seed;
    long long spent; /* what its settled reservations used, at their actual */
    long long held;  /* estimates left in flight at the end */
    uint64_t denied;
    int kept;
} racer_t;

static void *race(void *arg)
{
    racer_t *r = arg;
    rl_reservation_t keep[4];
    int kept = 0;
    for (int i = 0; i < 150; i++) {
        uint32_t est = 1 + (uint32_t)(rsvx_lcg(&r->seed) % 20);
        rl_reservation_t res;
        rl_decision_t d;
        int rc = reserve(r->rl, r->id, "hot", est, 60000, &res, &d);
        ck_assert_int_ge(rc, 0);
        if (rc == RL_DENY) {
            r->denied++;
            continue;
        }
        if (kept < 4 && rsvx_lcg(&r->seed) % 16 == 0) {
            keep[kept++] = res; /* left in flight: its estimate stays charged */
            r->held += est;
            continue;
        }
        uint32_t actual = (uint32_t)(rsvx_lcg(&r->seed) % 40);
        if (rsvx_lcg(&r->seed) % 5 == 0) {
            actual = 0;
            ck_assert_int_eq(rl_release(r->rl, &res), 0);
        } else {
            ck_assert_int_eq(rl_settle(r->rl, &res, actual), 0);
        }
        r->spent += actual;
    }
    /* The kept ones are still this thread's: a settle of each at its
     * estimate changes nothing in Redis. */
    for (int i = 0; i < kept; i++)
        ck_assert_uint_gt(keep[i].estimate, 0);
    r->kept = kept;
    return NULL;
}

/* 8 threads reserving and settling on one key: the bucket ends at the
 * burst less what every settled reservation used and every one in flight
 * holds: no token created, none lost, denials and debt included. */
START_TEST(exact_threads_conserve)
{
    rl_t *rl = open_node(NULL, 5000);
    const long long burst = 100000;
    int id = add_limit(rl, "name=xr rate=100/h burst=100000 mode=exact");
    racer_t r[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer_t){rl, id, 11u + (uint64_t)i * 977u, 0, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    long long spent = 0, held = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        spent += r[i].spent;
        held += r[i].held;
    }
    ck_assert_int_eq(tokens(rl, "xr", "hot", burst), burst - spent - held);
    int kept = 0;
    for (int i = 0; i < 8; i++)
        kept += r[i].kept;
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.in_flight, (uint64_t)kept);
}
END_TEST

/* The same with a burst the threads overdraw: denials and debt past the
 * burst, the bucket still exactly the model's. */
START_TEST(exact_threads_debt)
{
    rl_t *rl = open_node(NULL, 5000);
    int id = add_limit(rl, "name=xd " SLOW " burst=400 mode=exact");
    racer_t r[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer_t){rl, id, 5u + (uint64_t)i * 31u, 0, 0, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    long long spent = 0, held = 0;
    uint64_t denied = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        spent += r[i].spent;
        held += r[i].held;
        denied += r[i].denied;
    }
    ck_assert_uint_gt(denied, 0);
    long long left = tokens(rl, "xd", "hot", 400);
    ck_assert_int_eq(left, 400 - spent - held);
    ck_assert_int_lt(left, 0); /* in debt: the model covered it */
}
END_TEST

/* The handle's reservation id, as reserve.c builds it. */
static void rid_of(rl_t *rl, const rl_reservation_t *res, uint64_t rid[2])
{
    rid[0] = rl->reserve->tag;
    rid[1] = res->token[1];
}

/* A settle whose reply was lost is sent again: charged once. The internal
 * settle twice with one id, then the public one on the same handle. */
START_TEST(exact_settle_idempotent)
{
    rl_t *rl = open_node(NULL, 2000);
    int id = add_limit(rl, "name=xi " SLOW " burst=100 mode=exact");
    rl_reservation_t res;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, id, "k", 10, 60000, &res, &d), RL_ALLOW);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 90);
    uint64_t rid[2];
    rid_of(rl, &res, rid);
    rl_keyid_t kid = rl__keyhash(&rl->kh, "k", 1);
    rl_rent_data_t dd = {.id_lo = kid.lo, .id_hi = kid.hi, .limit = id};
    ck_assert_int_eq(rl__rsv_exact_settle(rl, &dd, rid, 30), 0);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 70);
    ck_assert_int_eq(rl__rsv_exact_settle(rl, &dd, rid, 30), 0);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 70);
    /* Another actual on a retry is not charged either: the first stands. */
    ck_assert_int_eq(rl__rsv_exact_settle(rl, &dd, rid, 1), 0);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 70);
    /* The handle is still in flight locally: its settle is answered by the
     * record, and ends it. */
    ck_assert_int_eq(rl_settle(rl, &res, 30), 0);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 70);
    ck_assert_int_eq(rl_settle(rl, &res, 30), RL_EINVAL);
    ck_assert_int_eq(tokens(rl, "xi", "k", -1), 70);
}
END_TEST

/* Redis loses its data (FLUSHALL) with reservations in flight: their
 * settle and release answer RL_EEXPIRED and charge nothing; the bucket
 * Redis now has is its new, full one. */
START_TEST(exact_settle_after_flush)
{
    rl_t *rl = open_node(NULL, 2000);
    int id = add_limit(rl, "name=xf " SLOW " burst=100 mode=exact");
    rl_reservation_t a, b;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, id, "k", 10, 60000, &a, &d), RL_ALLOW);
    ck_assert_int_eq(reserve(rl, id, "k", 20, 60000, &b, &d), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &a, 15), 0);
    ck_assert_int_eq(tokens(rl, "xf", "k", -1), 65);
    rl_test_redis_flushall();
    ck_assert_int_eq(rl_settle(rl, &a, 15), RL_EINVAL); /* ended before */
    ck_assert_int_eq(rl_settle(rl, &b, 90), RL_EEXPIRED);
    ck_assert_int_eq(tokens(rl, "xf", "k", -1), -1); /* nothing written */
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.expired, 1);
    ck_assert_uint_eq(s.in_flight, 0);
    ck_assert_int_eq(rl_settle(rl, &b, 90), RL_EEXPIRED); /* told again, still nothing */
    ck_assert_int_eq(tokens(rl, "xf", "k", -1), -1);
}
END_TEST

/* Past its ttl (the instance clock moved by the hook), a reservation is
 * settled at its estimate: the bucket keeps the estimate, a late settle
 * answers RL_EEXPIRED and charges nothing. */
START_TEST(exact_expiry_at_estimate)
{
    /* Static: the instance (closed by the case's teardown) outlives this frame. */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1000000000u);
    rl_t *rl = open_node(&clk, 2000);
    int id = add_limit(rl, "name=xe " SLOW " burst=100 mode=exact");
    rl_reservation_t res;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, id, "k", 25, 100, &res, &d), RL_ALLOW);
    rl_test_clock_advance(&clk, 101000000u);
    ck_assert_int_eq(rl_settle(rl, &res, 3), RL_EEXPIRED);
    ck_assert_int_eq(tokens(rl, "xe", "k", -1), 75);
    /* The sweep expires it the same way. */
    ck_assert_int_eq(reserve(rl, id, "k", 5, 100, &res, &d), RL_ALLOW);
    rl_test_clock_advance(&clk, 101000000u);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.expired, 2);
    ck_assert_uint_eq(s.in_flight, 0);
    ck_assert_int_eq(rl_release(rl, &res), RL_EEXPIRED);
    ck_assert_int_eq(tokens(rl, "xe", "k", -1), 70);
    rl_test_release(rl);
}
END_TEST

/* rl_reserve_multi over two exact limits: a deny of the second gives the
 * first's tokens back in Redis; an allow holds both. */
START_TEST(exact_multi_all_or_nothing)
{
    rl_t *rl = open_node(NULL, 2000);
    int a = add_limit(rl, "name=ma " SLOW " burst=100 mode=exact");
    int b = add_limit(rl, "name=mb " SLOW " burst=10 mode=exact");
    rl_request_t q[2];
    rl_reservation_t res[2];
    rl_decision_t out[2];
    for (int i = 0; i < 2; i++) {
        rl_request_init(&q[i]);
        rl_reservation_init(&res[i]);
        rl_decision_init(&out[i]);
        q[i].key = "k";
        q[i].key_len = 1;
    }
    q[0].limit = a;
    q[0].cost = 30;
    q[1].limit = b;
    q[1].cost = 8;
    size_t bad = 9;
    ck_assert_int_eq(rl_reserve_multi(rl, q, 2, sizeof q[0], 60000, res, out, &bad), RL_ALLOW);
    ck_assert_uint_eq(bad, 2);
    ck_assert_int_eq(tokens(rl, "ma", "k", -1), 70);
    ck_assert_int_eq(tokens(rl, "mb", "k", -1), 2);
    rl_reservation_t more[2];
    for (int i = 0; i < 2; i++)
        rl_reservation_init(&more[i]);
    q[1].cost = 5;
    ck_assert_int_eq(rl_reserve_multi(rl, q, 2, sizeof q[0], 60000, more, out, &bad), RL_DENY);
    ck_assert_uint_eq(bad, 1);
    ck_assert_int_eq(tokens(rl, "ma", "k", -1), 70); /* given back */
    ck_assert_int_eq(tokens(rl, "mb", "k", -1), 2);
    ck_assert_int_eq(rl_settle(rl, &res[0], 40), 0);
    ck_assert_int_eq(rl_release(rl, &res[1]), 0);
    ck_assert_int_eq(tokens(rl, "ma", "k", -1), 60);
    ck_assert_int_eq(tokens(rl, "mb", "k", -1), 10);
}
END_TEST

/* A tiered key: the local pre-filter, then Redis's bucket, which the
 * reservation moves exactly as an exact key's. */
START_TEST(tiered_reserve_settle)
{
    rl_t *rl = open_node(NULL, 2000);
    add_limit(rl, "name=xw " SLOW " mode=exact"); /* the connection is up */
    int id = add_limit(rl, "name=xt " SLOW " burst=100 mode=tiered");
    rl_reservation_t res;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, id, "k", 10, 60000, &res, &d), RL_ALLOW);
    ck_assert(d.flags & RL_FLAG_EXACT);
    ck_assert_int_eq(tokens(rl, "xt", "k", -1), 90);
    ck_assert_int_eq(rl_settle(rl, &res, 25), 0);
    ck_assert_int_eq(tokens(rl, "xt", "k", -1), 75);
    ck_assert_int_eq(reserve(rl, id, "k", 10, 60000, &res, &d), RL_ALLOW);
    ck_assert_int_eq(rl_release(rl, &res), 0);
    ck_assert_int_eq(tokens(rl, "xt", "k", -1), 75);
    /* A wait is a local bucket's turn: refused for exact and tiered. */
    rl_reservation_init(&res);
    ck_assert_int_eq(rl_reserve_wait(rl, id, "k", 1, 1, 10, 60000, &res, NULL), RL_EMODE);
    ck_assert_int_eq(rl_wait(rl, id, "k", 1, 1, 10, NULL), RL_EMODE);
}
END_TEST

/* Redis frozen: a reserve answers by on_failure (open: admitted, nothing
 * held in Redis; closed: denied); a settle of a reservation Redis holds
 * answers RL_EUNAVAIL and keeps it in flight, and its retry after the thaw
 * is charged once, whether or not the first attempt ran. Each freeze holds
 * one call, shorter than the caller's stall detector (RL_CALLER_STALL_MS),
 * so what was queued runs in order on its connection after the thaw. */
static void frozen_call_begin(void) { kill(rl_test_redis()->pid, SIGSTOP); }
/* Thawed, and until Redis has answered a peek of the key on the same
 * connection: what the frozen call queued has run. */
static void frozen_call_end(rl_t *rl, int id)
{
    kill(rl_test_redis()->pid, SIGCONT);
    for (unsigned i = 0;; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, id, "k", 1, 0, &d);
        if (d.flags & RL_FLAG_EXACT)
            return;
        ck_assert_msg(i < 2000, "Redis never answered after the thaw");
        rl_test_poll_pause(i);
    }
}

START_TEST(exact_frozen_on_failure)
{
    rl_t *rl = open_node(NULL, 300);
    int op = add_limit(rl, "name=fo " SLOW " burst=100 mode=exact on_failure=open");
    int cl = add_limit(rl, "name=fc " SLOW " burst=100 mode=exact on_failure=closed");
    int lo = add_limit(rl, "name=fl " SLOW " burst=100 mode=exact on_failure=local");
    rl_reservation_t held, o, c, l;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, op, "k", 10, 60000, &held, &d), RL_ALLOW);
    ck_assert(d.flags & RL_FLAG_EXACT);
    ck_assert_int_eq(tokens(rl, "fo", "k", -1), 90);
    frozen_call_begin();
    ck_assert_int_eq(reserve(rl, op, "k", 10, 60000, &o, &d), RL_ALLOW);
    frozen_call_end(rl, op);
    ck_assert(d.flags & RL_FLAG_DEGRADED);
    frozen_call_begin();
    ck_assert_int_eq(reserve(rl, cl, "k", 10, 60000, &c, &d), RL_DENY);
    frozen_call_end(rl, cl);
    ck_assert(d.flags & RL_FLAG_DEGRADED);
    frozen_call_begin();
    ck_assert_int_eq(reserve(rl, lo, "k", 10, 60000, &l, &d), RL_ALLOW);
    frozen_call_end(rl, lo);
    ck_assert(d.flags & RL_FLAG_DEGRADED);
    frozen_call_begin();
    ck_assert_int_eq(rl_settle(rl, &held, 50), RL_EUNAVAIL);
    frozen_call_end(rl, op);
    ck_assert_int_eq(rl_settle(rl, &o, 50), 0);    /* nothing held: nothing to charge */
    ck_assert_int_eq(rl_settle(rl, &l, 5), 0);     /* the local fallback's bucket */
    ck_assert_int_eq(rl_settle(rl, &held, 50), 0); /* the same handle, retried */
    /* The frozen reserves' records were released behind them (fo), and
     * the timed-out settle ran at most once: 100 - 50. */
    long long left = 0;
    WAIT_FOR((left = tokens(rl, "fo", "k", -1)) == 50);
    WAIT_FOR(tokens(rl, "fc", "k", 100) == 100);
    rl_reserve_stats_t s;
    rl_reserve_stats_init(&s);
    ck_assert_int_eq(rl_reserve_stats(rl, &s), 0);
    ck_assert_uint_eq(s.in_flight, 0);
}
END_TEST

/* Redis killed and started again empty: a reservation made before has no
 * record any more; its settle answers RL_EEXPIRED, never a charge on the
 * new bucket. While it is down, a settle answers RL_EUNAVAIL and the
 * reservation stays in flight for the retry. */
START_TEST(exact_redis_restart_empty)
{
    rl_t *rl = open_node(NULL, 500);
    int id = add_limit(rl, "name=xk " SLOW " burst=100 mode=exact on_failure=closed");
    rl_reservation_t res;
    rl_decision_t d;
    ck_assert_int_eq(reserve(rl, id, "k", 40, 60000, &res, &d), RL_ALLOW);
    ck_assert_int_eq(tokens(rl, "xk", "k", -1), 60);
    kill(rl_test_redis()->pid, SIGSTOP);
    ck_assert_int_eq(rl_settle(rl, &res, 70), RL_EUNAVAIL);
    rl_reservation_t no;
    ck_assert_int_eq(reserve(rl, id, "k", 1, 60000, &no, &d), RL_DENY);
    char err[256];
    ck_assert_msg(rl_test_redis_crash_restart(rl_test_redis(), err, sizeof err) == 0, "%s", err);
    /* Retried until the caller has reconnected: never a charge. */
    int rc;
    for (unsigned i = 0; (rc = rl_settle(rl, &res, 70)) == RL_EUNAVAIL; i++) {
        ck_assert_uint_lt(i, 2000);
        rl_test_poll_pause(i);
    }
    ck_assert_int_eq(rc, RL_EEXPIRED);
    ck_assert_int_eq(tokens(rl, "xk", "k", -1), -1);
    /* The new server's first answers may come late (its scripts loaded
     * again): on_failure's denies until Redis's own answer. */
    for (unsigned i = 0; (rc = reserve(rl, id, "k", 5, 60000, &res, &d)) != RL_ALLOW; i++) {
        ck_assert(d.flags & RL_FLAG_DEGRADED);
        ck_assert_uint_lt(i, 2000);
        rl_test_poll_pause(i);
    }
    ck_assert(d.flags & RL_FLAG_EXACT);
    ck_assert_int_eq(tokens(rl, "xk", "k", -1), 95);
    ck_assert_int_eq(rl_settle(rl, &res, 5), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve_exact");
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, exact_model_single);
    tcase_add_test(tc, exact_threads_conserve);
    tcase_add_test(tc, exact_threads_debt);
    tcase_add_test(tc, exact_settle_idempotent);
    tcase_add_test(tc, exact_settle_after_flush);
    tcase_add_test(tc, exact_expiry_at_estimate);
    tcase_add_test(tc, exact_multi_all_or_nothing);
    tcase_add_test(tc, tiered_reserve_settle);
    tcase_add_test(tc, exact_frozen_on_failure);
    suite_add_tcase(s, tc);
    /* Last, in its own case: it replaces the server the fixture started. */
    TCase *kc = tcase_create("killed");
    rl_test_redis_fixture(kc);
    tcase_add_checked_fixture(kc, NULL, rl_test_release_all);
    tcase_set_timeout(kc, 120);
    tcase_add_test(kc, exact_redis_restart_empty);
    suite_add_tcase(s, kc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
