/* SPDX-License-Identifier: MIT */
/*
 * redis_url parsing. Pure. Four forms:
 *   redis://[[user]:password@]host[:port][/db]             one server
 *   redis+unix://[[user]:password@]/path/to/sock[?db=N]    one server on a
 *   unix://[[user]:password@]/path/to/sock[?db=N]          unix socket
 *   unix:/path/to/sock[?db=N]
 *   redis+cluster://[[user]:password@]host[:port][,host[:port]...]
 *                                                          Redis Cluster seeds
 *   redis+sentinel://[[user]:password@]host[:port][,...]/MASTER_NAME[/db]
 *                                                          Sentinels, a master
 * A host is a name or IPv4 address ([A-Za-z0-9._-]) or a bracketed IPv6
 * address ([::1]:6379; hosts[].host holds it without the brackets); no byte
 * of the URL is a control byte or a space. user and password are
 * percent-decoded (RFC 3986); a '%' not followed by two hex digits is kept,
 * so a raw password works where it cannot be read as an escape. A query
 * ("?...") is refused as such except a unix socket's ?db=N. The credentials
 * and db are the data servers' (a cluster has db 0 only; Sentinels are
 * asked without AUTH).
 */
#ifndef RL_REDISURL_H
#define RL_REDISURL_H

#include <stddef.h>

enum { RL_REDISURL_TCP, RL_REDISURL_UNIX, RL_REDISURL_CLUSTER, RL_REDISURL_SENTINEL };

#define RL_REDISURL_HOSTS_MAX 8 /* seeds of a cluster, Sentinels of a master */

typedef struct rl_redisaddr {
    char host[256];
    int port;
} rl_redisaddr_t;

typedef struct rl_redisurl {
    char host[256]; /* where conn.c connects: hosts[0] until a route moves it */
    int port;
    char user[128];     /* empty: no ACL user (AUTH password only) */
    char password[256]; /* empty: no AUTH */
    int db;
    int kind;           /* RL_REDISURL_* */
    char path[108];     /* RL_REDISURL_UNIX: the socket (sun_path's size) */
    int nhosts;         /* TCP, CLUSTER, SENTINEL: hosts[0, nhosts) */
    rl_redisaddr_t hosts[RL_REDISURL_HOSTS_MAX];
    char master[128];   /* RL_REDISURL_SENTINEL: the master's name */
} rl_redisurl_t;

/* 0, or RL_ERANGE with a message in err naming the bad part (which never
 * echoes the password). */
int rl__redisurl_parse(const char *url, rl_redisurl_t *out, char *err, size_t errlen);

/* "host:port", "unix:/path" or "cluster host:port,..." for log lines (no
 * credentials). */
void rl__redisurl_where(const rl_redisurl_t *u, char *buf, size_t cap);

#endif
