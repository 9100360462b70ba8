/* SPDX-License-Identifier: MIT */
/*
 * A synchronous Redis connection for the subcommands that read a fleet's
 * state: the URL syntax of rl_config_t.redis_url (parsed by the library's own
 * parser: one server, a unix socket, Cluster seeds, Sentinels), AUTH and
 * SELECT, deadlines, and errors people can act on. On a Cluster a command
 * follows MOVED and ASK to the node that owns its key (each subcommand's
 * keys share one hash tag); behind Sentinels it goes to the master they
 * name.
 */
#ifndef RL_CLI_REDISCONN_H
#define RL_CLI_REDISCONN_H

#include <stddef.h>
#include <hiredis/hiredis.h>
#include "cli.h"
#include "redis/url.h"

#define CLI_REDIS_TIMEOUT_MS 3000

typedef struct cli_redis {
    redisContext *c;
    char where[300]; /* "host:port[/db]", never the password */
    char err[512];   /* the last failure */
    int status;      /* its exit status: CLI_USAGE (bad URL) or CLI_RUNTIME */
    const char *kind; /* its JSON error kind (docs/cli.md) */
    rl_redisurl_t u;  /* the parsed URL (credentials for a redirect's node) */
} cli_redis_t;

/* Connect, authenticate, select. 0, or -1 with r->err, r->status, r->kind. */
int cli_redis_open(cli_redis_t *r, const char *url);

/*
 * One command (redisCommand's format). The reply, or NULL with r->err etc.
 * set: I/O failures, error replies (NOAUTH/WRONGPASS explained), and a reply
 * whose type is not `want` (-1: any type but an error).
 */
redisReply *cli_redis_cmd(cli_redis_t *r, int want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Redis's clock (TIME) in Unix ms, or -1 with r->err set. */
long long cli_redis_time_ms(cli_redis_t *r);

void cli_redis_close(cli_redis_t *r);

#endif
