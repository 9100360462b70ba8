/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"

int rl_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

uint64_t rl_test_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rl_test_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void rl_test_poll_pause(unsigned attempt)
{
    long ms = attempt >= 5 ? 20 : 1L << attempt;
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

int rl_test_wait_until(int (*pred)(void *ctx), void *ctx, unsigned timeout_ms)
{
    uint64_t deadline = rl_test_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (unsigned attempt = 0;; attempt++) {
        int late = rl_test_now_ns() > deadline;
        int got = pred(ctx);
        if (got || late)
            return got;
        rl_test_poll_pause(attempt);
    }
}

/* The test thread's holds. Tests are sequential in one process (or one per
 * forked child), and only the test thread holds or releases: no locking. */
static struct {
    void *p;
    void (*release)(void *);
} holds[32];
static int nholds;

void *rl_test_hold(void *p, void (*release)(void *))
{
    ck_assert_msg(nholds < (int)(sizeof holds / sizeof holds[0]), "rl_test_hold: too many");
    holds[nholds].p = p;
    holds[nholds].release = release;
    nholds++;
    return p;
}

void rl_test_release(void *p)
{
    for (int i = nholds - 1; i >= 0; i--) {
        if (holds[i].p != p)
            continue;
        void (*release)(void *) = holds[i].release;
        for (int j = i; j + 1 < nholds; j++)
            holds[j] = holds[j + 1];
        nholds--;
        release(p);
        return;
    }
    ck_abort_msg("rl_test_release: %p is not held", p);
}

void rl_test_release_all(void)
{
    while (nholds > 0) {
        nholds--;
        holds[nholds].release(holds[nholds].p);
    }
}

void rl_test_close_fn(void *rl) { rl_close(rl); }

uint64_t rl_test_clock_fn(void *ud, int32_t source)
{
    rl_test_clock_t *c = ud;
    /* relaxed: the test thread is the only writer; readers need no ordering. */
    uint64_t t = atomic_load_explicit(&c->precise_ns, memory_order_relaxed);
    if (source == RL_CLOCK_COARSE && c->coarse_tick_ns != 0)
        t -= t % c->coarse_tick_ns;
    return t;
}

void rl_test_clock_advance(rl_test_clock_t *c, uint64_t ns)
{
    /* relaxed: time is data, not a synchronisation point between threads. */
    atomic_fetch_add_explicit(&c->precise_ns, ns, memory_order_relaxed);
}

rl_t *rl_test_open(rl_test_clock_t *clk, uint32_t max_keys)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    if (clk != NULL) {
        cfg.clock = rl_test_clock_fn;
        cfg.clock_ud = clk;
        cfg.clock_coarse_tick_ns = clk->coarse_tick_ns;
    }
    if (max_keys != 0)
        cfg.max_keys = max_keys;
    rl_t *rl = NULL;
    int rc = rl_open(&rl, &cfg);
    ck_assert_msg(rc == 0, "rl_open: %s", rl_strerror(rc));
    return rl;
}

int rl_test_add(rl_t *rl, const char *spec)
{
    rl_limit_t lim;
    char err[256] = "";
    int rc = rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err);
    ck_assert_msg(rc == 0, "rl_limit_parse_sized(%s): %s (%s)", spec, rl_err_name(rc), err);
    int id = rl_limit_add(rl, &lim);
    ck_assert_msg(id >= 0, "rl_limit_add(%s): %s", spec, rl_err_name(id));
    return id;
}

rl_t *rl_test_open_degraded(uint32_t interval_ms)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = "redis://127.0.0.1:1";
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.sync_interval_ms = interval_ms;
    rl_t *r = NULL;
    ck_assert_int_eq(rl_open(&r, &c), 0);
    WAIT_FOR(rl_test_health(r) == RL_HEALTH_DEGRADED);
    return r;
}

int rl_test_health(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st.health;
}

double *rl_test_zipf_cdf(int n)
{
    double *c = malloc((size_t)n * sizeof *c);
    ck_assert_ptr_nonnull(c);
    double s = 0;
    for (int i = 0; i < n; i++)
        c[i] = (s += 1.0 / (i + 1));
    for (int i = 0; i < n; i++)
        c[i] /= s;
    return c;
}

int rl_test_zipf_draw(const double *cdf, int n, uint64_t *seed)
{
    double u = (double)(next_u64(seed) >> 11) / 9007199254740992.0;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void *driver_run(void *arg)
{
    rl_test_driver_t *d = arg;
    /* relaxed: the flag only ends the loop; pthread_join orders the rest */
    while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
        d->step(d->ctx);
        rl_test_sleep_ms(d->pause_ms);
    }
    return NULL;
}

void rl_test_driver_start(rl_test_driver_t *d, void (*step)(void *ctx), void *ctx,
                          unsigned pause_ms)
{
    d->step = step;
    d->ctx = ctx;
    d->pause_ms = pause_ms;
    atomic_init(&d->stop, 0);
    ck_assert_int_eq(pthread_create(&d->th, NULL, driver_run, d), 0);
    rl_test_hold(d, rl_test_driver_stop);
}

void rl_test_driver_stop(void *arg)
{
    rl_test_driver_t *d = arg;
    /* relaxed: see driver_run */
    atomic_store_explicit(&d->stop, 1, memory_order_relaxed);
    pthread_join(d->th, NULL);
}
