/* SPDX-License-Identifier: MIT */
/*
 * The many-keys scenario (virtual clock): 10 nodes, each checking the same
 * 10000 keys of one limit. 9800 keys are far below their limit (every node
 * sends each one request a second: 10% of the key's limit in all); 200 are
 * over it (every node sends each 30/s: 3x in all). It measures what sync
 * costs: key reports per round (gated: they must scale with the near-limit
 * keys, not with all active keys), Redis CPU per report from INFO
 * commandstats, the capacity of one Redis core that implies, and the wall
 * time of a sync round. The hot keys' windows are checked against the
 * bound like every other scenario. --quick: 1000 keys, 20 of them hot.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"
#include "testutil.h"

#define MANY_NODES 10
#define MANY_RATE 100
#define MANY_BURST 20
#define MANY_HOT_PER_NODE 30.0 /* requests/s per node per hot key */
#define VIRTUAL_START_NS UINT64_C(1000000000000)

typedef struct many {
    const acc_opts_t *o;
    acc_scen_t sc; /* the fleet's shape, for the bound and the node config */
    rl_test_clock_t clk;
    acc_node_t nodes[MANY_NODES];
    uint32_t nkeys, nhot;  /* active keys, of which the first nhot are hot */
    char (*keys)[12];
    /* Quiet keys by the ms (mod 1000) each node sends them: a counting
     * sort, so a ms costs only the keys due in it. */
    uint32_t *order[MANY_NODES];
    uint32_t *first[MANY_NODES]; /* [1001] */
    double *hot_carry[MANY_NODES];
    uint32_t rounds, measure_from;
    uint32_t *hot_ms;     /* [hot][ms] fleet admitted */
    uint16_t *key_round;  /* [key][round] fleet admitted */
    uint64_t *reports;    /* [round] fleet key reports */
    uint64_t *calls;      /* [round] fleet script calls */
    double *round_wall;   /* [round] sum of the nodes' step times, ms */
    acc_result_t steps;   /* only its step samples are used */
    uint64_t hot_adm, hot_off;
    int errors;
} many_t;

static int build_schedule(many_t *m, int node)
{
    uint32_t quiet = m->nkeys - m->nhot;
    uint16_t *phase = malloc(quiet * sizeof *phase);
    m->order[node] = malloc(quiet * sizeof *m->order[node]);
    m->first[node] = calloc(1001, sizeof *m->first[node]);
    m->hot_carry[node] = malloc(m->nhot * sizeof *m->hot_carry[node]);
    if (phase == NULL || m->order[node] == NULL || m->first[node] == NULL ||
        m->hot_carry[node] == NULL) {
        free(phase);
        return -1;
    }
    uint64_t seed = m->o->seed * 1000003u + (uint64_t)node * 7919u;
    for (uint32_t k = 0; k < quiet; k++) {
        phase[k] = (uint16_t)(acc_mix64(seed ^ ((uint64_t)k << 20)) % 1000u);
        m->first[node][phase[k] + 1]++;
    }
    for (int p = 0; p < 1000; p++)
        m->first[node][p + 1] += m->first[node][p];
    uint32_t *fill = calloc(1000, sizeof *fill);
    if (fill == NULL) {
        free(phase);
        return -1;
    }
    for (uint32_t k = 0; k < quiet; k++)
        m->order[node][m->first[node][phase[k]] + fill[phase[k]]++] = m->nhot + k;
    for (uint32_t h = 0; h < m->nhot; h++)
        m->hot_carry[node][h] = (double)(acc_mix64(seed + h) % 1000u) / 1000.0;
    free(fill);
    free(phase);
    return 0;
}

static int check(many_t *m, int node, uint32_t key)
{
    int rc = rl_check(m->nodes[node].rl, m->nodes[node].limit, m->keys[key],
                      strlen(m->keys[key]), 1, NULL);
    if (rc < 0 && m->errors++ == 0)
        fprintf(stderr, "rl_accuracy: rl_check: %s\n", rl_strerror(rc));
    return rc == RL_ALLOW;
}

static void drive_ms(many_t *m, int node, uint64_t t)
{
    uint32_t round = (uint32_t)(t / m->sc.interval_ms), p = (uint32_t)(t % 1000u);
    for (uint32_t j = m->first[node][p]; j < m->first[node][p + 1]; j++) {
        uint32_t k = m->order[node][j];
        m->key_round[(size_t)k * m->rounds + round] += (uint16_t)check(m, node, k);
    }
    for (uint32_t h = 0; h < m->nhot; h++) {
        double *c = &m->hot_carry[node][h];
        *c += MANY_HOT_PER_NODE / 1000.0;
        if (*c < 1.0)
            continue;
        *c -= 1.0;
        int a = check(m, node, h);
        m->hot_ms[(size_t)h * m->sc.duration_ms + t] += (uint32_t)a;
        m->key_round[(size_t)h * m->rounds + round] += (uint16_t)a;
        if (round >= m->measure_from) {
            m->hot_adm += (uint64_t)a;
            m->hot_off++;
        }
    }
}

static void fleet_counters(many_t *m, uint64_t *reports, uint64_t *calls)
{
    *reports = *calls = 0;
    for (int i = 0; i < MANY_NODES; i++) {
        uint64_t r, c;
        acc_node_counters(&m->nodes[i], &r, &c);
        *reports += r;
        *calls += c;
    }
}

static void end_round(many_t *m, uint32_t round)
{
    uint64_t r0, c0, r1, c1;
    fleet_counters(m, &r0, &c0);
    /* relaxed: this thread is the clock's only writer. */
    uint64_t vms = atomic_load_explicit(&m->clk.precise_ns, memory_order_relaxed) / 1000000u;
    double wall = 0.0;
    for (int i = 0; i < MANY_NODES; i++) {
        uint64_t t0 = acc_now_ns();
        if (acc_node_step(&m->nodes[i], vms) != 0)
            m->steps.step_failures++;
        double ms = (double)(acc_now_ns() - t0) / 1e6;
        wall += ms;
        if (round >= m->measure_from)
            acc_result_step(&m->steps, ms);
    }
    fleet_counters(m, &r1, &c1);
    m->reports[round] = r1 - r0;
    m->calls[round] = c1 - c0;
    m->round_wall[round] = wall;
}

static int many_alloc(many_t *m)
{
    m->keys = calloc(m->nkeys, sizeof *m->keys);
    m->hot_ms = calloc((size_t)m->nhot * m->sc.duration_ms, sizeof *m->hot_ms);
    m->key_round = calloc((size_t)m->nkeys * m->rounds, sizeof *m->key_round);
    m->reports = calloc(m->rounds, sizeof *m->reports);
    m->calls = calloc(m->rounds, sizeof *m->calls);
    m->round_wall = calloc(m->rounds, sizeof *m->round_wall);
    if (m->keys == NULL || m->hot_ms == NULL || m->key_round == NULL || m->reports == NULL ||
        m->calls == NULL || m->round_wall == NULL)
        return -1;
    for (uint32_t k = 0; k < m->nkeys; k++)
        snprintf(m->keys[k], sizeof m->keys[k], "k%05u", k);
    for (int i = 0; i < MANY_NODES; i++)
        if (build_schedule(m, i) != 0)
            return -1;
    return 0;
}

static void many_free(many_t *m)
{
    for (int i = 0; i < MANY_NODES; i++) {
        acc_node_close(&m->nodes[i]);
        free(m->order[i]);
        free(m->first[i]);
        free(m->hot_carry[i]);
    }
    free(m->keys);
    free(m->hot_ms);
    free(m->key_round);
    free(m->reports);
    free(m->calls);
    free(m->round_wall);
    acc_result_free(&m->steps);
    free(m);
}

static int open_fleet(many_t *m)
{
    acc_fleet_cfg_t fc;
    acc_fleet_cfg_init(&fc, m->o, &m->sc, "v");
    fc.clock = &m->clk;
    fc.manual = 1;
    fc.max_keys = 16384; /* 10000 keys with room: memory stays sane */
    for (int i = 0; i < MANY_NODES; i++)
        if (acc_node_open(&m->nodes[i], &fc, i) != 0)
            return -1;
    return acc_wait_connected(m->nodes, MANY_NODES, 10000);
}

/* The simulation proper: ms by ms, a sync round every interval. Redis's
 * script counters are read around the measured rounds. */
static int simulate(many_t *m, acc_redis_stats_t redis[2])
{
    for (uint64_t t = 0; t < m->sc.duration_ms && !acc_interrupted; t++) {
        uint32_t round = (uint32_t)(t / m->sc.interval_ms);
        if (t % m->sc.interval_ms == 0 && round == m->measure_from &&
            acc_redis_stats(m->o->redis_url, &redis[0]) != 0)
            return -1;
        for (int i = 0; i < MANY_NODES; i++)
            drive_ms(m, i, t);
        /* relaxed: see fleet.c's virtual_clock. */
        atomic_fetch_add_explicit(&m->clk.precise_ns, UINT64_C(1000000), memory_order_relaxed);
        if ((t + 1) % m->sc.interval_ms == 0)
            end_round(m, round);
    }
    if (acc_interrupted)
        return -1;
    return acc_redis_stats(m->o->redis_url, &redis[1]);
}

/* ------------------------------------------------------------------ report */

static void print_rounds(const many_t *m)
{
    printf("  %5s %6s %8s %6s %9s\n", "round", "t_ms", "reports", "calls", "wall_ms");
    for (uint32_t r = 0; r < m->rounds; r++) {
        if (!m->o->all_rounds && r >= 12 && r % 10 != 9 && r + 1 != m->rounds)
            continue;
        printf("  %5u %6" PRIu64 " %8" PRIu64 " %6" PRIu64 " %9.2f\n", r,
               (uint64_t)(r + 1) * m->sc.interval_ms, m->reports[r], m->calls[r],
               m->round_wall[r]);
    }
}

/* Window checks: every hot key per ms, every key at round granularity. */
static void judge_windows(many_t *m, acc_verdicts_t *v)
{
    acc_bound_t b;
    acc_bound_init(&b, &m->sc);
    acc_windows_t w, worst;
    memset(&worst, 0, sizeof worst);
    uint32_t worst_key = 0;
    uint64_t over = 0, warm = 0;
    for (uint32_t h = 0; h < m->nhot; h++) {
        const uint32_t *adm = m->hot_ms + (size_t)h * m->sc.duration_ms;
        acc_check_windows(adm, m->sc.duration_ms, ACC_WINDOW_MS, m->sc.interval_ms, &b, &w);
        over += w.over + w.rounds_over;
        uint64_t lo, hi;
        acc_window_range(adm, m->sc.duration_ms, ACC_WINDOW_MS, 2000, m->sc.duration_ms, &lo,
                         &hi);
        warm = hi > warm ? hi : warm;
        if (w.worst > worst.worst) {
            worst = w;
            worst_key = h;
        }
    }
    acc_verdict(v, "many", 1, over == 0, "hot keys: every 1-s window and round <= bound",
                "worst k%05u: %" PRIu64 " at %" PRIu64 " ms = %.1f%% of bound %.0f; "
                "%" PRIu64 " windows/rounds over; from 2 s on worst %" PRIu64 " (%.1f%%)",
                worst_key, worst.worst_adm, worst.worst_at, 100.0 * worst.worst,
                acc_bound_at(&b, ACC_WINDOW_MS), over, warm,
                100.0 * (double)warm / acc_bound_at(&b, ACC_WINDOW_MS));
    uint32_t per_win = ACC_WINDOW_MS / m->sc.interval_ms;
    uint64_t hi = 0, bad = 0;
    for (uint32_t k = 0; k < m->nkeys; k++) {
        const uint16_t *kr = m->key_round + (size_t)k * m->rounds;
        for (uint32_t r = 0; r + per_win <= m->rounds; r++) {
            uint64_t s = 0;
            for (uint32_t j = 0; j < per_win; j++)
                s += kr[r + j];
            hi = s > hi ? s : hi;
            bad += (double)s > acc_bound_at(&b, ACC_WINDOW_MS);
        }
    }
    acc_verdict(v, "many", 1, bad == 0, "all keys: every round-aligned 1-s window <= bound",
                "largest %" PRIu64 " (bound %.0f); %" PRIu64 " over", hi,
                acc_bound_at(&b, ACC_WINDOW_MS), bad);
}

static void judge_cost(many_t *m, const acc_redis_stats_t redis[2], acc_verdicts_t *v)
{
    uint64_t reports = 0;
    uint32_t n = m->rounds - m->measure_from;
    for (uint32_t r = m->measure_from; r < m->rounds; r++)
        reports += m->reports[r];
    double per_round = (double)reports / n;
    double allowed = MANY_NODES * (m->nhot + m->nkeys / 10.0) * 1.10;
    acc_verdict(v, "many", 1, per_round <= allowed,
                "reports/round <= nodes x (near + active/10) + 10%",
                "%.0f per round (%.0f per node) over rounds %u-%u; limit %.0f", per_round,
                per_round / MANY_NODES, m->measure_from, m->rounds - 1, allowed);
    uint64_t calls = redis[1].evalsha_calls - redis[0].evalsha_calls;
    uint64_t usec = redis[1].evalsha_usec - redis[0].evalsha_usec;
    double cpu_us = (redis[1].cpu_s - redis[0].cpu_s) * 1e6;
    double per_report = reports ? (double)usec / (double)reports : 0.0;
    acc_verdict(v, "many", ACC_INFO, 1, "Redis CPU per script call and per key report",
                "%.0f us/call (%" PRIu64 " calls of %.0f keys), %.1f us/report (process CPU "
                "%.1f us/report): one core serves ~%.0f reports/s",
                calls ? (double)usec / (double)calls : 0.0, calls,
                calls ? (double)reports / (double)calls : 0.0, per_report,
                reports ? cpu_us / (double)reports : 0.0,
                per_report > 0 ? 1e6 / per_report : 0.0);
    if (redis[1].servers > 1 && redis[1].servers == redis[0].servers && usec > 0) {
        /* A Redis Cluster: each master runs its slots' calls on its own
         * core; the busiest one bounds the whole. */
        char each[256];
        int w = 0;
        uint64_t busiest = 0;
        for (int i = 0; i < redis[1].servers && w >= 0 && (size_t)w < sizeof each; i++) {
            uint64_t d = redis[1].usec_of[i] - redis[0].usec_of[i];
            busiest = d > busiest ? d : busiest;
            w += snprintf(each + w, sizeof each - (size_t)w, "%s%.0f%%", i ? " " : "",
                          100.0 * (double)d / (double)usec);
        }
        double share = (double)busiest / (double)usec;
        acc_verdict(v, "many", ACC_INFO, 1, "script time over the cluster's masters",
                    "%d masters take %s of it: the cluster serves ~%.0f reports/s "
                    "(%.2fx one core)", redis[1].servers, each,
                    per_report > 0 ? 1e6 / per_report / share : 0.0, 1.0 / share);
    }
    double p50 = acc_percentile(m->steps.step_ms, m->steps.nsteps, 50.0);
    double p99 = acc_percentile(m->steps.step_ms, m->steps.nsteps, 99.0);
    acc_verdict(v, "many", ACC_INFO, m->steps.step_failures == 0,
                "sync round wall time (one node)",
                "p50 %.2f ms, p99 %.2f ms over %zu rounds; %u failed", p50, p99,
                m->steps.nsteps, m->steps.step_failures);
    double limit = m->nhot * (double)MANY_RATE * n * m->sc.interval_ms / 1000.0;
    acc_verdict(v, "many", ACC_INFO, 1, "hot keys admitted vs limit",
                "%.1f%% of the limit in the measured rounds (offered %.0f%%)",
                100.0 * (double)m->hot_adm / limit, 100.0 * (double)m->hot_off / limit);
}

static void write_csv(const many_t *m)
{
    if (m->o->csv_dir == NULL)
        return;
    char path[1100];
    snprintf(path, sizeof path, "%s/many-%s-rounds.csv", m->o->csv_dir,
             acc_mode_name(m->o->mode));
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    fprintf(f, "round,t_end_ms,reports,calls,wall_ms\n");
    for (uint32_t r = 0; r < m->rounds; r++)
        fprintf(f, "%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f\n", r,
                (uint64_t)(r + 1) * m->sc.interval_ms, m->reports[r], m->calls[r],
                m->round_wall[r]);
    fclose(f);
    printf("  csv: %s\n", path);
}

static void make_shape(many_t *m)
{
    acc_scen_t *sc = &m->sc;
    sc->name = "many";
    sc->nodes = MANY_NODES;
    sc->rate = MANY_RATE;
    sc->burst = MANY_BURST;
    sc->expected = MANY_NODES;
    sc->interval_ms = 100;
    /* Quick: a tenth of the keys, so CI stays well under a minute, but as
     * many rounds: quiet keys report every 10th round, so the steady state
     * only shows from about round 20 on, and what goes wrong after that
     * (see README.md) must show in CI too. */
    m->nkeys = m->o->quick ? 1000 : 10000;
    m->nhot = m->o->quick ? 20 : 200;
    m->rounds = 40;
    m->measure_from = 25;
    sc->duration_ms = (uint64_t)m->rounds * sc->interval_ms;
    for (int i = 0; i < ACC_MAX_NODES; i++)
        sc->death_ms[i] = ACC_NEVER;
}

int acc_run_many(const acc_opts_t *o, acc_verdicts_t *v)
{
    if (o->mode != ACC_VIRTUAL) {
        printf("\n== many: virtual mode only (it measures counts and Redis CPU, not time)\n");
        return 0;
    }
    many_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return -1;
    m->o = o;
    make_shape(m);
    atomic_init(&m->clk.precise_ns, VIRTUAL_START_NS);
    m->clk.coarse_tick_ns = 0;
    printf("\n== many (virtual): %d nodes x %u keys (limit %d/s burst %d each): %u keys at "
           "3x their limit, the rest at 10%%\n",
           MANY_NODES, m->nkeys, MANY_RATE, MANY_BURST, m->nhot);
    acc_redis_stats_t redis[2];
    int rc = many_alloc(m) == 0 && open_fleet(m) == 0 ? simulate(m, redis) : -1;
    if (rc == 0) {
        print_rounds(m);
        int from = v->n;
        judge_cost(m, redis, v);
        judge_windows(m, v);
        acc_print_verdicts(v, from, 1);
        write_csv(m);
    } else {
        printf("  run failed%s\n", acc_interrupted ? " (interrupted)" : "");
    }
    if (m->errors > 0)
        rc = -1;
    many_free(m);
    return rc;
}
