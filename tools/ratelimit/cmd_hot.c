/* SPDX-License-Identifier: MIT */
/* ratelimit hot: the fleet's hot keys, the union of what each live node
 * publishes in the node registry (its record's hot word, sync/nodes.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "cli.h"
#include "fleetopts.h"
#include "local/limitdef.h"
#include "output.h"
#include "redisconn.h"
#include "sync/nodes.h"
#include "hot/hot.h"

#define CMD "hot"

/* One key of the union: the nodes that publish it, summed or maxed. */
typedef struct hot_row {
    rl_hot_item_t k;     /* demand_mps summed over nodes; fleet_mps (the hot mark's
                            rate, below) the max */
    uint64_t nodes;       /* live nodes that publish it */
    uint64_t hot_nodes;   /* of those, the ones that mark it hot */
} hot_row_t;

static int same_key(const rl_hot_item_t *a, const rl_hot_item_t *b)
{
    return strcmp(a->limit, b->limit) == 0 && a->key_len == b->key_len && a->kept == b->kept &&
           memcmp(a->key, b->key, a->kept) == 0;
}

static int cmp_row(const void *pa, const void *pb)
{
    const hot_row_t *a = pa, *b = pb;
    if (a->hot_nodes != b->hot_nodes)
        return a->hot_nodes > b->hot_nodes ? -1 : 1;
    if (a->k.demand_mps != b->k.demand_mps)
        return a->k.demand_mps > b->k.demand_mps ? -1 : 1;
    return strcmp(a->k.limit, b->k.limit);
}

/* Add one node's items to the union (rows has room for every item). */
static size_t add_node(hot_row_t *rows, size_t n, const rl_nodes_record_t *rec,
                       const char *limit)
{
    const char *p = rec->hot, *end = rec->hot + rec->hot_len;
    rl_hot_item_t it;
    size_t seen = 0;
    while (seen < RL_HOT_WORD_ITEMS && rl__hot_item_next(&p, end, &it)) {
        seen++;
        if (limit != NULL && strcmp(limit, it.limit) != 0)
            continue;
        size_t j = 0;
        while (j < n && !same_key(&rows[j].k, &it))
            j++;
        if (j == n) {
            rows[n++] = (hot_row_t){.k = it};
            rows[j].k.demand_mps = 0;
            rows[j].k.fleet_mps = 0;
            rows[j].k.hot = 0;
        }
        hot_row_t *r = &rows[j];
        r->nodes++;
        r->hot_nodes += (uint64_t)it.hot;
        r->k.hot |= it.hot;
        r->k.demand_mps += it.demand_mps;
        if (it.fleet_mps > r->k.fleet_mps)
            r->k.fleet_mps = it.fleet_mps;
    }
    return n;
}

static void print_json(const hot_row_t *rows, size_t n, const char *prefix, const char *where,
                       size_t live)
{
    json_t j;
    cli_fleet_json_begin(&j, where, prefix);
    json_u64(&j, "live_nodes", live);
    json_array(&j, "keys");
    for (size_t i = 0; i < n; i++) {
        const hot_row_t *r = &rows[i];
        json_object(&j, NULL);
        json_str(&j, "limit", r->k.limit);
        json_strn(&j, "key", (const char *)r->k.key, r->k.kept);
        char hex[2 * sizeof r->k.key + 1];
        for (size_t b = 0; b < r->k.kept; b++)
            snprintf(hex + 2 * b, 3, "%02x", r->k.key[b]);
        hex[2 * r->k.kept] = '\0';
        json_str(&j, "key_hex", hex);
        json_u64(&j, "key_len", r->k.key_len);
        json_bool(&j, "truncated", r->k.key_len > r->k.kept);
        json_bool(&j, "hot", r->k.hot);
        json_u64(&j, "hot_nodes", r->hot_nodes);
        json_u64(&j, "nodes", r->nodes);
        json_double(&j, "demand_per_s", (double)r->k.demand_mps / 1000.0);
        json_double(&j, "hot_rate_per_s", (double)r->k.fleet_mps / 1000.0);
        json_end(&j);
    }
    json_end(&j);
    json_finish(&j);
}

static void print_text(const hot_row_t *rows, size_t n, const char *prefix, const char *where,
                       size_t live)
{
    printf("fleet \"%s\" at %s: %zu live node%s, %zu busiest key%s published\n", prefix, where,
           live, live == 1 ? "" : "s", n, n == 1 ? "" : "s");
    if (n == 0)
        return;
    printf("\n");
    /* The hot word's second rate is what a node's hot mark compared with
     * hot=: the fleet's admitted rate or the node's own demand, whichever
     * was higher. Named for that, never as a fleet rate. */
    static const char *const head[] = {"LIMIT", "KEY", "HOT", "NODES", "DEMAND/S", "HOT RATE/S"};
    table_t t;
    table_init(&t, 6, head, "lllrrr");
    for (size_t i = 0; i < n; i++) {
        const hot_row_t *r = &rows[i];
        char key[4 * sizeof r->k.key + 8];
        fmt_printable(key, sizeof key, r->k.key, r->k.kept);
        table_cell(&t, "%s", r->k.limit);
        if (r->k.key_len > r->k.kept)
            table_cell(&t, "%s... (%" PRIu64 " bytes)", key, r->k.key_len);
        else
            table_cell(&t, "%s", key);
        table_cell(&t, "%s", r->hot_nodes ? "hot" : "-");
        table_cell(&t, "%" PRIu64 "/%" PRIu64, r->hot_nodes, r->nodes);
        table_cell(&t, "%.1f", (double)r->k.demand_mps / 1000.0);
        table_cell(&t, "%.1f", (double)r->k.fleet_mps / 1000.0);
    }
    table_print(&t, stdout);
    table_free(&t);
    printf("\nDEMAND/S: the publishing nodes' own demand (admitted + denied per second), "
           "summed.\nHOT RATE/S: what the hot mark compares with hot=, the highest a node "
           "published: the fleet's admitted rate from its last sync reply, or that node's own "
           "demand when higher (so it may pass the limit).\n");
}

int cli_hot(cli_t *cli, int argc, char **argv)
{
    const char *limit = NULL;
    const cli_opt_t limit_opt = {"--limit", &limit, NULL};
    cli_fleet_t fl;
    const char *pos[1];
    if (cli_fleet_opts(cli, CMD, argc, argv, 0, &limit_opt, pos, 0, NULL, &fl) != CLI_OK)
        return CLI_USAGE;
    const char *prefix = fl.prefix;
    if (limit != NULL && !rl__name_valid(limit, 64))
        return cli_usage_error(cli, CMD, "--limit: a limit name, 1..63 bytes of [A-Za-z0-9_.:-]");
    cli_redis_t r;
    int rc = cli_fleet_connect(cli, CMD, &fl, &r);
    if (rc != CLI_OK)
        return rc;
    char hash[96], livekey[96];
    rl__nodes_key_names(prefix, hash, sizeof hash, livekey, sizeof livekey);
    long long t = cli_redis_time_ms(&r);
    redisReply *h = t < 0 ? NULL : cli_redis_cmd(&r, REDIS_REPLY_ARRAY, "HGETALL %s", hash);
    /* Live: a deadline not passed (the registry's own rule; `nodes`). */
    redisReply *z = h == NULL ? NULL
                              : cli_redis_cmd(&r, REDIS_REPLY_ARRAY, "ZRANGEBYSCORE %s %lld +inf",
                                              livekey, t);
    if (z == NULL) {
        rc = cli_fail(cli, CMD, r.status, r.kind, "%s", r.err);
        if (h != NULL)
            freeReplyObject(h);
        cli_redis_close(&r);
        return rc;
    }
    hot_row_t *rows = calloc(h->elements / 2 * RL_HOT_WORD_ITEMS + 1, sizeof *rows);
    size_t n = 0, live = 0;
    if (rows == NULL) {
        rc = cli_fail(cli, CMD, CLI_RUNTIME, "internal", "out of memory");
    } else {
        for (size_t i = 0; i + 1 < h->elements; i += 2) {
            const redisReply *f = h->element[i], *v = h->element[i + 1];
            if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
                rl__nodes_incarnation_split(f->str, f->len) < 0)
                continue;
            int is_live = 0;
            for (size_t k = 0; k < z->elements && !is_live; k++)
                is_live = z->element[k]->type == REDIS_REPLY_STRING &&
                          z->element[k]->len == f->len &&
                          memcmp(z->element[k]->str, f->str, f->len) == 0;
            rl_nodes_record_t rec;
            if (!is_live || rl__nodes_parse(v->str, v->len, &rec) != 0)
                continue;
            live++;
            if (rec.hot != NULL)
                n = add_node(rows, n, &rec, limit);
        }
        qsort(rows, n, sizeof *rows, cmp_row);
        if (cli->json)
            print_json(rows, n, prefix, r.where, live);
        else
            print_text(rows, n, prefix, r.where, live);
    }
    free(rows);
    freeReplyObject(h);
    freeReplyObject(z);
    cli_redis_close(&r);
    return rc;
}
