/* SPDX-License-Identifier: MIT */
/* The policy layer against real Redis faults: while Redis is out, each
 * limit does what its on_failure says; detection and recovery are measured
 * in rounds; afterwards Redis's totals equal what the nodes admitted. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "blackhole.h"
#include "instance.h"
#include "sync/sync.h"

static void redis_do(const char *cmd)
{
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *rep = redisCommand(r, cmd);
    ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
                  rep ? rep->str : "no reply");
    freeReplyObject(rep);
    redisFree(r);
}

static long long redis_total(const char *limit)
{
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    redisReply *keys = redisCommand(r, "KEYS {p:v1:%s:*", limit);
    long long sum = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *a = redisCommand(r, "HGET %s a", keys->element[i]->str);
        if (a->type == REDIS_REPLY_STRING)
            sum += atoll(a->str);
        freeReplyObject(a);
    }
    freeReplyObject(keys);
    redisFree(r);
    return sum;
}

/* NULL: the fixture's server; the blackhole test points nodes elsewhere. */
static const char *node_url;

static rl_t *open_node(const char *node)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = node_url != NULL ? node_url : rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = 50;
    c.expected_nodes = 2;
    c.key_secret = "policy-secret-0123456789";
    c.key_secret_len = 24;
    c.key_prefix = "p";
    c.reconnect_max_ms = 200;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

static rl_stats_t stats_of(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(rl, &s), 0);
    return s;
}

static int health_of(rl_t *rl) { return stats_of(rl).health; }

static uint64_t rounds_of(rl_t *rl) { return stats_of(rl).sync_rounds; }

/* Rounds started when each node was first seen in the awaited state. */
static uint64_t rounds_degraded_at[8];

/* Wait until every node is in `state`; returns the ms it took, or -1 after
 * RL_TEST_WAIT_MS. What is asserted of detection is counted in rounds (wall
 * time is meaningless on a loaded machine or under sanitizers): the deadline
 * only ends a wait for a state that never comes. */
static long wait_health(rl_t **nodes, int n, int state)
{
    uint64_t t0 = rl_test_now_ns();
    int seen[8] = {0};
    for (unsigned attempt = 0;; attempt++) {
        int late = rl_test_now_ns() - t0 > (uint64_t)RL_TEST_WAIT_MS * 1000000u;
        int all = 1;
        for (int i = 0; i < n; i++) {
            rl_stats_t s;
            rl_stats_init(&s);
            rl_stats(nodes[i], &s);
            if (s.health == state && !seen[i]) {
                seen[i] = 1;
                rounds_degraded_at[i] = s.health_since_round; /* recorded by the library */
            }
            all &= s.health == state;
        }
        if (all)
            return (long)((rl_test_now_ns() - t0) / 1000000u);
        if (late)
            return -1;
        rl_test_poll_pause(attempt);
    }
}

/* Load: 2 threads per node, each checking the three limits' one key. */
typedef struct load {
    rl_t *rl;
    int ids[3];
    _Atomic int *phase; /* 0 before, 1 during the fault, 2 after, 3 stop */
    _Atomic uint64_t admitted[3][3]; /* [limit][phase] */
    _Atomic uint64_t checks[3][3];
    _Atomic uint64_t flagged[3][3];
} load_t;

static void *drive(void *arg)
{
    load_t *l = arg;
    int ph;
    while ((ph = atomic_load(l->phase)) < 3) {
        for (int k = 0; k < 3; k++) {
            rl_decision_t d;
            rl_decision_init(&d);
            int rc = rl_check(l->rl, l->ids[k], "tenant", 6, 1, &d);
            ck_assert(rc == RL_ALLOW || rc == RL_DENY);
            atomic_fetch_add(&l->checks[k][ph], 1);
            if (rc == RL_ALLOW)
                atomic_fetch_add(&l->admitted[k][ph], 1);
            if (d.flags & RL_FLAG_DEGRADED)
                atomic_fetch_add(&l->flagged[k][ph], 1);
        }
        rl_test_sleep_ms(1);
    }
    return NULL;
}

enum { L_OPEN, L_CLOSED, L_LOCAL };

typedef struct fleet {
    rl_t *nodes[2];
    load_t load[2];
    pthread_t th[4];
    _Atomic int phase;
} fleet_t;

static void fleet_start(fleet_t *f)
{
    atomic_init(&f->phase, 0);
    for (int i = 0; i < 2; i++) {
        char name[16];
        snprintf(name, sizeof name, "pn%d", i);
        f->nodes[i] = open_node(name);
        memset(&f->load[i], 0, sizeof f->load[i]);
        f->load[i].rl = f->nodes[i];
        f->load[i].phase = &f->phase;
        f->load[i].ids[L_OPEN] = rl_test_add(f->nodes[i], "name=open rate=200/s burst=20 on_failure=open");
        f->load[i].ids[L_CLOSED] = rl_test_add(f->nodes[i], "name=closed rate=200/s burst=20 on_failure=closed");
        f->load[i].ids[L_LOCAL] = rl_test_add(f->nodes[i], "name=local rate=200/s burst=20 on_failure=local degraded_rate=40/s");
    }
    ck_assert_int_ge(wait_health(f->nodes, 2, RL_HEALTH_HEALTHY), 0);
    uint64_t done0[2];
    for (int i = 0; i < 2; i++)
        done0[i] = stats_of(f->nodes[i]).sync_rounds_completed;
    for (int i = 0; i < 4; i++)
        pthread_create(&f->th[i], NULL, drive, &f->load[i / 2]);
    /* A few rounds of shares: every node has completed 3 rounds since the
     * load started, and reported its keys. */
    for (int i = 0; i < 2; i++)
        WAIT_FOR(stats_of(f->nodes[i]).sync_rounds_completed >= done0[i] + 3 &&
                 stats_of(f->nodes[i]).sync_reports >= 3);
}

static void fleet_stop(fleet_t *f)
{
    atomic_store(&f->phase, 3);
    for (int i = 0; i < 4; i++)
        pthread_join(f->th[i], NULL);
}

/* A fault with a detection window: start it, wait until both nodes are
 * degraded, measure the policies for 800 ms (the fault's phase), end it,
 * wait for healthy. A fault that ends by itself `lasts_ms` after begin()
 * (0: it lasts until end()) ends the phase 500 ms before that at the
 * latest, so the phase never runs past the fault however late detection
 * comes; end() then waits for the fault to be over. */
static void run_fault(const char *what, void (*begin)(void), void (*end)(void), unsigned lasts_ms)
{
    fleet_t f;
    fleet_start(&f);
    uint64_t rounds0[2];
    for (int i = 0; i < 2; i++)
        rounds0[i] = rounds_of(f.nodes[i]);
    uint64_t begun = rl_test_now_ns();
    begin();
    long detect = wait_health(f.nodes, 2, RL_HEALTH_DEGRADED);
    ck_assert_msg(detect >= 0, "%s: not detected within %d ms", what, RL_TEST_WAIT_MS);
    /* Detection within one round plus its deadline, +-1 round, counted in
     * rounds from the stats (wall time is meaningless under sanitizers). */
    for (int i = 0; i < 2; i++) {
        uint64_t took = rounds_degraded_at[i] - rounds0[i];
        ck_assert_msg(took <= 3, "%s: node %d degraded after %llu rounds (%ld ms)", what, i,
                      (unsigned long long)took, detect);
    }
    uint64_t phase_end = rl_test_now_ns() + 800000000u;
    if (lasts_ms != 0 && phase_end > begun + (uint64_t)(lasts_ms - 500) * 1000000u)
        phase_end = begun + (uint64_t)(lasts_ms - 500) * 1000000u;
    uint64_t t1 = rl_test_now_ns();
    ck_assert_msg(t1 < phase_end, "%s: detected %ld ms after the fault began, too close to its end",
                  what, detect);
    atomic_store(&f.phase, 1);
    while (rl_test_now_ns() < phase_end)
        rl_test_sleep_ms(10);
    atomic_store(&f.phase, 2);
    /* The phase as long as it really was (a loaded machine oversleeps). */
    double held_s = (double)(rl_test_now_ns() - t1) / 1e9;
    end();
    long recover = wait_health(f.nodes, 2, RL_HEALTH_HEALTHY);
    ck_assert_msg(recover >= 0, "%s: not healthy again within %d ms", what, RL_TEST_WAIT_MS);
    rl_test_sleep_ms(200); /* some traffic after the fault, for the totals below */
    fleet_stop(&f);
    uint64_t adm[3][3] = {{0}}, chk[3][3] = {{0}}, flg[3][3] = {{0}};
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 3; k++)
            for (int ph = 0; ph < 3; ph++) {
                adm[k][ph] += atomic_load(&f.load[n].admitted[k][ph]);
                chk[k][ph] += atomic_load(&f.load[n].checks[k][ph]);
                flg[k][ph] += atomic_load(&f.load[n].flagged[k][ph]);
            }
    /* open: admits everything during the fault, flagged */
    ck_assert_uint_eq(adm[L_OPEN][1], chk[L_OPEN][1]);
    ck_assert_uint_eq(flg[L_OPEN][1], chk[L_OPEN][1]);
    /* closed: denies everything during the fault */
    ck_assert_uint_eq(adm[L_CLOSED][1], 0);
    ck_assert_uint_gt(chk[L_CLOSED][1], 0);
    /* local: within the pessimistic bound: 2 nodes x (the ramp from the last
     * share, 100/s each, down to 40/s, at most 100/s x the phase + burst),
     * plus a burst */
    ck_assert_msg(adm[L_LOCAL][1] <= 2 * (100 * held_s + 20) + 20,
                  "%s: local admitted %llu in %.2f s", what,
                  (unsigned long long)adm[L_LOCAL][1], held_s);
    ck_assert_uint_gt(adm[L_LOCAL][1], 0);
    for (int i = 0; i < 2; i++)
        rl_close(f.nodes[i]);
    /* Afterwards Redis's totals equal what the nodes admitted. */
    ck_assert_int_eq(redis_total("open"),
                     (long long)(adm[L_OPEN][0] + adm[L_OPEN][1] + adm[L_OPEN][2]));
    ck_assert_int_eq(redis_total("local"),
                     (long long)(adm[L_LOCAL][0] + adm[L_LOCAL][1] + adm[L_LOCAL][2]));
}

static void flush(void) { redis_do("FLUSHALL"); }

static void sigstop_begin(void) { kill(rl_test_redis()->pid, SIGSTOP); }
static void sigstop_end(void) { kill(rl_test_redis()->pid, SIGCONT); }

START_TEST(fault_sigstop)
{
    flush();
    run_fault("SIGSTOP", sigstop_begin, sigstop_end, 0);
}
END_TEST

static void oom_begin(void)
{
    redis_do("CONFIG SET maxmemory-policy noeviction");
    redis_do("CONFIG SET maxmemory 1");
}
static void oom_end(void) { redis_do("CONFIG SET maxmemory 0"); }

START_TEST(fault_oom)
{
    flush();
    run_fault("OOM", oom_begin, oom_end, 0);
}
END_TEST

/* A paused server blocks every client's commands, CLIENT UNPAUSE included:
 * the pause ends by itself, and pause_end's UNPAUSE returns when it has. */
#define PAUSE_MS 3000
static void pause_begin(void)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "CLIENT PAUSE %d ALL", PAUSE_MS);
    redis_do(cmd);
}
static void pause_end(void) { redis_do("CLIENT UNPAUSE"); }

START_TEST(fault_client_pause)
{
    flush();
    run_fault("CLIENT PAUSE", pause_begin, pause_end, PAUSE_MS);
}
END_TEST

static void auth_begin(void)
{
    redis_do("CONFIG SET requirepass sekrit");
    /* existing connections stay authenticated: drop them */
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    freeReplyObject(redisCommand(r, "AUTH sekrit"));
    freeReplyObject(redisCommand(r, "CLIENT KILL TYPE normal SKIPME yes"));
    redisFree(r);
}
static void auth_end(void)
{
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    freeReplyObject(redisCommand(r, "AUTH sekrit"));
    freeReplyObject(redisCommand(r, "CONFIG SET requirepass %s", ""));
    redisFree(r);
}

START_TEST(fault_wrong_password)
{
    flush();
    run_fault("wrong password", auth_begin, auth_end, 0);
}
END_TEST

START_TEST(open_with_wrong_or_right_password)
{
    flush();
    redis_do("CONFIG SET requirepass sekrit");
    rl_config_t c;
    rl_config_init(&c);
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    char u[96];
    rl_t *rl = (rl_t *)1;
    /* Reachable, refuses us: a clear error from rl_open. */
    snprintf(u, sizeof u, "redis://:wrong@127.0.0.1:%d", rl_test_redis()->port);
    c.redis_url = u;
    ck_assert_int_eq(rl_open(&rl, &c), RL_EAUTH);
    ck_assert_ptr_null(rl);
    snprintf(u, sizeof u, "redis://127.0.0.1:%d", rl_test_redis()->port); /* no password at all */
    ck_assert_int_eq(rl_open(&rl, &c), RL_EAUTH);
    /* The right one, as a password and as ACL user + password. */
    snprintf(u, sizeof u, "redis://:sekrit@127.0.0.1:%d", rl_test_redis()->port);
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    ck_assert_int_eq(health_of(rl), RL_HEALTH_HEALTHY);
    rl_close(rl);
    snprintf(u, sizeof u, "redis://default:sekrit@127.0.0.1:%d", rl_test_redis()->port);
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    rl_close(rl);
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    freeReplyObject(redisCommand(r, "AUTH sekrit"));
    freeReplyObject(redisCommand(r, "CONFIG SET requirepass %s", ""));
    redisFree(r);
}
END_TEST

START_TEST(nothing_listening)
{
    /* Unreachable: rl_open succeeds at once, degraded, and keeps deciding. */
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = "redis://127.0.0.1:1";
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.sync_interval_ms = 50;
    rl_t *rl = NULL;
    uint64_t t0 = rl_test_now_ns();
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    /* It waits at most its 1.1 s connect deadline; RL_TEST_WAIT_MS only
     * tells a deadline that works from one that does not, on a loaded
     * machine (it was 5 s: a bound a stalled test thread can overrun). */
    ck_assert_uint_lt(rl_test_now_ns() - t0, (uint64_t)RL_TEST_WAIT_MS * 1000000u);
    ck_assert_int_ge(wait_health(&rl, 1, RL_HEALTH_DEGRADED), 0);
    int closed = rl_test_add(rl, "name=c rate=10/s on_failure=closed");
    rl_decision_t d;
    rl_decision_init(&d);
    ck_assert_int_eq(rl_check(rl, closed, "k", 1, 1, &d), RL_DENY);
    ck_assert(d.flags & RL_FLAG_DEGRADED);
    ck_assert_uint_gt(d.retry_after_ms, 0);
    ck_assert_uint_le(d.retry_after_ms, 950);
    rl_close(rl);
}
END_TEST

#define DEBUG_SLEEP_MS 3000
static void debug_sleep_begin(void)
{
    /* DEBUG SLEEP blocks the server; send it without waiting for the reply. */
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    redisAppendCommand(r, "DEBUG SLEEP %d", DEBUG_SLEEP_MS / 1000);
    int done = 0;
    redisBufferWrite(r, &done);
    redisFree(r);
}
/* A PING is answered once the server wakes. */
static void debug_sleep_end(void) { redis_do("PING"); }

START_TEST(fault_debug_sleep)
{
    flush();
    run_fault("DEBUG SLEEP", debug_sleep_begin, debug_sleep_end, DEBUG_SLEEP_MS);
}
END_TEST

/* Failover seen from a client: the server becomes a replica (of nothing
 * reachable), so every report gets READONLY; nodes reconnect, stay degraded
 * while it lasts, and recover when it is a primary again. */
static void replica_begin(void) { redis_do("REPLICAOF 127.0.0.1 1"); }
static void replica_end(void) { redis_do("REPLICAOF NO ONE"); }

START_TEST(fault_readonly)
{
    flush();
    run_fault("READONLY", replica_begin, replica_end, 0);
}
END_TEST

static rl_blackhole_t hole;
static void hole_begin(void) { rl_blackhole_set(&hole, RL_BLACKHOLE_SILENT); }
static void hole_end(void) { rl_blackhole_set(&hole, RL_BLACKHOLE_FORWARD); }

START_TEST(fault_blackhole)
{
    /* A silent partition: the proxy keeps the connection open and forwards
     * nothing. Deadlines notice; after 3 silent rounds the node drops the
     * connection and reconnects through the proxy once it forwards again. */
    flush();
    ck_assert_int_eq(rl_blackhole_start(&hole, rl_test_redis()->port), 0);
    static char hole_url[64];
    snprintf(hole_url, sizeof hole_url, "redis://127.0.0.1:%d", hole.port);
    node_url = hole_url;
    run_fault("blackhole", hole_begin, hole_end, 0);
    node_url = NULL;
    rl_blackhole_stop(&hole);
}
END_TEST

START_TEST(fault_sigkill_restart)
{
    /* Redis dies (SIGKILL) and comes back empty on the same port: nodes
     * degrade, reconnect with backoff, reload their script, and re-report
     * their cumulative counters, so Redis's totals again equal everything
     * the nodes admitted, before the crash included. */
    flush();
    fleet_t f;
    fleet_start(&f);
    char err[256];
    kill(rl_test_redis()->pid, SIGKILL);
    ck_assert_int_ge(wait_health(f.nodes, 2, RL_HEALTH_DEGRADED), 0);
    atomic_store(&f.phase, 1);
    rl_test_sleep_ms(500); /* load while Redis is gone */
    atomic_store(&f.phase, 2);
    ck_assert_msg(rl_test_redis_crash_restart(rl_test_redis(), err, sizeof err) == 0, "%s", err);
    uint64_t refused[2];
    for (int i = 0; i < 2; i++)
        refused[i] = stats_of(f.nodes[i]).sync_err_connect;
    long recover = wait_health(f.nodes, 2, RL_HEALTH_HEALTHY);
    ck_assert_msg(recover >= 0, "not healthy within %d ms of the restart", RL_TEST_WAIT_MS);
    /* Back at the next reconnect attempt (the backoff, capped at 950 ms,
     * is test_backoff's business): counted in attempts, not wall time. One
     * may fail, if it was already in flight as the new server came up. */
    for (int i = 0; i < 2; i++) {
        uint64_t failed = stats_of(f.nodes[i]).sync_err_connect - refused[i];
        ck_assert_msg(failed <= 1, "node %d: %llu reconnects failed after the restart", i,
                      (unsigned long long)failed);
    }
    rl_test_sleep_ms(300); /* some traffic after the restart, for the totals below */
    fleet_stop(&f);
    uint64_t adm[3] = {0};
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 3; k++)
            for (int ph = 0; ph < 3; ph++)
                adm[k] += atomic_load(&f.load[n].admitted[k][ph]);
    for (int i = 0; i < 2; i++)
        rl_close(f.nodes[i]);
    ck_assert_int_eq(redis_total("open"), (long long)adm[L_OPEN]);
    ck_assert_int_eq(redis_total("local"), (long long)adm[L_LOCAL]);
    ck_assert_int_eq(redis_total("closed"), (long long)adm[L_CLOSED]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("policy_faults");
    /* Detection and recovery are timed in rounds of 50 ms: meaningless under
     * valgrind's slowdown, so scripts/test.sh --valgrind skips these cases
     * (test_sync runs the same sync code under memcheck). */
    TCase *tc = tcase_create("faults");
    tcase_set_tags(tc, "novalgrind");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fault_sigstop);
    tcase_add_test(tc, fault_oom);
    tcase_add_test(tc, fault_client_pause);
    tcase_add_test(tc, fault_wrong_password);
    tcase_add_test(tc, fault_debug_sleep);
    tcase_add_test(tc, fault_readonly);
    tcase_add_test(tc, fault_blackhole);
    tcase_add_test(tc, open_with_wrong_or_right_password);
    tcase_add_test(tc, nothing_listening);
    suite_add_tcase(s, tc);
    /* Last, in its own case: it replaces the server the fixture started. */
    TCase *rs = tcase_create("restart");
    tcase_set_tags(rs, "novalgrind");
    rl_test_redis_fixture(rs);
    tcase_set_timeout(rs, 60);
    tcase_add_test(rs, fault_sigkill_restart);
    suite_add_tcase(s, rs);
    return s;
}

int main(void) { return rl_test_run(suite()); }
