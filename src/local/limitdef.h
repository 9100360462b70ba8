/* SPDX-License-Identifier: MIT */
/*
 * A limit's definition (rl_limit_t): validation and the parameters the hot
 * path derives from it. Pure: shared by rl_limit_parse and rl_limit_add.
 */
#ifndef RL_LIMITDEF_H
#define RL_LIMITDEF_H

#include <stddef.h>
#include "ratelimit.h"
#include "local/bucket.h"

/* Non-zero if name is 1..RL_NAME_MAX-1 bytes of [A-Za-z0-9_.:-] and NUL-terminated. */
int rl__name_valid(const char *name, size_t cap);

/*
 * Check every field of a limit (size already checked). Returns 0 or the
 * error code (RL_ENAME, RL_EMODE, RL_ERANGE), with a message naming the
 * field in err.
 */
int rl__limit_validate(const rl_limit_t *lim, char *err, size_t errlen);

/* on_failure RL_FAIL_DEFAULT made the mode's default (ratelimit.h). */
void rl__limit_resolve(rl_limit_t *lim);

/* The normal and degraded bucket parameters of a valid limit. */
typedef struct rl_limit_derived {
    rl_gcra_t normal;
    rl_gcra_t degraded; /* degraded_rate, or rate / expected_nodes */
    rl_gcra_t presync;  /* rate / expected_nodes, burst likewise (>= 1) */
} rl_limit_derived_t;

int rl__limit_derive(rl_limit_derived_t *d, const rl_limit_t *lim, uint32_t expected_nodes);

/* 1/n of a bucket's rate, its burst split likewise (at least one token). */
void rl__gcra_divide(rl_gcra_t *out, const rl_gcra_t *g, uint64_t n);

#endif
