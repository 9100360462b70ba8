/* SPDX-License-Identifier: MIT */
/*
 * In-flight limits of mode=exact: every acquire and release is one call of
 * lua/inflight.lua on the key's holders in Redis (a sorted set of permit
 * ids scored by their lease end in Redis TIME), through the exact path's
 * caller (exact/exact.h). Without Redis's answer the limit's on_failure
 * decides: closed denies, open admits, local takes a permit of the block's
 * own local tier, capped at ceil(max / N), N at least expected_nodes.
 *
 * The permit's words: the exact tag (the instance's permit tag, inverted,
 * so the local release refuses it) and the limit id; the 64-bit digest
 * that names the key's set; the permit id (24 bits) and its lease end in
 * Redis ms mod 2^40 (0: not known, the acquire had no answer).
 */
#include <stdio.h>
#include <string.h>
#include <uv.h>
#include "inflight/internal.h"
#include "exact/exact.h"
#include "redis/caller.h"
#include "redis/keys.h"

#define ID_BITS 24
#define END_BITS 40
#define END_MASK ((UINT64_C(1) << END_BITS) - 1)
/* Permit ids an acquire draws before it gives up (each taken: a live
 * holder's id; with max <= 2^20 holders of 2^24 ids, 8 in a row are taken
 * with a chance under 2^-32). */
#define ID_TRIES 8
/* A closed limit's Retry-After when Redis did not answer. */
#define FAIL_RETRY_MS 1u
/* A denial's Retry-After is the wait for the first lease to end, at most
 * this: releases usually come long before a lease ends. */
#define DENY_RETRY_CAP_MS 1000u

/* on_failure=local's cap per key: the node's pessimistic share. */
static uint32_t local_cap(uint32_t max, uint32_t nodes)
{
    uint32_t c = (uint32_t)(((uint64_t)max + nodes - 1u) / nodes);
    return c != 0 ? c : 1u;
}

static uint32_t exact_tag(const rl_t *rl)
{
    uint32_t t = ~rl->inflight->tag;
    return t != 0 ? t : 1u;
}

void rl__ifl_exact_resolve(rl_t *rl, const rl_limit_t *lim, rl_inflight_def_t *d)
{
    if (lim->mode != RL_MODE_EXACT)
        return;
    /* The larger of the configured count and the live one the node
     * registry's heartbeat has stored (rl__limits_set_nodes; under the
     * registry's lock, which neither rl_limit_add nor rl_limit_update
     * holds here): the smaller, pessimistic, share. */
    rl__limits_lock(&rl->limits);
    uint32_t n = rl->limits.expected_nodes;
    pthread_mutex_unlock(&rl->limits.lock);
    if (n < rl->inflight->expected_nodes)
        n = rl->inflight->expected_nodes;
    if (n == 0)
        n = 1;
    d->max = d->min = local_cap(d->max, n);
    uint64_t pool = (uint64_t)d->keys * d->max;
    d->pool = pool > RL_INFLIGHT_POOL_MAX ? RL_INFLIGHT_POOL_MAX : (uint32_t)pool;
}

void rl__ifl_exact_store(rl_ifl_t *b, const rl_limit_t *lim)
{
    int exact = lim->mode == RL_MODE_EXACT;
    /* relaxed: parameters, each self-contained (as params_store's). */
    atomic_store_explicit(&b->x_lease_ms, lim->max_hold_ms, memory_order_relaxed);
    atomic_store_explicit(&b->x_on_failure, lim->on_failure, memory_order_relaxed);
    atomic_store_explicit(&b->x_max, exact ? lim->inflight_max : 0u, memory_order_relaxed);
}

/* ------------------------------------------------------ the call */

/* One inflight.lua call's words: the two keys, op, id, and two numbers. */
typedef struct xargs {
    char key[160], mark[164];
    char id[12], num[2][24];
    const char *argv[6];
    size_t argl[6];
} xargs_t;

/* The reply, {status, held[, figure]}; ok 0: none. */
typedef struct xreply {
    int ok;
    long long status, held, figure;
} xreply_t;

static void parse(void *ud, int status, const redisReply *r)
{
    xreply_t *a = ud;
    a->ok = 0;
    if (status != RL_CALL_REPLY || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->elements > 3)
        return;
    long long v[3] = {0, 0, 0};
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return;
        v[i] = r->element[i]->integer;
    }
    if (v[0] < 0 || v[0] > 2 || v[1] < 0)
        return;
    *a = (xreply_t){1, v[0], v[1], v[2]};
}

static void args_make(const rl_t *rl, const char *limit, uint64_t digest, xargs_t *a)
{
    int n = rl__redis_inflight_key(rl->key_prefix, limit, digest, a->key, sizeof a->key);
    size_t kl = n > 0 && (size_t)n < sizeof a->key ? (size_t)n : strlen(a->key);
    memcpy(a->mark, a->key, kl);
    memcpy(a->mark + kl, ":m", 3);
    a->argv[0] = a->key;
    a->argl[0] = kl;
    a->argv[1] = a->mark;
    a->argl[1] = kl + 2;
}

static void args_set(xargs_t *a, const char *op, uint32_t id, const char *n1, const char *n2)
{
    a->argl[3] = (size_t)snprintf(a->id, sizeof a->id, "%x", (unsigned)id);
    a->argv[2] = op;
    a->argl[2] = 1;
    a->argv[3] = a->id;
    a->argv[4] = n1;
    a->argl[4] = strlen(n1);
    a->argv[5] = n2;
    a->argl[5] = strlen(n2);
}

/* Run the call, blocking up to exact_timeout_ms; *r's ok 0 without an answer. */
static void run(rl_t *rl, xargs_t *a, int nargs, xreply_t *r)
{
    memset(r, 0, sizeof *r);
    rl_exact_t *x = rl__exact_of(rl);
    rl_redis_caller_t *c = x != NULL ? rl__exact_caller(x) : NULL;
    if (c == NULL)
        return;
    rl_redis_call_t call = {RL_EXACT_SCRIPT_INFLIGHT, 2, nargs, a->argv, a->argl,
                            uv_hrtime() + rl__exact_timeout_ns(x)};
    if (rl__redis_caller_wait(c, &call, parse, r) != RL_CALL_REPLY)
        r->ok = 0;
}

static void nothing(void *ud, int status, const redisReply *r)
{
    (void)ud, (void)status, (void)r;
}

/* A call that had no answer may have run (a timeout is not "not executed"):
 * an acquire's holder would then hold a permit nobody has until its lease
 * ends. Its removal is sent once, unanswered; if it cannot be sent, the
 * lease ends it. */
static void undo_unanswered(rl_t *rl, xargs_t *a)
{
    rl_exact_t *x = rl__exact_of(rl);
    rl_redis_caller_t *c = x != NULL ? rl__exact_caller(x) : NULL;
    if (c == NULL)
        return;
    a->argv[2] = "r";
    a->argv[4] = "*";
    a->argl[4] = 1;
    rl_redis_call_t call = {RL_EXACT_SCRIPT_INFLIGHT, 2, 4, a->argv, a->argl,
                            uv_hrtime() + rl__exact_timeout_ns(x)};
    (void)rl__redis_caller_send(c, &call, nothing, NULL, 0);
}

static void failed_told(rl_t *rl, rl_ifl_t *b, const char *limit, const char *what)
{
    /* relaxed: a counter; and only who logs is decided. */
    atomic_fetch_add_explicit(&b->x_failed, 1, memory_order_relaxed);
    if (atomic_exchange_explicit(&b->x_told_fail, 1, memory_order_relaxed) == 0)
        rl__log(&rl->logger, RL_LOG_WARN,
                "limit %.64s: Redis did not answer an exact in-flight %s within "
                "exact_timeout_ms (%s; logged once)", limit, what,
                strcmp(what, "release") == 0
                    ? "its holder ends with its lease"
                    : "on_failure decides: counted in rl_limit_stats' degraded");
}

/* ------------------------------------------------------ acquire */

static void permit_put(rl_t *rl, rl_permit_t *p, int limit, uint64_t digest, uint32_t id,
                       uint64_t end)
{
    p->opaque[0] = (uint64_t)exact_tag(rl) << 32 | (uint32_t)limit;
    p->opaque[1] = digest;
    p->opaque[2] = (uint64_t)id << END_BITS | (end & END_MASK);
}

/* The permit id of this instance's seq-th draw: keyed by the instance's
 * random tag, so nodes draw apart (a clash is a taken id: drawn again). */
static uint32_t draw_id(rl_t *rl, rl_ifl_t *b)
{
    /* relaxed: a counter; only its uniqueness per draw matters. */
    uint64_t w[2] = {atomic_fetch_add_explicit(&b->x_seq, 1, memory_order_relaxed),
                     rl->inflight->tag};
    uint32_t id = (uint32_t)(rl__siphash24(rl->kh.name, w, sizeof w) >> (64 - ID_BITS));
    return id != 0 ? id : 1u;
}

static int degraded(rl_t *rl, rl_ifl_t *b, rl_limit_slot_t *ls, unsigned stripe, int limit,
                    uint64_t digest, uint32_t id, rl_permit_t *permit, rl_decision_t *out)
{
    /* relaxed: parameters. */
    int32_t of = atomic_load_explicit(&b->x_on_failure, memory_order_relaxed);
    uint32_t max = atomic_load_explicit(&b->x_max, memory_order_relaxed);
    failed_told(rl, b, ls->name, "acquire");
    if (of == RL_FAIL_LOCAL)
        return RL_IFL_EXACT_LOCAL;
    rl__stat_add(ls, stripe, RL_STAT_DEGRADED);
    rl__stat_add(ls, stripe, of == RL_FAIL_OPEN ? RL_STAT_DEG_OPEN : RL_STAT_DEG_CLOSED);
    if (of != RL_FAIL_OPEN) {
        rl__stat_add(ls, stripe, RL_STAT_DENIED);
        rl__ifl_decision(out, ls->name, 0, max, 0, FAIL_RETRY_MS, RL_FLAG_DEGRADED);
        return RL_DENY;
    }
    permit_put(rl, permit, limit, digest, id, 0);
    /* relaxed: a statistic. */
    atomic_fetch_add_explicit(&b->x_held, 1, memory_order_relaxed);
    rl__stat_add(ls, stripe, RL_STAT_ADMITTED);
    rl__ifl_decision(out, ls->name, 1, max, 0, 0, RL_FLAG_DEGRADED);
    return RL_ALLOW;
}

int rl__ifl_exact_acquire(rl_t *rl, rl_ifl_t *b, int limit, const void *key, size_t key_len,
                          rl_permit_t *permit, rl_decision_t *out)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, limit);
    if (ls == NULL)
        return RL_DENY; /* removed under us: nothing held */
    /* relaxed: parameters. */
    uint32_t max = atomic_load_explicit(&b->x_max, memory_order_relaxed);
    uint64_t lease = atomic_load_explicit(&b->x_lease_ms, memory_order_relaxed);
    rl_keyid_t kid = rl__keyhash(&rl->kh, key, key_len);
    uint64_t digest = rl__redis_inflight_digest(&rl->kh, kid);
    unsigned stripe = (unsigned)(digest >> 60);
    xargs_t a;
    char n1[24], n2[24];
    snprintf(n1, sizeof n1, "%u", (unsigned)max);
    snprintf(n2, sizeof n2, "%llu", (unsigned long long)lease);
    args_make(rl, ls->name, digest, &a);
    xreply_t r = {0};
    uint32_t id = 0;
    for (int i = 0; i < ID_TRIES && (i == 0 || (r.ok && r.status == 2)); i++) {
        id = draw_id(rl, b);
        args_set(&a, "a", id, n1, n2);
        run(rl, &a, 4, &r);
    }
    if (!r.ok) {
        undo_unanswered(rl, &a);
        return degraded(rl, b, ls, stripe, limit, digest, id, permit, out);
    }
    uint64_t held = (uint64_t)r.held;
    if (r.status != 1) { /* denied, or every id drawn was taken */
        uint64_t wait = r.figure < 1 ? 1u : (uint64_t)r.figure;
        rl__stat_add(ls, stripe, RL_STAT_DENIED);
        if (r.status == 2)
            rl__stat_add(ls, stripe, RL_STAT_NOSLOT);
        rl__ifl_decision(out, ls->name, 0, max, held,
                 wait < DENY_RETRY_CAP_MS ? wait : DENY_RETRY_CAP_MS,
                 r.status == 2 ? RL_FLAG_NOSLOT : 0);
        return RL_DENY;
    }
    uint64_t end = (uint64_t)r.figure & END_MASK;
    permit_put(rl, permit, limit, digest, id, end != 0 ? end : 1u);
    /* relaxed: a statistic. */
    atomic_fetch_add_explicit(&b->x_held, 1, memory_order_relaxed);
    rl__stat_add(ls, stripe, RL_STAT_ADMITTED);
    rl__ifl_decision(out, ls->name, 1, max, held, 0, RL_FLAG_EXACT);
    return RL_ALLOW;
}

void rl__ifl_exact_local_note(rl_t *rl, rl_ifl_t *b, int limit, rl_decision_t *out)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, limit);
    if (ls != NULL) {
        rl__stat_add(ls, 0, RL_STAT_DEGRADED);
        rl__stat_add(ls, 0, RL_STAT_DEG_LOCAL);
    }
    (void)b;
    if (out != NULL)
        out->flags |= RL_FLAG_DEGRADED;
}

/* ------------------------------------------------------ release */

int rl__ifl_exact_permit(const rl_t *rl, const rl_permit_t *p)
{
    return rl->inflight != NULL && (uint32_t)(p->opaque[0] >> 32) == exact_tag(rl);
}

/* One permit fewer held, never below 0 (a copy's late release comes after
 * its first). relaxed: a statistic. */
static void held_drop(rl_ifl_t *b)
{
    uint64_t h = atomic_load_explicit(&b->x_held, memory_order_relaxed);
    while (h > 0 && !atomic_compare_exchange_weak_explicit(&b->x_held, &h, h - 1,
                                                           memory_order_relaxed,
                                                           memory_order_relaxed))
        ;
}

int rl__ifl_exact_release(rl_t *rl, rl_permit_t *permit)
{
    rl_permit_t p = *permit;
    int limit = (int)(uint32_t)p.opaque[0];
    rl_ifl_t *b = rl__ifl_enter(rl->inflight, limit);
    if (b == NULL)
        return RL_ENOTFOUND;
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, limit);
    if (ls == NULL) {
        rl__ifl_leave(rl->inflight, b);
        return RL_ENOTFOUND;
    }
    memset(permit, 0, sizeof *permit);
    uint64_t end = p.opaque[2] & END_MASK;
    char n1[24], n2[24];
    /* relaxed: a parameter. */
    snprintf(n2, sizeof n2, "%llu",
             (unsigned long long)atomic_load_explicit(&b->x_lease_ms, memory_order_relaxed));
    if (end != 0)
        snprintf(n1, sizeof n1, "%llu", (unsigned long long)end);
    else
        memcpy(n1, "*", 2);
    xargs_t a;
    args_make(rl, ls->name, p.opaque[1], &a);
    args_set(&a, "r", (uint32_t)(p.opaque[2] >> END_BITS), n1, n2);
    xreply_t r;
    run(rl, &a, 4, &r);
    int rc = 0;
    if (!r.ok)
        failed_told(rl, b, ls->name, "release");
    else if (r.status == 1)
        rc = RL_INFLIGHT_RECLAIMED;
    else if (r.status == 2)
        rc = RL_EINVAL;
    /* relaxed: statistics. An unanswered release is given back here: its
     * holder in Redis ends with its lease. */
    if (rc == RL_INFLIGHT_RECLAIMED)
        atomic_fetch_add_explicit(&b->late, 1, memory_order_relaxed);
    if (rc != RL_EINVAL)
        held_drop(b);
    rl__ifl_leave(rl->inflight, b);
    return rc;
}

void rl__ifl_exact_stats(const rl_ifl_t *b, rl_limit_stats_t *s)
{
    if (!rl__ifl_exact(b))
        return;
    /* relaxed: statistics. */
    s->inflight += atomic_load_explicit(&b->x_held, memory_order_relaxed);
    s->inflight_limit = atomic_load_explicit(&b->x_max, memory_order_relaxed);
}
