/* SPDX-License-Identifier: MIT */
/*
 * Reservations and waits (rl_reserve, rl_settle, rl_release,
 * rl_reserve_wait, rl_wait, rl_reserve_stats): the module's state, made at
 * rl_open from its start config and hung on the instance (rl_t.reserve).
 */
#ifndef RL_RESERVE_H
#define RL_RESERVE_H

#include <stdatomic.h>
#include <stdint.h>
#include "ratelimit.h"
#include "base/log.h"
#include "reserve/entries.h"

/* The module's start config (instance.c). */
typedef struct rl_reserve_cfg {
    uint32_t max_reservations;
    const rl_allocator_t *alloc;
    rl_logger_t *logger;
} rl_reserve_cfg_t;

/* The counters (rl_reserve_stats_t's), one per line's worth. */
enum {
    RL_RSV_RESERVED,
    RL_RSV_DENIED,
    RL_RSV_UP,
    RL_RSV_DOWN,
    RL_RSV_EVEN,
    RL_RSV_RELEASED,
    RL_RSV_EXPIRED,
    RL_RSV_DEBT_TOKENS,
    RL_RSV_REFUND_TOKENS,
    RL_RSV_FULL,
    RL_RSV_WAITS,
    RL_RSV_WAITS_SLEPT,
    RL_RSV_WAITS_REFUSED,
    RL_RSV_N
};

typedef struct rl_reserve {
    rl_rents_t rents;
    uint64_t tag; /* this instance's mark in every handle */
    rl_logger_t *logger;
    _Atomic uint64_t c[RL_RSV_N] __attribute__((aligned(64)));
} rl_reserve_t;

/* RL_ENOMEM, or 0 with *out set (max_reservations 0: a table of none). */
int rl__reserve_create(const rl_reserve_cfg_t *cfg, rl_reserve_t **out);
void rl__reserve_destroy(rl_reserve_t *r, const rl_allocator_t *a);

struct rl;
/* How the table's claims and sweeps expire an entry of instance rl: its
 * clock, and the count and log line of each expiry. */
rl_rent_expiry_t rl__reserve_expiry(struct rl *rl);

static inline void rl__reserve_add(rl_reserve_t *r, int which, uint64_t n)
{
    /* relaxed: counters, not publication. */
    atomic_fetch_add_explicit(&r->c[which], n, memory_order_relaxed);
}

#endif
