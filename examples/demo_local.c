/* SPDX-License-Identifier: MIT */
/*
 * rl_demo: the local tier at work, using only the public API.
 *
 * Worker threads offer more load than four limits allow, one API key each:
 *   tenant-a  100/s, burst 20
 *   tenant-b  50/s (burst: one second's worth)
 *   tenant-c  600/m, burst 30: a per-minute limit (10/s on average)
 *   tenant-d  50/s in shadow mode: decides and counts, never denies
 * Once a second it prints, per key, what was admitted and denied in that
 * second (from rl_limit_stats, so the demo keeps no counters of its own) and
 * the admitted rate against the limit's rate. The first second is above 100%
 * by the burst; after that a limit driven past its rate admits ~100%, and the
 * shadow limit admits everything and counts what it would have denied. At the
 * end it checks the local tier's bound for every key,
 *   admitted <= burst + rate x (elapsed + one coarse clock tick),
 * and exits 1 if it fails (see check_bound).
 *
 * Usage: rl_demo [--seconds N] [--threads N]   (defaults: 5 s, 4 threads)
 * Ctrl-C (SIGINT) or SIGTERM stops it early.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ratelimit.h>

/* The only global: set by the signal handler, read by the main thread. */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct tenant {
    const char *key;      /* the API key checked */
    const char *spec;     /* its limit, in rl_limit_parse syntax */
    double offered_per_s; /* load the workers offer, above the limit */
    int id;               /* limit id from rl_limit_add */
    rl_limit_t lim;       /* the limit as the instance holds it */
    rl_limit_stats_t prev; /* counters at the previous report */
} tenant_t;

#define NTENANTS 4

typedef struct demo {
    rl_t *rl;
    tenant_t tenants[NTENANTS];
    unsigned nthreads;
    atomic_bool stop;          /* main -> workers */
    atomic_int error;          /* first rl_check error seen by a worker */
} demo_t;

typedef struct worker {
    demo_t *demo;
    pthread_t thread;
} worker_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL); /* EINTR (a signal) just ends the nap early */
}

static double rate_per_s(const rl_limit_t *lim)
{
    return (double)lim->rate.count * 1000.0 / (double)lim->rate.period_ms;
}

static uint64_t burst_of(const rl_limit_t *lim)
{
    return lim->burst != 0 ? lim->burst : lim->rate.count; /* 0: one period */
}

static void format_limit(const rl_limit_t *lim, char *buf, size_t len)
{
    const char *unit = NULL;
    switch (lim->rate.period_ms) {
    case 1000: unit = "s"; break;
    case 60000: unit = "m"; break;
    case 3600000: unit = "h"; break;
    default: break;
    }
    char rate[48];
    if (unit != NULL)
        snprintf(rate, sizeof rate, "%llu/%s", (unsigned long long)lim->rate.count, unit);
    else
        snprintf(rate, sizeof rate, "%llu/%llums", (unsigned long long)lim->rate.count,
                 (unsigned long long)lim->rate.period_ms);
    snprintf(buf, len, "%s burst %llu%s", rate, (unsigned long long)burst_of(lim),
             lim->shadow ? " shadow" : "");
}

/* Each worker offers 1/nthreads of every tenant's load, in 1 ms steps. */
static void *worker_main(void *arg)
{
    worker_t *w = arg;
    demo_t *d = w->demo;
    double credit[NTENANTS] = {0};
    double last = now_s();
    /* relaxed: a stop flag; nothing is published through it. */
    while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
        sleep_s(0.001);
        double now = now_s();
        double dt = now - last;
        last = now;
        for (int i = 0; i < NTENANTS; i++) {
            tenant_t *t = &d->tenants[i];
            credit[i] += t->offered_per_s / d->nthreads * dt;
            for (; credit[i] >= 1.0; credit[i] -= 1.0) {
                int rc = rl_check(d->rl, t->id, t->key, strlen(t->key), 1, NULL);
                if (rc < 0) {
                    int none = 0;
                    atomic_compare_exchange_strong(&d->error, &none, rc);
                    atomic_store(&d->stop, true);
                    return NULL;
                }
            }
        }
    }
    return NULL;
}

static int report(demo_t *d, int second, double elapsed)
{
    printf("\n[%2ds] %-9s %-22s %9s %7s %10s %9s\n", second, "key", "limit", "admitted",
           "denied", "would-deny", "vs limit");
    for (int i = 0; i < NTENANTS; i++) {
        tenant_t *t = &d->tenants[i];
        rl_limit_stats_t s;
        rl_limit_stats_init(&s);
        int rc = rl_limit_stats(d->rl, t->id, &s);
        if (rc < 0) {
            fprintf(stderr, "rl_limit_stats: %s\n", rl_strerror(rc));
            return rc;
        }
        uint64_t admitted = s.admitted - t->prev.admitted;
        uint64_t denied = s.denied - t->prev.denied;
        uint64_t would = s.shadow_denied - t->prev.shadow_denied;
        double pct = 100.0 * (double)admitted / (rate_per_s(&t->lim) * elapsed);
        char limit[96];
        format_limit(&t->lim, limit, sizeof limit);
        printf("      %-9s %-22s %9llu %7llu %10llu %8.0f%%\n", t->key, limit,
               (unsigned long long)admitted, (unsigned long long)denied,
               (unsigned long long)would, pct);
        t->prev = s;
    }
    fflush(stdout);
    return 0;
}

/*
 * admitted <= burst + rate x (elapsed + tick), for every key (shadow limits:
 * what they would have admitted). Per node the bucket is exact on the clock
 * it reads; a limit on the coarse clock sees time up to one tick early or
 * late against this program's stopwatch, hence the tick.
 */
static int check_bound(demo_t *d, double elapsed)
{
    struct timespec res = {0, 0};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    double tick = (double)res.tv_sec + (double)res.tv_nsec / 1e9;
    int ok = 1;
    printf("\nbound check over %.2f s: admitted <= burst + rate x (elapsed + %.0f ms tick)\n",
           elapsed, tick * 1e3);
    for (int i = 0; i < NTENANTS; i++) {
        tenant_t *t = &d->tenants[i];
        rl_limit_stats_t s;
        rl_limit_stats_init(&s);
        if (rl_limit_stats(d->rl, t->id, &s) < 0)
            return 0;
        uint64_t admitted = s.admitted - s.shadow_denied;
        double bound = (double)burst_of(&t->lim) + rate_per_s(&t->lim) * (elapsed + tick);
        int pass = (double)admitted <= bound;
        printf("      %-9s admitted %7llu  bound %9.1f  %s\n", t->key,
               (unsigned long long)admitted, bound, pass ? "ok" : "EXCEEDED");
        ok &= pass;
    }
    return ok;
}

/* What a 429 for tenant-a carries: check until denied, render the headers. */
static void show_headers(demo_t *d)
{
    tenant_t *t = &d->tenants[0];
    rl_decision_t dec;
    rl_decision_init(&dec);
    for (uint64_t i = 0; i <= burst_of(&t->lim); i++)
        if (rl_check(d->rl, t->id, t->key, strlen(t->key), 1, &dec) != RL_ALLOW)
            break;
    char buf[512];
    if (dec.allowed == RL_DENY && rl_headers(&dec, buf, sizeof buf) >= 0)
        printf("\na denied request for %s would answer 429 with:\n%s", t->key, buf);
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rl_demo [--seconds N (1..86400, default 5)] "
               "[--threads N (1..64, default 4)]\n");
}

int main(int argc, char **argv)
{
    unsigned seconds = 5, nthreads = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 1, 86400, &seconds) < 0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 1, 64, &nthreads) < 0) {
                usage(stderr);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }

    demo_t demo = {
        .tenants = {
            {.key = "tenant-a", .spec = "name=tenant-a rate=100/s burst=20 mode=local",
             .offered_per_s = 300},
            {.key = "tenant-b", .spec = "name=tenant-b rate=50/s mode=local",
             .offered_per_s = 120},
            {.key = "tenant-c", .spec = "name=tenant-c rate=600/m burst=30 mode=local",
             .offered_per_s = 40},
            {.key = "tenant-d", .spec = "name=tenant-d rate=50/s mode=local shadow=1",
             .offered_per_s = 80},
        },
    };
    demo_t *d = &demo;
    d->nthreads = nthreads;
    atomic_init(&d->stop, false);
    atomic_init(&d->error, 0);

    /* NULL config: a local-only instance, a complete single-node limiter. */
    int rc = rl_open(&d->rl, NULL);
    if (rc < 0) {
        fprintf(stderr, "rl_open: %s\n", rl_strerror(rc));
        return 1;
    }
    for (int i = 0; i < NTENANTS; i++) {
        tenant_t *t = &d->tenants[i];
        char err[128];
        rl_limit_t lim;
        if ((rc = rl_limit_parse(&lim, t->spec, err, sizeof err)) < 0) {
            fprintf(stderr, "rl_limit_parse(\"%s\"): %s\n", t->spec, err);
            rl_close(d->rl);
            return 1;
        }
        rl_limit_init(&t->lim); /* rl_limit_get needs t->lim.size */
        if ((t->id = rl_limit_add(d->rl, &lim)) < 0 ||
            (rc = rl_limit_get(d->rl, t->id, &t->lim)) < 0) {
            rc = t->id < 0 ? t->id : rc;
            fprintf(stderr, "rl_limit_add(%s): %s\n", t->key, rl_strerror(rc));
            rl_close(d->rl);
            return 1;
        }
        rl_limit_stats_init(&t->prev);
    }

    /* Signals go to the main thread only: workers start with them blocked
     * (they inherit the mask), then the main thread unblocks them. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);

    printf("libratelimit %s, local-only: %u threads, %u s (Ctrl-C stops)\n", rl_version(),
           nthreads, seconds);
    printf("per second: admitted, denied, would-deny (shadow limits never deny), and\n"
           "vs limit = admitted / the limit's rate (above 100%% while a burst drains)\n");
    worker_t workers[64];
    unsigned started = 0;
    double t0 = now_s();
    for (; started < nthreads; started++) {
        workers[started].demo = d;
        if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            atomic_store(&d->stop, true);
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);

    double last = t0;
    for (unsigned s = 1; s <= seconds && started == nthreads; s++) {
        /* Nap in short steps so Ctrl-C and worker errors end it quickly. */
        while (now_s() < t0 + s && !stop_requested && !atomic_load(&d->stop))
            sleep_s(0.05);
        if (stop_requested || atomic_load(&d->stop))
            break;
        double now = now_s();
        if (report(d, (int)s, now - last) < 0)
            break;
        last = now;
    }
    atomic_store(&d->stop, true);
    for (unsigned i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    double elapsed = now_s() - t0;

    int status = 0;
    if (stop_requested)
        printf("\ninterrupted\n");
    if (atomic_load(&d->error) != 0) {
        fprintf(stderr, "rl_check: %s\n", rl_strerror(atomic_load(&d->error)));
        status = 1;
    }
    if (started != nthreads)
        status = 1;
    if (!check_bound(d, elapsed))
        status = 1;
    show_headers(d);
    rl_close(d->rl);
    return status;
}
