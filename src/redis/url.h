/* SPDX-License-Identifier: MIT */
/* redis_url parsing: redis://[[user]:password@]host[:port][/db]. Pure. The
 * host is a name or IPv4 address ([A-Za-z0-9._-]); no byte of the URL is a
 * control byte or a space. */
#ifndef RL_REDISURL_H
#define RL_REDISURL_H

#include <stddef.h>

typedef struct rl_redisurl {
    char host[256];
    int port;
    char user[128];     /* empty: no ACL user (AUTH password only) */
    char password[256]; /* empty: no AUTH */
    int db;
} rl_redisurl_t;

/* 0, or RL_ERANGE with a message in err (which never echoes the password). */
int rl__redisurl_parse(const char *url, rl_redisurl_t *out, char *err, size_t errlen);

#endif
