/* SPDX-License-Identifier: MIT */
/*
 * Coarse-first (local/clock.h): a precise-sourced limit's check reads the coarse
 * source first and settles a deny there only when it is certain. Checked
 * through a clock hook that models a coarse source lagging the precise one
 * (turned on with the internal seam rl__clock_coarse_first), against a GCRA
 * model run at the precise time: every decision and its figures, from one
 * thread, and the admitted counts with threads racing at frozen instants.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "instance.h"

#define TICK_NS UINT64_C(4000000)
#define NS_FP(ns) ((uint64_t)(ns) << RL_FP_SHIFT)
#define MS_FP (UINT64_C(1000000) << RL_FP_SHIFT)

/* Two sources: coarse is the precise time rounded down to the tick, minus
 * `lag_ticks` whole ticks, so it lags by [lag_ticks, lag_ticks + 1) ticks. */
typedef struct two_clock {
    _Atomic uint64_t precise_ns;
    uint64_t lag_ticks;
    _Atomic uint64_t reads[2]; /* hook calls per source */
} two_clock_t;

static uint64_t two_clock_fn(void *ud, int32_t source)
{
    two_clock_t *c = ud;
    /* relaxed: time and call counts are data; the test thread reads the
     * counts after joining or while alone. */
    atomic_fetch_add_explicit(&c->reads[source == RL_CLOCK_COARSE], 1, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&c->precise_ns, memory_order_relaxed);
    if (source == RL_CLOCK_COARSE)
        t = t - t % TICK_NS - c->lag_ticks * TICK_NS;
    return t;
}

static rl_t *open_two(two_clock_t *c, uint64_t lag_ticks, int coarse_first)
{
    atomic_store(&c->precise_ns, UINT64_C(7000000000) + 1234567);
    c->lag_ticks = lag_ticks;
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = two_clock_fn;
    cfg.clock_ud = c;
    cfg.clock_coarse_tick_ns = TICK_NS;
    rl_t *rl = NULL;
    int rc = rl_open(&rl, &cfg);
    ck_assert_msg(rc == 0, "rl_open: %s", rl_strerror(rc));
    if (coarse_first)
        rl__clock_coarse_first(&rl->clock, 1);
    return rl;
}

/* The model: one GCRA bucket at the precise time, in the library's fixed
 * point (instance time is 1 s at rl_open). */
typedef struct model {
    uint64_t t_fp, tau_fp, tat;
} model_t;

static uint64_t model_now(const two_clock_t *c, uint64_t p0)
{
    return NS_FP(atomic_load(&c->precise_ns) - p0 + UINT64_C(1000000000));
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int model_charge(model_t *m, uint64_t now, uint32_t cost)
{
    uint64_t next = max64(m->tat, now) + cost * m->t_fp;
    if (next - now > m->tau_fp)
        return 0;
    m->tat = next;
    return 1;
}

static uint64_t model_retry_ms(const model_t *m, uint64_t now, uint32_t cost)
{
    uint64_t when = max64(m->tat, now) + cost * m->t_fp - m->tau_fp;
    return when > now ? (when - now + MS_FP - 1) / MS_FP : 0;
}

static uint64_t model_remaining(const model_t *m, uint64_t now)
{
    uint64_t used = m->tat > now ? m->tat - now : 0;
    return used >= m->tau_fp ? 0 : (m->tau_fp - used) / m->t_fp;
}

/* The precise instant (ns, raw) at which `cost` is admitted next. */
static uint64_t model_admit_ns(const model_t *m, uint64_t now_fp, uint64_t p_ns, uint32_t cost)
{
    uint64_t when = max64(m->tat, now_fp) + cost * m->t_fp - m->tau_fp;
    return when > now_fp ? p_ns + (when - now_fp + RL_FP_PER_NS - 1) / RL_FP_PER_NS : p_ns;
}

static uint64_t rnd(uint64_t *s, uint64_t n)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return n ? *s % n : 0;
}

/* Limits the library gives the precise clock (rate x tick > burst - 1);
 * coarse-first for a charge of two margins (16 ms) or more only. */
typedef struct lim {
    const char *spec;
    uint64_t t_ns, burst;
    int coarse_first;
} lim_t;

static const lim_t LIMS[] = {
    {"name=one rate=1/s burst=1 mode=local", UINT64_C(1000000000), 1, 1},
    {"name=fifty rate=50/s burst=1 mode=local", UINT64_C(20000000), 1, 1},
    {"name=three rate=1000/s burst=3 mode=local", UINT64_C(1000000), 3, 0},
};
#define NLIMS (sizeof LIMS / sizeof LIMS[0])

static int add_precise(rl_t *rl, const lim_t *l, model_t *m)
{
    int id = rl_test_add(rl, l->spec);
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, id);
    rl_limit_params_t p;
    rl__params_read(ls, &p);
    ck_assert_int_eq(p.clock_source, RL_CLOCK_PRECISE);
    m->t_fp = NS_FP(l->t_ns);
    m->tau_fp = l->burst * m->t_fp;
    m->tat = 0;
    return id;
}

/* The next precise instant: a small step, or one that lands close to the
 * moment the model admits again (where coarse time and precise time can
 * disagree), on either side of it. */
static void step(two_clock_t *c, uint64_t p0, const model_t *m, uint32_t cost, uint64_t *seed)
{
    uint64_t p = atomic_load(&c->precise_ns);
    uint64_t next = p + rnd(seed, 3 * TICK_NS);
    if (rnd(seed, 2)) {
        uint64_t admit = model_admit_ns(m, model_now(c, p0), p, cost);
        uint64_t near = admit + rnd(seed, 3 * TICK_NS);
        near = near > TICK_NS ? near - TICK_NS : near;
        next = near > p ? near : p;
    }
    atomic_store(&c->precise_ns, next);
}

START_TEST(hooked_clock_reads_as_before)
{
    two_clock_t c = {0};
    rl_t *rl = open_two(&c, 0, 0);
    ck_assert_uint_eq(rl__clock_coarse_margin(&rl->clock), 0);
    model_t m;
    int id = add_precise(rl, &LIMS[0], &m);
    uint64_t coarse_reads = atomic_load(&c.reads[RL_CLOCK_COARSE]);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), i == 0 ? RL_ALLOW : RL_DENY);
    ck_assert_uint_eq(atomic_load(&c.reads[RL_CLOCK_COARSE]), coarse_reads);
    rl_close(rl);
}
END_TEST

/* One thread, every decision and figure against the model at the precise
 * time, the coarse source lagging by up to one tick, then up to two. */
START_TEST(decisions_match_precise_model)
{
    two_clock_t c = {0};
    rl_t *rl = open_two(&c, (uint64_t)_i, 1);
    uint64_t p0 = atomic_load(&c.precise_ns);
    ck_assert_uint_eq(rl__clock_coarse_margin(&rl->clock), NS_FP(2 * TICK_NS));
    model_t m[NLIMS];
    int id[NLIMS];
    for (size_t l = 0; l < NLIMS; l++)
        id[l] = add_precise(rl, &LIMS[l], &m[l]);
    uint64_t seed = 0x9e3779b97f4a7c15u + (uint64_t)_i;
    uint64_t coarse_denies = 0, denies = 0, close_calls = 0;
    for (int i = 0; i < 20000; i++) {
        size_t l = rnd(&seed, NLIMS);
        uint32_t cost = 1 + (uint32_t)rnd(&seed, LIMS[l].burst);
        step(&c, p0, &m[l], cost, &seed);
        uint64_t now = model_now(&c, p0);
        uint64_t p = atomic_load(&c.precise_ns);
        uint64_t cnow = NS_FP(p - p % TICK_NS + 1000000000u - c.lag_ticks * TICK_NS - p0);
        model_t before = m[l];
        int want = model_charge(&m[l], now, cost);
        uint64_t pr = atomic_load(&c.reads[RL_CLOCK_PRECISE]);
        uint64_t cr = atomic_load(&c.reads[RL_CLOCK_COARSE]);
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_check(rl, id[l], "key", 3, cost, &d);
        ck_assert_msg(rc == (want ? RL_ALLOW : RL_DENY),
                      "check %d (limit %zu, cost %u): %d, the model at the precise time %d "
                      "(coarse %llu ns behind)",
                      i, l, cost, rc, want, (unsigned long long)((now - cnow) >> RL_FP_SHIFT));
        int precise_read = atomic_load(&c.reads[RL_CLOCK_PRECISE]) != pr;
        /* The coarse clock is read first by exactly the limits whose
         * charge spans two margins (coarse_first); the others read only
         * the precise clock. */
        ck_assert_uint_eq(atomic_load(&c.reads[RL_CLOCK_COARSE]) != cr, LIMS[l].coarse_first);
        if (want) {
            ck_assert(precise_read); /* an allow charges at the precise time */
            ck_assert_uint_eq(d.remaining, model_remaining(&m[l], now));
            ck_assert_uint_eq(d.retry_after_ms, 0);
            continue;
        }
        denies++;
        coarse_denies += !precise_read;
        /* Figures at a time between the coarse and the precise one: never a
         * Retry-After that is early, never late by more than the lag. */
        ck_assert_uint_ge(d.retry_after_ms, model_retry_ms(&before, now, cost));
        ck_assert_uint_le(d.retry_after_ms, model_retry_ms(&before, cnow, cost));
        ck_assert_uint_le(d.remaining, model_remaining(&before, now));
        ck_assert_uint_ge(d.remaining, model_remaining(&before, cnow));
        close_calls += precise_read;
    }
    /* Both paths were taken: most denies settled coarse, some near the
     * admit instant needed the precise time. */
    ck_assert_uint_gt(coarse_denies, denies / 4);
    ck_assert_uint_gt(close_calls, 0);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------- threads at frozen instants */

#define RACERS 3

typedef struct race {
    rl_t *rl;
    int id[NLIMS];
    pthread_barrier_t go, done;
    _Atomic int stop;
    _Atomic size_t lim;
    _Atomic uint32_t cost;
    uint64_t admitted[RACERS];
} race_t;

typedef struct racer {
    race_t *r;
    int k;
} racer_t;

static void *race_run(void *arg)
{
    racer_t *me = arg;
    race_t *r = me->r;
    for (;;) {
        pthread_barrier_wait(&r->go);
        if (atomic_load(&r->stop))
            return NULL;
        size_t l = atomic_load(&r->lim);
        uint32_t cost = atomic_load(&r->cost);
        /* The clock is frozen: once one check is denied, every later one
         * is too, so each racer stops at its first deny. */
        while (rl_check(r->rl, r->id[l], "hot", 3, cost, NULL) == RL_ALLOW)
            r->admitted[me->k] += cost;
        pthread_barrier_wait(&r->done);
    }
}

START_TEST(racers_admit_what_the_model_admits)
{
    two_clock_t c = {0};
    race_t r;
    memset(&r, 0, sizeof r);
    r.rl = open_two(&c, 1, 1);
    uint64_t p0 = atomic_load(&c.precise_ns);
    model_t m[NLIMS];
    for (size_t l = 0; l < NLIMS; l++)
        r.id[l] = add_precise(r.rl, &LIMS[l], &m[l]);
    pthread_barrier_init(&r.go, NULL, RACERS + 1);
    pthread_barrier_init(&r.done, NULL, RACERS + 1);
    pthread_t th[RACERS];
    racer_t rc[RACERS];
    for (int k = 0; k < RACERS; k++) {
        rc[k] = (racer_t){&r, k};
        ck_assert_int_eq(pthread_create(&th[k], NULL, race_run, &rc[k]), 0);
    }
    int rounds = getenv("RL_VALGRIND") != NULL ? 150 : 1500;
    uint64_t seed = 0x2545f4914f6cdd1du;
    uint64_t total[NLIMS] = {0};
    for (int i = 0; i < rounds; i++) {
        size_t l = rnd(&seed, NLIMS);
        uint32_t cost = 1 + (uint32_t)rnd(&seed, LIMS[l].burst);
        step(&c, p0, &m[l], cost, &seed);
        uint64_t now = model_now(&c, p0);
        uint64_t want = 0;
        while (model_charge(&m[l], now, cost))
            want += cost;
        uint64_t before = 0;
        for (int k = 0; k < RACERS; k++)
            before += r.admitted[k];
        atomic_store(&r.lim, l);
        atomic_store(&r.cost, cost);
        pthread_barrier_wait(&r.go);
        pthread_barrier_wait(&r.done);
        uint64_t got = 0;
        for (int k = 0; k < RACERS; k++)
            got += r.admitted[k];
        got -= before;
        ck_assert_msg(got == want, "round %d (limit %zu, cost %u): racers admitted %llu, the "
                      "model at the precise time %llu", i, l, cost,
                      (unsigned long long)got, (unsigned long long)want);
        total[l] += got;
        /* The exactness bound: burst + rate x elapsed. */
        uint64_t elapsed = atomic_load(&c.precise_ns) - p0;
        ck_assert_uint_le(total[l], LIMS[l].burst + elapsed / LIMS[l].t_ns);
    }
    atomic_store(&r.stop, 1);
    pthread_barrier_wait(&r.go);
    for (int k = 0; k < RACERS; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&r.go);
    pthread_barrier_destroy(&r.done);
    rl_close(r.rl);
}
END_TEST

/* A backward step of the precise source turns coarse-first off: its offset
 * may now put it more than the margin ahead of the coarse one. */
START_TEST(precise_backward_step_turns_it_off)
{
    two_clock_t c = {0};
    rl_t *rl = open_two(&c, 0, 1);
    model_t m;
    int id = add_precise(rl, &LIMS[0], &m);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    ck_assert_uint_ne(rl__clock_coarse_margin(&rl->clock), 0);
    atomic_fetch_sub(&c.precise_ns, 50 * TICK_NS);
    /* A certain deny reads only the coarse source; a peek reads the
     * precise one, whose guard meets the step. */
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    ck_assert_uint_ne(rl__clock_coarse_margin(&rl->clock), 0);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 0, NULL), RL_DENY);
    ck_assert_uint_eq(rl__clock_coarse_margin(&rl->clock), 0);
    uint64_t coarse_reads = atomic_load(&c.reads[RL_CLOCK_COARSE]);
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_DENY);
    ck_assert_uint_eq(atomic_load(&c.reads[RL_CLOCK_COARSE]), coarse_reads);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coarsefirst");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, hooked_clock_reads_as_before);
    tcase_add_loop_test(tc, decisions_match_precise_model, 0, 2);
    tcase_add_test(tc, precise_backward_step_turns_it_off);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("race");
    tcase_add_test(tr, racers_admit_what_the_model_admits);
    suite_add_tcase(s, tr);
    return s;
}

int main(void) { return rl_test_run(suite()); }
