/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "fleetkey.h"
#include "ratelimit.h"

static const cli_opt_t *find_opt(const cli_opt_t *opts, const char *arg, size_t n)
{
    for (const cli_opt_t *o = opts; o->name != NULL; o++)
        if (strlen(o->name) == n && strncmp(o->name, arg, n) == 0)
            return o;
    return NULL;
}

int cli_parse_args(const cli_t *cli, const char *cmd, int argc, char **argv,
                   const cli_opt_t *opts, const char **pos, int maxpos)
{
    int npos = 0, options_done = 0;
    /* Which options were seen: a repeated one is a mistake, not an override. */
    unsigned char seen[32] = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && strcmp(a, "--") == 0) {
            options_done = 1;
            continue;
        }
        if (options_done || a[0] != '-' || a[1] == '\0') {
            if (npos == maxpos) {
                cli_usage_error(cli, cmd, "unexpected argument '%s'", a);
                return -1;
            }
            pos[npos++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt_t *o = find_opt(opts, a, n);
        if (o == NULL) {
            cli_usage_error(cli, cmd, "unknown option '%.*s'", (int)n, a);
            return -1;
        }
        size_t k = (size_t)(o - opts);
        if (k < sizeof seen && seen[k]++) {
            cli_usage_error(cli, cmd, "%s given twice", o->name);
            return -1;
        }
        if (o->value == NULL) {
            if (eq != NULL) {
                cli_usage_error(cli, cmd, "%s takes no value", o->name);
                return -1;
            }
            *o->flag = 1;
        } else if (eq != NULL) {
            *o->value = eq + 1;
        } else if (i + 1 < argc) {
            *o->value = argv[++i];
        } else {
            cli_usage_error(cli, cmd, "%s needs a value", o->name);
            return -1;
        }
    }
    return npos;
}

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int cli_read_file(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        if (n == cap) {
            if (cap >= max + 1) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return -1;
            }
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = buf == NULL ? ENOMEM : ferror(f) ? EIO : 0;
    fclose(f);
    if (err != 0) {
        free(buf);
        errno = err;
        return -1;
    }
    if (n > max) {
        free(buf);
        errno = EFBIG;
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int cli_key_arg(const cli_t *cli, const char *cmd, const char *arg, int hex,
                unsigned char *key, size_t *len)
{
    if (hex) {
        if (fleet_hex_decode(arg, key, RL_MAX_KEY_LEN, len) != 0)
            return cli_usage_error(cli, cmd, "KEY: not hex, or longer than %d bytes",
                                   RL_MAX_KEY_LEN);
    } else {
        *len = strlen(arg);
        if (*len <= RL_MAX_KEY_LEN)
            memcpy(key, arg, *len);
    }
    if (*len == 0 || *len > RL_MAX_KEY_LEN)
        return cli_usage_error(cli, cmd, "KEY: 1..%d bytes", RL_MAX_KEY_LEN);
    return CLI_OK;
}
