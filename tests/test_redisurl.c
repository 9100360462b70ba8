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

START_TEST(unix_cluster_sentinel)
{
    rl_redisurl_t u;
    char err[256], where[300];
    ck_assert_int_eq(parse("redis+unix:///run/redis/redis.sock", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_UNIX);
    ck_assert_str_eq(u.path, "/run/redis/redis.sock");
    ck_assert_int_eq(u.db, 0);
    ck_assert_int_eq(parse("unix://app:pw@/tmp/r.sock?db=4", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_UNIX);
    ck_assert_str_eq(u.path, "/tmp/r.sock");
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "pw");
    ck_assert_int_eq(u.db, 4);
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "unix:/tmp/r.sock");
    ck_assert_int_eq(parse("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2,n-3:7002/", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_CLUSTER);
    ck_assert_int_eq(u.nhosts, 3);
    ck_assert_str_eq(u.hosts[0].host, "10.0.0.1");
    ck_assert_int_eq(u.hosts[0].port, 7000);
    ck_assert_str_eq(u.hosts[1].host, "10.0.0.2");
    ck_assert_int_eq(u.hosts[1].port, 6379);
    ck_assert_str_eq(u.hosts[2].host, "n-3");
    ck_assert_int_eq(u.hosts[2].port, 7002);
    ck_assert_str_eq(u.host, "10.0.0.1"); /* where conn.c starts */
    ck_assert_int_eq(u.port, 7000);
    ck_assert_str_eq(u.password, "pw");
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "cluster 10.0.0.1:7000,10.0.0.2:6379,n-3:7002");
    ck_assert_int_eq(parse("redis+cluster://a,b,c,d,e,f,g,h/0", &u, err), 0);
    ck_assert_int_eq(u.nhosts, RL_REDISURL_HOSTS_MAX);
    ck_assert_int_eq(parse("redis+sentinel://s1:26379,s2:26380/mymaster/2", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_SENTINEL);
    ck_assert_int_eq(u.nhosts, 2);
    ck_assert_str_eq(u.master, "mymaster");
    ck_assert_int_eq(u.db, 2);
    ck_assert_int_eq(u.hosts[1].port, 26380);
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "sentinel s1:26379,s2:26380/mymaster");
    ck_assert_int_eq(parse("redis://h:7", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_TCP);
    ck_assert_int_eq(u.nhosts, 1);
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "h:7");
}
END_TEST

static const struct {
    const char *url, *says;
} bad[] = {
    {"cache:6379", "no scheme"},
#ifndef RL_HAVE_TLS /* with TLS they parse: test_tls */
    {"rediss://h", "TLS"},
    {"rediss+cluster://h", "TLS"},
#endif
    {"http://h", "must start with redis://"},
    {"redis+clusterx://h", "(scheme \"redis+clusterx\" unknown)"},
    {"unix://tmp/redis.sock", "socket path: must be absolute"},
    {"redis+unix://", "socket path: must be absolute"},
    {"unix:///tmp/s?db=x", "db must be a number"},
    {"unix:///tmp/s?db=", "db must be a number"},
    {"unix:///tmp/s?timeout=3", "only ?db=N"},
    {"redis://a,b", "host list: redis:// names one server"},
    {"redis+cluster://", "host list: empty"},
    {"redis+cluster:///", "host list: empty"},
    {"redis+cluster://a:1,", "host 2: missing"},
    {"redis+cluster://a:1,,b", "host 2: missing"},
    {"redis+cluster://a:1,:7000", "host 2: missing"},
    {"redis+cluster://a:1,b:0", "port must be 1..65535 (host 2"},
    {"redis+cluster://a:1,b:x", "port must be 1..65535 (host 2"},
    {"redis+cluster://a:1,b:70000", "port must be 1..65535 (host 2"},
    {"redis+cluster://a:1,b!:2", "host byte 1 is 0x21 (host 2"},
    {"redis+cluster://a,b,c,d,e,f,g,h,i", "more than 8 hosts"},
    {"redis+cluster://a:1/2", "a Redis Cluster has db 0 only"},
    {"redis+sentinel://s1:26379", "master name: missing"},
    {"redis+sentinel://s1:26379/", "master name: missing"},
    {"redis+sentinel://s1:26379//3", "master name: missing"},
    {"redis+sentinel://s1:26379/my*master", "master name: byte 2 is 0x2a"},
    {"redis+sentinel://s1:26379/m/x", "db must be a number"},
    {"redis+sentinel://,s1/m", "host 1: missing"},
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

START_TEST(refusals_say_why)
{
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
    char path[200] = "unix:///";
    memset(path + 8, 'p', 150);
    ck_assert_int_eq(parse(path, &u, err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "socket path: longer than 107 bytes"));
    ck_assert_int_eq(parse("redis+sentinel://:hunter2@h/bad*name", &u, err), RL_ERANGE);
    ck_assert_ptr_null(strstr(err, "hunter2"));
}
END_TEST


/* The public check is the parser rl_open uses: the same verdict and the
 * same message for every URL, and no need for an out-buffer. */
START_TEST(public_check_is_the_parser)
{
    static const char *const good[] = {
        "redis://127.0.0.1:6379/2", "redis://:pw@h", "unix:///tmp/r.sock?db=3",
        "redis+unix:///tmp/r.sock", "redis+cluster://a:1,b:2", "redis+sentinel://s1,s2:26380/m",
    };
    char err[256];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ck_assert_msg(rl_redis_url_check(good[i], err, sizeof err) == 0, "%s: %s", good[i], err);
        ck_assert_int_eq(rl_redis_url_check(good[i], NULL, 0), 0);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_redisurl_t u;
        char want[256] = "";
        err[0] = '\0';
        ck_assert_int_eq(parse(bad[i].url, &u, want), RL_ERANGE);
        ck_assert_int_eq(rl_redis_url_check(bad[i].url, err, sizeof err), RL_ERANGE);
        ck_assert_str_eq(err, want);
        ck_assert_int_eq(rl_redis_url_check(bad[i].url, NULL, 0), RL_ERANGE);
    }
    ck_assert_int_eq(rl_redis_url_check(NULL, err, sizeof err), RL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "redis_url"));
    /* A cut buffer is terminated, never overrun. */
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    ck_assert_int_eq(rl_redis_url_check("redis://h:0", tiny, 4), RL_ERANGE);
    ck_assert_int_eq(tiny[3], '\0');
    ck_assert_int_eq(tiny[4], 'x');
}
END_TEST

/* Userinfo is percent-decoded (RFC 3986), the form secret stores and other
 * clients write; a raw password still works where it is unambiguous (a '%'
 * not followed by two hex digits is itself). */
START_TEST(userinfo_percent_decoded)
{
    rl_redisurl_t u;
    char err[256];
    ck_assert_int_eq(parse("redis://:p%40ss%3Aw%2Frd@h:1", &u, err), 0);
    ck_assert_str_eq(u.password, "p@ss:w/rd");
    ck_assert_str_eq(u.user, "");
    ck_assert_int_eq(parse("redis://ap%70:x%2fy@h", &u, err), 0);
    ck_assert_str_eq(u.user, "app");
    ck_assert_str_eq(u.password, "x/y");
    ck_assert_int_eq(parse("redis://:p@ss:w@h:1", &u, err), 0); /* raw, as before */
    ck_assert_str_eq(u.password, "p@ss:w");
    ck_assert_int_eq(parse("redis://:100%sure%@h:1", &u, err), 0);
    ck_assert_str_eq(u.password, "100%sure%");
    ck_assert_int_eq(parse("redis+unix://:a%20b@/tmp/r.sock", &u, err), 0);
    ck_assert_str_eq(u.password, "a b");
    /* a decoded NUL would cut the password short: refused, not cut */
    ck_assert_int_eq(parse("redis://:a%00b@h", &u, err), RL_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "password"));
    ck_assert_ptr_null(strstr(err, "a%00b"));
}
END_TEST

/* Bracketed IPv6 literals; unix:/path; a query blamed as a query; every
 * refusal names the part at fault. */
START_TEST(ipv6_unix_and_query)
{
    rl_redisurl_t u;
    char err[256] = "";
    ck_assert_int_eq(parse("redis://[::1]:7000/2", &u, err), 0);
    ck_assert_str_eq(u.host, "::1");
    ck_assert_int_eq(u.port, 7000);
    ck_assert_int_eq(u.db, 2);
    ck_assert_int_eq(parse("redis://:pw@[fe80::1:2]", &u, err), 0);
    ck_assert_str_eq(u.host, "fe80::1:2");
    ck_assert_int_eq(u.port, 6379);
    ck_assert_int_eq(parse("redis+cluster://[::1]:7000,[::1]:7001", &u, err), 0);
    ck_assert_int_eq(u.nhosts, 2);
    ck_assert_int_eq(u.hosts[1].port, 7001);
    char where[128];
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "cluster [::1]:7000,[::1]:7001");
    ck_assert_int_eq(parse("unix:/tmp/r.sock?db=1", &u, err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_UNIX);
    ck_assert_str_eq(u.path, "/tmp/r.sock");
    ck_assert_int_eq(u.db, 1);
    static const struct {
        const char *url, *says;
    } refused[] = {
        {"redis://h:6379?timeout=1", "query \"?timeout=1\""},
        {"redis://h:6379/0?timeout=1", "query \"?timeout=1\""},
        {"redis://h?db=1", "query"},
        {"redis://[::1:6379", "host 1: '[' without its ']'"},
        {"redis://[::1]6379", "after ']'"},
        {"redis://[]:1", "host 1: empty"},
        {"redis://[::g]:1", "IPv6"},
        {"unix:tmp/r.sock", "socket path: must be absolute"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(parse(refused[i].url, &u, err), RL_ERANGE);
        ck_assert_msg(strstr(err, refused[i].says) != NULL, "%s: \"%s\" lacks \"%s\"", refused[i].url,
                      err, refused[i].says);
        ck_assert_msg(strstr(err, "port must be") == NULL, "%s: blames the port: %s",
                      refused[i].url, err);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("redisurl");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parts_and_defaults);
    tcase_add_test(tc, unix_cluster_sentinel);
    tcase_add_test(tc, refusals_say_why);
    tcase_add_test(tc, public_check_is_the_parser);
    tcase_add_test(tc, userinfo_percent_decoded);
    tcase_add_test(tc, ipv6_unix_and_query);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
