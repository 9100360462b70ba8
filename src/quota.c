/* SPDX-License-Identifier: MIT */
/*
 * Quotas (see quota.h and the header's rl_quota_* blocks). A charge is one
 * call of quota.lua on the quota client: blocking, at most the instance's
 * quota_timeout_ms. When Redis cannot answer, the quota's on_failure
 * decides (policy.h, as for limits); an open quota's charge goes into the
 * journal, replayed on the client's loop thread, one entry at a time and
 * oldest first, whenever the client is connected.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <uv.h>
#include "quota.h"
#include "quotadef.h"
#include "quotajournal.h"
#include "quotaperiod.h"
#include "instance.h"
#include "alloc.h"
#include "errbuf.h"
#include "policy.h"
#include "scripts.h"
#include "structsize.h"
#include "redis/client.h"
#include "redis/keys.h"

#define SLOT_BITS 8 /* RL_QUOTA_MAX == 1 << SLOT_BITS */
#define GEN_MAX ((UINT32_C(1) << (31 - SLOT_BITS)) - 1)
/* A replay answered with an error (OOM, BUSY) is tried again after this. */
#define REPLAY_RETRY_MS 1000
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
    rl_redisurl_t url;
    uint32_t journal_max;
    uint32_t timeout_ms;
    uv_mutex_t mu; /* slots, journal, client start */
    qslot_t slots[RL_QUOTA_MAX];
    uint32_t count;
    rl_qjournal_t journal;
    rl_redis_client_t *client; /* set once under mu; then read-only */
    _Atomic(rl_redis_client_t *) client_pub;
    _Atomic uint64_t counters[Q_N];
    _Atomic uint64_t time_ms;   /* test hook: 0 = Redis TIME */
    _Atomic uint32_t lose_acks; /* test hook */
    /* The loop thread's replay state. */
    int replaying;
    int reset_pending;
};

static void count(rl_quotas_t *qs, int c, uint64_t n)
{
    /* relaxed: statistics. */
    atomic_fetch_add_explicit(&qs->counters[c], n, memory_order_relaxed);
}

/* ------------------------------------------------------------ the names */

typedef struct qnames {
    char tag[TAG_MAX];     /* {...} */
    size_t tag_len;
    char counter[TAG_MAX]; /* {...}:p: */
    size_t counter_len;
    char rid[TAG_MAX];     /* {...}:r:<hex> */
    size_t rid_len;
} qnames_t;

static void make_names(const rl_t *rl, const rl_quota_t *q, rl_keyid_t key, const uint64_t *rid,
                       qnames_t *n)
{
    n->tag_len = (size_t)rl__redis_quota_tag(&rl->kh, rl->key_prefix, q->name, key, n->tag,
                                             sizeof n->tag);
    n->counter_len = (size_t)snprintf(n->counter, sizeof n->counter, "%s:p:", n->tag);
    if (rid != NULL)
        n->rid_len = (size_t)snprintf(n->rid, sizeof n->rid, "%s:r:%016" PRIx64 "%016" PRIx64,
                                      n->tag, rid[0], rid[1]);
    else
        n->rid_len = (size_t)snprintf(n->rid, sizeof n->rid, "%s", n->counter);
}

/* quota.lua's arguments (its header comment has the order): KEYS[1..2],
 * then ARGV[1..7]. */
typedef struct qargs {
    const char *v[9];
    size_t l[9];
    char num[6][24];
} qargs_t;

static void make_args(const qnames_t *n, const rl_quota_t *q, int charge, uint64_t cost,
                      uint64_t time_ms, qargs_t *a)
{
    uint64_t nums[6] = {cost, q->amount, (uint64_t)q->period, q->period_ms, q->dedup_ms,
                        time_ms};
    a->v[0] = n->counter;
    a->l[0] = n->counter_len;
    a->v[1] = n->rid;
    a->l[1] = n->rid_len;
    a->v[2] = charge ? "c" : "g";
    a->l[2] = 1;
    for (int i = 0; i < 6; i++) {
        a->l[3 + i] = (size_t)snprintf(a->num[i], sizeof a->num[i], "%" PRIu64, nums[i]);
        a->v[3 + i] = a->num[i];
    }
}

/* The test hook's time, or 0: Redis TIME. */
static uint64_t hook_time(rl_quotas_t *qs)
{
    /* relaxed: a test hook read as a plain value. */
    return atomic_load_explicit(&qs->time_ms, memory_order_relaxed);
}

/* ------------------------------------------------------------ the reply */

typedef struct qreply {
    int ok;
    int64_t allowed, used, reset, dup;
} qreply_t;

static void parse_reply(void *priv, const redisReply *r)
{
    qreply_t *p = priv;
    p->ok = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
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

/* ----------------------------------------------------------- the replay */

static int find_live(rl_quotas_t *qs, uint32_t slot, uint32_t gen, rl_quota_t *out)
{
    qslot_t *s = &qs->slots[slot];
    if (!s->live || s->gen != gen)
        return 0;
    *out = s->def;
    return 1;
}

static void replay_kick(rl_quotas_t *qs);

static void replay_done(void *priv, int rc, const redisReply *reply)
{
    rl_quotas_t *qs = priv;
    qs->replaying = 0;
    if (rc == RL_REDIS_CALL_DOWN || rc == RL_REDIS_CALL_NOMEM)
        return; /* the next `up` starts it again */
    qreply_t p = {0};
    if (reply != NULL)
        parse_reply(&p, reply);
    if (!p.ok) {
        rl__redis_client_wake_after(qs->client, REPLAY_RETRY_MS);
        return;
    }
    /* relaxed: a test hook's count, read and written by this thread after
     * the test thread's store. */
    uint32_t lose = atomic_load_explicit(&qs->lose_acks, memory_order_relaxed);
    if (lose > 0) {
        atomic_store_explicit(&qs->lose_acks, lose - 1, memory_order_relaxed);
        qs->reset_pending = 1; /* dropped from the wake handler, not in hiredis's callback */
        rl__redis_client_wake(qs->client);
        return;
    }
    uv_mutex_lock(&qs->mu);
    rl__qjournal_pop(&qs->journal);
    uv_mutex_unlock(&qs->mu);
    count(qs, Q_REPLAYED, 1);
    replay_kick(qs);
}

/* Send the oldest journal entry of a live quota (entries of removed
 * quotas are dropped and counted lost). Loop thread. */
static void replay_kick(rl_quotas_t *qs)
{
    if (qs->replaying || !rl__redis_client_up(qs->client))
        return;
    rl_qjentry_t e;
    rl_quota_t q;
    for (;;) {
        uv_mutex_lock(&qs->mu);
        if (rl__qjournal_peek(&qs->journal, &e) != 0) {
            uv_mutex_unlock(&qs->mu);
            return;
        }
        int live = find_live(qs, e.quota, e.gen, &q);
        if (!live)
            rl__qjournal_pop(&qs->journal);
        uv_mutex_unlock(&qs->mu);
        if (live)
            break;
        count(qs, Q_LOST, 1);
    }
    qnames_t n;
    qargs_t a;
    make_names(qs->rl, &q, e.key, e.rid, &n);
    make_args(&n, &q, 1, e.cost, hook_time(qs), &a);
    qs->replaying = 1;
    rl__redis_client_send(qs->client, 0, n.tag + 1, n.tag_len - 2, 2, 9, a.v, a.l, replay_done,
                          qs);
}

static void client_up(void *owner) { replay_kick(owner); }

static void client_down(void *owner) { (void)owner; }

static void client_woken(void *owner)
{
    rl_quotas_t *qs = owner;
    if (qs->reset_pending) {
        qs->reset_pending = 0;
        rl__redis_client_reset(qs->client);
        return;
    }
    replay_kick(qs);
}

static const rl_redis_client_ops_t client_ops = {
    .up = client_up,
    .down = client_down,
    .woken = client_woken,
};

/* ------------------------------------------------------------- lifetime */

int rl__quotas_create(struct rl *rl, const rl_redisurl_t *url, uint32_t journal_max,
                      uint32_t timeout_ms, rl_quotas_t **out)
{
    rl_quotas_t *qs = rl__calloc(&rl->alloc, sizeof *qs, 64);
    if (qs == NULL)
        return RL_ENOMEM;
    qs->rl = rl;
    qs->url = *url;
    qs->journal_max = journal_max;
    qs->timeout_ms = timeout_ms;
    if (uv_mutex_init(&qs->mu) != 0) {
        rl__free(&rl->alloc, qs, sizeof *qs, 64);
        return RL_ENOMEM;
    }
    for (int i = 0; i < Q_N; i++)
        atomic_init(&qs->counters[i], 0);
    atomic_init(&qs->time_ms, 0);
    atomic_init(&qs->lose_acks, 0);
    atomic_init(&qs->client_pub, NULL);
    *out = qs;
    return 0;
}

void rl__quotas_destroy(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    rl__redis_client_stop(qs->client);
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    uv_mutex_destroy(&qs->mu);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
}

void rl__quotas_forget(rl_quotas_t *qs)
{
    if (qs == NULL)
        return;
    rl__redis_client_forget(qs->client);
    rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
    rl__free(&qs->rl->alloc, qs, sizeof *qs, 64);
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
    if (rl->quotas != NULL)
        /* relaxed: a test hook; each charge reads it once. */
        atomic_store_explicit(&rl->quotas->time_ms, unix_ms, memory_order_relaxed);
}

void rl__quota_lose_acks(struct rl *rl, uint32_t n)
{
    if (rl->quotas != NULL)
        /* relaxed: see replay_done. */
        atomic_store_explicit(&rl->quotas->lose_acks, n, memory_order_relaxed);
}

/* ----------------------------------------------------------- registry */

static int start_client(rl_quotas_t *qs)
{
    if (qs->client != NULL)
        return 0;
    int rc = rl__qjournal_init(&qs->journal, &qs->rl->alloc, qs->journal_max);
    if (rc != 0)
        return rc;
    static const char *const sources[1] = {rl__lua_quota};
    rc = rl__redis_client_start(&qs->client, &qs->rl->alloc, &qs->url,
                                qs->rl->reconnect_max_ms, sources, 1, &client_ops, qs);
    if (rc != 0) {
        rl__qjournal_destroy(&qs->journal, &qs->rl->alloc);
        return rc;
    }
    /* release: charges read the client pointer with acquire, and need the
     * client it points to fully built. */
    atomic_store_explicit(&qs->client_pub, qs->client, memory_order_release);
    return 0;
}

int rl_quota_add(rl_t *rl, const rl_quota_t *q)
{
    if (rl == NULL || q == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if ((rc = rl__quota_validate(q, NULL, 0)) != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
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
    if ((rc = start_client(qs)) != 0) {
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
    rl_quotas_t *qs = rl->quotas;
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
    rl_quotas_t *qs = rl->quotas;
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

/* One script call; 1 with *p filled when Redis answered. */
static int run(rl_quotas_t *qs, const rl_quota_t *q, const qnames_t *n, int charge,
               uint64_t cost, qreply_t *p)
{
    qargs_t a;
    make_args(n, q, charge, cost, hook_time(qs), &a);
    /* acquire: pairs with start_client's release. */
    rl_redis_client_t *c = atomic_load_explicit(&qs->client_pub, memory_order_acquire);
    p->ok = 0;
    int rc = rl__redis_client_call(c, 0, n->tag + 1, n->tag_len - 2, 2, 9, a.v, a.l,
                                   qs->timeout_ms, parse_reply, p);
    return rc == RL_REDIS_CALL_OK && p->ok;
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
        uv_mutex_unlock(&qs->mu);
        count(qs, full ? Q_LOST : Q_JOURNALED, 1);
        if (!full)
            rl__redis_client_wake(atomic_load_explicit(&qs->client_pub, memory_order_acquire));
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
    rl_quotas_t *qs = rl->quotas;
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

int rl_quota_get(rl_t *rl, int quota, const void *key, size_t key_len, rl_quota_result_t *out)
{
    rl_quota_t q;
    uint32_t slot = 0, gen = 0;
    int rc = begin(rl, quota, key, key_len, out, &q, &slot, &gen);
    if (rc != 0)
        return rc;
    rl_quotas_t *qs = rl->quotas;
    qnames_t n;
    make_names(rl, &q, rl__keyhash(&rl->kh, key, key_len), NULL, &n);
    qreply_t p;
    if (!run(qs, &q, &n, 0, 0, &p))
        return degraded(qs, &q, 0, NULL, out);
    int allowed = (uint64_t)p.used < q.amount ? RL_ALLOW : RL_DENY;
    put_result(out, allowed, 0, q.amount, (uint64_t)p.used, (uint64_t)p.reset);
    return allowed;
}
