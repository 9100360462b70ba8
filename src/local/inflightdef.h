/* SPDX-License-Identifier: MIT */
/*
 * An in-flight limit's definition (rl_limit_t of kind RL_KIND_INFLIGHT):
 * validation, and the settings resolved from it. Pure: shared by
 * rl_limit_parse, local/limitdef.c and inflight/.
 */
#ifndef RL_INFLIGHTDEF_H
#define RL_INFLIGHTDEF_H

#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"

/* What an in-flight limit runs with, every default resolved. */
typedef struct rl_inflight_def {
    int32_t algo;
    uint32_t max, min; /* fixed: min = max */
    uint64_t max_hold_ns;
    uint32_t keys;     /* key entries wanted (max_keys or the default) */
    uint32_t pool;     /* permits: keys x max, at most RL_INFLIGHT_POOL_MAX */
    uint32_t nclasses;
    uint32_t class_ppm[RL_INFLIGHT_CLASSES];
} rl_inflight_def_t;

/* Check the in-flight fields of a limit of either kind: a rate limit's
 * must all be zero. 0 or RL_ERANGE / RL_EMODE / RL_ENAME, with a message
 * naming the field. */
int rl__inflight_validate(const rl_limit_t *lim, char *err, size_t errlen);

/* The settings of a valid in-flight limit. */
void rl__inflight_resolve(const rl_limit_t *lim, rl_inflight_def_t *d);

/* A class's cap under a limit: its share, rounded up, at least 1. */
static inline uint32_t rl__inflight_class_cap(uint32_t ppm, uint32_t limit)
{
    uint64_t c = ((uint64_t)ppm * limit + 999999u) / 1000000u;
    return c != 0 ? (uint32_t)c : 1u;
}

#endif
