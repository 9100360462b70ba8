/* SPDX-License-Identifier: MIT */
/*
 * Limits files, in the one format every consumer reads
 * (tools/limitsfile/limitsfile.h: SPEC, or PATTERN SCOPE SPEC, per line),
 * parsed by the shared parser. Read by `check`, and by `inspect --limits`
 * to learn a limit's rate.
 */
#ifndef RL_CLI_LIMITFILE_H
#define RL_CLI_LIMITFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "limitsfile.h"
#include "ratelimit.h"

/* Files larger than this are refused (a limits file is a config file). */
#define LIMITFILE_MAX_BYTES LIMITSFILE_MAX_BYTES

typedef struct limitfile_entry {
    unsigned line;
    int rc;            /* 0, or the RL_E* code of the first problem */
    char msg[320];     /* what was wrong, when rc != 0 */
    char warn[200];    /* when rc == 0: "" or a rule that works but is risky */
    rl_limit_t lim;    /* when rc == 0 */
    limitsfile_scope_t scope;               /* when rc == 0; NONE: a SPEC line */
    char pattern[LIMITSFILE_PATTERN_MAX + 1]; /* with its '*', when routed */
    bool tokens;                            /* routed with "tokens": counts tokens */
    bool is_quota;     /* a quota rule: `quota` holds it (lim only its name) */
    rl_quota_t quota;
} limitfile_entry_t;

typedef struct limitfile {
    limitfile_entry_t *e;
    size_t n, cap;
    size_t errors;
    size_t warnings;
} limitfile_t;

/*
 * Parse text[0, len) with the shared parser (either form of line: `check`
 * accepts exactly what the gateway accepts, and plain spec files) and add
 * each good limit to a local-only instance, as an application would, so
 * whatever else rl_limit_add refuses is found too. An exact or tiered
 * limit needs an instance with Redis: `local` (the file is for one
 * without a redis_url) makes it an error, RL_ENOTSUP; otherwise it is
 * checked as its fields allow, and warned about when on_failure is open.
 * One entry per rule line, in line order. Returns 0 (look at lf->errors),
 * or an RL_E* code if the check itself could not run (out of memory).
 */
int limitfile_check(const char *text, size_t len, bool local, limitfile_t *lf);
void limitfile_free(limitfile_t *lf);

/* "100/s", "5/10s", "1/1500ms": the shortest exact form of a rate. */
void fmt_rate(char *buf, size_t cap, uint64_t count, uint64_t period_ms);

const char *mode_name(int32_t mode);
const char *failure_name(int32_t on_failure);

#endif
