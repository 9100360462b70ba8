/* SPDX-License-Identifier: MIT */
/*
 * Bucket math: GCRA (the virtual-scheduling form of a token bucket) on one
 * 64-bit word. Pure functions, no I/O, no threads, tested directly.
 *
 * Time is instance-relative, in fixed point: 1 unit = 1/16 ns (RL_FP_SHIFT).
 * The bucket state is the theoretical arrival time (TAT): the time at which
 * the bucket would be full again. A bucket is full when TAT <= now. A charge
 * of c tokens moves TAT to max(TAT, now) + c*T and is admitted when the result
 * is at most now + tau, where T = period/count is the emission interval and
 * tau = burst*T the tolerance. One word, exact integer math, no refill step.
 *
 * Why 1/16 ns: T is rounded up to a whole unit, so the effective rate is at
 * most the configured one and below it by less than 1/(16*T_ns) relative
 * (exact whenever 16*period_ns is a multiple of count: 100/s, 1000/m, ...;
 * 3/s is off by 2e-10). A bucket word keeps 63 bits of 1/16 ns (18 years)
 * for its TAT and one for its epoch (below); instance time saturates at 2^62
 * units (9 years of uptime), so a TAT (now plus at most RL_DEBT_FP_MAX of
 * debt) always fits.
 *
 * Epochs: a TAT is a debt in time, so it means something only together with
 * the T it was charged at. A limit's T changes only by rl_limit_update, which
 * bumps the limit's epoch (local/limits.h) and converts every bucket word of the
 * limit to the new T (local/table.h). Each word carries the parity of the epoch
 * its TAT is expressed in (RL_TAT_EPOCH); a check that meets a word of the
 * other parity charges it at the previous epoch's parameters, so publishing
 * new parameters before a word is converted cannot re-value its debt.
 */
#ifndef RL_BUCKET_H
#define RL_BUCKET_H

#include <stdint.h>
#include <stddef.h>
#include "ratelimit.h"

#define RL_FP_SHIFT 4
#define RL_FP_PER_NS ((uint64_t)1 << RL_FP_SHIFT)
#define RL_FP_PER_MS (UINT64_C(1000000) << RL_FP_SHIFT)
#define RL_NS_PER_MS UINT64_C(1000000)

/* Accepted ranges (documented in ratelimit.h at rl_limit_t). */
#define RL_PERIOD_MS_MAX (UINT64_C(30) * 86400 * 1000)      /* 30 days */
#define RL_T_FP_MIN (UINT64_C(10) << RL_FP_SHIFT)           /* 10 ns: 100M/s */
#define RL_T_FP_MAX (RL_PERIOD_MS_MAX * RL_FP_PER_MS)       /* one per 30 days */
#define RL_BURST_MAX UINT64_C(1000000000)
#define RL_TAU_FP_MAX ((UINT64_C(4) * 36525 * 864 * 1000000000) << RL_FP_SHIFT) /* 4 years */
#define RL_NOW_FP_MAX (UINT64_C(1) << 62)
/* The most debt a conversion leaves (about 4.6 years): above any tau. */
#define RL_DEBT_FP_MAX (UINT64_C(1) << 61)

/* A TAT value no live bucket can hold: the slot is being retired. */
#define RL_TAT_DEAD UINT64_MAX
/* The epoch-parity bit of a bucket word; the other 63 bits are the TAT. */
#define RL_TAT_EPOCH (UINT64_C(1) << 63)
#define RL_TAT_MASK (RL_TAT_EPOCH - 1)

/* The epoch bit a word written in `epoch` carries. */
static inline uint64_t rl__epoch_bit(uint64_t epoch) { return (epoch & 1) << 63; }

/* Emission interval and tolerance of one (rate, burst), in fixed point. */
typedef struct rl_gcra {
    uint64_t t_fp;   /* emission interval T, rounded up */
    uint64_t tau_fp; /* burst * T */
    uint64_t burst;
} rl_gcra_t;

/*
 * Compute T and tau for a rate and burst (burst 0 means rate->count).
 * Returns 0 or RL_ERANGE, with a message naming the field into err.
 */
int rl__gcra_from_rate(rl_gcra_t *g, const rl_rate_t *rate, uint64_t burst,
                       const char *field, char *err, size_t errlen);

/* What one charge against a bucket word decides. */
typedef struct rl_verdict {
    uint64_t new_tat;  /* value to CAS in when allowed (== old when denied or peeked) */
    int allowed;
} rl_verdict_t;

static inline uint64_t rl__max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* a * b, saturating: a cost times an interval can pass 2^64 when the cost
 * exceeds what a (local) bucket could ever hold; saturation turns that into
 * "never admitted" / "full refund" instead of a wrapped, arbitrary amount. */
static inline uint64_t rl__mul_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static inline uint64_t rl__add_sat(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Decide a charge of `cost` tokens (cost <= burst) at `now_fp`. */
static inline rl_verdict_t rl__gcra_charge(const rl_gcra_t *g, uint64_t tat,
                                           uint64_t now_fp, uint32_t cost)
{
    rl_verdict_t v;
    uint64_t base = rl__max_u64(tat, now_fp);
    uint64_t next = rl__add_sat(base, rl__mul_sat(cost, g->t_fp));
    v.allowed = next - now_fp <= g->tau_fp;
    v.new_tat = v.allowed ? next : tat;
    return v;
}

/* Give back `cost` tokens: never fuller than full (TAT = now). */
static inline uint64_t rl__gcra_refund(const rl_gcra_t *g, uint64_t tat,
                                       uint64_t now_fp, uint32_t cost)
{
    uint64_t back = rl__mul_sat(cost, g->t_fp);
    if (tat <= now_fp)
        return tat;
    return tat - now_fp > back ? tat - back : now_fp;
}

/* Whole tokens available at now_fp in a bucket whose TAT is tat. */
static inline uint64_t rl__gcra_remaining(const rl_gcra_t *g, uint64_t tat, uint64_t now_fp)
{
    uint64_t used = tat > now_fp ? tat - now_fp : 0;
    return used >= g->tau_fp ? 0 : (g->tau_fp - used) / g->t_fp;
}

/*
 * The TAT that keeps a bucket's tokens when T changes from `from_t` to `to_t`
 * at time u: the debt at u, (tat - u) / from_t tokens, is kept exactly
 * (rounded up to a whole unit, never down), and it is not capped at the new
 * tau: a bucket that owes more than the new burst is empty until it has paid
 * the difference, so lowering and restoring a burst refills nothing. Only a
 * debt beyond RL_DEBT_FP_MAX (years) is cut to it, to stay in range.
 */
static inline uint64_t rl__gcra_convert(uint64_t tat, uint64_t from_t, uint64_t to_t,
                                        uint64_t u)
{
    if (tat <= u || from_t == to_t)
        return tat; /* full at u (nothing owed in any unit), or the same unit */
    unsigned __int128 d = ((unsigned __int128)(tat - u) * to_t + from_t - 1) / from_t;
    return u + (d < RL_DEBT_FP_MAX ? (uint64_t)d : RL_DEBT_FP_MAX);
}

/*
 * A synced key's TAT at a new share (emission interval and tolerance `to`
 * for `from`), at time u. What the bucket owes at u, d = tat - u, is split
 * at from's tolerance: the part within it, the most plain admissions
 * reach, is rescaled by to_t / from_t (rounded down) and capped at to's
 * tolerance: a share move hands the fleet's burst around, and a node that
 * used its old share's burst keeps only the new one's worth of it. The
 * part beyond it (a settle's debt, waiters' turns: charged past the burst,
 * and only when `keep_debt`) is owed in tokens: converted at the new
 * interval (rounded up) and never capped, so a share move can neither pay
 * a debt nor hand out a turn twice. Without keep_debt (a key no debt or
 * wait has taken past its burst) all of d is the first part: the result
 * is that of the rescale before debts were kept, bit for bit. Only a debt
 * beyond RL_DEBT_FP_MAX (years) is cut to it.
 */
static inline uint64_t rl__gcra_rescale(uint64_t tat, const rl_gcra_t *from, const rl_gcra_t *to,
                                        uint64_t u, int keep_debt)
{
    if (tat <= u)
        return tat; /* full: nothing owed either way */
    uint64_t d = tat - u;
    uint64_t beyond = keep_debt && d > from->tau_fp ? d - from->tau_fp : 0;
    unsigned __int128 in = (unsigned __int128)(d - beyond) * to->t_fp / from->t_fp;
    uint64_t owed = in < to->tau_fp ? (uint64_t)in : to->tau_fp;
    if (beyond != 0) {
        unsigned __int128 x =
            ((unsigned __int128)beyond * to->t_fp + from->t_fp - 1) / from->t_fp;
        uint64_t room = RL_DEBT_FP_MAX - (owed < RL_DEBT_FP_MAX ? owed : RL_DEBT_FP_MAX);
        owed += x < room ? (uint64_t)x : room;
    }
    return u + owed;
}

/* Milliseconds, rounded up, until the bucket whose TAT is tat is full. */
static inline uint64_t rl__gcra_reset_ms(uint64_t tat, uint64_t now_fp)
{
    uint64_t d = tat > now_fp ? tat - now_fp : 0;
    return (d + RL_FP_PER_MS - 1) / RL_FP_PER_MS;
}

/* Milliseconds, rounded up, until a charge of `cost` would be admitted. */
static inline uint64_t rl__gcra_retry_ms(const rl_gcra_t *g, uint64_t tat,
                                         uint64_t now_fp, uint32_t cost)
{
    uint64_t base = rl__max_u64(tat, now_fp);
    uint64_t next = rl__add_sat(base, rl__mul_sat(cost, g->t_fp));
    uint64_t when = next - g->tau_fp; /* admitted once now >= when */
    return when > now_fp ? (when - now_fp + RL_FP_PER_MS - 1) / RL_FP_PER_MS : 0;
}

#endif
