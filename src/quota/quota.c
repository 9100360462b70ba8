/* SPDX-License-Identifier: MIT */
/*
 * Quotas (see quota/quota.h and the header's rl_quota_* blocks). A charge is one
 * call of quota.lua through the instance's per-request caller, the exact
 * thread's (redis/caller.h, exact/exact.h: one pool for both):
 * blocking, at most the instance's quota_timeout_ms. When Redis cannot
 * answer, the quota's on_failure decides (policy/policy.h, as for limits); an open
 * quota's charge goes into the journal, which the replay thread sends
 * again, oldest first, one blocking call at a time, backing off while Redis
 * does not answer. An entry leaves the journal only when Redis answered it.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <uv.h>
#include "quota/quota.h"
#include "quota/spec.h"
#include "quota/journal.h"
#include "quota/period.h"
#include "core.h"
#include "base/alloc.h"
#include "base/errors.h"
#include "policy/policy.h"
#include "lua/scripts.h"
#include "base/structsize.h"
#include "redis/caller.h"
#include "exact/exact.h"
#include "redis/keys.h"

#define SLOT_BITS 8 /* RL_QUOTA_MAX == 1 << SLOT_BITS */
#define GEN_MAX ((UINT32_C(1) << (31 - SLOT_BITS)) - 1)
/* The replay's wait after a failed call: doubling from the first to the
 * last while Redis does not answer. */
#define REPLAY_BACKOFF_MIN_MS 20
#define REPLAY_BACKOFF_MAX_MS 1000

/* Names: {prefix(32):q1:name(63):hex(32)} plus ":r:" and 32 hex. */
#define TAG_MAX 160

_Static_assert(RL_QUOTA_MAX == 1 << SLOT_BITS, "quota ids carry the slot in SLOT_BITS");

enum { Q_CHARGES, Q_DUPLICATES, Q_DEGRADED, Q_JOURNALED, Q_REPLAYED, Q_LOST, Q_N };

typedef struct qslot {
    rl_quota_t def;
    uint32_t gen;
    int live;
} qslot_t;

struct rl_quotas {
    struct rl *rl;
    pid_t pid; /* the process that made it (a shared instance's children
                  see a fork()'s copy until rl_shared_attach) */
    uint32_t journal_max;
    uint32_t timeout_ms;
    uv_mutex_t mu; /* slots, journal, the replay thread's state */
    uv_cond_t cv;  /* the replay thread's wake: an entry, or stop */
    qslot_t slots[RL_QUOTA_MAX];
    uint32_t count;
    rl_qjournal_t journal;
    /* The instance's per-request caller (the exact thread's: exact/exact.h),
     * published at the first rl_quota_add. */
    _Atomic(rl_redis_caller_t *) caller_pub;
    uv_thread_t replay;
    int started;      /* the journal exists and the replay thread runs */
    int replay_stop;  /* under mu */
    uint32_t lose_acks; /* test hook, under mu */
    _Atomic uint64_t counters[Q_N];
    _Atomic uint64_t time_ms; /* test hook: 0 = Redis TIME */
    _Atomic int64_t skew_ms;  /* Redis TIME minus this node's clock, as a
                                 period mismatch last showed it */
};

static void count(rl_quotas_t *qs, int c, uint64_t n)
{
    /* relaxed: statistics. */
    atomic_fetch_add_explicit(&qs->counters[c], n, memory_order_relaxed);
}

/* ------------------------------------------------------------ the names */

/* The counters: the period holding the node's guess of Redis's clock, the
 * one before and the one after (quota.lua takes the one holding its TIME). */
enum { QN_COUNTERS = 3 };

typedef struct qnames {
    char tag[TAG_MAX];     /* {...} */
    size_t tag_len;
    char counter[QN_COUNTERS][TAG_MAX]; /* {...}:p:<start> */
    size_t counter_len[QN_COUNTERS];
    char rid[TAG_MAX];     /* {...}:r:<hex>; empty for a read */
    size_t rid_len;
} qnames_t;

static void make_names(const rl_t *rl, const rl_quota_t *q, rl_keyid_t key, const uint64_t *rid,
                       qnames_t *n)
{
    n->tag_len = (size_t)rl__redis_quota_tag(&rl->kh, rl->key_prefix, q->name, key, n->tag,
                                             sizeof n->tag);
    n->rid_len = 0;
    n->rid[0] = '\0';
    if (rid != NULL)
        n->rid_len = (size_t)snprintf(n->rid, sizeof n->rid, "%s:r:%016" PRIx64 "%016" PRIx64,
                                      n->tag, rid[0], rid[1]);
}

/* The counters around at_ms (Unix ms, the guess of Redis's now). */
static void name_counters(qnames_t *n, const rl_quota_t *q, uint64_t at_ms)
{
    uint64_t start, end, before = 0, unused;
    rl__quota_period(q->period, q->period_ms, at_ms, &start, &end);
    if (start > 0)
        rl__quota_period(q->period, q->period_ms, start - 1, &before, &unused);
    uint64_t starts[QN_COUNTERS] = {start, before, end};
    for (int i = 0; i < QN_COUNTERS; i++)
        n->counter_len[i] = (size_t)snprintf(n->counter[i], sizeof n->counter[i],
                                             "%s:p:%" PRIu64, n->tag, starts[i]);
}

/* quota.lua's arguments (its header comment has the order): KEYS[1..4],
 * then ARGV[1..7]. */
enum { QA_KEYS = 4, QA_ARGS = 7 };
typedef struct qargs {
    const char *v[QA_KEYS + QA_ARGS];
    size_t l[QA_KEYS + QA_ARGS];
    char num[6][24];
} qargs_t;

static void make_args(const qnames_t *n, const rl_quota_t *q, int charge, uint64_t cost,
                      uint64_t time_ms, qargs_t *a)
{
    uint64_t nums[6] = {cost, q->amount, (uint64_t)q->period, q->period_ms, q->dedup_ms,
                        time_ms};
    int keys[QA_KEYS] = {0, -1, 1, 2}; /* counter index; -1: the request id */
    for (int i = 0; i < QA_KEYS; i++) {
        int c = keys[i] < 0 && n->rid_len == 0 ? 0 : keys[i];
        a->v[i] = c < 0 ? n->rid : n->counter[c];
        a->l[i] = c < 0 ? n->rid_len : n->counter_len[c];
    }
    a->v[QA_KEYS] = charge ? "c" : "g";
    a->l[QA_KEYS] = 1;
    for (int i = 0; i < 6; i++) {
        a->l[QA_KEYS + 1 + i] = (size_t)snprintf(a->num[i], sizeof a->num[i], "%" PRIu64,
                                                 nums[i]);
        a->v[QA_KEYS + 1 + i] = a->num[i];
    }
}

/* ------------------------------------------------------------ the reply */

typedef struct qreply {
    int ok;
    int64_t allowed, used, reset, dup;
    int64_t redis_now; /* not ok, a period mismatch: Redis's now; else -1 */
} qreply_t;

/* The caller's parse hook: {allowed, used, reset, duplicate}, or not ok
 * (an error reply: OOM, BUSY, ...; or {-1, now}: no counter named was the
 * period Redis's TIME is in). */
static void parse_reply(void *ud, int status, const redisReply *r)
{
    qreply_t *p = ud;
    p->ok = 0;
    p->redis_now = -1;
    if (status == RL_CALL_REPLY && r != NULL && r->type == REDIS_REPLY_ARRAY &&
        r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[0]->integer == -1 && r->element[1]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->integer >= 0)
        p->redis_now = r->element[1]->integer;
    if (status != RL_CALL_REPLY || r == NULL || r->type != REDIS_REPLY_ARRAY ||
        r->elements != 4)
        return;
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0)
            return;
        v[i] = r->element[i]->integer;
    }
    p->allowed = v[0];
    p->used = v[1];
    p->reset = v[2];
    p->dup = v[3];
    p->ok = 1;
}

/* The test hook's time, or 0: Redis TIME. */
static uint64_t hook_time(rl_quotas_t *qs)
{
    /* relaxed: a test hook read as a plain value. */
    return atomic_load_explicit(&qs->time_ms, memory_order_relaxed);
}

static uint64_t wall_ms(rl_quotas_t *qs);

/* Where this node expects Redis's clock to be: its own plus the skew a
 * period mismatch last showed (the test hook's time is Redis's, exactly). */
static uint64_t guess_ms(rl_quotas_t *qs)
{
    if (hook_time(qs) != 0)
        return hook_time(qs);
    /* relaxed: a hint; a stale one costs a round trip, never a count. */
    int64_t g = (int64_t)wall_ms(qs) + atomic_load_explicit(&qs->skew_ms, memory_order_relaxed);
    return g > 0 ? (uint64_t)g : 0;
}

static void learn_skew(rl_quotas_t *qs, int64_t redis_now)
{
    /* relaxed: a hint, as guess_ms reads it. */
    atomic_store_explicit(&qs->skew_ms, redis_now - (int64_t)wall_ms(qs),
                          memory_order_relaxed);
}

/* One blocking script call (asked again once, from Redis's now, when the
 * node's clock named the wrong periods); 1 with *p filled when Redis
 * answered. */
static int run(rl_quotas_t *qs, const rl_quota_t *q, qnames_t *n, int charge, uint64_t cost,
               qreply_t *p)
{
    uint64_t at = guess_ms(qs), deadline = uv_hrtime() + (uint64_t)qs->timeout_ms * 1000000u;
    /* acquire: pairs with start_replay's release (the caller fully built). */
    rl_redis_caller_t *c = atomic_load_explicit(&qs->caller_pub, memory_order_acquire);
    for (int attempt = 0; attempt < 2; attempt++) {
        qargs_t a;
        name_counters(n, q, at);
        make_args(n, q, charge, cost, hook_time(qs), &a);
        rl_redis_call_t call = {RL_EXACT_SCRIPT_QUOTA, QA_KEYS, QA_ARGS, a.v, a.l, deadline};
        p->ok = 0;
        p->redis_now = -1;
        int rc = rl__redis_caller_wait(c, &call, parse_reply, p);
        if (rc != RL_CALL_REPLY || p->ok || p->redis_now < 0)
            return rc == RL_CALL_REPLY && p->ok;
        learn_skew(qs, p->redis_now);
        at = (uint64_t)p->redis_now;
    }
    return 0;
}

/* ----------------------------------------------------------- the replay */

static int find_live(rl_quotas_t *qs, uint32_t slot, uint32_t gen, rl_quota_t *out)
{
    qslot_t *s = &qs->slots[slot];
    if (!s->live || s->gen != gen)
        return 0;
    *out = s->def;
    return 1;
}

/*
 * The replay thread: send the oldest entry of a live quota (entries of
 * removed quotas are dropped and counted lost), pop it once Redis answered,
 * else wait (backing off) and send it again. Redis's answer to a replayed
 * charge is not anyone's answer: allowed, denied or a duplicate, the entry
 * is done.
 */
static void replay_main(void *arg)
{
    rl_quotas_t *qs = arg;
    uint64_t backoff = 0;
    uv_mutex_lock(&qs->mu);
    while (!qs->replay_stop) {
        rl_qjentry_t e;
        rl_quota_t q;
        if (rl__qjournal_peek(&qs->journal, &e) != 0) {
            uv_cond_wait(&qs->cv, &qs->mu);
            continue;
        }
        if (!find_live(qs, e.quota, e.gen, &q)) {
            rl__qjournal_pop(&qs->journal);
            count(qs, Q_LOST, 1);
            continue;
        }
        uv_mutex_unlock(&qs->mu);
        qnames_t n;
        make_names(qs->rl, &q, e.key, e.rid, &n);
        qreply_t p;
        int ok = run(qs, &q, &n, 1, e.cost, &p);
        uv_mutex_lock(&qs->mu);
        if (ok && qs->lose_acks > 0) {
            /* Test hook: as if the connection went before this answer. */
            qs->lose_acks--;
        } else if (ok) {
            rl__qjournal_pop(&qs->journal);
            count(qs, Q_REPLAYED, 1);
            backoff = 0;
        } else if (!qs->replay_stop) {
            backoff = backoff == 0 ? REPLAY_BACKOFF_MIN_MS
                                   : (backoff * 2 > REPLAY_BACKOFF_MAX_MS ? REPLAY_BACKOFF_MAX_MS
                                                                          : backoff * 2);
            uv_cond_timedwait(&qs->cv, &qs->mu, backoff * 1000000u);
        }
    }
    uv_mutex_unlock(&qs->mu);
}

/* The journal and the replay thread, at the first rl_quota_add (under mu);
 * charges go through the exact thread's caller, connected here (in a
 * shared instance: started by this process's rl_shared_attach, which calls this
 * through rl__quotas_adopt; before it, definitions only). */
static int start_replay(rl_quotas_t *qs, struct rl_exact *x)
{
    if (qs->started)
        return 0;
    if (x == NULL)
        return qs->rl->shsync != NULL ? 0 : RL_ENOTSUP;
    /* The first quota connects the exact path's pool (exact/exact.h). */
    struct rl_redis_caller *caller = rl__exact_caller(x);
    if (caller == NULL)
        return RL_ENOMEM;
    int rc = rl__qjournal_init(&qs->journal, &qs->rl->alloc, qs->journal_max);
    if (rc != 0)
        return rc;
    /* release: charges read the caller pointer with acquire; it was built
     * just above, before this rl_quota_add returns. */
    atomic_store_explicit(&qs->caller_pub, caller, memory_order_release);
    /* Every signal blocked in the thread (inherited at creation): the
     * host's handlers run on its own threads only. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = uv_thread_create(&qs->replay, replay_main, qs);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
        return RL_ENOMEM;
    }
    qs->started = 1;
    return 0;
}

/* ------------------------------------------------------------- lifetime */

int rl__quotas_create(struct rl *rl, uint32_t journal_max, uint32_t timeout_ms,
                      rl_quotas_t **out)
{
    rl_quotas_t *qs = rl__calloc(&rl->alloc, sizeof *qs, 64);
    if (qs == NULL)
        return RL_ENOMEM;
    qs->rl = rl;
    qs->pid = getpid();
    qs->journal_max = journal_max;
    qs->timeout_ms = timeout_ms;
    if (uv_mutex_init(&qs->mu) != 0) {
        rl__free(&rl->alloc, qs, sizeof *qs, 64);
        return RL_ENOMEM;
    }
    if (uv_cond_init(&qs->cv) != 0) {
        uv_mutex_destroy(&qs->mu);
        rl__free(&rl->alloc, qs, sizeof *qs, 64);
        return RL_ENOMEM;
    }
    for (int i = 0; i < Q_N; i++)
        atomic_init(&qs->counters[i], 0);
    atomic_init(&qs->time_ms, 0);
    atomic_init(&qs->skew_ms, 0);
    atomic_init(&qs->caller_pub, NULL);
    *out = qs;
    return 0;
}

void rl__quotas_stop(rl_quotas_t *qs)
{
    if (qs == NULL || !qs->started)
        return;
    uv_mutex_lock(&qs->mu);
    int joined = qs->replay_stop;
    qs->replay_stop = 1;
    uv_cond_signal(&qs->cv);
    uv_mutex_unlock(&qs->mu);
    if (!joined)
        uv_thread_join(&qs->replay);
}

void rl__quotas_destroy(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    rl__quotas_stop(qs);
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    uv_cond_destroy(&qs->cv);
    uv_mutex_destroy(&qs->mu);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
}

void rl__quotas_forget(rl_quotas_t *qs)
{
    /* The replay thread is the parent's: only this copy's memory is ours. */
    if (qs == NULL)
        return;
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
}

/* Make *slot (a shared instance's ledger this process sees) its own: a
 * fork()'s copy is replaced by a fresh ledger with the same definitions
 * (the copy's mutex and journal are a snapshot of another process's: never
 * locked here). 0 or RL_ENOMEM. */
static int own_ledger(struct rl *rl, rl_quotas_t **slot)
{
    rl_quotas_t *qs = *slot;
    if (qs == NULL || qs->pid == getpid())
        return 0;
    rl_quotas_t *mine = NULL;
    int rc = rl__quotas_create(rl, qs->journal_max, qs->timeout_ms, &mine);
    if (rc != 0)
        return rc;
    memcpy(mine->slots, qs->slots, sizeof mine->slots);
    mine->count = qs->count;
    rl__quotas_forget(qs);
    *slot = mine;
    return 0;
}

int rl__quotas_adopt(struct rl *rl, rl_quotas_t **slot, struct rl_exact *x)
{
    int rc = own_ledger(rl, slot);
    rl_quotas_t *qs = *slot;
    if (rc != 0 || qs == NULL)
        return rc;
    uv_mutex_lock(&qs->mu);
    rc = start_replay(qs, x);
    uv_mutex_unlock(&qs->mu);
    return rc;
}

void rl__quotas_drop(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    if (qs->pid == getpid())
        rl__quotas_destroy(qs);
    else
        rl__quotas_forget(qs);
}

rl_quotas_t *rl__quotas_of(struct rl *rl)
{
    if (rl->shsync == NULL)
        return rl->quotas;
    rl_quotas_t *qs = rl->shlocal != NULL ? rl->shlocal->quotas : NULL;
    return qs != NULL && qs->pid == getpid() ? qs : NULL;
}

void rl__quotas_stats(rl_quotas_t *qs, rl_stats_t *o)
{
    if (qs == NULL)
        return;
    uint64_t v[Q_N];
    for (int i = 0; i < Q_N; i++)
        /* relaxed: statistics. */
        v[i] = atomic_load_explicit(&qs->counters[i], memory_order_relaxed);
    o->quota_charges = v[Q_CHARGES];
    o->quota_duplicates = v[Q_DUPLICATES];
    o->quota_degraded = v[Q_DEGRADED];
    o->quota_journaled = v[Q_JOURNALED];
    o->quota_replayed = v[Q_REPLAYED];
    o->quota_lost = v[Q_LOST];
    uv_mutex_lock(&qs->mu);
    o->quota_journal_len = qs->journal.len;
    uv_mutex_unlock(&qs->mu);
}

void rl__quota_set_time(struct rl *rl, uint64_t unix_ms)
{
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs != NULL)
        /* relaxed: a test hook; each charge reads it once. */
        atomic_store_explicit(&qs->time_ms, unix_ms, memory_order_relaxed);
}

void rl__quota_lose_acks(struct rl *rl, uint32_t n)
{
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs == NULL)
        return;
    uv_mutex_lock(&qs->mu);
    qs->lose_acks = n;
    uv_mutex_unlock(&qs->mu);
}

/* A shared instance's quotas are defined in a process that did not attach
 * (the opener, or a process forked from it before the workers, as a
 * daemon's master is): its private ledger, which every process forked
 * later inherits and rl_shared_attach turns into that process's own. The
 * only rule that keeps every worker's quota ids the same: an attached
 * process's ledger is its own, and a change there would be its alone.
 * RL_ENOTSUP, logged (no message buffer), in an attached process. */
static int shared_registry(rl_t *rl, const char *what, const char *name)
{
    if (rl->shsync == NULL || rl__exact_of(rl) == NULL)
        return 0;
    rl__log(&rl->logger, RL_LOG_ERROR,
            "quota %.64s: %s in process %d, attached to the shared instance "
            "(rl_shared_attach): quotas are defined before the workers fork, in a process "
            "that did not attach", name, what, (int)getpid());
    return RL_ENOTSUP;
}

/* A shared instance's ledger of the calling (unattached) process for
 * rl_quota_add and rl_quota_remove: one made here at the first quota
 * (after rl_open_shared sealed the mapping: from this process's heap), or
 * its own from the copy it inherited. */
static int shared_ledger(rl_t *rl, rl_quotas_t **out)
{
    rl_quotas_t **slot = &rl->shlocal->quotas;
    int rc = own_ledger(rl, slot);
    if (rc != 0)
        return rc;
    if (*slot == NULL)
        rc = rl__quotas_create(rl, rl->shlocal->quota_journal_max,
                               rl->shlocal->quota_timeout_ms, slot);
    *out = *slot;
    return rc;
}

/* ----------------------------------------------------------- registry */

int rl_quota_add(rl_t *rl, const rl_quota_t *q)
{
    if (rl == NULL || q == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if ((rc = rl__quota_validate(q, NULL, 0)) != 0)
        return rc;
    if ((rc = shared_registry(rl, "added", q->name)) != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
    if (rl->shsync != NULL && (rc = shared_ledger(rl, &qs)) != 0)
        return rc;
    if (qs == NULL)
        return RL_ENOTSUP;
    rl_quota_t def;
    rl_quota_init(&def);
    memcpy(&def, q, q->size < sizeof def ? q->size : sizeof def);
    def.size = sizeof def;
    uv_mutex_lock(&qs->mu);
    int free_slot = -1;
    for (int i = 0; i < RL_QUOTA_MAX; i++) {
        if (qs->slots[i].live && strcmp(qs->slots[i].def.name, def.name) == 0) {
            uv_mutex_unlock(&qs->mu);
            return RL_EEXIST;
        }
        if (!qs->slots[i].live && free_slot < 0 && qs->slots[i].gen < GEN_MAX)
            free_slot = i;
    }
    if (free_slot < 0) {
        uv_mutex_unlock(&qs->mu);
        return RL_ELIMITS;
    }
    if ((rc = start_replay(qs, rl__exact_of(rl))) != 0) {
        uv_mutex_unlock(&qs->mu);
        return rc;
    }
    qslot_t *s = &qs->slots[free_slot];
    s->def = def;
    s->gen++;
    s->live = 1;
    qs->count++;
    int id = (int)((s->gen << SLOT_BITS) | (uint32_t)free_slot);
    uv_mutex_unlock(&qs->mu);
    return id;
}

/* The slot of a quota id, under qs->mu: NULL when unknown or removed. */
static qslot_t *slot_of(rl_quotas_t *qs, int quota)
{
    if (quota < 0)
        return NULL;
    qslot_t *s = &qs->slots[(uint32_t)quota & (RL_QUOTA_MAX - 1)];
    return s->live && s->gen == (uint32_t)quota >> SLOT_BITS ? s : NULL;
}

int rl_quota_remove(rl_t *rl, int quota)
{
    if (rl == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    char name[24];
    snprintf(name, sizeof name, "id %d", quota);
    if ((rc = shared_registry(rl, "removed", name)) != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
    if (rl->shsync != NULL && (rc = shared_ledger(rl, &qs)) != 0)
        return rc;
    if (qs == NULL)
        return RL_ENOTFOUND;
    uv_mutex_lock(&qs->mu);
    qslot_t *s = slot_of(qs, quota);
    if (s != NULL) {
        s->live = 0;
        qs->count--;
    }
    uv_mutex_unlock(&qs->mu);
    /* Its journal entries are dropped (and counted) as the replay meets
     * them: the journal is a FIFO, and removal is rare. */
    return s != NULL ? 0 : RL_ENOTFOUND;
}

/* ------------------------------------------------------------- charges */

static uint64_t wall_ms(rl_quotas_t *qs)
{
    uint64_t t = hook_time(qs);
    if (t != 0)
        return t;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void put_result(rl_quota_result_t *out, int allowed, uint32_t flags, uint64_t amount,
                       uint64_t used, uint64_t reset)
{
    if (out == NULL)
        return;
    rl_quota_result_t r;
    memset(&r, 0, sizeof r);
    r.size = out->size;
    r.allowed = allowed;
    r.flags = flags;
    r.amount = amount;
    r.used = used;
    r.remaining = used < amount ? amount - used : 0;
    r.reset_unix_ms = reset;
    memcpy(out, &r, out->size < sizeof r ? out->size : sizeof r);
}

/* The common checks of a charge and a read; *q gets the quota. */
static int begin(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out,
                 rl_quota_t *q, uint32_t *slot, uint32_t *gen)
{
    if (rl == NULL || (key == NULL && key_len > 0))
        return RL_EINVAL;
    if (out != NULL) {
        if (rl__struct_ok(out, out->size, RL_QUOTA_RESULT_SIZE_MIN, sizeof *out) != 0)
            return RL_ESIZE;
        put_result(out, RL_DENY, 0, 0, 0, 0);
    }
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if (key_len == 0 || key_len > RL_MAX_KEY_LEN)
        return RL_EKEYLEN;
    if (rl->shsync != NULL && rl__exact_of(rl) == NULL) {
        rl__log(&rl->logger, RL_LOG_ERROR,
                "quota %d: process %d charges or reads a quota of a shared instance without "
                "rl_shared_attach (which starts its Redis connections)", quota, (int)getpid());
        return RL_ENOTSUP;
    }
    rl_quotas_t *qs = rl__quotas_of(rl);
    if (qs == NULL)
        return RL_ENOTFOUND;
    uv_mutex_lock(&qs->mu);
    qslot_t *s = slot_of(qs, quota);
    if (s != NULL) {
        *q = s->def;
        *slot = (uint32_t)(s - qs->slots);
        *gen = s->gen;
    }
    uv_mutex_unlock(&qs->mu);
    return s != NULL ? 0 : RL_ENOTFOUND;
}

/* Redis could not answer: the quota's on_failure, flagged degraded. */
static int degraded(rl_quotas_t *qs, const rl_quota_t *q, int journal, const rl_qjentry_t *e,
                    rl_quota_result_t *out)
{
    count(qs, Q_DEGRADED, 1);
    rl_failure_answer_t a = rl__policy_on_failure(q->on_failure, q->amount, 0);
    int allowed = a.action == RL_FAILURE_ALLOW ? RL_ALLOW : RL_DENY;
    if (allowed == RL_ALLOW && journal) {
        uv_mutex_lock(&qs->mu);
        int full = rl__qjournal_push(&qs->journal, e) != 0;
        if (!full)
            uv_cond_signal(&qs->cv);
        uv_mutex_unlock(&qs->mu);
        count(qs, full ? Q_LOST : Q_JOURNALED, 1);
    }
    uint64_t start, end;
    rl__quota_period(q->period, q->period_ms, wall_ms(qs), &start, &end);
    put_result(out, allowed, RL_FLAG_DEGRADED, q->amount, 0, end);
    return allowed;
}

int rl_quota_charge(rl_t *rl, int quota, const void *key, size_t key_len, uint64_t cost,
                    const void *request_id, size_t id_len, rl_quota_result_t *out)
{
    rl_quota_t q;
    uint32_t slot = 0, gen = 0;
    int rc = begin(rl, quota, key, key_len, out, &q, &slot, &gen);
    if (rc != 0)
        return rc;
    if (request_id == NULL && id_len > 0)
        return RL_EINVAL;
    if (id_len == 0 || id_len > RL_QUOTA_ID_MAX || cost == 0)
        return RL_ERANGE;
    if (cost > q.amount)
        return RL_ECOST;
    rl_quotas_t *qs = rl__quotas_of(rl);
    rl_qjentry_t e = {slot, gen, cost, rl__keyhash(&rl->kh, key, key_len), {0, 0}};
    rl__redis_quota_rid(&rl->kh, request_id, id_len, e.rid);
    qnames_t n;
    make_names(rl, &q, e.key, e.rid, &n);
    qreply_t p;
    if (!run(qs, &q, &n, 1, cost, &p))
        return degraded(qs, &q, 1, &e, out);
    count(qs, Q_CHARGES, 1);
    if (p.dup)
        count(qs, Q_DUPLICATES, 1);
    int allowed = p.allowed ? RL_ALLOW : RL_DENY;
    put_result(out, allowed, p.dup ? RL_FLAG_DUPLICATE : 0, q.amount, (uint64_t)p.used,
               (uint64_t)p.reset);
    return allowed;
}

/* ------------------------------------------------------ async charges */

/* What an asynchronous charge carries to its answer (the caller slot holds
 * a copy): the quota as it was when sent, and the journal entry an open
 * quota's degraded answer needs. */
typedef struct async_charge {
    rl_quotas_t *qs;
    rl_quota_cb cb;
    void *ud;
    rl_quota_t q;
    rl_qjentry_t e;
} async_charge_t;
_Static_assert(sizeof(async_charge_t) <= RL_CALL_CTX_MAX, "fits a caller slot's context");

/* On the exact thread (rl_close's answers too): Redis's answer, or the
 * quota's on_failure as the blocking form gives it. */
static void async_done(void *ctx, int status, const redisReply *reply)
{
    const async_charge_t *c = ctx;
    qreply_t p;
    parse_reply(&p, status, reply);
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    if (p.redis_now >= 0)
        learn_skew(c->qs, p.redis_now); /* the next charge names the right periods */
    if (!p.ok) {
        int rc = degraded(c->qs, &c->q, 1, &c->e, &r);
        c->cb(c->ud, rc, &r);
        return;
    }
    count(c->qs, Q_CHARGES, 1);
    if (p.dup)
        count(c->qs, Q_DUPLICATES, 1);
    int allowed = p.allowed ? RL_ALLOW : RL_DENY;
    put_result(&r, allowed, p.dup ? RL_FLAG_DUPLICATE : 0, c->q.amount, (uint64_t)p.used,
               (uint64_t)p.reset);
    c->cb(c->ud, allowed, &r);
}

int rl_quota_charge_async(rl_t *rl, int quota, const void *key, size_t key_len, uint64_t cost,
                          const void *request_id, size_t id_len, rl_quota_cb cb, void *ud)
{
    if (cb == NULL)
        return RL_EINVAL;
    async_charge_t c;
    memset(&c, 0, sizeof c);
    uint32_t slot = 0, gen = 0;
    int rc = begin(rl, quota, key, key_len, NULL, &c.q, &slot, &gen);
    if (rc != 0)
        return rc;
    if (request_id == NULL && id_len > 0)
        return RL_EINVAL;
    if (id_len == 0 || id_len > RL_QUOTA_ID_MAX || cost == 0)
        return RL_ERANGE;
    if (cost > c.q.amount)
        return RL_ECOST;
    rl_quotas_t *qs = rl__quotas_of(rl);
    c.qs = qs;
    c.cb = cb;
    c.ud = ud;
    c.e = (rl_qjentry_t){slot, gen, cost, rl__keyhash(&rl->kh, key, key_len), {0, 0}};
    rl__redis_quota_rid(&rl->kh, request_id, id_len, c.e.rid);
    qnames_t n;
    make_names(rl, &c.q, c.e.key, c.e.rid, &n);
    name_counters(&n, &c.q, guess_ms(qs));
    qargs_t a;
    make_args(&n, &c.q, 1, cost, hook_time(qs), &a);
    rl_redis_call_t call = {RL_EXACT_SCRIPT_QUOTA, QA_KEYS, QA_ARGS, a.v, a.l,
                            uv_hrtime() + (uint64_t)qs->timeout_ms * 1000000u};
    /* acquire: pairs with start_replay's release (the caller fully built). */
    rl_redis_caller_t *caller = atomic_load_explicit(&qs->caller_pub, memory_order_acquire);
    if (rl__redis_caller_send(caller, &call, async_done, &c, sizeof c) == 0)
        return RL_PENDING;
    /* Every slot busy (or closing): on_failure answers now, inline, as the
     * blocking form would have when Redis could not answer. */
    return degraded(qs, &c.q, 1, &c.e, NULL);
}

int rl_quota_get(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out)
{
    rl_quota_t q;
    uint32_t slot = 0, gen = 0;
    int rc = begin(rl, quota, key, key_len, out, &q, &slot, &gen);
    if (rc != 0)
        return rc;
    rl_quotas_t *qs = rl__quotas_of(rl);
    qnames_t n;
    make_names(rl, &q, rl__keyhash(&rl->kh, key, key_len), NULL, &n);
    qreply_t p;
    if (!run(qs, &q, &n, 0, 0, &p))
        return degraded(qs, &q, 0, NULL, out);
    int allowed = (uint64_t)p.used < q.amount ? RL_ALLOW : RL_DENY;
    put_result(out, allowed, 0, q.amount, (uint64_t)p.used, (uint64_t)p.reset);
    return allowed;
}
