/* SPDX-License-Identifier: MIT */
/*
 * The sync reply's rescale of a synced key's bucket (local/table.h,
 * rl__bucket_rescale; local/bucket.h, rl__gcra_rescale), on bucket words
 * as the table keeps them. A key that only plain checks charged is
 * rescaled bit for bit as before debts were kept (the old formula, copied
 * here, against random shares and debts): the accuracy simulator's figures
 * and the model tests rest on it. A key a settle or a wait took past its
 * share's burst keeps that part, in tokens, whatever the new share.
 */
#include <stdatomic.h>
#include "testutil.h"
#include "local/bucket.h"
#include "local/table.h"

/* The rescale before debts were kept: the whole of tat - now rescaled by
 * to_t / from_t, capped at to's tau. */
static uint64_t old_rescale(uint64_t tat, const rl_gcra_t *from, const rl_gcra_t *to,
                            uint64_t now)
{
    if (tat <= now)
        return tat;
    unsigned __int128 debt = (unsigned __int128)(tat - now) * to->t_fp / from->t_fp;
    return now + (debt < to->tau_fp ? (uint64_t)debt : to->tau_fp);
}

/* A test's own PRNG: the Park-Miller generator on the Mersenne prime
 * 2^61 - 1, in 128-bit products, so no step wraps. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    const uint64_t m = (UINT64_C(1) << 61) - 1;
    rng_state = (uint64_t)((unsigned __int128)rng_state * 48271u % m);
    return rng_state;
}

static uint64_t rnd_in(uint64_t lo, uint64_t hi) { return lo + rnd() % (hi - lo + 1); }

/* A share's parameters as a reply makes them: T of a node's fraction of a
 * rate, a burst of tokens. */
static rl_gcra_t rnd_gcra(void)
{
    rl_gcra_t g;
    g.t_fp = rnd_in(RL_T_FP_MIN, (UINT64_C(1000) * RL_FP_PER_MS)); /* 100M/s .. 1/s */
    g.burst = rnd_in(1, 100000);
    g.tau_fp = g.burst * g.t_fp;
    return g;
}

/* A check in a loop of many cases: Check's ck_assert_* marks its location
 * on every call (a message to the runner), which would cost more than the
 * cases; this aborts the test only when one fails, saying which. */
#define EXPECT(cond, i)                                                                    \
    do {                                                                                   \
        if (!(cond))                                                                       \
            ck_abort_msg("case %d: %s", (i), #cond);                                       \
    } while (0)

static uint64_t word_rescale(uint64_t tat, _Atomic uint64_t *over, const rl_gcra_t *from,
                             const rl_gcra_t *to, uint64_t now, uint64_t epoch_bit)
{
    _Atomic uint64_t w;
    atomic_init(&w, tat | epoch_bit);
    rl__bucket_rescale(&w, over, from, to, now);
    uint64_t x = atomic_load(&w);
    EXPECT((x & RL_TAT_EPOCH) == epoch_bit, -1); /* the word keeps its epoch bit */
    return x & RL_TAT_MASK;
}

START_TEST(plain_keys_rescale_as_before)
{
    rng_state = 26;
    const uint64_t now = UINT64_C(1) << 50;
    for (int i = 0; i < 200000; i++) {
        rl_gcra_t from = rnd_gcra(), to = rnd_gcra();
        /* Anything a plain key may owe, past its tau too (a check that
         * read the share before this reply, a degraded ramp's burst): an
         * unmarked key is rescaled as before whatever it owes. */
        uint64_t d = rnd() % 4 == 0 ? 0 : rnd_in(1, 2 * from.tau_fp);
        uint64_t tat = now + d - (rnd() % 8 == 0 ? d + rnd_in(0, 1000) : 0);
        uint64_t bit = (uint64_t)(i & 1) << 63;
        uint64_t want = old_rescale(tat, &from, &to, now);
        EXPECT(word_rescale(tat, NULL, &from, &to, now, bit) == want, i);
        _Atomic uint64_t over;
        atomic_init(&over, 0);
        EXPECT(word_rescale(tat, &over, &from, &to, now, bit) == want, i);
        EXPECT(atomic_load(&over) == 0, i);
        /* A mark that has run out (the debt was paid): as before too. */
        atomic_init(&over, now - rnd_in(0, 1000));
        EXPECT(word_rescale(tat, &over, &from, &to, now, bit) == want, i);
        /* A marked key that owes no more than its burst: as before. */
        if (tat <= now + from.tau_fp) {
            atomic_init(&over, now + rnd_in(1, UINT64_C(1) << 40));
            EXPECT(word_rescale(tat, &over, &from, &to, now, bit) == want, i);
        }
    }
}
END_TEST

START_TEST(debt_beyond_the_burst_is_kept_in_tokens)
{
    rng_state = 2026;
    const uint64_t now = UINT64_C(1) << 50;
    for (int i = 0; i < 200000; i++) {
        rl_gcra_t from = rnd_gcra(), to = rnd_gcra();
        /* A bucket that owes `debt` whole tokens, and a part of one,
         * beyond its burst (a settle, or a wait's turn). */
        uint64_t debt = rnd_in(1, 1000000);
        uint64_t beyond = debt * from.t_fp + rnd_in(0, from.t_fp - 1);
        uint64_t tat = now + from.tau_fp + beyond;
        _Atomic uint64_t over;
        atomic_init(&over, now + beyond);
        uint64_t got = word_rescale(tat, &over, &from, &to, now, 0);
        /* The burst part as before (rescaled, capped); the debt on top,
         * in tokens at the new interval (rounded up), never capped. */
        uint64_t burst_part = old_rescale(now + from.tau_fp, &from, &to, now) - now;
        EXPECT(got - now >= burst_part, i);
        uint64_t kept = got - now - burst_part;
        EXPECT(kept >= debt * to.t_fp, i);
        EXPECT(kept <= (debt + 1) * to.t_fp, i);
        EXPECT(kept == (uint64_t)(((unsigned __int128)beyond * to.t_fp + from.t_fp - 1) /
                                  from.t_fp),
               i);
        /* The mark covers the new bucket until it is back within its burst. */
        if (got - now > to.tau_fp)
            EXPECT(atomic_load(&over) >= got - to.tau_fp, i);
    }
}
END_TEST

START_TEST(a_share_move_neither_pays_nor_doubles_a_debt)
{
    /* A node's share of 1000/s halves, then is restored: 3 nodes, 10 ms
     * a token at a third of the rate, burst 10 (tau 100 ms). */
    rl_gcra_t third = {.t_fp = 3 * RL_FP_PER_MS, .tau_fp = 30 * RL_FP_PER_MS, .burst = 10};
    third.tau_fp = third.burst * third.t_fp;
    rl_gcra_t sixth = {.t_fp = 6 * RL_FP_PER_MS, .burst = 5};
    sixth.tau_fp = sixth.burst * sixth.t_fp;
    const uint64_t now = UINT64_C(1) << 50;
    /* Its burst used and 40 tokens of debt (a settle above its estimate). */
    uint64_t tat = now + third.tau_fp + 40 * third.t_fp;
    _Atomic uint64_t over;
    atomic_init(&over, now + 40 * third.t_fp);
    _Atomic uint64_t w;
    atomic_init(&w, tat);
    rl__bucket_rescale(&w, &over, &third, &sixth, now);
    /* Half the share: the burst part is the new burst, the 40 tokens stay. */
    ck_assert_uint_eq(atomic_load(&w) - now, sixth.tau_fp + 40 * sixth.t_fp);
    rl__bucket_rescale(&w, &over, &sixth, &third, now);
    ck_assert_uint_eq(atomic_load(&w) - now, sixth.tau_fp * third.t_fp / sixth.t_fp +
                                                 40 * third.t_fp);
    /* The old formula paid the debt off at the first move: 5 tokens owed
     * instead of 45. */
    ck_assert_uint_eq(old_rescale(tat, &third, &sixth, now) - now, sixth.tau_fp);
    /* Paid back by refill exactly: full once the 40 tokens and the burst
     * part have refilled at the restored share, not before. */
    ck_assert_uint_eq(atomic_load(&w), now + 135 * RL_FP_PER_MS);
}
END_TEST

START_TEST(a_dying_word_is_left_alone)
{
    rl_gcra_t g = {.t_fp = RL_FP_PER_MS, .tau_fp = 10 * RL_FP_PER_MS, .burst = 10};
    _Atomic uint64_t w, over;
    atomic_init(&w, RL_TAT_DEAD);
    atomic_init(&over, UINT64_MAX);
    rl__bucket_rescale(&w, &over, &g, &g, 5);
    ck_assert_uint_eq(atomic_load(&w), RL_TAT_DEAD);
    ck_assert_uint_eq(atomic_load(&over), UINT64_MAX);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rescale");
    TCase *tc = tcase_create("rescale");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, plain_keys_rescale_as_before);
    tcase_add_test(tc, debt_beyond_the_burst_is_kept_in_tokens);
    tcase_add_test(tc, a_share_move_neither_pays_nor_doubles_a_debt);
    tcase_add_test(tc, a_dying_word_is_left_alone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
