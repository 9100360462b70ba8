/* SPDX-License-Identifier: MIT */
/*
 * rl_check_batch: each request is decided as its own rl_check would be.
 * Checked against a twin instance driven by sequential rl_check calls on the
 * same clock (every field of every decision), against a token model while
 * the clock is frozen, under racing threads, and with bad inputs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"

#define NKEYS 40
#define MAXB 100 /* crosses the library's chunks of 32 */

static rl_test_clock_t clk = {.precise_ns = UINT64_C(5000000000), .coarse_tick_ns = 4000000};

static const char *const specs[2] = {"name=a rate=10/s burst=5 mode=local",
                                     "name=b rate=3/s burst=2 mode=local"};
static const uint64_t bursts[2] = {5, 2};

typedef struct draw {
    rl_request_t req[MAXB];
    char keys[MAXB][16];
    int lim[MAXB]; /* which limit (0, 1), or -1: a request made invalid */
    size_t n;
} draw_t;

/* A random batch over NKEYS keys of two limits; with `bad`, some requests
 * carry an error of their own. */
static void draw_batch(draw_t *b, uint64_t *seed, const int ids[2], int bad)
{
    b->n = 1 + next_u64(seed) % MAXB;
    for (size_t i = 0; i < b->n; i++) {
        rl_request_t *r = &b->req[i];
        rl_request_init(r);
        int l = (int)(next_u64(seed) % 2);
        snprintf(b->keys[i], sizeof b->keys[i], "k%u", (unsigned)(next_u64(seed) % NKEYS));
        r->limit = ids[l];
        r->key = b->keys[i];
        r->key_len = strlen(b->keys[i]);
        r->cost = (uint32_t)(next_u64(seed) % (bursts[l] + 1)); /* 0 peeks */
        b->lim[i] = l;
        if (bad && next_u64(seed) % 8 == 0) {
            b->lim[i] = -1;
            switch (next_u64(seed) % 4) {
            case 0: r->limit = 999; break;
            case 1: r->key_len = 0; break;
            case 2: r->cost = (uint32_t)bursts[l] + 1; break;
            default: r->key = NULL; break;
            }
        }
    }
}

static int check_one(rl_t *rl, const rl_request_t *r, rl_decision_t *d)
{
    return rl_check(rl, r->limit, r->key, r->key_len, r->cost, d);
}

static void same_decision(const rl_decision_t *a, const rl_decision_t *b, size_t i)
{
    REQUIRE(a->allowed == b->allowed && a->remaining == b->remaining &&
                a->reset_ms == b->reset_ms && a->retry_after_ms == b->retry_after_ms &&
                a->flags == b->flags && a->limit == b->limit && a->burst == b->burst &&
                a->window_ms == b->window_ms,
            "request %zu: batch {%d rem %llu reset %llu retry %llu flags %u} vs rl_check "
            "{%d rem %llu reset %llu retry %llu flags %u}",
            i, a->allowed, (unsigned long long)a->remaining, (unsigned long long)a->reset_ms,
            (unsigned long long)a->retry_after_ms, a->flags, b->allowed,
            (unsigned long long)b->remaining, (unsigned long long)b->reset_ms,
            (unsigned long long)b->retry_after_ms, b->flags);
}

/* Batches against sequential rl_check on a twin instance, the clock moving
 * between batches: every result and every decision field agree. */
START_TEST(batch_equals_sequential_checks)
{
    rl_t *rb = rl_test_hold(rl_test_open(&clk, 1024), rl_test_close_fn);
    rl_t *rs = rl_test_hold(rl_test_open(&clk, 1024), rl_test_close_fn);
    int ib[2], is[2];
    for (int l = 0; l < 2; l++) {
        ib[l] = rl_test_add(rb, specs[l]);
        is[l] = rl_test_add(rs, specs[l]);
        ck_assert_int_eq(ib[l], is[l]);
    }
    uint64_t seed = 42;
    static draw_t b;
    rl_decision_t out[MAXB], one;
    int res[MAXB];
    uint64_t allowed_total = 0;
    for (int round = 0; round < 400; round++) {
        draw_batch(&b, &seed, ib, 1);
        for (size_t i = 0; i < b.n; i++)
            rl_decision_init(&out[i]);
        int got = rl_check_batch(rb, b.req, b.n, sizeof b.req[0], out, res);
        int allowed = 0;
        for (size_t i = 0; i < b.n; i++) {
            rl_decision_init(&one);
            int want = check_one(rs, &b.req[i], &one);
            REQUIRE(res[i] == want, "round %d request %zu: %d, rl_check %d", round, i, res[i],
                    want);
            REQUIRE((want < 0) == (b.lim[i] < 0), "round %d request %zu: error %d", round, i,
                    want);
            same_decision(&out[i], &one, i);
            allowed += want == RL_ALLOW;
        }
        REQUIRE(got == allowed, "round %d: batch says %d allowed, rl_check %d", round, got,
                allowed);
        allowed_total += (uint64_t)allowed;
        rl_test_clock_advance(&clk, next_u64(&seed) % 400000000);
    }
    ck_assert_uint_gt(allowed_total, 0);
    rl_stats_t sb, ss;
    rl_stats_init(&sb);
    rl_stats_init(&ss);
    ck_assert_int_eq(rl_stats(rb, &sb), 0);
    ck_assert_int_eq(rl_stats(rs, &ss), 0);
    ck_assert_uint_eq(sb.admitted, ss.admitted);
    ck_assert_uint_eq(sb.denied, ss.denied);
    rl_test_release_all();
}
END_TEST

/* With the clock frozen, a key admits exactly its burst: a token model. */
START_TEST(batch_matches_token_model_when_frozen)
{
    rl_test_clock_t frozen = {.precise_ns = UINT64_C(7000000000)};
    rl_t *rl = rl_test_hold(rl_test_open(&frozen, 1024), rl_test_close_fn);
    int ids[2] = {rl_test_add(rl, specs[0]), rl_test_add(rl, specs[1])};
    uint64_t left[2][NKEYS];
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < NKEYS; k++)
            left[l][k] = bursts[l];
    uint64_t seed = 7;
    static draw_t b;
    int res[MAXB];
    for (int round = 0; round < 200; round++) {
        draw_batch(&b, &seed, ids, 0);
        ck_assert_int_ge(rl_check_batch(rl, b.req, b.n, sizeof b.req[0], NULL, res), 0);
        for (size_t i = 0; i < b.n; i++) {
            int l = b.lim[i];
            unsigned k = (unsigned)atoi(b.keys[i] + 1);
            uint32_t c = b.req[i].cost;
            int want = c == 0 ? (left[l][k] >= 1 ? RL_ALLOW : RL_DENY)
                              : (left[l][k] >= c ? RL_ALLOW : RL_DENY);
            if (c > 0 && want == RL_ALLOW)
                left[l][k] -= c;
            REQUIRE(res[i] == want, "round %d request %zu (limit %d key %u cost %u): %d, model %d",
                    round, i, l, k, c, res[i], want);
        }
    }
    rl_test_release_all();
}
END_TEST

typedef struct racer {
    rl_t *rl;
    int id;
    uint64_t admitted;
} racer_t;

static void *race_run(void *arg)
{
    racer_t *r = arg;
    rl_request_t req[16];
    for (int i = 0; i < 16; i++) {
        rl_request_init(&req[i]);
        req[i].limit = r->id;
        req[i].key = i % 2 ? "hot" : "warm";
        req[i].key_len = i % 2 ? 3 : 4;
    }
    for (int round = 0; round < 500; round++) {
        int n = rl_check_batch(r->rl, req, 16, sizeof req[0], NULL, NULL);
        if (n < 0)
            return NULL;
        r->admitted += (uint64_t)n;
    }
    return NULL;
}

/* Threads batching the same two keys, clock frozen: exactly both bursts. */
START_TEST(racing_batches_admit_exactly_the_bursts)
{
    rl_test_clock_t frozen = {.precise_ns = UINT64_C(9000000000)};
    for (int trial = 0; trial < 10; trial++) {
        rl_t *rl = rl_test_open(&frozen, 1024);
        int id = rl_test_add(rl, "name=r rate=1000/s burst=1000 mode=local");
        racer_t r[3];
        pthread_t th[3];
        for (int i = 0; i < 3; i++) {
            r[i] = (racer_t){rl, id, 0};
            ck_assert_int_eq(pthread_create(&th[i], NULL, race_run, &r[i]), 0);
        }
        uint64_t sum = 0;
        for (int i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
            sum += r[i].admitted;
        }
        ck_assert_uint_eq(sum, 2000);
        rl_close(rl);
    }
}
END_TEST

START_TEST(bad_inputs)
{
    rl_t *rl = rl_test_hold(rl_test_open(&clk, 64), rl_test_close_fn);
    int id = rl_test_add(rl, specs[0]);
    rl_request_t req[3];
    rl_decision_t out[3];
    int res[3];
    for (int i = 0; i < 3; i++) {
        rl_request_init(&req[i]);
        req[i].limit = id;
        req[i].key = "x";
        req[i].key_len = 1;
        rl_decision_init(&out[i]);
    }
    ck_assert_int_eq(rl_check_batch(NULL, req, 3, sizeof req[0], out, res), RL_EINVAL);
    ck_assert_int_eq(rl_check_batch(rl, NULL, 3, sizeof req[0], out, res), RL_EINVAL);
    ck_assert_int_eq(rl_check_batch(rl, NULL, 0, sizeof req[0], NULL, NULL), 0);
    ck_assert_int_eq(rl_check_batch(rl, req, RL_BATCH_MAX + 1, sizeof req[0], NULL, NULL),
                     RL_ERANGE);
    ck_assert_int_eq(rl_check_batch(rl, req, 3, sizeof req[0] - 1, out, res), RL_ESIZE);
    out[0].size = 8;
    ck_assert_int_eq(rl_check_batch(rl, req, 3, sizeof req[0], out, res), RL_ESIZE);
    rl_decision_init(&out[0]);
    /* nothing was charged by the calls rejected above */
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "x", 1, 0, &d), RL_ALLOW);
    ck_assert_uint_eq(d.remaining, 5);
    /* errors of single requests: the others are still checked */
    req[0].key_len = 0;
    req[1].cost = 6; /* burst 5 */
    ck_assert_int_eq(rl_check_batch(rl, req, 3, sizeof req[0], out, res), 1);
    ck_assert_int_eq(res[0], RL_EKEYLEN);
    ck_assert_int_eq(res[1], RL_ECOST);
    ck_assert_int_eq(res[2], RL_ALLOW);
    ck_assert_int_eq(out[0].allowed, RL_DENY);
    ck_assert_int_eq(out[1].allowed, RL_DENY);
    ck_assert_int_eq(out[2].allowed, RL_ALLOW);
    ck_assert_uint_eq(out[2].remaining, 4);
    req[0].key_len = 1;
    req[1].cost = 1;
    req[1].size = sizeof req[1] + 8; /* not the stride */
    req[2].limit = id + 1;
    ck_assert_int_eq(rl_check_batch(rl, req, 3, sizeof req[0], out, res), 1);
    ck_assert_int_eq(res[0], RL_ALLOW);
    ck_assert_int_eq(res[1], RL_ESIZE);
    ck_assert_int_eq(res[2], RL_ENOTFOUND);
    rl_test_release_all();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_test(tc, batch_equals_sequential_checks);
    tcase_add_test(tc, batch_matches_token_model_when_frozen);
    tcase_add_test(tc, racing_batches_admit_exactly_the_bursts);
    tcase_add_test(tc, bad_inputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
