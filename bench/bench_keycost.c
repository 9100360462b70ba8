/* SPDX-License-Identifier: MIT */
/*
 * rl_bench_keycost: the Redis time one key costs per sync round as the nodes
 * sharing it grow (linearly, not with their square: the script computes
 * a key's shares once per round, not per report). N instances in this
 * process (manual rounds, one virtual clock, as the accuracy simulator's
 * virtual mode drives them) share one global key; every node offers it 3x
 * its fair part every round, so every node reports it every round. After
 * the warm-up rounds, the report script's own time is read from SLOWLOG
 * (threshold 0: every command, its duration as Redis measured it) and
 * summed over the measured rounds; the heartbeats, another script, are
 * left out by their SHA. A report, not a gate.
 *
 *   rl_bench_keycost [rounds] [nodes...]     default: 40 rounds; 5 10 30 100
 *   REDIS_URL=redis://host:port rl_bench_keycost    an existing server (no
 *                                                    password; its SLOWLOG is reset)
 */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "instance.h"
#include "redis_server.h"
#include "lua/scripts.h"
#include "sync/sync.h"

#define MAX_NODES 200
#define WARMUP_ROUNDS 10
#define INTERVAL_MS 100
#define RATE 1000
#define BURST 100
/* Virtual time starts well above 0: 0 is "use TIME" to the script. */
#define VIRTUAL_START_NS UINT64_C(1000000000000)
/* Every command of the measured rounds must fit (reports + heartbeats). */
#define SLOWLOG_LEN 200000

static const char secret[] = "rl-bench-keycost-secret";
static const char key[] = "k";

static uint64_t virtual_clock(void *ud, int32_t source)
{
    (void)source;
    /* relaxed: main is the only writer, and it never advances time while a
     * round (the other reader) runs. */
    return atomic_load_explicit((_Atomic uint64_t *)ud, memory_order_relaxed);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static redisReply *cmd(redisContext *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "rl_bench_keycost: %s: %s\n", fmt,
                rep != NULL ? rep->str : r->errstr);
        exit(1);
    }
    return rep;
}

/* The report script's SHA: the one the nodes call. */
static void report_sha(redisContext *r, char *sha, size_t len)
{
    redisReply *rep = cmd(r, "SCRIPT LOAD %s", rl__lua_report);
    snprintf(sha, len, "%s", rep->str);
    freeReplyObject(rep);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sum and count the report script's SLOWLOG entries since the last reset,
 * and their median and largest. */
static void slowlog_sum(redisContext *r, const char *sha, uint64_t *usec, uint64_t *calls,
                        uint64_t *p50, uint64_t *max)
{
    *usec = *calls = *p50 = *max = 0;
    redisReply *rep = cmd(r, "SLOWLOG GET -1");
    uint64_t *each = calloc(rep->elements + 1, sizeof *each);
    if (each == NULL)
        exit(1);
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4)
            continue;
        redisReply *args = e->element[3];
        if (args->type != REDIS_REPLY_ARRAY || args->elements < 2 ||
            strcasecmp(args->element[0]->str, "evalsha") != 0 ||
            strcmp(args->element[1]->str, sha) != 0)
            continue;
        each[*calls] = (uint64_t)e->element[2]->integer;
        *usec += each[(*calls)++];
    }
    freeReplyObject(rep);
    qsort(each, *calls, sizeof *each, cmp_u64);
    if (*calls > 0) {
        *p50 = each[*calls / 2];
        *max = each[*calls - 1];
    }
    free(each);
}

static rl_t *open_node(const char *url, const char *prefix, int i, int n, _Atomic uint64_t *clk,
                       int32_t *limit)
{
    char name[16];
    /* Fixed width: the script orders nodes by name. */
    snprintf(name, sizeof name, "n%03d", i);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = url;
    c.node_id = name;
    c.sync_interval_ms = INTERVAL_MS;
    c.expected_nodes = (uint32_t)n;
    c.max_keys = 1024;
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    c.key_prefix = prefix;
    c.clock = virtual_clock;
    c.clock_ud = clk;
    rl_t *rl = NULL;
    int rc = rl__open(&rl, &c, 1);
    if (rc != 0) {
        fprintf(stderr, "rl_bench_keycost: rl_open(%s): %s\n", name, rl_strerror(rc));
        exit(1);
    }
    rl_limit_t lim;
    rl_limit_init(&lim);
    snprintf(lim.name, sizeof lim.name, "cost");
    lim.rate.count = RATE;
    lim.rate.period_ms = 1000;
    lim.burst = BURST;
    lim.mode = RL_MODE_GLOBAL;
    *limit = rl_limit_add(rl, &lim);
    if (*limit < 0) {
        fprintf(stderr, "rl_bench_keycost: rl_limit_add: %s\n", rl_strerror(*limit));
        exit(1);
    }
    return rl;
}

static int connected(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    return s.sync_connected == 1;
}

static uint64_t reports(rl_t *rl)
{
    rl_stats_t s;
    rl_stats_init(&s);
    rl_stats(rl, &s);
    return s.sync_reports;
}

static void run(const char *url, redisContext *r, const char *sha, int n, int rounds)
{
    static rl_t *rl[MAX_NODES];
    static int32_t lim[MAX_NODES];
    _Atomic uint64_t clk;
    atomic_init(&clk, VIRTUAL_START_NS);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "kc%d.%ld", n, (long)time(NULL) % 100000);
    for (int i = 0; i < n; i++)
        rl[i] = open_node(url, prefix, i, n, &clk, &lim[i]);
    for (int waited = 0; waited < 30000; waited += 5) {
        int ok = 1;
        for (int i = 0; i < n && ok; i++)
            ok = connected(rl[i]);
        if (ok)
            break;
        sleep_ms(5);
    }
    /* 3x a node's fair part of a round's limit, at least 2 requests. */
    int per = 3 * RATE * INTERVAL_MS / 1000 / n;
    per = per < 2 ? 2 : per;
    uint64_t rep0 = 0;
    for (int round = 0; round < WARMUP_ROUNDS + rounds; round++) {
        if (round == WARMUP_ROUNDS) {
            freeReplyObject(cmd(r, "SLOWLOG RESET"));
            for (int i = 0; i < n; i++)
                rep0 += reports(rl[i]);
        }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < per; k++)
                (void)rl_check(rl[i], lim[i], key, sizeof key - 1, 1, NULL);
        /* relaxed: see virtual_clock. */
        uint64_t ns = atomic_fetch_add_explicit(&clk,
                                                (uint64_t)INTERVAL_MS * 1000000u,
                                                memory_order_relaxed) +
                      (uint64_t)INTERVAL_MS * 1000000u;
        for (int i = 0; i < n; i++)
            if (rl__sync_step(rl[i]->sync, ns / 1000000u) != 0)
                fprintf(stderr, "rl_bench_keycost: a round of n%03d failed\n", i);
    }
    uint64_t usec, calls, p50, max, rep1 = 0;
    slowlog_sum(r, sha, &usec, &calls, &p50, &max);
    for (int i = 0; i < n; i++)
        rep1 += reports(rl[i]);
    printf("| %d | %.0f | %.1f | %.1f | %" PRIu64 " | %" PRIu64 " | %.2f |\n", n,
           (double)usec / rounds, (double)calls / rounds,
           (double)usec / (double)(calls ? calls : 1), p50, max,
           (double)(rep1 - rep0) / rounds / n);
    fflush(stdout);
    for (int i = 0; i < n; i++)
        rl_close(rl[i]);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    int counts[16] = {5, 10, 30, 100}, ncounts = 4;
    if (argc > 2) {
        ncounts = 0;
        for (int i = 2; i < argc && ncounts < 16; i++)
            counts[ncounts++] = atoi(argv[i]);
    }
    if (rounds < 1) {
        fprintf(stderr, "usage: rl_bench_keycost [rounds >= 1] [nodes (1..%d)...]\n", MAX_NODES);
        return 2;
    }
    for (int i = 0; i < ncounts; i++)
        if (counts[i] < 1 || counts[i] > MAX_NODES) {
            fprintf(stderr, "rl_bench_keycost: nodes must be 1..%d\n", MAX_NODES);
            return 2;
        }
    bench_redis_t srv = {0};
    char url[128], why[256];
    const char *env = getenv("REDIS_URL");
    char host[64] = "127.0.0.1";
    int port;
    if (env != NULL && *env != '\0') {
        snprintf(url, sizeof url, "%s", env);
        if (sscanf(env, "redis://%63[^:]:%d", host, &port) != 2) {
            fprintf(stderr, "rl_bench_keycost: REDIS_URL must be redis://host:port\n");
            return 2;
        }
    } else {
        int rc = bench_redis_start(&srv, why, sizeof why);
        if (rc != 0) {
            printf("rl_bench_keycost: %s\n", why);
            return rc > 0 ? 0 : 1;
        }
        port = srv.port;
        snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    }
    redisContext *r = redisConnect(host, port);
    if (r == NULL || r->err) {
        fprintf(stderr, "rl_bench_keycost: cannot reach Redis on port %d\n", port);
        bench_redis_stop(&srv);
        return 1;
    }
    char sha[64];
    report_sha(r, sha, sizeof sha);
    freeReplyObject(cmd(r, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(cmd(r, "CONFIG SET slowlog-max-len %d", SLOWLOG_LEN));
    printf("%d measured rounds after %d warm-up, one key, %d/s burst %d, %d ms rounds\n\n",
           rounds, WARMUP_ROUNDS, RATE, BURST, INTERVAL_MS);
    printf("| nodes | Redis us per round (report script) | calls per round | us per call | "
           "median call, us | slowest call, us | reports per node per round |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < ncounts; i++)
        run(url, r, sha, counts[i], rounds);
    redisFree(r);
    bench_redis_stop(&srv);
    return 0;
}
