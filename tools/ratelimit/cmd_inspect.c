/* SPDX-License-Identifier: MIT */
/* ratelimit inspect: what Redis holds for one key of one limit, whichever
 * family the library wrote it as (global, exact, tiered; a quota's spec goes
 * to `quota`). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "cli.h"
#include "fleetkey.h"
#include "fleetopts.h"
#include "keystate.h"
#include "local/limitdef.h"
#include "limitfile.h"
#include "output.h"
#include "redisconn.h"
#include "sync/share.h"

#define CMD "inspect"

typedef struct inspect {
    const char *prefix;
    char limit[RL_NAME_MAX];
    int have_spec;       /* the limit's rate and burst are known */
    rl_limit_t lim;
    uint64_t burst;      /* the burst the nodes send (0 in a spec: one period's worth) */
    unsigned char key[RL_MAX_KEY_LEN];
    size_t key_len;
    char redis_key[256];
    uint64_t now;        /* the script's now: max(Redis TIME, the key's t) */
    long long pttl;
    ks_key_t ks;
    uint32_t *q, *tokens;
    int live;            /* live nodes, or -1 when shares are not computed */
    const char *hint;    /* said when the key is not found */
    int family;          /* KS_GLOBAL, KS_EXACT, KS_TIERED */
    uint64_t now_us;     /* Redis TIME, for the bucket */
    int64_t tokens_now;  /* the bucket refilled to now_us (have_spec) */
    uint64_t full_us;    /* until it is full again */
} inspect_t;

static const char *const family_names[] = {"global", "exact", "tiered"};

static const char *const state_names[] = {"live", "stale", "left"};

/* A Q24 fraction of the rate as a share of it, and per second. */
static double frac(uint64_t q) { return (double)q / (double)RL_SHARE_ONE; }

static double per_second(const inspect_t *in, uint64_t q)
{
    return frac(q) * (double)in->lim.rate.count * 1000.0 / (double)in->lim.rate.period_ms;
}

/* "93.1/s (93.1%)" with a rate, "93.1%" without. */
static void fmt_q(char *buf, size_t cap, const inspect_t *in, uint64_t q)
{
    if (in->have_spec)
        snprintf(buf, cap, "%.1f/s (%.1f%%)", per_second(in, q), 100.0 * frac(q));
    else
        snprintf(buf, cap, "%.1f%%", 100.0 * frac(q));
}

static int64_t age(uint64_t now, uint64_t then, int have)
{
    return !have ? -1 : now >= then ? (int64_t)(now - then) : 0;
}

/* LIMIT as a name, as a spec ("name=api rate=100/s"), or a name found in
 * --limits FILE. */
static int resolve_limit(cli_t *cli, inspect_t *in, const char *arg, const char *file)
{
    char err[256];
    if (strchr(arg, '=') != NULL) {
        int rc = rl_limit_parse(&in->lim, arg, err, sizeof err);
        if (rc != 0)
            return cli_usage_error(cli, CMD, "LIMIT: %s (%s)", err, rl_err_name(rc));
        in->have_spec = 1;
    } else if (!rl__name_valid(arg, RL_NAME_MAX)) {
        return cli_usage_error(cli, CMD, "LIMIT: \"%s\" is not a limit name "
                                         "(1..63 bytes of [A-Za-z0-9_.:-]) nor a spec", arg);
    } else {
        snprintf(in->lim.name, sizeof in->lim.name, "%s", arg);
    }
    if (file != NULL) {
        if (in->have_spec)
            return cli_usage_error(cli, CMD, "give LIMIT as a name or a spec, not a spec and "
                                             "--limits");
        char *text;
        size_t len;
        if (cli_read_file(file, LIMITFILE_MAX_BYTES, &text, &len) != 0)
            return cli_fail(cli, CMD, CLI_USAGE, "file", "cannot read %s: %s", file,
                            errno == EFBIG ? "larger than 16 MiB" : strerror(errno));
        limitfile_t lf;
        int rc = limitfile_check(text, len, false, &lf);
        free(text);
        if (rc != 0)
            return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "%s", rl_strerror(rc));
        for (size_t i = 0; i < lf.n && !in->have_spec; i++)
            if (lf.e[i].rc == 0 && strcmp(lf.e[i].lim.name, in->lim.name) == 0) {
                in->lim = lf.e[i].lim;
                in->have_spec = 1;
            }
        limitfile_free(&lf);
        if (!in->have_spec)
            return cli_usage_error(cli, CMD, "limit \"%s\" is not defined in %s (try: %s check %s)",
                                   arg, file, cli->prog, file);
    }
    snprintf(in->limit, sizeof in->limit, "%s", in->lim.name);
    if (in->have_spec) {
        rl_limit_derived_t d;
        int rc = rl__limit_derive(&d, &in->lim, 1);
        if (rc != 0)
            return cli_usage_error(cli, CMD, "LIMIT: %s", rl_strerror(rc));
        in->burst = d.normal.burst;
    }
    return CLI_OK;
}

static int load_key(cli_t *cli, cli_redis_t *r, inspect_t *in)
{
    long long t = cli_redis_time_ms(r);
    if (t < 0)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    redisReply *h = cli_redis_cmd(r, REDIS_REPLY_ARRAY, "HGETALL %s", in->redis_key);
    if (h == NULL)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    if (h->elements == 0) {
        freeReplyObject(h);
        return cli_fail(cli, CMD, CLI_FAIL, "no_such_key",
                        "no such key in Redis: %s (has it been synced? is the secret/prefix "
                        "right?)%s",
                        in->redis_key, in->hint);
    }
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            in->ks.malformed++;
            continue;
        }
        if (ks_add(&in->ks, f->str, f->len, v->str, v->len) != 0) {
            freeReplyObject(h);
            return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
        }
    }
    freeReplyObject(h);
    ks_finish(&in->ks);
    in->family = ks_family(&in->ks);
    in->now_us = (uint64_t)t * 1000;
    if (in->family != KS_GLOBAL && in->have_spec)
        in->tokens_now = ks_bucket_now(&in->ks, in->lim.rate.count,
                                       (uint64_t)in->lim.rate.period_ms * 1000, in->burst,
                                       in->now_us, &in->full_us);
    redisReply *ttl = cli_redis_cmd(r, REDIS_REPLY_INTEGER, "PTTL %s", in->redis_key);
    if (ttl == NULL)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    in->pttl = ttl->integer;
    freeReplyObject(ttl);
    in->now = ks_now(&in->ks, (uint64_t)t);
    size_t n = in->ks.n ? in->ks.n : 1;
    in->q = calloc(n, sizeof *in->q);
    in->tokens = calloc(n, sizeof *in->tokens);
    if (in->q == NULL || in->tokens == NULL)
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    in->live = -1;
    if (in->have_spec) {
        in->live = ks_shares(&in->ks, in->now, in->burst, in->q, in->tokens);
        if (in->live < 0)
            return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "cannot compute the shares");
    }
    return CLI_OK;
}

static size_t live_count(const inspect_t *in)
{
    size_t n = 0;
    for (size_t i = 0; i < in->ks.n; i++)
        n += ks_node_state(&in->ks.nodes[i], in->now) == KS_LIVE;
    return n;
}

static void json_q(json_t *j, const inspect_t *in, const char *frac_key, const char *ps_key,
                   uint64_t q)
{
    json_double(j, frac_key, frac(q));
    if (in->have_spec)
        json_double(j, ps_key, per_second(in, q));
    else
        json_null(j, ps_key);
}

/* The limit's rate and burst, when known. */
static void json_spec(json_t *j, const inspect_t *in)
{
    if (!in->have_spec) {
        json_null(j, "limit_spec");
        return;
    }
    char text[64];
    fmt_rate(text, sizeof text, in->lim.rate.count, in->lim.rate.period_ms);
    json_object(j, "limit_spec");
    json_u64(j, "count", in->lim.rate.count);
    json_u64(j, "period_ms", in->lim.rate.period_ms);
    json_str(j, "rate", text);
    json_u64(j, "burst", in->burst);
    json_end(j);
}

/* What the live nodes admit and ask for, together. */
static void json_usage(json_t *j, const inspect_t *in)
{
    const ks_key_t *k = &in->ks;
    json_object(j, "usage");
    json_u64(j, "live_nodes", live_count(in));
    uint64_t adm = ks_live_admitted_q(k, in->now), dem = ks_live_demand_q(k, in->now);
    json_u64(j, "admitted_q24", adm);
    json_q(j, in, "admitted_fraction", "admitted_per_s", adm);
    json_u64(j, "demand_q24", dem);
    json_q(j, in, "demand_fraction", "demand_per_s", dem);
    if (in->have_spec)
        json_double(j, "limit_per_s",
                    (double)in->lim.rate.count * 1000.0 / (double)in->lim.rate.period_ms);
    else
        json_null(j, "limit_per_s");
    json_end(j);
}

/* One node's entry in the key's hash, and its share when computed. */
static void json_node(json_t *j, const inspect_t *in, size_t i)
{
    const ks_node_t *n = &in->ks.nodes[i];
    int st = ks_node_state(n, in->now);
    json_object(j, NULL);
    json_str(j, "incarnation", n->inc);
    const char *colon = strrchr(n->inc, ':');
    json_strn(j, "node_id", n->inc, colon ? (size_t)(colon - n->inc) : strlen(n->inc));
    json_str(j, "instance", colon ? colon + 1 : "");
    json_str(j, "state", state_names[st]);
    json_u64(j, "epoch", n->e);
    json_u64(j, "admitted", n->a);
    json_u64(j, "offered", n->o);
    if (st == KS_LEFT) {
        const char *gone[] = {"demand_q24", "demand_fraction", "demand_per_s",
                              "admitted_rate_q24", "admitted_rate_fraction",
                              "admitted_per_s", "last_report_ms", "last_report_age_ms",
                              "expires_ms", "expires_in_ms"};
        for (size_t g = 0; g < sizeof gone / sizeof gone[0]; g++)
            json_null(j, gone[g]);
    } else {
        json_u64(j, "demand_q24", n->d);
        json_q(j, in, "demand_fraction", "demand_per_s", n->d);
        json_u64(j, "admitted_rate_q24", n->r);
        json_q(j, in, "admitted_rate_fraction", "admitted_per_s", n->r);
        json_u64(j, "last_report_ms", n->t);
        json_i64(j, "last_report_age_ms", age(in->now, n->t, n->have & KS_T));
        json_u64(j, "expires_ms", n->x);
        json_i64(j, "expires_in_ms", (int64_t)n->x - (int64_t)in->now);
    }
    if (in->have_spec && st == KS_LIVE) {
        json_u64(j, "share_q24", in->q[i]);
        json_q(j, in, "share_fraction", "share_per_s", in->q[i]);
        json_u64(j, "burst_tokens", in->tokens[i]);
    } else {
        json_null(j, "share_q24");
        json_null(j, "share_fraction");
        json_null(j, "share_per_s");
        json_null(j, "burst_tokens");
    }
    json_end(j);
}

static void json_opt_u64(json_t *j, const char *name, int have, uint64_t v)
{
    if (have)
        json_u64(j, name, v);
    else
        json_null(j, name);
}

/* The token bucket in Redis of an exact or tiered key (src/lua/exact.lua). */
static void json_bucket(json_t *j, const inspect_t *in)
{
    const ks_key_t *k = &in->ks;
    if (in->family == KS_GLOBAL) {
        json_null(j, "bucket");
        return;
    }
    json_object(j, "bucket");
    json_i64(j, "tokens_at_last_charge", k->xn);
    json_u64(j, "last_charge_ms", k->xl / 1000);
    uint64_t age_us = in->now_us > k->xl ? in->now_us - k->xl : 0;
    json_u64(j, "last_charge_age_ms", age_us / 1000);
    json_opt_u64(j, "first_check_ms", k->have & KS_XF, k->xf / 1000);
    json_opt_u64(j, "charged", k->have & KS_XC, k->xc);
    if (in->have_spec) {
        json_i64(j, "tokens_now", in->tokens_now);
        json_u64(j, "full_in_ms", (in->full_us + 999) / 1000);
    } else {
        json_null(j, "tokens_now");
        json_null(j, "full_in_ms");
    }
    json_end(j);
}

static void print_json(const inspect_t *in, const char *where)
{
    json_t j;
    char hex[2 * RL_MAX_KEY_LEN + 1];
    cli_fleet_json_begin(&j, where, in->prefix);
    json_str(&j, "limit", in->limit);
    json_strn(&j, "key", (const char *)in->key, in->key_len);
    fleet_hex_encode(in->key, in->key_len, hex);
    json_str(&j, "key_hex", hex);
    json_str(&j, "redis_key", in->redis_key);
    json_u64(&j, "now_ms", in->now);
    json_i64(&j, "ttl_ms", in->pttl);
    const ks_key_t *k = &in->ks;
    if (k->have & KS_C)
        json_u64(&j, "created_ms", k->c);
    else
        json_null(&j, "created_ms");
    if (k->have & KS_T)
        json_u64(&j, "updated_ms", k->t);
    else
        json_null(&j, "updated_ms");
    json_str(&j, "family", family_names[in->family]);
    /* An exact key's admissions are its bucket's charges; a tiered key's,
     * what its nodes report (confirmations charge the bucket too). */
    json_u64(&j, "admitted_total", in->family == KS_EXACT ? k->xc : k->a);
    json_u64(&j, "malformed_fields", k->malformed);
    json_bucket(&j, in);
    json_spec(&j, in);
    json_usage(&j, in);
    json_array(&j, "nodes");
    for (size_t i = 0; i < k->n; i++)
        json_node(&j, in, i);
    json_end(&j);
    json_finish(&j);
}

/* An exact or tiered key's mode and bucket lines. */
static void print_bucket(const inspect_t *in)
{
    const ks_key_t *k = &in->ks;
    char a[64], b[64];
    if (in->family == KS_GLOBAL)
        return;
    printf("mode       %s\n", in->family == KS_EXACT
                                  ? "exact: Redis decides every check from one token bucket"
                                  : "tiered: nodes decide locally, each report charges the "
                                    "fleet's token bucket in Redis");
    fmt_duration(a, sizeof a, (int64_t)(in->now_us > k->xl ? in->now_us - k->xl : 0) / 1000);
    if (in->have_spec) {
        fmt_duration(b, sizeof b, (int64_t)((in->full_us + 999) / 1000));
        printf("bucket     %" PRId64 " of %" PRIu64 " tokens now (%" PRId64
               " at the last charge, %s ago; full in %s)\n",
               in->tokens_now, in->burst, k->xn, a, in->full_us ? b : "0 ms");
    } else {
        printf("bucket     %" PRId64 " tokens at the last charge, %s ago (give LIMIT as a spec "
               "for now's)\n", k->xn, a);
    }
}

/* The key's node entries, one row each: what each reported, its share and
 * tokens now (with a spec), and how long its entry lives. */
static void print_nodes(const inspect_t *in)
{
    const ks_key_t *k = &in->ks;
    char a[64], b[64], c[64];
    static const char *const head[] = {"NODE",   "INSTANCE",   "STATE",       "EPOCH",
                                       "ADMITTED", "OFFERED",  "DEMAND",      "ADMIT RATE",
                                       "SHARE",  "TOKENS",     "LAST REPORT", "EXPIRES IN"};
    table_t t;
    table_init(&t, 12, head, "lllrrrrrrrrr");
    for (size_t i = 0; i < k->n; i++) {
        const ks_node_t *n = &k->nodes[i];
        int st = ks_node_state(n, in->now);
        const char *colon = strrchr(n->inc, ':');
        int idlen = colon ? (int)(colon - n->inc) : (int)strlen(n->inc);
        table_cell(&t, "%.*s", idlen, n->inc);
        table_cell(&t, "%s", colon ? colon + 1 : "");
        table_cell(&t, "%s", state_names[st]);
        table_cell(&t, "%" PRIu64, n->e);
        table_cell(&t, "%" PRIu64, n->a);
        table_cell(&t, "%" PRIu64, n->o);
        if (st == KS_LEFT) {
            for (int g = 0; g < 2; g++)
                table_cell(&t, "-");
        } else {
            fmt_q(a, sizeof a, in, n->d);
            table_cell(&t, "%s", a);
            fmt_q(a, sizeof a, in, n->r);
            table_cell(&t, "%s", a);
        }
        if (in->have_spec && st == KS_LIVE) {
            fmt_q(a, sizeof a, in, in->q[i]);
            table_cell(&t, "%s", a);
            table_cell(&t, "%" PRIu32, in->tokens[i]);
        } else {
            table_cell(&t, "-");
            table_cell(&t, "-");
        }
        if (st == KS_LEFT) {
            table_cell(&t, "-");
            table_cell(&t, "left");
        } else {
            fmt_duration(b, sizeof b, age(in->now, n->t, n->have & KS_T));
            table_cell(&t, "%s ago", b);
            int64_t left = (int64_t)n->x - (int64_t)in->now;
            fmt_duration(c, sizeof c, left < 0 ? -left : left);
            table_cell(&t, left < 0 ? "stale %s" : "%s", c);
        }
    }
    table_print(&t, stdout);
    table_free(&t);
}

static void print_text(const inspect_t *in, const char *where)
{
    const ks_key_t *k = &in->ks;
    char a[64], b[64], key[4 * RL_MAX_KEY_LEN + 8];
    fmt_printable(key, sizeof key, in->key, in->key_len);
    printf("key        %s in limit %s (prefix %s)\n", key, in->limit, in->prefix);
    fmt_duration(a, sizeof a, in->pttl);
    printf("redis key  %s at %s (expires in %s)\n", in->redis_key, where, a);
    fmt_duration(a, sizeof a, age(in->now, k->c, k->have & KS_C));
    fmt_duration(b, sizeof b, age(in->now, k->t, k->have & KS_T));
    printf("created    %s ago; last report %s ago\n", a, b);
    if (in->family == KS_EXACT)
        printf("admitted   %" PRIu64 " since created (charged to the bucket)\n", k->xc);
    else
        printf("admitted   %" PRIu64 " since created, all nodes\n", k->a);
    print_bucket(in);
    if (in->have_spec) {
        fmt_rate(a, sizeof a, in->lim.rate.count, in->lim.rate.period_ms);
        printf("limit      %s, burst %" PRIu64 "\n", a, in->burst);
    } else {
        printf("limit      rate unknown: give LIMIT as a spec or --limits FILE to see rates and "
               "shares\n");
    }
    if (k->malformed && in->family == KS_EXACT)
        printf("warning    %zu field%s this tool cannot read (a newer data model?)\n",
               k->malformed, k->malformed == 1 ? "" : "s");
    if (in->family == KS_EXACT)
        return;
    size_t live = live_count(in);
    fmt_q(a, sizeof a, in, ks_live_admitted_q(k, in->now));
    fmt_q(b, sizeof b, in, ks_live_demand_q(k, in->now));
    printf("usage      admitted %s, offered %s of the limit, by %zu live node%s\n", a, b, live,
           live == 1 ? "" : "s");
    if (k->malformed)
        printf("warning    %zu field%s this tool cannot read (a newer data model?)\n",
               k->malformed, k->malformed == 1 ? "" : "s");
    printf("\n");
    print_nodes(in);
    if (in->have_spec)
        printf("\nSHARE and TOKENS: what the share rule gives each live node from the demands "
               "now (each node's next report moves its demand one EWMA step).\n");
}

int cli_inspect(cli_t *cli, int argc, char **argv)
{
    const char *limits = NULL;
    const cli_opt_t limits_opt = {"--limits", &limits, NULL};
    cli_fleet_t fl;
    const char *pos[2];
    if (cli_fleet_opts(cli, CMD, argc, argv, CLI_FLEET_KEY, &limits_opt, pos, 2,
                       "LIMIT and KEY are required", &fl) != CLI_OK)
        return CLI_USAGE;
    /* A quota's spec: its counter is another family, read by `quota`. */
    if (strstr(pos[0], "amount=") != NULL && limits == NULL)
        return cli_quota(cli, argc, argv);
    inspect_t *in = calloc(1, sizeof *in);
    if (in == NULL)
        return cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    in->prefix = fl.prefix;
    rl_limit_init(&in->lim);
    ks_init(&in->ks);
    int rc = resolve_limit(cli, in, pos[0], limits);
    if (rc != CLI_OK)
        goto out;
    if (in->have_spec && in->lim.kind == RL_KIND_INFLIGHT) {
        /* mode=local is the only in-flight mode built: nothing is in Redis
         * to read, and another process's memory is not this tool's. */
        rc = cli_fail(cli, CMD, CLI_FAIL, "local_state",
                      "limit \"%s\" is an in-flight limit (kind=inflight, mode=local): its "
                      "permits are counted in each process's memory, not in Redis; read them "
                      "where they are held: rl_limit_stats (inflight, inflight_limit) or the "
                      "process's metrics (ratelimit_limit_inflight{limit=\"%s\"}, "
                      "ratelimit_limit_inflight_limit), and a key's count in its acquire's "
                      "decision (inflight, limit)",
                      in->lim.name, in->lim.name);
        goto out;
    }
    unsigned char *secret;
    size_t secret_len;
    rc = cli_fleet_key(cli, CMD, &fl, pos[1], in->key, &in->key_len, &secret, &secret_len);
    if (rc != CLI_OK)
        goto out;
    fleet_key_name(secret, secret_len, fl.prefix, in->limit, in->key, in->key_len, in->redis_key,
                   sizeof in->redis_key);
    in->hint = cli_fleet_key_hint(&fl, in->key, in->key_len);
    memset(secret, 0, secret_len);
    free(secret);
    cli_redis_t r;
    rc = cli_fleet_connect(cli, CMD, &fl, &r);
    if (rc != CLI_OK)
        goto out;
    rc = load_key(cli, &r, in);
    if (rc == CLI_OK) {
        if (cli->json)
            print_json(in, r.where);
        else
            print_text(in, r.where);
    }
    cli_redis_close(&r);
out:
    ks_free(&in->ks);
    free(in->q);
    free(in->tokens);
    free(in);
    return rc;
}
