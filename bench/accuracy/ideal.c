/* SPDX-License-Identifier: MIT */
/*
 * The yardstick: an ideal centralized limiter (one GCRA bucket that sees
 * every request of the fleet the moment it arrives, as a per-request
 * limiter with no latency would) and the figures of a strategy against it
 * on the same arrivals.
 *
 * Arrivals are counts per (node, ms); within a ms the drivers check node
 * after node in index order, and every strategy here is fed in that order.
 * Decisions are compared per fleet and per 100-ms bin (decisions()).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"

void acc_gcra_init(acc_gcra_t *g, double rate, double burst)
{
    g->t = rate > 0 ? 1000.0 / rate : INFINITY;
    g->tau = (burst < 1 ? 1 : burst) * g->t;
    g->tat = 0.0;
}

/* GCRA as the library's bucket (local/bucket.h): a charge moves TAT to
 * max(TAT, now) + T and is admitted while TAT - now <= tau. */
int acc_gcra_take(acc_gcra_t *g, double now_ms)
{
    if (!isfinite(g->t))
        return 0;
    double tat = (g->tat > now_ms ? g->tat : now_ms) + g->t;
    if (tat - now_ms > g->tau + 1e-9)
        return 0;
    g->tat = tat;
    return 1;
}

double acc_mean_live(const acc_scen_t *sc)
{
    double sum = 0.0;
    for (int i = 0; i < sc->nodes; i++) {
        uint64_t from = sc->join_ms[i], to = sc->death_ms[i];
        if (to > sc->duration_ms)
            to = sc->duration_ms;
        if (to > from)
            sum += (double)(to - from);
    }
    return sum / (double)sc->duration_ms;
}

/* Decisions that differ from the ideal's, counted per fleet and per bin
 * of BIN_MS: the limit is the fleet's, so which node a request came from
 * does not matter, and within a bin the requests are taken as
 * interchangeable. Node by node and ms by ms, two limiters that admit the
 * same number a second differ in most decisions (a request admitted one ms
 * earlier, or on another node, is one wrongly allowed and one wrongly
 * refused), which says nothing about the limit. */
#define BIN_MS 100u

static void decisions(const acc_scen_t *sc, const uint16_t *arr, const uint16_t *adm,
                      const uint16_t *ideal, acc_figs_t *f)
{
    uint64_t more = 0, less = 0, all = 0;
    for (uint64_t t0 = 0; t0 < sc->duration_ms; t0 += BIN_MS) {
        uint64_t a = 0, b = 0;
        for (int i = 0; i < sc->nodes; i++)
            for (uint64_t t = t0; t < t0 + BIN_MS && t < sc->duration_ms; t++) {
                size_t c = (size_t)i * sc->duration_ms + t;
                all += arr[c];
                a += adm[c];
                b += ideal[c];
            }
        more += a > b ? a - b : 0;
        less += b > a ? b - a : 0;
    }
    f->decisions = all;
    f->wrong_allow = all > 0 ? (double)more / (double)all : 0.0;
    f->wrong_refuse = all > 0 ? (double)less / (double)all : 0.0;
}

/* Fleet totals per ms, of arr or adm. */
static uint64_t *fleet_ms(const acc_scen_t *sc, const uint16_t *cells)
{
    uint64_t *ms = calloc(sc->duration_ms + 1, sizeof *ms);
    if (ms == NULL)
        return NULL;
    for (int i = 0; i < sc->nodes; i++)
        for (uint64_t t = 0; t < sc->duration_ms; t++)
            ms[t + 1] += cells[(size_t)i * sc->duration_ms + t];
    for (uint64_t t = 1; t <= sc->duration_ms; t++)
        ms[t] += ms[t - 1]; /* prefix sums: a window is two reads */
    return ms;
}

#define STEP_MS 10u

/* The rate figures over sliding 1-s windows every 10 ms. */
static void windows(const acc_scen_t *sc, const uint64_t *off, const uint64_t *adm,
                    acc_figs_t *f)
{
    double limit = (double)sc->rate * ACC_WINDOW_MS / 1000.0, err = 0.0;
    uint64_t n = 0, under = 0;
    f->worst = 0.0;
    for (uint64_t t = 0; t + ACC_WINDOW_MS <= sc->duration_ms; t += STEP_MS) {
        double a = (double)(adm[t + ACC_WINDOW_MS] - adm[t]);
        double o = (double)(off[t + ACC_WINDOW_MS] - off[t]);
        if (a / limit > f->worst)
            f->worst = a / limit;
        if (o <= limit)
            continue;
        n++;
        err += fabs(a - limit) / limit;
        under += a < 0.9 * limit;
    }
    f->windows = n;
    f->rate_err = n > 0 ? err / (double)n : 0.0;
    f->under90 = n > 0 ? (double)under / (double)n : 0.0;
}

void acc_figures(const acc_scen_t *sc, const uint16_t *arr, const uint16_t *adm,
                 const uint16_t *ideal, uint64_t ops, acc_figs_t *f)
{
    memset(f, 0, sizeof *f);
    decisions(sc, arr, adm, ideal, f);
    uint64_t *off = fleet_ms(sc, arr), *got = fleet_ms(sc, adm);
    if (off != NULL && got != NULL)
        windows(sc, off, got, f);
    free(off);
    free(got);
    double live = acc_mean_live(sc), secs = (double)sc->duration_ms / 1000.0;
    f->ops_node_s = live > 0 ? (double)ops / secs / live : 0.0;
}
