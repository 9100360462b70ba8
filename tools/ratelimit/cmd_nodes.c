/* SPDX-License-Identifier: MIT */
/* ratelimit nodes: the nodes of a fleet, from the node registry. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "fleetopts.h"
#include "output.h"
#include "redisconn.h"
#include "sync/nodes.h"

#define CMD "nodes"

typedef struct node_row {
    char inc[256];
    int id_len;           /* node id: inc[0, id_len) */
    int known;            /* the record's version is one this tool reads */
    rl_nodes_record_t rec;
    int has_deadline;
    uint64_t deadline_ms;
    int live;
} node_row_t;

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const node_row_t *)a)->inc, ((const node_row_t *)b)->inc);
}

/* The distinct fingerprints among the live nodes whose record has one. */
typedef struct fp_group {
    const char *fp;
    size_t nodes;
} fp_group_t;

static size_t fp_groups(const node_row_t *rows, size_t n, fp_group_t *g)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *fp = rows[i].rec.fp;
        if (!rows[i].live || !rows[i].known || fp[0] == '\0')
            continue;
        size_t j = 0;
        while (j < k && strcmp(g[j].fp, fp) != 0)
            j++;
        if (j == k)
            g[k++] = (fp_group_t){fp, 0};
        g[j].nodes++;
    }
    return k;
}

static int64_t since(uint64_t now, uint64_t then)
{
    return then == 0 ? -1 : now >= then ? (int64_t)(now - then) : 0;
}

static void print_json(const node_row_t *rows, size_t n, uint64_t now, const char *prefix,
                       const char *where, size_t live, const fp_group_t *g, size_t ng)
{
    json_t j;
    cli_fleet_json_begin(&j, where, prefix);
    json_u64(&j, "now_ms", now);
    json_u64(&j, "live_count", live);
    json_u64(&j, "stale_count", n - live);
    json_bool(&j, "split", ng > 1);
    json_array(&j, "fingerprints");
    for (size_t i = 0; i < ng; i++) {
        json_object(&j, NULL);
        json_str(&j, "fingerprint", g[i].fp);
        json_u64(&j, "live_nodes", g[i].nodes);
        json_end(&j);
    }
    json_end(&j);
    json_array(&j, "nodes");
    for (size_t i = 0; i < n; i++) {
        const node_row_t *r = &rows[i];
        const rl_nodes_record_t *rec = &r->rec;
        json_object(&j, NULL);
        json_str(&j, "incarnation", r->inc);
        json_strn(&j, "node_id", r->inc, (size_t)r->id_len);
        json_str(&j, "instance", r->inc + r->id_len + (r->inc[r->id_len] == ':'));
        json_bool(&j, "live", r->live);
        json_u64(&j, "record_version", rec->version);
        if (r->has_deadline)
            json_u64(&j, "deadline_ms", r->deadline_ms);
        else
            json_null(&j, "deadline_ms");
        json_u64(&j, "last_seen_ms", rec->seen_ms);
        json_i64(&j, "last_seen_age_ms", since(now, rec->seen_ms));
        if (!r->known) {
            json_end(&j);
            continue;
        }
        json_str(&j, "library_version", rec->lib);
        json_str(&j, "host", rec->host);
        json_u64(&j, "pid", rec->pid);
        json_u64(&j, "started_ms", rec->start_ms);
        json_i64(&j, "uptime_ms", since(now, rec->start_ms));
        json_str(&j, "health", rl__nodes_health_name(rec->health));
        json_u64(&j, "sync_interval_ms", rec->interval_ms);
        json_u64(&j, "limits", rec->limits);
        json_u64(&j, "keys", rec->keys);
        json_u64(&j, "reported_keys", rec->rkeys);
        json_u64(&j, "reported_limits", rec->rlimits);
        json_u64(&j, "rounds", rec->rounds);
        json_u64(&j, "rounds_failed", rec->failed);
        if (rec->fp[0] != '\0')
            json_str(&j, "fingerprint", rec->fp);
        else
            json_null(&j, "fingerprint");
        json_end(&j);
    }
    json_end(&j);
    json_finish(&j);
}

static void print_text(const node_row_t *rows, size_t n, uint64_t now, const char *prefix,
                       const char *where, size_t live, const fp_group_t *g, size_t ng)
{
    printf("fleet \"%s\" at %s: %zu live node%s, %zu stale\n", prefix, where, live,
           live == 1 ? "" : "s", n - live);
    if (ng > 1) {
        printf("SPLIT: the live nodes hold %zu different key_secret fingerprints:", ng);
        for (size_t i = 0; i < ng; i++)
            printf("%s %s (%zu node%s)", i ? "," : "", g[i].fp, g[i].nodes,
                   g[i].nodes == 1 ? "" : "s");
        printf(".\nNodes with different secrets keep separate keys in Redis, so each group "
               "enforces the whole limit: give every node the same key_secret.\n");
    }
    if (n == 0) {
        printf("(no node has written to {%s:v1}:nodes lately: none running, all stopped, "
               "another --prefix, or nodes on a library without the node registry)\n",
               prefix);
        return;
    }
    printf("\n");
    static const char *const head[] = {"NODE",   "INSTANCE", "HOST",     "PID",    "VERSION",
                                       "HEALTH", "INTERVAL", "LIMITS",   "KEYS",   "LAST ROUND",
                                       "ROUNDS", "FAILED",   "UPTIME",   "SECRET FP",
                                       "LAST SEEN", "STATE"};
    table_t t;
    table_init(&t, 16, head, "lllrllrrrlrrrlrl");
    char a[32];
    for (size_t i = 0; i < n; i++) {
        const node_row_t *r = &rows[i];
        const rl_nodes_record_t *rec = &r->rec;
        table_cell(&t, "%.*s", r->id_len, r->inc);
        table_cell(&t, "%s", r->inc + r->id_len + (r->inc[r->id_len] == ':'));
        if (r->known) {
            table_cell(&t, "%s", rec->host);
            table_cell(&t, "%" PRIu64, rec->pid);
            table_cell(&t, "%s", rec->lib);
            table_cell(&t, "%s", rl__nodes_health_name(rec->health));
            table_cell(&t, "%" PRIu32 "ms", rec->interval_ms);
            table_cell(&t, "%" PRIu64, rec->limits);
            table_cell(&t, "%" PRIu64, rec->keys);
            table_cell(&t, "%" PRIu64 " key%s, %" PRIu64 " limit%s", rec->rkeys,
                       rec->rkeys == 1 ? "" : "s", rec->rlimits, rec->rlimits == 1 ? "" : "s");
            table_cell(&t, "%" PRIu64, rec->rounds);
            table_cell(&t, "%" PRIu64, rec->failed);
            fmt_duration(a, sizeof a, since(now, rec->start_ms));
            table_cell(&t, "%s", a);
            table_cell(&t, "%s", rec->fp[0] ? rec->fp : "-");
        } else {
            table_cell(&t, "(record v%" PRIu32 ": unknown to this tool)", rec->version);
            for (int c = 0; c < 11; c++)
                table_cell(&t, "-");
        }
        fmt_duration(a, sizeof a, since(now, rec->seen_ms));
        table_cell(&t, "%s ago", a);
        table_cell(&t, "%s", r->live ? "live" : "stale");
    }
    table_print(&t, stdout);
    table_free(&t);
}

/* The registry's entries, with their deadlines. */
static int load_rows(cli_t *cli, cli_redis_t *r, const char *prefix, node_row_t **out,
                     size_t *nout, uint64_t *now_out)
{
    char hash[96], livekey[96];
    rl__nodes_key_names(prefix, hash, sizeof hash, livekey, sizeof livekey);
    long long t = cli_redis_time_ms(r);
    if (t < 0)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    redisReply *h = cli_redis_cmd(r, REDIS_REPLY_ARRAY, "HGETALL %s", hash);
    if (h == NULL)
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    redisReply *z = cli_redis_cmd(r, REDIS_REPLY_ARRAY, "ZRANGE %s 0 -1 WITHSCORES", livekey);
    if (z == NULL) {
        freeReplyObject(h);
        return cli_fail(cli, CMD, r->status, r->kind, "%s", r->err);
    }
    uint64_t now = (uint64_t)t;
    node_row_t *rows = calloc(h->elements / 2 + 1, sizeof *rows);
    size_t n = 0;
    int rc = CLI_OK;
    if (rows == NULL) {
        rc = cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
        goto done;
    }
    for (size_t i = 0; i + 1 < h->elements; i += 2) {
        const redisReply *f = h->element[i], *v = h->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        int id_len = rl__nodes_incarnation_split(f->str, f->len);
        if (id_len < 0) {
            /* The script's own clock field, "t": its now never goes back. */
            if (f->len == 1 && f->str[0] == 't' && strtoull(v->str, NULL, 10) > now)
                now = strtoull(v->str, NULL, 10);
            continue;
        }
        node_row_t *row = &rows[n++];
        snprintf(row->inc, sizeof row->inc, "%.*s", (int)f->len, f->str);
        row->id_len = id_len < (int)sizeof row->inc ? id_len : (int)strlen(row->inc);
        row->known = rl__nodes_parse(v->str, v->len, &row->rec) == 0;
        for (size_t k = 0; k + 1 < z->elements; k += 2)
            if (z->element[k]->type == REDIS_REPLY_STRING &&
                z->element[k]->len == f->len && memcmp(z->element[k]->str, f->str, f->len) == 0) {
                row->has_deadline = 1;
                row->deadline_ms = (uint64_t)strtod(z->element[k + 1]->str, NULL);
            }
    }
    for (size_t i = 0; i < n; i++)
        rows[i].live = rows[i].has_deadline && rows[i].deadline_ms >= now;
    qsort(rows, n, sizeof *rows, cmp_row);
done:
    freeReplyObject(h);
    freeReplyObject(z);
    *out = rows;
    *nout = n;
    *now_out = now;
    return rc;
}

int cli_nodes(cli_t *cli, int argc, char **argv)
{
    cli_fleet_t fl;
    const char *pos[1];
    if (cli_fleet_opts(cli, CMD, argc, argv, 0, NULL, pos, 0, NULL, &fl) != CLI_OK)
        return CLI_USAGE;
    const char *prefix = fl.prefix;
    cli_redis_t r;
    int rc = cli_fleet_connect(cli, CMD, &fl, &r);
    if (rc != CLI_OK)
        return rc;
    node_row_t *rows = NULL;
    size_t n = 0;
    uint64_t now = 0;
    rc = load_rows(cli, &r, prefix, &rows, &n, &now);
    if (rc == CLI_OK) {
        size_t live = 0;
        for (size_t i = 0; i < n; i++)
            live += (size_t)rows[i].live;
        fp_group_t *g = calloc(n + 1, sizeof *g);
        size_t ng = g != NULL ? fp_groups(rows, n, g) : 0;
        if (cli->json)
            print_json(rows, n, now, prefix, r.where, live, g, ng);
        else
            print_text(rows, n, now, prefix, r.where, live, g, ng);
        free(g);
    }
    free(rows);
    cli_redis_close(&r);
    return rc;
}
