/* SPDX-License-Identifier: MIT */
/*
 * What the in-flight module's files share: a limit's block (its key
 * entries, its permit pool, its parameters and its sampler) and the words
 * packed into them.
 *
 * A key entry's word: tag (40 bits) | PENDING | count (23 bits). An entry
 * with count 0 and no PENDING is free, whatever its tag. A key's first
 * acquire claims a free entry PENDING, then looks for another entry of the
 * same tag in the probe window (a racing first acquire of the same key):
 * it gives way to a live one, or a pending one earlier in the window, and
 * waits for a pending one later in it (which gives way to it), so a key is
 * counted in one entry only. The claim and that look are sequentially
 * consistent: of two racing claimers, at least one sees the other.
 *
 * A permit record's word: generation (32) | HELD | how the last life ended
 * (2 bits) | class + 1 (3) | key entry (26). A life ends (release or
 * reclaim) by one CAS that bumps the generation, so of a release, a
 * reclaim and a second release of one permit exactly one wins; the end
 * kept in the word tells a late release of a reclaimed permit (counted,
 * once) from a double release (RL_EINVAL).
 */
#ifndef RL_INFLIGHT_INTERNAL_H
#define RL_INFLIGHT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "core.h"
#include "inflight/inflight.h"
#include "inflight/adaptive.h"
#include "local/inflightdef.h"

#define KW_COUNT_BITS 23
#define KW_COUNT ((UINT64_C(1) << KW_COUNT_BITS) - 1)
#define KW_PENDING (UINT64_C(1) << KW_COUNT_BITS)
#define KW_TAG_SHIFT 24
#define KW_TAG_BITS 40
/* Entries a key may sit in: its home and the next ones. */
#define RL_IFL_PROBE 8u

#define RS_KEY_BITS 26
#define RS_KEY ((UINT64_C(1) << RS_KEY_BITS) - 1)
#define RS_CLS_SHIFT 26
#define RS_END_SHIFT 29
#define RS_HELD (UINT64_C(1) << 31)
#define RS_GEN_SHIFT 32
enum { END_RELEASED = 0, END_RECLAIMED = 1, END_LATE = 2 };

typedef struct rl_ifl_key {
    _Atomic uint64_t word;
    _Atomic uint32_t cls[RL_INFLIGHT_CLASSES];
    uint64_t pad;
} rl_ifl_key_t;

typedef struct rl_ifl_rec {
    _Atomic uint64_t st;
    _Atomic uint64_t t0_ns;  /* its acquire, instance time */
    _Atomic uint32_t next;   /* the free list's link (index + 1; 0 ends it) */
    uint32_t pad;
} rl_ifl_rec_t;

typedef struct rl_ifl {
    int32_t id;       /* set before the block is published, then read-only */
    uint32_t mask;    /* key entries - 1 */
    uint32_t pool;
    uint64_t salt;
    rl_ifl_key_t *keys;
    rl_ifl_rec_t *recs;
    size_t bytes;     /* the allocation, keys and records with this header */
    struct rl_ifl_global *g; /* mode=global: the lease (inflight/global.h); else NULL */
    /* Parameters: rl_limit_update stores them, acquires load them. */
    _Atomic uint32_t limit_now; /* fixed: max; adaptive: the algorithm's */
    _Atomic uint32_t nclasses;
    _Atomic uint32_t class_ppm[RL_INFLIGHT_CLASSES];
    _Atomic uint64_t max_hold_ns;
    _Atomic uint32_t precise; /* adaptive: latencies on the precise clock */
    char class_name[RL_INFLIGHT_CLASSES][RL_INFLIGHT_CLASS_NAME]; /* under the module's lock */
    /* The free list's head: ABA count (32) | record index + 1 (32). */
    _Atomic uint64_t head __attribute__((aligned(64)));
    _Atomic uint64_t next_sweep_ns;
    /* The sampler (inflight/sampler.c): the open window's sums, on a line of
     * their own; the algorithm's state, under `busy`. */
    _Atomic uint64_t w_samples __attribute__((aligned(64)));
    _Atomic uint64_t w_drops;
    _Atomic uint64_t w_rtt_sum;
    _Atomic uint32_t w_max_inflight;
    _Atomic uint64_t w_start_ns;
    _Atomic uint32_t busy;
    _Atomic uint64_t mean_ns; /* the last window's mean latency; 0: none yet */
    int32_t algo;             /* under busy (and the module's lock) */
    rl_adapt_t adapt;         /* under busy */
    /* Counters and one-time logs. */
    _Atomic uint64_t reclaimed __attribute__((aligned(64)));
    _Atomic uint64_t late;
    _Atomic uint32_t told_reclaim, told_check;
} rl_ifl_t;

/* Calls inside a limit index's block now (rl__ifl_enter), one line each:
 * outside the block, so that counting in never touches a block that may
 * already be freed. */
typedef struct rl_ifl_users {
    _Atomic uint32_t n;
    char pad[60];
} rl_ifl_users_t;

struct rl_inflight {
    rl_allocator_t alloc;
    uint32_t cap;
    uint32_t tag;
    pthread_mutex_t lock; /* add, update, remove, class names */
    _Atomic(rl_ifl_t *) *blocks; /* by limit index */
    rl_ifl_users_t *users;       /* by limit index */
};

/*
 * Enter the live block of an in-flight limit id, or NULL. A block is freed
 * by its removal once no call is inside it: an entry counts itself in on
 * its index, then loads the block; the removal unpublishes the block, then
 * waits for the index's count to reach 0. Both pairs are sequentially
 * consistent, so either the entry sees the block gone (and leaves) or the
 * removal sees the entry (and waits for it to leave).
 */
static inline rl_ifl_t *rl__ifl_enter(struct rl_inflight *m, int id)
{
    if (m == NULL || id <= 0 || ((uint32_t)id & RL_LIMIT_IDX_MASK) >= m->cap)
        return NULL;
    uint32_t idx = (uint32_t)id & RL_LIMIT_IDX_MASK;
    atomic_fetch_add(&m->users[idx].n, 1); /* seq_cst: see above */
    /* seq_cst: see above; and an acquire, pairing with the add's store,
     * so the block's contents (id, arrays, parameters) are seen whole. */
    rl_ifl_t *b = atomic_load(&m->blocks[idx]);
    if (b != NULL && b->id == id)
        return b;
    atomic_fetch_sub_explicit(&m->users[idx].n, 1, memory_order_release);
    return NULL;
}

static inline void rl__ifl_leave(struct rl_inflight *m, rl_ifl_t *b)
{
    /* release: the call's accesses to the block happen before the removal
     * that sees the count at 0 frees it. */
    atomic_fetch_sub_explicit(&m->users[(uint32_t)b->id & RL_LIMIT_IDX_MASK].n, 1,
                              memory_order_release);
}

/* Instance time in ns: the precise source for an adaptive limit, whose
 * samples are latencies; the coarse one (a tick, 4 ms by default, and a
 * third of the cost) for a fixed limit, which measures only max_hold and
 * its Retry-After hint. */
static inline uint64_t rl__ifl_now(rl_t *rl, const rl_ifl_t *b)
{
    /* relaxed: a parameter. */
    int precise = atomic_load_explicit(&b->precise, memory_order_relaxed) != 0;
    return rl__clock_now_fp(&rl->clock, precise ? RL_CLOCK_PRECISE : RL_CLOCK_COARSE) >>
           RL_FP_SHIFT;
}

/* An in-flight limit counted fleet-wide: mode=global on an instance with a
 * global tier (without one, global reads as local, as for a rate limit). */
static inline int rl__inflight_is_global(const rl_t *rl, const rl_limit_t *lim)
{
    return lim->mode == RL_MODE_GLOBAL && rl->limits.synced;
}

/* The sampler (sampler.c): a release's report, and the window it may close. */
void rl__ifl_sample(rl_t *rl, rl_ifl_t *b, int32_t outcome, uint64_t latency_ns,
                    uint32_t held, uint64_t now);
/* A block's sampler and adaptive state from a resolved definition (the
 * add, or an update that changed the algorithm or its bounds). */
void rl__ifl_sampler_reset(rl_ifl_t *b, const rl_inflight_def_t *d, uint64_t now);

#endif
