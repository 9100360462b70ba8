/* SPDX-License-Identifier: MIT */
/*
 * Baseline (b) of rl_bench: the obvious rate limiter a team would write
 * first. One pthread mutex around an open-addressing hash map keyed by XXH3
 * of the key, each entry a floating-point token bucket refilled on read from
 * CLOCK_MONOTONIC. It exists only to be measured against; it is not part of
 * the library.
 */
#ifndef RL_BENCH_MUTEX_MAP_H
#define RL_BENCH_MUTEX_MAP_H

#include <stddef.h>
#include <stdint.h>

/* Longest key the map stores inline (the bench keys are 13 bytes). */
#define MM_KEY_MAX 36

typedef struct mm mm_t;

/* A map for up to max_keys keys, each a bucket of `burst` tokens refilled
 * at rate_count per period_ms. NULL on allocation failure. */
mm_t *mm_open(size_t max_keys, uint64_t rate_count, uint64_t period_ms, uint64_t burst);
void mm_close(mm_t *m);

/* Charge `cost` tokens to key: 1 allowed, 0 denied, -1 key too long or map full. */
int mm_check(mm_t *m, const void *key, size_t len, uint32_t cost);

/* Bytes allocated for the entries. */
size_t mm_bytes(const mm_t *m);

#endif
