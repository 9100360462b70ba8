/* SPDX-License-Identifier: MIT */
/*
 * ngx_http_ratelimit_module: exact limits and quotas without blocking a
 * worker.
 *
 * A `ratelimit` rule on a mode=exact limit goes to Redis with
 * rl_check_async, one on a quota with rl_quota_charge_async (the same
 * record, the same completion path); the request is suspended (the phase handler returns
 * NGX_AGAIN) until the answer comes back. The answer's callback runs on the
 * library's exact thread, which must never touch nginx: it only fills a
 * record this module allocated (not in the request's pool), queues it
 * under a mutex, and writes an eventfd. The eventfd is an nginx connection
 * of the worker; its read handler takes the queue and, on the worker's own
 * thread, resumes each request that still exists.
 *
 * A request that ends while it waits (the client closed; nginx frees its
 * pool) detaches its record in a pool cleanup handler: the record outlives
 * the request and is freed when its answer arrives, never resumed into
 * freed memory. A record's `r` is read and written only on the worker
 * thread, so the detach needs no lock.
 */
#include "ngx_http_ratelimit.h"

#include <pthread.h>
#include <sys/eventfd.h>

/* How long past exact_timeout_ms a record may stay unanswered before the
 * request goes on without it (the library answers by exact_timeout_ms plus
 * its thread's scheduling; this only guards against a lost answer). The
 * timer also keeps a gracefully exiting worker alive while requests wait. */
#define RL_NGX_WATCHDOG_MS 10000

struct ngx_http_ratelimit_pending_s {
    /* Exact thread, before the record is queued; worker, after it is taken. */
    int rc;
    ngx_flag_t has_d;
    rl_decision_t d;
    ngx_flag_t is_quota;                /* set by the worker before sending */
    rl_quota_result_t qr;               /* a quota's answer */
    ngx_http_ratelimit_pending_t *next; /* the completion queue, under lock */
    struct ngx_http_ratelimit_exact_s *chan;
    /* Worker only. */
    ngx_http_request_t *r;              /* NULL once the request is gone */
    ngx_event_t watchdog;
};

typedef struct ngx_http_ratelimit_exact_s {
    pthread_mutex_t lock;
    ngx_http_ratelimit_pending_t *done; /* answered, newest first; under lock */
    ngx_connection_t *c;                /* the eventfd's connection */
    int fd;
    ngx_http_ratelimit_main_conf_t *mcf;
} ngx_http_ratelimit_exact_t;

/* The exact thread: hand the answer to the worker, touching no nginx state. */
static void
ngx_http_ratelimit_queue(ngx_http_ratelimit_pending_t *p)
{
    ngx_http_ratelimit_exact_t *chan = p->chan;
    uint64_t one = 1;
    ssize_t n;

    /* The mutex publishes the record's fields to the worker that takes it. */
    pthread_mutex_lock(&chan->lock);
    p->next = chan->done;
    chan->done = p;
    pthread_mutex_unlock(&chan->lock);
    /* The record is the worker's from here on. An eventfd write fails only
     * when the counter would overflow (2^64 - 1 pending wakeups): then the
     * worker has a wakeup pending anyway. */
    do {
        n = write(chan->fd, &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
}

static void
ngx_http_ratelimit_exact_done(void *ud, int rc, const rl_decision_t *d)
{
    ngx_http_ratelimit_pending_t *p = ud;

    p->rc = rc;
    p->has_d = d != NULL;
    if (d != NULL) {
        p->d = *d; /* this library's own rl_decision_t: the same size */
    }
    ngx_http_ratelimit_queue(p);
}

/* The exact thread, for a quota's charge: the same hand-over. */
static void
ngx_http_ratelimit_quota_done(void *ud, int rc, const rl_quota_result_t *q)
{
    ngx_http_ratelimit_pending_t *p = ud;

    p->rc = rc;
    p->has_d = 0;
    p->qr = *q; /* this library's own rl_quota_result_t: the same size */
    ngx_http_ratelimit_queue(p);
}

static void
ngx_http_ratelimit_forget(ngx_http_ratelimit_pending_t *p)
{
    ngx_http_ratelimit_ctx_t *ctx;

    if (p->r != NULL) {
        ctx = ngx_http_get_module_ctx(p->r, ngx_http_ratelimit_module);
        ctx->pending = NULL;
        p->chan->mcf->exact_pending--;
        p->r = NULL;
    }
    if (p->watchdog.timer_set) {
        ngx_del_timer(&p->watchdog);
    }
}

/* The worker: one answered request goes on from where it stopped. */
static void
ngx_http_ratelimit_resume(ngx_http_request_t *r)
{
    ngx_connection_t *c = r->connection;

    r->read_event_handler = ngx_http_block_reading;
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
    ngx_http_run_posted_requests(c);
}

static void
ngx_http_ratelimit_exact_read(ngx_event_t *rev)
{
    ngx_connection_t *c = rev->data;
    ngx_http_ratelimit_exact_t *chan = c->data;
    ngx_http_ratelimit_pending_t *p, *next, *fifo = NULL;
    ngx_http_ratelimit_ctx_t *ctx;
    ngx_http_request_t *r;
    uint64_t count;

    /* Nonblocking: EAGAIN once the counter is zero. */
    while (read(chan->fd, &count, sizeof(count)) > 0) {
        /* drained */
    }
    pthread_mutex_lock(&chan->lock);
    p = chan->done;
    chan->done = NULL;
    pthread_mutex_unlock(&chan->lock);
    for (; p != NULL; p = next) { /* oldest first */
        next = p->next;
        p->next = fifo;
        fifo = p;
    }
    for (p = fifo; p != NULL; p = next) {
        next = p->next;
        r = p->r;
        if (r != NULL) {
            ctx = ngx_http_get_module_ctx(r, ngx_http_ratelimit_module);
            ctx->answered = 1;
            ctx->rc = p->rc;
            ctx->has_d = p->has_d;
            if (p->has_d) {
                ctx->d = p->d;
            }
            if (p->is_quota) {
                ctx->qr = p->qr;
            }
        }
        ngx_http_ratelimit_forget(p);
        ngx_free(p);
        if (r != NULL) {
            ngx_http_ratelimit_resume(r);
        }
    }
}

/* The request's pool is being destroyed while its answer is still owed:
 * the record stays, detached, until the answer comes. What the request
 * charged locally is given back (it was never served); what Redis charges
 * cannot be (a timeout or a late answer does not mean "not charged"). */
static void
ngx_http_ratelimit_cleanup(void *data)
{
    ngx_http_ratelimit_ctx_t *ctx = data;
    ngx_http_ratelimit_pending_t *p = ctx->pending;

    if (p == NULL) {
        return;
    }
    ngx_http_ratelimit_refund(p->r, ctx);
    ngx_http_ratelimit_forget(p);
}

/* No answer long past the deadline: go on as for any library error
 * (allowed, $ratelimit_status ERROR); the record waits for its answer. */
static void
ngx_http_ratelimit_watchdog(ngx_event_t *ev)
{
    ngx_http_ratelimit_pending_t *p = ev->data;
    ngx_http_request_t *r = p->r;
    ngx_http_ratelimit_ctx_t *ctx;

    if (r == NULL) {
        return;
    }
    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "ratelimit: no answer from Redis (exact check or quota) after %M ms: "
                  "request allowed",
                  p->chan->mcf->exact_timeout + RL_NGX_WATCHDOG_MS);
    ctx = ngx_http_get_module_ctx(r, ngx_http_ratelimit_module);
    ngx_http_ratelimit_forget(p);
    ctx->answered = 1;
    ctx->rc = RL_NGX_NO_ANSWER;
    ctx->has_d = 0;
    ngx_http_ratelimit_resume(r);
}

/* A record for one request's Redis call, its request's cleanup set. */
static ngx_http_ratelimit_pending_t *
ngx_http_ratelimit_record(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx)
{
    ngx_http_ratelimit_pending_t *p;
    ngx_pool_cleanup_t *cln;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    p = ngx_calloc(sizeof(*p), r->connection->log);
    if (cln == NULL || p == NULL) {
        ngx_free(p);
        return NULL;
    }
    cln->handler = ngx_http_ratelimit_cleanup;
    cln->data = ctx;
    p->chan = ctx->mcf->exact;
    return p;
}

static void ngx_http_ratelimit_suspend(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                                       ngx_http_ratelimit_pending_t *p);

int
ngx_http_ratelimit_exact_check(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                               const rl_request_t *req)
{
    ngx_http_ratelimit_pending_t *p;
    int rc;

    p = ngx_http_ratelimit_record(r, ctx);
    if (p == NULL) {
        return RL_ENOMEM;
    }
    rc = rl_check_async(ctx->mcf->rl, req->limit, req->key, req->key_len, req->cost,
                        ngx_http_ratelimit_exact_done, p);
    if (rc != RL_PENDING) {
        ngx_free(p); /* decided inline (or refused): the callback never runs */
        return rc;
    }
    ngx_http_ratelimit_suspend(r, ctx, p);
    return RL_PENDING;
}

/* A quota's charge, the same way; inline answers (on_failure when the
 * library has no room in flight) go to *inl. */
int
ngx_http_ratelimit_quota_charge(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                                int quota, const ngx_str_t *key, uint64_t cost,
                                const u_char *rid, size_t rid_len, rl_quota_result_t *inl)
{
    ngx_http_ratelimit_pending_t *p;
    int rc;

    p = ngx_http_ratelimit_record(r, ctx);
    if (p == NULL) {
        return RL_ENOMEM;
    }
    p->is_quota = 1;
    rc = rl_quota_charge_async(ctx->mcf->rl, quota, key->data, key->len, cost, rid, rid_len,
                               ngx_http_ratelimit_quota_done, p);
    if (rc != RL_PENDING) {
        ngx_free(p);
        rl_quota_result_init(inl);
        inl->allowed = rc == RL_ALLOW ? RL_ALLOW : RL_DENY;
        inl->flags = RL_FLAG_DEGRADED;
        return rc;
    }
    ngx_http_ratelimit_suspend(r, ctx, p);
    return RL_PENDING;
}

static void
ngx_http_ratelimit_suspend(ngx_http_request_t *r, ngx_http_ratelimit_ctx_t *ctx,
                           ngx_http_ratelimit_pending_t *p)
{
    p->r = r;
    ctx->pending = p;
    ctx->mcf->exact_pending++;
    p->watchdog.handler = ngx_http_ratelimit_watchdog;
    p->watchdog.data = p;
    p->watchdog.log = r->connection->log;
    ngx_add_timer(&p->watchdog, ctx->mcf->exact_timeout + RL_NGX_WATCHDOG_MS);
    /* Like limit_req's delay: a client that closes meanwhile ends the
     * request (and the cleanup above detaches it). */
    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_request_empty_handler;
}

ngx_int_t
ngx_http_ratelimit_exact_start(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_http_ratelimit_exact_t *chan;
    ngx_connection_t *c;
    int fd;

    chan = ngx_pcalloc(cycle->pool, sizeof(*chan));
    if (chan == NULL) {
        return NGX_ERROR;
    }
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) {
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno, "ratelimit: eventfd() failed");
        return NGX_ERROR;
    }
    if (pthread_mutex_init(&chan->lock, NULL) != 0) {
        close(fd);
        return NGX_ERROR;
    }
    c = ngx_get_connection(fd, cycle->log);
    if (c == NULL) {
        pthread_mutex_destroy(&chan->lock);
        close(fd);
        return NGX_ERROR;
    }
    chan->fd = fd;
    chan->c = c;
    chan->mcf = mcf;
    c->data = chan;
    c->read->handler = ngx_http_ratelimit_exact_read;
    c->read->log = cycle->log;
    /* Level-triggered where the event method has the choice: the handler
     * drains the counter, so a missed edge could never strand an answer. */
    if (ngx_add_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_free_connection(c);
        pthread_mutex_destroy(&chan->lock);
        close(fd);
        return NGX_ERROR;
    }
    mcf->exact = chan;
    return NGX_OK;
}

/* After rl_close, which has answered every check still in flight: free
 * their records (their requests, if any are left, end with the worker). */
void
ngx_http_ratelimit_exact_stop(ngx_cycle_t *cycle, ngx_http_ratelimit_main_conf_t *mcf)
{
    ngx_http_ratelimit_exact_t *chan = mcf->exact;
    ngx_http_ratelimit_pending_t *p, *next;

    (void) cycle;
    if (chan == NULL) {
        return;
    }
    pthread_mutex_lock(&chan->lock);
    p = chan->done;
    chan->done = NULL;
    pthread_mutex_unlock(&chan->lock);
    for (; p != NULL; p = next) {
        next = p->next;
        ngx_http_ratelimit_forget(p);
        ngx_free(p);
    }
    ngx_close_connection(chan->c); /* closes the eventfd */
    pthread_mutex_destroy(&chan->lock);
    mcf->exact = NULL;
}
