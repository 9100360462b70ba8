/* SPDX-License-Identifier: MIT */
/*
 * Reconnect backoff: capped exponential, jittered. While base x 2^n is below
 * the cap, attempt n waits a uniformly random time in [0, base x 2^n] (full
 * jitter). The first attempt at the cap waits U(0, cap), which makes each
 * node's phase uniform modulo the cap; after that every attempt waits the
 * cap exactly, keeping that phase.
 *
 * Why not full jitter at the cap too: retrying on U(0, cap) is a renewal
 * process, and when Redis comes back the first attempts are its residual
 * times, whose density (1 - r/cap) / (cap/2) crowds the start: with an
 * 800 ms cap about 23% of the nodes land in the first 100 ms, and in 92% of
 * seeded 50-node storms some 100 ms window held more than a quarter. A
 * constant period with random phases spreads them uniformly over the cap
 * (test_backoff.c). Pure (the caller owns the PRNG state).
 */
#ifndef RL_BACKOFF_H
#define RL_BACKOFF_H

#include <stdint.h>

#define RL_BACKOFF_BASE_MS 50u

/* xorshift64*: jitter only, never security. *state must start non-zero. */
static inline uint64_t rl__xorshift(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(2685821657736338717);
}

static inline uint64_t rl__backoff_ms(uint64_t *rng, uint32_t attempt, uint32_t cap_ms)
{
    uint64_t ceiling = attempt >= 20 ? cap_ms : (uint64_t)RL_BACKOFF_BASE_MS << attempt;
    if (ceiling < cap_ms)
        return rl__xorshift(rng) % (ceiling + 1);
    /* The first attempt at the cap draws a phase uniform over [0, cap):
     * whatever came before, the sum is then uniform modulo the cap. */
    uint64_t previous = attempt == 0 ? 0 : (uint64_t)RL_BACKOFF_BASE_MS << (attempt - 1);
    if (attempt < 20 && previous < cap_ms)
        return rl__xorshift(rng) % cap_ms;
    return cap_ms;
}

#endif
