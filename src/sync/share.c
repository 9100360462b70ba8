/* SPDX-License-Identifier: MIT */
/*
 * The share rule (see sync/share.h). Mirrored line for line by src/lua/share.lua:
 * a change here is a change there, and tests/test_share_lua.c compares them.
 * Sums are uint64_t; every value stays below 2^53 so the Lua doubles agree.
 */
#include "sync/share.h"
#include "ratelimit.h"

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

static uint32_t cap_demand(uint32_t d)
{
    return min_u32(d, RL_SHARE_ONE);
}

void rl__share_params_init(rl_share_params_t *p)
{
    p->burst = 0;
    p->reserve_q = RL_SHARE_RESERVE_DEFAULT;
    p->over_q = 0;
    p->gain_q16 = RL_SHARE_GAIN_DEFAULT;
    p->max_cut_q = RL_SHARE_MAX_CUT_DEFAULT;
}

uint32_t rl__share_cut(const rl_share_params_t *p)
{
    /* gain <= 2^20 and over_q < 2^32: the product stays below 2^52. */
    uint64_t gain = min_u32(p->gain_q16, RL_SHARE_GAIN_MAX);
    uint64_t cut = (uint64_t)p->over_q * gain / RL_SHARE_Q16_ONE;
    uint32_t max_cut = min_u32(p->max_cut_q, RL_SHARE_ONE);
    return cut < max_cut ? (uint32_t)cut : max_cut;
}

uint32_t rl__share_ewma(uint32_t prev, uint32_t sample, uint32_t alpha_q16)
{
    prev = cap_demand(prev);
    sample = cap_demand(sample);
    uint64_t a = min_u32(alpha_q16, RL_SHARE_Q16_ONE);
    uint64_t num = a * sample + (RL_SHARE_Q16_ONE - a) * prev; /* < 2^41 */
    uint32_t v = (uint32_t)((num + RL_SHARE_Q16_ONE / 2) / RL_SHARE_Q16_ONE);
    /* Plain rounding stalls within 1/(2 alpha) units of the sample: step. */
    if (v == prev && sample != prev && a > 0)
        v = sample > prev ? prev + 1 : prev - 1;
    return v;
}

/* Heapsort: in place and without allocation (glibc's qsort may call
 * malloc, which a pure function must not). Sorted plain values are the same
 * whatever the algorithm, so Lua's table.sort agrees. */
static void sift_down(uint32_t *a, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && a[child + 1] > a[child])
            child++;
        if (a[root] >= a[child])
            return;
        uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}

static void sort_u32(uint32_t *a, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

/* Largest L with sum(min(d[i], L)) <= avail, given sum(d) > avail. Sorted
 * ascending, the smallest demands are met while the equal share of what is
 * left covers them; the first one it does not cover sets the level. tmp[n]
 * is scratch. */
static uint32_t water_level(const uint32_t *demand, size_t n, uint64_t avail, uint32_t *tmp)
{
    for (size_t i = 0; i < n; i++)
        tmp[i] = cap_demand(demand[i]);
    sort_u32(tmp, n);
    uint64_t left = avail;
    for (size_t k = 0; k < n; k++) {
        uint64_t cnt = n - k;
        if (tmp[k] * cnt > left) /* < 2^48 */
            return (uint32_t)(left / cnt);
        left -= tmp[k];
    }
    return RL_SHARE_ONE; /* not reached while sum(d) > avail */
}

/* Max-min fair split of avail into fill[] (step 3); returns the slack. */
static uint64_t water_fill(const uint32_t *demand, size_t n, uint64_t avail, uint32_t *fill)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += cap_demand(demand[i]);
    if (total <= avail) {
        for (size_t i = 0; i < n; i++)
            fill[i] = cap_demand(demand[i]);
        return avail - total;
    }
    uint32_t level = water_level(demand, n, avail, fill);
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += min_u32(cap_demand(demand[i]), level);
    uint64_t left = avail - used;
    /* left < #{d > level}, and each of those wants at least level + 1. */
    for (size_t i = 0; i < n; i++) {
        uint32_t d = cap_demand(demand[i]);
        fill[i] = min_u32(d, level);
        if (d > level && left > 0) {
            fill[i]++;
            left--;
        }
    }
    return 0;
}

/* Add the floor and an equal part of the slack (step 4) to every node. */
static void add_floor_and_slack(uint32_t *rate_q, size_t n, uint32_t floor_q, uint64_t slack)
{
    uint64_t per = slack / n;
    uint64_t extra = slack % n;
    for (size_t i = 0; i < n; i++)
        rate_q[i] += floor_q + (uint32_t)per + (i < extra ? 1 : 0);
}

static void burst_equal(size_t n, uint32_t burst, uint32_t *out)
{
    uint64_t per = burst / n;
    uint64_t extra = burst % n;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)per + (i < extra ? 1 : 0);
}

/* floor(burst * r / total) and its remainder without passing 2^53:
 * burst = bq * total + br, so burst * r = bq * r * total + br * r. */
static uint64_t burst_quota(uint64_t bq, uint64_t br, uint32_t r, uint64_t total)
{
    return bq * r + br * r / total;
}

static uint64_t burst_rem(uint64_t br, uint32_t r, uint64_t total)
{
    return br * r % total; /* br * r < 2^48 */
}

/* The k-th largest of a[n] (1 <= k <= n), sorting a in place. Ties are
 * broken by index afterwards, so only the value matters: any correct sort
 * gives the same answer. */
static uint32_t kth_largest(uint32_t *a, size_t n, uint64_t k)
{
    sort_u32(a, n);
    return a[n - k];
}

static size_t count_above(const uint32_t *a, size_t n, uint64_t t)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += a[i] > t;
    return c;
}

/* Largest-remainder split of burst in proportion to rate_q into out (also
 * the scratch for finding the cut-off remainder). */
static void burst_by_share(const uint32_t *rate_q, size_t n, uint32_t burst,
                           uint64_t total, uint32_t *out)
{
    uint64_t bq = burst / total, br = burst % total;
    uint64_t given = 0;
    for (size_t i = 0; i < n; i++)
        given += burst_quota(bq, br, rate_q[i], total);
    /* left < n: the fractional parts sum to left, each below 1. */
    uint64_t left = burst - given;
    uint64_t t = total; /* above every remainder: nobody gets an extra token */
    uint64_t at_t = 0;
    if (left > 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = (uint32_t)burst_rem(br, rate_q[i], total);
        t = kth_largest(out, n, left);
        at_t = left - count_above(out, n, t);
    }
    /* Every remainder above t wins; ties at t go to the lowest indices. */
    for (size_t i = 0; i < n; i++) {
        uint64_t rem = burst_rem(br, rate_q[i], total);
        out[i] = (uint32_t)burst_quota(bq, br, rate_q[i], total);
        if (rem > t || (rem == t && at_t > 0)) {
            out[i]++;
            if (rem == t)
                at_t--;
        }
    }
}

/* 1 <= burst < n: one token each to the burst nodes with the largest
 * rate_q, ties to the lowest indices. */
static void burst_to_largest(const uint32_t *rate_q, size_t n, uint32_t burst, uint32_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = rate_q[i];
    uint64_t t = kth_largest(out, n, burst);
    uint64_t at_t = burst - count_above(out, n, t);
    for (size_t i = 0; i < n; i++) {
        out[i] = 0;
        if (rate_q[i] > t || (rate_q[i] == t && at_t > 0)) {
            out[i] = 1;
            if (rate_q[i] == t)
                at_t--;
        }
    }
}

/* Step 7: a node without a token cannot admit, so its rate goes to the
 * holders in proportion to theirs. held > 0 whenever freed > 0: holders
 * have the largest rates, so if all theirs were 0 every rate would be, and
 * the equal split of nothing changes nothing. */
static void hand_over_rate(uint32_t *rate_q, size_t n, const uint32_t *tokens)
{
    uint64_t freed = 0, held = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] > 0)
            held += rate_q[i];
        else
            freed += rate_q[i];
    }
    if (freed == 0)
        return;
    uint64_t given = 0;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] > 0)
            given += freed * rate_q[i] / held; /* < 2^48 */
    uint64_t left = freed - given; /* < the number of holders */
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] == 0) {
            rate_q[i] = 0;
            continue;
        }
        rate_q[i] += (uint32_t)(freed * rate_q[i] / held);
        if (left > 0) {
            rate_q[i]++;
            left--;
        }
    }
}

/* Steps 6 and 7. */
static void split_burst(uint32_t *rate_q, size_t n, uint32_t burst, uint32_t *out)
{
    if (burst == 0) {
        /* Nobody holds a token and nobody could take the rate: step 5's
         * rates stand (the library always leases at least one token). */
        burst_equal(n, 0, out);
        return;
    }
    if (burst < n) {
        burst_to_largest(rate_q, n, burst, out);
        hand_over_rate(rate_q, n, out);
        return;
    }
    /* One token each first: a bucket with none admits nothing at any rate,
     * and a new or idle node's floor is there so that it can admit. */
    uint32_t rest = burst - (uint32_t)n;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += rate_q[i];
    if (total == 0)
        burst_equal(n, rest, out);
    else
        burst_by_share(rate_q, n, rest, total, out);
    for (size_t i = 0; i < n; i++)
        out[i]++;
}

int rl__share_compute(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                      uint32_t *rate_q, uint32_t *burst_tokens)
{
    if (p == NULL)
        return RL_EINVAL;
    if (n == 0)
        return 0;
    if (demand == NULL || rate_q == NULL || burst_tokens == NULL)
        return RL_EINVAL;
    if (n > RL_SHARE_MAX_NODES)
        return RL_ERANGE;
    uint32_t floor_q = min_u32(p->reserve_q, RL_SHARE_ONE) / (uint32_t)n;
    uint64_t room = RL_SHARE_ONE - (uint64_t)floor_q * n;
    uint32_t cut = rl__share_cut(p);
    uint64_t avail = cut < room ? room - cut : 0;
    uint64_t slack = water_fill(demand, n, avail, rate_q);
    add_floor_and_slack(rate_q, n, floor_q, slack);
    split_burst(rate_q, n, p->burst, burst_tokens);
    return 0;
}
