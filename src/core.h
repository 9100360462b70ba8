/* SPDX-License-Identifier: MIT */
/* The instance's core context (rl_t): the local tier's state, the fork
 * guard and the modules' opaque pointers, with the checks every public
 * entry point shares. The constructor is instance.h. */
#ifndef RL_CORE_H
#define RL_CORE_H

#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>
#include "ratelimit.h"
#include "local/clock.h"
#include "local/keyhash.h"
#include "local/limits.h"
#include "local/table.h"
#include "local/health.h"
#include "base/log.h"
#include "local/lease.h"

/*
 * A shared instance's private page (shm/host.c maps it MAP_PRIVATE before
 * any fork): each process has its own copy, and a child's starts as the
 * one fork() gave it, which the pid tells apart. What the calling process
 * has of the shared mode's per-process state, for the exact path and the
 * quota ledger (quota/quota.c) to reach without the shared host's internals.
 */
typedef struct rl_shlocal {
    pid_t pid;               /* the process whose attachment `att` is */
    struct rl_attach *att;   /* its rl_shared_attach (shm/host.c) */
    struct rl_exact *exact;  /* the exact thread att started */
    /* The quota ledger (quota/quota.h) this process sees: one it made (its
     * definitions, while unattached), or the copy fork() gave it, which a
     * change or rl_shared_attach replaces with its own (quota/quota.c). */
    struct rl_quotas *quotas;
    /* rl_config_t's, set by the opener (so every process inherits them):
     * what a process's ledger is made with. */
    uint32_t quota_journal_max;
    uint32_t quota_timeout_ms;
} rl_shlocal_t;

struct rl {
    rl_clock_t clock; /* first: its guard lines are 64-byte aligned */
    rl_keyhash_t kh;
    rl_table_t table;
    rl_limits_t limits;
    rl_allocator_t alloc;
    /* One page mapped MADV_WIPEONFORK holding 1: it reads 0 in a child. */
    _Atomic unsigned char *fork_page;
    pid_t owner_pid; /* fallback when the kernel lacks MADV_WIPEONFORK */
    struct rl_sync *sync; /* the global tier; NULL when local-only or shared */
    /* A shared instance's global tier (shm/host.h), in the mapping; NULL
     * otherwise. Per-process state is reached through its private page. */
    struct rl_shsync *shsync;
    rl_shlocal_t *shlocal; /* with shsync: this process's private page */
    struct rl_hot *hot;   /* hot keys (hot/hot.h); NULL in a shared instance */
    struct rl_exact *exact; /* the exact path (exact/exact.h); NULL when local-only */
    struct rl_quotas *quotas; /* the quota ledger; NULL when local-only */
    struct rl_inflight *inflight; /* in-flight limits (inflight/inflight.h);
                                     NULL in a shared instance */
    struct rl_reserve *reserve; /* reservations and waits (reserve/reserve.h);
                                   NULL in a shared instance */
    rl_health_t health;   /* written by the sync thread, read by checks */
    /* The settings more than one module reads; each module's own are in
     * its start config (rl_sync_cfg_t, rl_exact_cfg_t) and stay there. Who
     * the node is and how its Redis keys are named: the logger, the sync
     * thread, the exact path and the quota ledger all name keys or lines
     * with them. The round interval and the degraded ramp: the check path
     * reads them on its degraded answers (a closed limit's retry hint, a
     * local limit's ramp), the sync thread paces its rounds by the first. */
    char *node_id;
    char *key_prefix;
    uint32_t sync_interval_ms;
    uint64_t degrade_ramp_fp;
    rl_logger_t logger;
    rl_leases_t leases; /* hot keys' token leases (local/lease.h); off when shared */
};

/* Whether the instance has a global tier (its own sync, or its host's). */
static inline int rl__has_global(const rl_t *rl) { return rl->sync != NULL || rl->shsync != NULL; }

/* The calling process's attachment to a shared instance's host (its
 * private page), or NULL: not a shared instance with a global tier, or a
 * process that did not attach (a copy fork() gave names the parent). */
static inline const rl_shlocal_t *rl__attached(const rl_t *rl)
{
    const rl_shlocal_t *l = rl->shlocal;
    return l != NULL && l->att != NULL && l->pid == getpid() ? l : NULL;
}

/* The exact thread of the calling process: the instance's, or in a shared
 * instance the one its rl_shared_attach started (NULL before). Read only on
 * the exact and tiered branches. */
static inline struct rl_exact *rl__exact_of(const rl_t *rl)
{
    if (rl->shsync == NULL)
        return rl->exact;
    const rl_shlocal_t *l = rl__attached(rl);
    return l != NULL ? l->exact : NULL;
}

/* A check that would deny once instance time has saturated (local/clock.h,
 * RL_CLOCK_HORIZON_NS): the deny is no longer a rate limit's, since no
 * bucket refills. Logs it (once) and answers RL_ERANGE. instance.c. */
int rl__horizon_error(rl_t *rl) __attribute__((cold, noinline));

/* A degraded answer of the limit ls (the health word the check read; why:
 * what made it degraded): the first of a spell is counted and logged
 * (src/degraded.c). Called on degraded answers only. */
void rl__degraded_note(rl_t *rl, rl_limit_slot_t *ls, uint64_t health, int on_failure,
                       const char *why) __attribute__((cold, noinline));

/* RL_EFORKED when called in a child on an inherited instance, else 0. */
static inline int rl__fork_check(const rl_t *rl)
{
    if (__builtin_expect(rl->fork_page != NULL, 1))
        /* relaxed: a value that only fork() changes (the kernel wipes it). */
        return atomic_load_explicit(rl->fork_page, memory_order_relaxed) == 1 ? 0 : RL_EFORKED;
    return getpid() == rl->owner_pid ? 0 : RL_EFORKED;
}

#endif
