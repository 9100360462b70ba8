/* SPDX-License-Identifier: MIT */
/*
 * Exact in-flight limits (kind=inflight mode=exact) against a real Redis:
 * the spec's rules; 8 racing threads and 3 node processes never hold more
 * than max (a model of what the callers hold, and the holders' set in
 * Redis, sampled while they race); a node killed with permits held gives
 * them back when their lease ends, not before; double, copied and foreign
 * releases are refused and late ones counted; Redis killed and restarted
 * empty: each on_failure does what it says.
 */
#include <hiredis/hiredis.h>
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
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "redis/keys.h"

static const char secret[] = "inflight-exact-secret-0123456789ab";
static rl_test_clock_t clk = {.precise_ns = UINT64_C(5000000000)};

static rl_t *open_node(const char *node, const char *url, uint32_t expected_nodes)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.node_id = node;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    /* Long enough that a slow run (valgrind) is never a timeout: these
     * tests are about Redis's answers; the outage test kills Redis, whose
     * connections then fail at once. */
    c.exact_timeout_ms = 10000;
    c.expected_nodes = expected_nodes;
    c.log_quiet = 1;
    /* The local tier's clock frozen (Redis TIME decides the leases). */
    c.clock = rl_test_clock_fn;
    c.clock_ud = &clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    /* The exact path connects at the first exact limit's add: until it is
     * up, an acquire answers by on_failure. Wait for Redis's answer on a
     * limit of its own, so the tests' counts start there. */
    rl_limit_t lim;
    char err[128];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=warm kind=inflight mode=exact max=1 "
                                          "max_hold=1s", err, sizeof err),
                     0);
    int warm = rl_limit_add(rl, &lim);
    ck_assert_int_gt(warm, 0);
    rl_decision_t d;
    rl_decision_init(&d);
    for (int i = 0;; i++) {
        rl_permit_t p;
        if (rl_inflight_acquire(rl, warm, "w", 1, RL_INFLIGHT_NO_CLASS, &p, &d) == RL_ALLOW) {
            ck_assert(d.flags & RL_FLAG_EXACT);
            ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
            break;
        }
        ck_assert_msg(i < 2000, "the exact path never connected");
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return rl;
}

static int add(rl_t *rl, const char *spec)
{
    rl_limit_t lim;
    char err[256] = "";
    ck_assert_msg(rl_limit_parse(&lim, spec, err, sizeof err) == 0, "%s: %s", spec, err);
    int id = rl_limit_add(rl, &lim);
    ck_assert_msg(id > 0, "%s: %s", spec, rl_strerror(id));
    return id;
}

/* The key's holders' set in Redis. */
static void set_name(rl_t *rl, const char *limit, const char *key, char *buf, size_t cap)
{
    uint64_t d = rl__redis_inflight_digest(&rl->kh, rl__keyhash(&rl->kh, key, strlen(key)));
    rl__redis_inflight_key(rl->key_prefix, limit, d, buf, cap);
}

static long long cmd_int(redisContext *r, const char *fmt, const char *arg)
{
    redisReply *rep = redisCommand(r, fmt, arg);
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

static long long zcard(redisContext *r, const char *set)
{
    return cmd_int(r, "ZCARD %s", set);
}

/* Redis TIME in ms. */
static long long redis_ms(redisContext *r)
{
    redisReply *rep = redisCommand(r, "TIME");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2);
    long long ms = atoll(rep->element[0]->str) * 1000 + atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* The lease end of the set's holder of rank `rank` (0 the first to end,
 * -1 the last; 0: none). */
static long long lease_end(redisContext *r, const char *set, int rank)
{
    redisReply *rep = redisCommand(r, rank == 0 ? "ZRANGE %s 0 0 WITHSCORES"
                                                : "ZRANGE %s -1 -1 WITHSCORES", set);
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    long long v = rep->elements == 2 ? atoll(rep->element[1]->str) : 0;
    freeReplyObject(rep);
    return v;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(spec_rules)
{
    rl_limit_t lim;
    char err[256];
    ck_assert_int_eq(rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=100 "
                                          "max_hold=30s on_failure=local",
                                    err, sizeof err),
                     0);
    ck_assert_int_eq(lim.mode, RL_MODE_EXACT);
    ck_assert_int_eq(lim.on_failure, RL_FAIL_LOCAL);
    ck_assert_uint_eq(lim.max_hold_ms, 30000);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=100 max_hold=1s",
                                    err, sizeof err),
                     0);
    ck_assert_int_eq(lim.on_failure, RL_FAIL_CLOSED); /* the default, as for rate limits */
    ck_assert_int_eq(rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=100", err,
                                    sizeof err),
                     RL_ERANGE);
    ck_assert_msg(strstr(err, "max_hold") != NULL, "%s", err);
    /* Without Redis, an exact limit is refused, not run per process. */
    rl_t *solo = rl_test_open(&clk, 0);
    ck_assert_int_eq(rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=2 max_hold=1s",
                                    err, sizeof err),
                     0);
    ck_assert_int_eq(rl_limit_add(solo, &lim), RL_ENOTSUP);
    rl_close(solo);
}
END_TEST

START_TEST(acquire_release_decisions)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *rl = open_node("a", rl_test_redis_url(), 1);
    int id = add(rl, "name=db kind=inflight mode=exact max=3 max_hold=30s");
    redisContext *r = rl_test_redis_client(0);
    char set[200];
    set_name(rl, "db", "k", set, sizeof set);
    rl_permit_t p[4];
    rl_decision_t d;
    rl_decision_init(&d);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], &d),
                         RL_ALLOW);
        ck_assert_uint_eq(d.inflight, (uint64_t)i + 1);
        ck_assert(d.flags & RL_FLAG_EXACT);
        ck_assert(d.flags & RL_FLAG_INFLIGHT);
    }
    ck_assert_int_eq(zcard(r, set), 3);
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p[3], &d),
                     RL_DENY);
    ck_assert_uint_eq(d.remaining, 0);
    ck_assert_uint_eq(d.inflight, 3);
    ck_assert(d.retry_after_ms >= 1 && d.retry_after_ms <= 1000);
    /* Another key is its own semaphore. */
    ck_assert_int_eq(rl_inflight_acquire(rl, id, "k2", 2, RL_INFLIGHT_NO_CLASS, &p[3], &d),
                     RL_ALLOW);
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    ck_assert_int_eq(rl_limit_stats(rl, id, &s), 0);
    ck_assert_uint_eq(s.inflight, 4);
    ck_assert_uint_eq(s.inflight_limit, 3);
    ck_assert_uint_eq(s.admitted, 4);
    ck_assert_uint_eq(s.denied, 1);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(zcard(r, set), 0);
    ck_assert_int_eq(rl_limit_stats(rl, id, &s), 0);
    ck_assert_uint_eq(s.inflight, 0);
    /* rl_check refuses it as any in-flight limit. */
    ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ENOTSUP);
    rl_close(rl);
}
END_TEST

START_TEST(double_foreign_and_late)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *a = open_node("a", rl_test_redis_url(), 1);
    rl_t *b = open_node("b", rl_test_redis_url(), 1);
    int ia = add(a, "name=db kind=inflight mode=exact max=2 max_hold=30s");
    int ib = add(b, "name=db kind=inflight mode=exact max=2 max_hold=30s");
    redisContext *r = rl_test_redis_client(0);
    char set[200];
    set_name(a, "db", "k", set, sizeof set);
    rl_permit_t p, copy, pb;
    ck_assert_int_eq(rl_inflight_acquire(a, ia, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(b, ib, "k", 1, RL_INFLIGHT_NO_CLASS, &pb, NULL),
                     RL_ALLOW);
    ck_assert_int_eq(zcard(r, set), 2); /* one fleet-wide set: both nodes' holders */
    copy = p;
    /* Another instance's permit: refused, nothing changed. */
    ck_assert_int_eq(rl_inflight_release(a, &pb, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    ck_assert_int_eq(zcard(r, set), 2);
    ck_assert_int_eq(rl_inflight_release(a, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_release(a, &p, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL); /* zeroed */
    ck_assert_int_eq(rl_inflight_release(a, &copy, RL_INFLIGHT_SUCCESS, 0), RL_EINVAL);
    ck_assert_int_eq(zcard(r, set), 1);
    ck_assert_int_eq(rl_inflight_release(b, &pb, RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(zcard(r, set), 0);
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    ck_assert_int_eq(rl_limit_stats(a, ia, &s), 0);
    ck_assert_uint_eq(s.inflight, 0);
    ck_assert_uint_eq(s.inflight_late, 0);

    /* A lease that ended: the release is a counted no-op, once per copy. */
    int il = add(a, "name=short kind=inflight mode=exact max=1 max_hold=200ms");
    set_name(a, "short", "k", set, sizeof set);
    ck_assert_int_eq(rl_inflight_acquire(a, il, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    long long end = lease_end(r, set, -1);
    ck_assert(end > 0);
    while (redis_ms(r) <= end)
        sleep_ms(20);
    ck_assert_int_eq(rl_inflight_release(a, &p, RL_INFLIGHT_SUCCESS, 0), RL_INFLIGHT_RECLAIMED);
    ck_assert_int_eq(rl_limit_stats(a, il, &s), 0);
    ck_assert_uint_eq(s.inflight_late, 1);
    ck_assert_uint_eq(s.inflight, 0);

    /* Redis lost the holders (a flush): their release is late, not an error. */
    ck_assert_int_eq(rl_inflight_acquire(a, ia, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL),
                     RL_ALLOW);
    rl_test_redis_flushall();
    ck_assert_int_eq(rl_inflight_release(a, &p, RL_INFLIGHT_SUCCESS, 0), RL_INFLIGHT_RECLAIMED);
    rl_close(a);
    rl_close(b);
}
END_TEST

/* ------------------------------------------------------------ 8 threads */

#define T_THREADS 8
#define T_MAX 5
#define T_ROUNDS 300

typedef struct race {
    rl_t *rl;
    int id;
    _Atomic int held;      /* the model: permits the callers hold now */
    _Atomic int over;      /* the model or Redis saw more than max */
    _Atomic int done;
    _Atomic long admitted, denied;
    char set[200];
} race_t;

static void *racer(void *arg)
{
    race_t *x = arg;
    for (int i = 0; i < T_ROUNDS; i++) {
        rl_permit_t p;
        int rc = rl_inflight_acquire(x->rl, x->id, "hot", 3, RL_INFLIGHT_NO_CLASS, &p, NULL);
        if (rc != RL_ALLOW) {
            atomic_fetch_add(&x->denied, 1);
            continue;
        }
        atomic_fetch_add(&x->admitted, 1);
        /* After Redis admitted it, before Redis hears of its release: the
         * model never counts a permit Redis does not. */
        if (atomic_fetch_add(&x->held, 1) + 1 > T_MAX)
            atomic_store(&x->over, 1);
        sched_yield();
        atomic_fetch_sub(&x->held, 1);
        if (rl_inflight_release(x->rl, &p, RL_INFLIGHT_SUCCESS, 0) != 0)
            atomic_store(&x->over, 2);
    }
    return NULL;
}

static void *sampler(void *arg)
{
    race_t *x = arg;
    redisContext *r = redisConnect("127.0.0.1", rl_test_redis()->port);
    if (r == NULL || r->err != 0)
        atomic_store(&x->over, 3);
    while (r != NULL && r->err == 0 && !atomic_load(&x->done)) {
        redisReply *rep = redisCommand(r, "ZCARD %s", x->set);
        if (rep != NULL && rep->type == REDIS_REPLY_INTEGER && rep->integer > T_MAX)
            atomic_store(&x->over, 4);
        if (rep != NULL)
            freeReplyObject(rep);
    }
    if (r != NULL)
        redisFree(r);
    return NULL;
}

START_TEST(threads_never_exceed_max)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    static race_t x;
    memset(&x, 0, sizeof x);
    x.rl = open_node("a", rl_test_redis_url(), 1);
    x.id = add(x.rl, "name=db kind=inflight mode=exact max=5 max_hold=60s");
    set_name(x.rl, "db", "hot", x.set, sizeof x.set);
    pthread_t t[T_THREADS], s;
    ck_assert_int_eq(pthread_create(&s, NULL, sampler, &x), 0);
    for (int i = 0; i < T_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, racer, &x), 0);
    for (int i = 0; i < T_THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&x.done, 1);
    pthread_join(s, NULL);
    ck_assert_int_eq(atomic_load(&x.over), 0);
    ck_assert_int_eq(atomic_load(&x.admitted) + atomic_load(&x.denied), T_THREADS * T_ROUNDS);
    ck_assert_int_gt(atomic_load(&x.admitted), 0);
    redisContext *r = rl_test_redis_client(0);
    ck_assert_int_eq(zcard(r, x.set), 0);
    rl_limit_stats_t st;
    rl_limit_stats_init(&st);
    ck_assert_int_eq(rl_limit_stats(x.rl, x.id, &st), 0);
    ck_assert_uint_eq(st.inflight, 0);
    ck_assert_uint_eq(st.admitted, (uint64_t)atomic_load(&x.admitted));
    fprintf(stderr, "8 threads, max %d: %ld admitted, %ld denied\n", T_MAX,
            atomic_load(&x.admitted), atomic_load(&x.denied));
    rl_close(x.rl);
}
END_TEST

/* ------------------------------------------------------------ 3 nodes */

#define F_NODES 3
#define F_MAX 4
#define F_ROUNDS 150

typedef struct fleet {
    _Atomic int held; /* across the node processes (a shared mapping) */
    _Atomic int over;
    _Atomic long admitted, denied;
} fleet_t;

static void node_run(fleet_t *f, int n, const char *url)
{
    char name[16];
    snprintf(name, sizeof name, "node-%d", n);
    rl_t *rl = open_node(name, url, F_NODES);
    rl_limit_t lim;
    char err[128];
    if (rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=4 max_hold=60s", err,
                       sizeof err) != 0)
        _exit(3);
    int id = rl_limit_add(rl, &lim);
    if (id <= 0)
        _exit(4);
    unsigned seed = (unsigned)n * 7919u + 1u;
    /* Each round asks for 1..3 permits at once and holds those it got
     * for 0..3 ms: the fleet asks for up to 9 of 4. */
    for (int i = 0; i < F_ROUNDS; i++) {
        rl_permit_t p[3];
        int want = 1 + (int)(rand_r(&seed) % 3u), got = 0;
        for (int j = 0; j < want; j++) {
            if (rl_inflight_acquire(rl, id, "shared", 6, RL_INFLIGHT_NO_CLASS, &p[got], NULL) !=
                RL_ALLOW) {
                atomic_fetch_add(&f->denied, 1);
                continue;
            }
            atomic_fetch_add(&f->admitted, 1);
            got++;
            if (atomic_fetch_add(&f->held, 1) + 1 > F_MAX)
                atomic_store(&f->over, 1);
        }
        sleep_ms(rand_r(&seed) % 4u);
        for (int j = 0; j < got; j++) {
            atomic_fetch_sub(&f->held, 1);
            if (rl_inflight_release(rl, &p[j], RL_INFLIGHT_SUCCESS, 0) != 0)
                atomic_store(&f->over, 2);
        }
    }
    rl_close(rl);
    _exit(0);
}

START_TEST(nodes_never_exceed_max)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    fleet_t *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(f != MAP_FAILED);
    memset(f, 0, sizeof *f);
    rl_t *probe = open_node("probe", rl_test_redis_url(), F_NODES);
    char set[200];
    set_name(probe, "db", "shared", set, sizeof set);
    rl_close(probe);
    pid_t kid[F_NODES];
    for (int n = 0; n < F_NODES; n++) {
        kid[n] = fork();
        ck_assert(kid[n] >= 0);
        if (kid[n] == 0)
            node_run(f, n, rl_test_redis_url());
    }
    redisContext *r = rl_test_redis_client(0);
    long long most = 0;
    int running = F_NODES;
    while (running > 0) {
        long long c = zcard(r, set);
        most = c > most ? c : most;
        for (int n = 0; n < F_NODES; n++) {
            int st;
            if (kid[n] > 0 && waitpid(kid[n], &st, WNOHANG) == kid[n]) {
                ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node %d: status %d", n,
                              st);
                kid[n] = 0;
                running--;
            }
        }
    }
    ck_assert_int_le(most, F_MAX);
    ck_assert_int_eq(atomic_load(&f->over), 0);
    ck_assert_int_gt(atomic_load(&f->admitted), 0);
    ck_assert_int_gt(atomic_load(&f->denied), 0); /* the cap was reached */
    ck_assert_int_eq(zcard(r, set), 0);
    fprintf(stderr, "3 nodes, max %d: %ld admitted, %ld denied, Redis held at most %lld\n",
            F_MAX, atomic_load(&f->admitted), atomic_load(&f->denied), most);
    munmap(f, sizeof *f);
}
END_TEST

/* ------------------------------------------------------------ SIGKILL */

#define K_LEASE_MS 1500

START_TEST(killed_node_permits_return_after_lease)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t kid = fork();
    ck_assert(kid >= 0);
    if (kid == 0) {
        rl_t *rl = open_node("victim", rl_test_redis_url(), 1);
        rl_limit_t lim;
        char err[128];
        rl_limit_parse(&lim, "name=db kind=inflight mode=exact max=3 max_hold=1500ms", err,
                       sizeof err);
        int id = rl_limit_add(rl, &lim);
        char ok = 1;
        for (int i = 0; i < 3; i++) {
            rl_permit_t p;
            if (id <= 0 ||
                rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, NULL) != RL_ALLOW)
                ok = 0;
        }
        if (write(pipefd[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(pipefd[1]);
    char ok = 0;
    ck_assert_int_eq(read(pipefd[0], &ok, 1), 1);
    close(pipefd[0]);
    ck_assert_int_eq(ok, 1);
    ck_assert_int_eq(kill(kid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(kid, &st, 0), kid);
    rl_t *rl = open_node("survivor", rl_test_redis_url(), 1);
    int id = add(rl, "name=db kind=inflight mode=exact max=3 max_hold=1500ms");
    redisContext *r = rl_test_redis_client(0);
    char set[200];
    set_name(rl, "db", "k", set, sizeof set);
    long long end = lease_end(r, set, 0); /* the dead node's first lease end */
    long long killed = redis_ms(r);
    ck_assert(end > 0);
    ck_assert_int_eq(zcard(r, set), 3);
    /* Denied while the dead node's leases run; admitted once one ends. An
     * admission is checked against Redis's own clock, never against how
     * long the test took. */
    rl_permit_t p;
    rl_decision_t d;
    rl_decision_init(&d);
    long long deadline = killed + K_LEASE_MS + 60000;
    int rc;
    long denies = 0;
    for (;;) {
        long long before = redis_ms(r);
        rc = rl_inflight_acquire(rl, id, "k", 1, RL_INFLIGHT_NO_CLASS, &p, &d);
        long long after = redis_ms(r);
        if (rc == RL_ALLOW) {
            ck_assert_msg(after >= end, "admitted at %lld, before the lease end %lld", after,
                          end);
            break;
        }
        ck_assert_msg(before < end, "denied at %lld, after every lease ended (%lld)", before,
                      end);
        ck_assert(d.retry_after_ms >= 1);
        denies++;
        ck_assert_msg(after < deadline, "the dead node's permits never came back");
        sleep_ms(25);
    }
    long long back = redis_ms(r);
    fprintf(stderr, "killed node: a permit back %lld ms after the kill, %lld ms after its lease "
            "ended (lease %d ms; %ld denies before)\n", back - killed, back - end, K_LEASE_MS,
            denies);
    ck_assert_int_eq(rl_inflight_release(rl, &p, RL_INFLIGHT_SUCCESS, 0), 0);
    rl_close(rl);
}
END_TEST

/* ------------------------------------------------------------ on_failure */

START_TEST(redis_down_each_on_failure)
{
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *rl = open_node("a", rl_test_redis_url(), 2);
    int ic = add(rl, "name=c kind=inflight mode=exact max=4 max_hold=30s on_failure=closed");
    int io = add(rl, "name=o kind=inflight mode=exact max=4 max_hold=30s on_failure=open");
    int il = add(rl, "name=l kind=inflight mode=exact max=4 max_hold=30s on_failure=local");
    rl_permit_t before[2], p[8];
    rl_decision_t d;
    rl_decision_init(&d);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &before[i],
                                             NULL),
                         RL_ALLOW);
    rl_test_redis_kill(rl_test_redis());

    /* closed: denied. */
    ck_assert_int_eq(rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &p[0], &d),
                     RL_DENY);
    ck_assert(d.flags & RL_FLAG_DEGRADED);
    /* open: admitted, past max. */
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(rl_inflight_acquire(rl, io, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], &d),
                         RL_ALLOW);
        ck_assert(d.flags & RL_FLAG_DEGRADED);
    }
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_SUCCESS, 0), 0);
    /* local: this node's pessimistic share, ceil(4 / 2 expected nodes). */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(rl_inflight_acquire(rl, il, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], &d),
                         RL_ALLOW);
        ck_assert(d.flags & RL_FLAG_DEGRADED);
    }
    ck_assert_int_eq(rl_inflight_acquire(rl, il, "k", 1, RL_INFLIGHT_NO_CLASS, &p[2], &d),
                     RL_DENY);
    ck_assert_uint_eq(d.limit, 2);
    ck_assert_int_eq(rl_inflight_release(rl, &p[0], RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_inflight_acquire(rl, il, "k", 1, RL_INFLIGHT_NO_CLASS, &p[0], &d),
                     RL_ALLOW);
    rl_limit_stats_t s;
    rl_limit_stats_init(&s);
    ck_assert_int_eq(rl_limit_stats(rl, il, &s), 0);
    ck_assert_uint_eq(s.inflight, 2);
    ck_assert_uint_ge(s.degraded, 3);

    /* Restarted empty: the holders Redis lost are late when released, and
     * the limit is enforced afresh. */
    char err[256];
    ck_assert_msg(rl_test_redis_crash_restart(rl_test_redis(), err, sizeof err) == 0, "%s", err);
    int rc = RL_DENY;
    for (int i = 0; i < 400 && rc != RL_ALLOW; i++) {
        rc = rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &p[4], &d);
        if (rc != RL_ALLOW)
            sleep_ms(25);
    }
    ck_assert_int_eq(rc, RL_ALLOW);
    ck_assert(d.flags & RL_FLAG_EXACT);
    for (int i = 5; i < 8; i++)
        ck_assert_int_eq(rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &p[i], &d),
                         RL_ALLOW);
    ck_assert_int_eq(rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &p[3], &d),
                     RL_DENY);
    ck_assert(!(d.flags & RL_FLAG_DEGRADED));
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &before[i], RL_INFLIGHT_SUCCESS, 0),
                         RL_INFLIGHT_RECLAIMED);
    for (int i = 4; i < 8; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_SUCCESS, 0), 0);
    /* The local tier's permits go back to it. */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(rl_inflight_release(rl, &p[i], RL_INFLIGHT_SUCCESS, 0), 0);
    ck_assert_int_eq(rl_limit_stats(rl, il, &s), 0);
    ck_assert_uint_eq(s.inflight, 0);
    /* Permits still held at rl_close: nothing leaks (valgrind). */
    ck_assert_int_eq(rl_inflight_acquire(rl, ic, "k", 1, RL_INFLIGHT_NO_CLASS, &p[0], &d),
                     RL_ALLOW);
    rl_close(rl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inflight_exact");
    TCase *tc = tcase_create("exact");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, spec_rules);
    tcase_add_test(tc, acquire_release_decisions);
    tcase_add_test(tc, double_foreign_and_late);
    tcase_add_test(tc, threads_never_exceed_max);
    tcase_add_test(tc, nodes_never_exceed_max);
    tcase_add_test(tc, killed_node_permits_return_after_lease);
    tcase_add_test(tc, redis_down_each_on_failure);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
