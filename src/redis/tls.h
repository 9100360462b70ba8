/* SPDX-License-Identifier: MIT */
/*
 * TLS for the connections of a rediss URL (url.h): OpenSSL under hiredict's
 * redisInitiateSSL, in a build with TLS (RL_HAVE_TLS; CMake's RL_TLS). Every
 * connection gets its own context from the URL's files, so a CA bundle or a
 * client certificate replaced on disk is used from the next connect on; the
 * server's chain and its name are always verified. Nothing here prints a
 * key or a password: the messages name files, nodes and OpenSSL's reasons.
 * Without TLS in the build the URL parser refuses rediss first, and these
 * refuse too.
 */
#ifndef RL_REDIS_TLS_H
#define RL_REDIS_TLS_H

#include <stddef.h>
#include <hiredis/hiredis.h>
#include "redis/url.h"

/* Load t's files as a connection would (CA, client certificate and key,
 * the key matching the certificate): 0, or RL_ERANGE with a message
 * naming the file and why. For rl_open, so a wrong path fails at once. */
int rl__redis_tls_check(const rl_redistls_t *t, char *err, size_t errlen);

/*
 * Start TLS on c, a context connecting (or connected) to host:port: SNI
 * (a DNS name only) and the name verified are t->server_name, else host.
 * The SSL object is returned, c's from then on (freed with c; valid while
 * c is), or NULL with why in err, naming host:port.
 */
void *rl__redis_tls_start(redisContext *c, const rl_redistls_t *t, const char *host, int port,
                          char *err, size_t errlen);

/* Whether ssl's handshake has finished. */
int rl__redis_tls_done(const void *ssl);

/*
 * Why the handshake on ssl failed, naming host:port: the certificate's
 * verification result (expired, the wrong host, an unknown CA, ...) when
 * that failed, else OpenSSL's reason (the server refused our certificate),
 * else c's error text; without a client certificate in t, a hint that
 * the server may require one.
 */
void rl__redis_tls_why(const void *ssl, const redisContext *c, const rl_redistls_t *t,
                       const char *host, int port, char *buf, size_t cap);

#endif
