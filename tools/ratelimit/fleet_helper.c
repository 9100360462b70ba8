/* SPDX-License-Identifier: MIT */
/*
 * rl_cli_fleet: a fleet of N nodes (rl_t instances, one process) sharing one
 * limit through Redis, for tools/ratelimit/test.sh to inspect while it runs.
 *
 *   rl_cli_fleet --redis URL --prefix P --secret-file F --spec SPEC --key KEY
 *                [--key2-hex HEX] [--nodes N] [--warm-ms MS] [--max-seconds S]
 *                [--name NAME]
 *
 * Node i is "<NAME>-<i>" (NAME defaults to cli-node; sync interval 200 ms, the longest, so a busy
 * machine rarely stalls a node past its entry's deadline; expected_nodes N). One
 * thread per node checks KEY: node 0 about 4 checks a millisecond (past any
 * sane limit), the others one every 5 ms; each also checks KEY2 (given in
 * hex, so it can hold any byte but NUL) once a step when given. After --warm-ms (default 1000) it
 * prints "ready", and keeps the load going until a line "stop" (or end of
 * input, or --max-seconds, default 120): then it stops the load, closes
 * every node (each hands its share back and leaves the node registry) and
 * prints "admitted <node> <count>" per node (what rl_check allowed there),
 * then "closed". Exit 0, or 1 on any error.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ratelimit.h"

#define NODES_MAX 8

typedef struct node {
    rl_t *rl;
    int id;
    int index;
    char name[48]; /* "<name, 20 bytes at most>-<index>": room for any long */
    const char *key;
    const char *key2;
    size_t key2_len;
    pthread_t th;
    atomic_int *stop;
    _Atomic uint64_t admitted; /* read by main after the join */
    _Atomic int err;
} node_t;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *drive(void *arg)
{
    node_t *n = arg;
    int per_step = n->index == 0 ? 4 : 1;
    unsigned step_ms = n->index == 0 ? 1 : 5;
    /* relaxed: a stop flag; the join orders everything after it. */
    while (!atomic_load_explicit(n->stop, memory_order_relaxed)) {
        for (int i = 0; i < per_step; i++) {
            int rc = rl_check(n->rl, n->id, n->key, strlen(n->key), 1, NULL);
            if (rc < 0) {
                atomic_store_explicit(&n->err, rc, memory_order_relaxed);
                return NULL;
            }
            /* relaxed: a count read after the join. */
            atomic_fetch_add_explicit(&n->admitted, rc == RL_ALLOW, memory_order_relaxed);
        }
        if (n->key2_len > 0 && rl_check(n->rl, n->id, n->key2, n->key2_len, 1, NULL) < 0) {
            atomic_store_explicit(&n->err, 1, memory_order_relaxed);
            return NULL;
        }
        sleep_ms(step_ms);
    }
    return NULL;
}

static int die(const char *what)
{
    fprintf(stderr, "rl_cli_fleet: %s\n", what);
    return 1;
}

typedef struct args {
    const char *url, *prefix, *secret_file, *spec, *key, *name;
    char key2[RL_MAX_KEY_LEN];
    size_t key2_len;
    long nodes, warm_ms, max_s;
} args_t;

/* --key2-hex: the bytes of KEY2 (at most RL_MAX_KEY_LEN). */
static int parse_hex(args_t *a, const char *v)
{
    for (size_t k = 0; v[2 * k] != '\0' && v[2 * k + 1] != '\0' && k < sizeof a->key2; k++) {
        unsigned byte;
        if (sscanf(v + 2 * k, "%2x", &byte) != 1)
            return die("--key2-hex: not hex");
        a->key2[a->key2_len++] = (char)byte;
    }
    return 0;
}

/* The options (see the top of the file): 0, or 1 after the message. */
static int parse_args(args_t *a, int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "--redis") == 0)
            a->url = v;
        else if (strcmp(o, "--prefix") == 0)
            a->prefix = v;
        else if (strcmp(o, "--secret-file") == 0)
            a->secret_file = v;
        else if (strcmp(o, "--spec") == 0)
            a->spec = v;
        else if (strcmp(o, "--key") == 0)
            a->key = v;
        else if (strcmp(o, "--key2-hex") == 0) {
            if (parse_hex(a, v) != 0)
                return 1;
        } else if (strcmp(o, "--nodes") == 0)
            a->nodes = atol(v);
        else if (strcmp(o, "--warm-ms") == 0)
            a->warm_ms = atol(v);
        else if (strcmp(o, "--max-seconds") == 0)
            a->max_s = atol(v);
        else if (strcmp(o, "--name") == 0)
            a->name = v;
        else
            return die("unknown option (see the comment at the top of fleet_helper.c)");
    }
    if (a->url == NULL || a->secret_file == NULL || a->spec == NULL || a->key == NULL ||
        a->nodes < 1 || a->nodes > NODES_MAX || a->warm_ms < 0 || a->max_s < 1 || argc % 2 != 1)
        return die("usage: --redis URL --prefix P --secret-file F --spec SPEC --key KEY "
                   "[--nodes 1..8] [--warm-ms MS] [--max-seconds S] [--name NAME]");
    return 0;
}

/* Node i: its instance, its limit, its load's settings. 0, or 1 after the
 * message. */
static int open_node(node_t *n, long i, const args_t *a, const rl_limit_t *lim,
                     const char *secret, size_t secret_len, atomic_int *stop)
{
    n->index = (int)i;
    n->key = a->key;
    n->key2 = a->key2;
    n->key2_len = a->key2_len;
    n->stop = stop;
    atomic_init(&n->admitted, 0);
    atomic_init(&n->err, 0);
    snprintf(n->name, sizeof n->name, "%.20s-%ld", a->name, i);
    rl_config_t c;
    rl_config_init(&c);
    c.redis_url = a->url;
    c.node_id = n->name;
    c.sync_interval_ms = 200;
    c.expected_nodes = (uint32_t)a->nodes;
    c.key_secret = secret;
    c.key_secret_len = secret_len;
    c.key_prefix = a->prefix;
    char why[256];
    c.err = why;
    c.errlen = sizeof why;
    int rc = rl_open(&n->rl, &c);
    if (rc != 0)
        return die(why);
    if ((n->id = rl_limit_add(n->rl, lim)) < 0)
        return die(rl_strerror(n->id));
    return 0;
}

/* Until a line "stop", the end of input, or max_s seconds. */
static void wait_for_stop(long max_s)
{
    char line[64];
    struct pollfd p = {0, POLLIN, 0};
    time_t until = time(NULL) + max_s;
    while (time(NULL) < until) {
        int ready = poll(&p, 1, 200);
        if (ready > 0 && (fgets(line, sizeof line, stdin) == NULL || strncmp(line, "stop", 4) == 0))
            break;
    }
}

/* Stop the load, close every node, print what each admitted. 0, or 1 if a
 * check failed. */
static int finish(node_t *node, long nodes, atomic_int *stop)
{
    /* relaxed: see drive. */
    atomic_store_explicit(stop, 1, memory_order_relaxed);
    int failed = 0;
    for (long i = 0; i < nodes; i++) {
        pthread_join(node[i].th, NULL);
        failed |= atomic_load_explicit(&node[i].err, memory_order_relaxed) != 0;
    }
    for (long i = 0; i < nodes; i++)
        rl_close(node[i].rl);
    for (long i = 0; i < nodes; i++)
        printf("admitted %s %llu\n", node[i].name,
               (unsigned long long)atomic_load_explicit(&node[i].admitted, memory_order_relaxed));
    printf("closed\n");
    fflush(stdout);
    return failed ? die("rl_check failed") : 0;
}

int main(int argc, char **argv)
{
    static args_t a = {.prefix = "rl", .name = "cli-node", .nodes = 2, .warm_ms = 1000,
                       .max_s = 120};
    if (parse_args(&a, argc, argv) != 0)
        return 1;
    char secret[4097];
    FILE *f = fopen(a.secret_file, "rb");
    if (f == NULL)
        return die("cannot open the secret file");
    size_t secret_len = fread(secret, 1, sizeof secret, f);
    fclose(f);
    rl_limit_t lim;
    char err[256];
    if (rl_limit_parse(&lim, a.spec, err, sizeof err) != 0)
        return die(err);
    static node_t node[NODES_MAX];
    atomic_int stop;
    atomic_init(&stop, 0);
    for (long i = 0; i < a.nodes; i++)
        if (open_node(&node[i], i, &a, &lim, secret, secret_len, &stop) != 0)
            return 1;
    for (long i = 0; i < a.nodes; i++)
        if (pthread_create(&node[i].th, NULL, drive, &node[i]) != 0)
            return die("pthread_create failed");
    sleep_ms((unsigned)a.warm_ms);
    printf("ready\n");
    fflush(stdout);
    wait_for_stop(a.max_s);
    return finish(node, a.nodes, &stop);
}
