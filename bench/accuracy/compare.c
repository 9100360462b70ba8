/* SPDX-License-Identifier: MIT */
/*
 * Our run beside the ideal and the peers' models, on the same arrivals:
 * the figures of every strategy in one table (ideal.c computes them,
 * peers.c holds the models).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"

const char *acc_policy_name(const acc_scen_t *sc)
{
    return sc->tiered ? "ours: tiered" : sc->hot_every > 0 ? "ours: hot (every 4)" : "ours: global";
}

static void print_head(void)
{
    printf("  %-22s %9s %9s %8s %8s %8s %12s\n", "strategy (same arrivals)", "wr.allow",
           "wr.refuse", "rate err", "worst 1s", "<90%", "ops/s/node");
}

static void print_row(const acc_row_t *r, const char *unit)
{
    printf("  %-22s %8.3f%% %8.3f%% %7.2f%% %7.1f%% %7.1f%% %9.1f %s\n", r->strategy,
           100.0 * r->f.wrong_allow, 100.0 * r->f.wrong_refuse, 100.0 * r->f.rate_err,
           100.0 * r->f.worst, 100.0 * r->f.under90, r->f.ops_node_s, unit);
}

static void add(acc_row_t *rows, int *n, const char *name, const acc_figs_t *f)
{
    if (*n >= ACC_ROWS_MAX)
        return;
    snprintf(rows[*n].strategy, sizeof rows[*n].strategy, "%s", name);
    rows[*n].f = *f;
    rows[*n].of_bound = 0.0;
    ++*n;
}

int acc_compare(const acc_scen_t *sc, const acc_result_t *res, const char *ours,
                acc_row_t *rows, int *nrows, int print)
{
    size_t cells = (size_t)sc->nodes * (size_t)sc->duration_ms;
    uint16_t *ideal = calloc(cells, sizeof *ideal), *adm = calloc(cells, sizeof *adm);
    acc_row_t local[ACC_ROWS_MAX];
    int nlocal = 0;
    if (rows == NULL) {
        rows = local;
        nrows = &nlocal;
    }
    if (ideal == NULL || adm == NULL) {
        free(ideal);
        free(adm);
        return -1;
    }
    acc_cost_t cost = {.unit = "Redis"};
    acc_strategies[0].run(sc, res->arr_nt, ideal, &cost);
    acc_figs_t f;
    acc_figures(sc, res->arr_nt, res->adm_nt, ideal, res->calls + res->heartbeats + res->redis_checks,
                &f);
    if (print) {
        printf("  -- against an ideal centralized limiter fed the same arrivals (%.0f over-limit "
               "1-s windows)\n",
               (double)f.windows);
        print_head();
    }
    add(rows, nrows, ours, &f);
    if (print)
        print_row(&rows[*nrows - 1], "Redis");
    for (int s = 0; acc_strategies[s].name != NULL; s++) {
        acc_cost_t c = {.unit = "Redis"};
        acc_strategies[s].run(sc, res->arr_nt, adm, &c);
        acc_figures(sc, res->arr_nt, adm, ideal, c.ops, &f);
        add(rows, nrows, acc_strategies[s].name, &f);
        if (print)
            print_row(&rows[*nrows - 1], c.unit);
    }
    free(ideal);
    free(adm);
    return 0;
}
