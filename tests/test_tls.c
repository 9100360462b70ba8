/* SPDX-License-Identifier: MIT */
/*
 * rediss:// against a real TLS redis-server, its certificates made by the
 * fixture with openssl(1): the bound of a global limit, exact mode and
 * quotas over TLS; every bad certificate (expired, the wrong host, an
 * unknown CA), a missing client certificate and a silent port refused with
 * a message naming the server, and no password in any log line; a server
 * certificate rotated (a restart under the same CA) mid-run loses no count.
 * A build without TLS refuses rediss:// and says why.
 */
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "redis/url.h"
#include "sync/sync.h"

START_TEST(url_takes_tls_settings)
{
    rl_redisurl_t u;
    char err[512] = "";
#ifndef RL_HAVE_TLS
    ck_assert_int_eq(rl__redisurl_parse("rediss://h:6380", &u, err, sizeof err), RL_ERANGE);
    ck_assert_msg(strstr(err, "this build has no TLS") != NULL, "%s", err);
#else
    const char *url = "rediss://u:p%40ss@h:6380/2?tls_ca_file=/a%20b/ca.pem&tls_cert=/c.pem&"
                      "tls_key=/k.pem&tls_server_name=redis.example";
    ck_assert_msg(rl__redisurl_parse(url, &u, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(u.tls.on, 1);
    ck_assert_int_eq(u.kind, RL_REDISURL_TCP);
    ck_assert_str_eq(u.host, "h");
    ck_assert_int_eq(u.port, 6380);
    ck_assert_int_eq(u.db, 2);
    ck_assert_str_eq(u.password, "p@ss");
    ck_assert_str_eq(u.tls.ca_file, "/a b/ca.pem");
    ck_assert_str_eq(u.tls.cert, "/c.pem");
    ck_assert_str_eq(u.tls.key, "/k.pem");
    ck_assert_str_eq(u.tls.server_name, "redis.example");
    ck_assert_int_eq(rl__redisurl_parse("rediss+cluster://a:1,b:2?tls_ca_dir=/d", &u, err,
                                        sizeof err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_CLUSTER);
    ck_assert_int_eq(u.nhosts, 2);
    ck_assert_str_eq(u.tls.ca_dir, "/d");
    ck_assert_int_eq(rl__redisurl_parse("rediss+sentinel://s:26379/mymaster/1?tls_ca_file=/c",
                                        &u, err, sizeof err), 0);
    ck_assert_int_eq(u.kind, RL_REDISURL_SENTINEL);
    ck_assert_str_eq(u.master, "mymaster");
    ck_assert_int_eq(u.db, 1);
    ck_assert_int_eq(u.tls.on, 1);
    char where[128];
    rl__redisurl_where(&u, where, sizeof where);
    ck_assert_str_eq(where, "tls sentinel s:26379/mymaster");
    ck_assert_int_eq(rl__redisurl_parse("rediss://h", &u, err, sizeof err), 0);
    ck_assert_int_eq(u.tls.ca_file[0], '\0');
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"rediss+unix:///tmp/s", "TLS over a unix socket"},
        {"rediss://h?tls_cert=/c", "tls_key is missing"},
        {"rediss://h?tls_key=/k", "tls_cert is missing"},
        {"rediss://h?tls_verify=none", "\"tls_verify\" unknown"},
        {"rediss://h?tls_ca_file=", "tls_ca_file: empty"},
        {"rediss://h?tls_ca_file=/a&tls_ca_file=/b", "tls_ca_file given twice"},
        {"rediss://h?tls_ca_file=/a%zz", "two hex digits"},
        {"rediss://h?tls_ca_file=/a&", "ends with '&'"},
        {"rediss://h?tls_server_name=a/b", "tls_server_name: a DNS name"},
        {"redis://h?tls_ca_file=/a", "query"},
        {"rediss://h:0", "port must be"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(rl__redisurl_parse(bad[i].url, &u, err, sizeof err), RL_ERANGE);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "%s: \"%s\" lacks \"%s\"", bad[i].url,
                      err, bad[i].says);
    }
#endif
}
END_TEST

#ifdef RL_HAVE_TLS

/* ------------------------------------------------------------- helpers */

static const char secret[] = "tls-fleet-secret-0123456789";

/* The log lines of one instance, for the refusals' messages. */
typedef struct logcap {
    pthread_mutex_t mu;
    char buf[16384];
    size_t n;
} logcap_t;

static void cap_log(void *ud, int32_t level, const char *msg)
{
    (void)level;
    logcap_t *c = ud;
    pthread_mutex_lock(&c->mu);
    int w = snprintf(c->buf + c->n, sizeof c->buf - c->n, "%s\n", msg);
    if (w > 0 && c->n + (size_t)w < sizeof c->buf)
        c->n += (size_t)w;
    pthread_mutex_unlock(&c->mu);
}

static int cap_has(logcap_t *c, const char *s)
{
    pthread_mutex_lock(&c->mu);
    int found = strstr(c->buf, s) != NULL;
    pthread_mutex_unlock(&c->mu);
    return found;
}

static void cap_init(logcap_t *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

static rl_t *open_url(const char *url, const char *node, logcap_t *cap)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.node_id = node;
    /* Rounds of TLS under valgrind's one-thread-at-a-time take longer. */
    c.sync_interval_ms = getenv("RL_VALGRIND") != NULL ? 200 : 50;
    c.reconnect_max_ms = 100;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = "t";
    c.quota_timeout_ms = 30000;
    c.exact_timeout_ms = 5000;
    if (cap != NULL) {
        c.log = cap_log;
        c.log_ud = cap;
    } else {
        c.log_quiet = 1;
    }
    rl_t *rl = NULL;
    char err[512] = "";
    c.err = err;
    c.errlen = sizeof err;
    ck_assert_msg(rl_open(&rl, &c) == 0, "rl_open(%s): %s", url, err);
    return rl_test_hold(rl, rl_test_close_fn);
}

static int connected(rl_t *rl)
{
    rl_sync_counters_t c;
    rl__sync_counters(rl->sync, &c);
    return c.connected == 1;
}

static uint64_t rounds(rl_t *rl)
{
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(rl, &st), 0);
    return st.sync_rounds_completed;
}

/* The totals field "a" of the one key hash of limit, on the plain port. */
static long long admitted_in_redis(const char *limit)
{
    redisContext *r = rl_test_redis_client(0);
    redisReply *keys = redisCommand(r, "KEYS {t:v1:%s:*", limit);
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(keys->elements, 1);
    redisReply *h = redisCommand(r, "HGET %s a", keys->element[0]->str);
    long long v = h->type == REDIS_REPLY_STRING ? atoll(h->str) : -1;
    freeReplyObject(h);
    freeReplyObject(keys);
    rl_test_release(r);
    return v;
}

typedef struct driver {
    rl_t *rl;
    int id;
    _Atomic uint64_t admitted, checks; /* read mid-run by the test thread */
    rl_test_driver_t th;
} driver_t;

static void drive(void *arg)
{
    driver_t *d = arg;
    for (int i = 0; i < 50; i++) {
        atomic_fetch_add(&d->admitted, rl_check(d->rl, d->id, "tenant-1", 8, 1, NULL) == RL_ALLOW);
        atomic_fetch_add(&d->checks, 1);
    }
}

static void driver_start(driver_t *d, rl_t *rl, int id)
{
    d->rl = rl;
    d->id = id;
    atomic_init(&d->admitted, 0);
    atomic_init(&d->checks, 0);
    rl_test_driver_start(&d->th, drive, d, 1);
}

/* A server of the fixture's CA on cert, for a test of its own. */
typedef struct side {
    rl_test_redis_t srv;
    rl_test_tls_args_t args;
} side_t;

static void side_stop(void *p)
{
    rl_test_redis_stop(&((side_t *)p)->srv);
    free(p);
}

static side_t *side_start(const char *cert, int require_client)
{
    side_t *s = calloc(1, sizeof *s);
    ck_assert_ptr_nonnull(s);
    char err[1024];
    int rc = rl_test_tls_server_start(&s->srv, &s->args, rl_test_tls_dir(), cert, require_client,
                                      err, sizeof err);
    ck_assert_msg(rc == 0, "%s", err);
    return rl_test_hold(s, side_stop);
}

/* ------------------------------------------------------ the bound holds */

START_TEST(global_bound_holds_over_tls)
{
    /* Three nodes over TLS, one limit of 200/s; all the load on node 0.
     * The fleet stays within burst + rate x elapsed + the pre-sync
     * allowance, and after rl_close Redis (read on its plain port) holds
     * exactly what the nodes admitted. */
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *nodes[3];
    int ids[3];
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "node-%d", i);
        nodes[i] = open_url(rl_test_redis_tls_url(), name, NULL);
        ids[i] = rl_test_add(nodes[i], "name=g rate=200/s burst=20");
    }
    for (int i = 0; i < 3; i++)
        WAIT_FOR(connected(nodes[i]));
    uint64_t t0 = rl_test_now_ns();
    static driver_t d;
    driver_start(&d, nodes[0], ids[0]);
    uint64_t r0 = rounds(nodes[0]);
    WAIT_FOR(rounds(nodes[0]) >= r0 + 20 && atomic_load(&d.checks) >= 2000);
    rl_test_release(&d.th);
    double elapsed = (double)(rl_test_now_ns() - t0) / 1e9;
    uint64_t total = atomic_load(&d.admitted);
    ck_assert_msg((double)total <= 20 + 200 * elapsed + 20,
                  "admitted %llu in %.2f s: above burst + rate x elapsed",
                  (unsigned long long)total, elapsed);
    ck_assert_uint_gt(total, 20); /* the shares moved: more than the burst */
    for (int i = 0; i < 3; i++)
        rl_test_release(nodes[i]);
    ck_assert_int_eq(admitted_in_redis("g"), (long long)total);
}
END_TEST

/* ------------------------------------------------- refusals, and why */

/* Open on url and wait for a log line holding every one of says[]; the
 * instance stays degraded, and the password never shows. */
static void refused_with(const char *url, const char *const *says)
{
    static logcap_t cap;
    cap_init(&cap);
    rl_t *rl = open_url(url, "refused", &cap);
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (int i = 0; says[i] != NULL; i++) {
        for (unsigned k = 0; !cap_has(&cap, says[i]) && rl_test_now_ns() < until; k++)
            rl_test_poll_pause(k);
        ck_assert_msg(cap_has(&cap, says[i]), "no \"%s\" in the log:\n%s", says[i], cap.buf);
    }
    WAIT_FOR(rl_test_health(rl) == RL_HEALTH_DEGRADED);
    ck_assert_int_eq(connected(rl), 0);
    rl_test_release(rl);
    ck_assert_msg(!cap_has(&cap, "hunter2"), "a password in the log: %s", cap.buf);
}

static void bad_cert(const char *cert, const char *server_name, const char *says,
                     const char *hint)
{
    side_t *s = side_start(cert, 0);
    char url[512], node[64];
    const char *dir = rl_test_tls_dir();
    snprintf(url, sizeof url, "rediss://:hunter2@127.0.0.1:%d?tls_ca_file=%s/ca.crt%s%s",
             s->args.port, dir, server_name ? "&tls_server_name=" : "",
             server_name ? server_name : "");
    snprintf(node, sizeof node, "TLS with 127.0.0.1:%d: certificate verify failed",
             s->args.port);
    const char *const want[] = {node, says, hint, NULL};
    refused_with(url, want);
    rl_test_release(s);
}

START_TEST(expired_certificate_refused)
{
    bad_cert("expired", NULL, "certificate has expired", "renew it");
}
END_TEST

START_TEST(wrong_host_refused)
{
    /* By address (the certificate's IP entries), then by name. */
    bad_cert("wronghost", NULL, "IP address mismatch", "names another host");
    bad_cert("wronghost", "localhost", "hostname mismatch", "set tls_server_name");
}
END_TEST

START_TEST(unknown_ca_refused)
{
    bad_cert("unknownca", NULL, "unable to get local issuer certificate", "unknown CA");
}
END_TEST

START_TEST(cluster_and_sentinel_connections_verify)
{
    /* A Cluster seed and a Sentinel are TLS servers too, verified the same
     * way: each refused for its expired certificate, by name. */
    side_t *s = side_start("expired", 0);
    const char *dir = rl_test_tls_dir();
    static const char *const forms[][2] = {{"rediss+cluster", ""}, {"rediss+sentinel", "/m"}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char url[512], node[96];
        snprintf(url, sizeof url, "%s://127.0.0.1:%d%s?tls_ca_file=%s/ca.crt", forms[i][0],
                 s->args.port, forms[i][1], dir);
        snprintf(node, sizeof node, "TLS with 127.0.0.1:%d: certificate verify failed",
                 s->args.port);
        const char *const want[] = {node, "certificate has expired", NULL};
        refused_with(url, want);
    }
    rl_test_release(s);
}
END_TEST

START_TEST(missing_client_certificate_refused)
{
    side_t *s = side_start("server", 1);
    char url[512], node[64];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?tls_ca_file=%s/ca.crt", s->args.port,
             rl_test_tls_dir());
    snprintf(node, sizeof node, "TLS with 127.0.0.1:%d:", s->args.port);
    const char *const want[] = {node, "set tls_cert and tls_key", NULL};
    refused_with(url, want);
    rl_test_release(s);
}
END_TEST

START_TEST(silent_port_is_a_handshake_timeout)
{
    /* A port that accepts connections (the kernel's backlog) and never
     * answers a ClientHello: the connect deadline names the handshake. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char url[512], node[96];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d?tls_ca_file=%s/ca.crt", ntohs(a.sin_port),
             rl_test_tls_dir());
    snprintf(node, sizeof node, "TLS with 127.0.0.1:%d: handshake timed out", ntohs(a.sin_port));
    const char *const want[] = {node, NULL};
    refused_with(url, want);
    close(fd);
}
END_TEST

START_TEST(bad_tls_files_fail_rl_open)
{
    const char *dir = rl_test_tls_dir();
    char url[512], err[512];
    rl_config_t c;
    rl_config_init(&c);
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.err = err;
    c.errlen = sizeof err;
    c.redis_url = url;
    rl_t *rl = NULL;
    snprintf(url, sizeof url, "rediss://127.0.0.1:1?tls_ca_file=%s/nothing.crt", dir);
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_msg(strstr(err, "tls_ca_file") && strstr(err, "nothing.crt"), "%s", err);
    /* A key that is not the certificate's: named, its bytes never shown. */
    snprintf(url, sizeof url,
             "rediss://127.0.0.1:1?tls_ca_file=%s/ca.crt&tls_cert=%s/client.crt&"
             "tls_key=%s/server.key",
             dir, dir, dir);
    ck_assert_int_eq(rl_open(&rl, &c), RL_ERANGE);
    ck_assert_msg(strstr(err, "is not the key of tls_cert"), "%s", err);
    ck_assert_ptr_null(strstr(err, "PRIVATE"));
}
END_TEST

/* ------------------------------------------------------------ rotation */

START_TEST(rotated_certificate_loses_no_count)
{
    /* One node checking all along; the server is restarted mid-run on a
     * new certificate of the same CA (its data on disk). The node comes
     * back over TLS, and Redis holds every admitted check at the end. */
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *rl = open_url(rl_test_redis_tls_url(), "rot", NULL);
    int id = rl_test_add(rl, "name=rot rate=1000000/s burst=1000000");
    WAIT_FOR(connected(rl));
    static driver_t d;
    driver_start(&d, rl, id);
    uint64_t r0 = rounds(rl);
    WAIT_FOR(rounds(rl) >= r0 + 5);
    char err[1024];
    ck_assert_msg(rl_test_tls_server_rotate(rl_test_redis(), rl_test_tls_args(),
                                            rl_test_tls_dir(), "server2", err, sizeof err) == 0,
                  "%s", err);
    uint64_t r1 = rounds(rl);
    WAIT_FOR(rounds(rl) >= r1 + 5 && connected(rl));
    rl_test_release(&d.th);
    uint64_t total = atomic_load(&d.admitted);
    ck_assert_uint_eq(total, atomic_load(&d.checks)); /* the limit never denied */
    rl_test_release(rl);
    ck_assert_int_eq(admitted_in_redis("rot"), (long long)total);
}
END_TEST

/* -------------------------------------------------- exact and quotas */

START_TEST(exact_mode_over_tls)
{
    /* Two nodes on one exact key of burst 10 at 1/s: Redis answers every
     * check over TLS, and the fleet admits the burst and at most what the
     * rate added meanwhile. */
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *n[2] = {open_url(rl_test_redis_tls_url(), "ea", NULL),
                  open_url(rl_test_redis_tls_url(), "eb", NULL)};
    int id[2];
    for (int i = 0; i < 2; i++)
        id[i] = rl_test_add(n[i], "name=ex rate=1/s burst=10 mode=exact on_failure=closed");
    for (int i = 0; i < 2; i++) /* each node's exact thread connected */
        for (unsigned k = 0;; k++) {
            rl_decision_t dec;
            rl_decision_init(&dec);
            rl_check(n[i], id[i], "warmup", 6, 0, &dec);
            if (dec.flags & RL_FLAG_EXACT)
                break;
            ck_assert_msg(k < 100000, "the exact path never answered");
            rl_test_poll_pause(k);
        }
    uint64_t t0 = rl_test_now_ns();
    unsigned allowed = 0, exact = 0;
    for (int i = 0; i < 60; i++) {
        rl_decision_t dec;
        rl_decision_init(&dec);
        int rc = rl_check(n[i % 2], id[i % 2], "k", 1, 1, &dec);
        allowed += rc == RL_ALLOW;
        exact += (dec.flags & RL_FLAG_EXACT) != 0;
    }
    double elapsed = (double)(rl_test_now_ns() - t0) / 1e9;
    ck_assert_uint_eq(exact, 60);
    ck_assert_uint_ge(allowed, 10);
    ck_assert_msg(allowed <= 10 + 1 * elapsed + 1, "allowed %u in %.2f s", allowed, elapsed);
}
END_TEST

START_TEST(quota_over_tls)
{
    /* 50 distinct charges against an amount of 30, each retried once: 30
     * allowed, 20 denied, the retries answered as duplicates, nothing
     * degraded; the ledger says 30. */
    if (rl_test_redis_skipped())
        return;
    rl_test_redis_flushall();
    rl_t *rl = open_url(rl_test_redis_tls_url(), "q", NULL);
    rl_quota_t q;
    char err[200];
    ck_assert_msg(rl_quota_parse(&q, "name=tq amount=30 period=month", err, sizeof err) == 0,
                  "%s", err);
    int qid = rl_quota_add(rl, &q);
    ck_assert_int_ge(qid, 0);
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    WAIT_FOR(rl_quota_get(rl, qid, "tenant", 6, &r) >= 0 && !(r.flags & RL_FLAG_DEGRADED));
    unsigned allowed = 0, denied = 0, dups = 0;
    for (int i = 0; i < 100; i++) {
        char rid[16];
        int len = snprintf(rid, sizeof rid, "r%d", i / 2);
        rl_quota_result_t out;
        rl_quota_result_init(&out);
        int rc = rl_quota_charge(rl, qid, "tenant", 6, 1, rid, (size_t)len, &out);
        ck_assert_msg(!(out.flags & RL_FLAG_DEGRADED), "charge %d degraded", i);
        if (out.flags & RL_FLAG_DUPLICATE)
            dups++;
        else if (rc == RL_ALLOW)
            allowed++;
        else if (rc == RL_DENY)
            denied++;
    }
    ck_assert_uint_eq(allowed, 30);
    ck_assert_uint_eq(denied, 20);
    ck_assert_uint_eq(dups, 50);
    rl_quota_result_init(&r);
    ck_assert_int_ge(rl_quota_get(rl, qid, "tenant", 6, &r), 0);
    ck_assert_uint_eq(r.used, 30);
}
END_TEST

#endif /* RL_HAVE_TLS */

static Suite *suite(void)
{
    Suite *s = suite_create("tls");
    TCase *url = tcase_create("url");
    tcase_add_test(url, url_takes_tls_settings);
    suite_add_tcase(s, url);
#ifdef RL_HAVE_TLS
    TCase *tc = tcase_create("server");
    rl_test_redis_fixture_tls(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, global_bound_holds_over_tls);
    tcase_add_test(tc, expired_certificate_refused);
    tcase_add_test(tc, wrong_host_refused);
    tcase_add_test(tc, unknown_ca_refused);
    tcase_add_test(tc, missing_client_certificate_refused);
    tcase_add_test(tc, cluster_and_sentinel_connections_verify);
    tcase_add_test(tc, silent_port_is_a_handshake_timeout);
    tcase_add_test(tc, bad_tls_files_fail_rl_open);
    tcase_add_test(tc, exact_mode_over_tls);
    tcase_add_test(tc, quota_over_tls);
    tcase_add_test(tc, rotated_certificate_loses_no_count);
    suite_add_tcase(s, tc);
#endif
    return s;
}

int main(void) { return rl_test_run(suite()); }
