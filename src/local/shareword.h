/* SPDX-License-Identifier: MIT */
/*
 * A node's local share of one key, as the sync thread publishes it into the
 * key's slot: ONE 64-bit word, so a checker never sees a torn (rate, burst)
 * pair. 0 means "no share yet": the key runs at the pre-sync default.
 *
 *   bits 63..36  mantissa of the local emission interval T (28 bits)
 *   bit  35      RL_SHAREWORD_HOT: the key is marked hot (hot/hot.c); the only
 *                bit a local limit's key uses, and no part of a share
 *   bits 34..30  its exponent: T = mantissa << exponent (1/16 ns units)
 *   bit  29      NEAR: a tiered key whose fleet-wide remaining (the last
 *                sync's) is under its limit's confirm threshold: a check
 *                the local tier admits is confirmed in Redis (check.c)
 *   bits 28..0   local burst in whole tokens (0: this node may not admit)
 *
 * T is rounded UP to the 28-bit mantissa (relative error < 2^-27), so a
 * node never runs faster than its share. A share of zero rate is encoded as
 * the largest T. Pure: tested directly. The hot bit is set and cleared by
 * its own RMWs; whoever publishes a share keeps it.
 */
#ifndef RL_SHAREWORD_H
#define RL_SHAREWORD_H

#include <stdint.h>
#include "local/bucket.h"

#define RL_SHAREWORD_BURST_MAX ((UINT64_C(1) << 29) - 1)
#define RL_SHAREWORD_NEAR (UINT64_C(1) << 29)
#define RL_SHAREWORD_MANT_BITS 28
#define RL_SHAREWORD_HOT (UINT64_C(1) << 35)
/* The share part: 0 means no share yet, whatever the hot bit says. */
#define RL_SHAREWORD_SHARE(w) ((w) & ~RL_SHAREWORD_HOT)
#define RL_SHAREWORD_T_MAX (((UINT64_C(1) << RL_SHAREWORD_MANT_BITS) - 1) << 31)

/* Encode a local interval t_fp (0: no rate) and burst (tokens); NEAR is
 * or-ed in by the caller. */
static inline uint64_t rl__shareword_encode(uint64_t t_fp, uint64_t burst)
{
    if (t_fp == 0 || t_fp > RL_SHAREWORD_T_MAX)
        t_fp = RL_SHAREWORD_T_MAX;
    unsigned exp = 0;
    uint64_t mant = t_fp;
    while (mant >> RL_SHAREWORD_MANT_BITS) {
        /* Round up: dropping a set low bit must make T larger, not smaller. */
        mant = (mant >> 1) + (mant & 1);
        exp++;
    }
    if (mant >> RL_SHAREWORD_MANT_BITS) { /* rounding carried out */
        mant >>= 1;
        exp++;
    }
    if (burst > RL_SHAREWORD_BURST_MAX)
        burst = RL_SHAREWORD_BURST_MAX;
    return (mant << 36) | ((uint64_t)exp << 30) | burst;
}

/* Decode into bucket parameters (NEAR ignored); tau is capped to the
 * accepted range, at its largest multiple of t. A synced key's check
 * decodes on every call, so the cap is tested on the exact product, not by
 * a division by burst; only a capped word divides. */
static inline void rl__shareword_decode(uint64_t w, rl_gcra_t *g)
{
    uint64_t t = (w >> 36) << ((w >> 30) & 31);
    uint64_t burst = w & RL_SHAREWORD_BURST_MAX;
    unsigned __int128 tau = (unsigned __int128)burst * t; /* < 2^88 */
    g->t_fp = t;
    g->burst = burst;
    g->tau_fp = __builtin_expect(tau > RL_TAU_FP_MAX, 0) ? (RL_TAU_FP_MAX / t) * t /* t > 0 */
                                                         : (uint64_t)tau;
}

#endif
