/* SPDX-License-Identifier: MIT */
/* ratelimit check FILE: validate a limits file (tools/limitsfile/limitsfile.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "cli.h"
#include "limitfile.h"
#include "output.h"
#include "quota/spec.h"

static void json_rate(json_t *j, const char *key, rl_rate_t r)
{
    if (r.count == 0) {
        json_null(j, key);
        return;
    }
    char text[64];
    fmt_rate(text, sizeof text, r.count, r.period_ms);
    json_object(j, key);
    json_u64(j, "count", r.count);
    json_u64(j, "period_ms", r.period_ms);
    json_str(j, "text", text);
    json_end(j);
}

static void print_json(const char *path, const limitfile_t *lf)
{
    json_t j;
    json_init(&j, stdout);
    json_object(&j, NULL);
    json_bool(&j, "ok", 1);
    json_str(&j, "file", path);
    json_bool(&j, "valid", lf->errors == 0);
    json_u64(&j, "limit_count", lf->n - lf->errors);
    json_u64(&j, "error_count", lf->errors);
    json_array(&j, "limits");
    for (size_t i = 0; i < lf->n; i++) {
        const limitfile_entry_t *e = &lf->e[i];
        if (e->rc != 0)
            continue;
        json_object(&j, NULL);
        json_u64(&j, "line", e->line);
        json_str(&j, "name", e->lim.name);
        if (e->is_quota) {
            /* a quota rule: its own fields, no rate */
            json_object(&j, "quota");
            json_u64(&j, "amount", e->quota.amount);
            json_str(&j, "period", rl__quota_period_name(e->quota.period));
            json_u64(&j, "period_ms", e->quota.period_ms);
            json_u64(&j, "dedup_ms", e->quota.dedup_ms);
            json_str(&j, "on_failure", failure_name(e->quota.on_failure));
            json_end(&j);
        } else {
            json_null(&j, "quota");
        }
        json_rate(&j, "rate", e->lim.rate);
        json_u64(&j, "burst", e->lim.burst ? e->lim.burst : e->lim.rate.count);
        json_str(&j, "mode", mode_name(e->lim.mode));
        json_str(&j, "on_failure", failure_name(e->lim.on_failure));
        json_rate(&j, "degraded_rate", e->lim.degraded_rate);
        json_bool(&j, "shadow", e->lim.shadow != 0);
        json_u64(&j, "max_keys", e->lim.max_keys);
        if (e->scope == LIMITSFILE_SCOPE_NONE) {
            json_null(&j, "route");
        } else {
            json_object(&j, "route");
            json_str(&j, "pattern", e->pattern);
            json_str(&j, "scope", limitsfile_scope_name(e->scope));
            if (e->tokens) /* only when set: a plain route's object is unchanged */
                json_bool(&j, "tokens", 1);
            json_end(&j);
        }
        json_end(&j);
    }
    json_end(&j);
    json_array(&j, "errors");
    for (size_t i = 0; i < lf->n; i++) {
        const limitfile_entry_t *e = &lf->e[i];
        if (e->rc == 0)
            continue;
        json_object(&j, NULL);
        json_u64(&j, "line", e->line);
        json_str(&j, "code", rl_err_name(e->rc));
        json_str(&j, "message", e->msg);
        json_end(&j);
    }
    json_end(&j);
    json_array(&j, "warnings");
    for (size_t i = 0; i < lf->n; i++) {
        const limitfile_entry_t *e = &lf->e[i];
        if (e->rc != 0 || e->warn[0] == '\0')
            continue;
        json_object(&j, NULL);
        json_u64(&j, "line", e->line);
        json_str(&j, "message", e->warn);
        json_end(&j);
    }
    json_end(&j);
    json_finish(&j);
}

int cli_check(cli_t *cli, int argc, char **argv)
{
    int quiet = 0, local = 0;
    const cli_opt_t opts[] = {
        {"--quiet", NULL, &quiet}, {"--local", NULL, &local}, {NULL, NULL, NULL}};
    const char *pos[1];
    int npos = cli_parse_args(cli, "check", argc, argv, opts, pos, 1);
    if (npos < 0)
        return CLI_USAGE;
    if (npos != 1)
        return cli_usage_error(cli, "check", "a spec FILE is required");
    char *text;
    size_t len;
    if (cli_read_file(pos[0], LIMITFILE_MAX_BYTES, &text, &len) != 0)
        return cli_fail(cli, "check", CLI_USAGE, "file", "cannot read %s: %s", pos[0],
                        errno == EFBIG ? "larger than 16 MiB" : strerror(errno));
    limitfile_t lf;
    int rc = limitfile_check(text, len, local != 0, &lf);
    free(text);
    if (rc != 0)
        return cli_fail(cli, "check", CLI_RUNTIME, "internal", "cannot check %s: %s", pos[0],
                        rl_strerror(rc));
    if (cli->json) {
        print_json(pos[0], &lf);
    } else {
        for (size_t i = 0; i < lf.n; i++)
            if (lf.e[i].rc != 0)
                printf("%s:%u: error: %s (%s)\n", pos[0], lf.e[i].line, lf.e[i].msg,
                       rl_err_name(lf.e[i].rc));
            else if (lf.e[i].warn[0] != '\0')
                printf("%s:%u: warning: %s\n", pos[0], lf.e[i].line, lf.e[i].warn);
        if (!quiet) {
            if (lf.errors == 0)
                printf("%s: OK, %zu limit%s\n", pos[0], lf.n, lf.n == 1 ? "" : "s");
            else
                printf("%s: %zu error%s, %zu valid limit%s\n", pos[0], lf.errors,
                       lf.errors == 1 ? "" : "s", lf.n - lf.errors,
                       lf.n - lf.errors == 1 ? "" : "s");
        }
    }
    rc = lf.errors == 0 ? CLI_OK : CLI_FAIL;
    limitfile_free(&lf);
    return rc;
}
