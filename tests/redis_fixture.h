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

#endif
