/* SPDX-License-Identifier: MIT */
/*
 * A quota's period: where the one holding a moment starts and ends, on UTC
 * calendar boundaries (hour, day, ISO week, month) or on multiples of a
 * fixed length since the Unix epoch. Pure. src/lua/quota.lua mirrors it line
 * for line (Redis decides the period of a charge by its own TIME); the unit
 * tests hold the C and the Lua to the same boundaries.
 */
#ifndef RL_QUOTA_PERIOD_H
#define RL_QUOTA_PERIOD_H

#include <stdint.h>

/* Days since 1970-01-01 of a proleptic Gregorian date (y >= 1970, m 1..12). */
int64_t rl__days_from_civil(int64_t y, unsigned m, unsigned d);

/* The date of a day number >= 0. */
void rl__civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d);

/* The period (RL_PERIOD_*, period_ms for RL_PERIOD_FIXED) holding now_ms
 * (Unix ms): [*start, *end). */
void rl__quota_period(int32_t kind, uint64_t period_ms, uint64_t now_ms, uint64_t *start,
                      uint64_t *end);

#endif
