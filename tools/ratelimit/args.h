/* SPDX-License-Identifier: MIT */
/* Option parsing for the subcommands: --name VALUE, --name=VALUE, flags. */
#ifndef RL_CLI_ARGS_H
#define RL_CLI_ARGS_H

#include <stdint.h>
#include "cli.h"

typedef struct cli_opt {
    const char *name;   /* with its dashes: "--seconds" */
    const char **value; /* takes a value, stored here; NULL for a flag */
    int *flag;          /* a flag: set to 1 */
} cli_opt_t;

/*
 * Parse a subcommand's arguments, argv[1..argc): the options in opts (a
 * table ended by a NULL name; each at most once), the rest positional, in
 * order, into pos[0..maxpos). "--" ends the options. Returns how many
 * positionals there were, or -1 after a usage error was printed.
 */
int cli_parse_args(const cli_t *cli, const char *cmd, int argc, char **argv,
                   const cli_opt_t *opts, const char **pos, int maxpos);

/* A decimal integer in [min, max]; 0, or -1 if s is not one. */
/* A KEY argument into key[RL_MAX_KEY_LEN]: the bytes as given, or decoded
 * from hex (--key-hex). CLI_OK, or a usage error (printed) naming KEY. */
int cli_key_arg(const cli_t *cli, const char *cmd, const char *arg, int hex,
                unsigned char *key, size_t *len);

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Read a whole file (at most max bytes). The caller frees *out. 0, or -1
 * with errno set (EFBIG when longer than max). */
int cli_read_file(const char *path, size_t max, char **out, size_t *len);

#endif
