/* SPDX-License-Identifier: MIT */
#include <string.h>
#include "reserve/charge.h"
#include "base/structsize.h"
#include "local/shareword.h"
#include "policy/policy.h"

int rl__rkey_resolve(rl_t *rl, int id, rl_keyid_t kid, uint32_t cost, rl_rkey_t *k)
{
    int rc = rl__rkey_resolve_any(rl, id, kid, cost, k);
    if (rc == 0 && (k->p.synced == RL_SYNCED_EXACT || k->p.synced == RL_SYNCED_TIERED))
        return RL_EMODE;
    return rc;
}

int rl__rkey_resolve_any(rl_t *rl, int id, rl_keyid_t kid, uint32_t cost, rl_rkey_t *k)
{
    k->ls = rl__limit_get(&rl->limits, id);
    if (k->ls == NULL)
        return RL_ENOTFOUND;
    rl__params_read(k->ls, &k->p);
    if (cost > k->p.normal.burst)
        return RL_ECOST;
    /* relaxed: one self-contained word (local/health.h). */
    k->health = rl__has_global(rl) ? atomic_load_explicit(&rl->health.word, memory_order_relaxed)
                                   : 0;
    rl__probe_init(&k->probe, &rl->table, &rl->kh, kid, rl__limit_ref(id), k->ls->salt);
    k->now = rl__clock_now_fp(&rl->clock, (int32_t)k->p.clock_source);
    return 0;
}

/* The global tier's health: an exact limit's fallback (reserve/exact.c)
 * is Redis's answer missing, not the sync thread's. */
static int degraded(const rl_rkey_t *k)
{
    return k->p.synced && k->p.synced != RL_SYNCED_EXACT && RL_HEALTH_STATE(k->health) == RL_HEALTH_DEGRADED;
}

/* The parameters the key's slot runs at (check.c's, for the same word):
 * the limit's own, or a synced key's share (presync before its first), or
 * while degraded a `local` limit's ramp from it. */
static const rl_gcra_t *slot_gcra(rl_t *rl, rl_rkey_t *k, rl_slot_t *s, rl_gcra_t *tmp,
                                  uint32_t *flags)
{
    /* relaxed: the share word is self-contained. */
    uint64_t w = atomic_load_explicit(&s->share, memory_order_relaxed);
    if (w & RL_SHAREWORD_HOT)
        *flags |= RL_FLAG_HOT;
    if (!k->p.synced)
        return &k->p.normal;
    if (k->p.synced == RL_SYNCED_EXACT) /* on_failure=local: check_exact.c's exact_local */
        return &k->p.degraded;
    const rl_gcra_t *g = &k->p.presync;
    if (RL_SHAREWORD_SHARE(w) != 0) {
        rl__shareword_decode(w, tmp);
        g = tmp;
    }
    if (!degraded(k))
        return g;
    uint64_t since = RL_HEALTH_SINCE(k->health);
    rl_gcra_t last = *g;
    rl__policy_degraded_gcra(&last, &k->p.degraded, k->now > since ? k->now - since : 0,
                             rl->degrade_ramp_fp, tmp);
    return tmp;
}

enum { OP_ADMIT, OP_DEBT, OP_REFUND };

/* A synced key's mark of owing past its burst (local/table.h), else NULL. */
static _Atomic uint64_t *slot_over(rl_t *rl, const rl_rkey_t *k, rl_slot_t *s)
{
    return k->p.synced ? rl__table_over(&rl->table, s) : NULL;
}

/* One operation on a bucket word by CAS: 0 done, -1 the slot died. A local
 * key's word (epochal) carries its epoch's parity (local/bucket.h): a word
 * of the other one is at the previous epoch's T, or the snapshot is behind
 * and is read again. A write that updates overtook (two epochs, same
 * parity) is charged again at the word's new unit: conservative, as
 * checkint.h's recharge. */
static int word_op(rl_rkey_t *k, _Atomic uint64_t *w, _Atomic uint64_t *high,
                   _Atomic uint64_t *over, const rl_gcra_t *g0, int epochal, int op,
                   uint64_t tokens, uint64_t slack, rl_radmit_t *o)
{
    /* acquire: the word may be a conversion's (release), after which the
     * epoch and parameters are read and must be no older. */
    uint64_t x = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        if (x == RL_TAT_DEAD)
            return -1;
        const rl_gcra_t *g = epochal ? &k->p.normal : g0;
        uint64_t e = k->p.epoch;
        int behind = 0;
        if (epochal && (x & RL_TAT_EPOCH) != rl__epoch_bit(e)) {
            rl_limit_params_t q;
            rl__params_read(k->ls, &q);
            if (q.epoch != e) {
                k->p = q;
                /* acquire: as above. */
                x = atomic_load_explicit(w, memory_order_acquire);
                continue;
            }
            g = &k->p.prev;
            behind = 1;
        }
        uint64_t val = x & RL_TAT_MASK, now = k->now, next;
        uint64_t add = rl__mul_sat(tokens, g->t_fp);
        uint64_t base = rl__max_u64(val, now);
        if (op == OP_REFUND) {
            if (val <= now) {
                if (o != NULL) {
                    o->remaining = g->burst;
                    o->reset_ms = 0;
                }
                return 0; /* full: nothing is owed */
            }
            next = val - now > add ? val - add : now;
            rl__tat_high(high, val);
        } else {
            uint64_t cap = rl__max_u64(base, now + RL_DEBT_FP_MAX);
            next = add < cap - base ? base + add : cap;
        }
        if (op == OP_ADMIT && next - now > rl__add_sat(g->tau_fp, slack)) {
            o->allowed = 0;
            o->remaining = rl__gcra_remaining(g, val, now);
            o->reset_ms = rl__gcra_reset_ms(val, now);
            o->retry_ms = rl__gcra_retry_ms(g, val, now, (uint32_t)tokens);
            return 0;
        }
        /* A synced key owing past its share's burst (debt, or a wait's
         * turn): marked before the CAS, so the sync thread's rescale that
         * reads the word also reads the mark and keeps what it owes. */
        if (over != NULL && op != OP_REFUND && next - now > g->tau_fp)
            rl__tat_high(over, next - g->tau_fp);
        /* acq_rel: the release orders a refund's high-water store (and the
         * mark above) before the new TAT (local/table.h); acquire as the
         * load above. */
        if (!atomic_compare_exchange_weak_explicit(w, &x, next | (x & RL_TAT_EPOCH),
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        /* relaxed: ordered after the CAS by its acquire (checkint.h, overtaken). */
        if (epochal && atomic_load_explicit(&k->ls->epoch, memory_order_relaxed) >=
                           e + 2 - (uint64_t)behind) {
            rl__params_read(k->ls, &k->p);
            word_op(k, w, high, over, g0, epochal, OP_DEBT, tokens, 0, o);
        }
        if (op == OP_REFUND && o != NULL) {
            o->remaining = rl__gcra_remaining(g, next, now);
            o->reset_ms = rl__gcra_reset_ms(next, now);
        }
        if (op == OP_ADMIT) {
            o->allowed = 1;
            o->backed = 1;
            o->remaining = rl__gcra_remaining(g, next, now);
            o->reset_ms = rl__gcra_reset_ms(next, now);
            o->retry_ms = 0;
            o->ready_fp = next - now > g->tau_fp ? next - g->tau_fp : now;
        }
        return 0;
    }
}

/* The on_failure answer for an admission Redis or the table cannot back:
 * 1 when it settles the admission (o written), 0 for `local` (charge on). */
static int failure_answer(rl_rkey_t *k, uint64_t retry_ms, rl_radmit_t *o)
{
    rl_failure_answer_t a = rl__policy_on_failure((int)k->p.on_failure, k->p.normal.burst,
                                                  retry_ms);
    if (a.action == RL_FAILURE_LOCAL)
        return 0;
    o->allowed = a.action == RL_FAILURE_ALLOW;
    o->remaining = a.remaining;
    o->reset_ms = o->retry_ms = a.retry_ms;
    return 1;
}

void rl__rkey_admit(rl_t *rl, rl_rkey_t *k, uint32_t cost, uint64_t slack_fp, rl_radmit_t *o)
{
    o->allowed = 0;
    o->backed = 0;
    o->flags = 0;
    o->ready_fp = k->now;
    o->slot = NULL;
    o->cost = cost;
    rl_slotref_t ref;
    for (;;) {
        if (!rl__table_find(&rl->table, &k->probe, &ref) &&
            !rl__table_acquire(&rl->table, &k->probe, k->ls, k->p.max_keys, k->now, &ref)) {
            o->flags |= RL_FLAG_NOSLOT | RL_FLAG_DEGRADED;
            if (!failure_answer(k, 1000, o)) {
                /* local: a slotless key could not be settled: refused. */
                o->allowed = 0;
                o->remaining = 0;
                o->reset_ms = o->retry_ms = 1000;
            }
            break;
        }
        rl_gcra_t tmp;
        uint32_t fl = 0;
        const rl_gcra_t *g = slot_gcra(rl, k, ref.slot, &tmp, &fl);
        o->flags = fl;
        o->slot = ref.slot;
        if (degraded(k)) {
            o->flags |= RL_FLAG_DEGRADED;
            if (failure_answer(k, rl->sync_interval_ms, o))
                break;
        }
        if (word_op(k, &ref.slot->tat, &ref.slot->aux, slot_over(rl, k, ref.slot), g,
                    !k->p.synced, OP_ADMIT, cost, slack_fp, o) == 0)
            break;
        /* The slot was retired under us: look the key up again. */
    }
    if (!o->allowed && k->p.shadow) {
        o->allowed = 1;
        o->flags |= RL_FLAG_SHADOW;
    }
}

void rl__rkey_count(rl_t *rl, rl_rkey_t *k, const rl_radmit_t *o, const void *key, size_t len)
{
    unsigned stripe = (unsigned)k->probe.home;
    if (o->slot != NULL) {
        rl__table_count(&rl->table, o->slot, o->allowed, &k->probe, key, len);
        if (k->p.synced && o->cost > 1)
            rl__table_count_tokens(&rl->table, o->slot, o->allowed ? (int64_t)o->cost - 1 : 0,
                                   o->allowed ? 0 : o->cost - 1);
    } else {
        rl__stat_add(k->ls, stripe, o->allowed ? RL_STAT_ADMITTED : RL_STAT_DENIED);
    }
    if (o->flags & RL_FLAG_SHADOW)
        rl__stat_add(k->ls, stripe, RL_STAT_SHADOW);
    if (o->flags & RL_FLAG_NOSLOT)
        rl__stat_add(k->ls, stripe, RL_STAT_NOSLOT);
    if (o->flags & RL_FLAG_DEGRADED)
        rl__stat_add(k->ls, stripe, RL_STAT_DEGRADED);
}

void rl__rkey_count_settle(rl_t *rl, rl_rkey_t *k, int64_t tokens)
{
    rl_slotref_t ref;
    if (k->p.synced && rl__table_find(&rl->table, &k->probe, &ref))
        rl__table_count_tokens(&rl->table, ref.slot, tokens, 0);
}

int rl__rkey_debt(rl_t *rl, rl_rkey_t *k, uint64_t tokens)
{
    rl_slotref_t ref;
    for (;;) {
        if (!rl__table_find(&rl->table, &k->probe, &ref) &&
            !rl__table_acquire(&rl->table, &k->probe, k->ls, k->p.max_keys, k->now, &ref))
            return -1;
        rl_gcra_t tmp;
        uint32_t fl = 0;
        const rl_gcra_t *g = slot_gcra(rl, k, ref.slot, &tmp, &fl);
        if (word_op(k, &ref.slot->tat, &ref.slot->aux, slot_over(rl, k, ref.slot), g,
                    !k->p.synced, OP_DEBT, tokens, 0, NULL) == 0)
            return 0;
    }
}

void rl__rkey_refund(rl_t *rl, rl_rkey_t *k, uint64_t tokens, rl_radmit_t *o)
{
    rl_slotref_t ref;
    while (rl__table_find(&rl->table, &k->probe, &ref)) {
        rl_gcra_t tmp;
        uint32_t fl = 0;
        const rl_gcra_t *g = slot_gcra(rl, k, ref.slot, &tmp, &fl);
        if (word_op(k, &ref.slot->tat, &ref.slot->aux, slot_over(rl, k, ref.slot), g,
                    !k->p.synced, OP_REFUND, tokens, 0, o) == 0)
            return;
    }
}

void rl__rkey_decision(rl_decision_t *out, const rl_rkey_t *k, const rl_radmit_t *o)
{
    rl_decision_t d;
    memset(&d, 0, sizeof d);
    d.size = out->size;
    d.allowed = o->allowed ? RL_ALLOW : RL_DENY;
    d.limit = k->p.rate_count;
    d.remaining = o->remaining;
    d.reset_ms = o->reset_ms;
    d.retry_after_ms = o->allowed ? 0 : o->retry_ms;
    d.flags = o->flags;
    d.window_ms = k->p.period_ms;
    d.burst = k->p.normal.burst;
    d.policy = k->ls->name;
    /* An older, smaller struct gets its prefix; a newer one keeps its tail. */
    memcpy(out, &d, out->size < sizeof d ? out->size : sizeof d);
}

void rl__rkey_fail(rl_decision_t *out)
{
    if (out == NULL || out->size < RL_DECISION_SIZE_MIN)
        return;
    size_t keep = out->size;
    memset(out, 0, keep < sizeof *out ? keep : sizeof *out);
    out->size = keep;
    out->allowed = RL_DENY;
}
