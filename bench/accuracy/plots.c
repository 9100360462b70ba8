/* SPDX-License-Identifier: MIT */
/*
 * The strategies over time: each one's sliding 1-s admitted count on the
 * same arrivals (ours, the ideal, the peers' models), the offered load,
 * the limit, our bound and the scenario's event, as a CSV and a gnuplot
 * chart. Virtual mode only (the arrivals are recorded there).
 */
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "acc.h"
#include "redis_harness.h"

extern char **environ;

static int gnuplot(const char *script)
{
    char *argv[] = {(char *)"gnuplot", (char *)script, NULL};
    pid_t pid;
    int status;
    if (posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ) != 0 ||
        waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

#define MAX_GROUPS 4
#define MAX_SERIES (ACC_ROWS_MAX + 2 + MAX_GROUPS)

/* Fleet totals per ms of a [node * ms + t] array. */
static void fleet(const acc_scen_t *sc, const uint16_t *cells, uint32_t *out)
{
    memset(out, 0, sc->duration_ms * sizeof *out);
    for (int i = 0; i < sc->nodes; i++)
        for (uint64_t t = 0; t < sc->duration_ms; t++)
            out[t] += cells[(size_t)i * sc->duration_ms + t];
}

typedef struct series {
    const char *name[MAX_SERIES];
    char label[MAX_GROUPS][64];
    uint32_t *ms[MAX_SERIES];
    int n;
} series_t;

static int add(series_t *s, const char *name, const acc_scen_t *sc, const uint16_t *cells)
{
    uint32_t *ms = malloc(sc->duration_ms * sizeof *ms);
    if (ms == NULL || s->n >= MAX_SERIES) {
        free(ms);
        return -1;
    }
    fleet(sc, cells, ms);
    s->name[s->n] = name;
    s->ms[s->n++] = ms;
    return 0;
}

static void write_csv(FILE *f, const acc_scen_t *sc, const series_t *s, double bound)
{
    fprintf(f, "t_end_ms,limit,bound");
    for (int k = 0; k < s->n; k++)
        fprintf(f, ",%s", s->name[k]);
    fprintf(f, "\n");
    uint64_t sum[MAX_SERIES] = {0};
    for (uint64_t t = 0; t < sc->duration_ms; t++) {
        for (int k = 0; k < s->n; k++) {
            sum[k] += s->ms[k][t];
            if (t >= ACC_WINDOW_MS)
                sum[k] -= s->ms[k][t - ACC_WINDOW_MS];
        }
        if ((t + 1) % 10 != 0 || t + 1 < ACC_WINDOW_MS)
            continue;
        fprintf(f, "%" PRIu64 ",%" PRIu64 ",%.1f", t + 1, sc->rate, bound);
        for (int k = 0; k < s->n; k++)
            fprintf(f, ",%" PRIu64, sum[k]);
        fprintf(f, "\n");
    }
}

/* A node's part in the scenario: whether it is offered load at the start
 * and at the end, whether it joins late, whether it leaves. */
static unsigned role(const acc_scen_t *sc, int i)
{
    uint64_t first = sc->join_ms[i], last = sc->duration_ms - 1;
    if (sc->death_ms[i] != ACC_NEVER && sc->death_ms[i] > 0)
        last = sc->death_ms[i] - 1;
    return (sc->offered(sc, i, first) > 0) | (sc->offered(sc, i, last) > 0) << 1 |
           (sc->join_ms[i] > 0) << 2 | (sc->death_ms[i] != ACC_NEVER) << 3;
}

static void role_label(unsigned r, int count, char *buf, size_t len)
{
    snprintf(buf, len, "ours: %d node%s %s%s%s", count, count == 1 ? "" : "s",
             r & 4 ? "joining " : "", r & 8 ? "leaving " : "",
             (r & 3) == 3 ? "loaded" : (r & 3) == 1 ? "loaded then idle"
                                    : (r & 3) == 2 ? "idle then loaded" : "idle");
}

/* Our fleet's admitted count per group of nodes with the same part, when
 * the scenario has 2 to MAX_GROUPS such groups. */
static int add_groups(series_t *s, const acc_scen_t *sc, const uint16_t *adm)
{
    unsigned roles[MAX_GROUPS];
    int count[MAX_GROUPS] = {0}, ng = 0;
    for (int i = 0; i < sc->nodes; i++) {
        unsigned r = role(sc, i);
        int g = 0;
        while (g < ng && roles[g] != r)
            g++;
        if (g == ng) {
            if (ng == MAX_GROUPS)
                return 0; /* too many parts to draw: no group lines */
            roles[ng++] = r;
        }
        count[g]++;
    }
    if (ng < 2)
        return 0;
    size_t cells = (size_t)sc->nodes * sc->duration_ms;
    uint16_t *part = malloc(cells * sizeof *part);
    if (part == NULL)
        return -1;
    int rc = 0;
    for (int g = 0; g < ng && rc == 0; g++) {
        for (int i = 0; i < sc->nodes; i++) {
            uint16_t *dst = part + (size_t)i * sc->duration_ms;
            if (role(sc, i) == roles[g])
                memcpy(dst, adm + (size_t)i * sc->duration_ms, sc->duration_ms * sizeof *dst);
            else
                memset(dst, 0, sc->duration_ms * sizeof *dst);
        }
        role_label(roles[g], count[g], s->label[g], sizeof s->label[g]);
        rc = add(s, s->label[g], sc, part);
    }
    free(part);
    return rc;
}

/* Lines for the offered load (thin), the limit, the bound, each strategy;
 * the event (shift, death, flush, cut) as a vertical line. */
static int write_gp(const char *gp, const char *csv, const char *png, const acc_scen_t *sc,
                    const series_t *s)
{
    FILE *f = fopen(gp, "w");
    if (f == NULL)
        return -1;
    fprintf(f,
            "set terminal pngcairo size 1100,550\nset output '%s'\n"
            "set datafile separator ','\nset key outside right top\n"
            "set title \"%s: admitted in the sliding 1-s window, same arrivals\"\n"
            "set xlabel 'time (s), window end'\nset ylabel 'requests per 1-s window'\n"
            "set yrange [0:%g]\n",
            png, sc->name, 3.2 * (double)sc->rate);
    double ev[2 * ACC_MAX_NODES + 1];
    int nev = 0;
    if (sc->event_ms > 0)
        ev[nev++] = (double)sc->event_ms / 1000.0;
    for (int i = 0; i < sc->nodes && nev + 2 <= 2 * ACC_MAX_NODES; i++) {
        if (sc->join_ms[i] > 0)
            ev[nev++] = (double)sc->join_ms[i] / 1000.0;
        if (sc->death_ms[i] != ACC_NEVER)
            ev[nev++] = (double)sc->death_ms[i] / 1000.0;
    }
    for (int k = 0; k < nev; k++) /* the events: a shift, a join, a death, a cut */
        fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 4 lc 'gray'\n", ev[k],
                ev[k]);
    fprintf(f, "plot '%s' skip 1 using ($1/1000):2 with lines dt 2 lc 'black' title 'limit', "
               "'' skip 1 using ($1/1000):3 with lines dt 3 lc 'black' title 'our bound'",
            csv);
    for (int k = 0; k < s->n; k++)
        fprintf(f, ", '' skip 1 using ($1/1000):%d with lines lw %d %stitle '%s'", k + 4,
                k == 1 ? 3 : 1, strncmp(s->name[k], "ours: ", 6) == 0 && k > 1 ? "dt 5 " : "",
                s->name[k]);
    fprintf(f, "\n");
    return fclose(f);
}

int acc_plot_strategies(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *res)
{
    if (o->csv_dir == NULL || o->mode != ACC_VIRTUAL)
        return 0;
    size_t cells = (size_t)sc->nodes * (size_t)sc->duration_ms;
    uint16_t *adm = malloc(cells * sizeof *adm);
    series_t s;
    memset(&s, 0, sizeof s);
    int rc = adm == NULL ? -1 : 0;
    rc |= add(&s, "offered", sc, res->arr_nt);
    rc |= add(&s, acc_policy_name(sc), sc, res->adm_nt);
    for (int k = 0; rc == 0 && acc_strategies[k].name != NULL; k++) {
        acc_cost_t c = {.unit = "Redis"};
        acc_strategies[k].run(sc, res->arr_nt, adm, &c);
        rc |= add(&s, acc_strategies[k].name, sc, adm);
    }
    if (rc == 0)
        rc = add_groups(&s, sc, res->adm_nt);
    char csv[1100], gp[1100], png[1100];
    snprintf(csv, sizeof csv, "%s/%s-virtual-strategies.csv", o->csv_dir, sc->name);
    snprintf(gp, sizeof gp, "%s/%s-virtual-strategies.gp", o->csv_dir, sc->name);
    snprintf(png, sizeof png, "%s/%s-virtual-strategies.png", o->csv_dir, sc->name);
    acc_bound_t b;
    acc_bound_init(&b, sc);
    FILE *f = rc == 0 ? fopen(csv, "w") : NULL;
    if (f != NULL) {
        write_csv(f, sc, &s, acc_bound_at(&b, ACC_WINDOW_MS));
        rc |= fclose(f);
        rc |= write_gp(gp, csv, png, sc, &s);
    } else {
        rc = -1;
    }
    if (rc == 0 && rl_test_on_path("gnuplot")) {
        rc = gnuplot(gp);
        printf("  strategies: %s%s\n", png, rc == 0 ? "" : " (gnuplot failed)");
    } else if (rc == 0) {
        printf("  strategies: %s (plot skipped: gnuplot is not installed)\n", csv);
    }
    for (int k = 0; k < s.n; k++)
        free(s.ms[k]);
    free(adm);
    return rc;
}
