/* SPDX-License-Identifier: MIT */
/* Hot keys with a global tier (src/hot/hot.c fed by the sync rounds): three
 * nodes in one process, manual rounds on a virtual clock against a real
 * redis-server. A key no node alone would call hot (a third of the demand
 * each) is marked hot on every node from the fleet's usage in the replies,
 * carries RL_FLAG_HOT, is reported with its bytes, share and fleet rate,
 * and leaves once the demand is gone. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "sync/sync.h"

static rl_t *open_manual(const char *node, rl_test_clock_t *clk)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = 100;
    c.expected_nodes = 3;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = "hotfleet";
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

enum { NODES = 3 };

/* One 100 ms round: per node `per_node` checks of the hot key and one each
 * of 20 background keys, spread over it; then every node syncs. Returns
 * how many of the hot key's checks answered RL_FLAG_HOT. */
static int round_of(rl_t **n, const int *ids, rl_test_clock_t *clk, int per_node)
{
    int flagged = 0;
    for (int step = 0; step < 10; step++) { /* 10 ms steps */
        for (int i = 0; i < NODES; i++) {
            for (int k = 0; k < per_node / 10; k++) {
                rl_decision_t d;
                rl_decision_init(&d);
                ck_assert_int_ge(rl_check(n[i], ids[i], "the-hot-key", 11, 1, &d), 0);
                flagged += (d.flags & RL_FLAG_HOT) != 0;
            }
            char bg[16];
            for (int k = 0; k < 2; k++) {
                int len = snprintf(bg, sizeof bg, "bg-%d", step * 2 + k);
                ck_assert_int_ge(rl_check(n[i], ids[i], bg, (size_t)len, 1, NULL), 0);
            }
        }
        rl_test_clock_advance(clk, 10000000);
    }
    uint64_t vms = atomic_load(&clk->precise_ns) / 1000000;
    for (int i = 0; i < NODES; i++)
        ck_assert_int_eq(rl__sync_step(n[i]->sync, vms), 0);
    return flagged;
}

/* The hot key's entry among the limit's reported keys (1), or 0. */
static int hot_entry(rl_t *rl, int id, rl_hotkey_t *out)
{
    rl_hotkey_t hk[32];
    rl_hotkey_init(&hk[0]);
    for (int i = 1; i < 32; i++)
        hk[i] = hk[0];
    int n = rl_hotkeys(rl, id, hk, 32);
    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++)
        if (hk[i].key_len == 11 && memcmp(hk[i].key, "the-hot-key", 11) == 0) {
            *out = hk[i];
            return 1;
        }
    memset(out, 0, sizeof *out);
    return 0;
}

/* `ratelimit --json hot` against this fleet (when the CLI is built). */
static void cli_hot_finds_it(void)
{
#ifdef RL_CLI_PATH
    char cmd[512], out[65536];
    snprintf(cmd, sizeof cmd, "%s --json hot --redis %s --prefix hotfleet", RL_CLI_PATH,
             rl_test_redis_url());
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    const char *row = strstr(out, "\"key\": \"the-hot-key\"");
    ck_assert_msg(row != NULL, "%s", out);
    ck_assert_msg(strstr(out, "\"live_nodes\": 3") != NULL, "%s", out);
    const char *end = strchr(row, '}');
    ck_assert_ptr_nonnull(end);
    char one[1024];
    snprintf(one, sizeof one, "%.*s", (int)(end - row), row);
    ck_assert_msg(strstr(one, "\"hot\": true") && strstr(one, "\"hot_nodes\": 3") &&
                      strstr(one, "\"nodes\": 3") && strstr(one, "\"key_len\": 11"),
                  "%s", one);
    /* the text form, one limit */
    snprintf(cmd, sizeof cmd, "%s hot --redis %s --prefix hotfleet --limit h", RL_CLI_PATH,
             rl_test_redis_url());
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strstr(out, "the-hot-key") != NULL && strstr(out, "hot ") != NULL &&
                      strstr(out, "3/3") != NULL,
                  "%s", out);
#endif
}

START_TEST(fleet_demand_marks_hot)
{
    /* static: the clock hook must outlive the instances, which the
     * case's teardown closes after this function returns */
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, UINT64_C(1000000000));
    rl_t *n[NODES];
    int ids[NODES];
    char name[16];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof name, "n%d", i);
        n[i] = open_manual(name, &clk);
        ids[i] = rl_test_add(n[i], "name=h rate=1000/s burst=100 hot=0.3");
    }
    rl_test_wait_sync_connected(n, NODES); /* a round before that fails */
    /* 200/s per node (600/s in all): no node alone passes 300/s */
    int r = 0, entered = -1;
    for (; r < 40 && entered < 0; r++) {
        round_of(n, ids, &clk, 20);
        rl_hotkey_t hk;
        int all = 1;
        for (int i = 0; i < NODES; i++)
            all &= hot_entry(n[i], ids[i], &hk) && hk.hot;
        if (all)
            entered = r;
    }
    ck_assert_msg(entered >= 0, "not hot on every node after %d rounds", r);
    rl_hotkey_t hk;
    for (int i = 0; i < NODES; i++) {
        ck_assert_int_eq(hot_entry(n[i], ids[i], &hk), 1);
        ck_assert_int_eq(hk.limit, ids[i]);
        ck_assert_uint_eq(hk.key_len, 11);
        ck_assert_int_eq(memcmp(hk.key, "the-hot-key", 11), 0);
        ck_assert_msg(hk.demand_per_s > 150 && hk.demand_per_s < 250, "node %d: %.1f/s", i,
                      hk.demand_per_s);
        ck_assert_msg(hk.fleet_per_s > 300 && hk.fleet_per_s < 700, "node %d: fleet %.1f/s", i,
                      hk.fleet_per_s);
        ck_assert_msg(hk.share_per_s > 0, "node %d: no share", i);
    }
    /* every check of it now answers RL_FLAG_HOT */
    ck_assert_int_eq(round_of(n, ids, &clk, 20), NODES * 20);
    /* each node publishes it in the registry: `ratelimit hot` shows the
     * union, one row marked hot by all three nodes */
    cli_hot_finds_it();
    /* the demand goes: it leaves (the fleet's usage decays in Redis first) */
    int left = -1;
    for (r = 0; r < 60 && left < 0; r++) {
        round_of(n, ids, &clk, 0);
        int any = 0;
        for (int i = 0; i < NODES; i++)
            any |= hot_entry(n[i], ids[i], &hk) && hk.hot;
        if (!any)
            left = r;
    }
    ck_assert_msg(left >= 0, "still hot after %d rounds without demand", r);
    ck_assert_int_eq(round_of(n, ids, &clk, 10), 0); /* and its checks are not flagged */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hot_fleet");
    TCase *tc = tcase_create("fleet");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, fleet_demand_marks_hot);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
