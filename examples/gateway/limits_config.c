/* SPDX-License-Identifier: MIT */
/* The limits file: parse, apply to an instance (all or nothing), match. */
#include "limits_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reporter {
    limits_report_fn report;
    void *ud;
} reporter_t;

static void report_coded(void *ud, unsigned line, int code, const char *msg)
{
    const reporter_t *r = ud;
    char text[LIMITS_LINE_MAX + 320];
    snprintf(text, sizeof text, "%s (%s)", msg, rl_err_name(code));
    if (r->report != NULL)
        r->report(r->ud, (int)line, text);
}

static const limitsfile_opts_t gateway_opts = {LIMITS_MAX_RULES, LIMITSFILE_ROUTES_REQUIRED};

/* The parser's rules (all routed: the options require it) as the set. */
static void take_rules(limit_set_t *out, const limitsfile_t *lf)
{
    out->count = 0;
    for (size_t i = 0; i < lf->count && i < LIMITS_MAX_RULES; i++) {
        const limitsfile_rule_t *src = &lf->rules[i];
        limit_rule_t *r = &out->rules[out->count++];
        memset(r, 0, sizeof *r);
        memcpy(r->pattern, src->pattern, src->pattern_len + 1);
        r->pattern_len = src->pattern_len;
        r->prefix = src->prefix;
        r->scope = src->scope == LIMITSFILE_SCOPE_IP       ? SCOPE_IP
                   : src->scope == LIMITSFILE_SCOPE_SHARED ? SCOPE_SHARED
                                                           : SCOPE_CLIENT;
        r->limit = src->limit;
        r->is_quota = src->is_quota;
        r->tokens = src->tokens;
        r->quota = src->quota;
        r->line = (int)src->line;
        r->id = -1;
    }
}

/* Out of memory is one error for the file as a whole. */
static int finish(limit_set_t *out, limitsfile_t *lf, int errors, const reporter_t *rep)
{
    if (errors < 0) {
        report_coded((void *)rep, 0, errors, "out of memory");
        errors = 1;
    }
    if (errors == 0)
        take_rules(out, lf);
    else
        out->count = 0;
    limitsfile_free(lf);
    return errors;
}

int limits_parse(limit_set_t *out, const char *text, size_t len, limits_report_fn report, void *ud)
{
    reporter_t rep = {report, ud};
    limitsfile_t lf;
    int errors = limitsfile_parse(&lf, text, len, &gateway_opts, report_coded, &rep);
    return finish(out, &lf, errors, &rep);
}

int limits_load(limit_set_t *out, const char *path, limits_report_fn report, void *ud)
{
    reporter_t rep = {report, ud};
    limitsfile_t lf;
    int errors = limitsfile_load(&lf, path, &gateway_opts, report_coded, &rep);
    return finish(out, &lf, errors, &rep);
}

static bool rule_matches(const limit_rule_t *r, const char *path, size_t len, bool metrics)
{
    if (!r->prefix)
        return len == r->pattern_len && memcmp(path, r->pattern, len) == 0;
    return !metrics && len >= r->pattern_len && memcmp(path, r->pattern, r->pattern_len) == 0;
}

static bool has_name(const limit_set_t *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->rules[i].limit.name, name) == 0)
            return true;
    return false;
}

static bool same_quota(const rl_quota_t *a, const rl_quota_t *b)
{
    return strcmp(a->name, b->name) == 0 && a->amount == b->amount && a->period == b->period &&
           a->period_ms == b->period_ms && a->dedup_ms == b->dedup_ms &&
           a->on_failure == b->on_failure;
}

/* Quota rules: added on the first apply; a reload must keep them as they
 * are (ids carried over). Returns 0 or the RL_E* code with err set; on an
 * error nothing stays added. */
static int apply_quotas(rl_t *rl, const limit_set_t *prev, limit_set_t *next, char *err,
                        size_t errlen)
{
    size_t nprev = 0, nnext = 0;
    for (size_t j = 0; prev != NULL && j < prev->count; j++)
        nprev += prev->rules[j].is_quota;
    for (size_t i = 0; i < next->count; i++) {
        limit_rule_t *r = &next->rules[i];
        if (!r->is_quota)
            continue;
        nnext++;
        if (prev != NULL) {
            const limit_rule_t *old = NULL;
            for (size_t j = 0; j < prev->count && old == NULL; j++)
                if (prev->rules[j].is_quota && same_quota(&prev->rules[j].quota, &r->quota))
                    old = &prev->rules[j];
            if (old == NULL) {
                snprintf(err, errlen, "line %d: quota \"%s\": quotas change only with a "
                         "restart", r->line, r->quota.name);
                return RL_ENOTSUP;
            }
            r->id = old->id;
            continue;
        }
        int id = rl_quota_add(rl, &r->quota);
        if (id < 0) {
            snprintf(err, errlen, "line %d: quota \"%s\": %s%s", r->line, r->quota.name,
                     rl_strerror(id), id == RL_ENOTSUP ? " (quotas need --redis)" : "");
            while (i-- > 0)
                if (next->rules[i].is_quota)
                    rl_quota_remove(rl, next->rules[i].id);
            return id;
        }
        r->id = id;
    }
    if (prev != NULL && nprev != nnext) {
        snprintf(err, errlen, "a quota rule was dropped: quotas change only with a restart");
        return RL_ENOTSUP;
    }
    return 0;
}

int limits_apply(rl_t *rl, const limit_set_t *prev, limit_set_t *next, limits_change_t *change,
                 char *err, size_t errlen)
{
    int qrc = apply_quotas(rl, prev, next, err, errlen);
    if (qrc < 0)
        return qrc;
    /* what to put back if a later rule fails */
    struct undo {
        int id;
        bool added;
        rl_limit_t old;
    } *undo = calloc(next->count ? next->count : 1, sizeof *undo);
    if (undo == NULL) {
        snprintf(err, errlen, "out of memory");
        return RL_ENOMEM;
    }
    limits_change_t done = {0, 0, 0};
    int rc = 0;
    size_t i;
    for (i = 0; i < next->count; i++) {
        limit_rule_t *r = &next->rules[i];
        if (r->is_quota)
            continue;
        int id = rl_limit_find(rl, r->limit.name);
        if (id >= 0) {
            rl_limit_init(&undo[i].old);
            rc = rl_limit_get(rl, id, &undo[i].old);
            if (rc == 0)
                rc = rl_limit_update(rl, id, &r->limit);
            undo[i].added = false;
        } else {
            rc = id = rl_limit_add(rl, &r->limit);
            undo[i].added = true;
        }
        if (rc < 0) {
            bool redis_mode = r->limit.mode == RL_MODE_EXACT || r->limit.mode == RL_MODE_TIERED;
            snprintf(err, errlen, "line %d: limit \"%s\": %s", r->line, r->limit.name,
                     rc == RL_ENOTSUP && redis_mode
                         ? (r->limit.mode == RL_MODE_EXACT
                                ? "mode=exact needs Redis: start the gateway with --redis"
                                : "mode=tiered needs Redis: start the gateway with --redis")
                         : rl_strerror(rc));
            break;
        }
        undo[i].id = id;
        r->id = id;
        if (undo[i].added)
            done.added++;
        else
            done.updated++;
    }
    if (rc < 0) {
        for (size_t k = 0; prev == NULL && k < next->count; k++)
            if (next->rules[k].is_quota)
                rl_quota_remove(rl, next->rules[k].id);
        while (i-- > 0) {
            if (next->rules[i].is_quota)
                continue;
            if (undo[i].added)
                rl_limit_remove(rl, undo[i].id);
            else
                rl_limit_update(rl, undo[i].id, &undo[i].old);
        }
        free(undo);
        return rc;
    }
    free(undo);
    for (size_t j = 0; prev != NULL && j < prev->count; j++) {
        const limit_rule_t *r = &prev->rules[j];
        if (!r->is_quota && !has_name(next, r->limit.name) && rl_limit_remove(rl, r->id) == 0)
            done.removed++;
    }
    if (change != NULL)
        *change = done;
    return 0;
}

size_t limits_match(const limit_set_t *set, const char *path, size_t path_len,
                    const limit_rule_t **out)
{
    /* /metrics is the gateway's own endpoint: only a rule naming it exactly
     * limits it, so an API-wide rule never starves monitoring */
    bool metrics = path_len == 8 && memcmp(path, "/metrics", 8) == 0;
    size_t n = 0;
    for (size_t i = 0; i < set->count && n < RL_MULTI_MAX; i++)
        if (rule_matches(&set->rules[i], path, path_len, metrics))
            out[n++] = &set->rules[i];
    return n;
}
