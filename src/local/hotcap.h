/* SPDX-License-Identifier: MIT */
/*
 * Key bytes of hot keys, captured on the check path: the table keeps only a
 * keyed hash of each key, and a report of hot keys must name them. The
 * owner of the hot-key sketch (hot/hot.c) asks for a key by setting its slot's
 * bit in `want`; the next check of that key that moves the slot's counter
 * from 0 (once per sync round or rl_hotkeys call: a branch the check path
 * already takes, out of line) sees the bit, clears it and copies the first
 * RL_HOTCAP_KEY_BYTES bytes into a free cell. Checks of keys nobody asked for
 * cost nothing more. Memory is fixed at rl_open: a bit per slot and
 * RL_HOTCAP_CELLS cells; a capture that finds no free cell is dropped and
 * asked for again.
 *
 * A cell's state is the handoff: EMPTY -(checker CAS)-> BUSY -(release)->
 * FULL -(owner reads, release)-> EMPTY. The owner's side (hot/hot.c's drain)
 * hands FULL cells to its sketches: this side never sees them.
 */
#ifndef RL_HOTCAP_H
#define RL_HOTCAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "base/alloc.h"

#define RL_HOTCAP_CELLS 64
/* Key bytes a cell keeps: what a sketch entry keeps (hot/hot.c asserts it). */
#define RL_HOTCAP_KEY_BYTES 64

enum { RL_HOTCAP_EMPTY = 0, RL_HOTCAP_BUSY = 1, RL_HOTCAP_FULL = 2 };

typedef struct rl_hotcap_cell {
    _Atomic uint32_t state;
    uint32_t lref;
    uint64_t id_lo, id_hi;
    uint64_t len; /* the key's full length */
    unsigned char key[RL_HOTCAP_KEY_BYTES];
} rl_hotcap_cell_t;

typedef struct rl_hotcap {
    _Atomic uint64_t *want; /* one bit per table slot */
    size_t nslots;
    rl_hotcap_cell_t cell[RL_HOTCAP_CELLS];
} rl_hotcap_t;

/* Returns NULL on allocation failure. */
rl_hotcap_t *rl__hotcap_new(const rl_allocator_t *a, size_t nslots);
void rl__hotcap_free(rl_hotcap_t *c, const rl_allocator_t *a);

/* Owner: ask for the key in slot i. */
void rl__hotcap_want(rl_hotcap_t *c, size_t i);

/* Checker: slot i's counter just left 0 for key (len bytes), whose keyed
 * id and limit ref are given; capture it if it was asked for. */
void rl__hotcap_offer(rl_hotcap_t *c, size_t i, uint64_t id_lo, uint64_t id_hi, uint32_t lref,
                      const void *key, size_t len);

#endif
