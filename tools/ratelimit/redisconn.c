/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "redisconn.h"
#include "redis/tls.h"

static int fail(cli_redis_t *r, int status, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
redisReply *cli_redis_cmd(cli_redis_t *r, int want, const char *fmt, ...);

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

static redisReply *check_reply(cli_redis_t *r, int want, redisReply *reply)
{
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

/* Connect to host:port (TCP) or the URL's socket, then AUTH and SELECT. */
static int connect_to(cli_redis_t *r, const char *host, int port)
{
    const rl_redisurl_t *u = &r->u;
    if (r->c != NULL)
        redisFree(r->c);
    struct timeval tv = {CLI_REDIS_TIMEOUT_MS / 1000, (CLI_REDIS_TIMEOUT_MS % 1000) * 1000};
    if (u->kind == RL_REDISURL_UNIX) {
        snprintf(r->where, sizeof r->where, "unix:%s", u->path);
        r->c = redisConnectUnixWithTimeout(u->path, tv);
    } else {
        snprintf(r->where, sizeof r->where, "%s:%d", host, port);
        r->c = redisConnectWithTimeout(host, port, tv);
    }
    if (u->db != 0) {
        size_t n = strlen(r->where);
        snprintf(r->where + n, sizeof r->where - n, "/%d", u->db);
    }
    if (r->c == NULL)
        return fail(r, CLI_RUNTIME, "internal", "out of memory");
    if (r->c->err)
        return fail(r, CLI_RUNTIME, "redis_unreachable", "cannot reach Redis at %s: %s",
                    r->where, r->c->errstr);
    char why[512];
    if (u->tls.on && rl__redis_tls_start(r->c, &u->tls, host, port, why, sizeof why) == NULL)
        return fail(r, CLI_RUNTIME, "redis_tls", "cannot reach Redis at %s: %s", r->where, why);
    redisSetTimeout(r->c, tv);
    redisReply *reply = NULL;
    if (u->password[0] != '\0') {
        if (u->user[0] != '\0')
            reply = cli_redis_cmd(r, -1, "AUTH %s %s", u->user, u->password);
        else
            reply = cli_redis_cmd(r, -1, "AUTH %s", u->password);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    if (u->db != 0) {
        if ((reply = cli_redis_cmd(r, -1, "SELECT %d", u->db)) == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return 0;
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...": connect to the node it names.
 * 1: connected (asking: ASKING sent), 0: not a redirect, -1: failed. */
static int follow_redirect(cli_redis_t *r, const redisReply *reply)
{
    if (r->u.kind != RL_REDISURL_CLUSTER || reply->type != REDIS_REPLY_ERROR)
        return 0;
    int ask = strncmp(reply->str, "ASK ", 4) == 0;
    if (!ask && strncmp(reply->str, "MOVED ", 6) != 0)
        return 0;
    char host[256];
    int port;
    if (sscanf(reply->str, "%*s %*d %255[^ ]", host) != 1)
        return 0;
    char *colon = strrchr(host, ':');
    if (colon == NULL || (port = atoi(colon + 1)) <= 0 || port > 65535)
        return 0;
    *colon = '\0';
    if (connect_to(r, host, port) != 0)
        return -1;
    if (ask) {
        redisReply *a = redisCommand(r->c, "ASKING");
        if (a == NULL)
            return fail(r, CLI_RUNTIME, "redis_unreachable", "lost the connection to Redis at "
                        "%s", r->where);
        freeReplyObject(a);
    }
    return 1;
}

redisReply *cli_redis_cmd(cli_redis_t *r, int want, const char *fmt, ...)
{
    for (int hop = 0;; hop++) {
        va_list ap;
        va_start(ap, fmt);
        redisReply *reply = redisvCommand(r->c, fmt, ap);
        va_end(ap);
        if (reply != NULL && hop < 5) {
            int f = follow_redirect(r, reply);
            if (f != 0) {
                freeReplyObject(reply);
                if (f < 0)
                    return NULL;
                continue;
            }
        }
        return check_reply(r, want, reply);
    }
}

/* The master the Sentinels name, asked of each in turn. */
static int sentinel_master(cli_redis_t *r, char *host, size_t cap, int *port)
{
    struct timeval tv = {CLI_REDIS_TIMEOUT_MS / 1000, (CLI_REDIS_TIMEOUT_MS % 1000) * 1000};
    char tls_why[512] = "";
    for (int i = 0; i < r->u.nhosts; i++) {
        redisContext *c = redisConnectWithTimeout(r->u.hosts[i].host, r->u.hosts[i].port, tv);
        redisReply *a = NULL;
        if (c != NULL && c->err == 0 && r->u.tls.on &&
            rl__redis_tls_start(c, &r->u.tls, r->u.hosts[i].host, r->u.hosts[i].port, tls_why,
                                sizeof tls_why) == NULL) {
            /* told below, if no other Sentinel answers */
        } else if (c != NULL && c->err == 0) {
            redisSetTimeout(c, tv);
            a = redisCommand(c, "SENTINEL get-master-addr-by-name %s", r->u.master);
        }
        int ok = a != NULL && a->type == REDIS_REPLY_ARRAY && a->elements == 2 &&
                 a->element[0]->type == REDIS_REPLY_STRING &&
                 a->element[1]->type == REDIS_REPLY_STRING;
        if (ok) {
            snprintf(host, cap, "%s", a->element[0]->str);
            *port = atoi(a->element[1]->str);
        }
        if (a != NULL)
            freeReplyObject(a);
        if (c != NULL)
            redisFree(c);
        if (ok)
            return 0;
    }
    return fail(r, CLI_RUNTIME, "redis_unreachable",
                "no Sentinel of %d named a master \"%s\"%s%s", r->u.nhosts, r->u.master,
                tls_why[0] != '\0' ? "; " : "", tls_why);
}

int cli_redis_open(cli_redis_t *r, const char *url)
{
    memset(r, 0, sizeof *r);
    char why[200];
    if (rl__redisurl_parse(url, &r->u, why, sizeof why) != 0)
        return fail(r, CLI_USAGE, "usage", "invalid --redis URL: %s", why);
    if (r->u.kind == RL_REDISURL_SENTINEL) {
        char host[256];
        int port = 0;
        if (sentinel_master(r, host, sizeof host, &port) != 0)
            return -1;
        return connect_to(r, host, port);
    }
    /* A cluster: the first seed that answers. */
    int rc = -1;
    for (int i = 0; i < (r->u.kind == RL_REDISURL_CLUSTER ? r->u.nhosts : 1); i++)
        if ((rc = connect_to(r, r->u.hosts[i].host, r->u.hosts[i].port)) == 0)
            break;
    return rc;
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
