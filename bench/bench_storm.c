/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_storm: 50 instances in one process lose Redis at once (SIGKILL),
 * and it comes back empty on the same port 2 s later. When does each
 * instance reconnect? Prints the spread in 100 ms windows and the busiest
 * window's share (the backoff is meant to keep it near 1/9 of them; see
 * src/base/backoff.h for the statistics). A report, not a gate: one real run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ratelimit.h"
#include "redis_harness.h"

#define NODES 50

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int connected(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    return s.sync_connected == 1;
}

int main(void)
{
    rl_test_redis_t srv;
    char err[256];
    int rc = rl_test_redis_start(&srv, err, sizeof err);
    if (rc != 0) {
        printf("rl_bench_storm: %s\n", err);
        return rc > 0 ? 0 : 1;
    }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    static rl_t *nodes[NODES];
    for (int i = 0; i < NODES; i++) {
        rl_config_t c;
        rl_config_init(&c);
        c.redis_url = url;
        /* One fleet: every node shares the secret (else each had its own keys). */
        c.key_secret = "bench-storm-secret-0123";
        c.key_secret_len = 23;
        c.max_keys = 1024;
        c.sync_interval_ms = 100;
        if (rl_open(&nodes[i], &c) != 0) {
            printf("rl_open failed\n");
            return 1;
        }
    }
    for (int i = 0; i < NODES; i++)
        while (!connected(nodes[i]))
            sleep_ms(5);
    uint64_t t_kill = now_ms();
    /* Killed without restarting yet: every node degrades and backs off. */
    if (rl_test_redis_crash_restart(&srv, err, sizeof err) != 0) {
        printf("restart: %s\n", err);
        return 1;
    }
    /* crash_restart brings it back at once; stop it again for 2 s of outage. */
    rl_test_redis_stop(&srv);
    sleep_ms(2000);
    int port = srv.port;
    (void)port;
    if (rl_test_redis_crash_restart(&srv, err, sizeof err) != 0) {
        printf("restart: %s\n", err);
        return 1;
    }
    uint64_t t_back = now_ms();
    uint64_t at[NODES];
    int left = NODES;
    for (int i = 0; i < NODES; i++)
        at[i] = 0;
    while (left > 0 && now_ms() - t_back < 10000) {
        for (int i = 0; i < NODES; i++)
            if (at[i] == 0 && connected(nodes[i])) {
                at[i] = now_ms() - t_back;
                left--;
            }
        sleep_ms(2);
    }
    int hist[20] = {0}, worst = 0;
    for (int i = 0; i < NODES; i++)
        if (at[i] != 0 && at[i] / 100 < 20)
            hist[at[i] / 100]++;
    for (int i = 0; i < NODES; i++) {
        int in = 0;
        for (int j = 0; j < NODES; j++)
            in += at[j] >= at[i] && at[j] < at[i] + 100;
        if (in > worst)
            worst = in;
    }
    printf("50 instances, Redis down %llu ms; reconnected after it came back (ms):\n",
           (unsigned long long)(t_back - t_kill));
    for (int w = 0; w < 20; w++)
        if (hist[w] > 0)
            printf("  %4d-%4d ms: %2d %.*s\n", w * 100, w * 100 + 99, hist[w], hist[w],
                   "##################################################");
    printf("not back within 10 s: %d; busiest 100 ms window: %d of %d (%.0f%%)\n", left, worst,
           NODES, 100.0 * worst / NODES);
    for (int i = 0; i < NODES; i++)
        if (at[i] == 0) {
            rl_stats_t st;
            rl_stats_init(&st);
            rl_stats(nodes[i], &st);
            printf("  node %d never came back: health %d, rounds %llu failed %llu, errors %llu, "
                   "transitions %llu\n",
                   i, st.health, (unsigned long long)st.sync_rounds,
                   (unsigned long long)st.sync_rounds_failed, (unsigned long long)st.sync_errors,
                   (unsigned long long)st.health_transitions);
        }
    for (int i = 0; i < NODES; i++)
        rl_close(nodes[i]);
    rl_test_redis_stop(&srv);
    return 0;
}
