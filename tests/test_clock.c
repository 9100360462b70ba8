/* SPDX-License-Identifier: MIT */
/*
 * Instance time (local/clock.c) through the clock hook: origin, forward steps,
 * backward jumps absorbed (time neither runs back nor freezes), saturation,
 * the coarse/precise choice, and backward jumps raced by readers.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include "testutil.h"
#include "local/clock.h"

static _Atomic uint64_t raw_ns;

static uint64_t hook(void *ud, int32_t source)
{
    (void)ud, (void)source;
    return atomic_load(&raw_ns);
}

static uint64_t ms_fp(uint64_t ms) { return rl__clock_to_fp(ms * 1000000u); }

START_TEST(origin_and_forward)
{
    rl_clock_t c;
    atomic_store(&raw_ns, UINT64_C(777) * 1000000000u);
    rl__clock_init(&c, hook, NULL, 0);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1000)); /* one second */
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_COARSE), ms_fp(1000));
    atomic_fetch_add(&raw_ns, 5 * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1005));
    atomic_fetch_add(&raw_ns, UINT64_C(3600) * 1000000000u); /* a forward jump passes */
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1005 + 3600000));
}
END_TEST

START_TEST(backward_jump_is_absorbed)
{
    rl_clock_t c;
    atomic_store(&raw_ns, UINT64_C(50) * 1000000000u);
    rl__clock_init(&c, hook, NULL, 0);
    atomic_fetch_add(&raw_ns, 20 * 1000000u);
    uint64_t before = rl__clock_now_fp(&c, RL_CLOCK_PRECISE);
    ck_assert_uint_eq(before, ms_fp(1020));
    atomic_fetch_sub(&raw_ns, UINT64_C(10) * 1000000000u); /* 10 s back */
    uint64_t at = rl__clock_now_fp(&c, RL_CLOCK_PRECISE);
    ck_assert_uint_eq(at, before); /* not back */
    atomic_fetch_add(&raw_ns, 3 * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), before + ms_fp(3) - ms_fp(0));
    /* each source absorbs its own jumps: coarse, last read at the origin,
     * resumes there */
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_COARSE), ms_fp(1000));
    /* a reading before the opening one is a backward step too */
    rl_clock_t d;
    atomic_store(&raw_ns, UINT64_C(5) * 1000000000u);
    rl__clock_init(&d, hook, NULL, 0);
    atomic_store(&raw_ns, 0);
    ck_assert_uint_eq(rl__clock_now_fp(&d, RL_CLOCK_PRECISE), ms_fp(1000));
}
END_TEST

/*
 * A reader stalled between its clock read and its jump handling while the
 * clock jumps back again and another reader absorbs that second jump: its
 * reading predates the second jump, so the second offset is not its to use.
 * It was used (now = rel + max(offset, want)): the stalled reading came out
 * a whole jump ahead, was published as `last`, and every reader moved a
 * second forward for good. The interleaving, step by step:
 */
START_TEST(stalled_reader_does_not_add_a_later_jump)
{
    rl_clock_t c;
    atomic_store(&raw_ns, UINT64_C(100) * 1000000000u);
    rl__clock_init(&c, hook, NULL, 0);
    atomic_fetch_add(&raw_ns, 10 * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1010));
    /* Y loads the guard's words, the clock jumps back 1 s, Y reads it. */
    int s = RL_CLOCK_PRECISE == RL_CLOCK_COARSE;
    uint64_t y_off = atomic_load(&c.guard[s].offset_ns);
    uint64_t y_last = atomic_load(&c.guard[s].last_ns);
    atomic_fetch_sub(&raw_ns, UINT64_C(1000000000));
    uint64_t y_raw = atomic_load(&raw_ns);
    /* Y stalls. Others absorb this jump, time moves 5 ms, the clock jumps
     * back again and that jump is absorbed too. */
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1010));
    atomic_fetch_add(&raw_ns, 5 * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1015));
    atomic_fetch_sub(&raw_ns, UINT64_C(1000000000));
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1015));
    /* Y resumes: its reading is of 1010 ms, not a jump later. */
    uint64_t y_now = rl__clock_guard(&c, s, y_raw, y_off, y_last);
    ck_assert_uint_le(y_now, UINT64_C(1015) * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), ms_fp(1015));
}
END_TEST

START_TEST(saturates)
{
    ck_assert_uint_eq(rl__clock_to_fp(UINT64_MAX), RL_NOW_FP_MAX);
    ck_assert_uint_eq(rl__clock_to_fp(RL_NOW_FP_MAX >> RL_FP_SHIFT), RL_NOW_FP_MAX);
    rl_clock_t c;
    atomic_store(&raw_ns, 0);
    rl__clock_init(&c, hook, NULL, 0);
    atomic_store(&raw_ns, UINT64_C(1) << 60); /* 36 years on */
    ck_assert_uint_eq(rl__clock_now_fp(&c, RL_CLOCK_PRECISE), RL_NOW_FP_MAX);
}
END_TEST

START_TEST(pick_by_slack)
{
    rl_clock_t c;
    rl__clock_init(&c, hook, NULL, 4000000); /* a 4 ms coarse tick */
    ck_assert_int_eq(rl__clock_pick(&c, ms_fp(4) - 1), RL_CLOCK_PRECISE);
    ck_assert_int_eq(rl__clock_pick(&c, ms_fp(4)), RL_CLOCK_COARSE);
    rl__clock_init(&c, hook, NULL, 0); /* a hook without a tick: 4 ms assumed */
    ck_assert_uint_eq(c.coarse_tick_ns, 4000000);
    c.coarse_tick_ns = 0; /* unknown tick: never coarse */
    ck_assert_int_eq(rl__clock_pick(&c, UINT64_MAX), RL_CLOCK_PRECISE);
}
END_TEST

/*
 * Readers race a clock that jumps back 1 s every few steps while it moves
 * forward 1 ms a step. The model: instance time never falls below the
 * highest reading any thread has seen by more than one grain; a jump is
 * absorbed once however many readers see it (never two offsets for one
 * jump: the end is at most the forward steps and a grain a jump); and time
 * is not frozen after it (forward steps the readers did not see before a
 * jump are lost, by design: nobody can tell how long they were).
 */
enum { READERS = 3, STEPS = 4000 };
static rl_clock_t race_clock;
static _Atomic uint64_t high_fp;
static _Atomic int race_done;
static _Atomic int race_bad;

static void *reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&race_done)) {
        uint64_t hi = atomic_load(&high_fp);
        uint64_t now = rl__clock_now_fp(&race_clock, RL_CLOCK_PRECISE);
        if (now + rl__clock_to_fp(RL_CLOCK_LAST_GRAIN_NS) < hi)
            atomic_store(&race_bad, 1);
        uint64_t cur = atomic_load(&high_fp);
        while (now > cur && !atomic_compare_exchange_weak(&high_fp, &cur, now)) {
        }
    }
    return NULL;
}

START_TEST(backward_jumps_raced)
{
    atomic_store(&raw_ns, UINT64_C(100) * 1000000000u);
    rl__clock_init(&race_clock, hook, NULL, 0);
    atomic_store(&high_fp, 0);
    atomic_store(&race_done, 0);
    atomic_store(&race_bad, 0);
    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader, NULL), 0);
    uint64_t forward = 0;
    for (int step = 0; step < STEPS; step++) {
        if (step % 64 == 63)
            atomic_fetch_sub(&raw_ns, UINT64_C(1000000000));
        else {
            atomic_fetch_add(&raw_ns, 1000000u);
            forward++;
        }
        if (step % 16 == 0)
            sched_yield();
    }
    atomic_store(&race_done, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&race_bad), 0);
    uint64_t end = rl__clock_now_fp(&race_clock, RL_CLOCK_PRECISE);
    uint64_t jumps = (uint64_t)(STEPS) / 64;
    ck_assert_uint_le(end, ms_fp(1000 + forward) + ms_fp(jumps) + ms_fp(1));
    ck_assert_uint_ge(end + rl__clock_to_fp(RL_CLOCK_LAST_GRAIN_NS), atomic_load(&high_fp));
    atomic_fetch_add(&raw_ns, 7 * 1000000u);
    ck_assert_uint_eq(rl__clock_now_fp(&race_clock, RL_CLOCK_PRECISE), end + ms_fp(7));
}
END_TEST
/* The hook counts the readings of each source made on the thread that
 * opened the instance (the sync thread, which rl_open starts, reads it
 * too: that is documented apart). */
typedef struct counted {
    pthread_t opener;
    _Atomic int calls[2];
} counted_t;

static uint64_t counting_hook(void *ud, int32_t source)
{
    counted_t *c = ud;
    if (pthread_equal(pthread_self(), c->opener))
        atomic_fetch_add(&c->calls[source == RL_CLOCK_COARSE], 1);
    return atomic_load(&raw_ns);
}

static void open_counted(const char *redis_url)
{
    static const char secret[] = "clock-suite-secret-0123456789abcd";
    counted_t c = {.opener = pthread_self()};
    atomic_store(&raw_ns, UINT64_C(5000000000));
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = counting_hook;
    cfg.clock_ud = &c;
    cfg.redis_url = redis_url;
    cfg.key_secret = secret;
    cfg.key_secret_len = sizeof secret - 1;
    cfg.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &cfg), 0);
    int precise = atomic_load(&c.calls[RL_CLOCK_PRECISE]);
    int coarse = atomic_load(&c.calls[RL_CLOCK_COARSE]);
    rl_close(rl);
    ck_assert_msg(precise == 1 && coarse == 1,
                  "rl_open (%s) called the hook %d times for the precise source and %d for the "
                  "coarse one: the header says once each",
                  redis_url != NULL ? redis_url : "local-only", precise, coarse);
}

/* ratelimit.h: "The hook is called once per source at rl_open". */
START_TEST(hook_called_once_per_source_at_open)
{
    open_counted(NULL);
    open_counted("redis://127.0.0.1:1"); /* nothing listens: the sync thread starts anyway */
}
END_TEST

typedef struct told {
    int errors;
    char text[512];
} told_t;

static void keep_error(void *ud, int32_t level, const char *msg)
{
    told_t *t = ud;
    if (level == RL_LOG_ERROR) {
        t->errors++;
        snprintf(t->text, sizeof t->text, "%s", msg);
    }
}

static int check_one(rl_t *rl, int id) { return rl_check(rl, id, "k", 1, 1, NULL); }

/* Instance time saturates about 9.1 years after rl_open (2^58 ns): from
 * then on a drained bucket never refills. A check that would deny says so
 * (RL_ERANGE, logged once) instead of denying for ever; up to the horizon,
 * denies are denies. */
START_TEST(horizon_is_an_error_not_a_deny)
{
    told_t t = {0};
    atomic_store(&raw_ns, UINT64_C(5000000000));
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = hook;
    cfg.log = keep_error;
    cfg.log_ud = &t;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &cfg), 0);
    int id = rl_test_add(rl, "name=h rate=1/s burst=1");
    ck_assert_int_eq(check_one(rl, id), RL_ALLOW);
    ck_assert_int_eq(check_one(rl, id), RL_DENY);
    /* A second before the horizon: refilled, then a plain deny. */
    uint64_t horizon_ns = RL_NOW_FP_MAX >> RL_FP_SHIFT;
    atomic_fetch_add(&raw_ns, horizon_ns - RL_CLOCK_ORIGIN_NS - UINT64_C(1000000000));
    ck_assert_int_eq(check_one(rl, id), RL_ALLOW);
    ck_assert_int_eq(check_one(rl, id), RL_DENY);
    ck_assert_int_eq(t.errors, 0);
    /* At the horizon, and a day past it. */
    atomic_fetch_add(&raw_ns, UINT64_C(1000000000));
    ck_assert_int_eq(check_one(rl, id), RL_ALLOW);
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, &d), RL_ERANGE);
    ck_assert_int_eq(d.allowed, RL_DENY);
    atomic_fetch_add(&raw_ns, UINT64_C(86400000000000));
    ck_assert_int_eq(check_one(rl, id), RL_ERANGE);
    ck_assert_int_eq(t.errors, 1);
    ck_assert_msg(strstr(t.text, "horizon") != NULL && strstr(t.text, "9.1 years") != NULL,
                  "%s", t.text);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("hook");
    tcase_add_test(tc, origin_and_forward);
    tcase_add_test(tc, backward_jump_is_absorbed);
    tcase_add_test(tc, stalled_reader_does_not_add_a_later_jump);
    tcase_add_test(tc, saturates);
    tcase_add_test(tc, pick_by_slack);
    tcase_add_test(tc, backward_jumps_raced);
    tcase_add_test(tc, hook_called_once_per_source_at_open);
    tcase_add_test(tc, horizon_is_an_error_not_a_deny);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
