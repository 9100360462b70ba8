/* SPDX-License-Identifier: MIT */
/* The per-request client (src/redis/caller.h) against a real Redis: every
 * request is answered once, by its own reply or its deadline, and a reply
 * that comes after its caller gave up never answers anyone else (each
 * request carries a tag its script echoes back). */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "base/alloc.h"
#include "redis/caller.h"

/* The reply is the request's own tag (ARGV[1]); KEYS[1] picks the route. */
static const char *const scripts[] = {"return ARGV[1]"};

static rl_allocator_t alloc;

static rl_redis_caller_t *start_caller(uint32_t pool, uint32_t slots)
{
    char u[64];
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", rl_test_redis()->port);
    static rl_redisurl_t url;
    ck_assert_int_eq(rl__redisurl_parse(u, &url, NULL, 0), 0);
    alloc = (rl_allocator_t){0};
    rl__alloc_defaults(&alloc);
    rl_redis_caller_cfg_t cfg = {&alloc, &url, pool, slots, 100, scripts, 1, NULL, NULL};
    rl_redis_caller_t *c = NULL;
    ck_assert_int_eq(rl__redis_caller_start(&c, &cfg), 0);
    return c;
}

/* A request for key k carrying tag t. */
typedef struct req {
    char key[32], tag[32];
    const char *argv[2];
    size_t argl[2];
    rl_redis_call_t call;
} req_t;

static void req_make(req_t *r, unsigned k, uint64_t t, uint32_t deadline_ms)
{
    snprintf(r->key, sizeof r->key, "{k%u}:x", k);
    snprintf(r->tag, sizeof r->tag, "%llu", (unsigned long long)t);
    r->argv[0] = r->key;
    r->argv[1] = r->tag;
    r->argl[0] = strlen(r->key);
    r->argl[1] = strlen(r->tag);
    r->call = (rl_redis_call_t){0, 1, 1, r->argv, r->argl,
                                uv_hrtime() + (uint64_t)deadline_ms * 1000000u};
}

/* What a blocking caller's parse writes: the echoed tag. */
typedef struct echo {
    char got[32];
    int parsed;
} echo_t;

static void parse_echo(void *ud, int status, const redisReply *reply)
{
    echo_t *e = ud;
    e->parsed++;
    if (status == RL_CALL_REPLY && reply->type == REDIS_REPLY_STRING && reply->len < 32)
        memcpy(e->got, reply->str, reply->len + 1);
}

/* Wait until a blocking call succeeds: the connection is up. */
static void wait_connected(rl_redis_caller_t *c)
{
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        req_t r;
        echo_t e = {{0}, 0};
        req_make(&r, 0, 7, 1000);
        if (rl__redis_caller_wait(c, &r.call, parse_echo, &e) == RL_CALL_REPLY)
            return;
        ck_assert_msg(rl_test_now_ns() < until, "the caller never connected");
        rl_test_poll_pause(i);
    }
}

typedef struct load {
    rl_redis_caller_t *c;
    unsigned id;
    uint32_t deadline_ms;
    _Atomic int *stop;
    _Atomic uint64_t *timeouts;
    uint64_t replies, wrong, slow_timeouts;
    uint64_t worst_over_ns; /* how far past its deadline a timeout returned */
} load_t;

static void *blocking_load(void *arg)
{
    load_t *l = arg;
    for (uint64_t n = 0; !atomic_load(l->stop); n++) {
        req_t r;
        echo_t e = {{0}, 0};
        uint64_t tag = (uint64_t)l->id << 32 | n;
        req_make(&r, (unsigned)(n % 5), tag, l->deadline_ms);
        int st = rl__redis_caller_wait(l->c, &r.call, parse_echo, &e);
        uint64_t now = uv_hrtime();
        if (st == RL_CALL_REPLY) {
            __atomic_fetch_add(&l->replies, 1, __ATOMIC_RELAXED);
            if (strcmp(e.got, r.tag) != 0 || e.parsed != 1)
                l->wrong++;
        } else {
            if (st == RL_CALL_TIMEOUT)
                atomic_fetch_add(l->timeouts, 1);
            if (e.parsed != 0)
                l->wrong++; /* parse runs only for the answer the caller gets */
            if (now > r.call.deadline_ns && now - r.call.deadline_ns > l->worst_over_ns)
                l->worst_over_ns = now - r.call.deadline_ns;
        }
    }
    return NULL;
}

START_TEST(blocking_tags_match)
{
    rl_redis_caller_t *c = start_caller(2, 64);
    wait_connected(c);
    _Atomic int stop = 0;
    _Atomic uint64_t timeouts = 0;
    load_t l[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        l[i] = (load_t){c, i, 5000, &stop, &timeouts, 0, 0, 0, 0};
        pthread_create(&th[i], NULL, blocking_load, &l[i]);
    }
    uint64_t total = 0;
    for (unsigned i = 0; total < 4000; i++) {
        total = 0;
        for (unsigned j = 0; j < 4; j++)
            total += __atomic_load_n(&l[j].replies, __ATOMIC_RELAXED);
        rl_test_poll_pause(i);
    }
    atomic_store(&stop, 1);
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(l[i].wrong, 0);
    }
    rl_redis_caller_counters_t k;
    rl__redis_caller_counters(c, &k);
    ck_assert_uint_eq(k.late, 0);
    rl__redis_caller_stop(c);
}
END_TEST

/* Redis frozen while 4 threads call with a 20 ms deadline: each call
 * returns by its deadline (plus a bound that holds on a loaded box) as a
 * timeout; after the thaw the late replies are dropped and the calls that
 * follow, pipelined behind them on the same connections, each get their
 * own reply. */
START_TEST(frozen_late_replies_never_misdelivered)
{
    rl_redis_caller_t *c = start_caller(1, 256);
    wait_connected(c);
    _Atomic int stop = 0;
    _Atomic uint64_t timeouts = 0;
    load_t l[4];
    pthread_t th[4];
    kill(rl_test_redis()->pid, SIGSTOP);
    for (unsigned i = 0; i < 4; i++) {
        l[i] = (load_t){c, i, 20, &stop, &timeouts, 0, 0, 0, 0};
        pthread_create(&th[i], NULL, blocking_load, &l[i]);
    }
    WAIT_FOR(atomic_load(&timeouts) >= 40);
    kill(rl_test_redis()->pid, SIGCONT);
    uint64_t total = 0;
    for (unsigned i = 0; total < 2000; i++) {
        total = 0;
        for (unsigned j = 0; j < 4; j++)
            total += __atomic_load_n(&l[j].replies, __ATOMIC_RELAXED);
        rl_test_poll_pause(i);
    }
    atomic_store(&stop, 1);
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_uint_eq(l[i].wrong, 0);
        /* A timed-out caller is back within 1 s of its deadline: a bound,
         * not a figure (bench/ measures it). */
        ck_assert_uint_lt(l[i].worst_over_ns, 1000000000u);
    }
    rl_redis_caller_counters_t k;
    rl__redis_caller_counters(c, &k);
    /* The late replies were there to misdeliver (or the box was so slow
     * that the connection was started over as stalled). */
    ck_assert_msg(k.late > 0 || k.stalls > 0, "late %llu stalls %llu",
                  (unsigned long long)k.late, (unsigned long long)k.stalls);
    rl__redis_caller_stop(c);
}
END_TEST

/* SCRIPT FLUSH empties the server's cache: the next EVALSHA gets NOSCRIPT
 * and the same request goes again as EVAL, answered, never failed. */
START_TEST(noscript_answered_by_eval)
{
    rl_redis_caller_t *c = start_caller(1, 8);
    wait_connected(c);
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *rep = redisCommand(r, "SCRIPT FLUSH");
    ck_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    redisFree(r);
    for (unsigned i = 0; i < 3; i++) {
        req_t q;
        echo_t e = {{0}, 0};
        req_make(&q, 1, 100 + i, 5000);
        ck_assert_int_eq(rl__redis_caller_wait(c, &q.call, parse_echo, &e), RL_CALL_REPLY);
        ck_assert_str_eq(e.got, q.tag);
    }
    rl__redis_caller_stop(c);
}
END_TEST

/* Asynchronous requests: each callback once, with its own tag. */
typedef struct actx {
    uint64_t tag;
    _Atomic uint32_t *calls; /* per request */
    _Atomic uint64_t *replies, *wrong, *other;
} actx_t;

static void on_async(void *ud, int status, const redisReply *reply)
{
    actx_t *a = ud;
    atomic_fetch_add(&a->calls[a->tag], 1);
    if (status == RL_CALL_REPLY) {
        atomic_fetch_add(a->replies, 1);
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)a->tag);
        if (reply->type != REDIS_REPLY_STRING || strcmp(reply->str, want) != 0)
            atomic_fetch_add(a->wrong, 1);
    } else {
        atomic_fetch_add(a->other, 1);
    }
}

#define NASYNC 3000

static int all_answered(_Atomic uint32_t *calls, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (atomic_load(&calls[i]) == 0)
            return 0;
    return 1;
}

START_TEST(async_each_once)
{
    rl_redis_caller_t *c = start_caller(4, 4096);
    wait_connected(c);
    static _Atomic uint32_t calls[NASYNC];
    _Atomic uint64_t replies = 0, wrong = 0, other = 0;
    for (unsigned i = 0; i < NASYNC; i++)
        atomic_init(&calls[i], 0);
    for (unsigned i = 0; i < NASYNC; i++) {
        req_t r;
        req_make(&r, i % 97, i, 30000);
        actx_t a = {i, calls, &replies, &wrong, &other};
        ck_assert_int_eq(rl__redis_caller_send(c, &r.call, on_async, &a, sizeof a), 0);
    }
    WAIT_FOR(all_answered(calls, NASYNC));
    rl__redis_caller_stop(c);
    for (unsigned i = 0; i < NASYNC; i++)
        ck_assert_uint_eq(atomic_load(&calls[i]), 1);
    ck_assert_uint_eq(atomic_load(&replies), NASYNC);
    ck_assert_uint_eq(atomic_load(&wrong), 0);
}
END_TEST

/* Stopping with requests in flight (Redis frozen): every callback runs
 * once, before stop returns, and none after. */
START_TEST(stop_answers_in_flight)
{
    rl_redis_caller_t *c = start_caller(2, 512);
    wait_connected(c);
    static _Atomic uint32_t calls[400];
    _Atomic uint64_t replies = 0, wrong = 0, other = 0;
    for (unsigned i = 0; i < 400; i++)
        atomic_init(&calls[i], 0);
    kill(rl_test_redis()->pid, SIGSTOP);
    for (unsigned i = 0; i < 400; i++) {
        req_t r;
        req_make(&r, i % 7, i, 30000);
        actx_t a = {i, calls, &replies, &wrong, &other};
        ck_assert_int_eq(rl__redis_caller_send(c, &r.call, on_async, &a, sizeof a), 0);
    }
    rl__redis_caller_stop(c);
    uint32_t seen[400];
    for (unsigned i = 0; i < 400; i++) {
        seen[i] = atomic_load(&calls[i]);
        ck_assert_uint_eq(seen[i], 1);
    }
    kill(rl_test_redis()->pid, SIGCONT);
    ck_assert_uint_eq(atomic_load(&wrong), 0);
    ck_assert_uint_eq(atomic_load(&other), 400);
}
END_TEST

/* A request that cannot fit is refused at once; a full slot array answers
 * RL_CALL_FULL, never blocks. */
START_TEST(bounds)
{
    rl_redis_caller_t *c = start_caller(1, 2);
    req_t r;
    req_make(&r, 1, 1, 1000);
    r.call.script = 3;
    ck_assert_int_eq(rl__redis_caller_send(c, &r.call, on_async, NULL, 0), -1);
    r.call.script = 0;
    r.call.nkeys = 0;
    ck_assert_int_eq(rl__redis_caller_send(c, &r.call, on_async, NULL, 0), -1);
    rl__redis_caller_stop(c);
    /* Two slots, Redis frozen: the third request finds none. */
    c = start_caller(1, 2);
    wait_connected(c);
    rl_redis_caller_counters_t k;
    /* The warm-up's slot is free once the loop is done with it too. */
    WAIT_FOR((rl__redis_caller_counters(c, &k), k.in_use == 0));
    kill(rl_test_redis()->pid, SIGSTOP);
    static _Atomic uint32_t calls[3];
    _Atomic uint64_t replies = 0, wrong = 0, other = 0;
    for (unsigned i = 0; i < 3; i++)
        atomic_init(&calls[i], 0);
    int rc[3];
    for (unsigned i = 0; i < 3; i++) {
        req_make(&r, 1, i, 30000);
        actx_t a = {i, calls, &replies, &wrong, &other};
        rc[i] = rl__redis_caller_send(c, &r.call, on_async, &a, sizeof a);
    }
    ck_assert_int_eq(rc[0], 0);
    ck_assert_int_eq(rc[1], 0);
    ck_assert_int_eq(rc[2], RL_CALL_FULL);
    rl__redis_caller_stop(c);
    kill(rl_test_redis()->pid, SIGCONT);
    ck_assert_uint_eq(atomic_load(&calls[2]), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("caller");
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, blocking_tags_match);
    tcase_add_test(tc, frozen_late_replies_never_misdelivered);
    tcase_add_test(tc, async_each_once);
    tcase_add_test(tc, noscript_answered_by_eval);
    tcase_add_test(tc, stop_answers_in_flight);
    tcase_add_test(tc, bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
