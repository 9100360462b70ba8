/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_exact: exact mode's client latency, with 1, 4 and 16 calling
 * threads, beside the round trips it is made of, in one run:
 *   ping     a blocking hiredis PING, one connection per thread
 *   eval1    a blocking EVALSHA of `return 1`: the floor any script has
 *            (EVALSHA's own cost over PING's), one connection per thread
 *   evalsha  a blocking EVALSHA of lua/exact.lua, one connection per thread
 *            (also the "pool of blocking connections" design at its best:
 *            a connection per caller, no pool lock, no hand-off)
 *   exact/4  rl_check on an exact limit: the exact thread, 4 connections
 *   exact/1  the same with exact_pool_size 1 (one pipelined connection)
 *   ifl/4    rl_inflight_acquire then rl_inflight_release on an exact
 *            in-flight limit (kind=inflight mode=exact): two round trips
 *            of lua/inflight.lua, timed as one call, on exact/4's instance
 * Each caller makes CALLS calls on keys of its own; per-call latency p50 and
 * p99 and the total throughput are printed per mode, medians over RUNS runs
 * interleaved mode by mode, with the ratios to PING. Not a gate.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ratelimit.h"
#include "redis_server.h"
#include "lua/scripts.h"

#define CALLS 3000
#define RUNS 3
#define MAXT 16

enum { M_PING, M_EVAL1, M_EVALSHA, M_EXACT4, M_EXACT1, M_IFL4, M_N };
static const char *const mode_name[M_N] = {"ping",    "eval1",   "evalsha",
                                           "exact/4", "exact/1", "ifl/4"};

static bench_redis_t redis;
static char sha[41], sha1[41];
static const char secret[] = "bench-exact-secret-0123456789abcd";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    int mode, tid;
    rl_t *rl;
    int id, ifl;
    uint64_t lat[CALLS];
    pthread_barrier_t *go;
} job_t;

static void *run_job(void *arg)
{
    job_t *j = arg;
    redisContext *c = NULL;
    if (j->mode == M_PING || j->mode == M_EVAL1 || j->mode == M_EVALSHA) {
        c = redisConnect("127.0.0.1", redis.port);
        if (c == NULL || c->err) {
            fprintf(stderr, "rl_bench_exact: cannot connect\n");
            exit(1);
        }
    }
    char key[64];
    pthread_barrier_wait(j->go);
    for (int i = 0; i < CALLS; i++) {
        int n = snprintf(key, sizeof key, "{b}:t%d:%d", j->tid, i & 255);
        uint64_t t0 = now_ns();
        if (c != NULL) {
            redisReply *r = j->mode == M_PING ? redisCommand(c, "PING")
                            : j->mode == M_EVAL1
                                ? redisCommand(c, "EVALSHA %s 1 %b", sha1, key, (size_t)n)
                                : redisCommand(c, "EVALSHA %s 1 %b 1 10000000 1000000 "
                                                  "1000000000 60000",
                                               sha, key, (size_t)n);
            if (r == NULL || r->type == REDIS_REPLY_ERROR) {
                fprintf(stderr, "rl_bench_exact: %s\n", r ? r->str : c->errstr);
                exit(1);
            }
            freeReplyObject(r);
        } else if (j->mode == M_IFL4) {
            rl_permit_t p;
            rl_decision_t d;
            rl_decision_init(&d);
            if (rl_inflight_acquire(j->rl, j->ifl, key, (size_t)n, RL_INFLIGHT_NO_CLASS, &p,
                                    &d) != RL_ALLOW ||
                !(d.flags & RL_FLAG_EXACT) ||
                rl_inflight_release(j->rl, &p, RL_INFLIGHT_SUCCESS, 0) != 0) {
                fprintf(stderr, "rl_bench_exact: an in-flight pair not answered by Redis\n");
                exit(1);
            }
        } else {
            rl_decision_t d;
            rl_decision_init(&d);
            rl_check(j->rl, j->id, key, (size_t)n, 1, &d);
            if (!(d.flags & RL_FLAG_EXACT)) {
                fprintf(stderr, "rl_bench_exact: a check not answered by Redis (flags %u)\n",
                        d.flags);
                exit(1);
            }
        }
        j->lat[i] = now_ns() - t0;
    }
    if (c != NULL)
        redisFree(c);
    return NULL;
}

typedef struct result {
    double p50_us, p99_us, kops;
} result_t;

static int ifl_id; /* exact/4's instance's in-flight limit */

static rl_t *open_exact(uint32_t pool, int *id)
{
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", redis.port);
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.redis_url = url;
    cfg.key_secret = secret;
    cfg.key_secret_len = sizeof secret - 1;
    cfg.exact_pool_size = pool;
    cfg.exact_timeout_ms = 1000; /* measure the round trip, not the policy */
    cfg.log_quiet = 1;
    rl_t *rl = NULL;
    if (rl_open(&rl, &cfg) != 0)
        exit(1);
    rl_limit_t lim;
    rl_limit_parse(&lim, "name=b rate=10000000/s burst=1000000 mode=exact", NULL, 0);
    *id = rl_limit_add(rl, &lim);
    rl_limit_parse(&lim, "name=f kind=inflight mode=exact max=1000 max_hold=60s", NULL, 0);
    ifl_id = rl_limit_add(rl, &lim);
    /* Warm up: until Redis answers (the connections are up). */
    for (int i = 0; i < 10000; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, *id, "warm", 4, 1, &d);
        if (d.flags & RL_FLAG_EXACT)
            return rl;
        usleep(1000);
    }
    fprintf(stderr, "rl_bench_exact: exact path never answered\n");
    exit(1);
}

static result_t measure(int mode, int threads, rl_t *rl, int id)
{
    static job_t jobs[MAXT];
    pthread_t th[MAXT];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
        jobs[t].mode = mode;
        jobs[t].tid = t;
        jobs[t].rl = rl;
        jobs[t].id = id;
        jobs[t].ifl = ifl_id;
        jobs[t].go = &go;
        pthread_create(&th[t], NULL, run_job, &jobs[t]);
    }
    pthread_barrier_wait(&go);
    uint64_t t0 = now_ns();
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    uint64_t wall = now_ns() - t0;
    pthread_barrier_destroy(&go);
    static uint64_t all[MAXT * CALLS];
    size_t n = 0;
    for (int t = 0; t < threads; t++)
        for (int i = 0; i < CALLS; i++)
            all[n++] = jobs[t].lat[i];
    qsort(all, n, sizeof all[0], cmp_u64);
    result_t r = {all[n / 2] / 1e3, all[n * 99 / 100] / 1e3, (double)n / (wall / 1e9) / 1e3};
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return v[n / 2];
}

int main(void)
{
    char why[256];
    int rc = bench_redis_start(&redis, why, sizeof why);
    if (rc != 0) {
        fprintf(stderr, "rl_bench_exact: %s\n", why);
        return rc == 1 ? 0 : 1;
    }
    redisContext *c = redisConnect("127.0.0.1", redis.port);
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", rl__lua_exact);
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "rl_bench_exact: SCRIPT LOAD failed\n");
        return 1;
    }
    snprintf(sha, sizeof sha, "%s", r->str);
    freeReplyObject(r);
    r = redisCommand(c, "SCRIPT LOAD %s", "return 1");
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "rl_bench_exact: SCRIPT LOAD failed\n");
        return 1;
    }
    snprintf(sha1, sizeof sha1, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    int id4, id1;
    rl_t *rl1 = open_exact(1, &id1), *rl4 = open_exact(4, &id4); /* ifl_id: rl4's */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("rl_bench_exact: %ld CPUs, redis-server on loopback, %d calls per thread, "
           "median of %d runs\n",
           cpus, CALLS, RUNS);
    printf("%-8s %7s %9s %9s %9s %12s %12s\n", "mode", "threads", "p50 us", "p99 us",
           "kcalls/s", "p50/ping p50", "p99/ping p99");
    static const int tcount[3] = {1, 4, 16};
    for (int ti = 0; ti < 3; ti++) {
        double p50[M_N][RUNS], p99[M_N][RUNS], kops[M_N][RUNS];
        for (int run = 0; run < RUNS; run++)
            for (int m = 0; m < M_N; m++) {
                result_t res = measure(m, tcount[ti], m == M_EXACT1 ? rl1 : rl4,
                                       m == M_EXACT1 ? id1 : id4);
                p50[m][run] = res.p50_us;
                p99[m][run] = res.p99_us;
                kops[m][run] = res.kops;
            }
        double ping50 = median(p50[M_PING], RUNS), ping99 = median(p99[M_PING], RUNS);
        for (int m = 0; m < M_N; m++) {
            double a = median(p50[m], RUNS), b = median(p99[m], RUNS);
            printf("%-8s %7d %9.1f %9.1f %9.1f %12.2f %12.2f\n", mode_name[m], tcount[ti], a,
                   b, median(kops[m], RUNS), a / ping50, b / ping99);
        }
    }
    FILE *la = fopen("/proc/loadavg", "r");
    char load[64] = "?";
    if (la != NULL) {
        if (fgets(load, sizeof load, la) == NULL)
            snprintf(load, sizeof load, "?\n");
        fclose(la);
    }
    printf("load average at the end: %s", load);
    rl_close(rl4);
    rl_close(rl1);
    bench_redis_stop(&redis);
    return 0;
}
