/* SPDX-License-Identifier: MIT */
/*
 * A Redis connection (see conn.h): hiredis async, attached to the loop with
 * redis/uv.c, deadlines enforced with uv timers (hiredis 0.14 has no async
 * timeouts).
 */
#include <stdio.h>
#include "redis/conn.h"
#include "redis/reply.h"
#include "redis/tls.h"
#include "redis/uv.h"
#include "base/backoff.h"

static void on_retry(uv_timer_t *timer)
{
    rl_redis_conn_t *c = timer->data;
    if (c->ac == NULL)
        rl__redis_conn_open(c);
}

/* Reconnect after a random delay up to min(cap, 50 ms x 2^attempt): full
 * jitter, so nodes that lost Redis together do not come back together. */
void rl__redis_conn_schedule(rl_redis_conn_t *c)
{
    if (c->ops->stopping(c->owner) || uv_is_active((uv_handle_t *)&c->retry_timer))
        return;
    uint64_t delay = rl__backoff_ms(c->rng, c->attempt, c->backoff_cap_ms);
    c->attempt++;
    c->ops->retry_scheduled(c->owner, delay);
    uv_timer_start(&c->retry_timer, on_retry, delay, 0);
}

void rl__redis_conn_drop(rl_redis_conn_t *c)
{
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;
        c->ac = NULL;
        c->tls = NULL;
        redisAsyncFree(ac); /* pending callbacks get NULL replies; on_disconnect runs */
    }
    rl__redis_conn_schedule(c);
}

/* The last setup reply: the connection is the one the URL names. */
static void setup_answered(rl_redis_conn_t *c)
{
    if (c->setup_pending > 0 && --c->setup_pending > 0)
        return;
    uv_timer_stop(&c->connect_timer);
    c->connecting = 0;
    c->ops->connected(c->owner);
}

static void on_setup_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    rl_redis_conn_t *c = priv;
    redisReply *reply = r;
    if (reply == NULL)
        return; /* the context is going: on_disconnect tells the owner */
    if (reply->type == REDIS_REPLY_ERROR)
        c->ops->setup_error(c->owner, reply);
    setup_answered(c);
}

/* A refused SELECT fails the connection: the owner's commands would
 * otherwise run in db 0, a db the URL did not name. */
static void on_select_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    rl_redis_conn_t *c = priv;
    redisReply *reply = r;
    if (reply == NULL)
        return;
    if (reply->type != REDIS_REPLY_ERROR) {
        setup_answered(c);
        return;
    }
    c->ops->setup_error(c->owner, reply);
    char detail[256];
    snprintf(detail, sizeof detail, "SELECT %d (the redis_url's db): %.200s", c->url->db,
             rl__redis_reply_text(reply));
    uv_timer_stop(&c->connect_timer);
    c->connecting = 0;
    c->ops->failed(c->owner, "redis_url's db refused", detail);
    rl__redis_conn_drop(c);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    rl_redis_conn_t *c = ac->data;
    if (status != REDIS_OK) {
        uv_timer_stop(&c->connect_timer);
        c->connecting = 0;
        c->ac = NULL; /* hiredis frees a context whose connect failed */
        void *tls = c->tls;
        c->tls = NULL;
        char detail[512];
        if (tls != NULL) /* the handshake may have begun: say how far it got */
            rl__redis_tls_why(tls, &ac->c, &c->url->tls, c->host, c->port, detail, sizeof detail);
        c->ops->failed(c->owner, tls != NULL ? "TLS handshake failed" : "cannot connect",
                       tls != NULL ? detail : ac->errstr);
        rl__redis_conn_schedule(c);
        return;
    }
    /* Pipelined: AUTH, SELECT and SETNAME, in order (SETNAME after AUTH:
     * an unauthenticated client may not name itself); the owner hears of
     * the connection once they are answered, within the connect deadline. */
    const rl_redisurl_t *u = c->url;
    c->setup_pending = 1; /* held until every command below is queued */
    if (u->password[0] != '\0') {
        c->setup_pending++;
        if (u->user[0] != '\0')
            redisAsyncCommand(c->ac, on_setup_reply, c, "AUTH %s %s", u->user, u->password);
        else
            redisAsyncCommand(c->ac, on_setup_reply, c, "AUTH %s", u->password);
    }
    if (u->db != 0) {
        c->setup_pending++;
        redisAsyncCommand(c->ac, on_select_reply, c, "SELECT %d", u->db);
    }
    char name[RL_REDIS_CONN_NAME_MAX];
    rl__redis_client_name(name, c->ops->client_name != NULL ? c->ops->client_name(c->owner) : NULL);
    if (name[0] != '\0') {
        c->setup_pending++;
        redisAsyncCommand(c->ac, on_setup_reply, c, "CLIENT SETNAME %s", name);
    }
    setup_answered(c);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    rl_redis_conn_t *c = ac->data;
    (void)status;
    void *tls = c->tls;
    int connecting = c->connecting;
    c->ac = NULL;
    c->tls = NULL;
    c->connecting = 0;
    uv_timer_stop(&c->connect_timer);
    if (tls != NULL && connecting) {
        /* Gone before the setup was answered: the handshake failed, or the
         * server refused our certificate once it was done (TLS 1.3 says
         * so only on the first read). A connect that failed, and why. */
        char detail[512];
        rl__redis_tls_why(tls, &ac->c, &c->url->tls, c->host, c->port, detail, sizeof detail);
        c->ops->failed(c->owner, "TLS handshake failed", detail);
        rl__redis_conn_schedule(c);
        return;
    }
    c->ops->lost(c->owner);
    rl__redis_conn_schedule(c); /* not when stopping */
}

static void on_connect_deadline(uv_timer_t *timer)
{
    rl_redis_conn_t *c = timer->data;
    if (c->ac != NULL && c->connecting) {
        c->connecting = 0;
        if (c->tls != NULL && (c->ac->c.flags & REDIS_CONNECTED) && !rl__redis_tls_done(c->tls)) {
            char detail[320];
            snprintf(detail, sizeof detail, "TLS with %s:%d: handshake timed out after %d ms "
                     "(is the port a TLS port?)", c->host, c->port, RL_REDIS_TLS_CONNECT_DEADLINE_MS);
            c->ops->failed(c->owner, "TLS handshake timed out", detail);
        } else {
            c->ops->failed(c->owner, "connect timed out", NULL);
        }
        rl__redis_conn_drop(c);
    }
}

void rl__redis_conn_open(rl_redis_conn_t *c)
{
    const rl_redisurl_t *u = c->url;
    redisAsyncContext *ac = u->kind == RL_REDISURL_UNIX ? redisAsyncConnectUnix(u->path)
                                                        : redisAsyncConnect(c->host, c->port);
    if (ac == NULL) {
        rl__redis_conn_schedule(c);
        return;
    }
    if (ac->err) {
        /* Refused at once (a loopback port nobody listens on, a socket
         * file that is not there): the owner need not wait out the connect
         * deadline to learn it. */
        redisAsyncFree(ac);
        c->ops->failed(c->owner, "cannot connect", NULL);
        rl__redis_conn_schedule(c);
        return;
    }
    void *tls = NULL;
    if (u->tls.on) {
        /* Started at once, as the connect goes on: the handshake follows it
         * on the same events, within the same deadline. */
        char detail[512];
        tls = rl__redis_tls_start(&ac->c, &u->tls, c->host, c->port, detail, sizeof detail);
        if (tls == NULL) {
            redisAsyncFree(ac);
            c->ops->failed(c->owner, "TLS handshake failed", detail);
            rl__redis_conn_schedule(c);
            return;
        }
    }
    ac->data = c;
    if (rl__redisuv_attach(ac, c->loop, c->alloc) != REDIS_OK) {
        redisAsyncFree(ac);
        rl__redis_conn_schedule(c);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    c->ac = ac;
    c->tls = tls;
    c->connecting = 1;
    uv_timer_start(&c->connect_timer, on_connect_deadline,
                   tls != NULL ? RL_REDIS_TLS_CONNECT_DEADLINE_MS : RL_REDIS_CONNECT_DEADLINE_MS, 0);
}

void rl__redis_client_name(char *out, const char *name)
{
    size_t n = 0;
    if (name != NULL)
        for (; name[n] != '\0' && n < RL_REDIS_CONN_NAME_MAX - 1; n++)
            out[n] = name[n] >= '!' && name[n] <= '~' ? name[n] : '_';
    out[n] = '\0';
}

void rl__redis_conn_init(rl_redis_conn_t *c, uv_loop_t *loop, const rl_allocator_t *alloc,
                         const rl_redisurl_t *url, uint64_t *rng, uint32_t backoff_cap_ms,
                         const rl_redis_conn_ops_t *ops, void *owner)
{
    c->ac = NULL;
    c->tls = NULL;
    c->connecting = 0;
    c->attempt = 0;
    c->backoff_cap_ms = backoff_cap_ms;
    c->rng = rng;
    c->loop = loop;
    c->alloc = alloc;
    c->url = url;
    c->host = url->host;
    c->port = url->port;
    c->ops = ops;
    c->owner = owner;
    uv_timer_init(loop, &c->connect_timer);
    uv_timer_init(loop, &c->retry_timer);
    c->connect_timer.data = c->retry_timer.data = c;
}

void rl__redis_conn_idle(rl_redis_conn_t *c)
{
    uv_timer_stop(&c->connect_timer);
    uv_timer_stop(&c->retry_timer);
    c->connecting = 0;
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;
        c->ac = NULL;
        c->tls = NULL;
        redisAsyncFree(ac); /* on_disconnect: the owner's stopping() says no reconnect */
    }
}

void rl__redis_conn_close(rl_redis_conn_t *c) { rl__redis_conn_close_cb(c, NULL); }

void rl__redis_conn_close_cb(rl_redis_conn_t *c, uv_close_cb cb)
{
    uv_timer_stop(&c->connect_timer);
    uv_timer_stop(&c->retry_timer);
    if (c->ac != NULL) {
        redisAsyncContext *ac = c->ac;
        c->ac = NULL;
        c->tls = NULL;
        redisAsyncFree(ac);
    }
    uv_close((uv_handle_t *)&c->connect_timer, cb);
    uv_close((uv_handle_t *)&c->retry_timer, cb);
}
