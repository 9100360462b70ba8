/* SPDX-License-Identifier: MIT */
/*
 * Reservations on a synced instance (a real redis-server): a global
 * limit's reservations decide on the node's bucket as rl_check does, their
 * settles move that bucket, and what the sync round reports to Redis is
 * tokens: each admitted reservation at its settled amount. A settle's debt
 * survives the sync reply (the bucket re-based on the share it brings
 * keeps what it owes beyond the burst). Exact and tiered limits are
 * refused (RL_EMODE).
 */
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "sync/sync.h"

static rl_test_clock_t clk = {UINT64_C(5000000000000), 0};

static rl_t *open_synced(void)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "resv";
    c.sync_interval_ms = 100;
    c.key_secret = "reserve-secret-0123456789";
    c.key_secret_len = 25;
    c.key_prefix = "r";
    c.clock = rl_test_clock_fn;
    c.clock_ud = &clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

/* The admitted ('a') count Redis holds for the one key of `limit`. */
static long long redis_admitted(const char *limit)
{
    redisContext *r = rl_test_redis_client(0);
    redisReply *keys = redisCommand(r, "KEYS {r:v1:%s:*", limit);
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(keys->elements, 1);
    redisReply *h = redisCommand(r, "HGET %s a", keys->element[0]->str);
    long long a = h->type == REDIS_REPLY_STRING ? atoll(h->str) : -1;
    freeReplyObject(h);
    freeReplyObject(keys);
    return a;
}

/* One manual round that reaches Redis (the first may find the script
 * still loading: bounded retries). */
static void sync_round(rl_t *rl)
{
    int ok = -1;
    for (int tries = 0; tries < 300 && ok != 0; tries++) {
        rl_test_clock_advance(&clk, 100000000);
        ok = rl__sync_step(rl->sync, atomic_load(&clk.precise_ns) / 1000000);
        if (ok != 0) {
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_int_eq(ok, 0);
}

static uint64_t remaining(rl_t *rl, int id, const char *key)
{
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, key, strlen(key), 0, &d), RL_ALLOW - (d.remaining == 0));
    return d.remaining;
}

START_TEST(global_limit_reserves_on_the_node_bucket)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *rl = open_synced();
    /* One node expected: before its first sync the key's share is the
     * whole limit, 10 tokens that do not refill within the test. */
    int id = rl_test_add(rl, "name=g rate=1/h burst=10 mode=global");
    rl_reservation_t a, b;
    rl_reservation_init(&a);
    rl_reservation_init(&b);
    ck_assert_int_eq(rl_reserve(rl, id, "t", 1, 6, 60000, &a, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_reserve(rl, id, "t", 1, 5, 60000, &b, NULL), RL_DENY);
    ck_assert_int_eq(rl_settle(rl, &a, 2), 0);
    ck_assert_uint_eq(remaining(rl, id, "t"), 8);
    ck_assert_int_eq(rl_reserve(rl, id, "t", 1, 5, 60000, &b, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_settle(rl, &b, 9), 0); /* 11 owed of 10 */
    ck_assert_int_eq(rl_check(rl, id, "t", 1, 1, NULL), RL_DENY);
    sync_round(rl);
    /* the settled amounts, 2 + 9 tokens (not two decisions) */
    ck_assert_int_eq(redis_admitted("g"), 11);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_reserve(rl, id, "t", 1, 1, 60000, &a, &d), RL_DENY);
    /* 11 owed of a burst of 10, at about the whole rate (one node): two
     * tokens, about two hours, must refill before one is admitted. A reply
     * that capped the debt at the burst would leave one, an hour. */
    ck_assert_uint_gt(d.retry_after_ms, 6000000);
    ck_assert_uint_lt(d.retry_after_ms, 8000000);
}
END_TEST

/* Exact and tiered limits reserve in Redis (tests/test_reserve_exact.c);
 * a wait, whose turn is a local bucket's, is refused for them. */
START_TEST(exact_and_tiered_waits_are_refused)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = open_synced();
    int ex = rl_test_add(rl, "name=x rate=10/s mode=exact");
    int ti = rl_test_add(rl, "name=y rate=10/s mode=tiered");
    rl_reservation_t r;
    rl_reservation_init(&r);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_reserve_wait(rl, ex, "k", 1, 1, 100, 100, &r, &d), RL_EMODE);
    ck_assert_int_eq(d.allowed, RL_DENY);
    ck_assert_int_eq(rl_reserve_wait(rl, ti, "k", 1, 1, 100, 100, &r, &d), RL_EMODE);
    ck_assert_int_eq(rl_wait(rl, ex, "k", 1, 1, 100, &d), RL_EMODE);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve_global");
    TCase *tc = tcase_create("global");
    tcase_set_timeout(tc, 120);
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_test(tc, global_limit_reserves_on_the_node_bucket);
    tcase_add_test(tc, exact_and_tiered_waits_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
