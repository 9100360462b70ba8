/* SPDX-License-Identifier: MIT */
/*
 * Waits and settles across a fleet: three node processes on a private
 * redis-server share one key of a global limit, 100/s with a burst of 10.
 *
 * Pacing: every node's workers wait for the key's tokens (rl_wait's turn:
 * rl_reserve_wait, its non-blocking form, which admits by the same charge
 * and tells when the turn comes) for 10 s with a max_wait that covers the
 * queue. The fleet paces at the limit's rate: the turns that come within
 * the 10 s are 1000 within the band (docs/bounds.md: rate x W + burst + E
 * above; the share rule's reserve and the start below), and none is
 * refused. A sync reply that capped what a node owes at its share's burst
 * (the waiters' turns queued past it) handed the queued turns out again.
 *
 * Debt: one node settles a reservation far above its estimate, the others
 * check at twice their part of the rate. The fleet's tokens, each
 * reservation at its settled amount, stay within rate x W + burst + E
 * (a settled debt adds nothing: it is charged), and Redis is told the
 * settled tokens. A sync reply that capped the debt at the share's burst
 * let the node admit again at once.
 *
 * The nodes run on virtual time, in lockstep (as tests/test_evict.c): each
 * process keeps a clock of its own set to the same instants, runs a 100 ms
 * round in 10 ms steps, then the nodes sync one after another (the script
 * reads the virtual time), so every figure is the same on any machine;
 * before the first round the nodes sync at the start's instant until all
 * are healthy and have seen each other.
 */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "procs.h"
#include "instance.h"
#include "sync/sync.h"

enum {
    NODES = 3,
    RATE = 100,  /* per second */
    BURST = 10,
    INTERVAL_MS = 100,
    STEPS = 10,  /* 10 ms steps a round */
    PACE_ROUNDS = 100, /* 10 s */
    DEBT_ROUNDS = 200, /* 20 s: the debt is paid back well within them */
    WORKERS = 8, /* per node: the queue runs past a node's share of the burst */
    MAX_WAIT_MS = 1000,
    AHEAD = MAX_WAIT_MS / 10 + 2, /* steps past a round a turn may come in */
    /* Debt: node 0 reserves DEBT_EST at round DEBT_AT and settles it at
     * DEBT_ACTUAL two rounds later; every node checks the key 7 times a
     * round (about twice its part of the rate). */
    DEBT_AT = 30,
    DEBT_EST = 5,
    DEBT_ACTUAL = 300,
    CHECKS_PER_ROUND = 7,
};

enum { OP_ROUND, OP_SYNC, OP_STATS, OP_CLOSE };
enum { RUN_PACE, RUN_DEBT };

static const char secret[] = "reserve-fleet-secret-0123456789";
static const uint64_t START_NS = UINT64_C(7000000000000);

typedef struct cmd {
    int op;
    int round;
} cmd_t;

/* A round's outcome on one node: the tokens whose work may start in each
 * step from the round's first (a turn's, up to AHEAD steps later). */
typedef struct round_out {
    uint32_t tokens[STEPS + AHEAD];
    uint32_t refused; /* waits refused, or reserve/settle not as planned */
    uint32_t bad;     /* an answer that is neither allow nor deny */
} round_out_t;

typedef struct sync_out {
    int rc;
    int health;
} sync_out_t;

typedef struct stats_out {
    uint64_t reserved, denied, settled_up, debt_tokens;
} stats_out_t;

/* ------------------------------------------------------------ a node */

typedef struct node {
    int idx, run;
    rl_test_clock_t clk;
    rl_t *rl;
    int lim;
    uint64_t next_ns[WORKERS]; /* a worker's next call: when its turn came */
    rl_reservation_t res;      /* the debt run's reservation (node 0) */
} node_t;

static const char KEY[] = "vendor-api";

static void node_open(node_t *n, const char *url, int run)
{
    n->run = run;
    atomic_init(&n->clk.precise_ns, START_NS);
    n->clk.coarse_tick_ns = 0;
    rl_config_t c;
    rl_config_init(&c);
    char name[16];
    snprintf(name, sizeof name, "rf%d", n->idx);
    c.redis_url = url;
    c.node_id = name;
    c.sync_interval_ms = INTERVAL_MS;
    c.expected_nodes = NODES;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = run == RUN_PACE ? "rfp" : "rfd";
    c.clock = rl_test_clock_fn;
    c.clock_ud = &n->clk;
    c.reconnect_max_ms = 50;
    if (rl__open(&n->rl, &c, 1) != 0)
        _exit(5);
    char spec[64];
    snprintf(spec, sizeof spec, "name=pace rate=%d/s burst=%d", RATE, BURST);
    rl_limit_t lim;
    char err[128];
    if (rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err) != 0 ||
        (n->lim = rl_limit_add(n->rl, &lim)) < 0)
        _exit(6);
    for (uint64_t t0 = rl_test_now_ns();;) {
        rl_sync_counters_t sc;
        rl__sync_counters(n->rl->sync, &sc);
        if (sc.connected == 1)
            break;
        if (rl_test_now_ns() - t0 > (uint64_t)RL_TEST_WAIT_MS * 1000000u)
            _exit(8);
        rl_test_sleep_ms(5);
    }
    for (int w = 0; w < WORKERS; w++)
        n->next_ns[w] = START_NS;
    rl_reservation_init(&n->res);
}

/* Tokens whose work starts at instance time at_ns, in the round's steps. */
static void count_at(round_out_t *o, uint64_t round_ns, uint64_t at_ns, uint32_t tokens)
{
    uint64_t step = (at_ns - round_ns) / 10000000u;
    if (step >= STEPS + AHEAD)
        o->bad++;
    else
        o->tokens[step] += tokens;
}

/* A worker whose turn has come waits for the next: rl_wait's turn, taken
 * by its non-blocking form (the work starts ready_in_ms later; the tokens
 * are the worker's: settled at the estimate, nothing moves). */
static void pace_step(node_t *n, uint64_t now_ns, uint64_t round_ns, round_out_t *o)
{
    for (int w = 0; w < WORKERS; w++) {
        if (n->next_ns[w] > now_ns)
            continue;
        rl_reservation_t r;
        rl_reservation_init(&r);
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_reserve_wait(n->rl, n->lim, KEY, sizeof KEY - 1, 1, MAX_WAIT_MS,
                                 MAX_WAIT_MS + 1000, &r, &d);
        if (rc == RL_DENY) {
            o->refused++;
            n->next_ns[w] = now_ns + (uint64_t)d.retry_after_ms * 1000000u;
            continue;
        }
        if (rc != RL_ALLOW || rl_settle(n->rl, &r, 1) != 0) {
            o->bad++;
            continue;
        }
        uint64_t ready = now_ns + r.ready_in_ms * 1000000u;
        count_at(o, round_ns, ready, 1);
        n->next_ns[w] = ready;
    }
}

/* Plain checks at twice a node's part of the rate; node 0 reserves, then
 * settles far above its estimate. */
static void debt_step(node_t *n, int round, int step, uint64_t now_ns, uint64_t round_ns,
                      round_out_t *o)
{
    if (n->idx == 0 && round == DEBT_AT && step == 0) {
        /* Its bucket is as empty as the others' (they all check at twice
         * their part): the reservation waits for its turn. */
        if (rl_reserve_wait(n->rl, n->lim, KEY, sizeof KEY - 1, DEBT_EST, MAX_WAIT_MS, 60000,
                            &n->res, NULL) != RL_ALLOW)
            o->refused++;
        return;
    }
    if (n->idx == 0 && round == DEBT_AT + 2 && step == 0) {
        if (rl_settle(n->rl, &n->res, DEBT_ACTUAL) != 0)
            o->refused++;
        return;
    }
    if ((step * CHECKS_PER_ROUND) / STEPS == ((step + 1) * CHECKS_PER_ROUND) / STEPS)
        return;
    int rc = rl_check(n->rl, n->lim, KEY, sizeof KEY - 1, 1, NULL);
    o->bad += rc != RL_ALLOW && rc != RL_DENY;
    if (rc == RL_ALLOW)
        count_at(o, round_ns, now_ns, 1);
}

static void node_round(node_t *n, int round, round_out_t *o)
{
    memset(o, 0, sizeof *o); /* padding too: the bytes go down a pipe */
    uint64_t round_ns = START_NS + (uint64_t)round * STEPS * 10000000u;
    for (int step = 0; step < STEPS; step++) {
        uint64_t now_ns = round_ns + (uint64_t)step * 10000000u;
        atomic_store(&n->clk.precise_ns, now_ns);
        if (n->run == RUN_PACE)
            pace_step(n, now_ns, round_ns, o);
        else
            debt_step(n, round, step, now_ns, round_ns, o);
    }
}

static void node_main(int idx, const char *url, int run, int in, int out)
{
    static node_t n;
    n.idx = idx;
    node_open(&n, url, run);
    rl_test_put(out, &idx, sizeof idx); /* ready */
    for (;;) {
        cmd_t k;
        rl_test_get(in, &k, sizeof k);
        if (k.op == OP_ROUND) {
            round_out_t o;
            node_round(&n, k.round, &o);
            rl_test_put(out, &o, sizeof o);
        } else if (k.op == OP_SYNC) {
            atomic_store(&n.clk.precise_ns,
                         START_NS + (uint64_t)(k.round + 1) * STEPS * 10000000u);
            sync_out_t o;
            memset(&o, 0, sizeof o);
            o.rc = rl__sync_step(n.rl->sync, atomic_load(&n.clk.precise_ns) / 1000000u);
            rl_stats_t st;
            rl_stats_init(&st);
            rl_stats(n.rl, &st);
            o.health = st.health;
            rl_test_put(out, &o, sizeof o);
        } else if (k.op == OP_STATS) {
            stats_out_t o;
            memset(&o, 0, sizeof o);
            rl_reserve_stats_t st;
            rl_reserve_stats_init(&st);
            if (rl_reserve_stats(n.rl, &st) != 0)
                _exit(9);
            o.reserved = st.reserved;
            o.denied = st.denied;
            o.settled_up = st.settled_up;
            o.debt_tokens = st.debt_tokens;
            rl_test_put(out, &o, sizeof o);
        } else {
            rl_close(n.rl);
            _exit(0);
        }
    }
}

/* ---------------------------------------------------------- the parent */

typedef struct fleet {
    rl_test_procs_t procs;
} fleet_t;

static void fleet_kill(void *p)
{
    fleet_t *f = p;
    rl_test_procs_stop(&f->procs);
    free(f);
}

static void proc_main(int idx, int in, int out, void *run)
{
    node_main(idx, rl_test_redis_url(), *(const int *)run, in, out);
}

static fleet_t *fleet_start(int run)
{
    fleet_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    rl_test_hold(f, fleet_kill);
    rl_test_procs_start(&f->procs, NODES, proc_main, &run);
    return f;
}

/* Rounds at the start's instant, before any key is checked: WARM_PASSES
 * of them, and more while a node is not healthy. A connect the machine
 * made slow (its deadline is real time) must not start a node degraded,
 * on its on_failure ramp; every node has seen the others in the registry;
 * and the same number of rounds on any machine that connects in time. */
enum { WARM_PASSES = 6 };
static void fleet_warm(fleet_t *f)
{
    for (int pass = 0;; pass++) {
        ck_assert_msg(pass < 40, "the fleet was not healthy after 40 rounds");
        int healthy = 0;
        for (int i = 0; i < NODES; i++) {
            cmd_t k = {OP_SYNC, -1};
            rl_test_put(f->procs.to[i], &k, sizeof k);
            sync_out_t o;
            rl_test_get(f->procs.from[i], &o, sizeof o);
            healthy += o.rc == 0 && o.health == RL_HEALTH_HEALTHY;
        }
        if (pass + 1 >= WARM_PASSES && healthy == NODES)
            return;
    }
}

static void send_one(fleet_t *f, int i, int op, int round)
{
    cmd_t k = {op, round};
    rl_test_put(f->procs.to[i], &k, sizeof k);
}

/* Tokens whose work started in each 10 ms step, the fleet's. */
static uint32_t adm[DEBT_ROUNDS * STEPS + AHEAD + STEPS];

/* Every round: the nodes' steps at once, then their syncs one after
 * another, in an order that turns with the rounds. The total refused. */
static uint32_t run_rounds(fleet_t *f, int rounds)
{
    uint32_t refused = 0;
    memset(adm, 0, sizeof adm);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < NODES; i++)
            send_one(f, i, OP_ROUND, round);
        for (int i = 0; i < NODES; i++) {
            round_out_t o;
            rl_test_get(f->procs.from[i], &o, sizeof o);
            ck_assert_uint_eq(o.bad, 0);
            refused += o.refused;
            for (int s = 0; s < STEPS + AHEAD; s++)
                adm[round * STEPS + s] += o.tokens[s];
        }
        for (int j = 0; j < NODES; j++) {
            int i = (round + j) % NODES;
            send_one(f, i, OP_SYNC, round);
            sync_out_t o;
            rl_test_get(f->procs.from[i], &o, sizeof o);
            ck_assert_msg(o.rc == 0, "node %d's round %d failed", i, round);
        }
    }
    return refused;
}

static stats_out_t fleet_stats(fleet_t *f)
{
    stats_out_t sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < NODES; i++) {
        send_one(f, i, OP_STATS, 0);
        stats_out_t o;
        rl_test_get(f->procs.from[i], &o, sizeof o);
        sum.reserved += o.reserved;
        sum.denied += o.denied;
        sum.settled_up += o.settled_up;
        sum.debt_tokens += o.debt_tokens;
    }
    return sum;
}

static void fleet_close(fleet_t *f)
{
    for (int i = 0; i < NODES; i++) {
        send_one(f, i, OP_CLOSE, 0);
        rl_test_procs_reap(&f->procs, i);
    }
}

/* The most any window of `steps` steps admitted, over [0, end). */
static long worst_window(int steps, int end)
{
    long sum = 0, worst = 0;
    for (int s = 0; s < end; s++) {
        sum += adm[s];
        if (s >= steps)
            sum -= adm[s - steps];
        if (sum > worst)
            worst = sum;
    }
    return worst;
}

static long total(int from, int to)
{
    long sum = 0;
    for (int s = from; s < to; s++)
        sum += adm[s];
    return sum;
}

/* The band's E (docs/bounds.md): E_pre + rate x I + burst, with E_pre =
 * N x ceil(burst / N) - burst (expected_nodes is the fleet). */
static long band_e(void)
{
    long e_pre = NODES * ((BURST + NODES - 1) / NODES) - BURST;
    return e_pre + (long)RATE * INTERVAL_MS / 1000 + BURST;
}

START_TEST(fleet_paces_one_key_at_its_rate)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    fleet_t *f = fleet_start(RUN_PACE);
    fleet_warm(f);
    uint32_t refused = run_rounds(f, PACE_ROUNDS);
    stats_out_t st = fleet_stats(f);
    fleet_close(f);
    const int end = PACE_ROUNDS * STEPS; /* the turns that came within the 10 s */
    long got = total(0, end);
    long want = (long)RATE * PACE_ROUNDS * INTERVAL_MS / 1000;
    long e = band_e();
    long worst1 = worst_window(100, end);
    fprintf(stderr, "test_reserve_fleet: pacing: %ld turns in %d s (limit %ld, burst %d, "
            "band E %ld), worst 1-s window %ld, %llu waits admitted, %u refused\n", got,
            PACE_ROUNDS * INTERVAL_MS / 1000, want, BURST, e, worst1,
            (unsigned long long)st.reserved, refused);
    ck_assert_uint_eq(refused, 0);
    ck_assert_uint_eq(st.denied, 0);
    /* rate x W + burst + E above; below, the rate less the band (the share
     * rule keeps a reserve for new nodes, and the start is pre-sync). */
    ck_assert_int_le(got, want + BURST + e);
    ck_assert_int_ge(got, want - e);
    ck_assert_int_le(worst1, RATE + BURST + e);
}
END_TEST

/* The admitted ('a') tokens Redis holds for the key. */
static long long redis_admitted(void)
{
    redisContext *r = rl_test_redis_client(0);
    redisReply *keys = redisCommand(r, "KEYS {rfd:v1:pace:*");
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(keys->elements, 1);
    redisReply *h = redisCommand(r, "HGET %s a", keys->element[0]->str);
    long long a = h->type == REDIS_REPLY_STRING ? atoll(h->str) : -1;
    freeReplyObject(h);
    freeReplyObject(keys);
    return a;
}

START_TEST(a_settled_debt_survives_the_sync_replies)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    fleet_t *f = fleet_start(RUN_DEBT);
    fleet_warm(f);
    uint32_t refused = run_rounds(f, DEBT_ROUNDS);
    stats_out_t st = fleet_stats(f);
    long long in_redis = redis_admitted();
    fleet_close(f);
    /* The reservation's work at its settled amount, from its start. */
    adm[DEBT_AT * STEPS] += DEBT_ACTUAL;
    const int end = DEBT_ROUNDS * STEPS;
    long got = total(0, end);
    long e = band_e();
    /* From full buckets, at every admission the fleet's tokens are at most
     * rate x t + burst + E (a settled debt is charged to its node's bucket,
     * which admits again only once it is paid back): so over the run,
     * whose last rounds come after the debt is paid. */
    long bound = (long)RATE * DEBT_ROUNDS * INTERVAL_MS / 1000 + BURST + e;
    fprintf(stderr, "test_reserve_fleet: debt: %ld tokens in %d s (bound %ld), Redis "
            "counts %lld\n", got, DEBT_ROUNDS * INTERVAL_MS / 1000, bound, in_redis);
    ck_assert_uint_eq(refused, 0);
    ck_assert_uint_eq(st.settled_up, 1);
    ck_assert_uint_eq(st.debt_tokens, DEBT_ACTUAL - DEBT_EST);
    ck_assert_int_le(got, bound);
    /* Not a starved fleet either: the rate less the band and the debt. */
    ck_assert_int_ge(got, bound - 2 * e - BURST - DEBT_ACTUAL);
    /* Redis was told tokens: every check admitted, and the reservation at
     * its settled amount (the last round's sync came after its checks). */
    ck_assert_int_eq(in_redis, got);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reserve_fleet");
    TCase *tc = tcase_create("fleet");
    /* A hang guard, not a deadline: a few seconds plain, a minute or more
     * under the sanitizers on a loaded box. */
    tcase_set_timeout(tc, 300);
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_test(tc, fleet_paces_one_key_at_its_rate);
    tcase_add_test(tc, a_settled_debt_survives_the_sync_replies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
