/* SPDX-License-Identifier: MIT */
/*
 * The nodes of a simulated fleet: independent rl_t instances in this
 * process sharing one Redis, one key_secret and one key_prefix, each with
 * its own node_id. Also the two internal views the simulator needs: the
 * share a node holds (read from its table's share words) and the sync
 * thread's counters.
 */
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "acc.h"
#include "exact/exact.h"
#include "instance.h"
#include "redis/url.h"
#include "local/shareword.h"
#include "sync/sync.h"
#include "testutil.h"

/* Shared by every node: the nodes must name keys alike. */
static const char fleet_secret[] = "rl-accuracy-fleet-secret";

uint64_t acc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void acc_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The virtual clock hook. tests/testutil.c has the same function, but it
 * also holds the Check runner, which would drag libcheck into a benchmark:
 * this reads the same rl_test_clock_t the same way. */
static uint64_t virtual_clock(void *ud, int32_t source)
{
    rl_test_clock_t *c = ud;
    /* relaxed: the driver thread is the only writer, and it never advances
     * time while a sync round (the other reader) is running. */
    uint64_t t = atomic_load_explicit(&c->precise_ns, memory_order_relaxed);
    if (source == RL_CLOCK_COARSE && c->coarse_tick_ns != 0)
        t -= t % c->coarse_tick_ns;
    return t;
}

void acc_fleet_cfg_init(acc_fleet_cfg_t *c, const acc_opts_t *o, const acc_scen_t *sc,
                        const char *mode_tag)
{
    memset(c, 0, sizeof *c);
    c->redis_url = o->redis_url;
    /* One prefix per (run, scenario, mode, policy): runs sharing a Redis
     * (REDIS_URL), the scenarios of one run and a matrix cell's policies
     * (global, tiered, hot: the same scenario, run one after another from
     * the same virtual time) never see each other's keys. Sharing them, a
     * cell's later runs met the earlier runs' node entries, live in their
     * virtual time, as phantom nodes holding demand. */
    snprintf(c->prefix, sizeof c->prefix, "acc%x.%s.%s%s", o->run_tag & 0xffffffu, sc->name,
             mode_tag, sc->tiered ? "t" : sc->hot_every > 0 ? "h" : "");
    c->interval_ms = sc->interval_ms;
    c->expected = sc->expected;
    c->max_keys = 1024;
    c->rate = sc->rate;
    c->burst = sc->burst;
    c->tiered = sc->tiered;
    c->hot_every = sc->hot_every;
    c->cut_node = -1;
}

static int add_limit(acc_node_t *n, uint64_t rate, uint64_t burst, int tiered,
                     uint32_t hot_every)
{
    rl_limit_t lim;
    rl_limit_init(&lim);
    snprintf(lim.name, sizeof lim.name, "acc");
    lim.rate.count = rate;
    lim.rate.period_ms = 1000;
    lim.burst = burst;
    lim.mode = tiered ? RL_MODE_TIERED : RL_MODE_GLOBAL;
    if (hot_every > 0) {
        lim.hot_ppm = 500000; /* hot=0.5: the scenarios' keys run at 2-5x */
        lim.hot_policy = RL_HOT_POLICY_LOCAL;
        lim.hot_every = hot_every;
    }
    n->limit = rl_limit_add(n->rl, &lim);
    return n->limit < 0 ? n->limit : 0;
}

int acc_node_open(acc_node_t *n, const acc_fleet_cfg_t *c, int index)
{
    memset(n, 0, sizeof *n);
    /* Fixed width: the script orders nodes by name, so ties in the share
     * rule go the same way on every run. */
    snprintf(n->name, sizeof n->name, "n%02d", index);
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.redis_url = index == c->cut_node && c->cut_url != NULL ? c->cut_url : c->redis_url;
    cfg.node_id = n->name;
    cfg.sync_interval_ms = c->interval_ms;
    cfg.expected_nodes = c->expected;
    cfg.max_keys = c->max_keys;
    cfg.key_secret = fleet_secret;
    cfg.key_secret_len = sizeof fleet_secret - 1;
    cfg.key_prefix = c->prefix;
    /* A confirmation waits for Redis, not for a deadline a loaded box
     * misses: virtual time stands still meanwhile, and an on_failure answer
     * would be the box's noise in the figures. */
    cfg.exact_timeout_ms = 2000;
    cfg.exact_pool_size = 1;
    if (c->clock != NULL) {
        cfg.clock = virtual_clock;
        cfg.clock_ud = c->clock;
        cfg.clock_coarse_tick_ns = c->clock->coarse_tick_ns;
    }
    int rc = rl__open(&n->rl, &cfg, c->manual);
    if (rc != 0) {
        fprintf(stderr, "rl_accuracy: rl_open(%s): %s\n", n->name, rl_strerror(rc));
        return rc;
    }
    rc = add_limit(n, c->rate, c->burst, c->tiered, c->hot_every);
    if (rc != 0) {
        fprintf(stderr, "rl_accuracy: rl_limit_add(%s): %s\n", n->name, rl_strerror(rc));
        rl_close(n->rl);
        n->rl = NULL;
    }
    return rc;
}

uint64_t acc_node_redis_checks(acc_node_t *n)
{
    if (n->rl == NULL || n->rl->exact == NULL)
        return 0;
    rl_exact_counters_t c;
    rl__exact_counters(n->rl->exact, &c);
    return c.sent;
}

void acc_node_virtual_now(acc_node_t *n, uint64_t us)
{
    if (n->rl != NULL && n->rl->exact != NULL)
        rl__exact_virtual_now(n->rl->exact, us);
}

void acc_node_close(acc_node_t *n)
{
    if (n->rl != NULL && !n->closed)
        rl_close(n->rl);
    n->closed = 1;
    n->rl = NULL;
}

static rl_sync_counters_t counters(acc_node_t *n)
{
    rl_sync_counters_t c;
    rl__sync_counters(n->rl->sync, &c);
    return c;
}

int acc_wait_connected(acc_node_t *nodes, int n, uint32_t timeout_ms)
{
    for (uint32_t waited = 0; waited <= timeout_ms; waited += 5) {
        int ok = 1;
        for (int i = 0; i < n; i++)
            ok &= nodes[i].rl == NULL || counters(&nodes[i]).connected == 1;
        if (ok)
            return 0;
        acc_sleep_ms(5);
    }
    return -1;
}

int acc_wait_state(acc_node_t *n, int want, uint32_t timeout_ms)
{
    for (uint32_t waited = 0; waited <= timeout_ms; waited += 2) {
        if (counters(n).connected == (uint64_t)want)
            return 0;
        acc_sleep_ms(2);
    }
    return -1;
}

int acc_cut_setup(rl_blackhole_t *c, const acc_opts_t *o, const acc_scen_t *sc,
                  acc_fleet_cfg_t *fc, char *url, size_t url_len)
{
    memset(c, 0, sizeof *c);
    if (sc->cut_node < 0)
        return 0;
    rl_redisurl_t u;
    if (rl__redisurl_parse(o->redis_url, &u, NULL, 0) != 0 || rl_blackhole_start(c, u.port) != 0)
        return -1;
    /* The same server, credentials and database, through the proxy. */
    const char *at = strchr(o->redis_url, '@');
    const char *db = strchr(o->redis_url + 8, '/');
    int len;
    if (at != NULL)
        len = snprintf(url, url_len, "%.*s@127.0.0.1:%d%s", (int)(at - o->redis_url),
                       o->redis_url, c->port, db != NULL && db > at ? db : "");
    else
        len = snprintf(url, url_len, "redis://127.0.0.1:%d%s", c->port, db != NULL ? db : "");
    if (len < 0 || (size_t)len >= url_len) {
        rl_blackhole_stop(c);
        return -1;
    }
    fc->cut_url = url;
    fc->cut_node = sc->cut_node;
    return 0;
}

void acc_node_counters(acc_node_t *n, uint64_t *reports, uint64_t *calls)
{
    rl_sync_counters_t c = counters(n);
    *reports = c.reports;
    *calls = c.calls;
}

uint64_t acc_node_heartbeats(acc_node_t *n)
{
    return counters(n).nodes_writes;
}

int acc_node_step(acc_node_t *n, uint64_t virtual_ms)
{
    return rl__sync_step(n->rl->sync, virtual_ms);
}

/* One slot's share as (fraction of the limit, burst tokens). A slot with
 * no share word yet runs at the pre-sync default. */
static void slot_share(const rl_limit_params_t *p, uint64_t w, double *q, double *b)
{
    rl_gcra_t g;
    if (w == 0) {
        g = p->presync;
    } else {
        rl__shareword_decode(w, &g);
    }
    *q = g.t_fp >= RL_SHAREWORD_T_MAX ? 0.0 : (double)p->normal.t_fp / (double)g.t_fp;
    *b = (double)g.burst;
}

int acc_node_share(acc_node_t *n, double *q, double *b)
{
    *q = *b = 0.0;
    rl_limit_slot_t *ls = rl__limit_get(&n->rl->limits, n->limit);
    if (ls == NULL)
        return 0;
    rl_limit_params_t p;
    rl__params_read(ls, &p);
    uint32_t lref = rl__limit_ref(n->limit);
    rl_table_t *t = &n->rl->table;
    int keys = 0;
    for (size_t i = 0; i < t->nslots; i++) {
        /* acquire: as a lookup; the share word read after it is the
         * occupant's (the sync thread is idle between manual rounds). */
        uint64_t c = atomic_load_explicit(&t->slots[i].ctrl, memory_order_acquire);
        if (RL_CTRL_STATE(c) != RL_SLOT_LIVE || RL_CTRL_LREF(c) != lref)
            continue;
        double sq, sb;
        slot_share(&p, atomic_load_explicit(&t->slots[i].share, memory_order_relaxed), &sq,
                   &sb);
        *q += sq;
        *b += sb;
        keys++;
    }
    return keys;
}

/* ------------------------------------------------------- Redis's own figures */

static redisContext *info_client_at(const rl_redisurl_t *u, const char *host, int port)
{
    struct timeval tv = {2, 0};
    redisContext *r = u->kind == RL_REDISURL_UNIX ? redisConnectUnixWithTimeout(u->path, tv)
                                                  : redisConnectWithTimeout(host, port, tv);
    if (r == NULL || r->err != 0) {
        if (r != NULL)
            redisFree(r);
        return NULL;
    }
    if (u->password[0] != '\0') {
        redisReply *a = u->user[0] != '\0'
                            ? redisCommand(r, "AUTH %s %s", u->user, u->password)
                            : redisCommand(r, "AUTH %s", u->password);
        if (a != NULL)
            freeReplyObject(a);
    }
    if (u->db != 0) {
        redisReply *a = redisCommand(r, "SELECT %d", u->db);
        if (a != NULL)
            freeReplyObject(a);
    }
    return r;
}

#define SERVERS_MAX 16

/* The servers a URL's data lives on: itself, or a cluster's masters (from
 * its first seed's CLUSTER SLOTS). Their number, or -1. */
static int servers_of(const char *url, rl_redisurl_t *u, char host[][256], int *port)
{
    if (rl__redisurl_parse(url, u, NULL, 0) != 0)
        return -1;
    snprintf(host[0], 256, "%s", u->host);
    port[0] = u->port;
    if (u->kind != RL_REDISURL_CLUSTER)
        return 1;
    redisContext *r = info_client_at(u, u->host, u->port);
    if (r == NULL)
        return -1;
    redisReply *slots = redisCommand(r, "CLUSTER SLOTS");
    int n = 0;
    for (size_t i = 0; slots != NULL && slots->type == REDIS_REPLY_ARRAY && i < slots->elements;
         i++) {
        const redisReply *m = slots->element[i]->element[2];
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= port[k] == (int)m->element[1]->integer && strcmp(host[k], m->element[0]->str) == 0;
        if (!seen && n < SERVERS_MAX) {
            snprintf(host[n], 256, "%s", m->element[0]->str);
            port[n++] = (int)m->element[1]->integer;
        }
    }
    if (slots != NULL)
        freeReplyObject(slots);
    redisFree(r);
    return n > 0 ? n : -1;
}

/* One "name:value" field of an INFO reply, as a double; 0 if absent. */
static double info_field(const char *info, const char *name)
{
    const char *p = strstr(info, name);
    return p != NULL ? strtod(p + strlen(name), NULL) : 0.0;
}

/* One server's figures, added to st. 0, or -1. */
static int server_stats(redisContext *r, acc_redis_stats_t *st)
{
    int rc = -1;
    redisReply *cmd = redisCommand(r, "INFO commandstats");
    redisReply *cpu = redisCommand(r, "INFO cpu");
    if (cmd != NULL && cmd->type == REDIS_REPLY_STRING && cpu != NULL &&
        cpu->type == REDIS_REPLY_STRING) {
        const char *line = strstr(cmd->str, "cmdstat_evalsha:");
        unsigned long long c = 0, u = 0;
        /* No such line: no script ran yet. */
        if (line == NULL || sscanf(line, "cmdstat_evalsha:calls=%llu,usec=%llu", &c, &u) == 2)
            rc = 0;
        st->evalsha_calls += c;
        st->evalsha_usec += u;
        st->usec_of[st->servers] = u;
        st->cpu_s += info_field(cpu->str, "used_cpu_user:") + info_field(cpu->str, "used_cpu_sys:");
    }
    if (cmd != NULL)
        freeReplyObject(cmd);
    if (cpu != NULL)
        freeReplyObject(cpu);
    return rc;
}

int acc_redis_stats(const char *url, acc_redis_stats_t *st)
{
    memset(st, 0, sizeof *st);
    rl_redisurl_t u;
    char host[SERVERS_MAX][256];
    int port[SERVERS_MAX];
    int n = servers_of(url, &u, host, port);
    for (int i = 0; i < n; i++) {
        redisContext *r = info_client_at(&u, host[i], port[i]);
        if (r == NULL || server_stats(r, st) != 0) {
            if (r != NULL)
                redisFree(r);
            return -1;
        }
        st->servers++;
        redisFree(r);
    }
    return n > 0 ? 0 : -1;
}

/* Delete every key under a prefix on one server; the number, or -1. */
static long long flush_prefix_on(redisContext *r, const char *prefix)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "{%s:v1*", prefix);
    long long deleted = 0;
    char cursor[32] = "0";
    do {
        redisReply *page = redisCommand(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (page == NULL || page->type != REDIS_REPLY_ARRAY || page->elements != 2) {
            if (page != NULL)
                freeReplyObject(page);
            deleted = -1;
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", page->element[0]->str);
        redisReply *keys = page->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *d = redisCommand(r, "DEL %s", keys->element[i]->str);
            if (d != NULL && d->type == REDIS_REPLY_INTEGER)
                deleted += d->integer;
            if (d != NULL)
                freeReplyObject(d);
        }
        freeReplyObject(page);
    } while (strcmp(cursor, "0") != 0);
    return deleted;
}

long long acc_flush_prefix(const char *url, const char *prefix)
{
    rl_redisurl_t u;
    char host[SERVERS_MAX][256];
    int port[SERVERS_MAX];
    int n = servers_of(url, &u, host, port);
    long long deleted = n > 0 ? 0 : -1;
    for (int i = 0; i < n && deleted >= 0; i++) {
        redisContext *r = info_client_at(&u, host[i], port[i]);
        long long d = r != NULL ? flush_prefix_on(r, prefix) : -1;
        deleted = d < 0 ? -1 : deleted + d;
        if (r != NULL)
            redisFree(r);
    }
    return deleted;
}
