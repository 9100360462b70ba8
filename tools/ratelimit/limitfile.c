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

int limitfile_check(const char *text, size_t len, limitfile_t *lf)
{
    memset(lf, 0, sizeof *lf);
    rl_config_t cfg;
    rl_config_init(&cfg);
    cfg.max_keys = 16;  /* nothing is checked: the table only has to exist */
    cfg.max_limits = RL_MAX_LIMITS;
    rl_t *rl = NULL;
    int rc = rl_open(&rl, &cfg);
    if (rc != 0)
        return rc;
    char *spec = malloc(len + 1);
    if (spec == NULL) {
        rl_close(rl);
        return RL_ENOMEM;
    }
    unsigned line = 0;
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        line++;
        size_t n = end - i;
        const char *p = text + i;
        i = end + 1;
        int has_nul = memchr(p, '\0', n) != NULL;
        const char *hash = memchr(p, '#', n);
        if (hash != NULL)
            n = (size_t)(hash - p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
            n--;
        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        if (n == 0 && !has_nul)
            continue;
        limitfile_entry_t *e = next_entry(lf, line);
        if (e == NULL) {
            rc = RL_ENOMEM;
            break;
        }
        if (has_nul) {
            /* rl_limit_parse would stop at it and read a different spec. */
            set_error(lf, e, RL_ESPEC, "the line holds a NUL byte");
            continue;
        }
        memcpy(spec, p, n);
        spec[n] = '\0';
        char err[256] = "";
        int prc = rl_limit_parse(&e->lim, spec, err, sizeof err);
        if (prc != 0) {
            set_error(lf, e, prc, err[0] ? err : rl_strerror(prc));
            continue;
        }
        int arc = rl_limit_add(rl, &e->lim);
        if (arc == RL_EEXIST) {
            unsigned first = 0;
            for (size_t k = 0; k + 1 < lf->n && first == 0; k++)
                if (lf->e[k].rc == 0 && strcmp(lf->e[k].lim.name, e->lim.name) == 0)
                    first = lf->e[k].line;
            char msg[200];
            snprintf(msg, sizeof msg, "duplicate limit name \"%s\" (first defined on line %u)",
                     e->lim.name, first);
            set_error(lf, e, arc, msg);
        } else if (arc == RL_ELIMITS) {
            char msg[200];
            snprintf(msg, sizeof msg, "more than %d limits: an instance holds at most that many",
                     RL_MAX_LIMITS);
            set_error(lf, e, arc, msg);
        } else if (arc < 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "rl_limit_add refuses it: %s", rl_strerror(arc));
            set_error(lf, e, arc, msg);
        }
        if (arc == RL_ENOMEM) {
            rc = RL_ENOMEM;
            break;
        }
    }
    free(spec);
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
