/* SPDX-License-Identifier: MIT */
/*
 * The Check fixture of the suites that need one redis-server: a test case
 * gets it with rl_test_redis_fixture(tc) and reaches it through
 * rl_test_redis_url() and rl_test_redis().
 *
 * The fixture is unchecked (tcase_add_unchecked_fixture): it runs in the
 * runner process, once around the case's tests, so its teardown stops the
 * server even when a test fails or times out in its forked child, and the
 * forked tests all see the same server. A server that cannot start ends the
 * suite (exit 1): no test of the case could say anything without it. With
 * RL_SKIP_REDIS=1 and no redis-server installed, rl_test_redis_skipped()
 * is 1 and the tests that check it return early. A suite's server runs in
 * one mode: the last rl_test_redis_fixture_as call names it.
 */
#ifndef RL_REDIS_FIXTURE_H
#define RL_REDIS_FIXTURE_H

#include <check.h>
#include <hiredis/hiredis.h>
#include <ratelimit.h>
#include "redis_harness.h"

/* A plain server (RL_TEST_REDIS_PLAIN) around the case's tests. */
void rl_test_redis_fixture(TCase *tc);

/* The same in another mode: RL_TEST_REDIS_UNIX (also on <dir>/redis.sock). */
void rl_test_redis_fixture_as(TCase *tc, int mode);

/* A plain server started with extra arguments (a NULL-ended list that
 * outlives the suite), e.g. --rename-command to stand in for a managed
 * Redis that refuses commands. */
void rl_test_redis_fixture_args(TCase *tc, const char *const *extra);

/* The running server: its pid, port and files, for the tests that pause,
 * kill or restart it. */
rl_test_redis_t *rl_test_redis(void);

/* "redis://127.0.0.1:<port>" of the running server. */
const char *rl_test_redis_url(void);

/* 1 when redis-server is missing and RL_SKIP_REDIS=1 allowed that. */
int rl_test_redis_skipped(void);

/* A connection to 127.0.0.1:port (0: the fixture's server), held
 * (testutil.h) so a failed test frees it; fails the test if it cannot
 * connect. */
redisContext *rl_test_redis_client(int port);

/* FLUSHALL on the fixture's server: a test starts from an empty Redis. */
void rl_test_redis_flushall(void);

/* 1 when rl's sync thread is connected with its scripts loaded, else 0. A
 * manual round (rl__sync_step) asked for before that fails: a test that
 * steps rounds waits for it first (rl_test_wait_sync_connected). */
int rl_test_sync_connected(rl_t *rl);

/* WAIT_FOR every one of the n instances' sync threads to be connected. */
void rl_test_wait_sync_connected(rl_t *const *nodes, int n);

/* ------------------------------------------------------------------ TLS */

/*
 * Certificates for a TLS server, made with openssl(1) into dir: a CA
 * (ca.crt, ca.key) and, signed by it unless said, <name>.crt and <name>.key
 * for: server (DNS:localhost, IP:127.0.0.1), server2 (the same names, a new
 * key: a rotation), client (a client certificate), expired (the server's
 * names, its notAfter past), wronghost (DNS:wrong.example only) and
 * unknownca (the server's names, signed by another CA). 0, or -1 with err.
 */
int rl_test_tls_certs(const char *dir, char *err, size_t errlen);

/* A server's TLS arguments; they must outlive it (restarts use them). */
typedef struct rl_test_tls_args {
    int port; /* the TLS port; the server's plain port stays srv->port */
    char port_s[16], cert[128], key[128], ca[128];
    const char *argv[20];
} rl_test_tls_args_t;

/*
 * Start srv on a plain port (the test's own look at the data) and on a TLS
 * port (a->port) with dir's <cert>.crt and .key and its CA; a client's
 * certificate is checked when it sends one, and required when
 * require_client. Appends go to disk at once, so a kill loses nothing.
 * 0, 1 (skipped) or -1 with err, as rl_test_redis_start.
 */
int rl_test_tls_server_start(rl_test_redis_t *srv, rl_test_tls_args_t *a, const char *dir,
                             const char *cert, int require_client, char *err, size_t errlen);

/* Kill the server and start it again on its ports with dir's <cert>: a
 * certificate rotated. 0 or -1 with err. */
int rl_test_tls_server_rotate(rl_test_redis_t *srv, rl_test_tls_args_t *a, const char *dir,
                              const char *cert, char *err, size_t errlen);

/* The fixture of the TLS suites: certificates (rl_test_tls_certs) in a
 * directory of their own and a server on "server" around the case's tests;
 * rl_test_redis() is that server (its plain port), rl_test_redis_url() its
 * plain URL. */
void rl_test_redis_fixture_tls(TCase *tc);

/* The fixture's certificate directory, TLS arguments and
 * "rediss://127.0.0.1:<tls port>?tls_ca_file=..&tls_cert=..&tls_key=.."
 * (the client certificate). */
const char *rl_test_tls_dir(void);
rl_test_tls_args_t *rl_test_tls_args(void);
const char *rl_test_redis_tls_url(void);

#endif
