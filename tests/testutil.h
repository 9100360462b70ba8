/* SPDX-License-Identifier: MIT */
/* Shared helpers for the Check suites. */
#ifndef RL_TESTUTIL_H
#define RL_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include "ratelimit.h"

/* A check for hot loops: Check's ck_assert_* records every passing
 * assertion through a write(2) to its runner (one system call each), which
 * would dominate loops of millions of iterations; this reports only
 * failures, with the same message. */
#define REQUIRE(cond, ...)             \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* splitmix64: tiny, fast, and good enough to draw test inputs. */
static inline uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Run one suite with the runner's defaults; returns the process exit code. */
int rl_test_run(Suite *s);

/* A manual clock for tests: `precise_ns` is what RL_CLOCK_PRECISE returns;
 * RL_CLOCK_COARSE returns it floored to `coarse_tick_ns` (when non-zero). */
typedef struct rl_test_clock {
    _Atomic uint64_t precise_ns;
    uint64_t coarse_tick_ns;
} rl_test_clock_t;

uint64_t rl_test_clock_fn(void *ud, int32_t source);
void rl_test_clock_advance(rl_test_clock_t *c, uint64_t ns);

/* Open an instance using the test clock (NULL: real clocks). */
rl_t *rl_test_open(rl_test_clock_t *clk, uint32_t max_keys);

/* Open an instance whose Redis is unreachable (nothing listens on port 1),
 * syncing every interval_ms, and wait until it is degraded (it fails the
 * test after 5 s). */
rl_t *rl_test_open_degraded(uint32_t interval_ms);

/* Add a limit from a spec string; fails the test on error. */
int rl_test_add(rl_t *rl, const char *spec);

#endif
