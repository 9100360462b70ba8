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
 * Around a harvest that moves slot counters into the limits' totals: a
 * stats read that overlapped one (and could have counted a decision in its
 * slot and again in the totals, or in neither) reads again. The retire
 * path's single-slot fold does not use them: a read racing a retire of a
 * key it is counting may still be off by that key's uncounted decisions.
 */
static inline void rl__fold_begin(rl_t *rl)
{
    /* relaxed: the harvest's moves that follow are release operations
     * (rl__stat_fold_n, the slot swaps), so a reader whose acquire load
     * sees one of them sees this count too. (No fence: GCC's TSan does not
     * model atomic_thread_fence.) */
    atomic_fetch_add_explicit(&rl->folds_begun, 1, memory_order_relaxed);
}

static inline void rl__fold_end(rl_t *rl)
{
    /* release: the moves happen before a reader that sees it ended. */
    atomic_fetch_add_explicit(&rl->folds_ended, 1, memory_order_release);
}

/*
 * The instance's counters into *o (size set to sizeof *o). slot_counts 0
 * leaves out the decisions still in table slots (admitted and denied then
 * count only what retires and sync rounds folded into the limits' totals)
 * and skips the table walks: for a caller that does not read those two.
 */
void rl__stats_read(rl_t *rl, rl_stats_t *o, int slot_counts);

#endif
