/* SPDX-License-Identifier: MIT */
/*
 * The hot path: rl_check, rl_refund, rl_check_multi.
 * No lock, no allocation, no system call but the clock, no network wait.
 */
#include <string.h>
#include "instance.h"
#include "structsize.h"
#include "shareword.h"
#include "policy.h"
#include "exact.h"
#include "lease.h"

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
    int near;        /* tiered: the key's share word carries NEAR (shareword.h) */
    uint64_t margin; /* the coarse-first margin, while p.clock_source says so */
} target_t;

/* p.clock_source of a target whose `now` is a coarse reading taken for a
 * precise-sourced limit (coarse-first, clock.h): the precise time is read
 * (clock_settle) before anything but a certain deny. In the snapshot's own
 * field, so the common path stores nothing more. */
#define CLOCK_COARSE_FIRST 2

void rl_decision_init_sized(rl_decision_t *d, size_t size)
{
    if (d == NULL || size < sizeof d->size)
        return;
    memset(d, 0, size);
    d->size = size;
    d->allowed = RL_DENY;
}

void rl_request_init_sized(rl_request_t *req, size_t size)
{
    if (req == NULL || size < sizeof req->size)
        return;
    memset(req, 0, size);
    req->size = size;
    req->cost = 1;
}

static int check_key(const void *key, size_t len)
{
    if (key == NULL && len > 0)
        return RL_EINVAL;
    if (len == 0 || len > RL_MAX_KEY_LEN)
        return RL_EKEYLEN;
    return 0;
}

/* Resolve the limit and the key's probe (all but the clock). */
static inline __attribute__((always_inline)) int target_prepare(rl_t *rl, int id,
                                                                const void *key, size_t len,
                                                                uint32_t cost, int detail,
                                                                target_t *t)
{
    int rc = check_key(key, len);
    if (rc != 0)
        return rc;
    t->ls = rl__limit_get(&rl->limits, id);
    if (t->ls == NULL)
        return RL_ENOTFOUND;
    t->detail = detail;
    t->near = 0;
    /* relaxed: one self-contained word (health.h); it orders nothing else. */
    t->health = rl__has_global(rl) ? atomic_load_explicit(&rl->health.word, memory_order_relaxed) : 0;
    rl__params_read_n(t->ls, &t->p, RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED, detail);
    if (cost > t->p.normal.burst)
        return RL_ECOST;
    rl__probe_init(&t->probe, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, len),
                   rl__limit_ref(id), t->ls->salt);
    return 0;
}

/* Resolve the limit and the key's probe; read the clock the limit uses. */
static inline __attribute__((always_inline)) int target_init(rl_t *rl, int id, const void *key,
                                                             size_t len, uint32_t cost,
                                                             int detail, target_t *t)
{
    int rc = target_prepare(rl, id, key, len, cost, detail, t);
    if (rc != 0)
        return rc;
    /* A charge of a precise-sourced limit whose charge takes at least two
     * margins starts coarse-first (clock.h, which says why two); peeks and
     * refunds, whose figures or writes need the time, and exact mode,
     * which is decided in Redis, do not. */
    uint64_t m;
    if (t->p.clock_source == RL_CLOCK_PRECISE && cost > 0 &&
        t->p.synced != RL_SYNCED_EXACT && (m = rl__clock_coarse_margin(&rl->clock)) != 0 &&
        rl__mul_sat(cost, t->p.normal.t_fp) >= 2 * m) {
        t->now = rl__clock_now_fp(&rl->clock, RL_CLOCK_COARSE);
        t->p.clock_source = CLOCK_COARSE_FIRST;
        t->margin = m;
    } else {
        t->now = rl__clock_now_fp(&rl->clock, t->p.clock_source);
    }
    return 0;
}

/* Coarse-first: the precise time, now that the decision needs it. */
static inline void clock_settle(rl_t *rl, target_t *t)
{
    if (__builtin_expect(t->p.clock_source == CLOCK_COARSE_FIRST, 0)) {
        t->p.clock_source = RL_CLOCK_PRECISE;
        t->now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    }
}

/*
 * A word of the limit's own rate whose epoch bit is not the snapshot's
 * (limits.h, Epochs): either the word is one epoch behind (not converted
 * yet) and the previous normal applies, or the snapshot is behind (the word
 * was written after a newer publish, which happens-before our acquire load
 * of it). Reads the snapshot again to tell: 1 if it changed (the caller
 * starts over with it), 0 with *g set to the previous epoch's normal.
 * Rare (only while an update converts), so out of the hot path's line.
 */
static __attribute__((noinline, cold)) int epoch_behind(target_t *t, const rl_gcra_t **g)
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
static __attribute__((noinline, cold)) int overtaken(const target_t *t, uint64_t e, int behind)
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
static void recharge(target_t *t, _Atomic uint64_t *w, uint32_t tokens, uint64_t units)
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
static inline __attribute__((always_inline)) int charge_word(target_t *t, _Atomic uint64_t *w, uint64_t tat, const rl_gcra_t *g0,
                       uint32_t cost, int epochal, outcome_t *o)
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

/* A closed limit's Retry-After for a key with no table slot: the time in
 * which slots may have gone idle (and been reclaimed). */
#define NOSLOT_RETRY_MS 1000

/* Write an open or closed on_failure answer (policy.h) into o. */
static void failure_answer(const rl_failure_answer_t *a, outcome_t *o)
{
    o->allowed = a->action == RL_FAILURE_ALLOW;
    o->remaining = a->remaining;
    o->reset_ms = o->retry_ms = a->retry_ms;
}

/* A key with no table slot: the limit's on_failure decides. */
static void charge_noslot(target_t *t, uint32_t cost, outcome_t *o)
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

/* Count a decision by the answer its caller gets (shadow would-denies are
 * allows): on its slot, which the sync thread harvests and reports to Redis
 * as the key's usage, or on the limit's stripes when it has none; and the
 * rare flags. Called once a decision is final and, in rl_check_multi, before
 * the batch's refunds: a bucket just charged (or in debt, having denied) is
 * not idle, so its slot is not retired and reused before the count lands. */
static inline __attribute__((always_inline)) void count(rl_t *rl, target_t *t, const outcome_t *o,
                                                        const void *key, size_t len)
{
    if (o->slot != NULL && !o->leased)
        rl__table_count(&rl->table, o->slot, o->allowed, &t->probe, key, len);
    if (o->slot != NULL && !(o->flags & (RL_FLAG_SHADOW | RL_FLAG_DEGRADED)))
        return;
    unsigned stripe = o->stripe;
    if (o->flags & RL_FLAG_SHADOW)
        rl__stat_add(t->ls, stripe, RL_STAT_SHADOW);
    if (o->slot != NULL) { /* degraded: by policy */
        if (!(o->flags & RL_FLAG_DEGRADED))
            return; /* a shadow would-deny only */
        rl__stat_add(t->ls, stripe, RL_STAT_DEGRADED);
        rl__stat_add(t->ls, stripe,
                     t->p.on_failure == RL_FAIL_OPEN     ? RL_STAT_DEG_OPEN
                     : t->p.on_failure == RL_FAIL_CLOSED ? RL_STAT_DEG_CLOSED
                                                         : RL_STAT_DEG_LOCAL);
        return;
    }
    rl__stat_add(t->ls, stripe, RL_STAT_NOSLOT);
    rl__stat_add(t->ls, stripe, RL_STAT_DEGRADED);
    rl__stat_add(t->ls, stripe, o->allowed ? RL_STAT_ADMITTED : RL_STAT_DENIED);
}

/* The bucket parameters a key's slot runs at: the limit's own, or for a
 * synced limit this node's share of it (pre-sync default until the first). */
/* Its hot mark (RL_FLAG_HOT into *flags) comes with the share word, on the
 * slot's line the check reads anyway: a hot key's check takes its tokens
 * from a lease (lease.h). */
static const rl_gcra_t *slot_gcra(target_t *t, rl_slot_t *s, uint32_t *flags)
{
    /* relaxed: the share word is self-contained (one word, never torn). */
    uint64_t w = atomic_load_explicit(&s->share, memory_order_relaxed);
    if (w & RL_SHAREWORD_HOT)
        *flags |= RL_FLAG_HOT;
    if (!t->p.synced)
        return &t->p.normal;
    if (RL_SHAREWORD_SHARE(w) == 0) {
        t->near = t->p.presync_near != 0;
        return &t->p.presync;
    }
    t->near = (w & RL_SHAREWORD_NEAR) != 0;
    rl__shareword_decode(w, &t->local);
    return &t->local;
}

/* A `local` limit while Redis is out: its key's last good share ramps to
 * the limit's degraded rate as the outage ages (policy.h). */
static const rl_gcra_t *degraded_gcra(rl_t *rl, target_t *t, const rl_gcra_t *last)
{
    uint64_t since = RL_HEALTH_SINCE(t->health);
    uint64_t age = t->now > since ? t->now - since : 0;
    rl__policy_degraded_gcra(last, &t->p.degraded, age, rl->degrade_ramp_fp, &t->local);
    return &t->local;
}

/* When a closed limit's callers may try again while degraded: the next
 * reconnect attempt, or else the next round's probe. */
static uint64_t degraded_retry_ms(rl_t *rl, const target_t *t)
{
    /* relaxed: a self-contained value. */
    uint64_t next = atomic_load_explicit(&rl->health.next_try_fp, memory_order_relaxed);
    uint64_t ms = next > t->now ? (next - t->now + RL_FP_PER_MS - 1) / RL_FP_PER_MS : 0;
    return ms != 0 ? ms : rl->sync_interval_ms;
}

/* A synced limit's check while the instance is degraded: its on_failure. */
static void charge_degraded(rl_t *rl, target_t *t, rl_slotref_t *ref, uint32_t cost,
                            outcome_t *o)
{
    o->flags |= RL_FLAG_DEGRADED;
    o->slot = ref->slot;
    o->bucket = NULL;
    rl_failure_answer_t a = rl__policy_on_failure(
        t->p.on_failure, t->p.normal.burst,
        t->p.on_failure == RL_FAIL_CLOSED ? degraded_retry_ms(rl, t) : 0);
    if (a.action != RL_FAILURE_LOCAL) {
        failure_answer(&a, o);
    } else {
        o->g = degraded_gcra(rl, t, o->g);
        if (charge_word(t, &ref->slot->tat, ref->tat, o->g, cost, 0, o) != 0) {
            o->slot = NULL; /* retired under us: the caller looks again */
            return;
        }
        o->bucket = o->allowed ? &ref->slot->tat : NULL;
    }
    /* Counted (count()) like any decision, so the usage is reported after
     * recovery and Redis's totals match what the nodes admitted. */
}

/* ------------------------------------------------- hot keys' leases */

static void refund_word(target_t *t, _Atomic uint64_t *w, _Atomic uint64_t *high,
                        const rl_gcra_t *g, uint32_t cost);

/* Whether a check may take its token from a lease (lease.h): rl_check,
 * rl_check_batch and rl_check_async of cost 1 on a hot key of a local or
 * synced limit (not exact, not tiered: their checks are counted in Redis),
 * in an instance that has leases. rl_check_multi never does: its undo gives
 * tokens back to the bucket word, and a leased token is counted already. */
static inline int lease_eligible(const rl_t *rl, const target_t *t, const outcome_t *o,
                                 uint32_t cost)
{
    return (o->flags & RL_FLAG_HOT) && cost == 1 && t->p.synced < RL_SYNCED_EXACT &&
           rl->leases.line != NULL;
}

/* The lease owner word of the target's key in slot s (index i), from its
 * ctrl word as validated now: 0 when the slot no longer holds the key (the
 * caller then charges as any key, which looks it up again). */
static int lease_owner(const target_t *t, rl_slot_t *s, size_t i, uint64_t *me)
{
    /* acquire: the seqlock read of rl__table_find (table.h). */
    uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
    uint64_t tat;
    if (RL_CTRL_STATE(c) != RL_SLOT_LIVE || RL_CTRL_KEYBITS(c) != t->probe.keybits ||
        !rl__slot_read(s, &t->probe, c, &tat))
        return 0;
    *me = rl__lease_owner(i, c);
    return 1;
}

/* A lease word's owner (of slot index i's group) names no live slot: its
 * tokens were its retired key's and may be dropped. */
static int lease_owner_gone(rl_t *rl, uint64_t owner, size_t i)
{
    size_t j = ((size_t)(owner >> 28) << RL_LEASE_GROUP_BITS) | (i & (RL_LEASE_GROUPS - 1));
    if (j >= rl->table.nslots)
        return 1;
    /* relaxed: the caller's acquire load of the lease word made the ctrl
     * value its installer validated visible; a later one (a retire) is a
     * newer ctrl, which only makes the owner gone. */
    uint64_t c = atomic_load_explicit(&rl->table.slots[j].ctrl, memory_order_relaxed);
    return RL_CTRL_STATE(c) != RL_SLOT_LIVE || !rl__lease_owner_is(owner, j, c);
}

/* Store `left` tokens already charged to the key's bucket in its lease word
 * lw, never above b: how many it took (the caller gives the rest back). A
 * word a live key of the group holds tokens in is left to it. */
static uint64_t lease_install(rl_t *rl, _Atomic uint64_t *lw, uint64_t me, size_t i,
                              uint64_t left, uint64_t b)
{
    /* acquire: pairs with the release below of whoever stored the word, so
     * lease_owner_gone reads its owner's slot no older than it was then. */
    uint64_t w = atomic_load_explicit(lw, memory_order_acquire);
    for (;;) {
        uint64_t tok = 0;
        if (RL_LEASE_OWNER(w) == me)
            tok = RL_LEASE_TOK(w);
        else if (RL_LEASE_TOK(w) != 0 && !lease_owner_gone(rl, RL_LEASE_OWNER(w), i))
            return 0;
        uint64_t n = tok >= b ? 0 : b - tok < left ? b - tok : left;
        if (n == 0)
            return 0;
        /* release: as above; acquire on failure: as the load. */
        if (atomic_compare_exchange_weak_explicit(lw, &w, RL_LEASE_MAKE(me, tok + n),
                                                  memory_order_release, memory_order_acquire))
            return n;
    }
}

/* Take one token from a lease word of ours: 1 taken (*left: what stays),
 * 0 none there (*seen: the word as last read). */
static inline int lease_take(_Atomic uint64_t *lw, uint64_t me, uint64_t *left, uint64_t *seen)
{
    /* relaxed: a lease word publishes nothing; the tokens in it were
     * charged to the bucket before they were stored, and whose they are is
     * in the word itself. The CAS alone makes takers add up. */
    uint64_t w = atomic_load_explicit(lw, memory_order_relaxed);
    while (RL_LEASE_OWNER(w) == me && RL_LEASE_TOK(w) != 0) {
        /* relaxed: as above. */
        if (atomic_compare_exchange_weak_explicit(lw, &w, w - 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *left = RL_LEASE_TOK(w) - 1;
            return 1;
        }
    }
    *seen = w;
    return 0;
}

/* A check admitted with a lease's token: counted when it was leased. */
static void lease_admitted(target_t *t, outcome_t *o, uint64_t tat, uint64_t left)
{
    o->allowed = 1;
    o->leased = 1;
    if (t->detail) {
        tat &= RL_TAT_MASK;
        o->remaining = rl__gcra_remaining(o->g, tat, t->now) + left;
        o->reset_ms = rl__gcra_reset_ms(tat, t->now);
        o->retry_ms = 0;
    }
}

/*
 * A hot key's check from its CPU's lease (lease.h). 1: admitted here (a
 * token of the lease, or of a batch just charged to the bucket, counted
 * with the batch); 0: the bucket could not pay a batch, or the slot
 * changed: charge as any key.
 */
static inline int lease_charge(rl_t *rl, target_t *t, rl_slotref_t *ref, outcome_t *o,
                               const void *key, size_t len)
{
    uint64_t b = rl__lease_batch(&rl->leases, o->g);
    rl_slot_t *s = ref->slot;
    size_t i = (size_t)(s - rl->table.slots);
    uint64_t me, left, w;
    if (b < 2 || !lease_owner(t, s, i, &me))
        return 0;
    _Atomic uint64_t *lw = rl__lease_line(&rl->leases, i, rl__lease_cpu());
    if (lease_take(lw, me, &left, &w)) {
        lease_admitted(t, o, ref->tat, left);
        return 1;
    }
    /* Another live hot key's tokens on the line: no batch to store, charge
     * as any key. A hint either way (the word was read relaxed): a batch
     * charged on a wrong "gone" is given back by lease_install's refusal,
     * which decides with an acquire load. */
    if (RL_LEASE_OWNER(w) != me && RL_LEASE_TOK(w) != 0 &&
        !lease_owner_gone(rl, RL_LEASE_OWNER(w), i))
        return 0;
    /* A batch from the bucket: one token for this check, the rest leased. */
    if (charge_word(t, &s->tat, ref->tat, o->g, (uint32_t)b, !t->p.synced, o) != 0 ||
        !o->allowed)
        return 0;
    uint64_t kept = lease_install(rl, lw, me, i, b - 1, b);
    if (kept < b - 1)
        refund_word(t, &s->tat, &s->aux, o->g, (uint32_t)(b - 1 - kept));
    /* relaxed: as rl__table_count's (table.h); the tokens kept are counted
     * admitted now, once, by the same counter the harvest swaps. */
    if (atomic_fetch_add_explicit(&s->admitted, 1 + kept, memory_order_relaxed) == 0 &&
        (rl->table.dirty != NULL || rl->table.hotcap != NULL))
        rl__table_first_count(&rl->table, s, &t->probe, key, len);
    o->leased = 1;
    if (t->detail)
        o->remaining += kept;
    return 1;
}

/* Before a hot key's check is denied: a token still leased on another CPU
 * (the bucket could not pay). Admits o from it when there is one. */
static __attribute__((noinline, cold)) void lease_steal(rl_t *rl, target_t *t, outcome_t *o)
{
    rl_slot_t *s = o->slot;
    size_t i = (size_t)(s - rl->table.slots);
    uint64_t me, left, w;
    if (rl__lease_batch(&rl->leases, o->g) < 2 || !lease_owner(t, s, i, &me))
        return;
    const rl_leases_t *l = &rl->leases;
    for (unsigned k = 0; k < l->stripes; k++) {
        if (lease_take(rl__lease_line(l, i, k), me, &left, &w)) {
            /* relaxed: figures only. */
            lease_admitted(t, o, atomic_load_explicit(&s->tat, memory_order_relaxed), left);
            return;
        }
    }
}

/* charge_word for a key marked hot: from a lease when the check may take
 * one (lease_eligible), and before a deny from another CPU's. */
static __attribute__((noinline)) int charge_hot(rl_t *rl, target_t *t, rl_slotref_t *ref,
                                                uint32_t cost, outcome_t *o, const void *key,
                                                size_t len)
{
    int leasing = lease_eligible(rl, t, o, cost);
    if (leasing && lease_charge(rl, t, ref, o, key, len))
        return 0;
    int rc = charge_word(t, &ref->slot->tat, ref->tat, o->g, cost, !t->p.synced, o);
    if (rc == 0 && leasing && !o->allowed) {
        o->slot = ref->slot;
        lease_steal(rl, t, o);
    }
    return rc;
}

/*
 * Coarse-first (clock.h): 1 if charging `cost` to the word `tat` (as found)
 * is denied even at the coarse time plus the margin, so at the precise time
 * too, with o written as that deny; 0 when the precise time must decide
 * (and for the rare word of another epoch or a dying slot). The figures are
 * at the coarse time, which is at or before the precise one: remaining is
 * never more than the precise figure, reset_ms and retry_after_ms never
 * less (a retry at retry_after_ms is not early), each off by at most the
 * coarse source's lag, under one tick.
 */
static inline int coarse_deny(const target_t *t, uint64_t tat, const rl_gcra_t *g,
                              uint32_t cost, int epochal, outcome_t *o)
{
    uint64_t bit = epochal ? rl__epoch_bit(t->p.epoch) : tat & RL_TAT_EPOCH;
    if (tat == RL_TAT_DEAD || ((tat ^ bit) >> 63))
        return 0;
    uint64_t val = tat ^ bit;
    if (rl__gcra_charge(g, val, t->now + t->margin, cost).allowed)
        return 0;
    o->allowed = 0;
    if (t->detail) {
        o->remaining = rl__gcra_remaining(g, val, t->now);
        o->reset_ms = rl__gcra_reset_ms(val, t->now);
        o->retry_ms = rl__gcra_retry_ms(g, val, t->now, cost);
    }
    return 1;
}

/* Charge cost > 0 to the target's key. */
static inline __attribute__((always_inline)) void charge(rl_t *rl, target_t *t, uint32_t cost,
                                                         outcome_t *o, const void *key,
                                                         size_t len, int lease)
{
    o->flags = 0;
    o->leased = 0;
    o->g = &t->p.normal;
    rl_slotref_t ref;
    for (;;) {
        if (!rl__table_find(&rl->table, &t->probe, &ref)) {
            clock_settle(rl, t); /* a new slot's floor is set at the precise time */
            if (!rl__table_acquire(&rl->table, &t->probe, t->ls, t->p.max_keys, t->now, &ref)) {
                charge_noslot(t, cost, o);
                break;
            }
        }
        /* (a look-up again finds the same key's new slot: a mark of the old
         * one is still this key's) */
        o->g = slot_gcra(t, ref.slot, &o->flags);
        /* Coarse-first for the plain charge only: the degraded ramp and a
         * hot key's leases read the precise time as before. */
        if (__builtin_expect(t->p.clock_source == CLOCK_COARSE_FIRST, 0)) {
            int plain = !(t->p.synced && RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED) &&
                        !(lease && (o->flags & RL_FLAG_HOT));
            if (plain && coarse_deny(t, ref.tat, o->g, cost, !t->p.synced, o)) {
                o->slot = ref.slot;
                o->bucket = NULL;
                break;
            }
            clock_settle(rl, t);
        }
        if (t->p.synced && RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED) {
            charge_degraded(rl, t, &ref, cost, o);
            if (o->slot != NULL)
                break;
            continue;
        }
        int rc = lease && __builtin_expect((o->flags & RL_FLAG_HOT) != 0, 0)
                     ? charge_hot(rl, t, &ref, cost, o, key, len)
                     : charge_word(t, &ref.slot->tat, ref.tat, o->g, cost, !t->p.synced, o);
        if (rc == 0) {
            o->slot = ref.slot;
            o->bucket = o->allowed ? &ref.slot->tat : NULL;
            break;
        }
        /* The slot was retired under us: look the key up again. */
    }
    /* A shadow would-deny is answered (and counted) as an allow. */
    if (!o->allowed && t->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
    o->stripe = o->slot ? (unsigned)(o->slot - rl->table.slots) : (unsigned)t->probe.home;
}

/* Report the state without charging (cost 0). */
static void peek(rl_t *rl, target_t *t, outcome_t *o)
{
    rl_slotref_t ref;
    int found = rl__table_find(&rl->table, &t->probe, &ref);
    uint64_t tat = found ? ref.tat : 0;
    uint32_t hot = 0;
    const rl_gcra_t *g = found ? slot_gcra(t, ref.slot, &hot) : t->p.synced ? &t->p.presync
                                                                            : &t->p.normal;
    int behind;
    /* A word of the other epoch: read at the parameters it is in (a newer
     * snapshot, if ours was behind, then the word as read). */
    while (found && !t->p.synced && epoch_gcra(t, tat, &g, &behind) != 0)
        g = &t->p.normal;
    tat &= RL_TAT_MASK;
    o->flags = RL_FLAG_PEEK | hot;
    o->remaining = rl__gcra_remaining(g, tat, t->now);
    o->allowed = o->remaining >= 1;
    o->reset_ms = rl__gcra_reset_ms(tat, t->now);
    o->retry_ms = o->allowed ? 0 : rl__gcra_retry_ms(g, tat, t->now, 1);
    o->slot = NULL;
    o->bucket = NULL;
    o->stripe = 0;
    o->leased = 0;
}


/* ------------------------------------------------------- exact mode */

/* A closed exact limit's Retry-After when Redis did not answer: the next
 * check may find it again. */
#define EXACT_RETRY_MS 1

/* An exact limit's check that Redis did not answer, on_failure=local: the
 * key's own table slot at the limit's degraded rate (this node's
 * pessimistic share), never synced. */
static void exact_local(rl_t *rl, target_t *t, uint32_t cost, outcome_t *o)
{
    rl_slotref_t ref;
    for (;;) {
        if (!rl__table_find(&rl->table, &t->probe, &ref) &&
            !rl__table_acquire(&rl->table, &t->probe, t->ls, t->p.max_keys, t->now, &ref)) {
            charge_noslot(t, cost, o);
            return;
        }
        o->g = &t->p.degraded;
        if (charge_word(t, &ref.slot->tat, ref.tat, o->g, cost, 0, o) == 0) {
            o->bucket = o->allowed ? &ref.slot->tat : NULL;
            return;
        }
    }
}

/* The decision of an exact check from Redis's answer, or from on_failure
 * (policy.h) when there was none. */
static void exact_outcome(rl_t *rl, target_t *t, uint32_t cost, const rl_exact_answer_t *a,
                          outcome_t *o)
{
    o->flags = 0;
    o->slot = NULL;
    o->bucket = NULL;
    o->g = &t->p.normal;
    o->stripe = (unsigned)t->probe.home;
    if (a->ok) {
        o->flags = RL_FLAG_EXACT | (cost == 0 ? RL_FLAG_PEEK : 0);
        o->allowed = a->allowed;
        o->remaining = a->remaining;
        o->reset_ms = a->reset_ms;
        o->retry_ms = a->retry_ms;
    } else {
        o->flags = RL_FLAG_DEGRADED;
        rl_failure_answer_t f =
            rl__policy_on_failure(t->p.on_failure, t->p.normal.burst, EXACT_RETRY_MS);
        if (f.action != RL_FAILURE_LOCAL) {
            failure_answer(&f, o);
        } else if (cost == 0) { /* a peek: the local share's whole burst */
            o->flags |= RL_FLAG_PEEK;
            o->allowed = 1;
            o->remaining = t->p.degraded.burst;
            o->reset_ms = o->retry_ms = 0;
        } else {
            exact_local(rl, t, cost, o);
        }
    }
    if (cost > 0 && !o->allowed && t->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
}

/* Count an exact decision on the limit's stripes (no slot is harvested:
 * Redis holds the count). */
static void count_exact(target_t *t, const outcome_t *o)
{
    unsigned st = o->stripe;
    rl__stat_add(t->ls, st, o->allowed ? RL_STAT_ADMITTED : RL_STAT_DENIED);
    if (o->flags & RL_FLAG_SHADOW)
        rl__stat_add(t->ls, st, RL_STAT_SHADOW);
    if (o->flags & RL_FLAG_NOSLOT)
        rl__stat_add(t->ls, st, RL_STAT_NOSLOT);
    if (o->flags & RL_FLAG_DEGRADED) {
        rl__stat_add(t->ls, st, RL_STAT_DEGRADED);
        rl__stat_add(t->ls, st,
                     t->p.on_failure == RL_FAIL_OPEN     ? RL_STAT_DEG_OPEN
                     : t->p.on_failure == RL_FAIL_CLOSED ? RL_STAT_DEG_CLOSED
                                                         : RL_STAT_DEG_LOCAL);
    }
}

static void exact_req(const target_t *t, uint32_t cost, rl_exact_req_t *r)
{
    memcpy(r->limit, t->ls->name, sizeof r->limit);
    r->limit[sizeof r->limit - 1] = '\0';
    r->id = t->probe.id;
    r->cost = cost;
    r->rate_count = t->p.rate_count;
    r->period_ms = t->p.period_ms;
    r->burst = t->p.normal.burst;
}

/* A shared instance's process that did not rl_shared_attach has no exact
 * thread: an error, logged (the check's answer would be a guess). */
static __attribute__((noinline, cold)) int exact_unattached(rl_t *rl, const target_t *t)
{
    rl__log(&rl->logger, RL_LOG_ERROR,
            "limit %.64s: process %d checks an exact limit of a shared instance without "
            "rl_shared_attach (which starts its Redis connections)", t->ls->name, (int)getpid());
    return RL_ENOTSUP;
}

/* rl_check of an exact limit: one blocking round trip (exact.h). 0, or
 * RL_ENOTSUP in a shared instance's process that did not attach. */
static __attribute__((noinline)) int exact_check(rl_t *rl, target_t *t, uint32_t cost,
                                                 outcome_t *o)
{
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return exact_unattached(rl, t);
    rl__params_read(t->ls, &t->p); /* the whole snapshot: rate, degraded */
    rl_exact_req_t r;
    rl_exact_answer_t a;
    exact_req(t, cost, &r);
    rl__exact_check(x, &r, &a);
    exact_outcome(rl, t, cost, &a, o);
    if (cost > 0)
        count_exact(t, o);
    return 0;
}

/* ------------------------------------------------------- tiered mode */

/*
 * A tiered limit's check goes to Redis only when the local tier admitted it
 * (flagrant abuse is denied here, Redis untouched), at a share the sync
 * thread marked NEAR (shareword.h: the fleet-wide remaining of the key, as
 * the last sync round saw it, was under the limit's confirm threshold), and
 * not by on_failure or as a shadow would-deny.
 */
static inline int tiered_confirms(const target_t *t, const outcome_t *o)
{
    return t->p.synced == RL_SYNCED_TIERED && t->near && o->allowed && o->slot != NULL &&
           !(o->flags & (RL_FLAG_SHADOW | RL_FLAG_DEGRADED));
}

/*
 * The decision of a confirmed tiered check from Redis's answer to exact.lua
 * (ok 0: none, and the limit's on_failure decides; `local` keeps the local
 * tier's allow). Counted on the limit's stripes, never on the slot: what
 * exact.lua charged is in Redis already, so the sync thread must not report
 * it again; and a check that got no answer may have been charged there, so
 * it is not reported either (a timeout does not mean "not charged").
 *
 * A check Redis denies keeps its local charge: the local tokens pay for the
 * attempt, so a node asks Redis at most at its local share's rate, however
 * hard its callers push (the pre-filter), and a key Redis keeps denying is
 * denied locally in between.
 */
static void tiered_settle(target_t *t, const rl_exact_answer_t *a, outcome_t *o)
{
    o->slot = NULL;
    o->bucket = NULL;
    o->g = &t->p.normal;
    if (a->ok) {
        o->flags = RL_FLAG_EXACT;
        o->allowed = a->allowed;
        o->remaining = a->remaining;
        o->reset_ms = a->reset_ms;
        o->retry_ms = a->retry_ms;
    } else {
        o->flags = RL_FLAG_DEGRADED;
        rl_failure_answer_t f =
            rl__policy_on_failure(t->p.on_failure, t->p.normal.burst, EXACT_RETRY_MS);
        if (f.action != RL_FAILURE_LOCAL)
            failure_answer(&f, o); /* local: the local tier's allow stands */
    }
    if (!o->allowed && t->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
    count_exact(t, o);
}

/* rl_check of a tiered key near its limit: one blocking round trip. */
static __attribute__((noinline)) void tiered_confirm(rl_t *rl, target_t *t, uint32_t cost,
                                                     outcome_t *o)
{
    rl__params_read(t->ls, &t->p); /* the whole snapshot: rate, on_failure */
    rl_exact_req_t r;
    rl_exact_answer_t a;
    exact_req(t, cost, &r);
    rl__exact_check(rl__exact_of(rl), &r, &a); /* tiered: never in a shared instance */
    tiered_settle(t, &a, o);
}

static void write_decision(rl_decision_t *out, const target_t *t, const outcome_t *o)
{
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
    memcpy(out, &d, out->size < sizeof d ? out->size : sizeof d);
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

int rl_check(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
             rl_decision_t *out)
{
    if (out != NULL && out->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;
    if (rl == NULL) {
        fail_decision(out);
        return RL_EINVAL;
    }
    int rc = rl__fork_check(rl);
    target_t t;
    if (rc == 0)
        rc = target_init(rl, id, key, key_len, cost, out != NULL || cost == 0, &t);
    if (rc != 0) {
        fail_decision(out);
        return rc;
    }
    outcome_t o;
    if (__builtin_expect(t.p.synced == RL_SYNCED_EXACT, 0)) {
        if ((rc = exact_check(rl, &t, cost, &o)) != 0) {
            fail_decision(out);
            return rc;
        }
    } else if (cost == 0) {
        peek(rl, &t, &o);
    } else {
        charge(rl, &t, cost, &o, key, key_len, 1);
        if (__builtin_expect(tiered_confirms(&t, &o), 0))
            tiered_confirm(rl, &t, cost, &o);
        else
            count(rl, &t, &o, key, key_len);
    }
    if (out != NULL)
        write_decision(out, &t, &o);
    return o.allowed ? RL_ALLOW : RL_DENY;
}

/* Give tokens back to a bucket word; records the highest TAT it lowered so
 * a reuse of the slot starts above it (see table.h). `high` is NULL for the
 * overflow bucket, which is in the limit's own rate like a local key's. */
static void refund_word(target_t *t, _Atomic uint64_t *w, _Atomic uint64_t *high,
                        const rl_gcra_t *g, uint32_t cost)
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

int rl_refund(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost)
{
    if (rl == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    target_t t;
    if (rc == 0)
        rc = target_init(rl, id, key, key_len, 0, 0, &t);
    if (rc != 0)
        return rc;
    if (t.p.synced == RL_SYNCED_EXACT)
        return RL_ENOTSUP; /* Redis's bucket takes no refunds */
    rl_slotref_t ref;
    uint32_t flags = 0; /* unused: a refund has no decision */
    if (cost > 0 && rl__table_find(&rl->table, &t.probe, &ref))
        refund_word(&t, &ref.slot->tat, &ref.slot->aux, slot_gcra(&t, ref.slot, &flags), cost);
    return 0;
}

static int validate_multi(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                          const rl_decision_t *out, size_t *bad)
{
    *bad = 0;
    if (rl == NULL || (reqs == NULL && n > 0))
        return RL_EINVAL;
    if (n > RL_MULTI_MAX)
        return RL_ERANGE;
    if (req_size < RL_REQUEST_SIZE_MIN)
        return RL_ESIZE;
    if (out != NULL && n > 0 && out->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const rl_request_t *r = (const void *)((const char *)reqs + i * req_size);
        *bad = i;
        if (r->size != req_size)
            return RL_ESIZE;
        if ((rc = rl__struct_ok(r, r->size, RL_REQUEST_SIZE_MIN, sizeof *r)) != 0)
            return rc;
        if ((rc = check_key(r->key, r->key_len)) != 0)
            return rc;
        rl_limit_slot_t *ls = rl__limit_get(&rl->limits, r->limit);
        if (ls == NULL)
            return RL_ENOTFOUND;
        rl_limit_params_t p;
        rl__params_read(ls, &p);
        if (r->cost > p.normal.burst)
            return RL_ECOST;
        if (p.synced == RL_SYNCED_EXACT)
            return RL_ENOTSUP; /* all or nothing needs refunds */
    }
    return 0;
}

int rl_check_multi(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                   rl_decision_t *out, size_t *denied_index)
{
    size_t bad;
    int rc = validate_multi(rl, reqs, n, req_size, out, &bad);
    size_t stride = out != NULL ? out->size : 0;
#define OUT(i) ((rl_decision_t *)(void *)((char *)out + (i)*stride))
    if (rc != 0) {
        if (denied_index != NULL)
            *denied_index = bad;
        for (size_t i = 0; out != NULL && i < n && rc != RL_ESIZE; i++)
            fail_decision(OUT(i));
        return rc;
    }
    target_t t[RL_MULTI_MAX];
    outcome_t o[RL_MULTI_MAX];
    size_t denier = n;
    for (size_t i = 0; i < n; i++) {
        const rl_request_t *r = (const void *)((const char *)reqs + i * req_size);
        rc = target_init(rl, r->limit, r->key, r->key_len, r->cost,
                         out != NULL || r->cost == 0, &t[i]);
        if (rc != 0) { /* removed or updated since validation */
            denier = i;
            break;
        }
        if (r->cost == 0)
            peek(rl, &t[i], &o[i]);
        else
            charge(rl, &t[i], r->cost, &o[i], r->key, r->key_len, 0);
        if (!o[i].allowed) {
            denier = i;
            break;
        }
    }
    /* All or nothing: after a deny, no request of the batch was admitted. */
    for (size_t j = 0; j < denier && denier < n; j++)
        o[j].allowed = 0;
    /* Count each request once, by its final outcome, before any refund (see
     * count()): the refunded charges are counted denied, never admitted, so
     * they never reach Redis as usage. */
    for (size_t i = 0; i < n && i <= denier; i++) {
        const rl_request_t *r = (const void *)((const char *)reqs + i * req_size);
        if (r->cost != 0 && (i < denier || rc == 0))
            count(rl, &t[i], &o[i], r->key, r->key_len);
    }
    if (denier < n) {
        /* Give back what the earlier requests took. */
        for (size_t j = denier; j-- > 0;) {
            const rl_request_t *r = (const void *)((const char *)reqs + j * req_size);
            if (o[j].bucket != NULL && !(o[j].flags & RL_FLAG_SHADOW)) {
                refund_word(&t[j], o[j].bucket, o[j].slot ? &o[j].slot->aux : NULL, o[j].g,
                            r->cost);
                /* relaxed: reads back the state after the refund to report. */
                uint64_t tat =
                    atomic_load_explicit(o[j].bucket, memory_order_relaxed) & RL_TAT_MASK;
                o[j].remaining = rl__gcra_remaining(o[j].g, tat, t[j].now);
                o[j].reset_ms = rl__gcra_reset_ms(tat, t[j].now);
            }
        }
    }
    if (out != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (i < denier || (i == denier && rc == 0))
                write_decision(OUT(i), &t[i], &o[i]);
            else
                fail_decision(OUT(i));
        }
    }
#undef OUT
    if (denied_index != NULL)
        *denied_index = denier;
    if (rc != 0)
        return rc;
    return denier == n ? RL_ALLOW : RL_DENY;
}

/* Requests a batch resolves and prefetches before it charges the first:
 * enough misses in flight to cover a DRAM latency, few enough that the
 * targets (a few hundred bytes each) stay in L1. */
#define RL_BATCH_CHUNK 32

/* One request of a batch resolved as rl_check would (its error or 0). */
static int batch_prepare(rl_t *rl, const rl_request_t *r, size_t req_size, int detail,
                         target_t *t)
{
    if (r->size != req_size)
        return RL_ESIZE;
    int rc = rl__struct_ok(r, r->size, RL_REQUEST_SIZE_MIN, sizeof *r);
    if (rc == 0)
        rc = target_prepare(rl, r->limit, r->key, r->key_len, r->cost,
                            detail || r->cost == 0, t);
    return rc;
}

int rl_check_batch(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                   rl_decision_t *out, int *results)
{
    if (rl == NULL || (reqs == NULL && n > 0))
        return RL_EINVAL;
    if (n > RL_BATCH_MAX)
        return RL_ERANGE;
    if (req_size < RL_REQUEST_SIZE_MIN || (out != NULL && n > 0 && out->size < RL_DECISION_SIZE_MIN))
        return RL_ESIZE;
    int rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    size_t stride = out != NULL ? out->size : 0;
    int allowed = 0;
    target_t t[RL_BATCH_CHUNK];
    int st[RL_BATCH_CHUNK];
    for (size_t base = 0; base < n; base += RL_BATCH_CHUNK) {
        size_t m = n - base < RL_BATCH_CHUNK ? n - base : RL_BATCH_CHUNK;
        /* Hash every key, then start every home slot's line on its way
         * before any charge waits for one, so independent misses can
         * overlap. The prefetches go back to back, not between the hashes:
         * on this project's VM one that misses the TLB holds the pipeline
         * for its page walk (bench/README.md, rl_bench_batch). */
        for (size_t i = 0; i < m; i++) {
            const rl_request_t *r = (const void *)((const char *)reqs + (base + i) * req_size);
            st[i] = batch_prepare(rl, r, req_size, out != NULL, &t[i]);
        }
        for (size_t i = 0; i < m; i++)
            if (st[i] == 0)
                __builtin_prefetch(rl__slot_at(&rl->table, t[i].probe.home, 0), 1, 3);
        /* One clock reading per clock source and chunk: the chunk's checks
         * are decided at one instant, as if they had run back to back. */
        int64_t src[2];
        uint64_t now[2];
        size_t nsrc = 0;
        for (size_t i = 0; i < m; i++) {
            if (st[i] != 0)
                continue;
            size_t k = 0;
            while (k < nsrc && src[k] != t[i].p.clock_source)
                k++;
            if (k == nsrc) {
                if (nsrc == 2) { /* a third source: read it for this request */
                    t[i].now = rl__clock_now_fp(&rl->clock, t[i].p.clock_source);
                    continue;
                }
                src[nsrc] = t[i].p.clock_source;
                now[nsrc++] = rl__clock_now_fp(&rl->clock, t[i].p.clock_source);
            }
            t[i].now = now[k];
        }
        for (size_t i = 0; i < m; i++) {
            const rl_request_t *r = (const void *)((const char *)reqs + (base + i) * req_size);
            rl_decision_t *d = out != NULL ? (void *)((char *)out + (base + i) * stride) : NULL;
            if (st[i] == 0) {
                outcome_t o;
                if (t[i].p.synced == RL_SYNCED_EXACT) {
                    if ((st[i] = exact_check(rl, &t[i], r->cost, &o)) != 0) {
                        fail_decision(d);
                        if (results != NULL)
                            results[base + i] = st[i];
                        continue;
                    }
                } else if (r->cost == 0) {
                    peek(rl, &t[i], &o);
                } else {
                    charge(rl, &t[i], r->cost, &o, r->key, r->key_len, 1);
                    if (tiered_confirms(&t[i], &o))
                        tiered_confirm(rl, &t[i], r->cost, &o);
                    else
                        count(rl, &t[i], &o, r->key, r->key_len);
                }
                if (d != NULL)
                    write_decision(d, &t[i], &o);
                st[i] = o.allowed ? RL_ALLOW : RL_DENY;
                allowed += o.allowed != 0;
            } else {
                fail_decision(d);
            }
            if (results != NULL)
                results[base + i] = st[i];
        }
    }
    return allowed;
}

/* ------------------------------------------------------ rl_check_async */

/* What an asynchronous exact check carries to its answer (the exact
 * thread's slot holds a copy): enough to rebuild its target. */
typedef struct async_check {
    rl_t *rl;
    rl_check_cb cb;
    void *ud;
    int id;
    uint32_t cost;
    int tiered; /* a tiered key's confirmation: the local tier admitted it */
    rl_probe_t probe;
} async_check_t;

/* On the exact thread: Redis's answer (or none) to the host's callback. */
static void async_done(void *ctx, const rl_exact_answer_t *a)
{
    const async_check_t *c = ctx;
    target_t t;
    t.ls = rl__limit_get(&c->rl->limits, c->id);
    if (t.ls == NULL) { /* removed while in flight: Redis's verdict, if any, is moot */
        c->cb(c->ud, RL_ENOTFOUND, NULL);
        return;
    }
    rl__params_read(t.ls, &t.p);
    t.probe = c->probe;
    t.detail = 1;
    t.health = 0;
    t.now = rl__clock_now_fp(&c->rl->clock, t.p.clock_source);
    t.near = 0;
    outcome_t o;
    if (c->tiered) {
        o.allowed = 1; /* the local tier's, for on_failure=local */
        o.remaining = o.reset_ms = o.retry_ms = 0;
        o.stripe = (unsigned)t.probe.home;
        tiered_settle(&t, a, &o);
    } else {
        exact_outcome(c->rl, &t, c->cost, a, &o);
        if (c->cost > 0)
            count_exact(&t, &o);
    }
    rl_decision_t d;
    rl_decision_init(&d);
    write_decision(&d, &t, &o);
    c->cb(c->ud, o.allowed ? RL_ALLOW : RL_DENY, &d);
}

int rl_check_async(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
                   rl_check_cb cb, void *ud)
{
    if (rl == NULL || cb == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    target_t t;
    if (rc == 0)
        rc = target_init(rl, id, key, key_len, cost, cost == 0, &t);
    if (rc != 0)
        return rc;
    outcome_t o;
    int tiered = 0;
    if (t.p.synced != RL_SYNCED_EXACT) {
        if (cost == 0) {
            peek(rl, &t, &o);
        } else {
            charge(rl, &t, cost, &o, key, key_len, 1);
            tiered = tiered_confirms(&t, &o);
            if (!tiered)
                count(rl, &t, &o, key, key_len);
        }
        if (!tiered)
            return o.allowed ? RL_ALLOW : RL_DENY;
    }
    rl_exact_t *x = rl__exact_of(rl);
    if (x == NULL)
        return exact_unattached(rl, &t);
    rl__params_read(t.ls, &t.p);
    rl_exact_req_t r;
    exact_req(&t, cost, &r);
    async_check_t c = {rl, cb, ud, id, cost, tiered, t.probe};
    if (rl__exact_check_async(x, &r, async_done, &c, sizeof c) == 0)
        return RL_PENDING;
    /* Every slot busy (or closing): on_failure answers now, inline. */
    rl_exact_answer_t none;
    memset(&none, 0, sizeof none);
    if (tiered) {
        tiered_settle(&t, &none, &o);
        return o.allowed ? RL_ALLOW : RL_DENY;
    }
    exact_outcome(rl, &t, cost, &none, &o);
    if (cost > 0)
        count_exact(&t, &o);
    return o.allowed ? RL_ALLOW : RL_DENY;
}
