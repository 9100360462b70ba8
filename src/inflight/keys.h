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

/* Give one back; returns the count it had before. */
uint32_t rl__ifl_key_give(rl_ifl_t *b, uint32_t entry, int cls);

/* An entry's count now (0 while a claim is pending). */
uint32_t rl__ifl_key_count(const rl_ifl_t *b, uint32_t entry);

#endif
