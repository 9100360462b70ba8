/* SPDX-License-Identifier: MIT */
/* rl_open_shared with a redis_url: the host is one node of the fleet, its
 * forked processes attach (rl_shared_attach) and one of them at a time
 * runs the host's sync. Raced from several processes with the clock frozen
 * through the clock hook: the bound holds exactly and Redis counts exactly
 * what callers were told; a lease holder killed with SIGKILL or closed
 * gracefully is replaced without a lost count or a dropped share; the last
 * process out hands the share back. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "shm/host.h"

#define NPROC 4
#define NKEYS 8
#define BURST 40

/* What the processes share besides the instance. */
typedef struct {
    _Atomic uint64_t now_ns;  /* the frozen clock */
    _Atomic uint32_t phase;   /* what the children do: see child_main */
    _Atomic uint32_t attached;
    _Atomic uint32_t parked;  /* children done with the current phase */
    _Atomic int32_t park_pid; /* phase 2: this child checks nothing... */
    _Atomic uint32_t park_closes; /* ... and closes at once when this is 1 */
    uint32_t rounds1, rounds2;    /* each child's rounds of checks per phase */
    _Atomic uint64_t told[NKEYS]; /* admits the callers were told, per key */
} ctl_t;

static uint64_t frozen_clock(void *ud, int32_t source)
{
    (void)source;
    /* relaxed: the test never moves it. */
    return atomic_load_explicit(&((ctl_t *)ud)->now_ns, memory_order_relaxed);
}

static ctl_t *ctl_map(uint32_t rounds1, uint32_t rounds2)
{
    void *p = mmap(NULL, sizeof(ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                   0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, 0, sizeof(ctl_t));
    ctl_t *c = p;
    atomic_store(&c->now_ns, UINT64_C(5000000000));
    c->rounds1 = rounds1; /* before any fork */
    c->rounds2 = rounds2;
    return c;
}

static rl_t *open_host(ctl_t *ctl, const char *prefix, int *id)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "host-a";
    c.sync_interval_ms = 50;
    c.expected_nodes = 1;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = prefix;
    c.clock = frozen_clock;
    c.clock_ud = ctl;
    char err[256];
    c.err = err;
    c.errlen = sizeof err;
    rl_t *rl = NULL;
    int rc = rl_open_shared(&rl, &c);
    ck_assert_msg(rc == 0, "rl_open_shared: %s (%s)", rl_err_name(rc), err);
    /* A rate the frozen clock never refills: the bound is the burst. */
    *id = rl_test_add(rl, "name=g rate=40/h burst=40 mode=global");
    return rl;
}

static void key_of(int k, char *buf) { snprintf(buf, 16, "key-%d", k); }

/* Check every key `rounds` times round robin, tallying the admits. */
static void hammer(rl_t *rl, ctl_t *ctl, int id, int rounds)
{
    char key[16];
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < NKEYS; k++) {
            key_of(k, key);
            int rc = rl_check(rl, id, key, strlen(key), 1, NULL);
            if (rc == RL_ALLOW)
                atomic_fetch_add(&ctl->told[k], 1);
            else if (rc != RL_DENY)
                _exit(3);
        }
}

static void wait_phase(ctl_t *ctl, uint32_t phase)
{
    while (atomic_load(&ctl->phase) < phase)
        rl_test_sleep_ms(1);
}

/* A worker: attach, phase 1 checks, park; phase 2 checks (unless it is the
 * one parked out, which may close at once), park; phase 3: close, exit. */
static void child_main(rl_t *rl, ctl_t *ctl, int id)
{
    if (rl_shared_attach(rl) != 0)
        _exit(2);
    atomic_fetch_add(&ctl->attached, 1);
    wait_phase(ctl, 1);
    hammer(rl, ctl, id, (int)ctl->rounds1);
    atomic_fetch_add(&ctl->parked, 1);
    wait_phase(ctl, 2);
    int closed = 0;
    if (atomic_load(&ctl->park_pid) != (int32_t)getpid())
        hammer(rl, ctl, id, (int)ctl->rounds2);
    else if (atomic_load(&ctl->park_closes)) {
        rl_close(rl);
        closed = 1;
    }
    atomic_fetch_add(&ctl->parked, 1);
    wait_phase(ctl, 3);
    if (!closed)
        rl_close(rl);
    _exit(0);
}

static void spawn(rl_t *rl, ctl_t *ctl, int id, pid_t *pids)
{
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            child_main(rl, ctl, id);
    }
    WAIT_FOR(atomic_load(&ctl->attached) == NPROC);
}

static void reap(pid_t pid, int killed)
{
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    if (killed)
        ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
    else
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

/* What Redis holds for the limit's keys. */
typedef struct {
    long long admitted; /* the keys' fleet totals ('a') summed */
    int keys;
    int nodes_max;      /* most node entries (<inc>|e) on one key */
    int live_max;       /* most live entries (<inc>|x) on one key */
    int live_min;
} redis_view_t;

static redis_view_t redis_view(const char *prefix)
{
    redis_view_t v = {0, 0, 0, 0, 1 << 30};
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *keys = redisCommand(r, "KEYS {%s:v1:g:*", prefix);
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *h = redisCommand(r, "HGETALL %s", keys->element[i]->str);
        int nodes = 0, live = 0;
        for (size_t j = 0; j + 1 < h->elements; j += 2) {
            const char *f = h->element[j]->str;
            size_t len = strlen(f);
            if (strcmp(f, "a") == 0)
                v.admitted += atoll(h->element[j + 1]->str);
            nodes += len > 2 && strcmp(f + len - 2, "|e") == 0;
            live += len > 2 && strcmp(f + len - 2, "|x") == 0;
        }
        v.nodes_max = nodes > v.nodes_max ? nodes : v.nodes_max;
        v.live_max = live > v.live_max ? live : v.live_max;
        v.live_min = live < v.live_min ? live : v.live_min;
        freeReplyObject(h);
    }
    v.keys = (int)keys->elements;
    freeReplyObject(keys);
    redisFree(r);
    return v;
}

static long long told_total(ctl_t *ctl)
{
    long long n = 0;
    for (int k = 0; k < NKEYS; k++)
        n += (long long)atomic_load(&ctl->told[k]);
    return n;
}

/* Redis has every admit the callers were told of, for every key. */
static int redis_has_all(const char *prefix, ctl_t *ctl)
{
    redis_view_t v = redis_view(prefix);
    return v.keys == NKEYS && v.admitted == told_total(ctl);
}

static int64_t holder(rl_t *rl)
{
    return atomic_load(&rl->shsync->holder_pid);
}

static void run_phase(ctl_t *ctl, uint32_t phase, uint32_t parked)
{
    atomic_store(&ctl->phase, phase);
    WAIT_FOR(atomic_load(&ctl->parked) == parked);
}

/* Each key admits exactly its burst across the host (the model: a frozen
 * clock never refills a bucket; the host is the only node, so its share is
 * the whole limit and rescaling to it keeps the tokens), Redis counts
 * exactly the admits callers were told of, the host is one node, and the
 * last process out hands the share back. */
START_TEST(host_is_one_node_with_exact_counts)
{
    rl_test_redis_flushall();
    /* Phase 1 checks each key 3 bursts' worth: it runs out. */
    ctl_t *ctl = ctl_map(3 * BURST / NPROC, BURST / NPROC);
    int id;
    rl_t *rl = open_host(ctl, "h1", &id);
    /* Nobody attached, nobody syncs: degraded, so a forgotten
     * rl_shared_attach shows (on_failure decides) instead of running at
     * the pre-sync share, looking healthy. */
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_int_eq(st.health, RL_HEALTH_DEGRADED);
    pid_t pids[NPROC];
    spawn(rl, ctl, id, pids);
    run_phase(ctl, 1, NPROC);
    for (int k = 0; k < NKEYS; k++)
        ck_assert_uint_eq(atomic_load(&ctl->told[k]), BURST);
    WAIT_FOR(redis_has_all("h1", ctl));
    redis_view_t v = redis_view("h1");
    ck_assert_int_eq(v.nodes_max, 1);
    ck_assert_int_eq(v.live_min, 1);
    /* rl_stats from the opener, which never attached, reports the host. */
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    ck_assert_int_ne(st.health, RL_HEALTH_DEGRADED);
    ck_assert_uint_ge(st.sync_reports, NKEYS);
    ck_assert_uint_eq(st.admitted, (uint64_t)NKEYS * BURST);
    run_phase(ctl, 2, 2 * NPROC);
    for (int k = 0; k < NKEYS; k++)
        ck_assert_uint_eq(atomic_load(&ctl->told[k]), BURST);
    atomic_store(&ctl->phase, 3);
    for (int i = 0; i < NPROC; i++)
        reap(pids[i], 0);
    v = redis_view("h1");
    ck_assert_int_eq(v.keys, NKEYS);
    ck_assert_int_eq(v.admitted, (long long)NKEYS * BURST);
    ck_assert_int_eq(v.nodes_max, 1);
    ck_assert_int_eq(v.live_max, 0); /* the last one out handed the share back */
    ck_assert_int_eq(holder(rl), 0);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* The holder, killed with SIGKILL while the others check: another process
 * takes the lease over, as the same node (Redis keeps one entry per key,
 * its share still live), and Redis ends with every admit counted once. */
START_TEST(holder_killed_is_taken_over)
{
    rl_test_redis_flushall();
    /* Half the burst in phase 1, so phase 2 admits too. */
    ctl_t *ctl = ctl_map(BURST / 2 / NPROC, 2 * BURST / NPROC);
    int id;
    rl_t *rl = open_host(ctl, "h2", &id);
    pid_t pids[NPROC];
    spawn(rl, ctl, id, pids);
    WAIT_FOR(holder(rl) != 0);
    pid_t victim = (pid_t)holder(rl);
    atomic_store(&ctl->park_pid, (int32_t)victim);
    run_phase(ctl, 1, NPROC);
    ck_assert_int_eq(told_total(ctl), NKEYS * BURST / 2);
    WAIT_FOR(redis_has_all("h2", ctl));
    /* Phase 2 checks run while the holder dies. */
    atomic_store(&ctl->phase, 2);
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    reap(victim, 1);
    WAIT_FOR(holder(rl) != 0 && holder(rl) != victim);
    WAIT_FOR(atomic_load(&rl->shsync->takeovers) == 1);
    WAIT_FOR(atomic_load(&ctl->parked) == NPROC + NPROC - 1);
    WAIT_FOR(redis_has_all("h2", ctl));
    redis_view_t v = redis_view("h2");
    ck_assert_int_eq(v.nodes_max, 1);  /* the same node: no second incarnation */
    ck_assert_int_eq(v.live_min, 1);   /* its share was not dropped */
    for (int k = 0; k < NKEYS; k++)
        ck_assert_uint_eq(atomic_load(&ctl->told[k]), BURST);
    atomic_store(&ctl->phase, 3);
    for (int i = 0; i < NPROC; i++)
        if (pids[i] != victim)
            reap(pids[i], 0);
    v = redis_view("h2");
    ck_assert_int_eq(v.admitted, (long long)NKEYS * BURST);
    ck_assert_int_eq(v.live_max, 0); /* the dead holder did not stop the hand-back */
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* The holder closes while the others live: the lease passes on without a
 * leaving round (Redis keeps the host's live entry), and the counts of the
 * checks after it reach Redis through the next holder. */
START_TEST(holder_closing_hands_the_lease_over)
{
    rl_test_redis_flushall();
    ctl_t *ctl = ctl_map(BURST / 2 / NPROC, 2 * BURST / NPROC);
    int id;
    rl_t *rl = open_host(ctl, "h3", &id);
    pid_t pids[NPROC];
    spawn(rl, ctl, id, pids);
    WAIT_FOR(holder(rl) != 0);
    pid_t first = (pid_t)holder(rl);
    atomic_store(&ctl->park_pid, (int32_t)first);
    atomic_store(&ctl->park_closes, 1);
    run_phase(ctl, 1, NPROC);
    WAIT_FOR(redis_has_all("h3", ctl));
    uint64_t taken = atomic_load(&rl->shsync->handovers);
    run_phase(ctl, 2, 2 * NPROC);
    /* The first holder closed while the others checked. */
    WAIT_FOR(holder(rl) != 0 && holder(rl) != first);
    WAIT_FOR(atomic_load(&rl->shsync->handovers) == taken + 1);
    ck_assert_uint_eq(atomic_load(&rl->shsync->takeovers), 0);
    WAIT_FOR(redis_has_all("h3", ctl));
    redis_view_t v = redis_view("h3");
    ck_assert_int_eq(v.nodes_max, 1);
    ck_assert_int_eq(v.live_min, 1); /* no leaving round: the share stays */
    for (int k = 0; k < NKEYS; k++)
        ck_assert_uint_eq(atomic_load(&ctl->told[k]), BURST);
    atomic_store(&ctl->phase, 3);
    for (int i = 0; i < NPROC; i++)
        reap(pids[i], 0);
    v = redis_view("h3");
    ck_assert_int_eq(v.admitted, (long long)NKEYS * BURST);
    ck_assert_int_eq(v.live_max, 0);
    rl_close(rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* ------------------------------------------------ exact limits and quotas */

#define XBURST 30
#define XKEYS 4
#define XROUNDS 20 /* per process and key: NPROC x XROUNDS > XBURST */
#define LBURST 5
#define QIDS 16

/* What the processes of the exact and quota tests share. */
typedef struct {
    _Atomic uint32_t go;
    _Atomic uint32_t attached;
    _Atomic uint32_t done;
    _Atomic uint64_t told[XKEYS];  /* exact admits callers were told, per key */
    _Atomic uint64_t local_told;   /* the local limit's admits, host-wide */
    _Atomic uint64_t fresh;        /* quota charges answered not duplicate */
    _Atomic uint64_t dups;         /* ... answered duplicate */
    _Atomic uint64_t bad;          /* a degraded or unexpected answer */
} xctl_t;

static xctl_t *xctl_map(void)
{
    void *p = mmap(NULL, sizeof(xctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    memset(p, 0, sizeof(xctl_t));
    return p;
}

typedef struct {
    rl_t *rl;
    int ids[3]; /* exact, local, quota */
} xhost_t;

static xhost_t open_xhost(const char *prefix)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "host-x";
    c.sync_interval_ms = 50;
    c.expected_nodes = 1;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = prefix;
    /* Generous deadlines: a noisy box must not turn an answer into a
     * timeout (the test asserts every answer came from Redis). */
    c.exact_timeout_ms = 20000;
    c.quota_timeout_ms = 20000;
    /* One connection per process: once a warm-up check was answered
     * (exact_ready), every later request finds it up. */
    c.exact_pool_size = 1;
    char err[256];
    c.err = err;
    c.errlen = sizeof err;
    xhost_t h = {NULL, {0, 0, 0}};
    int rc = rl_open_shared(&h.rl, &c);
    ck_assert_msg(rc == 0, "rl_open_shared: %s (%s)", rl_err_name(rc), err);
    /* One token a day: no refill while the test runs, so the bound is the
     * burst (exact.lua carries the remainder: 60 s mint 60/86400 token). */
    h.ids[0] = rl_test_add(h.rl, "name=e rate=1/d burst=30 mode=exact on_failure=closed");
    h.ids[1] = rl_test_add(h.rl, "name=l rate=1/d burst=5 mode=local");
    rl_quota_t q;
    ck_assert_int_eq(rl_quota_parse(&q, "name=q amount=1000 period=day", err, sizeof err), 0);
    h.ids[2] = rl_quota_add(h.rl, &q);
    ck_assert_int_ge(h.ids[2], 0);
    return h;
}

static void xkey(int k, char *buf) { snprintf(buf, 16, "xkey-%d", k); }

/* Whether this process's exact path answered from Redis within the wait
 * (a peek: nothing charged). A connection still being made (slow under
 * valgrind) would answer the first requests by on_failure. */
static int exact_ready(const xhost_t *h)
{
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(h->rl, h->ids[0], "warmup", 6, 0, &d);
        if (d.flags & RL_FLAG_EXACT)
            return 1;
        if (rl_test_now_ns() > until)
            return 0;
        rl_test_poll_pause(i);
    }
}

typedef struct {
    xctl_t *ctl;
    int k;
    _Atomic uint32_t *answered;
} xasync_t;

static void on_exact(void *ud, int rc, const rl_decision_t *d)
{
    xasync_t *a = ud;
    if (rc == RL_ALLOW && !(d->flags & RL_FLAG_DEGRADED))
        atomic_fetch_add(&a->ctl->told[a->k], 1);
    else if (rc != RL_DENY || (d->flags & RL_FLAG_DEGRADED))
        atomic_fetch_add(&a->ctl->bad, 1);
    atomic_fetch_add(a->answered, 1);
}

static void on_quota(void *ud, int rc, const rl_quota_result_t *r)
{
    xasync_t *a = ud;
    if (rc != RL_ALLOW || (r->flags & RL_FLAG_DEGRADED))
        atomic_fetch_add(&a->ctl->bad, 1);
    else
        atomic_fetch_add((r->flags & RL_FLAG_DUPLICATE) ? &a->ctl->dups : &a->ctl->fresh, 1);
    atomic_fetch_add(a->answered, 1);
}

typedef struct {
    _Atomic uint32_t *answered;
    uint32_t sent;
} xwait_t;

static int all_answered(void *ctx)
{
    xwait_t *w = ctx;
    return atomic_load(w->answered) == w->sent;
}

/* A worker of exact_and_quotas_across_processes: odd ones use the
 * asynchronous forms. Every process charges the same request ids. */
static void xchild(xhost_t *h, xctl_t *ctl, int async)
{
    if (rl_shared_attach(h->rl) != 0 || !exact_ready(h))
        _exit(2);
    atomic_fetch_add(&ctl->attached, 1);
    while (!atomic_load(&ctl->go))
        rl_test_sleep_ms(1);
    static xasync_t ctx[XROUNDS * XKEYS + QIDS];
    _Atomic uint32_t answered = 0;
    uint32_t sent = 0;
    char key[16];
    for (int r = 0; r < XROUNDS; r++) {
        for (int k = 0; k < XKEYS; k++) {
            xkey(k, key);
            if (async) {
                xasync_t *a = &ctx[sent];
                *a = (xasync_t){ctl, k, &answered};
                int rc = rl_check_async(h->rl, h->ids[0], key, strlen(key), 1, on_exact, a);
                if (rc != RL_PENDING)
                    _exit(3);
                sent++;
                continue;
            }
            rl_decision_t d;
            rl_decision_init(&d);
            int rc = rl_check(h->rl, h->ids[0], key, strlen(key), 1, &d);
            if (rc == RL_ALLOW && !(d.flags & RL_FLAG_DEGRADED))
                atomic_fetch_add(&ctl->told[k], 1);
            else if (rc != RL_DENY || (d.flags & RL_FLAG_DEGRADED))
                atomic_fetch_add(&ctl->bad, 1);
        }
        if (rl_check(h->rl, h->ids[1], "lk", 2, 1, NULL) == RL_ALLOW)
            atomic_fetch_add(&ctl->local_told, 1);
    }
    for (int i = 0; i < QIDS; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "req-%d", i);
        if (async) {
            xasync_t *a = &ctx[sent];
            *a = (xasync_t){ctl, 0, &answered};
            if (rl_quota_charge_async(h->rl, h->ids[2], "user", 4, 1, rid, strlen(rid),
                                      on_quota, a) != RL_PENDING)
                _exit(4);
            sent++;
            continue;
        }
        rl_quota_result_t res;
        rl_quota_result_init(&res);
        int rc = rl_quota_charge(h->rl, h->ids[2], "user", 4, 1, rid, strlen(rid), &res);
        if (rc != RL_ALLOW || (res.flags & RL_FLAG_DEGRADED))
            atomic_fetch_add(&ctl->bad, 1);
        else
            atomic_fetch_add((res.flags & RL_FLAG_DUPLICATE) ? &ctl->dups : &ctl->fresh, 1);
    }
    xwait_t w = {&answered, sent};
    if (!rl_test_wait_until(all_answered, &w, 30000))
        _exit(5);
    atomic_fetch_add(&ctl->done, 1);
    rl_close(h->rl);
    _exit(0);
}

/* Sum of a field over the Redis keys matching pattern. */
static long long redis_sum(const char *pattern, const char *field)
{
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *keys = redisCommand(r, "KEYS %s", pattern);
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    long long sum = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        redisReply *v = redisCommand(r, "HGET %s %s", keys->element[i]->str, field);
        if (v->type == REDIS_REPLY_STRING)
            sum += atoll(v->str);
        freeReplyObject(v);
    }
    freeReplyObject(keys);
    redisFree(r);
    return sum;
}

/* Exact limits and quotas in a shared instance: each attached
 * process checks and charges on its own connections. The model: the
 * exact bucket never refills while the test runs (1/day), so across
 * NPROC processes each key admits exactly its burst, and Redis charged
 * exactly the admits callers were told; each request id is charged once
 * host-wide whichever process sends it (the others hear "duplicate");
 * the local limit of the same config stays per host (its burst, not
 * NPROC x its burst). */
START_TEST(exact_and_quotas_across_processes)
{
    rl_test_redis_flushall();
    xctl_t *ctl = xctl_map();
    xhost_t h = open_xhost("x1");
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0)
            xchild(&h, ctl, i % 2);
    }
    WAIT_FOR(atomic_load(&ctl->attached) == NPROC);
    atomic_store(&ctl->go, 1);
    for (int i = 0; i < NPROC; i++)
        reap(pids[i], 0);
    ck_assert_int_eq(atomic_load(&ctl->done), NPROC);
    ck_assert_uint_eq(atomic_load(&ctl->bad), 0);
    for (int k = 0; k < XKEYS; k++)
        ck_assert_uint_eq(atomic_load(&ctl->told[k]), XBURST);
    ck_assert_int_eq(redis_sum("{x1:v1:e:*", "xc"), (long long)XKEYS * XBURST);
    ck_assert_uint_eq(atomic_load(&ctl->local_told), LBURST);
    ck_assert_uint_eq(atomic_load(&ctl->fresh), QIDS);
    ck_assert_uint_eq(atomic_load(&ctl->dups), (uint64_t)(NPROC - 1) * QIDS);
    /* The opener (not attached) defined the quota; an attached opener
     * reads what the workers charged. */
    ck_assert_int_eq(rl_shared_attach(h.rl), 0);
    ck_assert(exact_ready(&h));
    rl_quota_result_t res;
    rl_quota_result_init(&res);
    ck_assert_int_eq(rl_quota_get(h.rl, h.ids[2], "user", 4, &res), RL_ALLOW);
    ck_assert_uint_eq(res.used, QIDS);
    rl_close(h.rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

/* A process that did not attach has no Redis connection of its own: its
 * exact checks and quota calls are refused with RL_ENOTSUP (never a crash
 * or a guessed answer) while its local checks go on. Quotas are defined in
 * processes that did not attach: here a child of the opener, as a daemon's
 * master is, whose own child inherits them; an attached process may not
 * change them. */
START_TEST(unattached_process_is_refused)
{
    rl_test_redis_flushall();
    xhost_t h = open_xhost("x2");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        rl_decision_t d;
        rl_decision_init(&d);
        uint32_t bad = 0;
        bad |= (uint32_t)(rl_check(h.rl, h.ids[0], "k", 1, 1, &d) != RL_ENOTSUP) << 0;
        bad |= (uint32_t)(d.allowed != RL_DENY) << 1;
        bad |= (uint32_t)(rl_check_async(h.rl, h.ids[0], "k", 1, 1, on_exact, NULL) !=
                          RL_ENOTSUP) << 2;
        rl_quota_result_t res;
        rl_quota_result_init(&res);
        bad |= (uint32_t)(rl_quota_charge(h.rl, h.ids[2], "u", 1, 1, "r", 1, &res) !=
                          RL_ENOTSUP) << 3;
        bad |= (uint32_t)(rl_quota_get(h.rl, h.ids[2], "u", 1, &res) != RL_ENOTSUP) << 4;
        bad |= (uint32_t)(rl_check(h.rl, h.ids[1], "k", 1, 1, NULL) != RL_ALLOW) << 5;
        rl_request_t req[2];
        for (int i = 0; i < 2; i++) {
            rl_request_init(&req[i]);
            req[i].limit = h.ids[i];
            req[i].key = "b";
            req[i].key_len = 1;
            req[i].cost = 1;
        }
        int res2[2] = {0, 0};
        bad |= (uint32_t)(rl_check_batch(h.rl, req, 2, sizeof req[0], NULL, res2) != 1) << 6;
        bad |= (uint32_t)(res2[0] != RL_ENOTSUP || res2[1] != RL_ALLOW) << 7;
        /* Not attached: this process defines quotas on its own copy of the
         * opener's, and a process it forks inherits them. */
        rl_quota_t q;
        rl_quota_parse(&q, "name=q2 amount=10 period=day", NULL, 0);
        int q2 = rl_quota_add(h.rl, &q);
        bad |= (uint32_t)(q2 < 0) << 8;
        pid_t gc = fork();
        if (gc == 0) {
            int ok = rl_shared_attach(h.rl) == 0 && exact_ready(&h) &&
                     rl_quota_charge(h.rl, q2, "u", 1, 1, "g", 1, NULL) == RL_ALLOW &&
                     rl_quota_charge(h.rl, h.ids[2], "u", 1, 1, "g", 1, NULL) == RL_ALLOW;
            rl_close(h.rl);
            _exit(ok ? 0 : 1);
        }
        int st = 0;
        bad |= (uint32_t)(gc < 0 || waitpid(gc, &st, 0) != gc || !WIFEXITED(st) ||
                          WEXITSTATUS(st) != 0) << 9;
        /* Once attached, the same calls work; quota changes do not. */
        bad |= (uint32_t)(rl_shared_attach(h.rl) != 0 || !exact_ready(&h)) << 10;
        bad |= (uint32_t)(rl_check(h.rl, h.ids[0], "k", 1, 1, &d) != RL_ALLOW) << 11;
        bad |= (uint32_t)(rl_quota_charge(h.rl, h.ids[2], "u", 1, 1, "r", 1, &res) !=
                          RL_ALLOW) << 12;
        bad |= (uint32_t)(rl_quota_charge(h.rl, q2, "u", 1, 1, "r", 1, &res) != RL_ALLOW) << 13;
        rl_quota_parse(&q, "name=q3 amount=10 period=day", NULL, 0);
        bad |= (uint32_t)(rl_quota_add(h.rl, &q) != RL_ENOTSUP) << 14;
        bad |= (uint32_t)(rl_quota_remove(h.rl, q2) != RL_ENOTSUP) << 15;
        rl_close(h.rl);
        _exit(bad == 0 ? 0 : 1 + __builtin_ctz(bad)); /* the first failed step */
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x (exit: step + 1)", st);
    /* The opener did not attach either. */
    ck_assert_int_eq(rl_check(h.rl, h.ids[0], "k", 1, 1, NULL), RL_ENOTSUP);
    rl_close(h.rl);
}
END_TEST

/* rl_close with exact checks and quota charges in flight answers every
 * one of them exactly once before it returns. */
START_TEST(close_answers_requests_in_flight)
{
    rl_test_redis_flushall();
    xctl_t *ctl = xctl_map();
    xhost_t h = open_xhost("x3");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (rl_shared_attach(h.rl) != 0)
            _exit(2);
        static xasync_t ctx[400];
        _Atomic uint32_t answered = 0;
        uint32_t sent = 0;
        for (int i = 0; i < 200; i++) {
            ctx[sent] = (xasync_t){ctl, 0, &answered};
            int rc = rl_check_async(h.rl, h.ids[0], "kk", 2, 1, on_exact, &ctx[sent]);
            sent += rc == RL_PENDING;
            char rid[16];
            snprintf(rid, sizeof rid, "c-%d", i);
            ctx[sent] = (xasync_t){ctl, 0, &answered};
            rc = rl_quota_charge_async(h.rl, h.ids[2], "u", 1, 1, rid, strlen(rid), on_quota,
                                       &ctx[sent]);
            sent += rc == RL_PENDING;
        }
        rl_close(h.rl);
        _exit(atomic_load(&answered) == sent ? 0 : 3);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
    rl_close(h.rl);
    munmap(ctl, sizeof *ctl);
}
END_TEST

START_TEST(unsupported_features_are_refused)
{
    ctl_t *ctl = ctl_map(0, 0);
    int id;
    rl_t *rl = open_host(ctl, "h4", &id);
    rl_limit_t lim;
    ck_assert_int_eq(rl_limit_parse(&lim, "name=y rate=10/s mode=tiered", NULL, 0), 0);
    ck_assert_int_eq(rl_limit_add(rl, &lim), RL_ENOTSUP);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=g rate=10/s mode=tiered", NULL, 0), 0);
    ck_assert_int_eq(rl_limit_update(rl, id, &lim), RL_ENOTSUP);
    /* Exact is supported (exact_and_quotas_across_processes). */
    ck_assert_int_eq(rl_limit_parse(&lim, "name=x rate=10/s mode=exact", NULL, 0), 0);
    ck_assert_int_ge(rl_limit_add(rl, &lim), 0);
    rl_close(rl);
    /* Not a shared instance: nothing to attach to. */
    rl_t *plain = NULL;
    ck_assert_int_eq(rl_open(&plain, NULL), 0);
    ck_assert_int_eq(rl_shared_attach(plain), RL_ENOTSUP);
    rl_close(plain);
    ck_assert_int_eq(rl_shared_attach(NULL), RL_EINVAL);
    /* A local-only shared instance: nothing to join. */
    rl_t *local = NULL;
    ck_assert_int_eq(rl_open_shared(&local, NULL), 0);
    ck_assert_int_eq(rl_shared_attach(local), 0);
    rl_close(local);
    munmap(ctl, sizeof *ctl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shared_global");
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, unsupported_features_are_refused);
    suite_add_tcase(s, tc);
    /* Several children checking at once: not under the integer sanitizer,
     * whose suppression lookups hang or misname frames in forked children
     * (scripts/test.sh --integer says why). */
    TCase *forked = tcase_create("forked");
    tcase_set_tags(forked, "nointeger");
    rl_test_redis_fixture(forked);
    tcase_set_timeout(forked, 120);
    tcase_add_test(forked, host_is_one_node_with_exact_counts);
    tcase_add_test(forked, holder_killed_is_taken_over);
    tcase_add_test(forked, holder_closing_hands_the_lease_over);
    tcase_add_test(forked, exact_and_quotas_across_processes);
    tcase_add_test(forked, unattached_process_is_refused);
    tcase_add_test(forked, close_answers_requests_in_flight);
    suite_add_tcase(s, forked);
    return rl_test_run(s);
}
