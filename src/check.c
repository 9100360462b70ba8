/* SPDX-License-Identifier: MIT */
/*
 * The hot path: rl_check's full form (rl__check_slow, behind the fast paths
 * of check_fast.c), rl_refund, rl_check_multi, rl_check_batch and
 * rl_check_async's local part. No lock, no allocation, no system call but
 * the clock, no network wait. A hot key's charge is in check_lease.c, the
 * checks Redis decides in check_exact.c; what they share, checkint.h.
 */
#include "checkint.h"

void rl_decision_init_sized(rl_decision_t *d, size_t size)
{
    static const rl_decision_t defaults = {.allowed = RL_DENY};
    rl__struct_init(d, size, &defaults, sizeof defaults);
}

void rl_request_init_sized(rl_request_t *req, size_t size)
{
    static const rl_request_t defaults = {.cost = 1};
    rl__struct_init(req, size, &defaults, sizeof defaults);
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
                                                                const rl_probe_t *probe,
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
    t->coarse = 0;
    /* relaxed: one self-contained word (local/health.h); it orders nothing else. */
    t->health = rl__has_global(rl) ? atomic_load_explicit(&rl->health.word, memory_order_relaxed) : 0;
    rl__params_read_n(t->ls, &t->p, RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED, detail);
    if (cost > t->p.normal.burst)
        return RL_ECOST;
    if (probe != NULL)
        t->probe = *probe;
    else
        rl__probe_init(&t->probe, &rl->table, &rl->kh, rl__keyhash(&rl->kh, key, len),
                       rl__limit_ref(id), t->ls->salt);
    return 0;
}

/* ------------------------------------------------------ coarse-first */

/*
 * The time a check is decided at: its limit's clock, except for a charge of
 * a precise-sourced limit that takes at least two margins (local/clock.h, which
 * says why two): that starts at the coarse time, and coarse_first reads the
 * precise one only if the coarse one cannot decide. Peeks and refunds,
 * whose figures or writes need the time, and exact mode, which is decided
 * in Redis, read their limit's clock.
 */
static inline void target_clock(rl_t *rl, target_t *t, uint32_t cost)
{
    uint64_t m;
    if (t->p.clock_source == RL_CLOCK_PRECISE && cost > 0 &&
        t->p.synced != RL_SYNCED_EXACT && (m = rl__clock_coarse_margin(&rl->clock)) != 0 &&
        rl__mul_sat(cost, t->p.normal.t_fp) >= 2 * m) {
        t->now = rl__clock_now_fp(&rl->clock, RL_CLOCK_COARSE);
        t->coarse = 1;
        t->margin = m;
    } else {
        t->now = rl__clock_now_fp(&rl->clock, t->p.clock_source);
    }
}

/*
 * Coarse-first (local/clock.h): 1 if charging `cost` to the word `tat` (as found)
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

/*
 * Coarse-first's one point in a charge, with the key looked up (ref, NULL
 * when it has no slot yet) and `now` the coarse time: 1 when coarse_deny
 * settles the charge as a deny, o written. Otherwise the precise time is
 * read into `now` and the charge goes on with it, as do a new slot (whose
 * floor is set at the precise time), the degraded ramp and a hot key's
 * leases, which coarse-first leaves alone.
 */
static inline __attribute__((always_inline)) int coarse_first(rl_t *rl, target_t *t,
                                                              const rl_slotref_t *ref,
                                                              uint32_t cost, int lease,
                                                              outcome_t *o)
{
    if (ref != NULL && !(t->p.synced && RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED) &&
        !(lease && (o->flags & RL_FLAG_HOT)) &&
        coarse_deny(t, ref->tat, o->g, cost, !t->p.synced, o)) {
        o->slot = ref->slot;
        o->bucket = NULL;
        return 1;
    }
    t->coarse = 0;
    t->now = rl__clock_now_fp(&rl->clock, RL_CLOCK_PRECISE);
    return 0;
}

/* Resolve the limit and the key's probe; read the time (target_clock). */
static inline __attribute__((always_inline)) int target_init(rl_t *rl, int id, const void *key,
                                                             size_t len, uint32_t cost,
                                                             int detail, target_t *t)
{
    int rc = target_prepare(rl, id, key, len, cost, detail, NULL, t);
    if (rc != 0)
        return rc;
    target_clock(rl, t, cost);
    return 0;
}

/* ------------------------------------------------------- the charge */

/* Count a decision by the answer its caller gets (shadow would-denies are
 * allows): on its slot, which the sync thread harvests and reports to Redis
 * as the key's usage, or on the limit's stripes when it has none; and the
 * rare flags. Called once a decision is final and, in rl_check_multi, before
 * the batch's refunds: a bucket just charged (or in debt, having denied) is
 * not idle, so its slot is not retired and reused before the count lands. */
static inline __attribute__((always_inline)) void count(rl_t *rl, target_t *t, const outcome_t *o,
                                                        uint32_t cost, const void *key, size_t len)
{
    if (o->slot != NULL && !o->leased) {
        rl__table_count(&rl->table, o->slot, o->allowed, &t->probe, key, len);
        /* Redis is told tokens: a synced key's cost beyond the decision. */
        if (__builtin_expect(cost > 1, 0) && t->p.synced && t->p.synced != RL_SYNCED_EXACT)
            rl__table_count_tokens(&rl->table, o->slot, o->allowed ? (int64_t)cost - 1 : 0,
                                   o->allowed ? 0 : cost - 1);
    }
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
        rl__degraded_note(rl, t->ls, t->health, t->p.on_failure, "the global tier is degraded");
        return;
    }
    rl__stat_add(t->ls, stripe, RL_STAT_NOSLOT);
    rl__stat_add(t->ls, stripe, RL_STAT_DEGRADED);
    rl__degraded_note(rl, t->ls, t->health, t->p.on_failure,
                      "no table slot for the key (max_keys, or the limit's, full of live keys)");
    rl__stat_add(t->ls, stripe, o->allowed ? RL_STAT_ADMITTED : RL_STAT_DENIED);
}

/* The bucket parameters a key's slot runs at: the limit's own, or for a
 * synced limit this node's share of it (pre-sync default until the first). */
/* Its hot mark (RL_FLAG_HOT into *flags) comes with the share word, on the
 * slot's line the check reads anyway: a hot key's check takes its tokens
 * from a lease (local/lease.h). */
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
 * the limit's degraded rate as the outage ages (policy/policy.h). */
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
        int found = rl__table_find(&rl->table, &t->probe, &ref);
        /* (a look-up again finds the same key's new slot: a mark of the old
         * one is still this key's) */
        if (found)
            o->g = slot_gcra(t, ref.slot, &o->flags);
        if (__builtin_expect(t->coarse, 0) &&
            coarse_first(rl, t, found ? &ref : NULL, cost, lease, o))
            break;
        if (!found) {
            if (!rl__table_acquire(&rl->table, &t->probe, t->ls, t->p.max_keys, t->now, &ref)) {
                charge_noslot(t, cost, o);
                break;
            }
            o->g = slot_gcra(t, ref.slot, &o->flags);
        }
        if (t->p.synced && RL_HEALTH_STATE(t->health) == RL_HEALTH_DEGRADED) {
            charge_degraded(rl, t, &ref, cost, o);
            if (o->slot != NULL)
                break;
            continue;
        }
        int rc = lease && __builtin_expect((o->flags & RL_FLAG_HOT) != 0, 0)
                     ? rl__check_charge_hot(rl, t, &ref, cost, o, key, len)
                     : charge_word(t, &ref.slot->tat, ref.tat, o->g, cost, !t->p.synced, o);
        if (rc == 0) {
            o->slot = ref.slot;
            o->bucket = o->allowed ? &ref.slot->tat : NULL;
            break;
        }
        /* The slot was retired under us: look the key up again. */
    }
    shadow_allow(t, o);
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

/* ---------------------------------------------------- entry points */

/* Decide a resolved check and write its decision to out (if any):
 * RL_ALLOW, RL_DENY, or an exact limit's error. */
static inline __attribute__((always_inline)) int decide(rl_t *rl, target_t *t, uint32_t cost,
                                                        const void *key, size_t len,
                                                        rl_decision_t *out)
{
    outcome_t o;
    if (__builtin_expect(t->p.synced == RL_SYNCED_EXACT, 0)) {
        int rc = rl__check_exact(rl, t, cost, &o);
        if (rc != 0) {
            fail_decision(out);
            return rc;
        }
    } else if (cost == 0) {
        peek(rl, t, &o);
    } else {
        charge(rl, t, cost, &o, key, len, 1);
        if (__builtin_expect(tiered_confirms(t, &o), 0))
            rl__check_tiered_confirm(rl, t, cost, &o);
        else
            count(rl, t, &o, cost, key, len);
    }
    if (out != NULL)
        write_decision(out, t, &o);
    if (o.allowed)
        return RL_ALLOW;
    /* A deny after instance time saturated is no rate limit's (local/clock.h). */
    return __builtin_expect(rl__clock_past_horizon(&rl->clock), 0) ? rl__horizon_error(rl)
                                                                     : RL_DENY;
}

int rl__check_slow(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
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
    return decide(rl, &t, cost, key, key_len, out);
}

int rl__check_probed(rl_t *rl, int id, const void *key, size_t key_len, rl_decision_t *out,
                     const rl_probe_t *probe)
{
    target_t t;
    int rc = target_prepare(rl, id, key, key_len, 1, out != NULL, probe, &t);
    if (rc != 0) {
        fail_decision(out);
        return rc;
    }
    target_clock(rl, &t, 1);
    return decide(rl, &t, 1, key, key_len, out);
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
            count(rl, &t[i], &o[i], r->cost, r->key, r->key_len);
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
                            detail || r->cost == 0, NULL, t);
    return rc;
}

/* The chunk's time: one clock reading per clock source, so its checks are
 * decided at one instant, as if they had run back to back. A fast request's
 * source is f[i].source, the others' their target's. */
static inline void batch_clock(rl_t *rl, target_t *t, const int *st, const unsigned char *fast,
                               const rl_fast_req_t *f, size_t m)
{
    int64_t src[2];
    uint64_t now[2];
    size_t nsrc = 0;
    for (size_t i = 0; i < m; i++) {
        if (st[i] != 0)
            continue;
        int64_t si = fast[i] ? f[i].source : t[i].p.clock_source;
        size_t k = 0;
        while (k < nsrc && src[k] != si)
            k++;
        if (k == nsrc) {
            if (nsrc == 2) { /* a third source: read it for this request */
                t[i].now = rl__clock_now_fp(&rl->clock, (int32_t)si);
                continue;
            }
            src[nsrc] = si;
            now[nsrc++] = rl__clock_now_fp(&rl->clock, (int32_t)si);
        }
        t[i].now = now[k];
    }
}

/* A fast request the fast step did not answer: the full step, at the same
 * reading. */
static __attribute__((noinline)) int batch_fallback(rl_t *rl, const rl_request_t *r,
                                                    size_t req_size, target_t *t)
{
    uint64_t now = t->now;
    int rc = batch_prepare(rl, r, req_size, 0, t);
    if (rc != 0)
        return rc;
    t->now = now;
    return decide(rl, t, r->cost, r->key, r->key_len, NULL);
}

/* Requests [base, base + m) of a batch; how many were allowed. */
static inline __attribute__((always_inline)) int batch_chunk(rl_t *rl, const rl_request_t *reqs,
                                                             size_t base, size_t m,
                                                             size_t req_size, rl_decision_t *out,
                                                             int *results)
{
    target_t t[RL_BATCH_CHUNK];
    int st[RL_BATCH_CHUNK];
    rl_fast_req_t f[RL_BATCH_CHUNK];
    unsigned char fast[RL_BATCH_CHUNK];
    size_t stride = out != NULL ? out->size : 0;
    int allowed = 0;
    /* Hash every key, then start every home slot's line on its way before
     * any charge waits for one, so independent misses can overlap. The
     * prefetches go back to back, not between the hashes: one that misses
     * the TLB can hold the pipeline for its page walk. */
    /* A request of cost 1 with no decision asked, on a limit the fast path
     * takes, is prepared and decided there (check_fast.c); the others, and
     * what the fast step does not answer, by the full step. */
    for (size_t i = 0; i < m; i++) {
        const rl_request_t *r = (const void *)((const char *)reqs + (base + i) * req_size);
        fast[i] = out == NULL && rl__fast_batch_prepare(rl, r, req_size, &f[i]);
        st[i] = fast[i] ? 0 : batch_prepare(rl, r, req_size, out != NULL, &t[i]);
    }
    for (size_t i = 0; i < m; i++)
        if (st[i] == 0)
            __builtin_prefetch(rl__slot_at(&rl->table, fast[i] ? f[i].home : t[i].probe.home, 0),
                               1, 3);
    batch_clock(rl, t, st, fast, f, m);
    for (size_t i = 0; i < m; i++) {
        const rl_request_t *r = (const void *)((const char *)reqs + (base + i) * req_size);
        rl_decision_t *d = out != NULL ? (void *)((char *)out + (base + i) * stride) : NULL;
        if (st[i] == 0 && fast[i]) {
            st[i] = rl__fast_batch_decide(rl, r, &f[i], t[i].now);
            if (st[i] == RL__FAST_FALLBACK)
                st[i] = batch_fallback(rl, r, req_size, &t[i]);
        } else if (st[i] == 0)
            st[i] = decide(rl, &t[i], r->cost, r->key, r->key_len, d);
        else
            fail_decision(d);
        allowed += st[i] == RL_ALLOW;
        if (results != NULL)
            results[base + i] = st[i];
    }
    return allowed;
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
    int allowed = 0;
    for (size_t base = 0; base < n; base += RL_BATCH_CHUNK)
        allowed += batch_chunk(rl, reqs, base,
                               n - base < RL_BATCH_CHUNK ? n - base : RL_BATCH_CHUNK, req_size,
                               out, results);
    return allowed;
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
                count(rl, &t, &o, cost, key, key_len);
        }
        if (!tiered)
            return o.allowed ? RL_ALLOW : RL_DENY;
    }
    return rl__check_async_exact(rl, &t, &o, id, cost, tiered, cb, ud);
}
