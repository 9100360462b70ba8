/* SPDX-License-Identifier: MIT */
/*
 * An in-flight limit's key entries: take one permit's count for a key, and
 * give it back (internal.h says how a key keeps to one entry). A key whose
 * entry kept its tag takes a permit with one load and one CAS, held or
 * not. Lock-free but for one wait: an acquire that meets its key's first
 * acquire between its claim and its look around spins until that settles
 * (a few instructions, unless the claimer is preempted there).
 */
#include <sched.h>
#include "inflight/keys.h"

static inline uint64_t kw_tag(uint64_t w) { return w >> KW_TAG_SHIFT; }
static inline int kw_busy(uint64_t w) { return (w & (KW_COUNT | KW_PENDING)) != 0; }

static void pause_once(unsigned *spins)
{
    if (++*spins % 64 == 0)
        sched_yield(); /* the claimer we wait for may not be running */
#if defined(__x86_64__) || defined(__i386__)
    else
        __builtin_ia32_pause();
#endif
}

/* Reserve a class count: with a cap (the limit is full: only a class under
 * its cap may pass) or without. 1 when reserved. */
static int class_take(rl_ifl_key_t *e, int cls, int capped, uint32_t cap)
{
    if (!capped) {
        /* relaxed: the total's CAS (seq_cst) that follows orders it; an
         * entry's class counts are only a bound for the capped path. */
        atomic_fetch_add_explicit(&e->cls[cls], 1, memory_order_relaxed);
        return 1;
    }
    uint32_t v = atomic_load_explicit(&e->cls[cls], memory_order_relaxed);
    while (v < cap)
        /* relaxed: as above. */
        if (atomic_compare_exchange_weak_explicit(&e->cls[cls], &v, v + 1,
                                                  memory_order_relaxed, memory_order_relaxed))
            return 1;
    return 0;
}

static void class_give(rl_ifl_key_t *e, int cls)
{
    if (cls >= 0)
        /* relaxed: the total's decrement after it is a release. */
        atomic_fetch_sub_explicit(&e->cls[cls], 1, memory_order_relaxed);
}

enum { TAKE_RETRY = 2 };

/* One more permit on the key's settled entry (held, or at 0: revived):
 * RL_ALLOW, RL_DENY (full; *held its count), or TAKE_RETRY (the entry
 * stopped being the key's). */
static int take_live(rl_ifl_key_t *e, uint64_t w, uint64_t tag, const rl_ifl_take_t *t,
                     uint32_t *held)
{
    int over = (w & KW_COUNT) >= t->limit;
    if (over && t->cls < 0) {
        *held = (uint32_t)(w & KW_COUNT);
        return RL_DENY;
    }
    if (t->cls >= 0 && !class_take(e, t->cls, over, t->cap)) {
        *held = (uint32_t)(w & KW_COUNT);
        return RL_DENY;
    }
    for (;;) {
        if (kw_tag(w) != tag || (w & KW_PENDING) || (!over && (w & KW_COUNT) >= t->limit) ||
            (w & KW_COUNT) == KW_COUNT) {
            class_give(e, t->cls);
            return TAKE_RETRY;
        }
        /* seq_cst: a claimer's look around (seq_cst loads) must see this
         * entry the key's if it ran after; acq_rel would not order it so.
         * From count 0 this revives the entry: it was the key's settled one
         * all along (internal.h), so no claim is needed. */
        if (atomic_compare_exchange_weak(&e->word, &w, w + 1)) {
            *held = (uint32_t)((w & KW_COUNT) + 1);
            return RL_ALLOW;
        }
    }
}

/* After claiming entry `mine` (offset `mo` in the window) PENDING: 1 to
 * keep it, 0 to give way (another entry holds or is claiming the key). */
static int claim_settles(const rl_ifl_t *b, uint64_t tag, uint32_t home, uint32_t mo)
{
    unsigned spins = 0;
    for (uint32_t i = 0; i < RL_IFL_PROBE; i++) {
        if (i == mo)
            continue;
        rl_ifl_key_t *e = &b->keys[(home + i) & b->mask];
        for (;;) {
            /* seq_cst: pairs with the other claimer's seq_cst claim (Dekker). */
            uint64_t w = atomic_load(&e->word);
            if (kw_tag(w) != tag)
                break;
            if (!(w & KW_PENDING) || i < mo)
                return 0; /* the key's settled entry, or an earlier claim */
            pause_once(&spins); /* a later claimer of the key gives way to us */
        }
    }
    return 1;
}

int rl__ifl_key_take(rl_ifl_t *b, uint64_t tag, uint32_t home, const rl_ifl_take_t *t,
                     uint32_t *entry, uint32_t *held)
{
    unsigned spins = 0;
    for (;;) {
        uint32_t free_i = RL_IFL_PROBE;
        uint64_t free_w = 0;
        int again = 0;
        for (uint32_t i = 0; i < RL_IFL_PROBE && !again; i++) {
            rl_ifl_key_t *e = &b->keys[(home + i) & b->mask];
            /* seq_cst: see claim_settles; these loads are the look of an
             * acquire that may go on to claim. */
            uint64_t w = atomic_load(&e->word);
            if (kw_tag(w) == tag) {
                if (w & KW_PENDING) {
                    pause_once(&spins);
                    again = 1;
                    break;
                }
                int rc = take_live(e, w, tag, t, held);
                if (rc != TAKE_RETRY) {
                    *entry = (home + i) & b->mask;
                    return rc;
                }
                again = 1;
                break;
            }
            /* A free entry: an empty word first, else another key's at 0. */
            if (!kw_busy(w) && (free_i == RL_IFL_PROBE || (free_w != 0 && w == 0))) {
                free_i = i;
                free_w = w;
            }
        }
        if (again)
            continue;
        if (free_i == RL_IFL_PROBE)
            return RL_INFLIGHT_NOENTRY;
        rl_ifl_key_t *e = &b->keys[(home + free_i) & b->mask];
        uint64_t claim = (tag << KW_TAG_SHIFT) | KW_PENDING | 1u;
        /* seq_cst: the claim half of the Dekker pair (claim_settles). */
        if (!atomic_compare_exchange_strong(&e->word, &free_w, claim))
            continue;
        if (!claim_settles(b, tag, home, free_i)) {
            /* release: nobody else writes a pending entry; freed whole, as
             * no key's (the key's settled entry is the other). */
            atomic_store_explicit(&e->word, 0, memory_order_release);
            pause_once(&spins);
            continue;
        }
        if (t->cls >= 0)
            class_take(e, t->cls, 0, 0);
        /* release: the claim's seq_cst CAS already settled which claimer
         * keeps the key; a look that still reads PENDING waits for this. */
        atomic_store_explicit(&e->word, (tag << KW_TAG_SHIFT) | 1u, memory_order_release);
        *entry = (home + free_i) & b->mask;
        *held = 1;
        return RL_ALLOW;
    }
}

uint32_t rl__ifl_key_count(const rl_ifl_t *b, uint32_t entry)
{
    /* relaxed: a figure for statistics. */
    uint64_t w = atomic_load_explicit(&b->keys[entry].word, memory_order_relaxed);
    return (w & KW_PENDING) ? 0 : (uint32_t)(w & KW_COUNT);
}
