/* SPDX-License-Identifier: MIT */
/*
 * rl_inflight_acquire and rl_inflight_release: a key entry's count and a
 * permit record from the limit's pool, both lock-free and allocation-free;
 * the sweep that reclaims permits held past max_hold; the decision.
 *
 * A pair costs four RMWs: the key's count (a CAS, a fetch_sub) and the
 * record's life (a CAS each way). Nothing else is shared and written: the
 * record, found from the permit's address, is the one the caller freed
 * last (or far from other threads'), and admissions are counted on it
 * (internal.h).
 */
#include <string.h>
#include "inflight/keys.h"
#include "inflight/global.h"
#include "base/structsize.h"

/* ------------------------------------------------------ permits */

static inline uint32_t st_gen(uint64_t s) { return (uint32_t)(s >> RS_GEN_SHIFT); }
static inline int st_end(uint64_t s) { return (int)((s >> RS_END_SHIFT) & 3u); }
static inline int st_cls(uint64_t s) { return (int)((s >> RS_CLS_SHIFT) & 7u) - 1; }
static inline uint32_t st_key(uint64_t s) { return (uint32_t)(s & RS_KEY); }

/* The word of a life that ended `how`: the next generation, free. */
static inline uint64_t st_ended(uint64_t s, int how)
{
    return ((uint64_t)(st_gen(s) + 1u) << RS_GEN_SHIFT) | ((uint64_t)how << RS_END_SHIFT);
}

/* End a held life (release or reclaim): give its count back. The CAS that
 * ended it (and freed the record) was the caller's. */
static uint32_t life_end(rl_ifl_t *b, uint64_t s)
{
    return rl__ifl_key_give(b, st_key(s), st_cls(s));
}

/* A record's start word for life `gen` begun at `now`. */
static inline uint64_t t0_word(uint32_t gen, uint64_t now)
{
    return (uint64_t)(gen & 0xffffu) << RS_T0_BITS | ((now >> RS_T0_SHIFT) & RS_T0_MASK);
}

/* Where a permit's search of the pool starts: from its address (a caller's
 * permit on its own stack or request), so that threads start apart and a
 * caller that reuses its permit finds the record it freed last. */
static inline uint32_t rec_hint(const rl_ifl_t *b, const void *permit)
{
    uintptr_t a = (uintptr_t)permit;
    uint32_t h = (uint32_t)((a >> 4) ^ (a >> 13) ^ (a >> 23)) & 0xfffffu;
    return (uint32_t)(((uint64_t)h * b->pool) >> 20); /* < pool: no wrap */
}

/* Begin a life on a free record: its index, or pool when every record is
 * held. The word's other bits (generation, the last end) stay. */
static uint32_t rec_take(rl_ifl_t *b, uint32_t hint, uint64_t held_bits, uint64_t *st)
{
    uint32_t i = hint;
    for (uint32_t n = 0; n < b->pool; n++) {
        rl_ifl_rec_t *r = &b->recs[i];
        /* relaxed: a look; the CAS decides. */
        uint64_t s = atomic_load_explicit(&r->st, memory_order_relaxed);
        /* acquire on success: pairs with the last life's start-word
         * release and its ending CAS, so its `lives` is seen before ours
         * overwrites it. */
        while (!(s & RS_HELD))
            if (atomic_compare_exchange_weak_explicit(
                    &r->st, &s, (s & ~(RS_KEY | (UINT64_C(7) << RS_CLS_SHIFT))) | held_bits,
                    memory_order_acquire, memory_order_relaxed)) {
                *st = s;
                return i;
            }
        if (++i == b->pool)
            i = 0;
    }
    return b->pool;
}

static void reclaim_told(rl_t *rl, rl_ifl_t *b, uint64_t hold_ns, uint64_t n)
{
    /* relaxed: only who logs is decided. */
    if (atomic_exchange_explicit(&b->told_reclaim, 1, memory_order_relaxed) != 0)
        return;
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, b->id);
    rl__log(&rl->logger, RL_LOG_WARN,
            "limit %.64s: %llu permit(s) held past max_hold (%llu ms) reclaimed: a caller "
            "did not release them (counted in inflight_reclaimed; logged once)",
            ls != NULL ? ls->name : "?", (unsigned long long)n,
            (unsigned long long)(hold_ns / 1000000u));
}

/* Walk the pool for permits held past max_hold: the sweeper elected by
 * the CAS on next_sweep_ns (sweep). Out of line: the acquire's hot path
 * keeps its registers. */
static __attribute__((noinline, cold)) void sweep_walk(rl_t *rl, rl_ifl_t *b, uint64_t now,
                                                        uint64_t hold)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->pool; i++) {
        rl_ifl_rec_t *r = &b->recs[i];
        /* relaxed: the start word says which life it is; the CAS below
         * checks the life is still that one. */
        uint64_t s = atomic_load_explicit(&r->st, memory_order_relaxed);
        if (!(s & RS_HELD))
            continue;
        /* acquire: pairs with the holder's release store, so the life's
         * `lives` is written before our CAS frees the record. */
        uint64_t w = atomic_load_explicit(&r->t0w, memory_order_acquire);
        if ((uint32_t)(w >> RS_T0_BITS) != (st_gen(s) & 0xffffu))
            continue; /* its holder has not written the start yet: young */
        /* The start rounded down: reclaimed no sooner than max_hold. */
        uint64_t t0 = (w & RS_T0_MASK) << RS_T0_SHIFT;
        if (now < t0 || now - t0 < hold + (UINT64_C(1) << RS_T0_SHIFT))
            continue;
        /* acq_rel: wins the life against its release (see life_end). */
        if (atomic_compare_exchange_strong_explicit(&r->st, &s, st_ended(s, END_RECLAIMED),
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            life_end(b, s);
            n++;
        }
    }
    if (n > 0) {
        /* relaxed: a counter. */
        atomic_fetch_add_explicit(&b->reclaimed, n, memory_order_relaxed);
        reclaim_told(rl, b, hold, n);
    }
}

/* At most one sweep per max_hold / 4, elected by the CAS on next_sweep_ns. */
static inline void sweep(rl_t *rl, rl_ifl_t *b, uint64_t now)
{
    /* relaxed: a schedule; the records carry their own order. */
    uint64_t due = atomic_load_explicit(&b->next_sweep_ns, memory_order_relaxed);
    if (__builtin_expect(now < due, 1))
        return;
    uint64_t hold = atomic_load_explicit(&b->max_hold_ns, memory_order_relaxed);
    if (atomic_compare_exchange_strong_explicit(&b->next_sweep_ns, &due, now + hold / 4,
                                                memory_order_relaxed, memory_order_relaxed))
        sweep_walk(rl, b, now, hold);
}

/* ------------------------------------------------------ the decision */

static __attribute__((noinline)) void write_decision(rl_decision_t *out, rl_limit_slot_t *ls,
                                                     rl_ifl_t *b, int allowed, uint32_t limit,
                                                     uint32_t held, uint32_t flags)
{
    uint64_t retry_ms = 0;
    if (out != NULL && !allowed) {
        /* relaxed: a hint. */
        uint64_t mean = atomic_load_explicit(&b->mean_ns, memory_order_relaxed);
        retry_ms = mean == 0 ? 1000u : mean < 1000000u ? 1u : (mean + 999999u) / 1000000u;
    }
    rl__ifl_decision(out, ls != NULL ? ls->name : NULL, allowed, limit, held, retry_ms, flags);
}

static void fail_decision(rl_decision_t *out)
{
    if (out != NULL && out->size >= RL_DECISION_SIZE_MIN) {
        size_t size = out->size;
        memset(out, 0, size < sizeof *out ? size : sizeof *out);
        out->size = size;
        out->allowed = RL_DENY;
    }
}

/* ------------------------------------------------------ acquire */

static int acquire_args(rl_t *rl, int limit, const void *key, size_t key_len,
                        rl_permit_t *permit, rl_decision_t *out, rl_ifl_t **b)
{
    if (out != NULL && out->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;
    if (rl == NULL || permit == NULL || (key == NULL && key_len > 0))
        return RL_EINVAL;
    if (key_len == 0 || key_len > RL_MAX_KEY_LEN)
        return RL_EKEYLEN;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    *b = rl__ifl_enter(rl->inflight, limit);
    if (*b == NULL)
        return rl__limit_get(&rl->limits, limit) != NULL ? RL_EMODE : RL_ENOTFOUND;
    return 0;
}

/* The permit's words: instance tag and limit id; generation and record;
 * the acquire's time. */
static void permit_write(rl_permit_t *p, uint32_t tag, int id, uint32_t gen, uint32_t rec,
                         uint64_t t0)
{
    p->opaque[0] = (uint64_t)tag << 32 | (uint32_t)id;
    p->opaque[1] = (uint64_t)gen << 32 | rec;
    p->opaque[2] = t0;
}

static int acquire_in(rl_t *rl, rl_ifl_t *b, int limit, const void *key, size_t key_len,
                      int32_t cls, rl_permit_t *permit, rl_decision_t *out);

/* mode=global: a count taken beyond the key's block (or on_failure's cap
 * without a lease) is given back. Every admitted permit saw the count,
 * its own included, within the cap, so the key's permits never pass it.
 * Both answers leave the key's demand for the next round: the count it
 * reached, and one more for a denial. */
static int global_admit(rl_ifl_t *b, int rc, uint32_t entry, uint64_t tag, uint64_t now,
                        uint32_t *held)
{
    if (rc == RL_ALLOW && *held > rl__ifl_global_cap(b, entry, tag, now)) {
        rl__ifl_key_give(b, entry, -1);
        (*held)--;
        rc = RL_DENY;
    }
    if (rc == RL_DENY)
        rl__ifl_global_denied(b, entry, tag, *held);
    else if (rc == RL_ALLOW)
        rl__ifl_global_seen(b, entry, tag, *held);
    return rc;
}

int rl_inflight_acquire(rl_t *rl, int limit, const void *key, size_t key_len, int32_t cls,
                        rl_permit_t *permit, rl_decision_t *out)
{
    rl_ifl_t *b = NULL;
    int rc = acquire_args(rl, limit, key, key_len, permit, out, &b);
    if (rc == 0 && cls != RL_INFLIGHT_NO_CLASS &&
        /* relaxed: a parameter. */
        (cls < 0 || (uint32_t)cls >= atomic_load_explicit(&b->nclasses, memory_order_relaxed))) {
        rl__ifl_leave(rl->inflight, b);
        rc = RL_ERANGE;
    }
    if (permit != NULL)
        memset(permit, 0, sizeof *permit);
    if (rc != 0) {
        fail_decision(out);
        return rc;
    }
    int exact = rl__ifl_exact(b); /* mode=exact: Redis decides (exact.c) */
    rc = exact ? rl__ifl_exact_acquire(rl, b, limit, key, key_len, permit, out)
               : RL_IFL_EXACT_LOCAL;
    if (rc == RL_IFL_EXACT_LOCAL) {
        rc = acquire_in(rl, b, limit, key, key_len, cls, permit, out);
        if (exact)
            rl__ifl_exact_local_note(rl, b, limit, out);
    }
    rl__ifl_leave(rl->inflight, b);
    return rc;
}

/* A refused acquire: counted and its decision written. */
static __attribute__((noinline, cold)) int acquire_denied(rl_t *rl, rl_ifl_t *b, int limit, int rc, uint32_t lim,
                          uint32_t held, unsigned stripe, rl_decision_t *out)
{
    rl_limit_slot_t *ls = rl__limit_get(&rl->limits, limit);
    if (ls != NULL)
        rl__stat_add(ls, stripe, rc == RL_DENY ? RL_STAT_DENIED : RL_STAT_NOSLOT);
    if (ls != NULL && rc != RL_DENY)
        rl__stat_add(ls, stripe, RL_STAT_DENIED);
    write_decision(out, ls, b, 0, lim, held, rc == RL_DENY ? 0 : RL_FLAG_NOSLOT);
    return RL_DENY;
}

/* rl_inflight_acquire inside its block. */
static int acquire_in(rl_t *rl, rl_ifl_t *b, int limit, const void *key, size_t key_len,
                      int32_t cls, rl_permit_t *permit, rl_decision_t *out)
{
    uint64_t now = rl__ifl_now(rl, b);
    sweep(rl, b, now);
    uint64_t x = rl__keyid_mix(&rl->kh, rl__keyhash(&rl->kh, key, key_len), b->salt);
    uint64_t tag = (x & ((UINT64_C(1) << KW_TAG_BITS) - 1)) | 1u;
    /* relaxed: parameters. */
    rl_ifl_take_t t = {atomic_load_explicit(&b->limit_now, memory_order_relaxed), cls, 0};
    if (cls >= 0)
        t.cap = rl__inflight_class_cap(
            atomic_load_explicit(&b->class_ppm[cls], memory_order_relaxed), t.limit);
    uint32_t entry = 0, held = 0;
    unsigned stripe = (unsigned)(x >> 60);
    uint32_t home = (uint32_t)(x >> 32) & b->mask;
    int rc = RL_ALLOW;
    if (cls < 0 && rl__ifl_key_take_home(b, tag, home, t.limit, &held))
        entry = home;
    else
        rc = rl__ifl_key_take(b, tag, home, &t, &entry, &held);
    if (b->g != NULL && rc != RL_INFLIGHT_NOENTRY)
        rc = global_admit(b, rc, entry, tag, now, &held);
    if (rc != RL_ALLOW)
        return acquire_denied(rl, b, limit, rc, t.limit, held, stripe, out);
    uint64_t s = 0;
    uint32_t rec = rec_take(b, rec_hint(b, permit),
                            RS_HELD | ((uint64_t)(cls + 1) << RS_CLS_SHIFT) | entry, &s);
    if (rec == b->pool) {
        rl__ifl_key_give(b, entry, cls);
        return acquire_denied(rl, b, limit, RL_INFLIGHT_NOENTRY, t.limit, held - 1, stripe,
                              out);
    }
    rl_ifl_rec_t *r = &b->recs[rec];
    /* relaxed: only this life's holder writes `lives` (the record's lives
     * follow each other through the CASes, and this store is released by
     * the start word's store below). */
    atomic_store_explicit(&r->lives, atomic_load_explicit(&r->lives, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* release: `lives` before a sweeper that reads this start reclaims. */
    atomic_store_explicit(&r->t0w, t0_word(st_gen(s), now), memory_order_release);
    permit_write(permit, rl->inflight->tag, limit, st_gen(s), rec, now);
    if (out != NULL)
        write_decision(out, rl__limit_get(&rl->limits, limit), b, 1, t.limit, held, 0);
    return RL_ALLOW;
}

/* ------------------------------------------------------ release */

/* A permit's record, or RL_EINVAL / RL_ENOTFOUND. */
static int permit_find(rl_t *rl, const rl_permit_t *p, rl_ifl_t **b, uint32_t *rec,
                       uint32_t *gen)
{
    if ((uint32_t)(p->opaque[0] >> 32) != rl->inflight->tag)
        return RL_EINVAL; /* zeroed, or another instance's */
    int id = (int)(uint32_t)p->opaque[0];
    *b = rl__ifl_enter(rl->inflight, id);
    if (*b == NULL)
        return RL_ENOTFOUND;
    *rec = (uint32_t)p->opaque[1];
    *gen = (uint32_t)(p->opaque[1] >> 32);
    if (*rec < (*b)->pool)
        return 0;
    rl__ifl_leave(rl->inflight, *b);
    return RL_EINVAL;
}

/* A permit whose life is over: late (reclaimed, counted once) or not. */
static __attribute__((noinline, cold)) int release_ended(rl_ifl_t *b, rl_ifl_rec_t *r, uint64_t s, uint32_t gen)
{
    while (st_gen(s) == gen + 1u && st_end(s) == END_RECLAIMED) {
        uint64_t late = (s & ~(UINT64_C(3) << RS_END_SHIFT)) |
                        ((uint64_t)END_LATE << RS_END_SHIFT);
        /* relaxed: only the end's mark changes; the record's new life (if
         * any) keeps its own order through its release store. */
        if (atomic_compare_exchange_weak_explicit(&r->st, &s, late, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            atomic_fetch_add_explicit(&b->late, 1, memory_order_relaxed);
            return RL_INFLIGHT_RECLAIMED;
        }
    }
    return RL_EINVAL;
}

static int release_in(rl_t *rl, rl_ifl_t *b, uint32_t rec, uint32_t gen, uint64_t t0,
                      int32_t outcome, uint64_t latency_ns);

int rl_inflight_release(rl_t *rl, rl_permit_t *permit, int32_t outcome, uint64_t latency_ns)
{
    if (rl == NULL || permit == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    if (outcome < RL_INFLIGHT_SUCCESS || outcome > RL_INFLIGHT_IGNORED)
        return RL_ERANGE;
    if (rl__ifl_exact_permit(rl, permit)) /* mode=exact: Redis holds it (exact.c) */
        return rl__ifl_exact_release(rl, permit);
    rl_ifl_t *b;
    uint32_t rec, gen;
    if ((rc = permit_find(rl, permit, &b, &rec, &gen)) != 0)
        return rc;
    uint64_t t0 = permit->opaque[2];
    memset(permit, 0, sizeof *permit);
    rc = release_in(rl, b, rec, gen, t0, outcome, latency_ns);
    rl__ifl_leave(rl->inflight, b);
    return rc;
}

/* A release's sample: out of line, as most of a fixed limit's take none. */
static __attribute__((noinline)) void release_sample(rl_t *rl, rl_ifl_t *b, uint64_t t0,
                                                     int32_t outcome, uint64_t latency_ns,
                                                     uint32_t held)
{
    uint64_t now = rl__ifl_now(rl, b);
    if (latency_ns == 0)
        latency_ns = now > t0 ? now - t0 : 0;
    rl__ifl_sample(rl, b, outcome, latency_ns, held, now);
}

/* rl_inflight_release inside its block. */
static int release_in(rl_t *rl, rl_ifl_t *b, uint32_t rec, uint32_t gen, uint64_t t0,
                      int32_t outcome, uint64_t latency_ns)
{
    rl_ifl_rec_t *r = &b->recs[rec];
    /* acquire: pairs with the acquire's release store (the life's fields). */
    uint64_t s = atomic_load_explicit(&r->st, memory_order_acquire);
    for (;;) {
        if (st_gen(s) != gen || !(s & RS_HELD))
            return release_ended(b, r, s, gen);
        /* acq_rel: the end of the life, against a reclaim or another release. */
        if (atomic_compare_exchange_weak_explicit(&r->st, &s, st_ended(s, END_RELEASED),
                                                  memory_order_acq_rel, memory_order_acquire))
            break;
    }
    uint32_t held = life_end(b, s);
    /* relaxed: a parameter. A fixed limit samples only for its Retry-After
     * hint: one release in 16 is enough for a mean, and spares the others
     * the window's shared line and a clock read. */
    if (!atomic_load_explicit(&b->precise, memory_order_relaxed) && (gen + rec) % 16 != 0)
        return 0;
    release_sample(rl, b, t0, outcome, latency_ns, held);
    return 0;
}
