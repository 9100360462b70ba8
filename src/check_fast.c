/* SPDX-License-Identifier: MIT */
/*
 * rl_check's fast paths: one token for a key already in the table, of a
 * limit whose path (local/limits.h, RL_PATH_*) is not SLOW: a local limit
 * on either clock, or a global one (SYNCED: the key's share word, or the
 * pre-sync default, decides). The same decision, counts and errors as
 * rl__check_slow, with the limit's parameters read in place (the words of
 * the copy the version word selects) instead of copied, and none of the
 * rare features' tests: the path said once, when the limit was published,
 * that they do not apply. A hot key of a local limit takes its CPU's leased
 * token here, without a clock read. Anything else (an error, a cost other
 * than 1, a key not in the table or marked hot with no token leased here, a
 * word of another epoch or of a dying slot, a decision struct of another
 * size, an update published during the read, a synced limit while the
 * instance is degraded) goes to the full check before any write, with the
 * same arguments (and the key's probe, once computed), and is answered
 * there.
 */
#include "checkint.h"
#include "local/lease.h"

/*
 * The words one charge runs at, read in place from the copy of a limit's
 * parameters its version word selected (local/limits.h): the key's bucket
 * (the limit's, or a synced key's share or pre-sync default), the epoch,
 * and a decision's figures when asked for. Read late, after the clock, so
 * that only the copy's address lives across the clock call; the reading is
 * one copy's if fast_params_same finds the version unchanged after it,
 * which every path asks before it writes.
 */
typedef struct fast_params {
    rl_gcra_t g;
    uint64_t epoch, rate_count, period_ms, burst;
} fast_params_t;

static inline __attribute__((always_inline)) void fast_words(const rl_param_copy_t *c,
                                                            uint64_t share, const int synced,
                                                            const int detail, fast_params_t *p)
{
    if (!synced) {
        p->g.t_fp = RL_PARAM_AT(c, normal.t_fp);
        p->g.tau_fp = RL_PARAM_AT(c, normal.tau_fp);
        p->epoch = RL_PARAM_AT(c, epoch);
    } else if (RL_SHAREWORD_SHARE(share) == 0) { /* check.c's slot_gcra */
        p->g.t_fp = RL_PARAM_AT(c, presync.t_fp);
        p->g.tau_fp = RL_PARAM_AT(c, presync.tau_fp);
        p->epoch = 0; /* unused: a synced word keeps its own bit */
    } else {
        rl__shareword_decode(share, &p->g);
        p->epoch = 0;
    }
    p->g.burst = 0; /* unread by the charge; a decision's burst is below */
    if (detail) {
        p->rate_count = RL_PARAM_AT(c, rate_count);
        p->period_ms = RL_PARAM_AT(c, period_ms);
        p->burst = RL_PARAM_AT(c, normal.burst);
    } else { /* unread: set so no path can use them unset */
        p->rate_count = p->period_ms = p->burst = 0;
    }
}

#define FAST_FALLBACK RL__FAST_FALLBACK

/* Whether the words read since the version v was loaded are one copy's. */
static inline int fast_params_same(rl_limit_slot_t *ls, uint32_t v)
{
    /* relaxed: ordered after the word loads by their acquire. */
    return atomic_load_explicit(&ls->ver, memory_order_relaxed) == v;
}

/*
 * After a CAS that wrote a word in epoch `e`, when the limit's epoch has
 * moved since: as charge_word, charge the token again at the word's current
 * unit if updates overtook the check (checkint.h, overtaken and recharge).
 */
static __attribute__((noinline, cold)) void fast_overtaken(rl_limit_slot_t *ls,
                                                           _Atomic uint64_t *w, uint64_t e,
                                                           uint64_t now)
{
    target_t t;
    t.ls = ls;
    t.now = now;
    rl__params_read(ls, &t.p);
    if (overtaken(&t, e, 0))
        recharge(&t, w, 1, 0);
}

/* A key's slot when it is not at its home: the whole probe (local/table.h).
 * Its slot, or slot NULL when the key has none. */
static __attribute__((noinline)) rl_slotref_t fast_find_far(rl_table_t *t, uint64_t lo,
                                                           uint64_t hi, uint64_t keybits,
                                                           size_t home)
{
    rl_probe_t p;
    rl_slotref_t ref;
    p.id.lo = lo;
    p.id.hi = hi;
    p.keybits = keybits;
    p.home = home;
    if (!rl__table_find(t, &p, &ref))
        ref.slot = NULL;
    return ref;
}

/* rl__check_probed for the fast path's key (marked hot, not in the table, a
 * synced one while degraded): its probe computed again here, off the path,
 * so the path keeps none. */
static __attribute__((noinline)) int fast_probed(rl_t *rl, int id, const void *key,
                                                 size_t key_len, rl_decision_t *out,
                                                 const rl_limit_slot_t *ls)
{
    rl_probe_t p;
    rl__probe_init(&p, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, key_len),
                   rl__limit_ref(id), ls->salt);
    return rl__check_probed(rl, id, key, key_len, out, &p);
}

/*
 * Whether the key whose identity is (lo, hi) lives in slot s, whose ctrl
 * word c matched its tag and limit: rl__slot_read's identity and seqlock,
 * as rl__table_find's first step, with *tat the word as validated. One
 * test of the three differences, not three branches.
 */
static inline __attribute__((always_inline)) int fast_at_home(rl_slot_t *s, uint64_t c,
                                                             uint64_t lo, uint64_t hi,
                                                             uint64_t *tat)
{
    /* acquire (seqlock read side), relaxed re-read: as rl__slot_read. */
    uint64_t a = atomic_load_explicit(&s->id_lo, memory_order_acquire);
    uint64_t b = atomic_load_explicit(&s->id_hi, memory_order_acquire);
    uint64_t v = atomic_load_explicit(&s->tat, memory_order_acquire);
    uint64_t c2 = atomic_load_explicit(&s->ctrl, memory_order_relaxed);
    *tat = v;
    return ((a ^ lo) | (b ^ hi) | (c2 ^ c)) == 0 && v != RL_TAT_DEAD;
}

/*
 * A hot key's token from its running CPU's lease (local/lease.h), as
 * lease_charge's first step, for a check without a decision: no clock, no
 * bucket CAS; the token was charged to the bucket and counted when leased.
 * The owner is the key's as its ctrl word `c` was validated by fast_find.
 * 1 taken; 0 none (the caller checks in full: a refill, a steal, a deny).
 */
static inline __attribute__((always_inline)) int fast_leased(rl_t *rl, const fast_params_t *p,
                                                            rl_slot_t *s, uint64_t c)
{
    if (c == 0 || rl->leases.line == NULL || rl__lease_batch(&rl->leases, &p->g) < 2)
        return 0;
    size_t i = (size_t)(s - rl->table.slots);
    uint64_t me = rl__lease_owner(i, c);
    _Atomic uint64_t *lw = rl__lease_line(&rl->leases, i, rl__lease_cpu());
    /* relaxed: as lease_take's (check_lease.c). */
    uint64_t w = atomic_load_explicit(lw, memory_order_relaxed);
    while (RL_LEASE_OWNER(w) == me && RL_LEASE_TOK(w) != 0)
        /* relaxed: as above. */
        if (atomic_compare_exchange_weak_explicit(lw, &w, w - 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 1;
    return 0;
}

/*
 * Count a decision on the key's slot (rl__table_count); when the counter
 * leaves 0, its first count is marked for the harvest with the key's own
 * identity, hashed again here (once per key and harvest) so the check does
 * not keep its probe.
 */
static __attribute__((noinline, cold)) void fast_first_count(rl_t *rl, int id,
                                                             const rl_limit_slot_t *ls,
                                                             rl_slot_t *s, const void *key,
                                                             size_t len)
{
    rl_probe_t probe;
    rl__probe_init(&probe, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, len),
                   rl__limit_ref(id), ls->salt);
    rl__table_first_count(&rl->table, s, &probe, key, len);
}

static inline __attribute__((always_inline)) void fast_count(rl_t *rl, int id,
                                                            const rl_limit_slot_t *ls,
                                                            rl_slot_t *s, int allowed,
                                                            const void *key, size_t len)
{
    /* relaxed: as rl__table_count's. */
    if (atomic_fetch_add_explicit(allowed ? &s->admitted : &s->denied, 1,
                                  memory_order_relaxed) == 0 &&
        (rl->table.dirty != NULL || rl->table.hotcap != NULL))
        fast_first_count(rl, id, ls, s, key, len);
}

/* The decision of a charge at `now` whose word's TAT was `val` (a deny) or
 * is now `val` (an allow), as write_decision writes it. */
static inline __attribute__((always_inline)) void fast_decision(rl_decision_t *out,
                                                               const rl_limit_slot_t *ls,
                                                               const fast_params_t *p,
                                                               int allowed, uint64_t val,
                                                               uint64_t now)
{
    out->allowed = allowed ? RL_ALLOW : RL_DENY;
    out->limit = p->rate_count;
    out->remaining = rl__gcra_remaining(&p->g, val, now);
    out->reset_ms = rl__gcra_reset_ms(val, now);
    out->retry_after_ms = allowed ? 0 : rl__gcra_retry_ms(&p->g, val, now, 1);
    out->flags = 0;
    out->window_ms = p->period_ms;
    out->burst = p->burst;
    out->policy = ls->name;
}

/* A deny at `now` of the word whose TAT (epoch bit off) is `val`: counted
 * on its slot, and past instance time's horizon an error (as decide()). */
static inline __attribute__((always_inline)) int fast_deny(rl_t *rl, int id,
                                                          const rl_limit_slot_t *ls,
                                                          const fast_params_t *p, rl_slot_t *s,
                                                          uint64_t val, uint64_t now,
                                                          const void *key, size_t len,
                                                          rl_decision_t *out)
{
    fast_count(rl, id, ls, s, 0, key, len);
    if (out != NULL)
        fast_decision(out, ls, p, 0, val, now);
    return __builtin_expect(rl__clock_past_horizon(&rl->clock), 0) ? rl__horizon_error(rl)
                                                                     : RL_DENY;
}

/*
 * Coarse-first (local/clock.h) for a PRECISE limit's key, found with word
 * `tat`: the time to decide at. *coarse set when the coarse reading plus the
 * margin already denies, so the caller denies at the returned coarse time;
 * otherwise the precise reading, as coarse_first in check.c.
 */
static inline __attribute__((always_inline)) uint64_t fast_precise(rl_t *rl, const rl_gcra_t *g,
                                                                  uint64_t limit_t_fp,
                                                                  uint64_t tat, uint64_t bit,
                                                                  int *coarse)
{
    uint64_t m = rl__clock_coarse_margin(&rl->clock);
    *coarse = 0;
    /* At least two margins of the limit's own T (target_clock's test), the
     * charge at the key's parameters g. */
    if (m != 0 && limit_t_fp >= 2 * m && tat != RL_TAT_DEAD && !((tat ^ bit) >> 63)) {
        uint64_t now = rl__clock_now_fp(&rl->clock, RL_CLOCK_COARSE);
        if (!rl__gcra_charge(g, tat ^ bit, now + m, 1).allowed) {
            *coarse = 1;
            return now;
        }
    }
    return rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
}

/*
 * rl__gcra_charge of one token, without its saturation: the word's TAT
 * (epoch bit off) is below 2^63, now at most 2^62 (RL_NOW_FP_MAX) and T below
 * 2^59 (a limit's at most RL_T_FP_MAX, a share word's 28 bits shifted by at
 * most 31), so the sum cannot wrap and the answer is the same.
 */
static inline __attribute__((always_inline)) rl_verdict_t fast_gcra(const rl_gcra_t *g,
                                                                   uint64_t tat, uint64_t now)
{
    rl_verdict_t v;
    uint64_t next = rl__max_u64(tat, now) + g->t_fp;
    v.allowed = next - now <= g->tau_fp;
    v.new_tat = v.allowed ? next : tat;
    return v;
}

/*
 * Charge one token to the key's word (found as `tat`) and answer, as
 * charge_word and decide() do, at the words of copy c (version v) read after
 * the clock (a PRECISE limit's after coarse-first). Reading the clock before
 * the lookup instead measured worse: a key marked hot pays a read its lease
 * does not need, and the allowed check saved 3. A local limit's word is in the limit's own rate, so its epoch
 * bit must be the copy's (else the full check converts or re-reads) and an
 * update published meanwhile is checked for after the CAS; a synced key's
 * is in its share's unit (the share word, or the pre-sync default), which
 * the sync thread rescales, so its bit is kept as found.
 */
static inline __attribute__((always_inline)) int fast_charge(rl_t *rl, int id, const void *key,
                                                            size_t key_len, rl_decision_t *out,
                                                            rl_limit_slot_t *ls, uint32_t v,
                                                            uint64_t path, rl_slot_t *s,
                                                            uint64_t tat, uint64_t share,
                                                            const int synced, const int detail,
                                                            const int batch, uint64_t now)
{
/* The full check for what this one does not answer (a batch's: its own). */
#define FAST_SLOW() (batch ? FAST_FALLBACK : rl__check_slow(rl, id, key, key_len, 1, out))
    const int epochal = !synced;
    const rl_param_copy_t *c = &ls->copy[v & 1];
    fast_params_t p;
    uint64_t bit;
    if (batch || (synced ? path & ~(uint64_t)RL_PATH_SYNCED : path) == RL_PATH_COARSE) {
        if (!batch) /* a batch's request: the chunk's reading of its source */
            now = rl__clock_now_fp(&rl->clock, RL_CLOCK_COARSE);
        fast_words(c, share, synced, detail, &p);
        if (!fast_params_same(ls, v))
            return FAST_SLOW();
        bit = epochal ? rl__epoch_bit(p.epoch) : tat & RL_TAT_EPOCH;
    } else {
        uint64_t limit_t_fp = RL_PARAM_AT(c, normal.t_fp);
        fast_words(c, share, synced, detail, &p);
        if (!fast_params_same(ls, v))
            return FAST_SLOW();
        bit = epochal ? rl__epoch_bit(p.epoch) : tat & RL_TAT_EPOCH;
        int coarse;
        now = fast_precise(rl, &p.g, limit_t_fp, tat, bit, &coarse);
        if (coarse)
            return fast_deny(rl, id, ls, &p, s, tat ^ bit, now, key, key_len, out);
    }
    for (;;) {
        if (!epochal)
            bit = tat & RL_TAT_EPOCH;
        /* The word's epoch bit is the snapshot's (a DEAD word's is set). */
        else if ((tat ^ bit) >> 63)
            return FAST_SLOW();
        rl_verdict_t vd = fast_gcra(&p.g, tat ^ bit, now);
        if (!vd.allowed) {
            if (tat == RL_TAT_DEAD) /* retired: the slow path looks again */
                return FAST_SLOW();
            return fast_deny(rl, id, ls, &p, s, tat ^ bit, now, key, key_len, out);
        }
        /* acquire on both: as charge_word's CAS. */
        if (atomic_compare_exchange_weak_explicit(&s->tat, &tat, vd.new_tat ^ bit,
                                                  memory_order_acquire, memory_order_acquire)) {
            /* relaxed: ordered after the CAS by its acquire (overtaken). */
            if (epochal && __builtin_expect(atomic_load_explicit(&ls->epoch,
                                                                 memory_order_relaxed) != p.epoch,
                                            0))
                fast_overtaken(ls, &s->tat, p.epoch, now);
            fast_count(rl, id, ls, s, 1, key, key_len);
            if (out != NULL)
                fast_decision(out, ls, &p, 1, vd.new_tat, now);
            return RL_ALLOW;
        }
    }
#undef FAST_SLOW
}

/* The key's lookup and charge, for a limit whose version v and path were
 * read, its identity kid and its probe's parts (keybits, home) computed;
 * for a batch's request (`batch`) at the chunk's reading `now`. */
static inline __attribute__((always_inline)) int fast_key(rl_t *rl, int id, const void *key,
                                                         size_t key_len, rl_decision_t *out,
                                                         rl_limit_slot_t *ls, uint32_t v,
                                                         uint64_t path, rl_keyid_t kid,
                                                         uint64_t keybits, size_t home,
                                                         const int detail, const int batch,
                                                         uint64_t now)
{
    /* The key's live slot: its home slot with one compare of ctrl (LIVE, tag
     * and limit; any generation) and the identity; a key further on, the
     * whole probe (ctrl 0 there: no lease take, fast_leased). */
    rl_slot_t *s = &rl->table.slots[home];
    /* acquire: as rl__table_find's. */
    uint64_t ctrl = atomic_load_explicit(&s->ctrl, memory_order_acquire);
    uint64_t tat;
    if (__builtin_expect((ctrl & ~(UINT64_C(0x3fff) << 2)) != (keybits | RL_SLOT_LIVE) ||
                             !fast_at_home(s, ctrl, kid.lo, kid.hi, &tat),
                         0)) {
        rl_slotref_t ref = fast_find_far(&rl->table, kid.lo, kid.hi, keybits, home);
        if (ref.slot == NULL)
            return batch ? FAST_FALLBACK : fast_probed(rl, id, key, key_len, out, ls);
        s = ref.slot;
        tat = ref.tat;
        ctrl = 0;
    }
    /* relaxed: the share word is self-contained; a local limit's key has
     * only the hot bit in it, a synced limit's its share too. */
    uint64_t share = atomic_load_explicit(&s->share, memory_order_relaxed);
    if (path & RL_PATH_SYNCED) {
        /* A hot key's lease, or on_failure while degraded: the full check.
         * relaxed: one self-contained word (local/health.h), as check.c. */
        if ((share & RL_SHAREWORD_HOT) ||
            (rl__has_global(rl) &&
             RL_HEALTH_STATE(atomic_load_explicit(&rl->health.word, memory_order_relaxed)) ==
                 RL_HEALTH_DEGRADED))
            return batch ? FAST_FALLBACK : fast_probed(rl, id, key, key_len, out, ls);
        return fast_charge(rl, id, key, key_len, out, ls, v, path, s, tat, share, 1, detail,
                           batch, now);
    }
    if (__builtin_expect(share != 0, 0)) {
        if (share == RL_SHAREWORD_HOT && out == NULL) {
            fast_params_t p;
            fast_words(&ls->copy[v & 1], 0, 0, 0, &p);
            p.g.burst = RL_PARAM_AT(&ls->copy[v & 1], normal.burst); /* the lease's batch */
            if (fast_params_same(ls, v) && fast_leased(rl, &p, s, ctrl))
                return RL_ALLOW;
        }
        return batch ? FAST_FALLBACK : fast_probed(rl, id, key, key_len, out, ls);
    }
    return fast_charge(rl, id, key, key_len, out, ls, v, path, s, tat, 0, 0, detail, batch, now);
}

/* rl_check's fast paths, for a decision (`detail`, out not NULL) or not:
 * two copies, so neither tests `out` again. */
static inline __attribute__((always_inline)) int fast_check(rl_t *rl, int id, const void *key,
                                                           size_t key_len, uint32_t cost,
                                                           rl_decision_t *out, const int detail)
{
    if (detail == 0)
        out = NULL;
    /* An id <= 0 is never live (a free limit slot's id is 0); the index and
     * id tests are rl__limit_get's, with no NULL for the path to test. */
    if (__builtin_expect(rl == NULL || cost != 1 || key == NULL || key_len == 0 ||
                             key_len > RL_MAX_KEY_LEN ||
                             (detail && out->size != sizeof *out) || rl__fork_check(rl) != 0 ||
                             id <= 0 || ((uint32_t)id & RL_LIMIT_IDX_MASK) >= rl->limits.cap,
                         0))
        return rl__check_slow(rl, id, key, key_len, cost, out);
    rl_limit_slot_t *ls = &rl->limits.slots[(size_t)((uint32_t)id & RL_LIMIT_IDX_MASK)];
    /* acquire: as rl__limit_get's (the add that published the id happened
     * before the reads of its words). */
    if (__builtin_expect(atomic_load_explicit(&ls->id, memory_order_acquire) != (uint32_t)id, 0))
        return rl__check_slow(rl, id, key, key_len, cost, out);
    /* acquire: as rl__params_read_n's, pairs with the writer's release. */
    uint32_t v = atomic_load_explicit(&ls->ver, memory_order_acquire);
    uint64_t path = RL_PARAM_AT(&ls->copy[v & 1], path);
    if (__builtin_expect(path == RL_PATH_SLOW, 0))
        return rl__check_slow(rl, id, key, key_len, cost, out);
    rl_keyid_t kid = rl__keyhash(&rl->kh, key, key_len);
    uint64_t m = rl__keyid_mix(&rl->kh, kid, ls->salt);
    return fast_key(rl, id, key, key_len, out, ls, v, path, kid,
                    RL_CTRL_MAKE((uint32_t)m, rl__limit_ref(id), 0, 0),
                    (size_t)(((unsigned __int128)m * rl->table.nslots) >> 64), detail, 0, 0);
}

int rl__fast_batch_prepare(rl_t *rl, const rl_request_t *r, size_t req_size,
                           rl_fast_req_t *f)
{
    /* The request's own errors, a size other than this build's, a cost
     * other than 1 and a SLOW limit are the full batch step's. */
    if (req_size != sizeof *r || r->size != sizeof *r || r->cost != 1 || r->key == NULL ||
        r->key_len == 0 || r->key_len > RL_MAX_KEY_LEN || r->limit <= 0 ||
        ((uint32_t)r->limit & RL_LIMIT_IDX_MASK) >= rl->limits.cap)
        return 0;
    rl_limit_slot_t *ls = &rl->limits.slots[(size_t)((uint32_t)r->limit & RL_LIMIT_IDX_MASK)];
    /* acquire: as rl__limit_get's; then as rl__params_read_n's. */
    if (atomic_load_explicit(&ls->id, memory_order_acquire) != (uint32_t)r->limit)
        return 0;
    f->v = atomic_load_explicit(&ls->ver, memory_order_acquire);
    f->path = RL_PARAM_AT(&ls->copy[f->v & 1], path);
    if (f->path == RL_PATH_SLOW)
        return 0;
    f->ls = ls;
    f->kid = rl__keyhash(&rl->kh, r->key, r->key_len);
    uint64_t m = rl__keyid_mix(&rl->kh, f->kid, ls->salt);
    f->keybits = RL_CTRL_MAKE((uint32_t)m, rl__limit_ref(r->limit), 0, 0);
    f->home = (size_t)(((unsigned __int128)m * rl->table.nslots) >> 64);
    f->source = (f->path & ~(uint64_t)RL_PATH_SYNCED) == RL_PATH_COARSE ? RL_CLOCK_COARSE
                                                                         : RL_CLOCK_PRECISE;
    return 1;
}

int rl__fast_batch_decide(rl_t *rl, const rl_request_t *r, const rl_fast_req_t *f, uint64_t now)
{
    return fast_key(rl, r->limit, r->key, r->key_len, NULL, f->ls, f->v, f->path, f->kid,
                    f->keybits, f->home, 0, 1, now);
}

/* The two copies apart, each a function of its own: each has its own
 * registers, and rl_check only jumps to one, so neither pays the other's
 * frame. */
static __attribute__((noinline)) int fast_check_plain(rl_t *rl, int id, const void *key,
                                                      size_t key_len, uint32_t cost)
{
    return fast_check(rl, id, key, key_len, cost, NULL, 0);
}

static __attribute__((noinline)) int fast_check_decision(rl_t *rl, int id, const void *key,
                                                         size_t key_len, uint32_t cost,
                                                         rl_decision_t *out)
{
    return fast_check(rl, id, key, key_len, cost, out, 1);
}

int rl_check(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
             rl_decision_t *out)
{
    if (out == NULL)
        return fast_check_plain(rl, id, key, key_len, cost);
    return fast_check_decision(rl, id, key, key_len, cost, out);
}
