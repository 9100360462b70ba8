/* SPDX-License-Identifier: MIT */
/* hot_policy=local against a model (src/sync/round.c's report policy): two
 * nodes in one process, checked from two threads at once, manual rounds on
 * a frozen virtual clock (it moves only between steps, by the test), a real
 * redis-server. Node A's key is
 * hot: once marked it reports every hot_every rounds and no other, its
 * share stays what its last report brought back while node B's demand
 * changes Redis's answer, Redis's usage of the key is always exactly what
 * the nodes admitted up to their last reports (each count once, never
 * twice), and nothing is lost when the key leaves hot and the nodes stop.
 * The configurable K (rl_config_t.hotkeys_k) is here too. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "local/keyhash.h"
#include "redis/keys.h"
#include "local/shareword.h"
#include "sync/sync.h"

static const char secret[] = "hot-policy-secret-0123456789";
static const char hot_key[] = "the-hot-key";

static void free_client(void *r) { redisFree(r); }

static rl_t *open_node(const char *node, rl_test_clock_t *clk)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = 100;
    c.expected_nodes = 2;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "hotpol";
    c.clock = rl_test_clock_fn;
    c.clock_ud = clk;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, 1), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

/* Connected, the report script loaded: a round now reaches Redis (the
 * first connect is the sync thread's, after rl_open returned). */
static int connected(void *p)
{
    rl_sync_counters_t c;
    rl__sync_counters(((rl_t *)p)->sync, &c);
    return c.connected == 1;
}

static int add_limit(rl_t *rl)
{
    rl_limit_t lim;
    char err[256];
    ck_assert_int_eq(rl_limit_parse(&lim,
                                    "name=hp rate=1000/s burst=100 hot=0.1 hot_policy=local "
                                    "hot_every=4",
                                    err, sizeof err),
                     0);
    int id = rl_limit_add(rl, &lim);
    ck_assert_int_ge(id, 0);
    return id;
}

enum { A, B, NODES, WORKERS = 2 };

struct fleet;

/* A checker thread: each step, its part of every node's checks. */
typedef struct worker {
    struct fleet *f;
    pthread_t th;
    uint64_t admitted[NODES]; /* read by the main thread after a barrier */
} worker_t;

typedef struct fleet {
    pthread_barrier_t start, done; /* the workers and the main thread */
    int per_step[NODES];           /* checks per step, written before start */
    int stop;                      /* written before start */
    worker_t w[WORKERS];
    rl_test_clock_t *clk;
    rl_t *n[NODES];
    int id[NODES];
    uint64_t admitted[NODES];  /* every check each node admitted */
    uint64_t reported[NODES];  /* the model: admitted up to its last report */
    uint64_t reports[NODES];   /* its sync counter after the last round */
    redisContext *r;
    char key[256];             /* the hot key's Redis hash */
} fleet_t;

static uint64_t reports_of(rl_t *rl)
{
    rl_sync_counters_t c;
    rl__sync_counters(rl->sync, &c);
    return c.reports;
}

static void *worker_main(void *p)
{
    worker_t *w = p;
    fleet_t *f = w->f;
    for (;;) {
        pthread_barrier_wait(&f->start);
        if (f->stop)
            return NULL;
        for (int i = 0; i < NODES; i++)
            for (int k = 0; k < f->per_step[i] / WORKERS; k++)
                w->admitted[i] += rl_check(f->n[i], f->id[i], hot_key, sizeof hot_key - 1, 1,
                                           NULL) == RL_ALLOW;
        pthread_barrier_wait(&f->done);
    }
}

static void workers_start(fleet_t *f)
{
    ck_assert_int_eq(pthread_barrier_init(&f->start, NULL, WORKERS + 1), 0);
    ck_assert_int_eq(pthread_barrier_init(&f->done, NULL, WORKERS + 1), 0);
    for (int j = 0; j < WORKERS; j++) {
        f->w[j].f = f;
        ck_assert_int_eq(pthread_create(&f->w[j].th, NULL, worker_main, &f->w[j]), 0);
    }
}

static void workers_stop(fleet_t *f)
{
    f->stop = 1;
    pthread_barrier_wait(&f->start);
    for (int j = 0; j < WORKERS; j++)
        pthread_join(f->w[j].th, NULL);
    pthread_barrier_destroy(&f->start);
    pthread_barrier_destroy(&f->done);
}

/* One 100 ms round: per[i] checks of the hot key on node i, a hundredth
 * each ms from WORKERS threads at once (the clock stands still while they
 * run: it moves only between steps), then both nodes sync. Returns which
 * nodes reported the key (a bit each) and updates the model. */
static unsigned round_of(fleet_t *f, const int per[NODES])
{
    for (int i = 0; i < NODES; i++)
        f->per_step[i] = per[i] / 100;
    for (int step = 0; step < 100; step++) {
        pthread_barrier_wait(&f->start);
        pthread_barrier_wait(&f->done);
        rl_test_clock_advance(f->clk, 1000000);
    }
    for (int i = 0; i < NODES; i++) {
        f->admitted[i] = 0;
        for (int j = 0; j < WORKERS; j++)
            f->admitted[i] += f->w[j].admitted[i];
    }
    uint64_t vms = atomic_load(&f->clk->precise_ns) / 1000000;
    unsigned who = 0;
    for (int i = 0; i < NODES; i++) {
        ck_assert_int_eq(rl__sync_step(f->n[i]->sync, vms), 0);
        uint64_t now = reports_of(f->n[i]);
        ck_assert_uint_le(now - f->reports[i], 1); /* one key */
        if (now != f->reports[i]) {
            who |= 1u << i;
            f->reported[i] = f->admitted[i]; /* the harvest took every check */
        }
        f->reports[i] = now;
    }
    return who;
}

/* Redis's usage of the key: the admitted total its hash keeps. */
static uint64_t redis_usage(fleet_t *f)
{
    redisReply *rep = redisCommand(f->r, "HGET %s a", f->key);
    ck_assert_ptr_nonnull(rep);
    uint64_t v = rep->type == REDIS_REPLY_STRING ? strtoull(rep->str, NULL, 10) : 0;
    freeReplyObject(rep);
    return v;
}

/* Node i's view of the key: hot mark and rate share (rl_hotkeys). */
static int hot_view(fleet_t *f, int i, double *share)
{
    rl_hotkey_t hk[8];
    rl_hotkey_init(&hk[0]);
    for (int j = 1; j < 8; j++)
        hk[j] = hk[0];
    int n = rl_hotkeys(f->n[i], f->id[i], hk, 8);
    ck_assert_int_ge(n, 0);
    for (int j = 0; j < n; j++)
        if (hk[j].key_len == sizeof hot_key - 1) {
            *share = hk[j].share_per_s;
            return hk[j].hot;
        }
    *share = 0;
    return 0;
}

/* Node i's share word of the key (its slot's; the hot bit masked off):
 * the share its sync thread last applied. */
static uint64_t share_word(fleet_t *f, int i)
{
    rl_t *rl = f->n[i];
    rl_keyid_t id = rl__keyhash(&rl->kh, hot_key, sizeof hot_key - 1);
    for (size_t j = 0; j < rl->table.nslots; j++) {
        rl_slot_t *s = &rl->table.slots[j];
        uint64_t c = atomic_load(&s->ctrl);
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_LREF(c) == rl__limit_ref(f->id[i]) &&
            atomic_load(&s->id_lo) == id.lo && atomic_load(&s->id_hi) == id.hi)
            return RL_SHAREWORD_SHARE(atomic_load(&s->share));
    }
    ck_abort_msg("the key has no slot on node %d", i);
    return 0;
}

static void check_usage(fleet_t *f)
{
    ck_assert_uint_eq(redis_usage(f), f->reported[A] + f->reported[B]);
}

START_TEST(hot_local_against_model)
{
    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, UINT64_C(1000000000000));
    static fleet_t f; /* the workers' barriers: off the test's stack */
    memset(&f, 0, sizeof f);
    f.clk = &clk;
    f.n[A] = open_node("node-a", &clk);
    f.n[B] = open_node("node-b", &clk);
    for (int i = 0; i < NODES; i++) {
        f.id[i] = add_limit(f.n[i]);
        ck_assert_int_ne(rl_test_wait_until(connected, f.n[i], 30000), 0);
    }
    workers_start(&f);
    f.r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert_ptr_nonnull(f.r);
    rl_test_hold(f.r, free_client);
    ck_assert_int_eq(f.r->err, 0);
    rl__redis_key_name(&f.n[A]->kh, f.n[A]->key_prefix, "hp",
                       rl__keyhash(&f.n[A]->kh, hot_key, sizeof hot_key - 1), f.key,
                       sizeof f.key);

    /* A alone at twice the limit: near every round, hot after two. */
    const int a_only[NODES] = {2000, 0}, both[NODES] = {2000, 2000}, none[NODES] = {0, 0};
    double share;
    int rounds = 0;
    while (!hot_view(&f, A, &share)) {
        ck_assert_uint_eq(round_of(&f, a_only) & 1u, 1u); /* not hot: every round */
        check_usage(&f);
        ck_assert_int_lt(++rounds, 10);
    }
    /* Hot: the next round reports at once (its last report announced one
     * round), then every 4th round and no other. */
    ck_assert_uint_eq(round_of(&f, a_only) & 1u, 1u);
    check_usage(&f);
    for (int r = 1; r <= 8; r++) {
        unsigned who = round_of(&f, a_only);
        ck_assert_msg((who & 1u) == (r % 4 == 0 ? 1u : 0u), "round %d after: who %u", r, who);
        check_usage(&f); /* between A's reports Redis has its last, never more */
    }
    ck_assert_int_eq(hot_view(&f, A, &share), 1);
    ck_assert_double_gt(share, 900.0); /* A alone: (nearly) the whole rate */

    /* B starts: Redis's answer for A falls at once, but A keeps the share
     * its last report brought back until its next report, 4 rounds on. */
    uint64_t frozen = share_word(&f, A);
    ck_assert_uint_ne(frozen, 0);
    for (int r = 1; r <= 3; r++) {
        unsigned who = round_of(&f, both);
        ck_assert_uint_eq(who & 1u, 0u);
        ck_assert_uint_eq(who & 2u, 2u); /* B: new, then near: every round */
        ck_assert_uint_eq(share_word(&f, A), frozen);
        check_usage(&f);
    }
    ck_assert_uint_eq(round_of(&f, both) & 1u, 1u);
    rl_gcra_t before, after;
    rl__shareword_decode(frozen, &before);
    rl__shareword_decode(share_word(&f, A), &after);
    /* a longer interval: a smaller rate share, B's part taken out */
    ck_assert_uint_gt(after.t_fp, before.t_fp + before.t_fp / 4);
    check_usage(&f);
    uint64_t now_word = share_word(&f, A);
    ck_assert_uint_eq(round_of(&f, both) & 1u, 0u);
    ck_assert_uint_eq(share_word(&f, A), now_word);

    /* Both stop, a round after A's last report: its demand fell, so it
     * reports at once (not 3 rounds on) and lingers; the key leaves hot;
     * every admitted check is in Redis, once. */
    unsigned who = round_of(&f, none);
    ck_assert_uint_eq(who & 1u, 1u);
    check_usage(&f);
    /* It leaves hot after its fleet rate has been under 3/4 of the
     * threshold for 3 rounds (the rates decay round by round). */
    for (rounds = 0; hot_view(&f, A, &share); rounds++) {
        ck_assert_int_lt(rounds, 40);
        round_of(&f, none);
    }
    ck_assert_uint_eq(f.reported[A], f.admitted[A]);
    ck_assert_uint_eq(f.reported[B], f.admitted[B]);
    ck_assert_uint_eq(redis_usage(&f), f.admitted[A] + f.admitted[B]);
    ck_assert_uint_gt(f.admitted[A], 0);
    ck_assert_uint_gt(f.admitted[B], 0);
    workers_stop(&f);
}
END_TEST

/* rl_config_t.hotkeys_k: its range, and that it sizes what a report can
 * hold (8 x K counters per sketch). */
START_TEST(hotkeys_k_config)
{
    char err[256];
    rl_config_t c;
    rl_t *rl = NULL;
    rl_config_init(&c);
    ck_assert_uint_eq(c.hotkeys_k, 32);
    c.err = err;
    c.errlen = sizeof err;
    c.hotkeys_k = 0;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "hotkeys_k"));
    c.hotkeys_k = 1025;
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "hotkeys_k: 1025 is outside 1..1024"));
    ck_assert_ptr_null(rl);

    static rl_test_clock_t clk;
    atomic_store(&clk.precise_ns, UINT64_C(1000000000000));
    static const uint32_t ks[] = {1, 2, 32, 1024};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        rl_config_init(&c);
        c.hotkeys_k = ks[t];
        c.clock = rl_test_clock_fn;
        c.clock_ud = &clk;
        ck_assert_int_eq(rl_open(&rl, &c), 0);
        rl_test_hold(rl, rl_test_close_fn);
        rl_limit_t lim;
        ck_assert_int_eq(rl_limit_parse(&lim, "name=k rate=10/s", err, sizeof err), 0);
        int id = rl_limit_add(rl, &lim);
        ck_assert_int_ge(id, 0);
        /* 600 distinct keys, key i checked i % 7 + 1 times */
        for (int i = 0; i < 600; i++) {
            char key[16];
            int len = snprintf(key, sizeof key, "key-%d", i);
            for (int j = 0; j <= i % 7; j++)
                ck_assert_int_ge(rl_check(rl, id, key, (size_t)len, 1, NULL), 0);
        }
        rl_test_clock_advance(&clk, 1000000000);
        static rl_hotkey_t out[600];
        rl_hotkey_init(&out[0]);
        for (int i = 1; i < 600; i++)
            out[i] = out[0];
        int n = rl_hotkeys(rl, id, out, 600);
        /* every counter holds a key: 8 x K of them, or all 600 keys */
        uint32_t want = 8 * ks[t] < 600 ? 8 * ks[t] : 600;
        ck_assert_int_eq(n, (int)want);
        rl_test_release(rl);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hot_policy");
    TCase *tc = tcase_create("threads");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, hot_local_against_model);
    tcase_add_test(tc, hotkeys_k_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
