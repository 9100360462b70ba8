/* SPDX-License-Identifier: MIT */
/*
 * The share rule: how one key's global limit is split among the live nodes.
 * Pure functions (no I/O, no threads, no allocation, deterministic). The
 * Redis scripts run a line-for-line mirror, src/lua/share.lua; a test feeds
 * both thousands of random inputs and compares every output bit for bit.
 * That is why every value is an integer and every intermediate one stays
 * below 2^53 (Lua numbers are doubles), and why every rounding and tie is
 * spelled out below.
 *
 * Units
 *   SCALE = RL_SHARE_ONE = 2^24. A rate share is a fraction of the key's
 *   global rate in 1/SCALE units. A demand is a node's smoothed offered load
 *   (admitted + denied) as a fraction of the global rate, capped at SCALE:
 *   no node can usefully want more than the whole limit. Burst shares are
 *   whole tokens.
 *
 * The rule, for n nodes with demands d[i] (each capped at SCALE):
 *   1. Floors. f = reserve_q / n (integer division) to every node, so a new
 *      or idle node can start admitting before its demand is known. The pool
 *      used is f*n <= reserve_q.
 *   2. Correction. cut = min(floor(over_q * gain_q16 / 65536), max_cut_q):
 *      proportional to the measured over-consumption, never negative, and
 *      bounded, so usage replayed after an outage cuts at most max_cut_q per
 *      round (no deny storm). Under-consumption never raises the total.
 *   3. Water-filling. A = SCALE - f*n - cut (0 if negative) is split max-min
 *      fair over the demands. If sum(d) <= A every node gets its demand.
 *      Otherwise the level L is the largest integer with
 *      sum(min(d[i], L)) <= A; node i gets min(d[i], L), and the
 *      r = A - sum(min(d[i], L)) units left over (r < the number of nodes
 *      with d[i] > L) go one each to the nodes with d[i] > L in ascending
 *      index order. Those nodes want at least L + 1, so nobody gets more
 *      than its demand. L is found by sorting the capped demands (in the
 *      output array, before it is filled): with them ascending, the
 *      smallest are met while the equal split of what is left covers them,
 *      and L = floor(left / count) at the first one it does not. L is unique,
 *      so any correct sort gives the same answer (C: heapsort, Lua:
 *      table.sort). O(n log n), no allocation.
 *   4. Slack. When sum(d) < A, the unused s = A - sum(d) is split equally:
 *      floor(s / n) to every node and one more unit to each of the first
 *      s mod n nodes by index, so a node whose demand rises can grow before
 *      the next round.
 *   5. rate_q[i] = f + fill[i] + slack[i]. sum(rate_q) = f*n + A
 *      = SCALE - cut whenever cut <= SCALE - f*n, and <= SCALE always.
 *      Step 7 may move rate between nodes but keeps this sum.
 *   6. Burst. A node's bucket admits nothing without a token, whatever its
 *      rate, so tokens go first where they let nodes admit at all.
 *      If B >= n, every node gets 1 token (the floors of step 1 exist so a
 *      new or idle node can admit before its demand is known, and without
 *      a token it could not), and the other B - n are split in proportion
 *      to rate_q by the largest-remainder method: node i gets
 *      1 + floor(R * rate_q[i] / Q) with R = B - n and Q = sum(rate_q), and
 *      the tokens left over go one each to the largest remainders
 *      (R * rate_q[i]) mod Q, ties to the lower index. The cut-off
 *      remainder is found by sorting the remainders (in the burst output
 *      array, before it is filled). If Q == 0 (reserve 0 and a full cut)
 *      the R tokens are split equally, remainder to the lowest indices.
 *      R * rate_q[i] can pass 2^53, so it is computed as
 *      (R / Q) * rate_q[i] + ((R % Q) * rate_q[i]) / Q.
 *      If 1 <= B < n, one token each goes to the B nodes with the largest
 *      rate_q, ties to the lower index (the B-th largest rate_q is found by
 *      sorting a copy in the burst output array); the others get 0.
 *      If B == 0 nobody gets a token (the library never asks for that: a
 *      limit's burst is at least 1).
 *      Either way sum(burst_tokens) == B exactly.
 *   7. Handover. Only when 1 <= B < n, some nodes end with 0 tokens: each
 *      such node's rate_q becomes 0, and the freed rate F (the sum of
 *      theirs) goes to the token holders in proportion to their rate_q:
 *      holder i gets rate_q[i] + floor(F * rate_q[i] / H), H = the holders'
 *      sum of rate_q, and the F - sum(floor(...)) units left over (fewer
 *      than the holders) go one each to the holders in ascending index
 *      order. So sum(rate_q) is exactly what step 5 gave (<= SCALE), and
 *      no rate is left with a node that cannot use it: 1/s with burst 1
 *      over 10 nodes puts the token and the whole SCALE - cut on one node
 *      (the one with the largest share, the lowest index among equals).
 *      F * rate_q[i] <= 2^48. H == 0 only if every rate_q is 0 (the holders
 *      have the largest), when F == 0 too and nothing moves: the equal
 *      split of F the rule asks for then is 0 each. With B == 0 there is no
 *      holder to take the rate, so step 5's rates stand.
 *
 * Inputs out of range are clamped, identically in C and Lua: reserve_q and
 * max_cut_q to SCALE, gain_q16 to RL_SHARE_GAIN_MAX (so over_q * gain_q16
 * < 2^52), each demand to SCALE.
 */
#ifndef RL_SHARE_H
#define RL_SHARE_H

#include <stddef.h>
#include <stdint.h>

#define RL_SHARE_SHIFT 24
#define RL_SHARE_ONE (UINT32_C(1) << RL_SHARE_SHIFT)
#define RL_SHARE_Q16_ONE UINT32_C(65536)
/* A gain above 16 would cut max_cut_q at any measurable overshoot anyway. */
#define RL_SHARE_GAIN_MAX (UINT32_C(16) << 16)
/* Keeps n * SCALE below 2^53 with room to spare. */
#define RL_SHARE_MAX_NODES (UINT32_C(1) << 24)

#define RL_SHARE_RESERVE_DEFAULT (RL_SHARE_ONE / 20) /* 5% for floors */
#define RL_SHARE_GAIN_DEFAULT RL_SHARE_Q16_ONE        /* cut 10% for 10% over */
#define RL_SHARE_MAX_CUT_DEFAULT (RL_SHARE_ONE / 10)  /* at most 10% per round */

/* One key's parameters for one round. */
typedef struct rl_share_params {
    uint32_t burst;     /* whole tokens to lease, normally 1..1e9 (0: none, rates kept) */
    uint32_t reserve_q; /* floor pool, 1/SCALE of the rate */
    uint32_t over_q;    /* last window's consumed/allowed - 1, 1/SCALE; 0 if at or under */
    uint32_t gain_q16;  /* correction gain, 1/65536 */
    uint32_t max_cut_q; /* most the correction may cut per round, 1/SCALE */
} rl_share_params_t;

/* Defaults: reserve 5%, no over-consumption, gain 1, max cut 10%; burst 0. */
void rl__share_params_init(rl_share_params_t *p);

/*
 * Split one key's limit among n nodes (rule above). demand[n] in, rate_q[n]
 * and burst_tokens[n] out (caller-owned, also used as scratch on the way, so
 * neither may overlap demand). n == 0 does nothing. Pure: no allocation, no
 * I/O, any thread. Returns 0, RL_EINVAL (p NULL, or an array NULL while
 * n > 0) or RL_ERANGE (n > RL_SHARE_MAX_NODES).
 */
int rl__share_compute(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                      uint32_t *rate_q, uint32_t *burst_tokens);

/* The correction the rule applies for these parameters (step 2). */
uint32_t rl__share_cut(const rl_share_params_t *p);

/*
 * One EWMA step of a demand: alpha * sample + (1 - alpha) * prev, alpha in
 * 1/65536 (clamped to 65536), prev and sample capped at SCALE first, rounded
 * to nearest (halves up). When that rounding would leave prev unchanged
 * although sample differs (|sample - prev| * alpha < 1/2 unit) and alpha > 0,
 * the result moves one unit toward sample instead, so a demand always reaches
 * its sample exactly and an idle node's demand decays to 0, not to a residue
 * of up to 32768/alpha_q16 units. The result is between prev and sample.
 */
uint32_t rl__share_ewma(uint32_t prev, uint32_t sample, uint32_t alpha_q16);

#endif
