/* SPDX-License-Identifier: MIT */
/*
 * ABI struct versioning: a struct starts with its size. This library accepts
 * a size from the oldest layout it supports up to any larger one whose
 * unknown tail is zero (a newer caller that left new fields at defaults).
 */
#ifndef RL_STRUCTSIZE_H
#define RL_STRUCTSIZE_H

#include <stddef.h>
#include <string.h>
#include "ratelimit.h"

/* 0 if `size` (the struct's own size field) is acceptable, else RL_ESIZE. */
static inline int rl__struct_ok(const void *p, size_t size, size_t min, size_t known)
{
    if (size < min)
        return RL_ESIZE;
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)p)[i] != 0)
            return RL_ESIZE;
    return 0;
}

/*
 * The body of every *_init_sized (include/ratelimit.h's initialisers): zero
 * `size` bytes of p, copy the defaults (a struct of `known` bytes; NULL: all
 * zero) as far as `size` reaches, and set the size field. NULL, or a size
 * smaller than the size field, is a no-op.
 */
static inline void rl__struct_init(void *p, size_t size, const void *defaults, size_t known)
{
    if (p == NULL || size < sizeof(size_t))
        return;
    memset(p, 0, size);
    if (defaults != NULL)
        memcpy(p, defaults, size < known ? size : known);
    memcpy(p, &size, sizeof size);
}

/* rl__struct_init writes the size there: each growable struct's first field. */
#define RL_SIZE_FIRST_(T)                                                            \
    _Static_assert(offsetof(T, size) == 0 && sizeof(((T *)0)->size) == sizeof(size_t), \
                   #T " starts with its size_t size")
RL_SIZE_FIRST_(rl_config_t);
RL_SIZE_FIRST_(rl_limit_t);
RL_SIZE_FIRST_(rl_request_t);
RL_SIZE_FIRST_(rl_decision_t);
RL_SIZE_FIRST_(rl_stats_t);
RL_SIZE_FIRST_(rl_limit_stats_t);
RL_SIZE_FIRST_(rl_quota_t);
RL_SIZE_FIRST_(rl_quota_result_t);
RL_SIZE_FIRST_(rl_hotkey_t);
RL_SIZE_FIRST_(rl_reservation_t);
RL_SIZE_FIRST_(rl_reserve_stats_t);
#undef RL_SIZE_FIRST_

/* The oldest layouts this version accepts (version 0.1: the full structs). */
#define RL_CONFIG_SIZE_MIN offsetof(rl_config_t, err)
/* The layout before exact mode's fields (0.2). */
#define RL_CONFIG_SIZE_0_2 offsetof(rl_config_t, exact_timeout_ms)
/* The layout before the reservations' fields: its size, padding included
 * (reserved3 sits in that padding, which rl_config_init zeroes). */
#define RL_CONFIG_SIZE_RESERVE offsetof(rl_config_t, max_reservations)
_Static_assert(offsetof(rl_config_t, reserved3) % 8 != 0,
               "reserved3 fills the older layout's tail padding");
/* Whether a config size short of ours ends between two fields: one of the
 * older layouts (any other would cut a field in two). */
static inline int rl__config_size_known(size_t size)
{
    return size == RL_CONFIG_SIZE_MIN || size == RL_CONFIG_SIZE_0_2 ||
           size == RL_CONFIG_SIZE_RESERVE || size >= sizeof(rl_config_t);
}
/* rl_limit_t of 0.1 ends at max_keys: rl_limit_parse writes exactly that. */
#define RL_LIMIT_SIZE_MIN (offsetof(rl_limit_t, max_keys) + sizeof(uint32_t))
/* The layout before the in-flight fields: it ends at hot_every. */
#define RL_LIMIT_SIZE_0_2 offsetof(rl_limit_t, kind)
/* Whether a limit size short of ours ends between two fields, as for a
 * config. */
static inline int rl__limit_size_known(size_t size)
{
    return size == RL_LIMIT_SIZE_MIN || size == RL_LIMIT_SIZE_0_2 || size >= sizeof(rl_limit_t);
}
#define RL_REQUEST_SIZE_MIN sizeof(rl_request_t)
#define RL_DECISION_SIZE_MIN offsetof(rl_decision_t, window_ms)
#define RL_STATS_SIZE_MIN offsetof(rl_stats_t, health_since_round)
#define RL_LIMIT_STATS_SIZE_MIN offsetof(rl_limit_stats_t, sync_keys)
#define RL_HOTKEY_SIZE_MIN sizeof(rl_hotkey_t) /* its first layout */

#endif
