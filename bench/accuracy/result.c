/* SPDX-License-Identifier: MIT */
/*
 * What a run recorded, the overshoot bound, and the checks of every window
 * and every round against it. The bound's derivation from the code is in
 * README.md ("The overshoot bound"); acc_bound_init is its only
 * implementation.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"

int acc_result_init(acc_result_t *r, const acc_scen_t *sc)
{
    memset(r, 0, sizeof *r);
    r->duration_ms = sc->duration_ms;
    r->interval_ms = sc->interval_ms;
    r->rounds = (uint32_t)(sc->duration_ms / sc->interval_ms);
    r->nodes = sc->nodes;
    size_t cells = (size_t)r->rounds * (size_t)sc->nodes;
    r->adm_ms = calloc(sc->duration_ms, sizeof *r->adm_ms);
    r->node_adm = calloc(cells, sizeof *r->node_adm);
    r->node_off = calloc(cells, sizeof *r->node_off);
    r->sum_q = calloc(r->rounds, sizeof *r->sum_q);
    r->sum_b = calloc(r->rounds, sizeof *r->sum_b);
    size_t nt = (size_t)sc->nodes * (size_t)sc->duration_ms;
    r->arr_nt = calloc(nt, sizeof *r->arr_nt);
    r->adm_nt = calloc(nt, sizeof *r->adm_nt);
    if (r->adm_ms == NULL || r->node_adm == NULL || r->node_off == NULL || r->sum_q == NULL ||
        r->sum_b == NULL || r->arr_nt == NULL || r->adm_nt == NULL) {
        acc_result_free(r);
        return -1;
    }
    return 0;
}

void acc_result_free(acc_result_t *r)
{
    free(r->adm_ms);
    free(r->node_adm);
    free(r->node_off);
    free(r->sum_q);
    free(r->sum_b);
    free(r->step_ms);
    free(r->arr_nt);
    free(r->adm_nt);
    memset(r, 0, sizeof *r);
}

void acc_result_step(acc_result_t *r, double ms)
{
    if (r->nsteps == r->step_cap) {
        size_t cap = r->step_cap ? r->step_cap * 2 : 1024;
        double *p = realloc(r->step_ms, cap * sizeof *p);
        if (p == NULL)
            return; /* a statistic: losing samples is not worth failing */
        r->step_ms = p;
        r->step_cap = cap;
    }
    r->step_ms[r->nsteps++] = ms;
}

uint64_t acc_all_nodes(int n)
{
    return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
}

static uint64_t round_sum(const uint32_t *cells, const acc_result_t *r, uint32_t round,
                          uint64_t mask)
{
    uint64_t s = 0;
    for (int i = 0; i < r->nodes; i++)
        if (mask >> i & 1)
            s += cells[(size_t)round * (size_t)r->nodes + (size_t)i];
    return s;
}

uint64_t acc_round_adm(const acc_result_t *r, uint32_t round, uint64_t mask)
{
    return round_sum(r->node_adm, r, round, mask);
}

uint64_t acc_round_off(const acc_result_t *r, uint32_t round, uint64_t mask)
{
    return round_sum(r->node_off, r, round, mask);
}

/* ------------------------------------------------------------- the bound */

void acc_bound_init(acc_bound_t *b, const acc_scen_t *sc)
{
    double n = sc->nodes, x = sc->expected, rate = (double)sc->rate;
    double burst = (double)sc->burst, round = rate * sc->interval_ms / 1000.0;
    double presync_burst = ceil(burst / x);
    b->rate = rate;
    b->burst = burst;
    /* (a) Until its first sync a node runs at rate/X with ceil(burst/X)
     * tokens: n such buckets hold n*ceil(B/X) tokens (B and more when X
     * does not divide B or n > X) and refill at n/X of the rate for at
     * most one round (a key's first sync comes at the next round). */
    b->e_presync = fmax(0.0, n * presync_burst - burst) + fmax(0.0, n - x) * round / x;
    /* (b) Shares of a key are computed one node at a time: for one round a
     * node may hold an increase whose matching decrease another node has
     * not applied yet. At most one round at the whole rate. */
    b->e_moves = round;
    /* A hot key of a hot_policy=local limit keeps its share up to
     * hot_every rounds: a move is undone within that many rounds. */
    if (sc->hot_every > 1)
        b->e_moves = round * sc->hot_every;
    /* (c) Sum of local bursts <= B per snapshot, but a node whose new lease
     * is larger gets the difference at once while the node losing it may
     * still hold its tokens for a round: at most one more burst. */
    b->e_lease = burst;
    b->cut_rate = 0.0;
    b->e_cut = 0.0;
    b->e = b->e_presync + b->e_moves + b->e_lease;
}

/* Default degraded parameters (rate / X, ceil(burst / X) tokens) and the
 * default degrade_ramp_ms (1000): the scenarios set neither. */
#define ACC_RAMP_MS 1000.0

void acc_bound_cut(acc_bound_t *b, const acc_scen_t *sc, const acc_result_t *res)
{
    if (sc->cut_node < 0)
        return;
    double rate = (double)sc->rate, x = sc->expected;
    double d = rate / x, b_d = ceil((double)sc->burst / x);
    /* Its last good share, read at the cut; not known in real time: the
     * whole limit, the worst case. */
    double q = res->cut_q >= 0.0 ? res->cut_q : 1.0;
    double b_p = res->cut_q >= 0.0 ? res->cut_b : (double)sc->burst;
    b->cut_rate = d;
    b->e_cut = fmax(b_p, b_d) + fmax(0.0, q * rate - d) * ACC_RAMP_MS / 1000.0 / 2.0;
    b->e += b->e_cut;
}

double acc_bound_at(const acc_bound_t *b, double window_ms)
{
    return (b->rate + b->cut_rate) * window_ms / 1000.0 + b->burst + b->e;
}

/* ------------------------------------------------------------- windows */

static uint64_t *prefix_sums(const uint32_t *adm, uint64_t n)
{
    uint64_t *p = malloc((size_t)(n + 1) * sizeof *p);
    if (p == NULL)
        return NULL;
    p[0] = 0;
    for (uint64_t i = 0; i < n; i++)
        p[i + 1] = p[i] + adm[i];
    return p;
}

void acc_check_windows(const uint32_t *adm_ms, uint64_t n_ms, uint64_t win_ms,
                       uint32_t interval_ms, const acc_bound_t *b, acc_windows_t *w)
{
    memset(w, 0, sizeof *w);
    uint64_t *p = prefix_sums(adm_ms, n_ms);
    if (p == NULL)
        return;
    double wb = acc_bound_at(b, (double)win_ms), rb = acc_bound_at(b, interval_ms);
    /* Every window of the run, including the first (cold start) ones. A
     * run shorter than a window is checked as one short window. */
    uint64_t win = n_ms < win_ms ? n_ms : win_ms;
    for (uint64_t t = 0; t + win <= n_ms; t++) {
        uint64_t s = p[t + win] - p[t];
        double ratio = (double)s / wb;
        if (ratio > w->worst || t == 0) {
            w->worst = ratio;
            w->worst_at = t;
            w->worst_adm = s;
        }
        w->over += (double)s > wb;
    }
    for (uint64_t t = 0; t + interval_ms <= n_ms; t += interval_ms) {
        uint64_t s = p[t + interval_ms] - p[t];
        double ratio = (double)s / rb;
        if (ratio > w->round_worst || t == 0) {
            w->round_worst = ratio;
            w->round_worst_at = (uint32_t)(t / interval_ms);
        }
        w->rounds_over += (double)s > rb;
    }
    free(p);
}

void acc_window_range(const uint32_t *adm_ms, uint64_t n_ms, uint64_t win_ms, uint64_t from,
                      uint64_t to, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    uint64_t s = 0;
    for (uint64_t t = from; t < from + win_ms && t < n_ms; t++)
        s += adm_ms[t];
    for (uint64_t t = from; t + win_ms <= n_ms && t <= to; t++) {
        if (t > from) /* in 64 bits: the difference of two counts may be negative */
            s = s + (uint64_t)adm_ms[t + win_ms - 1] - (uint64_t)adm_ms[t - 1];
        *lo = s < *lo ? s : *lo;
        *hi = s > *hi ? s : *hi;
    }
    if (*lo == UINT64_MAX)
        *lo = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double acc_percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p / 100.0 * (double)n);
    return v[i == 0 ? 0 : i - 1];
}

/* ------------------------------------------------------------- verdicts */

void acc_verdict(acc_verdicts_t *vs, const char *scen, int gated, int pass, const char *target,
                 const char *fmt, ...)
{
    if (vs->n >= (int)(sizeof vs->v / sizeof vs->v[0])) {
        vs->dropped++; /* final_summary fails the run: never a silent pass */
        return;
    }
    acc_verdict_t *v = &vs->v[vs->n++];
    snprintf(v->scenario, sizeof v->scenario, "%s", scen);
    snprintf(v->target, sizeof v->target, "%s", target);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->measured, sizeof v->measured, fmt, ap);
    va_end(ap);
    v->gated = gated;
    v->pass = pass;
}

void acc_judge_bound(const acc_scen_t *sc, const acc_result_t *res, int gated,
                     acc_verdicts_t *v)
{
    acc_bound_t b;
    acc_bound_init(&b, sc);
    acc_bound_cut(&b, sc, res);
    acc_windows_t w;
    acc_check_windows(res->adm_ms, res->duration_ms, ACC_WINDOW_MS, res->interval_ms, &b, &w);
    /* Past the cold start: windows starting 2 s in, when the run is long
     * enough to have them. */
    uint64_t lo, warm = 0;
    if (res->duration_ms >= 2000 + ACC_WINDOW_MS)
        acc_window_range(res->adm_ms, res->duration_ms, ACC_WINDOW_MS, 2000, res->duration_ms,
                         &lo, &warm);
    acc_verdict(v, sc->name, gated, w.over == 0, "every sliding 1-s window <= bound",
                "worst %" PRIu64 " at %" PRIu64 " ms = %.1f%% of bound %.0f (%.1f%% of limit); "
                "%" PRIu64 " windows over; from 2 s on worst %.1f%% of bound",
                w.worst_adm, w.worst_at, 100.0 * w.worst, acc_bound_at(&b, ACC_WINDOW_MS),
                100.0 * (double)w.worst_adm / (double)sc->rate, w.over,
                100.0 * (double)warm / acc_bound_at(&b, ACC_WINDOW_MS));
    acc_verdict(v, sc->name, gated, w.rounds_over == 0, "every round <= bound",
                "worst round %u = %.1f%% of bound %.0f; %" PRIu64 " rounds over",
                w.round_worst_at, 100.0 * w.round_worst, acc_bound_at(&b, sc->interval_ms),
                w.rounds_over);
    if (res->duration_ms < ACC_LONG_WINDOW_MS)
        return; /* no 10-s window in the run */
    acc_check_windows(res->adm_ms, res->duration_ms, ACC_LONG_WINDOW_MS, res->interval_ms, &b,
                      &w);
    acc_verdict(v, sc->name, gated, w.over == 0, "every sliding 10-s window <= bound",
                "worst %" PRIu64 " at %" PRIu64 " ms = %.1f%% of bound %.0f (%.1f%% of 10 s "
                "of the limit); %" PRIu64 " windows over",
                w.worst_adm, w.worst_at, 100.0 * w.worst,
                acc_bound_at(&b, ACC_LONG_WINDOW_MS),
                100.0 * (double)w.worst_adm / (10.0 * (double)sc->rate), w.over);
}
