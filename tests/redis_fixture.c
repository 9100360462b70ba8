/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* program_invocation_short_name: the suite's name */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "redis_fixture.h"
#include "testutil.h"

/* One server per suite process: the fixtures of a suite's cases run one
 * after another in the runner, and each forked test inherits the copy. */
static rl_test_redis_t srv;
static int srv_mode;
static const char *const *srv_extra; /* a plain server's extra arguments */
static int srv_skipped;
static char srv_url[64];

static void fixture_start(void)
{
    char err[1024];
    int rc = srv_extra != NULL ? rl_test_redis_start_args(&srv, srv_extra, err, sizeof err)
                               : rl_test_redis_start_as(&srv, srv_mode, 0, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", program_invocation_short_name, err);
        exit(1);
    }
    srv_skipped = rc == 1;
    if (srv_skipped)
        printf("%s: %s\n", program_invocation_short_name, err);
    snprintf(srv_url, sizeof srv_url, "redis://127.0.0.1:%d", srv.port);
}

static void fixture_stop(void) { rl_test_redis_stop(&srv); }

void rl_test_redis_fixture_as(TCase *tc, int mode)
{
    srv_mode = mode;
    tcase_add_unchecked_fixture(tc, fixture_start, fixture_stop);
}

void rl_test_redis_fixture(TCase *tc) { rl_test_redis_fixture_as(tc, RL_TEST_REDIS_PLAIN); }

void rl_test_redis_fixture_args(TCase *tc, const char *const *extra)
{
    srv_extra = extra;
    rl_test_redis_fixture_as(tc, RL_TEST_REDIS_PLAIN);
}

rl_test_redis_t *rl_test_redis(void) { return &srv; }

const char *rl_test_redis_url(void) { return srv_url; }

int rl_test_redis_skipped(void) { return srv_skipped; }

static void free_client(void *r) { redisFree(r); }

redisContext *rl_test_redis_client(int port)
{
    redisContext *r = redisConnect("127.0.0.1", port != 0 ? port : srv.port);
    ck_assert_ptr_nonnull(r);
    rl_test_hold(r, free_client);
    ck_assert_int_eq(r->err, 0);
    return r;
}

void rl_test_redis_flushall(void)
{
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(redisCommand(r, "FLUSHALL"));
    rl_test_release(r);
}
