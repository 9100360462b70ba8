/* SPDX-License-Identifier: MIT */
/*
 * The quota ledger (quota.c): a client of the Redis layer. Its registry of
 * quotas, its charges (through the exact thread's per-request caller), the
 * fail-open journal (quotajournal.h) and its replay thread, and its
 * counters. Created by rl_open for an instance with a redis_url.
 */
#ifndef RL_QUOTA_H
#define RL_QUOTA_H

#include <stdint.h>
#include "ratelimit.h"

struct rl;
typedef struct rl_quotas rl_quotas_t;

/* 0 or RL_ENOMEM. Nothing starts until the first rl_quota_add, whose
 * charges go through the instance's exact thread (exact.h). */
int rl__quotas_create(struct rl *rl, uint32_t journal_max, uint32_t timeout_ms,
                      rl_quotas_t **out);
/* Stop the replay thread (before the exact thread stops: the replay waits
 * on its caller). NULL or a second call is a no-op. */
void rl__quotas_stop(rl_quotas_t *qs);
/* Stop the replay thread if still running and free everything: after the
 * exact thread stopped, whose stop answers the asynchronous charges still
 * in flight through this ledger (their on_failure, journal included). NULL
 * is a no-op. */
void rl__quotas_destroy(rl_quotas_t *qs);
/* A child's copy after fork(): free the memory, touch no thread. */
void rl__quotas_forget(rl_quotas_t *qs);
/* The rl_stats_t quota_* fields. */
void rl__quotas_stats(rl_quotas_t *qs, rl_stats_t *o);

/* Test hooks (internal). The wall clock Redis's script uses: unix_ms, or
 * Redis TIME for 0. */
void rl__quota_set_time(struct rl *rl, uint64_t unix_ms);
/* The next n replayed charges Redis answers are taken as lost with the
 * connection (which is dropped): a replay cut short after Redis charged. */
void rl__quota_lose_acks(struct rl *rl, uint32_t n);

#endif
