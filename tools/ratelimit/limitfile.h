/* SPDX-License-Identifier: MIT */
/*
 * Limit spec files: one rl_limit_parse spec per line; blank lines and '#'
 * comments (whole-line or trailing) are skipped. Read by `check`, and by
 * `inspect --limits` to learn a limit's rate.
 */
#ifndef RL_CLI_LIMITFILE_H
#define RL_CLI_LIMITFILE_H

#include <stddef.h>
#include <stdint.h>
#include "ratelimit.h"

/* Files larger than this are refused (a spec file is a config file). */
#define LIMITFILE_MAX_BYTES (16u << 20)

typedef struct limitfile_entry {
    unsigned line;
    int rc;            /* 0, or the RL_E* code of the first problem */
    char msg[320];     /* what was wrong, when rc != 0 */
    rl_limit_t lim;    /* when rc == 0 */
} limitfile_entry_t;

typedef struct limitfile {
    limitfile_entry_t *e;
    size_t n, cap;
    size_t errors;
} limitfile_t;

/*
 * Parse every spec of text[0, len) and add each to a local-only instance, as
 * an application would, so duplicate names and whatever else rl_limit_add
 * refuses are found too. Returns 0 (look at lf->errors), or an RL_E* code
 * if the check itself could not run (out of memory).
 */
int limitfile_check(const char *text, size_t len, limitfile_t *lf);
void limitfile_free(limitfile_t *lf);

/* "100/s", "5/10s", "1/1500ms": the shortest exact form of a rate. */
void fmt_rate(char *buf, size_t cap, uint64_t count, uint64_t period_ms);

const char *mode_name(int32_t mode);
const char *failure_name(int32_t on_failure);

#endif
