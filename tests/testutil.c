/* SPDX-License-Identifier: MIT */
#include <stdatomic.h>
#include <stdlib.h>
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
    int rc = rl_limit_parse(&lim, spec, err, sizeof err);
    ck_assert_msg(rc == 0, "rl_limit_parse(%s): %s (%s)", spec, rl_err_name(rc), err);
    int id = rl_limit_add(rl, &lim);
    ck_assert_msg(id >= 0, "rl_limit_add(%s): %s", spec, rl_err_name(id));
    return id;
}

rl_t *rl_test_open_degraded(uint32_t interval_ms)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = "redis://127.0.0.1:1";
    c.sync_interval_ms = interval_ms;
    rl_t *r = NULL;
    ck_assert_int_eq(rl_open(&r, &c), 0);
    rl_stats_t st;
    for (int i = 0; i < 500; i++) {
        rl_stats_init(&st);
        ck_assert_int_eq(rl_stats(r, &st), 0);
        if (st.health == RL_HEALTH_DEGRADED)
            return r;
        usleep(10000);
    }
    ck_abort_msg("not degraded after 5 s with nothing listening");
    return NULL;
}
