/* SPDX-License-Identifier: MIT */
/*
 * Reservations of exact and tiered limits: the estimate held in Redis
 * (exact/reserve.h) under the reservation's id, the instance's tag and the
 * handle's entry word, so it is unique per instance and use. A tiered key
 * first passes its local pre-filter (the node's share, as rl_check's),
 * counted on the limit's stripes, never on its slot: what Redis holds is
 * not reported again by the sync thread.
 */
#ifndef RL_RESERVE_EXACT_H
#define RL_RESERVE_EXACT_H

#include "reserve/charge.h"
#include "reserve/entries.h"

static inline int rl__rsv_in_redis(const rl_rkey_t *k)
{
    return k->p.synced == RL_SYNCED_EXACT || k->p.synced == RL_SYNCED_TIERED;
}

/* Admit `cost` on an exact or tiered key (k resolved by
 * rl__rkey_resolve_any), as rl_check would: o written as
 * rl__rkey_admit's, *bits the entry's held flags (RL_RENT_UNBACKED: no
 * local tokens; RL_RENT_REDIS: a record in Redis). RL_ENOTSUP (a shared
 * instance's unattached process), else 0. */
int rl__rsv_exact_admit(rl_t *rl, rl_rkey_t *k, uint32_t cost, uint32_t ttl_ms,
                        const uint64_t rid[2], rl_radmit_t *o, uint64_t *bits);

/* Settle the Redis part of a reservation (d->held has RL_RENT_REDIS) at
 * actual: 0 (charged now, or by an earlier call with this id: once),
 * RL_EEXPIRED (no record: nothing charged), RL_EUNAVAIL (no answer: retry),
 * RL_ENOTFOUND (the limit is gone). */
int rl__rsv_exact_settle(rl_t *rl, const rl_rent_data_t *d, const uint64_t rid[2],
                         uint32_t actual);

/* Give a Redis record back without waiting for it (after a deny of a
 * batch, or a reserve that got no answer). */
void rl__rsv_exact_drop(rl_t *rl, const rl_rkey_t *k, const uint64_t rid[2]);

#endif
