/* SPDX-License-Identifier: MIT */
/*
 * The limit registry (src/limits.[ch]) on its own: ids, names and indexes
 * against a model through random adds, updates and removes; an index whose
 * generations ran out; and readers racing a writer through the seqlocked
 * double buffer, every snapshot checked against the parameters the writer
 * published (a torn read mixes two of them). The clock is frozen through the
 * clock hook: the registry reads it only to pick a limit's clock source.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "base/alloc.h"
#include "local/clock.h"
#include "local/limits.h"

#define CAP 8

static rl_test_clock_t frozen = {.precise_ns = UINT64_C(7000000000)};

/* Loop divisor: valgrind serialises the threads under its scheduler, where
 * the race is a formality (memcheck checks the memory, not the orders);
 * TSan runs ~10x slower, ASan ~3x. RL_TEST_SCALE overrides. What is
 * asserted does not depend on the loop sizes. */
static int scale(void)
{
    const char *e = getenv("RL_TEST_SCALE");
    if (e != NULL && atoi(e) > 0)
        return atoi(e);
    const char *pre = getenv("LD_PRELOAD"); /* valgrind preloads vgpreload_*.so */
    if (getenv("RL_VALGRIND") != NULL || (pre != NULL && strstr(pre, "vgpreload") != NULL))
        return 200;
#if defined(__SANITIZE_THREAD__)
    return 10;
#elif defined(__SANITIZE_ADDRESS__)
    return 3;
#else
    return 1;
#endif
}

typedef struct fixture {
    rl_allocator_t alloc;
    rl_clock_t clock;
    rl_limits_t ls;
} fixture_t;

static void fixture_open(fixture_t *f, uint32_t cap)
{
    memset(f, 0, sizeof *f);
    rl__alloc_defaults(&f->alloc);
    rl__clock_init(&f->clock, rl_test_clock_fn, &frozen, 0);
    ck_assert_int_eq(rl__limits_init(&f->ls, &f->alloc, cap, 4, 1, 0, 42), 0);
}

static void fixture_close(fixture_t *f) { rl__limits_destroy(&f->ls, &f->alloc); }

/* A global limit named `name` admitting `rate` per second, burst rate / 10. */
static rl_limit_t def(const char *name, uint64_t rate)
{
    rl_limit_t lim;
    rl_limit_init(&lim);
    snprintf(lim.name, sizeof lim.name, "%s", name);
    lim.rate.count = rate;
    lim.rate.period_ms = 1000;
    lim.burst = rate / 10 + 1;
    return lim;
}

static void no_convert(void *ctx, int id, rl_limit_slot_t *s, const rl_limit_params_t *from,
                       const rl_limit_params_t *to)
{
    (void)id;
    (void)s;
    (void)from;
    (void)to;
    atomic_fetch_add_explicit((_Atomic int *)ctx, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------ model */

typedef struct model {
    int id[CAP * 2];        /* per name: the live id, or 0 */
    uint64_t rate[CAP * 2]; /* its rate */
    int dead[1024];         /* ids removed so far (never valid again) */
    int ndead;
    int live;
} model_t;

static void name_of(int n, char *buf, size_t len) { snprintf(buf, len, "lim-%02d", n); }

/* The model against the registry; the removed ids checked are the last
 * `dead` of them (all at the end: checking every one after every step grows
 * quadratically, which valgrind makes minutes). */
static void check_model(fixture_t *f, const model_t *m, int dead)
{
    char name[16];
    ck_assert_uint_eq(atomic_load(&f->ls.count), (unsigned)m->live);
    for (int n = 0; n < CAP * 2; n++) {
        name_of(n, name, sizeof name);
        int found = rl__limits_find(&f->ls, name);
        if (m->id[n] == 0) {
            ck_assert_int_eq(found, RL_ENOTFOUND);
            continue;
        }
        ck_assert_int_eq(found, m->id[n]);
        rl_limit_slot_t *s = rl__limit_get(&f->ls, m->id[n]);
        ck_assert_ptr_nonnull(s);
        ck_assert_str_eq(s->name, name);
        rl_limit_t out;
        rl_limit_init(&out);
        ck_assert_int_eq(rl__limits_def(&f->ls, m->id[n], &out), 0);
        ck_assert_uint_eq(out.rate.count, m->rate[n]);
        rl_limit_params_t p;
        rl__params_read(s, &p);
        ck_assert_uint_eq(p.rate_count, m->rate[n]);
    }
    for (int i = m->ndead > dead ? m->ndead - dead : 0; i < m->ndead; i++) {
        ck_assert_ptr_null(rl__limit_get(&f->ls, m->dead[i]));
        rl_limit_t out;
        rl_limit_init(&out);
        ck_assert_int_eq(rl__limits_def(&f->ls, m->dead[i], &out), RL_ENOTFOUND);
        ck_assert_int_eq(rl__limits_remove(&f->ls, m->dead[i]), RL_ENOTFOUND);
    }
}

/* Random adds, updates and removes of 2 x CAP names into CAP indexes: every
 * id, name, definition and count as the model says; a full registry says
 * RL_ELIMITS, a taken name RL_EEXIST, a removed id RL_ENOTFOUND forever
 * (its index is reused under a new generation), an update under another
 * name RL_ENAME. */
START_TEST(add_remove_reuse_against_a_model)
{
    fixture_t f;
    fixture_open(&f, CAP);
    static model_t m;
    memset(&m, 0, sizeof m);
    uint64_t rng = 99;
    _Atomic int converts = 0;
    char name[16];
    int reused = 0;
    int steps = scale() > 1 ? 500 : 2000; /* 500: a few dozen reuses still */
    for (int step = 0; step < steps; step++) {
        int n = (int)(next_u64(&rng) % (CAP * 2));
        name_of(n, name, sizeof name);
        uint64_t rate = 1 + next_u64(&rng) % 5000;
        rl_limit_t lim = def(name, rate);
        switch (next_u64(&rng) % 3) {
        case 0: { /* add */
            int id = rl__limits_add(&f.ls, &lim, &f.clock);
            if (m.id[n] != 0) {
                ck_assert_int_eq(id, RL_EEXIST);
            } else if (m.live == CAP) {
                ck_assert_int_eq(id, RL_ELIMITS);
            } else {
                ck_assert_int_gt(id, 0);
                for (int i = 0; i < m.ndead; i++) {
                    ck_assert_int_ne(id, m.dead[i]);
                    reused += ((unsigned)id & RL_LIMIT_IDX_MASK) ==
                              ((unsigned)m.dead[i] & RL_LIMIT_IDX_MASK);
                }
                ck_assert_uint_lt((unsigned)id & RL_LIMIT_IDX_MASK, CAP);
                m.id[n] = id;
                m.rate[n] = rate;
                m.live++;
            }
            break;
        }
        case 1: { /* update, now and then under another name */
            int id = m.id[n];
            if (id == 0)
                id = m.ndead > 0 ? m.dead[m.ndead - 1]
                                 : (int)((1u << RL_LIMIT_IDX_BITS) | (CAP + 1)); /* never issued */
            int rename = next_u64(&rng) % 4 == 0;
            if (rename)
                snprintf(lim.name, sizeof lim.name, "other");
            int rc = rl__limits_update(&f.ls, id, &lim, &f.clock, no_convert, &converts);
            if (m.id[n] == 0) {
                ck_assert_int_eq(rc, RL_ENOTFOUND);
            } else if (rename) {
                ck_assert_int_eq(rc, RL_ENAME);
            } else {
                ck_assert_int_eq(rc, 0);
                m.rate[n] = rate;
            }
            break;
        }
        default: { /* remove */
            if (m.id[n] == 0)
                break;
            ck_assert_int_eq(rl__limits_remove(&f.ls, m.id[n]), 0);
            if (m.ndead < (int)(sizeof m.dead / sizeof m.dead[0]))
                m.dead[m.ndead++] = m.id[n];
            m.id[n] = 0;
            m.live--;
            break;
        }
        }
        check_model(&f, &m, 16);
    }
    check_model(&f, &m, m.ndead);
    ck_assert_int_gt(reused, 0);              /* indexes were reused */
    ck_assert_int_gt(atomic_load(&converts), 0); /* rate changes convert */
    fixture_close(&f);
}
END_TEST

/* An index whose generation reached RL_LIMIT_GEN_MAX is never handed out
 * again (a new id there could equal one removed long ago): the registry
 * holds one limit fewer from then on. */
START_TEST(exhausted_index_is_skipped)
{
    fixture_t f;
    fixture_open(&f, 2);
    rl_limit_t a = def("a", 10), b = def("b", 20), c = def("c", 30);
    int ida = rl__limits_add(&f.ls, &a, &f.clock);
    ck_assert_uint_eq((unsigned)ida & RL_LIMIT_IDX_MASK, 0);
    ck_assert_int_eq(rl__limits_remove(&f.ls, ida), 0);
    f.ls.slots[0].gen = RL_LIMIT_GEN_MAX - 1; /* white box: 2^19 adds later */
    int id1 = rl__limits_add(&f.ls, &a, &f.clock);
    ck_assert_uint_eq((unsigned)id1 & RL_LIMIT_IDX_MASK, 0);
    ck_assert_uint_eq((unsigned)id1 >> RL_LIMIT_IDX_BITS, RL_LIMIT_GEN_MAX);
    ck_assert_int_eq(rl__limits_remove(&f.ls, id1), 0);
    int id2 = rl__limits_add(&f.ls, &b, &f.clock);
    ck_assert_uint_eq((unsigned)id2 & RL_LIMIT_IDX_MASK, 1);
    ck_assert_int_eq(rl__limits_add(&f.ls, &c, &f.clock), RL_ELIMITS);
    ck_assert_ptr_null(rl__limit_get(&f.ls, id1));
    fixture_close(&f);
}
END_TEST

/* -------------------------------------------------------- readers racing */

#define VARIANTS 4
#define READERS 3

typedef struct race {
    fixture_t f;
    int id;
    rl_limit_params_t want[VARIANTS]; /* what each definition publishes */
    rl_limit_t defs[VARIANTS];
    _Atomic int stop;
    _Atomic int converts;
    _Atomic uint64_t reads;
    pthread_t readers[READERS];
    int failed[READERS];
    char why[READERS][160];
} race_t;

/* The fields a definition decides (epoch and prev follow the update
 * history instead). */
static int same_def(const rl_limit_params_t *a, const rl_limit_params_t *b, size_t words)
{
    rl_limit_params_t x = *a, y = *b;
    x.epoch = y.epoch = 0;
    x.prev = y.prev;
    return memcmp(&x, &y, words * 8) == 0;
}

static void *reader(void *arg)
{
    race_t *r = ((race_t **)arg)[0];
    int me = (int)(intptr_t)((void **)arg)[1];
    uint64_t last_epoch = 0, n = 0;
    /* relaxed: a stop flag; nothing is published through it. */
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        rl_limit_slot_t *s = rl__limit_get(&r->f.ls, r->id);
        if (s == NULL) {
            snprintf(r->why[me], sizeof r->why[me], "the limit vanished");
            r->failed[me] = 1;
            break;
        }
        rl_limit_params_t p;
        /* Every shape of read: whole; as a check without a decision (the
         * hot prefix, and a synced limit's presync words); as a check that
         * fills a decision; as one that reads its limit degraded. */
        int shape = (int)(n % 4);
        memset(&p, 0, sizeof p);
        if (shape == 0)
            rl__params_read(s, &p);
        else
            rl__params_read_n(s, &p, shape == 3, shape == 2);
        size_t words = shape == 0 || shape == 3 ? RL_PARAM_WORDS
                       : shape == 2             ? RL_PARAM_DETAIL_WORDS
                       : p.synced               ? RL_PARAM_SYNCED_WORDS
                                                : RL_PARAM_HOT_WORDS;
        int v = 0;
        while (v < VARIANTS && !same_def(&p, &r->want[v], words))
            v++;
        if (v == VARIANTS || p.epoch < last_epoch) {
            snprintf(r->why[me], sizeof r->why[me],
                     "read %llu: a snapshot of no published definition (rate %llu, epoch %llu "
                     "after %llu)",
                     (unsigned long long)n, (unsigned long long)p.rate_count,
                     (unsigned long long)p.epoch, (unsigned long long)last_epoch);
            r->failed[me] = 1;
            break;
        }
        last_epoch = p.epoch;
        n++;
    }
    /* relaxed: a statistic read after join. */
    atomic_fetch_add_explicit(&r->reads, n, memory_order_relaxed);
    return NULL;
}

/* One writer updates a limit through VARIANTS definitions (each a different
 * rate, burst, mode and shadow, so a torn read mixes words of two of them)
 * while READERS threads read it, in every shape a check reads it: every
 * read is one published definition, and its epoch never goes back. */
START_TEST(readers_racing_a_writer_see_whole_snapshots)
{
    static race_t r;
    memset(&r, 0, sizeof r);
    fixture_open(&r.f, CAP);
    static const uint64_t rates[VARIANTS] = {100, 7000, 100, 250000};
    static const uint64_t bursts[VARIANTS] = {5, 90000, 700, 3};
    for (int v = 0; v < VARIANTS; v++) {
        r.defs[v] = def("raced", rates[v]);
        r.defs[v].burst = bursts[v];
        r.defs[v].shadow = v % 2;
        r.defs[v].mode = v == 2 ? RL_MODE_LOCAL : RL_MODE_GLOBAL;
    }
    /* The model: what each definition publishes, read back alone. */
    r.id = rl__limits_add(&r.f.ls, &r.defs[0], &r.f.clock);
    ck_assert_int_gt(r.id, 0);
    for (int v = VARIANTS - 1; v >= 0; v--) {
        ck_assert_int_eq(
            rl__limits_update(&r.f.ls, r.id, &r.defs[v], &r.f.clock, no_convert, &r.converts), 0);
        rl__params_read(rl__limit_get(&r.f.ls, r.id), &r.want[v]);
    }
    for (int a = 0; a < VARIANTS; a++)
        for (int b = a + 1; b < VARIANTS; b++)
            ck_assert(!same_def(&r.want[a], &r.want[b], RL_PARAM_HOT_WORDS));
    void *args[READERS][2];
    for (int i = 0; i < READERS; i++) {
        args[i][0] = &r;
        args[i][1] = (void *)(intptr_t)i;
        ck_assert_int_eq(pthread_create(&r.readers[i], NULL, reader, args[i]), 0);
    }
    int updates = 50000 / scale();
    uint64_t rng = 5;
    for (int k = 0; k < updates; k++) {
        int v = (int)(next_u64(&rng) % VARIANTS);
        ck_assert_int_eq(
            rl__limits_update(&r.f.ls, r.id, &r.defs[v], &r.f.clock, no_convert, &r.converts), 0);
    }
    /* relaxed: see reader. */
    atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
    for (int i = 0; i < READERS; i++)
        pthread_join(r.readers[i], NULL);
    for (int i = 0; i < READERS; i++)
        ck_assert_msg(!r.failed[i], "reader %d: %s", i, r.why[i]);
    ck_assert_uint_gt(atomic_load(&r.reads), 0);
    rl_limit_params_t end;
    rl__params_read(rl__limit_get(&r.f.ls, r.id), &end);
    /* Every update that changed the rate bumped the epoch once. */
    ck_assert_uint_eq(end.epoch, (uint64_t)atomic_load(&r.converts));
    fixture_close(&r.f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, add_remove_reuse_against_a_model);
    tcase_add_test(tc, exhausted_index_is_skipped);
    suite_add_tcase(s, tc);
    TCase *race = tcase_create("race");
    tcase_add_test(race, readers_racing_a_writer_see_whole_snapshots);
    suite_add_tcase(s, race);
    return s;
}

int main(void) { return rl_test_run(suite()); }
