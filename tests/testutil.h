/* SPDX-License-Identifier: MIT */
/* Shared helpers for the Check suites. */
#ifndef RL_TESTUTIL_H
#define RL_TESTUTIL_H

#include <check.h>
#include <pthread.h>
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

/* zipf(1.0) over n ranks: its CDF, for rl_test_zipf_draw (free() it). */
double *rl_test_zipf_cdf(int n);

/* A rank in [0, n), drawn from a CDF of rl_test_zipf_cdf by binary search. */
int rl_test_zipf_draw(const double *cdf, int n, uint64_t *seed);

/* Run one suite with the runner's defaults; returns the process exit code. */
int rl_test_run(Suite *s);

/* How long a test waits for an event before it fails: generous, because a
 * noisy 2-core box under `ctest -j2`, or valgrind's slowdown, delays events
 * by seconds. A test never sleeps a fixed time and then asserts: it waits
 * for the event it asserts, up to this deadline. */
#define RL_TEST_WAIT_MS 30000

/* CLOCK_MONOTONIC in ns. */
uint64_t rl_test_now_ns(void);

/* Sleep ms milliseconds (load generation and pacing only: a test waits for
 * events with rl_test_wait_until / WAIT_FOR, never a fixed time). */
void rl_test_sleep_ms(unsigned ms);

/* A short pause between two polls: 1 ms at first (attempt 0), doubling to
 * 20 ms, so a quick event is seen quickly and a slow one costs few polls. */
void rl_test_poll_pause(unsigned attempt);

/* Poll pred(ctx) until it returns non-zero or timeout_ms have passed on the
 * monotonic clock; returns its last result. The last call is made after the
 * deadline, so a descheduled caller never times out on an event that came. */
int rl_test_wait_until(int (*pred)(void *ctx), void *ctx, unsigned timeout_ms);

/* Wait up to RL_TEST_WAIT_MS for `cond` (an expression, evaluated again on
 * each poll) to hold; fail the test with its text if it never does. */
#define WAIT_FOR(cond)                                                                     \
    do {                                                                                   \
        uint64_t wait_deadline_ = rl_test_now_ns() + (uint64_t)RL_TEST_WAIT_MS * 1000000u; \
        for (unsigned wait_try_ = 0;; wait_try_++) {                                       \
            int wait_late_ = rl_test_now_ns() > wait_deadline_;                            \
            if (cond)                                                                      \
                break;                                                                     \
            if (wait_late_)                                                                \
                ck_abort_msg("no %s after %d ms", #cond, RL_TEST_WAIT_MS);                 \
            rl_test_poll_pause(wait_try_);                                                 \
        }                                                                                  \
    } while (0)

/* What a test holds (instances, connections, running threads), released by
 * rl_test_release_all, the checked teardown of the cases that use it, even
 * when an assertion aborts the test. Under valgrind (CK_FORK=no: every test
 * runs in the runner's process) a failed test would otherwise leak all it
 * held and leave its threads running into the next test, burying the one
 * real failure under leak reports. Released last-held first, so a thread
 * held after the instance it drives is stopped before that is closed.
 * rl_test_hold returns p; up to 32 at once. */
void *rl_test_hold(void *p, void (*release)(void *));
/* Release p now (it was held), e.g. an rl_close whose effect is asserted. */
void rl_test_release(void *p);
void rl_test_release_all(void);
/* rl_close as a release function. */
void rl_test_close_fn(void *rl);

/* A thread that calls step(ctx), then sleeps pause_ms, until it is stopped:
 * the load a test keeps running while it waits for what it asserts. Held
 * (rl_test_hold) by rl_test_driver_start, so held after the instance it
 * drives it is stopped and joined before that is closed, even when an
 * assertion aborts the test. `d` must outlive the hold (static, or the
 * test's own frame when the test releases it). */
typedef struct rl_test_driver {
    void (*step)(void *ctx);
    void *ctx;
    unsigned pause_ms;
    _Atomic int stop; /* set by the stopping thread, polled by the driver */
    pthread_t th;
} rl_test_driver_t;

void rl_test_driver_start(rl_test_driver_t *d, void (*step)(void *ctx), void *ctx,
                          unsigned pause_ms);
/* Stop and join it (rl_test_release(d) does the same and drops the hold). */
void rl_test_driver_stop(void *d);

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
 * test after RL_TEST_WAIT_MS). */
rl_t *rl_test_open_degraded(uint32_t interval_ms);

/* rl_stats(rl).health; fails the test if rl_stats fails. */
int rl_test_health(rl_t *rl);

/* Add a limit from a spec string; fails the test on error. */
int rl_test_add(rl_t *rl, const char *spec);

#endif
