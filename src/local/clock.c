/* SPDX-License-Identifier: MIT */
#include "local/clock.h"

static uint64_t builtin_coarse_tick(void)
{
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0)
        return 0; /* unknown tick: never pick coarse */
    return (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
}

/* Coarse-first's margin from the coarse source's tick (local/clock.h); 0: off. */
static void set_margin(rl_clock_t *c, uint64_t tick_ns)
{
    /* Off with an unknown tick, or one whose margin would not fit: such a
     * coarse source could not bound the precise one. */
    uint64_t m = tick_ns != 0 && tick_ns <= (RL_NOW_FP_MAX >> (RL_FP_SHIFT + 1))
                     ? (2 * tick_ns) << RL_FP_SHIFT
                     : 0;
    /* relaxed: as in rl__clock_coarse_margin. */
    atomic_store_explicit(&c->guard[RL_CLOCK_COARSE].margin_fp, m, memory_order_relaxed);
}

void rl__clock_init(rl_clock_t *c, rl_clock_fn user, void *ud, uint64_t coarse_tick_ns)
{
    c->user = user;
    c->user_ud = ud;
    /* Both sources map the precise opening reading to the same origin, so a
     * coarse reading is never more than one tick behind a precise one.
     * Modular: a raw reading below the origin wraps base, and differences
     * from it are still right. */
    uint64_t raw = rl__clock_raw(c, RL_CLOCK_PRECISE);
    atomic_init(&c->horizon, 0);
    for (int s = 0; s < 2; s++) {
        c->base_ns[s] = raw - RL_CLOCK_ORIGIN_NS;
        atomic_init(&c->guard[s].offset_ns, 0);
        atomic_init(&c->guard[s].margin_fp, 0);
    }
    atomic_init(&c->guard[RL_CLOCK_PRECISE].last_ns, RL_CLOCK_ORIGIN_NS);
    /* The coarse source starts where it really reads (up to a tick behind
     * the origin), or its first reading would look like a backward step and
     * lift it a tick ahead for good. */
    uint64_t coarse = rl__clock_raw(c, RL_CLOCK_COARSE);
    int64_t behind = (int64_t)(raw - coarse);
    atomic_init(&c->guard[RL_CLOCK_COARSE].last_ns,
                behind <= 0 ? RL_CLOCK_ORIGIN_NS
                : (uint64_t)behind >= RL_CLOCK_ORIGIN_NS ? 0
                                                          : RL_CLOCK_ORIGIN_NS - (uint64_t)behind);
    if (coarse_tick_ns != 0)
        c->coarse_tick_ns = coarse_tick_ns;
    else
        c->coarse_tick_ns = user ? UINT64_C(4000000) : builtin_coarse_tick();
    /* The built-in coarse source's real tick bounds its lag, whatever
     * clock_coarse_tick_ns says: a configured tick below it must not shrink
     * the margin. */
    uint64_t real = user ? 0 : builtin_coarse_tick();
    set_margin(c, real != 0 ? rl__max_u64(real, c->coarse_tick_ns) : 0);
}

void rl__clock_coarse_first(rl_clock_t *c, int on) { set_margin(c, on ? c->coarse_tick_ns : 0); }

int32_t rl__clock_pick(const rl_clock_t *c, uint64_t slack_fp)
{
    if (c->coarse_tick_ns == 0 || c->coarse_tick_ns > (UINT64_MAX >> RL_FP_SHIFT))
        return RL_CLOCK_PRECISE;
    return (c->coarse_tick_ns << RL_FP_SHIFT) <= slack_fp ? RL_CLOCK_COARSE : RL_CLOCK_PRECISE;
}

uint64_t rl__clock_guard(rl_clock_t *c, int s, uint64_t raw, uint64_t off, uint64_t last)
{
    /* Signed distance from the origin, clamped to +-2^62 ns (146 years);
     * before-origin readings are negative and handled like a backward step.
     * 128-bit sums: no overflow whatever the clock returns. */
    const __int128 lim = (__int128)1 << 62;
    __int128 rel = (__int128)(int64_t)(raw - c->base_ns[s]);
    rel = rel > lim ? lim : rel < -lim ? -lim : rel;
    __int128 now = rel + (__int128)off;
    if (now + (__int128)RL_CLOCK_LAST_GRAIN_NS < (__int128)last) {
        /* The clock went backwards: raise the offset so now == last. CAS-max
         * (relaxed: the value is self-contained): concurrent detectors must
         * not add the jump twice. */
        __int128 w = (__int128)last - rel;
        uint64_t want = w > lim * 2 ? (uint64_t)(lim * 2) : (uint64_t)w;
        while (off < want &&
               !atomic_compare_exchange_weak_explicit(&c->guard[s].offset_ns, &off, want,
                                                      memory_order_release, memory_order_relaxed)) {
        }
        /* This reading is `last`, whatever the offset is now: a larger one
         * was raised for a later jump this reading predates (a reader
         * stalled here), and adding it put the reading a whole jump ahead,
         * published as `last` below (test_clock). */
        now = rel + (__int128)want;
        /* The precise source may now lead the coarse one by the jump's
         * rounding and more: coarse-first is off for good (local/clock.h).
         * relaxed: as in rl__clock_coarse_margin. */
        if (s == RL_CLOCK_PRECISE)
            atomic_store_explicit(&c->guard[RL_CLOCK_COARSE].margin_fp, 0, memory_order_relaxed);
    }
    uint64_t unow = now <= 0 ? 0 : now > lim * 2 ? (uint64_t)(lim * 2) : (uint64_t)now;
    /* relaxed: a self-contained flag (local/clock.h), written once. */
    if (unow >= RL_CLOCK_HORIZON_NS && atomic_load_explicit(&c->horizon, memory_order_relaxed) == 0)
        atomic_store_explicit(&c->horizon, 1, memory_order_relaxed);
    /* release: pairs with the acquire loads of the readers. */
    while (unow >= last + RL_CLOCK_LAST_GRAIN_NS &&
           !atomic_compare_exchange_weak_explicit(&c->guard[s].last_ns, &last, unow,
                                                  memory_order_release, memory_order_relaxed)) {
    }
    return unow;
}
