/* SPDX-License-Identifier: MIT */
/*
 * ratelimit: the command-line tool of libratelimit (docs/cli.md).
 *
 * main: global flags (--json, --help, --version, anywhere on the line),
 * dispatch to a subcommand, and the error reporting they share.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "output.h"
#include "ratelimit.h"

/* The tool's version: the project's it was built with (CMake sets it). */
#ifndef RL_CLI_VERSION
#define RL_CLI_VERSION "unknown"
#endif

typedef int (*cmd_fn)(cli_t *, int, char **);

static const struct {
    const char *name;
    cmd_fn fn;
} commands[] = {
    {"check", cli_check},
    {"inspect", cli_inspect},
    {"nodes", cli_nodes},
    {"hot", cli_hot},
    {"bench", cli_bench},
    {"quota", cli_quota},
};

int cli_usage_error(const cli_t *cli, const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_fail(cli, cmd, CLI_USAGE, "usage", "%s", msg);
    if (!cli->json && cmd != NULL)
        fprintf(stderr, "(see: %s %s --help)\n", cli->prog, cmd);
    else if (!cli->json)
        fprintf(stderr, "(see: %s --help)\n", cli->prog);
    return CLI_USAGE;
}

int cli_fail(const cli_t *cli, const char *cmd, int status, const char *kind, const char *fmt,
             ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cmd != NULL)
        fprintf(stderr, "%s: %s: %s\n", cli->prog, cmd, msg);
    else
        fprintf(stderr, "%s: %s\n", cli->prog, msg);
    if (cli->json) {
        json_t j;
        json_init(&j, stdout);
        json_object(&j, NULL);
        json_bool(&j, "ok", 0);
        json_str(&j, "command", cmd);
        json_object(&j, "error");
        json_str(&j, "kind", kind);
        json_str(&j, "message", msg);
        json_i64(&j, "exit_status", status);
        json_end(&j);
        json_finish(&j);
    }
    return status;
}

static void print_version(const cli_t *cli)
{
    if (cli->json) {
        json_t j;
        json_init(&j, stdout);
        json_object(&j, NULL);
        json_bool(&j, "ok", 1);
        json_str(&j, "tool_version", RL_CLI_VERSION);
        json_str(&j, "library_version", rl_version());
        json_u64(&j, "library_version_hex", rl_version_hex());
        json_finish(&j);
    } else {
        printf("ratelimit %s (libratelimit %s)\n", RL_CLI_VERSION, rl_version());
    }
}

int main(int argc, char **argv)
{
    cli_t cli = {"ratelimit", 0};
    if (argc > 0 && argv[0] != NULL) {
        const char *slash = strrchr(argv[0], '/');
        cli.prog = slash ? slash + 1 : argv[0];
    }
    /* Global flags are taken wherever they stand (before "--"); what is
     * left goes to the subcommand. */
    int help = 0, version = 0, n = 0, dashdash = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (rest == NULL)
        return cli_fail(&cli, NULL, CLI_RUNTIME, "internal", "out of memory");
    for (int i = 1; i < argc; i++) {
        if (!dashdash && strcmp(argv[i], "--json") == 0)
            cli.json = 1;
        else if (!dashdash && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0))
            help = 1;
        else if (!dashdash && strcmp(argv[i], "--version") == 0)
            version = 1;
        else {
            dashdash |= strcmp(argv[i], "--") == 0;
            rest[n++] = argv[i];
        }
    }
    int rc;
    if (version) {
        print_version(&cli);
        rc = CLI_OK;
    } else if (n == 0) {
        cli_help(help ? stdout : stderr, NULL);
        rc = help ? CLI_OK : CLI_USAGE;
    } else if (strcmp(rest[0], "help") == 0) {
        if (n > 1 && cli_help(stdout, rest[1]) != 0)
            rc = cli_usage_error(&cli, NULL, "no such command: %s", rest[1]);
        else {
            if (n == 1)
                cli_help(stdout, NULL);
            rc = CLI_OK;
        }
    } else {
        rc = -1;
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (strcmp(rest[0], commands[i].name) != 0)
                continue;
            if (help) {
                cli_help(stdout, rest[0]);
                rc = CLI_OK;
            } else {
                rc = commands[i].fn(&cli, n, rest);
            }
        }
        if (rc < 0)
            rc = cli_usage_error(&cli, NULL, "no such command: %s (commands: check, inspect, "
                                             "nodes, hot, bench, quota)", rest[0]);
    }
    free(rest);
    if (fflush(stdout) != 0 && rc == CLI_OK)
        rc = CLI_RUNTIME; /* a full disk or a closed pipe: the output is not all there */
    return rc;
}
