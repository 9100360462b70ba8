/* SPDX-License-Identifier: MIT */
/*
 * The virtual-clock driver: deterministic and fast, so its figures are the
 * gated ones. Every node reads one shared rl_test_clock_t; time advances
 * in 1 ms steps; each node's offered requests for a ms are checked at that
 * ms; at every round boundary each live node runs one manual sync round
 * (rl__sync_step) with the virtual time, which the Redis script uses
 * instead of TIME. Nodes sync one after another in index order, as they
 * would if their jittered timers fired in that order.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acc.h"
#include "testutil.h"

/* Virtual time starts well above 0: 0 is "use TIME" to the script. */
#define VIRTUAL_START_NS UINT64_C(1000000000000)

typedef struct vrun {
    const acc_scen_t *sc;
    acc_result_t *res;
    rl_test_clock_t clk;
    acc_node_t nodes[ACC_MAX_NODES];
    acc_gen_t gens[ACC_MAX_NODES];
    int errors;
    const char *url;  /* the Redis the fleet shares, and its key prefix */
    char prefix[40];
    rl_blackhole_t cut;    /* the cut node's proxy (partition) */
    char cut_url[200];
} vrun_t;

static const char check_key[] = "k";

/* One node's requests for ms t. */
static void drive_ms(vrun_t *v, int i, uint64_t t)
{
    const acc_scen_t *sc = v->sc;
    uint32_t n = acc_gen_next(&v->gens[i], sc->offered(sc, i, t) / 1000.0);
    uint32_t admitted = 0;
    for (uint32_t k = 0; k < n; k++) {
        int rc = rl_check(v->nodes[i].rl, v->nodes[i].limit, check_key, sizeof check_key - 1,
                          1, NULL);
        if (rc == RL_ALLOW)
            admitted++;
        else if (rc < 0 && v->errors++ == 0)
            fprintf(stderr, "rl_accuracy: rl_check(%s): %s\n", v->nodes[i].name,
                    rl_strerror(rc));
    }
    v->res->checks += n;
    size_t cell = (size_t)(t / sc->interval_ms) * (size_t)sc->nodes + (size_t)i;
    v->res->node_off[cell] += n;
    v->res->node_adm[cell] += admitted;
    v->res->adm_ms[t] += admitted;
    size_t nt = (size_t)i * (size_t)sc->duration_ms + (size_t)t;
    /* uint16: the scenarios offer at most tens of requests a node-ms. */
    v->res->arr_nt[nt] = (uint16_t)(n > UINT16_MAX ? UINT16_MAX : n);
    v->res->adm_nt[nt] = (uint16_t)(admitted > UINT16_MAX ? UINT16_MAX : admitted);
}

/* The shares the live nodes held during the round that just ended (share
 * words change only in a sync round, so reading them before the round's
 * sync gives what was in force). */
static void record_shares(vrun_t *v, uint32_t round, uint64_t t)
{
    double sq = 0.0, sb = 0.0;
    for (int i = 0; i < v->sc->nodes; i++) {
        if (!acc_node_live(v->sc, i, t))
            continue;
        double q, b;
        acc_node_share(&v->nodes[i], &q, &b);
        sq += q;
        sb += b;
    }
    v->res->sum_q[round] = sq;
    v->res->sum_b[round] = sb;
}

/* A partition starts or ends at this round boundary. Virtual time stands
 * still while the node sees it (real time, bounded): cut, its connection
 * is closed before it syncs again, so every round of the partition fails
 * at once; healed, it has reconnected (its own backoff) before the round,
 * so the first round after the partition succeeds. Either way the same run
 * gives the same table. */
static void cut_or_heal(vrun_t *v, uint64_t boundary)
{
    const acc_scen_t *sc = v->sc;
    if (sc->cut_node < 0)
        return;
    acc_node_t *n = &v->nodes[sc->cut_node];
    if (boundary == sc->event_ms) {
        acc_node_share(n, &v->res->cut_q, &v->res->cut_b);
        rl_blackhole_set(&v->cut, RL_BLACKHOLE_CUT);
        if (acc_wait_state(n, 0, 10000) != 0)
            v->errors++;
    } else if (boundary == sc->heal_ms) {
        rl_blackhole_set(&v->cut, RL_BLACKHOLE_FORWARD);
        if (acc_wait_state(n, 1, 10000) != 0)
            v->errors++;
    }
}

/* The round boundary after ms t: every node that was live in ms t and is
 * still alive at the boundary syncs. A node dying at the boundary does
 * not: it died before its timer fired. */
static void end_round(vrun_t *v, uint64_t t)
{
    uint32_t round = (uint32_t)(t / v->sc->interval_ms);
    record_shares(v, round, t);
    if (v->sc->flush_at_event && t + 1 == v->sc->event_ms &&
        acc_flush_prefix(v->url, v->prefix) <= 0)
        v->errors++;
    cut_or_heal(v, t + 1);
    /* relaxed: this thread is the only writer; see virtual_clock. */
    uint64_t vms = atomic_load_explicit(&v->clk.precise_ns, memory_order_relaxed) / 1000000u;
    for (int i = 0; i < v->sc->nodes; i++) {
        if (!acc_node_live(v->sc, i, t) || !acc_node_live(v->sc, i, t + 1))
            continue;
        uint64_t t0 = acc_now_ns();
        if (acc_node_step(&v->nodes[i], vms) != 0)
            v->res->step_failures++;
        acc_result_step(v->res, (double)(acc_now_ns() - t0) / 1e6);
    }
}

static int open_fleet(vrun_t *v, const acc_opts_t *o)
{
    acc_fleet_cfg_t fc;
    acc_fleet_cfg_init(&fc, o, v->sc, "v");
    fc.clock = &v->clk;
    fc.manual = 1;
    if (acc_cut_setup(&v->cut, o, v->sc, &fc, v->cut_url, sizeof v->cut_url) != 0)
        return -1;
    v->url = o->redis_url;
    memcpy(v->prefix, fc.prefix, sizeof v->prefix);
    for (int i = 0; i < v->sc->nodes; i++) {
        if (acc_node_open(&v->nodes[i], &fc, i) != 0)
            return -1;
        /* A phase per node: even sources do not all fire in the same ms. */
        acc_gen_init(&v->gens[i], v->sc->even_only ? ACC_LOAD_EVEN : o->load, o->seed * 1000003u + (uint64_t)i,
                     (double)i / v->sc->nodes);
    }
    if (acc_wait_connected(v->nodes, v->sc->nodes, 10000) != 0) {
        fprintf(stderr, "rl_accuracy: nodes did not connect to %s\n", o->redis_url);
        return -1;
    }
    return 0;
}

int acc_run_virtual(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res)
{
    vrun_t *v = calloc(1, sizeof *v); /* nodes and generators: keep them off the stack */
    if (v == NULL)
        return -1;
    v->sc = sc;
    v->res = res;
    res->cut_q = -1.0;
    atomic_init(&v->clk.precise_ns, VIRTUAL_START_NS);
    v->clk.coarse_tick_ns = 0;
    res->shares_known = 1;
    int rc = open_fleet(v, o);
    for (uint64_t t = 0; rc == 0 && t < sc->duration_ms && !acc_interrupted; t++) {
        /* relaxed: see virtual_clock. */
        uint64_t now_us = atomic_load_explicit(&v->clk.precise_ns, memory_order_relaxed) / 1000u;
        for (int i = 0; i < sc->nodes; i++) {
            if (sc->tiered)
                acc_node_virtual_now(&v->nodes[i], now_us);
            if (acc_node_live(sc, i, t))
                drive_ms(v, i, t);
        }
        /* relaxed: see virtual_clock. */
        atomic_fetch_add_explicit(&v->clk.precise_ns, UINT64_C(1000000), memory_order_relaxed);
        if ((t + 1) % sc->interval_ms == 0)
            end_round(v, t);
    }
    /* The dead are closed too: nothing may leak. */
    for (int i = 0; i < sc->nodes; i++) {
        res->redis_checks += acc_node_redis_checks(&v->nodes[i]);
        if (v->nodes[i].rl != NULL) {
            uint64_t reports, calls;
            acc_node_counters(&v->nodes[i], &reports, &calls);
            res->reports += reports;
            res->calls += calls;
            res->heartbeats += acc_node_heartbeats(&v->nodes[i]);
        }
        acc_node_close(&v->nodes[i]);
    }
    rl_blackhole_stop(&v->cut);
    if (v->errors > 0)
        snprintf(res->note, sizeof res->note, "%d rl_check errors", v->errors);
    rc = rc != 0 || v->errors > 0 || acc_interrupted ? -1 : 0;
    free(v);
    return rc;
}
