/* SPDX-License-Identifier: MIT */
/*
 * Whether the server can evict the library's keys (sync thread): INFO
 * memory, asked once a connection's report script is loaded (managed
 * servers refuse CONFIG GET, never INFO), and a WARN once per policy the
 * instance meets. An evicted key hash is rebuilt without overshoot (the
 * report script's hold), but the bucket of an exact or tiered key starts
 * full again and a quota's counter from zero: an operator must know.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sync/internal.h"

/* The value of the line "name:value" in INFO text, or NULL; *vlen its length. */
static const char *info_field(const char *text, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *end = text + len;
    for (const char *p = text; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *stop = eol != NULL ? eol : end;
        if ((size_t)(stop - p) > nl && memcmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            size_t n = (size_t)(stop - v);
            if (n > 0 && v[n - 1] == '\r')
                n--;
            *vlen = n;
            return v;
        }
        p = stop + 1;
    }
    return NULL;
}

int rl__sync_evict_policy(const char *text, size_t len, uint64_t *maxmemory, char *policy,
                          size_t cap)
{
    size_t plen = 0, mlen = 0;
    const char *p = text != NULL ? info_field(text, len, "maxmemory_policy", &plen) : NULL;
    if (p == NULL || plen == 0 || cap == 0)
        return -1;
    snprintf(policy, cap, "%.*s", (int)plen, p);
    const char *m = info_field(text, len, "maxmemory", &mlen);
    char num[24];
    *maxmemory = 0;
    if (m != NULL && mlen < sizeof num) {
        memcpy(num, m, mlen);
        num[mlen] = '\0';
        *maxmemory = strtoull(num, NULL, 10);
    }
    /* maxmemory 0: no limit, so nothing is ever evicted whatever the policy. */
    return *maxmemory > 0 && !(plen == 10 && memcmp(p, "noeviction", 10) == 0);
}

static void info_reply(redisAsyncContext *ac, void *r, void *priv)
{
    (void)ac;
    rl_sync_t *s = priv;
    redisReply *reply = r;
    /* An error (INFO renamed) or a lost connection: nothing to learn. */
    if (reply == NULL || reply->type != REDIS_REPLY_STRING)
        return;
    uint64_t maxmemory = 0;
    char policy[sizeof s->evict_warned];
    if (rl__sync_evict_policy(reply->str, reply->len, &maxmemory, policy, sizeof policy) != 1 ||
        strcmp(policy, s->evict_warned) == 0)
        return;
    memcpy(s->evict_warned, policy, sizeof policy);
    rl__sync_log(s, RL_LOG_WARN,
                 "sync: %s can evict this library's keys (maxmemory %" PRIu64
                 ", maxmemory-policy %s; every key it writes has a TTL, so volatile-* "
                 "policies evict them too): a global key's hash is rebuilt without "
                 "overshoot, but an exact or tiered key's bucket starts full again and a "
                 "quota's count from zero; set maxmemory-policy noeviction (or give the "
                 "limiter a server of its own)",
                 s->where, maxmemory, policy);
}

void rl__sync_check_eviction(rl_sync_t *s)
{
    static const char *const argv[] = {"INFO", "memory"};
    static const size_t argl[] = {4, 6};
    rl__redis_route_send(&s->route, NULL, 0, info_reply, s, 2, (const char **)argv, argl);
}
