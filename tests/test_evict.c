/* SPDX-License-Identifier: MIT */
/*
 * When Redis loses the limiter's keys: five node processes on a private
 * redis-server under `maxmemory` with allkeys-lru, cold keys flooding it
 * and 20 hot keys offered twice their rate. Hot hashes are lost to the
 * eviction, deleted outright every few rounds (the eviction of every hot
 * key at once), flushed mid-window (FLUSHALL) and lost to a restart of an
 * empty server; every 1-s and 10-s window of every hot key must stay
 * within the band of docs/bounds.md. Then rl_close must not make the
 * expired cold keys again. And the eviction policy is warned of, once.
 *
 * The nodes run on virtual time, in lockstep: each process keeps a clock
 * of its own, set to the same instants, checks its keys for a 100 ms round
 * in 10 ms steps, then every node syncs (rl__sync_step, the script reading
 * the virtual time) and the next round waits for all of them. What is admitted is counted per
 * step, so the bound is checked on virtual time, never on how fast a
 * loaded machine ran the processes.
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
    NODES = 5,
    HOT = 20,
    STEPS = 10,            /* 10 ms steps a 100 ms round */
    COLD_PER_ROUND = 10,   /* new cold keys per node and round */
    HOT_PER_ROUND = 4,     /* checks per node, hot key and round: 2x in all */
    RATE = 100,            /* per second, every hot and cold key */
    BURST = 30,
    INTERVAL_MS = 100,
    STORM_FROM = 30,       /* rounds in which every hot hash is deleted */
    STORM_TO = 120,
    STORM_EVERY = 4,
    FLUSH_AT = 75,         /* FLUSHALL, a round before a storm's deletion:
                              a loss again while the last one's hold ends */
    RESTART_AT = 140,      /* an empty server in place of the old one */
    ROUNDS = 230,
};

static const char secret[] = "evict-secret-0123456789abcdef";
static const uint64_t START_NS = UINT64_C(9000000000000);

/* ------------------------------------------------------------ a node */

typedef struct cmd {
    int op; /* OP_* */
    int round;
} cmd_t;

enum { OP_ROUND, OP_SYNC, OP_CLOSE };

typedef struct round_out {
    uint16_t admitted[HOT][STEPS];
    uint32_t bad; /* a check that answered neither allow nor deny */
} round_out_t;

typedef struct sync_out {
    int rc;
    int health;
} sync_out_t;

typedef struct close_out {
    uint64_t close_us;
    uint32_t evict_warnings;
} close_out_t;

static _Atomic uint32_t evict_warnings;

static void node_log(void *ud, int32_t level, const char *msg)
{
    (void)ud;
    if (level == RL_LOG_WARN && strstr(msg, "can evict this library's keys") != NULL)
        atomic_fetch_add(&evict_warnings, 1);
}

typedef struct node {
    int idx;
    rl_test_clock_t clk;
    rl_t *rl;
    int hot, cold;
    uint32_t cold_n; /* cold keys made so far */
} node_t;

static int add_limit(rl_t *rl, const char *name)
{
    char spec[64];
    snprintf(spec, sizeof spec, "name=%s rate=%d/s burst=%d", name, RATE, BURST);
    rl_limit_t lim;
    char err[128];
    if (rl_limit_parse_sized(&lim, sizeof lim, spec, err, sizeof err) != 0)
        _exit(6);
    return rl_limit_add(rl, &lim);
}

/* The node's instance, on its own clock, connected with the script loaded. */
static void node_open(node_t *n, const char *url)
{
    atomic_store(&evict_warnings, 0); /* this process's own, not its parent's */
    atomic_init(&n->clk.precise_ns, START_NS);
    n->clk.coarse_tick_ns = 0;
    rl_config_t c;
    rl_config_init(&c);
    char name[16];
    snprintf(name, sizeof name, "ev%d", n->idx);
    c.redis_url = url;
    c.node_id = name;
    c.sync_interval_ms = INTERVAL_MS;
    c.expected_nodes = NODES;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "ev";
    c.clock = rl_test_clock_fn;
    c.clock_ud = &n->clk;
    c.reconnect_max_ms = 50;
    c.log = node_log;
    if (rl__open(&n->rl, &c, 1) != 0)
        _exit(5);
    n->hot = add_limit(n->rl, "hot");
    n->cold = add_limit(n->rl, "cold");
    if (n->hot < 0 || n->cold < 0)
        _exit(7);
    for (uint64_t t0 = rl_test_now_ns();;) {
        rl_sync_counters_t sc;
        rl__sync_counters(n->rl->sync, &sc);
        if (sc.connected == 1)
            return;
        if (rl_test_now_ns() - t0 > (uint64_t)RL_TEST_WAIT_MS * 1000000u)
            _exit(8);
        rl_test_sleep_ms(5);
    }
}

/* One round's checks, in 10 ms steps: each hot key at 4 of the 10 steps
 * (a phase per node and key), and the round's new cold keys. */
static void node_round(node_t *n, int round, round_out_t *o)
{
    memset(o, 0, sizeof *o);
    char key[32];
    for (int step = 0; step < STEPS; step++) {
        atomic_store(&n->clk.precise_ns,
                     START_NS + ((uint64_t)round * STEPS + (uint64_t)step) * 10000000u);
        for (int h = 0; h < HOT; h++) {
            if ((step + n->idx + h) % 5 > 1)
                continue;
            int len = snprintf(key, sizeof key, "hot-%d", h);
            int rc = rl_check(n->rl, n->hot, key, (size_t)len, 1, NULL);
            o->bad += rc != RL_ALLOW && rc != RL_DENY;
            o->admitted[h][step] += rc == RL_ALLOW;
        }
        for (int j = 0; j < COLD_PER_ROUND / STEPS; j++) {
            int len = snprintf(key, sizeof key, "cold-%d-%u", n->idx, n->cold_n++);
            int rc = rl_check(n->rl, n->cold, key, (size_t)len, 1, NULL);
            o->bad += rc != RL_ALLOW && rc != RL_DENY;
        }
    }
}

/* A node process: answers the parent's commands until it is told to
 * close. Never returns. */
static void node_main(int idx, const char *url, int in, int out)
{
    static node_t n;
    n.idx = idx;
    node_open(&n, url);
    rl_test_put(out, &idx, sizeof idx); /* ready */
    for (;;) {
        cmd_t k;
        rl_test_get(in, &k, sizeof k);
        if (k.op == OP_ROUND) {
            round_out_t o;
            memset(&o, 0, sizeof o); /* padding too: the bytes go down a pipe */
            node_round(&n, k.round, &o);
            rl_test_put(out, &o, sizeof o);
        } else if (k.op == OP_SYNC) {
            atomic_store(&n.clk.precise_ns, START_NS + (uint64_t)(k.round + 1) * STEPS * 10000000u);
            sync_out_t o;
            memset(&o, 0, sizeof o);
            o.rc = rl__sync_step(n.rl->sync, atomic_load(&n.clk.precise_ns) / 1000000u);
            rl_stats_t st;
            rl_stats_init(&st);
            rl_stats(n.rl, &st);
            o.health = st.health;
            rl_test_put(out, &o, sizeof o);
        } else {
            close_out_t o;
            memset(&o, 0, sizeof o);
            uint64_t t0 = rl_test_now_ns();
            rl_close(n.rl);
            o.close_us = (rl_test_now_ns() - t0) / 1000u;
            o.evict_warnings = atomic_load(&evict_warnings);
            rl_test_put(out, &o, sizeof o);
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

static void stop_server(void *srv)
{
    rl_test_redis_stop(srv);
    free(srv);
}

static const char *const lru_args[] = {"--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru",
                                       NULL};

static rl_test_redis_t *lru_server(char *url, size_t cap)
{
    char err[256];
    rl_test_redis_t *srv = calloc(1, sizeof *srv);
    ck_assert_ptr_nonnull(srv);
    rl_test_hold(srv, stop_server);
    ck_assert_msg(rl_test_redis_start_args(srv, lru_args, err, sizeof err) == 0, "%s", err);
    snprintf(url, cap, "redis://127.0.0.1:%d", srv->port);
    return srv;
}

static void proc_main(int idx, int in, int out, void *url) { node_main(idx, url, in, out); }

static fleet_t *fleet_start(const char *url)
{
    fleet_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    rl_test_hold(f, fleet_kill);
    rl_test_procs_start(&f->procs, NODES, proc_main, (void *)url);
    return f;
}

static void send_all(fleet_t *f, int op, int round)
{
    cmd_t k = {op, round};
    for (int i = 0; i < NODES; i++)
        rl_test_put(f->procs.to[i], &k, sizeof k);
}

static long long info_number(redisContext *r, const char *section, const char *field)
{
    redisReply *x = redisCommand(r, "INFO %s", section);
    ck_assert(x != NULL && x->type == REDIS_REPLY_STRING);
    const char *p = strstr(x->str, field);
    long long v = p != NULL ? atoll(p + strlen(field)) : -1;
    freeReplyObject(x);
    return v;
}

static long long dbsize(int port)
{
    redisContext *r = rl_test_redis_client(port);
    redisReply *x = redisCommand(r, "DBSIZE");
    long long n = x->integer;
    freeReplyObject(x);
    rl_test_release(r);
    return n;
}

static void redis_do(int port, const char *what)
{
    redisContext *r = rl_test_redis_client(port);
    redisReply *keys = NULL;
    if (strcmp(what, "hot") == 0) {
        /* Every hot hash, as eviction of all of them would. */
        keys = redisCommand(r, "KEYS {ev:v1:hot:*");
        for (size_t i = 0; i < keys->elements; i++)
            freeReplyObject(redisCommand(r, "DEL %s", keys->element[i]->str));
        freeReplyObject(keys);
    } else {
        freeReplyObject(redisCommand(r, what));
    }
    rl_test_release(r);
}

static size_t hot_hashes(int port)
{
    redisContext *r = rl_test_redis_client(port);
    redisReply *keys = redisCommand(r, "KEYS {ev:v1:hot:*");
    size_t n = keys->elements;
    freeReplyObject(keys);
    rl_test_release(r);
    return n;
}

/* Admitted per hot key and step, the fleet's. */
static uint16_t adm[HOT][ROUNDS * STEPS + 1];

/* The worst window of `steps` steps over [from, to) of key h. */
static long worst_window(int h, int steps, int from, int to, int *at)
{
    long sum = 0, worst = 0;
    for (int s = from; s < to; s++) {
        sum += adm[h][s];
        if (s - from >= steps)
            sum -= adm[h][s - steps];
        if (sum > worst) {
            worst = sum;
            *at = s;
        }
    }
    return worst;
}

/* What a run saw of its faults. */
typedef struct run {
    int outage_from, outage_to; /* rounds: the restart, every node healthy after */
    long long evicted;          /* the server's evicted_keys before the restart */
    int hot_lost;               /* hot hashes LRU took between two rounds */
} run_t;

/* The faults of one round, before its syncs. */
static void faults(rl_test_redis_t *srv, int round, run_t *run)
{
    /* Hot hashes gone since the last round's syncs made them: LRU's. */
    if (round > 5 && (run->outage_from < 0 || (run->outage_to >= 0 && round > run->outage_to)))
        run->hot_lost += HOT - (int)hot_hashes(srv->port);
    if (round >= STORM_FROM && round < STORM_TO && round % STORM_EVERY == 0)
        redis_do(srv->port, "hot");
    if (round == FLUSH_AT)
        redis_do(srv->port, "FLUSHALL");
    if (round == RESTART_AT) {
        redisContext *r = rl_test_redis_client(srv->port);
        run->evicted = info_number(r, "stats", "evicted_keys:");
        rl_test_release(r);
        char err[256];
        ck_assert_msg(rl_test_redis_crash_restart(srv, err, sizeof err) == 0, "%s", err);
        run->outage_from = round;
    }
}

/* Every round: the nodes' checks, the faults, then every node's sync at
 * once, as a fleet's rounds overlap (their reports reach Redis in whatever
 * order the machine runs them). */
static void run_rounds(fleet_t *f, rl_test_redis_t *srv, run_t *run)
{
    for (int round = 0; round < ROUNDS; round++) {
        send_all(f, OP_ROUND, round);
        for (int i = 0; i < NODES; i++) {
            round_out_t o;
            rl_test_get(f->procs.from[i], &o, sizeof o);
            ck_assert_uint_eq(o.bad, 0);
            for (int h = 0; h < HOT; h++)
                for (int s = 0; s < STEPS; s++)
                    adm[h][round * STEPS + s] += o.admitted[h][s];
        }
        faults(srv, round, run);
        int healthy = 0;
        send_all(f, OP_SYNC, round);
        for (int i = 0; i < NODES; i++) {
            sync_out_t o;
            rl_test_get(f->procs.from[i], &o, sizeof o);
            if (run->outage_from < 0)
                ck_assert_msg(o.rc == 0, "node %d's round %d failed", i, round);
            healthy += o.health == RL_HEALTH_HEALTHY;
        }
        if (run->outage_from >= 0 && run->outage_to < 0 && healthy == NODES)
            run->outage_to = round + 1;
        ck_assert_msg(run->outage_from < 0 || run->outage_to >= 0 ||
                          round < run->outage_from + 60,
                      "the fleet was not healthy again 60 rounds after the restart");
    }
    ck_assert_int_ge(run->outage_to, 0);
}

/* The band (docs/bounds.md): rate x W + burst + E, E = E_pre + rate x I +
 * burst, E_pre = 0 (expected_nodes is the fleet: 5 x ceil(30/5) = 30).
 * Windows that overlap the outage add what operations.md gives a fleet cut
 * off at once: each node's degraded burst, ceil(30/5), and the ramp from
 * its share to rate / 5, at most rate x ramp / 2 in all (1 s default). */
static void check_band(const run_t *run)
{
    const long e = RATE * INTERVAL_MS / 1000 + BURST;
    const long outage_extra = NODES * ((BURST + NODES - 1) / NODES) + RATE / 2;
    const int spans[2] = {100, 1000}; /* 1 s and 10 s of 10-ms steps */
    int out_a = run->outage_from * STEPS, out_b = run->outage_to * STEPS;
    for (int w = 0; w < 2; w++) {
        long band = RATE * spans[w] / 100 + BURST + e;
        long worst_in = 0, worst_out = 0;
        for (int h = 0; h < HOT; h++) {
            int at = 0;
            /* Windows that end before the outage, and those that start
             * after it; then every window, against the outage's bound. */
            long before = worst_window(h, spans[w], 0, out_a, &at);
            long after = worst_window(h, spans[w], out_b, ROUNDS * STEPS, &at);
            long any = worst_window(h, spans[w], 0, ROUNDS * STEPS, &at);
            long clean = before > after ? before : after;
            ck_assert_msg(clean <= band, "hot-%d: a %d-ms window admitted %ld, the band is %ld",
                          h, spans[w] * 10, clean, band);
            ck_assert_msg(any <= band + outage_extra,
                          "hot-%d: a %d-ms window over the outage admitted %ld (bound %ld)", h,
                          spans[w] * 10, any, band + outage_extra);
            worst_out = clean > worst_out ? clean : worst_out;
            worst_in = any > worst_in ? any : worst_in;
        }
        fprintf(stderr, "test_evict: %d-s windows: worst %ld of band %ld (%.1f%%); over the "
                "outage %ld of %ld\n", spans[w] / 100, worst_out, band,
                100.0 * (double)worst_out / (double)band, worst_in, band + outage_extra);
    }
}

/* Close every node: every key's usage is reported (the last syncs came
 * after the last checks). The cold keys of the last 30 rounds may still
 * hold entries, so each node hands them back, but most of their hashes
 * were evicted: a hand-back must not make them again (and so evict others,
 * the hot ones among them). */
static void close_fleet(fleet_t *f, rl_test_redis_t *srv, const run_t *run)
{
    long long before = dbsize(srv->port);
    size_t hot_before = hot_hashes(srv->port);
    send_all(f, OP_CLOSE, 0);
    uint64_t close_us_max = 0;
    for (int i = 0; i < NODES; i++) {
        close_out_t o;
        rl_test_get(f->procs.from[i], &o, sizeof o);
        rl_test_procs_reap(&f->procs, i);
        /* Once per policy: the restarted server has the same one. */
        ck_assert_uint_eq(o.evict_warnings, 1);
        close_us_max = o.close_us > close_us_max ? o.close_us : close_us_max;
    }
    long long after = dbsize(srv->port);
    size_t hot_after = hot_hashes(srv->port);
    fprintf(stderr, "test_evict: %lld keys evicted before the restart, %d hot hashes lost "
            "to LRU; dbsize %lld -> %lld and hot hashes %zu -> %zu across the closes "
            "(slowest %.1f ms)\n", run->evicted, run->hot_lost, before, after, hot_before,
            hot_after, (double)close_us_max / 1000.0);
    ck_assert_msg(after <= before, "the closes made %lld hashes again", after - before);
}

START_TEST(hot_windows_hold_while_redis_loses_keys)
{
    char url[64];
    rl_test_redis_t *srv = lru_server(url, sizeof url);
    fleet_t *f = fleet_start(url);
    memset(adm, 0, sizeof adm);
    run_t run = {-1, -1, 0, 0};
    run_rounds(f, srv, &run);
    check_band(&run);
    /* The run did what it says: the server evicted under the flood. */
    ck_assert_int_gt(run.evicted, 0);
    close_fleet(f, srv, &run);
}
END_TEST

/* -------------------------------------------------- the policy's warning */

START_TEST(evict_policy_read_from_info)
{
    char policy[32];
    uint64_t mm = 1;
    const char lru[] = "# Memory\r\nused_memory:1\r\nmaxmemory:2097152\r\n"
                       "maxmemory_human:2.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
    ck_assert_int_eq(rl__sync_evict_policy(lru, sizeof lru - 1, &mm, policy, sizeof policy), 1);
    ck_assert_str_eq(policy, "allkeys-lru");
    ck_assert_uint_eq(mm, 2097152);
    /* Every key the library writes has a TTL: volatile-* can evict them. */
    const char vol[] = "maxmemory_policy:volatile-ttl\r\nmaxmemory:100\r\n";
    ck_assert_int_eq(rl__sync_evict_policy(vol, sizeof vol - 1, &mm, policy, sizeof policy), 1);
    const char noev[] = "maxmemory:2097152\r\nmaxmemory_policy:noeviction\r\n";
    ck_assert_int_eq(rl__sync_evict_policy(noev, sizeof noev - 1, &mm, policy, sizeof policy), 0);
    /* No maxmemory: nothing is ever evicted, whatever the policy says. */
    const char unl[] = "maxmemory:0\nmaxmemory_policy:allkeys-lru\n";
    ck_assert_int_eq(rl__sync_evict_policy(unl, sizeof unl - 1, &mm, policy, sizeof policy), 0);
    ck_assert_uint_eq(mm, 0);
    const char none[] = "maxmemory:5\r\nmaxmemory_policyx:allkeys-lru\r\n";
    ck_assert_int_eq(rl__sync_evict_policy(none, sizeof none - 1, &mm, policy, sizeof policy), -1);
    ck_assert_int_eq(rl__sync_evict_policy(NULL, 0, &mm, policy, sizeof policy), -1);
}
END_TEST

static rl_t *open_watched(const char *url)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "ew";
    c.sync_interval_ms = 50;
    c.log = node_log;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

static uint64_t rounds_completed(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st.sync_rounds_completed;
}

START_TEST(evict_policy_warned_once)
{
    char url[64];
    rl_test_redis_t *srv = lru_server(url, sizeof url);
    redisContext *r = rl_test_redis_client(srv->port);
    freeReplyObject(redisCommand(r, "CONFIG SET maxmemory-policy noeviction"));
    atomic_store(&evict_warnings, 0);
    rl_t *safe = open_watched(url);
    /* INFO goes out before the first round's commands, on one connection. */
    WAIT_FOR(rounds_completed(safe) >= 2);
    ck_assert_uint_eq(atomic_load(&evict_warnings), 0);
    freeReplyObject(redisCommand(r, "CONFIG SET maxmemory-policy volatile-lru"));
    rl_t *unsafe = open_watched(url);
    WAIT_FOR(rounds_completed(unsafe) >= 2);
    ck_assert_uint_eq(atomic_load(&evict_warnings), 1);
    rl_test_release(unsafe);
    rl_test_release(safe);
    rl_test_release(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("evict");
    TCase *pure = tcase_create("pure");
    tcase_add_test(pure, evict_policy_read_from_info);
    suite_add_tcase(s, pure);
    TCase *tc = tcase_create("redis");
    /* A hang guard, not a deadline: 10-20 s plain, about 100 s under
     * ThreadSanitizer on a loaded 2-core box. */
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, evict_policy_warned_once);
    tcase_add_test(tc, hot_windows_hold_while_redis_loses_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
