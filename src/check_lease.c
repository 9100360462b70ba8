/* SPDX-License-Identifier: MIT */
/*
 * A hot key's check (local/lease.h): its tokens taken from its bucket in batches
 * and handed out from the running CPU's lease line. check.c's charge calls
 * here for a key whose share word carries the hot mark.
 */
#include "checkint.h"
#include "local/lease.h"

/* Whether a check may take its token from a lease (local/lease.h): rl_check,
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
    /* acquire: the seqlock read of rl__table_find (local/table.h). */
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
 * A hot key's check from its CPU's lease (local/lease.h). 1: admitted here (a
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
    /* relaxed: as rl__table_count's (local/table.h); the tokens kept are counted
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
int rl__check_charge_hot(rl_t *rl, target_t *t, rl_slotref_t *ref, uint32_t cost, outcome_t *o,
                         const void *key, size_t len)
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
