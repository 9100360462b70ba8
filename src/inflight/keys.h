/* SPDX-License-Identifier: MIT */
/* An in-flight limit's key entries (inflight/keys.c). */
#ifndef RL_INFLIGHT_KEYS_H
#define RL_INFLIGHT_KEYS_H

#include "inflight/internal.h"

/* rl__ifl_key_take's answer when the key finds no entry in its window. */
#define RL_INFLIGHT_NOENTRY 3

/* What one acquire asks of its key's entry. */
typedef struct rl_ifl_take {
    uint32_t limit; /* the limit now */
    int cls;        /* class index, or -1 */
    uint32_t cap;   /* the class's cap (cls >= 0) */
} rl_ifl_take_t;

/* Count one permit for the key (tag, home entry): RL_ALLOW (*entry its
 * entry, *held the key's count with it), RL_DENY (full; *held the count),
 * or RL_INFLIGHT_NOENTRY. */
int rl__ifl_key_take(rl_ifl_t *b, uint64_t tag, uint32_t home, const rl_ifl_take_t *t,
                     uint32_t *entry, uint32_t *held);

/* The common case inline: the key's settled entry is its home, under the
 * limit, and no class is named. 1 when taken (*held the count with it),
 * else 0 (rl__ifl_key_take decides). */
static inline int rl__ifl_key_take_home(rl_ifl_t *b, uint64_t tag, uint32_t home,
                                        uint32_t limit, uint32_t *held)
{
    rl_ifl_key_t *e = &b->keys[home];
    /* seq_cst, load and CAS: as rl__ifl_key_take's look and take_live's
     * CAS (keys.c), which this is for the first entry of the window. */
    uint64_t w = atomic_load(&e->word);
    if ((w >> KW_TAG_SHIFT) != tag || (w & KW_PENDING) || (w & KW_COUNT) >= limit ||
        !atomic_compare_exchange_strong(&e->word, &w, w + 1))
        return 0;
    *held = (uint32_t)(w & KW_COUNT) + 1u;
    return 1;
}

/* Give one back; returns the count it had before. */
static inline uint32_t rl__ifl_key_give(rl_ifl_t *b, uint32_t entry, int cls)
{
    rl_ifl_key_t *e = &b->keys[entry];
    if (cls >= 0)
        /* relaxed: the total's decrement after it is a release. */
        atomic_fetch_sub_explicit(&e->cls[cls], 1, memory_order_relaxed);
    /* release: the class decrement above, and everything the permit's holder
     * did, happen before a claimer that takes the entry once it is free. */
    uint64_t w = atomic_fetch_sub_explicit(&e->word, 1, memory_order_release);
    return (uint32_t)(w & KW_COUNT);
}

/* An entry's count now (0 while a claim is pending). */
uint32_t rl__ifl_key_count(const rl_ifl_t *b, uint32_t entry);

#endif
