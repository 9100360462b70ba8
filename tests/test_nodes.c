/* SPDX-License-Identifier: MIT */
/* The node registry (src/sync/nodes.h, src/lua/nodes.lua) against a real
 * redis-server: each sync round writes one heartbeat per node, a clean
 * rl_close removes it, stale entries are pruned a bounded batch at a time,
 * and a failing registry never fails a round nor touches health. */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "redis_fixture.h"
#include "instance.h"
#include "lua/scripts.h"
#include "sync/sync.h"
#include "sync/nodes.h"

/* Run a command that must not fail; the caller frees the reply. */
static redisReply *cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    ck_assert_msg(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
                  rep ? rep->str : "no reply");
    return rep;
}

/* Nodes sync every 200 ms (manual ones only when stepped): entries live
 * 10 intervals, 2 s, so a slow machine does not make them stale. */
#define INTERVAL_MS 200

static rl_t *open_node(const char *node, const char *prefix, int manual)
{
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = rl_test_redis_url();
    c.node_id = node;
    c.sync_interval_ms = INTERVAL_MS;
    c.key_secret = "fleet-secret-0123456789";
    c.key_secret_len = 23;
    c.key_prefix = prefix;
    rl_t *rl = NULL;
    ck_assert_int_eq(rl__open(&rl, &c, manual), 0);
    return rl_test_hold(rl, rl_test_close_fn);
}

static rl_sync_counters_t counters(rl_t *rl)
{
    rl_sync_counters_t c;
    rl__sync_counters(rl->sync, &c);
    return c;
}

static int is_ready(rl_t *rl)
{
    rl_sync_counters_t c = counters(rl);
    return c.connected == 1 && c.nodes_ready == 1;
}

/* Until the report and registry scripts are both loaded. */
static void wait_ready(rl_t *rl) { WAIT_FOR(is_ready(rl)); }

static void step(rl_t *rl)
{
    ck_assert_int_eq(rl__sync_step(rl->sync, 0), 0);
}

/* The registry entry of the node whose id is `node`, or NULL. */
static redisReply *entry_of(redisContext *r, const char *prefix, const char *node,
                            char *inc, size_t inc_cap)
{
    char hash[96], live[96];
    ck_assert_int_eq(rl__nodes_key_names(prefix, hash, sizeof hash, live, sizeof live), 0);
    redisReply *h = cmd(r, "HGETALL %s", hash);
    size_t idlen = strlen(node);
    redisReply *found = NULL;
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i];
        if (f->len == idlen + 17 && strncmp(f->str, node, idlen) == 0 && f->str[idlen] == ':') {
            snprintf(inc, inc_cap, "%s", f->str);
            found = cmd(r, "HGET %s %s", hash, f->str);
        }
    }
    freeReplyObject(h);
    return found;
}

static long long live_score(redisContext *r, const char *prefix, const char *inc)
{
    char hash[96], live[96];
    rl__nodes_key_names(prefix, hash, sizeof hash, live, sizeof live);
    redisReply *z = cmd(r, "ZSCORE %s %s", live, inc);
    long long v = z->type == REDIS_REPLY_STRING ? atoll(z->str) : -1;
    freeReplyObject(z);
    return v;
}

/* The record and the liveness deadline of incarnation `inc`, read in one
 * transaction: a heartbeat landing between two separate reads would pair
 * one round's record with the next round's deadline. */
static void record_and_deadline(redisContext *r, const char *prefix, const char *inc,
                                rl_nodes_record_t *rec, long long *deadline)
{
    char hash[96], live[96];
    ck_assert_int_eq(rl__nodes_key_names(prefix, hash, sizeof hash, live, sizeof live), 0);
    freeReplyObject(cmd(r, "MULTI"));
    freeReplyObject(cmd(r, "HGET %s %s", hash, inc));
    freeReplyObject(cmd(r, "ZSCORE %s %s", live, inc));
    redisReply *x = cmd(r, "EXEC");
    ck_assert_int_eq(x->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(x->elements, 2);
    ck_assert_int_eq(x->element[0]->type, REDIS_REPLY_STRING);
    ck_assert_int_eq(x->element[1]->type, REDIS_REPLY_STRING);
    int parsed = rl__nodes_parse(x->element[0]->str, x->element[0]->len, rec);
    *deadline = atoll(x->element[1]->str);
    freeReplyObject(x);
    ck_assert_int_eq(parsed, 0);
}

static long long count_fields(redisContext *r, const char *prefix, const char *starting)
{
    char hash[96], live[96];
    rl__nodes_key_names(prefix, hash, sizeof hash, live, sizeof live);
    redisReply *h = cmd(r, "HKEYS %s", hash);
    long long n = 0;
    for (size_t i = 0; i < h->elements; i++)
        n += strncmp(h->element[i]->str, starting, strlen(starting)) == 0;
    freeReplyObject(h);
    return n;
}

static long long redis_ms(redisContext *r)
{
    redisReply *t = cmd(r, "TIME");
    long long ms = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    return ms;
}

/* ------------------------------------------------------------ record */

START_TEST(record_round_trips)
{
    rl_nodes_record_t in, out;
    memset(&in, 0, sizeof in);
    in.version = RL_NODES_VERSION;
    snprintf(in.lib, sizeof in.lib, "%s", rl_version());
    snprintf(in.host, sizeof in.host, "web 3\tprod"); /* bytes a record cannot hold */
    in.pid = 4242;
    in.start_ms = UINT64_C(1712345678901);
    in.interval_ms = 100;
    in.health = RL_HEALTH_RECOVERING;
    in.limits = 3;
    in.keys = 1234;
    in.rkeys = 17;
    in.rlimits = 2;
    in.rounds = UINT64_MAX;
    in.failed = 9;
    rl__nodes_fp_text(UINT64_C(0x42ff57bcf12b6242), in.fp);
    char text[RL_NODES_RECORD_MAX + 32];
    int n = snprintf(text, sizeof text, "seen=77 ");
    int len = rl__nodes_format(&in, text + n, sizeof text - (size_t)n);
    ck_assert_int_gt(len, 0);
    ck_assert_int_lt(n + len, RL_NODES_RECORD_MAX);
    ck_assert_ptr_null(strchr(text + n, '\t'));
    ck_assert_int_eq(rl__nodes_parse(text, strlen(text), &out), 0);
    ck_assert_uint_eq(out.version, RL_NODES_VERSION);
    ck_assert_uint_eq(out.seen_ms, 77);
    ck_assert_str_eq(out.lib, rl_version());
    ck_assert_str_eq(out.host, "web_3_prod");
    ck_assert_uint_eq(out.pid, 4242);
    ck_assert_uint_eq(out.start_ms, in.start_ms);
    ck_assert_uint_eq(out.interval_ms, 100);
    ck_assert_int_eq(out.health, RL_HEALTH_RECOVERING);
    ck_assert_uint_eq(out.limits, 3);
    ck_assert_uint_eq(out.keys, 1234);
    ck_assert_uint_eq(out.rkeys, 17);
    ck_assert_uint_eq(out.rlimits, 2);
    ck_assert_uint_eq(out.rounds, UINT64_MAX);
    ck_assert_uint_eq(out.failed, 9);
    ck_assert_str_eq(out.fp, "42ff57bcf12b6242");
    /* A record without fp= (a node before 0.2) parses, with none. */
    int m = snprintf(text, sizeof text, "seen=1 v=1 pid=2");
    ck_assert_int_eq(rl__nodes_parse(text, (size_t)m, &out), 0);
    ck_assert_str_eq(out.fp, "");
    /* Only hex reaches the record: it stays one line of words. */
    snprintf(in.fp, sizeof in.fp, "ab c\nd");
    rl__nodes_format(&in, text, sizeof text);
    ck_assert_ptr_nonnull(strstr(text, " fp=ab_c_d"));
}
END_TEST

START_TEST(record_parse_is_tolerant_and_versioned)
{
    rl_nodes_record_t r;
    /* Unknown words (a newer writer's fields) are skipped. */
    const char *newer = "seen=5 v=1 future=x pid=7 health=bogus  limits=2 extra";
    ck_assert_int_eq(rl__nodes_parse(newer, strlen(newer), &r), 0);
    ck_assert_uint_eq(r.pid, 7);
    ck_assert_uint_eq(r.limits, 2);
    ck_assert_int_eq(r.health, -1);
    /* A malformed number leaves its field 0; an overflow too. */
    const char *bad = "v=1 pid=12x keys=99999999999999999999999";
    ck_assert_int_eq(rl__nodes_parse(bad, strlen(bad), &r), 0);
    ck_assert_uint_eq(r.pid, 0);
    ck_assert_uint_eq(r.keys, 0);
    /* Another version, or none: refused, with what could be read. */
    const char *v2 = "seen=9 v=2 pid=3";
    ck_assert_int_eq(rl__nodes_parse(v2, strlen(v2), &r), -1);
    ck_assert_uint_eq(r.version, 2);
    ck_assert_uint_eq(r.seen_ms, 9);
    ck_assert_int_eq(rl__nodes_parse("", 0, &r), -1);
    /* Only len bytes are read: a value need not be NUL-terminated. */
    const char trunc[] = {'v', '=', '1', ' ', 'p', 'i', 'd', '=', '4', '2'};
    ck_assert_int_eq(rl__nodes_parse(trunc, 9, &r), 0);
    ck_assert_uint_eq(r.pid, 4);
    /* A node id may hold ':'; the instance is after the last one. */
    ck_assert_int_eq(rl__nodes_incarnation_split("a:b:0123456789abcdef", 20), 3);
    ck_assert_int_eq(rl__nodes_incarnation_split("nocolon", 7), -1);
    char hash[16], live[16];
    ck_assert_int_eq(rl__nodes_key_names("averylongprefix", hash, sizeof hash, live,
                                         sizeof live), -1);
}
END_TEST

/* -------------------------------------------------------- heartbeats */

START_TEST(heartbeat_written_each_round_and_removed_on_close)
{
    redisContext *r = rl_test_redis_client(0);
    rl_t *n = open_node("reg-a", "r1", 0);
    rl_test_add(n, "name=g rate=100/s burst=10");
    rl_test_add(n, "name=l rate=100/s burst=10 mode=local"); /* not synced: not counted */
    wait_ready(n);
    char inc[128] = "";
    redisReply *v = NULL;
    WAIT_FOR((v = entry_of(r, "r1", "reg-a", inc, sizeof inc)) != NULL);
    freeReplyObject(v);
    rl_nodes_record_t rec;
    long long deadline;
    /* The heartbeat runs from rl_open on: a record written before the
     * limits were added counts none; wait for one that counts them. */
    WAIT_FOR((record_and_deadline(r, "r1", inc, &rec, &deadline), rec.limits == 1));
    char host[65] = "";
    gethostname(host, sizeof host);
    host[64] = '\0';
    ck_assert_str_eq(rec.lib, rl_version());
    ck_assert_uint_eq(rec.pid, (uint64_t)getpid());
    ck_assert_uint_eq(rec.interval_ms, INTERVAL_MS);
    ck_assert_uint_eq(rec.limits, 1);
    ck_assert_int_ge(rec.health, RL_HEALTH_HEALTHY); /* which one is the rounds' business */
    ck_assert_int_le(rec.health, RL_HEALTH_RECOVERING);
    ck_assert_uint_gt(rec.rounds, 0);
    if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") ==
        strlen(host) && host[0] != '\0')
        ck_assert_str_eq(rec.host, host);
    /* Liveness is Redis time: the deadline is 10 intervals after seen. */
    ck_assert_int_le((long long)rec.seen_ms, redis_ms(r));
    ck_assert_int_eq(deadline, (long long)rec.seen_ms + RL_NODES_STALE_ROUNDS * INTERVAL_MS);
    /* Rewritten every round: seen moves on, and the writes are counted (a
     * write is counted when its reply arrives, which may be after Redis
     * holds it: wait for each). */
    uint64_t first_seen = rec.seen_ms;
    WAIT_FOR((record_and_deadline(r, "r1", inc, &rec, &deadline), rec.seen_ms > first_seen));
    ck_assert_int_eq(deadline, (long long)rec.seen_ms + RL_NODES_STALE_ROUNDS * INTERVAL_MS);
    WAIT_FOR(counters(n).nodes_writes >= 2);
    ck_assert_uint_eq(counters(n).nodes_errors, 0);
    /* Both registry keys expire if the whole fleet goes (2 x 10 intervals). */
    redisReply *ttl = cmd(r, "PTTL {r1:v1}:nodes");
    ck_assert_int_gt(ttl->integer, 0);
    ck_assert_int_le(ttl->integer, 2 * RL_NODES_STALE_ROUNDS * INTERVAL_MS);
    freeReplyObject(ttl);
    ttl = cmd(r, "PTTL {r1:v1}:nodes:live");
    ck_assert_int_gt(ttl->integer, 0);
    freeReplyObject(ttl);
    rl_test_release(n);
    v = entry_of(r, "r1", "reg-a", inc, sizeof inc);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(live_score(r, "r1", inc), -1);
    rl_test_release(r);
}
END_TEST

START_TEST(record_counts_this_rounds_reports)
{
    /* Manual rounds: the record of a round says what that round reported. */
    redisContext *r = rl_test_redis_client(0);
    rl_t *n = open_node("reg-b", "r2", 1);
    int a = rl_test_add(n, "name=a rate=100/s burst=10");
    int b = rl_test_add(n, "name=b rate=100/s burst=10");
    wait_ready(n);
    step(n); /* nothing to report: the heartbeat rides with the PING probe */
    char inc[128];
    redisReply *v = entry_of(r, "r2", "reg-b", inc, sizeof inc);
    ck_assert_ptr_nonnull(v);
    rl_nodes_record_t rec;
    ck_assert_int_eq(rl__nodes_parse(v->str, v->len, &rec), 0);
    freeReplyObject(v);
    ck_assert_uint_eq(rec.rkeys, 0);
    ck_assert_uint_eq(rec.rlimits, 0);
    ck_assert_uint_eq(rec.limits, 2);
    ck_assert_int_eq(rec.health, RL_HEALTH_HEALTHY); /* stepped rounds all succeeded */
    ck_assert_uint_eq(rec.rounds, 1);
    const char *keys[] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_check(n, a, keys[i], 2, 1, NULL), RL_ALLOW);
    ck_assert_int_eq(rl_check(n, b, "k1", 2, 1, NULL), RL_ALLOW);
    step(n);
    v = entry_of(r, "r2", "reg-b", inc, sizeof inc);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(rl__nodes_parse(v->str, v->len, &rec), 0);
    freeReplyObject(v);
    ck_assert_uint_eq(rec.rkeys, 4);
    ck_assert_uint_eq(rec.rlimits, 2);
    ck_assert_uint_eq(rec.keys, 4);
    ck_assert_uint_eq(rec.rounds, 2);
    ck_assert_uint_eq(rec.failed, 0);
    rl_test_release(n);
    rl_test_release(r);
}
END_TEST

START_TEST(one_registry_call_per_round)
{
    redisContext *r = rl_test_redis_client(0);
    rl_t *n = open_node("reg-c", "r3", 1);
    int id = rl_test_add(n, "name=c rate=100/s burst=10");
    wait_ready(n);
    step(n);
    freeReplyObject(cmd(r, "CONFIG RESETSTAT"));
    enum { ROUNDS = 5 };
    for (int i = 0; i < ROUNDS; i++) {
        for (int k = 0; k < 30; k++) /* past its share: the key reports every round */
            rl_check(n, id, "key", 3, 1, NULL);
        step(n);
    }
    /* Each round: one report call (one key, one shard) and one heartbeat. */
    redisReply *info = cmd(r, "INFO commandstats");
    const char *line = strstr(info->str, "cmdstat_evalsha:calls=");
    ck_assert_ptr_nonnull(line);
    ck_assert_int_eq(atoi(line + strlen("cmdstat_evalsha:calls=")), 2 * ROUNDS);
    freeReplyObject(info);
    ck_assert_uint_eq(counters(n).nodes_writes, ROUNDS + 1);
    rl_test_release(n);
    rl_test_release(r);
}
END_TEST

/* ------------------------------------------------------------ pruning */

START_TEST(stale_entries_pruned_a_batch_per_write)
{
    enum { STALE = 40 };
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(cmd(r, "DEL {r4:v1}:nodes {r4:v1}:nodes:live"));
    long long now = redis_ms(r);
    char who[32], deadline[32];
    for (int i = 0; i < STALE; i++) {
        snprintf(who, sizeof who, "dead:%016x", i);
        freeReplyObject(cmd(r, "HSET {r4:v1}:nodes %s %s", who, "seen=1 v=1 pid=1"));
        snprintf(deadline, sizeof deadline, "%lld", now - 1000 - i);
        freeReplyObject(cmd(r, "ZADD {r4:v1}:nodes:live %s %s", deadline, who));
    }
    /* One entry written by a node still alive: its deadline is ahead. */
    snprintf(deadline, sizeof deadline, "%lld", now + 600000);
    freeReplyObject(cmd(r, "HSET {r4:v1}:nodes %s %s", "alive:0000000000000001",
                        "seen=1 v=1 pid=2"));
    freeReplyObject(cmd(r, "ZADD {r4:v1}:nodes:live %s %s", deadline, "alive:0000000000000001"));
    rl_t *n = open_node("reg-d", "r4", 1);
    wait_ready(n);
    long long left = STALE;
    while (left > 0) {
        step(n);
        long long after = count_fields(r, "r4", "dead:");
        ck_assert_int_eq(after, left > RL_NODES_PRUNE_MAX ? left - RL_NODES_PRUNE_MAX : 0);
        left = after;
    }
    ck_assert_int_eq(count_fields(r, "r4", "alive:"), 1);
    ck_assert_int_eq(count_fields(r, "r4", "reg-d:"), 1);
    redisReply *z = cmd(r, "ZCARD {r4:v1}:nodes:live");
    ck_assert_int_eq(z->integer, 2);
    freeReplyObject(z);
    /* The script on its own: it returns how many it pruned. */
    for (int i = 0; i < 3; i++) {
        snprintf(who, sizeof who, "gone:%016x", i);
        freeReplyObject(cmd(r, "ZADD {r4:v1}:nodes:live 1 %s", who));
    }
    redisReply *got = cmd(r, "EVAL %s 3 {r4:v1}:nodes {r4:v1}:nodes:live {r4:v1}:nodes:fp "
                          "x:1 v=1 1000 0 16 00000000000000ff 16",
                          rl__lua_nodes);
    /* {pruned, live nodes (alive, reg-d and x), other fingerprints (the
     * nodes' own)}. */
    ck_assert_int_eq(got->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_ge(got->elements, 3);
    ck_assert_int_eq(got->element[0]->integer, 3);
    ck_assert_int_eq(got->element[1]->integer, 3);
    ck_assert_int_eq(got->element[2]->type, REDIS_REPLY_STRING);
    ck_assert_int_eq((int)got->element[2]->len, 16);
    freeReplyObject(got);
    rl_test_release(n);
    rl_test_release(r);
}
END_TEST

START_TEST(a_silent_node_is_pruned_by_another)
{
    /* Node e writes once and then goes silent without closing (as a killed
     * process would); node f, still running, prunes it once 10 of e's sync
     * intervals have passed (that live entries stay is shown above). */
    redisContext *r = rl_test_redis_client(0);
    rl_t *e = open_node("reg-e", "r5", 1);
    rl_t *f = open_node("reg-f", "r5", 1);
    wait_ready(e);
    wait_ready(f);
    step(e);
    step(f);
    char inc[128];
    redisReply *v = entry_of(r, "r5", "reg-e", inc, sizeof inc);
    ck_assert_ptr_nonnull(v);
    freeReplyObject(v);
    /* Until Redis's clock, which the script prunes by, passes e's deadline. */
    long long e_deadline = live_score(r, "r5", inc);
    ck_assert_int_gt(e_deadline, 0);
    WAIT_FOR(redis_ms(r) > e_deadline);
    step(f);
    ck_assert_int_eq(count_fields(r, "r5", "reg-e:"), 0);
    ck_assert_int_eq(live_score(r, "r5", inc), -1);
    ck_assert_int_eq(count_fields(r, "r5", "reg-f:"), 1);
    rl_test_release(e); /* removes an entry already gone: harmless */
    ck_assert_int_eq(count_fields(r, "r5", "reg-f:"), 1);
    rl_test_release(f);
    ck_assert_int_eq(count_fields(r, "r5", "reg-f:"), 0);
    rl_test_release(r);
}
END_TEST

/* --------------------------------------------------- failure tolerance */

START_TEST(failing_registry_never_fails_a_round)
{
    /* The registry hash is of the wrong type: every heartbeat errors. Rounds
     * still succeed, health stays healthy, keys still sync; the errors are
     * counted and classified; once the key is fixed, heartbeats resume. */
    redisContext *r = rl_test_redis_client(0);
    freeReplyObject(cmd(r, "SET {r6:v1}:nodes not-a-hash"));
    rl_t *n = open_node("reg-g", "r6", 1);
    int id = rl_test_add(n, "name=g rate=100/s burst=10");
    wait_ready(n);
    int admitted = 0;
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 30; k++) /* past its share: the key reports every round */
            admitted += rl_check(n, id, "key", 3, 1, NULL) == RL_ALLOW;
        step(n);
    }
    rl_sync_counters_t c = counters(n);
    ck_assert_uint_eq(c.nodes_errors, 5);
    ck_assert_uint_eq(c.nodes_writes, 0);
    ck_assert_uint_eq(c.by_class[RL_REDIS_ERR_OTHER], 5);
    ck_assert_uint_eq(c.rounds_failed, 0);
    ck_assert_uint_eq(c.rounds_ok, c.rounds);
    ck_assert_uint_eq(c.reports, 5);
    ck_assert_int_gt(admitted, 0);
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(n, &st), 0);
    ck_assert_int_eq(st.health, RL_HEALTH_HEALTHY);
    ck_assert_uint_eq(st.health_transitions, 0);
    freeReplyObject(cmd(r, "DEL {r6:v1}:nodes"));
    step(n);
    c = counters(n);
    ck_assert_uint_eq(c.nodes_writes, 1);
    ck_assert_int_eq(count_fields(r, "r6", "reg-g:"), 1);
    rl_test_release(n);
    rl_test_release(r);
}
END_TEST

START_TEST(registry_script_flushed_is_reloaded)
{
    /* An idle node (no keys: its rounds are the PING probe): SCRIPT FLUSH
     * makes only the heartbeat fail (NOSCRIPT). The round still succeeds;
     * the next round reloads the script, the one after writes again. */
    redisContext *r = rl_test_redis_client(0);
    rl_t *n = open_node("reg-h", "r7", 1);
    wait_ready(n);
    step(n);
    ck_assert_uint_eq(counters(n).nodes_writes, 1);
    freeReplyObject(cmd(r, "SCRIPT FLUSH"));
    step(n);
    rl_sync_counters_t c = counters(n);
    ck_assert_uint_eq(c.nodes_errors, 1);
    ck_assert_uint_eq(c.by_class[RL_REDIS_ERR_NOSCRIPT], 1);
    ck_assert_uint_eq(c.rounds_failed, 0);
    step(n); /* reloads */
    step(n); /* writes */
    c = counters(n);
    ck_assert_uint_eq(c.nodes_writes, 2);
    ck_assert_uint_eq(c.nodes_errors, 1);
    ck_assert_uint_eq(c.rounds_failed, 0);
    rl_stats_t st;
    rl_stats_init(&st);
    ck_assert_int_eq(rl_stats(n, &st), 0);
    ck_assert_int_eq(st.health, RL_HEALTH_HEALTHY);
    rl_test_release(n);
    rl_test_release(r);
}
END_TEST

START_TEST(two_nodes_list_each_other)
{
    redisContext *r = rl_test_redis_client(0);
    rl_t *a = open_node("reg-i", "r8", 0);
    rl_t *b = open_node("reg-j", "r8", 0);
    wait_ready(a);
    wait_ready(b);
    WAIT_FOR(count_fields(r, "r8", "reg-i:") == 1 && count_fields(r, "r8", "reg-j:") == 1);
    rl_test_release(a);
    ck_assert_int_eq(count_fields(r, "r8", "reg-i:"), 0);
    ck_assert_int_eq(count_fields(r, "r8", "reg-j:"), 1);
    rl_test_release(b);
    ck_assert_int_eq(count_fields(r, "r8", "reg-j:"), 0);
    rl_test_release(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("nodes");
    TCase *pure = tcase_create("record");
    tcase_add_test(pure, record_round_trips);
    tcase_add_test(pure, record_parse_is_tolerant_and_versioned);
    suite_add_tcase(s, pure);
    TCase *tc = tcase_create("redis");
    rl_test_redis_fixture(tc);
    tcase_add_checked_fixture(tc, NULL, rl_test_release_all);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, heartbeat_written_each_round_and_removed_on_close);
    tcase_add_test(tc, record_counts_this_rounds_reports);
    tcase_add_test(tc, one_registry_call_per_round);
    tcase_add_test(tc, stale_entries_pruned_a_batch_per_write);
    tcase_add_test(tc, a_silent_node_is_pruned_by_another);
    tcase_add_test(tc, failing_registry_never_fails_a_round);
    tcase_add_test(tc, registry_script_flushed_is_reloaded);
    tcase_add_test(tc, two_nodes_list_each_other);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return rl_test_run(suite()); }
