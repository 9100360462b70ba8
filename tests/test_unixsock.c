/* SPDX-License-Identifier: MIT */
/* The global tier over a unix socket (redis+unix:// and unix://, with a
 * password-less ACL default and a database): a node connects, syncs, and
 * its keys land in the database the URL names; the CLI reads them there. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "sync/sync.h"

static rl_stats_t stats(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st;
}

static void free_client(void *r) { redisFree(r); }

START_TEST(syncs_over_the_socket)
{
    static const char *const schemes[] = {"redis+unix://", "unix://"};
    char url[256], prefix[16];
    snprintf(url, sizeof url, "%s%s/redis.sock?db=3", schemes[_i], rl_test_redis()->dir);
    snprintf(prefix, sizeof prefix, "ux%d", _i);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.node_id = "unix-node";
    c.sync_interval_ms = 50;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = prefix;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    rl_test_hold(rl, rl_test_close_fn);
    int id = rl_test_add(rl, "name=u rate=100/s burst=10");
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(rl_check(rl, id, "k", 1, 1, NULL), RL_ALLOW);
    uint64_t r = stats(rl).sync_rounds_completed;
    WAIT_FOR(stats(rl).sync_rounds_completed >= r + 3);
    ck_assert_int_eq(stats(rl).health, RL_HEALTH_HEALTHY);
    rl_test_release(rl);
    /* What it admitted is in db 3, not db 0. */
    char sock[128];
    snprintf(sock, sizeof sock, "%s/redis.sock", rl_test_redis()->dir);
    redisContext *rc = redisConnectUnix(sock);
    ck_assert_ptr_nonnull(rc);
    rl_test_hold(rc, free_client);
    ck_assert_int_eq(rc->err, 0);
    redisReply *keys = redisCommand(rc, "KEYS {%s:v1:u:*", prefix);
    ck_assert_uint_eq(keys->elements, 0);
    freeReplyObject(keys);
    freeReplyObject(redisCommand(rc, "SELECT 3"));
    keys = redisCommand(rc, "KEYS {%s:v1:u:*", prefix);
    ck_assert_uint_eq(keys->elements, 1);
    redisReply *a = redisCommand(rc, "HGET %s a", keys->element[0]->str);
    ck_assert_str_eq(a->str, "4");
    freeReplyObject(a);
    freeReplyObject(keys);
    rl_test_release(rc);
}
END_TEST

#ifdef RL_CLI_PATH
START_TEST(cli_reads_the_socket)
{
    rl_config_t c;
    rl_config_init(&c);
    char url[256];
    snprintf(url, sizeof url, "redis+unix://%s/redis.sock?db=5", rl_test_redis()->dir);
    c.redis_url = url;
    c.node_id = "unix-cli-node";
    c.sync_interval_ms = 50;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = "uxcli";
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    rl_test_hold(rl, rl_test_close_fn);
    uint64_t r = stats(rl).sync_rounds_completed;
    WAIT_FOR(stats(rl).sync_rounds_completed >= r + 3);
    static char out[16384];
    const char *argv[] = {RL_CLI_PATH, "--json", "nodes", "--redis", url, "--prefix", "uxcli",
                          NULL};
    int rc = rl_test_run_prog(argv, 30000, out, sizeof out);
    ck_assert_msg(rc == 0, "nodes: %d: %s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "\"unix-cli-node\""));
    rl_test_release(rl);
}
END_TEST
#endif

static Suite *suite(void)
{
    Suite *s = suite_create("unixsock");
    TCase *tc = tcase_create("unixsock");
    rl_test_redis_fixture_as(tc, RL_TEST_REDIS_UNIX);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_add_loop_test(tc, syncs_over_the_socket, 0, 2);
#ifdef RL_CLI_PATH
    tcase_add_test(tc, cli_reads_the_socket);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
