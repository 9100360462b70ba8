/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_inflight: one acquire and its release, beside two semaphores.
 *
 *   rl_bench_inflight [--runs N] [--ops N]
 *
 * Each thread takes a permit and gives it back, ops times, on one key of a
 * limit of 64 (never full: two threads hold at most two), so every pair is
 * an admission. Contenders, each at 1 and 2 threads:
 *
 *   atomic      a C11 atomic counter: a CAS under the cap, a fetch_sub back
 *   mutex+cond  a counting semaphore of a mutex and a condition variable
 *               (try-acquire under the lock; release signals a waiter)
 *   rl          rl_inflight_acquire + rl_inflight_release (latency 0: the
 *               library reads the clock to measure it), decision NULL
 *   rl+decision the same with an rl_decision_t written
 *
 * In one process, each round runs every contender once, one after the other
 * (a slow spell of this shared machine slows all alike); a figure is the
 * median of its rounds in ns per acquire+release pair (wall time over all
 * threads' pairs), a ratio the median of the per-round ratios to atomic
 * and to mutex+cond (the goal: rl at or under 1.00x of the mutex).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ratelimit.h"

#define MAX_RUNS 31
#define CAP 64

enum { C_ATOMIC, C_MUTEX, C_RL, C_RL_DEC, C_N };
static const char *const names[C_N] = {"atomic", "mutex+cond", "rl", "rl+decision"};

typedef struct shared {
    _Atomic uint32_t count __attribute__((aligned(64)));
    pthread_mutex_t mu __attribute__((aligned(64)));
    pthread_cond_t cv;
    uint32_t held;
    rl_t *rl;
    int id;
    long ops;
    int which;
    pthread_barrier_t go;
} shared_t;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int atomic_take(shared_t *s)
{
    uint32_t c = atomic_load_explicit(&s->count, memory_order_relaxed);
    while (c < CAP)
        if (atomic_compare_exchange_weak_explicit(&s->count, &c, c + 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return 1;
    return 0;
}

static int mutex_take(shared_t *s)
{
    pthread_mutex_lock(&s->mu);
    int ok = s->held < CAP;
    s->held += (uint32_t)ok;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void mutex_give(shared_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->held--;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *worker(void *arg)
{
    shared_t *s = arg;
    rl_permit_t p;
    rl_decision_t d;
    rl_decision_init(&d);
    long denied = 0;
    pthread_barrier_wait(&s->go);
    for (long i = 0; i < s->ops; i++) {
        switch (s->which) {
        case C_ATOMIC:
            if (atomic_take(s))
                atomic_fetch_sub_explicit(&s->count, 1, memory_order_release);
            else
                denied++;
            break;
        case C_MUTEX:
            if (mutex_take(s))
                mutex_give(s);
            else
                denied++;
            break;
        default:
            if (rl_inflight_acquire(s->rl, s->id, "db", 2, RL_INFLIGHT_NO_CLASS, &p,
                                    s->which == C_RL_DEC ? &d : NULL) == RL_ALLOW)
                rl_inflight_release(s->rl, &p, RL_INFLIGHT_SUCCESS, 0);
            else
                denied++;
        }
    }
    pthread_barrier_wait(&s->go);
    if (denied != 0) {
        fprintf(stderr, "rl_bench_inflight: %s denied %ld pairs (never full: a bug)\n",
                names[s->which], denied);
        exit(2);
    }
    return NULL;
}

/* ns per pair of one contender at `threads` threads. */
static double run(shared_t *s, int which, int threads)
{
    pthread_t t[2];
    s->which = which;
    pthread_barrier_init(&s->go, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, s);
    pthread_barrier_wait(&s->go);
    uint64_t t0 = mono_ns();
    pthread_barrier_wait(&s->go);
    uint64_t t1 = mono_ns();
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&s->go);
    return (double)(t1 - t0) / ((double)s->ops * threads);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int runs = 11;
    long ops = 2000000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--runs") == 0)
            runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--ops") == 0)
            ops = atol(argv[i + 1]);
    }
    if (runs < 1 || runs > MAX_RUNS || ops < 1) {
        fprintf(stderr, "usage: rl_bench_inflight [--runs 1..%d] [--ops N]\n", MAX_RUNS);
        return 2;
    }
    static shared_t s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.ops = ops;
    if (rl_open(&s.rl, NULL) != 0)
        return 2;
    rl_limit_t lim;
    char err[128];
    if (rl_limit_parse_sized(&lim, sizeof lim, "name=db kind=inflight max=64", err, sizeof err) !=
            0 ||
        (s.id = rl_limit_add(s.rl, &lim)) < 0) {
        fprintf(stderr, "rl_bench_inflight: %s\n", err);
        return 2;
    }
    static double ns[2][C_N][MAX_RUNS], ratio[2][C_N][MAX_RUNS], rmu[2][C_N][MAX_RUNS];
    for (int r = 0; r < runs; r++)
        for (int th = 1; th <= 2; th++)
            for (int c = 0; c < C_N; c++)
                ns[th - 1][c][r] = run(&s, c, th);
    for (int th = 0; th < 2; th++)
        for (int c = 0; c < C_N; c++)
            for (int r = 0; r < runs; r++) {
                ratio[th][c][r] = ns[th][c][r] / ns[th][C_ATOMIC][r];
                rmu[th][c][r] = ns[th][c][r] / ns[th][C_MUTEX][r];
            }
    printf("rl_bench_inflight: %d rounds of %ld acquire+release pairs per thread; medians\n",
           runs, ops);
    printf("%-12s %9s %9s %8s   %9s %9s %8s\n", "", "1 thread", "x atomic", "x mutex",
           "2 thr", "x atomic", "x mutex");
    for (int c = 0; c < C_N; c++) {
        double a = median(ns[0][c], runs), ra = median(ratio[0][c], runs);
        double b = median(ns[1][c], runs), rb = median(ratio[1][c], runs);
        double ma = median(rmu[0][c], runs), mb = median(rmu[1][c], runs);
        printf("%-12s %6.1f ns %8.2fx %7.2fx   %6.1f ns %8.2fx %7.2fx\n", names[c], a, ra, ma,
               b, rb, mb);
    }
    rl_close(s.rl);
    return 0;
}
