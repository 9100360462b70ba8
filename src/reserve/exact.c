/* SPDX-License-Identifier: MIT */
/* Reservations of exact and tiered limits (see reserve/exact.h). */
#include <string.h>
#include "reserve/exact.h"
#include "exact/reserve.h"
#include "policy/policy.h"

/* A closed limit's Retry-After when Redis did not answer (check_exact.c's). */
#define EXACT_RETRY_MS 1

static void make_req(const rl_rkey_t *k, uint32_t amount, uint32_t ttl_ms, const uint64_t rid[2],
                     int op, rl_exact_rsv_t *r)
{
    memset(r, 0, sizeof *r);
    memcpy(r->b.limit, k->ls->name, sizeof r->b.limit);
    r->b.limit[sizeof r->b.limit - 1] = '\0';
    r->b.id = k->probe.id;
    r->b.cost = amount;
    r->b.rate_count = k->p.rate_count;
    r->b.period_ms = k->p.period_ms;
    r->b.burst = k->p.normal.burst;
    r->rid[0] = rid[0];
    r->rid[1] = rid[1];
    r->ttl_ms = ttl_ms;
    r->op = op;
}

/* No answer from Redis: the limit's on_failure (policy/policy.h). open
 * admits (a tiered key on its local charge, an exact one on nothing),
 * closed denies, local keeps a tiered key's local allow and charges an
 * exact key's table slot at the degraded rate (rl_check's rule). */
static void no_answer(rl_t *rl, rl_rkey_t *k, uint32_t cost, rl_radmit_t *o, uint64_t *bits)
{
    o->flags |= RL_FLAG_DEGRADED;
    rl_failure_answer_t f =
        rl__policy_on_failure((int)k->p.on_failure, k->p.normal.burst, EXACT_RETRY_MS);
    if (f.action != RL_FAILURE_LOCAL) {
        o->allowed = f.action == RL_FAILURE_ALLOW;
        o->remaining = f.remaining;
        o->reset_ms = o->retry_ms = f.retry_ms;
    } else if (k->p.synced == RL_SYNCED_EXACT) {
        rl__rkey_admit(rl, k, cost, 0, o);
        o->flags |= RL_FLAG_DEGRADED;
        o->slot = NULL;
        *bits = o->backed ? 0 : RL_RENT_UNBACKED;
    }
}

int rl__rsv_exact_admit(rl_t *rl, rl_rkey_t *k, uint32_t cost, uint32_t ttl_ms,
                        const uint64_t rid[2], rl_radmit_t *o, uint64_t *bits)
{
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return RL_ENOTSUP;
    memset(o, 0, sizeof *o);
    o->ready_fp = k->now;
    *bits = RL_RENT_UNBACKED;
    if (k->p.synced == RL_SYNCED_TIERED) {
        /* The pre-filter: the node's share, as rl_check charges it; what it
         * decides alone (a deny, a degraded or shadow answer) stands. */
        rl__rkey_admit(rl, k, cost, 0, o);
        o->slot = NULL; /* counted on the stripes: Redis holds the charge */
        *bits = o->backed ? 0 : RL_RENT_UNBACKED;
        if (!o->allowed || !o->backed || (o->flags & (RL_FLAG_SHADOW | RL_FLAG_DEGRADED)))
            return 0;
    }
    rl_exact_rsv_t r;
    rl_exact_rsv_answer_t a;
    make_req(k, cost, ttl_ms, rid, RL_XRSV_RESERVE, &r);
    rl__exact_rsv(x, &r, &a);
    if (a.ok) {
        o->flags |= RL_FLAG_EXACT;
        o->allowed = a.code == 1;
        o->remaining = a.remaining;
        o->reset_ms = a.reset_ms;
        o->retry_ms = a.retry_ms;
        if (o->allowed)
            *bits |= RL_RENT_REDIS;
    } else {
        /* It may have run: its record, if any, is given back behind it. */
        rl__rsv_exact_drop(rl, k, rid);
        no_answer(rl, k, cost, o, bits);
    }
    if (!o->allowed && k->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
    o->backed = (*bits & RL_RENT_REDIS) || !(*bits & RL_RENT_UNBACKED);
    return 0;
}

int rl__rsv_exact_settle(rl_t *rl, const rl_rent_data_t *d, const uint64_t rid[2],
                         uint32_t actual)
{
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return RL_ENOTSUP;
    rl_rkey_t k;
    int rc = rl__rkey_resolve_any(rl, d->limit, (rl_keyid_t){.lo = d->id_lo, .hi = d->id_hi}, 0,
                                  &k);
    if (rc != 0)
        return rc;
    rl_exact_rsv_t r;
    rl_exact_rsv_answer_t a;
    make_req(&k, actual, 0, rid, RL_XRSV_SETTLE, &r);
    rl__exact_rsv(x, &r, &a);
    if (!a.ok)
        return RL_EUNAVAIL;
    return a.code == RL_XRSV_GONE ? RL_EEXPIRED : 0;
}

void rl__rsv_exact_drop(rl_t *rl, const rl_rkey_t *k, const uint64_t rid[2])
{
    rl_exact_t *x = rl__exact_of(rl);
    rl_exact_rsv_t r;
    make_req(k, 0, 0, rid, RL_XRSV_SETTLE, &r);
    if (x != NULL)
        (void)rl__exact_rsv_send(x, &r); /* not queued: its record expires at the estimate */
}
