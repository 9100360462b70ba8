/* SPDX-License-Identifier: MIT */
/* The single-server route: every hash tag lives on the one connection (TCP
 * or a unix socket, conn.c). */
#include "redis/route.h"

static void single_connect(rl_redis_route_t *r)
{
    if (r->conn.ac == NULL)
        rl__redis_conn_open(&r->conn);
}

static int single_can_send(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    (void)tag, (void)tag_len;
    return r->conn.ac != NULL;
}

static int single_send(rl_redis_route_t *r, const char *tag, size_t tag_len,
                       redisCallbackFn *cb, void *priv, int argc, const char **argv,
                       const size_t *argl)
{
    (void)tag, (void)tag_len;
    if (r->conn.ac == NULL)
        return REDIS_ERR;
    return redisAsyncCommandArgv(r->conn.ac, cb, priv, argc, argv, argl);
}

static void single_reset(rl_redis_route_t *r) { rl__redis_conn_drop(&r->conn); }

static void single_close(rl_redis_route_t *r) { rl__redis_conn_close(&r->conn); }

static redisAsyncContext *single_context(rl_redis_route_t *r, const char *tag, size_t tag_len)
{
    (void)tag, (void)tag_len;
    return r->conn.ac;
}

static int single_connecting(rl_redis_route_t *r) { return r->conn.connecting; }

static void single_ready(rl_redis_route_t *r) { rl__redis_conn_ready(&r->conn); }

static void single_retry(rl_redis_route_t *r)
{
    if (r->conn.ac == NULL)
        rl__redis_conn_schedule(&r->conn); /* no-op while one is pending */
}

static uint32_t single_attempts(rl_redis_route_t *r) { return r->conn.attempt; }

static const rl_redis_route_vt_t single_vt = {
    .name = "single",
    .connect = single_connect,
    .can_send = single_can_send,
    .send = single_send,
    .reset = single_reset,
    .close = single_close,
    .context = single_context,
    .connecting = single_connecting,
    .ready = single_ready,
    .retry = single_retry,
    .attempts = single_attempts,
};

void rl__redis_route_single(rl_redis_route_t *r) { r->vt = &single_vt; }
