/* SPDX-License-Identifier: MIT */
/*
 * Offered load: how many requests a node sends for one key in each
 * millisecond. Deterministic for a seed, so a virtual run is repeatable.
 *
 * Two models:
 *  - poisson (default): arrivals are a Poisson process, so each ms draws a
 *    Poisson count with the ms's mean. Real traffic is bursty at the ms
 *    scale; this is the simplest such model.
 *  - even: the mean is spread as evenly as integers allow (a carried
 *    fraction), the best case for a limiter: no arrival bursts at all.
 */
#include <math.h>
#include "acc.h"

/* splitmix64's finaliser: a bijective 64-bit mix, used both as the PRNG
 * step and to derive independent seeds per (node, key). */
uint64_t acc_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static uint64_t next_u64(acc_gen_t *g)
{
    g->state += UINT64_C(0x9e3779b97f4a7c15);
    return acc_mix64(g->state);
}

/* Uniform in (0, 1): never 0, so a product of draws never collapses. */
static double next_unit(acc_gen_t *g)
{
    return ((double)(next_u64(g) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

void acc_gen_init(acc_gen_t *g, acc_load_t kind, uint64_t seed, double phase)
{
    g->state = acc_mix64(seed);
    g->kind = kind;
    /* A per-generator phase so even sources do not all fire in the same ms. */
    g->carry = phase - floor(phase);
}

/* Knuth's product method: exact, and cheap for the small means used here.
 * Larger means are split into parts (a sum of Poissons is Poisson), which
 * keeps exp(-mean) far from underflow. */
static uint32_t poisson_small(acc_gen_t *g, double mean)
{
    double limit = exp(-mean), p = next_unit(g);
    uint32_t k = 0;
    while (p > limit) {
        k++;
        p *= next_unit(g);
    }
    return k;
}

static uint32_t poisson(acc_gen_t *g, double mean)
{
    if (mean <= 0.0)
        return 0;
    unsigned parts = (unsigned)ceil(mean / 30.0);
    uint32_t k = 0;
    for (unsigned i = 0; i < parts; i++)
        k += poisson_small(g, mean / parts);
    return k;
}

uint32_t acc_gen_next(acc_gen_t *g, double per_ms)
{
    if (g->kind == ACC_LOAD_POISSON)
        return poisson(g, per_ms);
    if (per_ms <= 0.0)
        return 0;
    g->carry += per_ms;
    double whole = floor(g->carry);
    g->carry -= whole;
    return (uint32_t)whole;
}
