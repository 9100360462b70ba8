/* SPDX-License-Identifier: MIT */
/*
 * What the in-flight module's files share: a limit's block (its key
 * entries, its permit pool, its parameters and its sampler) and the words
 * packed into them.
 *
 * A key entry's word: tag (40 bits) | PENDING | count (23 bits). An entry
 * is the key's while it keeps the key's tag, held or not: the key's next
 * acquire revives it by one CAS from count 0, with no claim. An entry at
 * count 0 is free for any key (a claim takes it, the tag it had is lost);
 * a word of 0 is free and no key's (tags are odd). A key's first acquire
 * (no entry of its tag in the probe window) claims a free entry PENDING,
 * then looks at the other entries of the window (a racing first acquire of
 * the same key): it gives way to one settled with the key's tag (held or
 * not) or a pending one earlier in the window, and waits for a pending one
 * later in it (which gives way to it), so a key has one settled entry
 * only; one that gives way leaves its entry 0. The claim and that look are
 * sequentially consistent: of two racing claimers, at least one sees the
 * other.
 *
 * A permit record's word: generation (32) | HELD | how the last life ended
 * (2 bits) | class + 1 (3) | key entry (26). A life begins by one CAS that
 * sets HELD on a free record (found from a hint, the permit's address, so
 * threads start apart and a thread finds the record it freed last) and
 * ends (release or reclaim) by one CAS that bumps the generation, so of a
 * release, a reclaim and a second release of one permit exactly one wins;
 * the end kept in the word tells a late release of a reclaimed permit
 * (counted, once) from a double release (RL_EINVAL). The life's start
 * time, for the sweep, is a word of its own written after the CAS, tagged
 * with the low bits of the generation: a sweep that finds another life's
 * time there leaves the record for its next round.
 */
#ifndef RL_INFLIGHT_INTERNAL_H
#define RL_INFLIGHT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include "core.h"
#include "inflight/inflight.h"
#include "inflight/adaptive.h"
#include "local/inflightdef.h"

#define KW_COUNT_BITS 23
#define KW_COUNT ((UINT64_C(1) << KW_COUNT_BITS) - 1)
#define KW_PENDING (UINT64_C(1) << KW_COUNT_BITS)
_Static_assert(RL_INFLIGHT_MAX < KW_COUNT, "a count under the limit never saturates");
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

/* A life's start: generation's low 16 bits | instance time in units of
 * 2^RS_T0_SHIFT ns (48 bits: 36 years). */
#define RS_T0_SHIFT 12
#define RS_T0_BITS 48
#define RS_T0_MASK ((UINT64_C(1) << RS_T0_BITS) - 1)

typedef struct rl_ifl_rec {
    _Atomic uint64_t st;
    _Atomic uint64_t t0w;   /* the life's start (RS_T0_*), written by its holder */
    _Atomic uint64_t lives; /* lives begun (the limit's admissions), by their holders */
} rl_ifl_rec_t;

typedef struct rl_ifl {
    int32_t id;       /* set before the block is published, then read-only */
    uint32_t mask;    /* key entries - 1 */
    uint32_t pool;
    uint64_t salt;
    rl_ifl_key_t *keys;
    rl_ifl_rec_t *recs;
    size_t bytes;     /* the allocation, keys and records with this header */
    struct rl_ifl *retired; /* a removed block's link, under the module's lock */
    struct rl_ifl_global *g; /* mode=global: the lease (inflight/global.h); else NULL */
    /* Parameters: rl_limit_update stores them, acquires load them. */
    _Atomic uint32_t limit_now; /* fixed: max; adaptive: the algorithm's */
    _Atomic uint32_t nclasses;
    _Atomic uint32_t class_ppm[RL_INFLIGHT_CLASSES];
    _Atomic uint64_t max_hold_ns;
    _Atomic uint32_t precise; /* adaptive: latencies on the precise clock */
    char class_name[RL_INFLIGHT_CLASSES][RL_INFLIGHT_CLASS_NAME]; /* under the module's lock */
    _Atomic uint64_t next_sweep_ns __attribute__((aligned(64)));
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
    /* mode=exact (inflight/exact.c): its parameters, stored under the
     * module's lock (x_max 0: not an exact limit; the local fields above
     * then run on_failure=local's cap), and its counters. */
    _Atomic uint32_t x_max __attribute__((aligned(64)));
    _Atomic int32_t x_on_failure;
    _Atomic uint64_t x_lease_ms;
    _Atomic uint64_t x_seq;     /* permit ids drawn */
    _Atomic uint64_t x_held;    /* permits this instance holds by Redis's word */
    _Atomic uint64_t x_failed;  /* acquires and releases Redis did not answer */
    _Atomic uint32_t x_told_fail;
} rl_ifl_t;

struct rl_inflight {
    rl_allocator_t alloc;
    uint32_t cap;
    uint32_t tag;
    uint32_t expected_nodes; /* the start config's (mode=exact, exact.c) */
    pthread_mutex_t lock; /* add, update, remove, class names, retired */
    _Atomic(rl_ifl_t *) *blocks; /* by limit index */
    rl_ifl_t *retired;           /* removed blocks, freed by rl_close */
    uint64_t retired_bytes;      /* theirs, under the lock: RL_INFLIGHT_RETIRED_MAX */
};

/*
 * The live block of an in-flight limit id, or NULL. Blocks are never freed
 * before rl_close (a removed one waits on the module's retired list), so a
 * call counts itself in nowhere: one that loaded a block just before its
 * removal finishes in it harmlessly (a permit it takes names the removed
 * id, whose release is RL_ENOTFOUND). rl__ifl_leave is the call's end, for
 * the shape of the callers; it has nothing to do.
 */
static inline rl_ifl_t *rl__ifl_enter(struct rl_inflight *m, int id)
{
    if (m == NULL || id <= 0 || ((uint32_t)id & RL_LIMIT_IDX_MASK) >= m->cap)
        return NULL;
    /* acquire: pairs with the add's release store, so the block's contents
     * (id, arrays, parameters) are seen whole. */
    rl_ifl_t *b = atomic_load_explicit(&m->blocks[(uint32_t)id & RL_LIMIT_IDX_MASK],
                                       memory_order_acquire);
    return b != NULL && b->id == id ? b : NULL;
}

static inline void rl__ifl_leave(struct rl_inflight *m, rl_ifl_t *b)
{
    (void)m;
    (void)b;
}

/* Instance time in ns: the precise source for an adaptive limit, whose
 * samples are latencies; the coarse one (a tick, 4 ms by default, and a
 * third of the cost) for a fixed limit, which measures only max_hold and
 * its Retry-After hint. */
/* An in-flight decision into out (its size respected; NULL: nothing): the
 * limit, what the key holds, and on a deny the wait to suggest. */
static inline void rl__ifl_decision(rl_decision_t *out, const char *policy, int allowed,
                                    uint32_t limit, uint64_t held, uint64_t retry_ms,
                                    uint32_t flags)
{
    if (out == NULL)
        return;
    rl_decision_t d;
    memset(&d, 0, sizeof d);
    d.size = out->size;
    d.allowed = allowed ? RL_ALLOW : RL_DENY;
    d.limit = limit;
    d.burst = limit;
    d.remaining = held < limit ? limit - held : 0;
    d.inflight = held;
    d.retry_after_ms = allowed ? 0 : retry_ms;
    d.flags = RL_FLAG_INFLIGHT | flags;
    d.policy = policy;
    memcpy(out, &d, out->size < sizeof d ? out->size : sizeof d);
}

static inline uint64_t rl__ifl_now(rl_t *rl, const rl_ifl_t *b)
{
    /* relaxed: a parameter. */
    int precise = atomic_load_explicit(&b->precise, memory_order_relaxed) != 0;
    return rl__clock_now_fp(&rl->clock, precise ? RL_CLOCK_PRECISE : RL_CLOCK_COARSE) >>
           RL_FP_SHIFT;
}

/* mode=exact (exact.c). Its definition into d before the block is made or
 * updated: on_failure=local's cap, ceil(max / N) (N >= expected_nodes), replaces max
 * for the local tier the block runs when Redis does not answer. */
void rl__ifl_exact_resolve(rl_t *rl, const rl_limit_t *lim, rl_inflight_def_t *d);
/* Its parameters into the block (under the module's lock). */
void rl__ifl_exact_store(rl_ifl_t *b, const rl_limit_t *lim);
/* Whether the block is an exact limit's (a parameter: relaxed). */
static inline int rl__ifl_exact(const rl_ifl_t *b)
{
    return atomic_load_explicit(&b->x_max, memory_order_relaxed) != 0;
}
/* The acquire of an exact limit's block: RL_ALLOW / RL_DENY as
 * rl_inflight_acquire, or RL_IFL_EXACT_LOCAL: Redis did not answer and
 * on_failure=local, so the caller takes a permit of the block's local tier
 * (then calls rl__ifl_exact_local_note). */
#define RL_IFL_EXACT_LOCAL 2
int rl__ifl_exact_acquire(rl_t *rl, rl_ifl_t *b, int limit, const void *key, size_t key_len,
                          rl_permit_t *permit, rl_decision_t *out);
void rl__ifl_exact_local_note(rl_t *rl, rl_ifl_t *b, int limit, rl_decision_t *out);
/* Whether a permit is an exact one of this instance (its tag); its release. */
int rl__ifl_exact_permit(const rl_t *rl, const rl_permit_t *p);
int rl__ifl_exact_release(rl_t *rl, rl_permit_t *permit);
/* An exact limit's figures over the local ones (rl__inflight_stats). */
void rl__ifl_exact_stats(const rl_ifl_t *b, rl_limit_stats_t *s);
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
