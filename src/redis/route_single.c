/* SPDX-License-Identifier: MIT */
/* The single-server route: every hash tag lives on the one connection. */
#include <string.h>
#include "redis/route.h"

static void single_connect(rl_redis_route_t *r) { rl__redis_conn_open(&r->conn); }

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

static const rl_redis_route_vt_t single_vt = {
    .name = "single",
    .connect = single_connect,
    .can_send = single_can_send,
    .send = single_send,
    .reset = single_reset,
    .close = single_close,
};

void rl__redis_route_single(rl_redis_route_t *r) { r->vt = &single_vt; }

const char *rl__redis_hash_tag(const char *key, size_t len, size_t *tag_len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1) {
            *tag_len = (size_t)(close - open - 1);
            return open + 1;
        }
    }
    *tag_len = len;
    return key;
}
