/* SPDX-License-Identifier: MIT */
/* A redis_url means one thing against a real server: a db the server
 * refuses fails the connection (never db 0), a percent-encoded password
 * authenticates as its raw form does, and a bracketed IPv6 literal
 * connects. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "redis_harness.h"

static const char secret[] = "redisurl-live-secret-0123456789ab";

typedef struct seen {
    _Atomic int select_refused; /* the server's refusal was logged */
    _Atomic int named;          /* a line named the SELECT and its db */
} seen_t;

static void watch_log(void *ud, int32_t level, const char *msg)
{
    seen_t *s = ud;
    (void)level;
    if (strstr(msg, "DB index is out of range") != NULL)
        s->select_refused = 1;
    if (strstr(msg, "SELECT 16") != NULL)
        s->named = 1;
}

static rl_t *open_url(const char *url, rl_log_fn log, void *ud, int *rc)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.sync_interval_ms = 50;
    c.log = log;
    c.log_ud = ud;
    c.log_quiet = log == NULL;
    rl_t *rl = NULL;
    *rc = rl_open(&rl, &c);
    return rl;
}

static int health(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return (int)st.health;
}

static long long dbsize(int port, const char *auth)
{
    redisContext *r = redisConnect("127.0.0.1", port);
    ck_assert(r != NULL && r->err == 0);
    if (auth != NULL)
        freeReplyObject(redisCommand(r, "AUTH %s", auth));
    redisReply *rep = redisCommand(r, "DBSIZE");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_INTEGER);
    long long n = rep->integer;
    freeReplyObject(rep);
    redisFree(r);
    return n;
}

static void start(rl_test_redis_t *srv, const char *const *extra)
{
    char err[256];
    memset(srv, 0, sizeof *srv);
    int rc = rl_test_redis_start_args(srv, extra, err, sizeof err);
    ck_assert_msg(rc == 0, "redis-server: %s", err);
}

START_TEST(select_refused_fails_the_connection)
{
    rl_test_redis_t srv;
    start(&srv, NULL); /* 16 databases: db 16 is out of range */
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/16", srv.port);
    seen_t seen = {0, 0};
    int rc;
    rl_t *rl = open_url(url, watch_log, &seen, &rc);
    ck_assert_int_eq(rc, 0); /* opens degraded, as for an unreachable server */
    int id = rl_test_add(rl, "name=api rate=100/s");
    for (int i = 0; i < 50; i++)
        rl_check(rl, id, "k", 1, 1, NULL);
    WAIT_FOR(seen.select_refused);
    /* Rounds of 50 ms: several would have run, and reported, by now. */
    rl_test_sleep_ms(600);
    for (int i = 0; i < 50; i++)
        rl_check(rl, id, "k", 1, 1, NULL);
    rl_test_sleep_ms(300);
    ck_assert_int_ne(health(rl), RL_HEALTH_HEALTHY);
    ck_assert_msg(dbsize(srv.port, NULL) == 0, "the fleet wrote into db 0");
    ck_assert(seen.named);
    rl_close(rl);
    rl_test_redis_stop(&srv);
}
END_TEST

START_TEST(percent_encoded_password)
{
    rl_test_redis_t srv;
    start(&srv, NULL); /* the harness's PING has no password: set after */
    redisContext *r = redisConnect("127.0.0.1", srv.port);
    ck_assert(r != NULL && r->err == 0);
    redisReply *set = redisCommand(r, "CONFIG SET requirepass %s", "p@ss:w/rd");
    ck_assert(set != NULL && set->type == REDIS_REPLY_STATUS);
    freeReplyObject(set);
    redisFree(r);
    char url[128];
    for (int i = 0; i < 2; i++) {
        if (i == 0)
            snprintf(url, sizeof url, "redis://:p%%40ss%%3Aw%%2Frd@127.0.0.1:%d", srv.port);
        else
            snprintf(url, sizeof url, "redis://:p@ss:w/rd@127.0.0.1:%d", srv.port);
        int rc;
        rl_t *rl = open_url(url, NULL, NULL, &rc);
        ck_assert_msg(rc == 0, "%s: %s", i ? "raw" : "percent-encoded", rl_err_name(rc));
        WAIT_FOR(health(rl) == RL_HEALTH_HEALTHY);
        rl_close(rl);
    }
    /* A wrong password is still refused. */
    snprintf(url, sizeof url, "redis://:p%%40ss@127.0.0.1:%d", srv.port);
    int rc;
    rl_t *bad = open_url(url, NULL, NULL, &rc);
    ck_assert_int_eq(rc, RL_EAUTH);
    ck_assert_ptr_null(bad);
    rl_test_redis_stop(&srv);
}
END_TEST

START_TEST(ipv6_loopback)
{
    static const char *const extra[] = {"--bind", "127.0.0.1", "::1", NULL};
    rl_test_redis_t srv;
    start(&srv, extra);
    char url[64];
    snprintf(url, sizeof url, "redis://[::1]:%d", srv.port);
    int rc;
    rl_t *rl = open_url(url, NULL, NULL, &rc);
    ck_assert_msg(rc == 0, "%s", rl_err_name(rc));
    WAIT_FOR(health(rl) == RL_HEALTH_HEALTHY);
    rl_close(rl);
    rl_test_redis_stop(&srv);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("redisurl_live");
    TCase *tc = tcase_create("live");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, select_refused_fails_the_connection);
    tcase_add_test(tc, percent_encoded_password);
    tcase_add_test(tc, ipv6_loopback);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
