/* SPDX-License-Identifier: MIT */
#include "local/bucket.h"
#include "base/errors.h"

int rl__gcra_from_rate(rl_gcra_t *g, const rl_rate_t *rate, uint64_t burst,
                       const char *field, char *err, size_t errlen)
{
    if (rate->count == 0 || rate->period_ms == 0)
        return rl__errf(err, errlen, RL_ERANGE, "%s: count and period must be positive", field);
    if (rate->period_ms > RL_PERIOD_MS_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "%s: period longer than 30 days", field);
    /* period_ms <= 2.6e9, so period in fixed point < 2^56: no overflow. */
    uint64_t period_fp = rate->period_ms * RL_FP_PER_MS;
    if (rate->count > period_fp / RL_T_FP_MIN)
        return rl__errf(err, errlen, RL_ERANGE, "%s: faster than 100000000/s", field);
    uint64_t t_fp = period_fp / rate->count + (period_fp % rate->count != 0);
    if (t_fp > RL_T_FP_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "%s: slower than 1 per 30 days", field);
    if (burst == 0)
        burst = rate->count;
    if (burst > RL_BURST_MAX)
        return rl__errf(err, errlen, RL_ERANGE, "burst: larger than 1000000000");
    /* On the exact interval period/count, not the rounded-up t_fp: a burst
     * that refills in exactly 4 years is accepted (97/d, burst 141717). */
    if ((unsigned __int128)burst * period_fp > (unsigned __int128)RL_TAU_FP_MAX * rate->count)
        return rl__errf(err, errlen, RL_ERANGE,
                        "burst: refilling it at %s would take more than 4 years", field);
    g->t_fp = t_fp;
    g->tau_fp = burst * t_fp;
    g->burst = burst;
    return 0;
}
