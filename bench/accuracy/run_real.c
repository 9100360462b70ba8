/* SPDX-License-Identifier: MIT */
/*
 * The real-time drivers: real clocks and the library's own jittered sync
 * rounds (rl_open), so what they measure includes scheduling noise, the
 * round jitter and Redis latency. Their figures are reported, never gated:
 * on a 2-core machine the load generators, ten or twenty sync threads and
 * redis-server share two cores.
 *
 * --realtime: every node in this process; a few load threads each drive a
 * subset of the nodes, one millisecond at a time against the wall clock.
 * A node that "dies" is only no longer driven: its sync thread still runs
 * and reports the idle key for a few rounds (its demand decays instead of
 * expiring), because nothing short of rl_close stops it in-process.
 * --processes: one process per node (forked after redis-server started,
 * before any instance exists); a dying node's process is SIGKILLed, a real
 * death. Counts come back through a shared anonymous mapping rather than a
 * pipe, so a killed child's counts up to its death are kept.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "acc.h"

static const char check_key[] = "k";

/* Per-node, per-ms counts: each cell has one writer (the node's driver). */
typedef struct rt_counts {
    uint32_t *adm; /* [node * duration + ms] */
    uint32_t *off;
} rt_counts_t;

typedef struct rt_driver {
    const acc_scen_t *sc;
    acc_node_t *nodes;    /* indexed by node */
    uint64_t node_mask;   /* the nodes this driver runs */
    uint64_t start_ns;    /* CLOCK_MONOTONIC time of ms 0 */
    rt_counts_t counts;
    acc_gen_t gens[ACC_MAX_RT_NODES];
    uint64_t lag_ms;
    int errors;
} rt_driver_t;

static void sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
           !acc_interrupted) {
    }
}

static void drive_node_ms(rt_driver_t *d, int i, uint64_t t)
{
    const acc_scen_t *sc = d->sc;
    uint32_t n = acc_gen_next(&d->gens[i], sc->offered(sc, i, t) / 1000.0);
    uint32_t admitted = 0;
    for (uint32_t k = 0; k < n; k++) {
        int rc = rl_check(d->nodes[i].rl, d->nodes[i].limit, check_key, sizeof check_key - 1,
                          1, NULL);
        admitted += rc == RL_ALLOW;
        d->errors += rc < 0;
    }
    size_t cell = (size_t)i * sc->duration_ms + t;
    d->counts.adm[cell] = admitted;
    d->counts.off[cell] = n;
}

/* Drive this driver's nodes ms by ms against the wall clock. When it falls
 * behind it catches up (the ms's requests are still sent, late), and the
 * lag is reported. */
static void *drive(void *arg)
{
    rt_driver_t *d = arg;
    const acc_scen_t *sc = d->sc;
    for (uint64_t t = 0; t < sc->duration_ms && !acc_interrupted; t++) {
        uint64_t due = d->start_ns + t * 1000000u;
        uint64_t now = acc_now_ns();
        if (now < due)
            sleep_until(due);
        else if ((now - due) / 1000000u > d->lag_ms)
            d->lag_ms = (now - due) / 1000000u;
        for (int i = 0; i < sc->nodes; i++)
            if ((d->node_mask >> i & 1) && acc_node_live(sc, i, t))
                drive_node_ms(d, i, t);
    }
    return NULL;
}

static void driver_init(rt_driver_t *d, const acc_opts_t *o, const acc_scen_t *sc,
                        acc_node_t *nodes, rt_counts_t counts, uint64_t mask)
{
    memset(d, 0, sizeof *d);
    d->sc = sc;
    d->nodes = nodes;
    d->node_mask = mask;
    d->counts = counts;
    for (int i = 0; i < sc->nodes; i++)
        acc_gen_init(&d->gens[i], sc->even_only ? ACC_LOAD_EVEN : o->load, o->seed * 1000003u + (uint64_t)i,
                     (double)i / sc->nodes);
}

/* Per-ms, per-node counts into the result's fleet and per-round arrays. */
static void fold_counts(const acc_scen_t *sc, const rt_counts_t *c, acc_result_t *res)
{
    for (int i = 0; i < sc->nodes; i++) {
        for (uint64_t t = 0; t < sc->duration_ms; t++) {
            size_t cell = (size_t)i * sc->duration_ms + t;
            size_t rc = (size_t)(t / sc->interval_ms) * (size_t)sc->nodes + (size_t)i;
            res->adm_ms[t] += c->adm[cell];
            res->node_adm[rc] += c->adm[cell];
            res->node_off[rc] += c->off[cell];
        }
    }
}

static int counts_alloc(rt_counts_t *c, const acc_scen_t *sc, int shared)
{
    size_t cells = (size_t)sc->nodes * sc->duration_ms;
    if (!shared) {
        c->adm = calloc(cells, sizeof *c->adm);
        c->off = calloc(cells, sizeof *c->off);
        return c->adm != NULL && c->off != NULL ? 0 : -1;
    }
    void *p = mmap(NULL, 2 * cells * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    c->adm = p;
    c->off = c->adm + cells;
    return 0;
}

static void counts_free(rt_counts_t *c, const acc_scen_t *sc, int shared)
{
    if (!shared) {
        free(c->adm);
        free(c->off);
    } else if (c->adm != NULL) {
        munmap(c->adm, 2 * (size_t)sc->nodes * sc->duration_ms * sizeof(uint32_t));
    }
}

/* ------------------------------------------------------------ threads */

int acc_run_realtime(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res)
{
    if (sc->nodes > ACC_MAX_RT_NODES)
        return -1; /* the drivers' node sets are 64-bit masks */
    acc_node_t nodes[ACC_MAX_RT_NODES];
    memset(nodes, 0, sizeof nodes);
    acc_fleet_cfg_t fc;
    acc_fleet_cfg_init(&fc, o, sc, "r");
    rl_blackhole_t cut;
    char cut_url[200];
    res->cut_q = -1.0;
    if (acc_cut_setup(&cut, o, sc, &fc, cut_url, sizeof cut_url) != 0)
        return -1;
    rt_counts_t counts = {NULL, NULL};
    int threads = o->driver_threads < sc->nodes ? o->driver_threads : sc->nodes;
    rt_driver_t *drv = calloc((size_t)threads, sizeof *drv);
    pthread_t tid[ACC_MAX_RT_NODES];
    int rc = drv != NULL && counts_alloc(&counts, sc, 0) == 0 ? 0 : -1;
    for (int i = 0; rc == 0 && i < sc->nodes; i++)
        rc = acc_node_open(&nodes[i], &fc, i);
    if (rc == 0 && acc_wait_connected(nodes, sc->nodes, 10000) != 0)
        rc = -1;
    int started = 0;
    uint64_t start = acc_now_ns() + 20000000u;
    for (int k = 0; rc == 0 && k < threads; k++) {
        uint64_t mask = 0;
        for (int i = k; i < sc->nodes; i += threads)
            mask |= UINT64_C(1) << i;
        driver_init(&drv[k], o, sc, nodes, counts, mask);
        drv[k].start_ns = start;
        if (pthread_create(&tid[k], NULL, drive, &drv[k]) != 0)
            rc = -1;
        else
            started++;
    }
    if (rc == 0 && started == threads && sc->flush_at_event) {
        sleep_until(start + sc->event_ms * 1000000u);
        if (acc_flush_prefix(o->redis_url, fc.prefix) <= 0)
            rc = -1;
    }
    if (rc == 0 && started == threads && sc->cut_node >= 0) {
        sleep_until(start + sc->event_ms * 1000000u);
        rl_blackhole_set(&cut, RL_BLACKHOLE_CUT);
        sleep_until(start + sc->heal_ms * 1000000u);
        rl_blackhole_set(&cut, RL_BLACKHOLE_FORWARD);
    }
    for (int k = 0; k < started; k++) {
        pthread_join(tid[k], NULL);
        res->lag_ms = drv[k].lag_ms > res->lag_ms ? drv[k].lag_ms : res->lag_ms;
        rc |= drv[k].errors > 0 ? -1 : 0;
    }
    for (int i = 0; i < sc->nodes; i++)
        acc_node_close(&nodes[i]);
    rl_blackhole_stop(&cut);
    if (rc == 0)
        fold_counts(sc, &counts, res);
    snprintf(res->note, sizeof res->note, "in-process: a dead node is only no longer driven "
                                          "(its sync thread keeps running)");
    counts_free(&counts, sc, 0);
    free(drv);
    return acc_interrupted ? -1 : rc;
}

/* ------------------------------------------------------------ processes */

/* Coordination in the shared mapping: a child sets ready once connected
 * (or failed), the parent then publishes the start time. */
typedef struct rt_sync {
    _Atomic int ready[ACC_MAX_RT_NODES]; /* 1 connected, -1 failed */
    _Atomic uint64_t start_ns;
} rt_sync_t;

static void child_main(const acc_opts_t *o, const acc_scen_t *sc, int i, rt_counts_t counts,
                       rt_sync_t *sy)
{
    acc_node_t nodes[ACC_MAX_RT_NODES];
    memset(nodes, 0, sizeof nodes);
    acc_fleet_cfg_t fc;
    acc_fleet_cfg_init(&fc, o, sc, "p");
    fc.cut_url = o->cut_url;
    fc.cut_node = sc->cut_node;
    int ok = acc_node_open(&nodes[i], &fc, i) == 0 &&
             acc_wait_connected(&nodes[i], 1, 10000) == 0;
    /* release: the parent reads the flag, then our counts after waitpid. */
    atomic_store_explicit(&sy->ready[i], ok ? 1 : -1, memory_order_release);
    uint64_t start = 0;
    /* acquire: pairs with the parent's release store of the start time. */
    while (ok && (start = atomic_load_explicit(&sy->start_ns, memory_order_acquire)) == 0 &&
           !acc_interrupted)
        acc_sleep_ms(1);
    rt_driver_t d;
    driver_init(&d, o, sc, nodes, counts, UINT64_C(1) << i);
    d.start_ns = start;
    if (ok && start != 0)
        drive(&d);
    acc_node_close(&nodes[i]);
    _exit(ok && d.errors == 0 ? 0 : 1);
}

/* Wait until every child is connected; 0, or -1. */
static int wait_ready(const acc_scen_t *sc, rt_sync_t *sy)
{
    for (int tries = 0; tries < 3000 && !acc_interrupted; tries++) {
        int all = 1;
        for (int i = 0; i < sc->nodes; i++) {
            /* acquire: pairs with the child's release. */
            int r = atomic_load_explicit(&sy->ready[i], memory_order_acquire);
            if (r < 0)
                return -1;
            all &= r == 1;
        }
        if (all)
            return 0;
        acc_sleep_ms(5);
    }
    return -1;
}

/* Kill the dying nodes at their time, then reap everyone. */
static int supervise(const acc_scen_t *sc, const pid_t *pid, uint64_t start)
{
    for (int i = 0; i < sc->nodes; i++) {
        if (sc->death_ms[i] == ACC_NEVER || pid[i] <= 0)
            continue;
        sleep_until(start + sc->death_ms[i] * 1000000u);
        kill(pid[i], SIGKILL);
    }
    int rc = 0;
    for (int i = 0; i < sc->nodes; i++) {
        int status = 0;
        if (pid[i] <= 0 || waitpid(pid[i], &status, 0) != pid[i])
            continue;
        int killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
                     sc->death_ms[i] != ACC_NEVER;
        if (!killed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            rc = -1;
    }
    return rc;
}

int acc_run_processes(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res)
{
    if (sc->nodes > ACC_MAX_RT_NODES)
        return -1;
    rt_counts_t counts = {NULL, NULL};
    rt_sync_t *sy = mmap(NULL, sizeof *sy, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    if (sy == MAP_FAILED || counts_alloc(&counts, sc, 1) != 0) {
        if (sy != MAP_FAILED)
            munmap(sy, sizeof *sy);
        return -1;
    }
    memset(sy, 0, sizeof *sy);
    res->cut_q = -1.0;
    /* The proxy runs in this process; the children reach it over TCP. */
    acc_fleet_cfg_t cfc;
    acc_fleet_cfg_init(&cfc, o, sc, "p");
    rl_blackhole_t cut;
    char cut_url[200];
    acc_opts_t co = *o;
    if (acc_cut_setup(&cut, o, sc, &cfc, cut_url, sizeof cut_url) != 0) {
        munmap(sy, sizeof *sy);
        counts_free(&counts, sc, 1);
        return -1;
    }
    if (sc->cut_node >= 0)
        co.cut_url = cut_url;
    o = &co;
    pid_t pid[ACC_MAX_RT_NODES] = {0};
    fflush(stdout); /* a child must not flush the parent's buffered output again */
    int rc = 0;
    for (int i = 0; i < sc->nodes && rc == 0; i++) {
        pid[i] = fork();
        if (pid[i] == 0)
            child_main(o, sc, i, counts, sy);
        if (pid[i] < 0)
            rc = -1;
    }
    if (rc == 0 && wait_ready(sc, sy) != 0)
        rc = -1;
    uint64_t start = acc_now_ns() + 50000000u;
    /* release: the children read their counts' layout before this. */
    atomic_store_explicit(&sy->start_ns, rc == 0 ? start : UINT64_MAX, memory_order_release);
    if (rc != 0) {
        for (int i = 0; i < sc->nodes; i++)
            if (pid[i] > 0)
                kill(pid[i], SIGKILL);
    }
    if (rc == 0 && sc->flush_at_event) {
        acc_fleet_cfg_t fc;
        acc_fleet_cfg_init(&fc, o, sc, "p");
        sleep_until(start + sc->event_ms * 1000000u);
        if (acc_flush_prefix(o->redis_url, fc.prefix) <= 0)
            rc = -1;
    }
    if (rc == 0 && sc->cut_node >= 0) {
        sleep_until(start + sc->event_ms * 1000000u);
        rl_blackhole_set(&cut, RL_BLACKHOLE_CUT);
        sleep_until(start + sc->heal_ms * 1000000u);
        rl_blackhole_set(&cut, RL_BLACKHOLE_FORWARD);
    }
    rc |= supervise(sc, pid, start);
    rl_blackhole_stop(&cut);
    if (rc == 0)
        fold_counts(sc, &counts, res);
    snprintf(res->note, sizeof res->note, "one process per node; a dead node's process "
                                          "is SIGKILLed");
    counts_free(&counts, sc, 1);
    munmap(sy, sizeof *sy);
    return acc_interrupted ? -1 : rc;
}
