/* SPDX-License-Identifier: MIT */
#include <sched.h>
#include <string.h>
#include "local/table.h"
#include "base/alloc.h"
#include "local/clock.h"
#include "local/hotcap.h"

int rl__table_init(rl_table_t *t, const rl_allocator_t *a, uint64_t max_keys,
                   rl_limits_t *limits, uint64_t idle_guard_fp, uint64_t ttl_fp)
{
    /* Load factor <= 2/3 keeps linear-probing runs short enough that a
     * window of RL_PROBE_MAX practically never fills before the table does. */
    size_t n = (size_t)(max_keys + max_keys / 2);
    if (n < 2 * RL_PROBE_MAX)
        n = 2 * RL_PROBE_MAX;
    t->slots = rl__calloc_big(a, n * sizeof(rl_slot_t), 64);
    if (t->slots == NULL)
        return RL_ENOMEM;
    t->nslots = n;
    t->max_keys = max_keys;
    t->limits = limits;
    t->idle_guard_fp = idle_guard_fp;
    t->ttl_fp = ttl_fp;
    atomic_init(&t->live, 0);
    atomic_init(&t->reclaimed, 0);
    return 0;
}

void rl__table_destroy(rl_table_t *t, const rl_allocator_t *a)
{
    rl__free_big(a, t->slots, t->nslots * sizeof(rl_slot_t), 64);
    t->slots = NULL;
}

size_t rl__table_bytes(const rl_table_t *t) { return t->nslots * sizeof(rl_slot_t); }

/* The live limit a slot's ctrl refers to, or NULL if it was removed. */
static rl_limit_slot_t *slot_limit(rl_table_t *t, uint64_t c)
{
    uint32_t lref = RL_CTRL_LREF(c);
    uint32_t idx = lref & RL_LIMIT_IDX_MASK;
    if (idx >= t->limits->cap)
        return NULL;
    rl_limit_slot_t *ls = &t->limits->slots[idx];
    /* acquire: as rl__limit_get, the params we may read were published with it. */
    uint32_t id = atomic_load_explicit(&ls->id, memory_order_acquire);
    return id != 0 && rl__limit_ref((int)id) == lref ? ls : NULL;
}

/* Give a retired slot's key count back to its limit and the table. */
static void release_counts(rl_table_t *t, uint64_t c)
{
    rl_limit_slot_t *ls = slot_limit(t, c);
    /* relaxed: occupancy counters; the caps they enforce are approximate by
     * at most the number of concurrent inserters. */
    if (ls != NULL)
        atomic_fetch_sub_explicit(&ls->nkeys, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->reclaimed, 1, memory_order_relaxed);
}

/*
 * We swapped the slot's TAT (last value `old`) to DEAD: finish the retire.
 * The reuse floor covers every value a stalled checker may still hold: the
 * final TAT and the highest TAT a refund lowered.
 */
static void retire_owned(rl_table_t *t, rl_slot_t *s, uint64_t c, uint64_t old)
{
    old &= RL_TAT_MASK;
    /* relaxed: written by refunds and conversions before their tat CAS,
     * which our acq_rel swap of tat follows in modification order. */
    uint64_t high = atomic_load_explicit(&s->aux, memory_order_relaxed);
    /* relaxed: published by the release store of ctrl below. */
    atomic_store_explicit(&s->aux, old > high ? old : high, memory_order_relaxed);
    /* Fold the slot's uncounted decisions into its limit's totals. relaxed:
     * counters. (A checker preempted between its charge and its count, for
     * longer than the key was idle, may still add one to the next occupant.) */
    uint64_t a = atomic_exchange_explicit(&s->admitted, 0, memory_order_relaxed);
    uint64_t d = atomic_exchange_explicit(&s->denied, 0, memory_order_relaxed);
    rl_limit_slot_t *ls = slot_limit(t, c);
    if (ls != NULL) {
        unsigned stripe = (unsigned)(s - t->slots);
        rl__stat_add_n(ls, stripe, RL_STAT_ADMITTED, a);
        rl__stat_add_n(ls, stripe, RL_STAT_DENIED, d);
    }
    release_counts(t, c);
    /* release: the floor is visible to whoever sees TOMB and reuses the slot.
     * Only the owner of the DEAD swap writes a LIVE slot's ctrl. */
    atomic_store_explicit(&s->ctrl, RL_CTRL_MAKE(0, 0, RL_CTRL_GEN(c) + 1, RL_SLOT_TOMB),
                          memory_order_release);
}

/*
 * Retire the occupant that ctrl value c names, whatever its TAT: used to
 * merge duplicates. Returns 1 and its last TAT, or 0 if it is already gone.
 */
static int retire_any(rl_table_t *t, rl_slot_t *s, uint64_t c, uint64_t *last)
{
    for (;;) {
        /* acquire: as slot_read, validated by the ctrl re-read. */
        uint64_t v = atomic_load_explicit(&s->tat, memory_order_acquire);
        /* relaxed: ordered after the load above by its acquire. */
        if (atomic_load_explicit(&s->ctrl, memory_order_relaxed) != c || v == RL_TAT_DEAD)
            return 0;
        /* acq_rel: the swap is the linearisation point of the retire; it must
         * see refunds' tat_high and order our later stores. */
        if (atomic_compare_exchange_strong_explicit(&s->tat, &v, RL_TAT_DEAD,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            retire_owned(t, s, c, v);
            *last = v;
            return 1;
        }
    }
}

/* Retire an idle occupant, only if its TAT is still `idle_tat`. */
static int retire_idle(rl_table_t *t, rl_slot_t *s, uint64_t c, uint64_t idle_tat)
{
    uint64_t v = idle_tat;
    /* acq_rel: as retire_any; failure means it was charged: not idle. */
    if (!atomic_compare_exchange_strong_explicit(&s->tat, &v, RL_TAT_DEAD, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    retire_owned(t, s, c, idle_tat);
    return 1;
}

/* May this LIVE slot (ctrl c, TAT v) be reclaimed at now? */
static int slot_idle(rl_table_t *t, rl_slot_t *s, uint64_t c, uint64_t v, uint64_t now_fp)
{
    if (v == RL_TAT_DEAD)
        return 0;
    v &= RL_TAT_MASK;
    rl_limit_slot_t *ls = slot_limit(t, c);
    if (ls == NULL)
        return 1; /* its limit was removed */
    rl_limit_params_t p;
    rl__params_read(ls, &p);
    if (!p.synced)
        return v + t->idle_guard_fp <= now_fp;
    /* relaxed: a zero read means the sync thread harvested them; a racing
     * increment comes from a charge, which would also have moved the TAT and
     * made the retire CAS fail. */
    return v + t->ttl_fp <= now_fp &&
           atomic_load_explicit(&s->admitted, memory_order_relaxed) == 0 &&
           atomic_load_explicit(&s->denied, memory_order_relaxed) == 0 &&
           (t->tok == NULL ||
            (atomic_load_explicit(&t->tok[s - t->slots].admitted, memory_order_relaxed) == 0 &&
             atomic_load_explicit(&t->tok[s - t->slots].denied, memory_order_relaxed) == 0));
}

/* A claimed slot's token counts start at 0, as its decision counters. */
static void tok_clear(rl_slottok_t *x)
{
    /* relaxed: as the counters' stores beside the call, published by the
     * claim's CAS of ctrl. */
    atomic_store_explicit(&x->admitted, 0, memory_order_relaxed);
    atomic_store_explicit(&x->denied, 0, memory_order_relaxed);
    atomic_store_explicit(&x->over_until, 0, memory_order_relaxed);
}

/* Reserve one key of the table's and the limit's capacity. */
static int reserve(rl_table_t *t, rl_limit_slot_t *lim, uint64_t max_keys)
{
    /* relaxed: counters only (see release_counts). */
    if (atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed) >= t->max_keys) {
        atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
        return 0;
    }
    if (max_keys != 0 &&
        atomic_fetch_add_explicit(&lim->nkeys, 1, memory_order_relaxed) >= max_keys) {
        atomic_fetch_sub_explicit(&lim->nkeys, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
        return 0;
    }
    if (max_keys == 0)
        atomic_fetch_add_explicit(&lim->nkeys, 1, memory_order_relaxed);
    return 1;
}

static void unreserve(rl_table_t *t, rl_limit_slot_t *lim)
{
    /* relaxed: counters only. */
    atomic_fetch_sub_explicit(&lim->nkeys, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
}

/*
 * Our claim at distance `mine` holds the key's identity (CLAIMING): before
 * publishing it, make sure no other slot of the key is or becomes chargeable,
 * so two slots of one key never both admit (burst 1: twice). Every claimer
 * claims (seq_cst) and then scans (seq_cst), so of two claimers of a key at
 * least one sees the other. A LIVE slot of the key wins: returns 1 with it
 * in *ref, and we give ours up. Another claim of the key (its identity is
 * the keybits: its id words may not be written yet) is killed by a CAS of
 * its ctrl to a new generation, so its own publishing CAS fails and its
 * claimer starts over; if it published first, our kill fails and we look at
 * it again. Returns 0 when ours may be published (its publishing CAS then
 * fails only if another claimer killed it the same way).
 */
static int claim_conflicts(rl_table_t *t, const rl_probe_t *p, size_t mine, rl_slotref_t *ref)
{
    for (size_t d = 0; d < RL_PROBE_MAX; d++) {
        if (d == mine)
            continue;
        rl_slot_t *s = rl__slot_at(t, p->home, d);
        for (;;) {
            /* seq_cst: the load half of the claim/claim pairing (above). */
            uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_seq_cst);
            unsigned st = RL_CTRL_STATE(c);
            if (st == RL_SLOT_EMPTY)
                return 0; /* no claimer of the key goes past an EMPTY slot */
            if (RL_CTRL_KEYBITS(c) != p->keybits)
                break;
            if (st == RL_SLOT_LIVE) {
                if (rl__slot_read(s, p, c, &ref->tat)) {
                    ref->slot = s;
                    return 1;
                }
                break;
            }
            if (st != RL_SLOT_CLAIMING)
                break;
            uint64_t killed = RL_CTRL_MAKE(RL_CTRL_TAG(c), RL_CTRL_LREF(c), RL_CTRL_GEN(c) + 1,
                                           RL_SLOT_CLAIMING);
            /* seq_cst: as the claim; a failure reloads and looks again. */
            if (atomic_compare_exchange_strong_explicit(&s->ctrl, &c, killed,
                                                        memory_order_seq_cst,
                                                        memory_order_relaxed))
                break;
        }
    }
    return 0;
}

/* What one look at the key's probe window found besides the key itself:
 * the first reusable slot (EMPTY, or a TOMB past its idle guard) and, while
 * there is none, the first LIVE slot idle enough to retire. */
typedef struct acq_window {
    size_t free_d; /* RL_PROBE_MAX: none */
    uint64_t free_c;
    size_t idle_d; /* RL_PROBE_MAX: none */
    uint64_t idle_c, idle_tat;
} acq_window_t;

/* Look at the window once. Returns 1 with the key's LIVE slot in *ref, or
 * 0 with what is reusable in *w. */
static int scan_window(rl_table_t *t, const rl_probe_t *p, uint64_t now_fp, acq_window_t *w,
                       rl_slotref_t *ref)
{
    w->free_d = w->idle_d = RL_PROBE_MAX;
    w->free_c = w->idle_c = w->idle_tat = 0;
    for (size_t d = 0; d < RL_PROBE_MAX; d++) {
        rl_slot_t *s = rl__slot_at(t, p->home, d);
        /* acquire: as in rl__table_find; also orders the TOMB's floor. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
        unsigned st = RL_CTRL_STATE(c);
        if (st == RL_SLOT_EMPTY) {
            if (w->free_d == RL_PROBE_MAX) {
                w->free_d = d;
                w->free_c = c;
            }
            break;
        }
        if (st == RL_SLOT_TOMB) {
            /* relaxed: ordered by the acquire load of ctrl above. */
            uint64_t floor = atomic_load_explicit(&s->aux, memory_order_relaxed);
            if (w->free_d == RL_PROBE_MAX && floor + t->idle_guard_fp < now_fp) {
                w->free_d = d;
                w->free_c = c;
            }
            continue;
        }
        if (st != RL_SLOT_LIVE)
            continue;
        if (RL_CTRL_KEYBITS(c) == p->keybits && rl__slot_read(s, p, c, &ref->tat)) {
            ref->slot = s;
            return 1;
        }
        if (w->idle_d == RL_PROBE_MAX && w->free_d == RL_PROBE_MAX) {
            /* relaxed: slot_idle and the retire CAS revalidate it. */
            uint64_t v = atomic_load_explicit(&s->tat, memory_order_relaxed);
            if (slot_idle(t, s, c, v, now_fp)) {
                w->idle_d = d;
                w->idle_c = c;
                w->idle_tat = v;
            }
        }
    }
    return 0;
}

/* No free slot or no capacity: make room from an idle key in our own
 * window, else from a batch of the table. A batch that frees nothing does
 * not end the insert: the bound on failed inserts (local/table.h) counts a batch
 * per attempt. */
static void make_room(rl_table_t *t, const rl_probe_t *p, const acq_window_t *w,
                      uint64_t now_fp)
{
    int room = w->idle_d != RL_PROBE_MAX &&
               retire_idle(t, rl__slot_at(t, p->home, w->idle_d), w->idle_c, w->idle_tat);
    if (!room)
        rl__table_sweep_some(t, now_fp);
}

enum { CLAIM_LOST = -1, CLAIM_OTHER = 0, CLAIM_LIVE = 1 };

/*
 * Claim slot s (seen as *free_c, reusable) for the key and publish it LIVE,
 * reserved capacity already taken. CLAIM_LIVE: ours, its words set (*live
 * the published ctrl, *bit the epoch bit of its TAT). CLAIM_OTHER: the
 * key's live slot is elsewhere, in *ref. CLAIM_LOST: another claimer took
 * the slot or killed our claim; look again. On anything but CLAIM_LIVE the
 * reservation is given back.
 */
static int claim_slot(rl_table_t *t, const rl_probe_t *p, rl_limit_slot_t *lim, rl_slot_t *s,
                      size_t d, uint64_t free_c, uint64_t now_fp, uint64_t *live, uint64_t *bit,
                      rl_slotref_t *ref)
{
    uint64_t claim = p->keybits | RL_CTRL_MAKE(0, 0, RL_CTRL_GEN(free_c), RL_SLOT_CLAIMING);
    /* seq_cst: wins the slot; acquire sees the floor and counts of the
     * retire before it; the stores below publish with release. And the
     * store half of two store->load pairings: with another claimer of
     * the key (claim_conflicts) and with an epoch conversion (below). */
    if (!atomic_compare_exchange_strong_explicit(&s->ctrl, &free_c, claim, memory_order_seq_cst,
                                                 memory_order_relaxed)) {
        unreserve(t, lim);
        return CLAIM_LOST;
    }
    /* seq_cst: pairs with rl__limits_update's store of a new epoch and
     * its sweep's seq_cst load of ctrl: either the sweep sees CLAIMING
     * (and waits to convert our word) or we see the new epoch here. A
     * full bucket owes nothing in any epoch, so it takes the newest. */
    *bit = rl__epoch_bit(atomic_load_explicit(&lim->epoch, memory_order_seq_cst));
    /* relaxed: ordered by the claim (acquire); restored if we give up. */
    uint64_t floor = atomic_load_explicit(&s->aux, memory_order_relaxed);
    /* release (seqlock write side): a reader that sees one of these
     * values also sees CLAIMING, so its validation fails instead of
     * mixing two keys. */
    atomic_store_explicit(&s->id_lo, p->id.lo, memory_order_release);
    atomic_store_explicit(&s->id_hi, p->id.hi, memory_order_release);
    atomic_store_explicit(&s->tat, now_fp | *bit, memory_order_release);
    int other = claim_conflicts(t, p, d, ref);
    *live = p->keybits | RL_CTRL_MAKE(0, 0, RL_CTRL_GEN(free_c), RL_SLOT_LIVE);
    if (other == 0) {
        /* release: a hot-key marker (hot/hot.c, mark_slot) whose RMW of the
         * word comes after this store sees our claim when it re-reads
         * ctrl, and takes back a mark meant for the last occupant. Free
         * on x86. */
        atomic_store_explicit(&s->share, 0, memory_order_release);
        /* relaxed: read only by the sync thread and retirers, after they
         * validated ctrl LIVE, which the CAS below publishes. */
        atomic_store_explicit(&s->aux, 0, memory_order_relaxed);
        atomic_store_explicit(&s->admitted, 0, memory_order_relaxed);
        atomic_store_explicit(&s->denied, 0, memory_order_relaxed);
        if (t->tok != NULL)
            tok_clear(&t->tok[s - t->slots]);
        uint64_t c = claim;
        /* seq_cst: publishes the slot (release) and takes part in the
         * store->load ordering of rl_limit_remove. A CAS: it fails if a
         * nearer claimer of the key killed our claim. */
        if (atomic_compare_exchange_strong_explicit(&s->ctrl, &c, *live, memory_order_seq_cst,
                                                    memory_order_relaxed))
            return CLAIM_LIVE;
        other = -1;
    }
    /* Give the claim up: nobody could charge it. The slot goes back to
     * TOMB with the floor it had, so it is reusable as it was (relaxed:
     * published by the release store of ctrl, as in retire_owned). */
    atomic_store_explicit(&s->aux, floor, memory_order_relaxed);
    atomic_store_explicit(&s->ctrl, RL_CTRL_MAKE(0, 0, RL_CTRL_GEN(claim) + 2, RL_SLOT_TOMB),
                          memory_order_release);
    unreserve(t, lim);
    return other > 0 ? CLAIM_OTHER : CLAIM_LOST;
}

int rl__table_acquire(rl_table_t *t, const rl_probe_t *p, rl_limit_slot_t *lim,
                      uint64_t max_keys, uint64_t now_fp, rl_slotref_t *ref)
{
    for (int attempt = 0; attempt < RL_TABLE_ACQUIRE_ATTEMPTS; attempt++) {
        acq_window_t w;
        if (scan_window(t, p, now_fp, &w, ref))
            return 1;
        if (w.free_d == RL_PROBE_MAX || !reserve(t, lim, max_keys)) {
            make_room(t, p, &w, now_fp);
            continue;
        }
        rl_slot_t *s = rl__slot_at(t, p->home, w.free_d);
        uint64_t live, bit;
        int got = claim_slot(t, p, lim, s, w.free_d, w.free_c, now_fp, &live, &bit, ref);
        if (got == CLAIM_OTHER)
            return 1; /* the key's live slot, in *ref */
        if (got == CLAIM_LOST) {
            /* Another inserter took the slot, or a claim of the same key
             * won (either made progress): look again without using up an
             * attempt, which would send a key that has room to the no-slot
             * path (on_failure) under contention. */
            attempt--;
            continue;
        }
        /* seq_cst: pairs with rl_limit_remove's seq_cst store of id 0, so
         * either its purge sees this slot or we see the removal here. */
        if (atomic_load_explicit(&lim->id, memory_order_seq_cst) == 0 ||
            rl__limit_ref((int)atomic_load_explicit(&lim->id, memory_order_relaxed)) !=
                RL_CTRL_LREF(live)) {
            uint64_t last;
            retire_any(t, s, live, &last);
            return 0;
        }
        ref->slot = s;
        ref->tat = now_fp | bit;
        return 1;
    }
    return 0;
}

static size_t sweep_range(rl_table_t *t, size_t from, size_t n, uint64_t now_fp)
{
    size_t freed = 0;
    for (size_t k = 0; k < n; k++) {
        rl_slot_t *s = &t->slots[(from + k) % t->nslots];
        /* acquire: as in rl__table_find. */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_acquire);
        if (RL_CTRL_STATE(c) != RL_SLOT_LIVE)
            continue;
        /* relaxed: revalidated by the retire CAS. */
        uint64_t v = atomic_load_explicit(&s->tat, memory_order_relaxed);
        if (slot_idle(t, s, c, v, now_fp) && retire_idle(t, s, c, v))
            freed++;
    }
    return freed;
}

size_t rl__table_sweep_some(rl_table_t *t, uint64_t now_fp)
{
    /* relaxed: a work-sharing cursor; overlap between sweepers is harmless. */
    uint64_t from = atomic_fetch_add_explicit(&t->cursor, RL_SWEEP_BATCH, memory_order_relaxed);
    return sweep_range(t, (size_t)(from % t->nslots), RL_SWEEP_BATCH, now_fp);
}

size_t rl__table_sweep(rl_table_t *t, uint64_t now_fp)
{
    return sweep_range(t, 0, t->nslots, now_fp);
}

void rl__table_purge_limit(rl_table_t *t, uint32_t lref)
{
    for (size_t i = 0; i < t->nslots; i++) {
        rl_slot_t *s = &t->slots[i];
        /* seq_cst: the other half of the remove/insert ordering (see
         * rl__table_acquire). */
        uint64_t c = atomic_load_explicit(&s->ctrl, memory_order_seq_cst);
        uint64_t last;
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_LREF(c) == lref)
            retire_any(t, s, c, &last);
    }
}

void rl__tat_high(_Atomic uint64_t *high, uint64_t v)
{
    /* relaxed: read by a retirer after its acq_rel swap of tat, which follows
     * the caller's later CAS of tat (release) in modification order. */
    uint64_t h = atomic_load_explicit(high, memory_order_relaxed);
    while (h < v &&
           !atomic_compare_exchange_weak_explicit(high, &h, v, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

void rl__bucket_rescale(_Atomic uint64_t *w, _Atomic uint64_t *over, const rl_gcra_t *from,
                        const rl_gcra_t *to, uint64_t now_fp)
{
    /* acquire: a debt's or a wait's charge raised `over` before its CAS of
     * the word (release); a word it wrote comes with its mark, read after. */
    uint64_t x = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        uint64_t tat = x & RL_TAT_MASK;
        if (x == RL_TAT_DEAD || tat <= now_fp)
            return; /* dying, or full: nothing owed either way */
        /* relaxed: ordered after the word's load (or failed CAS) by its acquire. */
        uint64_t until = over != NULL ? atomic_load_explicit(over, memory_order_relaxed) : 0;
        int keep = now_fp < until;
        uint64_t next = rl__gcra_rescale(tat, from, to, now_fp, keep);
        /* Still beyond the new burst: until when, in the new unit. Raised
         * before the CAS, as a charge does; one that fails may leave the
         * mark later than needed, which is harmless: a marked key that
         * owes no more than its burst is rescaled as an unmarked one. */
        if (keep && next - now_fp > to->tau_fp)
            rl__tat_high(over, next - to->tau_fp);
        /* acquire on failure: as the load (and on success, which a
         * failure's order may not exceed; free on x86). An RMW, so it
         * carries on the word's release sequence. */
        if (next == tat ||
            atomic_compare_exchange_weak_explicit(w, &x, next | (x & RL_TAT_EPOCH),
                                                  memory_order_acquire, memory_order_acquire))
            return;
    }
}

void rl__bucket_convert(_Atomic uint64_t *w, _Atomic uint64_t *high, uint64_t from_t,
                        uint64_t to_t, uint64_t bit, uint64_t u)
{
    /* relaxed: the CAS validates it. */
    uint64_t x = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        if (x == RL_TAT_DEAD || (x & RL_TAT_EPOCH) == bit)
            return; /* dying, or converted by a claimer's stamp */
        uint64_t tat = x & RL_TAT_MASK;
        uint64_t next = rl__gcra_convert(tat, from_t, to_t, u);
        if (next < tat && high != NULL)
            rl__tat_high(high, tat);
        /* release: heads the release sequence of the converted word, so a
         * check whose CAS (acquire) reads it or a later charge of it also
         * sees the epoch stored before this sweep (checkint.h: overtaken). */
        if (atomic_compare_exchange_weak_explicit(w, &x, next | bit, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

void rl__table_convert_limit(rl_table_t *t, uint32_t lref, uint64_t from_t, uint64_t to_t,
                             uint64_t bit, rl_clock_t *clk, int32_t source)
{
    for (size_t i = 0; i < t->nslots; i++) {
        rl_slot_t *s = &t->slots[i];
        uint64_t c;
        /* seq_cst: the load half of the pairing with a claimer (see
         * rl__table_acquire); a claim of this limit in progress is waited
         * for, then its word converted like any other. */
        while (RL_CTRL_STATE(c = atomic_load_explicit(&s->ctrl, memory_order_seq_cst)) ==
                   RL_SLOT_CLAIMING &&
               RL_CTRL_LREF(c) == lref)
            sched_yield();
        if (RL_CTRL_STATE(c) == RL_SLOT_LIVE && RL_CTRL_LREF(c) == lref)
            rl__bucket_convert(&s->tat, &s->aux, from_t, to_t, bit,
                               rl__clock_now_fp(clk, source));
    }
}

void rl__table_first_count(rl_table_t *t, rl_slot_t *s, const rl_probe_t *p, const void *key,
                           size_t len)
{
    size_t i = (size_t)(s - t->slots);
    if (t->dirty != NULL)
        /* release: a sync thread whose bitmap swap (acquire) sees this bit
         * also sees the add, so its swap of the counter includes it. */
        atomic_fetch_or_explicit(&t->dirty[i >> 6], UINT64_C(1) << (i & 63),
                                 memory_order_release);
    if (t->hotcap != NULL)
        rl__hotcap_offer(t->hotcap, i, p->id.lo, p->id.hi, RL_CTRL_LREF(p->keybits), key, len);
}
