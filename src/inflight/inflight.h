/* SPDX-License-Identifier: MIT */
/*
 * In-flight limits: the module's face to the root. Its state (one block
 * per in-flight limit, allocated by rl_limit_add, kept until rl_close) is
 * its own; the root calls these from rl_open, rl_close and the limit,
 * check and statistics entry points.
 */
#ifndef RL_INFLIGHT_H
#define RL_INFLIGHT_H

#include <stdint.h>
#include "ratelimit.h"
#include "base/alloc.h"
#include "local/limits.h"

struct rl_inflight;

/* A fleet-wide (mode=global) in-flight limit's most keys (max_keys): each
 * round walks its entries (inflight/global.c). */
#define RL_IFL_GLOBAL_KEYS_MAX 16384u

/* The module's start config. */
typedef struct rl_inflight_cfg {
    uint32_t max_limits; /* the registry's capacity: one block pointer each */
    uint32_t tag;        /* the instance's permit tag, random, non-zero */
    uint32_t expected_nodes; /* rl_config_t's: mode=exact's local cap divisor */
} rl_inflight_cfg_t;

int rl__inflight_create(const rl_allocator_t *a, const rl_inflight_cfg_t *cfg,
                        struct rl_inflight **out);
void rl__inflight_destroy(struct rl_inflight *m);

/* After the registry took limit `id` (kind inflight): its block. 0 or
 * RL_ENOMEM (the caller then removes the limit again). */
int rl__inflight_add(rl_t *rl, int id, const rl_limit_t *lim);
/* An update of an in-flight limit, before the registry's: 0, or RL_ERANGE
 * for a change the block cannot take (max_keys; logged). */
int rl__inflight_update(rl_t *rl, int id, const rl_limit_t *lim);
/* After the registry let it go. */
void rl__inflight_remove(rl_t *rl, int id);

/* RL_ENOTSUP (logged once per limit) when the registry slot is an
 * in-flight limit's: its checks are refused. Else 0. */
int rl__inflight_refuse_check(rl_t *rl, const rl_limit_slot_t *ls);

/* An in-flight limit's figures into s (its admissions added to
 * s->admitted, rl_limit_stats_t's in-flight fields, those that fit);
 * nothing for a rate limit. */
void rl__inflight_stats(rl_t *rl, int id, rl_limit_stats_t *s);
/* An in-flight limit's admissions (counted by its permit records, not on
 * the limit's stripes); 0 for a rate limit. */
uint64_t rl__inflight_admitted(rl_t *rl, int id);

#endif
