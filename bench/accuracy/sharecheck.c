/* SPDX-License-Identifier: MIT */
/*
 * rl_share_check: an explicit-state model check of the share rule. Every
 * path of a small fleet (2 or 3 nodes, a few rounds) is explored: each
 * round each node's offered load is one of three levels, the nodes report
 * in every order, and at most once in a path one failure strikes (a node's
 * report is lost for a round, or a node dies). Each path is checked
 * against the overshoot bound README.md states ("The overshoot bound"):
 * every window of w rounds admits at most R*w + B + E, E = R + B (a synced
 * start: no pre-sync term), R = rate x interval, B = burst.
 *
 * Why an explorer in C: TLA+ and CBMC are not packaged here, and a C
 * explorer calls the real rule, src/sync/share.c (rl__share_compute,
 * rl__share_ewma), which a test keeps bit-for-bit equal to the scripts'
 * share.lua: the model cannot drift from the code on the rule itself.
 *
 * What is modelled of report.lua and the nodes (the rest is abstracted):
 *  - a report folds the node's offered and admitted rate of the round into
 *    its entry (EWMA, alpha 75%, the default demand_alpha_pct);
 *  - the round's first report computes every live entry's share (the
 *    correction's over-consumption from the admitted rates) and every
 *    report reads its own from that computation (once a round, as
 *    report.lua; its extra computations for a moved demand only make
 *    shares fresher and are left out);
 *  - a node applies its share at once, keeping its debt in tokens
 *    (rl__bucket_rescale: tokens held = max(0, b_new - used));
 *  - in a round a node admits min(offered, tokens held + q x R), the most
 *    its bucket can (every token at the round's start, every one minted);
 *  - an entry not refreshed for 3 rounds expires (a near key announces a
 *    one-round period; Redis keeps it 3); a dead node admits nothing.
 * Exit 0 if every path keeps the bound, 1 with the first path that does
 * not. Deterministic: no clock, no randomness.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sync/share.h"

#define MAXN 3
#define LEVELS 3
#define ALPHA_Q16 (75u * RL_SHARE_Q16_ONE / 100u)
#define EXPIRE_ROUNDS 3

typedef struct node {
    double q;      /* rate share, fraction of the limit */
    double tok;    /* tokens held at the round's start */
    uint32_t b;    /* burst lease, tokens */
    uint32_t d, r; /* Redis: EWMA of offered and admitted, 1/SCALE */
    int age;       /* rounds since the entry's last report */
    int live;
} node_t;

typedef struct model {
    int n, rounds;
    int nperm;     /* report orders explored each round */
    double rate;   /* R: tokens a round at the whole limit */
    uint32_t burst;
    double bound_e;
} model_t;

typedef struct path {
    node_t nd[MAXN];
    double excess;   /* the largest (admitted - R*w) of a window ending now */
    int failed;      /* the one failure used: 0 none, 1 a lost report, 2 a death */
    char trace[512];
} path_t;

/* Per kind of path (no failure, a lost report, a death): the largest
 * window excess seen, tokens, and the path that reached it. */
typedef struct stats {
    uint64_t paths, steps;
    double worst[3];
    char worst_trace[3][512];
} stats_t;

/* Report orders: for 3 nodes every order over 2 rounds, index order and
 * its reverse over 3 (all six over 3 rounds is 27 times the paths). */
static const int perms3[6][3] = {{0, 1, 2}, {2, 1, 0}, {0, 2, 1},
                                 {1, 0, 2}, {1, 2, 0}, {2, 0, 1}};
static const int perms2[2][3] = {{0, 1, 0}, {1, 0, 0}};

static double offered(const model_t *m, int level)
{
    return level == 0 ? 0.0 : level == 1 ? m->rate / m->n : 2.0 * m->rate;
}

static uint32_t as_q(double x)
{
    return x >= 1.0 ? RL_SHARE_ONE : (uint32_t)(x * RL_SHARE_ONE);
}

/* Every live entry's share, from the entries' demands (rl__share_compute). */
static void compute(const model_t *m, node_t *nd, double *q, uint32_t *b)
{
    uint32_t demand[MAXN], rq[MAXN], bt[MAXN], over = 0;
    int who[MAXN], k = 0;
    uint64_t used = 0;
    for (int i = 0; i < m->n; i++)
        if (nd[i].age < EXPIRE_ROUNDS) {
            demand[k] = nd[i].d;
            used += nd[i].r;
            who[k++] = i;
        }
    if (used > RL_SHARE_ONE)
        over = (uint32_t)(used - RL_SHARE_ONE);
    rl_share_params_t p;
    rl__share_params_init(&p);
    p.burst = m->burst;
    p.over_q = over;
    rl__share_compute(&p, demand, (size_t)k, rq, bt);
    for (int j = 0; j < k; j++) {
        q[who[j]] = (double)rq[j] / RL_SHARE_ONE;
        b[who[j]] = bt[j];
    }
}

/* One round: admission, then the reports in `order`; fail_kind 1 loses
 * fail_node's report, 2 kills it before the round. */
static double step(const model_t *m, path_t *p, const int *lv, const int *order, int fail_kind,
                   int fail_node)
{
    node_t *nd = p->nd;
    if (fail_kind == 2)
        nd[fail_node].live = 0;
    double adm[MAXN] = {0}, total = 0.0;
    for (int i = 0; i < m->n; i++) {
        if (!nd[i].live)
            continue;
        double can = nd[i].tok + nd[i].q * m->rate, o = offered(m, lv[i]);
        adm[i] = o < can ? o : can;
        double left = can - adm[i];
        nd[i].tok = left < nd[i].b ? left : nd[i].b;
        total += adm[i];
    }
    double q[MAXN] = {0};
    uint32_t b[MAXN] = {0};
    int computed = 0;
    for (int i = 0; i < m->n; i++)
        nd[i].age++;
    for (int k = 0; k < m->n; k++) {
        int i = order[k];
        if (!nd[i].live || (fail_kind == 1 && i == fail_node))
            continue;
        nd[i].d = rl__share_ewma(nd[i].d, as_q(offered(m, lv[i]) / m->rate), ALPHA_Q16);
        nd[i].r = rl__share_ewma(nd[i].r, as_q(adm[i] / m->rate), ALPHA_Q16);
        nd[i].age = 0;
        if (!computed) {
            compute(m, nd, q, b);
            computed = 1;
        }
        double used = nd[i].b - nd[i].tok;
        nd[i].q = q[i];
        nd[i].b = b[i];
        nd[i].tok = b[i] > used ? b[i] - used : 0.0;
    }
    return total;
}

static void explore(const model_t *m, const path_t *p, int round, stats_t *st);

static void branch(const model_t *m, const path_t *p, int round, stats_t *st, const int *lv,
                   const int *order, int kind, int node)
{
    path_t next = *p;
    double total = step(m, &next, lv, order, kind, node);
    st->steps++;
    double e = (next.excess > 0 ? next.excess : 0.0) + total - m->rate;
    next.excess = e;
    if (kind != 0)
        next.failed = kind;
    size_t len = strlen(next.trace);
    snprintf(next.trace + len, sizeof next.trace - len, " r%d[%d%d%d o%d%d%d %s%d adm %.1f]",
             round, lv[0], lv[1], m->n > 2 ? lv[2] : 0, order[0], order[1],
             m->n > 2 ? order[2] : 0, kind == 0 ? "-" : kind == 1 ? "lost" : "dead", node,
             total);
    if (e > st->worst[next.failed]) {
        st->worst[next.failed] = e;
        snprintf(st->worst_trace[next.failed], sizeof st->worst_trace[0], "%s", next.trace);
    }
    explore(m, &next, round + 1, st);
}

static void explore(const model_t *m, const path_t *p, int round, stats_t *st)
{
    if (round == m->rounds) {
        st->paths++;
        return;
    }
    int combos = 1, nperm = m->nperm;
    for (int i = 0; i < m->n; i++)
        combos *= LEVELS;
    for (int c = 0; c < combos; c++) {
        int lv[MAXN] = {0};
        for (int i = 0, x = c; i < m->n; i++, x /= LEVELS)
            lv[i] = x % LEVELS;
        for (int k = 0; k < nperm; k++) {
            const int *order = m->n == 3 ? perms3[k] : perms2[k];
            branch(m, p, round, st, lv, order, 0, 0);
            for (int f = 0; f < m->n && !p->failed; f++) {
                branch(m, p, round, st, lv, order, 1, f);
                if (p->nd[f].live)
                    branch(m, p, round, st, lv, order, 2, f);
            }
        }
    }
}

/* A synced start: every entry at an even demand, every node holding the
 * share computed from it and all its tokens. */
static void start(const model_t *m, path_t *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < m->n; i++) {
        p->nd[i].d = RL_SHARE_ONE / (uint32_t)m->n;
        p->nd[i].r = p->nd[i].d;
        p->nd[i].live = 1;
    }
    double q[MAXN];
    uint32_t b[MAXN];
    compute(m, p->nd, q, b);
    for (int i = 0; i < m->n; i++) {
        p->nd[i].q = q[i];
        p->nd[i].b = b[i];
        p->nd[i].tok = b[i];
    }
}

/* The bound each kind of path is held to: E = R + B (README), and with a
 * lost report R more: the node that missed its report keeps a stale share
 * one round longer, so a move can meet it for two rounds, not one. A death
 * only takes admission away. */
static double allowed(const model_t *m, int kind)
{
    return m->burst + m->bound_e + (kind == 1 ? m->rate : 0.0);
}

static int check(int n, int rounds, int nperm, double rate, uint32_t burst)
{
    model_t m = {n, rounds, nperm, rate, burst, rate + burst};
    static const char *const kinds[3] = {"no failure", "a lost report", "a death"};
    path_t p;
    stats_t st;
    memset(&st, 0, sizeof st);
    start(&m, &p);
    explore(&m, &p, 0, &st);
    printf("%d nodes, %d rounds, %d report orders, R %.0f, B %u: %" PRIu64 " paths, %" PRIu64
           " rounds explored\n",
           n, rounds, nperm, rate, burst, st.paths, st.steps);
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        double a = allowed(&m, k);
        int ok = st.worst[k] <= a + 1e-9;
        printf("  %-13s worst window excess over R*w %6.2f tokens, allowed %3.0f (%3.0f%%): %s\n",
               kinds[k], st.worst[k], a, 100.0 * st.worst[k] / a, ok ? "holds" : "VIOLATED");
        if (!ok || getenv("RL_SHARE_CHECK_TRACE") != NULL)
            printf("    worst path:%s\n", st.worst_trace[k]);
        bad |= !ok;
    }
    return bad;
}

int main(void)
{
    int bad = 0;
    /* Bursts below, at and above the node count (step 6's three cases). */
    bad |= check(2, 4, 2, 20.0, 1);
    bad |= check(2, 4, 2, 20.0, 2);
    bad |= check(2, 4, 2, 20.0, 10);
    bad |= check(3, 2, 6, 30.0, 2);
    bad |= check(3, 3, 2, 30.0, 2);
    bad |= check(3, 3, 2, 30.0, 10);
    return bad;
}
