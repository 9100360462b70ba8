/* SPDX-License-Identifier: MIT */
/*
 * rl_quota_charge_async: the charge's quota.lua call handed to the caller
 * with a completion, answered on the exact thread by Redis, or by the
 * quota's on_failure as the blocking charge gives it.
 */
#include <string.h>
#include "quota/internal.h"
#include "base/errors.h"
#include "exact/exact.h"
#include "redis/keys.h"

/* What an asynchronous charge carries to its answer (the caller slot holds
 * a copy): the quota as it was when sent, and the journal entry an open
 * quota's degraded answer needs. */
typedef struct async_charge {
    rl_quotas_t *qs;
    rl_quota_cb cb;
    void *ud;
    rl_quota_t q;
    rl_qjentry_t e;
} async_charge_t;
_Static_assert(sizeof(async_charge_t) <= RL_CALL_CTX_MAX, "fits a caller slot's context");

/* On the exact thread (rl_close's answers too): Redis's answer, or the
 * quota's on_failure as the blocking form gives it. */
static void async_done(void *ctx, int status, const redisReply *reply)
{
    const async_charge_t *c = ctx;
    qreply_t p;
    rl__quota_parse_reply(&p, status, reply);
    rl_quota_result_t r;
    rl_quota_result_init(&r);
    if (p.redis_now >= 0)
        rl__quota_learn_skew(c->qs, p.redis_now); /* the next charge names the right periods */
    if (!p.ok) {
        int rc = rl__quota_degraded(c->qs, &c->q, 1, &c->e, &r);
        c->cb(c->ud, rc, &r);
        return;
    }
    rl__quota_count(c->qs, Q_CHARGES, 1);
    if (p.dup)
        rl__quota_count(c->qs, Q_DUPLICATES, 1);
    int allowed = p.allowed ? RL_ALLOW : RL_DENY;
    rl__quota_put_result(&r, allowed, p.dup ? RL_FLAG_DUPLICATE : 0, c->q.amount, (uint64_t)p.used,
               (uint64_t)p.reset);
    c->cb(c->ud, allowed, &r);
}

int rl_quota_charge_async(rl_t *rl, int quota, const void *key, size_t key_len, uint64_t cost,
                          const void *request_id, size_t id_len, rl_quota_cb cb, void *ud)
{
    if (cb == NULL)
        return RL_EINVAL;
    async_charge_t c;
    memset(&c, 0, sizeof c);
    uint32_t slot = 0, gen = 0;
    int rc = rl__quota_begin(rl, quota, key, key_len, NULL, &c.q, &slot, &gen);
    if (rc != 0)
        return rc;
    if ((rc = rl__quota_charge_args(&c.q, request_id, id_len, cost)) != 0)
        return rc;
    rl_quotas_t *qs = rl__quotas_of(rl);
    c.qs = qs;
    c.cb = cb;
    c.ud = ud;
    c.e = (rl_qjentry_t){slot, gen, cost, rl__keyhash(&rl->kh, key, key_len), {0, 0}};
    rl__redis_quota_rid(&rl->kh, request_id, id_len, c.e.rid);
    qnames_t n;
    rl__quota_names(rl, &c.q, c.e.key, c.e.rid, &n);
    rl__quota_name_counters(&n, &c.q, rl__quota_guess_ms(qs));
    qargs_t a;
    rl__quota_args(&n, &c.q, 1, cost, rl__quota_hook_time(qs), &a);
    rl_redis_call_t call = {RL_EXACT_SCRIPT_QUOTA, QA_KEYS, QA_ARGS, a.v, a.l,
                            uv_hrtime() + (uint64_t)qs->timeout_ms * 1000000u};
    /* acquire: pairs with rl__quota_start_replay's release (the caller
     * fully built). */
    rl_redis_caller_t *caller = atomic_load_explicit(&qs->caller_pub, memory_order_acquire);
    if (rl__redis_caller_send(caller, &call, async_done, &c, sizeof c) == 0)
        return RL_PENDING;
    /* Every slot busy (or closing): on_failure answers now, inline, as the
     * blocking form would have when Redis could not answer. */
    return rl__quota_degraded(qs, &c.q, 1, &c.e, NULL);
}
