/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "redisconn.h"
#include "redis/url.h"

static int fail(cli_redis_t *r, int status, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(cli_redis_t *r, int status, const char *kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    r->status = status;
    r->kind = kind;
    return -1;
}

/* An error reply, in words that say what to do about it. */
static void explain_error(cli_redis_t *r, const char *msg)
{
    if (strncmp(msg, "NOAUTH", 6) == 0)
        fail(r, CLI_RUNTIME, "redis_auth",
             "Redis at %s requires a password: give it in the URL, "
             "redis://[user]:PASSWORD@host:port (%s)",
             r->where, msg);
    else if (strncmp(msg, "WRONGPASS", 9) == 0 || strncmp(msg, "ERR AUTH", 8) == 0 ||
             strncmp(msg, "ERR invalid password", 20) == 0 ||
             strncmp(msg, "ERR Client sent AUTH", 20) == 0)
        fail(r, CLI_RUNTIME, "redis_auth", "Redis at %s refused the credentials: %s", r->where,
             msg);
    else if (strncmp(msg, "NOPERM", 6) == 0)
        fail(r, CLI_RUNTIME, "redis_auth", "Redis at %s: this user may not do that: %s",
             r->where, msg);
    else
        fail(r, CLI_RUNTIME, "redis_error", "Redis at %s answered an error: %s", r->where, msg);
}

static redisReply *vcmd(cli_redis_t *r, int want, const char *fmt, va_list ap)
{
    redisReply *reply = redisvCommand(r->c, fmt, ap);
    if (reply == NULL) {
        fail(r, CLI_RUNTIME, "redis_unreachable", "lost the connection to Redis at %s: %s",
             r->where, r->c->errstr[0] ? r->c->errstr : "no reply");
        return NULL;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        explain_error(r, reply->str);
        freeReplyObject(reply);
        return NULL;
    }
    if (want >= 0 && reply->type != want) {
        fail(r, CLI_RUNTIME, "redis_reply", "Redis at %s sent an unexpected reply (type %d)",
             r->where, reply->type);
        freeReplyObject(reply);
        return NULL;
    }
    return reply;
}

redisReply *cli_redis_cmd(cli_redis_t *r, int want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = vcmd(r, want, fmt, ap);
    va_end(ap);
    return reply;
}

int cli_redis_open(cli_redis_t *r, const char *url)
{
    memset(r, 0, sizeof *r);
    rl_redisurl_t u;
    char why[200];
    if (rl__redisurl_parse(url, &u, why, sizeof why) != 0)
        return fail(r, CLI_USAGE, "usage", "invalid --redis URL: %s", why);
    if (u.db != 0)
        snprintf(r->where, sizeof r->where, "%s:%d/%d", u.host, u.port, u.db);
    else
        snprintf(r->where, sizeof r->where, "%s:%d", u.host, u.port);
    struct timeval tv = {CLI_REDIS_TIMEOUT_MS / 1000, (CLI_REDIS_TIMEOUT_MS % 1000) * 1000};
    r->c = redisConnectWithTimeout(u.host, u.port, tv);
    if (r->c == NULL)
        return fail(r, CLI_RUNTIME, "internal", "out of memory");
    if (r->c->err)
        return fail(r, CLI_RUNTIME, "redis_unreachable", "cannot reach Redis at %s: %s",
                    r->where, r->c->errstr);
    redisSetTimeout(r->c, tv);
    redisReply *reply = NULL;
    if (u.password[0] != '\0') {
        if (u.user[0] != '\0')
            reply = cli_redis_cmd(r, -1, "AUTH %s %s", u.user, u.password);
        else
            reply = cli_redis_cmd(r, -1, "AUTH %s", u.password);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    if (u.db != 0) {
        if ((reply = cli_redis_cmd(r, -1, "SELECT %d", u.db)) == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return 0;
}

long long cli_redis_time_ms(cli_redis_t *r)
{
    redisReply *t = cli_redis_cmd(r, REDIS_REPLY_ARRAY, "TIME");
    if (t == NULL)
        return -1;
    long long ms = -1;
    if (t->elements == 2 && t->element[0]->type == REDIS_REPLY_STRING &&
        t->element[1]->type == REDIS_REPLY_STRING)
        ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    else
        fail(r, CLI_RUNTIME, "redis_reply", "Redis at %s sent a malformed TIME reply", r->where);
    freeReplyObject(t);
    return ms;
}

void cli_redis_close(cli_redis_t *r)
{
    if (r->c != NULL)
        redisFree(r->c);
    r->c = NULL;
}
