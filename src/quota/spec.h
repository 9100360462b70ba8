/* SPDX-License-Identifier: MIT */
/* A quota's definition: validation (rl_quota_add) and its parse
 * (quota/spec.c). Pure. */
#ifndef RL_QUOTA_SPEC_H
#define RL_QUOTA_SPEC_H

#include <stddef.h>
#include "ratelimit.h"

#define RL_QUOTA_DEDUP_MIN_MS UINT64_C(1000)
#define RL_QUOTA_DEDUP_MAX_MS (UINT64_C(31) * 86400000)
#define RL_QUOTA_DEDUP_DEFAULT_MS UINT64_C(86400000)
#define RL_QUOTA_FIXED_MIN_MS UINT64_C(1000)
#define RL_QUOTA_FIXED_MAX_MS (UINT64_C(400) * 86400000)

/* The oldest rl_quota_t / rl_quota_result_t layouts (the first ones). */
#define RL_QUOTA_SIZE_MIN sizeof(rl_quota_t)
#define RL_QUOTA_RESULT_SIZE_MIN sizeof(rl_quota_result_t)

/* 0, or the code of the first field outside its range (rl_quota_t's
 * comment), with a message naming it. */
int rl__quota_validate(const rl_quota_t *q, char *err, size_t errlen);

/* The period's name for messages and the CLI: "hour" ... "fixed". */
const char *rl__quota_period_name(int32_t period);

#endif
