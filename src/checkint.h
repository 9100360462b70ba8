/* SPDX-License-Identifier: MIT */
/*
 * Internals of the check path, shared by check.c (the plain charge, peeks,
 * refunds, multi and batch), check_lease.c (hot keys' token leases) and
 * check_exact.c (exact and tiered mode, rl_check_async's answers): the
 * target and outcome of one check and the bucket-word code every mode
 * charges with. Static inline, so each file inlines what its own paths use
 * and the plain path's code is what it would be in one file; the other
 * modes are entered through the rl__check_* functions at the end, each
 * called from check.c on its own branch.
 */
#ifndef RL_CHECKINT_H
#define RL_CHECKINT_H

#include <string.h>
#include "core.h"
#include "local/shareword.h"
#include "policy/policy.h"
#include "base/structsize.h"

/* A helper some of the check files do not call: plain `static` (marked
 * unused) where whether to inline it is the compiler's call, as for any
 * static function; `static inline` where inlining is the point. */
#define RL_MAYBE_UNUSED __attribute__((unused))

/* Everything one charge decided, before it is written to the caller. */
typedef struct outcome {
    int allowed;
    uint32_t flags;
    uint64_t remaining, reset_ms, retry_ms;
    /* where the charge landed, for undoing it in rl_check_multi */
    rl_slot_t *slot;
    _Atomic uint64_t *bucket;
    const rl_gcra_t *g;
    unsigned stripe; /* which stats stripe counts it */
    int leased;      /* admitted from a hot key's lease: counted when leased */
} outcome_t;

typedef struct target {
    rl_limit_slot_t *ls;
    rl_limit_params_t p;
    rl_probe_t probe;
    uint64_t now;
    rl_gcra_t local; /* a synced key's decoded share (or degraded ramp) */
    rl_gcra_t prev;  /* the previous epoch's normal, for a word not yet converted */
    int detail;      /* the caller reads the decision: compute its figures */
    uint64_t health; /* the instance's health word, for synced limits */
    /* Beside each other, so the check's start clears both with one store. */
    int near;        /* tiered: the key's share word carries NEAR (local/shareword.h) */
    int coarse;      /* `now` is coarse-first's reading (check.c), precise pending */
    uint64_t margin; /* coarse-first's margin, while `coarse` */
} target_t;

/*
 * A word of the limit's own rate whose epoch bit is not the snapshot's
 * (local/limits.h, Epochs): either the word is one epoch behind (not converted
 * yet) and the previous normal applies, or the snapshot is behind (the word
 * was written after a newer publish, which happens-before our acquire load
 * of it). Reads the snapshot again to tell: 1 if it changed (the caller
 * starts over with it), 0 with *g set to the previous epoch's normal.
 * Rare (only while an update converts), so out of the hot path's line.
 */
static __attribute__((noinline, cold, unused)) int epoch_behind(target_t *t,
                                                               const rl_gcra_t **g)
{
    uint64_t e = t->p.epoch;
    rl__params_read(t->ls, &t->p);
    if (t->p.epoch != e)
        return 1;
    t->prev = t->p.prev;
    *g = &t->prev;
    return 0;
}

/* The parameters word w is in, as above; *behind set when the previous
 * epoch's. 1: the snapshot changed, start over. */
static inline int epoch_gcra(target_t *t, uint64_t w, const rl_gcra_t **g, int *behind)
{
    *behind = 0;
    *g = &t->p.normal;
    if ((w & RL_TAT_EPOCH) == rl__epoch_bit(t->p.epoch))
        return 0;
    if (epoch_behind(t, g))
        return 1;
    *behind = 1;
    return 0;
}

/*
 * After a CAS that wrote a word in epoch `e` (taken as `behind` it): could
 * the word have been in another epoch of the same parity? Only if updates
 * published two epochs past the one assumed while this check ran: the CAS
 * (acquire) read a word no older than the conversion that made it so, which
 * follows the epoch store (release sequence of rl__bucket_convert).
 */
static __attribute__((noinline, cold, unused)) int overtaken(const target_t *t, uint64_t e,
                                                            int behind)
{
    /* relaxed: ordered after the CAS by its acquire. */
    return atomic_load_explicit(&t->ls->epoch, memory_order_relaxed) >= e + 2 - (uint64_t)behind;
}

/*
 * A write of `amount` tokens (charge) or `undo` units (refund) that may have
 * landed on a word of another epoch (overtaken): add the amount again, at
 * the word's current unit, without an admission test. Conservative: it
 * costs the key tokens only when a check was stalled across whole updates.
 */
static RL_MAYBE_UNUSED void recharge(target_t *t, _Atomic uint64_t *w, uint32_t tokens,
                                     uint64_t units)
{
    for (;;) {
        /* acquire: as in charge_word. */
        uint64_t x = atomic_load_explicit(w, memory_order_acquire);
        const rl_gcra_t *g;
        int behind;
        if (x == RL_TAT_DEAD)
            return; /* retired: the key's next bucket starts from its floor */
        if (epoch_gcra(t, x, &g, &behind) != 0)
            continue;
        uint64_t e = t->p.epoch;
        uint64_t add = rl__max_u64(rl__mul_sat(tokens, g->t_fp), units);
        uint64_t base = rl__max_u64(x & RL_TAT_MASK, t->now);
        uint64_t cap = rl__max_u64(base, t->now + RL_DEBT_FP_MAX);
        uint64_t next = add < cap - base ? base + add : cap;
        /* acquire: as in charge_word. */
        if (atomic_compare_exchange_weak_explicit(w, &x, next | (x & RL_TAT_EPOCH),
                                                  memory_order_acquire, memory_order_relaxed) &&
            !overtaken(t, e, behind))
            return;
    }
}

/*
 * One GCRA charge on a bucket word by CAS. 0: done; -1: the slot died.
 * The decision's figures (divisions) only when the caller reads them.
 * `epochal`: the word is in the limit's own rate (a local limit's key, or
 * the overflow bucket), so its epoch bit is honoured; a synced key's word is
 * in its share's unit, which the sync thread rescales itself.
 */
static inline __attribute__((always_inline)) int charge_word(target_t *t, _Atomic uint64_t *w,
                                                             uint64_t tat, const rl_gcra_t *g0,
                                                             uint32_t cost, int epochal,
                                                             outcome_t *o)
{
    /* Locals, not reloads through t: the CAS is a compiler barrier. */
    const uint64_t now = t->now;
    const int detail = t->detail;
    _Atomic uint64_t *epoch_now = &t->ls->epoch;
    uint64_t e = t->p.epoch;
    for (;;) {
        if (tat == RL_TAT_DEAD)
            return -1;
        const rl_gcra_t *g = g0;
        int behind = 0;
        /* The word's epoch bit: ours in the common case, so the TAT is one
         * XOR away and the word to write one XOR back (new_tat < 2^63). */
        uint64_t bit = epochal ? rl__epoch_bit(e) : tat & RL_TAT_EPOCH;
        if ((tat ^ bit) >> 63) {
            if (epoch_behind(t, &g)) {
                e = t->p.epoch;
                /* acquire: as the CAS below. */
                tat = atomic_load_explicit(w, memory_order_acquire);
                continue;
            }
            behind = 1;
            bit ^= RL_TAT_EPOCH;
        }
        uint64_t val = tat ^ bit;
        rl_verdict_t v = rl__gcra_charge(g, val, now, cost);
        o->g = g;
        if (!v.allowed) {
            o->allowed = 0;
            if (detail) {
                o->remaining = rl__gcra_remaining(g, val, now);
                o->reset_ms = rl__gcra_reset_ms(val, now);
                o->retry_ms = rl__gcra_retry_ms(g, val, now, cost);
            }
            return 0;
        }
        /* acquire on both: the word may be a conversion's (release), after
         * which the epoch is read (overtaken) or the parameters re-read
         * (epoch_behind) and must be no older. Otherwise the bucket word
         * publishes no memory; the CAS alone makes concurrent charges add up
         * (one modification order). Free on x86. */
        if (atomic_compare_exchange_weak_explicit(w, &tat, v.new_tat ^ bit, memory_order_acquire,
                                                  memory_order_acquire)) {
            /* relaxed: ordered after the CAS by its acquire (see overtaken). */
            if (epochal && __builtin_expect(atomic_load_explicit(epoch_now, memory_order_relaxed) !=
                                                e,
                                            0) &&
                overtaken(t, e, behind))
                recharge(t, w, cost, 0);
            o->allowed = 1;
            if (detail) {
                o->remaining = rl__gcra_remaining(g, v.new_tat, now);
                o->reset_ms = rl__gcra_reset_ms(v.new_tat, now);
                o->retry_ms = 0;
            }
            return 0;
        }
    }
}

/* Give tokens back to a bucket word; records the highest TAT it lowered so
 * a reuse of the slot starts above it (see local/table.h). `high` is NULL for the
 * overflow bucket, which is in the limit's own rate like a local key's. */
static RL_MAYBE_UNUSED void refund_word(target_t *t, _Atomic uint64_t *w,
                                        _Atomic uint64_t *high, const rl_gcra_t *g,
                                        uint32_t cost)
{
    int epochal = high == NULL || !t->p.synced;
    /* acquire: as in charge_word. */
    uint64_t tat = atomic_load_explicit(w, memory_order_acquire);
    while (tat != RL_TAT_DEAD) {
        int behind = 0;
        if (epochal && epoch_gcra(t, tat, &g, &behind) != 0) {
            /* acquire: as in charge_word. */
            tat = atomic_load_explicit(w, memory_order_acquire);
            continue;
        }
        uint64_t e = t->p.epoch;
        uint64_t val = tat & RL_TAT_MASK;
        uint64_t next = rl__gcra_refund(g, val, t->now, cost);
        if (next == val)
            return;
        if (high != NULL)
            rl__tat_high(high, val);
        /* release: orders the high-water store before the lowered TAT;
         * acquire: as in charge_word. */
        if (atomic_compare_exchange_weak_explicit(w, &tat, next | (tat & RL_TAT_EPOCH),
                                                  memory_order_acq_rel, memory_order_acquire)) {
            /* Given back in another epoch's unit: take it back again. */
            if (epochal && overtaken(t, e, behind))
                recharge(t, w, 0, val - next);
            return;
        }
    }
}

/* A closed limit's Retry-After for a key with no table slot: the time in
 * which slots may have gone idle (and been reclaimed). */
#define NOSLOT_RETRY_MS 1000

/* Write an open or closed on_failure answer (policy/policy.h) into o. */
static RL_MAYBE_UNUSED void failure_answer(const rl_failure_answer_t *a, outcome_t *o)
{
    o->allowed = a->action == RL_FAILURE_ALLOW;
    o->remaining = a->remaining;
    o->reset_ms = o->retry_ms = a->retry_ms;
}

/* A key with no table slot: the limit's on_failure decides. */
static RL_MAYBE_UNUSED void charge_noslot(target_t *t, uint32_t cost, outcome_t *o)
{
    o->flags |= RL_FLAG_NOSLOT | RL_FLAG_DEGRADED;
    o->slot = NULL;
    o->bucket = NULL;
    rl_failure_answer_t a = rl__policy_on_failure(t->p.on_failure, t->p.normal.burst,
                                                  NOSLOT_RETRY_MS);
    if (a.action != RL_FAILURE_LOCAL) {
        failure_answer(&a, o);
        return;
    }
    /* local: every slotless key of this limit shares one bucket. */
    _Atomic uint64_t *w = &t->ls->overflow_tat;
    /* acquire: as in charge_word. */
    charge_word(t, w, atomic_load_explicit(w, memory_order_acquire), &t->p.normal, cost, 1, o);
    if (o->allowed)
        o->bucket = w;
}

/* A shadow limit's would-deny is answered (and counted) as an allow. */
static inline void shadow_allow(const target_t *t, outcome_t *o)
{
    if (!o->allowed && t->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
}

/*
 * A tiered limit's check goes to Redis only when the local tier admitted it
 * (flagrant abuse is denied here, Redis untouched), at a share the sync
 * thread marked NEAR (local/shareword.h: the fleet-wide remaining of the key, as
 * the last sync round saw it, was under the limit's confirm threshold), and
 * not by on_failure or as a shadow would-deny.
 */
static inline int tiered_confirms(const target_t *t, const outcome_t *o)
{
    return t->p.synced == RL_SYNCED_TIERED && t->near && o->allowed && o->slot != NULL &&
           !(o->flags & (RL_FLAG_SHADOW | RL_FLAG_DEGRADED));
}

/*
 * The decision into the caller's struct, of out->size bytes: every field
 * of this build's struct when it has them all (a newer, larger one keeps its
 * tail), by stores, not a copy of a run-time size; an older, smaller one gets
 * only its prefix, as its size says (rl_decision_t's size field).
 */
static RL_MAYBE_UNUSED void write_decision(rl_decision_t *out, const target_t *t,
                                           const outcome_t *o)
{
    if (__builtin_expect(out->size >= sizeof *out, 1)) {
        out->allowed = o->allowed ? RL_ALLOW : RL_DENY;
        out->limit = t->p.rate_count;
        out->remaining = o->remaining;
        out->reset_ms = o->reset_ms;
        out->retry_after_ms = o->retry_ms;
        out->flags = o->flags;
        out->window_ms = t->p.period_ms;
        out->burst = t->p.normal.burst;
        out->policy = t->ls->name;
        return;
    }
    rl_decision_t d;
    d.size = out->size;
    d.allowed = o->allowed ? RL_ALLOW : RL_DENY;
    d.limit = t->p.rate_count;
    d.remaining = o->remaining;
    d.reset_ms = o->reset_ms;
    d.retry_after_ms = o->retry_ms;
    d.flags = o->flags;
    d.window_ms = t->p.period_ms;
    d.burst = t->p.normal.burst;
    d.policy = t->ls->name;
    memcpy(out, &d, out->size);
}

static inline void fail_decision(rl_decision_t *out)
{
    if (out != NULL && out->size >= RL_DECISION_SIZE_MIN) {
        size_t keep = out->size;
        memset(out, 0, keep < sizeof *out ? keep : sizeof *out);
        out->size = keep;
        out->allowed = RL_DENY;
    }
}

/* check.c: rl_check in full, every limit and every case (the fast paths of
 * check_fast.c call it, before any write, for what they do not answer). */
int rl__check_slow(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
                   rl_decision_t *out) __attribute__((noinline));

/* check.c: the same for one token, the key's probe already computed (the
 * fast paths' key that is marked hot or not yet in the table). */
int rl__check_probed(rl_t *rl, int id, const void *key, size_t key_len, rl_decision_t *out,
                     const rl_probe_t *probe) __attribute__((noinline));

/* A batch request on the fast path (check_fast.c): its limit, the version
 * and path read, its identity and probe's parts, its clock source. */
typedef struct rl_fast_req {
    rl_limit_slot_t *ls;
    uint64_t path, keybits;
    size_t home;
    rl_keyid_t kid;
    uint32_t v;
    int32_t source;
} rl_fast_req_t;

/* What rl__fast_batch_decide returns for a request it does not answer (not
 * in the table, marked hot with no lease here, a synced one while degraded,
 * an update or a retire met), before any write. */
#define RL__FAST_FALLBACK INT32_MIN

/* check_fast.c: rl_check_batch's first step for a request of cost 1 with
 * no decision: 1 and *f filled when the fast path may decide it, else 0
 * (the full step's: errors, sizes, costs, SLOW limits). */
int rl__fast_batch_prepare(rl_t *rl, const rl_request_t *r, size_t req_size,
                           rl_fast_req_t *f) __attribute__((noinline));

/* check_fast.c: decide and count a prepared request at the chunk's reading
 * `now` of its source, as rl_check would; or RL__FAST_FALLBACK. */
int rl__fast_batch_decide(rl_t *rl, const rl_request_t *r, const rl_fast_req_t *f,
                          uint64_t now) __attribute__((noinline));

/* check_lease.c: charge_word for a key marked hot, from a lease when the
 * check may take one, and before a deny from another CPU's (local/lease.h). */
int rl__check_charge_hot(rl_t *rl, target_t *t, rl_slotref_t *ref, uint32_t cost, outcome_t *o,
                         const void *key, size_t len);

/* check_exact.c: rl_check of an exact limit, one blocking round trip
 * (exact/exact.h). 0, or RL_ENOTSUP in a shared instance's process that did not
 * rl_shared_attach. */
int rl__check_exact(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o);

/* check_exact.c: rl_check of a tiered key near its limit (tiered_confirms),
 * one blocking round trip. */
void rl__check_tiered_confirm(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o);

/* check_exact.c: rl_check_async's trip to Redis, for an exact limit or a
 * tiered key the local tier admitted near its limit (`tiered`, its outcome
 * in *o): RL_PENDING (cb runs on the exact thread), or the answer inline
 * when it could not be queued, or RL_ENOTSUP as rl__check_exact. */
int rl__check_async_exact(rl_t *rl, target_t *t, outcome_t *o, int id, uint32_t cost,
                          int tiered, rl_check_cb cb, void *ud);

#endif
