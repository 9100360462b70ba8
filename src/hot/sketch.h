/* SPDX-License-Identifier: MIT */
/*
 * Hot-key detection: a Space-Saving sketch (Metwally, Agrawal, El Abbadi,
 * "Efficient computation of frequent and top-k elements in data streams",
 * 2005) of per-key demand. K counters; a key not held takes the place of
 * the smallest and inherits its count as its possible overestimate (`err`),
 * so every key whose demand exceeds total / M is held, and a held key's
 * count is within err of its true demand (count - err <= true <= count).
 *
 * Fed with weighted updates: what the table already counts per key (a
 * slot's admitted + denied since the last harvest), one update per key and
 * round, so it costs the check path nothing. Decayed by halving (a shift)
 * so it follows demand that moves. Pure: no atomics, no allocation after
 * init, no clock; the caller serialises access (one thread owns a sketch).
 * Keys are identified by limit ref and the 128-bit keyed id; the first
 * bytes of a key are kept only when the caller supplies them, for an entry
 * that is held (hot or once hot), bounded by RL_HOTKEY_BYTES.
 */
#ifndef RL_HOT_SKETCH_H
#define RL_HOT_SKETCH_H

#include <stddef.h>
#include <stdint.h>
#include "base/alloc.h"

#define RL_HOTKEYS_K_DEFAULT 32
#define RL_HOTKEYS_K_MAX 1024
/* Counters held per key reported: Space-Saving's overestimate is at most
 * total / counters, so 8 x K keeps it below an eighth of what a key must
 * exceed to be certain of a place among K (tests/test_hotkeys.c: with K
 * counters only, 3 of 10 planted heavy keys were found; with 8 x K, all).
 * An update finds its key through a hash index and the smallest count at
 * the root of a min-heap: O(log 8K), on the sync thread, per key and round
 * with demand; a scan of every counter would cost O(8K) a key, which at
 * K = 1024 and thousands of keys a round outlasts the round itself. */
#define RL_HOTKEYS_SLACK 8
/* Key bytes an entry keeps (a key longer than this is cut; key_len says). */
#define RL_HOTKEY_BYTES 64

typedef struct rl_hk_entry {
    uint64_t id_lo, id_hi;
    uint32_t lref;     /* the limit's table reference */
    uint32_t key_len;  /* the key's full length; 0: bytes not known */
    uint64_t count;    /* demand counted while held, plus err */
    uint64_t err;      /* overestimate inherited from the entry it replaced */
    unsigned char key[RL_HOTKEY_BYTES]; /* the first min(key_len, 64) bytes */
    /* The owner's figures of the key (hot/hot.c), kept with the entry so they
     * follow it through Space-Saving's replacements. */
    uint32_t slot;     /* table slot + 1 where it was last seen; 0: none */
    uint8_t hot;       /* marked hot (rl__hot_mark) */
    uint8_t streak;    /* evaluations in a row on the other side of the band */
    uint8_t want;      /* its key bytes were asked for */
    uint8_t visited;   /* fed (or seen without demand) since the last tick */
    uint64_t fed;      /* demand added since the last rl__hotkeys_tick */
    double rate;       /* demand per second, as of the last tick */
    uint64_t usage_q;  /* the fleet's admitted rate at the last sync reply,
                          Q24 of the limit's rate (global tier) */
    double fleet;      /* the demand the hot threshold is compared with */
    double share;      /* this node's share per second (global tier) */
} rl_hk_entry_t;

typedef struct rl_hotkeys {
    rl_hk_entry_t *e;
    size_t k;     /* counters: RL_HOTKEYS_SLACK x the keys reported */
    size_t n;     /* entries in use */
    size_t cap;   /* counters allocated (k at init) */
    /* The entries in use by count, a min-heap of their indices (heap[0]
     * the smallest), and each entry's place in it. Counts only grow
     * between decays, and a decay (a shift of every count) keeps their
     * order: the heap stays valid. */
    uint32_t *heap, *at;
    /* Open addressing, linear probing: entry index + 1 (0: empty), at most
     * half full, keyed by a mix of (lref, id). */
    uint32_t *idx;
    size_t mask;
    uint64_t total; /* all demand fed (decayed alike) */
    /* The entry the last rl__hotkeys_add replaced, if it did (gone_valid):
     * its owner may have to undo what it published for that key. */
    int gone_valid;
    rl_hk_entry_t gone;
} rl_hotkeys_t;

/* For reports of up to k keys, k in 1..RL_HOTKEYS_K_MAX. Returns 0,
 * RL_EINVAL or RL_ENOMEM. */
int rl__hotkeys_init(rl_hotkeys_t *h, const rl_allocator_t *a, size_t k);
void rl__hotkeys_destroy(rl_hotkeys_t *h, const rl_allocator_t *a);

/* Add `w` (> 0) to a key's demand; returns its entry (never NULL once
 * initialised: a key not held replaces the smallest entry). */
rl_hk_entry_t *rl__hotkeys_add(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi,
                               uint64_t w);

/* Remember the first bytes of a held key (len is its full length). */
void rl__hotkeys_set_key(rl_hk_entry_t *e, const void *key, size_t len);

/* Halve (shift 1), quarter (2), ... every count: older demand weighs less. */
void rl__hotkeys_decay(rl_hotkeys_t *h, unsigned shift);

/*
 * Close an interval of dt_s seconds: each entry's rate becomes what was fed
 * in it per second, averaged with the rate before when `smooth` (a sync
 * round's; an on-request interval, of the caller's choosing, replaces it).
 * The owner halves the counts (rl__hotkeys_decay) before it feeds the next
 * interval, so the ranking weighs older demand less.
 */
void rl__hotkeys_tick(rl_hotkeys_t *h, double dt_s, int smooth);

/* The entry of a key, or NULL. */
rl_hk_entry_t *rl__hotkeys_find(rl_hotkeys_t *h, uint32_t lref, uint64_t id_lo, uint64_t id_hi);

/*
 * Hot marking with hysteresis: a key enters after RL_HOT_ENTER evaluations
 * in a row with demand >= thr, and leaves after RL_HOT_EXIT in a row with
 * demand < thr x RL_HOT_EXIT_FRAC; between the two it stays as it is. So a
 * demand that hovers around the threshold (noise up to a quarter of it)
 * never flaps. thr <= 0: never hot. Returns +1 entered, -1 left, 0 neither.
 */
#define RL_HOT_ENTER 2
#define RL_HOT_EXIT 3
#define RL_HOT_EXIT_FRAC 0.75
int rl__hot_mark(uint8_t *hot, uint8_t *streak, double demand, double thr);

/*
 * Up to n entries, highest count first, of one limit (lref) or of all
 * (all != 0), copied to out; returns how many.
 */
size_t rl__hotkeys_top(const rl_hotkeys_t *h, int all, uint32_t lref, rl_hk_entry_t *out,
                       size_t n);

#endif
