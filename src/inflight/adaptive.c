/* SPDX-License-Identifier: MIT */
/*
 * Gradient2, Vegas and AIMD, each as concurrency-limits' _update
 * (Gradient2Limit, VegasLimit, AIMDLimit) with its builder's defaults, fed
 * one window at a time as its WindowedLimit feeds them. One departure, on
 * purpose: a window of drops only counts as a window. WindowedLimit counts
 * no dropped sample towards a window, so a service whose every request
 * fails never closes one and its limit freezes where it was; here such a
 * window closes, and each algorithm reads it as overload (Gradient2, which
 * reads no drops, takes its lowest gradient, 0.5). A service whose latency
 * rises slowly past its knee and never drops is one Gradient2 does not
 * find: its long RTT follows the short one up as the limit grows, the
 * gradient stays at 1 and the limit climbs to its ceiling (a latency
 * linear in the load past a knee of 100 took it to 200, its max, in the
 * simulation of tests/test_inflight_adaptive.c; Vegas settled at 106).
 */
#include "ratelimit.h"
#include "inflight/adaptive.h"

void rl__adapt_init(rl_adapt_t *a, int32_t algo, uint32_t min, uint32_t max, uint64_t seed)
{
    *a = (rl_adapt_t){.algo = algo, .min = min, .max = max};
    double l = RL_ADAPT_INITIAL;
    a->limit = l < min ? min : l > max ? max : l;
    a->rng = seed != 0 ? seed : UINT64_C(0x9e3779b97f4a7c15);
    a->probe_jitter = 1.0;
}

static double clamp(const rl_adapt_t *a, double l)
{
    return l < a->min ? a->min : l > a->max ? a->max : l;
}

/* Uniform in [0.5, 1): Vegas' probe jitter, so that nodes started together
 * do not all measure their no-load RTT in the same window. */
static double adapt_jitter(rl_adapt_t *a)
{
    uint64_t x = a->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    a->rng = x;
    return 0.5 + (double)(x >> 11) * (0.5 / 9007199254740992.0);
}

/* Limits are positive and at most RL_INFLIGHT_MAX, so whole parts fit a
 * uint64 and no libm is needed (the library links none). */
static double floor_pos(double x) { return (double)(uint64_t)x; }

static double ceil_pos(double x)
{
    double f = floor_pos(x);
    return f < x ? f + 1 : f;
}

/* Vegas' log10 root: the whole part of log10(limit), at least 1. */
static double log10_root(double limit)
{
    double l = 0;
    for (double p = 10; p <= limit; p *= 10)
        l++;
    return l < 1.0 ? 1.0 : l;
}

static double gradient2(rl_adapt_t *a, double rtt, const rl_adapt_window_t *w)
{
    double l = a->limit;
    if (rtt <= 0.0) /* drops only: the lowest gradient, 0.5 */
        return clamp(a, l * (1 - RL_G2_SMOOTHING) + (l * 0.5 + RL_G2_QUEUE) * RL_G2_SMOOTHING);
    if (a->long_n < RL_G2_WARMUP) {
        a->long_n++;
        a->long_rtt += (rtt - a->long_rtt) / a->long_n;
    } else {
        double f = 2.0 / (RL_G2_LONG_WINDOW + 1.0);
        a->long_rtt = a->long_rtt * (1 - f) + rtt * f;
    }
    /* A long RTT far above the short one (after a spike): let it decay
     * faster so the limit can recover. */
    if (a->long_rtt / rtt > 2.0)
        a->long_rtt *= 0.95;
    if ((double)w->max_inflight < l / 2) /* application-limited: no evidence */
        return l;
    double g = RL_G2_TOLERANCE * a->long_rtt / rtt;
    g = g < 0.5 ? 0.5 : g > 1.0 ? 1.0 : g;
    double next = l * g + RL_G2_QUEUE;
    return clamp(a, l * (1 - RL_G2_SMOOTHING) + next * RL_G2_SMOOTHING);
}

static double vegas(rl_adapt_t *a, double rtt, const rl_adapt_window_t *w)
{
    double l = a->limit;
    double lg = log10_root(l);
    if (w->drops > 0)
        return clamp(a, l - lg);
    if (a->rtt_noload == 0.0 || rtt < a->rtt_noload) {
        a->rtt_noload = rtt;
        return l;
    }
    a->probe_count++;
    if (a->probe_jitter * RL_VEGAS_PROBE * l <= (double)a->probe_count) {
        a->probe_jitter = adapt_jitter(a);
        a->probe_count = 0;
        a->rtt_noload = rtt;
        return l;
    }
    if ((double)w->max_inflight * 2 < l)
        return l;
    double queue = ceil_pos(l * (1 - a->rtt_noload / rtt));
    if (queue <= lg)
        return clamp(a, l + 6 * lg); /* beta: far from queueing */
    if (queue < 3 * lg)
        return clamp(a, l + lg);
    if (queue > 6 * lg)
        return clamp(a, l - lg);
    return l;
}

static double aimd(rl_adapt_t *a, double rtt, const rl_adapt_window_t *w)
{
    double l = a->limit;
    if (w->drops > 0 || rtt > RL_AIMD_TIMEOUT_NS)
        return clamp(a, floor_pos(l * RL_AIMD_BACKOFF));
    if ((double)w->max_inflight * 2 >= l)
        return clamp(a, l + 1);
    return l;
}

uint32_t rl__adapt_update(rl_adapt_t *a, const rl_adapt_window_t *w)
{
    if (w->samples == 0 && w->drops == 0)
        return (uint32_t)floor_pos(a->limit);
    double rtt = w->samples > 0 ? (double)w->rtt_sum_ns / (double)w->samples : 0.0;
    if (a->algo == RL_INFLIGHT_VEGAS)
        a->limit = rtt > 0.0 || w->drops > 0 ? vegas(a, rtt, w) : a->limit;
    else if (a->algo == RL_INFLIGHT_AIMD)
        a->limit = aimd(a, rtt, w);
    else
        a->limit = gradient2(a, rtt, w);
    return (uint32_t)floor_pos(a->limit);
}
