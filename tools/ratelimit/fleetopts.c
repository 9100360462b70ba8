/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <string.h>
#include "fleetopts.h"
#include "fleetkey.h"
#include "base/keyprefix.h"
#include "local/limitdef.h"

int cli_fleet_opts(const cli_t *cli, const char *cmd, int argc, char **argv, unsigned what,
                   const cli_opt_t *extra, const char **pos, int npos, const char *pos_msg,
                   cli_fleet_t *f)
{
    *f = (cli_fleet_t){.prefix = "rl"};
    /* The fleet's five, the subcommand's own, the end. */
    cli_opt_t opts[9];
    size_t n = 0;
    opts[n++] = (cli_opt_t){"--redis", &f->url, NULL};
    opts[n++] = (cli_opt_t){"--prefix", &f->prefix, NULL};
    if (what & CLI_FLEET_KEY) {
        opts[n++] = (cli_opt_t){"--secret-file", &f->secret_file, NULL};
        opts[n++] = (cli_opt_t){"--secret", &f->secret_hex, NULL};
        opts[n++] = (cli_opt_t){"--key-hex", NULL, &f->key_hex};
        opts[n++] = (cli_opt_t){"--api-key", NULL, &f->api_key};
        opts[n++] = (cli_opt_t){"--ip", NULL, &f->ip};
    }
    if (extra != NULL)
        opts[n++] = *extra;
    opts[n] = (cli_opt_t){NULL, NULL, NULL};
    int got = cli_parse_args(cli, cmd, argc, argv, opts, pos, npos);
    if (got < 0)
        return CLI_USAGE;
    if (got != npos)
        return cli_usage_error(cli, cmd, "%s", pos_msg);
    if (f->url == NULL)
        return cli_usage_error(cli, cmd, "--redis URL is required");
    if (f->api_key + f->ip + f->key_hex > 1)
        return cli_usage_error(cli, cmd, "give at most one of --api-key, --ip and --key-hex");
    if (!rl__name_valid(f->prefix, RL_KEY_PREFIX_MAX + 1))
        return cli_usage_error(cli, cmd, "--prefix: 1..%d bytes of [A-Za-z0-9_.:-]",
                               RL_KEY_PREFIX_MAX);
    return CLI_OK;
}

/* --ip's address as the gateway writes it (uv_ip4_name, uv_ip6_name:
 * inet_ntop's form), so "::0001" finds the key of "::1". */
static int gateway_ip(const cli_t *cli, const char *cmd, const char *arg, char *out, size_t cap)
{
    unsigned char bin[16];
    if (inet_pton(AF_INET, arg, bin) == 1 && inet_ntop(AF_INET, bin, out, (socklen_t)cap))
        return CLI_OK;
    if (inet_pton(AF_INET6, arg, bin) == 1 && inet_ntop(AF_INET6, bin, out, (socklen_t)cap))
        return CLI_OK;
    return cli_usage_error(cli, cmd, "--ip: KEY \"%s\" is not an IPv4 or IPv6 address", arg);
}

int cli_fleet_key(const cli_t *cli, const char *cmd, const cli_fleet_t *f, const char *arg,
                  unsigned char *key, size_t *key_len, unsigned char **secret,
                  size_t *secret_len)
{
    /* The gateway example's names (examples/gateway/README.md, "Keys"). */
    char named[RL_MAX_KEY_LEN + 8], ip[64];
    if (f->ip) {
        if (gateway_ip(cli, cmd, arg, ip, sizeof ip) != CLI_OK)
            return CLI_USAGE;
        snprintf(named, sizeof named, "ip:%s", ip);
        arg = named;
    } else if (f->api_key) {
        if (arg[0] == '\0')
            return cli_usage_error(cli, cmd, "--api-key: KEY is empty");
        /* Longer than a key may be, it is cut short here and refused below. */
        snprintf(named, sizeof named, "key:%s", arg);
        arg = named;
    }
    int rc = cli_key_arg(cli, cmd, arg, f->key_hex, key, key_len);
    if (rc != CLI_OK)
        return rc;
    char err[256];
    if (fleet_secret_load(f->secret_file, f->secret_hex, secret, secret_len, err, sizeof err) != 0)
        return cli_usage_error(cli, cmd, "%s", err);
    return CLI_OK;
}

int cli_fleet_connect(const cli_t *cli, const char *cmd, const cli_fleet_t *f, cli_redis_t *r)
{
    if (cli_redis_open(r, f->url) == 0)
        return CLI_OK;
    int rc = r->status == CLI_USAGE ? cli_usage_error(cli, cmd, "%s", r->err)
                                    : cli_fail(cli, cmd, r->status, r->kind, "%s", r->err);
    cli_redis_close(r);
    return rc;
}

const char *cli_fleet_key_hint(const cli_fleet_t *f, const unsigned char *key, size_t len)
{
    if (f->api_key || f->ip || f->key_hex || (len >= 4 && memcmp(key, "key:", 4) == 0) ||
        (len >= 3 && memcmp(key, "ip:", 3) == 0))
        return "";
    return "; the gateway example names a client's keys key:<API key> and ip:<address>: "
           "--api-key KEY or --ip ADDRESS";
}

void cli_fleet_json_begin(json_t *j, const char *where, const char *prefix)
{
    json_init(j, stdout);
    json_object(j, NULL);
    json_bool(j, "ok", 1);
    json_str(j, "redis", where);
    json_str(j, "prefix", prefix);
}
