/* SPDX-License-Identifier: MIT */
/*
 * The key table: fixed-capacity, lock-free open addressing (linear probing
 * in a bounded window), allocated once at rl_open.
 *
 * Slot life cycle, all transitions by CAS on the control word `ctrl`:
 *   EMPTY --claim--> CLAIMING --publish--> LIVE --retire--> TOMB --claim--> ...
 * ctrl = tag (32) | limit ref (16) | generation (14) | state (2). The
 * generation changes on every retire, so a reader that validated a slot's
 * identity under one ctrl value and sees it unchanged afterwards read a
 * consistent (ctrl, key id) pair (seqlock-style).
 *
 * The bucket word `tat` is the linearisation point of both charging and
 * retiring: retiring swaps it to RL_TAT_DEAD, so a charge that loses that
 * race fails its CAS and looks the key up again. A reused slot starts its
 * TAT above every value the previous occupant held (the retirer leaves that
 * floor in `aux`, and a TOMB is reused only once the clock is past it), so a
 * checker stalled between reading a TAT and its CAS can never succeed on a
 * later occupant: there is no ABA, whatever the generation counter wraps to.
 *
 * Who reclaims: any inserting thread, for slots in its own probe window whose
 * bucket has been full long enough (idle) and whose limit allows it (local:
 * as soon as full, nothing is lost; synced: after key_ttl and once the sync
 * thread harvested its counts); rl_limit_remove purges a removed limit's
 * slots. A checker that finds a slot it was using retired simply looks the
 * key up again.
 *
 * Two threads inserting the same new key: each claims a free slot in the
 * window (CLAIMING, with the key's tag and limit in ctrl) and scans the
 * window (seq_cst both) before it publishes; by the store->load ordering at
 * least one of the two sees the other. A claimer that sees the key LIVE
 * gives its claim up and uses that slot; one that sees another claim of the
 * key kills it (a CAS of its ctrl to the next generation), so that claim's
 * publishing CAS fails and its claimer starts over. So a key never has two
 * LIVE slots, and never two buckets that could each admit: a claim is
 * charged only once published. (Two claimers that kill each other both
 * start over; each attempt takes a new slot, so this ends unless their
 * schedules stay in lockstep.)
 *
 * The bucket word carries an epoch bit (local/bucket.h); the reuse floor, the
 * idle test and merges read the TAT without it.
 */
#ifndef RL_TABLE_H
#define RL_TABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "local/keyhash.h"
#include "local/limits.h"

/* The window a key may live in from its home slot. At the 2/3 load factor,
 * linear-probing clusters pass 128 slots a few times per million keys: 256 keeps
 * a full table's last keys from finding no room (tests/test_keyhash.c,
 * probe_distance_full_table). */
#define RL_PROBE_MAX 256

enum { RL_SLOT_EMPTY = 0, RL_SLOT_CLAIMING = 1, RL_SLOT_LIVE = 2, RL_SLOT_TOMB = 3 };

#define RL_CTRL_STATE(c) ((unsigned)((c)&3u))
#define RL_CTRL_GEN(c) (((c) >> 2) & 0x3fffu)
#define RL_CTRL_LREF(c) ((uint32_t)(((c) >> 16) & 0xffffu))
#define RL_CTRL_TAG(c) ((uint32_t)((c) >> 32))
#define RL_CTRL_MAKE(tag, lref, gen, state)                                              \
    (((uint64_t)(tag) << 32) | ((uint64_t)((lref)&0xffffu) << 16) | (((uint64_t)(gen)&0x3fffu) << 2) | \
     (uint64_t)(state))
/* Identity part of ctrl: what a lookup compares before the key id words. */
#define RL_CTRL_KEYBITS(c) ((c) & ~UINT64_C(0xffff))

typedef struct rl_slot {
    _Atomic uint64_t ctrl;
    _Atomic uint64_t id_lo;
    _Atomic uint64_t id_hi;
    _Atomic uint64_t tat;
    /* The global tier's local share of this key (local/shareword.h); 0: none yet.
     * Written by the sync thread, zeroed by a claimer; its hot bit
     * (RL_SHAREWORD_HOT, a local key's only bit) set and cleared by the
     * hot-key marker (hot/hot.c). */
    _Atomic uint64_t share;
    /* Decisions not yet folded into the limit's totals: by the sync thread
     * (synced limits, every round), by a retire, or read in place by
     * rl_stats. Counted on the line the charge already owns, so checks of
     * different keys on different threads share no written line. */
    _Atomic uint64_t admitted;
    _Atomic uint64_t denied;
    /* LIVE: the highest TAT a refund lowered; TOMB: the floor a reused
     * bucket must start above (the retire makes one from the other). */
    _Atomic uint64_t aux;
} __attribute__((aligned(64))) rl_slot_t;

_Static_assert(sizeof(rl_slot_t) == 64, "a slot is one cache line");

/*
 * What the global tier reports of a synced key beyond its slot's decision
 * counters, one per slot (rl_table_t.tok; instances with a global tier):
 * Redis is told tokens, the slot counts decisions (rl_stats). A check of
 * cost c counts 1 on the slot and c - 1 here; a settle counts its
 * difference here, either way (rl__table_count_tokens). The sync thread
 * swaps the two counters to 0 when it harvests the slot, as it does the
 * slot's, and a slot is not idle while they hold counts. `over_until`:
 * until when (instance time) the bucket may owe beyond its share's burst
 * by a debt or a wait (rl__table_over); rl__bucket_rescale keeps that
 * part, in tokens, only then.
 */
typedef struct rl_slottok {
    _Atomic int64_t admitted;  /* admitted tokens beyond one a decision; a
                                  settle's difference (negative: down) */
    _Atomic uint64_t denied;   /* denied tokens beyond one a decision */
    _Atomic uint64_t over_until;
} rl_slottok_t;

typedef struct rl_table {
    rl_slot_t *slots;
    size_t nslots;
    uint64_t max_keys;
    uint64_t idle_guard_fp; /* how far past full a local bucket must be to go */
    uint64_t ttl_fp;        /* same for synced buckets */
    rl_limits_t *limits;
    _Atomic uint64_t live __attribute__((aligned(64)));
    _Atomic uint64_t reclaimed;
    _Atomic uint64_t cursor; /* where the next incremental sweep starts */
    /* Instances with a global tier: one bit per slot with unharvested
     * counts, set by checkers, cleared by the sync thread. */
    _Atomic uint64_t *dirty;
    /* Beside it, one rl_slottok_t per slot (NULL without a global tier). */
    rl_slottok_t *tok;
    /* Key bytes of hot keys (local/hotcap.h); NULL in a shared instance. */
    struct rl_hotcap *hotcap;
} rl_table_t;

typedef struct rl_probe rl_probe_t;

/* A slot's counter left 0 (rl__table_count): mark it dirty, and capture
 * its key if the hot-key report asked for it. Out of line: once per key
 * and harvest. */
void rl__table_first_count(rl_table_t *t, rl_slot_t *s, const rl_probe_t *p, const void *key,
                           size_t len);

/*
 * Count a decision on a slot. With a global tier, a checker that
 * moves a counter from 0 marks the slot dirty; the sync thread clears a
 * bitmap word (acq_rel) before it swaps the counters to 0. Whatever the
 * interleaving, a non-zero counter has its bit set or is about to be read.
 * The key (p, key, len) is the one the slot was found for.
 */
static inline void rl__table_count(rl_table_t *t, rl_slot_t *s, int allowed, const rl_probe_t *p,
                                   const void *key, size_t len)
{
    /* relaxed: the RMW's old value is all the protocol needs. */
    if (atomic_fetch_add_explicit(allowed ? &s->admitted : &s->denied, 1,
                                  memory_order_relaxed) == 0 &&
        (t->dirty != NULL || t->hotcap != NULL))
        rl__table_first_count(t, s, p, key, len);
}

/* Mark slot s for the sync thread's next harvest (the dirty bitmap). */
static inline void rl__table_mark(rl_table_t *t, rl_slot_t *s)
{
    size_t i = (size_t)(s - t->slots);
    /* release: a harvest whose bitmap swap (acquire) sees this bit also
     * sees the counts added before it (as rl__table_first_count). */
    atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63), memory_order_release);
}

/*
 * Count tokens beyond a synced key's decisions (rl_slottok_t): `admitted`
 * (signed: a settle below its estimate gives back) or `denied` more.
 * Marks the slot for the harvest whenever it counts (a settle counts no
 * decision, so nothing else would). No-op without a global tier.
 */
static inline void rl__table_count_tokens(rl_table_t *t, rl_slot_t *s, int64_t admitted,
                                          uint64_t denied)
{
    if (t->tok == NULL || (admitted == 0 && denied == 0))
        return;
    rl_slottok_t *x = &t->tok[s - t->slots];
    /* relaxed: counters, harvested as the slot's are (rl__table_count). */
    if (admitted != 0)
        atomic_fetch_add_explicit(&x->admitted, admitted, memory_order_relaxed);
    if (denied != 0)
        atomic_fetch_add_explicit(&x->denied, denied, memory_order_relaxed);
    rl__table_mark(t, s);
}

/* Slot s's rl_slottok_t.over_until, or NULL without a global tier: a
 * charge that leaves the bucket owing beyond its burst raises it
 * (rl__tat_high) before its CAS of the word (release). */
static inline _Atomic uint64_t *rl__table_over(rl_table_t *t, rl_slot_t *s)
{
    return t->tok != NULL ? &t->tok[s - t->slots].over_until : NULL;
}

/* Looks at the probe window an insert takes before it gives up (the no-slot
 * path, on_failure); a look lost to another inserter's progress is not
 * counted. */
#define RL_TABLE_ACQUIRE_ATTEMPTS 4

/* Slots an inserter that found no room sweeps for idle keys per attempt (up
 * to RL_TABLE_ACQUIRE_ATTEMPTS), from a cursor shared by all inserters: when
 * the table is at max_keys and its keys have gone idle, at most
 * nslots / (RL_TABLE_ACQUIRE_ATTEMPTS x batch) failed inserts pass before
 * the whole table was swept and a slot freed. */
#define RL_SWEEP_BATCH 64

/* What a lookup needs, computed once per check. */
struct rl_probe {
    rl_keyid_t id;
    uint64_t keybits; /* RL_CTRL_MAKE(tag, lref, 0, 0) */
    size_t home;
};

typedef struct rl_slotref {
    rl_slot_t *slot;
    uint64_t tat; /* the bucket word as validated */
} rl_slotref_t;

int rl__table_init(rl_table_t *t, const rl_allocator_t *a, uint64_t max_keys,
                   rl_limits_t *limits, uint64_t idle_guard_fp, uint64_t ttl_fp);
void rl__table_destroy(rl_table_t *t, const rl_allocator_t *a);
size_t rl__table_bytes(const rl_table_t *t);

static inline void rl__probe_init(rl_probe_t *p, const rl_table_t *t, const rl_keyhash_t *kh,
                                  rl_keyid_t id, uint32_t lref, uint64_t salt)
{
    uint64_t m = rl__keyid_mix(kh, id, salt);
    p->id = id;
    p->keybits = RL_CTRL_MAKE((uint32_t)m, lref, 0, 0);
    p->home = (size_t)(((unsigned __int128)m * t->nslots) >> 64);
}

/* The slot d places past home, wrapping. */
static inline rl_slot_t *rl__slot_at(rl_table_t *t, size_t home, size_t d)
{
    size_t i = home + d;
    return &t->slots[i >= t->nslots ? i - t->nslots : i];
}

/*
 * Read a LIVE slot's key id and bucket word under ctrl value c1 (loaded with
 * acquire by the caller). 1: it is the probed key and alive (*tat set).
 */
static inline int rl__slot_read(rl_slot_t *s, const rl_probe_t *p, uint64_t c1, uint64_t *tat)
{
    /* acquire (seqlock read side): a value stored after a claim (release)
     * carries the claim's ctrl change to the re-read below, which then
     * fails. Plain loads on x86; unlike a fence, visible to TSan. */
    uint64_t lo = atomic_load_explicit(&s->id_lo, memory_order_acquire);
    uint64_t hi = atomic_load_explicit(&s->id_hi, memory_order_acquire);
    uint64_t v = atomic_load_explicit(&s->tat, memory_order_acquire);
    /* relaxed: ordered after the loads above by their acquire. */
    if (atomic_load_explicit(&s->ctrl, memory_order_relaxed) != c1)
        return 0;
    if (lo != p->id.lo || hi != p->id.hi || v == RL_TAT_DEAD)
        return 0;
    *tat = v;
    return 1;
}

/* Find the key's live slot; 1 found (*ref filled), 0 absent. Inline (with
 * the two above): it is on every check's path. */
static inline int rl__table_find(rl_table_t *t, const rl_probe_t *p, rl_slotref_t *ref)
{
    for (size_t d = 0; d < RL_PROBE_MAX; d++) {
        rl_slot_t *s = rl__slot_at(t, p->home, d);
        /* acquire: pairs with the publishing release, so the key id and TAT
         * written before LIVE are visible. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
        unsigned st = RL_CTRL_STATE(c);
        if (st == RL_SLOT_EMPTY)
            return 0; /* EMPTY is never re-created: no key lives past it */
        if (st == RL_SLOT_LIVE && RL_CTRL_KEYBITS(c) == p->keybits &&
            rl__slot_read(s, p, c, &ref->tat)) {
            ref->slot = s;
            return 1;
        }
    }
    return 0;
}

/* Find or insert; 1 found/inserted, 0 no room (window or caps full). */
int rl__table_acquire(rl_table_t *t, const rl_probe_t *p, rl_limit_slot_t *lim,
                      uint64_t max_keys, uint64_t now_fp, rl_slotref_t *ref);

/* Retire every slot of a removed limit (index `lref` low bits). Control path. */
void rl__table_purge_limit(rl_table_t *t, uint32_t lref);

struct rl_clock;

/*
 * Convert every bucket word of a limit (index `lref`) from T `from_t` to
 * `to_t`, into the epoch whose bit is `bit` (local/bucket.h: rl__gcra_convert, at
 * a clock reading taken per word). A slot being claimed for the limit is
 * waited for (a claimer never blocks, so this ends): the claimer either
 * stamps the new epoch or is seen here. Control path: rl_limit_update, under
 * the writers' lock, after the new epoch is published.
 */
void rl__table_convert_limit(rl_table_t *t, uint32_t lref, uint64_t from_t, uint64_t to_t,
                             uint64_t bit, struct rl_clock *clk, int32_t source);

/* Convert one bucket word as above, unless it already carries `bit`. A lower
 * TAT is first recorded in *high (when not NULL; see local/table.h, reuse floor). */
void rl__bucket_convert(_Atomic uint64_t *w, _Atomic uint64_t *high, uint64_t from_t,
                        uint64_t to_t, uint64_t bit, uint64_t u);

/* Raise *high to at least `v` (the highest TAT a bucket was lowered from). */
void rl__tat_high(_Atomic uint64_t *high, uint64_t v);

/*
 * A synced key's new share (local/bucket.h, rl__gcra_rescale): what it
 * owes within the old share's burst is rescaled by T_new / T_old and capped
 * at the new tau; what it owes beyond (a settle's debt, waiters' turns)
 * while `over` (its rl_slottok_t.over_until, may be NULL) says so, is
 * kept in tokens, and over_until is moved to the new unit. The word keeps
 * its epoch bit. Sync thread.
 */
void rl__bucket_rescale(_Atomic uint64_t *w, _Atomic uint64_t *over, const rl_gcra_t *from,
                        const rl_gcra_t *to, uint64_t now_fp);

/* Retire idle slots across the whole table. Control path (and tests). */
size_t rl__table_sweep(rl_table_t *t, uint64_t now_fp);

/* Retire idle slots in the next RL_SWEEP_BATCH slots of a shared cursor. */
size_t rl__table_sweep_some(rl_table_t *t, uint64_t now_fp);

#endif
