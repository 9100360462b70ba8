/* SPDX-License-Identifier: MIT */
/*
 * The options that name a fleet's Redis state, for the subcommands that read
 * it (inspect, quota, nodes, hot): --redis URL and --prefix P, and for one
 * key's names the fleet's secret (--secret-file F or --secret HEX) and
 * --key-hex. Parsed and checked in one place, so every subcommand takes
 * them alike and refuses a prefix no node could have.
 */
#ifndef RL_CLI_FLEETOPTS_H
#define RL_CLI_FLEETOPTS_H

#include <stddef.h>
#include "args.h"
#include "cli.h"
#include "output.h"
#include "redisconn.h"

typedef struct cli_fleet {
    const char *url;         /* --redis: required */
    const char *prefix;      /* --prefix: "rl" unless given */
    const char *secret_file; /* --secret-file (CLI_FLEET_KEY) */
    const char *secret_hex;  /* --secret (CLI_FLEET_KEY) */
    int key_hex;             /* --key-hex (CLI_FLEET_KEY): KEY is given in hex */
    int api_key;             /* --api-key (CLI_FLEET_KEY): KEY is "key:" KEY */
    int ip;                  /* --ip (CLI_FLEET_KEY): KEY is "ip:" the address */
} cli_fleet_t;

/* cli_fleet_opts' what: also the options that name one key. */
#define CLI_FLEET_KEY 1u

/*
 * Parse a subcommand's arguments (cli_parse_args) with the fleet options
 * (with CLI_FLEET_KEY in what, the key's too) and extra, the subcommand's
 * own option (NULL: none), then check them: exactly npos positionals
 * (pos_msg names them otherwise), --redis given, --prefix 1 to
 * RL_KEY_PREFIX_MAX bytes of a name. CLI_OK, or CLI_USAGE with the error
 * printed.
 */
int cli_fleet_opts(const cli_t *cli, const char *cmd, int argc, char **argv, unsigned what,
                   const cli_opt_t *extra, const char **pos, int npos, const char *pos_msg,
                   cli_fleet_t *f);

/*
 * What names one key (CLI_FLEET_KEY): the KEY argument arg into
 * key[RL_MAX_KEY_LEN] (hex with --key-hex), in the gateway example's form
 * with --api-key ("key:" KEY, a client's X-API-Key) or --ip ("ip:" the
 * address as the gateway prints it), then the fleet's secret (--secret-file
 * or --secret; the caller wipes and frees it). CLI_OK, or CLI_USAGE with the
 * error printed.
 */
int cli_fleet_key(const cli_t *cli, const char *cmd, const cli_fleet_t *f, const char *arg,
                  unsigned char *key, size_t *key_len, unsigned char **secret,
                  size_t *secret_len);

/* Connect to --redis. CLI_OK, or the failure reported (a bad URL as a usage
 * error) with its status, and r closed. */
int cli_fleet_connect(const cli_t *cli, const char *cmd, const cli_fleet_t *f, cli_redis_t *r);

/* The hint for a key not found: how the gateway example names keys, when
 * KEY was given without that form; "" otherwise. */
const char *cli_fleet_key_hint(const cli_fleet_t *f, const unsigned char *key, size_t len);

/* A subcommand's JSON document on stdout, begun as every fleet reader's
 * is: {"ok": true, "redis": where, "prefix": prefix, ... */
void cli_fleet_json_begin(json_t *j, const char *where, const char *prefix);

#endif
