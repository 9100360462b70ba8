/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "limitfile.h"

static limitfile_entry_t *next_entry(limitfile_t *lf, unsigned line)
{
    if (lf->n == lf->cap) {
        size_t cap = lf->cap ? 2 * lf->cap : 32;
        limitfile_entry_t *grown = realloc(lf->e, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        lf->e = grown;
        lf->cap = cap;
    }
    limitfile_entry_t *e = &lf->e[lf->n++];
    memset(e, 0, sizeof *e);
    e->line = line;
    return e;
}

static void set_error(limitfile_t *lf, limitfile_entry_t *e, int rc, const char *msg)
{
    e->rc = rc;
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    lf->errors++;
}

/* The parser's errors, kept until they are merged with its rules. */
typedef struct collected {
    limitfile_t errs;
    int nomem;
} collected_t;

static void collect(void *ud, unsigned line, int code, const char *msg)
{
    collected_t *c = ud;
    limitfile_entry_t *e = next_entry(&c->errs, line);
    if (e == NULL) {
        c->nomem = 1;
        return;
    }
    set_error(&c->errs, e, code, msg);
}

/* Rules and errors, both in line order, into one list in line order; a
 * rule that also has an error (a path matching too many rules) is that
 * error. */
static int merge(limitfile_t *lf, const limitsfile_t *rules, const limitfile_t *errs)
{
    size_t i = 0, k = 0;
    while (i < rules->count || k < errs->n) {
        limitfile_entry_t *e;
        if (k < errs->n && (i == rules->count || errs->e[k].line <= rules->rules[i].line)) {
            if (i < rules->count && errs->e[k].line == rules->rules[i].line)
                i++;
            if ((e = next_entry(lf, errs->e[k].line)) == NULL)
                return RL_ENOMEM;
            set_error(lf, e, errs->e[k].rc, errs->e[k].msg);
            k++;
            continue;
        }
        const limitsfile_rule_t *r = &rules->rules[i++];
        if ((e = next_entry(lf, r->line)) == NULL)
            return RL_ENOMEM;
        e->lim = r->limit;
        e->is_quota = r->is_quota;
        e->quota = r->quota;
        e->scope = r->scope;
        e->tokens = r->tokens;
        if (r->scope != LIMITSFILE_SCOPE_NONE)
            snprintf(e->pattern, sizeof e->pattern, "%s%s", r->pattern, r->prefix ? "*" : "");
    }
    return 0;
}

/* Exact and tiered limits, which rl_limit_add refuses on the check's
 * local-only instance: an error for a file meant for one (`local`), else
 * the limit as a global one to add (the fields rl_limit_parse checked
 * stand) and, if it would admit while Redis is late, a warning. */
static const rl_limit_t *redis_mode(limitfile_t *lf, limitfile_entry_t *e, bool local,
                                    rl_limit_t *tmp)
{
    const char *mode = mode_name(e->lim.mode);
    if (e->lim.mode != RL_MODE_EXACT && e->lim.mode != RL_MODE_TIERED)
        return &e->lim;
    if (local) {
        char msg[200];
        snprintf(msg, sizeof msg, "limit \"%s\": mode=%s needs Redis; an instance without a "
                 "redis_url refuses it", e->lim.name, mode);
        set_error(lf, e, RL_ENOTSUP, msg);
        return NULL;
    }
    if (e->lim.on_failure == RL_FAIL_OPEN) {
        snprintf(e->warn, sizeof e->warn, "limit \"%s\": mode=%s with on_failure=open admits "
                 "every check Redis does not answer in time (on_failure=closed holds the "
                 "bound)", e->lim.name, mode);
        lf->warnings++;
    }
    *tmp = e->lim;
    tmp->mode = RL_MODE_GLOBAL;
    tmp->near_ppm = 0;
    return tmp;
}

int limitfile_check(const char *text, size_t len, bool local, limitfile_t *lf)
{
    memset(lf, 0, sizeof *lf);
    collected_t c;
    memset(&c, 0, sizeof c);
    limitsfile_t rules;
    limitsfile_opts_t opts = {RL_MAX_LIMITS, 0};
    int rc = limitsfile_parse(&rules, text, len, &opts, collect, &c);
    if (rc >= 0 && c.nomem)
        rc = RL_ENOMEM;
    if (rc >= 0)
        rc = merge(lf, &rules, &c.errs);
    limitsfile_free(&rules);
    limitfile_free(&c.errs);
    if (rc < 0) {
        limitfile_free(lf);
        return rc;
    }
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_keys = 16;  /* nothing is checked: the table only has to exist */
    cfg.max_limits = RL_MAX_LIMITS;
    cfg.log_quiet = 1; /* its refusals are reported per line here */
    rl_t *rl = NULL;
    rc = rl_open(&rl, &cfg);
    if (rc != 0) {
        limitfile_free(lf);
        return rc;
    }
    for (size_t i = 0; i < lf->n && rc == 0; i++) {
        limitfile_entry_t *e = &lf->e[i];
        if (e->rc != 0 || e->is_quota) /* a quota: rl_quota_parse validated it all */
            continue;
        rl_limit_t tmp;
        const rl_limit_t *lim = redis_mode(lf, e, local, &tmp);
        if (lim == NULL)
            continue;
        int arc = rl_limit_add(rl, lim);
        if (arc == RL_ENOMEM) {
            rc = arc;
        } else if (arc < 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "rl_limit_add refuses it: %s", rl_strerror(arc));
            set_error(lf, e, arc, msg);
        }
    }
    rl_close(rl);
    if (rc != 0)
        limitfile_free(lf);
    return rc;
}

void limitfile_free(limitfile_t *lf)
{
    free(lf->e);
    memset(lf, 0, sizeof *lf);
}

void fmt_rate(char *buf, size_t cap, uint64_t count, uint64_t period_ms)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (period_ms % units[i].ms != 0)
            continue;
        uint64_t mult = period_ms / units[i].ms;
        if (mult == 1)
            snprintf(buf, cap, "%llu/%s", (unsigned long long)count, units[i].unit);
        else
            snprintf(buf, cap, "%llu/%llu%s", (unsigned long long)count,
                     (unsigned long long)mult, units[i].unit);
        return;
    }
}

const char *mode_name(int32_t mode)
{
    switch (mode) {
    case RL_MODE_GLOBAL:
        return "global";
    case RL_MODE_LOCAL:
        return "local";
    case RL_MODE_EXACT:
        return "exact";
    case RL_MODE_TIERED:
        return "tiered";
    default:
        return "unknown";
    }
}

const char *failure_name(int32_t on_failure)
{
    switch (on_failure) {
    case RL_FAIL_LOCAL:
        return "local";
    case RL_FAIL_OPEN:
        return "open";
    case RL_FAIL_CLOSED:
        return "closed";
    default:
        return "unknown";
    }
}
