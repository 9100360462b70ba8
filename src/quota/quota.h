/* SPDX-License-Identifier: MIT */
/*
 * The quota ledger (quota/quota.c; quota/internal.h names its other files):
 * a client of the Redis layer. Its registry of quotas, its charges (through
 * the exact thread's per-request caller), the fail-open journal
 * (quota/journal.h) and its replay thread, and its counters. Created by rl_open for an instance with a redis_url.
 */
#ifndef RL_QUOTA_H
#define RL_QUOTA_H

#include <stdint.h>
#include "ratelimit.h"

struct rl;
struct rl_exact;
typedef struct rl_quotas rl_quotas_t;

/* 0 or RL_ENOMEM. Nothing starts until the first rl_quota_add, whose
 * charges go through the instance's exact thread (exact/exact.h). */
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
/* A shared instance (shm/host.h), in rl_shared_attach: make *slot (the
 * ledger this process sees, NULL when no quota was defined) this
 * process's own, a fork()'s copy replaced by a fresh ledger with the same
 * definitions, and start its journal and replay on x's caller. 0 or
 * RL_ENOMEM. */
int rl__quotas_adopt(struct rl *rl, rl_quotas_t **slot, struct rl_exact *x);
/* rl_close: destroy a ledger this process made (rl__quotas_stop first if
 * its replay may run), forget a fork()'s copy. NULL is a no-op. */
void rl__quotas_drop(rl_quotas_t *qs);
/* The calling process's own ledger: the instance's, or in a shared
 * instance the one it made or adopted (NULL for a fork()'s copy). */
rl_quotas_t *rl__quotas_of(struct rl *rl);
/* The rl_stats_t quota_* fields. */
void rl__quotas_stats(rl_quotas_t *qs, rl_stats_t *o);

/* Test hooks (internal). The wall clock Redis's script uses: unix_ms, or
 * Redis TIME for 0. */
void rl__quota_set_time(struct rl *rl, uint64_t unix_ms);
/* The next n replayed charges Redis answers are taken as lost with the
 * connection (which is dropped): a replay cut short after Redis charged. */
void rl__quota_lose_acks(struct rl *rl, uint32_t n);

#endif
