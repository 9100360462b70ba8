/* SPDX-License-Identifier: MIT */
/*
 * What the per-request client's two sides share: redis/caller.c (its
 * lifetime and the submitters' side: a slot taken, queued, waited on) and
 * redis/caller_loop.c (the loop thread's side: dispatch, the deadline list,
 * replies, the connections). A slot is handed from one to the other through
 * the submission queue (qmu) and answered once (its state's CAS).
 */
#ifndef RL_REDIS_CALLERINT_H
#define RL_REDIS_CALLERINT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <uv.h>
#include "redis/caller.h"
#include "redis/route.h"

/* A slot's life: FREE -> WAITING (queued or sent) -> DELIVERING (its answer
 * being written) -> DONE; or WAITING -> ABANDONED (a blocking caller's own
 * deadline). The CAS out of WAITING decides who answers, once. */
enum { S_FREE, S_WAITING, S_DELIVERING, S_DONE, S_ABANDONED };

enum { K_SENT, K_REPLIES, K_TIMEOUTS, K_LATE, K_UNSENT, K_LOST, K_FULL, K_STALLS, K_N };

typedef struct waiter {
    uv_cond_t cv;
    int status; /* under the caller's wmu */
} waiter_t;

typedef struct croute croute_t;

typedef struct slot {
    _Atomic int state;
    _Atomic int refs; /* the loop's, and a blocking waiter's */
    /* Written by the submitter before it queues the slot (the queue mutex
     * publishes them to the loop thread). */
    rl_redis_call_fn *cb;
    void *ud;
    waiter_t *w; /* NULL: asynchronous */
    uint64_t deadline_ns;
    unsigned script;
    int nkeys, argc;
    uint16_t len[RL_CALL_ARGS_MAX];
    char buf[RL_CALL_BYTES_MAX];
    alignas(max_align_t) unsigned char ctx[RL_CALL_CTX_MAX];
    /* Loop thread only. */
    croute_t *rt;
    int in_redis; /* hiredis holds a callback with this slot */
    int in_dl;    /* in the deadline list */
    int loop_done;
    int evaled;   /* resent as EVAL after NOSCRIPT */
    struct slot *prev, *next; /* deadline list */
    struct slot *qnext;       /* submission queue, free list */
} slot_t;

struct croute {
    rl_redis_route_t route;
    struct rl_redis_caller *c;
    uint32_t inflight;       /* requests hiredis holds */
    uint64_t last_progress;  /* uv_now of the last reply, or of the send
                                that ended an idle spell */
};

typedef struct script_ref {
    struct rl_redis_caller *c;
    unsigned id;
} script_ref_t;

struct rl_redis_caller {
    rl_allocator_t alloc;
    rl_redisurl_t url;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t dl_timer;
    croute_t *routes;
    uint32_t pool;
    slot_t *slots;
    uint32_t nslots;
    uint64_t rng; /* reconnect jitter, loop thread */
    /* Submission queue, free list, stop request. */
    uv_mutex_t qmu;
    slot_t *qhead, *qtail, *free;
    uint32_t nfree;
    int stop_asked;
    uv_mutex_t wmu; /* blocking waiters' hand-over */
    /* Loop thread only. */
    int stopping;
    slot_t *dl_head, *dl_tail;
    const char *src[RL_CALLER_SCRIPTS_MAX];
    char sha[RL_CALLER_SCRIPTS_MAX][41];
    script_ref_t sref[RL_CALLER_SCRIPTS_MAX];
    unsigned nscripts;
    rl_redis_caller_log_fn *log;
    void *owner;
    _Atomic uint64_t k[K_N];
};

static inline void rl__caller_count(rl_redis_caller_t *c, int which)
{
    /* relaxed: statistics. */
    atomic_fetch_add_explicit(&c->k[which], 1, memory_order_relaxed);
}

/* Drop one reference to s (the loop's, or a blocking waiter's); the last
 * one puts it back on the free list. */
static inline void slot_release(rl_redis_caller_t *c, slot_t *s)
{
    /* acq_rel: the last owner sees every write of the other before the slot
     * is reused (the loop's answer, the waiter's reads). */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* relaxed: the queue mutex publishes it with the slot. */
    atomic_store_explicit(&s->state, S_FREE, memory_order_relaxed);
    uv_mutex_lock(&c->qmu);
    s->qnext = c->free;
    c->free = s;
    c->nfree++;
    uv_mutex_unlock(&c->qmu);
}

/* redis/caller_loop.c */

/* The locks, the loop with its wake-up and deadline timer, and one route
 * per pool connection. RL_ENOMEM with nothing left to undo but the
 * caller's memory, or 0 (a route's failure leaves the loop to be shut down,
 * *route_rc says which). */
int rl__caller_loop_init(rl_redis_caller_t *c, const rl_redis_caller_cfg_t *cfg, int *route_rc);
/* On the loop thread (or before it started): answer everything still
 * waiting as closed, close the routes, the timer and the wake-up. */
void rl__caller_loop_shutdown(rl_redis_caller_t *c);
/* The caller's thread: connect every route, run the loop until shut down. */
void *rl__caller_thread_main(void *arg);

#endif
