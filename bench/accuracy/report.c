/* SPDX-License-Identifier: MIT */
/*
 * Output: the round-by-round table of a scenario, the verdicts, CSV files
 * and, when gnuplot is installed, a plot of admitted vs the limit.
 */
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "acc.h"
#include "redis_harness.h"

extern char **environ;

const char *acc_mode_name(acc_mode_t m)
{
    switch (m) {
    case ACC_VIRTUAL:
        return "virtual";
    case ACC_REALTIME:
        return "realtime";
    case ACC_PROCESSES:
        return "processes";
    }
    return "?";
}

/* ------------------------------------------------------------------ table */

/* Rows worth printing in the default (summary) table: the start, the
 * rounds after an event, one in ten, and the last. */
static int row_wanted(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *r,
                      uint32_t round)
{
    if (o->all_rounds || r->rounds <= 30 || round < 12 || round + 1 == r->rounds ||
        round % 10 == 9)
        return 1;
    for (int i = 0; i < sc->nodes; i++) {
        uint64_t ev[3] = {sc->join_ms[i], sc->death_ms[i], sc->event_ms};
        for (int k = 0; k < 3; k++) {
            if (ev[k] == 0 || ev[k] == ACC_NEVER)
                continue;
            uint32_t at = (uint32_t)(ev[k] / sc->interval_ms);
            if (round + 1 >= at && round < at + 8)
                return 1;
        }
    }
    return 0;
}

/* The three nodes that admitted most in a round, with their part of it. */
static void busiest(const acc_scen_t *sc, const acc_result_t *r, uint32_t round, char *buf,
                    size_t len)
{
    uint64_t total = acc_round_adm(r, round, acc_all_nodes(sc->nodes));
    int used[ACC_MAX_NODES] = {0};
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < 3 && total > 0; k++) {
        int best = -1;
        uint32_t best_v = 0;
        for (int i = 0; i < sc->nodes; i++) {
            uint32_t a = r->node_adm[(size_t)round * (size_t)sc->nodes + (size_t)i];
            if (!used[i] && a > 0 && (best < 0 || a > best_v)) {
                best = i;
                best_v = a;
            }
        }
        if (best < 0)
            break;
        used[best] = 1;
        int w = snprintf(buf + off, len - off, " n%02d %2.0f%%", best,
                         100.0 * best_v / (double)total);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += (size_t)w;
    }
}

static void print_row(const acc_scen_t *sc, const acc_result_t *r, uint32_t round)
{
    uint64_t all = acc_all_nodes(sc->nodes);
    uint64_t adm = acc_round_adm(r, round, all), off = acc_round_off(r, round, all);
    double limit = (double)sc->rate * sc->interval_ms / 1000.0;
    char top[96], q[16] = "    -", b[16] = "     -";
    busiest(sc, r, round, top, sizeof top);
    if (r->shares_known) {
        snprintf(q, sizeof q, "%5.3f", r->sum_q[round]);
        snprintf(b, sizeof b, "%6.1f", r->sum_b[round]);
    }
    printf("  %5u %6" PRIu64 " %8" PRIu64 " %8" PRIu64 " %8.1f%% %s %s %s\n", round,
           (uint64_t)(round + 1) * sc->interval_ms, off, adm, 100.0 * (double)adm / limit, q,
           b, top);
}

static void print_bound(const acc_scen_t *sc, const acc_result_t *r)
{
    acc_bound_t b;
    acc_bound_init(&b, sc);
    acc_bound_cut(&b, sc, r);
    char cut[96] = "";
    if (sc->cut_node >= 0)
        snprintf(cut, sizeof cut, " + %.0f (cut node: degraded rate) x 1 s + %.0f (its tokens, "
                 "ramp)", b.cut_rate, b.e_cut);
    printf("  bound: any 1-s window <= %.0f + %.0f + E, E = %.0f (a: pre-sync) + %.0f "
           "(b: share moves) + %.0f (c: burst re-lease)%s = %.0f -> %.0f; any round <= %.0f\n",
           b.rate, b.burst, b.e_presync, b.e_moves, b.e_lease, cut,
           b.e + b.cut_rate, acc_bound_at(&b, ACC_WINDOW_MS), acc_bound_at(&b, sc->interval_ms));
}

void acc_print_scenario(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *r)
{
    printf("\n== %s (%s, %s load, seed %" PRIu64 "): %d nodes, limit %" PRIu64
           "/s burst %" PRIu64 ", sync %u ms, expected_nodes %u\n",
           sc->name, acc_mode_name(o->mode),
           o->load == ACC_LOAD_EVEN || sc->even_only ? "even" : "poisson",
           o->seed, sc->nodes, sc->rate, sc->burst, sc->interval_ms, sc->expected);
    printf("  %s\n", sc->what);
    print_bound(sc, r);
    printf("  %5s %6s %8s %8s %9s %5s %6s %s\n", "round", "t_ms", "offered", "admitted",
           "adm/limit", "sum_q", "sum_b", "busiest nodes (part of admitted)");
    int skipped = 0;
    for (uint32_t round = 0; round < r->rounds; round++) {
        if (!row_wanted(o, sc, r, round)) {
            skipped = 1;
            continue;
        }
        if (skipped)
            printf("  %5s\n", "...");
        skipped = 0;
        print_row(sc, r, round);
    }
    if (r->nsteps > 0) {
        double p50 = acc_percentile(r->step_ms, r->nsteps, 50.0);
        double p99 = acc_percentile(r->step_ms, r->nsteps, 99.0);
        printf("  sync round wall time (rl__sync_step): p50 %.3f ms, p99 %.3f ms over %zu; "
               "%u failed\n",
               p50, p99, r->nsteps, r->step_failures);
    }
    if (sc->tiered && r->checks > 0)
        printf("  checks that reached Redis (tiered confirmations): %" PRIu64 " of %" PRIu64
               " = %.1f%%\n",
               r->redis_checks, r->checks, 100.0 * (double)r->redis_checks / (double)r->checks);
    if (r->lag_ms > 0)
        printf("  load generators fell behind real time by up to %" PRIu64 " ms\n", r->lag_ms);
    if (r->note[0] != '\0')
        printf("  note: %s\n", r->note);
}

void acc_print_verdicts(const acc_verdicts_t *v, int from, int gated)
{
    for (int i = from; i < v->n; i++) {
        const acc_verdict_t *x = &v->v[i];
        const char *tag = x->gated == ACC_INFO ? "info"
                          : x->pass            ? "PASS"
                          : gated && x->gated  ? "MISS"
                                               : "miss";
        int plain = x->gated == ACC_INFO || (gated && x->gated);
        printf("  [%s]%s %s: %s\n", tag, plain ? "" : " (not gated)", x->target, x->measured);
    }
}

/* ------------------------------------------------------------------ files */

int acc_mkdir_p(const char *dir)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return -1;
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static FILE *open_out(const acc_opts_t *o, const acc_scen_t *sc, const char *what, char *path,
                      size_t len)
{
    snprintf(path, len, "%s/%s-%s-%s", o->csv_dir, sc->name, acc_mode_name(o->mode), what);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fprintf(stderr, "rl_accuracy: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static void write_rounds(FILE *f, const acc_scen_t *sc, const acc_result_t *r)
{
    fprintf(f, "round,t_end_ms,limit,offered,admitted,sum_q,sum_b");
    for (int i = 0; i < sc->nodes; i++)
        fprintf(f, ",adm_n%02d", i);
    for (int i = 0; i < sc->nodes; i++)
        fprintf(f, ",off_n%02d", i);
    fprintf(f, "\n");
    uint64_t all = acc_all_nodes(sc->nodes);
    for (uint32_t k = 0; k < r->rounds; k++) {
        fprintf(f, "%u,%" PRIu64 ",%.3f,%" PRIu64 ",%" PRIu64 ",%.6f,%.3f", k,
                (uint64_t)(k + 1) * sc->interval_ms, (double)sc->rate * sc->interval_ms / 1000.0,
                acc_round_off(r, k, all), acc_round_adm(r, k, all),
                r->shares_known ? r->sum_q[k] : -1.0, r->shares_known ? r->sum_b[k] : -1.0);
        for (int i = 0; i < sc->nodes; i++)
            fprintf(f, ",%u", r->node_adm[(size_t)k * (size_t)sc->nodes + (size_t)i]);
        for (int i = 0; i < sc->nodes; i++)
            fprintf(f, ",%u", r->node_off[(size_t)k * (size_t)sc->nodes + (size_t)i]);
        fprintf(f, "\n");
    }
}

/* The admitted count of the 1-s window ending at each 10th ms. */
static void write_windows(FILE *f, const acc_scen_t *sc, const acc_result_t *r)
{
    acc_bound_t b;
    acc_bound_init(&b, sc);
    acc_bound_cut(&b, sc, r);
    fprintf(f, "t_end_ms,admitted_1s,limit,bound\n");
    uint64_t s = 0;
    for (uint64_t t = 0; t < r->duration_ms; t++) {
        s += r->adm_ms[t];
        if (t >= ACC_WINDOW_MS)
            s -= r->adm_ms[t - ACC_WINDOW_MS];
        if ((t + 1) % 10 == 0 && t + 1 >= ACC_WINDOW_MS)
            fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.1f\n", t + 1, s, sc->rate,
                    acc_bound_at(&b, ACC_WINDOW_MS));
    }
}

static int run_gnuplot(const char *script)
{
    char *argv[] = {(char *)"gnuplot", (char *)script, NULL};
    pid_t pid;
    if (posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ) != 0)
        return -1;
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* admitted per round (as a rate) and per sliding 1-s window, the limit and
 * the bound, over time. */
static void plot(const acc_opts_t *o, const acc_scen_t *sc, const char *rounds_csv,
                 const char *windows_csv)
{
    char gp[1100], png[1100];
    FILE *f = open_out(o, sc, "plot.gp", gp, sizeof gp);
    if (f == NULL)
        return;
    snprintf(png, sizeof png, "%s/%s-%s.png", o->csv_dir, sc->name, acc_mode_name(o->mode));
    double scale = 1000.0 / sc->interval_ms;
    fprintf(f,
            "set terminal pngcairo size 1000,500\nset output '%s'\n"
            "set datafile separator ','\nset key outside bottom center horizontal\n"
            "set title '%s (%s): admitted vs limit'\nset xlabel 'time (s)'\n"
            "set ylabel 'admitted per second'\nset yrange [0:*]\n"
            /* fsteps on the round's end time: each value spans its own round */
            "plot '%s' skip 1 using ($2/1000):($5*%g) with fsteps title 'per round (x%g)', "
            "'%s' skip 1 using ($1/1000):2 with lines lw 2 title 'sliding 1-s window', "
            "'' skip 1 using ($1/1000):3 with lines dt 2 title 'limit', "
            "'' skip 1 using ($1/1000):4 with lines dt 3 title 'bound'\n",
            png, sc->name, acc_mode_name(o->mode), rounds_csv, scale, scale, windows_csv);
    fclose(f);
    if (run_gnuplot(gp) != 0)
        printf("  plot: gnuplot failed on %s\n", gp);
    else
        printf("  plot: %s\n", png);
}

int acc_write_csv(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *r)
{
    if (o->csv_dir == NULL)
        return 0;
    char rp[1100], wp[1100];
    FILE *f = open_out(o, sc, "rounds.csv", rp, sizeof rp);
    if (f == NULL)
        return -1;
    write_rounds(f, sc, r);
    fclose(f);
    if ((f = open_out(o, sc, "windows.csv", wp, sizeof wp)) == NULL)
        return -1;
    write_windows(f, sc, r);
    fclose(f);
    printf("  csv: %s, %s\n", rp, wp);
    if (rl_test_on_path("gnuplot"))
        plot(o, sc, rp, wp);
    else
        printf("  plot: skipped (gnuplot is not installed)\n");
    return 0;
}

int acc_write_summary(const acc_opts_t *o, const acc_verdicts_t *v)
{
    if (o->csv_dir == NULL)
        return 0;
    char path[1100];
    snprintf(path, sizeof path, "%s/summary-%s.csv", o->csv_dir, acc_mode_name(o->mode));
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "rl_accuracy: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "scenario,target,measured,gated,pass\n");
    for (int i = 0; i < v->n; i++)
        fprintf(f, "%s,\"%s\",\"%s\",%d,%d\n", v->v[i].scenario, v->v[i].target,
                v->v[i].measured, v->v[i].gated == 1 && o->mode == ACC_VIRTUAL, v->v[i].pass);
    fclose(f);
    printf("\nsummary: %s\n", path);
    return 0;
}
