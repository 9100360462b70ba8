/* SPDX-License-Identifier: MIT */
/*
 * The fail-open journal: charges an on_failure=open quota allowed while
 * Redis could not answer, kept to be replayed with their request ids. A
 * bounded FIFO ring, fixed at creation: a full journal refuses the charge
 * (the caller counts it lost). An entry holds what names the charge in
 * Redis (the quota's slot and generation, the key's identity, the request
 * id's PRF) and its cost, never key or id bytes.
 *
 * Replay is at-least-once from here and exactly-once in Redis: an entry
 * leaves the journal only once Redis has answered its charge, so a replay
 * cut short (the connection lost before the answer) sends it again, and
 * Redis's request id memory (quota.lua's SET NX) charges it once.
 * Not thread-safe: the owner holds its lock around every call.
 */
#ifndef RL_QUOTA_JOURNAL_H
#define RL_QUOTA_JOURNAL_H

#include <stdint.h>
#include "local/keyhash.h"
#include "ratelimit.h"

typedef struct rl_qjentry {
    uint32_t quota; /* the quota's slot */
    uint32_t gen;   /* its generation: a removed quota's entries are stale */
    uint64_t cost;
    rl_keyid_t key;
    uint64_t rid[2];
} rl_qjentry_t;

typedef struct rl_qjournal {
    rl_qjentry_t *e;
    uint32_t cap;
    uint32_t head; /* the oldest entry */
    uint32_t len;
} rl_qjournal_t;

/* cap entries (0: a journal that keeps nothing). 0 or RL_ENOMEM. */
int rl__qjournal_init(rl_qjournal_t *j, const rl_allocator_t *a, uint32_t cap);
void rl__qjournal_destroy(rl_qjournal_t *j, const rl_allocator_t *a);

/* Append; 0, or -1 when full (nothing kept). */
int rl__qjournal_push(rl_qjournal_t *j, const rl_qjentry_t *e);

/* Copy the oldest entry; 0, or -1 when empty. */
int rl__qjournal_peek(const rl_qjournal_t *j, rl_qjentry_t *out);

/* Drop the oldest entry (after Redis answered it). */
void rl__qjournal_pop(rl_qjournal_t *j);

#endif
