/* SPDX-License-Identifier: MIT */
/*
 * The retry herd: 100 clients refused at once by one bucket, and what they
 * do next, in a deterministic simulation (simulated time through the clock
 * hook; nothing sleeps). The server is a local instance with one limit,
 * rate=20/s burst=20 on one key, drained at t = 0, answering each attempt
 * with rl_check and rl_headers; a client reads the hint back with
 * rl_retry_hint. Strategies, side by side in one run:
 *   fixed    come back exactly when Retry-After says (no jitter);
 *   jitter   full jitter from the client retry helper ignoring the hint;
 *   helper   the helper as documented: the hint as a floor plus full
 *            jitter, the retry budget on (each client has 10 accepted
 *            requests in its window before the herd).
 * Reported, medians over seeds: the peak of retries per 100 ms, the time
 * until the last client is admitted, the retries sent, how many of them
 * were refused, and clients that gave up (budget or max_retries). Then
 * the budget's own scene (run_outage).
 *   rl_bench_retryherd [seeds]   (default 21)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

enum { CLIENTS = 100, BINS = 20000, MAX_RETRIES = 30 };
enum { FIXED, JITTER, HELPER, STRATEGIES };
static const char *const names[STRATEGIES] = {"fixed Retry-After", "full jitter, no hint",
                                              "helper (hint + jitter, budget)"};

typedef struct sim_clock {
    uint64_t ms;
} sim_clock_t;

static uint64_t clock_hook(void *ud, int32_t source)
{
    (void)source;
    return ((const sim_clock_t *)ud)->ms * 1000000u + 1000000000u;
}

typedef struct result {
    double peak, drain_ms, retries, refused, gave_up;
} result_t;

typedef struct client {
    uint64_t next_ms;
    uint32_t retry;
    int done; /* 1 admitted, 2 gave up */
    rl_retry_t *r;
} client_t;

/* One attempt against the server: RL_ALLOW, or RL_DENY with its hint. */
static int attempt(rl_t *rl, int id, int64_t *hint_ms)
{
    rl_decision_t d;
    rl_decision_init(&d);
    int rc = rl_check(rl, id, "tenant", 6, 1, &d);
    if (rc != RL_DENY)
        return rc;
    char buf[512], ra[64] = "";
    rl_headers(&d, buf, sizeof buf);
    const char *p = strstr(buf, "Retry-After: ");
    if (p != NULL)
        sscanf(p + 13, "%63[^\r]", ra);
    rl_retry_hint(ra, NULL, 0, hint_ms);
    return RL_DENY;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "rl_bench_retryherd: %s: %s\n", what, rl_strerror(rc));
    exit(1);
}

static result_t run(int strategy, uint64_t seed)
{
    static unsigned bins[BINS];
    memset(bins, 0, sizeof bins);
    sim_clock_t clk = {0};
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.clock = clock_hook;
    cfg.clock_ud = &clk;
    rl_t *rl;
    int rc = rl_open(&rl, &cfg);
    if (rc != 0)
        die("rl_open", rc);
    rl_limit_t lim;
    char err[128];
    rl_limit_parse(&lim, "name=api rate=20/s burst=20 mode=local", err, sizeof err);
    int id = rl_limit_add(rl, &lim);
    if (id < 0)
        die("rl_limit_add", id);
    const uint64_t t0 = 10000; /* the clients' history lies before it */
    clk.ms = t0;
    for (int i = 0; i < 20; i++) /* the burst is spent: the herd meets an empty bucket */
        rl_check(rl, id, "tenant", 6, 1, NULL);
    client_t c[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        rl_retry_config_t rc_cfg;
        rl_retry_config_init(&rc_cfg);
        rc_cfg.seed = seed * 1000003u + (uint64_t)i + 1;
        rc_cfg.max_retries = MAX_RETRIES;
        rc_cfg.budget_k_milli = strategy == HELPER ? 2000 : 0;
        if ((rc = rl_retry_new(&c[i].r, &rc_cfg, err, sizeof err)) != 0)
            die(err, rc);
        for (int k = 0; k < 10; k++) { /* a healthy client until now */
            rl_retry_admit(c[i].r, t0 - 1000);
            rl_retry_record(c[i].r, t0 - 1000, RL_RETRY_OK);
        }
        c[i].next_ms = t0;
        c[i].retry = 0;
        c[i].done = 0;
    }
    result_t res = {0};
    uint64_t last_admit = t0;
    for (;;) {
        int who = -1;
        for (int i = 0; i < CLIENTS; i++)
            if (!c[i].done && (who < 0 || c[i].next_ms < c[who].next_ms))
                who = i;
        if (who < 0)
            break;
        client_t *cl = &c[who];
        clk.ms = cl->next_ms;
        int first = cl->next_ms == t0 && cl->retry == 0;
        if (strategy == HELPER && rl_retry_admit(cl->r, clk.ms) != RL_ALLOW) {
            cl->done = 2; /* rejected locally: the budget says the server is overloaded */
            res.gave_up++;
            continue;
        }
        if (!first) {
            res.retries++;
            uint64_t bin = (clk.ms - t0) / 100;
            if (bin < BINS)
                bins[bin]++;
        }
        int64_t hint = -1;
        if (attempt(rl, id, &hint) == RL_ALLOW) {
            rl_retry_record(cl->r, clk.ms, RL_RETRY_OK);
            cl->done = 1;
            last_admit = clk.ms;
            continue;
        }
        rl_retry_record(cl->r, clk.ms, RL_RETRY_THROTTLED);
        res.refused += !first;
        uint64_t delay = 0;
        if (strategy == FIXED) {
            delay = hint < 0 ? 1000 : (uint64_t)hint;
        } else if (rl_retry_delay(cl->r, cl->retry, RL_RETRY_THROTTLED,
                                  strategy == HELPER ? hint : -1, &delay) != RL_ALLOW) {
            cl->done = 2;
            res.gave_up++;
            continue;
        }
        cl->retry++;
        if (strategy == FIXED && cl->retry > MAX_RETRIES) {
            cl->done = 2;
            res.gave_up++;
            continue;
        }
        cl->next_ms = clk.ms + delay;
    }
    for (int i = 0; i < BINS; i++)
        res.peak = bins[i] > res.peak ? bins[i] : res.peak;
    res.drain_ms = (double)(last_admit - t0);
    for (int i = 0; i < CLIENTS; i++)
        rl_retry_free(c[i].r);
    rl_close(rl);
    return res;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The budget's scene: a server that refuses everything (429, Retry-After:
 * 1) for OUTAGE_MS, then admits everything. Each client starts a new call
 * every second, each call retried by the helper (5 retries). Reported: the
 * attempts that reach the server per second during the outage, and the
 * calls started in the RECOVERY_MS after it that fail without an attempt
 * reaching the server (the budget's price: it forgets slowly).
 */
enum { OUTAGE_MS = 30000, RECOVERY_MS = 10000, END_MS = OUTAGE_MS + RECOVERY_MS,
       PENDING = 64 };

typedef struct call {
    uint64_t at;    /* next attempt */
    uint32_t retry; /* 0: the first attempt */
    uint64_t born;
    int sent;       /* an attempt reached the server */
} call_t;

typedef struct outage {
    double outage_rate, lost_after;
} outage_t;

static outage_t run_outage(int budget, uint32_t window_ms, uint64_t seed)
{
    rl_retry_t *cl[CLIENTS];
    call_t calls[CLIENTS][PENDING];
    int ncalls[CLIENTS];
    uint64_t next_new[CLIENTS];
    char err[128];
    for (int i = 0; i < CLIENTS; i++) {
        rl_retry_config_t c;
        rl_retry_config_init(&c);
        c.seed = seed * 1000003u + (uint64_t)i + 1;
        c.budget_k_milli = budget ? 2000 : 0;
        c.budget_window_ms = window_ms;
        int rc = rl_retry_new(&cl[i], &c, err, sizeof err);
        if (rc != 0)
            die(err, rc);
        ncalls[i] = 0;
        next_new[i] = (uint64_t)i * 10; /* the clients' calls are spread over the second */
    }
    uint64_t to_server = 0, lost = 0;
    for (;;) {
        int who = -1, idx = -1;
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < CLIENTS; i++) {
            if (next_new[i] < best)
                best = next_new[i], who = i, idx = -1;
            for (int k = 0; k < ncalls[i]; k++)
                if (calls[i][k].at < best)
                    best = calls[i][k].at, who = i, idx = k;
        }
        if (best >= END_MS)
            break;
        if (idx < 0) { /* a new call */
            if (ncalls[who] < PENDING)
                calls[who][ncalls[who]++] = (call_t){best, 0, best, 0};
            next_new[who] += 1000;
            continue;
        }
        call_t *c = &calls[who][idx];
        int done = 0;
        if (rl_retry_admit(cl[who], best) != RL_ALLOW) {
            done = 1; /* failed locally */
            lost += !c->sent && c->born >= OUTAGE_MS;
        } else if (best >= OUTAGE_MS) {
            rl_retry_record(cl[who], best, RL_RETRY_OK);
            done = 1;
        } else {
            to_server++;
            c->sent = 1;
            rl_retry_record(cl[who], best, RL_RETRY_THROTTLED);
            uint64_t delay;
            if (rl_retry_delay(cl[who], c->retry, RL_RETRY_THROTTLED, 1000, &delay) != RL_ALLOW)
                done = 1;
            c->retry++;
            c->at = best + delay;
        }
        if (done)
            calls[who][idx] = calls[who][--ncalls[who]];
    }
    for (int i = 0; i < CLIENTS; i++)
        rl_retry_free(cl[i]);
    return (outage_t){(double)to_server / (OUTAGE_MS / 1000), (double)lost};
}

int main(int argc, char **argv)
{
    int seeds = argc > 1 ? atoi(argv[1]) : 21;
    if (seeds < 1 || seeds > 1000) {
        fprintf(stderr, "usage: rl_bench_retryherd [seeds 1..1000]\n");
        return 2;
    }
    printf("retry herd: %d clients refused at once by rate=20/s burst=20 (drained), "
           "libratelimit %s, medians over %d seeds\n",
           CLIENTS, rl_version(), seeds);
    printf("%-32s %14s %12s %10s %10s %9s\n", "strategy", "peak/100ms", "drain ms", "retries",
           "refused", "gave up");
    double *v[5];
    for (int k = 0; k < 5; k++)
        v[k] = calloc((size_t)seeds, sizeof(double));
    double base_peak = 0;
    for (int s = 0; s < STRATEGIES; s++) {
        for (int i = 0; i < seeds; i++) {
            result_t r = run(s, (uint64_t)i + 1);
            v[0][i] = r.peak;
            v[1][i] = r.drain_ms;
            v[2][i] = r.retries;
            v[3][i] = r.refused;
            v[4][i] = r.gave_up;
        }
        double m[5];
        for (int k = 0; k < 5; k++)
            m[k] = median(v[k], seeds);
        if (s == FIXED)
            base_peak = m[0];
        printf("%-32s %8.0f (%3.0f%%) %12.0f %10.0f %10.0f %9.0f\n", names[s], m[0],
               base_peak > 0 ? 100.0 * m[0] / base_peak : 0, m[1], m[2], m[3], m[4]);
    }
    printf("\noutage: every attempt refused (Retry-After: 1) for %d s, then all admitted; "
           "%d clients starting a call a second, 5 retries each\n",
           OUTAGE_MS / 1000, CLIENTS);
    printf("%-32s %22s %26s\n", "retry budget", "attempts/s in outage",
           "calls failed locally after");
    static const char *const rows[3] = {"off", "on (K = 2, 120 s window)",
                                        "on (K = 2, 20 s window)"};
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < seeds; i++) {
            outage_t o = run_outage(b > 0, b == 2 ? 20000 : 120000, (uint64_t)i + 1);
            v[0][i] = o.outage_rate;
            v[1][i] = o.lost_after;
        }
        double rate = median(v[0], seeds), lost = median(v[1], seeds);
        printf("%-32s %22.0f %15.0f of %d\n", rows[b], rate, lost,
               CLIENTS * RECOVERY_MS / 1000);
    }
    for (int k = 0; k < 5; k++)
        free(v[k]);
    return 0;
}
