/* SPDX-License-Identifier: MIT */
/*
 * The global tier of a shared instance (rl_open_shared with a redis_url):
 * the host is one node of the fleet. Its processes share the key table and
 * one sync state, in the shared mapping; one of them at a time holds the
 * lease and runs the sync thread for the whole host.
 *
 * The lease is a robust process-shared mutex. Every attached process
 * (rl_shared_attach) runs a lease thread that blocks on it: the holder's
 * death gives the next waiter EOWNERDEAD at once (the kernel walks a dead
 * thread's robust list even while the process is an unreaped zombie, where
 * kill(pid, 0) still answers 0), and a graceful holder unlocks it when it
 * detaches. What a holder knows of each key (rl_syncslot_t: its epoch and
 * cumulative counters) and the round and epoch numbers live in the mapping
 * (the host's sync store, sync/internal.h), under the lease, so a new holder
 * continues as the same incarnation: Redis sees one node whose reports
 * go on, counts nothing twice (they are cumulative) and drops no share. A
 * holder may die between clearing a dirty word and taking its slots'
 * counters: a new holder marks every slot dirty once.
 *
 * Which processes are attached: one record each, whose robust mutex its
 * lease thread holds; a dead process's record answers EOWNERDEAD and is
 * reclaimed. The last process out (no other live record) sends the final
 * leaving round, which hands the host's shares back.
 */
#ifndef RL_SHM_HOST_H
#define RL_SHM_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "sync/internal.h"
#include "exact/exact.h"

/* Attached processes a shared instance tracks at once. */
#define RL_SHARED_PROCS_MAX 512

/* A lease thread waiting for the lease wakes this often to see whether its
 * process detaches (ms). A holder's death wakes it at once. */
#define RL_SHARED_LEASE_POLL_MS 50

/* One attached process. */
typedef struct rl_shproc {
    pthread_mutex_t alive; /* robust, process-shared: held by its lease thread */
    _Atomic int64_t pid;   /* 0: free, or its process is detaching */
} rl_shproc_t;

typedef struct rl_shsync {
    pthread_mutex_t lease; /* robust, process-shared: held by the sync's process */
    rl_redisurl_t url;     /* written at open, read-only after */
    /* The opener's settings, read-only after open: the host's sync thread
     * (whichever process holds the lease) and each attached process's
     * exact thread start with them (exact_cfg's pointers are into the
     * instance, which is in the mapping too). */
    rl_sync_cfg_t sync_cfg;
    rl_exact_cfg_t exact_cfg;
    /* The host's one node in Redis: its incarnation (read-only after open),
     * slots and round and epoch numbers (only the lease holder touches
     * them), and its sync counters (any process reads them). */
    rl_sync_store_t store;
    /* Statistics, any process. */
    _Atomic int64_t holder_pid; /* 0: nobody holds the lease */
    _Atomic uint64_t takeovers; /* leases taken from a dead holder */
    _Atomic uint64_t handovers; /* leases taken otherwise: the first, and
                                   each from a holder that detached */
    rl_shproc_t procs[RL_SHARED_PROCS_MAX];
} rl_shsync_t;

/* At rl_open_shared, in the opener (the allocator carves the mapping):
 * the state above for a table of rl->table.nslots, and rl->shlocal, the
 * private page (core.h). 0 or RL_ENOMEM. */
int rl__shsync_create(struct rl *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *sync_cfg,
                      const rl_exact_cfg_t *exact_cfg, rl_shsync_t **out);

/* rl_close in any process: detach if this process attached (the last one
 * out hands the host's shares back), then drop the private page. */
void rl__shsync_close(struct rl *rl);

/* rl_close of the opening pass that only measures the mapping (its blocks
 * are heap blocks). */
void rl__shsync_free(struct rl *rl);

/* The host's sync counters (any process). */
void rl__shsync_counters(const rl_shsync_t *sh, rl_sync_counters_t *out);

/* The host's view of the fleet (any process). */
void rl__shsync_fleet(const rl_shsync_t *sh, rl_sync_fleet_t *out);

#endif
