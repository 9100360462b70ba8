/* SPDX-License-Identifier: MIT */
/* Reply classification and parsing (see reply.h). */
#include <string.h>
#include "redis/reply.h"

int rl__redis_classify(const redisReply *reply)
{
    /* Prefixes Redis puts first in its error replies. MASTERDOWN (a replica
     * that lost its primary) passes like LOADING: wait, do not reconnect. */
    static const struct {
        const char *prefix;
        int cls;
    } classes[] = {
        {"NOSCRIPT", RL_REDIS_ERR_NOSCRIPT}, {"READONLY", RL_REDIS_ERR_READONLY},
        {"LOADING", RL_REDIS_ERR_LOADING},   {"BUSY", RL_REDIS_ERR_BUSY},
        {"OOM", RL_REDIS_ERR_OOM},           {"NOAUTH", RL_REDIS_ERR_AUTH},
        {"WRONGPASS", RL_REDIS_ERR_AUTH},    {"NOPERM", RL_REDIS_ERR_AUTH},
        {"ERR AUTH", RL_REDIS_ERR_AUTH},     {"MASTERDOWN", RL_REDIS_ERR_LOADING},
    };
    if (reply == NULL || reply->type != REDIS_REPLY_ERROR || reply->str == NULL)
        return RL_REDIS_ERR_OTHER;
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (strncmp(reply->str, classes[i].prefix, strlen(classes[i].prefix)) == 0)
            return classes[i].cls;
    return RL_REDIS_ERR_OTHER;
}

int rl__redis_sha_reply(const redisReply *reply, char sha[41])
{
    if (reply == NULL || reply->type != REDIS_REPLY_STRING || reply->len != 40)
        return 0;
    memcpy(sha, reply->str, 40);
    sha[40] = '\0';
    return 1;
}

const char *rl__redis_reply_text(const redisReply *reply)
{
    return reply != NULL && reply->type == REDIS_REPLY_ERROR && reply->str != NULL
               ? reply->str
               : "unexpected reply";
}

int rl__redis_uint_array(const redisReply *reply, uint64_t *out, size_t n)
{
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = reply->element[i];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0)
            return 0;
        out[i] = (uint64_t)e->integer;
    }
    return 1;
}
