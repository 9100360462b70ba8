/* SPDX-License-Identifier: MIT */
/* Routing (see route.h): the backend a URL names, and the pure parts every
 * backend shares (hash tags, Cluster slots). */
#include <string.h>
#include "ratelimit.h"
#include "redis/route.h"

int rl__redis_route_init(rl_redis_route_t *r, const rl_redis_route_cfg_t *cfg)
{
    memset(r, 0, sizeof *r);
    switch (cfg->url->kind) {
    case RL_REDISURL_CLUSTER:
        return rl__redis_route_cluster(r, cfg);
    case RL_REDISURL_SENTINEL:
        return rl__redis_route_sentinel(r, cfg);
    default:
        rl__redis_conn_init(&r->conn, cfg->loop, cfg->alloc, cfg->url, cfg->rng,
                            cfg->backoff_cap_ms, cfg->ops, cfg->owner);
        rl__redis_conn_set_name(&r->conn, cfg->client_name);
        rl__redis_route_single(r);
        return 0;
    }
}

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

/* CRC16/XMODEM (polynomial 0x1021, initial 0, no reflection), the checksum
 * Redis Cluster takes of a key's hash tag; bitwise: one tag per command. */
unsigned rl__redis_slot(const char *tag, size_t tag_len)
{
    unsigned crc = 0;
    for (size_t i = 0; i < tag_len; i++) {
        crc ^= (unsigned)(unsigned char)tag[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000u) ? ((crc << 1) ^ 0x1021u) & 0xffffu : (crc << 1) & 0xffffu;
    }
    return crc & 16383u;
}
