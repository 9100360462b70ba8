/* SPDX-License-Identifier: MIT */
/*
 * rl_reserve, rl_reserve_wait, rl_settle, rl_release, rl_reserve_stats:
 * a reservation's entry (reserve/entries.h) and its tokens on the key's
 * bucket (reserve/charge.h).
 */
#include <inttypes.h>
#include <string.h>
#include <sys/random.h>
#include "reserve/reserve.h"
#include "reserve/charge.h"
#include "reserve/exact.h"
#include "base/alloc.h"
#include "base/structsize.h"


void rl_reservation_init_sized(rl_reservation_t *r, size_t size)
{
    rl__struct_init(r, size, NULL, sizeof *r);
}

void rl_reserve_stats_init_sized(rl_reserve_stats_t *s, size_t size)
{
    rl__struct_init(s, size, NULL, sizeof *s);
}

int rl__reserve_create(const rl_reserve_cfg_t *cfg, rl_reserve_t **out)
{
    rl_reserve_t *r = rl__calloc(cfg->alloc, sizeof *r, 64);
    if (r == NULL)
        return RL_ENOMEM;
    r->logger = cfg->logger;
    r->rents.n = cfg->max_reservations;
    if (r->rents.n > 0) {
        r->rents.e = rl__calloc(cfg->alloc, (size_t)r->rents.n * sizeof(rl_rent_t), 64);
        if (r->rents.e == NULL) {
            rl__free(cfg->alloc, r, sizeof *r, 64);
            return RL_ENOMEM;
        }
    }
    /* The mark that tells this instance's handles from another's (a handle
     * of a closed instance whose memory a new one reuses included). */
    if (getrandom(&r->tag, sizeof r->tag, GRND_NONBLOCK) != (ssize_t)sizeof r->tag)
        r->tag = (uint64_t)(uintptr_t)r * UINT64_C(0x9e3779b97f4a7c15) ^
                 (uint64_t)(uintptr_t)&r->tag;
    r->tag |= 1; /* never 0, which a zeroed handle carries */
    *out = r;
    return 0;
}

void rl__reserve_destroy(rl_reserve_t *r, const rl_allocator_t *a)
{
    if (r == NULL)
        return;
    rl__free(a, r->rents.e, (size_t)r->rents.n * sizeof(rl_rent_t), 64);
    rl__free(a, r, sizeof *r, 64);
}

/* ------------------------------------------------------------- expiry */

static uint64_t expiry_now(void *ctx, int32_t source)
{
    rl_t *rl = ctx;
    return rl__clock_now_fp(&rl->clock, source);
}

static void expired(void *ctx, const rl_rent_data_t *d)
{
    rl_t *rl = ctx;
    rl__reserve_add(rl->reserve, RL_RSV_EXPIRED, 1);
    rl__log(rl->reserve->logger, RL_LOG_WARN,
            "reserve: a reservation of %" PRIu64 " tokens on limit id %d was neither settled "
            "nor released within its ttl: settled at its estimate",
            d->held & ~RL_RENT_FLAGS, d->limit);
}

/* An exact or tiered reservation whose record Redis no longer has: counted
 * as expired (it ended at its estimate, or with Redis's data). */
static void gone(rl_t *rl, const rl_rent_data_t *d)
{
    rl__reserve_add(rl->reserve, RL_RSV_EXPIRED, 1);
    rl__log(rl->reserve->logger, RL_LOG_WARN,
            "reserve: a reservation of %" PRIu64 " tokens on limit id %d has no record in Redis "
            "(expired there, or lost with Redis's data): its settle charged nothing",
            d->held & ~RL_RENT_FLAGS, d->limit);
}

rl_rent_expiry_t rl__reserve_expiry(rl_t *rl)
{
    return (rl_rent_expiry_t){.now_fp = expiry_now, .expired = expired, .ctx = rl};
}

/* ----------------------------------------------------------- reserve */

static int check_key(const void *key, size_t len)
{
    if (key == NULL && len > 0)
        return RL_EINVAL;
    return len == 0 || len > RL_MAX_KEY_LEN ? RL_EKEYLEN : 0;
}

/* What every reservation call checks first. */
static int usable(rl_t *rl)
{
    if (rl == NULL)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc == 0 && rl->reserve == NULL)
        rc = RL_ENOTSUP;
    return rc;
}

/* rl_reserve_wait (max_wait_ms 0: rl_reserve), its arguments checked. */
static int reserve(rl_t *rl, int id, const void *key, size_t len, uint32_t estimate,
                   uint32_t max_wait_ms, uint32_t ttl_ms, rl_reservation_t *res,
                   rl_decision_t *out)
{
    rl_reserve_t *r = rl->reserve;
    rl_rkey_t k;
    rl_keyid_t kid = rl__keyhash(&rl->kh, key, len);
    int rc = rl__rkey_resolve_any(rl, id, kid, estimate, &k);
    if (rc != 0)
        return rc;
    if (rl__rsv_in_redis(&k) && max_wait_ms > 0)
        return RL_EMODE; /* a wait's turn is a local bucket's */
    rl_rent_expiry_t x = rl__reserve_expiry(rl);
    uint32_t index;
    uint64_t gen;
    if (!rl__rents_claim(&r->rents, &x, &index, &gen)) {
        rl__reserve_add(r, RL_RSV_FULL, 1);
        return RL_EFULL;
    }
    rl_radmit_t o;
    uint64_t bits = 0;
    if (rl__rsv_in_redis(&k)) {
        uint64_t rid[2] = {r->tag, (gen << RL_RENT_INDEX_BITS) | index};
        if ((rc = rl__rsv_exact_admit(rl, &k, estimate, ttl_ms, rid, &o, &bits)) != 0) {
            rl__rents_free(&r->rents, index, 0);
            return rc;
        }
    } else {
        rl__rkey_admit(rl, &k, estimate, (uint64_t)max_wait_ms * RL_FP_PER_MS, &o);
        bits = o.backed ? 0 : RL_RENT_UNBACKED;
    }
    rl__rkey_count(rl, &k, &o, key, len);
    if (out != NULL)
        rl__rkey_decision(out, &k, &o);
    if (!o.allowed) {
        rl__rents_free(&r->rents, index, 0);
        rl__reserve_add(r, RL_RSV_DENIED, 1);
        return RL_DENY;
    }
    rl_rent_data_t d = {
        .id_lo = kid.lo,
        .id_hi = kid.hi,
        .limit = id,
        .held = estimate | bits,
        .deadline_fp = k.now + (uint64_t)ttl_ms * RL_FP_PER_MS,
        .source = (int32_t)k.p.clock_source,
    };
    rl__rents_publish(&r->rents, index, &d);
    rl__reserve_add(r, RL_RSV_RESERVED, 1);
    res->token[0] = r->tag;
    res->token[1] = (gen << RL_RENT_INDEX_BITS) | index;
    res->limit = id;
    res->estimate = estimate;
    res->ready_in_ms = (o.ready_fp - k.now + RL_FP_PER_MS - 1) / RL_FP_PER_MS;
    return RL_ALLOW;
}

int rl_reserve_wait(rl_t *rl, int id, const void *key, size_t key_len, uint32_t estimate,
                    uint32_t max_wait_ms, uint32_t ttl_ms, rl_reservation_t *res,
                    rl_decision_t *out)
{
    if (out != NULL && out->size < RL_DECISION_SIZE_MIN)
        return RL_ESIZE;
    int rc = usable(rl);
    if (rc == 0 && (res == NULL || res->size < sizeof *res || estimate == 0 || ttl_ms == 0 ||
                    ttl_ms > RL_RESERVE_TTL_MAX_MS || max_wait_ms > RL_WAIT_MAX_MS))
        rc = RL_EINVAL;
    if (rc == 0)
        rc = check_key(key, key_len);
    if (rc == 0)
        rc = reserve(rl, id, key, key_len, estimate, max_wait_ms, ttl_ms, res, out);
    if (rc < 0 || rc == RL_DENY) {
        if (rc < 0)
            rl__rkey_fail(out);
        if (res != NULL && res->size >= sizeof *res)
            memset(res->token, 0, sizeof res->token);
    }
    return rc;
}

int rl_reserve(rl_t *rl, int id, const void *key, size_t key_len, uint32_t estimate,
               uint32_t ttl_ms, rl_reservation_t *res, rl_decision_t *out)
{
    return rl_reserve_wait(rl, id, key, key_len, estimate, 0, ttl_ms, res, out);
}

/* ------------------------------------------------------------ settle */

/* End a reservation at `actual` (release: as 0, counted released). */
static int finish(rl_t *rl, rl_reservation_t *res, uint32_t actual, int release)
{
    int rc = usable(rl);
    if (rc != 0)
        return rc;
    rl_reserve_t *r = rl->reserve;
    if (res == NULL || res->size < sizeof *res || res->token[0] != r->tag)
        return RL_EINVAL;
    if (actual > RL_COST_SETTLE_MAX)
        return RL_ERANGE;
    uint32_t index = (uint32_t)(res->token[1] & ((UINT64_C(1) << RL_RENT_INDEX_BITS) - 1));
    uint64_t gen = res->token[1] >> RL_RENT_INDEX_BITS;
    rl_rent_data_t d;
    if ((rc = rl__rents_take(&r->rents, index, gen, &d)) != 0)
        return rc;
    if (rl__clock_now_fp(&rl->clock, d.source) > d.deadline_fp) {
        expired(rl, &d);
        rl__rents_free(&r->rents, index, 1);
        return RL_EEXPIRED;
    }
    uint64_t held = d.held & ~RL_RENT_FLAGS;
    if (d.held & RL_RENT_REDIS) {
        /* Redis first: its answer decides whether this settle happened. */
        uint64_t rid[2] = {r->tag, res->token[1]};
        rc = rl__rsv_exact_settle(rl, &d, rid, actual);
        if (rc == RL_EUNAVAIL) {
            rl__rents_publish(&r->rents, index, &d); /* held again: the same handle retries */
            return rc;
        }
        if (rc == RL_EEXPIRED) {
            gone(rl, &d);
            rl__rents_free(&r->rents, index, 1);
            return rc;
        }
        if (rc != 0) {
            rl__rents_free(&r->rents, index, 0);
            return rc;
        }
    }
    if (!(d.held & RL_RENT_UNBACKED) && actual != held) {
        rl_rkey_t k;
        rc = rl__rkey_resolve_any(rl, d.limit, (rl_keyid_t){.lo = d.id_lo, .hi = d.id_hi}, 0, &k);
        /* The global tier reports the settled amount: the difference is
         * counted as the bucket moves (none when it could not). Not for a
         * reservation Redis holds (exact, tiered): Redis charged it, and
         * sync must not report it again. */
        int count = !(d.held & RL_RENT_REDIS);
        if (rc == 0 && actual > held) {
            if (rl__rkey_debt(rl, &k, actual - held) == 0 && count)
                rl__rkey_count_settle(rl, &k, (int64_t)(actual - held));
        } else if (rc == 0) {
            rl__rkey_refund(rl, &k, held - actual, NULL);
            if (count)
                rl__rkey_count_settle(rl, &k, -(int64_t)(held - actual));
        }
    }
    rl__rents_free(&r->rents, index, 0);
    if (rc != 0)
        return rc;
    uint64_t est = held;
    if (release) {
        rl__reserve_add(r, RL_RSV_RELEASED, 1);
        rl__reserve_add(r, RL_RSV_REFUND_TOKENS, est);
    } else if (actual > est) {
        rl__reserve_add(r, RL_RSV_UP, 1);
        rl__reserve_add(r, RL_RSV_DEBT_TOKENS, actual - est);
    } else if (actual < est) {
        rl__reserve_add(r, RL_RSV_DOWN, 1);
        rl__reserve_add(r, RL_RSV_REFUND_TOKENS, est - actual);
    } else {
        rl__reserve_add(r, RL_RSV_EVEN, 1);
    }
    return 0;
}

int rl_settle(rl_t *rl, rl_reservation_t *res, uint32_t actual)
{
    return finish(rl, res, actual, 0);
}

int rl_release(rl_t *rl, rl_reservation_t *res) { return finish(rl, res, 0, 1); }

/* ------------------------------------------------------------- stats */

int rl_reserve_stats(rl_t *rl, rl_reserve_stats_t *s)
{
    if (rl == NULL || s == NULL)
        return RL_EINVAL;
    int rc = rl__struct_ok(s, s->size, sizeof *s, sizeof *s);
    if (rc == 0)
        rc = rl__fork_check(rl);
    if (rc != 0)
        return rc;
    size_t size = s->size;
    memset(s, 0, sizeof *s);
    s->size = size;
    rl_reserve_t *r = rl->reserve;
    if (r == NULL)
        return 0;
    rl_rent_expiry_t x = rl__reserve_expiry(rl);
    rl__rents_sweep(&r->rents, &x);
    uint64_t c[RL_RSV_N];
    for (int i = 0; i < RL_RSV_N; i++)
        /* relaxed: counters, each exact on its own. */
        c[i] = atomic_load_explicit(&r->c[i], memory_order_relaxed);
    s->reserved = c[RL_RSV_RESERVED];
    s->denied = c[RL_RSV_DENIED];
    s->settled_up = c[RL_RSV_UP];
    s->settled_down = c[RL_RSV_DOWN];
    s->settled_even = c[RL_RSV_EVEN];
    s->released = c[RL_RSV_RELEASED];
    s->expired = c[RL_RSV_EXPIRED];
    s->debt_tokens = c[RL_RSV_DEBT_TOKENS];
    s->refund_tokens = c[RL_RSV_REFUND_TOKENS];
    s->in_flight = rl__rents_in_flight(&r->rents);
    s->capacity = r->rents.n;
    s->full = c[RL_RSV_FULL];
    s->waits = c[RL_RSV_WAITS];
    s->waits_slept = c[RL_RSV_WAITS_SLEPT];
    s->waits_refused = c[RL_RSV_WAITS_REFUSED];
    return 0;
}
