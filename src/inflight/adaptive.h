/* SPDX-License-Identifier: MIT */
/*
 * Adaptive in-flight limits: Gradient2, Vegas and AIMD as Netflix's
 * concurrency-limits defines them, one update per window of samples. Pure:
 * no clock, no atomics, no allocation; the caller serialises updates of one
 * state (inflight/sampler.c closes each window under a try-lock).
 */
#ifndef RL_INFLIGHT_ADAPTIVE_H
#define RL_INFLIGHT_ADAPTIVE_H

#include <stdint.h>

/* One closed window: what the releases in it reported. */
typedef struct rl_adapt_window {
    uint64_t samples;      /* successes with a latency over the floor */
    uint64_t drops;        /* RL_INFLIGHT_DROPPED outcomes */
    uint64_t rtt_sum_ns;   /* the successes' latencies, summed */
    uint32_t max_inflight; /* the most permits a releasing key held */
} rl_adapt_window_t;

typedef struct rl_adapt {
    int32_t algo; /* RL_INFLIGHT_GRADIENT2, _VEGAS or _AIMD */
    uint32_t min, max;
    double limit;
    /* Gradient2: the long RTT, an exponential average over 600 windows
     * after a plain mean of the first 10. */
    double long_rtt;
    uint32_t long_n;
    /* Vegas: the no-load RTT, and when to measure it again. */
    double rtt_noload;
    uint64_t probe_count;
    double probe_jitter;
    uint64_t rng; /* xorshift64: the probe jitter, seeded by the caller */
} rl_adapt_t;

/* The published defaults (ratelimit.h, in-flight limits). */
#define RL_G2_QUEUE 4.0
#define RL_G2_SMOOTHING 0.2
#define RL_G2_TOLERANCE 1.5
#define RL_G2_LONG_WINDOW 600u
#define RL_G2_WARMUP 10u
#define RL_VEGAS_PROBE 30u
#define RL_AIMD_BACKOFF 0.9
#define RL_AIMD_TIMEOUT_NS 5000000000.0
#define RL_ADAPT_INITIAL 20u

/* A fresh state: the limit starts at RL_ADAPT_INITIAL within [min, max]. */
void rl__adapt_init(rl_adapt_t *a, int32_t algo, uint32_t min, uint32_t max, uint64_t seed);

/* Move the limit by one closed window (one with no sample and no drop
 * changes nothing); returns the new limit, a whole number in [min, max]. */
uint32_t rl__adapt_update(rl_adapt_t *a, const rl_adapt_window_t *w);

#endif
