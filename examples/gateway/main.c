/* SPDX-License-Identifier: MIT */
/*
 * rl_gateway: a small HTTP/1.1 API gateway on libuv that rate-limits by API
 * key (or client IP) and by endpoint with libratelimit. See README.md.
 *
 *   rl_gateway --limits FILE [--listen HOST:PORT] [--redis URL
 *              --key-secret-file FILE [--node-id ID] [--expected-nodes N]]
 *
 * Signals, handled in the loop (uv_signal_t): SIGHUP reloads the limits
 * file (a bad file keeps the old limits); SIGINT and SIGTERM stop accepting,
 * finish the requests in progress, and close the instance (rl_close hands
 * this node's shares back to Redis).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <ratelimit.h>

#include "handler.h"
#include "limits_config.h"
#include "log.h"
#include "upstream.h"
#include "server.h"

#define DRAIN_MS 5000

typedef struct options {
    const char *listen;
    const char *limits_path;
    const char *redis_url;
    const char *node_id;
    const char *key_prefix;
    const char *key_secret;
    const char *key_secret_file;
    uint64_t expected_nodes;
    uint64_t sync_interval_ms;
    uint64_t exact_timeout_ms;
    uint64_t max_keys;
    uint64_t max_connections;
    uint64_t idle_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t max_body;
    const char *upstream;
    uint64_t upstream_timeout_ms;
} options_t;

typedef struct app {
    const char *limits_path;
    gateway_t gw;
    upstream_t upstream;
    server_t server;
    uv_signal_t sighup, sigint, sigterm;
} app_t;

static void usage(FILE *f)
{
    fputs("usage: rl_gateway --limits FILE [options]\n"
          "  --listen HOST:PORT        numeric IPv4 or [IPv6]; port 0 picks a free one\n"
          "                            (default 127.0.0.1:8080)\n"
          "  --limits FILE             the limits file (README: \"The limits file\")\n"
          "  --redis URL               global tier: redis://[user:pass@]host:port[/db];\n"
          "                            without it the gateway limits on its own\n"
          "  --key-secret-file FILE    the fleet's shared key secret: the file less one\n"
          "                            final newline (16..4096 bytes; required with --redis)\n"
          "  --key-secret STRING       the same, inline (visible in ps: prefer the file)\n"
          "  --node-id ID              this node's name (default: the host name)\n"
          "  --key-prefix P            Redis key prefix, the same on every node (default rl)\n"
          "  --expected-nodes N        fleet size, the pre-sync share divisor (default 1)\n"
          "  --sync-interval-ms N      global tier round, 50..200 (default 100)\n"
          "  --exact-timeout-ms N      how long a mode=exact rule waits for Redis before\n"
          "                            its on_failure answers, 1..60000 (default 100,\n"
          "                            the library's)\n"
          "  --max-keys N              key table capacity (default 65536)\n"
          "  --max-connections N       open client connections (default 1024)\n"
          "  --idle-timeout-ms N       keep-alive wait for the next request (default 5000)\n"
          "  --request-timeout-ms N    a whole request, from its first byte (default 10000)\n"
          "  --max-body BYTES          largest Content-Length accepted (default 1048576)\n"
          "  --upstream HOST:PORT      forward admitted requests there (numeric, as\n"
          "                            --listen); without it the gateway answers them\n"
          "  --upstream-timeout-ms N   an upstream's whole answer, 1..600000 (default 30000)\n",
          f);
}

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || errno != 0 || v < min || v > max) {
        fprintf(stderr, "rl_gateway: %s: expected a whole number in %llu..%llu, got \"%s\"\n", opt,
                (unsigned long long)min, (unsigned long long)max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* "1.2.3.4:80" or "[::1]:80": numeric, so startup never waits on DNS. */
static int parse_listen(const char *s, struct sockaddr_storage *addr)
{
    char host[64];
    const char *colon;
    int v6 = s[0] == '[';
    if (v6) {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        colon = close + 1;
        if ((size_t)(close - s - 1) >= sizeof host)
            return -1;
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || (size_t)(colon - s) >= sizeof host)
            return -1;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
    }
    uint64_t port;
    char *end;
    errno = 0;
    port = strtoull(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || port > 65535)
        return -1;
    memset(addr, 0, sizeof *addr);
    if (v6)
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)addr) == 0 ? 0 : -1;
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)addr) == 0 ? 0 : -1;
}

/* The secret file's bytes less one final "\n" or "\r\n", the rule of every
 * component that reads a secret file (docs/fleet.md, "The secret file");
 * NULL on error. */
static char *read_secret(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "rl_gateway: --key-secret-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    /* 4096 bytes, the line ending, and one more to see a longer file. */
    char *buf = malloc(4099);
    size_t n = buf != NULL ? fread(buf, 1, 4099, f) : 0;
    fclose(f);
    if (n > 0 && buf[n - 1] == '\n')
        n -= n > 1 && buf[n - 2] == '\r' ? 2 : 1;
    if (buf == NULL || n < 16 || n > 4096) {
        fprintf(stderr, "rl_gateway: --key-secret-file %s: the secret must be 16..4096 bytes\n",
                path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"limits", required_argument, NULL, 'f'},
        {"redis", required_argument, NULL, 'r'},
        {"node-id", required_argument, NULL, 'n'},
        {"key-prefix", required_argument, NULL, 'p'},
        {"key-secret", required_argument, NULL, 's'},
        {"key-secret-file", required_argument, NULL, 'S'},
        {"expected-nodes", required_argument, NULL, 'e'},
        {"sync-interval-ms", required_argument, NULL, 'i'},
        {"exact-timeout-ms", required_argument, NULL, 'x'},
        {"max-keys", required_argument, NULL, 'k'},
        {"max-connections", required_argument, NULL, 'c'},
        {"idle-timeout-ms", required_argument, NULL, 'I'},
        {"request-timeout-ms", required_argument, NULL, 'R'},
        {"max-body", required_argument, NULL, 'b'},
        {"upstream", required_argument, NULL, 'u'},
        {"upstream-timeout-ms", required_argument, NULL, 'U'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    rl_config_t lib;
    rl_config_init(&lib); /* the library's exact deadline, one default everywhere */
    *o = (options_t){.listen = "127.0.0.1:8080",
                     .expected_nodes = 1,
                     .sync_interval_ms = 100,
                     .exact_timeout_ms = lib.exact_timeout_ms,
                     .max_keys = 65536,
                     .max_connections = 1024,
                     .idle_timeout_ms = 5000,
                     .request_timeout_ms = 10000,
                     .max_body = 1024 * 1024,
                     .upstream_timeout_ms = 30000};
    int ch, rc = 0;
    while (rc == 0 && (ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'l': o->listen = optarg; break;
        case 'f': o->limits_path = optarg; break;
        case 'r': o->redis_url = optarg; break;
        case 'n': o->node_id = optarg; break;
        case 'p': o->key_prefix = optarg; break;
        case 's': o->key_secret = optarg; break;
        case 'S': o->key_secret_file = optarg; break;
        case 'e': rc = parse_u64("--expected-nodes", optarg, 1, 100000, &o->expected_nodes); break;
        case 'i': rc = parse_u64("--sync-interval-ms", optarg, 50, 200, &o->sync_interval_ms); break;
        case 'x': rc = parse_u64("--exact-timeout-ms", optarg, 1, 60000, &o->exact_timeout_ms); break;
        case 'k': rc = parse_u64("--max-keys", optarg, 16, 1u << 28, &o->max_keys); break;
        case 'c': rc = parse_u64("--max-connections", optarg, 1, 1000000, &o->max_connections); break;
        case 'I': rc = parse_u64("--idle-timeout-ms", optarg, 1, 86400000, &o->idle_timeout_ms); break;
        case 'R':
            rc = parse_u64("--request-timeout-ms", optarg, 1, 86400000, &o->request_timeout_ms);
            break;
        case 'b': rc = parse_u64("--max-body", optarg, 0, UINT64_C(1) << 40, &o->max_body); break;
        case 'u': o->upstream = optarg; break;
        case 'U':
            rc = parse_u64("--upstream-timeout-ms", optarg, 1, 600000, &o->upstream_timeout_ms);
            break;
        case 'h': usage(stdout); exit(0);
        default: rc = -1; break;
        }
    }
    if (rc == 0 && optind < argc) {
        fprintf(stderr, "rl_gateway: unexpected argument: %s\n", argv[optind]);
        rc = -1;
    }
    if (rc == 0 && o->limits_path == NULL) {
        fprintf(stderr, "rl_gateway: --limits FILE is required\n");
        rc = -1;
    }
    if (rc == 0 && o->key_secret != NULL && o->key_secret_file != NULL) {
        fprintf(stderr, "rl_gateway: give --key-secret or --key-secret-file, not both\n");
        rc = -1;
    }
    if (rc == 0 && o->redis_url != NULL && o->key_secret == NULL && o->key_secret_file == NULL) {
        /* a random per-node secret would name every key differently on
         * every node: the fleet would share nothing */
        fprintf(stderr, "rl_gateway: --redis needs --key-secret-file (or --key-secret), the "
                        "same on every node\n");
        rc = -1;
    }
    if (rc != 0)
        usage(stderr);
    return rc;
}

static void on_library_log(void *ud, int32_t level, const char *msg)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    (void)ud;
    gw_log("ratelimit %s: %s", level >= 0 && level <= 3 ? names[level] : "?", msg);
}

static void report_line(void *ud, int line, const char *msg)
{
    const char *path = ud;
    if (line > 0)
        gw_log("%s:%d: %s", path, line, msg);
    else
        gw_log("%s: %s", path, msg);
}

/* SIGHUP: all of the new file or none of it. */
static void reload(app_t *app)
{
    gateway_t *g = &app->gw;
    limit_set_t *next = malloc(sizeof *next);
    if (next == NULL) {
        gw_log("reload: out of memory; keeping the %zu rules in force", g->limits->count);
        g->metrics.reloads_failed++;
        return;
    }
    int errors = limits_load(next, app->limits_path, report_line, (void *)app->limits_path);
    if (errors > 0) {
        gw_log("reload of %s failed (%d bad line%s): keeping the %zu rules in force",
               app->limits_path, errors, errors == 1 ? "" : "s", g->limits->count);
        g->metrics.reloads_failed++;
        free(next);
        return;
    }
    limits_change_t ch;
    char err[256];
    int rc = limits_apply(g->rl, g->limits, next, &ch, err, sizeof err);
    if (rc < 0) {
        gw_log("reload of %s failed: %s: keeping the %zu rules in force", app->limits_path, err,
               g->limits->count);
        g->metrics.reloads_failed++;
        free(next);
        return;
    }
    free(g->limits);
    g->limits = next;
    g->metrics.limit_rules = next->count;
    g->metrics.reloads_ok++;
    gw_log("reloaded %s: %zu rules (%zu added, %zu updated in place, %zu removed)",
           app->limits_path, next->count, ch.added, ch.updated, ch.removed);
}

static void on_signal(uv_signal_t *h, int signum)
{
    app_t *app = h->data;
    if (signum == SIGHUP) {
        reload(app);
        return;
    }
    gw_log("%s: draining connections, then closing", signum == SIGINT ? "SIGINT" : "SIGTERM");
    /* closed signal handles restore the default action: a second signal
     * ends the process at once */
    uv_close((uv_handle_t *)&app->sighup, NULL);
    uv_close((uv_handle_t *)&app->sigint, NULL);
    uv_close((uv_handle_t *)&app->sigterm, NULL);
    server_stop(&app->server, DRAIN_MS);
}

static int watch(app_t *app, uv_loop_t *loop, uv_signal_t *h, int signum)
{
    uv_signal_init(loop, h);
    h->data = app;
    return uv_signal_start(h, on_signal, signum);
}

static int open_instance(const options_t *o, rl_t **rl)
{
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.redis_url = o->redis_url;
    cfg.node_id = o->node_id;
    cfg.key_prefix = o->key_prefix;
    cfg.expected_nodes = (uint32_t)o->expected_nodes;
    cfg.sync_interval_ms = (uint32_t)o->sync_interval_ms;
    cfg.exact_timeout_ms = (uint32_t)o->exact_timeout_ms;
    cfg.max_keys = (uint32_t)o->max_keys;
    /* a reload adds the new limits before removing the old ones */
    cfg.max_limits = 2 * LIMITS_MAX_RULES;
    cfg.log = on_library_log;
    char *secret = NULL;
    if (o->key_secret_file != NULL) {
        secret = read_secret(o->key_secret_file, &cfg.key_secret_len);
        if (secret == NULL)
            return RL_ERANGE;
        cfg.key_secret = secret;
    } else if (o->key_secret != NULL) {
        cfg.key_secret = o->key_secret;
        cfg.key_secret_len = strlen(o->key_secret);
    }
    char err[256] = "";
    cfg.err = err; /* rl_open names the field at fault, and why */
    cfg.errlen = sizeof err;
    int rc = rl_open(rl, &cfg);
    if (secret != NULL) {
        memset(secret, 0, cfg.key_secret_len); /* the instance keeps its own copy */
        free(secret);
    }
    if (rc < 0)
        gw_log("rl_open: %s (%s)", err[0] ? err : rl_strerror(rc), rl_err_name(rc));
    return rc;
}

int main(int argc, char **argv)
{
    options_t o;
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    if (o.node_id != NULL) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "rl_gateway[%s]", o.node_id);
        gw_log_set_prefix(prefix);
    }
    server_config_t sc;
    memset(&sc, 0, sizeof sc);
    if (parse_listen(o.listen, &sc.addr) != 0) {
        fprintf(stderr, "rl_gateway: --listen: expected a numeric HOST:PORT, got \"%s\"\n",
                o.listen);
        return 2;
    }
    sc.max_connections = (uint32_t)o.max_connections;
    sc.idle_timeout_ms = o.idle_timeout_ms;
    sc.request_timeout_ms = o.request_timeout_ms;
    sc.linger_ms = 2000;
    sc.http = http_limits_default();
    sc.http.max_body = o.max_body;
    /* A client that disappears mid-write must not kill the process. */
    signal(SIGPIPE, SIG_IGN);

    app_t *app = calloc(1, sizeof *app);
    limit_set_t *limits = malloc(sizeof *limits);
    if (app == NULL || limits == NULL) {
        fprintf(stderr, "rl_gateway: out of memory\n");
        return 1;
    }
    app->limits_path = o.limits_path;
    int errors = limits_load(limits, o.limits_path, report_line, (void *)o.limits_path);
    if (errors > 0) {
        gw_log("%s: %d bad line%s", o.limits_path, errors, errors == 1 ? "" : "s");
        return 2;
    }
    rl_t *rl = NULL;
    if (open_instance(&o, &rl) < 0)
        return 1;
    char err[256];
    limits_change_t ch;
    if (limits_apply(rl, NULL, limits, &ch, err, sizeof err) < 0) {
        gw_log("%s: %s", o.limits_path, err);
        rl_close(rl);
        return 2;
    }
    app->gw.rl = rl;
    app->gw.node_id = o.node_id;
    app->gw.exact_async = o.redis_url != NULL; /* mode=exact rules: rl_check_async */
    app->gw.limits = limits;
    if (o.upstream != NULL) {
        if (parse_listen(o.upstream, &app->upstream.addr) != 0) {
            fprintf(stderr, "rl_gateway: --upstream: expected a numeric HOST:PORT, got \"%s\"\n",
                    o.upstream);
            rl_close(rl);
            return 2;
        }
        app->upstream.timeout_ms = o.upstream_timeout_ms;
        app->gw.upstream = &app->upstream;
    }
    app->gw.metrics.limit_rules = limits->count;

    uv_loop_t *loop = uv_default_loop();
    app->upstream.loop = loop;
    int rc = server_start(&app->server, loop, &sc, &app->gw, err, sizeof err);
    if (rc == 0 && (watch(app, loop, &app->sighup, SIGHUP) != 0 ||
                    watch(app, loop, &app->sigint, SIGINT) != 0 ||
                    watch(app, loop, &app->sigterm, SIGTERM) != 0)) {
        snprintf(err, sizeof err, "cannot watch signals");
        rc = -1;
    }
    if (rc != 0) {
        gw_log("%s", err);
        uv_run(loop, UV_RUN_NOWAIT); /* let the closed handles go */
        rl_close(rl);
        return 1;
    }
    gw_log("listening on %s: %zu rules from %s, %s", app->server.bound, limits->count,
           o.limits_path,
           o.redis_url != NULL ? "global tier through Redis" : "local-only (no --redis)");
    uv_run(loop, UV_RUN_DEFAULT);
    rl_close(rl); /* with Redis: reports the last usage, hands shares back */
    gw_log("stopped");
    uv_loop_close(loop);
    free(app->gw.limits);
    free(app);
    return 0;
}
