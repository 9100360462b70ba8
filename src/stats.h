/* SPDX-License-Identifier: MIT */
/* Internals shared by rl_stats (src/stats.c) and rl_metrics_text. */
#ifndef RL_STATS_H
#define RL_STATS_H

#include "core.h"

/*
 * Fill out[i] for the limits ids[0..n), which must be live ids in ascending
 * index order: one table walk per window of 64 consecutive limit indexes
 * (rl_limit_stats_t.size is left for the caller).
 */
void rl__limit_stats_many(rl_t *rl, const int *ids, uint32_t n, rl_limit_stats_t *out);

/*
 * The instance's counters into *o (size set to sizeof *o). slot_counts 0
 * leaves out the decisions still in table slots (admitted and denied then
 * count only what retires and sync rounds folded into the limits' totals)
 * and skips the table walks: for a caller that does not read those two.
 */
void rl__stats_read(rl_t *rl, rl_stats_t *o, int slot_counts);

#endif
