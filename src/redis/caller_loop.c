/* SPDX-License-Identifier: MIT */
/*
 * The per-request client's loop thread (see caller.h, callerint.h): the
 * queued slots dispatched to their route, the deadline list, the replies
 * (EVAL again after NOSCRIPT), a stalled route reset, the connections'
 * events and SCRIPT LOAD, and the shutdown that answers what is left.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "redis/callerint.h"
#include "redis/conn.h"
#include "redis/reply.h"

static void logf_(rl_redis_caller_t *c, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void logf_(rl_redis_caller_t *c, int level, const char *fmt, ...)
{
    if (c->log == NULL)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->log(c->owner, level, line);
}

/* ---------------------------------------------------------- answers */

/* Answer s unless its waiter gave up: 1 if this call answered it. */
static int answer(rl_redis_caller_t *c, slot_t *s, int status, const redisReply *reply)
{
    int exp = S_WAITING;
    /* acquire: the submitter's writes (cb, ud, w) came through the queue
     * mutex already; acq_rel so the waiter's CAS and ours are ordered. */
    if (!atomic_compare_exchange_strong_explicit(&s->state, &exp, S_DELIVERING,
                                                 memory_order_acq_rel, memory_order_acquire))
        return 0;
    rl__caller_count(c, status == RL_CALL_REPLY     ? K_REPLIES
             : status == RL_CALL_TIMEOUT ? K_TIMEOUTS
             : status == RL_CALL_LOST    ? K_LOST
                                         : K_UNSENT);
    if (s->w == NULL) {
        s->cb(s->ctx, status, status == RL_CALL_REPLY ? reply : NULL);
        /* release: nothing reads it but the loop itself; kept for symmetry. */
        atomic_store_explicit(&s->state, S_DONE, memory_order_release);
        return 1;
    }
    if (status == RL_CALL_REPLY && s->cb != NULL)
        s->cb(s->ud, status, reply);
    uv_mutex_lock(&c->wmu);
    s->w->status = status;
    /* release: the waiter reads DONE under wmu, then status and what parse
     * wrote; the mutex orders them too. */
    atomic_store_explicit(&s->state, S_DONE, memory_order_release);
    uv_cond_signal(&s->w->cv);
    uv_mutex_unlock(&c->wmu);
    return 1;
}

/* The loop's part is over once the slot is answered (or abandoned), out of
 * hiredis and out of the deadline list: then it drops its reference. */
static void settle(rl_redis_caller_t *c, slot_t *s)
{
    if (s->loop_done || s->in_redis || s->in_dl)
        return;
    /* acquire: pairs with the waiter's CAS to ABANDONED. */
    if (atomic_load_explicit(&s->state, memory_order_acquire) == S_WAITING)
        return;
    s->loop_done = 1;
    slot_release(c, s);
}

/* ---------------------------------------------------- deadline list */

static void dl_arm(rl_redis_caller_t *c);

static void dl_remove(rl_redis_caller_t *c, slot_t *s)
{
    if (!s->in_dl)
        return;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->dl_head = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    else
        c->dl_tail = s->prev;
    s->in_dl = 0;
    s->prev = s->next = NULL;
}

/* Sorted by deadline, inserted from the tail: with one timeout for every
 * request, an append. */
static void dl_insert(rl_redis_caller_t *c, slot_t *s)
{
    slot_t *at = c->dl_tail;
    while (at != NULL && at->deadline_ns > s->deadline_ns)
        at = at->prev;
    s->prev = at;
    s->next = at != NULL ? at->next : c->dl_head;
    if (s->next != NULL)
        s->next->prev = s;
    else
        c->dl_tail = s;
    if (at != NULL)
        at->next = s;
    else
        c->dl_head = s;
    s->in_dl = 1;
    if (c->dl_head == s)
        dl_arm(c);
}

static void on_deadline(uv_timer_t *t);

static void dl_arm(rl_redis_caller_t *c)
{
    if (c->dl_head == NULL) {
        uv_timer_stop(&c->dl_timer);
        return;
    }
    uint64_t now = uv_hrtime(), d = c->dl_head->deadline_ns;
    uint64_t ms = d > now ? (d - now + 999999u) / 1000000u : 0;
    uv_timer_start(&c->dl_timer, on_deadline, ms, 0);
}

/* A route with requests in flight that has answered nothing for
 * RL_CALLER_STALL_MS is frozen or blackholed: start it over (every request
 * on it is answered, late or as lost). */
static void check_stall(rl_redis_caller_t *c, croute_t *rt)
{
    if (rt->inflight == 0 || uv_now(&c->loop) - rt->last_progress < RL_CALLER_STALL_MS)
        return;
    rl__caller_count(c, K_STALLS);
    logf_(c, RL_LOG_WARN, "no reply for 1 s: reconnecting");
    rl__redis_route_reset(&rt->route);
}

static void on_deadline(uv_timer_t *t)
{
    rl_redis_caller_t *c = t->data;
    uint64_t now = uv_hrtime();
    croute_t *stalled[8];
    unsigned nst = 0;
    uv_update_time(&c->loop);
    while (c->dl_head != NULL && c->dl_head->deadline_ns <= now) {
        slot_t *s = c->dl_head;
        dl_remove(c, s);
        answer(c, s, RL_CALL_TIMEOUT, NULL);
        if (s->rt != NULL && nst < 8 && (nst == 0 || stalled[nst - 1] != s->rt))
            stalled[nst++] = s->rt;
        settle(c, s);
    }
    for (unsigned i = 0; i < nst; i++)
        check_stall(c, stalled[i]);
    dl_arm(c);
}

/* ---------------------------------------------------------- sending */

static void on_reply(redisAsyncContext *ac, void *r, void *priv);

static int send_slot(rl_redis_caller_t *c, slot_t *s, int eval)
{
    const char *av[RL_CALL_ARGS_MAX + 3];
    size_t al[RL_CALL_ARGS_MAX + 3];
    char nk[12];
    int use_sha = !eval && c->sha[s->script][0] != '\0';
    av[0] = use_sha ? "EVALSHA" : "EVAL";
    av[1] = use_sha ? c->sha[s->script] : c->src[s->script];
    al[0] = strlen(av[0]);
    al[1] = strlen(av[1]);
    al[2] = (size_t)snprintf(nk, sizeof nk, "%d", s->nkeys);
    av[2] = nk;
    size_t off = 0;
    for (int i = 0; i < s->argc; i++) {
        av[3 + i] = s->buf + off;
        al[3 + i] = s->len[i];
        off += s->len[i];
    }
    size_t tl;
    const char *tag = rl__redis_hash_tag(s->buf, s->len[0], &tl);
    return rl__redis_route_send(&s->rt->route, tag, tl, on_reply, s, 3 + s->argc, av, al);
}

static uint32_t route_of(const rl_redis_caller_t *c, const slot_t *s)
{
    size_t tl;
    const char *tag = rl__redis_hash_tag(s->buf, s->len[0], &tl);
    uint32_t h = 2166136261u; /* FNV-1a: spreads tags, keeps one per route */
    for (size_t i = 0; i < tl; i++)
        h = (uint32_t)((uint64_t)(h ^ (unsigned char)tag[i]) * 16777619u); /* mod 2^32 */
    return h % c->pool;
}

static void dispatch(rl_redis_caller_t *c, slot_t *s)
{
    s->rt = NULL;
    s->in_redis = s->in_dl = s->loop_done = s->evaled = 0;
    s->prev = s->next = NULL;
    if (c->stopping) {
        answer(c, s, RL_CALL_CLOSED, NULL);
    } else if (uv_hrtime() >= s->deadline_ns) {
        answer(c, s, RL_CALL_TIMEOUT, NULL);
    } else {
        croute_t *rt = &c->routes[route_of(c, s)];
        size_t tl;
        const char *tag = rl__redis_hash_tag(s->buf, s->len[0], &tl);
        s->rt = rt;
        if (!rl__redis_route_can_send(&rt->route, tag, tl) || send_slot(c, s, 0) != REDIS_OK) {
            s->rt = NULL;
            answer(c, s, RL_CALL_UNSENT, NULL);
        } else {
            rl__caller_count(c, K_SENT);
            s->in_redis = 1;
            if (rt->inflight++ == 0)
                rt->last_progress = uv_now(&c->loop);
            dl_insert(c, s);
        }
    }
    settle(c, s);
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    slot_t *s = priv;
    croute_t *rt = s->rt;
    rl_redis_caller_t *c = rt->c;
    redisReply *reply = r;
    if (reply != NULL) {
        rt->last_progress = uv_now(&c->loop);
        /* acquire: as in settle. */
        if (!s->evaled && rl__redis_classify(reply) == RL_REDIS_ERR_NOSCRIPT &&
            atomic_load_explicit(&s->state, memory_order_acquire) == S_WAITING) {
            s->evaled = 1; /* the cache was flushed: EVAL loads it again */
            if (send_slot(c, s, 1) == REDIS_OK)
                return;
        }
    }
    s->in_redis = 0;
    rt->inflight--;
    dl_remove(c, s);
    if (reply == NULL)
        answer(c, s, c->stopping ? RL_CALL_CLOSED : RL_CALL_LOST, NULL);
    else if (!answer(c, s, RL_CALL_REPLY, reply))
        rl__caller_count(c, K_LATE);
    settle(c, s);
}

/* ---------------------------------------------- connection and scripts */

static void on_script(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    script_ref_t *ref = priv;
    rl_redis_caller_t *c = ref->c;
    redisReply *reply = r;
    if (reply == NULL)
        return;
    if (!rl__redis_sha_reply(reply, c->sha[ref->id]))
        logf_(c, RL_LOG_WARN, "SCRIPT LOAD failed (EVAL used instead): %.200s",
              rl__redis_reply_text(reply));
}

static void conn_connected(void *owner)
{
    croute_t *rt = owner;
    rl_redis_caller_t *c = rt->c;
    rl__redis_route_ready(&rt->route);
    for (unsigned i = 0; i < c->nscripts; i++) {
        if (c->sha[i][0] != '\0')
            continue; /* one SHA for every server; EVAL covers a cold one */
        const char *av[3] = {"SCRIPT", "LOAD", c->src[i]};
        size_t al[3] = {6, 4, strlen(c->src[i])};
        rl__redis_route_send(&rt->route, NULL, 0, on_script, &c->sref[i], 3, av, al);
    }
}

static void conn_failed(void *owner, const char *why, const char *detail)
{
    croute_t *rt = owner;
    if (rl__redis_route_attempts(&rt->route) <= 1)
        logf_(rt->c, RL_LOG_WARN, "%s: %.200s", why, detail ? detail : "");
}

static void conn_lost(void *owner) { (void)owner; }

static void conn_setup_error(void *owner, const redisReply *reply)
{
    croute_t *rt = owner;
    logf_(rt->c, RL_LOG_ERROR, "connection setup failed: %.200s",
          rl__redis_reply_text(reply));
}

static void conn_retry_scheduled(void *owner, uint64_t delay_ms)
{
    (void)owner, (void)delay_ms;
}

static int conn_stopping(void *owner)
{
    croute_t *rt = owner;
    return rt->c->stopping;
}

static const rl_redis_conn_ops_t conn_ops = {
    .connected = conn_connected,
    .failed = conn_failed,
    .lost = conn_lost,
    .setup_error = conn_setup_error,
    .retry_scheduled = conn_retry_scheduled,
    .stopping = conn_stopping,
};

/* ------------------------------------------------------ the thread */

void rl__caller_loop_shutdown(rl_redis_caller_t *c)
{
    /* Everything still waiting is answered now, before rl__redis_caller_stop
     * returns; hiredis's NULL replies then only release the slots. */
    while (c->dl_head != NULL) {
        slot_t *s = c->dl_head;
        dl_remove(c, s);
        answer(c, s, RL_CALL_CLOSED, NULL);
        settle(c, s);
    }
    uv_timer_stop(&c->dl_timer);
    for (uint32_t i = 0; i < c->pool; i++)
        rl__redis_route_close(&c->routes[i].route);
    uv_close((uv_handle_t *)&c->dl_timer, NULL);
    uv_close((uv_handle_t *)&c->wake, NULL);
}

static void on_wake(uv_async_t *a)
{
    rl_redis_caller_t *c = a->data;
    uv_mutex_lock(&c->qmu);
    slot_t *q = c->qhead;
    c->qhead = c->qtail = NULL;
    int stop = c->stop_asked;
    uv_mutex_unlock(&c->qmu);
    if (stop)
        c->stopping = 1;
    while (q != NULL) {
        slot_t *next = q->qnext;
        dispatch(c, q);
        q = next;
    }
    if (stop)
        rl__caller_loop_shutdown(c);
}

void *rl__caller_thread_main(void *arg)
{
    rl_redis_caller_t *c = arg;
    for (uint32_t i = 0; i < c->pool; i++)
        rl__redis_route_connect(&c->routes[i].route);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    return NULL;
}

int rl__caller_loop_init(rl_redis_caller_t *c, const rl_redis_caller_cfg_t *cfg, int *route_rc)
{
    if (uv_mutex_init(&c->qmu) != 0)
        return RL_ENOMEM;
    if (uv_mutex_init(&c->wmu) != 0 || uv_loop_init(&c->loop) != 0) {
        uv_mutex_destroy(&c->qmu);
        return RL_ENOMEM;
    }
    uv_async_init(&c->loop, &c->wake, on_wake);
    uv_timer_init(&c->loop, &c->dl_timer);
    c->wake.data = c->dl_timer.data = c;
    int rc = 0;
    for (uint32_t i = 0; i < c->pool && rc == 0; i++) {
        croute_t *rt = &c->routes[i];
        rt->c = c;
        /* The URL picks the backend (single, Cluster, Sentinel); the
         * caller's scripts are its own (EVAL after NOSCRIPT), so a backend
         * that adds a server loads nothing for it. */
        rl_redis_route_cfg_t rc_cfg = {
            .loop = &c->loop,
            .alloc = &c->alloc,
            .url = &c->url,
            .rng = &c->rng,
            .backoff_cap_ms = cfg->backoff_cap_ms,
            .ops = &conn_ops,
            .owner = rt,
            .scripts = NULL,
        };
        rc = rl__redis_route_init(&rt->route, &rc_cfg);
        if (rc != 0)
            c->pool = i; /* only the routes made are closed below */
    }
    *route_rc = rc;
    return 0;
}
