/* SPDX-License-Identifier: MIT */
/*
 * The reservation table: a fixed array of entries, allocated once, each a
 * state word and the payload of the reservation it holds. Lock-free: every
 * transition is a CAS on the state word, which carries the entry's
 * generation, so a handle names one use of one entry and a stale handle (a
 * second settle, an expired or reused entry) fails its CAS or its compare.
 *
 *   FREE(g) --claim--> BUSY(g) --publish--> HELD(g)   (or --free--> FREE(g+1))
 *   HELD(g) --take (settle, release, expiry)--> BUSY(g) --free--> FREE(g+1)
 *
 * A BUSY entry is owned by the one thread that moved it there: it alone
 * writes the payload (claim) or reads it to act on it (take). The payload
 * words are atomics read and written relaxed: the state word's release
 * (publish, free) and acquire (claim, take) order them. A FREE word keeps
 * whether its last use ended by expiry (RL_RENT_EXPIRED), so a late settle
 * can be told so until the entry is claimed again. Pure: no clock, no
 * instance.
 */
#ifndef RL_RESERVE_ENTRIES_H
#define RL_RESERVE_ENTRIES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"

enum { RL_RENT_FREE = 0, RL_RENT_BUSY = 1, RL_RENT_HELD = 2 };
/* In a FREE word: the previous use ended by expiry. */
#define RL_RENT_EXPIRED 4u
#define RL_RENT_STATE(w) ((unsigned)((w)&3u))
#define RL_RENT_GEN(w) ((w) >> 3)
#define RL_RENT_MAKE(gen, st) (((uint64_t)(gen) << 3) | (uint64_t)(st))
/* The generation bits a handle carries (above the entry index). */
#define RL_RENT_INDEX_BITS 24
#define RL_RENT_GEN_MASK ((UINT64_C(1) << (64 - RL_RENT_INDEX_BITS)) - 1)
#define RL_RENT_MAX (UINT32_C(1) << 20)

/* held: the estimate, with RL_RENT_UNBACKED when it was admitted without
 * a charge (shadow, on_failure=open): nothing on the bucket to move. */
#define RL_RENT_UNBACKED (UINT64_C(1) << 32)
/* held, an exact or tiered key's: the estimate is also held in Redis, under
 * the reservation's id (reserve/exact.h). */
#define RL_RENT_REDIS (UINT64_C(1) << 33)
#define RL_RENT_FLAGS (RL_RENT_UNBACKED | RL_RENT_REDIS)

typedef struct rl_rent {
    _Atomic uint64_t state;
    _Atomic uint64_t id_lo, id_hi; /* the key's id (local/keyhash.h) */
    _Atomic uint64_t limit;        /* the limit id */
    _Atomic uint64_t held;         /* the estimate, | RL_RENT_UNBACKED */
    _Atomic uint64_t deadline_fp;  /* instance time after which it expires */
    _Atomic uint64_t source;       /* the clock source its deadline is in */
    _Atomic uint64_t spare;
} __attribute__((aligned(64))) rl_rent_t;

_Static_assert(sizeof(rl_rent_t) == 64, "an entry is one cache line");

/* What an entry holds, as its owner reads or writes it. */
typedef struct rl_rent_data {
    uint64_t id_lo, id_hi;
    int limit;
    uint64_t held;
    uint64_t deadline_fp;
    int32_t source;
} rl_rent_data_t;

typedef struct rl_rents {
    rl_rent_t *e;
    uint32_t n;
    _Atomic uint64_t cursor __attribute__((aligned(64))); /* where a claim starts looking */
} rl_rents_t;

/* Called on a HELD entry whose deadline a claim found passed (it owns the
 * entry, BUSY): the caller counts and logs the expiry. */
typedef struct rl_rent_expiry {
    uint64_t (*now_fp)(void *ctx, int32_t source);
    void (*expired)(void *ctx, const rl_rent_data_t *d);
    void *ctx;
} rl_rent_expiry_t;

/* Claim a free entry (FREE -> BUSY, the caller's): 1 with *index and *gen
 * (the handle's generation bits) set, 0 when every entry is held and none
 * has expired. Expired entries met on the way are taken, reported through
 * x, and reused. The caller then publishes it or frees it. */
int rl__rents_claim(rl_rents_t *t, const rl_rent_expiry_t *x, uint32_t *index, uint64_t *gen);

/* Write d into an entry the caller claimed and make it HELD. */
void rl__rents_publish(rl_rents_t *t, uint32_t index, const rl_rent_data_t *d);

/* Take entry index of generation gen (HELD -> BUSY) and read its payload:
 * 0, or RL_EINVAL (not held in that generation), or RL_EEXPIRED (its use
 * of that generation ended by expiry, and it is not reused since). */
int rl__rents_take(rl_rents_t *t, uint32_t index, uint64_t gen, rl_rent_data_t *d);

/* Free an entry its caller took (BUSY); expired: the use
 * ended by expiry. */
void rl__rents_free(rl_rents_t *t, uint32_t index, int expired);

/* Expire every HELD entry whose deadline has passed; how many. */
uint64_t rl__rents_sweep(rl_rents_t *t, const rl_rent_expiry_t *x);

/* Entries HELD or BUSY now (a snapshot). */
uint64_t rl__rents_in_flight(rl_rents_t *t);

#endif
