/* SPDX-License-Identifier: MIT */
/*
 * Instance time: monotonic, in bucket fixed point (1/16 ns), starting at one
 * second when the instance opens and saturating at RL_NOW_FP_MAX.
 *
 * Two sources, chosen per limit (see rl__clock_pick): the precise vDSO
 * CLOCK_MONOTONIC and CLOCK_MONOTONIC_COARSE (several times cheaper, one
 * tick every few ms). A coarse tick caps a bucket at one burst per tick, and a
 * token noticed a tick late is lost when the bucket has no room to bank it
 * (burst 1: admission restarts the schedule from "now"). So coarse is used
 * only where a tick's worth of tokens fits in the burst minus one token
 * (tick <= tau - T, i.e. rate x tick <= burst - 1): then an overloaded
 * bucket admits exactly the configured rate.
 *
 * Either source may go backwards: a user hook can, and so can the built-in
 * clocks of a process run under a time faker (libfaketime) or a VM
 * restored from a snapshot. The instance absorbs a backward step into a
 * per-source offset so time neither runs back (no tokens are created) nor
 * freezes (no deny storm for the length of the jump). Backward steps smaller
 * than RL_CLOCK_LAST_GRAIN_NS may pass through: `last` is only advanced at
 * that grain so the hot path does not write a shared line on every call.
 * A forward jump passes: it can fill a bucket to its burst, never beyond.
 *
 * Coarse-first: a check of a precise-sourced limit may read the
 * coarse source first and settle a deny there without the precise read, if
 * it would be denied even at coarse + margin (rl__clock_coarse_margin). A
 * later time only makes a GCRA charge more admissible, so with the precise
 * reading no more than the margin ahead, such a deny is a deny at the
 * precise time too; and a deny writes nothing. Every other outcome reads the
 * precise source and is decided on it alone. The margin is two ticks:
 * the coarse source lags by less than one when both offsets are zero (same
 * origin, local/clock.c), and a second covers a late tick, the same slack the
 * table's reuse floor assumes (instance.c). A precise offset raised for a
 * backward step can put the precise source further ahead for good, so it
 * turns coarse-first off (a raised coarse offset only moves coarse ahead,
 * which is safe). Only for a charge of at least two margins (cost x T):
 * a saturated bucket's denies wait uniformly up to one charge, so a deny
 * is certain with probability 1 - margin / (cost x T), at least 1/2 there,
 * and each uncertain one, like every allow, pays the coarse read on top of
 * the precise one. With the precise source picked only
 * where (burst - 1) x T < tick, that means burst-1 limits of T >= 4 ticks
 * (62/s and slower at a 4 ms tick). On only for the built-in clocks: a
 * user hook's coarse source promises nothing about its lag, so a hooked
 * instance reads the precise source only (tests turn it on:
 * rl__clock_coarse_first).
 */
#ifndef RL_CLOCK_H
#define RL_CLOCK_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include "ratelimit.h"
#include "local/bucket.h"

#define RL_CLOCK_LAST_GRAIN_NS UINT64_C(1000000)
#define RL_CLOCK_ORIGIN_NS UINT64_C(1000000000)
/* Instance time at rl__clock_init's readings: what rl_open's other parts
 * take for "now" (the hook is called once per source while it opens). */
#define RL_CLOCK_ORIGIN_FP (RL_CLOCK_ORIGIN_NS << RL_FP_SHIFT)
/* Instance time saturates here (RL_NOW_FP_MAX): 2^58 ns, about 9.1 years
 * after rl_open. From then on no bucket refills; the guard's slow path,
 * which runs at least once a grain while time advances, notices and says
 * so (rl__clock_past_horizon), so a deny costs a check nothing before. */
#define RL_CLOCK_HORIZON_NS (RL_NOW_FP_MAX >> RL_FP_SHIFT)
_Static_assert(RL_CLOCK_HORIZON_NS == UINT64_C(1) << 58, "rl__clock_now_fp's horizon test");

typedef struct rl_clock {
    rl_clock_fn user; /* NULL: built-in clocks */
    void *user_ud;
    uint64_t base_ns[2];      /* raw reading that maps to RL_CLOCK_ORIGIN_NS */
    uint64_t coarse_tick_ns;
    /* RL_CLOCK_HORIZON_NS reached: 0 not yet, 1 reached, 2 reached and
     * told (rl__clock_horizon_told). Written once, by a guard. */
    _Atomic uint32_t horizon;
    /* Backward-jump absorption, one line per source so precise and coarse
     * readers do not share a written line. Written about once per grain. */
    struct {
        _Atomic uint64_t offset_ns;
        _Atomic uint64_t last_ns; /* <= 2^63: sums with it cannot overflow */
        /* guard[COARSE] only: the coarse-first margin in fixed point, 0
         * off. On the coarse line, which a coarse-first check loads anyway. */
        _Atomic uint64_t margin_fp;
        char pad[64 - 3 * sizeof(uint64_t)];
    } guard[2] __attribute__((aligned(64)));
} rl_clock_t;

void rl__clock_init(rl_clock_t *c, rl_clock_fn user, void *ud, uint64_t coarse_tick_ns);

/* Which source a bucket may use, from its slack tau - T. */
int32_t rl__clock_pick(const rl_clock_t *c, uint64_t slack_fp);

/* Turn coarse-first on (margin two ticks) or off. rl__clock_init turns it
 * on for the built-in clocks; tests call it to model two sources through
 * the hook. Not thread-safe against checks only in that a check racing it
 * may use either setting. */
void rl__clock_coarse_first(rl_clock_t *c, int on);

/* The coarse-first margin (fixed point), 0 when off. */
static inline uint64_t rl__clock_coarse_margin(rl_clock_t *c)
{
    /* relaxed: a self-contained value; a check that reads a stale one is
     * concurrent with the backward step that cleared it. */
    return atomic_load_explicit(&c->guard[RL_CLOCK_COARSE].margin_fp, memory_order_relaxed);
}

/* 1 once instance time has saturated (a bucket drained since never
 * refills). Read on the deny path only. */
static inline int rl__clock_past_horizon(rl_clock_t *c)
{
    /* relaxed: a self-contained flag, set once. */
    return atomic_load_explicit(&c->horizon, memory_order_relaxed) != 0;
}

/* 1 for the one caller that gets to report the horizon (then it is told). */
static inline int rl__clock_horizon_told(rl_clock_t *c)
{
    uint32_t want = 1;
    /* relaxed: as above; only who logs is decided here. */
    return atomic_compare_exchange_strong_explicit(&c->horizon, &want, 2, memory_order_relaxed,
                                                   memory_order_relaxed);
}

/* The guard's slow path: a backward step, a reading before the origin, or
 * `last` due to advance. `off` and `last` were loaded before `raw` was read. */
uint64_t rl__clock_guard(rl_clock_t *c, int s, uint64_t raw, uint64_t off, uint64_t last);

static inline uint64_t rl__clock_to_fp(uint64_t rel_ns)
{
    return rel_ns >= (RL_NOW_FP_MAX >> RL_FP_SHIFT) ? RL_NOW_FP_MAX : rel_ns << RL_FP_SHIFT;
}

/* A raw reading of `source`: the user hook's, or the vDSO clock's. */
static inline uint64_t rl__clock_raw(const rl_clock_t *c, int32_t source)
{
    if (__builtin_expect(c->user != NULL, 0))
        return c->user(c->user_ud, source);
    struct timespec ts;
    clock_gettime(source == RL_CLOCK_COARSE ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Instance time in fixed point from `source`. Hot path: one clock read, two
 * loads of a line that is written once per grain, two compares. */
static inline uint64_t rl__clock_now_fp(rl_clock_t *c, int32_t source)
{
    int s = source == RL_CLOCK_COARSE;
    /* acquire, and BEFORE the clock read: a reading taken before a backward
     * jump must not be lifted by the offset another thread raised for that
     * jump (it would move time forward by the jump and refill every
     * bucket), nor compared with a `last` newer than itself (a false jump).
     * The clock read cannot move above these loads. */
    uint64_t off = atomic_load_explicit(&c->guard[s].offset_ns, memory_order_acquire);
    uint64_t last = atomic_load_explicit(&c->guard[s].last_ns, memory_order_acquire);
    uint64_t raw = rl__clock_raw(c, source);
    uint64_t d = raw - c->base_ns[s];
    /* d < 2^62 and off <= 2^63: the sum cannot wrap. Anything else, a
     * reading outside [last - grain, last + grain) (one unsigned compare:
     * below the window the difference wraps above it), and time past the
     * horizon (2^58 ns: the fixed point saturates there) take the slow
     * path. d <= now unless the sum wrapped, so (d | now) < 2^58 says
     * both d < 2^62 and now < 2^58. */
    uint64_t now = d + off;
    if (__builtin_expect(((d | now) >> 58) != 0 ||
                             now - last + RL_CLOCK_LAST_GRAIN_NS >= 2 * RL_CLOCK_LAST_GRAIN_NS,
                         0))
        return rl__clock_to_fp(rl__clock_guard(c, s, raw, off, last));
    return now << RL_FP_SHIFT;
}

#endif
