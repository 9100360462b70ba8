/* SPDX-License-Identifier: MIT */
/* Internals of rl_metrics_text (src/metrics.c), exposed for the unit tests. */
#ifndef RL_METRICS_H
#define RL_METRICS_H

#include <stddef.h>

/*
 * Escape a label value for the Prometheus text format 0.0.4: backslash,
 * double quote and line feed become \\, \" and \n; every other byte is
 * copied as is (the format's label values are UTF-8, which passes through).
 * Reads exactly n bytes of src (NUL bytes included).
 * snprintf-style: returns the escaped length (excluding the NUL); writes at
 * most cap bytes, NUL-terminated when cap > 0; dst may be NULL when cap is 0.
 * Pure, thread-safe.
 */
size_t rl__prom_escape(const char *src, size_t n, char *dst, size_t cap);

#endif
