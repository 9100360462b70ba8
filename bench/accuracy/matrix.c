/* SPDX-License-Identifier: MIT */
/*
 * The fleet matrix: five traffic families at fleet sizes people run and
 * three sync intervals, our global tier (and, at the headline size, its
 * tiered and hot-key policies) beside the ideal and the peers' models on
 * the same arrivals. Each cell is a virtual-clock run of the real library
 * against the run's redis-server; the peers are fed its recorded arrivals.
 * The claims of README.md ("Accuracy against the peers") are gated here.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"

const char *const acc_families[] = {"uniform", "skewed", "shifting", "bursty", "churning",
                                    NULL};

static const int full_sizes[] = {3, 10, 50, 100, 500, 0};
static const uint32_t full_intervals[] = {50, 100, 200, 0};
static const int quick_sizes[] = {10, 100, 0};
static const uint32_t quick_intervals[] = {100, 0};
/* The many-keys cells (keys.c), at 10 nodes and 100 ms: every family with
 * 1000 keys and a sampled 100000 in the full matrix, uniform and skewed
 * (the claimed families) with 1000 in the quick one. Their cost is Redis
 * CPU per key report (README.md, F4): a 100-node cell takes minutes here,
 * so other fleet sizes run only when asked for (--nodes N --keys K). */
static const uint32_t keys_full_counts[] = {1000, 100000, 0};
static const uint32_t keys_quick_counts[] = {1000, 0};
#define KEYS_NODES 10

#define MX_RATE ACC_MX_RATE
#define MX_LOAD 2.0
#define HEADLINE_NODES 100
#define HEADLINE_MS 100u

/* Offered load, requests per second of one node: the fleet offers
 * MX_LOAD x the limit among its N "home" nodes (bursty: 3x while on). */
static double mx_per_node(const acc_scen_t *sc, double load)
{
    return load * (double)sc->rate / (double)sc->expected;
}

static double off_uniform(const acc_scen_t *sc, int node, uint64_t t)
{
    (void)node;
    (void)t;
    return mx_per_node(sc, sc->load);
}

/* Three nodes spread through the fleet carry it all. */
static int mx_busy(const acc_scen_t *sc, int node)
{
    int n = (int)sc->expected;
    return node == n / 6 || node == n / 2 || node == 5 * n / 6;
}

static double off_skewed(const acc_scen_t *sc, int node, uint64_t t)
{
    (void)t;
    return mx_busy(sc, node) ? sc->load * (double)sc->rate / 3.0 : 0.0;
}

/* The first half of the nodes until the event, the second half after. */
static double off_shifting(const acc_scen_t *sc, int node, uint64_t t)
{
    int half = (int)sc->expected / 2, in_b = node >= half;
    int on = t < sc->event_ms ? !in_b : in_b;
    int size = on && in_b ? (int)sc->expected - half : half;
    return on ? sc->load * (double)sc->rate / size : 0.0;
}

/* Every node on for 1 s at 1.5 x load, off for 1 s: the fleet comes back
 * from idle every other second. */
static double off_bursty(const acc_scen_t *sc, int node, uint64_t t)
{
    (void)node;
    return (t / 1000) % 2 == 0 ? mx_per_node(sc, 1.5 * sc->load) : 0.0;
}

/* churning: a quarter of the nodes leave and as many new ones join, one
 * after another through the middle of the run; each live node offers its
 * part of the load (acc_node_live applies the liveness). */
static void make_churn(acc_scen_t *sc)
{
    int n = sc->nodes, j = n / 4 > 0 ? n / 4 : 1;
    uint64_t from = sc->duration_ms / 4, span = sc->duration_ms / 2;
    for (int k = 0; k < j; k++) {
        uint64_t at = from + span * (uint64_t)k / (uint64_t)j;
        at -= at % sc->interval_ms;
        sc->death_ms[k * n / j] = at;
        sc->join_ms[n + k] = at + sc->interval_ms;
    }
    sc->nodes = n + j;
}

int acc_matrix_scen(const char *family, int nodes, uint32_t interval_ms, int quick,
                    acc_scen_t *sc, char *name, size_t name_len)
{
    return acc_matrix_scen_len(family, nodes, interval_ms, quick, quick ? 4000 : 8000, sc, name,
                               name_len);
}

int acc_matrix_scen_len(const char *family, int nodes, uint32_t interval_ms, int quick,
                        uint64_t duration_ms, acc_scen_t *sc, char *name, size_t name_len)
{
    memset(sc, 0, sizeof *sc);
    /* The name makes the Redis key prefix: the quick matrix that a full
     * report run adds must not meet the full one's keys. */
    snprintf(name, name_len, "m-%s-%d-%u%s", family, nodes, (unsigned)interval_ms,
             quick ? "q" : "");
    sc->name = name;
    sc->what = family;
    sc->nodes = nodes;
    sc->expected = (uint32_t)nodes;
    sc->rate = MX_RATE;
    sc->burst = MX_RATE / 10;
    sc->interval_ms = interval_ms;
    sc->duration_ms = duration_ms;
    sc->load = MX_LOAD;
    sc->cut_node = -1;
    for (int i = 0; i < ACC_MAX_NODES; i++)
        sc->death_ms[i] = ACC_NEVER;
    sc->offered = off_uniform;
    if (strcmp(family, "skewed") == 0) {
        sc->offered = off_skewed;
    } else if (strcmp(family, "shifting") == 0) {
        sc->offered = off_shifting;
        sc->event_ms = sc->duration_ms / 2;
    } else if (strcmp(family, "bursty") == 0) {
        sc->offered = off_bursty;
    } else if (strcmp(family, "churning") == 0) {
        if (nodes + (nodes / 4 > 0 ? nodes / 4 : 1) > ACC_MAX_NODES)
            return -1;
        make_churn(sc);
    } else if (strcmp(family, "uniform") != 0) {
        return -1;
    }
    return 0;
}

/* One run of our fleet on a cell; its figures and (ours_only == 0) the
 * ideal's and every peer's into rows. */
static int run_cell(const acc_opts_t *o, acc_scen_t *sc, int tiered, int hot,
                    acc_cell_t *cell, int ours_only)
{
    acc_result_t res;
    sc->tiered = tiered;
    sc->hot_every = hot ? 4 : 0;
    if (acc_result_init(&res, sc) != 0)
        return -1;
    int rc = acc_run_virtual(o, sc, &res);
    if (o->all_rounds)
        acc_print_scenario(o, sc, &res); /* --all-rounds: each cell's rounds */
    if (rc == 0) {
        acc_row_t rows[ACC_ROWS_MAX];
        int n = 0;
        acc_compare(sc, &res, acc_policy_name(sc), rows, &n, 0);
        acc_bound_t b;
        acc_windows_t w;
        acc_bound_init(&b, sc);
        acc_check_windows(res.adm_ms, res.duration_ms, ACC_WINDOW_MS, res.interval_ms, &b, &w);
        rows[0].of_bound = w.worst;
        for (int k = 0; k < (ours_only ? 1 : n) && cell->nrows < ACC_ROWS_MAX; k++)
            cell->rows[cell->nrows++] = rows[k];
    }
    acc_result_free(&res);
    return rc;
}

static void print_cell(const acc_cell_t *c, double secs)
{
    printf("  %-9s %3d nodes %3u ms (%.1f s)", c->family, c->nodes, (unsigned)c->interval_ms,
           secs);
    for (int k = 0; k < c->nrows; k++)
        if (strncmp(c->rows[k].strategy, "ours", 4) == 0)
            printf("  [%s: err %.2f%%, allow %.3f%%, worst %.1f%% = %.0f%% of bound]",
                   c->rows[k].strategy + 6, 100.0 * c->rows[k].f.rate_err,
                   100.0 * c->rows[k].f.wrong_allow, 100.0 * c->rows[k].f.worst,
                   100.0 * c->rows[k].of_bound);
    printf("\n");
    fflush(stdout);
}

static int run_keys(const acc_opts_t *o, const char *fam, acc_matrix_t *m)
{
    const uint32_t *counts = o->quick ? keys_quick_counts : keys_full_counts;
    int asked = o->only_keys > 1, nodes = o->only_nodes && asked ? o->only_nodes : KEYS_NODES;
    if (o->quick && !asked && strcmp(fam, "uniform") != 0 && strcmp(fam, "skewed") != 0)
        return 0;
    if (asked)
        counts = keys_full_counts;
    int failed = 0;
    for (int k = 0; counts[k] != 0 && !acc_interrupted; k++) {
        if ((o->only_nodes && o->only_nodes != nodes) ||
            (o->only_interval && o->only_interval != HEADLINE_MS) ||
            (o->only_keys && o->only_keys != counts[k]))
            continue;
        if (m->ncells >= ACC_CELLS_MAX)
            return -1;
        acc_cell_t *c = &m->cells[m->ncells];
        memset(c, 0, sizeof *c);
        snprintf(c->family, sizeof c->family, "%s", fam);
        c->nodes = nodes;
        c->interval_ms = HEADLINE_MS;
        uint64_t t0 = acc_now_ns();
        if (acc_keys_cell(o, fam, c->nodes, c->interval_ms, counts[k], c) != 0) {
            failed = 1;
            continue;
        }
        m->ncells++;
        printf("  %u keys:", (unsigned)c->keys);
        print_cell(c, (double)(acc_now_ns() - t0) / 1e9);
    }
    return failed ? -1 : 0;
}

static int run_family(const acc_opts_t *o, const char *fam, acc_matrix_t *m)
{
    const int *sizes = o->quick ? quick_sizes : full_sizes;
    const uint32_t *ivs = o->quick ? quick_intervals : full_intervals;
    int failed = 0;
    for (int s = 0; sizes[s] != 0 && !acc_interrupted; s++)
        for (int k = 0; ivs[k] != 0 && !acc_interrupted; k++) {
            if ((o->only_nodes && o->only_nodes != sizes[s]) ||
                (o->only_interval && o->only_interval != ivs[k]) ||
                (o->only_keys && o->only_keys != 1))
                continue;
            if (m->ncells >= ACC_CELLS_MAX)
                return -1;
            acc_cell_t *c = &m->cells[m->ncells];
            memset(c, 0, sizeof *c);
            snprintf(c->family, sizeof c->family, "%s", fam);
            c->nodes = sizes[s];
            c->keys = 1;
            c->interval_ms = ivs[k];
            acc_scen_t sc;
            char name[48];
            uint64_t t0 = acc_now_ns();
            if (acc_matrix_scen(fam, c->nodes, c->interval_ms, o->quick, &sc, name,
                                sizeof name) != 0)
                continue;
            c->duration_ms = sc.duration_ms;
            failed |= run_cell(o, &sc, 0, 0, c, 0) != 0;
            if (c->nodes == HEADLINE_NODES && c->interval_ms == HEADLINE_MS) {
                failed |= run_cell(o, &sc, 1, 0, c, 1) != 0;
                failed |= run_cell(o, &sc, 0, 1, c, 1) != 0;
            }
            m->ncells++;
            print_cell(c, (double)(acc_now_ns() - t0) / 1e9);
        }
    return failed || run_keys(o, fam, m) != 0 ? -1 : 0;
}

/* The claims of README.md, "Accuracy against the peers": our global
 * tier's figures at the headline cell (100 nodes, 100 ms) under uniform
 * and skewed load. Peers are reported, never gated. */
#define CLAIM_RATE_ERR 0.03
#define CLAIM_WRONG_ALLOW 0.02
#define CLAIM_WORST 1.15

/* And at 1000 keys of one limit (10 nodes, 100 ms, keys.c's mix): the
 * figures pooled over the keys, a looser rate error (a many-keys cell is
 * shorter, so its first rounds weigh more). */
#define CLAIM_KEYS_RATE_ERR 0.05

static void judge_keys_claims(const acc_matrix_t *m, acc_verdicts_t *v)
{
    for (int i = 0; i < m->ncells; i++) {
        const acc_cell_t *c = &m->cells[i];
        if (c->keys != 1000 || c->nodes != 10 || c->interval_ms != HEADLINE_MS ||
            (strcmp(c->family, "uniform") != 0 && strcmp(c->family, "skewed") != 0))
            continue;
        const acc_figs_t *f = &c->rows[0].f;
        char scen[16], target[112];
        snprintf(scen, sizeof scen, "k-%.8s", c->family);
        snprintf(target, sizeof target,
                 "global, 1000 keys, 10 nodes, 100 ms: rate error <= %.0f%%, wrongly allowed "
                 "<= %.0f%%, 1-s windows <= %.0f%%",
                 100.0 * CLAIM_KEYS_RATE_ERR, 100.0 * CLAIM_WRONG_ALLOW, 100.0 * CLAIM_WORST);
        int pass = f->rate_err <= CLAIM_KEYS_RATE_ERR && f->wrong_allow <= CLAIM_WRONG_ALLOW &&
                   f->worst <= CLAIM_WORST;
        acc_verdict(v, scen, 1, pass, target, "mean rate error %.2f%%, wrongly allowed %.3f%%, "
                    "worst key's 1-s window %.1f%% of its limit",
                    100.0 * f->rate_err, 100.0 * f->wrong_allow, 100.0 * f->worst);
    }
}

static void judge_claims(const acc_matrix_t *m, acc_verdicts_t *v)
{
    judge_keys_claims(m, v);
    for (int i = 0; i < m->ncells; i++) {
        const acc_cell_t *c = &m->cells[i];
        if (c->keys != 1 || c->nodes != HEADLINE_NODES || c->interval_ms != HEADLINE_MS ||
            (strcmp(c->family, "uniform") != 0 && strcmp(c->family, "skewed") != 0))
            continue;
        const acc_figs_t *f = &c->rows[0].f;
        char scen[16], target[112];
        snprintf(scen, sizeof scen, "m-%.8s", c->family);
        snprintf(target, sizeof target,
                 "global, 100 nodes, 100 ms: rate error <= %.0f%%, wrongly allowed <= %.0f%%, "
                 "1-s windows <= %.0f%%",
                 100.0 * CLAIM_RATE_ERR, 100.0 * CLAIM_WRONG_ALLOW, 100.0 * CLAIM_WORST);
        int pass = f->rate_err <= CLAIM_RATE_ERR && f->wrong_allow <= CLAIM_WRONG_ALLOW &&
                   f->worst <= CLAIM_WORST;
        acc_verdict(v, scen, 1, pass, target, "mean rate error %.2f%%, wrongly allowed %.3f%%, worst 1-s window "
                    "%.1f%% of the limit",
                    100.0 * f->rate_err, 100.0 * f->wrong_allow, 100.0 * f->worst);
    }
}

static int run_matrix(const acc_opts_t *o, acc_matrix_t *m)
{
    m->quick = o->quick;
    m->seed = o->seed;
    uint64_t t0 = acc_now_ns();
    printf("\n== matrix (%s): families x fleet sizes x sync intervals, limit %u/s burst %u\n",
           o->quick ? "quick" : "full", MX_RATE, MX_RATE / 10);
    int rc = 0;
    for (int f = 0; acc_families[f] != NULL && !acc_interrupted; f++)
        if (o->only_family == NULL || strcmp(o->only_family, acc_families[f]) == 0)
            rc |= run_family(o, acc_families[f], m);
    m->wall_s = (double)(acc_now_ns() - t0) / 1e9;
    printf("  matrix: %d cells in %.1f s\n", m->ncells, m->wall_s);
    return rc != 0 || acc_interrupted ? -1 : 0;
}

/* The full matrix's report carries the quick one too: the section the
 * currency check regenerates (check-report.sh). */
int acc_run_matrix(const acc_opts_t *o, acc_verdicts_t *v)
{
    acc_matrix_t *m = calloc(1, sizeof *m), *q = NULL;
    if (m == NULL)
        return -1;
    int rc = run_matrix(o, m);
    if (rc == 0)
        judge_claims(m, v);
    if (rc == 0 && o->report_path != NULL && !o->quick) {
        acc_opts_t oq = *o;
        oq.quick = 1;
        q = calloc(1, sizeof *q);
        rc = q == NULL ? -1 : run_matrix(&oq, q);
    }
    if (rc == 0 && o->report_path != NULL)
        rc = o->quick ? acc_write_report(o, NULL, m) : acc_write_report(o, m, q);
    free(m);
    free(q);
    return rc;
}
