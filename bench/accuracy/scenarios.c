/* SPDX-License-Identifier: MIT */
/*
 * The scenarios: who offers how much and when, and the targets each one is
 * judged on. Every scenario is also checked window by window against the
 * overshoot bound (acc_judge_bound). The many-keys scenario lives in
 * many.c: its load and its targets are of another kind.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "acc.h"

const char *const acc_scen_names[] = {"uniform",   "skew",        "shift",       "churn",
                                      "high",      "low",         "cold",        "flush",
                                      "residual",  "partition",   "many",        "tiered-low",
                                      "tiered-skew", "tiered-uniform", "hot-skew",
                                      "hot-uniform", "hot-shift", NULL};

int acc_node_live(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    return t_ms >= sc->join_ms[node] && t_ms < sc->death_ms[node];
}

/* ---------------------------------------------------------------- load */

static double per_node(const acc_scen_t *sc, int share_of)
{
    return sc->load * (double)sc->rate / share_of;
}

/* Every live node offers the same: the load spread evenly over the nodes. */
static double offered_even(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    (void)node;
    (void)t_ms;
    return per_node(sc, sc->nodes);
}

/* skew: three nodes spread through the fleet (so the script's name order
 * gives them no advantage) carry all the traffic. */
static int skew_busy(int node) { return node % 6 == 3; }

static double offered_skew(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    (void)t_ms;
    return skew_busy(node) ? per_node(sc, 3) : 0.0;
}

/* shift: the first half of the nodes (set A) carries the load until the
 * event, the second half (set B) after it. */
static int shift_in_b(const acc_scen_t *sc, int node) { return node >= sc->nodes / 2; }

static double offered_shift(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    int half = sc->nodes / 2;
    int on = t_ms < sc->event_ms ? !shift_in_b(sc, node) : shift_in_b(sc, node);
    return on ? per_node(sc, half) : 0.0;
}

/* residual: as shift, but A keeps offering sc->residual of the limit
 * after the event (spread over its nodes): their demand falls and does not
 * stop. */
static double offered_residual(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    int half = sc->nodes / 2;
    if (t_ms >= sc->event_ms && !shift_in_b(sc, node))
        return sc->residual * (double)sc->rate / half;
    return offered_shift(sc, node, t_ms);
}

/* partition: the cut node carries 75% of the load until the cut, so it
 * holds a large share then and its ramp down to the degraded rate counts;
 * from the cut on the others' load grows to the whole offered load (their
 * clients fail over to them), so they can use all the rate Redis hands
 * them once the cut node's entry expires: the worst case of the bound. */
static double offered_partition(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    double all = sc->load * (double)sc->rate;
    if (node == sc->cut_node)
        return 0.75 * all;
    return (t_ms < sc->event_ms ? 0.25 : 1.0) * all / (sc->nodes - 1);
}

/* flush: n00 carries 80% of the load, the others share the rest, so each
 * of them offers a small part of the limit and reports every quiet
 * period. */
static double offered_flush(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    (void)t_ms;
    double all = sc->load * (double)sc->rate;
    return node == 0 ? 0.8 * all : 0.2 * all / (sc->nodes - 1);
}

/* churn: each live node offers load/5 of the limit, so five nodes offer
 * the whole load and the survivors of a death still offer more than the
 * limit. Liveness (join, death) is applied by the drivers. */
static double offered_churn(const acc_scen_t *sc, int node, uint64_t t_ms)
{
    (void)node;
    (void)t_ms;
    return per_node(sc, 5);
}

/* ---------------------------------------------------------------- helpers */

static uint64_t round_limit(const acc_scen_t *sc)
{
    return sc->rate * sc->interval_ms / 1000;
}

/* The first round from `from` in which the nodes in mask admit at least
 * frac of a round's limit; rounds are counted from 1. 0: never. */
static uint32_t rounds_to_reach(const acc_scen_t *sc, const acc_result_t *res, uint32_t from,
                                uint64_t mask, double frac)
{
    double need = frac * (double)round_limit(sc);
    for (uint32_t r = from; r < res->rounds; r++)
        if ((double)acc_round_adm(res, r, mask) >= need)
            return r - from + 1;
    return 0;
}

/* Mean admitted per round by mask over rounds [from, to), as a fraction
 * of a round's limit. */
static double mean_share(const acc_scen_t *sc, const acc_result_t *res, uint32_t from,
                         uint32_t to, uint64_t mask)
{
    uint64_t s = 0;
    for (uint32_t r = from; r < to; r++)
        s += acc_round_adm(res, r, mask);
    return to > from ? (double)s / (double)(to - from) / (double)round_limit(sc) : 0.0;
}

/* The k rounds from `from` as percentages of a round's limit, e.g.
 * "95 119 123 101 89": a target met in one round can hide a dip after it. */
static void round_series(const acc_scen_t *sc, const acc_result_t *res, uint32_t from,
                         uint32_t k, uint64_t mask, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t r = from; r < from + k && r < res->rounds; r++) {
        double pct = 100.0 * (double)acc_round_adm(res, r, mask) / (double)round_limit(sc);
        int w = snprintf(buf + off, len - off, "%s%.0f", r > from ? " " : "", pct);
        if (w < 0 || (size_t)w >= len - off)
            break;
        off += (size_t)w;
    }
}

/* Every 1-s window starting at or after `from_ms` within [lo, hi] of the
 * limit. */
static void judge_band(const acc_scen_t *sc, const acc_result_t *res, int gated,
                       acc_verdicts_t *v, uint64_t from_ms, double lo_frac, double hi_frac,
                       const char *target)
{
    uint64_t lo, hi;
    acc_window_range(res->adm_ms, res->duration_ms, ACC_WINDOW_MS, from_ms, res->duration_ms,
                     &lo, &hi);
    double l = (double)lo / (double)sc->rate, h = (double)hi / (double)sc->rate;
    acc_verdict(v, sc->name, gated, l >= lo_frac && h <= hi_frac, target,
                "windows from %" PRIu64 " ms: %.1f%% .. %.1f%% of the limit", from_ms,
                100.0 * l, 100.0 * h);
}

/* ---------------------------------------------------------------- judges */

/* The sync traffic the key cost: the fleet's key reports and report script
 * calls per second of the run (virtual mode counts them; the hot policy's
 * saving is this figure against its sync-policy twin's), and per busy
 * node-round (a node offering load in a round: 1.0 is a report in every
 * one, the sync policy for a key near its limit). max_part > 0 gates that
 * part (hot_policy=local: about 1/hot_every after the first rounds). */
static void judge_redis_ops(const acc_scen_t *sc, const acc_result_t *res, int gated,
                            acc_verdicts_t *v, double max_part)
{
    if (!res->shares_known)
        return;
    uint64_t busy = 0;
    for (size_t c = 0; c < (size_t)res->rounds * (size_t)res->nodes; c++)
        busy += res->node_off[c] > 0;
    double secs = (double)res->duration_ms / 1000.0;
    double part = busy > 0 ? (double)res->reports / (double)busy : 0.0;
    char what[160];
    snprintf(what, sizeof what,
             "%.1f reports/s, %.1f calls/s (%" PRIu64 " and %" PRIu64 " in %.0f s); %.2f "
             "reports per busy node-round",
             (double)res->reports / secs, (double)res->calls / secs, res->reports, res->calls,
             secs, part);
    if (max_part > 0) {
        char target[112];
        snprintf(target, sizeof target, "key reports <= %.2f per busy node-round", max_part);
        acc_verdict(v, sc->name, gated, part <= max_part, target, "%s", what);
    } else {
        acc_verdict(v, sc->name, ACC_INFO, 1, "Redis: key reports and report calls", "%s",
                    what);
    }
}

/* hot_policy=local's saving, gated where the key's nodes are steadily near
 * (skew, uniform: 0.27-0.33 measured with hot_every 4, the sync policy's
 * 1.0), informational where its load moves (shift). */
static double hot_max_part(const acc_scen_t *sc)
{
    return sc->hot_every > 1 && sc->event_ms == 0 ? 0.4 : 0.0;
}

static void judge_uniform(const acc_scen_t *sc, const acc_result_t *res, int gated,
                          acc_verdicts_t *v)
{
    judge_band(sc, res, gated, v, 2u * sc->interval_ms, 0.95, 1.05,
               "after 2 rounds every 1-s window 95-105% of the limit");
    acc_judge_bound(sc, res, gated, v);
    judge_redis_ops(sc, res, gated, v, hot_max_part(sc));
}

static void judge_skew(const acc_scen_t *sc, const acc_result_t *res, int gated,
                       acc_verdicts_t *v)
{
    uint64_t busy = 0;
    for (int i = 0; i < sc->nodes; i++)
        busy |= (uint64_t)skew_busy(i) << i;
    uint32_t k = rounds_to_reach(sc, res, 0, busy, 0.95);
    double steady = mean_share(sc, res, res->rounds / 2, res->rounds, busy);
    acc_verdict(v, sc->name, gated, k >= 1 && k <= 5, ">= 95% of the limit within 5 rounds",
                "reached in round %u (0: never); mean of the 2nd half %.1f%%", k,
                100.0 * steady);
    acc_judge_bound(sc, res, gated, v);
    judge_redis_ops(sc, res, gated, v, hot_max_part(sc));
}

static void judge_shift(const acc_scen_t *sc, const acc_result_t *res, int gated,
                        acc_verdicts_t *v)
{
    uint64_t b = 0;
    for (int i = 0; i < sc->nodes; i++)
        b |= (uint64_t)shift_in_b(sc, i) << i;
    uint32_t at = (uint32_t)(sc->event_ms / sc->interval_ms);
    uint32_t k = rounds_to_reach(sc, res, at, b, 0.90);
    double after = mean_share(sc, res, at + 5, res->rounds, b);
    char series[96];
    round_series(sc, res, at, 6, b, series, sizeof series);
    acc_verdict(v, sc->name, gated, k >= 1 && k <= 3, "B >= 90% within 3 rounds of the shift",
                "reached in round %u after it (0: never); B's rounds 1-6 after it: %s%%; "
                "mean from round 6 on %.1f%%",
                k, series, 100.0 * after);
    acc_judge_bound(sc, res, gated, v);
    judge_redis_ops(sc, res, gated, v, hot_max_part(sc));
}

static void judge_churn(const acc_scen_t *sc, const acc_result_t *res, int gated,
                        acc_verdicts_t *v)
{
    int dead = 0, joiner = sc->nodes - 1;
    uint64_t survivors = acc_all_nodes(sc->nodes) & ~(UINT64_C(1) << dead);
    uint32_t death = (uint32_t)(sc->death_ms[dead] / sc->interval_ms);
    uint32_t join = (uint32_t)(sc->join_ms[joiner] / sc->interval_ms);
    double before = mean_share(sc, res, death > 5 ? death - 5 : 0, death, survivors);
    uint32_t k = rounds_to_reach(sc, res, death, survivors, 0.90);
    char series[96];
    round_series(sc, res, death, 6, survivors, series, sizeof series);
    acc_verdict(v, sc->name, gated, k >= 1 && k <= 5,
                "survivors >= 90% within 5 rounds of the death",
                "reached in round %u after it (0: never); rounds 1-6 after it: %s%%; "
                "they held %.1f%% before it",
                k, series, 100.0 * before);
    /* Informational: how fast the joiner gets a fair part (1/6 of the
     * limit among six demanding nodes, 80% of it counts). */
    uint32_t j = rounds_to_reach(sc, res, join, UINT64_C(1) << joiner, 0.8 / 6.0);
    acc_verdict(v, sc->name, 0, j >= 1, "joiner admits >= 80% of a fair 1/6 part",
                "in round %u after joining (0: never)", j);
    acc_judge_bound(sc, res, gated, v);
}

/* After an event (a flush, a shift with residual traffic), the nodes in
 * mask must be back at >= 90% of the limit within 3 rounds and stay there:
 * every 1-s window starting from the 3rd round after it, for 2 s, holds
 * >= 90% of the limit. The faults this catches take share away for a quiet
 * period (1 s), which "reached once" would not see, and single rounds are
 * too noisy (a round's 100 requests, Poisson) to gate one by one. */
static void judge_recovery(const acc_scen_t *sc, const acc_result_t *res, int gated,
                           acc_verdicts_t *v, uint64_t mask, const char *who)
{
    uint32_t at = (uint32_t)(sc->event_ms / sc->interval_ms);
    uint32_t k = rounds_to_reach(sc, res, at, mask, 0.90);
    uint64_t from = sc->event_ms + 2u * sc->interval_ms;
    uint64_t to = from + 2 * ACC_WINDOW_MS;
    double worst = 1e9;
    uint64_t worst_at = from;
    for (uint64_t t0 = from; t0 <= to && t0 + ACC_WINDOW_MS <= res->duration_ms;
         t0 += sc->interval_ms) {
        uint64_t sum = 0;
        for (uint32_t r = (uint32_t)(t0 / sc->interval_ms);
             r < (uint32_t)((t0 + ACC_WINDOW_MS) / sc->interval_ms); r++)
            sum += acc_round_adm(res, r, mask);
        double f = (double)sum / (double)sc->rate;
        if (f < worst) {
            worst = f;
            worst_at = t0;
        }
    }
    char series[96], target[112];
    round_series(sc, res, at, 12, mask, series, sizeof series);
    snprintf(target, sizeof target,
             "%s >= 90%% within 3 rounds, and in every 1-s window from round 3 for 2 s", who);
    acc_verdict(v, sc->name, gated, k >= 1 && k <= 3 && worst >= 0.90, target,
                "reached in round %u (0: never); lowest window %.1f%% (from %" PRIu64
                " ms); rounds 1-12 after: %s%%",
                k, 100.0 * worst, worst_at, series);
}

static void judge_flush(const acc_scen_t *sc, const acc_result_t *res, int gated,
                        acc_verdicts_t *v)
{
    judge_recovery(sc, res, gated, v, acc_all_nodes(sc->nodes), "fleet");
    acc_judge_bound(sc, res, gated, v);
}

static void judge_residual(const acc_scen_t *sc, const acc_result_t *res, int gated,
                           acc_verdicts_t *v)
{
    uint64_t b = 0;
    for (int i = 0; i < sc->nodes; i++)
        b |= (uint64_t)shift_in_b(sc, i) << i;
    judge_recovery(sc, res, gated, v, acc_all_nodes(sc->nodes), "fleet");
    uint32_t at = (uint32_t)(sc->event_ms / sc->interval_ms);
    char series[96];
    round_series(sc, res, at, 12, b, series, sizeof series);
    acc_verdict(v, sc->name, ACC_INFO, 1, "B's part after the shift",
                "B's rounds 1-12 after it: %s%%; A offers %.0f%% of the limit", series,
                100.0 * sc->residual);
    acc_judge_bound(sc, res, gated, v);
}

/* partition: n00 cut off from Redis (its rounds fail, it is degraded and
 * admits by on_failure=local) while the other nine still sync. The bound
 * checked is the partial-partition one (docs/operations.md): the whole
 * rate for the connected nodes once n00's entry expired, plus n00's
 * degraded rate, tokens and ramp. Shown beside it: the same windows
 * against the bound without the cut node's terms, which they pass once
 * n00's share is handed to the others. */
static void judge_partition(const acc_scen_t *sc, const acc_result_t *res, int gated,
                            acc_verdicts_t *v)
{
    acc_bound_t plain, part;
    acc_bound_init(&plain, sc);
    part = plain;
    acc_bound_cut(&part, sc, res);
    uint64_t win = res->duration_ms >= ACC_LONG_WINDOW_MS ? ACC_LONG_WINDOW_MS : ACC_WINDOW_MS;
    acc_windows_t w;
    acc_check_windows(res->adm_ms, res->duration_ms, win, res->interval_ms, &plain, &w);
    uint32_t cut = (uint32_t)(sc->event_ms / sc->interval_ms);
    uint32_t heal = (uint32_t)(sc->heal_ms / sc->interval_ms);
    uint64_t node = UINT64_C(1) << sc->cut_node;
    uint64_t others = acc_all_nodes(sc->nodes) & ~node;
    char target[112];
    snprintf(target, sizeof target, "%.0f-s windows against the bound without the cut node",
             (double)win / 1000.0);
    /* Settled: from the ramp's end (1 s) to the heal, when there is one. */
    uint32_t from = cut + 10 < heal ? cut + 10 : cut;
    double secs = (double)(heal - from) * sc->interval_ms / 1000.0;
    double cut_rate = secs > 0 ? (double)acc_round_adm(res, from, node) : 0.0;
    for (uint32_t r = from + 1; r < heal; r++)
        cut_rate += (double)acc_round_adm(res, r, node);
    cut_rate = secs > 0 ? cut_rate / secs : 0.0;
    acc_verdict(v, sc->name, ACC_INFO, 1, target,
                "worst %" PRIu64 " at %" PRIu64 " ms = %.1f%% of %.0f (%.0f with n00's terms)",
                w.worst_adm, w.worst_at, 100.0 * w.worst, acc_bound_at(&plain, (double)win),
                acc_bound_at(&part, (double)win));
    char held[80] = "its share when cut not read in real time (the bound assumes 1)";
    if (res->cut_q >= 0.0)
        snprintf(held, sizeof held, "held %.3f of the rate and %.0f tokens when cut",
                 res->cut_q, res->cut_b);
    acc_verdict(v, sc->name, ACC_INFO, 1, "n00 while cut off, after its ramp",
                "%s; admitted %.1f/s, the others %.1f%% of the limit", held, cut_rate,
                100.0 * mean_share(sc, res, from, heal, others));
    acc_judge_bound(sc, res, gated, v);
}

/* cold: every node far over its share from the first ms, so every node
 * reports every round and only the cold start itself can overshoot. */
static void judge_cold(const acc_scen_t *sc, const acc_result_t *res, int gated,
                       acc_verdicts_t *v)
{
    uint64_t lo, hi;
    acc_window_range(res->adm_ms, res->duration_ms, ACC_WINDOW_MS, 0, 0, &lo, &hi);
    char shares[64] = "not read in real time";
    if (res->shares_known && res->rounds > 1)
        snprintf(shares, sizeof shares, "%.3f of the limit", res->sum_q[1]);
    acc_verdict(v, sc->name, ACC_INFO, 1, "first 1-s window and round 1's shares",
                "%" PRIu64 " admitted in [0, 1 s) = %.1f%% of the limit; sum of local rates "
                "in round 1: %s",
                lo, 100.0 * (double)lo / (double)sc->rate, shares);
    acc_judge_bound(sc, res, gated, v);
}

static void judge_high(const acc_scen_t *sc, const acc_result_t *res, int gated,
                       acc_verdicts_t *v)
{
    judge_band(sc, res, gated, v, 2u * sc->interval_ms, 0.98, 1.02,
               "after 2 rounds every 1-s window within +-2% of the limit");
    acc_judge_bound(sc, res, gated, v);
}

static void judge_low(const acc_scen_t *sc, const acc_result_t *res, int gated,
                      acc_verdicts_t *v)
{
    uint64_t total = 0, late = 0, from = 10000;
    for (uint64_t t = 0; t < res->duration_ms; t++) {
        total += res->adm_ms[t];
        late += t >= from ? res->adm_ms[t] : 0;
    }
    double secs = (double)(res->duration_ms - from) / 1000.0;
    acc_verdict(v, sc->name, gated, total > 0, "admits (> 0)",
                "%" PRIu64 " admitted in %.0f s; from 10 s on %.3f/s = %.1f%% of the limit",
                total, (double)res->duration_ms / 1000.0, (double)late / secs,
                100.0 * (double)late / secs / (double)sc->rate);
    acc_judge_bound(sc, res, gated, v);
}

/* The part of a tiered run's checks that reached Redis: a target. */
static void judge_redis_part(const acc_scen_t *sc, const acc_result_t *res, acc_verdicts_t *v)
{
    double part = res->checks > 0 ? (double)res->redis_checks / (double)res->checks : 1.0;
    acc_verdict(v, sc->name, 0, part < 0.25, "< 25% of checks reach Redis",
                "%" PRIu64 " of %" PRIu64 " checks = %.1f%%", res->redis_checks, res->checks,
                100.0 * part);
}

/* tiered-low: one token a second over 10 nodes, the case the band cannot
 * serve (rate x interval / nodes = 0.01 token); every 1-s window admits at
 * most the limit plus one (the token a window can find in the bucket at its
 * start, and the one minted in it). */
static void judge_tiered_low(const acc_scen_t *sc, const acc_result_t *res, int gated,
                             acc_verdicts_t *v)
{
    uint64_t lo, hi, total = 0;
    for (uint64_t t = 0; t < res->duration_ms; t++)
        total += res->adm_ms[t];
    acc_window_range(res->adm_ms, res->duration_ms, ACC_WINDOW_MS, 0,
                     res->duration_ms - ACC_WINDOW_MS, &lo, &hi);
    acc_verdict(v, sc->name, gated, hi <= sc->rate + 1 && total > 0,
                "every sliding 1-s window <= limit + 1, and admits",
                "worst window %" PRIu64 " (limit %" PRIu64 "); %" PRIu64 " admitted in %.0f s",
                hi, sc->rate, total, (double)res->duration_ms / 1000.0);
    judge_redis_part(sc, res, v);
}

static void judge_tiered(const acc_scen_t *sc, const acc_result_t *res, int gated,
                         acc_verdicts_t *v)
{
    acc_judge_bound(sc, res, gated, v);
    judge_redis_part(sc, res, v);
}

/* ---------------------------------------------------------------- table */

static void base(acc_scen_t *sc, const char *name, int nodes, uint64_t rate, uint64_t burst,
                 double load, uint64_t secs)
{
    memset(sc, 0, sizeof *sc);
    sc->name = name;
    sc->nodes = nodes;
    sc->rate = rate;
    sc->burst = burst;
    sc->expected = (uint32_t)nodes;
    sc->interval_ms = 100;
    sc->load = load;
    sc->duration_ms = secs * 1000;
    for (int i = 0; i < ACC_MAX_NODES; i++)
        sc->death_ms[i] = ACC_NEVER;
    sc->offered = offered_even;
    sc->cut_node = -1;
}

static void make_churn(acc_scen_t *sc, int quick)
{
    base(sc, "churn", 6, 1000, 100, 3.0, quick ? 5 : 10);
    sc->what = "5 nodes + 1 joiner, each live node offers 0.6x; n05 joins, n00 dies "
               "(no close, no more rounds)";
    sc->expected = 5;
    sc->join_ms[5] = quick ? 1500 : 3000;
    sc->death_ms[0] = quick ? 3000 : 6000;
    sc->event_ms = sc->death_ms[0];
    sc->offered = offered_churn;
    sc->judge = judge_churn;
}

int acc_scen_make(const char *name, const acc_opts_t *o, acc_scen_t *sc)
{
    int q = o->quick;
    if (strcmp(name, "uniform") == 0) {
        base(sc, "uniform", 10, 1000, 100, 5.0, q ? 3 : 10);
        sc->what = "offered 5x the limit, spread evenly over the nodes";
        sc->judge = judge_uniform;
    } else if (strcmp(name, "skew") == 0) {
        base(sc, "skew", 20, 1000, 100, 2.0, q ? 3 : 10);
        sc->what = "offered 2x the limit, all on 3 of the 20 nodes (n03 n09 n15)";
        sc->offered = offered_skew;
        sc->judge = judge_skew;
    } else if (strcmp(name, "shift") == 0) {
        base(sc, "shift", 10, 1000, 100, 2.0, q ? 4 : 10);
        sc->what = "offered 2x the limit on n00-n04 (A), then on n05-n09 (B)";
        sc->event_ms = q ? 2000 : 5000;
        sc->offered = offered_shift;
        sc->judge = judge_shift;
    } else if (strcmp(name, "residual") == 0) {
        base(sc, "residual", 10, 1000, 100, 2.0, q ? 5 : 10);
        sc->what = "offered 2x the limit on n00-n04 (A), then on n05-n09 (B) while A keeps "
                   "offering 10% of the limit";
        sc->event_ms = q ? 2000 : 5000;
        sc->residual = 0.10;
        sc->offered = offered_residual;
        sc->judge = judge_residual;
    } else if (strcmp(name, "partition") == 0) {
        base(sc, "partition", 10, 1000, 100, 2.0, q ? 5 : 15);
        sc->what = "n00 offered 1.5x the limit throughout, the others 0.5x, 2x from the cut; "
                   "n00 cut off from Redis (on_failure=local, default degraded rate)";
        sc->cut_node = 0;
        sc->offered = offered_partition;
        sc->event_ms = q ? 1000 : 2000;
        sc->heal_ms = q ? 4000 : 14000;
        sc->judge = judge_partition;
    } else if (strcmp(name, "flush") == 0) {
        base(sc, "flush", 10, 1000, 100, 2.0, q ? 5 : 10);
        sc->what = "offered 2x the limit, 80% of it on n00; every Redis key deleted at the "
                   "event (FLUSHALL)";
        sc->event_ms = q ? 2000 : 5000;
        sc->flush_at_event = 1;
        sc->offered = offered_flush;
        sc->judge = judge_flush;
    } else if (strcmp(name, "churn") == 0) {
        make_churn(sc, q);
    } else if (strcmp(name, "high") == 0) {
        base(sc, "high", 4, 100000, 1000, 2.0, q ? 3 : 10);
        sc->what = "offered 2x the limit, spread evenly over the nodes";
        sc->judge = judge_high;
    } else if (strcmp(name, "cold") == 0) {
        base(sc, "cold", 10, 1000, 100, 20.0, q ? 2 : 3);
        sc->what = "extra: offered 20x the limit from a cold start, spread evenly";
        sc->judge = judge_cold;
    } else if (strcmp(name, "tiered-low") == 0) {
        base(sc, "tiered-low", 10, 1, 1, 5.0, q ? 20 : 60);
        sc->what = "mode=tiered: each node offers 0.5/s (5x the limit), evenly spaced, nodes "
                   "out of phase";
        sc->even_only = 1;
        sc->tiered = 1;
        sc->judge = judge_tiered_low;
    } else if (strcmp(name, "tiered-skew") == 0) {
        base(sc, "tiered-skew", 20, 1000, 100, 5.0, q ? 3 : 10);
        sc->what = "mode=tiered: offered 5x the limit, all on 3 of the 20 nodes";
        sc->offered = offered_skew;
        sc->tiered = 1;
        sc->judge = judge_tiered;
    } else if (strcmp(name, "tiered-uniform") == 0) {
        base(sc, "tiered-uniform", 10, 1000, 100, 5.0, q ? 3 : 10);
        sc->what = "mode=tiered: offered 5x the limit, spread evenly over the nodes";
        sc->tiered = 1;
        sc->judge = judge_tiered;
    } else if (strcmp(name, "hot-skew") == 0) {
        base(sc, "hot-skew", 20, 1000, 100, 2.0, q ? 3 : 10);
        sc->what = "as skew, hot=0.5 hot_policy=local hot_every=4";
        sc->hot_every = 4;
        sc->offered = offered_skew;
        sc->judge = judge_skew;
    } else if (strcmp(name, "hot-uniform") == 0) {
        base(sc, "hot-uniform", 10, 1000, 100, 5.0, q ? 3 : 10);
        sc->what = "as uniform, hot=0.5 hot_policy=local hot_every=4";
        sc->hot_every = 4;
        sc->judge = judge_uniform;
    } else if (strcmp(name, "hot-shift") == 0) {
        base(sc, "hot-shift", 10, 1000, 100, 2.0, q ? 4 : 10);
        sc->what = "as shift, hot=0.5 hot_policy=local hot_every=4";
        sc->hot_every = 4;
        sc->event_ms = q ? 2000 : 5000;
        sc->offered = offered_shift;
        sc->judge = judge_shift;
    } else if (strcmp(name, "low") == 0) {
        base(sc, "low", 10, 1, 1, 10.0, q ? 20 : 60);
        sc->what = "each node offers 1/s (10x the limit), evenly spaced, nodes out of phase";
        sc->even_only = 1;
        sc->judge = judge_low;
    } else {
        return -1;
    }
    return 0;
}
