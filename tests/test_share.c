/* SPDX-License-Identifier: MIT */
/* The share rule (src/sync/share.c): hand-computed cases, invariants over random
 * inputs checked against a sort-based reference, and step responses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sync/share.h"
#include "testutil.h"

#define ONE RL_SHARE_ONE
#define PCT(x) ((uint32_t)((uint64_t)ONE * (x) / 100))

/* For loops: Check's ck_assert records a mark point (a write) per passing
 * call, which dominates a loop of a million checks. */
#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond))                       \
            ck_abort_msg(__VA_ARGS__);     \
    } while (0)

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;

/* splitmix64: deterministic across platforms, good enough for test inputs. */
static uint64_t rng(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t n)
{
    return (uint32_t)(rng() % n);
}

static rl_share_params_t params(uint32_t burst, uint32_t reserve_q, uint32_t over_q)
{
    rl_share_params_t p;
    rl__share_params_init(&p);
    p.burst = burst;
    p.reserve_q = reserve_q;
    p.over_q = over_q;
    return p;
}

static uint64_t sum32(const uint32_t *a, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i];
    return s;
}

static void compute(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                    uint32_t *rate, uint32_t *burst)
{
    int rc = rl__share_compute(p, demand, n, rate, burst);
    ck_assert_int_eq(rc, 0);
}

static void assert_array(const uint32_t *got, const uint32_t *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        EXPECT(got[i] == want[i], "%s[%zu]: got %u, want %u", what, i, got[i], want[i]);
}

/* ------------------------------------------------- sort-based reference */

/* An independent statement of the rule: sort demands ascending, satisfy the
 * smallest while the equal share covers them, give the rest the level, and
 * hand the leftover units to the lowest indices among them. */

static const uint32_t *ref_keys;

static int by_demand(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    uint32_t x = ref_keys[i] < ONE ? ref_keys[i] : ONE;
    uint32_t y = ref_keys[j] < ONE ? ref_keys[j] : ONE;
    if (x != y)
        return x < y ? -1 : 1;
    return i < j ? -1 : (i > j);
}

static const uint64_t *ref_rems;

static int by_rem_desc(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (ref_rems[i] != ref_rems[j])
        return ref_rems[i] > ref_rems[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* Water-fill avail over demand; returns the slack. */
static uint64_t ref_fill(const uint32_t *demand, size_t n, uint64_t avail, uint32_t *fill,
                         size_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    ref_keys = demand;
    qsort(order, n, sizeof *order, by_demand);
    uint64_t r = avail;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        uint64_t d = demand[i] < ONE ? demand[i] : ONE;
        uint64_t cnt = n - k;
        if (d * cnt <= r) {
            fill[i] = (uint32_t)d;
            r -= d;
            continue;
        }
        uint64_t level = r / cnt, left = r % cnt;
        int *unsat = calloc(n, sizeof *unsat);
        ck_assert_ptr_nonnull(unsat);
        for (size_t m = k; m < n; m++)
            unsat[order[m]] = 1;
        for (size_t j = 0; j < n; j++) {
            if (!unsat[j])
                continue;
            fill[j] = (uint32_t)level + (left > 0);
            left -= left > 0;
        }
        free(unsat);
        return 0;
    }
    return r;
}

/* Largest-remainder split of burst by weight (equal weights if they sum
 * to 0), in plain 64-bit arithmetic: burst * w < 2^56. */
static void ref_split(const uint32_t *rate, size_t n, uint32_t burst, uint32_t *out,
                      size_t *order)
{
    uint64_t q = sum32(rate, n);
    uint64_t *rems = calloc(n, sizeof *rems);
    ck_assert_ptr_nonnull(rems);
    uint64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t w = q == 0 ? 1 : rate[i], tot = q == 0 ? n : q;
        out[i] = (uint32_t)((uint64_t)burst * w / tot); /* < 2^56 */
        rems[i] = (uint64_t)burst * w % tot;
        given += out[i];
        order[i] = i;
    }
    /* With q == 0 every weight is 1: equal remainders, index order. */
    ref_rems = rems;
    qsort(order, n, sizeof *order, by_rem_desc);
    for (uint64_t k = 0; k < burst - given; k++)
        out[order[k]]++;
    free(rems);
}

/* Steps 6 and 7 as a plain statement: a token each and the rest by share
 * when there are enough; otherwise one each to the largest rates in (rate
 * descending, index ascending) order, and the others' rate moved to those
 * holders pro rata, the leftover units one each to the first holders. */
static void ref_burst(uint32_t *rate, size_t n, uint32_t burst, uint32_t *out, size_t *order)
{
    if (burst >= n) {
        ref_split(rate, n, burst - (uint32_t)n, out, order);
        for (size_t i = 0; i < n; i++)
            out[i]++;
        return;
    }
    uint64_t *key = calloc(n, sizeof *key);
    ck_assert_ptr_nonnull(key);
    for (size_t i = 0; i < n; i++) {
        key[i] = rate[i];
        order[i] = i;
        out[i] = 0;
    }
    ref_rems = key;
    qsort(order, n, sizeof *order, by_rem_desc);
    free(key);
    uint64_t held = 0, freed = 0;
    for (size_t k = 0; k < n; k++) {
        if (k < burst) {
            out[order[k]] = 1;
            held += rate[order[k]];
        } else {
            freed += rate[order[k]];
        }
    }
    if (burst == 0 || freed == 0)
        return; /* no holder to take it, or nothing to move */
    ck_assert_uint_gt(held, 0);
    uint64_t *share = calloc(n, sizeof *share);
    ck_assert_ptr_nonnull(share);
    uint64_t given = 0;
    for (size_t i = 0; i < n; i++) {
        share[i] = out[i] ? freed * rate[i] / held : 0;
        given += share[i];
    }
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!out[i]) {
            rate[i] = 0;
            continue;
        }
        rate[i] += (uint32_t)(share[i] + (k < freed - given));
        k++;
    }
    free(share);
}

/* Steps 1-5. */
static void ref_rates(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                      uint32_t *rate, size_t *order)
{
    uint32_t reserve = p->reserve_q < ONE ? p->reserve_q : ONE;
    uint32_t f = reserve / (uint32_t)n;
    uint64_t room = ONE - (uint64_t)f * n;
    uint32_t cut = rl__share_cut(p);
    uint64_t avail = cut < room ? room - cut : 0;
    uint64_t slack = ref_fill(demand, n, avail, rate, order);
    for (size_t i = 0; i < n; i++)
        rate[i] += f + (uint32_t)(slack / n) + (i < slack % n);
}

static void ref_compute(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                        uint32_t *rate, uint32_t *burst)
{
    size_t *order = calloc(n ? n : 1, sizeof *order);
    ck_assert_ptr_nonnull(order);
    ref_rates(p, demand, n, rate, order);
    ref_burst(rate, n, p->burst, burst, order);
    free(order);
}

/* What every output must satisfy, whatever the inputs. pre is the rate
 * before the handover (step 5), from the reference. */
static void check_invariants(const rl_share_params_t *p, const uint32_t *demand, size_t n,
                             const uint32_t *rate, const uint32_t *burst)
{
    uint32_t *pre = calloc(n, sizeof *pre);
    size_t *order = calloc(n, sizeof *order);
    ck_assert(pre != NULL && order != NULL);
    ref_rates(p, demand, n, pre, order);
    free(order);
    uint32_t reserve = p->reserve_q < ONE ? p->reserve_q : ONE;
    uint64_t f = reserve / n;
    uint64_t room = ONE - f * n;
    uint32_t cut = rl__share_cut(p);
    uint64_t avail = cut < room ? room - cut : 0;
    uint64_t want = f * n + avail;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += demand[i] < ONE ? demand[i] : ONE;
    uint64_t q = sum32(pre, n);
    ck_assert_uint_eq(q, want);
    /* The handover moves rate, it never adds or loses any. */
    ck_assert_uint_eq(sum32(rate, n), q);
    ck_assert_uint_le(sum32(rate, n), ONE);
    ck_assert_uint_eq(sum32(burst, n), p->burst);
    uint64_t held = 0;
    size_t holders = 0;
    uint32_t min_held = UINT32_MAX, max_freed = 0;
    for (size_t i = 0; i < n; i++) {
        EXPECT(pre[i] >= f, "pre[%zu]=%u below the floor %llu", i, pre[i],
               (unsigned long long)f);
        /* Without slack nobody gets more than its floor plus its demand. */
        uint32_t cd = demand[i] < ONE ? demand[i] : ONE;
        EXPECT(total < avail || pre[i] - f <= cd, "pre[%zu]=%u: floor %llu + demand %u", i,
               pre[i], (unsigned long long)f, cd);
        if (burst[i] > 0) {
            holders++;
            held += pre[i];
            min_held = pre[i] < min_held ? pre[i] : min_held;
        } else {
            max_freed = pre[i] > max_freed ? pre[i] : max_freed;
            /* A bucket without a token cannot use a rate. */
            EXPECT(rate[i] == 0 || p->burst == 0, "rate[%zu]=%u without a token", i,
                   rate[i]);
        }
    }
    if (p->burst == 0) {
        /* No holder to hand the rate to: step 5 stands. */
        assert_array(rate, pre, n, "rate with burst 0");
    } else if (p->burst >= n) {
        for (size_t i = 0; i < n; i++) {
            EXPECT(burst[i] >= 1, "burst[%zu]=0 with burst %u >= %zu nodes", i, p->burst, n);
            EXPECT(rate[i] == pre[i], "rate[%zu]=%u moved from %u", i, rate[i], pre[i]);
            /* Past the first token, largest remainder never strays a whole
             * token from the quota of the rest. */
            if (q > 0) {
                uint64_t lo = (uint64_t)(p->burst - n) * pre[i] / q;
                EXPECT(burst[i] - 1 == lo || burst[i] - 1 == lo + 1,
                       "burst[%zu]=%u quota 1 + %llu", i, burst[i], (unsigned long long)lo);
            }
        }
    } else {
        /* One token each to B nodes, none of them with less rate than any
         * node left out; the freed rate goes to them pro rata, +1 at most. */
        ck_assert_uint_eq(holders, p->burst);
        ck_assert_uint_ge(min_held, max_freed);
        uint64_t freed = q - held;
        for (size_t i = 0; i < n; i++) {
            EXPECT(burst[i] <= 1, "burst[%zu]=%u with burst %u < %zu nodes", i, burst[i],
                   p->burst, n);
            if (burst[i] == 0)
                continue;
            uint64_t lo = held > 0 ? freed * pre[i] / held : 0;
            EXPECT(rate[i] >= pre[i] && (rate[i] - pre[i] == lo || rate[i] - pre[i] == lo + 1),
                   "rate[%zu]=%u from %u + %llu", i, rate[i], pre[i], (unsigned long long)lo);
        }
    }
    free(pre);
}

/* ------------------------------------------------------ hand-computed */

START_TEST(test_fill_small_satisfied_first)
{
    /* A = SCALE: 1048576 is met; 15728640 left for two nodes, 7864320 each,
     * below both of their demands. */
    rl_share_params_t p = params(0, 0, 0);
    uint32_t d[3] = {1048576, 8388608, 10000000}, r[3], b[3];
    uint32_t want[3] = {1048576, 7864320, 7864320};
    compute(&p, d, 3, r, b);
    assert_array(r, want, 3, "rate");
    uint32_t zero[3] = {0, 0, 0};
    assert_array(b, zero, 3, "burst");
}
END_TEST

START_TEST(test_fill_remainder_to_lowest_index)
{
    /* 16777214 over three capped demands: level 5592404, 2 units left, which
     * go to nodes 1 and 2 (lowest indices above the level). */
    rl_share_params_t p = params(0, 0, 0);
    uint32_t d[4] = {2, ONE, UINT32_MAX, ONE + 5}, r[4], b[4];
    uint32_t want[4] = {2, 5592405, 5592405, 5592404};
    compute(&p, d, 4, r, b);
    assert_array(r, want, 4, "rate");
}
END_TEST

START_TEST(test_floors_and_slack)
{
    /* reserve 838860 over 4: f = 209715; A = 15938356; demand 4000000
     * leaves slack 11938356 = 4 * 2984589. */
    rl_share_params_t p = params(100, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d[4] = {0, 1000000, 3000000, 0}, r[4], b[4];
    uint32_t want[4] = {3194304, 4194304, 6194304, 3194304};
    /* A token each, then the other 96 by share: quotas 18.28, 24, 35.44,
     * 18.28, 95 whole, the last to node 2 (.44 > .28); 1 + those. */
    uint32_t want_b[4] = {19, 25, 37, 19};
    compute(&p, d, 4, r, b);
    assert_array(r, want, 4, "rate");
    assert_array(b, want_b, 4, "burst");
    ck_assert_uint_eq(sum32(r, 4), ONE);
}
END_TEST

START_TEST(test_zero_demand_equal)
{
    /* A = 15938356 = 10 * 1593835 + 6: nodes 0..5 get one unit more, so
     * step 5 gives 83886 + 1593835 + (i < 6). */
    rl_share_params_t p = params(10, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d[10] = {0}, r[10], b[10];
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(r[i], 83886 + 1593835 + (i < 6));
        ck_assert_uint_eq(b[i], 1); /* B == n: the first token each, no rest */
    }
    ck_assert_uint_eq(sum32(r, 10), ONE);
    /* One token: it goes to the largest share, lowest index (node 0), and
     * node 0 takes the other nine shares with it: 16777216 in all. */
    p.burst = 1;
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], i == 0);
        ck_assert_uint_eq(r[i], i == 0 ? ONE : 0);
    }
}
END_TEST

START_TEST(test_one_node_gets_everything)
{
    uint32_t d = 5, r, b;
    rl_share_params_t p = params(7, RL_SHARE_RESERVE_DEFAULT, 0);
    compute(&p, &d, 1, &r, &b);
    ck_assert_uint_eq(r, ONE);
    ck_assert_uint_eq(b, 7);
    p.over_q = 50 * ONE; /* 51x over: the cut saturates at 10% */
    compute(&p, &d, 1, &r, &b);
    ck_assert_uint_eq(r, ONE - RL_SHARE_MAX_CUT_DEFAULT);
    ck_assert_uint_eq(r, 15099495);
    ck_assert_uint_eq(b, 7);
}
END_TEST

START_TEST(test_no_nodes_and_bad_args)
{
    rl_share_params_t p = params(10, 0, 0);
    ck_assert_int_eq(rl__share_compute(&p, NULL, 0, NULL, NULL), 0);
    ck_assert_int_eq(rl__share_compute(NULL, NULL, 0, NULL, NULL), RL_EINVAL);
    uint32_t d = 1, r = 99, b = 99;
    ck_assert_int_eq(rl__share_compute(&p, NULL, 1, &r, &b), RL_EINVAL);
    ck_assert_int_eq(rl__share_compute(&p, &d, 1, NULL, &b), RL_EINVAL);
    ck_assert_int_eq(rl__share_compute(&p, &d, 1, &r, NULL), RL_EINVAL);
    /* Rejected before any array is touched. */
    ck_assert_int_eq(rl__share_compute(&p, &d, (size_t)RL_SHARE_MAX_NODES + 1, &r, &b),
                     RL_ERANGE);
    ck_assert_uint_eq(r, 99);
}
END_TEST

START_TEST(test_demand_capped)
{
    rl_share_params_t p = params(10, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d1[3] = {UINT32_MAX, ONE + 1, 3}, d2[3] = {ONE, ONE, 3};
    uint32_t r1[3], b1[3], r2[3], b2[3];
    compute(&p, d1, 3, r1, b1);
    compute(&p, d2, 3, r2, b2);
    assert_array(r1, r2, 3, "rate");
    assert_array(b1, b2, 3, "burst");
}
END_TEST

START_TEST(test_burst_one_over_ten_nodes)
{
    /* 1/s, burst 1, ten nodes, only node 7 has demand: it holds the token,
     * and with it the nine floors of 83886 (83886 + 15938356 + 9 * 83886 =
     * 16777216): a node without a token could not have used them. */
    rl_share_params_t p = params(1, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d[10] = {0}, r[10], b[10];
    d[7] = PCT(100);
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], i == 7);
        ck_assert_uint_eq(r[i], i == 7 ? ONE : 0);
    }
    /* Burst 3 over ten nodes, three with demand: one token each. Step 5:
     * f = 83886, demands 3355443 (node 2), 5033164 (5), 1677721 (7) sum to
     * 10066328, slack 15938356 - 10066328 = 5872028 = 10 * 587202 + 8, so
     * nodes 0..7 get 587203, 8 and 9 587202:
     *   node 2  4026532, node 5  5704253, node 7  2348810,
     *   nodes 0, 1, 3, 4, 6  671089, nodes 8, 9  671088.
     * Freed 5 * 671089 + 2 * 671088 = 4697621; held 12079595. Pro rata:
     *   node 2  4697621 * 4026532 / 12079595 = 1565873.8
     *   node 5  4697621 * 5704253 / 12079595 = 2218320.9
     *   node 7  4697621 * 2348810 / 12079595 =  913426.3
     * 4697619 given, 2 left: one each to nodes 2 and 5 (ascending index,
     * not by remainder). */
    p.burst = 3;
    d[7] = PCT(10);
    d[2] = PCT(20);
    d[5] = PCT(30);
    compute(&p, d, 10, r, b);
    uint32_t want[10] = {0, 0, 4026532 + 1565873 + 1, 0, 0, 5704253 + 2218320 + 1,
                         0, 2348810 + 913426, 0, 0};
    ck_assert_uint_eq(want[2], 5592406);
    ck_assert_uint_eq(want[5], 7922574);
    ck_assert_uint_eq(want[7], 3262236);
    assert_array(r, want, 10, "rate");
    for (size_t i = 0; i < 10; i++)
        ck_assert_uint_eq(b[i], i == 2 || i == 5 || i == 7);
    check_invariants(&p, d, 10, r, b);
}
END_TEST

START_TEST(test_burst_one_even_demand)
{
    /* 1/s, burst 1, ten nodes with even demand: without the handover nine
     * tenths of the rate would sit with nodes that cannot admit. Every
     * demand is 1677721 (PCT(10)), 16777210 in all > A = 15938356: level
     * 1593835, 6 left to nodes 0..5; step 5 gives 1677722 (0..5) and
     * 1677721 (6..9). Node 0 (largest, lowest index) holds the token and
     * takes all 16777216. */
    rl_share_params_t p = params(1, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d[10], r[10], b[10];
    for (size_t i = 0; i < 10; i++)
        d[i] = PCT(10);
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], i == 0);
        ck_assert_uint_eq(r[i], i == 0 ? ONE : 0);
    }
    check_invariants(&p, d, 10, r, b);
    /* With a correction of 838861 (5% over) the distributable rate is
     * 16777216 - 838861 = 15938355, and the holder gets exactly that. */
    p.over_q = PCT(5) + 1;
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], i == 0);
        ck_assert_uint_eq(r[i], i == 0 ? 15938355 : 0);
    }
    check_invariants(&p, d, 10, r, b);
    /* Equal demand on nodes 3..9 only, burst 2: nodes 3 and 4 hold
     * (largest, ties to the lower index) and split the rest evenly. f =
     * 83886, A = 15938356 over seven demands of 1677721 (11744047): slack
     * 4194309 = 10 * 419430 + 9, so step 5 gives 503317 (nodes 0..2),
     * 2181038 (3..8), 2181037 (9). Freed 3 * 503317 + 4 * 2181038 +
     * 2181037 = 12415140, held 2 * 2181038 = 4362076: 6207570 each, none
     * left, so 2181038 + 6207570 = 8388608 each: Σ = 16777216. */
    for (size_t i = 0; i < 3; i++)
        d[i] = 0;
    p.over_q = 0;
    p.burst = 2;
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], i == 3 || i == 4);
        ck_assert_uint_eq(r[i], i == 3 || i == 4 ? 8388608 : 0);
    }
    check_invariants(&p, d, 10, r, b);
}
END_TEST

START_TEST(test_burst_first_token_each)
{
    /* Node 0 wants everything; step 5 gives it 83886 + 15938356 = 16022242
     * and the nine idle nodes their floor, 83886. By share alone node 0
     * would take all 10, 11 or 20 tokens (9 idle quotas of 0.05 never win
     * a remainder); now every node gets one first, so the idle ones can
     * admit before their demand is known. Rates do not move (B >= n). */
    rl_share_params_t p = params(10, RL_SHARE_RESERVE_DEFAULT, 0);
    uint32_t d[10] = {ONE}, r[10], b[10];
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(b[i], 1); /* 10 - 10 = 0 to split */
        ck_assert_uint_eq(r[i], i == 0 ? 16022242 : 83886);
    }
    /* 11: the one left has quotas 0.955 (node 0) and 0.005: node 0. */
    p.burst = 11;
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++)
        ck_assert_uint_eq(b[i], i == 0 ? 2 : 1);
    /* 20: the 10 left have quotas 10 * 16022242 / 2^24 = 9.55 and 0.05:
     * 9 whole, the 10th to node 0's .55, so 1 + 10 = 11. */
    p.burst = 20;
    compute(&p, d, 10, r, b);
    for (size_t i = 0; i < 10; i++)
        ck_assert_uint_eq(b[i], i == 0 ? 11 : 1);
    check_invariants(&p, d, 10, r, b);
}
END_TEST

START_TEST(test_burst_sweep_around_n)
{
    /* Every burst from 0 to n + 3 over the same random demands: the
     * invariants (Σ burst == B, Σ rate kept, a token each when B >= n, no
     * rate without a token, pro rata handover) and the reference agree. */
    enum { N = 23 };
    uint32_t d[N], r[N], b[N], rr[N], rb[N];
    rng_state = 5;
    for (int k = 0; k < 50; k++) {
        for (size_t i = 0; i < N; i++)
            d[i] = k % 5 == 0 ? 0 : rng_below(ONE / 4);
        for (uint32_t burst = 0; burst <= N + 3; burst++) {
            rl_share_params_t p = params(burst, k % 3 ? RL_SHARE_RESERVE_DEFAULT : 0,
                                         k % 2 ? PCT(3) : 0);
            compute(&p, d, N, r, b);
            check_invariants(&p, d, N, r, b);
            ref_compute(&p, d, N, rr, rb);
            assert_array(r, rr, N, "rate vs reference");
            assert_array(b, rb, N, "burst vs reference");
        }
    }
}
END_TEST

START_TEST(test_thousand_nodes_by_hand)
{
    /* f = 838; A = 15939216 = 1000 * 15939 + 216, so rates 16778 (216
     * nodes) and 16777 (784). Burst 1e9: a token each, then 999999000 by
     * share: quotas 999999000 * 16778 / 2^24 = 1000045.73 and
     * 999999000 * 16777 / 2^24 = 999986.13, 256 tokens left, 216 to the
     * .73s, 40 to the lowest-index .13s; plus the first token. */
    enum { N = 1000 };
    static uint32_t d[N], r[N], b[N];
    for (size_t i = 0; i < N; i++)
        d[i] = ONE;
    rl_share_params_t p = params(1000000000, RL_SHARE_RESERVE_DEFAULT, 0);
    compute(&p, d, N, r, b);
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_eq(r[i], i < 216 ? 16778 : 16777);
        ck_assert_uint_eq(b[i], i < 216 ? 1000047 : i < 256 ? 999988 : 999987);
    }
    check_invariants(&p, d, N, r, b);
}
END_TEST

/* ------------------------------------------------------------ correction */

START_TEST(test_correction_bounds)
{
    uint32_t d[2] = {ONE, ONE}, r[2], b[2];
    rl_share_params_t p = params(10, 0, PCT(5) + 1);
    compute(&p, d, 2, r, b); /* 5% over, gain 1: cut 838861 */
    ck_assert_uint_eq(rl__share_cut(&p), 838861);
    ck_assert_uint_eq(r[0], 7969178);
    ck_assert_uint_eq(r[1], 7969177);
    p.over_q = ONE; /* 2x over: capped at 10% */
    compute(&p, d, 2, r, b);
    ck_assert_uint_eq(r[0], 7549748);
    ck_assert_uint_eq(r[1], 7549747);
    /* Replay after an outage: any overshoot cuts at most max_cut. */
    p.over_q = UINT32_MAX;
    p.gain_q16 = UINT32_MAX;
    ck_assert_uint_eq(rl__share_cut(&p), RL_SHARE_MAX_CUT_DEFAULT);
    p.gain_q16 = 0;
    ck_assert_uint_eq(rl__share_cut(&p), 0);
    /* Half gain: cut = floor(over / 2). */
    p.gain_q16 = 32768;
    p.over_q = 1001;
    ck_assert_uint_eq(rl__share_cut(&p), 500);
    /* A full cut with no reserve leaves nothing: a token each, and the
     * one left goes to the lowest index (equal split). */
    p.gain_q16 = RL_SHARE_GAIN_MAX;
    p.max_cut_q = UINT32_MAX;
    p.over_q = ONE;
    p.burst = 3;
    compute(&p, d, 2, r, b);
    ck_assert_uint_eq(r[0] + r[1], 0);
    ck_assert_uint_eq(b[0], 2);
    ck_assert_uint_eq(b[1], 1);
}
END_TEST

START_TEST(test_correction_monotone_and_bounded)
{
    enum { N = 17 };
    uint32_t d[N], r[N], b[N];
    rng_state = 7;
    for (size_t i = 0; i < N; i++)
        d[i] = rng_below(ONE / 4);
    uint64_t prev_sum = UINT64_MAX;
    for (uint32_t over = 0; over < 2 * ONE; over += ONE / 64) {
        rl_share_params_t p = params(1000, RL_SHARE_RESERVE_DEFAULT, over);
        compute(&p, d, N, r, b);
        uint64_t s = sum32(r, N);
        /* Σ never rises with more overshoot and never falls below 90%. */
        ck_assert_uint_le(s, prev_sum);
        ck_assert_uint_ge(s, ONE - RL_SHARE_MAX_CUT_DEFAULT);
        check_invariants(&p, d, N, r, b);
        prev_sum = s;
    }
}
END_TEST

/* ------------------------------------------------------------------ EWMA */

START_TEST(test_ewma_values)
{
    ck_assert_uint_eq(rl__share_ewma(0, ONE, 32768), ONE / 2);
    ck_assert_uint_eq(rl__share_ewma(ONE / 2, ONE, 32768), 12582912);
    ck_assert_uint_eq(rl__share_ewma(0, 1, 32768), 1);        /* 0.5 rounds up */
    ck_assert_uint_eq(rl__share_ewma(1, 0, 32768), 0);        /* 0.5 -> 1 == prev: step */
    ck_assert_uint_eq(rl__share_ewma(100, 0, 1), 99);         /* 99.998 -> stall: step */
    ck_assert_uint_eq(rl__share_ewma(1000000, 0, 16384), 750000);
    ck_assert_uint_eq(rl__share_ewma(3, 10, 21845), 5);       /* 5.333 */
    ck_assert_uint_eq(rl__share_ewma(3, 10, 0), 3);           /* alpha 0: frozen */
    ck_assert_uint_eq(rl__share_ewma(3, 10, 65536), 10);
    ck_assert_uint_eq(rl__share_ewma(3, 10, UINT32_MAX), 10); /* alpha clamped */
    ck_assert_uint_eq(rl__share_ewma(UINT32_MAX, UINT32_MAX, 30000), ONE);
    ck_assert_uint_eq(rl__share_ewma(0, UINT32_MAX, 65536), ONE);
}
END_TEST

START_TEST(test_ewma_random_bounds)
{
    rng_state = 11;
    for (int k = 0; k < 200000; k++) {
        uint32_t prev = rng_below(ONE + 2), sample = rng_below(ONE + 2);
        uint32_t a = rng_below(65538);
        uint32_t v = rl__share_ewma(prev, sample, a);
        uint32_t cp = prev < ONE ? prev : ONE, cs = sample < ONE ? sample : ONE;
        uint32_t lo = cp < cs ? cp : cs, hi = cp < cs ? cs : cp;
        EXPECT(v >= lo && v <= hi, "ewma(%u,%u,%u)=%u outside [%u, %u]", prev, sample, a,
               v, lo, hi);
        /* Within half a unit of the exact value, or one step from prev. */
        uint32_t ca = a < 65536 ? a : 65536;
        uint64_t num2 = 2 * ((uint64_t)ca * cs + (uint64_t)(65536 - ca) * cp);
        uint64_t v2 = (uint64_t)v * 2 * 65536;
        uint64_t dist = v2 > num2 ? v2 - num2 : num2 - v2;
        int stepped = ca > 0 && cs != cp && (v == cp + 1 || v + 1 == cp);
        EXPECT(dist <= 65536 || stepped, "ewma(%u,%u,%u)=%u", prev, sample, a, v);
    }
}
END_TEST

START_TEST(test_ewma_reaches_sample)
{
    /* The smallest alpha still gets all the way there (no residue). */
    uint32_t v = ONE;
    unsigned steps = 0;
    while (v != 0 && steps < 2000000) {
        uint32_t nv = rl__share_ewma(v, 0, 1);
        EXPECT(nv < v, "ewma(%u, 0, 1) = %u", v, nv);
        v = nv;
        steps++;
    }
    ck_assert_uint_eq(v, 0);
    v = 0;
    for (steps = 0; v != ONE && steps < 100; steps++)
        v = rl__share_ewma(v, ONE, 32768);
    ck_assert_uint_eq(v, ONE);
}
END_TEST

/* --------------------------------------------------- random invariants */

static uint32_t random_demand(int kind)
{
    switch (kind) {
    case 0: return 0;
    case 1: return rng_below(64);                 /* tiny: ties and remainders */
    case 2: return ONE + rng_below(UINT32_MAX - ONE); /* over the cap */
    case 3: return PCT(rng_below(5) * 25);        /* exact ties */
    default: return rng_below(ONE + 1);
    }
}

static rl_share_params_t random_params(void)
{
    rl_share_params_t p;
    rl__share_params_init(&p);
    static const uint32_t bursts[] = {0, 1, 2, 3, 7, 10, 100, 1000000000, UINT32_MAX};
    p.burst = rng() & 1 ? bursts[rng_below(9)] : rng_below(100000);
    p.reserve_q = rng() & 1 ? RL_SHARE_RESERVE_DEFAULT : rng_below(UINT64_C(2) * ONE);
    p.over_q = rng() & 1 ? 0 : (rng() & 1 ? rng_below(ONE / 4) : (uint32_t)rng());
    p.gain_q16 = rng() & 1 ? RL_SHARE_GAIN_DEFAULT : (uint32_t)rng() >> rng_below(32);
    p.max_cut_q = rng() & 1 ? RL_SHARE_MAX_CUT_DEFAULT : rng_below(UINT64_C(2) * ONE);
    return p;
}

static void random_round(size_t n)
{
    uint32_t *d = calloc(n, sizeof *d), *r = calloc(n, sizeof *r), *b = calloc(n, sizeof *b);
    uint32_t *rr = calloc(n, sizeof *rr), *rb = calloc(n, sizeof *rb);
    ck_assert(d && r && b && rr && rb);
    int mix = (int)rng_below(6); /* 5: every kind mixed */
    for (size_t i = 0; i < n; i++)
        d[i] = random_demand(mix == 5 ? (int)rng_below(5) : mix);
    rl_share_params_t p = random_params();
    compute(&p, d, n, r, b);
    check_invariants(&p, d, n, r, b);
    ref_compute(&p, d, n, rr, rb);
    assert_array(r, rr, n, "rate vs reference");
    assert_array(b, rb, n, "burst vs reference");
    free(d);
    free(r);
    free(b);
    free(rr);
    free(rb);
}

START_TEST(test_random_small)
{
    rng_state = 42;
    for (int k = 0; k < 20000; k++)
        random_round(1 + rng_below(40));
}
END_TEST

START_TEST(test_random_large)
{
    rng_state = 4242;
    for (int k = 0; k < 40; k++)
        random_round(100 + rng_below(3000));
    random_round(10000);
    random_round(10000);
}
END_TEST

START_TEST(test_ten_thousand_nodes)
{
    enum { N = 10000 };
    static uint32_t d[N], r[N], b[N];
    /* Half idle, half wanting 1/1000 each (5x the limit in total). */
    for (size_t i = 0; i < N; i++)
        d[i] = i % 2 ? ONE / 1000 : 0;
    rl_share_params_t p = params(5000, RL_SHARE_RESERVE_DEFAULT, 0);
    compute(&p, d, N, r, b);
    check_invariants(&p, d, N, r, b);
    /* f = 83; A = 15947216 over 5000 busy nodes: 3189 each, 2216 left for
     * the lowest-index busy ones (odd i < 4432), so step 5 gives 3273 and
     * 3272 to the busy nodes and 83 to the idle. Burst 5000 < n: the 5000
     * busy nodes hold the tokens. Freed 5000 * 83 = 415000, held
     * 16777216 - 415000 = 16362216: 415000 * 3273 / 16362216 = 83.01 and
     * 415000 * 3272 / 16362216 = 82.99, so 2216 * 83 + 2784 * 82 = 412216
     * given and 2784 left, one each to the busy nodes i < 2 * 2784:
     *   odd i < 4432          3273 + 83 + 1 = 3357
     *   odd 4432 <= i < 5568  3272 + 82 + 1 = 3355
     *   odd i >= 5568         3272 + 82     = 3354
     * (2216 * 3357 + 568 * 3355 + 2216 * 3354 = 16777216). */
    for (size_t i = 0; i < N; i++) {
        uint32_t want = i % 2 == 0 ? 0 : i < 4432 ? 3357 : i < 5568 ? 3355 : 3354;
        ck_assert_uint_eq(r[i], want);
        ck_assert_uint_eq(b[i], i % 2);
    }
    /* Reserve / n rounds to zero with more nodes than reserve units. */
    p.reserve_q = 9999;
    compute(&p, d, N, r, b);
    check_invariants(&p, d, N, r, b);
    ck_assert_uint_eq(sum32(r, N), ONE);
}
END_TEST

/* ------------------------------------------------------ step response */

/* K nodes, each round: offered load (fraction of the limit, uncapped) is
 * admitted up to the node's share, the node reports admitted + denied as
 * its demand sample (admitted alone would pin demand to the share it was
 * given), the sample goes through the EWMA, and the rule recomputes the
 * shares. Over-consumption comes from the admitted total. */
#define SIM_MAX 16
#define SIM_ROUNDS 80

typedef struct sim {
    size_t k;
    uint32_t alpha;
    uint32_t demand[SIM_MAX], rate[SIM_MAX], burst[SIM_MAX];
    uint32_t hist[SIM_ROUNDS][SIM_MAX]; /* rate after each round */
} sim_t;

static void sim_init(sim_t *s, size_t k, uint32_t alpha)
{
    memset(s, 0, sizeof *s);
    s->k = k;
    s->alpha = alpha;
    rl_share_params_t p = params(100, RL_SHARE_RESERVE_DEFAULT, 0);
    compute(&p, s->demand, k, s->rate, s->burst);
}

/* extra_over: over-consumption reported on top of what the round admitted,
 * as when usage recorded during an outage is replayed. */
static void sim_round(sim_t *s, int round, const uint32_t *offered, uint32_t extra_over)
{
    uint64_t admitted = 0;
    for (size_t i = 0; i < s->k; i++) {
        uint32_t adm = offered[i] < s->rate[i] ? offered[i] : s->rate[i];
        uint32_t denied = offered[i] - adm;
        admitted += adm;
        s->demand[i] = rl__share_ewma(s->demand[i], adm + denied, s->alpha);
    }
    uint32_t over = (admitted > ONE ? (uint32_t)(admitted - ONE) : 0) + extra_over;
    rl_share_params_t p = params(100, RL_SHARE_RESERVE_DEFAULT, over);
    compute(&p, s->demand, s->k, s->rate, s->burst);
    check_invariants(&p, s->demand, s->k, s->rate, s->burst);
    memcpy(s->hist[round], s->rate, s->k * sizeof *s->rate);
}

/* Run: load `before` for rounds [0, step), `after` from then on. */
static void sim_run(sim_t *s, int step, const uint32_t *before, const uint32_t *after)
{
    for (int r = 0; r < SIM_ROUNDS; r++)
        sim_round(s, r, r < step ? before : after, 0);
}

/* No node's share leaves the band between where it was before the step and
 * where it settles, by more than 1% of the limit. */
static void assert_no_overshoot(const sim_t *s, int step)
{
    for (size_t i = 0; i < s->k; i++) {
        uint32_t pre = s->hist[step - 1][i], fin = s->hist[SIM_ROUNDS - 1][i];
        uint32_t lo = pre < fin ? pre : fin, hi = pre < fin ? fin : pre;
        for (int r = step; r < SIM_ROUNDS; r++) {
            ck_assert_msg(s->hist[r][i] + PCT(1) >= lo && s->hist[r][i] <= hi + PCT(1),
                          "node %zu round %d: %u outside [%u, %u] +- 1%%", i, r,
                          s->hist[r][i], lo, hi);
        }
    }
}

static void assert_monotone(const sim_t *s, size_t node, int step, int rising)
{
    for (int r = step; r < SIM_ROUNDS; r++) {
        uint32_t a = s->hist[r - 1][node], b = s->hist[r][node];
        ck_assert_msg(rising ? b >= a : b <= a, "node %zu round %d: %u -> %u", node, r, a, b);
    }
}

/* First round after the step at which the nodes in `set` hold >= pct%. */
static int rounds_to(const sim_t *s, const size_t *set, size_t m, int step, unsigned pct)
{
    for (int r = step; r < SIM_ROUNDS; r++) {
        uint64_t sum = 0;
        for (size_t j = 0; j < m; j++)
            sum += s->hist[r][set[j]];
        if (sum >= (uint64_t)ONE * pct / 100)
            return r - step + 1;
    }
    return -1;
}

START_TEST(test_step_one_node_to_another)
{
    /* Ten nodes, all load (2x the limit) on node 0, then on node 1. */
    enum { K = 10, STEP = 30 };
    uint32_t before[K] = {0}, after[K] = {0};
    before[0] = 2 * ONE;
    after[1] = 2 * ONE;
    static sim_t s;
    sim_init(&s, K, 32768);
    sim_run(&s, STEP, before, after);
    size_t b = 1;
    int n90 = rounds_to(&s, &b, 1, STEP, 90);
    printf("step 0->1, alpha 0.5: node 1 share %%:");
    for (int r = STEP - 1; r < STEP + 8; r++)
        printf(" %.2f", 100.0 * s.hist[r][1] / ONE);
    printf("; >= 90%% after %d rounds, settles at %.3f%%\n", n90,
           100.0 * s.hist[SIM_ROUNDS - 1][1] / ONE);
    ck_assert_int_ge(n90, 1);
    ck_assert_int_le(n90, 6);
    assert_monotone(&s, 1, STEP, 1);
    assert_monotone(&s, 0, STEP, 0);
    assert_no_overshoot(&s, STEP);
    /* Settled: node 1 has all but the other nodes' floors. */
    ck_assert_uint_eq(s.hist[SIM_ROUNDS - 1][1], ONE - 9 * 83886);
}
END_TEST

START_TEST(test_step_set_to_set)
{
    /* Nodes 0-2 at 50% of the limit each, then nodes 5-8 at 50% each. */
    enum { K = 12, STEP = 25 };
    uint32_t before[K] = {0}, after[K] = {0};
    for (size_t i = 0; i < 3; i++)
        before[i] = ONE / 2;
    size_t set_b[4] = {5, 6, 7, 8};
    for (size_t j = 0; j < 4; j++)
        after[set_b[j]] = ONE / 2;
    static sim_t s;
    sim_init(&s, K, 32768);
    sim_run(&s, STEP, before, after);
    int n90 = rounds_to(&s, set_b, 4, STEP, 90);
    printf("step {0,1,2}->{5,6,7,8}, alpha 0.5: >= 90%% after %d rounds\n", n90);
    ck_assert_int_ge(n90, 1);
    ck_assert_int_le(n90, 8);
    for (size_t j = 0; j < 4; j++)
        assert_monotone(&s, set_b[j], STEP, 1);
    for (size_t i = 0; i < 3; i++)
        assert_monotone(&s, i, STEP, 0);
    assert_no_overshoot(&s, STEP);
}
END_TEST

START_TEST(test_step_alpha_sweep)
{
    /* Rounds to 90% must track the EWMA's own time constant. */
    static const uint32_t alphas[] = {16384, 32768, 49152, 65536};
    static const int bound[] = {12, 6, 4, 1};
    enum { K = 8, STEP = 40 };
    uint32_t before[K] = {0}, after[K] = {0};
    before[3] = ONE;
    after[6] = ONE;
    for (size_t a = 0; a < 4; a++) {
        static sim_t s;
        sim_init(&s, K, alphas[a]);
        sim_run(&s, STEP, before, after);
        size_t b = 6;
        int n90 = rounds_to(&s, &b, 1, STEP, 90);
        printf("alpha %.2f: >= 90%% after %d rounds\n", alphas[a] / 65536.0, n90);
        ck_assert_int_ge(n90, 1);
        ck_assert_int_le(n90, bound[a]);
        assert_monotone(&s, 6, STEP, 1);
        assert_monotone(&s, 3, STEP, 0);
        assert_no_overshoot(&s, STEP);
    }
}
END_TEST

START_TEST(test_step_under_contention)
{
    /* Node 0 steady at 50%; node 1 steps from 10% to 100%: the two meet at
     * the max-min fair level without either swinging past it. */
    enum { K = 4, STEP = 30 };
    uint32_t before[K] = {ONE / 2, ONE / 10, 0, 0}, after[K] = {ONE / 2, ONE, 0, 0};
    static sim_t s;
    sim_init(&s, K, 32768);
    sim_run(&s, STEP, before, after);
    assert_monotone(&s, 1, STEP, 1);
    assert_monotone(&s, 0, STEP, 0);
    assert_no_overshoot(&s, STEP);
    /* f = 209715, A = 15938356 split 7969178 each. */
    ck_assert_uint_eq(s.hist[SIM_ROUNDS - 1][0], 209715 + 7969178);
    ck_assert_uint_eq(s.hist[SIM_ROUNDS - 1][1], 209715 + 7969178);
}
END_TEST

START_TEST(test_replay_no_deny_storm)
{
    /* Settled at 5 nodes with mixed demand, one round reports 50x the limit
     * consumed (replayed after an outage): every share drops by at most the
     * max cut's part of it, and the next clean round restores them. */
    enum { K = 5, R = 30 };
    uint32_t load[K] = {ONE / 10, ONE / 3, ONE, 0, ONE / 2};
    static sim_t s;
    sim_init(&s, K, 32768);
    for (int r = 0; r < R; r++)
        sim_round(&s, r, load, r == R - 2 ? 50 * ONE : 0);
    const uint32_t *settled = s.hist[R - 3], *hit = s.hist[R - 2], *after = s.hist[R - 1];
    uint64_t before_sum = sum32(settled, K), hit_sum = sum32(hit, K);
    ck_assert_uint_eq(before_sum, ONE);
    ck_assert_uint_eq(hit_sum, ONE - RL_SHARE_MAX_CUT_DEFAULT);
    for (size_t i = 0; i < K; i++) {
        ck_assert_uint_le(hit[i], settled[i]);
        ck_assert_uint_le(settled[i] - hit[i], RL_SHARE_MAX_CUT_DEFAULT);
        ck_assert_uint_eq(after[i], settled[i]);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("share");
    TCase *t = tcase_create("rule");
    tcase_add_test(t, test_fill_small_satisfied_first);
    tcase_add_test(t, test_fill_remainder_to_lowest_index);
    tcase_add_test(t, test_floors_and_slack);
    tcase_add_test(t, test_zero_demand_equal);
    tcase_add_test(t, test_one_node_gets_everything);
    tcase_add_test(t, test_no_nodes_and_bad_args);
    tcase_add_test(t, test_demand_capped);
    tcase_add_test(t, test_burst_one_over_ten_nodes);
    tcase_add_test(t, test_burst_one_even_demand);
    tcase_add_test(t, test_burst_first_token_each);
    tcase_add_test(t, test_burst_sweep_around_n);
    tcase_add_test(t, test_thousand_nodes_by_hand);
    tcase_add_test(t, test_correction_bounds);
    tcase_add_test(t, test_correction_monotone_and_bounded);
    suite_add_tcase(s, t);
    TCase *e = tcase_create("ewma");
    tcase_add_test(e, test_ewma_values);
    tcase_add_test(e, test_ewma_random_bounds);
    tcase_add_test(e, test_ewma_reaches_sample);
    suite_add_tcase(s, e);
    TCase *r = tcase_create("random");
    tcase_set_timeout(r, 120);
    tcase_add_test(r, test_random_small);
    tcase_add_test(r, test_random_large);
    tcase_add_test(r, test_ten_thousand_nodes);
    suite_add_tcase(s, r);
    TCase *st = tcase_create("step");
    tcase_add_test(st, test_step_one_node_to_another);
    tcase_add_test(st, test_step_set_to_set);
    tcase_add_test(st, test_step_alpha_sweep);
    tcase_add_test(st, test_step_under_contention);
    tcase_add_test(st, test_replay_no_deny_storm);
    suite_add_tcase(s, st);
    return s;
}

int main(void)
{
    return rl_test_run(suite());
}
