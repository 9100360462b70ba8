/* Internals shared by rl_stats (src/stats.c) and rl_metrics_text. */
#ifndef RL_STATS_H
#define RL_STATS_H

#include "instance.h"

/*
 * Fill out[i] for the limits ids[0..n), which must be live ids in ascending
 * index order: one table walk per window of 64 consecutive limit indexes
 * (rl_limit_stats_t.size is left for the caller).
 */
void rl__limit_stats_many(rl_t *rl, const int *ids, uint32_t n, rl_limit_stats_t *out);

#endif
