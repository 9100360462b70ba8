/* SPDX-License-Identifier: MIT */
/* Hot keys end to end (src/hot/hot.c): rl_hotkeys on a zipf workload with
 * planted heavy keys, their key bytes, the hot= marks with hysteresis
 * (RL_FLAG_HOT, log lines), the hot= grammar and rl_hotkeys' bad inputs. */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "hot/sketch.h"
#include "base/structsize.h"
#include "sync/nodes.h"
#include "instance.h"
#include "hot/hot.h"

/* Log lines the instance wrote (caller's thread for local limits). */
typedef struct logcap {
    pthread_mutex_t mu;
    int enters, leaves;
    int locked; /* lines written while the hot-key mutex was held */
    rl_t *rl;
    char last[512];
} logcap_t;

static void log_fn(void *ud, int32_t level, const char *msg)
{
    logcap_t *lc = ud;
    pthread_mutex_lock(&lc->mu);
    /* The header's promise: never called while the library holds a lock a
     * caller could need (here: the one rl_hotkeys takes). */
    if (lc->rl != NULL && lc->rl->hot != NULL) {
        if (pthread_mutex_trylock(&lc->rl->hot->mu) == 0)
            pthread_mutex_unlock(&lc->rl->hot->mu);
        else
            lc->locked++;
    }
    if (strstr(msg, "hot key enters") != NULL) {
        ck_assert_int_eq(level, RL_LOG_INFO);
        lc->enters++;
    }
    if (strstr(msg, "hot key leaves") != NULL)
        lc->leaves++;
    snprintf(lc->last, sizeof lc->last, "%s", msg);
    pthread_mutex_unlock(&lc->mu);
}

static rl_t *open_local(rl_test_clock_t *clk, uint64_t max_keys, logcap_t *lc)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = rl_test_clock_fn;
    cfg.clock_ud = clk;
    cfg.max_keys = max_keys;
    if (lc != NULL) {
        cfg.log = log_fn;
        cfg.log_ud = lc;
    }
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &cfg), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

#define NZ 100000
#define NPLANT 10
#define ROUNDS 20
#define PER_ROUND 20000

/* zipf(1.0) over 100000 keys, and 10 planted keys at 1.5% of all checks
 * each (below the zipf head: ranks 5 to 14), through rl_check on a
 * local-only instance, rl_hotkeys once per 100 ms of (test) time: at least
 * 9 of the 10 are among the 32 it reports, with their bytes, and the
 * demand it reports for each is what was offered in the last interval. */
START_TEST(zipf_planted_keys_found)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1000000000);
    rl_t *rl = open_local(&clk, NZ + 4096, NULL);
    int id = rl_test_add(rl, "name=z rate=1000000/s burst=1000000 mode=local");
    double *cdf = rl_test_zipf_cdf(NZ);
    uint64_t seed = 2026;
    rl_hotkey_t out[32];
    uint32_t last[NPLANT];
    char key[48];
    int n = 0;
    for (int round = 0; round < ROUNDS; round++) {
        memset(last, 0, sizeof last);
        for (int i = 0; i < PER_ROUND; i++) {
            uint64_t r = next_u64(&seed) % 1000;
            int len;
            if (r < 150) {
                last[r % NPLANT]++;
                len = snprintf(key, sizeof key, "planted-%02d-with-a-long-tail-%0*d",
                               (int)(r % NPLANT), 16, 7);
            } else {
                len = snprintf(key, sizeof key, "zipf-%d", rl_test_zipf_draw(cdf, NZ, &seed));
            }
            ck_assert_int_eq(rl_check(rl, id, key, (size_t)len, 1, NULL), RL_ALLOW);
        }
        rl_test_clock_advance(&clk, 100000000); /* 100 ms */
        rl_hotkey_init(&out[0]);
        for (int i = 1; i < 32; i++)
            out[i] = out[0];
        n = rl_hotkeys(rl, -1, out, 32);
        ck_assert_int_eq(n, 32);
    }
    int found = 0, with_bytes = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(out[i].limit, id);
        ck_assert_int_eq(out[i].hot, 0); /* no hot= on this limit */
        if (i > 0)
            ck_assert(out[i - 1].demand_per_s >= out[i].demand_per_s);
        if (out[i].key_len == 0 || memcmp(out[i].key, "planted-", 8) != 0)
            continue;
        with_bytes++;
        int k = (out[i].key[8] - '0') * 10 + (out[i].key[9] - '0');
        ck_assert_int_lt(k, NPLANT);
        ck_assert_uint_eq(out[i].key_len, 44);
        ck_assert_uint_eq(out[i].key_kept, 44);
        snprintf(key, sizeof key, "planted-%02d-with-a-long-tail-%0*d", k, 16, 7);
        ck_assert_int_eq(memcmp(out[i].key, key, 44), 0);
        /* exact: a held key's last interval is counted whole */
        ck_assert_msg(out[i].demand_per_s > last[k] * 10 - 0.5 &&
                          out[i].demand_per_s < last[k] * 10 + 0.5,
                      "planted %d: %.1f/s reported, %u/s offered", k, out[i].demand_per_s,
                      last[k] * 10);
        found++;
    }
    ck_assert_msg(found >= 9, "found %d of the %d planted keys (%d with bytes)", found, NPLANT,
                  with_bytes);
    /* the zipf head (rank 1, ~7.7% of the zipf draws) leads */
    ck_assert_uint_eq(out[0].key_len, 6);
    ck_assert_int_eq(memcmp(out[0].key, "zipf-0", 6), 0);
    /* one limit asked for: the same keys */
    rl_test_clock_advance(&clk, 100000000);
    ck_assert_int_eq(rl_hotkeys(rl, id, out, 32), 32);
    free(cdf);
}
END_TEST

/* A key's demand stepped around hot=0.5 of 100/s (threshold 50/s), one
 * rl_hotkeys per second of test time: it enters after two intervals at or
 * above 50, stays through noise between 40 and 60 (never below 37.5, the
 * exit band), and leaves after three intervals below 37.5. One log line
 * each way; RL_FLAG_HOT exactly on the checks made while it is marked. */
START_TEST(hot_mark_hysteresis_step)
{
    static const int demand[] = {10, 10, 10, 80, 80, 80, 55, 45, 60, 40, 52, 41,
                                 58, 44, 49, 39, 60, 10, 10, 10, 10, 10, 10};
    /* marked after the rl_hotkeys that ends interval i (hysteresis) */
    static const int marked[] = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    enum { N = sizeof demand / sizeof demand[0] };
    _Static_assert(sizeof marked / sizeof marked[0] == N, "one mark per interval");
    logcap_t lc = {.mu = PTHREAD_MUTEX_INITIALIZER};
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1000000000);
    rl_t *rl = open_local(&clk, 1024, &lc);
    lc.rl = rl;
    int id = rl_test_add(rl, "name=h rate=100/s burst=100 mode=local hot=0.5");
    int cold = rl_test_add(rl, "name=c rate=100/s burst=100 mode=local");
    int was = 0, enters = 0, leaves = 0;
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < demand[i]; j++) {
            rl_decision_t d;
            rl_decision_init(&d);
            rl_check(rl, id, "k", 1, 1, &d);
            ck_assert_msg(!!(d.flags & RL_FLAG_HOT) == was, "interval %d: flags %#x", i,
                          d.flags);
            rl_check(rl, cold, "k", 1, 1, &d);
            ck_assert_uint_eq(d.flags & RL_FLAG_HOT, 0); /* no hot= on that limit */
            rl_test_clock_advance(&clk, 1000000000 / (uint64_t)demand[i] / 2);
        }
        rl_test_clock_advance(&clk, 500000000);
        rl_hotkey_t hk[4];
        rl_hotkey_init(&hk[0]);
        hk[1] = hk[2] = hk[3] = hk[0];
        int n = rl_hotkeys(rl, id, hk, 4);
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(hk[0].limit, id);
        ck_assert_msg(hk[0].demand_per_s > demand[i] - 0.01 && hk[0].demand_per_s < demand[i] + 0.01,
                      "interval %d: %.3f/s for %d", i, hk[0].demand_per_s, demand[i]);
        ck_assert_msg(hk[0].hot == marked[i], "interval %d: hot %d", i, hk[0].hot);
        enters += hk[0].hot && !was;
        leaves += !hk[0].hot && was;
        was = hk[0].hot;
        /* a peek sees the mark too */
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, id, "k", 1, 0, &d);
        ck_assert_int_eq(!!(d.flags & RL_FLAG_HOT), was);
    }
    ck_assert_int_eq(enters, 1);
    ck_assert_int_eq(leaves, 1);
    pthread_mutex_lock(&lc.mu);
    ck_assert_int_eq(lc.enters, 1);
    ck_assert_int_eq(lc.leaves, 1);
    ck_assert_int_eq(lc.locked, 0);
    ck_assert_msg(strstr(lc.last, "limit h key \"k\"") != NULL, "%s", lc.last);
    pthread_mutex_unlock(&lc.mu);
    /* the stats still add up: rl_hotkeys folded the counts, lost none */
    rl_limit_stats_t ls;
    rl_limit_stats_init(&ls);
    ck_assert_int_eq(rl_limit_stats(rl, id, &ls), 0);
    uint64_t offered = 0;
    for (int i = 0; i < N; i++)
        offered += (uint64_t)demand[i] + 1; /* + the peek, which counts nothing */
    ck_assert_uint_eq(ls.admitted + ls.denied, offered - N);
}
END_TEST

/* The mark's rule alone: a step up enters once after RL_HOT_ENTER, noise
 * inside the band never flips it, a step down leaves after RL_HOT_EXIT. */
START_TEST(hot_mark_rule)
{
    uint8_t hot = 0, streak = 0;
    int flips = 0;
    uint64_t seed = 7;
    /* 1000 evaluations: 100 low, 400 noisy around the threshold (+-20%)
     * after a step up, 500 low */
    for (int i = 0; i < 1000; i++) {
        double noise = (double)(next_u64(&seed) % 4001) / 10000.0 - 0.2; /* -0.2..0.2 */
        double d = i < 100 ? 10 : i < 110 ? 200 : i < 500 ? 100 * (1 + noise) : 20;
        int t = rl__hot_mark(&hot, &streak, d, 100);
        flips += t != 0;
        if (i == 100)
            ck_assert_int_eq(hot, 0);
        if (i == 101)
            ck_assert_int_eq(hot, 1);
        if (i == 501)
            ck_assert_int_eq(hot, 1);
        if (i == 502)
            ck_assert_int_eq(hot, 0);
    }
    ck_assert_int_eq(flips, 2);
    /* a threshold removed (0): a hot key leaves at once, none enters */
    hot = 1;
    ck_assert_int_eq(rl__hot_mark(&hot, &streak, 1e9, 0), -1);
    ck_assert_int_eq(rl__hot_mark(&hot, &streak, 1e9, 0), 0);
    ck_assert_int_eq(hot, 0);
}
END_TEST

START_TEST(hot_spec_grammar)
{
    static const struct {
        const char *v;
        int rc;
        uint32_t ppm;
    } cases[] = {
        {"0.5", 0, 500000},     {"2", 0, 2000000},   {"1000", 0, 1000000000},
        {"0.000001", 0, 1},     {"1.25", 0, 1250000}, {"007.5", 0, 7500000},
        {"0", RL_ERANGE, 0},    {"0.0", RL_ERANGE, 0}, {"-1", RL_ERANGE, 0},
        {"1000.000001", RL_ERANGE, 0}, {"99999999999", RL_ERANGE, 0},
        {"nan", RL_ERANGE, 0},  {".5", RL_ESPEC, 0}, {"1.", RL_ESPEC, 0},
        {"1.0000001", RL_ESPEC, 0}, {"abc", RL_ESPEC, 0}, {"1e3", RL_ESPEC, 0},
        {"+1", RL_ESPEC, 0},    {"0x1", RL_ESPEC, 0}, {"50%", RL_ESPEC, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[128], err[256];
        snprintf(spec, sizeof spec, "name=a rate=10/s hot=%s", cases[i].v);
        rl_limit_t lim;
        int rc = rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err);
        ck_assert_msg(rc == cases[i].rc, "hot=%s: %s (%s)", cases[i].v, rl_err_name(rc), err);
        if (rc == 0)
            ck_assert_uint_eq(lim.hot_ppm, cases[i].ppm);
        else
            ck_assert_msg(strstr(err, "hot") != NULL, "hot=%s: %s", cases[i].v, err);
    }
    /* The header's rl_limit_parse parses into this header's struct... */
    rl_limit_t lim;
    char err[256];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=a rate=10/s hot=0.5", err, sizeof err), 0);
    ck_assert_uint_eq(lim.hot_ppm, 500000);
    /* ...while the exported function a 0.1 binary calls writes the 0.1
     * layout, which has no field for it: an error, never dropped. */
    ck_assert_int_eq((rl_limit_parse)(&lim, "name=a rate=10/s hot=0.5", err, sizeof err),
                     RL_ESIZE);
    ck_assert_ptr_nonnull(strstr(err, "rl_limit_parse_sized"));
    ck_assert_int_eq((rl_limit_parse)(&lim, "name=a rate=10/s", err, sizeof err), 0);
    /* set directly: validated by rl_limit_add */
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1);
    rl_t *rl = open_local(&clk, 64, NULL);
    rl_limit_init(&lim);
    strcpy(lim.name, "a");
    lim.rate.count = 10;
    lim.rate.period_ms = 1000;
    lim.hot_ppm = RL_HOT_PPM_MAX + 1;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.hot_ppm = RL_HOT_PPM_MAX;
    lim.near_ppm = 1; /* the field after hot_ppm: a tiered limit's only */
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ERANGE);
    lim.near_ppm = 0;
    ck_assert_int_ge(rl_limit_add(rl, &lim), 0);
}
END_TEST

/* A caller built against the 0.1 header: its rl_limit_t ends before
 * hot_ppm. rl_limit_add, _update and _get never read or write past it
 * (ASan sees the heap block's end), and its limit has no hot mark. */
START_TEST(old_layout_limit)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1);
    rl_t *rl = open_local(&clk, 64, NULL);
    /* only its first RL_LIMIT_SIZE_MIN bytes exist: read through memcpy */
    unsigned char *mem = malloc(RL_LIMIT_SIZE_MIN);
    ck_assert_ptr_nonnull(mem);
    rl_limit_t *old = (rl_limit_t *)(void *)mem;
    size_t size;
    ck_assert_int_eq((rl_limit_parse)(old, "name=o rate=10/s", NULL, 0), 0); /* as 0.1 did */
    memcpy(&size, mem, sizeof size);
    ck_assert_uint_eq(size, RL_LIMIT_SIZE_MIN);
    int id = rl_limit_add(rl, old);
    ck_assert_int_ge(id, 0);
    ck_assert_int_eq(rl_limit_update(rl, id, old), 0);
    memset(mem, 0xA5, RL_LIMIT_SIZE_MIN);
    memcpy(mem, &size, sizeof size);
    ck_assert_int_eq(rl_limit_get(rl, id, old), 0);
    ck_assert_str_eq((const char *)mem + offsetof(rl_limit_t, name), "o");
    memcpy(&size, mem, sizeof size);
    ck_assert_uint_eq(size, RL_LIMIT_SIZE_MIN);
    /* a size between the two layouts cuts a field: refused */
    rl_limit_t lim;
    rl_limit_init(&lim);
    strcpy(lim.name, "p");
    lim.rate.count = 1;
    lim.rate.period_ms = 1000;
    lim.size = RL_LIMIT_SIZE_MIN + 4;
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ESIZE);
    free(mem);
}
END_TEST

START_TEST(hotkeys_bad_inputs)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1);
    rl_t *rl = open_local(&clk, 64, NULL);
    int id = rl_test_add(rl, "name=a rate=10/s");
    rl_hotkey_t hk[2];
    rl_hotkey_init(&hk[0]);
    hk[1] = hk[0];
    ck_assert_int_eq(rl_hotkeys(NULL, -1, hk, 2), RL_EINVAL);
    ck_assert_int_eq(rl_hotkeys(rl, -1, NULL, 2), RL_EINVAL);
    ck_assert_int_eq(rl_hotkeys(rl, -1, NULL, 0), 0);
    ck_assert_int_eq(rl_hotkeys(rl, id + 1, hk, 2), RL_ENOTFOUND);
    ck_assert_int_eq(rl_hotkeys(rl, -2, hk, 2), RL_ENOTFOUND);
    ck_assert_int_eq(rl_hotkeys(rl, id, hk, 2), 0); /* nothing checked yet */
    hk[1].size = sizeof hk[1] - 8;
    ck_assert_int_eq(rl_hotkeys(rl, id, hk, 2), RL_ESIZE);
    hk[0].size = hk[1].size = sizeof hk[0] - 8;
    ck_assert_int_eq(rl_hotkeys(rl, id, hk, 2), RL_ESIZE);
    /* a larger struct with a non-zero unknown tail */
    struct {
        rl_hotkey_t k;
        uint64_t tail;
    } big;
    rl_hotkey_init_sized(&big.k, sizeof big);
    ck_assert_int_eq(rl_hotkeys(rl, id, &big.k, 1), 0);
    big.tail = 1;
    ck_assert_int_eq(rl_hotkeys(rl, id, &big.k, 1), RL_ESIZE);
    rl_hotkey_init_sized(NULL, sizeof hk[0]); /* no-op */
    /* a removed limit's keys are not reported */
    rl_test_clock_advance(&clk, 1000000);
    ck_assert_int_eq(rl_check(rl, id, "x", 1, 1, NULL), RL_ALLOW);
    rl_test_clock_advance(&clk, 1000000);
    rl_hotkey_init(&hk[0]);
    ck_assert_int_eq(rl_hotkeys(rl, -1, hk, 1), 1);
    ck_assert_int_eq(rl_limit_remove(rl, id), 0);
    ck_assert_int_eq(rl_hotkeys(rl, -1, hk, 1), 0);
}
END_TEST

/* Checkers on many keys race rl_hotkeys calls that ask for and collect
 * key bytes (TSan: the capture handoff). */
typedef struct race {
    rl_t *rl;
    int id;
    int t;
    _Atomic int stop;
} race_t;

static void *hot_race_checker(void *p)
{
    race_t *r = p;
    char key[32];
    uint64_t seed = (uint64_t)r->t + 1;
    /* relaxed: a stop flag polled in a loop. */
    while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
        uint64_t x = next_u64(&seed) % 100;
        int len = snprintf(key, sizeof key, "key-%llu", (unsigned long long)(x < 50 ? x % 4 : x));
        rl_decision_t d;
        rl_decision_init(&d);
        ck_assert_int_ge(rl_check(r->rl, r->id, key, (size_t)len, 1, &d), 0);
    }
    return NULL;
}

START_TEST(capture_races_checkers)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1000000000);
    rl_t *rl = open_local(&clk, 4096, NULL);
    race_t r[3];
    pthread_t th[3];
    int id = rl_test_add(rl, "name=r rate=1000/s burst=1000 mode=local hot=0.01");
    for (int i = 0; i < 3; i++) {
        r[i] = (race_t){.rl = rl, .id = id, .t = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, hot_race_checker, &r[i]), 0);
    }
    rl_hotkey_t hk[8];
    int named = 0;
    /* until the busy keys lead with their bytes, or the deadline */
    uint64_t deadline = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned round = 0; named < 4 && rl_test_now_ns() < deadline; round++) {
        rl_test_poll_pause(round);
        rl_test_clock_advance(&clk, 10000000);
        rl_hotkey_init(&hk[0]);
        for (int i = 1; i < 8; i++)
            hk[i] = hk[0];
        int n = rl_hotkeys(rl, id, hk, 8);
        ck_assert_int_ge(n, 0);
        named = 0;
        for (int i = 0; i < n && i < 4; i++)
            if (hk[i].key_len == 5 && memcmp(hk[i].key, "key-", 4) == 0 &&
                hk[i].key[4] >= '0' && hk[i].key[4] <= '3')
                named++;
    }
    for (int i = 0; i < 3; i++)
        atomic_store_explicit(&r[i].stop, 1, memory_order_relaxed); /* relaxed: a flag */
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(named == 4, "%d of the 4 busy keys lead with their bytes; first: %.*s (%d)",
                  named, (int)hk[0].key_kept, hk[0].key, (int)hk[0].key_len);
}
END_TEST

/* rl_metrics_text shows the busiest keys with bounded, escaped labels:
 * hostile bytes never break the exposition format. */
START_TEST(metrics_hot_labels)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, 1000000000);
    rl_t *rl = open_local(&clk, 1024, NULL);
    int id = rl_test_add(rl, "name=m rate=1000/s mode=local hot=0.001");
    static const char nasty[] = "a\"b\\c\n\xff";
    char many[16];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 20; i++)
            ck_assert_int_eq(rl_check(rl, id, nasty, sizeof nasty - 1, 1, NULL), RL_ALLOW);
        for (int k = 0; k < 10; k++) { /* more keys than the 3 shown */
            int len = snprintf(many, sizeof many, "k%d", k);
            ck_assert_int_eq(rl_check(rl, id, many, (size_t)len, 1, NULL), RL_ALLOW);
        }
        rl_test_clock_advance(&clk, 1000000000);
        char buf[16384];
        int n = rl_metrics_text(rl, buf, sizeof buf);
        ck_assert_int_gt(n, 0);
        ck_assert_int_lt(n, (int)sizeof buf);
        if (round < 3)
            continue;
        ck_assert_msg(strstr(buf, "ratelimit_hot_key_demand_per_second{limit=\"m\",key=\"a\\\"b"
                                  "\\\\c\\\\x0a\\\\xff\"} 20.000\n") != NULL,
                      "%s", buf);
        int lines = 0;
        for (const char *p = buf; (p = strstr(p, "\nratelimit_hot_key_demand_per_second{")) != NULL;
             p++)
            lines++;
        ck_assert_int_eq(lines, 3);
        ck_assert_ptr_nonnull(strstr(buf, "\nratelimit_hot_keys{limit=\"m\"} 11\n"));
    }
}
END_TEST

/* The node registry's hot word: what a node writes reads back, and a
 * stranger's malformed items are skipped, never trusted. */
START_TEST(registry_hot_word)
{
    rl_hot_item_t a = {.limit = "api", .kept = 3, .key_len = 3, .demand_mps = 600000,
                        .fleet_mps = 601250, .hot = 1};
    memcpy(a.key, "k\x00\xff", 3);
    rl_hot_item_t b = {.limit = "x.y:z-1", .kept = 64, .key_len = 100, .demand_mps = 5};
    memset(b.key, 'q', 64);
    char items[1024];
    int n = rl__hot_item_format(&a, items, sizeof items);
    ck_assert_str_eq(items, "api/6b00ff/3/600000/601250/1");
    items[n] = ',';
    rl__hot_item_format(&b, items + n + 1, sizeof items - (size_t)n - 1);
    rl_nodes_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.health = 0;
    rec.hot = items;
    char text[RL_NODES_RECORD_MAX];
    int len = rl__nodes_format(&rec, text, sizeof text);
    ck_assert_int_lt(len, (int)sizeof text);
    rl_nodes_record_t back;
    ck_assert_int_eq(rl__nodes_parse(text, (size_t)len, &back), 0);
    ck_assert_ptr_nonnull(back.hot);
    const char *p = back.hot, *end = back.hot + back.hot_len;
    rl_hot_item_t it;
    ck_assert_int_eq(rl__hot_item_next(&p, end, &it), 1);
    ck_assert_str_eq(it.limit, "api");
    ck_assert_uint_eq(it.kept, 3);
    ck_assert_int_eq(memcmp(it.key, "k\x00\xff", 3), 0);
    ck_assert_uint_eq(it.demand_mps, 600000);
    ck_assert_uint_eq(it.fleet_mps, 601250);
    ck_assert_int_eq(it.hot, 1);
    ck_assert_int_eq(rl__hot_item_next(&p, end, &it), 1);
    ck_assert_str_eq(it.limit, "x.y:z-1");
    ck_assert_uint_eq(it.kept, 64);
    ck_assert_uint_eq(it.key_len, 100);
    ck_assert_int_eq(it.hot, 0);
    ck_assert_int_eq(rl__hot_item_next(&p, end, &it), 0);
    /* hostile items: each skipped, the good one after them read */
    static const char bad[] = "a/zz/1/1/1/1,a/6b/1/1/1,a b/6b/1/1/1/0,/6b/1/1/1/0,"
                              "a/6b6/2/1/1/0,a/6b6b/1/1/1/0,a/6b/1/1/1/2,a//0/1/1/0,"
                              "a/6b/x/1/1/0,a/6b/1/1/1/0/7,,ok/6b/1/2/3/1";
    p = bad;
    end = bad + sizeof bad - 1;
    ck_assert_int_eq(rl__hot_item_next(&p, end, &it), 1);
    ck_assert_str_eq(it.limit, "ok");
    ck_assert_uint_eq(it.key[0], 'k');
    ck_assert_uint_eq(it.fleet_mps, 3);
    ck_assert_int_eq(rl__hot_item_next(&p, end, &it), 0);
    /* a caller's hot text with bytes outside the items' own: one line of
     * words still */
    rec.hot = "a b\nc/6b/1/1/1/0";
    len = rl__nodes_format(&rec, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, " hot=a_b_c/6b/1/1/1/0"));
    ck_assert_ptr_null(strchr(text, '\n'));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hot");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, zipf_planted_keys_found);
    tcase_add_test(tc, hot_mark_hysteresis_step);
    tcase_add_test(tc, hot_mark_rule);
    tcase_add_test(tc, hot_spec_grammar);
    tcase_add_test(tc, hotkeys_bad_inputs);
    tcase_add_test(tc, old_layout_limit);
    tcase_add_test(tc, metrics_hot_labels);
    tcase_add_test(tc, registry_hot_word);
    suite_add_tcase(s, tc);
    /* Its own case: the one that starts threads (scripts/test.sh runs it
     * under helgrind and drd). */
    TCase *th = tcase_create("threads");
    tcase_add_checked_fixture(th, NULL, rl_test_release_all);
    tcase_set_timeout(th, 300);
    tcase_add_test(th, capture_races_checkers);
    suite_add_tcase(s, th);
    return s;
}

int main(void) { return rl_test_run(suite()); }
