/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the check path (rl_check, rl_refund, rl_check_multi)
 * with attacker-chosen keys, costs, limit ids and clock movements.
 *
 * One instance per process, opened on first use, with a small table (so
 * inputs reach the full-table, reclaim and no-slot paths) and a clock the
 * input drives (so every run is reproducible from its input alone). The
 * input is a sequence of operations; each reads what it needs and the run
 * stops when the bytes run out:
 *   op % 4 == 0  check    limit selector, cost selector, key
 *   op % 4 == 1  refund   limit selector, cost selector, key
 *   op % 4 == 2  multi    count, then that many (limit, cost, key)
 *   op % 4 == 3  clock    move the clock forward or back by up to 2^62 ns
 * A key is a 16-bit length (mod 601: 0..600, past RL_MAX_KEY_LEN on
 * purpose) and that many bytes (NULs included), or NULL when a flag says so.
 *
 * Checks, for every call: the return value is a verdict (or, once the clock
 * has moved forward past the 2^58 ns horizon in total, RL_ERANGE where a
 * deny would be) or the one error the header predicts for these arguments; a decision never reports more than
 * the burst, never a reset or retry time longer than a whole refill (+2 ms
 * of clock grain; the closed no-slot answer's fixed 1000 ms aside), never a
 * retry on a plain allow; peeks are flagged and charge nothing; a batch is
 * all or nothing; keys_live never passes max_keys.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ratelimit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NLIM 8
#define CAP 1024 /* table max_keys: small, so the table fills */
#define CLOCK_AT_OPEN (UINT64_C(1) << 40) /* the hook's reading at every rl_open */

typedef struct fz_limit {
    const char *spec;
    int id;
    uint64_t count, period_ms, burst;
    int32_t on_failure, shadow;
    uint64_t refill_ms; /* ceil(burst * T / 1 ms), T rounded up to 1/16 ns */
} fz_limit_t;

static fz_limit_t lims[NLIM] = {
    {"name=tiny rate=1/h burst=1", 0, 0, 0, 0, 0, 0, 0},
    {"name=fast rate=100000000/s burst=1000000000", 0, 0, 0, 0, 0, 0, 0},
    {"name=slow rate=1/30d burst=48", 0, 0, 0, 0, 0, 0, 0},
    {"name=open rate=10/s burst=5 on_failure=open max_keys=16", 0, 0, 0, 0, 0, 0, 0},
    {"name=closed rate=10/s burst=5 on_failure=closed max_keys=16", 0, 0, 0, 0, 0, 0, 0},
    {"name=shadow rate=5/s burst=3 shadow=1", 0, 0, 0, 0, 0, 0, 0},
    {"name=coarse rate=20000/s burst=50 max_keys=64", 0, 0, 0, 0, 0, 0, 0},
    {"name=odd rate=7/13s burst=1000", 0, 0, 0, 0, 0, 0, 0},
};

static rl_t *inst;
static int stale_id; /* a removed limit's id: always RL_ENOTFOUND */
static _Atomic uint64_t clock_ns;

static uint64_t fz_clock(void *ud, int32_t source)
{
    (void)ud;
    (void)source;
    /* relaxed: one thread; the hook only has to return a value. */
    return atomic_load_explicit(&clock_ns, memory_order_relaxed);
}

static void setup(void)
{
    rl_config_t c;
    rl_config_init(&c);
    c.max_keys = CAP;
    c.max_limits = 16; /* cheap to reopen (see op_clock) and to sum in rl_stats */
    c.clock = fz_clock;
    c.clock_ud = NULL;
    static const char secret[] = "fuzz-secret-0123456789";
    c.key_secret = secret;
    c.key_secret_len = sizeof secret - 1;
    atomic_store(&clock_ns, CLOCK_AT_OPEN);
    if (rl_open(&inst, &c) != 0)
        abort();
    for (int i = 0; i < NLIM; i++) {
        rl_limit_t l;
        if (rl_limit_parse(&l, lims[i].spec, NULL, 0) != 0)
            abort();
        lims[i].id = rl_limit_add(inst, &l);
        if (lims[i].id < 0)
            abort();
        lims[i].count = l.rate.count;
        lims[i].period_ms = l.rate.period_ms;
        lims[i].burst = l.burst ? l.burst : l.rate.count;
        lims[i].on_failure = l.on_failure;
        lims[i].shadow = l.shadow;
        unsigned __int128 period_fp = (unsigned __int128)l.rate.period_ms * 16000000u;
        unsigned __int128 t = (period_fp + l.rate.count - 1) / l.rate.count;
        unsigned __int128 tau = t * lims[i].burst;
        lims[i].refill_ms = (uint64_t)((tau + 16000000u - 1) / 16000000u);
    }
    rl_limit_t g;
    if (rl_limit_parse(&g, "name=gone rate=1/s", NULL, 0) != 0)
        abort();
    stale_id = rl_limit_add(inst, &g);
    if (stale_id < 0 || rl_limit_remove(inst, stale_id) != 0)
        abort();
}

/* ------------------------------------------------------------ input */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd_t;

static uint64_t take(rd_t *r, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && r->n > 0; i++, r->p++, r->n--)
        v |= (uint64_t)*r->p << (8 * i);
    return v;
}

typedef struct arg {
    int lim_idx; /* index into lims, or -1: stale/odd id */
    int id;
    uint32_t cost;
    const void *key;
    size_t key_len;
    uint8_t keybuf[600];
} arg_t;

static void read_arg(rd_t *r, arg_t *a)
{
    unsigned sel = (unsigned)take(r, 1);
    a->lim_idx = (int)(sel % (NLIM + 3));
    if (a->lim_idx < NLIM) {
        a->id = lims[a->lim_idx].id;
    } else {
        static const int odd[] = {0, -1};
        a->id = a->lim_idx == NLIM ? stale_id : odd[a->lim_idx - NLIM - 1];
        a->lim_idx = -1;
    }
    uint64_t burst = a->lim_idx >= 0 ? lims[a->lim_idx].burst : 1;
    unsigned cs = (unsigned)take(r, 1);
    switch (cs % 8) {
    case 0: a->cost = 0; break;
    case 1: a->cost = 1; break;
    case 2: a->cost = (uint32_t)burst; break;
    case 3: a->cost = (uint32_t)(burst + 1); break;
    case 4: a->cost = UINT32_MAX; break;
    case 5: a->cost = (uint32_t)(take(r, 1) % (burst + 1)); break;
    default: a->cost = (uint32_t)take(r, 4); break;
    }
    size_t len = (size_t)(take(r, 2) % 601);
    size_t have = len < r->n ? len : r->n;
    memset(a->keybuf, 0, sizeof a->keybuf);
    memcpy(a->keybuf, r->p, have);
    r->p += have;
    r->n -= have;
    a->key_len = len;
    /* A NULL key (with or without a length) on one selector value in 16. */
    a->key = (cs >> 4) == 15 ? NULL : a->keybuf;
}

/* The error rl_check predicts for these arguments, or 1 for "a verdict". */
static int expected(const arg_t *a, int for_refund)
{
    if (a->key == NULL && a->key_len > 0)
        return RL_EINVAL;
    if (a->key_len == 0 || a->key_len > RL_MAX_KEY_LEN)
        return RL_EKEYLEN;
    if (a->lim_idx < 0)
        return RL_ENOTFOUND;
    if (!for_refund && a->cost > lims[a->lim_idx].burst)
        return RL_ECOST;
    return 1;
}

static void check_decision(const arg_t *a, int rc, const rl_decision_t *d)
{
    if (rc < 0) {
        if (d->allowed != RL_DENY)
            abort();
        return;
    }
    const fz_limit_t *l = &lims[a->lim_idx];
    if (d->allowed != rc || d->burst != l->burst || d->limit != l->count ||
        d->window_ms != l->period_ms || d->remaining > l->burst)
        abort();
    /* A whole refill, +1 for rounding, +2 ms: a clock hook may step back by
     * up to two RL_CLOCK_LAST_GRAIN_NS (1 ms) without the instance
     * absorbing it (local/clock.h), and a bucket charged at the later time then
     * looks that much further from full. */
    uint64_t cap = l->refill_ms + 3;
    if ((d->flags & RL_FLAG_NOSLOT) && l->on_failure == RL_FAIL_CLOSED)
        cap = cap > 1000 ? cap : 1000; /* the closed answer's fixed retry */
    if (d->reset_ms > cap || d->retry_after_ms > cap) {
        fprintf(stderr, "fuzz_check: %s cost %u: reset %llu ms, retry %llu ms, flags 0x%x, "
                "remaining %llu; a whole refill is %llu ms\n",
                l->spec, a->cost, (unsigned long long)d->reset_ms,
                (unsigned long long)d->retry_after_ms, (unsigned)d->flags,
                (unsigned long long)d->remaining, (unsigned long long)l->refill_ms);
        abort();
    }
    if (rc == RL_ALLOW && !(d->flags & RL_FLAG_SHADOW) && d->retry_after_ms != 0)
        abort();
    if ((d->flags & RL_FLAG_SHADOW) && !l->shadow)
        abort();
    if ((a->cost == 0) != !!(d->flags & RL_FLAG_PEEK))
        abort();
}

static int peek_remaining(const arg_t *a, uint64_t *rem)
{
    rl_decision_t d;
    rl_decision_init(&d);
    int rc = rl_check(inst, a->id, a->key, a->key_len, 0, &d);
    *rem = d.remaining;
    return rc;
}

/*
 * The sum of the clock's forward moves: instance time advances by no more
 * (a backward jump is absorbed, not replayed), so before it reaches the
 * horizon (2^58 ns, rl_clock_fn) no check may answer RL_ERANGE. Except once
 * the raw reading has been 2^62 ns or more from where it was at rl_open:
 * the instance clamps the distance there (local/clock.c), and a reading that
 * then crosses the signed wrap looks like a leap of up to 2^63 ns either way.
 */
static uint64_t forward;
static int raw_went_far;

static int past_horizon_possible(void)
{
    return raw_went_far || forward >= (UINT64_C(1) << 58);
}

/* A verdict, or past the horizon RL_ERANGE where it would deny. */
static int is_verdict(int rc)
{
    return rc == RL_ALLOW || rc == RL_DENY || (rc == RL_ERANGE && past_horizon_possible());
}

static void op_check(rd_t *r)
{
    arg_t a;
    read_arg(r, &a);
    int want = expected(&a, 0);
    uint64_t before = 0;
    if (want == 1 && a.cost == 0)
        peek_remaining(&a, &before);
    rl_decision_t d;
    rl_decision_init(&d);
    int rc = rl_check(inst, a.id, a.key, a.key_len, a.cost, &d);
    if (want == 1 ? !is_verdict(rc) : rc != want)
        abort();
    check_decision(&a, rc, &d);
    if (want == 1 && a.cost == 0) {
        /* A peek charges nothing (the clock did not move in between). */
        uint64_t after;
        peek_remaining(&a, &after);
        if (after != before || d.remaining != before)
            abort();
    }
}

static void op_refund(rd_t *r)
{
    arg_t a;
    read_arg(r, &a);
    int want = expected(&a, 1);
    int rc = rl_refund(inst, a.id, a.key, a.key_len, a.cost);
    if (want == 1 ? rc != 0 : rc != want)
        abort();
    if (want == 1) {
        uint64_t rem;
        int prc = peek_remaining(&a, &rem);
        if (!is_verdict(prc) || rem > lims[a.lim_idx].burst)
            abort();
        /* Giving back a whole burst or more leaves the bucket full (a huge
         * cost once wrapped around: docs/hardening.md). */
        if (a.cost >= lims[a.lim_idx].burst && rem != lims[a.lim_idx].burst &&
            lims[a.lim_idx].on_failure == RL_FAIL_LOCAL)
            abort();
    }
}

static void op_multi(rd_t *r)
{
    unsigned sel = (unsigned)take(r, 1);
    size_t n = sel % 6;
    if (sel == 255)
        n = RL_MULTI_MAX + 1; /* over the batch limit: RL_ERANGE */
    arg_t *a = calloc(n ? n : 1, sizeof *a);
    rl_request_t *q = calloc(n ? n : 1, sizeof *q);
    rl_decision_t *d = calloc(n ? n : 1, sizeof *d);
    if (a == NULL || q == NULL || d == NULL)
        abort();
    int want = 1;
    size_t first_bad = n;
    for (size_t i = 0; i < n; i++) {
        if (n <= RL_MULTI_MAX)
            read_arg(r, &a[i]);
        else
            a[i] = a[0];
        rl_request_init(&q[i]);
        q[i].limit = a[i].id;
        q[i].key = a[i].key;
        q[i].key_len = a[i].key_len;
        q[i].cost = a[i].cost;
        rl_decision_init(&d[i]);
        int e = expected(&a[i], 0);
        if (e != 1 && want == 1) {
            want = e;
            first_bad = i;
        }
    }
    if (n > RL_MULTI_MAX) {
        want = RL_ERANGE;
        first_bad = 0;
    }
    size_t denied = 12345;
    int rc = rl_check_multi(inst, q, n, sizeof q[0], d, &denied);
    if (want == 1) {
        if (rc == RL_ALLOW ? denied != n : rc != RL_DENY || denied >= n)
            abort();
        for (size_t i = 0; i < n; i++) {
            if (rc == RL_ALLOW || i <= denied)
                check_decision(&a[i], d[i].allowed, &d[i]);
            if (rc == RL_DENY && d[i].allowed != RL_DENY)
                abort();
        }
    } else if (rc != want || denied != first_bad) {
        abort();
    }
    free(a);
    free(q);
    free(d);
}

/*
 * How far the clock has swung in total since the instance opened. The
 * instance keeps backward jumps as a growing offset, so swings add up; the
 * library meets accumulated swings of 2^63 ns and more (once a signed
 * overflow in local/clock.c, docs/hardening.md). RL_FUZZ_BOUNDED_CLOCK replaces the
 * instance past 2^60 ns of swinging instead, to explore other state.
 */
static uint64_t swung;

static void op_clock(rd_t *r)
{
    unsigned sel = (unsigned)take(r, 1);
    uint64_t mag = take(r, 8) >> (sel % 64);
    mag &= (UINT64_C(1) << 62) - 1;
#ifdef RL_FUZZ_BOUNDED_CLOCK
    if (swung + mag > (UINT64_C(1) << 60)) {
        rl_close(inst);
        setup();
        swung = 0;
        forward = 0;
        raw_went_far = 0;
    }
#endif
    swung += mag;
    /* relaxed: one thread. Both directions: the library must absorb a
     * clock that runs back or leaps, and wrap-around of the raw value. */
    if (sel & 0x80)
        atomic_fetch_sub_explicit(&clock_ns, mag, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&clock_ns, mag, memory_order_relaxed);
    if (!(sel & 0x80))
        forward += mag;
    int64_t dist = (int64_t)(atomic_load_explicit(&clock_ns, memory_order_relaxed) - CLOCK_AT_OPEN);
    if (dist >= (INT64_C(1) << 62) || dist <= -(INT64_C(1) << 62))
        raw_went_far = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (inst == NULL)
        setup();
    rd_t r = {data, size};
    while (r.n > 0) {
        switch (take(&r, 1) % 4) {
        case 0: op_check(&r); break;
        case 1: op_refund(&r); break;
        case 2: op_multi(&r); break;
        default: op_clock(&r); break;
        }
    }
    /* Every 16th input: summing the striped counters costs more than a
     * short input's checks. */
    static unsigned runs;
    if (++runs % 16 == 0) {
        rl_stats_t s;
        rl_stats_init(&s);
        if (rl_stats(inst, &s) != 0 || s.keys_live > s.keys_capacity)
            abort();
    }
    return 0;
}
