/* SPDX-License-Identifier: MIT */
/* ratelimit, the command-line tool: what every subcommand shares. */
#ifndef RL_CLI_H
#define RL_CLI_H

#include <stdio.h>

/* Exit statuses (docs/cli.md). */
enum {
    CLI_OK = 0,      /* done; check: the file is valid */
    CLI_FAIL = 1,    /* check: the file has errors; inspect: no such key */
    CLI_USAGE = 2,   /* bad arguments, or a file named in them cannot be read */
    CLI_RUNTIME = 3  /* Redis unreachable, refused the credentials or answered
                        an error; out of memory; a benchmark that cannot run */
};

typedef struct cli {
    const char *prog; /* argv[0]'s base name, for messages */
    int json;         /* --json: one JSON document on stdout */
} cli_t;

/* Each subcommand: argv[0] is its name; global flags are already removed. */
int cli_check(cli_t *cli, int argc, char **argv);
int cli_inspect(cli_t *cli, int argc, char **argv);
int cli_nodes(cli_t *cli, int argc, char **argv);
int cli_hot(cli_t *cli, int argc, char **argv);
int cli_bench(cli_t *cli, int argc, char **argv);
int cli_quota(cli_t *cli, int argc, char **argv);

/* help.c: the manual page of a subcommand (NULL: the tool's own). Returns 0
 * if it knows the name. */
int cli_help(FILE *f, const char *cmd);
/* One line saying how to get help, after a usage error. */
int cli_usage_error(const cli_t *cli, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Report a failure: the message on stderr ("ratelimit: <cmd>: message") and,
 * with --json, {"ok": false, "error": {"kind": kind, "message": ...}} on
 * stdout. Returns status, so a subcommand can `return cli_fail(...)`.
 */
int cli_fail(const cli_t *cli, const char *cmd, int status, const char *kind, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));

#endif
