/* SPDX-License-Identifier: MIT */
/* rl_redis_url_check: the Redis layer's URL parser as a public check. */
#include <stdio.h>
#include "ratelimit.h"
#include "redis/url.h"

int rl_redis_url_check(const char *url, char *err, size_t errlen)
{
    if (url == NULL) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "redis_url: NULL");
        return RL_EINVAL;
    }
    rl_redisurl_t parsed; /* ~5 KB on the stack (the TLS paths): nothing allocated */
    return rl__redisurl_parse(url, &parsed, err, errlen);
}
