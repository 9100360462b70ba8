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
 *
 * rediss://, rediss+cluster:// and rediss+sentinel:// are the same over TLS
 * (every server: seeds, discovered nodes, Sentinels, the master), in a build
 * with TLS (RL_HAVE_TLS) only. Their query names the TLS files, each value
 * percent-decoded ('@' and '?' in a value are written %40 and %3F):
 *   tls_ca_file=PEM      the CAs a server's certificate must chain to
 *   tls_ca_dir=DIR       the same as a hashed directory (c_rehash)
 *                        (neither: the system's store)
 *   tls_cert=PEM&tls_key=PEM   a client certificate and its key (both or
 *                        neither)
 *   tls_server_name=NAME the name sent as SNI and verified in the server's
 *                        certificate (default: the host connected to)
 * Verification of the chain and of the name is always on.
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

#define RL_REDISURL_TLS_PATH_MAX 512 /* a TLS file's path, its NUL included */

typedef struct rl_redistls {
    int on;             /* rediss: every connection of the URL is TLS */
    char ca_file[RL_REDISURL_TLS_PATH_MAX]; /* empty: not given */
    char ca_dir[RL_REDISURL_TLS_PATH_MAX];
    char cert[RL_REDISURL_TLS_PATH_MAX];
    char key[RL_REDISURL_TLS_PATH_MAX];
    char server_name[256]; /* empty: the host connected to */
} rl_redistls_t;

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
    rl_redistls_t tls;
} rl_redisurl_t;

/* 0, or RL_ERANGE with a message in err naming the bad part (which never
 * echoes the password). */
int rl__redisurl_parse(const char *url, rl_redisurl_t *out, char *err, size_t errlen);

/* The TLS query of a rediss URL (after its '?') into out->tls; url_tls.c.
 * 0, or RL_ERANGE naming the bad parameter. */
int rl__redisurl_tls_query(const char *q, rl_redistls_t *out, char *err, size_t errlen);

/* "host:port", "unix:/path" or "cluster host:port,..." for log lines (no
 * credentials; "tls " first for a rediss URL). */
void rl__redisurl_where(const rl_redisurl_t *u, char *buf, size_t cap);

#endif
