/* SPDX-License-Identifier: MIT */
/*
 * rl_demo_global: the global tier at work. Several nodes share one limit
 * through Redis, in real time.
 *
 * N nodes (default 4) are N rl_t instances in this one process, each with
 * its own sync thread, exactly as N servers would be: the same key_secret
 * and key_prefix (so they name the key alike), distinct node_ids, one Redis.
 * Every node holds the same global limit, "name=api rate=1000/s burst=100",
 * and one load thread per node offers requests for one API key. The traffic
 * is skewed, 3x the limit in total: 85% arrives at node-0, 10% at node-1,
 * 5% at node-2, none at the others. Halfway through it shifts to the mirror
 * image (node-3 takes 85%), so the shares visibly move. Why 85/10/5: the
 * share rule fills demand like water (max-min fair), so a node offering
 * less than an even split of what is left gets what it offers and the rest
 * goes to the busy node. With 70/20/10 at 3x, node-1's 600/s would already
 * exceed that level and nodes 0 and 1 would get the same share, which hides
 * the skew.
 *
 * Once a second it prints a table: per node what was offered and admitted
 * in that second, the admitted rate as a % of the limit, the node's current
 * local share of the key (rate and burst), and its sync thread's state; then
 * the fleet's total admitted rate against the limit. At the end it checks
 * the whole run against a simple stated bound (see check_bound) and exits 1
 * if the fleet admitted more.
 *
 * The share and the sync state are not in the public API: this program is
 * built inside the project, links the static library and reads them through
 * the internal headers (instance.h, table.h, shareword.h, sync.h), as the
 * tests and bench/accuracy do. Everything else is the public API. A real
 * application never needs those internals.
 *
 * Redis: REDIS_URL when set (with a key prefix unique to this run, so a
 * shared server is not confused by earlier runs); otherwise a private
 * redis-server on a free loopback port (tests/redis_harness.c), stopped by
 * PID at the end.
 *
 * Usage: rl_demo_global [--seconds N] [--nodes N]   (defaults: 12 s, 4)
 * Ctrl-C (SIGINT) or SIGTERM ends it early, still cleaning up.
 * Exit: 0 within the bound; 1 over it or on an error; 2 usage;
 * 77 skipped (redis-server not installed and RL_SKIP_REDIS=1, the tests'
 * convention).
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ratelimit.h>

/* Internal: share words and sync counters (see the comment above). */
#include "instance.h"
#include "redis/url.h"
#include "local/shareword.h"
#include "sync/sync.h"
#include "local/table.h"

#include "redis_harness.h"

#define NODES_MAX 16
#define LIMIT_SPEC "name=api rate=1000/s burst=100"
#define API_KEY "customer-42"
#define SYNC_INTERVAL_MS 100
#define LOAD_FACTOR 3.0 /* offered load as a multiple of the limit */
#define SKIP_EXIT 77    /* ctest's SKIP_RETURN_CODE */

/* Shared by every node: a fleet must name keys alike. */
static const char fleet_secret[] = "rl-demo-global-fleet-secret";

/* The only global: set by the signal handler, read by the main thread. */
static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

typedef struct demo demo_t;

typedef struct node {
    demo_t *demo;
    int index;
    char name[16];
    rl_t *rl;
    int id; /* the limit's id on this node */
    pthread_t load;
    int load_started;
    /* Written by the node's load thread once per 1 ms step, read by main. */
    _Atomic uint64_t offered;
    _Atomic uint64_t admitted;
    /* Main thread only: the counters at the previous report. */
    uint64_t prev_offered, prev_admitted;
} node_t;

struct demo {
    unsigned nnodes;
    unsigned seconds;
    double limit_rate; /* tokens per second */
    uint64_t burst;
    /* Share of the offered load per node, in %, before and after the shift. */
    double weight[2][NODES_MAX];
    atomic_int phase;  /* 0, then 1 from halfway: main -> load threads */
    atomic_bool stop;  /* main -> load threads */
    atomic_int error;  /* first rl_check error a load thread saw */
    node_t nodes[NODES_MAX];
    char url[200];
    int private_redis;
    int tty;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL); /* EINTR (a signal) just ends the nap early */
}

/* 85/10/5 over the first nodes (what is left of 100% goes to the last node
 * when there are fewer than three), then the mirror image: the busiest node
 * becomes idle and the idle end takes most of the traffic. */
static void set_weights(demo_t *d)
{
    static const double base[3] = {85, 10, 5};
    double left = 100;
    for (unsigned i = 0; i < d->nnodes; i++) {
        double w = i < 3 ? base[i] : 0;
        if (i == d->nnodes - 1)
            w = left;
        d->weight[0][i] = w;
        left -= w;
    }
    for (unsigned i = 0; i < d->nnodes; i++)
        d->weight[1][i] = d->weight[0][d->nnodes - 1 - i];
}

static double offered_per_s(const demo_t *d, int phase, unsigned node)
{
    return d->limit_rate * LOAD_FACTOR * d->weight[phase][node] / 100.0;
}

/* One load thread per node: the node's requests, spread over 1 ms steps. */
static void *load_main(void *arg)
{
    node_t *n = arg;
    demo_t *d = n->demo;
    double credit = 0;
    double last = now_s();
    size_t key_len = strlen(API_KEY);
    /* relaxed: stop and phase are flags; nothing is published through them. */
    while (!atomic_load_explicit(&d->stop, memory_order_relaxed)) {
        sleep_s(0.001);
        double now = now_s();
        int phase = atomic_load_explicit(&d->phase, memory_order_relaxed);
        credit += offered_per_s(d, phase, (unsigned)n->index) * (now - last);
        last = now;
        uint64_t offered = 0, admitted = 0;
        for (; credit >= 1.0; credit -= 1.0) {
            int rc = rl_check(n->rl, n->id, API_KEY, key_len, 1, NULL);
            if (rc < 0) {
                int none = 0;
                atomic_compare_exchange_strong(&d->error, &none, rc);
                atomic_store(&d->stop, true);
                break;
            }
            offered++;
            admitted += rc == RL_ALLOW;
        }
        /* relaxed: counters; main reads each with its own atomic load. */
        atomic_fetch_add_explicit(&n->offered, offered, memory_order_relaxed);
        atomic_fetch_add_explicit(&n->admitted, admitted, memory_order_relaxed);
    }
    return NULL;
}

/* ---------------------------------------------------- internal views */

static rl_sync_counters_t sync_counters(const node_t *n)
{
    rl_sync_counters_t c;
    rl__sync_counters(n->rl->sync, &c);
    return c;
}

typedef enum { SHARE_NONE, SHARE_PRESYNC, SHARE_SYNCED } share_kind_t;

/*
 * This node's local share of the API key: the bucket its checks run on, as
 * the sync thread last published it into the key's slot (one word, so never
 * torn). No slot: the key never reached this node (or went idle and was
 * reclaimed). A word of 0: no sync result yet, the key runs at the pre-sync
 * default (rate and burst / expected_nodes).
 */
static share_kind_t node_share(node_t *n, double *rate, uint64_t *burst)
{
    rl_t *rl = n->rl;
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, n->id);
    if (ls == NULL)
        return SHARE_NONE;
    rl_limit_params_t p;
    rl__params_read(ls, &p);
    /* The same lookup rl_check makes for this key. */
    rl_probe_t probe;
    rl__probe_init(&probe, &rl->table, &rl->kh, rl__keyhash(&rl->kh, API_KEY, strlen(API_KEY)),
                   rl__limit_ref(n->id), ls->salt);
    rl_slotref_t ref;
    if (!rl__table_find(&rl->table, &probe, &ref))
        return SHARE_NONE;
    /* relaxed: the word is self-contained, as in the hot path. */
    uint64_t w = atomic_load_explicit(&ref.slot->share, memory_order_relaxed);
    rl_gcra_t g;
    if (w == 0)
        g = p.presync;
    else
        rl__shareword_decode(w, &g);
    /* t_fp is the interval between tokens in 1/16 ns; the largest means none. */
    *rate = g.t_fp >= RL_SHAREWORD_T_MAX ? 0.0 : 1e9 * (double)RL_FP_PER_NS / (double)g.t_fp;
    *burst = g.burst;
    return w == 0 ? SHARE_PRESYNC : SHARE_SYNCED;
}

/* ------------------------------------------------------------ the table */

/* In a terminal each line clears its own tail (ESC[K) and the table is
 * redrawn from the top left, so it updates in place without flicker; in a
 * pipe or a CI log, plain lines and one table after another. */
static void line_end(const demo_t *d)
{
    fputs(d->tty ? "\033[K\n" : "\n", stdout);
}

static void print_header(const demo_t *d)
{
    printf("libratelimit %s: %u nodes share \"%s\" for API key \"%s\"", rl_version(),
           d->nnodes, LIMIT_SPEC, API_KEY);
    line_end(d);
    printf("redis %s (%s), sync every %d ms; offered load %.0fx the limit",
           d->url, d->private_redis ? "private redis-server" : "REDIS_URL", SYNC_INTERVAL_MS,
           LOAD_FACTOR);
    line_end(d);
    printf("share: the node's own bucket for the key (rate, burst), set from Redis each "
           "round; of limit: %% of %.0f/s", d->limit_rate);
    line_end(d);
}

static void describe_phase(const demo_t *d, int phase, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < d->nnodes && used < len; i++) {
        if (d->weight[phase][i] <= 0)
            continue;
        int w = snprintf(buf + used, len - used, "%s%.0f%% %s", used ? ", " : "",
                         d->weight[phase][i], d->nodes[i].name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static void report(demo_t *d, unsigned second, double dt)
{
    int phase = atomic_load(&d->phase);
    char traffic[256];
    describe_phase(d, phase, traffic, sizeof traffic);
    if (d->tty) {
        fputs("\033[H", stdout);
        print_header(d);
    }
    line_end(d);
    printf("[%3u s of %u] traffic: %s%s", second, d->seconds, traffic,
           phase == 0 ? "  (shifts halfway)" : "  (shifted)");
    line_end(d);
    printf("%-8s %9s %10s %8s | %8s %5s %8s | %s", "node", "offered/s", "admitted/s",
           "of limit", "share/s", "burst", "of limit", "sync");
    line_end(d);
    uint64_t tot_off = 0, tot_adm = 0;
    double share_sum = 0;
    for (unsigned i = 0; i < d->nnodes; i++) {
        node_t *n = &d->nodes[i];
        uint64_t off = atomic_load_explicit(&n->offered, memory_order_relaxed);
        uint64_t adm = atomic_load_explicit(&n->admitted, memory_order_relaxed);
        uint64_t doff = off - n->prev_offered, dadm = adm - n->prev_admitted;
        n->prev_offered = off;
        n->prev_admitted = adm;
        tot_off += doff;
        tot_adm += dadm;
        double rate = 0;
        uint64_t burst = 0;
        char share[48];
        const char *note = "";
        share_kind_t kind = node_share(n, &rate, &burst);
        if (kind == SHARE_NONE) {
            snprintf(share, sizeof share, "%8s %5s %8s", "-", "-", "-");
            note = "; key not seen yet";
        } else {
            snprintf(share, sizeof share, "%8.1f %5" PRIu64 " %7.1f%%", rate, burst,
                     100.0 * rate / d->limit_rate);
            share_sum += rate;
            if (kind == SHARE_PRESYNC)
                note = "; pre-sync share";
        }
        rl_sync_counters_t c = sync_counters(n);
        printf("%-8s %9.0f %10.0f %7.1f%% | %s | %s, %" PRIu64 " rounds%s", n->name,
               (double)doff / dt, (double)dadm / dt, 100.0 * (double)dadm / dt / d->limit_rate,
               share, c.connected ? "up" : "DOWN", c.rounds_ok, note);
        if (c.rounds_failed != 0)
            printf(" (%" PRIu64 " failed)", c.rounds_failed);
        line_end(d);
    }
    printf("%-8s %9.0f %10.0f %7.1f%% | %8.1f %5s %7.1f%% | limit %.0f/s", "fleet",
           (double)tot_off / dt, (double)tot_adm / dt,
           100.0 * (double)tot_adm / dt / d->limit_rate, share_sum, "",
           100.0 * share_sum / d->limit_rate, d->limit_rate);
    line_end(d);
    if (d->tty)
        fputs("\033[J", stdout); /* clear whatever an earlier, longer frame left */
    fflush(stdout);
}

/* --------------------------------------------------------- the summary */

/*
 * The bound this demo checks, over the whole run (elapsed: from before the
 * first check to after the last, on this program's stopwatch):
 *
 *   admitted <= limit x (elapsed + tick) + burst + limit x interval x shifts
 *
 * limit x elapsed + burst is what one exact bucket would allow. The tick is
 * the coarse clock's (this limit reads it; README "Tolerance band"). Each
 * shift of the shares can overshoot by at most about one sync round at the
 * whole rate, because a node may apply its increase a round before another
 * node applies the matching decrease. Shifts counted: the settle from the
 * even pre-sync split to the first skew, and the halfway shift if the run
 * got there. This is a simple stated bound for one key over the whole run,
 * not the project's fleet bound: bench/accuracy checks every 1-s window
 * against a finer one.
 */
static int check_bound(const demo_t *d, uint64_t admitted, uint64_t offered, double elapsed,
                       int shifts)
{
    struct timespec res = {0, 0};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    double tick = (double)res.tv_sec + (double)res.tv_nsec / 1e9;
    double exact = d->limit_rate * (elapsed + tick);
    double moves = d->limit_rate * SYNC_INTERVAL_MS / 1000.0 * shifts;
    double bound = exact + (double)d->burst + moves;
    int ok = (double)admitted <= bound;
    printf("\nsummary over %.2f s: the fleet admitted %" PRIu64 " of %" PRIu64 " offered "
           "(%.1f%% of limit x elapsed)\n",
           elapsed, admitted, offered, 100.0 * (double)admitted / (d->limit_rate * elapsed));
    printf("bound: limit x (elapsed + %.0f ms tick) + burst + limit x %.1f s x %d share "
           "shift%s\n     = %.0f + %" PRIu64 " + %.0f = %.0f\n",
           tick * 1e3, SYNC_INTERVAL_MS / 1000.0, shifts, shifts == 1 ? "" : "s", exact,
           d->burst, moves, bound);
    printf("%" PRIu64 " %s %.0f: %s\n", admitted, ok ? "<=" : ">", bound,
           ok ? "within the band" : "EXCEEDED the band");
    for (unsigned i = 0; i < d->nnodes; i++) {
        const node_t *n = &d->nodes[i];
        printf("  %-8s admitted %7" PRIu64 " of %7" PRIu64 " offered\n", n->name,
               (uint64_t)atomic_load(&n->admitted), (uint64_t)atomic_load(&n->offered));
    }
    return ok;
}

/* The library's own per-node counters must agree with what the load
 * threads saw answered RL_ALLOW: both count every decision exactly. */
static int check_counters(demo_t *d)
{
    int ok = 1;
    for (unsigned i = 0; i < d->nnodes; i++) {
        node_t *n = &d->nodes[i];
        rl_limit_stats_t s;
        rl_limit_stats_init(&s);
        int rc = rl_limit_stats(n->rl, n->id, &s);
        uint64_t mine = atomic_load(&n->admitted);
        if (rc < 0 || s.admitted != mine) {
            fprintf(stderr, "%s: rl_limit_stats %s, admitted %" PRIu64 " (counted %" PRIu64 ")\n",
                    n->name, rc < 0 ? rl_strerror(rc) : "ok", s.admitted, mine);
            ok = 0;
        }
    }
    return ok;
}

static redisContext *redis_client(const char *url)
{
    rl_redisurl_t u;
    if (rl__redisurl_parse(url, &u, NULL, 0) != 0)
        return NULL;
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout(u.host, u.port, tv);
    if (r == NULL || r->err != 0) {
        if (r != NULL)
            redisFree(r);
        return NULL;
    }
    redisReply *a = NULL;
    if (u.password[0] != '\0')
        a = u.user[0] != '\0' ? redisCommand(r, "AUTH %s %s", u.user, u.password)
                              : redisCommand(r, "AUTH %s", u.password);
    if (a != NULL)
        freeReplyObject(a);
    if (u.db != 0 && (a = redisCommand(r, "SELECT %d", u.db)) != NULL)
        freeReplyObject(a);
    return r;
}

/*
 * After every rl_close: what Redis holds for the key. Its hash keeps the
 * fleet's total ("a") and one entry per node; a live entry carries an
 * expiry ("<node>|x"), which a node's leaving report removes when it hands
 * its share back (the entry's counters stay, so a late replay of an old
 * report cannot count twice). Informational: it reads the sync protocol's
 * key layout ({prefix:v1:limit:vshard}:k:...), internal too.
 */
static void show_redis_view(const demo_t *d, const char *prefix, uint64_t admitted)
{
    redisContext *r = redis_client(d->url);
    if (r == NULL) {
        printf("redis: unreachable after the run (stopped by the Ctrl-C too?): not inspected\n");
        return;
    }
    char pattern[128];
    snprintf(pattern, sizeof pattern, "{%s:v1:api:*", prefix);
    /* SCAN, not KEYS: REDIS_URL may name a big shared server. */
    char cursor[32] = "0";
    int keys = 0;
    long long total = -1, live = 0;
    do {
        redisReply *s = redisCommand(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (s == NULL || s->type != REDIS_REPLY_ARRAY || s->elements != 2) {
            if (s != NULL)
                freeReplyObject(s);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", s->element[0]->str);
        for (size_t k = 0; k < s->element[1]->elements; k++) {
            redisReply *h = redisCommand(r, "HGETALL %s", s->element[1]->element[k]->str);
            keys++;
            for (size_t f = 0; h != NULL && f + 1 < h->elements; f += 2) {
                const char *name = h->element[f]->str;
                size_t len = strlen(name);
                if (strcmp(name, "a") == 0)
                    total = atoll(h->element[f + 1]->str);
                else if (len > 2 && strcmp(name + len - 2, "|x") == 0)
                    live++;
            }
            if (h != NULL)
                freeReplyObject(h);
        }
        freeReplyObject(s);
    } while (strcmp(cursor, "0") != 0);
    redisFree(r);
    if (keys != 1) {
        printf("redis: %d hashes for the key (expected 1): not inspected\n", keys);
        return;
    }
    printf("redis after rl_close: the key's hash counts %lld admitted, the nodes %" PRIu64
           " (%s); %lld live node entries left (%s)\n",
           total, admitted, total == (long long)admitted ? "matches" : "DIFFERS", live,
           live == 0 ? "every node handed its share back" : "NOT all handed back");
}

/* ------------------------------------------------------------ set-up */

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rl_demo_global [--seconds N (1..86400, default 12)] "
               "[--nodes N (2..%d, default 4)]\n"
               "Uses REDIS_URL when set, else starts a private redis-server.\n",
               NODES_MAX);
}

static int open_node(demo_t *d, node_t *n, const char *prefix)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.redis_url = d->url;
    cfg.node_id = n->name;
    cfg.sync_interval_ms = SYNC_INTERVAL_MS;
    cfg.expected_nodes = d->nnodes;
    cfg.key_secret = fleet_secret;
    cfg.key_secret_len = sizeof fleet_secret - 1;
    cfg.key_prefix = prefix;
    cfg.max_keys = 1024; /* one key here: no need for the default 64 Ki table */
    int rc = rl_open(&n->rl, &cfg);
    if (rc < 0) {
        fprintf(stderr, "rl_open(%s): %s\n", n->name, rl_strerror(rc));
        return rc;
    }
    rl_limit_t lim;
    char err[128];
    if ((rc = rl_limit_parse(&lim, LIMIT_SPEC, err, sizeof err)) < 0) {
        fprintf(stderr, "rl_limit_parse: %s\n", err);
        return rc;
    }
    if ((n->id = rl_limit_add(n->rl, &lim)) < 0) {
        fprintf(stderr, "rl_limit_add(%s): %s\n", n->name, rl_strerror(n->id));
        return n->id;
    }
    d->limit_rate = (double)lim.rate.count * 1000.0 / (double)lim.rate.period_ms;
    d->burst = lim.burst != 0 ? lim.burst : lim.rate.count;
    return 0;
}

/* Every node connected with its script loaded, or the deadline passed. */
static int wait_connected(demo_t *d, double timeout_s)
{
    double deadline = now_s() + timeout_s;
    while (!stop_requested) {
        unsigned up = 0;
        for (unsigned i = 0; i < d->nnodes; i++)
            up += sync_counters(&d->nodes[i]).connected == 1;
        if (up == d->nnodes)
            return 0;
        if (now_s() > deadline)
            return -1;
        sleep_s(0.01);
    }
    return -1;
}

int main(int argc, char **argv)
{
    static demo_t demo; /* static: 16 nodes' worth is a few KiB */
    demo_t *d = &demo;
    d->seconds = 12;
    d->nnodes = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 1, 86400, &d->seconds) < 0) {
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
            if (parse_uint(argv[++i], 2, NODES_MAX, &d->nnodes) < 0) {
                usage(stderr);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }
    atomic_init(&d->phase, 0);
    atomic_init(&d->stop, false);
    atomic_init(&d->error, 0);
    d->tty = isatty(STDOUT_FILENO);
    set_weights(d);

    /* Handlers first, so a Ctrl-C while redis-server starts still cleans up.
     * Signals are then blocked while threads start (every thread inherits
     * the mask; the sync threads block all signals themselves), and only the
     * main thread unblocks them: the handler always runs here. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    rl_test_redis_t srv;
    memset(&srv, 0, sizeof srv);
    const char *env_url = getenv("REDIS_URL");
    if (env_url != NULL && env_url[0] != '\0') {
        snprintf(d->url, sizeof d->url, "%s", env_url);
    } else {
        /* Started from the main thread: the harness ties the server's life
         * to its parent thread (PR_SET_PDEATHSIG), and this one lives until
         * the end, so even a crash or SIGKILL of the demo takes it down. */
        char err[512];
        int rc = rl_test_redis_start(&srv, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "rl_demo_global: %s\n", err);
            if (rc < 0)
                fprintf(stderr, "rl_demo_global: scripts/deps.sh installs redis-server "
                                "(or set REDIS_URL to use a running server)\n");
            return rc == 1 ? SKIP_EXIT : 1;
        }
        snprintf(d->url, sizeof d->url, "redis://127.0.0.1:%d", srv.port);
        d->private_redis = 1;
    }
    /* Unique per run: on a shared REDIS_URL, an earlier run's (or another
     * demo's) key state must not leak into this one's shares. */
    char prefix[33];
    snprintf(prefix, sizeof prefix, "rldemo.%ld.%ld", (long)getpid(), (long)time(NULL) % 100000);

    int status = 0;
    unsigned opened = 0;
    for (; opened < d->nnodes; opened++) {
        node_t *n = &d->nodes[opened];
        n->demo = d;
        n->index = (int)opened;
        snprintf(n->name, sizeof n->name, "node-%u", opened);
        if (open_node(d, n, prefix) < 0) {
            rl_close(n->rl); /* NULL is a no-op */
            status = 1;
            break;
        }
    }
    if (status == 0 && wait_connected(d, 10.0) < 0) {
        if (!stop_requested) {
            fprintf(stderr, "rl_demo_global: nodes did not connect to %s within 10 s\n",
                    d->url);
            status = 1;
        }
    }

    double t0 = 0, elapsed = 0;
    int shifts = 0;
    if (status == 0 && !stop_requested) {
        sigset_t sigs, old;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &sigs, &old);
        if (d->tty)
            fputs("\033[2J\033[H", stdout); /* start the live table on a clean screen */
        else
            print_header(d);
        fflush(stdout);
        t0 = now_s();
        shifts = 1; /* the settle from the pre-sync split to the first skew */
        for (unsigned i = 0; i < d->nnodes; i++) {
            node_t *n = &d->nodes[i];
            if (pthread_create(&n->load, NULL, load_main, n) != 0) {
                fprintf(stderr, "pthread_create failed\n");
                atomic_store(&d->stop, true);
                status = 1;
                break;
            }
            n->load_started = 1;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);

        double last = t0, half = t0 + d->seconds / 2.0;
        for (unsigned s = 1; s <= d->seconds && status == 0; s++) {
            /* Nap in short steps: Ctrl-C, a load error and the halfway
             * shift all take effect within 50 ms. */
            while (now_s() < t0 + s && !stop_requested && !atomic_load(&d->stop)) {
                if (atomic_load(&d->phase) == 0 && now_s() >= half) {
                    atomic_store(&d->phase, 1);
                    shifts = 2;
                }
                sleep_s(0.02);
            }
            if (stop_requested || atomic_load(&d->stop))
                break;
            double now = now_s();
            report(d, s, now - last);
            last = now;
        }
        atomic_store(&d->stop, true);
        for (unsigned i = 0; i < d->nnodes; i++)
            if (d->nodes[i].load_started)
                pthread_join(d->nodes[i].load, NULL);
        elapsed = now_s() - t0;
    }

    if (stop_requested)
        printf("\ninterrupted: stopping\n");
    int err = atomic_load(&d->error);
    if (err != 0) {
        fprintf(stderr, "rl_check: %s\n", rl_strerror(err));
        status = 1;
    }
    uint64_t admitted = 0, offered = 0;
    if (t0 != 0) {
        for (unsigned i = 0; i < d->nnodes; i++) {
            admitted += atomic_load(&d->nodes[i].admitted);
            offered += atomic_load(&d->nodes[i].offered);
        }
        if (!check_bound(d, admitted, offered, elapsed, shifts))
            status = 1;
        if (!check_counters(d))
            status = 1;
    }
    /* rl_close reports each node's last usage and hands its share back to
     * Redis (a bounded wait, even if Redis is already gone). */
    for (unsigned i = 0; i < opened; i++)
        rl_close(d->nodes[i].rl);
    if (t0 != 0 && opened == d->nnodes)
        show_redis_view(d, prefix, admitted);
    if (d->private_redis) {
        rl_test_redis_stop(&srv);
        printf("stopped the private redis-server\n");
    }
    return status;
}
