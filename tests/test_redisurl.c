/* SPDX-License-Identifier: MIT */
/* redis_url parsing (redis/url.c): every part, its defaults and limits, and
 * a clear refusal for each kind of bad URL. */
#include <string.h>
#include "testutil.h"
#include "redis/url.h"

static int parse(const char *url, rl_redisurl_t *u, char *err)
{
    return rl__redisurl_parse(url, u, err, 256);
}

START_TEST(parts_and_defaults)
{
    rl_redisurl_t u;
    char err[256];
    ck_assert_int_eq(parse("redis://cache.internal", &u, err), 0);
    ck_assert_str_eq(u.host, "cache.internal");
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(u.db, 0);
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "");
    ck_assert_int_eq(parse("redis://:s3cret@10.0.0.7:7000/3", &u, err), 0);
    ck_assert_str_eq(u.host, "10.0.0.7");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 3);
    ck_assert_str_eq(u.user, "");
    ck_assert_str_eq(u.password, "s3cret");
    ck_assert_int_eq(parse("redis://app:p@ss@h_1:1/", &u, err), 0); /* the last @ ends it */
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "p@ss");
    ck_assert_str_eq(u.host, "h_1");
    ck_assert_int_eq(u.port, 1);
    ck_assert_int_eq(u.db, 0);
    ck_assert_int_eq(parse("redis://h:65535/1000000", &u, err), 0);
    ck_assert_int_eq(u.port, 65535);
    ck_assert_int_eq(u.db, 1000000);
}
END_TEST

START_TEST(refusals_say_why)
{
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"cache:6379", "no scheme"},
        {"rediss://h", "TLS"},
        {"unix:///tmp/redis.sock", "unix sockets"},
        {"http://h", "must start with redis://"},
        {"redis://", "missing or too long host"},
        {"redis://h:0", "port must be 1..65535"},
        {"redis://h:65536", "port must be 1..65535"},
        {"redis://h:12ab", "port must be 1..65535"},
        {"redis://h/x", "db must be a number"},
        {"redis://h/1000001", "db must be a number"},
        {"redis://h q", "control byte or space"},
        {"redis://h\n", "control byte or space"},
        {"redis://h%41", "host byte 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_redisurl_t u;
        char err[256] = "";
        ck_assert_int_eq(parse(bad[i].url, &u, err), RL_ERANGE);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "%s: \"%s\" lacks \"%s\"", bad[i].url,
                      err, bad[i].says);
    }
    rl_redisurl_t u;
    char err[256] = "";
    ck_assert_int_eq(rl__redisurl_parse(NULL, &u, err, sizeof err), RL_ERANGE);
    /* A password never reaches the message. */
    ck_assert_int_eq(parse("redis://:hunter2@h:99999", &u, err), RL_ERANGE);
    ck_assert_ptr_null(strstr(err, "hunter2"));
    /* Parts longer than their buffers are refused, not cut. */
    char longer[600] = "redis://";
    memset(longer + 8, 'a', 300);
    ck_assert_int_eq(parse(longer, &u, err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "host"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("redisurl");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parts_and_defaults);
    tcase_add_test(tc, refusals_say_why);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
