/* SPDX-License-Identifier: MIT */
/*
 * rl_accuracy: the accuracy simulator of the global tier. Internal header
 * shared by the files of bench/accuracy/ (one job each: load.c generates
 * offered load, fleet.c opens and inspects nodes, run_virtual.c and
 * run_real.c drive them, result.c checks windows against the bound,
 * scenarios.c defines the scenarios and their targets, many.c is the
 * many-keys scenario, report.c prints tables, CSV and plots, ideal.c
 * holds the ideal centralized limiter and the figures against it, peers.c
 * the peers' strategies as models, compare.c sets them side by side,
 * keys.c the matrix's many-keys cells,
 * plots.c charts them over time, matrix.c runs the fleet matrix and gates
 * its claims, reportmd.c writes REPORT.md, main.c parses the command
 * line). sharecheck.c is a program of its own (rl_share_check).
 */
#ifndef RL_ACC_H
#define RL_ACC_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"
#include "blackhole.h"

/* The matrix runs up to 500 nodes plus its churn joiners; the real-time
 * drivers take at most 64 (their node sets are 64-bit masks). */
#define ACC_MAX_NODES 640
#define ACC_MAX_RT_NODES 64
#define ACC_NEVER UINT64_MAX
#define ACC_WINDOW_MS 1000u
#define ACC_INFO (-1)

/* Set by SIGINT/SIGTERM: drivers stop at the next millisecond and the
 * program still cleans up (nodes closed, redis-server stopped). The only
 * mutable global. */
extern volatile sig_atomic_t acc_interrupted;

typedef enum { ACC_VIRTUAL = 0, ACC_REALTIME = 1, ACC_PROCESSES = 2 } acc_mode_t;
typedef enum { ACC_LOAD_POISSON = 0, ACC_LOAD_EVEN = 1 } acc_load_t;

typedef struct acc_opts {
    acc_mode_t mode;
    acc_load_t load;
    int quick;
    int all_rounds;          /* print every round, not a summary */
    uint64_t seed;
    const char *csv_dir;     /* NULL: no CSV, no plot */
    char redis_url[160];
    unsigned run_tag;        /* makes this run's Redis key prefixes unique */
    int driver_threads;      /* real-time: load generator threads */
    const char *cut_url;     /* processes: the cut node's URL (the parent's proxy) */
    int matrix;              /* run the fleet matrix (matrix.c) */
    const char *report_path; /* write the matrix's report there (REPORT.md) */
    const char *only_family; /* matrix filters: NULL / 0 = every one */
    int only_nodes;
    uint32_t only_interval;
    uint32_t only_keys;      /* 1: the single-key cells; 1000, 100000: those */
} acc_opts_t;

/* ------------------------------------------------------------- load (load.c) */

/* A deterministic per-node, per-key request generator. */
typedef struct acc_gen {
    uint64_t state;  /* splitmix64 */
    double carry;    /* even spreading: the fraction of a request owed */
    acc_load_t kind;
} acc_gen_t;

void acc_gen_init(acc_gen_t *g, acc_load_t kind, uint64_t seed, double phase);
/* Requests arriving in the next millisecond at a mean of per_ms. */
uint32_t acc_gen_next(acc_gen_t *g, double per_ms);
uint64_t acc_mix64(uint64_t x);

/* --------------------------------------------------------- scenarios */

typedef struct acc_scen acc_scen_t;
typedef struct acc_result acc_result_t;
typedef struct acc_verdicts acc_verdicts_t;

/* Offered load of one node at ms t of the run, in requests per second. */
typedef double (*acc_offered_fn)(const acc_scen_t *sc, int node, uint64_t t_ms);
/* Evaluate a scenario's targets on its result. */
typedef void (*acc_judge_fn)(const acc_scen_t *sc, const acc_result_t *res, int gated,
                             acc_verdicts_t *v);

struct acc_scen {
    const char *name;
    const char *what;       /* one line for the table header */
    int nodes;              /* instances, including late joiners */
    uint64_t rate;          /* the limit, per second */
    uint64_t burst;
    uint32_t expected;      /* rl_config_t.expected_nodes */
    uint32_t interval_ms;
    uint64_t duration_ms;   /* a multiple of interval_ms */
    uint64_t event_ms;      /* shift or death (a round boundary); 0: none */
    double load;            /* offered load as a multiple of the limit */
    int even_only;          /* always evenly spaced arrivals, whatever --load says */
    int flush_at_event;     /* delete every Redis key of the scenario at event_ms,
                               as FLUSHALL, an empty restart or eviction would */
    double residual;        /* shift: what set A still offers after it, as a
                               fraction of the limit (all of A together) */
    int cut_node;           /* the node cut off from Redis from event_ms to
                               heal_ms; -1: none */
    uint64_t heal_ms;
    int tiered;             /* the limit is mode=tiered, not global */
    uint32_t hot_every;     /* > 0: the limit marks keys hot at half its rate
                               (hot=0.5) with hot_policy=local and this
                               hot_every; 0: no hot= (every key syncs alike) */
    uint64_t join_ms[ACC_MAX_NODES];  /* first ms a node is driven */
    uint64_t death_ms[ACC_MAX_NODES]; /* first ms it is not (ACC_NEVER) */
    acc_offered_fn offered;
    acc_judge_fn judge;
};

/* Build the named scenario for these options; 0, or -1 if unknown. */
int acc_scen_make(const char *name, const acc_opts_t *o, acc_scen_t *sc);
/* The scenario names in the order a default run uses. */
extern const char *const acc_scen_names[];
int acc_node_live(const acc_scen_t *sc, int node, uint64_t t_ms);

/* --------------------------------------------------------- the bound */

/* In any window of W ms: fleet admitted <= rate * W / 1000 + burst + e. */
typedef struct acc_bound {
    double rate, burst;
    /* A node cut off (docs/operations.md, "When only some nodes are cut
     * off"): its degraded rate on top of the limit, and its tokens and ramp. */
    double cut_rate;
    double e_cut;
    double e_presync; /* (a) pre-sync start */
    double e_moves;   /* (b) one round of share increases before decreases */
    double e_lease;   /* (c) burst re-leased while the old lease is still held */
    double e;         /* the sum */
} acc_bound_t;

void acc_bound_init(acc_bound_t *b, const acc_scen_t *sc);
/* The partial-partition terms for the scenario's cut node, if any. */
void acc_bound_cut(acc_bound_t *b, const acc_scen_t *sc, const acc_result_t *res);
double acc_bound_at(const acc_bound_t *b, double window_ms);

/* --------------------------------------------------------- results */

struct acc_result {
    uint64_t duration_ms;
    uint32_t interval_ms;
    uint32_t rounds;
    int nodes;
    uint32_t *adm_ms;    /* fleet admitted in each ms */
    uint32_t *node_adm;  /* [round * nodes + node] */
    uint32_t *node_off;
    double *sum_q;       /* [round] sum of local rate shares held during it (1 = the limit) */
    double *sum_b;       /* [round] sum of local bursts held during it, tokens */
    int shares_known;    /* virtual mode reads the share words */
    uint32_t step_failures;
    double *step_ms;     /* wall time of each rl__sync_step */
    size_t nsteps, step_cap;
    uint64_t lag_ms;     /* real-time: how far the drivers fell behind */
    double cut_q, cut_b; /* the cut node's share when cut (fraction, tokens);
                            cut_q < 0: not known (the bound assumes 1) */
    char note[160];      /* anything the driver wants on the report */
    uint64_t checks;       /* rl_check calls the drivers made */
    uint64_t redis_checks; /* tiered: checks confirmed in Redis (exact.lua calls) */
    uint64_t reports;      /* virtual: the fleet's key reports (every node's) */
    uint64_t calls;        /* virtual: the fleet's report script calls */
    uint64_t heartbeats;   /* virtual: the fleet's registry writes */
    /* Virtual: every node's offered and admitted count in every ms,
     * [node * duration_ms + t], the arrivals the peers' models and the
     * ideal limiter are fed (compare.c). NULL in the other modes. */
    uint16_t *arr_nt;
    uint16_t *adm_nt;
};

int acc_result_init(acc_result_t *r, const acc_scen_t *sc);
void acc_result_free(acc_result_t *r);
void acc_result_step(acc_result_t *r, double ms);
/* Fleet admitted (or offered) in a round by the nodes in mask. */
uint64_t acc_round_adm(const acc_result_t *r, uint32_t round, uint64_t mask);
uint64_t acc_round_off(const acc_result_t *r, uint32_t round, uint64_t mask);
uint64_t acc_all_nodes(int n);

/* Every sliding window of win_ms (1 ms steps) and every round, against b.
 * The long window catches what recurs (a share lost and regained every few
 * seconds): the bound claims any W, and a 1-s window's E hides a recurrence
 * of up to E per second. */
#define ACC_LONG_WINDOW_MS 10000u
typedef struct acc_windows {
    double worst;         /* max admitted / bound over every window */
    uint64_t worst_at;    /* its start, ms */
    uint64_t worst_adm;
    uint64_t over;        /* windows above the bound */
    double round_worst;   /* max admitted / bound over every round */
    uint32_t round_worst_at;
    uint64_t rounds_over;
} acc_windows_t;

void acc_check_windows(const uint32_t *adm_ms, uint64_t n_ms, uint64_t win_ms,
                       uint32_t interval_ms, const acc_bound_t *b, acc_windows_t *w);
/* Smallest and largest sum of a win_ms window starting in [from, to]. */
void acc_window_range(const uint32_t *adm_ms, uint64_t n_ms, uint64_t win_ms, uint64_t from,
                      uint64_t to, uint64_t *lo, uint64_t *hi);
double acc_percentile(double *v, size_t n, double p); /* sorts v */

/* --------------------------------------------------------- verdicts */

typedef struct acc_verdict {
    char scenario[16];
    char target[112];
    char measured[160];
    int gated; /* 1: counts for the exit status (virtual mode only); 0: a
                  target, reported only; ACC_INFO: a figure, no target */
    int pass;
} acc_verdict_t;

struct acc_verdicts {
    acc_verdict_t v[256]; /* every scenario's, with room: a verdict that
                             does not fit is counted as a gated miss */
    int n;
    int dropped;
};

void acc_verdict(acc_verdicts_t *vs, const char *scen, int gated, int pass, const char *target,
                 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* The window/round check against the bound, as a verdict. */
void acc_judge_bound(const acc_scen_t *sc, const acc_result_t *res, int gated,
                     acc_verdicts_t *v);

/* --------------------------------------------------------- fleet (fleet.c) */

struct rl_test_clock;

typedef struct acc_node {
    rl_t *rl;
    int limit;      /* the scenario's limit id */
    int closed;
    char name[16];
} acc_node_t;

typedef struct acc_fleet_cfg {
    const char *redis_url;
    char prefix[40];
    uint32_t interval_ms;
    uint32_t expected;
    uint32_t max_keys;
    struct rl_test_clock *clock; /* NULL: real clocks */
    const char *cut_url;         /* the cut node's Redis URL (the proxy) */
    int cut_node;                /* -1: none */
    int manual;                  /* rounds only through rl__sync_step */
    int tiered;                  /* the limit is mode=tiered */
    uint32_t hot_every;          /* acc_scen_t.hot_every */
    uint64_t rate, burst;
} acc_fleet_cfg_t;

void acc_fleet_cfg_init(acc_fleet_cfg_t *c, const acc_opts_t *o, const acc_scen_t *sc,
                        const char *mode_tag);
int acc_node_open(acc_node_t *n, const acc_fleet_cfg_t *c, int index);
void acc_node_close(acc_node_t *n);
/* Wait (bounded) until every node is connected with its script loaded. */
int acc_wait_connected(acc_node_t *nodes, int n, uint32_t timeout_ms);
/* The local share one node holds of its limit, summed over its keys:
 * rate as a fraction of the limit and burst in tokens. 0 if no key. */
int acc_node_share(acc_node_t *n, double *q, double *b);
int acc_node_step(acc_node_t *n, uint64_t virtual_ms);
void acc_node_counters(acc_node_t *n, uint64_t *reports, uint64_t *calls);
/* The node registry writes (one heartbeat a round) Redis acknowledged. */
uint64_t acc_node_heartbeats(acc_node_t *n);
/* Tiered: the checks this node sent to Redis to confirm. */
uint64_t acc_node_redis_checks(acc_node_t *n);
/* Tiered, virtual time: the exact script's now (us), as the sync rounds'. */
void acc_node_virtual_now(acc_node_t *n, uint64_t us);

/* Redis's own counters: the report script's (INFO commandstats) and the
 * server's CPU time (INFO cpu, user + sys). */
typedef struct acc_redis_stats {
    uint64_t evalsha_calls;
    uint64_t evalsha_usec;
    double cpu_s;
    /* On a Redis Cluster (redis+cluster://) the figures above are summed
     * over its masters; these say how many, and each one's script time. */
    int servers;
    uint64_t usec_of[16];
} acc_redis_stats_t;

int acc_redis_stats(const char *url, acc_redis_stats_t *st);
/* Delete every key under a fleet's key prefix (key hashes and the node
 * registry); the number deleted, or -1. */
long long acc_flush_prefix(const char *url, const char *prefix);

/* --------------------------------------------------------- cut */

/* The partition scenario puts one node behind a proxy to Redis
 * (tests/blackhole.h) that can cut it off: while cut, the node's rounds
 * fail at once (a refused or reset connection), not after a round
 * deadline. Start that proxy to the run's Redis and point the fleet's cut
 * node at it: 0 (nothing to do without a cut node), or -1;
 * rl_blackhole_stop ends it. */
int acc_cut_setup(rl_blackhole_t *c, const acc_opts_t *o, const acc_scen_t *sc,
                  acc_fleet_cfg_t *fc, char *url, size_t url_len);
/* Wait (bounded, real time) until node n's connected counter is `want`. */
int acc_wait_state(acc_node_t *n, int want, uint32_t timeout_ms);

/* --------------------------------------------------------- drivers */

int acc_run_virtual(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res);
int acc_run_realtime(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res);
int acc_run_processes(const acc_opts_t *o, const acc_scen_t *sc, acc_result_t *res);
int acc_run_many(const acc_opts_t *o, acc_verdicts_t *v);

/* --------------------------------------------------------- report (report.c) */

void acc_print_scenario(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *res);
void acc_print_verdicts(const acc_verdicts_t *v, int from, int gated);
int acc_write_csv(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *res);
int acc_write_summary(const acc_opts_t *o, const acc_verdicts_t *v);
int acc_mkdir_p(const char *dir);
const char *acc_mode_name(acc_mode_t m);

/* --------------------------------------- the ideal and the peers (ideal.c, peers.c) */

/* A GCRA bucket in ms: what one centralized limiter does with every
 * request of the fleet (rate per s, burst tokens). */
typedef struct acc_gcra {
    double tat, t, tau;
} acc_gcra_t;

void acc_gcra_init(acc_gcra_t *g, double rate, double burst);
int acc_gcra_take(acc_gcra_t *g, double now_ms);

/* What a strategy cost: remote operations (Redis round trips, a pipeline
 * or a script call counting once; for the peers without Redis, their RPCs
 * to a peer or a server). */
typedef struct acc_cost {
    uint64_t ops;
    const char *unit; /* "Redis" or "RPC" */
    uint32_t *ops_nt; /* NULL, or each timed op also counted by its sender and
                         ms, [node * ms + t] (keys.c batches them over keys) */
    uint64_t solo;    /* of ops, those tied to one request (never batched) */
} acc_cost_t;

/* A strategy fed a run's arrivals (arr, [node * ms + t]) writes what it
 * admits into adm (same layout). */
typedef void (*acc_strategy_fn)(const acc_scen_t *sc, const uint16_t *arr, uint16_t *adm,
                                acc_cost_t *cost);

typedef struct acc_strategy {
    const char *name;
    const char *what;      /* the one-line model, for the report */
    acc_strategy_fn run;
    int uses_interval;     /* its figures move with sc->interval_ms */
} acc_strategy_t;

/* NULL-terminated: the ideal first, then the peers' models (peers.c). */
extern const acc_strategy_t acc_strategies[];

/* The figures of issue-style accuracy reporting, against the ideal fed the
 * same arrivals. Fractions (0.01 = 1%). */
typedef struct acc_figs {
    double wrong_allow;   /* decisions the strategy allowed and the ideal refused */
    double wrong_refuse;  /* and the other way */
    double rate_err;      /* mean |admitted - limit| / limit over 1-s windows
                             (10 ms steps) whose offered load exceeds the limit */
    double worst;         /* largest sliding 1-s window / limit */
    double under90;       /* part of those windows admitting < 90% of the limit */
    double ops_node_s;    /* remote ops per second per live node */
    uint64_t windows;     /* over-limit windows the two figures above average */
    uint64_t decisions;
} acc_figs_t;

void acc_figures(const acc_scen_t *sc, const uint16_t *arr, const uint16_t *adm,
                 const uint16_t *ideal, uint64_t ops, acc_figs_t *f);
/* Mean number of live nodes over the run (the per-node cost's divisor). */
double acc_mean_live(const acc_scen_t *sc);

/* Our run's figures beside every strategy's, fed the same arrivals: one
 * table, printed (compare.c). rows/nrows, if not NULL, receive them. */
typedef struct acc_row {
    char strategy[40];
    acc_figs_t f;
    double of_bound; /* ours: worst sliding 1-s window / the stated bound
                        (README, "The overshoot bound"); 0 for the others */
} acc_row_t;

#define ACC_ROWS_MAX 16
/* Every strategy's sliding 1-s window over time on the run's arrivals, a
 * CSV and (gnuplot) a chart in the CSV directory (plots.c). */
int acc_plot_strategies(const acc_opts_t *o, const acc_scen_t *sc, const acc_result_t *res);
/* "ours: global", "ours: tiered", "ours: hot": the policy the scenario ran. */
const char *acc_policy_name(const acc_scen_t *sc);
int acc_compare(const acc_scen_t *sc, const acc_result_t *res, const char *ours,
                acc_row_t *rows, int *nrows, int print);

/* ------------------------------------------------ the matrix (matrix.c, reportmd.c) */

extern const char *const acc_families[];

typedef struct acc_cell {
    char family[16];
    int nodes;             /* the fleet size N (churning has N/4 joiners more) */
    uint32_t keys;         /* keys of the limit (0 or 1: the single-key matrix) */
    uint32_t run_keys;     /* of them, the keys the fleet ran (keys.c's sample) */
    uint32_t interval_ms;
    uint64_t duration_ms;
    acc_row_t rows[ACC_ROWS_MAX]; /* ours first, then the ideal and the peers,
                                     then (headline cell) our other policies */
    int nrows;
} acc_cell_t;

#define ACC_CELLS_MAX 128
#define ACC_MX_RATE 10000u /* the matrix's limit, per s; its burst is a tenth */
typedef struct acc_matrix {
    acc_cell_t cells[ACC_CELLS_MAX];
    int ncells;
    int quick;
    uint64_t seed;
    double wall_s;
} acc_matrix_t;

/* Build one matrix cell's scenario (name must outlive sc); 0, or -1. */
int acc_matrix_scen(const char *family, int nodes, uint32_t interval_ms, int quick,
                    acc_scen_t *sc, char *name, size_t name_len);
/* The same for a run of duration_ms (a multiple of the interval). */
int acc_matrix_scen_len(const char *family, int nodes, uint32_t interval_ms, int quick,
                        uint64_t duration_ms, acc_scen_t *sc, char *name, size_t name_len);
int acc_run_matrix(const acc_opts_t *o, acc_verdicts_t *v);
/* One many-keys cell (keys.c): the family's shape on `keys` keys of one
 * limit, ours and every strategy's figures pooled over the keys. */
int acc_keys_cell(const acc_opts_t *o, const char *family, int nodes, uint32_t interval_ms,
                  uint32_t keys, acc_cell_t *cell);
/* REPORT.md from the full matrix (NULL: left out) and the quick one. */
int acc_write_report(const acc_opts_t *o, const acc_matrix_t *full, const acc_matrix_t *quick);

/* fleet.c: the monotonic clock, for real-time pacing and wall-time figures. */
uint64_t acc_now_ns(void);
void acc_sleep_ms(unsigned ms);

#endif
