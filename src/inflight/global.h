/* SPDX-License-Identifier: MIT */
/*
 * A fleet-wide in-flight limit (mode=global): the node's lease of each
 * key's permits. Redis keeps per key a block per node (lua/inflight_lease.lua),
 * the sync round (sync/inflight.c) reports what the node holds and wants
 * and writes back its blocks; an acquire admits only within its key's
 * block while the lease is valid, and by on_failure otherwise.
 *
 * Per key entry two words, tag (40 bits) << 24 | a count (23 bits): the
 * block the lease gives the entry's key (written by the sync thread only),
 * and the key's demand since the last round: the most it held at once, one
 * more for each acquire denied (at least the count it was denied at). A
 * word whose tag is not the key's counts as 0: an entry taken over by
 * another key inherits nothing.
 */
#ifndef RL_INFLIGHT_GLOBAL_H
#define RL_INFLIGHT_GLOBAL_H

#include <stdint.h>
#include "inflight/internal.h"

/* The most keys of one global limit a round reports (the rest wait). */
#define RL_IFL_LEASE_KEYS 1024u

/* One key as a round reports it, and the answer that comes back. */
typedef struct rl_ifl_lease_key {
    uint64_t tag;
    uint32_t held;   /* permits held now */
    uint32_t want;   /* the round's peak demand (held at most, denials on top), <= max */
    uint32_t cap;    /* the most the node may admit before the reply applies */
    uint32_t grant;  /* the reply's block */
} rl_ifl_lease_key_t;

struct rl_ifl_global;

/* A global limit's lease state for a block of `entries` key entries. */
struct rl_ifl_global *rl__ifl_global_new(const rl_allocator_t *a, uint32_t entries,
                                         const rl_limit_t *lim, uint32_t max, uint32_t nodes);
void rl__ifl_global_free(const rl_allocator_t *a, struct rl_ifl_global *g);
/* The limit's name changes never; its max may (rl_limit_update). */
void rl__ifl_global_params(struct rl_ifl_global *g, const rl_limit_t *lim, uint32_t max);

/* Acquire side (inflight/permit.c): the key's cap now; an admission (the
 * key's count with it) and a denial (the count it was denied at). */
uint32_t rl__ifl_global_cap(const rl_ifl_t *b, uint32_t entry, uint64_t tag, uint64_t now);
void rl__ifl_global_seen(rl_ifl_t *b, uint32_t entry, uint64_t tag, uint32_t held);
void rl__ifl_global_denied(rl_ifl_t *b, uint32_t entry, uint64_t tag, uint32_t held);

/* The sync thread's side: enter the block of limit id if it is a global
 * in-flight limit (leave it with rl__ifl_leave), its name. */
rl_ifl_t *rl__ifl_global_enter(struct rl_inflight *m, int id);
const char *rl__ifl_global_name(const rl_ifl_t *b);
/* The keys to report (at most cap, by tag), their demand taken; now the
 * round's instance time. A key's cap is its block, or on_failure's cap
 * while the lease is not valid (the node is cut off: its admits then are
 * the bound's exception). */
uint32_t rl__ifl_global_collect(rl_ifl_t *b, uint64_t now, rl_ifl_lease_key_t *out,
                                uint32_t cap);
/* The reply to the n keys collected: their blocks written, every other
 * block dropped, and the lease valid until `until` (instance time). */
void rl__ifl_global_apply(rl_ifl_t *b, const rl_ifl_lease_key_t *keys, uint32_t n,
                          uint64_t until);
/* on_failure=local's cap: max / the nodes the fleet has. */
void rl__ifl_global_nodes(rl_ifl_t *b, uint64_t nodes);

#endif
