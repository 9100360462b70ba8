/* SPDX-License-Identifier: MIT */
/*
 * A server as managed services offer it: SCRIPT, CONFIG, DEBUG and KEYS
 * disabled (rename-command to ""). The library needs none of them: the
 * sync thread and the exact thread run their scripts with EVAL when SCRIPT
 * LOAD is refused, so the global tier's reports and the node registry, an
 * exact limit and a quota are all answered by Redis, not by on_failure.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "redis/keys.h"
#include "sync/nodes.h"

static const char secret[] = "restricted-test-secret-012345678";
static const char *const restricted[] = {
    "--rename-command", "SCRIPT", "", "--rename-command", "CONFIG", "",
    "--rename-command", "DEBUG",  "", "--rename-command", "KEYS",   "", NULL};

static redisReply *cmd(const char *fmt, const char *arg)
{
    redisContext *r = rl_test_redis_client(0);
    redisReply *rep = redisCommand(r, fmt, arg);
    ck_assert_ptr_nonnull(rep);
    rl_test_release(r);
    return rep;
}

/* A string or integer reply is `want` (the reply freed). */
static int reply_is(redisReply *rep, const char *want)
{
    char text[32] = "";
    if (rep->type == REDIS_REPLY_STRING)
        snprintf(text, sizeof text, "%s", rep->str);
    else if (rep->type == REDIS_REPLY_INTEGER)
        snprintf(text, sizeof text, "%lld", rep->integer);
    freeReplyObject(rep);
    return strcmp(text, want) == 0;
}

static rl_t *open_node(const char *node)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = 50;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.exact_timeout_ms = 10000;
    c.quota_timeout_ms = 10000;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

static rl_stats_t stats(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    ck_assert_int_eq(rl_stats(rl, &s), 0);
    return s;
}

START_TEST(the_server_refuses_script)
{
    if (rl_test_redis_skipped())
        return;
    redisReply *rep = cmd("SCRIPT LOAD %s", "return 1");
    ck_assert_int_eq(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    rep = cmd("CONFIG GET %s", "maxmemory");
    ck_assert_int_eq(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    rl_test_release_all();
}
END_TEST

/* The global tier: the reports reach Redis (the fleet's count in the key's
 * hash is what the node admitted) and the node is in the registry. */
START_TEST(global_sync_runs_through_eval)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = open_node("restricted-g");
    int g = rl_test_add(rl, "name=g rate=1000/h burst=1000 mode=global");
    unsigned admitted = 0;
    for (unsigned i = 0; i < 50; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        admitted += rl_check(rl, g, "k", 1, 1, &d) == RL_ALLOW;
    }
    ck_assert_uint_eq(admitted, 50);
    uint64_t base = stats(rl).sync_rounds_completed;
    WAIT_FOR(stats(rl).sync_connected == 1 && stats(rl).sync_rounds_completed >= base + 3);
    char name[200];
    rl__redis_key_name(&rl->kh, rl->key_prefix, "g", rl__keyhash(&rl->kh, "k", 1), name,
                       sizeof name);
    WAIT_FOR(reply_is(cmd("HGET %s a", name), "50"));
    char hash[96], live[96];
    ck_assert_int_eq(rl__nodes_key_names(rl->key_prefix, hash, sizeof hash, live, sizeof live),
                     0);
    WAIT_FOR(reply_is(cmd("ZCARD %s", live), "1"));
    /* No error reply: a refused SCRIPT LOAD or a NOSCRIPT would count as
     * one. A missed deadline is the machine's, not the script path's
     * (valgrind runs this suite many times slower), so it is not one. */
    rl_stats_t s = stats(rl);
    ck_assert_uint_eq(s.sync_errors, s.sync_err_timeout + s.sync_err_connect);
    ck_assert_uint_eq(s.sync_err_noscript + s.sync_err_other, 0);
    rl_test_release_all();
}
END_TEST

START_TEST(exact_and_quota_run_through_eval)
{
    if (rl_test_redis_skipped())
        return;
    rl_t *rl = open_node("restricted-x");
    int x = rl_test_add(rl, "name=x rate=1/h burst=3 mode=exact");
    unsigned allowed = 0;
    for (unsigned i = 0; i < 5; i++) {
        rl_decision_t d;
        rl_decision_init(&d);
        int rc = rl_check(rl, x, "k", 1, 1, &d);
        ck_assert_msg((d.flags & RL_FLAG_EXACT) && !(d.flags & RL_FLAG_DEGRADED),
                      "check %u not answered by Redis (flags %#x)", i, d.flags);
        allowed += rc == RL_ALLOW;
    }
    ck_assert_uint_eq(allowed, 3);
    rl_quota_t q;
    char err[200];
    ck_assert_int_eq(rl_quota_parse(&q, "name=q amount=2 period=day on_failure=closed", err,
                                    sizeof err), 0);
    int qid = rl_quota_add(rl, &q);
    ck_assert_int_ge(qid, 0);
    const char *ids[] = {"a", "b", "c"};
    int want[] = {RL_ALLOW, RL_ALLOW, RL_DENY};
    for (int i = 0; i < 3; i++) {
        rl_quota_result_t r;
        rl_quota_result_init(&r);
        ck_assert_int_eq(rl_quota_charge(rl, qid, "u", 1, 1, ids[i], 1, &r), want[i]);
        ck_assert(!(r.flags & RL_FLAG_DEGRADED));
    }
    rl_test_release_all();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("restricted");
    TCase *tc = tcase_create("restricted");
    rl_test_redis_fixture_args(tc, restricted);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_server_refuses_script);
    tcase_add_test(tc, global_sync_runs_through_eval);
    tcase_add_test(tc, exact_and_quota_run_through_eval);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
