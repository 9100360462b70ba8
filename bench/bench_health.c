/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_health: rl_check latency while Redis is healthy vs while it is
 * stopped (SIGSTOP: the instance is degraded), in one run. The check path
 * must not notice: it never waits on Redis, and degraded decisions cost one
 * extra atomic load. Prints p50/p99 of per-call latency (timed in batches
 * of 32 calls: a clock read costs as much as a check) for each phase,
 * interleaved, medians over the runs, and the stopped/healthy ratios.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ratelimit.h"
#include "redis_server.h"

#define BATCH 32
#define SAMPLES 20000
#define RUNS 5

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* p50 and p99 of per-call ns over SAMPLES batches. */
static void measure(rl_t *rl, int id, char keys[][16], double *p50, double *p99)
{
    static double lat[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < BATCH; i++) {
            const char *k = keys[(s * BATCH + i) & 1023];
            (void)rl_check(rl, id, k, strlen(k), 1, NULL);
        }
        lat[s] = (double)(now_ns() - t0) / BATCH;
    }
    qsort(lat, SAMPLES, sizeof lat[0], cmp_double);
    *p50 = lat[SAMPLES / 2];
    *p99 = lat[SAMPLES * 99 / 100];
}

static int health(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    return s.health;
}

static int wait_health(rl_t *rl, int want)
{
    for (int i = 0; i < 400; i++) {
        if (health(rl) == want)
            return 0;
        sleep_ms(5);
    }
    return -1;
}

static double median5(double *v)
{
    qsort(v, RUNS, sizeof v[0], cmp_double);
    return v[RUNS / 2];
}

int main(void)
{
    char why[256];
    bench_redis_t srv;
    int rc = bench_redis_start(&srv, why, sizeof why);
    if (rc != 0) {
        printf("rl_bench_health: skipped: %s\n", why);
        return rc > 0 ? 0 : 1;
    }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.key_secret = "bench-health-secret-0123";
    c.key_secret_len = 24;
    c.sync_interval_ms = 50;
    rl_t *rl = NULL;
    if ((rc = rl_open(&rl, &c)) != 0) {
        printf("rl_open: %s\n", rl_strerror(rc));
        bench_redis_stop(&srv);
        return 1;
    }
    rl_limit_t lim;
    rl_limit_parse(&lim, "name=bench rate=1000000/s burst=100000 on_failure=local", NULL, 0);
    int id = rl_limit_add(rl, &lim);
    static char keys[1024][16];
    for (int i = 0; i < 1024; i++)
        snprintf(keys[i], sizeof keys[i], "key:%05d", i);
    double h50[RUNS], h99[RUNS], d50[RUNS], d99[RUNS];
    printf("rl_check latency, 1 thread, 1024 keys, global limit (on_failure=local)\n");
    for (int r = 0; r < RUNS; r++) {
        if (wait_health(rl, RL_HEALTH_HEALTHY) != 0)
            fprintf(stderr, "note: run %d: not healthy yet\n", r);
        measure(rl, id, keys, &h50[r], &h99[r]);
        kill(srv.pid, SIGSTOP);
        if (wait_health(rl, RL_HEALTH_DEGRADED) != 0)
            fprintf(stderr, "note: run %d: not degraded yet\n", r);
        measure(rl, id, keys, &d50[r], &d99[r]);
        kill(srv.pid, SIGCONT);
        printf("run %d: healthy p50 %.1f p99 %.1f ns | redis stopped p50 %.1f p99 %.1f ns\n", r,
               h50[r], h99[r], d50[r], d99[r]);
    }
    double mh50 = median5(h50), mh99 = median5(h99), md50 = median5(d50), md99 = median5(d99);
    printf("median of %d runs: healthy p50 %.1f p99 %.1f ns; stopped p50 %.1f p99 %.1f ns; "
           "ratio p50 %.2f p99 %.2f\n",
           RUNS, mh50, mh99, md50, md99, md50 / mh50, md99 / mh99);
    rl_close(rl);
    bench_redis_stop(&srv);
    return 0;
}
