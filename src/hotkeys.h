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
#ifndef RL_HOTKEYS_H
#define RL_HOTKEYS_H

#include <stddef.h>
#include <stdint.h>
#include "alloc.h"

#define RL_HOTKEYS_K_DEFAULT 32
#define RL_HOTKEYS_K_MAX 1024
/* Counters held per key reported: Space-Saving's overestimate is at most
 * total / counters, so 8 x K keeps it below an eighth of what a key must
 * exceed to be certain of a place among K (tests/test_hotkeys.c: with K
 * counters only, 3 of 10 planted heavy keys were found; with 8 x K, all).
 * An update scans the counters: O(8K), on the sync thread, per key and
 * round with demand. */
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
} rl_hk_entry_t;

typedef struct rl_hotkeys {
    rl_hk_entry_t *e;
    size_t k;     /* counters: RL_HOTKEYS_SLACK x the keys reported */
    size_t n;     /* entries in use */
    uint64_t total; /* all demand fed (decayed alike) */
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
 * Up to n entries, highest count first, of one limit (lref) or of all
 * (all != 0), copied to out; returns how many.
 */
size_t rl__hotkeys_top(const rl_hotkeys_t *h, int all, uint32_t lref, rl_hk_entry_t *out,
                       size_t n);

#endif
