/* SPDX-License-Identifier: MIT */
/* The global tier of a shared instance: attachments and the sync lease
 * (shm/host.h explains the design). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif
#include "shm/host.h"
#include "base/alloc.h"
#include "base/thread.h"
#include "core.h"
#include "shm/shared.h"
#include "exact/exact.h"
#include "quota/quota.h"

/* This process's attachment (its heap). */
typedef struct rl_attach {
    rl_t *rl;
    rl_shsync_t *sh;
    int proc;             /* its record in sh->procs */
    pthread_t thread;     /* the lease thread */
    pthread_mutex_t mu;   /* guards the fields below (this process only) */
    pthread_cond_t cv;
    int started;          /* the lease thread holds its record */
    int stop;             /* rl_close asked the lease thread to end */
    int last;             /* ... and this process is the host's last */
    rl_exact_t *exact;    /* this process's exact thread (exact/exact.h) */
} rl_attach_t;

static int robust_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return -1;
    int bad = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) != 0 ||
              pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) != 0 ||
              pthread_mutex_init(m, &a) != 0;
    pthread_mutexattr_destroy(&a);
    return bad ? -1 : 0;
}

int rl__shsync_create(rl_t *rl, const rl_redisurl_t *url, const rl_sync_cfg_t *sync_cfg,
                      const rl_exact_cfg_t *exact_cfg, rl_shsync_t **out)
{
    rl_shsync_t *sh = rl__calloc(&rl->alloc, sizeof *sh, 64);
    if (sh == NULL)
        return RL_ENOMEM;
    *out = sh; /* the mapping goes as a whole: nothing to free on failure */
    /* The host's one node, whichever process holds the lease. */
    if (rl__sync_store_init(&sh->store, &rl->alloc, rl->table.nslots, rl->node_id) != 0 ||
        robust_init(&sh->lease) != 0)
        return RL_ENOMEM;
    for (int i = 0; i < RL_SHARED_PROCS_MAX; i++)
        if (robust_init(&sh->procs[i].alive) != 0)
            return RL_ENOMEM;
    sh->url = *url;
    sh->sync_cfg = *sync_cfg;
    sh->exact_cfg = *exact_cfg;
    void *p = mmap(NULL, RL_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return RL_ENOMEM;
    rl->shlocal = p; /* zero: nobody attached, in the opener and every child */
    /* relaxed: written before any fork or attach. Degraded until a process
     * attaches and its sync starts: with nobody syncing, global limits
     * answer by their on_failure policy and rl_health / rl_stats say so,
     * where a forgotten rl_shared_attach would otherwise run every key at
     * its pre-sync share for ever, looking healthy. Since the open (whose
     * clock hook is called once per source). */
    atomic_store_explicit(&rl->health.word,
                          RL_HEALTH_MAKE(RL_HEALTH_DEGRADED, RL_CLOCK_ORIGIN_FP),
                          memory_order_relaxed);
    return 0;
}

/* This process's attachment, or NULL. */
static rl_attach_t *local_att(const rl_t *rl)
{
    const rl_shlocal_t *l = rl__attached(rl);
    return l != NULL ? l->att : NULL;
}

static void abs_after_ms(struct timespec *ts, uint64_t ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    uint64_t ns = (uint64_t)ts->tv_nsec + ms * 1000000u;
    ts->tv_sec += (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
}

/* Lock a robust mutex, waiting at most ms (0: try once). 0 locked, 1 locked
 * from a dead owner (made consistent), -1 not locked. */
static int robust_lock(pthread_mutex_t *m, uint64_t ms)
{
    int rc;
    if (ms == 0) {
        rc = pthread_mutex_trylock(m);
    } else {
        struct timespec ts;
        abs_after_ms(&ts, ms);
        rc = pthread_mutex_timedlock(m, &ts);
    }
    if (rc != 0 && rc != EOWNERDEAD && rc != ETIMEDOUT && rc != EBUSY && ms != 0) {
        /* Not a wait that ended (ENOTRECOVERABLE, which nothing here
         * causes: every EOWNERDEAD is made consistent): never spin. */
        struct timespec pause = {0, (long)(ms < 1000 ? ms : 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    if (rc == EOWNERDEAD) {
#ifdef __SANITIZE_THREAD__
        /* ThreadSanitizer's timedlock interceptor records a lock only when
         * it returns 0 (its trylock and lock ones also take EOWNERDEAD):
         * tell it this thread holds the mutex, or the unlock reads as one
         * of an unlocked mutex. */
        if (ms != 0) {
            __tsan_mutex_pre_lock(m, __tsan_mutex_try_lock);
            __tsan_mutex_post_lock(m, __tsan_mutex_try_lock, 0);
        }
#endif
        pthread_mutex_consistent(m);
        return 1;
    }
    return rc == 0 ? 0 : -1;
}

/* Whether record i stands for a live process other than `self`; a dead
 * one's record is freed on the way. */
static int proc_alive(rl_shsync_t *sh, int i, int self)
{
    rl_shproc_t *p = &sh->procs[i];
    /* seq_cst: a detacher's store of 0 to its own record, then its scan of
     * the others, against the same in another detacher (Dekker): at least
     * one of two that detach together sees the other gone, so at least one
     * of them is the last one out. */
    int64_t pid = atomic_load(&p->pid);
    if (i == self || pid == 0)
        return 0;
    int r = robust_lock(&p->alive, 0);
    if (r < 0)
        return 1; /* held: its lease thread runs */
    /* Not held: its owner died (1), or its lease thread has not locked it
     * yet (a process attaching now), unless that process is gone too. */
    int dead = r == 1 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
    if (dead) {
        int64_t expect = pid;
        /* seq_cst: as above. */
        atomic_compare_exchange_strong(&p->pid, &expect, 0);
    }
    pthread_mutex_unlock(&p->alive);
    return !dead;
}

static int others_alive(rl_shsync_t *sh, int self)
{
    int n = 0;
    for (int i = 0; i < RL_SHARED_PROCS_MAX; i++)
        n += proc_alive(sh, i, self);
    return n;
}

/* Claim a free record (freeing dead ones on the way); -1 if none. */
static int claim_proc(rl_shsync_t *sh)
{
    int64_t me = (int64_t)getpid();
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < RL_SHARED_PROCS_MAX; i++) {
            int64_t expect = 0;
            /* seq_cst: see proc_alive. */
            if (atomic_compare_exchange_strong(&sh->procs[i].pid, &expect, me))
                return i;
        }
        others_alive(sh, -1); /* frees the dead's records */
    }
    return -1;
}

static void att_set(rl_attach_t *at, int *field, int v)
{
    pthread_mutex_lock(&at->mu);
    *field = v;
    pthread_cond_broadcast(&at->cv);
    pthread_mutex_unlock(&at->mu);
}

/* Wait at most ms for stop; its value. */
static int wait_stop(rl_attach_t *at, uint64_t ms)
{
    struct timespec ts;
    abs_after_ms(&ts, ms);
    pthread_mutex_lock(&at->mu);
    while (!at->stop && pthread_cond_timedwait(&at->cv, &at->mu, &ts) == 0) {
    }
    int stop = at->stop;
    pthread_mutex_unlock(&at->mu);
    return stop;
}

static void read_stop(rl_attach_t *at, int *stop, int *last)
{
    pthread_mutex_lock(&at->mu);
    *stop = at->stop;
    *last = at->last;
    pthread_mutex_unlock(&at->mu);
}

/* Holding the lease: run the host's sync until this process detaches. */
static void hold_lease(rl_attach_t *at)
{
    rl_shsync_t *sh = at->sh;
    rl_t *rl = at->rl;
    /* relaxed: statistics. */
    atomic_store_explicit(&sh->holder_pid, (int64_t)getpid(), memory_order_relaxed);
    rl_sync_t *s = NULL;
    for (int failed = 0;; failed++) {
        int rc = rl__sync_start_host(rl, &sh->url, &sh->sync_cfg, &sh->store, &s);
        if (rc == 0)
            break;
        s = NULL;
        if (failed == 0) /* once a streak: a retry a second would flood the log */
            rl__log(&rl->logger, RL_LOG_ERROR, "shared sync: cannot start the host's sync "
                    "(%s); retrying every second", rl_strerror(rc));
        if (wait_stop(at, 1000))
            break;
    }
    while (!wait_stop(at, 60000)) {
    }
    int stop, last;
    read_stop(at, &stop, &last);
    if (s != NULL)
        rl__sync_stop_ex(s, sh->sync_cfg.close_ms, last);
    /* relaxed: statistics. */
    atomic_store_explicit(&sh->holder_pid, 0, memory_order_relaxed);
}

static void *lease_main(void *arg)
{
    rl_attach_t *at = arg;
    rl_shsync_t *sh = at->sh;
    rl_shproc_t *me = &sh->procs[at->proc];
    while (robust_lock(&me->alive, 60000) < 0) { /* free, or a dead process's */
    }
    att_set(at, &at->started, 1);
    uint64_t last_waited_ms = 0;
    for (;;) {
        int stop, last;
        read_stop(at, &stop, &last);
        int r = robust_lock(&sh->lease, RL_SHARED_LEASE_POLL_MS);
        if (r < 0) {
            /* A process that is not the last leaves the lease to the others;
             * the last waits for it to send the host's final round, at most
             * the close deadline (a holder that stopped, SIGSTOP, keeps it). */
            if (stop && (!last || last_waited_ms >= sh->sync_cfg.close_ms))
                break;
            if (stop)
                last_waited_ms += RL_SHARED_LEASE_POLL_MS;
            continue;
        }
        read_stop(at, &stop, &last);
        if (r == 1) {
            /* relaxed: statistics. */
            atomic_fetch_add_explicit(&sh->takeovers, 1, memory_order_relaxed);
            rl__log(&at->rl->logger, RL_LOG_WARN,
                    "shared sync: process %d takes the host's sync over from a dead holder",
                    (int)getpid());
        } else if (!stop || last) {
            /* relaxed: statistics. */
            atomic_fetch_add_explicit(&sh->handovers, 1, memory_order_relaxed);
        }
        if (!stop || last)
            hold_lease(at);
        pthread_mutex_unlock(&sh->lease);
        break;
    }
    /* seq_cst: see proc_alive (rl_close stored 0 already; a lease thread
     * that ends otherwise does not). */
    atomic_store(&me->pid, 0);
    pthread_mutex_unlock(&me->alive);
    return NULL;
}

int rl_shared_attach(rl_t *rl)
{
    if (rl == NULL)
        return RL_EINVAL;
    rl_shsync_t *sh = rl->shsync;
    if (sh == NULL)
        return rl__alloc_is_shared(&rl->alloc) ? 0 : RL_ENOTSUP; /* local-only: nothing to do */
    if (local_att(rl) != NULL)
        return 0; /* attached already */
    rl_attach_t *at = rl__calloc(&rl->alloc, sizeof *at, 64);
    if (at == NULL)
        return RL_ENOMEM;
    at->rl = rl;
    at->sh = sh;
    at->proc = claim_proc(sh);
    if (at->proc < 0) {
        rl__free(&rl->alloc, at, sizeof *at, 64);
        rl__log(&rl->logger, RL_LOG_ERROR,
                "rl_shared_attach: %d processes attached already (the most a shared instance "
                "tracks)", RL_SHARED_PROCS_MAX);
        return RL_ENOMEM;
    }
    if (pthread_mutex_init(&at->mu, NULL) != 0 || pthread_cond_init(&at->cv, NULL) != 0) {
        atomic_store(&sh->procs[at->proc].pid, 0); /* seq_cst: see proc_alive */
        rl__free(&rl->alloc, at, sizeof *at, 64);
        return RL_ENOMEM;
    }
    /* This process's own connections for exact checks and quota charges:
     * their state is in Redis, so each process asks it directly. */
    int rc = rl__exact_start(&sh->url, &sh->exact_cfg, &at->exact);
    if (rc == 0 && (rc = rl__quotas_adopt(rl, &rl->shlocal->quotas, at->exact)) != 0)
        rl__exact_stop(at->exact);
    if (rc != 0) {
        atomic_store(&sh->procs[at->proc].pid, 0); /* seq_cst: see proc_alive */
        pthread_cond_destroy(&at->cv);
        pthread_mutex_destroy(&at->mu);
        rl__free(&rl->alloc, at, sizeof *at, 64);
        return rc;
    }
    /* Every signal blocked (base/thread.h), in the sync thread it starts too. */
    rc = rl__thread_start(&at->thread, lease_main, at);
    if (rc != 0) {
        rl__quotas_stop(rl->shlocal->quotas);
        rl__exact_stop(at->exact);
        rl__quotas_drop(rl->shlocal->quotas); /* its replay stopped for good */
        rl->shlocal->quotas = NULL;
        atomic_store(&sh->procs[at->proc].pid, 0); /* seq_cst: see proc_alive */
        pthread_cond_destroy(&at->cv);
        pthread_mutex_destroy(&at->mu);
        rl__free(&rl->alloc, at, sizeof *at, 64);
        return RL_ENOMEM;
    }
    /* Attached once the record is held: a close elsewhere then counts it. */
    pthread_mutex_lock(&at->mu);
    while (!at->started)
        pthread_cond_wait(&at->cv, &at->mu);
    pthread_mutex_unlock(&at->mu);
    rl->shlocal->pid = getpid();
    rl->shlocal->exact = at->exact;
    rl->shlocal->att = at;
    return 0;
}

void rl__shsync_free(rl_t *rl)
{
    rl_shsync_t *sh = rl->shsync;
    if (sh == NULL)
        return;
    if (rl->shlocal != NULL)
        munmap(rl->shlocal, RL_PAGE_SIZE);
    rl__sync_store_free(&sh->store, &rl->alloc, rl->table.nslots);
    rl__free(&rl->alloc, sh, sizeof *sh, 64);
    rl->shsync = NULL;
}

void rl__shsync_close(rl_t *rl)
{
    rl_shsync_t *sh = rl->shsync;
    if (sh == NULL || rl->shlocal == NULL)
        return;
    rl_attach_t *at = local_att(rl);
    rl_exact_t *x = at != NULL ? at->exact : NULL;
    if (at != NULL) {
        /* Detach first: a lease holder hands the lease over before it
         * stops anything else, so the last process out finds it within
         * its wait. */
        /* seq_cst: see proc_alive. */
        atomic_store(&sh->procs[at->proc].pid, 0);
        int last = others_alive(sh, at->proc) == 0;
        pthread_mutex_lock(&at->mu);
        at->last = last;
        at->stop = 1;
        pthread_cond_broadcast(&at->cv);
        pthread_mutex_unlock(&at->mu);
        pthread_join(at->thread, NULL);
        pthread_cond_destroy(&at->cv);
        pthread_mutex_destroy(&at->mu);
        rl__free(&rl->alloc, at, sizeof *at, 64);
        rl->shlocal->att = NULL;
        rl->shlocal->exact = NULL;
        rl->shlocal->pid = 0;
    }
    /* Then this process's own Redis work: the replay thread first (it
     * waits on the exact thread's caller), then the exact thread, whose
     * stop answers the checks and charges in flight (through the ledger),
     * and only then the ledger's memory. */
    if (x != NULL) {
        rl__quotas_stop(rl->shlocal->quotas);
        rl__exact_stop(x);
    }
    rl__quotas_drop(rl->shlocal->quotas);
    rl->shlocal->quotas = NULL;
    munmap(rl->shlocal, RL_PAGE_SIZE);
}

void rl__shsync_counters(const rl_shsync_t *sh, rl_sync_counters_t *out)
{
    rl__sync_counters_decode(sh->store.counters, out);
}

void rl__shsync_fleet(const rl_shsync_t *sh, rl_sync_fleet_t *out)
{
    rl__sync_store_fleet(&sh->store, out);
}
