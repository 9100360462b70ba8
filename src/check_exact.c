/* SPDX-License-Identifier: MIT */
/*
 * The checks decided in Redis (exact/exact.h): an exact limit's every check, a
 * tiered key's confirmation near its limit, and rl_check_async's trips for
 * both, whose answers land on the exact thread. Each turns Redis's answer,
 * or the limit's on_failure (policy/policy.h) when there was none, into the
 * check's outcome. check.c calls here on the exact and tiered branches.
 */
#include "checkint.h"
#include "exact/exact.h"
#include "inflight/inflight.h"

/* A closed exact limit's Retry-After when Redis did not answer: the next
 * check may find it again. */
#define EXACT_RETRY_MS 1

/* An exact limit's check that Redis did not answer, on_failure=local: the
 * key's own table slot at the limit's degraded rate (this node's
 * pessimistic share), never synced. */
static void exact_local(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o)
{
    rl_slotref_t ref;
    for (;;) {
        if (!rl__table_find(&rl->table, &t->probe, &ref) &&
            !rl__table_acquire(&rl->table, &t->probe, t->ls, t->p.max_keys, t->now, &ref)) {
            charge_noslot(t, cost, o);
            return;
        }
        o->g = &t->p.degraded;
        if (charge_word(t, &ref.slot->tat, ref.tat, o->g, cost, 0, o) == 0) {
            o->bucket = o->allowed ? &ref.slot->tat : NULL;
            return;
        }
    }
}

/* Redis's answer into o, or with none the limit's on_failure (policy/policy.h)
 * when it is open or closed: 1. 0: no answer and on_failure=local, which
 * the caller decides (o's figures untouched). */
static int redis_answer(const target_t *t, const rl_exact_answer_t *a, outcome_t *o)
{
    o->slot = NULL;
    o->bucket = NULL;
    o->g = &t->p.normal;
    if (a->ok) {
        o->flags = RL_FLAG_EXACT;
        o->allowed = a->allowed;
        o->remaining = a->remaining;
        o->reset_ms = a->reset_ms;
        o->retry_ms = a->retry_ms;
        return 1;
    }
    o->flags = RL_FLAG_DEGRADED;
    rl_failure_answer_t f =
        rl__policy_on_failure(t->p.on_failure, t->p.normal.burst, EXACT_RETRY_MS);
    if (f.action == RL_FAILURE_LOCAL)
        return 0;
    failure_answer(&f, o);
    return 1;
}

/* Count an exact decision on the limit's stripes (no slot is harvested:
 * Redis holds the count). */
static void count_exact(rl_t *rl, target_t *t, const outcome_t *o)
{
    unsigned st = o->stripe;
    rl__stat_add(t->ls, st, o->allowed ? RL_STAT_ADMITTED : RL_STAT_DENIED);
    if (o->flags & RL_FLAG_SHADOW)
        rl__stat_add(t->ls, st, RL_STAT_SHADOW);
    if (o->flags & RL_FLAG_NOSLOT)
        rl__stat_add(t->ls, st, RL_STAT_NOSLOT);
    if (o->flags & RL_FLAG_DEGRADED) {
        rl__stat_add(t->ls, st, RL_STAT_DEGRADED);
        rl__stat_add(t->ls, st,
                     t->p.on_failure == RL_FAIL_OPEN     ? RL_STAT_DEG_OPEN
                     : t->p.on_failure == RL_FAIL_CLOSED ? RL_STAT_DEG_CLOSED
                                                         : RL_STAT_DEG_LOCAL);
        rl__degraded_note(rl, t->ls, t->health, t->p.on_failure,
                          "Redis did not answer the check within exact_timeout_ms");
    }
}

/* The decision of an exact check from Redis's answer, or from on_failure
 * when there was none; a charge's counted. */
static void exact_settle(rl_t *rl, target_t *t, uint32_t cost, const rl_exact_answer_t *a,
                         outcome_t *o)
{
    o->stripe = (unsigned)t->probe.home;
    if (redis_answer(t, a, o)) {
        if (a->ok && cost == 0)
            o->flags |= RL_FLAG_PEEK;
    } else if (cost == 0) { /* a peek: the local share's whole burst */
        o->flags |= RL_FLAG_PEEK;
        o->allowed = 1;
        o->remaining = t->p.degraded.burst;
        o->reset_ms = o->retry_ms = 0;
    } else {
        exact_local(rl, t, cost, o);
    }
    if (cost > 0) {
        shadow_allow(t, o);
        count_exact(rl, t, o);
    }
}

static void exact_req(const target_t *t, uint32_t cost, rl_exact_req_t *r)
{
    memcpy(r->limit, t->ls->name, sizeof r->limit);
    r->limit[sizeof r->limit - 1] = '\0';
    r->id = t->probe.id;
    r->cost = cost;
    r->rate_count = t->p.rate_count;
    r->period_ms = t->p.period_ms;
    r->burst = t->p.normal.burst;
}

/* A shared instance's process that did not rl_shared_attach has no exact
 * thread: an error, logged (the check's answer would be a guess). */
static __attribute__((noinline, cold)) int exact_unattached(rl_t *rl, const target_t *t)
{
    rl__log(&rl->logger, RL_LOG_ERROR,
            "limit %.64s: process %d checks an exact limit of a shared instance without "
            "rl_shared_attach (which starts its Redis connections)", t->ls->name, (int)getpid());
    return RL_ENOTSUP;
}

int rl__check_exact(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o)
{
    int refused = rl__inflight_refuse_check(rl, t->ls);
    if (refused != 0)
        return refused;
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return exact_unattached(rl, t);
    rl__params_read(t->ls, &t->p); /* the whole snapshot: rate, degraded */
    rl_exact_req_t r;
    rl_exact_answer_t a;
    exact_req(t, cost, &r);
    rl__exact_check(x, &r, &a);
    exact_settle(rl, t, cost, &a, o);
    return 0;
}

/*
 * The decision of a confirmed tiered check from Redis's answer to exact.lua
 * (ok 0: none, and the limit's on_failure decides; `local` keeps the local
 * tier's allow). Counted on the limit's stripes, never on the slot: what
 * exact.lua charged is in Redis already, so the sync thread must not report
 * it again; and a check that got no answer may have been charged there, so
 * it is not reported either (a timeout does not mean "not charged").
 *
 * A check Redis denies keeps its local charge: the local tokens pay for the
 * attempt, so a node asks Redis at most at its local share's rate, however
 * hard its callers push (the pre-filter), and a key Redis keeps denying is
 * denied locally in between.
 */
static void tiered_settle(rl_t *rl, target_t *t, const rl_exact_answer_t *a, outcome_t *o)
{
    redis_answer(t, a, o); /* 0: on_failure=local, the local tier's allow stands */
    shadow_allow(t, o);
    count_exact(rl, t, o);
}

void rl__check_tiered_confirm(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o)
{
    rl__params_read(t->ls, &t->p); /* the whole snapshot: rate, on_failure */
    rl_exact_req_t r;
    rl_exact_answer_t a;
    exact_req(t, cost, &r);
    rl__exact_check(rl__exact_of(rl), &r, &a); /* tiered: never in a shared instance */
    tiered_settle(rl, t, &a, o);
}

/* What an asynchronous exact check carries to its answer (the exact
 * thread's slot holds a copy): enough to rebuild its target. */
typedef struct async_check {
    rl_t *rl;
    rl_check_cb cb;
    void *ud;
    int id;
    uint32_t cost;
    int tiered; /* a tiered key's confirmation: the local tier admitted it */
    rl_probe_t probe;
} async_check_t;

/* On the exact thread: Redis's answer (or none) to the host's callback. */
static void async_done(void *ctx, const rl_exact_answer_t *a)
{
    const async_check_t *c = ctx;
    target_t t;
    t.ls = rl__limit_get(&c->rl->limits, c->id);
    if (t.ls == NULL) { /* removed while in flight: Redis's verdict, if any, is moot */
        c->cb(c->ud, RL_ENOTFOUND, NULL);
        return;
    }
    rl__params_read(t.ls, &t.p);
    t.probe = c->probe;
    t.detail = 1;
    t.health = 0;
    t.now = rl__clock_now_fp(&c->rl->clock, t.p.clock_source);
    t.near = 0;
    t.coarse = 0;
    outcome_t o;
    if (c->tiered) {
        o.allowed = 1; /* the local tier's, for on_failure=local */
        o.remaining = o.reset_ms = o.retry_ms = 0;
        o.stripe = (unsigned)t.probe.home;
        tiered_settle(c->rl, &t, a, &o);
    } else {
        exact_settle(c->rl, &t, c->cost, a, &o);
    }
    rl_decision_t d;
    rl_decision_init(&d);
    write_decision(&d, &t, &o);
    c->cb(c->ud, o.allowed ? RL_ALLOW : RL_DENY, &d);
}

int rl__check_async_exact(rl_t *rl, target_t *t, outcome_t *o, int id, uint32_t cost,
                          int tiered, rl_check_cb cb, void *ud)
{
    int refused = rl__inflight_refuse_check(rl, t->ls);
    if (refused != 0)
        return refused;
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return exact_unattached(rl, t);
    rl__params_read(t->ls, &t->p);
    rl_exact_req_t r;
    exact_req(t, cost, &r);
    async_check_t c = {rl, cb, ud, id, cost, tiered, t->probe};
    if (rl__exact_check_async(x, &r, async_done, &c, sizeof c) == 0)
        return RL_PENDING;
    /* Every slot busy (or closing): on_failure answers now, inline. */
    rl_exact_answer_t none;
    memset(&none, 0, sizeof none);
    if (tiered)
        tiered_settle(rl, t, &none, o);
    else
        exact_settle(rl, t, cost, &none, o);
    return o->allowed ? RL_ALLOW : RL_DENY;
}
