/* SPDX-License-Identifier: MIT */
/*
 * ratelimit quota: a key's usage of a quota in the current period, read
 * from the counter the nodes' charges move, under the name the library
 * gives it (rl__redis_quota_tag) and for the period Redis's clock is in
 * (rl__quota_period, which quota.lua mirrors).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "args.h"
#include "cli.h"
#include "fleetkey.h"
#include "fleetopts.h"
#include "local/keyhash.h"
#include "output.h"
#include "quota/spec.h"
#include "quota/period.h"
#include "redis/keys.h"
#include "redisconn.h"

#define CMD "quota"

typedef struct qview {
    const char *prefix;
    rl_quota_t q;
    unsigned char key[RL_MAX_KEY_LEN];
    size_t key_len;
    char counter[400];
    uint64_t now, start, end, used;
    long long ttl;
} qview_t;

static void iso(char *buf, size_t cap, uint64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void print_text(const qview_t *v, const char *where)
{
    char a[40], b[40], in[40], key[RL_MAX_KEY_LEN * 4 + 1];
    fmt_printable(key, sizeof key, v->key, v->key_len);
    iso(a, sizeof a, v->start);
    iso(b, sizeof b, v->end);
    fmt_duration(in, sizeof in, (int64_t)(v->end - v->now));
    uint64_t left = v->used < v->q.amount ? v->q.amount - v->used : 0;
    printf("quota %s, key %s (Redis %s, prefix %s)\n", v->q.name, key, where, v->prefix);
    printf("period     %s: %s .. %s\n", rl__quota_period_name(v->q.period), a, b);
    printf("used       %" PRIu64 " of %" PRIu64 "\n", v->used, v->q.amount);
    printf("remaining  %" PRIu64 "\n", left);
    printf("reset      %s (in %s)\n", b, in);
    printf("redis key  %s%s\n", v->counter, v->ttl == -2 ? " (none: nothing charged yet)" : "");
}

static void print_json(const qview_t *v, const char *where)
{
    json_t j;
    char hex[RL_MAX_KEY_LEN * 2 + 1];
    cli_fleet_json_begin(&j, where, v->prefix);
    json_str(&j, "quota", v->q.name);
    json_strn(&j, "key", (const char *)v->key, v->key_len);
    fleet_hex_encode(v->key, v->key_len, hex);
    json_str(&j, "key_hex", hex);
    json_str(&j, "period", rl__quota_period_name(v->q.period));
    json_u64(&j, "amount", v->q.amount);
    json_u64(&j, "used", v->used);
    json_u64(&j, "remaining", v->used < v->q.amount ? v->q.amount - v->used : 0);
    json_u64(&j, "now_ms", v->now);
    json_u64(&j, "period_start_ms", v->start);
    json_u64(&j, "reset_unix_ms", v->end);
    json_u64(&j, "reset_in_ms", v->end - v->now);
    json_str(&j, "redis_key", v->counter);
    json_i64(&j, "ttl_ms", v->ttl);
    json_finish(&j);
}

/* Redis's time, the period it is in, the counter's value and TTL. */
static int load(cli_t *cli, cli_redis_t *r, qview_t *v, const rl_keyhash_t *kh)
{
    long long t = cli_redis_time_ms(r);
    if (t < 0)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    v->now = (uint64_t)t;
    rl__quota_period(v->q.period, v->q.period_ms, v->now, &v->start, &v->end);
    char tag[300];
    rl__redis_quota_tag(kh, v->prefix, v->q.name, rl__keyhash(kh, v->key, v->key_len), tag,
                        sizeof tag);
    snprintf(v->counter, sizeof v->counter, "%s:p:%" PRIu64, tag, v->start);
    redisReply *g = cli_redis_cmd(r, -1, "GET %s", v->counter);
    if (g == NULL)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    int bad = 0;
    if (g->type == REDIS_REPLY_STRING) {
        uint64_t u;
        bad = cli_parse_u64(g->str, 0, RL_QUOTA_AMOUNT_MAX, &u) != 0;
        v->used = u;
    } else if (g->type != REDIS_REPLY_NIL) {
        bad = 1;
    }
    freeReplyObject(g);
    if (bad)
        return cli_fail(cli, CMD, CLI_RUNTIME, "malformed", "%s does not hold a count",
                        v->counter);
    redisReply *ttl = cli_redis_cmd(r, REDIS_REPLY_INTEGER, "PTTL %s", v->counter);
    if (ttl == NULL)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    v->ttl = ttl->integer;
    freeReplyObject(ttl);
    return CLI_OK;
}

int cli_quota(cli_t *cli, int argc, char **argv)
{
    cli_fleet_t fl;
    const char *pos[2];
    if (cli_fleet_opts(cli, CMD, argc, argv, CLI_FLEET_KEY, NULL, pos, 2,
                       "QUOTA and KEY are required", &fl) != CLI_OK)
        return CLI_USAGE;
    qview_t *v = calloc(1, sizeof *v);
    if (v == NULL)
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    v->prefix = fl.prefix;
    char err[256];
    int rc = rl_quota_parse(&v->q, pos[0], err, sizeof err);
    if (rc != 0) {
        rc = cli_usage_error(cli, CMD, "QUOTA: %s (%s); give the quota's spec, e.g. "
                                       "\"name=plan amount=1000000 period=month\"",
                             err, rl_err_name(rc));
        goto out;
    }
    unsigned char *secret;
    size_t secret_len;
    rc = cli_fleet_key(cli, CMD, &fl, pos[1], v->key, &v->key_len, &secret, &secret_len);
    if (rc != CLI_OK)
        goto out;
    rl_keyhash_t *kh = malloc(sizeof *kh);
    if (kh == NULL) {
        free(secret);
        rc = cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
        goto out;
    }
    rl__keyhash_init(kh, secret, secret_len);
    memset(secret, 0, secret_len);
    free(secret);
    cli_redis_t r;
    rc = cli_fleet_connect(cli, CMD, &fl, &r);
    if (rc == CLI_OK) {
        rc = load(cli, &r, v, kh);
        if (rc == CLI_OK) {
            if (cli->json)
                print_json(v, r.where);
            else
                print_text(v, r.where);
        }
        cli_redis_close(&r);
    }
    memset(kh, 0, sizeof *kh);
    free(kh);
out:
    free(v);
    return rc;
}
