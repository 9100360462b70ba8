/* SPDX-License-Identifier: MIT */
/*
 * rl_reserve_multi: n reservations as one. Validated and their entries
 * claimed before the first charge, so a bad request or a full table
 * charges nothing; a deny gives back what the earlier ones took. Exact
 * and tiered requests are reserved in Redis in their turn (one call each,
 * in order), and released there (one blocking call each) when a later one
 * denies.
 */
#include <string.h>
#include "reserve/reserve.h"
#include "reserve/charge.h"
#include "reserve/exact.h"
#include "base/structsize.h"

#define REQ(i) ((const rl_request_t *)(const void *)((const char *)reqs + (i)*req_size))
#define RES(i) ((rl_reservation_t *)(void *)((char *)res + (i)*res_stride))
#define OUT(i) ((rl_decision_t *)(void *)((char *)out + (i)*out_stride))

/* Each request checked as rl_reserve would, its target resolved: 0 or the
 * first error, *bad its index. */
static int validate(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                    rl_rkey_t *k, rl_keyid_t *kid, size_t *bad)
{
    for (size_t i = 0; i < n; i++) {
        const rl_request_t *r = REQ(i);
        *bad = i;
        if (r->size != req_size)
            return RL_ESIZE;
        int rc = rl__struct_ok(r, r->size, RL_REQUEST_SIZE_MIN, sizeof *r);
        if (rc != 0)
            return rc;
        if (r->key == NULL && r->key_len > 0)
            return RL_EINVAL;
        if (r->key_len == 0 || r->key_len > RL_MAX_KEY_LEN)
            return RL_EKEYLEN;
        if (r->cost == 0)
            return RL_EINVAL;
        kid[i] = rl__keyhash(&rl->kh, r->key, r->key_len);
        if ((rc = rl__rkey_resolve_any(rl, r->limit, kid[i], r->cost, &k[i])) != 0)
            return rc;
        if (rl__rsv_in_redis(&k[i]) && rl__exact_of(rl) == NULL)
            return RL_ENOTSUP;
    }
    return 0;
}

static int check_args(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                      uint32_t ttl_ms, const rl_reservation_t *res, const rl_decision_t *out)
{
    if (rl == NULL || (reqs == NULL && n > 0) || (res == NULL && n > 0) || ttl_ms == 0 ||
        ttl_ms > RL_RESERVE_TTL_MAX_MS)
        return RL_EINVAL;
    if (n > RL_MULTI_MAX)
        return RL_ERANGE;
    if (req_size < RL_REQUEST_SIZE_MIN || (out != NULL && n > 0 && out->size < RL_DECISION_SIZE_MIN))
        return RL_ESIZE;
    if (n > 0 && res->size < sizeof *res)
        return RL_EINVAL;
    int rc = rl__fork_check(rl);
    if (rc == 0 && rl->reserve == NULL)
        rc = RL_ENOTSUP;
    return rc;
}

/* An admitted request's entry published, its handle written. */
static void publish(rl_t *rl, const rl_request_t *r, const rl_rkey_t *k, rl_keyid_t kid,
                    uint64_t bits, uint32_t ttl_ms, uint32_t index, uint64_t gen,
                    rl_reservation_t *v)
{
    rl_rent_data_t d = {
        .id_lo = kid.lo,
        .id_hi = kid.hi,
        .limit = r->limit,
        .held = r->cost | bits,
        .deadline_fp = k->now + (uint64_t)ttl_ms * RL_FP_PER_MS,
        .source = (int32_t)k->p.clock_source,
    };
    rl__rents_publish(&rl->reserve->rents, index, &d);
    v->token[0] = rl->reserve->tag;
    v->token[1] = (gen << RL_RENT_INDEX_BITS) | index;
    v->limit = r->limit;
    v->estimate = r->cost;
    v->ready_in_ms = 0;
}

/* One request admitted, on its key's bucket or in Redis; *bits its
 * entry's held flags. */
static void admit(rl_t *rl, rl_rkey_t *k, uint32_t cost, uint32_t ttl_ms, uint32_t index,
                  uint64_t gen, rl_radmit_t *o, uint64_t *bits)
{
    if (rl__rsv_in_redis(k)) {
        uint64_t rid[2] = {rl->reserve->tag, (gen << RL_RENT_INDEX_BITS) | index};
        (void)rl__rsv_exact_admit(rl, k, cost, ttl_ms, rid, o, bits); /* validated: 0 */
        return;
    }
    rl__rkey_admit(rl, k, cost, 0, o);
    *bits = o->backed ? 0 : RL_RENT_UNBACKED;
}

/* An admitted request of a denied batch given back: its local tokens, and
 * its Redis record (a release Redis does not answer leaves the record to
 * expire there at its estimate). */
static void undo(rl_t *rl, rl_rkey_t *k, rl_keyid_t kid, const rl_request_t *r, uint64_t bits,
                 uint32_t index, uint64_t gen, rl_radmit_t *o)
{
    if (!(bits & RL_RENT_UNBACKED))
        rl__rkey_refund(rl, k, r->cost, o);
    if (bits & RL_RENT_REDIS) {
        uint64_t rid[2] = {rl->reserve->tag, (gen << RL_RENT_INDEX_BITS) | index};
        rl_rent_data_t d = {.id_lo = kid.lo, .id_hi = kid.hi, .limit = r->limit};
        (void)rl__rsv_exact_settle(rl, &d, rid, 0);
    }
}

int rl_reserve_multi(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                     uint32_t ttl_ms, rl_reservation_t *res, rl_decision_t *out,
                     size_t *denied_index)
{
    size_t res_stride = res != NULL ? res->size : 0, out_stride = out != NULL ? out->size : 0;
    size_t bad = 0;
    rl_rkey_t k[RL_MULTI_MAX];
    rl_keyid_t kid[RL_MULTI_MAX];
    uint32_t index[RL_MULTI_MAX];
    uint64_t gen[RL_MULTI_MAX];
    rl_radmit_t o[RL_MULTI_MAX];
    int rc = check_args(rl, reqs, n, req_size, ttl_ms, res, out);
    if (rc == 0)
        rc = validate(rl, reqs, n, req_size, k, kid, &bad);
    size_t claimed = 0;
    if (rc == 0) {
        rl_rent_expiry_t x = rl__reserve_expiry(rl);
        while (claimed < n && rl__rents_claim(&rl->reserve->rents, &x, &index[claimed],
                                              &gen[claimed]))
            claimed++;
        if (claimed < n) {
            rl__reserve_add(rl->reserve, RL_RSV_FULL, 1);
            rc = RL_EFULL;
        }
    }
    if (rc != 0) {
        while (claimed > 0)
            rl__rents_free(&rl->reserve->rents, index[--claimed], 0);
        if (denied_index != NULL)
            *denied_index = bad;
        for (size_t i = 0; out != NULL && i < n && rc != RL_ESIZE && rc != RL_ERANGE; i++)
            rl__rkey_fail(OUT(i));
        return rc;
    }
    size_t denier = n;
    uint64_t bits[RL_MULTI_MAX];
    for (size_t i = 0; i < n && denier == n; i++) {
        admit(rl, &k[i], REQ(i)->cost, ttl_ms, index[i], gen[i], &o[i], &bits[i]);
        if (!o[i].allowed)
            denier = i;
    }
    for (size_t i = 0; i < n; i++) {
        const rl_request_t *r = REQ(i);
        if (denier < n && i < denier) {
            undo(rl, &k[i], kid[i], r, bits[i], index[i], gen[i], &o[i]);
            o[i].allowed = 0;
        }
        if (i <= denier && i < n)
            rl__rkey_count(rl, &k[i], &o[i], r->key, r->key_len);
        if (out != NULL) {
            if (i <= denier)
                rl__rkey_decision(OUT(i), &k[i], &o[i]);
            else
                rl__rkey_fail(OUT(i));
        }
        rl_reservation_t *v = RES(i);
        if (denier < n) {
            rl__rents_free(&rl->reserve->rents, index[i], 0);
            memset(v->token, 0, sizeof v->token);
            continue;
        }
        publish(rl, r, &k[i], kid[i], bits[i], ttl_ms, index[i], gen[i], v);
    }
    rl__reserve_add(rl->reserve, denier < n ? RL_RSV_DENIED : RL_RSV_RESERVED, n);
    if (denied_index != NULL)
        *denied_index = denier;
    return denier == n ? RL_ALLOW : RL_DENY;
}
