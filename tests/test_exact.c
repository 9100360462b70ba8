/* SPDX-License-Identifier: MIT */
/* Exact mode against a real Redis: two instances' threads on one key admit
 * exactly what Redis counted, within burst + rate x elapsed; a frozen Redis
 * answers every caller by its deadline with on_failure; rl_check_async
 * answers each check once, and rl_close answers the ones in flight. */
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
#include "instance.h"
#include "redis/keys.h"
#include "exact/exact.h"
#include "lua/scripts.h"
#include "redis/uvloop.h"

static const char secret[] = "exact-test-secret-0123456789abcdef";

static rl_t *open_node(const char *node, uint32_t timeout_ms)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.exact_timeout_ms = timeout_ms;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

static int add_limit(rl_t *rl, const char *spec)
{
    rl_limit_t lim;
    char err[128];
    ck_assert_msg(rl_limit_parse(&lim, spec, err, sizeof err) == 0, "%s", err);
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    return id;
}

/* The exact bucket's field of a key in Redis (0 when absent). */
static long long redis_field(rl_t *rl, const char *limit, const char *key, const char *field)
{
    char name[200];
    rl__redis_key_name(&rl->kh, rl->key_prefix, limit, rl__keyhash(&rl->kh, key, strlen(key)),
                       name, sizeof name);
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *rep = redisCommand(r, "HGET %s %s", name, field);
    ck_assert(rep != NULL);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;
    freeReplyObject(rep);
    redisFree(r);
    return v;
}

/* Redis TIME in microseconds. */
static long long redis_time_us(void)
{
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *rep = redisCommand(r, "TIME");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    long long us = atoll(rep->element[0]->str) * 1000000LL + atoll(rep->element[1]->str);
    freeReplyObject(rep);
    redisFree(r);
    return us;
}

/* Wait until an exact check is answered by Redis: the exact thread is up. */
static void wait_exact_ready(rl_t *rl, int id)
{
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, id, "warmup", 6, 0, &d);
        if (d.flags & RL_FLAG_EXACT)
            return;
        ck_assert_msg(rl_test_now_ns() < until, "exact path never answered");
        rl_test_poll_pause(i);
    }
}

typedef struct driver {
    rl_t *rl;
    int id;
    const char *key;
    uint64_t until_ns, gap_ns;
    uint64_t exact_allows, exact_denies, degraded, other_allows;
    uint64_t worst_over_ns; /* past exact_timeout_ms */
    uint64_t deadline_ns;   /* exact_timeout_ms in ns */
} driver_t;

static _Atomic int stop_all;

static void *drive(void *arg)
{
    driver_t *d = arg;
    uint64_t next = rl_test_now_ns();
    while (rl_test_now_ns() < d->until_ns && !atomic_load(&stop_all)) {
        rl_decision_t dec;
        rl_decision_init(&dec);
        uint64_t t0 = rl_test_now_ns();
        int rc = rl_check(d->rl, d->id, d->key, strlen(d->key), 1, &dec);
        uint64_t took = rl_test_now_ns() - t0;
        ck_assert_int_ge(rc, 0);
        if (took > d->deadline_ns && took - d->deadline_ns > d->worst_over_ns)
            d->worst_over_ns = took - d->deadline_ns;
        if ((dec.flags & RL_FLAG_EXACT) && rc == RL_ALLOW)
            __atomic_fetch_add(&d->exact_allows, 1, __ATOMIC_RELAXED);
        else if (dec.flags & RL_FLAG_EXACT)
            d->exact_denies++;
        else if (dec.flags & RL_FLAG_DEGRADED)
            __atomic_fetch_add(&d->degraded, 1, __ATOMIC_RELAXED);
        if (rc == RL_ALLOW && !(dec.flags & RL_FLAG_EXACT))
            d->other_allows++;
        next += d->gap_ns;
        uint64_t now = rl_test_now_ns();
        if (next > now)
            rl_test_sleep_ms((unsigned)((next - now) / 1000000u));
        else
            next = now; /* behind (a loaded box): no catch-up burst */
    }
    return NULL;
}

/* 8 threads on each of 2 instances, one key at 10x its limit for 3 s: what
 * the callers saw admitted is what Redis counted, at most burst + rate x
 * elapsed, and at least the tokens Redis minted over the run minus one. */
START_TEST(exact_fleet_one_key)
{
    rl_t *node[2] = {open_node("a", 50), open_node("b", 50)};
    int id[2];
    for (int i = 0; i < 2; i++) {
        id[i] = add_limit(node[i], "name=pin rate=100/s burst=300 mode=exact on_failure=closed");
        wait_exact_ready(node[i], id[i]);
    }
    long long t0 = redis_time_us();
    uint64_t until = rl_test_now_ns() + 3000000000u;
    driver_t d[16];
    pthread_t th[16];
    for (int i = 0; i < 16; i++) {
        /* 16 threads x 62.5/s = 1000/s: 10x the rate. */
        d[i] = (driver_t){node[i / 8], id[i / 8], "user:42", until, 16000000u, 0, 0, 0, 0, 0,
                          50000000u};
        pthread_create(&th[i], NULL, drive, &d[i]);
    }
    uint64_t allows = 0, degraded = 0, other = 0, offered = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        offered += d[i].exact_allows + d[i].exact_denies + d[i].degraded;
        allows += d[i].exact_allows;
        degraded += d[i].degraded;
        other += d[i].other_allows;
    }
    long long t1 = redis_time_us();
    long long counted = redis_field(node[0], "pin", "user:42", "xc");
    long long first = redis_field(node[0], "pin", "user:42", "xf");
    long long last = redis_field(node[0], "pin", "user:42", "xl");
    ck_assert_uint_eq(other, 0); /* on_failure closed: no allow but Redis's */
    /* Every allow a caller saw is a charge in Redis; a charge no caller saw
     * is a check that timed out (closed: denied) and still ran. On a box
     * fast enough for the 50 ms deadline the two counts are equal. */
    rl_exact_counters_t k0, k1;
    rl__exact_counters(node[0]->exact, &k0);
    rl__exact_counters(node[1]->exact, &k1);
    uint64_t missed = k0.timeouts + k0.lost + k1.timeouts + k1.lost;
    ck_assert_int_le((long long)allows, counted);
    ck_assert_int_le(counted - (long long)allows, (long long)missed);
    if (missed == 0)
        ck_assert_int_eq((long long)allows, counted);
    /* burst + rate x elapsed, elapsed measured by Redis around the run. */
    ck_assert_int_le(counted, 300 + (t1 - t0) * 100 / 1000000);
    ck_assert_int_ge(first, t0);
    /* Every token Redis minted over the run was taken, but one: the load
     * (10x the rate) never let the bucket fill. Valgrind's serialised
     * threads offer less than the rate: there the bound measures the load
     * generator, not the library, and is skipped. */
    if (getenv("RL_VALGRIND") == NULL)
        ck_assert_int_ge(counted, 300 + (last - first) * 100 / 1000000 - 1);
    fprintf(stderr, "exact_fleet: admitted %llu of %llu offered over %.2f s (%llu degraded)\n",
            (unsigned long long)allows, (unsigned long long)offered,
            (double)(t1 - t0) / 1e6, (unsigned long long)degraded);
    rl_close(node[0]);
    rl_close(node[1]);
}
END_TEST

/* Redis frozen (SIGSTOP): every exact check returns by its deadline plus a
 * bound that holds on a loaded box, with on_failure's verdict (closed:
 * deny, degraded). After the thaw, every allow a caller saw was charged in
 * Redis, and Redis charged at most the checks that timed out on top. */
START_TEST(exact_deadline_frozen)
{
    rl_t *rl = open_node("f", 20);
    int id = add_limit(rl, "name=frz rate=1000/s burst=1000 mode=exact on_failure=closed");
    wait_exact_ready(rl, id);
    driver_t d[4];
    pthread_t th[4];
    /* Before, during and after the freeze: 4 threads flat out. */
    atomic_store(&stop_all, 0);
    for (int i = 0; i < 4; i++) {
        d[i] = (driver_t){rl, id, "k", UINT64_MAX, 0, 0, 0, 0, 0, 0, 20000000u};
        pthread_create(&th[i], NULL, drive, &d[i]);
    }
    WAIT_FOR(__atomic_load_n(&d[0].exact_allows, __ATOMIC_RELAXED) > 50);
    kill(rl_test_redis()->pid, SIGSTOP);
    /* Frozen until every thread has been answered by on_failure 10 times. */
    for (int i = 0; i < 4; i++)
        WAIT_FOR(__atomic_load_n(&d[i].degraded, __ATOMIC_RELAXED) >= 10);
    kill(rl_test_redis()->pid, SIGCONT);
    uint64_t seen = __atomic_load_n(&d[0].exact_allows, __ATOMIC_RELAXED);
    WAIT_FOR(__atomic_load_n(&d[0].exact_allows, __ATOMIC_RELAXED) > seen + 50);
    atomic_store(&stop_all, 1);
    uint64_t allows = 0, degraded = 0, other = 0, worst = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        allows += d[i].exact_allows;
        degraded += d[i].degraded;
        other += d[i].other_allows;
        if (d[i].worst_over_ns > worst)
            worst = d[i].worst_over_ns;
    }
    ck_assert_uint_eq(other, 0);
    ck_assert_uint_gt(degraded, 0); /* the freeze was seen */
    ck_assert_uint_lt(worst, 1000000000u); /* a bound, not a figure: bench/ */
    /* Late replies land; then Redis's count is final. */
    long long counted = 0;
    WAIT_FOR((counted = redis_field(rl, "frz", "k", "xc")) >= (long long)allows);
    rl_exact_counters_t k;
    rl__exact_counters(rl->exact, &k);
    ck_assert_int_le(counted - (long long)allows, (long long)(k.timeouts + k.lost));
    fprintf(stderr, "exact_deadline: %llu allows, %llu degraded, worst %.1f ms past the "
            "deadline, %llu late replies\n", (unsigned long long)allows,
            (unsigned long long)degraded, (double)worst / 1e6, (unsigned long long)k.late);
    rl_close(rl);
}
END_TEST

/* ----------------------------------------------------------- async */

#define NASYNC 10000u
#define WINDOW 800u

typedef struct async_run {
    rl_t *rl;
    int id;
    uv_loop_t loop;
    uv_async_t wake;
    uv_mutex_t mu;
    unsigned issued;
    _Atomic uint32_t calls[NASYNC]; /* callbacks per check */
    _Atomic unsigned answered, exact_allows, inline_allows, in_flight;
    _Atomic unsigned degraded; /* answered by on_failure (a missed deadline) */
    _Atomic unsigned bad;
} async_run_t;

static void on_check(void *ud, int rc, const rl_decision_t *d);

typedef struct tag {
    async_run_t *run;
    unsigned i;
} tag_t;

static tag_t tags[NASYNC];

/* Issue checks until WINDOW are in flight or all are issued. */
static void issue(async_run_t *a)
{
    while (a->issued < NASYNC && atomic_load(&a->in_flight) < WINDOW) {
        unsigned i = a->issued++;
        tags[i] = (tag_t){a, i};
        atomic_fetch_add(&a->in_flight, 1);
        int rc = rl_check_async(a->rl, a->id, "async-key", 9, 1, on_check, &tags[i]);
        if (rc != RL_PENDING) {
            atomic_fetch_sub(&a->in_flight, 1);
            atomic_fetch_add(&a->calls[i], 1); /* answered inline */
            atomic_fetch_add(&a->answered, 1);
            if (rc == RL_ALLOW)
                atomic_fetch_add(&a->inline_allows, 1);
        }
    }
    if (atomic_load(&a->answered) == NASYNC)
        uv_stop(&a->loop); /* the wake handle stays open until rl_close */
}

/* On the exact thread: record, and hand back to the loop (uv_async_send). */
static void on_check(void *ud, int rc, const rl_decision_t *d)
{
    tag_t *t = ud;
    async_run_t *a = t->run;
    if (atomic_fetch_add(&a->calls[t->i], 1) != 0 || d == NULL)
        atomic_fetch_add(&a->bad, 1);
    if (rc == RL_ALLOW && d != NULL && (d->flags & RL_FLAG_EXACT))
        atomic_fetch_add(&a->exact_allows, 1);
    else if (rc == RL_ALLOW)
        atomic_fetch_add(&a->inline_allows, 1);
    if (d != NULL && (d->flags & RL_FLAG_DEGRADED))
        atomic_fetch_add(&a->degraded, 1);
    atomic_fetch_sub(&a->in_flight, 1);
    atomic_fetch_add(&a->answered, 1);
    uv_async_send(&a->wake);
}

static void on_wake(uv_async_t *h) { issue(h->data); }

START_TEST(exact_async_from_uv_loop)
{
    static async_run_t a;
    memset(&a, 0, sizeof a);
    a.rl = open_node("u", 2000);
    a.id = add_limit(a.rl, "name=asy rate=1000/s burst=4000 mode=exact on_failure=closed");
    wait_exact_ready(a.rl, a.id);
    ck_assert_int_eq(uv_loop_init(&a.loop), 0);
    uv_async_init(&a.loop, &a.wake, on_wake);
    a.wake.data = &a;
    issue(&a);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(atomic_load(&a.answered), NASYNC);
    long long counted = redis_field(a.rl, "asy", "async-key", "xc");
    rl_close(a.rl); /* no callback (nor its uv_async_send) after this */
    uv_close((uv_handle_t *)&a.wake, NULL);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(rl__uv_loop_close(&a.loop), 0);
    for (unsigned i = 0; i < NASYNC; i++)
        ck_assert_uint_eq(atomic_load(&a.calls[i]), 1);
    ck_assert_uint_eq(atomic_load(&a.bad), 0);
    ck_assert_uint_eq(atomic_load(&a.inline_allows), 0);
    /* Every allow was charged; a check that missed its deadline (answered
     * by on_failure, here a deny) may have been charged too, as the header
     * says: a loaded valgrind run of the fresh-clone CI had 231 such. */
    long long allows = (long long)atomic_load(&a.exact_allows);
    ck_assert_int_ge(counted, allows);
    ck_assert_int_le(counted, allows + (long long)atomic_load(&a.degraded));
    ck_assert_uint_ge(atomic_load(&a.exact_allows), 4000);
}
END_TEST

/* rl_close with exact checks in flight (Redis frozen): each callback runs
 * once, before rl_close returns, with on_failure's verdict, degraded. */
static _Atomic unsigned close_calls, close_denied_degraded;

static void on_close_check(void *ud, int rc, const rl_decision_t *d)
{
    (void)ud;
    atomic_fetch_add(&close_calls, 1);
    if (rc == RL_DENY && d != NULL && (d->flags & RL_FLAG_DEGRADED))
        atomic_fetch_add(&close_denied_degraded, 1);
}

/* On the exact thread: hiredis 0.14 writes with write(2), so a write to a
 * connection the server closed raises SIGPIPE on this thread. Every signal
 * is blocked here: raise one and see the process live (SIGPIPE's default
 * action, death, is in force), the signal left pending on this thread. */
static _Atomic int pipe_blocked = -1;

static void on_raise_sigpipe(void *ud, int rc, const rl_decision_t *d)
{
    (void)ud, (void)rc, (void)d;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    atomic_store(&pipe_blocked, sigismember(&cur, SIGPIPE) == 1);
    pthread_kill(pthread_self(), SIGPIPE);
}

START_TEST(exact_thread_blocks_sigpipe)
{
    signal(SIGPIPE, SIG_DFL);
    rl_t *rl = open_node("p", 2000);
    int id = add_limit(rl, "name=pipe rate=10/s burst=10 mode=exact");
    atomic_store(&pipe_blocked, -1);
    ck_assert_int_eq(rl_check_async(rl, id, "k", 1, 1, on_raise_sigpipe, NULL), RL_PENDING);
    WAIT_FOR(atomic_load(&pipe_blocked) != -1);
    ck_assert_int_eq(atomic_load(&pipe_blocked), 1);
    rl_close(rl); /* joins the thread: the pending SIGPIPE died with it */
}
END_TEST

static void on_count(void *ud, int rc, const rl_decision_t *d)
{
    (void)rc, (void)d;
    atomic_fetch_add((_Atomic unsigned *)ud, 1);
}

START_TEST(exact_close_in_flight)
{
    rl_t *rl = open_node("c", 30000);
    int id = add_limit(rl, "name=cls rate=10/s burst=10 mode=exact on_failure=closed");
    wait_exact_ready(rl, id);
    atomic_store(&close_calls, 0);
    atomic_store(&close_denied_degraded, 0);
    kill(rl_test_redis()->pid, SIGSTOP);
    unsigned pending = 0;
    for (unsigned i = 0; i < 300; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%u", i);
        int rc = rl_check_async(rl, id, key, strlen(key), 1, on_close_check, NULL);
        ck_assert_int_eq(rc, RL_PENDING);
        pending++;
    }
    rl_close(rl);
    unsigned seen = atomic_load(&close_calls);
    kill(rl_test_redis()->pid, SIGCONT);
    ck_assert_uint_eq(seen, pending);
    ck_assert_uint_eq(atomic_load(&close_denied_degraded), pending);
}
END_TEST

/* Inline answers: a local limit's check never pends; bad inputs are errors. */
START_TEST(async_inline_and_errors)
{
    rl_t *rl = open_node("i", 50);
    int loc = add_limit(rl, "name=loc rate=2/s burst=2 mode=local");
    int ex = add_limit(rl, "name=ex rate=2/s burst=2 mode=exact");
    ck_assert_int_eq(rl_check_async(rl, loc, "a", 1, 1, on_close_check, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check_async(rl, loc, "a", 1, 1, on_close_check, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check_async(rl, loc, "a", 1, 1, on_close_check, NULL), RL_DENY);
    ck_assert_int_eq(rl_check_async(NULL, loc, "a", 1, 1, on_close_check, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_check_async(rl, loc, "a", 1, 1, NULL, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_check_async(rl, loc, "a", 0, 1, on_close_check, NULL), RL_EKEYLEN);
    ck_assert_int_eq(rl_check_async(rl, 999, "a", 1, 1, on_close_check, NULL), RL_ENOTFOUND);
    ck_assert_int_eq(rl_check_async(rl, ex, "a", 1, 3, on_close_check, NULL), RL_ECOST);
    ck_assert_int_eq(rl_refund(rl, ex, "a", 1, 1), RL_ENOTSUP);
    rl_request_t req;
    rl_request_init(&req);
    req.limit = ex;
    req.key = "a";
    req.key_len = 1;
    ck_assert_int_eq(rl_check_multi(rl, &req, 1, sizeof req, NULL, NULL), RL_ENOTSUP);
    rl_close(rl);
    /* Local-only: exact is refused, never a per-process bucket. */
    rl_t *lo = NULL;
    rl_config_t lc;
    rl_config_init(&lc);
    lc.log_quiet = 1;
    ck_assert_int_eq(rl_open(&lo, &lc), 0);
    rl_limit_t exl;
    ck_assert_int_eq(rl_limit_parse(&exl, "name=ex rate=1/s burst=1 mode=exact", NULL, 0), 0);
    ck_assert_int_eq(rl_limit_add(lo, &exl), RL_ENOTSUP);
    rl_close(lo);
    /* The config's exact fields: ranges named in the message. */
    rl_config_t c;
    rl_config_init(&c);
    ck_assert_uint_eq(c.exact_timeout_ms, 100);
    ck_assert_uint_eq(c.exact_pool_size, 4);
    char msg[160];
    c.err = msg;
    c.errlen = sizeof msg;
    c.exact_timeout_ms = 0;
    rl_t *bad = NULL;
    ck_assert_int_eq(rl_open(&bad, &c), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(msg, "exact_timeout_ms"));
    c.exact_timeout_ms = 5;
    c.exact_pool_size = 65;
    ck_assert_int_eq(rl_open(&bad, &c), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(msg, "exact_pool_size"));
    /* 2^53 token-microseconds: a day-long period with a large burst. */
    rl_limit_t lim;
    char err[160];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=big rate=1000000/d burst=1000000 mode=exact",
                                    err, sizeof err),
                     RL_ERANGE);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=big rate=1000/d burst=1000 mode=exact", err,
                                    sizeof err),
                     0);
}
END_TEST

/* Peek (cost 0) reads Redis's bucket without charging. */
START_TEST(exact_peek_and_decision)
{
    rl_t *rl = open_node("p", 2000);
    int id = add_limit(rl, "name=pk rate=5/m burst=3 mode=exact");
    wait_exact_ready(rl, id);
    rl_decision_t d;
    for (int i = 0; i < 3; i++) {
        rl_decision_init(&d);
        ck_assert_int_eq(rl_check(rl, id, "u", 1, 1, &d), RL_ALLOW);
        ck_assert_uint_eq(d.flags, RL_FLAG_EXACT);
        ck_assert_uint_eq(d.remaining, (uint64_t)(2 - i));
        ck_assert_uint_eq(d.limit, 5);
        ck_assert_uint_eq(d.burst, 3);
    }
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "u", 1, 1, &d), RL_DENY);
    ck_assert_uint_eq(d.flags, RL_FLAG_EXACT);
    /* 5/m: a token every 12 s. */
    ck_assert_uint_gt(d.retry_after_ms, 10000);
    ck_assert_uint_le(d.retry_after_ms, 12000);
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "u", 1, 0, &d), RL_DENY);
    ck_assert_uint_eq(d.flags, RL_FLAG_EXACT | RL_FLAG_PEEK);
    ck_assert_int_eq(redis_field(rl, "pk", "u", "xc"), 3);
    rl_close(rl);
}
END_TEST

/* Redis killed under traffic (the host keeps SIGPIPE's default action,
 * death): checks answer by on_failure meanwhile, and by Redis again once
 * it is back; the callbacks in flight each run once. */
START_TEST(exact_redis_killed_recovers)
{
    signal(SIGPIPE, SIG_DFL);
    rl_t *rl = open_node("s", 200);
    int id = add_limit(rl, "name=sp rate=100000/s burst=100000 mode=exact on_failure=open");
    wait_exact_ready(rl, id);
    static _Atomic unsigned answered;
    atomic_store(&answered, 0);
    for (unsigned i = 0; i < 200; i++)
        if (rl_check_async(rl, id, "k", 1, 1, on_count, (void *)&answered) != RL_PENDING)
            atomic_fetch_add(&answered, 1);
    char err[256];
    ck_assert_msg(rl_test_redis_crash_restart(rl_test_redis(), err, sizeof err) == 0, "%s", err);
    /* Keep checking while the old connection is dead and the new one comes
     * (answered by on_failure, open: allowed, or already by the new
     * server: it depends on how fast the reconnect was). An answer from
     * Redis now can only be the new server's: the old one is dead. */
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, &d), RL_ALLOW);
        if (d.flags & RL_FLAG_EXACT)
            break;
        ck_assert_msg(d.flags & RL_FLAG_DEGRADED, "flags %u", d.flags);
        ck_assert_msg(rl_test_now_ns() < until, "never answered by Redis again");
        rl_test_poll_pause(i);
    }
    ck_assert_int_ge(redis_field(rl, "sp", "k", "xc"), 1); /* the new, empty server's */
    WAIT_FOR(atomic_load(&answered) == 200);
    rl_close(rl);
}
END_TEST

/* Redis runs a script's whole text on every EVALSHA: share.lua's 18
 * functions would be rebuilt on each exact check (and quota charge) that
 * has no use for them. Only report.lua, which uses them, carries them. */
START_TEST(scripts_carry_share_lua_only_if_used)
{
    static const char def[] = "local function share_";
    ck_assert_ptr_null(strstr(rl__lua_exact, def));
    ck_assert_ptr_null(strstr(rl__lua_quota, def));
    ck_assert_ptr_null(strstr(rl__lua_nodes, def));
    ck_assert_ptr_nonnull(strstr(rl__lua_report, def));
    /* exact.lua writes its numbers as %d strings, not Lua numbers. */
    ck_assert_ptr_nonnull(strstr(rl__lua_exact, "f('%d', now)"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exact");
    TCase *sc = tcase_create("scripts");
    tcase_add_test(sc, scripts_carry_share_lua_only_if_used);
    suite_add_tcase(s, sc);
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, exact_peek_and_decision);
    tcase_add_test(tc, exact_thread_blocks_sigpipe);
    tcase_add_test(tc, async_inline_and_errors);
    tcase_add_test(tc, exact_async_from_uv_loop);
    tcase_add_test(tc, exact_close_in_flight);
    tcase_add_test(tc, exact_fleet_one_key);
    tcase_add_test(tc, exact_deadline_frozen);
    suite_add_tcase(s, tc);
    /* Last, in its own case: it replaces the server the fixture started. */
    TCase *kc = tcase_create("killed");
    rl_test_redis_fixture(kc);
    tcase_set_timeout(kc, 120);
    tcase_add_test(kc, exact_redis_killed_recovers);
    suite_add_tcase(s, kc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
