/* SPDX-License-Identifier: MIT */
/*
 * Every script declares every key it touches. A node with a global, an
 * exact and a tiered limit and a quota runs against a real server while a
 * MONITOR connection records every script call the library sends (each
 * script, each path the traffic reaches: the first report and the later
 * ones, a tiered key's bucket, a charge, a duplicate, a read, the leaving
 * rounds at rl_close). The calls are then replayed, in order and on an
 * empty database, as EVAL of a checking prelude followed by the script the
 * call named: the prelude shadows `redis` with a table whose call and
 * pcall fail on any key argument not in KEYS, and on any command it does
 * not know the key positions of. Engines that run scripts on declared keys
 * only (Dragonfly, strict Cluster ACLs) accept every script that passes.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "lua/scripts.h"

static const char secret[] = "script-keys-test-secret-01234567";

/* Key positions of every command the scripts may send: all of these name
 * exactly one key, their first argument. A command the scripts start to
 * use must be added here with its key positions. */
static const char prelude[] =
    "local rl_real = redis\n"
    "local rl_declared = {}\n"
    "for _, k in ipairs(KEYS) do rl_declared[k] = true end\n"
    "local rl_one_key = {GET = 1, SET = 1, INCRBY = 1, PEXPIRE = 1, PTTL = 1, HGET = 1,\n"
    "  HMGET = 1, HSET = 1, HDEL = 1, HGETALL = 1, ZADD = 1, ZREM = 1, ZRANGEBYSCORE = 1,\n"
    "  ZCOUNT = 1}\n"
    "local rl_no_key = {TIME = 1}\n"
    "local function rl_check(cmd, key)\n"
    "  local c = string.upper(cmd)\n"
    "  if rl_no_key[c] then return end\n"
    "  if not rl_one_key[c] then error('keycheck: command ' .. c .. ' unknown to the check') end\n"
    "  if not rl_declared[key] then\n"
    "    error('keycheck: undeclared key ' .. tostring(key) .. ' in ' .. c)\n"
    "  end\n"
    "end\n"
    "local redis = setmetatable({\n"
    "  call = function(...) rl_check(...); return rl_real.call(...) end,\n"
    "  pcall = function(...) rl_check(...); return rl_real.pcall(...) end,\n"
    "}, {__index = rl_real})\n";

/* The library's scripts, as sent (share.lua and the generated indices
 * included), and what the replay saw of each. */
enum { S_REPORT, S_NODES, S_EXACT, S_QUOTA, S_N };
static const char *const script_name[S_N] = {"report", "nodes", "exact", "quota"};

static const char *script_source(int i)
{
    const char *const src[S_N] = {rl__lua_report, rl__lua_nodes, rl__lua_exact, rl__lua_quota};
    return src[i];
}

static redisReply *cmd(redisContext *r, const char *fmt, const char *arg)
{
    redisReply *rep = redisCommand(r, fmt, arg);
    ck_assert_msg(rep != NULL, "%s: %s", fmt, r->errstr);
    return rep;
}

/* ------------------------------------------------------------ MONITOR */

/* One recorded call: argv[0] EVAL or EVALSHA, then the script (source or
 * SHA), numkeys, keys, arguments. */
#define CALL_ARGS_MAX 600
typedef struct call {
    int argc;
    char *argv[CALL_ARGS_MAX];
    size_t argl[CALL_ARGS_MAX];
} call_t;

typedef struct monitor {
    redisContext *r;
    pthread_t thread;
    call_t *calls;
    size_t n, cap;
    char end_mark[32];
} monitor_t;

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One quoted token of a MONITOR line (Redis's sdscatrepr escapes) at *p,
 * unescaped into a new buffer; NULL past the last. */
static char *next_token(const char **p, size_t *len)
{
    const char *s = strchr(*p, '"');
    if (s == NULL)
        return NULL;
    s++;
    char *out = malloc(strlen(s) + 1);
    ck_assert_ptr_nonnull(out);
    size_t n = 0;
    while (*s != '\0' && *s != '"') {
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        char c = *s++;
        switch (c) {
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'a': out[n++] = '\a'; break;
        case 'b': out[n++] = '\b'; break;
        case 'x':
            ck_assert(hexval(s[0]) >= 0 && hexval(s[1]) >= 0);
            out[n++] = (char)(hexval(s[0]) * 16 + hexval(s[1]));
            s += 2;
            break;
        default: out[n++] = c; break; /* \\ and \" */
        }
    }
    ck_assert_msg(*s == '"', "unterminated token in a MONITOR line");
    *p = s + 1;
    *len = n;
    out[n] = '\0';
    return out;
}

/* 1 when the line was the end mark. Commands scripts run ("[0 lua]") and
 * every other command are skipped. */
static int record(monitor_t *m, const char *line)
{
    const char *at = strchr(line, ']');
    if (at == NULL || strstr(line, " lua]") != NULL)
        return 0;
    const char *p = at + 1;
    call_t c;
    c.argc = 0;
    size_t len;
    char *tok;
    while ((tok = next_token(&p, &len)) != NULL) {
        ck_assert_int_lt(c.argc, CALL_ARGS_MAX);
        c.argv[c.argc] = tok;
        c.argl[c.argc++] = len;
    }
    int end = c.argc == 2 && strcasecmp(c.argv[0], "ECHO") == 0 &&
              strcmp(c.argv[1], m->end_mark) == 0;
    int eval = c.argc >= 3 && (strcasecmp(c.argv[0], "EVAL") == 0 ||
                               strcasecmp(c.argv[0], "EVALSHA") == 0);
    if (!eval) {
        for (int i = 0; i < c.argc; i++)
            free(c.argv[i]);
        return end;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->calls = realloc(m->calls, m->cap * sizeof *m->calls);
        ck_assert_ptr_nonnull(m->calls);
    }
    m->calls[m->n++] = c;
    return 0;
}

static void *monitor_main(void *arg)
{
    monitor_t *m = arg;
    for (;;) {
        redisReply *rep = NULL;
        if (redisGetReply(m->r, (void **)&rep) != REDIS_OK || rep == NULL)
            return NULL;
        int end = rep->type == REDIS_REPLY_STATUS && record(m, rep->str);
        freeReplyObject(rep);
        if (end)
            return NULL;
    }
}

static void monitor_start(monitor_t *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->end_mark, sizeof m->end_mark, "keycheck-end-%d", (int)getpid());
    m->r = redisConnect("127.0.0.1", rl_test_redis()->port);
    ck_assert(m->r != NULL && m->r->err == 0);
    redisReply *rep = redisCommand(m->r, "MONITOR");
    ck_assert(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    ck_assert_int_eq(pthread_create(&m->thread, NULL, monitor_main, m), 0);
}

static void monitor_stop(monitor_t *m)
{
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(cmd(r, "ECHO %s", m->end_mark));
    rl_test_release(r);
    pthread_join(m->thread, NULL);
    redisFree(m->r);
}

static void monitor_free(monitor_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        for (int j = 0; j < m->calls[i].argc; j++)
            free(m->calls[i].argv[j]);
    free(m->calls);
}

/* ------------------------------------------------------------- replay */

/* Which script a recorded call ran: its SHA (as SCRIPT LOAD names it on
 * this server) or its source. -1: none of the library's. */
static int script_of(const call_t *c, char sha[S_N][41])
{
    for (int i = 0; i < S_N; i++) {
        if (strcasecmp(c->argv[0], "EVALSHA") == 0 && strcasecmp(c->argv[1], sha[i]) == 0)
            return i;
        if (strcasecmp(c->argv[0], "EVAL") == 0 && strcmp(c->argv[1], script_source(i)) == 0)
            return i;
    }
    return -1;
}

/* Every recorded call again, as EVAL of the prelude and its script; each
 * script's count in seen[]. The first error reply fails the test. */
static void replay(monitor_t *m, unsigned seen[S_N])
{
    redisContext *r = rl_test_redis_client(0);
    char sha[S_N][41];
    char *wrapped[S_N];
    for (int i = 0; i < S_N; i++) {
        redisReply *rep = cmd(r, "SCRIPT LOAD %s", script_source(i));
        ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
        snprintf(sha[i], sizeof sha[i], "%s", rep->str);
        freeReplyObject(rep);
        size_t a = strlen(prelude), b = strlen(script_source(i));
        wrapped[i] = malloc(a + b + 1);
        ck_assert_ptr_nonnull(wrapped[i]);
        memcpy(wrapped[i], prelude, a);
        memcpy(wrapped[i] + a, script_source(i), b + 1);
        seen[i] = 0;
    }
    freeReplyObject(cmd(r, "FLUSHALL", NULL));
    for (size_t k = 0; k < m->n; k++) {
        call_t *c = &m->calls[k];
        int s = script_of(c, sha);
        ck_assert_msg(s >= 0, "call %zu runs a script that is not the library's", k);
        const char *argv[CALL_ARGS_MAX];
        size_t argl[CALL_ARGS_MAX];
        argv[0] = "EVAL";
        argl[0] = 4;
        argv[1] = wrapped[s];
        argl[1] = strlen(wrapped[s]);
        for (int j = 2; j < c->argc; j++) {
            argv[j] = c->argv[j];
            argl[j] = c->argl[j];
        }
        redisReply *rep = redisCommandArgv(r, c->argc, argv, argl);
        ck_assert_ptr_nonnull(rep);
        ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "%s.lua (call %zu, %s keys): %s",
                      script_name[s], k, c->argv[2], rep->str);
        freeReplyObject(rep);
        seen[s]++;
    }
    for (int i = 0; i < S_N; i++)
        free(wrapped[i]);
    rl_test_release(r);
}

/* -------------------------------------------------------------- tests */

static int add_quota(rl_t *rl, const char *spec)
{
    rl_quota_t q;
    char err[200];
    ck_assert_msg(rl_quota_parse(&q, spec, err, sizeof err) == 0, "%s: %s", spec, err);
    int id = rl_quota_add(rl, &q);
    ck_assert_msg(id >= 0, "%s: %s", spec, rl_err_name(id));
    return id;
}

static rl_t *open_node(void)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = "keycheck";
    c.sync_interval_ms = 50;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.exact_timeout_ms = 10000;
    c.quota_timeout_ms = 10000;
    c.log_quiet = 1;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl_open(&rl, &c), 0);
    return rl;
}

static _Atomic unsigned async_done;
static void on_async(void *ud, int rc, const rl_quota_result_t *r)
{
    (void)ud;
    (void)rc;
    (void)r;
    atomic_fetch_add(&async_done, 1);
}

/* Traffic that takes every script down the paths a node's life reaches. */
static void drive(rl_t *rl)
{
    int g = rl_test_add(rl, "name=g rate=100/s burst=20 mode=global");
    int x = rl_test_add(rl, "name=x rate=5/s burst=3 mode=exact");
    int t = rl_test_add(rl, "name=t rate=50/s burst=10 mode=tiered");
    int q = add_quota(rl, "name=q amount=3 period=day on_failure=closed");
    int f = add_quota(rl, "name=f amount=100 period=60s on_failure=open");
    rl_stats_t st;
    uint64_t until = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u;
    for (unsigned i = 0;; i++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%u", i % 4);
        rl_decision_t d;
        rl_decision_init(&d);
        rl_check(rl, g, key, (size_t)len, 1, &d);
        rl_check(rl, x, key, (size_t)len, 1, &d);
        rl_check(rl, x, key, (size_t)len, 0, &d); /* a peek */
        rl_check(rl, t, key, (size_t)len, 1, &d);
        rl_stats_init(&st);
        rl_stats(rl, &st);
        if (i >= 200 && st.sync_rounds_completed >= 10)
            break;
        ck_assert_msg(rl_test_now_ns() < until, "the sync rounds never went through");
        rl_test_sleep_ms(2);
    }
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    for (int i = 0; i < 5; i++) /* the last two denied: over the amount */
        ck_assert_int_ge(rl_quota_charge(rl, q, "user", 4, 1, &"abcde"[i], 1, &r), 0);
    ck_assert_int_eq(rl_quota_charge(rl, q, "user", 4, 1, "a", 1, &r), RL_ALLOW);
    ck_assert(r.flags & RL_FLAG_DUPLICATE);
    ck_assert_int_ge(rl_quota_get(rl, q, "user", 4, &r), 0);
    ck_assert_int_ge(rl_quota_get(rl, f, "other", 5, &r), 0);
    ck_assert_int_eq(rl_quota_charge_async(rl, f, "other", 5, 2, "z", 1, on_async, NULL),
                     RL_PENDING);
    WAIT_FOR(atomic_load(&async_done) == 1);
}

START_TEST(every_script_declares_every_key)
{
    if (rl_test_redis_skipped())
        return;
    monitor_t m;
    monitor_start(&m);
    rl_t *rl = open_node();
    drive(rl);
    rl_close(rl); /* the leaving rounds: report.lua and nodes.lua's removal */
    monitor_stop(&m);
    unsigned seen[S_N];
    replay(&m, seen);
    for (int i = 0; i < S_N; i++)
        ck_assert_msg(seen[i] > 0, "no call of %s.lua was recorded", script_name[i]);
    monitor_free(&m);
    rl_test_release_all();
}
END_TEST

/* The check itself fails on a key a script builds: quota.lua's counter as
 * it was named before (KEYS[1] .. the period start). */
START_TEST(the_check_fails_on_a_built_key)
{
    if (rl_test_redis_skipped())
        return;
    redisContext *r = rl_test_redis_client(0);
    const char body[] = "return redis.call('GET', KEYS[1] .. '1700000000000')";
    char *src = malloc(sizeof prelude + sizeof body);
    ck_assert_ptr_nonnull(src);
    snprintf(src, sizeof prelude + sizeof body, "%s%s", prelude, body);
    redisReply *rep = redisCommand(r, "EVAL %s 1 {t}:p:", src);
    free(src);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_ERROR);
    ck_assert_ptr_nonnull(strstr(rep->str, "keycheck: undeclared key {t}:p:1700000000000"));
    freeReplyObject(rep);
    rl_test_release_all();
}
END_TEST

/* quota.lua given counters none of which is Redis's period answers
 * {-1, now} and writes nothing: the node asks again from that now. */
START_TEST(quota_names_the_wrong_period_and_touches_nothing)
{
    if (rl_test_redis_skipped())
        return;
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(cmd(r, "FLUSHALL", NULL));
    const char *argv[] = {"EVAL", rl__lua_quota, "4", "{t}:p:0", "{t}:r:1", "{t}:p:0",
                          "{t}:p:3600000", "c", "1", "10", "0", "0", "60000", "0"};
    size_t argl[14];
    for (int i = 0; i < 14; i++)
        argl[i] = strlen(argv[i]);
    redisReply *rep = redisCommandArgv(r, 14, argv, argl);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(rep->elements, 2);
    ck_assert_int_eq(rep->element[0]->integer, -1);
    ck_assert_int_gt(rep->element[1]->integer, INT64_C(1700000000000));
    freeReplyObject(rep);
    rep = cmd(r, "DBSIZE", NULL);
    ck_assert_int_eq(rep->integer, 0);
    freeReplyObject(rep);
    rl_test_release_all();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("script_keys");
    TCase *tc = tcase_create("keys");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_check_fails_on_a_built_key);
    tcase_add_test(tc, quota_names_the_wrong_period_and_touches_nothing);
    tcase_add_test(tc, every_script_declares_every_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
