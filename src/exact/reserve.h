/* SPDX-License-Identifier: MIT */
/*
 * An exact or tiered key's reservations in Redis (lua/reserve.lua): a
 * reserve takes the estimate from exact.lua's bucket and records it under
 * the reservation's id; a settle charges the difference once, by that id.
 * Blocking, through the exact thread's caller; no Redis type here.
 */
#ifndef RL_EXACT_RESERVE_H
#define RL_EXACT_RESERVE_H

#include <stdint.h>
#include "exact/exact.h"

enum { RL_XRSV_RESERVE, RL_XRSV_SETTLE };

/* A settle's outcome in Redis (rl_exact_rsv_answer_t.code). */
enum {
    RL_XRSV_SETTLED = 0, /* charged now */
    RL_XRSV_BEFORE = 1,  /* settled by an earlier call with this id: not again */
    RL_XRSV_GONE = 2     /* no record: expired at its estimate, or lost */
};

/* The record's PX beyond the reservation's ttl: a settle sent just before
 * the local deadline still finds it. */
#define RL_XRSV_MARGIN_MS 5000u

typedef struct rl_exact_rsv {
    rl_exact_req_t b; /* the key and limit; b.cost: the estimate, or the actual */
    uint64_t rid[2];  /* the reservation's id: unique per instance and use */
    uint32_t ttl_ms;  /* the reservation's ttl (reserve) */
    int op;           /* RL_XRSV_RESERVE or RL_XRSV_SETTLE */
} rl_exact_rsv_t;

/* ok 0: no answer (deadline, no connection, an error reply): the call may
 * or may not have run. Else code: a reserve's allowed (0/1), a settle's
 * RL_XRSV_*; first: a settle's estimate (SETTLED) or first actual (BEFORE). */
typedef struct rl_exact_rsv_answer {
    int ok, code;
    uint64_t remaining, retry_ms, reset_ms, first;
} rl_exact_rsv_answer_t;

/* Blocking, up to the instance's exact_timeout_ms. Always fills *a. */
void rl__exact_rsv(rl_exact_t *x, const rl_exact_rsv_t *r, rl_exact_rsv_answer_t *a);

/* Queued, its answer dropped: 0, or -1 when it could not be queued. A
 * release sent after a reserve that got no answer (same key, so the same
 * connection and order) gives back what that reserve may have taken. */
int rl__exact_rsv_send(rl_exact_t *x, const rl_exact_rsv_t *r);

#endif
