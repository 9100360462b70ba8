/* SPDX-License-Identifier: MIT */
/* Manual pages, one per subcommand (ratelimit help CMD, ratelimit CMD --help). */
/* Where `cmake --install` puts the docs pages, relative to the directory it
 * puts this program in (CMake sets it): the install prefix may be another
 * than the configured one (cmake --install --prefix, DESTDIR, a package). */
#ifndef RL_CLI_DOCDIR_REL
#define RL_CLI_DOCDIR_REL "../share/doc/ratelimit"
#endif

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

static const char tool_page[] =
    "NAME\n"
    "    ratelimit - inspect and check libratelimit fleets\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] check FILE\n"
    "    ratelimit [--json] inspect --redis URL [--prefix P] (--secret-file F | --secret HEX)\n"
    "                               [--limits FILE] [--key-hex | --api-key | --ip] LIMIT KEY\n"
    "    ratelimit [--json] nodes --redis URL [--prefix P]\n"
    "    ratelimit [--json] hot --redis URL [--prefix P] [--limit NAME]\n"
    "    ratelimit [--json] bench [--seconds N] [--keys N] [--threads N]\n"
    "    ratelimit [--json] quota --redis URL [--prefix P] (--secret-file F | --secret HEX)\n"
    "                             [--key-hex | --api-key | --ip] QUOTA KEY\n"
    "    ratelimit help [COMMAND] | --help | --version\n"
    "\n"
    "DESCRIPTION\n"
    "    check    validate a limits file (limits-file.md in the docs below)\n"
    "    inspect  what Redis holds for one key of one limit: each node's demand,\n"
    "             counters and share, and the key's global usage\n"
    "    nodes    the live nodes of a fleet, from the node registry\n"
    "    hot      the fleet's busiest and hot keys, from the node registry\n"
    "    bench    ns per rl_check on this machine, against a floor\n"
    "    quota    a key's usage of a quota: used, remaining, reset\n"
    "\n"
    "GLOBAL OPTIONS (anywhere on the line)\n"
    "    --json     one JSON document on stdout instead of text (field names are\n"
    "               stable: docs/cli.md); errors too: {\"ok\": false, \"error\": ...}\n"
    "    --help     this page, or the page of the COMMAND it follows\n"
    "    --version  the tool's and the library's version\n"
    "\n"
    "EXIT STATUS\n"
    "    0  done (check: the file is valid)\n"
    "    1  check: the file has errors; inspect: no such key in Redis\n"
    "    2  usage: bad arguments, or a file named in them cannot be read\n"
    "    3  Redis unreachable, refused the credentials or answered an error;\n"
    "       or the tool itself failed (out of memory)\n"
    "\n";

static const char check_page[] =
    "NAME\n"
    "    ratelimit check - validate a limits file\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] check [--quiet] [--local] FILE\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads FILE in the limits-file format every reader shares (the gateway\n"
    "    example's too): one rule per line, either a limit spec as\n"
    "    rl_limit_parse takes it (\"name=api rate=100/s burst=200\"), or\n"
    "    PATTERN SCOPE SPEC (\"/search client name=search rate=5/s\").\n"
    "    Blank lines and comments (from '#' to the end of the line) are skipped.\n"
    "    Each rule is parsed, then added to a local-only instance, so anything\n"
    "    rl_limit_add refuses is found too: duplicate names (RL_EEXIST), more\n"
    "    than RL_MAX_LIMITS limits (RL_ELIMITS), a path matching more than\n"
    "    RL_MULTI_MAX rules (RL_ERANGE). mode=exact and mode=tiered need an\n"
    "    instance with Redis: with --local they are errors (RL_ENOTSUP);\n"
    "    without it, one whose on_failure is open is a warning (it admits\n"
    "    every check Redis does not answer in time).\n"
    "\n"
    "    Every problem is one line on stdout, compiler style:\n"
    "        FILE:LINE: error: MESSAGE (RL_ECODE)\n"
    "        FILE:LINE: warning: MESSAGE\n"
    "    then a summary line (left out with --quiet).\n"
    "\n"
    "OPTIONS\n"
    "    --quiet  no summary line: only the errors and warnings\n"
    "    --local  the file is for an instance without a redis_url\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, file, valid, limit_count, error_count,\n"
    "     limits: [{line, name, rate: {count, period_ms, text}, burst, mode,\n"
    "               on_failure, degraded_rate, shadow, max_keys,\n"
    "               route: null | {pattern, scope}}],\n"
    "     errors: [{line, code, message}], warnings: [{line, message}]}\n"
    "\n"
    "EXIT STATUS\n"
    "    0 valid, 1 errors found, 2 usage (no FILE, or it cannot be read)\n"
    "\n"
    "EXAMPLE\n"
    "    ratelimit check /etc/myapp/limits.conf\n";

static const char inspect_page[] =
    "NAME\n"
    "    ratelimit inspect - what Redis holds for one key of one limit\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] inspect --redis URL [--prefix P]\n"
    "              (--secret-file F | --secret HEX) [--limits FILE]\n"
    "              [--key-hex | --api-key | --ip] LIMIT KEY\n"
    "\n"
    "DESCRIPTION\n"
    "    Finds the key's hash in Redis under the name every node of the fleet\n"
    "    gives it, {P:v1:LIMIT:VSHARD}:k:<128-bit PRF>, computed from the fleet's\n"
    "    key_secret by the library's own code, and shows:\n"
    "      - the key: its Redis name, TTL, age, last report, total admitted;\n"
    "      - per node (incarnation = node id + instance): state (live, stale:\n"
    "        past its deadline, dropped at the next report; left: closed or\n"
    "        dropped, only its counters' high-water marks remain), occupancy\n"
    "        epoch, cumulative admitted and offered counts, smoothed demand and\n"
    "        admitted rate (EWMA, as a fraction of the limit's rate), last report\n"
    "        age, when its entry goes stale;\n"
    "      - with the limit's rate known: rates per second, and each live\n"
    "        node's rate share and burst tokens as the share rule gives them\n"
    "        from the stored demands now;\n"
    "      - usage: the live nodes' admitted rate summed, against the limit;\n"
    "      - an exact or tiered key (mode=exact, mode=tiered): the token bucket\n"
    "        Redis keeps in the same hash, its tokens at the last charge and,\n"
    "        with the rate known, now, and what it has charged; an exact key\n"
    "        has no node entries (Redis decides every check).\n"
    "    A quota's spec as LIMIT (amount=...) reads its counter, as quota does.\n"
    "\n"
    "    LIMIT is the limit's name, or a whole spec (\"name=api rate=100/s\n"
    "    burst=20\") to give its rate; or give --limits FILE and the name.\n"
    "    KEY is the key's bytes as given (--key-hex: in hex). The gateway\n"
    "    example names a client's keys key:<X-API-Key> and ip:<address>\n"
    "    (\"shared\" for a shared rule): --api-key alice is KEY key:alice,\n"
    "    --ip 10.0.0.7 is KEY ip:10.0.0.7.\n"
    "\n"
    "OPTIONS\n"
    "    --redis URL        redis://[[user]:password@]host[:port][/db], as\n"
    "                       rl_config_t.redis_url (also redis+unix://,\n"
    "                       redis+cluster://, redis+sentinel://.../MASTER)\n"
    "    --prefix P         the fleet's key_prefix (default rl)\n"
    "    --secret-file F    the fleet's key_secret: the bytes of F less one\n"
    "                       final \"\\n\" or \"\\r\\n\" (docs: fleet.md, \"The\n"
    "                       secret file\"); 16..4096 bytes\n"
    "    --secret HEX       the key_secret in hex\n"
    "    --limits FILE      a limits file (see check) that defines LIMIT\n"
    "    --key-hex          KEY is hex (binary keys)\n"
    "    --api-key          KEY is a client's API key, named as the gateway\n"
    "                       example names it: key:KEY\n"
    "    --ip               KEY is a client's IPv4 or IPv6 address, named as\n"
    "                       the gateway example names it: ip:ADDRESS\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, redis, prefix, limit, key, key_hex, redis_key, now_ms, ttl_ms,\n"
    "     created_ms, updated_ms, admitted_total, malformed_fields,\n"
    "     limit_spec: {count, period_ms, rate, burst} | null,\n"
    "     usage: {live_nodes, admitted_q24, admitted_fraction, admitted_per_s,\n"
    "             demand_q24, demand_fraction, demand_per_s, limit_per_s},\n"
    "     nodes: [{incarnation, node_id, instance, state, epoch, admitted,\n"
    "              offered, demand_q24, demand_fraction, demand_per_s,\n"
    "              admitted_rate_q24, admitted_rate_fraction, admitted_per_s,\n"
    "              last_report_ms, last_report_age_ms, expires_ms, expires_in_ms,\n"
    "              share_q24, share_fraction, share_per_s, burst_tokens}]}\n"
    "    *_q24 are fractions of the limit's rate in 1/2^24; *_per_s and shares\n"
    "    are null without the limit's rate; times are Redis time, Unix ms.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 found, 1 no such key (not synced yet, expired, or a wrong\n"
    "    secret/prefix/limit), 2 usage, 3 Redis unreachable or refused\n"
    "\n"
    "EXAMPLE\n"
    "    ratelimit inspect --redis redis://10.0.0.5:6379 --secret-file /etc/rl.key \\\n"
    "        --limits /etc/myapp/limits.conf api customer-42\n";

static const char nodes_page[] =
    "NAME\n"
    "    ratelimit nodes - the nodes of a fleet\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] nodes --redis URL [--prefix P]\n"
    "\n"
    "DESCRIPTION\n"
    "    Every sync round, each node writes a heartbeat into the fleet's node\n"
    "    registry, {P:v1}:nodes, and removes it on a clean rl_close; an entry not\n"
    "    refreshed for 10 of its node's sync intervals is stale, and the next\n"
    "    write of any node prunes it. This lists the entries: node id, instance\n"
    "    (the incarnation's random part), host, pid, library version, health\n"
    "    (the node's own), sync interval, synced limits, keys held, keys\n"
    "    reported in its last round, sync rounds started and failed, uptime\n"
    "    (from the node's clock), the fingerprint of its key_secret (a keyed\n"
    "    hash, never the secret), time since its last heartbeat (Redis time),\n"
    "    and whether it is live. Live nodes with different fingerprints are a\n"
    "    split fleet: each group keeps its own keys in Redis and enforces the\n"
    "    whole limit; a SPLIT line above the table says so.\n"
    "\n"
    "OPTIONS\n"
    "    --redis URL   redis://[[user]:password@]host[:port][/db] (also\n"
    "                  redis+unix://, redis+cluster://, redis+sentinel://)\n"
    "    --prefix P    the fleet's key_prefix (default rl)\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, redis, prefix, now_ms, live_count, stale_count, split,\n"
    "     fingerprints: [{fingerprint, live_nodes}],\n"
    "     nodes: [{incarnation, node_id, instance, live, record_version,\n"
    "              deadline_ms, last_seen_ms, last_seen_age_ms, library_version,\n"
    "              host, pid, started_ms, uptime_ms, health, sync_interval_ms,\n"
    "              limits, keys, reported_keys, reported_limits, rounds,\n"
    "              rounds_failed, fingerprint}]}\n"
    "    (a record of a version this tool does not know carries the first\n"
    "    eight fields only)\n"
    "\n"
    "EXIT STATUS\n"
    "    0 listed (also when there are none), 2 usage, 3 Redis unreachable or\n"
    "    refused\n";

static const char hot_page[] =
    "NAME\n"
    "    ratelimit hot - the busiest and hot keys of a fleet\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] hot --redis URL [--prefix P] [--limit NAME]\n"
    "\n"
    "DESCRIPTION\n"
    "    Each node's heartbeat in the node registry (see nodes) carries its\n"
    "    busiest keys of synced limits, at most 8, as rl_hotkeys reports them:\n"
    "    the limit, the key's first 64 bytes and full length, the node's demand\n"
    "    and the rate its hot mark compares with hot=, and the mark.\n"
    "    This lists their union over the live nodes: one row per (limit, key),\n"
    "    the keys marked hot first, then by demand summed over the nodes that\n"
    "    publish it (a node publishes a key once its bytes are kept, from the\n"
    "    round after the key entered its report; nodes that do not see the key\n"
    "    among their busiest do not add to the sum: DEMAND/S). HOT RATE/S is\n"
    "    what the hot mark compares with hot=, the highest a node published:\n"
    "    the fleet's admitted rate from its last sync reply, or that node's\n"
    "    own demand when higher (so it may pass the limit). Keys are shown as\n"
    "    printable ASCII, other bytes as \\xNN.\n"
    "\n"
    "OPTIONS\n"
    "    --redis URL    redis://[[user]:password@]host[:port][/db] (also\n"
    "                   redis+unix://, redis+cluster://, redis+sentinel://)\n"
    "    --prefix P     the fleet's key_prefix (default rl)\n"
    "    --limit NAME   only that limit's keys\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, redis, prefix, live_nodes,\n"
    "     keys: [{limit, key, key_hex, key_len, truncated, hot, hot_nodes,\n"
    "             nodes, demand_per_s, hot_rate_per_s}]}\n"
    "\n"
    "EXIT STATUS\n"
    "    0 listed (also when there are none), 2 usage, 3 Redis unreachable or\n"
    "    refused\n";

static const char bench_page[] =
    "NAME\n"
    "    ratelimit bench - a quick figure for rl_check on this machine\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] bench [--seconds N] [--keys N] [--threads N]\n"
    "\n"
    "DESCRIPTION\n"
    "    ns per rl_check, local-only, on a limit that admits nearly everything:\n"
    "    for one hot key, and for N keys drawn at random (all inserted before\n"
    "    timing). Each is shown with a floor measured in the same run: the\n"
    "    library's key hash and clock read plus one uncontended CAS. Figures\n"
    "    are medians of 5 runs, taken in rounds that run every figure once.\n"
    "    With threads, ns/check is wall time over all threads' checks (the\n"
    "    inverse of throughput). Timing depends on the machine and its load:\n"
    "    compare runs on one machine only. The full benchmark is rl_bench\n"
    "    (bench/README.md).\n"
    "\n"
    "OPTIONS\n"
    "    --seconds N   about how long to measure, 1..600 (default 3)\n"
    "    --keys N      random keys, 1..4194304 (default 100000)\n"
    "    --threads N   checking threads, 1..64 (default 1)\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, library_version, machine: {cpu, cores, kernel, arch}, threads,\n"
    "     keys, runs, run_ms, clock_source,\n"
    "     figures: [{name, ns_median, ns_min, ns_max}],\n"
    "     ratios: {hot_key_vs_floor, keys_vs_floor}}\n"
    "    figure names: floor_hot_key, rl_check_hot_key, floor_keys, rl_check_keys\n";

static const char quota_page[] =
    "NAME\n"
    "    ratelimit quota - a key's usage of a quota in the current period\n"
    "\n"
    "SYNOPSIS\n"
    "    ratelimit [--json] quota --redis URL [--prefix P]\n"
    "              (--secret-file F | --secret HEX) [--key-hex | --api-key | --ip]\n"
    "              QUOTA KEY\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads Redis's clock (TIME), finds the quota's period holding it, and\n"
    "    reads the key's counter for that period under the name every node\n"
    "    gives it, {P:q1:NAME:<128-bit PRF>}:p:<period start ms>, computed from\n"
    "    the fleet's key_secret by the library's own code. Shows the period,\n"
    "    used of amount, remaining, and the reset (the period's end, UTC).\n"
    "    A key with no counter has used nothing in this period.\n"
    "\n"
    "    QUOTA is the quota's spec, as rl_quota_parse takes it (\"name=plan\n"
    "    amount=1000000 period=month\"): its name, amount and period are what\n"
    "    the reading needs. KEY is the key's bytes (--key-hex: in hex).\n"
    "\n"
    "OPTIONS\n"
    "    --redis URL        redis://[[user]:password@]host[:port][/db]\n"
    "    --prefix P         the fleet's key_prefix (default rl)\n"
    "    --secret-file F    the fleet's key_secret: F less one final newline\n"
    "    --secret HEX       the key_secret in hex\n"
    "    --key-hex          KEY is hex (binary keys)\n"
    "    --api-key          KEY is a client's API key, named as the gateway\n"
    "                       example names it: key:KEY\n"
    "    --ip               KEY is a client's IPv4 or IPv6 address, named as\n"
    "                       the gateway example names it: ip:ADDRESS\n"
    "\n"
    "OUTPUT (--json)\n"
    "    {ok, redis, prefix, quota, key, key_hex, period, amount, used,\n"
    "     remaining, now_ms, period_start_ms, reset_unix_ms, reset_in_ms,\n"
    "     redis_key, ttl_ms}\n"
    "    Times are Redis time, Unix ms; ttl_ms is -2 when no counter exists.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 read (used may be 0), 2 usage, 3 Redis unreachable or refused\n"
    "\n"
    "EXAMPLE\n"
    "    ratelimit quota --redis redis://10.0.0.5:6379 --secret-file /etc/rl.key \\\n"
    "        'name=plan amount=1000000 period=month' customer-42\n";

static const struct {
    const char *name;
    const char *page;
} pages[] = {
    {"check", check_page},
    {"inspect", inspect_page},
    {"nodes", nodes_page},
    {"hot", hot_page},
    {"bench", bench_page},
    {"quota", quota_page},
};

/* The installed docs beside this program (RL_CLI_DOCDIR_REL from its
 * directory), resolved, if they are there: 0, or -1. */
static int docs_dir(char *out, size_t cap)
{
    char exe[PATH_MAX], dir[PATH_MAX + sizeof RL_CLI_DOCDIR_REL + 1], real[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    snprintf(dir, sizeof dir, "%s/%s", exe, RL_CLI_DOCDIR_REL);
    if (realpath(dir, real) == NULL || strlen(real) + sizeof "/cli.md" > cap)
        return -1;
    snprintf(out, cap, "%s/cli.md", real);
    if (access(out, R_OK) != 0)
        return -1;
    snprintf(out, cap, "%s", real);
    return 0;
}

/* Where the full reference is, in terms a reader can act on wherever the
 * tool was installed (or run from a build tree). */
static void print_docs(FILE *f)
{
    char dir[PATH_MAX];
    if (docs_dir(dir, sizeof dir) == 0)
        fprintf(f,
                "    Full reference: %s/cli.md; the limits-file format:\n"
                "    %s/limits-file.md.\n",
                dir, dir);
    else
        fputs("    Full reference: cli.md, which `cmake --install` puts in\n"
              "    " RL_CLI_DOCDIR_REL "/ from the directory this program is\n"
              "    installed in (docs/cli.md in the source tree); the limits-file\n"
              "    format: limits-file.md beside it. Not found beside this copy.\n",
              f);
}

int cli_help(FILE *f, const char *cmd)
{
    if (cmd == NULL) {
        fputs(tool_page, f);
        print_docs(f);
        return 0;
    }
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++)
        if (strcmp(cmd, pages[i].name) == 0) {
            fputs(pages[i].page, f);
            return 0;
        }
    return -1;
}
