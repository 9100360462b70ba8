/* SPDX-License-Identifier: MIT */
/* The per-request client (see caller.h): its lifetime and the submitters'
 * side (a slot taken, queued, and for a blocking call waited on); the loop
 * thread's side is redis/caller_loop.c. */
#include <string.h>
#include <sys/random.h>
#include "redis/callerint.h"
#include "redis/uvloop.h"
#include "base/alloc.h"
#include "base/thread.h"

/* -------------------------------------------------------- lifetime */

static void free_caller(rl_redis_caller_t *c)
{
    rl_allocator_t a = c->alloc;
    rl__free(&a, c->slots, (size_t)c->nslots * sizeof *c->slots, 64);
    rl__free(&a, c->routes, (size_t)c->pool * sizeof *c->routes, 64);
    rl__free(&a, c, sizeof *c, 64);
}

/* The caller's memory and its settings, the slots on the free list; no
 * loop, no lock yet. NULL when out of memory. */
static rl_redis_caller_t *alloc_caller(const rl_redis_caller_cfg_t *cfg)
{
    rl_redis_caller_t *c = rl__calloc(cfg->alloc, sizeof *c, 64);
    if (c == NULL)
        return NULL;
    c->alloc = *cfg->alloc;
    c->url = *cfg->url;
    c->pool = cfg->pool;
    c->nslots = cfg->slots;
    c->routes = rl__calloc(&c->alloc, (size_t)c->pool * sizeof *c->routes, 64);
    c->slots = rl__calloc(&c->alloc, (size_t)c->nslots * sizeof *c->slots, 64);
    uint64_t seed;
    if (c->routes == NULL || c->slots == NULL ||
        getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        free_caller(c);
        return NULL;
    }
    c->rng = seed | 1;
    c->log = cfg->log;
    c->owner = cfg->owner;
    c->nscripts = cfg->nscripts;
    for (unsigned i = 0; i < cfg->nscripts; i++) {
        c->src[i] = cfg->scripts[i];
        c->sref[i].c = c;
        c->sref[i].id = i;
    }
    for (int i = 0; i < K_N; i++)
        atomic_init(&c->k[i], 0);
    for (uint32_t i = c->nslots; i > 0; i--) { /* slot 0 ends first on the free list */
        slot_t *s = &c->slots[i - 1];
        atomic_init(&s->state, S_FREE);
        atomic_init(&s->refs, 0);
        s->qnext = c->free;
        c->free = s;
    }
    c->nfree = c->nslots;
    return c;
}

int rl__redis_caller_start(rl_redis_caller_t **out, const rl_redis_caller_cfg_t *cfg)
{
    if (out == NULL || cfg == NULL || cfg->pool == 0 || cfg->slots == 0 ||
        cfg->nscripts > RL_CALLER_SCRIPTS_MAX)
        return RL_EINVAL;
    rl_redis_caller_t *c = alloc_caller(cfg);
    if (c == NULL)
        return RL_ENOMEM;
    int rc;
    if (rl__caller_loop_init(c, cfg, &rc) != 0) {
        free_caller(c);
        return RL_ENOMEM;
    }
    if (rc == 0)
        rc = rl__thread_start(&c->thread, rl__caller_thread_main, c);
    if (rc != 0) {
        c->stopping = 1;
        rl__caller_loop_shutdown(c);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        rl__uv_loop_close(&c->loop);
        uv_mutex_destroy(&c->wmu);
        uv_mutex_destroy(&c->qmu);
        free_caller(c);
        return RL_ENOMEM;
    }
    *out = c;
    return 0;
}

void rl__redis_caller_forget(rl_redis_caller_t *c)
{
    if (c != NULL)
        free_caller(c);
}

void rl__redis_caller_stop(rl_redis_caller_t *c)
{
    if (c == NULL)
        return;
    uv_mutex_lock(&c->qmu);
    c->stop_asked = 1;
    uv_mutex_unlock(&c->qmu);
    uv_async_send(&c->wake);
    pthread_join(c->thread, NULL);
    rl__uv_loop_close(&c->loop);
    uv_mutex_destroy(&c->wmu);
    uv_mutex_destroy(&c->qmu);
    free_caller(c);
}

/* ----------------------------------------------------- submission */

/* A free slot filled with the request, refs set; or an RL_CALL_* / -1. */
static int take(rl_redis_caller_t *c, const rl_redis_call_t *call, int refs, slot_t **out)
{
    int argc = call->nkeys + call->nargs;
    if (call->nkeys < 1 || call->nargs < 0 || argc > RL_CALL_ARGS_MAX ||
        call->script >= c->nscripts)
        return -1;
    size_t total = 0;
    for (int i = 0; i < argc; i++) {
        if (call->argl[i] > RL_CALL_BYTES_MAX)
            return -1;
        total += call->argl[i];
    }
    if (total > RL_CALL_BYTES_MAX)
        return -1;
    uv_mutex_lock(&c->qmu);
    slot_t *s = c->stop_asked ? NULL : c->free;
    int closed = c->stop_asked;
    if (s != NULL) {
        c->free = s->qnext;
        c->nfree--;
    }
    uv_mutex_unlock(&c->qmu);
    if (s == NULL) {
        if (!closed)
            rl__caller_count(c, K_FULL);
        return closed ? RL_CALL_CLOSED : RL_CALL_FULL;
    }
    size_t off = 0;
    for (int i = 0; i < argc; i++) {
        memcpy(s->buf + off, call->argv[i], call->argl[i]);
        s->len[i] = (uint16_t)call->argl[i];
        off += call->argl[i];
    }
    s->argc = argc;
    s->nkeys = call->nkeys;
    s->script = call->script;
    s->deadline_ns = call->deadline_ns;
    /* relaxed: the queue mutex publishes both to the loop thread. */
    atomic_store_explicit(&s->refs, refs, memory_order_relaxed);
    atomic_store_explicit(&s->state, S_WAITING, memory_order_relaxed);
    *out = s;
    return 0;
}

static int enqueue(rl_redis_caller_t *c, slot_t *s)
{
    uv_mutex_lock(&c->qmu);
    if (c->stop_asked) {
        s->qnext = c->free;
        c->free = s;
        c->nfree++;
        uv_mutex_unlock(&c->qmu);
        return RL_CALL_CLOSED;
    }
    s->qnext = NULL;
    if (c->qtail != NULL)
        c->qtail->qnext = s;
    else
        c->qhead = s;
    c->qtail = s;
    uv_mutex_unlock(&c->qmu);
    uv_async_send(&c->wake); /* coalesces: one wake drains the queue */
    return 0;
}

int rl__redis_caller_send(rl_redis_caller_t *c, const rl_redis_call_t *call,
                          rl_redis_call_fn *cb, const void *ctx, size_t ctx_len)
{
    if (ctx_len > RL_CALL_CTX_MAX || cb == NULL)
        return -1;
    slot_t *s;
    int rc = take(c, call, 1, &s);
    if (rc != 0)
        return rc;
    s->cb = cb;
    s->ud = NULL;
    s->w = NULL;
    if (ctx_len > 0)
        memcpy(s->ctx, ctx, ctx_len);
    return enqueue(c, s);
}

int rl__redis_caller_wait(rl_redis_caller_t *c, const rl_redis_call_t *call,
                          rl_redis_call_fn *parse, void *ud)
{
    waiter_t w;
    if (uv_cond_init(&w.cv) != 0)
        return RL_CALL_FULL;
    slot_t *s;
    int rc = take(c, call, 2, &s);
    if (rc == 0) {
        s->cb = parse;
        s->ud = ud;
        s->w = &w;
        w.status = RL_CALL_TIMEOUT;
        rc = enqueue(c, s);
    }
    if (rc != 0) {
        uv_cond_destroy(&w.cv);
        return rc;
    }
    uint64_t deadline = call->deadline_ns;
    uv_mutex_lock(&c->wmu);
    for (;;) {
        /* acquire: DONE carries the answer's writes (also under wmu). */
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == S_DONE) {
            rc = w.status;
            break;
        }
        if (st == S_DELIVERING) { /* being answered: a short, bounded wait */
            uv_cond_wait(&w.cv, &c->wmu);
            continue;
        }
        uint64_t now = uv_hrtime();
        if (now >= deadline) {
            int exp = S_WAITING;
            /* acq_rel: exactly one of this and the loop's answer wins. */
            if (atomic_compare_exchange_strong_explicit(&s->state, &exp, S_ABANDONED,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire)) {
                rl__caller_count(c, K_TIMEOUTS);
                rc = RL_CALL_TIMEOUT;
                break;
            }
            continue;
        }
        uv_cond_timedwait(&w.cv, &c->wmu, deadline - now);
    }
    uv_mutex_unlock(&c->wmu);
    slot_release(c, s);
    uv_cond_destroy(&w.cv);
    return rc;
}

void rl__redis_caller_counters(rl_redis_caller_t *c, rl_redis_caller_counters_t *out)
{
    uint64_t v[K_N];
    for (int i = 0; i < K_N; i++)
        /* relaxed: statistics. */
        v[i] = atomic_load_explicit(&c->k[i], memory_order_relaxed);
    out->sent = v[K_SENT];
    out->replies = v[K_REPLIES];
    out->timeouts = v[K_TIMEOUTS];
    out->late = v[K_LATE];
    out->unsent = v[K_UNSENT];
    out->lost = v[K_LOST];
    out->full = v[K_FULL];
    out->stalls = v[K_STALLS];
    uv_mutex_lock(&c->qmu);
    out->in_use = c->nslots - c->nfree;
    uv_mutex_unlock(&c->qmu);
}
