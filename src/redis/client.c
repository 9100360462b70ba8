/* SPDX-License-Identifier: MIT */
/*
 * The per-request client (see client.h). Calls from other threads are
 * queued under the client's mutex and handed to the loop with
 * uv_async_send; a blocking caller waits on the client's condition for its
 * call's state to become DONE. Who frees a call: the caller once it saw
 * DONE; the loop thread when the caller had already given up (ABANDONED),
 * so a reply never writes into a stack frame that is gone.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>
#include "redis/client.h"
#include "redis/route.h"
#include "redis/scripts.h"
#include "redis/reply.h"
#include "alloc.h"

enum { CALL_QUEUED, CALL_SENT, CALL_DONE, CALL_ABANDONED };

typedef struct call {
    struct call *next;
    rl_redis_client_t *c;
    size_t bytes;
    unsigned script;
    int argc; /* 3 + the caller's args: EVAL(SHA), script, numkeys, ... */
    const char **argv;
    size_t *argl;
    const char *tag;
    size_t tag_len;
    int blocking;
    int state; /* CALL_*: under the client's mutex for a blocking call */
    int rc;
    int evaled; /* already sent again as EVAL after NOSCRIPT */
    rl_redis_reply_fn *fn;
    rl_redis_done_fn *done;
    void *priv;
} call_t;

struct rl_redis_client {
    uv_loop_t loop;
    uv_async_t wake;
    uv_timer_t timer;
    uv_thread_t thread;
    rl_redis_route_t route;
    rl_redis_scripts_t scripts;
    rl_redisurl_t url;
    const rl_allocator_t *alloc;
    uint64_t rng;
    const rl_redis_client_ops_t *ops;
    void *owner;
    uv_mutex_t mu; /* the queue and blocking calls' states */
    uv_cond_t cv;  /* a blocking call is DONE */
    call_t *head, *tail;
    _Atomic int up;
    _Atomic int stopping;
    _Atomic int reset_wanted;
    int closed; /* loop thread: handles closed */
};

static void free_call(call_t *k) { rl__free(k->c->alloc, k, k->bytes, 8); }

/* One allocation: the call, its argv and argl, then the bytes of the tag,
 * the numkeys digits and the caller's args (copied: the caller's may be
 * gone by the time the loop sends, for a call it gave up on). */
static call_t *make_call(rl_redis_client_t *c, unsigned script, const char *tag, size_t tag_len,
                         int nkeys, int nargs, const char *const *args, const size_t *argl)
{
    int argc = 3 + nargs;
    size_t data = tag_len + 16;
    for (int i = 0; i < nargs; i++)
        data += argl[i];
    size_t head = (sizeof(call_t) + 7) / 8 * 8;
    size_t arrays = (size_t)argc * (sizeof(char *) + sizeof(size_t));
    size_t bytes = head + arrays + data;
    unsigned char *p = rl__calloc(c->alloc, bytes, 8);
    if (p == NULL)
        return NULL;
    call_t *k = (call_t *)(void *)p;
    k->c = c;
    k->bytes = bytes;
    k->script = script;
    k->argc = argc;
    k->argv = (const char **)(void *)(p + head);
    k->argl = (size_t *)(void *)(p + head + (size_t)argc * sizeof(char *));
    char *d = (char *)(p + head + arrays);
    memcpy(d, tag, tag_len);
    k->tag = d;
    k->tag_len = tag_len;
    d += tag_len;
    /* numkeys: decimal digits of a small non-negative int */
    char digits[16];
    int nd = 0;
    unsigned v = (unsigned)nkeys;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (int i = 0; i < nd; i++)
        d[i] = digits[nd - 1 - i];
    k->argv[2] = d;
    k->argl[2] = (size_t)nd;
    d += nd;
    for (int i = 0; i < nargs; i++) {
        memcpy(d, args[i], argl[i]);
        k->argv[3 + i] = d;
        k->argl[3 + i] = argl[i];
        d += argl[i];
    }
    return k;
}

/* The call's end. A blocking caller that gave up has left it to us. */
static void finish(call_t *k, int rc, const redisReply *reply)
{
    rl_redis_client_t *c = k->c;
    if (!k->blocking) {
        k->done(k->priv, rc, rc == RL_REDIS_CALL_OK ? reply : NULL);
        free_call(k);
        return;
    }
    uv_mutex_lock(&c->mu);
    if (k->state == CALL_ABANDONED) {
        uv_mutex_unlock(&c->mu);
        free_call(k);
        return;
    }
    if (rc == RL_REDIS_CALL_OK)
        k->fn(k->priv, reply);
    k->rc = rc;
    k->state = CALL_DONE;
    uv_cond_broadcast(&c->cv);
    uv_mutex_unlock(&c->mu);
}

static void dispatch(rl_redis_client_t *c, call_t *k);

static void load_scripts(rl_redis_client_t *c)
{
    for (unsigned i = 0; i < c->scripts.n; i++)
        if (c->route.conn.ac != NULL && !rl__redis_scripts_ready(&c->scripts, i) &&
            !rl__redis_scripts_loading(&c->scripts, i))
            rl__redis_scripts_load(&c->scripts, c->route.conn.ac, i, uv_now(&c->loop));
}

static void on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    call_t *k = priv;
    redisReply *reply = r;
    if (reply == NULL) {
        finish(k, RL_REDIS_CALL_DOWN, NULL);
        return;
    }
    if (rl__redis_classify(reply) == RL_REDIS_ERR_NOSCRIPT && !k->evaled &&
        reply->type == REDIS_REPLY_ERROR) {
        /* The server's script cache was flushed: this call goes again as
         * EVAL (not ready any more), and the script is loaded again. */
        rl__redis_scripts_forget(&k->c->scripts, k->script);
        k->evaled = 1;
        load_scripts(k->c);
        dispatch(k->c, k);
        return;
    }
    finish(k, RL_REDIS_CALL_OK, reply);
}

static void dispatch(rl_redis_client_t *c, call_t *k)
{
    if (c->closed || !rl__redis_route_can_send(&c->route, k->tag, k->tag_len)) {
        finish(k, RL_REDIS_CALL_DOWN, NULL);
        return;
    }
    const rl_redis_script_t *s = &c->scripts.s[k->script];
    if (rl__redis_scripts_ready(&c->scripts, k->script)) {
        k->argv[0] = "EVALSHA";
        k->argl[0] = 7;
        k->argv[1] = s->sha;
        k->argl[1] = 40;
    } else {
        k->argv[0] = "EVAL";
        k->argl[0] = 4;
        k->argv[1] = s->source;
        k->argl[1] = strlen(s->source);
    }
    if (rl__redis_route_send(&c->route, k->tag, k->tag_len, on_reply, k, k->argc, k->argv,
                             k->argl) != REDIS_OK)
        finish(k, RL_REDIS_CALL_DOWN, NULL);
}

/* Take the queue; calls their callers gave up on are freed unsent. */
static void drain(rl_redis_client_t *c)
{
    uv_mutex_lock(&c->mu);
    call_t *k = c->head;
    c->head = c->tail = NULL;
    call_t *send = NULL, **link = &send;
    while (k != NULL) {
        call_t *next = k->next;
        k->next = NULL;
        if (k->state == CALL_ABANDONED) {
            free_call(k);
        } else {
            k->state = CALL_SENT;
            *link = k;
            link = &k->next;
        }
        k = next;
    }
    uv_mutex_unlock(&c->mu);
    while (send != NULL) {
        call_t *next = send->next;
        dispatch(c, send);
        send = next;
    }
}

static void shutdown_loop(rl_redis_client_t *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    /* relaxed: a hint for callers; the queue is what they wait on. */
    atomic_store_explicit(&c->up, 0, memory_order_relaxed);
    rl__redis_route_close(&c->route); /* sent calls finish DOWN */
    drain(c);                         /* queued ones too (closed) */
    uv_close((uv_handle_t *)&c->timer, NULL);
    uv_close((uv_handle_t *)&c->wake, NULL);
}

static void on_wake(uv_async_t *a)
{
    rl_redis_client_t *c = a->data;
    /* relaxed: the flags themselves are the messages; uv_async_send
     * orders what the sender wrote before it. */
    if (atomic_load_explicit(&c->stopping, memory_order_relaxed)) {
        shutdown_loop(c);
        return;
    }
    if (atomic_exchange_explicit(&c->reset_wanted, 0, memory_order_relaxed) &&
        c->route.conn.ac != NULL)
        rl__redis_client_reset(c);
    drain(c);
    c->ops->woken(c->owner);
}

static void on_timer(uv_timer_t *t)
{
    rl_redis_client_t *c = t->data;
    c->ops->woken(c->owner);
}

/* ------------------------------------------------- the connection's events */

static void conn_connected(void *owner)
{
    rl_redis_client_t *c = owner;
    /* relaxed: a hint read by callers before they queue a call. */
    atomic_store_explicit(&c->up, 1, memory_order_relaxed);
    load_scripts(c);
    c->ops->up(c->owner);
}

static void conn_gone(rl_redis_client_t *c)
{
    /* relaxed: as in conn_connected. */
    atomic_store_explicit(&c->up, 0, memory_order_relaxed);
    rl__redis_scripts_reset(&c->scripts);
    if (!c->closed)
        c->ops->down(c->owner);
}

static void conn_failed(void *owner, const char *why, const char *detail)
{
    (void)why, (void)detail;
    conn_gone(owner);
}

static void conn_lost(void *owner) { conn_gone(owner); }

static void conn_setup_error(void *owner, const redisReply *reply)
{
    /* AUTH or SELECT refused: the sync thread logs and counts it for the
     * instance (same redis_url); this client's calls fail with the error. */
    (void)owner, (void)reply;
}

static void conn_retry_scheduled(void *owner, uint64_t delay_ms) { (void)owner, (void)delay_ms; }

static int conn_stopping(void *owner)
{
    rl_redis_client_t *c = owner;
    /* relaxed: stop requests are handled by on_wake; this only avoids work. */
    return atomic_load_explicit(&c->stopping, memory_order_relaxed);
}

static const rl_redis_conn_ops_t conn_ops = {
    .connected = conn_connected,
    .failed = conn_failed,
    .lost = conn_lost,
    .setup_error = conn_setup_error,
    .retry_scheduled = conn_retry_scheduled,
    .stopping = conn_stopping,
};

static void script_loaded(void *owner, unsigned id, const redisReply *reply)
{
    rl_redis_client_t *c = owner;
    (void)id, (void)reply;
    for (unsigned i = 0; i < c->scripts.n; i++)
        if (!rl__redis_scripts_ready(&c->scripts, i))
            return;
    rl__redis_conn_ready(&c->route.conn);
}

/* ---------------------------------------------------------------- thread */

static void thread_main(void *arg)
{
    rl_redis_client_t *c = arg;
    rl__redis_route_connect(&c->route);
    uv_run(&c->loop, UV_RUN_DEFAULT);
}

static void free_client(rl_redis_client_t *c)
{
    uv_cond_destroy(&c->cv);
    uv_mutex_destroy(&c->mu);
    rl__free(c->alloc, c, sizeof *c, 64);
}

int rl__redis_client_start(rl_redis_client_t **out, const rl_allocator_t *alloc,
                           const rl_redisurl_t *url, uint32_t backoff_cap_ms,
                           const char *const *sources, unsigned n,
                           const rl_redis_client_ops_t *ops, void *owner)
{
    *out = NULL;
    rl_redis_client_t *c = rl__calloc(alloc, sizeof *c, 64);
    if (c == NULL)
        return RL_ENOMEM;
    c->alloc = alloc;
    c->url = *url;
    c->ops = ops;
    c->owner = owner;
    if (getrandom(&c->rng, sizeof c->rng, 0) != (ssize_t)sizeof c->rng) {
        rl__free(alloc, c, sizeof *c, 64);
        return RL_ENOMEM;
    }
    c->rng |= 1; /* xorshift's state must not be zero */
    if (uv_mutex_init(&c->mu) != 0) {
        rl__free(alloc, c, sizeof *c, 64);
        return RL_ENOMEM;
    }
    if (uv_cond_init(&c->cv) != 0) {
        uv_mutex_destroy(&c->mu);
        rl__free(alloc, c, sizeof *c, 64);
        return RL_ENOMEM;
    }
    atomic_init(&c->up, 0);
    atomic_init(&c->stopping, 0);
    atomic_init(&c->reset_wanted, 0);
    if (uv_loop_init(&c->loop) != 0) {
        free_client(c);
        return RL_ENOMEM;
    }
    uv_async_init(&c->loop, &c->wake, on_wake);
    uv_timer_init(&c->loop, &c->timer);
    c->wake.data = c->timer.data = c;
    rl__redis_conn_init(&c->route.conn, &c->loop, alloc, &c->url, &c->rng, backoff_cap_ms,
                        &conn_ops, c);
    rl__redis_route_single(&c->route);
    rl__redis_scripts_init(&c->scripts, sources, n, script_loaded, c);
    /* Every signal blocked in the thread (the mask is inherited at
     * creation): the host's handlers run on its own threads only. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = uv_thread_create(&c->thread, thread_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        c->closed = 1;
        rl__redis_route_close(&c->route);
        uv_close((uv_handle_t *)&c->timer, NULL);
        uv_close((uv_handle_t *)&c->wake, NULL);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        uv_loop_close(&c->loop);
        free_client(c);
        return RL_ENOMEM;
    }
    *out = c;
    return 0;
}

void rl__redis_client_stop(rl_redis_client_t *c)
{
    if (c == NULL)
        return;
    /* relaxed: published to the loop thread by uv_async_send. */
    atomic_store_explicit(&c->stopping, 1, memory_order_relaxed);
    uv_async_send(&c->wake);
    uv_thread_join(&c->thread);
    uv_loop_close(&c->loop);
    free_client(c);
}

void rl__redis_client_forget(rl_redis_client_t *c)
{
    if (c != NULL)
        rl__free(c->alloc, c, sizeof *c, 64);
}

int rl__redis_client_up(rl_redis_client_t *c)
{
    /* relaxed: a hint; a call queued as the connection goes finishes DOWN. */
    return atomic_load_explicit(&c->up, memory_order_relaxed);
}

void rl__redis_client_wake(rl_redis_client_t *c) { uv_async_send(&c->wake); }

void rl__redis_client_wake_after(rl_redis_client_t *c, uint64_t delay_ms)
{
    if (!c->closed)
        uv_timer_start(&c->timer, on_timer, delay_ms, 0);
}

void rl__redis_client_reset(rl_redis_client_t *c)
{
    if (!c->closed)
        rl__redis_route_reset(&c->route);
}

int rl__redis_client_call(rl_redis_client_t *c, unsigned script, const char *tag,
                          size_t tag_len, int nkeys, int nargs, const char *const *args,
                          const size_t *argl, uint32_t deadline_ms, rl_redis_reply_fn *fn,
                          void *priv)
{
    if (!rl__redis_client_up(c))
        return RL_REDIS_CALL_DOWN;
    call_t *k = make_call(c, script, tag, tag_len, nkeys, nargs, args, argl);
    if (k == NULL)
        return RL_REDIS_CALL_NOMEM;
    k->blocking = 1;
    k->fn = fn;
    k->priv = priv;
    k->state = CALL_QUEUED;
    uint64_t until = uv_hrtime() + (uint64_t)deadline_ms * 1000000u;
    uv_mutex_lock(&c->mu);
    if (c->tail != NULL)
        c->tail->next = k;
    else
        c->head = k;
    c->tail = k;
    uv_mutex_unlock(&c->mu);
    uv_async_send(&c->wake);

    uv_mutex_lock(&c->mu);
    while (k->state != CALL_DONE) {
        uint64_t now = uv_hrtime();
        if (now >= until)
            break;
        uv_cond_timedwait(&c->cv, &c->mu, until - now);
    }
    if (k->state == CALL_DONE) {
        int rc = k->rc;
        uv_mutex_unlock(&c->mu);
        free_call(k);
        return rc;
    }
    k->state = CALL_ABANDONED; /* the loop thread frees it */
    uv_mutex_unlock(&c->mu);
    /* relaxed: the flag is the message; uv_async_send orders it. */
    atomic_store_explicit(&c->reset_wanted, 1, memory_order_relaxed);
    uv_async_send(&c->wake);
    return RL_REDIS_CALL_TIMEOUT;
}

void rl__redis_client_send(rl_redis_client_t *c, unsigned script, const char *tag,
                           size_t tag_len, int nkeys, int nargs, const char *const *args,
                           const size_t *argl, rl_redis_done_fn *done, void *priv)
{
    call_t *k = make_call(c, script, tag, tag_len, nkeys, nargs, args, argl);
    if (k == NULL) {
        done(priv, RL_REDIS_CALL_NOMEM, NULL);
        return;
    }
    k->done = done;
    k->priv = priv;
    k->state = CALL_SENT;
    dispatch(c, k);
}
